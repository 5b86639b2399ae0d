//! A seeded, reproducible network impairment: loss, duplication, reordering and delay.
//!
//! This kernel has no netem, so weir injects its own faults (docs/architecture.md, "Running
//! DPDK here"; docs/decisions/impairment.md). [`Impairment`] is generic over the frame type: tests pass `Vec<u8>` or
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
    /// Probability that a frame is corrupted (one byte changed, checksums left as they
    /// were, so the receiver's checksum check must catch it). Applies only through
    /// [`Impairment::push_with`], which knows how to change a frame.
    pub corrupt_ppm: u32,
    /// Most frames held at once (0: no limit); beyond it a frame is dropped and counted
    /// in [`ImpairStats::overflow`], so the stage's memory is bounded.
    pub max_held: usize,
}

impl ImpairConfig {
    /// Parses `loss=1%,reorder=5%,dup=1%,corrupt=0.1%,delay=50us,reorder-delay=200us,max-held=65536`
    /// (any subset, any order; percentages or `ppm` suffixed counts; times in ns, us, ms
    /// or s). Unset fields are zero except `reorder-delay` (200 µs) and `max-held`
    /// (65,536). Returns the configuration and the `seed=N` value if one is given.
    pub fn parse(spec: &str) -> Result<(ImpairConfig, Option<u64>), String> {
        let mut c = ImpairConfig {
            reorder_delay: Duration::from_micros(200),
            max_held: 65_536,
            ..ImpairConfig::default()
        };
        let mut seed = None;
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("impairment '{part}': expected key=value"))?;
            let bad = |what: &str| format!("impairment '{part}': {what}");
            match k {
                "loss" => c.loss_ppm = ppm(v).ok_or_else(|| bad("expected a percentage like 1% or 500ppm"))?,
                "dup" => c.dup_ppm = ppm(v).ok_or_else(|| bad("expected a percentage like 1% or 500ppm"))?,
                "reorder" => c.reorder_ppm = ppm(v).ok_or_else(|| bad("expected a percentage like 5% or 500ppm"))?,
                "corrupt" => c.corrupt_ppm = ppm(v).ok_or_else(|| bad("expected a percentage like 0.1% or 500ppm"))?,
                "delay" => c.delay = time(v).ok_or_else(|| bad("expected a time like 50us"))?,
                "reorder-delay" => c.reorder_delay = time(v).ok_or_else(|| bad("expected a time like 200us"))?,
                "max-held" => c.max_held = v.parse().map_err(|_| bad("expected a count"))?,
                "seed" => seed = Some(v.parse().map_err(|_| bad("expected an integer"))?),
                _ => return Err(format!("impairment '{part}': unknown key '{k}' (loss, dup, reorder, corrupt, delay, reorder-delay, max-held, seed)")),
            }
        }
        Ok((c, seed))
    }
}

fn ppm(v: &str) -> Option<u32> {
    let n = if let Some(p) = v.strip_suffix('%') {
        p.parse::<f64>().ok().map(|x| x * 10_000.0)?
    } else {
        v.strip_suffix("ppm")?.parse::<f64>().ok()?
    };
    (n.is_finite() && (0.0..=1_000_000.0).contains(&n)).then_some(n.round() as u32)
}

fn time(v: &str) -> Option<Duration> {
    let (num, mult) = if let Some(x) = v.strip_suffix("ns") {
        (x, 1)
    } else if let Some(x) = v.strip_suffix("us") {
        (x, 1_000)
    } else if let Some(x) = v.strip_suffix("ms") {
        (x, 1_000_000)
    } else if let Some(x) = v.strip_suffix('s') {
        (x, 1_000_000_000)
    } else {
        (v, 1)
    };
    num.parse::<u64>()
        .ok()
        .map(|n| Duration::from_nanos(n.saturating_mul(mult)))
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
    /// Frames corrupted.
    pub corrupted: u64,
    /// Frames dropped because `max_held` frames were already held.
    pub overflow: u64,
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

/// A one-way impairment stage: frames go in with [`Impairment::push`] (or
/// [`Impairment::push_with`]) and come out, when due, from [`Impairment::pop_ready`].
pub struct Impairment<F> {
    cfg: ImpairConfig,
    rng: Rng,
    held: BinaryHeap<Held<F>>,
    order: u64,
    stats: ImpairStats,
}

impl<F: Clone> Impairment<F> {
    /// Offers a frame sent at `now` (duplicates are clones; no corruption).
    pub fn push(&mut self, now: Instant, frame: F) {
        self.push_with(now, frame, |f| Some(f.clone()), |_, _| false);
    }
}

impl<F> Impairment<F> {
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

    /// Offers a frame sent at `now`. `dup` makes a copy (or `None` when it cannot, e.g.
    /// no buffer left: the duplicate is then skipped); `corrupt` changes the frame using
    /// the random value it is given and returns whether it did.
    pub fn push_with(
        &mut self,
        now: Instant,
        mut frame: F,
        mut dup: impl FnMut(&F) -> Option<F>,
        mut corrupt: impl FnMut(&mut F, u64) -> bool,
    ) {
        self.stats.offered += 1;
        if self.rng.chance_ppm(self.cfg.loss_ppm) {
            self.stats.dropped += 1;
            return;
        }
        if self.rng.chance_ppm(self.cfg.corrupt_ppm) {
            let r = self.rng.next_u64();
            if corrupt(&mut frame, r) {
                self.stats.corrupted += 1;
            }
        }
        if self.rng.chance_ppm(self.cfg.dup_ppm) {
            if let Some(copy) = dup(&frame) {
                self.stats.duplicated += 1;
                let at = self.arrival(now);
                self.hold(at, copy);
            }
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
        if self.cfg.max_held != 0 && self.held.len() >= self.cfg.max_held {
            self.stats.overflow += 1;
            return;
        }
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
    fn parses_specs_and_rejects_bad_ones() {
        let (c, seed) = ImpairConfig::parse("loss=1%,reorder=5%,dup=1%,corrupt=500ppm,seed=7")
            .expect("valid spec");
        assert_eq!(
            (c.loss_ppm, c.reorder_ppm, c.dup_ppm, c.corrupt_ppm),
            (10_000, 50_000, 10_000, 500)
        );
        assert_eq!(seed, Some(7));
        assert_eq!(c.reorder_delay, Duration::from_micros(200));
        assert!(ImpairConfig::parse("loss=150%").is_err());
        assert!(ImpairConfig::parse("jitter=1ms").is_err());
        assert!(ImpairConfig::parse("loss").is_err());
        let (c, _) = ImpairConfig::parse("delay=2ms,reorder-delay=30us").expect("times");
        assert_eq!(c.delay, Duration::from_millis(2));
        assert_eq!(c.reorder_delay, Duration::from_micros(30));
    }

    #[test]
    fn bounded_by_max_held() {
        let cfg = ImpairConfig {
            delay: Duration::from_millis(1),
            max_held: 10,
            ..ImpairConfig::default()
        };
        let mut imp = Impairment::new(cfg, 1);
        for i in 0..100u32 {
            imp.push(Instant::ZERO, i);
        }
        assert_eq!(imp.len(), 10);
        assert_eq!(imp.stats().overflow, 90);
    }

    #[test]
    fn reproducible_and_counts_add_up() {
        let cfg = ImpairConfig {
            loss_ppm: 100_000,
            dup_ppm: 50_000,
            reorder_ppm: 200_000,
            delay: Duration::from_micros(10),
            reorder_delay: Duration::from_micros(100),
            ..ImpairConfig::default()
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
