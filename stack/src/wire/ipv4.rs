//! IPv4 headers (RFC 791 §3.1).
//!
//! [`Packet::new_checked`] validates everything structural (version, IHL, total length
//! against the buffer) so that later stages can trust the lengths; checksum and
//! fragmentation checks are separate because the NIC may already have done the first.

use super::bytes::{get16, get8, get_arr, get_range, get_range_mut, put16, put8, put_slice};
use super::{checksum, DropReason};

/// Byte ranges of the IPv4 header (RFC 791 §3.1).
pub mod field {
    use core::ops::Range;
    /// Version (4 bits) and IHL (4 bits, in 32-bit words).
    pub const VER_IHL: usize = 0;
    /// Type of service: DSCP and ECN (RFC 2474, RFC 3168).
    pub const TOS: usize = 1;
    /// Total length of header and payload.
    pub const LENGTH: Range<usize> = 2..4;
    /// Identification.
    pub const IDENT: Range<usize> = 4..6;
    /// Flags (3 bits) and fragment offset (13 bits, in 8-byte units).
    pub const FLG_OFF: Range<usize> = 6..8;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol of the payload.
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: Range<usize> = 10..12;
    /// Source address.
    pub const SRC: Range<usize> = 12..16;
    /// Destination address.
    pub const DST: Range<usize> = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;

/// IP protocol numbers weir knows (IANA "Assigned Internet Protocol Numbers").
pub mod protocol {
    /// ICMP (RFC 792).
    pub const ICMP: u8 = 1;
    /// TCP (RFC 9293).
    pub const TCP: u8 = 6;
    /// UDP (RFC 768).
    pub const UDP: u8 = 17;
    /// ICMPv6 (RFC 4443).
    pub const ICMPV6: u8 = 58;
}

pub(crate) const FLAG_DF: u16 = 0x4000;
pub(crate) const FLAG_MF: u16 = 0x2000;

/// `true` for a multicast (224.0.0.0/4), reserved (240.0.0.0/4) or limited broadcast
/// (255.255.255.255, inside 240/4) address: never a valid source (RFC 1122 §3.2.1.3;
/// RFC 9293 §3.10.7.2 ignores SYNs from them).
#[inline]
pub const fn is_multicast_or_broadcast(a: [u8; 4]) -> bool {
    a[0] >= 224
}

/// A read/write view of an IPv4 packet.
///
/// After [`Packet::new_checked`] succeeds no accessor panics, and `header_len() <=
/// total_len() <= buffer length` holds; the unchecked view's accessors return zeros or
/// empty slices for out-of-range fields instead of panicking.
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
    /// after checking version, IHL and total length (RFC 791 §3.1, RFC 1122 §3.2.1.1-2).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, DropReason> {
        let len = buffer.as_ref().len();
        Self::new_checked_within(buffer, len)
    }

    /// [`Packet::new_checked`] for the first part of a packet whose bytes go on beyond
    /// `buffer` (a frame of chained buffers): the header must lie in `buffer`, the total
    /// length within `len` bytes. Accessors see `buffer` only ([`Packet::payload`] is
    /// then empty when the packet runs past it).
    #[inline]
    pub fn new_checked_within(buffer: T, len: usize) -> Result<Self, DropReason> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(DropReason::TruncatedIpv4);
        }
        let p = Packet { buffer };
        if p.version() != 4 {
            return Err(DropReason::Ipv4BadVersion);
        }
        let hl = p.header_len();
        if hl < HEADER_LEN {
            return Err(DropReason::Ipv4IhlTooSmall);
        }
        if hl > p.buffer.as_ref().len() {
            return Err(DropReason::Ipv4IhlPastPacket);
        }
        let tl = usize::from(p.total_len());
        if tl < hl {
            return Err(DropReason::Ipv4TotalLenTooSmall);
        }
        if tl > len {
            return Err(DropReason::Ipv4TotalLenPastFrame);
        }
        Ok(p)
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// The version field (4 for IPv4).
    #[inline]
    pub fn version(&self) -> u8 {
        get8(self.buffer.as_ref(), field::VER_IHL) >> 4
    }
    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(get8(self.buffer.as_ref(), field::VER_IHL) & 0x0f) * 4
    }
    /// The TOS byte (DSCP and ECN).
    #[inline]
    pub fn tos(&self) -> u8 {
        get8(self.buffer.as_ref(), field::TOS)
    }
    /// Total length of header and payload.
    #[inline]
    pub fn total_len(&self) -> u16 {
        get16(self.buffer.as_ref(), field::LENGTH.start)
    }
    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        get16(self.buffer.as_ref(), field::IDENT.start)
    }
    /// Don't-fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        get16(self.buffer.as_ref(), field::FLG_OFF.start) & FLAG_DF != 0
    }
    /// More-fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        get16(self.buffer.as_ref(), field::FLG_OFF.start) & FLAG_MF != 0
    }
    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (get16(self.buffer.as_ref(), field::FLG_OFF.start) & 0x1fff) << 3
    }
    /// `true` if this is a fragment (MF set or a non-zero offset; RFC 791 §2.3).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        get16(self.buffer.as_ref(), field::FLG_OFF.start) & (FLAG_MF | 0x1fff) != 0
    }
    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        get8(self.buffer.as_ref(), field::TTL)
    }
    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> u8 {
        get8(self.buffer.as_ref(), field::PROTOCOL)
    }
    /// The header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get16(self.buffer.as_ref(), field::CHECKSUM.start)
    }
    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> [u8; 4] {
        get_arr(self.buffer.as_ref(), field::SRC.start)
    }
    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> [u8; 4] {
        get_arr(self.buffer.as_ref(), field::DST.start)
    }
    /// The whole header, options included.
    #[inline]
    pub fn header(&self) -> &[u8] {
        get_range(self.buffer.as_ref(), 0, self.header_len())
    }
    /// The option bytes (empty when IHL is 5).
    #[inline]
    pub fn options(&self) -> &[u8] {
        get_range(self.buffer.as_ref(), HEADER_LEN, self.header_len())
    }
    /// The payload: from the end of the header to `total_len` (Ethernet padding excluded).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        get_range(
            self.buffer.as_ref(),
            self.header_len(),
            usize::from(self.total_len()),
        )
    }
    /// `true` if the header checksum verifies (RFC 791 §3.1, RFC 1071).
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(self.header()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version 4 and the header length in bytes (a multiple of 4, 20..=60).
    pub fn set_version_and_header_len(&mut self, len: usize) {
        put8(
            self.buffer.as_mut(),
            field::VER_IHL,
            0x40 | ((len / 4) as u8 & 0x0f),
        );
    }
    /// Sets the TOS byte.
    pub fn set_tos(&mut self, v: u8) {
        put8(self.buffer.as_mut(), field::TOS, v);
    }
    /// Sets the total length.
    pub fn set_total_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH.start, v);
    }
    /// Sets the identification.
    pub fn set_ident(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::IDENT.start, v);
    }
    /// Sets the flags and fragment offset field verbatim.
    pub fn set_flags_and_frag(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::FLG_OFF.start, v);
    }
    /// Sets DF with no fragmentation (offset 0, MF clear).
    pub fn set_dont_frag(&mut self) {
        self.set_flags_and_frag(FLAG_DF);
    }
    /// Sets the TTL.
    pub fn set_ttl(&mut self, v: u8) {
        put8(self.buffer.as_mut(), field::TTL, v);
    }
    /// Sets the protocol.
    pub fn set_protocol(&mut self, v: u8) {
        put8(self.buffer.as_mut(), field::PROTOCOL, v);
    }
    /// Sets the checksum field verbatim.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }
    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: [u8; 4]) {
        put_slice(self.buffer.as_mut(), field::SRC.start, &a);
    }
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: [u8; 4]) {
        put_slice(self.buffer.as_mut(), field::DST.start, &a);
    }
    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.header());
        self.set_checksum(c);
    }
    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), usize::from(self.total_len()));
        get_range_mut(self.buffer.as_mut(), hl, tl)
    }
}

