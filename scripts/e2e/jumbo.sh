#!/usr/bin/env bash
# End-to-end test of jumbo frames: weir-sink with --mtu 9000 on net_tap, the kernel at
# MTU 9000 sending 8,948-byte segments (MSS 8,960 less the timestamp option). net_tap
# has scattered receive, so each frame arrives as a chain of 2,048-byte mbufs, which weir
# parses from its first segment and hands on as one buffer per segment
# (docs/decisions/chained-mbufs.md). Checks: the socat digests over IPv4 and IPv6, bytes
# in order, frames averaging over 8,000 bytes, no chained frame dropped, every mbuf back;
# a second run with --gro-max-bytes 524280 (runs beyond 64 KiB; the units per segment are
# printed, not checked: they depend on how bursts arrive); and an --mtu out of range. Needs root and /dev/net/tun; without them it fails with a clear message.
#
#   scripts/e2e/jumbo.sh            (about 20 s)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh
# Names and addresses of this test's own (other tests may run at the same time).
WEIR_NS_PREFIX=wj WEIR_TAP=wjtap0
WEIR_IP4=198.18.44.1 PEER_IP4=198.18.44.2
WEIR_IP6=2001:db8:44::1 PEER_IP6=2001:db8:44::2
MB=64

# shellcheck source=scripts/lib/e2e.sh
. scripts/lib/e2e.sh
e2e_init socat jq ping sha256sum ss

WEIR_ARGS=(--tap-iface "$WEIR_TAP" --ip "$WEIR_IP4" --ip "$WEIR_IP6" --mtu 9000)

# The kernel's end of the tap at MTU 9000 too (net_tap sets it with the port's MTU; set
# here so the test does not depend on that), then one transfer per family. The MSS the
# kernel uses is read while a connection is open.
jumbo_body() {
  ip -n "$WEIR_NS" link set "$WEIR_TAP" mtu 9000
  echo "$(ip -n "$WEIR_NS" -o link show "$WEIR_TAP" | grep -o 'mtu [0-9]*')" >"$work/$1.kmtu"
  ip netns exec "$WEIR_NS" sh -c "sleep 3 | socat -u - TCP4:$WEIR_IP4:5001" &
  local probe=$!
  sleep 1
  ip netns exec "$WEIR_NS" ss -Htin dst "$WEIR_IP4" dport 5001 | grep -o ' mss:[0-9]*' | head -1 | tr -d ' ' >"$work/$1.mss" || true
  wait "$probe"
  socat_file "$1" "$MB" "TCP4:$WEIR_IP4:5002"
  cp "$work/$1.sha" "$work/$1.sha4"
  socat_file "$1" "$MB" "TCP6:[$WEIR_IP6]:5002"
}

for run in jumbo jumbo_big; do
  extra=()
  [ "$run" = jumbo_big ] && extra=(--gro-max-bytes 524280)
  echo "== case: --mtu 9000 ${extra[*]}, socat ${MB} MB over IPv4 and over IPv6"
  BODY=jumbo_body session "$run" "${WEIR_ARGS[@]}" "${extra[@]}"
  check "$run: the kernel's tap is at MTU 9000" eq "$(cat "$work/$run.kmtu")" "mtu 9000"
  check "$run: the kernel's MSS is 8948 (weir advertised 8960)" eq "$(cat "$work/$run.mss")" "mss:8948"
  check "$run: weir's port has scattered receive" grep -q 'rx_scatter=true' "$work/$run.log"
  # DPDK 22.11 refuses net_tap an MTU above 1504 (its max_rx_pktlen is 1,522): weir leaves
  # the device MTU alone and says so (docs/decisions/chained-mbufs.md).
  check "$run: the device MTU left alone is warned of" grep -q 'MTU is left as it is' "$work/$run.log"
  check "$run: IPv4 socat SHA-256 equals weir's digest" eq \
    "$(j "$run" '[.digests[] | select(.local_port == 5002)] | .[0].sha256')" "$(cat "$work/$run.sha4")"
  check "$run: IPv6 socat SHA-256 equals weir's digest" eq \
    "$(j "$run" '[.digests[] | select(.local_port == 5002)] | .[1].sha256')" "$(cat "$work/$run.sha")"
  check "$run: bytes in order are both files" eq "$(j "$run" .tcp_bytes_in_order)" "$((2 * MB * 1024 * 1024))"
  avg=$(j "$run" '.rx_bytes / .rx_packets | floor')
  echo "       frames received: $(j "$run" .rx_packets), $avg bytes on average; GRO: $(j "$run" .gro_segments_in) segments in $(j "$run" .gro_units_out) units"
  # Data frames are 9,014 or 9,034 bytes, ACK-less control frames few: over 8,000 on
  # average means the transfer went in jumbo frames (chains of 2,048-byte mbufs).
  check "$run: frames average over 8000 bytes" gt "$avg" 8000
  check "$run: no chained frame dropped (pipeline.nonlinear)" eq "$(j "$run" '.drops_by_reason["pipeline.nonlinear"] // 0')" 0
  check "$run: every mbuf returned (mbufs_in_use_at_exit)" eq "$(j "$run" .mbufs_in_use_at_exit)" 0
  no_refusal "$run"
  check "$run: no connection left open" eq "$(j "$run" .connections_open)" 0
done
# An MTU out of range: refused with one line naming the range.
echo "== case: an MTU out of range"
out=$("$SINK" --mtu 10000 2>&1 | tail -n1 || true)
echo "       $out"
check "--mtu 10000 is refused before start-up" grep -q "10000" <<<"$out"
e2e_finish
