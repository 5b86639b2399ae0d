//! The DPDK side of a program written on the stack's API (the examples in apps/examples/,
//! weir-serve): the EAL with weir's embedded default (a net_tap vdev, `--no-pci`), one port
//! with one queue pair per core and its mbuf pool ([`Net`]); a [`Link`] per queue pair that
//! receives and transmits bursts on it, through the impairment stage in both directions
//! when asked (`--impair`), and hands the frames to a capture (`--pcap`); ARP
//! resolution of the next hop for an active open ([`Resolver`]); and the `--stats-json`
//! report ([`report_json`]).
//!
//! The program keeps the loop, so the stack's call order stays in sight where it is used
//! (stack/src/tcp/mod.rs, "Call order"):
//!
//! ```text
//! now = link.now(); link.rx_burst(now, &mut rx);
//! p.handle_rx_burst(now, &mut rx);  events, recv/send/connect/close;
//! p.handle_timeout(now);            events again;
//! p.poll_tx(now, link.pool(), &mut tx); link.tx_burst(now, &mut tx);
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use dpdk::{Clock, Eal, Mbuf, Mempool, Port, PortConfig, PortRxQueue, PortTxQueue, StashPool};
use serde_json::{json, Value};
use stack::ack::AckPolicy;
use stack::buf::{BufPool, PacketBuf};
use stack::driver::{Burst, RxQueue, TxBacklog, MAX_BURST, TX_BACKLOG};
use stack::gro::GroConfig;
use stack::impair::{ImpairConfig, ImpairStats, Impairment};
use stack::pipeline::PipelineConfig;
use stack::stats::Stats;
use stack::tcp::TcpConfig;
use stack::time::{Duration, Instant};
use stack::wire::ipv4::protocol;
use stack::wire::{arp, checksum, ethernet, icmp, ipv6, LocalAddrs};

use crate::capture::CoreCapture;
use crate::eal_args;

/// The options every program on [`Net`] takes (flatten them into its own).
#[derive(clap::Args, Debug, Clone)]
pub struct NetArgs {
    /// weir's IPv4 address on the port.
    #[arg(long = "ip", value_name = "ADDR", default_value = "198.18.0.1")]
    pub ip: Ipv4Addr,
    /// weir's IPv6 address on the port.
    #[arg(long = "ip6", value_name = "ADDR", default_value = "2001:2::1")]
    pub ip6: Ipv6Addr,
    /// Name of the tap interface the embedded default creates (ignored with EAL options).
    #[arg(long, value_name = "NAME", default_value = "weirtap0")]
    pub tap_iface: String,
    /// Mbufs in the pool (received frames, send buffers and every frame built).
    #[arg(long, value_name = "N", default_value_t = 32_767,
          value_parser = clap::value_parser!(u32).range(1024..))]
    pub mbufs: u32,
    /// Impair frames in both directions, received ones before the pipeline and sent ones
    /// before the port, each direction with its own seeded stage, e.g.
    /// `loss=1%,reorder=2%,dup=1%,seed=7` (weir-sink's --impair syntax).
    #[arg(long, value_name = "SPEC", value_parser = parse_impair)]
    pub impair: Option<(ImpairConfig, Option<u64>)>,
    /// Write the counters as JSON to FILE on exit.
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,
    /// The port's MTU (68..=9000; default: the device's, 1500 on most), and the MSS TCP
    /// advertises with it. Frames longer than an mbuf arrive as chains when the port has
    /// scattered receive; otherwise the pool's mbufs are made large enough for a frame.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u16).range(MTU_RANGE))]
    pub mtu: Option<u16>,
}

/// What `--mtu` takes: IPv4's minimum (RFC 791) to the usual jumbo frame.
pub const MTU_RANGE: std::ops::RangeInclusive<i64> = 68..=9000;

/// The RX pool for port `port_id` at `mtu` (`None`: 1,500): mbufs of the default data
/// room when frames fit in one or the port scatters them over several
/// (`RTE_ETH_RX_OFFLOAD_SCATTER`), otherwise mbufs large enough for a whole frame. The
/// MTU is checked against the device's range here, before any memory is taken. The pool
/// is laid out as its driver needs ([`dpdk::needs_contiguous_pool`]: net_af_xdp's UMEM is
/// the pool's memory taken at one stride, [`Mempool::new_contiguous`]).
pub fn rx_pool(
    eal: &Eal,
    port_id: u16,
    name: &str,
    mbufs: u32,
    mtu: Option<u16>,
) -> Result<Mempool> {
    let info = Port::info(eal, port_id).with_context(|| format!("reading port {port_id}"))?;
    let room = match mtu {
        Some(m) => {
            if m < info.min_mtu || m > info.max_mtu {
                bail!(
                    "--mtu {m}: port {port_id} ({}) takes an MTU of {}..={} (its max_mtu)",
                    info.driver_name,
                    info.min_mtu,
                    info.max_mtu
                );
            }
            dpdk::rx_data_room(&info, m)
        }
        None => 2048 + 128,
    };
    let pool = if dpdk::needs_contiguous_pool(&info.driver_name) {
        Mempool::new_contiguous(eal, name, mbufs, dpdk::DEFAULT_CACHE, room)
    } else {
        Mempool::new(eal, name, mbufs, dpdk::DEFAULT_CACHE, room)
    };
    pool.context("creating the mbuf pool (try fewer --mbufs, or more memory with -m)")
}

