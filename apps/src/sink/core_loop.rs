//! weir-sink's per-core loop: rx burst, pipeline, application, timers, one tx burst, until
//! told to stop. Stats cross to the printer thread as snapshots through `crossbeam-queue`;
//! nothing on the data path waits for anything.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, Result};
use crossbeam_queue::ArrayQueue;
use dpdk::{Clock, Mbuf, PortRxQueue, PortTxQueue};
use stack::driver::{Burst, RxQueue, TxBacklog, TX_BACKLOG};
use stack::impair::{ImpairConfig, Impairment};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::stats::Stats;
use stack::tcp::ConnId;
use stack::time::Instant;

use super::app::{ConnMap, SinkApp};
use crate::busy::BusySpan;
use crate::net::{copy_mbuf, corrupt_mbuf};
use crate::report::DigestRecord;

/// What a core hands back when it stops.
pub(crate) struct CoreResult {
    /// The core's counters, loop figures (busy cycles) included.
    pub(crate) stats: Stats,
    /// Per-connection digests (with [`CoreCtx::digest`]).
    pub(crate) digests: Vec<DigestRecord>,
    /// Connections still open when it stopped (they were reset).
    pub(crate) open_at_stop: u64,
    /// The counters (loop figures included) when [`CoreCtx::phase`] first read 1, and 2:
    /// the differences are the sender's data phase.
    pub(crate) at_phase: Vec<Stats>,
}

/// What a core does with each received burst. weir-sink's own is [`Stack`]: the burst goes
/// to the pipeline. The reference loops that weir-bench compares it with
/// ([`crate::bench::loops`], also `weir-sink --drop`) free it instead.
pub(crate) trait RxHandler {
    /// Takes the burst `rx` received at `now` (an empty one too), leaving it empty.
    fn handle(&mut self, p: &mut Pipeline<Mbuf>, now: Instant, rx: &mut Burst<Mbuf>);

    /// Puts the handler's own receive counters into `s`, for a handler that bypasses the
    /// pipeline (whose counters would stay at zero).
    fn counters(&self, _s: &mut Stats) {}
}

/// weir-sink's receive: every burst to the pipeline (GRO, TCP, ACKs).
pub(crate) struct Stack;

impl RxHandler for Stack {
    #[inline]
    fn handle(&mut self, p: &mut Pipeline<Mbuf>, now: Instant, rx: &mut Burst<Mbuf>) {
        p.handle_rx_burst(now, rx);
    }
}

/// What a core needs to run.
pub(crate) struct CoreCtx {
    /// The queue's index (in messages, and to vary the impairment's seed).
    pub(crate) queue: u16,
    /// The RX queue to poll.
    pub(crate) rx: PortRxQueue,
    /// The TX queue for ACKs and replies.
    pub(crate) tx: PortTxQueue,
    /// Where ACKs (and the impairment's duplicates) are built.
    pub(crate) pool: dpdk::PortPool,
    /// The TSC clock.
    pub(crate) clock: Clock,
    /// The pipeline's configuration.
    pub(crate) cfg: PipelineConfig,
    /// SHA-256 of each connection's bytes.
    pub(crate) digest: bool,
    /// Impair received frames before the pipeline (`--impair`), with the seed given.
    pub(crate) impair: Option<(ImpairConfig, Option<u64>)>,
    /// Set to stop; the loop checks it every quarter second.
    pub(crate) stop: Arc<AtomicBool>,
    /// Stop at this clock reading (`--duration`).
    pub(crate) deadline_ns: Option<u64>,
    /// Where the core publishes its stats, every quarter second.
    pub(crate) snapshots: Arc<ArrayQueue<(u16, Stats)>>,
    /// Where the core hands each closed connection's digest to the printer.
    pub(crate) closed: Arc<ArrayQueue<DigestRecord>>,
    /// The core's share of `--pcap`.
    pub(crate) capture: Option<crate::capture::CoreCapture>,
    /// Set once the core's pipeline is built, before its loop starts (a bench's sender
    /// waits for it: a pipeline sized for a million connections takes a while to build).
    pub(crate) ready: Option<Arc<AtomicBool>>,
    /// A sender's phase in the same process (`crate::gen::driver::RunOpts::phase`): the
    /// core snapshots its counters each time it moves on ([`CoreResult::at_phase`]).
    pub(crate) phase: Option<Arc<AtomicU8>>,
}

