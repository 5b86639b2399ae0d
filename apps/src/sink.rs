//! `weir-sink`: receive TCP on a DPDK port with weir's pipeline, one lcore per queue.
//!
//! The application side is a sink: it accepts every connection on the listening ports,
//! consumes every byte as soon as it is in order (optionally hashing it), and closes when
//! the peer closes. Stats cross from the lcores to the printer thread as snapshots through
//! `crossbeam-queue`; nothing on the data path waits for anything.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, ValueEnum};
use crossbeam_queue::ArrayQueue;
use dpdk::{Clock, Eal, Mbuf, Mempool, Port, PortConfig, PortRxQueue, PortTxQueue};
use serde_json::json;
use sha2::{Digest, Sha256};
use stack::ack::AckPolicy;
use stack::buf::PacketBuf;
use stack::driver::{Burst, RxQueue, TxQueue};
use stack::gro::GroConfig;
use stack::impair::{ImpairConfig, Impairment};
use stack::pipeline::{Pipeline, PipelineConfig, DESC_AHEAD, PREFETCH_AHEAD};
use stack::stats::Stats;
use stack::tcp::{ConnId, Event, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::LocalAddrs;

use crate::busy::BusySpan;
use crate::eal_args;
use crate::report::{self, DigestRecord};

/// `on` or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// weir-sink's own options (after `--` when EAL options are given).
#[derive(Parser, Debug, Clone)]
#[command(
    name = "weir-sink",
    version,
    about = "Receive TCP with weir: software GRO with a nanosecond flush timer, Linux-grade ACKs, batched per loop.",
    after_help = "Usage forms:\n  weir-sink [OPTIONS]                      embedded default: a net_tap vdev 'weirtap0', --no-pci, hugepages if configured\n  weir-sink [EAL OPTIONS] -- [OPTIONS]     DPDK's usual form, e.g. weir-sink -l 0-1 -a 0000:3b:00.0 -- --ip 10.0.0.1\n\nscripts/run.sh drives it with the kernel's TCP over net_tap."
)]
pub struct SinkArgs {
    /// weir's address on the port (repeat to give one IPv4 and one IPv6 address).
    #[arg(long = "ip", value_name = "ADDR", default_values = ["198.18.0.1", "2001:2::1"])]
    pub ip: Vec<IpAddr>,
    /// TCP port to accept connections on (repeatable).
    #[arg(long = "port", value_name = "N", default_values_t = [5001u16],
          value_parser = clap::value_parser!(u16).range(1..))]
    pub ports: Vec<u16>,
    /// DPDK port id to use (default: the first probed port).
    #[arg(long, value_name = "ID")]
    pub eth_port: Option<u16>,
    /// RX/TX queues, one lcore each (RSS spreads flows when the device has it).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: u16,
    /// GRO flush timeout: the longest a segment is held, in nanoseconds (0 = flush at the
    /// end of every burst, as NAPI without gro_flush_timeout).
    #[arg(long, value_name = "NS", default_value_t = 20_000)]
    pub gro_flush_ns: u64,
    /// While the receive queue is backlogged (a burst comes back full), hold GRO runs up
    /// to this long instead of --gro-flush-ns, as Linux does while NAPI polls use their
    /// whole budget (one jiffy: 1000000 at HZ=1000). Frames waiting in the queue are
    /// delayed anyway; longer runs make each segment cheaper, so the receiver catches up.
    /// 0 (the default) keeps --gro-flush-ns the longest hold.
    #[arg(long, value_name = "NS", default_value_t = 0)]
    pub gro_busy_hold_ns: u64,
    /// Hand every segment to TCP as it arrives (no coalescing).
    #[arg(long)]
    pub no_gro: bool,
    /// GRO runs held at once per core; the oldest is flushed when full.
    #[arg(long, value_name = "N", default_value_t = 4096,
          value_parser = clap::value_parser!(u64).range(1..=16_777_216))]
    pub max_flows: u64,
    /// Connections per core; more are refused with a RST.
    #[arg(long, value_name = "N", default_value_t = 4096,
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub max_conns: u64,
    /// ACK policy: linux, rfc5681, every:N, delay:NS.
    #[arg(long, value_name = "POLICY", default_value = "linux", value_parser = parse_policy)]
    pub ack_policy: AckPolicy,
    /// Immediate ACK when an exactly-1-MSS PSH segment is consumed (Linux 4720852ed9af);
    /// default: on for linux, off for the other presets.
    #[arg(long, value_name = "on|off")]
    pub quickack_psh_mss: Option<OnOff>,
    /// Receive buffer per connection in bytes (the window's upper bound).
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20,
          value_parser = clap::value_parser!(u32).range(16_384..=1_073_741_824))]
    pub rcvbuf: u32,
    /// SHA-256 of each connection's bytes, printed when it closes and kept in the JSON.
    #[arg(long)]
    pub digest: bool,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Write the totals as JSON to FILE on exit.
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,
    /// Mbufs in the receive pool.
    #[arg(long, value_name = "N", default_value_t = 16_383,
          value_parser = clap::value_parser!(u32).range(1024..))]
    pub mbufs: u32,
    /// Put the port in promiscuous mode.
    #[arg(long)]
    pub promiscuous: bool,
    /// No live line (totals and JSON only).
    #[arg(long)]
    pub quiet: bool,
    /// Append the running totals as one JSON line per second to FILE (for benchmarks and
    /// the lab: rates over any window).
    #[arg(long, value_name = "FILE")]
    pub stats_log: Option<PathBuf>,
    /// Impair received frames before the pipeline (this kernel has no netem), e.g.
    /// `loss=1%,reorder=5%,dup=1%,corrupt=0.1%,reorder-delay=200us,seed=7`. Seeded and
    /// reproducible; a corrupted frame keeps its old checksums, so weir must catch it.
    #[arg(long, value_name = "SPEC", value_parser = parse_impair)]
    pub impair: Option<(ImpairConfig, Option<u64>)>,
    /// Baseline mode: receive and free every frame, no stack at all (nothing is answered,
    /// so only traffic that needs no replies flows, e.g. UDP to a static neighbor entry).
    #[arg(long)]
    pub drop: bool,
    /// Name of the tap interface the embedded default creates (ignored with EAL options).
    #[arg(long, value_name = "NAME", default_value = "weirtap0")]
    pub tap_iface: String,
    /// Read options from a TOML file (keys are the long options, e.g. `gro_flush_ns =
    /// 50000`, `port = [5001, 5002]`); options on the command line override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Log filter: a level (error, warn, info, debug, trace) or RUST_LOG directives such
    /// as `info,dpdk=warn` (default: RUST_LOG, else info). DPDK's log is routed in.
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// Capture what weir receives and transmits to FILE (pcapng, nanosecond timestamps,
    /// direction); frames the writer cannot keep up with are left out and counted.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Bytes of each frame kept in the capture.
    #[arg(long, value_name = "BYTES", default_value_t = 65_535,
          value_parser = clap::value_parser!(u32).range(64..=262_144))]
    pub pcap_snaplen: u32,
    /// Largest capture in MiB; later frames are left out and counted (pcap_dropped).
    #[arg(long, value_name = "MB", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub pcap_max_mb: u64,
    /// Serve the stats in the Prometheus text format at http://ADDR:PORT/metrics
    /// (e.g. 127.0.0.1:9108).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
}

