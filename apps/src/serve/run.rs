//! `weir-serve`: one of the engines ([`super::App`]) on weir's TCP over a DPDK port, one
//! core: the command line, the set-up, the loop and the summary.
//!
//! The loop is the stack's call order (stack/src/tcp/mod.rs), with the engines driven by
//! [`Glue`] where the application's calls go:
//!
//! ```text
//! now = link.now(); link.rx_burst(now, &mut rx);
//! p.handle_rx_burst(now, &mut rx);   glue.serve(): events, recv -> engine -> send, close
//! p.handle_timeout(now);             glue.serve() again (timers raise events too)
//! p.poll_tx(now, pool, &mut tx);     link.tx_burst(now, &mut tx)
//! ```
//!
//! The port, the pool, `--impair` (both directions) and the connection bound come from
//! [`crate::net`] as for the examples on the stack's API; GRO and the ACK policy take
//! weir-sink's options ([`StackArgs`]).

use std::process::ExitCode;
use std::sync::atomic::Ordering;

use anyhow::{anyhow, bail, Result};
use clap::{Parser, ValueEnum};
use dpdk::Mbuf;
use serde_json::{json, Value};
use stack::driver::Burst;
use stack::pipeline::Pipeline;
use stack::tcp::TcpConfig;
use stack::time::{Duration, Instant};

use super::glue::{Glue, GlueCounts, ServeApp, Tally};
use super::{discard, echo, http, iperf3, sockperf, tbench, write_dir};
use crate::eal_args;
use crate::net::{self, Net, NetArgs, OnOff, StackArgs};

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
}

