//! The coalesced segment: what GRO hands to TCP.
//!
//! Not a rewritten packet: a descriptor carrying the header fields TCP needs and the
//! payload as a chain of received buffers, so the receive path needs no header rewrite and
//! no checksum recomputation. Every TCP segment reaches TCP this way, coalesced or not (a
//! SYN, a RST or a lone segment is a run of one).

use crate::buf::{PayloadChain, PayloadSlice};
use crate::flow::FlowKey;
use crate::seq::SeqNumber;
use crate::time::Instant;
use crate::wire::{TcpFlags, TcpMeta, TcpOptions, Timestamp};

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

impl<B: crate::buf::PacketBuf> Segment<B> {
    /// A run of one: the segment described by `meta`, whose payload lies in `buf`. This is
    /// how GRO starts a run and how the pipeline passes segments on with GRO off.
    pub fn from_meta(meta: &TcpMeta, buf: B, now: Instant) -> Self {
        let mut payload = PayloadChain::new();
        if meta.payload_len > 0 {
            // A fresh chain always has room for one slice.
            let _ = payload.push(PayloadSlice {
                buf,
                off: meta.payload_off,
                len: meta.payload_len,
            });
        }
        Segment {
            flow: meta.flow,
            peer_mac: meta.src_mac,
            local_mac: meta.dst_mac,
            seq: meta.seq,
            ack: meta.ack,
            flags: meta.flags,
            window: meta.window,
            opts: meta.opts,
            ts_last: meta.opts.timestamp,
            segs: 1,
            gso_size: meta.payload_len,
            first_rx: now,
            payload,
        }
    }

    /// Sequence space the segment occupies: payload plus one each for SYN and FIN.
    pub fn seq_len(&self) -> usize {
        self.payload.len() as usize
            + usize::from(self.flags.contains(TcpFlags::SYN))
            + usize::from(self.flags.contains(TcpFlags::FIN))
    }
}
