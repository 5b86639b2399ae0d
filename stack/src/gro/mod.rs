//! Generic receive offload: coalesce each flow's contiguous segments under a nanosecond
//! flush timer.
//!
//! Read first: Linux `net/ipv4/tcp_offload.c` (`tcp_gro_receive`), `include/net/gro.h`
//! (`inet_gro_flush`, `ipv6_gro_flush`), `net/core/gro.c` (`dev_gro_receive`,
//! `gro_flush_oldest`) and `net/core/dev.c` (`napi_complete_done`), summarised in
//! `docs/reference/linux-receive-path.md` §1-2; DPDK's `rte_gro` and the defects weir
//! avoids (a linear flow scan, flagged segments overtaking held data) in
//! `docs/reference/prior-art.md` §1. The GRO rules as a whole: `docs/architecture.md`.
//!
//! # What GRO does
//!
//! [`Gro::handle_segment`] takes one parsed segment ([`TcpMeta`] plus its buffer) and
//! either appends its payload to the flow's held run or passes segments on as
//! [`Segment`]s through the caller's `out` callback. `out` gets `&mut Segment` in GRO's
//! own storage (a `Segment` is about 1.1 KiB: moving one per unit was GRO's largest cost
//! at one segment per unit); it takes the payload slices it keeps, and GRO frees whatever
//! is left in the segment's payload when `out` returns. A run is emitted (flushed) when its
//! last segment ends it (PSH, FIN, short), when it is full, when the flow's next segment
//! cannot join it, when its time is up, when the table needs its room, or on shutdown.
//! Every output unit is counted by [`FlushReason`] in [`GroStats`].
//!
//! The merge rules are Linux's, per pair (the held run `p`, the new segment `s`), checked
//! in one place (`can_merge`) for both the general path and the fast path:
//!
//! - same flow: addresses, ports, VLAN ([`FlowKey`]), the same MAC addresses
//!   (`gro_list_prepare`) and, for IPv6, the flow label (`ipv6_gro_receive` compares the
//!   first word under mask `0xF00FFFFF`);
//! - `s.seq == p.seq + p.len` (`tcp_gro_receive`: anything else, an out-of-order segment,
//!   a retransmission or an overlap, flushes `p` and may start a new run);
//! - identical ACK number, window field, data offset, and flags other than CWR/FIN/PSH
//!   (`tcp_flag_word` compared under `~(CWR|FIN|PSH)`);
//! - identical option bytes, **except TSval and TSecr**, which may stay equal or rise
//!   within a run but never fall (weir's relaxation, `docs/decisions/gro-timestamp-rule.md`:
//!   Linux compares every option byte, so a sender with a microsecond TS clock never
//!   coalesces, and a sender's TSecr changes as soon as our ACK reaches it, splitting every
//!   run held longer than a round trip; a receive-only stack uses TSecr for nothing). The
//!   output carries the first segment's options, whose TSval is the one to echo (RFC 7323
//!   §4.3), and the last segment's timestamp in [`Segment::ts_last`] (PAWS, `ts_recent`);
//! - same TTL/hop limit and TOS/traffic class; for IPv4 the same DF bit, and an IP ID that
//!   is either fixed (decided on the second segment, only with DF) or equals the first
//!   segment's ID plus the number of segments held (`inet_gro_flush`, `ipv6_gro_flush`);
//! - `s.len <= p.gso_size`, the first segment's payload length (`(len - 1) >= mss`
//!   flushes in `tcp_gro_receive`): a bigger segment flushes `p` and starts a new run.
//!
//! A segment with CWR, SYN, RST or URG, with IP options or extension headers
//! ([`NetMeta::ip_options`](crate::wire::NetMeta::ip_options)), or without payload is
//! never merged: the flow's held run is flushed first, then the segment is passed on as a
//! run of one. (Linux lets a CWR segment head a new run; weir passes it through, which
//! costs nothing measurable: CWR is sent once per congestion event.) A segment that is
//! shorter than `gso_size`, or carries PSH or FIN, is merged and ends the run at once
//! (`out_check_final`). A run ends when it reaches `max_segs` segments or when one more
//! full-sized segment would pass `max_bytes` (Linux stops below `gro_max_size` = 64 KiB in
//! `skb_gro_receive`); it is never held past either. Bad checksums and fragments never
//! reach GRO: the parser drops them.
//!
//! Order within a flow never changes: whatever GRO does not merge, it emits only after the
//! flow's held run. (DPDK 22.11's `rte_gro` returns flagged segments ahead of held data;
//! fixed upstream in 547f294357.)
//!
//! # The flush timer
//!
//! `flush_ns` is the longest any segment may be held, counted from its run's first
//! segment. Runs sit in the flow table in the order their first segment arrived; with one
//! `flush_ns` for all of them the oldest always expires first, so [`Gro::flush_expired`]
//! looks at the head of that list only: O(expired + 1) per call, whatever the flow count.
//!
//! # Call order (one pipeline iteration)
//!
//! 1. [`Gro::handle_segment`] for each segment of the received burst, in arrival order;
//! 2. [`Gro::end_of_burst`] once after the burst: with `flush_ns = 0` it flushes every
//!    held run (NAPI without `gro_flush_timeout`, `napi_complete_done`), otherwise the runs
//!    whose deadline passed. A run already due when the burst arrived has first taken the
//!    burst's segments of its flow, as a Linux poll merges into held packets before it
//!    flushes them; TCP sees it in the same iteration either way
//!    (`docs/decisions/due-runs-take-burst.md`);
//! 3. on iterations with no burst, [`Gro::flush_expired`] (or [`Gro::end_of_burst`]);
//!    [`Gro::next_deadline`] says when the next run expires;
//! 4. [`Gro::flush_all`] on shutdown.
//!
//! Called every iteration, a segment is held at most `flush_ns` plus one iteration. `now`
//! must not go backwards.
//!
//! # Holding longer while the receive queue is backlogged (`busy_hold_ns`, off by default)
//!
//! Linux flushes young GRO packets only when a NAPI poll ends with the queue drained:
//! a poll that used its whole budget (`work == weight`, 64 packets) flushes only the
//! packets held since an earlier jiffy (`napi_gro_flush(n, HZ >= 1000)` in `__napi_poll`).
//! So under load its runs grow for up to a millisecond, and aggregation rises exactly when
//! the receiver is behind. With `busy_hold_ns` set, weir does the same: while the driver
//! says the queue is backlogged ([`Gro::set_backlogged`]: the pipeline sets it when a
//! receive burst comes back full, and clears it on a short or empty one), a run may be
//! held up to `busy_hold_ns` instead of `flush_ns` (when that is longer). A segment is
//! then held at most the larger of the two plus one iteration. Frames that wait in a
//! backlogged queue are delayed anyway; holding them coalesced makes the receiver cheaper
//! per segment, so it catches up sooner. With many flows interleaved segment by segment,
//! a short window otherwise keeps runs short exactly when the receiver is overloaded
//! (a run then gathers its flow's segments from the few bursts that arrive before it is
//! due), and each short run costs more per segment: the receiver falls further behind.

mod stats;
mod table;
mod template;

#[cfg(test)]
mod tests;

pub use stats::{FlushReason, GroStats, HoldHistogram, HOLD_BUCKETS};

use crate::buf::{FreeBatch, PacketBuf, PayloadChain, PayloadSlice, MAX_CHAIN};
use crate::flow::{FlowKey, FlowWords};
use crate::segment::Segment;
use crate::seq::SeqNumber;
use crate::time::{Duration, Instant};
use crate::wire::{
    fast, FastTcpV4, LocalAddrs, SackBlock, TcpFlags, TcpMeta, TcpOptions, Timestamp,
    MAX_OPTION_BYTES, MAX_SACK_BLOCKS,
};
use table::{FlowTable, Run, MAX_RUNS, NIL};
use template::{RunTemplate, SameRun};

/// GRO settings for one pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroConfig {
    /// The longest any segment may be held, counted from its run's first segment. Zero
    /// flushes everything at the end of each burst (Linux's default `gro_flush_timeout`).
    pub flush_ns: Duration,
    /// Runs held at once (the flow table's capacity); when full, the oldest run is flushed
    /// to make room. Clamped to `1..=1,048,576` (each run costs about 160 bytes plus a
    /// payload chain of `MAX_CHAIN` slots, allocated up front).
    pub max_flows: usize,
    /// Most segments in one run. Clamped to `1..=MAX_CHAIN` (64): one chain slot each.
    pub max_segs: u16,
    /// Most payload bytes in one run; a run ends before it would pass this. The default,
    /// [`GRO_LEGACY_MAX_BYTES`], keeps a run under Linux's `GRO_LEGACY_MAX_SIZE` (64 KiB);
    /// up to [`GRO_MAX_BYTES`] (clamped) for longer runs.
    pub max_bytes: u32,
    /// While the receive queue is backlogged ([`Gro::set_backlogged`]), the longest a run
    /// may be held instead of `flush_ns`, when longer (Linux holds young runs for up to a
    /// jiffy while its polls use their whole budget: see the module documentation). Zero
    /// (the default) keeps `flush_ns` the longest hold at all times.
    pub busy_hold_ns: Duration,
    /// Record every segment's hold time (arrival to its unit's flush) in
    /// [`GroStats::hold_ns`]. Off by default: it costs one store per segment and one
    /// histogram update per segment flushed, and 512 bytes of arrival times per table slot.
    pub hold_histogram: bool,
}

