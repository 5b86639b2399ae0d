//! weir-gen's engine ([`super::engine::Gen`], flows on weir's TCP) against weir's own
//! receiving pipeline, in memory on a virtual clock: every byte of every flow arrives in
//! order (the receiver's digest is the pattern's), every flow closes cleanly, bursts and
//! the duration end as configured, the receiver's MAC is resolved by ARP, and every buffer
//! goes back to its pool.

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

use super::engine::{Gen, PayloadSource};
use super::payload::stream_digest;
use super::pool::VecSource;
use super::*;

const RX_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const RX_IP6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);

struct Outcome {
    gen: Gen<VecBuf>,
    /// Data segments the generator sent (distinct sequence numbers: a retransmission or
    /// a tail loss probe counts once), and how many of them carried PSH.
    data_frames: u64,
    psh_frames: u64,
    digests: HashMap<u16, (u64, [u8; 32])>,
    closed: usize,
    /// The iteration of the receiver's last `Opened`, and of the first data segment.
    last_open_iter: u64,
    first_data_iter: Option<u64>,
    gen_pool: usize,
    rx_pool: usize,
    /// Places in a burst where a flow's data frame follows its own while another flow
    /// still has a frame later in that burst: 0 when each burst goes one frame per flow
    /// in turn (`--interleave segment`).
    interleave_breaks: u64,
}

fn run(cfg: GenConfig, gro: bool, max_iters: u64) -> Outcome {
    let src = VecSource::new(cfg.pattern_period as usize);
    run_with(cfg, gro, max_iters, src)
}

