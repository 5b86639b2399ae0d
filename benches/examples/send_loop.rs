//! The stack's sender (weir-gen's flows on weir's TCP) against weir's receiver, in memory,
//! on the lab's virtual-clock model (`apps::lab::sim`): `weir-bench e2e`'s shape (MSS
//! 1448, writes of 45 segments with PSH on the last, the pattern's period the MSS, GRO
//! flush 20 µs, interleave one segment per flow in turn) without DPDK or a second core.
//!
//! Deterministic, so its instruction count under `valgrind --tool=callgrind` compares
//! two builds of the sender exactly. Collect the sender only with
//!   cargo build --release -p benches --example send_loop
//!   valgrind --tool=callgrind \
//!     '--toggle-collect=apps::gen::engine::Gen<B>::poll_tx*' \
//!     '--toggle-collect=apps::gen::engine::Gen<B>::handle_rx_burst*' \
//!     target/release/examples/send_loop [flows] [ms] [train]
//! and divide by the data segments it prints. The in-memory buffers are `Vec`s: the
//! payload is copied and its checksum computed in software (`malloc`, `memcpy` and
//! `software_checksums` in the profile), where `weir-bench e2e` stamps payloads and
//! models the NIC's offload; the TCP work around them is the same.
#![allow(missing_docs, clippy::unwrap_used)]

use apps::gen::{GenConfig, Interleave};
use apps::lab::sim::{run, SimConfig};
use stack::ack::AckPolicy;
use stack::gro::GroConfig;
use stack::time::Duration;

const MSS: u16 = 1448;

fn main() {
    let mut args = std::env::args().skip(1);
    let flows: u32 = args.next().map_or(1, |a| a.parse().unwrap());
    let ms: u64 = args.next().map_or(20, |a| a.parse().unwrap());
    let train: u16 = args.next().map_or(0, |a| a.parse().unwrap());
    let interleave = if train > 0 {
        Interleave::Train(train)
    } else {
        Interleave::Segment
    };
    let cfg = SimConfig {
        gen: GenConfig {
            flows,
            mss: MSS,
            write_size: 45 * u32::from(MSS),
            pattern_period: u32::from(MSS),
            interleave,
            max_half_open: 128,
            open_first: true,
            duration: None,
            ..GenConfig::default()
        },
        policy: AckPolicy::default(),
        gro: Some(GroConfig {
            flush_ns: Duration::from_nanos(20_000),
            max_flows: 4096,
            ..GroConfig::default()
        }),
        rcv_buf: 4 << 20,
        link_bps: 100_000_000_000,
        prop: Duration::from_micros(5),
        warmup: Duration::from_millis(5),
        measure: Duration::from_millis(ms),
    };
    let r = run(&cfg, |_| {}).unwrap();
    println!(
        "flows {flows} interleave {interleave:?}: {} data segments in the window, {} sent in all, {} retransmitted, {:.1} seg/unit, {} ACKs",
        r.segments, r.gen.segments, r.gen.retransmits, r.seg_per_unit, r.acks
    );
}
