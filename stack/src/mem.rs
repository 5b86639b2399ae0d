//! The in-memory driver: `Vec`-backed buffers, a bounded buffer pool and a pair of
//! in-memory queues. It serves unit tests, property tests, fuzzing and pure-CPU benchmarks
//! on machines without DPDK. It is single-threaded (`Rc`), like one pipeline's lcore.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use crate::buf::{BufPool, PacketBuf, RxChecksum};
use crate::driver::{Burst, RxQueue, TxQueue};

mod chain;
pub use chain::{ChainBuf, ChainPool};

/// A heap buffer holding one frame. Optionally counted by the [`VecPool`] it came from.
#[derive(Debug, Default)]
pub struct VecBuf {
    data: Vec<u8>,
    /// The most bytes `data` may grow to with [`PacketBuf::append`] (an mbuf's data room).
    room: usize,
    csum: RxChecksum,
    in_use: Option<Rc<Cell<usize>>>,
}

impl VecBuf {
    /// A buffer holding `data`, not counted by any pool.
    pub fn from_vec(data: Vec<u8>) -> Self {
        VecBuf {
            room: data.len(),
            data,
            csum: RxChecksum::default(),
            in_use: None,
        }
    }
    /// Lets the buffer grow to `room` bytes with [`PacketBuf::append`], as an mbuf of a
    /// pool with that data room can (never below its length).
    pub fn with_room(mut self, room: usize) -> Self {
        self.room = room.max(self.data.len());
        self
    }
    /// Sets the RX checksum verdicts, as a NIC with checksum offload would.
    pub fn with_rx_checksum(mut self, csum: RxChecksum) -> Self {
        self.csum = csum;
        self
    }
    /// Gives back the bytes.
    pub fn into_vec(mut self) -> Vec<u8> {
        std::mem::take(&mut self.data)
    }
}

impl Drop for VecBuf {
    fn drop(&mut self) {
        if let Some(c) = &self.in_use {
            c.set(c.get() - 1);
        }
    }
}

impl PacketBuf for VecBuf {
    fn data(&self) -> &[u8] {
        &self.data
    }
    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
    fn rx_checksum(&self) -> RxChecksum {
        self.csum
    }
    fn truncate(&mut self, len: usize) -> bool {
        if len > self.data.len() {
            return false;
        }
        self.data.truncate(len);
        true
    }
    fn tailroom(&self) -> usize {
        self.room.saturating_sub(self.data.len())
    }
    fn append(&mut self, bytes: &[u8]) -> bool {
        if bytes.len() > self.tailroom() {
            return false;
        }
        self.data.extend_from_slice(bytes);
        true
    }
}

/// A bounded pool of [`VecBuf`]s: at most `capacity` outstanding, each at most
/// `buf_size` bytes, with an in-use count like a DPDK mempool's.
#[derive(Debug)]
pub struct VecPool {
    capacity: usize,
    buf_size: usize,
    in_use: Rc<Cell<usize>>,
}

impl VecPool {
    /// A pool of `capacity` buffers of `buf_size` bytes.
    pub fn new(capacity: usize, buf_size: usize) -> Self {
        VecPool {
            capacity,
            buf_size,
            in_use: Rc::new(Cell::new(0)),
        }
    }
    /// Buffers handed out and not yet dropped.
    pub fn in_use(&self) -> usize {
        self.in_use.get()
    }
    /// Wraps `data` as a buffer counted by this pool, or `None` when the pool is exhausted
    /// (use it to emulate a NIC receiving into mbufs from this pool).
    pub fn adopt(&mut self, data: Vec<u8>) -> Option<VecBuf> {
        if self.in_use.get() >= self.capacity {
            return None;
        }
        self.in_use.set(self.in_use.get() + 1);
        Some(VecBuf {
            room: self.buf_size.max(data.len()),
            data,
            csum: RxChecksum::default(),
            in_use: Some(self.in_use.clone()),
        })
    }
}

impl BufPool for VecPool {
    type Buf = VecBuf;
    fn alloc(&mut self, len: usize) -> Option<VecBuf> {
        if len > self.buf_size {
            return None;
        }
        self.adopt(vec![0; len])
    }
}

/// The sending end of an in-memory link.
#[derive(Debug, Clone)]
pub struct MemTx {
    q: Rc<RefCell<VecDeque<VecBuf>>>,
    limit: usize,
}

/// The receiving end of an in-memory link.
#[derive(Debug, Clone)]
pub struct MemRx {
    q: Rc<RefCell<VecDeque<VecBuf>>>,
}

/// An in-memory link holding at most `limit` frames in flight (a full link refuses frames,
/// as a full TX ring does).
pub fn link(limit: usize) -> (MemTx, MemRx) {
    let q = Rc::new(RefCell::new(VecDeque::new()));
    (
        MemTx {
            q: q.clone(),
            limit,
        },
        MemRx { q },
    )
}

impl MemTx {
    /// Frames queued and not yet received.
    pub fn queued(&self) -> usize {
        self.q.borrow().len()
    }
}

impl MemRx {
    /// Takes every queued frame (tests use this to inspect what was sent).
    pub fn drain_all(&mut self) -> Vec<VecBuf> {
        self.q.borrow_mut().drain(..).collect()
    }
}

impl TxQueue for MemTx {
    type Buf = VecBuf;
    fn tx_burst(&mut self, pkts: &mut Burst<VecBuf>) -> usize {
        let mut q = self.q.borrow_mut();
        let room = self.limit.saturating_sub(q.len());
        let n = room.min(pkts.len());
        q.extend(pkts.drain(..n));
        n
    }
}

impl RxQueue for MemRx {
    type Buf = VecBuf;
    fn rx_burst(&mut self, out: &mut Burst<VecBuf>) -> usize {
        let mut q = self.q.borrow_mut();
        let n = out.remaining_capacity().min(q.len());
        out.extend(q.drain(..n));
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_is_bounded_and_ordered() {
        let (mut tx, mut rx) = link(3);
        let mut b: Burst<VecBuf> = Burst::new();
        for i in 0..5u8 {
            b.push(VecBuf::from_vec(vec![i]));
        }
        assert_eq!(tx.tx_burst(&mut b), 3);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].data(), &[3]);
        let mut out = Burst::new();
        assert_eq!(rx.rx_burst(&mut out), 3);
        let got: Vec<u8> = out.iter().map(|b| b.data()[0]).collect();
        assert_eq!(got, vec![0, 1, 2]);
    }

    #[test]
    fn pool_counts_in_use_and_refuses_when_empty() {
        let mut p = VecPool::new(2, 100);
        let a = p.alloc(10);
        let b = p.alloc(10);
        assert!(a.is_some() && b.is_some());
        assert!(p.alloc(10).is_none());
        assert!(p.alloc(1000).is_none());
        assert_eq!(p.in_use(), 2);
        drop(a);
        assert_eq!(p.in_use(), 1);
    }
}
