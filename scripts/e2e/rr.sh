#!/usr/bin/env bash
# Request/response on weir at both ends: `weir-bench rr` runs a weir client on one lcore
# and weir-serve's echo engine (or its fixed-size answerer) on the other, joined by an
# in-process ring port pair, and checks every answer byte for byte. This script checks its
# accounting, never its speed:
#
# - shapes: 1 and 64 connections, 1 and 16 transactions in flight each, 64-byte requests
#   and responses (the echo); 100-byte requests answered with 3,000 bytes and 5,000-byte
#   requests answered with 10 (the fixed-size answerer, responses spanning segments and
#   requests spanning segments);
# - the same through the impairment stage on both stacks' receive side (loss 1%,
#   reordering 2%, duplication 1%, corruption 0.1%, seeded): every transaction must still
#   be answered exactly once, and the stacks must have retransmitted;
# - every row: transactions > 0 in the measured phase, 0 lost (sent and never answered
#   after the drain), 0 duplicate bytes (answers no request asked for), 0 mismatched
#   answers; segments per transaction > 0.
#
# No root-only devices: the ring pair is in-process (DPDK with --no-huge, --no-pci).
# About 40 s here.
#
#   scripts/e2e/rr.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib/e2e.sh
. scripts/lib/e2e.sh
command -v jq >/dev/null || { echo "jq is missing: run scripts/setup.sh" >&2; exit 1; }
BENCH=${CARGO_TARGET_DIR:-target}/release/weir-bench
echo "== building weir-bench (release)"
cargo build --release -q -p apps --bin weir-bench
work=$(mktemp -d /tmp/weir-rr.XXXXXX)
trap 'rm -rf "$work"' EXIT

# rows NAME ARGS...: runs weir-bench rr once per shape; checks each row's accounting.
rows() {
  local name=$1; shift
  local out=$work/$name.json
  if ! "$BENCH" rr --json --runs 1 --seconds "${RR_SECONDS:-0.5}" --warmup 0.1 "$@" >"$out" 2>"$work/$name.err"; then
    echo "  FAIL $name: weir-bench rr exited non-zero:"; tail -5 "$work/$name.err" | sed 's/^/       /'
    failed=$((failed + 1)); return
  fi
  local n=0 row
  while read -r row; do
    n=$((n + 1))
    local shape
    shape=$(jq -r '"\(.conns) conns x \(.burst) in flight, \(.request) B -> \(.response) B"' <<<"$row")
    echo "  $name, $shape: $(jq -r '"\(.transactions) transactions, \(.tps | floor) txn/s, p99 \(.p99_ns / 1000 | floor) us, \(.segments_per_txn * 100 | floor / 100) segments/txn, \(.retransmits) retransmits"' <<<"$row")"
    check "$name $shape: transactions completed" gt "$(jq .transactions <<<"$row")" 0
    check "$name $shape: none lost" eq "$(jq .lost <<<"$row")" 0
    check "$name $shape: none answered twice" eq "$(jq .duplicates <<<"$row")" 0
    check "$name $shape: every answer byte for byte" eq "$(jq .mismatches <<<"$row")" 0
    check "$name $shape: segments counted" gt "$(jq .segments_per_txn <<<"$row")" 0
    [ "${RR_EXPECT_RTX:-0}" = 1 ] && check "$name $shape: the stacks retransmitted" gt "$(jq .retransmits <<<"$row")" 0
  done <"$out"
  check "$name: a row per shape" eq "$n" "${RR_ROWS:-4}"
}

echo "== clean"
rows echo --conns 1,64 --burst 1,16
RR_ROWS=1 rows answer-long --conns 4 --burst 4 --request 100 --response 3000
RR_ROWS=1 rows answer-short --conns 4 --burst 4 --request 5000 --response 10
echo "== impaired (loss 1%, reorder 2%, dup 1%, corrupt 0.1% on both receive sides)"
RR_EXPECT_RTX=1 RR_SECONDS=1 rows impaired --conns 1,64 --burst 1,16 \
  --impair loss=1%,reorder=2%,dup=1%,corrupt=0.1%,seed=11
e2e_finish
