#!/usr/bin/env bash
# Request/response: weir's client and echo server over a ring pair on two lcores
# (`weir-bench rr`) against the kernel's, two network namespaces joined by veth, the
# kernel's server pinned to CPU 1 and its client to CPU 0 (taskset), as weir's two lcores.
# 64-byte requests and responses. See docs/decisions/compare-kernel-method.md for what each
# side's path includes.
#
# Shapes (connections x transactions in flight per connection): 1x1 and 64x1 (the
# targets: weir >= 10x the kernel's transactions/s, weir's p99 <= a fifth of the kernel's),
# and 1x16. The kernel's side is `weir-bench kernel-rr client` against `weir-bench kernel-rr
# serve` (one thread each, epoll, TCP_NODELAY, every response checked byte for byte); at
# 1x1 Debian's sockperf ping-pong against `sockperf server` is measured beside it.
# ROUNDS rounds (default 3): in each, every shape is run on both stacks back to back, weir
# first in odd rounds and the kernel first in even ones; the figures are medians of the
# rounds, the ratios medians of the rounds' ratios (this VM's speed moves within minutes).
#
# Usage: scripts/lab/compare-kernel-rr.sh [options]     (as root: ip netns)
#   --conns LIST     connection counts run at burst 1 (comma-separated; default 1,64)
#   --bursts LIST    bursts run at 1 connection (default 1,16)
#   --rounds N       rounds (default 3; env ROUNDS)
#   --seconds S      measured seconds per run (default 5; env SECS)
#   --rx-burst N     weir's receive batch on both sides (weir-bench rr --rx-burst, 1-256;
#                    default 256, weir-sink's): with --write-docs the table goes to
#                    compare_kernel_rr_rxN.md, beside the default's
#   --kernel-only    skip weir (no ratio, no target): for testing the kernel's side
#   --check          CI: 1 round of 1 s, shapes 1x1 and 4x4 (and the kernel's answerer at
#                    64/1000 bytes, and a refused connection); asserts only accounting
#                    (lost, duplicates and mismatches 0, transactions > 0), never a rate
#   --write-docs     also write the generated table, compare_kernel_rr.md in docs/lab/
# Rows go to target/lab/compare-kernel-rr.json as JSON lines: each run's RR-JSON row with
# its "round", then one "rr-compare" row per shape with the medians. Addresses from
# 198.18.0.0/15 only, inside the namespaces. Builds weir-bench into $CARGO_TARGET_DIR
# (default /tmp/t-lab, common.sh), or runs the one WEIR_BENCH names (not rebuilt).
. "$(dirname "$0")/common.sh"
ME=compare-kernel-rr.sh
usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2; }
CONNS_LIST=1,64
BURSTS_LIST=1,16
ROUNDS="${ROUNDS:-3}"
SECS="${SECS:-5}"
KERNEL_ONLY=0
CHECK=0
WRITE_DOCS=0
RX_BURST=
while [ $# -gt 0 ]; do
  case "$1" in
    --conns) CONNS_LIST="${2:?--conns needs a list}"; shift 2 ;;
    --bursts) BURSTS_LIST="${2:?--bursts needs a list}"; shift 2 ;;
    --rounds) ROUNDS="${2:?--rounds needs a number}"; shift 2 ;;
    --seconds) SECS="${2:?--seconds needs a number}"; shift 2 ;;
    --rx-burst) RX_BURST="${2:?--rx-burst needs a number}"; shift 2 ;;
    --kernel-only) KERNEL_ONLY=1; shift ;;
    --check) CHECK=1; shift ;;
    --write-docs) WRITE_DOCS=1; shift ;;
    -h|--help) usage ;;
    *) echo "$ME: unknown option '$1'" >&2; usage ;;
  esac
done
case "$ROUNDS" in ""|*[!0-9]*|0) echo "$ME: --rounds must be a positive whole number, got '$ROUNDS'" >&2; exit 2 ;; esac
case "$SECS" in ""|*[!0-9.]*|.|*.*.*) echo "$ME: --seconds must be a positive number, got '$SECS'" >&2; exit 2 ;; esac
case "$RX_BURST" in ""|[1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-6]) ;; *) echo "$ME: --rx-burst takes 1 to 256, got '$RX_BURST'" >&2; exit 2 ;; esac
for L in "$CONNS_LIST" "$BURSTS_LIST"; do
  case "$L" in ""|*[!0-9,]*|,*|*,|*,,*) echo "$ME: --conns and --bursts take comma-separated whole numbers, got '$L'" >&2; exit 2 ;; esac
