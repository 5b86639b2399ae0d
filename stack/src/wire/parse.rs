//! The per-frame entry point: [`parse`] takes one received Ethernet frame and returns what
//! it is ([`Parsed`]): a validated TCP segment, an ARP request, an ICMP echo request or a
//! neighbor solicitation for weir, or a drop with its reason ([`DropReason`]).
//!
//! Read first: RFC 791 §3.1 and RFC 1122 §3.2.1 (IPv4 checks), RFC 8200 §3-4 (IPv6 and
//! extension headers), RFC 9293 §3.1 (TCP header, checksum), RFC 7323 and RFC 2018
//! (options), RFC 826 (ARP), RFC 4861 §7.1.1 (ND validation).
//!
//! Checks run in wire order so a frame is counted under the first thing wrong with it.
//! Checksums honour the NIC's verdict ([`RxChecksum`]): `Good` skips software
//! verification, `Bad` drops, `Unknown` verifies in software. ICMP checksums are always
//! verified in software (NICs report L4 verdicts for TCP/UDP only, and ICMP is rare).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::ethernet::{self, ethertype};
use super::fast::FastTcpV4;
use super::ipv4::{self, protocol};
use super::{arp, checksum, icmp, ipv6, tcp};
use super::{NetMeta, TcpFlags, TcpMeta, TcpOptions, MAX_OPTION_BYTES};
use crate::buf::{ChecksumStatus, PacketBuf, RxChecksum};
use crate::flow::{FlowKey, NO_VLAN};
use crate::reason::reason_enum;

