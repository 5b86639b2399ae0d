//! `weir-serve`: one of the engines ([`super::App`]) on weir's TCP over a DPDK port, one
//! core per queue: the command line, the set-up, the cores, the summary.
//!
//! Each core runs its own pipeline and [`super::glue::Glue`] on its queue pair
//! ([`super::core_loop`], the stack's call order); the port's RSS decides which core a
//! connection lives on, as in weir-sink. The port, the pool, `--impair` (both directions,
//! per core) and the connection bound come from [`crate::net`] as for the examples on
//! the stack's API; GRO and the ACK policy take weir-sink's options ([`StackArgs`]),
//! `--pcap` and `--metrics` weir-sink's capture and endpoint.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, ValueEnum};
use crossbeam_queue::ArrayQueue;
use dpdk::Eal;
use serde_json::{json, Value};
use stack::stats::Stats;
use stack::tcp::TcpConfig;
use stack::time::Duration;

use super::core_loop::{run_core, CoreCtx, CoreResult};
use super::glue::{GlueCounts, ServeApp, Tally};
use super::{discard, echo, http, iperf3, sockperf, tbench, write_dir};
use crate::capture::{Capture, CaptureConfig, CaptureTotals};
use crate::eal_args;
use crate::metrics::Metrics;
use crate::net::{self, LinkStats, Net, NetArgs, OnOff, StackArgs};

/// The application weir-serve runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AppKind {
    /// Every byte read is written back (RFC 862); default port 7007.
    Echo,
    /// The server side of sockperf's message protocol (ping-pong, under-load, throughput
    /// --tcp); default port 11111, sockperf's.
    Sockperf,
    /// The server side of iperf3's test protocol (-c, -R, --bidir, -P N); default port 5201.
    Iperf3,
    /// The server side of dbench's tbench protocol; port 7003, the only one tbench connects
    /// to.
    Tbench,
    /// HTTP/1.1 with keep-alive and pipelining: GET / answers --http-body bytes, other
    /// paths 404; default port 8080.
    Http,
    /// weir-sink's application: consume everything (and digest it with --digest), write
    /// nothing back (each connection to a file with --write-dir); default port 5001,
    /// weir-sink's.
    Sink,
}

impl AppKind {
    /// The protocol's usual port.
    pub fn default_port(self) -> u16 {
        match self {
            AppKind::Echo => 7007,
            AppKind::Sockperf => 11111,
            AppKind::Iperf3 => 5201,
            AppKind::Tbench => tbench::TBENCH_PORT,
            AppKind::Http => 8080,
            AppKind::Sink => 5001,
        }
    }

    /// Whether connections get `TCP_NODELAY` unless `--nodelay` says otherwise: on for the
    /// request/response protocols, whose servers set it (sockperf's and tbench_srv's do;
    /// nginx's `tcp_nodelay` is on), off for the bulk ones (iperf3 sets it only for `-N`).
    pub fn default_nodelay(self) -> bool {
        !matches!(self, AppKind::Iperf3 | AppKind::Sink)
    }

    /// The name `--app` takes.
    pub fn name(self) -> &'static str {
        match self {
            AppKind::Echo => "echo",
            AppKind::Sockperf => "sockperf",
            AppKind::Iperf3 => "iperf3",
            AppKind::Tbench => "tbench",
            AppKind::Http => "http",
            AppKind::Sink => "sink",
        }
    }
}

