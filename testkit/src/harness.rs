//! The fuzz harnesses, with their invariants. The fuzz targets in `fuzz/` call
//! [`parse_one`] and [`pipeline`] on libFuzzer's bytes; `stack/tests/fuzz_regressions.rs`
//! replays the kept inputs (and a seeded random sweep) through the same functions, so a
//! crash found by fuzzing is a failing `cargo test` until it is fixed.
//!
//! [`pipeline`] decodes its bytes with `arbitrary` into an [`Input`]: either *chaos* (any
//! sequence of built, corrupted and raw frames from a handful of peers, time steps, reads,
//! closes and aborts) or *honest* (the harness plays one correct TCP sender, with
//! reordering, duplication, loss and retransmission decided by the input, plus noise from
//! other peers). Both run through a [`Pipeline`] on a virtual clock with small tables and
//! check after every step:
//! - counters add up: every received frame was parsed and counted (passed on or dropped
//!   under a reason), every TCP segment entered GRO, and GRO's `segments_in` equals
//!   `segments_out` plus what it holds;
//! - every bound holds: connections, half-open entries, out-of-order bytes per connection
//!   and per core, GRO runs, and receive buffers held by the stack;
//! - every TCP frame weir transmits parses, checksums included, from the peer's side;
//! - honest mode: the bytes the application read are a prefix of the sender's stream, and
//!   after a final repair phase (the sender retransmits from `rcv_nxt` in order) all of it.

use std::collections::HashMap;

use arbitrary::{Arbitrary, Unstructured};

use stack::ack::AckPolicy;
use stack::buf::{ChecksumStatus, PacketBuf, RxChecksum};
use stack::driver::Burst;
use stack::flow::FlowKey;
use stack::gro::{FlushReason, GroConfig};
use stack::mem::{VecBuf, VecPool};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::seq::SeqNumber;
use stack::tcp::{ConnId, Event, State, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::{parse, parse_into, Parsed, TcpFlags, TcpMeta, TcpOptions, Timestamp};

use crate::frames::{self, local, Peer, CLOSED_PORT};

/// Replies the pipeline may hold (its private `CTL_QUEUE`): each echo request keeps its
/// buffer until the reply is built.
const PIPELINE_CTL_QUEUE: usize = 32;

// ---- parse ----------------------------------------------------------------------------

/// The checksum verdicts a NIC may attach, chosen by one input byte.
pub fn verdict(b: u8) -> RxChecksum {
    let s = |x: u8| match x % 3 {
        0 => ChecksumStatus::Unknown,
        1 => ChecksumStatus::Good,
        _ => ChecksumStatus::Bad,
    };
    RxChecksum {
        ip: s(b),
        l4: s(b / 3),
    }
}

/// The `parse` target: the first byte picks the NIC's checksum verdicts, the rest is the
/// frame. Checks that a result never points outside the frame and that every field a
/// later stage trusts is within its documented range.
pub fn parse_one(data: &[u8]) {
    let (cs, frame) = match data.split_first() {
        Some((v, rest)) => (verdict(*v), rest),
        None => (RxChecksum::default(), data),
    };
    let l = local();
    let p = parse(frame, cs, &l);
    check_parsed(&p, frame, cs);
    // parse_into over a dirty slot (a previous TCP result) gives the same answer.
    static DIRTY: std::sync::OnceLock<Parsed> = std::sync::OnceLock::new();
    let mut slot = *DIRTY.get_or_init(|| {
        let syn = frames::Peer::v4(1, 40000)
            .seg(1, 2, TcpFlags::SYN)
            .to_vec(b"");
        parse(&syn, RxChecksum::default(), &local())
    });
    parse_into(frame, cs, &l, &mut slot);
    assert_eq!(slot, p, "parse_into disagrees with parse");
}

fn check_parsed(p: &Parsed, frame: &[u8], cs: RxChecksum) {
    match p {
        Parsed::Tcp(m) => {
            let end = usize::from(m.payload_off) + usize::from(m.payload_len);
            assert!(
                end <= frame.len(),
                "payload {end} past frame {}",
                frame.len()
            );
            assert!(
                (20..=60).contains(&m.header_len) && m.header_len % 4 == 0,
                "header_len {}",
                m.header_len
            );
            assert!(usize::from(m.payload_off) >= 14 + 20 + usize::from(m.header_len));
            assert_eq!(m.option_bytes().len(), usize::from(m.header_len) - 20);
            if let Some(at) = m.tsval_at {
                let at = usize::from(at);
                let ob = m.option_bytes();
                assert!(at + 8 <= ob.len(), "tsval_at {at} past options");
                let tsval = u32::from_be_bytes(ob[at..at + 4].try_into().unwrap());
                assert_eq!(Some(tsval), m.opts.timestamp.map(|t| t.tsval));
            }
            assert!(m.opts.wscale.is_none_or(|w| w <= 14));
            assert_ne!(m.opts.mss, Some(0));
            assert!(usize::from(m.opts.sack_count) <= stack::wire::MAX_SACK_BLOCKS);
            let f = m.flags;
            assert!(f.intersects(TcpFlags(0x3f)), "no-flag segment passed");
            assert!(!(f.contains(TcpFlags::SYN) && f.intersects(TcpFlags::FIN | TcpFlags::RST)));
            assert!(m.dst_mac == frames::OUR_MAC);
            // A NIC's "bad" verdict drops the segment (IPv6 has no header checksum, so its
            // IP verdict is ignored).
            assert!(cs.l4 != ChecksumStatus::Bad && (m.flow.v6 || cs.ip != ChecksumStatus::Bad));
        }
        Parsed::IcmpEcho(e) => {
            let end = usize::from(e.data_off) + usize::from(e.data_len);
            assert!(end <= frame.len(), "echo data past frame");
        }
        Parsed::ArpRequest(_) | Parsed::NeighborSolicit(_) | Parsed::Drop(_) => {}
    }
}

// ---- pipeline: configuration --------------------------------------------------------------

/// Table sizes and policies, kept small so the bounds are reached.
#[derive(Arbitrary, Debug, Clone)]
pub struct Knobs {
    max_conns: u8,
    max_half_open: u8,
    gro: Option<GroKnobs>,
    ooo_conn: u8,
    ooo_core: u8,
    ooo_slices: u8,
    rxq_slices: u8,
    ctl_queue: u8,
    synack_retries: u8,
    rcv_buf: u8,
    policy: u8,
    tx_pool: u8,
}

/// GRO settings.
#[derive(Arbitrary, Debug, Clone)]
pub struct GroKnobs {
    flush_us: u8,
    max_flows: u8,
    max_segs: u8,
}

/// The limits a run must stay within.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// Connections.
    pub max_conns: usize,
    /// Half-open entries.
    pub max_half_open: usize,
    /// Out-of-order bytes per connection.
    pub ooo_conn: u32,
    /// Out-of-order bytes per core.
    pub ooo_core: usize,
    /// Out-of-order slices per core.
    pub ooo_slices: usize,
    /// Receive-queue slices per connection.
    pub rxq_slices: usize,
    /// GRO runs held (0 without GRO).
    pub gro_flows: usize,
    /// Segments per GRO run.
    pub gro_segs: usize,
    /// GRO's `flush_ns`.
    pub flush: Duration,
    /// GRO's `busy_hold_ns`: how long runs may be held while bursts come back full.
    pub busy_hold: Duration,
    /// Transmit buffers.
    pub tx_pool: usize,
}

