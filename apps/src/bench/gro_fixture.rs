//! The side-by-side GRO benchmark's fixture (`weir-bench gro` and the criterion benches in
//! `benches/benches/gro.rs`): identical bursts of real mbufs, fed to weir's GRO (`stack::gro`) and to DPDK's `rte_gro` in heavyweight
//! mode ([`dpdk::gro::GroCtx`]), each timed over the same work.
//!
//! # The input
//!
//! Bursts of [`BURST`] mbufs, each an Ethernet + IPv4 + TCP frame with timestamps (`NOP
//! NOP TS`: a 32-byte TCP header) and [`MSS`] bytes of payload, flags ACK only, DF set and
//! IP ID 0, a fixed TSval per flow: everything `rte_gro` needs to merge (it merges only
//! `flags == ACK` with byte-identical options; with DF it ignores the IP ID,
//! docs/reference/prior-art.md §1). Checksums are correct, and the mbufs carry what a NIC with RX
//! checksum offload and packet classification sets: `packet_type` (Ether/IPv4/TCP),
//! `l2_len`/`l3_len`/`l4_len` (which `rte_gro` reads instead of parsing) and "checksum
//! good" flags (which spare weir's parser a software checksum; `rte_gro` checks none).
//! Each flow's sequence numbers advance across bursts, so its runs are contiguous over
//! time. Two arrival [`Pattern`]s: [`Pattern::Rr`] and [`Pattern::Train`].
//!
//! Building a burst is outside the timed region, and cheap: every mbuf of the pool is
//! filled with the (fixed) payload once, in [`prepare_pool`]; a freed mbuf keeps it, so a
//! burst costs a bulk allocation and a 66-byte header copy per frame (the sequence number
//! and TCP checksum patched incrementally, RFC 1624). The clock keeps running while the
//! next burst is built (about 1 µs): both implementations see the real TSC, so the
//! generator acts as an inter-burst gap, the same for both.
//!
//! # The timed region
//!
//! From the input burst to the coalesced output handed on, including freeing what a real
//! receiver frees ([`Receiver::process`]):
//!
//! - weir ([`WeirGro`]), as `stack::pipeline` runs it: `now` from the [`Clock`], every
//!   frame to [`Gro::handle_frame`] (the parser's fixed-offset checks, then GRO on the
//!   header words), any frame it gives back to [`stack::wire::parse_into`] and
//!   [`Gro::handle_segment`], then [`Gro::end_of_burst`] (which with `flush_ns > 0` is
//!   [`Gro::flush_expired`]); every output [`Segment`] is handed to a consumer that keeps
//!   nothing, so GRO frees its mbufs ([`PacketBuf::free_batch`], gathered over the
//!   call) as it frees whatever TCP leaves;
//! - `rte_gro` ([`RteGro`]): `rte_gro_reassemble`, then `rte_gro_timeout_flush` with the
//!   window in TSC cycles (0: flush everything each burst, like weir's `flush_ns = 0`);
//!   unprocessed and flushed mbufs (chains, when merged) are freed the same way, with
//!   [`PacketBuf::free_batch`]. That puts a one-segment mbuf back into its pool itself
//!   and hands a chain to `rte_pktmbuf_free_bulk` (`dpdk::mbuf`): walking `rte_gro`'s
//!   chains the same way, inline, did not make its side faster
//!   (`docs/decisions/gro-window-zero.md`).
//!
//! Output units are counted on both sides (weir: segments emitted; `rte_gro`: packets
//! flushed or left unprocessed), so segments per unit is input segments over units.

use std::net::Ipv4Addr;

use arrayvec::ArrayVec;
use dpdk::gro::GroCtx;
use dpdk::{Clock, Eal, Mbuf, Mempool, PacketType};
use stack::buf::{ChecksumStatus, PacketBuf, RxChecksum};
use stack::gro::{Gro, GroConfig};
use stack::segment::Segment;
use stack::seq::SeqNumber;
use stack::time::Duration;
use stack::wire::{parse_into, LocalAddrs, Parsed, TcpFlags, TcpFrame, TcpOptions, Timestamp};

use crate::eal_args::{bench_eal_args, Memory};

