//! Storage for per-connection queues, lent by the core while a queue holds something and
//! taken back when it empties: an idle connection holds none, and once the core has seen
//! its busiest moment no queue allocates.
//!
//! A connection's receive queue may hold hundreds of slices and its ACK queue a hundred
//! snapshots, but between two loop iterations almost every queue is empty: the
//! application read what arrived, `poll_tx` built what was decided. Reserving each
//! queue's bound when the connection opens cost 14 KiB per connection with mbufs (34 KiB
//! with `VecBuf`), so a million connections would not fit in memory; growing each queue
//! from the heap as it fills would put an allocation on the per-packet path. Linux faces
//! the same choice for its socket buffers and takes memory per skb from slab caches,
//! charged against the socket (`sk_rmem_schedule`) and given back when the skb is freed.
//!
//! [`Spare`] is such a cache for queue storage: storages of a few size classes (4, 8, 16,
//! ... entries), kept when a queue gives one back and lent again when a queue needs room.
//! The spare storage a core keeps is bounded in bytes; past the bound a given-back
//! storage is freed. A storage is allocated only when no spare of its class is left,
//! which in a steady state happens only when more queues hold data at once than ever
//! before ([`SpareStats::allocs`] counts it).

use std::collections::VecDeque;

/// Entries of the smallest class.
pub const MIN_ENTRIES: usize = 4;
/// Size classes: `MIN_ENTRIES << k` entries for `k` below this (4 to 32,768).
const CLASSES: usize = 14;

/// What a [`Spare`] store has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpareStats {
    /// Storages allocated because no spare one of the class was kept.
    pub allocs: u64,
    /// Storages lent from the spares.
    pub reused: u64,
    /// Storages given back and kept.
    pub kept: u64,
    /// Storages given back and freed (the byte bound was reached, or the storage's
    /// capacity was not a class's).
    pub freed: u64,
}

/// Spare storage for queues of `T`, by size class. See the module documentation.
pub struct Spare<T> {
    classes: [Vec<Vec<T>>; CLASSES],
    bytes: usize,
    max_bytes: usize,
    stats: SpareStats,
}

impl<T> Spare<T> {
    /// A store keeping at most `max_bytes` of spare storage (none kept if 0).
    pub fn new(max_bytes: usize) -> Self {
        Spare {
            classes: std::array::from_fn(|_| Vec::new()),
            bytes: 0,
            max_bytes,
            stats: SpareStats::default(),
        }
    }

    /// What the store has done.
    pub fn stats(&self) -> SpareStats {
        self.stats
    }
    /// Bytes of spare storage kept now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The class of the smallest storage holding `n` entries (the largest class if none).
    pub fn class_for(n: usize) -> u8 {
        let mut k = 0;
        while k + 1 < CLASSES && MIN_ENTRIES << k < n {
            k += 1;
        }
        k as u8
    }

    /// Entries a storage of class `k` holds.
    pub fn class_entries(k: u8) -> usize {
        MIN_ENTRIES << usize::from(k).min(CLASSES - 1)
    }

    /// Makes room in `q` for `more` entries beyond its length: if its storage is too
    /// small, the entries move to a storage of the smallest class that holds them and is
    /// at least class `hint` (what the queue needed last time, so a queue that fills to
    /// the same depth every time moves once, not once per doubling), and the old storage
    /// is given back. Returns `false`, changing nothing, if even the largest class is too
    /// small.
    #[inline]
    pub fn reserve(&mut self, q: &mut VecDeque<T>, more: usize, hint: u8) -> bool {
        let need = q.len() + more;
        if need <= q.capacity() {
            return true;
        }
        let k = Self::class_for(need).max(hint.min(CLASSES as u8 - 1));
        let entries = Self::class_entries(k);
        if entries < need {
            return false;
        }
        let mut fresh = VecDeque::from(self.take(k));
        fresh.extend(q.drain(..));
        let old = std::mem::replace(q, fresh);
        self.give(old);
        true
    }

    /// Takes back an empty queue's storage, leaving it with none. A queue that is not
    /// empty keeps its storage. Returns the class given back, if any.
    #[inline]
    pub fn give_back(&mut self, q: &mut VecDeque<T>) -> Option<u8> {
        if !q.is_empty() || q.capacity() == 0 {
            return None;
        }
        let k = Self::class_for(q.capacity());
        self.give(std::mem::take(q));
        Some(k)
    }

