//! What a connection sends, built into frames: data segments cut from its send queue,
//! ACK snapshots taken at the decision and the ACK, FIN and RST frames built from them in
//! `poll_tx`; and the stateless frames of the listener and of segments for no connection
//! (SYN-ACKs, RSTs).
//!
//! Read first: RFC 9293 §3.8.6.2.1 and Linux `tcp_write_xmit` (segmentation; the
//! decision itself is `Snd::cut` in `conn/send.rs`), Linux `tcp_event_ack_sent` (a data
//! segment settles the ACK owed), RFC 9293 §3.10.7.1 (the reset for a segment that
//! reached no connection), RFC 7323 §3 and §4.3 (the timestamp option, TSecr), RFC 2018
//! §4 and RFC 2883 (SACK and D-SACK blocks), Linux `tcp_send_ack`, `tcp_send_fin`,
//! `tcp_v4_send_reset`.

use arrayvec::ArrayVec;

use super::conn::{Conn, Ctx, Hold};
use super::listen::HalfOpen;
use super::timer::Kind;
use super::{DropReason, Event, State, Tcp};
use crate::ack::template::{sack_option, syn_options, AckTemplate, TcpFields};
use crate::ack::{AckPush, AckReason, AckSnapshot};
use crate::buf::{BufPool, PacketBuf};
use crate::driver::Burst;
use crate::flow::FlowKey;
use crate::segment::Segment;
use crate::seq::SeqNumber;
use crate::spare::Spare;
use crate::tcp::recovery::MAX_UNIT_BYTES;
use crate::time::Instant;
use crate::wire::{SackBlock, TcpFlags, Timestamp, MAX_SACK_BLOCKS};

impl<B: PacketBuf> Conn<B> {
    /// `tcp_send_ack` at the moment of the decision: the ACK number, window (through
    /// `tcp_select_window`, which also sets `rcv_wup`), TSecr and SACK blocks are taken now
    /// and queued; the frame is built in `poll_tx`. Later decisions see the state this ACK
    /// left (`rcv_nxt - rcv_wup` restarts from zero, one quick ACK is used up), exactly as
    /// when Linux sends at once.
    pub(crate) fn commit_ack(&mut self, ctx: &mut Ctx<B>) {
        let Some(reason) = self.ack.due() else {
            return;
        };
        if matches!(self.state, State::Closed) {
            return;
        }
        let window = self.select_window();
        let (ack, tsecr) = (self.rcv.nxt, self.rcv.ts_recent);
        let sacks = self.rcv.sack_ok.then(|| {
            let max = self.tmpl.max_sack_blocks().min(MAX_SACK_BLOCKS);
            self.rcv.dsack.iter().chain(self.rcv.sack.iter()).take(max)
        });
        // Written in place in the queue (see `AckQueue::push_with`).
        let pushed = self.acks.push_with(&mut ctx.ack_spare, |snap| {
            snap.ack = ack;
            snap.window = window;
            snap.tsecr = tsecr;
            snap.reason = reason;
            for (slot, b) in snap.sack.iter_mut().zip(sacks.into_iter().flatten()) {
                *slot = *b;
                snap.sack_count += 1;
            }
        });
        match pushed {
            AckPush::Queued => {}
            AckPush::Merged => ctx.ack_stats.merged += 1,
            AckPush::Suppressed => ctx.ack_stats.suppressed += 1,
        }
        self.rcv.wup = self.rcv.nxt;
        self.rcv.free_edge = self.rcv.nxt + self.rcv.free_space() as usize;
        self.rcv.dsack = None;
        self.ack.on_ack_sent();
    }

