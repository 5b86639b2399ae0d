#!/usr/bin/env bash
# weir-serve against the clients people already have: Debian's sockperf, socat, iperf3,
# tbench (dbench), wrk and curl in a network namespace this script creates, talking to
# weir-serve on DPDK's net_tap (weir is 198.18.0.1 on the tap, the kernel 198.18.0.2, as
# scripts/lib/tapns.sh sets up; each weir-serve run makes its own tap). The same clients
# then run against the kernel's own servers (sockperf server, socat, iperf3 -s,
# tbench_srv, a Python HTTP/1.1 server) in a second namespace, 198.18.2.1, reached from
# the clients' namespace (198.18.2.2) over a veth pair, so both servers are one virtual
# link away; each client's figure is printed beside weir's.
#
# - sockperf: ping-pong and under-load --tcp against --app sockperf, and ping-pong again
#   through --impair loss=1%,reorder=2%,dup=1% (both of weir's directions): sockperf's own
#   count of dropped, duplicated and out-of-order replies must be 0; latency printed.
# - echo: ECHO_CONNS socat clients at once each send ECHO_MB MiB to --app echo and read it
#   back; each echo's SHA-256 must equal its input's, weir must have taken and written
#   every byte; the same through --impair.
# - iperf3: -c, -R, --bidir, -P 4 and -R -w 64K (-t 2, -J) against --app iperf3; per direction the
#   client's byte counts must agree with weir's session report (the server's count is the
#   client's "received" forward and its "sent" with -R, and weir records the client's
#   own count of each stream); bits/s printed.
# - tbench 4 (-t 3) against --app tbench: tbench ends without "lost sync"; MB/s printed.
# - socat sends SINK_MB MiB to --app sink --digest: weir's digest is the file's SHA-256.
#   Then WRITE_MB MiB to --app sink --write-dir: the connection's one file (named by its
#   4-tuple) has the sent data's SHA-256; and FULL_MB MiB into a --write-dir on a 1 MiB
#   tmpfs: weir-serve logs ENOSPC with the file's name, reports the file incomplete, resets
#   the connection (socat's write fails) and exits 0; a --write-dir that does not exist, or
#   given to another app, is refused at start-up.
# - wrk -c 64 (-d 3) against --app http: no socket error, every response a 200 (wrk's
#   and weir's counts); requests/s printed.
# - curl fetches a 10 MiB body from --app http: its size and SHA-256 equal the body
#   pattern's (apps/src/serve/http.rs, `fill_body`); MB/s printed.
# - queues: QUEUE_CONNS socat clients at once against --app echo --queues 2 (net_tap with
#   two queues: the kernel's tun picks a queue per flow), every byte checked as above; the
#   per-core figures must add up to the totals (which cores worked is printed, not
#   asserted: tun's choice depends on the flows' hashes, which the clients' ephemeral
#   ports make random); the same through --impair (each core has its own stages, whose
#   counts must add up too). --app iperf3 --queues 2 is refused with its reason.
# - capture: --pcap and --metrics on one --app echo --queues 2 run: tshark sees the TCP
#   frames both ways and the file's frames are weir's count of them (weir-sink's
#   accounting: seen = written + left out per direction); the Prometheus endpoint answers
#   as weir-sink's does (scripts/e2e/ops.sh's checks) and its TCP totals, overall and per
#   core, equal --stats-json's.
# - ipv6: echo (socat TCP6) and HTTP (curl -6) to weir's IPv6 address, byte for byte.
#
# Every weir-serve run: exit status 0, every mbuf back in the pool, no engine error (but
# where one is the point). Figures that depend on speed are printed, never asserted.
# About 2 minutes here. Needs root, /dev/net/tun and the clients (scripts/setup.sh);
# fails (never skips) without them.
#
#   scripts/e2e/serve.sh [PART...]     PART: sockperf echo iperf3 tbench sink http queues
#                                      capture ipv6 (default: all)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh
# shellcheck source=scripts/lib/e2e.sh
. scripts/lib/e2e.sh
# shellcheck source=scripts/lib/prom.sh
. scripts/lib/prom.sh

# IPv6 from the documentation prefix (RFC 3849), for weir and the kernel on the tap.
WEIR_IP6=2001:db8::1 PEER_IP6=2001:db8::2
SERVE=${CARGO_TARGET_DIR:-target}/release/weir-serve
KERNEL_IP4=198.18.2.1 CLIENT_VETH_IP4=198.18.2.2
ECHO_CONNS=4 ECHO_MB=8 IMPAIRED_ECHO_MB=2 SINK_MB=50 QUEUE_CONNS=8 QUEUE_MB=4 WRITE_MB=200
# The metrics endpoint: the clients' namespace's address on the veth (it exists before
# weir-serve starts; the tap's addresses come after).
METRICS_ADDR=198.18.2.2:9108
# More than the writer's free list (16 MiB, apps/src/serve/write_dir.rs) and the 1 MiB
# tmpfs: weir cannot have consumed it all before its writer meets the full disk, however
# the threads are scheduled, so socat is always still writing when the RST comes.
FULL_MB=32
BODY_LEN=$((10 << 20))
IMPAIR=loss=1%,reorder=2%,dup=1%

