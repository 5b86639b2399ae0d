//! The run-to-completion pipeline of one core: parse → GRO → TCP → ACK batch.
//!
//! This file only wires the stages together; each rule lives in its stage's module. The
//! driver owns the loop and calls, once per iteration and in this order:
//!
//! 1. `now = clock`; `rx_burst` into a [`Burst`];
//! 2. [`Pipeline::handle_rx_burst`]`(now, burst)`: parse, feed GRO (or, with GRO off, TCP
//!    directly), flush what is due at the end of the burst, hand coalesced segments to TCP;
//! 3. the application: [`Pipeline::tcp`] → `events()` / `recv()` / `close()`;
//! 4. [`Pipeline::handle_timeout`]`(now)`: GRO deadlines, delayed-ACK and other TCP timers;
//! 5. [`Pipeline::poll_tx`]`(now, pool, out)`: every reply and ACK due, built into one
//!    batch; then one `tx_burst`.
//!
//! Nothing here allocates after construction: replies wait in a fixed-size queue, GRO and
//! TCP tables are preallocated.

use arrayvec::ArrayVec;

use crate::ack::AckPolicy;
use crate::buf::{BufPool, PacketBuf, PayloadChain, PayloadSlice, MAX_FRAME_SEGS};
use crate::driver::Burst;
use crate::gro::{Gro, GroConfig};
use crate::segment::Segment;
use crate::stats::{PipelineStats, Stats};
use crate::tcp::{Tcp, TcpConfig, TcpError};
use crate::time::Instant;
use crate::wire::fast::flow_hash_hint;
use crate::wire::{
    emit_arp_reply, emit_echo_reply, emit_neighbor_advert, parse_chain_into, parse_into,
    ArpRequest, DropReason, IcmpEcho, LocalAddrs, NeighborSolicit, ParseStats, Parsed,
};

/// Replies (ARP, ICMP echo, neighbor advertisement) waiting for `poll_tx`. A burst of
/// pings beyond this is dropped and counted, never queued without bound.
const CTL_QUEUE: usize = 32;

/// Longest reply frame the pipeline builds (an echo reply to a full-size ping).
const MAX_REPLY: usize = 1518;

/// Everything one core's pipeline needs to start.
#[derive(Clone, Debug)]
pub struct PipelineConfig {
    /// weir's MAC and IP addresses on this port.
    pub local: LocalAddrs,
    /// GRO settings, or `None` to hand every segment to TCP as it arrives (`--no-gro`).
    pub gro: Option<GroConfig>,
    /// TCP settings.
    pub tcp: TcpConfig,
    /// Ports to accept connections on, with the ACK policy of each.
    pub listen: Vec<(u16, AckPolicy)>,
    /// Ask the NIC to compute transmit checksums (when the port offers it).
    pub tx_csum_offload: bool,
}

/// A reply owed to a control-plane request.
#[derive(Debug)]
enum Ctl<B> {
    Arp(ArpRequest),
    /// The request's buffer is kept: the reply echoes its data.
    Echo(IcmpEcho, B),
    Neighbor(NeighborSolicit),
}

/// How many frames ahead of the one being handled [`Pipeline::handle_rx_burst`] fetches
/// header lines.
pub const PREFETCH_AHEAD: usize = 4;

/// How many frames ahead of the one being handled [`Pipeline::handle_rx_burst`] fetches
/// the descriptor (whose first line says where the header lines are): far enough that it
/// has arrived when the header lines are fetched, [`PREFETCH_AHEAD`] frames later.
pub const DESC_AHEAD: usize = 8;

const _: () = assert!(PREFETCH_AHEAD < DESC_AHEAD);

/// Connections from which [`Pipeline::handle_rx_burst`] fetches each segment's connection
/// ahead: 1,024 connections' entries (1,152 bytes each) are about 1.2 MB, half a core's
/// 2 MiB L2 on the machines weir is measured on; below that they stay in cache.
pub const CONN_PREFETCH_MIN: usize = 1024;

