//! The Internet checksum (RFC 1071) and the TCP pseudo-headers (RFC 9293 §3.1 for IPv4,
//! RFC 8200 §8.1 for IPv6).

/// Adds `data` to a running one's-complement sum (not yet folded). Bytes are taken as
/// big-endian 16-bit words; an odd trailing byte is padded with zero. Sums of several
/// slices must give every slice but the last an even length.
#[inline]
pub fn add(sum: u64, data: &[u8]) -> u64 {
    // Eight bytes at a time as one big-endian u64: since 2^16 ≡ 1 (mod 2^16 - 1), a
    // 64-bit word is congruent to the sum of its four 16-bit words (RFC 1071 §2), so the
    // folded result is the same as adding 16-bit words, at a quarter of the additions.
    // A u128 accumulator cannot overflow for any frame (2^64 words would be needed).
    let mut acc = u128::from(sum);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        acc += u128::from(u64::from_be_bytes([
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
        ]));
    }
    let mut words = chunks.remainder().chunks_exact(2);
    for w in &mut words {
        acc += u128::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [b] = words.remainder() {
        acc += u128::from(*b) << 8;
    }
    // Back to u64 without changing the value mod 2^16 - 1 (2^64 ≡ 1): the low half is
    // folded to 16 bits first so the sum cannot overflow. Zero stays zero only for an
    // all-zero input, as with 16-bit addition.
    let (lo, hi) = (acc as u64, (acc >> 64) as u64);
    if hi == 0 {
        lo
    } else {
        u64::from(fold(lo)) + hi
    }
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
