//! `weir-bench stages [--json]`: ns per segment of each stage of the receive path, measured
//! separately on the same input (field report 003: a regression is found by stage, not by
//! hundreds of bisect builds). `scripts/lab/compare-revisions.sh`
//! runs this for two git revisions and names the stage that got slower.
//!
//! The input: 64 established IPv4 connections, each sending trains of 16 MSS-sized
//! (1448-byte) segments with timestamps, one flow's train after the other (as TSO senders
//! put them on the wire), received in bursts of 32 frames. Frames are built once per flow;
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
//! - `timer_check`: `Pipeline::handle_timeout` when nothing is due (64 connections, GRO
//!   runs held with `flush_ns` = 50 µs, none expired);
//! - `poll_timeout`: `Pipeline::poll_timeout` in the same state;
//! - `gro_flush_expired`: `Gro::flush_expired` when all 64 held runs (1,024 segments) are
//!   due, per call and per segment flushed.
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

/// Connections (flows) in the input.
const FLOWS: usize = 64;
/// Segments one flow sends back to back (a TSO train).
const TRAIN: usize = 16;
/// Frames per receive burst (DPDK's customary 32). Timer checks run once per burst.
const BURST: usize = 32;
/// Bursts per timed batch: 128 frames, about 190 KB of frames, stays in cache as one
/// pipeline iteration's burst would.
const BURSTS_PER_BATCH: usize = 4;
/// Frames per batch.
const BATCH: usize = BURST * BURSTS_PER_BATCH;
/// Segments per round: every flow sends one train.
const ROUND: usize = FLOWS * TRAIN;
/// TCP payload per segment (MTU 1500 with timestamps).
const MSS: usize = 1448;
/// Repetitions of each measurement; the median is reported.
const REPEATS: usize = 5;
/// Rounds per repetition of the pipeline stages (262,144 segments).
const ROUNDS: usize = 256;
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
struct Flow {
    sport: u16,
    snd_nxt: SeqNumber,
    /// A full data segment (checksums valid for the sequence number it was built with).
    frame: Vec<u8>,
}