impl Bounds {
    /// The bounds `cfg` promises (with a transmit pool of `tx_pool` buffers).
    pub fn of(cfg: &PipelineConfig, tx_pool: usize) -> Self {
        let g = cfg.gro.map(GroConfig::clamped);
        Bounds {
            max_conns: cfg.tcp.max_conns,
            max_half_open: cfg.tcp.max_half_open,
            ooo_conn: cfg.tcp.ooo_conn_bytes,
            ooo_core: cfg.tcp.ooo_core_bytes,
            ooo_slices: cfg.tcp.ooo_core_slices,
            rxq_slices: cfg.tcp.rxq_slices,
            gro_flows: g.map_or(0, |g| g.max_flows),
            gro_segs: g.map_or(0, |g| usize::from(g.max_segs)),
            flush: g.map_or(Duration::ZERO, |g| g.flush_ns),
            busy_hold: g.map_or(Duration::ZERO, |g| g.busy_hold_ns),
            tx_pool,
        }
    }

    /// Receive buffers the stack may hold at once: full GRO runs, the out-of-order pool,
    /// every connection's receive queue and the echo requests awaiting replies.
    pub fn rx_buffers(&self) -> usize {
        self.gro_flows * self.gro_segs
            + self.ooo_slices
            + self.max_conns * self.rxq_slices
            + PIPELINE_CTL_QUEUE
    }
}

impl Knobs {
    /// The pipeline configuration and its bounds.
    pub fn config(&self) -> (PipelineConfig, Bounds) {
        let policy = match self.policy % 4 {
            0 => AckPolicy::linux(),
            1 => AckPolicy::linux().with_quickack_psh_mss(false),
            2 => AckPolicy::every(1 + u16::from(self.policy / 4) % 4),
            _ => AckPolicy::delay(Duration::from_millis(1 + u64::from(self.policy / 4))),
        };
        let tcp = TcpConfig {
            max_conns: 1 + usize::from(self.max_conns % 4),
            max_half_open: 1 + usize::from(self.max_half_open % 4),
            rcv_buf: 1024 * (1 + u32::from(self.rcv_buf)),
            ooo_conn_bytes: 256 + 256 * u32::from(self.ooo_conn),
            ooo_core_bytes: 512 + 512 * usize::from(self.ooo_core),
            ooo_core_slices: 1 + usize::from(self.ooo_slices % 64),
            rxq_slices: 1 + usize::from(self.rxq_slices % 64),
            ctl_queue: 1 + usize::from(self.ctl_queue % 16),
            synack_retries: self.synack_retries % 6,
            challenge_ack_limit: 10,
            ..TcpConfig::default()
        };
        let gro = self.gro.as_ref().map(|g| GroConfig {
            flush_ns: Duration::from_micros(u64::from(g.flush_us % 128) * 8),
            // The spare top bit turns on Linux's hold while backlogged (full bursts).
            busy_hold_ns: Duration::from_micros(if g.flush_us >= 128 { 1_000 } else { 0 }),
            max_flows: 1 + usize::from(g.max_flows % 4),
            max_segs: 1 + u16::from(g.max_segs % 64),
            max_bytes: 65_535,
            hold_histogram: false,
        });
        let cfg = PipelineConfig {
            local: local(),
            gro,
            tcp,
            listen: vec![(frames::PORT, policy)],
            tx_csum_offload: false,
        };
        let b = Bounds::of(&cfg, 1 + usize::from(self.tx_pool % 64));
        (cfg, b)
    }
}

// ---- pipeline: the simulated host -----------------------------------------------------------

/// What the harness learned about a flow from weir's transmissions.
#[derive(Clone, Copy, Debug, Default)]
pub struct Track {
    /// weir's sequence number after its SYN (ISS + 1), once a SYN-ACK was seen.
    pub our_nxt: Option<SeqNumber>,
    /// The last acknowledgment number weir sent (its `rcv_nxt`).
    pub acked: Option<SeqNumber>,
    /// The last window field weir sent.
    pub window: u16,
    /// The window scale weir offered in its SYN-ACK.
    pub wscale: Option<u8>,
    /// The last TSval weir sent (for the peer to echo).
    pub tsval: Option<u32>,
    /// RSTs weir sent on this flow.
    pub rsts: u32,
}

