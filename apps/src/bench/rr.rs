//! `weir-bench rr`: request/response transactions between two weir stacks in one process,
//! netperf TCP_RR's shape on weir's own TCP at both ends.
//!
//! The worker lcore runs the client: `conns` connections opened with [`Tcp::connect`],
//! each keeping `burst` transactions in flight (netperf's `-b`, the first column of the
//! ABC field report's table). The main lcore runs `weir-serve --app echo`'s engine on the
//! stack ([`Glue`] with [`Echo`]), or, when the request and response sizes differ, a
//! fixed-size answerer ([`Answer`]). The two are joined by the ring port pair of
//! `weir-bench e2e` (no kernel, no NIC), with checksums computed and verified in software
//! on both sides: nothing is modelled.
//!
//! Every answer is checked byte for byte: the request of transaction `k` on connection `c`
//! is [`rr_bytes::fill`]`(c, k, ..)` and its response repeats the request cyclically, so
//! an echo returns it unchanged. A transaction's latency runs from the moment the stack
//! took the first byte of its request (`Tcp::send`) to the moment the client read the last
//! byte of its response.
//!
//! A case runs in phases: connect (at most [`MAX_HALF_OPEN`] handshakes at a time, below
//! the server's half-open table, so no SYN cookies), a warm-up, the measured phase, a drain
//! (no new requests; every one in flight is answered), and the close (the client half-closes,
//! the echo closes after it). Both lcores snapshot their counters when the measured phase
//! starts and ends (the client announces the phases through an atomic), so the cycles,
//! segments and ACKs per transaction cover the same span on both sides. Cycles are the
//! busy iterations' TSC cycles ([`BusySpan`]: iterations that received or sent something),
//! so idle polling is excluded, as in `weir-bench e2e`.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Result};
use dpdk::{Clock, Mbuf, PortPool, PortRxQueue, PortTxQueue};
use serde_json::json;
use stack::ack::AckPolicy;
use stack::driver::{Burst, TxQueue};
use stack::gro::GroConfig;
use stack::impair::{ImpairConfig, Impairment};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::stats::Stats;
use stack::tcp::cc::CcConfig;
use stack::tcp::{ConnId, ConnectOpts, Event, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::LocalAddrs;

use super::e2e::{Rig, GEN_IP, PORT, RX_IP};
use super::latency::Latency;
use super::rr_bytes;
use crate::busy::BusySpan;
use crate::eal_args::Memory;
use crate::gen::AckCounting;
use crate::net::{copy_mbuf, corrupt_mbuf};
use crate::serve::echo::Echo;
use crate::serve::glue::{ConnEnd, Glue, ServeApp, Tally};
use crate::serve::{App, AppError, Sink};

/// Most handshakes the client has in progress at once: below the server's half-open
/// table (256 by default), so every connection completes a normal handshake.
const MAX_HALF_OPEN: usize = 128;
/// The largest request or response.
pub const MAX_MESSAGE: u32 = 65_536;
/// The most client connections (the issue's range: 1 to 4,096).
pub const MAX_CONNS: u32 = 4096;
/// The most transactions in flight per connection.
pub const MAX_BURST: u32 = 256;
/// How long the drain and the close may take before the case gives up on them.
const END_GRACE: Duration = Duration::from_secs(5);
/// How long the handshakes may take.
const CONNECT_GRACE: Duration = Duration::from_secs(10);

/// The phases the client announces to the server's lcore.
const PH_SETUP: u8 = 0;
const PH_MEASURE: u8 = 1;
const PH_AFTER: u8 = 2;

/// `weir-bench rr`'s options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Client connection counts to run.
    pub conns: Vec<u32>,
    /// Transactions in flight per connection to run.
    pub bursts: Vec<u32>,
    /// Request bytes.
    pub request: u32,
    /// Response bytes.
    pub response: u32,
    /// Seconds of the measured phase per case.
    pub seconds: f64,
    /// Seconds of warm-up before it.
    pub warmup: f64,
    /// Rounds per case (medians are reported).
    pub runs: usize,
    /// Think time in ns between an answer and the request it lets start (0: none), per
    /// connection: the ABC field report's "20 ms gaps between requests".
    pub gap_ns: u64,
    /// GRO on both stacks (weir-sink's default window), or none.
    pub gro: bool,
    /// The GRO flush window in ns.
    pub gro_flush_ns: u64,
    /// The receive ACK policy of both stacks.
    pub ack_policy: AckPolicy,
    /// The senders' ACK counting (both stacks).
    pub ack_counting: AckCounting,
    /// One JSON object per row.
    pub json: bool,
    /// Where DPDK's memory comes from.
    pub memory: Memory,
    /// The most frames each side takes per receive call (`stack::driver::MAX_BURST` at
    /// most): smaller batches let answers leave sooner, at more iterations per frame.
    pub rx_burst: usize,
    /// Impair what each side receives (`--impair`: loss, reordering, duplication,
    /// corruption), with the seed given or a fixed one; each side gets its own stream.
    pub impair: Option<(ImpairConfig, Option<u64>)>,
}

