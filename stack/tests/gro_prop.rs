//! GRO property test on a virtual clock (the GRO rules: docs/architecture.md).
//!
//! Any interleaving of up to 64 flows (IPv4 and IPv6), random segment sizes, PSH/FIN/SYN/RST
//! placement, pure ACKs, ACK and TSval changes, reordering (holes filled later) and
//! duplicates, fed in bursts while time advances. For every flow:
//!
//! - the output units, in emission order, consume the flow's input segments in arrival
//!   order: each unit starts at the next unconsumed segment and its payload is exactly the
//!   concatenation of the `segs` segments it covers (nothing lost, duplicated or reordered);
//! - nothing is held longer than `flush_ns` plus one loop iteration (`flush_expired` is
//!   called every iteration);
//! - at most one run per flow and at most `max_flows` runs are held, and a new run in a
//!   full table is counted as an eviction;
//! - the counters add up: every unit counted under one reason, segments in = segments out
//!   after `flush_all`.

use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use stack::buf::MAX_CHAIN;
use stack::flow::FlowKey;
use stack::gro::{FlushReason, Gro, GroConfig};
use stack::mem::VecBuf;
use stack::segment::Segment;
use stack::seq::SeqNumber;
use stack::time::{Duration, Instant};
use stack::wire::{NetMeta, TcpFlags, TcpMeta, TcpOptions, Timestamp, MAX_OPTION_BYTES};

const MSS: u16 = 1448;

fn flow_key(i: u16) -> FlowKey {
    if i % 2 == 1 {
        FlowKey::v6(
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 2, i),
            30_000 + i,
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
            443,
        )
    } else {
        FlowKey::v4(
            Ipv4Addr::new(198, 18, 2, i as u8),
            30_000 + i,
            Ipv4Addr::new(198, 18, 0, 1),
            443,
        )
    }
}

/// One flow's sender: sequence, ACK and TS clock, past segments (for duplicates) and
/// segments it skipped (sent later, out of order).
struct Sender {
    key: FlowKey,
    next_seq: u32,
    ack: u32,
    tsval: u32,
    ip_id: u16,
    sent: Vec<TcpMeta>,
    skipped: Vec<TcpMeta>,
}

impl Sender {
    fn new(i: u16) -> Self {
        Sender {
            key: flow_key(i),
            next_seq: (u32::MAX - 20_000).wrapping_add(u32::from(i) * 7919), // some flows wrap
            ack: 1,
            tsval: 1000,
            ip_id: 0,
            sent: Vec::new(),
            skipped: Vec::new(),
        }
    }

    fn make(&mut self, len: u16, flags: TcpFlags) -> TcpMeta {
        let mut raw = [0u8; MAX_OPTION_BYTES];
        raw[..4].copy_from_slice(&[1, 1, 8, 10]);
        raw[4..8].copy_from_slice(&self.tsval.to_be_bytes());
        raw[8..12].copy_from_slice(&77u32.to_be_bytes());
        let v6 = self.key.v6;
        let m = TcpMeta {
            flow: self.key,
            src_mac: [2, 0, 0, 0, 0, 9],
            dst_mac: [2, 0, 0, 0, 0, 1],
            seq: SeqNumber(self.next_seq),
            ack: SeqNumber(self.ack),
            flags,
            window: 1000,
            header_len: 32,
            opts: TcpOptions {
                timestamp: Some(Timestamp {
                    tsval: self.tsval,
                    tsecr: 77,
                }),
                ..TcpOptions::default()
            },
            raw_opts: raw,
            tsval_at: Some(4),
            payload_off: if v6 { 86 } else { 66 },
            payload_len: len,
            net: NetMeta {
                ttl: 64,
                tos: 0,
                df: true,
                ip_id: if v6 { 0 } else { self.ip_id },
                flow_label: if v6 { 0xabcde } else { 0 },
                ip_options: false,
            },
        };
        self.ip_id = self.ip_id.wrapping_add(1);
        self.next_seq = self.next_seq.wrapping_add(u32::from(len));
        m
    }

