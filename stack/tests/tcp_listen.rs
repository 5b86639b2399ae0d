//! LISTEN and SYN-RECEIVED: passive open, option negotiation, SYN cookies, RSTs for
//! segments that reach no connection. Each test names the section it checks.

use stack::ack::{AckPolicy, AckReason};
use stack::seq::SeqNumber;
use stack::tcp::{DropReason, Event, State};
use stack::time::Duration;
use stack::wire::TcpFlags;
use testkit::tcp::*;

/// RFC 9293 §3.10.7.2 (LISTEN, SYN) + RFC 7323 §2.2/§3.2 + RFC 2018 §2: the SYN-ACK carries
/// MSS, window scale, SACK-permitted and timestamps when the peer offered them.
#[test]
fn synack_with_every_option_rfc9293_3_10_7_2() {
    let mut h = Fixture::listening(AckPolicy::linux());
    let sa = h.handshake(SynOpts::all());
    assert_eq!(sa.opts.mss, Some(1460));
    assert_eq!(sa.opts.wscale, Some(3), "256 KiB buffer needs shift 3");
    assert!(sa.opts.sack_permitted);
    let ts = sa.opts.timestamp.expect("timestamps");
    assert_eq!(ts.tsecr, 5000, "TSecr echoes the SYN's TSval");
    // RFC 7323 §2.2: the window in a SYN-ACK is never scaled.
    assert_eq!(sa.window, 65535);
    let info = h.tcp.info(h.id()).expect("conn");
    assert_eq!(info.state, State::Established);
    assert!(info.sack && info.timestamps);
    assert_eq!((info.rcv_wscale, info.snd_wscale), (3, 7));
    assert_eq!(h.acks(AckReason::Handshake), 1);
    assert_eq!(h.tcp.stats().conns_opened, 1);
}

/// RFC 7323 §1.3/§2.2, RFC 2018 §2: no option is sent that the peer did not offer.
#[test]
fn synack_without_options_rfc7323_2_2() {
    let mut h = Fixture::listening(AckPolicy::linux());
    let sa = h.handshake(SynOpts::none());
    assert_eq!(
        sa.opts.mss,
        Some(1460),
        "MSS is always sent (RFC 9293 §3.7.1)"
    );
    assert_eq!(sa.opts.wscale, None);
    assert!(!sa.opts.sack_permitted);
    assert_eq!(sa.opts.timestamp, None);
    let info = h.tcp.info(h.id()).expect("conn");
    assert!(!info.sack && !info.timestamps);
    assert_eq!((info.rcv_wscale, info.snd_wscale), (0, 0));
    // Data ACKs then carry no options and an unscaled window.
    h.data(1000, 1000, false);
    let a = h.tx();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].header_len, 20);
}

/// Each option alone (RFC 7323 §2.2 wscale, §3.2 timestamps, RFC 2018 §2 SACK).
#[test]
fn each_option_alone() {
    for (o, ws, sack, ts) in [
        (
            SynOpts {
                wscale: Some(2),
                ..SynOpts::none()
            },
            true,
            false,
            false,
        ),
        (
            SynOpts {
                sack: true,
                ..SynOpts::none()
            },
            false,
            true,
            false,
        ),
        (
            SynOpts {
                ts: true,
                ..SynOpts::none()
            },
            false,
            false,
            true,
        ),
    ] {
        let mut h = Fixture::listening(AckPolicy::linux());
        let sa = h.handshake(o);
        assert_eq!(sa.opts.wscale.is_some(), ws);
        assert_eq!(sa.opts.sack_permitted, sack);
        assert_eq!(sa.opts.timestamp.is_some(), ts);
    }
}

