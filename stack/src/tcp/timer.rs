//! One core's TCP timers without a scan and without a sort: a hierarchical timing wheel
//! with one node per connection slot and half-open slot, O(1) to arm, cancel and fire.
//!
//! **Why a wheel.** Every connection with data in flight or an ACK owed has a timer, and at
//! tens of thousands of flows nearly every segment arms one (a flow's next segment comes
//! later than the 40 ms delayed-ACK timeout). A binary heap costs O(log n) per pop with
//! the lower levels cold in cache; the wheel files a timer in a bucket by its deadline and
//! touches only that timer's node. Linux files its timers the same way (kernel/time/timer.c,
//! `calc_wheel_index`); unlike Linux's, this wheel never fires late: a timer fires only
//! when `now` has reached its exact deadline.
//!
//! **Layout.** [`LEVELS`] levels of [`SLOTS`] buckets each. A level-0 bucket spans
//! 2^[`SHIFT0`] ns (16.4 µs), and each level's buckets span [`SLOTS`] times the one
//! below: 1 ms, 67 ms, 4.3 s, 4.6 min, 4.9 h, 13 days. A timer goes in the lowest level
//! whose window (the [`SLOTS`] buckets from that level's cursor) holds its deadline.
//! When a bucket above level 0 comes due, its timers move down, each to the lowest level
//! that now holds it (a 40 ms delayed ACK moves once, from level 1 to level 0). At level 0
//! a bucket's timers fire once `now` reaches their exact deadlines. Each bucket keeps the
//! earliest deadline it was given, so [`Timers::next_deadline`] is exact unless a timer
//! moved out of its bucket (then early, never late).
//!
//! **Nodes.** Each slot owns one node, so the memory is fixed when the table is built and
//! nothing is allocated later. A node sits in at most one list: a bucket, the ready list
//! (due, not yet handed out) or none. Re-arming *earlier* moves the node (O(1), a doubly
//! linked list). Re-arming *later* with the same generation does nothing: the timer fires
//! at its old deadline, its owner finds nothing due and arms again for the real one, so a
//! retransmission timer pushed back on every ACK costs nothing per ACK. A new generation
//! (the slot was reused) replaces the node's deadline whatever it was.

use crate::time::Instant;

/// Which table a timer belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// A connection: delayed ACK, SACK compression, FIN retransmission, TIME-WAIT.
    Conn,
    /// A half-open entry: SYN-ACK retransmission.
    Half,
}

/// A timer that fired: the slot and generation it was armed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fired {
    pub(crate) kind: Kind,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

/// Levels of the wheel. The top level's window is 2^(`SHIFT0` + 6 · `LEVELS`) ns (2.3
/// years); a deadline beyond it waits in the top level's last bucket and is filed again
/// when that comes due.
const LEVELS: usize = 7;
/// Buckets per level (one bit each in a level's occupancy word).
const SLOTS: u64 = 64;
/// log2 of [`SLOTS`]: how much coarser each level is than the one below.
const LEVEL_BITS: u32 = 6;
/// log2 of a level-0 bucket's span in nanoseconds (16.4 µs): fine enough that the bucket
/// at `now`, which [`Timers::pop_due`] scans for what is due, holds a few timers at most.
const SHIFT0: u32 = 14;
/// No node.
const NIL: u32 = u32::MAX;
/// The ready list's id, after the buckets' ids (`level · SLOTS + bucket`).
const READY: u16 = (LEVELS as u16) * (SLOTS as u16);
/// A node in no list: not armed.
const UNARMED: u16 = u16::MAX;

#[derive(Clone, Copy)]
struct Node {
    at: u64,
    gen: u32,
    prev: u32,
    next: u32,
    list: u16,
}

const IDLE: Node = Node {
    at: 0,
    gen: 0,
    prev: NIL,
    next: NIL,
    list: UNARMED,
};

fn shift(level: usize) -> u32 {
    SHIFT0 + LEVEL_BITS * level as u32
}

/// The first occupied bucket of a level at or after its cursor, as an absolute number.
fn first_occupied(bits: u64, cursor: u64) -> Option<u64> {
    if bits == 0 {
        return None;
    }
    let off = bits.rotate_right((cursor % SLOTS) as u32).trailing_zeros();
    Some(cursor + u64::from(off))
}