    /// The next segment this sender puts on the wire for action `a`.
    fn next(&mut self, a: &Action) -> TcpMeta {
        let len = if a.size % 4 == 0 {
            1 + a.size % MSS
        } else {
            MSS
        };
        let mut flags = TcpFlags::ACK;
        match a.flag % 40 {
            0..=3 => flags |= TcpFlags::PSH,
            4 => flags |= TcpFlags::FIN,
            5 => flags |= TcpFlags::SYN,
            6 => flags |= TcpFlags::RST,
            7 => flags |= TcpFlags::CWR,
            _ => {}
        }
        match a.kind % 24 {
            0 => self.ack = self.ack.wrapping_add(1000),
            1..=3 => self.tsval = self.tsval.wrapping_add(1),
            _ => {}
        }
        let m = match a.kind % 24 {
            // A duplicate of an earlier segment (its old TSval and ACK with it).
            4 | 5 if !self.sent.is_empty() => self.sent[a.pick as usize % self.sent.len()],
            // Skip a segment: send the one after it now, the skipped one later.
            6 | 7 => {
                let hole = self.make(len, TcpFlags::ACK);
                self.skipped.push(hole);
                self.make(len, flags)
            }
            8 | 9 if !self.skipped.is_empty() => self.skipped.remove(0),
            10 => self.make(0, TcpFlags::ACK), // a pure ACK
            _ => self.make(len, flags),
        };
        if self.sent.len() < 256 {
            self.sent.push(m);
        }
        m
    }
}

#[derive(Clone, Debug)]
struct Action {
    flow: u16,
    kind: u8,
    flag: u8,
    size: u16,
    pick: u8,
}

fn action(nflows: u16) -> impl Strategy<Value = Action> {
    (
        0..nflows,
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        any::<u8>(),
    )
        .prop_map(|(flow, kind, flag, size, pick)| Action {
            flow,
            kind,
            flag,
            size,
            pick,
        })
}

/// The bytes of a segment's payload: a function of flow and sequence number, so equal
/// ranges hold equal bytes and different offsets differ.
fn payload_bytes(m: &TcpMeta) -> Vec<u8> {
    let salt = u32::from(m.flow.sport);
    (0..u32::from(m.payload_len))
        .map(|i| {
            let s = m.seq.get().wrapping_add(i);
            (s.wrapping_mul(2_654_435_761) >> 24) as u8 ^ salt as u8
        })
        .collect()
}

fn frame(m: &TcpMeta) -> VecBuf {
    let mut v = vec![0xee; usize::from(m.payload_off)];
    // The MAC header as parsed into `m` (GRO compares the frame's).
    v[..6].copy_from_slice(&m.dst_mac);
    v[6..12].copy_from_slice(&m.src_mac);
    v.extend(payload_bytes(m));
    VecBuf::from_vec(v)
}

/// What the checker remembers of each input segment not yet seen in the output.
struct Fed {
    seq: SeqNumber,
    payload: Vec<u8>,
    rx: Instant,
}

struct Checker {
    pending: HashMap<FlowKey, VecDeque<Fed>>,
    flush_ns: u64,
    max_step: u64,
    cfg: GroConfig,
    units: u64,
}

impl Checker {
    fn held_flows(&self) -> usize {
        self.pending.values().filter(|q| !q.is_empty()).count()
    }

    fn is_held(&self, f: &FlowKey) -> bool {
        self.pending.get(f).is_some_and(|q| !q.is_empty())
    }

    fn emitted(&mut self, now: Instant, s: Segment<VecBuf>) -> Result<(), TestCaseError> {
        self.units += 1;
        prop_assert!(s.segs >= 1 && usize::from(s.segs) <= MAX_CHAIN);
        prop_assert!(s.segs <= self.cfg.max_segs);
        prop_assert!(s.payload.len() <= self.cfg.max_bytes.max(u32::from(MSS)));
        let q = self
            .pending
            .get_mut(&s.flow)
            .ok_or_else(|| TestCaseError::fail("output for a flow never fed"))?;
        prop_assert!(
            q.len() >= usize::from(s.segs),
            "unit covers more than was fed"
        );
        let mut want = Vec::new();
        let first = q.front().map(|f| (f.seq, f.rx));
        for _ in 0..s.segs {
            if let Some(f) = q.pop_front() {
                want.extend_from_slice(&f.payload);
            }
        }
        prop_assert_eq!(
            first,
            Some((s.seq, s.first_rx)),
            "unit does not start at the next fed segment"
        );
        prop_assert_eq!(
            s.payload.to_vec(),
            want,
            "payload differs from the fed segments"
        );
        let held = (now - s.first_rx).as_nanos();
        prop_assert!(
            held <= self.flush_ns + self.max_step,
            "held {} ns > flush_ns {} + iteration {}",
            held,
            self.flush_ns,
            self.max_step
        );
        Ok(())
    }
}