impl Options {
    fn validate(&self) -> Result<()> {
        if !(self.seconds.is_finite() && self.seconds > 0.0) {
            bail!("--seconds {}: give a positive number", self.seconds);
        }
        if self.rx_burst == 0 || self.rx_burst > stack::driver::MAX_BURST {
            bail!(
                "--rx-burst {}: give 1 to {}",
                self.rx_burst,
                stack::driver::MAX_BURST
            );
        }
        if !(self.warmup.is_finite() && self.warmup >= 0.0) {
            bail!("--warmup {}: give zero or a positive number", self.warmup);
        }
        for &c in &self.conns {
            if c == 0 || c > MAX_CONNS {
                bail!("--conns {c}: give 1 to {MAX_CONNS}");
            }
        }
        for &b in &self.bursts {
            if b == 0 || b > MAX_BURST {
                bail!("--burst {b}: give 1 to {MAX_BURST}");
            }
        }
        for (name, v) in [("--request", self.request), ("--response", self.response)] {
            if v == 0 || v > MAX_MESSAGE {
                bail!("{name} {v}: give 1 to {MAX_MESSAGE} bytes");
            }
        }
        Ok(())
    }
}

/// One case's shape.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Client connections.
    pub conns: u32,
    /// Transactions in flight per connection.
    pub burst: u32,
    /// Request bytes.
    pub request: u32,
    /// Response bytes.
    pub response: u32,
}

/// What one side counted over the measured phase.
#[derive(Clone, Debug, Default)]
struct Side {
    busy_cycles: u64,
    data_segments: u64,
    pure_acks: u64,
    piggybacked: u64,
    useless: u64,
    retransmits: u64,
}

impl Side {
    fn between(a: &Stats, b: &Stats, cycles: u64) -> Side {
        Side {
            busy_cycles: cycles,
            data_segments: b.tcp.data_segments_sent - a.tcp.data_segments_sent,
            pure_acks: b.ack.data_acks() - a.ack.data_acks(),
            piggybacked: b.ack.piggybacked - a.ack.piggybacked,
            useless: b.ack.useless - a.ack.useless,
            retransmits: b.tcp.retransmits - a.tcp.retransmits,
        }
    }
}

/// The client's account of one case.
#[derive(Debug, Default)]
struct ClientReport {
    side: Side,
    transactions: u64,
    measured_ns: u64,
    latency: Option<Latency>,
    lost: u64,
    duplicates: u64,
    mismatches: u64,
    resets: u64,
    error: Option<String>,
}

/// One case's figures.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Transactions per second over the measured phase.
    pub tps: f64,
    /// Latency percentiles in ns.
    pub p50: f64,
    #[allow(missing_docs)]
    pub p99: f64,
    #[allow(missing_docs)]
    pub p999: f64,
    /// Transactions completed in the measured phase.
    pub transactions: u64,
    /// Its length in seconds.
    pub seconds: f64,
    /// Busy TSC cycles per transaction, client and server side.
    pub client_cycles: f64,
    #[allow(missing_docs)]
    pub server_cycles: f64,
    /// Data segments per transaction, both directions.
    pub segments: f64,
    /// Pure data ACKs per transaction, both sides.
    pub pure_acks: f64,
    /// ACKs carried by data segments per transaction, both sides.
    pub piggybacked: f64,
    /// Pure ACKs per transaction by side.
    pub client_pure_acks: f64,
    #[allow(missing_docs)]
    pub server_pure_acks: f64,
    /// Useless ACKs per transaction (`AckStats::useless`), both sides.
    pub useless: f64,
    /// Retransmitted segments, both sides.
    pub retransmits: u64,
    /// Transactions never answered.
    pub lost: u64,
    /// Bytes no request asked for.
    pub duplicates: u64,
    /// Answers with a wrong byte (and server engine errors).
    pub mismatches: u64,
}

/// The client's view of one connection.
struct CConn {
    id: Option<ConnId>,
    open: bool,
    /// The request being written and how many of its bytes the stack took.
    next_req: u64,
    req_off: u32,
    /// The TSC when each request in flight started, oldest first.
    sent_at: VecDeque<u64>,
    /// The transaction whose response is being read, and its bytes read.
    answered: u64,
    resp_off: u32,
    /// The transaction being read had a wrong byte.
    bad: bool,
    /// The peer's FIN came after our half-close: the close is done on both sides (the
    /// connection waits in TIME-WAIT).
    peer_closed: bool,
    /// Requests it may start now (with a think time: one per answer, once the time has
    /// passed; without one, `burst`, always).
    credits: u32,
}

/// The client lcore's state.
struct Client {
    shape: Shape,
    p: Pipeline<Mbuf>,
    conns: Vec<CConn>,
    /// Connection index by the handle's slot.
    by_slot: Vec<u32>,
    scratch: Vec<u8>,
    connecting: usize,
    next_connect: u32,
    opened: u32,
    issuing: bool,
    local_mac: [u8; 6],
    peer_mac: [u8; 6],
    policy: AckPolicy,
    measuring: bool,
    /// The think time between an answer and the request it lets start, in TSC cycles
    /// (0: none), and the credits waiting for it: `(due, connection)`, in due order.
    gap_tsc: u64,
    thinking: VecDeque<(u64, u32)>,
    latency: Latency,
    done_in_window: u64,
    duplicates: u64,
    mismatches: u64,
    resets: u64,
    failure: Option<String>,
}

