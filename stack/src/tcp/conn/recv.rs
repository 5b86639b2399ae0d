//! The receive side of a connection: RFC 9293 §3.3.1's receive sequence variables, the
//! window we offer, TS.Recent, SACK state, the out-of-order and receive queues, and what
//! the application reads.
//!
//! Read first: RFC 9293 §3.8.6.2.2 (receiver SWS avoidance; the right edge never moves
//! left), RFC 7323 §4.3 (TS.Recent, Last.ACK.sent), RFC 2018 §4 and RFC 2883 (SACK,
//! D-SACK), Linux `tcp_select_window` and `tcp_cleanup_rbuf`.

use std::collections::VecDeque;

use arrayvec::ArrayVec;

use super::{Conn, Ctx};
use crate::buf::{FreeBatch, PacketBuf, PayloadChain, PayloadSlice};
use crate::seq::SeqNumber;
use crate::spare::Spare;
use crate::tcp::ooo::OooQueue;
use crate::time::Instant;
use crate::wire::{SackBlock, MAX_SACK_BLOCKS};

/// The receive side of one connection.
pub(crate) struct Recv<B> {
    /// RCV.NXT: the next sequence number expected.
    pub(crate) nxt: SeqNumber,
    /// RCV.NXT when the last ACK was decided (Linux `rcv_wup`).
    pub(crate) wup: SeqNumber,
    /// RFC 7323 §4.3 Last.ACK.sent: the ACK number of the last frame `poll_tx` built. ACKs
    /// are decided (and `wup` moves) during input, but they leave in the loop
    /// iteration's batch; until then TS.Recent keeps the TSval of the earliest segment not
    /// yet acknowledged on the wire, which is the one every ACK of the batch echoes.
    pub(crate) last_ack_sent: SeqNumber,
    /// `nxt + free space` when the last ACK was decided: the right edge the buffer
    /// allowed then, before SWS avoidance and scale rounding (see `window_ok`).
    pub(crate) free_edge: SeqNumber,
    /// The right edge of the window advertised (RCV.NXT + RCV.WND when it was sent).
    pub(crate) right: SeqNumber,
    /// The receive buffer: the window is this minus unconsumed and out-of-order bytes.
    pub(crate) buf: u32,
    /// Our window scale shift (0 if not negotiated).
    pub(crate) wscale: u8,
    /// The MSS we advertised.
    pub(crate) advmss: u32,
    /// Timestamps negotiated (RFC 7323).
    pub(crate) ts_ok: bool,
    /// TS.Recent, and when it was last set (for the 24-day PAWS idle rule).
    pub(crate) ts_recent: u32,
    pub(crate) ts_recent_stamp: Instant,
    /// SACK negotiated; the blocks reported (newest first) and a D-SACK block pending.
    pub(crate) sack_ok: bool,
    pub(crate) sack: ArrayVec<SackBlock, MAX_SACK_BLOCKS>,
    pub(crate) dsack: Option<SackBlock>,
    /// Data held out of order (slices in the core's pool), its byte limit, and the
    /// sequence number of a FIN received beyond RCV.NXT.
    pub(crate) ooo: OooQueue,
    pub(crate) ooo_limit: u32,
    pub(crate) ooo_fin: Option<SeqNumber>,
    /// In-order payload the application has not consumed, and its byte count. Its
    /// storage is the core's (`Ctx::rxq_spare`), lent while it holds data; `rxq_hint`
    /// is the size class it gave back last time, so the next fill takes one that size.
    pub(crate) rxq: VecDeque<PayloadSlice<B>>,
    pub(crate) rxq_hint: u8,
    /// The most slices `rxq` holds (`TcpConfig::rxq_slices`), and the payload bytes each
    /// free one is counted as taking when the window is offered
    /// (`TcpConfig::rxq_slice_bytes`).
    pub(crate) rxq_cap: u32,
    pub(crate) rxq_slice_bytes: u32,
    /// The window of our SYN or SYN-ACK.
    pub(crate) syn_wnd: u32,
    pub(crate) rxq_bytes: u32,
    /// `Event::Readable` was raised and the application has not read since.
    pub(crate) readable_signalled: bool,
}

impl<B> Recv<B> {
    /// Bytes the application has not consumed plus out-of-order bytes held.
    pub(crate) fn used(&self) -> u32 {
        self.rxq_bytes.saturating_add(self.ooo.bytes)
    }

