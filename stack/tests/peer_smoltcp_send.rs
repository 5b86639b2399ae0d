//! What smoltcp as weir's peer found in weir's send path, each scripted on the TCP
//! fixture (`testkit::tcp`) and named after the rule it checks.

use stack::ack::AckPolicy;
use stack::tcp::Event;
use stack::time::Duration;

/// RFC 9293 §3.10.7.4's window update, as Linux `tcp_may_update_window` refines it: a
/// segment whose ACK moves SND.UNA updates the window even when its sequence number is
/// below SND.WL1. The common case: the peer lost a segment, sent later ones (SND.WL1
/// moves past the hole), and then retransmits into the hole with its current ACK and
/// window. Taking that window only by SND.WL1 would leave SND.WND as it was, now counted
/// from the new SND.UNA: a right edge the peer never offered (smoltcp seed 43 of
/// `smoltcp_to_weir_echo` saw 1,436 bytes sent into a 308-byte window).
#[test]
fn an_ack_on_a_retransmission_into_a_hole_updates_the_window() {
    use testkit::tcp::{Fixture, SynOpts};
    let mut h = Fixture::listening(AckPolicy::linux());
    h.window = 1024; // scaled by 7: 128 KiB
    h.handshake(SynOpts::all());
    let id = h.id();
    let data = vec![7u8; 4 * 1448];
    assert_eq!(h.tcp.send(h.now, id, &data, &mut h.pool), Ok(data.len()));
    assert_eq!(h.tx().len(), 4);
    let start = h.snd_nxt;
    // The peer's segment at `start` is lost; the next one arrives (SND.WL1 moves to it).
    h.data_at(start + 1000, 1000, 1000);
    let _ = h.tx();
    // The retransmission into the hole acknowledges all of weir's data and offers
    // 1 << 7 = 128 bytes.
    let una = h.tcp.info(id).expect("conn").snd_nxt;
    h.our_nxt = una;
    h.window = 1;
    h.data_at(start, 1000, 1000);
    assert_eq!(
        h.tcp.info(id).expect("conn").snd_wnd,
        128,
        "the window taken"
    );
    let more = vec![8u8; 10_000];
    assert!(h.tcp.send(h.now, id, &more, &mut h.pool).expect("send") > 0);
    for m in h.tx() {
        assert!(
            m.seq + usize::from(m.payload_len) <= una + 128,
            "{m:?} goes beyond the 128-byte window at {una:?}"
        );
    }
}

/// RFC 9293 §3.10.7.4, eighth step: "If the FIN bit is set, signal the user 'connection
/// closing'", in every state that can receive it, FIN-WAIT-1 and FIN-WAIT-2 included. An
/// application that half-closed (`shutdown`) still reads, and must learn where the
/// peer's data ends (Linux: `read` returns 0): `Event::PeerClosed`, as in ESTABLISHED.
/// (smoltcp seed 0 of `weir_sends_to_smoltcp`: weir read smoltcp's reply and never
/// heard its FIN.)
#[test]
fn a_half_closed_connection_hears_the_peers_fin() {
    use stack::seq::SeqNumber;
    use stack::tcp::State;
    use stack::wire::TcpFlags;
    use testkit::tcp::{Fixture, SynOpts};
    for fin_acked_first in [true, false] {
        let mut h = Fixture::listening(AckPolicy::linux());
        h.window = 1024;
        h.handshake(SynOpts::all());
        let id = h.id();
        h.tcp.shutdown(h.now, id).expect("shutdown");
        let out = h.tx();
        assert!(
            out.iter().any(|m| m.flags.contains(TcpFlags::FIN)),
            "our FIN"
        );
        let fin_end: SeqNumber = h.tcp.info(id).expect("conn").snd_nxt;
        if fin_acked_first {
            h.ack_to(fin_end);
            assert_eq!(h.tcp.info(id).expect("conn").state, State::FinWait2);
        }
        // The peer answers with data and its FIN (before our FIN reached it: CLOSING).
        let mut s = h.seg(h.snd_nxt, TcpFlags::ACK | TcpFlags::FIN, 100, 100);
        s.ack = if fin_acked_first {
            fin_end
        } else {
            SeqNumber(fin_end.get().wrapping_sub(1))
        };
        h.snd_nxt += 101;
        h.send(s);
        let ev: Vec<Event> = h.tcp.events().collect();
        assert!(ev.contains(&Event::Readable(id)), "{ev:?}");
        assert!(
            ev.contains(&Event::PeerClosed(id)),
            "FIN in {} (FIN acked first: {fin_acked_first}): {ev:?}",
            if fin_acked_first {
                "FIN-WAIT-2"
            } else {
                "FIN-WAIT-1"
            }
        );
        let want = if fin_acked_first {
            State::TimeWait
        } else {
            State::Closing
        };
        assert_eq!(h.tcp.info(id).expect("conn").state, want);
        assert_eq!(h.read_all().len(), 100);
    }
}

