//! Busy time of a poll loop that reads the clock once per iteration (weir-sink's and
//! weir-gen's): an iteration that did something counts from its start to the start of the
//! next one, so no second clock read is needed (`rdtsc` costs ~20 ns in a VM).

/// The start of the last iteration that did something, not yet counted.
#[derive(Debug, Default)]
pub struct BusySpan {
    since: Option<u64>,
}

impl BusySpan {
    /// Call at the top of every iteration with the cycle count read there (and once after
    /// the loop with a fresh one): the cycles of the iteration before if it was busy,
    /// else 0.
    #[inline]
    pub fn close(&mut self, t0: u64) -> u64 {
        self.since.take().map_or(0, |s| t0.wrapping_sub(s))
    }

    /// The iteration that started at `t0` did something.
    #[inline]
    pub fn busy(&mut self, t0: u64) {
        self.since = Some(t0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_busy_iterations_count_up_to_the_next_start() {
        let mut b = BusySpan::default();
        assert_eq!(b.close(100), 0, "nothing before the first iteration");
        b.busy(100);
        assert_eq!(b.close(130), 30);
        assert_eq!(b.close(150), 0, "the iteration at 130 was idle");
        b.busy(150);
        assert_eq!(b.close(u64::MAX), u64::MAX - 150);
    }
}
