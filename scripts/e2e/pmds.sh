#!/usr/bin/env bash
# End-to-end tests of weir-sink on PMDs other than net_tap: net_af_packet and net_af_xdp
# on one end of a veth pair, the Linux kernel's TCP sending from the other end.
#
# Each case makes two network namespaces: the kernel's (scripts/lib/tapns.sh's, with
# 198.18.40.2/24 on its veth end) and weir-sink's (the veth's other end, no address: the
# kernel there ignores the frames, weir-sink's sockets take them: AF_PACKET ones, or an
# AF_XDP socket behind the XDP program net_af_xdp attaches). The kernel sends with
# transmit checksum offload, TSO and GSO off on its end: neither PMD gives weir checksum
# verdicts, so weir verifies every checksum in software, and a veth with offloads on
# would hand it frames whose checksums are left to a NIC that is not there, and segments
# of 64 KiB. Then iperf -P 8 and concurrent socat transfers; weir-sink's --stats-json is
# checked: bytes in order, one SHA-256 per socat connection equal to the file's, no reset,
# every connection closed, no checksum failure, and after the port is closed 0 mbufs
# held by weir (mbufs_in_use_at_exit) and, apart, the mbufs the driver kept in its
# receive rings (mbufs_kept_by_driver_at_exit: none for af_packet, which copies into
# fresh mbufs; net_af_xdp's fill ring for AF_XDP, which DPDK 22.11's close leaves
# allocated: exactly the 2,048 it posts per queue, ETH_AF_XDP_DFLT_NUM_DESCS), exit status
# 0. A last case asks for 2 queues on af_packet (no RSS) and checks the start-up warning.
# Rates are printed, not checked (docs/decisions/af-xdp.md has figures). Needs root, veth
# and ethtool, and a kernel with AF_XDP (CONFIG_XDP_SOCKETS) for its case; without them
# it fails with a clear message (it never skips).
#
#   scripts/e2e/pmds.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
WEIR_NS_PREFIX=wx-pmds
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh
WEIR_IP4=198.18.40.1 PEER_IP4=198.18.40.2
# shellcheck source=scripts/lib/e2e.sh
. scripts/lib/e2e.sh

IPERF_S=4 SOCATS=4 SOCAT_MB=16
K_IF=wxk0 W_IF=wxw0 # the kernel's end and weir's end of the veth pair
XDP_FILL=2048         # mbufs net_af_xdp posts to each queue's fill ring (xsk_configure)

e2e_init iperf socat jq ping sha256sum ethtool
modprobe veth 2>/dev/null || true
ip link add wxprobe0 type veth peer name wxprobe1 2>/dev/null ||
  die "cannot create a veth pair: load the veth module (modprobe veth) or run on a kernel with CONFIG_VETH"
ip link del wxprobe0
[ -e /sys/fs/bpf ] || die "/sys/fs/bpf is missing: the kernel has no BPF filesystem, which AF_XDP's libxdp uses"

