#!/usr/bin/env bash
# weir's full check, as CI runs it (.ci/run): installs what is missing (scripts/setup.sh),
# then runs every step below, keeps going after a failure so one run shows everything,
# prints a summary and exits non-zero if any step failed.
#
# Needs root (apt, network namespaces and the net_tap tests) on Debian 12; works without a
# NIC or hugepages: every DPDK test uses --no-pci --no-huge and a unique --file-prefix.
#
# Adding a step: append a `step "name" command args...` line in the "Steps" section; name
# it after what it checks. A step is any command; its exit status decides PASS/FAIL.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
export RUST_BACKTRACE=${RUST_BACKTRACE:-1}
# A fresh clone builds once: incremental caches would only take disk (about 0.7 GiB).
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}; fi

results=()
failed=0
t_start=$(date +%s)

step() {
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo
  echo "==> [$name] $*"
  if "$@"; then
    results+=("PASS  $name ($(( $(date +%s) - t0 ))s)")
  else
    results+=("FAIL  $name ($(( $(date +%s) - t0 ))s)")
    failed=1
  fi
}

summary() {
  echo
  echo "==================== scripts/test.sh summary ===================="
  local r
  for r in "${results[@]}"; do echo "  $r"; done
  echo "  total $(( $(date +%s) - t_start ))s"
  if [ $failed -eq 0 ]; then echo "  RESULT: PASS"; else echo "  RESULT: FAIL"; fi
  echo "================================================================="
}

# The stack crate must build and test without DPDK: no DPDK crate in its dependency tree.
stack_has_no_dpdk() {
  local tree
  tree=$(cargo tree -p stack --edges normal,build,dev --prefix none) || return 1
  if grep -Eq '^(dpdk|dpdk-sys) ' <<<"$tree"; then
    echo "stack depends on a DPDK crate:" >&2
    grep -E '^(dpdk|dpdk-sys) ' <<<"$tree" >&2
    return 1
  fi
  echo "cargo tree -p stack: no DPDK crate"
}

# A full run writes about 1.7 GiB of build output (debug and release, measured on a fresh
# clone); with less free space the builds fail half-way with "No space left on device".
NEED_MIB=2048
disk_space() {
  local dir=${CARGO_TARGET_DIR:-target} free
  while [ ! -d "$dir" ]; do dir=$(dirname "$dir"); done
  free=$(df -Pm "$dir" | awk 'NR == 2 {print $4}')
  if [ "$free" -lt "$NEED_MIB" ]; then
    echo "only $free MiB free under $dir: scripts/test.sh needs about $NEED_MIB MiB for its builds" >&2
    return 1
  fi
  echo "$free MiB free under $dir (needs about $NEED_MIB)"
}

# ---- Set-up (nothing else can run without it) ----
step "disk space" disk_space
step "setup" scripts/setup.sh
if [ $failed -ne 0 ]; then summary; exit 1; fi
if ! command -v cargo >/dev/null 2>&1 && [ -f "${HOME:-/root}/.cargo/env" ]; then
  # shellcheck disable=SC1091
  . "${HOME:-/root}/.cargo/env"
fi

# ---- Steps (append new ones at the end of this list) ----
step "stack has no DPDK dependency" stack_has_no_dpdk
step "rustfmt (workspace, --check)" cargo fmt --all -- --check
step "repository paths named in comments, docs and scripts exist" scripts/check-paths.sh
step "clippy (workspace, all targets, -D warnings)" \
  cargo clippy --workspace --all-targets -- -D warnings
step "cargo test --workspace" cargo test --workspace --no-fail-fast
step "e2e: weir-sink receiving the kernel's TCP over net_tap (GRO on/off, IPv6)" scripts/e2e/tap.sh
step "e2e: weir-sink --queues 2 over net_tap, the kernel sending 16 flows (each flow on one core, digests, both cores at work)" scripts/e2e/queues.sh
step "e2e: jumbo frames: weir-sink --mtu 9000 on net_tap, the kernel sending 8,948-byte segments as chained mbufs (socat digests, IPv4 and IPv6, GRO to 64 KiB and beyond)" scripts/e2e/jumbo.sh
step "e2e: weir-sink on net_af_packet and net_af_xdp over a veth pair, the kernel sending (iperf -P 8, socat digests, the drivers' mbufs apart)" scripts/e2e/pmds.sh
step "e2e: operability: --pcap, --metrics, --config, logs" scripts/e2e/ops.sh
step "e2e: loss, reordering, duplication, corruption from the impairment stage" scripts/e2e/faults.sh
step "e2e: weir-gen sending to the kernel's TCP over net_tap" scripts/e2e/gen.sh
step "e2e: weir sends: connect and send to the kernel, echo with the kernel (and through the impairment stage)" scripts/e2e/send.sh
step "e2e: request/response between two weir stacks over a ring pair (weir-bench rr; every answer byte for byte, also through the impairment stage)" scripts/e2e/rr.sh
step "e2e: 20,000 established connections on one core (weir-bench conns; every connection's bytes, heap per connection within 4 KiB)" scripts/e2e/conns.sh
step "lab check: request/response against the kernel over veth (compare-kernel-rr.sh --check: accounting on both stacks)" \
  env CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}" scripts/lab/compare-kernel-rr.sh --check
step "e2e: weir-serve against the real clients (sockperf, socat, iperf3, tbench, wrk, curl), beside the kernel's servers" scripts/e2e/serve.sh
step "lab check: weir-gen and weir-sink in two processes over net_memif (memif.sh --check: digests and accounting)" scripts/lab/memif.sh --check

summary
exit $failed