/// The default `max_bytes`: a run's payload stays below Linux's `GRO_LEGACY_MAX_SIZE`
/// (64 KiB, `include/linux/netdevice.h`), what a 16-bit IP length can describe.
pub const GRO_LEGACY_MAX_BYTES: u32 = 65_535;

/// The largest `max_bytes`: Linux's `GRO_MAX_SIZE` (8 × 65,535 bytes, BIG TCP's limit,
/// `include/linux/netdevice.h`). A run reaches TCP as a chain of buffers, never as one IP
/// packet, so weir has no 16-bit length to respect; a run beyond 64 KiB is also bounded
/// by its chain's [`MAX_CHAIN`] slots (58 segments of 8,948 bytes fit in 512 KiB; 64 of
/// 1,448 bytes are 92,672 bytes).
pub const GRO_MAX_BYTES: u32 = 8 * 65_535;

impl Default for GroConfig {
    fn default() -> Self {
        GroConfig {
            flush_ns: Duration::ZERO,
            busy_hold_ns: Duration::ZERO,
            max_flows: 4096,
            max_segs: MAX_CHAIN as u16,
            max_bytes: GRO_LEGACY_MAX_BYTES,
            hold_histogram: false,
        }
    }
}

impl GroConfig {
    /// This configuration with every field clamped to what [`Gro`] supports.
    pub fn clamped(self) -> Self {
        GroConfig {
            flush_ns: self.flush_ns,
            busy_hold_ns: self.busy_hold_ns,
            max_flows: self.max_flows.clamp(1, MAX_RUNS),
            max_segs: self.max_segs.clamp(1, MAX_CHAIN as u16),
            max_bytes: self.max_bytes.clamp(1, GRO_MAX_BYTES),
            hold_histogram: self.hold_histogram,
        }
    }
}

/// Flags that keep a segment out of any run (Linux: CWR in `tcp_gro_receive`'s first
/// check, URG/RST/SYN in `out_check_final`).
const NEVER_MERGE: TcpFlags =
    TcpFlags(TcpFlags::CWR.0 | TcpFlags::SYN.0 | TcpFlags::RST.0 | TcpFlags::URG.0);

/// Flags that end a run once merged (`out_check_final`).
const ENDS_RUN: TcpFlags = TcpFlags(TcpFlags::PSH.0 | TcpFlags::FIN.0);

/// Flags allowed to differ between a run and a segment joining it (`tcp_gro_receive`
/// compares `tcp_flag_word` under `~(TCP_FLAG_CWR | TCP_FLAG_FIN | TCP_FLAG_PSH)`).
const MAY_DIFFER: u8 = TcpFlags::CWR.0 | TcpFlags::FIN.0 | TcpFlags::PSH.0;

/// What a segment must share with a run to join it, packed into words so the merge check
/// is a handful of XORs: both MAC addresses in `mac`; ACK, window, data offset and flags
/// in `hdr`; TTL, TOS, DF, TSval position and IPv6 flow label in `net`; option bytes
/// (TSval masked) in `opts`.
#[derive(Clone, Copy, Debug)]
struct HeaderSig {
    /// Source MAC and the first two bytes of the destination MAC, then the rest of it:
    /// two words, not a `u128`, because a 16-byte load of a signature just stored as two
    /// words stalls on store forwarding (it showed as half of `can_merge`'s time).
    mac: [u64; 2],
    hdr: u64,
    net: u64,
    opts: [u64; 5],
}

/// `PRESENT_MASK[n]`: the option words with bytes `0..n` kept (little-endian words).
static PRESENT_MASK: [[u64; 5]; 41] = {
    let mut t = [[0u64; 5]; 41];
    let mut n = 0;
    while n <= 40 {
        let mut i = 0;
        while i < 5 {
            let keep = if n <= 8 * i {
                0
            } else if n >= 8 * i + 8 {
                8
            } else {
                n - 8 * i
            };
            t[n][i] = if keep == 8 {
                u64::MAX
            } else {
                (1u64 << (8 * keep)) - 1
            };
            i += 1;
        }
        n += 1;
    }
    t
};

/// Index into [`TSVAL_MASK`] for "no timestamps option" (and any offset too large: TSval
/// and TSecr, 8 bytes, must fit in the 40 option bytes).
const TSVAL_NONE: usize = MAX_OPTION_BYTES - 7;

/// `TSVAL_MASK[t]`: the option words' bits holding bytes `t..t + 8` (TSval then TSecr),
/// none for [`TSVAL_NONE`].
static TSVAL_MASK: [[u64; 5]; TSVAL_NONE + 1] = {
    let mut t = [[0u64; 5]; TSVAL_NONE + 1];
    let mut at = 0;
    while at < TSVAL_NONE {
        let mut b = at;
        while b < at + 8 {
            t[at][b / 8] |= 0xff << (8 * (b % 8));
            b += 1;
        }
        at += 1;
    }
    t
};

impl HeaderSig {
    /// No segment's signature (a placeholder in an empty template).
    const NONE: HeaderSig = HeaderSig {
        mac: [0; 2],
        hdr: 0,
        net: 0,
        opts: [0; 5],
    };

    #[inline(always)]
    fn of(meta: &TcpMeta, frame: &[u8]) -> Self {
        // Same MAC header (`gro_list_prepare`, `compare_ether_header`): destination then
        // source as in the frame, little-endian in the low 96 bits. Read from the frame,
        // as Linux compares the header bytes: `meta`'s copies were just stored byte by
        // byte, and reading them back in words stalled on store forwarding.
        let mac = match frame.first_chunk::<12>() {
            Some(e) => {
                let mut lo = [0u8; 8];
                lo.copy_from_slice(&e[..8]);
                let mut hi = [0u8; 8];
                hi[..4].copy_from_slice(&e[8..]);
                [u64::from_le_bytes(lo), u64::from_le_bytes(hi)]
            }
            None => {
                // Not a frame `meta` was parsed from (tests with header-less buffers).
                let mut m = [0u8; 16];
                m[..6].copy_from_slice(&meta.dst_mac);
                m[6..12].copy_from_slice(&meta.src_mac);
                let m = u128::from_le_bytes(m);
                [m as u64, (m >> 64) as u64]
            }
        };
        let hdr = u64::from(meta.ack.get()) << 32
            | u64::from(meta.window) << 16
            | u64::from(meta.header_len) << 8
            | u64::from(meta.flags.0 & !MAY_DIFFER);
        let n = meta.net;
        let tsval_at = meta.tsval_at.unwrap_or(u8::MAX);
        let net = u64::from(n.ttl)
            | u64::from(n.tos) << 8
            | u64::from(n.df) << 16
            | u64::from(tsval_at) << 24
            | u64::from(n.flow_label) << 32;
        // Only the `header_len - 20` option bytes present count; TSval and TSecr are
        // masked because they may rise within a run (compared separately). Masks come from
        // two small tables: computing them per segment, or zeroing bytes and reading words
        // back, costs more than the rest of the merge check.
        let present = &PRESENT_MASK[usize::from(meta.header_len.saturating_sub(20)).min(40)];
        let ts = &TSVAL_MASK[usize::from(tsval_at).min(TSVAL_NONE)];
        let mut opts = [0u64; 5];
        for (i, (w, c)) in opts
            .iter_mut()
            .zip(meta.raw_opts.chunks_exact(8))
            .enumerate()
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            *w = u64::from_le_bytes(a) & present[i] & !ts[i];
        }
        HeaderSig {
            mac,
            hdr,
            net,
            opts,
        }
    }

    /// The signature of a segment in the parser's fast-path layout, computed from its
    /// header words: the same as [`HeaderSig::of`] its [`TcpMeta`] (the test
    /// `frames_take_the_same_path_as_parsed_segments` compares whole outputs).
    #[inline(always)]
    fn of_fast(f: &FastTcpV4) -> Self {
        let hdr = u64::from(f.ack) << 32
            | u64::from(f.window) << 16
            | u64::from(f.header_len) << 8
            | u64::from(f.flags.0 & !MAY_DIFFER);
        let tsval_at = f.tsval_at().unwrap_or(u8::MAX);
        let net = u64::from(f.ttl)
            | u64::from(f.tos) << 8
            | u64::from(f.df) << 16
            | u64::from(tsval_at) << 24;
        // NOP NOP TS with TSval and TSecr masked: the option kinds and length are left.
        let w0 = if f.ts.is_some() {
            u64::from(u32::from_le_bytes(fast::NOP_NOP_TS))
        } else {
            0
        };
        HeaderSig {
            mac: [f.macs[0], f.macs[1]],
            hdr,
            net,
            opts: [w0, 0, 0, 0, 0],
        }
    }

    /// Non-zero when any packed field differs from `run`'s.
    #[inline(always)]
    fn diff(&self, run: &Run) -> u64 {
        let mut d = (self.hdr ^ run.hdr)
            | (self.net ^ run.net)
            | (self.mac[0] ^ run.mac as u64)
            | (self.mac[1] ^ (run.mac >> 64) as u64);
        for (a, b) in self.opts.iter().zip(run.opts.iter()) {
            d |= a ^ b;
        }
        d
    }
}

