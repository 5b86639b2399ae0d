//! IPv6 headers (RFC 8200 §3) and bounded extension-header walking (RFC 8200 §4).
//!
//! weir walks hop-by-hop options, routing, fragment and destination-options headers, at
//! most [`MAX_EXT_HEADERS`] of them, to find the upper-layer header. A chain that is too
//! long or runs past the packet is dropped with its own reason; a real fragment is dropped
//! (weir does not reassemble), an atomic fragment (RFC 8200 §4.5, RFC 6946) is walked
//! through.

use super::bytes::put_slice;
use super::bytes::{get16, get32, get8, get_arr, get_range, get_range_mut, put16, put32, put8};
use super::DropReason;

/// Byte ranges of the fixed IPv6 header (RFC 8200 §3).
pub mod field {
    use core::ops::Range;
    /// Version (4), traffic class (8), flow label (20).
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    /// Payload length (everything after the fixed header).
    pub const LENGTH: Range<usize> = 4..6;
    /// Next header.
    pub const NEXT_HEADER: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address.
    pub const SRC: Range<usize> = 8..24;
    /// Destination address.
    pub const DST: Range<usize> = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

/// Most extension headers weir walks before giving up (a hostile chain must not cost more
/// than a bounded amount of work; Linux bounds it by the packet, we also by count).
pub const MAX_EXT_HEADERS: usize = 8;

/// Extension header numbers (RFC 8200 §4).
pub mod ext {
    /// Hop-by-hop options (RFC 8200 §4.3).
    pub const HOP_BY_HOP: u8 = 0;
    /// Routing (RFC 8200 §4.4).
    pub const ROUTING: u8 = 43;
    /// Fragment (RFC 8200 §4.5).
    pub const FRAGMENT: u8 = 44;
    /// Destination options (RFC 8200 §4.6).
    pub const DEST_OPTS: u8 = 60;
}

/// `true` for a multicast address (ff00::/8, RFC 4291 §2.7): never a valid source.
#[inline]
pub const fn is_multicast(a: &[u8; 16]) -> bool {
    a[0] == 0xff
}

/// The solicited-node multicast address of `a` (ff02::1:ffXX:XXXX, RFC 4291 §2.7.1).
#[inline]
pub const fn solicited_node(a: &[u8; 16]) -> [u8; 16] {
    [
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, a[13], a[14], a[15],
    ]
}

/// The Ethernet multicast MAC for an IPv6 multicast address (33:33 + low 32 bits, RFC 2464 §7).
#[inline]
pub const fn multicast_mac(a: &[u8; 16]) -> [u8; 6] {
    [0x33, 0x33, a[12], a[13], a[14], a[15]]
}

/// A read/write view of an IPv6 packet.
///
/// After [`Packet::new_checked`] succeeds no accessor panics and `40 + payload_len() <=
/// buffer length` holds; the unchecked view's accessors return zeros or empty slices for
/// out-of-range fields instead of panicking.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    /// Wraps `buffer` (the bytes after the link-layer header, Ethernet padding allowed)
    /// after checking the version and that the payload length fits (RFC 8200 §3).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, DropReason> {
        let len = buffer.as_ref().len();
        Self::new_checked_within(buffer, len)
    }

    /// [`Packet::new_checked`] for the first part of a packet whose bytes go on beyond
    /// `buffer` (a frame of chained buffers): the header must lie in `buffer`, the payload
    /// within `len` bytes. Accessors see `buffer` only.
    #[inline]
    pub fn new_checked_within(buffer: T, len: usize) -> Result<Self, DropReason> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(DropReason::TruncatedIpv6);
        }
        let p = Packet { buffer };
        if p.version() != 6 {
            return Err(DropReason::Ipv6BadVersion);
        }
        if HEADER_LEN + usize::from(p.payload_len()) > len {
            return Err(DropReason::Ipv6PayloadLenMismatch);
        }
        Ok(p)
    }
    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// The version field (6).
    #[inline]
    pub fn version(&self) -> u8 {
        get8(self.buffer.as_ref(), 0) >> 4
    }
    /// Traffic class.
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (get32(self.buffer.as_ref(), 0) >> 20) as u8
    }
    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        get32(self.buffer.as_ref(), 0) & 0x000f_ffff
    }
    /// Payload length (extension headers included).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        get16(self.buffer.as_ref(), field::LENGTH.start)
    }
    /// Next header.
    #[inline]
    pub fn next_header(&self) -> u8 {
        get8(self.buffer.as_ref(), field::NEXT_HEADER)
    }
    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        get8(self.buffer.as_ref(), field::HOP_LIMIT)
    }
    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> [u8; 16] {
        get_arr(self.buffer.as_ref(), field::SRC.start)
    }
    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> [u8; 16] {
        get_arr(self.buffer.as_ref(), field::DST.start)
    }
    /// The payload (extension headers included, Ethernet padding excluded).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        get_range(
            self.buffer.as_ref(),
            HEADER_LEN,
            HEADER_LEN + usize::from(self.payload_len()),
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version 6, the traffic class and the flow label.
    pub fn set_version_tc_flow(&mut self, tc: u8, flow_label: u32) {
        let v = (6u32 << 28) | (u32::from(tc) << 20) | (flow_label & 0x000f_ffff);
        put32(self.buffer.as_mut(), 0, v);
    }
    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH.start, v);
    }
    /// Sets the next header.
    pub fn set_next_header(&mut self, v: u8) {
        put8(self.buffer.as_mut(), field::NEXT_HEADER, v);
    }
    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        put8(self.buffer.as_mut(), field::HOP_LIMIT, v);
    }
    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: [u8; 16]) {
        put_slice(self.buffer.as_mut(), field::SRC.start, &a);
    }
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: [u8; 16]) {
        put_slice(self.buffer.as_mut(), field::DST.start, &a);
    }
    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        get_range_mut(self.buffer.as_mut(), HEADER_LEN, end)
    }
}

