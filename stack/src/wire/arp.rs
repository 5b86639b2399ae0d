//! ARP for IPv4 over Ethernet (RFC 826).
//!
//! weir answers requests for its own address so a peer can resolve it; it never sends
//! requests itself (it replies to the MAC each segment arrived from).

use super::bytes::{get16, get8, get_arr, put16, put8, put_slice};
use core::net::Ipv4Addr;

use super::DropReason;

/// Byte ranges of an Ethernet/IPv4 ARP packet (RFC 826 "Packet format").
pub mod field {
    use core::ops::Range;
    /// Hardware type (1 = Ethernet).
    pub const HTYPE: Range<usize> = 0..2;
    /// Protocol type (0x0800 = IPv4).
    pub const PTYPE: Range<usize> = 2..4;
    /// Hardware address length (6).
    pub const HLEN: usize = 4;
    /// Protocol address length (4).
    pub const PLEN: usize = 5;
    /// Operation (1 request, 2 reply).
    pub const OPER: Range<usize> = 6..8;
    /// Sender hardware address.
    pub const SHA: Range<usize> = 8..14;
    /// Sender protocol address.
    pub const SPA: Range<usize> = 14..18;
    /// Target hardware address.
    pub const THA: Range<usize> = 18..24;
    /// Target protocol address.
    pub const TPA: Range<usize> = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;
/// ARP operation: request.
pub const OP_REQUEST: u16 = 1;
/// ARP operation: reply.
pub const OP_REPLY: u16 = 2;
/// Hardware type Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;

/// A read/write view of an ARP packet.
///
/// After [`Packet::new_checked`] succeeds no accessor panics; the unchecked view's
/// accessors return zeros for out-of-range fields instead of panicking.
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
    /// Wraps `buffer` if it holds a whole Ethernet/IPv4-sized ARP packet.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, DropReason> {
        if buffer.as_ref().len() < PACKET_LEN {
            return Err(DropReason::TruncatedArp);
        }
        Ok(Packet { buffer })
    }
    /// Hardware type.
    #[inline]
    pub fn hardware_type(&self) -> u16 {
        get16(self.buffer.as_ref(), field::HTYPE.start)
    }
    /// Protocol type.
    #[inline]
    pub fn protocol_type(&self) -> u16 {
        get16(self.buffer.as_ref(), field::PTYPE.start)
    }
    /// Hardware address length.
    #[inline]
    pub fn hardware_len(&self) -> u8 {
        get8(self.buffer.as_ref(), field::HLEN)
    }
    /// Protocol address length.
    #[inline]
    pub fn protocol_len(&self) -> u8 {
        get8(self.buffer.as_ref(), field::PLEN)
    }
    /// `true` for Ethernet hardware addresses and IPv4 protocol addresses, the only kind
    /// weir handles.
    #[inline]
    pub fn is_ethernet_ipv4(&self) -> bool {
        self.hardware_type() == HTYPE_ETHERNET
            && self.protocol_type() == super::ethernet::ethertype::IPV4
            && self.hardware_len() == 6
            && self.protocol_len() == 4
    }
    /// Operation.
    #[inline]
    pub fn operation(&self) -> u16 {
        get16(self.buffer.as_ref(), field::OPER.start)
    }
    /// Sender hardware address.
    #[inline]
    pub fn sender_mac(&self) -> [u8; 6] {
        get_arr(self.buffer.as_ref(), field::SHA.start)
    }
    /// Sender protocol address.
    #[inline]
    pub fn sender_ip(&self) -> [u8; 4] {
        get_arr(self.buffer.as_ref(), field::SPA.start)
    }
    /// Target hardware address.
    #[inline]
    pub fn target_mac(&self) -> [u8; 6] {
        get_arr(self.buffer.as_ref(), field::THA.start)
    }
    /// Target protocol address.
    #[inline]
    pub fn target_ip(&self) -> [u8; 4] {
        get_arr(self.buffer.as_ref(), field::TPA.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets hardware type, protocol type and lengths for Ethernet/IPv4.
    pub fn set_ethernet_ipv4(&mut self) {
        let b = self.buffer.as_mut();
        put16(b, field::HTYPE.start, HTYPE_ETHERNET);
        put16(b, field::PTYPE.start, super::ethernet::ethertype::IPV4);
        put8(b, field::HLEN, 6);
        put8(b, field::PLEN, 4);
    }
    /// Sets the operation.
    pub fn set_operation(&mut self, op: u16) {
        put16(self.buffer.as_mut(), field::OPER.start, op);
    }
    /// Sets the sender addresses.
    pub fn set_sender(&mut self, mac: [u8; 6], ip: [u8; 4]) {
        put_slice(self.buffer.as_mut(), field::SHA.start, &mac);
        put_slice(self.buffer.as_mut(), field::SPA.start, &ip);
    }
    /// Sets the target addresses.
    pub fn set_target(&mut self, mac: [u8; 6], ip: [u8; 4]) {
        put_slice(self.buffer.as_mut(), field::THA.start, &mac);
        put_slice(self.buffer.as_mut(), field::TPA.start, &ip);
    }
}

/// An Ethernet/IPv4 ARP packet in high-level form (RFC 826).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Operation ([`OP_REQUEST`] or [`OP_REPLY`]).
    pub operation: u16,
    /// Sender hardware address.
    pub sender_mac: [u8; 6],
    /// Sender protocol address.
    pub sender_ip: Ipv4Addr,
    /// Target hardware address.
    pub target_mac: [u8; 6],
    /// Target protocol address.
    pub target_ip: Ipv4Addr,
}