/// A pipeline on a virtual clock with a NIC-like receive pool, the application's side
/// (events, reads, closes) and the invariant checks.
pub struct Sim {
    /// The pipeline under test.
    pub p: Pipeline<VecBuf>,
    /// The bounds it must keep.
    pub b: Bounds,
    /// The pool received frames are adopted into, as a NIC's mempool.
    pub rx_pool: VecPool,
    /// The pool `poll_tx` builds from.
    pub tx_pool: VecPool,
    /// The virtual clock.
    pub now: Instant,
    burst: Burst<VecBuf>,
    /// Live connections, in the order they opened.
    pub conns: Vec<ConnId>,
    /// Bytes each connection's application has read.
    pub read: HashMap<ConnId, u64>,
    /// Per-flow facts learned from weir's transmissions (keyed as weir sees the flow).
    pub track: HashMap<FlowKey, Track>,
    /// Frames the receive pool had no buffer for (a NIC would drop them).
    pub nic_drops: u64,
    /// Bytes read by the application, all connections.
    pub app_bytes: u64,
    /// Every TCP segment weir sent since the last [`Sim::take_sent`].
    pub sent: Vec<TcpMeta>,
    /// Connections that were reset.
    pub resets: Vec<ConnId>,
    /// When set, only transmitted frames to these TCP ports (untagged IPv4) are parsed and
    /// learned from; the rest are dropped unread (floods, where parsing every SYN-ACK would
    /// cost more than the test).
    pub watch_ports: Option<Vec<u16>>,
    /// The largest values seen by [`Sim::check`].
    pub peak: Peak,
    /// Whether the last burst handed to the pipeline was full (a backlogged queue).
    pub last_burst_full: bool,
}

/// Largest table sizes and buffer counts seen.
#[derive(Clone, Copy, Debug, Default)]
pub struct Peak {
    /// Connections.
    pub conns: usize,
    /// Half-open entries.
    pub half_open: usize,
    /// Out-of-order bytes on the core.
    pub ooo_bytes: usize,
    /// GRO runs held.
    pub gro_runs: usize,
    /// Receive buffers in use.
    pub rx_in_use: usize,
}

impl Sim {
    /// A fresh pipeline for `knobs`, at t = 1 s.
    pub fn new(knobs: &Knobs) -> Self {
        let (cfg, b) = knobs.config();
        Self::with_config(cfg, b)
    }

    /// A fresh pipeline for an explicit configuration.
    pub fn with_config(cfg: PipelineConfig, b: Bounds) -> Self {
        let p = Pipeline::new(cfg).expect("pipeline");
        let cap = b.rx_buffers() + stack::driver::MAX_BURST;
        Sim {
            p,
            rx_pool: VecPool::new(cap, 1 << 16),
            tx_pool: VecPool::new(b.tx_pool, 2048),
            b,
            now: Instant::from_nanos(1_000_000_000),
            burst: Burst::new(),
            conns: Vec::new(),
            read: HashMap::new(),
            track: HashMap::new(),
            nic_drops: 0,
            app_bytes: 0,
            sent: Vec::new(),
            resets: Vec::new(),
            watch_ports: None,
            peak: Peak::default(),
            last_burst_full: false,
        }
    }

    /// Queues a received frame for the next burst (handing over the burst when full).
    pub fn rx(&mut self, frame: Vec<u8>, cs: RxChecksum) {
        if self.burst.is_full() {
            self.run_burst();
        }
        match self.rx_pool.adopt(frame) {
            Some(b) => self.burst.push(b.with_rx_checksum(cs)),
            None => self.nic_drops += 1,
        }
    }

    /// Hands the pending burst to the pipeline, then lets the application and the
    /// transmit side run, and checks every invariant.
    pub fn run_burst(&mut self) {
        // An empty burst too, as weir-sink's loop does: it says the queue is drained.
        self.last_burst_full = self.burst.is_full();
        self.p.handle_rx_burst(self.now, &mut self.burst);
        assert!(self.burst.is_empty(), "handle_rx_burst left frames");
        self.after_input();
    }

    /// Moves the clock forward by `d` and fires what is due.
    pub fn advance(&mut self, d: Duration) {
        self.run_burst();
        self.now += d;
        self.p.handle_timeout(self.now);
        self.after_input();
    }

    fn after_input(&mut self) {
        self.events();
        self.transmit();
        self.check();
    }

    /// Drains the application events.
    pub fn events(&mut self) {
        let evs: Vec<Event> = self.p.tcp().events().collect();
        for e in evs {
            match e {
                Event::Opened(id) => {
                    assert!(!self.conns.contains(&id), "opened twice: {id:?}");
                    self.conns.push(id);
                }
                Event::Readable(id) | Event::PeerClosed(id) | Event::Writable(id) => {
                    assert!(self.conns.contains(&id), "event for unknown {id:?}");
                }
                Event::Closed(id) => self.conns.retain(|c| *c != id),
                Event::Reset(id) => {
                    self.conns.retain(|c| *c != id);
                    self.resets.push(id);
                }
            }
        }
        // Connections that vanished without an event (reaped) are dropped from the list.
        let live: Vec<ConnId> = self
            .conns
            .iter()
            .copied()
            .filter(|id| self.p.tcp().info(*id).is_some())
            .collect();
        self.conns = live;
    }

    /// Runs `poll_tx` until nothing is due, parsing every TCP frame from the peer's side.
    pub fn transmit(&mut self) {
        for _ in 0..1024 {
            let mut out: Burst<VecBuf> = Burst::new();
            let n = self.p.poll_tx(self.now, &mut self.tx_pool, &mut out);
            assert_eq!(n, out.len());
            if n == 0 {
                return;
            }
            for b in out {
                if let Some(w) = &self.watch_ports {
                    let d = b.data();
                    let port = d
                        .get(36..38)
                        .map_or(0, |p| u16::from_be_bytes([p[0], p[1]]));
                    if !w.contains(&port) {
                        continue;
                    }
                }
                if let Some(m) = frames::peer_view(b.data()) {
                    self.learn(&m);
                    self.sent.push(m);
                }
            }
        }
        panic!("poll_tx never ran dry");
    }

