//! `weir-bench stages [--json]`: ns per segment of each stage of the receive path, measured
//! separately on the same input (field report 003: a regression is found by stage, not by
//! hundreds of bisect builds). `scripts/lab/compare-revisions.sh`
//! runs this for two git revisions and names the stage that got slower.
//!
//! The input, by default: 64 established IPv4 connections, each sending trains of 16
//! MSS-sized (1448-byte) segments with timestamps, one flow's train after the other (as
//! TSO senders put them on the wire), received in bursts of 32 frames. `--flows LIST` and
//! `--train N` change its shape; `--flows 64,4096 --train 1` interleaves the flows one
//! segment at a time, as `weir-bench e2e` does, and prints each stage's cost at 4,096
//! flows over its cost at 64: where the extra cycles of more flows go. The shapes'
//! repetitions take turns, so a slow spell of a shared machine falls on all of them.
//! (Cache misses per stage would need a PMU: `perf stat` reports none on a virtual
//! machine without one, so the split is by time.) Frames are built once per flow;
//! between timed regions only their sequence number and TSval are patched into a copy of
//! each, marked checksum-good as a NIC with RX checksum offload does. Each batch of 4 bursts
//! goes through the stages in the pipeline's order, each stage timed on its own with
//! `std::time::Instant` (the cost of reading the clock is measured and subtracted):
//!
//! - `parse`: `wire::parse_into` of every frame;
//! - `gro`: `Gro::handle_segment` of every parsed segment and `end_of_burst` after each
//!   burst (`flush_ns = 0`: runs of 16);
//! - `tcp`: `Tcp::handle_segment` of every coalesced segment (in order, established), then
//!   the application: the events drained and every readable connection's data consumed
//!   with `recv` (which frees the buffers);
//! - `ack_build`: `Tcp::poll_tx` building every ACK due into buffers from a `VecPool`
//!   (software checksums), per wire segment and per ACK;
//! - `transmit`: the built ACKs moved through an in-memory `TxQueue` (`stack::mem::link`).
//!
//! Timer checks, per call and per segment at one call per 32-frame burst:
//!
//! - `timer_check`: `Pipeline::handle_timeout` when nothing is due (the shape's
//!   connections, a GRO run of 16 held for each with `flush_ns` = 50 µs, none expired);
//! - `poll_timeout`: `Pipeline::poll_timeout` in the same state;
//! - `gro_flush_expired`: `Gro::flush_expired` when every flow's held run of 16 is due
//!   (1,024 segments at 64 flows), per call and per segment flushed.
//!
//! `total` adds parse, gro, tcp, ack_build, transmit and timer_check (per segment). Also
//! printed, outside the total: `parse_sw_csum`, parse with the checksums verified in
//! software (a NIC without RX checksum offload).
//!
//! Every measurement is repeated 5 times and the median is reported.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant as StdInstant;

