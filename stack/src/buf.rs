//! The buffer trait the pipeline is generic over, and payload chains.
//!
//! Under DPDK a buffer is an `Mbuf` (the `dpdk` crate implements [`PacketBuf`] for it);
//! in tests, benchmarks and fuzzing it is a [`crate::mem::VecBuf`]. Dropping a buffer
//! frees it, so the stack never has to be told how.
//!
//! Coalesced payload is never copied: GRO hands TCP a [`PayloadChain`], an ordered,
//! fixed-capacity list of `(buffer, offset, length)` slices, and TCP hands the same slices
//! to the application.

use arrayvec::ArrayVec;

/// What the NIC says about a received packet's checksums.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ChecksumStatus {
    /// The NIC did not check (verify in software).
    #[default]
    Unknown,
    /// The NIC verified it: no need to check again.
    Good,
    /// The NIC found it wrong: drop.
    Bad,
}

impl ChecksumStatus {
    /// Whether the checksum holds: the NIC's verdict where it gave one, else `verify()`
    /// (the software check, run only then).
    #[inline]
    pub fn holds(self, verify: impl FnOnce() -> bool) -> bool {
        match self {
            ChecksumStatus::Good => true,
            ChecksumStatus::Bad => false,
            ChecksumStatus::Unknown => verify(),
        }
    }
}

/// RX checksum offload results for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RxChecksum {
    /// The IPv4 header checksum.
    pub ip: ChecksumStatus,
    /// The TCP/UDP checksum (with pseudo-header).
    pub l4: ChecksumStatus,
}

/// A TX checksum offload request: the header lengths the NIC needs to fill in the IPv4
/// header and TCP checksums. The caller must have put the pseudo-header checksum in the
/// TCP checksum field, as DPDK's `rte_ipv4_phdr_cksum` / `rte_ipv6_phdr_cksum` do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxChecksumOffload {
    /// Ethernet (+ VLAN) header length.
    pub l2_len: u8,
    /// IP header length.
    pub l3_len: u16,
    /// `true` for IPv4 (the NIC also fills the IPv4 header checksum).
    pub ipv4: bool,
}

/// A packet buffer: one contiguous frame, freed when dropped.
pub trait PacketBuf {
    /// The frame's bytes (Ethernet header first).
    fn data(&self) -> &[u8];
    /// The frame's bytes, writable.
    fn data_mut(&mut self) -> &mut [u8];
    /// Checksum verdicts the NIC attached on receive.
    fn rx_checksum(&self) -> RxChecksum {
        RxChecksum::default()
    }
    /// `false` when the frame spans several chained segments that `data()` does not show
    /// in full (a multi-segment mbuf): `data()` is then the first segment. The pipeline
    /// parses such a frame from its first segment and splits it with
    /// [`PacketBuf::unchain`] into buffers of one segment each, so that each payload
    /// slice owns one buffer (docs/decisions/chained-mbufs.md).
    fn is_contiguous(&self) -> bool {
        true
    }
    /// The frame's length, every segment of a chain included (`data().len()` unless
    /// chained).
    fn frame_len(&self) -> usize {
        self.data().len()
    }
    /// How many segments the frame has (1 unless it is chained).
    fn segment_count(&self) -> usize {
        1
    }
    /// Detaches every segment after the first: each becomes a buffer of its own, one
    /// segment long, handed to `out` in order, and this buffer keeps its first segment
    /// only. Returns `false`, changing nothing, when the buffer type cannot (the default,
    /// for a chain; a contiguous buffer has nothing to detach and returns `true`) or the
    /// segments are shared with another holder.
    fn unchain(&mut self, out: &mut dyn FnMut(Self)) -> bool
    where
        Self: Sized,
    {
        let _ = out;
        self.is_contiguous()
    }
    /// Shortens the frame to `len` bytes (a reply built into a buffer sized for the
    /// worst case). Returns `false` if this buffer type cannot, or `len` is longer.
    fn truncate(&mut self, _len: usize) -> bool {
        false
    }
    /// Bytes that may still be appended after the frame's last byte with
    /// [`PacketBuf::append`]: 0 unless the buffer is exclusively the holder's (no other
    /// reference to its bytes, one segment) and has room after its data. TCP copies a small
    /// in-order segment into the tail of the receive queue's last buffer when it fits
    /// (Linux `tcp_try_coalesce`), so a window's worth of small segments needs few
    /// buffers. The default: none.
    fn tailroom(&self) -> usize {
        0
    }
    /// Copies `bytes` after the frame's last byte. Returns `false` (nothing changed) when
    /// they exceed [`PacketBuf::tailroom`].
    fn append(&mut self, _bytes: &[u8]) -> bool {
        false
    }
    /// Asks the NIC to compute checksums on transmit. Call it only when the port the
    /// buffer leaves on offloads them (the driver says so once: the pipeline's
    /// `tx_csum_offload`). Returns `false` when this buffer type cannot carry the request
    /// (the caller then computes the checksums in software).
    fn request_tx_checksum(&mut self, _req: TxChecksumOffload) -> bool {
        false
    }
    /// Frees every buffer `bufs` yields. The default drops them one by one; a buffer type
    /// whose allocator frees a batch more cheaply (DPDK's mempools, one put per batch)
    /// overrides it. GRO and TCP free a unit's leftover payload this way.
    fn free_bulk(bufs: impl Iterator<Item = Self>)
    where
        Self: Sized,
    {
        bufs.for_each(drop);
    }

