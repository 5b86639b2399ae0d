//! The field reports as transactions: `weir-bench rr`'s client and echo server
//! ([`crate::bench::rr`]) on two lcores over the ring pair, on real cycles.
//!
//! - `rr_abc` (field report 000, as its author ran it): one connection, netperf TCP_RR
//!   bursts b = 1 to 256, transactions/s and cycles per transaction on both sides; then
//!   the sender's ACK counting (per ACK, ABC L=2, bytes) crossed with the receiver's ACK
//!   policy (`linux`, `every:1`, `rfc5681`), with and without 20 ms think times between
//!   an answer and the next request, counting useless ACKs (pure ACKs a data segment
//!   followed within one delayed-ACK time: `AckStats::useless`);
//! - `rr_flush` (field report 004): transactions/s and p99 latency against the GRO flush
//!   window (0 to 100 µs) for 1 to 200 connections, beside the bulk flush sweep's
//!   segments per unit at the same windows (`flush_sweep.csv`, when it is there);
//! - `rr_gro` (field report 003): GRO on against off for small messages: what coalescing
//!   costs when there is nothing to coalesce.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{anyhow, Result};
use stack::ack::AckPolicy;

use super::plot::{write_csv, LinePlot, Series};
use super::{load_note, median, progress, write_fragment};
use crate::bench::e2e::{Rig, FLUSH_NS};
use crate::bench::rr::{self, Sample, Shape};
use crate::eal_args::Memory;
use crate::gen::AckCounting;

/// `weir-lab rr`'s options.
#[derive(Clone, Debug)]
pub struct Opts {
    /// Output directory.
    pub out: std::path::PathBuf,
    /// Seconds of the measured phase per case.
    pub seconds: f64,
    /// Rounds per case (medians).
    pub rounds: usize,
}

/// One measured case: the medians of its rounds (and the sums of the accounting).
#[derive(Clone, Debug)]
struct Row {
    tps: f64,
    p50_us: f64,
    p99_us: f64,
    client_cycles: f64,
    server_cycles: f64,
    segments: f64,
    pure_acks: f64,
    useless: f64,
    clean: bool,
}

struct Lab<'a> {
    rig: Rig,
    o: &'a Opts,
}

impl Lab<'_> {
    #[allow(clippy::too_many_arguments)]
    fn measure(
        &self,
        conns: u32,
        burst: u32,
        counting: AckCounting,
        policy: AckPolicy,
        gap_ns: u64,
        gro_flush_ns: Option<u64>,
    ) -> Result<Row> {
        let opts = rr::Options {
            conns: vec![conns],
            bursts: vec![burst],
            request: 64,
            response: 64,
            seconds: if gap_ns > 0 {
                self.o.seconds.max(1.0)
            } else {
                self.o.seconds
            },
            warmup: 0.1,
            runs: 1,
            gap_ns,
            gro: gro_flush_ns.is_some(),
            gro_flush_ns: gro_flush_ns.unwrap_or(FLUSH_NS),
            ack_policy: policy,
            ack_counting: counting,
            json: false,
            memory: Memory::NoHuge,
            impair: None,
            rx_burst: stack::driver::MAX_BURST,
        };
        let shape = Shape {
            conns,
            burst,
            request: 64,
            response: 64,
        };
        let mut v: Vec<Sample> = Vec::new();
        for _ in 0..self.o.rounds.max(1) {
            v.push(rr::case(&self.rig, &opts, shape)?);
        }
        let m = |f: fn(&Sample) -> f64| median(v.iter().map(f).collect());
        Ok(Row {
            tps: m(|s| s.tps),
            p50_us: m(|s| s.p50) / 1e3,
            p99_us: m(|s| s.p99) / 1e3,
            client_cycles: m(|s| s.client_cycles),
            server_cycles: m(|s| s.server_cycles),
            segments: m(|s| s.segments),
            pure_acks: m(|s| s.pure_acks),
            useless: m(|s| s.useless),
            clean: v
                .iter()
                .all(|s| s.lost == 0 && s.duplicates == 0 && s.mismatches == 0),
        })
    }
}

fn policy(s: &str) -> Result<AckPolicy> {
    s.parse().map_err(|e| anyhow!("{s}: {e}"))
}

fn clean_note(rows: &[&Row]) -> &'static str {
    if rows.iter().all(|r| r.clean) {
        "Every transaction of every case was answered once, byte for byte."
    } else {
        "**Some case lost, duplicated or mismatched transactions: see the `clean` column.**"
    }
}

