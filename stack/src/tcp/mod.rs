//! TCP: listeners, the handshake, connections, receiving and sending data, delivery to
//! the application.
//!
//! Read first: RFC 9293 §3.10 (event processing: §3.10.7.1-2, CLOSED and LISTEN, in
//! `listen.rs`; §3.10.7.4, the synchronized states, in `input.rs`), §3.7.4 and
//! §3.8.6.2.1 (Nagle, sender SWS avoidance, in `conn/send.rs`), RFC 4987 §3.6 and Linux
//! `net/ipv4/syncookies.c` (SYN cookies), RFC 6528 (ISNs), then [`crate::ack`] for the
//! ACK policy and docs/decisions/send-path.md for the send path.
//!
//! # Where things are
//!
//! - `api.rs`, `config.rs`, `stats.rs`: what the application sees ([`ConnId`], [`Event`],
//!   [`State`], [`ConnInfo`], [`TcpError`]), [`TcpConfig`], and [`TcpStats`] with
//!   [`DropReason`].
//! - `listen.rs`: LISTEN and SYN-RECEIVED: the listening ports, the half-open table, SYN
//!   cookies (their arithmetic and the ISNs are in `cookie.rs`), and establishing a
//!   connection.
//! - `connect.rs`: the active open ([`Tcp::connect`], [`ConnectOpts`]): SYN-SENT, a
//!   simultaneous open's SYN-RECEIVED, SYN retransmission on the RTT estimator
//!   ([`rtt`]), ephemeral ports (RFC 6056).
//! - `conn/`: one connection, its state in three parts: receive (`conn/recv.rs`), send
//!   (`conn/send.rs`: the send sequence variables, the peer's window, the bounded send
//!   queue, the segmentation decision, and the calls into [`recovery`], [`cc`] and
//!   [`rtt`]) and close (`Closing`).
//! - `input.rs`: a segment on a connection, one function per step of RFC 9293 §3.10.7.4
//!   (the fifth, the ACK step, moves SND.UNA and the send window and frees acknowledged
//!   send buffers).
//! - `close.rs`: the closing states (FIN after the queued data, FIN-WAIT, CLOSING,
//!   LAST-ACK, TIME-WAIT, RST).
//! - `output.rs`: every frame TCP sends: data segments (which carry the connection's ACK),
//!   ACKs, FINs and RSTs of connections, SYN-ACKs and RSTs of the listener, and
//!   [`Tcp::poll_tx`].
//! - `ooo.rs` (out-of-order assembly), `table.rs` (the connection and half-open tables),
//!   `timer.rs` (the timing wheel).
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
//! queue is allocated once when it is set up, its send queue once on its first write).
//!
//! # Call order, once per loop iteration
//!
//! 1. [`Tcp::handle_segment`] for every coalesced segment GRO flushed (the pipeline's
//!    `handle_rx_burst`);
//! 2. the events: [`Tcp::poll_event`] / [`Tcp::events`];
//! 3. the application's calls: [`Tcp::recv`] (zero-copy payload, reports how much it
//!    consumed) or [`Tcp::recv_bufs`] (takes the received buffers), [`Tcp::send`]
//!    (copied into pool buffers) or [`Tcp::send_bufs`] (zero-copy), [`Tcp::connect`],
//!    [`Tcp::shutdown`], [`Tcp::close`], [`Tcp::set_nodelay`], [`Tcp::set_cork`];
//! 4. [`Tcp::handle_timeout`] (delayed ACK, SACK compression, the SWS override, the
//!    retransmission timer, RACK's reordering timer and the tail loss probe, the persist
//!    timer, SYN, SYN-ACK and FIN retransmission, TIME-WAIT);
//! 5. [`Tcp::poll_tx`]: every retransmission and data segment the windows allow and every
//!    ACK, SYN, SYN-ACK, FIN and RST due, built into buffers from the pool and appended to the caller's burst
//!    (one `tx_burst`); a data segment carries the ACK its connection owed, so no pure
//!    ACK follows it;
//! 6. sleep or spin until [`Tcp::poll_timeout`] or the next packet.
//!
//! Writes made in step 3 leave in step 5 of the same iteration; data the windows hold
//! leaves when the ACK that opens them is handled in step 1 of a later one.

