#!/usr/bin/env bash
# Formatting and lints for the whole workspace: `cargo fmt --check` and clippy with
# warnings as errors (the same clippy run scripts/test.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1 && [ -f "${HOME:-/root}/.cargo/env" ]; then
  # shellcheck disable=SC1091
  . "${HOME:-/root}/.cargo/env"
fi
status=0
echo "== cargo fmt --all -- --check"
cargo fmt --all -- --check || status=1
echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings || status=1
[ $status -eq 0 ] && echo "lint: ok" || echo "lint: FAILED" >&2
exit $status
