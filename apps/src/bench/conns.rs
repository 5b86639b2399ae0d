//! `weir-bench conns`: many established connections on one core. A weir client on the
//! worker lcore opens `conns` connections to a weir receiver on the main lcore over the
//! ring pair of `weir-bench e2e`, keeps them established, and sends each a small message
//! in turn, round robin at a fixed total rate, for the data phase; the receiver checks
//! every byte of every connection against the pattern of its 4-tuple and offset.
//!
//! One address pair and one listening port allow at most one connection per client port,
//! so the receiver listens on `ports` ports and the client walks its whole ephemeral range
//! (1,024 to 65,535) for each.
//!
//! Reported per row:
//! - handshakes per second (the client's connect phase, at most [`MAX_HALF_OPEN`] at once);
//! - the receiver's heap per established connection: what the receiver's lcore allocated
//!   from before its stack was built to when every connection was established, divided by
//!   the connections (its tables are sized for `--tables` connections, at least `conns`);
//!   the same at the end of the data phase; and the process's resident memory;
//! - the receiver's busy cycles per segment in the data phase;
//! - every connection's bytes: the client's count and the receiver's, compared per
//!   connection (any difference, a wrong byte or a reset fails the row).
//!
//! The anchor is the same bench at another size in the same run: `--conns 64,1000000`
//! prints the cycles per segment of each row over the first's.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Result};
use dpdk::{Clock, Mbuf};
use serde_json::json;
use stack::ack::AckPolicy;
use stack::driver::{Burst, RxQueue, TxQueue};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::tcp::{ConnId, ConnectOpts, Event, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::LocalAddrs;

use super::e2e::{Rig, GEN_IP, PORT, RX_IP};
use crate::busy::BusySpan;
use crate::eal_args::Memory;
use crate::heap;

/// Most handshakes the client has in progress at once (below the receiver's half-open
/// table, so no SYN cookies).
const MAX_HALF_OPEN: u32 = 128;
/// The client's ephemeral ports.
const EPHEMERAL: std::ops::RangeInclusive<u16> = 1024..=65535;
/// How long the handshakes may take per 1,000 connections, and at least.
const CONNECT_GRACE_PER_1K: Duration = Duration::from_millis(200);
const CONNECT_GRACE_MIN: Duration = Duration::from_secs(10);
/// How long the receiver may take to have every byte after the data phase.
const DRAIN_GRACE: Duration = Duration::from_secs(10);
/// The largest message.
pub const MAX_MESSAGE: u32 = 1024;

/// The phases, as the client announces them.
const PH_CONNECT: u8 = 0;
const PH_DATA: u8 = 1;
const PH_DRAIN: u8 = 2;
const PH_DONE: u8 = 3;

/// `weir-bench conns`'s options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Connection counts, one row each.
    pub conns: Vec<u32>,
    /// Size both stacks' tables for at least this many connections (0: each row's count).
    pub tables: u32,
    /// Listening ports on the receiver.
    pub ports: u16,
    /// Seconds of the data phase.
    pub seconds: f64,
    /// Messages per second, all connections together.
    pub rate: u64,
    /// Bytes per message.
    pub message: u32,
    /// One JSON object per row.
    pub json: bool,
    /// Where DPDK's memory comes from.
    pub memory: Memory,
}

impl Options {
    fn validate(&self) -> Result<()> {
        if self.conns.is_empty() || self.conns.contains(&0) {
            bail!("--conns: give one or more counts above 0");
        }
        if self.ports == 0 || u32::from(self.ports) > u32::from(u16::MAX - PORT) {
            bail!("--ports {}: give 1 to {}", self.ports, u16::MAX - PORT);
        }
        let per_port = EPHEMERAL.len() as u64;
        for &c in &self.conns {
            if u64::from(c) > per_port * u64::from(self.ports) {
                bail!(
                    "--conns {c}: {} ports hold at most {} connections from one address ({} ephemeral ports each); give more --ports",
                    self.ports,
                    per_port * u64::from(self.ports),
                    per_port
                );
            }
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0) {
            bail!("--seconds {}: give a positive number", self.seconds);
        }
        if self.rate == 0 {
            bail!("--rate: give a positive number of messages per second");
        }
        if self.message == 0 || self.message > MAX_MESSAGE {
            bail!("--message {}: give 1 to {MAX_MESSAGE} bytes", self.message);
        }
        Ok(())
    }
}

