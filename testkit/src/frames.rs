//! Frames as a peer sends them to weir: the addresses, TCP segments built with
//! [`TcpFrame`] (from one [`Peer`] of many, or the reference segments [`seg4`] and
//! [`seg6`]), ARP/ICMP/ND requests, byte-level edits with checksum repair, and the peer's
//! view of what weir transmits ([`peer_view`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use stack::buf::{ChecksumStatus, RxChecksum};
use stack::flow::{FlowKey, NO_VLAN};
use stack::seq::SeqNumber;
use stack::wire::ethernet::{self, ethertype};
use stack::wire::ipv4::{self, protocol};
use stack::wire::{arp, checksum, icmp, ipv6, tcp};
use stack::wire::{parse, LocalAddrs, Parsed, TcpFlags, TcpFrame, TcpMeta, TcpOptions, Timestamp};

/// weir's MAC address.
pub const OUR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// Every peer's MAC address.
pub const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// weir's IPv4 address.
pub const OUR_IP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// weir's IPv6 address.
pub const OUR_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
/// The IPv4 address of the one peer in single-peer tests (the Linux capture in the parse
/// tests comes from it).
pub const PEER_IP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The IPv6 address of the one peer in single-peer tests.
pub const PEER_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
/// The listening port.
pub const PORT: u16 = 5001;
/// A port nobody listens on.
pub const CLOSED_PORT: u16 = 5002;

/// No NIC verdict: parse verifies both checksums in software.
pub const SW: RxChecksum = RxChecksum {
    ip: ChecksumStatus::Unknown,
    l4: ChecksumStatus::Unknown,
};
/// The NIC verified both checksums: parse trusts them.
pub const NIC_GOOD: RxChecksum = RxChecksum {
    ip: ChecksumStatus::Good,
    l4: ChecksumStatus::Good,
};

/// weir's addresses.
pub fn local() -> LocalAddrs {
    LocalAddrs::new(OUR_MAC, Some(OUR_IP4), Some(OUR_IP6))
}

/// Peer `i`'s IPv4 address (198.18.1.0 + `i`: inside 198.18.0.0/15).
pub fn peer_ip4(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 1, 0)) + i)
}

/// Peer `i`'s IPv6 address (documentation prefix).
pub fn peer_ip6(i: u32) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, (i >> 16) as u16, i as u16)
}

/// One remote endpoint: address, port, VLAN and the port it talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The peer's address (its family is the connection's).
    pub ip: IpAddr,
    /// The peer's port.
    pub port: u16,
    /// The VLAN its frames are tagged with, if any.
    pub vlan: Option<u16>,
    /// weir's port it sends to ([`PORT`] unless changed).
    pub dport: u16,
}

impl Peer {
    /// Peer `i` over IPv4 to the listening port.
    pub fn v4(i: u32, port: u16) -> Self {
        Peer {
            ip: IpAddr::V4(peer_ip4(i)),
            port,
            vlan: None,
            dport: PORT,
        }
    }
    /// Peer `i` over IPv6 to the listening port.
    pub fn v6(i: u32, port: u16) -> Self {
        Peer {
            ip: IpAddr::V6(peer_ip6(i)),
            port,
            vlan: None,
            dport: PORT,
        }
    }
    /// Our address in this peer's family.
    pub fn our_ip(&self) -> IpAddr {
        match self.ip {
            IpAddr::V4(_) => IpAddr::V4(OUR_IP4),
            IpAddr::V6(_) => IpAddr::V6(OUR_IP6),
        }
    }
    /// The flow key weir sees for this peer's segments.
    pub fn flow(&self) -> FlowKey {
        let mut k = match (self.ip, self.our_ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => FlowKey::v4(s, self.port, d, self.dport),
            (IpAddr::V6(s), IpAddr::V6(d)) => FlowKey::v6(s, self.port, d, self.dport),
            _ => unreachable!("same family"),
        };
        k.vlan = self.vlan.unwrap_or(NO_VLAN);
        k
    }
    /// A TCP segment from this peer (no options, window 65535).
    pub fn seg(&self, seq: u32, ack: u32, flags: TcpFlags) -> TcpFrame {
        TcpFrame {
            src_mac: PEER_MAC,
            dst_mac: OUR_MAC,
            vlan: self.vlan,
            src_ip: self.ip,
            dst_ip: self.our_ip(),
            sport: self.port,
            dport: self.dport,
            seq: SeqNumber(seq),
            ack: SeqNumber(ack),
            flags,
            window: 65535,
            opts: TcpOptions::default(),
            ttl: 64,
            ip_id: 0,
        }
    }
    /// `LocalAddrs` from this peer's side (to parse what weir sends it).
    pub fn as_local(&self) -> LocalAddrs {
        match self.ip {
            IpAddr::V4(a) => LocalAddrs::new(PEER_MAC, Some(a), None),
            IpAddr::V6(a) => LocalAddrs::new(PEER_MAC, None, Some(a)),
        }
    }
}

