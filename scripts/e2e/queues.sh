#!/usr/bin/env bash
# weir-sink with two queues (two cores) over net_tap, the kernel sending 16 flows at once:
# the kernel's tun driver picks a queue per flow (tun_automq_select_queue hashes the flow),
# as a NIC's RSS would. Checks from weir-sink's --stats-json: every digest matches its
# file, each flow was served by exactly one core (one digest per flow, each naming its
# queue; no core answered another's segments with a reset), the per-core counters add up
# to each core's flows alone, and both cores worked.
#
# Needs root and /dev/net/tun; without them it fails with a clear message (it never
# skips). Under a minute.
#
#   scripts/e2e/queues.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
WEIR_NS_PREFIX=wr-queues
WEIR_TAP=wrtap0
# shellcheck source=scripts/lib/tapns.sh
. scripts/lib/tapns.sh
# This script's own addresses (the namespace is private; any 198.18.0.0/15 would do).
WEIR_IP4=198.18.42.1
PEER_IP4=198.18.42.2
# shellcheck source=scripts/lib/e2e.sh
. scripts/lib/e2e.sh
e2e_init socat jq ping sha256sum

FLOWS=16 MB=4

# 16 kernel connections at once to port 5002, each a random file of its own.
flows_body() {
  local i pids=()
  for i in $(seq 1 "$FLOWS"); do
    head -c "$((MB * 1024 * 1024))" /dev/urandom >"$work/flow$i.bin"
    sha256sum "$work/flow$i.bin" | cut -d' ' -f1 >>"$work/$1.shas"
  done
  for i in $(seq 1 "$FLOWS"); do
    ip netns exec "$WEIR_NS" socat -u "FILE:$work/flow$i.bin" "TCP4:$WEIR_IP4:5002" &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
  rm -f "$work"/flow*.bin
}

name=queues2
echo "== case: weir-sink --queues 2, $FLOWS socat flows of $MB MiB at once"
BODY=flows_body session "$name" --no-pci --no-huge -m 512 -l 0-1 \
  "--vdev=net_tap0,iface=$WEIR_TAP" "--file-prefix=wr-queues-$$" --log-level='*:warning' -- \
  --queues 2 --ip "$WEIR_IP4"

bytes=$((FLOWS * MB * 1024 * 1024))
check "tcp_bytes_in_order equals what the kernel sent" eq "$(j $name .tcp_bytes_in_order)" "$bytes"
check "$FLOWS digests, one per flow" eq "$(j $name '.digests | length')" "$FLOWS"
check "every flow's digest matches its file" eq \
  "$(j $name '[.digests[].sha256] | sort | join(",")')" "$(sort "$work/$name.shas" | paste -sd,)"
check "every connection closed cleanly" eq "$(j $name '[.digests[] | select(.end != "closed")] | length')" 0
check "every flow names the queue that served it" eq "$(j $name '[.digests[] | select(.queue == 0 or .queue == 1)] | length')" "$FLOWS"
check "each flow on one core: a connection per flow on its queue's core" eq \
  "$(j $name '[.per_core[].connections_opened] | join(",")')" \
  "$(j $name '[0, 1] as $q | [$q[] as $i | [.digests[] | select(.queue == $i)] | length] | join(",")')"
check "each flow on one core: no connection reset or refused on any core" eq \
  "$(j $name '[.per_core[] | .connections_reset + .connections_refused] | add')" 0
check "each core's bytes are its flows' bytes" eq \
  "$(j $name '[.per_core[].tcp_bytes_in_order] | join(",")')" \
  "$(j $name '[0, 1] as $q | [$q[] as $i | [.digests[] | select(.queue == $i) | .bytes] | add // 0] | join(",")')"
check "both cores worked (frames received on each)" eq "$(j $name '[.per_core[] | select(.rx_packets > 0)] | length')" 2
check "both cores served flows" eq "$(j $name '[.digests[].queue] | unique | length')" 2
check "every mbuf returned" eq "$(j $name .mbufs_in_use_at_exit)" 0
no_refusal "$name"
echo "       flows per core: $(j $name '[0, 1] as $q | [$q[] as $i | [.digests[] | select(.queue == $i)] | length] | join(" and ")')"

e2e_finish