PARTS=${*:-sockperf echo iperf3 tbench sink http queues capture ipv6}
part() { [[ " $PARTS " == *" $1 "* ]]; }

tapns_require
for t in socat jq sha256sum ping sockperf iperf3 tbench tbench_srv wrk curl python3 tshark; do
  command -v "$t" >/dev/null || die "$t is missing: run scripts/setup.sh"
done
echo "== building weir-serve (release)"
cargo build --release -q -p apps --bin weir-serve
work=$(mktemp -d /tmp/weir-serve.XXXXXX)
tapns_create
# The kernel's servers: their own namespace, a veth pair to the clients' one.
KERNEL_NS=$WEIR_NS-kernel
kernel_cleanup() {
  ip netns pids "$KERNEL_NS" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns del "$KERNEL_NS" 2>/dev/null || true
}
trap 'kernel_cleanup; tapns_cleanup; umount "$work/tiny" 2>/dev/null || true; rm -rf "$work"' EXIT
ip netns add "$KERNEL_NS"
ip -n "$KERNEL_NS" link set lo up
ip link add weirveth0 netns "$WEIR_NS" type veth peer name weirveth1 netns "$KERNEL_NS"
ip -n "$WEIR_NS" addr add "$CLIENT_VETH_IP4/24" dev weirveth0
ip -n "$KERNEL_NS" addr add "$KERNEL_IP4/24" dev weirveth1
ip -n "$WEIR_NS" link set weirveth0 up
ip -n "$KERNEL_NS" link set weirveth1 up

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

# wait_listening PORT: until a kernel server listens on PORT in its namespace.
wait_listening() {
  for _ in $(seq 200); do
    [ -n "$(ip netns exec "$KERNEL_NS" ss -Hltn "( sport = :$1 )")" ] && return 0
    sleep 0.05
  done
  echo "       the kernel server's output:" >&2
  sed 's/^/       /' "$KERNEL_LOG" >&2 || true
  die "no kernel server listens on port $1"
}

j() { jq -r "$2" "$work/$1.json"; }
# body_sha N: the SHA-256 of --app http's first N body bytes (apps/src/serve/http.rs,
# `fill_body`: each 16 bytes are their offset in 15 hex digits and a newline).
body_sha() {
  python3 - "$1" <<'EOF'
import hashlib, sys
n = int(sys.argv[1])
b = bytearray()
off = 0
while len(b) < n:
    b += b"%015x\n" % off
    off += 16
print(hashlib.sha256(bytes(b[:n])).hexdigest())
EOF
}
# A --write-dir file's name: the kernel's address and port, weir's, the start in ns.
WRITE_DIR_NAME_RE='198\.18\.0\.2_[0-9]+-198\.18\.0\.1_5001-[0-9]+\.bin'
sha() { sha256sum <"$1" | cut -d' ' -f1; }
# num_after FILE TEXT: the first number after TEXT in FILE ("none" if absent).
num_after() {
  awk -v k="$2" 'i = index($0, k) { s = substr($0, i + length(k)); if (match(s, /[0-9]+(\.[0-9]+)?/)) { print substr(s, RSTART, RLENGTH); exit } }' "$1" |
    grep . || echo none
}
# figure LABEL WEIR KERNEL UNIT: one line of figures, weir's beside the kernel's.
figure() {
  printf '       %-34s weir %12s   kernel %12s  %s\n' "$1" "$2" "$3" "$4"
}

# serve_start NAME [weir-serve options...]: weir-serve in the namespace, reachable.
serve_start() {
  local name=$1
  shift
  tapns_spawn "$work/$name.log" "$SERVE" --tap-iface "$WEIR_TAP" --ip "$WEIR_IP4" --ip6 "$WEIR_IP6" \
    --stats-json "$work/$name.json" "$@"
  SERVE_PID=$TAPNS_LAST_PID
  tapns_wait_tap
  tapns_wait_reachable "$WEIR_IP4" 30
}

# serve_stop NAME [ERRORS]: stops weir-serve (SIGINT) and checks every run's invariants;
# ERRORS is how many engine errors the run expects (default 0).
serve_stop() {
  local name=$1 errors=${2:-0}
  kill -INT "$SERVE_PID"
  wait_for "$SERVE_PID" 30
  grep -E '^(weir-serve|  )' "$work/$name.log" | grep -v '^  session' | sed 's/^/       /' || true
  check "$name: weir-serve exits 0" eq "$RC" 0
  check "$name: every mbuf returned (mbufs_in_use_at_exit)" eq "$(j "$name" .mbufs_in_use_at_exit)" 0
  no_refusal "$name"
  check "$name: $errors engine errors" eq "$(j "$name" .serve.app_errors)" "$errors"
}

# kernel_start LOG CMD...: a kernel server in its namespace, in the background.
kernel_start() {
  local log=$1
  shift
  KERNEL_LOG=$log
  ip netns exec "$KERNEL_NS" "$@" >"$log" 2>&1 &
  KERNEL_PID=$!
}
kernel_stop() {
  kill "$KERNEL_PID" 2>/dev/null || true
  wait "$KERNEL_PID" 2>/dev/null || true
}

