//! A seeded, reproducible network impairment: loss, duplication, reordering and delay.
//!
//! This kernel has no netem, so weir injects its own faults (DESIGN.md, "Running DPDK here
//! and in CI"). [`Impairment`] is generic over the frame type: tests pass `Vec<u8>` or
//! buffers, weir-sink can pass mbufs. Same seed, same inputs, same outputs: every failure
//! replays from its seed. The random source is [`Rng`] (splitmix64), written here so the
//! stack needs no RNG crate.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::time::{Duration, Instant};

/// A small, fast, seeded PRNG (splitmix64, Steele et al. 2014). Not cryptographic.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (every seed, including 0, is fine).
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A value in `0..n` (0 when `n` is 0), by multiply-shift (bias below 2^-32 for the
    /// small `n` used here).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64() >> 32) * u128::from(n)) >> 32) as u64
    }
    /// `true` with probability `ppm` parts per million.
    pub fn chance_ppm(&mut self, ppm: u32) -> bool {
        self.below(1_000_000) < u64::from(ppm)
    }
}

/// What the impairment does to each frame, as parts per million and delays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ImpairConfig {
    /// Probability that a frame is dropped.
    pub loss_ppm: u32,
    /// Probability that a frame is delivered twice.
    pub dup_ppm: u32,
    /// Probability that a frame is held back by an extra delay (and so reordered).
    pub reorder_ppm: u32,
    /// Delay every frame gets (the link's one-way latency).
    pub delay: Duration,
    /// Longest extra delay of a reordered frame (uniform in `0..=reorder_delay`).
    pub reorder_delay: Duration,
}

/// Counters of what the impairment did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ImpairStats {
    /// Frames offered.
    pub offered: u64,
    /// Frames dropped.
    pub dropped: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Frames given an extra delay.
    pub reordered: u64,
    /// Frames delivered.
    pub delivered: u64,
}

struct Held<F> {
    at: Instant,
    order: u64,
    frame: F,
}

impl<F> PartialEq for Held<F> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl<F> Eq for Held<F> {}
impl<F> PartialOrd for Held<F> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<F> Ord for Held<F> {
    /// Reversed: the heap's top is the earliest delivery (ties in arrival order).
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.order).cmp(&(self.at, self.order))
    }
}

/// A one-way impairment stage: frames go in with [`Impairment::push`] and come out, when
/// due, from [`Impairment::pop_ready`].
pub struct Impairment<F> {
    cfg: ImpairConfig,
    rng: Rng,
    held: BinaryHeap<Held<F>>,
    order: u64,
    stats: ImpairStats,
}

impl<F: Clone> Impairment<F> {
    /// A stage with `cfg`, seeded with `seed`.
    pub fn new(cfg: ImpairConfig, seed: u64) -> Self {
        Impairment {
            cfg,
            rng: Rng::new(seed),
            held: BinaryHeap::new(),
            order: 0,
            stats: ImpairStats::default(),
        }
    }

    /// Offers a frame sent at `now`.
    pub fn push(&mut self, now: Instant, frame: F) {
        self.stats.offered += 1;
        if self.rng.chance_ppm(self.cfg.loss_ppm) {
            self.stats.dropped += 1;
            return;
        }
        if self.rng.chance_ppm(self.cfg.dup_ppm) {
            self.stats.duplicated += 1;
            let at = self.arrival(now);
            self.hold(at, frame.clone());
        }
        let at = self.arrival(now);
        self.hold(at, frame);
    }

    fn arrival(&mut self, now: Instant) -> Instant {
        let mut at = now + self.cfg.delay;
        if self.rng.chance_ppm(self.cfg.reorder_ppm) {
            self.stats.reordered += 1;
            let extra = self
                .rng
                .below(self.cfg.reorder_delay.as_nanos().saturating_add(1));
            at += Duration::from_nanos(extra);
        }
        at
    }

    fn hold(&mut self, at: Instant, frame: F) {
        self.order += 1;
        self.held.push(Held {
            at,
            order: self.order,
            frame,
        });
    }

    /// The next frame due at or before `now`, earliest first.
    pub fn pop_ready(&mut self, now: Instant) -> Option<F> {
        if self.held.peek()?.at > now {
            return None;
        }
        let h = self.held.pop()?;
        self.stats.delivered += 1;
        Some(h.frame)
    }

    /// When the next held frame is due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.held.peek().map(|h| h.at)
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// `true` when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// What happened so far.
    pub fn stats(&self) -> ImpairStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproducible_and_counts_add_up() {
        let cfg = ImpairConfig {
            loss_ppm: 100_000,
            dup_ppm: 50_000,
            reorder_ppm: 200_000,
            delay: Duration::from_micros(10),
            reorder_delay: Duration::from_micros(100),
        };
        let run = |seed| {
            let mut imp = Impairment::new(cfg, seed);
            for i in 0..1000u32 {
                imp.push(Instant::from_nanos(u64::from(i) * 1000), i);
            }
            let mut out = Vec::new();
            while let Some(f) = imp.pop_ready(Instant::NEVER) {
                out.push(f);
            }
            (out, imp.stats())
        };
        let (a, sa) = run(1);
        let (b, _) = run(1);
        let (c, _) = run(2);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(sa.offered - sa.dropped + sa.duplicated, sa.delivered);
        assert!(sa.dropped > 50 && sa.dropped < 150, "{sa:?}");
        assert!(a.windows(2).any(|w| w[0] > w[1]), "some reordering");
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = Rng::new(0);
        for n in [1u64, 2, 7, 1000] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
        assert_eq!(r.below(0), 0);
    }
}