    /// Builds the next frame this connection owes into a buffer and appends it to `out`
    /// (which has room for one): a RST; else the next data segment the send side allows
    /// (it carries the ACK owed, and settles the queued in-order ACKs), followed by up to
    /// `unit - 1` more of new data while `out` has room (a send unit, see
    /// [`Conn::build_unit_rest`]); else the oldest queued ACK; else our FIN once every
    /// queued byte has been sent. `Ok(None)`: nothing is owed. `Err(())`: the pool is
    /// empty (nothing is consumed; it stays owed).
    pub(crate) fn build<P: BufPool<Buf = B>>(
        &mut self,
        now: Instant,
        pool: &mut P,
        offload: bool,
        spare: &mut Spare<AckSnapshot>,
        out: &mut Burst<B>,
        unit: u32,
    ) -> Result<Option<Sent>, ()> {
        if self.closing.rst_due {
            let f = TcpFields {
                seq: self.snd.nxt,
                ack: self.rcv.nxt,
                flags: TcpFlags::RST | TcpFlags::ACK,
                window: 0,
                ts: Timestamp {
                    tsval: self.ts_now(now),
                    tsecr: self.rcv.ts_recent,
                },
            };
            let b = self.tmpl.build(pool, &f, &[], offload).ok_or(())?;
            self.closing.rst_due = false;
            out.push(b);
            return Ok(Some(Sent::Ack(AckReason::Rst)));
        }
        if let Some(o) = self.open {
            // The handshake of an active open: its SYN or SYN-ACK, and nothing else.
            if o.syn_due {
                return Ok(self.build_syn(now, pool, offload)?.map(|(b, sent)| {
                    out.push(b);
                    sent
                }));
            }
            return Ok(None);
        }
        if (self.snd.unsent() > 0 || self.snd.rec.is_some()) && !matches!(self.state, State::Closed)
        {
            if let Some(d) = self.build_data(now, pool, offload, spare, out, unit)? {
                return Ok(Some(d));
            }
        }
        if let Some(snap) = self.acks.front() {
            // Field by field, not a copy of the whole snapshot: one queued moments ago
            // (by `consume`, just before `poll_tx`) may still be in the store buffer,
            // and a wide load over its narrow stores would wait for them to drain.
            let (ack, reason, window, tsecr) = (snap.ack, snap.reason, snap.window, snap.tsecr);
            let mut opt = [0u8; 36];
            let n = sack_option(snap.sack_blocks(), &mut opt);
            let window = self.queued_ack_window(ack, window);
            let f = TcpFields {
                seq: self.snd.nxt,
                ack,
                flags: TcpFlags::ACK,
                window,
                ts: Timestamp {
                    tsval: self.ts_now(now),
                    tsecr,
                },
            };
            let b = self.tmpl.build(pool, &f, &opt[..n], offload).ok_or(())?;
            self.acks.pop_front(spare);
            self.rcv.last_ack_sent = ack;
            out.push(b);
            return Ok(Some(Sent::Ack(reason)));
        }
        if self.snd.probe_due {
            let (b, sent) = self.build_probe(now, pool, offload)?;
            out.push(b);
            return Ok(Some(sent));
        }
        // Our FIN goes after the last queued byte (RFC 9293 §3.10.4): while data is
        // unsent it waits, and rides the last data segment.
        if !self.closing.fin_due || self.snd.nxt < self.snd.end {
            return Ok(None);
        }
        if !self.snd.fin_fits() {
            // No room in the peer's window for the FIN's sequence number: it waits, and
            // the persist timer probes the window when nothing else is in flight.
            if self.snd.nxt == self.snd.una {
                self.snd.arm_persist(now);
            }
            return Ok(None);
        }
        // Our FIN (first or retransmitted) carries an ACK of everything received: it is
        // an ACK sent now (`tcp_send_fin` -> `tcp_transmit_skb` -> `tcp_event_ack_sent`).
        let window = self.select_window();
        let blocks = self.sack_blocks();
        let mut opt = [0u8; 36];
        let n = sack_option(&blocks, &mut opt);
        let f = TcpFields {
            seq: self.snd.end,
            ack: self.rcv.nxt,
            flags: TcpFlags::ACK | TcpFlags::FIN,
            window,
            ts: Timestamp {
                tsval: self.ts_now(now),
                tsecr: self.rcv.ts_recent,
            },
        };
        let b = self.tmpl.build(pool, &f, &opt[..n], offload).ok_or(())?;
        self.fin_sent(now);
        self.ack_went_out();
        out.push(b);
        Ok(Some(Sent::Ack(AckReason::Fin)))
    }

