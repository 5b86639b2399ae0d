//! `weir-bench e2e`: weir-gen and weir-sink in one process on two lcores, joined by a
//! ring port pair (`rte_eth_from_rings`), no kernel and no NIC in between.
//!
//! The main lcore receives (weir-sink's per-core loop, [`super::loops::run_receiver`]); the
//! worker lcore runs the generator ([`crate::gen`]). The modes run side by side in every
//! round, at each flow count:
//!
//! - `drop`: the receiver only receives and frees. It answers nothing, so the generator
//!   runs open loop (`--blast`: no handshake, no windows) with the same segment pattern;
//! - `drop+headers` (`--only headers`): the drop loop that also reads each frame's two
//!   header lines before freeing it, fetched as the pipeline fetches them: what any
//!   receiver pays before it can decide anything about a frame. A reference for the
//!   target, not its anchor;
//! - `stack`: the full pipeline (GRO with weir-sink's default 20 µs flush, Linux ACK
//!   policy) against closed-loop senders (handshake, slow start, FIN);
//! - `stack --no-gro`: the same without coalescing;
//! - `stack --sw-checksum`: `stack` with the receiver verifying every checksum itself.
//!
//! What the ring pair models (printed with the results). The generator stands for the
//! senders, the wire and the receiving NIC:
//!
//! - *RX checksum offload*: a NIC verifies IPv4 and TCP checksums and weir trusts its
//!   verdict (`RxChecksum`). The ring PMD sets none, so by default the generator marks each
//!   frame "IP and L4 checksum good" ([`GenIo::nic_rx_checksum`]); its checksums are
//!   correct by construction (verified in software by the in-memory tests and the
//!   `stack --sw-csum` row, which would count drops).
//! - *TX checksum offload*: weir-sink asks a NIC that has it to checksum its ACKs. The
//!   receiver's ring port declares the offload ([`dpdk::Port::model_tx_checksum_offload`]),
//!   so ACKs leave with the pseudo-header sum and the request, and the generator completes
//!   the checksums in software before reading them ([`dpdk::Mbuf::complete_tx_checksums`])
//!   and, as its own NIC would, takes them as good: the NIC's work lands on the generator's
//!   core, not the receiver's. ACKs that leave with their checksums computed (the
//!   `stack --sw-csum` row) are verified by the generator in software.
//! - `--sw-checksum` turns both models off in every mode; the `stack --sw-csum` row
//!   turns them off for that row only: the receiver verifies every received checksum and
//!   computes every ACK's, which is what they cost.
//! - *Frames*: one contiguous mbuf per segment, as a NIC delivers them. The generator
//!   builds data segments in a stamped pool ([`crate::gen::pool`]): only the 66 header
//!   bytes are written per segment, so the generator is cheap and the receiver reads a
//!   payload it did not write. For that the pattern's period is the MSS, and each write is
//!   a whole number of segments (45 x 1,448 = 65,160 bytes, PSH on its last segment,
//!   within 0.6% of a 64 KiB write): every segment is full-sized, as from a sender that
//!   is not application-limited. Still checked: TCP sequence accounting (every byte in
//!   order, no retransmission, clean close), the stamp (sampled on allocation, every
//!   buffer after each case); no longer checked here: a digest that would notice whole
//!   segments swapped (`cargo test -p apps`'s ring transfer test does, with the prime
//!   pattern and software checksums).
//! - *Arrival pattern*: by default flows interleaved one segment at a time
//!   (`--interleave segment`, as on a busy NIC queue: the hard case for GRO, since a
//!   flow's next segment comes 64 segment times later) and weir-sink's default 20 µs GRO
//!   flush window. `--interleave train:N` sends N segments of a flow back to back, as a
//!   TSO sender's NIC does (Linux's default TSO size is 64 KiB, 45 segments); the flow
//!   rotation is otherwise the same.
//!
//! Receiver cycles per segment are the TSC cycles of the loop iterations that received or
//! sent anything, divided by the frames received (weir-sink's `busy_cycles`): what the
//! receiving core spends per segment, idle polling excluded. They are counted over the
//! generator's data phase: the receiver snapshots its counters when the first data
//! segment has left and when the data phase ends ([`driver::RunOpts::phase`]), so the
//! handshakes and closes (four frames per flow, at 65,536 flows a large share of a short
//! run's cost) are left out; the JSON also gives the whole run's figure. The generator's
//! cycles per segment are its own data phase's in the same way (busy cycles and segments
//! between the checks that see the first data segment sent and the close begin,
//! [`driver::GenReport::data_phase`]; `generator_cycles_per_segment_whole_run` in the JSON
//! is the whole run's). Rates are over the generator's data phase (first to last data
//! segment). The stack
//! sender opens every flow before any writes and its duration counts from then
//! ([`GenConfig::open_first`]): at 65,536 flows the handshakes take seconds, and the data
//! phase has every flow at once.
//!
//! The checks, on the run's medians of receiver cycles per segment (each printed with its
//! figure, anchor and ratio, "not run" when a row it needs was not run):
//!
//! - flow-count scaling: `stack` at 4,096 flows at most 2x `stack` at 64 flows, at
//!   65,536 flows at most 3x;
//! - GRO never costs more than it saves: at every flow count, `stack` at most 1.05x
//!   `stack --no-gro`.
//!
//! The 64-flow `stack` against `drop` (the former "stack <= 2x drop" target, retired:
//! docs/decisions/ring-pair-floor.md) is printed for reference.
//!
//! `--tables N` sizes the receiver's connection table for N connections whatever the
//! row's flow count: a million-connection configuration measured on the 64-flow row. The
//! GRO table keeps its [`GRO_FLOWS`] runs, as `weir-bench conns` and weir-sink keep it for
//! any number of connections: it holds the runs of one flush window, not one entry per
//! connection.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use dpdk::{Clock, Eal, Mbuf, Mempool, Port, PortConfig};
use serde_json::json;
use stack::ack::AckPolicy;
use stack::driver::{Burst, RxQueue};
use stack::gro::{FlushReason, GroConfig};
use stack::pipeline::PipelineConfig;
use stack::stats::Stats;
use stack::tcp::TcpConfig;
use stack::time::Duration;
use stack::wire::LocalAddrs;

use super::loops::{run_receiver_signalling, ReceiverCore, ReceiverResult, RxWork};
use crate::eal_args::{bench_eal_args, Memory};
use crate::gen::driver::{self, GenIo, GenReport, RunOpts};
use crate::gen::payload::Payload;
use crate::gen::pool::{self, GenPool};
use crate::gen::sender::HDR_LEN;
use crate::gen::{Gen, GenConfig, Interleave, Sender};

