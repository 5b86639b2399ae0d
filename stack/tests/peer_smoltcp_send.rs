//! smoltcp as the peer of weir's send path: an independent TCP (smoltcp 0.12) in process,
//! Ethernet frames through weir's seeded impairment stage (`stack::impair`: loss,
//! reordering, duplication) in both directions, on a virtual clock (`testkit::smol`).
//!
//! - [`weir_sends_to_smoltcp`]: weir `connect`s to smoltcp listeners (one port each) and
//!   sends each a seeded random byte stream in writes of random sizes (Nagle or
//!   `TCP_NODELAY`, some corked until the last write), while smoltcp reads, some of it
//!   slowly behind a small window. Each connection ends one of three ways ([`End`]):
//!   weir `close`s after its last write; weir `shutdown`s and hears smoltcp's FIN in
//!   FIN-WAIT-2; or smoltcp sends a reply and half-closes first, and weir reads it and
//!   writes on in CLOSE-WAIT. weir's TIME-WAIT (60 s) passes on the virtual clock.
//! - [`smoltcp_to_weir_echo`]: smoltcp clients connect to a weir listener whose
//!   application, on the public API, echoes what it reads (`recv` into a bounded
//!   application buffer, then `send`, or `send_bufs` with buffers of its own cut at random
//!   sizes and offsets), waits for `Event::Writable` when a write comes up short, and
//!   closes after the client's FIN. The clients send, half-close and read every byte back.
//!
//! Each run is 1,000 seeds. A seed picks 1 to 16 connections, their sizes (1 byte to 64
//! KiB, log-uniform), IPv4 or IPv6, timestamps or not, both sides' buffers (smoltcp's
//! receive buffer from 1,500 bytes, weir's from 4 KiB, weir's send buffer from 2 KiB, so
//! flow control, zero windows and `Event::Writable` all occur), Reno or CUBIC and an
//! ACK-counting rule, weir's ACK policy, and the impairment: loss 1%, reordering 2%,
//! duplication 1% for most seeds, loss 5-10% with 5% reordering and 2% duplication for
//! every tenth, none at all for every fiftieth; one-way delay 20 µs to 5 ms.
//!
//! What is asserted (never a time or a rate):
//! - every byte arrives exact and in order, both ways;
//! - every connection opens and closes cleanly on both sides: no `Event::Reset`, no
//!   connection reset (a RST from smoltcp may end a TIME-WAIT, see the first test), and
//!   nothing left in weir's tables, its out-of-order pool or either buffer pool;
//!   the one exception is smoltcp 0.12's own LAST-ACK stall (its lost FIN never
//!   retransmitted after an ACK that does not cover it), recognized on the wire by
//!   `Net::last_ack_stalls`, counted and reported, and scripted in
//!   [`smoltcp_0_12_loses_its_fin_timer_on_an_ack_in_last_ack`];
//! - on the wire: no segment of weir's carries data beyond the window smoltcp advertised,
//!   every frame weir sends parses with valid checksums, smoltcp never acknowledges what
//!   weir did not send;
//! - the counters add up: bytes written = bytes sent as new data = bytes the peer got;
//!   connections opened = closed; ACKs refused as too old (RFC 5961 §5.2) no more than
//!   old ACKs that arrived; no drop reason an honest peer cannot cause ([`BUG_DROPS`]);
//!   a clean link sees no retransmission at all;
//! - across all seeds, the lossy links made weir retransmit, time out and recover fast.
//!
//! Reproducing a failure: the failing seed and its parameters are printed;
//! `WEIR_SEED=N cargo test -p stack --test peer_smoltcp_send` reruns that one seed (in
//! both tests; add the test's name to pick one), and `WEIR_TRACE_PORT=P` prints the frames
//! of the connection whose smoltcp port is `P` (`PEER_PORT + i` in the first test,
//! `CLIENT_PORT + i` in the second). The heavier variants (16 connections each, streams
//! up to 1 MiB, about 1 GB per run) are `#[ignore]`d:
//! `cargo test -p stack --test peer_smoltcp_send -- --ignored`.
//!
//! The last part scripts, on the TCP fixture, each bug these runs found in weir.

use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp::State as SState;

use stack::ack::AckPolicy;
use stack::buf::{BufPool, PayloadChain, PayloadSlice};
use stack::impair::{ImpairConfig, Rng};
use stack::mem::{VecBuf, VecPool};
use stack::tcp::cc::{AckCounting, CcAlgorithm, CcConfig};
use stack::tcp::{ConnId, ConnectOpts, DropReason, Event, TcpConfig, TcpStats};
use stack::time::Duration;
use testkit::frames::{OUR_MAC, PEER_MAC, PORT};
use testkit::smol::{Finished, Net, NetConfig};

/// smoltcp's listening ports in [`weir_sends_to_smoltcp`]: connection `i` goes to
/// `PEER_PORT + i`, so a late duplicate of one connection's SYN can never take the
/// listening socket meant for another.
const PEER_PORT: u16 = 7000;
/// smoltcp's local ports in [`smoltcp_to_weir_echo`]: client `i` uses `CLIENT_PORT + i`.
const CLIENT_PORT: u16 = 49152;
/// smoltcp 0.12's keep-alive interval in the echo test, where smoltcp sends the bulk: it
/// has no persist timer (RFC 9293 §3.8.6.1), so a lost window update from weir would
/// leave it waiting on a zero window for good; weir's answer to a keep-alive carries the
/// window. (Not in the first test, where smoltcp's keep-alives would stand in for weir's
/// own zero-window probing, and where smoltcp may have unacknowledged data: its
/// keep-alive is a zero byte at SND.NXT - 1 whether or not that byte was acknowledged,
/// which a receiver that never got the real one takes as data.)
const SMOLTCP_KEEPALIVE: smoltcp::time::Duration = smoltcp::time::Duration::from_secs(2);
/// Most loop iterations one seed may take before it counts as stuck.
const MAX_ITERATIONS: u64 = 3_000_000;
/// Most virtual time one seed may take (TIME-WAIT is 60 s; SYN retries take about 127 s).
const MAX_VIRTUAL: Duration = Duration::from_secs(3600);