fn parse_impair(s: &str) -> std::result::Result<(ImpairConfig, Option<u64>), String> {
    ImpairConfig::parse(s)
}

/// `on` or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// The receive side's settings every program that runs the pipeline takes (weir-sink and
/// weir-serve flatten them into their own options): GRO and the ACK policy.
#[derive(clap::Args, Debug, Clone)]
pub struct StackArgs {
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
    /// Most payload bytes in one GRO run. 65535 (the default) keeps runs under 64 KiB as
    /// Linux does without BIG TCP; up to 524280 (Linux's GRO_MAX_SIZE, BIG TCP) lets jumbo
    /// segments coalesce further: weir hands TCP a chain of buffers, not one IP packet.
    #[arg(long, value_name = "BYTES", default_value_t = stack::gro::GRO_LEGACY_MAX_BYTES,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(stack::gro::GRO_MAX_BYTES)))]
    pub gro_max_bytes: u32,
    /// GRO runs held at once per core; the oldest is flushed when full.
    #[arg(long, value_name = "N", default_value_t = 4096,
          value_parser = clap::value_parser!(u64).range(1..=16_777_216))]
    pub max_flows: u64,
    /// ACK policy: linux, rfc5681, every:N, delay:NS.
    #[arg(long, value_name = "POLICY", default_value = "linux", value_parser = parse_policy)]
    pub ack_policy: AckPolicy,
    /// Immediate ACK when an exactly-1-MSS PSH segment is consumed (Linux 4720852ed9af);
    /// default: on for linux, off for the other presets.
    #[arg(long, value_name = "on|off")]
    pub quickack_psh_mss: Option<OnOff>,
}

fn parse_policy(s: &str) -> std::result::Result<AckPolicy, String> {
    s.parse::<AckPolicy>().map_err(|e| e.to_string())
}

impl StackArgs {
    /// The ACK policy with the `--quickack-psh-mss` switch applied.
    pub fn policy(&self) -> AckPolicy {
        match self.quickack_psh_mss {
            Some(s) => self.ack_policy.with_quickack_psh_mss(s == OnOff::On),
            None => self.ack_policy,
        }
    }

    /// GRO's configuration (`None` with `--no-gro`).
    pub fn gro(&self) -> Option<GroConfig> {
        (!self.no_gro).then(|| GroConfig {
            flush_ns: Duration::from_nanos(self.gro_flush_ns),
            busy_hold_ns: Duration::from_nanos(self.gro_busy_hold_ns),
            max_flows: self.max_flows as usize,
            max_bytes: self.gro_max_bytes,
            ..GroConfig::default()
        })
    }
}

/// Parses `argv` in DPDK's usual form (`PROG [EAL options] -- [options]`, or the
/// program's options alone for the embedded default) into `A`, printing a one-line error
/// (exit status 2) or the help. Returns the options and the EAL arguments, if given.
pub fn parse_args<A: Parser>(
    prog: &str,
    argv: Vec<String>,
) -> Result<(A, Option<Vec<String>>), ExitCode> {
    let split = eal_args::split(argv);
    match A::try_parse_from(&split.app) {
        Ok(a) => Ok((a, split.eal)),
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("{prog}: error: {first} (see {prog} --help)");
            Err(ExitCode::from(2))
        }
    }
}

/// A flag that SIGINT or SIGTERM sets (the loop checks it and stops cleanly).
pub fn stop_on_signal() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed))
        .context("installing the SIGINT/SIGTERM handler")?;
    Ok(stop)
}

/// Mbufs of the pool that never hold connection data: the port's RX ring (1024
/// descriptors, `PortConfig::default`), the pool's per-lcore cache
/// ([`dpdk::DEFAULT_CACHE`]), the transmit stash (2 x [`dpdk::STASH`]), a burst each way
/// ([`MAX_BURST`]), 1024 for the frames the impairment stages hold (a few hundred
/// microseconds' worth) and for control frames, and the transmit backlog
/// ([`TX_BACKLOG`]: frames the port refused, sent at the next iteration).
pub const RESERVED_MBUFS: usize =
    1024 + dpdk::DEFAULT_CACHE as usize + 2 * dpdk::STASH + 2 * MAX_BURST + 1024 + TX_BACKLOG;

/// Payload bytes of a full segment (MSS 1448: a 1500-byte MTU less IPv4, TCP and the
/// timestamp option), which is what one buffer of a send or receive queue holds.
const SEG_BYTES: u32 = 1448;

/// The EAL, one started port with one queue pair per core, and its mbuf pool.
pub struct Net {
    eal: Eal,
    port: Port,
    pool: Mempool,
    mbufs: u32,
    queues: u16,
    clock: Clock,
    /// The port's MAC address.
    pub mac: [u8; 6],
    /// weir's IPv4 address ([`NetArgs::ip`]).
    pub ip: Ipv4Addr,
    /// weir's IPv6 address ([`NetArgs::ip6`]).
    pub ip6: Ipv6Addr,
    /// The port computes TX checksums (the pipeline leaves them to it).
    pub tx_csum: bool,
    /// The port's MTU (`--mtu`, or what the device was set to); TCP's follows it.
    pub mtu: u16,
    impair: Option<(ImpairConfig, Option<u64>)>,
}

