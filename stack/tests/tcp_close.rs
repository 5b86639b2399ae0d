//! CLOSE-WAIT, LAST-ACK, FIN-WAIT, TIME-WAIT and RST (RFC 9293 §3.6, §3.10.4, §3.10.7.4).

use stack::ack::{AckPolicy, AckReason};
use stack::tcp::{Event, State, TcpConfig};
use stack::time::Duration;
use stack::wire::TcpFlags;
use testkit::tcp::*;

/// RFC 9293 §3.6 passive close: FIN -> CLOSE-WAIT (FIN ACKed), application close -> our
/// FIN -> LAST-ACK -> CLOSED when it is ACKed.
#[test]
fn passive_close_rfc9293_3_6() {
    let mut h = Fixture::listening(AckPolicy::linux());
    h.handshake(SynOpts::all());
    h.data(3000, 1000, false);
    let _ = h.tx();
    let s = h.seg(h.snd_nxt, TcpFlags::ACK | TcpFlags::FIN, 0, 0);
    h.send(s);
    let a = h.tx();
    assert_eq!(
        a.last().expect("ack").ack,
        h.snd_nxt + 1,
        "FIN consumes one"
    );
    let id = h.id();
    let ev: Vec<Event> = h.tcp.events().collect();
    assert!(ev.contains(&Event::PeerClosed(id)));
    assert_eq!(h.tcp.info(id).expect("conn").state, State::CloseWait);
    assert_eq!(h.read_all().len(), 3000);
    h.tcp.close(h.now, id).expect("close");
    let f = h.tx();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].flags, TcpFlags::FIN | TcpFlags::ACK);
    assert_eq!(h.tcp.info(id).expect("conn").state, State::LastAck);
    assert_eq!(h.acks(AckReason::Fin), 2);
    h.snd_nxt += 1;
    h.our_nxt = f[0].seq + 1;
    let s = h.seg(h.snd_nxt, TcpFlags::ACK, 0, 0);
    h.send(s);
    assert!(h.tcp.info(id).is_none());
    assert!(h.tcp.events().any(|e| e == Event::Closed(id)));
    assert_eq!(h.tcp.stats().conns_closed, 1);
    assert_eq!(h.tcp.conn_count(), 0);
}

/// Our FIN is retransmitted on a timer; after `fin_retries` the connection is reset.
#[test]
fn fin_retransmitted_then_reset() {
    let cfg = TcpConfig {
        fin_retries: 2,
        ..cfg()
    };
    let mut h = Fixture::with_cfg(cfg, AckPolicy::linux());
    h.handshake(SynOpts::all());
    let s = h.seg(h.snd_nxt, TcpFlags::ACK | TcpFlags::FIN, 0, 0);
    h.send(s);
    let _ = h.tx();
    let id = h.id();
    h.tcp.close(h.now, id).expect("close");
    assert_eq!(h.tx().len(), 1);
    h.advance(Duration::from_millis(200));
    let r = h.tx();
    assert_eq!(r.len(), 1);
    assert!(r[0].flags.contains(TcpFlags::FIN));
    h.advance(Duration::from_millis(400));
    assert_eq!(h.tx().len(), 1);
    h.advance(Duration::from_millis(800));
    let r = h.tx();
    assert_eq!(r.len(), 1);
    assert!(r[0].flags.contains(TcpFlags::RST));
    assert!(h.tcp.info(id).is_none());
}

/// A retransmitted FIN (our ACK of it was lost) is ACKed again (RFC 9293 §3.10.7.4: an
/// unacceptable segment gets an ACK).
#[test]
fn retransmitted_fin_is_reacked() {
    let mut h = Fixture::listening(AckPolicy::linux());
    h.handshake(SynOpts::all());
    let fin = h.snd_nxt;
    let s = h.seg(fin, TcpFlags::ACK | TcpFlags::FIN, 0, 0);
    h.send(s);
    let _ = h.tx();
    let s = h.seg(fin, TcpFlags::ACK | TcpFlags::FIN, 0, 0);
    h.send(s);
    let a = h.tx();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].ack, fin + 1);
}

/// A FIN that arrives out of order is held until the gap fills.
#[test]
fn out_of_order_fin() {
    let mut h = Fixture::listening(AckPolicy::linux());
    h.handshake(SynOpts::all());
    let base = h.snd_nxt;
    let s = h.seg(base + 1000, TcpFlags::ACK | TcpFlags::FIN, 1000, 1000);
    h.send(s);
    let _ = h.tx();
    assert_eq!(h.tcp.info(h.id()).expect("c").state, State::Established);
    h.data(1000, 1000, false);
    let a = h.tx();
    assert_eq!(a.last().expect("ack").ack, base + 2001);
    assert_eq!(h.tcp.info(h.id()).expect("c").state, State::CloseWait);
    assert_eq!(h.read_all().len(), 2000);
}

/// RFC 9293 §3.6 active close: FIN-WAIT-1 -> FIN-WAIT-2 -> TIME-WAIT -> CLOSED.
#[test]
fn active_close_through_time_wait() {
    let cfg = TcpConfig {
        time_wait: Duration::from_secs(1),
        ..cfg()
    };
    let mut h = Fixture::with_cfg(cfg, AckPolicy::linux());
    h.handshake(SynOpts::all());
    let id = h.id();
    h.tcp.close(h.now, id).expect("close");
    let f = h.tx();
    assert_eq!(f[0].flags, TcpFlags::FIN | TcpFlags::ACK);
    assert_eq!(h.tcp.info(id).expect("c").state, State::FinWait1);
    h.our_nxt = f[0].seq + 1;
    let s = h.seg(h.snd_nxt, TcpFlags::ACK, 0, 0);
    h.send(s);
    assert_eq!(h.tcp.info(id).expect("c").state, State::FinWait2);
    let s = h.seg(h.snd_nxt, TcpFlags::ACK | TcpFlags::FIN, 0, 0);
    h.send(s);
    assert_eq!(h.tcp.info(id).expect("c").state, State::TimeWait);
    assert_eq!(h.tx().len(), 1);
    h.advance(Duration::from_secs(1));
    assert!(h.tcp.info(id).is_none());
}

/// RFC 2525 §2.17 (Linux `tcp_close`): closing with unread data sends RST.
#[test]
fn close_with_unread_data_resets_rfc2525() {
    let mut h = Fixture::listening(AckPolicy::linux());
    h.handshake(SynOpts::all());
    h.data(100, 100, false);
    let _ = h.tx();
    let id = h.id();
    h.tcp.close(h.now, id).expect("close");
    let r = h.tx();
    assert_eq!(r.len(), 1);
    assert!(r[0].flags.contains(TcpFlags::RST));
    assert!(h.tcp.info(id).is_none());
    assert_eq!(h.acks(AckReason::Rst), 1);
}
