//! Frame builders: ARP replies (RFC 826), ICMPv4 echo replies (RFC 792), ICMPv6 echo
//! replies (RFC 4443 §4.2) and neighbor advertisements (RFC 4861 §4.4, §7.2.4), and
//! [`TcpFrame`], the general TCP frame builder used for SYN-ACKs, RSTs, ACKs and tests.
//!
//! Every builder writes into a caller-owned `&mut [u8]` and returns the frame length, or
//! 0 when the buffer is too short (or the request is inconsistent); nothing allocates
//! except [`TcpFrame::to_vec`]. Frames shorter than the Ethernet minimum are zero-padded
//! to 60 bytes ([`ethernet::MIN_FRAME_LEN`]) since not every PMD pads on transmit.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::bytes::put_slice;
use super::ethernet::{self, ethertype};
use super::ipv4::{self, protocol};
use super::parse::{ArpRequest, IcmpEcho, NeighborSolicit};
use super::{arp, checksum, icmp, ipv6, tcp};
use super::{TcpFlags, TcpMeta, TcpOptions};
use crate::buf::TxChecksumOffload;
use crate::flow::NO_VLAN;
use crate::seq::SeqNumber;

/// Default TTL / hop limit for frames weir originates (Linux's `ip_default_ttl`).
pub const DEFAULT_TTL: u8 = 64;

#[inline]
fn vlan_opt(vlan: u16) -> Option<u16> {
    (vlan != NO_VLAN).then_some(vlan)
}

/// Zero-pads `out[len..]` up to the Ethernet minimum; returns the padded length.
#[inline]
fn pad(out: &mut [u8], len: usize) -> usize {
    if len == 0 || len >= ethernet::MIN_FRAME_LEN {
        return len;
    }
    match out.get_mut(len..ethernet::MIN_FRAME_LEN) {
        Some(p) => {
            p.fill(0);
            ethernet::MIN_FRAME_LEN
        }
        None => 0,
    }
}

/// Writes the ARP reply to `req` (RFC 826: swap sender and target, fill in our MAC) and
/// returns its length (60), or 0 if `out` is too short.
pub fn emit_arp_reply(req: &ArpRequest, local_mac: [u8; 6], out: &mut [u8]) -> usize {
    let vlan = vlan_opt(req.vlan);
    let l2 = ethernet::header_len(vlan);
    let len = l2 + arp::PACKET_LEN;
    if out.len() < len.max(ethernet::MIN_FRAME_LEN) {
        return 0;
    }
    ethernet::emit_header(out, req.sender_mac, local_mac, vlan, ethertype::ARP);
    arp::Repr {
        operation: arp::OP_REPLY,
        sender_mac: local_mac,
        sender_ip: req.target_ip,
        target_mac: req.sender_mac,
        target_ip: req.sender_ip,
    }
    .emit(&mut arp::Packet::new_unchecked(
        out.get_mut(l2..len).unwrap_or(&mut []),
    ));
    pad(out, len)
}