use anyhow::{bail, Context};
use stack::ack::AckPolicy;
use stack::buf::{ChecksumStatus, PacketBuf, RxChecksum};
use stack::driver::{Burst, TxQueue};
use stack::gro::{Gro, GroConfig};
use stack::mem::{link, VecBuf, VecPool};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::segment::Segment;
use stack::seq::SeqNumber;
use stack::tcp::{ConnId, Event, Tcp, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::{
    parse_into, DropReason, LocalAddrs, Parsed, TcpFlags, TcpFrame, TcpOptions, Timestamp,
};

/// Connections (flows) in the default input.
pub const FLOWS: usize = 64;
/// Segments one flow sends back to back (a TSO train) in the default input.
pub const TRAIN: usize = 16;
/// The longest train an input may have.
pub const MAX_TRAIN: usize = 256;
/// The most flows an input may have (the GRO table and the connection table are sized
/// for them).
pub const MAX_FLOWS: usize = 32_768;
/// Frames per receive burst (DPDK's customary 32). Timer checks run once per burst.
const BURST: usize = 32;
/// Bursts per timed batch: 128 frames, about 190 KB of frames, stays in cache as one
/// pipeline iteration's burst would.
const BURSTS_PER_BATCH: usize = 4;
/// Frames per batch.
const BATCH: usize = BURST * BURSTS_PER_BATCH;
/// TCP payload per segment (MTU 1500 with timestamps).
const MSS: usize = 1448;
/// Repetitions of each measurement; the median is reported.
const REPEATS: usize = 5;
/// Segments per repetition of the pipeline stages.
const SEGMENTS: usize = 1 << 18;
/// Segments a flow holds in the timer measurements (a run of 16 stays held, whatever the
/// input's train).
const HELD: usize = 16;
/// Calls per repetition of the idle timer checks.
const TIMER_CALLS: usize = 2_000_000;
/// Flushes per repetition of `gro_flush_expired`.
const FLUSHES: usize = 200;
/// The GRO hold time of the timer measurements (a run is due this long after it starts).
const HOLD: Duration = Duration::from_micros(50);
/// Virtual time between batches.
const BATCH_GAP: Duration = Duration::from_micros(10);
/// The port weir listens on.
const PORT: u16 = 5001;

const WEIR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const WEIR_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// What a NIC with RX checksum offload reports for a good frame.
const CSUM_GOOD: RxChecksum = RxChecksum {
    ip: ChecksumStatus::Good,
    l4: ChecksumStatus::Good,
};

fn weir_addrs() -> LocalAddrs {
    LocalAddrs::new(WEIR_MAC, Some(WEIR_IP), None)
}

/// One sender flow: its next sequence number and the data frame it sends, built once.
#[derive(Clone)]
struct Flow {
    sport: u16,
    snd_nxt: SeqNumber,
    /// A full data segment (checksums valid for the sequence number it was built with).
    frame: Vec<u8>,
}

/// The senders: handshakes, then trains of data frames, flow after flow.
#[derive(Clone)]
struct Senders {
    flows: Vec<Flow>,
    /// Segments one flow sends in a row.
    train: usize,
    /// Segments of the current round already sent (a round is every flow's train).
    at: usize,
    tsval: u32,
    /// Offset of the sequence number in every data frame.
    seq_at: usize,
    /// Offset of TSval in every data frame.
    tsval_at: usize,
}

fn tcp_frame(sport: u16, seq: SeqNumber, ack: SeqNumber, flags: TcpFlags) -> TcpFrame {
    TcpFrame {
        src_mac: PEER_MAC,
        dst_mac: WEIR_MAC,
        src_ip: IpAddr::V4(PEER_IP),
        dst_ip: IpAddr::V4(WEIR_IP),
        sport,
        dport: PORT,
        seq,
        ack,
        flags,
        window: 502,
        ..TcpFrame::default()
    }
}

/// A frame as received from a NIC that verified its checksums.
fn rx_buf(data: Vec<u8>) -> VecBuf {
    VecBuf::from_vec(data).with_rx_checksum(CSUM_GOOD)
}

impl Senders {
    /// The SYNs opening `flows` flows.
    fn syns(flows: usize) -> Vec<VecBuf> {
        (0..flows)
            .map(|i| {
                let mut f = tcp_frame(sport(i), SeqNumber(1_000_000), SeqNumber(0), TcpFlags::SYN);
                f.opts = TcpOptions {
                    mss: Some(MSS as u16 + 12),
                    wscale: Some(7),
                    sack_permitted: true,
                    timestamp: Some(Timestamp { tsval: 1, tsecr: 0 }),
                    ..TcpOptions::default()
                };
                rx_buf(f.to_vec(&[]))
            })
            .collect()
    }

    /// Reads the receiver's SYN-ACKs and returns the ACKs that complete the handshakes;
    /// the flows they open join `flows`, and `offsets` is set from the first.
    fn from_synacks(
        synacks: &[VecBuf],
        flows: &mut Vec<Flow>,
        offsets: &mut Option<(usize, usize)>,
    ) -> anyhow::Result<Vec<VecBuf>> {
        let peer = LocalAddrs::new(PEER_MAC, Some(PEER_IP), None);
        let mut parsed = Parsed::Drop(DropReason::TruncatedEthernet);
        let mut acks = Vec::with_capacity(synacks.len());
        let payload = vec![0x5a; MSS];
        for b in synacks {
            parse_into(b.data(), CSUM_GOOD, &peer, &mut parsed);
            let Parsed::Tcp(m) = &parsed else {
                bail!("expected a SYN-ACK, got {parsed:?}");
            };
            if !m.flags.contains(TcpFlags::SYN | TcpFlags::ACK) {
                bail!("expected a SYN-ACK, got flags {:?}", m.flags);
            }
            // The flow key is the receiver's view: weir is `src` here, the sender `dst`.
            let sport = m.flow.dport;
            let ack = m.seq + 1;
            let snd_nxt = SeqNumber(1_000_001);
            let mut a = tcp_frame(sport, snd_nxt, ack, TcpFlags::ACK);
            a.opts.timestamp = Some(Timestamp { tsval: 2, tsecr: 0 });
            acks.push(rx_buf(a.to_vec(&[])));
            let mut d = a;
            d.opts.timestamp = Some(Timestamp { tsval: 3, tsecr: 0 });
            let frame = d.to_vec(&payload);
            if offsets.is_none() {
                *offsets = Some(data_offsets(&frame)?);
            }
            flows.push(Flow {
                sport,
                snd_nxt,
                frame,
            });
        }
        Ok(acks)
    }

    /// The next segment of the input (flow `at / train`, its `at % train`th segment of the
    /// round): a copy of the flow's frame with the sequence number and TSval patched in.
    fn next(&mut self) -> VecBuf {
        let f = &mut self.flows[self.at / self.train];
        let seq = f.snd_nxt;
        f.snd_nxt += MSS;
        let mut v = f.frame.clone();
        v[self.seq_at..self.seq_at + 4].copy_from_slice(&seq.get().to_be_bytes());
        v[self.tsval_at..self.tsval_at + 4].copy_from_slice(&self.tsval.to_be_bytes());
        self.at += 1;
        if self.at == self.flows.len() * self.train {
            self.at = 0;
            self.tsval = self.tsval.wrapping_add(1);
        }
        rx_buf(v)
    }

    /// One whole round with trains of `train` (every flow's, in wire order); the input's own
    /// train is kept for what follows. Called in the middle of a round, it starts the next
    /// (the flows that had sent their train this round leave a gap: for GRO alone).
    fn round_of(&mut self, train: usize) -> Vec<VecBuf> {
        if self.at != 0 {
            self.at = 0;
            self.tsval = self.tsval.wrapping_add(1);
        }
        let own = std::mem::replace(&mut self.train, train);
        let v = (0..self.flows.len() * train).map(|_| self.next()).collect();
        self.train = own;
        v
    }
}

/// The source port of flow `i`.
fn sport(i: usize) -> u16 {
    // One peer address: ports 20,000 up, MAX_FLOWS of them.
    (20_000 + i % MAX_FLOWS) as u16
}

/// Offsets of the sequence number and of TSval in a data frame built by [`TcpFrame`].
fn data_offsets(frame: &[u8]) -> anyhow::Result<(usize, usize)> {
    let mut parsed = Parsed::Drop(DropReason::TruncatedEthernet);
    parse_into(frame, CSUM_GOOD, &weir_addrs(), &mut parsed);
    let Parsed::Tcp(m) = &parsed else {
        bail!("data frame does not parse: {parsed:?}");
    };
    let tcp = usize::from(m.payload_off) - usize::from(m.header_len);
    let ts = m.tsval_at.context("data frame without timestamps")?;
    Ok((tcp + 4, tcp + 20 + usize::from(ts)))
}

/// A receiver the handshakes can run against.
trait Receiver {
    fn receive(&mut self, now: Instant, frames: Vec<VecBuf>);
    fn transmit(&mut self, now: Instant, pool: &mut VecPool) -> Vec<VecBuf>;
}

/// The bare TCP stage, fed by parse without GRO (the handshake needs nothing else).
struct BareTcp {
    tcp: Tcp<VecBuf>,
}

impl Receiver for BareTcp {
    fn receive(&mut self, now: Instant, frames: Vec<VecBuf>) {
        let mut parsed = Parsed::Drop(DropReason::TruncatedEthernet);
        for b in frames {
            parse_into(b.data(), b.rx_checksum(), &weir_addrs(), &mut parsed);
            if let Parsed::Tcp(m) = &parsed {
                self.tcp
                    .handle_segment(now, &mut Segment::from_meta(m, b, now));
            }
        }
    }
    fn transmit(&mut self, now: Instant, pool: &mut VecPool) -> Vec<VecBuf> {
        let mut all = Vec::new();
        loop {
            let mut out = Burst::new();
            let n = self.tcp.poll_tx(now, pool, &mut out, false);
            all.extend(out);
            if n == 0 {
                return all;
            }
        }
    }
}

impl Receiver for Pipeline<VecBuf> {
    fn receive(&mut self, now: Instant, frames: Vec<VecBuf>) {
        let mut it = frames.into_iter().peekable();
        while it.peek().is_some() {
            let mut b: Burst<VecBuf> = it.by_ref().take(BURST).collect();
            self.handle_rx_burst(now, &mut b);
        }
    }
    fn transmit(&mut self, now: Instant, pool: &mut VecPool) -> Vec<VecBuf> {
        let mut all = Vec::new();
        loop {
            let mut out = Burst::new();
            let n = self.poll_tx(now, pool, &mut out);
            all.extend(out);
            if n == 0 {
                return all;
            }
        }
    }
}

/// Handshakes at once: below the half-open table, so no SYN cookies answer.
const HANDSHAKES_AT_ONCE: usize = 128;

/// Opens the shape's connections on `rx`, [`HANDSHAKES_AT_ONCE`] at a time, and returns
/// the senders, sorted by port.
fn handshake<R: Receiver>(
    rx: &mut R,
    shape: Shape,
    pool: &mut VecPool,
    now: Instant,
) -> anyhow::Result<Senders> {
    let mut syns = Senders::syns(shape.flows).into_iter().peekable();
    let mut flows = Vec::with_capacity(shape.flows);
    let mut offsets = None;
    while syns.peek().is_some() {
        rx.receive(now, syns.by_ref().take(HANDSHAKES_AT_ONCE).collect());
        let synacks = rx.transmit(now, pool);
        let acks = Senders::from_synacks(&synacks, &mut flows, &mut offsets)?;
        rx.receive(now, acks);
        let _ = rx.transmit(now, pool);
    }
    if flows.len() != shape.flows {
        bail!("{} SYN-ACKs for {} SYNs", flows.len(), shape.flows);
    }
    flows.sort_by_key(|f| f.sport);
    let (seq_at, tsval_at) = offsets.context("no SYN-ACK")?;
    Ok(Senders {
        flows,
        train: shape.train,
        at: 0,
        tsval: 3,
        seq_at,
        tsval_at,
    })
}

/// The input's shape: how many flows, and how many segments each sends in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Connections.
    pub flows: usize,
    /// Segments of one flow back to back (1: flows interleaved one segment at a time).
    pub train: usize,
}

