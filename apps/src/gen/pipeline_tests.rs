//! The sender against weir's own pipeline, in memory on a virtual clock: every byte
//! arrives in order, every flow closes cleanly, and the ACK-counting rules differ the way
//! RFC 3465 says they should.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use sha2::{Digest, Sha256};
use stack::ack::AckPolicy;
use stack::buf::{ChecksumStatus, PacketBuf, RxChecksum};
use stack::driver::Burst;
use stack::gro::GroConfig;
use stack::mem::{VecBuf, VecPool};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::seq::SeqNumber;
use stack::tcp::{Event, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::{LocalAddrs, TcpFlags, TcpFrame, TcpOptions};

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
                Event::Reset(_) | Event::Writable(_) => {}
            }
        }
        let mut acks: Burst<VecBuf> = Burst::new();
        p.poll_tx(now, &mut rx_pool, &mut acks);
        for a in acks.drain(..) {
            sender.handle_rx(now, a.data(), RxChecksum::default());
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
        assert_eq!(s.unresolved, 0, "{s:?}");
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

/// A sender in blast mode (no ACKs awaited) of `flows` flows of `bytes` each, and a pool.
fn blast_sender(flows: u32, bytes: u64) -> (Sender, VecPool) {
    let c = GenConfig {
        blast: true,
        ..cfg(flows, bytes)
    };
    (Sender::new(c), VecPool::new(1000, 2048))
}

#[test]
fn blast_mode_sends_without_acks() {
    let (mut s, mut pool) = blast_sender(3, 100_000);
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

/// One `poll_tx` builds at most `TX_BURST` frames, as a NIC paces a sender, although
/// the burst it fills holds `MAX_BURST`; frames already in it do not count.
#[test]
fn one_poll_builds_at_most_a_tx_burst() {
    use super::sender::TX_BURST;
    let (mut s, mut pool) = blast_sender(8, 1_000_000);
    let now = Instant::from_nanos(1);
    s.handle_timeout(now);
    let mut out: Burst<VecBuf> = Burst::new();
    const { assert!(TX_BURST < stack::driver::MAX_BURST) };
    assert_eq!(s.poll_tx(now, &mut pool, &mut out), TX_BURST);
    assert_eq!(s.poll_tx(now, &mut pool, &mut out), TX_BURST);
    assert_eq!(out.len(), 2 * TX_BURST);
}

/// An ARP request from `mac`/`ip` for `target`, as a kernel sends it.
fn arp_request(mac: [u8; 6], ip: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    use stack::wire::arp;
    use stack::wire::ethernet::{self, ethertype};
    let mut f = vec![0u8; ethernet::MIN_FRAME_LEN];
    ethernet::emit_header(&mut f, [0xff; 6], mac, None, ethertype::ARP);
    arp::Repr {
        operation: arp::OP_REQUEST,
        sender_mac: mac,
        sender_ip: ip,
        target_mac: [0; 6],
        target_ip: target,
    }
    .emit(&mut arp::Packet::new_unchecked(
        &mut f[ethernet::HEADER_LEN..ethernet::HEADER_LEN + arp::PACKET_LEN],
    ));
    f
}

/// One ARP reply: (Ethernet destination, ARP sender MAC and IP, ARP target MAC and IP).
type ArpReply = ([u8; 6], [u8; 6], Ipv4Addr, [u8; 6], Ipv4Addr);

/// The ARP replies among `frames`.
fn arp_replies(frames: &Burst<VecBuf>) -> Vec<ArpReply> {
    use stack::wire::arp;
    use stack::wire::ethernet::{self, ethertype};
    frames
        .iter()
        .map(|b| b.data())
        .filter(|d| d[ethernet::field::ETHERTYPE] == ethertype::ARP.to_be_bytes())
        .filter_map(|d| {
            let p = arp::Packet::new_checked(&d[ethernet::HEADER_LEN..]).ok()?;
            (p.operation() == arp::OP_REPLY).then(|| {
                (
                    d[ethernet::field::DST].try_into().unwrap(),
                    p.sender_mac(),
                    Ipv4Addr::from(p.sender_ip()),
                    p.target_mac(),
                    Ipv4Addr::from(p.target_ip()),
                )
            })
        })
        .collect()
}

#[test]
fn arp_requests_for_the_flows_addresses_are_answered() {
    const KERNEL_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 9];
    // 65,536 flows use two source addresses (64,000 ports each): both are answered.
    let c = GenConfig {
        flows: 65_536,
        src_mac: [0x02, 0, 0, 0, 0, 2],
        dst_mac: None,
        ..cfg(1, 1000)
    };
    let (mine, theirs) = (c.src_ip, c.dst_ip);
    let second = Ipv4Addr::from(u32::from(mine) + 1);
    let mut s = Sender::new(c.clone());
    let mut pool = VecPool::new(64, 2048);
    let mut out: Burst<VecBuf> = Burst::new();
    let now = Instant::from_nanos(1);
    s.handle_rx(
        now,
        &arp_request(KERNEL_MAC, theirs, mine),
        RxChecksum::default(),
    );
    s.handle_rx(
        now,
        &arp_request(KERNEL_MAC, theirs, second),
        RxChecksum::default(),
    );
    // Not ours: ignored and counted.
    s.handle_rx(
        now,
        &arp_request(KERNEL_MAC, theirs, theirs),
        RxChecksum::default(),
    );
    s.poll_tx(now, &mut pool, &mut out);
    let mut got = arp_replies(&out);
    got.sort_by_key(|r| r.2);
    assert_eq!(
        got,
        [
            (KERNEL_MAC, c.src_mac, mine, KERNEL_MAC, theirs),
            (KERNEL_MAC, c.src_mac, second, KERNEL_MAC, theirs),
        ]
    );
    assert_eq!(s.stats().arp_replies, 2);
    assert_eq!(s.stats().rx_ignored, 1);
    // The receiver's request also told the generator its MAC.
    assert_eq!(s.dst_mac(), Some(KERNEL_MAC));
}

#[test]
fn arp_requests_beyond_the_pending_bound_are_counted() {
    let c = cfg(1, 1000);
    let mut s = Sender::new(c.clone());
    let mut pool = VecPool::new(64, 2048);
    let mut out: Burst<VecBuf> = Burst::new();
    let now = Instant::from_nanos(1);
    let asker = [0x02, 0, 0, 0, 0, 7];
    for i in 0..20u32 {
        let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 1, 0)) + i);
        s.handle_rx(
            now,
            &arp_request(asker, ip, c.src_ip),
            RxChecksum::default(),
        );
    }
    s.poll_tx(now, &mut pool, &mut out);
    assert_eq!(arp_replies(&out).len(), 16);
    assert_eq!(s.stats().arp_replies, 16);
    assert_eq!(s.stats().arp_replies_dropped, 4);
    // With no buffer to build it in, a reply is counted as dropped, not kept forever.
    let mut empty = VecPool::new(0, 2048);
    s.handle_rx(
        now,
        &arp_request(asker, c.dst_ip, c.src_ip),
        RxChecksum::default(),
    );
    let mut out2: Burst<VecBuf> = Burst::new();
    s.poll_tx(now, &mut empty, &mut out2);
    assert_eq!(s.stats().arp_replies_dropped, 5);
    assert!(arp_replies(&out2).is_empty());
}