fn run_case(
    nflows: u16,
    flush_ns: u64,
    max_flows: usize,
    max_segs: u16,
    bursts: Bursts,
) -> Result<(), TestCaseError> {
    let cfg = GroConfig {
        flush_ns: Duration::from_nanos(flush_ns),
        max_flows,
        max_segs,
        ..GroConfig::default()
    };
    let mut gro: Gro<VecBuf> = Gro::new(cfg);
    let max_step = bursts.iter().map(|b| b.0).max().unwrap_or(0);
    let mut ck = Checker {
        pending: HashMap::new(),
        flush_ns,
        max_step,
        cfg: *gro.config(),
        units: 0,
    };
    let mut senders: Vec<Sender> = (0..nflows).map(Sender::new).collect();
    let mut now = Instant::from_nanos(1_000_000);
    let mut outs: Vec<Segment<VecBuf>> = Vec::new();
    let mut fed = 0u64;

    for (step, actions) in bursts {
        now += Duration::from_nanos(step);
        gro.flush_expired(now, &mut |s| outs.push(s.take()));
        for s in outs.drain(..) {
            ck.emitted(now, s)?;
        }
        for a in &actions {
            let m = senders[usize::from(a.flow)].next(a);
            let was_held = ck.is_held(&m.flow);
            let full = ck.held_flows() == ck.cfg.max_flows;
            let ev = gro.stats().evictions();
            ck.pending.entry(m.flow).or_default().push_back(Fed {
                seq: m.seq,
                payload: payload_bytes(&m),
                rx: now,
            });
            fed += 1;
            gro.handle_segment(now, &m, frame(&m), &mut |s| outs.push(s.take()));
            for s in outs.drain(..) {
                ck.emitted(now, s)?;
            }
            // One run per flow: the model's held flows are exactly GRO's held runs.
            prop_assert_eq!(gro.held_runs(), ck.held_flows());
            prop_assert!(gro.held_runs() <= ck.cfg.max_flows);
            if full && !was_held && ck.is_held(&m.flow) {
                prop_assert!(gro.stats().evictions() > ev, "full table, no eviction");
            }
        }
        gro.end_of_burst(now, &mut |s| outs.push(s.take()));
        for s in outs.drain(..) {
            ck.emitted(now, s)?;
        }
        if flush_ns == 0 {
            prop_assert_eq!(gro.held_runs(), 0);
        }
        prop_assert_eq!(gro.held_runs(), ck.held_flows());
        match gro.next_deadline() {
            Some(d) => prop_assert!(d > now),
            None => prop_assert_eq!(gro.held_runs(), 0),
        }
    }
    gro.flush_all(&mut |s| outs.push(s.take()));
    for s in outs.drain(..) {
        ck.emitted(now, s)?;
    }
    prop_assert_eq!(ck.held_flows(), 0, "segments never emitted");
    let st = gro.stats();
    prop_assert_eq!(st.segments_in, fed);
    prop_assert_eq!(st.segments_out, fed);
    prop_assert_eq!(st.held_segments, 0);
    prop_assert_eq!(st.units_out, ck.units);
    prop_assert_eq!(st.flushes.iter().sum::<u64>(), st.units_out);
    if flush_ns == 0 {
        prop_assert_eq!(st.flushed(FlushReason::Timer), 0);
    } else {
        prop_assert_eq!(st.flushed(FlushReason::BurstEnd), 0);
    }
    Ok(())
}

/// Bursts: time step before the burst, then the senders' actions.
type Bursts = Vec<(u64, Vec<Action>)>;

fn case() -> impl Strategy<Value = (u16, u64, usize, u16, Bursts)> {
    (1u16..=64, prop::sample::select(vec![0u64, 2_000, 100_000])).prop_flat_map(
        |(nflows, flush_ns)| {
            let step = 0..=flush_ns.max(1_000) * 2;
            (
                Just(nflows),
                Just(flush_ns),
                prop_oneof![1usize..=8, 8usize..=80, Just(4096usize)],
                prop_oneof![Just(64u16), 1u16..=64],
                prop::collection::vec(
                    (step, prop::collection::vec(action(nflows), 0..=32)),
                    1..=40,
                ),
            )
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn gro_keeps_every_flows_bytes_in_order_and_bounds_holding(
        (nflows, flush_ns, max_flows, max_segs, bursts) in case()
    ) {
        run_case(nflows, flush_ns, max_flows, max_segs, bursts)?;
    }
}

/// A long in-order stream through a small table: the aggregation and eviction paths under
/// steady load, checked by the same checker.
#[test]
fn many_flows_in_a_small_table() {
    let bursts: Bursts = (0..200)
        .map(|b| {
            let acts = (0..32)
                .map(|i| Action {
                    flow: ((b * 32 + i) % 64) as u16,
                    kind: 20,
                    flag: 20,
                    size: 1,
                    pick: 0,
                })
                .collect();
            (500, acts)
        })
        .collect();
    let r = run_case(64, 100_000, 16, 64, bursts);
    assert!(r.is_ok(), "{r:?}");
}