/// weir-serve's options (after `--` when EAL options are given).
#[derive(Parser, Debug, Clone)]
#[command(
    name = "weir-serve",
    version,
    about = "Serve echo, sockperf, iperf3, tbench, HTTP or a sink on weir's TCP, for the clients people already have.",
    after_help = "Usage forms:\n  weir-serve --app APP [OPTIONS]                      embedded default: a net_tap vdev 'weirtap0', --no-pci, hugepages if configured\n  weir-serve [EAL OPTIONS] -- --app APP [OPTIONS]     DPDK's usual form\n\nscripts/e2e/serve.sh runs every app against the kernel's clients over net_tap."
)]
pub struct ServeArgs {
    /// The application to serve.
    #[arg(long, value_enum, value_name = "APP")]
    pub app: AppKind,
    /// TCP port to accept connections on (default: the protocol's usual, see --app).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// RX/TX queues, one lcore each with its own pipeline (RSS spreads flows when the
    /// device has it). Not for --app iperf3, whose sessions span connections.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: u16,
    /// Addresses, the tap, the pool, --impair and --stats-json.
    #[command(flatten)]
    pub net: NetArgs,
    /// GRO and ACK settings (weir-sink's).
    #[command(flatten)]
    pub stack: StackArgs,
    /// Connections at once; more are refused with a RST (default: as many as the pool
    /// holds with every connection's queues full, see `Net::size_tcp`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub max_conns: Option<u64>,
    /// Receive buffer per connection in bytes (the window's upper bound).
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 10,
          value_parser = clap::value_parser!(u32).range(16_384..=1_073_741_824))]
    pub rcvbuf: u32,
    /// Send buffer per connection in bytes: what an engine's output may queue,
    /// unacknowledged and unsent together.
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 10,
          value_parser = clap::value_parser!(u32).range(4096..=1 << 30))]
    pub snd_buf: u32,
    /// TCP_NODELAY on every connection (default: on for echo, sockperf, tbench and http,
    /// off for iperf3 and sink).
    #[arg(long, value_name = "on|off")]
    pub nodelay: Option<OnOff>,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Body length `GET /` answers (--app http).
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    pub http_body: u64,
    /// Longest request head accepted, request line and fields (--app http; beyond: 431).
    #[arg(long, value_name = "BYTES", default_value_t = 8 * 1024,
          value_parser = clap::value_parser!(u32).range(64..=1 << 20))]
    pub http_max_header: u32,
    /// Largest sockperf message accepted (--app sockperf; sockperf server's -m).
    #[arg(long, value_name = "BYTES", default_value_t = sockperf::DEFAULT_MAX_MESSAGE,
          value_parser = clap::value_parser!(u32).range(14..=1 << 24))]
    pub sockperf_max_message: u32,
    /// Count sockperf's messages, answer none (--app sockperf; sockperf's --dont-reply).
    #[arg(long)]
    pub sockperf_dont_reply: bool,
    /// iperf3 tests running at once (--app iperf3; iperf3's own server runs one).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=64))]
    pub iperf3_max_sessions: u64,
    /// SHA-256 of each connection's bytes, printed when it closes and kept in the JSON
    /// (--app sink).
    #[arg(long)]
    pub digest: bool,
    /// Write each connection's bytes to a file of its own in DIR, named by its 4-tuple and
    /// start time (--app sink; see docs/serve.md).
    #[arg(long, value_name = "DIR")]
    pub write_dir: Option<std::path::PathBuf>,
    /// Read options from a TOML file (keys are the long options, e.g. `app = "http"`,
    /// `http_body = 10485760`); options on the command line override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Log filter: a level (error, warn, info, debug, trace) or RUST_LOG directives (default:
    /// RUST_LOG, else info).
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// Capture what weir receives and transmits to FILE (pcapng, nanosecond timestamps,
    /// direction; weir-sink's --pcap); frames the writer cannot keep up with are left out
    /// and counted.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<std::path::PathBuf>,
    /// Bytes of each frame kept in the capture.
    #[arg(long, value_name = "BYTES", default_value_t = 65_535,
          value_parser = clap::value_parser!(u32).range(64..=262_144))]
    pub pcap_snaplen: u32,
    /// Largest capture in MiB; later frames are left out and counted (pcap_dropped).
    #[arg(long, value_name = "MB", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub pcap_max_mb: u64,
    /// Serve the stats in the Prometheus text format at http://ADDR:PORT/metrics
    /// (weir-sink's --metrics), per core and in total.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// Why `--queues` above 1 is refused for iperf3.
const IPERF3_ONE_QUEUE: &str = "--app iperf3 runs on one queue: a test's control connection and its data streams are separate connections that the port's RSS may put on different queues, and each core's engines see only their own core's connections, so a stream could never find its session";