/// Drop reasons an honest peer never causes, whatever the link does to its frames: each
/// means weir refused something it should have taken, or lost track of a connection.
/// (Left out: PAWS, out-of-window, beyond-window, SYN-in-window and the RST and
/// challenge reasons, which late duplicates legitimately produce; the listener's
/// reasons, which a late duplicate reaching a connection that is already gone produces.)
/// `BadAck` is checked apart: RFC 5961 §5.2 drops an ACK more than MAX.SND.WND older than
/// SND.UNA, which reordering produces once a small window has moved on.
const BUG_DROPS: &[DropReason] = &[
    DropReason::NoAck,
    DropReason::OooConnLimit,
    DropReason::OooCoreLimit,
    DropReason::RxQueueFull,
    DropReason::DataAfterFin,
    DropReason::DataAfterClose,
    DropReason::ConnTableFull,
    DropReason::CtlQueueFull,
    DropReason::EventQueueFull,
    DropReason::FinRetriesExhausted,
    DropReason::SynAckRetriesExhausted,
    DropReason::SynRetriesExhausted,
    DropReason::RetriesExhausted,
    DropReason::PersistTimeout,
];

/// How big a run is.
#[derive(Clone, Copy, Debug)]
struct Scale {
    /// Connections: 1..=max, or exactly max with `fixed`.
    max_conns: u64,
    fixed: bool,
    /// The largest stream, bytes (sizes are log-uniform from 1 byte).
    max_bytes: u64,
}

const DEFAULT: Scale = Scale {
    max_conns: 16,
    fixed: false,
    max_bytes: 64 * 1024,
};

const HEAVY: Scale = Scale {
    max_conns: 16,
    fixed: true,
    max_bytes: 1 << 20,
};

/// How a connection of the first test ends.
///
/// smoltcp 0.12 idles its retransmission timer on any ACK in CLOSE-WAIT and on one that
/// does not cover its FIN in LAST-ACK and CLOSING (`socket/tcp.rs`, `process`:
/// `set_for_idle`), so data it sends after weir's FIN, or a FIN of its own lost after
/// such an ACK, is never retransmitted. So smoltcp sends data only before it closes,
/// never in CLOSE-WAIT.
#[derive(Clone, Copy, Debug)]
enum End {
    /// weir `close`s after its last write (FIN-WAIT, TIME-WAIT); smoltcp closes on weir's
    /// FIN.
    Close,
    /// weir `shutdown`s after its last write; smoltcp closes on weir's FIN, and weir
    /// hears it in FIN-WAIT-2 (`Event::PeerClosed`), then `close`s (TIME-WAIT).
    Shutdown,
    /// smoltcp sends a reply of this many bytes at once and half-closes; weir reads it,
    /// hears the FIN (CLOSE-WAIT) while still writing, writes the rest and `close`s
    /// (LAST-ACK); smoltcp reads everything in FIN-WAIT-2.
    PeerFirst(usize),
}

/// One connection's plan.
#[derive(Clone, Debug)]
struct Plan {
    /// Bytes the sender writes.
    size: usize,
    /// Largest single write.
    max_write: usize,
    /// weir side: `TCP_NODELAY`.
    nodelay: bool,
    /// weir side: corked until the last write.
    cork: bool,
    /// First test: how the connection ends.
    end: End,
    /// smoltcp's receive buffer (its window).
    smol_rx: usize,
    /// Most bytes smoltcp's application reads per loop iteration (a slow reader).
    smol_read: usize,
}

/// Everything a seed decides, printed when it fails.
struct Params {
    seed: u64,
    v6: bool,
    timestamps: bool,
    impair: ImpairConfig,
    tcp: TcpConfig,
    policy: AckPolicy,
    /// Echo test: weir answers with `send_bufs` (its own buffers) instead of `send`.
    zero_copy: bool,
    plans: Vec<Plan>,
}

impl fmt::Debug for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {} v6 {} timestamps {} zero_copy {}",
            self.seed, self.v6, self.timestamps, self.zero_copy
        )?;
        writeln!(f, "impairment {:?}", self.impair)?;
        writeln!(f, "weir ACK policy {:?}", self.policy)?;
        writeln!(
            f,
            "weir snd_buf {} snd_slices {} rcv_buf {} cc {:?}",
            self.tcp.snd_buf, self.tcp.snd_slices, self.tcp.rcv_buf, self.tcp.cc
        )?;
        for (i, p) in self.plans.iter().enumerate() {
            writeln!(f, "  conn {i}: {p:?}")?;
        }
        Ok(())
    }
}

fn pick<T: Copy>(rng: &mut Rng, v: &[T]) -> T {
    v[rng.below(v.len() as u64) as usize]
}

/// A log-uniform size in 1..=max.
fn log_size(rng: &mut Rng, max: u64) -> usize {
    let bits = 64 - max.leading_zeros() as u64;
    let top = 1u64 << rng.below(bits + 1);
    (1 + rng.below(top.min(max))) as usize
}

fn params(seed: u64, scale: Scale) -> Params {
    let mut rng = Rng::new(seed ^ 0x736d_6f6c);
    let (loss, reorder, dup) = if seed % 50 == 0 {
        (0, 0, 0)
    } else if seed % 10 == 5 {
        (50_000 + rng.below(50_001) as u32, 50_000, 20_000)
    } else {
        (10_000, 20_000, 10_000)
    };
    let delay = pick(&mut rng, &[20u64, 50, 50, 200, 1000, 5000]);
    let impair = ImpairConfig {
        loss_ppm: loss,
        reorder_ppm: reorder,
        dup_ppm: dup,
        delay: Duration::from_micros(delay),
        reorder_delay: Duration::from_micros(400.max(delay)),
        ..ImpairConfig::default()
    };
    let small_snd = rng.below(3) == 0;
    let cc = CcConfig {
        algorithm: pick(&mut rng, &[CcAlgorithm::Cubic, CcAlgorithm::Reno]),
        counting: pick(
            &mut rng,
            &[
                AckCounting::Bytes,
                AckCounting::Abc { l: 2 },
                AckCounting::Abc { l: 1 },
                AckCounting::PerAck,
            ],
        ),
        ..CcConfig::default()
    };
    let tcp = TcpConfig {
        mtu: 1488,
        seed,
        max_conns: 64,
        snd_buf: if small_snd {
            2048 + rng.below(30 * 1024) as u32
        } else {
            1 << 20
        },
        snd_slices: if small_snd {
            8 + rng.below(120) as usize
        } else {
            1024
        },
        rcv_buf: pick(&mut rng, &[256 * 1024, 256 * 1024, 16 * 1024, 4096]),
        cc,
        ..TcpConfig::default()
    };
    let policy = pick(
        &mut rng,
        &[
            AckPolicy::linux(),
            AckPolicy::rfc5681(),
            AckPolicy::linux().with_quickack_psh_mss(false),
        ],
    );
    let n = if scale.fixed {
        scale.max_conns
    } else {
        1 + rng.below(scale.max_conns)
    };
    let plans = (0..n)
        .map(|_| Plan {
            size: log_size(&mut rng, scale.max_bytes),
            max_write: pick(&mut rng, &[1, 100, 1448, 5000, 65536]),
            nodelay: rng.below(4) == 0,
            cork: rng.below(7) == 0,
            end: match rng.below(3) {
                0 => End::Close,
                1 => End::Shutdown,
                _ => End::PeerFirst(1 + rng.below(3000) as usize),
            },
            smol_rx: pick(&mut rng, &[1500, 4096, 16384, 65535, 65535, 262_144]),
            smol_read: pick(&mut rng, &[64, 1000, 16384, usize::MAX, usize::MAX]),
        })
        .collect();
    Params {
        seed,
        v6: rng.below(4) == 0,
        timestamps: rng.below(3) != 0,
        impair,
        tcp,
        policy,
        zero_copy: rng.below(2) == 0,
        plans,
    }
}