    /// The window field of a queued ACK built now, for its ACK number `ack`: the right
    /// edge as advertised so far (`Recv::right`), never left of it (RFC 9293 §3.8.6.2.2
    /// and RFC 7323 §2.4: the window is not shrunk). The snapshot's own `window` was
    /// taken at the decision; data segments built since (data leaves ahead of the
    /// duplicate ACKs still queued, see `AckQueue::settle`) may have advertised a right
    /// edge further on, and this frame, with a later SEG.SEQ than theirs, is the one
    /// the peer's window update takes as newest (its SND.WL1 check). The old window
    /// there would shrink the peer's view of ours, to zero after a full buffer was read,
    /// with no update to follow: weir believes it advertised the open window.
    fn queued_ack_window(&mut self, ack: SeqNumber, window: u16) -> u16 {
        let ws = u32::from(self.rcv.wscale);
        let edge = if self.rcv.right > ack {
            (self.rcv.right - ack) as u32
        } else {
            0
        };
        // Rounded up, as `select_window` does, so the edge is never left of `right`.
        let field = edge.div_ceil(1 << ws).min(65535);
        let adv = ack + (field << ws) as usize;
        if adv > self.rcv.right {
            self.rcv.right = adv;
        }
        (field as u16).max(window)
    }

    /// A zero-window probe (RFC 9293 §3.8.6.1), as Linux `tcp_xmit_probe_skb` builds it:
    /// an ACK with SEG.SEQ = SND.UNA - 1, just left of the peer's window, which the peer
    /// must answer with an ACK carrying its current window (§3.10.7.4: an unacceptable
    /// segment is acknowledged). It carries no data, so a probe never sends beyond the
    /// window, and it is an ACK sent now (`tcp_event_ack_sent`).
    fn build_probe<P: BufPool<Buf = B>>(
        &mut self,
        now: Instant,
        pool: &mut P,
        offload: bool,
    ) -> Result<(B, Sent), ()> {
        let f = TcpFields {
            seq: SeqNumber(self.snd.una.get().wrapping_sub(1)),
            ack: self.rcv.nxt,
            flags: TcpFlags::ACK,
            window: self.select_window(),
            ts: Timestamp {
                tsval: self.ts_now(now),
                tsecr: self.rcv.ts_recent,
            },
        };
        let b = self.tmpl.build(pool, &f, &[], offload).ok_or(())?;
        self.snd.probe_due = false;
        self.ack_went_out();
        Ok((b, Sent::Probe))
    }

    /// The SACK blocks an ACK sent now carries: D-SACK first (RFC 2883 §4), then the
    /// blocks newest first (RFC 2018 §4), as many as the options leave room for.
    fn sack_blocks(&self) -> ArrayVec<SackBlock, MAX_SACK_BLOCKS> {
        let mut blocks = ArrayVec::new();
        if self.rcv.sack_ok {
            let max = self.tmpl.max_sack_blocks();
            for b in self.rcv.dsack.iter().chain(self.rcv.sack.iter()).take(max) {
                blocks.push(*b);
            }
        }
        blocks
    }

    /// A frame carrying the current RCV.NXT and window left (a FIN or a data segment):
    /// Linux `tcp_event_ack_sent`. The ACK owed is settled: `rcv_wup` moves, the
    /// delayed-ACK timer and the pending bits are cleared, one quick ACK is used up.
    fn ack_went_out(&mut self) {
        self.rcv.last_ack_sent = self.rcv.nxt;
        self.rcv.wup = self.rcv.nxt;
        self.rcv.free_edge = self.rcv.nxt + self.rcv.free_space() as usize;
        self.rcv.dsack = None;
        self.ack.on_ack_sent();
    }

