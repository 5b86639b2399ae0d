//! [`AckQueue`]: a connection's ACK decisions ([`AckSnapshot`]s) not yet built, bounded,
//! written in place (see `docs/decisions/ack-snapshots.md`).

use std::collections::VecDeque;

use crate::spare::Spare;

use super::AckReason;
use crate::seq::SeqNumber;
use crate::wire::{SackBlock, MAX_SACK_BLOCKS};

/// One ACK decided but not yet built: the fields as of the decision (Linux would have sent
/// it right then from `__tcp_ack_snd_check` or `tcp_send_dupack`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckSnapshot {
    /// The acknowledgment number (`rcv_nxt` at the decision).
    pub ack: SeqNumber,
    /// The window field (already scaled down), from `tcp_select_window` at the decision.
    pub window: u16,
    /// TSecr: TS.Recent at the decision (RFC 7323 §4.3).
    pub tsecr: u32,
    /// Why it is sent.
    pub reason: AckReason,
    /// SACK blocks, D-SACK first (RFC 2883 §4); `sack_count` are valid.
    pub sack: [SackBlock; MAX_SACK_BLOCKS],
    /// Number of valid entries in `sack`.
    pub sack_count: u8,
}

impl AckSnapshot {
    /// All zero, no SACK blocks: what [`AckQueue::push_with`] hands its `fill`.
    pub const EMPTY: AckSnapshot = AckSnapshot {
        ack: SeqNumber(0),
        window: 0,
        tsecr: 0,
        reason: AckReason::Stretch,
        sack: [SackBlock {
            left: SeqNumber(0),
            right: SeqNumber(0),
        }; MAX_SACK_BLOCKS],
        sack_count: 0,
    };

    /// The valid SACK blocks.
    pub fn sack_blocks(&self) -> &[SackBlock] {
        &self.sack[..usize::from(self.sack_count).min(MAX_SACK_BLOCKS)]
    }
    /// Same acknowledgment number, window and SACK blocks: the peer could not tell the two
    /// frames apart.
    fn same_content(&self, o: &AckSnapshot) -> bool {
        self.ack == o.ack && self.window == o.window && self.sack_blocks() == o.sack_blocks()
    }
}

/// What [`AckQueue::push_with`] did with a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckPush {
    /// Queued as its own frame.
    Queued,
    /// Not queued: an identical in-order ACK is already queued (no spurious dupack).
    Suppressed,
    /// Queued, but the queue was full: its oldest entry was merged into the next one.
    Merged,
}

/// A connection's ACKs decided and not yet built, oldest first. Bounded: at most `cap`
/// snapshots. Its storage is lent by the core's [`Spare`] store while it holds
/// something, so an idle connection holds none, and the queue takes no allocation of its
/// own per packet.
#[derive(Clone, Debug)]
pub struct AckQueue {
    q: VecDeque<AckSnapshot>,
    cap: usize,
    /// The size class of the storage given back last time (see [`Spare::reserve`]).
    hint: u8,
}

impl AckQueue {
    /// An empty queue of at most `cap` snapshots (at least 1, and one fewer than the
    /// largest storage a [`Spare`] store lends). It allocates nothing: its storage comes
    /// from the store passed to [`AckQueue::push_with`].
    pub fn new(cap: usize) -> Self {
        let most = Spare::<AckSnapshot>::class_entries(u8::MAX) - 1;
        AckQueue {
            q: VecDeque::new(),
            cap: cap.clamp(1, most),
            hint: 0,
        }
    }

