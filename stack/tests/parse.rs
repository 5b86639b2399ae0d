//! Tests of `wire::parse` against frames built with `TcpFrame` and testkit's other
//! builders, against captured-looking bytes, and against smoltcp's independent parser:
//! roundtrips, the malformed-frame corpus (`testkit::corpus`, at least one frame per
//! `DropReason`), and never-panic tests over arbitrary bytes, every truncation and every
//! bit flip of valid frames; and the fast path's agreement with the full parser
//! (`parse_fast` against `parse_full`).
#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::net::{IpAddr, Ipv6Addr};

use proptest::prelude::*;

use stack::buf::{ChecksumStatus, RxChecksum};
use stack::flow::{FlowKey, NO_VLAN};
use stack::seq::SeqNumber;
use stack::wire::parse::{parse_fast, parse_full};
use stack::wire::*;
use testkit::corpus;
use testkit::frames::{
    arp_request, echo4, echo6, fix_ip4, fix_tcp4, icmp6, ip6_frame_to, ip6_with_ext, local,
    neighbor_solicit, ns_body, seg4, seg6, IP, NIC_GOOD, OUR_IP4, OUR_IP6, OUR_MAC, PEER_IP4,
    PEER_IP6, PEER_MAC, SW, TCP4,
};

fn tcp_meta(p: Parsed) -> TcpMeta {
    match p {
        Parsed::Tcp(m) => m,
        other => panic!("expected TCP, got {other:?}"),
    }
}

/// `seg6()` carrying `xyz`, with extension headers `(next-header value of this header,
/// body length in 8-byte units beyond the first 8)` between IPv6 and TCP.
fn seg6_with_ext(exts: &[(u8, u8)]) -> Vec<u8> {
    ip6_with_ext(&seg6(), b"xyz", exts)
}

// ---- roundtrips -------------------------------------------------------------------------

#[test]
fn tcp_v4_roundtrip_fills_every_meta_field() {
    let f = seg4();
    let payload = b"hello, weir";
    let frame = f.to_vec(payload);
    assert_eq!(frame.len(), f.frame_len(payload.len()));
    let m = tcp_meta(parse(&frame, SW, &local()));
    assert_eq!(m.flow, FlowKey::v4(PEER_IP4, 40000, OUR_IP4, 5001));
    assert_eq!((m.src_mac, m.dst_mac), (PEER_MAC, OUR_MAC));
    assert_eq!(
        (m.seq, m.ack, m.window),
        (SeqNumber(1000), SeqNumber(2000), 512)
    );
    assert_eq!(m.flags, TcpFlags::ACK | TcpFlags::PSH);
    assert_eq!(m.header_len, 32);
    assert_eq!(m.opts, f.opts);
    assert_eq!(m.option_bytes(), &[1, 1, 8, 10, 0, 0, 0, 111, 0, 0, 0, 222]);
    assert_eq!(m.tsval_at, Some(4));
    assert_eq!(usize::from(m.payload_off), f.header_len());
    assert_eq!(
        &frame[usize::from(m.payload_off)..][..usize::from(m.payload_len)],
        payload
    );
    assert_eq!(
        m.net,
        NetMeta {
            ttl: 64,
            tos: 0,
            df: true,
            ip_id: 77,
            flow_label: 0,
            ip_options: false
        }
    );
}

#[test]
fn parse_into_overwrites_every_field_of_a_dirty_slot() {
    let mut sack = seg4();
    sack.opts.sack_count = 3;
    let mut slot = parse(&sack.to_vec(b"x"), SW, &local());
    assert!(matches!(slot, Parsed::Tcp(m) if m.opts.sack_count == 3));
    for frame in [
        seg6().to_vec(b"plain"),
        LINUX_SYN.to_vec(),
        arp_request(PEER_IP4, OUR_IP4),
        seg4().to_vec(b""),
    ] {
        parse_into(&frame, SW, &local(), &mut slot);
        assert_eq!(slot, parse(&frame, SW, &local()));
    }
}

#[test]
fn tcp_v6_vlan_roundtrip() {
    let f = TcpFrame {
        vlan: Some(42),
        ..seg6()
    };
    let frame = f.to_vec(&[7u8; 100]);
    let m = tcp_meta(parse(&frame, SW, &local()));
    let mut want = FlowKey::v6(PEER_IP6, 40000, OUR_IP6, 5001);
    want.vlan = 42;
    assert_eq!(m.flow, want);
    assert_eq!(m.payload_len, 100);
    assert_eq!(usize::from(m.payload_off), 18 + 40 + 32);
    assert!(m.net.df && !m.net.ip_options);
}