#[test]
fn arp_requests_from_a_group_address_are_not_answered() {
    let c = cfg(1, 1000);
    let mut s = Sender::new(c.clone());
    let mut pool = VecPool::new(8, 2048);
    let mut out: Burst<VecBuf> = Burst::new();
    let now = Instant::from_nanos(1);
    s.handle_rx(
        now,
        &arp_request([0x01, 0, 0x5e, 0, 0, 1], c.dst_ip, c.src_ip),
        RxChecksum::default(),
    );
    s.poll_tx(now, &mut pool, &mut out);
    assert!(arp_replies(&out).is_empty());
    assert_eq!(s.stats().arp_replies, 0);
    assert_eq!(s.stats().rx_ignored, 1);
}

/// Drives a sender whose receiver never answers ARP, 100 ms a step, until it is done or
/// `limit` has passed: (frames it sent, of which ARP requests, when it finished).
fn run_unanswered(s: &mut Sender, limit: Duration) -> (usize, usize, Option<Instant>) {
    use stack::wire::ethernet::{self, ethertype};
    let mut pool = VecPool::new(64, 2048);
    let start = Instant::from_nanos(1_000_000);
    let (mut frames, mut arps) = (0, 0);
    let mut now = start;
    while now.saturating_since(start) <= limit {
        s.handle_timeout(now);
        let mut out: Burst<VecBuf> = Burst::new();
        s.poll_tx(now, &mut pool, &mut out);
        for b in out.drain(..) {
            frames += 1;
            if b.data()[ethernet::field::ETHERTYPE] == ethertype::ARP.to_be_bytes() {
                arps += 1;
            }
        }
        if s.is_done() {
            return (frames, arps, Some(now));
        }
        now += Duration::from_millis(100);
    }
    (frames, arps, None)
}

