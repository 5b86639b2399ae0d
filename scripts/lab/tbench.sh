#!/usr/bin/env bash
# tbench through weir beside tbench through the kernel, MB/s per client count (field
# report 003: "tbench through weir beside tbench through the kernel").
#
# Both servers are one virtual device away from the same clients' namespace, which
# scripts/lib/tapns.sh creates:
# - weir: `weir-serve --app tbench` on DPDK's net_tap. The tbench client (Debian's dbench
#   package) runs in the namespace, the kernel's TCP there is the client's stack, and
#   reaches weir (198.18.0.1) over the tap (the kernel is 198.18.0.2 on it).
# - the kernel: `tbench_srv` in a second namespace (tapns_peer_create), 198.18.4.1,
#   reached from the clients' namespace (198.18.4.2) over a veth pair: the kernel's TCP on
#   both ends.
# Both servers run on CPU 0 (weir-serve's lcore 0; tbench_srv under taskset), the clients
# on CPU 1. In ROUNDS rounds (default 3), every client count runs against both servers, weir's
# counts first in odd rounds and the kernel's in even ones; weir-serve runs only during
# weir's part of a round (it polls a core: running beside the kernel's runs it would take
# a core from them). The table shows medians of the rounds and the ratio of the medians.
#
# Usage: scripts/lab/tbench.sh [-t SECONDS] [-c LIST] [-r ROUNDS]     (as root)
#   -t SECONDS   tbench's -t per run (default 10)
#   -c LIST      client counts, comma-separated (default 1,2,4,8)
#   -r ROUNDS    rounds (default 3; env ROUNDS)
# Writes $OUT/tbench.md (docs/lab/, the fragment scripts/lab/all.sh puts in docs/lab.md)
# and $OUT/tbench.csv (one row per run). Builds weir-serve into $CARGO_TARGET_DIR (default
# /tmp/t-lab, common.sh), or runs the one WEIR_SERVE names (not rebuilt).
# TAP_PCAP=1 (with KEEP_WORK=1) also captures the tap's frames, 128 bytes of each, into
# tap-N.pcap there (tshark, in the namespace) during each weir run.
# KEEP_WORK=1 keeps the run's work directory (/tmp/weir-tbench.*: weir-serve's JSON and
# log, the clients' output, and the tap's link counters at each weir-serve stop, whose TX
# dropped counts what the kernel could not hand weir).
. "$(dirname "$0")/common.sh"
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh
ME=tbench.sh
usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2; }
SECS=10
CLIENTS=1,2,4,8
ROUNDS=${ROUNDS:-3}
while getopts "t:c:r:h" o; do
  case $o in
    t) SECS=$OPTARG ;;
    c) CLIENTS=$OPTARG ;;
    r) ROUNDS=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || usage
case "$SECS" in ""|*[!0-9]*|0) echo "$ME: -t must be a positive whole number of seconds, got '$SECS'" >&2; exit 2 ;; esac
case "$ROUNDS" in ""|*[!0-9]*|0) echo "$ME: -r must be a positive whole number, got '$ROUNDS'" >&2; exit 2 ;; esac
case "$CLIENTS" in ""|*[!0-9,]*|,*|*,|*,,*) echo "$ME: -c takes comma-separated whole numbers, got '$CLIENTS'" >&2; exit 2 ;; esac
[ "$(id -u)" -eq 0 ] || die "$ME needs root (it creates network namespaces, a tap and a veth pair): run it as root"
tapns_require
for t in tbench tbench_srv jq ss taskset nstat; do
  command -v "$t" >/dev/null || die "$t is missing (tbench and tbench_srv are in Debian's dbench package): run scripts/setup.sh"
done

if [ -n "${WEIR_SERVE:-}" ]; then
  SERVE=$WEIR_SERVE
  [ -x "$SERVE" ] || die "WEIR_SERVE=$SERVE is not an executable"
  echo "weir-serve: $SERVE (WEIR_SERVE; not rebuilt)"
else
  echo "== building weir-serve (release)"
  cargo build --release -q -p apps --bin weir-serve
  SERVE=$CARGO_TARGET_DIR/release/weir-serve
fi

KERNEL_IP4=198.18.4.1 CLIENT_VETH_IP4=198.18.4.2
# IPv6 on the tap (unused by tbench, which is IPv4) from the documentation prefix (RFC 3849).
WEIR_IP6=2001:db8::1 PEER_IP6=2001:db8::2
work=$(mktemp -d /tmp/weir-tbench.XXXXXX)
tapns_create
trap 'tapns_cleanup; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
tapns_peer_create "$CLIENT_VETH_IP4" "$KERNEL_IP4"

# The kernel's server, on CPU 0 as weir's lcore: idle between runs (it blocks in accept), so
# it stays up throughout.
ip netns exec "$TAPNS_PEER_NS" taskset -c 0 tbench_srv >"$work/tbench_srv.log" 2>&1 &
SRV_PID=$!
TAPNS_PIDS+=("$SRV_PID")
for _ in $(seq 100); do
  [ -n "$(ip netns exec "$TAPNS_PEER_NS" ss -Hltn '( sport = :7003 )')" ] && break
  sleep 0.05
