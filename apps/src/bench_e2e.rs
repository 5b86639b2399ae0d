//! `weir-bench e2e`: weir-gen and weir-sink in one process on two lcores, joined by a
//! ring port pair (`rte_eth_from_rings`), no kernel and no NIC in between.
//!
//! The main lcore receives (weir-sink's per-core loop, [`crate::sink::run_receiver`]); the
//! worker lcore runs the generator ([`crate::gen`]). Three modes side by side in every
//! round, at each flow count:
//!
//! - `drop`: the receiver only receives and frees. It answers nothing, so the generator
//!   runs open loop (`--blast`: no handshake, no windows) with the same segment pattern;
//! - `stack`: the full pipeline (GRO with weir-sink's default 20 µs flush, Linux ACK
//!   policy) against closed-loop senders (handshake, slow start, FIN);
//! - `stack --no-gro`: the same without coalescing.
//!
//! Receiver cycles per segment are the TSC cycles of the loop iterations that received or
//! sent anything, divided by the frames received (weir-sink's `busy_cycles`): what the
//! receiving core spends per segment, idle polling excluded. Rates are over the
//! generator's data phase (first to last data segment). The target (issue 6): at 64
//! flows, `stack` costs at most twice the cycles per segment of `drop`.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use dpdk::{Clock, Eal, Mbuf, Mempool, Port, PortConfig};
use serde_json::json;
use stack::ack::AckPolicy;
use stack::driver::{Burst, RxQueue};
use stack::gro::GroConfig;
use stack::pipeline::PipelineConfig;
use stack::stats::Stats;
use stack::tcp::TcpConfig;
use stack::time::Duration;
use stack::wire::LocalAddrs;

use crate::gen::driver::{self, GenIo, GenReport, RunOpts};
use crate::gen::{GenConfig, Interleave, Sender};
use crate::sink::{run_receiver, ReceiverCore};

const RX_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const GEN_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 5001;
/// Ring slots per direction: the depth of a typical NIC descriptor ring.
const RING_SIZE: u32 = 1024;
/// weir-sink's defaults (`--gro-flush-ns`, `--max-flows`, `--rcvbuf`).
const FLUSH_NS: u64 = 20_000;
const GRO_FLOWS: usize = 4096;
const RCVBUF: u32 = 4 << 20;

/// What the receiving lcore does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Drop,
    Stack,
    NoGro,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Drop, Mode::Stack, Mode::NoGro];
    fn name(self) -> &'static str {
        match self {
            Mode::Drop => "drop",
            Mode::Stack => "stack",
            Mode::NoGro => "stack --no-gro",
        }
    }
}

/// One case's figures.
#[derive(Clone, Debug)]
struct Sample {
    seg_per_s: f64,
    gbit_s: f64,
    cycles_per_seg: f64,
    seg_per_unit: f64,
    seg_per_ack: f64,
    busy_fraction: f64,
    retransmits: u64,
    clean: bool,
}

struct Rig {
    eal: Eal,
    worker: u32,
    gen_port: Port,
    rx_port: Port,
    gen_pool: Mempool,
    rx_pool: Mempool,
    gen_mac: [u8; 6],
    rx_mac: [u8; 6],
    clock: Clock,
}

impl Rig {
    fn new() -> Result<Rig> {
        let args = vec![
            "weir-bench".to_string(),
            "--no-pci".into(),
            "--no-huge".into(),
            "-m".into(),
            "2048".into(),
            format!("--file-prefix=weir-bench-e2e-{}", std::process::id()),
            "-l".into(),
            "0-1".into(),
            "--log-level=*:warning".into(),
        ];
        let eal = Eal::init(&args).context("starting DPDK (EAL)")?;
        let worker = *eal
            .worker_lcores()
            .first()
            .ok_or_else(|| anyhow!("the EAL has no worker lcore (needs -l 0-1: two cores)"))?;
        let (a, b) =
            dpdk::ring_port_pair(&eal, "e2e", RING_SIZE).context("creating the ring pair")?;
        let gen_pool = Mempool::new(&eal, "e2e_gen", 16_383, 256, dpdk::DEFAULT_DATA_ROOM)
            .context("creating the generator's mbuf pool")?;
        let rx_pool = Mempool::new(&eal, "e2e_rx", 16_383, 256, dpdk::DEFAULT_DATA_ROOM)
            .context("creating the receiver's mbuf pool")?;
        let mut gen_port = Port::configure(&eal, a, gen_pool, &PortConfig::default())?;
        let mut rx_port = Port::configure(&eal, b, rx_pool, &PortConfig::default())?;
        gen_port.start()?;
        rx_port.start()?;
        Ok(Rig {
            worker,
            gen_mac: gen_port.mac()?,
            rx_mac: rx_port.mac()?,
            gen_port,
            rx_port,
            gen_pool,
            rx_pool,
            clock: Clock::new(&eal),
            eal,
        })
    }

