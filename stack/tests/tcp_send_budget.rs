//! The core's send budget (`TcpConfig::snd_core_slices`, Linux's `tcp_mem` idea:
//! `__sk_mem_raise_allocated` charges a write against a limit over every socket, and a
//! write over it waits in `sk_stream_wait_memory`): many connections with large send
//! buffers, writing at once over a lossy link, cannot take every buffer of a small pool,
//! and every one of them still finishes. Each test names what it checks.

use std::collections::HashMap;
use std::net::SocketAddr;

use stack::ack::AckPolicy;
use stack::mem::VecPool;
use stack::tcp::{ConnId, ConnectOpts, Event, TcpConfig};
use stack::time::Duration;
use testkit::tcp::*;

/// Connections, and the bytes each writes.
const CONNS: usize = 64;
const EACH: usize = 64 * 1024;
/// The sender's pool: far fewer buffers than 64 send queues of 1 MiB would take.
const POOL: usize = 512;

/// The byte at offset `i` of connection `k`'s stream.
fn byte(k: usize, i: usize) -> u8 {
    ((i + 31 * k) % 251) as u8
}

/// What one run saw.
struct Run {
    /// The most buffers the sender's pool had out after any step.
    peak_in_use: usize,
    /// The most buffers the sender's send queues held after any step.
    peak_held: usize,
    /// Connections whose every byte arrived, exact and in order.
    complete: usize,
    send_alloc_failures: u64,
    send_budget_limited: u64,
    retransmits: u64,
    /// Frames (data or ACK) `poll_tx` could not build for want of a buffer.
    frame_alloc_failures: u64,
}

/// `CONNS` connections from `a` to `b`, each writing `EACH` bytes whenever it may (at
/// `Event::Opened`, then after every short write only at `Event::Writable`), over a link
/// that drops every 25th data frame, for at most `steps` steps of 1 ms.
fn run(snd_core_slices: usize, steps: usize) -> Run {
    let a_cfg = TcpConfig {
        max_conns: CONNS,
        snd_buf: 1 << 20,
        snd_slices: 1024,
        snd_core_slices,
        ..TcpConfig::default()
    };
    let b_cfg = TcpConfig {
        max_conns: CONNS,
        ..TcpConfig::default()
    };
    let mut p = Pair::new(a_cfg, b_cfg);
    p.pool_a = VecPool::new(POOL, 2048);
    p.drop_every = Some(25);
    p.b.listen(PORT, AckPolicy::linux()).expect("listen");
    let data: Vec<Vec<u8>> = (0..CONNS)
        .map(|k| (0..EACH).map(|i| byte(k, i)).collect())
        .collect();
    // The sender's connections: which stream, how much written.
    let mut written: HashMap<ConnId, (usize, usize)> = HashMap::new();
    for k in 0..CONNS {
        let remote = SocketAddr::new(PEER_IP4.into(), PORT);
        let id =
            p.a.connect(
                p.now,
                OUR_IP4.into(),
                remote,
                ConnectOpts::new(OUR_MAC, PEER_MAC),
            )
            .expect("connect");
        written.insert(id, (k, 0));
    }
    // The receiver's connections, by the sender's local port: what arrived.
    let mut got: HashMap<ConnId, Vec<u8>> = HashMap::new();
    let mut r = Run {
        peak_in_use: 0,
        peak_held: 0,
        complete: 0,
        send_alloc_failures: 0,
        send_budget_limited: 0,
        retransmits: 0,
        frame_alloc_failures: 0,
    };
    for _ in 0..steps {
        let evs: Vec<Event> = p.a.events().collect();
        for ev in evs {
            let (Event::Opened(id) | Event::Writable(id)) = ev else {
                continue;
            };
            let Some((k, off)) = written.get_mut(&id) else {
                continue;
            };
            while *off < EACH {
                let n = p.a.send(p.now, id, &data[*k][*off..], &mut p.pool_a);
                let n = n.expect("send");
                *off += n;
                if n == 0 || *off < EACH {
                    break;
                }
            }
            if *off == EACH {
                p.a.shutdown(p.now, id).expect("shutdown");
            }
        }
        let evs: Vec<Event> = p.b.events().collect();
        for ev in evs {
            if let Event::Opened(id) = ev {
                got.insert(id, Vec::new());
            }
        }
        for (id, v) in got.iter_mut() {
            let _ = p.b.recv(*id, |sl| {
                let mut n = 0;
                for s in sl {
                    v.extend_from_slice(s.bytes());
                    n += usize::from(s.len);
                }
                n
            });
        }
        p.step(Duration::from_millis(1));
        r.peak_in_use = r.peak_in_use.max(p.pool_a.in_use());
        r.peak_held = r.peak_held.max(p.a.snd_buffers_held());
        if got.len() == CONNS && got.values().all(|v| v.len() == EACH) {
            break;
        }
    }
    for (id, v) in &got {
        let flow = p.b.flow(*id);
        let k = written
            .iter()
            .find(|(a_id, _)| p.a.flow(**a_id).map(|f| f.dport) == flow.map(|f| f.sport))
            .map(|(_, (k, _))| *k);
        if let Some(k) = k {
            if v.len() == EACH && v.iter().enumerate().all(|(i, b)| *b == byte(k, i)) {
                r.complete += 1;
            }
        }
    }
    let st = p.a.stats();
    r.send_alloc_failures = st.send_alloc_failures;
    r.send_budget_limited = st.send_budget_limited;
    r.retransmits = st.retransmits;
    r.frame_alloc_failures = p.a.ack_stats().alloc_failures;
    r
}

