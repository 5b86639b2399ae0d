#!/usr/bin/env bash
# End-to-end tests of weir-sink's operability features: --pcap read back with
# tshark, --metrics compared with --stats-json, --config files, the start-up log line and
# DPDK's log routed through tracing. Like scripts/e2e/tap.sh it runs weir-sink (release)
# in a fresh network namespace with the kernel's TCP as the sender, and fails (never
# skips) when it cannot run: not root, no /dev/net/tun, a tool missing.
#
#   scripts/e2e/ops.sh
#
# What is compared, exactly:
# - capture vs counters (no --impair, so what the port delivers is what the pipeline sees):
#     inbound TCP frames in the file            == gro_segments_in (every TCP segment that
#                                                  passed parse enters GRO; asserted: no
#                                                  parse drop of a TCP segment)
#     inbound TCP frames with payload           >= tcp_segments_in_order (equal when the
#                                                  kernel retransmitted nothing; printed)
#     outbound TCP frames                       == acks_sent (every TCP segment weir sends,
#                                                  SYN-ACK and FIN included, is counted
#                                                  there by reason; captured before tx_burst)
#   The capture may leave frames out when its writer thread gets too little CPU (it never
#   stalls the core), so the file is compared through exact accounting, whatever the
#   machine's speed: per direction, frames seen = frames written + frames left out, every
#   received frame and every frame handed to tx_burst was seen, the file holds exactly the
#   frames written, and each TCP count above lies between the file's count and the file's
#   count plus that direction's left-out frames (equal when nothing was left out).
# - metrics vs JSON: scraped after the transfers end and before SIGINT; only TCP totals,
#   which cannot change once the connections are closed (stray IPv6 multicast from the
#   namespace's kernel may still move rx_packets, so it is not compared).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh
# shellcheck source=scripts/lib/prom.sh
. scripts/lib/prom.sh

tapns_require
for t in socat iperf jq ping curl tshark sha256sum; do
  command -v $t >/dev/null || die "$t is missing: run scripts/setup.sh"
done
SINK=${CARGO_TARGET_DIR:-target}/release/weir-sink
echo "== building weir-sink (release)"
cargo build --release -q -p apps --bin weir-sink

work=$(mktemp -d /tmp/weir-ops.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() { # check NAME CONDITION-COMMAND...
  local name=$1; shift
  if "$@"; then echo "  ok   $name"; passed=$((passed + 1)); else echo "  FAIL $name"; failed=$((failed + 1)); fi
}
eq() { [ "$1" = "$2" ] || { echo "       expected '$2', got '$1'" >&2; return 1; }; }
between() { # between LO X HI: LO <= X <= HI
  awk -v l="$1" -v x="$2" -v h="$3" 'BEGIN { exit !(l <= x && x <= h) }' || { echo "       expected $1 <= $2 <= $3" >&2; return 1; }
}
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }' || { echo "       expected $1 > $2" >&2; return 1; }; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }' || { echo "       expected $1 <= $2" >&2; return 1; }; }
j() { jq -r "$2" "$work/$1.json"; }
# no_refusal NAME: no in-window data refused for want of receive-queue room (as scripts/lib/e2e.sh's).
no_refusal() { check "$1: no in-window data refused (tcp.rx_queue_full)" eq "$(j "$1" '.drops_by_reason["tcp.rx_queue_full"] // 0')" 0; }
# ts FILE FILTER: frames in FILE matching FILTER, one line per frame (its number). Not
# tshark's summary lines: the payloads are random bytes, tshark runs dozens of heuristic
# text-protocol dissectors on TCP, and a summary's Info column can then carry a line
# break. One CI run counted exactly one inbound TCP frame more than both weir's
# pcap_written and gro_segments_in (which agree with each other by construction); this
# was the likeliest way, and counting numbers rules it out.
ts() { tshark -r "$1" -Y "$2" -T fields -e frame.number 2>/dev/null | wc -l | tr -d ' '; }

METRICS_ADDR=127.0.0.1:9108