# run_client NAME SECONDS CMD...: a client in the namespace; its output in
# $work/NAME.out, its exit status checked.
run_client() {
  local name=$1 limit=$2 rc=0
  shift 2
  timeout "$limit" ip netns exec "$WEIR_NS" "$@" >"$work/$name.out" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    echo "       $name: exit status $rc; its output:" >&2
    tail -20 "$work/$name.out" | sed 's/^/       /' >&2
  fi
  check "$name: $1 exits 0" eq "$rc" 0
}

# ---- sockperf -------------------------------------------------------------------------
if part sockperf; then

# sockperf_checks NAME: sockperf counted no lost, repeated or reordered reply.
sockperf_checks() {
  local f=$work/$1.out
  check "$1: a latency summary" test "$(num_after "$f" 'Summary: Latency is')" != none
  check "$1: no dropped, duplicated or out-of-order reply (sockperf's count)" \
    eq "$(num_after "$f" '# dropped messages =')/$(num_after "$f" '# duplicated messages =')/$(num_after "$f" '# out-of-order messages =')" 0/0/0
}

SP_PING=(sockperf ping-pong --tcp -p 11111 -t 2)
SP_LOAD=(sockperf under-load --tcp -p 11111 -t 2 --mps 10000)
echo "== sockperf against --app sockperf, then sockperf server"
serve_start sockperf --app sockperf
run_client sockperf_ping 20 "${SP_PING[@]}" -i "$WEIR_IP4"
sockperf_checks sockperf_ping
run_client sockperf_load 20 "${SP_LOAD[@]}" -i "$WEIR_IP4"
sockperf_checks sockperf_load
serve_stop sockperf
check "sockperf: weir answered messages" gt "$(j sockperf .app_counters.replies)" 0
kernel_start "$work/sockperf_server.log" sockperf server --tcp -i "$KERNEL_IP4" -p 11111
wait_listening 11111
run_client sockperf_ping_kernel 20 "${SP_PING[@]}" -i "$KERNEL_IP4"
run_client sockperf_load_kernel 20 "${SP_LOAD[@]}" -i "$KERNEL_IP4"
kernel_stop
for m in ping load; do
  for k in 'Summary: Latency is:average' 'percentile 50.000 =:p50' 'percentile 99.000 =:p99'; do
    figure "sockperf $m --tcp latency, ${k##*:}" "$(num_after "$work/sockperf_$m.out" "${k%:*}")" \
      "$(num_after "$work/sockperf_${m}_kernel.out" "${k%:*}")" "usec (half the round trip)"
  done
done

echo "== sockperf ping-pong against --app sockperf --impair $IMPAIR"
serve_start sockperf_impaired --app sockperf --impair "$IMPAIR,seed=21"
run_client sockperf_ping_impaired 30 "${SP_PING[@]}" -i "$WEIR_IP4"
sockperf_checks sockperf_ping_impaired
serve_stop sockperf_impaired
check "sockperf_impaired: the stages dropped frames both ways and weir retransmitted" \
  eq "$(j sockperf_impaired '.impairment.dropped > 0 and .impairment_tx.dropped > 0 and .tcp_retransmits > 0')" true
fi

# ---- echo -----------------------------------------------------------------------------

# echo_clients NAME CONNS MB DST: CONNS socat clients at once, each sending MB MiB to DST
# and writing what comes back; OK is how many got their input back whole, SECS the time.
echo_clients() {
  local name=$1 conns=$2 mb=$3 dst=$4 i pids=() t0
  for i in $(seq "$conns"); do head -c $((mb << 20)) /dev/urandom >"$work/$name.in$i"; done
  t0=$(date +%s.%N)
  for i in $(seq "$conns"); do
    tapns_spawn "$work/$name.client$i.log" socat -b65536 -t 60 \
      "OPEN:$work/$name.in$i,rdonly!!OPEN:$work/$name.out$i,creat,trunc,wronly" "$dst"
    pids+=("$TAPNS_LAST_PID")
  done
  OK=0
  for i in $(seq "$conns"); do
    wait_for "${pids[$((i - 1))]}" 120
    if [ "$RC" = 0 ] && [ "$(sha "$work/$name.in$i")" = "$(sha "$work/$name.out$i")" ]; then
      OK=$((OK + 1))
    else
      echo "       connection $i: socat status $RC, $(stat -c %s "$work/$name.out$i") of $((mb << 20)) bytes back" >&2
    fi
  done
  SECS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  rm -f "$work/$name".in* "$work/$name".out*
}