/// The seeded stream of connection `i`.
fn stream(seed: u64, i: usize, len: usize) -> Vec<u8> {
    let mut r = Rng::new(seed.wrapping_mul(1_000_003).wrapping_add(i as u64));
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&r.next_u64().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// How much a smoltcp application reads this turn: its plan's slow `smol_read` until the
/// other side's FIN is in (TIME-WAIT or CLOSING), then everything. By then all the data is
/// in smoltcp's buffer, and a RST (weir answers a stray segment that reaches it after its
/// LAST-ACK, RFC 9293 §3.10.7.1) would make smoltcp discard what is unread
/// (`Socket::reset` clears the buffer, where Linux keeps it for the application).
fn read_budget(state: SState, smol_read: usize) -> usize {
    match state {
        SState::TimeWait | SState::Closing => usize::MAX,
        _ => smol_read,
    }
}

/// smoltcp's reply on connection `i` of the first test (`End::PeerFirst`).
fn reply(seed: u64, i: usize, len: usize) -> Vec<u8> {
    stream(!seed, i, len)
}

fn net_config(p: &Params) -> NetConfig {
    let mut c = NetConfig::new(p.seed, p.impair);
    c.v6 = p.v6;
    c.tcp = p.tcp.clone();
    c
}

/// No loss, reordering or duplication on the link.
fn clean(p: &Params) -> bool {
    p.impair.loss_ppm == 0 && p.impair.reorder_ppm == 0 && p.impair.dup_ppm == 0
}

/// The checks every seed of both tests ends with; `sent` and `received` are weir's
/// application totals.
fn common_checks(p: &Params, net: &Net, sent: usize, received: usize) {
    let n = p.plans.len() as u64;
    let tcp = &net.tcp;
    assert_eq!(tcp.conn_count(), 0, "connections left in the table");
    assert_eq!(tcp.half_open_count(), 0, "half-open entries left");
    assert_eq!(tcp.ooo_bytes(), 0, "out-of-order bytes left");
    assert_eq!(net.in_flight(), 0, "frames left on the link");
    assert_eq!(
        net.beyond_window, 0,
        "data beyond the window: {:?}",
        net.problems
    );
    assert_eq!(net.bad_frames, 0, "unparsable frames: {:?}", net.problems);
    assert_eq!(net.rx_pool_exhausted, 0, "receive pool exhausted");
    let st = tcp.stats();
    assert_eq!(st.conns_opened, n, "connections opened");
    assert_eq!(st.conns_closed, n, "connections closed cleanly");
    assert_eq!(st.conns_reset, 0, "connections reset");
    assert_eq!(st.bytes_written, sent as u64, "bytes written");
    // New data is counted once, when first sent; retransmissions apart.
    assert_eq!(st.bytes_sent, sent as u64, "bytes sent as new data");
    assert_eq!(
        st.bytes_in_order, received as u64,
        "bytes received in order"
    );
    assert!(st.data_segments_sent >= (sent as u64).div_ceil(1448));
    assert!(st.retransmits <= st.bytes_retransmitted);
    assert_eq!(st.send_alloc_failures, 0, "send found the pool empty");
    assert_eq!(
        tcp.ack_stats().alloc_failures,
        0,
        "poll_tx found the pool empty"
    );
    for r in BUG_DROPS {
        assert_eq!(
            st.drops(*r),
            0,
            "drop reason {} from an honest peer",
            r.name()
        );
    }
    assert_eq!(net.acks_beyond_nxt, 0, "{:?}", net.problems);
    assert!(
        st.drops(DropReason::BadAck) <= net.old_acks,
        "{} ACKs refused as out of range, {} older than SND.UNA arrived",
        st.drops(DropReason::BadAck),
        net.old_acks
    );
    if clean(p) {
        assert_eq!(
            (st.retransmits, st.rto_timeouts, st.fast_recoveries),
            (0, 0, 0),
            "a clean link needs no retransmission"
        );
    }
}

/// What each seed contributes to the totals checked at the end.
#[derive(Default)]
struct Totals {
    seeds: u64,
    conns: u64,
    bytes: u64,
    lossy: TcpStats,
    all: TcpStats,
    max_iterations: u64,
    /// `Event::Writable`s the weir applications saw.
    writable: u64,
    /// Connections that ended in smoltcp 0.12's LAST-ACK stall (`Net::last_ack_stalls`),
    /// and the seeds they were in.
    last_ack_stalls: u64,
    stall_seeds: Vec<u64>,
}

impl Totals {
    fn add(&mut self, p: &Params, f: &Finished, bytes: usize, iterations: u64) {
        self.seeds += 1;
        self.conns += p.plans.len() as u64;
        self.bytes += bytes as u64;
        if p.impair.loss_ppm > 0 {
            self.lossy.merge(&f.stats);
        }
        self.all.merge(&f.stats);
        self.max_iterations = self.max_iterations.max(iterations);
    }

    fn report(&self, name: &str) {
        let s = &self.all;
        let drops: Vec<_> = s.drops_iter().filter(|d| d.1 > 0).collect();
        eprintln!(
            "{name}: {} seeds, {} connections, {} bytes; retransmits {} ({} bytes), RTO {}, \
             fast recoveries {}, window probes {}, SACK blocks refused {}, reneging {}, \
             drops {drops:?}; Event::Writable {}; most iterations in one seed {}; \
             smoltcp 0.12 LAST-ACK stalls (its FIN lost, then an ACK idled its timer) {} \
             in seeds {:?}",
            self.seeds,
            self.conns,
            self.bytes,
            s.retransmits,
            s.bytes_retransmitted,
            s.rto_timeouts,
            s.fast_recoveries,
            s.window_probes,
            s.sack_blocks_refused,
            s.reneging,
            self.writable,
            self.max_iterations,
            self.last_ack_stalls,
            self.stall_seeds
        );
    }

    /// Only for a full run: over many seeds, the lossy links exercised weir's recovery,
    /// the small windows its zero-window probing, the small send buffers
    /// `Event::Writable`.
    fn check_coverage(&self) {
        assert!(self.all.window_probes > 0, "no zero-window probe");
        assert!(self.writable > 0, "no Event::Writable");
        let l = &self.lossy;
        assert!(l.retransmits > 0, "no retransmission over the lossy seeds");
        assert!(
            l.rto_timeouts > 0,
            "no retransmission timeout over the lossy seeds"
        );
        assert!(
            l.fast_recoveries > 0,
            "no fast recovery over the lossy seeds"
        );
    }
}

/// The seeds to run: `WEIR_SEED` alone if it is set, else `0..count`.
fn seeds(count: u64) -> (Vec<u64>, bool) {
    match std::env::var("WEIR_SEED") {
        Ok(s) => {
            let n = s
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("WEIR_SEED={s:?}: expected an integer"));
            (vec![n], false)
        }
        Err(_) => ((0..count).collect(), true),
    }
}

