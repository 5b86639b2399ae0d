//! Where weir-gen builds its frames: [`SegmentPool`], and [`GenPool`] on DPDK.
//!
//! Segments are built from templates with the payload shared by reference count, so that a
//! segment costs its headers only. weir-gen does that two ways.
//!
//! **On a real port** (the `weir-gen` program; net_tap or a NIC), by reference count
//! ([`GenPool::with_shared`], the default when the port can send chained mbufs): the
//! pattern lives once in a read-only mbuf ([`dpdk::SharedData`]), and each data segment is
//! a header mbuf with a slice of it chained behind ([`dpdk::Mbuf::chain_shared`]). The NIC
//! reads the chain and puts one contiguous frame on the wire, and the references are taken
//! and dropped on the generator's own core (at the build and at the transmit completion).
//! `--copy-payload` copies the payload instead.
//!
//! **On the ring pair of `weir-bench e2e`**, by stamping: a [`GenPool`] can hold a second
//! mempool whose every mbuf was written once, at creation
//! ([`dpdk::Mempool::new_stamped`]), with the payload of a full segment right after where
//! the headers go. A data segment whose payload equals the stamp (with the benchmark's
//! pattern, every segment that starts at a multiple of the MSS: see
//! [`super::payload::Payload::with_period`]) is allocated from that pool and only its
//! [`super::sender::HDR_LEN`] header bytes are written. A chain would be wrong there:
//!
//! - the receiver stands for a NIC's receive path, which hands over each frame in one
//!   contiguous buffer; weir's `PacketBuf` is exactly that, so a two-segment chain would
//!   have to be linearised on the receiving core: the copy would move from the generator
//!   to the core being measured;
//! - every segment would increment and decrement one shared refcount from both cores, a
//!   cache line bouncing between them on every segment.
//!
//! Stamped buffers cost neither. Nothing writes into a received frame's payload (weir's
//! GRO chains buffers, the sink reads them), so a stamp survives its round trips; that
//! is checked, not assumed: every [`CHECK_EVERY`]th stamped allocation compares the stamp
//! (and repairs and counts a damaged one), and [`GenPool::verify_stamps`] checks every
//! free mbuf of the pool between runs. Segments that do not start at a multiple of the
//! period (a short write's tail and what follows it) and control frames come from the
//! plain pool, with their payload copied, so they never overwrite a stamp.

use dpdk::{Mbuf, Mempool, PortPool, SharedData, StashPool, MAX_SHARED_REFS};
use stack::buf::{BufPool, PacketBuf, PayloadSlice, Prefilled};
use stack::mem::{VecBuf, VecPool};

use super::engine::PayloadSource;
use super::payload::Payload;
use super::sender::HDR_LEN;

/// Every this many stamped allocations, the stamp of the buffer handed out is compared.
pub const CHECK_EVERY: u64 = 4096;

/// What [`super::Sender::poll_tx`] builds frames in.
pub trait SegmentPool {
    /// The buffer type.
    type Buf: PacketBuf;
    /// A buffer of `len` bytes, contents unspecified (control frames, copied payloads).
    fn alloc(&mut self, len: usize) -> Option<Self::Buf>;
    /// The bytes every buffer from [`SegmentPool::alloc_stamped`] holds from
    /// [`HDR_LEN`] on (empty: the pool has no stamped buffers).
    fn stamp(&self) -> &[u8] {
        &[]
    }
    /// A buffer of `HDR_LEN + len` bytes (`len` at most the stamp's length) whose bytes
    /// from `HDR_LEN` are the first `len` bytes of [`SegmentPool::stamp`]: the caller
    /// writes the headers only and must not write past them. `None` when the pool is
    /// empty or has no stamp.
    fn alloc_stamped(&mut self, len: usize) -> Option<Self::Buf> {
        let _ = len;
        None
    }
    /// A frame whose first [`HDR_LEN`] bytes (its first segment) are for the headers and
    /// whose next `len` bytes are the payload pattern's bytes from `start`, the place in
    /// the pattern's period of the segment's stream offset
    /// ([`super::payload::Payload::start`]), carried by reference: the caller writes the
    /// headers only. `None` when the pool has no shared payload, or cannot now (the caller
    /// then copies).
    fn alloc_shared(&mut self, start: usize, len: usize) -> Option<Self::Buf> {
        let _ = (start, len);
        None
    }
}

/// The in-memory pool (tests, the lab's simulator) is a pool without a stamp.
impl SegmentPool for VecPool {
    type Buf = VecBuf;
    fn alloc(&mut self, len: usize) -> Option<VecBuf> {
        BufPool::alloc(self, len)
    }
}