pub(crate) const RX_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub(crate) const GEN_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
pub(crate) const PORT: u16 = 5001;
/// Ring slots from the generator to the receiver (the receiver's RX ring): the depth of
/// a typical NIC descriptor ring.
const RING_SIZE: u32 = 1024;
/// Ring slots for the receiver's ACKs, back to the generator: one per flow of the largest
/// row ([`MAX_FLOWS`]). A NIC's TX ring drains at line rate whatever the peer host does;
/// this ring drains only as fast as the generator polls it. At 65,536 flows each flow gets
/// a segment about every 65 ms, longer than the 40 ms delayed-ACK timeout (Linux's
/// `TCP_ATO_MIN`), so nearly every segment is acknowledged by its timer (about 1.04
/// segments per ACK), and those ACKs come due whatever the generator is doing: up to one
/// per flow at once. With 1,024 to 16,384 slots the receiver dropped 40,000 to 400,000
/// ACKs a run (`tx.queue_full`), each lost last ACK of a window cost its flow an RTO and a
/// spurious retransmission, and the row measured that rather than the receiver.
const ACK_RING_SIZE: u32 = MAX_FLOWS;
/// Mbufs per generator pool: more than the data ring (1,024), the receiver's out-of-order
/// and GRO holdings and the caches can pin at once.
const POOL_MBUFS: u32 = 16_383;
/// Mbufs of the receiver's pool, which its ACKs come from: more than the ACK ring
/// ([`ACK_RING_SIZE`]) and the caches hold at once.
const RX_POOL_MBUFS: u32 = 98_303;
/// The most flows the rig is sized for: `weir-bench e2e`'s largest default row. Its
/// pool of payload references for the stack sender's write buffers holds every flow's
/// send buffer full at this many flows ([`refs_for`]: 64 KiB per flow in buffers of half
/// that, 5 each with the margin, 327,680 in all; 20,480 at 4,096 flows). A reference
/// is an mbuf without a data room (about 190 bytes with its pool header): about 62 MB of
/// DPDK memory. (Above 4,096 flows the stack sender's send buffers are 17,376 bytes, see
/// `Rig::gen_config`.) With more flows than this, some flows' writes wait for others' to
/// be acknowledged.
pub const MAX_FLOWS: u32 = 65_536;
/// weir-sink's defaults (`--gro-flush-ns`, `--max-flows`, `--rcvbuf`).
pub const FLUSH_NS: u64 = 20_000;
/// The GRO table's runs (weir-sink's `--max-flows`). Enough for 65,536 flows interleaved
/// per segment: a run is held at most the flush window, so at most the segments of one
/// window are held at once (20 µs at 12 M segments/s, faster than any row here: 240). An overflow would flush the oldest run early ([`FlushReason::Eviction`], in
/// each row's JSON), never lose a segment.
const GRO_FLOWS: usize = 4096;
const RCVBUF: u32 = 4 << 20;
/// The generator's MSS (Linux's on a 1,500-byte MTU with timestamps).
pub(crate) const MSS: u16 = 1448;
/// Segments per application write: 45 x 1,448 = 65,160 bytes, the whole number of
/// segments closest to a 64 KiB write (see the module documentation).
pub(crate) const SEGS_PER_WRITE: u32 = 45;

/// [`crate::gen::engine::slices_needed`] for `flows` stack senders at [`MSS`]: the payload
/// references the rig's pool holds (at least one per mbuf a pool may need).
fn refs_for(flows: u32) -> u32 {
    let cfg = GenConfig {
        flows,
        mss: MSS,
        pattern_period: u32::from(MSS),
        ..GenConfig::default()
    };
    crate::gen::engine::slices_needed(&cfg).min(u64::from(u32::MAX >> 1)) as u32
}

/// Copies of the payload pattern the rig's references need at once
/// ([`pool::pattern_copies`] of [`refs_for`] at [`MAX_FLOWS`]).
fn pattern_copies() -> usize {
    pool::pattern_copies(u64::from(refs_for(MAX_FLOWS)))
}

/// What the receiving lcore does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Drop,
    /// The drop loop that also reads each frame's header lines (`RxWork::DropReadHeaders`).
    Headers,
    Stack,
    /// `Stack` fed by the hand-rolled frame generator instead of weir's TCP: the
    /// anchor for the stack sender's cycles per segment.
    StackOldGen,
    NoGro,
    SwChecksum,
}

impl Mode {
    const ALL: [Mode; 6] = [
        Mode::Drop,
        Mode::Headers,
        Mode::Stack,
        Mode::StackOldGen,
        Mode::NoGro,
        Mode::SwChecksum,
    ];
    /// The name `--only` takes.
    fn key(self) -> &'static str {
        match self {
            Mode::Drop => "drop",
            Mode::Headers => "headers",
            Mode::Stack => "stack",
            Mode::StackOldGen => "stack-oldgen",
            Mode::NoGro => "no-gro",
            Mode::SwChecksum => "sw-csum",
        }
    }
    /// What the receiving core does with each burst in this mode.
    fn work(self) -> RxWork {
        match self {
            Mode::Drop => RxWork::Drop,
            Mode::Headers => RxWork::DropReadHeaders,
            Mode::Stack | Mode::StackOldGen | Mode::NoGro | Mode::SwChecksum => RxWork::Stack,
        }
    }
    /// `true` for the loops that free what they receive (no TCP, no ACKs).
    fn drops(self) -> bool {
        self.work() != RxWork::Stack
    }
    /// Which generator sends: the hand-rolled frame generator for the drop loops (open
    /// loop, `--blast`) and the anchor row, weir's TCP for the others.
    fn sender(self) -> SenderKind {
        match self {
            Mode::Drop | Mode::Headers | Mode::StackOldGen => SenderKind::HandRolled,
            Mode::Stack | Mode::NoGro | Mode::SwChecksum => SenderKind::Stack,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Mode::Drop => "drop",
            Mode::Headers => "drop+headers",
            Mode::Stack => "stack",
            Mode::StackOldGen => "stack, hand-rolled sender",
            Mode::NoGro => "stack --no-gro",
            Mode::SwChecksum => "stack --sw-csum",
        }
    }
}

/// Which engine generates the traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderKind {
    /// weir-gen's flows on weir's TCP ([`crate::gen::Gen`]).
    Stack,
    /// The hand-rolled frame generator ([`crate::gen::Sender`]): open loop for the drop
    /// loops, and the anchor the stack sender is measured beside.
    HandRolled,
}

