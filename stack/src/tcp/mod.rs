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

mod api;
mod config;
mod conn;
pub(crate) mod cookie;
mod ooo;
mod stats;
mod table;
mod timer;

pub use api::{ConnId, ConnInfo, Event, State, TcpError};
pub use config::TcpConfig;
pub use stats::{DropReason, TcpStats};

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
