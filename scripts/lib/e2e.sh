# shellcheck shell=bash
# Shared pieces of the end-to-end test scripts (scripts/e2e/*.sh): a results counter,
# one weir-sink session per network namespace, kernel-side senders, and JSON checks.
# Source after scripts/lib/tapns.sh.

SINK=${SINK:-${CARGO_TARGET_DIR:-target}/release/weir-sink}
passed=0 failed=0

# e2e_init TOOLS...: fails loudly when the harness cannot run; builds weir-sink; makes $work.
e2e_init() {
  tapns_require
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null || die "$t is missing: run scripts/setup.sh"
  done
  echo "== building weir-sink (release)"
  cargo build --release -q -p apps --bin weir-sink
  work=$(mktemp -d /tmp/weir-e2e.XXXXXX)
  trap 'rm -rf "$work"' EXIT
}

# check NAME COMMAND...: counts and prints one result.
check() {
  local name=$1; shift
  if "$@"; then echo "  ok   $name"; passed=$((passed + 1)); else echo "  FAIL $name"; failed=$((failed + 1)); fi
}
eq() { [ "$1" = "$2" ] || { echo "       expected '$2', got '$1'" >&2; return 1; }; }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }' || { echo "       expected $1 > $2" >&2; return 1; }; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }' || { echo "       expected $1 <= $2" >&2; return 1; }; }

# e2e_finish: prints the closing line and returns non-zero on any failure.
e2e_finish() {
  echo
  echo "$(basename "$0" .sh): $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# wait_senders_done SECONDS: waits until no kernel TCP socket in the namespace still has
# data or a FIN that weir has not acknowledged (every connection to $WEIR_IP4 is gone or in
# FIN-WAIT-2 / TIME-WAIT). A sender such as socat exits as soon as its last write is in
# the kernel's send buffer; through 1% loss the tail can still be in retransmission (an
# RTO or two) a second later, and stopping weir-sink then cut the transfer short. Fails
# when SECONDS pass first (the transfer is stuck), listing the sockets left.
wait_senders_done() {
  local deadline=$((SECONDS + $1)) left
  while :; do
    left=$(ip netns exec "$WEIR_NS" ss -Htna dst "$WEIR_IP4" |
      awk '$1 != "TIME-WAIT" && $1 != "FIN-WAIT-2" && $1 != "LISTEN"')
    [ -z "$left" ] && return 0
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "  kernel senders still busy after $1 s:" >&2
      echo "$left" >&2
      return 1
    fi
    sleep 0.1
  done
}

# session NAME [EAL options... --] [weir-sink options...]: one weir-sink in a new namespace
# (named after $WEIR_NS_PREFIX, in a subshell), driven by the function named in $BODY
# (called with NAME), stopped with SIGINT. weir-sink listens on 5001 and 5002 with
# digests, before the options given; EAL options, when given, replace its default EAL
# (which takes its tap from --tap-iface and one lcore per --queues). Its JSON is
# $work/NAME.json, its log $work/NAME.log.
session() {
  local name=$1; shift
  local eal=() opts=("$@") i
  for i in "${!opts[@]}"; do
    if [ "${opts[i]}" = -- ]; then
      eal=("${opts[@]:0:i+1}")
      opts=("${opts[@]:i+1}")
      break
    fi
  done
  (
    tapns_create
    tapns_spawn "$work/$name.log" "$SINK" "${eal[@]}" --quiet --digest --port 5001 --port 5002 \
      --stats-json "$work/$name.json" "${opts[@]}"
    local pid=$TAPNS_LAST_PID
    tapns_wait_tap 60
    tapns_wait_reachable "$WEIR_IP4" 30
    "$BODY" "$name"
    wait_senders_done 60
    sleep 0.5
    kill -INT "$pid"
    wait "$pid"
    TAPNS_PIDS=()
  ) || { echo "  session $name failed; weir-sink log:"; tail -20 "$work/$name.log"; return 1; }
}

# iperf_bytes NAME SECONDS DST: iperf -P 8 from the kernel; the bytes it reports go to
# $work/NAME.iperf_bytes (iperf 2 CSV: one line per stream, field 6 its id, field 8 its
# bytes; a sum line, when printed, has id -1 and is left out).
iperf_bytes() {
  ip netns exec "$WEIR_NS" iperf -c "$3" -p 5001 -P 8 -t "$2" -y C >"$work/$1.iperf" 2>&1
  awk -F, '$6 != -1 { sum += $8 } END { printf "%.0f\n", sum }' "$work/$1.iperf" >"$work/$1.iperf_bytes"
}

# socat_file NAME MB DST-ADDRESS: a random file of MB MiB to port 5002; its SHA-256 goes
# to $work/NAME.sha.
socat_file() {
  head -c "$(($2 * 1024 * 1024))" /dev/urandom >"$work/$1.bin"
  sha256sum "$work/$1.bin" | cut -d' ' -f1 >"$work/$1.sha"
  ip netns exec "$WEIR_NS" socat -u "FILE:$work/$1.bin" "$3"
  rm -f "$work/$1.bin"
}

j() { jq -r "$2" "$work/$1.json"; }
digest_of() { j "$1" '[.digests[] | select(.local_port == 5002) | .sha256] | last // "none"'; }

# no_refusal NAME: no in-window data was refused for want of receive-queue room (the
# window offers only what the connection can hold: docs/decisions/receive-room.md).
no_refusal() {
  check "$1: no in-window data refused (tcp.rx_queue_full)" \
    eq "$(j "$1" '.drops_by_reason["tcp.rx_queue_full"] // 0')" 0
}

# common_checks NAME EXPECTED-IN-ORDER-BYTES: the invariants of every clean run.
common_checks() {
  check "$1: tcp_bytes_in_order equals what the kernel sent" eq "$(j "$1" .tcp_bytes_in_order)" "$2"
  check "$1: socat SHA-256 equals weir's digest" eq "$(digest_of "$1")" "$(cat "$work/$1.sha")"
  check "$1: every mbuf returned (mbufs_in_use_at_exit)" eq "$(j "$1" .mbufs_in_use_at_exit)" 0
  no_refusal "$1"
  check "$1: no connection left open" eq "$(j "$1" .connections_open)" 0
  check "$1: every connection closed cleanly" eq "$(j "$1" '[.digests[] | select(.end != "closed")] | length')" 0
}
