//! Hostile and malformed packets through the whole pipeline (parse → GRO → TCP), issue 7
//! item 2. Each kind is sent on its own while two healthy connections are open: a *target*
//! that the TCP-level cases aim at, and a *victim* that nothing aims at. For every kind:
//! no panic; exactly its expected reason is counted (parse drop, TCP drop, or the RFC 5961
//! challenge-ACK counter), under its own name, and no other drop counter moves; the victim's
//! `ConnInfo` is unchanged, and the victim still receives in-order data afterwards.
//!
//! RFCs: 791 §3.1 and 1122 §3.2.1 (IPv4), 8200 §4 (IPv6 extension headers), 9293 §3.1
//! (TCP header) and §3.10.7 (segment arrival), 7323 §2.3 and §5 (window scale, PAWS),
//! 5961 §3-5 (blind RST/SYN/data injection: challenge ACKs).
#![allow(clippy::unwrap_used)]

mod support;

use std::net::{IpAddr, Ipv4Addr};

use stack::buf::{ChecksumStatus, RxChecksum};
use stack::gro::GroConfig;
use stack::pipeline::PipelineConfig;
use stack::seq::SeqNumber;
use stack::stats::Stats;
use stack::tcp::{DropReason as T, TcpConfig};
use stack::time::Duration;
use stack::wire::ipv4::protocol;
use stack::wire::ipv6::ext;
use stack::wire::{DropReason as P, TcpFlags, TcpOptions, Timestamp};

use support::client::Client;
use support::frames::{self, fix4, fix_ip4, ip4_frame, ip6_with_ext, Peer, IP};
use support::harness::{Bounds, Sim};

