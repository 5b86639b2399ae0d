//! GRO's per-core flow table: the runs currently held, found by flow in O(1).
//!
//! Fixed-size arrays, all allocated in [`FlowTable::new`] and never again:
//!
//! - **buckets**: a hash index of [`WAYS`]-way buckets, one 64-byte cache line each
//!   (eight 32-bit hashes, eight slot numbers), chosen by the high bits of
//!   [`FlowKey::hash32`]. A lookup reads one bucket line and then the candidate run, so it
//!   costs the same at 1 flow and at 4,096. A bucket never chains: when all its ways are
//!   taken, the oldest run in it is flushed (Linux bounds its GRO lists the same way:
//!   `MAX_GRO_SKBS` per bucket and `gro_flush_oldest`, net/core/gro.c). There are about
//!   half as many buckets as runs, so with a uniform hash a bucket overflows only rarely
//!   even with every run held.
//! - **runs**: a slab of [`Run`]s, the hot per-run fields the merge check reads, indexed by
//!   slot. The cold part (the first segment's sequence number and parsed options, and the
//!   payload chain) lives in a parallel slab owned by the engine.
//! - **arrival list**: the held runs in the order their first segment arrived, as a doubly
//!   linked list over the slots (`links`). With one `flush_ns` for every run, the oldest
//!   run is always the first to expire, so the timer looks at the head only, and a run
//!   flushed early (flags, gap, size) is unlinked in O(1).
//! - **free list**: a stack of unused slots; the most recently freed is reused first, so
//!   a small working set stays in cache.
//!
//! [`FlowTable::find`] first checks the run it found last (a train of one flow's segments
//! skips hashing), then the bucket. Entries exist only while a run is held: a flushed
//! run's slot goes back on the free list and its bucket way is cleared.

use crate::flow::{FlowKey, FlowWords};
use crate::time::Instant;

/// Ways per bucket: one cache line of hashes and slots.
pub(crate) const WAYS: usize = 8;

/// "No slot": an empty bucket way, the end of the arrival list.
pub(crate) const NIL: u32 = u32::MAX;

/// Largest table weir builds (memory is allocated up front, about 1 KiB per run with an
/// mbuf-sized buffer handle).
pub(crate) const MAX_RUNS: usize = 1 << 20;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bucket {
    hash: [u32; WAYS],
    slot: [u32; WAYS],
}

const EMPTY_BUCKET: Bucket = Bucket {
    hash: [0; WAYS],
    slot: [NIL; WAYS],
};

/// The hot fields of one held run: everything the merge check (`can_merge`) reads, kept
/// together so the check touches as few cache lines as possible.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    /// The flow (checked on lookup: bucket hashes are only a filter).
    pub(crate) flow: FlowKey,
    /// Destination and source MAC addresses of the first frame (low 96 bits, in frame
    /// order).
    pub(crate) mac: u128,
    /// ACK number, window field, TCP header length and the flags that must be identical
    /// across a run, packed as [`super::HeaderSig`] builds them.
    pub(crate) hdr: u64,
    /// TTL/hop limit, TOS/traffic class, DF, IPv6 flow label and TSval position, packed.
    pub(crate) net: u64,
    /// The option bytes with TSval and TSecr masked out, as five words.
    pub(crate) opts: [u64; 5],
    /// Sequence number the next segment must carry: first seq + payload so far.
    pub(crate) next_seq: u32,
    /// The newest TSval merged (may rise within a run, never fall).
    pub(crate) tsval: u32,
    /// The newest TSecr merged (may rise within a run, never fall).
    pub(crate) tsecr: u32,
    /// Payload bytes held.
    pub(crate) len: u32,
    /// The first segment's payload length (Linux's `gso_size`).
    pub(crate) gso_size: u16,
    /// Segments held.
    pub(crate) segs: u16,
    /// The first segment's IPv4 ID.
    pub(crate) ip_id: u16,
    /// The IPv4 ID stays fixed instead of incrementing (Linux's `ip_fixedid`).
    pub(crate) fixed_id: bool,
    /// The flags of every segment OR'ed together.
    pub(crate) flags: u8,
    /// When the first segment arrived.
    pub(crate) first_rx: Instant,
    /// `flow.hash32()`, to find the bucket again on removal.
    pub(crate) hash: u32,
    /// The bucket way holding the run's slot (set by the table on insert), so removal
    /// clears it without searching the bucket.
    pub(crate) way: u8,
    /// Where the first segment's options are, for the engine: in the cold part, or
    /// rebuilt from this run (none, or only the timestamp).
    pub(crate) first_opts: u8,
    /// The first segment's payload offset in its buffer.
    pub(crate) first_off: u16,
}