    /// The next data segment (Linux `tcp_write_xmit` for one segment): as much as
    /// [`Snd::cut`](super::conn::Snd) allows, from SND.NXT, with the current ACK number,
    /// window and TSecr. `Ok(None)` when the send side holds (the SWS override timer is
    /// armed when a runt is held, by SWS avoidance or the cork, with nothing in flight:
    /// no ACK would release it).
    ///
    /// SACK blocks: only when an ACK is owed (queued or delayed) and the receive side has
    /// blocks to report; the payload is cut by their length (`tcp_current_mss` counts
    /// them). Linux puts them on every segment while out-of-order data is held; weir puts
    /// them on the segment that settles the owed ACK and keeps the others full-sized (the
    /// duplicate ACKs that report out-of-order data are sent as their own frames anyway,
    /// see `AckQueue::settle`).
    ///
    /// PSH is set when a write ends inside the segment (RFC 9293 §3.9.1; Linux sets it on
    /// the last segment of each `sendmsg`, `tcp_push`). Our FIN rides the segment that
    /// ends at the last queued byte once the application has shut down its side, and
    /// every retransmission of it.
    fn build_data<P: BufPool<Buf = B>>(
        &mut self,
        now: Instant,
        pool: &mut P,
        offload: bool,
        spare: &mut Spare<AckSnapshot>,
        out: &mut Burst<B>,
        unit: u32,
    ) -> Result<Option<Sent>, ()> {
        let fin_pending = self.closing.fin_due && !self.closing.fin_sent;
        // A tail loss probe the PTO chose (RFC 8985 §7.3) goes first: it is one segment,
        // sent whatever cwnd and Nagle say (Linux `tcp_send_loss_probe`).
        let tlp = match self.snd.tlp_due {
            Some(p) => {
                let t = self.tlp_segment(p);
                if t.is_none() {
                    // Nothing left to probe with; the RTO stays armed.
                    self.snd.tlp_due = None;
                }
                t
            }
            None => None,
        };
        // Retransmissions next (RFC 6675 §5 (C): NextSeg before new data), then new data.
        let (seq, mut len, rtx) = match tlp.or_else(|| self.next_rtx().map(|(s, l)| (s, l, true))) {
            Some(t) => t,
            None => match self.snd.cut(fin_pending) {
                Ok(n) => (self.snd.nxt, n, false),
                Err(h) => {
                    match h {
                        Hold::Sws | Hold::Cork if self.snd.nxt == self.snd.una => {
                            self.snd.arm_override(now);
                        }
                        Hold::Cwnd => self.snd.cwnd_limited = true,
                        Hold::Window if self.snd.nxt == self.snd.una => {
                            self.snd.arm_persist(now);
                        }
                        _ => {}
                    }
                    return Ok(None);
                }
            },
        };
        let owed = !self.acks.is_empty() || self.ack.scheduled();
        let mut blocks = if owed && !rtx {
            self.sack_blocks()
        } else {
            // A retransmission keeps its queue segment's length: no room is taken from
            // it for SACK blocks.
            ArrayVec::new()
        };
        let mut opt = [0u8; 36];
        let mut n = sack_option(&blocks, &mut opt);
        let room = self.snd.mss_now().saturating_sub(n as u32);
        if room == 0 {
            blocks.clear();
            n = 0;
        } else if !rtx {
            len = len.min(room);
        }
        // Our FIN rides the segment that ends at the last queued byte: the first time
        // once the application has shut its side, and again on every retransmission of
        // that segment (RFC 9293 §3.10.4: the FIN follows the data, and is retransmitted
        // as it is; Linux keeps the FIN on the tail skb, which `tcp_retransmit_skb`
        // resends whole), in either case only inside the peer's window (`fin_fits`: it
        // takes a sequence number).
        let fin = seq + len as usize == self.snd.end
            && self.snd.fin_fits()
            && if rtx {
                self.closing.fin_sent
            } else {
                fin_pending
            };
        let mut flags = TcpFlags::ACK;
        if fin {
            flags |= TcpFlags::FIN;
        }
        let f = TcpFields {
            seq,
            ack: self.rcv.nxt,
            flags,
            window: self.select_window(),
            ts: Timestamp {
                tsval: self.ts_now(now),
                tsecr: self.rcv.ts_recent,
            },
        };
        let b = self
            .data_frame(pool, &f, &opt[..n], len, offload)
            .ok_or(())?;
        out.push(b);
        let probe = tlp.is_some();
        if probe {
            self.snd.tlp_due = None;
        }
        self.data_sent(now, seq, len, rtx, probe);
        let piggybacked = self.acks.settle(spare) as u32 + u32::from(self.ack.scheduled());
        if blocks.is_empty() {
            // The D-SACK, if any, still waits for a frame that has room to report it.
            let dsack = self.rcv.dsack.take();
            self.ack_went_out();
            self.rcv.dsack = dsack;
        } else {
            self.ack_went_out();
        }
        if fin {
            self.fin_sent(now);
        }
        let (mut len, mut segs) = (len, 1);
        if !rtx && !probe && !fin && unit > 1 {
            let (more, n) = self.build_unit_rest(now, pool, offload, f, out, unit - 1, fin_pending);
            len += more;
            segs += n;
        }
        Ok(Some(Sent::Data {
            len,
            segs,
            fin,
            rtx,
            probe,
            piggybacked,
        }))
    }

