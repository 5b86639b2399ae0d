//! The Internet checksum (RFC 1071) and the TCP pseudo-headers (RFC 9293 §3.1 for IPv4,
//! RFC 8200 §8.1 for IPv6).

/// Adds `data` to a running one's-complement sum (not yet folded). Bytes are taken as
/// big-endian 16-bit words; an odd trailing byte is padded with zero. Sums of several
/// slices must give every slice but the last an even length.
#[inline]
pub fn add(mut sum: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        // Four 16-bit words at once; u64 accumulation cannot overflow for any frame size.
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        sum += (w >> 48) + ((w >> 32) & 0xffff) + ((w >> 16) & 0xffff) + (w & 0xffff);
    }
    let mut words = chunks.remainder().chunks_exact(2);
    for w in &mut words {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [b] = words.remainder() {
        sum += u64::from(*b) << 8;
    }
    sum
}

/// Folds a running sum to 16 bits (not complemented).
#[inline]
pub fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
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
