//! TCP receive: listeners, the handshake, connections, delivery to the application.
//!
//! Read first: RFC 9293 §3.10 (event processing), §3.10.7.1-2 (CLOSED and LISTEN),
//! RFC 4987 §3.6 and Linux `net/ipv4/syncookies.c` (SYN cookies), RFC 6528 (ISNs),
//! then [`conn`](self) for the synchronized states and [`crate::ack`] for the ACK policy.
//!
//! [`Tcp`] is one core's TCP: sans-IO, no clock, no allocation per packet (tables, the
//! out-of-order pool and every queue are sized at construction; a connection's receive
//! queue is allocated once when it is set up).
//!
//! # Call order, once per loop iteration
//!
//! 1. [`Tcp::handle_segment`] for every coalesced segment GRO flushed;
//! 2. the application: [`Tcp::poll_event`] / [`Tcp::events`], [`Tcp::recv`] (zero-copy
//!    payload, reports how much it consumed), [`Tcp::close`];
//! 3. [`Tcp::handle_timeout`] (delayed ACK, SACK compression, SYN-ACK and FIN
//!    retransmission, TIME-WAIT);
//! 4. [`Tcp::poll_tx`]: every ACK, SYN-ACK, FIN and RST due, built into buffers from the
//!    pool and appended to the caller's burst (one `tx_burst`);
//! 5. sleep or spin until [`Tcp::poll_timeout`] or the next packet.

mod conn;
pub(crate) mod cookie;
mod ooo;
mod table;
mod timer;

use std::collections::VecDeque;

use arrayvec::ArrayVec;

use crate::ack::template::{syn_options, AckTemplate, TcpFields};
use crate::ack::{AckPolicy, AckReason, AckStats};
use crate::buf::{BufPool, FreeBatch, PacketBuf, PayloadSlice};
use crate::driver::Burst;
use crate::flow::FlowKey;
use crate::segment::Segment;
use crate::seq::SeqNumber;
use crate::time::{Duration, Instant};
use crate::wire::{TcpFlags, Timestamp};

use conn::{Conn, ConnParams, Ctx};
use cookie::SipKey;
use ooo::OooPool;
use table::{Keyed, Table};
use timer::{Kind, Timers};

/// Configuration of one core's TCP.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Most established connections (the connection table's fixed size).
    pub max_conns: usize,
    /// Most half-open (SYN-RECEIVED) entries; beyond it SYN cookies answer (RFC 4987).
    pub max_half_open: usize,
    /// Receive buffer per connection: the window is this minus unconsumed and
    /// out-of-order bytes.
    pub rcv_buf: u32,
    /// Link MTU; the advertised MSS is MTU - 40 (IPv4) or MTU - 60 (IPv6).
    pub mtu: u16,
    /// Out-of-order bytes one connection may hold.
    pub ooo_conn_bytes: u32,
    /// Out-of-order bytes all connections of the core may hold.
    pub ooo_core_bytes: usize,
    /// Out-of-order payload slices (buffers) the core may hold.
    pub ooo_core_slices: usize,
    /// Payload slices one connection's receive queue holds (allocated at set-up).
    pub rxq_slices: usize,
    /// ACKs one connection may have decided and not yet sent (allocated at set-up). Every
    /// decision to ACK now yields its own frame, as in Linux; beyond this many in one loop
    /// iteration the oldest are merged into a stretch ACK and counted in
    /// [`AckStats::merged`]. 128 holds the one-ACK-per-two-segments of a full receive
    /// burst ([`crate::driver::MAX_BURST`]) from one flow with GRO off; a snapshot takes at
    /// most 48 bytes and the queue keeps one spare slot (a test checks the default stays
    /// within 6 KiB per connection).
    pub ack_queue: usize,
    /// Seed of the keyed hash behind ISNs and SYN cookies. Use a random value in
    /// production.
    pub seed: u64,
    /// SYN-ACK retransmissions before a half-open entry is dropped (Linux
    /// `tcp_synack_retries` = 5).
    pub synack_retries: u8,
    /// FIN retransmissions before the connection is reset.
    pub fin_retries: u8,
    /// TIME-WAIT duration after an active close (2 MSL; Linux uses 60 s).
    pub time_wait: Duration,
    /// Challenge ACKs per second per core (RFC 5961 §7; Linux `tcp_challenge_ack_limit`).
    pub challenge_ack_limit: u32,
    /// Stateless frames (RSTs, SYN-ACKs) queued for the next `poll_tx`.
    pub ctl_queue: usize,
    /// TTL / hop limit of the segments weir sends.
    pub ttl: u8,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            max_conns: 1024,
            max_half_open: 256,
            rcv_buf: 256 * 1024,
            mtu: 1500,
            ooo_conn_bytes: 256 * 1024,
            ooo_core_bytes: 16 << 20,
            ooo_core_slices: 16 * 1024,
            rxq_slices: 512,
            ack_queue: 128,
            seed: 0x7765_6972,
            synack_retries: 5,
            fin_retries: 6,
            time_wait: Duration::from_secs(60),
            challenge_ack_limit: 1000,
            ctl_queue: 256,
            ttl: 64,
        }
    }
}

