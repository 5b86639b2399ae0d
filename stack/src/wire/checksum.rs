//! The Internet checksum (RFC 1071) and the TCP pseudo-headers (RFC 9293 §3.1 for IPv4,
//! RFC 8200 §8.1 for IPv6).

/// Adds `data` to a running one's-complement sum (not yet folded). Bytes are taken as
/// big-endian 16-bit words; an odd trailing byte is padded with zero. Sums of several
/// slices must give every slice but the last an even length.
///
/// The result is below 2^33 whatever `sum` was, so a caller may add a few small values
/// (pseudo-header fields, lengths) to it with plain `+` before [`fold`]. It is zero only if
/// `sum` was zero and `data` all zeros, so [`fold`] gives exactly what adding 16-bit words
/// one by one gives (RFC 1071 §1, §2).
#[inline]
pub fn add(sum: u64, data: &[u8]) -> u64 {
    // Why the shortcuts keep the value mod 2^16 - 1, which is all a one's-complement sum
    // is (RFC 1071 §2):
    // - 2^16 ≡ 1, so a 64-bit word is congruent to the sum of its four 16-bit words, and a
    //   sum of 64-bit words needs a quarter of the additions (§2(C), "parallel summation").
    // - The words are read little-endian, as x86's loads give them, with no byte swap: the
    //   sum is then the byte-swapped sum (§2(B), byte order independence), and one swap of
    //   the total puts it right. Swapping a 16-bit value is multiplying it by 2^8 mod
    //   2^16 - 1, and since 2^16 - 1 divides 2^64 - 1, rotating the 64-bit total left by
    //   8 bits does the same.
    // - Four u128 accumulators keep four independent add-with-carry chains in flight (one
    //   would be bound by the carry flag's latency); none can overflow (2^64 additions
    //   would be needed).
    let mut acc = [0u128; 4];
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        for (a, w) in acc.iter_mut().zip(b.chunks_exact(8)) {
            *a += u128::from(le64(w));
        }
    }
    let mut total = acc[0] + acc[1] + acc[2] + acc[3];
    let mut words = blocks.remainder().chunks_exact(8);
    for w in &mut words {
        total += u128::from(le64(w));
    }
    let mut pairs = words.remainder().chunks_exact(2);
    for p in &mut pairs {
        total += u128::from(u16::from_le_bytes([p[0], p[1]]));
    }
    if let [b] = pairs.remainder() {
        // The padded word is [b, 0]: b is its high byte, the low byte of the swapped word.
        total += u128::from(*b);
    }
    let swapped = add_carry(total as u64, (total >> 64) as u64);
    let s = add_carry(sum, swapped.rotate_left(8));
    (s & 0xffff_ffff) + (s >> 32)
}

/// `a + b` with the carry out of bit 63 added back in (2^64 ≡ 1 mod 2^16 - 1). Non-zero
/// unless both are zero; cannot overflow (with a carry, the wrapped sum is below `b`).
#[inline(always)]
fn add_carry(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    s + u64::from(carry)
}

/// Eight bytes as a little-endian u64 (`w` is one of `chunks_exact(8)`: the fallback is
/// never taken).
#[inline(always)]
fn le64(w: &[u8]) -> u64 {
    <[u8; 8]>::try_from(w).map_or(0, u64::from_le_bytes)
}

/// Folds a running sum to 16 bits (not complemented).
#[inline]
pub fn fold(sum: u64) -> u16 {
    // End-around carries without a loop (a data-dependent branch per segment built):
    // 64 bits -> at most 33 -> at most 0x2fffe -> at most 0x10000 -> at most 0xffff. Each
    // step keeps the value mod 2^16 - 1 and keeps a non-zero sum non-zero, so the result
    // is the one a 16-bit fold gives.
    let s = (sum & 0xffff_ffff) + (sum >> 32);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// The checksum of `data`: the complement of its folded sum.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(add(0, data))
}

/// The unfolded sum of the IPv4 TCP/UDP pseudo-header.
#[inline]
pub fn pseudo_v4(src: [u8; 4], dst: [u8; 4], proto: u8, l4_len: u16) -> u64 {
    let mut s = add(0, &src);
    s = add(s, &dst);
    s + u64::from(proto) + u64::from(l4_len)
}