/// The generator's pools on a DPDK port: a plain one, and optionally a stamped one for
/// data segments (see the module documentation).
#[derive(Debug)]
pub struct GenPool {
    // Stashes: mbufs taken 32 at a time with their header lines prefetched (the receiver
    // freed them on its core).
    plain: StashPool,
    stamped: Option<(StashPool, Vec<u8>)>,
    shared: Option<Shared>,
    /// Data segments may carry the shared pattern chained by reference.
    chain: bool,
    /// The pattern's sums, for frames whose payload is put in place.
    sums: Option<Payload>,
    allocs: u64,
    damaged: u64,
    /// Data segments built in a stamped buffer, or with the payload chained by
    /// reference, through [`BufPool::alloc_with_payload`].
    pub stamped_segments: u64,
    /// See [`GenPool::stamped_segments`].
    pub chained_segments: u64,
    /// Segments whose payload could have gone by reference but was copied because the
    /// pool of payload references was empty at that moment (how often depends on how fast
    /// the port gives transmitted mbufs back).
    pub refs_exhausted: u64,
}

impl GenPool {
    /// Only `plain`: every payload is copied.
    pub fn plain(plain: PortPool) -> GenPool {
        GenPool {
            plain: StashPool::new(plain),
            stamped: None,
            shared: None,
            chain: false,
            sums: None,
            allocs: 0,
            damaged: 0,
            stamped_segments: 0,
            chained_segments: 0,
            refs_exhausted: 0,
        }
    }

    /// `plain` for every frame's first segment, with data segments' payloads carried by
    /// reference: `pattern` holds the payload pattern as [`super::payload::Payload::as_bytes`]
    /// lays it out (a segment's bytes start at its place in the period), and each segment
    /// takes an mbuf from `refs` (data room unused) to point into it. For a port that sends
    /// chained mbufs.
    ///
    /// `patterns` are copies of the pattern, as many as [`pattern_copies`] says for the
    /// references the generator may hold at once: one copy carries at most
    /// [`MAX_SHARED_REFS`] (its reference count is 16 bits). An empty list shares nothing.
    pub fn with_shared(plain: PortPool, refs: Mempool, patterns: Vec<SharedData>) -> GenPool {
        GenPool {
            shared: Shared::new(patterns, refs),
            chain: true,
            ..GenPool::plain(plain)
        }
    }

    /// For weir-gen on the stack: `pattern` (laid out as [`Payload::as_bytes`] for
    /// `period`) is where the flows' write buffers point ([`PayloadSource`], each an mbuf
    /// from `refs` attached to it), and data segments get their payload put in place
    /// when the bytes allow: a stamped buffer if this pool has one, else, with `chain`,
    /// a slice of the pattern chained by reference (the port must send chained mbufs);
    /// otherwise TCP copies them.
    ///
    /// `patterns`: copies of the pattern, as for [`GenPool::with_shared`].
    pub fn with_pattern(
        mut self,
        patterns: Vec<SharedData>,
        refs: Mempool,
        period: usize,
        chain: bool,
    ) -> GenPool {
        self.shared = Shared::new(patterns, refs);
        self.sums = Some(Payload::with_period(period));
        self.chain = chain;
        self
    }

    /// `plain` for control frames and copied payloads, `stamped` (created with
    /// [`dpdk::Mempool::new_stamped`] at offset [`HDR_LEN`] with `stamp`) for segments whose
    /// payload is a prefix of `stamp`.
    pub fn with_stamped(plain: PortPool, stamped: PortPool, stamp: Vec<u8>) -> GenPool {
        GenPool {
            stamped: Some((StashPool::new(stamped), stamp)),
            ..GenPool::plain(plain)
        }
    }

    /// Stamped buffers found damaged (and repaired) by the sampled check; 0 when nothing
    /// writes into the payload of a frame it received.
    pub fn damaged(&self) -> u64 {
        self.damaged
    }

    /// Checks the stamp of every mbuf the stamped pool can hand out now (allocates them
    /// all, compares, frees them; mbufs in use elsewhere are skipped): `(checked,
    /// damaged)`. Run it between runs, when nothing else allocates from the pool.
    pub fn verify_stamps(&self) -> (u64, u64) {
        let Some((pool, stamp)) = &self.stamped else {
            return (0, 0);
        };
        let mut held: Vec<Mbuf> = Vec::with_capacity(pool.mempool().available());
        let (mut checked, mut damaged) = (0, 0);
        while let Some(m) = pool.mempool().alloc_len(HDR_LEN + stamp.len()) {
            checked += 1;
            if m.data().get(HDR_LEN..) != Some(&stamp[..]) {
                damaged += 1;
            }
            held.push(m);
        }
        (checked, damaged)
    }
}