    /// Frees every buffer in `bufs`, leaving it empty: [`PacketBuf::free_bulk`] of its
    /// contents, unless the buffer type reads them where they lie (an mbuf: the array is
    /// its pointers), with no iterator built to pass them on. [`FreeBatch`] frees this way.
    #[inline]
    fn free_batch<const N: usize>(bufs: &mut ArrayVec<Self, N>)
    where
        Self: Sized,
    {
        Self::free_bulk(bufs.drain(..));
    }

    /// Frees the buffer of every slice in `slices`, leaving it empty, as
    /// [`PacketBuf::free_batch`] frees a batch. [`PayloadChain::clear`] frees this way.
    #[inline]
    fn free_slices<const N: usize>(slices: &mut ArrayVec<PayloadSlice<Self>, N>)
    where
        Self: Sized,
    {
        Self::free_bulk(slices.drain(..).map(|s| s.buf));
    }

    /// Hints that this buffer's own descriptor (its length and data address: DPDK's
    /// `rte_mbuf`) will be read soon, without reading it. The default does nothing. The
    /// pipeline calls it for a whole burst before handling the first frame: the
    /// descriptors of frames a NIC or another core just wrote are cache misses, and
    /// fetched together they overlap instead of costing one after another.
    #[inline(always)]
    fn prefetch_descriptor(&self) {}

    /// Hints that the frame's first two cache lines (its Ethernet, IP and TCP headers)
    /// will be read soon: the platform's prefetch instruction, which never faults and
    /// changes nothing. The default does nothing. `stack` has no unsafe code, so the
    /// buffer type, its one link to the platform, supplies it (as it supplies
    /// [`PacketBuf::free_bulk`]); the pipeline fetches each frame's headers a few frames
    /// before it handles it.
    #[inline(always)]
    fn prefetch_data(&self) {}

    /// Hints that this buffer will be freed soon: the lines its allocator's free reads,
    /// without reading them. The default does nothing; an mbuf fetches both descriptor
    /// lines (its free reads the reference count and pool in the first, the
    /// next-segment pointer in the second). GRO calls it on the buffers it gathers
    /// for one bulk free: a run flushed by its timer has sat long enough for them to
    /// leave L1 (measured at 4,096 flows and a 100 µs window: about 3% per segment;
    /// docs/decisions/prefetches.md).
    #[inline(always)]
    fn prefetch_for_free(&self) {}

    /// Hints that the cache line holding `p` will be read soon: the platform's prefetch
    /// instruction, which never faults, whatever the address, and changes nothing. The
    /// default does nothing. TCP fetches a connection's table bucket and entry with it a
    /// frame or two before the frame's segment looks the connection up (the buffer type
    /// supplies it because `stack` has no unsafe code, as for [`PacketBuf::prefetch_data`]).
    #[inline(always)]
    fn prefetch_line(p: *const u8)
    where
        Self: Sized,
    {
        let _ = p;
    }
}

/// A source of empty buffers for building packets (ACKs, SYN-ACKs, ARP replies).
pub trait BufPool {
    /// The buffer type handed out.
    type Buf: PacketBuf;
    /// A buffer whose `data()` is exactly `len` bytes long (contents unspecified), or
    /// `None` when the pool is exhausted or `len` exceeds the buffer size.
    fn alloc(&mut self, len: usize) -> Option<Self::Buf>;

    /// `true` if [`BufPool::alloc_with_payload`] may return frames: TCP then asks it first
    /// for each data segment whose payload lies in one queued buffer. `false` (the
    /// default) spares it the look-up.
    #[inline(always)]
    fn prefills(&self) -> bool {
        false
    }

