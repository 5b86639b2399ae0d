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