    fn learn(&mut self, m: &TcpMeta) {
        let f = m.flow;
        let key = FlowKey {
            src: f.dst,
            dst: f.src,
            sport: f.dport,
            dport: f.sport,
            vlan: f.vlan,
            v6: f.v6,
        };
        let t = self.track.entry(key).or_default();
        if m.flags.contains(TcpFlags::RST) {
            t.rsts += 1;
            return;
        }
        if m.flags.contains(TcpFlags::SYN) {
            t.our_nxt = Some(m.seq + 1);
            t.wscale = m.opts.wscale;
        }
        if m.flags.contains(TcpFlags::ACK) {
            t.acked = Some(m.ack);
            t.window = m.window;
        }
        if let Some(ts) = m.opts.timestamp {
            t.tsval = Some(ts.tsval);
        }
    }

    /// Takes the TCP segments weir sent since the last call.
    pub fn take_sent(&mut self) -> Vec<TcpMeta> {
        std::mem::take(&mut self.sent)
    }

    /// The application reads up to `max` bytes (all when `max` is 0) of connection `id`;
    /// returns them.
    pub fn read(&mut self, id: ConnId, max: usize) -> Vec<u8> {
        let max = if max == 0 { usize::MAX } else { max };
        let mut got = Vec::new();
        let r = self.p.tcp().recv(id, |sl| {
            for s in sl {
                let b = s.bytes();
                let t = b.len().min(max - got.len());
                got.extend_from_slice(&b[..t]);
                if got.len() == max {
                    break;
                }
            }
            got.len()
        });
        if let Ok(n) = r {
            assert_eq!(n, got.len(), "recv consumed a different count");
            *self.read.entry(id).or_default() += n as u64;
            self.app_bytes += n as u64;
        }
        self.after_input();
        got
    }

    /// Checks the accounting and every bound.
    pub fn check(&mut self) {
        let st = self.p.stats();
        assert_eq!(
            st.pipeline.rx_packets,
            st.parse.total() + st.pipeline.nonlinear_drops,
            "a received frame was neither passed on nor dropped with a reason"
        );
        let g = &st.gro;
        if self.b.gro_flows > 0 {
            assert_eq!(st.parse.tcp, g.segments_in, "TCP segments that missed GRO");
            assert_eq!(
                g.segments_in,
                g.segments_out + g.held_segments,
                "GRO lost or invented segments"
            );
            assert_eq!(
                g.units_out,
                FlushReason::ALL.iter().map(|r| g.flushed(*r)).sum::<u64>(),
                "a GRO unit left without a flush reason"
            );
            assert!(st.gro_held_runs as usize <= self.b.gro_flows, "GRO runs");
            // A full burst means a backlogged queue, where `busy_hold_ns` may hold runs.
            let backlogged = self.last_burst_full && self.b.busy_hold > Duration::ZERO;
            if self.b.flush == Duration::ZERO && self.burst.is_empty() && !backlogged {
                assert_eq!(
                    st.gro_held_runs, 0,
                    "flush_ns = 0 held a run past the burst"
                );
            }
        }
        let pk = &mut self.peak;
        let tcp = self.p.tcp();
        pk.conns = pk.conns.max(tcp.conn_count());
        pk.half_open = pk.half_open.max(tcp.half_open_count());
        pk.ooo_bytes = pk.ooo_bytes.max(tcp.ooo_bytes());
        pk.gro_runs = pk.gro_runs.max(st.gro_held_runs as usize);
        pk.rx_in_use = pk.rx_in_use.max(self.rx_pool.in_use());
        assert!(
            tcp.conn_count() <= self.b.max_conns,
            "connection table bound"
        );
        assert!(
            tcp.half_open_count() <= self.b.max_half_open,
            "half-open bound"
        );
        assert!(tcp.ooo_bytes() <= self.b.ooo_core, "per-core OOO bound");
        assert!(
            st.tcp.bytes_in_order >= self.app_bytes,
            "read more than received"
        );
        for id in &self.conns {
            if let Some(i) = tcp.info(*id) {
                assert!(i.ooo_bytes <= self.b.ooo_conn, "per-connection OOO bound");
            }
        }
        if self.burst.is_empty() {
            assert!(
                self.rx_pool.in_use() <= self.b.rx_buffers(),
                "stack holds {} receive buffers, bound {}",
                self.rx_pool.in_use(),
                self.b.rx_buffers()
            );
        }
        assert_eq!(self.tx_pool.in_use(), 0, "transmit buffers leaked");
    }
}

// ---- pipeline: inputs -----------------------------------------------------------------------

/// The whole input of the `pipeline` target.
#[derive(Arbitrary, Debug)]
pub enum Input {
    /// Anything goes, from up to six peers.
    Chaos {
        /// The configuration.
        knobs: Knobs,
        /// The steps.
        ops: Vec<Op>,
    },
    /// One correct sender (plus noise from other peers): delivery must be exact.
    Honest {
        /// The configuration.
        knobs: Knobs,
        /// The sender.
        spec: HonestSpec,
    },
}

/// How far the clock moves.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Delay {
    /// Microseconds.
    Micros(u16),
    /// Milliseconds.
    Millis(u16),
    /// Seconds.
    Secs(u8),
}

impl Delay {
    fn get(self) -> Duration {
        match self {
            Delay::Micros(n) => Duration::from_micros(u64::from(n)),
            Delay::Millis(n) => Duration::from_millis(u64::from(n)),
            Delay::Secs(n) => Duration::from_secs(u64::from(n)),
        }
    }
}