pub(crate) struct Timers {
    /// Connection slots' nodes first, then half-open slots'.
    nodes: Vec<Node>,
    conns: usize,
    /// Each list's first and last node: the buckets (`level · SLOTS + bucket`), then the
    /// ready list.
    head: Vec<u32>,
    tail: Vec<u32>,
    /// Each level's occupied buckets, one bit per bucket.
    occupied: [u64; LEVELS],
    /// Each level's cursor: the absolute number of its first bucket not yet processed.
    /// After [`Timers::advance`] to `p`: `p >> SHIFT0` for level 0 (its bucket at `p` is
    /// processed only up to `p`), `(p >> shift(l)) + 1` above. Every timer in a level lies
    /// in the [`SLOTS`] buckets from its cursor.
    cursor: [u64; LEVELS],
    /// The earliest deadline given to each bucket since it was last emptied (a timer moved
    /// out may leave it early).
    earliest: [[u64; SLOTS as usize]; LEVELS],
    /// The earliest deadline in the ready list.
    ready_earliest: u64,
    /// A bound on the earliest deadline or level-1+ bucket start outside the ready list
    /// (`u64::MAX`: none), recomputed by each advance.
    next: u64,
    /// Nodes armed (in a bucket or the ready list).
    armed: usize,
}

impl Timers {
    pub(crate) fn new(max_conns: usize, max_half_open: usize) -> Self {
        let conns = max_conns.max(1);
        let half = max_half_open.max(1);
        let lists = usize::from(READY) + 1;
        let mut cursor = [1; LEVELS];
        cursor[0] = 0;
        Timers {
            nodes: vec![IDLE; conns + half],
            conns,
            head: vec![NIL; lists],
            tail: vec![NIL; lists],
            occupied: [0; LEVELS],
            cursor,
            earliest: [[u64::MAX; SLOTS as usize]; LEVELS],
            ready_earliest: u64::MAX,
            next: u64::MAX,
            armed: 0,
        }
    }

    fn index(&self, kind: Kind, slot: u32) -> Option<usize> {
        let slot = slot as usize;
        match kind {
            Kind::Conn => (slot < self.conns).then_some(slot),
            Kind::Half => {
                let i = self.conns + slot;
                (i < self.nodes.len()).then_some(i)
            }
        }
    }

    /// Makes sure `(kind, slot, gen)` is woken no later than `at` (`None`: nothing to do;
    /// an armed timer that is no longer needed fires harmlessly). Out-of-range slots are
    /// ignored.
    pub(crate) fn arm(&mut self, kind: Kind, slot: u32, gen: u32, at: Option<Instant>) {
        let Some(at) = at else {
            return;
        };
        let Some(i) = self.index(kind, slot) else {
            return;
        };
        let at = at.as_nanos();
        let n = self.nodes[i];
        if n.list != UNARMED {
            if n.gen == gen && n.at <= at {
                return;
            }
            self.unlink(i);
        } else {
            self.armed += 1;
        }
        self.nodes[i].at = at;
        self.nodes[i].gen = gen;
        self.file(i);
    }

    /// Puts node `i` (in no list) in the lowest level whose window holds its deadline.
    fn file(&mut self, i: usize) {
        let at = self.nodes[i].at;
        let t0 = at >> SHIFT0;
        if t0 < self.cursor[0] + SLOTS {
            let b = t0.max(self.cursor[0]) % SLOTS;
            self.earliest[0][b as usize] = self.earliest[0][b as usize].min(at);
            self.next = self.next.min(at);
            self.push(i, b as u16);
            self.occupied[0] |= 1 << b;
            return;
        }
        let mut level = 1;
        while level < LEVELS - 1 && (at >> shift(level)) >= self.cursor[level] + SLOTS {
            level += 1;
        }
        // Below the top level the window holds the deadline and starts at or before it
        // (the level below did not hold it); a deadline past the top window waits in its
        // last bucket.
        let n = (at >> shift(level)).clamp(self.cursor[level], self.cursor[level] + SLOTS - 1);
        let b = n % SLOTS;
        self.earliest[level][b as usize] = self.earliest[level][b as usize].min(at);
        self.next = self.next.min(at);
        self.push(i, (level as u64 * SLOTS + b) as u16);
        self.occupied[level] |= 1 << b;
    }