fn parse_impair(s: &str) -> std::result::Result<(ImpairConfig, Option<u64>), String> {
    ImpairConfig::parse(s)
}

fn parse_policy(s: &str) -> std::result::Result<AckPolicy, String> {
    s.parse::<AckPolicy>().map_err(|e| e.to_string())
}

impl SinkArgs {
    /// Checks what clap cannot: one address per family, a positive finite duration.
    pub fn validate(&self) -> Result<()> {
        let v4 = self.ip.iter().filter(|a| a.is_ipv4()).count();
        let v6 = self.ip.iter().filter(|a| a.is_ipv6()).count();
        if v4 > 1 || v6 > 1 {
            bail!("--ip: give at most one IPv4 and one IPv6 address");
        }
        if let Some(ip) = self
            .ip
            .iter()
            .find(|a| a.is_unspecified() || a.is_multicast())
        {
            bail!("--ip {ip}: weir needs a unicast address");
        }
        if let Some(d) = self.duration {
            if !(d.is_finite() && d > 0.0) {
                bail!("--duration {d}: give a positive number of seconds");
            }
        }
        let mut ports = self.ports.clone();
        ports.sort_unstable();
        ports.dedup();
        if ports.len() != self.ports.len() {
            bail!("--port: a port is given twice");
        }
        Ok(())
    }

