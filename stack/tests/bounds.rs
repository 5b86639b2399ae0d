//! Bounds under attack, through the whole pipeline on a virtual clock:
//! - a flood of 1,000,000 SYNs from random addresses keeps the half-open and connection
//!   tables, the receive buffers held and the process's memory within bounds, and a
//!   legitimate client still completes its handshake (by SYN cookie, RFC 4987 §3.6) and
//!   transfers data;
//! - an out-of-order flood from many connections stays within the per-connection and
//!   per-core out-of-order limits, the excess counted, and every stream is still delivered
//!   exactly once the gaps are filled;
//! - more flows than the GRO table holds: runs are evicted and counted, and every byte
//!   still reaches TCP in order;
//! - more connections than the table holds: each refused with a RST, counted.
//!
//! `Sim` (`testkit::harness`) checks the accounting and every bound after each burst.
#![allow(clippy::unwrap_used)]

use std::time::Instant as WallClock;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use stack::buf::RxChecksum;
use stack::gro::{FlushReason, GroConfig};
use stack::pipeline::PipelineConfig;
use stack::tcp::{DropReason as T, TcpConfig};
use stack::time::Duration;
use stack::wire::{TcpFlags, TcpOptions, Timestamp};

use testkit::client::Client;
use testkit::frames::{self, Peer};
use testkit::harness::{Bounds, Sim};

fn sim(tcp: TcpConfig, gro: Option<GroConfig>) -> Sim {
    let cfg = PipelineConfig {
        local: frames::local(),
        gro,
        tcp,
        listen: vec![(frames::PORT, Default::default())],
        tx_csum_offload: false,
    };
    let b = Bounds::of(&cfg, 256);
    Sim::with_config(cfg, b)
}

/// Resident set size in bytes (Linux), or 0 where /proc is missing.
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Reads everything the client's connection has and checks it is the stream's prefix.
fn read_and_check(sim: &mut Sim, c: &Client, have: &mut Vec<u8>) {
    let got = sim.read(c.id, 0);
    have.extend_from_slice(&got);
    assert_eq!(*have, c.bytes(0, have.len()), "stream of {:?}", c.peer);
}

#[test]
fn syn_flood_of_a_million_keeps_every_bound_and_cookies_let_a_client_in() {
    const SYNS: u32 = 1_000_000;
    let max_conns = 64;
    let max_half_open = 128;
    let mut s = sim(
        TcpConfig {
            max_conns,
            max_half_open,
            ..TcpConfig::default()
        },
        Some(GroConfig::default()),
    );
    // Learn only from what goes to the legitimate client's port (below the flood's).
    s.watch_ports = Some(vec![1000]);
    let mut rng = SmallRng::seed_from_u64(7);
    let t0 = WallClock::now();
    let rss0 = rss();
    let mut legit: Option<Client> = None;
    let mut have = Vec::new();
    for i in 0..SYNS {
        // A random source in 198.18.0.0/15, a random port and ISN, options like Linux's.
        let a = u32::from(std::net::Ipv4Addr::new(198, 18, 0, 0)) + rng.gen_range(2..1 << 17);
        let p = Peer {
            ip: std::net::IpAddr::V4(a.into()),
            port: rng.gen_range(1024..=65535),
            vlan: None,
            dport: frames::PORT,
        };
        let mut f = p.seg(rng.gen(), 0, TcpFlags::SYN);
        f.opts = TcpOptions {
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            timestamp: Some(Timestamp {
                tsval: rng.gen(),
                tsecr: 0,
            }),
            ..TcpOptions::default()
        };
        s.rx(f.to_vec(b""), RxChecksum::default());
        if i % 64 == 63 {
            s.run_burst();
            // 1 µs per SYN: the whole flood lasts one second of virtual time.
            s.advance(Duration::from_micros(64));
        }
        if i == SYNS / 2 {
            // Mid-flood, with the half-open table full: a real client connects.
            s.run_burst();
            assert_eq!(s.p.tcp().half_open_count(), max_half_open);
            let cookies = s.p.stats().tcp.syn_cookies_accepted;
            let mut c = Client::connect(&mut s, Peer::v4(1, 1000), 77, true);
            assert_eq!(
                s.p.stats().tcp.syn_cookies_accepted,
                cookies + 1,
                "the client got in by SYN cookie"
            );
            for _ in 0..20 {
                c.send(&mut s, 1448);
            }
            read_and_check(&mut s, &c, &mut have);
            legit = Some(c);
        }
    }
    s.run_burst();
    let mut c = legit.unwrap();
    // The client still transfers after the flood.
    for _ in 0..20 {
        c.send(&mut s, 1448);
    }
    read_and_check(&mut s, &c, &mut have);
    assert_eq!(have.len(), 40 * 1448);
    let secs = t0.elapsed().as_secs_f64();
    let grown = rss().saturating_sub(rss0);
    let st = s.p.stats();
    eprintln!(
        "SYN flood: {SYNS} SYNs in {secs:.1} s; peak half-open {} / {max_half_open}, \
         peak conns {} / {max_conns}, peak rx buffers held {} (bound {}), \
         SYN cookies sent {}, accepted {}, RSS grew {} KiB",
        s.peak.half_open,
        s.peak.conns,
        s.peak.rx_in_use,
        s.b.rx_buffers(),
        st.tcp.syn_cookies_sent,
        st.tcp.syn_cookies_accepted,
        grown / 1024
    );
    assert!(s.peak.half_open <= max_half_open);
    assert!(s.peak.conns <= max_conns);
    assert!(s.peak.rx_in_use <= s.b.rx_buffers());
    assert_eq!(st.tcp.syns_received, u64::from(SYNS) + 1);
    assert!(st.tcp.syn_cookies_sent >= u64::from(SYNS) - max_half_open as u64 * 8);
    // Nothing grows per SYN: a million SYNs may not cost more than a few MiB of heap
    // churn (the tables were allocated up front).
    assert!(grown < 64 << 20, "RSS grew by {grown} bytes");
}

