//! `weir-bench csum [--json]`: weir's Internet checksum (`stack::wire::checksum`, RFC 1071)
//! beside DPDK's `rte_raw_cksum` (`rte_ip.h`) on the same buffers.
//!
//! Rows: each payload length (1,448 and 8,948 bytes by default: a full segment at MTU
//! 1500 and at MTU 9000) in cache, the same buffer summed again and again, and out of
//! cache, a set of buffers twice the size of this machine's usual last-level cache (64 MiB
//! by default) walked in order, as a receiver walks a ring's worth of fresh mbufs.
//! Each buffer starts 34 bytes past a 64-byte boundary, where a TCP header starts in an
//! untagged frame whose data begins on a cache line (the checksum covers the TCP header and
//! payload).
//!
//! Three implementations, all computing the folded, non-complemented sum:
//! - `weir`: `checksum::fold(checksum::add(0, buf))`;
//! - `rte_raw_cksum`: through dpdk-sys's wrapper of the static inline function, compiled
//!   at -O2 with DPDK's cflags (`-march=corei7`), as weir links it;
//! - `rte_raw_cksum -O3`: the same function compiled at -O3, as DPDK's own build compiles
//!   its libraries (GCC vectorises the loop there).
//!
//! Every timed chunk sums 8 MiB; the implementations take turns chunk by chunk, and each
//! row reports the median of `--runs` chunks per implementation. `ratio` is the DPDK
//! function's time over weir's: above 1, weir is faster. Before timing, every buffer's
//! sum is checked to be the same from all three.

use std::hint::black_box;
use std::time::Instant;

use anyhow::{bail, Result};
use stack::wire::checksum;

/// Bytes summed per timed chunk: short (about 0.3 ms for weir in cache), so that on a
/// shared machine a chunk the scheduler interrupts is an outlier the median drops.
const CHUNK_BYTES: usize = 8 << 20;
/// Where each buffer starts past a cache line: the TCP header's offset in an untagged
/// IPv4 frame (14 + 20).
const OFFSET: usize = 34;

/// Options of [`run`].
#[derive(Clone, Debug)]
pub struct Options {
    /// One JSON object per row.
    pub json: bool,
    /// Timed chunks per implementation and row (the median is reported).
    pub runs: usize,
    /// The out-of-cache buffer set, in MiB.
    pub set_mib: usize,
    /// Payload lengths in bytes.
    pub lens: Vec<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            json: false,
            runs: 25,
            set_mib: 64,
            lens: vec![1448, 8948],
        }
    }
}

/// A checksum implementation under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Impl {
    Weir,
    Rte,
    RteO3,
}

const IMPLS: [Impl; 3] = [Impl::Weir, Impl::Rte, Impl::RteO3];

impl Impl {
    /// The folded sum of `d` in network byte order.
    #[inline]
    fn sum(self, d: &[u8]) -> u16 {
        match self {
            Impl::Weir => checksum::fold(checksum::add(0, d)),
            Impl::Rte => dpdk::cksum::to_network_order(dpdk::cksum::raw_cksum(d)),
            Impl::RteO3 => dpdk::cksum::to_network_order(dpdk::cksum::raw_cksum_o3(d)),
        }
    }
}

/// Where the buffers live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cache {
    /// One buffer, summed repeatedly.
    In,
    /// The whole set, walked in order.
    Out,
}

impl Cache {
    fn name(self) -> &'static str {
        match self {
            Cache::In => "in",
            Cache::Out => "out",
        }
    }
}

/// One result row.
#[derive(Clone, Debug)]
struct Row {
    len: usize,
    cache: Cache,
    buffers: usize,
    /// Median ns per byte, in [`IMPLS`] order.
    ns_per_byte: [f64; 3],
}

/// `len`-byte buffers `stride` bytes apart in one arena of pseudo-random bytes.
struct BufferSet {
    arena: Vec<u8>,
    len: usize,
    stride: usize,
    count: usize,
}

impl BufferSet {
    fn new(len: usize, set_bytes: usize) -> BufferSet {
        let stride = (OFFSET + len).div_ceil(64) * 64;
        let count = (set_bytes / stride).max(1);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let arena = (0..count * stride + 64)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect::<Vec<u8>>();
        BufferSet {
            arena,
            len,
            stride,
            count,
        }
    }