/// Runs `one` for each seed; a failing seed is reported with its parameters and how to
/// rerun it before the failure propagates.
fn run_seeds(name: &str, scale: Scale, count: u64, one: fn(&Params, &mut Totals)) {
    let (list, full) = seeds(count);
    let mut totals = Totals::default();
    for seed in list {
        let p = params(seed, scale);
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| one(&p, &mut totals))) {
            eprintln!(
                "{name}: seed {seed} failed; rerun with \
                 WEIR_SEED={seed} cargo test -p stack --test peer_smoltcp_send {name}\n{p:?}"
            );
            resume_unwind(e);
        }
    }
    totals.report(name);
    if full {
        totals.check_coverage();
    }
}

/// Fails a stuck seed with everything both sides know.
fn stuck(net: &Net, ids: impl Iterator<Item = ConnId>, iterations: u64, what: &str) -> ! {
    let mut conns = String::new();
    for id in ids {
        if let Some(i) = net.tcp.info(id) {
            conns += &format!("weir {i:?} readable {}\n", net.tcp.readable_bytes(id));
        }
    }
    panic!(
        "no progress after {iterations} iterations ({what})\n{}{conns}",
        net.describe()
    )
}

// ---------------------------------------------------------------------------------------
// weir sends to smoltcp.
// ---------------------------------------------------------------------------------------

/// weir's side of one connection of the first test.
struct Sender {
    id: ConnId,
    data: Vec<u8>,
    written: usize,
    rng: Rng,
    ended: bool,
    closed_called: bool,
    reply: Vec<u8>,
    peer_closed: bool,
    closed: bool,
}

/// smoltcp's side of one connection of the first test.
struct Receiver {
    h: SocketHandle,
    got: Vec<u8>,
    /// `End::PeerFirst`: the reply and how much of it smoltcp took.
    reply: Vec<u8>,
    replied: usize,
    closed: bool,
}