/// Where the upper-layer header starts after the extension headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtWalk {
    /// The upper-layer protocol number (the last next-header value).
    pub protocol: u8,
    /// Offset of the upper-layer header within the IPv6 payload.
    pub offset: usize,
    /// Number of extension headers walked.
    pub count: u8,
}

/// Walks the extension headers at the start of `payload` (the IPv6 payload), starting
/// with `next_header` from the fixed header. Bounded: at most [`MAX_EXT_HEADERS`] headers
/// and never past `payload`.
///
/// Drops: a fragment that is not atomic ([`DropReason::Ipv6Fragment`]), hop-by-hop
/// anywhere but first (RFC 8200 §4.1, [`DropReason::Ipv6HopByHopNotFirst`]), fewer than 8
/// bytes left for a header ([`DropReason::TruncatedIpv6ExtHeader`]), a header whose length
/// runs past the payload ([`DropReason::Ipv6ExtChainPastPacket`]), more than
/// [`MAX_EXT_HEADERS`] headers ([`DropReason::Ipv6ExtChainTooLong`]).
#[inline]
pub fn walk_ext_headers(payload: &[u8], next_header: u8) -> Result<ExtWalk, DropReason> {
    let mut nh = next_header;
    let mut off = 0usize;
    let mut count = 0u8;
    loop {
        let len = match nh {
            ext::HOP_BY_HOP | ext::ROUTING | ext::DEST_OPTS | ext::FRAGMENT => {
                if usize::from(count) == MAX_EXT_HEADERS {
                    return Err(DropReason::Ipv6ExtChainTooLong);
                }
                if nh == ext::HOP_BY_HOP && count != 0 {
                    return Err(DropReason::Ipv6HopByHopNotFirst);
                }
                // Every extension header is at least 8 bytes (RFC 8200 §4).
                let h = payload
                    .get(off..off + 8)
                    .ok_or(DropReason::TruncatedIpv6ExtHeader)?;
                let len = if nh == ext::FRAGMENT {
                    // Fragment offset (13 bits) and M flag (RFC 8200 §4.5).
                    let fo = get16(h, 2);
                    if fo & 0xfff9 != 0 {
                        return Err(DropReason::Ipv6Fragment);
                    }
                    8
                } else {
                    // Hdr Ext Len: 8-octet units, not counting the first 8 octets.
                    (usize::from(get8(h, 1)) + 1) * 8
                };
                if off + len > payload.len() {
                    return Err(DropReason::Ipv6ExtChainPastPacket);
                }
                nh = get8(h, 0);
                len
            }
            _ => {
                return Ok(ExtWalk {
                    protocol: nh,
                    offset: off,
                    count,
                })
            }
        };
        off += len;
        count += 1;
    }
}

