//! One test per merge or flush rule, each run for IPv4 and for IPv6 (`ipv4::rule`,
//! `ipv6::rule`), plus the rules that exist in one family only. The rules and their Linux
//! sources are listed in the module documentation of `gro`.

use super::*;
use crate::mem::VecBuf;
use crate::wire::TcpOptions;
use core::net::{Ipv4Addr, Ipv6Addr};

const MSS: u16 = 1448;
const ISS: u32 = 1_000_000;
const TSVAL: u32 = 100;
const TSECR: u32 = 7;

fn flow(v6: bool, i: u16) -> FlowKey {
    if v6 {
        FlowKey::v6(
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 1, i),
            40_000 + i,
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
            5001,
        )
    } else {
        FlowKey::v4(
            Ipv4Addr::new(198, 18, (i >> 8) as u8, i as u8),
            40_000 + i,
            Ipv4Addr::new(198, 18, 0, 1),
            5001,
        )
    }
}

/// Sets the timestamps option, laid out as Linux sends it: NOP, NOP, kind 8, length 10.
fn set_ts(m: &mut TcpMeta, tsval: u32, tsecr: u32) {
    m.raw_opts[..4].copy_from_slice(&[1, 1, 8, 10]);
    m.raw_opts[4..8].copy_from_slice(&tsval.to_be_bytes());
    m.raw_opts[8..12].copy_from_slice(&tsecr.to_be_bytes());
    m.opts.timestamp = Some(Timestamp { tsval, tsecr });
    m.tsval_at = Some(4);
}

/// A data segment of flow `f` at sequence offset `off` from [`ISS`], `len` bytes, with
/// the timestamps option, ACK set, DF and a fixed IPv4 ID of 0 (RFC 6864 atomic).
fn seg_of(v6: bool, f: u16, off: u32, len: u16) -> TcpMeta {
    let mut m = TcpMeta {
        flow: flow(v6, f),
        src_mac: [2, 0, 0, 0, 0, 2],
        dst_mac: [2, 0, 0, 0, 0, 1],
        seq: SeqNumber(ISS.wrapping_add(off)),
        ack: SeqNumber(5555),
        flags: TcpFlags::ACK,
        window: 512,
        header_len: 32,
        opts: TcpOptions::default(),
        raw_opts: [0; MAX_OPTION_BYTES],
        tsval_at: None,
        payload_off: if v6 { 86 } else { 66 },
        payload_len: len,
        net: crate::wire::NetMeta {
            ttl: 64,
            tos: 0,
            df: true,
            ip_id: 0,
            flow_label: if v6 { 0x12345 } else { 0 },
            ip_options: false,
        },
    };
    set_ts(&mut m, TSVAL, TSECR);
    m
}

/// The `i`-th full-sized segment of flow 0.
fn seg(v6: bool, i: u32) -> TcpMeta {
    seg_of(v6, 0, i * u32::from(MSS), MSS)
}

/// The payload byte at sequence number `s` (so concatenations reveal order).
fn byte_at(s: u32) -> u8 {
    (s % 251) as u8
}

/// The frame `m` describes: its MAC header (GRO compares the frame's, as Linux does), filler
/// for the rest of the headers, then the payload.
fn frame(m: &TcpMeta) -> VecBuf {
    let mut v = vec![0xee; usize::from(m.payload_off)];
    v[..6].copy_from_slice(&m.dst_mac);
    v[6..12].copy_from_slice(&m.src_mac);
    v.extend((0..u32::from(m.payload_len)).map(|i| byte_at(m.seq.get().wrapping_add(i))));
    VecBuf::from_vec(v)
}

/// A GRO stage with its outputs collected and a virtual clock.
struct H {
    gro: Gro<VecBuf>,
    out: Vec<Segment<VecBuf>>,
    now: Instant,
}

impl H {
    fn new(cfg: GroConfig) -> Self {
        H {
            gro: Gro::new(cfg),
            out: Vec::new(),
            now: Instant::from_nanos(1_000),
        }
    }
    fn timer(ns: u64) -> Self {
        Self::new(GroConfig {
            flush_ns: Duration::from_nanos(ns),
            ..GroConfig::default()
        })
    }
    fn feed(&mut self, m: TcpMeta) {
        let b = frame(&m);
        let out = &mut self.out;
        self.gro
            .handle_segment(self.now, &m, b, &mut |s| out.push(s.take()));
    }
    fn end(&mut self) {
        let out = &mut self.out;
        self.gro.end_of_burst(self.now, &mut |s| out.push(s.take()));
    }
    fn expire(&mut self) {
        let out = &mut self.out;
        self.gro
            .flush_expired(self.now, &mut |s| out.push(s.take()));
    }
    fn all(&mut self) {
        let out = &mut self.out;
        self.gro.flush_all(&mut |s| out.push(s.take()));
    }
    /// `(first seq offset, segs, payload len)` of every unit so far.
    fn units(&self) -> Vec<(u32, u16, u32)> {
        self.out
            .iter()
            .map(|s| (s.seq.get().wrapping_sub(ISS), s.segs, s.payload.len()))
            .collect()
    }
    fn n(&self, r: FlushReason) -> u64 {
        self.gro.stats().flushed(r)
    }
    /// Every emitted unit's payload is the bytes of its sequence range, in order.
    fn check_payloads(&self) {
        for s in &self.out {
            let want: Vec<u8> = (0..s.payload.len())
                .map(|i| byte_at(s.seq.get().wrapping_add(i)))
                .collect();
            assert_eq!(s.payload.to_vec(), want, "unit at {:?}", s.seq);
        }
    }
}

const M: u32 = MSS as u32;

/// Feeds segments 0 and 1, then `next`; expects segments 0-1 flushed as a gap and `next`
/// held on its own.
fn expect_gap_before(v6: bool, next: TcpMeta) {
    let mut h = H::timer(100_000);
    h.feed(seg(v6, 0));
    h.feed(seg(v6, 1));
    h.feed(next);
    assert_eq!(h.units(), vec![(0, 2, 2 * M)]);
    assert_eq!(h.n(FlushReason::Gap), 1);
    assert_eq!(h.gro.held_runs(), 1);
    h.all();
    assert_eq!(h.out.len(), 2);
    assert_eq!(h.out[1].segs, 1);
    h.check_payloads();
}

/// Feeds segments 0 and 1, then `next` (never merged); expects 0-1 flushed first, then
/// `next` passed through as a run of one, nothing held.
fn expect_passthrough_after_run(v6: bool, next: TcpMeta) {
    let mut h = H::timer(100_000);
    h.feed(seg(v6, 0));
    h.feed(seg(v6, 1));
    h.feed(next);
    assert_eq!(h.out.len(), 2);
    assert_eq!((h.out[0].segs, h.out[0].payload.len()), (2, 2 * M));
    assert_eq!(h.out[1].segs, 1);
    assert_eq!(h.out[1].flags, next.flags);
    assert_eq!(h.out[1].payload.len(), u32::from(next.payload_len));
    assert_eq!(h.n(FlushReason::Gap), 1);
    assert_eq!(h.n(FlushReason::Passthrough), 1);
    assert_eq!(h.gro.held_runs(), 0);
    h.check_payloads();
}

// ---- merging -------------------------------------------------------------------------