fn weir_sends(p: &Params, totals: &mut Totals) {
    let mut net = Net::new(&net_config(p));
    let peer = net.peer_addr();
    let mut senders = Vec::new();
    let mut rx = Vec::new();
    let mut by_id: HashMap<ConnId, usize> = HashMap::new();
    for (i, plan) in p.plans.iter().enumerate() {
        let h = net.add_socket(plan.smol_rx, 64 * 1024, p.timestamps);
        net.socket(h)
            .listen(PEER_PORT + i as u16)
            .expect("smoltcp listen");
        let reply = match plan.end {
            End::PeerFirst(len) => self::reply(p.seed, i, len),
            _ => Vec::new(),
        };
        rx.push(Receiver {
            h,
            got: Vec::new(),
            reply,
            replied: 0,
            closed: false,
        });
        let mut o = ConnectOpts::new(OUR_MAC, PEER_MAC);
        o.ack = p.policy;
        let remote = std::net::SocketAddr::new(peer, PEER_PORT + i as u16);
        let id = net
            .tcp
            .connect(net.now, net.weir_addr(), remote, o)
            .expect("connect");
        by_id.insert(id, i);
        senders.push(Sender {
            id,
            data: stream(p.seed, i, plan.size),
            written: 0,
            rng: Rng::new(p.seed ^ (i as u64) << 32),
            ended: false,
            closed_called: false,
            reply: Vec::new(),
            peer_closed: false,
            closed: false,
        });
    }
    assert_eq!(net.tcp.stats().active_opens, p.plans.len() as u64);

    let mut writable = 0u64;
    let mut iterations = 0u64;
    let mut idle = false;
    // Connections whose smoltcp socket is stuck in LAST-ACK by smoltcp 0.12's defect.
    let mut stalled = vec![false; p.plans.len()];
    let start = net.now;
    loop {
        iterations += 1;
        if iterations > MAX_ITERATIONS || net.now.saturating_since(start) > MAX_VIRTUAL {
            stuck(&net, senders.iter().map(|s| s.id), iterations, "weir sends");
        }

        // smoltcp: receive, read (a slow reader reads a bounded amount per iteration),
        // close on weir's FIN, or (`End::PeerFirst`) send the reply and close at once.
        net.peer_rx();
        let mut wake = None;
        for (i, r) in rx.iter_mut().enumerate() {
            let plan = &p.plans[i];
            let s = net.sockets.get_mut::<smoltcp::socket::tcp::Socket>(r.h);
            let mut budget = read_budget(s.state(), plan.smol_read);
            let mut buf = [0u8; 4096];
            while budget > 0 && s.can_recv() {
                let k = budget.min(buf.len());
                let n = s.recv_slice(&mut buf[..k]).expect("smoltcp recv");
                if n == 0 {
                    break;
                }
                r.got.extend_from_slice(&buf[..n]);
                budget -= n;
            }
            if s.can_recv() {
                wake = Some(net.now + Duration::from_millis(1));
            }
            if r.closed {
                continue;
            }
            match plan.end {
                End::PeerFirst(_) if s.may_send() => {
                    r.replied += s.send_slice(&r.reply[r.replied..]).expect("smoltcp send");
                    if r.replied == r.reply.len() {
                        s.close();
                        r.closed = true;
                    }
                }
                End::Close | End::Shutdown if s.state() == SState::CloseWait => {
                    s.close();
                    r.closed = true;
                }
                _ => {}
            }
        }
        net.peer_tx();

        // weir.
        net.weir_rx();
        while let Some(ev) = net.tcp.poll_event() {
            match ev {
                Event::Opened(id) | Event::Writable(id) => {
                    writable += u64::from(matches!(ev, Event::Writable(_)));
                    let i = by_id[&id];
                    let s = &mut senders[i];
                    if matches!(ev, Event::Opened(_)) {
                        let plan = &p.plans[i];
                        net.tcp.set_nodelay(id, plan.nodelay).expect("nodelay");
                        net.tcp.set_cork(id, plan.cork).expect("cork");
                    }
                    write_some(&mut net, s, &p.plans[i]);
                }
                Event::Readable(id) | Event::PeerClosed(id) => {
                    let s = &mut senders[by_id[&id]];
                    let buf = &mut s.reply;
                    net.tcp
                        .recv(id, |sl| {
                            sl.iter()
                                .map(|x| {
                                    buf.extend_from_slice(x.bytes());
                                    x.bytes().len()
                                })
                                .sum()
                        })
                        .expect("recv");
                    if matches!(ev, Event::PeerClosed(_)) {
                        s.peer_closed = true;
                        // `End::PeerFirst` closes once everything is written.
                        if !s.closed_called && s.written == s.data.len() {
                            net.tcp.close(net.now, id).expect("close");
                            s.closed_called = true;
                        }
                    }
                }
                Event::Closed(id) => senders[by_id[&id]].closed = true,
                Event::Reset(id) => panic!(
                    "weir's connection {} was reset\n{}",
                    by_id[&id],
                    net.describe()
                ),
            }
        }
        net.weir_tx();

        let weir_done = senders.iter().all(|s| s.closed);
        let peer_done = rx.iter().all(|r| {
            net.sockets.get::<smoltcp::socket::tcp::Socket>(r.h).state() == SState::Closed
        });
        if weir_done
            && peer_done
            && net.tcp.conn_count() == 0
            && net.tcp.half_open_count() == 0
            && net.in_flight() == 0
        {
            break;
        }
        // Nothing left to happen: once more at the same time (the last timers may have
        // raised events), then it is stuck.
        if net.advance(wake) {
            idle = false;
        } else if std::mem::replace(&mut idle, true) {
            // smoltcp 0.12's LAST-ACK stall (`Net::last_ack_stalls`): its FIN will never
            // come. Only when every smoltcp socket still open is such a one; then weir's
            // applications that half-closed stop waiting for that FIN and close (their
            // orphaned FIN-WAIT-2 ends after `time_wait`), and once weir has nothing
            // left, the run ends and is checked as any other.
            let handles = net.last_ack_stalls();
            let open = |r: &Receiver| {
                net.sockets.get::<smoltcp::socket::tcp::Socket>(r.h).state() != SState::Closed
            };
            if !handles.is_empty() && rx.iter().all(|r| !open(r) || handles.contains(&r.h)) {
                let mut closed_now = false;
                for (i, r) in rx.iter().enumerate() {
                    if !handles.contains(&r.h) {
                        continue;
                    }
                    stalled[i] = true;
                    let s = &mut senders[i];
                    if !s.closed_called {
                        net.tcp.close(net.now, s.id).expect("close");
                        s.closed_called = true;
                        closed_now = true;
                    }
                }
                if closed_now {
                    idle = false;
                    continue;
                }
                if weir_done && net.tcp.conn_count() == 0 && net.tcp.half_open_count() == 0 {
                    break;
                }
            }
            stuck(
                &net,
                senders.iter().map(|s| s.id),
                iterations,
                "nothing left to happen",
            );
        }
    }

    let mut sent = 0;
    let mut received = 0;
    for (i, (s, r)) in senders.iter().zip(&rx).enumerate() {
        assert_eq!(s.written, s.data.len(), "conn {i}: all written");
        assert_eq!(
            r.got.len(),
            s.data.len(),
            "conn {i}: bytes smoltcp received"
        );
        assert!(
            r.got == s.data,
            "conn {i}: the bytes smoltcp received differ"
        );
        assert!(s.reply == r.reply, "conn {i}: the reply weir read differs");
        match p.plans[i].end {
            End::Close => assert!(!s.peer_closed, "conn {i}: PeerClosed after close"),
            // smoltcp's FIN never reached weir (`Net::last_ack_stalls` checked that).
            End::Shutdown if stalled[i] => {}
            _ => assert!(s.peer_closed, "conn {i}: weir heard smoltcp's FIN"),
        }
        sent += s.data.len();
        received += s.reply.len();
    }
    common_checks(p, &net, sent, received);
    assert_eq!(net.tcp.stats().active_open_failures, 0);
    let f = net.finish();
    let st = &f.stats;
    // smoltcp answers an ACK that reaches it after its socket closed with a RST, which
    // ends weir's TIME-WAIT (as `Event::Closed`: no connection was reset, checked above):
    // a duplicate of weir's last ACK, or weir's answer to a late duplicate or reordered
    // segment of smoltcp's. Only a connection weir closed first has a TIME-WAIT, and a
    // clean link draws none.
    let time_waits = p
        .plans
        .iter()
        .filter(|pl| !matches!(pl.end, End::PeerFirst(_)))
        .count() as u64;
    assert!(
        st.resets_received <= time_waits,
        "{} RSTs from smoltcp, {time_waits} connections in TIME-WAIT",
        st.resets_received,
    );
    if clean(p) {
        assert_eq!(st.resets_received, 0, "RSTs on a clean link");
    }
    assert_eq!((f.tx_in_use, f.rx_in_use), (0, 0), "buffers still in use");
    totals.add(p, &f, sent, iterations);
    totals.writable += writable;
    let n = stalled.iter().filter(|&&x| x).count() as u64;
    if n > 0 {
        totals.last_ack_stalls += n;
        totals.stall_seeds.push(p.seed);
    }
}

