#!/usr/bin/env bash
# Runs weir's benchmarks and writes docs/benchmarks.md from their JSON, so that no figure is
# ever typed by hand.
#
#   scripts/benchmarks.sh [--runs N] [--only LIST] [--hugepages] [--splice] [--out FILE]
#   scripts/benchmarks.sh --from DIR [--commit REV] [--only LIST --splice] [--out FILE]
#
# Without --from: builds weir-bench (release), runs `weir-bench gro --json`, `e2e --json`,
# `tcp --json`, `stages --json` and `csum --json` N times each (default 3; LIST picks some
# of gro, e2e, tcp, stages, csum), keeps every run's JSON (stdout, one object per line) and
# stderr (gro's target lines) under ${CARGO_TARGET_DIR:-target}/bench-json/ with a
# meta.json (date, commit and whether the tree was dirty, cores, CPU model, TSC rate,
# load), then renders. --hugepages is passed to gro and e2e (reserve the pages first:
# scripts/setup-hugepages.sh).
#
# With --from DIR: renders DIR's files (gro1.json, gro1.err, e2e1.json, ..., meta.json)
# without running anything. Without a meta.json in DIR, the date is the newest JSON file's
# time, the machine is this one, and the commit is --commit REV (or "unknown").
#
# --splice: renders only the sections of LIST and puts each in place of the same section
# of the existing FILE (appended when FILE has none), keeping the others; a spliced section
# says when, at which commit and on what it was measured.
#
# Every figure in the output is the median over the runs of what each run reports (each run
# already reports medians of its own chunks or rounds). Needs jq; the runs need root and
# DPDK as scripts/test.sh does (scripts/setup.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${RUNS:-3} only="gro,e2e,tcp,stages,csum" from="" commit_arg="" out="docs/benchmarks.md" splice=false
bench_args=()
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=${2:?--runs needs a number}; shift 2 ;;
    --only) only=${2:?--only needs a list}; shift 2 ;;
    --hugepages) bench_args+=(--hugepages); shift ;;
    --from) from=${2:?--from needs a directory}; shift 2 ;;
    --commit) commit_arg=${2:?--commit needs a revision}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    --splice) splice=true; shift ;;
    -h|--help) usage 0 ;;
    *) echo "benchmarks.sh: unknown option $1" >&2; usage 2 ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "--runs takes a positive number, got '$runs'" >&2; exit 2; }
command -v jq >/dev/null || { echo "benchmarks.sh needs jq (apt-get install jq, or scripts/setup.sh)" >&2; exit 1; }

# The TSC rate the kernel measured at boot, in MHz, or nothing.
tsc_mhz() {
  local log
  log=$(dmesg 2>/dev/null || journalctl -k -b --no-pager 2>/dev/null || true)
  grep -oE 'Refined TSC clocksource calibration: [0-9.]+ MHz' <<<"$log" | head -1 | grep -oE '[0-9.]+ MHz' && return
  grep -oE 'tsc: Detected [0-9.]+ MHz' <<<"$log" | head -1 | grep -oE '[0-9.]+ MHz' || true
}

# meta.json for a measurement made now, in this tree.
write_meta() {
  local dir=$1 dirty=false
  [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || dirty=true
  jq -n --arg date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
    --arg commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    --argjson dirty "$dirty" --argjson nproc "$(nproc)" \
    --arg cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" \
    --arg tsc "$(tsc_mhz)" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
    --argjson runs "$runs" --arg args "${bench_args[*]:-}" \
    '{date: $date, commit: $commit, dirty: $dirty, nproc: $nproc, cpu: $cpu,
      tsc: (if $tsc == "" then null else $tsc end), load_start: $load, runs: $runs,
      args: $args}' >"$dir/meta.json"
}

