//! The TSC clock and remote launch on a worker lcore (one EAL with lcores 0 and 1).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dpdk::{Clock, Eal};

#[test]
fn clock_converts_and_worker_lcore_runs_a_closure() {
    let eal = Eal::init(common::eal_args("lcore", &["-l", "0-1"])).expect("EAL");
    let clock = Clock::new(&eal);
    assert!(clock.hz() > 1_000_000, "TSC at {} Hz?", clock.hz());
    let one_s = clock.cycles_to_ns(clock.hz());
    assert!(
        (999_999_990..=1_000_000_000).contains(&one_s),
        "hz cycles = {one_s} ns"
    );
    let round = clock.cycles_to_ns(clock.ns_to_cycles(1_000_000));
    assert!(
        (999_990..=1_000_010).contains(&round),
        "1 ms round trip: {round} ns"
    );

    let t0 = clock.now();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let dt = (clock.now() - t0).as_nanos();
    assert!(
        (15_000_000..2_000_000_000).contains(&dt),
        "20 ms sleep measured as {dt} ns"
    );

    assert_eq!(eal.current_lcore(), Some(0));
    assert_eq!(eal.worker_lcores(), vec![1]);
    let seen = Arc::new(AtomicU64::new(0));
    let s = Arc::clone(&seen);
    let job = eal
        .remote_launch(1, move || {
            let lcore = Eal::get().and_then(|e| e.current_lcore()).unwrap_or(999);
            s.store(u64::from(lcore) + 100, Ordering::SeqCst);
            42
        })
        .expect("launch");
    assert_eq!(job.join().expect("join"), 42);
    assert_eq!(seen.load(Ordering::SeqCst), 101, "ran on lcore 1");

    let job = eal.remote_launch(1, || panic!("boom")).expect("launch");
    assert!(
        job.join().is_err(),
        "a panic is reported, not propagated into C"
    );
    assert!(
        eal.remote_launch(0, || 0).is_err(),
        "the main lcore is not a worker"
    );
}
