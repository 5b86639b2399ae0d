//! The pipeline on the in-memory driver: a scripted peer performs ARP, ping and a TCP
//! transfer, and the replies, ACK counts and delivered bytes are checked.

use std::net::IpAddr;

use stack::ack::{AckPolicy, AckReason};
use stack::buf::PacketBuf;
use stack::driver::Burst;
use stack::gro::GroConfig;
use stack::mem::{VecBuf, VecPool};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::seq::SeqNumber;
use stack::tcp::{Event, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::{parse, LocalAddrs, Parsed, TcpFlags, TcpFrame, TcpOptions, Timestamp};
use testkit::app::read_readable;
use testkit::frames::{OUR_IP4, OUR_MAC, PEER_IP4, PEER_MAC};

const MSS: usize = 1448;

fn pipeline(gro: Option<GroConfig>) -> Pipeline<VecBuf> {
    Pipeline::new(PipelineConfig {
        local: LocalAddrs::new(OUR_MAC, Some(OUR_IP4), None),
        gro,
        tcp: TcpConfig {
            rcv_buf: 4 << 20,
            ..TcpConfig::default()
        },
        listen: vec![(5001, AckPolicy::linux())],
        tx_csum_offload: false,
    })
    .expect("pipeline")
}

/// The peer's view of what weir sent.
fn sent(p: &mut Pipeline<VecBuf>, pool: &mut VecPool, now: Instant) -> Vec<Parsed> {
    let mut out = Burst::new();
    p.poll_tx(now, pool, &mut out);
    let peer = LocalAddrs::new(PEER_MAC, Some(PEER_IP4), None);
    out.iter()
        .map(|b| parse(b.data(), Default::default(), &peer))
        .collect()
}

fn frame(seq: u32, ack: u32, flags: TcpFlags, payload: &[u8], tsval: u32) -> VecBuf {
    frame_opts(
        seq,
        ack,
        flags,
        payload,
        TcpOptions {
            timestamp: Some(Timestamp { tsval, tsecr: 0 }),
            ..TcpOptions::default()
        },
    )
}

fn frame_opts(seq: u32, ack: u32, flags: TcpFlags, payload: &[u8], opts: TcpOptions) -> VecBuf {
    frame_from(40000, seq, ack, flags, payload, opts)
}

/// A segment of the peer's connection from port `sport` to weir's 5001.
fn frame_from(
    sport: u16,
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    payload: &[u8],
    opts: TcpOptions,
) -> VecBuf {
    let f = TcpFrame {
        src_mac: PEER_MAC,
        dst_mac: OUR_MAC,
        src_ip: IpAddr::V4(PEER_IP4),
        dst_ip: IpAddr::V4(OUR_IP4),
        sport,
        dport: 5001,
        seq: SeqNumber(seq),
        ack: SeqNumber(ack),
        flags,
        window: 502,
        opts,
        ttl: 64,
        ..TcpFrame::default()
    };
    VecBuf::from_vec(f.to_vec(payload))
}

/// Opens a connection; returns (our next seq, weir's next seq).
fn handshake(p: &mut Pipeline<VecBuf>, pool: &mut VecPool, now: Instant) -> (u32, u32) {
    let syn = frame_opts(
        1000,
        0,
        TcpFlags::SYN,
        &[],
        TcpOptions {
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            timestamp: Some(Timestamp { tsval: 1, tsecr: 0 }),
            ..TcpOptions::default()
        },
    );
    let mut b = Burst::new();
    b.push(syn);
    p.handle_rx_burst(now, &mut b);
    let out = sent(p, pool, now);
    let Some(Parsed::Tcp(synack)) = out.first() else {
        panic!("expected a SYN-ACK, got {out:?}");
    };
    assert!(synack.flags.contains(TcpFlags::SYN | TcpFlags::ACK));
    assert_eq!(synack.ack.get(), 1001);
    let isn = synack.seq.get().wrapping_add(1);
    let mut b = Burst::new();
    b.push(frame(1001, isn, TcpFlags::ACK, &[], 2));
    p.handle_rx_burst(now, &mut b);
    let ev: Vec<Event> = p.tcp().events().collect();
    assert!(matches!(ev.first(), Some(Event::Opened(_))), "{ev:?}");
    (1001, isn)
}

/// Sends `n` full segments in one burst, lets the app consume everything, and returns the
/// number of ACK frames the segments triggered in that iteration.
fn send_run(
    p: &mut Pipeline<VecBuf>,
    pool: &mut VecPool,
    now: Instant,
    seq: &mut u32,
    isn: u32,
    n: usize,
    got: &mut Vec<u8>,
) -> usize {
    let mut b = Burst::new();
    for i in 0..n {
        let payload: Vec<u8> = (0..MSS).map(|j| (*seq as usize + j) as u8).collect();
        b.push(frame(*seq, isn, TcpFlags::ACK, &payload, 10 + i as u32));
        *seq = seq.wrapping_add(MSS as u32);
    }
    p.handle_rx_burst(now, &mut b);
    // Later loop iterations with no traffic: the GRO hold time (100 us) passes and the
    // held run goes to TCP, so this call sees every ACK its segments cause.
    let now = now + Duration::from_micros(200);
    p.handle_timeout(now);
    read_readable(p, got);
    // ACKs the segments themselves triggered: window updates after the application
    // consumed (tcp_cleanup_rbuf) are a separate decision and not counted here.
    let before = p.stats().ack;
    let frames = sent(p, pool, now);
    let after = p.stats().ack;
    let acks = frames
        .iter()
        .filter(|x| matches!(x, Parsed::Tcp(m) if m.flags == TcpFlags::ACK))
        .count();
    let updates = after.get(AckReason::WindowUpdate) - before.get(AckReason::WindowUpdate);
    acks - updates as usize
}

#[test]
fn answers_arp_requests_for_its_address() {
    let mut p = pipeline(None);
    let mut pool = VecPool::new(64, 2048);
    // ARP request (RFC 826): who has 198.18.0.1? tell 198.18.0.2.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&PEER_MAC);
    arp.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&PEER_MAC);
    arp.extend_from_slice(&PEER_IP4.octets());
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&OUR_IP4.octets());
    arp.resize(60, 0);
    let mut b = Burst::new();
    b.push(VecBuf::from_vec(arp));
    p.handle_rx_burst(Instant::ZERO, &mut b);
    let mut out = Burst::new();
    assert_eq!(p.poll_tx(Instant::ZERO, &mut pool, &mut out), 1);
    let r = out[0].data();
    assert_eq!(&r[0..6], &PEER_MAC, "reply goes to the requester");
    assert_eq!(&r[12..14], &[0x08, 0x06]);
    assert_eq!(&r[20..22], &[0, 2], "ARP reply opcode");
    assert_eq!(&r[22..28], &OUR_MAC);
    assert_eq!(p.stats().pipeline.arp_replies, 1);
    assert_eq!(pool.in_use(), 1);
    drop(out);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn a_45_segment_run_gets_one_stretch_ack_with_gro_and_more_without() {
    let mut results = vec![];
    for gro in [
        Some(GroConfig {
            flush_ns: Duration::from_micros(100),
            ..GroConfig::default()
        }),
        None,
    ] {
        let mut p = pipeline(gro);
        let mut pool = VecPool::new(256, 2048);
        let mut now = Instant::from_nanos(1_000_000);
        let (mut seq, isn) = handshake(&mut p, &mut pool, now);
        let mut got = Vec::new();
        // Leave quickack mode first (Linux acks the first segments at once).
        for _ in 0..20 {
            now += Duration::from_millis(1);
            send_run(&mut p, &mut pool, now, &mut seq, isn, 2, &mut got);
        }
        now += Duration::from_millis(1);
        let acks = send_run(&mut p, &mut pool, now, &mut seq, isn, 45, &mut got);
        // Everything arrived, in order, exactly once.
        assert_eq!(got.len(), 85 * MSS);
        for (i, chunk) in got.chunks(MSS).enumerate() {
            let s = 1001u32.wrapping_add((i * MSS) as u32);
            assert_eq!(chunk[0], s as u8, "segment {i} out of order");
        }
        let st = p.stats();
        assert_eq!(st.tcp.bytes_in_order, (85 * MSS) as u64);
        results.push((acks, st.gro.aggregation_ratio()));
    }
    let (gro_acks, gro_ratio) = results[0];
    let (plain_acks, _) = results[1];
    assert!(gro_ratio > 1.0, "GRO coalesced nothing");
    assert_eq!(
        gro_acks, 1,
        "one stretch ACK for a coalesced 45-segment run"
    );
    assert!(plain_acks > gro_acks, "without GRO: {plain_acks} ACKs");
}