#[test]
fn ethernet_padding_is_stripped() {
    // A bare ACK without options is 54 bytes: padded to 60 on the wire.
    let f = TcpFrame {
        opts: TcpOptions::default(),
        ..seg4()
    };
    let mut frame = f.to_vec(&[]);
    assert_eq!(frame.len(), 60);
    frame[54..].fill(0xee); // non-zero padding must not count as payload or in the checksum
    let m = tcp_meta(parse(&frame, SW, &local()));
    assert_eq!((m.payload_len, m.payload_off), (0, 54));
    // IPv6 too: payload length decides, not the frame length.
    let mut frame = seg6().to_vec(b"ab");
    frame.extend_from_slice(&[0x55; 7]);
    assert_eq!(tcp_meta(parse(&frame, SW, &local())).payload_len, 2);
}

#[test]
fn ipv4_options_are_flagged_rfc791() {
    let mut frame = seg4().to_vec(b"data");
    // Insert 4 NOP option bytes after the 20-byte IPv4 header: IHL 6.
    frame.splice(TCP4..TCP4, [1u8, 1, 1, 1]);
    frame[IP] = 0x46;
    let tl = u16::from_be_bytes([frame[IP + 2], frame[IP + 3]]) + 4;
    frame[IP + 2..IP + 4].copy_from_slice(&tl.to_be_bytes());
    fix_ip4(&mut frame);
    let m = tcp_meta(parse(&frame, SW, &local()));
    assert!(m.net.ip_options);
    assert_eq!(usize::from(m.payload_off), 14 + 24 + 32);
    assert_eq!(m.payload_len, 4);
}

#[test]
fn ipv6_ext_headers_walked_rfc8200_s4() {
    let frame = seg6_with_ext(&[
        (ipv6::ext::HOP_BY_HOP, 0),
        (ipv6::ext::ROUTING, 1),
        (ipv6::ext::FRAGMENT, 0), // atomic fragment: offset 0, M clear
        (ipv6::ext::DEST_OPTS, 0),
    ]);
    let m = tcp_meta(parse(&frame, SW, &local()));
    assert!(m.net.ip_options);
    assert_eq!(usize::from(m.payload_off), 54 + 8 + 16 + 8 + 8 + 32);
    assert_eq!(
        &frame[usize::from(m.payload_off)..][..usize::from(m.payload_len)],
        b"xyz"
    );
    // Exactly MAX_EXT_HEADERS is still fine.
    let eight = [(ipv6::ext::DEST_OPTS, 0); ipv6::MAX_EXT_HEADERS];
    assert!(matches!(
        parse(&seg6_with_ext(&eight), SW, &local()),
        Parsed::Tcp(_)
    ));
}

/// A Linux SYN as captured (tcpdump -xx): 198.18.0.2:45678 -> 198.18.0.1:5001,
/// `[S], seq 439041101, win 64240, options [mss 1460,sackOK,TS val 2586524749 ecr
/// 0,nop,wscale 7]`, IP id 0x5e2f, DF, TTL 64.
const LINUX_SYN: [u8; 74] = [
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00, // eth
    0x45, 0x00, 0x00, 0x3c, 0x5e, 0x2f, 0x40, 0x00, 0x40, 0x06, 0x50, 0x65, 0xc6, 0x12, 0x00, 0x02,
    0xc6, 0x12, 0x00, 0x01, // ipv4
    0xb2, 0x6e, 0x13, 0x89, 0x1a, 0x2b, 0x3c, 0x4d, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0,
    0xcd, 0xfe, 0x00, 0x00, // tcp
    0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x9a, 0x2b, 0x3c, 0x4d, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x03, 0x03, 0x07, // options
];

#[test]
fn linux_syn_capture_rfc7323_rfc2018() {
    let m = tcp_meta(parse(&LINUX_SYN, SW, &local()));
    assert_eq!(m.flow, FlowKey::v4(PEER_IP4, 45678, OUR_IP4, 5001));
    assert_eq!(m.flags, TcpFlags::SYN);
    assert_eq!(m.seq, SeqNumber(0x1a2b_3c4d));
    assert_eq!(m.window, 64240);
    assert_eq!(m.opts.mss, Some(1460));
    assert!(m.opts.sack_permitted);
    assert_eq!(m.opts.wscale, Some(7));
    assert_eq!(
        m.opts.timestamp,
        Some(Timestamp {
            tsval: 2_586_524_749,
            tsecr: 0
        })
    );
    assert_eq!(m.tsval_at, Some(8));
    assert_eq!((m.header_len, m.payload_off, m.payload_len), (40, 74, 0));
    assert_eq!((m.net.ip_id, m.net.ttl, m.net.df), (0x5e2f, 64, true));
    // The builder reproduces the capture byte for byte.
    let f = TcpFrame {
        src_mac: PEER_MAC,
        dst_mac: OUR_MAC,
        vlan: None,
        src_ip: IpAddr::V4(PEER_IP4),
        dst_ip: IpAddr::V4(OUR_IP4),
        sport: 45678,
        dport: 5001,
        seq: m.seq,
        ack: SeqNumber(0),
        flags: TcpFlags::SYN,
        window: 64240,
        opts: m.opts,
        ttl: 64,
        ip_id: 0x5e2f,
    };
    assert_eq!(f.to_vec(&[]), LINUX_SYN.to_vec());
}

