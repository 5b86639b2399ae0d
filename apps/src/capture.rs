//! `--pcap FILE`: what weir receives and transmits, as pcapng, without stalling a core.
//!
//! Each core owns a [`CoreCapture`]. For every received frame (before the pipeline
//! consumes the burst) and every frame about to be transmitted (before `tx_burst`) it asks
//! `rte_pcapng_copy` for a snaplen-truncated copy from a dedicated capture pool and pushes
//! the copy onto the core's own bounded queue; a writer thread drains the queues into the
//! file. The core never waits: when its queue is full, the capture pool is empty, or the
//! file has reached `--pcap-max-mb`, the frame is left out of the capture and counted in
//! `pcap_dropped`. The original frame is never touched.
//!
//! The accounting is exact whatever the machine's speed: each direction's frames *seen*
//! (offered to the capture) equal its frames *written* plus its frames *left out*, counted
//! by the core (queue full, pool empty, file full) and by the writer (file full, write
//! error). Whether anything is left out depends on how much CPU the writer thread gets;
//! the counts say exactly what is missing from the file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use crossbeam_queue::ArrayQueue;
use dpdk::pcapng::{self, Direction, PcapngWriter};
use dpdk::{Clock, Eal, Mbuf, Mempool};

/// Copies each core may have waiting for the writer (a queue per core).
pub const QUEUE_DEPTH: usize = 4096;

/// What to capture and where.
#[derive(Clone, Debug)]
pub struct CaptureConfig {
    /// The pcapng file (created or truncated).
    pub path: PathBuf,
    /// Bytes of each frame kept.
    pub snaplen: u32,
    /// Largest file size in bytes (packet blocks); later frames are left out and counted.
    pub max_bytes: u64,
    /// The program the file names as its writer (weir-sink, weir-serve).
    pub program: &'static str,
}

/// One direction's counts: `seen == written + dropped` once the capture has finished.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectionTotals {
    /// Frames offered to the capture.
    pub seen: u64,
    /// Frames written to the file.
    pub written: u64,
    /// Frames left out (queue full, pool empty, file full, write error).
    pub dropped: u64,
}

/// Totals of a capture, for the summary and the JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureTotals {
    /// Frames written to the file.
    pub written: u64,
    /// Bytes of packet blocks written.
    pub bytes: u64,
    /// Frames left out (queue full, pool empty, file full, write error).
    pub dropped: u64,
    /// Received frames.
    pub rx: DirectionTotals,
    /// Transmitted frames.
    pub tx: DirectionTotals,
}

impl CaptureTotals {
    /// The totals as JSON fields (`pcap_written`, `pcap_bytes`, `pcap_dropped`, and per
    /// direction `pcap_{rx,tx}_{seen,written,dropped}`), for `--stats-json`.
    pub fn json_fields(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("pcap_written", self.written),
            ("pcap_bytes", self.bytes),
            ("pcap_dropped", self.dropped),
            ("pcap_rx_seen", self.rx.seen),
            ("pcap_rx_written", self.rx.written),
            ("pcap_rx_dropped", self.rx.dropped),
            ("pcap_tx_seen", self.tx.seen),
            ("pcap_tx_written", self.tx.written),
            ("pcap_tx_dropped", self.tx.dropped),
        ]
    }
}

/// Counters of one direction, indexed by [`dir_index`].
#[derive(Debug, Default)]
struct DirCounters {
    seen: AtomicU64,
    written: AtomicU64,
    dropped: AtomicU64,
}

fn dir_index(d: Direction) -> usize {
    match d {
        Direction::In => 0,
        Direction::Out => 1,
    }
}

/// State shared by the cores and the writer.
#[derive(Debug)]
struct Shared {
    /// Per core: copies waiting for the writer, with the direction they were taken in.
    queues: Vec<ArrayQueue<(Mbuf, Direction)>>,
    /// Per direction (In, Out): seen, written and left out, over all cores and the writer.
    dirs: [DirCounters; 2],
    /// Per core: frames left out by that core (written only by it).
    core_dropped: Vec<AtomicU64>,
    /// Frames the writer left out (file full or a write error).
    writer_dropped: AtomicU64,
    written: AtomicU64,
    bytes: AtomicU64,
    /// Set by the writer when the file reached its limit: cores stop copying.
    full: AtomicBool,
    stop: AtomicBool,
}

/// The capture as a whole: owns the writer thread. Hand a [`CoreCapture`] to each core.
#[derive(Debug)]
pub struct Capture {
    shared: Arc<Shared>,
    writer: Option<JoinHandle<Result<()>>>,
    pool: Mempool,
    snaplen: u32,
    port: u16,
}