/// Writes what the send buffer takes, in writes of random sizes; after the last one,
/// uncorks and half-closes or closes.
fn write_some(net: &mut Net, s: &mut Sender, plan: &Plan) {
    while s.written < s.data.len() {
        let want = (1 + s.rng.below(plan.max_write as u64) as usize).min(s.data.len() - s.written);
        let n = net
            .tcp
            .send(
                net.now,
                s.id,
                &s.data[s.written..s.written + want],
                &mut net.pool,
            )
            .expect("send");
        s.written += n;
        if n < want {
            // Full: Event::Writable follows.
            return;
        }
    }
    if !s.ended {
        s.ended = true;
        if plan.cork {
            net.tcp.set_cork(s.id, false).expect("uncork");
        }
        match plan.end {
            End::Shutdown => net.tcp.shutdown(net.now, s.id).expect("shutdown"),
            End::Close => {
                net.tcp.close(net.now, s.id).expect("close");
                s.closed_called = true;
            }
            // In CLOSE-WAIT already (the reply was read with it): close now; else when
            // the FIN comes.
            End::PeerFirst(_) if s.peer_closed => {
                net.tcp.close(net.now, s.id).expect("close");
                s.closed_called = true;
            }
            End::PeerFirst(_) => {}
        }
    }
}

/// 1,000 seeds of weir sending to smoltcp through the impaired link.
#[test]
fn weir_sends_to_smoltcp() {
    run_seeds("weir_sends_to_smoltcp", DEFAULT, 1000, weir_sends);
}

/// As [`weir_sends_to_smoltcp`], 16 connections each and streams up to 1 MiB.
#[test]
#[ignore = "heavier variant: cargo test -p stack --test peer_smoltcp_send -- --ignored"]
fn weir_sends_to_smoltcp_heavy() {
    run_seeds("weir_sends_to_smoltcp_heavy", HEAVY, 1000, weir_sends);
}

// ---------------------------------------------------------------------------------------
// smoltcp connects to a weir echo server.
// ---------------------------------------------------------------------------------------

/// Bytes the echo application holds between reading and writing, per connection.
const ECHO_HOLD: usize = 16 * 1024;

/// weir's echo application, one connection.
#[derive(Default)]
struct Echo {
    /// Read, not yet handed to `send` / cut into buffers.
    pending: Vec<u8>,
    /// Buffers cut, not yet taken by `send_bufs`.
    chain: PayloadChain<VecBuf>,
    echoed: usize,
    peer_closed: bool,
    closed_called: bool,
    closed: bool,
}

/// smoltcp's client, one connection.
struct Client {
    h: SocketHandle,
    data: Vec<u8>,
    written: usize,
    got: Vec<u8>,
    fin_sent: bool,
}

fn echo(p: &Params, totals: &mut Totals) {
    let mut net = Net::new(&net_config(p));
    net.tcp.listen(PORT, p.policy).expect("listen");
    let mut app_pool = VecPool::new(1 << 16, 2048);
    let mut app_rng = Rng::new(p.seed ^ 0xec40);
    let mut clients = Vec::new();
    for (i, plan) in p.plans.iter().enumerate() {
        let h = net.add_socket(plan.smol_rx, 64 * 1024, p.timestamps);
        net.socket(h).set_keep_alive(Some(SMOLTCP_KEEPALIVE));
        net.peer_connect(h, PORT, CLIENT_PORT + i as u16);
        clients.push(Client {
            h,
            data: stream(p.seed, i, plan.size),
            written: 0,
            got: Vec::new(),
            fin_sent: false,
        });
    }
    let mut echoes: HashMap<ConnId, Echo> = HashMap::new();
    let mut port_of: HashMap<ConnId, u16> = HashMap::new();

    let mut writable = 0u64;
    let mut iterations = 0u64;
    let mut idle = false;
    let start = net.now;
    loop {
        iterations += 1;
        if iterations > MAX_ITERATIONS || net.now.saturating_since(start) > MAX_VIRTUAL {
            stuck(&net, echoes.keys().copied(), iterations, "echo");
        }

        // smoltcp clients: write what fits, read (boundedly), FIN after the last byte.
        net.peer_rx();
        let mut wake = None;
        for (i, c) in clients.iter_mut().enumerate() {
            let plan = &p.plans[i];
            let s = net.sockets.get_mut::<smoltcp::socket::tcp::Socket>(c.h);
            if s.may_send() && c.written < c.data.len() {
                let end = (c.written + plan.max_write.max(1448)).min(c.data.len());
                c.written += s.send_slice(&c.data[c.written..end]).expect("smoltcp send");
            }
            if c.written == c.data.len() && !c.fin_sent && s.may_send() {
                s.close();
                c.fin_sent = true;
            }
            let mut budget = read_budget(s.state(), plan.smol_read);
            let mut buf = [0u8; 4096];
            while budget > 0 && s.can_recv() {
                let n = s
                    .recv_slice(&mut buf[..budget.min(4096)])
                    .expect("smoltcp recv");
                if n == 0 {
                    break;
                }
                c.got.extend_from_slice(&buf[..n]);
                budget -= n;
            }
            if s.can_recv() {
                wake = Some(net.now + Duration::from_millis(1));
            }
        }
        net.peer_tx();

        // weir: the echo server.
        net.weir_rx();
        while let Some(ev) = net.tcp.poll_event() {
            match ev {
                Event::Opened(id) => {
                    let port = net.tcp.flow(id).expect("flow").sport;
                    let i = usize::from(port - CLIENT_PORT);
                    net.tcp
                        .set_nodelay(id, p.plans[i].nodelay)
                        .expect("nodelay");
                    port_of.insert(id, port);
                    echoes.insert(id, Echo::default());
                }
                Event::Readable(id) | Event::Writable(id) | Event::PeerClosed(id) => {
                    writable += u64::from(matches!(ev, Event::Writable(_)));
                    let e = echoes.get_mut(&id).expect("an open connection");
                    if matches!(ev, Event::PeerClosed(_)) {
                        e.peer_closed = true;
                    }
                    pump(&mut net, id, e, p.zero_copy, &mut app_pool, &mut app_rng);
                }
                Event::Closed(id) => echoes.get_mut(&id).expect("open").closed = true,
                Event::Reset(id) => panic!(
                    "weir's connection from port {:?} was reset\n{}",
                    port_of.get(&id),
                    net.describe()
                ),
            }
        }
        net.weir_tx();

        let weir_done = echoes.len() == clients.len() && echoes.values().all(|e| e.closed);
        let peer_done = clients.iter().all(|c| {
            net.sockets.get::<smoltcp::socket::tcp::Socket>(c.h).state() == SState::Closed
        });
        if weir_done
            && peer_done
            && net.tcp.conn_count() == 0
            && net.tcp.half_open_count() == 0
            && net.in_flight() == 0
        {
            break;
        }
        // Nothing left to happen: once more at the same time (the last timers may have
        // raised events), then it is stuck.
        if net.advance(wake) {
            idle = false;
        } else if std::mem::replace(&mut idle, true) {
            stuck(
                &net,
                echoes.keys().copied(),
                iterations,
                "nothing left to happen",
            );
        }
    }

    let mut total = 0;
    for (i, c) in clients.iter().enumerate() {
        assert_eq!(c.written, c.data.len(), "client {i}: all written");
        assert_eq!(c.got.len(), c.data.len(), "client {i}: bytes echoed back");
        assert!(c.got == c.data, "client {i}: the echoed bytes differ");
        total += c.data.len();
    }
    let echoed: usize = echoes.values().map(|e| e.echoed).sum();
    assert_eq!(echoed, total, "the echo application wrote what it read");
    common_checks(p, &net, total, total);
    let st = net.tcp.stats();
    assert_eq!(st.active_opens, 0);
    assert_eq!(app_pool.in_use(), 0, "echo buffers still held");
    let f = net.finish();
    assert_eq!((f.tx_in_use, f.rx_in_use), (0, 0), "buffers still in use");
    totals.add(p, &f, total, iterations);
    totals.writable += writable;
}