/// One core's receive pipeline. See the module documentation for the call order.
pub struct Pipeline<B> {
    local: LocalAddrs,
    gro: Option<Gro<B>>,
    tcp: Tcp<B>,
    ctl: ArrayVec<Ctl<B>, CTL_QUEUE>,
    /// With GRO off: where each segment is handed to TCP from (filled in place, see
    /// [`Segment`] on why it is not built per segment).
    one: Segment<B>,
    parsed: Parsed,
    /// Where a frame of chained buffers is taken apart.
    chain: ChainRx<B>,
    parse_stats: ParseStats,
    stats: PipelineStats,
    tx_csum_offload: bool,
}

impl<B: PacketBuf> Pipeline<B> {
    /// Builds the stages and opens the listeners.
    pub fn new(cfg: PipelineConfig) -> Result<Self, TcpError> {
        let mut tcp = Tcp::new(cfg.tcp);
        for (port, policy) in &cfg.listen {
            tcp.listen(*port, *policy)?;
        }
        Ok(Pipeline {
            local: cfg.local,
            gro: cfg.gro.map(Gro::new),
            tcp,
            ctl: ArrayVec::new(),
            one: Segment::empty(),
            parsed: Parsed::Drop(DropReason::TruncatedEthernet),
            chain: ChainRx {
                tail: ArrayVec::new(),
                payload: PayloadChain::new(),
            },
            parse_stats: ParseStats::default(),
            stats: PipelineStats::default(),
            tx_csum_offload: cfg.tx_csum_offload,
        })
    }

    /// Consumes a received burst: parses every frame, feeds TCP segments through GRO into
    /// TCP, queues replies to ARP/ICMP/ND requests, drops (and counts) everything else, and
    /// at the end of the burst flushes the GRO runs that are due. Call it with an empty
    /// burst too when the queue returned nothing: that tells GRO the queue is drained
    /// (see `GroConfig::busy_hold_ns`).
    #[inline]
    pub fn handle_rx_burst(&mut self, now: Instant, burst: &mut Burst<B>) {
        if burst.is_empty() {
            // Nothing to feed (an idle iteration): GRO only learns the queue drained and
            // flushes what that makes due, once.
            if let Some(gro) = &mut self.gro {
                gro.set_backlogged(false);
                let tcp = &mut self.tcp;
                gro.end_of_burst(now, &mut |seg| tcp.handle_segment(now, seg));
            }
            return;
        }
        self.handle_frames(now, burst);
    }

