//! weir-gen's engine: N flows that are connections of weir's own TCP stack.
//!
//! Each flow is an active open ([`stack::tcp::Tcp::connect`]) from the flow's source port
//! ([`GenConfig::flow_addr`]), and its application writes the payload pattern
//! ([`super::payload`]) in writes of [`GenConfig::write_size`] bytes through
//! [`stack::tcp::Tcp::send_bufs`]: the bytes are never copied. A write is a list of
//! read-only buffers that refer to one shared copy of the pattern (a
//! [`PayloadSource`]; on DPDK `dpdk::SharedData::reference`), cut at multiples of
//! [`slice_span`] in the stream so that every full-sized segment lies in one buffer. The
//! stack cuts segments, retransmits, runs congestion control and the RTO; when a frame is
//! built, the transmit pool may put the payload in place itself
//! ([`stack::buf::BufPool::alloc_with_payload`]: a stamped buffer on the ring pair, a
//! chain by reference on a real port, see [`super::pool`]), so a segment costs its
//! headers only, as the hand-rolled sender's did.
//!
//! The modes map onto the stack's settings:
//! - ACK counting, the initial and largest window: [`stack::tcp::cc::CcConfig`];
//! - `--interleave train:N`: [`stack::tcp::TcpConfig::tx_quota`] of N segments per
//!   connection per turn; `--interleave segment`: a quota of [`segment_unit`] segments
//!   (each connection's turn is one send unit, its segments built in one pass), and the
//!   frames each [`Gen::poll_tx`] gets from a pipeline re-ordered one segment per flow
//!   in turn ([`interleave_by_flow`]), the order a quota of 1 would have built them in
//!   when every flow has that much to send: what the receiver sees is the mode's, what
//!   the sender spends is its units';
//! - `--psh never`: [`stack::tcp::Tcp::set_push`];
//! - bursts and gaps, the duration and the byte count: this application's writes, then
//!   `shutdown` (our FIN after the data).
//!
//! `--blast` (open loop, no TCP at all) stays with the hand-rolled frame generator
//! ([`super::sender::Sender`]), which is no TCP sender in that mode.
//!
//! Call order per loop iteration, the stack's: [`Gen::handle_rx_burst`], [`Gen::poll`]
//! (events, writes, timers), [`Gen::poll_tx`] into one transmit batch.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};

