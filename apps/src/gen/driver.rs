//! Runs weir-gen on a DPDK port: [`run`] drives an [`Engine`], the flows on weir's TCP
//! ([`Gen`]) or the frame generator ([`Sender`], `--blast` and the benchmark's anchor).
//!
//! One iteration: `now` from the TSC; one RX burst to the engine (one per queue); its
//! timers; its frames into the transmit batch; one `tx_burst` (one per queue with frames).
//! Frames the queue refuses stay in the batch for the next iteration (a full ring is
//! back-pressure, not loss).
//!
//! With [`GenIo::ring_rss`], the port is one side of a ring pair with a queue per
//! receiving core, and the generator plays the receiver's NIC: each frame leaves on the
//! queue whose ring feeds the receive queue that NIC's RSS would pick for it
//! ([`stack::rss::Rss::queue_of_frame`]: the Toeplitz hash of the frame's 4-tuple as the
//! receiver sees it, then the redirection table), and the receivers' ACKs come back on
//! the queue of the core that sent them, all of which the generator polls.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use dpdk::{Clock, Mbuf, PortRxQueue, PortTxQueue};
use stack::buf::{ChecksumStatus, PacketBuf, RxChecksum};
use stack::driver::{Burst, RxQueue, TxQueue, MAX_BURST};
use stack::rss::Rss;
use stack::time::{Duration, Instant};

/// Receive bursts per queue and loop iteration at most (see `exchange`).
const RX_BURSTS: usize = 4;

use crate::busy::BusySpan;

use super::engine::Gen;
use super::pool::GenPool;
use super::sender::{CwndSummary, GenStats, Sender};

/// The port side of a generator: its queues, its transmit pools and the clock.
pub struct GenIo {
    /// The RX queues the receiver's ACKs arrive on: one, or with [`GenIo::ring_rss`] one
    /// per receiving core.
    rx: Vec<PortRxQueue>,
    /// The TX queues segments leave on, as many as [`GenIo::rx`].
    tx: Vec<PortTxQueue>,
    /// The receiver's NIC's RSS, with several queues.
    rss: Option<Rss>,
    /// Where segments are built (stamped with the TX port, for checksum offload).
    pub pool: GenPool,
    /// The TSC clock.
    pub clock: Clock,
    /// Model the receiving NIC's RX checksum offload: every frame leaves with only the
    /// "IP and L4 checksum good" verdicts in its offload flags
    /// ([`dpdk::Mbuf::set_received`]), which the receiver trusts as it trusts a NIC's.
    /// Only for a port wired straight to the receiver (a ring pair), where the generator
    /// is the wire and the NIC: its frames carry correct checksums by construction (the
    /// in-memory tests verify them in software). On a real port leave it off; the
    /// receiving NIC sets its own verdicts.
    pub nic_rx_checksum: bool,
}

/// The verdicts a NIC with RX checksum offload gives a correct frame.
const GOOD: RxChecksum = RxChecksum {
    ip: ChecksumStatus::Good,
    l4: ChecksumStatus::Good,
};

impl GenIo {
    /// One queue pair of a port.
    pub fn new(
        rx: PortRxQueue,
        tx: PortTxQueue,
        pool: GenPool,
        clock: Clock,
        nic_rx_checksum: bool,
    ) -> GenIo {
        GenIo {
            rx: vec![rx],
            tx: vec![tx],
            rss: None,
            pool,
            clock,
            nic_rx_checksum,
        }
    }