# session NAME [weir-sink options...]: weir-sink in a new namespace; runs $BODY NAME
# against it, then SIGINT. Results in $work/NAME.*
session() {
  local name=$1; shift
  (
    tapns_create
    tapns_spawn "$work/$name.log" "$SINK" --quiet --digest --stats-json "$work/$name.json" "$@"
    local pid=$TAPNS_LAST_PID
    tapns_wait_tap 60
    tapns_wait_reachable "$WEIR_IP4" 30
    "$BODY" "$name"
    kill -INT "$pid"
    wait "$pid"
    TAPNS_PIDS=()
  ) || { echo "  session $name failed; weir-sink log:"; tail -20 "$work/$name.log"; return 1; }
}

send_file() { # send_file NAME MB PORT
  head -c "$(($2 * 1024 * 1024))" /dev/urandom >"$work/$1.bin"
  sha256sum "$work/$1.bin" | cut -d' ' -f1 >"$work/$1.sha"
  ip netns exec "$WEIR_NS" socat -u "FILE:$work/$1.bin" "TCP4:$WEIR_IP4:$3"
  rm -f "$work/$1.bin"
}

# ---- 1. capture + metrics of one run ----
cap_body() {
  send_file "$1" 20 5001
  ip netns exec "$WEIR_NS" iperf -c "$WEIR_IP4" -p 5001 -P 4 -t 2 >/dev/null 2>&1
  # Cores publish 4 times a second; the printer hands snapshots on every 100 ms.
  sleep 1.5
  ip netns exec "$WEIR_NS" curl -sS -D "$work/$1.headers" "http://$METRICS_ADDR/metrics" >"$work/$1.prom"
  ip netns exec "$WEIR_NS" curl -sS -o /dev/null -w '%{http_code}' "http://$METRICS_ADDR/nothing" >"$work/$1.404" || true
}
echo "== case: --pcap and --metrics on one run (socat 20 MB + iperf -P 4 -t 2)"
BODY=cap_body session cap --port 5001 --pcap "$work/cap.pcapng" --metrics "$METRICS_ADDR"
P=$work/cap.pcapng
check "cap: socat digest matches the file" eq "$(j cap '[.digests[] | select(.local_port == 5001) | .sha256] | first')" "$(cat "$work/cap.sha")"
no_refusal cap
check "cap: tshark reads the file" tshark -r "$P" -c 1 >/dev/null 2>&1
rx_lost=$(j cap .pcap_rx_dropped) tx_lost=$(j cap .pcap_tx_dropped)
echo "       capture left out $rx_lost received and $tx_lost transmitted frames (the writer's share of CPU decides; accounted below)"
check "cap: received frames seen = written + left out" eq "$(j cap .pcap_rx_seen)" "$(j cap '.pcap_rx_written + .pcap_rx_dropped')"
check "cap: transmitted frames seen = written + left out" eq "$(j cap .pcap_tx_seen)" "$(j cap '.pcap_tx_written + .pcap_tx_dropped')"
check "cap: every received frame was offered to the capture" eq "$(j cap .pcap_rx_seen)" "$(j cap .rx_packets)"
check "cap: every frame handed to tx_burst was offered to the capture" eq "$(j cap .pcap_tx_seen)" "$(j cap '.tx_packets + .tx_dropped')"
check "cap: pcap_dropped = the two directions' left-out frames" eq "$(j cap .pcap_dropped)" "$((rx_lost + tx_lost))"
check "cap: frames written = frames in the file" eq "$(j cap .pcap_written)" "$(ts "$P" "frame")"
check "cap: received frames written = inbound frames in the file" eq "$(j cap .pcap_rx_written)" "$(ts "$P" "frame.p2p_dir==1")"
check "cap: transmitted frames written = outbound frames in the file" eq "$(j cap .pcap_tx_written)" "$(ts "$P" "frame.p2p_dir==0")"
check "cap: handshake seen (SYN in, SYN-ACK out)" gt "$(ts "$P" "tcp.flags.syn==1 && tcp.flags.ack==1 && frame.p2p_dir==0")" 0
check "cap: tcp parse drops are zero (so every TCP frame reached GRO)" eq "$(j cap '[.drops_by_reason | to_entries[] | select(.key | test("^parse\\.(tcp|ipv4_bad_checksum|ipv6|truncated)")) | .value] | add // 0')" 0
in_tcp=$(ts "$P" "tcp && frame.p2p_dir==1")
in_data=$(ts "$P" "tcp && frame.p2p_dir==1 && tcp.len>0")
out_tcp=$(ts "$P" "tcp && frame.p2p_dir==0")
echo "       capture: $in_tcp TCP in ($in_data with data), $out_tcp TCP out"
check "cap: inbound TCP frames <= gro_segments_in <= inbound TCP frames + received frames left out" between "$in_tcp" "$(j cap .gro_segments_in)" "$((in_tcp + rx_lost))"
# Data segments are not exactly comparable to one counter: a segment the kernel sent twice,
# or one TCP dropped (window, queue), is in the file once per copy but may be counted under
# a drop reason or not at all; so the in-order count is a lower bound, printed for reading.
echo "       weir: $(j cap .tcp_segments_in_order) in order, $(j cap .tcp_ooo_segments) out of order, $(j cap .tcp_duplicate_segments) duplicate; tcp drops: $(j cap '[.drops_by_reason | to_entries[] | select(.key | startswith("tcp.")) | select(.value > 0) | "\(.key)=\(.value)"] | join(" ")')"
check "cap: inbound data segments + received frames left out >= segments delivered in order" le "$(j cap .tcp_segments_in_order)" "$((in_data + rx_lost))"
check "cap: outbound TCP frames <= acks_sent <= outbound TCP frames + transmitted frames left out" between "$out_tcp" "$(j cap .acks_sent)" "$((out_tcp + tx_lost))"
check "cap: direction recorded on every frame" eq "$(ts "$P" "frame.p2p_dir==0 || frame.p2p_dir==1")" "$(ts "$P" frame)"
first_ts=$(tshark -r "$P" -c 1 -T fields -e frame.time_epoch 2>/dev/null | cut -d. -f1)
check "cap: timestamps are wall-clock (within a day of now)" le "$(( ${first_ts:-0} > $(date +%s) ? ${first_ts:-0} - $(date +%s) : $(date +%s) - ${first_ts:-0} ))" 86400
check "cap: nanosecond timestamps (sub-microsecond digits present)" gt "$(tshark -r "$P" -T fields -e frame.time_epoch 2>/dev/null | grep -cv '000$')" 0