#[test]
fn an_unanswered_receiver_address_fails_every_flow_in_bounded_time() {
    // A byte count and no duration: the generator gives up after ARP_GIVE_UP.
    let c = GenConfig {
        dst_mac: None,
        ..cfg(3, 1000)
    };
    let mut s = Sender::new(c);
    let (frames, arps, done) = run_unanswered(&mut s, ARP_GIVE_UP + Duration::from_secs(5));
    let done = done.expect("the sender gives up");
    assert!(done.saturating_since(Instant::from_nanos(1_000_000)) >= ARP_GIVE_UP);
    assert_eq!(frames, arps, "nothing but ARP requests is sent");
    assert!(arps >= 100, "it kept asking: {arps} requests");
    let st = s.stats();
    assert_eq!(st.unresolved, 1);
    assert_eq!(st.timeouts, 3);
    assert_eq!((st.not_started, st.established, st.segments), (0, 0, 0));
}

#[test]
fn a_duration_that_ends_before_any_arp_reply_is_a_failure_not_a_short_run() {
    let c = GenConfig {
        dst_mac: None,
        duration: Some(Duration::from_secs(1)),
        bytes_per_flow: None,
        ..cfg(2, 1000)
    };
    let mut s = Sender::new(c);
    let (_, arps, done) = run_unanswered(&mut s, Duration::from_secs(5));
    assert!(done.is_some(), "the sender stops with the duration");
    assert!(arps > 0);
    let st = s.stats();
    assert_eq!(st.unresolved, 1);
    assert_eq!(st.timeouts, 2);
    assert_eq!(st.not_started, 0);
}

/// A one-flow sender that has sent its SYN, with the SYN's source port and sequence number.
fn syn_sent() -> (Sender, u16, u32) {
    let mut s = Sender::new(cfg(1, 1_000_000));
    let mut pool = VecPool::new(64, 2048);
    let mut out: Burst<VecBuf> = Burst::new();
    s.poll_tx(Instant::from_nanos(1), &mut pool, &mut out);
    let syn = out.iter().next().expect("a SYN").data().to_vec();
    // Ethernet 14 + IPv4 20: the TCP header's ports and sequence number.
    assert_eq!(syn[14 + 20 + 13] & 0x02, 0x02, "the first frame is the SYN");
    let sport = u16::from_be_bytes([syn[34], syn[35]]);
    let iss = u32::from_be_bytes([syn[38], syn[39], syn[40], syn[41]]);
    (s, sport, iss)
}

/// A frame from the receiver to the flow on `dport`, checksums computed.
fn from_receiver(s: &Sender, dport: u16, seq: u32, ack: u32, flags: TcpFlags) -> Vec<u8> {
    let c = s.config();
    let f = TcpFrame {
        src_mac: RX_MAC,
        dst_mac: c.src_mac,
        src_ip: c.dst_ip.into(),
        dst_ip: c.flow_addr(0).0.into(),
        sport: c.dst_port,
        dport,
        seq: SeqNumber(seq),
        ack: SeqNumber(ack),
        flags,
        window: u16::MAX,
        opts: TcpOptions::default(),
        ..TcpFrame::default()
    };
    let mut v = vec![0; f.frame_len(0)];
    assert_eq!(f.emit(&[], &mut v), v.len());
    v
}

/// The receiver's SYN-ACK (its sequence number 5000) to the SYN `iss` from `sport`.
fn syn_ack(s: &Sender, sport: u16, iss: u32) -> Vec<u8> {
    let flags = TcpFlags::SYN | TcpFlags::ACK;
    from_receiver(s, sport, 5000, iss.wrapping_add(1), flags)
}

