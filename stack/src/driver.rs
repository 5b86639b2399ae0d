//! Driver traits: how the pipeline receives and transmits bursts.
//!
//! A burst lives in caller-owned, fixed-capacity storage ([`Burst`]); nothing on this path
//! allocates. `dpdk` implements these traits for port queues; [`crate::mem`] implements
//! them with in-memory queues for tests and pure-CPU benchmarks.

use arrayvec::ArrayVec;

use crate::buf::PacketBuf;

/// Largest burst the pipeline moves at once: the frames one receive call may return, and
/// one iteration's ACK batch. 256 (VPP's vector size) rather than DPDK's customary 32 or
/// NAPI's weight of 64: the loop's per-iteration work (the receive call, the GRO flush
/// check, timers, the ACK transmit, the clock read) is shared by up to 4x the frames, and
/// on a backlogged queue with many flows interleaved each flow has several segments in
/// one burst for GRO to merge. `weir-bench e2e` (docs/decisions/burst-size.md): 64 -> 128 ->
/// 256 raised the 64-flow rate at every step, about 20% in all, and the 1-flow rate about
/// 10%. A burst that comes back full means the queue is backlogged
/// (`GroConfig::busy_hold_ns`).
pub const MAX_BURST: usize = 256;

/// A burst of buffers in caller-owned storage.
pub type Burst<B> = ArrayVec<B, MAX_BURST>;

/// A receive queue.
pub trait RxQueue {
    /// The buffer type received.
    type Buf: PacketBuf;
    /// Appends up to `out.remaining_capacity()` received frames to `out` and returns how
    /// many were appended (0 when nothing is waiting; never blocks).
    fn rx_burst(&mut self, out: &mut Burst<Self::Buf>) -> usize;
}

/// A transmit queue.
pub trait TxQueue {
    /// The buffer type transmitted.
    type Buf: PacketBuf;
    /// Transmits frames from the front of `pkts` and removes the ones sent. Returns how
    /// many were sent; the unsent remain in `pkts`, in order, for the caller to retry or
    /// drop and count.
    fn tx_burst(&mut self, pkts: &mut Burst<Self::Buf>) -> usize;
}

/// Frames a transmit queue held by [`TxBacklog`] at most, by default: about what Linux
/// queues in front of a driver whose ring is full (a qdisc's `txqueuelen`, 1,000 frames).
pub const TX_BACKLOG: usize = 1024;

/// Frames a transmit queue refused, held for the next call in order, up to a bound; past
/// it they are dropped and counted.
///
/// A full ring is a moment, not a verdict: a NIC's transmit ring fills for a few
/// microseconds under a burst (and a ring pair's whenever its reader is late), and every
/// frame dropped then is an ACK whose window a sender may wait an RTO for, or a segment
/// to retransmit. Linux's stack never sees a driver's full ring: the driver stops the
/// queue (`netif_tx_stop_queue`) and the qdisc holds the frames until it restarts. The
/// backlog is that qdisc for a poll-mode loop: what the queue refused goes out first at
/// the next call, before the new frames, so the order on the wire is the order built.
/// Bounded (its storage is taken once), it holds at most `limit` frames; a queue that
/// stays full past that drops, as a qdisc's tail drop does.
pub struct TxBacklog<B> {
    held: std::collections::VecDeque<B>,
    limit: usize,
    /// Frames dropped because the backlog was full (freed).
    pub dropped: u64,
    /// The most frames held at once.
    pub peak: usize,
}

impl<B: PacketBuf> TxBacklog<B> {
    /// A backlog of at most `limit` frames (0: every refused frame is dropped).
    pub fn new(limit: usize) -> Self {
        TxBacklog {
            held: std::collections::VecDeque::with_capacity(limit),
            limit,
            dropped: 0,
            peak: 0,
        }
    }