#[test]
fn out_of_order_flood_stays_within_the_per_connection_and_per_core_limits() {
    let conn_limit = 16 * 1024;
    let core_limit = 96 * 1024;
    let mut s = sim(
        TcpConfig {
            max_conns: 32,
            ooo_conn_bytes: conn_limit,
            ooo_core_bytes: core_limit,
            ooo_core_slices: 4096,
            ..TcpConfig::default()
        },
        Some(GroConfig::default()),
    );
    let mut clients: Vec<Client> = (0..32)
        .map(|i| Client::connect(&mut s, Peer::v4(10 + i, 2000), 1000 * i + 5, i % 2 == 0))
        .collect();
    // Each connection sends 100 segments of 1000 bytes with every other one missing:
    // 50 KB out of order each, 1.6 MB in all. The first four send all of theirs first
    // (reaching the per-connection limit), then everyone round-robin (the per-core one).
    for heavy in [true, false] {
        for round in 0..100u64 {
            for (i, c) in clients.iter_mut().enumerate() {
                if round % 2 == 1 && (i < 4) == heavy {
                    let payload = c.bytes(round * 1000, 1000);
                    let f = c
                        .frame(&s, c.base + (round * 1000) as usize, TcpFlags::ACK)
                        .to_vec(&payload);
                    s.rx(f, RxChecksum::default());
                }
            }
            s.run_burst();
            for c in &clients {
                let i = s.p.tcp().info(c.id).unwrap();
                assert!(i.ooo_bytes <= conn_limit, "per-connection limit");
            }
            assert!(s.p.tcp().ooo_bytes() <= core_limit, "per-core limit");
        }
    }
    let st = s.p.stats();
    let conn_drops = st.tcp.drops(T::OooConnLimit);
    let core_drops = st.tcp.drops(T::OooCoreLimit);
    eprintln!(
        "OOO flood: peak core OOO bytes {} / {core_limit}, drops: per-connection {conn_drops}, \
         per-core {core_drops}, queued {} segments",
        s.peak.ooo_bytes, st.tcp.ooo_segments
    );
    assert!(conn_drops > 0, "the per-connection limit was never reached");
    assert!(core_drops > 0, "the per-core limit was never reached");
    assert_eq!(
        st.tcp.ooo_segments + conn_drops + core_drops,
        32 * 50,
        "every out-of-order segment queued or dropped with a reason"
    );
    // The senders fill the gaps (retransmitting everything in order): every stream
    // arrives whole and in order.
    for c in clients.iter_mut() {
        let mut have = Vec::new();
        for k in 0..100u64 {
            let payload = c.bytes(k * 1000, 1000);
            let f = c
                .frame(&s, c.base + (k * 1000) as usize, TcpFlags::ACK)
                .to_vec(&payload);
            s.rx(f, RxChecksum::default());
            if k % 16 == 15 {
                s.run_burst();
                read_and_check(&mut s, c, &mut have);
            }
        }
        s.run_burst();
        read_and_check(&mut s, c, &mut have);
        assert_eq!(have.len(), 100_000);
        c.sent = 100_000;
    }
    assert_eq!(s.p.tcp().ooo_bytes(), 0);
}