/// One step of a chaos run.
#[derive(Arbitrary, Debug)]
#[allow(missing_docs)] // the variants' fields are the fuzzer's choices, named for what they pick
pub enum Op {
    /// A well-formed segment with arbitrary fields.
    Seg(SegSpec),
    /// A segment with one byte changed, with the given checksum verdicts.
    Corrupt {
        seg: SegSpec,
        at: u16,
        xor: u8,
        verdict: u8,
    },
    /// Raw bytes as a frame.
    Raw { bytes: Vec<u8>, verdict: u8 },
    /// An ARP request for weir.
    Arp(u8),
    /// A ping.
    Ping { peer: u8, v6: bool, len: u8 },
    /// A neighbor solicitation.
    Solicit(u8),
    /// Hand the burst over now.
    EndBurst,
    /// Move the clock.
    Advance(Delay),
    /// The application reads (0 = everything).
    Read { conn: u8, max: u16 },
    /// The application closes.
    Close(u8),
    /// The application aborts.
    Abort(u8),
    /// The driver flushes GRO.
    FlushGro,
    /// A whole handshake from a peer (SYN, then the ACK of weir's SYN-ACK).
    Connect {
        peer: u8,
        v6: bool,
        vlan: bool,
        syn: OptSpec,
    },
    /// `n` back-to-back segments of `len` bytes from a peer, from `start` relative to what
    /// weir expects (GRO material).
    Train {
        peer: u8,
        v6: bool,
        vlan: bool,
        start: i16,
        len: u16,
        n: u8,
        ts: bool,
    },
}

/// A segment from one of the peers.
#[derive(Arbitrary, Debug, Clone)]
pub struct SegSpec {
    peer: u8,
    v6: bool,
    vlan: bool,
    closed_port: bool,
    seq: SeqSel,
    ack: AckSel,
    flags: FlagSel,
    window: u16,
    opts: OptSpec,
    len: u16,
}

/// The sequence number, relative to what weir expects or absolute.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum SeqSel {
    /// Near what weir expects.
    Next(i16),
    /// Anywhere relative to what weir expects.
    Far(i32),
    /// Absolute.
    Abs(u32),
}

/// The acknowledgment number, relative to weir's next sequence number or absolute.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum AckSel {
    /// Near weir's next sequence number.
    Ours(i8),
    /// Absolute.
    Abs(u32),
}

/// The flags.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum FlagSel {
    /// SYN.
    Syn,
    /// ACK.
    Ack,
    /// ACK+PSH.
    AckPsh,
    /// ACK+FIN.
    AckFin,
    /// RST.
    Rst,
    /// RST+ACK.
    RstAck,
    /// SYN+ACK.
    SynAck,
    /// Any flags byte.
    Raw(u8),
}

impl FlagSel {
    fn get(self) -> TcpFlags {
        match self {
            FlagSel::Syn => TcpFlags::SYN,
            FlagSel::Ack => TcpFlags::ACK,
            FlagSel::AckPsh => TcpFlags::ACK | TcpFlags::PSH,
            FlagSel::AckFin => TcpFlags::ACK | TcpFlags::FIN,
            FlagSel::Rst => TcpFlags::RST,
            FlagSel::RstAck => TcpFlags::RST | TcpFlags::ACK,
            FlagSel::SynAck => TcpFlags::SYN | TcpFlags::ACK,
            FlagSel::Raw(f) => TcpFlags(f),
        }
    }
}

/// The options.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct OptSpec {
    mss: Option<u16>,
    ws: Option<u8>,
    sack_perm: bool,
    ts: TsSel,
    sack: u8,
}

/// The timestamp option.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum TsSel {
    /// No timestamp option.
    None,
    /// The peer's clock now, echoing weir's last TSval.
    Fresh,
    /// The peer's clock shifted by this much.
    Shifted(i32),
    /// This TSval and TSecr.
    Abs(u32, u32),
}

/// The six chaos peers: IPv4 or IPv6, ports 40000 + i.
fn chaos_peer(i: u8, v6: bool, vlan: bool, closed: bool) -> Peer {
    let i = u32::from(i % 6);
    let mut p = if v6 {
        Peer::v6(i, 40000 + i as u16)
    } else {
        Peer::v4(i, 40000 + i as u16)
    };
    if vlan {
        p.vlan = Some(7);
    }
    if closed {
        p.dport = CLOSED_PORT;
    }
    p
}

/// A deterministic initial sequence number per flow.
fn peer_isn(f: &FlowKey) -> u32 {
    f.hash32().wrapping_mul(2_654_435_761)
}

/// The peer's timestamp clock: milliseconds plus a per-flow offset.
fn peer_clock(now: Instant, f: &FlowKey) -> u32 {
    ((now.as_nanos() / 1_000_000) as u32).wrapping_add(f.hash32())
}

impl Sim {
    /// Builds the frame `s` describes, using what was learned about its flow.
    pub fn build(&self, s: &SegSpec) -> Vec<u8> {
        let peer = chaos_peer(s.peer, s.v6, s.vlan, s.closed_port);
        let flow = peer.flow();
        let t = self.track.get(&flow).copied().unwrap_or_default();
        let next = t.acked.map_or(peer_isn(&flow), |a| a.get());
        let seq = match s.seq {
            SeqSel::Next(d) => next.wrapping_add(d as i32 as u32),
            SeqSel::Far(d) => next.wrapping_add(d as u32),
            SeqSel::Abs(a) => a,
        };
        let ack = match s.ack {
            AckSel::Ours(d) => t
                .our_nxt
                .map_or(0, |o| o.get().wrapping_add(d as i32 as u32)),
            AckSel::Abs(a) => a,
        };
        let mut f = peer.seg(seq, ack, s.flags.get());
        f.window = s.window;
        let clock = peer_clock(self.now, &flow);
        let mut o = TcpOptions {
            mss: s.opts.mss,
            wscale: s.opts.ws,
            sack_permitted: s.opts.sack_perm,
            ..TcpOptions::default()
        };
        o.timestamp = match s.opts.ts {
            TsSel::None => None,
            TsSel::Fresh => Some(Timestamp {
                tsval: clock,
                tsecr: t.tsval.unwrap_or(0),
            }),
            TsSel::Shifted(d) => Some(Timestamp {
                tsval: clock.wrapping_add(d as u32),
                tsecr: t.tsval.unwrap_or(0),
            }),
            TsSel::Abs(v, e) => Some(Timestamp { tsval: v, tsecr: e }),
        };
        let blocks = usize::from(s.opts.sack % 5).min(if o.timestamp.is_some() { 3 } else { 4 });
        let blocks = if o.mss.is_some() || o.wscale.is_some() || o.sack_permitted {
            0
        } else {
            blocks
        };
        for (i, b) in o.sack.iter_mut().take(blocks).enumerate() {
            let l = next.wrapping_add(1000 * i as u32 + 1);
            b.left = SeqNumber(l);
            b.right = SeqNumber(l.wrapping_add(500));
        }
        o.sack_count = blocks as u8;
        f.opts = o;
        let len = usize::from(s.len % 2048);
        let base = seq.wrapping_sub(peer_isn(&flow));
        let payload: Vec<u8> = (0..len)
            .map(|i| frames::stream_byte(s.peer, u64::from(base) + i as u64))
            .collect();
        f.to_vec(&payload)
    }

