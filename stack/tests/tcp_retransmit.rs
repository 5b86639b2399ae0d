//! Loss and congestion on the send side: the retransmission timer and its backoff (RFC
//! 6298 §5), bounded retries then reset, fast retransmit from three duplicate ACKs (RFC
//! 5681 §3.2, RFC 6582) and from SACK (RFC 6675 §5), RACK's reordering window and timer
//! (RFC 8985 §6) and the tail loss probe (§7), cwnd growth (RFC 5681 §3.1), and
//! weir-to-weir transfers over a lossy link. Each test names what it checks.
//!
//! A SACK peer gets RACK-TLP by default (`TcpConfig::loss_detection`); the tests of RFC
//! 6675's DupThresh rules and of the plain RTO ask for `SackLossDetection::Sack`, so both
//! modes stay covered.

use std::net::{IpAddr, SocketAddr};

use stack::ack::AckPolicy;
use stack::seq::SeqNumber;
use stack::tcp::{ConnId, ConnectOpts, DropReason, Event, SackLossDetection, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::{SackBlock, TcpFlags, TcpMeta};
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

/// The RTT of [`opened`]'s handshake: SRTT and the minimum RTT start here (RFC 6298
/// §2.2), so RACK's reordering window is `RTT / 4` = 5 ms (RFC 8985 §6.2 step 4) and the
/// PTO of a flight of more than one segment `2 · RTT` = 40 ms (§7.2); the RTO is the 200
/// ms minimum.
const RTT: Duration = Duration::from_millis(20);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// An active open under the default configuration (RACK-TLP) to a peer offering SACK and
/// window scaling but no timestamps (so the only RTT samples are the ones a test makes),
/// its SYN-ACK [`RTT`] after the SYN. Returns the fixture, the connection and SND.NXT.
fn opened() -> (Fixture, ConnId, SeqNumber) {
    let mut h = Fixture::with_cfg(cfg(), AckPolicy::linux());
    h.window = u16::MAX;
    let (id, _syn) = h.connect();
    h.now += RTT;
    let o = SynOpts {
        ts: false,
        ..SynOpts::all()
    };
    let sa = h.synack(o);
    h.send(sa);
    assert!(h.tcp.events().any(|e| e == Event::Opened(id)));
    assert_eq!(h.tx().len(), 1, "the handshake's ACK");
    let info = h.tcp.info(id).expect("conn");
    assert_eq!(info.srtt, Some(RTT));
    assert_eq!(info.rto, ms(200));
    (h, id, info.snd_nxt)
}

/// Fires every timer due up to `until`, one deadline at a time (`poll_timeout`), and
/// returns the frames sent with the virtual time each left at. The clock ends at
/// `until`.
fn run_until(h: &mut Fixture, until: Instant) -> Vec<(Instant, TcpMeta, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(t) = h.tcp.poll_timeout() {
        if t > until {
            break;
        }
        h.now = h.now.max(t);
        h.tcp.handle_timeout(h.now);
        for (m, p) in h.tx_payload() {
            out.push((h.now, m, p));
        }
    }
    h.now = until;
    h.tcp.handle_timeout(h.now);
    for (m, p) in h.tx_payload() {
        out.push((h.now, m, p));
    }
    out
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

/// Two weir stacks over a link that drops every n-th data frame in each direction, with
/// RACK-TLP and with RFC 6675's rules: retransmissions (fast, on the reordering, probe
/// and retransmission timers) deliver every byte, in order, both ways.
#[test]
fn weir_to_weir_over_a_lossy_link_every_byte_exact() {
    for (mode, every) in [
        (SackLossDetection::Rack, 7),
        (SackLossDetection::Rack, 5),
        (SackLossDetection::Rack, 13),
        (SackLossDetection::Sack, 7),
        (SackLossDetection::Sack, 13),
    ] {
        let c = TcpConfig {
            loss_detection: mode,
            ..cfg()
        };
        let mut p = Pair::new(c.clone(), c);
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
        assert!(gu == up, "a -> b exact ({mode:?}, every {every})");
        assert!(gd == down, "b -> a exact ({mode:?}, every {every})");
        assert!(p.a.stats().retransmits > 0 && p.b.stats().retransmits > 0);
    }
}

/// SND.MSS of connection `id`.
fn snd_mss(h: &Fixture, id: ConnId) -> usize {
    h.tcp.info(id).expect("conn").snd_mss as usize
}

/// Four segments sent at once on [`opened`]'s connection, then the SACK of the second
/// one RTT later (the first is missing: reordered or lost). Returns the fixture, the
/// connection, the first segment's start, SND.MSS and when the four left.
fn second_sacked_first() -> (Fixture, ConnId, SeqNumber, usize, Instant) {
    let (mut h, id, start) = opened();
    let mss = snd_mss(&h, id);
    send(&mut h, id, &bytes(0, 4 * mss));
    let t0 = h.now;
    assert_eq!(h.tx().len(), 4);
    h.now = t0 + RTT;
    dupack(&mut h, start, &[(start + mss, start + 2 * mss)]);
    assert!(
        h.tx().is_empty(),
        "RFC 8985 §6.2 step 5: not lost before RACK.rtt + reo_wnd"
    );
    (h, id, start, mss, t0)
}

/// RFC 8985 §6.2 step 5: a segment sent before one the peer SACKed is not lost until it
/// has waited RACK.rtt + reo_wnd; when the ACK of the merely reordered segment comes
/// inside the reordering window, nothing is retransmitted, and no timer fires later.
#[test]
fn rack_reordered_ack_within_reo_wnd_is_not_retransmitted_rfc8985_6_2() {
    let (mut h, id, start, mss, t0) = second_sacked_first();
    // The first segment arrives 4 ms after the second: inside the 5 ms window.
    h.now = t0 + RTT + ms(4);
    h.ack_to(start + 4 * mss);
    let later = run_until(&mut h, t0 + Duration::from_secs(1));
    assert!(later.is_empty(), "{later:?}");
    let st = h.tcp.stats();
    assert_eq!(
        (st.retransmits, st.fast_recoveries, st.rack_reorder_timeouts),
        (0, 0, 0)
    );
    assert_eq!(h.tcp.info(id).expect("conn").snd_una, start + 4 * mss);
}

/// RFC 8985 §6.2 step 5 and §6.3: with no ACK for the first segment, the reordering
/// timer fires at RACK.xmit_ts + RACK.rtt + reo_wnd (reo_wnd = min_RTT / 4) and the
/// segment, now lost, is retransmitted once; fast recovery starts.
#[test]
fn rack_marks_lost_after_reo_wnd_one_retransmission_rfc8985_6_3() {
    let (mut h, id, start, mss, t0) = second_sacked_first();
    let out = run_until(&mut h, t0 + ms(150));
    assert_eq!(out.len(), 1, "{out:?}");
    let (at, m, p) = &out[0];
    assert_eq!(*at, t0 + RTT + ms(5), "RACK.rtt 20 ms + reo_wnd 5 ms");
    assert_eq!((m.seq, p.clone()), (start, bytes(0, mss)));
    let st = h.tcp.stats();
    assert_eq!(
        (st.retransmits, st.fast_recoveries, st.rack_reorder_timeouts),
        (1, 1, 1)
    );
    assert_eq!(st.rto_timeouts, 0);
    h.now = t0 + ms(160);
    h.ack_to(start + 4 * mss);
    assert!(run_until(&mut h, t0 + Duration::from_secs(1)).is_empty());
    assert_eq!(h.tcp.info(id).expect("conn").snd_una, start + 4 * mss);
}

/// RFC 8985 §6.2 step 4: a D-SACK shows a retransmission was spurious (the original was
/// only reordered), so the reordering window grows: the next time a SACK arrives above a
/// hole, RACK waits 2 · min_RTT / 4 = 10 ms instead of 5 before calling it lost.
#[test]
fn rack_reo_wnd_grows_after_dsack_rfc8985_6_2_step4() {
    let (mut h, id, start, mss, t0) = second_sacked_first();
    let seg = |i: usize| start + i * mss;
    let out = run_until(&mut h, t0 + RTT + ms(5));
    assert_eq!(out.len(), 1, "the retransmission after 5 ms");
    // The original first segment was late, not lost: the peer acknowledges all four and
    // reports the retransmission as a duplicate (RFC 2883 §4).
    h.now = t0 + RTT + ms(6);
    dupack(&mut h, seg(4), &[(seg(0), seg(1))]);
    assert_eq!(h.tcp.stats().sack_blocks_refused, 0, "a valid D-SACK");
    assert!(h.tx().is_empty());
    // The next flight: again the second segment's SACK comes first.
    send(&mut h, id, &bytes(4 * mss, 2 * mss));
    let t1 = h.now;
    assert_eq!(h.tx().len(), 2);
    h.now = t1 + RTT;
    dupack(&mut h, seg(4), &[(seg(5), seg(6))]);
    let out = run_until(&mut h, t1 + ms(150));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        out[0].0,
        t1 + RTT + ms(10),
        "reo_wnd = 2 · min_RTT / 4 after the D-SACK"
    );
    assert_eq!(out[0].1.seq, seg(4));
    assert_eq!(h.tcp.stats().rack_reorder_timeouts, 2);
}

/// RFC 8985 §7.2-7.3: the last segment of a burst is lost and no ACK comes after the one
/// for the first two: the PTO (2 · SRTT after that ACK, more than one segment still in
/// flight) fires long before the RTO, and with no new data to send the probe is the last
/// segment again. Its ACK settles everything without an RTO; the next ACK beyond the
/// probe shows that it repaired a loss (§7.4.2), a congestion event.
#[test]
fn tlp_repairs_a_tail_loss_before_the_rto_rfc8985_7_3() {
    let (mut h, id, start) = opened();
    let mss = snd_mss(&h, id);
    let seg = |i: usize| start + i * mss;
    send(&mut h, id, &bytes(0, 4 * mss));
    let t0 = h.now;
    assert_eq!(h.tx().len(), 4);
    h.now = t0 + RTT;
    h.ack_to(seg(2));
    let info = h.tcp.info(id).expect("conn");
    assert_eq!(info.srtt, Some(RTT));
    let rto_deadline = h.now + info.rto;
    let out = run_until(&mut h, Instant::from_nanos(rto_deadline.as_nanos() - 1));
    assert_eq!(out.len(), 1, "one probe: {out:?}");
    let (at, m, p) = &out[0];
    assert_eq!(*at, t0 + RTT + ms(40), "PTO = 2 · SRTT");
    assert!(*at < rto_deadline);
    assert_eq!(
        (m.seq, p.clone()),
        (seg(3), bytes(3 * mss, mss)),
        "the last"
    );
    let st = h.tcp.stats();
    assert_eq!((st.tlp_probes, st.retransmits, st.rto_timeouts), (1, 1, 0));
    // The probe's ACK covers everything.
    h.now = *at + RTT;
    h.ack_to(seg(4));
    assert!(run_until(&mut h, rto_deadline + ms(500)).is_empty());
    assert_eq!(h.tcp.stats().rto_timeouts, 0);
    assert_eq!(
        h.tcp.stats().tlp_loss_repaired,
        0,
        "ACK = TLP.end_seq: not yet"
    );
    send(&mut h, id, &bytes(4 * mss, 100));
    assert_eq!(h.tx().len(), 1);
    h.now += RTT;
    h.ack_to(seg(4) + 100);
    assert_eq!(h.tcp.stats().tlp_loss_repaired, 1, "ACK beyond TLP.end_seq");
}

/// RFC 8985 §7.3: when the PTO fires and unsent data waits (here on cwnd: eleven segments
/// written, ten sent under IW10) and the peer's window allows it, the probe is one new
/// segment, sent whatever cwnd says.
#[test]
fn tlp_probe_is_new_data_when_available_rfc8985_7_3() {
    let (mut h, id, start) = opened();
    let mss = snd_mss(&h, id);
    send(&mut h, id, &bytes(0, 11 * mss));
    let t0 = h.now;
    assert_eq!(h.tx().len(), 10, "IW10 (RFC 6928)");
    // No ACK comes back.
    let out = run_until(&mut h, t0 + ms(199));
    assert_eq!(out.len(), 1, "{out:?}");
    let (at, m, p) = &out[0];
    assert_eq!(*at, t0 + ms(40), "PTO = 2 · SRTT");
    assert_eq!(
        (m.seq, p.clone()),
        (start + 10 * mss, bytes(10 * mss, mss)),
        "new data"
    );
    let st = h.tcp.stats();
    assert_eq!(
        (st.tlp_probes, st.retransmits, st.data_segments_sent),
        (1, 0, 11)
    );
    // Everything arrived: the ACK ends the episode (the new data was delivered).
    h.now = *at + RTT;
    h.ack_to(start + 11 * mss);
    assert!(run_until(&mut h, t0 + Duration::from_secs(2)).is_empty());
    let st = h.tcp.stats();
    assert_eq!((st.rto_timeouts, st.tlp_loss_repaired), (0, 0));
}

/// RFC 8985 §7.3: after a probe the RTO is re-armed, not pushed later: when the probe is
/// lost too, the RTO fires at the deadline set when the flight was sent (RFC 6298 §5.1),
/// and RTO recovery retransmits the first segment (RFC 5681 §3.1's loss window).
#[test]
fn rto_fires_when_the_probe_is_lost_too_rfc8985_7_3() {
    let (mut h, id, start) = opened();
    let mss = snd_mss(&h, id);
    send(&mut h, id, &bytes(0, 4 * mss));
    let t0 = h.now;
    assert_eq!(h.tx().len(), 4);
    let rto = h.tcp.info(id).expect("conn").rto;
    let out = run_until(&mut h, t0 + ms(300));
    let got: Vec<_> = out
        .iter()
        .map(|(at, m, p)| (*at, m.seq, p.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (t0 + ms(40), start + 3 * mss, bytes(3 * mss, mss)),
            (t0 + rto, start, bytes(0, mss)),
        ],
        "the probe at the PTO, then the first segment at the RTO armed at t0"
    );
    let st = h.tcp.stats();
    assert_eq!((st.tlp_probes, st.rto_timeouts, st.retransmits), (1, 1, 2));
}

/// A send unit (Linux's TSO skb, `tcp_write_xmit` sending several segments in one pass):
/// the frames are the ones a segment at a time builds, byte for byte, whatever the
/// quantum; the retransmission queue holds the unit as one entry; a SACK block splits it
/// at its edges (`tcp_sacktag_walk` fragmenting an skb) and a retransmission takes one
/// segment of it (`tcp_retransmit_skb` fragmenting to the MSS).
#[test]
fn send_unit_frames_equal_a_segment_at_a_time_and_split_where_acks_land_tcp_fragment() {
    let run = |quota: u32| {
        let c = TcpConfig {
            tx_quota: quota,
            ..sack_cfg()
        };
        let (mut h, id) = established_cfg(c, SynOpts::all());
        // The initial window (RFC 6928): nine full segments and a short one.
        send(&mut h, id, &bytes(0, 9 * 1448 + 100));
        (h, id)
    };
    let (mut one, _) = run(1);
    let (mut unit, id) = run(16);
    let a = one.tx_payload();
    let b = unit.tx_payload();
    assert_eq!(b.len(), 10);
    assert_eq!(a, b, "the same frames, a segment at a time or as a unit");
    let h = &mut unit;
    let start = h.our_nxt;
    let seg = |i: usize| start + i * 1448;
    // The ten segments sent together, the short one last, are one entry.
    assert_eq!(h.tcp.info(id).expect("conn").rtx_entries, 1);
    // SACK of segments 3..6 splits the unit at both edges.
    dupack(h, start, &[(seg(3), seg(6))]);
    assert_eq!(h.tcp.info(id).expect("conn").rtx_entries, 3);
    dupack(h, start, &[(seg(3), seg(7))]);
    dupack(h, start, &[(seg(3), seg(8))]);
    // DupThresh: three SACKed segments above the hole (RFC 6675 IsLost), counted in
    // segments, not entries: the first three segments are lost and go one at a time.
    let out = h.tx_payload();
    let resent: Vec<_> = out
        .iter()
        .filter(|(m, _)| m.seq.get().wrapping_sub(start.get()) < 3 * 1448)
        .map(|(m, p)| (m.seq, p.len()))
        .collect();
    assert!(!resent.is_empty(), "the hole is retransmitted");
    assert!(
        resent.iter().all(|&(_, n)| n == 1448),
        "one segment at a time: {resent:?}"
    );
    assert_eq!(resent[0], (start, 1448));
    assert_eq!(out[0].1, bytes(0, 1448));
    h.ack_to(seg(9) + 100);
    let info = h.tcp.info(id).expect("conn");
    assert_eq!((info.snd_queued, info.rtx_entries), (0, 0));
}

/// A send unit sends what a segment at a time sends, frame for frame, whatever limits a
/// unit mid-way: writes ending inside segments (PSH), a peer window of a few segments, the
/// congestion window, our FIN after the last write, over several rounds of ACKs.
#[test]
fn send_units_build_the_frames_a_segment_at_a_time_builds_when_windows_cut_them() {
    let run = |quota: u32, window: u16, fin: bool| {
        let c = TcpConfig {
            tx_quota: quota,
            ..cfg()
        };
        let (mut h, id) = established_cfg(c, SynOpts::all());
        h.window = window;
        h.ack_to(h.our_nxt);
        let _ = h.tx_payload();
        let mut at = 0;
        for len in [3000, 1448 * 7, 10, 40_000, 5000] {
            assert_eq!(send(&mut h, id, &bytes(at, len)), len);
            at += len;
        }
        if fin {
            h.tcp.shutdown(h.now, id).expect("shutdown");
        }
        let mut frames = Vec::new();
        for _ in 0..40 {
            let out = h.tx_payload();
            if let Some(top) = out
                .iter()
                .map(|(m, p)| m.seq + p.len() + usize::from(m.flags.contains(TcpFlags::FIN)))
                .max_by(|a, b| (*a - h.our_nxt).cmp(&(*b - h.our_nxt)))
            {
                h.advance(ms(1));
                h.ack_to(top);
            } else {
                h.advance(ms(50));
            }
            frames.extend(out);
        }
        frames
    };
    for (window, fin) in [(1024, false), (1024, true), (23, false), (40, true)] {
        let one = run(1, window, fin);
        assert!(one.len() > 40, "window {window}: {} frames", one.len());
        let sent: usize = one.iter().map(|(_, p)| p.len()).sum();
        assert_eq!(
            sent,
            3000 + 1448 * 7 + 10 + 40_000 + 5000,
            "every byte, once"
        );
        assert_eq!(
            one.iter().any(|(m, _)| m.flags.contains(TcpFlags::FIN)),
            fin,
            "our FIN after the data"
        );
        for quota in [16, 64] {
            assert_eq!(
                run(quota, window, fin),
                one,
                "quota {quota}, window {window}, fin {fin}"
            );
        }
    }
}
