#!/usr/bin/env bash
# weir sends: the stack's send path against the Linux kernel's TCP over net_tap, through
# the two examples on the stack's API (apps/examples/send_file.rs and echo.rs), run one
# after another on DPDK's net_tap in a network namespace this script creates, with the
# kernel there as the peer (each run's tap is new; the kernel's addresses are 198.18.0.2
# and 2001:2::2, weir's 198.18.0.1 and 2001:2::1).
#
# - send: send_file resolves the kernel's address by ARP, connects to a kernel
#   `socat -u TCP4-LISTEN:5001,reuseaddr OPEN:FILE`, sends SEND_MB MiB of seeded bytes,
#   shuts down its write side and ends in TIME-WAIT; the SHA-256 of the file socat wrote
#   must equal the one send_file computed of what it sent.
# - echo: ECHO_CONNS kernel socat clients at once each send ECHO_MB MiB to the weir echo
#   server while reading what comes back (one socat per connection, both directions at
#   once); each echo's SHA-256 must equal its input's, and every connection must close
#   cleanly (the server's FIN after the last echoed byte). The server hands the received
#   buffers back without a copy (recv_bufs, send_bufs); echo_copy runs its copying path
#   (--copy, recv and send) once, at the limits' sizes.
# - both again with --impair loss=1%,reorder=2%,dup=1% on both of weir's directions (its
#   receive stage before the pipeline, its transmit stage before the port), at the
#   smaller sizes IMPAIRED_SEND_MB and IMPAIRED_ECHO_MB; weir must have retransmitted and
#   both stages must have dropped, reordered and duplicated frames.
# - the limits: 16 echo connections with a 16 KiB send buffer each (writes must wait for
#   Event::Writable, and no byte may be lost doing so); and a send to a kernel socket with
#   a 4 KiB receive buffer whose reader starts 2 s late (the window closes: weir must
#   probe it and finish once it opens).
# - IPv6: send_file to a kernel socat over IPv6 (neighbour discovery instead of ARP), and
#   2 kernel clients of the echo server over IPv6.
#
# Every run: exit status 0, every mbuf back in the pool at exit (mbufs_in_use_at_exit),
# the bytes the application wrote all sent once (retransmissions counted apart).
# Sizes: send 200 MiB and echo 4 x 25 MiB clean, send 50 MiB and echo 4 x 10 MiB impaired,
# 16 x 4 MiB and 4 x 4 MiB (--copy) echoed and 4 MiB sent at the limits, 50 MiB sent and
# 2 x 4 MiB echoed over IPv6 (--quick: 20, 4 x 5, 10, 4 x 2, 16 x 1, 4 x 1, 1, 5, 2 x 1). About 45 s here. Needs
# root, /dev/net/tun, socat, jq, sha256sum; fails (never skips) without them.
#
#   scripts/e2e/send.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh
# shellcheck source=scripts/lib/e2e.sh
. scripts/lib/e2e.sh

SEND_MB=200 ECHO_CONNS=4 ECHO_MB=25 IMPAIRED_SEND_MB=50 IMPAIRED_ECHO_MB=10 SMALL_CONNS=16 SMALL_MB=4 V6_MB=50
if [ "${1:-}" = "--quick" ]; then
  SEND_MB=20 ECHO_MB=5 IMPAIRED_SEND_MB=10 IMPAIRED_ECHO_MB=2 SMALL_MB=1 V6_MB=5
fi
IMPAIR=loss=1%,reorder=2%,dup=1%
EXAMPLES=${CARGO_TARGET_DIR:-target}/release/examples
SEND=$EXAMPLES/send_file ECHO=$EXAMPLES/echo
SOCAT_PORT=5001 ECHO_PORT=7007

tapns_require
for t in socat jq sha256sum ping; do
  command -v "$t" >/dev/null || die "$t is missing: run scripts/setup.sh"
done
echo "== building the examples send_file and echo (release)"
cargo build --release -q -p apps --example send_file --example echo
work=$(mktemp -d /tmp/weir-send.XXXXXX)
tapns_create
trap 'tapns_cleanup; rm -rf "$work"' EXIT

# wait_for PID SECONDS: waits for PID to end; after SECONDS it is stopped (SIGINT) and
# ENDED is "no". Its exit status is then in RC.
wait_for() {
  local deadline=$((SECONDS + $2))
  ENDED=yes RC=0
  while kill -0 "$1" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      ENDED=no
      kill -INT "$1" 2>/dev/null || true
      echo "       pid $1 still running after $2 s: stopped" >&2
      break
    fi
    sleep 0.1
  done
  wait "$1" || RC=$?
}

# wait_listening PORT: until a kernel socket listens on PORT in the namespace.
wait_listening() {
  for _ in $(seq 100); do
    [ -n "$(tapns_exec ss -Hltn "( sport = :$1 )")" ] && return 0
    sleep 0.05
  done
  die "nothing listens on port $1 in the namespace (see $work/*.socat.log)"
}

