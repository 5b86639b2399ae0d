//! Segment arrival on a synchronized connection: RFC 9293 §3.10.7.4, one function per
//! step, called in the RFC's order by [`Conn::process`].
//!
//! Read first: RFC 9293 §3.10.7.4 (the order of checks on an arriving segment), RFC 7323
//! §4.3 and §5 (TS.Recent, PAWS), RFC 2018 §4 and RFC 2883 (SACK, D-SACK), RFC 5961
//! §3-5 and §7 (blind RST/SYN/ACK, the challenge ACK limit), Linux
//! `tcp_validate_incoming`, `tcp_ack`, `tcp_data_queue`, `tcp_ofo_queue`.
//!
//! An in-order data segment passes every step. Each step is `#[inline(always)]` (each has
//! one caller) so that `process` stays one body, and the in-order path runs its checks in
//! this order: PAWS, acceptability, RST, SYN, ACK, TS.Recent, then the text.

use std::ops::ControlFlow::{self, Break, Continue};

use super::conn::{Conn, Ctx};
use super::ooo::OooReject;
use super::{DropReason, Event, State};
use crate::ack::{AckReason, SndCheck};
use crate::buf::PacketBuf;
use crate::segment::Segment;
use crate::seq::SeqNumber;
use crate::time::{Duration, Instant};
use crate::wire::{SackBlock, TcpFlags};

/// RFC 7323 §5.5: TS.Recent is invalid after 24 days idle.
const PAWS_IDLE: Duration = Duration::from_secs(24 * 24 * 3600);

/// The outcome of one step: `Continue` to the next, or `Break` when the segment's
/// processing ends here (it was dropped, answered or fully used).
type Step<T = ()> = ControlFlow<(), T>;

/// Where the seventh step put a segment's text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Text {
    /// At RCV.NXT: on the receive queue.
    InOrder,
    /// Beyond RCV.NXT: held in the out-of-order queue.
    OutOfOrder,
}