/// The reference data segment: [`PEER_IP4`]:40000 to weir's [`PORT`], ACK+PSH, seq 1000,
/// ack 2000, window 512, timestamps 111/222, IP ID 77.
pub fn seg4() -> TcpFrame {
    TcpFrame {
        src_mac: PEER_MAC,
        dst_mac: OUR_MAC,
        vlan: None,
        src_ip: IpAddr::V4(PEER_IP4),
        dst_ip: IpAddr::V4(OUR_IP4),
        sport: 40000,
        dport: PORT,
        seq: SeqNumber(1000),
        ack: SeqNumber(2000),
        flags: TcpFlags::ACK | TcpFlags::PSH,
        window: 512,
        opts: TcpOptions {
            timestamp: Some(Timestamp {
                tsval: 111,
                tsecr: 222,
            }),
            ..Default::default()
        },
        ttl: 64,
        ip_id: 77,
    }
}

/// [`seg4`] over IPv6 ([`PEER_IP6`] to [`OUR_IP6`]).
pub fn seg6() -> TcpFrame {
    TcpFrame {
        src_ip: IpAddr::V6(PEER_IP6),
        dst_ip: IpAddr::V6(OUR_IP6),
        ..seg4()
    }
}

/// Parses a frame weir transmitted as its destination would: `Some(meta)` for a valid
/// TCP segment, `None` for anything else (ARP, ICMP replies). Panics on a TCP frame that
/// fails to parse from the peer's side: weir must never emit a malformed segment.
pub fn peer_view(frame: &[u8]) -> Option<TcpMeta> {
    let l3 = match u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]) {
        ethertype::VLAN => 18,
        _ => 14,
    };
    let et = u16::from_be_bytes([*frame.get(l3 - 2)?, *frame.get(l3 - 1)?]);
    let dst_mac: [u8; 6] = frame.get(..6)?.try_into().ok()?;
    let (local, proto) = match et {
        ethertype::IPV4 => {
            let d: [u8; 4] = frame.get(l3 + 16..l3 + 20)?.try_into().ok()?;
            (
                LocalAddrs::new(dst_mac, Some(Ipv4Addr::from(d)), None),
                *frame.get(l3 + 9)?,
            )
        }
        ethertype::IPV6 => {
            let d: [u8; 16] = frame.get(l3 + 24..l3 + 40)?.try_into().ok()?;
            (
                LocalAddrs::new(dst_mac, None, Some(Ipv6Addr::from(d))),
                *frame.get(l3 + 6)?,
            )
        }
        _ => return None,
    };
    if proto != protocol::TCP {
        return None;
    }
    match parse(frame, RxChecksum::default(), &local) {
        Parsed::Tcp(m) => Some(m),
        other => panic!("weir sent a TCP frame its peer cannot parse: {other:?}"),
    }
}

// ---- byte-level helpers (untagged frames) ---------------------------------------------

/// Offset of the IP header in an untagged frame.
pub const IP: usize = 14;
/// Offset of the TCP header in an untagged IPv4 frame without IP options.
pub const TCP4: usize = 34;
/// Offset of the TCP header in an untagged IPv6 frame without extension headers.
pub const TCP6: usize = 54;