/// The echo application on one connection: read into its bounded buffer, write it back,
/// until neither moves; a short write leaves the rest for `Event::Writable`. After the
/// peer's FIN and the last byte written, close.
fn pump(
    net: &mut Net,
    id: ConnId,
    e: &mut Echo,
    zero_copy: bool,
    pool: &mut VecPool,
    rng: &mut Rng,
) {
    loop {
        let mut progress = false;
        if e.pending.len() < ECHO_HOLD {
            let room = ECHO_HOLD - e.pending.len();
            let pending = &mut e.pending;
            let n = net
                .tcp
                .recv(id, |sl| {
                    let mut n = 0;
                    for s in sl {
                        let b = s.bytes();
                        let k = b.len().min(room - n);
                        pending.extend_from_slice(&b[..k]);
                        n += k;
                        if n == room {
                            break;
                        }
                    }
                    n
                })
                .expect("recv");
            progress |= n > 0;
        }
        let before = e.echoed;
        if zero_copy {
            // Cut what was read into buffers of random sizes at random offsets.
            while !e.pending.is_empty() && !e.chain.is_full() {
                let off = rng.below(48) as usize;
                let len = (1 + rng.below(2000 - off as u64) as usize).min(e.pending.len());
                let mut buf = pool.alloc(off + len).expect("echo pool");
                buf_fill(&mut buf, off, &e.pending[..len]);
                e.pending.drain(..len);
                let slice = PayloadSlice {
                    buf,
                    off: off as u16,
                    len: len as u16,
                };
                if e.chain.push(slice).is_err() {
                    unreachable!("the chain had room");
                }
            }
            if !e.chain.is_empty() {
                let n = net
                    .tcp
                    .send_bufs(net.now, id, &mut e.chain)
                    .expect("send_bufs");
                e.echoed += n;
            }
        } else if !e.pending.is_empty() {
            let n = net
                .tcp
                .send(net.now, id, &e.pending, &mut net.pool)
                .expect("send");
            e.pending.drain(..n);
            e.echoed += n;
        }
        progress |= e.echoed > before;
        if !progress {
            break;
        }
    }
    let flushed = e.pending.is_empty() && e.chain.is_empty();
    if e.peer_closed && flushed && net.tcp.readable_bytes(id) == 0 && !e.closed_called {
        net.tcp.close(net.now, id).expect("close");
        e.closed_called = true;
    }
}

fn buf_fill(buf: &mut VecBuf, off: usize, bytes: &[u8]) {
    use stack::buf::PacketBuf;
    buf.data_mut()[off..off + bytes.len()].copy_from_slice(bytes);
}

/// 1,000 seeds of smoltcp clients against a weir echo server through the impaired link.
#[test]
fn smoltcp_to_weir_echo() {
    run_seeds("smoltcp_to_weir_echo", DEFAULT, 1000, echo);
}

/// As [`smoltcp_to_weir_echo`], 16 connections each and streams up to 1 MiB.
#[test]
#[ignore = "heavier variant: cargo test -p stack --test peer_smoltcp_send -- --ignored"]
fn smoltcp_to_weir_echo_heavy() {
    run_seeds("smoltcp_to_weir_echo_heavy", HEAVY, 1000, echo);
}

// ---------------------------------------------------------------------------------------
// What the runs above found, each scripted on the TCP fixture (`testkit::tcp`).
// ---------------------------------------------------------------------------------------

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