/// Why a segment did not join the flow's held run.
enum NoMerge {
    /// It would pass `max_bytes` (flush the run as [`FlushReason::Size`]).
    Full,
    /// It does not match or is not contiguous ([`FlushReason::Gap`]).
    Mismatch,
}

/// The arrival of a frame that matched `t` (`f`: its varying fields): what
/// [`Arrival::of_fast`] gives for its parse (`template.rs` says why).
#[inline(always)]
fn arrival_of_template(t: &RunTemplate, f: SameRun) -> Arrival<'static> {
    Arrival {
        flow: t.flow,
        hash: t.hash,
        sig: t.sig,
        seq: f.seq,
        ts: f.ts,
        payload_off: t.payload_off,
        payload_len: t.payload_len,
        ip_id: f.ip_id,
        flags: t.flags,
        df: t.df,
        ip_options: false,
        opts: None,
    }
}

/// One arriving segment as the merge check and the run bookkeeping read it, built either
/// from a parsed [`TcpMeta`] ([`Gro::handle_segment`]) or straight from the header words
/// of a frame in the parser's fast-path layout ([`Gro::handle_frame`]), so that the
/// common case never writes a 170-byte `TcpMeta` and reads it back.
#[derive(Clone, Copy)]
struct Arrival<'a> {
    flow: FlowWords,
    hash: u32,
    sig: HeaderSig,
    seq: u32,
    ts: Option<Timestamp>,
    payload_off: u16,
    payload_len: u16,
    ip_id: u16,
    flags: TcpFlags,
    df: bool,
    /// IP options or IPv6 extension headers (never merged).
    ip_options: bool,
    /// The parsed options when they may hold more than a timestamp (from a `TcpMeta`);
    /// `None`: the timestamp is all.
    opts: Option<&'a TcpOptions>,
}

impl<'a> Arrival<'a> {
    #[inline(always)]
    fn of_meta(meta: &'a TcpMeta, frame: &[u8]) -> Self {
        let flow = meta.flow.words();
        Arrival {
            flow,
            hash: flow.hash32(),
            sig: HeaderSig::of(meta, frame),
            seq: meta.seq.get(),
            ts: meta.opts.timestamp,
            payload_off: meta.payload_off,
            payload_len: meta.payload_len,
            ip_id: meta.net.ip_id,
            flags: meta.flags,
            df: meta.net.df,
            ip_options: meta.net.ip_options,
            opts: Some(&meta.opts),
        }
    }

    #[inline(always)]
    fn of_fast(f: &FastTcpV4) -> Self {
        let flow = FlowWords::v4(f.src, f.sport, f.dst, f.dport);
        Arrival {
            flow,
            hash: flow.hash32(),
            sig: HeaderSig::of_fast(f),
            seq: f.seq,
            ts: f.ts,
            payload_off: f.payload_off(),
            payload_len: f.payload_len,
            ip_id: f.ip_id,
            flags: f.flags,
            df: f.df,
            ip_options: false,
            opts: None,
        }
    }

    /// The run this segment starts alone in way `way` of its bucket at `now`, its first
    /// segment's options kept as `first_opts` says.
    #[inline(always)]
    fn run(&self, now: Instant, way: u8, first_opts: u8) -> Run {
        let len = self.payload_len;
        let sig = &self.sig;
        Run {
            flow: FlowKey::from_words(&self.flow),
            mac: u128::from(sig.mac[0]) | u128::from(sig.mac[1]) << 64,
            hdr: sig.hdr,
            net: sig.net,
            opts: sig.opts,
            next_seq: self.seq.wrapping_add(u32::from(len)),
            tsval: self.ts.map_or(0, |t| t.tsval),
            tsecr: self.ts.map_or(0, |t| t.tsecr),
            len: u32::from(len),
            gso_size: len,
            segs: 1,
            ip_id: self.ip_id,
            fixed_id: false,
            flags: self.flags.0,
            first_rx: now,
            hash: self.hash,
            way,
            first_opts,
            first_off: self.payload_off,
        }
    }

    /// The fields [`can_merge`] reads besides the signature.
    #[inline(always)]
    fn candidate(&self) -> Candidate {
        Candidate {
            seq: self.seq,
            len: self.payload_len,
            ip_id: self.ip_id,
            df: self.df,
            ts: self.ts,
        }
    }

    /// The options as the parser reported them.
    #[inline(always)]
    fn opts(&self) -> TcpOptions {
        match self.opts {
            Some(o) => *o,
            None => TcpOptions {
                timestamp: self.ts,
                ..TcpOptions::default()
            },
        }
    }
}

/// A received segment's header as [`Gro::handle`] first reads it, before it builds the
/// [`Arrival`] (flow hash and header signature): what decides whether the segment goes to
/// the table at all ([`Gro::straight`]), and the header of the unit of one it leaves as
/// when it does not. Implemented for the parsed header ([`Gro::handle_segment`]) and the
/// fast path's header words ([`Gro::handle_frame`]), so that both decide alike.
trait Wire<'a> {
    fn payload_len(&self) -> u16;
    fn payload_off(&self) -> u16;
    fn flags(&self) -> TcpFlags;
    /// IP options or IPv6 extension headers (never merged).
    fn ip_options(&self) -> bool;
    /// A word that differs between two flows almost always (source address and both
    /// ports): the bypass's "same flow again" check. Equal for equal flows on both paths;
    /// a collision only ends a bypass early.
    fn flow_tag(&self) -> u64;
    /// The arrival the merge check reads; `frame` is the buffer it was parsed from.
    fn arrival(&self, frame: &[u8]) -> Arrival<'a>;
    /// Writes this segment's header fields into `one`, a unit of one received at `now`.
    fn set_header<B: PacketBuf>(&self, one: &mut Segment<B>, now: Instant);
}

impl<'a> Wire<'a> for &'a TcpMeta {
    #[inline(always)]
    fn payload_len(&self) -> u16 {
        self.payload_len
    }
    #[inline(always)]
    fn payload_off(&self) -> u16 {
        self.payload_off
    }
    #[inline(always)]
    fn flags(&self) -> TcpFlags {
        self.flags
    }
    #[inline(always)]
    fn ip_options(&self) -> bool {
        self.net.ip_options
    }
    #[inline(always)]
    fn flow_tag(&self) -> u64 {
        let w = self.flow.words();
        w.0[1] ^ w.0[4]
    }
    #[inline(always)]
    fn arrival(&self, frame: &[u8]) -> Arrival<'a> {
        Arrival::of_meta(self, frame)
    }
    #[inline(always)]
    fn set_header<B: PacketBuf>(&self, one: &mut Segment<B>, now: Instant) {
        one.set_header(self, now);
    }
}

impl Wire<'static> for FastTcpV4 {
    #[inline(always)]
    fn payload_len(&self) -> u16 {
        self.payload_len
    }
    #[inline(always)]
    fn payload_off(&self) -> u16 {
        FastTcpV4::payload_off(self)
    }
    #[inline(always)]
    fn flags(&self) -> TcpFlags {
        self.flags
    }
    #[inline(always)]
    fn ip_options(&self) -> bool {
        false
    }
    #[inline(always)]
    fn flow_tag(&self) -> u64 {
        let w = FlowWords::v4(self.src, self.sport, self.dst, self.dport);
        w.0[1] ^ w.0[4]
    }
    #[inline(always)]
    fn arrival(&self, _frame: &[u8]) -> Arrival<'static> {
        Arrival::of_fast(self)
    }
    #[inline(always)]
    fn set_header<B: PacketBuf>(&self, one: &mut Segment<B>, now: Instant) {
        one.flow = FlowKey::from_words(&FlowWords::v4(self.src, self.sport, self.dst, self.dport));
        let mac = u128::from(self.macs[0]) | u128::from(self.macs[1]) << 64;
        one.peer_mac = mac_bytes((mac >> 48) as u64);
        one.local_mac = mac_bytes(mac as u64);
        one.seq = SeqNumber(self.seq);
        one.ack = SeqNumber(self.ack);
        one.flags = self.flags;
        one.window = self.window;
        one.opts = NO_OPTS;
        one.opts.timestamp = self.ts;
        one.ts_last = self.ts;
        one.segs = 1;
        one.gso_size = self.payload_len;
        one.first_rx = now;
    }
}

