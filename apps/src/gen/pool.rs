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

use dpdk::{Mbuf, Mempool, PortPool, SharedData, StashPool};
use stack::buf::{BufPool, PacketBuf};

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

/// Any [`BufPool`] (in-memory tests, the lab's simulator) is a pool without a stamp.
impl<P: BufPool> SegmentPool for P {
    type Buf = P::Buf;
    fn alloc(&mut self, len: usize) -> Option<P::Buf> {
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
    allocs: u64,
    damaged: u64,
}

impl GenPool {
    /// Only `plain`: every payload is copied.
    pub fn plain(plain: PortPool) -> GenPool {
        GenPool {
            plain: StashPool::new(plain),
            stamped: None,
            shared: None,
            allocs: 0,
            damaged: 0,
        }
    }

    /// `plain` for every frame's first segment, with data segments' payloads carried by
    /// reference: `pattern` holds the payload pattern as [`super::payload::Payload::as_bytes`]
    /// lays it out (a segment's bytes start at its place in the period), and each segment
    /// takes an mbuf from `refs` (data room unused) to point into it. For a port that sends
    /// chained mbufs.
    pub fn with_shared(plain: PortPool, refs: Mempool, pattern: SharedData) -> GenPool {
        GenPool {
            shared: Some(Shared {
                data: pattern,
                refs,
            }),
            ..GenPool::plain(plain)
        }
    }

    /// `plain` for control frames and copied payloads, `stamped` (created with
    /// [`dpdk::Mempool::new_stamped`] at offset [`HDR_LEN`] with `stamp`) for segments whose
    /// payload is a prefix of `stamp`.
    pub fn with_stamped(plain: PortPool, stamped: PortPool, stamp: Vec<u8>) -> GenPool {
        GenPool {
            plain: StashPool::new(plain),
            stamped: Some((StashPool::new(stamped), stamp)),
            shared: None,
            allocs: 0,
            damaged: 0,
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

/// A payload pattern shared by reference (see the module documentation).
#[derive(Debug)]
struct Shared {
    data: SharedData,
    refs: Mempool,
}

impl SegmentPool for GenPool {
    type Buf = Mbuf;
    fn alloc_shared(&mut self, start: usize, len: usize) -> Option<Mbuf> {
        let sh = self.shared.as_ref()?;
        let start = u16::try_from(start).ok()?;
        let len = u16::try_from(len).ok()?;
        let mut m = BufPool::alloc(&mut self.plain, HDR_LEN)?;
        m.chain_shared(&sh.refs, &sh.data, start, len).then_some(m)
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
