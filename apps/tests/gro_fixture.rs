//! The GRO benchmark's fixture on real mbufs: both implementations coalesce the generated
//! bursts as expected and every mbuf comes back to the pool. One EAL per process, so one
//! test function.

use apps::bench::gro_fixture::{
    eal_args, measure_interleaved, prepare_pool, Generator, Lane, Pattern, RteGro, WeirGro, BURST,
};
use dpdk::{Clock, Eal};

#[test]
fn both_implementations_coalesce_and_free_everything() {
    let eal = Eal::init(eal_args("fixture-test")).expect("EAL");
    let pool = prepare_pool(&eal, "gro-fixture-test").expect("mempool");
    let clock = Clock::new(&eal);
    let base = pool.in_use();

    // (pattern, flows, flush_ns, least segments per unit for both).
    let cases = [
        // One flow, flush every burst: a burst of 32 becomes one unit on both sides.
        (Pattern::Rr, 1, 0, BURST as f64 * 0.99),
        // Trains: 45-segment runs (64 KiB) when the window holds them.
        (Pattern::Train, 16, 100_000, 40.0),
        // Round robin over 256 flows, flushed every burst: hardly anything to merge.
        (Pattern::Rr, 256, 0, 1.0),
    ];
    for (pattern, flows, flush_ns, least) in cases {
        let mut w = WeirGro::new(clock, flows, flush_ns);
        let mut r = RteGro::new(&eal, &clock, flows, flush_ns).expect("rte_gro context");
        let mut gw = Generator::new(pool, pattern, flows);
        let mut gr = Generator::new(pool, pattern, flows);
        let (mw, mr) = measure_interleaved(
            Some(Lane {
                rx: &mut w,
                gen: &mut gw,
            }),
            Some(Lane {
                rx: &mut r,
                gen: &mut gr,
            }),
            &clock,
            10,
            5,
            40,
        );
        let (Some(mw), Some(mr)) = (mw, mr) else {
            panic!("both lanes measured");
        };
        // Same input on both sides.
        assert_eq!(gw.fed(), gr.fed());
        let row = format!(
            "{} {flows} flows {flush_ns} ns: weir {mw:?}, rte_gro {mr:?}",
            pattern.name()
        );
        eprintln!("{row}");
        assert!(mw.segments_per_unit >= least, "{row}");
        assert!(mr.segments_per_unit >= least, "{row}");
        assert!(mw.ns_per_segment > 0.0 && mr.ns_per_segment > 0.0, "{row}");
        // Every parsed segment reached weir's GRO (none dropped by the parser).
        assert_eq!(w.gro().stats().segments_in, gw.fed(), "{row}");
        assert_eq!(r.held(), 0);
        drop((w, r));
        assert_eq!(pool.in_use(), base, "mbufs leaked: {row}");
    }
}
