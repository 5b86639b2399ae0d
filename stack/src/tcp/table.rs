//! A fixed-capacity slab with a hashed index on [`FlowKey`]: O(1) expected lookup, no
//! allocation after construction. Used for connections and for half-open entries.

use crate::flow::FlowKey;

const NIL: u32 = u32::MAX;

/// Slab entries know their key.
pub(crate) trait Keyed {
    fn key(&self) -> &FlowKey;
}

pub(crate) struct Table<T> {
    slots: Vec<Option<T>>,
    gens: Vec<u32>,
    next: Vec<u32>,
    heads: Vec<u32>,
    mask: u32,
    free: Vec<u32>,
    len: usize,
}

impl<T: Keyed> Table<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        let cap = capacity.clamp(1, (NIL - 1) as usize);
        let buckets = (cap * 2).next_power_of_two();
        let mut slots = Vec::with_capacity(cap);
        slots.resize_with(cap, || None);
        Table {
            slots,
            gens: vec![0; cap],
            next: vec![NIL; cap],
            heads: vec![NIL; buckets],
            mask: (buckets - 1) as u32,
            free: (0..cap as u32).rev().collect(),
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_full(&self) -> bool {
        self.free.is_empty()
    }

    fn bucket(&self, k: &FlowKey) -> usize {
        (k.hash32() & self.mask) as usize
    }

    /// The bucket head of the key whose [`FlowKey::hash32`] is `hash`: the first line
    /// [`Table::find`] reads, for a prefetch.
    pub(crate) fn head_addr(&self, hash: u32) -> *const u8 {
        self.heads
            .as_ptr()
            .wrapping_add((hash & self.mask) as usize)
            .cast()
    }

    /// Where the first entry of the bucket of `hash` lives (the one [`Table::find`]
    /// compares first, and with few entries per bucket the one it finds), for a prefetch
    /// of its lines: the slot's address, found without reading the slot, since a read
    /// that misses holds up everything after it where a prefetch does not.
    pub(crate) fn first_slot_addr(&self, hash: u32) -> Option<*const u8> {
        let i = *self.heads.get((hash & self.mask) as usize)? as usize;
        (i < self.slots.len()).then(|| self.slots.as_ptr().wrapping_add(i).cast())
    }

    pub(crate) fn find(&self, k: &FlowKey) -> Option<u32> {
        let mut i = *self.heads.get(self.bucket(k))?;
        while i != NIL {
            if let Some(Some(e)) = self.slots.get(i as usize) {
                if e.key() == k {
                    return Some(i);
                }
            }
            i = self.next.get(i as usize).copied().unwrap_or(NIL);
        }
        None
    }

    /// Inserts and returns `(slot, generation)`, or gives the value back when full.
    pub(crate) fn insert(&mut self, v: T) -> Result<(u32, u32), T> {
        let Some(i) = self.free.pop() else {
            return Err(v);
        };
        let b = self.bucket(v.key());
        let iu = i as usize;
        self.gens[iu] = self.gens[iu].wrapping_add(1);
        self.next[iu] = self.heads[b];
        self.heads[b] = i;
        self.slots[iu] = Some(v);
        self.len += 1;
        Ok((i, self.gens[iu]))
    }

    pub(crate) fn gen(&self, i: u32) -> u32 {
        self.gens.get(i as usize).copied().unwrap_or(0)
    }

    pub(crate) fn get(&self, i: u32) -> Option<&T> {
        self.slots.get(i as usize)?.as_ref()
    }

    pub(crate) fn get_mut(&mut self, i: u32) -> Option<&mut T> {
        self.slots.get_mut(i as usize)?.as_mut()
    }

    /// The entry at `i` if its generation is `gen`.
    pub(crate) fn get_gen_mut(&mut self, i: u32, gen: u32) -> Option<&mut T> {
        if self.gen(i) != gen {
            return None;
        }
        self.get_mut(i)
    }

    pub(crate) fn remove(&mut self, i: u32) -> Option<T> {
        let iu = i as usize;
        let k = *self.slots.get(iu)?.as_ref()?.key();
        let b = self.bucket(&k);
        let mut p = NIL;
        let mut c = self.heads[b];
        while c != NIL && c != i {
            p = c;
            c = self.next[c as usize];
        }
        if c == i {
            if p == NIL {
                self.heads[b] = self.next[iu];
            } else {
                self.next[p as usize] = self.next[iu];
            }
        }
        self.next[iu] = NIL;
        self.free.push(i);
        self.len -= 1;
        // Bump the generation so stale handles stop matching.
        self.gens[iu] = self.gens[iu].wrapping_add(1);
        self.slots[iu].take()
    }
}
