//! TCP sequence numbers with modular (RFC 9293 §3.4, RFC 1982) comparison.
//!
//! No bare `u32` arithmetic on sequence numbers anywhere in the stack: everything goes
//! through [`SeqNumber`], whose ordering is "less than" in the 2^31 window around each
//! value, so comparisons are correct across the 2^32 wrap.

use core::cmp::Ordering;
use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A TCP sequence (or acknowledgment) number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    /// The raw 32-bit value as carried on the wire.
    pub const fn get(self) -> u32 {
        self.0
    }
    /// The larger of two sequence numbers in modular order.
    pub fn max(self, other: SeqNumber) -> SeqNumber {
        if self < other {
            other
        } else {
            self
        }
    }
    /// The smaller of two sequence numbers in modular order.
    pub fn min(self, other: SeqNumber) -> SeqNumber {
        if self < other {
            self
        } else {
            other
        }
    }
    /// `true` if `self` lies in `[start, end)` in modular order.
    pub fn in_range(self, start: SeqNumber, end: SeqNumber) -> bool {
        (self - start) < (end - start)
    }
}

impl Add<usize> for SeqNumber {
    type Output = SeqNumber;
    /// Adds a byte count; wraps modulo 2^32 as sequence space does.
    fn add(self, n: usize) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(n as u32))
    }
}

impl AddAssign<usize> for SeqNumber {
    fn add_assign(&mut self, n: usize) {
        *self = *self + n;
    }
}

impl Sub for SeqNumber {
    type Output = usize;
    /// The forward distance from `rhs` to `self` modulo 2^32 (0..2^32). Callers compare
    /// first when the order is not known.
    fn sub(self, rhs: SeqNumber) -> usize {
        self.0.wrapping_sub(rhs.0) as usize
    }
}

impl PartialOrd for SeqNumber {
    fn partial_cmp(&self, other: &SeqNumber) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SeqNumber {
    /// Modular order: `a < b` iff `(b - a) mod 2^32` is in `1..2^31`. Not a total order
    /// over all of `u32` (it is not transitive across more than half the space), which is
    /// the standard and intended meaning for sequence numbers within one window.
    fn cmp(&self, other: &SeqNumber) -> Ordering {
        (self.0.wrapping_sub(other.0) as i32).cmp(&0)
    }
}

impl fmt::Debug for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq({})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_around_2_pow_32() {
        let a = SeqNumber(u32::MAX - 10);
        let b = a + 20;
        assert_eq!(b.get(), 9);
        assert!(a < b);
        assert_eq!(b - a, 20);
        assert!(SeqNumber(5).in_range(a, b));
        assert!(!SeqNumber(9).in_range(a, b));
        assert_eq!(a.max(b), b);
    }
}
