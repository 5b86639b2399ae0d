//! Hostile and malformed packets through the whole pipeline (parse → GRO → TCP): the
//! parse-level kinds are the corpus of `testkit::corpus` (which `tests/parse.rs` checks
//! against `parse` itself), the TCP-level kinds are built here. Each kind is sent on its
//! own while two healthy connections are open: a *target* that the TCP-level cases aim
//! at, and a *victim* that nothing aims at. For every kind:
//! no panic; exactly its expected reason is counted (parse drop, TCP drop, or the RFC 5961
//! challenge-ACK counter), under its own name, and no other drop counter moves; the victim's
//! `ConnInfo` is unchanged, and the victim still receives in-order data afterwards.
//!
//! RFCs: 791 §3.1 and 1122 §3.2.1 (IPv4), 8200 §4 (IPv6 extension headers), 9293 §3.1
//! (TCP header) and §3.10.7 (segment arrival), 7323 §2.3 and §5 (window scale, PAWS),
//! 5961 §3-5 (blind RST/SYN/data injection: challenge ACKs).
#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr};

use stack::buf::RxChecksum;
use stack::gro::GroConfig;
use stack::pipeline::PipelineConfig;
use stack::seq::SeqNumber;
use stack::stats::Stats;
use stack::tcp::{DropReason as T, TcpConfig};
use stack::time::Duration;
use stack::wire::{DropReason as P, TcpFlags};

use testkit::client::Client;
use testkit::corpus;
use testkit::frames::{self, Peer, SW};
use testkit::harness::{Bounds, Sim};

/// What a case must be counted as.
#[derive(Clone, Copy, Debug)]
enum Want {
    /// Dropped by parse for this reason.
    Parse(P),
    /// Parsed, then dropped by TCP for this reason.
    Tcp(T),
    /// Parsed, then dropped by TCP for this reason and answered with a RST.
    TcpRst(T),
    /// Parsed; TCP dropped it for this reason and answered with a challenge ACK.
    TcpChallenge(T),
}

struct Case {
    name: &'static str,
    frame: Vec<u8>,
    cs: RxChecksum,
    want: Want,
}

fn setup() -> (Sim, Client, Client) {
    let cfg = PipelineConfig {
        local: frames::local(),
        gro: Some(GroConfig::default()),
        tcp: TcpConfig {
            max_conns: 16,
            max_half_open: 16,
            ..TcpConfig::default()
        },
        listen: vec![(frames::PORT, Default::default())],
        tx_csum_offload: false,
    };
    let b = Bounds::of(&cfg, 256);
    let mut sim = Sim::with_config(cfg, b);
    let mut victim = Client::connect(&mut sim, Peer::v4(1, 41000), 1_000, true);
    let mut target = Client::connect(&mut sim, Peer::v4(2, 42000), 0xffff_f000, true);
    // Data on both, so TS.Recent is fresh (PAWS) and both are past their first segment.
    sim.advance(Duration::from_millis(5));
    victim.send(&mut sim, 1000);
    target.send(&mut sim, 1000);
    sim.advance(Duration::from_millis(5));
    (sim, victim, target)
}

/// Every kind of malformed or hostile frame, built against `target`'s state.
/// Every kind of malformed or hostile frame: the parse corpus, and TCP-level cases built
/// against `target`'s state.
fn cases(sim: &Sim, target: &Client) -> Vec<Case> {
    let mut c: Vec<Case> = corpus::parse_drops()
        .into_iter()
        .map(|k| Case {
            name: k.name,
            frame: k.frame,
            cs: k.cs,
            want: Want::Parse(k.reason),
        })
        .collect();
    let mut add = |name, frame, cs, want| {
        c.push(Case {
            name,
            frame,
            cs,
            want,
        })
    };
    let stranger = Peer::v4(9, 43000);

    // -- TCP state: no connection --
    add(
        "data on a connection that does not exist (listening port)",
        stranger.seg(5, 6, TcpFlags::ACK).to_vec(b"hello"),
        SW,
        Want::TcpRst(T::BadCookie),
    );
    add(
        "data to a port nobody listens on",
        Peer {
            dport: frames::CLOSED_PORT,
            ..stranger
        }
        .seg(5, 6, TcpFlags::ACK)
        .to_vec(b"hello"),
        SW,
        Want::TcpRst(T::NoListener),
    );
    add(
        "no SYN, no ACK to a listener",
        stranger.seg(5, 6, TcpFlags::PSH).to_vec(b"hello"),
        SW,
        Want::Tcp(T::ListenerDrop),
    );

    // -- TCP state: against the established target --
    let rcv_nxt = target.base + target.sent as usize;
    let at =
        |seq: SeqNumber, fl: TcpFlags, payload: &[u8]| target.frame(sim, seq, fl).to_vec(payload);
    add(
        "data wholly outside the window",
        at(rcv_nxt + 50_000_000, TcpFlags::ACK, b"outside"),
        SW,
        Want::Tcp(T::OutOfWindow),
    );
    add(
        "data wholly before the window (old duplicate far back)",
        at(
            SeqNumber(rcv_nxt.get().wrapping_sub(3_000_000)),
            TcpFlags::ACK,
            b"old",
        ),
        SW,
        Want::Tcp(T::OutOfWindow),
    );
    add(
        "RST outside the window",
        at(rcv_nxt + 50_000_000, TcpFlags::RST, b""),
        SW,
        Want::Tcp(T::RstOutOfWindow),
    );
    add(
        "RST inside the window but not exact (RFC 5961 §3.2)",
        at(rcv_nxt + 100, TcpFlags::RST, b""),
        SW,
        Want::TcpChallenge(T::RstInWindow),
    );
    add(
        "SYN inside the window (RFC 5961 §4.2)",
        {
            let mut f = target.frame(sim, rcv_nxt + 10, TcpFlags::SYN);
            f.ack = SeqNumber(0);
            f.to_vec(b"")
        },
        SW,
        Want::TcpChallenge(T::SynInWindow),
    );
    add(
        "ACK for data never sent (RFC 5961 §5.2)",
        {
            let mut f = target.frame(sim, rcv_nxt, TcpFlags::ACK);
            f.ack = target.our_nxt + 100_000;
            f.to_vec(b"")
        },
        SW,
        Want::TcpChallenge(T::BadAck),
    );
    add(
        "timestamp failing PAWS (RFC 7323 §5)",
        {
            let mut f = target.frame(sim, rcv_nxt, TcpFlags::ACK);
            if let Some(t) = f.opts.timestamp.as_mut() {
                t.tsval = t.tsval.wrapping_sub(100_000);
            }
            f.to_vec(b"stale")
        },
        SW,
        Want::Tcp(T::Paws),
    );
    add(
        "data without ACK on a connection",
        at(rcv_nxt, TcpFlags::PSH, b"noack"),
        SW,
        Want::Tcp(T::NoAck),
    );
    c
}

