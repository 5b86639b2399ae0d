//! The send-half fuzz harness: weir sends known streams to a hostile peer, and every
//! frame of that peer is the fuzz input's choice. The fuzz target `send` (fuzz/) calls
//! [`send`] on libFuzzer's bytes; `stack/tests/fuzz_regressions.rs` replays the kept
//! inputs and a seeded random sweep through the same function.
//!
//! [`send`] decodes its bytes with `arbitrary` into a [`SendInput`]: a configuration
//! (send buffer and queue bounds, retries, RTO bounds, congestion control, pool sizes),
//! one to three connections (each a passive open through weir's listener or an active
//! `connect`, with the peer's MSS, window scale, SACK-permitted, timestamps and window,
//! and for an active open optionally an ISS just below the 2^32 wrap), then the steps:
//! - the application's calls: `send` (copied), `send_bufs` (zero-copy buffers at an
//!   offset), `shutdown`, `close`, `set_nodelay`, `set_cork`;
//! - the peer's segments, queued in flight and delivered in any order, duplicated or lost:
//!   ACK numbers relative to SND.UNA or SND.NXT (old, beyond what was sent, absolute,
//!   inside a segment), windows (zero, shrinking, opening, huge with the scale), SACK
//!   blocks (outside the window, overlapping, reversed, D-SACK-like, SACKed then not),
//!   timestamps (fresh, stale, far ahead, odd echoes), a FIN, a SYN, no ACK flag, and RSTs
//!   (exact, in the window, outside it);
//! - the loss of weir's frames on their way to the peer;
//! - the virtual clock (fixed steps, or to the next timer: RTO, persist, SWS override);
//! - honest phases: the peer acknowledges what it holds (cumulative ACK and SACK blocks)
//!   and opens its window.
//!
//! After every step the harness checks, and panics with a message naming the rule:
//! - **window**: every data segment (its sequence space, the FIN included, RFC 9293
//!   §3.3.1's SEG.LEN) ends at or below SND.UNA + SND.WND as the peer last advertised it,
//!   with one exception, the zero-window probe of RFC 9293 §3.8.6.1: when that window
//!   is zero, one octet at SND.UNA (data or a FIN) may go. "As the peer last advertised
//!   it" is the harness's own model of the RFC 9293 §3.10.7.4 fifth step: every segment
//!   weir accepted (no drop counter moved) whose ACK is in SND.UNA..=SND.NXT sets the
//!   window (the peer's SEG.SEQ is always weir's RCV.NXT, so SND.WL1/WL2 never refuse an
//!   update); weir's own SND.UNA and SND.WND must equal the model after every segment;
//! - **stream**: every data byte weir puts on the wire lies inside what the application
//!   wrote so far, at its stream offset, and equals the byte written; a FIN comes only
//!   after `shutdown`/`close`, at the end of the stream; SND.NXT is exactly what went on
//!   the wire; no retransmission starts below SND.UNA; a segment's payload and options
//!   fit the peer's MSS (RFC 9293 §3.7.1; at least Linux's `tcp_min_snd_mss` of 48);
//! - **delivery**: the peer holds what reached it (frames the input loses do not), and its
//!   in-order prefix is the written stream's; an ACK that covers bytes the peer never
//!   received (the peer lied) is only possible for bytes weir did send. At the end a final
//!   honest phase runs (no loss, everything acknowledged, the window open, the clock moved
//!   to each timer) and every connection not reset holds the whole stream, and our FIN
//!   after a `shutdown`;
//! - **memory**: the send queue holds exactly the written bytes from SND.UNA on (within
//!   `snd_buf`), unsent exactly those from SND.NXT on; at most `snd_slices` segments
//!   sent and not yet acknowledged (the retransmission queue's capacity); send buffers
//!   handed out by the application's pool and not returned stay within every
//!   connection's `snd_slices` plus one free batch, and all return once the connections
//!   are gone; no transmit or receive buffer is kept;
//! - **the application's calls**: a write takes at most what fits (for `send`, exactly
//!   `min(len, writable_bytes)` while the pool has buffers to spare), fails with
//!   `WriteClosed` after `shutdown`/`close` and `UnknownConnection` once the handle is
//!   gone; an allocation failure is counted only when the pool is empty;
//!   `Event::Writable` comes only with room to write; the RTO stays within its bounds
//!   (RFC 6298 §2.4-2.5);
//! - **wire**: every frame weir transmits parses from the peer's side, checksums
//!   included, is TCP for a known flow, carries timestamps exactly when they were
//!   negotiated (RFC 7323 §3.2), an ACK on every segment but a RST (RFC 9293
//!   §3.10.7.4), and never a SYN after the handshake.
//!
//! Not covered: the peer sends no data (the receive half has the `pipeline` target), GRO
//! is off (every frame is a segment), and RACK-TLP is not wired in the stack yet, so no
//! tail loss probe fires.

use std::collections::VecDeque;
use std::net::SocketAddr;

use arbitrary::{Arbitrary, Unstructured};

use stack::ack::AckPolicy;
use stack::buf::{BufPool, PacketBuf, PayloadChain, PayloadSlice, MAX_CHAIN};
use stack::driver::Burst;
use stack::flow::FlowKey;
use stack::mem::{VecBuf, VecPool};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::seq::SeqNumber;
use stack::tcp::cc::{AckCounting, CcAlgorithm, CcConfig};
use stack::tcp::rtt::RtoConfig;
use stack::tcp::{
    ConnId, ConnInfo, ConnectOpts, DropReason, Event, SackLossDetection, State, TcpConfig, TcpError,
};
use stack::time::{Duration, Instant};
use stack::wire::{SackBlock, TcpFlags, TcpMeta, TcpOptions, Timestamp, MAX_SACK_BLOCKS};

use crate::frames::{self, Peer, OUR_MAC, PEER_MAC};

/// Connections per run.
const MAX_LINKS: usize = 3;
/// Steps per run.
const MAX_OPS: usize = 2048;
/// The most one connection's application writes (keeps a run, and its final phase, short).
const STREAM_MAX: u64 = 48 * 1024;
/// Peer segments in flight at once.
const WIRE_MAX: usize = 256;
/// Rounds of the final honest phase before the harness declares weir stuck.
const FINAL_ROUNDS: usize = 20_000;

// ---- input ---------------------------------------------------------------------------------

/// The whole input of the `send` target ([`SendInput::decode`]).
#[derive(Debug)]
pub struct SendInput {
    /// The configuration.
    pub knobs: SendKnobs,
    /// How many connections: `1 + n_conns % 3`.
    pub n_conns: u8,
    /// The connections (the first `1 + n_conns % 3`).
    pub conns: [ConnSpec; MAX_LINKS],
    /// The steps.
    pub ops: Vec<SOp>,
}

impl SendInput {
    /// The knobs and connections with `arbitrary`, then steps until the bytes run out (at
    /// most 2048). Not `arbitrary`'s `Vec`, whose continuation bit per element
    /// makes random bytes decode into a couple of steps: the seeded sweep feeds random
    /// bytes, and every step should count. `None` when the bytes end before the
    /// connections.
    pub fn decode(data: &[u8]) -> Option<SendInput> {
        let mut u = Unstructured::new(data);
        let knobs = SendKnobs::arbitrary(&mut u).ok()?;
        let n_conns = u8::arbitrary(&mut u).ok()?;
        let conns = <[ConnSpec; MAX_LINKS]>::arbitrary(&mut u).ok()?;
        let mut ops = Vec::new();
        while !u.is_empty() && ops.len() < MAX_OPS {
            match SOp::arbitrary(&mut u) {
                Ok(op) => ops.push(op),
                Err(_) => break,
            }
        }
        Some(SendInput {
            knobs,
            n_conns,
            conns,
            ops,
        })
    }
}

/// weir's configuration, kept small so the bounds are reached.
#[derive(Arbitrary, Debug, Clone, Default)]
#[allow(missing_docs)] // the fields are the fuzzer's choices, named for what they pick
pub struct SendKnobs {
    pub snd_buf: u16,
    pub snd_slices: u8,
    pub max_retries: u8,
    pub fin_retries: u8,
    pub cc: u8,
    pub iw: u8,
    pub min_rto: u8,
    pub app_pool: u8,
    pub tx_pool: u8,
}