/// No verdict from the NIC: the sender verifies both checksums itself.
const UNCHECKED: RxChecksum = RxChecksum {
    ip: ChecksumStatus::Unknown,
    l4: ChecksumStatus::Unknown,
};

#[test]
fn receiver_frames_with_a_wrong_checksum_are_dropped_and_counted() {
    let (mut s, sport, iss) = syn_sent();
    let now = Instant::from_nanos(2);
    let synack = syn_ack(&s, sport, iss);
    // One with a wrong TCP checksum, one with a wrong IPv4 header checksum: verified in
    // software when the NIC gave no verdict.
    let mut bad_tcp = synack.clone();
    bad_tcp[14 + 20 + 16] ^= 0x40;
    let mut bad_ip = synack.clone();
    bad_ip[14 + 10] ^= 0x01;
    s.handle_rx(now, &bad_tcp, UNCHECKED);
    s.handle_rx(now, &bad_ip, UNCHECKED);
    assert_eq!(s.stats().rx_bad_checksum, 2);
    // A NIC's "bad" is final, even for a frame that would verify.
    let nic_bad = RxChecksum {
        ip: ChecksumStatus::Good,
        l4: ChecksumStatus::Bad,
    };
    s.handle_rx(now, &synack, nic_bad);
    assert_eq!(s.stats().rx_bad_checksum, 3);
    assert_eq!(s.stats().established, 0, "nothing acted on");
    // The intact frame, unchecked by the NIC, verifies and opens the flow.
    s.handle_rx(now, &synack, UNCHECKED);
    assert_eq!(s.stats().established, 1);
    assert_eq!(s.stats().rx_bad_checksum, 3);
}

#[test]
fn resets_count_only_at_the_exact_sequence_number() {
    let (mut s, sport, iss) = syn_sent();
    let mut pool = VecPool::new(256, 2048);
    let now = Instant::from_nanos(2);
    // SYN-SENT: a RST that does not acknowledge the SYN is not acceptable.
    s.handle_rx(
        now,
        &from_receiver(&s, sport, 0, 0, TcpFlags::RST),
        UNCHECKED,
    );
    assert_eq!((s.stats().resets, s.stats().resets_ignored), (0, 1));
    let synack = syn_ack(&s, sport, iss);
    s.handle_rx(now, &synack, UNCHECKED);
    assert_eq!(s.stats().established, 1);
    let mut out: Burst<VecBuf> = Burst::new();
    s.poll_tx(now, &mut pool, &mut out);
    out.clear();
    let ctl = s.stats().ctl_segments;
    let rst = |s: &Sender, seq: u32| from_receiver(s, sport, seq, 0, TcpFlags::RST);
    // In the window but not at RCV.NXT (5001): a challenge ACK, the flow stays open.
    s.handle_rx(now, &rst(&s, 5001 + 1000), UNCHECKED);
    assert_eq!((s.stats().resets, s.stats().resets_ignored), (0, 2));
    s.poll_tx(now, &mut pool, &mut out);
    assert_eq!(s.stats().ctl_segments, ctl + 1, "one challenge ACK");
    let ack = out
        .iter()
        .map(|b| b.data())
        .find(|d| {
            // A pure ACK: flags ACK only, no payload (IPv4 total = 20 + TCP header).
            let total = usize::from(u16::from_be_bytes([d[16], d[17]]));
            let tcp_hdr = usize::from(d[14 + 20 + 12] >> 4) * 4;
            d[14 + 20 + 13] == 0x10 && total == 20 + tcp_hdr
        })
        .expect("the challenge ACK");
    assert_eq!(
        u32::from_be_bytes([ack[42], ack[43], ack[44], ack[45]]),
        5001
    );
    out.clear();
    // Outside the window: nothing at all.
    s.handle_rx(now, &rst(&s, 5001 + 100_000), UNCHECKED);
    assert_eq!((s.stats().resets, s.stats().resets_ignored), (0, 3));
    s.poll_tx(now, &mut pool, &mut out);
    assert_eq!(s.stats().ctl_segments, ctl + 1);
    assert!(!s.is_done());
    // Exactly at RCV.NXT: the flow is reset.
    s.handle_rx(now, &rst(&s, 5001), UNCHECKED);
    assert_eq!((s.stats().resets, s.stats().resets_ignored), (1, 3));
    assert!(s.is_done(), "the only flow failed");
}
