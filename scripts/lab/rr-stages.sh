#!/usr/bin/env bash
# Field report 003 for transactions: the answering side's cost per 64-byte request/response
# transaction, by stage (parse, GRO, TCP receive, application, TCP send, frame build,
# timers), from `weir-bench rr-stages --json` run RUNS times (default 3) in fresh processes.
# Writes docs/lab/rr_stages.jsonl (every run's rows) and docs/lab/rr_stages.md (the median
# per stage and connection count, and each stage's share), the fragment scripts/lab/all.sh
# puts into docs/lab.md.
#   scripts/lab/rr-stages.sh [--conns LIST]        (LIST default 1,64)
. "$(dirname "$0")/common.sh"
conns=1,64
while [ $# -gt 0 ]; do
  case $1 in
    --conns) conns=${2:?--conns needs a list}; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "rr-stages.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
lab_build
runs=${RUNS:-3}
: >"$OUT/rr_stages.jsonl"
for r in $(seq "$runs"); do
  echo "== run $r of $runs"
  "$BENCH" rr-stages --conns "$conns" --json | tee -a "$OUT/rr_stages.jsonl"
done
python3 - "$OUT" "$runs" "$(git rev-parse --short HEAD)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, pathlib, statistics, sys
out, runs, rev, load = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
every = [json.loads(l) for l in (out / "rr_stages.jsonl").read_text().splitlines() if l.strip()]
rows = [r for r in every if r.get("gro_on", True)]
off = [r for r in every if not r.get("gro_on", True)]
stages = ["parse", "gro", "tcp_rx", "app", "tcp_send", "frame_build", "timers"]
what = {
    "parse": "parse (software checksums)",
    "gro": "GRO (each request's PSH ends its run)",
    "tcp_rx": "TCP receive (the request, and the ACK of the last answer)",
    "app": "application (events, request read)",
    "tcp_send": "TCP send (answer queued)",
    "frame_build": "frame build (`poll_tx`: segment, piggybacked ACK, checksums)",
    "timers": "timers (`handle_timeout`, GRO flush, deadlines)",
}
conns = sorted({r["conns"] for r in rows})
med = {c: {s: statistics.median(r[f"{s}_ns"] for r in rows if r["conns"] == c) for s in stages + ["total"]} for c in conns}
lines = [
    "### Per-stage cost per transaction (field report 003)",
    "",
    f"The answering side of one 64-byte request/response, split by stage: `weir-bench rr-stages` "
    f"({runs} runs in fresh processes, medians; rev {rev}, load {load}). In memory, one thread: "
    "a client pipeline sends one request per connection per round, the server's stages are timed "
    "apart, every answer is counted. `scripts/lab/rr-stages.sh` regenerates it.",
    "",
    "| stage | " + " | ".join(f"{c} conn{'s' if c > 1 else ''}: ns | share" for c in conns) + " |",
    "|---|" + "---:|---:|" * len(conns),
]
for s in stages + ["total"]:
    cells = []
    for c in conns:
        v, t = med[c][s], med[c]["total"]
        cells += [f"{v:.1f}", f"{100 * v / t:.0f}%" if t else "-"]
    name = "**total**" if s == "total" else what[s]
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
big = {c: max(stages, key=lambda s: med[c][s]) for c in conns}
if off:
    med_off = {c: {s: statistics.median(r[f"{s}_ns"] for r in off if r["conns"] == c) for s in ["gro", "total"]} for c in conns}
    lines += ["", "GRO against GRO off (the stage then fills one segment per frame for TCP, as the pipeline does): " + "; ".join(
        f"{c} conn{'s' if c > 1 else ''}: {med[c]['gro']:.1f} against {med_off[c]['gro']:.1f} ns"
        for c in conns) + ". A request ends in PSH and nothing is held, so GRO hands it on without a lookup. "
        "(Totals of separate runs differ by more than GRO's share; compare stages.)"]
lines += ["", "Largest stage: " + "; ".join(f"{c} conn{'s' if c > 1 else ''}: {what[big[c]]}" for c in conns) + "."]
(out / "rr_stages.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
