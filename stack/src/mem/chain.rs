//! A buffer of chained segments, as a multi-segment mbuf is: the chain path's test buffer
//! ([`super::VecBuf`] holds one segment), and a pool that hands them out.

use std::cell::Cell;
use std::rc::Rc;

use crate::buf::{BufPool, PacketBuf, RxChecksum};

/// A frame held in one or more segments, like an mbuf chain: `data()` is the first
/// segment, [`PacketBuf::unchain`] splits the rest off into buffers of their own. Every
/// segment counts one in the [`ChainPool`] it came from, as every mbuf of a chain is one
/// mempool element, so a test can tell that each was freed exactly once.
#[derive(Debug)]
pub struct ChainBuf {
    segs: Vec<Vec<u8>>,
    csum: RxChecksum,
    in_use: Option<Rc<Cell<usize>>>,
}

impl ChainBuf {
    /// `frame` cut into segments of `seg_len` bytes (the last one shorter), not counted
    /// by any pool; one empty segment for an empty frame.
    pub fn split(frame: &[u8], seg_len: usize) -> Self {
        Self::from_segments(frame.chunks(seg_len.max(1)).map(<[u8]>::to_vec).collect())
    }
    /// A buffer with these segments (one empty segment when there are none).
    pub fn from_segments(mut segs: Vec<Vec<u8>>) -> Self {
        if segs.is_empty() {
            segs.push(Vec::new());
        }
        ChainBuf {
            segs,
            csum: RxChecksum::default(),
            in_use: None,
        }
    }
    /// Sets the RX checksum verdicts, as a NIC with checksum offload would.
    pub fn with_rx_checksum(mut self, csum: RxChecksum) -> Self {
        self.csum = csum;
        self
    }
    /// Each segment's length, in order.
    pub fn segment_lens(&self) -> Vec<usize> {
        self.segs.iter().map(Vec::len).collect()
    }
    /// The whole frame's bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.segs.concat()
    }
}

impl Drop for ChainBuf {
    fn drop(&mut self) {
        if let Some(c) = &self.in_use {
            c.set(c.get() - self.segs.len());
        }
    }
}

impl PacketBuf for ChainBuf {
    fn data(&self) -> &[u8] {
        self.segs.first().map_or(&[], Vec::as_slice)
    }
    fn data_mut(&mut self) -> &mut [u8] {
        self.segs.first_mut().map_or(&mut [], Vec::as_mut_slice)
    }
    fn rx_checksum(&self) -> RxChecksum {
        self.csum
    }
    fn is_contiguous(&self) -> bool {
        self.segs.len() <= 1
    }
    fn frame_len(&self) -> usize {
        self.segs.iter().map(Vec::len).sum()
    }
    fn segment_count(&self) -> usize {
        self.segs.len()
    }
    fn unchain(&mut self, out: &mut dyn FnMut(Self)) -> bool {
        for seg in self.segs.drain(1..) {
            // The segment moves with its count: the total stays what the pool handed out.
            out(ChainBuf {
                segs: vec![seg],
                csum: RxChecksum::default(),
                in_use: self.in_use.clone(),
            });
        }
        true
    }
    fn truncate(&mut self, len: usize) -> bool {
        match self.segs.as_mut_slice() {
            [one] if len <= one.len() => {
                one.truncate(len);
                true
            }
            _ => false,
        }
    }
}

/// A bounded pool of [`ChainBuf`]s counting segments in use, like a mempool's elements.
#[derive(Debug)]
pub struct ChainPool {
    capacity: usize,
    buf_size: usize,
    in_use: Rc<Cell<usize>>,
}

impl ChainPool {
    /// A pool of `capacity` segments of at most `buf_size` bytes.
    pub fn new(capacity: usize, buf_size: usize) -> Self {
        ChainPool {
            capacity,
            buf_size,
            in_use: Rc::new(Cell::new(0)),
        }
    }
    /// Segments handed out and not yet dropped.
    pub fn in_use(&self) -> usize {
        self.in_use.get()
    }
    /// `frame` received into segments of this pool's `buf_size` (as a NIC with scattered
    /// receive fills a chain), or `None` when the pool has too few segments left.
    pub fn receive(&mut self, frame: &[u8]) -> Option<ChainBuf> {
        let mut b = ChainBuf::split(frame, self.buf_size);
        let n = b.segs.len();
        if self.in_use.get() + n > self.capacity {
            b.in_use = None;
            return None;
        }
        self.in_use.set(self.in_use.get() + n);
        b.in_use = Some(self.in_use.clone());
        Some(b)
    }
}

impl BufPool for ChainPool {
    type Buf = ChainBuf;
    fn alloc(&mut self, len: usize) -> Option<ChainBuf> {
        if len > self.buf_size {
            return None;
        }
        self.receive(&vec![0; len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchain_moves_each_segment_with_its_count() {
        let mut p = ChainPool::new(8, 4);
        let mut b = p.receive(b"abcdefghij").expect("room");
        assert_eq!((b.segment_lens(), p.in_use()), (vec![4, 4, 2], 3));
        assert!(!b.is_contiguous());
        let mut rest = Vec::new();
        assert!(b.unchain(&mut |s| rest.push(s)));
        assert_eq!(b.data(), b"abcd");
        assert!(b.is_contiguous() && rest.iter().all(PacketBuf::is_contiguous));
        let tails: Vec<&[u8]> = rest.iter().map(PacketBuf::data).collect();
        assert_eq!(tails, [&b"efgh"[..], b"ij"]);
        assert_eq!(p.in_use(), 3);
        drop(rest);
        assert_eq!(p.in_use(), 1);
        drop(b);
        assert_eq!(p.in_use(), 0);
        assert!(p.receive(&[0; 40]).is_none(), "10 segments do not fit in 8");
        assert_eq!(p.in_use(), 0);
    }
}
