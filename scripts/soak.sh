#!/usr/bin/env bash
# Soak: weir-sink under iperf -P 8 plus a socat transfer every 20 s, through a light
# seeded impairment, for MINUTES minutes. Fails if resident memory, mbufs in use, open
# connections or held GRO runs grow without bound, or any transfer's digest differs.
#
#   scripts/soak.sh MINUTES
#
# Bounds (checked on samples every 5 s, after the first 10% of the run as warm-up):
#   RSS: the second half's peak <= the first half's peak * 1.10 + 16 MiB
#   mbufs in use: the second half's peak <= the first half's peak + 512
#   open connections <= 8 iperf + 2 socat at every sample; held GRO runs <= --max-flows
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh
# shellcheck source=scripts/lib/e2e.sh
. scripts/lib/e2e.sh

minutes=${1:?usage: scripts/soak.sh MINUTES}
[[ $minutes =~ ^[0-9]+$ ]] && [ "$minutes" -ge 1 ] || die "MINUTES must be a positive whole number"
secs=$((minutes * 60))
scripts/setup.sh >/dev/null
e2e_init iperf socat jq ping sha256sum
tapns_create
trap 'tapns_cleanup; rm -rf "$work"' EXIT

MAX_FLOWS=4096
tapns_spawn "$work/sink.log" "$SINK" --quiet --digest --port 5001 --port 5002 \
  --max-flows "$MAX_FLOWS" --stats-json "$work/final.json" --stats-log "$work/log.jsonl" \
  --impair loss=0.1%,reorder=1%,dup=0.1%,seed=3
sink=$TAPNS_LAST_PID
tapns_wait_tap 60
tapns_wait_reachable "$WEIR_IP4" 30
echo "== soak: $minutes min of iperf -P 8 + a 20 MB socat every 20 s (impairment: 0.1% loss, 1% reorder, 0.1% dup)"

ip netns exec "$WEIR_NS" iperf -c "$WEIR_IP4" -p 5001 -P 8 -t "$secs" -y C >"$work/iperf.csv" 2>&1 &
iperf_pid=$!
: >"$work/samples" ; : >"$work/shas"
start=$SECONDS next_xfer=$SECONDS n=0
while [ $((SECONDS - start)) -lt "$secs" ]; do
  if [ $SECONDS -ge $next_xfer ]; then
    n=$((n + 1)); next_xfer=$((SECONDS + 20))
    head -c $((20 * 1024 * 1024)) /dev/urandom >"$work/x.bin"
    sha256sum "$work/x.bin" | cut -d' ' -f1 >>"$work/shas"
    ip netns exec "$WEIR_NS" socat -u "FILE:$work/x.bin" "TCP4:$WEIR_IP4:5002" || echo "socat transfer $n failed" >&2
  fi
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$sink/status" 2>/dev/null || echo 0)
  last=$(tail -n1 "$work/log.jsonl" 2>/dev/null || echo '{}')
  echo "$((SECONDS - start)) $rss $(jq -r '[.mbufs_in_use // 0, .connections_open // 0, .gro_held_runs // 0, .tcp_bytes_in_order // 0] | @tsv' <<<"$last")" >>"$work/samples"
  sleep 5
done
wait "$iperf_pid" || true
sleep 1
kill -INT "$sink"; wait "$sink"; TAPNS_PIDS=()

# Digests: every socat transfer (in order) against weir's records for port 5002.
mapfile -t want <"$work/shas"
mapfile -t got < <(jq -r '.digests[] | select(.local_port == 5002) | .sha256' "$work/final.json")
bad=0
for i in "${!want[@]}"; do
  [ "${got[$i]:-none}" = "${want[$i]}" ] || { echo "transfer $((i + 1)): sha256 ${got[$i]:-none} != ${want[$i]}" >&2; bad=$((bad + 1)); }
done
check "all ${#want[@]} socat transfers arrived intact" eq "$bad" 0

read -r rss1 rss2 mb1 mb2 cmax fmax rssmax gbytes < <(awk -v total="$secs" '
  { t=$1; if (t < total * 0.1) next;
    half = (t < total * 0.55) ? 1 : 2;
    if ($2 > rss[half]) rss[half] = $2; if ($3 > mb[half]) mb[half] = $3;
    if ($4 > c) c = $4; if ($5 > f) f = $5; if ($2 > rmax) rmax = $2; b = $6 }
  END { printf "%d %d %d %d %d %d %d %.2f\n", rss[1], rss[2], mb[1], mb[2], c, f, rmax, b / 1e9 }' "$work/samples")
check "RSS bounded (second half peak ${rss2} KiB vs first ${rss1} KiB)" \
  awk -v a="$rss2" -v b="$rss1" 'BEGIN { exit !(a <= b * 1.10 + 16384) }'
check "mbufs in use bounded (second half peak $mb2 vs first $mb1)" \
  awk -v a="$mb2" -v b="$mb1" 'BEGIN { exit !(a <= b + 512) }'
check "open connections bounded (peak $cmax <= 10)" awk -v a="$cmax" 'BEGIN { exit !(a <= 10) }'
check "held GRO runs bounded (peak $fmax <= $MAX_FLOWS)" awk -v a="$fmax" -v m="$MAX_FLOWS" 'BEGIN { exit !(a <= m) }'
check "every mbuf returned at exit" eq "$(jq -r .mbufs_in_use_at_exit "$work/final.json")" 0
echo "soak summary: ${minutes} min, ${gbytes} GB in order, ${#want[@]} transfers, RSS peak $((rssmax / 1024)) MiB (halves $((rss1 / 1024))/$((rss2 / 1024)) MiB), mbufs peak $mb1/$mb2, connections peak $cmax, GRO runs peak $fmax, impairment dropped $(jq -r .impairment.dropped "$work/final.json") frames"
e2e_finish
