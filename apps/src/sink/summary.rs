//! weir-sink's end: the cores' results merged into totals, the summary printed and the
//! totals written as JSON (`--stats-json`).

use anyhow::{Context, Result};
use serde_json::json;
use stack::stats::Stats;

use super::args::SinkArgs;
use super::core_loop::CoreResult;
use crate::capture::CaptureTotals;
use crate::report::{self, DigestRecord};

/// The cores' results merged: the totals, each core's stats, every digest.
pub(crate) struct Merged {
    /// All cores' counters, `conns_open` the connections still open at the stop.
    pub(crate) total: Stats,
    /// Each core's counters, by queue.
    pub(crate) per_core: Vec<Stats>,
    /// Every core's per-connection digests.
    pub(crate) digests: Vec<DigestRecord>,
}

/// Merges the cores' results, sorted by queue; the first core that failed is the error.
pub(crate) fn merge(mut per_core: Vec<(u16, Result<CoreResult>)>) -> Result<Merged> {
    per_core.sort_by_key(|(q, _)| *q);
    let mut total = Stats::default();
    let mut stats = Vec::new();
    let mut digests = Vec::new();
    let mut open_at_stop = 0;
    for (q, r) in per_core {
        let r = r.with_context(|| format!("queue {q}"))?;
        total.merge(&r.stats);
        open_at_stop += r.open_at_stop;
        stats.push(r.stats);
        digests.extend(r.digests.into_iter().map(|d| DigestRecord {
            queue: Some(q),
            ..d
        }));
    }
    total.conns_open = open_at_stop;
    Ok(Merged {
        total,
        per_core: stats,
        digests,
    })
}

/// Prints the summary (and the capture's line), and writes `--stats-json`.
pub(crate) fn finish(
    args: &SinkArgs,
    m: &Merged,
    in_use: dpdk::InUse,
    elapsed: f64,
    pcap: Option<CaptureTotals>,
) -> Result<()> {
    println!("{}", report::summary(&m.total, in_use.used as u64, elapsed));
    if in_use.untouched > 0 {
        println!(
            "  mbufs the driver kept in its receive rings at close (never filled): {}",
            in_use.untouched
        );
    }
    if let (Some(t), Some(path)) = (pcap, &args.pcap) {
        println!(
            "  capture: {} frames ({} bytes) written to {}, {} left out (pcap_dropped)",
            t.written,
            t.bytes,
            path.display(),
            t.dropped
        );
    }
    if let Some(path) = &args.stats_json {
        let v = report::final_json(
            &m.total,
            &m.per_core,
            &m.digests,
            in_use.used as u64,
            elapsed,
            args.settings_json(),
        );
        let mut v = v;
        if let serde_json::Value::Object(m) = &mut v {
            m.insert(
                "mbufs_kept_by_driver_at_exit".into(),
                json!(in_use.untouched),
            );
        }
        if let (Some(t), serde_json::Value::Object(m)) = (pcap, &mut v) {
            for (k, n) in t.json_fields() {
                m.insert(k.into(), json!(n));
            }
        }
        let text = serde_json::to_string_pretty(&v)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
