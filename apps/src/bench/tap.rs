//! `weir-bench tap`: the kernel's traffic over net_tap received by weir-sink, side by side
//! with a bare DPDK loop that only receives and frees (`weir-sink --drop`).
//!
//! A TCP sender needs a receiver that acknowledges, so the bare loop cannot be fed the
//! same TCP stream: it is fed the kernel's UDP (`iperf -u`, 1472-byte datagrams, as fast
//! as the kernel sends, to a static neighbor entry) — the tap path's own capacity. weir is
//! fed `iperf -c -P 8` TCP. Each row reports payload Gbit/s and the fraction of weir's
//! loop iterations that did any work (busy), measured only over the seconds in which
//! data flowed (from weir-sink's `--stats-log`), both as a share of iterations and of time (busy
//! iterations' TSC time over wall time). The target: weir's busy fraction stays
//! under 50% while the kernel sender is saturated, i.e. weir is not the bottleneck.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

const TAP: &str = "weirtap0";
const WEIR_IP: &str = "198.18.0.1";
const PEER_IP: &str = "198.18.0.2";

/// A network namespace removed (with everything in it) on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn create() -> Result<Netns> {
        let name = format!("weir-bench-{}-{}", std::process::id(), nanos());
        sh("ip", &["netns", "add", &name]).context("creating a network namespace (needs root)")?;
        let ns = Netns { name };
        sh("ip", &["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Ok(out) = Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
        {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000)
        .unwrap_or(0)
}

fn sh(cmd: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("running {cmd} (installed? run scripts/setup.sh)"))?;
    if !out.status.success() {
        bail!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What one case measured over the seconds in which data flowed.
#[derive(Debug, Clone)]
struct CaseResult {
    gbit_s: f64,
    busy_fraction: f64,
    busy_time_fraction: f64,
    stack_time_fraction: f64,
    segments_per_unit: f64,
    segments_per_ack: f64,
}

fn sink_path() -> Result<PathBuf> {
    let p = std::env::current_exe()?.with_file_name("weir-sink");
    if !p.exists() {
        bail!(
            "{} not found: build it (cargo build --release -p apps)",
            p.display()
        );
    }
    Ok(p)
}

fn wait_for_tap(ns: &Netns, sink: &mut Child, log: &Path) -> Result<()> {
    let t0 = Instant::now();
    while sh("ip", &["-n", &ns.name, "link", "show", TAP]).is_err() {
        if let Ok(Some(st)) = sink.try_wait() {
            bail!(
                "weir-sink exited ({st}) before creating {TAP}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        if t0.elapsed() > Duration::from_secs(60) {
            bail!("weir-sink did not create {TAP} within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    sh(
        "ip",
        &[
            "-n",
            &ns.name,
            "addr",
            "add",
            &format!("{PEER_IP}/24"),
            "dev",
            TAP,
        ],
    )?;
    sh("ip", &["-n", &ns.name, "link", "set", TAP, "up"])?;
    Ok(())
}

fn run_case(drop_mode: bool, secs: u64, dir: &Path, run: usize) -> Result<CaseResult> {
    let ns = Netns::create()?;
    let tag = if drop_mode { "drop" } else { "weir" };
    let log = dir.join(format!("{tag}-{run}.log"));
    let stats_log = dir.join(format!("{tag}-{run}.jsonl"));
    let mut args: Vec<String> = vec![
        "netns".into(),
        "exec".into(),
        ns.name.clone(),
        sink_path()?.display().to_string(),
        "--quiet".into(),
        "--stats-log".into(),
        stats_log.display().to_string(),
        "--port".into(),
        "5001".into(),
    ];
    if drop_mode {
        args.push("--drop".into());
    }
    let mut sink = Command::new("ip")
        .args(&args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("starting weir-sink")?;
    let result = (|| -> Result<()> {
        wait_for_tap(&ns, &mut sink, &log)?;
        let t = secs.to_string();
        if drop_mode {
            // No ARP answers from a bare loop: a static neighbor entry for weir's MAC.
            let mac = wait_for_mac(&log)?;
            sh(
                "ip",
                &[
                    "-n",
                    &ns.name,
                    "neigh",
                    "replace",
                    WEIR_IP,
                    "lladdr",
                    &mac,
                    "dev",
                    TAP,
                    "nud",
                    "permanent",
                ],
            )?;
            sh(
                "ip",
                &[
                    "netns", "exec", &ns.name, "iperf", "-u", "-c", WEIR_IP, "-b", "40000M", "-l",
                    "1472", "-P", "8", "-t", &t,
                ],
            )?;
        } else {
            let t0 = Instant::now();
            while sh(
                "ip",
                &["netns", "exec", &ns.name, "ping", "-c1", "-W1", WEIR_IP],
            )
            .is_err()
            {
                if t0.elapsed() > Duration::from_secs(30) {
                    bail!("weir does not answer ping");
                }
            }
            sh(
                "ip",
                &[
                    "netns", "exec", &ns.name, "iperf", "-c", WEIR_IP, "-p", "5001", "-P", "8",
                    "-t", &t,
                ],
            )?;
        }
        // Let one more stats line land after the traffic stops.
        std::thread::sleep(Duration::from_millis(1500));
        Ok(())
    })();
    let _ = Command::new("kill")
        .args(["-INT", &sink.id().to_string()])
        .status();
    let _ = sink.wait();
    result?;
    window(&stats_log, drop_mode)
}

/// weir-sink's MAC from its start-up line (`... mac 02:..:..`), waiting for the line.
fn wait_for_mac(log: &Path) -> Result<String> {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        // Either `mac=02:..` (the tracing start-up line) or `mac 02:..`.
        let words: Vec<&str> = text
            .split(|c: char| c.is_whitespace() || c == '=' || c == '"')
            .filter(|w| !w.is_empty())
            .collect();
        let found = words.windows(2).find_map(|w| {
            let m = w[1].trim_matches(|c: char| !c.is_ascii_hexdigit() && c != ':');
            let mac_like = m.len() == 17 && m.split(':').count() == 6;
            (w[0] == "mac" && mac_like).then(|| m.to_string())
        });
        if let Some(m) = found {
            return Ok(m);
        }
        if t0.elapsed() > Duration::from_secs(30) {
            bail!("weir-sink did not print its MAC within 30 s: {text}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Rates over the span of `--stats-log` lines in which payload arrived.
fn window(path: &Path, drop_mode: bool) -> Result<CaseResult> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let key = if drop_mode {
        "rx_bytes"
    } else {
        "tcp_bytes_in_order"
    };
    let get = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let moving: Vec<usize> = (1..lines.len())
        .filter(|&i| get(&lines[i], key) > get(&lines[i - 1], key))
        .collect();
    let (Some(&first), Some(&last)) = (moving.first(), moving.last()) else {
        bail!("no data arrived (see {})", path.display());
    };
    let (a, b) = (&lines[first - 1], &lines[last]);
    let d = |k: &str| get(b, k) - get(a, k);
    let dt = d("elapsed_s");
    let iters = d("loop_iterations");
    Ok(CaseResult {
        gbit_s: d(key) * 8.0 / dt.max(1e-9) / 1e9,
        busy_fraction: if iters > 0.0 {
            d("loop_busy_iterations") / iters
        } else {
            0.0
        },
        busy_time_fraction: d("loop_busy_ns") / (dt.max(1e-9) * 1e9),
        stack_time_fraction: d("loop_stack_ns") / (dt.max(1e-9) * 1e9),
        segments_per_unit: if d("gro_units_out") > 0.0 {
            d("gro_segments_in") / d("gro_units_out")
        } else {
            0.0
        },
        segments_per_ack: if d("data_acks_sent") > 0.0 {
            d("tcp_segments_in_order") / d("data_acks_sent")
        } else {
            0.0
        },
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Runs `runs` rounds of both cases for `secs` seconds each and prints medians.
pub fn run(json_out: bool, secs: u64, runs: usize) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("weir-bench-tap-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut weir = Vec::new();
    let mut bare = Vec::new();
    let pb = crate::progress::bar(2 * runs.max(1) as u64, "weir-bench tap");
    for r in 0..runs.max(1) {
        pb.set_message(format!("tap round {}/{}: weir", r + 1, runs.max(1)));
        weir.push(run_case(false, secs, &dir, r)?);
        pb.inc(1);
        pb.set_message(format!("tap round {}/{}: bare", r + 1, runs.max(1)));
        bare.push(run_case(true, secs, &dir, r)?);
        pb.inc(1);
    }
    pb.finish_and_clear();
    let _ = std::fs::remove_dir_all(&dir);
    let m = |v: &[CaseResult], f: fn(&CaseResult) -> f64| median(v.iter().map(f).collect());
    let rows = [
        ("weir-sink", "kernel TCP, iperf -P 8", &weir),
        ("bare-loop", "kernel UDP, iperf -u -P 8", &bare),
    ];
    if json_out {
        for (name, traffic, v) in rows {
            println!(
                "{}",
                json!({"impl": name, "traffic": traffic, "gbit_s": m(v, |c| c.gbit_s),
                       "busy_fraction": m(v, |c| c.busy_fraction),
                       "busy_time_fraction": m(v, |c| c.busy_time_fraction),
                       "stack_time_fraction": m(v, |c| c.stack_time_fraction),
                       "segments_per_unit": m(v, |c| c.segments_per_unit),
                       "segments_per_ack": m(v, |c| c.segments_per_ack), "runs": v.len()})
            );
        }
    } else {
        println!(
            "weir-bench tap: medians of {} rounds of {secs} s",
            weir.len()
        );
        println!(
            "{:<10} {:<26} {:>9} {:>11} {:>11} {:>11} {:>9} {:>8}",
            "impl",
            "traffic",
            "Gbit/s",
            "busy iters",
            "busy time",
            "stack time",
            "seg/unit",
            "seg/ACK"
        );
        for (name, traffic, v) in rows {
            println!(
                "{:<10} {:<26} {:>9.3} {:>11.3} {:>11.3} {:>11.3} {:>9.1} {:>8.1}",
                name,
                traffic,
                m(v, |c| c.gbit_s),
                m(v, |c| c.busy_fraction),
                m(v, |c| c.busy_time_fraction),
                m(v, |c| c.stack_time_fraction),
                m(v, |c| c.segments_per_unit),
                m(v, |c| c.segments_per_ack)
            );
        }
        let bf = m(&weir, |c| c.busy_fraction);
        let bt = m(&weir, |c| c.busy_time_fraction);
        let st = m(&weir, |c| c.stack_time_fraction);
        println!(
            "weir's lcore while the kernel sends TCP as fast as it can: busy in {:.1}% of its loop iterations and {:.1}% of its time; weir's own processing (the stack, without the tap PMD's read()/write() syscalls, in which the kernel does its part of the work) {:.1}% of its time (target < 50%): {}",
            bf * 100.0,
            bt * 100.0,
            st * 100.0,
            if st < 0.5 { "the stack is not the bottleneck" } else { "the stack IS the bottleneck" }
        );
    }
    Ok(())
}