run_all() {
  local dir=$1 bin=${CARGO_TARGET_DIR:-target}/release/weir-bench i kind args
  echo "== building weir-bench (release)"
  cargo build --release -q -p apps --bin weir-bench
  mkdir -p "$dir"
  rm -f "$dir"/*.json "$dir"/*.err
  write_meta "$dir"
  for i in $(seq 1 "$runs"); do
    for kind in gro e2e tcp stages csum; do
      [[ ",$only," == *",$kind,"* ]] || continue
      args=()
      case $kind in gro|e2e) args=("${bench_args[@]}") ;; esac
      echo "== run $i of $runs: weir-bench $kind --json ${args[*]:-}"
      "$bin" "$kind" --json "${args[@]}" >"$dir/$kind$i.json" 2>"$dir/$kind$i.err"
    done
  done
  jq --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '. + {load_end: $load}' "$dir/meta.json" >"$dir/meta.json.new"
  mv "$dir/meta.json.new" "$dir/meta.json"
}

# The runs' files of one benchmark, in run order.
files_of() { ls "$1/$2"[0-9]*.json 2>/dev/null | sort -V; }

# runs_of DIR KIND: sets the caller's `files` to the runs' JSON of `weir-bench KIND`;
# without any, says so in the document and fails (the section is then that line alone).
runs_of() {
  mapfile -t files < <(files_of "$1" "$2")
  [ ${#files[@]} -gt 0 ] && return 0
  echo "No \`weir-bench $2\` JSON in this set of runs."
  echo
  return 1
}

# Shared jq definitions: medians, fixed decimals, first-seen order, grouping.
JQ_LIB='
def median: map(select(. != null)) | sort
  | if length == 0 then null
    elif length % 2 == 1 then .[(length - 1) / 2]
    else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def fmt($d): if . == null then "-" else
  pow(10; $d) as $p | ((. * $p) | round) as $r
  | (($r / $p) | floor | tostring) as $i
  | if $d == 0 then $i
    else ($r % $p | tostring) as $f
      | $i + "." + (if ($d - ($f | length)) > 0 then "0" * ($d - ($f | length)) else "" end) + $f
    end end;
def range_of($d): map(select(. != null)) | if length == 0 then "-"
  else (min | fmt($d)) + "-" + (max | fmt($d)) end;
def uniq_ordered: reduce .[] as $x ([]; if any(.[]; . == $x) then . else . + [$x] end);
def groups(key): . as $all | map(key) | uniq_ordered[] as $k | [$k, ($all | map(select(key == $k)))];
'

# table INTRO KEEP KEY HEAD ALIGN ROW FILE...: the table every section is built of. INTRO
# (a paragraph; none when empty), then over the runs' rows that the jq filter KEEP keeps,
# one line per value of the jq filter KEY in first-seen order: the header HEAD and ALIGN,
# then ROW, a jq expression giving the line from `$k` (the key) and `$g` (the rows with
# that key, from every run); then a blank line.
table() {
  local intro=$1 keep=$2 key=$3 head=$4 align=$5 row=$6
  shift 6
  if [ -n "$intro" ]; then
    echo "$intro"
    echo
  fi
  jq -nr --arg head "$head" --arg align "$align" "$JQ_LIB"'
    [inputs | select('"$keep"')] as $all
    | $head, $align, ($all | groups('"$key"') as [$k, $g] | '"$row"')
  ' "$@"
  echo
}

render_gro() {
  local dir=$1 files
  runs_of "$dir" gro || return 0
  table "Both implementations of a row run interleaved in chunks on the same bursts of mbufs (weir, and
DPDK's \`rte_gro\` in heavyweight mode); ns per segment is the median chunk (TSC), and the
ratio is \`rte_gro\`'s ns over weir's (weir's speed-up), the median of the runs' ratios.
\`rr\`: flows interleaved one segment at a time; \`train\`: bursts of one flow's segments.
Runs: ${#files[@]}." true '[.pattern, .flows, .flush_ns]' \
    "| pattern | flows | window ns | weir ns/seg | rte_gro ns/seg | ratio (range) | weir seg/unit | rte_gro seg/unit |" \
    "|---|---:|---:|---:|---:|---|---:|---:|" \
    '($g | map(select(.impl == "weir"))) as $w
     | ($g | map(select(.impl == "rte_gro"))) as $r
     | "| \($k[0]) | \($k[1]) | \($k[2]) | \($w | map(.ns_per_segment) | median | fmt(1)) | \($r | map(.ns_per_segment) | median | fmt(1)) | **\($w | map(.ratio) | median | fmt(2))x** (\($w | map(.ratio) | range_of(2))) | \($w | map(.segments_per_unit) | median | fmt(1)) | \($r | map(.segments_per_unit) | median | fmt(1)) |"' \
    "${files[@]}"
  # weir at 4,096 flows over 1 flow: the interleaved pair (gro's stderr) and the rows.
  local errs=() f pairs
  for f in "${files[@]}"; do [ -f "${f%.json}.err" ] && errs+=("${f%.json}.err"); done
  pairs=$(for f in "${errs[@]}"; do
    sed -nE 's/^ *\[([^]]+)\] (rr|train), ([0-9]+) ns: weir at 4,096 flows within 3x of 1 flow, measured interleaved: ([0-9.]+)x \(([0-9.]+) vs ([0-9.]+) ns\/seg.*/{"verdict":"\1","pattern":"\2","flush_ns":\3,"ratio":\4}/p' "$f"
  done | jq -sc .)
  echo "weir at 4,096 flows over weir at 1 flow, in ns per segment (within 3x is weir-bench's check). The"
  echo "pair measured interleaved, chunk by chunk, is what the check judges; it is read from gro's stderr,"
  echo "which ${#errs[@]} of the ${#files[@]} runs kept. \"From the rows\" divides the two rows, measured apart."
  echo
  jq -nr --argjson pairs "${pairs:-[]}" "$JQ_LIB"'
    [inputs | . + {run: input_filename}] as $all
    | ($all | map(select(.impl == "weir"))) as $w
    | "| pattern | window ns | measured interleaved (range) | runs within 3x | from the rows |",
      "|---|---:|---|---:|---:|",
      ($w | groups([.pattern, .flush_ns]) as [$k, $g]
       | [($g | map(.run) | uniq_ordered[]) as $run
          | ($g | map(select(.run == $run))) as $gr
          | ($gr | map(select(.flows == 4096)) | first | .ns_per_segment) as $many
          | ($gr | map(select(.flows == 1)) | first | .ns_per_segment) as $one
          | if $many != null and $one != null then $many / $one else null end] as $rows
       | ($pairs | map(select(.pattern == $k[0] and .flush_ns == $k[1]))) as $p
       | select(($rows | median) != null or ($p | length) > 0)
       | "| \($k[0]) | \($k[1]) | \(if ($p | length) > 0 then "**" + ($p | map(.ratio) | median | fmt(2)) + "x** (" + ($p | map(.ratio) | range_of(2)) + ")" else "-" end) | \(if ($p | length) > 0 then "\($p | map(select(.ratio <= 3)) | length) of \($p | length)" else "-" end) | \($rows | median | fmt(2))x |")
  ' "${files[@]}"
  echo
  echo "weir-bench gro's other checks (medians of the runs):"
  echo
  jq -nr "$JQ_LIB"'
    [inputs] as $all
    | def row($p; $f; $w): $all | map(select(.impl == "weir" and .pattern == $p and .flows == $f and .flush_ns == $w));
      def rte($p; $f; $w): $all | map(select(.impl == "rte_gro" and .pattern == $p and .flows == $f and .flush_ns == $w));
      def check($x; $ok): if $x == null then "not measured" elif $ok then "met" else "missed" end;
    "| check | median | verdict |",
    "|---|---:|---|",
    (row("rr"; 1; 100000) | map(.ratio) | median) as $a
    | "| rr, 1 flow, 100 µs: weir >= 1.5x faster than rte_gro | \($a | fmt(2))x | \(check($a; $a != null and $a >= 1.5)) |",
    ((row("rr"; 256; 100000) | map(.ratio) | median) as $b
     | "| rr, 256 flows, 100 µs: weir >= 10x faster than rte_gro | \($b | fmt(2))x | \(check($b; $b != null and $b >= 10)) |"),
    ((256, 4096) as $f
     | (row("train"; $f; 100000) | map(.segments_per_unit) | median) as $s
     | (rte("train"; $f; 100000) | map(.segments_per_unit) | median) as $t
     | "| train, \($f) flows, 100 µs: weir >= 40 segments per unit | \($s | fmt(1)) (rte_gro \($t | fmt(1))) | \(check($s; $s != null and $s >= 40)) |")
  ' "${files[@]}"
  echo
}

