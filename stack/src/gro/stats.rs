//! GRO's counters: segments in, units out, and every output unit counted by why it left.

use crate::reason::reason_enum;

reason_enum! {
    /// Why GRO emitted an output unit. Every unit is counted under exactly one reason, so
    /// the counts sum to [`GroStats::units_out`]. Names ([`FlushReason::name`]) are JSON
    /// keys and appear in reports.
    pub enum FlushReason {
        /// The run was held for `flush_ns` (counted from its first segment).
        Timer = "timer",
        /// The run reached the byte limit (`max_bytes`, 64 KiB by default) or the segment
        /// cap (`max_segs`), or the next segment would have passed the byte limit.
        Size = "size",
        /// The run's last segment ended it: PSH, FIN, or shorter than the run's `gso_size`
        /// (Linux `tcp_gro_receive`, `out_check_final`). Includes such a segment arriving
        /// with no run held (a run of one).
        Flags = "flags",
        /// The flow's next segment could not join the run: out of order, a retransmission
        /// or overlap, a header field that differs (MACs, ACK, window, options, TSval
        /// falling, TTL, TOS, DF, IP ID, flow label), a payload larger than `gso_size`, or
        /// a segment that is never merged. The run is flushed ahead of that segment, so
        /// order is kept.
        Gap = "gap",
        /// `end_of_burst` with `flush_ns = 0` (NAPI without `gro_flush_timeout`).
        BurstEnd = "burst_end",
        /// The table (or the run's hash bucket) was full and this was the oldest run in it.
        Eviction = "eviction",
        /// A segment that is never merged (CWR, SYN, RST, URG, IP options, no payload),
        /// passed on as a run of one without being held.
        Passthrough = "passthrough",
        /// `flush_all` (shutdown, or the driver draining the stage).
        Shutdown = "shutdown",
        /// Passed on without the table while GRO bypasses it: its last runs all left one
        /// segment long, so holding bought nothing (`Gro`'s module documentation, "When
        /// nothing merges"). Also the runs held when the bypass began, flushed then.
        Bypass = "bypass",
    }
}

/// GRO's counters for one pipeline (one core).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroStats {
    /// Segments handed to `handle_segment`.
    pub segments_in: u64,
    /// Segments handed on inside output units.
    pub segments_out: u64,
    /// Output units (coalesced segments, runs of one included).
    pub units_out: u64,
    /// Output units by [`FlushReason`], indexed by [`FlushReason::index`].
    pub flushes: [u64; FlushReason::COUNT],
    /// Gauge: segments currently held (`segments_in - segments_out`).
    pub held_segments: u64,
    /// Bypasses of the table begun: each after a streak of runs flushed one segment long
    /// (units passed on in them count as [`FlushReason::Bypass`]).
    pub bypasses: u64,
    /// Per-segment hold times (arrival to its unit's flush), when
    /// [`super::GroConfig::hold_histogram`] is on; `None` otherwise. Allocated once when
    /// the stage is built, never on the data path.
    pub hold_ns: Option<Box<HoldHistogram>>,
}

/// Sub-buckets per power of two in [`HoldHistogram`]: 16, so a bucket spans at most
/// 1/16 (6.25%) of its values.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;

/// Number of buckets of [`HoldHistogram`]: exact below 16 ns, then 16 per power of two up
/// to 2^64 ns.
pub const HOLD_BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// A fixed-bucket, log-linear histogram of nanosecond values (HdrHistogram's layout with
/// 4 sub-bucket bits): recording is a few shifts and one add, nothing allocates.
#[derive(Clone, PartialEq, Eq)]
pub struct HoldHistogram {
    counts: [u64; HOLD_BUCKETS],
    total: u64,
    sum: u128,
}

impl Default for HoldHistogram {
    fn default() -> Self {
        HoldHistogram {
            counts: [0; HOLD_BUCKETS],
            total: 0,
            sum: 0,
        }
    }
}

impl core::fmt::Debug for HoldHistogram {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HoldHistogram")
            .field("count", &self.total)
            .field("p50", &self.quantile(0.5))
            .field("p99", &self.quantile(0.99))
            .finish()
    }
}

