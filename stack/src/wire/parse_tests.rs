//! Tests of [`super::parse`] against frames built with [`super::TcpFrame`] and the other
//! builders, against captured-looking bytes, and against smoltcp's independent parser:
//! roundtrips, one malformed frame per [`DropReason`] (the corpus), and never-panic tests
//! over arbitrary bytes, every truncation and every bit flip of valid frames.
#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::ethernet::ethertype;
use super::ipv4::protocol;
use super::*;
use crate::buf::{ChecksumStatus, RxChecksum};
use crate::flow::{FlowKey, NO_VLAN};
use crate::seq::SeqNumber;

const US_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const US4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const PEER4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const US6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const PEER6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

fn local() -> LocalAddrs {
    LocalAddrs::new(US_MAC, Some(US4), Some(US6))
}

const SW: RxChecksum = RxChecksum {
    ip: ChecksumStatus::Unknown,
    l4: ChecksumStatus::Unknown,
};
const NIC_GOOD: RxChecksum = RxChecksum {
    ip: ChecksumStatus::Good,
    l4: ChecksumStatus::Good,
};

/// A data segment from the peer to weir with timestamps.
fn seg4() -> TcpFrame {
    TcpFrame {
        src_mac: PEER_MAC,
        dst_mac: US_MAC,
        vlan: None,
        src_ip: IpAddr::V4(PEER4),
        dst_ip: IpAddr::V4(US4),
        sport: 40000,
        dport: 5001,
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

fn seg6() -> TcpFrame {
    TcpFrame {
        src_ip: IpAddr::V6(PEER6),
        dst_ip: IpAddr::V6(US6),
        ..seg4()
    }
}

fn tcp_meta(p: Parsed) -> TcpMeta {
    match p {
        Parsed::Tcp(m) => m,
        other => panic!("expected TCP, got {other:?}"),
    }
}

/// Offsets in an untagged IPv4 frame.
const IP: usize = 14;
const TCP4: usize = 34;
const TCP6: usize = 54;

/// Recomputes the IPv4 header checksum of an untagged IPv4 frame.
fn fix_ip4(f: &mut [u8]) {
    let hl = usize::from(f[IP] & 0x0f) * 4;
    ipv4::Packet::new_unchecked(&mut f[IP..IP + hl]).fill_checksum();
}

/// Recomputes the TCP checksum of an untagged IPv4 frame with a 20-byte IP header.
fn fix_tcp4(f: &mut [u8]) {
    let tl = usize::from(u16::from_be_bytes([f[IP + 2], f[IP + 3]]));
    let seg_len = tl - 20;
    let ps = checksum::pseudo_v4(PEER4.octets(), US4.octets(), protocol::TCP, seg_len as u16);
    tcp::Packet::new_unchecked(&mut f[TCP4..TCP4 + seg_len]).fill_checksum(ps);
}

/// An Ethernet + IPv4 frame from the peer carrying `proto` with body `l4`.
fn ip4_frame(proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 34 + l4.len()];
    ethernet::emit_header(&mut f, US_MAC, PEER_MAC, None, ethertype::IPV4);
    ipv4::emit_header(
        &mut f[IP..],
        PEER4.octets(),
        US4.octets(),
        proto,
        l4.len() as u16,
        64,
        1,
        0,
    );
    f[34..].copy_from_slice(l4);
    f
}

/// An ICMP message with a correct checksum (`pseudo` 0 for ICMPv4).
fn icmp_msg(ty: u8, code: u8, rest: &[u8], pseudo: u64) -> Vec<u8> {
    let mut m = vec![ty, code, 0, 0];
    m.extend_from_slice(rest);
    icmp::Packet::new_unchecked(&mut m[..]).fill_checksum(pseudo);
    m
}

fn echo4_request(data: &[u8]) -> Vec<u8> {
    let mut rest = vec![0x12, 0x34, 0x00, 0x07];
    rest.extend_from_slice(data);
    ip4_frame(protocol::ICMP, &icmp_msg(8, 0, &rest, 0))
}

/// An Ethernet + IPv6 frame: `dst_mac`, src/dst addresses, hop limit, next header, body.
fn ip6_frame(
    dst_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop: u8,
    nh: u8,
    body: &[u8],
) -> Vec<u8> {
    let mut f = vec![0u8; 54 + body.len()];
    ethernet::emit_header(&mut f, dst_mac, PEER_MAC, None, ethertype::IPV6);
    ipv6::emit_header(
        &mut f[IP..],
        src.octets(),
        dst.octets(),
        nh,
        body.len() as u16,
        hop,
    );
    f[54..].copy_from_slice(body);
    f
}

fn icmp6(src: Ipv6Addr, dst: Ipv6Addr, ty: u8, rest: &[u8]) -> Vec<u8> {
    let len = 4 + rest.len();
    let ps = checksum::pseudo_v6(src.octets(), dst.octets(), protocol::ICMPV6, len as u32);
    icmp_msg(ty, 0, rest, ps)
}

fn echo6_request(data: &[u8]) -> Vec<u8> {
    let mut rest = vec![0xab, 0xcd, 0x00, 0x01];
    rest.extend_from_slice(data);
    let m = icmp6(PEER6, US6, 128, &rest);
    ip6_frame(US_MAC, PEER6, US6, 64, protocol::ICMPV6, &m)
}

fn ns_body(target: Ipv6Addr, sll: Option<[u8; 6]>) -> Vec<u8> {
    let mut rest = vec![0u8; 4];
    rest.extend_from_slice(&target.octets());
    if let Some(mac) = sll {
        rest.extend_from_slice(&[1, 1]);
        rest.extend_from_slice(&mac);
    }
    rest
}

/// A neighbor solicitation for `target` from the peer, to the solicited-node group.
fn ns_frame(target: Ipv6Addr, hop: u8) -> Vec<u8> {
    let group = Ipv6Addr::from(ipv6::solicited_node(&target.octets()));
    let m = icmp6(PEER6, group, 135, &ns_body(target, Some(PEER_MAC)));
    ip6_frame(
        ipv6::multicast_mac(&group.octets()),
        PEER6,
        group,
        hop,
        protocol::ICMPV6,
        &m,
    )
}

fn arp_request(target: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    ethernet::emit_header(&mut f, ethernet::BROADCAST, PEER_MAC, None, ethertype::ARP);
    let mut p = arp::Packet::new_unchecked(&mut f[14..42]);
    p.set_ethernet_ipv4();
    p.set_operation(arp::OP_REQUEST);
    p.set_sender(PEER_MAC, PEER4.octets());
    p.set_target([0; 6], target.octets());
    f
}

/// `seg6()` with extension headers `(next-header value of this header, body length in
/// 8-byte units beyond the first 8)` inserted between IPv6 and TCP. The TCP checksum is
/// unchanged: the pseudo-header's upper-layer length excludes extension headers.
fn seg6_with_ext(exts: &[(u8, u8)]) -> Vec<u8> {
    let base = seg6().to_vec(b"xyz");
    let tcp_part = base[TCP6..].to_vec();
    let mut chain = Vec::new();
    for (i, &(kind, units)) in exts.iter().enumerate() {
        let next = exts.get(i + 1).map_or(protocol::TCP, |e| e.0);
        let mut h = vec![0u8; (usize::from(units) + 1) * 8];
        h[0] = next;
        h[1] = if kind == ipv6::ext::FRAGMENT {
            0
        } else {
            units
        };
        chain.extend(h);
    }
    let first = exts.first().map_or(protocol::TCP, |e| e.0);
    let mut body = chain;
    body.extend(tcp_part);
    ip6_frame(US_MAC, PEER6, US6, 64, first, &body)
}

// ---- roundtrips -------------------------------------------------------------------------

#[test]
fn tcp_v4_roundtrip_fills_every_meta_field() {
    let f = seg4();
    let payload = b"hello, weir";
    let frame = f.to_vec(payload);
    assert_eq!(frame.len(), f.frame_len(payload.len()));
    let m = tcp_meta(parse(&frame, SW, &local()));
    assert_eq!(m.flow, FlowKey::v4(PEER4, 40000, US4, 5001));
    assert_eq!((m.src_mac, m.dst_mac), (PEER_MAC, US_MAC));
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
        arp_request(US4),
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
    let mut want = FlowKey::v6(PEER6, 40000, US6, 5001);
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
    assert_eq!(m.flow, FlowKey::v4(PEER4, 45678, US4, 5001));
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
        dst_mac: US_MAC,
        vlan: None,
        src_ip: IpAddr::V4(PEER4),
        dst_ip: IpAddr::V4(US4),
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
    let peer = LocalAddrs::new(PEER_MAC, Some(PEER4), None);
    let back = tcp_meta(parse(&bytes, SW, &peer));
    assert_eq!(back.flow, FlowKey::v4(US4, 5001, PEER4, 45678));
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
    let (s, d) = (IpAddress::Ipv4(PEER4), IpAddress::Ipv4(US4));
    let r = TcpRepr::parse(&tp, &s, &d, &ChecksumCapabilities::default()).unwrap();
    assert_eq!(r.payload, b"payload!");
    assert_eq!(r.sack_ranges[..2], [Some((10, 20)), Some((30, 40))]);
    assert_eq!(r.timestamp.map(|t| (t.tsval, t.tsecr)), Some((111, 222)));

    let g = TcpFrame {
        src_ip: IpAddr::V6(PEER6),
        dst_ip: IpAddr::V6(US6),
        ..f
    };
    let v6 = g.to_vec(b"six");
    let ip = Ipv6Packet::new_checked(&v6[14..]).unwrap();
    let tp = TcpPacket::new_checked(ip.payload()).unwrap();
    let (s, d) = (IpAddress::Ipv6(PEER6), IpAddress::Ipv6(US6));
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
        PEER4.octets(),
        US4.octets(),
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
        dst_ip: IpAddr::V6(US6),
        ..f
    };
    assert_eq!(mixed.emit(b"", &mut [0u8; 200]), 0);
    assert!(mixed.to_vec(b"").is_empty());
    let big = vec![0u8; 70_000];
    assert_eq!(f.emit(&big, &mut vec![0u8; 80_000]), 0);
}

