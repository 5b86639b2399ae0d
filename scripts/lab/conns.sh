#!/usr/bin/env bash
# Connection scale on one core, and what tables sized for a million connections cost a
# small workload. Two parts, both from weir-bench JSON:
#
# 1. `weir-bench conns --conns LIST --seconds S --json` (default 64,1000000 for 60 s): a
#    weir client opens every connection to a weir receiver over the in-process ring pair,
#    sends each a small message round robin at a low total rate, and the receiver checks
#    every connection's bytes (the bench fails on any difference). Reported per row:
#    handshakes/s, the receiver's heap per established connection (and after the data),
#    resident memory per connection, receiver cycles per segment and its ratio over the
#    first row, and the 4 KiB-per-connection heap target.
# 2. `weir-bench e2e --flows 64 --only stack` with the receiver's tables as weir-sink sizes
#    them against `--tables 1000000` (the connection table for a million connections; GRO's
#    table holds one flush window's runs whatever the connections, as in weir-sink and
#    `weir-bench conns`), PAIRS pairs (default 5) in fresh processes, the order alternating (AB, BA,
#    ...); the ratio is the median of the pairs' ratios of receiver cycles per segment,
#    the target at most 1.05x.
#
# Writes docs/lab/conns.jsonl (every row of both parts) and docs/lab/conns.md (the
# fragment scripts/lab/all.sh puts into docs/lab.md). The million-connection row needs
# about 4 GB of memory; the whole run takes 3 to 5 minutes.
# --render renders docs/lab/conns.md again from docs/lab/conns.jsonl without running.
#   scripts/lab/conns.sh [--conns LIST] [--seconds S] [--pairs N] [--tables-seconds S]
#                        [--tables N] [--render] [-- EXTRA weir-bench conns OPTIONS]
. "$(dirname "$0")/common.sh"
conns=64,1000000 seconds=60 pairs=${PAIRS:-5} tsecs=2 tables=1000000 extra=() render=false
while [ $# -gt 0 ]; do
  case $1 in
    --conns) conns=${2:?--conns needs a list}; shift 2 ;;
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --pairs) pairs=${2:?--pairs needs a number}; shift 2 ;;
    --tables-seconds) tsecs=${2:?--tables-seconds needs a number}; shift 2 ;;
    --tables) tables=${2:?--tables needs a number}; shift 2 ;;
    --render) render=true; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "conns.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v jq >/dev/null || { echo "conns.sh: jq is missing: run scripts/setup.sh" >&2; exit 1; }
jsonl="$OUT/conns.jsonl"
if ! $render; then
lab_build
jq -nc --arg rev "$(git rev-parse --short HEAD)" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
  --argjson secs "$seconds" --argjson tsecs "$tsecs" \
  '{bench: "meta", rev: $rev, load_before: $load, seconds: $secs, tables_seconds: $tsecs}' >"$jsonl"
echo "== weir-bench conns --conns $conns --seconds $seconds ${extra[*]}"
/usr/bin/time -f '%e %M' -o "$OUT/.conns.time" \
  "$BENCH" conns --json --conns "$conns" --seconds "$seconds" "${extra[@]}" >"$OUT/.conns.json"
read -r wall maxrss <"$OUT/.conns.time"
rm -f "$OUT/.conns.time"
jq -c --argjson w "$wall" --argjson m "$maxrss" '. + {wall_s: $w, process_max_rss_kib: $m}' \
  "$OUT/.conns.json" | tee -a "$jsonl"
rm -f "$OUT/.conns.json"
echo "== weir-bench e2e --flows 64 --only stack: default tables against --tables $tables, $pairs pairs"
for p in $(seq "$pairs"); do
  # AB in odd pairs, BA in even ones: a drift of the machine's speed does not favour one.
  if [ $((p % 2)) = 1 ]; then order="0 $tables"; else order="$tables 0"; fi
  for t in $order; do
    "$BENCH" e2e --json --flows 64 --only stack --runs 1 --seconds "$tsecs" --tables "$t" 2>/dev/null |
      jq -c --argjson p "$p" 'select(.mode != null) | . + {bench: "e2e-tables", pair: $p}' | tee -a "$jsonl"
  done
done
jq -nc --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '{bench: "meta", load_after: $load}' >>"$jsonl"
fi
python3 - "$OUT" <<'PY'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
every = [json.loads(l) for l in (out / "conns.jsonl").read_text().splitlines() if l.strip()]
meta = {}
for r in every:
    if r.get("bench") == "meta":
        meta.update(r)
rev, load0, load1 = meta.get("rev", "?"), meta.get("load_before", "?"), meta.get("load_after", "?")
seconds, tsecs = meta.get("seconds", "?"), meta.get("tables_seconds", "?")
rows = [r for r in every if r.get("bench") == "conns"]
tab = [r for r in every if r.get("bench") == "e2e-tables"]
HEAP_TARGET = 4096
# The 4 KiB target is per connection at scale: below this the tables' fixed cost, sized
# for the row, dominates (scripts/e2e/conns.sh checks the same at 20,000).
TARGET_FROM = 20000
def n(x):
    return f"{x:,.0f}"