/// smoltcp 0.12's LAST-ACK stall (seed 169 of `weir_sends_to_smoltcp_heavy`), on one
/// connection with nothing random on the link. weir sends 20,000 bytes and `close`s;
/// smoltcp reads them, closes on weir's FIN (CLOSE-WAIT -> LAST-ACK), and its FIN|ACK
/// is lost on the way to weir (withheld, exactly that frame).
///
/// - Alone, that loss is repaired: smoltcp's FIN has its retransmission timer
///   (`Interface::poll_delay` is `Some` in LAST-ACK), the FIN goes again, both sides
///   close (weir through TIME-WAIT).
/// - With an ACK of weir's that does not cover the FIN reaching smoltcp before that
///   timer fires, the timer is gone: smoltcp stays in LAST-ACK with `poll_delay` `None`
///   and sends nothing, however long the clock runs. The ACK here is the one of seed
///   169: a late copy of an old ACK of smoltcp's reaches weir in FIN-WAIT-2, more than
///   MAX.SND.WND below SND.UNA, and weir, as RFC 5961 §5.2 (and RFC 9293 §3.10.7.4 for
///   a stack implementing it) requires, discards it and sends an ACK: SEG.SEQ = SND.NXT,
///   SEG.ACK = RCV.NXT, which stops at smoltcp's FIN since that never arrived.
///   smoltcp 0.12 `src/socket/tcp.rs`, `Socket::process`, arm `(State::LastAck,
///   TcpControl::None)`: `self.timer.set_for_idle(cx.now(), self.keep_alive)` for any
///   acceptable ACK that is not for the FIN. weir's side is as designed: its orphaned
///   FIN-WAIT-2 ends after `time_wait` (60 s, Linux `tcp_fin_timeout`), silently.
#[test]
fn smoltcp_0_12_loses_its_fin_timer_on_an_ack_in_last_ack() {
    use stack::time::Instant;
    use stack::wire::TcpFlags;
    for v6 in [false, true] {
        for stale_ack in [false, true] {
            let what = format!("v6 {v6}, stale ACK {stale_ack}");
            let impair = ImpairConfig {
                delay: Duration::from_micros(50),
                ..ImpairConfig::default()
            };
            let mut cfg = NetConfig::new(7, impair);
            cfg.v6 = v6;
            let mut net = Net::new(&cfg);
            let h = net.add_socket(4096, 4096, true);
            net.socket(h).listen(PEER_PORT).expect("listen");
            let remote = std::net::SocketAddr::new(net.peer_addr(), PEER_PORT);
            let id = net
                .tcp
                .connect(
                    net.now,
                    net.weir_addr(),
                    remote,
                    ConnectOpts::new(OUR_MAC, PEER_MAC),
                )
                .expect("connect");
            let data = stream(7, 0, 20_000);
            let mut written = 0;
            let mut got = Vec::new();
            let mut peer_closed = false;
            // smoltcp's first pure ACK of data, replayed later; its FINs, as sent.
            let mut old_ack: Option<Vec<u8>> = None;
            let mut fins = 0;
            let mut replayed = false;
            let mut weir_closed_at = None;
            // `poll_delay` in LAST-ACK, first seen and last.
            let mut delays: Vec<Option<smoltcp::time::Duration>> = Vec::new();
            for _ in 0..100_000 {
                net.peer_rx();
                let s = net.socket(h);
                let mut buf = [0u8; 4096];
                while s.can_recv() {
                    let n = s.recv_slice(&mut buf).expect("recv");
                    got.extend_from_slice(&buf[..n]);
                }
                if s.state() == SState::CloseWait && !peer_closed {
                    s.close();
                    peer_closed = true;
                }
                net.peer_tx_with(|f, m| {
                    if m.flags == TcpFlags::ACK && m.payload_len == 0 && old_ack.is_none() {
                        old_ack = Some(f.to_vec());
                    }
                    if m.flags.contains(TcpFlags::FIN) {
                        fins += 1;
                        return fins > 1;
                    }
                    true
                });
                // After smoltcp sent what it had: its timers.
                if net.socket(h).state() == SState::LastAck {
                    let d = net.peer_poll_delay();
                    if delays.len() < 2 {
                        delays.push(d);
                    } else {
                        delays[1] = d;
                    }
                }
                if stale_ack && fins == 1 && !replayed {
                    // A late copy of the old ACK, as the impairment's reordering made.
                    let f = old_ack.clone().expect("an ACK of data before the FIN");
                    net.to_weir.push(net.now, f);
                    replayed = true;
                }
                net.weir_rx();
                while let Some(ev) = net.tcp.poll_event() {
                    match ev {
                        Event::Opened(_) | Event::Writable(_) => {
                            written += net
                                .tcp
                                .send(net.now, id, &data[written..], &mut net.pool)
                                .expect("send");
                            if written == data.len() {
                                net.tcp.close(net.now, id).expect("close");
                            }
                        }
                        Event::Closed(_) => weir_closed_at = Some(net.now),
                        other => panic!("{what}: {other:?}"),
                    }
                }
                net.weir_tx();
                if net.tcp.conn_count() == 0
                    && net.in_flight() == 0
                    && net.socket(h).state() == SState::Closed
                {
                    break;
                }
                if !net.advance(None) {
                    // The last timers' events (weir's `Event::Closed`).
                    while let Some(ev) = net.tcp.poll_event() {
                        assert_eq!(ev, Event::Closed(id), "{what}");
                        weir_closed_at = Some(net.now);
                    }
                    break;
                }
            }
            assert!(got == data, "{what}: smoltcp received the stream");
            assert_eq!(net.withheld, 1, "{what}: only the first FIN withheld");
            assert!(
                matches!(delays.first(), Some(Some(d)) if d.total_micros() > 0),
                "{what}: in LAST-ACK, the FIN's retransmission timer runs first: {delays:?}"
            );
            let st = net.tcp.stats().clone();
            assert_eq!((st.conns_closed, st.conns_reset), (1, 0), "{what}");
            assert_eq!(net.tcp.conn_count(), 0, "{what}");
            if !stale_ack {
                assert_eq!(fins, 2, "{what}: smoltcp retransmitted its FIN");
                assert_eq!(net.socket(h).state(), SState::Closed, "{what}");
                assert!(net.last_ack_stalls().is_empty(), "{what}");
                assert_eq!(st.drops(DropReason::BadAck), 0, "{what}");
                continue;
            }
            // weir: the old ACK refused (RFC 5961 §5.2), answered, FIN-WAIT-2 bounded.
            assert_eq!(st.drops(DropReason::BadAck), 1, "{what}");
            assert_eq!(st.challenge_acks, 1, "{what}");
            let closed_at = weir_closed_at.expect("weir's connection ended");
            assert!(
                closed_at >= Instant::from_nanos(1_000_000_000) + Duration::from_secs(60),
                "{what}: weir waited out FIN-WAIT-2"
            );
            // smoltcp: stuck in LAST-ACK, no timer, its FIN sent once.
            assert_eq!(fins, 1, "{what}: smoltcp never retransmitted its FIN");
            assert_eq!(net.socket(h).state(), SState::LastAck, "{what}");
            assert_eq!(delays.get(1), Some(&None), "{what}: no timer: {delays:?}");
            assert_eq!(net.last_ack_stalls(), vec![h], "{what}: recognized");
            // An hour later smoltcp still has nothing to send.
            net.now += Duration::from_secs(3600);
            let mut later = 0;
            net.peer_tx_with(|_, _| {
                later += 1;
                true
            });
            assert_eq!(later, 0, "{what}: smoltcp sent something an hour later");
            assert_eq!(net.socket(h).state(), SState::LastAck, "{what}");
        }
    }
}