#[test]
fn buffers_the_application_read_are_freed_by_the_next_poll_tx() {
    let mut p = pipeline(None);
    let mut pool = VecPool::new(64, 2048);
    // Received frames come from their own counted pool, as a NIC's do.
    let mut rx_pool = VecPool::new(64, 2048);
    let now = Instant::from_nanos(1_000_000);
    let (mut seq, isn) = handshake(&mut p, &mut pool, now);
    let mut b = Burst::new();
    for i in 0..8u32 {
        let payload = vec![i as u8; MSS];
        let f = frame(seq, isn, TcpFlags::ACK, &payload, 10 + i).into_vec();
        b.push(rx_pool.adopt(f).expect("room in the rx pool"));
        seq = seq.wrapping_add(MSS as u32);
    }
    p.handle_rx_burst(now, &mut b);
    assert_eq!(rx_pool.in_use(), 8, "held by TCP until read");
    let read = read_readable(&mut p, &mut Vec::new());
    assert_eq!(read, 8 * MSS);
    // Read buffers are gathered and freed together, at the latest in the next poll_tx.
    let mut out = Burst::new();
    p.poll_tx(now, &mut pool, &mut out);
    assert_eq!(rx_pool.in_use(), 0, "read buffers not freed");
}

/// `busy_hold_ns`: a full receive burst (the queue backlogged, NAPI's budget used up)
/// leaves the run it ends with held, even with `flush_ns = 0`; the next burst that is not
/// full, an empty one included, flushes it. Without it the full burst's end flushes
/// everything. Every byte reaches TCP, in order.
#[test]
fn a_full_burst_keeps_its_last_run_held_until_the_queue_drains() {
    for busy_ms in [0, 1] {
        let mut p = pipeline(Some(GroConfig {
            busy_hold_ns: Duration::from_millis(busy_ms),
            ..GroConfig::default()
        }));
        let mut pool = VecPool::new(256, 2048);
        let now = Instant::from_nanos(1_000_000);
        let (mut seq, isn) = handshake(&mut p, &mut pool, now);
        let mut b: Burst<VecBuf> = Burst::new();
        while !b.is_full() {
            let payload = vec![seq as u8; MSS];
            b.push(frame(seq, isn, TcpFlags::ACK, &payload, 10));
            seq = seq.wrapping_add(MSS as u32);
        }
        let n = b.len() as u64;
        p.handle_rx_burst(now, &mut b);
        let st = p.stats();
        if busy_ms > 0 {
            // Every 45 segments fill a run (64 KiB) that leaves at once; the rest, fewer
            // than 45, are still held.
            assert!(n % 45 != 0, "the burst must end with a partial run");
            assert_eq!(
                st.gro_held_runs, 1,
                "the backlogged burst's last run is held"
            );
            assert_eq!(st.tcp.bytes_in_order, n / 45 * 45 * MSS as u64);
        } else {
            assert_eq!(st.gro_held_runs, 0, "flush_ns = 0 and no busy hold");
            assert_eq!(st.tcp.bytes_in_order, n * MSS as u64);
        }
        p.handle_rx_burst(now + Duration::from_micros(1), &mut Burst::new());
        let st = p.stats();
        assert_eq!(st.gro_held_runs, 0, "an empty burst: the queue drained");
        assert_eq!(st.tcp.bytes_in_order, n * MSS as u64);
    }
}