# echo_case NAME MB [weir-serve options...]: CONNS (default ECHO_CONNS) clients of
# --app echo at DST (default weir's IPv4 address); BEFORE_STOP, if set, is called with
# NAME once the clients are done.
echo_case() {
  local name=$1 mb=$2 conns=${CONNS:-$ECHO_CONNS} dst=${DST:-TCP4:$WEIR_IP4:7007}
  shift 2
  echo "== $conns socat clients x $mb MiB each way against --app echo${*:+ $*} ($dst)"
  serve_start "$name" --app echo "$@"
  echo_clients "$name" "$conns" "$mb" "$dst"
  ECHO_SECS=$SECS
  [ -z "${BEFORE_STOP:-}" ] || "$BEFORE_STOP" "$name"
  serve_stop "$name"
  check "$name: every connection's echo has its input's SHA-256" eq "$OK" "$conns"
  local bytes=$((conns * (mb << 20)))
  check "$name: weir took and wrote every byte (bytes_in, bytes_out, tcp_bytes_sent)" \
    eq "$(j "$name" '"\(.serve.bytes_in) \(.serve.bytes_out) \(.tcp_bytes_sent)"')" "$bytes $bytes $bytes"
  check "$name: every connection closed cleanly" \
    eq "$(j "$name" '"\(.serve.connections) \(.serve.closed) \(.serve.reset) \(.serve.open_at_stop)"')" \
    "$conns $conns 0 0"
}

if part echo; then
echo_case echo "$ECHO_MB"
# A thread per connection that writes back what it reads (socat's PIPE address can
# stall with both directions full).
cat >"$work/kernel_echo.py" <<'EOF'
import socket, sys, threading

def serve(c):
    with c:
        while data := c.recv(65536):
            c.sendall(data)

s = socket.create_server((sys.argv[1], int(sys.argv[2])), reuse_port=True)
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
EOF
kernel_start "$work/echo_kernel.log" python3 "$work/kernel_echo.py" "$KERNEL_IP4" 7007
wait_listening 7007
echo_clients echo_kernel "$ECHO_CONNS" "$ECHO_MB" "TCP4:$KERNEL_IP4:7007"
kernel_stop
check "echo_kernel: the kernel's echo server returned every byte too" eq "$OK" "$ECHO_CONNS"
check "echo: weir-serve counted its busy time (loop_busy_ns)" gt "$(j echo .loop_busy_ns)" 0
figure "echo, $ECHO_CONNS x $ECHO_MB MiB each way" "$ECHO_SECS" "$SECS" "seconds (a Python echo server for the kernel)"
echo_case echo_impaired "$IMPAIRED_ECHO_MB" --impair "$IMPAIR,seed=22"
check "echo_impaired: weir retransmitted" gt "$(j echo_impaired .tcp_retransmits)" 0
fi

# ---- iperf3 ---------------------------------------------------------------------------
if part iperf3; then

# iperf3_checks NAME MODE: the client's JSON ($work/NAME.out) against weir's session
# report. MODE: fwd (weir receives), rev (weir sends), bidir (both).
iperf3_checks() {
  local name=$1 mode=$2 c=$work/$1.out s
  check "$name: iperf3 reports no error" eq "$(jq -r '.error // "none"' "$c")" none
  s=$(j iperf3 "[.sessions[] | select(.cookie == \"$(jq -r .start.cookie "$c")\")] | first")
  check "$name: weir finished the session" eq "$(jq -r '.completed' <<<"$s")" true
  local w_recv w_sent c_sent_to_us c_recv_from_us
  w_recv=$(jq '[.streams[] | select(.sender | not) | .bytes] | add // 0' <<<"$s")
  w_sent=$(jq '[.streams[] | select(.sender) | .bytes] | add // 0' <<<"$s")
  c_sent_to_us=$(jq '[.streams[] | select(.sender | not) | .client_bytes] | add // 0' <<<"$s")
  c_recv_from_us=$(jq '[.streams[] | select(.sender) | .client_bytes] | add // 0' <<<"$s")
  local up=sum_sent upr=sum_received down=sum_sent downr=sum_received
  [ "$mode" = bidir ] && down=sum_sent_bidir_reverse downr=sum_received_bidir_reverse
  if [ "$mode" != rev ]; then
    check "$name: the client's received count is weir's ($w_recv bytes)" eq "$(jq ".end.$upr.bytes" "$c")" "$w_recv"
    check "$name: weir recorded the client's sent count" eq "$c_sent_to_us" "$(jq ".end.$up.bytes" "$c")"
    check "$name: weir received at most what the client sent" test "$w_recv" -le "$c_sent_to_us"
  fi
  if [ "$mode" != fwd ]; then
    check "$name: the client's sent count is weir's ($w_sent bytes)" eq "$(jq ".end.$down.bytes" "$c")" "$w_sent"
    check "$name: weir recorded the client's received count" eq "$c_recv_from_us" "$(jq ".end.$downr.bytes" "$c")"
    check "$name: the client received at most what weir sent" test "$c_recv_from_us" -le "$w_sent"
  fi
}
# bps FILE KEY: end.KEY.bits_per_second in Mbit/s.
bps() { jq -r ".end.$2.bits_per_second / 1e6 | floor" "$1"; }

