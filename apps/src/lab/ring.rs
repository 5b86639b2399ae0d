//! The lab's real-cycles run: weir-gen on the worker lcore and the receiver
//! ([`crate::bench::loops::run_receiver`]) on the main lcore, joined by a DPDK ring pair: the
//! set-up of `weir-bench e2e` (`bench::e2e::Rig`: stamped payload, NIC checksum
//! offloads modelled, writes of whole segments) with the GRO flush window as a parameter.
//! One EAL per process.

use anyhow::Result;

use super::{median, progress};
use crate::bench::e2e::{Rig, SenderKind};
use crate::bench::loops::RxWork;
use crate::eal_args::Memory;
use crate::gen::Interleave;

/// Median receiver cycles per segment (busy-iteration TSC cycles / frames received) at
/// each GRO flush window in `windows` (ns), `flows` flows interleaved per segment.
pub fn cycles_per_segment(
    windows: &[u64],
    flows: u32,
    secs: f64,
    rounds: usize,
) -> Result<Vec<(u64, f64)>> {
    let rig = Rig::new("weir-lab", Memory::NoHuge)?;
    let pb = progress((windows.len() * rounds.max(1)) as u64, "flush sweep (ring)");
    let mut out = Vec::new();
    for &w in windows {
        let mut v = Vec::new();
        for _ in 0..rounds.max(1) {
            let r = rig.run(
                SenderKind::Stack,
                rig.gen_config(flows, secs, false, Interleave::Segment),
                rig.pipeline_config(Some((w, 0)), flows, true, 0),
                RxWork::Stack,
                true,
                secs,
            )?;
            let segs = r.rx.stats.pipeline.rx_packets as f64;
            if segs > 0.0 {
                v.push(r.rx.stats.lp.busy_cycles as f64 / segs);
            }
            pb.inc(1);
        }
        out.push((w, median(v)));
    }
    pb.finish_and_clear();
    Ok(out)
}