/// One connection: how it opens and what the peer offers.
#[derive(Arbitrary, Debug, Clone, Default)]
#[allow(missing_docs)] // the fields are the fuzzer's choices, named for what they pick
pub struct ConnSpec {
    /// `connect` from weir; else the peer connects to weir's listener.
    pub active: bool,
    pub v6: bool,
    pub mss: Option<u16>,
    pub ws: Option<u8>,
    pub sack: bool,
    pub ts: bool,
    pub isn: u32,
    pub window: u16,
    pub ts_start: u32,
    /// Active opens only: weir's ISS is placed `16 * (1 + k)` bytes below the 2^32 wrap
    /// (RFC 6528's ISN follows the clock, which the harness moves).
    pub wrap: Option<u8>,
}

/// One step.
#[derive(Arbitrary, Debug, Clone)]
#[allow(missing_docs)] // the variants' fields are the fuzzer's choices, named for what they pick
pub enum SOp {
    /// `send`: the next `1 + len % 4096` bytes of the connection's stream.
    Write { conn: u8, len: u16 },
    /// `send_bufs`: `1 + n % 8` buffers of `1 + size % 1500` bytes at offset `off % 64`.
    WriteBufs { conn: u8, n: u8, size: u16, off: u8 },
    /// `shutdown`.
    Shutdown(u8),
    /// `close`.
    Close(u8),
    /// `set_nodelay`.
    Nodelay { conn: u8, on: bool },
    /// `set_cork`.
    Cork { conn: u8, on: bool },
    /// The peer queues a segment (delivered by `Deliver`).
    Peer(PeerSpec),
    /// The peer queues a RST.
    Rst { conn: u8, at: RstSel, ack: bool },
    /// The network delivers up to `1 + n % 16` queued segments, in an order `order` picks
    /// (0: oldest first).
    Deliver { n: u8, order: u8 },
    /// The network duplicates a queued segment.
    Dup(u8),
    /// The network loses a queued segment.
    LosePeer(u8),
    /// weir's data frames are lost on the way to the peer by this mask (bit `k % 8` for
    /// the `k`-th; 0: none).
    Loss(u8),
    /// Time passes.
    Advance(Step),
    /// An honest phase: `1 + rounds % 32` rounds of "the peer acknowledges what it holds
    /// with the window open, then `step` passes".
    Honest { rounds: u8, step: Step, window: u16 },
}

/// How far the clock moves.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Step {
    /// Microseconds.
    Micros(u16),
    /// Milliseconds.
    Millis(u16),
    /// Seconds.
    Secs(u8),
    /// To the next timer deadline (at most an hour ahead).
    Timer,
}

/// A peer segment.
#[derive(Arbitrary, Debug, Clone)]
#[allow(missing_docs)] // the fields are the fuzzer's choices, named for what they pick
pub struct PeerSpec {
    pub conn: u8,
    pub kind: SegKind,
    pub ack: AckSel,
    pub window: WndSel,
    /// The first `sack_n % 5` blocks are sent.
    pub sack_n: u8,
    pub sack: [SackSel; MAX_SACK_BLOCKS],
    pub ts: TsSel,
}

/// What else the segment carries.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum SegKind {
    /// A plain ACK.
    Ack,
    /// ACK + FIN (the peer closes).
    Fin,
    /// ACK + SYN (RFC 5961 §4.2: a challenge ACK).
    Syn,
    /// No ACK flag (dropped, RFC 9293 §3.10.7.4).
    NoAck,
    /// ACK + PSH + URG (flags weir must ignore).
    Noise,
}

/// The acknowledgment number.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum AckSel {
    /// SND.UNA + k (negative: old).
    Una(i16),
    /// SND.NXT + k (positive: data never sent, RFC 5961 §5).
    Nxt(i16),
    /// What the peer holds in order (an honest ACK).
    Held,
    /// The end of the k-th most recent data segment weir sent, plus `d`.
    Seg(u8, i8),
    /// SND.UNA - k (far back, wrapping).
    Back(u32),
    /// Absolute.
    Abs(u32),
}

/// The window field.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum WndSel {
    /// Zero.
    Zero,
    /// The raw field (scaled by the negotiated shift).
    Field(u16),
    /// 65535: with a scale of 14, about 1 GiB.
    Max,
    /// The right edge moved by `k` bytes from where the last advertisement put it
    /// (negative: a shrinking window).
    Edge(i32),
    /// The right edge kept where it is.
    Keep,
}

/// One SACK block.
#[derive(Arbitrary, Debug, Clone, Copy)]
#[allow(missing_docs)] // the variants' fields are the fuzzer's choices, named for what they pick
pub enum SackSel {
    /// `[SND.UNA + from, + len)`.
    Rel { from: i32, len: u16 },
    /// `[SND.UNA + from + len, SND.UNA + from)`: reversed.
    Reversed { from: i32, len: u16 },
    /// The k-th island the peer holds above its in-order prefix (an honest block).
    Held(u8),
    /// Exactly the k-th most recent data segment weir sent.
    Seg(u8),
    /// `[SND.NXT + from, + len)`: beyond what was sent.
    Beyond { from: u16, len: u16 },
    /// `[SND.UNA - k, SND.UNA)`: below SND.UNA (a D-SACK of acknowledged data).
    Below(u16),
    /// Absolute.
    Abs { left: u32, right: u32 },
}

/// The timestamp option.
#[derive(Arbitrary, Debug, Clone, Copy)]
#[allow(missing_docs)] // the variants' fields are the fuzzer's choices, named for what they pick
pub enum TsSel {
    /// The peer's clock; TSecr echoes weir's latest TSval.
    Fresh,
    /// Older than the peer's clock by `k` ms (PAWS).
    Stale(u16),
    /// Ahead of the peer's clock (`k` up to 2^30).
    Ahead(u32),
    /// TSecr `back` ms older than weir's latest TSval (an old echo: a long RTT sample).
    OldEcho(u16),
    /// TSecr ahead of weir's clock (an echo from the future).
    FutureEcho(u32),
    /// No timestamp option.
    Omit,
    /// Anything (sent even when timestamps were not negotiated).
    Wild { tsval: u32, tsecr: u32 },
}

/// Where a RST sits.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum RstSel {
    /// At RCV.NXT, which resets (RFC 5961 §3.2), when `gate` is 0; else as
    /// `InWindow(gate)` (so that most runs keep their connections).
    Exact {
        /// 0: at RCV.NXT; else the offset into the window.
        gate: u8,
    },
    /// RCV.NXT + 1 + k: in the window, a challenge ACK.
    InWindow(u16),
    /// RCV.NXT + k (anywhere, mostly outside).
    Far(u32),
}

// ---- the peer's view of one connection ------------------------------------------------------

/// Sorted, disjoint, non-touching ranges of stream offsets.
#[derive(Clone, Debug, Default)]
struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    fn insert(&mut self, a: u64, b: u64) {
        if a >= b {
            return;
        }
        self.0.push((a, b));
        self.0.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(self.0.len());
        for &(l, r) in &self.0 {
            match out.last_mut() {
                Some(last) if l <= last.1 => last.1 = last.1.max(r),
                _ => out.push((l, r)),
            }
        }
        self.0 = out;
    }

    /// The end of the prefix held from offset 0.
    fn prefix(&self) -> u64 {
        match self.0.first() {
            Some(&(0, r)) => r,
            _ => 0,
        }
    }

    /// The ranges above the prefix, highest first.
    fn islands(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter().rev().copied().filter(|&(l, _)| l > 0)
    }
}

/// A queued peer segment: everything but its sequence number, which is weir's RCV.NXT
/// (plus `seq_off`) when it is delivered.
#[derive(Clone, Debug)]
struct PeerSeg {
    link: usize,
    flags: TcpFlags,
    seq_off: u32,
    ack: SeqNumber,
    window: u16,
    opts: TcpOptions,
}