    /// Queues the snapshot `fill` writes, in its place in the queue (given
    /// [`AckSnapshot::EMPTY`]). A non-dupack ACK identical to the newest queued one is
    /// suppressed (the queued frame already says it; sending it twice would be a spurious
    /// duplicate ACK that the sender counts toward fast retransmit, RFC 5681 §4.2). When
    /// the queue is full the oldest entry is dropped and the next one, which acknowledges
    /// everything it did (ACKs are cumulative), becomes a stretch ACK if it acknowledges
    /// more.
    ///
    /// Written in place because a snapshot built field by field elsewhere and then moved
    /// in is read back with wide loads over the narrow stores that just wrote it: the load
    /// cannot take its bytes from the store buffer and waits for every older store to
    /// reach the cache (2.8% of a 64-flow e2e profile, most of the old by-value push).
    /// Here nothing reads it back but the same fields at their own width.
    ///
    /// The storage has one slot more than the bound: the new snapshot is written in place
    /// before the oldest is dropped.
    #[inline]
    pub fn push_with(
        &mut self,
        spare: &mut Spare<AckSnapshot>,
        fill: impl FnOnce(&mut AckSnapshot),
    ) -> AckPush {
        let lent = spare.reserve(&mut self.q, 1, self.hint);
        debug_assert!(lent, "the bound is below the largest class (AckQueue::new)");
        self.q.push_back(AckSnapshot::EMPTY);
        let n = self.q.len();
        let mut dupack = false;
        if let Some(s) = self.q.back_mut() {
            fill(s);
            // Read field by field, never as a whole (see above).
            dupack = s.reason.is_dupack();
        }
        if !dupack && n >= 2 && self.q[n - 2].same_content(&self.q[n - 1]) {
            self.q.pop_back();
            return AckPush::Suppressed;
        }
        if n <= self.cap {
            return AckPush::Queued;
        }
        if let Some(old) = self.q.pop_front() {
            if let Some(next) = self.q.front_mut() {
                if next.ack > old.ack {
                    next.reason = AckReason::Stretch;
                }
            }
        }
        AckPush::Merged
    }