    /// The frame of the data segment `[f.seq, f.seq + len)` with the options `opt`: the
    /// payload put in place by the pool when it can (a stamped buffer or a chain by
    /// reference, `BufPool::alloc_with_payload`), else copied into the frame; PSH when a
    /// write ends inside it. `None`: the pool is empty.
    #[inline]
    fn data_frame<P: BufPool<Buf = B>>(
        &mut self,
        pool: &mut P,
        f: &TcpFields,
        opt: &[u8],
        len: u32,
        offload: bool,
    ) -> Option<B> {
        let seq = f.seq;
        if pool.prefills() {
            if let Some((src, off, psh, at)) = self.snd.locate(seq, len as usize) {
                let more = if psh { TcpFlags::PSH } else { TcpFlags::NONE };
                let b = self.tmpl.build_prefilled(
                    pool,
                    f,
                    opt,
                    src,
                    off,
                    at,
                    len as usize,
                    more,
                    offload,
                );
                if b.is_some() {
                    return b;
                }
            }
        }
        let snd = &mut self.snd;
        let fill = |d: &mut [u8]| {
            let psh = snd.copy_out(seq, d)?;
            Some(if psh { TcpFlags::PSH } else { TcpFlags::NONE })
        };
        self.tmpl
            .build_with_payload(pool, f, opt, len as usize, fill, offload)
    }