mod api;
pub mod cc;
mod close;
mod config;
mod conn;
mod connect;
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
pub use config::{SackLossDetection, TcpConfig};
pub use connect::ConnectOpts;
pub use stats::{DropReason, TcpStats};

use std::collections::VecDeque;

use crate::ack::{AckPolicy, AckStats};
use crate::buf::{BufPool, FreeBatch, PacketBuf, PayloadChain, PayloadSlice};
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

/// One core's TCP. See the module documentation for the call order.
pub struct Tcp<B> {
    cfg: TcpConfig,
    key: SipKey,
    listeners: Listeners,
    conns: Table<Conn<B>>,
    ctl: VecDeque<Ctl>,
    ctx: Ctx<B>,
    rcv_wscale: u8,
    /// RFC 6056 §3.3.3's `next_ephemeral`: advances with each ephemeral port handed out.
    next_ephemeral: u32,
    /// Connections whose last write the pool cut short while their queue had room: no
    /// acknowledgment may come to raise `Event::Writable` (nothing in flight), so
    /// `poll_tx` raises it once the pool hands out a buffer again. At most one entry per
    /// connection (`Snd::pool_starved`), so at most `max_conns`.
    starved: Vec<(u32, u32)>,
    /// Connections whose last write the core's send budget cut short
    /// ([`TcpConfig::snd_core_slices`]): their own queues may be empty, so no
    /// acknowledgment of theirs would raise `Event::Writable`; it is raised once the
    /// core's send queues drain (`wake_budget_starved`). At most one entry per connection
    /// (`Snd::budget_starved`).
    budget_starved: Vec<(u32, u32)>,
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
                snd_held: 0,
                rxq_spare: crate::spare::Spare::new(cfg.queue_spare_bytes),
                ack_spare: crate::spare::Spare::new(cfg.queue_spare_bytes),
            },
            rcv_wscale: ws,
            next_ephemeral: 0,
            starved: Vec::with_capacity(cfg.max_conns),
            budget_starved: Vec::with_capacity(cfg.max_conns),
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
    /// Hints the connection table's bucket that a segment of the flow whose
    /// [`FlowKey::hash32`](crate::flow::FlowKey::hash32) is `hash` will look up
    /// ([`PacketBuf::prefetch_line`]): the first of the two dependent misses of a lookup
    /// when connections outnumber what the cache holds. The pipeline calls it two frames
    /// ahead and [`Tcp::prefetch_conn`] one frame ahead.
    #[inline(always)]
    pub fn prefetch_bucket(&self, hash: u32) {
        B::prefetch_line(self.conns.head_addr(hash));
    }

    /// Hints the lines of the connection a lookup of `hash` will read (the first entry of
    /// its bucket's chain with that tag) that an in-order segment reads first: the entry's
    /// start (the slot's occupancy), its key, its state and receive side, and its ACK
    /// state. It reads the bucket's head, so call it after [`Tcp::prefetch_bucket`] for the
    /// same hash has had time to land. The lines are found by their offsets in the slot
    /// (`Option<Conn>` keeps the connection at its start, `conn_slot_is_the_connection`
    /// checks it), not through the slot: reading it would be the very miss to hide.
    #[inline(always)]
    pub fn prefetch_conn(&self, hash: u32) {
        use std::mem::offset_of;
        if let Some(slot) = self.conns.tagged_slot_addr(hash) {
            for at in [
                0,
                offset_of!(Conn<B>, flow),
                offset_of!(Conn<B>, state),
                offset_of!(Conn<B>, rcv),
                offset_of!(Conn<B>, ack),
            ] {
                B::prefetch_line(slot.wrapping_add(at));
            }
        }
    }

    /// Half-open entries.
    pub fn half_open_count(&self) -> usize {
        self.listeners.half_open_count()
    }
    /// Out-of-order bytes held by the whole core.
    pub fn ooo_bytes(&self) -> usize {
        self.ctx.ooo.bytes()
    }
    /// What the core's stores of queue storage have done: the receive queues', then
    /// the ACK queues' (`stack::spare`).
    pub fn queue_spare(&self) -> (crate::spare::SpareStats, crate::spare::SpareStats) {
        (self.ctx.rxq_spare.stats(), self.ctx.ack_spare.stats())
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

    /// Gives the connection's in-order payload away: moves whole received slices from the
    /// front of the receive queue into `out` (the buffers themselves, no copy) while they
    /// fit in `max_bytes` and in `out`'s free slots ([`MAX_CHAIN`](crate::buf::MAX_CHAIN)
    /// per chain). The bytes count as consumed, as with [`Tcp::recv`]: the window opens
    /// and a window-update ACK may be scheduled (`tcp_cleanup_rbuf`). A front slice
    /// longer than `max_bytes` stays queued (0 is returned; [`Tcp::recv`] can consume a
    /// part of it). Returns the bytes moved.
    ///
    /// The buffers are then the caller's: hand them to [`Tcp::send_bufs`] (an echo
    /// without a copy; pass [`Tcp::writable_bytes`] as `max_bytes` so the send queue can
    /// take all of them) or drop them, which frees them. They come from the receive pool
    /// and stay out of it until the peer acknowledges them, so a receive pool sized for
    /// the receive queues alone must also hold the send queues that keep its buffers.
    pub fn recv_bufs(
        &mut self,
        id: ConnId,
        max_bytes: usize,
        out: &mut PayloadChain<B>,
    ) -> Result<usize, TcpError> {
        let c = self
            .conns
            .get_gen_mut(id.slot, id.gen)
            .ok_or(TcpError::UnknownConnection)?;
        let max = u32::try_from(max_bytes).unwrap_or(u32::MAX);
        Ok(c.take_bufs(max, out, &mut self.ctx) as usize)
    }

    /// Bytes ready to read on the connection.
    pub fn readable_bytes(&self, id: ConnId) -> usize {
        self.conn(id).map_or(0, |c| c.rcv.rxq_bytes as usize)
    }

    /// The application closes the connection: FIN after the data already written
    /// (LAST-ACK after the peer's FIN, FIN-WAIT-1 before it), or RST if unread data would
    /// be lost. Queued data is still sent and retransmitted; the handle stays valid until
    /// `Event::Closed` or `Event::Reset`. Once our FIN is acknowledged, the peer's FIN is
    /// awaited (FIN-WAIT-2) for at most [`TcpConfig::time_wait`].
    pub fn close(&mut self, now: Instant, id: ConnId) -> Result<(), TcpError> {
        let c = self
            .conns
            .get_gen_mut(id.slot, id.gen)
            .ok_or(TcpError::UnknownConnection)?;
        c.close(now, &mut self.ctx);
        Ok(())
    }

    /// Half-close (`shutdown(SHUT_WR)`): the application will write no more; our FIN
    /// follows the data already written, and the connection keeps receiving until the
    /// peer closes too. Further writes fail with [`TcpError::WriteClosed`].
    pub fn shutdown(&mut self, now: Instant, id: ConnId) -> Result<(), TcpError> {
        let _ = now;
        let c = self
            .conns
            .get_gen_mut(id.slot, id.gen)
            .ok_or(TcpError::UnknownConnection)?;
        c.shutdown(&mut self.ctx);
        Ok(())
    }

    /// Copies `data` into buffers from `pool` and queues it for sending; returns how many
    /// bytes it took: all of them, or what fitted in the send buffer
    /// ([`TcpConfig::snd_buf`] bytes, [`TcpConfig::snd_slices`] buffers) and in the core's
    /// send budget ([`TcpConfig::snd_core_slices`] buffers over all connections), 0 when
    /// the buffer is full (then [`Event::Writable`] follows when acknowledgments free
    /// space), the budget is spent (then [`Event::Writable`] follows when the core's send
    /// queues have drained to three quarters of it) or the pool is empty (then [`Event::Writable`] follows when [`Tcp::poll_tx`] next finds a
    /// buffer in its pool: with nothing in flight no acknowledgment would come). A short
    /// write tail joins the last buffer when it has room, so small writes do not take a
    /// buffer each.
    ///
    /// The bytes leave in [`Tcp::poll_tx`]: cut at the peer's MSS less our options,
    /// within the peer's window and the congestion window; a segment smaller than the MSS
    /// waits while earlier data is unacknowledged (Nagle, unless [`Tcp::set_nodelay`]),
    /// while corked ([`Tcp::set_cork`]), or while the window cuts it short (RFC 9293
    /// §3.8.6.2.1); the last segment of each write carries PSH. Allowed in ESTABLISHED
    /// and CLOSE-WAIT (and before the handshake completes on an active open, when the
    /// data waits for it).
    pub fn send<P: BufPool<Buf = B>>(
        &mut self,
        now: Instant,
        id: ConnId,
        data: &[u8],
        pool: &mut P,
    ) -> Result<usize, TcpError> {
        let _ = now;
        let budget = self.cfg.snd_core_slices.saturating_sub(self.ctx.snd_held);
        let c = writer(&mut self.conns, id)?;
        let before = c.snd.slices();
        let within = (c.snd.room_within(budget) as usize).min(data.len());
        let budget_cut = within < data.len() && c.snd.room() as usize > within;
        let n = c.snd.write_copy(&data[..within], |len| pool.alloc(len));
        self.ctx.snd_slices_changed(before, c.snd.slices());
        if n < data.len() {
            c.snd.writable_armed = true;
            if n < within {
                self.ctx.stats.send_alloc_failures += 1;
                if !c.snd.pool_starved && self.starved.len() < self.starved.capacity() {
                    c.snd.pool_starved = true;
                    self.starved.push((id.slot, id.gen));
                }
            } else if budget_cut {
                self.ctx.stats.send_budget_limited += 1;
                if !c.snd.budget_starved
                    && self.budget_starved.len() < self.budget_starved.capacity()
                {
                    c.snd.budget_starved = true;
                    self.budget_starved.push((id.slot, id.gen));
                }
            }
        }
        self.ctx.stats.bytes_written += n as u64;
        c.after_input(&mut self.ctx);
        Ok(n)
    }

    /// Queues the application's own buffers for sending without a copy: whole slices
    /// from the front of `slices`, as many as fit in the send buffer and the core's send
    /// budget ([`TcpConfig::snd_core_slices`]); what did not fit
    /// stays in `slices`, in order, for a later call (after [`Event::Writable`]). Returns
    /// the bytes taken. The buffers are freed once the peer has acknowledged their last
    /// byte. Segmentation as for [`Tcp::send`]; a buffer may be any frame-sized
    /// [`PacketBuf`] the application owns, received slices included: [`Tcp::recv_bufs`]
    /// gives them away, so an echo server hands what it received straight back.
    pub fn send_bufs(
        &mut self,
        now: Instant,
        id: ConnId,
        slices: &mut PayloadChain<B>,
    ) -> Result<usize, TcpError> {
        let _ = now;
        let budget = self.cfg.snd_core_slices.saturating_sub(self.ctx.snd_held);
        let c = writer(&mut self.conns, id)?;
        let before = c.snd.slices();
        let n = c.snd.write_bufs(slices, budget);
        self.ctx.snd_slices_changed(before, c.snd.slices());
        if !slices.is_empty() {
            c.snd.writable_armed = true;
            // The budget stopped it if the queue alone would have taken the next buffer.
            let next = slices.slices().first().map_or(0, |s| u32::from(s.len));
            if c.snd.slices() - before >= budget && c.snd.takes_buf(next) {
                self.ctx.stats.send_budget_limited += 1;
                if !c.snd.budget_starved
                    && self.budget_starved.len() < self.budget_starved.capacity()
                {
                    c.snd.budget_starved = true;
                    self.budget_starved.push((id.slot, id.gen));
                }
            }
        }
        self.ctx.stats.bytes_written += n as u64;
        c.after_input(&mut self.ctx);
        Ok(n)
    }

    /// Bytes [`Tcp::send`] could take now (0 for an unknown or write-closed connection):
    /// the connection's send buffer room, within what the core's send budget
    /// ([`TcpConfig::snd_core_slices`]) has left.
    pub fn writable_bytes(&self, id: ConnId) -> usize {
        let budget = self.cfg.snd_core_slices.saturating_sub(self.ctx.snd_held);
        self.conn(id)
            .filter(|c| !c.closing.write_closed)
            .map_or(0, |c| c.snd.room_within(budget) as usize)
    }

    /// The connection's state and the bytes in its send buffer (unacknowledged plus
    /// unsent), without building a whole [`ConnInfo`]: for an application that polls
    /// many connections for the end of their data or their close (weir-gen's waiting
    /// flows). `None` for an unknown connection.
    pub fn send_state(&self, id: ConnId) -> Option<(State, u32)> {
        self.conn(id).map(|c| (c.state, c.snd.queued()))
    }

    /// The send side's windows in bytes, `(cwnd, SND.WND, unsent)`, without building a
    /// whole [`ConnInfo`]: for an application that watches its ramp (weir-gen's time to
    /// full rate) on every iteration. `None` for an unknown connection.
    pub fn send_windows(&self, id: ConnId) -> Option<(u32, u32, u32)> {
        self.conn(id)
            .map(|c| (c.snd.cwnd, c.snd.wnd, c.snd.unsent()))
    }

    /// Buffers all send queues of this core hold (what
    /// [`TcpConfig::snd_core_slices`] bounds).
    pub fn snd_buffers_held(&self) -> usize {
        self.ctx.snd_held
    }

    /// `Event::Writable` for the connections the core's send budget stopped, once the
    /// core's send queues hold at most three quarters of it (a quarter free, so that one
    /// acknowledged buffer does not wake every waiting writer for one buffer; Linux's
    /// `sk_stream_write_space` likewise waits for a third of a socket's buffer).
    ///
    /// Called after every segment and every loop iteration, nearly always with nobody
    /// waiting: the check is inlined into the callers and the wake is out of line.
    #[inline(always)]
    fn wake_budget_starved(&mut self) {
        if !self.budget_starved.is_empty() {
            self.wake_budget_starved_slow();
        }
    }

    #[inline(never)]
    fn wake_budget_starved_slow(&mut self) {
        let limit = self.cfg.snd_core_slices;
        if self.ctx.snd_held > limit - limit / 4 {
            return;
        }
        for (slot, gen) in self.budget_starved.drain(..) {
            let Some(c) = self.conns.get_gen_mut(slot, gen) else {
                continue;
            };
            c.snd.budget_starved = false;
            if c.snd.writable_armed && !c.closing.write_closed && c.snd.room() > 0 {
                c.snd.writable_armed = false;
                self.ctx.event(Event::Writable(c.id));
            }
        }
    }

    /// `TCP_NODELAY`: with `on`, a segment smaller than the MSS leaves at once even while
    /// data is unacknowledged (Nagle off, RFC 9293 §3.7.4 allows the application to turn
    /// it off). Off by default.
    pub fn set_nodelay(&mut self, id: ConnId, on: bool) -> Result<(), TcpError> {
        let c = self
            .conns
            .get_gen_mut(id.slot, id.gen)
            .ok_or(TcpError::UnknownConnection)?;
        c.snd.nodelay = on;
        c.after_input(&mut self.ctx);
        Ok(())
    }

    /// `TCP_CORK`: with `on`, segments smaller than the MSS wait until a full one can be
    /// cut or the cork is removed (then they leave at the next [`Tcp::poll_tx`]), or, with
    /// nothing in flight to bring an ACK, for at most the 200 ms SWS override timeout (as
    /// Linux's cork has a 200 ms ceiling). A FIN after the data is never held. Off by
    /// default.
    pub fn set_cork(&mut self, id: ConnId, on: bool) -> Result<(), TcpError> {
        let c = self
            .conns
            .get_gen_mut(id.slot, id.gen)
            .ok_or(TcpError::UnknownConnection)?;
        c.snd.cork = on;
        c.after_input(&mut self.ctx);
        Ok(())
    }

    /// Whether the segment that carries each write's last byte gets PSH (RFC 9293
    /// §3.9.1; Linux always pushes at the end of `sendmsg`, `tcp_push`). On by default.
    /// Off: no segment of later writes carries PSH, a sender that never pushes, which is
    /// what a receiver's GRO sees from some stacks (the lab's PSH experiment).
    pub fn set_push(&mut self, id: ConnId, on: bool) -> Result<(), TcpError> {
        let c = self
            .conns
            .get_gen_mut(id.slot, id.gen)
            .ok_or(TcpError::UnknownConnection)?;
        c.snd.push_writes = on;
        Ok(())
    }

    /// `SO_SNDBUF` for one connection: the send buffer's byte bound becomes `bytes` (at
    /// least one MSS; the buffer-count bound, `TcpConfig::snd_slices`, stays). Data already
    /// queued beyond it stays queued; `send` takes more once it has drained below. Linux
    /// doubles the value given to `setsockopt` for its bookkeeping; weir takes it as
    /// payload bytes. Returns the bound set.
    pub fn set_snd_buf(&mut self, id: ConnId, bytes: u32) -> Result<u32, TcpError> {
        let c = self
            .conns
            .get_gen_mut(id.slot, id.gen)
            .ok_or(TcpError::UnknownConnection)?;
        let b = bytes.max(c.snd.mss);
        c.snd.set_buf(b);
        c.after_input(&mut self.ctx);
        Ok(b)
    }

    /// `SO_RCVBUF` for one connection: the receive buffer the window is offered from
    /// becomes `bytes`, within two of our MSS and what the negotiated window scale can
    /// advertise (65,535 << scale, RFC 7323 §2.3). A smaller buffer shrinks the window as
    /// data arrives; the right edge already offered never moves left (RFC 9293
    /// §3.8.6.2.2). The receive queue's slices still bound the window too
    /// (`TcpConfig::rxq_slices`). Returns the buffer set.
    pub fn set_rcv_buf(&mut self, id: ConnId, bytes: u32) -> Result<u32, TcpError> {
        let c = self
            .conns
            .get_gen_mut(id.slot, id.gen)
            .ok_or(TcpError::UnknownConnection)?;
        let max = 65535u32 << c.rcv.wscale.min(14);
        let b = bytes.clamp((2 * c.rcv.advmss).min(max), max);
        c.rcv.buf = b;
        Ok(b)
    }

    /// `TCP_MAXSEG` on an established connection: segments cut from now on carry at most
    /// `mss` bytes of TCP payload and options (Linux `user_mss`, clamped to 88..=65,535 as
    /// `do_tcp_setsockopt` refuses smaller; `tcp_sync_mss` never raises the MSS above what
    /// the peer announced). Segments already sent keep their size. Returns the payload
    /// bytes per full segment now.
    pub fn set_mss(&mut self, id: ConnId, mss: u32) -> Result<u32, TcpError> {
        let c = self
            .conns
            .get_gen_mut(id.slot, id.gen)
            .ok_or(TcpError::UnknownConnection)?;
        let opts = c.snd.hdr_len.saturating_sub(20);
        let m = mss.clamp(88, 65535).saturating_sub(opts);
        c.snd.mss = c.snd.mss.min(m);
        Ok(c.snd.mss)
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

    /// Fires every timer that is due at `now`: O(expired), no walk over the tables (see
    /// `timer`).
    #[inline]
    pub fn handle_timeout(&mut self, now: Instant) {
        // Nearly every loop iteration has no timer due: the earliest entry (live or stale)
        // is later than `now`, and nothing else is to do (nobody waits for send budget).
        if self.ctx.timers.next_deadline().is_none_or(|t| t > now) && self.budget_starved.is_empty()
        {
            return;
        }
        self.fire_timers(now);
    }

    #[inline(never)]
    fn fire_timers(&mut self, now: Instant) {
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
        // A reset (retries spent) frees send buffers.
        self.wake_budget_starved();
    }

    fn free_conn(&mut self, slot: u32) {
        if let Some(mut c) = self.conns.remove(slot) {
            c.release(&mut self.ctx);
        }
        self.wake_budget_starved();
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
        if c.open.is_some() {
            // SYN-SENT or SYN-RECEIVED of an active open (`connect.rs`).
            self.opening_segment(now, slot, seg);
            return;
        }
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
        // Acknowledgments free send buffers.
        self.wake_budget_starved();
    }
}

/// The connection for a write: live, and its sending side open.
fn writer<B: PacketBuf>(conns: &mut Table<Conn<B>>, id: ConnId) -> Result<&mut Conn<B>, TcpError> {
    let c = conns
        .get_gen_mut(id.slot, id.gen)
        .ok_or(TcpError::UnknownConnection)?;
    if matches!(c.state, State::SynSent | State::SynReceived) {
        return Err(TcpError::NotEstablished);
    }
    let open = matches!(c.state, State::Established | State::CloseWait);
    if c.closing.write_closed || !open {
        return Err(TcpError::WriteClosed);
    }
    Ok(c)
}

#[cfg(test)]
mod prefetch_tests {
    use super::*;
    use crate::mem::VecBuf;

    /// [`Tcp::prefetch_conn`] finds a connection's lines at their offsets in its table
    /// slot: that holds while `Option<Conn>` stores its `None` in a niche of the connection
    /// (the same size), with the connection at the slot's start.
    #[test]
    fn conn_slot_is_the_connection() {
        assert_eq!(
            std::mem::size_of::<Option<Conn<VecBuf>>>(),
            std::mem::size_of::<Conn<VecBuf>>()
        );
    }
}