# pmd_session NAME QPAIRS VDEV [weir-sink options...]: weir-sink on the port VDEV makes
# of weir's veth end ("%s" in it is the interface) with QPAIRS queues (and as many
# lcores), driven by the function named in $BODY (called with NAME) from the kernel's
# namespace, stopped with SIGINT. JSON $work/NAME.json, log $work/NAME.log, exit status
# $work/NAME.rc.
pmd_session() {
  local name=$1 qpairs=$2 vdev; shift 2
  # shellcheck disable=SC2059
  vdev=$(printf "$1" "$W_IF"); shift
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

    # ip netns exec gives the program a /sys of the namespace, without the BPF
    # filesystem libxdp keeps its XDP dispatcher in: one is mounted there (in the
    # program's own mount namespace, gone with it). Where the kernel refuses the
    # dispatcher (this VM's: "Compatibility check for dispatcher program failed"), libxdp
    # attaches its one AF_XDP program directly, which is all net_af_xdp needs.
    ip netns exec "$W_NS" sh -c 'mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
      exec "$@"' sh "$SINK" --no-pci --no-huge -m 512 --file-prefix="wx-pmds-$$-$name" \
      --log-level='*:warning' -l "0-$((qpairs - 1))" --vdev="$vdev" -- \
      --quiet --digest --ip "$WEIR_IP4" --port 5001 --port 5002 \
      --stats-json "$work/$name.json" "$@" >"$work/$name.log" 2>&1 &
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

# ---- 1. iperf -P 8 and concurrent socat transfers, one queue, on each PMD ----
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
# bulk_case NAME PMD VDEV KEPT: iperf -P 8 and the socat transfers to weir-sink on VDEV,
# and the checks (KEPT: the mbufs the driver keeps in its rings at close).
bulk_case() {
  local name=$1 pmd=$2 vdev=$3 kept=$4
  echo "== case: $pmd, iperf -P 8 -t $IPERF_S + $SOCATS concurrent socat transfers of $SOCAT_MB MB"
  BODY=bulk pmd_session "$name" 1 "$vdev" || true
  if [ ! -f "$work/$name.json" ]; then
    check "$name: the session ran" false
    return
  fi
  local iperf_b sent want got t0 t1
  iperf_b=$(cat "$work/$name.iperf_bytes")
  sent=$((iperf_b + SOCATS * SOCAT_MB * 1024 * 1024))
  check "$name: weir-sink exited with status 0" eq "$(cat "$work/$name.rc")" 0
  check "$name: tcp_bytes_in_order equals what the kernel sent" eq "$(j "$name" .tcp_bytes_in_order)" "$sent"
  check "$name: 8 iperf connections of 5001 counted" eq "$(j "$name" '[.digests[] | select(.local_port == 5001)] | length')" 8
  want=$(cat "$work/$name".s*.sha | sort | tr '\n' ' ')
  got=$(j "$name" '[.digests[] | select(.local_port == 5002) | .sha256] | sort | join(" ")')
  check "$name: each socat connection's SHA-256 equals weir's digest of it" eq "$got " "$want"
  check "$name: no connection reset" eq "$(j "$name" .connections_reset)" 0
  check "$name: every connection closed cleanly" eq "$(j "$name" '[.digests[] | select(.end != "closed")] | length')" 0
  check "$name: no connection left open" eq "$(j "$name" .connections_open)" 0
  check "$name: no TCP checksum failed weir's software check" eq "$(j "$name" '.drops_by_reason["parse.tcp_bad_checksum"] // 0')" 0
  check "$name: after the port closed, weir holds no mbuf (mbufs_in_use_at_exit)" eq "$(j "$name" .mbufs_in_use_at_exit)" 0
  no_refusal "$name"
  check "$name: the driver kept $kept untouched mbufs in its rings (mbufs_kept_by_driver_at_exit)" \
    eq "$(j "$name" .mbufs_kept_by_driver_at_exit)" "$kept"
  read -r t0 t1 <"$work/$name.socat_time"
  awk -v b="$iperf_b" -v s="$IPERF_S" -v n="$SOCATS" -v mb="$SOCAT_MB" -v t0="$t0" -v t1="$t1" 'BEGIN {
    printf "       rates (printed, not checked): iperf -P 8 %.2f Gbit/s; %d socat transfers %.2f Gbit/s (wall time, making and hashing the files included)\n",
      b * 8 / s / 1e9, n, n * mb * 1048576 * 8 / (t1 - t0) / 1e9 }'
  echo "       drops: $(j "$name" '.drops_by_reason | to_entries | map(select(.value > 0) | "\(.key)=\(.value)") | join(" ") | if . == "" then "none" else . end')"
}
bulk_case afp net_af_packet "net_af_packet0,iface=%s,qpairs=1" 0
# One queue of the interface (veth has one): start_queue=0,queue_count=1 are the defaults.
bulk_case xdp net_af_xdp "net_af_xdp0,iface=%s,start_queue=0,queue_count=1" "$XDP_FILL"

# ---- 2. Two queues on a port without RSS: the start-up warning ----
idle() { :; }
echo "== case: net_af_packet with 2 queues (no RSS): the start-up warning"
BODY=idle pmd_session afp2 2 "net_af_packet0,iface=%s,qpairs=2" --queues 2 || true
warning=$(grep -m1 'has no RSS' "$work/afp2.log" || true)
echo "       ${warning:-(no warning in the log)}"
check "afp2: the warning names the port, its driver and the queues" \
  grep -q 'port 0 (net_af_packet) has no RSS.*2 queues were asked for' "$work/afp2.log"
check "afp2: the warning is shown once" eq "$(grep -c 'has no RSS' "$work/afp2.log")" 1
check "afp2: weir-sink exited with status 0" eq "$(cat "$work/afp2.rc" 2>/dev/null)" 0
check "afp2: every mbuf returned (mbufs_in_use_at_exit)" eq "$(j afp2 .mbufs_in_use_at_exit 2>/dev/null)" 0

e2e_finish