    /// Runs one chaos step.
    pub fn step(&mut self, op: &Op) {
        match op {
            Op::Seg(s) => {
                let f = self.build(s);
                self.rx(f, RxChecksum::default());
            }
            Op::Corrupt {
                seg,
                at,
                xor,
                verdict: v,
            } => {
                let mut f = self.build(seg);
                if !f.is_empty() {
                    let i = usize::from(*at) % f.len();
                    f[i] ^= xor;
                }
                self.rx(f, verdict(*v));
            }
            Op::Raw { bytes, verdict: v } => self.rx(bytes.clone(), verdict(*v)),
            Op::Arp(i) => self.rx(
                frames::arp_request(frames::peer_ip4(u32::from(*i % 6)), frames::OUR_IP4),
                RxChecksum::default(),
            ),
            Op::Ping { peer, v6, len } => {
                let data = vec![0x5a; usize::from(*len)];
                let i = u32::from(*peer % 6);
                let f = if *v6 {
                    frames::echo6(frames::peer_ip6(i), &data)
                } else {
                    frames::echo4(frames::peer_ip4(i), &data)
                };
                self.rx(f, RxChecksum::default());
            }
            Op::Solicit(i) => self.rx(
                frames::neighbor_solicit(frames::peer_ip6(u32::from(*i % 6)), frames::OUR_IP6, 255),
                RxChecksum::default(),
            ),
            Op::EndBurst => self.run_burst(),
            Op::Advance(d) => self.advance(d.get()),
            Op::Read { conn, max } => {
                // The pending burst first: it may end the connection picked.
                self.run_burst();
                if let Some(id) = self.pick(*conn) {
                    self.read(id, usize::from(*max));
                }
            }
            Op::Close(c) => {
                // The pending burst first: it may end the connection picked.
                self.run_burst();
                if let Some(id) = self.pick(*c) {
                    let now = self.now;
                    assert!(self.p.tcp().close(now, id).is_ok());
                    self.after_input();
                }
            }
            Op::Abort(c) => {
                // The pending burst first: it may end the connection picked.
                self.run_burst();
                if let Some(id) = self.pick(*c) {
                    assert!(self.p.tcp().abort(id).is_ok());
                    self.after_input();
                }
            }
            Op::Connect {
                peer,
                v6,
                vlan,
                syn,
            } => {
                let mut s = SegSpec {
                    peer: *peer,
                    v6: *v6,
                    vlan: *vlan,
                    closed_port: false,
                    seq: SeqSel::Next(0),
                    ack: AckSel::Abs(0),
                    flags: FlagSel::Syn,
                    window: 65535,
                    opts: *syn,
                    len: 0,
                };
                let f = self.build(&s);
                self.rx(f, RxChecksum::default());
                self.run_burst();
                s.flags = FlagSel::Ack;
                s.ack = AckSel::Ours(0);
                s.opts = OptSpec {
                    mss: None,
                    ws: None,
                    sack_perm: false,
                    ts: if matches!(syn.ts, TsSel::None) {
                        TsSel::None
                    } else {
                        TsSel::Fresh
                    },
                    sack: 0,
                };
                let f = self.build(&s);
                self.rx(f, RxChecksum::default());
                self.run_burst();
            }
            Op::Train {
                peer,
                v6,
                vlan,
                start,
                len,
                n,
                ts,
            } => {
                let len = 1 + len % 1448;
                for k in 0..(1 + n % 64) {
                    let s = SegSpec {
                        peer: *peer,
                        v6: *v6,
                        vlan: *vlan,
                        closed_port: false,
                        seq: SeqSel::Far(i32::from(*start) + i32::from(k) * i32::from(len)),
                        ack: AckSel::Ours(0),
                        flags: FlagSel::Ack,
                        window: 65535,
                        opts: OptSpec {
                            mss: None,
                            ws: None,
                            sack_perm: false,
                            ts: if *ts { TsSel::Fresh } else { TsSel::None },
                            sack: 0,
                        },
                        len,
                    };
                    let f = self.build(&s);
                    self.rx(f, RxChecksum::default());
                }
            }
            Op::FlushGro => {
                self.run_burst();
                let now = self.now;
                self.p.flush_gro(now);
                assert_eq!(self.p.stats().gro_held_runs, 0);
                self.after_input();
            }
        }
    }

    fn pick(&mut self, i: u8) -> Option<ConnId> {
        self.events();
        debug_assert!(self.burst.is_empty());
        if self.conns.is_empty() {
            return None;
        }
        Some(self.conns[usize::from(i) % self.conns.len()])
    }
}

// ---- honest mode ------------------------------------------------------------------------------

/// One correct sender's choices.
#[derive(Arbitrary, Debug)]
pub struct HonestSpec {
    isn: u32,
    seg_size: u16,
    mss: Option<u16>,
    ws: Option<u8>,
    sack: bool,
    ts: bool,
    ts_start: u32,
    v6: bool,
    vlan: bool,
    seed: u8,
    ops: Vec<HOp>,
}