    /// Frees whatever a case left in either ring.
    fn drain(&self) -> Result<()> {
        let mut b: Burst<Mbuf> = Burst::new();
        for port in [&self.gen_port, &self.rx_port] {
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
        Ok(())
    }

    fn pipeline_config(&self, mode: Mode, flows: u32) -> PipelineConfig {
        PipelineConfig {
            local: LocalAddrs::new(self.rx_mac, Some(RX_IP), None),
            gro: (mode == Mode::Stack).then(|| GroConfig {
                flush_ns: Duration::from_nanos(FLUSH_NS),
                max_flows: GRO_FLOWS,
                ..GroConfig::default()
            }),
            tcp: TcpConfig {
                max_conns: (flows as usize * 2).max(1024),
                rcv_buf: RCVBUF,
                seed: 0x6532_6500 ^ u64::from(flows),
                ..TcpConfig::default()
            },
            listen: vec![(PORT, AckPolicy::default())],
            tx_csum_offload: false,
        }
    }

    fn gen_config(&self, mode: Mode, flows: u32, secs: f64) -> GenConfig {
        GenConfig {
            flows,
            src_mac: self.gen_mac,
            dst_mac: Some(self.rx_mac),
            src_ip: GEN_IP,
            dst_ip: RX_IP,
            dst_port: PORT,
            duration: Some(Duration::from_nanos((secs * 1e9) as u64)),
            bytes_per_flow: None,
            interleave: Interleave::Segment,
            blast: mode == Mode::Drop,
            // Below the receiver's half-open table (256): no SYN cookies in the way.
            max_half_open: 128,
            seed: 0x5eed ^ u64::from(flows),
            ..GenConfig::default()
        }
    }

    /// Runs one case: the generator on the worker lcore, the receiver here.
    fn case(&self, mode: Mode, flows: u32, secs: f64) -> Result<Sample> {
        let cfg = self.gen_config(mode, flows, secs);
        cfg.validate().map_err(|e| anyhow!(e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let report: Arc<Mutex<Option<GenReport>>> = Arc::new(Mutex::new(None));
        let io = GenIo {
            rx: self.gen_port.rx_queue(0)?,
            tx: self.gen_port.tx_queue(0)?,
            pool: self.gen_pool.for_port(self.gen_port.id()),
            clock: self.clock,
        };
        let launched = launch_generator(&self.eal, self.worker, io, cfg, secs, &stop, &report)?;
        let rx = run_receiver(ReceiverCore {
            rx: self.rx_port.rx_queue(0)?,
            tx: self.rx_port.tx_queue(0)?,
            pool: self.rx_pool.for_port(self.rx_port.id()),
            clock: self.clock,
            cfg: self.pipeline_config(mode, flows),
            digest: false,
            drop_only: mode == Mode::Drop,
            stop: stop.clone(),
        });
        stop.store(true, Ordering::Relaxed);
        let code = launched.join();
        let rx = rx?;
        match code {
            Ok(0) => {}
            other => bail!("the generator's lcore failed ({other:?})"),
        }
        let g = report
            .lock()
            .map_err(|_| anyhow!("generator report lock poisoned"))?
            .take()
            .ok_or_else(|| anyhow!("the generator reported nothing"))?;
        self.drain()?;
        Ok(sample(mode, flows, &g, &rx.stats))
    }
}

/// Starts weir-gen's `Sender` on worker lcore `worker` for about `secs` seconds (plus the
/// close), storing its report in `report` and setting `stop` when it is done (the receiver
/// on the main lcore stops then). Shared by `weir-bench e2e` and the lab's ring runs.
pub(crate) fn launch_generator(
    eal: &Eal,
    worker: u32,
    mut io: GenIo,
    cfg: GenConfig,
    secs: f64,
    stop: &Arc<AtomicBool>,
    report: &Arc<Mutex<Option<GenReport>>>,
) -> Result<dpdk::Launched> {
    let stop = stop.clone();
    let report = report.clone();
    Ok(eal.remote_launch(worker, move || {
        let mut sender = Sender::new(cfg);
        let never = AtomicBool::new(false);
        let r = driver::run(
            &mut sender,
            &mut io,
            RunOpts {
                stop: &never,
                close_grace: Duration::from_secs(10),
                max_runtime: Duration::from_nanos((secs * 1e9) as u64) + Duration::from_secs(30),
                tick: None,
            },
        );
        drop(io);
        if let Ok(mut slot) = report.lock() {
            *slot = Some(r);
        }
        stop.store(true, Ordering::Relaxed);
        0
    })?)
}

fn sample(mode: Mode, flows: u32, g: &GenReport, s: &Stats) -> Sample {
    let secs = (g.data_ns as f64 / 1e9).max(1e-9);
    let segs = s.pipeline.rx_packets as f64;
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let clean = match mode {
        Mode::Drop => true,
        _ => g.finished && g.stats.closed == u64::from(flows),
    };
    Sample {
        seg_per_s: segs / secs,
        gbit_s: (g.stats.bytes as f64) * 8.0 / secs / 1e9,
        cycles_per_seg: ratio(s.lp.busy_cycles as f64, segs),
        seg_per_unit: s.segments_per_unit(),
        seg_per_ack: s.segments_per_ack(),
        busy_fraction: ratio(s.lp.busy_iterations as f64, s.lp.iterations as f64),
        retransmits: g.stats.retransmits,
        clean,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Runs `runs` rounds of every mode at every flow count in `flows`, `secs` seconds of
/// data each, and prints the medians (a table, or one JSON object per row with `json`)
/// and the 64-flow target check.
pub fn run(json_out: bool, secs: f64, runs: usize, flows: &[u32]) -> Result<()> {
    if !(secs.is_finite() && secs > 0.0) {
        bail!("--seconds {secs}: give a positive number");
    }
    let rig = Rig::new()?;
    let runs = runs.max(1);
    let mut results: Vec<(Mode, u32, Vec<Sample>)> = Vec::new();
    for &f in flows {
        for m in Mode::ALL {
            results.push((m, f, Vec::new()));
        }
    }
    for r in 0..runs {
        for (mode, f, v) in results.iter_mut() {
            if !json_out {
                eprintln!(
                    "weir-bench e2e: round {}/{runs}: {} flows, {}",
                    r + 1,
                    f,
                    mode.name()
                );
            }
            let s = rig
                .case(*mode, *f, secs)
                .with_context(|| format!("{} flows, {}", f, mode.name()))?;
            v.push(s);
        }
    }
    let m = |v: &[Sample], f: fn(&Sample) -> f64| median(v.iter().map(f).collect());
    if !json_out {
        println!("weir-bench e2e: medians of {runs} rounds of {secs} s, weir-gen -> ring pair -> receiver on lcore 0");
        println!(
            "{:>6} {:<15} {:>12} {:>9} {:>11} {:>9} {:>8} {:>6} {:>5}",
            "flows",
            "mode",
            "seg/s",
            "Gbit/s",
            "cycles/seg",
            "seg/unit",
            "seg/ACK",
            "busy",
            "clean"
        );
    }
    for (mode, f, v) in &results {
        let clean = v.iter().all(|s| s.clean);
        let retx: u64 = v.iter().map(|s| s.retransmits).sum();
        if json_out {
            println!(
                "{}",
                json!({"flows": f, "mode": mode.name(),
                       "segments_per_s": m(v, |s| s.seg_per_s),
                       "payload_gbit_s": m(v, |s| s.gbit_s),
                       "receiver_cycles_per_segment": m(v, |s| s.cycles_per_seg),
                       "gro_segments_per_unit": m(v, |s| s.seg_per_unit),
                       "segments_per_ack": m(v, |s| s.seg_per_ack),
                       "receiver_busy_fraction": m(v, |s| s.busy_fraction),
                       "retransmits": retx, "clean_close": clean, "runs": v.len()})
            );
        } else {
            let dash = |x: f64| {
                if x > 0.0 {
                    format!("{x:.1}")
                } else {
                    "-".into()
                }
            };
            println!(
                "{:>6} {:<15} {:>12.0} {:>9.3} {:>11.1} {:>9} {:>8} {:>5.0}% {:>5}",
                f,
                mode.name(),
                m(v, |s| s.seg_per_s),
                m(v, |s| s.gbit_s),
                m(v, |s| s.cycles_per_seg),
                dash(m(v, |s| s.seg_per_unit)),
                dash(m(v, |s| s.seg_per_ack)),
                m(v, |s| s.busy_fraction) * 100.0,
                if clean { "yes" } else { "NO" },
            );
        }
    }
    let cps = |mode: Mode| {
        results
            .iter()
            .find(|(m2, f, _)| *m2 == mode && *f == 64)
            .map(|(_, _, v)| m(v, |s| s.cycles_per_seg))
    };
    if let (Some(stack), Some(drop)) = (cps(Mode::Stack), cps(Mode::Drop)) {
        let ratio = if drop > 0.0 {
            stack / drop
        } else {
            f64::INFINITY
        };
        let met = ratio <= 2.0;
        if json_out {
            println!(
                "{}",
                json!({"target": "64 flows: stack cycles/segment <= 2x drop",
                       "stack_cycles_per_segment": stack, "drop_cycles_per_segment": drop,
                       "ratio": ratio, "met": met})
            );
        } else {
            println!(
                "target (64 flows): stack {stack:.1} cycles/segment vs drop {drop:.1} = {ratio:.2}x (<= 2x): {}",
                if met { "met" } else { "NOT met" }
            );
        }
    }
    Ok(())
}
