//! Ethernet II frames and one IEEE 802.1Q VLAN tag.
//!
//! Read first: IEEE 802.3 §3.1 (frame layout), IEEE 802.1Q §9.6 (the tag). weir accepts
//! at most one tag; the tag's TPID is 0x8100.

use super::bytes::{get16, get_arr, get_range, get_range_mut, put16, put_slice};
use super::DropReason;

/// Byte ranges of the Ethernet header.
pub mod field {
    use core::ops::Range;
    /// Destination MAC.
    pub const DST: Range<usize> = 0..6;
    /// Source MAC.
    pub const SRC: Range<usize> = 6..12;
    /// EtherType (or the 802.1Q TPID).
    pub const ETHERTYPE: Range<usize> = 12..14;
    /// First payload byte.
    pub const PAYLOAD: usize = 14;
}

/// Ethernet header length without a tag.
pub const HEADER_LEN: usize = 14;
/// Length of one 802.1Q tag.
pub const VLAN_TAG_LEN: usize = 4;
/// Shortest Ethernet frame without the FCS (IEEE 802.3 `ETH_ZLEN`): emitters pad to it.
pub const MIN_FRAME_LEN: usize = 60;
/// The broadcast MAC address.
pub const BROADCAST: [u8; 6] = [0xff; 6];

/// EtherType values weir knows.
pub mod ethertype {
    /// IPv4 (RFC 894).
    pub const IPV4: u16 = 0x0800;
    /// ARP (RFC 826).
    pub const ARP: u16 = 0x0806;
    /// IPv6 (RFC 2464).
    pub const IPV6: u16 = 0x86dd;
    /// IEEE 802.1Q VLAN tag.
    pub const VLAN: u16 = 0x8100;
}

/// `true` if `mac` has the group bit set (multicast or broadcast).
#[inline]
pub const fn is_group(mac: &[u8; 6]) -> bool {
    mac[0] & 1 != 0
}

/// A read/write view of an Ethernet II header and its payload.
///
/// After [`Frame::new_checked`] succeeds no accessor panics; the unchecked view's
/// accessors return zeros for out-of-range fields instead of panicking.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps `buffer` without checking its length.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Frame { buffer }
    }
    /// Wraps `buffer` if it holds a whole Ethernet header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, DropReason> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(DropReason::TruncatedEthernet);
        }
        Ok(Frame { buffer })
    }
    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Destination MAC.
    #[inline]
    pub fn dst_addr(&self) -> [u8; 6] {
        get_arr(self.buffer.as_ref(), field::DST.start)
    }
    /// Source MAC.
    #[inline]
    pub fn src_addr(&self) -> [u8; 6] {
        get_arr(self.buffer.as_ref(), field::SRC.start)
    }
    /// EtherType (0x8100 when a VLAN tag follows).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        get16(self.buffer.as_ref(), field::ETHERTYPE.start)
    }
    /// Everything after the 14-byte header (a VLAN tag, if any, included).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        get_range(b, field::PAYLOAD, b.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination MAC.
    pub fn set_dst_addr(&mut self, mac: [u8; 6]) {
        put_slice(self.buffer.as_mut(), field::DST.start, &mac);
    }
    /// Sets the source MAC.
    pub fn set_src_addr(&mut self, mac: [u8; 6]) {
        put_slice(self.buffer.as_mut(), field::SRC.start, &mac);
    }
    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buffer.as_mut(), field::ETHERTYPE.start, t);
    }
    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let n = b.len();
        get_range_mut(b, field::PAYLOAD, n)
    }
}

/// Byte ranges of the 802.1Q tag body (after the 0x8100 TPID).
pub mod vlan_field {
    use core::ops::Range;
    /// Tag control information: PCP (3 bits), DEI (1 bit), VID (12 bits).
    pub const TCI: Range<usize> = 0..2;
    /// The encapsulated EtherType.
    pub const ETHERTYPE: Range<usize> = 2..4;
}

