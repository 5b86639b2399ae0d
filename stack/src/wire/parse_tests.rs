//! Tests of [`super::parse`] against frames built with [`super::TcpFrame`] and the other
//! builders, and against captured-looking bytes: roundtrips, one test per drop reason, and
//! never-panic property tests.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;
use crate::buf::{ChecksumStatus, RxChecksum};
use crate::flow::FlowKey;
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