/// Recomputes the IPv4 header checksum of an untagged IPv4 frame (IHL as written).
pub fn fix_ip4(f: &mut [u8]) {
    let hl = usize::from(f[IP] & 0x0f) * 4;
    if hl >= 20 && IP + hl <= f.len() {
        ipv4::Packet::new_unchecked(&mut f[IP..IP + hl]).fill_checksum();
    }
}

/// Recomputes the TCP checksum of an untagged IPv4 frame (IHL and total length as
/// written).
pub fn fix_tcp4(f: &mut [u8]) {
    let hl = usize::from(f[IP] & 0x0f) * 4;
    let tl = usize::from(u16::from_be_bytes([f[IP + 2], f[IP + 3]]));
    let l4 = IP + hl;
    let end = IP + tl;
    let src: [u8; 4] = f[IP + 12..IP + 16].try_into().unwrap();
    let dst: [u8; 4] = f[IP + 16..IP + 20].try_into().unwrap();
    let ps = checksum::pseudo_v4(src, dst, protocol::TCP, (end - l4) as u16);
    tcp::Packet::new_unchecked(&mut f[l4..end]).fill_checksum(ps);
}

/// Recomputes both checksums of an untagged IPv4 TCP frame.
pub fn fix4(f: &mut [u8]) {
    fix_ip4(f);
    fix_tcp4(f);
}

/// An untagged Ethernet + IPv4 frame from `src` to weir carrying `proto` with body `l4`.
pub fn ip4_frame(src: Ipv4Addr, proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; TCP4 + l4.len()];
    ethernet::emit_header(&mut f, OUR_MAC, PEER_MAC, None, ethertype::IPV4);
    ipv4::emit_header(
        &mut f[IP..],
        src.octets(),
        OUR_IP4.octets(),
        proto,
        l4.len() as u16,
        64,
        1,
        0,
    );
    f[TCP4..].copy_from_slice(l4);
    f
}

/// An untagged Ethernet + IPv6 frame from `src` to weir: next header `nh`, body `body`.
pub fn ip6_frame(src: Ipv6Addr, nh: u8, body: &[u8]) -> Vec<u8> {
    ip6_frame_to(OUR_MAC, src, OUR_IP6, 64, nh, body)
}

/// An untagged Ethernet + IPv6 frame from [`PEER_MAC`] to `dst_mac`, `src` to `dst` with
/// hop limit `hop`: next header `nh`, body `body`.
pub fn ip6_frame_to(
    dst_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop: u8,
    nh: u8,
    body: &[u8],
) -> Vec<u8> {
    let mut f = vec![0u8; TCP6 + body.len()];
    ethernet::emit_header(&mut f, dst_mac, PEER_MAC, None, ethertype::IPV6);
    ipv6::emit_header(
        &mut f[IP..],
        src.octets(),
        dst.octets(),
        nh,
        body.len() as u16,
        hop,
    );
    f[TCP6..].copy_from_slice(body);
    f
}

/// The untagged IPv6 segment `seg` carrying `payload`, with extension headers `(next-header
/// value of this header, body length in 8-byte units beyond the first 8)` inserted between
/// IPv6 and TCP (a fragment header's second byte is reserved and stays 0). The TCP checksum
/// is unchanged: the pseudo-header's upper-layer length excludes extension headers.
pub fn ip6_with_ext(seg: &TcpFrame, payload: &[u8], exts: &[(u8, u8)]) -> Vec<u8> {
    let (IpAddr::V6(src), IpAddr::V6(dst)) = (seg.src_ip, seg.dst_ip) else {
        panic!("an IPv6 segment")
    };
    let base = TcpFrame { vlan: None, ..*seg }.to_vec(payload);
    let mut body = Vec::new();
    for (i, &(kind, units)) in exts.iter().enumerate() {
        let next = exts.get(i + 1).map_or(protocol::TCP, |e| e.0);
        let mut h = vec![0u8; (usize::from(units) + 1) * 8];
        h[0] = next;
        h[1] = if kind == ipv6::ext::FRAGMENT {
            0
        } else {
            units
        };
        body.extend(h);
    }
    body.extend_from_slice(&base[TCP6..]);
    let first = exts.first().map_or(protocol::TCP, |e| e.0);
    ip6_frame_to(seg.dst_mac, src, dst, seg.ttl, first, &body)
}