/// With a budget of half the pool, the send queues never hold more than it, the pool is
/// never emptied (frames can always be built), writes are cut by the budget, not by the
/// pool, and every connection delivers every byte, exact, through the losses: the
/// writers the budget stopped were woken (`Event::Writable`) once the queues drained.
#[test]
fn send_budget_keeps_buffers_for_frames_tcp_mem() {
    let r = run(POOL / 2, 20_000);
    assert!(r.retransmits > 0, "the link lost data");
    assert!(r.peak_held <= POOL / 2, "send queues held {}", r.peak_held);
    assert!(r.peak_in_use < POOL, "the pool ran dry: {}", r.peak_in_use);
    assert!(r.send_budget_limited > 0, "the budget cut writes");
    assert_eq!(r.send_alloc_failures, 0, "no write found the pool empty");
    assert_eq!(r.frame_alloc_failures, 0, "every frame found a buffer");
    assert_eq!(r.complete, CONNS, "every connection's bytes, exact");
}

/// The contrast, so the test above shows something: without the budget, the same writers
/// take every buffer of the pool at their first writes, their writes then find it empty,
/// no frame can be built, and within 1.3 s (the budgeted run needs about 0.25 s) no
/// connection has finished: the stall `apps::net::size_tcp` sizes the tables against.
#[test]
fn without_a_send_budget_the_writers_take_the_whole_pool() {
    let r = run(usize::MAX, 300);
    assert_eq!(r.peak_in_use, POOL, "the send queues took the pool");
    assert!(r.send_alloc_failures > 0);
    assert!(r.frame_alloc_failures > 0, "frames found no buffer");
    assert_eq!(r.send_budget_limited, 0);
    assert!(r.complete < CONNS, "{} connections finished", r.complete);
}

/// The budget's accounting on two connections: a write takes at most the buffers the
/// budget has left (`writable_bytes` says so beforehand), the next connection's write
/// takes nothing, and both hear `Event::Writable` once acknowledgments drain the queues
/// (the second had nothing queued, so no acknowledgment of its own would have told it).
#[test]
fn send_budget_bounds_each_write_and_wakes_the_writers() {
    let a_cfg = TcpConfig {
        snd_core_slices: 4,
        ..cfg()
    };
    let mut p = Pair::new(a_cfg, cfg());
    p.b.listen(PORT, AckPolicy::linux()).expect("listen");
    let remote = SocketAddr::new(PEER_IP4.into(), PORT);
    let opts = ConnectOpts::new(OUR_MAC, PEER_MAC);
    let x = p.a.connect(p.now, OUR_IP4.into(), remote, opts).expect("x");
    let y = p.a.connect(p.now, OUR_IP4.into(), remote, opts).expect("y");
    for _ in 0..5 {
        p.step(Duration::from_micros(100));
    }
    assert_eq!(
        p.a.events()
            .filter(|e| matches!(e, Event::Opened(_)))
            .count(),
        2
    );
    let mss = p.a.info(x).expect("x").snd_mss as usize;
    assert_eq!(p.a.writable_bytes(x), 4 * mss, "four buffers of one MSS");
    let data = vec![7u8; 10 * mss];
    assert_eq!(p.a.send(p.now, x, &data, &mut p.pool_a), Ok(4 * mss));
    assert_eq!(p.a.snd_buffers_held(), 4);
    assert_eq!(p.a.writable_bytes(y), 0);
    assert_eq!(p.a.send(p.now, y, &data, &mut p.pool_a), Ok(0));
    assert_eq!(p.a.stats().send_budget_limited, 2);
    assert_eq!(p.a.stats().send_alloc_failures, 0);
    let mut writable = Vec::new();
    for _ in 0..20 {
        p.step(Duration::from_micros(100));
        for e in p.a.events() {
            if let Event::Writable(id) = e {
                writable.push(id);
            }
        }
        let _ = p.b.events().count();
    }
    assert_eq!(p.a.snd_buffers_held(), 0, "acknowledged and freed");
    writable.sort_by_key(|id| id.index());
    writable.dedup();
    assert_eq!(writable.len(), 2, "both writers woken: {writable:?}");
    assert_eq!(p.a.writable_bytes(y), 4 * mss);
}