    /// Gives back an empty queue's storage only if it is larger than the smallest class,
    /// so a queue that holds a few entries at a time keeps its small storage (no store
    /// traffic per use) while a deep one returns what it took. Returns the class given
    /// back, if any.
    #[inline]
    pub fn shrink(&mut self, q: &mut VecDeque<T>) -> Option<u8> {
        if q.capacity() <= MIN_ENTRIES {
            return None;
        }
        self.give_back(q)
    }

    fn take(&mut self, k: u8) -> Vec<T> {
        let entries = Self::class_entries(k);
        match self.classes[usize::from(k)].pop() {
            Some(v) => {
                self.bytes -= entries * std::mem::size_of::<T>();
                self.stats.reused += 1;
                v
            }
            None => {
                self.stats.allocs += 1;
                Vec::with_capacity(entries)
            }
        }
    }

    fn give(&mut self, q: VecDeque<T>) {
        let cap = q.capacity();
        if cap == 0 {
            return;
        }
        let k = Self::class_for(cap);
        let size = cap * std::mem::size_of::<T>();
        if Self::class_entries(k) != cap || self.bytes + size > self.max_bytes {
            self.stats.freed += 1;
            return;
        }
        let mut v = Vec::from(q);
        v.clear();
        self.bytes += size;
        self.stats.kept += 1;
        self.classes[usize::from(k)].push(v);
    }
}

impl<T> std::fmt::Debug for Spare<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spare")
            .field("bytes", &self.bytes)
            .field("max_bytes", &self.max_bytes)
            .field("stats", &self.stats)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_grows_by_class_and_its_storage_is_lent_again() {
        let mut s: Spare<u64> = Spare::new(1 << 20);
        let mut q = VecDeque::new();
        for i in 0..10u64 {
            assert!(s.reserve(&mut q, 1, 0));
            q.push_back(i);
        }
        assert_eq!(q.capacity(), 16);
        assert_eq!(
            q.iter().copied().collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
        // 4 -> 8 -> 16: three allocations, the two smaller storages kept.
        assert_eq!(s.stats().allocs, 3);
        assert_eq!(s.stats().kept, 2);
        q.clear();
        assert_eq!(s.give_back(&mut q), Some(2));
        assert_eq!(q.capacity(), 0);
        // Filling to the same depth with the hint takes the kept 16 at once.
        assert!(s.reserve(&mut q, 1, 2));
        assert_eq!(q.capacity(), 16);
        assert_eq!(s.stats().allocs, 3);
        assert_eq!(s.stats().reused, 1);
    }

    #[test]
    fn the_bytes_kept_are_bounded() {
        let mut s: Spare<u64> = Spare::new(64);
        let mut a = VecDeque::new();
        let mut b = VecDeque::new();
        assert!(s.reserve(&mut a, 8, 0));
        assert!(s.reserve(&mut b, 8, 0));
        assert_eq!(s.give_back(&mut a), Some(1));
        assert_eq!(s.bytes(), 64);
        assert_eq!(s.give_back(&mut b), Some(1));
        assert_eq!(s.bytes(), 64);
        assert_eq!(s.stats().freed, 1);
    }

    #[test]
    fn shrink_keeps_the_smallest_class_and_a_full_queue_keeps_its_storage() {
        let mut s: Spare<u32> = Spare::new(1 << 20);
        let mut q = VecDeque::new();
        assert!(s.reserve(&mut q, 1, 0));
        q.push_back(1);
        assert_eq!(s.shrink(&mut q), None);
        q.clear();
        assert_eq!(s.shrink(&mut q), None);
        assert_eq!(q.capacity(), MIN_ENTRIES);
        assert!(s.reserve(&mut q, 5, 0));
        q.push_back(2);
        assert_eq!(
            s.give_back(&mut q),
            None,
            "a queue holding data keeps its storage"
        );
        q.clear();
        assert_eq!(s.shrink(&mut q), Some(1));
    }

    #[test]
    fn a_need_beyond_the_largest_class_changes_nothing() {
        let mut s: Spare<u8> = Spare::new(0);
        let mut q: VecDeque<u8> = VecDeque::new();
        assert!(!s.reserve(&mut q, MIN_ENTRIES << CLASSES, 0));
        assert_eq!(q.capacity(), 0);
        assert_eq!(s.stats(), SpareStats::default());
    }
}