impl Repr {
    /// Reads a checked packet; anything but Ethernet/IPv4 is
    /// [`DropReason::ArpUnsupported`].
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr, DropReason> {
        if !p.is_ethernet_ipv4() {
            return Err(DropReason::ArpUnsupported);
        }
        Ok(Repr {
            operation: p.operation(),
            sender_mac: p.sender_mac(),
            sender_ip: Ipv4Addr::from(p.sender_ip()),
            target_mac: p.target_mac(),
            target_ip: Ipv4Addr::from(p.target_ip()),
        })
    }

    /// Writes the packet into `p` ([`PACKET_LEN`] bytes; nothing is written past a shorter
    /// buffer).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_ethernet_ipv4();
        p.set_operation(self.operation);
        p.set_sender(self.sender_mac, self.sender_ip.octets());
        p.set_target(self.target_mac, self.target_ip.octets());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn real_request_rfc826() {
        // who-has 198.18.0.1 tell 198.18.0.2, from 02:00:00:00:00:02.
        let b = [
            0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0, 0, 0, 0, 0x02, 198, 18, 0, 2,
            0, 0, 0, 0, 0, 0, 198, 18, 0, 1,
        ];
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.is_ethernet_ipv4());
        assert_eq!(p.operation(), OP_REQUEST);
        assert_eq!(p.sender_mac(), [2, 0, 0, 0, 0, 2]);
        assert_eq!(p.sender_ip(), [198, 18, 0, 2]);
        assert_eq!(p.target_ip(), [198, 18, 0, 1]);
        assert_eq!(p.target_mac(), [0; 6]);
        assert_eq!(
            Packet::new_checked(&b[..27]).err(),
            Some(DropReason::TruncatedArp)
        );
        let mut c = [0u8; 28];
        let mut q = Packet::new_unchecked(&mut c[..]);
        q.set_ethernet_ipv4();
        q.set_operation(OP_REQUEST);
        q.set_sender([2, 0, 0, 0, 0, 2], [198, 18, 0, 2]);
        q.set_target([0; 6], [198, 18, 0, 1]);
        assert_eq!(c, b);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.sender_ip, Ipv4Addr::new(198, 18, 0, 2));
        let mut d = [0u8; 28];
        r.emit(&mut Packet::new_unchecked(&mut d[..]));
        assert_eq!(d, b);
    }
}