/// [`run`] with the generator's write buffers from `src`.
fn run_with<S: PayloadSource<VecBuf>>(
    cfg: GenConfig,
    gro: bool,
    max_iters: u64,
    mut src: S,
) -> Outcome {
    let mut gen: Gen<VecBuf> = Gen::new(cfg).expect("valid");
    let mut gen_pool = VecPool::new(100_000, 2048);
    let mut rx_pool = VecPool::new(100_000, 2048);
    let mut p: Pipeline<VecBuf> = Pipeline::new(PipelineConfig {
        local: LocalAddrs::new(RX_MAC, Some(Ipv4Addr::new(198, 18, 0, 1)), Some(RX_IP6)),
        gro: gro.then(GroConfig::default),
        tcp: TcpConfig {
            max_conns: 256,
            ..TcpConfig::default()
        },
        listen: vec![(5001, AckPolicy::linux())],
        tx_csum_offload: false,
    })
    .expect("pipeline");
    let mut hashers: HashMap<stack::tcp::ConnId, (u16, u64, Sha256)> = HashMap::new();
    let mut digests = HashMap::new();
    let mut closed = 0;
    let mut now = Instant::from_nanos(1_000_000);
    let mut acks: Burst<VecBuf> = Burst::new();
    let (mut data_frames, mut psh_frames) = (0u64, 0u64);
    let mut seen = std::collections::HashSet::new();
    let (mut last_open_iter, mut first_data_iter) = (0u64, None);
    let mut interleave_breaks = 0u64;
    for iter in 0..max_iters {
        now += Duration::from_micros(5);
        // The receiver's frames from the last iteration reach the generator.
        let mut back: Burst<VecBuf> = Burst::new();
        for a in acks.drain(..) {
            back.push(gen_pool.adopt(a.data().to_vec()).expect("gen pool"));
        }
        gen.handle_rx_burst(now, &mut back);
        gen.poll(now, &mut src);
        let mut seg: Burst<VecBuf> = Burst::new();
        gen.poll_tx(now, &mut gen_pool, &mut seg);
        let ports: Vec<u16> = seg
            .iter()
            .map(|b| b.data())
            .filter(|d| d.len() > 54 && d[12..14] == [0x08, 0x00] && d.len() > 66)
            .map(|d| u16::from_be_bytes([d[34], d[35]]))
            .collect();
        for i in 1..ports.len() {
            if ports[i] == ports[i - 1] && ports[i..].iter().any(|&p| p != ports[i]) {
                interleave_breaks += 1;
            }
        }
        let mut rx: Burst<VecBuf> = Burst::new();
        for b in seg.drain(..) {
            let d = b.data();
            // Ethernet, IPv4 (20 bytes: the generator sends no IP options), TCP.
            let payload = d
                .len()
                .saturating_sub(34 + usize::from(d.get(46).map_or(0, |o| o >> 4)) * 4);
            if d[12..14] == [0x08, 0x00] && payload > 0 {
                let key = (u16::from_be_bytes([d[34], d[35]]), &d[38..42]);
                let key = (
                    key.0,
                    u32::from_be_bytes([key.1[0], key.1[1], key.1[2], key.1[3]]),
                );
                if seen.insert(key) {
                    first_data_iter.get_or_insert(iter);
                    data_frames += 1;
                    psh_frames += u64::from(d[34 + 13] & 0x08 != 0);
                }
            }
            rx.push(rx_pool.adopt(d.to_vec()).expect("rx pool"));
        }
        p.handle_rx_burst(now, &mut rx);
        p.handle_timeout(now);
        while let Some(ev) = p.tcp().poll_event() {
            match ev {
                Event::Opened(id) => {
                    last_open_iter = iter;
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
                Event::Reset(_) | Event::Writable(_) => {}
            }
        }
        p.poll_tx(now, &mut rx_pool, &mut acks);
        if gen.is_done() && closed == gen.config().flows as usize {
            break;
        }
    }
    drop(p);
    Outcome {
        gen,
        data_frames,
        psh_frames,
        digests,
        closed,
        last_open_iter,
        first_data_iter,
        gen_pool: gen_pool.in_use(),
        rx_pool: rx_pool.in_use(),
        interleave_breaks,
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
fn stack_flows_arrive_in_order_and_close_cleanly() {
    for (gro, interleave) in [(true, Interleave::Segment), (false, Interleave::Train(8))] {
        let bytes = 300_000 + 7;
        let c = GenConfig {
            interleave,
            ..cfg(4, bytes)
        };
        let o = run(c, gro, 400_000);
        assert!(o.gen.is_done(), "gro {gro}: every flow finished");
        let s = o.gen.stats();
        assert_eq!(s.closed, 4, "gro {gro}: {s:?}");
        assert_eq!((s.resets, s.timeouts), (0, 0));
        assert_eq!(o.closed, 4);
        let want = stream_digest(bytes);
        assert_eq!(o.digests.len(), 4);
        for (port, (n, d)) in &o.digests {
            assert_eq!(*n, bytes, "flow from port {port}");
            assert_eq!(*d, want, "flow from port {port}: the pattern, in order");
        }
        assert_eq!(s.bytes, 4 * bytes, "nothing retransmitted on a clean link");
        assert_eq!(s.retransmits, 0);
        assert!(s.acks > 0 && s.acks_new_data > 0);
        assert_eq!((o.gen_pool, o.rx_pool), (0, 0), "every buffer went back");
    }
}

/// A source that has no buffer for its first `dry` calls (every copy of the pattern at
/// its reference limit, or the references' pool empty), then gives them.
struct DryAtFirst {
    inner: VecSource,
    dry: u32,
}

impl PayloadSource<VecBuf> for DryAtFirst {
    fn slice(&mut self, start: usize, len: u16) -> Option<stack::buf::PayloadSlice<VecBuf>> {
        if self.dry > 0 {
            self.dry -= 1;
            return None;
        }
        self.inner.slice(start, len)
    }
}

#[test]
fn a_write_the_source_had_no_buffer_for_is_retried() {
    // Nothing refused the write, so no `Event::Writable` would come: without the retry
    // these flows would never write (every flow opens first, then each finds the source
    // dry once, as when 65,536 flows' first buffers took every reference of the pattern).
    let c = GenConfig {
        open_first: true,
        ..cfg(8, 50_000)
    };
    let src = DryAtFirst {
        inner: VecSource::new(c.pattern_period as usize),
        dry: 20,
    };
    let o = run_with(c, true, 400_000, src);
    assert!(o.gen.is_done(), "every flow finished");
    let s = o.gen.stats();
    assert_eq!(s.closed, 8, "{s:?}");
    assert_eq!(s.source_empty, 20, "each dry call counted: {s:?}");
    for (n, d) in o.digests.values() {
        assert_eq!((*n, *d), (50_000, stream_digest(50_000)));
    }
    assert_eq!(o.digests.len(), 8);
}

#[test]
fn open_first_writes_nothing_until_every_flow_is_open() {
    // 32 flows, 4 handshakes at a time: without `open_first` the first flows send data
    // while later ones are still opening; with it no data segment leaves before the
    // receiver has every connection, and every byte still arrives.
    for open_first in [false, true] {
        let c = GenConfig {
            max_half_open: 4,
            open_first,
            ..cfg(32, 20_000)
        };
        let o = run(c, true, 400_000);
        assert!(o.gen.is_done(), "open_first {open_first}");
        assert_eq!(o.gen.stats().closed, 32);
        assert_eq!(o.digests.len(), 32);
        assert!(o.digests.values().all(|&(n, _)| n == 20_000));
        let first = o.first_data_iter.expect("data was sent");
        if open_first {
            assert!(first >= o.last_open_iter, "{first} {}", o.last_open_iter);
        } else {
            assert!(first < o.last_open_iter, "{first} {}", o.last_open_iter);
        }
    }
}

#[test]
fn stack_flows_report_their_windows_while_connected() {
    let mut o = run(cfg(2, 100_000), true, 200_000);
    assert!(o.gen.is_done());
    // In TIME-WAIT the connections still hold their congestion state.
    let c = o.gen.cwnd_summary();
    assert!(c.min >= 10, "at least the initial window: {c:?}");
}

#[test]
fn stack_bursts_wait_for_their_ack_and_the_gap() {
    let c = GenConfig {
        burst_bytes: Some(40_000),
        gap: Duration::from_millis(2),
        ..cfg(2, 200_000)
    };
    let o = run(c, true, 400_000);
    assert!(o.gen.is_done());
    let s = o.gen.stats();
    assert_eq!(s.closed, 2, "{s:?}");
    for (n, d) in o.digests.values() {
        assert_eq!((*n, *d), (200_000, stream_digest(200_000)));
    }
    // Five bursts per flow, each a ramp from the restarted window (RFC 5681 §4.1).
    assert_eq!(s.ramps, 10, "{s:?}");
    assert!(s.ramp_ns_max > 0 && s.ramp_ns_sum >= s.ramp_ns_max);
}

#[test]
fn stack_duration_ends_the_data_then_flows_close() {
    let c = GenConfig {
        bytes_per_flow: None,
        duration: Some(Duration::from_millis(20)),
        ..cfg(3, 0)
    };
    let o = run(c, true, 400_000);
    assert!(o.gen.is_done());
    let s = o.gen.stats();
    assert_eq!(s.closed, 3, "{s:?}");
    assert!(s.bytes > 0);
    for (n, d) in o.digests.values() {
        assert_eq!(*d, stream_digest(*n), "a prefix of the pattern, {n} bytes");
    }
}

#[test]
fn stack_resolves_the_receiver_by_arp() {
    let c = GenConfig {
        dst_mac: None,
        ..cfg(1, 50_000)
    };
    let o = run(c, true, 200_000);
    assert!(o.gen.is_done());
    assert_eq!(o.gen.dst_mac(), Some(RX_MAC));
    assert_eq!(o.gen.stats().closed, 1);
}

#[test]
fn stack_refuses_blast() {
    let blast = GenConfig {
        blast: true,
        ..GenConfig::default()
    };
    assert!(Gen::<VecBuf>::new(blast).is_err());
}

/// Flows beyond `ports_per_ip` use the next source address, each on a pipeline of its
/// own: the receiver's ACKs (and its ARP requests) reach the right one.
#[test]
fn stack_flows_from_several_source_addresses() {
    let c = GenConfig {
        ports_per_ip: 3,
        ..cfg(7, 30_000)
    };
    let o = run(c, true, 200_000);
    assert!(o.gen.is_done());
    let s = o.gen.stats();
    assert_eq!((s.established, s.closed), (7, 7), "{s:?}");
    assert_eq!(o.closed, 7, "the receiver closed all seven");
    // (The harness keys digests by source port, which the addresses share.)
    assert_eq!(o.digests.len(), 3);
    for (n, d) in o.digests.values() {
        assert_eq!((*n, *d), (30_000, stream_digest(30_000)));
    }
}

/// `--psh every-write`: exactly the segment that ends each write carries PSH, also when
/// the send buffer takes a write in parts; `--psh never`: none does.
#[test]
fn stack_psh_marks_each_write_end_and_nothing_else() {
    for (psh, writes) in [(PshMode::EveryWrite, 40u64), (PshMode::Never, 0)] {
        let c = GenConfig {
            write_size: 45 * 1448,
            pattern_period: 1448,
            psh,
            ..cfg(1, 40 * 45 * 1448)
        };
        let o = run(c, true, 400_000);
        assert!(o.gen.is_done());
        assert_eq!(o.data_frames, 40 * 45, "full segments only");
        assert_eq!(o.psh_frames, writes, "{psh:?}");
    }
}

/// IPv6: the receiver found by neighbour discovery, flows from two source addresses,
/// every byte in order.
#[test]
fn stack_flows_over_ipv6() {
    let c = GenConfig {
        dst_mac: None,
        ports_per_ip: 2,
        v6: Some((std::net::Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2), RX_IP6)),
        ..cfg(3, 100_000)
    };
    let o = run(c, true, 200_000);
    assert!(o.gen.is_done());
    assert_eq!(o.gen.dst_mac(), Some(RX_MAC));
    let s = o.gen.stats();
    assert_eq!((s.established, s.closed), (3, 3), "{s:?}");
    assert_eq!(o.closed, 3);
    for (n, d) in o.digests.values() {
        assert_eq!((*n, *d), (100_000, stream_digest(100_000)));
    }
}

/// `--interleave segment` builds each flow's turn as one send unit and puts the frames
/// one per flow in turn: every burst alternates flows until only one has frames left;
/// `train:8` sends runs of one flow, which the check sees. Every byte still arrives.
#[test]
fn interleave_segment_sends_units_one_frame_per_flow_in_turn() {
    let seg = run(cfg(8, 200_000), true, 20_000);
    assert_eq!(seg.closed, 8);
    assert_eq!(seg.interleave_breaks, 0);
    for (n, d) in seg.digests.values() {
        assert_eq!((*n, *d), (200_000, stream_digest(200_000)));
    }
    let train = run(
        GenConfig {
            interleave: Interleave::Train(8),
            ..cfg(8, 200_000)
        },
        true,
        20_000,
    );
    assert_eq!(train.closed, 8);
    assert!(train.interleave_breaks > 0, "trains are runs of one flow");
}

/// [`interleave_by_flow`](super::engine::interleave_by_flow) on its own: runs of one
/// flow's frames become one frame per flow in turn, stable within each flow; frames
/// before `from` stay put.
#[test]
fn interleave_by_flow_orders_runs_round_robin() {
    let frame = |port: u16, tag: u8| {
        let mut d = vec![0u8; 60];
        d[34..36].copy_from_slice(&port.to_be_bytes());
        d[59] = tag;
        VecBuf::from_vec(d)
    };
    let mut out: Burst<VecBuf> = Burst::new();
    out.push(frame(9, 0));
    for (p, t) in [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (3, 1)] {
        out.push(frame(p, t));
    }
    super::engine::interleave_by_flow(&mut out, 1, 34);
    let got: Vec<(u16, u8)> = out
        .iter()
        .map(|b| {
            (
                u16::from_be_bytes([b.data()[34], b.data()[35]]),
                b.data()[59],
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![(9, 0), (1, 1), (2, 1), (3, 1), (1, 2), (2, 2), (1, 3)]
    );
}
