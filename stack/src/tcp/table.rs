//! A fixed-capacity slab with a hashed index on [`FlowKey`]: O(1) expected lookup, no
//! allocation after construction. Used for connections and for half-open entries.

use crate::flow::FlowKey;

const NIL: u32 = u32::MAX;

/// A bucket: its chain's first slot ([`NIL`] for none) and that slot's tag.
#[derive(Clone, Copy)]
struct Head {
    slot: u32,
    tag: u32,
}

const EMPTY: Head = Head { slot: NIL, tag: 0 };

/// Slab entries know their key.
pub(crate) trait Keyed {
    fn key(&self) -> &FlowKey;
}

pub(crate) struct Table<T> {
    slots: Vec<Option<T>>,
    /// Each slot's key's [`FlowKey::hash32`] (a chain's first slot's is in its bucket too):
    /// a lookup compares tags and reads an entry only when its tag is the key's hash, so
    /// the other entries of a bucket's chain cost no miss of their own.
    tags: Vec<u32>,
    gens: Vec<u32>,
    next: Vec<u32>,
    /// Each bucket's first slot, with that slot's tag beside it: a lookup whose key is
    /// the bucket's first entry (nearly every one, at two buckets per slot) reads one
    /// line of this array and then the entry, as before the tags.
    heads: Vec<Head>,
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
            tags: vec![0; cap],
            gens: vec![0; cap],
            next: vec![NIL; cap],
            heads: vec![EMPTY; buckets],
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

    /// The bucket head of the key whose [`FlowKey::hash32`] is `hash`: the first line
    /// [`Table::find`] reads, for a prefetch.
    pub(crate) fn head_addr(&self, hash: u32) -> *const u8 {
        self.heads
            .as_ptr()
            .wrapping_add((hash & self.mask) as usize)
            .cast()
    }

    /// The slots of `hash`'s bucket chain whose tag is `hash`, in chain order: the
    /// bucket's head and its tag, then the rest of the chain in the dense tag and link
    /// arrays. No entry is read.
    fn tagged(&self, hash: u32) -> impl Iterator<Item = u32> + '_ {
        let h = self
            .heads
            .get((hash & self.mask) as usize)
            .copied()
            .unwrap_or(EMPTY);
        let (mut i, mut tag) = (h.slot, h.tag);
        core::iter::from_fn(move || {
            while i != NIL {
                let at = i;
                let matches = tag == hash;
                i = self.next.get(at as usize).copied().unwrap_or(NIL);
                tag = self.tags.get(i as usize).copied().unwrap_or(0);
                if matches {
                    return Some(at);
                }
            }
            None
        })
    }

    /// Where the entry a lookup of `hash` will read first lives (the first of
    /// [`Table::tagged`]), for a prefetch of its lines: the slot's address, found without
    /// reading the slot, since a read that misses holds up everything after it where a
    /// prefetch does not.
    pub(crate) fn tagged_slot_addr(&self, hash: u32) -> Option<*const u8> {
        let i = self.tagged(hash).next()? as usize;
        (i < self.slots.len()).then(|| self.slots.as_ptr().wrapping_add(i).cast())
    }

    pub(crate) fn find(&self, k: &FlowKey) -> Option<u32> {
        self.tagged(k.hash32())
            .find(|&i| matches!(self.slots.get(i as usize), Some(Some(e)) if e.key() == k))
    }

    /// Inserts and returns `(slot, generation)`, or gives the value back when full.
    pub(crate) fn insert(&mut self, v: T) -> Result<(u32, u32), T> {
        let Some(i) = self.free.pop() else {
            return Err(v);
        };
        let hash = v.key().hash32();
        let b = (hash & self.mask) as usize;
        let iu = i as usize;
        self.tags[iu] = hash;
        self.gens[iu] = self.gens[iu].wrapping_add(1);
        self.next[iu] = self.heads[b].slot;
        self.heads[b] = Head { slot: i, tag: hash };
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
        let b = (k.hash32() & self.mask) as usize;
        let mut p = NIL;
        let mut c = self.heads[b].slot;
        while c != NIL && c != i {
            p = c;
            c = self.next[c as usize];
        }
        if c == i {
            if p == NIL {
                let slot = self.next[iu];
                let tag = self.tags.get(slot as usize).copied().unwrap_or(0);
                self.heads[b] = Head { slot, tag };
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    struct E(FlowKey);
    impl Keyed for E {
        fn key(&self) -> &FlowKey {
            &self.0
        }
    }

    fn key(port: u16) -> FlowKey {
        FlowKey::v4(
            Ipv4Addr::new(198, 18, 0, 1),
            port,
            Ipv4Addr::new(198, 18, 0, 2),
            80,
        )
    }

    /// Many keys in few buckets (chains of several entries, each compared by its tag
    /// first): every key present is found at its own slot, every key removed or never
    /// inserted is not, through inserts and removals in any order; and the slot a
    /// prefetch is pointed at is the one the lookup then reads.
    #[test]
    fn lookups_follow_the_chains_by_tag_through_inserts_and_removals() {
        let mut t: Table<E> = Table::new(64);
        let mut at = std::collections::HashMap::new();
        for p in 0..64u16 {
            let (slot, _) = t.insert(E(key(p))).ok().expect("room");
            at.insert(p, slot);
        }
        assert!(t.is_full());
        for p in (0..64u16).step_by(3) {
            assert!(t.remove(at[&p]).is_some());
            at.remove(&p);
        }
        for p in 64..80u16 {
            let (slot, _) = t.insert(E(key(p))).ok().expect("room");
            at.insert(p, slot);
        }
        for p in 0..100u16 {
            let k = key(p);
            assert_eq!(t.find(&k), at.get(&p).copied(), "port {p}");
            if let Some(&slot) = at.get(&p) {
                let addr = t.tagged_slot_addr(k.hash32()).expect("a tagged slot");
                let want: *const u8 = (t.slots.as_ptr().wrapping_add(slot as usize)).cast();
                assert_eq!(addr, want, "port {p}");
            }
        }
        assert_eq!(t.len(), at.len());
    }
}
