//! The bytes of a request/response transaction, shared by `weir-bench rr` and its kernel
//! counterpart so that both check every answer byte for byte.
//!
//! Byte `i` of transaction `k` on connection `c` is `(7c + 13k + i) mod 251`, for the
//! request and the response alike (each over its own length). The period is prime, so a
//! byte shifted, swapped with a neighbour, or taken from another transaction or connection
//! shows as a mismatch. An echo server (request and response of one size) returns the
//! request unchanged; a fixed-size answerer writes the response of the transaction it
//! counts.

/// The period of the pattern (prime).
pub const PERIOD: u64 = 251;

/// The first byte of transaction `txn` on connection `conn`.
fn start(conn: u64, txn: u64) -> u64 {
    (conn.wrapping_mul(7) % PERIOD + txn % PERIOD * 13) % PERIOD
}

/// Writes bytes `offset..offset + out.len()` of transaction `txn` on connection `conn`.
pub fn fill(conn: u64, txn: u64, offset: usize, out: &mut [u8]) {
    let mut b = (start(conn, txn) + offset as u64 % PERIOD) % PERIOD;
    for o in out {
        *o = b as u8;
        b += 1;
        if b == PERIOD {
            b = 0;
        }
    }
}

/// Whether `got` equals bytes `offset..offset + got.len()` of transaction `txn` on
/// connection `conn`.
pub fn matches(conn: u64, txn: u64, offset: usize, got: &[u8]) -> bool {
    let mut b = (start(conn, txn) + offset as u64 % PERIOD) % PERIOD;
    for &g in got {
        if u64::from(g) != b {
            return false;
        }
        b += 1;
        if b == PERIOD {
            b = 0;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_and_match_agree_at_any_offset() {
        let mut whole = vec![0u8; 1000];
        fill(3, 77, 0, &mut whole);
        assert!(matches(3, 77, 0, &whole));
        for (off, len) in [(0, 1), (1, 250), (250, 300), (999, 1)] {
            let mut part = vec![0u8; len];
            fill(3, 77, off, &mut part);
            assert_eq!(part, whole[off..off + len]);
            assert!(matches(3, 77, off, &whole[off..off + len]));
        }
    }

    #[test]
    fn other_transactions_and_connections_do_not_match() {
        let mut a = vec![0u8; 64];
        fill(0, 0, 0, &mut a);
        assert!(!matches(0, 1, 0, &a));
        assert!(!matches(1, 0, 0, &a));
        assert!(!matches(0, 0, 1, &a));
        a.swap(10, 11);
        assert!(!matches(0, 0, 0, &a));
    }
}
