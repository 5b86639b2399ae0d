//! The malformed-frame corpus: frames `wire::parse` must drop, each with the one
//! [`DropReason`] it must be dropped for, at least one frame per reason. It is checked at
//! two levels: against `parse` and `parse_into` directly (`stack/tests/parse.rs`), and
//! through the whole pipeline next to live connections, where each must be counted under
//! its own reason and nothing else may move (`stack/tests/malformed_corpus.rs`).
//!
//! Two groups: faults in the reference segments [`seg4`]/[`seg6`] and the other peer-side
//! builders, where a structural fault is parsed with the NIC's "good" verdicts so that the
//! checksum does not hide it; and the faults a hostile sender crafts, on a stranger's
//! frames with both checksums repaired and verified in software.
//!
//! RFCs: 791 §3.1 and 1122 §3.2.1 (IPv4), 8200 §4 (IPv6 extension headers), 9293 §3.1
//! (TCP header), 7323 §2.3 (window scale), 826 (ARP), 792 and 4443 (ICMP), 4861 §7.1.1
//! (neighbor solicitation).

use std::net::Ipv6Addr;

use stack::buf::{ChecksumStatus, RxChecksum};
use stack::wire::ipv4::protocol;
use stack::wire::ipv6::{self, ext};
use stack::wire::{DropReason, TcpFlags, TcpFrame, TcpOptions, Timestamp};

use crate::frames::{
    arp_request, echo4, echo6, fix4, fix_ip4, icmp6, icmp_msg, ip4_frame, ip6_frame, ip6_frame_to,
    ip6_with_ext, neighbor_solicit, ns_body, peer_ip4, peer_ip6, seg4, seg6, Peer, IP, NIC_GOOD,
    OUR_IP4, OUR_IP6, OUR_MAC, PEER_IP4, PEER_IP6, SW, TCP4, TCP6,
};

/// One frame parse must drop.
#[derive(Clone, Debug)]
pub struct Case {
    /// What is wrong with it (unique in the corpus).
    pub name: &'static str,
    /// The frame.
    pub frame: Vec<u8>,
    /// The NIC's checksum verdicts it arrives with.
    pub cs: RxChecksum,
    /// The reason it must be dropped for.
    pub reason: DropReason,
}

/// `f` with `edit` applied.
fn with(f: &[u8], edit: &dyn Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut f = f.to_vec();
    edit(&mut f);
    f
}

/// Every case: at least one per [`DropReason`].
pub fn parse_drops() -> Vec<Case> {
    let mut c = Vec::new();
    let mut add = |name, frame, cs, reason| {
        c.push(Case {
            name,
            frame,
            cs,
            reason,
        })
    };
    reference_faults(&mut add);
    crafted_faults(&mut add);
    c
}