/// The byte at `off` of the connection whose ports are `key` (client port << 16 | server
/// port): each connection's stream differs from its neighbours'.
fn pattern(key: u32, off: u64) -> u8 {
    (key.wrapping_mul(0x9e37_79b9) >> 24) as u8 ^ (off as u8).wrapping_mul(31) ^ (off >> 8) as u8
}

fn key_of(client_port: u16, server_port: u16) -> u32 {
    u32::from(client_port) << 16 | u32::from(server_port)
}

/// One row's figures.
#[derive(Clone, Debug, Default)]
struct Row {
    conns: u32,
    tables: u32,
    handshakes_per_s: f64,
    heap_per_conn: f64,
    heap_per_conn_after: f64,
    rss_per_conn: f64,
    cycles_per_segment: f64,
    segments: u64,
    bytes: u64,
    messages: u64,
    queue_allocs_in_data: u64,
}

/// What the client reports.
#[derive(Debug, Default)]
struct ClientReport {
    connect_ns: u64,
    /// Bytes sent by connection key, sorted.
    sent: Vec<(u32, u64)>,
    messages: u64,
    error: Option<String>,
}

fn grace(conns: u32) -> Duration {
    let g = Duration::from_nanos(CONNECT_GRACE_PER_1K.as_nanos() * u64::from(conns) / 1000);
    if g > CONNECT_GRACE_MIN {
        g
    } else {
        CONNECT_GRACE_MIN
    }
}

fn stack_config(
    mac: [u8; 6],
    ip: std::net::Ipv4Addr,
    tables: u32,
    listen: &[u16],
) -> PipelineConfig {
    PipelineConfig {
        local: LocalAddrs::new(mac, Some(ip), None),
        gro: Some(stack::gro::GroConfig::default()),
        tcp: TcpConfig {
            max_conns: tables as usize + 64,
            max_half_open: 256,
            ephemeral_ports: EPHEMERAL,
            // Small messages, a few in flight: a send queue of a few buffers each.
            snd_buf: 16 * 1024,
            snd_slices: 8,
            seed: 0x636f_6e6e ^ u64::from(tables),
            ..TcpConfig::default()
        },
        listen: listen.iter().map(|&p| (p, AckPolicy::linux())).collect(),
        tx_csum_offload: false,
    }
}

/// Everything one side's loop turn needs from its port.
struct Io {
    rx: dpdk::PortRxQueue,
    tx: dpdk::PortTxQueue,
    pool: dpdk::PortPool,
    clock: Clock,
}

impl Io {
    /// One turn: receive, the stack, `app`, timers, transmit. Returns whether anything
    /// came or went.
    fn turn(
        &mut self,
        p: &mut Pipeline<Mbuf>,
        now: Instant,
        rxb: &mut Burst<Mbuf>,
        txb: &mut Burst<Mbuf>,
        mut app: impl FnMut(&mut Pipeline<Mbuf>, &mut dpdk::PortPool),
    ) -> bool {
        let got = self.rx.rx_burst(rxb);
        p.handle_rx_burst(now, rxb);
        app(p, &mut self.pool);
        p.handle_timeout(now);
        app(p, &mut self.pool);
        let sent = p.poll_tx(now, &mut self.pool, txb);
        if !txb.is_empty() {
            self.tx.tx_burst(txb);
            txb.clear();
        }
        got > 0 || sent > 0
    }
}