impl Net {
    /// Starts the EAL (`eal`, or the embedded default: net_tap `args.tap_iface`,
    /// `--no-pci`, `--no-huge` without hugepages), the first port the EAL probed, and a
    /// pool of `args.mbufs` mbufs for it.
    pub fn open(prog: &str, eal: Option<Vec<String>>, args: &NetArgs) -> Result<Net> {
        Net::open_queues(prog, eal, args, 1)
    }

    /// [`Net::open`] with `queues` queue pairs, one per lcore (the embedded default gives
    /// the EAL that many; given EAL options must). Flows spread over the queues by the
    /// port's RSS; a port without RSS puts every flow on queue 0, which is warned of
    /// ([`Port::queue_spread_warning`]).
    pub fn open_queues(
        prog: &str,
        eal: Option<Vec<String>>,
        args: &NetArgs,
        queues: u16,
    ) -> Result<Net> {
        let queues = queues.max(1);
        let eal_argv = eal
            .unwrap_or_else(|| eal_args::default_eal(prog, &args.tap_iface, usize::from(queues)));
        let eal = Eal::init(&eal_argv).context("starting DPDK (EAL)")?;
        let lcores = eal.worker_lcores().len() + 1;
        if lcores < usize::from(queues) {
            bail!(
                "--queues {queues} needs {queues} lcores but the EAL has {lcores}: pass -l 0-{} in the EAL options",
                queues - 1
            );
        }
        let port_id = *eal.ports().first().ok_or_else(|| {
            anyhow!("no Ethernet port was probed: pass a device in the EAL options (--vdev=net_tap0 for a tap)")
        })?;
        let pool = rx_pool(&eal, port_id, "weir_net", args.mbufs, args.mtu)?;
        let port_cfg = PortConfig {
            rx_queues: queues,
            tx_queues: queues,
            mtu: args.mtu,
            ..PortConfig::default()
        };
        let mut port = Port::configure(&eal, port_id, pool, &port_cfg)
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
            None => port.mtu().unwrap_or(1500),
        };
        // A frame the TX stage duplicates or holds must be complete before it is copied
        // (a copy carries no offload request), so impaired transmits are checksummed in
        // software by the stack.
        let tx_csum = port.tx_csum_caps().ipv4_tcp() && args.impair.is_none();
        Ok(Net {
            eal,
            port,
            pool,
            mbufs: args.mbufs,
            queues,
            clock: Clock::new(&eal),
            mac,
            ip: args.ip,
            ip6: args.ip6,
            tx_csum,
            mtu,
            impair: args.impair,
        })
    }

    /// Sizes `tcp` to the pool, so that no load can take the mbufs the port and the
    /// frames need. The stack bounds each connection's send and receive queues
    /// ([`TcpConfig::snd_buf`], [`TcpConfig::snd_slices`], [`TcpConfig::rxq_slices`]) and
    /// the core's out-of-order data, but not the sum over connections: with more
    /// connections than the pool holds at full queues, queues fill the pool and then no
    /// frame can be built (no data, retransmission or ACK) and the RX ring cannot be
    /// refilled, so every connection stalls. So: each core gets an equal share of the
    /// pool (one per queue); out-of-order data gets a quarter of a share less
    /// [`RESERVED_MBUFS`], each connection's queues are counted in buffers of one full
    /// segment (and capped there), and `max_conns` (default: as many as fit) is the
    /// size of each core's connection table. Returns the number of connections that fit
    /// on one core.
    pub fn size_tcp(&self, tcp: &mut TcpConfig, max_conns: Option<usize>) -> Result<usize> {
        let share = self.mbufs as usize / usize::from(self.queues);
        let usable = share.saturating_sub(RESERVED_MBUFS);
        tcp.ooo_core_slices = usable / 4;
        tcp.ooo_core_bytes = tcp.ooo_core_slices * SEG_BYTES as usize;
        tcp.snd_slices = tcp.snd_slices.min(tcp.snd_buf.div_ceil(SEG_BYTES) as usize);
        // Twice the full-segment count: room for the short segments of small writes.
        tcp.rxq_slices = tcp
            .rxq_slices
            .min(2 * tcp.rcv_buf.div_ceil(SEG_BYTES) as usize);
        let per_conn = tcp.snd_slices + tcp.rxq_slices;
        let fit = (usable - tcp.ooo_core_slices) / per_conn.max(1);
        if fit == 0 {
            bail!(
                "--mbufs {} is too few: one connection's queues need {per_conn} mbufs beyond the {RESERVED_MBUFS} the port and the frames keep and a quarter for out-of-order data, on each of the {} cores",
                self.mbufs,
                self.queues
            );
        }
        tcp.max_conns = match max_conns {
            Some(n) if n > fit => {
                tracing::warn!(
                    "{n} connections at full queues would need more than a core's share of the {} mbufs of the pool: {fit} fit (raise --mbufs)",
                    self.mbufs
                );
                n
            }
            Some(n) => n,
            None => fit,
        };
        Ok(fit)
    }

    /// A pipeline configuration for this port: its addresses, GRO on (defaults), `tcp`,
    /// the ports to listen on with Linux's ACK policy.
    pub fn pipeline_config(&self, tcp: TcpConfig, listen: &[u16]) -> PipelineConfig {
        PipelineConfig {
            local: LocalAddrs::new(self.mac, Some(self.ip), Some(self.ip6)),
            gro: Some(GroConfig::default()),
            tcp: TcpConfig {
                mtu: self.mtu,
                ..tcp
            },
            listen: listen.iter().map(|p| (*p, AckPolicy::linux())).collect(),
            tx_csum_offload: self.tx_csum,
        }
    }

    /// The port's first queue pair, its transmit pool and the impairment stages.
    pub fn link(&self) -> Result<Link> {
        self.link_on(0)
    }

    /// Queue pair `queue` ([`Net::open_queues`]), its transmit pool and its own
    /// impairment stages (seeded apart from the other queues').
    pub fn link_on(&self, queue: u16) -> Result<Link> {
        let stage = |dir: u64| {
            self.impair.map(|(cfg, seed)| {
                let seed = seed.unwrap_or(0x5eed) ^ dir ^ (u64::from(queue) << 8);
                Impairment::<Mbuf>::new(cfg, seed)
            })
        };
        Ok(Link {
            rx: self.port.rx_queue(queue)?,
            tx: self.port.tx_queue(queue)?,
            pool: StashPool::new(self.pool.for_port(self.port.id())),
            mempool: self.pool,
            clock: self.clock,
            impair_rx: stage(0),
            impair_tx: stage(1),
            tx_packets: 0,
            mbufs_in_use_peak: 0,
            capture: None,
            backlog: TxBacklog::new(TX_BACKLOG),
        })
    }

    /// The EAL (for what needs it after the port: `--pcap`'s capture).
    pub fn eal(&self) -> Eal {
        self.eal
    }

    /// The port's id.
    pub fn port_id(&self) -> u16 {
        self.port.id()
    }

    /// Queue pairs of the port ([`Net::open_queues`]).
    pub fn queues(&self) -> u16 {
        self.queues
    }

    /// Mbufs of the pool in use now.
    pub fn mbufs_in_use(&self) -> u64 {
        self.pool.in_use() as u64
    }

    /// Closes the port (which returns the mbufs its RX ring held) after `link` is gone,
    /// and returns the mbufs still in use: 0 unless something leaked. Drop everything
    /// else that holds mbufs (the pipeline) first.
    pub fn close(self, link: Link) -> Result<u64> {
        drop(link);
        self.close_port()
    }

    /// [`Net::close`] once every [`Link`] is gone (dropped by the cores that held them).
    pub fn close_port(self) -> Result<u64> {
        self.port.close().context("closing the port")?;
        Ok(self.pool.in_use() as u64)
    }
}