done
[ -n "$(ip netns exec "$TAPNS_PEER_NS" ss -Hltn '( sport = :7003 )')" ] ||
  die "tbench_srv does not listen on port 7003: $(cat "$work/tbench_srv.log")"

SERVE_RUN=0
serve_start() {
  SERVE_RUN=$((SERVE_RUN + 1))
  tapns_spawn "$work/serve-$SERVE_RUN.log" "$SERVE" --tap-iface "$WEIR_TAP" --ip "$WEIR_IP4" \
    --ip6 "$WEIR_IP6" --stats-json "$work/serve-$SERVE_RUN.json" --app tbench
  SERVE_PID=$TAPNS_LAST_PID
  tapns_wait_tap 60
  if [ -n "${TAP_PCAP:-}" ]; then
    ip netns exec "$WEIR_NS" tshark -q -i "$WEIR_TAP" -s 128 -w "$work/tap-$SERVE_RUN.pcap" >"$work/tshark-$SERVE_RUN.log" 2>&1 &
    PCAP_PID=$!
    TAPNS_PIDS+=("$PCAP_PID")
    sleep 1
  fi
  tapns_wait_reachable "$WEIR_IP4" 30
}
# serve_stop: stops weir-serve (SIGINT); a failed exit or an mbuf left out is an error.
serve_stop() {
  [ -z "${KEEP_WORK:-}" ] || ip netns exec "$WEIR_NS" ip -s link show "$WEIR_TAP" >>"$work/tap-stats.txt" 2>&1
  if [ -n "${PCAP_PID:-}" ]; then kill -INT "$PCAP_PID" 2>/dev/null; wait "$PCAP_PID" 2>/dev/null || true; PCAP_PID=; fi
  local rc=0 f=$work/serve-$SERVE_RUN
  kill -INT "$SERVE_PID"
  wait "$SERVE_PID" || rc=$?
  TAPNS_PIDS=("$SRV_PID")
  [ "$rc" = 0 ] || { tail -20 "$f.log" >&2; die "weir-serve exited with status $rc (log above)"; }
  [ "$(jq -r .mbufs_in_use_at_exit "$f.json")" = 0 ] ||
    die "weir-serve left $(jq -r .mbufs_in_use_at_exit "$f.json") mbufs out of its pool"
  echo "   weir-serve: $(jq -r '"\(.serve.connections) connections, \(.serve.closed) closed, \(.serve.app_errors) app errors"' "$f.json")"
}

