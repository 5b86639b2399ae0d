#!/usr/bin/env bash
# weir-gen as the sender, the Linux kernel's TCP as the receiver: the weir-gen
# binary on DPDK's net_tap in a fresh network namespace, socat listening in the kernel,
# once with the payload shared by reference (the default), once copied and once over
# IPv6. Every flow's
# bytes must reach the kernel intact (socat's SHA-256 of each connection equals the stream
# digest weir-gen prints), every flow must close cleanly, and weir-gen must answer the
# kernel's ARP requests for its address: the kernel forgets the address once the first
# connection is up (a neighbour flush) and re-confirms it every second (the sysctls
# below); without replies its ACKs stop and the run fails. A last case sends to an address
# nothing answers: weir-gen must stop by itself and fail, naming the address. Fails (never
# skips) without root/tun.
#
#   scripts/e2e/gen.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh
# shellcheck source=scripts/lib/e2e.sh
. scripts/lib/e2e.sh

GEN=${GEN:-${CARGO_TARGET_DIR:-target}/release/weir-gen}
# Long enough (seconds at ~2 Gbit/s) that the neighbour flush below lands mid-transfer.
FLOWS=4 MB=150
if [ "${1:-}" = "--quick" ]; then MB=60; fi
BYTES=$((MB * 1000 * 1000))
e2e_init socat jq sha256sum
echo "== building weir-gen (release)"
cargo build --release -q -p apps --bin weir-gen

tapns_create
# tapns_create's exit trap replaces e2e_init's: do both.
trap 'tapns_cleanup; rm -rf "$work"' EXIT
# Each connection's SHA-256, one line per connection (appends of one short line each):
# socat listening on port 5001 over IPv4 and on 5002 over IPv6.
listen_digests() { # FAMILY PORT
  tapns_spawn "$work/socat$1.log" socat -u "TCP$1-LISTEN:$2,reuseaddr,fork" \
    SYSTEM:"sha256sum >>$work/digests"
  for _ in $(seq 100); do
    [ -n "$(tapns_exec ss -Hltn "( sport = :$2 )")" ] && return 0
    sleep 0.05
  done
  die "socat is not listening on port $2 (see $work/socat$1.log)"
}
listen_digests 4 5001
listen_digests 6 5002

# wait_gen PID SECONDS: waits for weir-gen to end; after SECONDS it is stopped (SIGINT)
# and GEN_ENDED is "no". Its exit status is then in GEN_RC.
wait_gen() {
  local deadline=$((SECONDS + $2))
  GEN_ENDED=yes GEN_RC=0
  while kill -0 "$1" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      GEN_ENDED=no
      kill -INT "$1" 2>/dev/null || true
      echo "  weir-gen still running after $2 s: stopped" >&2
      break
    fi
    sleep 0.2
  done
  wait "$1" || GEN_RC=$?
}

# run_case NAME [weir-gen options...]: one weir-gen run to the kernel and its checks
# (over IPv6 when FAMILY=6).
run_case() {
  local name=$1 gen_pid src=$WEIR_IP4 dst=$PEER_IP4 port=5001 neigh=ipv4
  shift
  if [ "${FAMILY:-4}" = 6 ]; then src=$WEIR_IP6 dst=$PEER_IP6 port=5002 neigh=ipv6; fi
  : >"$work/digests"
  echo "== case $name: weir-gen${*:+ $*}, $FLOWS flows x $BYTES bytes -> the kernel's TCP (socat)"
  # weir-gen is the DPDK side (198.18.0.1, as weir-sink is in tap.sh); the kernel has
  # 198.18.0.2 on the tap, which weir-gen's DPDK creates anew each run.
  tapns_spawn "$work/$name.log" "$GEN" --tap-iface "$WEIR_TAP" --src-ip "$src" \
    --dst-ip "$dst" --dst-port "$port" --flows "$FLOWS" --bytes-per-flow "$BYTES" \
    --json "$work/$name.json" --quiet "$@"
  gen_pid=$TAPNS_LAST_PID
  tapns_wait_tap
  # The kernel re-confirms its neighbours often, with one unicast probe: a neighbour that
  # does not answer fails within about 1.5 s (the kernel's TCP only receives here, so
  # nothing else confirms it), and the kernel's ACKs stop.
  for k in base_reachable_time_ms=1000 delay_first_probe_time=1 retrans_time_ms=250 \
    ucast_solicit=1; do
    tapns_exec sysctl -qw "net.$neigh.neigh.$WEIR_TAP.$k"
  done
  # And once the first connection is up, the kernel forgets weir-gen's address outright:
  # its next ACK needs an ARP reply, however fast the transfer runs.
  for _ in $(seq 200); do
    [ -n "$(tapns_exec ss -Htn state established "( sport = :$port )")" ] && break
    sleep 0.05
  done
  tapns_exec ip neigh flush dev "$WEIR_TAP"
  wait_gen "$gen_pid" 120
  grep -E '^weir-gen' "$work/$name.log" | sed 's/^/       /'
  g() { jq -r "$1" "$work/$name.json"; }
  check "$name: weir-gen exits 0 (every flow closed cleanly, none reset or timed out)" eq "$GEN_RC" 0
  check "$name: every flow established" eq "$(g .established)" "$FLOWS"
  check "$name: every flow closed cleanly" eq "$(g .closed)" "$FLOWS"
  check "$name: no resets, no timeouts" eq "$(g '.resets + .timeouts')" 0
  # weir-gen checks every frame's checksums (the port's verdicts, or in software).
  check "$name: no frame from the kernel failed its checksum, no RST ignored" \
    eq "$(g '(.rx_bad_checksum // -1) + (.resets_ignored // -1)')" 0
  check "$name: weir-gen answered the kernel's ARP requests (neighbour solicitations)" \
    gt "$(g '.arp_replies // -1')" 0
  check "$name: no request left unanswered" eq "$(g '.arp_replies_dropped // -1')" 0
  # socat writes a digest when its sha256sum ends, just after the connection closes.
  for _ in $(seq 50); do
    [ "$(wc -l <"$work/digests")" -ge "$FLOWS" ] && break
    sleep 0.1
  done
  check "$name: socat saw $FLOWS connections" eq "$(wc -l <"$work/digests")" "$FLOWS"
  check "$name: each connection's SHA-256 is the stream's" \
    eq "$(awk '{print $1}' "$work/digests" | sort -u)" "$(g '.stream_sha256 // "none"')"
  echo "       $(g '"\(.segments) segments (\(.shared_payload_segments) with the payload by reference), \(.retransmits) retransmitted, \(.payload_gbit_s * 1000 | floor) Mbit/s, \(.arp_replies) ARP replies"')"
}