/// The client: opens the connections, then sends round robin until the data phase ends.
fn run_client(
    conns: u32,
    o: &Options,
    cfg: PipelineConfig,
    macs: ([u8; 6], [u8; 6]),
    io: &mut Io,
    phase: &AtomicU8,
    total: &Mutex<Option<u64>>,
) -> ClientReport {
    let mut rep = ClientReport::default();
    let mut p = match Pipeline::new(cfg) {
        Ok(p) => p,
        Err(e) => {
            rep.error = Some(format!("cannot set up the client's TCP: {e}"));
            return rep;
        }
    };
    let n = conns as usize;
    // Per connection: its handle, its key and the bytes sent.
    let mut ids: Vec<Option<ConnId>> = vec![None; n];
    let mut keys = vec![0u32; n];
    let mut sent = vec![0u64; n];
    let mut by_slot: Vec<u32> = vec![u32::MAX; n + 64];
    let (mut rxb, mut txb): (Burst<Mbuf>, Burst<Mbuf>) = (Burst::new(), Burst::new());
    let mut msg = vec![0u8; o.message as usize];
    let start = io.clock.now();
    let deadline = start + grace(conns);
    let (mut next, mut connecting, mut opened) = (0u32, 0u32, 0u32);
    let mut failure: Option<String> = None;
    // Connect.
    while opened < conns {
        let now = io.clock.now();
        while connecting < MAX_HALF_OPEN && next < conns {
            let k = next as usize;
            let port = PORT + (next % u32::from(o.ports)) as u16;
            let opts = ConnectOpts::new(macs.0, macs.1);
            match p.tcp().connect(
                now,
                IpAddr::V4(GEN_IP),
                SocketAddr::new(IpAddr::V4(RX_IP), port),
                opts,
            ) {
                Ok(id) => {
                    if let Some(s) = by_slot.get_mut(id.index() as usize) {
                        *s = next;
                    }
                    ids[k] = Some(id);
                    connecting += 1;
                    next += 1;
                }
                Err(e) => {
                    failure = Some(format!("connect {k}: {e}"));
                    break;
                }
            }
        }
        io.turn(&mut p, now, &mut rxb, &mut txb, |p, _| {
            while let Some(ev) = p.tcp().poll_event() {
                match ev {
                    Event::Opened(id) => {
                        connecting = connecting.saturating_sub(1);
                        opened += 1;
                        if let (Some(&k), Some(f)) =
                            (by_slot.get(id.index() as usize), p.tcp().flow(id))
                        {
                            if let Some(key) = keys.get_mut(k as usize) {
                                // The client's flow key has the peer as `src`.
                                *key = key_of(f.dport, f.sport);
                            }
                        }
                    }
                    Event::Reset(_) | Event::Closed(_) => {
                        failure.get_or_insert_with(|| {
                            "a connection was reset or closed while opening".into()
                        });
                    }
                    _ => {}
                }
            }
        });
        if failure.is_some() {
            break;
        }
        if now >= deadline {
            failure = Some(format!(
                "{opened} of {conns} connections opened in {:?}",
                grace(conns)
            ));
            break;
        }
    }
    rep.connect_ns = io.clock.now().saturating_since(start).as_nanos();
    if let Some(f) = failure {
        rep.error = Some(f);
        phase.store(PH_DONE, Ordering::Release);
        return rep;
    }
    // Data: `rate` messages per second, to connection 0, 1, 2, ... in turn.
    phase.store(PH_DATA, Ordering::Release);
    let t0 = io.clock.now();
    let end = t0 + Duration::from_nanos((o.seconds * 1e9) as u64);
    let mut rr = 0usize;
    loop {
        let now = io.clock.now();
        if now >= end {
            break;
        }
        let due = (u128::from(now.saturating_since(t0).as_nanos()) * u128::from(o.rate)
            / 1_000_000_000) as u64;
        let mut budget = due.saturating_sub(rep.messages).min(256);
        while budget > 0 {
            let k = rr;
            rr = (rr + 1) % n;
            budget -= 1;
            let Some(id) = ids[k] else { continue };
            for (i, b) in msg.iter_mut().enumerate() {
                *b = pattern(keys[k], sent[k] + i as u64);
            }
            match p.tcp().send(now, id, &msg, &mut io.pool) {
                Ok(m) => sent[k] += m as u64,
                Err(e) => {
                    rep.error = Some(format!("send on connection {k}: {e}"));
                    phase.store(PH_DONE, Ordering::Release);
                    return rep;
                }
            }
            rep.messages += 1;
        }
        let mut bad = false;
        io.turn(&mut p, now, &mut rxb, &mut txb, |p, _| {
            while let Some(ev) = p.tcp().poll_event() {
                if matches!(ev, Event::Reset(_) | Event::Closed(_)) {
                    bad = true;
                }
            }
        });
        if bad {
            rep.error = Some("a connection was reset or closed in the data phase".into());
            phase.store(PH_DONE, Ordering::Release);
            return rep;
        }
    }
    // Drain: keep the loop running (retransmissions, ACKs) until the receiver has every
    // byte (or gives up).
    if let Ok(mut t) = total.lock() {
        *t = Some(sent.iter().sum());
    }
    phase.store(PH_DRAIN, Ordering::Release);
    while phase.load(Ordering::Acquire) == PH_DRAIN {
        let now = io.clock.now();
        io.turn(&mut p, now, &mut rxb, &mut txb, |p, _| {
            while p.tcp().poll_event().is_some() {}
        });
    }
    rep.sent = keys.into_iter().zip(sent).collect();
    rep.sent.sort_unstable();
    rep
}

