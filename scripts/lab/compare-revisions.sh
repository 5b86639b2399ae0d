#!/usr/bin/env bash
# compare-revisions.sh A B: which receive-path stage got slower between two git revisions
# (field report 003 in docs/reference/field-reports.md: find the stage first, then bisect
# only that stage's history).
#
# Each revision is checked out into its own temporary worktree (git worktree add --detach)
# and `weir-bench` is built there in release, with a target directory per commit (kept in
# $WEIR_COMPARE_CACHE, default /tmp/weir-compare, so a second comparison reuses the
# builds). `weir-bench stages --json` then runs RUNS times per revision, alternately
# (A B A B A B), to spread machine noise over both; the table shows the median of each
# stage, the ratio B/A, and the stage that got slower the most beyond the noise threshold
# (ratio > 1 + THRESH_PCT/100 and more than THRESH_NS ns slower). Timer checks
# (timer_check, poll_timeout, gro_flush_expired) are compared per call, the other stages
# per segment.
#
# Usage: scripts/lab/compare-revisions.sh [-n RUNS] A B     (run inside the repository)
# Environment: RUNS (3), THRESH_PCT (10), THRESH_NS (2), WEIR_COMPARE_CACHE.
# Exit status: 0 compared, 1 a revision could not be built or has no `weir-bench stages`,
# 2 usage.
set -euo pipefail

RUNS=${RUNS:-3}
THRESH_PCT=${THRESH_PCT:-10}
THRESH_NS=${THRESH_NS:-2}
CACHE=${WEIR_COMPARE_CACHE:-/tmp/weir-compare}

usage() {
    echo "usage: $0 [-n RUNS] REV_A REV_B" >&2
    exit 2
}
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

# Both checked before anything is built: a revision from before the subcommand would build
# for minutes and then fail with clap's "unrecognized subcommand".
for r in "$A_NAME:$A" "$B_NAME:$B"; do
    name=${r%:*} rev=${r##*:}
    # The subcommand's entry point, wherever the revision keeps it (`bench_stages::run`
    # before the programs were laid out by directory, `stages::run` after).
    if ! git -C "$REPO" grep -qE '(bench_)?stages::run' "$rev" -- apps/src 2>/dev/null; then
        echo "compare-revisions: $name (${rev:0:12}) has no 'weir-bench stages' (it predates" \
            "the subcommand, added in commit 7694e85): pick a later revision" >&2
        exit 1
    fi
done

mkdir -p "$CACHE"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/weir-compare.XXXXXX")
WORKTREES=()
cleanup() {
    for w in "${WORKTREES[@]}"; do
        git -C "$REPO" worktree remove --force "$w" 2>/dev/null || rm -rf "$w"
    done
    rm -rf "$WORK"
    git -C "$REPO" worktree prune 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# build REV NAME: checks REV out, builds weir-bench, sets BIN to the binary's path. Not
# called in a subshell: WORKTREES must reach the cleanup.
build() {
    local rev=$1 name=$2
    local short=${rev:0:12}
    local wt=$WORK/wt-$short
    local target=$CACHE/target-$short
    if [[ ! -d $wt ]]; then
        git -C "$REPO" worktree add --detach --quiet "$wt" "$rev" >&2
        WORKTREES+=("$wt")
    fi
    echo "compare-revisions: building weir-bench at $name ($short) in $target ..." >&2
    if ! (cd "$wt" && CARGO_TARGET_DIR=$target cargo build --release --quiet -p apps \
        --bin weir-bench) >"$WORK/build-$short.log" 2>&1; then
        tail -n 30 "$WORK/build-$short.log" >&2
        echo "compare-revisions: the build of $name ($short) failed (log above)" >&2
        return 1
    fi
    local bin=$target/release/weir-bench
    if ! "$bin" stages --help >/dev/null 2>&1; then
        echo "compare-revisions: $name ($short): 'weir-bench stages' is not a subcommand" >&2
        return 1
    fi
    BIN=$bin
}

BIN=
build "$A" "$A_NAME" || exit 1
# Copy: a later build in the same target directory (same commit) must not swap the binary.
cp "$BIN" "$WORK/weir-bench-A"
build "$B" "$B_NAME" || exit 1
cp "$BIN" "$WORK/weir-bench-B"

echo "compare-revisions: $RUNS runs per revision, alternating; load: $(uptime | sed 's/.*load/load/')" >&2
for i in $(seq 1 "$RUNS"); do
    for side in A B; do
        echo "compare-revisions: run $i/$RUNS of $side" >&2
        if ! "$WORK/weir-bench-$side" stages --json >"$WORK/$side-$i.json"; then
            echo "compare-revisions: weir-bench stages failed at $side" >&2
            exit 1
        fi
    done
done

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
