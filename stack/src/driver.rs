//! Driver traits: how the pipeline receives and transmits bursts.
//!
//! A burst lives in caller-owned, fixed-capacity storage ([`Burst`]); nothing on this path
//! allocates. `dpdk` implements these traits for port queues; [`crate::mem`] implements
//! them with in-memory queues for tests and pure-CPU benchmarks.

use arrayvec::ArrayVec;

use crate::buf::PacketBuf;

/// Largest burst the pipeline moves at once (DPDK's customary 32, doubled for headroom on
/// the transmit side, where one iteration's ACK batch may exceed one receive burst).
pub const MAX_BURST: usize = 64;

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
