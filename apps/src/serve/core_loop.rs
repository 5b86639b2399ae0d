//! One core of `weir-serve`: its queue pair ([`Link`]), its own [`Pipeline`] and [`Glue`],
//! and the loop, which is the stack's call order (stack/src/tcp/mod.rs):
//!
//! ```text
//! now = link.now(); link.rx_burst(now, &mut rx);
//! p.handle_rx_burst(now, &mut rx);   glue.serve(): events, recv -> engine -> send, close
//! p.handle_timeout(now);             glue.serve() again (timers raise events too)
//! p.poll_tx(now, pool, &mut tx);     link.tx_burst(now, &mut tx)
//! ```
//!
//! Cores share nothing but the stop flag and the snapshot queue (stats for `--metrics`,
//! every quarter second, through `crossbeam-queue`): a connection lives on the core whose
//! queue the port's RSS gave its flow, as in weir-sink ([`crate::sink`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, Result};
use crossbeam_queue::ArrayQueue;
use dpdk::Mbuf;
use stack::driver::Burst;
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::stats::Stats;
use stack::time::{Duration, Instant};

use super::glue::{Glue, GlueCounts, ServeApp, Tally};
use crate::busy::BusySpan;
use crate::net::{Link, LinkStats};

/// How often a core publishes its stats for `--metrics` (weir-sink's cores do the same).
const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// What a core needs to run.
pub(crate) struct CoreCtx<A: ServeApp> {
    /// The queue's index on the port (the core's name in the stats).
    pub(crate) queue: u16,
    /// The queue pair, its transmit pool, impairment stages and capture.
    pub(crate) link: Link,
    /// The pipeline's configuration (every core gets the same).
    pub(crate) cfg: PipelineConfig,
    /// The engines' shared state on this core.
    pub(crate) server: A::Server,
    /// The connection table's size.
    pub(crate) max_conns: usize,
    /// `TCP_NODELAY` on every connection.
    pub(crate) nodelay: bool,
    /// Set to stop (SIGINT/SIGTERM, or another core that ended).
    pub(crate) stop: Arc<AtomicBool>,
    /// Stop at this clock reading (`--duration`).
    pub(crate) deadline: Option<Instant>,
    /// Where the core publishes its stats (`--metrics`), tagged by queue.
    pub(crate) snapshots: Option<Arc<ArrayQueue<(u16, Stats)>>>,
}

/// What a core hands back when it stops.
pub(crate) struct CoreResult {
    /// The core's queue.
    pub(crate) queue: u16,
    /// The pipeline's counters with the link's folded in ([`with_link`]).
    pub(crate) stats: Stats,
    /// The link's counters (the transmit stage's among them).
    pub(crate) link: LinkStats,
    /// The glue's counters.
    pub(crate) counts: GlueCounts,
    /// The engines' counters, digests and session reports.
    pub(crate) tally: Tally,
    /// When the loop started and when it ended.
    pub(crate) span: (Instant, Instant),
}

/// The pipeline's counters `s` with the link's: the receive stage's as `impair`, the
/// port's transmit counts as the loop's (what weir-sink's cores count themselves).
pub(crate) fn with_link(s: &Stats, link: &LinkStats) -> Stats {
    let mut s = s.clone();
    s.impair = link.impair_rx;
    s.lp.tx_packets = link.tx_packets;
    s.lp.tx_dropped = link.tx_dropped;
    s.lp.tx_backlog_peak = link.tx_backlog_peak;
    s
}

/// One core's loop until told to stop (or its deadline), then the end: what GRO holds
/// reaches the engines, connections still open are reset, and what that sends leaves.
pub(crate) fn run_core<A: ServeApp>(c: CoreCtx<A>) -> Result<CoreResult> {
    let CoreCtx {
        queue,
        mut link,
        cfg,
        server,
        max_conns,
        nodelay,
        stop,
        deadline,
        snapshots,
    } = c;
    let port = cfg.listen.first().map_or(0, |l| l.0);
    let mut p: Pipeline<Mbuf> = Pipeline::new(cfg)
        .map_err(|e| anyhow!("queue {queue}: cannot listen on port {port}: {e}"))?;
    let mut glue = Glue::<A>::new(server, max_conns, nodelay);
    let (mut rx, mut tx): (Burst<Mbuf>, Burst<Mbuf>) = (Burst::new(), Burst::new());
    let mut lp = stack::stats::LoopStats::default();
    let started = link.now();
    let mut next_publish = started + PUBLISH_EVERY;
    let mut now: Instant;
    // Busy time as weir-sink counts it (`crate::busy`): an iteration that received or
    // sent something counts from its start to the next one's.
    let mut span = BusySpan::default();
    loop {
        let t0;
        (now, t0) = link.now_and_cycles();
        lp.busy_cycles += span.close(t0);
        let n = link.rx_burst(now, &mut rx);
        p.handle_rx_burst(now, &mut rx);
        glue.serve(p.tcp(), link.pool(), now);
        p.handle_timeout(now);
        glue.serve(p.tcp(), link.pool(), now);
        let m = p.poll_tx(now, link.pool(), &mut tx);
        link.tx_burst(now, &mut tx);
        lp.iterations += 1;
        if n > 0 || m > 0 {
            lp.busy_iterations += 1;
            span.busy(t0);
        }
        if lp.iterations % 4096 == 0 {
            link.note_pool();
        }
        if let Some(q) = snapshots.as_ref().filter(|_| now >= next_publish) {
            next_publish = now + PUBLISH_EVERY;
            let mut s = with_link(&p.stats(), &link.stats());
            s.lp.iterations = lp.iterations;
            s.lp.busy_iterations = lp.busy_iterations;
            s.lp.busy_cycles = lp.busy_cycles;
            s.lp.busy_ns = link.cycles_to_ns(lp.busy_cycles);
            q.force_push((queue, s));
        }
        if lp.iterations % 1024 == 0
            && (stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d))
        {
            break;
        }
    }
    lp.busy_cycles += span.close(dpdk::Clock::cycles());
    p.flush_gro(now);
    glue.serve(p.tcp(), link.pool(), now);
    glue.stop(p.tcp(), now);
    glue.serve(p.tcp(), link.pool(), now);
    for _ in 0..64 {
        now = link.now();
        p.poll_tx(now, link.pool(), &mut tx);
        link.tx_burst(now, &mut tx);
        if tx.is_empty() && link.tx_held() == 0 {
            break;
        }
    }
    // What the port still refused after the flushes is freed and counted.
    link.drop_held();
    let ls = link.stats();
    let mut stats = with_link(&p.stats(), &ls);
    stats.lp.iterations = lp.iterations;
    stats.lp.busy_iterations = lp.busy_iterations;
    stats.lp.busy_cycles = lp.busy_cycles;
    stats.lp.busy_ns = link.cycles_to_ns(lp.busy_cycles);
    let counts = glue.counts();
    let tally = glue.tally().clone();
    // The pipeline's buffers and the link's transmit stash go back to the pool here, on
    // the core, before the port is closed and the pool checked.
    drop(p);
    drop(link);
    Ok(CoreResult {
        queue,
        stats,
        link: ls,
        counts,
        tally,
        span: (started, now),
    })
}