/// Writes the echo reply to `echo` (ICMPv4 type 0 or ICMPv6 type 129, same identifier,
/// sequence and `data`) with correct IP and ICMP checksums, and returns its length, or 0
/// if `out` is too short. `data` is [`IcmpEcho::data`] of the request frame.
pub fn emit_echo_reply(echo: &IcmpEcho, local_mac: [u8; 6], data: &[u8], out: &mut [u8]) -> usize {
    let vlan = vlan_opt(echo.vlan);
    let l2 = ethernet::header_len(vlan);
    let icmp_len = icmp::ECHO_HEADER_LEN + data.len();
    let (l3, et) = match echo.src_ip {
        IpAddr::V4(_) => (ipv4::HEADER_LEN, ethertype::IPV4),
        IpAddr::V6(_) => (ipv6::HEADER_LEN, ethertype::IPV6),
    };
    let len = l2 + l3 + icmp_len;
    let Ok(l4_len) = u16::try_from(icmp_len) else {
        return 0;
    };
    if out.len() < len.max(ethernet::MIN_FRAME_LEN) || l3 + icmp_len > usize::from(u16::MAX) {
        return 0;
    }
    ethernet::emit_header(out, echo.src_mac, local_mac, vlan, et);
    let (hdr, rest) = out.split_at_mut(l2 + l3);
    let l3buf = hdr.get_mut(l2..).unwrap_or(&mut []);
    let msg = rest.get_mut(..icmp_len).unwrap_or(&mut []);
    put_slice(msg, icmp::ECHO_HEADER_LEN, data);
    let mut p = icmp::Packet::new_unchecked(&mut *msg);
    p.set_echo(echo.ident, echo.seq);
    match (echo.src_ip, echo.dst_ip) {
        (IpAddr::V4(peer), IpAddr::V4(us)) => {
            p.set_type_code(icmp::V4_ECHO_REPLY, 0);
            p.fill_checksum(0);
            ipv4::emit_header(
                l3buf,
                us.octets(),
                peer.octets(),
                protocol::ICMP,
                l4_len,
                DEFAULT_TTL,
                0,
                0,
            );
        }
        (IpAddr::V6(peer), IpAddr::V6(us)) => {
            p.set_type_code(icmp::V6_ECHO_REPLY, 0);
            let (s, d) = (us.octets(), peer.octets());
            p.fill_checksum(checksum::pseudo_v6(
                s,
                d,
                protocol::ICMPV6,
                u32::from(l4_len),
            ));
            ipv6::emit_header(l3buf, s, d, protocol::ICMPV6, l4_len, DEFAULT_TTL);
        }
        _ => return 0,
    }
    pad(out, len)
}

/// Writes the neighbor advertisement answering `ns` (RFC 4861 §7.2.4): target = our
/// address, Solicited set unless the solicitation came from `::` (then sent to all-nodes,
/// ff02::1), Override set, Router clear, with our MAC in a target link-layer address
/// option; hop limit 255 (§7.1.2). Returns its length, or 0 if `out` is too short.
pub fn emit_neighbor_advert(ns: &NeighborSolicit, local_mac: [u8; 6], out: &mut [u8]) -> usize {
    let vlan = vlan_opt(ns.vlan);
    let l2 = ethernet::header_len(vlan);
    let icmp_len = icmp::ND_HEADER_LEN + 8;
    let len = l2 + ipv6::HEADER_LEN + icmp_len;
    if out.len() < len {
        return 0;
    }
    let dad = ns.src_ip.is_unspecified();
    let dst_ip = if dad {
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1).octets()
    } else {
        ns.src_ip.octets()
    };
    let dst_mac = if dad {
        ipv6::multicast_mac(&dst_ip)
    } else {
        ns.source_ll.unwrap_or(ns.src_mac)
    };
    let src_ip = ns.target.octets();
    ethernet::emit_header(out, dst_mac, local_mac, vlan, ethertype::IPV6);
    let (hdr, rest) = out.split_at_mut(l2 + ipv6::HEADER_LEN);
    ipv6::emit_header(
        hdr.get_mut(l2..).unwrap_or(&mut []),
        src_ip,
        dst_ip,
        protocol::ICMPV6,
        icmp_len as u16,
        255,
    );
    let msg = rest.get_mut(..icmp_len).unwrap_or(&mut []);
    put_slice(msg, icmp::ND_HEADER_LEN, &[icmp::ND_OPT_TARGET_LL, 1]);
    put_slice(msg, icmp::ND_HEADER_LEN + 2, &local_mac);
    let mut p = icmp::Packet::new_unchecked(msg);
    p.set_type_code(icmp::V6_NEIGHBOR_ADVERT, 0);
    let flags = icmp::NA_OVERRIDE | if dad { 0 } else { icmp::NA_SOLICITED };
    p.set_nd(flags, src_ip);
    p.fill_checksum(checksum::pseudo_v6(
        src_ip,
        dst_ip,
        protocol::ICMPV6,
        icmp_len as u32,
    ));
    len
}