    /// The room the window may offer: the free bytes of the buffer, and no more than the
    /// free slices can take. Slices held out of order count as taken: each takes a
    /// receive-queue slot when it becomes in order. A free slice is counted as
    /// `rxq_slice_bytes`, which [`Recv::push_in_order`]'s coalescing guarantees for any
    /// segmentation of the data into buffers with room (see `TcpConfig::rxq_slice_bytes`).
    /// Linux offers what its memory accounting can hold (`tcp_select_window` from
    /// `tcp_space`) rather than a byte count the queue cannot honour.
    pub(crate) fn free_space(&self) -> u32 {
        let bytes = self.buf.saturating_sub(self.used());
        let slots = self
            .rxq_cap
            .saturating_sub(self.rxq.len() as u32)
            .saturating_sub(self.ooo.slices);
        bytes.min(slots.saturating_mul(self.rxq_slice_bytes))
    }

    /// Whether `n` more slices fit in the receive queue.
    #[inline(always)]
    pub(crate) fn has_slots(&self, n: usize) -> bool {
        self.rxq.len() + n <= self.rxq_cap as usize
    }

    /// The window currently offered: from `rcv_nxt` to the advertised right edge.
    pub(crate) fn window(&self) -> u32 {
        if self.right > self.nxt {
            (self.right - self.nxt) as u32
        } else {
            0
        }
    }

    /// `__tcp_select_window`, simplified: the free space (ALIGNed to the scale).
    pub(crate) fn candidate_window(&self) -> u32 {
        // ALIGN(window, 1 << rcv_wscale): rounded up, as `tcp_select_window` advertises.
        let unit = 1u32 << self.wscale.min(14);
        self.free_space().div_ceil(unit).saturating_mul(unit)
    }

    /// `__tcp_select_window() >= rcv_wnd` in `__tcp_ack_snd_check`: an ACK now would not
    /// pull the right edge back (docs/reference/linux-receive-path.md §3). Linux compares
    /// window sizes because its window is capped by `rcv_ssthresh` well below the free
    /// space, so in bulk transfer unread data does not shrink it; weir offers its whole
    /// free space, so a size comparison would fail for every unread byte and no stretch
    /// ACK would ever go out before the application reads. Comparing right edges keeps
    /// Linux's intent: the ACK is held back only while buffer space is being lost
    /// (out-of-order data), not merely because the application has not read yet.
    /// Edges are compared before rounding to the window scale (`free_edge`), so rounding
    /// never makes an unchanged buffer look like a shrinking one.
    pub(crate) fn window_ok(&self) -> bool {
        self.nxt + self.free_space() as usize >= self.free_edge
    }
}

impl<B: PacketBuf> Recv<B> {
    /// Queues one in-order slice: copied into the tail of the last slice's buffer when it is
    /// shorter than `rxq_slice_bytes` and fits there (Linux `tcp_try_coalesce`, which copies
    /// into the tail skb's tailroom; the emptied buffer goes to `spent`), otherwise pushed as
    /// a slice of its own. Gives the slice back when the queue has no slot for it. The
    /// caller counts the bytes.
    #[inline(always)]
    pub(crate) fn push_in_order(
        &mut self,
        s: PayloadSlice<B>,
        spent: &mut FreeBatch<B>,
        spare: &mut Spare<PayloadSlice<B>>,
    ) -> Result<(), PayloadSlice<B>> {
        if u32::from(s.len) < self.rxq_slice_bytes {
            if let Some(tail) = self.rxq.back_mut() {
                if coalesce(tail, &s) {
                    spent.push(s.buf);
                    return Ok(());
                }
            }
        }
        if !self.has_slots(1) || !spare.reserve(&mut self.rxq, 1, self.rxq_hint) {
            return Err(s);
        }
        self.rxq.push_back(s);
        Ok(())
    }
}

/// Appends `s`'s bytes to `tail`'s when `tail`'s payload ends its buffer's data (after
/// cutting any bytes past it, such as Ethernet padding) and the buffer has room; the
/// slice's length stays within `u16`.
fn coalesce<B: PacketBuf>(tail: &mut PayloadSlice<B>, s: &PayloadSlice<B>) -> bool {
    let Some(total) = tail.len.checked_add(s.len) else {
        return false;
    };
    let end = usize::from(tail.off) + usize::from(tail.len);
    if tail.buf.data().len() != end && !tail.buf.truncate(end) {
        return false;
    }
    if tail.buf.tailroom() < usize::from(s.len) || !tail.buf.append(s.bytes()) {
        return false;
    }
    tail.len = total;
    true
}

