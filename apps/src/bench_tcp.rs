//! `weir-bench tcp [--json]`: the TCP receive path on the in-memory buffers, timed with
//! `std::time::Instant` (the criterion benches in `benches/benches/tcp.rs` measure the same
//! two things).
//!
//! - `tcp_receive_run45` / `tcp_receive_run1`: in-order receive plus the ACK decision
//!   (`Tcp::handle_segment`) per wire segment, for bursts of 45 full segments arriving as
//!   one coalesced run (GRO on) or as 45 runs of one (GRO off), under the `linux` policy;
//!   with the ACKs those decisions produced per wire segment (`segments_per_ack`).
//! - `tcp_ack_build_no_sack` / `tcp_ack_build_sack3`: one ACK built from the flow's
//!   template (`AckTemplate::build`: copy, patch, checksums in software) into a buffer.
//!
//! Each measurement runs many iterations, is repeated 5 times, and the median is printed.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant as StdInstant;

use stack::ack::template::{sack_option, AckTemplate, TcpFields};
use stack::ack::AckPolicy;
use stack::buf::{PacketBuf, PayloadChain, PayloadSlice};
use stack::driver::Burst;
use stack::flow::FlowKey;
use stack::mem::{VecBuf, VecPool};
use stack::segment::Segment;
use stack::seq::SeqNumber;
use stack::tcp::{ConnId, Event, Tcp, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::{SackBlock, TcpFlags, TcpOptions, Timestamp};

/// A receiver with one established connection, fed coalesced segments built in memory.
struct Rx {
    /// The receiver.
    tcp: Tcp<VecBuf>,
    /// Pool the ACKs are built from.
    pool: VecPool,
    /// The virtual clock.
    now: Instant,
    flow: FlowKey,
    id: ConnId,
    snd_nxt: SeqNumber,
    our_nxt: SeqNumber,
    tsval: u32,
}

const MSS: u16 = 1448;

#[allow(clippy::too_many_arguments)]
fn segment(
    flow: FlowKey,
    seq: SeqNumber,
    ack: SeqNumber,
    flags: TcpFlags,
    segs: u16,
    gso: u16,
    opts: TcpOptions,
    now: Instant,
) -> Segment<VecBuf> {
    let mut payload = PayloadChain::new();
    for _ in 0..segs {
        let s = PayloadSlice {
            buf: VecBuf::from_vec(vec![0u8; 66 + usize::from(gso)]),
            off: 66,
            len: gso,
        };
        let _ = payload.push(s);
    }
    Segment {
        flow,
        peer_mac: [2, 0, 0, 0, 0, 2],
        local_mac: [2, 0, 0, 0, 0, 1],
        seq,
        ack,
        flags,
        window: 1024,
        opts,
        ts_last: opts.timestamp,
        segs: segs.max(1),
        gso_size: if segs == 0 { 0 } else { gso },
        first_rx: now,
        payload,
    }
}

impl Rx {
    /// A connection under `policy`, past the handshake and the quickack phase.
    fn new(policy: AckPolicy) -> anyhow::Result<Self> {
        let mut tcp = Tcp::new(TcpConfig {
            rcv_buf: 4 << 20,
            max_conns: 16,
            ..TcpConfig::default()
        });
        let _ = tcp.listen(5001, policy);
        let flow = FlowKey::v4(
            Ipv4Addr::new(198, 18, 0, 2),
            40000,
            Ipv4Addr::new(198, 18, 0, 1),
            5001,
        );
        let now = Instant::from_nanos(1_000_000_000);
        let opts = TcpOptions {
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            timestamp: Some(Timestamp { tsval: 1, tsecr: 0 }),
            ..TcpOptions::default()
        };
        let isn = SeqNumber(1_000_000);
        tcp.handle_segment(
            now,
            segment(flow, isn, SeqNumber(0), TcpFlags::SYN, 0, 0, opts, now),
        );
        let mut out = Burst::new();
        let mut pool = VecPool::new(1 << 16, 2048);
        tcp.poll_tx(now, &mut pool, &mut out, false);
        // The SYN-ACK's sequence number (Ethernet 14 + IPv4 20 + 4).
        let iss = out
            .first()
            .and_then(|b| b.data().get(38..42))
            .map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]));
        out.clear();
        let our_nxt = SeqNumber(iss.wrapping_add(1));
        let ts = TcpOptions {
            timestamp: Some(Timestamp { tsval: 2, tsecr: 0 }),
            ..TcpOptions::default()
        };
        let snd_nxt = isn + 1;
        tcp.handle_segment(
            now,
            segment(flow, snd_nxt, our_nxt, TcpFlags::ACK, 0, 0, ts, now),
        );
        let id = tcp
            .events()
            .find_map(|e| match e {
                Event::Opened(id) => Some(id),
                _ => None,
            })
            .ok_or_else(|| anyhow::anyhow!("bench handshake failed"))?;
        let mut rx = Rx {
            tcp,
            pool,
            now,
            flow,
            id,
            snd_nxt,
            our_nxt,
            tsval: 3,
        };
        for _ in 0..40 {
            let s = rx.next(2);
            rx.tcp.handle_segment(rx.now, s);
            rx.drain();
        }
        Ok(rx)
    }

    /// The next in-order run of `segs` full segments (built, not yet handled).
    fn next(&mut self, segs: u16) -> Segment<VecBuf> {
        let opts = TcpOptions {
            timestamp: Some(Timestamp {
                tsval: self.tsval,
                tsecr: 0,
            }),
            ..TcpOptions::default()
        };
        let s = segment(
            self.flow,
            self.snd_nxt,
            self.our_nxt,
            TcpFlags::ACK,
            segs,
            MSS,
            opts,
            self.now,
        );
        self.snd_nxt += usize::from(segs) * usize::from(MSS);
        self.tsval = self.tsval.wrapping_add(1);
        s
    }

    /// The application reads everything, the ACKs due are built and dropped, and the
    /// clock moves 100 µs. Returns the ACKs built.
    fn drain(&mut self) -> usize {
        let _ = self
            .tcp
            .recv(self.id, |s| s.iter().map(|x| usize::from(x.len)).sum());
        let mut n = 0;
        loop {
            let mut out = Burst::new();
            let k = self.tcp.poll_tx(self.now, &mut self.pool, &mut out, false);
            n += k;
            if k == 0 || !out.is_full() {
                break;
            }
        }
        self.now += Duration::from_micros(100);
        n
    }
}