/// Copies of the payload pattern that `refs` references can hold at once: one per
/// `MAX_SHARED_REFS - 1` (a copy's own reference counts too), at least one.
///
/// A single copy would cap the references in flight at 65,533: at 65,536 flows, one
/// write buffer each takes them all, and no flow could write a second.
pub fn pattern_copies(refs: u64) -> usize {
    refs.div_ceil(u64::from(MAX_SHARED_REFS - 1)).max(1) as usize
}

/// `n` read-only copies of `bytes` (the payload pattern) in mbufs from `pool`, for
/// [`GenPool::with_shared`] and [`GenPool::with_pattern`]. Fails when `pool` runs out or
/// `bytes` does not fit its mbufs.
pub fn share_copies(pool: &Mempool, bytes: &[u8], n: usize) -> Result<Vec<SharedData>, String> {
    (0..n)
        .map(|k| {
            let mut m = pool
                .alloc_empty()
                .ok_or_else(|| format!("the payload pattern's pool is empty at copy {k} of {n}"))?;
            if !m.extend_from_slice(bytes) {
                return Err(format!(
                    "the payload pattern ({} bytes) does not fit its mbuf",
                    bytes.len()
                ));
            }
            SharedData::new(m).ok_or_else(|| "the payload pattern's mbuf cannot be shared".into())
        })
        .collect()
}

/// A payload pattern shared by reference (see the module documentation), in copies of
/// equal bytes: references go to the copy in use until it is full, then to the next.
#[derive(Debug)]
struct Shared {
    copies: Vec<SharedData>,
    /// The copy new references go to.
    at: usize,
    refs: Mempool,
}

impl Shared {
    fn new(copies: Vec<SharedData>, refs: Mempool) -> Option<Shared> {
        (!copies.is_empty()).then_some(Shared {
            copies,
            at: 0,
            refs,
        })
    }

    /// The copy with room for one more reference: the one in use, else the next in turn
    /// that has room; `None` when every copy is full.
    #[inline]
    fn with_room(&mut self) -> Option<&SharedData> {
        let n = self.copies.len();
        for _ in 0..n {
            if self.copies[self.at].references() < MAX_SHARED_REFS {
                return Some(&self.copies[self.at]);
            }
            self.at = (self.at + 1) % n;
        }
        None
    }

    /// A buffer of its own referring to `len` bytes of the pattern from `off` (an mbuf
    /// from `refs`, [`SharedData::reference`]) in a copy with room; `None` when every
    /// copy is at its limit or `refs` is empty.
    #[inline]
    fn reference(&mut self, off: u16, len: u16) -> Option<Mbuf> {
        let refs = self.refs;
        self.with_room()?.reference(&refs, off, len)
    }

    /// Chains `len` bytes of the pattern from `off` behind `m` by reference
    /// ([`Mbuf::chain_shared`]) from a copy with room; `false` (nothing changed) when no
    /// copy has room or `refs` is empty.
    #[inline]
    fn chain(&mut self, m: &mut Mbuf, off: u16, len: u16) -> bool {
        let refs = self.refs;
        self.with_room()
            .is_some_and(|c| m.chain_shared(&refs, c, off, len))
    }

    /// Where `len` bytes at address `p` lie in the pattern (their offset in the copy
    /// holding them), `None` when no copy holds them.
    #[inline]
    fn offset_of(&self, p: usize, len: usize) -> Option<usize> {
        self.copies.iter().find_map(|c| {
            let pos = p.checked_sub(c.data().as_ptr() as usize)?;
            (pos + len <= c.data().len()).then_some(pos)
        })
    }
}

