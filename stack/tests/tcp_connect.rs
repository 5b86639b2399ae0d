//! Active open: SYN-SENT with each of its answers (RFC 9293 §3.10.7.3), simultaneous open,
//! SYN retransmission and giving up (RFC 6298 §5), the options negotiated (RFC 7323, RFC
//! 2018), ephemeral ports (RFC 6056) and TIME-WAIT for the active opener, and two weir
//! stacks talking to each other. Each test names what it checks.

use std::net::{IpAddr, SocketAddr};

use stack::ack::{AckPolicy, AckReason};
use stack::buf::RxChecksum;
use stack::rss::Rss;
use stack::seq::SeqNumber;
use stack::tcp::{ConnId, ConnectOpts, DropReason, Event, State, TcpConfig, TcpError};
use stack::time::Duration;
use stack::wire::parse::{parse, LocalAddrs, Parsed};
use stack::wire::TcpFlags;
use testkit::frames::{OUR_IP6, PEER_IP6};
use testkit::tcp::*;

fn client() -> Fixture {
    // A TCP with no listener of interest: the fixture's peer is the server.
    Fixture::listening(AckPolicy::linux())
}

fn remote() -> SocketAddr {
    SocketAddr::new(PEER_IP4.into(), PEER_PORT)
}

fn opts() -> ConnectOpts {
    ConnectOpts::new(OUR_MAC, PEER_MAC)
}

fn state(h: &Fixture, id: ConnId) -> Option<State> {
    h.tcp.info(id).map(|i| i.state)
}

/// RFC 9293 §3.10.7.3 (SYN-SENT, an acceptable SYN-ACK) with RFC 7323 §2.2/§3.2 and RFC
/// 2018 §2: the SYN offers MSS, window scale, SACK-permitted and timestamps; the SYN-ACK's
/// acceptance completes the handshake with an ACK, and every option is in use.
#[test]
fn syn_sent_acceptable_synack_establishes_rfc9293_3_10_7_3() {
    let mut h = client();
    let (syn, ack) = h.active_handshake(SynOpts::all());
    assert_eq!(syn.flags, TcpFlags::SYN);
    assert_eq!(syn.opts.mss, Some(1460));
    assert_eq!(syn.opts.wscale, Some(3));
    assert!(syn.opts.sack_permitted);
    assert_eq!(syn.opts.timestamp.map(|t| t.tsecr), Some(0));
    assert_eq!(syn.window, 65535, "a SYN's window is never scaled");
    assert!((32768..=60999).contains(&syn.flow.sport), "ephemeral");
    assert_eq!(ack.flags, TcpFlags::ACK);
    assert_eq!((ack.seq, ack.ack), (syn.seq + 1, h.snd_nxt));
    assert_eq!(ack.opts.timestamp.map(|t| t.tsecr), Some(h.tsval));
    let info = h.tcp.info(h.id()).expect("conn");
    assert_eq!(info.state, State::Established);
    assert!(info.sack && info.timestamps);
    assert_eq!((info.rcv_wscale, info.snd_wscale), (3, 7));
    assert_eq!(info.snd_mss, 1448);
    assert_eq!(h.acks(AckReason::Handshake), 2, "SYN and ACK");
    assert_eq!(h.tcp.stats().active_opens, 1);
}

/// RFC 7323 §1.3/§2.2/§3.2, RFC 2018 §2: an option the SYN-ACK does not answer is off;
/// without an MSS option the peer's MSS is 536 (RFC 9293 §3.7.1).
#[test]
fn synack_without_options_negotiates_none_rfc7323_2_2() {
    let mut h = client();
    let (_, ack) = h.active_handshake(SynOpts::none());
    assert_eq!(ack.header_len, 20, "no timestamps on the ACK");
    let info = h.tcp.info(h.id()).expect("conn");
    assert!(!info.sack && !info.timestamps);
    assert_eq!((info.rcv_wscale, info.snd_wscale), (0, 0));
    assert_eq!(info.snd_mss, 536);
}