impl Capture {
    /// Opens the file (after the port is configured: the file lists the ports that exist
    /// now), creates the capture pool and starts the writer thread for `cores` cores.
    pub fn start(eal: &Eal, cfg: &CaptureConfig, port: u16, cores: usize) -> Result<Capture> {
        let mut writer = PcapngWriter::create(
            eal,
            &cfg.path,
            &format!("{} {}", cfg.program, env!("CARGO_PKG_VERSION")),
            None,
        )
        .with_context(|| {
            format!(
                "--pcap {}: cannot create the capture file",
                cfg.path.display()
            )
        })?;
        // Copies longer than one mbuf are chained by rte_pktmbuf_copy; a room for a full
        // 9 KiB jumbo frame keeps that rare without wasting memory on a large snaplen.
        let room = pcapng::mbuf_size(cfg.snaplen.min(9216)) + dpdk_sys_headroom();
        let room = u16::try_from(room).unwrap_or(u16::MAX);
        // Twice what the queues can hold, so a full queue, not the pool, is what limits.
        let count = (2 * QUEUE_DEPTH * cores.max(1)).next_power_of_two() as u32 - 1;
        let pool = Mempool::new(eal, "weir_pcap", count, 64, room)
            .context("--pcap: creating the capture mbuf pool (give EAL more memory with -m)")?;
        let shared = Arc::new(Shared {
            queues: (0..cores).map(|_| ArrayQueue::new(QUEUE_DEPTH)).collect(),
            dirs: Default::default(),
            core_dropped: (0..cores).map(|_| AtomicU64::new(0)).collect(),
            writer_dropped: AtomicU64::new(0),
            written: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            full: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let max_bytes = cfg.max_bytes;
        let sh = shared.clone();
        let handle = std::thread::Builder::new()
            .name("weir-pcap".into())
            .spawn(move || write_loop(&sh, &mut writer, max_bytes))
            .context("starting the capture writer thread")?;
        Ok(Capture {
            shared,
            writer: Some(handle),
            pool,
            snaplen: cfg.snaplen,
            port,
        })
    }

    /// The handle for core `core` (its queue id on the port is `queue`).
    pub fn for_core(&self, core: usize, queue: u16) -> CoreCapture {
        CoreCapture {
            shared: self.shared.clone(),
            core,
            port: self.port,
            queue,
            pool: self.pool,
            snaplen: self.snaplen,
            dropped: 0,
        }
    }

    /// Frames left out so far, over all cores and the writer.
    pub fn dropped(&self) -> u64 {
        totals(&self.shared).dropped
    }

    /// Per core: frames that core left out so far.
    pub fn dropped_per_core(&self) -> Vec<u64> {
        self.shared
            .core_dropped
            .iter()
            .map(|d| d.load(Ordering::Relaxed))
            .collect()
    }

    /// Writes what is queued, closes the file and returns the totals. Call after the
    /// cores stopped.
    pub fn finish(mut self) -> Result<CaptureTotals> {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(h) = self.writer.take() {
            h.join()
                .map_err(|_| anyhow::anyhow!("the capture writer thread panicked"))??;
        }
        Ok(totals(&self.shared))
    }

    /// A handle that reads the running totals (for the metrics thread).
    pub fn observer(&self) -> CaptureObserver {
        CaptureObserver {
            shared: self.shared.clone(),
        }
    }
}

/// Reads a capture's running totals from another thread.
#[derive(Clone, Debug)]
pub struct CaptureObserver {
    shared: Arc<Shared>,
}

impl CaptureObserver {
    /// The totals so far.
    pub fn totals(&self) -> CaptureTotals {
        totals(&self.shared)
    }
    /// Per core: frames that core left out so far.
    pub fn dropped_per_core(&self) -> Vec<u64> {
        self.shared
            .core_dropped
            .iter()
            .map(|d| d.load(Ordering::Relaxed))
            .collect()
    }
}

fn totals(sh: &Shared) -> CaptureTotals {
    let dir = |i: usize| DirectionTotals {
        seen: sh.dirs[i].seen.load(Ordering::Relaxed),
        written: sh.dirs[i].written.load(Ordering::Relaxed),
        dropped: sh.dirs[i].dropped.load(Ordering::Relaxed),
    };
    CaptureTotals {
        rx: dir(0),
        tx: dir(1),
        written: sh.written.load(Ordering::Relaxed),
        bytes: sh.bytes.load(Ordering::Relaxed),
        dropped: sh.writer_dropped.load(Ordering::Relaxed)
            + sh.core_dropped
                .iter()
                .map(|d| d.load(Ordering::Relaxed))
                .sum::<u64>(),
    }
}

/// `RTE_PKTMBUF_HEADROOM`: the pool's data room counts it; the pcapng block header is
/// prepended into it.
fn dpdk_sys_headroom() -> u32 {
    dpdk::sys::RTE_PKTMBUF_HEADROOM
}

/// The writer thread: drains every core's queue into the file until told to stop and
/// every queue is empty.
fn write_loop(sh: &Shared, w: &mut PcapngWriter, max_bytes: u64) -> Result<()> {
    let mut batch: Vec<Mbuf> = Vec::with_capacity(256);
    loop {
        let stopping = sh.stop.load(Ordering::Acquire);
        let mut moved = 0usize;
        for q in &sh.queues {
            let mut per_dir = [0u64; 2];
            while batch.len() < batch.capacity() {
                match q.pop() {
                    Some((m, d)) => {
                        per_dir[dir_index(d)] += 1;
                        batch.push(m);
                    }
                    None => break,
                }
            }
            if batch.is_empty() {
                continue;
            }
            moved += batch.len();
            let n = batch.len() as u64;
            let mut lost = sh.full.load(Ordering::Relaxed);
            if !lost {
                match w.write(&mut batch) {
                    Ok(bytes) => {
                        sh.written.fetch_add(n, Ordering::Relaxed);
                        sh.bytes.fetch_add(bytes, Ordering::Relaxed);
                        for (c, k) in sh.dirs.iter().zip(per_dir) {
                            c.written.fetch_add(k, Ordering::Relaxed);
                        }
                        if w.bytes_written() >= max_bytes {
                            sh.full.store(true, Ordering::Relaxed);
                            tracing::warn!(
                                bytes = w.bytes_written(),
                                "--pcap: the capture file reached --pcap-max-mb; later frames are left out (pcap_dropped)"
                            );
                        }
                    }
                    Err(e) => {
                        lost = true;
                        sh.full.store(true, Ordering::Relaxed);
                        tracing::error!("--pcap: writing the capture failed: {e}; capture stopped");
                    }
                }
            }
            if lost {
                sh.writer_dropped.fetch_add(n, Ordering::Relaxed);
                for (c, k) in sh.dirs.iter().zip(per_dir) {
                    c.dropped.fetch_add(k, Ordering::Relaxed);
                }
            }
            batch.clear();
        }
        if moved == 0 {
            if stopping {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// One core's side of the capture: copies frames and queues them, never waiting.
#[derive(Debug)]
pub struct CoreCapture {
    shared: Arc<Shared>,
    core: usize,
    port: u16,
    queue: u16,
    pool: Mempool,
    snaplen: u32,
    dropped: u64,
}

impl CoreCapture {
    /// Captures received frames (call before the pipeline consumes them).
    pub fn rx<'a>(&mut self, frames: impl IntoIterator<Item = &'a Mbuf>) {
        self.capture(frames, Direction::In);
    }

    /// Captures frames about to be transmitted (call before `tx_burst`).
    pub fn tx<'a>(&mut self, frames: impl IntoIterator<Item = &'a Mbuf>) {
        self.capture(frames, Direction::Out);
    }

    fn capture<'a>(&mut self, frames: impl IntoIterator<Item = &'a Mbuf>, dir: Direction) {
        let before = self.dropped;
        let tsc = Clock::cycles();
        let full = self.shared.full.load(Ordering::Relaxed);
        let q = &self.shared.queues[self.core];
        let mut seen = 0u64;
        for m in frames {
            seen += 1;
            if full {
                self.dropped += 1;
                continue;
            }
            match pcapng::copy(self.port, self.queue, m, &self.pool, self.snaplen, tsc, dir) {
                Some(c) => {
                    if q.push((c, dir)).is_err() {
                        self.dropped += 1;
                    }
                }
                None => self.dropped += 1,
            }
        }
        let counters = &self.shared.dirs[dir_index(dir)];
        // `seen` before the copies reach the writer's counters: a reader never sees more
        // written than seen.
        counters.seen.fetch_add(seen, Ordering::Relaxed);
        if self.dropped != before {
            counters
                .dropped
                .fetch_add(self.dropped - before, Ordering::Relaxed);
            self.shared.core_dropped[self.core].store(self.dropped, Ordering::Relaxed);
        }
    }
}
