//! One core's TCP timers without a scan: a binary heap of `(deadline, kind, slot,
//! generation)` with lazy deletion.
//!
//! Each connection slot and half-open slot has at most one *live* entry, recorded in
//! `armed`; an entry is live when `armed[slot]` still holds its deadline and generation.
//! Re-arming earlier pushes a new entry (the old one goes stale); re-arming later pushes
//! nothing: the live entry fires early, finds nothing due, and its owner arms again with its
//! real deadline. Cancelling is free (the entry fires and finds nothing due). Firing costs
//! O(log n) per entry popped, live or stale, so [`Tcp::handle_timeout`](super::Tcp) costs
//! O(expired · log n) amortised instead of a walk over every slot.
//!
//! The heap is allocated once with room for `2 · max_conns + max_half_open + 64` entries.
//! Live entries never exceed `max_conns + max_half_open`, so when a push finds it full, or
//! finds stale entries dominating (more than twice the live ones, plus slack), it is
//! compacted in place first: O(n) work at most once per n/2 pushes, O(1) amortised, and it
//! never grows.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::time::Instant;

/// Which table a timer belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// A connection: delayed ACK, SACK compression, FIN retransmission, TIME-WAIT.
    Conn,
    /// A half-open entry: SYN-ACK retransmission.
    Half,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    at: Instant,
    kind: Kind,
    slot: u32,
    gen: u32,
}

/// A timer that fired: the slot and generation it was armed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fired {
    pub(crate) kind: Kind,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<Entry>>,
    cap: usize,
    conn: Vec<Option<(Instant, u32)>>,
    half: Vec<Option<(Instant, u32)>>,
    live: usize,
    compactions: u64,
}

impl Timers {
    pub(crate) fn new(max_conns: usize, max_half_open: usize) -> Self {
        let conns = max_conns.max(1);
        let half = max_half_open.max(1);
        let cap = 2 * conns + half + 64;
        Timers {
            heap: BinaryHeap::with_capacity(cap),
            cap,
            conn: vec![None; conns],
            half: vec![None; half],
            live: 0,
            compactions: 0,
        }
    }

    fn armed(&self, kind: Kind, slot: u32) -> Option<(Instant, u32)> {
        let v = match kind {
            Kind::Conn => &self.conn,
            Kind::Half => &self.half,
        };
        v.get(slot as usize).copied().flatten()
    }

    fn set_armed(&mut self, kind: Kind, slot: u32, a: Option<(Instant, u32)>) {
        let v = match kind {
            Kind::Conn => &mut self.conn,
            Kind::Half => &mut self.half,
        };
        if let Some(x) = v.get_mut(slot as usize) {
            match (x.is_some(), a.is_some()) {
                (false, true) => self.live += 1,
                (true, false) => self.live -= 1,
                _ => {}
            }
            *x = a;
        }
    }

    /// Makes sure `(kind, slot, gen)` is woken no later than `at` (`None`: nothing to do;
    /// a live entry that is no longer needed fires harmlessly).
    pub(crate) fn arm(&mut self, kind: Kind, slot: u32, gen: u32, at: Option<Instant>) {
        let Some(at) = at else {
            return;
        };
        let in_range = match kind {
            Kind::Conn => (slot as usize) < self.conn.len(),
            Kind::Half => (slot as usize) < self.half.len(),
        };
        if !in_range {
            return;
        }
        if let Some((t, g)) = self.armed(kind, slot) {
            if g == gen && t <= at {
                return;
            }
        }
        if self.heap.len() >= self.cap || self.heap.len() > 2 * self.live + 64 {
            self.compact();
        }
        if self.heap.len() >= self.cap {
            // Cannot happen: live entries are at most one per slot, which is less than
            // the capacity. Never grow: keep the earlier of the two wake-ups.
            return;
        }
        self.heap.push(Reverse(Entry {
            at,
            kind,
            slot,
            gen,
        }));
        self.set_armed(kind, slot, Some((at, gen)));
    }

