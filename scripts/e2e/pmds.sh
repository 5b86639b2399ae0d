#!/usr/bin/env bash
# End-to-end tests of weir-sink on a PMD other than net_tap: net_af_packet on one end of a
# veth pair, the Linux kernel's TCP sending from the other end.
#
# Each case makes two network namespaces: the kernel's (scripts/lib/tapns.sh's, with
# 198.18.0.2/24 on its veth end) and weir-sink's (the veth's other end, no address: the
# kernel there ignores the frames, weir-sink's AF_PACKET sockets take them). The kernel
# sends with transmit checksum offload, TSO and GSO off on its end: af_packet gives weir no
# checksum verdicts, so weir verifies every checksum in software, and a veth with offloads
# on would hand it frames whose checksums are left to a NIC that is not there, and
# segments of 64 KiB. Then iperf -P 8 and concurrent socat transfers; weir-sink's
# --stats-json is checked: bytes in order, one SHA-256 per socat connection equal to the
# file's, no reset, every connection closed, no checksum failure, 0 mbufs in use after the
# port is closed, exit status 0. A second case asks for 2 queues on af_packet (no RSS) and
# checks the start-up warning. Rates are printed, not checked. Needs root, veth and
# ethtool; without them it fails with a clear message (it never skips).
#
#   scripts/e2e/pmds.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh
# shellcheck source=scripts/lib/e2e.sh
. scripts/lib/e2e.sh

IPERF_S=4 SOCATS=4 SOCAT_MB=16
K_IF=weirk0 W_IF=weirw0 # the kernel's end and weir's end of the veth pair

e2e_init iperf socat jq ping sha256sum ethtool
modprobe veth 2>/dev/null || true
ip link add weirprobe0 type veth peer name weirprobe1 2>/dev/null ||
  die "cannot create a veth pair: load the veth module (modprobe veth) or run on a kernel with CONFIG_VETH"
ip link del weirprobe0

# afp_session NAME QPAIRS [weir-sink options...]: weir-sink on net_af_packet with QPAIRS
# queues (and as many lcores), driven by the function named in $BODY (called with NAME)
# from the kernel's namespace, stopped with SIGINT. JSON $work/NAME.json, log
# $work/NAME.log, exit status $work/NAME.rc.
afp_session() {
  local name=$1 qpairs=$2; shift 2
  (
    tapns_create
    W_NS="$WEIR_NS-w"
    ip netns add "$W_NS" || die "cannot create network namespace $W_NS"
    trap 'tapns_cleanup; ip netns del "$W_NS" 2>/dev/null || true' EXIT
    ip link add "$K_IF" netns "$WEIR_NS" type veth peer name "$W_IF" netns "$W_NS"
    ip netns exec "$W_NS" sysctl -qw "net.ipv6.conf.$W_IF.disable_ipv6=1"
    ip netns exec "$W_NS" ethtool -K "$W_IF" gro off >/dev/null
    ip -n "$W_NS" link set "$W_IF" up
    ip netns exec "$WEIR_NS" ethtool -K "$K_IF" tx off tso off gso off gro off >/dev/null
    ip -n "$WEIR_NS" addr add "$PEER_IP4/24" dev "$K_IF"
    ip -n "$WEIR_NS" link set "$K_IF" up

    ip netns exec "$W_NS" "$SINK" --no-pci --no-huge -m 512 --file-prefix="weir-pmds-$$-$name" \
      --log-level='*:warning' -l "0-$((qpairs - 1))" \
      --vdev="net_af_packet0,iface=$W_IF,qpairs=$qpairs" -- \
      --quiet --digest --port 5001 --port 5002 --stats-json "$work/$name.json" "$@" \
      >"$work/$name.log" 2>&1 &
    local pid=$!
    TAPNS_PIDS+=("$pid")
    tapns_wait_reachable "$WEIR_IP4" 30
    "$BODY" "$name"
    wait_senders_done 60
    sleep 0.5
    kill -INT "$pid"
    local rc=0
    wait "$pid" || rc=$?
    echo "$rc" >"$work/$name.rc"
    TAPNS_PIDS=()
  ) || { echo "  session $name failed; weir-sink log:"; tail -20 "$work/$name.log"; return 1; }
}