    /// A frame for a data segment whose payload is already in place: `hdr_len + len`
    /// bytes on the wire, of which the first `hdr_len` (the headers) are writable through
    /// [`PacketBuf::data_mut`] and the next `len` already hold
    /// `src.data()[off..off + len]`, either in a buffer the pool keeps stamped with those
    /// bytes or chained behind the header by reference (an mbuf chain; the port must
    /// send multi-segment frames). Nothing may write past the headers. With it comes the
    /// payload's one's-complement sum, so the TCP checksum costs the headers only
    /// (RFC 1071 §2: sums are associative; the payload starts at an even offset of the
    /// TCP segment, whose header is a multiple of 4 bytes).
    ///
    /// `at` is the address of `src.data()[off]` (as an integer), which TCP took when it
    /// queued `src`: a pool that finds the bytes by where they lie can use it instead of
    /// reading `src`'s header, which at many flows is cold by the time the segment is
    /// built.
    ///
    /// `None` (the default): the pool cannot do it for these bytes, and TCP allocates
    /// with [`BufPool::alloc`] and copies. docs/decisions/send-path.md has the design.
    #[inline(always)]
    fn alloc_with_payload(
        &mut self,
        hdr_len: usize,
        src: &Self::Buf,
        off: usize,
        len: usize,
        at: usize,
    ) -> Option<Prefilled<Self::Buf>> {
        let _ = (hdr_len, src, off, len, at);
        None
    }
}

/// A frame whose payload [`BufPool::alloc_with_payload`] put in place.
#[derive(Debug)]
pub struct Prefilled<B> {
    /// The frame: writable headers, then the payload.
    pub buf: B,
    /// The payload's one's-complement sum (RFC 1071), folded to 16 bits, not
    /// complemented, as if it started at an even offset.
    pub payload_sum: u16,
}

/// Most segments a received frame of chained buffers may have: a 9,018-byte frame is 5
/// segments of 2,048-byte mbufs, 9 of 1,024-byte ones. A longer chain is dropped and
/// counted (`pipeline.nonlinear`).
pub const MAX_FRAME_SEGS: usize = 16;

/// Longest payload chain GRO builds: 64 segments (a 64 KiB run of 1448-byte segments is
/// 45; smaller segments hit this cap first, as Linux's `MAX_SKB_FRAGS`-bounded GRO does).
pub const MAX_CHAIN: usize = 64;

/// A slice of payload inside a received buffer.
#[derive(Debug)]
pub struct PayloadSlice<B> {
    /// The buffer holding the bytes (keeps it alive; dropping frees it).
    pub buf: B,
    /// Offset of the first payload byte within `buf.data()`.
    pub off: u16,
    /// Number of payload bytes.
    pub len: u16,
}

impl<B: PacketBuf> PayloadSlice<B> {
    /// The payload bytes. Returns an empty slice if the recorded range is out of bounds
    /// (which a correct producer never records).
    pub fn bytes(&self) -> &[u8] {
        let start = usize::from(self.off);
        let end = start + usize::from(self.len);
        self.buf.data().get(start..end).unwrap_or(&[])
    }
}

/// Buffers done with, gathered and freed together ([`PacketBuf::free_batch`]) when
/// [`MAX_CHAIN`] have gathered or when the owner calls [`FreeBatch::free`]: one bulk free
/// per buffer or two (a unit of one segment, one connection's read) waits for each
/// descriptor in turn, while a batch's misses overlap (each buffer is asked for with
/// [`PacketBuf::prefetch_for_free`] as it is added). GRO gathers what its consumer left,
/// TCP what the application read; dropping the batch frees what is left one by one.
pub(crate) struct FreeBatch<B>(ArrayVec<B, MAX_CHAIN>);

impl<B: PacketBuf> FreeBatch<B> {
    /// An empty batch.
    pub(crate) fn new() -> Self {
        FreeBatch(ArrayVec::new())
    }
    /// Adds `buf`, freeing the batch first when it is full.
    #[inline(always)]
    pub(crate) fn push(&mut self, buf: B) {
        if self.0.is_full() {
            self.free();
        }
        buf.prefetch_for_free();
        self.0.push(buf);
    }
    /// Adds every buffer of `chain`, emptying it; frees the batch first when they would
    /// not all fit, so a unit's buffers leave together (and the loop has no check).
    #[inline(always)]
    pub(crate) fn push_chain(&mut self, chain: &mut PayloadChain<B>) {
        if chain.slice_count() > self.0.remaining_capacity() {
            self.free();
        }
        for sl in chain.drain() {
            sl.buf.prefetch_for_free();
            // Fits: a chain holds at most MAX_CHAIN slices, and the batch has room.
            let _ = self.0.try_push(sl.buf);
        }
    }
    /// Whether no buffer is gathered.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Frees every buffer gathered.
    #[inline]
    pub(crate) fn free(&mut self) {
        if !self.0.is_empty() {
            B::free_batch(&mut self.0);
        }
    }
}

/// An ordered list of payload slices: one coalesced segment's bytes, without copying.
#[derive(Debug)]
pub struct PayloadChain<B> {
    slices: ArrayVec<PayloadSlice<B>, MAX_CHAIN>,
    len: u32,
}