/// A connection handle: a table slot and a generation, so a stale handle never reaches a
/// newer connection in the same slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId {
    slot: u32,
    gen: u32,
}

impl ConnId {
    /// The table slot (stable for the connection's life, reused afterwards).
    pub fn index(self) -> u32 {
        self.slot
    }
    /// The slot's generation.
    pub fn generation(self) -> u32 {
        self.gen
    }
}

/// Connection states (RFC 9293 §3.3.2) that a [`ConnId`] can be in; LISTEN and
/// SYN-RECEIVED live in the listener and the half-open table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Data flows.
    Established,
    /// The peer sent FIN; the application has not closed.
    CloseWait,
    /// Both closed; our FIN awaits its ACK.
    LastAck,
    /// The application closed first; our FIN awaits its ACK.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's.
    FinWait2,
    /// Both FINs crossed.
    Closing,
    /// Waiting 2 MSL after an active close.
    TimeWait,
    /// Gone.
    Closed,
}

/// What happened to a connection, for the application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A connection completed the handshake.
    Opened(ConnId),
    /// New in-order data is ready for [`Tcp::recv`].
    Readable(ConnId),
    /// The peer closed its side (FIN); read what is left, then [`Tcp::close`].
    PeerClosed(ConnId),
    /// The connection closed cleanly; the handle is now invalid.
    Closed(ConnId),
    /// The connection was reset (RST received or sent); the handle is now invalid.
    Reset(ConnId),
}

/// A snapshot of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnInfo {
    /// The handle.
    pub id: ConnId,
    /// The flow (`src` is the peer).
    pub flow: FlowKey,
    /// The state.
    pub state: State,
    /// Next sequence number expected.
    pub rcv_nxt: SeqNumber,
    /// Bytes received in order and not yet consumed.
    pub unconsumed: u32,
    /// Bytes held out of order.
    pub ooo_bytes: u32,
    /// The window offered now (right edge minus rcv_nxt).
    pub window: u32,
    /// The receiver's MSS estimate.
    pub rcv_mss: u32,
    /// SACK negotiated.
    pub sack: bool,
    /// Timestamps negotiated.
    pub timestamps: bool,
    /// Our window scale shift (0 if not negotiated).
    pub rcv_wscale: u8,
    /// The peer's window scale shift (0 if not negotiated).
    pub snd_wscale: u8,
}

/// Why a segment (or part of it) was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// PAWS: TSval older than TS.Recent (RFC 7323 §5.3).
    Paws,
    /// Sequence number not acceptable (RFC 9293 §3.10.7.4).
    OutOfWindow,
    /// Payload beyond the right window edge (trimmed).
    BeyondWindow,
    /// RST outside the window (RFC 5961 §3.2).
    RstOutOfWindow,
    /// RST inside the window but not at RCV.NXT: answered with a challenge ACK instead of
    /// a reset (RFC 5961 §3.2).
    RstInWindow,
    /// SYN on a synchronized connection (RFC 5961 §4.2).
    SynInWindow,
    /// ACK number outside SND.UNA - MAX.SND.WND ..= SND.NXT (RFC 5961 §5.2).
    BadAck,
    /// No ACK flag (RFC 9293 §3.10.7.4).
    NoAck,
    /// A challenge ACK was due but the per-core limit was reached.
    ChallengeRateLimited,
    /// The connection's out-of-order byte limit.
    OooConnLimit,
    /// The core's out-of-order byte or slice limit.
    OooCoreLimit,
    /// The receive queue had no room for the segment's buffers.
    RxQueueFull,
    /// Data after the peer's FIN.
    DataAfterFin,
    /// Data after the application closed (answered with RST).
    DataAfterClose,
    /// No connection and no listener (answered with RST, RFC 9293 §3.10.7.1).
    NoListener,
    /// The connection table was full (answered with RST).
    ConnTableFull,
    /// The handshake's ACK did not acknowledge our SYN (answered with RST).
    BadHandshakeAck,
    /// An ACK to a listener with no valid SYN cookie (answered with RST).
    BadCookie,
    /// A segment to a listener that is neither SYN nor ACK.
    ListenerDrop,
    /// A stateless frame did not fit in the control queue.
    CtlQueueFull,
    /// The application did not drain events fast enough.
    EventQueueFull,
    /// Our FIN was never acknowledged.
    FinRetriesExhausted,
    /// SYN-ACK retransmissions exhausted; the half-open entry was dropped.
    SynAckRetriesExhausted,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 23] = [
        DropReason::Paws,
        DropReason::OutOfWindow,
        DropReason::BeyondWindow,
        DropReason::RstOutOfWindow,
        DropReason::RstInWindow,
        DropReason::SynInWindow,
        DropReason::BadAck,
        DropReason::NoAck,
        DropReason::ChallengeRateLimited,
        DropReason::OooConnLimit,
        DropReason::OooCoreLimit,
        DropReason::RxQueueFull,
        DropReason::DataAfterFin,
        DropReason::DataAfterClose,
        DropReason::NoListener,
        DropReason::ConnTableFull,
        DropReason::BadHandshakeAck,
        DropReason::BadCookie,
        DropReason::ListenerDrop,
        DropReason::CtlQueueFull,
        DropReason::EventQueueFull,
        DropReason::FinRetriesExhausted,
        DropReason::SynAckRetriesExhausted,
    ];
    /// The snake_case name used in stats output.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::Paws => "paws",
            DropReason::OutOfWindow => "out_of_window",
            DropReason::BeyondWindow => "beyond_window",
            DropReason::RstOutOfWindow => "rst_out_of_window",
            DropReason::RstInWindow => "rst_in_window",
            DropReason::SynInWindow => "syn_in_window",
            DropReason::BadAck => "bad_ack",
            DropReason::NoAck => "no_ack",
            DropReason::ChallengeRateLimited => "challenge_rate_limited",
            DropReason::OooConnLimit => "ooo_conn_limit",
            DropReason::OooCoreLimit => "ooo_core_limit",
            DropReason::RxQueueFull => "rx_queue_full",
            DropReason::DataAfterFin => "data_after_fin",
            DropReason::DataAfterClose => "data_after_close",
            DropReason::NoListener => "no_listener",
            DropReason::ConnTableFull => "conn_table_full",
            DropReason::BadHandshakeAck => "bad_handshake_ack",
            DropReason::BadCookie => "bad_cookie",
            DropReason::ListenerDrop => "listener_drop",
            DropReason::CtlQueueFull => "ctl_queue_full",
            DropReason::EventQueueFull => "event_queue_full",
            DropReason::FinRetriesExhausted => "fin_retries_exhausted",
            DropReason::SynAckRetriesExhausted => "synack_retries_exhausted",
        }
    }
}