/// A run's neighbours in arrival order ([`NIL`] at the ends).
#[derive(Clone, Copy, Debug)]
struct Link {
    /// The next-older run.
    prev: u32,
    /// The next-younger run.
    next: u32,
}

impl Run {
    /// A free slab entry.
    pub(crate) const EMPTY: Run = Run {
        flow: FlowKey {
            src: [0; 16],
            dst: [0; 16],
            sport: 0,
            dport: 0,
            vlan: 0,
            v6: false,
        },
        mac: 0,
        hdr: 0,
        net: 0,
        opts: [0; 5],
        next_seq: 0,
        tsval: 0,
        tsecr: 0,
        len: 0,
        gso_size: 0,
        segs: 0,
        ip_id: 0,
        fixed_id: false,
        flags: 0,
        first_rx: Instant::ZERO,
        hash: 0,
        way: 0,
        first_opts: 0,
        first_off: 0,
    };
}

/// The held runs, by flow and by age. See the module documentation.
pub(crate) struct FlowTable {
    buckets: Box<[Bucket]>,
    runs: Box<[Run]>,
    links: Box<[Link]>,
    free: Vec<u32>,
    /// Oldest held run, or [`NIL`].
    head: u32,
    /// Youngest held run, or [`NIL`].
    tail: u32,
    /// The run most recently found or inserted, or [`NIL`]: checked before hashing, so a
    /// train of one flow's segments (a TSO burst) skips the hash and the bucket probe.
    last: u32,
    /// Where the last lookup miss saw room: a bucket and an empty way in it (or
    /// [`NO_WAY`]), so the insert that usually follows the miss neither searches the
    /// bucket again nor scans it for room. Only a hint: removals only empty ways, and
    /// `claim` checks the way is still empty before taking it.
    hint_bucket: u32,
    hint_way: u32,
}

/// "No empty way seen" in [`FlowTable::hint_way`].
const NO_WAY: u32 = WAYS as u32;