j() { jq -r "$2" "$work/$1.json"; }
sha() { sha256sum <"$1" | cut -d' ' -f1; }

# impaired_checks NAME: what the impairment stage must have done, in both directions,
# and what weir must have done about it.
impaired_checks() {
  local d
  for d in impairment impairment_tx; do
    check "$1: the $d stage dropped frames" gt "$(j "$1" ".$d.dropped")" 0
    check "$1: the $d stage reordered frames" gt "$(j "$1" ".$d.reordered")" 0
    check "$1: the $d stage duplicated frames" gt "$(j "$1" ".$d.duplicated")" 0
  done
  check "$1: weir retransmitted (tcp_retransmits > 0)" gt "$(j "$1" .tcp_retransmits)" 0
  echo "       $(j "$1" '"\(.tcp_retransmits) retransmitted (\(.tcp_fast_recoveries) fast recoveries, \(.tcp_rto_timeouts) RTOs); the stages dropped \(.impairment.dropped) received and \(.impairment_tx.dropped) sent frames"')"
}

# send_case NAME MB [send_file options...]: send_file to the kernel's socat. With
# READER_DELAY=S the kernel's socket has a 4 KiB receive buffer and socat reads nothing
# for S seconds: the window closes and weir must probe it (RFC 9293 §3.8.6.1). With
# FAMILY=6 over IPv6 (send_file resolves the kernel's address by neighbour discovery).
send_case() {
  local name=$1 mb=$2 socat_pid send_pid
  shift 2
  local delay=${READER_DELAY:-0} listen="TCP4-LISTEN:$SOCAT_PORT,reuseaddr" out="OPEN:$work/$name.out,creat,trunc,wronly"
  local dst="$PEER_IP4:$SOCAT_PORT"
  if [ "${FAMILY:-4}" = 6 ]; then
    listen="TCP6-LISTEN:$SOCAT_PORT,reuseaddr" dst="[$PEER_IP6]:$SOCAT_PORT"
  fi
  if [ "$delay" != 0 ]; then
    listen+=",rcvbuf=4096" out="SYSTEM:sleep $delay; cat >$work/$name.out"
  fi
  echo "== case $name: send_file${*:+ $*}, $mb MiB -> the kernel's socat${READER_DELAY:+ (reading after ${delay} s, 4 KiB receive buffer)}"
  tapns_spawn "$work/$name.socat.log" socat -u "$listen" "$out"
  socat_pid=$TAPNS_LAST_PID
  wait_listening "$SOCAT_PORT"
  tapns_spawn "$work/$name.log" "$SEND" --tap-iface "$WEIR_TAP" --ip "$WEIR_IP4" --ip6 "$WEIR_IP6" \
    --connect "$dst" --mb "$mb" --seed 7 --stats-json "$work/$name.json" "$@"
  send_pid=$TAPNS_LAST_PID
  # The kernel gets its address once the tap exists; send_file's ARP requests (or
  # neighbour solicitations) repeat until it answers.
  tapns_wait_tap
  wait_for "$send_pid" 120
  local send_rc=$RC
  grep -E '^send_file' "$work/$name.log" | sed 's/^/       /' || true
  wait_for "$socat_pid" 10
  check "$name: send_file exits 0" eq "$send_rc" 0
  check "$name: socat ended by itself (the connection closed)" eq "$ENDED/$RC" yes/0
  check "$name: send_file wrote $mb MiB" eq "$(j "$name" .send_bytes)" $((mb << 20))
  check "$name: socat wrote $mb MiB" eq "$(stat -c %s "$work/$name.out")" $((mb << 20))
  check "$name: SHA-256 of socat's file equals send_file's" \
    eq "$(sha "$work/$name.out")" "$(j "$name" .send_sha256)"
  check "$name: every byte written was sent once (tcp_bytes_sent)" \
    eq "$(j "$name" .tcp_bytes_sent)" $((mb << 20))
  check "$name: the connection ended in TIME-WAIT, not reset" \
    eq "$(j "$name" '"\(.send_complete) \(.connections_reset)"')" "true 0"
  if [ "${FAMILY:-4}" = 4 ]; then
    check "$name: the kernel's address resolved by ARP, one active open" \
      eq "$(j "$name" '"\(.peer_resolved) \(.arp_requests > 0) \(.tcp_active_opens)"')" "true true 1"
  else
    check "$name: the kernel's address resolved by neighbour discovery, one active open" \
      eq "$(j "$name" '"\(.peer_resolved) \(.arp_requests > 0) \(.tcp_active_opens)"')" "true true 1"
  fi
  check "$name: every mbuf returned (mbufs_in_use_at_exit)" eq "$(j "$name" .mbufs_in_use_at_exit)" 0
  no_refusal "$name"
  rm -f "$work/$name.out"
}