fn contiguous_segments_merge_into_one_run(v6: bool) {
    let mut h = H::new(GroConfig::default());
    for i in 0..3 {
        h.feed(seg(v6, i));
    }
    assert!(h.out.is_empty());
    assert_eq!(h.gro.held_runs(), 1);
    assert_eq!(h.gro.stats().held_segments, 3);
    h.end();
    assert_eq!(h.units(), vec![(0, 3, 3 * M)]);
    let s = &h.out[0];
    assert_eq!(s.flow, flow(v6, 0));
    assert_eq!(s.gso_size, MSS);
    assert_eq!(s.flags, TcpFlags::ACK);
    assert_eq!(s.ack, SeqNumber(5555));
    assert_eq!(s.window, 512);
    assert_eq!(s.payload.slice_count(), 3);
    assert_eq!(s.peer_mac, [2, 0, 0, 0, 0, 2]);
    assert_eq!(s.first_rx, h.now);
    assert_eq!(h.n(FlushReason::BurstEnd), 1);
    assert_eq!(h.gro.stats().held_segments, 0);
    h.check_payloads();
}

fn different_flows_never_merge(v6: bool) {
    let mut h = H::new(GroConfig::default());
    h.feed(seg_of(v6, 0, 0, MSS));
    h.feed(seg_of(v6, 1, M, MSS));
    h.feed(seg_of(v6, 0, M, MSS));
    h.feed(seg_of(v6, 1, 2 * M, MSS));
    assert_eq!(h.gro.held_runs(), 2);
    h.end();
    let by_flow: Vec<_> = h.out.iter().map(|s| (s.flow, s.segs)).collect();
    assert_eq!(by_flow, vec![(flow(v6, 0), 2), (flow(v6, 1), 2)]);
    h.check_payloads();
}

fn run_merges_across_sequence_wrap(v6: bool) {
    let mut h = H::new(GroConfig::default());
    let base = u32::MAX - ISS - 1000; // ISS + base is 1001 bytes before the wrap
    for i in 0..3 {
        h.feed(seg_of(v6, 0, base + i * M, MSS));
    }
    h.end();
    assert_eq!(h.out.len(), 1);
    assert_eq!(h.out[0].segs, 3);
    h.check_payloads();
}

// ---- per-pair header checks (tcp_gro_receive, inet_gro_flush, ipv6_gro_flush) -----------

fn out_of_order_segment_flushes_held_run_first(v6: bool) {
    expect_gap_before(v6, seg(v6, 3));
}

fn retransmitted_segment_flushes_held_run_first(v6: bool) {
    expect_gap_before(v6, seg(v6, 1));
}

fn overlapping_segment_flushes_held_run_first(v6: bool) {
    expect_gap_before(v6, seg_of(v6, 0, 2 * M - 100, MSS));
}

fn mac_address_change_ends_run(v6: bool) {
    // `gro_list_prepare` compares the whole MAC header (a router failover changes it).
    let mut m = seg(v6, 2);
    m.src_mac = [2, 0, 0, 0, 0, 3];
    expect_gap_before(v6, m);
    let mut m = seg(v6, 2);
    m.dst_mac = [0x33, 0x33, 0, 0, 0, 1];
    expect_gap_before(v6, m);
}

fn ack_number_change_ends_run(v6: bool) {
    let mut m = seg(v6, 2);
    m.ack = SeqNumber(6666);
    expect_gap_before(v6, m);
}

fn window_change_ends_run(v6: bool) {
    let mut m = seg(v6, 2);
    m.window = 511;
    expect_gap_before(v6, m);
}

