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

use stack::ack::AckPolicy;
use stack::buf::PacketBuf;
use stack::mem::{VecBuf, VecPool};
use stack::segment::Segment;
use std::hint::black_box;
use std::time::Instant as StdInstant;
use testkit::tcp::{ack_parts, Fixture as Rx};

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
    let mut rx = Rx::new(AckPolicy::linux()).map_err(anyhow::Error::msg)?;
    let mut ns = 0u128;
    let mut acks = 0usize;
    for _ in 0..bursts {
        let segs: Vec<Segment<VecBuf>> = (0..BURST / run).map(|_| rx.next(run)).collect();
        let now = rx.now;
        let t = StdInstant::now();
        for mut s in segs {
            rx.tcp.handle_segment(now, &mut s);
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