impl Client {
    fn conn_of(&self, id: ConnId) -> Option<usize> {
        let k = *self.by_slot.get(id.index() as usize)?;
        let c = self.conns.get(k as usize)?;
        (c.id == Some(id)).then_some(k as usize)
    }

    fn admit(&mut self, now: Instant) {
        while self.connecting < MAX_HALF_OPEN && self.next_connect < self.shape.conns {
            let k = self.next_connect as usize;
            let mut opts = ConnectOpts::new(self.local_mac, self.peer_mac);
            opts.ack = self.policy;
            let remote = SocketAddr::new(IpAddr::V4(RX_IP), PORT);
            match self.p.tcp().connect(now, IpAddr::V4(GEN_IP), remote, opts) {
                Ok(id) => {
                    let slot = id.index() as usize;
                    if slot >= self.by_slot.len() {
                        self.by_slot.resize(slot + 1, u32::MAX);
                    }
                    self.by_slot[slot] = k as u32;
                    self.conns[k].id = Some(id);
                    self.connecting += 1;
                    self.next_connect += 1;
                }
                Err(e) => {
                    self.failure = Some(format!("connect {k}: {e}"));
                    return;
                }
            }
        }
    }

    /// Writes requests on connection `k` until `burst` are in flight (or the send buffer
    /// or the pool cuts a write short: `Event::Writable` resumes it).
    fn issue(&mut self, now: Instant, k: usize, pool: &mut PortPool) {
        let (q, b) = (self.shape.request, self.shape.burst as usize);
        loop {
            let c = &self.conns[k];
            let Some(id) = c.id else { return };
            if !c.open {
                return;
            }
            let partial = c.req_off > 0;
            if !partial && (!self.issuing || c.sent_at.len() >= b || c.credits == 0) {
                return;
            }
            let (txn, off) = (c.next_req, c.req_off);
            let len = (q - off) as usize;
            rr_bytes::fill(k as u64, txn, off as usize, &mut self.scratch[..len]);
            let n = match self.p.tcp().send(now, id, &self.scratch[..len], pool) {
                Ok(n) => n,
                Err(e) => {
                    self.failure = Some(format!("send on connection {k}: {e}"));
                    return;
                }
            };
            let c = &mut self.conns[k];
            if n > 0 && off == 0 {
                c.sent_at.push_back(Clock::cycles());
                if self.gap_tsc > 0 {
                    c.credits -= 1;
                }
            }
            c.req_off += n as u32;
            if c.req_off == q {
                c.next_req += 1;
                c.req_off = 0;
            } else {
                return;
            }
        }
    }

    /// Reads connection `k`'s answers; returns the transactions completed.
    fn read(&mut self, k: usize) -> u64 {
        let Some(id) = self.conns[k].id else { return 0 };
        let (q, r) = (self.shape.request as usize, self.shape.response);
        let now_tsc = Clock::cycles();
        let c = &mut self.conns[k];
        let (lat, measuring) = (&mut self.latency, self.measuring);
        let (gap, thinking) = (self.gap_tsc, &mut self.thinking);
        let (mut done, mut dup, mut bad) = (0u64, 0u64, 0u64);
        let res = self.p.tcp().recv(id, |slices| {
            let mut taken = 0usize;
            for s in slices {
                let mut bytes = s.bytes();
                taken += bytes.len();
                while !bytes.is_empty() {
                    if c.sent_at.is_empty() {
                        // Bytes no request asked for.
                        dup += bytes.len() as u64;
                        break;
                    }
                    let want = (r - c.resp_off) as usize;
                    let n = want.min(bytes.len());
                    if !c.bad
                        && !answer_matches(
                            k as u64,
                            c.answered,
                            c.resp_off as usize,
                            q,
                            &bytes[..n],
                        )
                    {
                        c.bad = true;
                    }
                    c.resp_off += n as u32;
                    bytes = &bytes[n..];
                    if c.resp_off == r {
                        let t0 = c.sent_at.pop_front().unwrap_or(now_tsc);
                        if measuring {
                            lat.record(now_tsc.saturating_sub(t0));
                        }
                        if c.bad {
                            bad += 1;
                        }
                        c.bad = false;
                        if gap > 0 {
                            thinking.push_back((now_tsc + gap, k as u32));
                        }
                        c.answered += 1;
                        c.resp_off = 0;
                        done += 1;
                    }
                }
            }
            taken
        });
        if res.is_err() {
            return 0;
        }
        self.duplicates += dup;
        self.mismatches += bad;
        if measuring {
            self.done_in_window += done;
        }
        done
    }