lines = [
    "### Connection scale on one core",
    "",
    f"`weir-bench conns`: a weir client on one lcore opens every connection to a weir receiver "
    f"on the other over the in-process ring pair, then sends each a {rows[0]['message'] if rows else '-'}-byte "
    f"message in turn, {n(rows[0]['rate']) if rows else '-'} messages per second in all, for "
    f"{seconds} s; the receiver checks every byte of every connection against its 4-tuple's pattern, "
    "and the bench fails on a wrong byte, a reset or a count that differs between the two sides. "
    "Heap is what the receiver's lcore allocated from before its stack was built (its tables are "
    "sized for the row's connections) to when every connection was established, and at the end of "
    "the data; RSS is the process's resident memory over the same span (both sides' stacks). "
    f"Rev {rev}, load {load0} before, {load1} after; `scripts/lab/conns.sh` regenerates it.",
    "",
    "| connections | handshakes/s | heap B/conn established | heap B/conn after data | RSS B/conn | receiver cycles/segment | x first row | segments | messages/segment | bytes exact | heap <= 4 KiB/conn |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
]
for r in rows:
    heap_ok = r["heap_per_conn"] <= HEAP_TARGET and r["heap_per_conn_after_data"] <= HEAP_TARGET
    lines.append(
        f"| {n(r['conns'])} | {n(r['handshakes_per_s'])} | {n(r['heap_per_conn'])} | "
        f"{n(r['heap_per_conn_after_data'])} | {n(r['rss_per_conn'])} | {r['cycles_per_segment']:.0f} | "
        f"{r['cycles_vs_first_row']:.2f}x | {n(r['segments'])} | {r['messages'] / max(r['segments'], 1):.2f} | "
        f"{'yes' if r['bytes_exact'] else 'NO'} | "
        f"{('met' if heap_ok else 'not met') if r['conns'] >= TARGET_FROM else '-'} |")
if rows:
    lines += ["", "Receiver cycles per segment are its busy loop iterations' cycles over the data phase's segments: "
              "at this low rate a busy iteration handles few segments, so the loop's fixed cost per iteration "
              "weighs in the figure; and where a connection's next message comes before its last is "
              "acknowledged, the client's Nagle rule (RFC 896) sends them in one segment (messages/segment), "
              "so the rows' segments differ in size.",
              "", f"The heap target (at most 4,096 bytes per connection, established and after the data, the tables "
              f"included) applies from {TARGET_FROM:,} connections; below, the tables' fixed part divided by few "
              "connections dominates.", "", f"The whole run: {rows[-1]['wall_s']:.0f} s wall, {rows[-1]['process_max_rss_kib'] / 1024 / 1024:.1f} GiB "
              "largest resident set (`/usr/bin/time`)."]
if tab:
    pairs = sorted({r["pair"] for r in tab})
    ratios, base, big = [], [], []
    for p in pairs:
        a = [r for r in tab if r["pair"] == p and r["tables"] == 0]
        b = [r for r in tab if r["pair"] == p and r["tables"] != 0]
        if a and b:
            x, y = a[0]["receiver_cycles_per_segment"], b[0]["receiver_cycles_per_segment"]
            base.append(x); big.append(y); ratios.append(y / x)
    if ratios:
        med = statistics.median(ratios)
        big_tables = max(r["tables"] for r in tab)
        lines += [
            "",
            "### Tables sized for a million connections, at 64 flows",
            "",
            f"`weir-bench e2e --flows 64 --only stack` (64 flows interleaved per segment, one round of "
            f"{tsecs} s of data each), with the receiver's connection table as weir-sink sizes it "
            f"(1,024 connections) against `--tables {big_tables}` (a table for {n(big_tables)}; GRO's "
            f"table holds 4,096 runs in both, as weir-sink and `weir-bench conns` keep it for any number "
            f"of connections), {len(ratios)} pairs in fresh processes, the order alternating. "
            "The ratio is the median of the pairs' ratios of receiver cycles per segment.",
            "",
            "| tables | receiver cycles/segment (median) | range |",
            "|---|---:|---|",
            f"| default | {statistics.median(base):.0f} | {min(base):.0f}-{max(base):.0f} |",
            f"| {n(big_tables)} | {statistics.median(big):.0f} | {min(big):.0f}-{max(big):.0f} |",
            "",
            f"Ratio {med:.3f}x (pairs: {', '.join(f'{x:.3f}' for x in ratios)}); target <= 1.05x: "
            f"**{'met' if med <= 1.05 else 'not met'}**.",
        ]
        if med > 1.05:
            lines += [
                "",
                f"Not met by {100 * (med - 1):.1f}%"
                + (", in every pair" if min(ratios) > 1.05 else ", within this machine's pair-to-pair spread but not below the bound")
                + ". The cause is not found (this VM has no performance counters). A million-entry "
                "table spreads the 64 flows' hash-index entries (the connection table's `heads`, "
                "8 MiB) over about one 4 KiB page each, where the default table's index takes 2 "
                "pages, so a TLB miss per lookup was the first suspect; but marking the heap's large "
                "blocks for transparent huge pages (`madvise(MADV_HUGEPAGE)`, tried in `apps::heap` "
                "and not kept) made the million-entry row slower, not faster. The slots themselves "
                "stay compact (the table hands out the lowest free slots first).",
            ]
(out / "conns.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
