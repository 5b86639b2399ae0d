//! Multi-segment mbufs as a NIC with scattered receive leaves them: `Mbuf::unchain`
//! splits a chain into one-segment mbufs (each freed alone, every element back in its
//! pool), the stack parses the frame from the first segment with the rest as its tail,
//! and a chain with a shared segment is left alone.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use dpdk::{Eal, Mbuf, Mempool};
use stack::buf::PacketBuf;
use stack::seq::SeqNumber;
use stack::wire::{
    parse, parse_chain_into, DropReason, LocalAddrs, Parsed, TcpFlags, TcpFrame, TcpOptions,
};

const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const OUR_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 44, 1);

/// `frame` in a chain of mbufs of at most `seg` bytes each, as `rte_pktmbuf_chain` links
/// them.
fn chain(pool: &Mempool, frame: &[u8], seg: usize) -> Mbuf {
    let mut parts = frame.chunks(seg);
    let mut head = pool.alloc_empty().expect("mbuf");
    assert!(head.extend_from_slice(parts.next().expect("a part")));
    for p in parts {
        let mut m = pool.alloc_empty().expect("mbuf");
        assert!(m.extend_from_slice(p));
        // SAFETY: both are valid mbufs we own; on success the chain owns `m`.
        let r = unsafe { dpdk_sys::rte_pktmbuf_chain(head.as_ptr(), m.into_raw().as_ptr()) };
        assert_eq!(r, 0, "chained");
    }
    head
}

#[test]
fn chains_unchain_into_one_segment_mbufs_and_parse_from_the_first() {
    let eal = Eal::init(common::eal_args("wj-chain", &["-l", "0"])).expect("EAL");
    // No per-lcore cache: in_use counts exactly what is out of the pool.
    let pool = Mempool::new(&eal, "wj_chain", 255, 0, 128 + 2048).expect("pool");
    let payload: Vec<u8> = (0..8948u32).map(|i| (i * 13 % 251) as u8).collect();
    let f = TcpFrame {
        src_mac: [2, 0, 0, 0, 0, 2],
        dst_mac: OUR_MAC,
        src_ip: IpAddr::V4(Ipv4Addr::new(198, 18, 44, 2)),
        dst_ip: IpAddr::V4(OUR_IP),
        sport: 40000,
        dport: 5001,
        seq: SeqNumber(77),
        ack: SeqNumber(1),
        flags: TcpFlags::ACK,
        window: 502,
        opts: TcpOptions::default(),
        ttl: 64,
        ..TcpFrame::default()
    }
    .to_vec(&payload);
    let local = LocalAddrs::new(OUR_MAC, Some(OUR_IP), None);
    let want = parse(&f, Default::default(), &local);
    assert!(matches!(want, Parsed::Tcp(m) if m.payload_len == 8948));

    for seg in [2048usize, 1001] {
        let mut m = chain(&pool, &f, seg);
        let n = f.len().div_ceil(seg);
        assert_eq!(
            (m.segment_count(), m.pkt_len(), m.to_vec()),
            (n, f.len(), f.clone())
        );
        assert!(!m.is_contiguous());
        assert_eq!(pool.in_use(), n);
        let mut tail = Vec::new();
        assert!(m.unchain(&mut |s| tail.push(s)));
        assert_eq!(tail.len(), n - 1);
        assert!(m.is_contiguous() && m.pkt_len() == m.len() && m.len() == seg);
        for t in &tail {
            assert!(t.is_contiguous() && t.pkt_len() == t.len());
        }
        let mut rebuilt = m.data().to_vec();
        tail.iter()
            .for_each(|t| rebuilt.extend_from_slice(t.data()));
        assert_eq!(rebuilt, f);
        let mut got = Parsed::Drop(DropReason::TruncatedEthernet);
        assert!(parse_chain_into(
            m.data(),
            &tail[..],
            m.rx_checksum(),
            &local,
            &mut got
        ));
        assert_eq!(got, want, "seg {seg}");
        // Each is an mbuf of its own: freed one by one, all go back to the pool.
        assert_eq!(pool.in_use(), n);
        drop(tail);
        assert_eq!(pool.in_use(), 1);
        drop(m);
        assert_eq!(pool.in_use(), 0);
    }

    // A shared segment (another holder's reference): nothing changes.
    let mut m = chain(&pool, &f, 1500);
    // SAFETY: `m` is a valid chain head we own; its `next` is its second segment.
    let second = unsafe { (*m.as_ptr()).next };
    // SAFETY: the second segment is a valid mbuf of the chain we own; one more reference
    // for the test, given back below.
    unsafe { dpdk_sys::rte_mbuf_refcnt_update(second, 1) };
    let mut tail = Vec::new();
    assert!(!m.unchain(&mut |s| tail.push(s)));
    assert!(tail.is_empty());
    assert_eq!(
        (m.segment_count(), m.to_vec()),
        (f.len().div_ceil(1500), f.clone())
    );
    // SAFETY: gives back the reference taken above.
    unsafe { dpdk_sys::rte_mbuf_refcnt_update(second, -1) };
    drop(m);
    assert_eq!(pool.in_use(), 0);
}
