#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ (cargo-fuzz, libFuzzer) for SECONDS each.
#
#   scripts/fuzz.sh SECONDS [TARGET...]      (targets: parse pipeline send; default all)
#
# Prints the executions per target, exits non-zero if any target crashed, and copies each
# crashing input to fuzz/regressions/<target>/, where `cargo test` (stack/tests/
# fuzz_regressions.rs) replays it from then on. The working corpus grows in
# fuzz/corpus/<target>/ (not committed), starting from fuzz/seeds/<target>/ and the
# regression inputs.
#
# Toolchain: cargo-fuzz wants nightly for -Zsanitizer and the sanitizer-coverage flags; this
# project's machines have stable Rust only, so the script sets RUSTC_BOOTSTRAP=1, which
# lets stable rustc accept them (tested with rustc 1.95 and cargo-fuzz 0.13). AddressSanitizer
# is on by default (FUZZ_SANITIZER=none to run without it: faster, catches only panics).
# The first build takes several minutes (libFuzzer's C++ and ASan instrumentation).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 SECONDS [TARGET...]" >&2
  exit 2
fi
secs=$1
shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(parse pipeline send)

if ! command -v cargo >/dev/null 2>&1 && [ -f "${HOME:-/root}/.cargo/env" ]; then
  # shellcheck disable=SC1091
  . "${HOME:-/root}/.cargo/env"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "==> installing cargo-fuzz"
  cargo install cargo-fuzz --locked || exit 1
fi

export RUSTC_BOOTSTRAP=1
sanitizer=${FUZZ_SANITIZER:-address}
max_len=${FUZZ_MAX_LEN:-8192}

echo "==> building fuzz targets (sanitizer: $sanitizer)"
(cd fuzz && cargo fuzz build -O -s "$sanitizer") || exit 1

failed=0
summary=()
for t in "${targets[@]}"; do
  corpus=fuzz/corpus/$t
  artifacts=fuzz/artifacts/$t
  regress=fuzz/regressions/$t
  mkdir -p "$corpus" "$artifacts" "$regress" "fuzz/seeds/$t"
  rm -f "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-*
  log=$(mktemp)
  echo "==> fuzzing $t for ${secs}s"
  (cd fuzz && cargo fuzz run -O -s "$sanitizer" "$t" "corpus/$t" "seeds/$t" "regressions/$t" -- \
      -max_total_time="$secs" -max_len="$max_len" -print_final_stats=1 \
      -artifact_prefix="artifacts/$t/") >"$log" 2>&1
  rc=$?
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
  speed=$(grep -Eo 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
  if [ -z "$execs" ]; then
    execs=$(grep -Eo '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  fi
  crashes=()
  for a in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-*; do
    [ -f "$a" ] || continue
    cp "$a" "$regress/" && crashes+=("$regress/$(basename "$a")")
    rm -f "$a"
  done
  status=ok
  if [ $rc -ne 0 ] || [ ${#crashes[@]} -gt 0 ]; then
    status="FAILED (exit $rc)"
    failed=1
    grep -E 'panicked|ERROR: |SUMMARY' "$log" | head -5
    echo "    log: $log"
    for c in "${crashes[@]}"; do echo "    kept crashing input: $c"; done
  else
    rm -f "$log"
  fi
  summary+=("$(printf '%-10s %12s execs  %8s exec/s  corpus %5s files  %s' \
    "$t" "${execs:-?}" "${speed:-?}" "$(find "$corpus" -type f | wc -l)" "$status")")
done

echo
echo "==================== scripts/fuzz.sh ${secs}s per target ===================="
for s in "${summary[@]}"; do echo "  $s"; done
if [ $failed -eq 0 ]; then echo "  RESULT: PASS"; else echo "  RESULT: FAIL (replay: cargo test -p stack --test fuzz_regressions)"; fi
exit $failed
