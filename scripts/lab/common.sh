# Shared by the lab scripts: build weir-lab / weir-bench once (release) and run them.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/tmp/t-lab}"
OUT="${OUT:-docs/lab}"
mkdir -p "$OUT"
lab_build() {
  cargo build --release -q -p apps --bin weir-lab --bin weir-bench
  LAB="$CARGO_TARGET_DIR/release/weir-lab"
  BENCH="$CARGO_TARGET_DIR/release/weir-bench"
}
