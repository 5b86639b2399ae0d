#!/usr/bin/env bash
# Faults with a real sender: weir's seeded impairment stage between the tap and
# the pipeline, the Linux kernel as the TCP sender. With 1% loss, 5% reordering and 1%
# duplication a 200 MB socat transfer must arrive intact, with SACK (out-of-order) and
# duplicate ACKs at work; with corruption added, every damaged frame is caught by a
# checksum and the transfer still arrives intact. Fails (never skips) without root/tun.
#
#   scripts/e2e/faults.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh
# shellcheck source=scripts/lib/e2e.sh
. scripts/lib/e2e.sh

BIG_MB=200 SMALL_MB=30
if [ "${1:-}" = "--quick" ]; then BIG_MB=20 SMALL_MB=10; fi
e2e_init socat jq ping sha256sum

big() { socat_file "$1" "$BIG_MB" "TCP4:$WEIR_IP4:5002"; }
echo "== case: socat ${BIG_MB} MB through loss=1%, reorder=5%, dup=1%"
BODY=big session lossy --impair loss=1%,reorder=5%,dup=1%,seed=1
common_checks lossy "$((BIG_MB * 1024 * 1024))"
check "lossy: the impairment dropped frames" gt "$(j lossy .impairment.dropped)" 0
check "lossy: the impairment reordered frames" gt "$(j lossy .impairment.reordered)" 0
check "lossy: the impairment duplicated frames" gt "$(j lossy .impairment.duplicated)" 0
check "lossy: out-of-order segments queued" gt "$(j lossy .tcp_ooo_segments)" 0
check "lossy: SACK-carrying out-of-order ACKs sent" gt "$(j lossy .acks_by_reason.out_of_order)" 0
check "lossy: duplicate ACKs (D-SACK) sent" gt "$(j lossy .acks_by_reason.duplicate)" 0
check "lossy: gap-fill ACKs sent" gt "$(j lossy .acks_by_reason.gap_fill)" 0
echo "       ACKs by reason: $(j lossy '.acks_by_reason | to_entries | map("\(.key)=\(.value)") | join(" ")')"

small() { socat_file "$1" "$SMALL_MB" "TCP4:$WEIR_IP4:5002"; }
echo "== case: socat ${SMALL_MB} MB through corrupt=1% (checksums left wrong)"
BODY=small session corrupt --impair corrupt=1%,seed=2
common_checks corrupt "$((SMALL_MB * 1024 * 1024))"
check "corrupt: frames were corrupted" gt "$(j corrupt .impairment.corrupted)" 0
caught=$(j corrupt '.drops_by_reason["parse.ipv4_bad_checksum"] + .drops_by_reason["parse.tcp_bad_checksum"]')
check "corrupt: damaged frames dropped by a checksum, not delivered" gt "$caught" 0
echo "       corrupted $(j corrupt .impairment.corrupted), caught by IPv4/TCP checksums: $caught (the rest by other header checks)"

e2e_finish
