//! Frames as a peer sends them to weir: addresses, TCP segments built with
//! [`TcpFrame`], ARP/ICMP/ND requests, byte-level edits with checksum repair, and the
//! peer's view of what weir transmits.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use stack::buf::RxChecksum;
use stack::flow::{FlowKey, NO_VLAN};
use stack::seq::SeqNumber;
use stack::wire::ethernet::{self, ethertype};
use stack::wire::ipv4::{self, protocol};
use stack::wire::{checksum, icmp, ipv6, tcp};
use stack::wire::{parse, LocalAddrs, Parsed, TcpFlags, TcpFrame, TcpMeta, TcpOptions};

pub const OUR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
pub const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
pub const OUR_IP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const OUR_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
/// The listening port.
pub const PORT: u16 = 5001;
/// A port nobody listens on.
pub const CLOSED_PORT: u16 = 5002;

/// weir's addresses.
pub fn local() -> LocalAddrs {
    LocalAddrs::new(OUR_MAC, Some(OUR_IP4), Some(OUR_IP6))
}

/// Peer `i`'s IPv4 address (198.18.0.0/15 only).
pub fn peer_ip4(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 1, 0)) + i)
}

/// Peer `i`'s IPv6 address (documentation prefix).
pub fn peer_ip6(i: u32) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, (i >> 16) as u16, i as u16)
}

/// One remote endpoint: address, port, family, VLAN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    pub ip: IpAddr,
    pub port: u16,
    pub vlan: Option<u16>,
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
    let mut f = vec![0u8; 34 + l4.len()];
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
    f[34..].copy_from_slice(l4);
    f
}

/// An untagged Ethernet + IPv6 frame from `src` to weir: next header `nh`, body `body`.
pub fn ip6_frame(src: Ipv6Addr, nh: u8, body: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 54 + body.len()];
    ethernet::emit_header(&mut f, OUR_MAC, PEER_MAC, None, ethertype::IPV6);
    ipv6::emit_header(
        &mut f[IP..],
        src.octets(),
        OUR_IP6.octets(),
        nh,
        body.len() as u16,
        64,
    );
    f[54..].copy_from_slice(body);
    f
}

/// An IPv6 TCP frame from `p` with extension headers `(kind, length in 8-byte units
/// beyond the first 8)` between IPv6 and TCP.
pub fn ip6_with_ext(p: &Peer, seg: &TcpFrame, payload: &[u8], exts: &[(u8, u8)]) -> Vec<u8> {
    let base = seg.to_vec(payload);
    let tcp_part = base[54..].to_vec();
    let mut body = Vec::new();
    for (i, &(_, units)) in exts.iter().enumerate() {
        let next = exts.get(i + 1).map_or(protocol::TCP, |e| e.0);
        let mut h = vec![0u8; (usize::from(units) + 1) * 8];
        h[0] = next;
        h[1] = units;
        body.extend(h);
    }
    body.extend(tcp_part);
    let IpAddr::V6(src) = p.ip else {
        panic!("IPv6 peer")
    };
    ip6_frame(src, exts.first().map_or(protocol::TCP, |e| e.0), &body)
}

/// An ARP request for `target` from peer `i`.
pub fn arp_request(i: u32, target: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    ethernet::emit_header(&mut f, ethernet::BROADCAST, PEER_MAC, None, ethertype::ARP);
    let mut p = stack::wire::arp::Packet::new_unchecked(&mut f[14..42]);
    p.set_ethernet_ipv4();
    p.set_operation(stack::wire::arp::OP_REQUEST);
    p.set_sender(PEER_MAC, peer_ip4(i).octets());
    p.set_target([0; 6], target.octets());
    f
}

/// An ICMPv4 echo request from peer `i` with `data`.
pub fn echo4(i: u32, data: &[u8]) -> Vec<u8> {
    let mut m = vec![8, 0, 0, 0, 0x12, 0x34, 0, 7];
    m.extend_from_slice(data);
    icmp::Packet::new_unchecked(&mut m[..]).fill_checksum(0);
    ip4_frame(peer_ip4(i), protocol::ICMP, &m)
}

/// An ICMPv6 echo request from peer `i` with `data`.
pub fn echo6(i: u32, data: &[u8]) -> Vec<u8> {
    let src = peer_ip6(i);
    let mut m = vec![128, 0, 0, 0, 0xab, 0xcd, 0, 1];
    m.extend_from_slice(data);
    let ps = checksum::pseudo_v6(
        src.octets(),
        OUR_IP6.octets(),
        protocol::ICMPV6,
        m.len() as u32,
    );
    icmp::Packet::new_unchecked(&mut m[..]).fill_checksum(ps);
    ip6_frame(src, protocol::ICMPV6, &m)
}

/// A neighbor solicitation for weir's address from peer `i` (to the solicited-node
/// group, hop limit 255, with a source link-layer option).
pub fn neighbor_solicit(i: u32) -> Vec<u8> {
    let src = peer_ip6(i);
    let group = ipv6::solicited_node(&OUR_IP6.octets());
    let mut m = vec![135, 0, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&OUR_IP6.octets());
    m.extend_from_slice(&[1, 1]);
    m.extend_from_slice(&PEER_MAC);
    let ps = checksum::pseudo_v6(src.octets(), group, protocol::ICMPV6, m.len() as u32);
    icmp::Packet::new_unchecked(&mut m[..]).fill_checksum(ps);
    let mut f = vec![0u8; 54 + m.len()];
    ethernet::emit_header(
        &mut f,
        ipv6::multicast_mac(&group),
        PEER_MAC,
        None,
        ethertype::IPV6,
    );
    ipv6::emit_header(
        &mut f[IP..],
        src.octets(),
        group,
        protocol::ICMPV6,
        m.len() as u16,
        255,
    );
    f[54..].copy_from_slice(&m);
    f
}

/// The stream byte at offset `i` of a test stream with `seed`: position-dependent, so a
/// byte delivered at the wrong offset is noticed.
pub fn stream_byte(seed: u8, i: u64) -> u8 {
    let x = (i.wrapping_add(u64::from(seed)) as u32).wrapping_mul(0x9e37_79b1);
    (x >> 24) as u8 ^ seed
}