/// One queue pair of the port, with an impairment stage on each direction when asked.
pub struct Link {
    rx: PortRxQueue,
    tx: PortTxQueue,
    pool: StashPool,
    mempool: Mempool,
    clock: Clock,
    impair_rx: Option<Impairment<Mbuf>>,
    impair_tx: Option<Impairment<Mbuf>>,
    /// Frames the port took.
    pub tx_packets: u64,
    /// The most mbufs [`Link::note_pool`] saw in use.
    pub mbufs_in_use_peak: u64,
    capture: Option<CoreCapture>,
    /// What the port refused, sent first at the next call ([`TxBacklog`]); it counts the
    /// frames dropped past it and its peak ([`Link::stats`]).
    backlog: TxBacklog<Mbuf>,
}

impl Link {
    /// The clock's reading.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The clock's reading and the TSC count it was taken from (one read, for a loop
    /// that also counts its busy cycles).
    pub fn now_and_cycles(&self) -> (Instant, u64) {
        let t = Clock::cycles();
        (self.clock.instant_at(t), t)
    }

    /// TSC cycles in ns.
    pub fn cycles_to_ns(&self, cycles: u64) -> u64 {
        self.clock.cycles_to_ns(cycles)
    }

    /// Where the pipeline builds its frames and `Tcp::send` copies data into.
    pub fn pool(&mut self) -> &mut StashPool {
        &mut self.pool
    }

    /// Captures what this link receives from and hands to the port (`--pcap`): the
    /// frames on the wire, before the receive stage and after the transmit stage.
    pub fn set_capture(&mut self, capture: CoreCapture) {
        self.capture = Some(capture);
    }

    /// Receives a burst into `rx`: what the port has, through the receive stage (which
    /// then hands on what is due at `now`). Returns the frames in `rx`.
    pub fn rx_burst(&mut self, now: Instant, rx: &mut Burst<Mbuf>) -> usize {
        self.rx.rx_burst(rx);
        if let Some(cap) = self.capture.as_mut() {
            cap.rx(rx.iter());
        }
        if let Some(imp) = self.impair_rx.as_mut() {
            let pool = self.mempool;
            for b in rx.drain(..) {
                imp.push_with(now, b, |m| copy_mbuf(pool, m), corrupt_mbuf);
            }
            while !rx.is_full() {
                match imp.pop_ready(now) {
                    Some(b) => rx.push(b),
                    None => break,
                }
            }
        }
        rx.len()
    }