/// One core's TCP counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Payload bytes that reached `rcv_nxt` (in order, including drained out-of-order).
    pub bytes_in_order: u64,
    /// Wire segments received in order (counting inside coalesced runs).
    pub segments_in_order: u64,
    /// Wire segments queued out of order.
    pub ooo_segments: u64,
    /// Bytes queued out of order.
    pub ooo_bytes: u64,
    /// Wire segments that carried only data already received.
    pub duplicate_segments: u64,
    /// Bytes already received (partial or whole duplicates).
    pub duplicate_bytes: u64,
    /// Connections established.
    pub conns_opened: u64,
    /// Connections closed cleanly.
    pub conns_closed: u64,
    /// Connections reset (either direction).
    pub conns_reset: u64,
    /// Valid RSTs received.
    pub resets_received: u64,
    /// RSTs sent for segments with no connection or listener, or refused.
    pub resets_sent: u64,
    /// Connection attempts refused (no listener, table full, bad ACK to a listener).
    pub conns_refused: u64,
    /// Challenge ACKs scheduled (RFC 5961).
    pub challenge_acks: u64,
    /// SYN-ACKs sent with a SYN cookie.
    pub syn_cookies_sent: u64,
    /// Connections established from a valid SYN cookie.
    pub syn_cookies_accepted: u64,
    /// SYNs answered (half-open entries created or cookies sent).
    pub syns_received: u64,
    drops: [u64; 23],
}

impl TcpStats {
    /// Count one drop.
    pub fn dropped(&mut self, r: DropReason) {
        if let Some(c) = self.drops.get_mut(r as usize) {
            *c += 1;
        }
    }
    /// Drops for `r`.
    pub fn drops(&self, r: DropReason) -> u64 {
        self.drops.get(r as usize).copied().unwrap_or(0)
    }
    /// `(name, count)` for every drop reason.
    pub fn drops_iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DropReason::ALL.iter().map(|r| (r.name(), self.drops(*r)))
    }
    /// Adds `o`'s counts (totals over cores).
    pub fn merge(&mut self, o: &TcpStats) {
        self.bytes_in_order += o.bytes_in_order;
        self.segments_in_order += o.segments_in_order;
        self.ooo_segments += o.ooo_segments;
        self.ooo_bytes += o.ooo_bytes;
        self.duplicate_segments += o.duplicate_segments;
        self.duplicate_bytes += o.duplicate_bytes;
        self.conns_opened += o.conns_opened;
        self.conns_closed += o.conns_closed;
        self.conns_reset += o.conns_reset;
        self.resets_received += o.resets_received;
        self.resets_sent += o.resets_sent;
        self.conns_refused += o.conns_refused;
        self.challenge_acks += o.challenge_acks;
        self.syn_cookies_sent += o.syn_cookies_sent;
        self.syn_cookies_accepted += o.syn_cookies_accepted;
        self.syns_received += o.syns_received;
        for (a, b) in self.drops.iter_mut().zip(o.drops.iter()) {
            *a += *b;
        }
    }
}

/// Errors of the control-plane calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpError {
    /// The handle names no live connection (closed, reset or never valid).
    UnknownConnection,
    /// Already listening on this port.
    AlreadyListening,
    /// No room for another listener (64 per core).
    TooManyListeners,
}