done
# SHAPES: "CONNSxBURST" words.
if [ "$CHECK" = 1 ]; then
  ROUNDS=1; SECS=1; SHAPES="1x1 4x4"
else
  SHAPES=""
  for C in ${CONNS_LIST//,/ }; do SHAPES="${SHAPES:+$SHAPES }${C}x1"; done
  for B in ${BURSTS_LIST//,/ }; do case " $SHAPES " in *" 1x$B "*) ;; *) SHAPES="$SHAPES 1x$B" ;; esac; done
fi
if [ "$(id -u)" != 0 ]; then
  echo "$ME: error: needs root for network namespaces (ip netns add); run it as root" >&2
  exit 1
fi
for T in ip taskset jq; do
  command -v "$T" >/dev/null || { echo "$ME: error: needs '$T' (not found)" >&2; exit 1; }
done
SOCKPERF=1
if [ "$CHECK" = 1 ]; then
  SOCKPERF=0
elif ! command -v sockperf >/dev/null; then
  echo "$ME: error: needs sockperf for the 1x1 shape (apt-get install sockperf)" >&2
  exit 1
fi
say_kernel_only() {
  [ "$KERNEL_ONLY" = 1 ] || return 0
  echo "########################################################################"
  echo "## --kernel-only: weir is NOT measured; no ratio and no target below  ##"
  echo "########################################################################"
}
say_kernel_only

if [ -n "${WEIR_BENCH:-}" ]; then
  BENCH="$WEIR_BENCH"
  [ -x "$BENCH" ] || { echo "$ME: error: WEIR_BENCH=$BENCH is not an executable" >&2; exit 1; }
  echo "weir-bench: $BENCH (WEIR_BENCH; not rebuilt)"
else
  cargo build --release -q -p apps --bin weir-bench
  BENCH="$CARGO_TARGET_DIR/release/weir-bench"
fi
mkdir -p target/lab
JSON=target/lab/compare-kernel-rr.json
: > "$JSON"

SIZE=64
SRV_IP=198.18.24.2; CLI_IP=198.18.24.1
RR_PORT=7000; ANS_PORT=7001; SP_PORT=11111; DEAD_PORT=7009
A=weirkrr-c-$$; B=weirkrr-s-$$
TMP=$(mktemp -d)
PIDS=""
cleanup() {
  for P in $PIDS; do kill "$P" 2>/dev/null || true; done
  for P in $PIDS; do wait "$P" 2>/dev/null || true; done
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$A"; ip netns add "$B"
ip -n "$A" link add veth-c type veth peer name veth-s netns "$B"
ip -n "$A" addr add "$CLI_IP/24" dev veth-c
ip -n "$B" addr add "$SRV_IP/24" dev veth-s
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set veth-c up
ip -n "$B" link set veth-s up

# wait_listen PORT: until the server namespace listens on PORT (5 s at most).
wait_listen() {
  for _ in $(seq 50); do
    if ip netns exec "$B" ss -Htln "sport = :$1" | grep -q .; then return 0; fi
    sleep 0.1
  done
  echo "$ME: error: nothing listens on $SRV_IP:$1 after 5 s; the server's output:" >&2
  cat "$TMP"/serve-*.log >&2 || true
  exit 1
}
ip netns exec "$B" taskset -c 1 "$BENCH" kernel-rr serve --listen "$SRV_IP:$RR_PORT" \
  --request "$SIZE" --response "$SIZE" >"$TMP/serve-echo.log" 2>&1 &
PIDS="$PIDS $!"
wait_listen "$RR_PORT"
if [ "$SOCKPERF" = 1 ]; then
  ip netns exec "$B" taskset -c 1 sockperf server --tcp -i "$SRV_IP" -p "$SP_PORT" >"$TMP/serve-sockperf.log" 2>&1 &
  PIDS="$PIDS $!"
  wait_listen "$SP_PORT"
fi

LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "load: $LOAD; shapes (conns x burst): $SHAPES; $ROUNDS round(s) of $SECS s; $SIZE-byte requests and responses"
# median VALUES...: the middle value (the mean of the middle two for an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{ if (NR%2) print v[(NR+1)/2]; else printf "%.6g\n", (v[NR/2]+v[NR/2+1])/2 }'; }
us() { awk -v n="$1" 'BEGIN{printf "%.1f", n/1000}'; }

# run_kernel C B [PORT REQ RESP]: one kernel client run; its RR-JSON row on stdout.
run_kernel() {
  local port="${3:-$RR_PORT}" req="${4:-$SIZE}" resp="${5:-$SIZE}" out
  if ! out=$(ip netns exec "$A" taskset -c 0 "$BENCH" kernel-rr client --connect "$SRV_IP:$port" \
      --conns "$1" --burst "$2" --request "$req" --response "$resp" --seconds "$SECS" --json 2>"$TMP/kernel.err"); then
    echo "$ME: error: the kernel's RR client failed at $1x$2 ($req/$resp bytes):" >&2
    cat "$TMP/kernel.err" >&2
    exit 1
  fi
  echo "$out"
}
# run_weir C B: one weir-bench rr run; its RR-JSON row on stdout.
run_weir() {
  local out row
  if ! out=$("$BENCH" rr --conns "$1" --burst "$2" --request "$SIZE" --response "$SIZE" \
      --seconds "$SECS" --runs 1 --json ${RX_BURST:+--rx-burst "$RX_BURST"} 2>"$TMP/weir.err"); then
    echo "$ME: error: weir-bench rr failed at $1x$2 (does this build have \`weir-bench rr\`? --kernel-only skips weir):" >&2
    tail -20 "$TMP/weir.err" >&2
    exit 1
  fi
  row=$(echo "$out" | jq -c --argjson c "$1" --argjson b "$2" \
    'select(.bench == "rr" and .stack == "weir" and .conns == $c and .burst == $b)' 2>/dev/null | tail -1)
  if [ -z "$row" ]; then
    echo "$ME: error: weir-bench rr printed no RR-JSON row for $1x$2; its output:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "$row"
}
# run_sockperf: sockperf ping-pong (1 connection, 1 in flight); an RR-JSON-shaped row with
# "stack":"sockperf" (latencies are its round-trip percentiles, --full-rtt).
run_sockperf() {
  local log="$TMP/sockperf.log"
  if ! ip netns exec "$A" taskset -c 0 sockperf ping-pong --tcp -i "$SRV_IP" -p "$SP_PORT" \
      -m "$SIZE" -t "$SECS" --full-rtt >"$log" 2>&1; then
    echo "$ME: error: sockperf ping-pong failed:" >&2
    cat "$log" >&2
    exit 1
  fi
  # [Valid Duration] RunTime=1.550 sec; SentMessages=10617; ReceivedMessages=10617
  # ---> percentile 50.000 =   54.581        (usec)
  # # dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0
  sed 's/\x1b\[[0-9;]*m//g' "$log" | awk -v size="$SIZE" '
    /\[Valid Duration\]/ { for (i = 1; i <= NF; i++) { split($i, kv, "=");
        if (kv[1] == "RunTime") secs = kv[2] + 0; if (kv[1] == "ReceivedMessages") n = kv[2] + 0 } }
    /percentile 50.000/ { p50 = $NF * 1000 }
    /percentile 99.000/ { p99 = $NF * 1000 }
    /percentile 99.900/ { p999 = $NF * 1000 }
    /dropped messages/ { gsub(/;/, ""); for (i = 1; i <= NF; i++) { if ($i == "dropped") d = $(i+3); if ($i == "duplicated") u = $(i+3); if ($i == "out-of-order") o = $(i+3) } }
    END { if (secs == 0 || n == "" || p99 == "") exit 1;
      printf "{\"bench\":\"rr\",\"stack\":\"sockperf\",\"conns\":1,\"burst\":1,\"request\":%d,\"response\":%d,\"transactions\":%d,\"seconds\":%.3f,\"tps\":%.1f,\"p50_ns\":%.0f,\"p99_ns\":%.0f,\"p999_ns\":%.0f,\"lost\":%d,\"duplicates\":%d,\"out_of_order\":%d}\n",
        size, size, n, secs, n / secs, p50, p99, p999, d, u, o }' || {
    echo "$ME: error: could not read sockperf's figures; its output:" >&2
    cat "$log" >&2
    exit 1
  }
}
field() { echo "$1" | jq -r ".$2"; }
# check_row NAME ROW: the accounting a --check asserts (never a rate).
FAILS=0
check_row() {
  local bad
  bad=$(echo "$2" | jq -r '[ (if .transactions > 0 then empty else "no transaction completed" end),
      (if .lost == 0 then empty else "\(.lost) lost" end),
      (if .duplicates == 0 then empty else "\(.duplicates) duplicate(s)" end),
      (if .mismatches == 0 then empty else "\(.mismatches) mismatch(es)" end),
      (if (.resets // 0) == 0 then empty else "\(.resets) connection reset(s)" end) ] | join(", ")')
  if [ -n "$bad" ]; then
    echo "CHECK FAILED: $1: $bad" >&2
    FAILS=$((FAILS + 1))
  else
    echo "check ok: $1: $(field "$2" transactions) transactions, lost 0, duplicates 0, mismatches 0"
  fi
}

declare -A WTPS WP99 KTPS KP99 RTPS RP99 STPS SP50 SP99
for R in $(seq "$ROUNDS"); do
  for S in $SHAPES; do
    C=${S%x*}; BU=${S#*x}
    KROW=""; WROW=""
    if [ "$KERNEL_ONLY" = 1 ] || [ $((R % 2)) = 0 ]; then
      KROW=$(run_kernel "$C" "$BU")
      [ "$KERNEL_ONLY" = 1 ] || WROW=$(run_weir "$C" "$BU")
    else
      WROW=$(run_weir "$C" "$BU")
      KROW=$(run_kernel "$C" "$BU")
    fi
    echo "$KROW" | jq -c --argjson r "$R" '. + {round: $r}' >> "$JSON"
    KT=$(field "$KROW" tps); K99=$(field "$KROW" p99_ns)
    KTPS[$S]+="$KT "; KP99[$S]+="$K99 "
    LINE="round $R, $S: kernel $(printf '%.0f' "$KT") tps, p50 $(us "$(field "$KROW" p50_ns)") us, p99 $(us "$K99") us, client $(printf '%.0f' "$(field "$KROW" client_cpu_ns_per_txn)") CPU ns/txn"
    if [ -n "$WROW" ]; then
      echo "$WROW" | jq -c --argjson r "$R" '. + {round: $r}' >> "$JSON"
      WT=$(field "$WROW" tps); W99=$(field "$WROW" p99_ns)
      RT=$(awk -v w="$WT" -v k="$KT" 'BEGIN{printf "%.3f", (k>0)?w/k:0}')
      RP=$(awk -v w="$W99" -v k="$K99" 'BEGIN{printf "%.3f", (w>0)?k/w:0}')
      WTPS[$S]+="$WT "; WP99[$S]+="$W99 "; RTPS[$S]+="$RT "; RP99[$S]+="$RP "
      LINE="$LINE; weir $(printf '%.0f' "$WT") tps, p99 $(us "$W99") us: ${RT}x tps, kernel p99 / weir p99 ${RP}x"
    fi
    echo "$LINE"
    if [ "$CHECK" = 1 ]; then
      check_row "kernel $S" "$KROW"
      [ -z "$WROW" ] || check_row "weir $S" "$WROW"
    fi
    if [ "$SOCKPERF" = 1 ] && [ "$S" = 1x1 ]; then
      SROW=$(run_sockperf)
      echo "$SROW" | jq -c --argjson r "$R" '. + {round: $r}' >> "$JSON"
      STPS[$S]+="$(field "$SROW" tps) "; SP50[$S]+="$(field "$SROW" p50_ns) "; SP99[$S]+="$(field "$SROW" p99_ns) "
      echo "round $R, $S: sockperf ping-pong $(printf '%.0f' "$(field "$SROW" tps)") tps, median RTT $(us "$(field "$SROW" p50_ns)") us, p99 $(us "$(field "$SROW" p99_ns)") us (dropped $(field "$SROW" lost), duplicated $(field "$SROW" duplicates), out of order $(field "$SROW" out_of_order))"
    fi
  done
done

if [ "$CHECK" = 1 ]; then
  # The kernel's server as a fixed-size answerer (64-byte requests, 1,000-byte answers:
  # responses span segments and reads), and the client's error on a refused connection.
  ip netns exec "$B" taskset -c 1 "$BENCH" kernel-rr serve --listen "$SRV_IP:$ANS_PORT" \
    --request 64 --response 1000 >"$TMP/serve-answer.log" 2>&1 &
  PIDS="$PIDS $!"
  wait_listen "$ANS_PORT"
  AROW=$(run_kernel 4 8 "$ANS_PORT" 64 1000)
  echo "$AROW" | jq -c '. + {round: 1}' >> "$JSON"
  check_row "kernel 4x8, 64-byte requests, 1000-byte answers" "$AROW"
  if ip netns exec "$A" "$BENCH" kernel-rr client --connect "$SRV_IP:$DEAD_PORT" --seconds 1 >/dev/null 2>"$TMP/refused.err"; then
    echo "CHECK FAILED: the kernel's client succeeded against $SRV_IP:$DEAD_PORT, where nothing listens" >&2
    FAILS=$((FAILS + 1))
  elif grep -q refused "$TMP/refused.err"; then
    echo "check ok: a refused connection fails the client with: $(head -1 "$TMP/refused.err")"
  else
    echo "CHECK FAILED: the kernel's client failed against a closed port without saying 'refused':" >&2
    cat "$TMP/refused.err" >&2
    FAILS=$((FAILS + 1))
  fi
  say_kernel_only
  if [ "$FAILS" -gt 0 ]; then
    echo "$ME --check: $FAILS check(s) failed" >&2
    exit 1
  fi
  echo "$ME --check: all accounting checks passed (rows in $JSON)"
  exit 0
fi

# The summary: medians of the rounds per shape, against the targets.
ROWS=""
SPLINE=""
for S in $SHAPES; do
  C=${S%x*}; BU=${S#*x}
  # The lists are split into words on purpose (unquoted).
  # shellcheck disable=SC2086
  MKT=$(median ${KTPS[$S]}); MK99=$(median ${KP99[$S]})
  TARGET=0; [ "$BU" = 1 ] && { [ "$C" = 1 ] || [ "$C" = 64 ]; } && TARGET=1
  if [ "$KERNEL_ONLY" = 1 ]; then
    echo "$S: kernel median $(printf '%.0f' "$MKT") tps, p99 $(us "$MK99") us (weir not measured: --kernel-only)"
    jq -nc --argjson c "$C" --argjson b "$BU" --argjson kt "$MKT" --argjson k99 "$MK99" --argjson rounds "$ROUNDS" \
      '{bench:"rr-compare", conns:$c, burst:$b, request:64, response:64, rounds:$rounds, kernel_tps:$kt, kernel_p99_ns:$k99, weir:"not measured (--kernel-only)"}' >> "$JSON"
    ROWS="$ROWS| $C | $BU | - | $(printf '%.0f' "$MKT") | - | - | $(us "$MK99") | - | not measured |
"
    continue
  fi
  # shellcheck disable=SC2086
  MWT=$(median ${WTPS[$S]}); MW99=$(median ${WP99[$S]}); MRT=$(median ${RTPS[$S]}); MRP=$(median ${RP99[$S]})
  if [ "$TARGET" = 1 ]; then
    TMET=$(awk -v r="$MRT" 'BEGIN{print (r>=10)?"met":"NOT met"}')
    PMET=$(awk -v r="$MRP" 'BEGIN{print (r>=5)?"met":"NOT met"}')
    VERDICT="tps >= 10x: $TMET; p99 <= kernel/5: $PMET"
  else
    TMET=""; PMET=""; VERDICT="no target at this shape"
  fi
  echo "$S: weir median $(printf '%.0f' "$MWT") tps, kernel $(printf '%.0f' "$MKT") tps: ratio $(printf '%.2f' "$MRT")x; p99 weir $(us "$MW99") us, kernel $(us "$MK99") us: kernel/weir $(printf '%.2f' "$MRP")x ($VERDICT)"
  jq -nc --argjson c "$C" --argjson b "$BU" --argjson wt "$MWT" --argjson kt "$MKT" --argjson rt "$MRT" \
    --argjson w99 "$MW99" --argjson k99 "$MK99" --argjson rp "$MRP" --argjson rounds "$ROUNDS" \
    --arg tmet "$TMET" --arg pmet "$PMET" \
    '{bench:"rr-compare", conns:$c, burst:$b, request:64, response:64, rounds:$rounds, weir_tps:$wt, kernel_tps:$kt, tps_ratio:$rt,
      weir_p99_ns:$w99, kernel_p99_ns:$k99, p99_ratio:$rp}
      + (if $tmet == "" then {} else {tps_target:$tmet, p99_target:$pmet} end)' >> "$JSON"
  ROWS="$ROWS| $C | $BU | $(printf '%.0f' "$MWT") | $(printf '%.0f' "$MKT") | **$(printf '%.2f' "$MRT")x** | $(us "$MW99") | $(us "$MK99") | **$(printf '%.2f' "$MRP")x** | $VERDICT |
"
done
if [ "$SOCKPERF" = 1 ] && [ -n "${STPS[1x1]:-}" ]; then
  # shellcheck disable=SC2086
  MST=$(median ${STPS[1x1]}); MS50=$(median ${SP50[1x1]}); MS99=$(median ${SP99[1x1]})
  SPLINE="sockperf ping-pong --tcp (1 connection, 1 in flight) against sockperf server, same namespaces and CPUs: median $(printf '%.0f' "$MST") tps, median RTT $(us "$MS50") us, p99 $(us "$MS99") us."
  echo "$SPLINE"
  jq -nc --argjson t "$MST" --argjson p50 "$MS50" --argjson p99 "$MS99" --argjson rounds "$ROUNDS" \
    '{bench:"rr-compare", stack:"sockperf", conns:1, burst:1, request:64, response:64, rounds:$rounds, tps:$t, p50_ns:$p50, p99_ns:$p99}' >> "$JSON"
fi
say_kernel_only
echo "rows: $JSON"

if [ "$WRITE_DOCS" = 1 ]; then
  CPU=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
  ARGS="--conns $CONNS_LIST --bursts $BURSTS_LIST --rounds $ROUNDS --seconds $SECS${RX_BURST:+ --rx-burst $RX_BURST}"
  [ "$KERNEL_ONLY" = 1 ] && ARGS="$ARGS --kernel-only"
  {
    echo "Generated by \`scripts/lab/compare-kernel-rr.sh $ARGS --write-docs\` on $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -srm), ${CPU:-unknown CPU}, $(nproc) CPUs; load at start $LOAD."
    echo
    echo "$ROUNDS rounds; in each, every shape on both stacks back to back (weir first in odd rounds, the kernel first in even ones), $SECS s measured per run; figures are medians of the rounds, ratios medians of the rounds' ratios. 64-byte requests and responses, every response checked byte for byte. weir: \`weir-bench rr\` (client and echo server on two lcores over a ring pair; each side takes at most ${RX_BURST:-256} frames per receive call). Kernel: \`weir-bench kernel-rr client\` on CPU 0 against \`weir-bench kernel-rr serve\` on CPU 1, in two namespaces joined by veth (one thread each, epoll, TCP_NODELAY). Targets at 1 and 64 connections, burst 1: weir >= 10x the kernel's transactions/s, weir's p99 <= a fifth of the kernel's."
    [ "$KERNEL_ONLY" = 1 ] && { echo; echo "**weir was not measured (--kernel-only).**"; }
    echo
    echo "| conns | burst | weir tps | kernel tps | tps weir/kernel | weir p99 us | kernel p99 us | p99 kernel/weir | targets |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    printf '%s' "$ROWS"
    [ -z "$SPLINE" ] || { echo; echo "$SPLINE"; }
  } > "$OUT/compare_kernel_rr${RX_BURST:+_rx$RX_BURST}.md"
  echo "wrote $OUT/compare_kernel_rr${RX_BURST:+_rx$RX_BURST}.md"
fi