/// One step of the honest sender (or of the network between it and weir).
#[derive(Arbitrary, Debug)]
#[allow(missing_docs)] // the variants' fields are the fuzzer's choices, named for what they pick
pub enum HOp {
    /// Send the next new segment (within the window weir offered).
    Send { len: u16, psh: bool },
    /// Retransmit bytes already sent, cut anew.
    Resend { off: u16, len: u16 },
    /// The network duplicates a frame in flight.
    Dup(u8),
    /// The network loses a frame in flight.
    Lose(u8),
    /// The network delivers up to `n` frames in flight, in an order `shuffle` picks.
    Deliver { n: u8, shuffle: u8 },
    /// Time passes.
    Advance(Delay),
    /// The application reads (0 = everything).
    Read(u16),
    /// The sender closes (FIN after the last byte sent).
    Fin,
    /// A segment from another peer.
    Noise(SegSpec),
}

/// The most the honest sender sends (keeps a run fast).
const STREAM_MAX: u64 = 256 * 1024;

struct Sender {
    peer: Peer,
    flow: FlowKey,
    base: SeqNumber,
    our_nxt: SeqNumber,
    ts: bool,
    ts_start: u32,
    seed: u8,
    seg_size: u64,
    sent_hi: u64,
    right: u64,
    fin: bool,
    wire: Vec<Vec<u8>>,
    read: Vec<u8>,
    id: Option<ConnId>,
}

impl Sender {
    fn frame(&self, sim: &Sim, off: u64, len: u64, psh: bool, fin: bool) -> Vec<u8> {
        let seq = self.base + off as usize;
        let mut flags = TcpFlags::ACK;
        if psh {
            flags |= TcpFlags::PSH;
        }
        if fin {
            flags |= TcpFlags::FIN;
        }
        let mut f = self.peer.seg(seq.get(), self.our_nxt.get(), flags);
        if self.ts {
            let t = sim.track.get(&self.flow).copied().unwrap_or_default();
            f.opts.timestamp = Some(Timestamp {
                tsval: self
                    .ts_start
                    .wrapping_add((sim.now.as_nanos() / 1_000_000) as u32),
                tsecr: t.tsval.unwrap_or(0),
            });
        }
        let payload: Vec<u8> = (off..off + len)
            .map(|i| frames::stream_byte(self.seed, i))
            .collect();
        f.to_vec(&payload)
    }

    /// Updates the right window edge from what weir sent.
    fn learn(&mut self, sim: &mut Sim) {
        for m in sim.take_sent() {
            if m.flow.dst != self.flow.src || m.flow.dport != self.flow.sport {
                continue;
            }
            assert!(
                !m.flags.contains(TcpFlags::RST),
                "weir reset the honest connection: {m:?}"
            );
            if !m.flags.contains(TcpFlags::ACK) || m.flags.contains(TcpFlags::SYN) {
                continue;
            }
            let off = u64::from(m.ack.get().wrapping_sub(self.base.get()));
            if off > STREAM_MAX + 1 {
                continue;
            }
            let ws = sim
                .track
                .get(&self.flow)
                .and_then(|t| t.wscale)
                .unwrap_or(0);
            self.right = self.right.max(off + (u64::from(m.window) << ws));
        }
    }

    /// The application reads; checks the bytes are the stream's next ones.
    fn read(&mut self, sim: &mut Sim, max: usize) {
        let Some(id) = self.id else { return };
        if sim.p.tcp().info(id).is_none() {
            return;
        }
        let got = sim.read(id, max);
        let at = self.read.len() as u64;
        for (i, b) in got.iter().enumerate() {
            assert_eq!(
                *b,
                frames::stream_byte(self.seed, at + i as u64),
                "byte {} delivered wrong",
                at + i as u64
            );
        }
        self.read.extend_from_slice(&got);
        assert!(
            self.read.len() as u64 <= self.sent_hi,
            "read past what was sent"
        );
        self.learn(sim);
    }

    fn check(&self, sim: &Sim) {
        assert!(
            self.id.is_none_or(|id| !sim.resets.contains(&id)),
            "the honest connection was reset"
        );
    }
}

