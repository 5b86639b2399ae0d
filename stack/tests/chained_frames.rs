//! Frames of chained buffers (multi-segment mbufs, as a NIC with scattered receive leaves
//! a jumbo frame): parsed from their first segment with the same result as the frame in
//! one buffer, and carried through GRO and TCP to the application unchanged, each segment
//! freed once. The buffer type is `ChainBuf` (a `VecBuf` cannot chain).

use std::net::IpAddr;

use stack::ack::AckPolicy;
use stack::buf::{ChecksumStatus, PacketBuf, RxChecksum, MAX_FRAME_SEGS};
use stack::driver::Burst;
use stack::gro::{GroConfig, GRO_MAX_BYTES};
use stack::mem::{ChainBuf, ChainPool, VecBuf};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::seq::SeqNumber;
use stack::tcp::{Event, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::{
    parse, parse_chain_into, DropReason, LocalAddrs, Parsed, TcpFlags, TcpFrame, TcpOptions,
    Timestamp,
};
use testkit::app::read_readable;
use testkit::frames::{echo4, OUR_IP4, OUR_IP6, OUR_MAC, PEER_IP4, PEER_IP6, PEER_MAC};

/// A full segment at MTU 9000 with timestamps.
const JUMBO: usize = 8948;

const SW: RxChecksum = RxChecksum {
    ip: ChecksumStatus::Unknown,
    l4: ChecksumStatus::Unknown,
};

fn local() -> LocalAddrs {
    LocalAddrs::new(OUR_MAC, Some(OUR_IP4), Some(OUR_IP6))
}

fn tcp_frame(v6: bool, seq: u32, ack: u32, flags: TcpFlags, opts: TcpOptions) -> TcpFrame {
    let (src_ip, dst_ip) = if v6 {
        (IpAddr::V6(PEER_IP6), IpAddr::V6(OUR_IP6))
    } else {
        (IpAddr::V4(PEER_IP4), IpAddr::V4(OUR_IP4))
    };
    TcpFrame {
        src_mac: PEER_MAC,
        dst_mac: OUR_MAC,
        src_ip,
        dst_ip,
        sport: 40000,
        dport: 5001,
        seq: SeqNumber(seq),
        ack: SeqNumber(ack),
        flags,
        window: 502,
        opts,
        ttl: 64,
        ..TcpFrame::default()
    }
}

fn ts(tsval: u32) -> TcpOptions {
    TcpOptions {
        timestamp: Some(Timestamp { tsval, tsecr: 0 }),
        ..TcpOptions::default()
    }
}

fn payload(seq: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as usize + i) as u8 ^ 0x5a).collect()
}

/// A jumbo data segment's frame in one buffer.
fn jumbo_frame(v6: bool, seq: u32) -> Vec<u8> {
    tcp_frame(v6, seq, 1, TcpFlags::ACK, ts(9)).to_vec(&payload(seq, JUMBO))
}

fn parse_chain(b: &ChainBuf) -> Option<Parsed> {
    // What the pipeline does: the segments after the first become buffers of their own,
    // the tail of the first.
    let bytes = b.to_vec();
    let mut segs = Vec::new();
    let mut at = 0;
    for n in b.segment_lens() {
        segs.push(bytes[at..at + n].to_vec());
        at += n;
    }
    let tail: Vec<VecBuf> = segs[1..].iter().cloned().map(VecBuf::from_vec).collect();
    let mut out = Parsed::Drop(DropReason::TruncatedEthernet);
    parse_chain_into(&segs[0], &tail[..], b.rx_checksum(), &local(), &mut out).then_some(out)
}

/// Chains of every shape parse as the frame in one buffer does, in software checksum mode
/// (odd segment lengths put later segments at odd offsets of the TCP checksum, RFC 1071
/// §2(B)) and with the NIC's verdicts.
#[test]
fn chains_parse_as_the_whole_frame_does() {
    for v6 in [false, true] {
        let f = jumbo_frame(v6, 7_000);
        let want = parse(&f, SW, &local());
        assert!(matches!(want, Parsed::Tcp(m) if usize::from(m.payload_len) == JUMBO));
        for seg_len in [2048, 4096, 1024, 1001, 777, 9000, 128] {
            for cs in [
                SW,
                RxChecksum {
                    ip: ChecksumStatus::Good,
                    l4: ChecksumStatus::Good,
                },
            ] {
                let b = ChainBuf::split(&f, seg_len).with_rx_checksum(cs);
                assert_eq!(parse_chain(&b), Some(want), "v6 {v6} seg_len {seg_len}");
            }
        }
    }
}