reason_enum! {
    /// Why a received frame was dropped: one variant per distinct cause, each counted
    /// separately ([`ParseStats`]). Names ([`DropReason::name`]) are snake_case and
    /// stable: they are JSON keys and Prometheus labels.
    pub enum DropReason {
        /// Shorter than an Ethernet header.
        TruncatedEthernet = "truncated_ethernet",
        /// An 802.1Q TPID with no room for the tag.
        TruncatedVlan = "truncated_vlan",
        /// An 802.1Q tag around something other than IPv4, IPv6 or ARP (including a second
        /// tag: weir handles one).
        VlanNonIp = "vlan_non_ip",
        /// An EtherType weir does not handle.
        UnsupportedEthertype = "unsupported_ethertype",
        /// Source MAC with the group bit set (multicast or broadcast; IEEE 802 §8.2).
        MulticastSourceMac = "multicast_source_mac",
        /// A unicast frame for another MAC, or TCP not sent to weir's unicast MAC (Linux drops
        /// TCP that is not `PACKET_HOST`).
        NotOurMac = "not_our_mac",
        /// Shorter than an Ethernet/IPv4 ARP packet.
        TruncatedArp = "truncated_arp",
        /// ARP for other than Ethernet/IPv4 (RFC 826 hardware/protocol types and lengths).
        ArpUnsupported = "arp_unsupported",
        /// An ARP reply or other operation: weir only answers requests.
        ArpNotRequest = "arp_not_request",
        /// Addressed (IP, ARP target or ND target) to an address that is not weir's.
        NotForUs = "not_for_us",
        /// Shorter than an IPv4 header.
        TruncatedIpv4 = "truncated_ipv4",
        /// IPv4 EtherType with a version other than 4.
        Ipv4BadVersion = "ipv4_bad_version",
        /// IHL below 5 (RFC 791 §3.1).
        Ipv4IhlTooSmall = "ipv4_ihl_too_small",
        /// IHL past the end of the frame.
        Ipv4IhlPastPacket = "ipv4_ihl_past_packet",
        /// Total length smaller than the header.
        Ipv4TotalLenTooSmall = "ipv4_total_len_too_small",
        /// Total length larger than the frame.
        Ipv4TotalLenPastFrame = "ipv4_total_len_past_frame",
        /// Bad IPv4 header checksum (software check or the NIC's verdict).
        Ipv4BadChecksum = "ipv4_bad_checksum",
        /// An IPv4 fragment: weir does not reassemble (TCP senders use PMTU discovery).
        Ipv4Fragment = "ipv4_fragment",
        /// Shorter than an IPv6 header.
        TruncatedIpv6 = "truncated_ipv6",
        /// IPv6 EtherType with a version other than 6.
        Ipv6BadVersion = "ipv6_bad_version",
        /// Payload length larger than the frame (RFC 8200 §3).
        Ipv6PayloadLenMismatch = "ipv6_payload_len_mismatch",
        /// Fewer than 8 bytes left for an extension header.
        TruncatedIpv6ExtHeader = "truncated_ipv6_ext_header",
        /// An extension header whose length runs past the packet.
        Ipv6ExtChainPastPacket = "ipv6_ext_chain_past_packet",
        /// More than [`ipv6::MAX_EXT_HEADERS`] extension headers.
        Ipv6ExtChainTooLong = "ipv6_ext_chain_too_long",
        /// A hop-by-hop header not first in the chain (RFC 8200 §4.1).
        Ipv6HopByHopNotFirst = "ipv6_hop_by_hop_not_first",
        /// An IPv6 fragment (non-atomic; RFC 8200 §4.5).
        Ipv6Fragment = "ipv6_fragment",
        /// Multicast, broadcast or (for IPv4) limited-broadcast source address (RFC 1122
        /// §3.2.1.3, RFC 9293 §3.10.7.2).
        MulticastSourceIp = "multicast_source_ip",
        /// For weir, but neither TCP nor a supported ICMP message (UDP and others).
        NotTcp = "not_tcp",
        /// Shorter than a TCP header.
        TruncatedTcp = "truncated_tcp",
        /// TCP data offset below 5 (RFC 9293 §3.1).
        TcpDataOffsetTooSmall = "tcp_data_offset_too_small",
        /// TCP data offset past the end of the IP payload.
        TcpDataOffsetPastPacket = "tcp_data_offset_past_packet",
        /// A TCP option kind with no length byte.
        TruncatedTcpOptions = "truncated_tcp_options",
        /// A TCP option with length 0.
        TcpOptionLenZero = "tcp_option_len_zero",
        /// A TCP option with length 1.
        TcpOptionLenOne = "tcp_option_len_one",
        /// A TCP option running past the header.
        TcpOptionPastHeader = "tcp_option_past_header",
        /// A known TCP option with the wrong length (MSS 4, WS 3, SACK-perm 2, TS 10,
        /// SACK 2 + 8n).
        TcpOptionBadLength = "tcp_option_bad_length",
        /// Window scale above 14 (RFC 7323 §2.3).
        TcpWindowScaleTooLarge = "tcp_wscale_too_large",
        /// MSS option of 0.
        TcpMssZero = "tcp_mss_zero",
        /// SYN and FIN together (never legitimate; a scanner's probe).
        TcpSynFin = "tcp_syn_fin",
        /// SYN and RST together.
        TcpSynRst = "tcp_syn_rst",
        /// No control bits at all (a "null" scan).
        TcpNoFlags = "tcp_no_flags",
        /// Bad TCP checksum (software check or the NIC's verdict).
        TcpBadChecksum = "tcp_bad_checksum",
        /// Shorter than the ICMP message type needs.
        TruncatedIcmp = "truncated_icmp",
        /// Bad ICMP or ICMPv6 checksum.
        IcmpBadChecksum = "icmp_bad_checksum",
        /// An ICMP message weir does not answer (anything but echo request and NS).
        IcmpUnsupported = "icmp_unsupported",
        /// A neighbor solicitation failing RFC 4861 §7.1.1 validation.
        NdInvalid = "nd_invalid",
    }
}

/// weir's own addresses: frames for anything else are dropped ([`DropReason::NotForUs`],
/// [`DropReason::NotOurMac`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalAddrs {
    /// weir's MAC (the port's).
    pub mac: [u8; 6],
    /// weir's IPv4 address, if it has one.
    pub ipv4: Option<Ipv4Addr>,
    /// weir's IPv6 address, if it has one.
    pub ipv6: Option<Ipv6Addr>,
}

impl LocalAddrs {
    /// Addresses for a port with MAC `mac`.
    pub const fn new(mac: [u8; 6], ipv4: Option<Ipv4Addr>, ipv6: Option<Ipv6Addr>) -> Self {
        LocalAddrs { mac, ipv4, ipv6 }
    }
}

/// An ARP request for weir's IPv4 address (RFC 826).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpRequest {
    /// Ethernet source of the request.
    pub src_mac: [u8; 6],
    /// VLAN id, or [`NO_VLAN`].
    pub vlan: u16,
    /// Sender hardware address (where the reply goes).
    pub sender_mac: [u8; 6],
    /// Sender protocol address.
    pub sender_ip: Ipv4Addr,
    /// Target protocol address (weir's).
    pub target_ip: Ipv4Addr,
}