    /// The ACK policy with the `--quickack-psh-mss` switch applied.
    pub fn policy(&self) -> AckPolicy {
        match self.quickack_psh_mss {
            Some(s) => self.ack_policy.with_quickack_psh_mss(s == OnOff::On),
            None => self.ack_policy,
        }
    }

    fn settings_json(&self) -> serde_json::Value {
        json!({
            "ip": self.ip.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "ports": self.ports,
            "queues": self.queues,
            "gro": !self.no_gro,
            "gro_flush_ns": self.gro_flush_ns,
            "gro_busy_hold_ns": self.gro_busy_hold_ns,
            "max_flows": self.max_flows,
            "max_conns": self.max_conns,
            "ack_policy": self.policy().to_string(),
            "rcvbuf": self.rcvbuf,
            "digest": self.digest,
            "drop": self.drop,
        })
    }
}

/// Entry point: parses the command line, runs, and maps errors to one line and an exit
/// code (2 for usage errors, 1 for run-time errors).
pub fn main(argv: Vec<String>) -> ExitCode {
    let mut split = eal_args::split(argv);
    match crate::config::apply(split.app, &<SinkArgs as clap::CommandFactory>::command()) {
        Ok(app) => split.app = app,
        Err(e) => {
            eprintln!("weir-sink: error: {e}");
            return ExitCode::from(2);
        }
    }
    let args = match SinkArgs::try_parse_from(&split.app) {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("weir-sink: error: {first} (see weir-sink --help)");
            return ExitCode::from(2);
        }
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

/// What a core hands back when it stops.
struct CoreResult {
    stats: Stats,
    digests: Vec<DigestRecord>,
    open_at_stop: u64,
}

/// What a receiving core does with each burst.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxWork {
    /// The whole pipeline: GRO, TCP, ACKs, the application.
    #[default]
    Stack,
    /// Receive and free only (`weir-sink --drop`): the driver's own cost.
    Drop,
    /// Receive, read each frame's two header lines, free: what any receiver pays before
    /// it can decide anything about a frame (66 bytes of Ethernet, IPv4 and TCP with
    /// timestamps span two cache lines). The lines are fetched as the pipeline fetches
    /// them (descriptors [`DESC_AHEAD`] frames ahead, the data [`PREFETCH_AHEAD`]).
    DropReadHeaders,
}

/// What a core needs to run.
struct CoreCtx {
    queue: u16,
    rx: PortRxQueue,
    tx: PortTxQueue,
    pool: dpdk::PortPool,
    clock: Clock,
    cfg: PipelineConfig,
    digest: bool,
    work: RxWork,
    impair: Option<(ImpairConfig, Option<u64>)>,
    stop: Arc<AtomicBool>,
    deadline_ns: Option<u64>,
    snapshots: Arc<ArrayQueue<(u16, Stats)>>,
    closed: Arc<ArrayQueue<DigestRecord>>,
    capture: Option<crate::capture::CoreCapture>,
}