/// Runs an honest-sender input.
fn honest(knobs: &Knobs, spec: &HonestSpec) -> Summary {
    let mut sim = Sim::new(knobs);
    let mut peer = if spec.v6 {
        Peer::v6(100, 39999)
    } else {
        Peer::v4(100, 39999)
    };
    if spec.vlan {
        peer.vlan = Some(9);
    }
    let flow = peer.flow();
    // Handshake: SYN (retransmitted until answered; the first answer always comes).
    let mut syn = peer.seg(spec.isn, 0, TcpFlags::SYN);
    syn.opts = TcpOptions {
        mss: spec.mss.map(|m| m.max(1)),
        wscale: spec.ws.map(|w| w % 15),
        sack_permitted: spec.sack,
        timestamp: spec.ts.then_some(Timestamp {
            tsval: spec
                .ts_start
                .wrapping_add((sim.now.as_nanos() / 1_000_000) as u32),
            tsecr: 0,
        }),
        ..TcpOptions::default()
    };
    sim.rx(syn.to_vec(b""), RxChecksum::default());
    sim.run_burst();
    let t = sim.track.get(&flow).copied().unwrap_or_default();
    let our_nxt = t.our_nxt.expect("a SYN-ACK for the honest SYN");
    let base = SeqNumber(spec.isn) + 1;
    assert_eq!(t.acked, Some(base), "SYN-ACK acknowledges the SYN");
    let mut s = Sender {
        peer,
        flow,
        base,
        our_nxt,
        ts: spec.ts,
        ts_start: spec.ts_start,
        seed: spec.seed,
        seg_size: 1 + u64::from(spec.seg_size % 1460),
        sent_hi: 0,
        right: u64::from(t.window),
        fin: false,
        wire: Vec::new(),
        read: Vec::new(),
        id: None,
    };
    let ack = s.frame(&sim, 0, 0, false, false);
    sim.rx(ack, RxChecksum::default());
    sim.run_burst();
    s.id = Some(
        sim.p
            .tcp()
            .lookup(&flow)
            .expect("the honest connection is established"),
    );
    sim.take_sent();

    for op in &spec.ops {
        match op {
            HOp::Send { len, psh } => {
                if s.fin || s.sent_hi >= STREAM_MAX {
                    continue;
                }
                let room = s.right.saturating_sub(s.sent_hi);
                let l = (1 + u64::from(*len) % s.seg_size).min(room);
                if l == 0 {
                    continue;
                }
                let f = s.frame(&sim, s.sent_hi, l, *psh, false);
                s.sent_hi += l;
                s.wire.push(f);
            }
            HOp::Resend { off, len } => {
                if s.sent_hi == 0 {
                    continue;
                }
                let o = u64::from(*off) % s.sent_hi;
                let l = (1 + u64::from(*len) % s.seg_size).min(s.sent_hi - o);
                let fin = s.fin && o + l == s.sent_hi;
                let f = s.frame(&sim, o, l, false, fin);
                s.wire.push(f);
            }
            HOp::Dup(i) => {
                if !s.wire.is_empty() {
                    let f = s.wire[usize::from(*i) % s.wire.len()].clone();
                    s.wire.push(f);
                }
            }
            HOp::Lose(i) => {
                if !s.wire.is_empty() {
                    let n = s.wire.len();
                    s.wire.remove(usize::from(*i) % n);
                }
            }
            HOp::Deliver { n, shuffle } => {
                let k = (1 + usize::from(*n % 16)).min(s.wire.len());
                for j in 0..k {
                    let idx = if *shuffle == 0 {
                        0
                    } else {
                        (usize::from(*shuffle) + j * 7) % s.wire.len()
                    };
                    let f = s.wire.remove(idx);
                    sim.rx(f, RxChecksum::default());
                }
                sim.run_burst();
            }
            HOp::Advance(d) => sim.advance(d.get()),
            HOp::Read(max) => {
                sim.run_burst();
                s.read(&mut sim, usize::from(*max));
            }
            HOp::Fin => {
                if !s.fin {
                    s.fin = true;
                    let f = s.frame(&sim, s.sent_hi, 0, false, true);
                    s.wire.push(f);
                }
            }
            HOp::Noise(seg) => {
                // Never the honest flow: chaos peers use other addresses and ports.
                let f = sim.build(seg);
                sim.rx(f, RxChecksum::default());
            }
        }
        s.learn(&mut sim);
        s.check(&sim);
    }

    // Repair: lost frames stay lost; the sender retransmits from rcv_nxt, in order, and
    // the application reads everything. All that was sent must arrive.
    sim.run_burst();
    s.read(&mut sim, 0);
    let rounds = 64 + 2 * (s.sent_hi / 1000) as usize;
    for _ in 0..rounds {
        let Some(info) = s.id.and_then(|id| sim.p.tcp().info(id)) else {
            panic!("the honest connection vanished");
        };
        let rcv = u64::from(info.rcv_nxt.get().wrapping_sub(s.base.get()));
        let fin_done = !s.fin || info.state == State::CloseWait;
        if s.read.len() as u64 == s.sent_hi && rcv >= s.sent_hi && fin_done {
            break;
        }
        let l = (s.sent_hi.saturating_sub(rcv))
            .min(1400)
            .min(u64::from(info.window));
        if l > 0 || (s.fin && rcv == s.sent_hi) {
            let fin = s.fin && rcv + l == s.sent_hi;
            let f = s.frame(&sim, rcv, l, true, fin);
            sim.rx(f, RxChecksum::default());
            sim.run_burst();
        }
        sim.advance(b_flush(&sim) + Duration::from_millis(1));
        s.read(&mut sim, 0);
        s.check(&sim);
    }
    assert_eq!(
        s.read.len() as u64,
        s.sent_hi,
        "not every byte sent was delivered after the repair phase"
    );
    if s.fin {
        let info =
            s.id.and_then(|id| sim.p.tcp().info(id))
                .expect("connection");
        assert_eq!(info.state, State::CloseWait, "the FIN was not taken");
    }
    summary(&sim, true)
}

fn b_flush(sim: &Sim) -> Duration {
    sim.b.flush
}

/// What one input did (for corpus reports).
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    /// Honest mode.
    pub honest: bool,
    /// Connections opened.
    pub conns_opened: u64,
    /// Bytes TCP received in order.
    pub bytes_in_order: u64,
    /// Out-of-order segments queued.
    pub ooo_segments: u64,
    /// Frames received.
    pub frames: u64,
}

/// The `pipeline` target: decodes `data` into an [`Input`] and runs it with every check.
pub fn pipeline(data: &[u8]) -> Summary {
    let u = Unstructured::new(data);
    let Ok(input) = Input::arbitrary_take_rest(u) else {
        return Summary::default();
    };
    run(&input)
}

/// Runs a decoded input.
pub fn run(input: &Input) -> Summary {
    match input {
        Input::Chaos { knobs, ops } => {
            let mut sim = Sim::new(knobs);
            for op in ops.iter().take(4096) {
                sim.step(op);
            }
            sim.run_burst();
            // Shut down: everything held reaches TCP, and the accounting still adds up.
            let now = sim.now;
            sim.p.flush_gro(now);
            sim.after_input();
            let st = sim.p.stats();
            assert_eq!(st.gro.held_segments, 0);
            summary(&sim, false)
        }
        Input::Honest { knobs, spec } => honest(knobs, spec),
    }
}

fn summary(sim: &Sim, honest: bool) -> Summary {
    let st = sim.p.stats();
    Summary {
        honest,
        conns_opened: st.tcp.conns_opened,
        bytes_in_order: st.tcp.bytes_in_order,
        ooo_segments: st.tcp.ooo_segments,
        frames: st.pipeline.rx_packets,
    }
}