/// An ICMPv4 (RFC 792) or ICMPv6 (RFC 4443 §4.1) echo request for weir.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IcmpEcho {
    /// Ethernet source (where the reply goes).
    pub src_mac: [u8; 6],
    /// VLAN id, or [`NO_VLAN`].
    pub vlan: u16,
    /// The requester's address.
    pub src_ip: IpAddr,
    /// weir's address as the requester used it.
    pub dst_ip: IpAddr,
    /// Echo identifier.
    pub ident: u16,
    /// Echo sequence number.
    pub seq: u16,
    /// Offset of the echo data within the frame (the reply echoes it).
    pub data_off: u16,
    /// Length of the echo data.
    pub data_len: u16,
}

impl IcmpEcho {
    /// The echo data within `frame` (the frame this was parsed from); empty if `frame` is
    /// another one too short for it.
    pub fn data<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        let s = usize::from(self.data_off);
        frame.get(s..s + usize::from(self.data_len)).unwrap_or(&[])
    }
}

/// A neighbor solicitation for weir's IPv6 address (RFC 4861 §4.3), validated per §7.1.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighborSolicit {
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// VLAN id, or [`NO_VLAN`].
    pub vlan: u16,
    /// The solicitor's address (`::` for duplicate address detection).
    pub src_ip: Ipv6Addr,
    /// The target address (weir's).
    pub target: Ipv6Addr,
    /// The source link-layer address option, if present.
    pub source_ll: Option<[u8; 6]>,
}

/// What one received frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A validated TCP segment for weir.
    Tcp(TcpMeta),
    /// An ARP request for weir's IPv4 address.
    ArpRequest(ArpRequest),
    /// An ICMP or ICMPv6 echo request for weir.
    IcmpEcho(IcmpEcho),
    /// A neighbor solicitation for weir's IPv6 address.
    NeighborSolicit(NeighborSolicit),
    /// Dropped, for this reason.
    Drop(DropReason),
}

/// Link-layer facts carried to the upper layers.
#[derive(Clone, Copy)]
struct L2<'a> {
    /// The whole frame: MACs are read from it where they are needed (copying them through
    /// this struct costs a store-forwarding stall).
    frame: &'a [u8],
    vlan: u16,
    /// Offset of the network header in the frame.
    l3_off: usize,
    /// Destination MAC is weir's own (unicast to us).
    to_us: bool,
}

impl L2<'_> {
    #[inline(always)]
    fn src_mac(&self) -> [u8; 6] {
        ethernet::Frame::new_unchecked(self.frame).src_addr()
    }
    #[inline(always)]
    fn dst_mac(&self) -> [u8; 6] {
        ethernet::Frame::new_unchecked(self.frame).dst_addr()
    }
}

/// Parses and validates one received Ethernet frame (no FCS). Never panics, on any input.
///
/// `csum` is the NIC's checksum verdict for this frame; `local` holds weir's addresses.
#[inline]
pub fn parse(frame: &[u8], csum: RxChecksum, local: &LocalAddrs) -> Parsed {
    let mut p = Parsed::Drop(DropReason::TruncatedEthernet);
    parse_into(frame, csum, local, &mut p);
    p
}

/// [`parse`] writing its result into `out` (whatever `out` held is overwritten). The
/// hot path's form: a [`TcpMeta`] is about 170 bytes, and building it in the caller's
/// slot saves moving it (and the store-forwarding stall of reading back a structure that
/// was just written field by field).
#[inline]
pub fn parse_into(frame: &[u8], csum: RxChecksum, local: &LocalAddrs, out: &mut Parsed) {
    if parse_tcp_v4_fast(frame, csum, local, out) {
        return;
    }
    if let Err(r) = parse_frame(frame, &NoTail, csum, local, out) {
        *out = Parsed::Drop(r);
    }
}

/// The bytes of a frame beyond its first buffer: the later segments of a chain (a
/// multi-segment mbuf), which [`parse_chain_into`] does not read except to sum them.
pub trait FrameTail {
    /// How many bytes follow the first buffer.
    fn tail_len(&self) -> usize;
    /// The one's-complement sum ([`checksum::add`], not folded) of the first `n` of those
    /// bytes, as if they began at an even offset.
    fn tail_sum(&self, n: usize) -> u64;
}

/// A frame in one buffer: nothing follows.
struct NoTail;

impl FrameTail for NoTail {
    #[inline(always)]
    fn tail_len(&self) -> usize {
        0
    }
    #[inline(always)]
    fn tail_sum(&self, _n: usize) -> u64 {
        0
    }
}

