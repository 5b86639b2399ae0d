//! Progress bars for every command that runs longer than a few seconds (`weir-bench`,
//! `weir-lab`, `weir-gen` with a duration). Drawn on stderr with indicatif, which hides
//! them when stderr is not a terminal, so logs, pipes and CI output stay clean.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps labelled `msg`, redrawn at least every 200 ms (so the elapsed
/// time moves while one long step runs).
pub fn bar(len: u64, msg: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    if let Ok(s) = ProgressStyle::with_template(
        "{msg:24} [{elapsed_precise}] {wide_bar} {pos}/{len} (eta {eta})",
    ) {
        pb.set_style(s);
    }
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

/// A bar over a run of `secs` seconds: the caller sets the position in milliseconds.
pub fn timed(secs: f64, msg: &str) -> ProgressBar {
    let pb = ProgressBar::new((secs * 1000.0).max(1.0) as u64);
    if let Ok(s) = ProgressStyle::with_template(
        "{msg:24} [{elapsed_precise}] {wide_bar} {percent}% (eta {eta})",
    ) {
        pb.set_style(s);
    }
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}