/// `a` is before `b` in 32-bit timestamp space (RFC 7323 §5.2).
fn ts_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl<B: PacketBuf> Conn<B> {
    /// Processes one segment for this connection, then snapshots any ACK it decided and
    /// queues the connection for `poll_tx` (`after_input`).
    pub(crate) fn on_segment(&mut self, now: Instant, seg: &mut Segment<B>, ctx: &mut Ctx<B>) {
        // Where the steps stopped does not matter here: every outcome ends the same way.
        let _ = self.process(now, seg, ctx);
        self.after_input(ctx);
    }

    /// RFC 9293 §3.10.7.4, "Otherwise" (the synchronized states): the steps in order.
    fn process(&mut self, now: Instant, seg: &mut Segment<B>, ctx: &mut Ctx<B>) -> Step {
        if matches!(self.state, State::Closed) {
            return Break(());
        }
        let wnd = self.check_sequence(now, seg, ctx)?;
        self.check_rst(now, seg, ctx)?;
        // Third, check security: weir keeps no IP security compartment (it neither sends
        // nor reads the IP security option), so there is nothing to compare.
        self.check_syn(now, seg, ctx)?;
        self.check_ack(now, seg, ctx)?;
        self.update_ts_recent(now, seg);
        // Sixth, check the URG bit: weir does not implement urgent data (RFC 6093 advises
        // new applications against it); the URG bit is ignored and urgent bytes arrive in
        // line with the rest.
        let text = self.process_text(now, seg, wnd, ctx)?;
        if text == Text::InOrder {
            self.check_fin(now, ctx);
        }
        self.ack_snd_check(now, text);
        Continue(())
    }

    /// RFC 9293 §3.10.7.4 first, check the sequence number: PAWS (RFC 7323 §5.3 R1, which
    /// comes before the acceptability test), then the acceptability test. An unacceptable
    /// segment other than a RST is answered with an ACK and dropped. Returns the window
    /// the test used, which the seventh step trims to.
    #[inline(always)]
    fn check_sequence(&mut self, now: Instant, seg: &Segment<B>, ctx: &mut Ctx<B>) -> Step<u32> {
        let rst = seg.flags.contains(TcpFlags::RST);
        let plen = seg.payload.len();
        let seq = seg.seq;
        let end = seq + seg.seq_len();

        // RFC 7323 §5.3 R1: PAWS, checked against the run's FIRST TSval (`opts.timestamp`),
        // not its last (`ts_last`). GRO merges a segment only if its TSval is equal to or
        // newer than the previous one's (docs/decisions/gro-timestamp-rule.md), so when the
        // first passes every later TSval of the run passes too; and the first is the one
        // TS.Recent takes and every ACK echoes (§4.3). Checking `ts_last` instead would let
        // a run whose first segment is an old duplicate through, and taking TS.Recent from
        // it would make the next run's first segment look older than TS.Recent whenever the
        // sender's clock ticked inside a run. The cost: a run whose first segment fails
        // PAWS is dropped whole (Linux, without GRO, would drop only that segment); the
        // sender retransmits.
        let ts = seg.opts.timestamp;
        if self.rcv.ts_ok && !rst {
            if let Some(t) = ts {
                if ts_before(t.tsval, self.rcv.ts_recent)
                    && now - self.rcv.ts_recent_stamp < PAWS_IDLE
                    && self.rcv.ts_recent_stamp != Instant::ZERO
                {
                    ctx.stats.dropped(DropReason::Paws);
                    self.send_dupack(seq, end, plen > 0);
                    return Break(());
                }
            }
        }

        // Is the segment acceptable? (the four cases of the RFC's table)
        let wnd = self.rcv.window();
        let seg_len = seg.seq_len();
        let in_wnd = |s: SeqNumber| s.in_range(self.rcv.nxt, self.rcv.nxt + wnd as usize);
        let acceptable = match (seg_len, wnd) {
            (0, 0) => seq == self.rcv.nxt,
            (0, _) => in_wnd(seq),
            (_, 0) => false,
            (_, _) => in_wnd(seq) || in_wnd(seq + (seg_len - 1)),
        };
        if !acceptable {
            if rst {
                ctx.stats.dropped(DropReason::RstOutOfWindow);
                return Break(());
            }
            if end <= self.rcv.nxt && seg_len > 0 {
                ctx.stats.duplicate_segments += u64::from(seg.segs);
            }
            ctx.stats.dropped(DropReason::OutOfWindow);
            self.send_dupack(seq, end, seg_len > 0);
            return Break(());
        }
        Continue(wnd)
    }

    /// RFC 9293 §3.10.7.4 second, check the RST bit, as RFC 5961 §3.2 narrows it: only an
    /// exact RST (at RCV.NXT) resets; one elsewhere in the window gets a challenge ACK.
    #[inline(always)]
    fn check_rst(&mut self, now: Instant, seg: &Segment<B>, ctx: &mut Ctx<B>) -> Step {
        if !seg.flags.contains(TcpFlags::RST) {
            return Continue(());
        }
        if seg.seq == self.rcv.nxt {
            ctx.stats.resets_received += 1;
            if self.state == State::TimeWait {
                // TIME-WAIT: "enter the CLOSED state". Both FINs were acknowledged, so
                // the connection closed cleanly and ends as at the end of 2 MSL; Linux
                // kills the TIME-WAIT socket quietly (`tcp_timewait_state_process` with
                // `tcp_rfc1337` = 0). A late duplicate of our last ACK, reaching a peer
                // that has already closed, draws exactly this RST.
                self.end_time_wait(ctx);
            } else {
                self.reset(ctx, true);
            }
        } else {
            ctx.stats.dropped(DropReason::RstInWindow);
            self.challenge(now, ctx);
        }
        Break(())
    }

    /// RFC 9293 §3.10.7.4 fourth, check the SYN bit: in a synchronized state a SYN gets a
    /// challenge ACK and is dropped (RFC 5961 §4.2).
    #[inline(always)]
    fn check_syn(&mut self, now: Instant, seg: &Segment<B>, ctx: &mut Ctx<B>) -> Step {
        if !seg.flags.contains(TcpFlags::SYN) {
            return Continue(());
        }
        ctx.stats.dropped(DropReason::SynInWindow);
        self.challenge(now, ctx);
        Break(())
    }

    /// RFC 9293 §3.10.7.4 fifth, check the ACK field: a segment without ACK is dropped; an
    /// unacceptable ACK gets a challenge ACK (RFC 5961 §5.2); an ACK that is not old
    /// updates the send window (SND.WND, SND.WL1, SND.WL2); with data outstanding it
    /// drives loss detection, the RTT estimate and congestion control (`sender_ack`); an
    /// ACK of new data moves
    /// SND.UNA, frees the acknowledged send buffers (raising `Event::Writable` when a
    /// write had found the buffer full), and one that acknowledges our FIN moves the
    /// closing states on (`our_fin_acked`: FIN-WAIT-1, CLOSING, LAST-ACK). A connection
    /// that has sent no data pays two comparisons and the window's three stores here.
    #[inline(always)]
    fn check_ack(&mut self, now: Instant, seg: &Segment<B>, ctx: &mut Ctx<B>) -> Step {
        if !seg.flags.contains(TcpFlags::ACK) {
            ctx.stats.dropped(DropReason::NoAck);
            return Break(());
        }
        // RFC 5961 §5.2: SND.UNA - MAX.SND.WND <= SEG.ACK <= SND.NXT, else challenge ACK.
        let min_ack = SeqNumber(self.snd.una.get().wrapping_sub(self.snd.max_wnd));
        if seg.ack > self.snd.nxt || seg.ack < min_ack {
            ctx.stats.dropped(DropReason::BadAck);
            self.challenge(now, ctx);
            return Break(());
        }
        let wnd_scaled = u32::from(seg.window) << self.snd.wscale;
        self.snd.max_wnd = self.snd.max_wnd.max(wnd_scaled);
        let wnd_changed = wnd_scaled != self.snd.wnd;
        ctx.stats.acks_received += 1;
        if seg.ack > self.snd.una {
            ctx.stats.acks_new_data += 1;
        } else if seg.ack == self.snd.una
            && self.snd.nxt != self.snd.una
            && seg.payload.is_empty()
            && !wnd_changed
            && !seg.flags.intersects(TcpFlags::SYN | TcpFlags::FIN)
        {
            // RFC 5681 §2's DUPLICATE ACKNOWLEDGMENT (without its SACK clause).
            ctx.stats.dupacks_received += 1;
        }
        // The window update: "If SND.UNA =< SEG.ACK =< SND.NXT, the send window should be
        // updated. If (SND.WL1 < SEG.SEQ or (SND.WL1 = SEG.SEQ and SND.WL2 =< SEG.ACK)),
        // set SND.WND <- SEG.WND, set SND.WL1 <- SEG.SEQ, and set SND.WL2 <- SEG.ACK."
        // And, as Linux `tcp_may_update_window` does, whenever SEG.ACK moves SND.UNA: the
        // peer's retransmission into a hole has a SEG.SEQ below SND.WL1 (its later
        // segments moved it) but carries its current ACK and window; keeping the old
        // SND.WND, now counted from the new SND.UNA, would be a right edge the peer never
        // offered. The window may shrink here; `Snd::cut` never sends beyond SND.UNA +
        // SND.WND.
        if seg.ack > self.snd.una
            || (seg.ack == self.snd.una
                && (self.snd.wl1 < seg.seq || (self.snd.wl1 == seg.seq && self.snd.wl2 <= seg.ack)))
        {
            self.snd.wnd = wnd_scaled;
            self.snd.wl1 = seg.seq;
            self.snd.wl2 = seg.ack;
        }
        // Loss detection, the RTT sample and congestion control, for a connection that
        // has sent data and has some outstanding or newly acknowledged (`conn/send.rs`).
        if self.snd.rec.is_some() && (seg.ack > self.snd.una || self.snd.nxt != self.snd.una) {
            self.sender_ack(now, seg, wnd_changed, ctx);
        }
        if seg.ack > self.snd.una {
            self.snd.una = seg.ack;
            if self.snd.queued() > 0 {
                let before = self.snd.slices();
                let writable = self.snd.acked(seg.ack, &mut ctx.spent);
                ctx.snd_slices_changed(before, self.snd.slices());
                if writable {
                    ctx.event(Event::Writable(self.id));
                }
            }
            self.data_before_fin_acked(now);
            if self.closing.fin_sent && self.snd.una == self.snd.nxt {
                self.our_fin_acked(now, ctx);
                if matches!(self.state, State::Closed) {
                    return Break(());
                }
            }
        }
        Continue(())
    }

    /// RFC 7323 §4.3 (3) and §5.3 R3: TS.Recent from a segment with SEG.SEQ <=
    /// Last.ACK.sent, once its ACK is accepted (where Linux's `tcp_ack` calls
    /// `tcp_replace_ts_recent`). For a coalesced run this is the first segment's TSval:
    /// the ACK covering the run echoes the earliest unacknowledged segment's timestamp
    /// (§4.3 (2), as for a delayed ACK), so the sender's RTT sample includes the time GRO
    /// held the run. `ts_last` is not used for TS.Recent (see `check_sequence`).
    #[inline(always)]
    fn update_ts_recent(&mut self, now: Instant, seg: &Segment<B>) {
        if self.rcv.ts_ok {
            if let Some(t) = seg.opts.timestamp {
                if seg.seq <= self.rcv.last_ack_sent && !ts_before(t.tsval, self.rcv.ts_recent) {
                    self.rcv.ts_recent = t.tsval;
                    self.rcv.ts_recent_stamp = now;
                }
            }
        }
    }

    /// RFC 9293 §3.10.7.4 seventh, process the segment text: none may follow the peer's
    /// FIN, none may reach a connection the application closed; the rest is trimmed to the
    /// window and queued in order or out of order. A FIN that survives the trim is
    /// recorded where it sits (`Recv::ooo_fin`) for the eighth step.
    #[inline(always)]
    fn process_text(
        &mut self,
        now: Instant,
        seg: &mut Segment<B>,
        wnd: u32,
        ctx: &mut Ctx<B>,
    ) -> Step<Text> {
        let mut fin = seg.flags.contains(TcpFlags::FIN);
        let plen = seg.payload.len();
        if plen == 0 && !fin {
            return Break(());
        }
        match self.state {
            State::Established | State::FinWait1 | State::FinWait2 => {}
            _ => {
                // The peer's FIN was already received: nothing more may arrive.
                if plen > 0 {
                    ctx.stats.dropped(DropReason::DataAfterFin);
                }
                self.ack.ack_now(AckReason::Duplicate);
                return Break(());
            }
        }
        let end = seg.seq + seg.seq_len();
        if self.closing.app_closed && plen > 0 && end > self.rcv.nxt {
            // RFC 9293 §3.10.7.4 / RFC 2525: data for a fully closed socket: reset.
            ctx.stats.dropped(DropReason::DataAfterClose);
            self.abort(ctx);
            return Break(());
        }

        // Trim to the window: the front (a partial retransmission, D-SACK its old part,
        // RFC 2883 §4.1.2) and the tail (beyond the right edge; a FIN there is dropped).
        let mut seq = seg.seq;
        if seq < self.rcv.nxt {
            let cut = (self.rcv.nxt - seq) as u32;
            if self.rcv.sack_ok {
                self.rcv.dsack = Some(SackBlock {
                    left: seq,
                    right: self.rcv.nxt,
                });
            }
            seg.payload.trim_front(cut.min(plen));
            ctx.stats.duplicate_bytes += u64::from(cut.min(plen));
            seq = self.rcv.nxt;
        }
        let right = self.rcv.nxt + wnd as usize;
        let mut plen = seg.payload.len();
        if seq + plen as usize > right {
            let keep = (right - seq) as u32;
            ctx.stats.dropped(DropReason::BeyondWindow);
            seg.payload.truncate(keep);
            plen = keep;
            fin = false;
        }

        if seq == self.rcv.nxt {
            self.queue_in_order(now, seg, plen, fin, ctx)?;
            Continue(Text::InOrder)
        } else {
            self.queue_out_of_order(seg, seq, plen, fin, ctx);
            Continue(Text::OutOfOrder)
        }
    }

    /// The seventh step's text at RCV.NXT (Linux `tcp_data_queue`): onto the receive
    /// queue, then any out-of-order data it made contiguous. `Break` when the receive queue
    /// has no room for the segment's buffers.
    #[inline(always)]
    fn queue_in_order(
        &mut self,
        now: Instant,
        seg: &mut Segment<B>,
        plen: u32,
        fin: bool,
        ctx: &mut Ctx<B>,
    ) -> Step {
        let psh = seg.flags.contains(TcpFlags::PSH);
        let remnant = seg
            .flags
            .intersects(TcpFlags::FIN | TcpFlags::URG | TcpFlags::PSH);
        let had_ofo = !self.rcv.ooo.is_empty();
        let mut plen = plen;
        let mut fin = fin;
        if plen > 0 {
            // Slice by slice: a queue short of slots takes what fits (the window counted
            // free slices as `rxq_slice_bytes` each, so this happens only when buffers
            // could not be coalesced), and the rest is refused as beyond what we hold.
            let mut taken = 0u32;
            for s in seg.payload.drain() {
                let l = u32::from(s.len);
                if self
                    .rcv
                    .push_in_order(s, &mut ctx.spent, &mut ctx.rxq_spare)
                    .is_err()
                {
                    break;
                }
                taken += l;
            }
            if taken < plen {
                ctx.stats.dropped(DropReason::RxQueueFull);
                self.ack.ack_now(AckReason::Duplicate);
                if taken == 0 {
                    return Break(());
                }
                plen = taken;
                fin = false;
            }
            self.rcv.rxq_bytes += plen;
            self.rcv.nxt += plen as usize;
            ctx.stats.bytes_in_order += u64::from(plen);
            ctx.stats.segments_in_order += u64::from(seg.segs);
            let w = self.rcv.window();
            self.ack.on_data(
                now,
                plen,
                u32::from(seg.gso_size),
                seg.segs,
                psh,
                remnant,
                w,
            );
        }
        if fin {
            self.rcv.ooo_fin = Some(self.rcv.nxt);
        }
        if had_ofo {
            self.drain_ooo(ctx);
            if self.rcv.ooo.is_empty() {
                // RFC 5681 §4.2: ACK at once when a segment fills a gap (ICSK_ACK_NOW).
                self.ack.ack_now(AckReason::GapFill);
            }
        }
        self.prune_sack();
        if plen > 0 {
            self.signal_readable(ctx);
        }
        Continue(())
    }

    /// The seventh step's text beyond RCV.NXT: hold it, SACK it (RFC 2018 §4), and let
    /// the ACK policy know an ACK is due.
    #[inline(always)]
    fn queue_out_of_order(
        &mut self,
        seg: &mut Segment<B>,
        seq: SeqNumber,
        plen: u32,
        fin: bool,
        ctx: &mut Ctx<B>,
    ) {
        let segs = u64::from(seg.segs);
        if fin {
            self.rcv.ooo_fin = Some(seq + plen as usize);
        }
        if plen > 0 {
            let n = seg.payload.slice_count();
            let res = ctx.ooo.insert(
                &mut self.rcv.ooo,
                seq,
                plen,
                n,
                self.rcv.ooo_limit,
                seg.payload.drain(),
            );
            match res {
                Ok(0) => {
                    ctx.stats.duplicate_segments += segs;
                    ctx.stats.duplicate_bytes += u64::from(plen);
                    if self.rcv.sack_ok {
                        self.rcv.dsack = Some(SackBlock {
                            left: seq,
                            right: seq + plen as usize,
                        });
                    }
                }
                Ok(_) => {
                    ctx.stats.ooo_segments += segs;
                    ctx.stats.ooo_bytes += u64::from(plen);
                    self.sack_new_ofo(seq, ctx);
                }
                Err(OooReject::ConnLimit) => ctx.stats.dropped(DropReason::OooConnLimit),
                Err(OooReject::CoreLimit) => ctx.stats.dropped(DropReason::OooCoreLimit),
            }
        }
        self.ack.schedule();
    }

    /// RFC 9293 §3.10.7.4 eighth, check the FIN bit: once the peer's FIN is in order (at
    /// RCV.NXT, where the seventh step or a drained out-of-order FIN left it), it is
    /// processed (`on_fin`, `tcp/close.rs`).
    #[inline(always)]
    fn check_fin(&mut self, now: Instant, ctx: &mut Ctx<B>) {
        if self.rcv.ooo_fin == Some(self.rcv.nxt) {
            self.on_fin(now, ctx);
        }
    }

    /// After the text: whether to ACK now or later (RFC 5681 §4.2, RFC 9293 §3.10.7.4's
    /// "send an acknowledgment"; Linux `__tcp_ack_snd_check`).
    #[inline(always)]
    fn ack_snd_check(&mut self, now: Instant, text: Text) {
        let check = SndCheck {
            unacked_bytes: (self.rcv.nxt - self.rcv.wup) as u32,
            window_ok: self.rcv.window_ok(),
            ofo: !self.rcv.ooo.is_empty(),
            data_was_ofo: text == Text::OutOfOrder,
            sack: self.rcv.sack_ok,
            rcv_nxt: self.rcv.nxt,
        };
        self.ack.snd_check(now, check);
    }

    /// RFC 5961 §7-limited challenge ACK.
    fn challenge(&mut self, now: Instant, ctx: &mut Ctx<B>) {
        if ctx.challenge_allowed(now) {
            ctx.stats.challenge_acks += 1;
            self.ack.ack_now(AckReason::Challenge);
        } else {
            ctx.stats.dropped(DropReason::ChallengeRateLimited);
        }
    }

    /// `tcp_send_dupack`: old data gets a D-SACK and quickack mode; then ACK now.
    fn send_dupack(&mut self, seq: SeqNumber, end: SeqNumber, has_data: bool) {
        if has_data && seq < self.rcv.nxt {
            let w = self.rcv.window();
            self.ack.enter_quickack_mode(w);
            if self.rcv.sack_ok {
                self.rcv.dsack = Some(SackBlock {
                    left: seq,
                    right: end.min(self.rcv.nxt),
                });
            }
        }
        self.ack.ack_now(AckReason::Duplicate);
    }

    fn signal_readable(&mut self, ctx: &mut Ctx<B>) {
        if !self.rcv.readable_signalled && !self.closing.app_closed {
            self.rcv.readable_signalled = true;
            ctx.event(Event::Readable(self.id));
        }
    }

    /// Moves now-contiguous out-of-order data to the receive queue (`tcp_ofo_queue`).
    /// Small slices are coalesced as in-order segments are ([`Recv::push_in_order`]);
    /// what does not fit stays held out of order.
    fn drain_ooo(&mut self, ctx: &mut Ctx<B>) {
        while self.rcv.has_slots(1) {
            let Some(s) = ctx.ooo.pop_ready(&mut self.rcv.ooo, self.rcv.nxt) else {
                break;
            };
            let l = u32::from(s.len);
            if let Err(s) = self
                .rcv
                .push_in_order(s, &mut ctx.spent, &mut ctx.rxq_spare)
            {
                // Not reached (a slot was free); hold it again rather than lose it.
                let held = ctx
                    .ooo
                    .insert(&mut self.rcv.ooo, self.rcv.nxt, l, 1, u32::MAX, [s]);
                if held.is_err() {
                    ctx.stats.dropped(DropReason::RxQueueFull);
                }
                break;
            }
            self.rcv.rxq_bytes += l;
            self.rcv.nxt += l as usize;
            ctx.stats.bytes_in_order += u64::from(l);
        }
    }

    /// `tcp_sack_new_ofo_skb`: the block holding the new data goes first (RFC 2018 §4),
    /// merged with any block it now touches; older blocks follow.
    fn sack_new_ofo(&mut self, seq: SeqNumber, ctx: &Ctx<B>) {
        if !self.rcv.sack_ok {
            return;
        }
        let Some((l, r)) = ctx.ooo.block_around(&self.rcv.ooo, seq) else {
            return;
        };
        self.rcv.sack.retain(|b| b.right < l || b.left > r);
        if self.rcv.sack.is_full() {
            self.rcv.sack.pop();
        }
        self.rcv.sack.insert(0, SackBlock { left: l, right: r });
    }

    /// `tcp_sack_remove`: blocks at or below RCV.NXT are acknowledged cumulatively.
    fn prune_sack(&mut self) {
        let nxt = self.rcv.nxt;
        self.rcv.sack.retain(|b| b.right > nxt);
        for b in self.rcv.sack.iter_mut() {
            if b.left < nxt {
                b.left = nxt;
            }
        }
    }
}