impl SegmentPool for GenPool {
    type Buf = Mbuf;
    fn alloc_shared(&mut self, start: usize, len: usize) -> Option<Mbuf> {
        if !self.chain {
            return None;
        }
        let start = u16::try_from(start).ok()?;
        let len = u16::try_from(len).ok()?;
        let mut m = BufPool::alloc(&mut self.plain, HDR_LEN)?;
        self.shared.as_mut()?.chain(&mut m, start, len).then_some(m)
    }
    fn alloc(&mut self, len: usize) -> Option<Mbuf> {
        BufPool::alloc(&mut self.plain, len)
    }
    fn stamp(&self) -> &[u8] {
        self.stamped.as_ref().map_or(&[], |(_, s)| &s[..])
    }
    fn alloc_stamped(&mut self, len: usize) -> Option<Mbuf> {
        let (pool, stamp) = self.stamped.as_mut()?;
        let mut m = BufPool::alloc(pool, HDR_LEN + len)?;
        self.allocs += 1;
        if self.allocs % CHECK_EVERY == 0 {
            let want = stamp.get(..len)?;
            let got = m.data_mut().get_mut(HDR_LEN..)?;
            if got != want {
                self.damaged += 1;
                got.copy_from_slice(want);
            }
        }
        Some(m)
    }
}

/// Frames for weir's TCP (weir-gen on the stack): see [`GenPool::with_pattern`].
impl BufPool for GenPool {
    type Buf = Mbuf;
    #[inline]
    fn alloc(&mut self, len: usize) -> Option<Mbuf> {
        BufPool::alloc(&mut self.plain, len)
    }
    #[inline]
    fn prefills(&self) -> bool {
        self.sums.is_some() && (self.stamped.is_some() || self.chain)
    }
    #[inline]
    fn alloc_with_payload(
        &mut self,
        hdr_len: usize,
        _src: &Mbuf,
        _off: usize,
        len: usize,
        at: usize,
    ) -> Option<Prefilled<Mbuf>> {
        let sh = self.shared.as_ref()?;
        let sums = self.sums.as_ref()?;
        // Where the bytes are in the pattern: a write buffer is a window onto one copy,
        // and `at` is where in it (taken when TCP queued the buffer, so the buffer's
        // header is not read again here).
        let pos = sh.offset_of(at, len)?;
        let start = sums.place(pos);
        if hdr_len == HDR_LEN && start == 0 {
            if let Some((_, stamp)) = &self.stamped {
                if len <= stamp.len() {
                    let payload_sum = sums.sum_from(0, len);
                    let buf = SegmentPool::alloc_stamped(self, len)?;
                    self.stamped_segments += 1;
                    return Some(Prefilled { buf, payload_sum });
                }
            }
        }
        if !self.chain {
            return None;
        }
        let (p16, l16) = (u16::try_from(pos).ok()?, u16::try_from(len).ok()?);
        let payload_sum = sums.sum_from(start, len);
        let mut m = BufPool::alloc(&mut self.plain, hdr_len)?;
        if !self.shared.as_mut()?.chain(&mut m, p16, l16) {
            self.refs_exhausted += 1;
            return None;
        }
        self.chained_segments += 1;
        Some(Prefilled {
            buf: m,
            payload_sum,
        })
    }
}

/// The flows' write buffers: windows onto the shared pattern, one mbuf each.
impl PayloadSource<Mbuf> for GenPool {
    #[inline]
    fn slice(&mut self, start: usize, len: u16) -> Option<PayloadSlice<Mbuf>> {
        let buf = self
            .shared
            .as_mut()?
            .reference(u16::try_from(start).ok()?, len)?;
        Some(PayloadSlice { buf, off: 0, len })
    }
}

/// The in-memory source: a copy of the pattern's bytes per write buffer (tests).
#[derive(Debug)]
pub struct VecSource {
    payload: Payload,
    /// Buffers handed out.
    pub slices: u64,
}

impl VecSource {
    /// The pattern of `period`.
    pub fn new(period: usize) -> VecSource {
        VecSource {
            payload: Payload::with_period(period),
            slices: 0,
        }
    }
}

impl PayloadSource<VecBuf> for VecSource {
    fn slice(&mut self, start: usize, len: u16) -> Option<PayloadSlice<VecBuf>> {
        let bytes = self.payload.bytes_from(start, usize::from(len));
        if bytes.len() != usize::from(len) {
            return None;
        }
        self.slices += 1;
        Some(PayloadSlice {
            buf: VecBuf::from_vec(bytes.to_vec()),
            off: 0,
            len,
        })
    }
}

#[cfg(test)]
mod tests {
    use stack::mem::VecPool;

    use super::*;

    #[test]
    fn buf_pools_have_no_stamp() {
        let mut p = VecPool::new(4, 2048);
        assert!(SegmentPool::stamp(&p).is_empty());
        assert!(p.alloc_stamped(100).is_none());
        assert_eq!(
            SegmentPool::alloc(&mut p, 100).map(|b| b.data().len()),
            Some(100)
        );
    }
}
