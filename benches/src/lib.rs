//! weir's criterion benchmarks (`benches/benches/`). The fixtures they run live where the
//! programs that share them can reach them: the TCP fixture in `testkit`, the side-by-side
//! GRO fixture in `apps` (`apps/src/bench/gro_fixture.rs`, shared with `weir-bench gro`).