/// A template, fields and SACK option bytes for building one ACK.
fn ack_parts(sack_blocks: usize) -> (AckTemplate, TcpFields, ([u8; 36], usize)) {
    let flow = FlowKey::v4(
        Ipv4Addr::new(198, 18, 0, 2),
        40000,
        Ipv4Addr::new(198, 18, 0, 1),
        5001,
    );
    let tmpl = AckTemplate::new(&flow, [2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], true, 64);
    let f = TcpFields {
        seq: SeqNumber(7),
        ack: SeqNumber(1_000_000),
        flags: TcpFlags::ACK,
        window: 32_000,
        ts: Timestamp {
            tsval: 10,
            tsecr: 20,
        },
    };
    let blocks: Vec<SackBlock> = (0..sack_blocks as u32)
        .map(|i| SackBlock {
            left: SeqNumber(1_010_000 + 10_000 * i),
            right: SeqNumber(1_015_000 + 10_000 * i),
        })
        .collect();
    let mut opt = [0u8; 36];
    let n = sack_option(&blocks, &mut opt);
    (tmpl, f, (opt, n))
}

/// Wire segments per burst: one 64 KiB run of 1448-byte segments.
const BURST: u16 = 45;
/// Repetitions of each measurement; the median is reported.
const REPEATS: usize = 5;

