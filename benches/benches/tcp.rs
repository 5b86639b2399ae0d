//! TCP receive benchmarks on the in-memory buffers (`stack::mem`): (a) in-order receive
//! plus the ACK decision per coalesced segment (`Tcp::handle_segment`), for 45-segment runs
//! (GRO on) and 1-segment runs (GRO off), reported per wire segment; (b) ACK building from
//! the per-flow template (`AckTemplate::build`), with and without SACK blocks, per ACK.
//!
//! Only `handle_segment` is timed in (a): building the segments, the application's read and
//! `poll_tx` run outside the measurement.
#![allow(missing_docs, clippy::unwrap_used)]

use stack::ack::AckPolicy;
use stack::buf::PacketBuf;
use stack::mem::{VecBuf, VecPool};
use stack::segment::Segment;
use std::hint::black_box;
use std::time::{Duration as StdDuration, Instant as StdInstant};
use testkit::tcp::{ack_parts, Fixture as Rx};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Wire segments per burst: one 64 KiB run of 1448-byte segments.
const BURST: u16 = 45;

fn receive(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_receive");
    g.throughput(Throughput::Elements(u64::from(BURST)));
    for (name, run) in [("run45", BURST), ("run1", 1)] {
        g.bench_function(name, |b| {
            let mut rx = match Rx::new(AckPolicy::linux()) {
                Ok(r) => r,
                Err(e) => panic!("{e}"),
            };
            b.iter_custom(|iters| {
                let mut t = StdDuration::ZERO;
                for _ in 0..iters {
                    let segs: Vec<Segment<VecBuf>> =
                        (0..BURST / run).map(|_| rx.next(run)).collect();
                    let now = rx.now;
                    let start = StdInstant::now();
                    for mut s in segs {
                        rx.tcp.handle_segment(now, &mut s);
                    }
                    t += start.elapsed();
                    black_box(rx.drain());
                }
                t
            });
        });
    }
    g.finish();
}

fn ack_build(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_ack_build");
    g.throughput(Throughput::Elements(1));
    for (name, blocks) in [("no_sack", 0), ("sack3", 3)] {
        let (tmpl, f, (opt, n)) = ack_parts(blocks);
        let mut pool = VecPool::new(1 << 16, 2048);
        g.bench_function(name, |b| {
            b.iter(|| {
                let a = tmpl.build(&mut pool, black_box(&f), black_box(&opt[..n]), false);
                black_box(a.map(|x| x.data().len()))
            });
        });
    }
    g.finish();
}

criterion_group!(benches, receive, ack_build);
criterion_main!(benches);