# The default: net_tap sends chained mbufs, so each data segment carries a slice of one
# shared copy of the pattern by reference, except a segment whose bytes span two of the
# buffers the flow wrote (the stack cuts full segments across them, as Linux fills the
# tail skb): at most one per buffer boundary, and per retransmission. Each write of
# --write-size (65536) bytes is at least one buffer, and more when it crosses a buffer
# span or the send buffer takes it in part (the rest comes again as a buffer of its own:
# how often depends on how fast ACKs come back), so weir-gen counts the buffers taken as
# write_pieces. A segment is also copied when no payload reference is free at that moment
# (counted apart as payload_refs_exhausted: how often depends on how fast the tap gives
# mbufs back).
run_case shared
WRITES=$((FLOWS * ((BYTES + 65535) / 65536)))
PIECES=$(jq -r '.write_pieces + .retransmits' "$work/shared.json")
check "shared: data segments carried their payload by reference" \
  gt "$(jq -r .shared_payload_segments "$work/shared.json")" 0
check "shared: every write was queued as at least one buffer ($WRITES writes)" \
  le "$WRITES" "$(jq -r .write_pieces "$work/shared.json")"
check "shared: only segments spanning two buffers were copied (at most $PIECES: buffers taken and retransmissions)" \
  le "$(jq -r '.segments - .shared_payload_segments - .payload_refs_exhausted' "$work/shared.json")" "$PIECES"
check "shared: weir-gen says so" grep -q "payload shared by reference" "$work/shared.log"
run_case copied --copy-payload
check "copied: no segment carried its payload by reference" \
  eq "$(jq -r .shared_payload_segments "$work/copied.json")" 0
FAMILY=6 run_case ipv6
check "ipv6: data segments carried their payload by reference" \
  gt "$(jq -r .shared_payload_segments "$work/ipv6.json")" 0

# An address nothing in the namespace has: weir-gen must stop when its duration ends and
# fail, naming the cause, rather than report a clean run of flows that "never started".
NOBODY=198.18.0.99
echo "== case unanswered: weir-gen to $NOBODY, which nothing answers, for 2 s"
tapns_spawn "$work/unanswered.log" "$GEN" --tap-iface "$WEIR_TAP" --src-ip "$WEIR_IP4" \
  --dst-ip "$NOBODY" --dst-port 5001 --flows "$FLOWS" --duration 2 \
  --json "$work/unanswered.json" --quiet
gen_pid=$TAPNS_LAST_PID
tapns_wait_tap
wait_gen "$gen_pid" 60
grep -E '^weir-gen' "$work/unanswered.log" | sed 's/^/       /'
check "unanswered: weir-gen ended on its own within 60 s" eq "$GEN_ENDED" yes
check "unanswered: weir-gen exits 1" eq "$GEN_RC" 1
check "unanswered: the JSON says the address never resolved" \
  eq "$(jq -r '.unresolved // -1' "$work/unanswered.json")" 1
check "unanswered: every flow timed out, none 'never started'" \
  eq "$(jq -r '"\(.timeouts) \(.not_started)"' "$work/unanswered.json")" "$FLOWS 0"
check "unanswered: the error names the address" \
  grep -q "nothing answered ARP for $NOBODY" "$work/unanswered.log"

e2e_finish