/// The buffers after a chain's first, in order (each one segment's bytes).
impl<B: PacketBuf> FrameTail for [B] {
    fn tail_len(&self) -> usize {
        self.iter().map(|b| b.data().len()).sum()
    }
    fn tail_sum(&self, mut n: usize) -> u64 {
        let mut sum = 0u64;
        let mut odd = false;
        for b in self {
            if n == 0 {
                break;
            }
            let d = b.data();
            let d = d.get(..n.min(d.len())).unwrap_or(d);
            n -= d.len();
            // A segment that starts at an odd offset adds its bytes swapped (RFC 1071
            // §2(B): the sum is byte-order independent).
            sum += u64::from(swap_if(odd, checksum::fold(checksum::add(0, d))));
            odd ^= d.len() % 2 == 1;
        }
        sum
    }
}

#[inline(always)]
fn swap_if(odd: bool, s: u16) -> u16 {
    if odd {
        s.swap_bytes()
    } else {
        s
    }
}

/// [`parse_into`] for a frame of chained buffers: `head` is the first (it must hold every
/// header, as NICs that scatter frames leave them: the first segment has the most room),
/// `tail` the bytes after it. The IP length is checked against the whole frame, and the
/// TCP checksum, when verified in software, covers the whole segment. Returns `false`,
/// with `out` unchanged, when the headers do not all lie in `head` (the caller counts the
/// frame as one it cannot carry); every other frame is parsed and written to `out` as by
/// [`parse_into`]. Only TCP segments may run past `head`: an ICMP message that does is
/// [`DropReason::IcmpUnsupported`] (an echo reply is built from one buffer).
#[inline(never)]
pub fn parse_chain_into<T: FrameTail + ?Sized>(
    head: &[u8],
    tail: &T,
    csum: RxChecksum,
    local: &LocalAddrs,
    out: &mut Parsed,
) -> bool {
    if tail.tail_len() == 0 {
        parse_into(head, csum, local, out);
        return true;
    }
    match parse_frame(head, tail, csum, local, out) {
        Ok(()) => true,
        // With bytes after `head`, a header cut short at its end was split off by the
        // segmentation, not by the sender.
        Err(
            DropReason::TruncatedEthernet
            | DropReason::TruncatedVlan
            | DropReason::TruncatedArp
            | DropReason::TruncatedIpv4
            | DropReason::Ipv4IhlPastPacket
            | DropReason::TruncatedIpv6
            | DropReason::TruncatedIpv6ExtHeader
            | DropReason::Ipv6ExtChainPastPacket
            | DropReason::TruncatedTcp
            | DropReason::TcpDataOffsetPastPacket,
        ) => false,
        Err(r) => {
            *out = Parsed::Drop(r);
            true
        }
    }
}

/// The fast path alone: `Some` with [`parse`]'s result when the frame has the common
/// layout that [`parse`] takes at fixed offsets (see [`super::fast`]), `None` otherwise.
/// For tests and benchmarks that compare the two paths; [`parse`] is the entry point.
pub fn parse_fast(frame: &[u8], csum: RxChecksum, local: &LocalAddrs) -> Option<Parsed> {
    let mut p = Parsed::Drop(DropReason::TruncatedEthernet);
    parse_tcp_v4_fast(frame, csum, local, &mut p).then_some(p)
}

/// The full parser alone, in wire order, without trying the fast path first. For tests
/// and benchmarks that compare the two paths; [`parse`] is the entry point.
pub fn parse_full(frame: &[u8], csum: RxChecksum, local: &LocalAddrs) -> Parsed {
    let mut p = Parsed::Drop(DropReason::TruncatedEthernet);
    if let Err(r) = parse_frame(frame, &NoTail, csum, local, &mut p) {
        p = Parsed::Drop(r);
    }
    p
}

/// The common case at fixed offsets ([`super::fast`]'s layout): an untagged Ethernet
/// frame to weir's MAC carrying IPv4 without options, not a fragment, to weir's address,
/// and TCP whose options are none or exactly NOP NOP TS (RFC 7323 Appendix A: nearly every
/// segment of a bulk transfer), both checksums verified by the NIC. Writes `out` and
/// returns `true` for such a frame; for anything else returns `false` having written
/// nothing, and [`parse_frame`] checks the frame in wire order and counts what is wrong
/// with it.
///
/// It accepts only what `parse_frame` accepts, with the same result (the test
/// `fast_path_agrees_with_the_full_parser` in `stack/tests/parse.rs` compares them on
/// valid and broken frames).
#[inline(always)]
pub(super) fn parse_tcp_v4_fast(
    frame: &[u8],
    csum: RxChecksum,
    local: &LocalAddrs,
    out: &mut Parsed,
) -> bool {
    match FastTcpV4::parse(frame, csum, local) {
        Some(f) => {
            *out = Parsed::Tcp(f.to_meta());
            true
        }
        None => false,
    }
}