#[test]
fn syn_ack_reply_to_meta() {
    let m = tcp_meta(parse(&LINUX_SYN, SW, &local()));
    let mut r = TcpFrame::reply_to(&m);
    r.seq = SeqNumber(9);
    r.ack = m.seq + 1;
    r.flags = TcpFlags::SYN | TcpFlags::ACK;
    r.opts = TcpOptions {
        mss: Some(1460),
        sack_permitted: true,
        wscale: Some(9),
        timestamp: Some(Timestamp {
            tsval: 5,
            tsecr: 2_586_524_749,
        }),
        ..Default::default()
    };
    let bytes = r.to_vec(&[]);
    // Parse it from the peer's side.
    let peer = LocalAddrs::new(PEER_MAC, Some(PEER_IP4), None);
    let back = tcp_meta(parse(&bytes, SW, &peer));
    assert_eq!(back.flow, FlowKey::v4(OUR_IP4, 5001, PEER_IP4, 45678));
    assert_eq!(back.opts, r.opts);
    assert_eq!(back.ack, SeqNumber(0x1a2b_3c4e));
    assert_eq!(
        &back.option_bytes()[..8],
        &[2, 4, 5, 0xb4, 4, 2, 8, 10],
        "Linux layout: SACK-perm packed before TS"
    );
}

#[test]
fn builder_agrees_with_smoltcp() {
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{IpAddress, Ipv4Packet, Ipv6Packet, TcpPacket, TcpRepr};
    let mut f = seg4();
    f.opts.sack_count = 2;
    f.opts.sack[0] = SackBlock {
        left: SeqNumber(10),
        right: SeqNumber(20),
    };
    f.opts.sack[1] = SackBlock {
        left: SeqNumber(30),
        right: SeqNumber(40),
    };
    let v4 = f.to_vec(b"payload!");
    let ip = Ipv4Packet::new_checked(&v4[14..]).unwrap();
    assert!(ip.verify_checksum());
    let tp = TcpPacket::new_checked(ip.payload()).unwrap();
    let (s, d) = (IpAddress::Ipv4(PEER_IP4), IpAddress::Ipv4(OUR_IP4));
    let r = TcpRepr::parse(&tp, &s, &d, &ChecksumCapabilities::default()).unwrap();
    assert_eq!(r.payload, b"payload!");
    assert_eq!(r.sack_ranges[..2], [Some((10, 20)), Some((30, 40))]);
    assert_eq!(r.timestamp.map(|t| (t.tsval, t.tsecr)), Some((111, 222)));

    let g = TcpFrame {
        src_ip: IpAddr::V6(PEER_IP6),
        dst_ip: IpAddr::V6(OUR_IP6),
        ..f
    };
    let v6 = g.to_vec(b"six");
    let ip = Ipv6Packet::new_checked(&v6[14..]).unwrap();
    let tp = TcpPacket::new_checked(ip.payload()).unwrap();
    let (s, d) = (IpAddress::Ipv6(PEER_IP6), IpAddress::Ipv6(OUR_IP6));
    assert!(tp.verify_checksum(&s, &d));
}

#[test]
fn offload_variant_leaves_pseudo_header_sum() {
    let f = seg4();
    let mut buf = [0u8; 128];
    let n = f.emit_offload(b"abc", &mut buf);
    let sw = f.to_vec(b"abc");
    assert_eq!(n, sw.len());
    assert_eq!(
        &buf[IP + 10..IP + 12],
        &[0, 0],
        "IPv4 checksum left to the NIC"
    );
    let seg_len = (n - TCP4) as u16;
    let ps = checksum::fold(checksum::pseudo_v4(
        PEER_IP4.octets(),
        OUR_IP4.octets(),
        6,
        seg_len,
    ));
    assert_eq!(&buf[TCP4 + 16..TCP4 + 18], &ps.to_be_bytes());
    let o = f.tx_offload();
    assert_eq!((o.l2_len, o.l3_len, o.ipv4), (14, 20, true));
    // With the NIC's verdicts the offload frame's TCP part is accepted as is.
    let mut fixed = buf[..n].to_vec();
    fix_ip4(&mut fixed);
    assert!(matches!(
        parse(
            &fixed,
            RxChecksum {
                ip: ChecksumStatus::Unknown,
                l4: ChecksumStatus::Good
            },
            &local()
        ),
        Parsed::Tcp(_)
    ));
}

