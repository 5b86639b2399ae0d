//! GRO's counters: segments in, units out, and every output unit counted by why it left.

/// Why GRO emitted an output unit. Every unit is counted under exactly one reason, so the
/// counts sum to [`GroStats::units_out`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushReason {
    /// The run was held for `flush_ns` (counted from its first segment).
    Timer,
    /// The run reached the byte limit (`max_bytes`, 64 KiB by default) or the segment cap
    /// (`max_segs`), or the next segment would have passed the byte limit.
    Size,
    /// The run's last segment ended it: PSH, FIN, or shorter than the run's `gso_size`
    /// (Linux `tcp_gro_receive`, `out_check_final`). Includes such a segment arriving with
    /// no run held (a run of one).
    Flags,
    /// The flow's next segment could not join the run: out of order, a retransmission or
    /// overlap, a header field that differs (MACs, ACK, window, options, TSval falling,
    /// TTL, TOS, DF, IP ID, flow label), a payload larger than `gso_size`, or a segment that is never
    /// merged. The run is flushed ahead of that segment, so order is kept.
    Gap,
    /// `end_of_burst` with `flush_ns = 0` (NAPI without `gro_flush_timeout`).
    BurstEnd,
    /// The table (or the run's hash bucket) was full and this was the oldest run in it.
    Eviction,
    /// A segment that is never merged (CWR, SYN, RST, URG, IP options, no payload), passed
    /// on as a run of one without being held.
    Passthrough,
    /// `flush_all` (shutdown, or the driver draining the stage).
    Shutdown,
}

impl FlushReason {
    /// Number of reasons (the length of [`GroStats::flushes`]).
    pub const COUNT: usize = 8;

    /// Every reason, in counter order.
    pub const ALL: [FlushReason; FlushReason::COUNT] = [
        FlushReason::Timer,
        FlushReason::Size,
        FlushReason::Flags,
        FlushReason::Gap,
        FlushReason::BurstEnd,
        FlushReason::Eviction,
        FlushReason::Passthrough,
        FlushReason::Shutdown,
    ];

    /// The snake_case name used as a JSON key and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            FlushReason::Timer => "timer",
            FlushReason::Size => "size",
            FlushReason::Flags => "flags",
            FlushReason::Gap => "gap",
            FlushReason::BurstEnd => "burst_end",
            FlushReason::Eviction => "eviction",
            FlushReason::Passthrough => "passthrough",
            FlushReason::Shutdown => "shutdown",
        }
    }

    /// The index of this reason in [`GroStats::flushes`].
    pub const fn index(self) -> usize {
        self as usize
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

    #[inline]
    pub(crate) fn record(&mut self, reason: FlushReason, segs: u16) {
        self.units_out += 1;
        self.segments_out += u64::from(segs);
        self.flushes[reason.index()] += 1;
        self.held_segments = self.segments_in.saturating_sub(self.segments_out);
    }
}