impl Shape {
    /// The default input: 64 flows, trains of 16.
    pub const DEFAULT: Shape = Shape {
        flows: FLOWS,
        train: TRAIN,
    };

    /// A shape of `flows` flows and trains of `train`, checked against the bounds.
    pub fn new(flows: usize, train: usize) -> anyhow::Result<Shape> {
        if !(1..=MAX_FLOWS).contains(&flows) {
            bail!("--flows {flows}: give 1 to {MAX_FLOWS}");
        }
        if !(1..=MAX_TRAIN).contains(&train) {
            bail!("--train {train}: give 1 to {MAX_TRAIN}");
        }
        Ok(Shape { flows, train })
    }
}

fn tcp_config(shape: Shape) -> TcpConfig {
    TcpConfig {
        max_conns: (2 * shape.flows).max(256),
        rcv_buf: 4 << 20,
        ..TcpConfig::default()
    }
}

/// The application: drains the events and consumes every readable connection's data.
/// `ids` is caller-owned scratch space (no allocation once it has grown).
fn consume(tcp: &mut Tcp<VecBuf>, ids: &mut Vec<ConnId>) -> usize {
    ids.clear();
    ids.extend(tcp.events().filter_map(|e| match e {
        Event::Readable(id) => Some(id),
        _ => None,
    }));
    let mut n = 0;
    for &id in ids.iter() {
        n += tcp
            .recv(id, |s| s.iter().map(|x| usize::from(x.len)).sum())
            .unwrap_or(0);
    }
    n
}

