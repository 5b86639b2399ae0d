//! Field report 000: senders counting ACKs `per-ack`, `abc:2` (RFC 3465) and `bytes` against
//! ACK policies `every:1`, `linux` and `every:8`, sending continuously or in bursts with
//! 20 ms gaps (the gaps make delayed-ACK effects visible, as the report's thread says), on
//! the virtual clock: time to reach full rate, throughput, segments and ACKs.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use stack::ack::AckPolicy;
use stack::gro::GroConfig;
use stack::time::Duration;

use super::plot::{write_csv, LinePlot, Series};
use super::sim::{self, SimConfig, SimResult};
use super::{progress, write_fragment};
use crate::gen::{AckCounting, GenConfig, Interleave};

const FLOWS: u32 = 4;

/// How to read the table, with the figures it explains taken from `rows`.
fn reading(rows: &[(AckCounting, &str, bool, SimResult)]) -> String {
    let find = |s: AckCounting, p: &str, g: bool| {
        rows.iter()
            .find(|r| r.0 == s && r.1 == p && r.2 == g)
            .map(|r| &r.3)
    };
    let ramp = |s, p| find(s, p, false).map_or(0.0, |r| r.ramp_mean_ns / 1e6);
    let gap8 = find(AckCounting::PerAck, "every:8", true);
    format!(
        "How to read it. **seg/ACK is per wire segment, decisions are per GRO unit**: with \
GRO on, weir makes one ACK decision per coalesced unit (as Linux does per GRO'd skb), and \
at 1 Gbit/s a train's segments arrive 12.3 µs apart, so a 20 µs window pairs them: \
`every:1` then means one ACK per unit, about 2 segments per ACK, the same as `linux` \
(which ACKs at once a unit of two or more full segments). **`every:8` with gaps stalls on \
the sender's retransmission timer**: a burst's last 1-7 segments wait for the delayed-ACK \
limit (500 ms, RFC 5681 §4.2), the sender's RTO (200 ms minimum) fires first (the `sender \
RTOs` column: {} for the `per-ack` sender), and the sender restarts from one segment, \
where fewer than 8 segments in flight wait for the timer again: the four flows move {:.1} Mbit/s. Continuous senders never leave a tail unacknowledged for \
long, so there `every:8` costs the ramp: time to full rate {:.1} ms for `per-ack` (one \
segment of window per ACK) against {:.1} ms with `every:1`, {:.1} ms for `abc:2` and \
{:.1} ms for `bytes` (counting acknowledged bytes, as Linux does for stretch ACKs): \
the field report's point that delayed and stretch ACKs slow senders that count ACKs, not bytes.",
        gap8.map_or(0, |r| r.gen.rtos),
        gap8.map_or(0.0, |r| r.goodput_bps / 1e6),
        ramp(AckCounting::PerAck, "every:8"),
        ramp(AckCounting::PerAck, "every:1"),
        ramp(AckCounting::Abc(2), "every:8"),
        ramp(AckCounting::Bytes, "every:8"),
    )
}