/// One result row.
struct Row {
    bench: &'static str,
    unit: &'static str,
    ns: f64,
    segments_per_ack: Option<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// ns per wire segment in `handle_segment`, and wire segments per ACK.
fn receive(run: u16, bursts: usize) -> anyhow::Result<(f64, f64)> {
    let mut rx = Rx::new(AckPolicy::linux())?;
    let mut ns = 0u128;
    let mut acks = 0usize;
    for _ in 0..bursts {
        let segs: Vec<Segment<VecBuf>> = (0..BURST / run).map(|_| rx.next(run)).collect();
        let now = rx.now;
        let t = StdInstant::now();
        for s in segs {
            rx.tcp.handle_segment(now, s);
        }
        ns += t.elapsed().as_nanos();
        acks += rx.drain();
    }
    let wire = (bursts * usize::from(BURST)) as f64;
    Ok((ns as f64 / wire, wire / acks.max(1) as f64))
}

/// ns per ACK built.
fn ack_build(blocks: usize, n: usize) -> f64 {
    let (tmpl, f, (opt, len)) = ack_parts(blocks);
    let mut pool = VecPool::new(1 << 16, 2048);
    let t = StdInstant::now();
    for _ in 0..n {
        let a = tmpl.build(&mut pool, black_box(&f), black_box(&opt[..len]), false);
        black_box(a.map(|x| x.data().len()));
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Runs the TCP benchmarks and prints medians: a table, or one JSON object per row with
/// keys `bench`, `ns_per_segment` or `ns_per_ack`, and `segments_per_ack`.
pub fn run(json: bool) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for (bench, run, bursts) in [
        ("tcp_receive_run45", BURST, 20_000),
        ("tcp_receive_run1", 1, 2_000),
    ] {
        let mut ns = Vec::new();
        let mut spa = Vec::new();
        for _ in 0..REPEATS {
            let (a, b) = receive(run, bursts)?;
            ns.push(a);
            spa.push(b);
        }
        rows.push(Row {
            bench,
            unit: "ns_per_segment",
            ns: median(ns),
            segments_per_ack: Some(median(spa)),
        });
    }
    for (bench, blocks) in [("tcp_ack_build_no_sack", 0), ("tcp_ack_build_sack3", 3)] {
        let ns = (0..REPEATS).map(|_| ack_build(blocks, 200_000)).collect();
        rows.push(Row {
            bench,
            unit: "ns_per_ack",
            ns: median(ns),
            segments_per_ack: None,
        });
    }
    if json {
        for r in &rows {
            let mut o = serde_json::Map::new();
            o.insert("bench".into(), r.bench.into());
            o.insert(
                r.unit.into(),
                serde_json::json!((r.ns * 10.0).round() / 10.0),
            );
            o.insert(
                "segments_per_ack".into(),
                r.segments_per_ack.map_or(serde_json::Value::Null, |v| {
                    serde_json::json!((v * 100.0).round() / 100.0)
                }),
            );
            println!("{}", serde_json::Value::Object(o));
        }
    } else {
        println!(
            "{:<24} {:>16} {:>12} {:>18}",
            "bench", "ns/segment", "ns/ack", "segments/ack"
        );
        for r in &rows {
            let (seg, ack) = if r.unit == "ns_per_segment" {
                (format!("{:.1}", r.ns), "-".to_string())
            } else {
                ("-".to_string(), format!("{:.1}", r.ns))
            };
            let spa = r
                .segments_per_ack
                .map_or("-".to_string(), |v| format!("{v:.2}"));
            println!("{:<24} {:>16} {:>12} {:>18}", r.bench, seg, ack, spa);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receive_and_ack_build_measure_something() {
        let (ns, spa) = receive(BURST, 20).expect("run45");
        assert!(ns > 0.0);
        assert!(spa > 40.0, "one ACK per 45-segment run: {spa}");
        let (_, spa1) = receive(1, 20).expect("run1");
        assert!(
            (1.5..3.0).contains(&spa1),
            "about one ACK per 2 segments: {spa1}"
        );
        assert!(ack_build(3, 100) > 0.0);
    }
}