/// RFC 9293 §3.10.7.1: a segment for no connection and no listener gets a RST:
/// with ACK, <SEQ=SEG.ACK><CTL=RST>; without, <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
#[test]
fn rst_for_closed_port_rfc9293_3_10_7_1() {
    let mut h = Fixture::listening(AckPolicy::linux());
    h.flow.dport = 9999;
    h.our_nxt = SeqNumber(777);
    let s = h.seg(SeqNumber(100), TcpFlags::ACK, 10, 10);
    h.send(s);
    let s = h.seg(SeqNumber(200), TcpFlags::SYN, 0, 0);
    h.send(s);
    let s = h.seg(SeqNumber(300), TcpFlags::RST, 0, 0);
    h.send(s);
    let out = h.tx();
    assert_eq!(out.len(), 2, "no RST answers a RST");
    assert_eq!(out[0].flags, TcpFlags::RST);
    assert_eq!(out[0].seq, SeqNumber(777));
    assert_eq!(out[1].flags, TcpFlags::RST | TcpFlags::ACK);
    assert_eq!(out[1].seq, SeqNumber(0));
    assert_eq!(out[1].ack, SeqNumber(201));
    assert_eq!(h.tcp.stats().resets_sent, 2);
    assert_eq!(h.tcp.stats().drops(DropReason::NoListener), 3);
    assert_eq!(h.acks(AckReason::Rst), 2);
}

/// RFC 9293 §3.10.7.2: an ACK to a listener (no SYN cookie outstanding) gets a RST.
#[test]
fn ack_to_listener_gets_rst_rfc9293_3_10_7_2() {
    let mut h = Fixture::listening(AckPolicy::linux());
    h.our_nxt = SeqNumber(4242);
    let s = h.seg(SeqNumber(1), TcpFlags::ACK, 0, 0);
    h.send(s);
    let out = h.tx();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].flags, TcpFlags::RST);
    assert_eq!(out[0].seq, SeqNumber(4242));
    assert_eq!(h.tcp.stats().conns_refused, 1);
}

/// RFC 9293 §3.10.7.4 (SYN-RECEIVED): an ACK that does not acknowledge our SYN gets
/// <SEQ=SEG.ACK><CTL=RST>; the half-open entry stays.
#[test]
fn bad_handshake_ack_gets_rst() {
    let mut h = Fixture::listening(AckPolicy::linux());
    let syn = h.syn(SynOpts::all());
    h.send(syn);
    let sa = h.tx()[0];
    h.snd_nxt += 1;
    h.our_nxt = sa.seq + 5;
    let s = h.seg(h.snd_nxt, TcpFlags::ACK, 0, 0);
    h.send(s);
    let out = h.tx();
    assert_eq!(out[0].flags, TcpFlags::RST);
    assert_eq!(out[0].seq, sa.seq + 5);
    assert_eq!(h.tcp.half_open_count(), 1);
}

/// Linux `tcp_synack_retries`: a lost SYN-ACK is retransmitted on a doubling timer, and the
/// entry is dropped after the last try.
#[test]
fn synack_retransmitted_on_timer() {
    let mut cfg = cfg();
    cfg.synack_retries = 2;
    let mut h = Fixture::with_cfg(cfg, AckPolicy::linux());
    let syn = h.syn(SynOpts::all());
    h.send(syn);
    assert_eq!(h.tx().len(), 1);
    assert!(h.tcp.poll_timeout().is_some());
    h.advance(Duration::from_millis(999));
    assert!(h.tx().is_empty());
    h.advance(Duration::from_millis(1));
    let r = h.tx();
    assert_eq!(r.len(), 1, "first retransmission at 1 s");
    assert_eq!(r[0].flags, TcpFlags::SYN | TcpFlags::ACK);
    h.advance(Duration::from_secs(2));
    assert_eq!(h.tx().len(), 1, "second at +2 s");
    h.advance(Duration::from_secs(4));
    assert!(h.tx().is_empty());
    assert_eq!(h.tcp.half_open_count(), 0);
    assert_eq!(h.tcp.stats().drops(DropReason::SynAckRetriesExhausted), 1);
}

/// A retransmitted SYN in SYN-RECEIVED is answered with the same SYN-ACK.
#[test]
fn duplicate_syn_resends_synack() {
    let mut h = Fixture::listening(AckPolicy::linux());
    let syn = h.syn(SynOpts::all());
    h.send(syn);
    let a = h.tx()[0];
    let syn = h.syn(SynOpts::all());
    h.send(syn);
    let b = h.tx()[0];
    assert_eq!(a.seq, b.seq);
    assert_eq!(h.tcp.half_open_count(), 1);
}

