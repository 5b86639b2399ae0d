//! The receive loops weir-bench runs on one core (`weir-bench e2e`, `weir-lab`'s ring run,
//! apps' ring tests): weir-sink's own loop ([`RxWork::Stack`]) and the reference loops it
//! is compared with, which receive and free every frame without the stack
//! ([`RxWork::Drop`], also `weir-sink --drop`, and [`RxWork::DropReadHeaders`]).
//!
//! The reference loops run inside weir-sink's loop (`crate::sink::core_loop`) in place of
//! the pipeline's receive, so everything else about an iteration (the clock read, the
//! timer check, the transmit poll, the stats) costs the same in every mode.

use std::sync::atomic::{AtomicBool, AtomicU8};
use std::sync::Arc;

use anyhow::Result;
use crossbeam_queue::ArrayQueue;
use dpdk::{Clock, Mbuf, PortRxQueue, PortTxQueue};
use stack::buf::PacketBuf;
use stack::driver::Burst;
use stack::pipeline::{Pipeline, PipelineConfig, DESC_AHEAD, PREFETCH_AHEAD};
use stack::stats::{PipelineStats, Stats};
use stack::time::Instant;
use stack::wire::fast;

use crate::report::DigestRecord;
use crate::sink::core_loop::{run_core, CoreCtx, RxHandler, Stack};

/// What a receiving core does with each burst.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxWork {
    /// The whole pipeline: GRO, TCP, ACKs, the application.
    #[default]
    Stack,
    /// Receive and free only (`weir-sink --drop`): the driver's own cost.
    Drop,
    /// Receive, read each frame's two header lines, free: what any receiver pays before
    /// it can decide anything about a frame (66 bytes of Ethernet, IPv4 and TCP with
    /// timestamps span two cache lines). The lines are fetched as the pipeline fetches
    /// them (descriptors [`DESC_AHEAD`] frames ahead, the data [`PREFETCH_AHEAD`]).
    DropReadHeaders,
}

/// One receiving core driven by another program (`weir-bench e2e`): weir-sink's per-core
/// loop on the given queues, with no printer, deadline, impairment or capture.
pub struct ReceiverCore {
    /// The RX queue to poll.
    pub rx: PortRxQueue,
    /// The TX queue for ACKs and replies.
    pub tx: PortTxQueue,
    /// Where ACKs are built.
    pub pool: dpdk::PortPool,
    /// The TSC clock.
    pub clock: Clock,
    /// The pipeline's configuration.
    pub cfg: PipelineConfig,
    /// SHA-256 of each connection's bytes (in [`ReceiverResult::digests`]).
    pub digest: bool,
    /// What the core does with each burst.
    pub work: RxWork,
    /// Set to stop; the loop checks it every quarter second.
    pub stop: Arc<AtomicBool>,
}

/// What [`run_receiver`] hands back.
pub struct ReceiverResult {
    /// The core's counters, loop figures (busy cycles) included.
    pub stats: Stats,
    /// Per-connection digests (with [`ReceiverCore::digest`]).
    pub digests: Vec<DigestRecord>,
    /// Connections still open when it stopped (they were reset).
    pub open_at_stop: u64,
    /// The counters when the sender's phase ([`run_receiver_signalling`]'s `phase`) first
    /// read 1 (data) and 2 (closing): their difference is the data phase.
    pub at_phase: Vec<Stats>,
}

/// Runs weir-sink's per-core loop on `core` until `core.stop` is set, its receive being
/// what `core.work` says.
pub fn run_receiver(core: ReceiverCore) -> Result<ReceiverResult> {
    run_receiver_signalling(core, None, None)
}

/// [`run_receiver`], setting `ready` once the pipeline is built (before the loop starts)
/// and snapshotting the counters as the sender's `phase` moves on
/// ([`crate::gen::driver::RunOpts::phase`]).
pub(crate) fn run_receiver_signalling(
    core: ReceiverCore,
    ready: Option<Arc<AtomicBool>>,
    phase: Option<Arc<AtomicU8>>,
) -> Result<ReceiverResult> {
    let ctx = CoreCtx {
        queue: 0,
        rx: core.rx,
        tx: core.tx,
        pool: core.pool,
        clock: core.clock,
        cfg: core.cfg,
        digest: core.digest,
        impair: None,
        stop: core.stop,
        deadline_ns: None,
        snapshots: Arc::new(ArrayQueue::new(4)),
        closed: Arc::new(ArrayQueue::new(1)),
        capture: None,
        ready,
        phase,
    };
    let r = match core.work {
        RxWork::Stack => run_core(ctx, Stack),
        RxWork::Drop => run_core(ctx, DropRx::new(false)),
        RxWork::DropReadHeaders => run_core(ctx, DropRx::new(true)),
    }?;
    Ok(ReceiverResult {
        stats: r.stats,
        digests: r.digests,
        open_at_stop: r.open_at_stop,
        at_phase: r.at_phase,
    })
}

/// The reference receive: count and free every frame (reading its header lines first
/// with `read_headers`). Nothing reaches the stack, so nothing is answered.
pub(crate) struct DropRx {
    read_headers: bool,
    counters: PipelineStats,
}

impl DropRx {
    /// A loop that frees each burst, reading each frame's header lines first when
    /// `read_headers` ([`RxWork::DropReadHeaders`]).
    pub(crate) fn new(read_headers: bool) -> DropRx {
        DropRx {
            read_headers,
            counters: PipelineStats::default(),
        }
    }
}

impl RxHandler for DropRx {
    #[inline]
    fn handle(&mut self, _p: &mut Pipeline<Mbuf>, _now: Instant, rx: &mut Burst<Mbuf>) {
        if self.read_headers {
            read_headers(rx);
        }
        for b in rx.iter() {
            self.counters.rx_packets += 1;
            self.counters.rx_bytes += b.data().len() as u64;
        }
        // One rte_pktmbuf_free_bulk per burst, as a tuned receive loop frees.
        Mbuf::free_burst(rx);
    }

    fn counters(&self, s: &mut Stats) {
        s.pipeline = self.counters.clone();
    }
}

/// Reads the first and the 66th byte of every frame in `rx` (both header lines of a TCP
/// segment with timestamps), fetching the lines as [`Pipeline::handle_rx_burst`] does.
fn read_headers(rx: &Burst<Mbuf>) {
    for b in rx.iter().take(DESC_AHEAD) {
        b.prefetch_descriptor();
    }
    for b in rx.iter().take(PREFETCH_AHEAD) {
        b.prefetch_data();
    }
    for (i, b) in rx.iter().enumerate() {
        if let Some(ahead) = rx.get(i + DESC_AHEAD) {
            ahead.prefetch_descriptor();
        }
        if let Some(ahead) = rx.get(i + PREFETCH_AHEAD) {
            ahead.prefetch_data();
        }
        let d = b.data();
        std::hint::black_box((d.first().copied(), d.get(fast::HEADER_LEN - 1).copied()));
    }
}
