//! A `net_ring` vdev loops what it transmits back to its receive queue: 100,000 mbufs with
//! distinct payloads go through it and every one comes back byte for byte, and the
//! mempool's in-use count returns to where it started. Then the same through a
//! `ring_port_pair` (rte_eth_from_rings), whose ports are wired to each other, and a pair
//! with several queues (`ring_port_pair_queues`), wired queue to queue.

mod common;

use dpdk::{ring_port_pair, Clock, Eal, Mbuf, Mempool, Port, PortConfig, PortRxQueue, PortTxQueue};
use stack::buf::{ChecksumStatus, PacketBuf, RxChecksum};
use stack::driver::{Burst, RxQueue, TxQueue};

const TOTAL: u64 = 100_000;

/// A payload unique to `i`, 60..=1500 bytes long.
fn payload(i: u64) -> Vec<u8> {
    let len = 60 + (i * 7919 % 1441) as usize;
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&i.to_be_bytes());
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    v
}

/// Sends TOTAL distinct frames from `tx` and checks they all arrive on `rx`, in order.
fn pump(pool: Mempool, tx: &mut PortTxQueue, rx: &mut PortRxQueue) {
    let alloc = pool;
    let (mut sent, mut received) = (0u64, 0u64);
    let mut out: Burst<Mbuf> = Burst::new();
    let mut inb: Burst<Mbuf> = Burst::new();
    let mut idle = 0u32;
    while received < TOTAL {
        while sent + (out.len() as u64) < TOTAL && !out.is_full() {
            let p = payload(sent + out.len() as u64);
            let mut m = alloc.alloc_len(p.len()).expect("mempool exhausted");
            m.data_mut().copy_from_slice(&p);
            out.push(m);
        }
        sent += tx.tx_burst(&mut out) as u64;
        let n = rx.rx_burst(&mut inb);
        for m in inb.drain(..) {
            assert!(m.is_contiguous());
            assert_eq!(m.data(), &payload(received)[..], "frame {received} differs");
            received += 1;
        }
        idle = if n == 0 { idle + 1 } else { 0 };
        assert!(
            idle < 10_000_000,
            "stalled: sent {sent}, received {received}"
        );
    }
    assert!(out.is_empty());
    assert_eq!(sent, TOTAL);
}