#[inline]
fn parse_frame<T: FrameTail + ?Sized>(
    frame: &[u8],
    tail: &T,
    csum: RxChecksum,
    local: &LocalAddrs,
    out: &mut Parsed,
) -> Result<(), DropReason> {
    let eth = ethernet::Frame::new_checked(frame)?;
    let src_mac = eth.src_addr();
    let dst_mac = eth.dst_addr();
    if ethernet::is_group(&src_mac) {
        return Err(DropReason::MulticastSourceMac);
    }
    let to_us = dst_mac == local.mac;
    if !to_us && !ethernet::is_group(&dst_mac) {
        return Err(DropReason::NotOurMac);
    }
    let mut et = eth.ethertype();
    let mut l2 = L2 {
        frame,
        vlan: NO_VLAN,
        l3_off: ethernet::HEADER_LEN,
        to_us,
    };
    if et == ethertype::VLAN {
        let tag = ethernet::VlanTag::new_checked(eth.payload())?;
        et = tag.ethertype();
        if !matches!(et, ethertype::IPV4 | ethertype::IPV6 | ethertype::ARP) {
            return Err(DropReason::VlanNonIp);
        }
        l2.vlan = tag.vid();
        l2.l3_off += ethernet::VLAN_TAG_LEN;
    }
    let l3 = frame.get(l2.l3_off..).unwrap_or(&[]);
    match et {
        ethertype::IPV4 => parse_ipv4(l3, tail, &l2, csum, local, out),
        ethertype::IPV6 => parse_ipv6(l3, tail, &l2, csum, local, out),
        ethertype::ARP => parse_arp(l3, &l2, local, out),
        _ => Err(DropReason::UnsupportedEthertype),
    }
}

#[inline]
fn parse_arp(
    l3: &[u8],
    l2: &L2<'_>,
    local: &LocalAddrs,
    out: &mut Parsed,
) -> Result<(), DropReason> {
    let p = arp::Packet::new_checked(l3)?;
    if !p.is_ethernet_ipv4() {
        return Err(DropReason::ArpUnsupported);
    }
    if p.operation() != arp::OP_REQUEST {
        return Err(DropReason::ArpNotRequest);
    }
    let sender_mac = p.sender_mac();
    if ethernet::is_group(&sender_mac) {
        return Err(DropReason::MulticastSourceMac);
    }
    let target = Ipv4Addr::from(p.target_ip());
    if local.ipv4 != Some(target) {
        return Err(DropReason::NotForUs);
    }
    *out = Parsed::ArpRequest(ArpRequest {
        src_mac: l2.src_mac(),
        vlan: l2.vlan,
        sender_mac,
        sender_ip: Ipv4Addr::from(p.sender_ip()),
        target_ip: target,
    });
    Ok(())
}

#[inline]
fn parse_ipv4<T: FrameTail + ?Sized>(
    l3: &[u8],
    tail: &T,
    l2: &L2<'_>,
    csum: RxChecksum,
    local: &LocalAddrs,
    out: &mut Parsed,
) -> Result<(), DropReason> {
    let ip = ipv4::Packet::new_checked_within(l3, l3.len() + tail.tail_len())?;
    if !csum.ip.holds(|| ip.verify_checksum()) {
        return Err(DropReason::Ipv4BadChecksum);
    }
    if ip.is_fragment() {
        return Err(DropReason::Ipv4Fragment);
    }
    let src = ip.src_addr();
    if ipv4::is_multicast_or_broadcast(src) {
        return Err(DropReason::MulticastSourceIp);
    }
    let dst = ip.dst_addr();
    match local.ipv4 {
        Some(a) if a.octets() == dst => {}
        _ => return Err(DropReason::NotForUs),
    }
    let hl = ip.header_len();
    let tl = usize::from(ip.total_len());
    // The part of the IP payload in this buffer, and its length on the wire (longer when
    // the packet goes on in later buffers of a chain).
    let l4 = l3.get(hl..tl.min(l3.len())).unwrap_or(&[]);
    let l4_len = tl - hl;
    let l4_off = l2.l3_off + hl;
    match ip.protocol() {
        protocol::TCP => {
            if !l2.to_us {
                return Err(DropReason::NotOurMac);
            }
            // RFC 9293 §3.1: the IPv4 pseudo-header has the TCP length, not the IP length.
            // Computed only when the checksum is verified in software.
            let pseudo = || checksum::pseudo_v4(src, dst, protocol::TCP, l4_len as u16);
            let fill = |m: &mut TcpMeta| {
                m.flow.src = v4_mapped(src);
                m.flow.dst = v4_mapped(dst);
                m.flow.v6 = false;
                m.net.ttl = ip.ttl();
                m.net.tos = ip.tos();
                m.net.df = ip.dont_frag();
                m.net.ip_id = ip.ident();
                m.net.ip_options = hl > ipv4::HEADER_LEN;
            };
            parse_tcp(l4, l4_len, tail, l4_off, l2, fill, pseudo, csum.l4, out)
        }
        protocol::ICMP => {
            if l4.len() < l4_len {
                return Err(DropReason::IcmpUnsupported);
            }
            let p = icmp::Packet::new_checked(l4)?;
            // RFC 792: the checksum covers the ICMP message only.
            if !p.verify_checksum(0) {
                return Err(DropReason::IcmpBadChecksum);
            }
            if p.msg_type() != icmp::V4_ECHO_REQUEST || p.code() != 0 {
                return Err(DropReason::IcmpUnsupported);
            }
            *out = echo(&p, l2, IpAddr::from(src), IpAddr::from(dst), l4_off)?;
            Ok(())
        }
        _ => Err(DropReason::NotTcp),
    }
}