    /// Every queue of one side of a ring pair with as many queues as `rss`'s table names
    /// (`dpdk::ring_port_pair_queues`; `rx[q]` and `tx[q]` are the port's queue `q`): each
    /// frame is sent to the receiver's queue that `rss` picks for it, as the receiver's
    /// NIC would. Fails unless there is one RX and one TX queue per queue of `rss`.
    pub fn ring_rss(
        rx: Vec<PortRxQueue>,
        tx: Vec<PortTxQueue>,
        rss: Rss,
        pool: GenPool,
        clock: Clock,
        nic_rx_checksum: bool,
    ) -> anyhow::Result<GenIo> {
        let n = usize::from(rss.reta().queues());
        if rx.len() != n || tx.len() != n {
            anyhow::bail!(
                "RSS over {n} queues needs {n} RX and {n} TX queues, got {} and {}",
                rx.len(),
                tx.len()
            );
        }
        Ok(GenIo {
            rx,
            tx,
            rss: Some(rss),
            pool,
            clock,
            nic_rx_checksum,
        })
    }
}

/// Moves the frames of `out` into the per-queue batches `pending` by `rss`, in order; a
/// frame whose queue's batch is full stays in `out`, and so do the later frames of that
/// queue (a flow's frames keep their order: they all go to one queue).
fn spread(rss: &Rss, out: &mut Burst<Mbuf>, pending: &mut [Burst<Mbuf>]) {
    let mut rest: Burst<Mbuf> = Burst::new();
    for b in out.drain(..) {
        let q = usize::from(rss.queue_of_frame(b.data()));
        // `q` < the table's queue count = pending.len() (checked in `GenIo::ring_rss`).
        match pending.get_mut(q) {
            Some(p) if !p.is_full() => p.push(b),
            // `rest` holds at most what `out` held.
            _ => rest.push(b),
        }
    }
    *out = rest;
}

/// How a run ended and what it did.
#[derive(Clone, Debug)]
pub struct GenReport {
    /// The sender's counters.
    pub stats: GenStats,
    /// The flows' congestion windows at the end.
    pub cwnd: CwndSummary,
    /// From the first to the last data segment, in nanoseconds.
    pub data_ns: u64,
    /// From start to the end of the loop, in nanoseconds.
    pub elapsed_ns: u64,
    /// `true` when every flow finished (closed, failed or never started) before the loop
    /// gave up.
    pub finished: bool,
    /// Frames built but never accepted by the TX queue (freed at the end).
    pub unsent: u64,
    /// TSC cycles spent in iterations that did something.
    pub busy_cycles: u64,
    /// Busy cycles and data segments of the data phase alone, from the check that saw
    /// the first data segment sent to the one that saw the close begin (every 256
    /// iterations): the handshakes of every flow and the closes are left out, as the
    /// receiver's figure leaves them out. `None` when the run never reached data.
    pub data_phase: Option<(u64, u64)>,
    /// Stamped buffers found damaged by the pool's sampled check ([`GenPool::damaged`]).
    pub stamps_damaged: u64,
}

/// A progress callback: the engine and the time since the start.
pub type Tick<'a, T> = &'a mut dyn FnMut(&mut T, Duration);

/// Options of [`run`] and [`run_gen`] (`T`: the engine).
pub struct RunOpts<'a, T> {
    /// Set by another thread (or a signal handler) to end the data phase early; flows then
    /// close as at the end of the duration.
    pub stop: &'a AtomicBool,
    /// The longest the close may take after the data phase ends (then the loop gives up).
    pub close_grace: Duration,
    /// The longest the whole run may take.
    pub max_runtime: Duration,
    /// Called about once a second with the sender and the elapsed time (progress lines).
    pub tick: Option<Tick<'a, T>>,
    /// How long to keep answering after every flow has finished (0: return at once).
    /// The last ACK (of the receiver's FIN) has been handed to the port by then, but a
    /// peer that reads the port's frames from shared memory (net_memif) loses those it
    /// has not read when this side closes the port: it would retransmit its FIN to no
    /// one and reset at its end. A linger is what TIME-WAIT does for the kernel.
    pub linger: Duration,
    /// Set to [`PHASE_DATA`] once the first data segment has left and to
    /// [`PHASE_CLOSING`] once the data phase is over (checked every 256 iterations): a
    /// receiver in the same process then measures the data phase apart from the
    /// handshakes and the closes.
    pub phase: Option<&'a AtomicU8>,
}