#[test]
fn builder_refuses_short_buffers_and_mixed_families() {
    let f = seg4();
    let mut small = [0u8; 40];
    assert_eq!(f.emit(b"", &mut small), 0);
    let mixed = TcpFrame {
        dst_ip: IpAddr::V6(OUR_IP6),
        ..f
    };
    assert_eq!(mixed.emit(b"", &mut [0u8; 200]), 0);
    assert!(mixed.to_vec(b"").is_empty());
    let big = vec![0u8; 70_000];
    assert_eq!(f.emit(&big, &mut vec![0u8; 80_000]), 0);
}

#[test]
fn arp_request_and_reply_rfc826() {
    let req = arp_request(PEER_IP4, OUR_IP4);
    let a = match parse(&req, SW, &local()) {
        Parsed::ArpRequest(a) => a,
        p => panic!("{p:?}"),
    };
    assert_eq!(
        a,
        ArpRequest {
            src_mac: PEER_MAC,
            vlan: NO_VLAN,
            sender_mac: PEER_MAC,
            sender_ip: PEER_IP4,
            target_ip: OUR_IP4
        }
    );
    let mut out = [0u8; 64];
    let n = emit_arp_reply(&a, OUR_MAC, &mut out);
    assert_eq!(n, 60);
    let e = ethernet::Frame::new_checked(&out[..n]).unwrap();
    assert_eq!((e.dst_addr(), e.src_addr()), (PEER_MAC, OUR_MAC));
    let r = smoltcp::wire::ArpRepr::parse(
        &smoltcp::wire::ArpPacket::new_checked(&out[14..42]).unwrap(),
    )
    .unwrap();
    let smoltcp::wire::ArpRepr::EthernetIpv4 {
        operation,
        source_hardware_addr,
        source_protocol_addr,
        target_hardware_addr,
        target_protocol_addr,
    } = r
    else {
        panic!()
    };
    assert_eq!(operation, smoltcp::wire::ArpOperation::Reply);
    assert_eq!(source_hardware_addr.0, OUR_MAC);
    assert_eq!(source_protocol_addr, OUR_IP4);
    assert_eq!(target_hardware_addr.0, PEER_MAC);
    assert_eq!(target_protocol_addr, PEER_IP4);
    // The reply itself is not a request.
    let peer = LocalAddrs::new(PEER_MAC, Some(PEER_IP4), None);
    assert_eq!(
        parse(&out[..n], SW, &peer),
        Parsed::Drop(DropReason::ArpNotRequest)
    );
}