#[inline]
fn echo(
    p: &icmp::Packet<&[u8]>,
    l2: &L2<'_>,
    src_ip: IpAddr,
    dst_ip: IpAddr,
    l4_off: usize,
) -> Result<Parsed, DropReason> {
    if !l2.to_us {
        return Err(DropReason::NotOurMac);
    }
    // Both fit in u16: see the bound in `parse_tcp`; the echo data is inside one IP
    // payload (at most 65535 bytes).
    let data_off = (l4_off + icmp::ECHO_HEADER_LEN) as u16;
    let data_len = p.echo_data().len() as u16;
    Ok(Parsed::IcmpEcho(IcmpEcho {
        src_mac: l2.src_mac(),
        vlan: l2.vlan,
        src_ip,
        dst_ip,
        ident: p.echo_ident(),
        seq: p.echo_seq(),
        data_off,
        data_len,
    }))
}

#[inline]
fn parse_ipv6<T: FrameTail + ?Sized>(
    l3: &[u8],
    tail: &T,
    l2: &L2<'_>,
    csum: RxChecksum,
    local: &LocalAddrs,
    out: &mut Parsed,
) -> Result<(), DropReason> {
    let ip = ipv6::Packet::new_checked_within(l3, l3.len() + tail.tail_len())?;
    let src = ip.src_addr();
    if ipv6::is_multicast(&src) {
        return Err(DropReason::MulticastSourceIp);
    }
    let dst = ip.dst_addr();
    let ours = local.ipv6.map(|a| a.octets());
    let for_us = ours == Some(dst);
    // A solicitation for our address arrives at its solicited-node group (RFC 4861 §7.2.2).
    let nd_group = matches!(ours, Some(a) if ipv6::solicited_node(&a) == dst);
    if !for_us && !nd_group {
        return Err(DropReason::NotForUs);
    }
    // As for IPv4: the part in this buffer, and the length on the wire.
    let pl_end = ipv6::HEADER_LEN + usize::from(ip.payload_len());
    let payload = l3
        .get(ipv6::HEADER_LEN..pl_end.min(l3.len()))
        .unwrap_or(&[]);
    let walk = ipv6::walk_ext_headers(payload, ip.next_header())?;
    let l4 = payload.get(walk.offset..).unwrap_or(&[]);
    let l4_len = usize::from(ip.payload_len()) - walk.offset;
    let l4_off = l2.l3_off + ipv6::HEADER_LEN + walk.offset;
    match walk.protocol {
        protocol::TCP if for_us => {
            if !l2.to_us {
                return Err(DropReason::NotOurMac);
            }
            // RFC 8200 §8.1: the upper-layer length excludes extension headers.
            let pseudo = || checksum::pseudo_v6(src, dst, protocol::TCP, l4_len as u32);
            let fill = |m: &mut TcpMeta| {
                m.flow.src = src;
                m.flow.dst = dst;
                m.flow.v6 = true;
                m.net.ttl = ip.hop_limit();
                m.net.tos = ip.traffic_class();
                m.net.df = true;
                m.net.flow_label = ip.flow_label();
                m.net.ip_options = walk.count > 0;
            };
            parse_tcp(l4, l4_len, tail, l4_off, l2, fill, pseudo, csum.l4, out)
        }
        protocol::ICMPV6 => {
            if l4.len() < l4_len {
                return Err(DropReason::IcmpUnsupported);
            }
            let p = icmp::Packet::new_checked(l4)?;
            // RFC 4443 §2.3: the checksum covers the pseudo-header.
            let pseudo = checksum::pseudo_v6(src, dst, protocol::ICMPV6, l4.len() as u32);
            if !p.verify_checksum(pseudo) {
                return Err(DropReason::IcmpBadChecksum);
            }
            match p.msg_type() {
                icmp::V6_ECHO_REQUEST if for_us && p.code() == 0 => {
                    let (s, d) = (Ipv6Addr::from(src), Ipv6Addr::from(dst));
                    *out = echo(&p, l2, IpAddr::from(s), IpAddr::from(d), l4_off)?;
                    Ok(())
                }
                icmp::V6_NEIGHBOR_SOLICIT => {
                    *out = neighbor_solicit(l4, l2, ip.hop_limit(), src, dst, ours)?;
                    Ok(())
                }
                _ => Err(DropReason::IcmpUnsupported),
            }
        }
        _ if for_us => Err(DropReason::NotTcp),
        _ => Err(DropReason::NotForUs),
    }
}