/// One case's figures.
#[derive(Clone, Debug)]
struct Sample {
    seg_per_s: f64,
    gbit_s: f64,
    /// Receiver cycles per frame in the generator's data phase (the whole run's if the
    /// phase snapshots are missing: `data_phase_measured`).
    cycles_per_seg: f64,
    /// Receiver cycles per frame over the whole run (handshakes and closes included).
    cycles_per_seg_whole_run: f64,
    data_phase_measured: bool,
    /// Frames the receiver took per loop iteration that did anything, in the data phase
    /// (the whole run's without the phase snapshots): whether it worked on full bursts
    /// (up to `MAX_BURST`) or paid each iteration's fixed cost over a few frames.
    frames_per_busy_iteration: f64,
    seg_per_unit: f64,
    seg_per_ack: f64,
    busy_fraction: f64,
    /// Generator cycles per data segment in its data phase
    /// ([`crate::gen::driver::GenReport::data_phase`]; the whole run's when it had none).
    gen_cycles_per_seg: f64,
    /// Generator cycles per data segment over the whole run (every flow's handshake and
    /// close included).
    gen_cycles_per_seg_whole_run: f64,
    retransmits: u64,
    /// GRO bypasses begun ([`stack::gro::GroStats::bypasses`]).
    gro_bypasses: u64,
    /// Data segments the generator sent (retransmissions included) over the whole run.
    generator_segments: u64,
    /// Frames the receiver took from the ring over the whole run.
    receiver_rx_packets: u64,
    /// Frames (ACKs) the receiver's transmit ring refused over the whole run: dropped
    /// and counted (`tx.queue_full`); each may cost a flow an RTO.
    receiver_tx_dropped: u64,
    /// Of those, the ones refused in the data phase (all of them if the phase snapshots
    /// are missing).
    receiver_tx_dropped_data_phase: u64,
    /// Segments the receiver had already received (`tcp.duplicate_segments`): the
    /// generator's retransmissions of data that had arrived.
    receiver_duplicates: u64,
    /// Segments into GRO over the whole run, handshakes and closes included
    /// ([`stack::gro::GroStats::segments_in`]).
    gro_segments_in: u64,
    /// GRO's units by flush reason over the whole run ([`stack::gro::GroStats::flushes`]):
    /// the handshakes' and closes' segments leave as `passthrough`, bypassed segments as
    /// `bypass`, runs flushed for a full table as `eviction`.
    gro_flushes: [u64; FlushReason::COUNT],
    clean: bool,
    /// Why the case was not clean (`None` when it was).
    unclean: Option<String>,
}

/// Two lcores, a ring port pair and the pools: the set-up `weir-bench e2e` and the lab's
/// ring runs share. One per process (one EAL).
pub(crate) struct Rig {
    pub(crate) eal: Eal,
    pub(crate) worker: u32,
    pub(crate) gen_port: Port,
    pub(crate) rx_port: Port,
    pub(crate) gen_plain: Mempool,
    gen_stamped: Mempool,
    /// One mbuf per run holds the payload pattern the stack sender's write buffers
    /// refer to (`gen_refs`: one mbuf each).
    gen_pattern: Mempool,
    gen_refs: Mempool,
    pub(crate) rx_pool: Mempool,
    /// The generator's MAC.
    pub(crate) gen_mac: [u8; 6],
    /// The receiver's MAC.
    pub(crate) rx_mac: [u8; 6],
    pub(crate) clock: Clock,
}

/// What one ring run hands back.
pub(crate) struct RingRun {
    /// The generator's report.
    pub(crate) gen: GenReport,
    /// The receiver's result.
    pub(crate) rx: ReceiverResult,
    /// Stamped buffers found damaged after the run ([`GenPool::verify_stamps`]).
    pub(crate) stamps_damaged: u64,
}

impl Rig {
    /// EAL on lcores 0-1 (`program` names the file prefix) with its memory on `memory`,
    /// the ring pair, the receiver's pool and the generator's two pools (plain, and
    /// stamped with one full segment of the MSS-period pattern).
    pub(crate) fn new(program: &str, memory: Memory) -> Result<Rig> {
        let args = bench_eal_args(program, "0-1", memory, 2048);
        let eal = Eal::init(&args).context(memory.eal_init_context())?;
        let worker = *eal
            .worker_lcores()
            .first()
            .ok_or_else(|| anyhow!("the EAL has no worker lcore (needs -l 0-1: two cores)"))?;
        let (a, b) = dpdk::ring_port_pair_sized(&eal, "e2e", RING_SIZE, ACK_RING_SIZE)
            .context("creating the ring pair")?;
        let room = dpdk::DEFAULT_DATA_ROOM;
        // Every pool's data rooms are written once now (zeros, or the stamp): with
        // --no-huge, the first touch of each 4 KiB page is a page fault, which would
        // otherwise land in the first case's busy cycles.
        let zeros = vec![0u8; usize::from(room) - dpdk::sys::RTE_PKTMBUF_HEADROOM as usize];
        let gen_plain = Mempool::new_stamped(&eal, "e2e_gen", POOL_MBUFS, 256, room, 0, &zeros)
            .context("creating the generator's mbuf pool")?;
        let stamp = Payload::with_period(usize::from(MSS))
            .bytes(0, usize::from(MSS))
            .to_vec();
        let gen_stamped =
            Mempool::new_stamped(&eal, "e2e_gen_data", POOL_MBUFS, 256, room, HDR_LEN, &stamp)
                .context("creating the generator's stamped mbuf pool")?;
        let rx_pool = Mempool::new_stamped(&eal, "e2e_rx", RX_POOL_MBUFS, 256, room, 0, &zeros)
            .context("creating the receiver's mbuf pool")?;
        let pattern_len = Payload::with_period(usize::from(MSS)).as_bytes().len();
        // Copies enough for every reference at once (one copy carries at most 65,533),
        // for two runs: a run's copies go back to the pool when its last reference does.
        let copies = 2 * pattern_copies() as u32;
        let gen_pattern = Mempool::new(&eal, "e2e_pattern", copies, 0, (pattern_len + 128) as u16)
            .context("creating the payload pattern's pool")?;
        let gen_refs = Mempool::new(&eal, "e2e_refs", refs_for(MAX_FLOWS), 256, 0)
            .context("creating the pool of payload references")?;
        let mut gen_port = Port::configure(&eal, a, gen_plain, &PortConfig::default())?;
        let mut rx_port = Port::configure(&eal, b, rx_pool, &PortConfig::default())?;
        // The receiver's ACKs may leave with TX checksum offload requested; the generator
        // completes them as the receiver's NIC would (see the module documentation).
        rx_port.model_tx_checksum_offload();
        gen_port.start()?;
        rx_port.start()?;
        Ok(Rig {
            worker,
            gen_mac: gen_port.mac()?,
            rx_mac: rx_port.mac()?,
            gen_port,
            rx_port,
            gen_plain,
            gen_stamped,
            gen_pattern,
            gen_refs,
            rx_pool,
            clock: Clock::new(&eal),
            eal,
        })
    }

    /// The generator's pools on its port: the stamp is one full segment of the
    /// MSS-period pattern.
    fn gen_pool(&self) -> GenPool {
        let stamp = Payload::with_period(usize::from(MSS))
            .bytes(0, usize::from(MSS))
            .to_vec();
        let id = self.gen_port.id();
        GenPool::with_stamped(
            self.gen_plain.for_port(id),
            self.gen_stamped.for_port(id),
            stamp,
        )
    }