/// A run whose hold time is up when a burst arrives first takes that burst's segments of
/// its flow, then leaves at the burst's end: TCP sees it in the same iteration as it would
/// have if flushed before the burst, so no segment is held longer, and the run is longer.
/// A run that is not yet due stays held.
#[test]
fn a_due_run_takes_the_bursts_segments_before_it_is_flushed() {
    let flush = Duration::from_micros(20);
    let mut p = pipeline(Some(GroConfig {
        flush_ns: flush,
        ..GroConfig::default()
    }));
    let mut pool = VecPool::new(256, 2048);
    let t0 = Instant::from_nanos(1_000_000);
    let (mut seq, isn) = handshake(&mut p, &mut pool, t0);
    // The handshake's SYN and ACK passed GRO as runs of one.
    let g0 = p.stats().gro;
    let mut burst = |p: &mut Pipeline<VecBuf>, now: Instant, n: usize| {
        let mut b: Burst<VecBuf> = Burst::new();
        for _ in 0..n {
            b.push(frame(seq, isn, TcpFlags::ACK, &vec![seq as u8; MSS], 10));
            seq = seq.wrapping_add(MSS as u32);
        }
        p.handle_rx_burst(now, &mut b);
    };
    burst(&mut p, t0, 3);
    let st = p.stats();
    assert_eq!((st.gro_held_runs, st.tcp.bytes_in_order), (1, 0));
    // Not due yet (10 us of 20): the burst extends the run and it stays held.
    burst(&mut p, t0 + Duration::from_micros(10), 2);
    let st = p.stats();
    assert_eq!((st.gro_held_runs, st.tcp.bytes_in_order), (1, 0));
    // Due: the burst's 3 segments join it and the 8-segment run is delivered now.
    burst(&mut p, t0 + flush, 3);
    let st = p.stats();
    assert_eq!(st.gro_held_runs, 0);
    assert_eq!(st.tcp.bytes_in_order, 8 * MSS as u64);
    let units = st.gro.units_out - g0.units_out;
    assert_eq!((units, st.gro.segments_out - g0.segments_out), (1, 8));
    // Exactly one unit, so exactly one ACK decision for these 8 segments.
    let acks = sent(&mut p, &mut pool, t0 + flush)
        .iter()
        .filter(|x| matches!(x, Parsed::Tcp(m) if m.flags == TcpFlags::ACK))
        .count();
    assert_eq!(acks, 1);
}