/// Drop counters by name, all stages.
fn drops(st: &Stats) -> Vec<(String, u64)> {
    st.drops_by_reason().collect()
}

/// The counters whose value changed between `a` and `b`, with the difference.
fn changed(a: &[(String, u64)], b: &[(String, u64)]) -> Vec<(String, u64)> {
    a.iter()
        .zip(b)
        .filter(|(x, y)| x.1 != y.1)
        .map(|(x, y)| (x.0.clone(), y.1 - x.1))
        .collect()
}

#[test]
fn malformed_and_hostile_frames_each_counted_under_their_own_reason() {
    let (mut sim, mut victim, target) = setup();
    let all = cases(&sim, &target);
    assert!(all.len() >= 40, "only {} kinds", all.len());
    let mut names = std::collections::HashSet::new();
    for case in all {
        assert!(names.insert(case.name), "duplicate case name {}", case.name);
        sim.take_sent();
        let before = sim.p.stats();
        let vi = sim.p.tcp().info(victim.id).expect("victim alive");
        let ti = sim.p.tcp().info(target.id).expect("target alive");

        sim.rx(case.frame.clone(), case.cs);
        sim.run_burst();

        let after = sim.p.stats();
        let diff = changed(&drops(&before), &drops(&after));
        let parsed = after.parse.tcp - before.parse.tcp;
        let rsts = after.tcp.resets_sent - before.tcp.resets_sent;
        let challenges = after.tcp.challenge_acks - before.tcp.challenge_acks;
        let want: Vec<(String, u64)> = match case.want {
            Want::Parse(r) => vec![(format!("parse.{}", r.name()), 1)],
            Want::Tcp(r) | Want::TcpRst(r) | Want::TcpChallenge(r) => {
                vec![(format!("tcp.{}", r.name()), 1)]
            }
        };
        assert_eq!(diff, want, "case {:?}: drops counted", case.name);
        let is_tcp = !matches!(case.want, Want::Parse(_));
        assert_eq!(parsed, u64::from(is_tcp), "case {:?}: parsed", case.name);
        assert_eq!(
            rsts,
            u64::from(matches!(case.want, Want::TcpRst(_))),
            "case {:?}: RSTs sent",
            case.name
        );
        let sent = sim.take_sent();
        if matches!(case.want, Want::TcpRst(_)) {
            assert!(
                sent.iter().any(|m| m.flags.contains(TcpFlags::RST)),
                "case {:?}: no RST on the wire",
                case.name
            );
        }
        let challenged = matches!(case.want, Want::TcpChallenge(_));
        assert_eq!(
            challenges,
            u64::from(challenged),
            "case {:?}: challenge ACKs",
            case.name
        );
        if challenged {
            // RFC 5961: the challenge ACK carries the current rcv_nxt.
            let to_target: Vec<_> = sent
                .iter()
                .filter(|m| m.flow.dport == target.peer.port)
                .collect();
            assert!(
                to_target
                    .iter()
                    .any(|m| m.ack == ti.rcv_nxt && !m.flags.contains(TcpFlags::RST)),
                "case {:?}: no challenge ACK on the wire: {to_target:?}",
                case.name
            );
        }
        // The target is still there (nothing here may kill an established connection)...
        let ti2 = sim.p.tcp().info(target.id).expect("target survives");
        assert_eq!(
            ti2.rcv_nxt, ti.rcv_nxt,
            "case {:?}: target moved",
            case.name
        );
        // ...and the victim did not notice anything.
        assert_eq!(
            sim.p.tcp().info(victim.id),
            Some(vi),
            "case {:?}: another connection's state changed",
            case.name
        );
        let want_bytes = victim.bytes(victim.sent, 100);
        victim.send(&mut sim, 100);
        let got = sim.read(victim.id, 0);
        // The victim's bytes so far: the setup's 1000 plus 100 per earlier case.
        assert!(
            got.ends_with(&want_bytes),
            "case {:?}: victim data",
            case.name
        );
        sim.advance(Duration::from_millis(1));
    }
    // Every drop counter still adds up (Sim::check ran after every burst).
    eprintln!("{} kinds", names.len());
}

#[test]
fn ipv4_peer_addresses_are_in_the_test_range() {
    // 198.18.0.0/15 only (docs/architecture.md, "Running DPDK here"): the corpus never
    // names another address.
    for i in 0..64 {
        let IpAddr::V4(a) = Peer::v4(i, 1).ip else {
            unreachable!()
        };
        let n = u32::from(a);
        assert_eq!(n >> 17, u32::from(Ipv4Addr::new(198, 18, 0, 0)) >> 17);
    }
}