/// Frames per burst (a typical `rte_eth_rx_burst` size).
pub const BURST: usize = 32;
/// Payload bytes per segment (a 1500-byte MTU less IPv4, TCP and the timestamp option).
pub const MSS: usize = 1448;
/// Segments in a [`Pattern::Train`] train (45 x 1448 bytes fill 64 KiB: a TSO burst).
pub const TRAIN: u64 = 45;
/// Ethernet (14) + IPv4 (20) + TCP with timestamps (32).
pub const HEADER_LEN: usize = 66;
/// Frame length on the wire (without FCS).
pub const FRAME_LEN: usize = HEADER_LEN + MSS;
/// Flow counts of the benchmark's rows.
pub const FLOW_COUNTS: [u32; 5] = [1, 16, 256, 4096, 65_536];
/// Flush windows of the benchmark's rows, in nanoseconds.
pub const FLUSH_NS: [u64; 3] = [0, 2_000, 100_000];
/// `rte_gro`'s `max_item_per_flow`: room for a 100 µs window of one flow's segments.
pub const RTE_ITEMS_PER_FLOW: u16 = 64;

/// The most items an `rte_gro` TCP/IPv4 table holds (DPDK 22.11's
/// `GRO_TCP4_TBL_MAX_ITEM_NUM`, 1,048,576); its items are one pool the flows share.
pub const RTE_MAX_ITEMS: u32 = 1 << 20;

/// Offset of the TCP sequence number in the frame.
const SEQ_AT: usize = 14 + 20 + 4;
/// Offset of the TCP checksum in the frame.
const CSUM_AT: usize = 14 + 20 + 16;

/// weir's MAC in the generated frames.
const LOCAL_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// The senders' MAC.
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// weir's address (RFC 2544 benchmarking range).
const LOCAL_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

/// The order in which flows' segments arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Flows interleaved segment by segment (round robin): the worst case for a flow
    /// table, every segment touches a different flow.
    Rr,
    /// Each flow sends a [`TRAIN`]-segment train back to back (as a TSO sender does),
    /// flows taking turns.
    Train,
}

impl Pattern {
    /// Both patterns, in report order.
    pub const ALL: [Pattern; 2] = [Pattern::Rr, Pattern::Train];

    /// The name used in reports and JSON (`"rr"`, `"train"`).
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Rr => "rr",
            Pattern::Train => "train",
        }
    }

    /// The flow that segment number `k` (counted over all flows) belongs to.
    #[inline]
    fn flow_of(self, k: u64, flows: u64) -> usize {
        let f = match self {
            Pattern::Rr => k,
            Pattern::Train => k / TRAIN,
        };
        (f % flows) as usize
    }
}

/// EAL arguments for a benchmark process: no PCI probing, no hugepages, 1 GiB, a file
/// prefix unique to the process, one lcore.
pub fn eal_args(tag: &str) -> Vec<String> {
    eal_args_with(tag, Memory::NoHuge)
}

/// [`eal_args`] with the memory `memory` says.
pub fn eal_args_with(tag: &str, memory: Memory) -> Vec<String> {
    bench_eal_args(&format!("weir-bench-{tag}"), "0", memory, 1024)
}

/// weir's addresses as the generated frames address it.
pub fn local_addrs() -> LocalAddrs {
    LocalAddrs::new(LOCAL_MAC, Some(LOCAL_IP), None)
}

/// The payload every segment carries (fixed, so that a freed mbuf can be reused with
/// only its header rewritten).
fn payload() -> Vec<u8> {
    (0..MSS).map(|i| (i * 7 + 3) as u8).collect()
}

/// Mbufs in the benchmark's pool: far more than either implementation holds in a 100 µs
/// window (about 3,000 segments at 30 Mpps).
pub const POOL_MBUFS: u32 = 32_767;

/// Creates the benchmark's mempool and writes the payload into every mbuf of it (a freed
/// mbuf keeps its bytes, so [`Generator::fill`] then writes only headers).
pub fn prepare_pool(eal: &Eal, name: &str) -> dpdk::Result<Mempool> {
    let pool = Mempool::new(
        eal,
        name,
        POOL_MBUFS,
        dpdk::DEFAULT_CACHE,
        dpdk::DEFAULT_DATA_ROOM,
    )?;
    let payload = payload();
    let mut all = Vec::with_capacity(POOL_MBUFS as usize);
    while let Some(mut m) = pool.alloc_len(FRAME_LEN) {
        m.data_mut()[HEADER_LEN..].copy_from_slice(&payload);
        all.push(m);
    }
    drop(all); // back to the pool, payload in place
    Ok(pool)
}