    /// Appends node `i` to list `list`.
    fn push(&mut self, i: usize, list: u16) {
        let l = usize::from(list);
        let t = self.tail[l];
        self.nodes[i].list = list;
        self.nodes[i].prev = t;
        self.nodes[i].next = NIL;
        if t == NIL {
            self.head[l] = i as u32;
        } else {
            self.nodes[t as usize].next = i as u32;
        }
        self.tail[l] = i as u32;
    }

    /// Takes node `i` out of its list (it stays armed).
    fn unlink(&mut self, i: usize) {
        let Node {
            prev, next, list, ..
        } = self.nodes[i];
        let l = usize::from(list);
        if prev == NIL {
            self.head[l] = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail[l] = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
        self.nodes[i].list = UNARMED;
        if self.head[l] == NIL {
            if list == READY {
                self.ready_earliest = u64::MAX;
            } else {
                let level = l / SLOTS as usize;
                let b = l % SLOTS as usize;
                self.occupied[level] &= !(1 << b);
                self.earliest[level][b] = u64::MAX;
            }
        }
    }

    /// Empties bucket list `l`, returning its first node (the rest follow by `next`).
    fn take(&mut self, l: usize) -> u32 {
        let first = self.head[l];
        self.head[l] = NIL;
        self.tail[l] = NIL;
        let level = l / SLOTS as usize;
        let b = l % SLOTS as usize;
        self.occupied[level] &= !(1 << b);
        self.earliest[level][b] = u64::MAX;
        first
    }

    fn make_ready(&mut self, i: usize) {
        self.ready_earliest = self.ready_earliest.min(self.nodes[i].at);
        self.push(i, READY);
    }

    /// Empties bucket list `l`: each timer due at `now` goes to the ready list, each other
    /// one to the lowest level whose window holds it.
    fn sort_out(&mut self, l: usize, now: u64) {
        let mut i = self.take(l);
        while i != NIL {
            let next = self.nodes[i as usize].next;
            if self.nodes[i as usize].at <= now {
                self.make_ready(i as usize);
            } else {
                self.file(i as usize);
            }
            i = next;
        }
    }

    /// Moves every timer due at `now` to the ready list, moves the timers of every bucket
    /// above level 0 that has begun down a level or more, and brings the cursors to `now`.
    /// O(1) per timer moved plus at most [`SLOTS`] occupancy tests per level.
    fn advance(&mut self, now: u64) {
        // Level 0: buckets before now's are due whole; now's is due up to `now`.
        let t0 = now >> SHIFT0;
        let from = self.cursor[0];
        if t0 >= from {
            let full = (t0 - from).min(SLOTS);
            for k in 0..full {
                let b = ((from + k) % SLOTS) as usize;
                if self.occupied[0] & (1 << b) == 0 {
                    continue;
                }
                self.sort_out(b, now);
            }
            self.cursor[0] = t0;
            let b = (t0 % SLOTS) as usize;
            if self.occupied[0] & (1 << b) != 0 && self.earliest[0][b] <= now {
                self.sort_out(b, now);
            }
        }
        // Levels 1 and up, lowest first: the cursors below are at `now` already, so each
        // timer moved lands in a window that holds it (see `file`).
        for level in 1..LEVELS {
            let target = now >> shift(level);
            let from = self.cursor[level];
            if target < from {
                continue;
            }
            let count = (target - from + 1).min(SLOTS);
            self.cursor[level] = target + 1;
            for k in 0..count {
                let b = (from + k) % SLOTS;
                if self.occupied[level] & (1 << b) == 0 {
                    continue;
                }
                self.sort_out((level as u64 * SLOTS + b) as usize, now);
            }
        }
        self.next = self.recompute_next();
    }

    /// The earliest deadline outside the ready list: in each level the first occupied
    /// bucket from the cursor holds the level's earliest (the window is in deadline order;
    /// a deadline past the top window waits in its last bucket, after all the others).
    fn recompute_next(&self) -> u64 {
        let mut best = u64::MAX;
        for level in 0..LEVELS {
            if let Some(n) = first_occupied(self.occupied[level], self.cursor[level]) {
                best = best.min(self.earliest[level][(n % SLOTS) as usize]);
            }
        }
        best
    }

    /// The next timer due at `now`, disarmed (its owner re-arms what remains).
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Fired> {
        let now = now.as_nanos();
        if self.head[usize::from(READY)] == NIL {
            if self.next > now {
                return None;
            }
            self.advance(now);
        }
        let i = self.head[usize::from(READY)];
        if i == NIL {
            return None;
        }
        let i = i as usize;
        self.unlink(i);
        self.armed -= 1;
        let (kind, slot) = if i < self.conns {
            (Kind::Conn, i as u32)
        } else {
            (Kind::Half, (i - self.conns) as u32)
        };
        Some(Fired {
            kind,
            slot,
            gen: self.nodes[i].gen,
        })
    }

    /// The earliest deadline armed: exact, or early when a timer moved out of a bucket
    /// (armed earlier or for a new generation) left the bucket's earliest behind; never
    /// late.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let t = self.next.min(self.ready_earliest);
        (t != u64::MAX).then(|| Instant::from_nanos(t))
    }