    /// [`Pipeline::handle_rx_burst`] for a burst that is not empty (out of line: the idle
    /// iteration's path above is inlined into the loop).
    #[inline(never)]
    fn handle_frames(&mut self, now: Instant, burst: &mut Burst<B>) {
        // The first DESC_AHEAD frames' descriptors are fetched now, the rest DESC_AHEAD
        // frames ahead, below. A whole burst's at once (up to MAX_BURST misses) would fill
        // the core's line-fill buffers and the prefetches themselves would wait.
        for buf in burst.iter().take(DESC_AHEAD) {
            buf.prefetch_descriptor();
        }
        // A full burst means more frames are waiting (NAPI's budget used up): GRO may
        // then hold runs up to `busy_hold_ns`; a short or empty one means the queue is
        // drained. Runs whose hold time is up are flushed at the end of this burst, not
        // before it: TCP sees them in this iteration either way, and a due run first takes
        // the segments of its flow that arrived with this burst.
        if let Some(gro) = &mut self.gro {
            gro.set_backlogged(burst.is_full());
        }
        // Each frame's header lines are fetched PREFETCH_AHEAD frames before it is
        // handled: a frame the NIC (or another core) just wrote is a cache miss on first
        // touch, longer than the handling of one frame when GRO merges it into a run.
        //
        // The frames are taken from the back of the reversed burst: a pop moves one
        // buffer, where moving the burst out to iterate it (`mem::take`) copied all
        // MAX_BURST slots, a fixed cost per burst that a burst of one frame paid whole.
        // `burst[n - 1 - k]` is then the k-th frame after the one being handled.
        burst.reverse();
        for b in burst.iter().rev().take(PREFETCH_AHEAD) {
            b.prefetch_data();
        }
        // With more connections than the cache holds, each segment's lookup is two
        // dependent misses (the table's bucket, then the connection) before TCP can start:
        // the bucket of the frame two ahead is fetched, and the connection of the frame
        // one ahead, whose bucket has landed by then (`Tcp::prefetch_bucket`,
        // `Tcp::prefetch_conn`). With fewer, the connections stay in cache and the hints
        // would only cost instructions.
        let hint_conns = self.tcp.conn_count() >= CONN_PREFETCH_MIN;
        let mut next_hash = None;
        if hint_conns {
            // The first two frames' buckets; the second's hash is kept for the loop.
            let hash = |k: usize| {
                let i = burst.len().checked_sub(1 + k)?;
                flow_hash_hint(burst.get(i)?.data())
            };
            if let Some(h) = hash(0) {
                self.tcp.prefetch_bucket(h);
            }
            next_hash = hash(1);
            if let Some(h) = next_hash {
                self.tcp.prefetch_bucket(h);
            }
        }
        while let Some(buf) = burst.pop() {
            let n = burst.len();
            if let Some(a) = n.checked_sub(DESC_AHEAD).and_then(|i| burst.get(i)) {
                a.prefetch_descriptor();
            }
            if let Some(a) = n.checked_sub(PREFETCH_AHEAD).and_then(|i| burst.get(i)) {
                a.prefetch_data();
            }
            if hint_conns {
                // `next_hash` is now the frame after this one's (its bucket fetched in the
                // last iteration); then the frame after that gets its bucket fetched.
                let ahead = next_hash;
                next_hash = n
                    .checked_sub(2)
                    .and_then(|i| burst.get(i))
                    .and_then(|b| flow_hash_hint(b.data()));
                if let Some(h) = ahead {
                    self.tcp.prefetch_conn(h);
                }
                if let Some(h) = next_hash {
                    self.tcp.prefetch_bucket(h);
                }
            }
            let tcp = &mut self.tcp;
            let mut deliver = |seg: &mut Segment<B>| tcp.handle_segment(now, seg);
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += buf.frame_len() as u64;
            let buf = if buf.is_contiguous() {
                // The common layout goes straight into GRO, which reads the header words
                // it needs from the frame; everything else is parsed in full.
                let buf = match &mut self.gro {
                    Some(gro) => match gro.handle_frame(now, buf, &self.local, &mut deliver) {
                        Ok(()) => {
                            self.parse_stats.tcp += 1;
                            continue;
                        }
                        Err(buf) => buf,
                    },
                    None => buf,
                };
                // Parsed in place: a TcpMeta is ~170 bytes, not worth moving per packet.
                parse_into(buf.data(), buf.rx_checksum(), &self.local, &mut self.parsed);
                self.parse_stats.record(&self.parsed);
                buf
            } else {
                // A frame of chained buffers: a TCP segment is handed on here, anything
                // else comes back (its first buffer) to be answered or dropped below.
                let rx = Rx {
                    local: &self.local,
                    parsed: &mut self.parsed,
                    parse_stats: &mut self.parse_stats,
                    stats: &mut self.stats,
                };
                match self
                    .chain
                    .handle(now, buf, rx, &mut self.gro, &mut self.one, &mut deliver)
                {
                    Some(head) => head,
                    None => continue,
                }
            };
            match &self.parsed {
                Parsed::Tcp(meta) => match &mut self.gro {
                    Some(gro) => gro.handle_segment(now, meta, buf, &mut deliver),
                    None => {
                        // With GRO off every segment is a run of one, filled in place.
                        self.one.fill_from_meta(meta, buf, now);
                        deliver(&mut self.one);
                        self.one.payload.clear();
                    }
                },
                Parsed::ArpRequest(r) => push_ctl(&mut self.ctl, &mut self.stats, Ctl::Arp(*r)),
                Parsed::IcmpEcho(e) => {
                    push_ctl(&mut self.ctl, &mut self.stats, Ctl::Echo(*e, buf));
                }
                Parsed::NeighborSolicit(n) => {
                    push_ctl(&mut self.ctl, &mut self.stats, Ctl::Neighbor(*n));
                }
                Parsed::Drop(_) => {}
            }
        }
        if let Some(gro) = &mut self.gro {
            let tcp = &mut self.tcp;
            gro.end_of_burst(now, &mut |seg| tcp.handle_segment(now, seg));
        }
    }