/// Slices in an emitted unit's chain from which what its consumer left is freed at once,
/// as one batch, rather than gathered with other units' buffers first.
const FREE_AT_ONCE: usize = 16;

/// A run held this long or longer has its buffers prefetched before they are freed at
/// once (by then other runs' traffic has likely pushed its descriptors out of the L1
/// cache); a younger run's were read just now. Measured with `weir-bench gro`: prefetching
/// at every flush cost the 0 ns rows 4-5% and not prefetching cost `rr` 16 flows at
/// 100 µs (43-segment runs) 8%.
const FREE_COLD_AGE: Duration = Duration::from_nanos(10_000);

/// Runs flushed one segment long in a row that begin a bypass of the table
/// ([`Gro::maybe_bypass`]). With any real share of merges a streak this long is rare
/// (at 1 run in 20 merging, 0.95^64 = 4% of streaks), and 64 runs of one cost GRO about
/// 64 x 36 cycles more than passing them straight on (`weir-bench e2e` at 4,096 flows).
const LONE_RUNS_TO_BYPASS: u32 = 64;
/// Segments in the first bypass after a merge.
const BYPASS_MIN: u32 = 256;
/// Segments in the longest bypass: the most that can pass unmerged before the table is
/// tried again, when the segments of a flow begin to arrive close enough to merge but
/// never back to back (back to back ends a bypass at once).
const BYPASS_MAX: u32 = 8192;

/// The GRO stage of one pipeline: a flow table of held runs, the flush timer and counters.
/// See the [module documentation](self) for the rules and the call order.
pub struct Gro<B> {
    cfg: GroConfig,
    table: FlowTable,
    /// Cold halves of the runs, indexed by the table's slots: the output segment each run
    /// is emitted as. `start_run` sets its sequence number and options, `merge` appends to
    /// its payload, `flush_slot` fills in the rest from the hot [`Run`] and hands it on.
    /// Used from a run's second segment on (see `first`).
    cold: Box<[Segment<B>]>,
    /// The first segment's payload of each run that holds one segment only, by slot. A
    /// run of one (every run with flows interleaved segment by segment) is then emitted
    /// from `one`, which stays in cache, and never touches its cold `Segment`: 4,096
    /// cold segments are about 5 MiB. The run's second segment moves it to the cold
    /// chain ([`Gro::spill_first`]).
    /// (The buffer only: its offset is [`Run::first_off`], its length the run's.)
    first: Box<[Option<B>]>,
    /// Where a segment that is not held is handed on from (a run of one).
    one: Segment<B>,
    /// Buffers of emitted units the consumer left, freed together when the batch is full
    /// and before every public method returns: a unit of one segment per `free_bulk`
    /// call cost as much as the rest of its flush.
    spent: FreeBatch<B>,
    stats: GroStats,
    /// With `hold_histogram`: each held segment's arrival, `MAX_CHAIN` per table slot.
    arrivals: Option<Box<[Instant]>>,
    /// The latest `now` seen (`flush_all` has none of its own).
    now: Instant,
    /// The longest a run may be held now: `flush_ns`, or the longer `busy_hold_ns` while
    /// the receive queue is backlogged ([`Gro::set_backlogged`]).
    hold: Duration,
    /// The header of the last run [`Gro::handle_frame`] merged into, which its next frame
    /// is compared against first (see `template.rs`). When the run is flushed the header
    /// stays, naming no run, for the flow's next run.
    template: RunTemplate,
    /// The template names no run but is tried for the flow's next run: set when its run is
    /// flushed, cleared when a frame does not match it (see `Gro::start_templated`).
    template_kept: bool,
    /// Runs flushed one segment long since the last run that held more (see
    /// [`Gro::maybe_bypass`]).
    lone_runs: u32,
    /// Segments still to pass on without the table in the current bypass (0: none).
    bypass_left: u32,
    /// The length of the next bypass.
    bypass_len: u32,
    /// [`Wire::flow_tag`] of the current bypass's previous segment.
    bypass_tag: u64,
}

impl<B: PacketBuf> Gro<B> {
    /// A GRO stage with `cfg` (clamped, see [`GroConfig::clamped`]). Allocates everything
    /// it will ever use: nothing on the data path allocates.
    pub fn new(cfg: GroConfig) -> Self {
        let cfg = cfg.clamped();
        let table = FlowTable::new(cfg.max_flows);
        let cold = (0..table.capacity()).map(|_| Segment::empty()).collect();
        let first = (0..table.capacity()).map(|_| None).collect();
        let arrivals = cfg
            .hold_histogram
            .then(|| vec![Instant::from_nanos(0); table.capacity() * MAX_CHAIN].into_boxed_slice());
        Gro {
            cfg,
            table,
            cold,
            first,
            one: Segment::empty(),
            spent: FreeBatch::new(),
            stats: GroStats {
                hold_ns: cfg.hold_histogram.then(Box::default),
                ..GroStats::default()
            },
            arrivals,
            now: Instant::from_nanos(0),
            hold: cfg.flush_ns,
            template: RunTemplate::NONE,
            template_kept: false,
            lone_runs: 0,
            bypass_left: 0,
            bypass_len: BYPASS_MIN,
            bypass_tag: u64::MAX,
        }
    }