/// RFC 4987 §3.6, Linux `cookie_v4_init_sequence` / `cookie_init_timestamp`: with the
/// half-open table full, SYNs get stateless cookie SYN-ACKs; a valid final ACK creates the
/// connection with the MSS index, window scale and SACK recovered; a forged one is refused.
#[test]
fn syn_cookies_when_half_open_full_rfc4987() {
    let mut cfg = cfg();
    cfg.max_half_open = 2;
    let mut h = Fixture::with_cfg(cfg, AckPolicy::linux());
    for p in 0..2u16 {
        let mut s = h.syn(SynOpts::all());
        s.flow.sport = 1000 + p;
        h.send(s);
    }
    assert_eq!(h.tcp.half_open_count(), 2);
    assert_eq!(h.tx().len(), 2);
    // The table is full: the next SYN gets a cookie.
    let sa = h.handshake(SynOpts {
        mss: Some(1400),
        wscale: Some(9),
        sack: true,
        ts: true,
    });
    assert_eq!(h.tcp.stats().syn_cookies_sent, 1);
    assert_eq!(h.tcp.stats().syn_cookies_accepted, 1);
    assert_eq!(h.tcp.half_open_count(), 2, "no state kept for the cookie");
    assert!(sa.opts.sack_permitted);
    assert_eq!(sa.opts.wscale, Some(3));
    let info = h.tcp.info(h.id()).expect("conn");
    assert_eq!(info.snd_wscale, 9, "peer wscale recovered from TSecr");
    assert!(info.sack && info.timestamps);
    // Data flows on the cookie connection.
    h.data(3000, 1448, false);
    assert_eq!(h.read_all().len(), 3000);

    // A forged cookie ACK is refused with a RST.
    let mut s = h.seg(SeqNumber(5), TcpFlags::ACK, 0, 0);
    s.flow.sport = 2000;
    s.ack = SeqNumber(0x1234_5678);
    h.send(s);
    let out = h.tx();
    assert!(out.iter().any(|m| m.flags == TcpFlags::RST));
    assert_eq!(h.tcp.stats().drops(DropReason::BadCookie), 1);
}

/// RFC 4987 §3.6 / Linux: without timestamps a cookie SYN-ACK offers neither window scale
/// nor SACK (nothing could remember them).
#[test]
fn syn_cookie_without_timestamps_drops_wscale_and_sack() {
    let mut cfg = cfg();
    cfg.max_half_open = 1;
    let mut h = Fixture::with_cfg(cfg, AckPolicy::linux());
    let mut s = h.syn(SynOpts::all());
    s.flow.sport = 1;
    h.send(s);
    let _ = h.tx();
    let sa = h.handshake(SynOpts {
        mss: Some(1460),
        wscale: Some(7),
        sack: true,
        ts: false,
    });
    assert_eq!(sa.opts.wscale, None);
    assert!(!sa.opts.sack_permitted);
    let info = h.tcp.info(h.id()).expect("conn");
    assert_eq!((info.rcv_wscale, info.snd_wscale), (0, 0));
    assert!(matches!(
        h.tcp.poll_event(),
        None | Some(Event::Readable(_))
    ));
}

/// IPv6 listener: same port serves both families; the SYN-ACK MSS is MTU - 60.
#[test]
fn ipv6_handshake() {
    let mut h = Fixture::listening(AckPolicy::linux());
    h.flow = stack::flow::FlowKey::v6(
        "2001:db8::2".parse().expect("addr"),
        40000,
        "2001:db8::1".parse().expect("addr"),
        PORT,
    );
    let syn = h.syn(SynOpts::all());
    h.send(syn);
    let mut out = stack::driver::Burst::new();
    h.tcp.poll_tx(h.now, &mut h.pool, &mut out, false);
    assert_eq!(out.len(), 1);
    let local = stack::wire::parse::LocalAddrs::new(
        PEER_MAC,
        None,
        Some("2001:db8::2".parse().expect("addr")),
    );
    let bytes = out.pop().expect("frame").into_vec();
    match stack::wire::parse::parse(&bytes, Default::default(), &local) {
        stack::wire::parse::Parsed::Tcp(m) => {
            assert_eq!(m.opts.mss, Some(1440));
            assert_eq!(m.flags, TcpFlags::SYN | TcpFlags::ACK);
        }
        other => panic!("{other:?}"),
    }
}