/// Runs the three experiments and writes their CSV, plots and fragments.
pub fn run(o: &Opts) -> Result<()> {
    std::fs::create_dir_all(&o.out)?;
    let lab = Lab {
        rig: Rig::new("weir-lab-rr", Memory::NoHuge)?,
        o,
    };
    let load_before = load_note();
    abc(&lab, &load_before)?;
    flush(&lab, &load_before)?;
    gro(&lab, &load_before)?;
    Ok(())
}

fn method(o: &Opts, load: &str) -> String {
    format!(
        "Method: `weir-lab rr` (scripts/lab/rr.sh): `weir-bench rr`'s weir client on one lcore and weir-serve's echo engine on the other, over the in-process ring pair, 64-byte requests and responses, TCP_NODELAY on both, software checksums; {} rounds of {:.1} s measured per case (medians; 1 s at least with think times), after 0.1 s of warm-up; load at the start {load}. Cycles are busy TSC cycles per transaction (iterations that received or sent something).",
        o.rounds, o.seconds
    )
}

/// One row of `rr_abc.csv`.
fn abc_row(
    table: &str,
    burst: u32,
    counting: &str,
    policy: &str,
    gap_ns: u64,
    r: &Row,
) -> Vec<String> {
    vec![
        table.into(),
        burst.to_string(),
        counting.into(),
        policy.into(),
        gap_ns.to_string(),
        format!("{:.0}", r.tps),
        format!("{:.0}", r.client_cycles),
        format!("{:.0}", r.server_cycles),
        format!("{:.3}", r.segments),
        format!("{:.3}", r.pure_acks),
        format!("{:.3}", r.useless),
        r.clean.to_string(),
    ]
}