/// RFC 4861 §7.1.1 validation of a neighbor solicitation, then the target check.
#[inline]
fn neighbor_solicit(
    l4: &[u8],
    l2: &L2<'_>,
    hop_limit: u8,
    src: [u8; 16],
    dst: [u8; 16],
    ours: Option<[u8; 16]>,
) -> Result<Parsed, DropReason> {
    let p = icmp::Packet::new_checked_nd(l4)?;
    let target = p.nd_target();
    if hop_limit != 255 || p.code() != 0 || ipv6::is_multicast(&target) {
        return Err(DropReason::NdInvalid);
    }
    let source_ll = icmp::nd_lladdr_option(p.nd_options(), icmp::ND_OPT_SOURCE_LL)?;
    // From the unspecified address (DAD): must go to a solicited-node group and carry no
    // source link-layer option.
    if src == [0; 16] && (!(dst[0] == 0xff && dst[1] == 0x02) || source_ll.is_some()) {
        return Err(DropReason::NdInvalid);
    }
    if ours != Some(target) {
        return Err(DropReason::NotForUs);
    }
    Ok(Parsed::NeighborSolicit(NeighborSolicit {
        src_mac: l2.src_mac(),
        vlan: l2.vlan,
        src_ip: Ipv6Addr::from(src),
        target: Ipv6Addr::from(target),
        source_ll,
    }))
}

/// `seg` is the part of the TCP segment in the first buffer, `seg_len` its length on the
/// wire; the rest, if any, is the first `seg_len - seg.len()` bytes of `tail`.
#[allow(clippy::too_many_arguments)]
#[inline]
fn parse_tcp<T: FrameTail + ?Sized>(
    seg: &[u8],
    seg_len: usize,
    tail: &T,
    seg_off: usize,
    l2: &L2<'_>,
    fill: impl FnOnce(&mut TcpMeta),
    pseudo: impl FnOnce() -> u64,
    l4csum: ChecksumStatus,
    out: &mut Parsed,
) -> Result<(), DropReason> {
    let t = tcp::Packet::new_checked(seg)?;
    let verify = || {
        if seg.len() == seg_len {
            return t.verify_checksum(pseudo());
        }
        // RFC 1071 §2: the sum of the whole is the sum of its parts, the tail's bytes
        // swapped when they start at an odd offset of the segment.
        let rest = swap_if(
            seg.len() % 2 == 1,
            checksum::fold(tail.tail_sum(seg_len - seg.len())),
        );
        checksum::fold(checksum::add(pseudo(), seg) + u64::from(rest)) == 0xffff
    };
    if !l4csum.holds(verify) {
        return Err(DropReason::TcpBadChecksum);
    }
    let flags = t.flags();
    // No FIN, SYN, RST, PSH, ACK or URG (ECE/CWR alone carry nothing): a "null" probe.
    if !flags.intersects(TcpFlags(0x3f)) {
        return Err(DropReason::TcpNoFlags);
    }
    if flags.contains(TcpFlags::SYN) {
        if flags.contains(TcpFlags::FIN) {
            return Err(DropReason::TcpSynFin);
        }
        if flags.contains(TcpFlags::RST) {
            return Err(DropReason::TcpSynRst);
        }
    }
    let hl = t.header_len();
    let opt_bytes = t.options();
    // Both fit in u16: the segment lies inside one IP payload (IPv4 total length and IPv6
    // payload length are 16-bit), and the payload offset is at most 18 (Ethernet + tag)
    // + 60 (IPv4) or 40 + 8 × 2048 (IPv6 with the longest walkable chain) + 60 (TCP).
    let payload_off = (seg_off + hl) as u16;
    let payload_len = (seg_len - hl) as u16;
    // The result is built in place: aggregates (addresses, options) assembled in locals
    // and then moved cost a store-forwarding stall each (measured: over half the parse
    // time of a timestamped data segment), so they are written straight into `out`.
    *out = Parsed::Tcp(TcpMeta {
        flow: FlowKey {
            src: [0; 16],
            dst: [0; 16],
            sport: t.src_port(),
            dport: t.dst_port(),
            vlan: l2.vlan,
            v6: false,
        },
        src_mac: l2.src_mac(),
        dst_mac: l2.dst_mac(),
        seq: t.seq_number(),
        ack: t.ack_number(),
        flags,
        window: t.window(),
        header_len: hl as u8,
        opts: TcpOptions::default(),
        raw_opts: [0; MAX_OPTION_BYTES],
        tsval_at: None,
        payload_off,
        payload_len,
        net: NetMeta::default(),
    });
    if let Parsed::Tcp(m) = out {
        m.tsval_at = tcp::parse_options_into(opt_bytes, &mut m.opts)?;
        copy_options(&mut m.raw_opts, opt_bytes);
        fill(m);
    }
    Ok(())
}