M=$work/cap.prom
check "metrics: HTTP 200 with the Prometheus content type" grep -qi '^content-type: text/plain; version=0.0.4' "$work/cap.headers"
check "metrics: unknown path answers 404" eq "$(cat "$work/cap.404")" 404
check "metrics: well-formed exposition (HELP, TYPE, samples)" wellformed
for pair in gro_segments_in:weir_gro_segments_in_total gro_units_out:weir_gro_units_out_total \
  tcp_bytes_in_order:weir_tcp_bytes_in_order_total tcp_segments_in_order:weir_tcp_segments_in_order_total \
  acks_sent:weir_acks_sent_total data_acks_sent:weir_data_acks_sent_total \
  connections_opened:weir_connections_opened_total connections_closed:weir_connections_closed_total; do
  key=${pair%%:*} name=${pair#*:}
  check "metrics: $name = JSON $key" eq "$(prom "$name")" "$(j cap ".$key")"
  check "metrics: $name{core=\"0\"} = JSON per_core[0].$key" eq "$(prom "$name{core=\"0\"}")" "$(j cap ".per_core[0].$key")"
done
for reason in $(j cap '.acks_by_reason | keys[]'); do
  check "metrics: weir_acks_total{reason=\"$reason\"} = JSON" eq "$(prom "weir_acks_total{reason=\"$reason\"}")" "$(j cap ".acks_by_reason.\"$reason\"")"
done
check "metrics: flushes by reason present" grep -q '^weir_gro_flushes_total{reason="timer"}' "$M"
check "metrics: drops by reason present" grep -q '^weir_drops_total{reason="parse\.' "$M"
check "metrics: pcap_dropped exported" grep -q '^weir_pcap_dropped_total ' "$M"

# ---- 2. a small snaplen and a full file: frames left out and counted, never delayed ----
small_body() { send_file "$1" 20 5001; }
echo "== case: --pcap-snaplen 96 --pcap-max-mb 1 on a 20 MB transfer"
BODY=small_body session small --port 5001 --pcap "$work/small.pcapng" --pcap-snaplen 96 --pcap-max-mb 1
check "small: transfer intact" eq "$(j small '[.digests[] | select(.local_port == 5001) | .sha256] | first')" "$(cat "$work/small.sha")"
no_refusal small
check "small: no frame longer than the snaplen in the file" le "$(tshark -r "$work/small.pcapng" -T fields -e frame.cap_len 2>/dev/null | sort -n | tail -1)" 96
check "small: original lengths kept (frame.len > cap_len for data)" gt "$(ts "$work/small.pcapng" "frame.len > frame.cap_len")" 0
check "small: frames left out once the file is full (pcap_dropped > 0)" gt "$(j small .pcap_dropped)" 0
check "small: file stops near --pcap-max-mb" le "$(stat -c %s "$work/small.pcapng")" $((1024 * 1024 + 65536))
check "small: received frames seen = written + left out (frames were left out)" eq "$(j small .pcap_rx_seen)" "$(j small '.pcap_rx_written + .pcap_rx_dropped')"
check "small: transmitted frames seen = written + left out" eq "$(j small .pcap_tx_seen)" "$(j small '.pcap_tx_written + .pcap_tx_dropped')"
check "small: received frames written = inbound frames in the file" eq "$(j small .pcap_rx_written)" "$(ts "$work/small.pcapng" "frame.p2p_dir==1")"
check "small: written + dropped = every frame in and out" eq "$(j small '.pcap_written + .pcap_dropped')" "$(j small '.rx_packets + .tx_packets + .tx_dropped')"

# ---- 3. --config ----
echo "== case: --config"
bad_config() { # bad_config NAME WORD TOML
  local f="$work/$1.toml" err rc=0
  printf '%s\n' "$3" >"$f"
  err=$("$SINK" --config "$f" 2>&1 >/dev/null) || rc=$?
  local last; last=$(printf '%s\n' "$err" | tail -n1)
  [ $rc -eq 2 ] || { echo "       exit status $rc, want 2" >&2; return 1; }
  [[ $last == weir-sink:\ error:* ]] || { echo "       last line: $last" >&2; return 1; }
  grep -qF -- "$2" <<<"$last" || { echo "       '$2' not in: $last" >&2; return 1; }
  echo "       $last"
}
check "config: unknown key is named" bad_config unknown "unknown key 'gro_flush_nss'" 'gro_flush_nss = 5'
check "config: bad value names the key" bad_config badport "key 'port'" 'port = [70000]'
check "config: bad type names the key" bad_config badtype "key 'gro_flush_ns'" 'gro_flush_ns = "soon"'
check "config: flag needs true/false" bad_config badflag "key 'quiet'" 'quiet = "yes"'
check "config: not TOML" bad_config syntax "not valid TOML" 'port = '
cat >"$work/good.toml" <<'EOF'
# weir-sink settings for the test
port = [5003]
gro_flush_ns = 1234
ack_policy = "every:2"
max_conns = 64
EOF
cfg_body() { send_file "$1" 5 5003; }
BODY=cfg_body session cfg --config "$work/good.toml" --gro-flush-ns 777
check "config: file's port used" eq "$(j cfg '.settings.ports | join(",")')" 5003
check "config: file's ack_policy used" eq "$(j cfg .settings.ack_policy)" "every:2"
check "config: file's max_conns used" eq "$(j cfg .settings.max_conns)" 64
check "config: command line overrides gro_flush_ns" eq "$(j cfg .settings.gro_flush_ns)" 777
check "config: transfer to the file's port intact" eq "$(j cfg '[.digests[] | select(.local_port == 5003) | .sha256] | first')" "$(cat "$work/cfg.sha")"
no_refusal cfg

# ---- 4. logs ----
echo "== case: logs"
check "log: one start-up line with versions and settings" eq "$(grep -c 'weir-sink .* starting on port 0 mac .*dpdk=.*gro_flush_ns=.*ack_policy=' "$work/cap.log")" 1
check "log: DPDK's own log routed through tracing (target dpdk)" grep -q ' dpdk: ' "$work/cap.log"
check "log: a bad --log-level is a usage error" bash -c "\"$SINK\" --log-level 'info,dpdk=loud' >/dev/null 2>&1; [ \$? -eq 2 ]"

# ---- 5. set-up script (argument checks only: it changes the machine) ----
echo "== case: setup-hugepages.sh"
check "hugepages: --help" bash -c "scripts/setup-hugepages.sh --help | grep -q hugetlbfs"
check "hugepages: a bad size is refused" bash -c "! scripts/setup-hugepages.sh lots 2>/dev/null"

echo
echo "ops e2e: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