/// RFC 9293 §3.10.7.3 first step: an ACK that does not acknowledge our SYN gets
/// <SEQ=SEG.ACK><CTL=RST> and is dropped; the open goes on.
#[test]
fn syn_sent_unacceptable_ack_gets_rst_rfc9293_3_10_7_3() {
    let mut h = client();
    let (id, syn) = h.connect();
    let mut sa = h.synack(SynOpts::all());
    sa.ack = syn.seq + 7;
    h.send(sa);
    let out = h.tx();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].flags, out[0].seq), (TcpFlags::RST, syn.seq + 7));
    assert_eq!(state(&h, id), Some(State::SynSent));
    assert_eq!(h.tcp.stats().drops(DropReason::BadHandshakeAck), 1);
    // The real SYN-ACK still completes it.
    h.snd_nxt = SeqNumber(h.snd_nxt.get().wrapping_sub(1));
    let sa = h.synack(SynOpts::all());
    h.send(sa);
    assert_eq!(state(&h, id), Some(State::Established));
}

/// RFC 9293 §3.10.7.3 second step: a RST whose ACK acknowledges our SYN refuses the open
/// (the application hears `Event::Reset`); a RST without an ACK, or with a bad one, is
/// dropped.
#[test]
fn syn_sent_rst_refuses_only_with_acceptable_ack_rfc9293_3_10_7_3() {
    let mut h = client();
    let (id, syn) = h.connect();
    let mut r = h.seg(h.snd_nxt, TcpFlags::RST, 0, 0);
    r.ack = SeqNumber(0);
    h.send(r);
    let mut r = h.seg(h.snd_nxt, TcpFlags::RST | TcpFlags::ACK, 0, 0);
    r.ack = syn.seq + 5;
    h.send(r);
    assert_eq!(state(&h, id), Some(State::SynSent));
    assert_eq!(h.tcp.stats().drops(DropReason::SynSentDrop), 2);
    assert!(h.tx().is_empty(), "no answer to a RST");
    let r = h.seg(h.snd_nxt, TcpFlags::RST | TcpFlags::ACK, 0, 0);
    h.send(r);
    assert_eq!(state(&h, id), None);
    assert!(h.tcp.events().any(|e| e == Event::Reset(id)));
    assert_eq!(h.tcp.stats().active_open_failures, 1);
    assert_eq!(h.tcp.conn_count(), 0);
}

/// RFC 9293 §3.10.7.3 fifth step: a segment with neither SYN nor RST is dropped.
#[test]
fn syn_sent_drops_segment_without_syn_or_rst_rfc9293_3_10_7_3() {
    let mut h = client();
    let (id, _) = h.connect();
    let a = h.seg(h.snd_nxt, TcpFlags::ACK, 100, 100);
    h.send(a);
    assert_eq!(state(&h, id), Some(State::SynSent));
    assert!(h.tx().is_empty());
    assert_eq!(h.tcp.stats().drops(DropReason::SynSentDrop), 1);
}