#[test]
fn icmpv4_echo_and_reply_rfc792() {
    let req = echo4(PEER_IP4, b"abcdefgh");
    let e = match parse(&req, SW, &local()) {
        Parsed::IcmpEcho(e) => e,
        p => panic!("{p:?}"),
    };
    assert_eq!((e.ident, e.seq), (0x1234, 7));
    assert_eq!(e.data(&req), b"abcdefgh");
    let mut out = [0u8; 128];
    let n = emit_echo_reply(&e, OUR_MAC, e.data(&req), &mut out);
    assert_eq!(n, 60, "14 + 20 + 16 bytes, padded to the Ethernet minimum");
    let ip = smoltcp::wire::Ipv4Packet::new_checked(&out[14..n]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!((ip.src_addr(), ip.dst_addr()), (OUR_IP4, PEER_IP4));
    let ic = smoltcp::wire::Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(ic.verify_checksum());
    assert_eq!(ic.msg_type(), smoltcp::wire::Icmpv4Message::EchoReply);
    assert_eq!((ic.echo_ident(), ic.echo_seq_no()), (0x1234, 7));
    assert_eq!(ic.data(), b"abcdefgh");
}

#[test]
fn icmpv6_echo_and_reply_rfc4443() {
    let req = echo6(PEER_IP6, b"ping6");
    let e = match parse(&req, SW, &local()) {
        Parsed::IcmpEcho(e) => e,
        p => panic!("{p:?}"),
    };
    assert_eq!(
        (e.src_ip, e.dst_ip),
        (IpAddr::V6(PEER_IP6), IpAddr::V6(OUR_IP6))
    );
    let mut out = [0u8; 128];
    let n = emit_echo_reply(&e, OUR_MAC, e.data(&req), &mut out);
    let ip = smoltcp::wire::Ipv6Packet::new_checked(&out[14..n]).unwrap();
    let ic = smoltcp::wire::Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(ic.verify_checksum(&OUR_IP6, &PEER_IP6));
    assert_eq!(ic.msg_type(), smoltcp::wire::Icmpv6Message::EchoReply);
    assert_eq!(ic.payload(), b"ping6");
}

#[test]
fn neighbor_solicit_and_advert_rfc4861() {
    let req = neighbor_solicit(PEER_IP6, OUR_IP6, 255);
    let ns = match parse(&req, SW, &local()) {
        Parsed::NeighborSolicit(ns) => ns,
        p => panic!("{p:?}"),
    };
    assert_eq!(
        (ns.src_ip, ns.target, ns.source_ll),
        (PEER_IP6, OUR_IP6, Some(PEER_MAC))
    );
    let mut out = [0u8; 128];
    let n = emit_neighbor_advert(&ns, OUR_MAC, &mut out);
    assert_eq!(n, 14 + 40 + 32);
    assert_eq!(&out[..6], &PEER_MAC);
    let ip = smoltcp::wire::Ipv6Packet::new_checked(&out[14..n]).unwrap();
    assert_eq!(ip.hop_limit(), 255);
    let ic = smoltcp::wire::Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(ic.verify_checksum(&OUR_IP6, &PEER_IP6));
    match smoltcp::wire::NdiscRepr::parse(&ic).unwrap() {
        smoltcp::wire::NdiscRepr::NeighborAdvert {
            flags,
            target_addr,
            lladdr,
        } => {
            assert!(flags.contains(smoltcp::wire::NdiscNeighborFlags::SOLICITED));
            assert!(flags.contains(smoltcp::wire::NdiscNeighborFlags::OVERRIDE));
            assert!(!flags.contains(smoltcp::wire::NdiscNeighborFlags::ROUTER));
            assert_eq!(target_addr, OUR_IP6);
            assert_eq!(
                lladdr.map(|l| l.as_bytes().to_vec()),
                Some(OUR_MAC.to_vec())
            );
        }
        r => panic!("{r:?}"),
    }
    // Duplicate address detection: from ::, answered to all-nodes without S.
    let group = Ipv6Addr::from(ipv6::solicited_node(&OUR_IP6.octets()));
    let m = icmp6(Ipv6Addr::UNSPECIFIED, group, 135, &ns_body(OUR_IP6, None));
    let dad = ip6_frame_to(
        [0x33, 0x33, 0xff, 0, 0, 1],
        Ipv6Addr::UNSPECIFIED,
        group,
        255,
        58,
        &m,
    );
    let ns = match parse(&dad, SW, &local()) {
        Parsed::NeighborSolicit(ns) => ns,
        p => panic!("{p:?}"),
    };
    let n = emit_neighbor_advert(&ns, OUR_MAC, &mut out);
    assert_eq!(&out[..6], &[0x33, 0x33, 0, 0, 0, 1]);
    let ip = smoltcp::wire::Ipv6Packet::new_checked(&out[14..n]).unwrap();
    assert_eq!(ip.dst_addr(), Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1));
    let ic = smoltcp::wire::Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(ic.verify_checksum(&OUR_IP6, &ip.dst_addr()));
    assert_eq!(out[14 + 40 + 4] & 0x40, 0, "S clear for DAD");
}

#[test]
fn nic_checksum_verdicts_are_honoured() {
    let mut frame = seg4().to_vec(b"data");
    frame[TCP4 + 16] ^= 0xff; // wrong TCP checksum
    frame[IP + 10] ^= 0xff; // wrong IPv4 checksum
    assert!(matches!(parse(&frame, NIC_GOOD, &local()), Parsed::Tcp(_)));
    assert_eq!(
        parse(&frame, SW, &local()),
        Parsed::Drop(DropReason::Ipv4BadChecksum)
    );
    let good = seg4().to_vec(b"data");
    let bad_ip = RxChecksum {
        ip: ChecksumStatus::Bad,
        l4: ChecksumStatus::Good,
    };
    let bad_l4 = RxChecksum {
        ip: ChecksumStatus::Good,
        l4: ChecksumStatus::Bad,
    };
    assert_eq!(
        parse(&good, bad_ip, &local()),
        Parsed::Drop(DropReason::Ipv4BadChecksum)
    );
    assert_eq!(
        parse(&good, bad_l4, &local()),
        Parsed::Drop(DropReason::TcpBadChecksum)
    );
}

#[test]
fn parse_stats_count_by_kind_and_reason() {
    let mut s = ParseStats::default();
    s.record(&parse(&seg4().to_vec(b""), SW, &local()));
    s.record(&parse(&arp_request(PEER_IP4, OUR_IP4), SW, &local()));
    s.record(&parse(&echo4(PEER_IP4, b""), SW, &local()));
    s.record(&parse(
        &neighbor_solicit(PEER_IP6, OUR_IP6, 255),
        SW,
        &local(),
    ));
    s.record(&parse(&[0u8; 3], SW, &local()));
    s.record(&parse(&[0u8; 3], SW, &local()));
    assert_eq!((s.tcp, s.arp, s.icmp, s.nd), (1, 1, 1, 1));
    assert_eq!(s.dropped(DropReason::TruncatedEthernet), 2);
    assert_eq!((s.total_drops(), s.total()), (2, 6));
    let mut t = ParseStats::default();
    t.merge(&s);
    t.merge(&s);
    assert_eq!(t.total(), 12);
    assert_eq!(
        t.drops_by_reason()
            .find(|(r, _)| *r == DropReason::TruncatedEthernet),
        Some((DropReason::TruncatedEthernet, 4))
    );
}