    /// The oldest snapshot.
    pub fn front(&self) -> Option<&AckSnapshot> {
        self.q.front()
    }
    /// Removes the oldest snapshot without reading it (after it was built from
    /// [`AckQueue::front`]).
    pub fn pop_front(&mut self, spare: &mut Spare<AckSnapshot>) {
        self.q.pop_front();
        if self.q.is_empty() {
            // Back to the buffer's first slot: a queue that rarely holds more than one
            // ACK then reuses one cache line instead of walking its whole buffer (with
            // many connections those lines leave the cache between two ACKs, and the
            // push that writes one waited for it: 2.6% of the receiver at 64 flows). A
            // storage larger than the smallest class goes back to the core.
            self.q.clear();
            if let Some(k) = spare.shrink(&mut self.q) {
                self.hint = k;
            }
        }
    }
    /// Snapshots queued.
    pub fn len(&self) -> usize {
        self.q.len()
    }
    /// `true` when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
    /// The most snapshots it holds.
    pub fn capacity(&self) -> usize {
        self.cap
    }
    /// Drops everything (the connection was reset or freed) and gives the storage back.
    pub fn clear(&mut self, spare: &mut Spare<AckSnapshot>) {
        self.q.clear();
        spare.give_back(&mut self.q);
    }
    /// A data segment carrying the current ACK number and window has been built: it says
    /// everything the queued in-order ACKs said, so they are dropped (Linux
    /// `tcp_event_ack_sent`: an ACK leaving on data clears the pending ACK). Deliberate
    /// duplicate ACKs ([`AckReason::is_dupack`]) stay queued: the sender counts them
    /// toward fast retransmit and a segment with data is not a duplicate ACK (RFC 5681
    /// §2). Returns how many were dropped.
    pub fn settle(&mut self, spare: &mut Spare<AckSnapshot>) -> usize {
        let before = self.q.len();
        self.q.retain(|s| s.reason.is_dupack());
        if self.q.is_empty() {
            self.q.clear();
            if let Some(k) = spare.shrink(&mut self.q) {
                self.hint = k;
            }
        }
        before - self.q.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `TcpConfig::ack_queue`'s memory bound: the default queue at its fullest, with its
    /// spare slot, fits in 6 KiB (lent while it holds ACKs, see `stack::spare`).
    #[test]
    fn a_snapshot_takes_at_most_48_bytes() {
        let size = std::mem::size_of::<AckSnapshot>();
        assert!(size <= 48);
        assert!((crate::tcp::TcpConfig::default().ack_queue + 1) * size <= 6 * 1024);
    }

    fn snap(ack: u32, window: u16, reason: AckReason) -> AckSnapshot {
        AckSnapshot {
            ack: SeqNumber(ack),
            window,
            tsecr: 0,
            reason,
            sack: [SackBlock::default(); MAX_SACK_BLOCKS],
            sack_count: 0,
        }
    }

    /// Queues a whole snapshot, as the tests build them.
    fn push(q: &mut AckQueue, s: AckSnapshot) -> AckPush {
        q.push_with(&mut Spare::new(0), |slot| *slot = s)
    }

    /// No spurious duplicate ACK (RFC 5681 §4.2: the sender counts duplicates): an in-order
    /// ACK identical to the newest queued one is suppressed; deliberate dupacks are not.
    #[test]
    fn queue_suppresses_identical_in_order_ack_but_keeps_dupacks() {
        let mut q = AckQueue::new(8);
        assert_eq!(
            push(&mut q, snap(100, 10, AckReason::Stretch)),
            AckPush::Queued
        );
        assert_eq!(
            push(&mut q, snap(100, 10, AckReason::Quick)),
            AckPush::Suppressed
        );
        assert_eq!(
            push(&mut q, snap(100, 10, AckReason::DelayedTimer)),
            AckPush::Suppressed
        );
        assert_eq!(
            push(&mut q, snap(100, 11, AckReason::WindowUpdate)),
            AckPush::Queued
        );
        assert_eq!(
            push(&mut q, snap(100, 11, AckReason::OutOfOrder)),
            AckPush::Queued
        );
        assert_eq!(
            push(&mut q, snap(100, 11, AckReason::Duplicate)),
            AckPush::Queued
        );
        assert_eq!(q.len(), 4);
    }

    /// Linux `tcp_event_ack_sent`: a data segment settles the queued in-order ACKs; the
    /// deliberate duplicate ACKs stay (RFC 5681 §2: a segment with data is no dupack).
    #[test]
    fn tcp_event_ack_sent_settle_keeps_only_dupacks() {
        let mut q = AckQueue::new(8);
        push(&mut q, snap(100, 10, AckReason::Quick));
        push(&mut q, snap(100, 10, AckReason::OutOfOrder));
        push(&mut q, snap(200, 10, AckReason::Stretch));
        assert_eq!(q.settle(&mut Spare::new(0)), 2);
        assert_eq!(q.len(), 1);
        assert_eq!(q.front().map(|s| s.reason), Some(AckReason::OutOfOrder));
        assert_eq!(q.settle(&mut Spare::new(0)), 0);
    }

    /// Bounded: the oldest entry is merged into the next, which becomes a stretch ACK when
    /// it acknowledges more (ACKs are cumulative).
    #[test]
    fn queue_overflow_merges_oldest_into_stretch() {
        let mut q = AckQueue::new(2);
        push(&mut q, snap(100, 10, AckReason::Quick));
        push(&mut q, snap(200, 10, AckReason::GapFill));
        assert_eq!(
            push(&mut q, snap(300, 10, AckReason::Quick)),
            AckPush::Merged
        );
        assert_eq!(q.len(), 2);
        // As `Conn::build` sends them: read the front, then remove it.
        let pop = |q: &mut AckQueue| {
            let s = q.front().copied();
            q.pop_front(&mut Spare::new(0));
            s
        };
        let a = pop(&mut q).expect("front");
        assert_eq!((a.ack, a.reason), (SeqNumber(200), AckReason::Stretch));
        assert_eq!(pop(&mut q).map(|s| s.ack), Some(SeqNumber(300)));
        assert!(q.is_empty());
        let mut one = AckQueue::new(0);
        assert_eq!(one.capacity(), 1);
        push(&mut one, snap(1, 1, AckReason::Quick));
        assert_eq!(
            push(&mut one, snap(2, 1, AckReason::Quick)),
            AckPush::Merged
        );
        assert_eq!(one.front().map(|s| s.reason), Some(AckReason::Stretch));
    }
}