/// A view of an 802.1Q tag body: the 4 bytes after the outer EtherType 0x8100.
///
/// After [`VlanTag::new_checked`] succeeds no accessor panics.
#[derive(Debug, Clone)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Wraps `buffer` without checking its length.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        VlanTag { buffer }
    }
    /// Wraps `buffer` if it holds a whole tag.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, DropReason> {
        if buffer.as_ref().len() < VLAN_TAG_LEN {
            return Err(DropReason::TruncatedVlan);
        }
        Ok(VlanTag { buffer })
    }
    /// The VLAN id (12 bits).
    #[inline]
    pub fn vid(&self) -> u16 {
        get16(self.buffer.as_ref(), vlan_field::TCI.start) & 0x0fff
    }
    /// The priority code point (3 bits).
    #[inline]
    pub fn pcp(&self) -> u8 {
        (get16(self.buffer.as_ref(), vlan_field::TCI.start) >> 13) as u8
    }
    /// The encapsulated EtherType.
    #[inline]
    pub fn ethertype(&self) -> u16 {
        get16(self.buffer.as_ref(), vlan_field::ETHERTYPE.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    /// Sets the tag control information (PCP 0, DEI 0, this VID).
    pub fn set_vid(&mut self, vid: u16) {
        put16(self.buffer.as_mut(), vlan_field::TCI.start, vid & 0x0fff);
    }
    /// Sets the encapsulated EtherType.
    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buffer.as_mut(), vlan_field::ETHERTYPE.start, t);
    }
}

/// Length of the link-layer header [`emit_header`] writes.
#[inline]
pub const fn header_len(vlan: Option<u16>) -> usize {
    match vlan {
        Some(_) => HEADER_LEN + VLAN_TAG_LEN,
        None => HEADER_LEN,
    }
}

/// Writes an Ethernet header (with one 802.1Q tag when `vlan` is set) at the start of
/// `out` and returns its length, or 0 if `out` is too short.
#[inline]
pub fn emit_header(
    out: &mut [u8],
    dst: [u8; 6],
    src: [u8; 6],
    vlan: Option<u16>,
    ethertype: u16,
) -> usize {
    let n = header_len(vlan);
    if out.len() < n {
        return 0;
    }
    let mut f = Frame::new_unchecked(&mut *out);
    f.set_dst_addr(dst);
    f.set_src_addr(src);
    match vlan {
        Some(vid) => {
            f.set_ethertype(ethertype::VLAN);
            let mut t = VlanTag::new_unchecked(f.payload_mut());
            t.set_vid(vid);
            t.set_ethertype(ethertype);
        }
        None => f.set_ethertype(ethertype),
    }
    n
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip_with_and_without_vlan() {
        let mut b = [0u8; 18];
        let n = emit_header(&mut b, [1; 6], [2; 6], None, ethertype::IPV4);
        assert_eq!(n, 14);
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(f.dst_addr(), [1; 6]);
        assert_eq!(f.src_addr(), [2; 6]);
        assert_eq!(f.ethertype(), ethertype::IPV4);

        let n = emit_header(&mut b, [1; 6], [2; 6], Some(100), ethertype::IPV6);
        assert_eq!(n, 18);
        assert_eq!(&b[12..18], &[0x81, 0x00, 0x00, 100, 0x86, 0xdd]);
        let f = Frame::new_checked(&b[..]).unwrap();
        let t = VlanTag::new_checked(f.payload()).unwrap();
        assert_eq!((t.vid(), t.pcp(), t.ethertype()), (100, 0, ethertype::IPV6));
    }

    #[test]
    fn short_buffers_are_rejected_not_panicking() {
        assert_eq!(
            Frame::new_checked(&[0u8; 13][..]).err(),
            Some(DropReason::TruncatedEthernet)
        );
        assert_eq!(
            VlanTag::new_checked(&[0u8; 3][..]).err(),
            Some(DropReason::TruncatedVlan)
        );
        let f = Frame::new_unchecked(&[0u8; 3][..]);
        assert_eq!((f.ethertype(), f.payload().len()), (0, 0));
        assert_eq!(emit_header(&mut [0u8; 17], [0; 6], [0; 6], Some(1), 0), 0);
    }
}
