//! The out-of-order assembler: a per-core pool of payload slices, each connection owning a
//! sorted, non-overlapping list of them.
//!
//! Bounded three ways (RFC 9293 §3.10.7.4 lets a receiver drop what it cannot hold): bytes
//! per connection, bytes per core and slices per core. A segment that does not fit whole is
//! dropped and counted; the sender retransmits it. Slices keep the received buffers (no
//! copy); overlaps are resolved by trimming the newcomer or dropping slices it covers, so
//! a buffer is never split.

use crate::buf::{PacketBuf, PayloadSlice};
use crate::seq::SeqNumber;

const NIL: u32 = u32::MAX;

struct Node<B> {
    seq: SeqNumber,
    slice: Option<PayloadSlice<B>>,
    next: u32,
}

impl<B> Node<B> {
    fn len(&self) -> u32 {
        self.slice.as_ref().map_or(0, |s| u32::from(s.len))
    }
    fn end(&self) -> SeqNumber {
        self.seq + self.len() as usize
    }
}

/// One connection's out-of-order queue (a list head into the core's [`OooPool`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OooQueue {
    head: u32,
    /// Bytes held.
    pub(crate) bytes: u32,
    /// Slices (buffers) held: each takes a receive-queue slot when it becomes in order.
    pub(crate) slices: u32,
}

impl Default for OooQueue {
    fn default() -> Self {
        OooQueue {
            head: NIL,
            bytes: 0,
            slices: 0,
        }
    }
}

impl OooQueue {
    pub(crate) fn is_empty(&self) -> bool {
        self.head == NIL
    }
}

/// Why an out-of-order segment was not stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OooReject {
    /// The connection's byte limit.
    ConnLimit,
    /// The core's byte or slice limit.
    CoreLimit,
}

/// The per-core slice pool.
pub(crate) struct OooPool<B> {
    nodes: Vec<Node<B>>,
    free: u32,
    free_count: usize,
    bytes: usize,
    max_bytes: usize,
}