impl ServeArgs {
    /// Checks what clap cannot.
    pub fn validate(&self) -> Result<()> {
        if let Some(d) = self.duration {
            if !(d.is_finite() && d > 0.0) {
                bail!("--duration {d}: give a positive number of seconds");
            }
        }
        if self.app == AppKind::Iperf3 && self.queues > 1 {
            bail!("--queues {}: {IPERF3_ONE_QUEUE}", self.queues);
        }
        if self.write_dir.is_some() && self.app != AppKind::Sink {
            bail!("--write-dir is an option of --app sink only");
        }
        if self.app == AppKind::Tbench && self.port.is_some_and(|p| p != tbench::TBENCH_PORT) {
            tracing::warn!(
                "--port: tbench connects to port {} only; it will not find this one",
                tbench::TBENCH_PORT
            );
        }
        Ok(())
    }

    /// The port to listen on.
    pub fn port(&self) -> u16 {
        self.port.unwrap_or_else(|| self.app.default_port())
    }

    fn nodelay(&self) -> bool {
        self.nodelay
            .map_or(self.app.default_nodelay(), |s| s == OnOff::On)
    }

    fn settings_json(&self, max_conns: usize) -> Value {
        json!({
            "app": self.app.name(),
            "port": self.port(),
            "queues": self.queues,
            "ip": self.net.ip.to_string(),
            "ip6": self.net.ip6.to_string(),
            "gro": !self.stack.no_gro,
            "gro_flush_ns": self.stack.gro_flush_ns,
            "gro_busy_hold_ns": self.stack.gro_busy_hold_ns,
            "max_flows": self.stack.max_flows,
            "ack_policy": self.stack.policy().to_string(),
            "max_conns": max_conns,
            "rcvbuf": self.rcvbuf,
            "snd_buf": self.snd_buf,
            "nodelay": self.nodelay(),
            "mbufs": self.net.mbufs,
            "impair": self.net.impair.is_some(),
            "http_body": self.http_body,
            "digest": self.digest,
            "pcap": self.pcap.as_ref().map(|p| p.display().to_string()),
            "metrics": self.metrics.map(|a| a.to_string()),
            "write_dir": self.write_dir.as_ref().map(|d| d.display().to_string()),
        })
    }
}