    /// The rest of a send unit (Linux `tcp_write_xmit` sending one TSO skb of several
    /// segments, which the NIC or GSO cuts): after the first new-data segment of a turn,
    /// up to `max` more segments of new data while `out` has room, exactly those
    /// [`Snd::cut`](super::conn::Snd) would let go one after another (window, cwnd,
    /// Nagle, SWS): the full segments it would allow are counted at once
    /// (`Snd::full_run`) and recorded at once ([`RtxQueue::on_send_run`]), a shorter one
    /// goes through `cut` itself ([`RtxQueue::on_send_unit`]). What the first segment
    /// decided holds for the others and is not decided again: the ACK number, window and
    /// TSecr it carried (nothing was received since, so a frame built now would carry the
    /// same), the owed ACK it settled (so these carry no SACK blocks, as the one-segment
    /// path would not), and its TSval. The timers are re-armed once, for the whole unit,
    /// as `data_sent` would after its last segment. A segment that would carry our FIN is
    /// left to the one-segment path. Returns the bytes and segments added.
    ///
    /// [`RtxQueue::on_send_run`]: crate::tcp::recovery::RtxQueue::on_send_run
    /// [`RtxQueue::on_send_unit`]: crate::tcp::recovery::RtxQueue::on_send_unit
    #[allow(clippy::too_many_arguments)]
    fn build_unit_rest<P: BufPool<Buf = B>>(
        &mut self,
        now: Instant,
        pool: &mut P,
        offload: bool,
        mut f: TcpFields,
        out: &mut Burst<B>,
        max: u32,
        fin_pending: bool,
    ) -> (u32, u32) {
        f.flags = TcpFlags::ACK;
        let (mut bytes, mut segs) = (0, 0);
        while segs < max && !out.is_full() {
            // Full segments first, as many as `cut` would let go one after another: each
            // is built, and they are recorded and counted once (at most one unit's worth
            // at a time, so the queue needs at most one new entry for them).
            let mss = self.snd.mss_now();
            let room = (out.capacity() - out.len()) as u32;
            let queue = self
                .snd
                .rec
                .as_ref()
                .map_or(0, |r| r.queue().run_room(mss, now));
            let mut k = self
                .snd
                .full_run((max - segs).min(room).min(queue))
                .min((MAX_UNIT_BYTES / mss.max(1)).max(1));
            if k > 0 && fin_pending && self.snd.nxt + (k * mss) as usize == self.snd.end {
                // The last would carry our FIN: the one-segment path builds that one.
                k -= 1;
            }
            if k > 1 {
                let seq = self.snd.nxt;
                let mut built = 0;
                while built < k {
                    f.seq = seq + (built * mss) as usize;
                    let Some(b) = self.data_frame(pool, &f, &[], mss, offload) else {
                        break;
                    };
                    out.push(b);
                    built += 1;
                }
                if built == 0 {
                    break;
                }
                if let Some(r) = self.snd.rec.as_mut() {
                    let _ = r.on_send_run(seq, mss, built, now);
                }
                self.snd.sent(built * mss);
                bytes += built * mss;
                segs += built;
                if built < k {
                    // The pool ran dry.
                    break;
                }
                continue;
            }
            let Ok(n) = self.snd.cut(fin_pending) else {
                break;
            };
            let seq = self.snd.nxt;
            if fin_pending && seq + n as usize == self.snd.end {
                break;
            }
            f.seq = seq;
            let Some(b) = self.data_frame(pool, &f, &[], n, offload) else {
                break;
            };
            out.push(b);
            if let Some(r) = self.snd.rec.as_mut() {
                let _ = r.on_send_unit(seq, n, false, now);
            }
            self.snd.sent(n);
            bytes += n;
            segs += 1;
        }
        if segs > 0 {
            let snd = &mut self.snd;
            snd.pto_at = snd.pto_for(now);
            snd.arm_xmit();
            snd.max_flight = snd.max_flight.max(snd.pipe());
        }
        (bytes, segs)
    }
}

/// What [`Conn::build`] built, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// A frame without data (ACK, FIN, RST), counted by reason in `AckStats`.
    Ack(AckReason),
    /// `segs` data segments (a send unit when more than one) of `len` bytes in all;
    /// `fin`: our FIN rode on the last; `rtx`: a retransmission; `probe`: a tail loss
    /// probe; `piggybacked`: the ACKs owed that the first carried instead of frames of
    /// their own.
    Data {
        len: u32,
        segs: u32,
        fin: bool,
        rtx: bool,
        probe: bool,
        piggybacked: u32,
    },
    /// A zero-window probe.
    Probe,
}