impl<B: PacketBuf> OooPool<B> {
    pub(crate) fn new(slices: usize, max_bytes: usize) -> Self {
        let n = slices.min(NIL as usize - 1);
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            nodes.push(Node {
                seq: SeqNumber(0),
                slice: None,
                next: if i + 1 < n { (i + 1) as u32 } else { NIL },
            });
        }
        OooPool {
            nodes,
            free: if n > 0 { 0 } else { NIL },
            free_count: n,
            bytes: 0,
            max_bytes,
        }
    }

    /// Bytes held by all connections.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    fn alloc(&mut self, seq: SeqNumber, s: PayloadSlice<B>) -> u32 {
        let i = self.free;
        if let Some(n) = self.nodes.get_mut(i as usize) {
            self.free = n.next;
            self.free_count -= 1;
            self.bytes += usize::from(s.len);
            n.seq = seq;
            n.slice = Some(s);
            n.next = NIL;
        }
        i
    }

    fn release(&mut self, i: u32) -> Option<PayloadSlice<B>> {
        let free = self.free;
        let n = self.nodes.get_mut(i as usize)?;
        let s = n.slice.take();
        n.next = free;
        self.free = i;
        self.free_count += 1;
        if let Some(s) = &s {
            self.bytes -= usize::from(s.len);
        }
        s
    }

    fn next(&self, i: u32) -> u32 {
        self.nodes.get(i as usize).map_or(NIL, |n| n.next)
    }

    fn set_next(&mut self, q: &mut OooQueue, prev: u32, to: u32) {
        if prev == NIL {
            q.head = to;
        } else if let Some(n) = self.nodes.get_mut(prev as usize) {
            n.next = to;
        }
    }

    fn node(&self, i: u32) -> Option<&Node<B>> {
        self.nodes.get(i as usize)
    }

    /// Stores `[seq, seq + len)` given as `slices` (in order) unless a limit forbids it.
    /// Returns the bytes newly held (0: the data was already held, a duplicate).
    pub(crate) fn insert<I: IntoIterator<Item = PayloadSlice<B>>>(
        &mut self,
        q: &mut OooQueue,
        mut seq: SeqNumber,
        len: u32,
        slice_count: usize,
        conn_limit: u32,
        slices: I,
    ) -> Result<u32, OooReject> {
        if q.bytes.saturating_add(len) > conn_limit {
            return Err(OooReject::ConnLimit);
        }
        if self.bytes + len as usize > self.max_bytes || self.free_count < slice_count {
            return Err(OooReject::CoreLimit);
        }
        let mut added = 0u32;
        let free_before = self.free_count;
        for s in slices {
            let l = s.len;
            added += self.insert_one(q, seq, s);
            seq += usize::from(l);
        }
        q.bytes += added;
        // Nodes taken less the nodes of this queue that the new data covered and freed.
        let held = q.slices as usize + free_before;
        q.slices = u32::try_from(held.saturating_sub(self.free_count)).unwrap_or(u32::MAX);
        Ok(added)
    }

    fn insert_one(&mut self, q: &mut OooQueue, mut a: SeqNumber, mut s: PayloadSlice<B>) -> u32 {
        if s.len == 0 {
            return 0;
        }
        let mut b = a + usize::from(s.len);
        let mut prev = NIL;
        let mut cur = q.head;
        // Skip nodes that end at or before a.
        while let Some(n) = self.node(cur) {
            if n.end() > a {
                break;
            }
            prev = cur;
            cur = n.next;
        }
        // A node covering a: trim our front (or drop us if it covers all of us).
        if let Some(n) = self.node(cur) {
            if n.seq <= a {
                let e = n.end();
                if e >= b {
                    return 0;
                }
                let cut = (e - a) as u16;
                s.off += cut;
                s.len -= cut;
                a = e;
                prev = cur;
                cur = n.next;
            }
        }
        // Drop nodes we cover entirely.
        let mut freed = 0u32;
        while let Some(n) = self.node(cur) {
            if n.end() > b {
                break;
            }
            let nx = n.next;
            freed += n.len();
            let _ = self.release(cur);
            cur = nx;
        }
        // A node starting inside us: trim our tail.
        if let Some(n) = self.node(cur) {
            if n.seq < b {
                let keep = (n.seq - a) as u16;
                s.len = keep;
                b = n.seq;
            }
        }
        let _ = b;
        if s.len == 0 {
            self.set_next(q, prev, cur);
            return 0;
        }
        let len = u32::from(s.len);
        let i = self.alloc(a, s);
        if let Some(n) = self.nodes.get_mut(i as usize) {
            n.next = cur;
        }
        self.set_next(q, prev, i);
        // Bytes held grew by len minus what we replaced (which lay inside us).
        len.saturating_sub(freed)
    }

    /// Takes the slice at the head if it starts at or before `rcv_nxt`, trimmed to start
    /// at `rcv_nxt`. Slices that lie wholly below `rcv_nxt` are dropped.
    pub(crate) fn pop_ready(
        &mut self,
        q: &mut OooQueue,
        rcv_nxt: SeqNumber,
    ) -> Option<PayloadSlice<B>> {
        loop {
            let (seq, end, next) = {
                let n = self.node(q.head)?;
                (n.seq, n.end(), n.next)
            };
            if seq > rcv_nxt {
                return None;
            }
            let i = q.head;
            q.head = next;
            let mut s = self.release(i)?;
            q.bytes -= u32::from(s.len);
            q.slices = q.slices.saturating_sub(1);
            if end <= rcv_nxt {
                continue;
            }
            let cut = (rcv_nxt - seq) as u16;
            s.off += cut;
            s.len -= cut;
            return Some(s);
        }
    }

    /// The contiguous range `[start, end)` of held data containing `seq`.
    pub(crate) fn block_around(
        &self,
        q: &OooQueue,
        seq: SeqNumber,
    ) -> Option<(SeqNumber, SeqNumber)> {
        let mut cur = q.head;
        let mut start: Option<(SeqNumber, SeqNumber)> = None;
        while let Some(n) = self.node(cur) {
            match start {
                Some((s, e)) if n.seq == e => start = Some((s, n.end())),
                _ => {
                    if let Some((s, e)) = start {
                        if seq.in_range(s, e) {
                            return Some((s, e));
                        }
                    }
                    start = Some((n.seq, n.end()));
                }
            }
            cur = n.next;
        }
        start.filter(|(s, e)| seq.in_range(*s, *e))
    }

    /// Frees everything the connection holds.
    pub(crate) fn clear(&mut self, q: &mut OooQueue) {
        let mut cur = q.head;
        while cur != NIL {
            let nx = self.next(cur);
            let _ = self.release(cur);
            cur = nx;
        }
        *q = OooQueue::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::VecBuf;

    fn sl(bytes: &[u8]) -> PayloadSlice<VecBuf> {
        PayloadSlice {
            buf: VecBuf::from_vec(bytes.to_vec()),
            off: 0,
            len: bytes.len() as u16,
        }
    }

    #[test]
    fn overlaps_resolve_without_splitting() {
        let mut p: OooPool<VecBuf> = OooPool::new(16, 1 << 20);
        let mut q = OooQueue::default();
        let base = SeqNumber(u32::MAX - 5);
        // [10,20) then [5,25) covering it, then [0,8) overlapping the front.
        assert_eq!(
            p.insert(&mut q, base + 10, 10, 1, 1000, [sl(&[b'k'; 10])]),
            Ok(10)
        );
        assert_eq!(
            p.insert(&mut q, base + 5, 20, 1, 1000, [sl(&[b'f'; 20])]),
            Ok(10)
        );
        assert_eq!(q.bytes, 20);
        assert_eq!(
            p.insert(&mut q, base + 10, 5, 1, 1000, [sl(&[b'x'; 5])]),
            Ok(0)
        );
        assert_eq!(
            p.insert(&mut q, base + 2, 6, 1, 1000, [sl(&[b'a'; 6])]),
            Ok(3)
        );
        // [2,5) and [5,25): the covered [10,20) node was freed, and each slot counted.
        assert_eq!(q.slices, 2);
        assert_eq!(p.block_around(&q, base + 12), Some((base + 2, base + 25)));
        assert!(p.pop_ready(&mut q, base + 1).is_none());
        let mut got = Vec::new();
        while let Some(s) = p.pop_ready(&mut q, base + 2 + got.len()) {
            got.extend_from_slice(s.bytes());
        }
        assert_eq!(got.len(), 23);
        assert_eq!(q.slices, 0);
        assert_eq!(&got[..3], b"aaa");
        assert!(q.is_empty());
        assert_eq!(p.bytes(), 0);
        assert_eq!(
            p.insert(&mut q, base, 2000, 1, 1000, [sl(&[0; 10])]),
            Err(OooReject::ConnLimit)
        );
    }
}