/// Writes a 40-byte IPv6 header into `out`. Returns 40, or 0 if `out` is too short.
#[inline]
pub fn emit_header(
    out: &mut [u8],
    src: [u8; 16],
    dst: [u8; 16],
    next_header: u8,
    payload_len: u16,
    hop_limit: u8,
) -> usize {
    if out.len() < HEADER_LEN {
        return 0;
    }
    let mut p = Packet::new_unchecked(&mut *out);
    p.set_version_tc_flow(0, 0);
    p.set_payload_len(payload_len);
    p.set_next_header(next_header);
    p.set_hop_limit(hop_limit);
    p.set_src_addr(src);
    p.set_dst_addr(dst);
    HEADER_LEN
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    fn ext_hdr(nh: u8, units: u8) -> Vec<u8> {
        let mut v = vec![0u8; (usize::from(units) + 1) * 8];
        v[0] = nh;
        v[1] = units;
        v
    }

    #[test]
    fn header_roundtrip() {
        let mut b = [0u8; 48];
        emit_header(&mut b, [1; 16], [2; 16], 6, 8, 64);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.version(), p.payload_len(), p.next_header()), (6, 8, 6));
        assert_eq!(
            (p.src_addr(), p.dst_addr(), p.hop_limit()),
            ([1; 16], [2; 16], 64)
        );
        assert_eq!(p.payload().len(), 8);
        assert_eq!(
            Packet::new_checked(&b[..47]).err(),
            Some(DropReason::Ipv6PayloadLenMismatch)
        );
        assert_eq!(
            Packet::new_checked(&b[..39]).err(),
            Some(DropReason::TruncatedIpv6)
        );
    }

    #[test]
    fn walks_chain_rfc8200_s4() {
        let mut p = ext_hdr(ext::ROUTING, 0);
        p.extend(ext_hdr(ext::DEST_OPTS, 1));
        p.extend(ext_hdr(6, 0));
        p.extend([0u8; 20]);
        let w = walk_ext_headers(&p, ext::HOP_BY_HOP).unwrap();
        assert_eq!(
            w,
            ExtWalk {
                protocol: 6,
                offset: 8 + 16 + 8,
                count: 3
            }
        );
        assert_eq!(walk_ext_headers(&p, 6).unwrap().offset, 0);
    }

    #[test]
    fn chain_errors() {
        // Too long: 9 destination-options headers.
        let mut p = Vec::new();
        for _ in 0..9 {
            p.extend(ext_hdr(ext::DEST_OPTS, 0));
        }
        assert_eq!(
            walk_ext_headers(&p, ext::DEST_OPTS),
            Err(DropReason::Ipv6ExtChainTooLong)
        );
        // Runs past the packet.
        let p = ext_hdr(6, 3);
        assert_eq!(
            walk_ext_headers(&p[..16], ext::ROUTING),
            Err(DropReason::Ipv6ExtChainPastPacket)
        );
        assert_eq!(
            walk_ext_headers(&p[..7], ext::ROUTING),
            Err(DropReason::TruncatedIpv6ExtHeader)
        );
        // Hop-by-hop second.
        let mut p = ext_hdr(ext::HOP_BY_HOP, 0);
        p.extend(ext_hdr(6, 0));
        assert_eq!(
            walk_ext_headers(&p, ext::ROUTING),
            Err(DropReason::Ipv6HopByHopNotFirst)
        );
        // A real fragment vs an atomic one.
        let mut f = ext_hdr(6, 0);
        f[3] = 1; // M flag
        assert_eq!(
            walk_ext_headers(&f, ext::FRAGMENT),
            Err(DropReason::Ipv6Fragment)
        );
        f[3] = 0;
        assert_eq!(walk_ext_headers(&f, ext::FRAGMENT).unwrap().offset, 8);
    }
}
