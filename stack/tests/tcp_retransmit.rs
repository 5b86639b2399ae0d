//! Loss and congestion on the send side: the retransmission timer and its backoff (RFC
//! 6298 §5), bounded retries then reset, fast retransmit from three duplicate ACKs (RFC
//! 5681 §3.2, RFC 6582) and from SACK (RFC 6675 §5), cwnd growth (RFC 5681 §3.1), and
//! weir-to-weir transfers over a lossy link. Each test names what it checks.

use std::net::{IpAddr, SocketAddr};

use stack::ack::AckPolicy;
use stack::seq::SeqNumber;
use stack::tcp::{ConnId, ConnectOpts, DropReason, Event, SackLossDetection, TcpConfig};
use stack::time::Duration;
use stack::wire::{SackBlock, TcpFlags};
use testkit::tcp::*;

fn bytes(from: usize, n: usize) -> Vec<u8> {
    (from..from + n).map(|i| (i % 253) as u8).collect()
}

fn established_cfg(c: TcpConfig, o: SynOpts) -> (Fixture, ConnId) {
    let mut h = Fixture::with_cfg(c, AckPolicy::linux());
    h.window = 1024;
    h.handshake(o);
    let id = h.id();
    (h, id)
}

fn established(o: SynOpts) -> (Fixture, ConnId) {
    established_cfg(cfg(), o)
}

/// The test configuration with RFC 6675's DupThresh rules for SACK peers, no RACK-TLP.
fn sack_cfg() -> TcpConfig {
    TcpConfig {
        loss_detection: SackLossDetection::Sack,
        ..cfg()
    }
}

fn send(h: &mut Fixture, id: ConnId, data: &[u8]) -> usize {
    h.tcp.send(h.now, id, data, &mut h.pool).expect("send")
}

/// A duplicate ACK from the peer: SEG.ACK = `ack`, no data, SACK blocks `sack`.
fn dupack(h: &mut Fixture, ack: SeqNumber, sack: &[(SeqNumber, SeqNumber)]) {
    h.our_nxt = ack;
    let mut s = h.seg(h.snd_nxt, TcpFlags::ACK, 0, 0);
    for (i, (l, r)) in sack.iter().enumerate() {
        s.opts.sack[i] = SackBlock {
            left: *l,
            right: *r,
        };
    }
    s.opts.sack_count = sack.len() as u8;
    h.send(s);
}