/// RFC 9293 §3.5 (Figure 8) and §3.10.7.3: a SYN without an ACK in SYN-SENT is a
/// simultaneous open: SYN-RECEIVED, our SYN-ACK; the peer's ACK of our SYN completes it.
#[test]
fn simultaneous_open_rfc9293_3_5() {
    let mut h = client();
    let (id, syn) = h.connect();
    let peer_syn = h.syn(SynOpts::all());
    h.send(peer_syn);
    assert_eq!(state(&h, id), Some(State::SynReceived));
    let out = h.tx();
    assert_eq!(out.len(), 1);
    let sa = out[0];
    assert_eq!(sa.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!((sa.seq, sa.ack), (syn.seq, h.snd_nxt + 1));
    assert_eq!(sa.opts.wscale, Some(3));
    assert_eq!(
        h.tcp.send(h.now, id, b"x", &mut h.pool),
        Err(TcpError::NotEstablished)
    );
    // The peer's SYN-ACK (its answer to our SYN) acknowledges it.
    h.snd_nxt += 1;
    h.ts = true;
    let a = h.seg(h.snd_nxt, TcpFlags::ACK, 0, 0);
    h.send(a);
    assert_eq!(state(&h, id), Some(State::Established));
    assert!(h.tcp.events().any(|e| e == Event::Opened(id)));
    assert_eq!(h.tcp.send(h.now, id, b"hello", &mut h.pool), Ok(5));
    let out = h.tx_payload();
    assert_eq!(out[0].1, b"hello");
}

/// RFC 6298 §2.1 and §5.5 (Linux `tcp_syn_retries`): the SYN is retransmitted after 1 s,
/// then 2 s, 4 s ...; after `syn_retries` retransmissions the open fails with
/// `Event::Reset`.
#[test]
fn syn_retransmitted_with_backoff_then_given_up_rfc6298_5_5() {
    let c = TcpConfig {
        syn_retries: 2,
        ..cfg()
    };
    let mut h = Fixture::with_cfg(c, AckPolicy::linux());
    let (id, syn) = h.connect();
    h.advance(Duration::from_millis(999));
    assert!(h.tx().is_empty());
    h.advance(Duration::from_millis(1));
    let r = h.tx();
    assert_eq!(r.len(), 1, "first retransmission at 1 s");
    assert_eq!((r[0].flags, r[0].seq), (TcpFlags::SYN, syn.seq));
    h.advance(Duration::from_millis(1999));
    assert!(h.tx().is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(h.tx().len(), 1, "second at 2 s more");
    h.advance(Duration::from_millis(4000));
    assert!(h.tx().is_empty(), "given up: no third");
    assert_eq!(state(&h, id), None);
    assert!(h.tcp.events().any(|e| e == Event::Reset(id)));
    assert_eq!(h.tcp.stats().drops(DropReason::SynRetriesExhausted), 1);
    assert_eq!(h.tcp.conn_count(), 0);
}

/// Karn's rule (RFC 6298 §3) for the handshake: a SYN-ACK after a retransmitted SYN still
/// completes the open.
#[test]
fn synack_after_retransmitted_syn_establishes() {
    let mut h = client();
    let (id, _) = h.connect();
    h.advance(Duration::from_secs(1));
    assert_eq!(h.tx().len(), 1);
    let sa = h.synack(SynOpts::all());
    h.send(sa);
    assert_eq!(state(&h, id), Some(State::Established));
}

/// RFC 6056 §3.3.3: ephemeral ports come from the configured range; when every port of it
/// is taken for this peer, `connect` says so; another peer port is another 4-tuple.
#[test]
fn ephemeral_port_range_exhaustion_rfc6056() {
    let c = TcpConfig {
        ephemeral_ports: 40_000..=40_001,
        ..cfg()
    };
    let mut h = Fixture::with_cfg(c, AckPolicy::linux());
    let local: IpAddr = OUR_IP4.into();
    let a = h.tcp.connect(h.now, local, remote(), opts()).expect("a");
    let b = h.tcp.connect(h.now, local, remote(), opts()).expect("b");
    let pa = h.tcp.flow(a).expect("a").dport;
    let pb = h.tcp.flow(b).expect("b").dport;
    assert_ne!(pa, pb);
    assert!([pa, pb].iter().all(|p| (40_000..=40_001).contains(p)));
    assert_eq!(
        h.tcp.connect(h.now, local, remote(), opts()),
        Err(TcpError::NoEphemeralPort)
    );
    let other = SocketAddr::new(PEER_IP4.into(), PEER_PORT + 1);
    assert!(h.tcp.connect(h.now, local, other, opts()).is_ok());
    // An explicit port that a listener holds, or a mixed family, is refused.
    let mut o = opts();
    o.local_port = Some(PORT);
    assert_eq!(
        h.tcp.connect(h.now, local, remote(), o),
        Err(TcpError::PortInUse)
    );
    let v6 = SocketAddr::new(PEER_IP6.into(), PEER_PORT);
    assert_eq!(
        h.tcp.connect(h.now, local, v6, opts()),
        Err(TcpError::InvalidAddress)
    );
}

/// RFC 9293 §3.6 for the active opener: close, FIN-WAIT-1/2, TIME-WAIT for 2 MSL, and the
/// 4-tuple is not reused while it lasts (RFC 6056 §3.3: never a 4-tuple in TIME-WAIT).
#[test]
fn active_opener_time_wait_blocks_the_4_tuple_rfc9293_3_6() {
    let c = TcpConfig {
        ephemeral_ports: 50_000..=50_000,
        time_wait: Duration::from_secs(2),
        ..cfg()
    };
    let mut h = Fixture::with_cfg(c, AckPolicy::linux());
    h.active_handshake(SynOpts::all());
    let id = h.id();
    h.tcp.close(h.now, id).expect("close");
    let f = h.tx();
    assert_eq!(f[0].flags, TcpFlags::FIN | TcpFlags::ACK);
    h.our_nxt = f[0].seq + 1;
    let fin = h.seg(h.snd_nxt, TcpFlags::ACK | TcpFlags::FIN, 0, 0);
    h.send(fin);
    assert_eq!(state(&h, id), Some(State::TimeWait));
    assert_eq!(h.tx().len(), 1, "the peer's FIN is acknowledged");
    let local: IpAddr = OUR_IP4.into();
    assert_eq!(
        h.tcp.connect(h.now, local, remote(), opts()),
        Err(TcpError::NoEphemeralPort)
    );
    h.advance(Duration::from_secs(2));
    assert_eq!(state(&h, id), None);
    assert!(h.tcp.connect(h.now, local, remote(), opts()).is_ok());
}

/// RFC 9293 §3.10.4: closing in SYN-SENT forgets the connection, with no segment sent.
#[test]
fn close_in_syn_sent_forgets_it_rfc9293_3_10_4() {
    let mut h = client();
    let (id, _) = h.connect();
    h.tcp.close(h.now, id).expect("close");
    assert!(h.tx().is_empty());
    assert_eq!(state(&h, id), None);
    assert!(h.tcp.events().any(|e| e == Event::Closed(id)));
    h.advance(Duration::from_secs(5));
    assert!(h.tx().is_empty(), "no SYN retransmission after close");
}

/// Two weir stacks in process: `a` connects to `b`'s listener (IPv4 and IPv6), both send
/// at once, and every byte arrives exactly, in order, both ways; then both close.
#[test]
fn weir_to_weir_transfer_both_ways_every_byte_exact() {
    for v6 in [false, true] {
        let mut p = Pair::new(cfg(), cfg());
        p.b.listen(PORT, AckPolicy::linux()).expect("listen");
        let (local, peer): (IpAddr, IpAddr) = if v6 {
            (OUR_IP6.into(), PEER_IP6.into())
        } else {
            (OUR_IP4.into(), PEER_IP4.into())
        };
        let a =
            p.a.connect(p.now, local, SocketAddr::new(peer, PORT), opts())
                .expect("connect");
        let mut b = None;
        let mut opened_a = false;
        for _ in 0..10 {
            p.step(Duration::from_micros(50));
            opened_a |= p.a.events().any(|e| e == Event::Opened(a));
            if let Some(id) = p.b.events().find_map(|e| match e {
                Event::Opened(id) => Some(id),
                _ => None,
            }) {
                b = Some(id);
            }
        }
        let b = b.expect("b opened");
        assert!(opened_a, "a opened");
        let up: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let down: Vec<u8> = (0..200_000u32).map(|i| (i * 13 % 241) as u8).collect();
        let (mut sent_up, mut sent_down) = (0, 0);
        let (mut got_up, mut got_down) = (Vec::new(), Vec::new());
        for _ in 0..10_000 {
            if sent_up < up.len() {
                sent_up +=
                    p.a.send(p.now, a, &up[sent_up..], &mut p.pool_a)
                        .expect("a");
                if sent_up == up.len() {
                    p.a.shutdown(p.now, a).expect("shutdown");
                }
            }
            if sent_down < down.len() {
                sent_down +=
                    p.b.send(p.now, b, &down[sent_down..], &mut p.pool_b)
                        .expect("b");
            }
            let _ = p.a.recv(a, |s| {
                s.iter().for_each(|x| got_down.extend_from_slice(x.bytes()));
                s.iter().map(|x| usize::from(x.len)).sum()
            });
            let _ = p.b.recv(b, |s| {
                s.iter().for_each(|x| got_up.extend_from_slice(x.bytes()));
                s.iter().map(|x| usize::from(x.len)).sum()
            });
            let _ = p.a.events().count();
            let _ = p.b.events().count();
            p.step(Duration::from_micros(50));
            if got_up.len() == up.len() && got_down.len() == down.len() {
                break;
            }
        }
        assert!(got_up == up, "a -> b exact (v6 {v6})");
        assert!(got_down == down, "b -> a exact (v6 {v6})");
        assert_eq!(p.b.info(b).expect("b").state, State::CloseWait);
        p.b.close(p.now, b).expect("close");
        for _ in 0..10 {
            p.step(Duration::from_micros(50));
        }
        assert_eq!(p.a.info(a).expect("a").state, State::TimeWait);
        assert!(p.b.info(b).is_none(), "b closed");
        assert_eq!(p.a.stats().bytes_sent, up.len() as u64);
        assert_eq!(p.b.stats().bytes_sent, down.len() as u64);
    }
}

/// The configuration of the RSS tests: four receive queues behind the default key and a
/// 128-entry round-robin table, and `ports` as the ephemeral range.
fn rss_cfg(ports: std::ops::RangeInclusive<u16>) -> TcpConfig {
    TcpConfig {
        ephemeral_ports: ports,
        max_conns: 256,
        rss: Some(Rss::with_queues(4).expect("rss")),
        ..cfg()
    }
}

/// The queue the peer's answers to `local_port` arrive on, from the Toeplitz hash computed
/// over the whole reply 4-tuple (not the per-port shortcut `connect` uses).
fn reply_queue(rss: &Rss, local: IpAddr, remote: SocketAddr, local_port: u16) -> u16 {
    let h = match (local, remote.ip()) {
        (IpAddr::V4(l), IpAddr::V4(r)) => {
            rss.toeplitz()
                .hash_v4(r.octets(), l.octets(), remote.port(), local_port)
        }
        (IpAddr::V6(l), IpAddr::V6(r)) => {
            rss.toeplitz()
                .hash_v6(r.octets(), l.octets(), remote.port(), local_port)
        }
        _ => panic!("mixed families"),
    };
    rss.reta().queue(h)
}

/// The RSS connect tests' loop over the address families: for IPv4, then IPv6, a fresh
/// fixture with `c` in which `open(h, local, remote)` opens connections from our address
/// to the peer's and returns how many SYNs they send and what the test keeps of them.
/// Returns, per family, our address, what `open` kept, and the SYN frames (exactly that
/// many, all in one `poll_tx`).
fn per_family<T>(
    c: &TcpConfig,
    mut open: impl FnMut(&mut Fixture, IpAddr, SocketAddr) -> (usize, T),
) -> Vec<(IpAddr, T, Vec<Vec<u8>>)> {
    let families = [
        (IpAddr::from(OUR_IP4), remote()),
        (
            IpAddr::from(OUR_IP6),
            SocketAddr::new(PEER_IP6.into(), PEER_PORT),
        ),
    ];
    families
        .into_iter()
        .map(|(local, remote)| {
            let mut h = Fixture::with_cfg(c.clone(), AckPolicy::linux());
            let (n, kept) = open(&mut h, local, remote);
            let mut out = stack::driver::Burst::new();
            assert_eq!(
                h.tcp.poll_tx(h.now, &mut h.pool, &mut out, false),
                n,
                "{local}"
            );
            let syns = out.into_iter().map(|b| b.into_vec()).collect();
            (local, kept, syns)
        })
        .collect()
}

/// F-Stack's rule (`in_pcb_lport_dest` with `ff_rss_check`; mTCP's per-core port pools):
/// with `ConnectOpts::rx_queue`, the ephemeral port is one whose reply 4-tuple the port's
/// Toeplitz hash and RETA send to that queue, for IPv4 and IPv6; every port is distinct
/// and in the range, and the SYN leaves from it.
#[test]
fn rss_ephemeral_port_lands_on_the_asked_queue_v4_and_v6() {
    let c = rss_cfg(32768..=60999);
    let rss = c.rss.clone().expect("rss");
    let runs = per_family(&c, |h, local, remote| {
        let mut ports = std::collections::HashSet::new();
        let mut other_queues = 0;
        for q in 0..4u16 {
            for _ in 0..16 {
                let mut o = opts();
                o.rx_queue = Some(q);
                let id = h.tcp.connect(h.now, local, remote, o).expect("connect");
                let port = h.tcp.flow(id).expect("flow").dport;
                assert!((32768..=60999).contains(&port));
                assert_eq!(reply_queue(&rss, local, remote, port), q, "{local} {port}");
                assert!(ports.insert(port), "port {port} handed out twice");
            }
            // Without the request the ports fall on every queue.
            let id = h.tcp.connect(h.now, local, remote, opts()).expect("any");
            let port = h.tcp.flow(id).expect("flow").dport;
            other_queues |= 1u8 << reply_queue(&rss, local, remote, port);
        }
        (4 * 17, (ports, other_queues))
    });
    let peer = LocalAddrs::new(PEER_MAC, Some(PEER_IP4), Some(PEER_IP6));
    for (_, (ports, other_queues), syns) in runs {
        let sent: std::collections::HashSet<u16> = syns
            .iter()
            .map(|f| match parse(f, RxChecksum::default(), &peer) {
                Parsed::Tcp(m) if m.flags == TcpFlags::SYN => m.flow.sport,
                other => panic!("a SYN expected: {other:?}"),
            })
            .collect();
        assert!(
            ports.is_subset(&sent),
            "each SYN leaves from its chosen port"
        );
        assert_ne!(other_queues, 0);
    }
}

/// RFC 6056 §3.3.3 with the RSS rule: the range holds only the ports that land on the
/// queue; once they are all in use with this peer, `connect` says `NoEphemeralPort`,
/// while a connection that asks for no queue still finds one of the others.
#[test]
fn rss_ephemeral_range_exhausted_gives_no_ephemeral_port() {
    let c = rss_cfg(40_000..=40_063);
    let rss = c.rss.clone().expect("rss");
    let local: IpAddr = OUR_IP4.into();
    let mut h = Fixture::with_cfg(c, AckPolicy::linux());
    let key = stack::flow::FlowKey::v4(PEER_IP4, PEER_PORT, OUR_IP4, 0);
    let fits = rss.ports_for_queue(&key, 40_000..=40_063, 2).count();
    assert!(
        (1..64).contains(&fits),
        "{fits} of 64 ports land on queue 2"
    );
    let mut o = opts();
    o.rx_queue = Some(2);
    for _ in 0..fits {
        let id = h.tcp.connect(h.now, local, remote(), o).expect("connect");
        let port = h.tcp.flow(id).expect("flow").dport;
        assert_eq!(reply_queue(&rss, local, remote(), port), 2);
    }
    assert_eq!(
        h.tcp.connect(h.now, local, remote(), o),
        Err(TcpError::NoEphemeralPort)
    );
    let id = h
        .tcp
        .connect(h.now, local, remote(), opts())
        .expect("any queue");
    let port = h.tcp.flow(id).expect("flow").dport;
    assert_ne!(reply_queue(&rss, local, remote(), port), 2);
}

/// A queue request `connect` cannot meet is refused, not ignored: no `TcpConfig::rss`, a
/// queue the table lacks, or an explicit local port whose answers go elsewhere; an
/// explicit port that does land on the queue is taken.
#[test]
fn rss_queue_request_that_cannot_be_met_is_refused() {
    let local: IpAddr = OUR_IP4.into();
    let mut o = opts();
    o.rx_queue = Some(0);
    let mut plain = client();
    assert_eq!(
        plain.tcp.connect(plain.now, local, remote(), o),
        Err(TcpError::RxQueue)
    );
    let c = rss_cfg(32768..=60999);
    let rss = c.rss.clone().expect("rss");
    let mut h = Fixture::with_cfg(c, AckPolicy::linux());
    o.rx_queue = Some(4);
    assert_eq!(
        h.tcp.connect(h.now, local, remote(), o),
        Err(TcpError::RxQueue)
    );
    let key = stack::flow::FlowKey::v4(PEER_IP4, PEER_PORT, OUR_IP4, 0);
    let on1 = rss
        .local_port_for_queue(&key, 50_000..=60_000, 1)
        .expect("a port");
    let on3 = rss
        .local_port_for_queue(&key, 50_000..=60_000, 3)
        .expect("a port");
    o.rx_queue = Some(1);
    o.local_port = Some(on3);
    assert_eq!(
        h.tcp.connect(h.now, local, remote(), o),
        Err(TcpError::RxQueue)
    );
    o.local_port = Some(on1);
    let id = h
        .tcp
        .connect(h.now, local, remote(), o)
        .expect("port on queue 1");
    assert_eq!(h.tcp.flow(id).expect("flow").dport, on1);
    assert_eq!(h.tcp.stats().active_opens, 1);
}

/// The peer's answer to `syn` as it arrives on the wire: the addresses and ports swapped
/// (the Toeplitz hash reads nothing else of a TCP frame).
fn reply_frame(syn: &[u8]) -> Vec<u8> {
    let mut r = syn.to_vec();
    let (ip, alen) = match u16::from_be_bytes([syn[12], syn[13]]) {
        0x0800 => (14 + 12, 4),
        _ => (14 + 8, 16),
    };
    r[0..6].copy_from_slice(&syn[6..12]);
    r[6..12].copy_from_slice(&syn[0..6]);
    r[ip..ip + alen].copy_from_slice(&syn[ip + alen..ip + 2 * alen]);
    r[ip + alen..ip + 2 * alen].copy_from_slice(&syn[ip..ip + alen]);
    let tcp = ip + 2 * alen;
    r[tcp..tcp + 2].copy_from_slice(&syn[tcp + 2..tcp + 4]);
    r[tcp + 2..tcp + 4].copy_from_slice(&syn[tcp..tcp + 2]);
    r
}

/// With 2 receive queues, as weir runs on two cores: an active open asking for queue q
/// gets answers that the NIC's RSS (`Rss::queue_of_frame` over the answer frame, as the
/// ring pair's software RSS delivers them) puts on queue q, for IPv4 and IPv6.
#[test]
fn rss_answers_to_an_active_open_arrive_on_its_queue_with_2_queues() {
    let c = TcpConfig {
        rss: Some(Rss::with_queues(2).expect("rss")),
        ..rss_cfg(32768..=60999)
    };
    let rss = c.rss.clone().expect("rss");
    let runs = per_family(&c, |h, local, remote| {
        let mut asked = Vec::new();
        for k in 0..32u16 {
            let mut o = opts();
            o.rx_queue = Some(k % 2);
            h.tcp.connect(h.now, local, remote, o).expect("connect");
            asked.push(k % 2);
        }
        (asked.len(), asked)
    });
    for (local, asked, syns) in runs {
        let landed: Vec<u16> = syns
            .iter()
            .map(|f| rss.queue_of_frame(&reply_frame(f)))
            .collect();
        assert_eq!(landed, asked, "{local}: each answer on the opening queue");
    }
}