render_e2e() {
  local dir=$1 files
  runs_of "$dir" e2e || return 0
  jq -nr "$JQ_LIB"'
    [inputs | . + {run: input_filename}] as $all
    | ($all | map(select(.model != null))) as $h
    | ($all | map(select(.mode != null))) as $rows
    | {"drop": 0, "drop+headers": 1, "stack": 2, "stack --no-gro": 3, "stack --sw-csum": 4} as $order
    | "weir-gen sends to the receiver over a DPDK ring pair, in one process on two lcores. Model: \($h | first | .model // "not recorded")\(if ($h | map(.model) | uniq_ordered | length) > 1 then " (the runs did not all use the same model)" else "" end). Runs: \($rows | map(.run) | uniq_ordered | length), each \($rows | first | .runs) rounds per case. Cycles are TSC cycles of the receiving (or generating) lcore per segment, in the data phase (handshakes and closes left out).",
      "",
      "| flows | mode | M segments/s | Gbit/s | receiver cycles/seg (range) | generator cycles/seg | seg/unit | seg/ACK | retransmits | clean close |",
      "|---:|---|---:|---:|---|---:|---:|---:|---:|---|",
      ($rows | map([.flows, .mode]) | uniq_ordered | sort_by(.[0], ($order[.[1]] // 9))[] as $k
       | ($rows | map(select(.flows == $k[0] and .mode == $k[1]))) as $g
       | "| \($k[0]) | \($k[1]) | \($g | map(.segments_per_s / 1e6) | median | fmt(2)) | \($g | map(.payload_gbit_s) | median | fmt(1)) | \($g | map(.receiver_cycles_per_segment) | median | fmt(1)) (\($g | map(.receiver_cycles_per_segment) | range_of(1))) | \($g | map(.generator_cycles_per_segment) | median | fmt(1)) | \(if ($k[1] | startswith("stack")) and ($k[1] != "stack --no-gro") then ($g | map(.gro_segments_per_unit) | median | fmt(1)) else "-" end) | \(if ($k[1] | startswith("stack")) then ($g | map(.segments_per_ack) | median | fmt(1)) else "-" end) | \($g | map(.retransmits) | median | fmt(0)) | \(if ($g | all(.clean_close)) then "yes" else "no" end) |"),
      "",
      "The stack against the receive loops, per flow count: the median of the runs'\'' ratios of receiver cycles per segment (`drop`: receive and free each burst; `drop+headers`: also read each frame'\''s two header lines, as the pipeline fetches them).",
      "",
      "| flows | stack / drop (range) | stack / (drop+headers) | stack seg/unit |",
      "|---:|---|---:|---:|",
      ($rows | map(.flows) | uniq_ordered | sort[] as $f
       | [($rows | map(.run) | uniq_ordered[]) as $run
          | ($rows | map(select(.flows == $f and .run == $run))) as $r
          | {s: ($r | map(select(.mode == "stack")) | first | .receiver_cycles_per_segment),
             d: ($r | map(select(.mode == "drop")) | first | .receiver_cycles_per_segment),
             h: ($r | map(select(.mode == "drop+headers")) | first | .receiver_cycles_per_segment),
             u: ($r | map(select(.mode == "stack")) | first | .gro_segments_per_unit)}
          | {sd: (if .s != null and .d != null then .s / .d else null end),
             sh: (if .s != null and .h != null then .s / .h else null end), u: .u}] as $q
       | select(($q | map(.sd) | median) != null)
       | "| \($f) | **\($q | map(.sd) | median | fmt(2))x** (\($q | map(.sd) | range_of(2))) | \($q | map(.sh) | median | fmt(2))x | \($q | map(.u) | median | fmt(1)) |")
  ' "${files[@]}"
  echo
  # The checks each run printed (objects with "check"; runs from before them have none):
  # the median of the runs' ratios against the bound; "not run" when no run had the rows.
  # (jq -e judges by the last input's output, so the count is taken over all of them.)
  if jq -ne '[inputs | select(.check != null)] | length > 0' "${files[@]}" >/dev/null 2>&1; then
    echo "The checks, on each run's medians of receiver cycles per segment (flow-count scaling: the stack at 4,096 flows interleaved per segment at most 2x its 64-flow figure, at 65,536 at most 3x; GRO never costs more than it saves: the stack with GRO at most 1.05x \`stack --no-gro\` at every flow count). The ratio is the median of the runs' ratios; a check is met when that median is within its bound."
    echo
    jq -nr "$JQ_LIB"'
      [inputs | select(.check != null) | . + {run: input_filename}] as $c
      | "| check | figure / anchor (median) | ratio (range) | bound | runs met | verdict |",
        "|---|---|---|---:|---:|---|",
        ($c | groups(.check) as [$k, $g]
         | ($g | map(.ratio) | median) as $r
         | ($g | first | .bound) as $b
         | "| \($k) | \($g | map(.figure_cycles_per_segment) | median | fmt(1)) / \($g | map(.anchor_cycles_per_segment) | median | fmt(1)) | \(if $r == null then "-" else "\($r | fmt(2))x (\($g | map(.ratio) | range_of(2)))" end) | \($b)x | \($g | map(select(.met)) | length) of \($g | length) | \(if $r == null then "not run" elif $r <= $b then "met" else "**not met**" end) |")
    ' "${files[@]}"
    echo
  fi
}

render_tcp() {
  local dir=$1 files
  runs_of "$dir" tcp || return 0
  table "In-order receive with its ACK decision, per wire segment (runs of 45 and of 1), and ACK building, on in-memory buffers. Runs: ${#files[@]}." \
    '.side != "send"' .bench \
    "| bench | ns/segment | ns/ACK | segments/ACK |" "|---|---:|---:|---:|" \
    '"| \($k) | \($g | map(.ns_per_segment) | median | fmt(1)) | \($g | map(.ns_per_ack) | median | fmt(1)) | \($g | map(.segments_per_ack) | median | fmt(2)) |"' \
    "${files[@]}"
  # The send side (rows with "side": "send"; runs from before it was measured have none).
  if jq -e 'select(.side == "send")' "${files[@]}" >/dev/null 2>&1; then
    table "The send side on a connection the peer's window and cwnd never limit: ns per data segment in \`poll_tx\` (\`tcp_send_segment\`), and ns per ACK the sender processes, acknowledging two segments each (\`tcp_ack_rx_cumulative\`) or carrying 1-3 SACK blocks of open holes (\`tcp_ack_rx_sack1\`-\`3\`); what each row times: \`apps/src/bench/tcp.rs\`. Each is also given over the receive side's ns per wire segment of the same run (runs of 45, runs of 1): the median of the runs' ratios." \
      '.side == "send"' .bench \
      "| bench | ns/segment | ns/ACK | over receive run45 (range) | over receive run1 (range) |" "|---|---:|---:|---|---|" \
      '"| \($k) | \($g | map(.ns_per_segment) | median | fmt(1)) | \($g | map(.ns_per_ack) | median | fmt(1)) | \($g | map(.vs_receive_run45) | median | fmt(2))x (\($g | map(.vs_receive_run45) | range_of(2))) | \($g | map(.vs_receive_run1) | median | fmt(2))x (\($g | map(.vs_receive_run1) | range_of(2))) |"' \
      "${files[@]}"
  fi
}

render_stages() {
  local dir=$1 files
  runs_of "$dir" stages || return 0
  table "Each receive-path stage timed separately on the same in-memory input (what each row covers: [lab.md](lab.md), \"Per-stage cost\"). Runs: ${#files[@]}." \
    true .stage \
    "| stage | ns/segment | ns/call | ns/ACK |" "|---|---:|---:|---:|" \
    '"| \($k) | \($g | map(.ns_per_segment) | median | fmt(2)) | \($g | map(.ns_per_call) | median | fmt(2)) | \($g | map(.ns_per_ack) | median | fmt(2)) |"' \
    "${files[@]}"
}

render_csum() {
  local dir=$1 files
  runs_of "$dir" csum || return 0
  table "weir's Internet checksum (\`stack::wire::checksum::add\`, then \`fold\`) beside DPDK's \`rte_raw_cksum\` on the same buffers: as dpdk-sys compiles it for weir (-O2), and at -O3 as DPDK builds its libraries. In cache: one buffer summed again and again; out of cache: a 64 MiB set walked in order. GB/s is the median over the runs of each run's median chunk; the ratio is the DPDK function's time over weir's (above 1, weir is faster), the median of the runs' ratios. The target: weir at least as fast in every row. Runs: ${#files[@]}." \
    '.bench == "csum"' '[.len, .cache]' \
    "| bytes | cache | buffers | weir GB/s | rte_raw_cksum GB/s | ratio (range) | rte_raw_cksum -O3 GB/s | ratio (range) | weir at least as fast |" \
    "|---:|---|---:|---:|---:|---|---:|---|---|" \
    '($g | map(.ratio) | median) as $r | ($g | map(.ratio_o3) | median) as $r3
     | "| \($k[0]) | \($k[1]) | \($g | map(.buffers) | median | fmt(0)) | \($g | map(.weir_gbps) | median | fmt(2)) | \($g | map(.rte_raw_cksum_gbps) | median | fmt(2)) | **\($r | fmt(2))x** (\($g | map(.ratio) | range_of(2))) | \($g | map(.rte_raw_cksum_o3_gbps) | median | fmt(2)) | **\($r3 | fmt(2))x** (\($g | map(.ratio_o3) | range_of(2))) | \(if $r >= 1 and $r3 >= 1 then "yes" else "no" end) |"' \
    "${files[@]}"
}

# The sections, in the document's order: key, heading, renderer.
SECTIONS=(
  "gro|## GRO: weir against DPDK's rte_gro (\`weir-bench gro\`)|render_gro"
  "e2e|## End to end: weir-gen to the receiver (\`weir-bench e2e\`)|render_e2e"
  "tcp|## TCP receive and send (\`weir-bench tcp\`)|render_tcp"
  "stages|## Per-stage cost (\`weir-bench stages\`)|render_stages"
  "csum|## Checksum: weir against rte_raw_cksum (\`weir-bench csum\`)|render_csum"
)

# One line on where a spliced section's figures come from.
provenance() {
  local meta=$1/meta.json
  if [ -f "$meta" ]; then
    jq -r '"Measured \(.date) at commit \(.commit)\(if .dirty then " (with uncommitted changes)" else "" end) on \(.nproc) cores, CPU \(.cpu); load average \(.load_start) at the start (this section only: the header above is the other sections'"'"')."' "$meta"
  else
    echo "Measured at a time and commit not recorded (no meta.json)."
  fi
  echo
}

# splice DIR: replaces the sections of $only in $out, keeping everything else.
splice() {
  local dir=$1 entry key heading fn body
  [ -f "$out" ] || { echo "--splice: no $out to splice into" >&2; exit 2; }
  cp "$out" "$out.new"
  for entry in "${SECTIONS[@]}"; do
    IFS='|' read -r key heading fn <<<"$entry"
    [[ ",$only," == *",$key,"* ]] || continue
    body=$( { echo "$heading"; echo; provenance "$dir"; "$fn" "$dir"; } )
    HEADING=$heading BODY=$body awk '
      BEGIN { h = ENVIRON["HEADING"]; b = ENVIRON["BODY"] }
      $0 == h { print b; print ""; skip = 1; done = 1; next }
      skip && /^## / { skip = 0 }
      !skip { print }
      END { if (!done) { print ""; print b } }
    ' "$out.new" | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >"$out.tmp"
    mv "$out.tmp" "$out.new"
  done
  mv "$out.new" "$out"
  echo "spliced $only into $out"
}

render() {
  local dir=$1 meta date commit machine tsc cpu nproc load args runs_line newest entry key heading fn
  meta=$dir/meta.json
  if [ -f "$meta" ]; then
    date=$(jq -r .date "$meta")
    commit=$(jq -r '.commit + (if .dirty then " (with uncommitted changes)" else " (clean tree)" end)' "$meta")
    nproc=$(jq -r .nproc "$meta"); cpu=$(jq -r .cpu "$meta"); tsc=$(jq -r '.tsc // "unknown"' "$meta")
    load=$(jq -r '"load average \(.load_start) at the start" + (if .load_end then ", \(.load_end) at the end" else "" end)' "$meta")
    args=$(jq -r '.args' "$meta")
  else
    newest=$(ls -t "$dir"/*.json | head -1)
    date="$(date -u -r "$newest" '+%Y-%m-%d %H:%M UTC') (the newest JSON file's time)"
    if [ -n "$commit_arg" ]; then
      commit="$(git rev-parse --short "$commit_arg" 2>/dev/null || echo "$commit_arg") (tree state not recorded)"
    else
      commit="unknown (no meta.json; pass --commit)"
    fi
    nproc=$(nproc); cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
    tsc=$(tsc_mhz); tsc=${tsc:-unknown}
    load="not recorded"
    args=""
  fi
  [ -n "$tsc" ] && [ "$tsc" != unknown ] && tsc="$tsc (the kernel's boot calibration)"
  {
    echo "# Benchmarks"
    echo
    echo "Written by \`scripts/benchmarks.sh\` from the benchmarks' JSON; do not edit by hand. To"
    echo "measure again: \`scripts/benchmarks.sh\` (keeps the JSON under \`target/bench-json/\`); to render"
    echo "JSON kept elsewhere: \`scripts/benchmarks.sh --from DIR\`."
    echo
    echo "- Measured: $date"
    echo "- Commit: $commit"
    echo "- Machine: ${nproc} cores (\`nproc\`), CPU ${cpu:-unknown}, TSC ${tsc}"
    echo "- Load: $load"
    [ -z "$args" ] || echo "- Options: \`$args\`"
    echo "- Every figure is the median over the runs of what each run reports; ranges are the runs' minimum and maximum."
    echo
    echo "On a shared or virtual machine absolute figures move between runs; compare the ratios, which come"
    echo "from measurements taken side by side ([decisions/measurement-method.md](decisions/measurement-method.md))."
    echo
    for entry in "${SECTIONS[@]}"; do
      IFS='|' read -r key heading fn <<<"$entry"
      echo "$heading"
      echo
      "$fn" "$dir"
    done
  } | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >"$out.new"
  mv "$out.new" "$out"
  echo "wrote $out"
}

if [ -n "$from" ]; then
  [ -d "$from" ] || { echo "--from: no directory $from" >&2; exit 2; }
  ls "$from"/*.json >/dev/null 2>&1 || { echo "--from: no JSON files in $from" >&2; exit 2; }
  if $splice; then splice "$from"; else render "$from"; fi
else
  dir=${CARGO_TARGET_DIR:-target}/bench-json
  run_all "$dir"
  if $splice; then splice "$dir"; else render "$dir"; fi
fi