    fn events(&mut self, now: Instant, pool: &mut PortPool) {
        while let Some(ev) = self.p.tcp().poll_event() {
            match ev {
                Event::Opened(id) => {
                    let Some(k) = self.conn_of(id) else { continue };
                    self.connecting = self.connecting.saturating_sub(1);
                    self.opened += 1;
                    self.conns[k].open = true;
                    let _ = self.p.tcp().set_nodelay(id, true);
                    self.issue(now, k, pool);
                }
                Event::Readable(id) => {
                    let Some(k) = self.conn_of(id) else { continue };
                    if self.read(k) > 0 {
                        self.issue(now, k, pool);
                    }
                }
                Event::Writable(id) => {
                    if let Some(k) = self.conn_of(id) {
                        self.issue(now, k, pool);
                    }
                }
                Event::PeerClosed(id) => {
                    if let Some(k) = self.conn_of(id) {
                        self.read(k);
                        self.conns[k].peer_closed = true;
                    }
                }
                Event::Closed(id) => {
                    if let Some(k) = self.conn_of(id) {
                        self.conns[k].open = false;
                        self.conns[k].id = None;
                    }
                }
                Event::Reset(id) => {
                    if let Some(k) = self.conn_of(id) {
                        if !self.conns[k].open {
                            self.connecting = self.connecting.saturating_sub(1);
                        }
                        self.conns[k].open = false;
                        self.conns[k].id = None;
                        self.resets += 1;
                    }
                }
            }
        }
    }

    /// Gives back the credits whose think time has passed, and starts their requests.
    fn think(&mut self, now: Instant, pool: &mut PortPool) {
        let t = Clock::cycles();
        while let Some(&(due, k)) = self.thinking.front() {
            if due > t {
                break;
            }
            self.thinking.pop_front();
            self.conns[k as usize].credits += 1;
            self.issue(now, k as usize, pool);
        }
    }

    fn in_flight(&self) -> u64 {
        self.conns
            .iter()
            .map(|c| c.sent_at.len() as u64 + u64::from(c.req_off > 0))
            .sum()
    }

    /// Connections whose close has not finished on both sides: gone, or past the peer's
    /// FIN after ours (TIME-WAIT, whose `Event::Closed` comes only after 2 MSL) count as
    /// finished.
    fn still_open(&self) -> usize {
        self.conns
            .iter()
            .filter(|c| c.id.is_some() && !c.peer_closed)
            .count()
    }
}

/// Whether `got` is bytes `off..` of the response of transaction `txn` on connection
/// `conn`: the request (`q` bytes) repeated.
fn answer_matches(conn: u64, txn: u64, off: usize, q: usize, got: &[u8]) -> bool {
    let (mut off, mut got) = (off, got);
    while !got.is_empty() {
        let at = off % q;
        let n = (q - at).min(got.len());
        if !rr_bytes::matches(conn, txn, at, &got[..n]) {
            return false;
        }
        off += n;
        got = &got[n..];
    }
    true
}

/// One lcore's queues, pool and clock, and the impairment of what it receives.
struct ClientIo {
    rx: PortRxQueue,
    tx: PortTxQueue,
    pool: PortPool,
    clock: Clock,
    impair: Option<Impairment<Mbuf>>,
    /// The most frames one receive call takes.
    rx_max: usize,
}

impl ClientIo {
    /// Receives a burst into `out` (through the impairment stage when there is one);
    /// returns the frames received from the port.
    fn receive(&mut self, now: Instant, out: &mut Burst<Mbuf>) -> usize {
        let n = self.rx.rx_burst_max(out, self.rx_max);
        if let Some(imp) = self.impair.as_mut() {
            let pool = self.pool.mempool();
            for b in out.drain(..) {
                imp.push_with(now, b, |m| copy_mbuf(pool, m), corrupt_mbuf);
            }
            while !out.is_full() {
                match imp.pop_ready(now) {
                    Some(b) => out.push(b),
                    None => break,
                }
            }
        }
        n
    }
}

