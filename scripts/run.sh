#!/usr/bin/env bash
# weir's main job on an embedded default: the Linux kernel sends TCP to weir-sink over a
# net_tap loopback inside a private network namespace. No NIC, no hugepages.
#
#   scripts/run.sh [--duration S] [--stats-json FILE] [--streams N] [--file-mb MB]
#                  [--ipv6] [weir-sink options...]
#
# It installs what it needs (scripts/setup.sh), builds in release mode, starts weir-sink in
# a new namespace, drives it with `iperf -c -P N` for S seconds and then a `socat`
# transfer of a random file whose SHA-256 is compared with weir's digest, prints what the
# kernel sent and what weir received, and removes the namespace. Options it does not know
# go to weir-sink (see `weir-sink --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh

duration=10 stats_json="" streams=8 file_mb=64 ipv6=0 sink_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=${2:?--duration needs seconds}; shift 2 ;;
    --stats-json) stats_json=${2:?--stats-json needs a file}; shift 2 ;;
    --streams) streams=${2:?--streams needs a number}; shift 2 ;;
    --file-mb) file_mb=${2:?--file-mb needs megabytes}; shift 2 ;;
    --ipv6) ipv6=1; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) sink_args+=("$1"); shift ;;
  esac
done
[[ $duration =~ ^[0-9]+$ ]] || die "--duration takes whole seconds, got '$duration'"
[[ $streams =~ ^[0-9]+$ ]] && [ "$streams" -ge 1 ] || die "--streams takes a positive number, got '$streams'"
[[ $file_mb =~ ^[0-9]+$ ]] || die "--file-mb takes megabytes, got '$file_mb'"

scripts/setup.sh
echo "== building weir (release)"
cargo build --release -q -p apps --bin weir-sink

work=$(mktemp -d /tmp/weir-run.XXXXXX)
[ -n "$stats_json" ] || stats_json="$work/stats.json"
tapns_create
trap 'tapns_cleanup; rm -rf "$work"' EXIT

echo "== starting weir-sink in namespace $WEIR_NS"
tapns_spawn "$work/sink.log" "${CARGO_TARGET_DIR:-target}/release/weir-sink" --ip "$WEIR_IP4" --ip "$WEIR_IP6" \
  --port 5001 --port 5002 --digest --stats-json "$stats_json" "${sink_args[@]}"
sink_pid=$TAPNS_LAST_PID
tapns_wait_tap 60 || { cat "$work/sink.log"; exit 1; }
dst=$WEIR_IP4
[ "$ipv6" = 1 ] && dst=$WEIR_IP6
tapns_wait_reachable "$dst" 30 || { cat "$work/sink.log"; exit 1; }

echo "== iperf -c $dst -P $streams -t $duration (the kernel's TCP sends, weir receives)"
tapns_exec iperf -c "$dst" -p 5001 -P "$streams" -t "$duration" -y C >"$work/iperf.csv" 2>"$work/iperf.err" \
  || { cat "$work/iperf.err"; die "iperf failed"; }
# iperf 2 CSV: one line per stream (field 6 its id, field 8 its bytes); a sum line, when
# iperf prints one, has id -1 and is left out.
iperf_bytes=$(awk -F, '$6 != -1 { sum += $8 } END { printf "%.0f\n", sum }' "$work/iperf.csv")

echo "== socat: a ${file_mb} MB random file to port 5002"
head -c "$((file_mb * 1024 * 1024))" /dev/urandom >"$work/file.bin"
want=$(sha256sum "$work/file.bin" | cut -d' ' -f1)
if [ "$ipv6" = 1 ]; then socat_dst="TCP6:[$WEIR_IP6]:5002"; else socat_dst="TCP4:$WEIR_IP4:5002"; fi
tapns_exec socat -u "FILE:$work/file.bin" "$socat_dst" || { tail -5 "$work/sink.log"; die "socat transfer failed"; }

echo "== stopping weir-sink (SIGINT: totals, JSON, every mbuf returned)"
sleep 1
kill -INT "$sink_pid"
wait "$sink_pid" || { cat "$work/sink.log"; die "weir-sink exited with an error"; }
TAPNS_PIDS=()
cat "$work/sink.log"

got=$(jq -r '[.digests[] | select(.local_port == 5002) | .sha256] | last // ""' "$stats_json")
in_order=$(jq -r '.tcp_bytes_in_order' "$stats_json")
echo
echo "== summary"
printf '%-40s %s\n' "kernel sent (iperf, all streams):" "$iperf_bytes bytes"
printf '%-40s %s\n' "kernel sent (socat file):" "$((file_mb * 1024 * 1024)) bytes, sha256 $want"
printf '%-40s %s\n' "weir received in order (all conns):" "$in_order bytes"
printf '%-40s %s\n' "weir digest of the socat connection:" "${got:-none}"
printf '%-40s %s\n' "stats JSON:" "$stats_json"
if [ "$got" = "$want" ]; then
  echo "digest: MATCH"
else
  die "digest MISMATCH: the socat file and weir's digest differ"
fi