/// An ICMP message of type `ty` and code `code` with the bytes after the checksum `rest`
/// and a correct checksum (`pseudo`: the IPv6 pseudo-header sum, 0 for ICMPv4).
pub fn icmp_msg(ty: u8, code: u8, rest: &[u8], pseudo: u64) -> Vec<u8> {
    let mut m = vec![ty, code, 0, 0];
    m.extend_from_slice(rest);
    icmp::Packet::new_unchecked(&mut m[..]).fill_checksum(pseudo);
    m
}

/// An ICMPv6 message of type `ty` (code 0) from `src` to `dst` with a correct checksum.
pub fn icmp6(src: Ipv6Addr, dst: Ipv6Addr, ty: u8, rest: &[u8]) -> Vec<u8> {
    let len = 4 + rest.len();
    let ps = checksum::pseudo_v6(src.octets(), dst.octets(), protocol::ICMPV6, len as u32);
    icmp_msg(ty, 0, rest, ps)
}

/// An ARP request for `target` from `sender` (at [`PEER_MAC`]), broadcast.
pub fn arp_request(sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    ethernet::emit_header(&mut f, ethernet::BROADCAST, PEER_MAC, None, ethertype::ARP);
    let mut p = arp::Packet::new_unchecked(&mut f[14..42]);
    p.set_ethernet_ipv4();
    p.set_operation(arp::OP_REQUEST);
    p.set_sender(PEER_MAC, sender.octets());
    p.set_target([0; 6], target.octets());
    f
}

/// An ICMPv4 echo request (ident 0x1234, seq 7) from `src` to weir with `data`.
pub fn echo4(src: Ipv4Addr, data: &[u8]) -> Vec<u8> {
    let mut rest = vec![0x12, 0x34, 0x00, 0x07];
    rest.extend_from_slice(data);
    ip4_frame(src, protocol::ICMP, &icmp_msg(8, 0, &rest, 0))
}

/// An ICMPv6 echo request (ident 0xabcd, seq 1) from `src` to weir with `data`.
pub fn echo6(src: Ipv6Addr, data: &[u8]) -> Vec<u8> {
    let mut rest = vec![0xab, 0xcd, 0x00, 0x01];
    rest.extend_from_slice(data);
    let m = icmp6(src, OUR_IP6, 128, &rest);
    ip6_frame(src, protocol::ICMPV6, &m)
}

/// The body of a neighbor solicitation for `target` (after the ICMPv6 checksum), with a
/// source link-layer address option when `sll` is given.
pub fn ns_body(target: Ipv6Addr, sll: Option<[u8; 6]>) -> Vec<u8> {
    let mut rest = vec![0u8; 4];
    rest.extend_from_slice(&target.octets());
    if let Some(mac) = sll {
        rest.extend_from_slice(&[1, 1]);
        rest.extend_from_slice(&mac);
    }
    rest
}

/// A neighbor solicitation for `target` from `src` to the target's solicited-node group,
/// with hop limit `hop` (RFC 4861 wants 255) and a source link-layer address option.
pub fn neighbor_solicit(src: Ipv6Addr, target: Ipv6Addr, hop: u8) -> Vec<u8> {
    let group = Ipv6Addr::from(ipv6::solicited_node(&target.octets()));
    let m = icmp6(src, group, 135, &ns_body(target, Some(PEER_MAC)));
    ip6_frame_to(
        ipv6::multicast_mac(&group.octets()),
        src,
        group,
        hop,
        protocol::ICMPV6,
        &m,
    )
}

/// The stream byte at offset `i` of a test stream with `seed`: position-dependent, so a
/// byte delivered at the wrong offset is noticed.
pub fn stream_byte(seed: u8, i: u64) -> u8 {
    let x = (i.wrapping_add(u64::from(seed)) as u32).wrapping_mul(0x9e37_79b1);
    (x >> 24) as u8 ^ seed
}
