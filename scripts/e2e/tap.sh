#!/usr/bin/env bash
# End-to-end tests of weir-sink against the Linux kernel's TCP over net_tap: bulk iperf and
# socat transfers with GRO on, GRO off against on for two ACK policies, IPv6, and bad
# start-up input.
#
# Each case starts weir-sink (release build) in a fresh network namespace, drives it from
# the kernel in that namespace with iperf and socat, stops it with SIGINT and checks its
# --stats-json: bytes, digests, ACK counts, mbufs returned, connections closed. Needs root
# and /dev/net/tun; without them it fails with a clear message (it never skips).
#
#   scripts/e2e/tap.sh [--quick]     (--quick: shorter transfers, for a smoke run)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh

IPERF_S=10 BIG_MB=200 SMALL_MB=50 CMP_S=5
if [ "${1:-}" = "--quick" ]; then IPERF_S=3 BIG_MB=20 SMALL_MB=10 CMP_S=2; fi

# shellcheck source=scripts/lib/e2e.sh
. scripts/lib/e2e.sh
e2e_init iperf socat jq ping sha256sum

# ---- 1. iperf -P 8 for 10 s and a 200 MB socat transfer, GRO on (defaults) ----
big() {
  iperf_bytes "$1" "$IPERF_S" "$WEIR_IP4"
  socat_file "$1" "$BIG_MB" "TCP4:$WEIR_IP4:5002"
}
echo "== case: iperf -P 8 -t $IPERF_S + socat ${BIG_MB} MB, GRO on"
BODY=big session gro_linux
sent=$(( $(cat "$work/gro_linux.iperf_bytes") + BIG_MB * 1024 * 1024 ))
common_checks gro_linux "$sent"
check "gro_linux: 8 iperf connections of 5001 counted" eq "$(j gro_linux '[.digests[] | select(.local_port == 5001)] | length')" 8

# ---- 2. GRO off vs on, for linux and every:1 ----
cmp_body() {
  iperf_bytes "$1" "$CMP_S" "$WEIR_IP4"
  socat_file "$1" "$SMALL_MB" "TCP4:$WEIR_IP4:5002"
}
for pol in linux every:1; do
  tag=${pol/:/}
  echo "== case: --ack-policy $pol, GRO off then on"
  BODY=cmp_body session "nogro_$tag" --no-gro --ack-policy "$pol"
  [ "$pol" = linux ] || BODY=cmp_body session "gro_$tag" --ack-policy "$pol"
  # (linux with GRO on is case 1's run, already checked there.)
  runs=("nogro_$tag")
  [ "$pol" = linux ] || runs+=("gro_$tag")
  for r in "${runs[@]}"; do
    common_checks "$r" "$(( $(cat "$work/$r.iperf_bytes") + SMALL_MB * 1024 * 1024 ))"
  done
  check "$pol: GRO off coalesces nothing" eq "$(j "nogro_$tag" .gro_units_out)" 0
  on=$(j "gro_$tag" .segments_per_ack) off=$(j "nogro_$tag" .segments_per_ack)
  echo "       segments per ACK: GRO on $on, GRO off $off"
  check "$pol: GRO on gives fewer ACKs per segment than GRO off" gt "$on" "$off"
done

# ---- 3. IPv6 ----
v6_body() { socat_file "$1" "$SMALL_MB" "TCP6:[$WEIR_IP6]:5002"; }
echo "== case: socat ${SMALL_MB} MB over IPv6"
BODY=v6_body session ipv6
check "ipv6: socat SHA-256 equals weir's digest" eq "$(digest_of ipv6)" "$(cat "$work/ipv6.sha")"
check "ipv6: neighbor discovery answered" gt "$(j ipv6 .nd_adverts)" 0
check "ipv6: every mbuf returned" eq "$(j ipv6 .mbufs_in_use_at_exit)" 0

# ---- 4. Bad start-up input: non-zero exit, one line saying what to fix ----
bad() { # bad NAME EXPECTED-WORD ARGS...
  local name=$1 word=$2; shift 2
  local err rc=0
  err=$("$SINK" "$@" 2>&1 >/dev/null) || rc=$?
  local last; last=$(printf '%s\n' "$err" | tail -n1)
  [ $rc -ne 0 ] || { echo "       exit status 0" >&2; return 1; }
  [[ $last == weir-sink:\ error:* ]] || { echo "       last line: $last" >&2; return 1; }
  grep -qi -- "$word" <<<"$last" || { echo "       '$word' not in: $last" >&2; return 1; }
  echo "       $last"
}
echo "== case: bad start-up input"
check "bad address"  bad addr "--ip" --ip 300.1.2.3
check "bad port 0"   bad port "--port" --port 0
check "bad port 70000" bad port "--port" --port 70000
check "bad policy"   bad policy "ack-policy" --ack-policy sometimes
check "bad every:N"  bad policy "ack-policy" --ack-policy every:0
check "bad EAL option" bad eal "EAL" --no-such-eal-option --no-pci -- --port 5001
check "no port probed" bad noport "no Ethernet port" --no-pci --no-huge --file-prefix="weir-e2e-$$" -- --port 5001

e2e_finish
