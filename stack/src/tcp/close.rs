//! The closing states (RFC 9293 §3.6): the peer's FIN, our FIN and its retransmission,
//! FIN-WAIT-1/2, CLOSING, CLOSE-WAIT, LAST-ACK, TIME-WAIT, resets and aborts.
//!
//! Read first: RFC 9293 §3.6 (closing a connection), §3.10.4 (CLOSE call) and the eighth
//! step of §3.10.7.4, RFC 2525 §2.17 (reset when unread data is dropped), RFC 6191
//! (reopening TIME-WAIT with a new SYN), Linux `tcp_fin`, `tcp_close`, `tcp_time_wait`.
//!
//! The state these functions move lives in the connection's close part
//! ([`Closing`](super::conn::Closing)).

use std::ops::ControlFlow;

use super::conn::{Conn, Ctx};
use super::{DropReason, Event, State};
use crate::ack::{AckReason, AckState};
use crate::buf::PacketBuf;
use crate::segment::Segment;
use crate::time::{Duration, Instant};
use crate::wire::TcpFlags;

impl<B: PacketBuf> Conn<B> {
    /// RFC 9293 §3.10.7.4 note / RFC 6191: a SYN above what this TIME-WAIT (or closed)
    /// connection received may open a new connection on the same flow.
    pub(crate) fn reopened_by(&self, seg: &Segment<B>) -> bool {
        matches!(self.state, State::TimeWait | State::Closed)
            && seg.flags.contains(TcpFlags::SYN)
            && !seg.flags.contains(TcpFlags::ACK)
            && seg.seq > self.rcv.nxt
    }

    /// `tcp_fin`: the peer's FIN is in order.
    pub(crate) fn on_fin(&mut self, now: Instant, ctx: &mut Ctx<B>) {
        self.rcv.ooo_fin = None;
        self.rcv.nxt += 1;
        self.closing.peer_closed = true;
        ctx.ooo.clear(&mut self.rcv.ooo);
        self.rcv.sack.clear();
        // ACK the FIN at once (Linux delays it in pingpong mode and usually piggybacks it
        // on the application's FIN; a pure receiver has nothing to piggyback on).
        self.ack.ack_now(AckReason::Fin);
        match self.state {
            State::Established => self.state = State::CloseWait,
            State::FinWait1 => self.state = State::Closing,
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
        // RFC 9293 §3.10.7.4 eighth: "signal the user 'connection closing'", in every
        // state: an application that half-closed (`shutdown`) is still reading and learns
        // here where the peer's data ends (Linux: `read` returns 0). One that closed
        // reads no more and is not told.
        if !self.closing.app_closed {
            ctx.event(Event::PeerClosed(self.id));
        }
    }

    /// TIME-WAIT: 2 MSL (`TcpConfig::time_wait`) before the connection is gone.
    fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.closing.fin_deadline = None;
        self.closing.tw_deadline = Some(now + self.closing.time_wait);
    }

    /// Our FIN is acknowledged (RFC 9293 §3.10.7.4 fifth, for FIN-WAIT-1, CLOSING and
    /// LAST-ACK).
    pub(crate) fn our_fin_acked(&mut self, now: Instant, ctx: &mut Ctx<B>) {
        self.closing.fin_deadline = None;
        match self.state {
            State::LastAck => {
                self.state = State::Closed;
                ctx.stats.conns_closed += 1;
                ctx.event(Event::Closed(self.id));
            }
            State::FinWait1 => {
                self.state = State::FinWait2;
                self.orphan_deadline(now);
            }
            State::Closing => self.enter_time_wait(now),
            _ => {}
        }
    }

    /// FIN-WAIT-2 of a connection the application closed (not half-closed: that one's
    /// application still reads and decides) waits for the peer's FIN at most
    /// `time_wait`, then ends as TIME-WAIT does (Linux `tcp_fin_timeout`, 60 s as
    /// TIME-WAIT's length, for an orphaned FIN-WAIT-2): a peer that never closes must not
    /// hold the entry for good. The peer's FIN restarts the clock as TIME-WAIT.
    fn orphan_deadline(&mut self, now: Instant) {
        if self.state == State::FinWait2
            && self.closing.app_closed
            && self.closing.tw_deadline.is_none()
        {
            self.closing.tw_deadline = Some(now + self.closing.time_wait);
        }
    }