/// One core's loop: rx burst, `rx_handler` (weir-sink's is [`Stack`]), app, timers, one tx
/// burst; until told to stop.
pub(crate) fn run_core<H: RxHandler>(mut c: CoreCtx, mut rx_handler: H) -> Result<CoreResult> {
    let mut p: Pipeline<Mbuf> = Pipeline::new(c.cfg.clone())
        .map_err(|e| anyhow!("queue {}: cannot set up TCP: {e}", c.queue))?;
    if let Some(r) = &c.ready {
        r.store(true, Ordering::Release);
    }
    let mut app = SinkApp {
        digest: c.digest,
        conns: ConnMap::default(),
        done: Vec::new(),
        closed: c.closed.clone(),
    };
    let mut rx: Burst<Mbuf> = Burst::new();
    let mut out: Burst<Mbuf> = Burst::new();
    let hz = c.clock.hz().max(1);
    let publish_every = hz / 4;
    let mut last_publish = Clock::cycles();
    let mut lp = stack::stats::LoopStats::default();
    let mut impair = c.impair.map(|(cfg, seed)| {
        Impairment::<Mbuf>::new(cfg, seed.unwrap_or(0x5eed) ^ u64::from(c.queue))
    });
    let imp_pool = c.pool.mempool();
    // ACKs are built in mbufs taken 32 at a time, their lines prefetched together.
    let mut tx_pool = dpdk::StashPool::new(c.pool);
    // What the port refuses goes first at the next iteration (`TxBacklog`).
    let mut backlog: TxBacklog<Mbuf> = TxBacklog::new(TX_BACKLOG);
    let deadline = c.deadline_ns.map(Instant::from_nanos);
    let mut now;
    let mut span = BusySpan::default();
    let mut at_phase: Vec<Stats> = Vec::new();
    loop {
        let t0 = Clock::cycles();
        lp.busy_cycles += span.close(t0);
        now = c.clock.instant_at(t0);
        if let Some(ph) = &c.phase {
            // Counted up to `t0`: the busy cycles of every iteration before this one.
            let seen = usize::from(ph.load(Ordering::Acquire)).min(2);
            while at_phase.len() < seen {
                let mut s = p.stats();
                rx_handler.counters(&mut s);
                s.lp = lp.clone();
                at_phase.push(s);
            }
        }
        let mut n = c.rx.rx_burst(&mut rx);
        // The stack's own share of the iteration starts here (the driver's receive, which
        // on net_tap is a read() per frame, is not weir's processing).
        let t_rx = if n > 0 { Clock::cycles() } else { t0 };
        if let Some(cap) = c.capture.as_mut() {
            cap.rx(rx.iter());
        }
        if let Some(imp) = impair.as_mut() {
            for b in rx.drain(..) {
                imp.push_with(now, b, |m| copy_mbuf(imp_pool, m), corrupt_mbuf);
            }
            while !rx.is_full() {
                match imp.pop_ready(now) {
                    Some(b) => rx.push(b),
                    None => break,
                }
            }
            n = rx.len();
        }
        // An empty burst too: it tells GRO the queue is drained (`busy_hold_ns`).
        rx_handler.handle(&mut p, now, &mut rx);
        app.serve(&mut p, now);
        p.handle_timeout(now);
        app.serve(&mut p, now);
        let m = p.poll_tx(now, &mut tx_pool, &mut out);
        if n > 0 || m > 0 {
            lp.stack_cycles += Clock::cycles().wrapping_sub(t_rx);
        }
        if !out.is_empty() || !backlog.is_empty() {
            if let Some(cap) = c.capture.as_mut() {
                cap.tx(out.iter());
            }
            lp.tx_packets += backlog.send(&mut c.tx, &mut out) as u64;
            lp.tx_dropped = backlog.dropped;
            lp.tx_backlog_peak = backlog.peak as u64;
        }
        lp.iterations += 1;
        if n > 0 || m > 0 {
            lp.busy_iterations += 1;
            span.busy(t0);
        }
        if t0.wrapping_sub(last_publish) >= publish_every {
            last_publish = t0;
            let mut s = p.stats();
            rx_handler.counters(&mut s);
            if let Some(imp) = &impair {
                s.impair = imp.stats();
            }
            s.lp = lp.clone();
            s.lp.busy_ns = c.clock.cycles_to_ns(lp.busy_cycles);
            s.lp.stack_ns = c.clock.cycles_to_ns(lp.stack_cycles);
            s.lp.mbufs_in_use = c.pool.mempool().in_use() as u64;
            c.snapshots.force_push((c.queue, s));
            if c.stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d) {
                break;
            }
        }
    }
    lp.busy_cycles += span.close(Clock::cycles());
    // Shutdown: nothing stays held in GRO; what is in order reaches the app; connections
    // still open are reset (so no peer waits on a vanished receiver).
    p.flush_gro(now);
    app.serve(&mut p, now);
    let open_at_stop = p.stats().conns_open;
    let open: Vec<ConnId> = app.conns.ids().collect();
    for id in open {
        let _ = p.tcp().abort(id);
    }
    app.serve(&mut p, now);
    for c in std::mem::take(&mut app.conns).into_values() {
        app.record(c, "open");
    }
    for _ in 0..64 {
        if p.poll_tx(now, &mut tx_pool, &mut out) == 0 && backlog.is_empty() {
            break;
        }
        if let Some(cap) = c.capture.as_mut() {
            cap.tx(out.iter());
        }
        lp.tx_packets += backlog.send(&mut c.tx, &mut out) as u64;
    }
    // What the port still refused after that is dropped, and counted.
    backlog.clear();
    lp.tx_dropped = backlog.dropped;
    lp.tx_backlog_peak = backlog.peak as u64;
    // The unused transmit mbufs go back before the pool is checked, and so do those of
    // the frames sent: a PMD frees them when they have left, which net_af_xdp learns
    // only when it transmits (its completion ring; the kernel completes a frame once the
    // peer has freed it, so a few tries a millisecond apart).
    drop(tx_pool);
    for _ in 0..20 {
        c.tx.reclaim();
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // Frames still held by the impairment are dropped (freed) here, before the pool is
    // checked; they count as delivered nowhere.
    let mut stats = p.stats();
    if let Some(imp) = impair.take() {
        stats.impair = imp.stats();
    }
    rx_handler.counters(&mut stats);
    lp.busy_ns = c.clock.cycles_to_ns(lp.busy_cycles);
    lp.stack_ns = c.clock.cycles_to_ns(lp.stack_cycles);
    stats.lp = lp;
    drop(p);
    Ok(CoreResult {
        stats,
        digests: app.done,
        open_at_stop,
        at_phase,
    })
}
