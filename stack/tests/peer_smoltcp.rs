//! A real, independent TCP sender against weir: smoltcp 0.12's TCP socket on a virtual
//! clock, Ethernet frames through a seeded impairment (loss, reordering, duplication) in
//! both directions, MTU 1500. weir's side is the real pipeline: `wire::parse` ->
//! `gro::Gro` -> `tcp::Tcp` -> application -> `poll_tx` -> frames back to smoltcp.
//!
//! For every seed: the bytes weir delivers equal the bytes sent, every connection closes
//! cleanly (FIN both ways, no RST), and every receive buffer is freed.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SInstant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

use stack::ack::AckPolicy;
use stack::buf::PacketBuf;
use stack::driver::Burst;
use stack::gro::{Gro, GroConfig};
use stack::impair::{ImpairConfig, Impairment, Rng};
use stack::mem::{VecBuf, VecPool};
use stack::tcp::{ConnId, Event, Tcp, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::emit::emit_arp_reply;
use stack::wire::parse::{parse, LocalAddrs, Parsed};
use testkit::frames::{OUR_IP4, OUR_MAC, PEER_IP4, PEER_MAC, PORT};
use testkit::smol::VDev;

thread_local! {
    /// The virtual clock in ms, for smoltcp's TSval generator (a plain `fn`).
    static CLOCK_MS: Cell<u32> = const { Cell::new(0) };
}

fn tsval() -> u32 {
    CLOCK_MS.with(|c| c.get())
}

fn byte_at(conn: usize, off: usize) -> u8 {
    ((off * 7 + conn * 13 + (off >> 9)) % 251) as u8
}

struct Sender {
    handle: SocketHandle,
    total: usize,
    sent: usize,
    closed: bool,
}

struct Outcome {
    iterations: u64,
    acks: u64,
    data_segments: u64,
}

fn run_seed(
    seed: u64,
    max_conns: usize,
    max_bytes: usize,
    policy: AckPolicy,
    impaired: bool,
) -> Outcome {
    let mut rng = Rng::new(seed ^ 0x5eed);
    let nconns = 1 + rng.below(max_conns as u64) as usize;
    let sizes: Vec<usize> = (0..nconns)
        .map(|_| rng.below(max_bytes as u64 + 1) as usize)
        .collect();
    let timestamps = rng.below(2) == 0;
    let mut impair = ImpairConfig {
        loss_ppm: rng.below(30_000) as u32,
        dup_ppm: rng.below(20_000) as u32,
        reorder_ppm: rng.below(50_000) as u32,
        delay: Duration::from_micros(50),
        reorder_delay: Duration::from_micros(400),
        ..ImpairConfig::default()
    };
    if !impaired {
        impair = ImpairConfig {
            delay: impair.delay,
            ..ImpairConfig::default()
        };
    }
    let mut to_weir: Impairment<Vec<u8>> = Impairment::new(impair, seed.wrapping_mul(3));
    let mut to_peer: Impairment<Vec<u8>> = Impairment::new(impair, seed.wrapping_mul(5) + 1);

    // smoltcp.
    let mut now_ns: u64 = 1_000_000_000;
    let sn = |ns: u64| SInstant::from_micros((ns / 1000) as i64);
    let mut dev = VDev {
        rx: VecDeque::new(),
        tx: Vec::new(),
    };
    let mut icfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(PEER_MAC)));
    icfg.random_seed = seed;
    let mut iface = Interface::new(icfg, &mut dev, sn(now_ns));
    iface.update_ip_addrs(|a| {
        let _ = a.push(IpCidr::new(IpAddress::Ipv4(PEER_IP4), 24));
    });
    let mut sockets = SocketSet::new(vec![]);
    let mut senders = Vec::new();
    for (i, &total) in sizes.iter().enumerate() {
        let mut s = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; 64 * 1024]),
            tcp::SocketBuffer::new(vec![0; 64 * 1024]),
        );
        if timestamps {
            s.set_tsval_generator(Some(tsval));
        }
        let h = sockets.add(s);
        let sock = sockets.get_mut::<tcp::Socket>(h);
        sock.connect(
            iface.context(),
            (IpAddress::Ipv4(OUR_IP4), PORT),
            49152 + i as u16,
        )
        .expect("connect");
        senders.push(Sender {
            handle: h,
            total,
            sent: 0,
            closed: false,
        });
    }

    // weir.
    let mut tcp: Tcp<VecBuf> = Tcp::new(TcpConfig {
        max_conns: 64,
        // smoltcp 0.12 sizes segments as min(peer MSS, MTU - 40) and then adds its
        // timestamp option (tcp.rs `effective_mss`), so against an MSS of 1460 its full
        // segments would be 1512-byte IP packets that its own interface refuses to send.
        // Advertise 1448 (as if the MTU were 1488) so its segments fit the 1500-byte link.
        mtu: 1488,
        seed,
        ..TcpConfig::default()
    });
    tcp.listen(PORT, policy).expect("listen");
    let mut gro: Gro<VecBuf> = Gro::new(GroConfig::default());
    let local = LocalAddrs::new(OUR_MAC, Some(OUR_IP4), None);
    let mut rx_pool = VecPool::new(1 << 20, 2048);
    let mut tx_pool = VecPool::new(4096, 2048);
    let mut received: HashMap<u16, Vec<u8>> = HashMap::new();
    let mut ports: HashMap<ConnId, u16> = HashMap::new();
    let mut closed: HashMap<u16, bool> = HashMap::new();
    let mut segs = Vec::new();
    let mut out: Burst<VecBuf> = Burst::new();
    let mut iterations = 0u64;

    loop {
        iterations += 1;
        if iterations == 1_000_000 {
            eprintln!(
                "stats {:?}\nacks {:?}\nconns {} to_weir {:?} to_peer {:?} states {:?}",
                tcp.stats(),
                tcp.ack_stats(),
                tcp.conn_count(),
                to_weir.stats(),
                to_peer.stats(),
                senders
                    .iter()
                    .map(|s| sockets.get::<tcp::Socket>(s.handle).state())
                    .collect::<Vec<_>>()
            );
        }
        assert!(
            iterations < 1_000_001,
            "seed {seed}: no progress (sent {:?})",
            senders
                .iter()
                .map(|s| (s.sent, s.total))
                .collect::<Vec<_>>()
        );
        let now = Instant::from_nanos(now_ns);
        CLOCK_MS.with(|c| c.set((now_ns / 1_000_000) as u32));

        // The sender side.
        while let Some(f) = to_peer.pop_ready(now) {
            dev.rx.push_back(f);
        }
        for (i, s) in senders.iter_mut().enumerate() {
            let sock = sockets.get_mut::<tcp::Socket>(s.handle);
            if s.sent < s.total && sock.may_send() {
                let chunk: Vec<u8> = (s.sent..s.total.min(s.sent + 16384))
                    .map(|o| byte_at(i, o))
                    .collect();
                if let Ok(n) = sock.send_slice(&chunk) {
                    s.sent += n;
                }
            }
            if s.sent == s.total && !s.closed && sock.may_send() {
                sock.close();
                s.closed = true;
            }
        }
        // smoltcp emits one segment per socket per poll: poll until it has nothing more
        // (at most one burst), as a real sender's TSO/GSO burst would.
        loop {
            let before = dev.tx.len();
            let _ = iface.poll(sn(now_ns), &mut dev, &mut sockets);
            if dev.tx.len() == before || dev.tx.len() >= 64 {
                break;
            }
        }
        for f in dev.tx.drain(..) {
            to_weir.push(now, f);
        }

        // weir: one rx burst through parse and GRO.
        let mut n = 0;
        while n < 64 {
            let Some(f) = to_weir.pop_ready(now) else {
                break;
            };
            n += 1;
            let Some(buf) = rx_pool.adopt(f) else {
                panic!("rx pool exhausted: a buffer leak");
            };
            match parse(buf.data(), buf.rx_checksum(), &local) {
                Parsed::Tcp(meta) => {
                    gro.handle_segment(now, &meta, buf, &mut |s| segs.push(s.take()))
                }
                Parsed::ArpRequest(req) => {
                    let mut b = vec![0u8; 64];
                    let l = emit_arp_reply(&req, OUR_MAC, &mut b);
                    b.truncate(l);
                    to_peer.push(now, b);
                }
                _ => {}
            }
        }
        gro.end_of_burst(now, &mut |s| segs.push(s.take()));
        for mut s in segs.drain(..) {
            tcp.handle_segment(now, &mut s);
        }

        // The application.
        while let Some(ev) = tcp.poll_event() {
            match ev {
                Event::Opened(id) => {
                    let p = tcp.flow(id).expect("flow").sport;
                    ports.insert(id, p);
                    received.entry(p).or_default();
                }
                Event::Readable(id) | Event::PeerClosed(id) => {
                    let p = ports[&id];
                    let buf = received.entry(p).or_default();
                    tcp.recv(id, |sl| {
                        let mut n = 0;
                        for s in sl {
                            buf.extend_from_slice(s.bytes());
                            n += s.bytes().len();
                        }
                        n
                    })
                    .expect("recv");
                    if matches!(ev, Event::PeerClosed(_)) {
                        tcp.close(now, id).expect("close");
                    }
                }
                Event::Closed(id) => {
                    closed.insert(ports[&id], true);
                }
                Event::Reset(id) => panic!("seed {seed}: connection {id:?} reset"),
                Event::Writable(_) => {}
            }
        }
        tcp.handle_timeout(now);
        tcp.poll_tx(now, &mut tx_pool, &mut out, false);
        for b in out.drain(..) {
            to_peer.push(now, b.into_vec());
        }

        // Done?
        let peers_done = senders.iter().all(|s| {
            let st = sockets.get::<tcp::Socket>(s.handle).state();
            s.closed && matches!(st, tcp::State::TimeWait | tcp::State::Closed)
        });
        if peers_done && closed.len() == nconns && tcp.conn_count() == 0 {
            break;
        }

        // Advance the virtual clock to the next thing that can happen.
        let mut next = u64::MAX;
        if let Some(t) = to_weir.next_deadline() {
            next = next.min(t.as_nanos());
        }
        if let Some(t) = to_peer.next_deadline() {
            next = next.min(t.as_nanos());
        }
        if let Some(t) = tcp.poll_timeout() {
            next = next.min(t.as_nanos());
        }
        if let Some(d) = iface.poll_delay(sn(now_ns), &sockets) {
            next = next.min(now_ns + d.total_micros() * 1000);
        }
        if !dev.rx.is_empty() {
            next = next.min(now_ns + 1_000);
        }
        now_ns = next.max(now_ns + 1).min(now_ns + 1_000_000_000);
    }

    for (i, s) in senders.iter().enumerate() {
        let got = &received[&(49152 + i as u16)];
        assert_eq!(got.len(), s.total, "seed {seed} conn {i}: length");
        for (o, b) in got.iter().enumerate() {
            if *b != byte_at(i, o) {
                panic!("seed {seed} conn {i}: byte {o} differs");
            }
        }
    }
    drop(segs);
    drop(gro);
    let st = tcp.stats().clone();
    assert_eq!(st.conns_reset, 0, "seed {seed}");
    assert_eq!(st.conns_closed, nconns as u64);
    assert_eq!(tcp.ooo_bytes(), 0);
    let acks = tcp.ack_stats().data_acks();
    drop(tcp);
    assert_eq!(rx_pool.in_use(), 0, "seed {seed}: receive buffers leaked");
    Outcome {
        iterations,
        acks,
        data_segments: st.segments_in_order,
    }
}

/// 1,000 seeds, up to 16 parallel connections each, loss/reordering/duplication both
/// ways: every byte arrives, in order, and every connection closes cleanly.
#[test]
fn smoltcp_sender_1000_seeds() {
    let mut iters = 0;
    for seed in 0..1000 {
        let policy = match seed % 4 {
            0 | 1 => AckPolicy::linux(),
            2 => AckPolicy::rfc5681(),
            _ => AckPolicy::linux().with_quickack_psh_mss(false),
        };
        iters += run_seed(seed, 16, 24 * 1024, policy, true).iterations;
    }
    assert!(iters > 0);
}

/// Longer transfers on a clean link: GRO coalesces, the Linux policy sends stretch ACKs
/// (well under one ACK per two segments).
#[test]
fn smoltcp_bulk_clean_link_stretch_acks() {
    for seed in 0..4 {
        let o = run_seed(seed, 1, 2 << 20, AckPolicy::linux(), false);
        assert!(o.data_segments > 0);
        assert!(
            o.acks * 2 <= o.data_segments,
            "seed {seed}: {} ACKs for {} segments",
            o.acks,
            o.data_segments
        );
    }
}