/// An IPv4 address in the IPv4-mapped IPv6 form [`FlowKey`] stores (RFC 4291 §2.5.5.2).
#[inline(always)]
fn v4_mapped(a: [u8; 4]) -> [u8; 16] {
    [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a[0], a[1], a[2], a[3],
    ]
}

/// Copies the option bytes (a multiple of 4, at most 40) into `dst`, with fixed-size
/// copies for the common lengths.
#[inline(always)]
fn copy_options(dst: &mut [u8; MAX_OPTION_BYTES], src: &[u8]) {
    match (src.len(), dst.split_first_chunk_mut::<12>()) {
        (0, _) => {}
        (12, Some((d, _))) => {
            if let Some(s) = src.first_chunk::<12>() {
                *d = *s;
            }
        }
        _ => {
            if let Some(d) = dst.get_mut(..src.len()) {
                d.copy_from_slice(src);
            }
        }
    }
}

/// Parse counters: one per [`Parsed`] kind and one per [`DropReason`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseStats {
    /// TCP segments passed on.
    pub tcp: u64,
    /// ARP requests for weir.
    pub arp: u64,
    /// ICMP/ICMPv6 echo requests for weir.
    pub icmp: u64,
    /// Neighbor solicitations for weir.
    pub nd: u64,
    /// Drops, indexed by [`DropReason::index`].
    pub drops: [u64; DropReason::COUNT],
}

impl Default for ParseStats {
    fn default() -> Self {
        ParseStats {
            tcp: 0,
            arp: 0,
            icmp: 0,
            nd: 0,
            drops: [0; DropReason::COUNT],
        }
    }
}

impl ParseStats {
    /// Counts one parse result.
    #[inline]
    pub fn record(&mut self, p: &Parsed) {
        match p {
            Parsed::Tcp(_) => self.tcp += 1,
            Parsed::ArpRequest(_) => self.arp += 1,
            Parsed::IcmpEcho(_) => self.icmp += 1,
            Parsed::NeighborSolicit(_) => self.nd += 1,
            Parsed::Drop(r) => {
                if let Some(c) = self.drops.get_mut(r.index()) {
                    *c += 1;
                }
            }
        }
    }
    /// Drops counted for `r`.
    pub fn dropped(&self, r: DropReason) -> u64 {
        self.drops.get(r.index()).copied().unwrap_or(0)
    }
    /// All drops.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
    /// Every frame counted (passed on or dropped).
    pub fn total(&self) -> u64 {
        self.tcp + self.arp + self.icmp + self.nd + self.total_drops()
    }
    /// `(reason, count)` for every reason, zeros included, in [`DropReason::all`] order.
    pub fn drops_by_reason(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::all()
            .iter()
            .zip(self.drops.iter())
            .map(|(r, c)| (*r, *c))
    }
    /// Adds `other`'s counts (per-core totals).
    pub fn merge(&mut self, other: &ParseStats) {
        self.tcp += other.tcp;
        self.arp += other.arp;
        self.icmp += other.icmp;
        self.nd += other.nd;
        for (a, b) in self.drops.iter_mut().zip(other.drops.iter()) {
            *a += *b;
        }
    }
}