/// Runs the client's phases; sets `phase` as it goes.
fn run_client(
    shape: Shape,
    cfg: PipelineConfig,
    macs: ([u8; 6], [u8; 6]),
    policy: AckPolicy,
    times: (f64, f64, u64),
    io: &mut ClientIo,
    phase: &AtomicU8,
) -> ClientReport {
    let p = match Pipeline::new(cfg) {
        Ok(p) => p,
        Err(e) => {
            return ClientReport {
                error: Some(format!("cannot set up the client's TCP: {e}")),
                ..ClientReport::default()
            }
        }
    };
    let n = shape.conns as usize;
    let mut cl = Client {
        shape,
        p,
        conns: (0..n)
            .map(|_| CConn {
                id: None,
                open: false,
                next_req: 0,
                req_off: 0,
                sent_at: VecDeque::with_capacity(shape.burst as usize),
                answered: 0,
                resp_off: 0,
                bad: false,
                credits: shape.burst,
                peer_closed: false,
            })
            .collect(),
        by_slot: vec![u32::MAX; n],
        scratch: vec![0u8; shape.request as usize],
        connecting: 0,
        next_connect: 0,
        opened: 0,
        issuing: true,
        local_mac: macs.0,
        peer_mac: macs.1,
        policy,
        measuring: false,
        gap_tsc: (times.2 as u128 * u128::from(io.clock.hz()) / 1_000_000_000) as u64,
        thinking: VecDeque::with_capacity(n * shape.burst as usize),
        latency: Latency::new(),
        done_in_window: 0,
        duplicates: 0,
        mismatches: 0,
        resets: 0,
        failure: None,
    };
    let (mut rxb, mut txb): (Burst<Mbuf>, Burst<Mbuf>) = (Burst::new(), Burst::new());
    let mut span = BusySpan::default();
    let mut busy = 0u64;
    let start = io.clock.now();
    let (warm, secs) = (
        Duration::from_nanos((times.0 * 1e9) as u64),
        Duration::from_nanos((times.1 * 1e9) as u64),
    );
    let mut stage = 0u8; // 0 connect, 1 warm-up, 2 measure, 3 drain, 4 close
    let mut until = start + CONNECT_GRACE;
    let mut snap: Option<(Stats, u64, Instant)> = None;
    let mut report = ClientReport::default();
    let mut iter = 0u64;
    loop {
        let t0 = Clock::cycles();
        busy += span.close(t0);
        let now = io.clock.instant_at(t0);
        let got = io.receive(now, &mut rxb);
        cl.p.handle_rx_burst(now, &mut rxb);
        cl.events(now, &mut io.pool);
        cl.p.handle_timeout(now);
        cl.events(now, &mut io.pool);
        if cl.next_connect < shape.conns {
            cl.admit(now);
        }
        if !cl.thinking.is_empty() {
            cl.think(now, &mut io.pool);
        }
        let sent = cl.p.poll_tx(now, &mut io.pool, &mut txb);
        if !txb.is_empty() {
            io.tx.tx_burst(&mut txb);
        }
        if got > 0 || sent > 0 {
            span.busy(t0);
        }
        iter += 1;
        if iter % 64 != 0 {
            continue;
        }
        if let Some(f) = cl.failure.take() {
            report.error = Some(f);
            break;
        }
        match stage {
            0 if cl.opened == shape.conns => {
                stage = 1;
                until = now + warm;
            }
            0 if now >= until || cl.resets > 0 => {
                report.error = Some(format!(
                    "{} of {} connections opened ({} refused or reset)",
                    cl.opened, shape.conns, cl.resets
                ));
                break;
            }
            1 if now >= until => {
                stage = 2;
                until = now + secs;
                busy += span.close(Clock::cycles());
                snap = Some((cl.p.stats(), busy, now));
                cl.measuring = true;
                phase.store(PH_MEASURE, Ordering::Release);
            }
            2 if now >= until => {
                stage = 3;
                until = now + END_GRACE;
                busy += span.close(Clock::cycles());
                cl.measuring = false;
                phase.store(PH_AFTER, Ordering::Release);
                if let Some((a, c0, t)) = snap.take() {
                    report.side = Side::between(&a, &cl.p.stats(), busy - c0);
                    report.measured_ns = now.saturating_since(t).as_nanos();
                }
                cl.issuing = false;
            }
            3 if cl.in_flight() == 0 || now >= until => {
                stage = 4;
                until = now + END_GRACE;
                for k in 0..cl.conns.len() {
                    if let Some(id) = cl.conns[k].id {
                        let _ = cl.p.tcp().shutdown(now, id);
                    }
                }
            }
            4 if cl.still_open() == 0 || now >= until => break,
            _ => {}
        }
        if stage < 4 && cl.resets > 0 {
            report.error = Some(format!("{} connections were reset mid-run", cl.resets));
            break;
        }
    }
    if report.error.is_some() {
        phase.store(PH_AFTER, Ordering::Release);
    }
    report.transactions = cl.done_in_window;
    report.lost = cl.in_flight();
    report.duplicates = cl.duplicates;
    report.mismatches = cl.mismatches;
    report.resets = cl.resets;
    report.latency = Some(std::mem::take(&mut cl.latency));
    report
}

/// A fixed-size answerer: per request of `request` bytes, `response` bytes that repeat
/// the request (the first `min(request, response)` bytes of each request are kept).
#[derive(Debug)]
pub struct Answer {
    keep: Vec<u8>,
    got: u32,
    /// Response bytes of the current answer written so far (`None`: not answering).
    writing: Option<u32>,
    peer_closed: bool,
    answers: u64,
}

/// [`Answer`]'s sizes.
#[derive(Clone, Copy, Debug)]
pub struct AnswerConfig {
    /// Request bytes.
    pub request: u32,
    /// Response bytes.
    pub response: u32,
}

impl Answer {
    fn write_answer<S: Sink + ?Sized>(&mut self, cfg: &AnswerConfig, out: &mut S) {
        let q = self.keep.len().max(1);
        while let Some(w) = self.writing {
            let mut chunk = [0u8; 1024];
            let left = (cfg.response - w) as usize;
            let n = left.min(chunk.len());
            for (i, b) in chunk[..n].iter_mut().enumerate() {
                *b = self.keep[(w as usize + i) % q];
            }
            let took = out.write(&chunk[..n]);
            let w = w + took as u32;
            self.writing = (w < cfg.response).then_some(w);
            if self.writing.is_none() {
                self.answers += 1;
            }
            if took < n {
                return;
            }
        }
    }
}

impl App for Answer {
    type Server = AnswerConfig;

    fn accept(server: &mut AnswerConfig, _now: Instant, _token: u64) -> Self {
        Answer {
            keep: Vec::with_capacity(server.request.min(server.response) as usize),
            got: 0,
            writing: None,
            peer_closed: false,
            answers: 0,
        }
    }

