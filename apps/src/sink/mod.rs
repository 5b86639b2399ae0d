//! `weir-sink`: receive TCP on a DPDK port with weir's pipeline, one lcore per queue.
//!
//! The application side is a sink: it accepts every connection on the listening ports,
//! consumes every byte as soon as it is in order (optionally hashing it), and closes when
//! the peer closes. Stats cross from the lcores to the printer thread as snapshots through
//! `crossbeam-queue`; nothing on the data path waits for anything.
//!
//! - `args`: the command line ([`SinkArgs`]);
//! - this module: DPDK, port and pipeline set-up, one core per queue, the end;
//! - `core_loop`: the per-core loop; `app`: the sink application it serves;
//! - `printer`: the live line, `--stats-log` and the metrics, once a second;
//! - `summary`: the totals, the summary and `--stats-json`.
//!
//! `weir-sink --drop` receives with one of weir-bench's reference loops
//! ([`crate::bench::loops`]) instead of the pipeline.

mod app;
mod args;
pub(crate) mod core_loop;
mod printer;
mod summary;

use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use crossbeam_queue::ArrayQueue;
use dpdk::{Clock, Eal, Port, PortConfig};
use stack::gro::GroConfig;
use stack::pipeline::PipelineConfig;
use stack::tcp::TcpConfig;
use stack::wire::LocalAddrs;

pub(crate) use self::app::hex;
pub use self::args::SinkArgs;
use self::core_loop::{run_core, CoreCtx, CoreResult, Stack};
use self::printer::{Printer, PrinterCfg};
use crate::bench::loops::DropRx;
use crate::eal_args;
pub use crate::net::{OnOff, StackArgs};