/// How [`TcpFrame::emit_with`] fills checksums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxChecksum {
    /// IPv4 header and TCP checksums computed in software.
    Software,
    /// For NIC TX offload: the IPv4 header checksum is 0 and the TCP checksum field holds
    /// the folded, uncomplemented pseudo-header sum, as DPDK's `rte_ipv4_phdr_cksum` /
    /// `rte_ipv6_phdr_cksum` produce; request it with [`TcpFrame::tx_offload`].
    Offload,
}

/// A TCP frame to build: Ethernet (with an optional 802.1Q tag), IPv4 (20 bytes, DF set)
/// or IPv6 (40 bytes, no extension headers), TCP with options laid out as Linux does
/// ([`tcp::emit_options`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpFrame {
    /// Source MAC (weir's).
    pub src_mac: [u8; 6],
    /// Destination MAC (the peer's or its router's).
    pub dst_mac: [u8; 6],
    /// 802.1Q VLAN id, if tagged.
    pub vlan: Option<u16>,
    /// Source address; must be the same family as `dst_ip`.
    pub src_ip: IpAddr,
    /// Destination address.
    pub dst_ip: IpAddr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: SeqNumber,
    /// Acknowledgment number.
    pub ack: SeqNumber,
    /// Flags.
    pub flags: TcpFlags,
    /// Raw window field (already scaled down by the sender's shift).
    pub window: u16,
    /// Options to emit.
    pub opts: TcpOptions,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// IPv4 identification (ignored for IPv6).
    pub ip_id: u16,
}

impl Default for TcpFrame {
    /// An IPv4 ACK-less, flagless frame between unspecified addresses with TTL 64: a
    /// starting point for struct-update syntax.
    fn default() -> Self {
        TcpFrame {
            src_mac: [0; 6],
            dst_mac: [0; 6],
            vlan: None,
            src_ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            dst_ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            sport: 0,
            dport: 0,
            seq: SeqNumber(0),
            ack: SeqNumber(0),
            flags: TcpFlags::NONE,
            window: 0,
            opts: TcpOptions::default(),
            ttl: DEFAULT_TTL,
            ip_id: 0,
        }
    }
}

impl TcpFrame {
    /// A frame answering the segment `m`: MACs, addresses and ports swapped, same VLAN,
    /// `seq`/`ack`/`flags`/`window`/`opts` left for the caller to set (zero, no options).
    pub fn reply_to(m: &TcpMeta) -> Self {
        TcpFrame {
            src_mac: m.dst_mac,
            dst_mac: m.src_mac,
            vlan: vlan_opt(m.flow.vlan),
            src_ip: m.flow.dst_ip(),
            dst_ip: m.flow.src_ip(),
            sport: m.flow.dport,
            dport: m.flow.sport,
            ..TcpFrame::default()
        }
    }

    /// The TCP header of this frame.
    #[inline]
    pub fn tcp_repr(&self) -> tcp::Repr {
        tcp::Repr {
            src_port: self.sport,
            dst_port: self.dport,
            seq: self.seq,
            ack: self.ack,
            flags: self.flags,
            window: self.window,
            opts: self.opts,
        }
    }

    #[inline]
    fn l3_len(&self) -> usize {
        match self.dst_ip {
            IpAddr::V4(_) => ipv4::HEADER_LEN,
            IpAddr::V6(_) => ipv6::HEADER_LEN,
        }
    }

    /// Length of the TCP header with options.
    #[inline]
    pub fn tcp_header_len(&self) -> usize {
        tcp::HEADER_LEN + tcp::options_len(&self.opts)
    }

    /// Length of all headers (Ethernet, VLAN, IP, TCP with options): the payload's offset.
    #[inline]
    pub fn header_len(&self) -> usize {
        ethernet::header_len(self.vlan) + self.l3_len() + self.tcp_header_len()
    }

