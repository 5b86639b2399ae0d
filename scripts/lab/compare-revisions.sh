#!/usr/bin/env bash
# compare-revisions.sh [--rr] A B: what got slower between two git revisions (field report
# 003 in docs/reference/field-reports.md: find the stage first, then bisect only that
# stage's history).
#
# Each revision's tree is extracted with `git archive` into $WEIR_COMPARE_CACHE/src-COMMIT
# (default /tmp/weir-compare; no worktree is registered in the repository) and `weir-bench`
# is built there in release, all revisions in one target directory ($WEIR_COMPARE_TARGET,
# default $WEIR_COMPARE_CACHE/target: the dependencies are built once); each binary is
# kept in $WEIR_COMPARE_CACHE/bin-COMMIT, so a second comparison of a commit builds
# nothing (delete it to rebuild, e.g. after a toolchain update). The benchmark then runs
# RUNS times per revision, alternately (A B A B A B), to spread machine noise over both.
#
# Default (stages): `weir-bench stages --json`; the table shows the median of each receive
# stage, the ratio B/A, and the stage that got slower the most beyond the noise threshold
# (ratio > 1 + THRESH_PCT/100 and more than THRESH_NS ns slower). Timer checks
# (timer_check, poll_timeout, gro_flush_expired) are compared per call, the other stages
# per segment.
#
# --e2e: bulk data, `weir-bench e2e --json --flows 1,64 --only stack,stack-oldgen --runs 1
# --seconds 2` per run (E2E_FLOWS sets the flow counts; E2E_HUGEPAGES=1 adds --hugepages, as
# compare-kernel.sh runs it); per flow count the medians of the stack sender's generator
# cycles per segment, the receiver's cycles per segment and segments/s, the ratio B/A, and
# per revision the stack sender over the hand-rolled sender of the same runs (the anchor
# `weir-bench e2e` prints beside it): what a change to the send path did to weir-gen's cost.
#
# --rr: request/response, `weir-bench rr --json --conns 1,64 --burst 1 --runs 1 --seconds 2`
# per run (64-byte requests and responses over the ring pair); per shape (connections x
# burst) the medians of transactions/s, p99 latency and client and server cycles per
# transaction, the ratio B/A, and a flag where B is worse (or better) than A by more than
# THRESH_PCT % (fewer transactions/s; more latency or cycles). Every run's accounting
# (lost, duplicated, mismatched transactions) must be zero.
#
# Usage: scripts/lab/compare-revisions.sh [--rr|--e2e] [-n RUNS] A B     (run inside the repository)
# Environment: RUNS (3), THRESH_PCT (10), THRESH_NS (2, stages only), WEIR_COMPARE_CACHE,
# WEIR_COMPARE_TARGET.
# Exit status: 0 compared, 1 a revision could not be built or lacks the subcommand (or a
# run failed), 2 usage, 3 a revision lost, duplicated or mismatched transactions (--rr).
set -euo pipefail

RUNS=${RUNS:-3}
THRESH_PCT=${THRESH_PCT:-10}
THRESH_NS=${THRESH_NS:-2}
CACHE=${WEIR_COMPARE_CACHE:-/tmp/weir-compare}
TARGET=${WEIR_COMPARE_TARGET:-$CACHE/target}
MODE=stages

usage() {
    echo "usage: $0 [--rr|--e2e] [-n RUNS] REV_A REV_B" >&2
    exit 2
}
# --rr or --e2e anywhere among the arguments (getopts knows no long options).
ARGS=()
for a in "$@"; do
    case $a in
        --rr) MODE=rr ;;
        --e2e) MODE=e2e ;;
        *) ARGS+=("$a") ;;
    esac
done
set -- "${ARGS[@]}"
while getopts "n:h" o; do
    case $o in
        n) RUNS=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -eq 2 ]] || usage
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "RUNS must be a positive integer" >&2; exit 2; }
command -v jq >/dev/null || { echo "compare-revisions: needs jq (apt-get install jq)" >&2; exit 1; }

REPO=$(git rev-parse --show-toplevel)
A_NAME=$1
B_NAME=$2
A=$(git -C "$REPO" rev-parse --verify --quiet "$1^{commit}") || { echo "not a revision: $1" >&2; exit 2; }
B=$(git -C "$REPO" rev-parse --verify --quiet "$2^{commit}") || { echo "not a revision: $2" >&2; exit 2; }

# The subcommand MODE needs, and how to find its entry point in a revision's tree.
if [[ $MODE == rr ]]; then
    # `rr::run`, called from weir-bench's main.
    SUB_RE='bench::rr::run' SUB_PATH=apps/src/bin/weir-bench.rs SUB_SINCE=a7abf38