#[test]
fn ring_vdev_and_ring_pair_deliver_every_byte() {
    let eal = Eal::init(common::eal_args("ring", &["-l", "0", "--vdev=net_ring0"])).expect("EAL");
    println!("{}", Eal::version());
    let pool = Mempool::new(&eal, "ring_test", 4095, 256, dpdk::DEFAULT_DATA_ROOM).expect("pool");
    let start_in_use = pool.in_use();

    // 1. net_ring0 loops back to itself.
    let ports = eal.ports();
    assert_eq!(ports, vec![0], "expected exactly the net_ring0 vdev");
    let info = Port::info(&eal, 0).expect("info");
    assert_eq!(info.driver_name, "net_ring");
    let mut port = Port::configure(&eal, 0, pool, &PortConfig::default()).expect("configure");
    port.start().expect("start");
    assert!(port.link().expect("link").up);
    assert_eq!(port.offloads().rss_hf, 0);
    let clock = Clock::new(&eal);
    let t0 = clock.now();
    {
        let mut rx = port.rx_queue(0).expect("rxq");
        let mut tx = port.tx_queue(0).expect("txq");
        assert!(port.rx_queue(0).is_err(), "a queue has one handle");
        pump(pool, &mut tx, &mut rx);
    }
    let elapsed = clock.now() - t0;
    println!("net_ring0: {TOTAL} frames in {} ms", elapsed.as_millis());
    let stats = port.stats().expect("stats");
    assert_eq!(stats.opackets, TOTAL);
    assert_eq!(stats.ipackets, TOTAL);
    assert_eq!(pool.in_use(), start_in_use, "mbufs leaked");
    port.stop().expect("stop");

    // 2. A back-to-back pair from rte_eth_from_rings.
    let (a, b) = ring_port_pair(&eal, "pair", 1024).expect("ring pair");
    let mut pa = Port::configure(&eal, a, pool, &PortConfig::default()).expect("configure a");
    let mut pb = Port::configure(&eal, b, pool, &PortConfig::default()).expect("configure b");
    pa.start().expect("start a");
    pb.start().expect("start b");
    let mut tx = pa.tx_queue(0).expect("txq a");
    let mut rx = pb.rx_queue(0).expect("rxq b");
    pump(pool, &mut tx, &mut rx);
    drop((tx, rx));
    // Nothing looped back to a.
    let mut rx_a = pa.rx_queue(0).expect("rxq a");
    let mut inb: Burst<Mbuf> = Burst::new();
    assert_eq!(rx_a.rx_burst(&mut inb), 0);
    drop(rx_a);
    assert_eq!(pool.in_use(), start_in_use, "mbufs leaked");

    // 3. tx_burst leaves what it could not send, in order: fill b's ring (1023 slots).
    let mut tx = pa.tx_queue(0).expect("txq a");
    let alloc = pool;
    let mut queued = 0usize;
    let mut left: Burst<Mbuf> = Burst::new();
    while left.is_empty() {
        let mut out: Burst<Mbuf> = Burst::new();
        for i in 0..64u8 {
            let mut m = alloc.alloc_len(60).expect("alloc");
            m.data_mut()[0] = i;
            out.push(m);
        }
        queued += tx.tx_burst(&mut out);
        left = out;
    }
    assert_eq!(queued, 1023);
    assert_eq!(
        left[0].data()[0] as usize,
        1023 % 64,
        "unsent keep their order"
    );
    drop(left);
    let mut rx = pb.rx_queue(0).expect("rxq b");
    let mut drained = 0;
    loop {
        let n = rx.rx_burst(&mut inb);
        inb.clear();
        if n == 0 {
            break;
        }
        drained += n;
    }
    assert_eq!(drained, 1023);
    assert_eq!(pool.in_use(), start_in_use, "mbufs leaked");

    // 4. What weir-gen's ring benchmark relies on. The ring passes mbuf pointers, so the
    //    offload flags a sender leaves are what the receiver reads: set_received leaves
    //    only the RX verdicts (a TX request does not leak through). A stamped pool hands
    //    out mbufs that hold the stamp after the headroom, also after a round trip.
    let stamp: Vec<u8> = (0..1448u32).map(|i| (i * 7 + 3) as u8).collect();
    let stamped = Mempool::new_stamped(
        &eal,
        "ring_stamped",
        1023,
        32,
        dpdk::DEFAULT_DATA_ROOM,
        66,
        &stamp,
    )
    .expect("stamped pool");
    assert!(Mempool::new_stamped(&eal, "too_big", 63, 0, 256, 66, &stamp).is_err());
    let good = RxChecksum {
        ip: ChecksumStatus::Good,
        l4: ChecksumStatus::Good,
    };
    for round in 0..3 {
        let mut out: Burst<Mbuf> = Burst::new();
        for _ in 0..64 {
            let mut m = stamped.alloc_len(66 + 1448).expect("alloc");
            assert_eq!(&m.data()[66..], &stamp[..], "round {round}: stamp");
            m.data_mut()[..66].fill(0xee);
            m.set_tx_checksum(stack::buf::TxChecksumOffload {
                l2_len: 14,
                l3_len: 20,
                ipv4: true,
            });
            m.set_received(good);
            out.push(m);
        }
        assert_eq!(tx.tx_burst(&mut out), 64);
        let mut got = 0;
        while got < 64 {
            rx.rx_burst(&mut inb);
            for m in inb.iter() {
                assert_eq!(m.rx_checksum(), good);
                assert_eq!(
                    m.ol_flags(),
                    u64::from(
                        dpdk::sys::RTE_MBUF_F_RX_IP_CKSUM_GOOD
                            | dpdk::sys::RTE_MBUF_F_RX_L4_CKSUM_GOOD
                    ),
                    "only the RX verdicts arrive"
                );
                assert_eq!(&m.data()[66..], &stamp[..]);
            }
            got += inb.len();
            Mbuf::free_burst(&mut inb);
            assert!(inb.is_empty());
        }
    }
    assert_eq!(stamped.in_use(), 0, "mbufs leaked");

    // 5. A frame sent with TX checksum offload requested (pseudo-header sum in the TCP
    //    field, IPv4 checksum zero) is completed by the far end exactly as software
    //    checksums would have been.
    let payload: Vec<u8> = (0..1000u32).map(|i| (i * 13) as u8).collect();
    let f = stack::wire::TcpFrame {
        src_ip: std::net::Ipv4Addr::new(198, 18, 0, 1).into(),
        dst_ip: std::net::Ipv4Addr::new(198, 18, 0, 2).into(),
        sport: 5001,
        dport: 1024,
        flags: stack::wire::TcpFlags::ACK,
        ..stack::wire::TcpFrame::default()
    };
    let mut want = vec![0u8; f.frame_len(payload.len())];
    f.emit(&payload, &mut want);
    let mut m = pool.alloc_len(want.len()).expect("alloc");
    let d = m.data_mut();
    d.copy_from_slice(&want);
    let tcp_len = (want.len() - 34) as u64;
    let ph = stack::wire::checksum::pseudo_v4([198, 18, 0, 1], [198, 18, 0, 2], 6, 0) + tcp_len;
    d[24..26].fill(0);
    d[50..52].copy_from_slice(&stack::wire::checksum::fold(ph).to_be_bytes());
    m.set_tx_checksum(stack::buf::TxChecksumOffload {
        l2_len: 14,
        l3_len: 20,
        ipv4: true,
    });
    let mut out: Burst<Mbuf> = Burst::new();
    out.push(m);
    assert_eq!(tx.tx_burst(&mut out), 1);
    while rx.rx_burst(&mut inb) == 0 {}
    let mut m = inb.pop().expect("frame");
    assert_ne!(m.data(), &want[..]);
    assert!(m.complete_tx_checksums());
    assert_eq!(m.data(), &want[..], "completed checksums differ");
    assert!(!m.complete_tx_checksums(), "requests cleared");
    drop(m);
    assert_eq!(pool.in_use(), start_in_use, "mbufs leaked");
    drop((tx, rx));

    // 6. A pair with 3 queues: what a port sends on its queue q arrives on the other's
    //    queue q and nowhere else, both ways. Beyond the ring PMD's 16, none.
    assert!(dpdk::ring_port_pair_queues(&eal, "pair17", 64, 17).is_err());
    assert!(dpdk::ring_port_pair_queues(&eal, "pair0", 64, 0).is_err());
    let (a, b) = dpdk::ring_port_pair_queues(&eal, "pair3", 64, 3).expect("ring pair");
    let three = PortConfig {
        rx_queues: 3,
        tx_queues: 3,
        ..PortConfig::default()
    };
    let mut pa = Port::configure(&eal, a, pool, &three).expect("configure a");
    let mut pb = Port::configure(&eal, b, pool, &three).expect("configure b");
    pa.start().expect("start a");
    pb.start().expect("start b");
    for (from, to) in [(&pa, &pb), (&pb, &pa)] {
        for q in 0..3u16 {
            let mut out: Burst<Mbuf> = Burst::new();
            let mut m = pool.alloc_len(60).expect("alloc");
            m.data_mut()[0] = q as u8;
            out.push(m);
            assert_eq!(from.tx_queue(q).expect("txq").tx_burst(&mut out), 1);
            for r in 0..3u16 {
                let n = to.rx_queue(r).expect("rxq").rx_burst(&mut inb);
                assert_eq!(n, usize::from(r == q), "sent on {q}, {n} on {r}");
                if let Some(m) = inb.pop() {
                    assert_eq!(m.data()[0], q as u8);
                }
            }
        }
    }
    assert_eq!(pool.in_use(), start_in_use, "mbufs leaked");
}
