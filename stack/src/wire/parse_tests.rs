//! The fast path (`parse::parse_tcp_v4_fast`) against the full parser
//! (`parse::parse_frame`), both private, so these stay unit tests: whenever the fast path
//! takes a frame, its result is the full parser's. The tests of `parse` through the public
//! API are in `stack/tests/parse.rs`.
#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;
use crate::buf::{ChecksumStatus, RxChecksum};
use crate::seq::SeqNumber;

const US_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const US4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const US6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);

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

/// A data segment from the peer (198.18.0.2) to weir with timestamps: the layout the fast
/// path is for.
fn seg4() -> TcpFrame {
    TcpFrame {
        src_mac: [0x02, 0, 0, 0, 0, 0x02],
        dst_mac: US_MAC,
        src_ip: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
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
        ip_id: 77,
        ..TcpFrame::default()
    }
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
    let v6 = TcpFrame {
        src_ip: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)),
        dst_ip: IpAddr::V6(US6),
        ..seg4()
    };
    assert_eq!(fast_parse(&v6.to_vec(b"x"), NIC_GOOD), None);
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
