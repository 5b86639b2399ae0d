//! weir's receive-path lab: the experiments that turn the field reports
//! (docs/reference/field-reports.md) into figures anyone can rerun (`scripts/lab/all.sh`, results in
//! `docs/lab.md`).
//!
//! - [`flush`]: the GRO flush-timeout sweep (field report 004);
//! - [`psh`]: quickack on PSH at an MSS boundary (field report 002);
//! - [`abc`]: ACK counting against ACK policies, with and without gaps (field report 000);
//! - [`rr`]: the field reports 000, 003 and 004 as transactions (`weir-bench rr` on the
//!   ring pair).
//!
//! Arrival-pattern experiments run on the virtual clock ([`sim`]): deterministic, with a
//! modelled link rate. Cycles per segment need real cycles: [`ring`] runs weir-gen and the
//! receiver on two lcores over a ring pair.

pub mod abc;
pub mod flush;
pub mod plot;
pub mod psh;
pub mod ring;
pub mod rr;
pub mod sim;

use std::path::Path;

/// A progress bar of `len` steps with `msg` (drawn on stderr; hidden when not a terminal).
pub fn progress(len: u64, msg: &str) -> indicatif::ProgressBar {
    crate::progress::bar(len, msg)
}

/// The machine's load averages (`/proc/loadavg`), noted beside measured figures.
pub fn load_note() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The median of `v` (0 when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Writes a Markdown fragment for `docs/lab.md` (stitched in by `scripts/lab/all.sh`).
pub fn write_fragment(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let p = dir.join(format!("{name}.md"));
    std::fs::write(&p, text).map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))
}