/// One receiving core driven by another program (`weir-bench e2e`): weir-sink's per-core
/// loop on the given queues, with no printer, deadline, impairment or capture.
pub struct ReceiverCore {
    /// The RX queue to poll.
    pub rx: PortRxQueue,
    /// The TX queue for ACKs and replies.
    pub tx: PortTxQueue,
    /// Where ACKs are built.
    pub pool: dpdk::PortPool,
    /// The TSC clock.
    pub clock: Clock,
    /// The pipeline's configuration.
    pub cfg: PipelineConfig,
    /// SHA-256 of each connection's bytes (in [`ReceiverResult::digests`]).
    pub digest: bool,
    /// What the core does with each burst.
    pub work: RxWork,
    /// Set to stop; the loop checks it every quarter second.
    pub stop: Arc<AtomicBool>,
}

/// What [`run_receiver`] hands back.
pub struct ReceiverResult {
    /// The core's counters, loop figures (busy cycles) included.
    pub stats: Stats,
    /// Per-connection digests (with [`ReceiverCore::digest`]).
    pub digests: Vec<DigestRecord>,
    /// Connections still open when it stopped (they were reset).
    pub open_at_stop: u64,
}

/// Reads the first and the 66th byte of every frame in `rx` (both header lines of a TCP
/// segment with timestamps), fetching the lines as [`Pipeline::handle_rx_burst`] does.
fn read_headers(rx: &Burst<Mbuf>) {
    for b in rx.iter().take(DESC_AHEAD) {
        b.prefetch_descriptor();
    }
    for b in rx.iter().take(PREFETCH_AHEAD) {
        b.prefetch_data();
    }
    for (i, b) in rx.iter().enumerate() {
        if let Some(ahead) = rx.get(i + DESC_AHEAD) {
            ahead.prefetch_descriptor();
        }
        if let Some(ahead) = rx.get(i + PREFETCH_AHEAD) {
            ahead.prefetch_data();
        }
        let d = b.data();
        std::hint::black_box((d.first().copied(), d.get(65).copied()));
    }
}

/// Runs weir-sink's per-core loop (`run_core`) on `core` until `core.stop` is set.
pub fn run_receiver(core: ReceiverCore) -> Result<ReceiverResult> {
    let r = run_core(CoreCtx {
        queue: 0,
        rx: core.rx,
        tx: core.tx,
        pool: core.pool,
        clock: core.clock,
        cfg: core.cfg,
        digest: core.digest,
        work: core.work,
        impair: None,
        stop: core.stop,
        deadline_ns: None,
        snapshots: Arc::new(ArrayQueue::new(4)),
        closed: Arc::new(ArrayQueue::new(1)),
        capture: None,
    })?;
    Ok(ReceiverResult {
        stats: r.stats,
        digests: r.digests,
        open_at_stop: r.open_at_stop,
    })
}

/// Longest list of per-connection digests a core keeps (bounded like everything else).
const MAX_DIGESTS: usize = 100_000;

struct ConnDigest {
    flow: String,
    local_port: u16,
    hasher: Option<Sha256>,
    bytes: u64,
}

/// The sink's per-connection state, indexed by the connection's table slot: a lookup per
/// event is an index and a generation check, not a hash (SipHash showed in the profile).
#[derive(Default)]
struct ConnMap {
    slots: Vec<Option<(ConnId, ConnDigest)>>,
}

impl ConnMap {
    fn insert(&mut self, id: ConnId, c: ConnDigest) {
        let i = id.index() as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some((id, c));
    }

    fn get_mut(&mut self, id: ConnId) -> Option<&mut ConnDigest> {
        match self.slots.get_mut(id.index() as usize) {
            Some(Some((k, c))) if *k == id => Some(c),
            _ => None,
        }
    }

    fn remove(&mut self, id: ConnId) -> Option<ConnDigest> {
        let slot = self.slots.get_mut(id.index() as usize)?;
        match slot {
            Some((k, _)) if *k == id => slot.take().map(|(_, c)| c),
            _ => None,
        }
    }

    fn ids(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.slots.iter().flatten().map(|(k, _)| *k)
    }

    fn into_values(self) -> impl Iterator<Item = ConnDigest> {
        self.slots.into_iter().flatten().map(|(_, c)| c)
    }
}