/// Faults in the reference segments and the other builders' frames.
fn reference_faults(add: &mut dyn FnMut(&'static str, Vec<u8>, RxChecksum, DropReason)) {
    use DropReason as R;
    let v4 = seg4().to_vec(b"data");
    let v6 = seg6().to_vec(b"data");
    let vlan = TcpFrame {
        vlan: Some(7),
        ..seg4()
    }
    .to_vec(b"data");
    let seg6_with_ext = |exts: &[(u8, u8)]| ip6_with_ext(&seg6(), b"xyz", exts);

    add("13-byte frame", v4[..13].to_vec(), SW, R::TruncatedEthernet);
    add("empty frame", Vec::new(), SW, R::TruncatedEthernet);
    add("tag cut short", vlan[..16].to_vec(), SW, R::TruncatedVlan);
    add(
        "LLDP inside a VLAN tag",
        with(&vlan, &|f| f[16..18].copy_from_slice(&[0x88, 0xcc])),
        SW,
        R::VlanNonIp,
    );
    add(
        "QinQ: a tag inside a tag",
        with(&vlan, &|f| f[16..18].copy_from_slice(&[0x81, 0x00])),
        SW,
        R::VlanNonIp,
    );
    add(
        "LLDP",
        with(&v4, &|f| f[12..14].copy_from_slice(&[0x88, 0xcc])),
        SW,
        R::UnsupportedEthertype,
    );
    add(
        "multicast source MAC",
        with(&v4, &|f| f[6] |= 1),
        SW,
        R::MulticastSourceMac,
    );
    add(
        "unicast to another MAC",
        with(&v4, &|f| f[5] = 0x99),
        SW,
        R::NotOurMac,
    );
    add(
        "TCP to the broadcast MAC",
        with(&v4, &|f| f[..6].fill(0xff)),
        SW,
        R::NotOurMac,
    );
    let arp = arp_request(PEER_IP4, OUR_IP4);
    add(
        "ARP cut short",
        arp[..14 + 27].to_vec(),
        SW,
        R::TruncatedArp,
    );
    add(
        "ARP for token ring",
        with(&arp, &|f| f[15] = 6),
        SW,
        R::ArpUnsupported,
    );
    add(
        "ARP reply",
        with(&arp, &|f| f[21] = 2),
        SW,
        R::ArpNotRequest,
    );
    add(
        "ARP for another IP",
        arp_request(PEER_IP4, PEER_IP4),
        SW,
        R::NotForUs,
    );
    add(
        "ARP from a multicast sender MAC",
        with(&arp, &|f| f[22] |= 1),
        SW,
        R::MulticastSourceMac,
    );
    add(
        "TCP to another IPv4 address",
        with(&v4, &|f| f[33] = 99),
        NIC_GOOD,
        R::NotForUs,
    );
    add(
        "TCP to another IPv6 address",
        with(&v6, &|f| f[53] = 99),
        NIC_GOOD,
        R::NotForUs,
    );
    add(
        "IPv4 cut at 19 bytes",
        v4[..33].to_vec(),
        SW,
        R::TruncatedIpv4,
    );
    add(
        "IPv4 version 6",
        with(&v4, &|f| f[IP] = 0x65),
        NIC_GOOD,
        R::Ipv4BadVersion,
    );
    add(
        "IHL 4",
        with(&v4, &|f| f[IP] = 0x44),
        NIC_GOOD,
        R::Ipv4IhlTooSmall,
    );
    add(
        "IHL 0",
        with(&v4, &|f| f[IP] = 0x40),
        NIC_GOOD,
        R::Ipv4IhlTooSmall,
    );
    add(
        "IHL 7 in a 24-byte packet",
        with(&v4, &|f| {
            f[IP] = 0x47;
            f.truncate(IP + 24);
        }),
        NIC_GOOD,
        R::Ipv4IhlPastPacket,
    );
    add(
        "total length 19",
        with(&v4, &|f| f[IP + 2..IP + 4].copy_from_slice(&[0, 19])),
        NIC_GOOD,
        R::Ipv4TotalLenTooSmall,
    );
    add(
        "total length past the frame",
        with(&v4, &|f| f[IP + 3] += 100),
        NIC_GOOD,
        R::Ipv4TotalLenPastFrame,
    );
    add(
        "IPv4 header checksum wrong",
        with(&v4, &|f| f[IP + 8] = 1), // TTL changed, checksum not
        SW,
        R::Ipv4BadChecksum,
    );
    add(
        "NIC says IPv4 checksum bad",
        v4.clone(),
        RxChecksum {
            ip: ChecksumStatus::Bad,
            l4: ChecksumStatus::Good,
        },
        R::Ipv4BadChecksum,
    );
    add(
        "first fragment (MF)",
        with(&v4, &|f| {
            f[IP + 6] |= 0x20;
            fix_ip4(f)
        }),
        SW,
        R::Ipv4Fragment,
    );
    add(
        "later fragment (offset 128)",
        with(&v4, &|f| {
            f[IP + 7] = 0x10;
            fix_ip4(f)
        }),
        SW,
        R::Ipv4Fragment,
    );
    add(
        "IPv4 multicast source",
        with(&v4, &|f| {
            f[IP + 12] = 224;
            fix_ip4(f)
        }),
        SW,
        R::MulticastSourceIp,
    );
    add(
        "IPv4 broadcast source",
        with(&v4, &|f| {
            f[IP + 12..IP + 16].fill(255);
            fix_ip4(f)
        }),
        SW,
        R::MulticastSourceIp,
    );
    add(
        "IPv6 multicast source",
        with(&v6, &|f| f[IP + 8] = 0xff),
        NIC_GOOD,
        R::MulticastSourceIp,
    );
    add(
        "UDP for us",
        with(&v4, &|f| {
            f[IP + 9] = protocol::UDP;
            fix_ip4(f)
        }),
        SW,
        R::NotTcp,
    );
    add(
        "UDP over IPv6 for us",
        with(&v6, &|f| f[IP + 6] = protocol::UDP),
        SW,
        R::NotTcp,
    );
    add(
        "IPv6 cut at 39 bytes",
        v6[..53].to_vec(),
        SW,
        R::TruncatedIpv6,
    );
    add(
        "IPv6 version 4",
        with(&v6, &|f| f[IP] = 0x40),
        SW,
        R::Ipv6BadVersion,
    );
    add(
        "IPv6 payload length past the frame",
        with(&v6, &|f| f[IP + 5] += 1),
        SW,
        R::Ipv6PayloadLenMismatch,
    );
    add(
        "extension header cut short",
        ip6_frame(PEER_IP6, ext::DEST_OPTS, &[6, 0, 1, 1]),
        SW,
        R::TruncatedIpv6ExtHeader,
    );
    add(
        "extension header length past the packet",
        with(&seg6_with_ext(&[(ext::DEST_OPTS, 0)]), &|f| {
            f[TCP6 + 1] = 200
        }),
        SW,
        R::Ipv6ExtChainPastPacket,
    );
    add(
        "nine extension headers",
        seg6_with_ext(&[(ext::DEST_OPTS, 0); 9]),
        SW,
        R::Ipv6ExtChainTooLong,
    );
    add(
        "a routing-header loop (next header = routing, repeated)",
        seg6_with_ext(&[(ext::ROUTING, 0); 12]),
        SW,
        R::Ipv6ExtChainTooLong,
    );
    add(
        "hop-by-hop after destination options",
        seg6_with_ext(&[(ext::DEST_OPTS, 0), (ext::HOP_BY_HOP, 0)]),
        SW,
        R::Ipv6HopByHopNotFirst,
    );
    add(
        "IPv6 fragment",
        with(&seg6_with_ext(&[(ext::FRAGMENT, 0)]), &|f| f[TCP6 + 3] = 1),
        SW,
        R::Ipv6Fragment,
    );
    add(
        "TCP header cut at 19 bytes",
        ip4_frame(PEER_IP4, protocol::TCP, &v4[TCP4..TCP4 + 19]),
        NIC_GOOD,
        R::TruncatedTcp,
    );
    add(
        "data offset 4",
        with(&v4, &|f| f[TCP4 + 12] = 0x40),
        NIC_GOOD,
        R::TcpDataOffsetTooSmall,
    );
    add(
        "data offset past the packet",
        with(&v4, &|f| f[TCP4 + 12] = 0xf0),
        NIC_GOOD,
        R::TcpDataOffsetPastPacket,
    );
    // The 12 option bytes of seg4() start at TCP4 + 20.
    let opts = |o: &[u8]| {
        let mut b = [0u8; 12];
        b[..o.len()].copy_from_slice(o);
        with(&v4, &move |f| f[TCP4 + 20..TCP4 + 32].copy_from_slice(&b))
    };
    add(
        "option kind with no length byte",
        opts(&[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 30]),
        NIC_GOOD,
        R::TruncatedTcpOptions,
    );
    add(
        "option length 0",
        opts(&[30, 0]),
        NIC_GOOD,
        R::TcpOptionLenZero,
    );
    add(
        "option length 1",
        opts(&[30, 1]),
        NIC_GOOD,
        R::TcpOptionLenOne,
    );
    add(
        "option past the header",
        opts(&[1, 1, 1, 1, 30, 9]),
        NIC_GOOD,
        R::TcpOptionPastHeader,
    );
    add(
        "timestamp option of length 8",
        opts(&[8, 8, 0, 0, 0, 0, 0, 0]),
        NIC_GOOD,
        R::TcpOptionBadLength,
    );
    add(
        "window scale 15",
        opts(&[1, 3, 3, 15]),
        NIC_GOOD,
        R::TcpWindowScaleTooLarge,
    );
    add("MSS 0", opts(&[2, 4, 0, 0]), NIC_GOOD, R::TcpMssZero);
    let flags = |fl: u8| with(&v4, &move |f| f[TCP4 + 13] = fl);
    add("SYN+FIN", flags(0x03), NIC_GOOD, R::TcpSynFin);
    add("SYN+RST", flags(0x06), NIC_GOOD, R::TcpSynRst);
    add("no flags", flags(0x00), NIC_GOOD, R::TcpNoFlags);
    add("only ECE and CWR", flags(0xc0), NIC_GOOD, R::TcpNoFlags);
    add(
        "TCP checksum wrong (payload flipped)",
        with(&v4, &|f| f[TCP4 + 33] ^= 1),
        SW,
        R::TcpBadChecksum,
    );
    add(
        "TCP checksum wrong over IPv6",
        with(&v6, &|f| f[TCP6 + 4] ^= 0x80),
        SW,
        R::TcpBadChecksum,
    );
    add(
        "NIC says TCP checksum bad",
        v4.clone(),
        RxChecksum {
            ip: ChecksumStatus::Good,
            l4: ChecksumStatus::Bad,
        },
        R::TcpBadChecksum,
    );
    add(
        "ICMP cut at 7 bytes",
        ip4_frame(PEER_IP4, protocol::ICMP, &[8, 0, 0, 0, 0, 0, 0]),
        SW,
        R::TruncatedIcmp,
    );
    add(
        "ICMP checksum wrong",
        with(&echo4(PEER_IP4, b"x"), &|f| f[TCP4 + 8] ^= 1),
        SW,
        R::IcmpBadChecksum,
    );
    add(
        "ICMPv6 checksum wrong",
        with(&echo6(PEER_IP6, b"x"), &|f| f[TCP6 + 8] ^= 1),
        SW,
        R::IcmpBadChecksum,
    );
    add(
        "ICMP timestamp request",
        ip4_frame(PEER_IP4, protocol::ICMP, &icmp_msg(13, 0, &[0; 16], 0)),
        SW,
        R::IcmpUnsupported,
    );
    add(
        "ICMPv6 neighbor advertisement",
        ip6_frame_to(
            OUR_MAC,
            PEER_IP6,
            OUR_IP6,
            255,
            protocol::ICMPV6,
            &icmp6(PEER_IP6, OUR_IP6, 136, &ns_body(PEER_IP6, None)),
        ),
        SW,
        R::IcmpUnsupported,
    );
    add(
        "NS with hop limit 64",
        neighbor_solicit(PEER_IP6, OUR_IP6, 64),
        SW,
        R::NdInvalid,
    );
    add(
        "NS for another target",
        neighbor_solicit(PEER_IP6, PEER_IP6, 255),
        SW,
        R::NotForUs,
    );
    add(
        "NS with a zero-length option",
        {
            let group = Ipv6Addr::from(ipv6::solicited_node(&OUR_IP6.octets()));
            let mut body = ns_body(OUR_IP6, None);
            body.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
            let m = icmp6(PEER_IP6, group, 135, &body);
            ip6_frame_to(
                [0x33, 0x33, 0xff, 0, 0, 1],
                PEER_IP6,
                group,
                255,
                protocol::ICMPV6,
                &m,
            )
        },
        SW,
        R::NdInvalid,
    );
    add(
        "NS cut short (20 bytes)",
        {
            let m = icmp6(PEER_IP6, OUR_IP6, 135, &[0; 16]);
            ip6_frame_to(OUR_MAC, PEER_IP6, OUR_IP6, 255, protocol::ICMPV6, &m)
        },
        SW,
        R::TruncatedIcmp,
    );
}

/// Faults as a hostile sender crafts them: on a stranger's frames (peer 9, which has no
/// connection), lengths consistent or both checksums repaired, verified in software.
fn crafted_faults(add: &mut dyn FnMut(&'static str, Vec<u8>, RxChecksum, DropReason)) {
    use DropReason as R;
    let stranger = Peer::v4(9, 43000);
    let v4 = stranger.seg(5, 6, TcpFlags::ACK).to_vec(b"data");
    let stranger6 = Peer::v6(9, 43000);
    let v6 = stranger6.seg(5, 6, TcpFlags::ACK).to_vec(b"data");

    add(
        "TCP header cut at 19 (IPv4, lengths consistent)",
        ip4_frame(peer_ip4(9), protocol::TCP, &v4[TCP4..TCP4 + 19]),
        SW,
        R::TruncatedTcp,
    );
    add(
        "TCP header cut at 19 (IPv6, lengths consistent)",
        ip6_frame(peer_ip6(9), protocol::TCP, &v6[TCP6..TCP6 + 19]),
        SW,
        R::TruncatedTcp,
    );
    add(
        "frame cut inside the TCP header (IPv4 length not)",
        v4[..TCP4 + 10].to_vec(),
        NIC_GOOD,
        R::Ipv4TotalLenPastFrame,
    );
    add(
        "IHL 15 past a 24-byte packet",
        with(&v4, &|f| {
            f[IP] = 0x4f;
            f.truncate(IP + 24);
        }),
        NIC_GOOD,
        R::Ipv4IhlPastPacket,
    );
    add(
        "total length larger than the frame",
        with(&v4, &|f| {
            f[IP + 3] += 100;
            fix_ip4(f)
        }),
        SW,
        R::Ipv4TotalLenPastFrame,
    );
    add(
        "total length smaller than the header",
        with(&v4, &|f| {
            f[IP + 2..IP + 4].copy_from_slice(&[0, 19]);
            fix_ip4(f)
        }),
        SW,
        R::Ipv4TotalLenTooSmall,
    );
    add(
        "total length smaller than the frame, cutting the TCP header",
        with(&v4, &|f| {
            f[IP + 2..IP + 4].copy_from_slice(&[0, 39]);
            fix_ip4(f)
        }),
        SW,
        R::TruncatedTcp,
    );
    add(
        "total length smaller than the frame, cutting the payload",
        with(&v4, &|f| {
            let tl = u16::from_be_bytes([f[IP + 2], f[IP + 3]]) - 2;
            f[IP + 2..IP + 4].copy_from_slice(&tl.to_be_bytes());
            fix_ip4(f)
        }),
        SW,
        R::TcpBadChecksum,
    );
    add(
        "IPv4 multicast source, checksums repaired",
        with(&v4, &|f| {
            f[IP + 12] = 224;
            fix4(f)
        }),
        SW,
        R::MulticastSourceIp,
    );
    add(
        "TCP to another IPv4 address, checksums repaired",
        with(&v4, &|f| {
            f[IP + 19] = 99;
            fix4(f)
        }),
        SW,
        R::NotForUs,
    );
    add(
        "data offset 4, checksums repaired",
        with(&v4, &|f| {
            f[TCP4 + 12] = 0x40;
            fix4(f)
        }),
        SW,
        R::TcpDataOffsetTooSmall,
    );
    add(
        "data offset 15 past the packet",
        with(&v4, &|f| {
            f[TCP4 + 12] = 0xf0;
            fix4(f)
        }),
        SW,
        R::TcpDataOffsetPastPacket,
    );
    // A SYN with 12 option bytes to overwrite, padded with NOPs.
    let syn12 = {
        let mut f = stranger.seg(5, 0, TcpFlags::SYN);
        f.opts = TcpOptions {
            timestamp: Some(Timestamp { tsval: 1, tsecr: 0 }),
            ..TcpOptions::default()
        };
        f.to_vec(b"")
    };
    let opts = |o: &[u8]| {
        let mut b = [1u8; 12];
        b[..o.len()].copy_from_slice(o);
        with(&syn12, &move |f| {
            f[TCP4 + 20..TCP4 + 32].copy_from_slice(&b);
            fix4(f)
        })
    };
    add(
        "SYN: option length 0",
        opts(&[30, 0]),
        SW,
        R::TcpOptionLenZero,
    );
    add(
        "SYN: option length 1",
        opts(&[30, 1]),
        SW,
        R::TcpOptionLenOne,
    );
    add(
        "SYN: option running past the header",
        opts(&[1, 1, 1, 1, 30, 9]),
        SW,
        R::TcpOptionPastHeader,
    );
    add(
        "SYN: option kind with no length byte",
        opts(&[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 30]),
        SW,
        R::TruncatedTcpOptions,
    );
    add(
        "SYN: timestamp option of length 8",
        opts(&[8, 8, 0, 0, 0, 0, 0, 0]),
        SW,
        R::TcpOptionBadLength,
    );
    add(
        "SYN: window scale 15",
        opts(&[3, 3, 15]),
        SW,
        R::TcpWindowScaleTooLarge,
    );
    add("SYN: MSS 0", opts(&[2, 4, 0, 0]), SW, R::TcpMssZero);
    let flags = |fl: u8| {
        with(&v4, &move |f| {
            f[TCP4 + 13] = fl;
            fix4(f)
        })
    };
    add("SYN+FIN, checksums repaired", flags(0x03), SW, R::TcpSynFin);
    add("SYN+RST, checksums repaired", flags(0x06), SW, R::TcpSynRst);
    add(
        "no flags, checksums repaired",
        flags(0x00),
        SW,
        R::TcpNoFlags,
    );
    add(
        "only ECE and CWR, checksums repaired",
        flags(0xc0),
        SW,
        R::TcpNoFlags,
    );
}