/// Writes a 20-byte IPv4 header (DF set, no options) and its checksum into `out`.
/// Returns 20, or 0 if `out` is too short.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn emit_header(
    out: &mut [u8],
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    payload_len: u16,
    ttl: u8,
    ident: u16,
    tos: u8,
) -> usize {
    if out.len() < HEADER_LEN {
        return 0;
    }
    let mut p = Packet::new_unchecked(&mut out[..HEADER_LEN]);
    p.set_version_and_header_len(HEADER_LEN);
    p.set_tos(tos);
    p.set_total_len(payload_len.saturating_add(HEADER_LEN as u16));
    p.set_ident(ident);
    p.set_dont_frag();
    p.set_ttl(ttl);
    p.set_protocol(proto);
    p.set_src_addr(src);
    p.set_dst_addr(dst);
    p.fill_checksum();
    HEADER_LEN
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    // A real IPv4/UDP header (from checksum.rs's test) with 0x73 - 20 payload bytes.
    fn sample() -> Vec<u8> {
        let mut v = vec![
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        v.resize(0x73 + 6, 0xaa); // 6 bytes of trailing padding
        v
    }

    #[test]
    fn parses_real_header() {
        let b = sample();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 0x73);
        assert!(p.dont_frag() && !p.is_fragment());
        assert_eq!(p.protocol(), protocol::UDP);
        assert_eq!(p.src_addr(), [192, 168, 0, 1]);
        assert_eq!(p.dst_addr(), [192, 168, 0, 199]);
        assert_eq!(p.payload().len(), 0x73 - 20, "padding excluded");
    }

    #[test]
    fn emit_then_parse() {
        let mut b = [0u8; 40];
        assert_eq!(
            emit_header(&mut b, [10, 0, 0, 1], [10, 0, 0, 2], 6, 20, 64, 7, 0),
            20
        );
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!((p.ttl(), p.ident(), p.total_len()), (64, 7, 40));
    }

    #[test]
    fn structural_errors_rfc791() {
        let good = sample();
        let mut b = good.clone();
        b[0] = 0x65;
        assert_eq!(
            Packet::new_checked(&b[..]).err(),
            Some(DropReason::Ipv4BadVersion)
        );
        b[0] = 0x44;
        assert_eq!(
            Packet::new_checked(&b[..]).err(),
            Some(DropReason::Ipv4IhlTooSmall)
        );
        assert_eq!(
            Packet::new_checked(&good[..19]).err(),
            Some(DropReason::TruncatedIpv4)
        );
        let mut b = good.clone();
        b[0] = 0x4f;
        assert_eq!(
            Packet::new_checked(&b[..40]).err(),
            Some(DropReason::Ipv4IhlPastPacket)
        );
        let mut b = good.clone();
        b[3] = 19;
        b[2] = 0;
        assert_eq!(
            Packet::new_checked(&b[..]).err(),
            Some(DropReason::Ipv4TotalLenTooSmall)
        );
        assert_eq!(
            Packet::new_checked(&good[..0x72]).err(),
            Some(DropReason::Ipv4TotalLenPastFrame)
        );
    }
}
