#!/usr/bin/env bash
# Linux sender -> Linux receiver (iperf over a veth pair between two network namespaces,
# MTU 1500, TSO/GSO off on the sender so the receiver sees MSS-sized segments, GRO on at
# the receiver) against weir-gen -> weir-sink (`weir-bench e2e`, stack mode, ring pair)
# on the same 2 cores, at the same flow counts (iperf -P N against N flows; FLOW_COUNTS,
# default "1 64"). Prints both segment rates and their ratio (the target: weir >= 10x Linux).
# GRO_FLUSH_NS sets weir's GRO window (default weir-sink's 20 us); GRO_BUSY_HOLD_NS its
# hold while the receive queue is backlogged (weir-sink's --gro-busy-hold-ns; default off).
# ROUNDS (default 3) rounds, each one weir-bench e2e round (3 s per flow count) and then
# iperf (SECS, default 5 s, per flow count) back to back; the ratio reported is the
# median of the rounds' ratios, so a change in the VM's speed between the two sides'
# measurements moves one round, not the result.
#
# The kernel's rate is the larger of the receiving veth's RX packet counter over the iperf
# run and iperf's byte count / 1,448 (with one stream they agree; with 64 the counter
# reads about half of bytes / MSS, so it does not count segments there). veth has TX checksum offload, so neither kernel side computes or
# verifies a payload checksum; weir's run models a NIC's RX checksum offload the same way
# (see `weir-bench e2e --help`, `--sw-checksum`). Addresses from 198.18.0.0/15 only,
# inside the namespaces. Builds into $CARGO_TARGET_DIR (default /tmp/t-lab, common.sh).
#
# Memory: weir's mbufs go on 2 MiB hugepages, as DPDK is deployed (the script reserves
# 1 GB with scripts/setup-hugepages.sh first). The kernel's packet buffers already live in
# its direct map, which is mapped with large pages, so 4 KiB pages would charge weir TLB
# misses the kernel does not pay. HUGEPAGES=auto (default) falls back to 4 KiB pages
# (--no-huge) when hugepages cannot be reserved and says so; HUGEPAGES=1 stops instead;
# HUGEPAGES=0 uses 4 KiB pages. The model line and the report name the memory used.
. "$(dirname "$0")/common.sh"
SECS="${SECS:-5}"
ROUNDS="${ROUNDS:-3}"
case "$ROUNDS" in
  ""|*[!0-9]*|0) echo "compare-kernel.sh: ROUNDS must be a positive whole number, got '$ROUNDS'" >&2; exit 2 ;;
esac
HUGEPAGES="${HUGEPAGES:-auto}"
case "$HUGEPAGES" in
  auto|0|1) ;;
  *) echo "compare-kernel.sh: HUGEPAGES must be auto, 1 or 0, got '$HUGEPAGES'" >&2; exit 2 ;;
esac
lab_build
HUGE_FLAG=""
if [ "$HUGEPAGES" != 0 ]; then
  if scripts/setup-hugepages.sh 1024; then
    HUGE_FLAG="--hugepages"
  elif [ "$HUGEPAGES" = 1 ]; then
    echo "compare-kernel.sh: error: HUGEPAGES=1 but hugepages could not be reserved (above); HUGEPAGES=0 runs weir on 4 KiB pages" >&2
    exit 1
  else
    echo "compare-kernel.sh: NOTE: hugepages could not be reserved (above): weir runs on 4 KiB pages (--no-huge), which costs it TLB misses the kernel does not pay" >&2
  fi