# ---- 1. iperf -P 8 and concurrent socat transfers, one queue ----
bulk() {
  iperf_bytes "$1" "$IPERF_S" "$WEIR_IP4"
  local i t0 t1 pids=() rc=0
  t0=$(date +%s.%N)
  for i in $(seq "$SOCATS"); do
    socat_file "$1.s$i" "$SOCAT_MB" "TCP4:$WEIR_IP4:5002" &
    pids+=($!)
  done
  # (Not a bare wait: weir-sink is a child of this shell too.)
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  [ $rc -eq 0 ] || { echo "  a socat transfer failed" >&2; return 1; }
  t1=$(date +%s.%N)
  echo "$t0 $t1" >"$work/$1.socat_time"
}
echo "== case: net_af_packet, iperf -P 8 -t $IPERF_S + $SOCATS concurrent socat transfers of $SOCAT_MB MB"
BODY=bulk afp_session afp 1 || true
if [ -f "$work/afp.json" ]; then
  iperf_b=$(cat "$work/afp.iperf_bytes")
  sent=$((iperf_b + SOCATS * SOCAT_MB * 1024 * 1024))
  check "afp: weir-sink exited with status 0" eq "$(cat "$work/afp.rc")" 0
  check "afp: tcp_bytes_in_order equals what the kernel sent" eq "$(j afp .tcp_bytes_in_order)" "$sent"
  check "afp: 8 iperf connections of 5001 counted" eq "$(j afp '[.digests[] | select(.local_port == 5001)] | length')" 8
  want=$(cat "$work"/afp.s*.sha | sort | tr '\n' ' ')
  got=$(j afp '[.digests[] | select(.local_port == 5002) | .sha256] | sort | join(" ")')
  check "afp: each socat connection's SHA-256 equals weir's digest of it" eq "$got " "$want"
  check "afp: no connection reset" eq "$(j afp .connections_reset)" 0
  check "afp: every connection closed cleanly" eq "$(j afp '[.digests[] | select(.end != "closed")] | length')" 0
  check "afp: no connection left open" eq "$(j afp .connections_open)" 0
  check "afp: no TCP checksum failed weir's software check" eq "$(j afp '.drops_by_reason["parse.tcp_bad_checksum"] // 0')" 0
  check "afp: every mbuf returned (mbufs_in_use_at_exit)" eq "$(j afp .mbufs_in_use_at_exit)" 0
  read -r t0 t1 <"$work/afp.socat_time"
  awk -v b="$iperf_b" -v s="$IPERF_S" -v n="$SOCATS" -v mb="$SOCAT_MB" -v t0="$t0" -v t1="$t1" 'BEGIN {
    printf "       rates (printed, not checked): iperf -P 8 %.2f Gbit/s; %d socat transfers %.2f Gbit/s (wall time, making and hashing the files included)\n",
      b * 8 / s / 1e9, n, n * mb * 1048576 * 8 / (t1 - t0) / 1e9 }'
  echo "       drops: $(j afp '.drops_by_reason | to_entries | map(select(.value > 0) | "\(.key)=\(.value)") | join(" ") | if . == "" then "none" else . end')"
else
  check "afp: the session ran" false
fi

# ---- 2. Two queues on a port without RSS: the start-up warning ----
idle() { :; }
echo "== case: net_af_packet with 2 queues (no RSS): the start-up warning"
BODY=idle afp_session afp2 2 --queues 2 || true
warning=$(grep -m1 'has no RSS' "$work/afp2.log" || true)
echo "       ${warning:-(no warning in the log)}"
check "afp2: the warning names the port, its driver and the queues" \
  grep -q 'port 0 (net_af_packet) has no RSS.*2 queues were asked for' "$work/afp2.log"
check "afp2: the warning is shown once" eq "$(grep -c 'has no RSS' "$work/afp2.log")" 1
check "afp2: weir-sink exited with status 0" eq "$(cat "$work/afp2.rc" 2>/dev/null)" 0
check "afp2: every mbuf returned (mbufs_in_use_at_exit)" eq "$(j afp2 .mbufs_in_use_at_exit 2>/dev/null)" 0

e2e_finish