fn header_length_change_ends_run(v6: bool) {
    // The same timestamps plus a SACK block: more option bytes.
    let mut m = seg(v6, 2);
    m.header_len = 44;
    m.raw_opts[12..24].copy_from_slice(&[1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
    expect_gap_before(v6, m);
}

fn option_bytes_change_ends_run(v6: bool) {
    // A byte outside the timestamp values (the first NOP) differs.
    let mut m = seg(v6, 2);
    m.raw_opts[0] ^= 0x80;
    expect_gap_before(v6, m);
}

fn tsecr_may_stay_equal_or_rise_within_run(v6: bool) {
    // docs/decisions/gro-timestamp-rule.md: the sender's TSecr moves when our ACK reaches it;
    // a receive-only stack uses TSecr for nothing, so a rise does not end the run.
    let mut h = H::new(GroConfig::default());
    for (i, tsecr) in [(0, TSECR), (1, TSECR + 1), (2, TSECR + 1)] {
        let mut m = seg(v6, i);
        set_ts(&mut m, TSVAL, tsecr);
        h.feed(m);
    }
    h.end();
    assert_eq!(h.units(), vec![(0, 3, 3 * M)]);
    assert_eq!(h.out[0].opts.timestamp.map(|t| t.tsecr), Some(TSECR));
    assert_eq!(h.out[0].ts_last.map(|t| t.tsecr), Some(TSECR + 1));
}

fn tsecr_falling_ends_run(v6: bool) {
    let mut m = seg(v6, 2);
    set_ts(&mut m, TSVAL, TSECR - 1);
    expect_gap_before(v6, m);
}

fn option_bytes_past_header_length_are_ignored(v6: bool) {
    let mut h = H::new(GroConfig::default());
    h.feed(seg(v6, 0));
    let mut m = seg(v6, 1);
    m.raw_opts[30] = 0xaa; // beyond header_len: not an option byte
    h.feed(m);
    h.end();
    assert_eq!(h.units(), vec![(0, 2, 2 * M)]);
}

fn tsval_may_stay_equal_or_rise_within_run(v6: bool) {
    // docs/decisions/gro-timestamp-rule.md: first TSval echoed (RFC 7323 §4.3), last kept.
    let mut h = H::new(GroConfig::default());
    for (i, ts) in [(0, TSVAL), (1, TSVAL), (2, TSVAL + 5)] {
        let mut m = seg(v6, i);
        set_ts(&mut m, ts, TSECR);
        h.feed(m);
    }
    h.end();
    assert_eq!(h.units(), vec![(0, 3, 3 * M)]);
    let s = &h.out[0];
    assert_eq!(s.opts.timestamp.map(|t| t.tsval), Some(TSVAL));
    assert_eq!(
        s.ts_last,
        Some(Timestamp {
            tsval: TSVAL + 5,
            tsecr: TSECR
        })
    );
}

fn tsval_rise_across_wrap_is_a_rise(v6: bool) {
    let mut h = H::new(GroConfig::default());
    let mut a = seg(v6, 0);
    set_ts(&mut a, u32::MAX - 1, TSECR);
    let mut b = seg(v6, 1);
    set_ts(&mut b, 3, TSECR);
    h.feed(a);
    h.feed(b);
    h.end();
    assert_eq!(h.units(), vec![(0, 2, 2 * M)]);
    assert_eq!(h.out[0].ts_last.map(|t| t.tsval), Some(3));
}

fn tsval_falling_ends_run(v6: bool) {
    let mut m = seg(v6, 2);
    set_ts(&mut m, TSVAL - 1, TSECR);
    expect_gap_before(v6, m);
}

fn other_flag_change_ends_run(v6: bool) {
    // ECE is part of `tcp_flag_word` and must match; only CWR/FIN/PSH may differ.
    let mut m = seg(v6, 2);
    m.flags = TcpFlags::ACK | TcpFlags::ECE;
    expect_gap_before(v6, m);
}

fn ttl_change_ends_run(v6: bool) {
    let mut m = seg(v6, 2);
    m.net.ttl = 63;
    expect_gap_before(v6, m);
}

fn tos_change_ends_run(v6: bool) {
    let mut m = seg(v6, 2);
    m.net.tos = 0x02; // ECT(0)
    expect_gap_before(v6, m);
}

fn payload_larger_than_gso_size_starts_new_run(v6: bool) {
    let mut h = H::new(GroConfig::default());
    h.feed(seg_of(v6, 0, 0, 1000));
    h.feed(seg_of(v6, 0, 1000, 1000));
    h.feed(seg_of(v6, 0, 2000, MSS));
    assert_eq!(h.units(), vec![(0, 2, 2000)]);
    assert_eq!(h.n(FlushReason::Gap), 1);
    h.feed(seg_of(v6, 0, 2000 + M, MSS));
    h.end();
    assert_eq!(h.units(), vec![(0, 2, 2000), (2000, 2, 2 * M)]);
    assert_eq!(h.out[1].gso_size, MSS);
    h.check_payloads();
}

// ---- segments never merged ------------------------------------------------------------

fn with_flag(v6: bool, f: TcpFlags) -> TcpMeta {
    let mut m = seg(v6, 2);
    m.flags = TcpFlags::ACK | f;
    m
}

fn cwr_segment_flushes_run_and_passes_through(v6: bool) {
    expect_passthrough_after_run(v6, with_flag(v6, TcpFlags::CWR));
}

fn syn_segment_flushes_run_and_passes_through(v6: bool) {
    expect_passthrough_after_run(v6, with_flag(v6, TcpFlags::SYN));
}

fn rst_segment_flushes_run_and_passes_through(v6: bool) {
    expect_passthrough_after_run(v6, with_flag(v6, TcpFlags::RST));
}

fn urg_segment_flushes_run_and_passes_through(v6: bool) {
    expect_passthrough_after_run(v6, with_flag(v6, TcpFlags::URG));
}

fn ip_options_segment_flushes_run_and_passes_through(v6: bool) {
    let mut m = seg(v6, 2);
    m.net.ip_options = true;
    expect_passthrough_after_run(v6, m);
}

fn zero_payload_segment_flushes_run_and_passes_through(v6: bool) {
    let mut m = seg(v6, 2);
    m.payload_len = 0;
    expect_passthrough_after_run(v6, m);
}

fn never_merged_segment_alone_is_not_held(v6: bool) {
    let mut h = H::timer(100_000);
    h.feed(with_flag(v6, TcpFlags::SYN));
    assert_eq!(h.out.len(), 1);
    assert_eq!(h.gro.held_runs(), 0);
    assert_eq!(h.n(FlushReason::Passthrough), 1);
    assert_eq!(h.n(FlushReason::Gap), 0);
}

// ---- segments that end a run -----------------------------------------------------------

fn short_segment_is_merged_and_ends_run(v6: bool) {
    let mut h = H::timer(100_000);
    h.feed(seg(v6, 0));
    h.feed(seg(v6, 1));
    h.feed(seg_of(v6, 0, 2 * M, 100));
    assert_eq!(h.units(), vec![(0, 3, 2 * M + 100)]);
    assert_eq!(h.n(FlushReason::Flags), 1);
    assert_eq!(h.gro.held_runs(), 0);
    h.check_payloads();
}

fn psh_segment_is_merged_and_ends_run(v6: bool) {
    let mut h = H::timer(100_000);
    h.feed(seg(v6, 0));
    h.feed(seg(v6, 1));
    h.feed(with_flag(v6, TcpFlags::PSH));
    assert_eq!(h.units(), vec![(0, 3, 3 * M)]);
    // The first segment's flags with PSH OR'ed in from the last (`tcp_gro_receive`).
    assert_eq!(h.out[0].flags, TcpFlags::ACK | TcpFlags::PSH);
    assert_eq!(h.n(FlushReason::Flags), 1);
    assert_eq!(h.gro.held_runs(), 0);
}

fn fin_segment_is_merged_and_ends_run(v6: bool) {
    let mut h = H::timer(100_000);
    h.feed(seg(v6, 0));
    h.feed(seg(v6, 1));
    h.feed(with_flag(v6, TcpFlags::FIN | TcpFlags::PSH));
    assert_eq!(h.units(), vec![(0, 3, 3 * M)]);
    assert_eq!(
        h.out[0].flags,
        TcpFlags::ACK | TcpFlags::PSH | TcpFlags::FIN
    );
    assert_eq!(h.out[0].seq_len(), 3 * MSS as usize + 1);
}

fn psh_segment_with_nothing_held_is_emitted_at_once(v6: bool) {
    let mut h = H::timer(100_000);
    h.feed(with_flag(v6, TcpFlags::PSH));
    assert_eq!(h.out.len(), 1);
    assert_eq!(h.gro.held_runs(), 0);
    assert_eq!(h.n(FlushReason::Flags), 1);
}

fn run_ends_at_64_kib(v6: bool) {
    // 45 x 1448 = 65,160 bytes; a 46th would pass 65,535 (Linux: `skb_gro_receive`).
    let mut h = H::timer(100_000);
    for i in 0..47 {
        h.feed(seg(v6, i));
    }
    assert_eq!(h.units(), vec![(0, 45, 45 * M)]);
    assert_eq!(h.n(FlushReason::Size), 1);
    h.all();
    assert_eq!(h.units(), vec![(0, 45, 45 * M), (45 * M, 2, 2 * M)]);
    h.check_payloads();
}

fn run_never_passes_max_bytes(v6: bool) {
    let mut h = H::new(GroConfig {
        max_bytes: 3500,
        flush_ns: Duration::from_micros(100),
        ..GroConfig::default()
    });
    for i in 0..4 {
        h.feed(seg_of(v6, 0, i * 1000, 1000));
    }
    assert_eq!(h.units(), vec![(0, 3, 3000)]);
    // A lone segment larger than half the limit cannot grow: emitted at once.
    let mut h = H::new(GroConfig {
        max_bytes: 2000,
        flush_ns: Duration::from_micros(100),
        ..GroConfig::default()
    });
    h.feed(seg(v6, 0));
    assert_eq!(h.units(), vec![(0, 1, M)]);
    assert_eq!(h.n(FlushReason::Size), 1);
}

fn run_ends_at_segment_cap(v6: bool) {
    let mut h = H::new(GroConfig {
        max_segs: 4,
        flush_ns: Duration::from_micros(100),
        ..GroConfig::default()
    });
    for i in 0..6 {
        h.feed(seg_of(v6, 0, i * 100, 100));
    }
    assert_eq!(h.units(), vec![(0, 4, 400)]);
    assert_eq!(h.n(FlushReason::Size), 1);
    // The cap never exceeds the payload chain's capacity.
    let g: Gro<VecBuf> = Gro::new(GroConfig {
        max_segs: 1000,
        ..GroConfig::default()
    });
    assert_eq!(usize::from(g.config().max_segs), MAX_CHAIN);
}

fn small_segments_end_at_chain_capacity(v6: bool) {
    let mut h = H::timer(100_000);
    for i in 0..65 {
        h.feed(seg_of(v6, 0, i * 10, 10));
    }
    assert_eq!(h.units(), vec![(0, 64, 640)]);
    h.check_payloads();
}

// ---- timer, burst end, eviction, shutdown ----------------------------------------------

fn timer_flushes_run_after_flush_ns(v6: bool) {
    let mut h = H::timer(10_000);
    let t0 = h.now;
    h.feed(seg(v6, 0));
    h.now = t0 + Duration::from_nanos(5_000);
    h.feed(seg(v6, 1));
    assert_eq!(
        h.gro.next_deadline(),
        Some(t0 + Duration::from_nanos(10_000))
    );
    h.now = t0 + Duration::from_nanos(9_999);
    h.expire();
    h.end();
    assert!(h.out.is_empty());
    // Counted from the run's first segment, not its last.
    h.now = t0 + Duration::from_nanos(10_000);
    h.end();
    assert_eq!(h.units(), vec![(0, 2, 2 * M)]);
    assert_eq!(h.n(FlushReason::Timer), 1);
    assert_eq!(h.gro.next_deadline(), None);
}

fn zero_flush_ns_flushes_everything_at_burst_end(v6: bool) {
    let mut h = H::new(GroConfig::default());
    for f in 0..5 {
        h.feed(seg_of(v6, f, 0, MSS));
    }
    h.end();
    assert_eq!(h.out.len(), 5);
    assert_eq!(h.n(FlushReason::BurstEnd), 5);
    assert_eq!(h.gro.held_runs(), 0);
}

fn timer_flushes_oldest_runs_first(v6: bool) {
    let mut h = H::timer(10_000);
    let t0 = h.now;
    for f in 0..4u16 {
        h.now = t0 + Duration::from_nanos(u64::from(f) * 1_000);
        h.feed(seg_of(v6, f, 0, MSS));
    }
    // Flow 1's run ends early (PSH): the list closes up around it.
    h.feed(seg_of(v6, 1, M, MSS));
    let mut p = seg_of(v6, 1, 2 * M, MSS);
    p.flags = TcpFlags::ACK | TcpFlags::PSH;
    h.feed(p);
    assert_eq!(h.out.len(), 1);
    h.now = t0 + Duration::from_nanos(12_500);
    h.expire();
    let flows: Vec<_> = h.out.iter().map(|s| s.flow).collect();
    assert_eq!(flows, vec![flow(v6, 1), flow(v6, 0), flow(v6, 2)]);
    assert_eq!(h.gro.held_runs(), 1);
    assert_eq!(
        h.gro.next_deadline(),
        Some(t0 + Duration::from_nanos(13_000))
    );
}

/// `busy_hold_ns` (Linux's budget-exhausted rule): while the queue is backlogged a run is
/// held up to `busy_hold_ns`, counted from its first segment; once it drains, `flush_ns`
/// rules again.
fn busy_hold_holds_runs_while_backlogged(v6: bool) {
    let mut h = H::new(GroConfig {
        flush_ns: Duration::from_micros(10),
        busy_hold_ns: Duration::from_micros(1_000),
        ..GroConfig::default()
    });
    let t0 = h.now;
    h.gro.set_backlogged(true);
    h.feed(seg(v6, 0));
    assert_eq!(
        h.gro.next_deadline(),
        Some(t0 + Duration::from_micros(1_000))
    );
    h.now = t0 + Duration::from_micros(50);
    h.feed(seg(v6, 1));
    h.expire();
    h.end();
    assert!(h.out.is_empty(), "held past flush_ns while backlogged");
    h.now = t0 + Duration::from_micros(1_000);
    h.expire();
    assert_eq!(h.units(), vec![(0, 2, 2 * M)]);
    assert_eq!(h.n(FlushReason::Timer), 1);
    // Drained: the next run leaves after flush_ns again.
    let t1 = h.now;
    h.gro.set_backlogged(false);
    h.feed(seg(v6, 2));
    assert_eq!(h.gro.next_deadline(), Some(t1 + Duration::from_micros(10)));
    h.now = t1 + Duration::from_micros(10);
    h.end();
    assert_eq!(h.units(), vec![(0, 2, 2 * M), (2 * M, 1, M)]);
}

/// With `flush_ns = 0` a backlogged burst's end flushes only runs older than
/// `busy_hold_ns` (Linux: `napi_gro_flush(n, true)` when the budget is used up); the
/// first short burst's end flushes them all.
fn busy_hold_with_zero_flush_ns_keeps_runs_past_full_bursts(v6: bool) {
    let mut h = H::new(GroConfig {
        busy_hold_ns: Duration::from_micros(1_000),
        ..GroConfig::default()
    });
    h.gro.set_backlogged(true);
    for f in 0..5 {
        h.feed(seg_of(v6, f, 0, MSS));
    }
    h.end();
    assert!(h.out.is_empty());
    assert_eq!(h.gro.held_runs(), 5);
    h.gro.set_backlogged(false);
    h.end();
    assert_eq!(h.out.len(), 5);
    assert_eq!(h.n(FlushReason::BurstEnd), 5);
}

/// Without `busy_hold_ns`, or with one shorter than `flush_ns`, a backlog changes nothing.
fn busy_hold_off_or_shorter_changes_nothing(v6: bool) {
    for busy in [0, 5] {
        let mut h = H::new(GroConfig {
            flush_ns: Duration::from_micros(10),
            busy_hold_ns: Duration::from_micros(busy),
            ..GroConfig::default()
        });
        let t0 = h.now;
        h.gro.set_backlogged(true);
        h.feed(seg(v6, 0));
        assert_eq!(h.gro.next_deadline(), Some(t0 + Duration::from_micros(10)));
        h.now = t0 + Duration::from_micros(9);
        h.end();
        assert!(h.out.is_empty());
        h.now = t0 + Duration::from_micros(10);
        h.end();
        assert_eq!(h.units(), vec![(0, 1, M)], "busy_hold_ns {busy} us");
    }
}

fn full_table_evicts_oldest_run(v6: bool) {
    let mut h = H::new(GroConfig {
        max_flows: 3,
        flush_ns: Duration::from_micros(100),
        ..GroConfig::default()
    });
    for f in 0..5 {
        h.feed(seg_of(v6, f, 0, MSS));
        assert!(h.gro.held_runs() <= 3);
    }
    let flows: Vec<_> = h.out.iter().map(|s| s.flow).collect();
    assert_eq!(flows, vec![flow(v6, 0), flow(v6, 1)]);
    assert_eq!(h.gro.stats().evictions(), 2);
    // A held flow still merges.
    h.feed(seg_of(v6, 4, M, MSS));
    h.all();
    assert_eq!(
        h.out.last().map(|s| (s.flow, s.segs)),
        Some((flow(v6, 4), 2))
    );
    assert_eq!(h.n(FlushReason::Shutdown), 3);
}

fn many_flows_are_found_again(v6: bool) {
    let mut h = H::timer(1_000_000);
    for f in 0..2000 {
        h.feed(seg_of(v6, f, 0, MSS));
    }
    for f in 0..2000 {
        h.feed(seg_of(v6, f, M, MSS));
    }
    assert_eq!(h.gro.held_runs(), 2000);
    h.all();
    assert_eq!(h.out.len(), 2000);
    assert!(h.out.iter().all(|s| s.segs == 2));
    assert_eq!(h.gro.stats().evictions(), 0);
}

fn stats_count_every_unit_once(v6: bool) {
    let mut h = H::timer(10_000);
    for i in 0..10 {
        h.feed(seg(v6, i));
    }
    h.feed(with_flag(v6, TcpFlags::RST));
    h.feed(seg_of(v6, 1, 0, MSS));
    h.all();
    let st = h.gro.stats().clone();
    assert_eq!(st.segments_in, 12);
    assert_eq!(st.segments_out, 12);
    assert_eq!(st.held_segments, 0);
    assert_eq!(st.units_out, h.out.len() as u64);
    assert_eq!(st.flushes.iter().sum::<u64>(), st.units_out);
    assert_eq!(st.units_out, 3);
    assert!((st.aggregation_ratio() - 4.0).abs() < 1e-9);
    let names: Vec<_> = st.flushes_by_name().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        vec![
            "timer",
            "size",
            "flags",
            "gap",
            "burst_end",
            "eviction",
            "passthrough",
            "shutdown",
            "bypass"
        ]
    );
}

macro_rules! both_families {
    ($($rule:ident),* $(,)?) => {
        mod ipv4 {
            $( #[test] fn $rule() { super::$rule(false) } )*
        }
        mod ipv6 {
            $( #[test] fn $rule() { super::$rule(true) } )*
        }
    };
}

both_families!(
    contiguous_segments_merge_into_one_run,
    different_flows_never_merge,
    run_merges_across_sequence_wrap,
    out_of_order_segment_flushes_held_run_first,
    retransmitted_segment_flushes_held_run_first,
    overlapping_segment_flushes_held_run_first,
    mac_address_change_ends_run,
    ack_number_change_ends_run,
    window_change_ends_run,
    header_length_change_ends_run,
    option_bytes_change_ends_run,
    option_bytes_past_header_length_are_ignored,
    tsval_may_stay_equal_or_rise_within_run,
    tsval_rise_across_wrap_is_a_rise,
    tsval_falling_ends_run,
    tsecr_may_stay_equal_or_rise_within_run,
    tsecr_falling_ends_run,
    other_flag_change_ends_run,
    ttl_change_ends_run,
    tos_change_ends_run,
    payload_larger_than_gso_size_starts_new_run,
    cwr_segment_flushes_run_and_passes_through,
    syn_segment_flushes_run_and_passes_through,
    rst_segment_flushes_run_and_passes_through,
    urg_segment_flushes_run_and_passes_through,
    ip_options_segment_flushes_run_and_passes_through,
    zero_payload_segment_flushes_run_and_passes_through,
    never_merged_segment_alone_is_not_held,
    short_segment_is_merged_and_ends_run,
    psh_segment_is_merged_and_ends_run,
    fin_segment_is_merged_and_ends_run,
    psh_segment_with_nothing_held_is_emitted_at_once,
    run_ends_at_64_kib,
    run_never_passes_max_bytes,
    run_ends_at_segment_cap,
    small_segments_end_at_chain_capacity,
    timer_flushes_run_after_flush_ns,
    zero_flush_ns_flushes_everything_at_burst_end,
    timer_flushes_oldest_runs_first,
    busy_hold_holds_runs_while_backlogged,
    busy_hold_with_zero_flush_ns_keeps_runs_past_full_bursts,
    busy_hold_off_or_shorter_changes_nothing,
    full_table_evicts_oldest_run,
    many_flows_are_found_again,
    stats_count_every_unit_once,
);

// ---- jumbo segments and chained frames ---------------------------------------------------

/// A full segment at MTU 9000 with timestamps (9000 - 20 - 32).
const JUMBO: u16 = 8948;
const J: u32 = JUMBO as u32;

fn jumbo(v6: bool, i: u32) -> TcpMeta {
    seg_of(v6, 0, i * J, JUMBO)
}

/// `m`'s frame as a NIC with scattered receive leaves it: cut into `seg_len`-byte
/// buffers, and the payload as one slice per buffer (what the pipeline's chain path
/// hands to [`Gro::handle_chain`]).
fn chain_of(m: &TcpMeta, seg_len: usize) -> PayloadChain<VecBuf> {
    let frame = frame(m).into_vec();
    let off = usize::from(m.payload_off);
    let mut c = PayloadChain::new();
    for (i, part) in frame.chunks(seg_len).enumerate() {
        let start = i * seg_len;
        let skip = off.saturating_sub(start).min(part.len());
        if skip < part.len() {
            let s = PayloadSlice {
                buf: VecBuf::from_vec(part.to_vec()),
                off: skip as u16,
                len: (part.len() - skip) as u16,
            };
            assert!(c.push(s).is_ok());
        }
    }
    c
}

impl H {
    fn feed_chain(&mut self, m: TcpMeta, seg_len: usize) {
        let mut c = chain_of(&m, seg_len);
        let out = &mut self.out;
        self.gro
            .handle_chain(self.now, &m, &mut c, &mut |s| out.push(s.take()));
        assert!(c.is_empty(), "handle_chain takes every slice");
    }
}

fn jumbo_segments_merge_up_to_64_kib(v6: bool) {
    // 7 x 8,948 = 62,636 bytes; an 8th would pass 65,535.
    let mut h = H::timer(100_000);
    for i in 0..9 {
        h.feed(jumbo(v6, i));
    }
    assert_eq!(h.units(), vec![(0, 7, 7 * J)]);
    assert_eq!(h.n(FlushReason::Size), 1);
    h.all();
    assert_eq!(h.units(), vec![(0, 7, 7 * J), (7 * J, 2, 2 * J)]);
    h.check_payloads();
}

fn chained_jumbo_segments_merge_up_to_64_kib(v6: bool) {
    // Each frame in 2,048-byte buffers (a 9,014-byte frame is 5 of them), as net_tap's
    // scattered receive leaves it: the same runs as contiguous frames.
    let mut h = H::timer(100_000);
    for i in 0..9 {
        h.feed_chain(jumbo(v6, i), 2048);
    }
    assert_eq!(h.units(), vec![(0, 7, 7 * J)]);
    assert_eq!(h.out[0].payload.slice_count(), 7 * 5);
    assert_eq!(h.out[0].gso_size, JUMBO);
    assert_eq!(h.n(FlushReason::Size), 1);
    h.all();
    assert_eq!(h.units(), vec![(0, 7, 7 * J), (7 * J, 2, 2 * J)]);
    assert_eq!(h.gro.stats().segments_in, 9);
    h.check_payloads();
}

fn chained_and_contiguous_segments_share_a_run(v6: bool) {
    let mut h = H::timer(100_000);
    h.feed(jumbo(v6, 0));
    h.feed_chain(jumbo(v6, 1), 4096);
    h.feed(jumbo(v6, 2));
    h.feed_chain(jumbo(v6, 3), 1024);
    assert!(h.out.is_empty());
    // A short chained segment ends the run (`out_check_final`).
    h.feed_chain(seg_of(v6, 0, 4 * J, 5000), 2048);
    assert_eq!(h.units(), vec![(0, 5, 4 * J + 5000)]);
    assert_eq!(h.n(FlushReason::Flags), 1);
    assert_eq!(h.gro.held_runs(), 0);
    h.check_payloads();
}

fn chained_segment_that_cannot_join_flushes_the_run_first(v6: bool) {
    let mut h = H::timer(100_000);
    h.feed(jumbo(v6, 0));
    h.feed(jumbo(v6, 1));
    // Out of order: the run goes first, the chained segment starts a run of its own.
    h.feed_chain(jumbo(v6, 3), 2048);
    assert_eq!(h.units(), vec![(0, 2, 2 * J)]);
    assert_eq!(h.n(FlushReason::Gap), 1);
    // A PSH chained segment with nothing else of its flow: emitted at once, after it.
    let mut p = jumbo(v6, 4);
    p.flags |= TcpFlags::PSH;
    h.feed_chain(p, 2048);
    assert_eq!(h.units(), vec![(0, 2, 2 * J), (3 * J, 2, 2 * J)]);
    // A chained SYN-less never-merged segment (RST) passes through after the run.
    h.feed_chain(jumbo(v6, 5), 2048);
    h.feed_chain(with_flag(v6, TcpFlags::RST), 2048);
    assert_eq!(h.out.len(), 4);
    assert_eq!(h.n(FlushReason::Passthrough), 1);
    assert_eq!(h.gro.held_runs(), 0);
    h.check_payloads();
}

fn runs_beyond_64_kib_with_a_larger_max_bytes(v6: bool) {
    // 58 x 8,948 = 518,984 bytes; a 59th would pass GRO_MAX_BYTES (524,280).
    let mut h = H::new(GroConfig {
        max_bytes: GRO_MAX_BYTES,
        flush_ns: Duration::from_micros(100),
        ..GroConfig::default()
    });
    for i in 0..60 {
        h.feed(jumbo(v6, i));
    }
    assert_eq!(h.units(), vec![(0, 58, 58 * J)]);
    assert_eq!(h.n(FlushReason::Size), 1);
    h.check_payloads();
    // Chained in 5 buffers each, a run ends when its 64 slots cannot take another
    // segment's 5: after 12 segments (60 slots), 107,376 bytes.
    let mut h = H::new(GroConfig {
        max_bytes: GRO_MAX_BYTES,
        flush_ns: Duration::from_micros(100),
        ..GroConfig::default()
    });
    for i in 0..13 {
        h.feed_chain(jumbo(v6, i), 2048);
    }
    assert_eq!(h.units(), vec![(0, 12, 12 * J)]);
    assert_eq!(h.n(FlushReason::Size), 1);
    h.check_payloads();
    // The limit is clamped to GRO_MAX_BYTES.
    let g: Gro<VecBuf> = Gro::new(GroConfig {
        max_bytes: u32::MAX,
        ..GroConfig::default()
    });
    assert_eq!(g.config().max_bytes, GRO_MAX_BYTES);
}

mod jumbo {
    use super::*;
    both_families!(
        jumbo_segments_merge_up_to_64_kib,
        chained_jumbo_segments_merge_up_to_64_kib,
        chained_and_contiguous_segments_share_a_run,
        chained_segment_that_cannot_join_flushes_the_run_first,
        runs_beyond_64_kib_with_a_larger_max_bytes,
    );
}

// ---- family-specific network checks ----------------------------------------------------

/// IPv4 `inet_gro_flush`: the DF bit must match.
#[test]
fn ipv4_df_change_ends_run() {
    let mut m = seg(false, 2);
    m.net.df = false;
    expect_gap_before(false, m);
}

/// IPv4 `inet_gro_flush`: IDs incrementing by one per segment merge.
#[test]
fn ipv4_incrementing_ip_id_merges() {
    let mut h = H::new(GroConfig::default());
    for i in 0..4 {
        let mut m = seg(false, i);
        m.net.ip_id = 65534u16.wrapping_add(i as u16);
        h.feed(m);
    }
    h.end();
    assert_eq!(h.units(), vec![(0, 4, 4 * M)]);
}

/// IPv4 `inet_gro_flush`: a fixed ID with DF set (RFC 6864 atomic datagrams) merges.
#[test]
fn ipv4_fixed_ip_id_with_df_merges() {
    let mut h = H::new(GroConfig::default());
    for i in 0..4 {
        let mut m = seg(false, i);
        m.net.ip_id = 77;
        h.feed(m);
    }
    h.end();
    assert_eq!(h.units(), vec![(0, 4, 4 * M)]);
}

/// IPv4 `inet_gro_flush`: without DF a fixed ID is not allowed.
#[test]
fn ipv4_fixed_ip_id_without_df_ends_run() {
    let mut h = H::new(GroConfig::default());
    for i in 0..2 {
        let mut m = seg(false, i);
        m.net.ip_id = 9;
        m.net.df = false;
        h.feed(m);
    }
    h.end();
    assert_eq!(h.units(), vec![(0, 1, M), (M, 1, M)]);
}

/// IPv4 `inet_gro_flush`: an ID that neither stays nor increments by one ends the run,
/// and a run that chose "fixed" cannot switch to incrementing.
#[test]
fn ipv4_ip_id_jump_ends_run() {
    let mut m = seg(false, 2);
    m.net.ip_id += 5;
    expect_gap_before(false, m);
    let mut h = H::new(GroConfig::default());
    for (i, id) in [(0, 7), (1, 7), (2, 8)] {
        let mut m = seg(false, i);
        m.net.ip_id = id;
        h.feed(m);
    }
    h.end();
    assert_eq!(h.units(), vec![(0, 2, 2 * M), (2 * M, 1, M)]);
}

/// IPv6 `ipv6_gro_receive`: the flow label is part of the flow match.
#[test]
fn ipv6_flow_label_change_ends_run() {
    let mut m = seg(true, 2);
    m.net.flow_label = 0x54321;
    expect_gap_before(true, m);
}

/// IPv6 has no IP ID: identical (zero) IDs merge without DF bookkeeping.
#[test]
fn ipv6_ignores_ip_id() {
    let mut h = H::new(GroConfig::default());
    for i in 0..4 {
        h.feed(seg(true, i));
    }
    h.end();
    assert_eq!(h.units(), vec![(0, 4, 4 * M)]);
}

/// Options laid out so TSval straddles two 8-byte words (kind 8 at byte 4, TSval at 6):
/// the masked comparison must still ignore exactly TSval's four bytes.
fn straddling(v6: bool, i: u32, tsval: u32, tsecr: u32) -> TcpMeta {
    let mut m = seg(v6, i);
    m.raw_opts = [0; MAX_OPTION_BYTES];
    m.raw_opts[..6].copy_from_slice(&[1, 1, 1, 1, 8, 10]);
    m.raw_opts[6..10].copy_from_slice(&tsval.to_be_bytes());
    m.raw_opts[10..14].copy_from_slice(&tsecr.to_be_bytes());
    m.raw_opts[14..16].copy_from_slice(&[0, 0]);
    m.header_len = 36;
    m.tsval_at = Some(6);
    m.opts.timestamp = Some(Timestamp { tsval, tsecr });
    m
}

#[test]
fn tsval_straddling_two_words_is_masked_exactly() {
    for v6 in [false, true] {
        let mut h = H::new(GroConfig::default());
        h.feed(straddling(v6, 0, 0x0102_0304, TSECR));
        h.feed(straddling(v6, 1, 0x0a0b_0c0d, TSECR));
        h.feed(straddling(v6, 2, 0x0a0b_0c0d, TSECR - 1));
        h.end();
        assert_eq!(h.units(), vec![(0, 2, 2 * M), (2 * M, 1, M)]);
    }
}

/// The word masks equal the byte-wise rule for every option length and TSval position:
/// bytes past `header_len - 20` and the eight TSval + TSecr bytes are ignored, all others
/// compared (a TSval position too late for both values to fit masks nothing).
#[test]
fn option_masks_match_the_bytewise_rule() {
    let mut raw = [0u8; MAX_OPTION_BYTES];
    for (i, b) in raw.iter_mut().enumerate() {
        *b = 0x80 | i as u8;
    }
    for header_len in (20u8..=60).step_by(4) {
        for tsval_at in (0..=36u8).map(Some).chain([None]) {
            let mut m = seg(false, 0);
            m.raw_opts = raw;
            m.header_len = header_len;
            m.tsval_at = tsval_at;
            let got = HeaderSig::of(&m, &[]).opts;
            let mut want = raw;
            want[usize::from(header_len - 20)..].fill(0);
            if let Some(t) = tsval_at.filter(|t| usize::from(*t) + 8 <= MAX_OPTION_BYTES) {
                want[usize::from(t)..usize::from(t) + 8].fill(0);
            }
            let want: Vec<u64> = want
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            assert_eq!(
                got.to_vec(),
                want,
                "header_len {header_len} tsval_at {tsval_at:?}"
            );
        }
    }
}

#[test]
fn hold_histogram_records_each_segments_hold_time() {
    let mut h = H::new(GroConfig {
        flush_ns: Duration::from_nanos(10_000),
        hold_histogram: true,
        ..GroConfig::default()
    });
    let t0 = h.now;
    h.feed(seg(false, 0));
    h.now = t0 + Duration::from_nanos(4_000);
    h.feed(seg(false, 1));
    h.now = t0 + Duration::from_nanos(12_000);
    h.end();
    assert_eq!(h.units(), vec![(0, 2, 2 * M)]);
    let hist = h.gro.stats().hold_ns.as_ref().expect("histogram on");
    assert_eq!(hist.count(), 2);
    // Held 12,000 and 8,000 ns: the mean is exact, quantiles are bucket lower bounds.
    assert!((hist.mean() - 10_000.0).abs() < 1e-9);
    let p99 = hist.quantile(0.99);
    assert!((11_250..=12_000).contains(&p99), "{p99}");
    // A PSH segment with nothing held is never held.
    let mut p = seg_of(false, 1, 0, MSS);
    p.flags |= TcpFlags::PSH;
    h.feed(p);
    assert_eq!(h.gro.stats().hold_ns.as_ref().map(|x| x.count()), Some(3));
    assert_eq!(
        h.gro.stats().hold_ns.as_ref().map(|x| x.quantile(0.0)),
        Some(0)
    );
    // Off by default.
    assert!(H::timer(1_000).gro.stats().hold_ns.is_none());
}

/// A PSH segment while nothing is held (the bypass of the table in `handle_segment`)
/// leaves exactly as it does through the table while another flow's run is held: the same
/// unit, fields, payload and counters. Request/response traffic takes this path for every
/// message.
#[test]
fn psh_segment_with_nothing_held_leaves_as_through_the_table() {
    for v6 in [false, true] {
        let mut m = seg_of(v6, 0, 0, 64);
        m.flags |= TcpFlags::PSH;
        let mut empty = H::timer(20_000);
        empty.feed(m);
        let mut busy = H::timer(20_000);
        busy.feed(seg_of(v6, 9, 0, MSS)); // another flow's run, held
        busy.feed(m);
        assert_eq!(empty.out.len(), 1);
        assert_eq!(busy.out.len(), 1, "the other flow's run stays held");
        let (a, b) = (&empty.out[0], &busy.out[0]);
        assert_eq!(a.flow, b.flow);
        assert_eq!(
            (a.seq, a.ack, a.flags, a.window),
            (b.seq, b.ack, b.flags, b.window)
        );
        assert_eq!(
            (a.segs, a.gso_size, a.first_rx),
            (b.segs, b.gso_size, b.first_rx)
        );
        assert_eq!((a.peer_mac, a.local_mac), (b.peer_mac, b.local_mac));
        assert_eq!(a.opts.timestamp, b.opts.timestamp);
        assert_eq!(a.ts_last, b.ts_last);
        assert_eq!(a.payload.to_vec(), b.payload.to_vec());
        assert_eq!(empty.n(FlushReason::Flags), 1);
        assert_eq!(busy.n(FlushReason::Flags), 1);
        let (s, t) = (empty.gro.stats(), busy.gro.stats());
        assert_eq!((s.segments_in, s.segments_out, s.units_out), (1, 1, 1));
        assert_eq!((t.segments_in - 1, t.segments_out, t.units_out), (1, 1, 1));
        assert_eq!(s.held_segments, 0);
        assert_eq!(empty.gro.held_runs(), 0);
    }
}

// ---- bypass: when nothing merges ---------------------------------------------------------

/// Every flow's units in output order: their sequence offsets follow on without a gap
/// or a step back (nothing of a flow overtook its own earlier data).
fn assert_flow_order(h: &H, flows: u16) {
    for f in 0..flows {
        let mut next = 0u32;
        for s in h.out.iter().filter(|s| s.flow.sport == 40_000 + f) {
            assert_eq!(s.seq.get().wrapping_sub(ISS), next, "flow {f} out of order");
            next += s.payload.len();
        }
    }
    h.check_payloads();
}

/// With 100 flows taking turns one segment per burst and `flush_ns = 0`, every run leaves
/// one segment long: after 64 such runs GRO stops holding and passes segments straight on
/// (`FlushReason::Bypass`), in order. Two segments of one flow back to back end the
/// bypass, and they merge again.
#[test]
fn lone_runs_begin_a_bypass_and_a_train_ends_it() {
    for v6 in [false, true] {
        let mut h = H::new(GroConfig::default());
        for f in 0..100 {
            h.feed(seg_of(v6, f, 0, MSS));
        }
        h.end();
        assert_eq!(h.n(FlushReason::BurstEnd), 100);
        assert_eq!(h.gro.stats().bypasses, 1);
        for f in 0..100 {
            h.feed(seg_of(v6, f, M, MSS));
        }
        assert_eq!(h.n(FlushReason::Bypass), 100, "passed on at once");
        assert_eq!(h.gro.held_runs(), 0);
        h.end();
        // Flow 0 back to back: the second segment ends the bypass and starts a run.
        for i in 2..5 {
            h.feed(seg_of(v6, 0, i * M, MSS));
        }
        assert_eq!(h.n(FlushReason::Bypass), 101);
        assert_eq!(h.gro.held_runs(), 1);
        h.end();
        assert_eq!(h.out.last().map(|s| s.segs), Some(2));
        let st = h.gro.stats();
        assert_eq!(st.segments_in, st.segments_out);
        assert_eq!(st.flushes.iter().sum::<u64>(), st.units_out);
        assert_flow_order(&h, 100);
    }
}

/// The runs still held when a bypass begins are flushed first (under `Bypass`), so a
/// bypassed segment never overtakes its flow's held data; the bypass lasts `BYPASS_MIN`
/// segments, after which the table holds runs again.
#[test]
fn bypass_flushes_held_runs_first_and_ends_after_its_length() {
    for v6 in [false, true] {
        let mut h = H::timer(10_000);
        let t0 = h.now;
        for f in 0..100 {
            h.feed(seg_of(v6, f, 0, MSS));
        }
        h.now = t0 + Duration::from_nanos(6_000);
        for f in 100..110 {
            h.feed(seg_of(v6, f, 0, MSS));
        }
        h.now = t0 + Duration::from_nanos(10_000);
        h.expire();
        assert_eq!(h.n(FlushReason::Timer), 100);
        assert_eq!(
            h.n(FlushReason::Bypass),
            10,
            "the young runs, flushed at the start"
        );
        assert_eq!(h.gro.held_runs(), 0);
        // BYPASS_MIN segments of 110 flows in turn pass straight on; the next is held.
        let mut next = [M; 110];
        for k in 0..BYPASS_MIN as usize + 1 {
            let f = k % 110;
            h.feed(seg_of(v6, f as u16, next[f], MSS));
            next[f] += M;
        }
        assert_eq!(h.n(FlushReason::Bypass), 10 + u64::from(BYPASS_MIN));
        assert_eq!(h.gro.held_runs(), 1);
        h.all();
        assert_flow_order(&h, 110);
    }
}

/// A bypass that follows another with no merge in between is twice as long, up to
/// `BYPASS_MAX`; one merged run makes the next one short again.
#[test]
fn bypasses_grow_while_nothing_merges() {
    let mut h = H::new(GroConfig::default());
    let mut next = [0u32; 200];
    let mut feed_round = |h: &mut H| {
        for f in 0..200 {
            h.feed(seg_of(false, f, next[usize::from(f)], MSS));
            next[usize::from(f)] += M;
        }
        h.end();
    };
    let mut lengths = Vec::new();
    for _ in 0..400 {
        let before = h.n(FlushReason::Bypass);
        let bypasses = h.gro.stats().bypasses;
        feed_round(&mut h);
        if h.gro.stats().bypasses > bypasses {
            lengths.push(h.n(FlushReason::Bypass) - before);
        }
    }
    assert!(h.gro.stats().bypasses >= 6, "{lengths:?}");
    assert_eq!(h.gro.bypass_len, BYPASS_MAX);
    // One run of two resets it: a train of three (the second ends the bypass, if one is
    // on, and the third joins its run).
    for i in 0..3 {
        h.feed(seg_of(false, 0, next[0] + i * M, MSS));
    }
    h.end();
    assert_eq!(h.gro.bypass_len, BYPASS_MIN);
    assert_flow_order(&h, 200);
}

/// weir's addresses as [`wire_frame`] addresses it.
fn wire_local() -> LocalAddrs {
    LocalAddrs::new([2, 0, 0, 0, 0, 1], Some(Ipv4Addr::new(198, 18, 0, 1)), None)
}

/// A real frame in the parser's fast-path layout (IPv4, NOP NOP TS, checksums verified by
/// the NIC) of IPv4 flow `f` at sequence offset `off` from [`ISS`], `len` bytes.
fn wire_frame(f: u16, off: u32, len: u16) -> VecBuf {
    let key = flow(false, f);
    let ip = |a: [u8; 16]| core::net::IpAddr::V4(Ipv4Addr::new(a[12], a[13], a[14], a[15]));
    let seq = ISS.wrapping_add(off);
    let fr = crate::wire::TcpFrame {
        src_mac: [2, 0, 0, 0, 0, 2],
        dst_mac: [2, 0, 0, 0, 0, 1],
        vlan: None,
        src_ip: ip(key.src),
        dst_ip: ip(key.dst),
        sport: key.sport,
        dport: key.dport,
        seq: SeqNumber(seq),
        ack: SeqNumber(5555),
        flags: TcpFlags::ACK,
        window: 512,
        opts: TcpOptions {
            timestamp: Some(Timestamp {
                tsval: TSVAL,
                tsecr: TSECR,
            }),
            ..TcpOptions::default()
        },
        ttl: 64,
        ip_id: 0,
    };
    let payload: Vec<u8> = (0..u32::from(len))
        .map(|i| byte_at(seq.wrapping_add(i)))
        .collect();
    VecBuf::from_vec(fr.to_vec(&payload)).with_rx_checksum(crate::buf::RxChecksum {
        ip: crate::buf::ChecksumStatus::Good,
        l4: crate::buf::ChecksumStatus::Good,
    })
}

/// The same-run template outlives its run (`template.rs`): with `flush_ns = 0` the burst's
/// end flushes the run but keeps the header, the flow's first frame of the next burst
/// starts its run from it (spilled to the cold part at once, so the same-run path takes the
/// next frames), a run of one started so leaves as a run of one (counted as one for the
/// bypass), and another flow's frame retires the kept template. The units are the parsed
/// path's (`stack/tests/gro_fast_path.rs` compares whole outputs on random streams).
#[test]
fn kept_template_starts_the_flows_next_run() {
    let mut h = H::new(GroConfig::default());
    let local = wire_local();
    let feed = |h: &mut H, f: u16, i: u32| {
        let out = &mut h.out;
        let taken = h
            .gro
            .handle_frame(h.now, wire_frame(f, i * M, MSS), &local, &mut |s| {
                out.push(s.take())
            });
        assert!(taken.is_ok(), "a fast-path frame is taken");
    };
    for i in 0..3 {
        feed(&mut h, 0, i);
    }
    assert_ne!(
        h.gro.template.slot, NIL,
        "the second frame set the template"
    );
    h.end();
    assert_eq!(h.gro.template.slot, NIL);
    assert!(h.gro.template_kept);
    // The next burst: its first frame starts the run from the kept template.
    feed(&mut h, 0, 3);
    let s = h.gro.template.slot;
    assert_ne!(s, NIL, "the kept template names the run it started");
    assert!(h.gro.first[s as usize].is_none(), "spilled at once");
    feed(&mut h, 0, 4);
    h.end();
    // A burst of one frame: a run of one, from the cold part, counted as a lone run.
    feed(&mut h, 0, 5);
    assert_ne!(h.gro.template.slot, NIL);
    let lone = h.gro.lone_runs;
    h.end();
    assert_eq!(h.gro.lone_runs, lone + 1);
    assert_eq!(
        h.units(),
        vec![(0, 3, 3 * M), (3 * M, 2, 2 * M), (5 * M, 1, M)]
    );
    assert_eq!(h.out[2].gso_size, MSS);
    assert_eq!(
        h.out[2].opts.timestamp,
        Some(Timestamp {
            tsval: TSVAL,
            tsecr: TSECR
        })
    );
    h.check_payloads();
    // Another flow's frame does not match: the template is no longer tried.
    assert!(h.gro.template_kept);
    feed(&mut h, 1, 0);
    assert!(!h.gro.template_kept);
    h.end();
    assert_eq!(h.units().len(), 4);
    assert_eq!(h.gro.stats().segments_out, 7);
}