/// A payload byte changed in a later segment fails the software check of the TCP
/// checksum, as in one buffer; the NIC's verdicts still decide when it gave them.
#[test]
fn a_corrupted_tail_fails_the_checksum() {
    for v6 in [false, true] {
        for at in [3000usize, 8999, 9013] {
            let mut f = jumbo_frame(v6, 1);
            if at >= f.len() {
                continue;
            }
            f[at] ^= 0x10;
            let b = ChainBuf::split(&f, 2047);
            assert_eq!(
                parse_chain(&b),
                Some(Parsed::Drop(DropReason::TcpBadChecksum)),
                "v6 {v6} byte {at}"
            );
            let bad = RxChecksum {
                ip: ChecksumStatus::Good,
                l4: ChecksumStatus::Bad,
            };
            let b = ChainBuf::split(&f, 2047).with_rx_checksum(bad);
            assert_eq!(
                parse_chain(&b),
                Some(Parsed::Drop(DropReason::TcpBadChecksum))
            );
        }
    }
}

/// Headers not all in the first segment: refused (`false`), for the caller to count.
/// Lengths past the whole chain are the usual drops.
#[test]
fn split_headers_are_refused_and_lengths_checked_against_the_chain() {
    for v6 in [false, true] {
        let f = jumbo_frame(v6, 1);
        for seg_len in [10, 20, 40, 60] {
            let b = ChainBuf::split(&f, seg_len);
            assert_eq!(parse_chain(&b), None, "v6 {v6} seg_len {seg_len}");
        }
        // The chain is 100 bytes shorter than the IP header says.
        let b = ChainBuf::split(&f[..f.len() - 100], 2048);
        let r = if v6 {
            DropReason::Ipv6PayloadLenMismatch
        } else {
            DropReason::Ipv4TotalLenPastFrame
        };
        assert_eq!(parse_chain(&b), Some(Parsed::Drop(r)));
        // Bytes after the IP packet (an Ethernet trailer) are not payload.
        let mut t = f.clone();
        t.extend_from_slice(&[0xab; 30]);
        let b = ChainBuf::split(&t, 2048);
        assert_eq!(parse_chain(&b), Some(parse(&t, SW, &local())));
    }
}

/// An ICMP echo request that runs past the first segment is not answered (the reply is
/// built from one buffer); one that lies in it is.
#[test]
fn icmp_in_a_chain() {
    let f = echo4(PEER_IP4, &[7u8; 3000]);
    let b = ChainBuf::split(&f, 2048);
    assert_eq!(
        parse_chain(&b),
        Some(Parsed::Drop(DropReason::IcmpUnsupported))
    );
    let f = echo4(PEER_IP4, &[7u8; 100]);
    let mut t = f.clone();
    t.extend_from_slice(&[0; 64]);
    let b = ChainBuf::split(&t, f.len());
    assert!(matches!(parse_chain(&b), Some(Parsed::IcmpEcho(_))));
}

// ---- the pipeline ----------------------------------------------------------------------

fn pipeline(gro: Option<GroConfig>) -> Pipeline<ChainBuf> {
    Pipeline::new(PipelineConfig {
        local: local(),
        gro,
        tcp: TcpConfig {
            rcv_buf: 4 << 20,
            mtu: 9000,
            ..TcpConfig::default()
        },
        listen: vec![(5001, AckPolicy::linux())],
        tx_csum_offload: false,
    })
    .expect("pipeline")
}

fn sent(p: &mut Pipeline<ChainBuf>, pool: &mut ChainPool, now: Instant, v6: bool) -> Vec<Parsed> {
    let mut out = Burst::new();
    p.poll_tx(now, pool, &mut out);
    let peer = if v6 {
        LocalAddrs::new(PEER_MAC, None, Some(PEER_IP6))
    } else {
        LocalAddrs::new(PEER_MAC, Some(PEER_IP4), None)
    };
    out.iter()
        .map(|b| parse(b.data(), Default::default(), &peer))
        .collect()
}