/// [`RunOpts::phase`]: handshakes (no data segment sent yet).
pub const PHASE_SETUP: u8 = 0;
/// [`RunOpts::phase`]: the first data segment has been sent.
pub const PHASE_DATA: u8 = 1;
/// [`RunOpts::phase`]: the data phase is over; the flows close.
pub const PHASE_CLOSING: u8 = 2;

/// What [`run`] drives: the flows on weir's TCP ([`Gen`]) or the frame generator
/// ([`Sender`]). One call of each per loop iteration, in this order.
pub trait Engine {
    /// The received burst (every frame is consumed). A frame that still asks for TX
    /// checksums comes from a ring peer that models its NIC's TX offload: the generator,
    /// as that NIC and the wire, has completed them (a no-op on a real port), so they
    /// are right by construction and marked good.
    fn rx(&mut self, now: Instant, rx: &mut Burst<Mbuf>);
    /// Timers, events and the application's writes.
    fn poll(&mut self, now: Instant, pool: &mut GenPool);
    /// The frames due, into `out`; returns how many.
    fn tx(&mut self, now: Instant, pool: &mut GenPool, out: &mut Burst<Mbuf>) -> usize;
    /// Every flow finished.
    fn is_done(&self) -> bool;
    /// The data phase is over and the flows are closing: the close grace runs.
    fn closing(&self) -> bool;
    /// Ends the data phase now.
    fn stop_writing(&mut self, now: Instant);
    /// From the first to the last data segment.
    fn data_span(&self) -> Option<(Instant, Instant)>;
    /// Data segments sent so far, retransmissions included (`GenStats::segments`).
    fn segments(&self) -> u64;
    /// The counters and the windows at the end (`pool`: its payload counters).
    fn finish(&mut self, pool: &GenPool) -> (GenStats, CwndSummary);
}

/// Calls `f` on each received frame in order, with the lines it reads fetched ahead. The
/// ACKs were written on the receiver's core: their descriptors are fetched together first,
/// and each frame's header lines while the one before it is handled.
fn each_fetched_ahead(rx: &mut Burst<Mbuf>, mut f: impl FnMut(&mut Mbuf)) {
    for b in rx.iter() {
        b.prefetch_descriptor();
    }
    for i in 0..rx.len() {
        if let Some(next) = rx.get(i + 1) {
            next.prefetch_data();
        }
        f(&mut rx[i]);
    }
}

impl Engine for Sender {
    fn rx(&mut self, now: Instant, rx: &mut Burst<Mbuf>) {
        each_fetched_ahead(rx, |b| {
            // Any frame but a ring peer's keeps the port's verdicts; what the port did
            // not check, the sender verifies in software.
            let csum = if b.complete_tx_checksums() {
                GOOD
            } else {
                b.rx_checksum()
            };
            self.handle_rx(now, b.data(), csum);
        });
        Mbuf::free_burst(rx);
    }
    fn poll(&mut self, now: Instant, _pool: &mut GenPool) {
        self.handle_timeout(now);
    }
    fn tx(&mut self, now: Instant, pool: &mut GenPool, out: &mut Burst<Mbuf>) -> usize {
        self.poll_tx(now, pool, out)
    }
    fn is_done(&self) -> bool {
        Sender::is_done(self)
    }
    fn closing(&self) -> bool {
        self.data_span().is_some() && self.is_stopping()
    }
    fn stop_writing(&mut self, now: Instant) {
        Sender::stop_writing(self, now);
    }
    fn data_span(&self) -> Option<(Instant, Instant)> {
        Sender::data_span(self)
    }
    fn segments(&self) -> u64 {
        self.stats().segments
    }
    fn finish(&mut self, _pool: &GenPool) -> (GenStats, CwndSummary) {
        (self.stats().clone(), self.cwnd_summary())
    }
}

