//! The coalesced segment: what GRO hands to TCP.
//!
//! Not a rewritten packet: a descriptor carrying the header fields TCP needs and the
//! payload as a chain of received buffers, so the receive path needs no header rewrite and
//! no checksum recomputation. Every TCP segment reaches TCP this way, coalesced or not (a
//! SYN, a RST or a lone segment is a run of one).
//!
//! A `Segment` is about 1.1 KiB (its payload chain has room for `MAX_CHAIN` slices), so
//! it is handed on by reference, never moved: GRO fills one in its own storage and passes
//! `&mut Segment` to its consumer, which takes the payload slices it keeps (TCP drains
//! them into its receive queue); whatever the consumer leaves in `payload` is freed when
//! the call returns. Moving a `Segment` per unit costs a copy of every slot, which at one
//! segment per unit was GRO's largest cost (docs/decisions/segment-by-reference.md).

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
    /// An empty segment (no flow, no payload): storage for [`Segment::fill_from_meta`].
    pub fn empty() -> Self {
        Segment {
            flow: FlowKey::default(),
            peer_mac: [0; 6],
            local_mac: [0; 6],
            seq: SeqNumber(0),
            ack: SeqNumber(0),
            flags: TcpFlags::NONE,
            window: 0,
            opts: TcpOptions::default(),
            ts_last: None,
            segs: 0,
            gso_size: 0,
            first_rx: Instant::ZERO,
            payload: PayloadChain::new(),
        }
    }

    /// Makes this the run of one described by `meta`, whose payload lies in `buf`: how GRO
    /// passes on a segment it does not hold, and how the pipeline passes segments on with
    /// GRO off, without building a `Segment` per segment. Whatever payload this held is
    /// freed first.
    #[inline]
    pub fn fill_from_meta(&mut self, meta: &TcpMeta, buf: B, now: Instant) {
        self.payload.clear();
        if meta.payload_len > 0 {
            // An empty chain always has room for one slice.
            let _ = self.payload.push(PayloadSlice {
                buf,
                off: meta.payload_off,
                len: meta.payload_len,
            });
        }
        self.set_header(meta, now);
    }

    /// The header fields of one wire segment `meta` received at `now` (both fills).
    #[inline(always)]
    pub(crate) fn set_header(&mut self, meta: &TcpMeta, now: Instant) {
        self.flow = meta.flow;
        self.peer_mac = meta.src_mac;
        self.local_mac = meta.dst_mac;
        self.seq = meta.seq;
        self.ack = meta.ack;
        self.flags = meta.flags;
        self.window = meta.window;
        self.opts = meta.opts;
        self.ts_last = meta.opts.timestamp;
        self.segs = 1;
        self.gso_size = meta.payload_len;
        self.first_rx = now;
    }

    /// [`Segment::fill_from_meta`] for a segment whose payload lies in several buffers
    /// (a frame of chained buffers): `payload`'s slices are moved in, leaving it empty.
    pub fn fill_from_chain(&mut self, meta: &TcpMeta, payload: &mut PayloadChain<B>, now: Instant) {
        self.payload.clear();
        for s in payload.drain() {
            // Both chains have the same capacity.
            let _ = self.payload.push(s);
        }
        self.set_header(meta, now);
    }

    /// Moves this segment out (its payload slices and a copy of its header fields),
    /// leaving its payload empty: for consumers that keep whole segments (tests, batches).
    pub fn take(&mut self) -> Self {
        Segment {
            flow: self.flow,
            peer_mac: self.peer_mac,
            local_mac: self.local_mac,
            seq: self.seq,
            ack: self.ack,
            flags: self.flags,
            window: self.window,
            opts: self.opts,
            ts_last: self.ts_last,
            segs: self.segs,
            gso_size: self.gso_size,
            first_rx: self.first_rx,
            payload: self.payload.take(),
        }
    }

    /// A run of one: the segment described by `meta`, whose payload lies in `buf`
    /// (tests and fuzzing build segments this way; the data path fills one in place with
    /// [`Segment::fill_from_meta`]).
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