/// One connection, as the harness (the application and the peer) knows it.
struct Link {
    peer: Peer,
    /// The flow as weir sees it (`src` is the peer).
    flow: FlowKey,
    id: ConnId,
    /// weir's ISS: stream offset 0 is ISS + 1.
    iss: SeqNumber,
    seed: u8,
    /// The peer's window shift as weir applies it, and the negotiated options.
    ws: u8,
    sack: bool,
    ts: bool,
    /// The MSS the peer announced (RFC 9293 §3.7.1 defaults without the option).
    peer_mss: u32,
    /// Bytes the application wrote (weir took).
    written: u64,
    /// `shutdown` or `close` was called.
    shut: bool,
    /// The handle is no longer valid (closed or reset).
    gone: bool,
    /// It was reset.
    reset: bool,
    /// What reached the peer.
    held: Ranges,
    fin_held: bool,
    /// The highest data offset weir put on the wire, and whether its FIN went.
    sent_hi: u64,
    fin_sent: bool,
    /// End offsets of original transmissions not yet acknowledged (the retransmission
    /// queue's entries).
    originals: VecDeque<u64>,
    /// Recent data segments weir sent (offset, length), newest last.
    recent: VecDeque<(u64, u32)>,
    /// The window as the peer last advertised it: SND.UNA and SND.WND (scaled).
    una: SeqNumber,
    wnd: u32,
    /// The peer's timestamp clock: its TSval is `ts_base + now in ms`.
    ts_base: u32,
    /// weir's latest TSval.
    weir_ts: u32,
    /// weir's RCV.NXT when last seen (for segments to a connection that is gone).
    rcv_nxt: SeqNumber,
}

impl Link {
    fn seq(&self, off: u64) -> SeqNumber {
        self.iss + 1 + off as usize
    }
    /// The stream offset of `seq` (huge when `seq` is below ISS + 1).
    fn off(&self, seq: SeqNumber) -> u64 {
        u64::from(seq.get().wrapping_sub(self.iss.get().wrapping_add(1)))
    }
    fn ts_now(&self, now: Instant) -> u32 {
        self.ts_base
            .wrapping_add((now.as_nanos() / 1_000_000) as u32)
    }
    /// The honest cumulative ACK: the prefix held, and our FIN after it.
    fn held_ack(&self) -> SeqNumber {
        let p = self.held.prefix();
        let fin = self.fin_held && p == self.written && self.shut;
        self.seq(p) + usize::from(fin)
    }
    fn complete(&self) -> bool {
        self.held.prefix() == self.written && (!self.shut || self.fin_held)
    }
}

/// `a` is before `b` in 32-bit timestamp space (RFC 7323 §5.2).
fn ts_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn synchronized(s: State) -> bool {
    !matches!(s, State::SynSent | State::SynReceived | State::Closed)
}

/// The flow of a frame weir sent, as weir sees it (`src` the peer).
fn reversed(f: &FlowKey) -> FlowKey {
    FlowKey {
        src: f.dst,
        dst: f.src,
        sport: f.dport,
        dport: f.sport,
        vlan: f.vlan,
        v6: f.v6,
    }
}

fn drops_total(st: &stack::tcp::TcpStats) -> u64 {
    DropReason::ALL.iter().map(|r| st.drops(*r)).sum::<u64>() + st.resets_received
}

/// What one run did (for corpus reports and the sweep's totals).
#[derive(Clone, Copy, Debug, Default)]
pub struct SendSummary {
    /// Connections set up.
    pub conns: u64,
    /// Bytes the application wrote.
    pub written: u64,
    /// Bytes the peer held in order at the end.
    pub delivered: u64,
    /// Data segments weir sent (retransmissions included).
    pub data_frames: u64,
    /// Retransmissions, RTO expiries, zero-window probes (weir's counters).
    pub retransmits: u64,
    /// RTO expiries.
    pub rto_timeouts: u64,
    /// Zero-window probes.
    pub window_probes: u64,
    /// Connections reset (by the peer or by weir giving up).
    pub resets: u64,
    /// Of those, by the peer's RST.
    pub peer_resets: u64,
    /// Of those, weir gave up: RTO retries, persist probes or FIN retries spent.
    pub gave_up: u64,
    /// Connections whose final honest phase delivered everything.
    pub completed: u64,
    /// Segments from the peer delivered.
    pub peer_segments: u64,
    /// Fast recoveries entered (duplicate ACKs, SACK or RACK).
    pub fast_recoveries: u64,
    /// RACK-TLP's tail loss probes sent (RFC 8985 §7).
    pub tlp_probes: u64,
    /// RACK's reordering timer expiries (RFC 8985 §6.3).
    pub rack_reorder_timeouts: u64,
}

// ---- the simulated host ---------------------------------------------------------------------

/// A pipeline (GRO off: every frame is a segment) on a virtual clock, its application and
/// a peer per connection, with the checks.
pub struct SendSim {
    p: Pipeline<VecBuf>,
    snd_buf: u32,
    snd_slices: usize,
    max_conns: usize,
    /// The RTO's bounds (RFC 6298 §2.4-2.5).
    rto_bounds: (Duration, Duration),
    rx_pool: VecPool,
    tx_pool: VecPool,
    app_pool: VecPool,
    /// The application pool's capacity.
    app_cap: usize,
    now: Instant,
    links: Vec<Link>,
    wire: Vec<PeerSeg>,
    loss: u8,
    lost_k: u32,
    /// Frames weir sent that belong to no connection yet (the handshakes').
    stray: Vec<TcpMeta>,
    setup: bool,
    sum: SendSummary,
}

impl SendSim {
    /// A fresh pipeline for `k`, at t = 1 s.
    pub fn new(k: &SendKnobs) -> Self {
        let rto = RtoConfig {
            min_rto: Duration::from_millis(1 + u64::from(k.min_rto % 200)),
            max_rto: if k.min_rto >= 200 {
                Duration::from_secs(2)
            } else {
                Duration::from_secs(120)
            },
            ..RtoConfig::default()
        }
        .validate()
        .expect("a valid RTO configuration");
        let cc = CcConfig {
            algorithm: if k.cc & 1 == 0 {
                CcAlgorithm::Cubic
            } else {
                CcAlgorithm::Reno
            },
            counting: match (k.cc >> 1) % 4 {
                0 => AckCounting::Bytes,
                1 => AckCounting::PerAck,
                2 => AckCounting::Abc { l: 1 },
                _ => AckCounting::Abc { l: 2 },
            },
            initial_segments: match k.iw % 4 {
                0 => None,
                _ => Some(1 + u32::from(k.iw / 4) % 10),
            },
            ..CcConfig::default()
        };
        let tcp = TcpConfig {
            max_conns: 4,
            max_half_open: 4,
            rcv_buf: 64 * 1024,
            snd_buf: 256 + u32::from(k.snd_buf),
            snd_slices: 1 + usize::from(k.snd_slices % 64),
            max_retries: 1 + k.max_retries % 15,
            fin_retries: 1 + k.fin_retries % 8,
            rto,
            cc,
            // RACK-TLP (the default) or RFC 6675's DupThresh alone, for SACK peers.
            loss_detection: if k.cc & 8 == 0 {
                SackLossDetection::Rack
            } else {
                SackLossDetection::Sack
            },
            ..TcpConfig::default()
        };
        let (snd_buf, snd_slices, max_conns) = (tcp.snd_buf, tcp.snd_slices, tcp.max_conns);
        let rto_bounds = (tcp.rto.get().min_rto, tcp.rto.get().max_rto);
        let cfg = PipelineConfig {
            local: frames::local(),
            gro: None,
            tcp,
            listen: vec![(frames::PORT, AckPolicy::linux())],
            tx_csum_offload: false,
        };
        let app = if k.app_pool < 16 {
            1 + usize::from(k.app_pool)
        } else {
            4096
        };
        SendSim {
            p: Pipeline::new(cfg).expect("pipeline"),
            snd_buf,
            snd_slices,
            max_conns,
            rto_bounds,
            rx_pool: VecPool::new(64, 1 << 16),
            tx_pool: VecPool::new(1 + usize::from(k.tx_pool % 64), 2048),
            app_pool: VecPool::new(app, 2048),
            app_cap: app,
            now: Instant::from_nanos(1_000_000_000),
            links: Vec::new(),
            wire: Vec::new(),
            loss: 0,
            lost_k: 0,
            stray: Vec::new(),
            setup: true,
            sum: SendSummary::default(),
        }
    }

