//! TCP receive: listeners, the handshake, connections, delivery to the application.
//!
//! Read first: RFC 9293 §3.10 (event processing: §3.10.7.1-2, CLOSED and LISTEN, in
//! `listen.rs`; §3.10.7.4, the synchronized states, in `input.rs`), RFC 4987 §3.6 and
//! Linux `net/ipv4/syncookies.c` (SYN cookies), RFC 6528 (ISNs), then [`crate::ack`] for
//! the ACK policy.
//!
//! # Where things are
//!
//! - `api.rs`, `config.rs`, `stats.rs`: what the application sees ([`ConnId`], [`Event`],
//!   [`State`], [`ConnInfo`], [`TcpError`]), [`TcpConfig`], and [`TcpStats`] with
//!   [`DropReason`].
//! - `listen.rs`: LISTEN and SYN-RECEIVED: the listening ports, the half-open table, SYN
//!   cookies (their arithmetic and the ISNs are in `cookie.rs`), and establishing a
//!   connection.
//! - `conn/`: one connection, its state in three parts: receive (`conn/recv.rs`), send
//!   (`conn/send.rs`, where the send buffer, the retransmission queue and congestion
//!   control of the send path go) and close (`Closing`).
//! - `input.rs`: a segment on a connection, one function per step of RFC 9293 §3.10.7.4.
//! - `close.rs`: the closing states (FIN, FIN-WAIT, CLOSING, LAST-ACK, TIME-WAIT, RST).
//! - `output.rs`: every frame TCP sends: ACKs, FINs and RSTs of connections, SYN-ACKs and
//!   RSTs of the listener.
//! - `ooo.rs` (out-of-order assembly), `table.rs` (the connection and half-open tables),
//!   `timer.rs` (the timer heap).
//! - [`rtt`], [`cc`], [`recovery`]: the send path's building blocks, which keep sequence
//!   ranges and times, never payload: the RFC 6298 estimator and RTO, congestion control
//!   (Reno, CUBIC, the ACK-counting rule, IW10) behind a trait, and loss detection (the
//!   retransmission queue, the RFC 6675 scoreboard, NewReno, RACK-TLP). Each module's
//!   "Wiring" section says which connection event calls what
//!   (docs/decisions/send-path.md).
//!
//! A segment given to [`Tcp::handle_segment`] goes to the connection with its flow; with
//! none, to the listener, which answers it or establishes the connection it then goes to.
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
pub mod cc;
mod close;
mod config;
mod conn;
pub(crate) mod cookie;
mod input;
mod listen;
mod ooo;
mod output;
pub mod recovery;
pub mod rtt;
mod stats;
mod table;
mod timer;

pub use api::{ConnId, ConnInfo, Event, State, TcpError};
pub use config::TcpConfig;
pub use stats::{DropReason, TcpStats};

use std::collections::VecDeque;

use crate::ack::{AckPolicy, AckStats};
use crate::buf::{BufPool, FreeBatch, PacketBuf, PayloadSlice};
use crate::driver::Burst;
use crate::flow::FlowKey;
use crate::segment::Segment;
use crate::time::Instant;

use conn::{Conn, Ctx};
use cookie::SipKey;
use listen::Listeners;
use ooo::OooPool;
use output::Ctl;
use table::Table;
use timer::{Kind, Timers};

/// One core's TCP receive stack. See the module documentation for the call order.
pub struct Tcp<B> {
    cfg: TcpConfig,
    key: SipKey,
    listeners: Listeners,
    conns: Table<Conn<B>>,
    ctl: VecDeque<Ctl>,
    ctx: Ctx<B>,
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
            listeners: Listeners::new(cfg.max_half_open),
            conns: Table::new(cfg.max_conns),
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
            rcv_wscale: ws,
            cfg,
        }
    }

    /// Accepts connections to `port` (IPv4 and IPv6), acknowledging with `policy`.
    pub fn listen(&mut self, port: u16, policy: AckPolicy) -> Result<(), TcpError> {
        self.listeners.add(port, policy)
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
        self.listeners.half_open_count()
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
        let n = f(c.rcv.rxq.make_contiguous());
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        Ok(c.consume(n, &mut self.ctx) as usize)
    }

    /// Bytes ready to read on the connection.
    pub fn readable_bytes(&self, id: ConnId) -> usize {
        self.conn(id).map_or(0, |c| c.rcv.rxq_bytes as usize)
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
        c.closing.app_closed = true;
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
            match ctl.build(pool, self.cfg.ttl, tx_csum_offload) {
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

    /// Processes one coalesced segment (GRO's output; a SYN or RST is a run of one).
    /// Takes the payload slices it keeps out of `seg.payload` (into the receive or
    /// out-of-order queue); whatever it leaves there (a duplicate, data beyond the window,
    /// a dropped segment) the caller frees. By reference: a `Segment` is about 1.1 KiB and
    /// GRO hands on one per unit from its own storage.
    ///
    /// One path: the segment goes to the connection with its flow; with none, the
    /// listener answers it, or establishes the connection it goes on to.
    pub fn handle_segment(&mut self, now: Instant, seg: &mut Segment<B>) {
        let slot = match self.conns.find(&seg.flow) {
            Some(slot) => slot,
            None => match self.listen_segment(now, seg) {
                Some(slot) => slot,
                None => return,
            },
        };
        let Some(c) = self.conns.get_mut(slot) else {
            return;
        };
        if c.reopened_by(seg) {
            // RFC 9293 §3.10.7.4 note / RFC 6191: a new SYN may reopen a TIME-WAIT
            // connection; make room for it and take the SYN again, now for no connection.
            self.free_conn(slot);
            self.handle_segment(now, seg);
            return;
        }
        c.on_segment(now, seg, &mut self.ctx);
        if c.reapable() {
            self.free_conn(slot);
        }
    }
}