    /// The TCP stage, for the application: events, `recv`, `close`.
    pub fn tcp(&mut self) -> &mut Tcp<B> {
        &mut self.tcp
    }

    /// The TCP stage's counters, without the snapshot of every stage [`Pipeline::stats`]
    /// takes.
    pub fn tcp_stats(&self) -> &crate::tcp::TcpStats {
        self.tcp.stats()
    }

    /// Fires what is due at `now`: GRO runs whose hold time is up, then TCP's timers.
    #[inline]
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(gro) = &mut self.gro {
            let tcp = &mut self.tcp;
            gro.flush_expired(now, &mut |seg| tcp.handle_segment(now, seg));
        }
        self.tcp.handle_timeout(now);
    }

    /// The earliest instant anything is due (a GRO run's deadline or a TCP timer).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let g = self.gro.as_ref().and_then(Gro::next_deadline);
        crate::time::earliest(g, self.tcp.poll_timeout())
    }

    /// Builds every reply and ACK due into buffers from `pool`, appended to `out` (one
    /// transmit batch). Stops when `out` is full or the pool is empty; the rest stays due.
    /// Returns the frames appended.
    #[inline]
    pub fn poll_tx<P: BufPool<Buf = B>>(
        &mut self,
        now: Instant,
        pool: &mut P,
        out: &mut Burst<B>,
    ) -> usize {
        let start = out.len();
        if !self.ctl.is_empty() {
            self.poll_ctl(pool, out);
        }
        self.tcp.poll_tx(now, pool, out, self.tx_csum_offload);
        out.len() - start
    }

    /// The control-plane replies queued, built into `out` (rare: kept out of line).
    #[inline(never)]
    fn poll_ctl<P: BufPool<Buf = B>>(&mut self, pool: &mut P, out: &mut Burst<B>) {
        while !out.is_full() {
            let Some(ctl) = self.ctl.first() else { break };
            let Some(mut b) = pool.alloc(MAX_REPLY) else {
                self.stats.ctl_alloc_failures += 1;
                break;
            };
            let mac = self.local.mac;
            let n = match ctl {
                Ctl::Arp(r) => emit_arp_reply(r, mac, b.data_mut()),
                Ctl::Echo(e, req) => emit_echo_reply(e, mac, e.data(req.data()), b.data_mut()),
                Ctl::Neighbor(ns) => emit_neighbor_advert(ns, mac, b.data_mut()),
            };
            let ctl = self.ctl.remove(0);
            if n == 0 {
                // Cannot happen for replies to frames that fit in MAX_REPLY; dropped
                // rather than sent truncated.
                self.stats.ctl_queue_full += 1;
                continue;
            }
            let Some(b) = trim(b, n, pool) else {
                self.stats.ctl_alloc_failures += 1;
                continue;
            };
            match ctl {
                Ctl::Arp(_) => self.stats.arp_replies += 1,
                Ctl::Echo(..) => self.stats.icmp_echo_replies += 1,
                Ctl::Neighbor(_) => self.stats.nd_adverts += 1,
            }
            out.push(b);
        }
    }

    /// Flushes every held GRO run into TCP (shutdown: nothing stays held).
    pub fn flush_gro(&mut self, now: Instant) {
        if let Some(gro) = &mut self.gro {
            let tcp = &mut self.tcp;
            gro.flush_all(&mut |seg| tcp.handle_segment(now, seg));
        }
    }

    /// A snapshot of every stage's counters (the driver fills [`Stats::lp`]).
    pub fn stats(&self) -> Stats {
        Stats {
            pipeline: self.stats.clone(),
            parse: self.parse_stats.clone(),
            gro: self
                .gro
                .as_ref()
                .map(|g| g.stats().clone())
                .unwrap_or_default(),
            tcp: self.tcp.stats().clone(),
            ack: self.tcp.ack_stats().clone(),
            lp: Default::default(),
            conns_open: self.tcp.conn_count() as u64,
            gro_held_runs: self.gro.as_ref().map_or(0, |g| g.held_runs() as u64),
            ooo_bytes_held: self.tcp.ooo_bytes() as u64,
            impair: Default::default(),
        }
    }
}