    // ---- set-up ----

    /// Opens connection `spec` (passive or active), then checks it.
    pub fn open(&mut self, spec: &ConnSpec) {
        let i = self.links.len() as u32;
        let mut peer = if spec.v6 {
            Peer::v6(10 + i, 40000 + i as u16)
        } else {
            Peer::v4(10 + i, 40000 + i as u16)
        };
        let mss = spec.mss.map(|m| m.max(1));
        let ws = spec.ws.map(|w| w % 15);
        let opts = TcpOptions {
            mss,
            wscale: ws,
            sack_permitted: spec.sack,
            timestamp: spec.ts.then_some(Timestamp {
                tsval: spec.ts_start,
                tsecr: 0,
            }),
            ..TcpOptions::default()
        };
        let (id, iss, weir_ts) = if spec.active {
            self.active(&mut peer, spec, opts)
        } else {
            self.passive(&peer, spec, opts)
        };
        let info = self.p.tcp().info(id).expect("the new connection");
        assert_eq!(
            info.state,
            State::Established,
            "the handshake did not establish"
        );
        assert_eq!(
            info.snd_una,
            iss + 1,
            "SND.UNA after the handshake is ISS + 1"
        );
        assert!(
            !info.timestamps || spec.ts,
            "timestamps without the peer's option"
        );
        assert!(
            !info.sack || spec.sack,
            "SACK without the peer's SACK-permitted"
        );
        let scaled = u32::from(spec.window) << info.snd_wscale;
        assert!(
            info.snd_wnd == u32::from(spec.window) || info.snd_wnd == scaled,
            "SND.WND {} after the handshake is not the peer's window {}",
            info.snd_wnd,
            spec.window
        );
        let flow = self.p.tcp().flow(id).expect("flow");
        let default_mss = if spec.v6 { 1220 } else { 536 };
        let ms = self.now.as_nanos() / 1_000_000;
        self.links.push(Link {
            peer,
            flow,
            id,
            iss,
            seed: (i as u8).wrapping_mul(37).wrapping_add(spec.isn as u8),
            ws: info.snd_wscale,
            sack: info.sack,
            ts: info.timestamps,
            peer_mss: u32::from(mss.unwrap_or(default_mss)),
            written: 0,
            shut: false,
            gone: false,
            reset: false,
            held: Ranges::default(),
            fin_held: false,
            sent_hi: 0,
            fin_sent: false,
            originals: VecDeque::new(),
            recent: VecDeque::new(),
            una: info.snd_una,
            wnd: info.snd_wnd,
            ts_base: spec.ts_start.wrapping_add(2).wrapping_sub(ms as u32),
            weir_ts,
            rcv_nxt: info.rcv_nxt,
        });
        self.sum.conns += 1;
        self.check();
    }

    /// The peer's SYN, weir's SYN-ACK, the peer's ACK.
    fn passive(
        &mut self,
        peer: &Peer,
        spec: &ConnSpec,
        opts: TcpOptions,
    ) -> (ConnId, SeqNumber, u32) {
        let mut syn = peer.seg(spec.isn, 0, TcpFlags::SYN);
        syn.window = spec.window;
        syn.opts = opts;
        self.rx_raw(syn.to_vec(b""));
        let flow = peer.flow();
        let sa = self
            .take_stray(&flow)
            .into_iter()
            .find(|m| m.flags == TcpFlags::SYN | TcpFlags::ACK)
            .expect("a SYN-ACK for the peer's SYN");
        assert_eq!(
            sa.ack,
            SeqNumber(spec.isn) + 1,
            "the SYN-ACK acknowledges the SYN"
        );
        let weir_ts = sa.opts.timestamp.map_or(0, |t| t.tsval);
        let mut ack = peer.seg(
            spec.isn.wrapping_add(1),
            sa.seq.get().wrapping_add(1),
            TcpFlags::ACK,
        );
        ack.window = spec.window;
        if spec.ts {
            ack.opts.timestamp = Some(Timestamp {
                tsval: spec.ts_start.wrapping_add(1),
                tsecr: weir_ts,
            });
        }
        self.rx_raw(ack.to_vec(b""));
        let id = self
            .p
            .tcp()
            .lookup(&flow)
            .expect("the passive open is established");
        self.take_stray(&flow);
        (id, sa.seq, weir_ts)
    }

    /// `connect`, weir's SYN, the peer's SYN-ACK, weir's ACK; with `spec.wrap`, a first
    /// SYN measures the ISS and the clock moves so the real one is just below 2^32.
    fn active(
        &mut self,
        peer: &mut Peer,
        spec: &ConnSpec,
        opts: TcpOptions,
    ) -> (ConnId, SeqNumber, u32) {
        let remote = SocketAddr::new(peer.ip, peer.port);
        let local = peer.our_ip();
        let mut co = ConnectOpts::new(OUR_MAC, PEER_MAC);
        if let Some(k) = spec.wrap {
            let id = self
                .p
                .tcp()
                .connect(self.now, local, remote, co)
                .expect("connect");
            let flow = self.p.tcp().flow(id).expect("flow");
            self.transmit();
            let syn = self.take_stray(&flow);
            let iss0 = syn.first().expect("a SYN").seq;
            self.p.tcp().close(self.now, id).expect("close in SYN-SENT");
            self.transmit();
            self.events();
            // RFC 6528: the ISN moves with a 4 µs clock.
            let target = 0u32.wrapping_sub(16 * (1 + u32::from(k)));
            let ticks = u64::from(target.wrapping_sub(iss0.get()));
            self.now += Duration::from_nanos(ticks * 4_000);
            co.local_port = Some(flow.dport);
        }
        let id = self
            .p
            .tcp()
            .connect(self.now, local, remote, co)
            .expect("connect");
        let flow = self.p.tcp().flow(id).expect("flow");
        peer.dport = flow.dport;
        self.transmit();
        let syn = self.take_stray(&flow);
        let syn = *syn.first().expect("weir's SYN");
        assert_eq!(syn.flags, TcpFlags::SYN, "an active open starts with a SYN");
        if spec.wrap.is_some() {
            assert!(
                syn.seq.get() > 0xffff_0000,
                "the ISS was not moved near the wrap"
            );
        }
        let weir_ts = syn.opts.timestamp.map_or(0, |t| t.tsval);
        let mut sa = peer.seg(
            spec.isn,
            syn.seq.get().wrapping_add(1),
            TcpFlags::SYN | TcpFlags::ACK,
        );
        sa.window = spec.window;
        sa.opts = opts;
        if let Some(t) = sa.opts.timestamp.as_mut() {
            t.tsecr = weir_ts;
        }
        self.rx_raw(sa.to_vec(b""));
        let out = self.take_stray(&flow);
        assert!(
            out.iter()
                .any(|m| m.flags == TcpFlags::ACK && m.ack == SeqNumber(spec.isn) + 1),
            "weir did not acknowledge the SYN-ACK: {out:?}"
        );
        let weir_ts = out
            .iter()
            .rev()
            .find_map(|m| m.opts.timestamp)
            .map_or(weir_ts, |t| t.tsval);
        (id, syn.seq, weir_ts)
    }

    /// One frame for the pipeline, outside the model (the handshakes).
    fn rx_raw(&mut self, frame: Vec<u8>) {
        let mut burst: Burst<VecBuf> = Burst::new();
        burst.push(self.rx_pool.adopt(frame).expect("receive buffer"));
        self.p.handle_rx_burst(self.now, &mut burst);
        self.events();
        self.transmit();
    }

    fn take_stray(&mut self, flow: &FlowKey) -> Vec<TcpMeta> {
        let (mine, rest): (Vec<TcpMeta>, Vec<TcpMeta>) = self
            .stray
            .drain(..)
            .partition(|m| reversed(&m.flow) == *flow);
        self.stray = rest;
        mine
    }

    // ---- the steps ----