impl ServeArgs {
    /// Checks what clap cannot.
    pub fn validate(&self) -> Result<()> {
        if let Some(d) = self.duration {
            if !(d.is_finite() && d > 0.0) {
                bail!("--duration {d}: give a positive number of seconds");
            }
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

/// Sets up DPDK, the port and the pipeline, serves until stopped, and reports.
pub fn run(args: ServeArgs, eal: Option<Vec<String>>) -> Result<()> {
    match args.app {
        AppKind::Echo => serve::<echo::Echo>(&args, eal, ()),
        AppKind::Sockperf => serve::<sockperf::Sockperf>(
            &args,
            eal,
            sockperf::Config {
                max_message: args.sockperf_max_message,
                dont_reply: args.sockperf_dont_reply,
            },
        ),
        AppKind::Iperf3 => serve::<iperf3::Iperf3>(
            &args,
            eal,
            iperf3::Server::new(iperf3::Config {
                max_sessions: args.iperf3_max_sessions as usize,
                ..iperf3::Config::default()
            }),
        ),
        AppKind::Tbench => serve::<tbench::Tbench>(&args, eal, ()),
        AppKind::Http => serve::<http::Http>(
            &args,
            eal,
            http::Config {
                body_len: args.http_body,
                max_header: args.http_max_header as usize,
            },
        ),
        AppKind::Sink => serve::<discard::Discard>(
            &args,
            eal,
            discard::Config {
                digest: args.digest,
                write_dir: args
                    .write_dir
                    .as_deref()
                    .map(write_dir::WriteDir::start)
                    .transpose()?,
            },
        ),
    }
}

fn serve<A: ServeApp>(args: &ServeArgs, eal: Option<Vec<String>>, server: A::Server) -> Result<()> {
    let stop = net::stop_on_signal()?;
    let net = Net::open("weir-serve", eal, &args.net)?;
    let mut link = net.link()?;
    let port = args.port();
    let mut tcp = TcpConfig {
        rcv_buf: args.rcvbuf,
        // A connection may hold out of order all it advertised (the window is the bound);
        // the core's total is bounded by the pool (`size_tcp`).
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
    let mut p: Pipeline<Mbuf> =
        Pipeline::new(cfg).map_err(|e| anyhow!("cannot listen on port {port}: {e}"))?;
    let mut glue = Glue::<A>::new(server, max_conns, args.nodelay());
    let mac = net.mac.map(|b| format!("{b:02x}")).join(":");
    println!(
        "weir-serve: {} on {}:{port} and [{}]:{port} (mac {mac}), {max_conns} connections at most ({fit} fit the pool at full queues)",
        args.app.name(),
        net.ip,
        net.ip6
    );
    let started = link.now();
    let deadline = args
        .duration
        .map(|s| started + Duration::from_nanos((s * 1e9) as u64));
    let (mut rx, mut tx): (Burst<Mbuf>, Burst<Mbuf>) = (Burst::new(), Burst::new());
    let mut iterations = 0u64;
    let mut now: Instant;
    loop {
        now = link.now();
        link.rx_burst(now, &mut rx);
        p.handle_rx_burst(now, &mut rx);
        glue.serve(p.tcp(), link.pool(), now);
        p.handle_timeout(now);
        glue.serve(p.tcp(), link.pool(), now);
        p.poll_tx(now, link.pool(), &mut tx);
        link.tx_burst(now, &mut tx);
        iterations += 1;
        if iterations % 4096 == 0 {
            link.note_pool();
        }
        if iterations % 1024 == 0
            && (stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d))
        {
            break;
        }
    }
    // The end: what GRO holds reaches the engines, connections still open are reset, and
    // what that sends leaves (the transmit stage's held frames included).
    p.flush_gro(now);
    glue.serve(p.tcp(), link.pool(), now);
    glue.stop(p.tcp(), now);
    glue.serve(p.tcp(), link.pool(), now);
    for _ in 0..64 {
        now = link.now();
        p.poll_tx(now, link.pool(), &mut tx);
        link.tx_burst(now, &mut tx);
        if tx.is_empty() && link.tx_held() == 0 {
            break;
        }
    }
    let counts = glue.counts();
    let tally = glue.tally().clone();
    let stats = p.stats();
    let ls = link.stats();
    drop(p);
    let in_use = net.close(link)?;
    let seconds = now.saturating_since(started).as_nanos() as f64 / 1e9;
    print_summary(
        args.app,
        &counts,
        &tally,
        seconds,
        stats.tcp.retransmits,
        in_use,
    );
    if let Some(path) = &args.net.stats_json {
        let extra = json!({
            "app": args.app.name(),
            "serve": glue_json(&counts),
            "app_counters": tally.counters,
            "sessions": tally.reports,
            "digests": tally.digests.iter().map(|d| json!({
                "flow": d.flow, "local_port": d.local_port, "bytes": d.bytes,
                "sha256": d.sha256, "end": d.end,
            })).collect::<Vec<_>>(),
            "files": tally.files.iter().map(write_dir::FileRecord::json).collect::<Vec<_>>(),
            "settings": args.settings_json(max_conns),
            "duration_s": seconds,
        });
        net::write_json(path, &net::report_json(&stats, &ls, in_use, extra))?;
    }
    Ok(())
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
    })
}

fn print_summary(
    app: AppKind,
    c: &GlueCounts,
    t: &Tally,
    seconds: f64,
    retransmits: u64,
    in_use: u64,
) {
    println!(
        "weir-serve {} over {seconds:.1}s: {} connections ({} closed, {} reset, {} open at the stop), {} bytes in, {} bytes out, {} app errors, {} writes waited for Writable, {} retransmitted segments, {} mbufs in use at exit",
        app.name(),
        c.opened,
        c.closed,
        c.reset,
        c.open_at_stop,
        c.bytes_in,
        c.bytes_out,
        c.app_errors,
        c.short_writes,
        retransmits,
        in_use
    );
    if !t.counters.is_empty() {
        let list: Vec<String> = t.counters.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("  {}: {}", app.name(), list.join(", "));
    }
    for r in &t.reports {
        println!("  session {r}");
    }
    write_dir::print_files(&t.files);
}