/// The sink application on one core: consume everything, hash it, close when the peer does.
struct SinkApp {
    digest: bool,
    conns: ConnMap,
    done: Vec<DigestRecord>,
    closed: Arc<ArrayQueue<DigestRecord>>,
}

impl SinkApp {
    fn serve(&mut self, p: &mut Pipeline<Mbuf>, now: Instant) {
        while let Some(ev) = p.tcp().poll_event() {
            match ev {
                Event::Opened(id) => {
                    let flow = p.tcp().flow(id);
                    let (name, port) = flow
                        .map(|f| (format!("{f:?}"), f.dport))
                        .unwrap_or_default();
                    self.conns.insert(
                        id,
                        ConnDigest {
                            flow: name,
                            local_port: port,
                            hasher: self.digest.then(Sha256::new),
                            bytes: 0,
                        },
                    );
                }
                Event::Readable(id) => self.consume(p, id),
                Event::PeerClosed(id) => {
                    self.consume(p, id);
                    let _ = p.tcp().close(now, id);
                }
                Event::Closed(id) => self.finish(id, "closed"),
                Event::Reset(id) => self.finish(id, "reset"),
            }
        }
    }

    fn consume(&mut self, p: &mut Pipeline<Mbuf>, id: ConnId) {
        let c = self.conns.get_mut(id);
        let _ = p.tcp().recv(id, |slices| {
            let mut n = 0usize;
            for s in slices {
                n += usize::from(s.len);
            }
            if let Some(c) = c {
                if let Some(h) = c.hasher.as_mut() {
                    for s in slices {
                        h.update(s.bytes());
                    }
                }
                c.bytes += n as u64;
            }
            n
        });
    }

    fn finish(&mut self, id: ConnId, end: &'static str) {
        let Some(c) = self.conns.remove(id) else {
            return;
        };
        self.record(c, end);
    }

    fn record(&mut self, c: ConnDigest, end: &'static str) {
        let Some(h) = c.hasher else { return };
        let rec = DigestRecord {
            flow: c.flow,
            local_port: c.local_port,
            bytes: c.bytes,
            sha256: hex(&h.finalize()),
            end,
        };
        let _ = self.closed.push(rec.clone());
        if self.done.len() < MAX_DIGESTS {
            self.done.push(rec);
        }
    }
}

/// A copy of `m` from `pool` (the duplicate the impairment delivers), or `None` when the
/// pool is empty. Its RX checksum verdicts are unknown: the stack verifies it itself.
fn copy_mbuf(pool: Mempool, m: &Mbuf) -> Option<Mbuf> {
    let mut c = pool.alloc_len(m.data().len())?;
    c.data_mut().copy_from_slice(m.data());
    c.set_port(m.port().unwrap_or(0));
    Some(c)
}

/// Changes one byte past the Ethernet header (so IPv4's or TCP's checksum must catch it)
/// and forgets the NIC's checksum verdicts, as a frame damaged on the wire would look to
/// a NIC that did not check it.
fn corrupt_mbuf(m: &mut Mbuf, r: u64) -> bool {
    let d = m.data_mut();
    if d.len() <= 14 {
        return false;
    }
    let i = 14 + (r as usize) % (d.len() - 14);
    d[i] ^= 1 + ((r >> 32) % 255) as u8;
    m.clear_rx_checksum();
    true
}