    /// Runs one step and checks every invariant.
    pub fn step(&mut self, op: &SOp) {
        self.setup = false;
        match op {
            SOp::Write { conn, len } => {
                let Some(i) = self.pick(*conn) else { return };
                let want = (1 + u64::from(*len) % 4096)
                    .min(STREAM_MAX - self.links[i].written.min(STREAM_MAX));
                self.write(i, want as usize);
            }
            SOp::WriteBufs { conn, n, size, off } => {
                let Some(i) = self.pick(*conn) else { return };
                self.write_bufs(
                    i,
                    1 + usize::from(*n % 8),
                    1 + usize::from(*size % 1500),
                    usize::from(*off % 64),
                );
            }
            SOp::Shutdown(c) | SOp::Close(c) => {
                let Some(i) = self.pick(*c) else { return };
                let l = &self.links[i];
                let (id, gone) = (l.id, l.gone);
                let r = if matches!(op, SOp::Close(_)) {
                    self.p.tcp().close(self.now, id)
                } else {
                    self.p.tcp().shutdown(self.now, id)
                };
                if gone {
                    assert_eq!(
                        r,
                        Err(TcpError::UnknownConnection),
                        "a call on a gone connection"
                    );
                } else {
                    assert_eq!(r, Ok(()), "shutdown/close on a live connection");
                    self.links[i].shut = true;
                }
                self.after_input();
            }
            SOp::Nodelay { conn, on } | SOp::Cork { conn, on } => {
                let Some(i) = self.pick(*conn) else { return };
                let id = self.links[i].id;
                let r = if matches!(op, SOp::Cork { .. }) {
                    self.p.tcp().set_cork(id, *on)
                } else {
                    self.p.tcp().set_nodelay(id, *on)
                };
                assert_eq!(
                    r.is_ok(),
                    !self.links[i].gone,
                    "set_nodelay/set_cork: {r:?}"
                );
                self.after_input();
            }
            SOp::Peer(ps) => {
                let Some(i) = self.pick(ps.conn) else { return };
                let seg = self.peer_seg(i, ps);
                if self.wire.len() < WIRE_MAX {
                    self.wire.push(seg);
                }
            }
            SOp::Rst { conn, at, ack } => {
                let Some(i) = self.pick(*conn) else { return };
                let l = &self.links[i];
                let seq_off = match *at {
                    RstSel::Exact { gate } => u32::from(gate),
                    RstSel::InWindow(k) => 1 + u32::from(k),
                    RstSel::Far(k) => k,
                };
                let mut flags = TcpFlags::RST;
                if *ack {
                    flags |= TcpFlags::ACK;
                }
                let seg = PeerSeg {
                    link: i,
                    flags,
                    seq_off,
                    ack: l.una,
                    window: 0,
                    opts: TcpOptions::default(),
                };
                if self.wire.len() < WIRE_MAX {
                    self.wire.push(seg);
                }
            }
            SOp::Deliver { n, order } => {
                let k = (1 + usize::from(*n % 16)).min(self.wire.len());
                for j in 0..k {
                    let idx = if *order == 0 {
                        0
                    } else {
                        (usize::from(*order) + j * 7) % self.wire.len()
                    };
                    let seg = self.wire.remove(idx);
                    self.deliver(&seg);
                }
                self.after_input();
            }
            SOp::Dup(i) => {
                if !self.wire.is_empty() && self.wire.len() < WIRE_MAX {
                    let s = self.wire[usize::from(*i) % self.wire.len()].clone();
                    self.wire.push(s);
                }
            }
            SOp::LosePeer(i) => {
                if !self.wire.is_empty() {
                    let n = self.wire.len();
                    self.wire.remove(usize::from(*i) % n);
                }
            }
            SOp::Loss(m) => self.loss = *m,
            SOp::Advance(s) => self.advance(*s),
            SOp::Honest {
                rounds,
                step,
                window,
            } => {
                for _ in 0..(1 + rounds % 32) {
                    self.honest_round(*window);
                    self.advance(*step);
                }
            }
        }
    }

    /// The connection `c` names (among those set up).
    fn pick(&self, c: u8) -> Option<usize> {
        if self.links.is_empty() {
            return None;
        }
        Some(usize::from(c) % self.links.len())
    }

    /// The application writes `n` more bytes of the stream with `send`.
    fn write(&mut self, i: usize, n: usize) {
        let l = &self.links[i];
        let (id, off) = (l.id, l.written);
        let data: Vec<u8> = (off..off + n as u64)
            .map(|o| frames::stream_byte(l.seed, o))
            .collect();
        let room = self.p.tcp().writable_bytes(id);
        let mss = self.p.tcp().info(id).map_or(1, |x| x.snd_mss.max(1)) as usize;
        let free = self.app_cap - self.app_pool.in_use();
        let failures = self.p.tcp().stats().send_alloc_failures;
        let r = self.p.tcp().send(self.now, id, &data, &mut self.app_pool);
        let took = self.write_result(i, r, n, room);
        if self.p.tcp().stats().send_alloc_failures != failures {
            assert_eq!(
                self.app_pool.in_use(),
                self.app_cap,
                "send counted an allocation failure with buffers left in the pool"
            );
        }
        if !self.links[i].gone && !self.links[i].shut && free > n.min(room).div_ceil(mss) {
            // With buffers to spare, `send` takes what `writable_bytes` promised.
            assert_eq!(
                took,
                n.min(room),
                "send took {took} of {n} bytes; writable_bytes said {room} (pool had {free} free)"
            );
        }
        self.links[i].written += took as u64;
        self.after_input();
    }

    /// The application hands over `n` buffers of `size` bytes (payload at `off`) with
    /// `send_bufs`; what weir does not take is dropped (back to the pool).
    fn write_bufs(&mut self, i: usize, n: usize, size: usize, off: usize) {
        let l = &self.links[i];
        let (id, seed, mut at) = (l.id, l.seed, l.written);
        let mut chain: PayloadChain<VecBuf> = PayloadChain::new();
        let mut offered = 0;
        for _ in 0..n {
            let size = size.min((STREAM_MAX - at.min(STREAM_MAX)) as usize);
            if size == 0 {
                break;
            }
            let Some(mut b) = self.app_pool.alloc(off + size) else {
                break;
            };
            for (k, x) in b.data_mut()[off..].iter_mut().enumerate() {
                *x = frames::stream_byte(seed, at + k as u64);
            }
            let s = PayloadSlice {
                buf: b,
                off: off as u16,
                len: size as u16,
            };
            if chain.push(s).is_err() {
                break;
            }
            at += size as u64;
            offered += size;
        }
        if offered == 0 {
            return;
        }
        // Zero-copy buffers are not one MSS each: only the byte bound applies.
        let snd_buf = self.snd_buf;
        let room = self
            .p
            .tcp()
            .info(id)
            .map_or(0, |x| snd_buf.saturating_sub(x.snd_queued)) as usize;
        let r = self.p.tcp().send_bufs(self.now, id, &mut chain);
        let took = self.write_result(i, r, offered, room);
        assert_eq!(
            chain.len() as usize,
            offered - took,
            "send_bufs left a different amount in the chain than it did not take"
        );
        drop(chain);
        self.links[i].written += took as u64;
        self.after_input();
    }

    /// Checks a write's result against what the harness knows; returns the bytes taken.
    fn write_result(
        &mut self,
        i: usize,
        r: Result<usize, TcpError>,
        n: usize,
        room: usize,
    ) -> usize {
        let l = &self.links[i];
        if l.gone {
            assert_eq!(
                r,
                Err(TcpError::UnknownConnection),
                "a write to a gone connection"
            );
            return 0;
        }
        if l.shut {
            assert_eq!(
                r,
                Err(TcpError::WriteClosed),
                "a write after shutdown/close"
            );
            return 0;
        }
        let n_took = r.unwrap_or_else(|e| panic!("a write to an open connection failed: {e}"));
        assert!(n_took <= n, "send took {n_took} of {n} bytes");
        assert!(
            n_took <= room,
            "a write took {n_took} bytes, more than the {room} it had room for"
        );
        n_took
    }