# retrans: the clients' namespace's TcpRetransSegs so far (absolute: no nstat history).
retrans() { ip netns exec "$WEIR_NS" nstat -asz TcpRetransSegs | awk '$1 == "TcpRetransSegs" { print $2 }'; }
# tbench_run NAME N ADDR: tbench -t SECS N ADDR in the clients' namespace; on stdout its
# MB/s, its max_latency in ms (the longest operation: a stall shows there) and the
# segments the clients' kernel retransmitted meanwhile (tail loss probes included).
# It must end on its own, with a throughput and without "lost sync".
tbench_run() {
  local out=$work/$1.out rc=0 mb lat re0 re1
  re0=$(retrans)
  timeout $((SECS + 120)) ip netns exec "$WEIR_NS" taskset -c 1 tbench -t "$SECS" "$2" "$3" >"$out" 2>&1 || rc=$?
  mb=$(awk '/^Throughput/ { print $2; exit }' "$out")
  lat=$(awk -F'max_latency=' '/^Throughput/ { split($2, v, " "); print v[1]; exit }' "$out")
  if [ "$rc" != 0 ] || [ -z "$mb" ] || grep -q 'lost sync' "$out"; then
    tail -20 "$out" >&2
    die "tbench $2 against $3 failed (exit status $rc; its output above)"
  fi
  if awk -v m="$mb" 'BEGIN { exit !(m <= 0) }'; then
    tail -5 "$out" >&2
    die "tbench $2 against $3 reported $mb MB/s: nothing was measured (is -t $SECS shorter than its warm-up?)"
  fi
  re1=$(retrans)
  echo "$mb ${lat:-nan} $((re1 - re0))"
}

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
HUGE=$(awk '/^HugePages_Free/ { print $2 }' /proc/meminfo)
echo "load: $LOAD; clients: $CLIENTS; $ROUNDS round(s) of tbench -t $SECS"
CSV=$OUT/tbench.csv
echo "round,clients,stack,first,mb_per_s,max_latency_ms,client_retransmits" >"$CSV.tmp"
declare -A W K WL KL WR KR
for R in $(seq "$ROUNDS"); do
  if [ $((R % 2)) = 1 ]; then ORDER="weir kernel"; else ORDER="kernel weir"; fi
  FIRST=${ORDER%% *}
  for S in $ORDER; do
    [ "$S" = weir ] && serve_start
    for N in ${CLIENTS//,/ }; do
      if [ "$S" = weir ]; then
        RUN=$(tbench_run "weir-$R-$N" "$N" "$WEIR_IP4"); read -r MB LAT RE <<<"$RUN"; W[$N]+="$MB "; WL[$N]+="$LAT "; WR[$N]+="$RE "
      else
        RUN=$(tbench_run "kernel-$R-$N" "$N" "$KERNEL_IP4"); read -r MB LAT RE <<<"$RUN"; K[$N]+="$MB "; KL[$N]+="$LAT "; KR[$N]+="$RE "
      fi
      echo "round $R, $S, $N client(s): $MB MB/s, max latency $LAT ms, client retransmits $RE"
      echo "$R,$N,$S,$FIRST,$MB,$LAT,$RE" >>"$CSV.tmp"
    done
    [ "$S" = weir ] && serve_stop
  done
done
mv "$CSV.tmp" "$CSV"

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{ if (NR%2) print v[(NR+1)/2]; else printf "%.3f\n", (v[NR/2]+v[NR/2+1])/2 }'; }
ROWS=""
printf '\n%8s %12s %12s %8s %18s %18s\n' clients "weir MB/s" "kernel MB/s" ratio "weir max lat ms" "kernel max lat ms"
for N in ${CLIENTS//,/ }; do
  # The lists are split into words on purpose (unquoted).
  # shellcheck disable=SC2086
  MW=$(median ${W[$N]}); MK=$(median ${K[$N]})
  # shellcheck disable=SC2086
  MWL=$(median ${WL[$N]}); MKL=$(median ${KL[$N]})
  # shellcheck disable=SC2086
  MWR=$(median ${WR[$N]}); MKR=$(median ${KR[$N]})
  RATIO=$(awk -v w="$MW" -v k="$MK" 'BEGIN{ if (k > 0) printf "%.2f", w / k; else print "-" }')
  printf '%8s %12.2f %12.2f %7sx %18s %18s\n' "$N" "$MW" "$MK" "$RATIO" "$MWL" "$MKL"
  ROWS="$ROWS| $N | $(printf '%.2f' "$MW") | $(printf '%.2f' "$MK") | **${RATIO}x** | $MWL | $MKL | $MWR | $MKR | ${W[$N]% } | ${K[$N]% } |
"
done

CPU=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
{
  echo "Generated by \`scripts/lab/tbench.sh -t $SECS -c $CLIENTS -r $ROUNDS\` on $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -srm), ${CPU:-unknown CPU}, $(nproc) CPUs; load at start $LOAD. Per-run figures: [tbench.csv](lab/tbench.csv)."
  echo
  echo "Debian's \`tbench\` client (dbench 4.00, its default load file), \`tbench -t $SECS N ADDR\`, in one network namespace against two servers, each one virtual device away. **weir**: \`weir-serve --app tbench\` on DPDK's net_tap (one lcore, pinned to CPU 0, polling; its embedded EAL default puts mbufs on 2 MiB hugepages when free ones are mounted, 4 KiB pages otherwise: $HUGE 2 MiB pages were free at start); the path is the client's kernel TCP, the tap device (the kernel writes each frame to the tap's queue; weir's poll loop reads and writes frames on the tap's file descriptor, one system call per frame), weir's stack and the app. **Kernel**: \`tbench_srv\` (pinned to CPU 0 with taskset; a process per connection, blocking reads and writes) in a second namespace joined by veth; the path is the kernel's TCP on both ends and the veth pair, which hands segments of up to 64 KiB across (GSO/GRO: no segmentation at the MTU, no per-frame system call). So the weir column includes the tap's per-frame cost that a NIC would not have, and the client's kernel TCP is in both columns. $ROUNDS rounds; in each, every client count against both servers, weir first in odd rounds and the kernel first in even ones (weir-serve runs only during its part: it polls a core). Figures are medians of the rounds; the ratio is weir's median over the kernel's. Max latency is tbench's \`max_latency\`, its slowest single operation in the run (a stall, such as a delayed ACK or a retransmission timeout, shows there). Client retransmits: segments the clients' kernel retransmitted during the run (\`nstat\` TcpRetransSegs in the clients' namespace, tail loss probes included), each a wait for an ACK that did not come in time. The servers get CPU 0 and the clients CPU 1 in both paths (the kernel's softirq work runs where it is raised, and the VM's 2 CPUs are shared with whatever else runs, hence the load figure)."
  echo
  echo "| clients | weir MB/s | kernel MB/s | weir/kernel | weir max latency ms | kernel max latency ms | weir: client retransmits | kernel: client retransmits | weir MB/s per round | kernel MB/s per round |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
  printf '%s' "$ROWS"
} >"$OUT/tbench.md"
echo "wrote $OUT/tbench.md and $CSV"
