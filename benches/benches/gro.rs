//! weir's GRO beside DPDK's `rte_gro` (heavyweight mode) on the same bursts of real
//! mbufs, a few representative rows of `weir-bench gro`: `rr` at 1, 256 and 4,096 flows
//! and `train` at 256 flows, all with a 100 µs flush window. One iteration is one burst
//! of 32 segments; only the receiver's work is timed (see `apps::bench::gro_fixture`,
//! apps/src/bench/gro_fixture.rs). One EAL per process, initialised before the first
//! benchmark.
//!
//! `cargo bench -p benches --bench gro`

// criterion_group! defines an undocumented `pub fn benches`.
#![allow(missing_docs)]

use std::time::Duration;

use apps::bench::gro_fixture::{
    eal_args, prepare_pool, run_bursts, Generator, Pattern, Receiver, RteGro, WeirGro, BURST,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dpdk::{Clock, Eal, Mempool};

/// The rows: (pattern, flows, flush window in ns).
const ROWS: [(Pattern, u32, u64); 4] = [
    (Pattern::Rr, 1, 100_000),
    (Pattern::Rr, 256, 100_000),
    (Pattern::Rr, 4096, 100_000),
    (Pattern::Train, 256, 100_000),
];

/// Times `iters` bursts through `rx`, converting the receiver's TSC cycles to wall time.
fn bench_rx<R: Receiver>(rx: &mut R, gen: &mut Generator, clock: &Clock, iters: u64) -> Duration {
    let cycles = run_bursts(rx, gen, iters);
    Duration::from_nanos(clock.cycles_to_ns(cycles))
}

fn gro(c: &mut Criterion) {
    let eal = Eal::init(eal_args("gro-criterion")).expect("EAL initialisation");
    let pool: Mempool = prepare_pool(&eal, "gro-criterion").expect("benchmark mempool");
    let clock = Clock::new(&eal);
    for (pattern, flows, flush_ns) in ROWS {
        let mut g = c.benchmark_group(format!("gro/{}/{flows}flows/{flush_ns}ns", pattern.name()));
        g.throughput(Throughput::Elements(BURST as u64));
        g.bench_function(BenchmarkId::from_parameter("weir"), |b| {
            let mut rx = WeirGro::new(clock, flows, flush_ns);
            let mut gen = Generator::new(pool, pattern, flows);
            b.iter_custom(|iters| bench_rx(&mut rx, &mut gen, &clock, iters));
        });
        g.bench_function(BenchmarkId::from_parameter("rte_gro"), |b| {
            let mut rx = RteGro::new(&eal, &clock, flows, flush_ns).expect("rte_gro context");
            let mut gen = Generator::new(pool, pattern, flows);
            b.iter_custom(|iters| bench_rx(&mut rx, &mut gen, &clock, iters));
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = gro
}
criterion_main!(benches);