impl FlowTable {
    /// A table holding at most `capacity` runs (clamped to `1..=MAX_RUNS`).
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, MAX_RUNS);
        // About two runs per 8-way bucket when full: a uniform hash then overflows a
        // bucket (Poisson mean 2, more than 8) with probability about 2.4e-4 per bucket.
        let nbuckets = capacity.div_ceil(2).next_power_of_two();
        FlowTable {
            buckets: vec![EMPTY_BUCKET; nbuckets].into_boxed_slice(),
            runs: vec![Run::EMPTY; capacity].into_boxed_slice(),
            links: vec![
                Link {
                    prev: NIL,
                    next: NIL
                };
                capacity
            ]
            .into_boxed_slice(),
            // Pop order hands out slot 0 first, so a small working set stays compact.
            free: (0..capacity as u32).rev().collect(),
            head: NIL,
            tail: NIL,
            last: NIL,
            hint_bucket: u32::MAX,
            hint_way: NO_WAY,
        }
    }

    /// Most runs the table holds.
    pub(crate) fn capacity(&self) -> usize {
        self.runs.len()
    }

    /// Runs held.
    pub(crate) fn len(&self) -> usize {
        self.runs.len() - self.free.len()
    }

    #[inline]
    fn bucket_of(&self, hash: u32) -> usize {
        // High bits of the hash (`hash32` mixes them best), by multiply-shift: correct for
        // any bucket count, no shift by 32 when there is one bucket.
        ((u64::from(hash) * self.buckets.len() as u64) >> 32) as usize
    }

    /// The slot holding the run of the flow `flow` describes (whose hash is `hash`), if
    /// one is held. The key is compared in words, from registers: no load of it can stall
    /// on the parser's narrower stores.
    #[inline(always)]
    pub(crate) fn find(&mut self, hash: u32, flow: &FlowWords) -> Option<u32> {
        if let Some(r) = self.runs.get(self.last as usize) {
            if r.hash == hash && flow.same(&r.flow) {
                return Some(self.last);
            }
        }
        let bi = self.bucket_of(hash);
        match self.probe(bi, hash, flow) {
            Ok(s) => {
                self.last = s;
                Some(s)
            }
            Err(w) => {
                self.hint_bucket = bi as u32;
                self.hint_way = w;
                None
            }
        }
    }

    /// The run most recently found or inserted, or [`NIL`].
    #[inline]
    pub(crate) fn last(&self) -> u32 {
        self.last
    }

    /// The slot holding `flow`'s run, if one is held.
    #[cfg(test)]
    pub(crate) fn lookup(&self, hash: u32, flow: &FlowWords) -> Option<u32> {
        self.probe(self.bucket_of(hash), hash, flow).ok()
    }

    /// One pass over bucket `bi`'s line: `Ok(slot)` of `flow`'s run, or `Err(way)` with
    /// the first empty way ([`NO_WAY`] when the bucket is full) for the insert that
    /// usually follows a miss.
    #[inline(always)]
    fn probe(&self, bi: usize, hash: u32, flow: &FlowWords) -> Result<u32, u32> {
        let b = &self.buckets[bi];
        // Eight compares and branches, the key check only for a way whose hash matched
        // (almost always one or none), then the first empty way. Written as plain loops:
        // the mask form (`hits |= (h == hash) << w` for hits and empties together)
        // compiled to a vector compare whose mask LLVM then rebuilt bit by bit, about 20
        // instructions more per probe.
        for (w, &h) in b.hash.iter().enumerate() {
            if h == hash {
                let s = b.slot[w];
                if let Some(r) = self.runs.get(s as usize) {
                    if flow.same(&r.flow) {
                        return Ok(s);
                    }
                }
            }
        }
        Err(b
            .slot
            .iter()
            .position(|&s| s == NIL)
            .map_or(NO_WAY, |w| w as u32))
    }

    /// The oldest run in bucket `bi` (which is full).
    #[cold]
    fn oldest_in(&self, bi: usize) -> u32 {
        let b = &self.buckets[bi];
        let mut oldest = b.slot[0];
        for &s in &b.slot[1..] {
            if self.runs[s as usize].first_rx < self.runs[oldest as usize].first_rx {
                oldest = s;
            }
        }
        oldest
    }

    /// Stores `run` as the youngest run and returns its slot, or, when there is no room,
    /// the run to remove first (as [`FlowTable::claim`]).
    #[cfg(test)]
    pub(crate) fn insert(&mut self, run: Run) -> Result<u32, u32> {
        let (s, way) = self.claim(run.hash)?;
        *self.run_mut(s) = Run { way, ..run };
        Ok(s)
    }

    /// Takes a slot for a run with `hash` as the youngest run; returns the slot and the
    /// bucket way that holds it. When there is no room, changes nothing and names the run
    /// to flush first: the oldest of all when the table is full, else the oldest in the
    /// bucket (Linux's `gro_flush_oldest`); two flushes at most make room.
    ///
    /// The caller then writes the run in place ([`FlowTable::run_mut`]) with that `hash`
    /// and `way`: in place because a `Run` built on the stack and then copied in costs a
    /// 160-byte copy that stalls on the narrow stores that just built it (measured at 256
    /// flows, one run per segment), and not through a closure, which LLVM called out of
    /// line with the arrival spilled to the stack.
    #[inline(always)]
    pub(crate) fn claim(&mut self, hash: u32) -> Result<(u32, u8), u32> {
        let Some(&s) = self.free.last() else {
            return Err(self.head);
        };
        let bi = self.bucket_of(hash);
        let b = &mut self.buckets[bi];
        let hinted = self.hint_way as usize;
        // The last lookup miss saw an empty way here (removals only empty ways).
        let w = if bi as u32 == self.hint_bucket && b.slot.get(hinted) == Some(&NIL) {
            hinted
        } else {
            match b.slot.iter().position(|&s| s == NIL) {
                Some(w) => w,
                None => return Err(self.oldest_in(bi)),
            }
        };
        self.free.pop();
        b.slot[w] = s;
        b.hash[w] = hash;
        // The hint named this way: spent.
        self.hint_bucket = u32::MAX;
        self.links[s as usize] = Link {
            prev: self.tail,
            next: NIL,
        };
        if self.tail == NIL {
            self.head = s;
        } else {
            self.links[self.tail as usize].next = s;
        }
        self.tail = s;
        self.last = s;
        Ok((s, w as u8))
    }

    /// Removes the run in slot `s` from the index and the arrival list and frees the slot.
    #[inline(always)]
    pub(crate) fn remove(&mut self, s: u32) {
        let (Some(r), Some(&Link { prev, next })) =
            (self.runs.get(s as usize), self.links.get(s as usize))
        else {
            return;
        };
        let bi = self.bucket_of(r.hash);
        let w = usize::from(r.way);
        if let Some(x) = self.buckets[bi].slot.get_mut(w).filter(|x| **x == s) {
            *x = NIL;
        }
        if prev == NIL {
            self.head = next;
        } else {
            self.links[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.links[next as usize].prev = prev;
        }
        // The slot's link is left as it is: `claim` writes both fields.
        if self.last == s {
            self.last = NIL;
        }
        self.free.push(s);
    }

    /// The oldest held run (the first to expire), if any.
    #[inline]
    pub(crate) fn oldest(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    /// The run in slot `s`.
    #[inline]
    pub(crate) fn run(&self, s: u32) -> &Run {
        &self.runs[s as usize]
    }

    /// The run in slot `s`, writable.
    #[inline]
    pub(crate) fn run_mut(&mut self, s: u32) -> &mut Run {
        &mut self.runs[s as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    fn key(i: u16) -> FlowKey {
        FlowKey::v4(
            Ipv4Addr::new(10, 0, (i >> 8) as u8, i as u8),
            1000 + i,
            Ipv4Addr::new(10, 1, 0, 1),
            80,
        )
    }

    fn run(i: u16, t: u64) -> Run {
        let flow = key(i);
        Run {
            flow,
            hash: flow.hash32(),
            first_rx: Instant::from_nanos(t),
            ..Run::EMPTY
        }
    }

    #[test]
    fn insert_lookup_remove_keeps_arrival_order() {
        let mut t = FlowTable::new(8);
        let mut slots = Vec::new();
        for i in 0..8 {
            slots.push(t.insert(run(i, u64::from(i))).expect("room"));
        }
        assert_eq!(t.len(), 8);
        for i in 0..8 {
            assert_eq!(
                t.lookup(key(i).hash32(), &key(i).words()),
                Some(slots[usize::from(i)])
            );
        }
        assert_eq!(t.lookup(key(99).hash32(), &key(99).words()), None);
        // Full: the victim is the oldest of all, and nothing changed.
        assert_eq!(t.insert(run(99, 100)), Err(slots[0]));
        assert_eq!(t.len(), 8);
        t.remove(slots[3]);
        t.remove(slots[0]);
        assert_eq!(t.oldest(), Some(slots[1]));
        assert_eq!(t.lookup(key(3).hash32(), &key(3).words()), None);
        let s = t.insert(run(99, 100)).expect("room");
        assert_eq!(t.lookup(key(99).hash32(), &key(99).words()), Some(s));
        // Walk the list: 1, 2, 4, 5, 6, 7, 99.
        let mut order = Vec::new();
        let mut cur = t.head;
        while cur != NIL {
            order.push(t.run(cur).flow.sport - 1000);
            cur = t.links[cur as usize].next;
        }
        assert_eq!(order, vec![1, 2, 4, 5, 6, 7, 99]);
        while let Some(o) = t.oldest() {
            t.remove(o);
        }
        assert_eq!(t.len(), 0);
        assert_eq!(t.tail, NIL);
    }

    #[test]
    fn full_bucket_names_its_oldest_run_as_victim() {
        // One bucket (capacity 2): the ninth run needs one of the eight ways.
        let mut t = FlowTable::new(16);
        assert_eq!(t.buckets.len(), 8);
        let mut t1 = FlowTable::new(2);
        assert_eq!(t1.buckets.len(), 1);
        t1.insert(run(1, 5)).expect("room");
        t1.insert(run(2, 3)).expect("room");
        assert_eq!(t1.insert(run(3, 9)), Err(t1.head));
        // Fill one bucket of a bigger table with same-hash runs.
        let flow = key(7);
        for i in 0..WAYS {
            let r = Run {
                flow: key(200 + i as u16),
                hash: flow.hash32(),
                first_rx: Instant::from_nanos(50 - i as u64),
                ..Run::EMPTY
            };
            t.insert(r).expect("room");
        }
        let Err(v) = t.insert(run(7, 60)) else {
            panic!("a ninth run in a full bucket got a way");
        };
        assert_eq!(t.run(v).first_rx, Instant::from_nanos(50 - WAYS as u64 + 1));
        t.remove(v);
        assert!(t.insert(run(7, 60)).is_ok());
    }
}