    /// A peer segment from its selectors, resolved now against the model.
    fn peer_seg(&mut self, i: usize, ps: &PeerSpec) -> PeerSeg {
        let info = self.p_info(self.links[i].id);
        let l = &self.links[i];
        let nxt = info.map_or(l.una, |x| x.snd_nxt);
        let recent = |k: u8| -> Option<(u64, u32)> {
            let n = l.recent.len();
            (n > 0).then(|| l.recent[n - 1 - usize::from(k) % n])
        };
        let ack = match ps.ack {
            AckSel::Una(k) => SeqNumber(l.una.get().wrapping_add(k as i32 as u32)),
            AckSel::Nxt(k) => SeqNumber(nxt.get().wrapping_add(k as i32 as u32)),
            AckSel::Held => l.held_ack(),
            AckSel::Seg(k, d) => match recent(k) {
                Some((o, n)) => {
                    SeqNumber(l.seq(o + u64::from(n)).get().wrapping_add(d as i32 as u32))
                }
                None => l.una,
            },
            AckSel::Back(k) => SeqNumber(l.una.get().wrapping_sub(k)),
            AckSel::Abs(a) => SeqNumber(a),
        };
        let edge = l.una + l.wnd as usize;
        let field_for = |edge: SeqNumber| -> u16 {
            if edge <= ack {
                0
            } else {
                ((edge - ack) >> l.ws).min(65535) as u16
            }
        };
        let window = match ps.window {
            WndSel::Zero => 0,
            WndSel::Field(f) => f,
            WndSel::Max => 65535,
            WndSel::Edge(k) => field_for(SeqNumber(edge.get().wrapping_add(k as u32))),
            WndSel::Keep => field_for(edge),
        };
        let mut opts = TcpOptions::default();
        for s in ps
            .sack
            .iter()
            .take(usize::from(ps.sack_n) % (MAX_SACK_BLOCKS + 1))
        {
            let b = match *s {
                SackSel::Rel { from, len } => {
                    let left = SeqNumber(l.una.get().wrapping_add(from as u32));
                    Some((left, left + usize::from(len)))
                }
                SackSel::Reversed { from, len } => {
                    let right = SeqNumber(l.una.get().wrapping_add(from as u32));
                    Some((right + usize::from(len), right))
                }
                SackSel::Held(k) => {
                    let v: Vec<(u64, u64)> = l.held.islands().collect();
                    (!v.is_empty()).then(|| {
                        let (a, b) = v[usize::from(k) % v.len()];
                        (l.seq(a), l.seq(b))
                    })
                }
                SackSel::Seg(k) => recent(k).map(|(o, n)| (l.seq(o), l.seq(o + u64::from(n)))),
                SackSel::Beyond { from, len } => {
                    let left = nxt + usize::from(from);
                    Some((left, left + usize::from(len)))
                }
                SackSel::Below(k) => {
                    Some((SeqNumber(l.una.get().wrapping_sub(u32::from(k))), l.una))
                }
                SackSel::Abs { left, right } => Some((SeqNumber(left), SeqNumber(right))),
            };
            if let Some((left, right)) = b {
                opts.sack[usize::from(opts.sack_count)] = SackBlock { left, right };
                opts.sack_count += 1;
            }
        }
        let fresh = l.ts_now(self.now);
        let ts = match ps.ts {
            TsSel::Fresh => Some((fresh, l.weir_ts)),
            TsSel::Stale(k) => Some((fresh.wrapping_sub(u32::from(k)), l.weir_ts)),
            TsSel::Ahead(k) => Some((fresh.wrapping_add(k % (1 << 30)), l.weir_ts)),
            TsSel::OldEcho(k) => Some((fresh, l.weir_ts.wrapping_sub(u32::from(k)))),
            TsSel::FutureEcho(k) => Some((fresh, l.weir_ts.wrapping_add(k))),
            TsSel::Omit => None,
            TsSel::Wild { tsval, tsecr } => Some((tsval, tsecr)),
        };
        opts.timestamp = ts
            .filter(|_| l.ts || matches!(ps.ts, TsSel::Wild { .. }))
            .map(|(tsval, tsecr)| Timestamp { tsval, tsecr });
        let flags = match ps.kind {
            SegKind::Ack => TcpFlags::ACK,
            SegKind::Fin => TcpFlags::ACK | TcpFlags::FIN,
            SegKind::Syn => TcpFlags::ACK | TcpFlags::SYN,
            SegKind::NoAck => TcpFlags::PSH,
            SegKind::Noise => TcpFlags::ACK | TcpFlags::PSH | TcpFlags::URG,
        };
        PeerSeg {
            link: i,
            flags,
            seq_off: 0,
            ack,
            window,
            opts,
        }
    }

    /// The honest peer's ACK for link `i`: everything it holds, SACK blocks for the rest,
    /// the window `window` (at least 1), a fresh timestamp.
    fn honest_seg(&self, i: usize, window: u16) -> PeerSeg {
        let l = &self.links[i];
        let mut opts = TcpOptions::default();
        if l.sack {
            let max = if l.ts { 3 } else { MAX_SACK_BLOCKS };
            for (a, b) in l.held.islands().take(max) {
                opts.sack[usize::from(opts.sack_count)] = SackBlock {
                    left: l.seq(a),
                    right: l.seq(b),
                };
                opts.sack_count += 1;
            }
        }
        if l.ts {
            opts.timestamp = Some(Timestamp {
                tsval: l.ts_now(self.now),
                tsecr: l.weir_ts,
            });
        }
        PeerSeg {
            link: i,
            flags: TcpFlags::ACK,
            seq_off: 0,
            ack: l.held_ack(),
            window: window.max(1),
            opts,
        }
    }

    /// Every live connection's peer acknowledges honestly (delivered at once).
    fn honest_round(&mut self, window: u16) {
        for i in 0..self.links.len() {
            if !self.links[i].gone {
                let s = self.honest_seg(i, window);
                self.deliver(&s);
            }
        }
        self.after_input();
    }

    fn p_info(&mut self, id: ConnId) -> Option<ConnInfo> {
        self.p.tcp().info(id)
    }

    /// Hands one peer segment to weir (a burst of one) and updates the window model.
    fn deliver(&mut self, s: &PeerSeg) {
        self.sum.peer_segments += 1;
        let l = &self.links[s.link];
        let id = l.id;
        let before = self.p.tcp().info(id);
        let rcv_nxt = before.map_or(l.rcv_nxt, |b| b.rcv_nxt);
        let mut f = l
            .peer
            .seg((rcv_nxt + s.seq_off as usize).get(), s.ack.get(), s.flags);
        f.window = s.window;
        f.opts = s.opts;
        let frame = f.to_vec(b"");
        assert!(
            !frame.is_empty(),
            "the peer's segment could not be built: {s:?}"
        );
        let drops = drops_total(self.p.tcp().stats());
        let mut burst: Burst<VecBuf> = Burst::new();
        burst.push(self.rx_pool.adopt(frame).expect("receive buffer"));
        self.p.handle_rx_burst(self.now, &mut burst);
        assert_eq!(
            self.rx_pool.in_use(),
            0,
            "weir kept the buffer of a segment without data"
        );
        let refused = drops_total(self.p.tcp().stats()) != drops
            || s.flags.intersects(TcpFlags::RST | TcpFlags::SYN)
            || !s.flags.contains(TcpFlags::ACK);
        let after = self.p.tcp().info(id);
        let l = &mut self.links[s.link];
        let Some(b) = before else { return };
        if !synchronized(b.state) {
            return;
        }
        if !refused {
            // RFC 9293 §3.10.7.4, fifth step: SND.UNA =< SEG.ACK =< SND.NXT updates the
            // window (SND.WL1 = SEG.SEQ and SND.WL2 <= SEG.ACK here) and SND.UNA.
            if s.ack >= b.snd_una && s.ack <= b.snd_nxt {
                l.una = s.ack;
                l.wnd = u32::from(s.window) << l.ws;
            }
            if let Some(t) = s.opts.timestamp.filter(|_| l.ts) {
                if ts_before(l.ts_now(self.now), t.tsval) {
                    l.ts_base = t
                        .tsval
                        .wrapping_sub((self.now.as_nanos() / 1_000_000) as u32);
                }
            }
        }
        // The peer acknowledged bytes it never received: it lied, but weir must have sent
        // them (it takes no ACK beyond SND.NXT). From the model's SND.UNA, which is
        // weir's even when this ACK closed the connection (LAST-ACK).
        let una_off = l.off(l.una);
        if una_off > l.held.prefix() && una_off <= l.written + 1 {
            assert!(
                una_off <= l.sent_hi + u64::from(l.fin_sent),
                "SND.UNA at offset {una_off} is beyond what weir sent ({})",
                l.sent_hi
            );
            l.held.insert(0, una_off.min(l.written));
            if una_off == l.written + 1 {
                l.fin_held = true;
            }
        }
        let Some(a) = after else { return };
        l.rcv_nxt = a.rcv_nxt;
        if !synchronized(a.state) {
            return;
        }
        assert_eq!(
            a.snd_una, l.una,
            "SND.UNA {:?} is not the last acceptable ACK {:?} (segment {s:?}, refused {refused})",
            a.snd_una, l.una
        );
        assert_eq!(
            a.snd_wnd, l.wnd,
            "SND.WND {} is not the last advertised window {} (segment {s:?}, refused {refused})",
            a.snd_wnd, l.wnd
        );
    }