/// Runs the 18 cases and writes `abc.csv`, `abc_ramp.png`, `abc_acks.png` and `abc.md`.
pub fn run(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let senders = [AckCounting::PerAck, AckCounting::Abc(2), AckCounting::Bytes];
    let policies = ["every:1", "linux", "every:8"];
    let gaps = [None, Some(Duration::from_millis(20))];
    let pb = progress(18, "ack counting");
    let mut rows: Vec<(AckCounting, &str, bool, SimResult)> = Vec::new();
    for gap in gaps {
        for s in senders {
            for pol in policies {
                let policy: AckPolicy = pol.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
                let cfg = SimConfig {
                    gen: GenConfig {
                        flows: FLOWS,
                        ack_counting: s,
                        interleave: Interleave::Train(4),
                        burst_bytes: gap.map(|_| 256 * 1024),
                        gap: gap.unwrap_or(Duration::ZERO),
                        ..GenConfig::default()
                    },
                    policy,
                    gro: Some(GroConfig {
                        flush_ns: Duration::from_micros(20),
                        ..GroConfig::default()
                    }),
                    rcv_buf: 1 << 20,
                    link_bps: 1_000_000_000,
                    prop: Duration::from_micros(50),
                    warmup: Duration::from_millis(1),
                    measure: Duration::from_millis(400),
                };
                let r = sim::run(&cfg, |_| pb.tick())?;
                pb.inc(1);
                rows.push((s, pol, gap.is_some(), r));
            }
        }
    }
    pb.finish_and_clear();
    let csv: Vec<Vec<String>> = rows
        .iter()
        .map(|(s, p, g, r)| {
            vec![
                s.to_string(),
                p.to_string(),
                if *g { "20ms" } else { "none" }.into(),
                format!("{:.3}", r.ramp_mean_ns / 1e6),
                format!("{:.1}", r.goodput_bps / 1e6),
                r.segments.to_string(),
                r.acks.to_string(),
                format!(
                    "{:.2}",
                    if r.acks > 0 {
                        r.segments as f64 / r.acks as f64
                    } else {
                        0.0
                    }
                ),
                r.gen.rtos.to_string(),
            ]
        })
        .collect();
    write_csv(
        &dir.join("abc.csv"),
        &[
            "sender",
            "ack_policy",
            "gaps",
            "time_to_full_rate_ms",
            "goodput_mbit_s",
            "segments",
            "acks",
            "segments_per_ack",
            "sender_rtos",
        ],
        &csv,
    )?;
    let series = |f: &dyn Fn(&SimResult) -> f64| -> Vec<Series> {
        let mut v = Vec::new();
        for gap in [false, true] {
            for s in senders {
                v.push(Series {
                    name: format!("{s}{}", if gap { ", 20 ms gaps" } else { "" }),
                    points: rows
                        .iter()
                        .filter(|r| r.0 == s && r.2 == gap)
                        .map(|r| {
                            let x =
                                policies.iter().position(|p| *p == r.1).unwrap_or(0) as f64 + 1.0;
                            (x, f(&r.3))
                        })
                        .collect(),
                });
            }
        }
        v
    };
    LinePlot {
        title: "Time to full rate (ms) by ACK policy: 1 = every:1, 2 = linux, 3 = every:8",
        x_label: "ACK policy",
        y_label: "ms to full window (mean per ramp)",
        log_x: false,
        log_y: false,
        series: series(&|r| r.ramp_mean_ns / 1e6),
        hlines: vec![],
        vlines: vec![],
    }
    .draw(&dir.join("abc_ramp.png"))?;
    LinePlot {
        title: "ACKs in 400 ms by ACK policy: 1 = every:1, 2 = linux, 3 = every:8",
        x_label: "ACK policy",
        y_label: "ACKs",
        log_x: false,
        log_y: true,
        series: series(&|r| r.acks as f64),
        hlines: vec![],
        vlines: vec![],
    }
    .draw(&dir.join("abc_acks.png"))?;
    let mut md = String::new();
    let _ = writeln!(md, "Model: virtual clock, {FLOWS} flows in trains of 4 segments on a 1 Gbit/s link (field report 000's), 50 µs one-way delay, GRO 20 µs, receive buffer 1 MiB; continuous, or 256 KiB bursts per flow separated by 20 ms gaps (each burst restarts from the initial window, RFC 5681 §4.1). 400 ms measured from the start (the ramp is the point). Time to full rate: mean over ramps of the time from a flow's first segment to its window no longer limiting it.\n");
    let _ = writeln!(md, "| sender | ACK policy | gaps | ms to full rate | goodput Mbit/s | segments | ACKs | seg/ACK | sender RTOs |");
    let _ = writeln!(md, "|---|---|---|---:|---:|---:|---:|---:|---:|");
    for c in &csv {
        let _ = writeln!(md, "| {} |", c.join(" | "));
    }
    let _ = writeln!(md, "\n{}", reading(&rows));
    let _ = writeln!(
        md,
        "\n![time to full rate](lab/abc_ramp.png)\n![ACKs](lab/abc_acks.png)"
    );
    write_fragment(dir, "abc", &md)?;
    print!("{md}");
    Ok(())
}