    /// Transmits `out` through the transmit stage (which sends what is due at `now`:
    /// call it every iteration, with an empty burst too), leaving `out` empty; frames the
    /// port refuses wait in the link's backlog ([`TxBacklog`], [`TX_BACKLOG`] frames) and
    /// go first at the next call; past the backlog they are freed and counted
    /// ([`LinkStats::tx_dropped`]).
    pub fn tx_burst(&mut self, now: Instant, out: &mut Burst<Mbuf>) {
        if let Some(imp) = self.impair_tx.as_mut() {
            let pool = self.mempool;
            for mut b in out.drain(..) {
                // The frame as it leaves the NIC, so a copy or a corruption sees it whole.
                b.complete_tx_checksums();
                imp.push_with(now, b, |m| copy_mbuf(pool, m), corrupt_mbuf);
            }
            while !out.is_full() {
                match imp.pop_ready(now) {
                    Some(b) => out.push(b),
                    None => break,
                }
            }
        }
        if out.is_empty() && self.backlog.is_empty() {
            return;
        }
        if let Some(cap) = self.capture.as_mut() {
            cap.tx(out.iter());
        }
        self.tx_packets += self.backlog.send(&mut self.tx, out) as u64;
    }

    /// Frees what the backlog still holds (a loop that stops after its last flushes),
    /// counting it as dropped.
    pub fn drop_held(&mut self) {
        self.backlog.clear();
    }

    /// What the link did so far: the two impairment stages' counters (zeros without
    /// `--impair`) and the transmit counts.
    pub fn stats(&self) -> LinkStats {
        let s = |i: &Option<Impairment<Mbuf>>| i.as_ref().map(|i| i.stats()).unwrap_or_default();
        LinkStats {
            impair_rx: s(&self.impair_rx),
            impair_tx: s(&self.impair_tx),
            tx_packets: self.tx_packets,
            tx_dropped: self.backlog.dropped,
            mbufs_in_use_peak: self.mbufs_in_use_peak,
            tx_backlog_peak: self.backlog.peak as u64,
        }
    }

    /// Notes how many mbufs of the pool are in use (a walk over the pool's caches: call
    /// it now and then, not per burst), for [`LinkStats::mbufs_in_use_peak`].
    pub fn note_pool(&mut self) {
        self.mbufs_in_use_peak = self.mbufs_in_use_peak.max(self.mempool.in_use() as u64);
    }

    /// Frames the transmit stage holds (delayed, not yet sent) and the backlog holds
    /// (refused by the port, to go at the next call).
    pub fn tx_held(&self) -> usize {
        self.impair_tx.as_ref().map_or(0, |i| i.len()) + self.backlog.len()
    }
}

/// A [`Link`]'s counters ([`Link::stats`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct LinkStats {
    /// The receive stage's counters.
    pub impair_rx: ImpairStats,
    /// The transmit stage's counters.
    pub impair_tx: ImpairStats,
    /// Frames the port took.
    pub tx_packets: u64,
    /// Frames the port refused with the backlog full ([`TxBacklog`]): dropped.
    pub tx_dropped: u64,
    /// The most mbufs seen in use ([`Link::note_pool`]).
    pub mbufs_in_use_peak: u64,
    /// The most frames the transmit backlog held at once.
    pub tx_backlog_peak: u64,
}

impl LinkStats {
    /// Adds another queue's counters (the peak is the pool's, so the larger one).
    pub fn merge(&mut self, o: &LinkStats) {
        for (a, b) in [
            (&mut self.impair_rx, &o.impair_rx),
            (&mut self.impair_tx, &o.impair_tx),
        ] {
            a.offered += b.offered;
            a.dropped += b.dropped;
            a.duplicated += b.duplicated;
            a.reordered += b.reordered;
            a.corrupted += b.corrupted;
            a.overflow += b.overflow;
            a.delivered += b.delivered;
        }
        self.tx_packets += o.tx_packets;
        self.tx_dropped += o.tx_dropped;
        self.mbufs_in_use_peak = self.mbufs_in_use_peak.max(o.mbufs_in_use_peak);
        self.tx_backlog_peak = self.tx_backlog_peak.max(o.tx_backlog_peak);
    }
}

/// A copy of `m` from `pool` (the duplicate the impairment delivers), or `None` when the
/// pool is empty. Its RX checksum verdicts are unknown: the stack verifies it itself.
pub fn copy_mbuf(pool: Mempool, m: &Mbuf) -> Option<Mbuf> {
    let mut c = pool.alloc_len(m.data().len())?;
    c.data_mut().copy_from_slice(m.data());
    c.set_port(m.port().unwrap_or(0));
    Some(c)
}

/// Changes one byte past the Ethernet header (so IPv4's or TCP's checksum must catch it)
/// and forgets the NIC's checksum verdicts, as a frame damaged on the wire would look to
/// a NIC that did not check it.
pub fn corrupt_mbuf(m: &mut Mbuf, r: u64) -> bool {
    let d = m.data_mut();
    if d.len() <= 14 {
        return false;
    }
    let i = 14 + (r as usize) % (d.len() - 14);
    d[i] ^= 1 + ((r >> 32) % 255) as u8;
    m.clear_rx_checksum();
    true
}

/// How often an unanswered ARP request or neighbour solicitation is repeated (Linux's
/// `retrans_time_ms`, 1 s, is for a table entry; an open waiting on it asks more often).
pub const RESOLVE_EVERY: Duration = Duration::from_millis(200);