const SW: RxChecksum = RxChecksum {
    ip: ChecksumStatus::Unknown,
    l4: ChecksumStatus::Unknown,
};
const NIC_GOOD: RxChecksum = RxChecksum {
    ip: ChecksumStatus::Good,
    l4: ChecksumStatus::Good,
};

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
fn cases(sim: &Sim, target: &Client) -> Vec<Case> {
    let mut c = Vec::new();
    let mut add = |name, frame, cs, want| {
        c.push(Case {
            name,
            frame,
            cs,
            want,
        })
    };
    let stranger = Peer::v4(9, 43000);
    let v4 = stranger.seg(5, 6, TcpFlags::ACK).to_vec(b"data");
    let stranger6 = Peer::v6(9, 43000);
    let v6 = stranger6.seg(5, 6, TcpFlags::ACK).to_vec(b"data");
    let vlan = Peer {
        vlan: Some(7),
        ..stranger
    }
    .seg(5, 6, TcpFlags::ACK)
    .to_vec(b"data");
    let with = |f: &[u8], edit: &dyn Fn(&mut Vec<u8>)| {
        let mut f = f.to_vec();
        edit(&mut f);
        f
    };
    let tcp4 = 34; // TCP header offset in an untagged IPv4 frame
    let tcp6 = 54;

    // -- truncated at every header boundary --
    add("empty frame", vec![], SW, Want::Parse(P::TruncatedEthernet));
    add(
        "Ethernet header cut at 13",
        v4[..13].to_vec(),
        SW,
        Want::Parse(P::TruncatedEthernet),
    );
    add(
        "VLAN tag cut",
        vlan[..16].to_vec(),
        SW,
        Want::Parse(P::TruncatedVlan),
    );
    add(
        "IPv4 header cut at 19",
        v4[..IP + 19].to_vec(),
        SW,
        Want::Parse(P::TruncatedIpv4),
    );
    add(
        "IPv6 header cut at 39",
        v6[..IP + 39].to_vec(),
        SW,
        Want::Parse(P::TruncatedIpv6),
    );
    add(
        "TCP header cut at 19 (IPv4, lengths consistent)",
        ip4_frame(frames::peer_ip4(9), protocol::TCP, &v4[tcp4..tcp4 + 19]),
        SW,
        Want::Parse(P::TruncatedTcp),
    );
    add(
        "TCP header cut at 19 (IPv6, lengths consistent)",
        frames::ip6_frame(frames::peer_ip6(9), protocol::TCP, &v6[tcp6..tcp6 + 19]),
        SW,
        Want::Parse(P::TruncatedTcp),
    );
    add(
        "ARP cut at 27",
        frames::arp_request(9, frames::OUR_IP4)[..14 + 27].to_vec(),
        SW,
        Want::Parse(P::TruncatedArp),
    );
    add(
        "ICMP cut at 7",
        ip4_frame(frames::peer_ip4(9), protocol::ICMP, &[8, 0, 0, 0, 0, 0, 0]),
        SW,
        Want::Parse(P::TruncatedIcmp),
    );
    add(
        "IPv6 extension header cut short",
        frames::ip6_frame(frames::peer_ip6(9), ext::DEST_OPTS, &[6, 0, 1, 1]),
        SW,
        Want::Parse(P::TruncatedIpv6ExtHeader),
    );
    add(
        "frame cut inside the TCP header (IPv4 length not)",
        v4[..tcp4 + 10].to_vec(),
        NIC_GOOD,
        Want::Parse(P::Ipv4TotalLenPastFrame),
    );
    // -- IPv4 header --
    add(
        "IPv4 version 6",
        with(&v4, &|f| f[IP] = 0x65),
        NIC_GOOD,
        Want::Parse(P::Ipv4BadVersion),
    );
    add(
        "IHL 4",
        with(&v4, &|f| f[IP] = 0x44),
        NIC_GOOD,
        Want::Parse(P::Ipv4IhlTooSmall),
    );
    add(
        "IHL 0",
        with(&v4, &|f| f[IP] = 0x40),
        NIC_GOOD,
        Want::Parse(P::Ipv4IhlTooSmall),
    );
    add(
        "IHL 15 past a 24-byte packet",
        with(&v4, &|f| {
            f[IP] = 0x4f;
            f.truncate(IP + 24);
        }),
        NIC_GOOD,
        Want::Parse(P::Ipv4IhlPastPacket),
    );
    add(
        "total length larger than the frame",
        with(&v4, &|f| {
            f[IP + 3] += 100;
            fix_ip4(f)
        }),
        SW,
        Want::Parse(P::Ipv4TotalLenPastFrame),
    );
    add(
        "total length smaller than the header",
        with(&v4, &|f| {
            f[IP + 2..IP + 4].copy_from_slice(&[0, 19]);
            fix_ip4(f)
        }),
        SW,
        Want::Parse(P::Ipv4TotalLenTooSmall),
    );
    add(
        "total length smaller than the frame, cutting the TCP header",
        with(&v4, &|f| {
            f[IP + 2..IP + 4].copy_from_slice(&[0, 39]);
            fix_ip4(f)
        }),
        SW,
        Want::Parse(P::TruncatedTcp),
    );
    add(
        "total length smaller than the frame, cutting the payload",
        with(&v4, &|f| {
            let tl = u16::from_be_bytes([f[IP + 2], f[IP + 3]]) - 2;
            f[IP + 2..IP + 4].copy_from_slice(&tl.to_be_bytes());
            fix_ip4(f)
        }),
        SW,
        Want::Parse(P::TcpBadChecksum),
    );
    add(
        "bad IPv4 header checksum",
        with(&v4, &|f| f[IP + 8] = 1),
        SW,
        Want::Parse(P::Ipv4BadChecksum),
    );
    add(
        "NIC: IPv4 checksum bad",
        v4.clone(),
        RxChecksum {
            ip: ChecksumStatus::Bad,
            l4: ChecksumStatus::Good,
        },
        Want::Parse(P::Ipv4BadChecksum),
    );
    add(
        "first fragment (MF)",
        with(&v4, &|f| {
            f[IP + 6] |= 0x20;
            fix_ip4(f)
        }),
        SW,
        Want::Parse(P::Ipv4Fragment),
    );
    add(
        "later fragment (offset 128)",
        with(&v4, &|f| {
            f[IP + 7] = 0x10;
            fix_ip4(f)
        }),
        SW,
        Want::Parse(P::Ipv4Fragment),
    );
    add(
        "IPv4 multicast source",
        with(&v4, &|f| {
            f[IP + 12] = 224;
            fix4(f)
        }),
        SW,
        Want::Parse(P::MulticastSourceIp),
    );
    add(
        "UDP for us",
        with(&v4, &|f| {
            f[IP + 9] = protocol::UDP;
            fix_ip4(f)
        }),
        SW,
        Want::Parse(P::NotTcp),
    );
    add(
        "TCP to another IPv4 address",
        with(&v4, &|f| {
            f[IP + 19] = 99;
            fix4(f)
        }),
        SW,
        Want::Parse(P::NotForUs),
    );
    // -- IPv6 --
    add(
        "IPv6 payload length past the frame",
        with(&v6, &|f| f[IP + 5] += 1),
        SW,
        Want::Parse(P::Ipv6PayloadLenMismatch),
    );
    add(
        "IPv6 extension-header loop (routing -> routing -> ...)",
        ip6_with_ext(
            &stranger6,
            &stranger6.seg(5, 6, TcpFlags::ACK),
            b"xyz",
            &[(ext::ROUTING, 0); 12],
        ),
        SW,
        Want::Parse(P::Ipv6ExtChainTooLong),
    );
    add(
        "IPv6 extension header running past the packet",
        with(
            &ip6_with_ext(
                &stranger6,
                &stranger6.seg(5, 6, TcpFlags::ACK),
                b"xyz",
                &[(ext::DEST_OPTS, 0)],
            ),
            &|f| f[tcp6 + 1] = 200,
        ),
        SW,
        Want::Parse(P::Ipv6ExtChainPastPacket),
    );
    add(
        "IPv6 hop-by-hop not first",
        ip6_with_ext(
            &stranger6,
            &stranger6.seg(5, 6, TcpFlags::ACK),
            b"xyz",
            &[(ext::DEST_OPTS, 0), (ext::HOP_BY_HOP, 0)],
        ),
        SW,
        Want::Parse(P::Ipv6HopByHopNotFirst),
    );
    add(
        "IPv6 fragment",
        with(
            &ip6_with_ext(
                &stranger6,
                &stranger6.seg(5, 6, TcpFlags::ACK),
                b"xyz",
                &[(ext::FRAGMENT, 0)],
            ),
            &|f| f[tcp6 + 3] = 1,
        ),
        SW,
        Want::Parse(P::Ipv6Fragment),
    );
    // -- Ethernet --
    add(
        "VLAN tag around LLDP",
        with(&vlan, &|f| f[16..18].copy_from_slice(&[0x88, 0xcc])),
        SW,
        Want::Parse(P::VlanNonIp),
    );
    add(
        "VLAN tag around a second tag (QinQ)",
        with(&vlan, &|f| f[16..18].copy_from_slice(&[0x81, 0x00])),
        SW,
        Want::Parse(P::VlanNonIp),
    );
    add(
        "multicast source MAC",
        with(&v4, &|f| f[6] |= 1),
        SW,
        Want::Parse(P::MulticastSourceMac),
    );
    add(
        "unicast to another MAC",
        with(&v4, &|f| f[5] = 0x99),
        SW,
        Want::Parse(P::NotOurMac),
    );
    // -- TCP header and options --
    add(
        "TCP checksum wrong",
        with(&v4, &|f| f[tcp4 + 20] ^= 1),
        SW,
        Want::Parse(P::TcpBadChecksum),
    );
    add(
        "TCP checksum wrong (IPv6)",
        with(&v6, &|f| f[tcp6 + 4] ^= 0x80),
        SW,
        Want::Parse(P::TcpBadChecksum),
    );
    add(
        "NIC: TCP checksum bad",
        v4.clone(),
        RxChecksum {
            ip: ChecksumStatus::Good,
            l4: ChecksumStatus::Bad,
        },
        Want::Parse(P::TcpBadChecksum),
    );
    add(
        "data offset 4",
        with(&v4, &|f| {
            f[tcp4 + 12] = 0x40;
            fix4(f)
        }),
        SW,
        Want::Parse(P::TcpDataOffsetTooSmall),
    );
    add(
        "data offset 15 past the packet",
        with(&v4, &|f| {
            f[tcp4 + 12] = 0xf0;
            fix4(f)
        }),
        SW,
        Want::Parse(P::TcpDataOffsetPastPacket),
    );
    // A SYN with 12 option bytes to overwrite.
    let syn12 = {
        let mut f = stranger.seg(5, 0, TcpFlags::SYN);
        f.opts = TcpOptions {
            timestamp: Some(Timestamp { tsval: 1, tsecr: 0 }),
            ..TcpOptions::default()
        };
        f.to_vec(b"")
    };
    let opts = |o: &[u8]| {
        let mut b = [1u8; 12];
        b[..o.len()].copy_from_slice(o);
        with(&syn12, &move |f| {
            f[tcp4 + 20..tcp4 + 32].copy_from_slice(&b);
            fix4(f)
        })
    };
    add(
        "option length 0",
        opts(&[30, 0]),
        SW,
        Want::Parse(P::TcpOptionLenZero),
    );
    add(
        "option length 1",
        opts(&[30, 1]),
        SW,
        Want::Parse(P::TcpOptionLenOne),
    );
    add(
        "option running past the header",
        opts(&[1, 1, 1, 1, 30, 9]),
        SW,
        Want::Parse(P::TcpOptionPastHeader),
    );
    add(
        "option kind with no length byte",
        opts(&[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 30]),
        SW,
        Want::Parse(P::TruncatedTcpOptions),
    );
    add(
        "timestamp option of length 8",
        opts(&[8, 8, 0, 0, 0, 0, 0, 0]),
        SW,
        Want::Parse(P::TcpOptionBadLength),
    );
    add(
        "window scale 15",
        opts(&[3, 3, 15]),
        SW,
        Want::Parse(P::TcpWindowScaleTooLarge),
    );
    add("MSS 0", opts(&[2, 4, 0, 0]), SW, Want::Parse(P::TcpMssZero));
    let flags = |fl: u8| {
        with(&v4, &move |f| {
            f[tcp4 + 13] = fl;
            fix4(f)
        })
    };
    add("SYN+FIN", flags(0x03), SW, Want::Parse(P::TcpSynFin));
    add("SYN+RST", flags(0x06), SW, Want::Parse(P::TcpSynRst));
    add("no flags", flags(0x00), SW, Want::Parse(P::TcpNoFlags));
    add(
        "only ECE and CWR",
        flags(0xc0),
        SW,
        Want::Parse(P::TcpNoFlags),
    );

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
    // 198.18.0.0/15 only (DESIGN.md): the corpus never names another address.
    for i in 0..64 {
        let IpAddr::V4(a) = Peer::v4(i, 1).ip else {
            unreachable!()
        };
        let n = u32::from(a);
        assert_eq!(n >> 17, u32::from(Ipv4Addr::new(198, 18, 0, 0)) >> 17);
    }
}