    /// The configuration in effect (after clamping).
    pub fn config(&self) -> &GroConfig {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> &GroStats {
        &self.stats
    }

    /// Runs currently held (never more than `max_flows`).
    pub fn held_runs(&self) -> usize {
        self.table.len()
    }

    /// Takes one received segment, `meta` as parsed from `buf`, received at `now`. Emits
    /// through `out`, in order, whatever this segment completes: possibly the flow's held
    /// run, then possibly a run containing this segment. Whatever is held is emitted by a
    /// later call.
    #[inline]
    pub fn handle_segment(
        &mut self,
        now: Instant,
        meta: &TcpMeta,
        buf: B,
        out: &mut impl FnMut(&mut Segment<B>),
    ) {
        self.handle(now, &meta, buf, out);
        self.spent.free();
    }

    /// [`Gro::handle_segment`] for a segment whose payload lies in several buffers (a
    /// frame of chained buffers, split into one buffer per segment by the pipeline):
    /// `meta` as parsed, `payload` its payload slices in order (taken, left empty). The
    /// merge rules are the same; a run then holds more slices than segments, and ends
    /// when its chain has no room for another segment as long as this one
    /// ([`FlushReason::Size`]).
    #[inline(never)]
    pub fn handle_chain(
        &mut self,
        now: Instant,
        meta: &TcpMeta,
        payload: &mut PayloadChain<B>,
        out: &mut impl FnMut(&mut Segment<B>),
    ) {
        // A bypass ends here: a run is about to be looked for (and maybe started) without
        // the bypass's checks. Ending it early is always safe (nothing is held in it).
        self.bypass_left = 0;
        // No frame: the MAC addresses come from `meta` (the same signature).
        let a = Arrival::of_meta(meta, &[]);
        self.take_in(now);
        let held = self.table.find(a.hash, &a.flow);
        let n = payload.slice_count();
        if a.flags.intersects(NEVER_MERGE) || a.ip_options || a.payload_len == 0 {
            if let Some(s) = held {
                self.flush_slot(s, FlushReason::Gap, out);
            }
            self.emit_chain(now, &a, payload, FlushReason::Passthrough, out);
        } else if let Some(s) = held {
            let run = self.table.run(s);
            // A run of one keeps its slice in `first` until the second segment comes.
            let used = self.cold[s as usize].payload.slice_count()
                + usize::from(self.first[s as usize].is_some());
            let room = used + n <= MAX_CHAIN;
            match can_merge(run, self.cfg.max_bytes, a.sig.diff(run), a.candidate()) {
                Ok(()) if room => {
                    if self.table.run(s).segs == 1 {
                        self.spill_first(s);
                    }
                    let c = &mut self.cold[s as usize].payload;
                    for sl in payload.drain() {
                        // Fits: checked above.
                        let _ = c.push(sl);
                    }
                    let held = self.merged(s, a.payload_len, a.ip_id, a.flags, a.ts, out);
                    if held && self.cold[s as usize].payload.slice_count() + n > MAX_CHAIN {
                        self.flush_slot(s, FlushReason::Size, out);
                    }
                }
                Ok(()) | Err(NoMerge::Full) => {
                    self.flush_slot(s, FlushReason::Size, out);
                    self.start_chain(now, &a, payload, out);
                }
                Err(NoMerge::Mismatch) => {
                    self.flush_slot(s, FlushReason::Gap, out);
                    self.start_chain(now, &a, payload, out);
                }
            }
        } else {
            self.start_chain(now, &a, payload, out);
        }
        payload.clear();
        self.spent.free();
    }

    /// [`Gro::start_run_inline`] for a segment in several slices: the run starts in its
    /// cold `Segment` (no `first` buffer), so later segments, chained or not, append to it.
    fn start_chain(
        &mut self,
        now: Instant,
        a: &Arrival<'_>,
        payload: &mut PayloadChain<B>,
        out: &mut impl FnMut(&mut Segment<B>),
    ) {
        let len = a.payload_len;
        if a.flags.intersects(ENDS_RUN) {
            self.emit_chain(now, a, payload, FlushReason::Flags, out);
            return;
        }
        if self.cfg.max_segs <= 1
            || 2 * u32::from(len) > self.cfg.max_bytes
            || 2 * payload.slice_count() > MAX_CHAIN
        {
            self.emit_chain(now, a, payload, FlushReason::Size, out);
            return;
        }
        let mut evicted = 0;
        let (s, way) = loop {
            match self.table.claim(a.hash) {
                Ok(room) => break room,
                Err(v) if evicted < 2 => {
                    self.flush_slot(v, FlushReason::Eviction, out);
                    evicted += 1;
                }
                Err(_) => {
                    self.emit_chain(now, a, payload, FlushReason::Eviction, out);
                    return;
                }
            }
        };
        *self.table.run_mut(s) = a.run(now, way, FIRST_OPTS_COLD);
        if let Some(arr) = &mut self.arrivals {
            arr[s as usize * MAX_CHAIN] = now;
        }
        let c = &mut self.cold[s as usize];
        c.seq = SeqNumber(a.seq);
        c.opts = a.opts();
        // The chain is empty (emptied when the slot's last run was emitted) and has room.
        for sl in payload.drain() {
            let _ = c.payload.push(sl);
        }
        debug_assert!(self.first[s as usize].is_none());
    }

    /// [`Gro::emit_one`] for a segment in several slices.
    #[cold]
    fn emit_chain(
        &mut self,
        now: Instant,
        a: &Arrival<'_>,
        payload: &mut PayloadChain<B>,
        reason: FlushReason,
        out: &mut impl FnMut(&mut Segment<B>),
    ) {
        self.stats.record(reason, 1);
        if let Some(h) = &mut self.stats.hold_ns {
            h.record(0);
        }
        let one = &mut self.one;
        // Empty (emptied after the last unit): room for a frame's slices.
        for sl in payload.drain() {
            let _ = one.payload.push(sl);
        }
        one.flow = FlowKey::from_words(&a.flow);
        let mac = u128::from(a.sig.mac[0]) | u128::from(a.sig.mac[1]) << 64;
        one.peer_mac = mac_bytes((mac >> 48) as u64);
        one.local_mac = mac_bytes(mac as u64);
        one.seq = SeqNumber(a.seq);
        one.ack = SeqNumber((a.sig.hdr >> 32) as u32);
        one.flags = a.flags;
        one.window = (a.sig.hdr >> 16) as u16;
        one.opts = a.opts();
        one.ts_last = a.ts;
        one.segs = 1;
        one.gso_size = a.payload_len;
        one.first_rx = now;
        out(one);
        let Gro { one, spent, .. } = self;
        spent.push_chain(&mut one.payload);
    }

    /// Takes one received frame if it has the parser's fast-path layout (untagged IPv4
    /// without options, TCP with no options or NOP NOP TS, checksums verified by the NIC,
    /// addressed to `local`: [`FastTcpV4::parse`]) and handles it as
    /// [`Gro::handle_segment`] would handle [`crate::wire::parse()`]'s result, reading the
    /// header words straight from the frame. Anything else is given back untouched, for
    /// [`crate::wire::parse_into`] and `handle_segment` (which count what is wrong with
    /// it, or handle the layouts this does not).
    ///
    /// Once a run has taken two frames in a row, its header is kept as a template: the
    /// run's next frame is recognised by comparing its header words with it (only the
    /// fields that change within a run are read and checked), with no parse, flow hash or
    /// table lookup (`template.rs` says why that decides the same). When the run is
    /// flushed the header stays, and the flow's next frame that repeats it starts the
    /// flow's next run without a parse, flow hash or signature (`start_templated`).
    #[inline]
    pub fn handle_frame(
        &mut self,
        now: Instant,
        buf: B,
        local: &LocalAddrs,
        out: &mut impl FnMut(&mut Segment<B>),
    ) -> Result<(), B> {
        let taken = if self.template.slot != NIL {
            self.handle_same_run(now, buf, local, out)
        } else if self.template_kept && self.bypass_left == 0 {
            // The template's run was flushed. During a bypass nothing is held and
            // `straight` decides on the parse alone.
            self.start_templated(now, buf, local, out)
        } else {
            Err(buf)
        };
        let buf = match taken {
            Ok(()) => {
                self.spent.free();
                return Ok(());
            }
            Err(buf) => buf,
        };
        let Some(f) = FastTcpV4::parse(buf.data(), buf.rx_checksum(), local) else {
            return Err(buf);
        };
        if let Some(s) = self.handle(now, &f, buf, out) {
            // Merged and still held: the run's next frame is recognised by its header. Set
            // once per run (the template is kept while it names this slot).
            if self.template.slot != s {
                self.set_template(s, local);
            }
        }
        self.spent.free();
        Ok(())
    }

    /// Takes `buf` if it is the next segment of the template's run and may join it
    /// ([`can_merge`], on the fields the template does not fix); otherwise
    /// gives it back with nothing changed.
    #[inline(never)]
    fn handle_same_run(
        &mut self,
        now: Instant,
        buf: B,
        local: &LocalAddrs,
        out: &mut impl FnMut(&mut Segment<B>),
    ) -> Result<(), B> {
        let t = &self.template;
        if t.slot == NIL {
            return Err(buf);
        }
        let Some(f) = t.matches(buf.data(), buf.rx_checksum(), local) else {
            return Err(buf);
        };
        let (s, len, off, flags, df) = (t.slot, t.payload_len, t.payload_off, t.flags, t.df);
        let c = Candidate {
            seq: f.seq,
            len,
            ip_id: f.ip_id,
            df,
            ts: f.ts,
        };
        // Signature difference 0: the template matched every header byte it is built from.
        // Either refusal gives the frame back; the general path then decides again, with
        // the same check, and counts the flush reason.
        if can_merge(self.table.run(s), self.cfg.max_bytes, 0, c).is_err() {
            return Err(buf);
        }
        let slice = PayloadSlice { buf, off, len };
        // A template names a run only once it holds two segments, or once
        // `start_templated` has spilled its first: nothing to spill.
        debug_assert!(self.first[s as usize].is_none());
        if let Err(slice) = self.cold[s as usize].payload.push(slice) {
            return Err(slice.buf);
        }
        self.take_in(now);
        self.merged(s, len, f.ip_id, flags, f.ts, out);
        Ok(())
    }

    /// Takes `buf` if it repeats the header of the template, which names no run (its run
    /// was flushed: with `flush_ns = 0`, at every burst's end), and handles it as
    /// [`Gro::handle`] handles its parse, from the template's flow and signature; the
    /// template then names the run that holds it, if one does. Otherwise gives it back
    /// with nothing changed. The template's frame merged, so this one (the same flags and
    /// length) would not leave at once through [`Gro::straight`] (no bypass is running);
    /// the lookup finds a run the general path started for the flow.
    #[inline(never)]
    fn start_templated(
        &mut self,
        now: Instant,
        buf: B,
        local: &LocalAddrs,
        out: &mut impl FnMut(&mut Segment<B>),
    ) -> Result<(), B> {
        let t = &self.template;
        let Some(f) = t.matches(buf.data(), buf.rx_checksum(), local) else {
            // Another flow's frame (or no template): the template is not tried again until
            // it names a run again (flows interleaved would each pay for the compare).
            self.template_kept = false;
            return Err(buf);
        };
        let a = arrival_of_template(t, f);
        // A run the general path started for the flow: the general path takes the frame
        // (the lookup changes only its hints).
        if self.table.oldest().is_some() && self.table.find(a.hash, &a.flow).is_some() {
            return Err(buf);
        }
        self.take_in(now);
        if let Some(slot) = self.start_run_inline(now, &a, buf, out) {
            // The first segment goes to the cold part at once, as a second segment would
            // move it: the same-run path, which takes the run's next frames, then never
            // has to (`flush_slot` still emits a run of one as a run of one). The
            // template's flow is the frame's.
            self.spill_first(slot);
            self.template.slot = slot;
        }
        Ok(())
    }

    /// Counts a segment in (held until its unit leaves) and advances GRO's clock: the
    /// start of every path that takes a segment.
    #[inline(always)]
    fn take_in(&mut self, now: Instant) {
        self.stats.segments_in += 1;
        self.stats.held_segments += 1;
        self.now = now;
    }

    /// Remembers the frame just merged into the run in slot `s` (its last segment) as
    /// the template for the run's next frames. Parses the frame again rather than taking
    /// the caller's `FastTcpV4`: a reference to it would keep it in memory, and the
    /// per-segment path would read its fields back through a store-forwarding stall.
    #[cold]
    fn set_template(&mut self, s: u32, local: &LocalAddrs) {
        let t = self.cold[s as usize]
            .payload
            .slices()
            .last()
            .and_then(|sl| {
                let frame = sl.buf.data();
                let f = FastTcpV4::parse(frame, sl.buf.rx_checksum(), local)?;
                RunTemplate::new(s, frame, &f, local)
            });
        self.template = t.unwrap_or(RunTemplate::NONE);
    }

    /// Returns the slot of the run `a` merged into if that run is still held and the
    /// previous segment was of the same flow (a streak worth a template: with flows
    /// interleaved segment by segment, a template would be replaced at every segment).
    ///
    /// With nothing held for any flow, a segment that would not be held either leaves at
    /// once, before the flow hash, header signature and lookup are computed
    /// ([`Gro::straight`]).
    #[inline(always)]
    fn handle<'a, W: Wire<'a>>(
        &mut self,
        now: Instant,
        w: &W,
        buf: B,
        out: &mut impl FnMut(&mut Segment<B>),
    ) -> Option<u32> {
        self.take_in(now);
        if self.table.oldest().is_none() {
            if let Some(reason) = self.straight(w) {
                let one = &mut self.one;
                if w.payload_len() > 0 {
                    // Empty (emptied after the last unit), so there is room for one slice.
                    let _ = one.payload.push(PayloadSlice {
                        buf,
                        off: w.payload_off(),
                        len: w.payload_len(),
                    });
                } else {
                    self.spent.push(buf);
                }
                w.set_header(&mut self.one, now);
                self.emit_filled(reason, out);
                return None;
            }
        }
        let a = &w.arrival(buf.data());
        let prev = self.table.last();
        // An empty table holds no run to find (every idle flow's first segment, and every
        // segment of a workload whose messages end in PSH).
        let held = if self.table.oldest().is_none() {
            None
        } else {
            self.table.find(a.hash, &a.flow)
        };

        if a.flags.intersects(NEVER_MERGE) || a.ip_options || a.payload_len == 0 {
            // Never merged; whatever the flow holds goes first so order is kept.
            if let Some(s) = held {
                self.flush_slot(s, FlushReason::Gap, out);
            }
            self.emit_one(now, *a, buf, FlushReason::Passthrough, out);
            return None;
        }

        let Some(s) = held else {
            self.start_run_inline(now, a, buf, out);
            return None;
        };
        let run = self.table.run(s);
        match can_merge(run, self.cfg.max_bytes, a.sig.diff(run), a.candidate()) {
            Ok(()) => (self.merge(s, a, buf, out) && prev == s).then_some(s),
            Err(why) => {
                let reason = match why {
                    NoMerge::Full => FlushReason::Size,
                    NoMerge::Mismatch => FlushReason::Gap,
                };
                self.flush_slot(s, reason, out);
                self.start_run(now, *a, buf, out);
                None
            }
        }
    }

    /// With nothing held for any flow: the reason a segment leaves at once as a unit of
    /// one, or `None` when it goes to the table. A segment that is never merged leaves as
    /// [`FlushReason::Passthrough`] and a PSH or FIN data segment as [`FlushReason::Flags`]
    /// (it never starts a run: `out_check_final`), exactly as through the table, where the
    /// lookup could only answer "no run": request/response traffic, where every message
    /// ends in PSH, costs no lookup. During a bypass every other segment leaves as
    /// [`FlushReason::Bypass`], unless it is of the same flow as the bypass's previous
    /// segment, which ends the bypass (a train of one flow: it can merge). The table being
    /// empty is what keeps order: no flow has a run its segment could overtake.
    #[inline(always)]
    fn straight<'a, W: Wire<'a>>(&mut self, w: &W) -> Option<FlushReason> {
        let flags = w.flags();
        if flags.intersects(NEVER_MERGE) || w.ip_options() || w.payload_len() == 0 {
            return Some(FlushReason::Passthrough);
        }
        if flags.intersects(ENDS_RUN) {
            return Some(FlushReason::Flags);
        }
        if self.bypass_left == 0 {
            return None;
        }
        let tag = w.flow_tag();
        if tag == self.bypass_tag {
            self.bypass_left = 0;
            return None;
        }
        self.bypass_tag = tag;
        self.bypass_left -= 1;
        Some(FlushReason::Bypass)
    }

    /// Begins a bypass if the last [`LONE_RUNS_TO_BYPASS`] runs flushed all held one
    /// segment: flushes what is held (runs of one, most likely, that would have left so
    /// anyway) and passes the next `bypass_len` segments on without the table. Each
    /// bypass that follows another with no merge between them is twice as long, up to
    /// [`BYPASS_MAX`]: in between, the table is tried for as long as it takes to see that
    /// many lone runs again, so that trying costs a bounded share of the segments.
    #[inline(always)]
    fn maybe_bypass(&mut self, out: &mut impl FnMut(&mut Segment<B>)) {
        if self.lone_runs < LONE_RUNS_TO_BYPASS {
            return;
        }
        self.begin_bypass(out);
    }

    #[cold]
    fn begin_bypass(&mut self, out: &mut impl FnMut(&mut Segment<B>)) {
        self.flush_all_as(FlushReason::Bypass, out);
        self.lone_runs = 0;
        self.bypass_left = self.bypass_len;
        self.bypass_len = (self.bypass_len * 2).min(BYPASS_MAX);
        self.bypass_tag = u64::MAX;
        self.stats.bypasses += 1;
    }

    /// Call once after each received burst. With `flush_ns = 0` flushes every held run
    /// ([`FlushReason::BurstEnd`], as `napi_complete_done` does without
    /// `gro_flush_timeout`); otherwise flushes the runs whose deadline passed
    /// ([`FlushReason::Timer`]).
    #[inline]
    pub fn end_of_burst(&mut self, now: Instant, out: &mut impl FnMut(&mut Segment<B>)) {
        self.now = now;
        // Nothing held (every idle loop iteration, and every burst whose runs all ended
        // in it): nothing to flush or free.
        if self.table.oldest().is_none()
            && self.spent.is_empty()
            && self.lone_runs < LONE_RUNS_TO_BYPASS
        {
            return;
        }
        self.end_of_burst_held(now, out);
    }

    #[inline(never)]
    fn end_of_burst_held(&mut self, now: Instant, out: &mut impl FnMut(&mut Segment<B>)) {
        if self.hold == Duration::ZERO {
            self.flush_all_as(FlushReason::BurstEnd, out);
            self.maybe_bypass(out);
            self.spent.free();
        } else {
            self.flush_expired_held(now, out);
        }
    }

    /// Flushes every run held for `flush_ns` or longer ([`FlushReason::Timer`]), oldest
    /// first. Costs O(expired + 1): runs are kept in arrival order and the oldest expires
    /// first.
    #[inline]
    pub fn flush_expired(&mut self, now: Instant, out: &mut impl FnMut(&mut Segment<B>)) {
        self.now = now;
        // Nothing held: the check is inlined into every loop iteration, the flush is not.
        if self.table.oldest().is_none()
            && self.spent.is_empty()
            && self.lone_runs < LONE_RUNS_TO_BYPASS
        {
            return;
        }
        self.flush_expired_held(now, out);
    }

    #[inline(never)]
    fn flush_expired_held(&mut self, now: Instant, out: &mut impl FnMut(&mut Segment<B>)) {
        while let Some(s) = self.table.oldest() {
            if self.table.run(s).first_rx + self.hold > now {
                break;
            }
            self.flush_slot_inline(s, FlushReason::Timer, out);
        }
        self.maybe_bypass(out);
        self.spent.free();
    }

    /// When the oldest held run expires, or `None` when nothing is held.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.table
            .oldest()
            .map(|s| self.table.run(s).first_rx + self.hold)
    }