/// Resolves one next hop's MAC address for an active open, by ARP for IPv4 (RFC 826) or
/// neighbour discovery for IPv6 (RFC 4861 §7.2); the stack makes no requests of its own.
/// Sans-IO: [`Resolver::poll_tx`] builds a broadcast request (a multicast solicitation)
/// every [`RESOLVE_EVERY`] until [`Resolver::handle_rx`] sees the answer; `timeout` after
/// the first it gives up ([`Resolver::gave_up`]). The frames stay where they are for the
/// pipeline (which answers the peer's own requests for our address).
#[derive(Debug, Clone)]
pub struct Resolver {
    mac: [u8; 6],
    local: IpAddr,
    target: IpAddr,
    found: Option<[u8; 6]>,
    next: Option<Instant>,
    deadline: Option<Instant>,
    timeout: Duration,
    /// Requests sent.
    pub requests: u64,
}

/// ICMPv6 length of a solicitation with its source link-layer address option.
const NS_LEN: usize = icmp::ND_HEADER_LEN + 8;

impl Resolver {
    /// Resolves `target` for a port with `mac` and the address `local` (of the same
    /// family), giving up `timeout` after the first request.
    pub fn new(mac: [u8; 6], local: IpAddr, target: IpAddr, timeout: Duration) -> Self {
        Resolver {
            mac,
            local,
            target,
            found: None,
            next: None,
            deadline: None,
            timeout,
            requests: 0,
        }
    }

    /// The target's MAC address, once an answer (or the target's own request for our
    /// address: RFC 826's merge, RFC 4861 §7.2.3) named it.
    pub fn mac(&self) -> Option<[u8; 6]> {
        self.found
    }

    /// `true` when `timeout` passed without an answer.
    pub fn gave_up(&self, now: Instant) -> bool {
        self.found.is_none() && self.deadline.is_some_and(|d| now >= d)
    }

    /// Looks at every frame of a received burst for an answer from the target.
    pub fn handle_rx<B: PacketBuf>(&mut self, rx: &[B]) {
        if self.found.is_some() {
            return;
        }
        for b in rx {
            let mac = match (self.local, self.target) {
                (IpAddr::V4(l), IpAddr::V4(t)) => arp_sender(b.data(), l, t),
                (IpAddr::V6(l), IpAddr::V6(t)) => nd_sender(b.data(), l, t),
                _ => None,
            };
            if let Some(mac) = mac.filter(|m| !ethernet::is_group(m)) {
                self.found = Some(mac);
                return;
            }
        }
    }

    /// Appends a request to `out` when one is due (the first at once). Returns whether it
    /// did.
    pub fn poll_tx<P: BufPool>(
        &mut self,
        now: Instant,
        pool: &mut P,
        out: &mut Burst<P::Buf>,
    ) -> bool {
        if self.found.is_some() || out.is_full() || self.next.is_some_and(|t| now < t) {
            return false;
        }
        let len = match self.target {
            IpAddr::V4(_) => ethernet::MIN_FRAME_LEN,
            IpAddr::V6(_) => ethernet::HEADER_LEN + ipv6::HEADER_LEN + NS_LEN,
        };
        let Some(mut b) = pool.alloc(len) else {
            return false;
        };
        let built = match (self.local, self.target) {
            (IpAddr::V4(l), IpAddr::V4(t)) => emit_arp_request(b.data_mut(), self.mac, l, t),
            (IpAddr::V6(l), IpAddr::V6(t)) => emit_solicitation(b.data_mut(), self.mac, l, t),
            _ => false,
        };
        if !built {
            return false;
        }
        out.push(b);
        self.requests += 1;
        self.next = Some(now + RESOLVE_EVERY);
        self.deadline.get_or_insert(now + self.timeout);
        true
    }
}

/// A broadcast ARP request for `target` from `(mac, ip)` (RFC 826 "Packet generation"),
/// padded to the minimum frame.
fn emit_arp_request(d: &mut [u8], mac: [u8; 6], ip: Ipv4Addr, target: Ipv4Addr) -> bool {
    let Some(body) = d.get_mut(ethernet::HEADER_LEN..ethernet::HEADER_LEN + arp::PACKET_LEN) else {
        return false;
    };
    arp::Repr {
        operation: arp::OP_REQUEST,
        sender_mac: mac,
        sender_ip: ip,
        target_mac: [0; 6],
        target_ip: target,
    }
    .emit(&mut arp::Packet::new_unchecked(body));
    d[ethernet::HEADER_LEN + arp::PACKET_LEN..].fill(0);
    ethernet::emit_header(d, ethernet::BROADCAST, mac, None, ethernet::ethertype::ARP);
    true
}

/// The sender's MAC when `frame` is an ARP reply from `target`, or `target`'s request for
/// our address `ip`.
fn arp_sender(frame: &[u8], ip: Ipv4Addr, target: Ipv4Addr) -> Option<[u8; 6]> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    if eth.ethertype() != ethernet::ethertype::ARP {
        return None;
    }
    let p = arp::Packet::new_checked(eth.payload()).ok()?;
    let r = arp::Repr::parse(&p).ok()?;
    let ours = r.operation == arp::OP_REPLY || r.target_ip == ip;
    (ours && r.sender_ip == target).then_some(r.sender_mac)
}

