//! weir-sink's printer thread: once a second it merges the cores' latest snapshots into
//! the live line and the `--stats-log` line, publishes them to the metrics endpoint, and
//! prints each closed connection's digest.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration as StdDuration;

use crossbeam_queue::ArrayQueue;
use serde_json::json;
use stack::stats::Stats;

use crate::metrics::Metrics;
use crate::report::{self, DigestRecord};

/// What the printer reads and where it writes.
pub(crate) struct PrinterCfg {
    /// The cores' stats snapshots, tagged by queue.
    pub(crate) snapshots: Arc<ArrayQueue<(u16, Stats)>>,
    /// Closed connections' digests.
    pub(crate) closed: Arc<ArrayQueue<DigestRecord>>,
    /// Queues (one snapshot slot each).
    pub(crate) queues: usize,
    /// No live line (`--quiet`).
    pub(crate) quiet: bool,
    /// The `--stats-log` file.
    pub(crate) log: Option<std::fs::File>,
    /// The metrics endpoint (`--metrics`).
    pub(crate) metrics: Option<Arc<Metrics>>,
    /// When the cores started (the lines' `elapsed`).
    pub(crate) started: std::time::Instant,
}

/// The running printer thread.
pub(crate) struct Printer {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Printer {
    /// Starts the printer thread.
    pub(crate) fn spawn(cfg: PrinterCfg) -> Printer {
        let PrinterCfg {
            snapshots,
            closed,
            queues: n,
            quiet,
            mut log,
            metrics,
            started,
        } = cfg;
        let stop = Arc::new(AtomicBool::new(false));
        let pstop = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut latest: Vec<Stats> = vec![Stats::default(); n];
            let mut prev = Stats::default();
            let mut last = std::time::Instant::now();
            while !pstop.load(Ordering::Relaxed) {
                std::thread::sleep(StdDuration::from_millis(100));
                print_closed(&closed);
                while let Some((q, s)) = snapshots.pop() {
                    if let Some(m) = &metrics {
                        m.publish(q, &s);
                    }
                    if let Some(slot) = latest.get_mut(usize::from(q)) {
                        *slot = s;
                    }
                }
                let dt = last.elapsed().as_secs_f64();
                if dt >= 1.0 {
                    let mut total = Stats::default();
                    for s in &latest {
                        total.merge(s);
                    }
                    let elapsed = started.elapsed().as_secs_f64();
                    if !quiet {
                        println!("{}", report::live_line(elapsed, &prev, &total, dt));
                    }
                    if let Some(f) = log.as_mut() {
                        use std::io::Write;
                        let mut v = report::stats_json(&total);
                        if let serde_json::Value::Object(m) = &mut v {
                            m.insert("elapsed_s".into(), json!(elapsed));
                        }
                        let _ = writeln!(f, "{v}");
                    }
                    prev = total;
                    last = std::time::Instant::now();
                }
            }
            print_closed(&closed);
        });
        Printer { stop, thread }
    }

    /// Stops the thread after it has printed every digest still queued.
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

/// Prints the closed connections' digests queued so far.
fn print_closed(closed: &ArrayQueue<DigestRecord>) {
    while let Some(d) = closed.pop() {
        println!(
            "connection {} {}: {} bytes, sha256 {}",
            d.flow, d.end, d.bytes, d.sha256
        );
    }
}