    /// Timers armed.
    pub(crate) fn len(&self) -> usize {
        self.armed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn conn(slot: u32, gen: u32) -> Fired {
        Fired {
            kind: Kind::Conn,
            slot,
            gen,
        }
    }

    #[test]
    fn fires_in_order_and_keeps_the_earliest_deadline() {
        let mut w = Timers::new(4, 2);
        w.arm(Kind::Conn, 0, 1, Some(t(40)));
        w.arm(Kind::Conn, 1, 1, Some(t(10)));
        w.arm(Kind::Half, 0, 7, Some(t(20)));
        // Earlier re-arm: the node moves.
        w.arm(Kind::Conn, 0, 1, Some(t(5)));
        // Later re-arm, same generation: nothing changes.
        w.arm(Kind::Conn, 1, 1, Some(t(30)));
        assert_eq!(w.len(), 3);
        assert_eq!(w.next_deadline(), Some(t(5)));
        assert_eq!(w.pop_due(t(4)), None);
        let f: Vec<_> = std::iter::from_fn(|| w.pop_due(t(100))).collect();
        assert_eq!(
            f,
            vec![
                conn(0, 1),
                conn(1, 1),
                Fired {
                    kind: Kind::Half,
                    slot: 0,
                    gen: 7
                },
            ]
        );
        assert_eq!(w.len(), 0);
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn new_generation_replaces_old() {
        let mut w = Timers::new(2, 1);
        w.arm(Kind::Conn, 0, 1, Some(t(10)));
        w.arm(Kind::Conn, 0, 2, Some(t(50)));
        assert_eq!(w.len(), 1);
        assert_eq!(w.pop_due(t(20)), None, "gen 1's deadline is gone");
        assert_eq!(w.pop_due(t(50)), Some(conn(0, 2)));
    }

    #[test]
    fn fires_at_the_exact_deadline_never_before() {
        let mut w = Timers::new(2, 1);
        let at = Instant::from_nanos(40_000_123);
        w.arm(Kind::Conn, 1, 3, Some(at));
        assert_eq!(w.pop_due(Instant::from_nanos(1_000)), None);
        assert_eq!(w.pop_due(Instant::from_nanos(40_000_122)), None);
        assert_eq!(w.next_deadline(), Some(at));
        assert_eq!(w.pop_due(at), Some(conn(1, 3)));
    }

    #[test]
    fn deadlines_past_the_top_window_and_at_the_end_of_time() {
        let mut w = Timers::new(3, 1);
        w.arm(Kind::Conn, 0, 1, Some(Instant::from_nanos(u64::MAX)));
        w.arm(Kind::Conn, 1, 1, Some(Instant::from_nanos(u64::MAX - 5)));
        w.arm(Kind::Conn, 2, 1, Some(t(1)));
        assert_eq!(w.pop_due(t(2)), Some(conn(2, 1)));
        assert_eq!(w.pop_due(Instant::from_nanos(u64::MAX / 2)), None);
        let mut f: Vec<_> =
            std::iter::from_fn(|| w.pop_due(Instant::from_nanos(u64::MAX))).collect();
        f.sort_unstable_by_key(|f| f.slot);
        assert_eq!(f, vec![conn(0, 1), conn(1, 1)]);
    }

    #[test]
    fn out_of_range_slots_are_ignored() {
        let mut w = Timers::new(8, 2);
        w.arm(Kind::Conn, 99, 1, Some(t(1)));
        w.arm(Kind::Half, 2, 1, Some(t(1)));
        assert_eq!(w.len(), 0);
        assert_eq!(w.next_deadline(), None);
    }

    /// The rule the wheel must keep, as plainly as it can be said: each slot holds at most
    /// one deadline; arming earlier or with a new generation replaces it, arming later with
    /// the same generation does not; `pop_due(now)` hands out exactly the deadlines at or
    /// before `now`; `next_deadline` is never later than the earliest deadline held.
    #[derive(Default)]
    struct Model {
        armed: std::collections::BTreeMap<(u8, u32), (u64, u32)>,
    }

    impl Model {
        fn arm(&mut self, kind: u8, slot: u32, gen: u32, at: u64) {
            match self.armed.get(&(kind, slot)) {
                Some(&(a, g)) if g == gen && a <= at => {}
                _ => {
                    self.armed.insert((kind, slot), (at, gen));
                }
            }
        }
        fn due(&mut self, now: u64) -> Vec<(u8, u32, u32)> {
            let due: Vec<_> = self
                .armed
                .iter()
                .filter(|(_, &(a, _))| a <= now)
                .map(|(&(k, s), &(_, g))| (k, s, g))
                .collect();
            for (k, s, _) in &due {
                self.armed.remove(&(*k, *s));
            }
            due
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Arm {
            half: bool,
            slot: u32,
            gen: u32,
            delay: u64,
        },
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Delays from nanoseconds to hours, so every level and the moves between them are
        // crossed; steps from nothing to minutes, so whole rotations are skipped.
        let delay = prop_oneof![
            0u64..50_000,
            0u64..5_000_000,
            0u64..300_000_000,
            0u64..100_000_000_000,
            0u64..20_000_000_000_000,
        ];
        let step = prop_oneof![
            0u64..20_000,
            0u64..2_000_000,
            0u64..500_000_000,
            0u64..400_000_000_000
        ];
        prop_oneof![
            3 => (any::<bool>(), 0u32..6, 0u32..3, delay).prop_map(|(half, slot, gen, delay)| Op::Arm { half, slot, gen, delay }),
            2 => step.prop_map(Op::Advance),
        ]
    }

    proptest! {
        #[test]
        fn wheel_matches_the_model(start in 0u64..1u64 << 50, ops in prop::collection::vec(op(), 1..300)) {
            let mut w = Timers::new(6, 6);
            let mut m = Model::default();
            let mut now = start;
            for o in ops {
                match o {
                    Op::Arm { half, slot, gen, delay } => {
                        // Deadlines a little in the past too: a handler may arm one.
                        let at = (now + delay).saturating_sub(10_000);
                        let kind = if half { Kind::Half } else { Kind::Conn };
                        w.arm(kind, slot, gen, Some(Instant::from_nanos(at)));
                        m.arm(u8::from(half), slot, gen, at);
                    }
                    Op::Advance(d) => {
                        now += d;
                        let mut got: Vec<_> = std::iter::from_fn(|| w.pop_due(Instant::from_nanos(now)))
                            .map(|f| (u8::from(f.kind == Kind::Half), f.slot, f.gen))
                            .collect();
                        got.sort_unstable();
                        prop_assert_eq!(got, m.due(now));
                    }
                }
                prop_assert_eq!(w.len(), m.armed.len());
                if let Some(&min) = m.armed.values().map(|(a, _)| a).min() {
                    let next = w.next_deadline().map(Instant::as_nanos);
                    prop_assert!(next.is_some_and(|n| n <= min), "next {:?} later than {}", next, min);
                }
            }
        }
    }
}