/// A neighbour solicitation for `target` from `(mac, ip)` to its solicited-node multicast
/// address, with our link-layer address (RFC 4861 §4.3, §7.2.2: hop limit 255).
fn emit_solicitation(d: &mut [u8], mac: [u8; 6], ip: Ipv6Addr, target: Ipv6Addr) -> bool {
    let (src, target) = (ip.octets(), target.octets());
    let dst = ipv6::solicited_node(&target);
    let l3 = ethernet::HEADER_LEN;
    let l4 = l3 + ipv6::HEADER_LEN;
    if d.len() < l4 + NS_LEN {
        return false;
    }
    ethernet::emit_header(
        d,
        ipv6::multicast_mac(&dst),
        mac,
        None,
        ethernet::ethertype::IPV6,
    );
    ipv6::emit_header(
        &mut d[l3..l4],
        src,
        dst,
        protocol::ICMPV6,
        NS_LEN as u16,
        255,
    );
    let msg = &mut d[l4..l4 + NS_LEN];
    msg.fill(0);
    msg[icmp::ND_HEADER_LEN] = icmp::ND_OPT_SOURCE_LL;
    msg[icmp::ND_HEADER_LEN + 1] = 1;
    msg[icmp::ND_HEADER_LEN + 2..].copy_from_slice(&mac);
    let mut p = icmp::Packet::new_unchecked(msg);
    p.set_type_code(icmp::V6_NEIGHBOR_SOLICIT, 0);
    p.set_nd(0, target);
    p.fill_checksum(checksum::pseudo_v6(
        src,
        dst,
        protocol::ICMPV6,
        NS_LEN as u32,
    ));
    true
}

/// The target's MAC when `frame` is a valid neighbour advertisement for `target` (its
/// target link-layer address, else the frame's source), or `target`'s solicitation for
/// our address `ip` (its source link-layer address). RFC 4861 §7.1: hop limit 255, code
/// 0, a correct checksum.
fn nd_sender(frame: &[u8], ip: Ipv6Addr, target: Ipv6Addr) -> Option<[u8; 6]> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    if eth.ethertype() != ethernet::ethertype::IPV6 {
        return None;
    }
    let v6 = ipv6::Packet::new_checked(eth.payload()).ok()?;
    if v6.next_header() != protocol::ICMPV6 || v6.hop_limit() != 255 {
        return None;
    }
    let body = v6.payload();
    let m = icmp::Packet::new_checked_nd(body).ok()?;
    let pseudo = checksum::pseudo_v6(
        v6.src_addr(),
        v6.dst_addr(),
        protocol::ICMPV6,
        body.len() as u32,
    );
    if m.code() != 0 || !m.verify_checksum(pseudo) {
        return None;
    }
    let opts = m.nd_options();
    match m.msg_type() {
        icmp::V6_NEIGHBOR_ADVERT if m.nd_target() == target.octets() => Some(
            icmp::nd_lladdr_option(opts, icmp::ND_OPT_TARGET_LL)
                .ok()?
                .unwrap_or(eth.src_addr()),
        ),
        icmp::V6_NEIGHBOR_SOLICIT
            if m.nd_target() == ip.octets() && v6.src_addr() == target.octets() =>
        {
            icmp::nd_lladdr_option(opts, icmp::ND_OPT_SOURCE_LL).ok()?
        }
        _ => None,
    }
}

/// The `--stats-json` object of a program on [`Net`]: weir-sink's counters
/// ([`crate::report::stats_json`], the send side's among them), the transmit stage's
/// (`impairment_tx`), the link's transmit counts and `extra`'s fields.
pub fn report_json(s: &Stats, link: &LinkStats, mbufs_in_use_at_exit: u64, extra: Value) -> Value {
    let mut s = s.clone();
    let tx = link.impair_tx;
    s.impair = link.impair_rx;
    s.lp.tx_packets = link.tx_packets;
    s.lp.tx_dropped = link.tx_dropped;
    s.lp.tx_backlog_peak = link.tx_backlog_peak;
    let mut v = crate::report::stats_json(&s);
    let more = json!({
        "impairment_tx": {
            "offered": tx.offered, "dropped": tx.dropped, "duplicated": tx.duplicated,
            "reordered": tx.reordered, "corrupted": tx.corrupted, "overflow": tx.overflow,
            "delivered": tx.delivered,
        },
        "mbufs_in_use_at_exit": mbufs_in_use_at_exit,
        "mbufs_in_use_peak": link.mbufs_in_use_peak,
    });
    if let (Value::Object(m), Value::Object(a), Value::Object(b)) = (&mut v, more, extra) {
        m.extend(a);
        m.extend(b);
    }
    v
}

/// A seed for ISNs and SYN cookies from the OS's randomness (RFC 6528 wants them
/// unpredictable).
pub fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    u64::from_le_bytes(b) ^ u64::from(std::process::id())
}