# echo_case NAME CONNS MB [echo options...]: CONNS kernel clients of the echo server.
echo_case() {
  local name=$1 conns=$2 mb=$3 echo_pid i
  shift 3
  echo "== case $name: echo${*:+ $*}, $conns connections x $mb MiB each way, at once"
  tapns_spawn "$work/$name.log" "$ECHO" --tap-iface "$WEIR_TAP" --ip "$WEIR_IP4" --ip6 "$WEIR_IP6" \
    --port "$ECHO_PORT" --stats-json "$work/$name.json" "$@"
  echo_pid=$TAPNS_LAST_PID
  local dst="TCP4:$WEIR_IP4:$ECHO_PORT" ip=$WEIR_IP4
  [ "${FAMILY:-4}" = 4 ] || dst="TCP6:[$WEIR_IP6]:$ECHO_PORT" ip=$WEIR_IP6
  tapns_wait_tap
  tapns_wait_reachable "$ip" 30
  local pids=()
  for i in $(seq "$conns"); do
    head -c $((mb << 20)) /dev/urandom >"$work/$name.in$i"
    # One socat per connection, both directions: it sends the file while it writes what
    # comes back; after the file's end it shuts down its write side and waits (-t) for
    # the server's FIN.
    tapns_spawn "$work/$name.client$i.log" socat -b65536 -t 120 \
      "OPEN:$work/$name.in$i,rdonly!!OPEN:$work/$name.out$i,creat,trunc,wronly" \
      "$dst"
    pids+=("$TAPNS_LAST_PID")
  done
  local ok=0
  for i in $(seq "$conns"); do
    wait_for "${pids[$((i - 1))]}" 120
    if [ "$RC" = 0 ] && [ "$(sha "$work/$name.in$i")" = "$(sha "$work/$name.out$i")" ]; then
      ok=$((ok + 1))
    else
      echo "       connection $i: socat status $RC, $(stat -c %s "$work/$name.out$i") of $((mb << 20)) bytes back" >&2
      sed 's/^/       /' "$work/$name.client$i.log" >&2
    fi
  done
  kill -INT "$echo_pid"
  wait_for "$echo_pid" 30
  grep -E '^echo' "$work/$name.log" | sed 's/^/       /' || true
  check "$name: echo exits 0" eq "$RC" 0
  check "$name: every connection's echo has its input's SHA-256" eq "$ok" "$conns"
  local bytes=$((conns * (mb << 20)))
  check "$name: the server received and echoed every byte" \
    eq "$(j "$name" '"\(.tcp_bytes_in_order) \(.echo_bytes) \(.tcp_bytes_sent)"')" "$bytes $bytes $bytes"
  check "$name: every connection closed cleanly" \
    eq "$(j "$name" '"\(.echo_connections) \(.echo_closed) \(.echo_reset) \(.echo_open_at_stop)"')" \
    "$conns $conns 0 0"
  check "$name: every mbuf returned (mbufs_in_use_at_exit)" eq "$(j "$name" .mbufs_in_use_at_exit)" 0
  no_refusal "$name"
  local zc=true how="without a copy (recv_bufs, send_bufs)"
  if [[ " $* " == *" --copy "* ]]; then zc=false how="through a copy (--copy)"; fi
  check "$name: echoed $how" eq "$(j "$name" .echo_zero_copy)" $zc
  # The queues are sized to the pool (apps::net's size_tcp): writes never found it empty.
  check "$name: the pool never ran dry (no send allocation failure)" \
    eq "$(j "$name" .tcp_send_alloc_failures)" 0
  echo "       $(j "$name" '"\(.echo_blocked_writes) writes waited for Writable (send buffer full); at most \(.mbufs_in_use_peak) mbufs in use"')"
  rm -f "$work/$name".in* "$work/$name".out*
}

send_case send "$SEND_MB"
echo_case echo "$ECHO_CONNS" "$ECHO_MB"
send_case send_impaired "$IMPAIRED_SEND_MB" --impair "$IMPAIR,seed=11"
impaired_checks send_impaired
echo_case echo_impaired "$ECHO_CONNS" "$IMPAIRED_ECHO_MB" --impair "$IMPAIR,seed=12"
impaired_checks echo_impaired

# The send buffer and the peer's window as the limits: writes that wait for Writable,
# and a window the kernel closes.
echo_case echo_small_sndbuf "$SMALL_CONNS" "$SMALL_MB" --snd-buf 16384
echo_case echo_copy "$ECHO_CONNS" "$SMALL_MB" --copy
# How many writes waited depends on how far the kernel's clients run ahead of the echo
# (their speed against weir's), so it is printed, not asserted; the digests above are the
# check that no byte was lost while writes waited.
echo "       echo_small_sndbuf: $(j echo_small_sndbuf .echo_blocked_writes) writes waited for Writable"
READER_DELAY=2 send_case send_zero_window "$SMALL_MB"
check "send_zero_window: zero-window probes sent" gt "$(j send_zero_window .tcp_window_probes)" 0

# IPv6: an active open and a passive one.
FAMILY=6 send_case send_ipv6 "$V6_MB"
FAMILY=6 echo_case echo_ipv6 2 "$SMALL_MB"

e2e_finish