/// The unfolded sum of the IPv6 TCP/UDP pseudo-header.
#[inline]
pub fn pseudo_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, l4_len: u32) -> u64 {
    let mut s = add(0, &src);
    s = add(s, &dst);
    s + u64::from(next_header) + u64::from(l4_len >> 16) + u64::from(l4_len & 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 example: 0001 f203 f4f5 f6f7 sums to ddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(add(0, &d)), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn odd_length_and_split_sums_agree() {
        let d: Vec<u8> = (0..101u8).collect();
        let whole = fold(add(0, &d));
        let split = fold(add(add(0, &d[..40]), &d[40..]));
        assert_eq!(whole, split);
    }

    /// The RFC 1071 definition, 16 bits at a time, for comparison.
    fn naive(sum: u64, data: &[u8]) -> u16 {
        let mut s = sum;
        for w in data.chunks(2) {
            let hi = u64::from(w[0]) << 8;
            s += hi | w.get(1).map_or(0, |b| u64::from(*b));
        }
        naive_fold(s)
    }

    /// Folding by end-around carry until 16 bits are left, one step at a time.
    fn naive_fold(mut sum: u64) -> u16 {
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn fold_matches_the_step_by_step_fold() {
        let mut edges = vec![0, 1, 0xfffe, 0xffff, 0x1_0000, 0x1_fffe, 0x2_fffe, u64::MAX];
        for k in [16, 32, 33, 48, 63] {
            let p = 1u64 << k;
            edges.extend([p - 1, p, p + 1]);
        }
        edges.extend([0xffff_ffff, 0x1_ffff_fffe, 0xffff_ffff_0000_0000]);
        for s in edges {
            assert_eq!(fold(s), naive_fold(s), "sum {s:#x}");
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for s in [x, x >> 16, x >> 31, x & 0x3_ffff] {
                assert_eq!(fold(s), naive_fold(s), "sum {s:#x}");
            }
        }
    }

    #[test]
    fn wide_sum_matches_16_bit_definition() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for len in 0..300 {
            let d: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            for start in [0, 7, 0xffff, u64::from(u32::MAX)] {
                assert_eq!(fold(add(start, &d)), naive(start, &d), "len {len}");
            }
        }
        // All-ones data: many carries.
        let d = vec![0xffu8; 9000];
        assert_eq!(fold(add(0, &d)), naive(0, &d));
        assert_eq!(fold(add(0, &[0; 64])), 0);
    }

    /// RFC 1071's definition with nothing clever: big-endian 16-bit words added one by one
    /// to `start` (any u64), then end-around carries until 16 bits are left.
    fn reference(start: u64, data: &[u8]) -> u16 {
        let mut s = u128::from(start);
        for w in data.chunks(2) {
            s += u128::from(w[0]) << 8 | w.get(1).map_or(0, |b| u128::from(*b));
        }
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    proptest::proptest! {
        /// The 8-bytes-at-a-time little-endian sum folds to exactly the 16-bit definition's
        /// result, for any length (odd ones too), any alignment and any running sum; it
        /// stays below 2^33, and a slice split at an even point sums the same.
        #[test]
        fn add_matches_the_16_bit_definition(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..4200),
            offset in 0usize..64,
            start in proptest::prelude::prop_oneof![
                proptest::strategy::Just(0u64),
                proptest::num::u64::ANY,
                proptest::strategy::Just(u64::MAX),
            ],
            split in 0usize..4200,
            ones in proptest::bool::ANY,
        ) {
            // All-ones data: the most carries.
            let bytes = if ones { vec![0xff; bytes.len()] } else { bytes };
            let d = &bytes[offset.min(bytes.len())..];
            let sum = add(start, d);
            proptest::prop_assert!(sum < 1 << 33);
            proptest::prop_assert_eq!(fold(sum), reference(start, d));
            proptest::prop_assert_eq!(sum == 0, start == 0 && d.iter().all(|b| *b == 0));
            let at = (split.min(d.len())) & !1;
            proptest::prop_assert_eq!(fold(add(add(start, &d[..at]), &d[at..])), fold(sum));
        }
    }

    #[test]
    fn small_values_can_be_added_to_any_sum() {
        // A pseudo-header of all-ones addresses and the largest length: no overflow.
        let s = pseudo_v6([0xff; 16], [0xff; 16], 6, u32::MAX);
        let mut d = vec![0xff; 32];
        d.extend([0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(fold(s), reference(0, &d));
        let mut d = vec![0xff; 8];
        d.extend([0, 6, 0xff, 0xff]);
        assert_eq!(
            fold(pseudo_v4([0xff; 4], [0xff; 4], 6, u16::MAX)),
            reference(0, &d)
        );
    }

    #[test]
    fn ipv4_header_verifies_to_zero() {
        // A real IPv4 header with its checksum (0xb861) in place.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0);
    }
}