/// Entry point: parses the command line, runs, and maps errors to one line and an exit
/// code (2 for usage errors, 1 for run-time errors).
pub fn main(argv: Vec<String>) -> ExitCode {
    let (args, split) = match eal_args::parse_program::<ServeArgs>("weir-serve", argv) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    if let Err(e) = crate::logs::init(args.log_level.as_deref()) {
        eprintln!("weir-serve: error: {e:#}");
        return ExitCode::from(2);
    }
    if let Err(e) = args.validate() {
        eprintln!("weir-serve: error: {e}");
        return ExitCode::from(2);
    }
    match run(args, split.eal) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir-serve: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Sets up DPDK, the port and one core per queue, serves until stopped, and reports.
pub fn run(args: ServeArgs, eal: Option<Vec<String>>) -> Result<()> {
    match args.app {
        AppKind::Echo => serve::<echo::Echo>(&args, eal, |_| ()),
        AppKind::Sockperf => serve::<sockperf::Sockperf>(&args, eal, |_| sockperf::Config {
            max_message: args.sockperf_max_message,
            dont_reply: args.sockperf_dont_reply,
        }),
        // One core only (`validate`): the server is made once.
        AppKind::Iperf3 => serve::<iperf3::Iperf3>(&args, eal, |_| {
            iperf3::Server::new(iperf3::Config {
                max_sessions: args.iperf3_max_sessions as usize,
                ..iperf3::Config::default()
            })
        }),
        AppKind::Tbench => serve::<tbench::Tbench>(&args, eal, |_| ()),
        AppKind::Http => serve::<http::Http>(&args, eal, |_| http::Config {
            body_len: args.http_body,
            max_header: args.http_max_header as usize,
        }),
        AppKind::Sink => {
            // One writer (thread, free list, file slots) per core: the cores share nothing.
            let mut writers = (0..args.queues.max(1))
                .map(|_| {
                    args.write_dir
                        .as_deref()
                        .map(write_dir::WriteDir::start)
                        .transpose()
                })
                .collect::<Result<Vec<_>>>()?;
            serve::<discard::Discard>(&args, eal, |q| discard::Config {
                digest: args.digest,
                write_dir: writers.get_mut(usize::from(q)).and_then(Option::take),
            })
        }
    }
}

/// Serves engine `A` on every queue, `server(queue)` giving each core's shared state.
fn serve<A>(
    args: &ServeArgs,
    eal: Option<Vec<String>>,
    mut server: impl FnMut(u16) -> A::Server,
) -> Result<()>
where
    A: ServeApp + 'static,
    A::Server: Send + 'static,
{
    let stop = net::stop_on_signal()?;
    let net = Net::open_queues("weir-serve", eal, &args.net, args.queues)?;
    let queues = net.queues();
    let port = args.port();
    let mut tcp = TcpConfig {
        rcv_buf: args.rcvbuf,
        // A connection may hold out of order all it advertised (the window is the bound);
        // the core's total is bounded by its share of the pool (`size_tcp`).
        ooo_conn_bytes: args.rcvbuf,
        snd_buf: args.snd_buf,
        seed: net::random_seed(),
        ..TcpConfig::default()
    };
    let fit = net.size_tcp(&mut tcp, args.max_conns.map(|n| n as usize))?;
    let max_conns = tcp.max_conns;
    let mut cfg = net.pipeline_config(tcp, &[port]);
    cfg.gro = args.stack.gro();
    cfg.listen = vec![(port, args.stack.policy())];
    let eal = net.eal();
    let capture = match &args.pcap {
        Some(path) => Some(Capture::start(
            &eal,
            &CaptureConfig {
                path: path.clone(),
                snaplen: args.pcap_snaplen,
                max_bytes: args.pcap_max_mb.saturating_mul(1 << 20),
                program: "weir-serve",
            },
            net.port_id(),
            usize::from(queues),
        )?),
        None => None,
    };
    let metrics = match args.metrics {
        Some(addr) => {
            let m = Metrics::start(
                addr,
                usize::from(queues),
                crate::metrics::Info {
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    dpdk: Eal::version(),
                },
                capture.as_ref().map(|c| c.observer()),
            )?;
            println!("weir-serve: metrics at http://{}/metrics", m.addr());
            Some(Arc::new(m))
        }
        None => None,
    };
    let snapshots = metrics.as_ref().map(|_| Arc::new(ArrayQueue::new(64)));
    let links = (0..queues)
        .map(|q| net.link_on(q))
        .collect::<Result<Vec<_>>>()?;
    let started = links.first().ok_or_else(|| anyhow!("no queue"))?.now();
    let deadline = args
        .duration
        .map(|s| started + Duration::from_nanos((s * 1e9) as u64));
    let mut ctxs = Vec::with_capacity(links.len());
    for (q, mut link) in (0..queues).zip(links) {
        if let Some(cap) = &capture {
            link.set_capture(cap.for_core(usize::from(q), q));
        }
        ctxs.push(CoreCtx::<A> {
            queue: q,
            link,
            cfg: cfg.clone(),
            server: server(q),
            max_conns,
            nodelay: args.nodelay(),
            stop: stop.clone(),
            deadline,
            snapshots: snapshots.clone(),
        });
    }
    let mac = net.mac.map(|b| format!("{b:02x}")).join(":");
    println!(
        "weir-serve: {} on {}:{port} and [{}]:{port} (mac {mac}), {queues} queue(s), {max_conns} connections at most per core ({fit} fit the pool at full queues)",
        args.app.name(),
        net.ip,
        net.ip6
    );
    let publisher = match (&metrics, &snapshots) {
        (Some(m), Some(q)) => Some(Publisher::spawn(m.clone(), q.clone())?),
        _ => None,
    };

    let results = Arc::new(Mutex::new(Vec::new()));
    let mut ctxs = ctxs.into_iter();
    let main_ctx = ctxs.next().ok_or_else(|| anyhow!("no queue to run"))?;
    let mut launched = Vec::new();
    for (ctx, lcore) in ctxs.zip(eal.worker_lcores()) {
        let results = results.clone();
        let stop = stop.clone();
        let q = ctx.queue;
        launched.push(eal.remote_launch(lcore, move || {
            let r = run_core(ctx);
            let code = i32::from(r.is_err());
            // A core that failed stops the others (its error is reported at the end).
            if r.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            if let Ok(mut v) = results.lock() {
                v.push((q, r));
            }
            code
        })?);
    }
    let main_result = run_core(main_ctx);
    stop.store(true, Ordering::Relaxed);
    for l in launched {
        l.join().context("joining a core")?;
    }
    if let Some(p) = publisher {
        p.stop();
    }
    let mut per_core = vec![(0u16, main_result)];
    if let Ok(mut v) = results.lock() {
        per_core.extend(v.drain(..));
    }
    per_core.sort_by_key(|(q, _)| *q);
    let cores = per_core
        .into_iter()
        .map(|(q, r)| r.with_context(|| format!("queue {q}")))
        .collect::<Result<Vec<CoreResult>>>()?;
    let m = Merged::of(&cores);
    if let Some(metrics) = &metrics {
        for c in &cores {
            metrics.publish(c.queue, &c.stats);
        }
    }
    let pcap = match capture {
        Some(cap) => Some(cap.finish()?),
        None => None,
    };
    let in_use = net.close_port()?;
    print_summary(args.app, &m, &cores, in_use);
    if let (Some(t), Some(path)) = (pcap, &args.pcap) {
        println!(
            "  capture: {} frames ({} bytes) written to {}, {} left out (pcap_dropped)",
            t.written,
            t.bytes,
            path.display(),
            t.dropped
        );
    }
    if let Some(path) = &args.net.stats_json {
        let extra = json!({
            "app": args.app.name(),
            "serve": glue_json(&m.counts),
            "app_counters": m.tally.counters,
            "sessions": m.tally.reports,
            "digests": m.tally.digests.iter().map(|d| json!({
                "flow": d.flow, "local_port": d.local_port, "bytes": d.bytes,
                "sha256": d.sha256, "end": d.end,
            })).collect::<Vec<_>>(),
            "queues": queues,
            "per_core": cores.iter().map(core_json).collect::<Vec<_>>(),
            "files": m.tally.files.iter().map(write_dir::FileRecord::json).collect::<Vec<_>>(),
            "settings": args.settings_json(max_conns),
            "duration_s": m.seconds,
        });
        let mut v = net::report_json(&m.stats, &m.link, in_use, extra);
        if let (Some(t), Value::Object(o)) = (pcap, &mut v) {
            pcap_json(&t, o);
        }
        net::write_json(path, &v)?;
    }
    Ok(())
}

/// The cores' results added up.
struct Merged {
    stats: Stats,
    link: LinkStats,
    counts: GlueCounts,
    tally: Tally,
    /// From the first core's start to the last one's end.
    seconds: f64,
}

impl Merged {
    fn of(cores: &[CoreResult]) -> Merged {
        let mut m = Merged {
            stats: Stats::default(),
            link: LinkStats::default(),
            counts: GlueCounts::default(),
            tally: Tally::default(),
            seconds: 0.0,
        };
        for c in cores {
            m.stats.merge(&c.stats);
            m.link.merge(&c.link);
            m.counts.merge(&c.counts);
            m.tally.merge(c.tally.clone());
        }
        let start = cores.iter().map(|c| c.span.0).min();
        let end = cores.iter().map(|c| c.span.1).max();
        if let (Some(a), Some(b)) = (start, end) {
            m.seconds = b.saturating_since(a).as_nanos() as f64 / 1e9;
        }
        m
    }
}

/// One core's entry in `per_core`: its queue, the stack's counters as the totals have
/// them, the glue's and the engines' counters.
fn core_json(c: &CoreResult) -> Value {
    let mut v = crate::report::stats_json(&c.stats);
    if let Value::Object(o) = &mut v {
        o.insert("queue".into(), json!(c.queue));
        o.insert("serve".into(), glue_json(&c.counts));
        o.insert("app_counters".into(), json!(c.tally.counters));
    }
    v
}

/// The capture's totals as weir-sink's JSON has them (`pcap_written`, `pcap_rx_seen`, ...).
fn pcap_json(t: &CaptureTotals, o: &mut serde_json::Map<String, Value>) {
    for (k, n) in t.json_fields() {
        o.insert(k.into(), json!(n));
    }
}

/// Hands the cores' stats snapshots to the metrics endpoint (a core never takes its lock).
struct Publisher {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Publisher {
    fn spawn(metrics: Arc<Metrics>, snapshots: Arc<ArrayQueue<(u16, Stats)>>) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("weir-publish".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    while let Some((q, st)) = snapshots.pop() {
                        metrics.publish(q, &st);
                    }
                }
            })
            .context("starting the metrics publisher thread")?;
        Ok(Publisher { stop, thread })
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

fn glue_json(c: &GlueCounts) -> Value {
    json!({
        "connections": c.opened,
        "closed": c.closed,
        "reset": c.reset,
        "open_at_stop": c.open_at_stop,
        "bytes_in": c.bytes_in,
        "bytes_out": c.bytes_out,
        "app_errors": c.app_errors,
        "short_writes": c.short_writes,
        "wakes": c.wakes,
        "options_applied": c.options_applied,
    })
}

fn print_summary(app: AppKind, m: &Merged, cores: &[CoreResult], in_use: u64) {
    let c = &m.counts;
    println!(
        "weir-serve {} over {:.1}s: {} connections ({} closed, {} reset, {} open at the stop), {} bytes in, {} bytes out, {} app errors, {} writes waited for Writable, {} retransmitted segments, {} mbufs in use at exit",
        app.name(),
        m.seconds,
        c.opened,
        c.closed,
        c.reset,
        c.open_at_stop,
        c.bytes_in,
        c.bytes_out,
        c.app_errors,
        c.short_writes,
        m.stats.tcp.retransmits,
        in_use
    );
    if cores.len() > 1 {
        for core in cores {
            let k = &core.counts;
            println!(
                "  core {}: {} connections, {} bytes in, {} bytes out, {} frames received, {} sent",
                core.queue,
                k.opened,
                k.bytes_in,
                k.bytes_out,
                core.stats.pipeline.rx_packets,
                core.link.tx_packets
            );
        }
    }
    let t = &m.tally;
    if !t.counters.is_empty() {
        let list: Vec<String> = t.counters.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("  {}: {}", app.name(), list.join(", "));
    }
    for r in &t.reports {
        println!("  session {r}");
    }
    write_dir::print_files(&t.files);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> ServeArgs {
        ServeArgs::try_parse_from(v).unwrap()
    }

    #[test]
    fn iperf3_refuses_more_than_one_queue_and_says_why() {
        let e = parse(&["weir-serve", "--app", "iperf3", "--queues", "2"])
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("--queues 2"), "{e}");
        assert!(e.contains("control connection and its data streams"), "{e}");
        parse(&["weir-serve", "--app", "iperf3"])
            .validate()
            .unwrap();
        for app in ["echo", "sockperf", "tbench", "http", "sink"] {
            parse(&["weir-serve", "--app", app, "--queues", "2"])
                .validate()
                .unwrap();
        }
    }

    #[test]
    fn a_config_file_gives_the_per_core_options_and_the_command_line_overrides_it() {
        let path = std::env::temp_dir().join(format!("weir-serve-cfg-{}.toml", std::process::id()));
        std::fs::write(
            &path,
            "app = \"http\"\nqueues = 2\nmetrics = \"198.18.2.2:9108\"\npcap = \"/tmp/w.pcapng\"\nimpair = \"loss=1%,seed=3\"\nstats_json = \"/tmp/w.json\"\nack_policy = \"every:2\"\n",
        )
        .unwrap();
        let argv = [
            "weir-serve",
            "--config",
            path.to_str().unwrap(),
            "--queues",
            "3",
        ];
        let (a, split) = eal_args::parse_program::<ServeArgs>(
            "weir-serve",
            argv.iter().map(|s| s.to_string()).collect(),
        )
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(split.eal.is_none());
        assert_eq!(a.app, AppKind::Http);
        assert_eq!(a.queues, 3, "the command line wins");
        assert_eq!(a.metrics, Some("198.18.2.2:9108".parse().unwrap()));
        assert_eq!(
            a.pcap.as_deref(),
            Some(std::path::Path::new("/tmp/w.pcapng"))
        );
        assert!(a.net.impair.is_some_and(|(_, seed)| seed == Some(3)));
        assert_eq!(
            a.net.stats_json.as_deref(),
            Some(std::path::Path::new("/tmp/w.json"))
        );
        assert_eq!(a.stack.policy().to_string(), "every:2");
    }
}