    /// [`Rig::gen_pool`] with the payload pattern for the stack sender's write buffers
    /// (fresh copies of the pattern each run, [`pattern_copies`]; stamped segments, nothing
    /// chained).
    fn stack_gen_pool(&self) -> Result<GenPool> {
        let payload = Payload::with_period(usize::from(MSS));
        let data = pool::share_copies(&self.gen_pattern, payload.as_bytes(), pattern_copies())
            .map_err(|e| anyhow!(e))?;
        Ok(self
            .gen_pool()
            .with_pattern(data, self.gen_refs, usize::from(MSS), false))
    }

    /// Frees whatever a case left in either ring.
    pub(crate) fn drain(&self) -> Result<()> {
        let mut b: Burst<Mbuf> = Burst::new();
        for port in [&self.gen_port, &self.rx_port] {
            let mut q = port.rx_queue(0)?;
            let mut empty = 0;
            while empty < 3 {
                if q.rx_burst(&mut b) == 0 {
                    empty += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                b.clear();
            }
        }
        Ok(())
    }

    /// Runs `gen` on the worker lcore and the receiver (`pipeline`, or one of the drop
    /// loops, as `work` says) here for about `secs` seconds plus the close; then empties the
    /// rings and checks every stamped buffer.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &self,
        kind: SenderKind,
        gen: GenConfig,
        pipeline: PipelineConfig,
        work: RxWork,
        nic_rx_checksum: bool,
        secs: f64,
    ) -> Result<RingRun> {
        gen.validate().map_err(|e| anyhow!(e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let report: Arc<Mutex<Option<GenReport>>> = Arc::new(Mutex::new(None));
        let io = GenIo::new(
            self.gen_port.rx_queue(0)?,
            self.gen_port.tx_queue(0)?,
            match kind {
                SenderKind::Stack => self.stack_gen_pool()?,
                SenderKind::HandRolled => self.gen_pool(),
            },
            self.clock,
            nic_rx_checksum,
        );
        // The generator starts once the receiver's pipeline is built: its tables (a
        // million connections with `--tables`) may take longer than a SYN's timeout.
        let ready = Arc::new(AtomicBool::new(false));
        // The receiver snapshots its counters as the generator's phase moves on: the
        // data phase is measured apart from the handshakes and closes.
        let phase = Arc::new(AtomicU8::new(driver::PHASE_SETUP));
        let launched = launch_generator_after(
            &self.eal,
            self.worker,
            kind,
            io,
            gen,
            secs,
            &stop,
            &report,
            Some(ready.clone()),
            Some(phase.clone()),
        )?;
        let rx = run_receiver_signalling(
            ReceiverCore {
                rx: self.rx_port.rx_queue(0)?,
                tx: self.rx_port.tx_queue(0)?,
                pool: self.rx_pool.for_port(self.rx_port.id()),
                clock: self.clock,
                cfg: pipeline,
                digest: false,
                work,
                stop: stop.clone(),
            },
            Some(ready),
            Some(phase),
        );
        stop.store(true, Ordering::Relaxed);
        let code = launched.join();
        let rx = rx?;
        match code {
            Ok(0) => {}
            other => bail!("the generator's lcore failed ({other:?})"),
        }
        let g = report
            .lock()
            .map_err(|_| anyhow!("generator report lock poisoned"))?
            .take()
            .ok_or_else(|| anyhow!("the generator reported nothing"))?;
        self.drain()?;
        let (_, damaged) = self.gen_pool().verify_stamps();
        Ok(RingRun {
            stamps_damaged: damaged + g.stamps_damaged,
            gen: g,
            rx,
        })
    }

    /// The receiver's pipeline as weir-sink configures it by default (`gro`: the flush
    /// window and the busy hold in ns, `None` for `--no-gro`; `nic`: TX checksum offload for ACKs, as
    /// weir-sink asks for on a NIC that has it).
    /// Its connection table holds twice the flows (at least 1,024), its GRO table
    /// [`GRO_FLOWS`] runs; `tables` raises the connection table to at least that many.
    pub(crate) fn pipeline_config(
        &self,
        gro: Option<(u64, u64)>,
        flows: u32,
        nic: bool,
        tables: u32,
    ) -> PipelineConfig {
        PipelineConfig {
            local: LocalAddrs::new(self.rx_mac, Some(RX_IP), None),
            gro: gro.map(|(ns, busy)| GroConfig {
                flush_ns: Duration::from_nanos(ns),
                busy_hold_ns: Duration::from_nanos(busy),
                max_flows: GRO_FLOWS,
                ..GroConfig::default()
            }),
            tcp: TcpConfig {
                max_conns: (flows as usize * 2).max(1024).max(tables as usize),
                rcv_buf: RCVBUF,
                seed: 0x6532_6500 ^ u64::from(flows),
                ..TcpConfig::default()
            },
            listen: vec![(PORT, AckPolicy::default())],
            tx_csum_offload: nic,
        }
    }

    /// The bench's senders: `flows` bulk senders sharing the ring as `interleave` says,
    /// full-sized segments from the stamped pool (see the module documentation);
    /// `blast`: open loop. The stack sender opens every flow before it writes
    /// ([`GenConfig::open_first`]).
    pub(crate) fn gen_config(
        &self,
        flows: u32,
        secs: f64,
        blast: bool,
        interleave: Interleave,
    ) -> GenConfig {
        GenConfig {
            flows,
            src_mac: self.gen_mac,
            dst_mac: Some(self.rx_mac),
            src_ip: GEN_IP,
            dst_ip: RX_IP,
            dst_port: PORT,
            mss: MSS,
            write_size: SEGS_PER_WRITE * u32::from(MSS),
            pattern_period: u32::from(MSS),
            duration: Some(Duration::from_nanos((secs * 1e9) as u64)),
            bytes_per_flow: None,
            interleave,
            blast,
            // Below the receiver's half-open table (256): no SYN cookies in the way.
            max_half_open: 128,
            // Every flow open before the data phase: at 65,536 flows the handshakes take
            // seconds, and a row must measure all its flows at once.
            open_first: true,
            // Above 4,096 flows, 12 segments (17,376 bytes) of send buffer per flow: at
            // 65,536 flows still 1.1 GB written ahead, but the close (every flow sends
            // what it has written, then its FIN) takes seconds, not tens.
            snd_buf: (flows > 4096).then_some(12 * u32::from(MSS)),
            seed: 0x5eed ^ u64::from(flows),
            ..GenConfig::default()
        }
    }

    /// Runs one case of `weir-bench e2e`.
    fn case(&self, mode: Mode, flows: u32, o: &Options) -> Result<Sample> {
        let (secs, sw_checksum) = (o.seconds, o.sw_checksum);
        let gro = matches!(mode, Mode::Stack | Mode::StackOldGen | Mode::SwChecksum)
            .then_some((o.gro_flush_ns, o.gro_busy_hold_ns));
        let nic = !sw_checksum && mode != Mode::SwChecksum;
        let r = self.run(
            mode.sender(),
            self.gen_config(flows, secs, mode.drops(), o.interleave),
            self.pipeline_config(gro, flows, nic, o.tables),
            mode.work(),
            nic,
            secs,
        )?;
        Ok(sample(mode, flows, &r))
    }
}

/// Starts the generator (`kind`) on worker lcore `worker` for about `secs` seconds (plus
/// the close), storing its report in `report` and setting `stop` when it is done (the
/// receiver on the main lcore stops then). The ring-transfer tests launch it the same way.
#[allow(clippy::too_many_arguments)]
pub fn launch_generator(
    eal: &Eal,
    worker: u32,
    kind: SenderKind,
    io: GenIo,
    cfg: GenConfig,
    secs: f64,
    stop: &Arc<AtomicBool>,
    report: &Arc<Mutex<Option<GenReport>>>,
) -> Result<dpdk::Launched> {
    launch_generator_after(eal, worker, kind, io, cfg, secs, stop, report, None, None)
}

/// [`launch_generator`], the generator first waiting until `ready` is set (the
/// receiver's pipeline is built) or `stop` is (it then sends nothing and fails), and
/// publishing its `phase` ([`RunOpts::phase`]).
#[allow(clippy::too_many_arguments)]
fn launch_generator_after(
    eal: &Eal,
    worker: u32,
    kind: SenderKind,
    mut io: GenIo,
    cfg: GenConfig,
    secs: f64,
    stop: &Arc<AtomicBool>,
    report: &Arc<Mutex<Option<GenReport>>>,
    ready: Option<Arc<AtomicBool>>,
    phase: Option<Arc<AtomicU8>>,
) -> Result<dpdk::Launched> {
    let stop = stop.clone();
    let report = report.clone();
    Ok(eal.remote_launch(worker, move || {
        if let Some(r) = ready {
            while !r.load(Ordering::Acquire) {
                if stop.load(Ordering::Relaxed) {
                    return 1;
                }
                std::hint::spin_loop();
            }
        }
        let never = AtomicBool::new(false);
        // At the end of the data phase every flow still sends what it has written (up to
        // its 64 KiB send buffer) before its FIN: at 65,536 flows gigabytes, so the close
        // may take as long again as the data (10 s, and 1 s more per 4,096 flows).
        let close_grace = Duration::from_secs(10 + u64::from(cfg.flows / 4096));
        // The handshakes come first (`open_first`): 30 s for them.
        let max_runtime =
            Duration::from_nanos((secs * 1e9) as u64) + close_grace + Duration::from_secs(30);
        let r = match kind {
            SenderKind::HandRolled => {
                let mut sender = Sender::new(cfg);
                driver::run(
                    &mut sender,
                    &mut io,
                    RunOpts {
                        stop: &never,
                        close_grace,
                        max_runtime,
                        tick: None,
                        // In process: the receiver reads the ring after the sender ends.
                        linger: Duration::ZERO,
                        phase: phase.as_deref(),
                    },
                )
            }
            SenderKind::Stack => match Gen::new(cfg) {
                Ok(mut gen) => driver::run(
                    &mut gen,
                    &mut io,
                    RunOpts {
                        stop: &never,
                        close_grace,
                        max_runtime,
                        tick: None,
                        // In process: the receiver reads the ring after the sender ends.
                        linger: Duration::ZERO,
                        phase: phase.as_deref(),
                    },
                ),
                Err(e) => {
                    eprintln!("weir-bench: the stack sender refused its configuration: {e}");
                    stop.store(true, Ordering::Relaxed);
                    return 1;
                }
            },
        };
        drop(io);
        if let Ok(mut slot) = report.lock() {
            *slot = Some(r);
        }
        stop.store(true, Ordering::Relaxed);
        0
    })?)
}

fn sample(mode: Mode, flows: u32, r: &RingRun) -> Sample {
    let (g, s): (&GenReport, &Stats) = (&r.gen, &r.rx.stats);
    let secs = (g.data_ns as f64 / 1e9).max(1e-9);
    let segs = s.pipeline.rx_packets as f64;
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    // The data phase: the receiver's counters between the generator's first data segment
    // and the end of its data phase (the whole run if the snapshots are missing).
    let data_phase = match r.rx.at_phase.as_slice() {
        [a, b, ..] if b.pipeline.rx_packets > a.pipeline.rx_packets => Some(ratio(
            b.lp.busy_cycles.saturating_sub(a.lp.busy_cycles) as f64,
            (b.pipeline.rx_packets - a.pipeline.rx_packets) as f64,
        )),
        _ => None,
    };
    let frames_per_busy_iteration = match r.rx.at_phase.as_slice() {
        [a, b, ..] => ratio(
            b.pipeline.rx_packets.saturating_sub(a.pipeline.rx_packets) as f64,
            b.lp.busy_iterations.saturating_sub(a.lp.busy_iterations) as f64,
        ),
        _ => ratio(segs, s.lp.busy_iterations as f64),
    };
    let tx_dropped_data_phase = match r.rx.at_phase.as_slice() {
        [a, b, ..] => b.lp.tx_dropped.saturating_sub(a.lp.tx_dropped),
        _ => s.lp.tx_dropped,
    };
    let unclean = if r.stamps_damaged > 0 {
        Some(format!("{} stamped buffers damaged", r.stamps_damaged))
    } else if mode.drops() || (g.finished && g.stats.closed == u64::from(flows)) {
        None
    } else {
        let st = &g.stats;
        Some(format!(
            "{} of {flows} flows closed cleanly (finished: {}; established {}, reset {}, timed out {}, not started {}, unresolved {})",
            st.closed, g.finished, st.established, st.resets, st.timeouts, st.not_started, st.unresolved
        ))
    };
    let gro = &s.gro;
    Sample {
        seg_per_s: segs / secs,
        gbit_s: (g.stats.bytes as f64) * 8.0 / secs / 1e9,
        cycles_per_seg: data_phase.unwrap_or(ratio(s.lp.busy_cycles as f64, segs)),
        cycles_per_seg_whole_run: ratio(s.lp.busy_cycles as f64, segs),
        data_phase_measured: data_phase.is_some(),
        frames_per_busy_iteration,
        seg_per_unit: s.segments_per_unit(),
        seg_per_ack: s.segments_per_ack(),
        busy_fraction: ratio(s.lp.busy_iterations as f64, s.lp.iterations as f64),
        gen_cycles_per_seg: g.data_phase.map_or(
            ratio(g.busy_cycles as f64, g.stats.segments as f64),
            |(c, n)| ratio(c as f64, n as f64),
        ),
        gen_cycles_per_seg_whole_run: ratio(g.busy_cycles as f64, g.stats.segments as f64),
        retransmits: g.stats.retransmits,
        gro_bypasses: gro.bypasses,
        gro_segments_in: gro.segments_in,
        generator_segments: g.stats.segments,
        receiver_rx_packets: s.pipeline.rx_packets,
        receiver_tx_dropped: s.lp.tx_dropped,
        receiver_tx_dropped_data_phase: tx_dropped_data_phase,
        receiver_duplicates: s.tcp.duplicate_segments,
        gro_flushes: gro.flushes,
        clean: unclean.is_none(),
        unclean,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Options of [`run`].
#[derive(Clone, Debug)]
pub struct Options {
    /// One JSON object per row (and one per check).
    pub json: bool,
    /// Seconds of data per case.
    pub seconds: f64,
    /// Rounds; medians are reported.
    pub runs: usize,
    /// Flow counts.
    pub flows: Vec<u32>,
    /// The receiver verifies every checksum in software in every mode (no modelled RX
    /// checksum offload; the `stack --sw-csum` row is then left out as redundant).
    pub sw_checksum: bool,
    /// Run only these modes (`drop`, `headers`, `stack`, `no-gro`, `sw-csum`); empty: all.
    pub only: Vec<String>,
    /// How the generator's flows share the ring (printed with the results).
    pub interleave: Interleave,
    /// The receiver's GRO flush window in ns (weir-sink's default, [`FLUSH_NS`], unless
    /// asked otherwise): how long a run may wait for its flow's next segment.
    pub gro_flush_ns: u64,
    /// The receiver's GRO hold while its queue is backlogged, in ns (weir-sink's
    /// `--gro-busy-hold-ns`; 0, its default, is off).
    pub gro_busy_hold_ns: u64,
    /// Where DPDK's memory (the three mbuf pools) comes from (`--hugepages`: 2 MiB pages,
    /// reserved beforehand).
    pub memory: Memory,
    /// Size the receiver's connection table (`TcpConfig::max_conns`) for at least this many
    /// connections (0: as weir-sink sizes it, [`Rig::pipeline_config`]); GRO's table keeps
    /// its runs.
    pub tables: u32,
}

/// Runs `runs` rounds of every mode at every flow count, `seconds` of data each, and
/// prints the medians (a table, or one JSON object per row with `json`) and the checks
/// ([`checks`]).
pub fn run(o: &Options) -> Result<()> {
    let (json_out, secs) = (o.json, o.seconds);
    if !(secs.is_finite() && secs > 0.0) {
        bail!("--seconds {secs}: give a positive number");
    }
    let rig = Rig::new("weir-bench-e2e", o.memory)?;
    let runs = o.runs.max(1);
    let all: &[Mode] = if o.sw_checksum {
        &[Mode::Drop, Mode::Headers, Mode::Stack, Mode::NoGro]
    } else {
        &Mode::ALL
    };
    for name in &o.only {
        if !Mode::ALL.iter().any(|m| m.key() == name) {
            bail!("--only {name}: give drop, headers, stack, no-gro or sw-csum");
        }
    }
    let modes: Vec<Mode> = all
        .iter()
        .copied()
        .filter(|m| o.only.is_empty() || o.only.iter().any(|n| n == m.key()))
        .collect();
    let mut results: Vec<(Mode, u32, Vec<Sample>)> = Vec::new();
    for &f in &o.flows {
        for &m in &modes {
            results.push((m, f, Vec::new()));
        }
    }
    let pb = crate::progress::bar((runs * results.len()) as u64, "weir-bench e2e");
    for r in 0..runs {
        for (mode, f, v) in results.iter_mut() {
            pb.set_message(format!(
                "round {}/{runs}: {f} flows, {}",
                r + 1,
                mode.name()
            ));
            let s = rig
                .case(*mode, *f, o)
                .with_context(|| format!("{} flows, {}", f, mode.name()))?;
            v.push(s);
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    for (mode, f, v) in &results {
        for (i, why) in v
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i, s.unclean.as_ref()?)))
        {
            eprintln!(
                "weir-bench e2e: {f} flows, {}, round {}: not clean: {why}",
                mode.name(),
                i + 1
            );
        }
    }
    let m = |v: &[Sample], f: fn(&Sample) -> f64| median(v.iter().map(f).collect());
    let checksums = if o.sw_checksum {
        "in software at the receiver, received and ACKs (--sw-checksum)"
    } else {
        "NIC offload modelled: frames arrive marked good, ACK checksums completed by the \
         generator (stack --sw-csum: all in software at the receiver)"
    };
    let model = format!(
        "interleave {}, GRO flush {} us{}, MSS {MSS}, writes of {SEGS_PER_WRITE} segments \
         ({} B, PSH on the last), payload stamped (headers only written per segment), \
         checksums {checksums}, mbufs on {}",
        o.interleave,
        o.gro_flush_ns as f64 / 1000.0,
        if o.gro_busy_hold_ns > 0 {
            format!(
                " (up to {} us while backlogged)",
                o.gro_busy_hold_ns as f64 / 1000.0
            )
        } else {
            String::new()
        },
        SEGS_PER_WRITE * u32::from(MSS),
        o.memory.describe(),
    );
    if json_out {
        println!(
            "{}",
            json!({"model": model, "interleave": o.interleave.to_string(), "gro_flush_ns": o.gro_flush_ns,
                   "gro_busy_hold_ns": o.gro_busy_hold_ns,
                   "mss": MSS, "write_size": SEGS_PER_WRITE * u32::from(MSS),
                   "stamped_payload": true, "nic_checksum_offload": !o.sw_checksum,
                   "hugepages": o.memory == Memory::Hugepages})
        );
    } else {
        println!("weir-bench e2e: medians of {runs} rounds of {secs} s, weir-gen -> ring pair -> receiver on lcore 0");
        println!("model: {model}");
        println!(
            "{:>6} {:<15} {:>12} {:>9} {:>11} {:>9} {:>8} {:>6} {:>9} {:>5}",
            "flows",
            "mode",
            "seg/s",
            "Gbit/s",
            "cycles/seg",
            "seg/unit",
            "seg/ACK",
            "busy",
            "gen c/seg",
            "clean"
        );
    }
    for (mode, f, v) in &results {
        let clean = v.iter().all(|s| s.clean);
        let retx: u64 = v.iter().map(|s| s.retransmits).sum();
        if json_out {
            println!(
                "{}",
                json!({"flows": f, "mode": mode.name(),
                       "segments_per_s": m(v, |s| s.seg_per_s),
                       "payload_gbit_s": m(v, |s| s.gbit_s),
                       "receiver_cycles_per_segment": m(v, |s| s.cycles_per_seg),
                       "receiver_cycles_per_segment_whole_run": m(v, |s| s.cycles_per_seg_whole_run),
                       "receiver_cycles_data_phase": v.iter().all(|s| s.data_phase_measured),
                       "gro_segments_per_unit": m(v, |s| s.seg_per_unit),
                       "segments_per_ack": m(v, |s| s.seg_per_ack),
                       "receiver_busy_fraction": m(v, |s| s.busy_fraction),
                       "receiver_frames_per_busy_iteration": m(v, |s| s.frames_per_busy_iteration),
                       "generator_cycles_per_segment": m(v, |s| s.gen_cycles_per_seg),
                       "generator_cycles_per_segment_whole_run": m(v, |s| s.gen_cycles_per_seg_whole_run),
                       "gro_bypasses": m(v, |s| s.gro_bypasses as f64),
                       "gro_segments_in": m(v, |s| s.gro_segments_in as f64),
                       "generator_segments": m(v, |s| s.generator_segments as f64),
                       "receiver_rx_packets": m(v, |s| s.receiver_rx_packets as f64),
                       "receiver_tx_dropped": m(v, |s| s.receiver_tx_dropped as f64),
                       "receiver_tx_dropped_data_phase": m(v, |s| s.receiver_tx_dropped_data_phase as f64),
                       "receiver_duplicates": m(v, |s| s.receiver_duplicates as f64),
                       "gro_flushes": FlushReason::ALL.iter().map(|r| (r.name().to_string(),
                           json!(median(v.iter().map(|s| s.gro_flushes[r.index()] as f64).collect())))).collect::<serde_json::Map<_, _>>(),
                       "tables": o.tables,
                       "retransmits": retx, "clean_close": clean, "runs": v.len()})
            );
        } else {
            let dash = |x: f64| {
                if x > 0.0 {
                    format!("{x:.1}")
                } else {
                    "-".into()
                }
            };
            println!(
                "{:>6} {:<15} {:>12.0} {:>9.3} {:>11.1} {:>9} {:>8} {:>5.0}% {:>9.1} {:>5}",
                f,
                mode.name(),
                m(v, |s| s.seg_per_s),
                m(v, |s| s.gbit_s),
                m(v, |s| s.cycles_per_seg),
                dash(m(v, |s| s.seg_per_unit)),
                dash(m(v, |s| s.seg_per_ack)),
                m(v, |s| s.busy_fraction) * 100.0,
                m(v, |s| s.gen_cycles_per_seg),
                if clean { "yes" } else { "NO" },
            );
            let lost = m(v, |s| s.receiver_tx_dropped_data_phase as f64);
            if lost > 0.0 {
                println!(
                    "       the receiver dropped {lost:.0} ACKs in the data phase (its transmit ring and backlog full, tx.queue_full): the row measures the RTOs they cost too"
                );
            }
        }
    }
    let at = |mode: Mode, flows: u32, f: fn(&Sample) -> f64| {
        results
            .iter()
            .find(|(m2, fl, v)| *m2 == mode && *fl == flows && !v.is_empty())
            .map(|(_, _, v)| m(v, f))
    };
    let div = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::INFINITY };
    let cps = |s: &Sample| s.cycles_per_seg;
    for c in checks(&o.flows, |mode, flows| at(mode, flows, cps)) {
        if json_out {
            println!("{}", c.json());
        } else {
            println!("{}", c.line());
        }
    }
    // For reference, not a check: the 64-flow stack against the drop loops (the retired
    // "stack <= 2x drop" target, docs/decisions/ring-pair-floor.md), and how long GRO's
    // runs can be at this window.
    if let (Some(stack), Some(drop)) = (at(Mode::Stack, 64, cps), at(Mode::Drop, 64, cps)) {
        let headers = at(Mode::Headers, 64, cps);
        let rate = at(Mode::Stack, 64, |s| s.seg_per_s).unwrap_or(0.0);
        let bound = match o.interleave {
            Interleave::Segment => Some(runs_bound(o.gro_flush_ns, rate, 64)),
            Interleave::Train(_) => None,
        };
        let unit = at(Mode::Stack, 64, |s| s.seg_per_unit);
        if json_out {
            println!(
                "{}",
                json!({"reference": "64 flows: stack against the drop loops",
                       "stack_cycles_per_segment": stack, "drop_cycles_per_segment": drop,
                       "stack_over_drop": div(stack, drop),
                       "headers_cycles_per_segment": headers,
                       "stack_over_headers": headers.map(|h| div(stack, h)),
                       "segments_per_unit": unit,
                       "runs_bound_segments_per_unit": bound})
            );
        } else {
            println!(
                "for reference (64 flows): stack {stack:.1} cycles/segment vs drop {drop:.1} = {:.2}x{}",
                div(stack, drop),
                headers.map_or(String::new(), |h| format!(
                    ", vs drop+headers (the drop loop reading each frame's two header lines) {h:.1} = {:.2}x",
                    div(stack, h)
                ))
            );
            if let (Some(b), Some(u)) = (bound, unit) {
                println!(
                    "  in a {} ns window at {:.2} M segments/s, with full bursts of {} frames, a run of one of 64 interleaved flows gathers about {b:.1} segments (measured {u:.1} per unit)",
                    o.gro_flush_ns,
                    rate / 1e6,
                    stack::driver::MAX_BURST
                );
            }
        }
    }
    Ok(())
}

/// One of the checks on the run's medians: `figure <= bound x anchor`.
#[derive(Clone, Debug, PartialEq)]
struct Check {
    /// What is checked, e.g. "4096 flows: stack <= 2x stack at 64 flows".
    name: String,
    /// What the figure and the anchor are, for the printed line.
    figure_name: String,
    anchor_name: String,
    /// Median receiver cycles per segment of the checked row, and of its anchor (`None`:
    /// the row was not run).
    figure: Option<f64>,
    anchor: Option<f64>,
    bound: f64,
}

impl Check {
    fn ratio(&self) -> Option<f64> {
        match (self.figure, self.anchor) {
            (Some(f), Some(a)) if a > 0.0 => Some(f / a),
            (Some(_), Some(_)) => Some(f64::INFINITY),
            _ => None,
        }
    }

    /// "met", "not met", or "not run" (a row the check needs was not run).
    fn status(&self) -> &'static str {
        match self.ratio() {
            None => "not run",
            Some(r) if r <= self.bound => "met",
            Some(_) => "not met",
        }
    }

    fn json(&self) -> serde_json::Value {
        json!({"check": self.name, "figure": self.figure_name, "anchor": self.anchor_name,
               "figure_cycles_per_segment": self.figure,
               "anchor_cycles_per_segment": self.anchor,
               "ratio": self.ratio().filter(|r| r.is_finite()),
               "bound": self.bound, "status": self.status(),
               "met": self.status() == "met"})
    }

    fn line(&self) -> String {
        let val = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
        format!(
            "check ({}): {} {} cycles/segment vs {} {} = {} (<= {}x): {}",
            self.name,
            self.figure_name,
            val(self.figure),
            self.anchor_name,
            val(self.anchor),
            self.ratio().map_or("-".to_string(), |r| format!("{r:.2}x")),
            self.bound,
            self.status()
        )
    }
}

/// The checks of `weir-bench e2e`, on the medians `cps(mode, flows)` (`None`
/// for a row not run): flow-count scaling (the stack at 4,096 flows interleaved per
/// segment costs at most 2x its cycles per segment at 64 flows, at 65,536 at most 3x),
/// and GRO never costs more than it saves (at every flow count run, GRO on at most 1.05x
/// the cycles per segment of GRO off).
fn checks(flows: &[u32], cps: impl Fn(Mode, u32) -> Option<f64>) -> Vec<Check> {
    let mut v = Vec::new();
    for (n, bound) in [(4096u32, 2.0), (65_536, 3.0)] {
        v.push(Check {
            name: format!("{n} flows: stack <= {bound}x stack at 64 flows"),
            figure_name: format!("stack at {n} flows"),
            anchor_name: "stack at 64 flows".into(),
            figure: cps(Mode::Stack, n),
            anchor: cps(Mode::Stack, 64),
            bound,
        });
    }
    for &f in flows {
        v.push(Check {
            name: format!("{f} flows: GRO on <= 1.05x GRO off"),
            figure_name: format!("stack at {f} flows"),
            anchor_name: "stack --no-gro".into(),
            figure: cps(Mode::Stack, f),
            anchor: cps(Mode::NoGro, f),
            bound: 1.05,
        });
    }
    v
}

/// About how many segments one GRO run gathers when `flows` flows are interleaved one
/// segment at a time at an average `seg_per_s` and a run is due `window_ns` after its
/// first segment. Its flow's segments come every `flows` segment times: the first and then
/// one per `flows / seg_per_s` seconds of the window. While the receiver is backlogged,
/// every receive burst is full ([`stack::driver::MAX_BURST`] frames, `MAX_BURST / flows` of
/// each flow's segments) and one iteration takes `MAX_BURST / seg_per_s`: a run takes its
/// flow's segments from the burst that started it and from every later burst up to and
/// including the one in which it is due (due runs are flushed at the end of a burst,
/// after taking its segments). The larger of the two, at most 45 (a 64 KiB write of
/// 1,448-byte segments ends a run with PSH). The arrivals are burstier than the average,
/// and a busy hold (`--gro-busy-hold-ns`) lengthens runs while the receiver is backlogged.
fn runs_bound(window_ns: u64, seg_per_s: f64, flows: u32) -> f64 {
    let flows = f64::from(flows.max(1));
    let in_window = window_ns as f64 * 1e-9 * seg_per_s;
    let per_window = 1.0 + in_window / flows;
    let burst = stack::driver::MAX_BURST as f64;
    let bursts = 1.0 + (in_window / burst).ceil();
    let per_bursts = burst / flows * bursts;
    per_window.max(per_bursts).min(f64::from(SEGS_PER_WRITE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_bound_counts_a_flows_arrivals_in_the_window() {
        // 64 flows at 12.8 M segments/s: a flow's segment every 5 µs, 5 in 20 µs; but a
        // full burst of 256 holds 4 of each and takes 20 µs, so a run takes the next
        // burst's 4 as well, in which it is due: 8.
        assert_eq!(runs_bound(20_000, 12.8e6, 64), 8.0);
        assert_eq!(runs_bound(5_000, 12.8e6, 64), 8.0);
        // Due within the burst that started it: only that burst's 4.
        assert_eq!(runs_bound(0, 12.8e6, 64), 4.0);
        // Slower: 20 µs hold 128 segments, half a burst; still one more burst: 8.
        assert_eq!(runs_bound(20_000, 6.4e6, 64), 8.0);
        // Due at 40 µs, in the third burst: 12; at 50 µs, in the fourth: 16.
        assert_eq!(runs_bound(40_000, 12.8e6, 64), 12.0);
        assert_eq!(runs_bound(50_000, 12.8e6, 64), 16.0);
        // 4,096 flows: a burst holds less than one of each; the window decides.
        assert_eq!(runs_bound(20_000, 409.6e6, 4096), 3.0);
        assert!((runs_bound(20_000, 1e6, 4096) - (1.0 + 20.0 / 4096.0)).abs() < 1e-9);
        // One flow fills a 64 KiB write long before the window ends.
        assert_eq!(runs_bound(20_000, 6.4e6, 1), 45.0);
        assert_eq!(runs_bound(20_000, 0.0, 0), 45.0);
    }

    #[test]
    fn checks_compare_medians_and_say_not_run_for_missing_rows() {
        let cps = |m: Mode, f: u32| match (m, f) {
            (Mode::Stack, 64) => Some(100.0),
            (Mode::Stack, 4096) => Some(150.0),
            (Mode::NoGro, 64) => Some(90.0),
            (Mode::NoGro, 4096) => Some(150.0),
            _ => None,
        };
        let c = checks(&[64, 4096], cps);
        let st: Vec<(&str, &str)> = c.iter().map(|c| (c.name.as_str(), c.status())).collect();
        assert_eq!(
            st,
            [
                ("4096 flows: stack <= 2x stack at 64 flows", "met"),
                ("65536 flows: stack <= 3x stack at 64 flows", "not run"),
                ("64 flows: GRO on <= 1.05x GRO off", "not met"),
                ("4096 flows: GRO on <= 1.05x GRO off", "met"),
            ]
        );
        assert_eq!(c[0].ratio(), Some(1.5));
        assert_eq!(c[1].json()["met"], false);
        assert_eq!(c[1].json()["ratio"], serde_json::Value::Null);
        assert!(c[1].line().ends_with(": not run"), "{}", c[1].line());
        // A zero anchor is not met.
        let c = checks(&[], |m, f| {
            (m == Mode::Stack).then_some(if f == 64 { 0.0 } else { 1.0 })
        });
        assert_eq!(c[0].status(), "not met");
    }

    #[test]
    fn the_rig_holds_every_flows_send_buffer_at_its_largest_row() {
        // Send buffers of 64 KiB at both counts, in buffers of half that (two, and three
        // more for write ends and refusals), and one chain in flight.
        assert_eq!(refs_for(4096), 4096 * 5 + 64);
        assert_eq!(refs_for(MAX_FLOWS), 65_536 * 5 + 64);
    }

    #[test]
    fn every_mode_has_its_own_key_and_only_the_drop_loops_drop() {
        for (i, a) in Mode::ALL.iter().enumerate() {
            for b in &Mode::ALL[i + 1..] {
                assert_ne!(a.key(), b.key());
                assert_ne!(a.name(), b.name());
            }
        }
        let drops: Vec<&str> = Mode::ALL
            .iter()
            .filter(|m| m.drops())
            .map(|m| m.key())
            .collect();
        assert_eq!(drops, ["drop", "headers"]);
    }
}
