//! `weir-bench gro`: weir's GRO side by side with DPDK's `rte_gro` (heavyweight mode), in
//! one process, on the same bursts of real mbufs (the fixture and what is timed are
//! described in [`super::gro_fixture`]).
//!
//! Every row (pattern x flows x flush window) runs both implementations interleaved: after
//! a warm-up, [`REPEATS`] chunks of [`SEGMENTS`] timed segments each, the two taking turns
//! chunk by chunk (and alternating which goes first); the median chunk of each is
//! reported, then the benchmark's targets and whether they are met
//! ([`super::gro_fixture::measure_interleaved`] says why).

use anyhow::{Context, Result};
use dpdk::{Clock, Eal, Mempool};
use serde_json::json;

use super::gro_fixture::{
    eal_args_with, measure_interleaved, prepare_pool, Generator, Lane, Measurement, Pattern,
    Receiver, RteGro, WeirGro, BURST, FLOW_COUNTS, FLUSH_NS,
};
use crate::eal_args::Memory;

/// Timed chunks per (implementation, row) by default; the median is reported.
pub const REPEATS: usize = 63;

/// What to run: by default every row ([`FLOW_COUNTS`] x [`FLUSH_NS`] x both patterns), both
/// implementations.
#[derive(Clone, Debug)]
pub struct Options {
    /// One JSON object per (implementation, row) instead of the table.
    pub json: bool,
    /// Pattern names (`rr`, `train`).
    pub patterns: Vec<String>,
    /// Flow counts.
    pub flows: Vec<u32>,
    /// Flush windows in nanoseconds.
    pub flush_ns: Vec<u64>,
    /// Timed chunks per implementation and row (interleaved with the other side's).
    pub runs: usize,
    /// Only this implementation (`weir` or `rte_gro`): for profiling one side.
    pub only: Option<String>,
    /// Where DPDK's memory comes from (`--hugepages`: 2 MiB pages, reserved beforehand).
    pub memory: Memory,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            json: false,
            patterns: Pattern::ALL.iter().map(|p| p.name().to_string()).collect(),
            flows: FLOW_COUNTS.to_vec(),
            flush_ns: FLUSH_NS.to_vec(),
            runs: REPEATS,
            only: None,
            memory: Memory::NoHuge,
        }
    }
}

/// Timed segments per chunk.
pub const SEGMENTS: u64 = 2 * 1024;

/// Untimed segments before each measurement (fills the tables: at 4,096 flows every flow
/// gets several segments first; at more flows, two rounds of them).
const WARMUP: u64 = 16 * 1024;

/// [`WARMUP`], or two segments per flow when that is more.
fn warmup(flows: u32) -> u64 {
    WARMUP.max(2 * u64::from(flows))
}

/// One row of the report: medians for both implementations.
#[derive(Clone, Copy, Debug)]
struct Row {
    pattern: Pattern,
    flows: u32,
    flush_ns: u64,
    weir: Measurement,
    rte: Measurement,
}

impl Row {
    /// `rte_gro`'s ns per segment over weir's: how many times faster weir is.
    fn ratio(&self) -> f64 {
        self.rte.ns_per_segment / self.weir.ns_per_segment
    }
}

/// Flow count of the scaling target (its cost against 1 flow's).
const MANY: u32 = 4096;

/// weir at 1 flow and at [`MANY`] flows measured against each other, interleaved chunk
/// by chunk as the two implementations of a row are. The scaling target compares these
/// two costs; taken from rows measured seconds apart, they fell on different timing modes
/// of a shared VM often enough to move the ratio by a third either way.
#[derive(Clone, Copy, Debug)]
struct Scaling {
    pattern: Pattern,
    flush_ns: u64,
    one: Measurement,
    many: Measurement,
}

impl Scaling {
    /// weir's ns per segment at [`MANY`] flows over its ns per segment at 1 flow.
    fn ratio(&self) -> f64 {
        self.many.ns_per_segment / self.one.ns_per_segment
    }
}

/// Measures weir at 1 flow against weir at [`MANY`] flows, interleaved
/// ([`measure_interleaved`]: each lane re-warmed before each of its chunks).
fn measure_scaling(
    pool: Mempool,
    clock: &Clock,
    pattern: Pattern,
    flush_ns: u64,
    runs: usize,
) -> Scaling {
    let (mut g1, mut gn) = (
        Generator::new(pool, pattern, 1),
        Generator::new(pool, pattern, MANY),
    );
    let mut w1 = WeirGro::new(*clock, 1, flush_ns);
    let mut wn = WeirGro::new(*clock, MANY, flush_ns);
    let (one, many) = interleave(
        Some(Lane {
            rx: &mut w1,
            gen: &mut g1,
        }),
        Some(Lane {
            rx: &mut wn,
            gen: &mut gn,
        }),
        clock,
        runs,
        MANY,
    );
    Scaling {
        pattern,
        flush_ns,
        one,
        many,
    }
}