/// What the chain path writes to besides its own storage: the pipeline's parse result
/// and counters.
struct Rx<'a> {
    local: &'a LocalAddrs,
    parsed: &'a mut Parsed,
    parse_stats: &'a mut ParseStats,
    stats: &'a mut PipelineStats,
}

/// Takes frames of chained buffers apart (docs/decisions/chained-mbufs.md): each segment
/// becomes a buffer of its own ([`PacketBuf::unchain`]), the frame is parsed from the
/// first with the others as its tail ([`parse_chain_into`]), and a TCP segment's payload
/// becomes one slice per buffer, handed to GRO or TCP as one segment. Storage for one
/// frame, allocated with the pipeline.
struct ChainRx<B> {
    tail: ArrayVec<B, MAX_FRAME_SEGS>,
    payload: PayloadChain<B>,
}

impl<B: PacketBuf> ChainRx<B> {
    /// Handles the chained frame `buf`: `None` when it was handed on or dropped (a frame
    /// that is not carried, counted as `pipeline.nonlinear`: more than [`MAX_FRAME_SEGS`]
    /// segments, segments the buffer type cannot detach, or headers that are not all in
    /// the first segment), otherwise its first buffer, with `rx.parsed` saying what it is
    /// (not a TCP segment; already counted).
    #[inline(never)]
    fn handle(
        &mut self,
        now: Instant,
        mut buf: B,
        rx: Rx<'_>,
        gro: &mut Option<Gro<B>>,
        one: &mut Segment<B>,
        deliver: &mut impl FnMut(&mut Segment<B>),
    ) -> Option<B> {
        let tail = &mut self.tail;
        let mut overflow = false;
        let unchained = buf.segment_count() <= MAX_FRAME_SEGS
            && buf.unchain(&mut |s| overflow |= tail.try_push(s).is_err());
        if !unchained || overflow {
            self.tail.clear();
            rx.stats.nonlinear_drops += 1;
            return None;
        }
        let csum = buf.rx_checksum();
        if !parse_chain_into(buf.data(), &self.tail[..], csum, rx.local, rx.parsed) {
            self.tail.clear();
            rx.stats.nonlinear_drops += 1;
            return None;
        }
        rx.parse_stats.record(rx.parsed);
        let Parsed::Tcp(meta) = rx.parsed else {
            self.tail.clear();
            return Some(buf);
        };
        // The payload, in order: what the first buffer holds after the headers, then
        // each later buffer up to the end of the IP packet (anything after it, such as
        // an Ethernet trailer, is not payload). Buffers left with no payload are freed.
        let mut left = usize::from(meta.payload_len);
        let off = usize::from(meta.payload_off);
        let first = buf.data().len().saturating_sub(off).min(left);
        left -= first;
        let p = &mut self.payload;
        let mut push = |b: B, off: usize, len: usize| {
            if len > 0 {
                // Fits: a frame has at most MAX_FRAME_SEGS buffers; offsets and lengths
                // lie inside one IP packet.
                let _ = p.push(PayloadSlice {
                    buf: b,
                    off: off as u16,
                    len: len as u16,
                });
            }
        };
        push(buf, off, first);
        for b in self.tail.drain(..) {
            let len = b.data().len().min(left);
            left -= len;
            push(b, 0, len);
        }
        match gro {
            Some(gro) => gro.handle_chain(now, meta, &mut self.payload, deliver),
            None => {
                one.fill_from_chain(meta, &mut self.payload, now);
                deliver(one);
                one.payload.clear();
            }
        }
        None
    }
}

fn push_ctl<B>(q: &mut ArrayVec<Ctl<B>, CTL_QUEUE>, stats: &mut PipelineStats, c: Ctl<B>) {
    if q.try_push(c).is_err() {
        stats.ctl_queue_full += 1;
    }
}

/// `b` cut to its first `n` bytes: in place when the buffer type can shrink, otherwise
/// copied into a buffer of exactly `n` bytes (replies are rare and small).
fn trim<P: BufPool>(mut b: P::Buf, n: usize, pool: &mut P) -> Option<P::Buf> {
    if b.data().len() == n || b.truncate(n) {
        return Some(b);
    }
    let mut t = pool.alloc(n)?;
    t.data_mut().copy_from_slice(b.data().get(..n)?);
    Some(t)
}