#[test]
fn drop_reason_names_are_unique_snake_case() {
    let all = DropReason::all();
    assert_eq!(all.len(), DropReason::COUNT);
    let mut names: Vec<_> = all.iter().map(|r| r.name()).collect();
    for (i, r) in all.iter().enumerate() {
        assert_eq!(r.index(), i);
        assert!(r
            .name()
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
    }
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), DropReason::COUNT);
}

// ---- the malformed-frame corpus: at least one frame per DropReason -----------------------

/// `(description, frame, checksum verdicts, expected reason)`. Structural corruptions are
/// parsed with the NIC's "good" verdicts so the checksum does not hide the intended fault;

// ---- the malformed-frame corpus: at least one frame per DropReason -----------------------

#[test]
fn malformed_corpus_each_dropped_for_its_reason() {
    let mut seen = std::collections::HashSet::new();
    let cases = corpus::parse_drops();
    // A slot left dirty by a previous TCP parse must not leak into the next result.
    let mut slot = parse(&LINUX_SYN, SW, &local());
    for c in &cases {
        assert_eq!(
            parse(&c.frame, c.cs, &local()),
            Parsed::Drop(c.reason),
            "case: {}",
            c.name
        );
        parse_into(&c.frame, c.cs, &local(), &mut slot);
        assert_eq!(slot, Parsed::Drop(c.reason), "parse_into, case: {}", c.name);
        seen.insert(c.reason);
    }
    let missing: Vec<_> = DropReason::all()
        .iter()
        .filter(|r| !seen.contains(r))
        .map(|r| r.name())
        .collect();
    assert!(
        missing.is_empty(),
        "reasons without a corpus case: {missing:?}"
    );
    assert!(cases.len() >= 40, "corpus has {} cases", cases.len());
}

#[test]
fn tcp_checksum_fix_helper_keeps_frames_valid() {
    // Guard for testkit's checksum helpers: re-checksumming an unmodified frame changes nothing.
    let v4 = seg4().to_vec(b"data");
    let mut f = v4.clone();
    fix_ip4(&mut f);
    fix_tcp4(&mut f);
    assert_eq!(f, v4);
}

// ---- robustness: parse never panics ------------------------------------------------------

fn valid_frames() -> Vec<Vec<u8>> {
    let mut sack = seg4();
    sack.opts.sack_count = 3;
    vec![
        seg4().to_vec(b"some payload"),
        seg6().to_vec(b"v6"),
        TcpFrame {
            vlan: Some(3),
            ..seg6()
        }
        .to_vec(b""),
        sack.to_vec(b""),
        LINUX_SYN.to_vec(),
        seg6_with_ext(&[(ipv6::ext::HOP_BY_HOP, 0), (ipv6::ext::FRAGMENT, 0)]),
        arp_request(PEER_IP4, OUR_IP4),
        echo4(PEER_IP4, b"echo"),
        echo6(PEER_IP6, b"echo"),
        neighbor_solicit(PEER_IP6, OUR_IP6, 255),
    ]
}

const VERDICTS: [RxChecksum; 3] = [
    SW,
    NIC_GOOD,
    RxChecksum {
        ip: ChecksumStatus::Bad,
        l4: ChecksumStatus::Bad,
    },
];