impl HoldHistogram {
    #[inline]
    fn bucket(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let k = 63 - v.leading_zeros(); // >= SUB_BITS
        let sub = (v >> (k - SUB_BITS)) & (SUB - 1);
        ((k - SUB_BITS + 1) as usize) * SUB as usize + sub as usize
    }

    /// The smallest value that lands in bucket `i`.
    fn lower(i: usize) -> u64 {
        let (hi, sub) = (i as u64 / SUB, i as u64 % SUB);
        if hi == 0 {
            sub
        } else {
            let k = hi as u32 + SUB_BITS - 1;
            (1u64 << k) | (sub << (k - SUB_BITS))
        }
    }

    /// Counts one value.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[Self::bucket(ns)] += 1;
        self.total += 1;
        self.sum += u128::from(ns);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The mean of the values recorded (exact; 0 when empty).
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// The `q` quantile (0..=1): the lower bound of the bucket holding it, so within
    /// 6.25% below the true value (exact below 16). 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::lower(i);
            }
        }
        0
    }

    /// Adds `other`'s counts (e.g. to total several cores).
    pub fn merge(&mut self, other: &HoldHistogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
        self.sum += other.sum;
    }

    /// What was recorded after `earlier` (a snapshot of this histogram taken before).
    pub fn since(&self, earlier: &HoldHistogram) -> HoldHistogram {
        let mut d = self.clone();
        for (a, b) in d.counts.iter_mut().zip(earlier.counts.iter()) {
            *a = a.saturating_sub(*b);
        }
        d.total = d.total.saturating_sub(earlier.total);
        d.sum = d.sum.saturating_sub(earlier.sum);
        d
    }

    /// Forgets everything recorded (e.g. after a warm-up).
    pub fn clear(&mut self) {
        *self = HoldHistogram::default();
    }
}

impl GroStats {
    /// Units emitted for `reason`.
    pub fn flushed(&self, reason: FlushReason) -> u64 {
        self.flushes[reason.index()]
    }

    /// `(name, count)` for every reason, in counter order (for reports and JSON).
    pub fn flushes_by_name(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        FlushReason::ALL
            .iter()
            .map(|r| (r.name(), self.flushed(*r)))
    }

    /// Runs flushed to make room in a full table (or bucket).
    pub fn evictions(&self) -> u64 {
        self.flushed(FlushReason::Eviction)
    }

    /// Segments per output unit (1.0 means nothing coalesced; 0.0 before any output).
    pub fn aggregation_ratio(&self) -> f64 {
        if self.units_out == 0 {
            0.0
        } else {
            self.segments_out as f64 / self.units_out as f64
        }
    }

    /// The p50 and p99 hold times in ns, when hold times are recorded.
    pub fn hold_p50_p99(&self) -> Option<(u64, u64)> {
        self.hold_ns
            .as_ref()
            .map(|h| (h.quantile(0.5), h.quantile(0.99)))
    }

    #[inline]
    pub(crate) fn record(&mut self, reason: FlushReason, segs: u16) {
        self.units_out += 1;
        self.segments_out += u64::from(segs);
        self.flushes[reason.index()] += 1;
        self.held_segments = self.segments_in.saturating_sub(self.segments_out);
    }
}

#[cfg(test)]
mod tests {
    use super::HoldHistogram;

    #[test]
    fn hold_histogram_buckets_are_monotonic_and_bounded() {
        let mut last = 0;
        for v in (0..200_000u64).step_by(7).chain([u64::MAX / 3, u64::MAX]) {
            let b = HoldHistogram::bucket(v);
            assert!(b >= last, "{v}");
            last = b;
            let lo = HoldHistogram::lower(b);
            assert!(lo <= v, "{v} {lo}");
            assert!(v - lo <= v / 16, "{v} {lo}");
        }
    }

    #[test]
    fn hold_histogram_quantiles() {
        let mut h = HoldHistogram::default();
        assert_eq!(h.quantile(0.5), 0);
        for v in 1..=100u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count(), 100);
        let p50 = h.quantile(0.5);
        assert!((47_000..=50_000).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99);
        assert!((93_000..=99_000).contains(&p99), "{p99}");
        assert!((h.mean() - 50_500.0).abs() < 1e-6);
        let mut g = HoldHistogram::default();
        g.record(5);
        g.merge(&h);
        assert_eq!(g.count(), 101);
        assert_eq!(g.quantile(0.0), 5);
    }
}
