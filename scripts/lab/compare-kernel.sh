#!/usr/bin/env bash
# Linux sender -> Linux receiver (iperf over a veth pair between two network namespaces,
# MTU 1500, TSO/GSO off on the sender so the receiver sees MSS-sized segments, GRO on at
# the receiver) against weir-gen -> weir-sink (`weir-bench e2e`, 64 flows, ring pair) on
# the same 2 cores. Prints both segment rates and their ratio (issue 6 target: >= 10x).
# Addresses from 198.18.0.0/15 only, inside the namespaces.
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
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
ip netns exec "$B" iperf -s -p 5201 >/dev/null 2>&1 &
SRV=$!
sleep 1
# -y C: CSV; the last field of the summary line is bits per second.
BPS=$(ip netns exec "$A" iperf -c 198.18.1.2 -p 5201 -t "$SECS" -y C | tail -1 | awk -F, '{print $NF}')
kill "$SRV" 2>/dev/null || true; wait "$SRV" 2>/dev/null || true
KSEG=$(awk -v b="$BPS" 'BEGIN{printf "%.0f", b/8/1448}')
echo "kernel: iperf $(awk -v b="$BPS" 'BEGIN{printf "%.3f", b/1e9}') Gbit/s = $KSEG segments/s (bytes/1448)"
WSEG=$("$BENCH" e2e --json --flows 64 --seconds 3 --runs 3 2>/dev/null \
  | jq -r 'select(.mode=="stack" and .flows==64) | .segments_per_s')
echo "weir: weir-bench e2e stack, 64 flows: $(printf '%.0f' "$WSEG") segments/s"
RATIO=$(awk -v w="$WSEG" -v k="$KSEG" 'BEGIN{printf "%.2f", (k>0)?w/k:0}')
MET=$(awk -v r="$RATIO" 'BEGIN{print (r>=10)?"met":"NOT met"}')
echo "ratio weir/kernel: ${RATIO}x (target >= 10x: $MET)"
{
  echo "Kernel: iperf (one stream, ${SECS} s) between two namespaces over veth, MTU 1500, TSO/GSO off on the sender, GRO on at the receiver. weir: \`weir-bench e2e\` stack mode, 64 flows, median of 3 rounds of 3 s. Load at start: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| path | segments/s |"; echo "|---|---:|"
  echo "| Linux -> Linux (veth) | $KSEG |"
  echo "| weir-gen -> weir-sink (ring) | $(printf '%.0f' "$WSEG") |"
  echo
  echo "Ratio: **${RATIO}x** (target >= 10x: $MET)."
} > "$OUT/compare_kernel.md"
