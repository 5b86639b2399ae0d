# shellcheck shell=bash
# The net_tap loopback harness shared by scripts/run.sh and the end-to-end tests.
#
# weir-sink runs inside a network namespace that this harness creates, with DPDK's net_tap
# PMD making a tap interface there. The Linux kernel in the same namespace owns the tap's
# other end: it has 198.18.0.2/24 (and 2001:2::2/64) on the tap and reaches weir at
# 198.18.0.1 (2001:2::1) through it, so the kernel's TCP is the sender and weir the
# receiver. Addresses come from the benchmarking ranges (RFC 2544's 198.18.0.0/15 and RFC
# 5180's 2001:2::/48) and exist only inside the namespace; nothing leaves it.

WEIR_NS_PREFIX=${WEIR_NS_PREFIX:-weir}
WEIR_TAP=${WEIR_TAP:-weirtap0}
WEIR_IP4=198.18.0.1
PEER_IP4=198.18.0.2
WEIR_IP6=2001:2::1
PEER_IP6=2001:2::2

die() { echo "error: $*" >&2; exit 1; }

# Fails loudly (never skips) when the harness cannot run here.
tapns_require() {
  [ "$(id -u)" -eq 0 ] || die "the net_tap harness needs root (it creates a network namespace and a tap device): run as root"
  [ -c /dev/net/tun ] || die "/dev/net/tun is missing: load the tun module (modprobe tun) or run on a kernel with TUN support"
  command -v ip >/dev/null || die "ip (iproute2) is missing: run scripts/setup.sh"
}

# tapns_create: creates a fresh namespace, sets $WEIR_NS, and arranges its removal on exit.
tapns_create() {
  tapns_require
  WEIR_NS="${WEIR_NS_PREFIX}-$$-${RANDOM}"
  ip netns add "$WEIR_NS" || die "cannot create network namespace $WEIR_NS"
  ip -n "$WEIR_NS" link set lo up
  TAPNS_PIDS=()
  trap tapns_cleanup EXIT
  trap 'exit 130' INT TERM
}

# Stops what the harness started and removes the namespace (runs on any exit).
tapns_cleanup() {
  local pid
  for pid in "${TAPNS_PIDS[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  for pid in "${TAPNS_PIDS[@]:-}"; do
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  done
  if [ -n "${TAPNS_PEER_NS:-}" ]; then
    ip netns pids "$TAPNS_PEER_NS" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$TAPNS_PEER_NS" 2>/dev/null || true
  fi
  if [ -n "${WEIR_NS:-}" ]; then
    # Anything still running in the namespace (a stuck iperf) goes with it.
    ip netns pids "$WEIR_NS" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$WEIR_NS" 2>/dev/null || true
  fi
}

# tapns_exec CMD...: runs a command inside the namespace.
tapns_exec() {
  ip netns exec "$WEIR_NS" "$@"
}

# tapns_spawn LOG CMD...: starts a command inside the namespace in the background, output
# to LOG; sets TAPNS_LAST_PID to the command's own pid (so signals reach it, not a subshell)
# and stops it on exit.
tapns_spawn() {
  local log=$1
  shift
  ip netns exec "$WEIR_NS" "$@" >"$log" 2>&1 &
  TAPNS_LAST_PID=$!
  TAPNS_PIDS+=("$TAPNS_LAST_PID")
}

# tapns_wait_tap [SECONDS]: waits for the DPDK program's tap to appear, then gives the kernel its
# addresses on it.
tapns_wait_tap() {
  local deadline=$((SECONDS + ${1:-60}))
  until ip -n "$WEIR_NS" link show "$WEIR_TAP" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "the DPDK program (weir-sink or weir-gen) did not create $WEIR_TAP in time (see its log)"
    sleep 0.2
  done
  # No IPv6 duplicate-address detection delay: the address is usable at once.
  ip netns exec "$WEIR_NS" sysctl -qw "net.ipv6.conf.$WEIR_TAP.accept_dad=0" || true
  ip -n "$WEIR_NS" addr add "$PEER_IP4/24" dev "$WEIR_TAP"
  ip -n "$WEIR_NS" addr add "$PEER_IP6/64" dev "$WEIR_TAP" nodad
  ip -n "$WEIR_NS" link set "$WEIR_TAP" up
}

# tapns_wait_reachable IP [SECONDS]: waits until weir answers ping (ARP/ND + ICMP echo).
tapns_wait_reachable() {
  local ip=$1 deadline=$((SECONDS + ${2:-30}))
  until tapns_exec ping -c1 -W1 "$ip" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "weir at $ip does not answer ping from the namespace"
  done
}

# tapns_peer_create LOCAL-IP4 PEER-IP4: a second namespace, $TAPNS_PEER_NS, joined to
# $WEIR_NS by a veth pair (LOCAL-IP4/24 on $WEIR_NS's end, PEER-IP4/24 on the other), for
# a kernel server that the same clients reach over a device of its own; tapns_cleanup
# removes it. Call after tapns_create.
tapns_peer_create() {
  TAPNS_PEER_NS=$WEIR_NS-peer
  ip netns add "$TAPNS_PEER_NS" || die "cannot create network namespace $TAPNS_PEER_NS"
  ip -n "$TAPNS_PEER_NS" link set lo up
  ip link add weirveth0 netns "$WEIR_NS" type veth peer name weirveth1 netns "$TAPNS_PEER_NS"
  ip -n "$WEIR_NS" addr add "$1/24" dev weirveth0
  ip -n "$TAPNS_PEER_NS" addr add "$2/24" dev weirveth1
  ip -n "$WEIR_NS" link set weirveth0 up
  ip -n "$TAPNS_PEER_NS" link set weirveth1 up
}