    /// Tells GRO whether the receive queue is backlogged (the last receive burst came
    /// back full: more frames are waiting). While it is, runs may be held up to
    /// `busy_hold_ns` instead of `flush_ns` (when longer); see the module documentation.
    /// No effect when `busy_hold_ns` is zero.
    #[inline]
    pub fn set_backlogged(&mut self, backlogged: bool) {
        self.hold = if backlogged {
            self.cfg.flush_ns.max(self.cfg.busy_hold_ns)
        } else {
            self.cfg.flush_ns
        };
    }

    /// Flushes every held run, oldest first ([`FlushReason::Shutdown`]).
    pub fn flush_all(&mut self, out: &mut impl FnMut(&mut Segment<B>)) {
        self.flush_all_as(FlushReason::Shutdown, out);
        self.spent.free();
    }

    fn flush_all_as(&mut self, reason: FlushReason, out: &mut impl FnMut(&mut Segment<B>)) {
        while let Some(s) = self.table.oldest() {
            self.flush_slot_inline(s, reason, out);
        }
    }

    /// Appends `a`'s payload to the run in slot `s`; emits the run if this ends it.
    /// Returns whether the run is still held. Inlined: a call would store the arrival's
    /// words to memory only to read them back.
    #[inline(always)]
    fn merge(
        &mut self,
        s: u32,
        a: &Arrival<'_>,
        buf: B,
        out: &mut impl FnMut(&mut Segment<B>),
    ) -> bool {
        let slice = PayloadSlice {
            buf,
            off: a.payload_off,
            len: a.payload_len,
        };
        if self.table.run(s).segs == 1 {
            self.spill_first(s);
        }
        if let Err(slice) = self.cold[s as usize].payload.push(slice) {
            // Unreachable (`can_merge` checks the chain's room); keep order and the data.
            let now = self.table.run(s).first_rx;
            self.flush_slot(s, FlushReason::Size, out);
            self.emit_one(now, *a, slice.buf, FlushReason::Size, out);
            return false;
        }
        self.merged(s, a.payload_len, a.ip_id, a.flags, a.ts, out)
    }