fn abc(lab: &Lab<'_>, load: &str) -> Result<()> {
    let dir = &lab.o.out;
    let bursts = [1u32, 2, 4, 8, 16, 32, 64, 128, 256];
    let pb = progress(bursts.len() as u64 + 54, "rr: field report 000");
    let mut table = Vec::new();
    for b in bursts {
        let r = lab.measure(
            1,
            b,
            AckCounting::Bytes,
            AckPolicy::linux(),
            0,
            Some(FLUSH_NS),
        )?;
        pb.inc(1);
        table.push((b, r));
    }
    let senders = [AckCounting::PerAck, AckCounting::Abc(2), AckCounting::Bytes];
    let policies = ["linux", "every:1", "rfc5681"];
    let mut cross = Vec::new();
    for gap in [0u64, 20_000_000] {
        for b in [2u32, 32, 256] {
            for s in senders {
                for p in policies {
                    let r = lab.measure(1, b, s, policy(p)?, gap, Some(FLUSH_NS))?;
                    pb.inc(1);
                    cross.push((gap, b, s, p, r));
                }
            }
        }
    }
    pb.finish_and_clear();
    let mut csv = Vec::new();
    for (b, r) in &table {
        csv.push(abc_row("bursts", *b, "bytes", "linux", 0, r));
    }
    for (g, b, s, p, r) in &cross {
        csv.push(abc_row("cross", *b, &s.to_string(), p, *g, r));
    }
    write_csv(
        &dir.join("rr_abc.csv"),
        &[
            "table",
            "burst",
            "ack_counting",
            "ack_policy",
            "gap_ns",
            "tps",
            "client_cycles_per_txn",
            "server_cycles_per_txn",
            "segments_per_txn",
            "pure_acks_per_txn",
            "useless_acks_per_txn",
            "clean",
        ],
        &csv,
    )?;
    LinePlot {
        title: "RR, 1 connection: transactions/s by burst (64 B, linux ACKs, bytes counting)",
        x_label: "transactions in flight (burst)",
        y_label: "transactions/s",
        log_x: true,
        log_y: true,
        series: vec![Series {
            name: "weir <-> weir, ring pair".into(),
            points: table.iter().map(|(b, r)| (f64::from(*b), r.tps)).collect(),
        }],
        hlines: vec![],
        vlines: vec![],
    }
    .draw(&dir.join("rr_abc_bursts.png"))?;
    let mut useless_series = Vec::new();
    for p in policies {
        useless_series.push(Series {
            name: format!("{p}, 20 ms think time"),
            points: cross
                .iter()
                .filter(|c| c.0 > 0 && c.3 == p && c.2 == AckCounting::Bytes)
                .map(|c| (f64::from(c.1), c.4.useless))
                .collect(),
        });
    }
    LinePlot {
        title: "Useless ACKs per transaction with 20 ms think times (bytes counting)",
        x_label: "transactions in flight (burst)",
        y_label: "useless ACKs per transaction",
        log_x: true,
        log_y: false,
        series: useless_series,
        hlines: vec![],
        vlines: vec![],
    }
    .draw(&dir.join("rr_abc_useless.png"))?;

    let mut md = String::new();
    let _ = writeln!(md, "{}\n", method(lab.o, load));
    let _ = writeln!(md, "**The report's table** (one connection, netperf TCP_RR's burst, ACK policy `linux`, the sender counting bytes, no think time):\n");
    let _ = writeln!(md, "| burst | transactions/s | client cycles/txn | server cycles/txn | segments/txn | pure ACKs/txn | useless ACKs/txn | clean |");
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---|");
    for (b, r) in &table {
        let _ = writeln!(
            md,
            "| {b} | {:.0} | {:.0} | {:.0} | {:.2} | {:.3} | {:.3} | {} |",
            r.tps, r.client_cycles, r.server_cycles, r.segments, r.pure_acks, r.useless, r.clean
        );
    }
    let _ = writeln!(md, "\n**ACK counting crossed with the receiver's policy**, with and without a 20 ms think time between an answer and the request it lets start (bursts 2, 32 and 256):\n");
    let _ = writeln!(md, "| think time | burst | sender counting | receiver policy | transactions/s | client cycles/txn | server cycles/txn | pure ACKs/txn | useless ACKs/txn | clean |");
    let _ = writeln!(md, "|---|---:|---|---|---:|---:|---:|---:|---:|---|");
    for (g, b, s, p, r) in &cross {
        let _ = writeln!(
            md,
            "| {} | {b} | {s} | {p} | {:.0} | {:.0} | {:.0} | {:.3} | {:.3} | {} |",
            if *g > 0 { "20 ms" } else { "none" },
            r.tps,
            r.client_cycles,
            r.server_cycles,
            r.pure_acks,
            r.useless,
            r.clean
        );
    }
    let find = |g: u64, b: u32, p: &str| {
        cross
            .iter()
            .find(|c| c.0 == g && c.1 == b && c.2 == AckCounting::Bytes && c.3 == p)
            .map(|c| &c.4)
    };
    let u = |g, b, p| find(g, b, p).map_or(0.0, |r| r.useless);
    let spread = |g: u64, b: u32| {
        let v: Vec<f64> = cross
            .iter()
            .filter(|c| c.0 == g && c.1 == b && c.3 == "linux")
            .map(|c| c.4.tps)
            .collect();
        let (lo, hi) = v
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        if v.is_empty() {
            0.0
        } else {
            hi / lo.max(1.0)
        }
    };
    let _ = writeln!(
        md,
        "\nHow to read it. A pure ACK is useless when a data segment of the same connection follows it within one delayed-ACK time: the answer or the next request would have carried it. Useless ACKs per transaction, sender counting bytes: back to back (no think time) at burst 2, {:.3} with `linux`, {:.3} with `every:1`, {:.3} with `rfc5681`; with 20 ms think times at burst 2, {:.3}, {:.3} and {:.3}. Linux enters quickack mode after an idle time and `every:1` acknowledges every segment, so with think times they acknowledge each answer at once, and the next request, 20 ms later and within the delayed-ACK time, would have carried that ACK: the report's \"it is easy to model a situation when we send lots of useless ACKs\". The sender's ACK counting only shapes slow start, and request/response windows stay within the initial window: across the three counting rules with the `linux` receiver, the fastest over the slowest transactions/s is {:.2}x at burst 256 without think time and {:.2}x with it (on a shared machine, differences of this order are run-to-run noise unless the rounds agree). {}",
        u(0, 2, "linux"),
        u(0, 2, "every:1"),
        u(0, 2, "rfc5681"),
        u(20_000_000, 2, "linux"),
        u(20_000_000, 2, "every:1"),
        u(20_000_000, 2, "rfc5681"),
        spread(0, 256),
        spread(20_000_000, 256),
        clean_note(&table.iter().map(|t| &t.1).chain(cross.iter().map(|c| &c.4)).collect::<Vec<_>>()),
    );
    let _ = writeln!(
        md,
        "\n![transactions/s by burst](lab/rr_abc_bursts.png)\n![useless ACKs](lab/rr_abc_useless.png)"
    );
    write_fragment(dir, "rr_abc", &md)?;
    print!("{md}");
    Ok(())
}

