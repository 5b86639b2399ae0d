//! The coalesced segment: what GRO hands to TCP.
//!
//! Not a rewritten packet: a descriptor carrying the header fields TCP needs and the
//! payload as a chain of received buffers, so the receive path needs no header rewrite and
//! no checksum recomputation. Every TCP segment reaches TCP this way, coalesced or not (a
//! SYN, a RST or a lone segment is a run of one).

use crate::buf::PayloadChain;
use crate::flow::FlowKey;
use crate::seq::SeqNumber;
use crate::time::Instant;
use crate::wire::{TcpFlags, TcpOptions, Timestamp};

/// One coalesced run of a flow's contiguous segments (or a single segment).
#[derive(Debug)]
pub struct Segment<B> {
    /// The flow.
    pub flow: FlowKey,
    /// The peer's MAC address (source MAC of the run's first frame).
    pub peer_mac: [u8; 6],
    /// Our MAC address as the peer addressed it (destination MAC of the first frame).
    pub local_mac: [u8; 6],
    /// Sequence number of the first payload byte (or of the SYN).
    pub seq: SeqNumber,
    /// Acknowledgment number (identical across the run).
    pub ack: SeqNumber,
    /// The first segment's flags with PSH and FIN OR'ed in from the rest, as Linux's
    /// `tcp_gro_receive` does.
    pub flags: TcpFlags,
    /// The raw window field (identical across the run).
    pub window: u16,
    /// The first segment's options (its timestamp is the one to echo, RFC 7323 §4.3).
    pub opts: TcpOptions,
    /// The last segment's timestamp (the newest TSval, for PAWS and `ts_recent`).
    pub ts_last: Option<Timestamp>,
    /// Number of wire segments in the run.
    pub segs: u16,
    /// Payload length of the first segment (Linux's `gso_size`; TCP estimates rcv_mss from
    /// it, not from the run's total).
    pub gso_size: u16,
    /// When the run's first segment was received (for added-latency statistics).
    pub first_rx: Instant,
    /// The payload, in order.
    pub payload: PayloadChain<B>,
}

impl<B> Segment<B> {
    /// Sequence space the segment occupies: payload plus one each for SYN and FIN.
    pub fn seq_len(&self) -> usize
    where
        B: crate::buf::PacketBuf,
    {
        self.payload.len() as usize
            + usize::from(self.flags.contains(TcpFlags::SYN))
            + usize::from(self.flags.contains(TcpFlags::FIN))
    }
}