/// One flow's prebuilt header (sequence number 0) and where its stream has got to.
#[derive(Clone)]
struct FlowTemplate {
    hdr: [u8; HEADER_LEN],
    /// The TCP checksum of the whole frame with sequence number 0.
    csum0: u16,
    /// Sequence number of the flow's next segment.
    seq: u32,
}

/// The frame description of flow `i` (its sequence number left at 0).
fn flow_frame(i: u32) -> TcpFrame {
    TcpFrame {
        src_mac: PEER_MAC,
        dst_mac: LOCAL_MAC,
        vlan: None,
        src_ip: Ipv4Addr::new(198, 19, (i / 250) as u8, (i % 250 + 1) as u8).into(),
        dst_ip: LOCAL_IP.into(),
        sport: 10_000 + (i % 50_000) as u16,
        dport: 5201,
        seq: SeqNumber(0),
        ack: SeqNumber(1_000 + i),
        flags: TcpFlags::ACK,
        window: 512,
        opts: TcpOptions {
            timestamp: Some(Timestamp {
                tsval: 100_000 + i,
                tsecr: 7,
            }),
            ..TcpOptions::default()
        },
        ttl: 64,
        ip_id: 0,
    }
}

/// Builds bursts of frames for `flows` flows in one [`Pattern`].
pub struct Generator {
    pool: Mempool,
    pattern: Pattern,
    flows: Vec<FlowTemplate>,
    /// Segments generated so far.
    fed: u64,
}

impl Generator {
    /// A generator drawing mbufs from `pool` (made by [`prepare_pool`]).
    pub fn new(pool: Mempool, pattern: Pattern, flows: u32) -> Generator {
        let payload = payload();
        let flows = (0..flows.max(1))
            .map(|i| {
                let f = flow_frame(i).to_vec(&payload);
                assert_eq!(f.len(), FRAME_LEN, "unexpected frame layout");
                let mut hdr = [0u8; HEADER_LEN];
                hdr.copy_from_slice(&f[..HEADER_LEN]);
                FlowTemplate {
                    hdr,
                    csum0: u16::from_be_bytes([f[CSUM_AT], f[CSUM_AT + 1]]),
                    // Flows start at different points of the sequence space.
                    seq: i.wrapping_mul(0x9e37_79b9),
                }
            })
            .collect();
        Generator {
            pool,
            pattern,
            flows,
            fed: 0,
        }
    }

    /// Number of flows.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Segments generated so far.
    pub fn fed(&self) -> u64 {
        self.fed
    }

    /// Fills `burst` (which must be empty) with the next [`BURST`] frames.
    ///
    /// # Panics
    /// When the pool is exhausted: the receiver under test holds more than
    /// [`POOL_MBUFS`] mbufs, which neither does in these runs.
    #[inline]
    pub fn fill(&mut self, burst: &mut ArrayVec<Mbuf, BURST>) {
        debug_assert!(burst.is_empty());
        assert!(
            self.pool.alloc_bulk(burst, BURST),
            "benchmark mempool exhausted: {} mbufs in use",
            self.pool.in_use()
        );
        let nflows = self.flows.len() as u64;
        let ptype = PacketType(
            dpdk::sys::RTE_PTYPE_L2_ETHER
                | dpdk::sys::RTE_PTYPE_L3_IPV4
                | dpdk::sys::RTE_PTYPE_L4_TCP,
        );
        let good = RxChecksum {
            ip: ChecksumStatus::Good,
            l4: ChecksumStatus::Good,
        };
        for m in burst.iter_mut() {
            let f = &mut self.flows[self.pattern.flow_of(self.fed, nflows)];
            self.fed += 1;
            let seq = f.seq;
            f.seq = seq.wrapping_add(MSS as u32);
            // An allocated mbuf is empty; its bytes are still the payload prepare_pool wrote.
            let Some(data) = m.append(FRAME_LEN as u16) else {
                panic!("benchmark mbufs hold less than {FRAME_LEN} bytes");
            };
            data[..HEADER_LEN].copy_from_slice(&f.hdr);
            data[SEQ_AT..SEQ_AT + 4].copy_from_slice(&seq.to_be_bytes());
            data[CSUM_AT..CSUM_AT + 2].copy_from_slice(&csum_with_seq(f.csum0, seq).to_be_bytes());
            m.set_packet_type(ptype);
            m.set_header_lens(14, 20, 32);
            m.set_rx_checksum(good);
        }
    }
}