/// The bulk sweep's segments per unit at `ns`, from `flush_sweep.csv`.
fn bulk_seg_per_unit(dir: &Path, ns: u64) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join("flush_sweep.csv")).ok()?;
    text.lines().skip(1).find_map(|l| {
        let mut f = l.split(',');
        let w: u64 = f.next()?.parse().ok()?;
        (w == ns).then(|| f.next()?.parse().ok()).flatten()
    })
}

fn flush(lab: &Lab<'_>, load: &str) -> Result<()> {
    let dir = &lab.o.out;
    let windows = [0u64, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000];
    let conns = [1u32, 10, 50, 200];
    let pb = progress((windows.len() * conns.len()) as u64, "rr: field report 004");
    let mut rows = Vec::new();
    for &c in &conns {
        for &w in &windows {
            let r = lab.measure(c, 1, AckCounting::Bytes, AckPolicy::linux(), 0, Some(w))?;
            pb.inc(1);
            rows.push((c, w, r));
        }
    }
    pb.finish_and_clear();
    let csv: Vec<Vec<String>> = rows
        .iter()
        .map(|(c, w, r)| {
            vec![
                c.to_string(),
                w.to_string(),
                format!("{:.0}", r.tps),
                format!("{:.2}", r.p50_us),
                format!("{:.2}", r.p99_us),
                format!("{:.0}", r.server_cycles),
                r.clean.to_string(),
            ]
        })
        .collect();
    write_csv(
        &dir.join("rr_flush.csv"),
        &[
            "conns",
            "flush_ns",
            "tps",
            "p50_us",
            "p99_us",
            "server_cycles_per_txn",
            "clean",
        ],
        &csv,
    )?;
    let series = |f: fn(&Row) -> f64| -> Vec<Series> {
        conns
            .iter()
            .map(|&c| Series {
                name: format!("{c} connections"),
                points: rows
                    .iter()
                    .filter(|r| r.0 == c)
                    .map(|r| ((r.1 as f64).max(500.0), f(&r.2)))
                    .collect(),
            })
            .collect()
    };
    LinePlot {
        title: "RR transactions/s against the GRO flush window (0 plotted at 500 ns)",
        x_label: "flush window (ns)",
        y_label: "transactions/s",
        log_x: true,
        log_y: true,
        series: series(|r| r.tps),
        hlines: vec![],
        vlines: vec![],
    }
    .draw(&dir.join("rr_flush_tps.png"))?;
    LinePlot {
        title: "RR p99 latency against the GRO flush window (0 plotted at 500 ns)",
        x_label: "flush window (ns)",
        y_label: "p99 latency (us)",
        log_x: true,
        log_y: true,
        series: series(|r| r.p99_us),
        hlines: vec![],
        vlines: vec![],
    }
    .draw(&dir.join("rr_flush_p99.png"))?;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{} One transaction in flight per connection.\n",
        method(lab.o, load)
    );
    let _ = writeln!(md, "| connections | flush ns | transactions/s | vs window 0 | p50 µs | p99 µs | server cycles/txn | bulk seg/unit at this window | clean |");
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut falls = Vec::new();
    for &c in &conns {
        let base = rows
            .iter()
            .find(|r| r.0 == c && r.1 == 0)
            .map_or(0.0, |r| r.2.tps);
        let mut fell: Option<u64> = None;
        for (_, w, r) in rows.iter().filter(|r| r.0 == c) {
            let ratio = if base > 0.0 { r.tps / base } else { 0.0 };
            if fell.is_none() && ratio < 0.9 {
                fell = Some(*w);
            }
            let bulk = bulk_seg_per_unit(dir, *w).map_or("-".into(), |x| format!("{x:.2}"));
            let _ = writeln!(
                md,
                "| {c} | {w} | {:.0} | {ratio:.2}x | {:.2} | {:.2} | {:.0} | {bulk} | {} |",
                r.tps, r.p50_us, r.p99_us, r.server_cycles, r.clean
            );
        }
        falls.push((c, fell));
    }
    let fall_text: Vec<String> = falls
        .iter()
        .map(|(c, f)| match f {
            Some(w) => format!("{c} connections: at {w} ns"),
            None => format!("{c} connections: at no window up to 100 µs"),
        })
        .collect();
    let why = if falls.iter().all(|f| f.1.is_none()) {
        "No connection count loses 10% at any window up to 100 µs. Every request and answer is one segment with PSH, and a PSH segment ends its GRO run at once (as Linux's `tcp_gro_receive` flushes on PSH), so in a poll-mode loop the window holds nothing back in request/response traffic, and the bulk gain in segments per unit (from the bulk sweep above, which has no PSH) costs transactions nothing. The report's lost QPS came from what `gro_flush_timeout` does to interrupt deferral in NAPI (the next poll waits for the timer instead of the interrupt), which a polling stack does not have."
    } else {
        "A PSH segment ends its GRO run at once (as Linux's `tcp_gro_receive` flushes on PSH), so the window should hold no single-segment request back; a fall marked here is either noise on a shared machine (check the rounds) or a cost of GRO's bookkeeping at that window, not a held request."
    };
    let _ = writeln!(
        md,
        "\nWhere transactions/s first falls 10% below window 0: {}. {why} {}",
        fall_text.join("; "),
        clean_note(&rows.iter().map(|r| &r.2).collect::<Vec<_>>())
    );
    let _ = writeln!(
        md,
        "\n![transactions/s](lab/rr_flush_tps.png)\n![p99](lab/rr_flush_p99.png)"
    );
    write_fragment(dir, "rr_flush", &md)?;
    print!("{md}");
    Ok(())
}

