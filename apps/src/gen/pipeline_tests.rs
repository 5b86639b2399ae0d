//! The sender against weir's own pipeline, in memory on a virtual clock: every byte
//! arrives in order, every flow closes cleanly, and the ACK-counting rules differ the way
//! RFC 3465 says they should.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use sha2::{Digest, Sha256};
use stack::ack::AckPolicy;
use stack::buf::PacketBuf;
use stack::driver::Burst;
use stack::gro::GroConfig;
use stack::mem::{VecBuf, VecPool};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::tcp::{Event, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::LocalAddrs;

use super::payload::stream_digest;
use super::*;

const RX_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];

struct Outcome {
    sender: Sender,
    digests: HashMap<u16, (u64, [u8; 32])>,
    closed: usize,
    gen_pool: usize,
    rx_pool: usize,
}

fn run(cfg: GenConfig, gro: bool, policy: AckPolicy, max_iters: u64) -> Outcome {
    let mut sender = Sender::new(cfg);
    let mut gen_pool = VecPool::new(100_000, 2048);
    let mut rx_pool = VecPool::new(100_000, 2048);
    let mut p: Pipeline<VecBuf> = Pipeline::new(PipelineConfig {
        local: LocalAddrs::new(RX_MAC, Some(Ipv4Addr::new(198, 18, 0, 1)), None),
        gro: gro.then(GroConfig::default),
        tcp: TcpConfig {
            max_conns: 256,
            ..TcpConfig::default()
        },
        listen: vec![(5001, policy)],
        tx_csum_offload: false,
    })
    .expect("pipeline");
    let mut hashers: HashMap<stack::tcp::ConnId, (u16, u64, Sha256)> = HashMap::new();
    let mut digests = HashMap::new();
    let mut closed = 0;
    let mut now = Instant::from_nanos(1_000_000);
    for _ in 0..max_iters {
        now += Duration::from_micros(5);
        sender.handle_timeout(now);
        let mut seg: Burst<VecBuf> = Burst::new();
        sender.poll_tx(now, &mut gen_pool, &mut seg);
        // The wire: frames move into buffers of the receiver's pool.
        let mut rx: Burst<VecBuf> = Burst::new();
        for b in seg.drain(..) {
            rx.push(rx_pool.adopt(b.data().to_vec()).expect("rx pool"));
        }
        if !rx.is_empty() {
            p.handle_rx_burst(now, &mut rx);
        }
        p.handle_timeout(now);
        while let Some(ev) = p.tcp().poll_event() {
            match ev {
                Event::Opened(id) => {
                    let port = p.tcp().flow(id).map_or(0, |f| f.sport);
                    hashers.insert(id, (port, 0, Sha256::new()));
                }
                Event::Readable(id) | Event::PeerClosed(id) => {
                    let h = hashers.get_mut(&id);
                    let _ = p.tcp().recv(id, |slices| {
                        let mut n = 0;
                        if let Some(h) = h {
                            for s in slices {
                                h.2.update(s.bytes());
                                n += usize::from(s.len);
                            }
                            h.1 += n as u64;
                        }
                        n
                    });
                    if matches!(ev, Event::PeerClosed(_)) {
                        let _ = p.tcp().close(now, id);
                    }
                }
                Event::Closed(id) => {
                    closed += 1;
                    if let Some((port, n, h)) = hashers.remove(&id) {
                        digests.insert(port, (n, h.finalize().into()));
                    }
                }
                Event::Reset(_) => {}
            }
        }
        let mut acks: Burst<VecBuf> = Burst::new();
        p.poll_tx(now, &mut rx_pool, &mut acks);
        for a in acks.drain(..) {
            sender.handle_rx(now, a.data());
        }
        if sender.is_done() && closed == sender.config().flows as usize {
            break;
        }
    }
    drop(p);
    Outcome {
        sender,
        digests,
        closed,
        gen_pool: gen_pool.in_use(),
        rx_pool: rx_pool.in_use(),
    }
}

fn cfg(flows: u32, bytes: u64) -> GenConfig {
    GenConfig {
        flows,
        dst_mac: Some(RX_MAC),
        bytes_per_flow: Some(bytes),
        duration: None,
        ..GenConfig::default()
    }
}

#[test]
fn transfers_arrive_in_order_and_close_cleanly() {
    for (gro, interleave) in [(true, Interleave::Segment), (false, Interleave::Train(8))] {
        let bytes = 300_000 + 7;
        let c = GenConfig {
            interleave,
            write_size: 10_000,
            ..cfg(5, bytes)
        };
        let o = run(c, gro, AckPolicy::default(), 200_000);
        let s = o.sender.stats();
        assert!(o.sender.is_done(), "gro {gro}: {s:?}");
        assert_eq!(s.closed, 5, "{s:?}");
        assert_eq!(o.closed, 5);
        assert_eq!(s.retransmits, 0, "{s:?}");
        let want = stream_digest(bytes);
        assert_eq!(o.digests.len(), 5);
        for (port, (n, d)) in &o.digests {
            assert_eq!(*n, bytes, "port {port}");
            assert_eq!(*d, want, "port {port}");
        }
        assert_eq!(o.gen_pool, 0);
        assert_eq!(o.rx_pool, 0);
    }
}

#[test]
fn per_ack_counting_grows_slower_than_bytes_with_stretch_acks() {
    // With GRO and Linux's stretch ACKs, per-ACK counting grows by one MSS per ACK while
    // byte counting grows by what each ACK covers (RFC 3465 §2.2).
    let grow = |rule| {
        let c = GenConfig {
            ack_counting: rule,
            ..cfg(1, 3_000_000)
        };
        let o = run(c, true, AckPolicy::default(), 400);
        o.sender.cwnd_summary().max
    };
    let per_ack = grow(AckCounting::PerAck);
    let abc = grow(AckCounting::Abc(2));
    let bytes = grow(AckCounting::Bytes);
    assert!(per_ack <= abc && abc <= bytes, "{per_ack} {abc} {bytes}");
    assert!(per_ack < bytes, "{per_ack} {bytes}");
}

#[test]
fn bursts_with_gaps_finish() {
    let c = GenConfig {
        burst_bytes: Some(100_000),
        gap: Duration::from_millis(1),
        ..cfg(2, 350_000)
    };
    let o = run(c, true, AckPolicy::default(), 400_000);
    let s = o.sender.stats();
    assert_eq!(s.closed, 2, "{s:?}");
    for (n, d) in o.digests.values() {
        assert_eq!(*n, 350_000);
        assert_eq!(*d, stream_digest(350_000));
    }
}

#[test]
fn blast_mode_sends_without_acks() {
    let c = GenConfig {
        blast: true,
        ..cfg(3, 100_000)
    };
    let mut s = Sender::new(c);
    let mut pool = VecPool::new(1000, 2048);
    let mut now = Instant::from_nanos(1);
    let mut n = 0;
    for _ in 0..1000 {
        now += Duration::from_micros(1);
        s.handle_timeout(now);
        let mut out: Burst<VecBuf> = Burst::new();
        n += s.poll_tx(now, &mut pool, &mut out);
        if s.is_done() {
            break;
        }
    }
    assert!(s.is_done());
    assert_eq!(s.stats().bytes, 300_000);
    assert_eq!(n as u64, s.stats().segments);
}
