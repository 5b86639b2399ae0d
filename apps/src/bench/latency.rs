//! A bounded latency histogram for the request/response benchmarks (`weir-bench rr` and
//! its kernel counterpart): log-linear buckets, 64 per power of two, so any quantile is
//! within 1/64 (1.6%) of the true sample, in a fixed 32 KiB whatever the run's length.
//!
//! Values below 64 have a bucket each (exact). A value `v >= 64` with highest set bit `h`
//! falls in group `h - 5`, sub-bucket `(v >> (h - 6)) & 63`: the six bits after the
//! leading one. [`Latency::quantile`] answers the middle of the bucket the quantile's
//! sample lies in.

/// Sub-buckets per power of two.
const SUB: usize = 64;
/// Groups: exact values below 64, then one per power of two from 2^6 to 2^63.
const GROUPS: usize = 64 - 6 + 1;

/// A histogram of nanosecond latencies with bounded memory and relative error.
#[derive(Clone)]
pub struct Latency {
    buckets: Vec<u64>,
    count: u64,
    max: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Latency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latency")
            .field("count", &self.count)
            .field("p50", &self.quantile(0.5))
            .field("max", &self.max)
            .finish()
    }
}

fn index(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let h = 63 - v.leading_zeros() as usize;
    let group = h - 5;
    let sub = ((v >> (h - 6)) & (SUB as u64 - 1)) as usize;
    group * SUB + sub
}

/// The smallest value and the width of bucket `i`.
fn bounds(i: usize) -> (u64, u64) {
    let (group, sub) = (i / SUB, (i % SUB) as u64);
    if group == 0 {
        return (sub, 1);
    }
    let h = group + 5;
    let width = 1u64 << (h - 6);
    ((1u64 << h) + sub * width, width)
}

impl Latency {
    /// An empty histogram.
    pub fn new() -> Self {
        Latency {
            buckets: vec![0; GROUPS * SUB],
            count: 0,
            max: 0,
        }
    }

    /// Counts one sample of `ns`.
    pub fn record(&mut self, ns: u64) {
        self.buckets[index(ns)] += 1;
        self.count += 1;
        self.max = self.max.max(ns);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The largest sample (exact).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` (0 to 1) within 1.6%, 0 when empty: the middle of the
    /// bucket holding the sample of rank `ceil(q * count)`, never above the largest sample.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (lo, width) = bounds(i);
                return (lo + width / 2).min(self.max);
            }
        }
        self.max
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Latency) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.max = self.max.max(other.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact() {
        let mut h = Latency::new();
        for v in 0..64 {
            h.record(v);
        }
        assert_eq!(h.count(), 64);
        assert_eq!(h.quantile(0.5), 31);
        assert_eq!(h.quantile(1.0), 63);
        assert_eq!(h.quantile(0.0), 0);
    }

    #[test]
    fn every_bucket_maps_back_onto_its_values() {
        for v in [64u64, 65, 127, 128, 1000, 12_345, 1 << 40, u64::MAX] {
            let (lo, width) = bounds(index(v));
            assert!(lo <= v && v - lo < width, "{v} outside [{lo}, +{width})");
            assert!(
                width as f64 <= (lo as f64) / 64.0 + 1.0,
                "{v}: width {width}"
            );
        }
    }

    #[test]
    fn quantiles_are_within_the_stated_error() {
        let mut h = Latency::new();
        // 1..=100_000 ns: the true p50 is 50_000, p99 99_000, p99.9 99_900.
        for v in 1..=100_000u64 {
            h.record(v);
        }
        for (q, want) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.999, 99_900.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - want).abs() / want < 0.016, "q {q}: {got} vs {want}");
        }
        assert_eq!(h.max(), 100_000);
    }

    #[test]
    fn merge_adds_counts() {
        let (mut a, mut b) = (Latency::new(), Latency::new());
        a.record(10);
        b.record(1_000_000);
        b.record(1_000_000);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.max(), 1_000_000);
        assert!(a.quantile(0.5) > 980_000);
        assert_eq!(a.quantile(0.3), 10);
    }

    #[test]
    fn empty_is_zero() {
        assert_eq!(Latency::new().quantile(0.99), 0);
    }
}