/// What the receiver reports.
#[derive(Debug, Default)]
struct ServerReport {
    heap_established: Option<isize>,
    heap_after: Option<isize>,
    rss_established: Option<u64>,
    busy_cycles: u64,
    segments: u64,
    queue_allocs_in_data: u64,
    /// Bytes received by connection key, sorted.
    received: Vec<(u32, u64)>,
    wrong_bytes: u64,
    resets: u64,
}

/// The receiver: accepts, reads and checks every byte until the client is done.
fn run_server(
    conns: u32,
    cfg: PipelineConfig,
    io: &mut Io,
    phase: &AtomicU8,
    expected: &dyn Fn() -> Option<u64>,
) -> Result<ServerReport> {
    let heap0 = heap::thread_live();
    let rss0 = heap::resident_bytes();
    let slots = cfg.tcp.max_conns;
    let mut p: Pipeline<Mbuf> =
        Pipeline::new(cfg).map_err(|e| anyhow!("cannot set up the receiver's TCP: {e}"))?;
    // Per connection slot: its key and the bytes read.
    let mut keys = vec![0u32; slots];
    let mut got = vec![0u64; slots];
    let (mut rxb, mut txb): (Burst<Mbuf>, Burst<Mbuf>) = (Burst::new(), Burst::new());
    let mut rep = ServerReport::default();
    let (mut span, mut busy) = (BusySpan::default(), 0u64);
    let mut established_seen = false;
    let mut data_snap: Option<(u64, u64, u64)> = None;
    let mut drain_until: Option<Instant> = None;
    let mut total = 0u64;
    let (mut wrong, mut resets) = (0u64, 0u64);
    loop {
        let c0 = Clock::cycles();
        busy += span.close(c0);
        let now = io.clock.instant_at(c0);
        let did = io.turn(&mut p, now, &mut rxb, &mut txb, |p, _| {
            while let Some(ev) = p.tcp().poll_event() {
                match ev {
                    Event::Opened(id) => {
                        if let Some(f) = p.tcp().flow(id) {
                            let s = id.index() as usize;
                            keys[s] = key_of(f.sport, f.dport);
                            got[s] = 0;
                        }
                    }
                    Event::Readable(id) => {
                        let s = id.index() as usize;
                        let (key, off) = (keys[s], got[s]);
                        let mut bad = 0u64;
                        let n = p
                            .tcp()
                            .recv(id, |sl| {
                                let mut at = off;
                                for x in sl {
                                    for &b in x.bytes() {
                                        bad += u64::from(b != pattern(key, at));
                                        at += 1;
                                    }
                                }
                                (at - off) as usize
                            })
                            .unwrap_or(0);
                        got[s] += n as u64;
                        total += n as u64;
                        wrong += bad;
                    }
                    Event::Reset(_) => resets += 1,
                    _ => {}
                }
            }
        });
        if did {
            span.busy(c0);
        }
        let ph = phase.load(Ordering::Acquire);
        if !established_seen && p.tcp().conn_count() as u32 >= conns && ph >= PH_DATA {
            established_seen = true;
            rep.heap_established = heap::thread_live().zip(heap0).map(|(a, b)| a - b);
            rep.rss_established = heap::resident_bytes()
                .zip(rss0)
                .map(|(a, b)| a.saturating_sub(b));
            busy += span.close(Clock::cycles());
            let st = p.stats();
            data_snap = Some((
                busy,
                st.tcp.segments_in_order,
                p.tcp().queue_spare().0.allocs,
            ));
        }
        if ph == PH_DONE {
            break;
        }
        if ph == PH_DRAIN {
            let until = *drain_until.get_or_insert(now + DRAIN_GRACE);
            if expected() == Some(total) || now >= until {
                busy += span.close(Clock::cycles());
                if let Some((c, s, a)) = data_snap.take() {
                    let st = p.stats();
                    rep.busy_cycles = busy - c;
                    rep.segments = st.tcp.segments_in_order - s;
                    rep.queue_allocs_in_data = p.tcp().queue_spare().0.allocs - a;
                }
                rep.heap_after = heap::thread_live().zip(heap0).map(|(a, b)| a - b);
                phase.store(PH_DONE, Ordering::Release);
                break;
            }
        }
    }
    rep.received = (0..slots)
        .filter(|&s| keys[s] != 0)
        .map(|s| (keys[s], got[s]))
        .collect();
    rep.received.sort_unstable();
    rep.wrong_bytes = wrong;
    rep.resets = resets;
    Ok(rep)
}