/// Opens a connection from the peer; returns weir's next sequence number and checks the
/// MSS it advertised follows the MTU (RFC 9293 §3.7.1: MTU less the IP and TCP headers).
fn handshake(p: &mut Pipeline<ChainBuf>, pool: &mut ChainPool, now: Instant, v6: bool) -> u32 {
    let syn = tcp_frame(
        v6,
        1000,
        0,
        TcpFlags::SYN,
        TcpOptions {
            mss: Some(8960),
            wscale: Some(7),
            sack_permitted: true,
            timestamp: Some(Timestamp { tsval: 1, tsecr: 0 }),
            ..TcpOptions::default()
        },
    );
    let mut b = Burst::new();
    b.push(ChainBuf::split(&syn.to_vec(&[]), 2048));
    p.handle_rx_burst(now, &mut b);
    let out = sent(p, pool, now, v6);
    let Some(Parsed::Tcp(synack)) = out.first() else {
        panic!("expected a SYN-ACK, got {out:?}");
    };
    assert_eq!(synack.opts.mss, Some(if v6 { 8940 } else { 8960 }));
    let isn = synack.seq.get().wrapping_add(1);
    let mut b = Burst::new();
    let ack = tcp_frame(v6, 1001, isn, TcpFlags::ACK, ts(2)).to_vec(&[]);
    b.push(ChainBuf::split(&ack, 2048));
    p.handle_rx_burst(now, &mut b);
    let ev: Vec<Event> = p.tcp().events().collect();
    assert!(matches!(ev.first(), Some(Event::Opened(_))), "{ev:?}");
    isn
}

/// Jumbo segments arriving as chains of 2,048-byte buffers (and of odd sizes) reach the
/// application byte for byte, with GRO on (runs of 7 up to 64 KiB, or longer with a larger
/// `max_bytes`) and off; every segment is freed once the bytes are read.
#[test]
fn chained_jumbo_segments_reach_the_application() {
    let gros = [
        None,
        Some(GroConfig {
            flush_ns: Duration::from_micros(100),
            ..GroConfig::default()
        }),
        Some(GroConfig {
            flush_ns: Duration::from_micros(100),
            max_bytes: GRO_MAX_BYTES,
            ..GroConfig::default()
        }),
    ];
    for v6 in [false, true] {
        for gro in &gros {
            for seg_len in [2048, 1001] {
                let mut rx = ChainPool::new(1 << 16, seg_len);
                let mut tx = ChainPool::new(1024, 2048);
                let mut p = pipeline(*gro);
                let mut now = Instant::from_nanos(1_000_000);
                let isn = handshake(&mut p, &mut tx, now, v6);
                let mut seq = 1001u32;
                let mut want = Vec::new();
                let mut got = Vec::new();
                // One segment first: the window weir's SYN-ACK advertised is unscaled
                // (at most 65,535 bytes, RFC 7323 §2.2), its ACK to this one opens it.
                for burst in 0..9 {
                    let mut b = Burst::new();
                    for i in 0..if burst == 0 { 1 } else { 16 } {
                        let mss = if v6 { JUMBO - 20 } else { JUMBO };
                        let data = payload(seq, mss);
                        let f = tcp_frame(v6, seq, isn, TcpFlags::ACK, ts(10 + burst * 16 + i))
                            .to_vec(&data);
                        want.extend_from_slice(&data);
                        b.push(rx.receive(&f).expect("pool room"));
                        seq = seq.wrapping_add(mss as u32);
                    }
                    p.handle_rx_burst(now, &mut b);
                    now += Duration::from_micros(200);
                    p.handle_timeout(now);
                    read_readable(&mut p, &mut got);
                    let _ = sent(&mut p, &mut tx, now, v6);
                }
                p.flush_gro(now);
                read_readable(&mut p, &mut got);
                let st = p.stats();
                let what = format!("v6 {v6} gro {gro:?} seg_len {seg_len}");
                assert_eq!(got.len(), want.len(), "{what}");
                assert!(got == want, "{what}: bytes differ");
                assert_eq!(st.pipeline.nonlinear_drops, 0, "{what}");
                let frame = (if v6 { 86 } else { 66 }) + JUMBO - if v6 { 20 } else { 0 };
                assert_eq!(st.pipeline.rx_packets, 2 + 129, "{what}");
                assert!(
                    st.pipeline.rx_bytes > 129 * frame as u64,
                    "{what}: rx_bytes counts whole chains"
                );
                assert_eq!(st.parse.total_drops(), 0, "{what}");
                assert_eq!(rx.in_use(), 0, "{what}: every segment freed once read");
                if let Some(g) = gro {
                    // 128 segments in bursts of 16, plus the first segment alone and the
                    // handshake's SYN and ACK passed through: runs of 7 at 64 KiB (7 + 7 + 2 per burst; 6 + 6 + 4
                    // with 10 buffers per segment, the chain's 64 slots being the
                    // bound), beyond it 12 + 4 of 5 buffers each.
                    let units = st.gro.units_out;
                    let per_burst = if g.max_bytes > 65_535 && seg_len == 2048 {
                        2
                    } else {
                        3
                    };
                    assert_eq!(units, 8 * per_burst + 3, "{what}");
                }
            }
        }
    }
}

