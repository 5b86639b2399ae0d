//! weir-gen's upper bound: 65,536 flows each do the handshake, send their data
//! and close against weir's real pipeline, in memory on the lab's virtual clock (no DPDK:
//! what is tested is that every flow gets its own 4-tuple, connection and byte stream).

use apps::gen::{GenConfig, Interleave};
use apps::lab::sim::{self, SimConfig};
use stack::ack::AckPolicy;
use stack::gro::GroConfig;
use stack::time::Duration;

#[test]
fn sixty_five_thousand_flows_each_deliver_their_bytes() {
    const FLOWS: u32 = 65_536;
    const BYTES: u64 = 2 * 1448;
    let cfg = SimConfig {
        gen: GenConfig {
            flows: FLOWS,
            // Two source addresses' worth of ports (flow_addr spreads flows over IPs).
            interleave: Interleave::Segment,
            bytes_per_flow: Some(BYTES),
            max_half_open: 4096,
            ..GenConfig::default()
        },
        policy: AckPolicy::linux(),
        gro: Some(GroConfig {
            flush_ns: Duration::from_micros(20),
            max_flows: 4096,
            ..GroConfig::default()
        }),
        rcv_buf: 64 << 10,
        link_bps: 100_000_000_000,
        prop: Duration::from_micros(5),
        warmup: Duration::ZERO,
        measure: Duration::from_millis(400),
    };
    let r = sim::run(&cfg, |_| {}).expect("the model runs");
    assert_eq!(r.gen.established, u64::from(FLOWS), "{:?}", r.gen);
    assert_eq!(r.gen.closed, u64::from(FLOWS), "{:?}", r.gen);
    assert_eq!(
        r.bytes,
        u64::from(FLOWS) * BYTES,
        "every flow's bytes delivered"
    );
    assert_eq!(r.gen.resets, 0);
    assert_eq!(r.gen.retransmits, 0);
}