    /// The connection is gone (RST in or out); frees its buffers.
    pub(crate) fn reset(&mut self, ctx: &mut Ctx<B>, by_peer: bool) {
        self.state = State::Closed;
        self.closing.fin_deadline = None;
        self.closing.tw_deadline = None;
        self.ack = AckState::new(self.ack.policy(), self.rcv.advmss, 536, Duration::ZERO);
        self.acks.clear(&mut ctx.ack_spare);
        ctx.ooo.clear(&mut self.rcv.ooo);
        self.rcv.rxq.clear();
        ctx.rxq_spare.give_back(&mut self.rcv.rxq);
        self.rcv.rxq_bytes = 0;
        ctx.snd_slices_changed(self.snd.slices(), 0);
        self.snd.clear(&mut ctx.spent);
        self.snd.timer = None;
        self.open = None;
        self.closing.write_closed = true;
        let _ = by_peer;
        ctx.stats.conns_reset += 1;
        ctx.event(Event::Reset(self.id));
    }

    /// Sends a RST and closes (application abort, data after close, FIN retries spent).
    pub(crate) fn abort(&mut self, ctx: &mut Ctx<B>) {
        if matches!(self.state, State::Closed) {
            return;
        }
        // RFC 9293 §3.10.5, ABORT in SYN-SENT: no RST (the peer knows no connection).
        let rst = self.state != State::SynSent;
        self.reset(ctx, false);
        self.closing.rst_due = rst;
        self.mark_due(ctx);
    }

    /// The application closes (RFC 9293 §3.10.4): FIN after the queued data, or RST if
    /// unread data is dropped (RFC 2525 §2.17, as Linux `tcp_close` does).
    pub(crate) fn close(&mut self, now: Instant, ctx: &mut Ctx<B>) {
        if self.closing.app_closed {
            return;
        }
        self.closing.app_closed = true;
        if self.open.is_some() {
            // RFC 9293 §3.10.4, CLOSE in SYN-SENT: delete the TCB (no segment was
            // synchronized). In a simultaneous open's SYN-RECEIVED weir does the same,
            // and a RST tells the peer.
            let rst = self.state == State::SynReceived;
            self.open = None;
            self.snd.timer = None;
            self.state = State::Closed;
            self.closing.write_closed = true;
            self.closing.rst_due = rst;
            ctx.stats.conns_closed += 1;
            ctx.event(Event::Closed(self.id));
            self.mark_due(ctx);
            return;
        }
        if self.rcv.rxq_bytes > 0 {
            self.abort(ctx);
            return;
        }
        self.shutdown(ctx);
        if self.state == State::FinWait2 {
            // Half-closed before, and our FIN is already acknowledged.
            self.orphan_deadline(now);
            self.after_input(ctx);
        }
    }

    /// The application will write no more (RFC 9293 §3.10.4 CLOSE for the sending
    /// direction; Linux `tcp_shutdown(SEND_SHUTDOWN)`): our FIN is queued after the data
    /// already written (ESTABLISHED -> FIN-WAIT-1, CLOSE-WAIT -> LAST-ACK). It is built
    /// once every queued byte has been sent, on the last data segment when it can ride
    /// there (`tcp_send_fin`); its retransmission timer starts when it is first sent.
    pub(crate) fn shutdown(&mut self, ctx: &mut Ctx<B>) {
        if self.closing.write_closed {
            return;
        }
        self.closing.write_closed = true;
        // No write can follow, so a short write's `Event::Writable` is no longer owed,
        // nor one already queued and not yet taken by the application.
        self.snd.writable_armed = false;
        let id = self.id;
        ctx.events.retain(|e| *e != Event::Writable(id));
        match self.state {
            State::Established => self.state = State::FinWait1,
            State::CloseWait => self.state = State::LastAck,
            _ => return,
        }
        self.closing.fin_due = true;
        self.closing.fin_tries = 0;
        self.after_input(ctx);
    }