fi
A=weirlab-a-$$; B=weirlab-b-$$
WERR=$(mktemp)
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; rm -f "$WERR"; }
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
# median VALUES...: the middle value (the mean of the middle two for an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{ if (NR%2) print v[(NR+1)/2]; else printf "%.6g\n", (v[NR/2]+v[NR/2+1])/2 }'; }
# Both sides at the same flow counts: iperf -P N streams against weir-gen's N flows.
FLOW_COUNTS="${FLOW_COUNTS:-1 64}"
# This VM's speed swings by up to 2x within minutes and moves both sides alike: each round
# measures weir and then the kernel back to back, and the ratio reported is the median of
# the rounds' ratios (ROUNDS, default 3).
declare -A RATIOS KRATES KFRAMES KBYTES WSEGS WCYCS WSPUS
for R in $(seq "$ROUNDS"); do
  # GRO_FLUSH_NS: weir's GRO window (default weir-sink's 20 us; the model line says which).
  if ! WJSON=$("$BENCH" e2e --json --flows "$(echo $FLOW_COUNTS | tr ' ' ,)" --seconds 3 --runs 1 --only stack $HUGE_FLAG \
    ${GRO_FLUSH_NS:+--gro-flush-ns "$GRO_FLUSH_NS"} \
    ${GRO_BUSY_HOLD_NS:+--gro-busy-hold-ns "$GRO_BUSY_HOLD_NS"} 2>"$WERR"); then
    echo "compare-kernel.sh: error: weir-bench e2e failed:" >&2
    tail -20 "$WERR" >&2
    exit 1
  fi
  MODEL=$(echo "$WJSON" | jq -r 'select(.model) | .model')
  for N in $FLOW_COUNTS; do
    P0=$(rx_packets); T0=$(date +%s.%N)
    # -y C: CSV, one summary line per stream (field 6 its ID, the last field bits/s); some
    # iperf 2 versions add a sum line (ID -1). The sum line if present, else the total.
    BPS=$(ip netns exec "$A" iperf -c 198.18.1.2 -p 5201 -t "$SECS" -P "$N" -y C \
      | awk -F, '$6 == -1 { sum = $NF; next } { total += $NF } END { printf "%.0f\n", (sum != "") ? sum : total }')
    P1=$(rx_packets); T1=$(date +%s.%N)
    KSEG=$(awk -v p0="$P0" -v p1="$P1" -v t0="$T0" -v t1="$T1" 'BEGIN{printf "%.0f", (p1-p0)/(t1-t0)}')
    KSEG_BYTES=$(awk -v b="$BPS" 'BEGIN{printf "%.0f", b/8/1448}')
    # The kernel's rate is the larger of the two (in its favour): with many streams the
    # veth counter reads below iperf's bytes / MSS, so some frames carry more than one
    # segment's payload and the counter is not a segment count there.
    KRATE=$(awk -v a="$KSEG" -v b="$KSEG_BYTES" 'BEGIN{print (a>b)?a:b}')
    WSEG=$(echo "$WJSON" | jq -r --argjson n "$N" 'select(.mode=="stack" and .flows==$n) | .segments_per_s')
    WCYC=$(echo "$WJSON" | jq -r --argjson n "$N" 'select(.mode=="stack" and .flows==$n) | .receiver_cycles_per_segment')
    WSPU=$(echo "$WJSON" | jq -r --argjson n "$N" 'select(.mode=="stack" and .flows==$n) | .gro_segments_per_unit')
    RATIO=$(awk -v w="$WSEG" -v k="$KRATE" 'BEGIN{printf "%.2f", (k>0)?w/k:0}')
    echo "round $R, $N flow(s): kernel $KRATE segments/s (veth-b $KSEG frames/s, iperf $(awk -v b="$BPS" 'BEGIN{printf "%.3f", b/1e9}') Gbit/s = $KSEG_BYTES segments/s); weir $(printf '%.0f' "$WSEG") segments/s ($(printf '%.0f' "$WCYC") receiver cycles/segment, $(printf '%.1f' "$WSPU") segments/GRO unit): ${RATIO}x"
    RATIOS[$N]+="$RATIO "; KRATES[$N]+="$KRATE "; KFRAMES[$N]+="$KSEG "; KBYTES[$N]+="$KSEG_BYTES "
    WSEGS[$N]+="$WSEG "; WCYCS[$N]+="$WCYC "; WSPUS[$N]+="$WSPU "
  done
done
kill "$SRV" 2>/dev/null || true; wait "$SRV" 2>/dev/null || true
ROWS=""
for N in $FLOW_COUNTS; do
  # The lists are split into words on purpose (unquoted).
  MR=$(median ${RATIOS[$N]}); MK=$(median ${KRATES[$N]}); MF=$(median ${KFRAMES[$N]})
  MB=$(median ${KBYTES[$N]}); MW=$(median ${WSEGS[$N]}); MC=$(median ${WCYCS[$N]})
  MU=$(median ${WSPUS[$N]})
  MET=$(awk -v r="$MR" 'BEGIN{print (r>=10)?"met":"NOT met"}')
  LIST=$(echo ${RATIOS[$N]} | sed 's/ /x, /g; s/$/x/')
  echo "kernel, $N stream(s): median $(printf '%.0f' "$MK") segments/s; weir, $N flow(s): median $(printf '%.0f' "$MW") segments/s ($(printf '%.0f' "$MC") receiver cycles/segment, $(printf '%.1f' "$MU") segments/GRO unit)"
  echo "ratio weir/kernel at $N flow(s): median $(printf '%.2f' "$MR")x of $ROUNDS rounds ($LIST) (target >= 10x: $MET)"
  ROWS="$ROWS| $N | $(printf '%.0f' "$MF") | $(printf '%.0f' "$MB") | $(printf '%.0f' "$MW") | $(printf '%.0f' "$MC") | $LIST | **$(printf '%.2f' "$MR")x** ($MET) |
"
done
if [ -n "$HUGE_FLAG" ]; then
  MEMNOTE="weir's mbufs are on 2 MiB hugepages, as DPDK is deployed: the kernel's packet buffers are in its direct map, which is mapped with large pages (\`HUGEPAGES=0\` runs weir on 4 KiB pages)."
else
  MEMNOTE="weir's mbufs are on 4 KiB pages (--no-huge; HUGEPAGES=$HUGEPAGES), which costs it TLB misses the kernel, whose buffers are in its large-page direct map, does not pay."
fi
echo "weir model: $MODEL"
{
  echo "$ROUNDS rounds, each weir then the kernel back to back (this VM's speed swings by up to 2x within minutes and moves both sides alike); the ratio is the median of the rounds' ratios, the rates are medians. Kernel: iperf (\`-P N\` streams, ${SECS} s each) between two namespaces over veth, MTU 1500, TSO/GSO off on the sender, GRO on at the receiver; rate = the larger of the receiving veth's RX packet counter and iperf's bytes / 1,448 (with many streams the counter reads lower: it is then not a segment count). weir: \`weir-bench e2e --only stack\` with the same number of flows, one round of 3 s ($MODEL). Load at start: $LOAD. $MEMNOTE"
  echo
  echo "| flows | Linux -> Linux (veth) frames/s | iperf bytes/1,448 per s | weir-gen -> weir-sink (ring) segments/s | weir receiver cycles/segment | ratio per round | median ratio (target >= 10x) |"
  echo "|---:|---:|---:|---:|---:|---|---|"
  printf '%s' "$ROWS"
} > "$OUT/compare_kernel.md"