/// Entry point: parses the command line, runs, and maps errors to one line and an exit
/// code (2 for usage errors, 1 for run-time errors).
pub fn main(argv: Vec<String>) -> ExitCode {
    let (args, split) = match eal_args::parse_program::<SinkArgs>("weir-sink", argv) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    if let Err(e) = args.validate() {
        eprintln!("weir-sink: error: {e}");
        return ExitCode::from(2);
    }
    if let Err(e) = crate::logs::init(args.log_level.as_deref()) {
        eprintln!("weir-sink: error: {e:#}");
        return ExitCode::from(2);
    }
    match run(args, split.eal) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir-sink: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Sets up DPDK, the port and one pipeline per queue, runs until stopped, and reports.
pub fn run(args: SinkArgs, eal: Option<Vec<String>>) -> Result<()> {
    let eal_argv = eal.unwrap_or_else(|| {
        eal_args::default_eal("weir-sink", &args.tap_iface, usize::from(args.queues))
    });
    let eal = Eal::init(&eal_argv).context("starting DPDK (EAL)")?;
    let workers = eal.worker_lcores();
    let queues = args.queues;
    if workers.len() + 1 < usize::from(queues) {
        bail!(
            "--queues {queues} needs {queues} lcores but the EAL has {}: pass -l 0-{} in the EAL options",
            workers.len() + 1,
            queues - 1
        );
    }
    let port_id = match args.eth_port {
        Some(p) => p,
        None => *eal.ports().first().ok_or_else(|| {
            anyhow!("no Ethernet port was probed: pass a device in the EAL options (--vdev=net_tap0 for a tap, or -a PCI_ADDRESS for a NIC bound to vfio-pci)")
        })?,
    };
    let pool = crate::net::rx_pool(&eal, port_id, "weir_rx", args.mbufs, args.mtu)?;
    let mut port = Port::configure(
        &eal,
        port_id,
        pool,
        &PortConfig {
            rx_queues: queues,
            tx_queues: queues,
            promiscuous: args.promiscuous,
            mtu: args.mtu,
            ..PortConfig::default()
        },
    )
    .with_context(|| format!("configuring port {port_id}"))?;
    port.start()
        .with_context(|| format!("starting port {port_id}"))?;
    if let Some(w) = port.queue_spread_warning() {
        tracing::warn!("{w}");
    }
    let mac = port.mac()?;
    if let Some(w) = port.mtu_warning() {
        tracing::warn!("{w}");
    }
    let mtu = match args.mtu {
        Some(m) => m,
        None => port
            .mtu()
            .with_context(|| format!("reading port {port_id}'s MTU"))?,
    };
    let tx_csum = port.tx_csum_caps().ipv4_tcp();
    let local = LocalAddrs::new(
        mac,
        args.ip.iter().find_map(|a| match a {
            IpAddr::V4(v) => Some(*v),
            _ => None,
        }),
        args.ip.iter().find_map(|a| match a {
            IpAddr::V6(v) => Some(*v),
            _ => None,
        }),
    );
    let policy = args.stack.policy();
    let cfg = PipelineConfig {
        local,
        gro: args.stack.gro(),
        tcp: TcpConfig {
            max_conns: args.max_conns as usize,
            rcv_buf: args.rcvbuf,
            // A connection may hold out of order all it advertised (the window is the
            // bound, as with Linux's rcvbuf); the core's total is bounded by the pool, so
            // out-of-order data can never starve the NIC of mbufs: at most half of them.
            ooo_conn_bytes: args.rcvbuf,
            ooo_core_slices: (args.mbufs / 2) as usize,
            ooo_core_bytes: (args.mbufs / 2) as usize * 2048,
            seed: seed(),
            // The advertised MSS follows the port's MTU (RFC 9293 §3.7.1).
            mtu,
            ..TcpConfig::default()
        },
        listen: args.ports.iter().map(|p| (*p, policy)).collect(),
        tx_csum_offload: tx_csum,
    };
    log_startup(&args, &eal, port_id, &port, mac, tx_csum);
    let capture = match &args.pcap {
        Some(path) => Some(crate::capture::Capture::start(
            &eal,
            &crate::capture::CaptureConfig {
                path: path.clone(),
                snaplen: args.pcap_snaplen,
                max_bytes: args.pcap_max_mb.saturating_mul(1 << 20),
                program: "weir-sink",
            },
            port_id,
            usize::from(queues),
        )?),
        None => None,
    };
    let metrics = match args.metrics {
        Some(addr) => {
            let m = crate::metrics::Metrics::start(
                addr,
                usize::from(queues),
                crate::metrics::Info {
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    dpdk: Eal::version(),
                },
                capture.as_ref().map(|c| c.observer()),
            )?;
            tracing::info!("metrics at http://{}/metrics", m.addr());
            Some(Arc::new(m))
        }
        None => None,
    };

    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .context("installing the SIGINT/SIGTERM handler")?;
    }
    let clock = Clock::new(&eal);
    let deadline_ns = args
        .duration
        .map(|d| clock.now().as_nanos() + (d * 1e9) as u64);
    let snapshots = Arc::new(ArrayQueue::new(64));
    let closed = Arc::new(ArrayQueue::new(4096));
    let mut ctxs = Vec::new();
    for q in 0..queues {
        ctxs.push(CoreCtx {
            queue: q,
            rx: port.rx_queue(q)?,
            tx: port.tx_queue(q)?,
            pool: pool.for_port(port_id),
            clock,
            cfg: cfg.clone(),
            digest: args.digest,
            impair: args.impair,
            stop: stop.clone(),
            deadline_ns,
            snapshots: snapshots.clone(),
            closed: closed.clone(),
            capture: capture.as_ref().map(|cap| cap.for_core(usize::from(q), q)),
            ready: None,
            phase: None,
        });
    }
    let started = std::time::Instant::now();

    // Created before any core starts: a bad path is a set-up error.
    let log = match &args.stats_log {
        Some(path) => Some(
            std::fs::File::create(path)
                .with_context(|| format!("creating --stats-log {}", path.display()))?,
        ),
        None => None,
    };
    let printer = Printer::spawn(PrinterCfg {
        snapshots: snapshots.clone(),
        closed: closed.clone(),
        queues: usize::from(queues),
        quiet: args.quiet,
        log,
        metrics: metrics.clone(),
        started,
    });

    let mut launched = Vec::new();
    let mut ctxs = ctxs.into_iter();
    let main_ctx = ctxs.next().ok_or_else(|| anyhow!("no queue to run"))?;
    let results = Arc::new(std::sync::Mutex::new(Vec::new()));
    let drop_frames = args.drop;
    for (ctx, lcore) in ctxs.zip(workers.iter().copied()) {
        let results = results.clone();
        let q = ctx.queue;
        launched.push(eal.remote_launch(lcore, move || {
            let r = run_queue(ctx, drop_frames);
            let code = i32::from(r.is_err());
            if let Ok(mut v) = results.lock() {
                v.push((q, r));
            }
            code
        })?);
    }
    let main_result = run_queue(main_ctx, drop_frames);
    stop.store(true, Ordering::Relaxed);
    for l in launched {
        let _ = l.join();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut per_core = vec![(0u16, main_result)];
    if let Ok(mut v) = results.lock() {
        per_core.extend(v.drain(..));
    }
    printer.stop();

    let mut merged = summary::merge(per_core)?;
    if let Some(m) = &metrics {
        for (q, s) in merged.per_core.iter().enumerate() {
            m.publish(q as u16, s);
        }
    }
    let pcap = match capture {
        Some(cap) => Some(cap.finish()?),
        None => None,
    };
    // Closing the port returns the mbufs its RX rings held (most drivers), or leaves them
    // allocated and untouched (net_af_xdp's fill ring): those are told apart from what
    // weir still holds.
    port.close().context("closing the port")?;
    // SAFETY: every core has returned (joined above) and the port is closed.
    let in_use = unsafe { pool.split_in_use() };
    merged.total.lp.mbufs_in_use = in_use.used as u64;
    summary::finish(&args, &merged, in_use, elapsed, pcap)
}

/// One queue's core: weir-sink's loop, or with `--drop` the reference loop that receives
/// and frees every frame (no stack at all).
fn run_queue(ctx: CoreCtx, drop_frames: bool) -> Result<CoreResult> {
    if drop_frames {
        run_core(ctx, DropRx::new(false))
    } else {
        run_core(ctx, Stack)
    }
}

/// The one start-up line: versions, port, queues, lcores, offloads, every GRO/ACK setting.
fn log_startup(args: &SinkArgs, eal: &Eal, port_id: u16, port: &Port, mac: [u8; 6], tx_csum: bool) {
    let off = port.offloads();
    let gro = GroConfig::default();
    let mut lcores = vec![0u32];
    lcores.extend(eal.worker_lcores());
    let mac = mac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    // The message repeats "port N mac M" as plain words: scripts (weir-bench tap) read it.
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        dpdk = %Eal::version(),
        port = port_id,
        queues = args.queues,
        lcores = ?lcores,
        ip = %args.ip.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(","),
        tcp_ports = ?args.ports,
        rx_ipv4_cksum = off.rx_ipv4_cksum(),
        rx_tcp_cksum = off.rx_tcp_cksum(),
        tx_csum_offload = tx_csum,
        rss_hf = %format!("{:#x}", off.rss_hf),
        gro = !args.stack.no_gro,
        gro_flush_ns = args.stack.gro_flush_ns,
        gro_max_flows = args.stack.max_flows,
        gro_max_segs = gro.max_segs,
        gro_max_bytes = args.stack.gro_max_bytes,
        mtu = ?args.mtu,
        rx_scatter = off.rx_scatter(),
        ack_policy = %args.stack.policy(),
        quickack_psh_mss = ?args.stack.quickack_psh_mss,
        max_conns = args.max_conns,
        rcvbuf = args.rcvbuf,
        mbufs = args.mbufs,
        pcap = ?args.pcap,
        metrics = ?args.metrics,
        "weir-sink {} starting on port {port_id} mac {mac}, {} queues",
        env!("CARGO_PKG_VERSION"),
        args.queues
    );
}

/// A seed for ISNs and SYN cookies from the OS's randomness (RFC 6528 wants them
/// unpredictable).
fn seed() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    u64::from_le_bytes(b) ^ u64::from(std::process::id())
}