use stack::ack::AckPolicy;
use stack::buf::{BufPool, PacketBuf, PayloadChain, PayloadSlice, MAX_CHAIN};
use stack::driver::Burst;
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::tcp::cc::{CcAlgorithm, CcConfig};
use stack::tcp::{ConnId, ConnectOpts, Event, State, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::LocalAddrs;

use super::payload::slice_room;
use super::sender::{CwndSummary, GenStats, ARP_GIVE_UP};
use super::{GenConfig, Interleave, PshMode};
use crate::net::Resolver;

/// Where a write's buffers come from: slices of the payload pattern, by reference.
pub trait PayloadSource<B> {
    /// A buffer holding `len` bytes of the pattern from `start`, its place in the
    /// pattern's period (`start < period`, `len <= slice_room(period)`), or `None` when none is
    /// free now (the write waits for the next iteration).
    fn slice(&mut self, start: usize, len: u16) -> Option<PayloadSlice<B>>;
}

/// The longest stretch of stream one write buffer of `cfg`'s flows covers, in whole
/// segments (so that buffer boundaries fall on segment boundaries and a full segment never
/// spans two buffers of one write), at least one:
/// - at most one slice of the laid-out pattern ([`slice_room`]: 44 x 1,448 = 63,712 bytes
///   at a period of 1,448);
/// - at most half the flow's send buffer ([`snd_buf_of`]). The send buffer takes a buffer
///   whole or not at all, and a flow should write again once half of it is acknowledged,
///   as Linux's `sk_stream_write_space` wakes a writer at half.
pub fn slice_span(cfg: &GenConfig) -> u64 {
    let mss = u64::from(cfg.mss.max(1));
    let room = slice_room(cfg.pattern_period as usize) as u64;
    let half = u64::from(snd_buf_of(cfg)) / 2;
    (room.min(half) / mss).max(1) * mss
}

/// Send buffer of each connection: the core's budget of [`SEND_BUDGET`] bytes shared by
/// the flows, between 64 KiB and 1 MiB each.
pub fn snd_buf_per_flow(flows: u32) -> u32 {
    (SEND_BUDGET / u64::from(flows.max(1))).clamp(64 << 10, 1 << 20) as u32
}

/// The send buffer of each of `cfg`'s connections: [`GenConfig::snd_buf`], or
/// [`snd_buf_per_flow`].
pub fn snd_buf_of(cfg: &GenConfig) -> u32 {
    cfg.snd_buf
        .unwrap_or_else(|| snd_buf_per_flow(cfg.flows))
        .max(u32::from(cfg.mss.max(1)))
}

/// Bytes the flows of one generator may have written and not had acknowledged, in all.
pub const SEND_BUDGET: u64 = 64 << 20;

/// Write buffers a generator needs at most: every flow's send buffer full of
/// [`slice_span`]-sized buffers (and two short ones at write ends), plus one write's
/// chain in flight to `send_bufs` (what it refuses is freed at once).
pub fn slices_needed(cfg: &GenConfig) -> u64 {
    let per = u64::from(snd_buf_of(cfg)) / slice_span(cfg) + 3;
    u64::from(cfg.flows) * per + MAX_CHAIN as u64
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not connected yet (waiting for the MAC, or for a half-open slot).
    Waiting,
    /// SYN sent.
    Connecting,
    /// Established and writing (or between bursts).
    Open,
    /// Our FIN is queued: waiting for it to be acknowledged and for the peer's.
    Closing,
    /// Done: closed cleanly, reset, timed out or never started.
    Done,
}

#[derive(Clone, Copy, Debug)]
struct Flow {
    id: Option<ConnId>,
    phase: Phase,
    /// Bytes handed to the stack.
    written: u64,
    /// Where the current burst (or the whole transfer) ends.
    burst_end: u64,
    /// The burst is written and waits for its acknowledgment (then the gap).
    awaiting_ack: bool,
    /// When the current burst (or transfer) began, while its window still limits it.
    ramp_from: Option<Instant>,
    /// The current burst's ramp was measured (or is being).
    ramp_seen: bool,
    /// A write found the payload source empty: the flow is in `Gen::starved`.
    starved: bool,
}

/// N flows on weir's TCP. See the module documentation.
pub struct Gen<B: PacketBuf> {
    cfg: GenConfig,
    /// One pipeline per source address (the stack answers for one IPv4 address per
    /// pipeline): flow `i` is on `pipes[i / ports_per_ip]`.
    pipes: Vec<Pipeline<B>>,
    /// Per-pipeline bursts a received burst is sorted into (more than one address).
    demux: Vec<Burst<B>>,
    /// Connection slots per pipeline (its `max_conns`).
    slots: usize,
    flows: Vec<Flow>,
    /// Flow of each connection slot: `pipe * slots + ConnId::index`.
    by_slot: Vec<u32>,
    waiting: VecDeque<u32>,
    half_open: u32,
    /// Flows between bursts: when the next one starts (the gap is constant, so the
    /// queue is in time order).
    gaps: VecDeque<(Instant, u32)>,
    /// Flows whose burst is written, waiting for its acknowledgment.
    acking: Vec<u32>,
    /// Flows whose FIN is queued.
    closing: Vec<u32>,
    /// Flows in a ramp (their window still the limit), checked in turn: one per frame
    /// received since the last check, at most [`RAMP_SCAN`] per poll.
    ramping: Vec<u32>,
    /// Flows whose last write found the payload source empty ([`PayloadSource::slice`]
    /// gave no buffer): no `Event::Writable` would resume them, as the stack refused
    /// nothing, so [`Gen::poll`] retries them in turn. At most one entry per flow.
    starved: VecDeque<u32>,
    ramp_next: usize,
    /// Frames received since the ramps were last checked ([`Gen::check_ramps`]).
    ramp_credit: usize,
    resolver: Option<Resolver>,
    dst_mac: Option<[u8; 6]>,
    started: Option<Instant>,
    stop_at: Option<Instant>,
    stopping: bool,
    /// [`GenConfig::open_first`] and flows still to open: no writes yet.
    holding: bool,
    unresolved_by: Option<Instant>,
    finished: u32,
    stats: GenStats,
    first_data: Option<Instant>,
    last_data: Option<Instant>,
    span: u64,
    iter: u64,
}

/// Where a frame's TCP source port is: after Ethernet (14) and IPv4 without options (20),
/// or IPv6 (40). weir-gen's frames carry no VLAN tag and no IP options.
const PORT_AT_V4: usize = 34;
/// See [`PORT_AT_V4`].
const PORT_AT_V6: usize = 54;

/// The send unit of `--interleave segment` for `flows` connections on one pipeline: as
/// many segments per connection as one burst holds for all of them
/// ([`stack::driver::MAX_BURST`] over the flows), at least one. With that quantum a
/// `poll_tx` that finds every flow due builds a unit per flow and fills the burst, as a
/// quantum of one segment would in that many turns; [`interleave_by_flow`] then puts the
/// frames in the order those turns would have.
pub fn segment_unit(flows: usize) -> u32 {
    (stack::driver::MAX_BURST / flows.max(1)).max(1) as u32
}

/// Re-orders `out[from..]` one frame per flow in turn: the first frame of each run of one
/// flow's frames (one connection's unit: consecutive frames with the same TCP source port
/// at `port_at`), in the order of the runs, then the second of each, and so on (a stable
/// counting sort by rank within the run). A burst of one run, or of runs of one frame, is
/// left as it is. What a NIC queue fed by many sockets shows when each socket's segments
/// reach it as a train: `--interleave segment`'s pattern, built by units.
pub fn interleave_by_flow<B: PacketBuf>(out: &mut Burst<B>, from: usize, port_at: usize) {
    let n = out.len().saturating_sub(from);
    if n < 2 {
        return;
    }
    let port = |b: &B| -> [u8; 2] {
        b.data()
            .get(port_at..port_at + 2)
            .map_or([0; 2], |p| [p[0], p[1]])
    };
    let mut rank = [0u16; stack::driver::MAX_BURST];
    let mut top = 0u16;
    let mut prev = port(&out[from]);
    for i in 1..n {
        let p = port(&out[from + i]);
        if p == prev {
            rank[i] = rank[i - 1] + 1;
            top = top.max(rank[i]);
        }
        prev = p;
    }
    // One run (a single flow), or no run longer than one frame: nothing to re-order.
    if top == 0 || usize::from(top) + 1 == n {
        return;
    }
    // Where each rank's frames start in the new order.
    let mut start = [0u16; stack::driver::MAX_BURST + 1];
    for &r in &rank[..n] {
        start[usize::from(r) + 1] += 1;
    }
    for r in 1..=usize::from(top) + 1 {
        start[r] += start[r - 1];
    }
    let mut held: [Option<B>; stack::driver::MAX_BURST] = std::array::from_fn(|_| None);
    for (i, b) in out.drain(from..).enumerate() {
        let r = usize::from(rank[i]);
        held[usize::from(start[r])] = Some(b);
        start[r] += 1;
    }
    out.extend(held[..n].iter_mut().filter_map(Option::take));
}

/// How often (in loop iterations) the flows waiting for an acknowledgment or for their
/// close are checked.
const CHECK_EVERY: u64 = 64;

/// Ramping flows one [`Gen::poll`] checks (in turn): whether the window stopped limiting.
const RAMP_SCAN: usize = 16;

impl<B: PacketBuf> Gen<B> {
    /// The flows of `cfg` on pipelines of their own, one per source address. Fails on an
    /// invalid configuration (and `--blast`, which is no TCP).
    pub fn new(cfg: GenConfig) -> Result<Self, String> {
        cfg.validate()?;
        if cfg.blast {
            return Err("--blast is not TCP: it runs on the frame generator".into());
        }
        let per = u32::from(cfg.ports_per_ip.max(1));
        let addrs = cfg.flows.div_ceil(per) as usize;
        let slots = cfg.flows.min(per) as usize;
        let mss = u32::from(cfg.mss);
        let snd_buf = snd_buf_of(&cfg);
        let counting = cfg.ack_counting.to_stack();
        let tcp = TcpConfig {
            max_conns: slots,
            // The receiver sends no data: a small receive side per connection.
            rcv_buf: 64 << 10,
            rxq_slices: 8,
            ooo_conn_bytes: 16 << 10,
            // Our MSS option: the payload per segment plus the timestamps option, so the
            // peer's MSS (1460 on Ethernet) leaves `cfg.mss` for data.
            mtu: (mss + 12 + if cfg.v6.is_some() { 60 } else { 40 }).min(u32::from(u16::MAX))
                as u16,
            seed: cfg.seed,
            snd_buf,
            // The retransmission queue holds one entry per segment in flight.
            snd_slices: (snd_buf / mss.max(1)) as usize + 8,
            tx_quota: match cfg.interleave {
                Interleave::Segment => segment_unit(slots),
                Interleave::Train(_) => cfg.interleave.train_len(),
            },
            cc: CcConfig {
                algorithm: cfg.cc,
                counting,
                max_cwnd: (u64::from(cfg.max_cwnd) * u64::from(mss))
                    .clamp(2 * u64::from(mss), u64::from(u32::MAX))
                    as u32,
                initial_segments: Some(cfg.init_cwnd),
                ..CcConfig::default()
            },
            ..TcpConfig::default()
        };
        let mut pipes = Vec::with_capacity(addrs);
        for k in 0..addrs {
            let local = match cfg.flow_ip(k as u32 * per).0 {
                IpAddr::V4(a) => LocalAddrs::new(cfg.src_mac, Some(a), None),
                IpAddr::V6(a) => LocalAddrs::new(cfg.src_mac, None, Some(a)),
            };
            let pcfg = PipelineConfig {
                local,
                gro: None,
                tcp: tcp.clone(),
                listen: Vec::new(),
                tx_csum_offload: cfg.tx_csum_offload,
            };
            pipes.push(Pipeline::new(pcfg).map_err(|e| format!("cannot set up TCP: {e}"))?);
        }
        let n = cfg.flows as usize;
        let end = cfg.burst_bytes.or(cfg.bytes_per_flow).unwrap_or(u64::MAX);
        let end = end.min(cfg.bytes_per_flow.unwrap_or(u64::MAX));
        let resolver = cfg
            .dst_mac
            .is_none()
            .then(|| Resolver::new(cfg.src_mac, cfg.flow_ip(0).0, cfg.dst(), ARP_GIVE_UP));
        Ok(Gen {
            dst_mac: cfg.dst_mac,
            span: slice_span(&cfg),
            flows: vec![
                Flow {
                    id: None,
                    phase: Phase::Waiting,
                    written: 0,
                    burst_end: end,
                    awaiting_ack: false,
                    ramp_from: None,
                    ramp_seen: false,
                    starved: false,
                };
                n
            ],
            by_slot: vec![u32::MAX; addrs * slots],
            demux: if addrs > 1 {
                (0..addrs).map(|_| Burst::new()).collect()
            } else {
                Vec::new()
            },
            slots,
            waiting: (0..cfg.flows).collect(),
            half_open: 0,
            gaps: VecDeque::with_capacity(n),
            acking: Vec::with_capacity(n),
            closing: Vec::with_capacity(n),
            ramping: Vec::with_capacity(n),
            starved: VecDeque::with_capacity(n),
            ramp_next: 0,
            ramp_credit: 0,
            resolver,
            started: None,
            stop_at: None,
            holding: cfg.open_first,
            stopping: false,
            unresolved_by: None,
            finished: 0,
            stats: GenStats::default(),
            first_data: None,
            last_data: None,
            iter: 0,
            pipes,
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GenConfig {
        &self.cfg
    }

    /// The earliest timer of the stack underneath (the lab's model steps its clock to
    /// it).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.pipes.iter().filter_map(Pipeline::poll_timeout).min()
    }

    /// The pipeline and connection of flow `i`'s source address.
    #[inline]
    fn pipe_of(&self, i: u32) -> usize {
        // One pipeline (up to `ports_per_ip` flows, every benchmark row but 65,536
        // flows) needs no division: this runs per flow checked, many times a loop.
        if self.pipes.len() == 1 {
            return 0;
        }
        (i / u32::from(self.cfg.ports_per_ip.max(1))) as usize
    }

    fn tcp_of(&mut self, i: u32) -> &mut stack::tcp::Tcp<B> {
        let k = self.pipe_of(i);
        self.pipes[k].tcp()
    }

    /// `true` once every flow has finished (closed, failed or never started).
    pub fn is_done(&self) -> bool {
        self.finished == self.cfg.flows
    }

    /// `true` once the data phase is over (the duration ended or [`Gen::stop_writing`]).
    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// The receiver's MAC, once known.
    pub fn dst_mac(&self) -> Option<[u8; 6]> {
        self.dst_mac
    }

    /// From the first to the last data segment sent.
    pub fn data_span(&self) -> Option<(Instant, Instant)> {
        self.first_data.zip(self.last_data)
    }

    /// Ends the data phase now: no more writes; every open flow sends its FIN after what
    /// it has written; flows not started never start.
    pub fn stop_writing(&mut self, now: Instant) {
        if self.stopping {
            return;
        }
        self.stopping = true;
        while let Some(i) = self.waiting.pop_front() {
            self.stats.not_started += 1;
            self.finish(i);
        }
        for i in 0..self.cfg.flows {
            let f = self.flows[i as usize];
            if f.phase == Phase::Open {
                self.shut(now, i);
            }
        }
        self.gaps.clear();
    }

    /// Data segments sent so far, retransmissions included ([`GenStats::segments`]),
    /// without merging every counter as [`Gen::stats`] does.
    pub fn segments(&self) -> u64 {
        self.pipes
            .iter()
            .map(|p| {
                let t = p.tcp_stats();
                t.data_segments_sent + t.retransmits
            })
            .sum()
    }

    /// The counters, the stack's and the generator's own together.
    pub fn stats(&self) -> GenStats {
        let mut s = self.pipes[0].stats();
        for p in &self.pipes[1..] {
            let o = p.stats();
            s.tcp.merge(&o.tcp);
            s.ack.merge(&o.ack);
            for (a, b) in s.parse.drops.iter_mut().zip(o.parse.drops.iter()) {
                *a += *b;
            }
            s.pipeline.arp_replies += o.pipeline.arp_replies;
            s.pipeline.nd_adverts += o.pipeline.nd_adverts;
            s.pipeline.ctl_queue_full += o.pipeline.ctl_queue_full;
        }
        let t = &s.tcp;
        let mut g = self.stats.clone();
        g.segments = t.data_segments_sent + t.retransmits;
        g.bytes = t.bytes_sent + t.bytes_retransmitted;
        g.retransmits = t.retransmits;
        g.retransmit_bytes = t.bytes_retransmitted;
        g.ctl_segments = s.ack.total();
        g.acks = t.acks_received;
        g.acks_new_data = t.acks_new_data;
        g.dupacks = t.dupacks_received;
        g.fast_retransmits = t.fast_recoveries;
        g.rtos = t.rto_timeouts;
        g.syn_retransmits = t.syn_retransmits;
        g.established = t.conns_opened;
        g.rx_ignored = s.parse.total_drops();
        g.rx_bad_checksum = [
            stack::wire::DropReason::Ipv4BadChecksum,
            stack::wire::DropReason::TcpBadChecksum,
        ]
        .iter()
        .map(|&r| s.parse.dropped(r))
        .sum();
        // ARP replies, or neighbour advertisements for IPv6.
        g.arp_replies = s.pipeline.arp_replies + s.pipeline.nd_adverts;
        g.arp_replies_dropped = s.pipeline.ctl_queue_full;
        g.alloc_failures = s.ack.alloc_failures + t.send_alloc_failures;
        g
    }

    /// The congestion windows of the flows still connected, in segments (all zero when
    /// none is).
    pub fn cwnd_summary(&mut self) -> CwndSummary {
        let mss = u64::from(self.cfg.mss.max(1));
        let mut w: Vec<u64> = Vec::new();
        for i in 0..self.cfg.flows {
            let k = self.pipe_of(i);
            if let Some(info) = self.flows[i as usize]
                .id
                .and_then(|id| self.pipes[k].tcp().info(id))
            {
                w.push(u64::from(info.cwnd) / mss);
            }
        }
        CwndSummary::of(&mut w)
    }

    /// Step 1: a received burst (ACKs, ARP) to the stack.
    pub fn handle_rx_burst(&mut self, now: Instant, rx: &mut Burst<B>) {
        self.ramp_credit = (self.ramp_credit + rx.len()).min(RAMP_SCAN);
        if let Some(r) = self.resolver.as_mut() {
            if self.dst_mac.is_none() {
                r.handle_rx(rx);
                self.dst_mac = r.mac();
            }
        }
        if self.demux.is_empty() {
            self.pipes[0].handle_rx_burst(now, rx);
            return;
        }
        // Sorted by destination address: IPv4's or an ARP request's target; IPv6's or a
        // neighbour solicitation's target, by its last 32 bits (anything else goes to
        // the first pipeline, which counts it).
        let base = match self.cfg.v6 {
            None => u32::from(self.cfg.src_ip),
            Some((src, _)) => u128::from(src) as u32,
        };
        for b in rx.drain(..) {
            let d = b.data();
            let at = match d.get(12..14) {
                Some([0x08, 0x00]) => 30,
                Some([0x08, 0x06]) => 38,
                // ICMPv6 (58) neighbour solicitation (135): the target's last word.
                Some([0x86, 0xdd]) if d.get(20) == Some(&58) && d.get(54) == Some(&135) => 74,
                Some([0x86, 0xdd]) => 50,
                _ => usize::MAX,
            };
            let k = d
                .get(at..at.saturating_add(4))
                .map(|a| u32::from_be_bytes([a[0], a[1], a[2], a[3]]).wrapping_sub(base) as usize)
                .filter(|&k| k < self.demux.len())
                .unwrap_or(0);
            if let Err(e) = self.demux[k].try_push(b) {
                // Not reachable: each per-pipeline burst holds a whole burst.
                drop(e);
            }
        }
        for (p, b) in self.pipes.iter_mut().zip(self.demux.iter_mut()) {
            p.handle_rx_burst(now, b);
        }
    }

    /// Steps 2-4: the stack's events, the flows' writes, admissions and timers.
    pub fn poll<S: PayloadSource<B>>(&mut self, now: Instant, src: &mut S) {
        let start = *self.started.get_or_insert(now);
        if self.unresolved_by.is_none() {
            self.unresolved_by = Some(start + ARP_GIVE_UP);
        }
        // The duration counts from the first poll, or with `open_first` from when every
        // flow is open (`release`).
        if self.stop_at.is_none() && !self.holding {
            self.stop_at = Some(self.cfg.duration.map_or(Instant::NEVER, |d| now + d));
        }
        self.events(now, src);
        for p in &mut self.pipes {
            // Only when a timer is due: the stack's timer heap is then the only cost.
            if p.poll_timeout().is_some_and(|t| t <= now) {
                p.handle_timeout(now);
            }
        }
        self.events(now, src);
        let ended = self.stop_at.is_some_and(|t| now >= t);
        if self.dst_mac.is_none() {
            // Never resolved before the duration ended (or the ARP limit): every flow
            // not finished times out, naming the cause (`unresolved`).
            let give_up = ended || self.stopping || self.unresolved_by.is_some_and(|t| now >= t);
            if give_up && self.stats.unresolved == 0 {
                self.stats.unresolved = 1;
                for i in 0..self.cfg.flows {
                    if self.flows[i as usize].phase != Phase::Done {
                        self.stats.timeouts += 1;
                        self.finish(i);
                    }
                }
                self.waiting.clear();
                self.stopping = true;
            }
            return;
        }
        if !self.stopping && ended {
            self.stop_writing(now);
        }
        self.admit(now);
        if self.holding && self.waiting.is_empty() && self.half_open == 0 {
            self.release(now, src);
        }
        while let Some(&(at, i)) = self.gaps.front() {
            if at > now {
                break;
            }
            self.gaps.pop_front();
            let f = &mut self.flows[i as usize];
            if f.phase == Phase::Open {
                let total = self.cfg.bytes_per_flow.unwrap_or(u64::MAX);
                f.burst_end = (f.written + self.cfg.burst_bytes.unwrap_or(u64::MAX)).min(total);
                f.ramp_seen = false;
                self.fill(now, i, src);
            }
        }
        if !self.starved.is_empty() {
            self.retry_starved(now, src);
        }
        if !self.ramping.is_empty() {
            self.check_ramps(now);
        }
        self.iter += 1;
        if self.iter % CHECK_EVERY == 0 {
            self.check(now);
        }
    }

    /// Step 5: every frame due (ARP requests while the MAC is unknown) into `out`.
    pub fn poll_tx<P: BufPool<Buf = B>>(
        &mut self,
        now: Instant,
        pool: &mut P,
        out: &mut Burst<B>,
    ) -> usize {
        let before = out.len();
        if self.dst_mac.is_none() {
            if let Some(r) = self.resolver.as_mut() {
                r.poll_tx(now, pool, out);
            }
        }
        let mut sent = false;
        let port_at = if self.cfg.v6.is_some() {
            PORT_AT_V6
        } else {
            PORT_AT_V4
        };
        let interleave = self.cfg.interleave == Interleave::Segment;
        for p in &mut self.pipes {
            let before = p.tcp().stats().data_segments_sent;
            let from = out.len();
            p.poll_tx(now, pool, out);
            if interleave {
                interleave_by_flow(out, from, port_at);
            }
            sent |= p.tcp().stats().data_segments_sent != before;
        }
        if sent {
            self.first_data.get_or_insert(now);
            self.last_data = Some(now);
        }
        out.len() - before
    }

    fn events<S: PayloadSource<B>>(&mut self, now: Instant, src: &mut S) {
        for k in 0..self.pipes.len() {
            self.events_of(now, k, src);
        }
    }

    fn events_of<S: PayloadSource<B>>(&mut self, now: Instant, k: usize, src: &mut S) {
        while let Some(ev) = self.pipes[k].tcp().poll_event() {
            let (id, what) = match ev {
                Event::Opened(id) => (id, 0),
                Event::Writable(id) => (id, 1),
                Event::Readable(id) | Event::PeerClosed(id) => (id, 2),
                Event::Closed(id) => (id, 3),
                Event::Reset(id) => (id, 4),
            };
            let Some(&i) = self.by_slot.get(k * self.slots + id.index() as usize) else {
                continue;
            };
            if i == u32::MAX || self.flows[i as usize].id != Some(id) {
                continue;
            }
            match what {
                0 => {
                    self.half_open -= 1;
                    self.flows[i as usize].phase = Phase::Open;
                    if self.stopping {
                        self.shut(now, i);
                    } else {
                        self.fill(now, i, src);
                    }
                }
                1 => self.fill(now, i, src),
                2 => {
                    // The receiver sends no data; whatever it does is read and dropped,
                    // so its window never closes on it.
                    let _ = self.pipes[k]
                        .tcp()
                        .recv(id, |s| s.iter().map(|s| usize::from(s.len)).sum());
                }
                3 => {
                    if self.flows[i as usize].phase != Phase::Done {
                        self.stats.closed += 1;
                        self.finish(i);
                    }
                }
                _ => {
                    if self.flows[i as usize].phase == Phase::Connecting {
                        self.half_open -= 1;
                        self.stats.timeouts += 1;
                    } else {
                        self.stats.resets += 1;
                    }
                    self.finish(i);
                }
            }
        }
    }

    /// [`GenConfig::open_first`]: every flow is open (or failed): the duration starts now
    /// and every open flow writes.
    fn release<S: PayloadSource<B>>(&mut self, now: Instant, src: &mut S) {
        self.holding = false;
        self.stop_at = Some(self.cfg.duration.map_or(Instant::NEVER, |d| now + d));
        for i in 0..self.cfg.flows {
            if self.flows[i as usize].phase == Phase::Open {
                self.fill(now, i, src);
            }
        }
    }

    /// Opens connections while fewer than `max_half_open` handshakes are in progress.
    fn admit(&mut self, now: Instant) {
        let Some(mac) = self.dst_mac else { return };
        while self.half_open < self.cfg.max_half_open && !self.stopping {
            let Some(i) = self.waiting.pop_front() else {
                break;
            };
            let (ip, port) = self.cfg.flow_ip(i);
            let mut opts = ConnectOpts::new(self.cfg.src_mac, mac);
            opts.local_port = Some(port);
            opts.ack = AckPolicy::linux();
            let remote = SocketAddr::new(self.cfg.dst(), self.cfg.dst_port);
            let k = self.pipe_of(i);
            match self.pipes[k].tcp().connect(now, ip, remote, opts) {
                Ok(id) => {
                    // Nagle stays on (Linux's default): a write's short tail waits for
                    // the next write while data is in flight, so segments stay full.
                    let f = &mut self.flows[i as usize];
                    f.id = Some(id);
                    f.phase = Phase::Connecting;
                    self.by_slot[k * self.slots + id.index() as usize] = i;
                    self.half_open += 1;
                }
                Err(e) => {
                    tracing::warn!("flow {i}: connect from {ip}:{port} failed: {e}");
                    self.stats.timeouts += 1;
                    self.finish(i);
                }
            }
        }
    }

    /// Writes flow `i`'s next bytes until the send buffer refuses some (then
    /// `Event::Writable` resumes it), the burst is written, or the transfer is.
    fn fill<S: PayloadSource<B>>(&mut self, now: Instant, i: u32, src: &mut S) {
        let f = self.flows[i as usize];
        let (Some(id), Phase::Open) = (f.id, f.phase) else {
            return;
        };
        if self.stopping || f.awaiting_ack || self.holding {
            return;
        }
        let ws = u64::from(self.cfg.write_size);
        let period = self.cfg.pattern_period as u64;
        let mut written = f.written;
        if !f.ramp_seen && written < f.burst_end {
            let fm = &mut self.flows[i as usize];
            fm.ramp_seen = true;
            fm.ramp_from = Some(now);
            self.ramping.push(i);
        }
        loop {
            if written >= f.burst_end {
                break;
            }
            // The current write: from `written` to its end (writes are `write_size`
            // apart from the stream's start), at most a chain of buffers at a time.
            let write_end = ((written / ws + 1) * ws).min(f.burst_end);
            let mut chain: PayloadChain<B> = PayloadChain::new();
            let mut at = written;
            // Where each buffer of the chain starts in the stream.
            let mut starts = [0u64; MAX_CHAIN];
            while at < write_end && chain.slice_count() < MAX_CHAIN {
                let end = ((at / self.span + 1) * self.span).min(write_end);
                let Some(s) = src.slice((at % period) as usize, (end - at) as u16) else {
                    break;
                };
                let k = chain.slice_count();
                if chain.push(s).is_err() {
                    break;
                }
                starts[k] = at;
                at = end;
            }
            if chain.is_empty() {
                // No buffer from the source: nothing was refused, so no `Event::Writable`
                // will come; `poll` retries the flow.
                self.stats.source_empty += 1;
                let fm = &mut self.flows[i as usize];
                if !fm.starved {
                    fm.starved = true;
                    self.starved.push_back(i);
                }
                break;
            }
            let offered = u64::from(chain.len());
            // PSH on the segment that ends the write, as the hand-rolled sender and
            // Linux's `tcp_push` at the end of a `sendmsg` that took everything: a call
            // the send buffer takes only in part carries none (the rest follows after
            // `Event::Writable`, and the call that ends the write pushes).
            let push = self.cfg.psh == PshMode::EveryWrite;
            let tcp = self.tcp_of(i);
            let ends_write = at == write_end && push && tcp.writable_bytes(id) as u64 >= offered;
            let _ = tcp.set_push(id, ends_write);
            let offered_slices = chain.slice_count();
            let taken = tcp.send_bufs(now, id, &mut chain).unwrap_or(0) as u64;
            // The buffers the send buffer took, whole or in part.
            let pieces = starts[..offered_slices]
                .iter()
                .filter(|&&s| s < written + taken)
                .count();
            self.stats.write_pieces += pieces as u64;
            written += taken;
            // What was refused goes back (its buffers are freed); `Event::Writable`
            // comes when the send buffer has room again.
            drop(chain);
            if taken < offered {
                break;
            }
        }
        let f = &mut self.flows[i as usize];
        f.written = written;
        if written >= f.burst_end {
            let total = self.cfg.bytes_per_flow.unwrap_or(u64::MAX);
            if written >= total {
                self.shut(now, i);
            } else if self.cfg.burst_bytes.is_some() {
                f.awaiting_ack = true;
                self.acking.push(i);
            }
        }
    }

    /// Writes again for the flows the payload source had no buffer for, oldest first,
    /// until one still finds it empty (then it is empty for every flow).
    fn retry_starved<S: PayloadSource<B>>(&mut self, now: Instant, src: &mut S) {
        for _ in 0..self.starved.len() {
            let Some(i) = self.starved.pop_front() else {
                break;
            };
            self.flows[i as usize].starved = false;
            self.fill(now, i, src);
            if self.flows[i as usize].starved {
                break;
            }
        }
    }

    /// Our FIN after what flow `i` has written.
    fn shut(&mut self, now: Instant, i: u32) {
        let f = &mut self.flows[i as usize];
        if let (Some(id), Phase::Open) = (f.id, f.phase) {
            f.phase = Phase::Closing;
            let _ = self.tcp_of(i).shutdown(now, id);
            self.closing.push(i);
        }
    }

    /// The flows waiting for an acknowledgment (bursts) or for their close.
    fn check(&mut self, now: Instant) {
        let mut k = 0;
        while k < self.acking.len() {
            let i = self.acking[k];
            let f = self.flows[i as usize];
            let acked = f.phase != Phase::Open
                || f.id
                    .and_then(|id| self.tcp_of(i).send_state(id))
                    .is_none_or(|(_, queued)| queued == 0);
            if acked {
                self.acking.swap_remove(k);
                let f = &mut self.flows[i as usize];
                f.awaiting_ack = false;
                if f.phase == Phase::Open && !self.stopping {
                    self.gaps.push_back((now + self.cfg.gap, i));
                }
            } else {
                k += 1;
            }
        }
        let mut k = 0;
        while k < self.closing.len() {
            let i = self.closing[k];
            let f = self.flows[i as usize];
            let state =
                f.id.and_then(|id| self.tcp_of(i).send_state(id))
                    .map(|(state, _)| state);
            let done = f.phase == Phase::Done;
            // TIME-WAIT: both FINs acknowledged; the stack keeps the 4-tuple for 2 MSL.
            if done || matches!(state, Some(State::TimeWait | State::Closed) | None) {
                self.closing.swap_remove(k);
                if !done {
                    self.stats.closed += 1;
                    self.finish(i);
                }
            } else {
                k += 1;
            }
        }
    }

    /// Time to full rate (the lab's measure, field report 000): a ramp ends when the
    /// congestion window no longer limits the flow: it reached the peer's window or
    /// `--max-cwnd`, or everything of the burst is sent (the application is the limit).
    fn check_ramps(&mut self, now: Instant) {
        let max_cwnd = u64::from(self.cfg.max_cwnd) * u64::from(self.cfg.mss);
        // A flow's windows change when an ACK arrives: a check per frame received, not
        // per loop (a loop that received nothing has nothing new to find, and with many
        // flows never leaving their ramp, as when a shared core rather than the window
        // limits them, a fixed scan per loop was a third of the generator's time). The
        // end of a burst's data is seen with the ACK that follows it.
        let n = self.ramp_credit.min(self.ramping.len());
        self.ramp_credit = 0;
        for _ in 0..n {
            if self.ramp_next >= self.ramping.len() {
                self.ramp_next = 0;
            }
            let i = self.ramping[self.ramp_next];
            let f = self.flows[i as usize];
            let w = f.id.and_then(|id| self.tcp_of(i).send_windows(id));
            let done = match (w, f.phase) {
                (Some((cwnd, wnd, unsent)), Phase::Open) => {
                    u64::from(cwnd) >= u64::from(wnd).min(max_cwnd)
                        || (unsent == 0 && f.written >= f.burst_end)
                }
                _ => true,
            };
            if !done {
                self.ramp_next += 1;
                continue;
            }
            self.ramping.swap_remove(self.ramp_next);
            if let (Some(t), Phase::Open | Phase::Closing) = (f.ramp_from, f.phase) {
                let ns = now.saturating_since(t).as_nanos();
                self.stats.ramps += 1;
                self.stats.ramp_ns_sum += ns;
                self.stats.ramp_ns_max = self.stats.ramp_ns_max.max(ns);
            }
            self.flows[i as usize].ramp_from = None;
        }
    }

    fn finish(&mut self, i: u32) {
        let f = &mut self.flows[i as usize];
        if f.phase != Phase::Done {
            f.phase = Phase::Done;
            self.finished += 1;
        }
    }

    /// Bytes of flow `i` the receiver acknowledged, while it is connected.
    pub fn acked_bytes(&mut self, i: u32) -> Option<u64> {
        let f = *self.flows.get(i as usize)?;
        let info = self.tcp_of(i).info(f.id?)?;
        Some(f.written - u64::from(info.snd_queued))
    }

    /// Flows that finished, however.
    pub fn flows_finished(&self) -> u32 {
        self.finished
    }

    /// The stack's congestion control algorithm.
    pub fn cc(&self) -> CcAlgorithm {
        self.cfg.cc
    }

    /// How long since the first poll.
    pub fn elapsed(&self, now: Instant) -> Duration {
        self.started
            .map_or(Duration::ZERO, |t| now.saturating_since(t))
    }
}