    /// Buffer `i`: its start is 64-byte aligned plus [`OFFSET`].
    fn buffer(&self, i: usize) -> &[u8] {
        let base = self.arena.as_ptr() as usize;
        let start = base.next_multiple_of(64) - base + i * self.stride + OFFSET;
        self.arena.get(start..start + self.len).unwrap_or(&[])
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Sums about [`CHUNK_BYTES`] with `imp` and returns ns per byte. Out of cache, the walk
/// goes on from `cursor`, where the previous chunk (of any implementation) stopped, so
/// every buffer was last read a whole set ago.
fn chunk(imp: Impl, set: &BufferSet, cache: Cache, cursor: &mut usize) -> f64 {
    let n = (CHUNK_BYTES / set.len.max(1)).max(1);
    let mut acc = 0u16;
    let t = Instant::now();
    match cache {
        Cache::In => {
            let b = set.buffer(0);
            for _ in 0..n {
                acc ^= imp.sum(black_box(b));
            }
        }
        Cache::Out => {
            let mut i = *cursor;
            for _ in 0..n {
                acc ^= imp.sum(black_box(set.buffer(i)));
                i += 1;
                if i == set.count {
                    i = 0;
                }
            }
            *cursor = i;
        }
    }
    let ns = t.elapsed().as_nanos() as f64;
    black_box(acc);
    ns / (n * set.len) as f64
}

fn measure(len: usize, opts: &Options) -> Result<Vec<Row>> {
    let set = BufferSet::new(len, opts.set_mib << 20);
    // Every buffer gives the same sum from all three; the pass also faults the pages in.
    for i in 0..set.count {
        let b = set.buffer(i);
        let want = Impl::Weir.sum(b);
        for imp in IMPLS {
            let got = imp.sum(b);
            if got != want {
                bail!("{imp:?} sums buffer {i} ({len} bytes) to {got:#06x}, weir to {want:#06x}");
            }
        }
    }
    let mut rows = Vec::new();
    for cache in [Cache::In, Cache::Out] {
        let mut times: [Vec<f64>; 3] = Default::default();
        let mut cursor = 0;
        // One untimed round first (the branch predictors, the clock's frequency).
        for imp in IMPLS {
            chunk(imp, &set, cache, &mut cursor);
        }
        for _ in 0..opts.runs.max(1) {
            for (k, imp) in IMPLS.into_iter().enumerate() {
                times[k].push(chunk(imp, &set, cache, &mut cursor));
            }
        }
        let [a, b, c] = times;
        rows.push(Row {
            len,
            cache,
            buffers: if cache == Cache::In { 1 } else { set.count },
            ns_per_byte: [median(a), median(b), median(c)],
        });
    }
    Ok(rows)
}

fn gbps(ns_per_byte: f64) -> f64 {
    if ns_per_byte > 0.0 {
        1.0 / ns_per_byte
    } else {
        0.0
    }
}

fn round(x: f64, places: i32) -> f64 {
    let p = 10f64.powi(places);
    (x * p).round() / p
}

/// Runs the rows and prints them: a table, or one JSON object per row with keys `bench`
/// ("csum"), `len`, `cache` ("in" or "out"), `buffers`, `weir_gbps`,
/// `weir_ns_per_byte`, `rte_raw_cksum_gbps`, `rte_raw_cksum_ns_per_byte`,
/// `rte_raw_cksum_o3_gbps`, `rte_raw_cksum_o3_ns_per_byte`, `ratio` and `ratio_o3` (the
/// DPDK function's time over weir's: above 1, weir is faster).
pub fn run(opts: &Options) -> Result<()> {
    let mut rows = Vec::new();
    for &len in &opts.lens {
        if len == 0 {
            bail!("--lens: a length of 0 bytes measures nothing");
        }
        rows.extend(measure(len, opts)?);
    }
    if opts.json {
        for r in &rows {
            let [w, d, d3] = r.ns_per_byte;
            println!(
                "{}",
                serde_json::json!({
                    "bench": "csum",
                    "len": r.len,
                    "cache": r.cache.name(),
                    "buffers": r.buffers,
                    "weir_gbps": round(gbps(w), 2),
                    "weir_ns_per_byte": round(w, 4),
                    "rte_raw_cksum_gbps": round(gbps(d), 2),
                    "rte_raw_cksum_ns_per_byte": round(d, 4),
                    "rte_raw_cksum_o3_gbps": round(gbps(d3), 2),
                    "rte_raw_cksum_o3_ns_per_byte": round(d3, 4),
                    "ratio": round(d / w, 2),
                    "ratio_o3": round(d3 / w, 2),
                })
            );
        }
    } else {
        println!(
            "{:>6} {:>5} {:>8}  {:>10} {:>14} {:>6}  {:>14} {:>6}",
            "len",
            "cache",
            "buffers",
            "weir GB/s",
            "rte_raw GB/s",
            "ratio",
            "rte -O3 GB/s",
            "ratio"
        );
        for r in &rows {
            let [w, d, d3] = r.ns_per_byte;
            println!(
                "{:>6} {:>5} {:>8}  {:>10.2} {:>14.2} {:>6.2}  {:>14.2} {:>6.2}",
                r.len,
                r.cache.name(),
                r.buffers,
                gbps(w),
                gbps(d),
                d / w,
                gbps(d3),
                d3 / w
            );
        }
        println!("ratio: the DPDK function's time over weir's (above 1, weir is faster)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_as_documented_and_rows_measure_something() {
        let set = BufferSet::new(1449, 1 << 20);
        assert!(set.count > 100);
        for i in [0, 1, set.count - 1] {
            let b = set.buffer(i);
            assert_eq!(b.len(), 1449);
            assert_eq!(b.as_ptr() as usize % 64, OFFSET);
        }
        let opts = Options {
            runs: 1,
            set_mib: 1,
            ..Options::default()
        };
        let rows = measure(1449, &opts).expect("all three agree");
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.ns_per_byte.iter().all(|&t| t > 0.0)));
    }
}