/// RFC 9293 §3.8.6.2.2 (the receiver does not shrink its window; RFC 7323 §2.4 for a
/// scaled one): no frame weir sends advertises a right edge left of one it already
/// advertised. A duplicate ACK queued while the receive buffer was full carries a window
/// of zero; if the application then reads and writes in the same iteration, the data
/// segments carry the reopened window and leave first, and the queued duplicate ACK,
/// built after them with a later SEG.SEQ, is what the peer's window update rule takes
/// as newest (SND.WL1). With its window of zero, the peer would wait for an update
/// that never comes (weir believes it advertised the open window): smoltcp, which has
/// no persist timer, stalled for good on seed 52 of `smoltcp_to_weir_echo`.
#[test]
fn a_queued_duplicate_ack_does_not_shrink_the_window_data_reopened() {
    use stack::tcp::TcpConfig;
    use stack::wire::TcpFlags;
    use testkit::tcp::{cfg, Fixture, SynOpts};
    let mut h = Fixture::with_cfg(
        TcpConfig {
            rcv_buf: 4096,
            ..cfg()
        },
        AckPolicy::linux(),
    );
    h.window = 60_000;
    h.handshake(SynOpts {
        wscale: None,
        ..SynOpts::all()
    });
    let id = h.id();
    let start = h.snd_nxt;
    // The peer fills the window, and a segment of it arrives twice (a duplicate ACK is
    // owed, with the window as it is: zero).
    h.data(4096, 1448, true);
    h.data_at(start, 1448, 1448);
    // The application reads everything and answers.
    assert_eq!(h.read_all().len(), 4096);
    let answer = vec![1u8; 3000];
    assert_eq!(h.tcp.send(h.now, id, &answer, &mut h.pool), Ok(3000));
    let out = h.tx();
    assert!(
        out.iter().any(|m| m.payload_len > 0),
        "the answer left: {out:?}"
    );
    let mut right = None;
    for m in &out {
        assert!(m.flags.contains(TcpFlags::ACK));
        let edge = m.ack + usize::from(m.window);
        if let Some(r) = right {
            assert!(edge >= r, "{m:?} moves the right edge back from {r:?}");
        }
        right = Some(right.map_or(edge, |r: stack::seq::SeqNumber| r.max(edge)));
    }
}