/// [`measure_interleaved`] with this report's warm-up and chunk size; a lane left out
/// (`--only`) reads [`NO_MEASUREMENT`].
fn interleave<A: Receiver, B: Receiver>(
    a: Option<Lane<'_, A>>,
    b: Option<Lane<'_, B>>,
    clock: &Clock,
    runs: usize,
    flows: u32,
) -> (Measurement, Measurement) {
    let (a, b) = measure_interleaved(
        a,
        b,
        clock,
        warmup(flows) / BURST as u64,
        runs,
        SEGMENTS / BURST as u64,
    );
    (a.unwrap_or(NO_MEASUREMENT), b.unwrap_or(NO_MEASUREMENT))
}

/// A side that was not measured.
const NO_MEASUREMENT: Measurement = Measurement {
    ns_per_segment: f64::NAN,
    segments_per_unit: f64::NAN,
    wall_ns_per_segment: f64::NAN,
    cpu_share: f64::NAN,
};

/// Measures one row: both implementations (or the one `only` names) on the same input,
/// `runs` chunks each, interleaved.
#[allow(clippy::too_many_arguments)]
fn measure_row(
    eal: &Eal,
    pool: Mempool,
    clock: &Clock,
    pattern: Pattern,
    flows: u32,
    flush_ns: u64,
    runs: usize,
    only: Option<&str>,
) -> Result<Row> {
    let (mut gw, mut gr) = (
        Generator::new(pool, pattern, flows),
        Generator::new(pool, pattern, flows),
    );
    let mut w = (only != Some("rte_gro")).then(|| WeirGro::new(*clock, flows, flush_ns));
    let mut r = match only {
        Some("weir") => None,
        _ => Some(
            RteGro::new(eal, clock, flows, flush_ns)
                .with_context(|| format!("rte_gro context for {flows} flows"))?,
        ),
    };
    let (weir, rte) = interleave(
        w.as_mut().map(|rx| Lane { rx, gen: &mut gw }),
        r.as_mut().map(|rx| Lane { rx, gen: &mut gr }),
        clock,
        runs,
        flows,
    );
    Ok(Row {
        pattern,
        flows,
        flush_ns,
        weir,
        rte,
    })
}

/// Runs the rows `opts` selects and prints the table (or JSON lines with `json`) and the
/// targets.
pub fn run(opts: &Options) -> Result<()> {
    let json = opts.json;
    let mut patterns = Vec::new();
    for name in &opts.patterns {
        let p = Pattern::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .with_context(|| format!("unknown pattern {name:?} (rr or train)"))?;
        patterns.push(p);
    }
    if let Some(o) = &opts.only {
        anyhow::ensure!(
            o == "weir" || o == "rte_gro",
            "--only takes weir or rte_gro, not {o:?}"
        );
    }
    let eal =
        Eal::init(eal_args_with("gro", opts.memory)).context(opts.memory.eal_init_context())?;
    let pool = prepare_pool(&eal, "weir-bench-gro").context("creating the mbuf pool")?;
    let clock = Clock::new(&eal);

    // The scaling target's interleaved pair, when both of its flow counts are asked for.
    let scaling_too = opts.only.as_deref() != Some("rte_gro")
        && opts.flows.contains(&1)
        && opts.flows.contains(&MANY);
    let mut rows = Vec::new();
    let mut scaling = Vec::new();
    let per_window = opts.flows.len() + usize::from(scaling_too);
    let pb = crate::progress::bar(
        (patterns.len() * per_window * opts.flush_ns.len()) as u64,
        "weir-bench gro",
    );
    for &pattern in &patterns {
        for &flows in &opts.flows {
            for &flush_ns in &opts.flush_ns {
                pb.set_message(format!("{} {flows} flows {flush_ns} ns", pattern.name()));
                rows.push(measure_row(
                    &eal,
                    pool,
                    &clock,
                    pattern,
                    flows,
                    flush_ns,
                    opts.runs,
                    opts.only.as_deref(),
                )?);
                pb.inc(1);
            }
        }
        if scaling_too {
            for &flush_ns in &opts.flush_ns {
                pb.set_message(format!(
                    "{} 1 vs {MANY} flows {flush_ns} ns, interleaved",
                    pattern.name()
                ));
                scaling.push(measure_scaling(pool, &clock, pattern, flush_ns, opts.runs));
                pb.inc(1);
            }
        }
    }
    pb.finish_and_clear();

    if json {
        for r in &rows {
            for (name, m) in [("weir", r.weir), ("rte_gro", r.rte)] {
                println!(
                    "{}",
                    json!({
                        "impl": name,
                        "pattern": r.pattern.name(),
                        "flows": r.flows,
                        "flush_ns": r.flush_ns,
                        "ns_per_segment": m.ns_per_segment,
                        "segments_per_unit": m.segments_per_unit,
                        "ratio": r.ratio(),
                        "wall_ns_per_segment": m.wall_ns_per_segment,
                        "cpu_share": m.cpu_share,
                    })
                );
            }
        }
    } else {
        print_table(&rows, opts.runs, opts.memory);
    }
    print_targets(&rows, &scaling, json);
    Ok(())
}