impl Engine for Gen<Mbuf> {
    fn rx(&mut self, now: Instant, rx: &mut Burst<Mbuf>) {
        // The NIC model reads each ACK whole before the stack sees it.
        each_fetched_ahead(rx, |b| {
            if b.complete_tx_checksums() {
                b.set_received(GOOD);
            }
        });
        self.handle_rx_burst(now, rx);
    }
    fn poll(&mut self, now: Instant, pool: &mut GenPool) {
        Gen::poll(self, now, pool);
    }
    fn tx(&mut self, now: Instant, pool: &mut GenPool, out: &mut Burst<Mbuf>) -> usize {
        self.poll_tx(now, pool, out)
    }
    fn is_done(&self) -> bool {
        Gen::is_done(self)
    }
    fn closing(&self) -> bool {
        self.is_stopping()
    }
    fn stop_writing(&mut self, now: Instant) {
        Gen::stop_writing(self, now);
    }
    fn data_span(&self) -> Option<(Instant, Instant)> {
        Gen::data_span(self)
    }
    fn segments(&self) -> u64 {
        Gen::segments(self)
    }
    fn finish(&mut self, pool: &GenPool) -> (GenStats, CwndSummary) {
        let mut stats = self.stats();
        stats.stamped = pool.stamped_segments;
        stats.shared = pool.chained_segments;
        stats.refs_exhausted = pool.refs_exhausted;
        (stats, self.cwnd_summary())
    }
}

/// One turn of the loop's I/O: every receive queue into the engine, its timers, what it
/// builds out, each frame to its queue's `tx_burst` (with RSS, the queue the receiver's
/// NIC would pick). Frames a queue refused stay in `out` or `pending` for the next turn.
/// Returns the frames received and built.
#[inline(always)]
fn exchange<E: Engine>(
    engine: &mut E,
    io: &mut GenIo,
    now: Instant,
    rx: &mut Burst<Mbuf>,
    out: &mut Burst<Mbuf>,
    pending: &mut [Burst<Mbuf>],
) -> (usize, usize) {
    let mut n = 0;
    // Up to RX_BURSTS bursts per queue while they come back full. A peer that
    // acknowledges every segment (a quick-ACK start, or a delayed-ACK timer per segment
    // when each flow's segments come far apart) sends about a frame per segment it gets,
    // so with one burst per iteration the reads would only keep pace with the sends:
    // what one long iteration let pile up in the ring (a timer storm's ACKs, window
    // updates) would stay there. Full bursts read back to back let the sender catch up.
    for q in io.rx.iter_mut() {
        for _ in 0..RX_BURSTS {
            let k = q.rx_burst(rx);
            n += k;
            engine.rx(now, rx);
            if k < MAX_BURST {
                break;
            }
        }
    }
    engine.poll(now, &mut io.pool);
    let before = out.len();
    let m = engine.tx(now, &mut io.pool, out);
    if io.nic_rx_checksum {
        for b in out[before..].iter_mut() {
            b.set_received(GOOD);
        }
    }
    match &io.rss {
        None => {
            if let (false, Some(tx)) = (out.is_empty(), io.tx.first_mut()) {
                tx.tx_burst(out);
            }
        }
        Some(rss) => {
            spread(rss, out, pending);
            for (p, tx) in pending.iter_mut().zip(io.tx.iter_mut()) {
                if !p.is_empty() {
                    tx.tx_burst(p);
                }
            }
        }
    }
    (n, m)
}