/// RFC 9293 §3.10.7.4 second step, TIME-WAIT: "If the RST bit is set, then enter the
/// CLOSED state". A connection in TIME-WAIT has closed cleanly (both FINs acknowledged,
/// every byte delivered), so the application hears `Event::Closed`, as at the end of 2
/// MSL, not `Event::Reset`, which would tell it data may have been lost; Linux kills
/// the TIME-WAIT socket without a word (`tcp_timewait_state_process`, `tcp_rfc1337` =
/// 0). A duplicate of our last ACK reaching a peer that already closed draws exactly
/// this RST (smoltcp seed 1 of `weir_sends_to_smoltcp`).
#[test]
fn a_rst_in_time_wait_ends_it_as_closed() {
    use stack::tcp::State;
    use stack::wire::TcpFlags;
    use testkit::tcp::{Fixture, SynOpts};
    let mut h = Fixture::listening(AckPolicy::linux());
    h.window = 1024;
    h.handshake(SynOpts::all());
    let id = h.id();
    h.tcp.close(h.now, id).expect("close");
    let _ = h.tx();
    let fin_end = h.tcp.info(id).expect("conn").snd_nxt;
    h.our_nxt = fin_end;
    let s = h.seg(h.snd_nxt, TcpFlags::ACK | TcpFlags::FIN, 0, 0);
    h.snd_nxt += 1;
    h.send(s);
    assert_eq!(h.tcp.info(id).expect("conn").state, State::TimeWait);
    let _ = h.tx();
    let _ = h.tcp.events().count();
    let rst = h.seg(h.snd_nxt, TcpFlags::RST, 0, 0);
    h.send(rst);
    let ev: Vec<Event> = h.tcp.events().collect();
    assert_eq!(ev, vec![Event::Closed(id)]);
    let st = h.tcp.stats();
    assert_eq!((st.conns_closed, st.conns_reset), (1, 0));
    assert_eq!(h.tcp.conn_count(), 0, "TIME-WAIT is over");
    assert!(h.tx().is_empty(), "no answer to the RST");
}

/// RFC 9293 §3.10.4 and §3.8.1: our FIN occupies the sequence number after the last data
/// byte and is retransmitted as that data is, by the retransmission timer: a
/// retransmission of the last data segment carries the FIN again (Linux keeps the FIN on
/// the tail skb, `tcp_send_fin`, and `tcp_retransmit_skb` resends it with its data), and
/// no FIN goes alone past a hole of unacknowledged data, where a receiver that keeps no
/// out-of-order FIN (smoltcp) drops it. Seed 415 of `smoltcp_to_weir_echo`: the FIN went
/// alone six times while its one data byte was lost, and the connection was reset when
/// the FIN's own retries ran out.
#[test]
fn a_fin_is_retransmitted_with_the_data_before_it() {
    use stack::wire::TcpFlags;
    use testkit::tcp::{Fixture, SynOpts};
    let mut h = Fixture::listening(AckPolicy::linux());
    h.window = 1024;
    h.handshake(SynOpts::all());
    let id = h.id();
    assert_eq!(h.tcp.send(h.now, id, &[9u8; 100], &mut h.pool), Ok(100));
    h.tcp.close(h.now, id).expect("close");
    let first = h.tx();
    let [seg] = first[..] else {
        panic!("data and FIN in one segment expected: {first:?}");
    };
    assert!(seg.flags.contains(TcpFlags::FIN) && seg.payload_len == 100);
    // The segment is lost; nothing is acknowledged. Every retransmission of the data
    // carries the FIN, and no FIN leaves alone.
    let mut rtx = 0;
    // Timer expiries (the FIN's own timer wakes too, and defers to the RTO).
    for _ in 0..20 {
        if rtx == 4 {
            break;
        }
        let Some(t) = h.tcp.poll_timeout() else {
            panic!("no timer with data and FIN outstanding");
        };
        h.now = h.now.max(t);
        h.tcp.handle_timeout(h.now);
        for m in h.tx() {
            assert_eq!(
                m.seq, seg.seq,
                "{m:?}: a FIN alone past unacknowledged data"
            );
            assert_eq!(m.payload_len, 100, "{m:?}");
            assert!(
                m.flags.contains(TcpFlags::FIN),
                "{m:?}: the FIN left behind"
            );
            rtx += 1;
        }
    }
    assert_eq!(rtx, 4, "retransmissions");
    assert!(
        h.tcp.info(id).is_some(),
        "the connection lives on its RTO retries"
    );
}