fn print_table(rows: &[Row], runs: usize, memory: Memory) {
    println!(
        "weir-bench gro: medians of {runs} interleaved chunks of {SEGMENTS} segments (bursts \
         of {BURST}, 1448-byte payloads, TSC, {}; {})",
        memory.describe(),
        load()
    );
    println!(
        "{:<7} {:>6} {:>9} | {:>11} {:>9} | {:>11} {:>9} | {:>8}",
        "pattern",
        "flows",
        "flush_ns",
        "weir ns/seg",
        "seg/unit",
        "rte ns/seg",
        "seg/unit",
        "speedup"
    );
    for r in rows {
        println!(
            "{:<7} {:>6} {:>9} | {:>11.1} {:>9.1} | {:>11.1} {:>9.1} | {:>7.2}x",
            r.pattern.name(),
            r.flows,
            r.flush_ns,
            r.weir.ns_per_segment,
            r.weir.segments_per_unit,
            r.rte.ns_per_segment,
            r.rte.segments_per_unit,
            r.ratio()
        );
    }
}

/// The machine's load average, for the record (noise on a shared machine).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| {
            let f: Vec<&str> = s.split_whitespace().take(3).collect();
            format!("load average {}", f.join(" "))
        })
        .unwrap_or_default()
}

fn find(rows: &[Row], pattern: Pattern, flows: u32, flush_ns: u64) -> Option<&Row> {
    rows.iter()
        .find(|r| r.pattern == pattern && r.flows == flows && r.flush_ns == flush_ns)
}

/// The benchmark's targets, each with the figures it is judged on. Printed to stderr with
/// `--json` so that stdout stays one object per line.
fn print_targets(rows: &[Row], scaling: &[Scaling], json: bool) {
    const W: u64 = 100_000;
    let mut lines = Vec::new();
    // `figure` is NaN when a side the target needs was not measured (`--only`).
    let mut check = |figure: f64, ok: fn(f64) -> bool, what: String| {
        let verdict = match figure {
            f if f.is_nan() => "not measured (--only)",
            f if ok(f) => "met",
            _ => "MISSED",
        };
        lines.push(format!("  [{verdict}] {what}"));
    };
    if let Some(r) = find(rows, Pattern::Rr, 1, W) {
        check(
            r.ratio(),
            |x| x >= 1.5,
            format!(
                "rr, 1 flow, 100,000 ns: weir >= 1.5x faster than rte_gro: {:.2}x",
                r.ratio()
            ),
        );
    }
    if let Some(r) = find(rows, Pattern::Rr, 256, W) {
        check(
            r.ratio(),
            |x| x >= 10.0,
            format!(
                "rr, 256 flows, 100,000 ns: weir >= 10x faster than rte_gro: {:.2}x",
                r.ratio()
            ),
        );
    }
    for sc in scaling {
        // The rows' own figures, for comparison (each row measured on its own, with
        // rte_gro interleaved instead).
        let rows_say = match (
            find(rows, sc.pattern, 1, sc.flush_ns),
            find(rows, sc.pattern, MANY, sc.flush_ns),
        ) {
            (Some(one), Some(many)) => format!(
                "; from the rows: weir {:.2}x, rte_gro {:.1}x",
                many.weir.ns_per_segment / one.weir.ns_per_segment,
                many.rte.ns_per_segment / one.rte.ns_per_segment
            ),
            _ => String::new(),
        };
        check(
            sc.ratio(),
            |x| x <= 3.0,
            format!(
                "{}, {} ns: weir at 4,096 flows within 3x of 1 flow, measured interleaved: \
                 {:.2}x ({:.1} vs {:.1} ns/seg{rows_say})",
                sc.pattern.name(),
                sc.flush_ns,
                sc.ratio(),
                sc.many.ns_per_segment,
                sc.one.ns_per_segment,
            ),
        );
    }
    for flows in [256, 4096] {
        if let Some(r) = find(rows, Pattern::Train, flows, W) {
            check(
                r.weir.segments_per_unit,
                |x| x >= 40.0,
                format!(
                    "train, {flows} flows, 100,000 ns: weir >= 40 segments per unit: {:.1} \
                     (rte_gro {:.1})",
                    r.weir.segments_per_unit, r.rte.segments_per_unit
                ),
            );
        }
    }
    let out = format!("targets:\n{}", lines.join("\n"));
    if json {
        eprintln!("{out}");
    } else {
        println!("{out}");
    }
}