/// Runs `engine` on `io` until every flow has finished, or the limits in `opts` end it.
/// For [`Gen`], `io.pool` must have been made [`GenPool::with_pattern`]: the flows' write
/// buffers come from it.
pub fn run<E: Engine>(engine: &mut E, io: &mut GenIo, mut opts: RunOpts<'_, E>) -> GenReport {
    let mut rx: Burst<Mbuf> = Burst::new();
    let mut out: Burst<Mbuf> = Burst::new();
    // With RSS, each queue's frames wait here for its tx_burst.
    let mut pending: Vec<Burst<Mbuf>> = match io.rss {
        Some(_) => io.tx.iter().map(|_| Burst::new()).collect(),
        None => Vec::new(),
    };
    let start = io.clock.now();
    let hard_end = start + opts.max_runtime;
    let mut close_by = Instant::NEVER;
    let mut next_tick = start + Duration::from_secs(1);
    let mut busy_cycles = 0u64;
    let mut iter = 0u64;
    let mut finished = false;
    let mut now;
    let mut span = BusySpan::default();
    let mut phase = PHASE_SETUP;
    let (mut data_from, mut data_to) = (None, None);
    loop {
        let t0 = Clock::cycles();
        busy_cycles += span.close(t0);
        now = io.clock.instant_at(t0);
        let (n, m) = exchange(engine, io, now, &mut rx, &mut out, &mut pending);
        if n > 0 || m > 0 {
            span.busy(t0);
        }
        if engine.is_done() && out.is_empty() && pending.iter().all(|p| p.is_empty()) {
            finished = true;
            break;
        }
        iter += 1;
        if iter % 256 == 0 {
            let p = if engine.closing() {
                PHASE_CLOSING
            } else if engine.data_span().is_some() {
                PHASE_DATA
            } else {
                PHASE_SETUP
            };
            if p > phase {
                // The data phase's own cycles and segments (one iteration's accuracy).
                let at = (busy_cycles, engine.segments());
                if phase < PHASE_DATA {
                    data_from = Some(at);
                }
                if p == PHASE_CLOSING {
                    data_to = Some(at);
                }
                phase = p;
            }
            if let Some(ph) = opts.phase {
                if p > ph.load(Ordering::Relaxed) {
                    ph.store(p, Ordering::Release);
                }
            }
            if opts.stop.load(Ordering::Relaxed) && close_by == Instant::NEVER {
                engine.stop_writing(now);
            }
            if close_by == Instant::NEVER && engine.closing() {
                close_by = now + opts.close_grace;
            }
            if now >= close_by || now >= hard_end {
                break;
            }
            if now >= next_tick {
                next_tick = now + Duration::from_secs(1);
                if let Some(t) = opts.tick.as_mut() {
                    t(engine, now.saturating_since(start));
                }
            }
        }
    }
    busy_cycles += span.close(Clock::cycles());
    if let Some(ph) = opts.phase {
        // A run that ended between two checks: its data phase is over too.
        ph.fetch_max(PHASE_CLOSING, Ordering::Release);
    }
    if finished && opts.linger > Duration::ZERO {
        // The last ACKs may still be on their way to the receiver: keep serving until
        // it has read them (memif drops what the peer has not read when a side leaves).
        let linger_end = io.clock.now() + opts.linger;
        while io.clock.now() < linger_end {
            let now = io.clock.now();
            exchange(engine, io, now, &mut rx, &mut out, &mut pending);
        }
    }
    let unsent = (out.len() + pending.iter().map(|p| p.len()).sum::<usize>()) as u64;
    out.clear();
    pending.clear();
    let data_ns = engine
        .data_span()
        .map_or(0, |(a, b)| b.saturating_since(a).as_nanos());
    let data_to = data_to.unwrap_or((busy_cycles, engine.segments()));
    let data_phase =
        data_from.map(|(c, n)| (data_to.0.saturating_sub(c), data_to.1.saturating_sub(n)));
    let (stats, cwnd) = engine.finish(&io.pool);
    GenReport {
        stats,
        cwnd,
        data_ns,
        elapsed_ns: now.saturating_since(start).as_nanos(),
        finished,
        unsent,
        busy_cycles,
        data_phase,
        stamps_damaged: io.pool.damaged(),
    }
}