/// The TCP checksum of a frame whose checksum was `csum0` with sequence number 0, after
/// the sequence number becomes `seq` (RFC 1624 incremental update: `HC' = ~(~HC + m')`,
/// the old field being zero).
#[inline]
fn csum_with_seq(csum0: u16, seq: u32) -> u16 {
    let mut sum = u32::from(!csum0) + (seq >> 16) + (seq & 0xffff);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}

/// A GRO implementation under test: takes bursts, hands on (frees) coalesced output.
pub trait Receiver {
    /// `"weir"` or `"rte_gro"`.
    fn name(&self) -> &'static str;
    /// Processes one burst (leaving it empty): the timed work.
    fn process(&mut self, burst: &mut ArrayVec<Mbuf, BURST>);
    /// Flushes whatever is held (end of a run; not timed).
    fn finish(&mut self);
    /// Output units so far.
    fn units(&self) -> u64;
}

/// weir's GRO behind its parser, as the pipeline runs it.
pub struct WeirGro {
    gro: Gro<Mbuf>,
    clock: Clock,
    local: LocalAddrs,
    parsed: Parsed,
    units: u64,
}

/// The most runs weir's table is given: weir-sink's default (`GroConfig::max_flows`),
/// which holds one flush window's runs at any flow count (a run lives at most the window).
pub const WEIR_TABLE_RUNS: u32 = 4096;

impl WeirGro {
    /// weir's GRO for `flows` flows (the table's capacity, as `rte_gro`'s
    /// `max_flow_num`, up to [`WEIR_TABLE_RUNS`] as deployed: at 65,536 flows a table
    /// of 65,536 runs would only spread one window's runs over more memory), runs of up
    /// to 64 segments or 65,535 bytes. A table that fills flushes its oldest run early
    /// (counted, `FlushReason::Eviction`), never losing a segment.
    pub fn new(clock: Clock, flows: u32, flush_ns: u64) -> WeirGro {
        WeirGro {
            gro: Gro::new(GroConfig {
                flush_ns: Duration::from_nanos(flush_ns),
                max_flows: flows.min(WEIR_TABLE_RUNS) as usize,
                ..GroConfig::default()
            }),
            clock,
            local: local_addrs(),
            parsed: Parsed::Drop(stack::wire::DropReason::TruncatedEthernet),
            units: 0,
        }
    }

    /// The GRO stage (for its counters).
    pub fn gro(&self) -> &Gro<Mbuf> {
        &self.gro
    }
}

impl Receiver for WeirGro {
    fn name(&self) -> &'static str {
        "weir"
    }

    #[inline]
    fn process(&mut self, burst: &mut ArrayVec<Mbuf, BURST>) {
        let now = self.clock.now();
        let WeirGro {
            gro,
            local,
            parsed,
            units,
            ..
        } = self;
        // Handing a unit on: the consumer takes nothing, so GRO frees its mbufs when
        // this returns (as it frees what TCP leaves).
        let mut out = |_: &mut Segment<Mbuf>| *units += 1;
        for m in burst.drain(..) {
            // As the pipeline does: the common layout straight into GRO, the rest parsed.
            let Err(m) = gro.handle_frame(now, m, local, &mut out) else {
                continue;
            };
            parse_into(m.data(), m.rx_checksum(), local, parsed);
            match parsed {
                Parsed::Tcp(meta) => gro.handle_segment(now, meta, m, &mut out),
                _ => drop(m),
            }
        }
        gro.end_of_burst(now, &mut out);
    }

    fn finish(&mut self) {
        let units = &mut self.units;
        self.gro.flush_all(&mut |_| *units += 1);
    }

    fn units(&self) -> u64 {
        self.units
    }
}

/// DPDK's `rte_gro` in heavyweight mode.
pub struct RteGro {
    ctx: GroCtx,
    timeout_cycles: u64,
    out: ArrayVec<Mbuf, 256>,
    units: u64,
}