/// Runs one row.
fn row(rig: &Rig, o: &Options, conns: u32) -> Result<Row> {
    let tables = o.tables.max(conns);
    let ports: Vec<u16> = (0..o.ports).map(|i| PORT + i).collect();
    let ccfg = stack_config(rig.gen_mac, GEN_IP, tables, &[]);
    let scfg = stack_config(rig.rx_mac, RX_IP, tables, &ports);
    let mut cio = Io {
        rx: rig.gen_port.rx_queue(0)?,
        tx: rig.gen_port.tx_queue(0)?,
        pool: rig.gen_plain.for_port(rig.gen_port.id()),
        clock: rig.clock,
    };
    let mut sio = Io {
        rx: rig.rx_port.rx_queue(0)?,
        tx: rig.rx_port.tx_queue(0)?,
        pool: rig.rx_pool.for_port(rig.rx_port.id()),
        clock: rig.clock,
    };
    let phase = Arc::new(AtomicU8::new(PH_CONNECT));
    // The client's byte total once its data phase ended: the receiver drains until it
    // has read as much.
    let total: Arc<Mutex<Option<u64>>> = Arc::new(Mutex::new(None));
    let slot: Arc<Mutex<Option<ClientReport>>> = Arc::new(Mutex::new(None));
    let (ph, sl, tot) = (phase.clone(), slot.clone(), total.clone());
    let (oc, macs) = (o.clone(), (rig.gen_mac, rig.rx_mac));
    let launched = rig.eal.remote_launch(rig.worker, move || {
        let r = run_client(conns, &oc, ccfg, macs, &mut cio, &ph, &tot);
        drop(cio);
        if let Ok(mut s) = sl.lock() {
            *s = Some(r);
        }
        0
    })?;
    let expected = || total.lock().ok().and_then(|g| *g);
    let server = run_server(conns, scfg, &mut sio, &phase, &expected);
    phase.store(PH_DONE, Ordering::Release);
    let code = launched.join();
    drop(sio);
    let server = server?;
    if !matches!(code, Ok(0)) {
        bail!("the client's lcore failed ({code:?})");
    }
    let c = slot
        .lock()
        .map_err(|_| anyhow!("client report lock poisoned"))?
        .take()
        .ok_or_else(|| anyhow!("the client reported nothing"))?;
    rig.drain()?;
    if let Some(e) = &c.error {
        bail!("{conns} connections: {e}");
    }
    check(conns, &c, &server)?;
    let per = |v: Option<isize>| v.map_or(f64::NAN, |b| b as f64 / f64::from(conns));
    let bytes: u64 = c.sent.iter().map(|&(_, b)| b).sum();
    Ok(Row {
        conns,
        tables,
        handshakes_per_s: f64::from(conns) / (c.connect_ns as f64 / 1e9).max(1e-9),
        heap_per_conn: per(server.heap_established),
        heap_per_conn_after: per(server.heap_after),
        rss_per_conn: server
            .rss_established
            .map_or(f64::NAN, |b| b as f64 / f64::from(conns)),
        cycles_per_segment: server.busy_cycles as f64 / (server.segments.max(1)) as f64,
        segments: server.segments,
        bytes,
        messages: c.messages,
        queue_allocs_in_data: server.queue_allocs_in_data,
    })
}