/// Writes `v` to `path` (pretty JSON and a newline).
pub fn write_json(path: &std::path::Path, v: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(v)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use stack::mem::{VecBuf, VecPool};

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const PEER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    fn arp_frame(op: u16, sender: ([u8; 6], Ipv4Addr), target_ip: Ipv4Addr) -> VecBuf {
        let mut f = vec![0u8; ethernet::MIN_FRAME_LEN];
        ethernet::emit_header(&mut f, MAC, sender.0, None, ethernet::ethertype::ARP);
        arp::Repr {
            operation: op,
            sender_mac: sender.0,
            sender_ip: sender.1,
            target_mac: if op == arp::OP_REPLY { MAC } else { [0; 6] },
            target_ip,
        }
        .emit(&mut arp::Packet::new_unchecked(
            &mut f[ethernet::HEADER_LEN..],
        ));
        VecBuf::from_vec(f)
    }

    #[test]
    fn resolver_sends_a_broadcast_request_rfc826_and_repeats_it() {
        let mut r = Resolver::new(MAC, IP.into(), PEER.into(), Duration::from_secs(1));
        let mut pool = VecPool::new(8, 2048);
        let mut out: Burst<VecBuf> = Burst::new();
        let t0 = Instant::from_nanos(1_000);
        assert!(r.poll_tx(t0, &mut pool, &mut out));
        assert!(!r.poll_tx(t0 + Duration::from_millis(100), &mut pool, &mut out));
        let f = out[0].data();
        let eth = ethernet::Frame::new_checked(f).unwrap();
        assert_eq!(eth.dst_addr(), ethernet::BROADCAST);
        assert_eq!(eth.src_addr(), MAC);
        let p = arp::Packet::new_checked(eth.payload()).unwrap();
        let q = arp::Repr::parse(&p).unwrap();
        assert_eq!(q.operation, arp::OP_REQUEST);
        assert_eq!((q.sender_mac, q.sender_ip, q.target_ip), (MAC, IP, PEER));
        assert!(r.poll_tx(t0 + RESOLVE_EVERY, &mut pool, &mut out));
        assert_eq!(r.requests, 2);
        assert!(!r.gave_up(t0 + Duration::from_millis(999)));
        assert!(r.gave_up(t0 + Duration::from_secs(1)));
    }

    #[test]
    fn resolver_learns_the_targets_mac_from_its_reply_only() {
        let mut r = Resolver::new(MAC, IP.into(), PEER.into(), Duration::from_secs(1));
        let other = Ipv4Addr::new(198, 18, 0, 9);
        r.handle_rx(&[
            arp_frame(arp::OP_REPLY, ([2, 0, 0, 0, 0, 9], other), IP),
            // A request from the target for someone else names its MAC but is not ours.
            arp_frame(arp::OP_REQUEST, (PEER_MAC, PEER), other),
            // A group sender address is never learned.
            arp_frame(arp::OP_REPLY, ([0x01, 0, 0x5e, 0, 0, 1], PEER), IP),
        ]);
        assert_eq!(r.mac(), None);
        r.handle_rx(&[arp_frame(arp::OP_REPLY, (PEER_MAC, PEER), IP)]);
        assert_eq!(r.mac(), Some(PEER_MAC));
        let mut pool = VecPool::new(8, 2048);
        let mut out: Burst<VecBuf> = Burst::new();
        assert!(
            !r.poll_tx(Instant::ZERO, &mut pool, &mut out),
            "no request once resolved"
        );
        assert!(!r.gave_up(Instant::from_nanos(u64::MAX)));
    }

    const IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
    const PEER6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);

    #[test]
    fn resolver_solicits_a_neighbour_rfc4861_and_weirs_own_parser_answers_it() {
        let mut r = Resolver::new(MAC, IP6.into(), PEER6.into(), Duration::from_secs(1));
        let mut pool = VecPool::new(8, 2048);
        let mut out: Burst<VecBuf> = Burst::new();
        assert!(r.poll_tx(Instant::ZERO, &mut pool, &mut out));
        let ns = out.pop().unwrap();
        let dst = ipv6::solicited_node(&PEER6.octets());
        let eth = ethernet::Frame::new_checked(ns.data()).unwrap();
        assert_eq!(eth.dst_addr(), ipv6::multicast_mac(&dst));
        // The peer's side: the stack's parser takes it as a solicitation for its address
        // (checksum, hop limit, option checked) and the stack's advertisement answers it.
        let peer = LocalAddrs::new(PEER_MAC, None, Some(PEER6));
        let mut parsed = stack::wire::Parsed::Drop(stack::wire::DropReason::TruncatedEthernet);
        stack::wire::parse_into(ns.data(), Default::default(), &peer, &mut parsed);
        let stack::wire::Parsed::NeighborSolicit(req) = parsed else {
            panic!("not taken as a solicitation: {parsed:?}");
        };
        assert_eq!(
            (req.src_ip, req.target, req.source_ll),
            (IP6, PEER6, Some(MAC))
        );
        let mut na = vec![0u8; 128];
        let n = stack::wire::emit_neighbor_advert(&req, PEER_MAC, &mut na);
        na.truncate(n);
        r.handle_rx(&[VecBuf::from_vec(na.clone())]);
        assert_eq!(r.mac(), Some(PEER_MAC));
        // A damaged advertisement is not believed.
        let mut r = Resolver::new(MAC, IP6.into(), PEER6.into(), Duration::from_secs(1));
        let last = na.len() - 1;
        na[last] ^= 1;
        r.handle_rx(&[VecBuf::from_vec(na)]);
        assert_eq!(r.mac(), None);
    }

    #[test]
    fn resolver_takes_the_targets_own_request_for_our_address() {
        // RFC 826: the receiver of a request merges the sender's pair into its table.
        let mut r = Resolver::new(MAC, IP.into(), PEER.into(), Duration::from_secs(1));
        r.handle_rx(&[arp_frame(arp::OP_REQUEST, (PEER_MAC, PEER), IP)]);
        assert_eq!(r.mac(), Some(PEER_MAC));
    }
}