impl RteGro {
    /// A context for TCP/IPv4 with `max_flow_num = flows` and
    /// [`RTE_ITEMS_PER_FLOW`] items per flow, flushing what is `flush_ns` old after each
    /// burst (the window converted to TSC cycles with `clock`).
    ///
    /// `max_flow_num` is 16 bits: at 65,536 flows the table has room for 65,535, and the
    /// items per flow shrink so that the table stays within [`RTE_MAX_ITEMS`] (DPDK cuts
    /// a larger one to that size; the items are shared by all flows). Neither limits
    /// these rows: with the flows interleaved, only the flows of one flush window are in
    /// the table at once.
    pub fn new(eal: &Eal, clock: &Clock, flows: u32, flush_ns: u64) -> dpdk::Result<RteGro> {
        let flows = u16::try_from(flows.max(1)).unwrap_or(u16::MAX);
        let items = u16::try_from(RTE_MAX_ITEMS / u32::from(flows))
            .unwrap_or(u16::MAX)
            .clamp(1, RTE_ITEMS_PER_FLOW);
        Ok(RteGro {
            ctx: GroCtx::new(eal, flows, items, 0)?,
            timeout_cycles: clock.ns_to_cycles(flush_ns),
            out: ArrayVec::new(),
            units: 0,
        })
    }

    /// Packets the context holds.
    pub fn held(&self) -> usize {
        self.ctx.held()
    }

    fn flush(&mut self, timeout_cycles: u64) {
        loop {
            let n = self.ctx.timeout_flush(timeout_cycles, &mut self.out);
            self.units += n as u64;
            // Handing packets on is freeing them here (chains in full), in one bulk
            // free as weir frees its units' payload.
            Mbuf::free_batch(&mut self.out);
            if n < self.out.capacity() {
                break;
            }
        }
    }
}

impl Receiver for RteGro {
    fn name(&self) -> &'static str {
        "rte_gro"
    }

    #[inline]
    fn process(&mut self, burst: &mut ArrayVec<Mbuf, BURST>) {
        self.ctx.reassemble(burst);
        // Unprocessed packets are passed on as they are.
        self.units += burst.len() as u64;
        Mbuf::free_batch(burst);
        self.flush(self.timeout_cycles);
    }

    fn finish(&mut self) {
        self.flush(0);
    }

    fn units(&self) -> u64 {
        self.units
    }
}

/// Feeds `bursts` bursts from `gen` to `rx`; returns the TSC cycles spent in
/// [`Receiver::process`] (building the bursts is not counted).
#[inline(never)]
pub fn run_bursts<R: Receiver>(rx: &mut R, gen: &mut Generator, bursts: u64) -> u64 {
    let mut burst: ArrayVec<Mbuf, BURST> = ArrayVec::new();
    let mut cycles = 0u64;
    for _ in 0..bursts {
        gen.fill(&mut burst);
        let t0 = Clock::cycles();
        rx.process(&mut burst);
        cycles += Clock::cycles().wrapping_sub(t0);
    }
    cycles
}

/// One measurement of one implementation on one row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measurement {
    /// Time in [`Receiver::process`] per input segment, in nanoseconds: the median over
    /// the measurement's chunks (see [`measure_interleaved`]), so that chunks in which the
    /// thread was preempted or a neighbour flooded the caches do not count.
    pub ns_per_segment: f64,
    /// Input segments per output unit (over the whole run, warm-up and final flush
    /// included, so that every segment is counted in exactly one unit).
    pub segments_per_unit: f64,
    /// Time in [`Receiver::process`] per input segment over all chunks (the mean, by the
    /// TSC: includes whatever other processes took of the CPU meanwhile).
    pub wall_ns_per_segment: f64,
    /// The share of the timed phase this thread was on a CPU (1.0 on an idle machine; the
    /// same for both sides of an interleaved measurement). For the record only.
    pub cpu_share: f64,
}

/// This thread's CPU time in nanoseconds (`/proc/thread-self/schedstat`), if readable.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// One side of a measurement: a receiver and its own generator (fresh: its segment count
/// is the input). Two sides built with the same pattern and flow count get the same
/// frames in the same order.
pub struct Lane<'a, R> {
    /// The implementation under test.
    pub rx: &'a mut R,
    /// Its input.
    pub gen: &'a mut Generator,
}