elif [[ $MODE == e2e ]]; then
    # The hand-rolled anchor row (`--only stack-oldgen`) came with weir-gen on the stack.
    SUB_RE='stack-oldgen' SUB_PATH=apps/src/bench/e2e.rs SUB_SINCE=a728b49
else
    # `bench_stages::run` before the programs were laid out by directory, `stages::run` after.
    SUB_RE='(bench_)?stages::run' SUB_PATH=apps/src SUB_SINCE=7694e85
fi
# Both checked before anything is built: a revision from before the subcommand would build
# for minutes and then fail with clap's "unrecognized subcommand".
for r in "$A_NAME:$A" "$B_NAME:$B"; do
    name=${r%:*} rev=${r##*:}
    if ! git -C "$REPO" grep -qE "$SUB_RE" "$rev" -- "$SUB_PATH" 2>/dev/null; then
        echo "compare-revisions: $name (${rev:0:12}) has no 'weir-bench $MODE' (it predates" \
            "the subcommand, added in commit $SUB_SINCE): pick a later revision" >&2
        exit 1
    fi
done

mkdir -p "$CACHE"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/weir-compare.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# build REV NAME: sets BIN to REV's weir-bench: the one kept in $CACHE/bin-COMMIT, or
# else extracts REV's tree (once), builds it and keeps the binary there. (Cargo keeps one
# build of each workspace crate per target directory, whatever tree it came from:
# alternating revisions in one target rebuild them, so the binaries are what is kept.)
build() {
    local rev=$1 name=$2
    local short=${rev:0:12}
    local src=$CACHE/src-$rev kept=$CACHE/bin-$rev/weir-bench
    if [[ -x $kept ]]; then
        echo "compare-revisions: weir-bench at $name ($short): kept from an earlier build ($kept)" >&2
    else
        if [[ ! -f $src/.complete ]]; then
            rm -rf "$src"
            mkdir -p "$src"
            git -C "$REPO" archive --format=tar "$rev" | tar -x -C "$src"
            touch "$src/.complete"
        fi
        # `git archive` dates every file at its commit: a tree older than the last build
        # in $TARGET would look already built to cargo, which decides by modification
        # time, so the files are dated now.
        find "$src" -type f -exec touch {} +
        echo "compare-revisions: building weir-bench at $name ($short) in $TARGET ..." >&2
        if ! (cd "$src" && CARGO_TARGET_DIR=$TARGET cargo build --release --quiet -p apps \
            --bin weir-bench) >"$WORK/build-$short.log" 2>&1; then
            tail -n 30 "$WORK/build-$short.log" >&2
            echo "compare-revisions: the build of $name ($short) failed (log above)" >&2
            return 1
        fi
        mkdir -p "${kept%/*}"
        cp "$TARGET/release/weir-bench" "$kept.tmp"
        mv "$kept.tmp" "$kept"
    fi
    if ! "$kept" "$MODE" --help >/dev/null 2>&1; then
        echo "compare-revisions: $name ($short): 'weir-bench $MODE' is not a subcommand" >&2
        return 1
    fi
    BIN=$kept
}

BIN=
build "$A" "$A_NAME" || exit 1
cp "$BIN" "$WORK/weir-bench-A"
build "$B" "$B_NAME" || exit 1
cp "$BIN" "$WORK/weir-bench-B"

if [[ $MODE == rr ]]; then
    BENCH_ARGS=(rr --json --conns 1,64 --burst 1 --runs 1 --seconds 2)
elif [[ $MODE == e2e ]]; then
    BENCH_ARGS=(e2e --json --flows "${E2E_FLOWS:-1,64}" --only stack,stack-oldgen --runs 1 --seconds 2)
    if [[ ${E2E_HUGEPAGES:-0} == 1 ]]; then BENCH_ARGS+=(--hugepages); fi
else
    BENCH_ARGS=(stages --json)
fi
echo "compare-revisions: weir-bench ${BENCH_ARGS[*]}: $RUNS runs per revision, alternating; load: $(uptime | sed 's/.*load/load/')" >&2
for i in $(seq 1 "$RUNS"); do
    for side in A B; do
        echo "compare-revisions: run $i/$RUNS of $side" >&2
        if ! "$WORK/weir-bench-$side" "${BENCH_ARGS[@]}" >"$WORK/$side-$i.out" 2>"$WORK/$side-$i.err"; then
            tail -n 20 "$WORK/$side-$i.err" >&2
            echo "compare-revisions: weir-bench $MODE failed at $side (its errors above)" >&2
            exit 1
        fi
        # Only the JSON rows (DPDK may log to stdout).
        grep '^{' "$WORK/$side-$i.out" >"$WORK/$side-$i.json" || true
        if [[ ! -s $WORK/$side-$i.json ]]; then
            cat "$WORK/$side-$i.out" >&2
            echo "compare-revisions: weir-bench $MODE printed no JSON row at $side (output above)" >&2
            exit 1
        fi
    done
done

if [[ $MODE == rr ]]; then
    # Rows {shape, metric, a, b, ratio, flag} from the medians of every run's value;
    # "better" says which way each metric improves.
    jq -n -r --arg an "$A_NAME (${A:0:12})" --arg bn "$B_NAME (${B:0:12})" \
        --argjson pct "$THRESH_PCT" \
        --slurpfile a <(cat "$WORK"/A-*.json) --slurpfile b <(cat "$WORK"/B-*.json) '
  def median: sort | if length == 0 then null
    elif length % 2 == 1 then .[length / 2 | floor]
    else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def rr($rows): $rows | map(select(.bench == "rr")) ;
  def shape: "\(.conns)x\(.burst)";
  def metrics: [
    {key: "tps", name: "transactions/s", scale: 1, dec: 0, up: true},
    {key: "p99_ns", name: "p99 us", scale: 1000, dec: 1, up: false},
    {key: "client_cycles_per_txn", name: "client cycles/txn", scale: 1, dec: 0, up: false},
    {key: "server_cycles_per_txn", name: "server cycles/txn", scale: 1, dec: 0, up: false}];
  def num($d): if $d == 0 then (round | tostring)
    else (. * 10 | round) as $n | "\($n / 10 | floor).\($n % 10)" end;
  def f2: (. * 100 | round) as $n
    | "\($n / 100 | floor).\($n % 100 | tostring | if length == 1 then "0" + . else . end)";
  def fmt($x; $d; $w): ($x | num($d)) as $s | (" " * ([0, $w - ($s | length)] | max)) + $s;
  def pad($s; $w): $s + (" " * ([0, $w - ($s | length)] | max));
  def bad($rows): [$rows[] | (.lost // 0) + (.duplicates // 0) + (.mismatches // 0)] | add;
  rr($a) as $ra | rr($b) as $rb
  | ($ra | map(shape) | reduce .[] as $s ([]; if index([$s]) then . else . + [$s] end)) as $shapes
  | [ $shapes[] as $s | metrics[] as $m
      | ($ra | map(select(shape == $s) | .[$m.key]) | median) as $va
      | ($rb | map(select(shape == $s) | .[$m.key]) | median) as $vb
      | select($va != null and $vb != null)
      | (if $va > 0 then $vb / $va else null end) as $r
      | {shape: $s, m: $m, a: ($va / $m.scale), b: ($vb / $m.scale), ratio: $r,
         worse: ($r != null and (if $m.up then $r < 1 - $pct / 100 else $r > 1 + $pct / 100 end)),
         better: ($r != null and (if $m.up then $r > 1 + $pct / 100 else $r < 1 - $pct / 100 end))} ] as $rows
  | ("A = " + $an), ("B = " + $bn),
    (pad("conns x burst"; 15) + pad("metric"; 19) + "            A            B   ratio B/A"),
    ($rows[] | pad(.shape; 15) + pad(.m.name; 19) + fmt(.a; .m.dec; 13) + fmt(.b; .m.dec; 13)
       + (if .ratio then "        " + (.ratio | f2) else "           -" end)
       + (if .worse then "  WORSE" elif .better then "  better" else "" end)),
    ("accounting (lost + duplicated + mismatched transactions, all runs): A \(bad($ra)), B \(bad($rb))"),
    ([$rows[] | select(.worse)] | max_by(if .m.up then 1 / .ratio else .ratio end)) as $w
  | if $w == null then
      "nothing got worse beyond noise (\($pct)%)"
    else
      "worse the most: \($w.shape) \($w.m.name): \($w.a | num($w.m.dec)) -> \($w.b | num($w.m.dec)) (ratio B/A \($w.ratio | f2))"
    end
'
    BAD=$(cat "$WORK"/A-*.json "$WORK"/B-*.json | jq -s '[.[] | select(.bench == "rr") | (.lost // 0) + (.duplicates // 0) + (.mismatches // 0)] | add')
    if [[ $BAD != 0 ]]; then
        echo "compare-revisions: $BAD transactions lost, duplicated or mismatched (see the accounting line): a correctness failure, not noise" >&2
        exit 3
    fi
    exit 0
fi

if [[ $MODE == e2e ]]; then
    jq -n -r --arg an "$A_NAME (${A:0:12})" --arg bn "$B_NAME (${B:0:12})" \
        --slurpfile a <(cat "$WORK"/A-*.json) --slurpfile b <(cat "$WORK"/B-*.json) '
  def median: sort | if length == 0 then null
    elif length % 2 == 1 then .[length / 2 | floor]
    else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def rows($r; $mode; $f): $r | map(select(.mode == $mode and .flows == $f));
  def med($r; $mode; $f; $k): rows($r; $mode; $f) | map(.[$k]) | median;
  def f1: (. * 10 | round) as $n | "\($n / 10 | floor).\($n % 10)";
  def f2: (. * 100 | round) as $n
    | "\($n / 100 | floor).\($n % 100 | tostring | if length == 1 then "0" + . else . end)";
  def fmt($s; $w): (" " * ([0, $w - ($s | length)] | max)) + $s;
  def pad($s; $w): $s + (" " * ([0, $w - ($s | length)] | max));
  def metrics: [
    {key: "generator_cycles_per_segment", name: "sender cycles/seg"},
    {key: "receiver_cycles_per_segment", name: "receiver cycles/seg"},
    {key: "segments_per_s", name: "M segments/s", scale: 1e6}];
  ($a | map(select(.mode == "stack") | .flows) | unique) as $flows
  | ("A = " + $an), ("B = " + $bn),
    (pad("flows"; 7) + pad("metric"; 22) + fmt("A"; 10) + fmt("B"; 10) + fmt("B/A"; 8)),
    ($flows[] as $f | metrics[] as $m
      | (med($a; "stack"; $f; $m.key) / ($m.scale // 1)) as $va
      | (med($b; "stack"; $f; $m.key) / ($m.scale // 1)) as $vb
      | select($va != null and $vb != null)
      | pad("\($f)"; 7) + pad($m.name; 22) + fmt($va | f1; 10) + fmt($vb | f1; 10)
        + fmt(if $va > 0 then $vb / $va | f2 else "-" end; 8)),
    ("stack sender over the hand-rolled sender (generator cycles/seg, medians of the same runs):"),
    ($flows[] as $f
      | [$a, $b] | map(
          (med(.; "stack"; $f; "generator_cycles_per_segment")) as $s
          | (med(.; "stack, hand-rolled sender"; $f; "generator_cycles_per_segment")) as $h
          | if $s != null and $h != null and $h > 0 then "\($s / $h | f2)x" else "-" end) as [$ra, $rb]
      | pad("\($f)"; 7) + "A " + $ra + ", B " + $rb),
    ("clean close in every run: " + ([$a[], $b[] | select(.flows != null) | .clean_close] | all | tostring))
'
    exit 0
fi

# One object per stage: {stage, unit, a, b} from the medians of every run's value.
jq -n -r --arg an "$A_NAME (${A:0:12})" --arg bn "$B_NAME (${B:0:12})" \
    --argjson pct "$THRESH_PCT" --argjson ns "$THRESH_NS" \
    --slurpfile a <(cat "$WORK"/A-*.json) --slurpfile b <(cat "$WORK"/B-*.json) '
  def median: sort | if length == 0 then null
    elif length % 2 == 1 then .[length / 2 | floor]
    else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def val: if has("ns_per_call") then .ns_per_call else .ns_per_segment end;
  def unit: if has("ns_per_call") then "ns/call" else "ns/seg" end;
  def meds($rows): $rows | group_by(.stage)
    | map({key: .[0].stage, value: {v: (map(val) | median), unit: (.[0] | unit)}})
    | from_entries;
  def f2: (. * 100 | round) as $n
    | "\($n / 100 | floor).\($n % 100 | tostring | if length == 1 then "0" + . else . end)";
  def fmt($x; $w): ($x | f2) as $s
    | (" " * ([0, $w - ($s | length)] | max)) + $s;
  def pad($s; $w): $s + (" " * ([0, $w - ($s | length)] | max));
  meds($a) as $ma | meds($b) as $mb
  | ($a | map(.stage) | reduce .[] as $s ([]; if index([$s]) then . else . + [$s] end)) as $order
  | [$order[] | select($mb[.] != null)
     | {stage: ., unit: $ma[.].unit, a: $ma[.].v, b: $mb[.].v}
     | .ratio = (if .a > 0 then .b / .a else null end)] as $rows
  | ("A = " + $an), ("B = " + $bn),
    (pad("stage"; 18) + pad("unit"; 8) + "       A ns       B ns   ratio"),
    ($rows[] | pad(.stage; 18) + pad(.unit; 8) + fmt(.a; 11) + fmt(.b; 11)
       + (if .ratio then fmt(.ratio; 8) else "       -" end)),
    ([$rows[] | select(.stage != "total" and .ratio != null
        and .ratio > 1 + $pct / 100 and (.b - .a) > $ns)] | max_by(.ratio)) as $w
  | if $w == null then
      "no stage got slower beyond noise (> \($pct)% and > \($ns) ns)"
    else
      "slower the most: \($w.stage): \($w.a | f2) -> \($w.b | f2) \($w.unit) (x\($w.ratio | f2), +\($w.b - $w.a | f2) ns)"
    end
'