#[test]
fn arp_request_and_reply_rfc826() {
    let req = arp_request(US4);
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
            sender_ip: PEER4,
            target_ip: US4
        }
    );
    let mut out = [0u8; 64];
    let n = emit_arp_reply(&a, US_MAC, &mut out);
    assert_eq!(n, 60);
    let e = ethernet::Frame::new_checked(&out[..n]).unwrap();
    assert_eq!((e.dst_addr(), e.src_addr()), (PEER_MAC, US_MAC));
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
    assert_eq!(source_hardware_addr.0, US_MAC);
    assert_eq!(source_protocol_addr, US4);
    assert_eq!(target_hardware_addr.0, PEER_MAC);
    assert_eq!(target_protocol_addr, PEER4);
    // The reply itself is not a request.
    let peer = LocalAddrs::new(PEER_MAC, Some(PEER4), None);
    assert_eq!(
        parse(&out[..n], SW, &peer),
        Parsed::Drop(DropReason::ArpNotRequest)
    );
}

#[test]
fn icmpv4_echo_and_reply_rfc792() {
    let req = echo4_request(b"abcdefgh");
    let e = match parse(&req, SW, &local()) {
        Parsed::IcmpEcho(e) => e,
        p => panic!("{p:?}"),
    };
    assert_eq!((e.ident, e.seq), (0x1234, 7));
    assert_eq!(e.data(&req), b"abcdefgh");
    let mut out = [0u8; 128];
    let n = emit_echo_reply(&e, US_MAC, e.data(&req), &mut out);
    assert_eq!(n, 60, "14 + 20 + 16 bytes, padded to the Ethernet minimum");
    let ip = smoltcp::wire::Ipv4Packet::new_checked(&out[14..n]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!((ip.src_addr(), ip.dst_addr()), (US4, PEER4));
    let ic = smoltcp::wire::Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(ic.verify_checksum());
    assert_eq!(ic.msg_type(), smoltcp::wire::Icmpv4Message::EchoReply);
    assert_eq!((ic.echo_ident(), ic.echo_seq_no()), (0x1234, 7));
    assert_eq!(ic.data(), b"abcdefgh");
}

#[test]
fn icmpv6_echo_and_reply_rfc4443() {
    let req = echo6_request(b"ping6");
    let e = match parse(&req, SW, &local()) {
        Parsed::IcmpEcho(e) => e,
        p => panic!("{p:?}"),
    };
    assert_eq!((e.src_ip, e.dst_ip), (IpAddr::V6(PEER6), IpAddr::V6(US6)));
    let mut out = [0u8; 128];
    let n = emit_echo_reply(&e, US_MAC, e.data(&req), &mut out);
    let ip = smoltcp::wire::Ipv6Packet::new_checked(&out[14..n]).unwrap();
    let ic = smoltcp::wire::Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(ic.verify_checksum(&US6, &PEER6));
    assert_eq!(ic.msg_type(), smoltcp::wire::Icmpv6Message::EchoReply);
    assert_eq!(ic.payload(), b"ping6");
}

#[test]
fn neighbor_solicit_and_advert_rfc4861() {
    let req = ns_frame(US6, 255);
    let ns = match parse(&req, SW, &local()) {
        Parsed::NeighborSolicit(ns) => ns,
        p => panic!("{p:?}"),
    };
    assert_eq!(
        (ns.src_ip, ns.target, ns.source_ll),
        (PEER6, US6, Some(PEER_MAC))
    );
    let mut out = [0u8; 128];
    let n = emit_neighbor_advert(&ns, US_MAC, &mut out);
    assert_eq!(n, 14 + 40 + 32);
    assert_eq!(&out[..6], &PEER_MAC);
    let ip = smoltcp::wire::Ipv6Packet::new_checked(&out[14..n]).unwrap();
    assert_eq!(ip.hop_limit(), 255);
    let ic = smoltcp::wire::Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(ic.verify_checksum(&US6, &PEER6));
    match smoltcp::wire::NdiscRepr::parse(&ic).unwrap() {
        smoltcp::wire::NdiscRepr::NeighborAdvert {
            flags,
            target_addr,
            lladdr,
        } => {
            assert!(flags.contains(smoltcp::wire::NdiscNeighborFlags::SOLICITED));
            assert!(flags.contains(smoltcp::wire::NdiscNeighborFlags::OVERRIDE));
            assert!(!flags.contains(smoltcp::wire::NdiscNeighborFlags::ROUTER));
            assert_eq!(target_addr, US6);
            assert_eq!(lladdr.map(|l| l.as_bytes().to_vec()), Some(US_MAC.to_vec()));
        }
        r => panic!("{r:?}"),
    }
    // Duplicate address detection: from ::, answered to all-nodes without S.
    let group = Ipv6Addr::from(ipv6::solicited_node(&US6.octets()));
    let m = icmp6(Ipv6Addr::UNSPECIFIED, group, 135, &ns_body(US6, None));
    let dad = ip6_frame(
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
    let n = emit_neighbor_advert(&ns, US_MAC, &mut out);
    assert_eq!(&out[..6], &[0x33, 0x33, 0, 0, 0, 1]);
    let ip = smoltcp::wire::Ipv6Packet::new_checked(&out[14..n]).unwrap();
    assert_eq!(ip.dst_addr(), Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1));
    let ic = smoltcp::wire::Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(ic.verify_checksum(&US6, &ip.dst_addr()));
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
    s.record(&parse(&arp_request(US4), SW, &local()));
    s.record(&parse(&echo4_request(b""), SW, &local()));
    s.record(&parse(&ns_frame(US6, 255), SW, &local()));
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
/// checksum faults are parsed with software verification.
fn corpus() -> Vec<(&'static str, Vec<u8>, RxChecksum, DropReason)> {
    use DropReason as R;
    let mut c: Vec<(&'static str, Vec<u8>, RxChecksum, DropReason)> = Vec::new();
    let v4 = seg4().to_vec(b"data");
    let v6 = seg6().to_vec(b"data");
    let vlan = TcpFrame {
        vlan: Some(7),
        ..seg4()
    }
    .to_vec(b"data");
    let mut add = |d, f: Vec<u8>, cs, r| c.push((d, f, cs, r));
    let with = |f: &[u8], edit: &dyn Fn(&mut Vec<u8>)| {
        let mut f = f.to_vec();
        edit(&mut f);
        f
    };

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
    let arp = arp_request(US4);
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
    add("ARP for another IP", arp_request(PEER4), SW, R::NotForUs);
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
        "later fragment (offset)",
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
        ip6_frame(US_MAC, PEER6, US6, 64, ipv6::ext::DEST_OPTS, &[6, 0, 1, 1]),
        SW,
        R::TruncatedIpv6ExtHeader,
    );
    add(
        "extension header length past the packet",
        with(&seg6_with_ext(&[(ipv6::ext::DEST_OPTS, 0)]), &|f| {
            f[TCP6 + 1] = 200
        }),
        SW,
        R::Ipv6ExtChainPastPacket,
    );
    add(
        "nine extension headers",
        seg6_with_ext(&[(ipv6::ext::DEST_OPTS, 0); 9]),
        SW,
        R::Ipv6ExtChainTooLong,
    );
    add(
        "a routing-header loop (next header = routing, repeated)",
        seg6_with_ext(&[(ipv6::ext::ROUTING, 0); 12]),
        SW,
        R::Ipv6ExtChainTooLong,
    );
    add(
        "hop-by-hop after destination options",
        seg6_with_ext(&[(ipv6::ext::DEST_OPTS, 0), (ipv6::ext::HOP_BY_HOP, 0)]),
        SW,
        R::Ipv6HopByHopNotFirst,
    );
    add(
        "IPv6 fragment",
        with(&seg6_with_ext(&[(ipv6::ext::FRAGMENT, 0)]), &|f| {
            f[TCP6 + 3] = 1
        }),
        SW,
        R::Ipv6Fragment,
    );
    add(
        "TCP header cut at 19 bytes",
        ip4_frame(protocol::TCP, &v4[TCP4..TCP4 + 19]),
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
        ip4_frame(protocol::ICMP, &[8, 0, 0, 0, 0, 0, 0]),
        SW,
        R::TruncatedIcmp,
    );
    add(
        "ICMP checksum wrong",
        with(&echo4_request(b"x"), &|f| f[34 + 8] ^= 1),
        SW,
        R::IcmpBadChecksum,
    );
    add(
        "ICMPv6 checksum wrong",
        with(&echo6_request(b"x"), &|f| f[54 + 8] ^= 1),
        SW,
        R::IcmpBadChecksum,
    );
    add(
        "ICMP timestamp request",
        ip4_frame(protocol::ICMP, &icmp_msg(13, 0, &[0; 16], 0)),
        SW,
        R::IcmpUnsupported,
    );
    add(
        "ICMPv6 neighbor advertisement",
        ip6_frame(
            US_MAC,
            PEER6,
            US6,
            255,
            58,
            &icmp6(PEER6, US6, 136, &ns_body(PEER6, None)),
        ),
        SW,
        R::IcmpUnsupported,
    );
    add("NS with hop limit 64", ns_frame(US6, 64), SW, R::NdInvalid);
    add(
        "NS for another target",
        ns_frame(PEER6, 255),
        SW,
        R::NotForUs,
    );
    add(
        "NS with a zero-length option",
        {
            let group = Ipv6Addr::from(ipv6::solicited_node(&US6.octets()));
            let mut body = ns_body(US6, None);
            body.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
            let m = icmp6(PEER6, group, 135, &body);
            ip6_frame([0x33, 0x33, 0xff, 0, 0, 1], PEER6, group, 255, 58, &m)
        },
        SW,
        R::NdInvalid,
    );
    add(
        "NS cut short (20 bytes)",
        {
            let m = icmp6(PEER6, US6, 135, &[0; 16]);
            ip6_frame(US_MAC, PEER6, US6, 255, 58, &m)
        },
        SW,
        R::TruncatedIcmp,
    );
    c
}

#[test]
fn malformed_corpus_each_dropped_for_its_reason() {
    let mut seen = std::collections::HashSet::new();
    let cases = corpus();
    // A slot left dirty by a previous TCP parse must not leak into the next result.
    let mut slot = parse(&LINUX_SYN, SW, &local());
    for (desc, frame, cs, want) in &cases {
        assert_eq!(
            parse(frame, *cs, &local()),
            Parsed::Drop(*want),
            "case: {desc}"
        );
        parse_into(frame, *cs, &local(), &mut slot);
        assert_eq!(slot, Parsed::Drop(*want), "parse_into, case: {desc}");
        seen.insert(*want);
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
    // Guard for the helpers above: re-checksumming an unmodified frame changes nothing.
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
        arp_request(US4),
        echo4_request(b"echo"),
        echo6_request(b"echo"),
        ns_frame(US6, 255),
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
            (IpAddr::V6(PEER6), IpAddr::V6(US6))
        } else {
            (IpAddr::V4(PEER4), IpAddr::V4(US4))
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

/// What the full parser makes of `f` (the fast path skipped).
fn full_parse(f: &[u8], cs: RxChecksum) -> Parsed {
    let mut p = Parsed::Drop(DropReason::TruncatedEthernet);
    if let Err(r) = parse::parse_frame(f, cs, &local(), &mut p) {
        p = Parsed::Drop(r);
    }
    p
}

/// The fast path's result for `f`, if it takes the frame.
fn fast_parse(f: &[u8], cs: RxChecksum) -> Option<Parsed> {
    let mut p = Parsed::Drop(DropReason::TruncatedEthernet);
    parse::parse_tcp_v4_fast(f, cs, &local(), &mut p).then_some(p)
}

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
        let fast = fast_parse(&f, NIC_GOOD).expect("fast path taken");
        assert!(matches!(fast, Parsed::Tcp(_)));
        assert_eq!(fast, full_parse(&f, NIC_GOOD));
        assert_eq!(fast, parse(&f, NIC_GOOD, &local()));
    }
    // Software checksums, other layouts: the full parser's.
    let f = seg4().to_vec(b"x");
    assert_eq!(fast_parse(&f, SW), None);
    let mut sack = seg4();
    sack.opts.sack_count = 1;
    assert_eq!(fast_parse(&sack.to_vec(b"x"), NIC_GOOD), None);
    assert_eq!(fast_parse(&seg6().to_vec(b"x"), NIC_GOOD), None);
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
                if let Some(p) = fast_parse(&g, NIC_GOOD) {
                    assert_eq!(p, full_parse(&g, NIC_GOOD), "byte {at} = {v:#x}");
                    taken += 1;
                }
            }
        }
        for n in 0..=f.len() {
            if let Some(p) = fast_parse(&f[..n], NIC_GOOD) {
                assert_eq!(p, full_parse(&f[..n], NIC_GOOD), "cut at {n}");
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
        if let Some(p) = fast_parse(&f[..n], NIC_GOOD) {
            prop_assert_eq!(p, full_parse(&f[..n], NIC_GOOD));
        }
    }
}