fn gro(lab: &Lab<'_>, load: &str) -> Result<()> {
    let dir = &lab.o.out;
    let shapes = [(1u32, 1u32), (1, 16), (64, 1), (64, 16)];
    let pb = progress(shapes.len() as u64 * 2, "rr: field report 003");
    let mut rows = Vec::new();
    for (c, b) in shapes {
        let on = lab.measure(
            c,
            b,
            AckCounting::Bytes,
            AckPolicy::linux(),
            0,
            Some(FLUSH_NS),
        )?;
        pb.inc(1);
        let off = lab.measure(c, b, AckCounting::Bytes, AckPolicy::linux(), 0, None)?;
        pb.inc(1);
        rows.push((c, b, on, off));
    }
    pb.finish_and_clear();
    let csv: Vec<Vec<String>> = rows
        .iter()
        .map(|(c, b, on, off)| {
            vec![
                c.to_string(),
                b.to_string(),
                format!("{:.0}", on.tps),
                format!("{:.0}", off.tps),
                format!("{:.0}", on.server_cycles),
                format!("{:.0}", off.server_cycles),
                format!("{:.0}", on.client_cycles),
                format!("{:.0}", off.client_cycles),
            ]
        })
        .collect();
    write_csv(
        &dir.join("rr_gro.csv"),
        &[
            "conns",
            "burst",
            "tps_gro",
            "tps_no_gro",
            "server_cycles_gro",
            "server_cycles_no_gro",
            "client_cycles_gro",
            "client_cycles_no_gro",
        ],
        &csv,
    )?;
    let mut md = String::new();
    let _ = writeln!(md, "{}\n", method(lab.o, load));
    let _ = writeln!(md, "| connections | burst | txn/s GRO on | txn/s GRO off | on/off | server cycles/txn on | off | client cycles/txn on | off |");
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (c, b, on, off) in &rows {
        let _ = writeln!(
            md,
            "| {c} | {b} | {:.0} | {:.0} | {:.2}x | {:.0} | {:.0} | {:.0} | {:.0} |",
            on.tps,
            off.tps,
            if off.tps > 0.0 { on.tps / off.tps } else { 0.0 },
            on.server_cycles,
            off.server_cycles,
            on.client_cycles,
            off.client_cycles
        );
    }
    let _ = writeln!(md, "\nAt burst 1 every request and every answer is one segment with PSH, which ends its GRO run at once: GRO has nothing to merge, and the on/off column is what the GRO stage costs when it cannot gain (the report's \"TSO/GSO over loopback eats 5-10 MB/s\", on the receive side). At burst 16 a connection's writes leave several to a segment and back to back, so there is something to merge. Ratios within the rounds' spread are noise on a shared machine. {}", clean_note(&rows.iter().flat_map(|r| [&r.2, &r.3]).collect::<Vec<_>>()));
    write_fragment(dir, "rr_gro", &md)?;
    print!("{md}");
    Ok(())
}
