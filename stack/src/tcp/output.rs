//! What a connection sends, built into frames: ACK snapshots taken at the decision, and
//! the ACK, FIN and RST frames built from them in `poll_tx`; and the stateless frames
//! of the listener and of segments for no connection (SYN-ACKs, RSTs).
//!
//! Read first: RFC 9293 §3.10.7.1 (the reset for a segment that reached no connection),
//! RFC 7323 §3 and §4.3 (the timestamp option, TSecr), RFC 2018 §4 and RFC 2883 (SACK and
//! D-SACK blocks), Linux `tcp_send_ack`, `tcp_send_fin`, `tcp_v4_send_reset`.

use arrayvec::ArrayVec;

use super::conn::{Conn, Ctx};
use super::listen::HalfOpen;
use super::{DropReason, State, Tcp};
use crate::ack::template::{sack_option, syn_options, AckTemplate, TcpFields};
use crate::ack::{AckPush, AckReason};
use crate::buf::{BufPool, PacketBuf};
use crate::flow::FlowKey;
use crate::segment::Segment;
use crate::seq::SeqNumber;
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
        let pushed = self.acks.push_with(|snap| {
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

    /// Builds the next frame this connection owes into a buffer: a RST, else the oldest
    /// queued ACK, else our FIN. `Ok(None)`: nothing is owed. `Err(())`: the pool is empty
    /// (nothing is consumed; it stays owed).
    pub(crate) fn build<P: BufPool<Buf = B>>(
        &mut self,
        now: Instant,
        pool: &mut P,
        offload: bool,
    ) -> Result<Option<(B, AckReason)>, ()> {
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
            return Ok(Some((b, AckReason::Rst)));
        }
        if let Some(snap) = self.acks.front() {
            // Field by field, not a copy of the whole snapshot: one queued moments ago
            // (by `consume`, just before `poll_tx`) may still be in the store buffer,
            // and a wide load over its narrow stores would wait for them to drain.
            let (ack, reason) = (snap.ack, snap.reason);
            let mut opt = [0u8; 36];
            let n = sack_option(snap.sack_blocks(), &mut opt);
            let f = TcpFields {
                seq: self.snd.nxt,
                ack,
                flags: TcpFlags::ACK,
                window: snap.window,
                ts: Timestamp {
                    tsval: self.ts_now(now),
                    tsecr: snap.tsecr,
                },
            };
            let b = self.tmpl.build(pool, &f, &opt[..n], offload).ok_or(())?;
            self.acks.pop_front();
            self.rcv.last_ack_sent = ack;
            return Ok(Some((b, reason)));
        }
        if !self.closing.fin_due {
            return Ok(None);
        }
        // Our FIN (first or retransmitted) carries an ACK of everything received: it is
        // an ACK sent now (`tcp_send_fin` -> `tcp_transmit_skb` -> `tcp_event_ack_sent`).
        let window = self.select_window();
        let mut blocks: ArrayVec<SackBlock, MAX_SACK_BLOCKS> = ArrayVec::new();
        if self.rcv.sack_ok {
            let max = self.tmpl.max_sack_blocks();
            for b in self.rcv.dsack.iter().chain(self.rcv.sack.iter()).take(max) {
                blocks.push(*b);
            }
        }
        let mut opt = [0u8; 36];
        let n = sack_option(&blocks, &mut opt);
        let f = TcpFields {
            seq: self.snd.iss + 1,
            ack: self.rcv.nxt,
            flags: TcpFlags::ACK | TcpFlags::FIN,
            window,
            ts: Timestamp {
                tsval: self.ts_now(now),
                tsecr: self.rcv.ts_recent,
            },
        };
        let b = self.tmpl.build(pool, &f, &opt[..n], offload).ok_or(())?;
        self.closing.fin_due = false;
        self.rcv.last_ack_sent = self.rcv.nxt;
        if !self.closing.fin_sent {
            self.closing.fin_sent = true;
            self.snd.nxt = self.snd.iss + 2;
        }
        self.rcv.wup = self.rcv.nxt;
        self.rcv.free_edge = self.rcv.nxt + self.rcv.free_space() as usize;
        self.rcv.dsack = None;
        self.ack.on_ack_sent();
        Ok(Some((b, AckReason::Fin)))
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
    /// (RFC 7323 §2.2): min(rcv_buf, 65535).
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
            window: self.cfg.rcv_buf.min(65535) as u16,
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
            window: self.cfg.rcv_buf.min(65535) as u16,
            ts,
            syn: Some((self.advmss(seg.flow.v6), ws, sack)),
            reason: AckReason::Handshake,
        });
    }
}
