#!/usr/bin/env bash
# Where the extra cycles of more flows go: `weir-bench stages --flows 64,4096 --train 1
# --json` (flows interleaved one segment at a time, as `weir-bench e2e` sends them, so no
# GRO run gathers more than one segment at either count) run RUNS times (default 3) in
# fresh processes. Writes docs/lab/stages_flows.jsonl (every run's rows) and
# docs/lab/stages_flows.md (the median per stage and flow count, each stage's cost at the
# larger count over the smaller's, and its share of the difference), the fragment
# scripts/lab/all.sh puts into docs/lab.md.
#   scripts/lab/stages-flows.sh [--flows LIST] [--train N]   (LIST default 64,4096; N 1)
. "$(dirname "$0")/common.sh"
flows=64,4096 train=1
while [ $# -gt 0 ]; do
  case $1 in
    --flows) flows=${2:?--flows needs a list}; shift 2 ;;
    --train) train=${2:?--train needs a number}; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "stages-flows.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
lab_build
runs=${RUNS:-3}
: >"$OUT/stages_flows.jsonl"
for r in $(seq "$runs"); do
  echo "== run $r of $runs"
  "$BENCH" stages --flows "$flows" --train "$train" --json | tee -a "$OUT/stages_flows.jsonl"
done
python3 - "$OUT" "$runs" "$(git rev-parse --short HEAD)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, pathlib, statistics, sys
out, runs, rev, load = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
rows = [json.loads(l) for l in (out / "stages_flows.jsonl").read_text().splitlines() if l.strip()]
if not rows:
    sys.exit("stages-flows.sh: no rows in stages_flows.jsonl")
train = rows[0]["train"]
counts = sorted({r["flows"] for r in rows})
stages = ["parse", "gro", "tcp", "ack_build", "transmit", "timer_check"]
what = {
    "parse": "parse (`wire::parse_into`, NIC-verified checksums)",
    "gro": "GRO (`handle_segment`, `end_of_burst`; TCP's time taken out)",
    "tcp": "TCP (`handle_segment` in GRO's callback, then events and `recv`)",
    "ack_build": "ACK build (`poll_tx`, software checksums)",
    "transmit": "transmit (the ACKs into an in-memory queue)",
    "timer_check": "timer check (`handle_timeout`, nothing due, one call per burst)",
}
def med(f, s):
    v = [r["ns_per_segment"] for r in rows if r["flows"] == f and r["stage"] == s]
    return statistics.median(v) if v else float("nan")
m = {f: {s: med(f, s) for s in stages + ["total", "gro_flush_expired"]} for f in counts}
lo, hi = counts[0], counts[-1]
extra = m[hi]["total"] - m[lo]["total"]
name = lambda f: f"{f:,} flows"
lines = [
    f"### Where the cycles of more flows go (`weir-bench stages --flows {','.join(map(str, counts))} --train {train}`)",
    "",
    f"The receive path's stages on the same in-memory input at {' and '.join(name(f) for f in counts)}, the flows "
    f"interleaved {'one segment' if train == 1 else f'{train} segments'} at a time (as `weir-bench e2e` sends them), "
    f"ns per segment ({runs} runs in fresh processes, medians; each run's shapes take turns; rev {rev}, load {load}). "
    "One thread, no cross-core traffic: what grows is the per-flow state that no longer stays in cache. "
    "(Cache misses per stage need a PMU, which this virtual machine does not expose to `perf`; the split is by time.) "
    "`scripts/lab/stages-flows.sh` regenerates it.",
    "",
    "| stage | " + " | ".join(f"{name(f)}: ns/seg" for f in counts) + f" | {name(hi)} over {name(lo)} | share of the difference |",
    "|---|" + "---:|" * len(counts) + "---:|---:|",
]
for s in stages + ["total"]:
    a, b = m[lo][s], m[hi][s]
    ratio = f"{b / a:.2f}x" if a > 0 else "-"
    share = f"{100 * (b - a) / extra:.0f}%" if s != "total" and extra > 0 else ("100%" if s == "total" else "-")
    label = "**total**" if s == "total" else what[s]
    lines.append(f"| {label} | " + " | ".join(f"{m[f][s]:.1f}" for f in counts) + f" | {ratio} | {share} |")
grow = max(stages, key=lambda s: m[hi][s] - m[lo][s])
lines += ["",
    f"The total at {name(hi)} is {m[hi]['total'] / m[lo]['total']:.2f}x its figure at {name(lo)}; "
    f"{what[grow].split(' (')[0]} grows the most ({m[lo][grow]:.1f} to {m[hi][grow]:.1f} ns). "
    "(Each figure is a median of its own, so the shares need not add up to 100%.) "
    f"Outside the total, flushing every flow's held run of 16 when all are due (`Gro::flush_expired`) costs "
    f"{m[lo]['gro_flush_expired']:.1f} and {m[hi]['gro_flush_expired']:.1f} ns per segment flushed."]
(out / "stages_flows.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