/// TCP_CORK's ceiling (Linux tcp(7): "there is a 200 millisecond ceiling on the time for
/// which output is corked"; the mechanism is `tcp_write_xmit` arming the probe timer
/// when it holds data with nothing in flight, and `tcp_write_wakeup` then sending what
/// the window takes, cork or not): a corked runt with nothing in flight, which no ACK
/// will come to release, leaves after the override timeout, as a runt the window cuts
/// short does (RFC 1122 §4.2.3.4). Seed 17 of `weir_sends_to_smoltcp_heavy`: smoltcp's
/// window update was lost, the 594 bytes it had offered were less than a full segment,
/// the application waited for `Event::Writable` before it would uncork, and nothing
/// ever moved again.
#[test]
fn a_corked_runt_with_nothing_in_flight_is_not_held_forever() {
    use testkit::tcp::{Fixture, SynOpts};
    let mut h = Fixture::listening(AckPolicy::linux());
    h.window = 60_000;
    h.handshake(SynOpts {
        wscale: None,
        ..SynOpts::all()
    });
    let id = h.id();
    h.tcp.set_cork(id, true).expect("cork");
    assert_eq!(h.tcp.send(h.now, id, &[1u8; 1448], &mut h.pool), Ok(1448));
    assert_eq!(h.tx().len(), 1, "a full segment goes, corked or not");
    // The peer acknowledges it and offers 500 bytes: less than a full segment.
    let una = h.tcp.info(id).expect("conn").snd_nxt;
    h.window = 500;
    h.ack_to(una);
    assert_eq!(h.tcp.send(h.now, id, &[2u8; 3000], &mut h.pool), Ok(3000));
    assert!(h.tx().is_empty(), "corked: the runt waits");
    let mut sent = Vec::new();
    for _ in 0..10 {
        let Some(t) = h.tcp.poll_timeout() else {
            break;
        };
        h.now = h.now.max(t);
        h.tcp.handle_timeout(h.now);
        sent = h.tx();
        if !sent.is_empty() {
            break;
        }
    }
    let [m] = sent[..] else {
        panic!("one segment expected once the ceiling passed, got {sent:?}");
    };
    assert_eq!((m.seq, m.payload_len), (una, 500), "what the window takes");
}

/// Every resource bounded: a connection the application closed, whose FIN the peer
/// acknowledged, waits in FIN-WAIT-2 for the peer's FIN at most `TcpConfig::time_wait`,
/// then is gone (Linux `tcp_fin_timeout`, 60 s as TIME-WAIT, for an orphaned FIN-WAIT-2:
/// `tcp_close` arms it). A peer that never closes, or whose FIN is never retransmitted
/// (smoltcp's LAST-ACK idles its timer on an ACK that is not for its FIN), would
/// otherwise hold the entry for good. A half-closed connection (`shutdown`, not
/// `close`) still waits: its application reads on and decides.
#[test]
fn an_orphaned_fin_wait_2_is_bounded() {
    use stack::tcp::State;
    use testkit::tcp::{Fixture, SynOpts};
    for close_first in [true, false] {
        let mut h = Fixture::listening(AckPolicy::linux());
        h.window = 1024;
        h.handshake(SynOpts::all());
        let id = h.id();
        if close_first {
            h.tcp.close(h.now, id).expect("close");
        } else {
            h.tcp.shutdown(h.now, id).expect("shutdown");
        }
        let _ = h.tx();
        let fin_end = h.tcp.info(id).expect("conn").snd_nxt;
        h.ack_to(fin_end);
        assert_eq!(h.tcp.info(id).expect("conn").state, State::FinWait2);
        if !close_first {
            // Half-closed: it waits as long as its application wants. Then it closes.
            h.advance(Duration::from_secs(120));
            assert!(h.tcp.info(id).is_some(), "a half-closed connection waits");
            h.tcp.close(h.now, id).expect("close");
        }
        let _ = h.tcp.events().count();
        let limit = h.now + Duration::from_secs(60);
        let mut ev = Vec::new();
        while ev.is_empty() {
            // Earlier timers (the delayed ACK's, the FIN's) may wake first.
            let t = h.tcp.poll_timeout().expect("a timer bounds FIN-WAIT-2");
            assert!(
                t <= limit,
                "FIN-WAIT-2 outlasts time_wait (close first: {close_first})"
            );
            h.now = h.now.max(t);
            h.tcp.handle_timeout(h.now);
            ev = h.tcp.events().collect();
        }
        assert_eq!(ev, vec![Event::Closed(id)], "close first: {close_first}");
        assert_eq!(h.tcp.conn_count(), 0);
        assert!(h.tx().is_empty(), "gone without a word");
    }
}
