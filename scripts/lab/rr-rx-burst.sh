#!/usr/bin/env bash
# Request/response and the receive batch: `weir-bench rr` (64-byte requests and responses,
# client and echo server on two lcores over the ring pair) at each receive batch in
# BURSTS (default "256 32 16": weir-sink's 256, and smaller), alternated run by run,
# ROUNDS rounds (default 3) of every batch, at the shapes CONNS x 1 (default 1,64).
# Writes docs/lab/rr_rx_burst.jsonl (every run's row, with its "rx_burst" and "round") and
# docs/lab/rr_rx_burst.md (medians per shape and batch, and each batch over 256's of the
# same rounds). What it shows is in docs/decisions/rr-bench.md ("The receive batch").
#   scripts/lab/rr-rx-burst.sh [--conns LIST] [--bursts "LIST"] [--seconds S]
. "$(dirname "$0")/common.sh"
conns=1,64
bursts="256 32 16"
secs=2
while [ $# -gt 0 ]; do
  case $1 in
    --conns) conns=${2:?--conns needs a list}; shift 2 ;;
    --bursts) bursts=${2:?--bursts needs a list}; shift 2 ;;
    --seconds) secs=${2:?--seconds needs a number}; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "rr-rx-burst.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
for b in $bursts; do
  case $b in [1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-6]) ;; *)
    echo "rr-rx-burst.sh: a receive batch is 1 to 256, got '$b'" >&2; exit 2 ;; esac
done
lab_build
rounds=${ROUNDS:-3}
rows="$OUT/rr_rx_burst.jsonl"
: >"$rows"
load=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$rounds"); do
  for b in $bursts; do
    echo "== round $r of $rounds, --rx-burst $b"
    "$BENCH" rr --conns "$conns" --burst 1 --runs 1 --seconds "$secs" --rx-burst "$b" --json \
      | grep '"bench":"rr"' | jq -c --argjson b "$b" --argjson r "$r" '. + {rx_burst: $b, round: $r}' \
      | tee -a "$rows"
  done
done
python3 - "$rows" "$OUT/rr_rx_burst.md" "$(git rev-parse --short HEAD)" "$load" "$secs" "$rounds" <<'PY'
import json, statistics, sys
rows_path, md, rev, load, secs, rounds = sys.argv[1:7]
rows = [json.loads(l) for l in open(rows_path) if l.strip()]
bad = sum(r.get("lost", 0) + r.get("duplicates", 0) + r.get("mismatches", 0) for r in rows)
conns = sorted({r["conns"] for r in rows})
bursts = sorted({r["rx_burst"] for r in rows}, reverse=True)
def med(c, b, k):
    v = [r[k] for r in rows if r["conns"] == c and r["rx_burst"] == b]
    return statistics.median(v) if v else None
def ratio(c, b, k):
    # The median of the rounds' ratios against the largest batch of the same round.
    top = bursts[0]
    v = []
    for r in {x["round"] for x in rows}:
        a = [x[k] for x in rows if x["conns"] == c and x["rx_burst"] == top and x["round"] == r]
        o = [x[k] for x in rows if x["conns"] == c and x["rx_burst"] == b and x["round"] == r]
        if a and o and a[0]:
            v.append(o[0] / a[0])
    return statistics.median(v) if v else None
out = [
    f"`weir-bench rr` at each receive batch (`--rx-burst`, both sides), {rounds} rounds "
    f"alternating the batches, {secs} s measured per run, 64-byte requests and responses, one "
    f"transaction in flight per connection; medians of the rounds, and each batch over the "
    f"{bursts[0]}-frame batch of the same round (median of the rounds' ratios). Rev {rev}, load "
    f"at start {load}. Every response checked byte for byte: {bad} lost, duplicated or "
    f"mismatched. `scripts/lab/rr-rx-burst.sh` regenerates it.",
    "",
    "| conns | rx batch | tps | tps over the largest batch | p50 us | p99 us | p99 over the largest batch | client cycles/txn | server cycles/txn |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]
f = lambda x, d=0: "-" if x is None else f"{x:,.{d}f}"
for c in conns:
    for b in bursts:
        out.append(
            f"| {c} | {b} | {f(med(c, b, 'tps'))} | {f(ratio(c, b, 'tps'), 2)}x | "
            f"{f(med(c, b, 'p50_ns') / 1e3 if med(c, b, 'p50_ns') else None, 1)} | "
            f"{f(med(c, b, 'p99_ns') / 1e3 if med(c, b, 'p99_ns') else None, 1)} | "
            f"{f(ratio(c, b, 'p99_ns'), 2)}x | "
            f"{f(med(c, b, 'client_cycles_per_txn'))} | {f(med(c, b, 'server_cycles_per_txn'))} |"
        )
open(md, "w").write("\n".join(out) + "\n")
print("\n".join(out))
if bad:
    sys.exit(3)
PY