    /// Frames held now.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// `true` when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Transmits on `tx` what the backlog holds, then `out`, in that order, and leaves
    /// `out` empty: what the queue refuses is held (behind what is held already) while
    /// the backlog has room, and dropped past it. Returns the frames the queue took.
    /// With nothing held this is one `tx_burst` of `out`.
    #[inline]
    pub fn send<Q: TxQueue<Buf = B>>(&mut self, tx: &mut Q, out: &mut Burst<B>) -> usize {
        let mut sent = 0;
        if !self.held.is_empty() {
            sent += self.send_held(tx);
        }
        if self.held.is_empty() && !out.is_empty() {
            sent += tx.tx_burst(out);
        }
        if !out.is_empty() {
            self.hold(out);
        }
        sent
    }

    /// Frees everything held (a loop that stops): returns how many frames that was,
    /// which are counted as dropped.
    pub fn clear(&mut self) -> usize {
        let n = self.held.len();
        self.held.clear();
        self.dropped += n as u64;
        n
    }

    #[inline(never)]
    fn send_held<Q: TxQueue<Buf = B>>(&mut self, tx: &mut Q) -> usize {
        let mut sent = 0;
        while !self.held.is_empty() {
            let n = self.held.len().min(MAX_BURST);
            let mut b: Burst<B> = self.held.drain(..n).collect();
            let k = tx.tx_burst(&mut b);
            sent += k;
            if k < n {
                // Back to the front, in order: the queue is still full.
                while let Some(f) = b.pop() {
                    self.held.push_front(f);
                }
                break;
            }
        }
        sent
    }

    #[inline(never)]
    fn hold(&mut self, out: &mut Burst<B>) {
        for f in out.drain(..) {
            if self.held.len() < self.limit {
                self.held.push_back(f);
            } else {
                self.dropped += 1;
            }
        }
        self.peak = self.peak.max(self.held.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::{link, VecBuf};

    fn frames(from: u8, n: u8) -> Burst<VecBuf> {
        (from..from + n)
            .map(|i| VecBuf::from_vec(vec![i]))
            .collect()
    }

    fn ids(v: Vec<VecBuf>) -> Vec<u8> {
        v.into_iter().map(|b| b.data()[0]).collect()
    }

    #[test]
    fn a_full_queue_delays_frames_in_order_instead_of_dropping_them() {
        let (mut tx, mut rx) = link(4);
        let mut b = TxBacklog::new(16);
        let mut out = frames(0, 6);
        assert_eq!(b.send(&mut tx, &mut out), 4);
        assert!(out.is_empty());
        assert_eq!((b.len(), b.dropped), (2, 0));
        // The queue is still full: the new frames wait behind the held ones.
        let mut out = frames(6, 3);
        assert_eq!(b.send(&mut tx, &mut out), 0);
        assert_eq!(b.len(), 5);
        assert_eq!(ids(rx.drain_all()), [0, 1, 2, 3]);
        // Room again: the held frames first, then the new ones, in the order built.
        let mut out = frames(9, 1);
        assert_eq!(b.send(&mut tx, &mut out), 4);
        assert_eq!(ids(rx.drain_all()), [4, 5, 6, 7]);
        let mut out = Burst::new();
        assert_eq!(b.send(&mut tx, &mut out), 2);
        assert_eq!(ids(rx.drain_all()), [8, 9]);
        assert!(b.is_empty());
        assert_eq!((b.dropped, b.peak), (0, 5));
    }

    #[test]
    fn past_its_limit_the_backlog_drops_and_counts() {
        let (mut tx, mut rx) = link(2);
        let mut b = TxBacklog::new(3);
        let mut out = frames(0, 8);
        assert_eq!(b.send(&mut tx, &mut out), 2);
        assert_eq!((b.len(), b.dropped, b.peak), (3, 3, 3));
        assert_eq!(ids(rx.drain_all()), [0, 1]);
        assert_eq!(b.send(&mut tx, &mut Burst::new()), 2);
        assert_eq!(ids(rx.drain_all()), [2, 3]);
        assert_eq!(b.clear(), 1);
        assert_eq!(b.dropped, 4);
        // Limit 0: what the queue refuses is dropped at once, as without a backlog.
        let mut none = TxBacklog::new(0);
        let mut out = frames(0, 5);
        assert_eq!(none.send(&mut tx, &mut out), 2);
        assert_eq!((none.len(), none.dropped), (0, 3));
    }
}