    fn is_live(&self, e: &Entry) -> bool {
        self.armed(e.kind, e.slot) == Some((e.at, e.gen))
    }

    /// Drops every stale entry (in place; no allocation).
    fn compact(&mut self) {
        let conn = &self.conn;
        let half = &self.half;
        self.heap.retain(|Reverse(e)| {
            let v = match e.kind {
                Kind::Conn => conn,
                Kind::Half => half,
            };
            v.get(e.slot as usize).copied().flatten() == Some((e.at, e.gen))
        });
        self.compactions += 1;
    }

    /// The next live timer due at `now`, disarmed (its owner re-arms what remains).
    /// Stale entries met on the way are dropped.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Fired> {
        while let Some(Reverse(e)) = self.heap.peek().copied() {
            if e.at > now {
                return None;
            }
            self.heap.pop();
            if self.is_live(&e) {
                self.set_armed(e.kind, e.slot, None);
                return Some(Fired {
                    kind: e.kind,
                    slot: e.slot,
                    gen: e.gen,
                });
            }
        }
        None
    }

    /// The earliest entry's deadline (possibly stale, so possibly early, never late).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }

    /// Entries held, live and stale.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Entries the heap can hold (fixed).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn fires_in_order_and_skips_stale() {
        let mut w = Timers::new(4, 2);
        w.arm(Kind::Conn, 0, 1, Some(t(40)));
        w.arm(Kind::Conn, 1, 1, Some(t(10)));
        w.arm(Kind::Half, 0, 7, Some(t(20)));
        // Earlier re-arm: the 40 ms entry goes stale.
        w.arm(Kind::Conn, 0, 1, Some(t(5)));
        // Later re-arm: nothing pushed.
        w.arm(Kind::Conn, 1, 1, Some(t(30)));
        assert_eq!(w.len(), 4);
        assert_eq!(w.next_deadline(), Some(t(5)));
        assert_eq!(w.pop_due(t(4)), None);
        let f: Vec<_> = std::iter::from_fn(|| w.pop_due(t(100))).collect();
        assert_eq!(
            f,
            vec![
                Fired {
                    kind: Kind::Conn,
                    slot: 0,
                    gen: 1
                },
                Fired {
                    kind: Kind::Conn,
                    slot: 1,
                    gen: 1
                },
                Fired {
                    kind: Kind::Half,
                    slot: 0,
                    gen: 7
                },
            ]
        );
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn new_generation_replaces_old() {
        let mut w = Timers::new(2, 1);
        w.arm(Kind::Conn, 0, 1, Some(t(10)));
        w.arm(Kind::Conn, 0, 2, Some(t(50)));
        assert_eq!(w.pop_due(t(20)), None, "gen 1's entry is stale");
        assert_eq!(
            w.pop_due(t(50)),
            Some(Fired {
                kind: Kind::Conn,
                slot: 0,
                gen: 2
            })
        );
    }

    #[test]
    fn bounded_and_compacted_without_growing() {
        let mut w = Timers::new(8, 2);
        let cap = w.capacity();
        // Ever-earlier deadlines on one slot: each push makes the previous one stale.
        for i in 0..10_000u64 {
            w.arm(Kind::Conn, 3, 1, Some(t(1_000_000 - i)));
            assert!(w.len() <= cap);
        }
        assert!(w.compactions > 0);
        assert_eq!(w.live, 1);
        assert_eq!(
            w.pop_due(t(1_000_000)),
            Some(Fired {
                kind: Kind::Conn,
                slot: 3,
                gen: 1
            })
        );
        assert_eq!(w.pop_due(t(1_000_000)), None);
        // Out-of-range slots are ignored, never a panic.
        w.arm(Kind::Conn, 99, 1, Some(t(1)));
        w.arm(Kind::Half, 99, 1, Some(t(1)));
        assert_eq!(w.len(), 0);
    }
}