    /// The run in slot `s` after a segment's payload (`len` bytes, IPv4 ID `ip_id`,
    /// `flags`, timestamp `ts`) was appended to its chain: its bookkeeping, and its flush
    /// if this ends it. Returns whether the run is still held.
    #[inline(always)]
    fn merged(
        &mut self,
        s: u32,
        len: u16,
        ip_id: u16,
        flags: TcpFlags,
        ts: Option<Timestamp>,
        out: &mut impl FnMut(&mut Segment<B>),
    ) -> bool {
        let cfg = self.cfg;
        let run = self.table.run_mut(s);
        let v4 = !run.flow.v6;
        if v4 && run.segs == 1 && ip_id == run.ip_id {
            run.fixed_id = true;
        }
        run.next_seq = run.next_seq.wrapping_add(u32::from(len));
        run.len += u32::from(len);
        let i = usize::from(run.segs);
        run.segs += 1;
        if let Some(a) = &mut self.arrivals {
            a[s as usize * MAX_CHAIN + i] = self.now;
        }
        run.flags |= flags.0;
        if let Some(t) = ts {
            run.tsval = t.tsval;
            run.tsecr = t.tsecr;
        }
        let ended = if flags.intersects(ENDS_RUN) || len < run.gso_size {
            Some(FlushReason::Flags)
        } else if run.segs >= cfg.max_segs || run.len + u32::from(run.gso_size) > cfg.max_bytes {
            Some(FlushReason::Size)
        } else {
            None
        };
        match ended {
            Some(reason) => {
                self.flush_slot(s, reason, out);
                false
            }
            None => true,
        }
    }

    /// Starts a run with `a`: holds it, or emits it at once when it already ends. `a` by
    /// value, as for [`Gro::emit_one`]: with a reference to it escaping to a call, the
    /// caller built every arrival in memory (40 instructions per segment).
    #[inline(never)]
    fn start_run(
        &mut self,
        now: Instant,
        a: Arrival<'_>,
        buf: B,
        out: &mut impl FnMut(&mut Segment<B>),
    ) {
        self.start_run_inline(now, &a, buf, out);
    }

    /// [`Gro::start_run`], inlined where a segment of a flow with no held run starts
    /// one (every segment, with flows interleaved): the arrival's words stay in
    /// registers instead of going through memory to a call. Returns the run's slot if
    /// the segment is held.
    #[inline(always)]
    fn start_run_inline(
        &mut self,
        now: Instant,
        a: &Arrival<'_>,
        buf: B,
        out: &mut impl FnMut(&mut Segment<B>),
    ) -> Option<u32> {
        let len = a.payload_len;
        if a.flags.intersects(ENDS_RUN) {
            // `out_check_final`: a PSH/FIN segment is never held as a new head.
            self.emit_one(now, *a, buf, FlushReason::Flags, out);
            return None;
        }
        if self.cfg.max_segs <= 1 || 2 * u32::from(len) > self.cfg.max_bytes {
            self.emit_one(now, *a, buf, FlushReason::Size, out);
            return None;
        }
        let hash = a.hash;
        // Room: the oldest run of a full table, or of a full bucket, goes first
        // (`gro_flush_oldest`). Two flushes at most.
        let mut evicted = 0;
        let (s, way) = loop {
            match self.table.claim(hash) {
                Ok(room) => break room,
                Err(v) if evicted < 2 => {
                    self.flush_slot(v, FlushReason::Eviction, out);
                    evicted += 1;
                }
                Err(_) => {
                    // Unreachable: two flushes make room. Keep the data and the order.
                    self.emit_one(now, *a, buf, FlushReason::Eviction, out);
                    return None;
                }
            }
        };
        let first_opts = match (a.opts, a.ts) {
            (Some(_), _) => FIRST_OPTS_COLD,
            (None, None) => FIRST_OPTS_NONE,
            (None, Some(_)) => FIRST_OPTS_TS,
        };
        *self.table.run_mut(s) = a.run(now, way, first_opts);
        if let Some(arr) = &mut self.arrivals {
            arr[s as usize * MAX_CHAIN] = now;
        }
        if first_opts == FIRST_OPTS_COLD {
            // Options beyond the timestamp (the parsed path): the cold part keeps them.
            self.cold[s as usize].opts = a.opts();
        }
        // Empty: taken when the slot's last run was spilled or emitted.
        self.first[s as usize] = Some(buf);
        Some(s)
    }

    /// Moves the first segment of the run in slot `s` (if it holds one only: `first[s]` is
    /// `Some` exactly then) to its cold `Segment` (chain, sequence number, options), before
    /// the run's second segment is appended, while the run's TSval/TSecr are still the
    /// first segment's.
    #[inline(always)]
    fn spill_first(&mut self, s: u32) {
        if let Some(buf) = self.first[s as usize].take() {
            let run = self.table.run(s);
            let sl = PayloadSlice {
                buf,
                off: run.first_off,
                len: run.gso_size,
            };
            let c = &mut self.cold[s as usize];
            c.seq = SeqNumber(run.next_seq.wrapping_sub(run.len));
            if run.first_opts != FIRST_OPTS_COLD {
                put_first_opts(run, &mut c.opts);
            }
            // The chain is empty (emptied when the slot's last run was emitted).
            let _ = c.payload.push(sl);
        }
    }

    /// Emits one segment as a run of one. Out of line (the paths that call it are the
    /// uncommon ones), `a` by value: 6 instructions per segment fewer than a reference
    /// at 4,096 interleaved flows (callgrind).
    #[inline(never)]
    fn emit_one(
        &mut self,
        now: Instant,
        a: Arrival<'_>,
        buf: B,
        reason: FlushReason,
        out: &mut impl FnMut(&mut Segment<B>),
    ) {
        let one = &mut self.one;
        // Empty (emptied after the last unit), so there is room for one slice.
        if a.payload_len > 0 {
            let _ = one.payload.push(PayloadSlice {
                buf,
                off: a.payload_off,
                len: a.payload_len,
            });
        } else {
            self.spent.push(buf);
        }
        let one = &mut self.one;
        one.flow = FlowKey::from_words(&a.flow);
        let mac = u128::from(a.sig.mac[0]) | u128::from(a.sig.mac[1]) << 64;
        one.peer_mac = mac_bytes((mac >> 48) as u64);
        one.local_mac = mac_bytes(mac as u64);
        one.seq = SeqNumber(a.seq);
        one.ack = SeqNumber((a.sig.hdr >> 32) as u32);
        one.flags = a.flags;
        one.window = (a.sig.hdr >> 16) as u16;
        one.opts = a.opts();
        one.ts_last = a.ts;
        one.segs = 1;
        one.gso_size = a.payload_len;
        one.first_rx = now;
        self.emit_filled(reason, out);
    }

    /// Hands `self.one`, filled with one segment that was never held, on as a unit of one
    /// (counted under `reason`), then gathers what its consumer left of the payload.
    #[inline(always)]
    fn emit_filled(&mut self, reason: FlushReason, out: &mut impl FnMut(&mut Segment<B>)) {
        self.stats.record(reason, 1);
        if let Some(h) = &mut self.stats.hold_ns {
            h.record(0); // never held
        }
        out(&mut self.one);
        let Gro { one, spent, .. } = self;
        spent.push_chain(&mut one.payload);
    }

    /// Emits the run in slot `s` and frees the slot.
    #[inline(never)]
    fn flush_slot(&mut self, s: u32, reason: FlushReason, out: &mut impl FnMut(&mut Segment<B>)) {
        self.flush_slot_inline(s, reason, out);
    }

