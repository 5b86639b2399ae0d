#!/usr/bin/env bash
# weir-gen and weir-sink in two processes joined by net_memif (the shared-memory
# interface VPP and other DPDK programs use), beside weir-bench e2e's in-process ring
# pair in the same run.
#
# weir-sink is the memif server, weir-gen the client, over one socket (/run/wx-memif.sock);
# (a file: socket-abstract=no); each process has its own --file-prefix and runs without hugepages (memif's regions are
# memfd shared memory, made by the server's PMD and mapped by the client's). No kernel
# network device is involved: the frames (198.18.41.2 -> 198.18.41.1) exist only in
# the two processes' shared rings. memif offers no checksum offload, so both sides compute
# and verify every checksum in software: the ring row to compare with is e2e's sw-csum
# mode (also all in software); its stack row (the NIC's offloads modelled) is printed too.
#
# Every run checks the accounting: weir-gen exits 0 with every flow established and
# closed cleanly, none reset or timed out; weir-sink exits 0, holds the bytes weir-gen
# sent in order, one SHA-256 per connection equal to the stream's (weir-gen's
# stream_sha256), every connection closed cleanly, none reset, and after its port is
# closed holds no mbuf. Rates are printed, never checked.
#
#   scripts/lab/memif.sh            # throughput: memif and the ring pair, FLOWS flows, SECONDS s
#   scripts/lab/memif.sh --check    # accounting only, a short transfer (scripts/test.sh)
#
# Needs root (the socket in /run) and a DPDK with net_memif; fails with a clear message
# otherwise (it never skips).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
CHECK=no
[ "${1:-}" = "--check" ] && CHECK=yes
FLOWS=${FLOWS:-4} SECONDS_RUN=${SECONDS_RUN:-5}
SOCK=/run/wx-memif.sock
SINK_IP=198.18.41.1 GEN_IP=198.18.41.2
die() { echo "error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "memif.sh needs root (its socket is in /run): run as root"
command -v jq >/dev/null || die "jq is missing: run scripts/setup.sh"
pmds=$(pkg-config --variable=pmdsdir libdpdk 2>/dev/null || true)
[ -z "$pmds" ] || ls "$pmds"/librte_net_memif.so* >/dev/null 2>&1 ||
  die "DPDK's net_memif PMD is not in $pmds: install a DPDK built with it (Debian: librte-net-memif23)"
[ ! -e "$SOCK" ] || die "$SOCK exists: another memif.sh is running (or remove the stale socket)"

echo "== building weir-sink, weir-gen, weir-bench (release)"
cargo build --release -q -p apps --bin weir-sink --bin weir-gen --bin weir-bench
BIN="$CARGO_TARGET_DIR/release"
work=$(mktemp -d /tmp/wx-memif.XXXXXX)
SINK_PID=
cleanup() {
  [ -z "$SINK_PID" ] || kill "$SINK_PID" 2>/dev/null || true
  [ -z "$SINK_PID" ] || wait "$SINK_PID" 2>/dev/null || true
  rm -f "$SOCK"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0 failed=0
check() {
  local name=$1; shift
  if "$@"; then echo "  ok   $name"; passed=$((passed + 1)); else echo "  FAIL $name"; failed=$((failed + 1)); fi
}
eq() { [ "$1" = "$2" ] || { echo "       expected '$2', got '$1'" >&2; return 1; }; }

# memif_run NAME GEN-OPTIONS...: weir-sink (server) and weir-gen (client) over memif;
# weir-gen ends by itself, then weir-sink is stopped; both JSONs checked.
memif_run() {
  local name=$1 gen_rc=0 sink_rc=0; shift
  "$BIN/weir-sink" --no-pci --no-huge -m 512 --file-prefix="wx-memif-sink-$$" \
    --log-level='*:warning' -l 0 --vdev="net_memif0,role=server,socket=$SOCK,socket-abstract=no" -- \
    --quiet --digest --ip "$SINK_IP" --port 5001 --stats-json "$work/$name.sink.json" \
    >"$work/$name.sink.log" 2>&1 &
  SINK_PID=$!
  for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
  [ -S "$SOCK" ] || { tail "$work/$name.sink.log"; die "weir-sink made no memif socket $SOCK"; }
  timeout 120 "$BIN/weir-gen" --no-pci --no-huge -m 512 --file-prefix="wx-memif-gen-$$" \
    --log-level='*:warning' -l 1 --vdev="net_memif0,role=client,socket=$SOCK,socket-abstract=no" -- \
    --src-ip "$GEN_IP" --dst-ip "$SINK_IP" --dst-port 5001 --flows "$FLOWS" \
    --json "$work/$name.gen.json" --quiet "$@" >"$work/$name.gen.log" 2>&1 || gen_rc=$?
  sleep 0.5
  kill -INT "$SINK_PID"
  wait "$SINK_PID" || sink_rc=$?
  SINK_PID=
  rm -f "$SOCK"
  g() { jq -r "$1" "$work/$name.gen.json"; }
  s() { jq -r "$1" "$work/$name.sink.json"; }
  check "$name: weir-gen exited 0" eq "$gen_rc" 0
  check "$name: weir-sink exited 0" eq "$sink_rc" 0
  [ -f "$work/$name.gen.json" ] && [ -f "$work/$name.sink.json" ] || {
    tail -5 "$work/$name.gen.log" "$work/$name.sink.log"
    check "$name: both wrote their JSON" false
    return
  }
  check "$name: every flow established and closed cleanly (weir-gen)" eq "$(g '"\(.established) \(.closed)"')" "$FLOWS $FLOWS"
  check "$name: no reset, no timeout (weir-gen)" eq "$(g '.resets + .timeouts')" 0
  # (weir-gen's bytes count every transmission, its retransmissions too.)
  check "$name: weir-sink holds in order what weir-gen sent" \
    eq "$(s .tcp_bytes_in_order)" "$(g '.bytes - .retransmit_bytes')"
  check "$name: $FLOWS connections, each closed cleanly (weir-sink)" \
    eq "$(s '[.digests[] | select(.end == "closed")] | length')" "$FLOWS"
  check "$name: no connection reset (weir-sink)" eq "$(s .connections_reset)" 0
  if [ "$(g '.stream_sha256 // "none"')" != none ]; then
    check "$name: each connection's SHA-256 is the stream's" \
      eq "$(s '[.digests[].sha256] | unique | join(" ")')" "$(g .stream_sha256)"
  else
    # A timed run (--duration): each flow's digest is of the first N bytes of the
    # pattern, N the flow's own count, which weir-gen does not print per flow; the
    # bytes are checked in total above.
    echo "       (timed run: digests are checked by --check's byte-counted run)"
  fi
  check "$name: weir-sink holds no mbuf after its port closed" eq "$(s .mbufs_in_use_at_exit)" 0
  check "$name: no in-window data refused (tcp.rx_queue_full)" eq "$(s '.drops_by_reason["tcp.rx_queue_full"] // 0')" 0
  echo "       memif: $(g '"\(.payload_gbit_s * 1000 | floor / 1000) Gbit/s payload, \(.segments_per_s | floor) segments/s, \(.retransmits) retransmitted"')"
}

if [ "$CHECK" = yes ]; then
  echo "== memif --check: $FLOWS flows x 20 MB, weir-gen -> weir-sink"
  memif_run check --bytes-per-flow 20000000
else
  echo "== memif: $FLOWS flows for ${SECONDS_RUN} s, weir-gen -> weir-sink (separate processes)"
  memif_run bulk --duration "$SECONDS_RUN"
  echo "== ring pair: weir-bench e2e, $FLOWS flows for ${SECONDS_RUN} s (one process, two lcores)"
  timeout 300 "$BIN/weir-bench" e2e --json --runs 1 --seconds "$SECONDS_RUN" --flows "$FLOWS" \
    --only stack,sw-csum >"$work/ring.jsonl" 2>"$work/ring.log" ||
    { tail "$work/ring.log"; die "weir-bench e2e failed"; }
  echo
  mg=$(jq -r .payload_gbit_s "$work/bulk.gen.json") ms=$(jq -r .segments_per_s "$work/bulk.gen.json")
  printf '%-44s %10s %14s %10s\n' "path ($FLOWS flows)" "Gbit/s" "segments/s" "x memif"
  printf '%-44s %10.3f %14.0f %10s\n' "memif, two processes (checksums in software)" "$mg" "$ms" "1.00"
  jq -r --arg f "$FLOWS" 'select(.mode != null and (.flows | tostring) == $f)
    | "\(.mode | gsub(" "; "_")) \(.payload_gbit_s) \(.segments_per_s)"' "$work/ring.jsonl" |
    while read -r mode gb ss; do
      case $mode in
        *sw-csum*) label="ring pair, in process (checksums in software)" ;;
        *) label="ring pair, in process (offloads modelled)" ;;
      esac
      awk -v l="$label" -v g="$gb" -v s="$ss" -v m="$ms" \
        'BEGIN { printf "%-44s %10.3f %14.0f %10.2f\n", l, g, s, (m > 0 ? s / m : 0) }'
    done
fi
echo
echo "memif: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