    /// Our FIN went out for the first time (`fin_seq` is its sequence number, after the
    /// last queued byte): SND.NXT moves past it and its retransmission timer starts.
    pub(crate) fn fin_sent(&mut self, now: Instant) {
        self.closing.fin_due = false;
        if !self.closing.fin_sent {
            self.closing.fin_sent = true;
            self.snd.nxt = self.snd.end + 1;
        }
        if self.closing.fin_deadline.is_none() {
            self.closing.fin_deadline = Some(now + self.fin_rto());
        }
    }

    /// An ACK reached our FIN's sequence number (every byte before it is acknowledged,
    /// the FIN is not): from now the FIN's own timer runs, at most a base RTO away. While
    /// data was outstanding it waited with the data's retransmission timer
    /// (`closing_timeout`), which may have backed off far beyond that.
    pub(crate) fn data_before_fin_acked(&mut self, now: Instant) {
        if self.closing.fin_sent && self.snd.una == self.snd.end && self.snd.una != self.snd.nxt {
            let t = now + self.fin_rto();
            self.closing.fin_deadline = Some(self.closing.fin_deadline.map_or(t, |d| d.min(t)));
        }
    }

    /// The first retransmission timeout of our FIN: the connection's RTO without backoff
    /// (RFC 6298 §2); each retry doubles it (§5.5).
    fn fin_rto(&self) -> Duration {
        self.snd.rtt.base_rto()
    }

    /// The closing states' timers: our FIN is retransmitted with exponential backoff, or
    /// after `fin_retries` the connection is reset (`Break`); TIME-WAIT ends in CLOSED.
    /// While data before the FIN is unacknowledged the FIN is not sent alone: the
    /// retransmission timer resends that data with the FIN on its last segment
    /// (`build_data`), and bounds the retries (`max_retries`). A FIN alone past the hole
    /// would be lost on a receiver that keeps no out-of-order FIN, and its own retries
    /// would run out while the data's have not.
    pub(crate) fn closing_timeout(&mut self, now: Instant, ctx: &mut Ctx<B>) -> ControlFlow<()> {
        if let Some(t) = self.closing.fin_deadline {
            if t <= now && self.snd.una < self.snd.end {
                // The data's retransmission timer covers the FIN, which rides the last
                // segment: wake with it, not every base RTO in between (a backed-off RTO
                // of minutes would otherwise be waited out in thousands of empty wakes).
                let rto = self.snd.rto_at.filter(|&r| r > now);
                self.closing.fin_deadline = Some(rto.unwrap_or(now + self.fin_rto()));
            } else if t <= now {
                if self.closing.fin_tries >= self.closing.fin_retries {
                    ctx.stats.dropped(DropReason::FinRetriesExhausted);
                    self.abort(ctx);
                    return ControlFlow::Break(());
                }
                self.closing.fin_tries += 1;
                self.closing.fin_due = true;
                if !self.snd.fin_fits() {
                    // The window has no room for the FIN (`build` holds it): probe it
                    // instead, which the peer answers with its ACK and window (RFC 9293
                    // §3.8.6.1), acknowledging the FIN if it had it.
                    self.snd.probe_due = true;
                }
                let backoff = self.fin_rto().as_nanos() << self.closing.fin_tries.min(10);
                self.closing.fin_deadline = Some(now + Duration::from_nanos(backoff));
            }
        }
        if let Some(t) = self.closing.tw_deadline {
            if t <= now {
                self.end_time_wait(ctx);
            }
        }
        ControlFlow::Continue(())
    }

    /// TIME-WAIT is over (2 MSL passed, or a RST ended it), or an orphaned FIN-WAIT-2's
    /// wait (`orphan_deadline`): CLOSED, cleanly.
    pub(crate) fn end_time_wait(&mut self, ctx: &mut Ctx<B>) {
        self.closing.tw_deadline = None;
        self.state = State::Closed;
        ctx.stats.conns_closed += 1;
        ctx.event(Event::Closed(self.id));
    }

    /// `true` when the connection is gone and nothing more is owed.
    pub(crate) fn reapable(&self) -> bool {
        matches!(self.state, State::Closed) && !self.closing.rst_due && !self.queued
    }
}