#[test]
fn every_truncation_and_bit_flip_of_valid_frames() {
    let l = local();
    for f in valid_frames() {
        for n in 0..=f.len() {
            for cs in VERDICTS {
                let _ = parse(&f[..n], cs, &l);
            }
        }
        for i in 0..f.len() * 8 {
            let mut g = f.clone();
            g[i / 8] ^= 1 << (i % 8);
            for cs in VERDICTS {
                let p = parse(&g, cs, &l);
                // Whatever it is, a TCP result describes bytes inside the frame.
                if let Parsed::Tcp(m) = p {
                    assert!(usize::from(m.payload_off) + usize::from(m.payload_len) <= g.len());
                }
            }
        }
    }
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        v in 0usize..3,
    ) {
        let _ = parse(&bytes, VERDICTS[v], &local());
    }

    #[test]
    fn never_panics_on_mutated_valid_frames(
        which in 0usize..10,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        v in 0usize..3,
    ) {
        let mut f = valid_frames().swap_remove(which);
        for (i, b) in edits {
            let at = i.index(f.len());
            f[at] = b;
        }
        let n = cut.index(f.len() + 1);
        if let Parsed::Tcp(m) = parse(&f[..n], VERDICTS[v], &local()) {
            prop_assert!(usize::from(m.payload_off) + usize::from(m.payload_len) <= n);
        }
    }

    #[test]
    fn tcp_frame_roundtrips(
        v6 in any::<bool>(),
        vlan in proptest::option::of(0u16..4095),
        sport in 1u16.., dport in 1u16..,
        seq in any::<u32>(), ack in any::<u32>(),
        flags in prop::sample::select(vec![0x10u8, 0x18, 0x02, 0x12, 0x11, 0x04, 0x14, 0xd0]),
        window in any::<u16>(),
        mss in proptest::option::of(1u16..),
        wscale in proptest::option::of(0u8..=14),
        sack_permitted in any::<bool>(),
        ts in proptest::option::of((any::<u32>(), any::<u32>())),
        sacks in proptest::collection::vec((any::<u32>(), any::<u32>()), 0..=4),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut opts = TcpOptions {
            mss, wscale, sack_permitted,
            timestamp: ts.map(|(tsval, tsecr)| Timestamp { tsval, tsecr }),
            ..Default::default()
        };
        for (i, (l, r)) in sacks.iter().enumerate() {
            opts.sack[i] = SackBlock { left: SeqNumber(*l), right: SeqNumber(*r) };
        }
        opts.sack_count = sacks.len() as u8;
        let (src_ip, dst_ip) = if v6 {
            (IpAddr::V6(PEER_IP6), IpAddr::V6(OUR_IP6))
        } else {
            (IpAddr::V4(PEER_IP4), IpAddr::V4(OUR_IP4))
        };
        let f = TcpFrame {
            vlan, src_ip, dst_ip, sport, dport,
            seq: SeqNumber(seq), ack: SeqNumber(ack), flags: TcpFlags(flags), window, opts,
            ..seg4()
        };
        let frame = f.to_vec(&payload);
        let m = tcp_meta(parse(&frame, SW, &local()));
        prop_assert_eq!(m.flow.sport, sport);
        prop_assert_eq!(m.flow.vlan, vlan.unwrap_or(NO_VLAN));
        prop_assert_eq!((m.seq, m.ack, m.window), (f.seq, f.ack, window));
        prop_assert_eq!(m.flags, f.flags);
        prop_assert_eq!((m.opts.mss, m.opts.wscale, m.opts.sack_permitted), (mss, wscale, sack_permitted));
        prop_assert_eq!(m.opts.timestamp, f.opts.timestamp);
        // SACK blocks beyond what fits in 40 option bytes are dropped by the builder.
        let n = usize::from(m.opts.sack_count);
        prop_assert!(n <= sacks.len());
        prop_assert_eq!(&m.opts.sack[..n], &f.opts.sack[..n]);
        prop_assert_eq!(usize::from(m.header_len), f.tcp_header_len());
        if let Some(at) = m.tsval_at {
            let at = usize::from(at);
            prop_assert_eq!(&m.raw_opts[at..at + 4], &ts.unwrap().0.to_be_bytes());
        }
        prop_assert_eq!(&frame[usize::from(m.payload_off)..][..payload.len()], &payload[..]);
    }
}