impl core::fmt::Display for TcpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            TcpError::UnknownConnection => "no such connection (closed or reset)",
            TcpError::AlreadyListening => "already listening on this port",
            TcpError::TooManyListeners => "too many listeners (at most 64 per core)",
        })
    }
}

impl std::error::Error for TcpError {}

/// A SYN-RECEIVED entry.
#[derive(Clone, Debug)]
struct HalfOpen {
    flow: FlowKey,
    local_mac: [u8; 6],
    peer_mac: [u8; 6],
    iss: SeqNumber,
    irs: SeqNumber,
    peer_mss: u16,
    peer_wscale: Option<u8>,
    sack: bool,
    ts_recent: Option<u32>,
    policy: AckPolicy,
    first_sent: Instant,
    retries: u8,
    deadline: Instant,
}

impl Keyed for HalfOpen {
    fn key(&self) -> &FlowKey {
        &self.flow
    }
}

/// A stateless frame to send: a RST or a SYN-ACK.
#[derive(Clone, Copy, Debug)]
struct Ctl {
    flow: FlowKey,
    local_mac: [u8; 6],
    peer_mac: [u8; 6],
    seq: SeqNumber,
    ack: SeqNumber,
    flags: TcpFlags,
    window: u16,
    ts: Option<Timestamp>,
    syn: Option<(u16, Option<u8>, bool)>,
    reason: AckReason,
}

const SYNACK_RTO: Duration = Duration::from_secs(1);
/// Cookie ACKs are accepted for this long after the half-open table last overflowed
/// (Linux `tcp_synq_no_recent_overflow`: 2 minutes).
const COOKIE_WINDOW: Duration = Duration::from_secs(120);

/// One core's TCP receive stack. See the module documentation for the call order.
pub struct Tcp<B> {
    cfg: TcpConfig,
    key: SipKey,
    listeners: ArrayVec<(u16, AckPolicy), 64>,
    conns: Table<Conn<B>>,
    half: Table<HalfOpen>,
    ctl: VecDeque<Ctl>,
    ctx: Ctx<B>,
    last_overflow: Option<Instant>,
    rcv_wscale: u8,
}

impl<B: PacketBuf> Tcp<B> {
    /// A TCP with every table and queue allocated.
    pub fn new(cfg: TcpConfig) -> Self {
        let mut ws = 0u8;
        while ws < 14 && (cfg.rcv_buf >> ws) > 65535 {
            ws += 1;
        }
        Tcp {
            key: SipKey::from_seed(cfg.seed),
            listeners: ArrayVec::new(),
            conns: Table::new(cfg.max_conns),
            half: Table::new(cfg.max_half_open),
            ctl: VecDeque::with_capacity(cfg.ctl_queue),
            ctx: Ctx {
                ooo: OooPool::new(cfg.ooo_core_slices, cfg.ooo_core_bytes),
                stats: TcpStats::default(),
                ack_stats: AckStats::default(),
                events: VecDeque::with_capacity(cfg.max_conns * 4 + 16),
                events_cap: cfg.max_conns * 4 + 16,
                due: VecDeque::with_capacity(cfg.max_conns + 1),
                timers: Timers::new(cfg.max_conns, cfg.max_half_open),
                challenge_limit: cfg.challenge_ack_limit,
                challenge_window: Instant::ZERO,
                challenge_count: 0,
                spent: FreeBatch::new(),
            },
            last_overflow: None,
            rcv_wscale: ws,
            cfg,
        }
    }

    /// Accepts connections to `port` (IPv4 and IPv6), acknowledging with `policy`.
    pub fn listen(&mut self, port: u16, policy: AckPolicy) -> Result<(), TcpError> {
        if self.listeners.iter().any(|(p, _)| *p == port) {
            return Err(TcpError::AlreadyListening);
        }
        self.listeners
            .try_push((port, policy))
            .map_err(|_| TcpError::TooManyListeners)
    }