    fn on_data<S: Sink + ?Sized>(
        &mut self,
        server: &mut AnswerConfig,
        _now: Instant,
        input: &[u8],
        out: &mut S,
    ) -> Result<usize, AppError> {
        let keep = server.request.min(server.response) as usize;
        let mut used = 0;
        while used < input.len() {
            if self.writing.is_some() {
                self.write_answer(server, out);
                if self.writing.is_some() {
                    break;
                }
                self.keep.clear();
                self.got = 0;
            }
            let n = ((server.request - self.got) as usize).min(input.len() - used);
            let room = keep.saturating_sub(self.keep.len()).min(n);
            self.keep.extend_from_slice(&input[used..used + room]);
            self.got += n as u32;
            used += n;
            if self.got == server.request {
                self.writing = Some(0);
                self.write_answer(server, out);
                if self.writing.is_none() {
                    self.keep.clear();
                    self.got = 0;
                }
            }
        }
        Ok(used)
    }

    fn poll_output<S: Sink + ?Sized>(
        &mut self,
        server: &mut AnswerConfig,
        _now: Instant,
        out: &mut S,
    ) -> Result<(), AppError> {
        self.write_answer(server, out);
        if self.writing.is_none() && self.got == server.request {
            self.keep.clear();
            self.got = 0;
        }
        Ok(())
    }

    fn on_peer_closed(&mut self, _server: &mut AnswerConfig, _now: Instant) {
        self.peer_closed = true;
    }

    fn output_pending(&self, _server: &AnswerConfig) -> bool {
        self.writing.is_some()
    }

    fn wants_close(&self, _server: &AnswerConfig) -> bool {
        self.peer_closed && self.writing.is_none()
    }
}

impl ServeApp for Answer {
    fn tally(&mut self, _server: &mut AnswerConfig, t: &mut Tally, _end: &ConnEnd) {
        t.add("answers", self.answers);
    }
}

/// The server lcore's account of one case.
#[derive(Debug, Default)]
struct ServerReport {
    side: Side,
    open_at_stop: u64,
    app_errors: u64,
}

/// Runs the server (`A` on the stack) until `stop`, snapshotting its counters as `phase`
/// moves into and out of the measured phase.
fn run_server<A: ServeApp>(
    server: A::Server,
    cfg: PipelineConfig,
    io: &mut ClientIo,
    phase: &AtomicU8,
    stop: &AtomicBool,
) -> Result<ServerReport> {
    let max_conns = cfg.tcp.max_conns;
    let mut p: Pipeline<Mbuf> =
        Pipeline::new(cfg).map_err(|e| anyhow!("cannot set up the server's TCP: {e}"))?;
    let mut glue = Glue::<A>::new(server, max_conns, true);
    let (mut rxb, mut txb): (Burst<Mbuf>, Burst<Mbuf>) = (Burst::new(), Burst::new());
    let mut span = BusySpan::default();
    let mut busy = 0u64;
    let mut seen = PH_SETUP;
    let mut snap: Option<(Stats, u64)> = None;
    let mut report = ServerReport::default();
    let mut iter = 0u64;
    let mut now;
    loop {
        let t0 = Clock::cycles();
        busy += span.close(t0);
        now = io.clock.instant_at(t0);
        let got = io.receive(now, &mut rxb);
        p.handle_rx_burst(now, &mut rxb);
        glue.serve(p.tcp(), &mut io.pool, now);
        p.handle_timeout(now);
        glue.serve(p.tcp(), &mut io.pool, now);
        let sent = p.poll_tx(now, &mut io.pool, &mut txb);
        if !txb.is_empty() {
            io.tx.tx_burst(&mut txb);
        }
        if got > 0 || sent > 0 {
            span.busy(t0);
        }
        iter += 1;
        if iter % 64 != 0 {
            continue;
        }
        let ph = phase.load(Ordering::Acquire);
        if ph != seen {
            busy += span.close(Clock::cycles());
            if ph == PH_MEASURE {
                snap = Some((p.stats(), busy));
            } else if let Some((a, c0)) = snap.take() {
                report.side = Side::between(&a, &p.stats(), busy - c0);
            }
            seen = ph;
        }
        if stop.load(Ordering::Acquire) {
            break;
        }
    }
    p.flush_gro(now);
    glue.serve(p.tcp(), &mut io.pool, now);
    glue.stop(p.tcp(), now);
    glue.serve(p.tcp(), &mut io.pool, now);
    for _ in 0..64 {
        now = io.clock.now();
        p.poll_tx(now, &mut io.pool, &mut txb);
        if !txb.is_empty() {
            io.tx.tx_burst(&mut txb);
        }
        if txb.is_empty() {
            break;
        }
    }
    txb.clear();
    let c = glue.counts();
    report.open_at_stop = c.open_at_stop;
    report.app_errors = c.app_errors;
    Ok(report)
}