    /// [`Gro::flush_slot`], inlined into the loops of the timer and the burst end: with
    /// flows interleaved every run is flushed there, and a call per run cost ~20
    /// instructions of register saves and reloads.
    #[inline(always)]
    fn flush_slot_inline(
        &mut self,
        s: u32,
        reason: FlushReason,
        out: &mut impl FnMut(&mut Segment<B>),
    ) {
        // Unlinked first; the slot's fields stay as they are until the slot is reused.
        self.table.remove(s);
        if self.template.slot == s {
            // The template names the run, not the slot; its header stays, for the flow's
            // next run.
            self.template.slot = NIL;
            self.template_kept = true;
        }
        let run = self.table.run(s);
        self.stats.record(reason, run.segs);
        if let (Some(a), Some(h)) = (&self.arrivals, &mut self.stats.hold_ns) {
            let base = s as usize * MAX_CHAIN;
            for t in &a[base..base + usize::from(run.segs)] {
                h.record(self.now.saturating_since(*t).as_nanos());
            }
        }
        if let Some(buf) = self.first[s as usize].take() {
            // A run of one: emitted from `one`, its cold part untouched. Holding it bought
            // nothing (see `maybe_bypass`).
            self.lone_runs += 1;
            let Gro {
                table, cold, one, ..
            } = self;
            let run = table.run(s);
            if run.first_opts == FIRST_OPTS_COLD {
                one.opts = cold[s as usize].opts;
            } else {
                put_first_opts(run, &mut one.opts);
            }
            let sl = PayloadSlice {
                buf,
                off: run.first_off,
                len: run.gso_size,
            };
            // Empty (emptied after the last unit), so there is room for one slice.
            let _ = one.payload.push(sl);
            one.seq = SeqNumber(run.next_seq.wrapping_sub(run.len));
            describe(one, run);
            out(one);
            let Gro { one, spent, .. } = self;
            spent.push_chain(&mut one.payload);
            return;
        }
        if run.segs == 1 {
            // A run of one that `start_templated` spilled to its cold part: emitted from
            // there (the same unit), counted as the run of one it is.
            self.lone_runs += 1;
        } else {
            // A merge: holding pays, and the next bypass (if any) starts short again.
            self.lone_runs = 0;
            self.bypass_len = BYPASS_MIN;
        }
        let c = &mut self.cold[s as usize];
        describe(c, run);
        out(c);
        // Whatever the consumer left is freed in bulk; the slot's chain is empty for its
        // next run. A long chain is a batch of its own, freed at once: gathering it first
        // cost a copy and a prefetch per buffer. The prefetch is kept for a run held long
        // enough for its descriptors to have left the cache; a short chain joins the
        // others, freed later in this call.
        if c.payload.slice_count() >= FREE_AT_ONCE {
            if self.now.saturating_since(run.first_rx) >= FREE_COLD_AGE {
                for sl in c.payload.slices() {
                    sl.buf.prefetch_for_free();
                }
            }
            c.payload.clear();
        } else {
            self.spent.push_chain(&mut c.payload);
        }
    }
}

/// Writes the run's header fields into the unit it is emitted as (`seq`, the options and
/// the payload are already there).
#[inline(always)]
fn describe<B>(seg: &mut Segment<B>, run: &Run) {
    seg.flow = run.flow;
    // Destination MAC in bytes 0..6 of `mac`, source in 6..12 (shifted out of the word,
    // not read back from a byte array: that stalled on store forwarding).
    seg.peer_mac = mac_bytes((run.mac >> 48) as u64);
    seg.local_mac = mac_bytes(run.mac as u64);
    seg.ack = SeqNumber((run.hdr >> 32) as u32);
    // First segment's flags | PSH/FIN of the rest: every other flag is identical across
    // the run, so the OR of all is exactly Linux's result.
    seg.flags = TcpFlags(run.flags);
    seg.window = (run.hdr >> 16) as u16;
    seg.ts_last = seg.opts.timestamp.map(|_| Timestamp {
        tsval: run.tsval,
        tsecr: run.tsecr,
    });
    seg.segs = run.segs;
    seg.gso_size = run.gso_size;
    seg.first_rx = run.first_rx;
}

/// [`Run::first_opts`]: the first segment's options are in the cold `Segment` (parsed,
/// possibly more than a timestamp).
const FIRST_OPTS_COLD: u8 = 0;
/// [`Run::first_opts`]: the first segment had no options.
const FIRST_OPTS_NONE: u8 = 1;
/// [`Run::first_opts`]: the first segment had only a timestamp, the run's TSval/TSecr
/// while it holds one segment.
const FIRST_OPTS_TS: u8 = 2;

/// No options (a constant, so that writing it is a copy, not a build on the stack whose
/// narrow stores stall the wide loads that copy it).
const NO_OPTS: TcpOptions = TcpOptions {
    mss: None,
    wscale: None,
    sack_permitted: false,
    timestamp: None,
    sack: [SackBlock {
        left: SeqNumber(0),
        right: SeqNumber(0),
    }; MAX_SACK_BLOCKS],
    sack_count: 0,
};

/// Writes the first segment's options of `run` (held with one segment, its options not
/// [`FIRST_OPTS_COLD`]) to `dst`: none, or its timestamp.
#[inline(always)]
fn put_first_opts(run: &Run, dst: &mut TcpOptions) {
    *dst = NO_OPTS;
    if run.first_opts == FIRST_OPTS_TS {
        dst.timestamp = Some(Timestamp {
            tsval: run.tsval,
            tsecr: run.tsecr,
        });
    }
}

/// The low six bytes of `w`, least significant first (a MAC address packed by
/// [`HeaderSig::of`]).
#[inline(always)]
fn mac_bytes(w: u64) -> [u8; 6] {
    // Sliced, not built element by element: the array literal compiled to ~20 vector
    // byte shuffles per address (42 of a run of one's 206 flush instructions).
    let mut m = [0u8; 6];
    m.copy_from_slice(&w.to_le_bytes()[..6]);
    m
}

/// What the merge check reads of an arriving segment besides its header signature: the
/// fields that change from segment to segment within a run, and DF for the IP ID rule.
/// Both paths have them: [`Arrival`] (the general path) and the template's [`SameRun`]
/// (the fast path, `handle_same_run`).
#[derive(Clone, Copy)]
struct Candidate {
    seq: u32,
    len: u16,
    ip_id: u16,
    df: bool,
    ts: Option<Timestamp>,
}

/// Whether a segment may join `run`: all of Linux's per-pair checks, written here only.
/// `sig_diff` is [`HeaderSig::diff`] of the segment's signature against the run (non-zero:
/// a header field that must match differs). The general path passes the difference it
/// computes; the fast path passes 0, because its template compared every header byte the
/// signature is built from (`template.rs`), and with `sig_diff` a constant 0 the inlined
/// check is the rest of the rule, no more work per segment than before. Inlined so that
/// the candidate's fields stay in registers.
#[inline(always)]
fn can_merge(run: &Run, max_bytes: u32, sig_diff: u64, c: Candidate) -> Result<(), NoMerge> {
    let ts = c.ts.unwrap_or_default();
    // TSval and TSecr may stay or rise, in modular order (RFC 7323 §5.3), never fall.
    let ts_fell = (ts.tsval.wrapping_sub(run.tsval) as i32) < 0
        || (ts.tsecr.wrapping_sub(run.tsecr) as i32) < 0;
    // `tcp_gro_receive`: `(len - 1) >= mss` flushes (also catches zero length).
    let too_long = c.len > run.gso_size;
    let gap = c.seq != run.next_seq;
    let mismatch = sig_diff != 0 || ts_fell || too_long || gap || !ip_id_ok(run, c.ip_id, c.df);
    if mismatch {
        return Err(NoMerge::Mismatch);
    }
    // `skb_gro_receive` refuses (-E2BIG) what would pass the size limit. Normally
    // unreachable: a run ends as soon as one more full segment would not fit.
    if run.len + u32::from(c.len) > max_bytes || usize::from(run.segs) >= MAX_CHAIN {
        return Err(NoMerge::Full);
    }
    Ok(())
}

/// IPv4 ID rule of `inet_gro_flush`: on the second segment a zero ID delta with DF set
/// makes the run "fixed ID"; then every ID must equal the first, otherwise each must be
/// the first plus the number of segments held. IPv6 has no ID.
#[inline]
fn ip_id_ok(run: &Run, ip_id: u16, df: bool) -> bool {
    if run.flow.v6 {
        return true;
    }
    let delta = ip_id.wrapping_sub(run.ip_id);
    let fixed = run.fixed_id || (run.segs == 1 && df && delta == 0);
    delta == if fixed { 0 } else { run.segs }
}

impl<B> core::fmt::Debug for Gro<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Gro")
            .field("cfg", &self.cfg)
            .field("held_runs", &self.table.len())
            .field("stats", &self.stats)
            .finish()
    }
}

// Compile-time checks that a run's hot fields stay within two and a half cache lines.
const _: () = assert!(core::mem::size_of::<FlowKey>() <= 40);
const _: () = assert!(core::mem::size_of::<Run>() <= 160);