echo "== iperf3 -c, -R, --bidir, -P 4, -R -w 64K against --app iperf3, then iperf3 -s"
# The fifth is field report 002's command.
IPERF_CASES=("fwd:" "rev:-R" "bidir:--bidir" "fwd:-P 4" "rev:-R -w 64K")
# Room for a second test while the last one's streams are still closing: the clients run
# one after another, and a client that finds the previous session winding down would be
# told the server is busy (iperf3's own server runs one test at a time).
serve_start iperf3 --app iperf3 --iperf3-max-sessions=4
for k in "${!IPERF_CASES[@]}"; do
  opts=${IPERF_CASES[$k]#*:}
  # shellcheck disable=SC2086 # the options are words
  run_client "iperf3_$k" 30 iperf3 -c "$WEIR_IP4" -t 2 -J $opts
done
serve_stop iperf3
for k in "${!IPERF_CASES[@]}"; do
  iperf3_checks "iperf3_$k" "${IPERF_CASES[$k]%%:*}"
done
check "iperf3: ${#IPERF_CASES[@]} sessions, all completed" \
  eq "$(j iperf3 '"\(.app_counters.sessions) \(.app_counters.sessions_completed)"')" "${#IPERF_CASES[@]} ${#IPERF_CASES[@]}"
check "iperf3: -w 64K recorded by its session only" eq "$(j iperf3 '[.sessions[] | select(.window == 65536)] | length')" 1
check "iperf3: -w 64K applied to its one data stream (SO_SNDBUF, SO_RCVBUF), no other" \
  eq "$(j iperf3 .serve.options_applied)" 1
kernel_start "$work/iperf3_server.log" iperf3 -s -B "$KERNEL_IP4"
wait_listening 5201
for k in "${!IPERF_CASES[@]}"; do
  opts=${IPERF_CASES[$k]#*:}
  # shellcheck disable=SC2086
  run_client "iperf3_kernel_$k" 30 iperf3 -c "$KERNEL_IP4" -t 2 -J $opts
done
kernel_stop
for k in "${!IPERF_CASES[@]}"; do
  mode=${IPERF_CASES[$k]%%:*} opts=${IPERF_CASES[$k]#*:}
  key=sum_received what="the client to the server"
  [ "$mode" = rev ] && what="the server to the client"
  [ "$mode" = bidir ] && key=sum_received_bidir_reverse what="the server to the client, beside the other way"
  figure "iperf3 -c ${opts:-(forward)}" "$(bps "$work/iperf3_$k.out" "$key")" \
    "$(bps "$work/iperf3_kernel_$k.out" "$key")" "Mbit/s received, $what"
done
fi

# ---- tbench ---------------------------------------------------------------------------
if part tbench; then

echo "== tbench 4 against --app tbench, then tbench_srv"
serve_start tbench --app tbench
run_client tbench 60 tbench -t 3 4 "$WEIR_IP4"
serve_stop tbench
tbench_ok() { [ "$(num_after "$work/tbench.out" Throughput)" != none ] && ! grep -q 'lost sync' "$work/tbench.out"; }
check "tbench: a throughput figure, no lost sync" tbench_ok
check "tbench: 4 connections, every one closed" \
  eq "$(j tbench '"\(.serve.connections) \(.serve.closed)"')" "4 4"
kernel_start "$work/tbench_srv.log" tbench_srv
wait_listening 7003
run_client tbench_kernel 60 tbench -t 3 4 "$KERNEL_IP4"
kernel_stop
figure "tbench 4" "$(num_after "$work/tbench.out" Throughput)" "$(num_after "$work/tbench_kernel.out" Throughput)" "MB/s"
fi

# ---- sink ----------------------------------------------------------------------------
if part sink; then
echo "== socat sends SINK_MB MiB to --app sink --digest" | sed "s/SINK_MB/$SINK_MB/"
serve_start sink --app sink --digest
head -c $((SINK_MB << 20)) /dev/urandom >"$work/sink.in"
run_client sink_socat 60 socat -u "OPEN:$work/sink.in,rdonly" "TCP4:$WEIR_IP4:5001"
wait_senders_done 30
serve_stop sink
check "sink: weir's digest of the connection is the file's SHA-256" \
  eq "$(j sink '[.digests[] | select(.end == "closed") | .sha256] | first // "none"')" "$(sha "$work/sink.in")"
check "sink: weir consumed every byte" eq "$(j sink .serve.bytes_in)" $((SINK_MB << 20))
rm -f "$work/sink.in"

echo "== --write-dir refused at start-up: another app, a missing directory"
rc=0
"$SERVE" --app echo --write-dir "$work" >"$work/wd_echo.out" 2>&1 || rc=$?
check "write-dir: refused for --app echo (status 2, the reason)" \
  eq "$rc $(grep -c 'write-dir is an option of --app sink only' "$work/wd_echo.out")" "2 1"
rc=0
"$SERVE" --app sink --write-dir "$work/missing" >"$work/wd_missing.out" 2>&1 || rc=$?
check "write-dir: a missing directory is refused (status 1, the reason)" \
  eq "$rc $(grep -c "write-dir $work/missing: cannot use it: No such file or directory" "$work/wd_missing.out")" "1 1"

echo "== socat sends $WRITE_MB MiB to --app sink --digest --write-dir"
mkdir "$work/files"
serve_start sink_files --app sink --digest --write-dir "$work/files"
head -c $((WRITE_MB << 20)) /dev/urandom >"$work/sink.in"
want=$(sha "$work/sink.in")
run_client sink_files_socat 300 socat -u "OPEN:$work/sink.in,rdonly" "TCP4:$WEIR_IP4:5001"
rm -f "$work/sink.in"
wait_senders_done 60
serve_stop sink_files
check "sink_files: one file, complete, every byte written" \
  eq "$(j sink_files '"\(.files | length) \(.files[0].complete) \(.files[0].written)"')" "1 true $((WRITE_MB << 20))"
file=$(j sink_files '.files[0].path')
check "sink_files: the file is named by the 4-tuple and start time" \
  eq "$(basename "$file" | grep -cE "^$WRITE_DIR_NAME_RE\$")" 1
check "sink_files: the file's SHA-256 is the sent data's" eq "$(sha "$file")" "$want"
check "sink_files: weir's digest of the connection is the sent data's" eq "$(j sink_files '.digests[0].sha256')" "$want"
rm -rf "$work/files"

echo "== socat sends $FULL_MB MiB to --app sink --write-dir on a 1 MiB tmpfs"
mkdir "$work/tiny"
mount -t tmpfs -o size=1m weir-serve-tiny "$work/tiny"
serve_start sink_full --app sink --write-dir "$work/tiny"
head -c $((FULL_MB << 20)) /dev/urandom >"$work/full.in"
rc=0
timeout 60 ip netns exec "$WEIR_NS" socat -u "OPEN:$work/full.in,rdonly" "TCP4:$WEIR_IP4:5001" \
  >"$work/sink_full_socat.out" 2>&1 || rc=$?
rm -f "$work/full.in"
sed 's/^/       socat: /' "$work/sink_full_socat.out"
check "sink_full: socat's transfer failed (status $rc; 124 would be a hang)" \
  test "$rc" != 0 -a "$rc" != 124
check "sink_full: socat saw the connection reset" \
  grep -qE 'Connection reset by peer|Broken pipe' "$work/sink_full_socat.out"
serve_stop sink_full
grep -F -- '--write-dir:' "$work/sink_full.log" | sed 's/^/       /' || true
check "sink_full: weir-serve logged ENOSPC with the file's name" \
  grep -qE "cannot write $work/tiny/$WRITE_DIR_NAME_RE: No space left on device" "$work/sink_full.log"
check "sink_full: its summary names the incomplete file" \
  grep -q "incomplete file $work/tiny/" "$work/sink_full.log"
check "sink_full: one write error, the file incomplete with its error, the connection reset" \
  eq "$(j sink_full '"\(.app_counters.write_errors) \(.files[0].complete) \(.files[0].error != null) \(.serve.reset)"')" \
  "1 false true 1"
check "sink_full: the file's size is what weir says it wrote" \
  eq "$(stat -c %s "$(j sink_full '.files[0].path')")" "$(j sink_full '.files[0].written')"
check "sink_full: no panic" test "$(grep -c panicked "$work/sink_full.log")" = 0
umount "$work/tiny"
fi

# ---- HTTP -----------------------------------------------------------------------------
if part http; then

# The kernel's HTTP/1.1 server: keep-alive, GET / answers BODY bytes of weir's pattern.
cat >"$work/kernel_http.py" <<'EOF'
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

addr, port, length = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
body = bytearray()
off = 0
while len(body) < length:
    body += b"%015x\n" % off
    off += 16
body = bytes(body[:length])

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the head and the body are two writes; with Nagle the body waits for
    # the client's delayed ACK of the head.
    disable_nagle_algorithm = True

    def do_GET(self):
        ok = self.path.split("?")[0] == "/"
        data = body if ok else b"not found\n"
        self.send_response(200 if ok else 404)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass

ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer((addr, port), Handler).serve_forever()
EOF
body_sha "$BODY_LEN" >"$work/body.sha"

echo "== wrk -c 64 against --app http, then a Python HTTP/1.1 server"
WRK=(wrk -t 2 -c 64 -d 3)
# 64 connections (and wrk's probe) need more than the default pool holds at full queues.
serve_start http --app http --http-body 1024 --mbufs 65535
run_client wrk 30 "${WRK[@]}" "http://$WEIR_IP4:8080/"
serve_stop http
check "wrk: no socket errors, no non-2xx response" \
  eq "$(grep -cE 'Socket errors|Non-2xx' "$work/wrk.out" || true)" 0
wrk_requests=$(awk '/ requests in / { print $1 }' "$work/wrk.out")
check "wrk: every request weir answered was a 200 (responses_other 0)" \
  eq "$(j http '"\(.app_counters.responses_other) \(.app_counters.responses_200 > 0)"')" "0 true"
check "wrk: weir answered at least the requests wrk counted ($wrk_requests)" \
  test "$(j http .app_counters.responses_200)" -ge "${wrk_requests:-1}"
kernel_start "$work/http_kernel.log" python3 "$work/kernel_http.py" "$KERNEL_IP4" 8080 1024
wait_listening 8080
run_client wrk_kernel 30 "${WRK[@]}" "http://$KERNEL_IP4:8080/"
kernel_stop
figure "wrk -c 64, 1 KiB body" "$(num_after "$work/wrk.out" 'Requests/sec:')" \
  "$(num_after "$work/wrk_kernel.out" 'Requests/sec:')" "requests/s (Python's server for the kernel)"

echo "== curl fetches a 10 MiB body from --app http, then from the Python server"
serve_start http_body --app http --http-body "$BODY_LEN"
run_client curl 30 curl -sS --fail -o "$work/body" -w '%{speed_download}\n' "http://$WEIR_IP4:8080/"
check "curl: the body is $BODY_LEN bytes" eq "$(stat -c %s "$work/body")" "$BODY_LEN"
check "curl: the body's SHA-256 is the pattern's" eq "$(sha "$work/body")" "$(cat "$work/body.sha")"
serve_stop http_body
kernel_start "$work/http_kernel_body.log" python3 "$work/kernel_http.py" "$KERNEL_IP4" 8080 "$BODY_LEN"
wait_listening 8080
run_client curl_kernel 30 curl -sS --fail -o "$work/body_kernel" -w '%{speed_download}\n' "http://$KERNEL_IP4:8080/"
kernel_stop
check "curl_kernel: the Python server's body is the same pattern" eq "$(sha "$work/body_kernel")" "$(cat "$work/body.sha")"
figure "curl, 10 MiB body" "$(awk '{ printf "%.0f", $1 / 1e6 }' "$work/curl.out")" \
  "$(awk '{ printf "%.0f", $1 / 1e6 }' "$work/curl_kernel.out")" "MB/s"
fi

# ---- queues ---------------------------------------------------------------------------

# per_core_sums NAME: each total's per-core figures added up, as "connections bytes_in
# bytes_out rx_packets tcp_bytes_sent".
per_core_sums() {
  j "$1" '[.per_core[] | [.serve.connections, .serve.bytes_in, .serve.bytes_out, .rx_packets, .tcp_bytes_sent]]
    | transpose | map(add) | map(tostring) | join(" ")'
}
per_core_check() {
  local name=$1
  check "$name: one per_core entry per queue (queues 0, 1)" eq "$(j "$name" '[.per_core[].queue] | map(tostring) | join(",")')" "0,1"
  check "$name: the cores' figures add up to the totals (connections, bytes in, bytes out, frames in, bytes sent)" \
    eq "$(per_core_sums "$name")" \
    "$(j "$name" '[.serve.connections, .serve.bytes_in, .serve.bytes_out, .rx_packets, .tcp_bytes_sent] | map(tostring) | join(" ")')"
  echo "       per core: $(j "$name" '[.per_core[] | "core \(.queue): \(.serve.connections) connections, \(.serve.bytes_in) bytes in"] | join("; ")')"
}

if part queues; then

# Which core a client lands on is tun's choice (a hash of the flow, whose ephemeral port
# is random): with QUEUE_CONNS flows both cores most likely work, but that is not
# asserted, only that the cores' figures account for every connection and byte.
CONNS=$QUEUE_CONNS echo_case echo_queues "$QUEUE_MB" --queues 2
per_core_check echo_queues
# Each core has its own pair of impairment stages (seeded apart).
CONNS=4 echo_case echo_queues_impaired "$IMPAIRED_ECHO_MB" --queues 2 --impair "$IMPAIR,seed=23"
per_core_check echo_queues_impaired
check "echo_queues_impaired: the receive stages' drops add up over the cores, and weir retransmitted" \
  eq "$(j echo_queues_impaired '(([.per_core[].impairment.dropped] | add) == .impairment.dropped) and .impairment.dropped > 0 and .impairment_tx.dropped > 0 and .tcp_retransmits > 0')" true

echo "== --app iperf3 --queues 2 is refused"
rc=0
"$SERVE" --app iperf3 --queues 2 >"$work/iperf3_queues.out" 2>&1 || rc=$?
check "iperf3 --queues 2: exit status 2 (a usage error)" eq "$rc" 2
check "iperf3 --queues 2: the error says why (sessions span connections)" \
  grep -q 'control connection and its data streams are separate connections' "$work/iperf3_queues.out"
fi

# ---- capture and metrics -------------------------------------------------------------
if part capture; then

# ts FILE FILTER: frames in FILE matching FILTER (counted by frame number, as ops.sh does:
# a summary line of random payload can hold a line break).
ts() { tshark -r "$1" -Y "$2" -T fields -e frame.number 2>/dev/null | wc -l | tr -d ' '; }
scrape() {
  # Cores publish 4 times a second; the publisher hands snapshots on every 100 ms.
  sleep 1.5
  tapns_exec curl -sS -D "$work/$1.headers" "http://$METRICS_ADDR/metrics" >"$work/$1.prom"
  tapns_exec curl -sS -o /dev/null -w '%{http_code}' "http://$METRICS_ADDR/nothing" >"$work/$1.404" || true
}
P=$work/capture.pcapng
BEFORE_STOP=scrape CONNS=4 echo_case capture 2 --queues 2 --pcap "$P" --metrics "$METRICS_ADDR"
per_core_check capture
check "capture: the file exists" test -s "$P"
check "capture: its section header names weir-serve as the writer" grep -qaE 'weir-serve [0-9]+\.[0-9]+' "$P"
in_tcp=$(ts "$P" "tcp && frame.p2p_dir==1") out_tcp=$(ts "$P" "tcp && frame.p2p_dir==0")
echo "       capture: $in_tcp TCP frames in, $out_tcp out; $(j capture .pcap_dropped) left out"
check "capture: tshark sees TCP frames in" gt "$in_tcp" 0
check "capture: tshark sees TCP frames out" gt "$out_tcp" 0
check "capture: tshark sees weir's SYN-ACKs" gt "$(ts "$P" "tcp.flags.syn==1 && tcp.flags.ack==1 && frame.p2p_dir==0")" 0
check "capture: received frames seen = written + left out" eq "$(j capture .pcap_rx_seen)" "$(j capture '.pcap_rx_written + .pcap_rx_dropped')"
check "capture: transmitted frames seen = written + left out" eq "$(j capture .pcap_tx_seen)" "$(j capture '.pcap_tx_written + .pcap_tx_dropped')"
check "capture: every received frame was offered to the capture" eq "$(j capture .pcap_rx_seen)" "$(j capture .rx_packets)"
check "capture: every frame handed to the port was offered to the capture" eq "$(j capture .pcap_tx_seen)" "$(j capture '.tx_packets + .tx_dropped')"
check "capture: frames written = frames in the file" eq "$(j capture .pcap_written)" "$(ts "$P" frame)"
check "capture: received frames written = inbound frames in the file" eq "$(j capture .pcap_rx_written)" "$(ts "$P" "frame.p2p_dir==1")"

M=$work/capture.prom
check "metrics: HTTP 200 with the Prometheus content type" grep -qi '^content-type: text/plain; version=0.0.4' "$work/capture.headers"
check "metrics: unknown path answers 404" eq "$(cat "$work/capture.404")" 404
check "metrics: well-formed exposition (HELP, TYPE, samples)" wellformed
# Scraped after the clients ended and before SIGINT: only TCP totals, which cannot change
# once the connections are closed, are compared (stray IPv6 multicast from the namespace's
# kernel may still move rx_packets).
for pair in gro_segments_in:weir_gro_segments_in_total gro_units_out:weir_gro_units_out_total \
  tcp_bytes_in_order:weir_tcp_bytes_in_order_total tcp_segments_in_order:weir_tcp_segments_in_order_total \
  acks_sent:weir_acks_sent_total data_acks_sent:weir_data_acks_sent_total \
  connections_opened:weir_connections_opened_total connections_closed:weir_connections_closed_total; do
  key=${pair%%:*} name=${pair#*:}
  check "metrics: $name = JSON $key" eq "$(prom "$name")" "$(j capture ".$key")"
  for q in 0 1; do
    check "metrics: $name{core=\"$q\"} = JSON per_core[$q].$key" eq "$(prom "$name{core=\"$q\"}")" "$(j capture ".per_core[$q].$key")"
  done
done
for reason in $(j capture '.acks_by_reason | keys[]'); do
  check "metrics: weir_acks_total{reason=\"$reason\"} = JSON" eq "$(prom "weir_acks_total{reason=\"$reason\"}")" "$(j capture ".acks_by_reason.\"$reason\"")"
done
check "metrics: flushes by reason present" grep -q '^weir_gro_flushes_total{reason="timer"}' "$M"
check "metrics: drops by reason present" grep -q '^weir_drops_total{reason="parse\.' "$M"
check "metrics: pcap_dropped exported" grep -q '^weir_pcap_dropped_total ' "$M"
unset BEFORE_STOP
fi

# ---- IPv6 -----------------------------------------------------------------------------
if part ipv6; then

# The kernel reaches weir's IPv6 address through neighbour discovery, which weir answers.
ping6_weir() { tapns_exec ping -6 -c1 -W1 "$WEIR_IP6" >/dev/null 2>&1; }
CONNS=2 DST="TCP6:[$WEIR_IP6]:7007" echo_case echo_ipv6 4

echo "== curl -6 fetches a 1 MiB body from --app http at [$WEIR_IP6]"
V6_BODY=$((1 << 20))
serve_start http_ipv6 --app http --http-body "$V6_BODY"
check "http_ipv6: weir answers ping -6" ping6_weir
run_client curl_ipv6 30 curl -6 -g -sS --fail -o "$work/body6" "http://[$WEIR_IP6]:8080/"
serve_stop http_ipv6
check "curl_ipv6: the body is $V6_BODY bytes" eq "$(stat -c %s "$work/body6")" "$V6_BODY"
check "curl_ipv6: the body's SHA-256 is the pattern's" eq "$(sha "$work/body6")" "$(body_sha "$V6_BODY")"
check "http_ipv6: weir answered one 200" eq "$(j http_ipv6 .app_counters.responses_200)" 1
fi

e2e_finish