/// A stack's pipeline for one side of the bench.
fn side_config(
    mac: [u8; 6],
    ip: std::net::Ipv4Addr,
    o: &Options,
    shape: Shape,
    listen: bool,
) -> PipelineConfig {
    let counting = o.ack_counting.to_stack();
    PipelineConfig {
        local: LocalAddrs::new(mac, Some(ip), None),
        gro: o.gro.then(|| GroConfig {
            flush_ns: Duration::from_nanos(o.gro_flush_ns),
            max_flows: 4096,
            ..GroConfig::default()
        }),
        tcp: TcpConfig {
            max_conns: (shape.conns as usize).max(64) + 64,
            seed: 0x7272_0000 ^ u64::from(shape.conns) ^ u64::from(listen),
            cc: CcConfig {
                counting,
                ..CcConfig::default()
            },
            ..TcpConfig::default()
        },
        listen: if listen {
            vec![(PORT, o.ack_policy)]
        } else {
            Vec::new()
        },
        tx_csum_offload: false,
    }
}

/// Runs one case: the client on the worker lcore, the server here.
pub(crate) fn case(rig: &Rig, o: &Options, shape: Shape) -> Result<Sample> {
    let phase = Arc::new(AtomicU8::new(PH_SETUP));
    let stop = Arc::new(AtomicBool::new(false));
    let slot: Arc<Mutex<Option<ClientReport>>> = Arc::new(Mutex::new(None));
    let mut cio = ClientIo {
        rx: rig.gen_port.rx_queue(0)?,
        tx: rig.gen_port.tx_queue(0)?,
        pool: rig.gen_plain.for_port(rig.gen_port.id()),
        clock: rig.clock,
        impair: o
            .impair
            .map(|(c, seed)| Impairment::new(c, seed.unwrap_or(0x5eed) ^ 0xc1)),
        rx_max: o.rx_burst,
    };
    let mut sio = ClientIo {
        rx: rig.rx_port.rx_queue(0)?,
        tx: rig.rx_port.tx_queue(0)?,
        pool: rig.rx_pool.for_port(rig.rx_port.id()),
        clock: rig.clock,
        impair: o
            .impair
            .map(|(c, seed)| Impairment::new(c, seed.unwrap_or(0x5eed) ^ 0x5e)),
        rx_max: o.rx_burst,
    };
    let ccfg = side_config(rig.gen_mac, GEN_IP, o, shape, false);
    let scfg = side_config(rig.rx_mac, RX_IP, o, shape, true);
    let macs = (rig.gen_mac, rig.rx_mac);
    let (policy, times) = (o.ack_policy, (o.warmup, o.seconds, o.gap_ns));
    let (ph, st, sl) = (phase.clone(), stop.clone(), slot.clone());
    let launched = rig.eal.remote_launch(rig.worker, move || {
        let r = run_client(shape, ccfg, macs, policy, times, &mut cio, &ph);
        drop(cio);
        if let Ok(mut s) = sl.lock() {
            *s = Some(r);
        }
        st.store(true, Ordering::Release);
        0
    })?;
    let server = if shape.request == shape.response {
        run_server::<Echo>((), scfg, &mut sio, &phase, &stop)
    } else {
        run_server::<Answer>(
            AnswerConfig {
                request: shape.request,
                response: shape.response,
            },
            scfg,
            &mut sio,
            &phase,
            &stop,
        )
    };
    stop.store(true, Ordering::Release);
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
        bail!(
            "{} connections x {} in flight: {e}",
            shape.conns,
            shape.burst
        );
    }
    if c.transactions == 0 {
        bail!(
            "{} connections x {} in flight: no transaction completed in the measured phase",
            shape.conns,
            shape.burst
        );
    }
    let lat = c.latency.unwrap_or_default();
    let ns = |cyc: u64| rig.clock.cycles_to_ns(cyc) as f64;
    let t = c.transactions as f64;
    let secs = (c.measured_ns as f64 / 1e9).max(1e-9);
    let (cs, ss) = (&c.side, &server.side);
    Ok(Sample {
        tps: t / secs,
        p50: ns(lat.quantile(0.5)),
        p99: ns(lat.quantile(0.99)),
        p999: ns(lat.quantile(0.999)),
        transactions: c.transactions,
        seconds: secs,
        client_cycles: cs.busy_cycles as f64 / t,
        server_cycles: ss.busy_cycles as f64 / t,
        segments: (cs.data_segments + ss.data_segments) as f64 / t,
        pure_acks: (cs.pure_acks + ss.pure_acks) as f64 / t,
        piggybacked: (cs.piggybacked + ss.piggybacked) as f64 / t,
        client_pure_acks: cs.pure_acks as f64 / t,
        server_pure_acks: ss.pure_acks as f64 / t,
        useless: (cs.useless + ss.useless) as f64 / t,
        retransmits: cs.retransmits + ss.retransmits,
        lost: c.lost,
        duplicates: c.duplicates,
        mismatches: c.mismatches + server.app_errors,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs `weir-bench rr`.
pub fn run(o: &Options) -> Result<()> {
    o.validate()?;
    let rig = Rig::new("weir-bench-rr", o.memory)?;
    let runs = o.runs.max(1);
    if !o.json {
        println!(
            "weir-bench rr: weir client (worker lcore) -> ring pair -> weir echo server (main lcore); {} B requests, {} B responses, GRO {}, ACK policy {}, ACK counting {}, software checksums both ways, think time {} ns; medians of {runs} rounds of {:.1} s",
            o.request,
            o.response,
            if o.gro { format!("on ({} ns)", o.gro_flush_ns) } else { "off".into() },
            o.ack_policy,
            o.ack_counting,
            o.gap_ns,
            o.seconds
        );
        println!(
            "{:>6} {:>6} {:>12} {:>9} {:>9} {:>9} {:>11} {:>11} {:>8} {:>8} {:>8} {:>8}  clean",
            "conns",
            "burst",
            "txn/s",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "cli cyc/txn",
            "srv cyc/txn",
            "seg/txn",
            "pure/txn",
            "pigg/txn",
            "usel/txn"
        );
    }
    for &conns in &o.conns {
        for &burst in &o.bursts {
            let shape = Shape {
                conns,
                burst,
                request: o.request,
                response: o.response,
            };
            let mut samples = Vec::with_capacity(runs);
            for _ in 0..runs {
                samples.push(case(&rig, o, shape)?);
            }
            print_row(o, shape, &samples);
        }
    }
    Ok(())
}

fn print_row(o: &Options, shape: Shape, s: &[Sample]) {
    let m = |f: fn(&Sample) -> f64| median(s.iter().map(f).collect());
    let sum = |f: fn(&Sample) -> u64| s.iter().map(f).sum::<u64>();
    let (lost, dup, bad) = (
        sum(|x| x.lost),
        sum(|x| x.duplicates),
        sum(|x| x.mismatches),
    );
    let clean = lost == 0 && dup == 0 && bad == 0;
    if o.json {
        let row = json!({
            "bench": "rr", "stack": "weir",
            "conns": shape.conns, "burst": shape.burst,
            "request": shape.request, "response": shape.response,
            "transactions": sum(|x| x.transactions), "seconds": m(|x| x.seconds),
            "tps": m(|x| x.tps),
            "p50_ns": m(|x| x.p50), "p99_ns": m(|x| x.p99), "p999_ns": m(|x| x.p999),
            "lost": lost, "duplicates": dup, "mismatches": bad,
            "client_cycles_per_txn": m(|x| x.client_cycles),
            "server_cycles_per_txn": m(|x| x.server_cycles),
            "segments_per_txn": m(|x| x.segments),
            "pure_acks_per_txn": m(|x| x.pure_acks),
            "piggybacked_acks_per_txn": m(|x| x.piggybacked),
            "client_pure_acks_per_txn": m(|x| x.client_pure_acks),
            "server_pure_acks_per_txn": m(|x| x.server_pure_acks),
            "useless_acks_per_txn": m(|x| x.useless),
            "gap_ns": o.gap_ns,
            "retransmits": sum(|x| x.retransmits),
            "gro": o.gro, "gro_flush_ns": o.gro_flush_ns,
            "ack_policy": o.ack_policy.to_string(),
            "ack_counting": o.ack_counting.to_string(),
            "runs": s.len(),
            "rx_burst": o.rx_burst,
        });
        println!("{row}");
    } else {
        println!(
            "{:>6} {:>6} {:>12.0} {:>9.2} {:>9.2} {:>9.2} {:>11.0} {:>11.0} {:>8.2} {:>8.2} {:>8.2} {:>8.3}  {}",
            shape.conns,
            shape.burst,
            m(|x| x.tps),
            m(|x| x.p50) / 1e3,
            m(|x| x.p99) / 1e3,
            m(|x| x.p999) / 1e3,
            m(|x| x.client_cycles),
            m(|x| x.server_cycles),
            m(|x| x.segments),
            m(|x| x.pure_acks),
            m(|x| x.piggybacked),
            m(|x| x.useless),
            if clean {
                "yes".to_string()
            } else {
                format!("NO: {lost} lost, {dup} duplicate bytes, {bad} mismatched")
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::testing::check_every_split;

    #[test]
    fn answers_repeat_the_request() {
        let mut req = vec![0u8; 10];
        rr_bytes::fill(2, 5, 0, &mut req);
        let mut resp = Vec::new();
        for i in 0..25 {
            resp.push(req[i % 10]);
        }
        assert!(answer_matches(2, 5, 0, 10, &resp));
        assert!(answer_matches(2, 5, 7, 10, &resp[7..]));
        assert!(!answer_matches(2, 6, 0, 10, &resp));
    }

    #[test]
    fn the_answerer_answers_every_split() {
        // Two requests of 6 bytes, answered with 15 bytes each (the request repeated) and
        // with 4 (its first 4 bytes).
        let input: Vec<u8> = (1..=12u8).collect();
        let long: Vec<u8> = [&input[..6]; 3].concat()[..15]
            .iter()
            .chain(&[&input[6..]; 3].concat()[..15])
            .copied()
            .collect();
        check_every_split::<Answer>(
            || AnswerConfig {
                request: 6,
                response: 15,
            },
            &input,
            &long,
        );
        let short: Vec<u8> = input[..4].iter().chain(&input[6..10]).copied().collect();
        check_every_split::<Answer>(
            || AnswerConfig {
                request: 6,
                response: 4,
            },
            &input,
            &short,
        );
    }
}