/// From `CONN_PREFETCH_MIN` connections on, the pipeline fetches each segment's
/// connection ahead of it by the flow hash it reads from the frame: only hints, so with
/// more connections than that, flows interleaved one segment at a time (the pattern the
/// hints are for) and bursts of every length from 1 up, every connection still gets
/// exactly its own bytes, in order.
#[test]
fn above_the_prefetch_threshold_interleaved_flows_each_get_their_own_bytes() {
    use stack::flow::FlowKey;
    use stack::pipeline::CONN_PREFETCH_MIN;
    use std::collections::HashMap;

    let conns = CONN_PREFETCH_MIN + 76;
    let mut p = Pipeline::new(PipelineConfig {
        local: LocalAddrs::new(OUR_MAC, Some(OUR_IP4), None),
        gro: Some(GroConfig::default()),
        tcp: TcpConfig {
            max_conns: conns,
            ..TcpConfig::default()
        },
        listen: vec![(5001, AckPolicy::linux())],
        tx_csum_offload: false,
    })
    .expect("pipeline");
    let mut pool = VecPool::new(256, 2048);
    let now = Instant::from_nanos(1_000_000);
    let seg = frame_from;
    // Open every connection: the peer's next sequence number and weir's, by port.
    let mut next: Vec<(u16, u32, u32)> = Vec::new();
    for k in 0..conns {
        let sport = 10_000 + k as u16;
        let syn_opts = TcpOptions {
            mss: Some(1460),
            ..TcpOptions::default()
        };
        let mut b = Burst::new();
        b.push(seg(sport, 1000, 0, TcpFlags::SYN, &[], syn_opts));
        p.handle_rx_burst(now, &mut b);
        let out = sent(&mut p, &mut pool, now);
        let Some(Parsed::Tcp(synack)) = out.first() else {
            panic!("connection {k}: expected a SYN-ACK, got {out:?}");
        };
        let isn = synack.seq.get().wrapping_add(1);
        let mut b = Burst::new();
        b.push(seg(
            sport,
            1001,
            isn,
            TcpFlags::ACK,
            &[],
            TcpOptions::default(),
        ));
        p.handle_rx_burst(now, &mut b);
        next.push((sport, 1001, isn));
    }
    let _: Vec<Event> = p.tcp().events().collect();
    assert_eq!(p.tcp().conn_count(), conns);

    // Three rounds of one 100-byte segment per connection, cut into bursts of 1, 2, 3,
    // ... frames; each payload names its connection and round.
    let mut sent_bytes: HashMap<u16, Vec<u8>> = HashMap::new();
    let mut got: HashMap<u16, Vec<u8>> = HashMap::new();
    let mut frames = Vec::new();
    for round in 0..3u8 {
        for (sport, seq, isn) in next.iter_mut() {
            let payload: Vec<u8> = (0..100u8)
                .map(|j| j ^ round ^ (*sport as u8) ^ (*sport >> 8) as u8)
                .collect();
            frames.push(seg(
                *sport,
                *seq,
                *isn,
                TcpFlags::ACK,
                &payload,
                TcpOptions::default(),
            ));
            sent_bytes
                .entry(*sport)
                .or_default()
                .extend_from_slice(&payload);
            *seq = seq.wrapping_add(100);
        }
    }
    let by_id: HashMap<_, _> = next
        .iter()
        .map(|&(sport, ..)| {
            let id = p
                .tcp()
                .lookup(&FlowKey::v4(PEER_IP4, sport, OUR_IP4, 5001))
                .expect("every connection open");
            (id, sport)
        })
        .collect();
    let mut frames = frames.into_iter();
    let mut len = 1;
    loop {
        let mut b = Burst::new();
        for f in frames.by_ref().take(len) {
            b.push(f);
        }
        if b.is_empty() {
            break;
        }
        p.handle_rx_burst(now, &mut b);
        p.handle_timeout(now + Duration::from_micros(200));
        for e in p.tcp().events().collect::<Vec<_>>() {
            if let Event::Readable(id) = e {
                let sport = by_id[&id];
                let buf = got.entry(sport).or_default();
                p.tcp()
                    .recv(id, |s| {
                        for x in s {
                            buf.extend_from_slice(x.bytes());
                        }
                        s.iter().map(|x| x.len as usize).sum()
                    })
                    .expect("recv");
            }
        }
        let _ = sent(&mut p, &mut pool, now);
        len = len % 40 + 1;
    }
    assert_eq!(got.len(), conns, "every connection read data");
    for (sport, bytes) in &sent_bytes {
        assert_eq!(got.get(sport), Some(bytes), "connection from port {sport}");
    }
    let drops: Vec<_> = p
        .tcp()
        .stats()
        .drops_iter()
        .filter(|&(_, n)| n > 0)
        .collect();
    assert!(drops.is_empty(), "segments dropped: {drops:?}");
}