#[test]
fn more_flows_than_gro_holds_are_evicted_and_counted_and_every_byte_arrives_in_order() {
    let flows = 4;
    let mut s = sim(
        TcpConfig {
            max_conns: 64,
            ..TcpConfig::default()
        },
        Some(GroConfig {
            flush_ns: Duration::from_millis(1),
            max_flows: flows,
            ..GroConfig::default()
        }),
    );
    let mut clients: Vec<Client> = (0..16)
        .map(|i| Client::connect(&mut s, Peer::v4(100 + i, 3000), 77 * i, true))
        .collect();
    let mut have = vec![Vec::new(); clients.len()];
    // 16 flows interleaved, 4 segments each per burst, 50 bursts: every burst touches
    // more flows than the table holds.
    for _ in 0..50 {
        for _ in 0..4 {
            for c in clients.iter_mut() {
                let f = c.next_data(&s, 1448);
                s.rx(f, RxChecksum::default());
            }
        }
        s.run_burst();
        s.advance(Duration::from_micros(100));
        for (c, h) in clients.iter().zip(have.iter_mut()) {
            read_and_check(&mut s, c, h);
        }
    }
    s.advance(Duration::from_millis(2));
    for (c, h) in clients.iter().zip(have.iter_mut()) {
        read_and_check(&mut s, c, h);
        assert_eq!(h.len() as u64, c.sent, "every byte delivered");
    }
    let st = s.p.stats();
    eprintln!(
        "GRO: {} segments in, {} units out, {} evictions, peak runs {} / {flows}",
        st.gro.segments_in,
        st.gro.units_out,
        st.gro.evictions(),
        s.peak.gro_runs
    );
    assert!(st.gro.evictions() > 0, "no eviction counted");
    assert_eq!(st.gro.flushed(FlushReason::Eviction), st.gro.evictions());
    assert!(s.peak.gro_runs <= flows);
    assert_eq!(st.gro.segments_in, st.gro.segments_out);
    assert_eq!(st.tcp.ooo_segments, 0, "GRO changed the order");
    assert_eq!(st.tcp.bytes_in_order, 16 * 50 * 4 * 1448);
}

#[test]
fn more_connections_than_the_table_holds_are_refused_with_a_rst_and_counted() {
    let max_conns = 8;
    let mut s = sim(
        TcpConfig {
            max_conns,
            max_half_open: 64,
            ..TcpConfig::default()
        },
        Some(GroConfig::default()),
    );
    let mut open: Vec<Client> = (0..max_conns as u32)
        .map(|i| Client::connect(&mut s, Peer::v4(200 + i, 4000), i, false))
        .collect();
    let refused = 12u32;
    for i in 0..refused {
        let p = Peer::v4(300 + i, 4000);
        assert!(
            Client::try_connect(&mut s, p, i, i % 2 == 0).is_none(),
            "connection {i} beyond the table was opened"
        );
        let t = s.track.get(&p.flow()).copied().unwrap_or_default();
        assert_eq!(t.rsts, 1, "refused connection {i} got no RST");
        assert_eq!(s.p.tcp().conn_count(), max_conns);
    }
    let st = s.p.stats();
    assert_eq!(st.tcp.drops(T::ConnTableFull), u64::from(refused));
    assert_eq!(st.tcp.conns_refused, u64::from(refused));
    assert_eq!(st.tcp.resets_sent, u64::from(refused));
    // The open connections are unaffected.
    for c in open.iter_mut() {
        let mut have = Vec::new();
        c.send(&mut s, 500);
        read_and_check(&mut s, c, &mut have);
        assert_eq!(have.len(), 500);
    }
    // A refused peer that retries once a slot frees gets in.
    let first = open.remove(0);
    s.p.tcp().abort(first.id).unwrap();
    s.advance(Duration::from_millis(1));
    let c = Client::connect(&mut s, Peer::v4(300, 4000), 999, false);
    assert!(s.p.tcp().info(c.id).is_some());
}