/// Cost of an empty timed region (`Instant::now` + `elapsed`), subtracted from each.
fn clock_overhead_ns() -> f64 {
    let mut v: Vec<f64> = (0..REPEATS)
        .map(|_| {
            let n = 100_000;
            let mut sum = 0u128;
            for _ in 0..n {
                let t = StdInstant::now();
                sum += black_box(t.elapsed()).as_nanos();
            }
            sum as f64 / f64::from(n)
        })
        .collect();
    median(&mut v)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Accumulated time of one stage over a repetition.
#[derive(Default, Clone, Copy)]
struct Acc {
    ns: f64,
}

impl Acc {
    /// Adds the time since `t`, less the clock's own cost.
    fn add(&mut self, t: StdInstant, overhead: f64) {
        self.ns += (t.elapsed().as_nanos() as f64 - overhead).max(0.0);
    }
}

/// One repetition of the pipeline stages: ns per segment of parse, gro, tcp, ack_build,
/// transmit, and the ACKs built.
struct PathRep {
    parse: f64,
    gro: f64,
    tcp: f64,
    ack: f64,
    tx: f64,
    acks: usize,
    segments: usize,
}

/// The receiver of the pipeline stages: GRO and TCP side by side, as `Pipeline` wires them.
struct Path {
    gro: Gro<VecBuf>,
    tcp: Tcp<VecBuf>,
    pool: VecPool,
    senders: Senders,
    now: Instant,
}

impl Path {
    fn new(shape: Shape) -> anyhow::Result<Self> {
        let mut bare = BareTcp {
            tcp: Tcp::new(tcp_config(shape)),
        };
        bare.tcp
            .listen(PORT, AckPolicy::linux())
            .map_err(|e| anyhow::anyhow!("listen: {e:?}"))?;
        let mut pool = VecPool::new(1 << 16, 2048);
        let now = Instant::from_nanos(1_000_000_000);
        let senders = handshake(&mut bare, shape, &mut pool, now)?;
        let opened = bare
            .tcp
            .events()
            .filter(|e| matches!(e, Event::Opened(_)))
            .count();
        if opened != shape.flows {
            bail!("{opened} of {} connections opened", shape.flows);
        }
        Ok(Path {
            gro: Gro::new(gro_config(shape, Duration::ZERO)),
            tcp: bare.tcp,
            pool,
            senders,
            now,
        })
    }

    /// Runs `segments` segments (a multiple of [`BATCH`]) through every stage, timing
    /// each.
    fn run(&mut self, segments: usize, overhead: f64) -> anyhow::Result<PathRep> {
        let (tx, mut wire) = link(1 << 16);
        let mut tx = tx;
        let mut parsed: Vec<Parsed> = (0..BATCH)
            .map(|_| Parsed::Drop(DropReason::TruncatedEthernet))
            .collect();
        let mut bufs: Vec<VecBuf> = Vec::with_capacity(BATCH);
        let mut ids: Vec<ConnId> = Vec::with_capacity(self.senders.flows.len());
        let mut out: Burst<VecBuf> = Burst::new();
        let (mut p, mut g, mut t, mut a, mut x): (Acc, Acc, Acc, Acc, Acc) = Default::default();
        let (mut acks, mut bytes) = (0usize, 0usize);
        let local = weir_addrs();
        for _ in 0..segments.div_ceil(BATCH) {
            let now = self.now;
            bufs.clear();
            bufs.extend((0..BATCH).map(|_| self.senders.next()));

            let t0 = StdInstant::now();
            for (b, slot) in bufs.iter().zip(parsed.iter_mut()) {
                parse_into(b.data(), b.rx_checksum(), &local, slot);
            }
            Acc::add(&mut p, t0, overhead);

            // GRO hands each unit to TCP by reference, as the pipeline does (moving
            // units out to time TCP apart would copy a segment, its payload chain's
            // slots included, which GRO never does): TCP's time is measured inside
            // GRO's callback and taken out of GRO's.
            let gro = &mut self.gro;
            let tcp = &mut self.tcp;
            let (mut inner, mut units) = (0.0f64, 0usize);
            let mut deliver = |x: &mut Segment<VecBuf>| {
                let t1 = StdInstant::now();
                tcp.handle_segment(now, x);
                inner += t1.elapsed().as_nanos() as f64;
                units += 1;
            };
            let t0 = StdInstant::now();
            for (i, (b, m)) in bufs.drain(..).zip(parsed.iter()).enumerate() {
                if let Parsed::Tcp(m) = m {
                    gro.handle_segment(now, m, b, &mut deliver);
                }
                if (i + 1) % BURST == 0 {
                    gro.end_of_burst(now, &mut deliver);
                }
            }
            let outer = t0.elapsed().as_nanos() as f64;
            // Each unit's clock reads: one `overhead` inside TCP's time, one more in
            // the whole region's.
            let clocks = units as f64 * overhead;
            t.ns += (inner - clocks).max(0.0);
            g.ns += (outer - inner - clocks - overhead).max(0.0);

            let t0 = StdInstant::now();
            bytes += consume(&mut self.tcp, &mut ids);
            Acc::add(&mut t, t0, overhead);

            loop {
                let t0 = StdInstant::now();
                let n = self.tcp.poll_tx(now, &mut self.pool, &mut out, false);
                Acc::add(&mut a, t0, overhead);
                acks += n;
                let full = out.is_full();
                let t0 = StdInstant::now();
                tx.tx_burst(&mut out);
                Acc::add(&mut x, t0, overhead);
                drop(wire.drain_all());
                if !full {
                    break;
                }
            }
            self.now += BATCH_GAP;
        }
        let segments = segments.div_ceil(BATCH) * BATCH;
        if bytes != segments * MSS {
            bail!(
                "the application read {bytes} bytes of {} sent: the input is not in order",
                segments * MSS
            );
        }
        let per = |a: Acc| a.ns / segments as f64;
        Ok(PathRep {
            parse: per(p),
            gro: per(g),
            tcp: per(t),
            ack: per(a),
            tx: per(x),
            acks,
            segments,
        })
    }
}

/// ns per parse with the checksums verified in software, on valid frames.
fn parse_sw_csum(senders: &Senders, calls: usize) -> f64 {
    let local = weir_addrs();
    let frames: Vec<&[u8]> = senders.flows.iter().map(|f| f.frame.as_slice()).collect();
    let mut parsed = Parsed::Drop(DropReason::TruncatedEthernet);
    let t = StdInstant::now();
    for i in 0..calls {
        parse_into(
            frames[i % frames.len()],
            RxChecksum::default(),
            &local,
            &mut parsed,
        );
        black_box(&parsed);
    }
    t.elapsed().as_nanos() as f64 / calls as f64
}

/// GRO for the shape's flows, holding runs `flush_ns`.
fn gro_config(shape: Shape, flush_ns: Duration) -> GroConfig {
    let d = GroConfig::default();
    GroConfig {
        flush_ns,
        max_flows: d.max_flows.max(shape.flows),
        ..d
    }
}

/// A pipeline with the shape's connections established, fed one round of [`HELD`]
/// segments per flow at `now` so that every flow has a GRO run held (due at
/// `now + HOLD`) and nothing else is due.
fn idle_pipeline(shape: Shape) -> anyhow::Result<(Pipeline<VecBuf>, Instant)> {
    let mut p = Pipeline::new(PipelineConfig {
        local: weir_addrs(),
        gro: Some(gro_config(shape, HOLD)),
        tcp: tcp_config(shape),
        listen: vec![(PORT, AckPolicy::linux())],
        tx_csum_offload: false,
    })
    .map_err(|e| anyhow::anyhow!("pipeline: {e:?}"))?;
    let mut pool = VecPool::new(1 << 16, 2048);
    let mut now = Instant::from_nanos(1_000_000_000);
    let mut senders = handshake(&mut p, shape, &mut pool, now)?;
    let mut ids = Vec::new();
    // Past the quickack phase, everything delivered, ACKed and consumed.
    for _ in 0..4 {
        p.receive(now, senders.round_of(HELD));
        now += HOLD;
        p.handle_timeout(now);
        consume(p.tcp(), &mut ids);
        drop(p.transmit(now, &mut pool));
        now += BATCH_GAP;
    }
    p.receive(now, senders.round_of(HELD));
    consume(p.tcp(), &mut ids);
    drop(p.transmit(now, &mut pool));
    let at = now + Duration::from_micros(1);
    if p.poll_timeout().is_some_and(|d| d <= at) {
        bail!("a timer is due in the idle pipeline");
    }
    if p.stats().gro_held_runs != shape.flows as u64 {
        bail!(
            "{} GRO runs held in the idle pipeline, not one per flow ({})",
            p.stats().gro_held_runs,
            shape.flows
        );
    }
    Ok((p, at))
}

/// ns per `handle_timeout` and per `poll_timeout` call when nothing is due.
fn timer_checks(p: &mut Pipeline<VecBuf>, at: Instant, calls: usize) -> (f64, f64) {
    let t = StdInstant::now();
    for _ in 0..calls {
        p.handle_timeout(black_box(at));
    }
    let handle = t.elapsed().as_nanos() as f64 / calls as f64;
    let t = StdInstant::now();
    for _ in 0..calls {
        black_box(black_box(&*p).poll_timeout());
    }
    let poll = t.elapsed().as_nanos() as f64 / calls as f64;
    (handle, poll)
}

/// ns per `flush_expired` call that flushes one due run of [`HELD`] per flow.
fn flush_expired(senders: &mut Senders, flushes: usize, overhead: f64) -> anyhow::Result<f64> {
    let flows = senders.flows.len();
    let mut gro: Gro<VecBuf> = Gro::new(gro_config(Shape { flows, train: HELD }, HOLD));
    let local = weir_addrs();
    let mut now = Instant::from_nanos(1_000_000_000);
    let mut parsed = Parsed::Drop(DropReason::TruncatedEthernet);
    let mut segs: Vec<Segment<VecBuf>> = Vec::with_capacity(flows * HELD);
    let mut ns = Acc::default();
    for _ in 0..flushes {
        for (i, b) in senders.round_of(HELD).into_iter().enumerate() {
            parse_into(b.data(), b.rx_checksum(), &local, &mut parsed);
            if let Parsed::Tcp(m) = &parsed {
                gro.handle_segment(now, m, b, &mut |s| segs.push(s.take()));
            }
            if (i + 1) % BURST == 0 {
                gro.end_of_burst(now, &mut |s| segs.push(s.take()));
            }
        }
        if !segs.is_empty() || gro.held_runs() != flows {
            bail!("expected {flows} held runs, {} held", gro.held_runs());
        }
        now += HOLD;
        let t0 = StdInstant::now();
        gro.flush_expired(now, &mut |s| segs.push(s.take()));
        ns.add(t0, overhead);
        if segs.len() != flows || gro.held_runs() != 0 {
            bail!("flush_expired flushed {} runs of {flows}", segs.len());
        }
        segs.clear();
        now += BATCH_GAP;
    }
    Ok(ns.ns / flushes as f64)
}

/// One output row.
struct Row {
    stage: &'static str,
    ns_per_segment: f64,
    ns_per_call: Option<f64>,
    ns_per_ack: Option<f64>,
    what: String,
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Every repetition's figures of one shape.
#[derive(Default)]
struct Samples {
    parse: Vec<f64>,
    gro: Vec<f64>,
    tcp: Vec<f64>,
    ack: Vec<f64>,
    tx: Vec<f64>,
    per_ack: Vec<f64>,
    sw: Vec<f64>,
    handle: Vec<f64>,
    poll: Vec<f64>,
    flush: Vec<f64>,
}

/// One shape's receivers and its figures so far.
struct Bench {
    shape: Shape,
    path: Path,
    idle: Pipeline<VecBuf>,
    idle_at: Instant,
    /// The senders of the GRO-only flush measurement: a copy, so that what they send
    /// leaves the connections' sequence numbers where TCP expects them.
    flush_senders: Senders,
    flushes: usize,
    samples: Samples,
}

impl Bench {
    fn new(shape: Shape, overhead: f64) -> anyhow::Result<Self> {
        let mut path = Path::new(shape)?;
        // Warm-up: past every connection's quickack phase (32 segments each is well past
        // it), tables and pools touched.
        path.run(
            (4 * shape.flows * shape.train).max(32 * shape.flows),
            overhead,
        )?;
        let (mut idle, idle_at) = idle_pipeline(shape)?;
        timer_checks(&mut idle, idle_at, TIMER_CALLS / 10);
        Ok(Bench {
            shape,
            flush_senders: path.senders.clone(),
            path,
            idle,
            idle_at,
            // As many runs flushed per repetition at every flow count.
            flushes: (FLUSHES * FLOWS / shape.flows).max(5),
            samples: Samples::default(),
        })
    }

    /// One repetition of every measurement.
    fn repeat(&mut self, overhead: f64) -> anyhow::Result<()> {
        let s = &mut self.samples;
        let r = self.path.run(SEGMENTS, overhead)?;
        s.parse.push(r.parse);
        s.gro.push(r.gro);
        s.tcp.push(r.tcp);
        s.ack.push(r.ack);
        s.tx.push(r.tx);
        s.per_ack
            .push(r.ack * r.segments as f64 / r.acks.max(1) as f64);
        s.sw.push(parse_sw_csum(&self.path.senders, 200_000));
        let (h, q) = timer_checks(&mut self.idle, self.idle_at, TIMER_CALLS);
        s.handle.push(h);
        s.poll.push(q);
        s.flush.push(flush_expired(
            &mut self.flush_senders,
            self.flushes,
            overhead,
        )?);
        Ok(())
    }
}

/// Measures every stage on input of each of `shapes`, the shapes' repetitions taking
/// turns (so that a slower spell of a shared machine falls on all of them), and returns
/// each shape's rows (medians of [`REPEATS`]), `total` last.
fn measure(shapes: &[Shape]) -> anyhow::Result<Vec<Vec<Row>>> {
    let overhead = clock_overhead_ns();
    let mut benches = shapes
        .iter()
        .map(|&shape| {
            Bench::new(shape, overhead)
                .with_context(|| format!("{} flows, trains of {}", shape.flows, shape.train))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    for _ in 0..REPEATS {
        for b in &mut benches {
            b.repeat(overhead)?;
        }
    }
    Ok(benches
        .into_iter()
        .map(|b| rows(b.shape, b.samples))
        .collect())
}

/// A shape's rows from its repetitions' figures: medians, `total` last.
fn rows(shape: Shape, s: Samples) -> Vec<Row> {
    let Samples {
        mut parse,
        mut gro,
        mut tcp,
        mut ack,
        mut tx,
        mut per_ack,
        mut sw,
        mut handle,
        mut poll,
        mut flush,
    } = s;
    let handle = median(&mut handle);
    let poll = median(&mut poll);
    let flush = median(&mut flush);
    let burst = BURST as f64;
    let mut rows = vec![
        Row {
            stage: "parse",
            ns_per_segment: median(&mut parse),
            ns_per_call: None,
            ns_per_ack: None,
            what: "wire::parse_into, NIC-verified checksums".into(),
        },
        Row {
            stage: "gro",
            ns_per_segment: median(&mut gro),
            ns_per_call: None,
            ns_per_ack: None,
            what: format!(
                "Gro::handle_segment + end_of_burst (trains of {})",
                shape.train
            ),
        },
        Row {
            stage: "tcp",
            ns_per_segment: median(&mut tcp),
            ns_per_call: None,
            ns_per_ack: None,
            what: "Tcp::handle_segment of runs + app events/recv".into(),
        },
        Row {
            stage: "ack_build",
            ns_per_segment: median(&mut ack),
            ns_per_call: None,
            ns_per_ack: Some(median(&mut per_ack)),
            what: "Tcp::poll_tx into a VecPool, software checksums".into(),
        },
        Row {
            stage: "transmit",
            ns_per_segment: median(&mut tx),
            ns_per_call: None,
            ns_per_ack: None,
            what: "tx_burst of the ACKs into mem::link".into(),
        },
        Row {
            stage: "timer_check",
            ns_per_segment: handle / burst,
            ns_per_call: Some(handle),
            ns_per_ack: None,
            what: format!(
                "Pipeline::handle_timeout, nothing due, {} runs held (1 call/burst of 32)",
                shape.flows
            ),
        },
        Row {
            stage: "poll_timeout",
            ns_per_segment: poll / burst,
            ns_per_call: Some(poll),
            ns_per_ack: None,
            what: "Pipeline::poll_timeout (1 call/burst of 32)".into(),
        },
        Row {
            stage: "gro_flush_expired",
            ns_per_segment: flush / (shape.flows * HELD) as f64,
            ns_per_call: Some(flush),
            ns_per_ack: None,
            what: format!("Gro::flush_expired, {} runs of {HELD} due", shape.flows),
        },
        Row {
            stage: "parse_sw_csum",
            ns_per_segment: median(&mut sw),
            ns_per_call: None,
            ns_per_ack: None,
            what: "parse_into, checksums in software (not in total)".into(),
        },
    ];
    let total = rows
        .iter()
        .filter(|r| IN_TOTAL.contains(&r.stage))
        .map(|r| r.ns_per_segment)
        .sum();
    rows.push(Row {
        stage: "total",
        ns_per_segment: total,
        ns_per_call: None,
        ns_per_ack: None,
        what: "parse+gro+tcp+ack_build+transmit+timer_check".into(),
    });
    rows
}

/// The stages `total` adds up.
const IN_TOTAL: [&str; 6] = [
    "parse",
    "gro",
    "tcp",
    "ack_build",
    "transmit",
    "timer_check",
];

/// Runs every stage measurement on input of each of `shapes` and prints medians: a table
/// per shape (and, for several, each stage's ns per segment over the first shape's), or
/// (`json`) one JSON object per shape and stage with keys `flows`, `train`, `stage` and
/// `ns_per_segment`, plus `ns_per_call` for the timer checks and `ns_per_ack` for ACK
/// building.
pub fn run(shapes: &[Shape], json: bool) -> anyhow::Result<()> {
    if shapes.is_empty() {
        bail!("no input shape: give --flows");
    }
    keep_freed_memory();
    let mut all = Vec::with_capacity(shapes.len());
    for (&shape, rows) in shapes.iter().zip(measure(shapes)?) {
        if json {
            for r in &rows {
                let mut o = serde_json::Map::new();
                o.insert("flows".into(), shape.flows.into());
                o.insert("train".into(), shape.train.into());
                o.insert("stage".into(), r.stage.into());
                o.insert(
                    "ns_per_segment".into(),
                    serde_json::json!(round2(r.ns_per_segment)),
                );
                if let Some(c) = r.ns_per_call {
                    o.insert("ns_per_call".into(), serde_json::json!(round2(c)));
                }
                if let Some(a) = r.ns_per_ack {
                    o.insert("ns_per_ack".into(), serde_json::json!(round2(a)));
                }
                println!("{}", serde_json::Value::Object(o));
            }
        } else {
            print_table(shape, &rows);
        }
        all.push((shape, rows));
    }
    if !json && all.len() > 1 {
        print_scaling(&all);
    }
    Ok(())
}

/// Tells the C allocator to keep the memory freed frames leave at the top of its heap.
/// The input's frames are heap buffers (as a NIC's are mempool buffers, which a pool never
/// returns); by default glibc gives a heap top of more than 128 KiB back to the kernel at
/// each `free` and faults it in again at the next batch, so a stage that frees buffers
/// (`tcp`, through `recv`) would time page faults and `brk` calls, more of them with more
/// flows held.
fn keep_freed_memory() {
    // SAFETY: mallopt only sets a parameter of glibc's allocator; any value is valid, and
    // it is called before the measurements, from the one thread that runs them.
    let ok = unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30) };
    if ok != 1 {
        eprintln!(
            "weir-bench stages: mallopt(M_TRIM_THRESHOLD) refused; allocator trimming may be timed"
        );
    }
}

fn print_table(shape: Shape, rows: &[Row]) {
    println!(
        "{:<18} {:>10} {:>10} {:>10}  what (medians of {REPEATS}; {} flows, trains of {} x {MSS} B)",
        "stage", "ns/seg", "ns/call", "ns/ack", shape.flows, shape.train
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{:.1}", round1(x)));
    for r in rows {
        println!(
            "{:<18} {:>10.2} {:>10} {:>10}  {}",
            r.stage,
            r.ns_per_segment,
            opt(r.ns_per_call),
            opt(r.ns_per_ack),
            r.what
        );
    }
    println!();
}

/// Each stage's ns per segment at every shape beside the first shape's, as a ratio: where
/// the extra cost of more flows goes.
fn print_scaling(all: &[(Shape, Vec<Row>)]) {
    let Some((first, base)) = all.first() else {
        return;
    };
    print!("{:<18}", "ns/seg by shape");
    for (s, _) in all {
        print!(" {:>16}", format!("{}x{}", s.flows, s.train));
    }
    for (s, _) in &all[1..] {
        print!(" {:>14}", format!("{}x{} over", s.flows, s.train));
    }
    println!(
        "   (flows x train; ratios over {}x{})",
        first.flows, first.train
    );
    for (i, r) in base.iter().enumerate() {
        print!("{:<18}", r.stage);
        for (_, rows) in all {
            print!(" {:>16.2}", rows[i].ns_per_segment);
        }
        for (_, rows) in &all[1..] {
            let b = r.ns_per_segment;
            let ratio = if b > 0.0 {
                format!("{:.2}x", rows[i].ns_per_segment / b)
            } else {
                "-".into()
            };
            print!(" {ratio:>14}");
        }
        println!();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_measures_the_same_in_order_input() {
        let shape = Shape::DEFAULT;
        let mut path = Path::new(shape).expect("handshakes");
        // Past the quickack phase: 32 segments per connection.
        path.run(32 * FLOWS, 0.0).expect("warm-up");
        let round = FLOWS * TRAIN;
        let r = path.run(2 * round, 0.0).expect("in-order delivery");
        assert_eq!(r.segments, 2 * round);
        // One stretch ACK per 16-segment run under `linux`.
        assert_eq!(r.acks, 2 * FLOWS, "ACKs");
        assert!(r.parse > 0.0 && r.gro > 0.0 && r.tcp > 0.0 && r.ack > 0.0);
        let (mut p, at) = idle_pipeline(shape).expect("idle pipeline");
        let (h, q) = timer_checks(&mut p, at, 1000);
        assert!(h > 0.0 && q > 0.0);
        assert!(flush_expired(&mut path.senders, 2, 0.0).expect("flush") > 0.0);
    }

    #[test]
    fn interleaved_flows_deliver_every_byte_in_order() {
        // 300 flows one segment at a time: rounds do not divide the batches, so a batch
        // spans rounds; every connection still reads its bytes in order (`run` checks).
        let shape = Shape::new(300, 1).expect("shape");
        let mut path = Path::new(shape).expect("handshakes");
        let r = path.run(300 * 40, 0.0).expect("in-order delivery");
        assert_eq!(r.segments, (300 * 40_usize).div_ceil(BATCH) * BATCH);
        let (mut p, at) = idle_pipeline(shape).expect("idle pipeline");
        assert!(timer_checks(&mut p, at, 100).0 > 0.0);
        assert!(flush_expired(&mut path.senders, 1, 0.0).expect("flush") > 0.0);
    }

    #[test]
    fn repetitions_take_turns_without_disturbing_each_other() {
        // Each repetition checks that every byte arrived in order; the GRO flush
        // measurement between them must not move the connections' sequence numbers.
        let mut b = Bench::new(Shape::DEFAULT, 0.0).expect("bench");
        for _ in 0..2 {
            b.repeat(0.0).expect("repetition");
        }
        assert_eq!(b.samples.tcp.len(), 2);
    }

    #[test]
    fn shapes_out_of_bounds_are_refused() {
        assert!(Shape::new(0, 1).is_err());
        assert!(Shape::new(MAX_FLOWS + 1, 1).is_err());
        assert!(Shape::new(64, 0).is_err());
        assert!(Shape::new(64, MAX_TRAIN + 1).is_err());
    }
}