/// Lower-case hexadecimal of `b` (digests as `sha256sum` prints them).
pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One core's loop: rx burst, pipeline, app, timers, one tx burst; until told to stop.
fn run_core(mut c: CoreCtx) -> Result<CoreResult> {
    let mut p: Pipeline<Mbuf> = Pipeline::new(c.cfg.clone())
        .map_err(|e| anyhow!("queue {}: cannot set up TCP: {e}", c.queue))?;
    let mut app = SinkApp {
        digest: c.digest,
        conns: ConnMap::default(),
        done: Vec::new(),
        closed: c.closed.clone(),
    };
    let mut rx: Burst<Mbuf> = Burst::new();
    let mut out: Burst<Mbuf> = Burst::new();
    let hz = c.clock.hz().max(1);
    let publish_every = hz / 4;
    let mut last_publish = Clock::cycles();
    let mut lp = stack::stats::LoopStats::default();
    let mut drop_stats = stack::stats::PipelineStats::default();
    let mut impair = c.impair.map(|(cfg, seed)| {
        Impairment::<Mbuf>::new(cfg, seed.unwrap_or(0x5eed) ^ u64::from(c.queue))
    });
    let imp_pool = c.pool.mempool();
    // ACKs are built in mbufs taken 32 at a time, their lines prefetched together.
    let mut tx_pool = dpdk::StashPool::new(c.pool);
    let deadline = c.deadline_ns.map(Instant::from_nanos);
    let mut now;
    let mut span = BusySpan::default();
    loop {
        let t0 = Clock::cycles();
        lp.busy_cycles += span.close(t0);
        now = c.clock.instant_at(t0);
        let mut n = c.rx.rx_burst(&mut rx);
        // The stack's own share of the iteration starts here (the driver's receive, which
        // on net_tap is a read() per frame, is not weir's processing).
        let t_rx = if n > 0 { Clock::cycles() } else { t0 };
        if let Some(cap) = c.capture.as_mut() {
            cap.rx(rx.iter());
        }
        if let Some(imp) = impair.as_mut() {
            for b in rx.drain(..) {
                imp.push_with(now, b, |m| copy_mbuf(imp_pool, m), corrupt_mbuf);
            }
            while !rx.is_full() {
                match imp.pop_ready(now) {
                    Some(b) => rx.push(b),
                    None => break,
                }
            }
            n = rx.len();
        }
        if c.work != RxWork::Stack {
            if c.work == RxWork::DropReadHeaders {
                read_headers(&rx);
            }
            for b in rx.iter() {
                drop_stats.rx_packets += 1;
                drop_stats.rx_bytes += b.data().len() as u64;
            }
            // One rte_pktmbuf_free_bulk per burst, as a tuned receive loop frees.
            Mbuf::free_burst(&mut rx);
        } else {
            // An empty burst too: it tells GRO the queue is drained (`busy_hold_ns`).
            p.handle_rx_burst(now, &mut rx);
        }
        app.serve(&mut p, now);
        p.handle_timeout(now);
        app.serve(&mut p, now);
        let m = p.poll_tx(now, &mut tx_pool, &mut out);
        if n > 0 || m > 0 {
            lp.stack_cycles += Clock::cycles().wrapping_sub(t_rx);
        }
        if !out.is_empty() {
            if let Some(cap) = c.capture.as_mut() {
                cap.tx(out.iter());
            }
            lp.tx_packets += c.tx.tx_burst(&mut out) as u64;
            lp.tx_dropped += out.len() as u64;
            out.clear();
        }
        lp.iterations += 1;
        if n > 0 || m > 0 {
            lp.busy_iterations += 1;
            span.busy(t0);
        }
        if t0.wrapping_sub(last_publish) >= publish_every {
            last_publish = t0;
            let mut s = p.stats();
            if c.work != RxWork::Stack {
                s.pipeline = drop_stats.clone();
            }
            if let Some(imp) = &impair {
                s.impair = imp.stats();
            }
            s.lp = lp.clone();
            s.lp.busy_ns = c.clock.cycles_to_ns(lp.busy_cycles);
            s.lp.stack_ns = c.clock.cycles_to_ns(lp.stack_cycles);
            s.lp.mbufs_in_use = c.pool.mempool().in_use() as u64;
            c.snapshots.force_push((c.queue, s));
            if c.stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d) {
                break;
            }
        }
    }
    lp.busy_cycles += span.close(Clock::cycles());
    // Shutdown: nothing stays held in GRO; what is in order reaches the app; connections
    // still open are reset (so no peer waits on a vanished receiver).
    p.flush_gro(now);
    app.serve(&mut p, now);
    let open_at_stop = p.stats().conns_open;
    let open: Vec<ConnId> = app.conns.ids().collect();
    for id in open {
        let _ = p.tcp().abort(id);
    }
    app.serve(&mut p, now);
    for c in std::mem::take(&mut app.conns).into_values() {
        app.record(c, "open");
    }
    for _ in 0..64 {
        if p.poll_tx(now, &mut tx_pool, &mut out) == 0 {
            break;
        }
        if let Some(cap) = c.capture.as_mut() {
            cap.tx(out.iter());
        }
        lp.tx_packets += c.tx.tx_burst(&mut out) as u64;
        lp.tx_dropped += out.len() as u64;
        out.clear();
    }
    // The unused transmit mbufs go back before the pool is checked.
    drop(tx_pool);
    // Frames still held by the impairment are dropped (freed) here, before the pool is
    // checked; they count as delivered nowhere.
    let mut stats = p.stats();
    if let Some(imp) = impair.take() {
        stats.impair = imp.stats();
    }
    if c.work != RxWork::Stack {
        stats.pipeline = drop_stats;
    }
    lp.busy_ns = c.clock.cycles_to_ns(lp.busy_cycles);
    lp.stack_ns = c.clock.cycles_to_ns(lp.stack_cycles);
    stats.lp = lp;
    drop(p);
    Ok(CoreResult {
        stats,
        digests: app.done,
        open_at_stop,
    })
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
    let pool = Mempool::new(&eal, "weir_rx", args.mbufs, 256, 2048 + 128)
        .context("creating the mbuf pool (try fewer --mbufs, or more memory with -m)")?;
    let mut port = Port::configure(
        &eal,
        port_id,
        pool,
        &PortConfig {
            rx_queues: queues,
            tx_queues: queues,
            promiscuous: args.promiscuous,
            ..PortConfig::default()
        },
    )
    .with_context(|| format!("configuring port {port_id}"))?;
    port.start()
        .with_context(|| format!("starting port {port_id}"))?;
    let mac = port.mac()?;
    let off = port.offloads();
    let tx_csum = off.tx_tcp_cksum() && off.tx_ipv4_cksum();
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
    let policy = args.policy();
    let cfg = PipelineConfig {
        local,
        gro: (!args.no_gro).then(|| GroConfig {
            flush_ns: Duration::from_nanos(args.gro_flush_ns),
            busy_hold_ns: Duration::from_nanos(args.gro_busy_hold_ns),
            max_flows: args.max_flows as usize,
            ..GroConfig::default()
        }),
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
            work: if args.drop {
                RxWork::Drop
            } else {
                RxWork::Stack
            },
            impair: args.impair,
            stop: stop.clone(),
            deadline_ns,
            snapshots: snapshots.clone(),
            closed: closed.clone(),
            capture: capture.as_ref().map(|cap| cap.for_core(usize::from(q), q)),
        });
    }
    let started = std::time::Instant::now();

    // The printer: merges the cores' latest snapshots once a second.
    let printer_stop = Arc::new(AtomicBool::new(false));
    let printer = {
        let snapshots = snapshots.clone();
        let closed = closed.clone();
        let quiet = args.quiet;
        let mut log = match &args.stats_log {
            Some(path) => Some(
                std::fs::File::create(path)
                    .with_context(|| format!("creating --stats-log {}", path.display()))?,
            ),
            None => None,
        };
        let pstop = printer_stop.clone();
        let metrics = metrics.clone();
        let n = usize::from(queues);
        std::thread::spawn(move || {
            let mut latest: Vec<Stats> = vec![Stats::default(); n];
            let mut prev = Stats::default();
            let mut last = std::time::Instant::now();
            while !pstop.load(Ordering::Relaxed) {
                std::thread::sleep(StdDuration::from_millis(100));
                while let Some(d) = closed.pop() {
                    println!(
                        "connection {} {}: {} bytes, sha256 {}",
                        d.flow, d.end, d.bytes, d.sha256
                    );
                }
                while let Some((q, s)) = snapshots.pop() {
                    if let Some(m) = &metrics {
                        m.publish(q, &s);
                    }
                    if let Some(slot) = latest.get_mut(usize::from(q)) {
                        *slot = s;
                    }
                }
                let dt = last.elapsed().as_secs_f64();
                if dt >= 1.0 {
                    let mut total = Stats::default();
                    for s in &latest {
                        total.merge(s);
                    }
                    let elapsed = started.elapsed().as_secs_f64();
                    if !quiet {
                        println!("{}", report::live_line(elapsed, &prev, &total, dt));
                    }
                    if let Some(f) = log.as_mut() {
                        use std::io::Write;
                        let mut v = report::stats_json(&total);
                        if let serde_json::Value::Object(m) = &mut v {
                            m.insert("elapsed_s".into(), json!(elapsed));
                        }
                        let _ = writeln!(f, "{v}");
                    }
                    prev = total;
                    last = std::time::Instant::now();
                }
            }
            while let Some(d) = closed.pop() {
                println!(
                    "connection {} {}: {} bytes, sha256 {}",
                    d.flow, d.end, d.bytes, d.sha256
                );
            }
        })
    };

    let mut launched = Vec::new();
    let mut ctxs = ctxs.into_iter();
    let main_ctx = ctxs.next().ok_or_else(|| anyhow!("no queue to run"))?;
    let results = Arc::new(std::sync::Mutex::new(Vec::new()));
    for (ctx, lcore) in ctxs.zip(workers.iter().copied()) {
        let results = results.clone();
        let q = ctx.queue;
        launched.push(eal.remote_launch(lcore, move || {
            let r = run_core(ctx);
            let code = i32::from(r.is_err());
            if let Ok(mut v) = results.lock() {
                v.push((q, r));
            }
            code
        })?);
    }
    let main_result = run_core(main_ctx);
    stop.store(true, Ordering::Relaxed);
    for l in launched {
        let _ = l.join();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut per_core = vec![(0u16, main_result)];
    if let Ok(mut v) = results.lock() {
        per_core.extend(v.drain(..));
    }
    per_core.sort_by_key(|(q, _)| *q);
    printer_stop.store(true, Ordering::Relaxed);
    let _ = printer.join();

    let mut total = Stats::default();
    let mut stats = Vec::new();
    let mut digests = Vec::new();
    let mut open_at_stop = 0;
    for (q, r) in per_core {
        let r = r.with_context(|| format!("queue {q}"))?;
        total.merge(&r.stats);
        open_at_stop += r.open_at_stop;
        stats.push(r.stats);
        digests.extend(r.digests);
    }
    total.conns_open = open_at_stop;
    if let Some(m) = &metrics {
        for (q, s) in stats.iter().enumerate() {
            m.publish(q as u16, s);
        }
    }
    let pcap = match capture {
        Some(cap) => Some(cap.finish()?),
        None => None,
    };
    // Closing the port returns the mbufs its RX rings held.
    port.close().context("closing the port")?;
    let in_use = pool.in_use() as u64;
    total.lp.mbufs_in_use = in_use;
    println!("{}", report::summary(&total, in_use, elapsed));
    if let (Some(t), Some(path)) = (pcap, &args.pcap) {
        println!(
            "  capture: {} frames ({} bytes) written to {}, {} left out (pcap_dropped)",
            t.written,
            t.bytes,
            path.display(),
            t.dropped
        );
    }
    if let Some(path) = &args.stats_json {
        let v = report::final_json(
            &total,
            &stats,
            &digests,
            in_use,
            elapsed,
            args.settings_json(),
        );
        let mut v = v;
        if let (Some(t), serde_json::Value::Object(m)) = (pcap, &mut v) {
            for (k, n) in t.json_fields() {
                m.insert(k.into(), json!(n));
            }
        }
        let text = serde_json::to_string_pretty(&v)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
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
        gro = !args.no_gro,
        gro_flush_ns = args.gro_flush_ns,
        gro_max_flows = args.max_flows,
        gro_max_segs = gro.max_segs,
        gro_max_bytes = gro.max_bytes,
        ack_policy = %args.policy(),
        quickack_psh_mss = ?args.quickack_psh_mss,
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
