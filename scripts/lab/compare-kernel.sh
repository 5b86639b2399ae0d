#!/usr/bin/env bash
# Linux sender -> Linux receiver (iperf over a veth pair between two network namespaces,
# MTU 1500, TSO/GSO off on the sender so the receiver sees MSS-sized segments, GRO on at
# the receiver) against weir-gen -> weir-sink (`weir-bench e2e`, stack mode, 64 flows,
# ring pair) on the same 2 cores. Prints both segment rates and their ratio (issue 6
# target: >= 10x).
#
# The kernel's rate is the receiving veth's RX packet counter over the iperf run (frames
# really are MSS-sized with TSO/GSO off; iperf's byte count / 1,448 is printed beside it
# as a cross-check). veth has TX checksum offload, so neither kernel side computes or
# verifies a payload checksum; weir's run models a NIC's RX checksum offload the same way
# (see `weir-bench e2e --help`, `--sw-checksum`). Addresses from 198.18.0.0/15 only,
# inside the namespaces. Builds into $CARGO_TARGET_DIR (default /tmp/t-lab, common.sh).
. "$(dirname "$0")/common.sh"
SECS="${SECS:-10}"
lab_build
A=weirlab-a-$$; B=weirlab-b-$$
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip -n "$A" link add veth-a type veth peer name veth-b netns "$B"
ip -n "$A" addr add 198.18.1.1/24 dev veth-a
ip -n "$B" addr add 198.18.1.2/24 dev veth-b
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set veth-a mtu 1500 up
ip -n "$B" link set veth-b mtu 1500 up
ip netns exec "$A" ethtool -K veth-a tso off gso off >/dev/null
ip netns exec "$B" ethtool -K veth-b gro on >/dev/null
LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "load: $LOAD"
ip netns exec "$B" iperf -s -p 5201 >/dev/null 2>&1 &
SRV=$!
sleep 1
rx_packets() { ip netns exec "$B" cat /sys/class/net/veth-b/statistics/rx_packets; }
P0=$(rx_packets); T0=$(date +%s.%N)
# -y C: CSV; the last field of the summary line is bits per second.
BPS=$(ip netns exec "$A" iperf -c 198.18.1.2 -p 5201 -t "$SECS" -y C | tail -1 | awk -F, '{print $NF}')
P1=$(rx_packets); T1=$(date +%s.%N)
kill "$SRV" 2>/dev/null || true; wait "$SRV" 2>/dev/null || true
KSEG=$(awk -v p0="$P0" -v p1="$P1" -v t0="$T0" -v t1="$T1" 'BEGIN{printf "%.0f", (p1-p0)/(t1-t0)}')
KSEG_BYTES=$(awk -v b="$BPS" 'BEGIN{printf "%.0f", b/8/1448}')
echo "kernel: veth-b received $KSEG frames/s; iperf $(awk -v b="$BPS" 'BEGIN{printf "%.3f", b/1e9}') Gbit/s = $KSEG_BYTES segments/s (bytes/1448)"
WJSON=$("$BENCH" e2e --json --flows 64 --seconds 3 --runs 3 --only stack 2>/dev/null)
MODEL=$(echo "$WJSON" | jq -r 'select(.model) | .model')
WSEG=$(echo "$WJSON" | jq -r 'select(.mode=="stack" and .flows==64) | .segments_per_s')
WCYC=$(echo "$WJSON" | jq -r 'select(.mode=="stack" and .flows==64) | .receiver_cycles_per_segment')
echo "weir: weir-bench e2e stack, 64 flows: $(printf '%.0f' "$WSEG") segments/s ($(printf '%.0f' "$WCYC") receiver cycles/segment)"
echo "weir model: $MODEL"
RATIO=$(awk -v w="$WSEG" -v k="$KSEG" 'BEGIN{printf "%.2f", (k>0)?w/k:0}')
MET=$(awk -v r="$RATIO" 'BEGIN{print (r>=10)?"met":"NOT met"}')
echo "ratio weir/kernel: ${RATIO}x (target >= 10x: $MET)"
{
  echo "Kernel: iperf (one stream, ${SECS} s) between two namespaces over veth, MTU 1500, TSO/GSO off on the sender, GRO on at the receiver; rate = the receiving veth's RX packet counter (iperf's bytes / 1,448 = $KSEG_BYTES/s). weir: \`weir-bench e2e --only stack\`, 64 flows, median of 3 rounds of 3 s ($MODEL). Load at start: $LOAD."
  echo
  echo "| path | segments/s |"; echo "|---|---:|"
  echo "| Linux -> Linux (veth) | $KSEG |"
  echo "| weir-gen -> weir-sink (ring) | $(printf '%.0f' "$WSEG") |"
  echo
  echo "Ratio: **${RATIO}x** (target >= 10x: $MET)."
} > "$OUT/compare_kernel.md"
