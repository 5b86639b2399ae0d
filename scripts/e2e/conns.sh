#!/usr/bin/env bash
# Many established connections on one core: `weir-bench conns` opens 64, then 20,000
# connections from a weir client to a weir receiver over an in-process ring pair, sends
# each a small message in turn and checks every connection's bytes on both sides (the
# bench fails on a wrong byte, a reset or a count that differs). This script checks its
# accounting and the memory bound, never its speed:
#
# - every row: every connection established, every connection's bytes exact, segments
#   received > 0;
# - the 20,000-connection row: the receiver's heap per established connection, its
#   tables included, at most 4,096 bytes (an idle connection holds no queue storage,
#   `stack::spare`), and still at most 4,096 after the data phase.
#
# The million-connection row is a lab run (`weir-bench conns --conns 64,1000000`, about
# 90 s and 4 GB); this is the same code at a size CI can hold.
#
#   scripts/e2e/conns.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib/e2e.sh
. scripts/lib/e2e.sh
command -v jq >/dev/null || { echo "jq is missing: run scripts/setup.sh" >&2; exit 1; }
BENCH=${CARGO_TARGET_DIR:-target}/release/weir-bench
echo "== building weir-bench (release)"
cargo build --release -q -p apps --bin weir-bench
work=$(mktemp -d /tmp/weir-conns.XXXXXX)
trap 'rm -rf "$work"' EXIT
out=$work/conns.json
if ! "$BENCH" conns --json --conns 64,20000 --seconds 1 --rate 20000 >"$out" 2>"$work/err"; then
  echo "  FAIL weir-bench conns exited non-zero:"; tail -5 "$work/err" | sed 's/^/       /'
  failed=$((failed + 1))
else
  n=0
  while read -r row; do
    n=$((n + 1))
    c=$(jq .conns <<<"$row")
    echo "  $c conns: $(jq -r '"\(.handshakes_per_s | floor) handshakes/s, heap \(.heap_per_conn | floor) B/conn (\(.heap_per_conn_after_data | floor) after data), \(.cycles_per_segment | floor) cycles/segment, \(.bytes) bytes"' <<<"$row")"
    check "$c conns: every connection's bytes exact" eq "$(jq .bytes_exact <<<"$row")" true
    check "$c conns: segments received" gt "$(jq .segments <<<"$row")" 0
    if [ "$c" = 20000 ]; then
      check "$c conns: heap per established connection <= 4096 B" le "$(jq .heap_per_conn <<<"$row")" 4096
      check "$c conns: heap per connection after the data <= 4096 B" le "$(jq .heap_per_conn_after_data <<<"$row")" 4096
    fi
  done <"$out"
  check "a row per connection count" eq "$n" 2
fi
e2e_finish