impl<B: PacketBuf> Tcp<B> {
    /// Builds every segment due (data, ACKs, FINs, RSTs, SYN-ACKs) into buffers from
    /// `pool` and appends them to `out`, stopping when `out` is full or the pool is empty
    /// (the rest stay due). Data goes as far as the peer's window, the congestion window,
    /// Nagle, the cork and SWS avoidance allow (see [`Tcp::send`]), each segment carrying
    /// the connection's ACK. With `tx_csum_offload`, asks each buffer for TX checksum
    /// offload and falls back to software when it refuses. Returns the frames appended.
    #[inline]
    pub fn poll_tx<P: BufPool<Buf = B>>(
        &mut self,
        now: Instant,
        pool: &mut P,
        out: &mut Burst<B>,
        tx_csum_offload: bool,
    ) -> usize {
        // Most loop iterations owe nothing: the check is inlined, the building is not.
        if self.ctx.due.is_empty()
            && self.ctl.is_empty()
            && self.starved.is_empty()
            && self.ctx.spent.is_empty()
        {
            return 0;
        }
        self.poll_tx_owed(now, pool, out, tx_csum_offload)
    }

    #[inline(never)]
    fn poll_tx_owed<P: BufPool<Buf = B>>(
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
            let mut data = 0;
            let quota = self.cfg.tx_quota.max(1);
            // A connection owes at most a RST, its queued ACKs (bounded), data (bounded
            // by its windows and by `TcpConfig::tx_quota` per turn) and a FIN.
            loop {
                if out.is_full() {
                    stop = true;
                    break;
                }
                let unit = quota.saturating_sub(data).max(1);
                match c.build(
                    now,
                    pool,
                    tx_csum_offload,
                    &mut self.ctx.ack_spare,
                    out,
                    unit,
                ) {
                    Ok(Some(sent)) => {
                        match sent {
                            Sent::Ack(r) => {
                                self.ctx.ack_stats.count(r);
                                if !matches!(
                                    r,
                                    AckReason::Handshake
                                        | AckReason::Fin
                                        | AckReason::Rst
                                        | AckReason::Challenge
                                ) {
                                    c.pure_ack_until = Some(now + c.ack.delack_time());
                                }
                                if tx_csum_offload {
                                    self.ctx.ack_stats.tx_csum_offloaded += 1;
                                }
                            }
                            Sent::Data {
                                len,
                                segs,
                                fin,
                                rtx,
                                probe,
                                piggybacked,
                            } => {
                                self.ctx.stats.tlp_probes += u64::from(probe);
                                if rtx {
                                    self.ctx.stats.retransmits += u64::from(segs);
                                    self.ctx.stats.bytes_retransmitted += u64::from(len);
                                } else {
                                    self.ctx.stats.data_segments_sent += u64::from(segs);
                                    self.ctx.stats.bytes_sent += u64::from(len);
                                }
                                self.ctx.ack_stats.piggybacked += u64::from(piggybacked);
                                if c.pure_ack_until.take().is_some_and(|u| now < u) {
                                    self.ctx.ack_stats.useless += 1;
                                }
                                if fin {
                                    self.ctx.ack_stats.count(AckReason::Fin);
                                }
                                data += segs;
                            }
                            Sent::Probe => self.ctx.stats.window_probes += 1,
                        }
                        if data >= quota && c.snd.unsent() > 0 {
                            break;
                        }
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
            self.ctx.due.pop_front();
            if data >= quota && c.snd.unsent() > 0 {
                // Its turn is over: to the back of the queue, still due.
                self.ctx.due.push_back((slot, gen));
                continue;
            }
            c.queued = false;
            let reap = c.reapable();
            let d = c.deadline();
            self.ctx.timers.arm(Kind::Conn, slot, gen, d);
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
        self.wake_starved(pool);
        out.len() - start
    }

    /// `Event::Writable` for the connections whose writes the pool cut short
    /// (`Tcp::send`), once `pool` hands out a buffer again: Linux's
    /// `sk_stream_write_space` follows freed memory, not only acknowledgments.
    fn wake_starved<P: BufPool<Buf = B>>(&mut self, pool: &mut P) {
        if self.starved.is_empty() || pool.alloc(1).is_none() {
            return;
        }
        for (slot, gen) in self.starved.drain(..) {
            let Some(c) = self.conns.get_gen_mut(slot, gen) else {
                continue;
            };
            c.snd.pool_starved = false;
            if c.snd.writable_armed && !c.closing.write_closed && c.snd.room() > 0 {
                c.snd.writable_armed = false;
                self.ctx.event(Event::Writable(c.id));
            }
        }
    }
}

/// A stateless frame to send: a RST or a SYN-ACK.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ctl {
    flow: FlowKey,
    local_mac: [u8; 6],
    peer_mac: [u8; 6],
    seq: SeqNumber,
    ack: SeqNumber,
    flags: TcpFlags,
    window: u16,
    ts: Option<Timestamp>,
    /// A SYN-ACK's options: our MSS, our window scale (if offered), SACK-permitted.
    syn: Option<(u16, Option<u8>, bool)>,
    /// What it is counted as in `AckStats`.
    pub(super) reason: AckReason,
}

impl Ctl {
    /// The frame, in a buffer from `pool`; `None` when the pool is empty.
    pub(super) fn build<B: PacketBuf, P: BufPool<Buf = B>>(
        &self,
        pool: &mut P,
        ttl: u8,
        offload: bool,
    ) -> Option<B> {
        let tmpl = AckTemplate::new(
            &self.flow,
            self.local_mac,
            self.peer_mac,
            self.ts.is_some(),
            ttl,
        );
        let mut opts = [0u8; 12];
        let n = match self.syn {
            Some((mss, ws, sack)) => syn_options(mss, ws, sack, &mut opts),
            None => 0,
        };
        let f = TcpFields {
            seq: self.seq,
            ack: self.ack,
            flags: self.flags,
            window: self.window,
            ts: self.ts.unwrap_or_default(),
        };
        tmpl.build(pool, &f, &opts[..n], offload)
    }
}

impl<B: PacketBuf> Tcp<B> {
    /// Queues a stateless frame for the next `poll_tx`; counted and dropped when the queue
    /// is full.
    fn push_ctl(&mut self, c: Ctl) {
        if self.ctl.len() >= self.cfg.ctl_queue {
            self.ctx.stats.dropped(DropReason::CtlQueueFull);
            return;
        }
        self.ctl.push_back(c);
    }

    /// RFC 9293 §3.10.7.1: the reset for a segment that reached no connection.
    pub(super) fn send_rst_for(&mut self, seg: &Segment<B>) {
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

    /// The SYN-ACK of a half-open entry (first or retransmitted). Its window is not scaled
    /// (RFC 7323 §2.2): [`TcpConfig::syn_window`].
    pub(super) fn queue_synack(&mut self, now: Instant, h: &HalfOpen) {
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
            window: self.cfg.syn_window() as u16,
            ts,
            syn: Some((self.advmss(h.flow.v6), ws, h.sack)),
            reason: AckReason::Handshake,
        });
    }

    /// The SYN-ACK that carries a SYN cookie (RFC 4987 §3.6) for `seg`'s SYN.
    pub(super) fn queue_cookie_synack(
        &mut self,
        seg: &Segment<B>,
        iss: SeqNumber,
        ts: Option<Timestamp>,
        ws: Option<u8>,
        sack: bool,
    ) {
        self.push_ctl(Ctl {
            flow: seg.flow,
            local_mac: seg.local_mac,
            peer_mac: seg.peer_mac,
            seq: iss,
            ack: seg.seq + 1,
            flags: TcpFlags::SYN | TcpFlags::ACK,
            window: self.cfg.syn_window() as u16,
            ts,
            syn: Some((self.advmss(seg.flow.v6), ws, sack)),
            reason: AckReason::Handshake,
        });
    }
}