/// The median of `v` (NaN when empty).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Untimed bursts before each timed chunk: one pass over the flows (one burst per
/// [`BURST`] flows, at least one), at most [`REWARM_MAX_FLOWS`]' worth. Past that many
/// flows a pass is not what brings a lane back to its steady state: its flows' state no
/// longer stays in cache between their segments anyway, and 4,096 segments outlast the
/// longest flush window's held runs on either side (weir holds a 100 µs window's segments
/// in about 4,000 of them; `rte_gro` takes far longer per segment). A pass over 65,536
/// flows before each chunk would take `rte_gro` seconds per chunk at a window above 0.
pub fn rewarm_bursts(gen: &Generator) -> u64 {
    gen.flows().min(REWARM_MAX_FLOWS).div_ceil(BURST).max(1) as u64
}

/// See [`rewarm_bursts`].
pub const REWARM_MAX_FLOWS: usize = 4096;

/// Times one or two implementations on the same input, interleaved: each lane runs
/// `warmup` untimed bursts, then `chunks` times a chunk of `chunk_bursts` timed bursts,
/// the lanes taking turns (`a` first on even chunks, `b` first on odd ones), then
/// flushes. Either lane may be absent (profiling one side).
///
/// Why chunks and medians: on a shared machine a neighbour's work slows this thread in
/// bursts (preemption, and on a 2-vCPU VM a sibling hyperthread or the shared cache
/// busy). Taking turns every chunk exposes both implementations to the same neighbour,
/// and the median over many short chunks ignores the chunks a preemption fell on. (The
/// earlier method timed each side for 64 Ki segments in one go and scaled by the CPU
/// share: alternating whole runs let a neighbour's burst fall on one side only, and the
/// scaling occasionally gave absurd single values.) Each chunk is long enough (64 bursts
/// by default, 2,048 segments) that the other lane's chunk in between, a pause in this
/// lane's clock, changes few runs even with a 100 µs window; it does so alike for both.
///
/// Before each timed chunk the lane re-warms, untimed, for one burst per 32 flows
/// ([`rewarm_bursts`]): during the other lane's turn (53 ms for rte_gro at 4,096 flows)
/// this lane's held runs all passed their deadline and its tables left the cache, and a
/// receiver that has its lcore to itself never sees that. Without the re-warm the first
/// bursts of every chunk flushed hundreds of cold runs at once, which at 4,096 flows and
/// a 100 µs window added ~70 ns to each of weir's segments (`--only weir`: 114-168 ns,
/// interleaved: 190-240). Both lanes re-warm alike, for the larger of their two counts
/// (lanes with different flow counts: weir at 1 flow against weir at 4,096).
pub fn measure_interleaved<A: Receiver, B: Receiver>(
    mut a: Option<Lane<'_, A>>,
    mut b: Option<Lane<'_, B>>,
    clock: &Clock,
    warmup: u64,
    chunks: usize,
    chunk_bursts: u64,
) -> (Option<Measurement>, Option<Measurement>) {
    if let Some(l) = &mut a {
        run_bursts(l.rx, l.gen, warmup);
    }
    if let Some(l) = &mut b {
        run_bursts(l.rx, l.gen, warmup);
    }
    // The same re-warm for both lanes (the larger of their own): a 1-flow lane compared
    // with a 4,096-flow one gets as long to bring its lines back as the other.
    let rewarm = [a.as_ref().map(|l| &*l.gen), b.as_ref().map(|l| &*l.gen)]
        .into_iter()
        .flatten()
        .map(rewarm_bursts)
        .max()
        .unwrap_or(1);
    let chunks = chunks.max(1);
    let (mut ca, mut cb) = (Vec::with_capacity(chunks), Vec::with_capacity(chunks));
    let (cpu0, t0) = (thread_cpu_ns(), Clock::cycles());
    for k in 0..chunks {
        for turn in 0..2 {
            if (k + turn) % 2 == 0 {
                if let Some(l) = &mut a {
                    run_bursts(l.rx, l.gen, rewarm);
                    ca.push(run_bursts(l.rx, l.gen, chunk_bursts));
                }
            } else if let Some(l) = &mut b {
                run_bursts(l.rx, l.gen, rewarm);
                cb.push(run_bursts(l.rx, l.gen, chunk_bursts));
            }
        }
    }
    let (cpu1, t1) = (thread_cpu_ns(), Clock::cycles());
    let wall = clock.cycles_to_ns(t1.wrapping_sub(t0)).max(1) as f64;
    let cpu_share = match (cpu0, cpu1) {
        (Some(x), Some(y)) => (y.saturating_sub(x) as f64 / wall).clamp(0.0, 1.0),
        _ => 1.0,
    };
    let segs = chunk_bursts.max(1) * BURST as u64;
    let ma = a.map(|l| summarise(l, &ca, segs, clock, cpu_share));
    let mb = b.map(|l| summarise(l, &cb, segs, clock, cpu_share));
    (ma, mb)
}