/// A rough cost figure, not a benchmark (criterion benches live in `benches/`):
/// `cargo test --release -p stack parse_cost -- --ignored --nocapture`.
#[test]
#[ignore = "a cost printout, not a check; run with --release --ignored --nocapture"]
fn parse_cost_ns_per_frame() {
    let f = seg4().to_vec(&[0u8; 1448]);
    let l = local();
    let n = 20_000_000u32;
    let t = std::time::Instant::now();
    let mut acc = 0u64;
    for _ in 0..n {
        if let Parsed::Tcp(m) = parse(std::hint::black_box(&f), NIC_GOOD, &l) {
            acc += u64::from(m.payload_len);
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / f64::from(n);
    println!("parse: {ns:.1} ns/frame ({acc})");
    let mut slot = Parsed::Drop(DropReason::TruncatedEthernet);
    let t = std::time::Instant::now();
    for _ in 0..n {
        parse_into(std::hint::black_box(&f), NIC_GOOD, &l, &mut slot);
        if let Parsed::Tcp(m) = &slot {
            acc += u64::from(m.payload_len);
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / f64::from(n);
    println!("parse_into: {ns:.1} ns/frame ({acc})");
    let n = n / 10;
    let t = std::time::Instant::now();
    for _ in 0..n {
        parse_into(std::hint::black_box(&f), SW, &l, &mut slot);
        if let Parsed::Tcp(m) = &slot {
            acc += u64::from(m.payload_len);
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / f64::from(n);
    println!("parse_into, software checksums, 1448 B: {ns:.1} ns/frame ({acc})");
}

// ---- The fast path against the full parser ----

/// Frames the fast path is for: IPv4 TCP with NOP NOP TS or no options.
fn fast_frames() -> Vec<Vec<u8>> {
    let plain = TcpFrame {
        opts: TcpOptions::default(),
        flags: TcpFlags::ACK,
        ..seg4()
    };
    let mut padded = plain.to_vec(b"ab");
    padded.resize(60, 0); // Ethernet padding after a short segment
    vec![
        seg4().to_vec(b"some payload"),
        seg4().to_vec(b""),
        plain.to_vec(&[7u8; 1448]),
        padded,
    ]
}

#[test]
fn fast_path_takes_the_common_layout() {
    for f in fast_frames() {
        let fast = parse_fast(&f, NIC_GOOD, &local()).expect("fast path taken");
        assert!(matches!(fast, Parsed::Tcp(_)));
        assert_eq!(fast, parse_full(&f, NIC_GOOD, &local()));
        assert_eq!(fast, parse(&f, NIC_GOOD, &local()));
    }
    // Software checksums, other layouts: the full parser's.
    let f = seg4().to_vec(b"x");
    assert_eq!(parse_fast(&f, SW, &local()), None);
    let mut sack = seg4();
    sack.opts.sack_count = 1;
    assert_eq!(parse_fast(&sack.to_vec(b"x"), NIC_GOOD, &local()), None);
    let v6 = TcpFrame {
        src_ip: IpAddr::V6(PEER_IP6),
        dst_ip: IpAddr::V6(OUR_IP6),
        ..seg4()
    };
    assert_eq!(parse_fast(&v6.to_vec(b"x"), NIC_GOOD, &local()), None);
}

#[test]
fn fast_path_agrees_with_the_full_parser() {
    // Every header byte set to a handful of values, and every truncation: whenever the
    // fast path takes a frame its result is the full parser's.
    let mut taken = 0;
    for f in fast_frames() {
        for at in 0..f.len().min(80) {
            for v in [
                0u8, 1, 2, 5, 6, 8, 0x0a, 0x10, 0x45, 0x46, 0x50, 0x80, 0xe0, 0xff,
            ] {
                let mut g = f.clone();
                g[at] = v;
                g[at] ^= u8::from(v == f[at]); // always a change
                if let Some(p) = parse_fast(&g, NIC_GOOD, &local()) {
                    assert_eq!(p, parse_full(&g, NIC_GOOD, &local()), "byte {at} = {v:#x}");
                    taken += 1;
                }
            }
        }
        for n in 0..=f.len() {
            if let Some(p) = parse_fast(&f[..n], NIC_GOOD, &local()) {
                assert_eq!(p, parse_full(&f[..n], NIC_GOOD, &local()), "cut at {n}");
            }
        }
    }
    assert!(taken > 0);
}

proptest! {
    #[test]
    fn fast_path_agrees_on_mutated_frames(
        which in 0usize..4,
        edits in proptest::collection::vec((0usize..80, any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut f = fast_frames().swap_remove(which);
        for (i, b) in edits {
            let at = i % f.len();
            f[at] = b;
        }
        let n = cut.index(f.len() + 1);
        if let Some(p) = parse_fast(&f[..n], NIC_GOOD, &local()) {
            prop_assert_eq!(p, parse_full(&f[..n], NIC_GOOD, &local()));
        }
    }
}

// ---- the pipeline's flow-hash hint ------------------------------------------------------

/// The hint the pipeline fetches a connection by is the hash TCP's table looks the
/// segment's key up with, for every frame in the fast layout; other frames give none.
#[test]
fn flow_hash_hint_is_the_hash_of_the_parsed_key() {
    for (sport, dport) in [(40000, 5001), (1, 65535), (65535, 80)] {
        let mut f = seg4();
        f.sport = sport;
        f.dport = dport;
        for payload in [&b""[..], b"hello, weir"] {
            let frame = f.to_vec(payload);
            let m = tcp_meta(parse(&frame, SW, &local()));
            assert_eq!(fast::flow_hash_hint(&frame), Some(m.flow.hash32()));
        }
    }
    assert_eq!(fast::flow_hash_hint(&seg6().to_vec(b"x")), None);
    assert_eq!(fast::flow_hash_hint(&arp_request(PEER_IP4, OUR_IP4)), None);
    assert_eq!(fast::flow_hash_hint(&echo4(PEER_IP4, b"ping")), None);
    assert_eq!(fast::flow_hash_hint(&[0u8; 20]), None);
}