impl<B> Default for PayloadChain<B> {
    fn default() -> Self {
        PayloadChain {
            slices: ArrayVec::new(),
            len: 0,
        }
    }
}

impl<B: PacketBuf> PayloadChain<B> {
    /// An empty chain.
    pub fn new() -> Self {
        Self::default()
    }
    /// Appends a slice; gives it back if the chain is full.
    #[inline(always)]
    pub fn push(&mut self, s: PayloadSlice<B>) -> Result<(), PayloadSlice<B>> {
        if self.slices.is_full() {
            return Err(s);
        }
        self.len += u32::from(s.len);
        self.slices.push(s);
        Ok(())
    }
    /// Total payload bytes.
    pub fn len(&self) -> u32 {
        self.len
    }
    /// `true` when there is no payload.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Number of slices (buffers).
    pub fn slice_count(&self) -> usize {
        self.slices.len()
    }
    /// `true` when no further slice fits.
    pub fn is_full(&self) -> bool {
        self.slices.is_full()
    }
    /// The slices in order.
    pub fn slices(&self) -> &[PayloadSlice<B>] {
        &self.slices
    }
    /// Takes the slices out in order.
    pub fn drain(&mut self) -> impl Iterator<Item = PayloadSlice<B>> + '_ {
        self.len = 0;
        self.slices.drain(..)
    }
    /// Takes the first `k` slices out in order (all of them when `k` is larger), leaving
    /// the rest: how TCP's `send_bufs` takes what fits and hands back the remainder.
    pub fn drain_front(&mut self, k: usize) -> impl Iterator<Item = PayloadSlice<B>> + '_ {
        let k = k.min(self.slices.len());
        let bytes: u32 = self.slices[..k].iter().map(|s| u32::from(s.len)).sum();
        self.len -= bytes;
        self.slices.drain(..k)
    }
    /// Frees every slice's buffer ([`PacketBuf::free_slices`]), leaving the chain empty.
    #[inline]
    pub fn clear(&mut self) {
        if !self.slices.is_empty() {
            self.len = 0;
            B::free_slices(&mut self.slices);
        }
    }
    /// Moves the slices out into a new chain, leaving this one empty. Unlike
    /// `mem::take`, copies only the slots in use.
    pub fn take(&mut self) -> PayloadChain<B> {
        let mut p = PayloadChain::new();
        for s in self.drain() {
            let _ = p.push(s); // same capacity: always fits
        }
        p
    }
    /// Removes `n` bytes from the front (dropping buffers that become empty). Used when a
    /// retransmission overlaps bytes already received.
    pub fn trim_front(&mut self, mut n: u32) {
        n = n.min(self.len);
        self.len -= n;
        let mut remove = 0;
        for s in self.slices.iter_mut() {
            if n == 0 {
                break;
            }
            let take = n.min(u32::from(s.len)) as u16;
            s.off += take;
            s.len -= take;
            n -= u32::from(take);
            if s.len == 0 {
                remove += 1;
            }
        }
        self.slices.drain(..remove);
    }
    /// Removes bytes from the back so that at most `keep` bytes remain.
    pub fn truncate(&mut self, keep: u32) {
        if keep >= self.len {
            return;
        }
        let mut left = keep;
        let mut cut_at = self.slices.len();
        for (i, s) in self.slices.iter_mut().enumerate() {
            if left == 0 {
                cut_at = i;
                break;
            }
            if u32::from(s.len) > left {
                s.len = left as u16;
            }
            left -= u32::from(s.len);
        }
        self.slices.truncate(cut_at);
        self.len = keep;
    }
    /// Copies the payload into a `Vec` (tests and digests only; the data path never copies).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len as usize);
        for s in &self.slices {
            v.extend_from_slice(s.bytes());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::VecBuf;

    fn chain(parts: &[&[u8]]) -> PayloadChain<VecBuf> {
        let mut c = PayloadChain::new();
        for p in parts {
            let mut frame = vec![0xee; 3];
            frame.extend_from_slice(p);
            let s = PayloadSlice {
                buf: VecBuf::from_vec(frame),
                off: 3,
                len: p.len() as u16,
            };
            assert!(c.push(s).is_ok());
        }
        c
    }

    #[test]
    fn trim_and_truncate_keep_order() {
        let mut c = chain(&[b"abc", b"defg", b"hi"]);
        assert_eq!(c.len(), 9);
        c.trim_front(4);
        assert_eq!(c.to_vec(), b"efghi");
        assert_eq!(c.slice_count(), 2);
        c.truncate(3);
        assert_eq!(c.to_vec(), b"efg");
        assert_eq!(c.len(), 3);
        c.trim_front(100);
        assert!(c.is_empty());
    }
}