    /// Length of the frame [`TcpFrame::emit`] writes for `payload_len` bytes of payload
    /// (padding to the Ethernet minimum included).
    #[inline]
    pub fn frame_len(&self, payload_len: usize) -> usize {
        (self.header_len() + payload_len).max(ethernet::MIN_FRAME_LEN)
    }

    /// The TX checksum offload request matching [`TxChecksum::Offload`] output.
    pub fn tx_offload(&self) -> TxChecksumOffload {
        TxChecksumOffload {
            l2_len: ethernet::header_len(self.vlan) as u8,
            l3_len: self.l3_len() as u16,
            ipv4: self.dst_ip.is_ipv4(),
        }
    }

    /// Writes the frame with `payload`, checksums computed in software, and returns its
    /// length ([`TcpFrame::frame_len`]); 0 if `out` is too short, the addresses mix
    /// families, or the packet would exceed the IP length field.
    #[inline]
    pub fn emit(&self, payload: &[u8], out: &mut [u8]) -> usize {
        self.emit_with(payload, out, TxChecksum::Software)
    }

    /// As [`TcpFrame::emit`], leaving checksums for the NIC ([`TxChecksum::Offload`]).
    #[inline]
    pub fn emit_offload(&self, payload: &[u8], out: &mut [u8]) -> usize {
        self.emit_with(payload, out, TxChecksum::Offload)
    }

    /// Writes the frame with the given checksum mode; see [`TcpFrame::emit`].
    pub fn emit_with(&self, payload: &[u8], out: &mut [u8], mode: TxChecksum) -> usize {
        let vlan = self.vlan;
        let l2 = ethernet::header_len(vlan);
        let l3 = self.l3_len();
        let th = self.tcp_header_len();
        let seg_len = th + payload.len();
        let len = l2 + l3 + seg_len;
        let Ok(seg_len16) = u16::try_from(seg_len) else {
            return 0;
        };
        if out.len() < len.max(ethernet::MIN_FRAME_LEN) || l3 + seg_len > usize::from(u16::MAX) {
            return 0;
        }
        let (hdr, rest) = out.split_at_mut(l2 + l3);
        let seg = rest.get_mut(..seg_len).unwrap_or(&mut []);
        let l3buf = hdr.get_mut(l2..).unwrap_or(&mut []);
        let pseudo = match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let (s, d) = (s.octets(), d.octets());
                ipv4::emit_header(
                    l3buf,
                    s,
                    d,
                    protocol::TCP,
                    seg_len16,
                    self.ttl,
                    self.ip_id,
                    0,
                );
                if mode == TxChecksum::Offload {
                    ipv4::Packet::new_unchecked(&mut *l3buf).set_checksum(0);
                }
                checksum::pseudo_v4(s, d, protocol::TCP, seg_len16)
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let (s, d) = (s.octets(), d.octets());
                ipv6::emit_header(l3buf, s, d, protocol::TCP, seg_len16, self.ttl);
                checksum::pseudo_v6(s, d, protocol::TCP, u32::from(seg_len16))
            }
            _ => return 0,
        };
        ethernet::emit_header(
            hdr,
            self.dst_mac,
            self.src_mac,
            vlan,
            match self.dst_ip {
                IpAddr::V4(_) => ethertype::IPV4,
                IpAddr::V6(_) => ethertype::IPV6,
            },
        );
        put_slice(seg, th, payload);
        let mut t = tcp::Packet::new_unchecked(&mut *seg);
        self.tcp_repr().emit(&mut t);
        match mode {
            TxChecksum::Software => t.fill_checksum(pseudo),
            TxChecksum::Offload => t.set_checksum(checksum::fold(pseudo)),
        }
        pad(out, len)
    }

    /// The frame as a `Vec` (tests and tools; the data path uses [`TcpFrame::emit`]).
    /// Empty if the frame cannot be built.
    pub fn to_vec(&self, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; self.frame_len(payload.len())];
        let n = self.emit(payload, &mut v);
        v.truncate(n);
        v
    }
}