impl<B: PacketBuf> Conn<B> {
    /// `tcp_select_window`: the window field for an ACK sent now. The right edge never
    /// moves left (RFC 9293 §3.8.6.2.2) and moves right only by at least
    /// min(rcv_buf/2, MSS) (receiver SWS avoidance, same section).
    pub(crate) fn select_window(&mut self) -> u16 {
        let free = self.rcv.free_space();
        if free < self.rcv.buf / 2 {
            self.ack.clear_quick();
        }
        let cand = self.rcv.nxt + free as usize;
        if cand > self.rcv.right {
            let step = (cand - self.rcv.right) as u32;
            if step >= (self.rcv.buf / 2).min(self.rcv.advmss) || self.rcv.window() == 0 {
                self.rcv.right = cand;
            }
        }
        let wnd = self.rcv.window();
        let ws = u32::from(self.rcv.wscale);
        // Round up so that the advertised edge is never left of rcv_right.
        let field = wnd.div_ceil(1 << ws).min(65535);
        let adv = self.rcv.nxt + (field << ws) as usize;
        if adv > self.rcv.right {
            self.rcv.right = adv;
        }
        field as u16
    }

    /// The application consumed `n` bytes: free them and run `tcp_cleanup_rbuf`.
    pub(crate) fn consume(&mut self, n: u32, ctx: &mut Ctx<B>) -> u32 {
        let n = n.min(self.rcv.rxq_bytes);
        let mut left = n;
        // The slices read whole leave together: one bulk free, not a free per segment.
        let mut whole = 0;
        for sl in self.rcv.rxq.iter_mut() {
            if left == 0 {
                break;
            }
            let l = u32::from(sl.len);
            if l <= left {
                left -= l;
                whole += 1;
            } else {
                sl.off += left as u16;
                sl.len -= left as u16;
                left = 0;
            }
        }
        for sl in self.rcv.rxq.drain(..whole) {
            ctx.spent.push(sl.buf);
        }
        self.consumed(n, ctx)
    }

    /// The application takes whole slices from the front of the receive queue into `out`
    /// while they fit in `max` bytes and in `out`: the buffers become its own (no copy,
    /// nothing freed here), and the bytes count as consumed, as [`Conn::consume`] counts
    /// them. A front slice longer than `max` stays. Returns the bytes moved.
    pub(crate) fn take_bufs(
        &mut self,
        max: u32,
        out: &mut PayloadChain<B>,
        ctx: &mut Ctx<B>,
    ) -> u32 {
        let mut n = 0u32;
        while let Some(front) = self.rcv.rxq.front() {
            let l = u32::from(front.len);
            if out.is_full() || n.saturating_add(l) > max {
                break;
            }
            let Some(sl) = self.rcv.rxq.pop_front() else {
                break;
            };
            if let Err(sl) = out.push(sl) {
                // Not reached: `out` had room.
                self.rcv.rxq.push_front(sl);
                break;
            }
            n += l;
        }
        self.consumed(n, ctx)
    }

    /// `n` bytes left the receive queue (read or taken): the window it reopens, and
    /// `tcp_cleanup_rbuf`'s window-update and pushed-data ACKs.
    fn consumed(&mut self, n: u32, ctx: &mut Ctx<B>) -> u32 {
        if self.rcv.rxq.is_empty() {
            // Back to the buffer's first slots, as `AckQueue::pop_front` does: a queue read as
            // fast as it fills reuses a few cache lines instead of walking its buffer. A
            // storage larger than the smallest class goes back to the core.
            self.rcv.rxq.clear();
            if let Some(k) = ctx.rxq_spare.shrink(&mut self.rcv.rxq) {
                self.rcv.rxq_hint = k;
            }
        }
        self.rcv.rxq_bytes -= n;
        self.rcv.readable_signalled = false;
        let now_w = self.rcv.window();
        let doubled = if 2 * u64::from(now_w) <= u64::from(self.rcv.buf) {
            let new = self.rcv.candidate_window();
            new > 0 && u64::from(new) >= 2 * u64::from(now_w)
        } else {
            false
        };
        let drained = self.rcv.rxq_bytes == 0 && self.rcv.ooo.is_empty();
        let unacked = (self.rcv.nxt - self.rcv.wup) as u32;
        self.ack
            .cleanup_rbuf(n, unacked, drained, doubled, self.closing.peer_closed);
        self.after_input(ctx);
        n
    }
}