/// The 64 senders: handshakes, then trains of data frames.
struct Senders {
    flows: Vec<Flow>,
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
    /// The SYNs opening every flow.
    fn syns() -> Vec<VecBuf> {
        (0..FLOWS)
            .map(|i| {
                let mut f = tcp_frame(
                    40_000 + i as u16,
                    SeqNumber(1_000_000),
                    SeqNumber(0),
                    TcpFlags::SYN,
                );
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

    /// Reads the receiver's SYN-ACKs and returns the senders (with the ACKs that complete
    /// the handshakes).
    fn from_synacks(synacks: &[VecBuf]) -> anyhow::Result<(Senders, Vec<VecBuf>)> {
        let peer = LocalAddrs::new(PEER_MAC, Some(PEER_IP), None);
        let mut parsed = Parsed::Drop(DropReason::TruncatedEthernet);
        let mut flows = Vec::with_capacity(FLOWS);
        let mut acks = Vec::with_capacity(FLOWS);
        let payload = vec![0x5a; MSS];
        let mut offsets = None;
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
                offsets = Some(data_offsets(&frame)?);
            }
            flows.push(Flow {
                sport,
                snd_nxt,
                frame,
            });
        }
        if flows.len() != FLOWS {
            bail!("{} SYN-ACKs for {FLOWS} SYNs", flows.len());
        }
        flows.sort_by_key(|f| f.sport);
        let (seq_at, tsval_at) = offsets.context("no SYN-ACK")?;
        Ok((
            Senders {
                flows,
                tsval: 3,
                seq_at,
                tsval_at,
            },
            acks,
        ))
    }

    /// Segment `k` of the next round (flow `k / TRAIN`, its `k % TRAIN`th segment): a copy
    /// of the flow's frame with the sequence number and TSval patched in.
    fn segment(&self, k: usize) -> VecBuf {
        let f = &self.flows[k / TRAIN];
        let seq = f.snd_nxt + (k % TRAIN) * MSS;
        let mut v = f.frame.clone();
        v[self.seq_at..self.seq_at + 4].copy_from_slice(&seq.get().to_be_bytes());
        v[self.tsval_at..self.tsval_at + 4].copy_from_slice(&self.tsval.to_be_bytes());
        rx_buf(v)
    }

    /// Moves every flow past the round just sent.
    fn end_round(&mut self) {
        for f in &mut self.flows {
            f.snd_nxt += TRAIN * MSS;
        }
        self.tsval = self.tsval.wrapping_add(1);
    }

    /// One round's frames, in wire order.
    fn round(&mut self) -> Vec<VecBuf> {
        let v = (0..ROUND).map(|k| self.segment(k)).collect();
        self.end_round();
        v
    }
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

/// Opens the 64 connections on `rx` and returns the senders.
fn handshake<R: Receiver>(rx: &mut R, pool: &mut VecPool, now: Instant) -> anyhow::Result<Senders> {
    rx.receive(now, Senders::syns());
    let synacks = rx.transmit(now, pool);
    let (senders, acks) = Senders::from_synacks(&synacks)?;
    rx.receive(now, acks);
    let _ = rx.transmit(now, pool);
    Ok(senders)
}

fn tcp_config() -> TcpConfig {
    TcpConfig {
        max_conns: 256,
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
    fn new() -> anyhow::Result<Self> {
        let mut bare = BareTcp {
            tcp: Tcp::new(tcp_config()),
        };
        bare.tcp
            .listen(PORT, AckPolicy::linux())
            .map_err(|e| anyhow::anyhow!("listen: {e:?}"))?;
        let mut pool = VecPool::new(1 << 16, 2048);
        let now = Instant::from_nanos(1_000_000_000);
        let senders = handshake(&mut bare, &mut pool, now)?;
        let opened = bare
            .tcp
            .events()
            .filter(|e| matches!(e, Event::Opened(_)))
            .count();
        if opened != FLOWS {
            bail!("{opened} of {FLOWS} connections opened");
        }
        Ok(Path {
            gro: Gro::new(GroConfig::default()),
            tcp: bare.tcp,
            pool,
            senders,
            now,
        })
    }

    /// Runs `rounds` rounds through every stage, timing each.
    fn run(&mut self, rounds: usize, overhead: f64) -> anyhow::Result<PathRep> {
        let (tx, mut wire) = link(1 << 16);
        let mut tx = tx;
        let mut parsed: Vec<Parsed> = (0..BATCH)
            .map(|_| Parsed::Drop(DropReason::TruncatedEthernet))
            .collect();
        let mut bufs: Vec<VecBuf> = Vec::with_capacity(BATCH);
        let mut segs: Vec<Segment<VecBuf>> = Vec::with_capacity(BATCH);
        let mut ids: Vec<ConnId> = Vec::with_capacity(FLOWS);
        let mut out: Burst<VecBuf> = Burst::new();
        let (mut p, mut g, mut t, mut a, mut x) = Default::default();
        let (mut acks, mut bytes) = (0usize, 0usize);
        let local = weir_addrs();
        for _ in 0..rounds {
            for batch in 0..ROUND / BATCH {
                let now = self.now;
                bufs.clear();
                bufs.extend((batch * BATCH..(batch + 1) * BATCH).map(|k| self.senders.segment(k)));

                let t0 = StdInstant::now();
                for (b, slot) in bufs.iter().zip(parsed.iter_mut()) {
                    parse_into(b.data(), b.rx_checksum(), &local, slot);
                }
                Acc::add(&mut p, t0, overhead);

                let gro = &mut self.gro;
                let t0 = StdInstant::now();
                // Stages are timed apart, so GRO's output is kept (moved out) for TCP.
                let mut push = |s: &mut Segment<VecBuf>| segs.push(s.take());
                for (i, (b, m)) in bufs.drain(..).zip(parsed.iter()).enumerate() {
                    if let Parsed::Tcp(m) = m {
                        gro.handle_segment(now, m, b, &mut push);
                    }
                    if (i + 1) % BURST == 0 {
                        gro.end_of_burst(now, &mut push);
                    }
                }
                Acc::add(&mut g, t0, overhead);

                let t0 = StdInstant::now();
                for mut s in segs.drain(..) {
                    self.tcp.handle_segment(now, &mut s);
                }
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
            self.senders.end_round();
        }
        let segments = rounds * ROUND;
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

/// A pipeline with the 64 connections established, fed one round at `now` so that every
/// flow has a GRO run held (due at `now + HOLD`) and nothing else is due.
fn idle_pipeline() -> anyhow::Result<(Pipeline<VecBuf>, Instant)> {
    let mut p = Pipeline::new(PipelineConfig {
        local: weir_addrs(),
        gro: Some(GroConfig {
            flush_ns: HOLD,
            ..GroConfig::default()
        }),
        tcp: tcp_config(),
        listen: vec![(PORT, AckPolicy::linux())],
        tx_csum_offload: false,
    })
    .map_err(|e| anyhow::anyhow!("pipeline: {e:?}"))?;
    let mut pool = VecPool::new(1 << 16, 2048);
    let mut now = Instant::from_nanos(1_000_000_000);
    let mut senders = handshake(&mut p, &mut pool, now)?;
    let mut ids = Vec::new();
    // Past the quickack phase, everything delivered, ACKed and consumed.
    for _ in 0..4 {
        p.receive(now, senders.round());
        now += HOLD;
        p.handle_timeout(now);
        consume(p.tcp(), &mut ids);
        drop(p.transmit(now, &mut pool));
        now += BATCH_GAP;
    }
    p.receive(now, senders.round());
    consume(p.tcp(), &mut ids);
    drop(p.transmit(now, &mut pool));
    let at = now + Duration::from_micros(1);
    if p.poll_timeout().is_some_and(|d| d <= at) {
        bail!("a timer is due in the idle pipeline");
    }
    if p.stats().gro_held_runs == 0 {
        bail!("no GRO run held in the idle pipeline");
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

/// ns per `flush_expired` call that flushes 64 due runs of 16, and the segments per call.
fn flush_expired(senders: &mut Senders, flushes: usize, overhead: f64) -> anyhow::Result<f64> {
    let mut gro: Gro<VecBuf> = Gro::new(GroConfig {
        flush_ns: HOLD,
        ..GroConfig::default()
    });
    let local = weir_addrs();
    let mut now = Instant::from_nanos(1_000_000_000);
    let mut parsed = Parsed::Drop(DropReason::TruncatedEthernet);
    let mut segs: Vec<Segment<VecBuf>> = Vec::with_capacity(ROUND);
    let mut ns = Acc::default();
    for _ in 0..flushes {
        for (i, b) in senders.round().into_iter().enumerate() {
            parse_into(b.data(), b.rx_checksum(), &local, &mut parsed);
            if let Parsed::Tcp(m) = &parsed {
                gro.handle_segment(now, m, b, &mut |s| segs.push(s.take()));
            }
            if (i + 1) % BURST == 0 {
                gro.end_of_burst(now, &mut |s| segs.push(s.take()));
            }
        }
        if !segs.is_empty() || gro.held_runs() != FLOWS {
            bail!("expected {FLOWS} held runs, {} held", gro.held_runs());
        }
        now += HOLD;
        let t0 = StdInstant::now();
        gro.flush_expired(now, &mut |s| segs.push(s.take()));
        ns.add(t0, overhead);
        if segs.len() != FLOWS || gro.held_runs() != 0 {
            bail!("flush_expired flushed {} runs of {FLOWS}", segs.len());
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
    what: &'static str,
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Measures every stage (medians of 5 repetitions) and returns the rows, `total` last.
fn measure() -> anyhow::Result<Vec<Row>> {
    let overhead = clock_overhead_ns();
    let mut path = Path::new()?;
    // Warm-up: past the quickack phase, tables and pools touched.
    path.run(4, overhead)?;
    let (mut parse, mut gro, mut tcp, mut ack, mut tx, mut per_ack) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..REPEATS {
        let r = path.run(ROUNDS, overhead)?;
        parse.push(r.parse);
        gro.push(r.gro);
        tcp.push(r.tcp);
        ack.push(r.ack);
        tx.push(r.tx);
        per_ack.push(r.ack * r.segments as f64 / r.acks.max(1) as f64);
    }
    let mut sw: Vec<f64> = (0..REPEATS)
        .map(|_| parse_sw_csum(&path.senders, 200_000))
        .collect();

    let (mut p, at) = idle_pipeline()?;
    timer_checks(&mut p, at, TIMER_CALLS / 10);
    let (mut handle, mut poll) = (vec![], vec![]);
    for _ in 0..REPEATS {
        let (h, q) = timer_checks(&mut p, at, TIMER_CALLS);
        handle.push(h);
        poll.push(q);
    }
    let mut flush: Vec<f64> = Vec::new();
    for _ in 0..REPEATS {
        flush.push(flush_expired(&mut path.senders, FLUSHES, overhead)?);
    }

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
            what: "wire::parse_into, NIC-verified checksums",
        },
        Row {
            stage: "gro",
            ns_per_segment: median(&mut gro),
            ns_per_call: None,
            ns_per_ack: None,
            what: "Gro::handle_segment + end_of_burst (runs of 16)",
        },
        Row {
            stage: "tcp",
            ns_per_segment: median(&mut tcp),
            ns_per_call: None,
            ns_per_ack: None,
            what: "Tcp::handle_segment of runs + app events/recv",
        },
        Row {
            stage: "ack_build",
            ns_per_segment: median(&mut ack),
            ns_per_call: None,
            ns_per_ack: Some(median(&mut per_ack)),
            what: "Tcp::poll_tx into a VecPool, software checksums",
        },
        Row {
            stage: "transmit",
            ns_per_segment: median(&mut tx),
            ns_per_call: None,
            ns_per_ack: None,
            what: "tx_burst of the ACKs into mem::link",
        },
        Row {
            stage: "timer_check",
            ns_per_segment: handle / burst,
            ns_per_call: Some(handle),
            ns_per_ack: None,
            what: "Pipeline::handle_timeout, nothing due (1 call/burst of 32)",
        },
        Row {
            stage: "poll_timeout",
            ns_per_segment: poll / burst,
            ns_per_call: Some(poll),
            ns_per_ack: None,
            what: "Pipeline::poll_timeout (1 call/burst of 32)",
        },
        Row {
            stage: "gro_flush_expired",
            ns_per_segment: flush / ROUND as f64,
            ns_per_call: Some(flush),
            ns_per_ack: None,
            what: "Gro::flush_expired, 64 runs of 16 due",
        },
        Row {
            stage: "parse_sw_csum",
            ns_per_segment: median(&mut sw),
            ns_per_call: None,
            ns_per_ack: None,
            what: "parse_into, checksums in software (not in total)",
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
        what: "parse+gro+tcp+ack_build+transmit+timer_check",
    });
    Ok(rows)
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

/// Runs every stage measurement and prints medians: a table, or (`json`) one JSON object
/// per stage with keys `stage` and `ns_per_segment`, plus `ns_per_call` for the timer
/// checks and `ns_per_ack` for ACK building.
pub fn run(json: bool) -> anyhow::Result<()> {
    let rows = measure()?;
    if json {
        for r in &rows {
            let mut o = serde_json::Map::new();
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
        println!(
            "{:<18} {:>10} {:>10} {:>10}  what (medians of {REPEATS}; {FLOWS} flows, trains of {TRAIN} x {MSS} B)",
            "stage", "ns/seg", "ns/call", "ns/ack"
        );
        let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{:.1}", round1(x)));
        for r in &rows {
            println!(
                "{:<18} {:>10.2} {:>10} {:>10}  {}",
                r.stage,
                r.ns_per_segment,
                opt(r.ns_per_call),
                opt(r.ns_per_ack),
                r.what
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_measures_the_same_in_order_input() {
        let mut path = Path::new().expect("handshakes");
        let r = path.run(2, 0.0).expect("in-order delivery");
        assert_eq!(r.segments, 2 * ROUND);
        // One stretch ACK per 16-segment run under `linux`.
        assert_eq!(r.acks, 2 * FLOWS, "ACKs");
        assert!(r.parse > 0.0 && r.gro > 0.0 && r.tcp > 0.0 && r.ack > 0.0);
        let (mut p, at) = idle_pipeline().expect("idle pipeline");
        let (h, q) = timer_checks(&mut p, at, 1000);
        assert!(h > 0.0 && q > 0.0);
        assert!(flush_expired(&mut path.senders, 2, 0.0).expect("flush") > 0.0);
    }
}
