//! The lab's real-cycles run: weir-gen on the worker lcore and the receiver
//! ([`crate::sink::run_receiver`]) on the main lcore, joined by a DPDK ring pair, as in
//! `weir-bench e2e` but with the GRO flush window as a parameter. One EAL per process.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use dpdk::{Clock, Eal, Mbuf, Mempool, Port, PortConfig};
use stack::ack::AckPolicy;
use stack::driver::{Burst, RxQueue};
use stack::gro::GroConfig;
use stack::pipeline::PipelineConfig;
use stack::tcp::TcpConfig;
use stack::time::Duration;
use stack::wire::LocalAddrs;

use super::{median, progress};
use crate::bench_e2e::launch_generator;
use crate::gen::driver::{GenIo, GenReport};
use crate::gen::{GenConfig, Interleave};
use crate::sink::{run_receiver, ReceiverCore};

const RX_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const GEN_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 5001;

/// Median receiver cycles per segment (busy-iteration TSC cycles / frames received) at
/// each GRO flush window in `windows` (ns), `flows` flows interleaved per segment.
pub fn cycles_per_segment(
    windows: &[u64],
    flows: u32,
    secs: f64,
    rounds: usize,
) -> Result<Vec<(u64, f64)>> {
    let args = vec![
        "weir-lab".to_string(),
        "--no-pci".into(),
        "--no-huge".into(),
        "-m".into(),
        "2048".into(),
        format!("--file-prefix=weir-lab-{}", std::process::id()),
        "-l".into(),
        "0-1".into(),
        "--log-level=*:warning".into(),
    ];
    let eal = Eal::init(&args).context("starting DPDK (EAL)")?;
    let worker = *eal
        .worker_lcores()
        .first()
        .ok_or_else(|| anyhow!("the EAL has no worker lcore (needs -l 0-1: two cores)"))?;
    let (a, b) = dpdk::ring_port_pair(&eal, "lab", 1024).context("creating the ring pair")?;
    let gen_pool = Mempool::new(&eal, "lab_gen", 16_383, 256, dpdk::DEFAULT_DATA_ROOM)?;
    let rx_pool = Mempool::new(&eal, "lab_rx", 16_383, 256, dpdk::DEFAULT_DATA_ROOM)?;
    let mut gen_port = Port::configure(&eal, a, gen_pool, &PortConfig::default())?;
    let mut rx_port = Port::configure(&eal, b, rx_pool, &PortConfig::default())?;
    gen_port.start()?;
    rx_port.start()?;
    let clock = Clock::new(&eal);
    let (gen_mac, rx_mac) = (gen_port.mac()?, rx_port.mac()?);
    let pb = progress((windows.len() * rounds.max(1)) as u64, "flush sweep (ring)");
    let mut out = Vec::new();
    for &w in windows {
        let mut v = Vec::new();
        for _ in 0..rounds.max(1) {
            let cfg = GenConfig {
                flows,
                src_mac: gen_mac,
                dst_mac: Some(rx_mac),
                src_ip: GEN_IP,
                dst_ip: RX_IP,
                dst_port: PORT,
                duration: Some(Duration::from_nanos((secs * 1e9) as u64)),
                bytes_per_flow: None,
                interleave: Interleave::Segment,
                max_half_open: 128,
                ..GenConfig::default()
            };
            cfg.validate().map_err(|e| anyhow!(e))?;
            let stop = Arc::new(AtomicBool::new(false));
            let report: Arc<Mutex<Option<GenReport>>> = Arc::new(Mutex::new(None));
            let io = GenIo {
                rx: gen_port.rx_queue(0)?,
                tx: gen_port.tx_queue(0)?,
                pool: gen_pool.for_port(gen_port.id()),
                clock,
            };
            let launched = launch_generator(&eal, worker, io, cfg, secs, &stop, &report)?;
            let rx = run_receiver(ReceiverCore {
                rx: rx_port.rx_queue(0)?,
                tx: rx_port.tx_queue(0)?,
                pool: rx_pool.for_port(rx_port.id()),
                clock,
                cfg: PipelineConfig {
                    local: LocalAddrs::new(rx_mac, Some(RX_IP), None),
                    gro: Some(GroConfig {
                        flush_ns: Duration::from_nanos(w),
                        max_flows: 4096,
                        ..GroConfig::default()
                    }),
                    tcp: TcpConfig {
                        max_conns: (flows as usize * 2).max(1024),
                        rcv_buf: 4 << 20,
                        ..TcpConfig::default()
                    },
                    listen: vec![(PORT, AckPolicy::default())],
                    tx_csum_offload: false,
                },
                digest: false,
                drop_only: false,
                stop: stop.clone(),
            });
            stop.store(true, Ordering::Relaxed);
            let code = launched.join();
            let rx = rx?;
            if !matches!(code, Ok(0)) {
                bail!("the generator's lcore failed ({code:?})");
            }
            // Free what the case left in either ring.
            let mut b: Burst<Mbuf> = Burst::new();
            for port in [&gen_port, &rx_port] {
                let mut q = port.rx_queue(0)?;
                let mut empty = 0;
                while empty < 3 {
                    if q.rx_burst(&mut b) == 0 {
                        empty += 1;
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    b.clear();
                }
            }
            let segs = rx.stats.pipeline.rx_packets as f64;
            if segs > 0.0 {
                v.push(rx.stats.lp.busy_cycles as f64 / segs);
            }
            pb.inc(1);
        }
        out.push((w, median(v)));
    }
    pb.finish_and_clear();
    Ok(out)
}