/// RFC 6298 §5.4-5.6: when the timer expires the earliest unacknowledged segment is
/// retransmitted (cwnd is one segment, RFC 5681 §3.1) and the RTO doubles; the same bytes
/// go again.
#[test]
fn rto_retransmits_earliest_segment_with_backoff_rfc6298_5_4() {
    // RFC 6675 mode: no tail loss probe comes before the RTO.
    let (mut h, id) = established_cfg(sack_cfg(), SynOpts::all());
    send(&mut h, id, &bytes(0, 2896));
    let start = h.our_nxt;
    assert_eq!(h.tx().len(), 2);
    let rto = h.tcp.info(id).expect("conn").rto;
    assert_eq!(rto, Duration::from_millis(200), "the 200 ms minimum RTO");
    h.advance(Duration::from_millis(199));
    assert!(h.tx().is_empty());
    h.advance(Duration::from_millis(1));
    let out = h.tx_payload();
    assert_eq!(out.len(), 1, "one segment: cwnd is the loss window");
    assert_eq!((out[0].0.seq, out[0].1.clone()), (start, bytes(0, 1448)));
    let info = h.tcp.info(id).expect("conn");
    assert_eq!(info.rto, Duration::from_millis(400), "backed off");
    assert_eq!(info.cwnd, 1448);
    h.advance(Duration::from_millis(399));
    assert!(h.tx().is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(h.tx().len(), 1);
    assert_eq!(h.tcp.stats().rto_timeouts, 2);
    assert_eq!(h.tcp.stats().retransmits, 2);
    // The ACK of both segments ends it: nothing more is sent.
    h.ack_to(start + 2896);
    h.advance(Duration::from_secs(2));
    assert!(h.tx().is_empty());
}

/// RFC 6298 §5.5 / RFC 9293 §3.8.3 (R2, Linux `tcp_retries2`): after `max_retries`
/// retransmissions go unanswered the connection is reset and the application told.
#[test]
fn retries_exhausted_reset_the_connection_rfc9293_3_8_3() {
    let c = TcpConfig {
        max_retries: 2,
        ..cfg()
    };
    let (mut h, id) = established_cfg(c, SynOpts::all());
    send(&mut h, id, &bytes(0, 100));
    assert_eq!(h.tx().len(), 1);
    h.advance(Duration::from_millis(200));
    assert_eq!(h.tx().len(), 1);
    h.advance(Duration::from_millis(400));
    assert_eq!(h.tx().len(), 1);
    h.advance(Duration::from_millis(800));
    let out = h.tx();
    assert_eq!(out.len(), 1);
    assert!(out[0].flags.contains(TcpFlags::RST));
    assert!(h.tcp.info(id).is_none());
    assert!(h.tcp.events().any(|e| e == Event::Reset(id)));
    assert_eq!(h.tcp.stats().drops(DropReason::RetriesExhausted), 1);
}

/// RFC 5681 §3.2 and RFC 6582 (NewReno, the peer without SACK): the third duplicate ACK
/// retransmits the missing segment at once; the ACK that covers everything ends
/// recovery.
#[test]
fn fast_retransmit_on_three_dupacks_rfc5681_3_2() {
    let o = SynOpts {
        sack: false,
        ..SynOpts::all()
    };
    let (mut h, id) = established(o);
    send(&mut h, id, &bytes(0, 10 * 1448));
    let start = h.our_nxt;
    assert_eq!(h.tx().len(), 10);
    // The first segment arrives, the second is lost, the rest make duplicate ACKs.
    h.ack_to(start + 1448);
    let _ = h.tx();
    for i in 0..2 {
        dupack(&mut h, start + 1448, &[]);
        assert!(h.tx().iter().all(|m| m.seq != start + 1448), "dupack {i}");
    }
    dupack(&mut h, start + 1448, &[]);
    let out = h.tx_payload();
    let rtx = out
        .iter()
        .find(|(m, _)| m.seq == start + 1448)
        .expect("the missing segment is retransmitted");
    assert_eq!(rtx.1, bytes(1448, 1448));
    assert_eq!(h.tcp.stats().fast_recoveries, 1);
    assert!(h.tcp.stats().retransmits >= 1);
    assert_eq!(h.tcp.stats().rto_timeouts, 0);
    h.ack_to(start + 10 * 1448);
    let info = h.tcp.info(id).expect("conn");
    assert_eq!(info.snd_una, start + 10 * 1448);
}

/// RFC 6675 §5 with RFC 2018: SACK blocks for three segments above the hole make the
/// hole lost (DupThresh) and it is retransmitted; SACK blocks beyond SND.NXT are refused
/// and counted (RFC 2018 §8).
#[test]
fn fast_retransmit_from_sack_rfc6675_5() {
    let (mut h, id) = established_cfg(sack_cfg(), SynOpts::all());
    send(&mut h, id, &bytes(0, 10 * 1448));
    let start = h.our_nxt;
    assert_eq!(h.tx().len(), 10);
    let seg = |i: usize| start + i * 1448;
    dupack(&mut h, start, &[(seg(1), seg(2))]);
    dupack(&mut h, start, &[(seg(1), seg(3))]);
    assert!(h.tx().iter().all(|m| m.seq != start));
    dupack(&mut h, start, &[(seg(1), seg(4))]);
    let out = h.tx_payload();
    let rtx = out
        .iter()
        .find(|(m, _)| m.seq == start)
        .expect("the hole is retransmitted");
    assert_eq!(rtx.1, bytes(0, 1448));
    assert_eq!(h.tcp.stats().fast_recoveries, 1);
    // A block of data never sent is refused, never a panic.
    dupack(&mut h, start, &[(seg(20), seg(21))]);
    assert_eq!(h.tcp.stats().sack_blocks_refused, 1);
    h.ack_to(seg(10));
    assert_eq!(h.tcp.info(id).expect("conn").snd_queued, 0);
}

/// RFC 5681 §3.1 (slow start) with the default byte counting: each ACK of new data grows
/// cwnd by what it acknowledged, so after the initial window is acknowledged twice as
/// much may be in flight.
#[test]
fn slow_start_grows_cwnd_rfc5681_3_1() {
    let (mut h, id) = established(SynOpts::all());
    send(&mut h, id, &bytes(0, 100_000));
    let start = h.our_nxt;
    assert_eq!(h.tx().len(), 10, "IW10 (RFC 6928)");
    assert_eq!(h.tcp.info(id).expect("conn").cwnd, 14_480);
    h.ack_to(start + 14_480);
    assert_eq!(h.tcp.info(id).expect("conn").cwnd, 28_960);
    assert_eq!(h.tx().len(), 20);
    assert!(
        h.tcp.info(id).expect("conn").srtt.is_some(),
        "an RTT sample"
    );
}

/// Two weir stacks over a link that drops every 7th data frame in each direction:
/// retransmissions (fast and on the timer) deliver every byte, in order, both ways.
#[test]
fn weir_to_weir_over_a_lossy_link_every_byte_exact() {
    for every in [7, 5, 13] {
        let mut p = Pair::new(cfg(), cfg());
        p.b.listen(PORT, AckPolicy::linux()).expect("listen");
        p.drop_every = Some(every);
        let mut o = ConnectOpts::new(OUR_MAC, PEER_MAC);
        o.ack = AckPolicy::linux();
        let local: IpAddr = OUR_IP4.into();
        let a =
            p.a.connect(p.now, local, SocketAddr::new(PEER_IP4.into(), PORT), o)
                .expect("connect");
        let mut b = None;
        for _ in 0..10 {
            p.step(Duration::from_micros(50));
            b = b.or(p.b.events().find_map(|e| match e {
                Event::Opened(id) => Some(id),
                _ => None,
            }));
        }
        let b = b.expect("b opened");
        let _ = p.a.events().count();
        assert!(p.a.info(a).expect("a").sack, "weir offers SACK to weir");
        let up = bytes(0, 250_000);
        let down = bytes(7, 150_000);
        let (mut su, mut sd) = (0, 0);
        let (mut gu, mut gd) = (Vec::new(), Vec::new());
        for _ in 0..200_000 {
            if su < up.len() {
                su += p.a.send(p.now, a, &up[su..], &mut p.pool_a).expect("a");
            }
            if sd < down.len() {
                sd += p.b.send(p.now, b, &down[sd..], &mut p.pool_b).expect("b");
            }
            let _ = p.a.recv(a, |s| {
                s.iter().for_each(|x| gd.extend_from_slice(x.bytes()));
                s.iter().map(|x| usize::from(x.len)).sum()
            });
            let _ = p.b.recv(b, |s| {
                s.iter().for_each(|x| gu.extend_from_slice(x.bytes()));
                s.iter().map(|x| usize::from(x.len)).sum()
            });
            assert!(p.a.events().all(|e| e != Event::Reset(a)));
            assert!(p.b.events().all(|e| e != Event::Reset(b)));
            if gu.len() == up.len() && gd.len() == down.len() {
                break;
            }
            if p.step(Duration::from_micros(50)) == 0 {
                // Idle: jump to the next timer (an RTO after a tail loss).
                if let Some(t) = p.next_timeout() {
                    p.now = p.now.max(t);
                }
            }
        }
        assert!(
            p.dropped[0] > 0 && p.dropped[1] > 0,
            "the link dropped frames"
        );
        assert!(gu == up, "a -> b exact (every {every})");
        assert!(gd == down, "b -> a exact (every {every})");
        assert!(p.a.stats().retransmits > 0 && p.b.stats().retransmits > 0);
    }
}