/// Flushes `lane` and sums up its chunks' `cycles` (each over `segs` segments).
fn summarise<R: Receiver>(
    lane: Lane<'_, R>,
    cycles: &[u64],
    segs: u64,
    clock: &Clock,
    cpu_share: f64,
) -> Measurement {
    lane.rx.finish();
    let ns = |c: u64| c as f64 * 1e9 / clock.hz() as f64 / segs as f64;
    let mut per: Vec<f64> = cycles.iter().map(|&c| ns(c)).collect();
    Measurement {
        ns_per_segment: median(&mut per),
        segments_per_unit: lane.gen.fed() as f64 / lane.rx.units().max(1) as f64,
        wall_ns_per_segment: ns(cycles.iter().sum()) / cycles.len().max(1) as f64,
        cpu_share,
    }
}

/// [`measure_interleaved`] with one implementation: `warmup` untimed bursts, then
/// `chunks` chunks of `chunk_bursts` bursts; the median chunk is reported.
pub fn measure<R: Receiver>(
    rx: &mut R,
    gen: &mut Generator,
    clock: &Clock,
    warmup: u64,
    chunks: usize,
    chunk_bursts: u64,
) -> Measurement {
    let none: Option<Lane<'_, R>> = None;
    let (m, _) = measure_interleaved(
        Some(Lane { rx, gen }),
        none,
        clock,
        warmup,
        chunks,
        chunk_bursts,
    );
    m.unwrap_or(Measurement {
        ns_per_segment: f64::NAN,
        segments_per_unit: f64::NAN,
        wall_ns_per_segment: f64::NAN,
        cpu_share: f64::NAN,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use stack::wire::parse;

    #[test]
    fn incremental_checksum_matches_a_full_build() {
        let payload = payload();
        for (i, seq) in [(0u32, 0u32), (3, 1), (17, 0xffff_0000), (4095, 0xdead_beef)] {
            let f0 = flow_frame(i).to_vec(&payload);
            let full = TcpFrame {
                seq: SeqNumber(seq),
                ..flow_frame(i)
            }
            .to_vec(&payload);
            let c0 = u16::from_be_bytes([f0[CSUM_AT], f0[CSUM_AT + 1]]);
            let want = u16::from_be_bytes([full[CSUM_AT], full[CSUM_AT + 1]]);
            // 0x0000 and 0xffff are the same one's-complement value.
            let got = csum_with_seq(c0, seq);
            assert!(
                got == want || (got | want == 0xffff && got & want == 0),
                "{got:#x} {want:#x}"
            );
            let mut patched = f0.clone();
            patched[SEQ_AT..SEQ_AT + 4].copy_from_slice(&seq.to_be_bytes());
            patched[CSUM_AT..CSUM_AT + 2].copy_from_slice(&got.to_be_bytes());
            // A software checksum check accepts it.
            let Parsed::Tcp(m) = parse(&patched, RxChecksum::default(), &local_addrs()) else {
                panic!("generated frame does not parse");
            };
            assert_eq!(m.seq, SeqNumber(seq));
            assert_eq!(usize::from(m.payload_len), MSS);
            assert_eq!(m.header_len, 32);
        }
    }

    #[test]
    fn patterns_pick_flows() {
        let rr: Vec<usize> = (0..5).map(|k| Pattern::Rr.flow_of(k, 3)).collect();
        assert_eq!(rr, [0, 1, 2, 0, 1]);
        assert_eq!(Pattern::Train.flow_of(44, 3), 0);
        assert_eq!(Pattern::Train.flow_of(45, 3), 1);
        assert_eq!(Pattern::Train.flow_of(3 * 45, 3), 0);
    }
}
