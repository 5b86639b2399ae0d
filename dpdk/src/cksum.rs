//! DPDK's software Internet checksum (`rte_raw_cksum` from `rte_ip.h`), the anchor that
//! weir's own (`stack::wire::checksum`, RFC 1071) is benchmarked against.
//!
//! `rte_raw_cksum` adds the buffer's 16-bit words in the host's byte order and folds the
//! sum: the non-complemented checksum, in host order. RFC 1071 §2(B) makes the sum
//! independent of byte order up to a swap, so on a little-endian host it is the byte-swap
//! of the big-endian sum weir computes ([`to_network_order`]).

/// `rte_raw_cksum(data)`: the folded, non-complemented sum of `data`'s 16-bit words in
/// host byte order (an odd trailing byte is padded with zero), through the wrapper bindgen
/// writes for the static inline function, compiled at -O2 with DPDK's cflags.
#[inline]
pub fn raw_cksum(data: &[u8]) -> u16 {
    // SAFETY: rte_raw_cksum reads exactly `len` bytes from `buf`, which the slice provides;
    // it writes nothing and needs no EAL.
    unsafe { dpdk_sys::rte_raw_cksum(data.as_ptr().cast(), data.len()) }
}

/// [`raw_cksum`] from a copy of `rte_raw_cksum` compiled at -O3, as DPDK's own build
/// compiles its libraries (GCC vectorises the loop there; `dpdk-sys/src/cksum_o3.c`).
#[inline]
pub fn raw_cksum_o3(data: &[u8]) -> u16 {
    // SAFETY: as in raw_cksum: the function reads `len` bytes from `buf` and nothing else.
    unsafe { dpdk_sys::weir_raw_cksum_o3(data.as_ptr().cast(), data.len()) }
}

/// A host-order sum from [`raw_cksum`] in network (big-endian) order, the order of
/// `stack::wire::checksum::fold`'s result.
#[inline]
pub fn to_network_order(host: u16) -> u16 {
    if cfg!(target_endian = "little") {
        host.swap_bytes()
    } else {
        host
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stack::wire::checksum;

    #[test]
    fn agrees_with_weir_on_every_length_and_alignment() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let data: Vec<u8> = (0..2100)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for start in 0..8 {
            for len in (0..300).chain([1448, 1449, 2047]) {
                let d = &data[start..start + len];
                let weir = checksum::fold(checksum::add(0, d));
                assert_eq!(to_network_order(raw_cksum(d)), weir, "len {len}");
                assert_eq!(to_network_order(raw_cksum_o3(d)), weir, "len {len}");
            }
        }
    }
}