/// Every connection's bytes arrived exact: the same keys on both sides, the same count
/// per key, no wrong byte, no reset.
fn check(conns: u32, c: &ClientReport, s: &ServerReport) -> Result<()> {
    if s.wrong_bytes > 0 {
        bail!(
            "{} bytes differed from their connection's pattern",
            s.wrong_bytes
        );
    }
    if s.resets > 0 {
        bail!("{} connections were reset on the receiver", s.resets);
    }
    if c.sent.len() != conns as usize || s.received.len() != conns as usize {
        bail!(
            "{conns} connections: the client knows {}, the receiver {}",
            c.sent.len(),
            s.received.len()
        );
    }
    let differ = c
        .sent
        .iter()
        .zip(&s.received)
        .filter(|(a, b)| a != b)
        .count();
    if differ > 0 {
        let first = c.sent.iter().zip(&s.received).find(|(a, b)| a != b);
        bail!("{differ} connections' byte counts differ between client and receiver (first: {first:?})");
    }
    Ok(())
}

/// Runs `weir-bench conns`.
pub fn run(o: &Options) -> Result<()> {
    o.validate()?;
    if heap::thread_live().is_none() {
        bail!("this binary does not count its heap (apps::heap::Counting is not its global allocator)");
    }
    let rig = Rig::new("weir-bench-conns", o.memory)?;
    if !o.json {
        println!(
            "weir-bench conns: weir client (worker lcore) -> ring pair -> weir receiver (main lcore), {} listening ports; {} B messages, {} per second round robin over all connections for {:.1} s; every byte checked",
            o.ports, o.message, o.rate, o.seconds
        );
        println!(
            "{:>9} {:>9} {:>12} {:>10} {:>10} {:>10} {:>9} {:>9} {:>11}",
            "conns",
            "tables",
            "handshake/s",
            "heap B/c",
            "after B/c",
            "rss B/c",
            "cyc/seg",
            "x first",
            "bytes"
        );
    }
    let mut first: Option<f64> = None;
    for &conns in &o.conns {
        let r = row(&rig, o, conns)?;
        let base = *first.get_or_insert(r.cycles_per_segment);
        let ratio = r.cycles_per_segment / base;
        if o.json {
            println!(
                "{}",
                json!({
                    "bench": "conns",
                    "conns": r.conns,
                    "tables": r.tables,
                    "ports": o.ports,
                    "message": o.message,
                    "rate": o.rate,
                    "seconds": o.seconds,
                    "handshakes_per_s": r.handshakes_per_s,
                    "heap_per_conn": r.heap_per_conn,
                    "heap_per_conn_after_data": r.heap_per_conn_after,
                    "rss_per_conn": r.rss_per_conn,
                    "cycles_per_segment": r.cycles_per_segment,
                    "cycles_vs_first_row": ratio,
                    "segments": r.segments,
                    "messages": r.messages,
                    "bytes": r.bytes,
                    "queue_storage_allocs_in_data": r.queue_allocs_in_data,
                    "bytes_exact": true,
                })
            );
        } else {
            println!(
                "{:>9} {:>9} {:>12.0} {:>10.0} {:>10.0} {:>10.0} {:>9.0} {:>8.2}x {:>11}",
                r.conns,
                r.tables,
                r.handshakes_per_s,
                r.heap_per_conn,
                r.heap_per_conn_after,
                r.rss_per_conn,
                r.cycles_per_segment,
                ratio,
                r.bytes
            );
        }
    }
    Ok(())
}