    /// The configuration.
    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }
    /// TCP counters.
    pub fn stats(&self) -> &TcpStats {
        &self.ctx.stats
    }
    /// Segments sent, by reason.
    pub fn ack_stats(&self) -> &AckStats {
        &self.ctx.ack_stats
    }
    /// Established (or closing) connections.
    pub fn conn_count(&self) -> usize {
        self.conns.len()
    }
    /// Half-open entries.
    pub fn half_open_count(&self) -> usize {
        self.half.len()
    }
    /// Out-of-order bytes held by the whole core.
    pub fn ooo_bytes(&self) -> usize {
        self.ctx.ooo.bytes()
    }

    fn conn(&self, id: ConnId) -> Option<&Conn<B>> {
        if self.conns.gen(id.slot) != id.gen {
            return None;
        }
        self.conns.get(id.slot)
    }

    /// A snapshot of a connection.
    pub fn info(&self, id: ConnId) -> Option<ConnInfo> {
        self.conn(id).map(|c| c.info())
    }
    /// The connection's flow (`src` is the peer).
    pub fn flow(&self, id: ConnId) -> Option<FlowKey> {
        self.conn(id).map(|c| c.flow)
    }
    /// The connection for `flow`, if any.
    pub fn lookup(&self, flow: &FlowKey) -> Option<ConnId> {
        let s = self.conns.find(flow)?;
        self.conns.get(s).map(|c| c.id)
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.ctx.events.pop_front()
    }
    /// Drains the pending events (new connections, readable data, peer closed, closed).
    pub fn events(&mut self) -> impl Iterator<Item = Event> + '_ {
        self.ctx.events.drain(..)
    }

    /// Hands the connection's in-order payload to `f` as the received buffers themselves
    /// (no copy); `f` returns how many bytes it consumed. Consuming frees buffers, opens
    /// the window and may schedule a window-update ACK (`tcp_cleanup_rbuf`). Returns the
    /// bytes consumed.
    pub fn recv<F>(&mut self, id: ConnId, f: F) -> Result<usize, TcpError>
    where
        F: FnOnce(&[PayloadSlice<B>]) -> usize,
    {
        let c = self
            .conns
            .get_gen_mut(id.slot, id.gen)
            .ok_or(TcpError::UnknownConnection)?;
        let n = f(c.rxq.make_contiguous());
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        Ok(c.consume(n, &mut self.ctx) as usize)
    }

    /// Bytes ready to read on the connection.
    pub fn readable_bytes(&self, id: ConnId) -> usize {
        self.conn(id).map_or(0, |c| c.rxq_bytes as usize)
    }

    /// The application closes the connection: FIN (LAST-ACK after the peer's FIN,
    /// FIN-WAIT-1 before it), or RST if unread data would be lost.
    pub fn close(&mut self, now: Instant, id: ConnId) -> Result<(), TcpError> {
        let c = self
            .conns
            .get_gen_mut(id.slot, id.gen)
            .ok_or(TcpError::UnknownConnection)?;
        c.close(now, &mut self.ctx);
        Ok(())
    }

    /// Resets the connection (RST) and forgets it.
    pub fn abort(&mut self, id: ConnId) -> Result<(), TcpError> {
        let c = self
            .conns
            .get_gen_mut(id.slot, id.gen)
            .ok_or(TcpError::UnknownConnection)?;
        c.app_closed = true;
        c.abort(&mut self.ctx);
        Ok(())
    }

    /// The earliest timer deadline (may be early: a cancelled timer is noticed only when
    /// [`Tcp::handle_timeout`] runs). `None` when no timer is armed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.ctx.timers.next_deadline()
    }

    /// Fires every timer that is due at `now`: O(expired · log n), no walk over the
    /// tables (see `timer`).
    pub fn handle_timeout(&mut self, now: Instant) {
        // Handlers re-arm only for later deadlines; the budget makes sure a handler that
        // did not would wait for the next call instead of spinning here.
        let mut budget = self.ctx.timers.len();
        while budget > 0 {
            budget -= 1;
            let Some(f) = self.ctx.timers.pop_due(now) else {
                break;
            };
            match f.kind {
                Kind::Conn => {
                    let Some(c) = self.conns.get_gen_mut(f.slot, f.gen) else {
                        continue;
                    };
                    // Fires what is due and re-arms the rest (after_input).
                    c.handle_timeout(now, &mut self.ctx);
                    if c.reapable() {
                        self.free_conn(f.slot);
                    }
                }
                Kind::Half => self.half_open_timeout(now, f.slot, f.gen),
            }
        }
    }

    /// SYN-ACK retransmission with exponential backoff (RFC 6298 §5.5, Linux
    /// `tcp_synack_retries`), or the entry is dropped.
    fn half_open_timeout(&mut self, now: Instant, slot: u32, gen: u32) {
        if self.half.gen(slot) != gen {
            return;
        }
        let Some(h) = self.half.get_mut(slot) else {
            return;
        };
        if h.deadline > now {
            let d = h.deadline;
            self.ctx.timers.arm(Kind::Half, slot, gen, Some(d));
            return;
        }
        if h.retries >= self.cfg.synack_retries {
            self.ctx.stats.dropped(DropReason::SynAckRetriesExhausted);
            self.half.remove(slot);
            return;
        }
        h.retries += 1;
        h.deadline = now + Duration::from_nanos(SYNACK_RTO.as_nanos() << h.retries);
        let h = h.clone();
        self.ctx.timers.arm(Kind::Half, slot, gen, Some(h.deadline));
        self.queue_synack(now, &h);
    }

    fn free_conn(&mut self, slot: u32) {
        if let Some(mut c) = self.conns.remove(slot) {
            c.release(&mut self.ctx);
        }
    }

    /// Builds every segment due (ACKs, FINs, RSTs, SYN-ACKs) into buffers from `pool` and
    /// appends them to `out`, stopping when `out` is full or the pool is empty (the rest
    /// stay due). With `tx_csum_offload`, asks each buffer for TX checksum offload and
    /// falls back to software when it refuses. Returns the frames appended.
    pub fn poll_tx<P: BufPool<Buf = B>>(
        &mut self,
        now: Instant,
        pool: &mut P,
        out: &mut Burst<B>,
        tx_csum_offload: bool,
    ) -> usize {
        self.ctx.spent.free();
        let start = out.len();
        while let Some(&(slot, gen)) = self.ctx.due.front() {
            if out.is_full() {
                return out.len() - start;
            }
            let Some(c) = self.conns.get_gen_mut(slot, gen) else {
                self.ctx.due.pop_front();
                continue;
            };
            let mut stop = false;
            // A connection owes at most a RST, its queued ACKs (bounded) and a FIN.
            loop {
                if out.is_full() {
                    stop = true;
                    break;
                }
                match c.build(now, pool, tx_csum_offload) {
                    Ok(Some((b, r))) => {
                        self.ctx.ack_stats.count(r);
                        if tx_csum_offload {
                            self.ctx.ack_stats.tx_csum_offloaded += 1;
                        }
                        out.push(b);
                    }
                    Ok(None) => break,
                    Err(()) => {
                        self.ctx.ack_stats.alloc_failures += 1;
                        stop = true;
                        break;
                    }
                }
            }
            if stop {
                return out.len() - start;
            }
            c.queued = false;
            let reap = c.reapable();
            let d = c.deadline();
            self.ctx.timers.arm(Kind::Conn, slot, gen, d);
            self.ctx.due.pop_front();
            if reap {
                self.free_conn(slot);
            }
        }
        while let Some(ctl) = self.ctl.front().copied() {
            if out.is_full() {
                break;
            }
            let tmpl = AckTemplate::new(
                &ctl.flow,
                ctl.local_mac,
                ctl.peer_mac,
                ctl.ts.is_some(),
                self.cfg.ttl,
            );
            let mut opts = [0u8; 12];
            let n = match ctl.syn {
                Some((mss, ws, sack)) => syn_options(mss, ws, sack, &mut opts),
                None => 0,
            };
            let f = TcpFields {
                seq: ctl.seq,
                ack: ctl.ack,
                flags: ctl.flags,
                window: ctl.window,
                ts: ctl.ts.unwrap_or_default(),
            };
            match tmpl.build(pool, &f, &opts[..n], tx_csum_offload) {
                Some(b) => {
                    self.ctx.ack_stats.count(ctl.reason);
                    out.push(b);
                    self.ctl.pop_front();
                }
                None => {
                    self.ctx.ack_stats.alloc_failures += 1;
                    break;
                }
            }
        }
        out.len() - start
    }

    fn push_ctl(&mut self, c: Ctl) {
        if self.ctl.len() >= self.cfg.ctl_queue {
            self.ctx.stats.dropped(DropReason::CtlQueueFull);
            return;
        }
        self.ctl.push_back(c);
    }

    /// RFC 9293 §3.10.7.1: the reset for a segment that reached no connection.
    fn send_rst_for(&mut self, seg: &Segment<B>) {
        if seg.flags.contains(TcpFlags::RST) {
            return;
        }
        let (seq, ack, flags) = if seg.flags.contains(TcpFlags::ACK) {
            (seg.ack, SeqNumber(0), TcpFlags::RST)
        } else {
            (
                SeqNumber(0),
                seg.seq + seg.seq_len(),
                TcpFlags::RST | TcpFlags::ACK,
            )
        };
        self.ctx.stats.resets_sent += 1;
        self.push_ctl(Ctl {
            flow: seg.flow,
            local_mac: seg.local_mac,
            peer_mac: seg.peer_mac,
            seq,
            ack,
            flags,
            window: 0,
            ts: None,
            syn: None,
            reason: AckReason::Rst,
        });
    }

    fn advmss(&self, v6: bool) -> u16 {
        self.cfg.mtu.saturating_sub(if v6 { 60 } else { 40 })
    }

    fn ts_offset(&self, flow: &FlowKey) -> u32 {
        self.key.flow_hash(flow, 0x7473, 0)
    }

    fn ts_clock(&self, flow: &FlowKey, now: Instant) -> u32 {
        ((now.as_nanos() / 1_000_000) as u32).wrapping_add(self.ts_offset(flow))
    }

    fn queue_synack(&mut self, now: Instant, h: &HalfOpen) {
        let ts = h.ts_recent.map(|r| Timestamp {
            tsval: self.ts_clock(&h.flow, now),
            tsecr: r,
        });
        let ws = h.peer_wscale.map(|_| self.rcv_wscale);
        self.push_ctl(Ctl {
            flow: h.flow,
            local_mac: h.local_mac,
            peer_mac: h.peer_mac,
            seq: h.iss,
            ack: h.irs + 1,
            flags: TcpFlags::SYN | TcpFlags::ACK,
            window: self.cfg.rcv_buf.min(65535) as u16,
            ts,
            syn: Some((self.advmss(h.flow.v6), ws, h.sack)),
            reason: AckReason::Handshake,
        });
    }

    /// Processes one coalesced segment (GRO's output; a SYN or RST is a run of one).
    /// Takes the payload slices it keeps out of `seg.payload` (into the receive or
    /// out-of-order queue); whatever it leaves there (a duplicate, data beyond the window,
    /// a dropped segment) the caller frees. By reference: a `Segment` is about 1.1 KiB and
    /// GRO hands on one per unit from its own storage.
    pub fn handle_segment(&mut self, now: Instant, seg: &mut Segment<B>) {
        if let Some(slot) = self.conns.find(&seg.flow) {
            if let Some(c) = self.conns.get_mut(slot) {
                if matches!(c.state, State::TimeWait | State::Closed)
                    && seg.flags.contains(TcpFlags::SYN)
                    && !seg.flags.contains(TcpFlags::ACK)
                    && seg.seq > c.rcv_nxt
                {
                    // RFC 9293 §3.10.7.4 note / RFC 6191: a new SYN may reopen a
                    // TIME-WAIT connection; make room for it and fall through.
                    self.free_conn(slot);
                } else {
                    c.on_segment(now, seg, &mut self.ctx);
                    if c.reapable() {
                        self.free_conn(slot);
                    }
                    return;
                }
            }
        }
        let port = seg.flow.dport;
        let Some(&(_, policy)) = self.listeners.iter().find(|(p, _)| *p == port) else {
            self.ctx.stats.dropped(DropReason::NoListener);
            if !seg.flags.contains(TcpFlags::RST) {
                self.ctx.stats.conns_refused += 1;
            }
            self.send_rst_for(seg);
            return;
        };
        self.listener_segment(now, seg, policy);
    }

    /// LISTEN and SYN-RECEIVED (RFC 9293 §3.10.7.2-3).
    fn listener_segment(&mut self, now: Instant, seg: &mut Segment<B>, policy: AckPolicy) {
        let f = seg.flags;
        if let Some(slot) = self.half.find(&seg.flow) {
            self.half_open_segment(now, slot, seg);
            return;
        }
        if f.contains(TcpFlags::RST) {
            self.ctx.stats.dropped(DropReason::ListenerDrop);
            return;
        }
        if f.contains(TcpFlags::ACK) {
            if !f.contains(TcpFlags::SYN) && self.try_cookie(now, seg, policy) {
                if let Some(slot) = self.conns.find(&seg.flow) {
                    if let Some(c) = self.conns.get_mut(slot) {
                        c.on_segment(now, seg, &mut self.ctx);
                    }
                }
                return;
            }
            self.ctx.stats.dropped(DropReason::BadCookie);
            self.ctx.stats.conns_refused += 1;
            self.send_rst_for(seg);
            return;
        }
        if !f.contains(TcpFlags::SYN) {
            self.ctx.stats.dropped(DropReason::ListenerDrop);
            return;
        }
        self.ctx.stats.syns_received += 1;
        let o = seg.opts;
        let peer_mss = o.mss.unwrap_or(536);
        let ts_recent = o.timestamp.map(|t| t.tsval);
        if self.half.is_full() {
            self.syn_cookie(now, seg);
            return;
        }
        let iss = cookie::isn(&self.key, &seg.flow, now.as_nanos());
        let h = HalfOpen {
            flow: seg.flow,
            local_mac: seg.local_mac,
            peer_mac: seg.peer_mac,
            iss,
            irs: seg.seq,
            peer_mss,
            peer_wscale: o.wscale,
            sack: o.sack_permitted,
            ts_recent,
            policy,
            first_sent: now,
            retries: 0,
            deadline: now + SYNACK_RTO,
        };
        self.queue_synack(now, &h);
        let d = h.deadline;
        if let Ok((slot, gen)) = self.half.insert(h) {
            self.ctx.timers.arm(Kind::Half, slot, gen, Some(d));
        }
    }

    /// RFC 4987 §3.6: answer with a SYN cookie instead of keeping state (Linux
    /// `cookie_v4_init_sequence`, `cookie_init_timestamp`).
    fn syn_cookie(&mut self, now: Instant, seg: &Segment<B>) {
        self.last_overflow = Some(now);
        let o = seg.opts;
        let (idx, mss) = cookie::mss_index(o.mss.unwrap_or(536), seg.flow.v6);
        let count = minutes(now);
        let iss = SeqNumber(cookie::make_cookie(
            &self.key, &seg.flow, seg.seq, count, idx,
        ));
        // Without timestamps the peer's window scale and SACK-permitted cannot be
        // remembered, so neither is offered (as Linux does).
        let ts = o.timestamp.map(|t| Timestamp {
            tsval: cookie::cookie_tsval(self.ts_clock(&seg.flow, now), o.wscale, o.sack_permitted),
            tsecr: t.tsval,
        });
        let (ws, sack) = if ts.is_some() {
            (o.wscale.map(|_| self.rcv_wscale), o.sack_permitted)
        } else {
            (None, false)
        };
        let _ = mss;
        self.ctx.stats.syn_cookies_sent += 1;
        self.push_ctl(Ctl {
            flow: seg.flow,
            local_mac: seg.local_mac,
            peer_mac: seg.peer_mac,
            seq: iss,
            ack: seg.seq + 1,
            flags: TcpFlags::SYN | TcpFlags::ACK,
            window: self.cfg.rcv_buf.min(65535) as u16,
            ts,
            syn: Some((self.advmss(seg.flow.v6), ws, sack)),
            reason: AckReason::Handshake,
        });
    }

    /// `cookie_v4_check`: an ACK to a listener may complete a cookie handshake.
    fn try_cookie(&mut self, now: Instant, seg: &Segment<B>, policy: AckPolicy) -> bool {
        match self.last_overflow {
            Some(t) if now - t <= COOKIE_WINDOW => {}
            _ => return false,
        }
        let iss = SeqNumber(seg.ack.get().wrapping_sub(1));
        let irs = SeqNumber(seg.seq.get().wrapping_sub(1));
        let Some(idx) = cookie::check_cookie(&self.key, &seg.flow, iss.get(), irs, minutes(now))
        else {
            return false;
        };
        let table = if seg.flow.v6 {
            &cookie::MSS_TABLE_V6
        } else {
            &cookie::MSS_TABLE
        };
        let peer_mss = table.get(idx as usize).copied().unwrap_or(536);
        let (ts_recent, wscale, sack) = match seg.opts.timestamp {
            Some(t) => {
                let (ws, sack) = cookie::cookie_decode_ts(t.tsecr);
                (Some(t.tsval), ws, sack)
            }
            None => (None, None, false),
        };
        let h = HalfOpen {
            flow: seg.flow,
            local_mac: seg.local_mac,
            peer_mac: seg.peer_mac,
            iss,
            irs,
            peer_mss,
            peer_wscale: wscale,
            sack,
            ts_recent,
            policy,
            first_sent: now,
            retries: 1,
            deadline: now,
        };
        if self.establish(now, &h, seg.window) {
            self.ctx.stats.syn_cookies_accepted += 1;
            true
        } else {
            false
        }
    }

    /// SYN-RECEIVED (RFC 9293 §3.10.7.4 for that state).
    fn half_open_segment(&mut self, now: Instant, slot: u32, seg: &mut Segment<B>) {
        let Some(h) = self.half.get(slot).cloned() else {
            return;
        };
        let f = seg.flags;
        if f.contains(TcpFlags::RST) {
            // RFC 5961 §3.2 applies here too: only an exact RST counts.
            if seg.seq == h.irs + 1 {
                self.half.remove(slot);
                self.ctx.stats.resets_received += 1;
            } else {
                self.ctx.stats.dropped(DropReason::RstOutOfWindow);
            }
            return;
        }
        if f.contains(TcpFlags::SYN) {
            if seg.seq == h.irs && !f.contains(TcpFlags::ACK) {
                // A retransmitted SYN: our SYN-ACK was lost.
                self.queue_synack(now, &h);
            } else {
                self.ctx.stats.dropped(DropReason::SynInWindow);
            }
            return;
        }
        if !f.contains(TcpFlags::ACK) {
            self.ctx.stats.dropped(DropReason::NoAck);
            return;
        }
        if seg.ack != h.iss + 1 {
            self.ctx.stats.dropped(DropReason::BadHandshakeAck);
            self.send_rst_for(seg);
            return;
        }
        self.half.remove(slot);
        if self.establish(now, &h, seg.window) {
            if let Some(s) = self.conns.find(&seg.flow) {
                if let Some(c) = self.conns.get_mut(s) {
                    c.on_segment(now, seg, &mut self.ctx);
                }
            }
        } else {
            self.send_rst_for(seg);
        }
    }

    /// Creates the connection for a completed handshake.
    fn establish(&mut self, now: Instant, h: &HalfOpen, peer_window: u16) -> bool {
        let srtt = if h.retries == 0 {
            now - h.first_sent
        } else {
            Duration::ZERO
        };
        let p = ConnParams {
            flow: h.flow,
            local_mac: h.local_mac,
            peer_mac: h.peer_mac,
            iss: h.iss,
            irs: h.irs,
            rcv_buf: self.cfg.rcv_buf,
            rcv_wscale: Some(self.rcv_wscale),
            snd_wscale: h.peer_wscale,
            sack: h.sack,
            ts_recent: h.ts_recent,
            ts_offset: self.ts_offset(&h.flow),
            advmss: self.advmss(h.flow.v6),
            peer_mss: h.peer_mss,
            peer_window,
            ack: h.policy,
            srtt,
            ttl: self.cfg.ttl,
            ooo_limit: self.cfg.ooo_conn_bytes,
            rxq_slices: self.cfg.rxq_slices,
            ack_queue: self.cfg.ack_queue.clamp(1, 1024),
            fin_retries: self.cfg.fin_retries,
            time_wait: self.cfg.time_wait,
        };
        match self.conns.insert(Conn::new(p)) {
            Ok((slot, gen)) => {
                let id = ConnId { slot, gen };
                if let Some(c) = self.conns.get_mut(slot) {
                    c.id = id;
                }
                self.ctx.stats.conns_opened += 1;
                self.ctx.event(Event::Opened(id));
                true
            }
            Err(_) => {
                self.ctx.stats.dropped(DropReason::ConnTableFull);
                self.ctx.stats.conns_refused += 1;
                false
            }
        }
    }
}

/// The SYN cookie clock: minutes since the driver's clock origin.
fn minutes(now: Instant) -> u32 {
    (now.as_nanos() / 60_000_000_000) as u32
}