/// Frames the pipeline cannot carry are dropped and counted as `pipeline.nonlinear`, the
/// buffers freed: headers split across segments, more than `MAX_FRAME_SEGS` segments.
#[test]
fn chains_that_cannot_be_carried_are_counted() {
    let mut rx = ChainPool::new(1 << 12, 20);
    let mut tx = ChainPool::new(64, 2048);
    let mut p = pipeline(None);
    let now = Instant::from_nanos(1_000_000);
    let isn = handshake(&mut p, &mut tx, now, false);
    let f = tcp_frame(false, 1001, isn, TcpFlags::ACK, ts(5)).to_vec(&payload(0, 100));
    let mut b = Burst::new();
    b.push(rx.receive(&f).expect("room"));
    let long = vec![ChainBuf::split(&f[..54], 54).to_vec()]
        .into_iter()
        .chain(f[54..].chunks(6).map(<[u8]>::to_vec))
        .collect::<Vec<_>>();
    assert!(long.len() > MAX_FRAME_SEGS);
    b.push(ChainBuf::from_segments(long));
    p.handle_rx_burst(now, &mut b);
    let st = p.stats();
    assert_eq!(st.pipeline.nonlinear_drops, 2);
    assert_eq!(st.pipeline.rx_packets, st.parse.total() + 2);
    assert_eq!(rx.in_use(), 0);
}

/// Every frame of the malformed corpus (one or more per drop reason), cut at every
/// offset and into 7-byte pieces: the chain parser refuses it (headers cut, counted as
/// `pipeline.nonlinear`) or gives the result of the frame in one buffer, except that an
/// ICMP message running past the first segment is `icmp_unsupported`.
#[test]
fn corpus_frames_in_chains_parse_as_whole_or_are_refused() {
    let mut same = 0;
    for c in testkit::corpus::parse_drops() {
        let whole = parse(&c.frame, c.cs, &local());
        let icmp = matches!(
            whole,
            Parsed::IcmpEcho(_)
                | Parsed::NeighborSolicit(_)
                | Parsed::Drop(
                    DropReason::IcmpBadChecksum
                        | DropReason::IcmpUnsupported
                        | DropReason::TruncatedIcmp
                        | DropReason::NdInvalid
                )
        );
        let mut shapes: Vec<ChainBuf> = (1..c.frame.len())
            .map(|at| ChainBuf::from_segments(vec![c.frame[..at].to_vec(), c.frame[at..].to_vec()]))
            .collect();
        shapes.push(ChainBuf::split(&c.frame, 7));
        for b in shapes {
            let b = b.with_rx_checksum(c.cs);
            match parse_chain(&b) {
                None => {}
                Some(p) if p == whole => same += 1,
                Some(Parsed::Drop(DropReason::IcmpUnsupported)) if icmp => {}
                Some(p) => panic!(
                    "{}: cut {:?}: {p:?}, in one buffer {whole:?}",
                    c.name,
                    b.segment_lens()
                ),
            }
        }
    }
    assert!(same > 1000, "{same} chains parsed as whole");
}