    /// Moves the clock and fires what is due.
    fn advance(&mut self, s: Step) {
        let d = match s {
            Step::Micros(n) => Duration::from_micros(u64::from(n)),
            Step::Millis(n) => Duration::from_millis(u64::from(n)),
            Step::Secs(n) => Duration::from_secs(u64::from(n)),
            Step::Timer => match self.p.poll_timeout() {
                Some(t) if t > self.now => (t - self.now).min(Duration::from_secs(3600)),
                _ => Duration::ZERO,
            },
        };
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
    fn events(&mut self) {
        let evs: Vec<Event> = self.p.tcp().events().collect();
        for e in evs {
            let link = |id: ConnId| self.links.iter().position(|l| l.id == id && !l.gone);
            match e {
                Event::Opened(id) => {
                    assert!(self.setup, "a connection opened after the set-up: {id:?}");
                }
                Event::Writable(id) => {
                    let i = link(id).expect("Writable for an unknown connection");
                    let info = self.p.tcp().info(id);
                    // A later segment of the same batch may have reset it since (its Reset
                    // follows in this drain).
                    let live = info.is_some_and(|x| x.state != State::Closed);
                    assert!(
                        !live || self.p.tcp().writable_bytes(id) > 0,
                        "Writable, but writable_bytes is 0 (shut {}): {info:?}",
                        self.links[i].shut
                    );
                }
                Event::Readable(id) | Event::PeerClosed(id) => {
                    assert!(
                        link(id).is_some() || self.setup,
                        "event for an unknown connection"
                    );
                }
                Event::Closed(id) => {
                    if let Some(i) = link(id) {
                        self.links[i].gone = true;
                    }
                }
                Event::Reset(id) => {
                    if let Some(i) = link(id) {
                        self.links[i].gone = true;
                        self.links[i].reset = true;
                        self.sum.resets += 1;
                    }
                }
            }
        }
        for i in 0..self.links.len() {
            if !self.links[i].gone && self.p.tcp().info(self.links[i].id).is_none() {
                panic!("connection {i} vanished without Closed or Reset");
            }
        }
    }

    /// Runs `poll_tx` until nothing is due, checking every frame from the peer's side.
    fn transmit(&mut self) {
        for _ in 0..4096 {
            let mut out: Burst<VecBuf> = Burst::new();
            let n = self.p.poll_tx(self.now, &mut self.tx_pool, &mut out);
            assert_eq!(n, out.len());
            if n == 0 {
                return;
            }
            for b in out {
                let bytes = b.into_vec();
                let m = frames::peer_view(&bytes).unwrap_or_else(|| {
                    panic!(
                        "weir sent a frame that is not TCP: {:02x?}",
                        &bytes[..bytes.len().min(64)]
                    )
                });
                assert!(
                    m.dst_mac == PEER_MAC && m.src_mac == OUR_MAC,
                    "weir sent a frame with the wrong MAC addresses: {m:?}"
                );
                let off = usize::from(m.payload_off);
                let payload = bytes[off..off + usize::from(m.payload_len)].to_vec();
                self.on_frame(&m, &payload);
            }
            assert_eq!(
                self.tx_pool.in_use(),
                0,
                "transmit buffers kept after poll_tx"
            );
        }
        panic!("poll_tx never ran dry");
    }

    /// One frame weir sent: the wire, stream and window checks, then the peer takes it.
    fn on_frame(&mut self, m: &TcpMeta, payload: &[u8]) {
        let flow = reversed(&m.flow);
        let Some(i) = self.links.iter().position(|l| l.flow == flow) else {
            assert!(
                self.setup || m.flags.contains(TcpFlags::RST),
                "weir sent to a flow the harness never opened: {m:?}"
            );
            self.stray.push(*m);
            return;
        };
        let loss = self.loss;
        let l = &mut self.links[i];
        if m.flags.contains(TcpFlags::RST) {
            return;
        }
        assert!(
            !m.flags.contains(TcpFlags::SYN),
            "weir sent a SYN on established connection {i}: {m:?}"
        );
        // RFC 9293 §3.10.7.4: once synchronized, every segment but a RST carries an ACK.
        assert!(
            m.flags.contains(TcpFlags::ACK),
            "connection {i} sent a segment without ACK: {m:?}"
        );
        // RFC 7323 §3.2: with timestamps negotiated every non-RST segment carries them;
        // without, none does.
        assert_eq!(
            m.opts.timestamp.is_some(),
            l.ts,
            "connection {i} (timestamps negotiated: {}) sent {m:?}",
            l.ts
        );
        if let Some(t) = m.opts.timestamp {
            l.weir_ts = t.tsval;
        }
        let fin = m.flags.contains(TcpFlags::FIN);
        let len = payload.len() as u64;
        if len == 0 && !fin {
            return;
        }
        self.sum.data_frames += 1;
        let off = l.off(m.seq);
        // Stream: nothing that was never written, every byte the one written.
        assert!(
            off.checked_add(len).is_some_and(|e| e <= l.written),
            "connection {i}: weir sent bytes at offset {off} (+{len}) beyond the {} written \
             (seq {:?}, ISS {:?})",
            l.written,
            m.seq,
            l.iss
        );
        for (k, b) in payload.iter().enumerate() {
            let want = frames::stream_byte(l.seed, off + k as u64);
            assert_eq!(
                *b,
                want,
                "connection {i}: byte at offset {} is not the one written",
                off + k as u64
            );
        }
        if fin {
            assert!(l.shut, "connection {i}: FIN before shutdown/close");
            assert_eq!(
                off + len,
                l.written,
                "connection {i}: FIN not at the end of the stream"
            );
        }
        // RFC 9293 §3.7.1: payload and options within the peer's MSS (at least 48, Linux
        // `tcp_min_snd_mss`).
        let opt_len = u32::from(m.header_len) - 20;
        assert!(
            len as u32 + opt_len <= l.peer_mss.max(48),
            "connection {i}: a segment of {len} bytes with {opt_len} option bytes exceeds the \
             peer's MSS {}",
            l.peer_mss
        );
        // Window: SEG.SEQ + SEG.LEN <= SND.UNA + SND.WND as advertised, or the one-octet
        // probe of a zero window at SND.UNA (RFC 9293 §3.8.6.1).
        let end = m.seq + (len as usize + usize::from(fin));
        let edge = l.una + l.wnd as usize;
        let probe = l.wnd == 0 && m.seq == l.una && end == m.seq + 1;
        assert!(
            end <= edge || probe,
            "connection {i}: weir sent beyond the peer's window: [{:?}, {:?}) (offset {off}, \
             {len} bytes{}) past SND.UNA + SND.WND = {:?} + {} (rtx: {})",
            m.seq,
            end,
            if fin { " + FIN" } else { "" },
            l.una,
            l.wnd,
            off < l.sent_hi
        );
        // A retransmission starts at or above SND.UNA: the queue is trimmed (and split) at
        // the cumulative ACK, so acknowledged bytes never go again.
        assert!(
            len == 0 || m.seq >= l.una,
            "connection {i}: weir resent acknowledged bytes: segment at {:?} (offset {off}, {len} \
             bytes) below SND.UNA {:?}",
            m.seq,
            l.una
        );
        if off >= l.sent_hi && len > 0 {
            l.originals.push_back(off + len);
        }
        if len > 0 {
            l.recent.push_back((off, len as u32));
            if l.recent.len() > 32 {
                l.recent.pop_front();
            }
        }
        l.sent_hi = l.sent_hi.max(off + len);
        l.fin_sent |= fin;
        let k = self.lost_k;
        self.lost_k = k.wrapping_add(1);
        if loss >> (k % 8) & 1 == 1 {
            return;
        }
        l.held.insert(off, off + len);
        l.fin_held |= fin;
    }

    /// The accounting and every bound.
    fn check(&mut self) {
        let tcp = self.p.tcp();
        assert!(tcp.conn_count() <= self.max_conns, "connection table bound");
        for (i, l) in self.links.iter_mut().enumerate() {
            if l.gone {
                continue;
            }
            let Some(info) = tcp.info(l.id) else { continue };
            if !synchronized(info.state) {
                continue;
            }
            assert_eq!(
                info.snd_una, l.una,
                "connection {i}: SND.UNA moved outside the ACK step"
            );
            assert_eq!(
                info.snd_wnd, l.wnd,
                "connection {i}: SND.WND moved outside the ACK step"
            );
            let una = l.off(info.snd_una);
            let nxt = l.off(info.snd_nxt);
            assert!(
                info.snd_una <= info.snd_nxt,
                "connection {i}: SND.UNA past SND.NXT"
            );
            assert_eq!(
                nxt,
                l.sent_hi + u64::from(l.fin_sent),
                "connection {i}: SND.NXT (offset {nxt}) is not what went on the wire"
            );
            let una_d = una.min(l.written);
            let nxt_d = nxt.min(l.written);
            assert_eq!(
                u64::from(info.snd_queued),
                l.written - una_d,
                "connection {i}: the send queue holds {} bytes, not the {} written from SND.UNA",
                info.snd_queued,
                l.written - una_d
            );
            assert_eq!(
                u64::from(info.snd_unsent),
                l.written - nxt_d,
                "connection {i}: {} bytes unsent, not the {} written from SND.NXT",
                info.snd_unsent,
                l.written - nxt_d
            );
            assert!(
                info.snd_queued <= self.snd_buf,
                "connection {i}: send queue past snd_buf"
            );
            let (lo, hi) = self.rto_bounds;
            assert!(
                info.rto >= lo && info.rto <= hi,
                "connection {i}: RTO {:?} outside [{lo:?}, {hi:?}] (RFC 6298 §2.4-2.5)",
                info.rto
            );
            while l.originals.front().is_some_and(|&e| e <= una) {
                l.originals.pop_front();
            }
            // The retransmission queue's entries (a segment, or a send unit of segments
            // sent together) are bounded; the segments outstanding are bounded by the
            // entries' 64 KiB each.
            assert!(
                info.rtx_entries <= self.snd_slices,
                "connection {i}: {} retransmission queue entries, the queue holds {}",
                info.rtx_entries,
                self.snd_slices
            );
            assert!(
                l.originals.len()
                    <= info.rtx_entries.max(1) * stack::tcp::recovery::MAX_UNIT_BYTES as usize,
                "connection {i}: {} segments outstanding in {} entries",
                l.originals.len(),
                info.rtx_entries
            );
        }
        // Each connection's queue holds at most `snd_slices` buffers; freed ones wait in
        // the core's free batch, which frees itself when MAX_CHAIN have gathered.
        let bound = self.links.len() * self.snd_slices + MAX_CHAIN;
        assert!(
            self.app_pool.in_use() <= bound,
            "the stack holds {} send buffers, bound {bound}",
            self.app_pool.in_use()
        );
        assert_eq!(self.tx_pool.in_use(), 0, "transmit buffers leaked");
        assert_eq!(self.rx_pool.in_use(), 0, "receive buffers kept");
    }

    /// The final honest phase, the delivery check, then every connection aborted and
    /// every send buffer back in the pool.
    pub fn finish(mut self) -> SendSummary {
        self.wire.clear();
        self.loss = 0;
        // The application's part: a corked runt waits for the cork to come off (weir's
        // cork has no ceiling; Linux's TCP_CORK sends after 200 ms).
        for i in 0..self.links.len() {
            if !self.links[i].gone {
                let id = self.links[i].id;
                assert!(
                    self.p.tcp().set_cork(id, false).is_ok(),
                    "uncork a live connection"
                );
            }
        }
        self.after_input();
        let mut rounds = 0;
        loop {
            let live: Vec<usize> = (0..self.links.len())
                .filter(|&i| !self.links[i].gone)
                .collect();
            if live.iter().all(|&i| self.links[i].complete()) {
                break;
            }
            rounds += 1;
            assert!(
                rounds <= FINAL_ROUNDS,
                "weir is stuck: after {FINAL_ROUNDS} honest rounds {}",
                self.describe()
            );
            let sent = self.sum.data_frames;
            self.honest_round(65535);
            if self.sum.data_frames == sent {
                match self.p.poll_timeout() {
                    Some(t) => {
                        self.now = self.now.max(t);
                        self.p.handle_timeout(self.now);
                        self.after_input();
                    }
                    None => panic!("weir is stuck with no timer armed: {}", self.describe()),
                }
            } else {
                self.now += Duration::from_millis(1);
                self.p.handle_timeout(self.now);
                self.after_input();
            }
        }
        for (i, l) in self.links.iter().enumerate() {
            self.sum.written += l.written;
            self.sum.delivered += l.held.prefix();
            if l.reset {
                continue;
            }
            assert!(
                l.complete(),
                "connection {i}: closed without delivering everything: {}",
                self.describe()
            );
            self.sum.completed += 1;
        }
        let resets = self.sum.resets;
        let ids: Vec<ConnId> = self
            .links
            .iter()
            .filter(|l| !l.gone)
            .map(|l| l.id)
            .collect();
        for id in ids {
            self.p.tcp().abort(id).expect("abort a live connection");
        }
        self.events();
        self.transmit();
        self.transmit();
        assert_eq!(
            self.app_pool.in_use(),
            0,
            "send buffers not returned after every connection was aborted"
        );
        self.sum.resets = resets;
        let st = self.p.tcp().stats();
        self.sum.retransmits = st.retransmits;
        self.sum.rto_timeouts = st.rto_timeouts;
        self.sum.window_probes = st.window_probes;
        self.sum.fast_recoveries = st.fast_recoveries;
        self.sum.tlp_probes = st.tlp_probes;
        self.sum.rack_reorder_timeouts = st.rack_reorder_timeouts;
        self.sum.peer_resets = st.resets_received;
        self.sum.gave_up = st.drops(DropReason::RetriesExhausted)
            + st.drops(DropReason::PersistTimeout)
            + st.drops(DropReason::FinRetriesExhausted);
        self.sum
    }

    fn describe(&mut self) -> String {
        let mut s = String::new();
        for i in 0..self.links.len() {
            let info = self.p_info(self.links[i].id);
            let l = &self.links[i];
            s += &format!(
                "\n  conn {i}: written {} held {:?} fin_held {} shut {} gone {} reset {} \
                 model una {:?} wnd {} info {info:?}",
                l.written, l.held.0, l.fin_held, l.shut, l.gone, l.reset, l.una, l.wnd
            );
        }
        s
    }
}

/// The `send` target: decodes `data` into a [`SendInput`] and runs it with every check.
pub fn send(data: &[u8]) -> SendSummary {
    match SendInput::decode(data) {
        Some(input) => run_send(&input),
        None => SendSummary::default(),
    }
}

/// Runs a decoded input.
pub fn run_send(input: &SendInput) -> SendSummary {
    let mut sim = SendSim::new(&input.knobs);
    for s in input
        .conns
        .iter()
        .take(1 + usize::from(input.n_conns) % MAX_LINKS)
    {
        sim.open(s);
    }
    for op in &input.ops {
        sim.step(op);
    }
    sim.finish()
}
