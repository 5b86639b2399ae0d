//! `--metrics ADDR:PORT`: the stats in the Prometheus text format (version 0.0.4).
//!
//! The cores never see this module. They already publish a [`Stats`] snapshot a few times
//! a second to the printer thread through a `crossbeam-queue`; the printer hands each one
//! to [`Metrics::publish`], which keeps the latest per core. A control thread answers
//! `GET /metrics` on a plain `std::net::TcpListener` (HTTP/1.1, one request per
//! connection) by rendering those snapshots.
//!
//! Every series comes from the same figures as the `--stats-json` object
//! ([`crate::report::stats_json`]), so the two always agree; the table [`METRICS`] names
//! each JSON key's metric. Names are prefixed `weir_`; counters end in `_total`; each has
//! one series per core (`core="0"`, ...) and one for the total over cores (no `core`
//! label). The reason-keyed objects become labels: `weir_acks_total{reason="stretch"}`,
//! `weir_gro_flushes_total{reason="timer"}`, `weir_drops_total{reason="parse.tcp_bad_checksum"}`.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::Value;
use stack::stats::Stats;

use crate::capture::CaptureObserver;
use crate::report;

/// Counter or gauge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only grows while weir runs.
    Counter,
    /// Goes up and down (a level or a ratio).
    Gauge,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// One JSON key of [`report::stats_json`] and the metric it becomes.
#[derive(Clone, Copy, Debug)]
pub struct MetricDef {
    /// The key in the JSON object.
    pub json: &'static str,
    /// The metric name (with `weir_`).
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// The `# HELP` text.
    pub help: &'static str,
    /// For an object of `reason: count`, the label name; `None` for a number.
    pub label: Option<&'static str>,
}

const fn c(json: &'static str, name: &'static str, help: &'static str) -> MetricDef {
    MetricDef {
        json,
        name,
        kind: Kind::Counter,
        help,
        label: None,
    }
}

const fn g(json: &'static str, name: &'static str, help: &'static str) -> MetricDef {
    MetricDef {
        json,
        name,
        kind: Kind::Gauge,
        help,
        label: None,
    }
}

const fn r(json: &'static str, name: &'static str, help: &'static str) -> MetricDef {
    MetricDef {
        json,
        name,
        kind: Kind::Counter,
        help,
        label: Some("reason"),
    }
}

/// Every metric weir exports, by the JSON key it comes from. A JSON key missing here is
/// exported as a gauge named `weir_<key>`; `drops_total` is left out because it is the sum
/// of `weir_drops_total` over its reasons.
pub const METRICS: &[MetricDef] = &[
    c(
        "rx_packets",
        "weir_rx_packets_total",
        "Frames received from the port.",
    ),
    c(
        "rx_bytes",
        "weir_rx_bytes_total",
        "Bytes of frames received (whole frames).",
    ),
    c(
        "gro_segments_in",
        "weir_gro_segments_in_total",
        "TCP segments that entered GRO (every valid TCP segment when GRO is on).",
    ),
    c(
        "gro_units_out",
        "weir_gro_units_out_total",
        "Coalesced units GRO handed to TCP.",
    ),
    g(
        "gro_segments_per_unit",
        "weir_gro_segments_per_unit",
        "GRO aggregation ratio: segments in per unit out.",
    ),
    g(
        "gro_held_runs",
        "weir_gro_held_runs",
        "GRO runs held at the snapshot.",
    ),
    c(
        "tcp_bytes_in_order",
        "weir_tcp_bytes_in_order_total",
        "Payload bytes delivered in order to the application.",
    ),
    c(
        "tcp_segments_in_order",
        "weir_tcp_segments_in_order_total",
        "Data segments delivered in order (counting segments inside coalesced units).",
    ),
    c(
        "tcp_ooo_segments",
        "weir_tcp_ooo_segments_total",
        "Segments that arrived out of order.",
    ),
    c(
        "tcp_duplicate_segments",
        "weir_tcp_duplicate_segments_total",
        "Segments whose data was already received.",
    ),
    c(
        "acks_sent",
        "weir_acks_sent_total",
        "Segments weir sent for TCP (ACKs, SYN-ACKs, RSTs), all reasons.",
    ),
    c(
        "data_acks_sent",
        "weir_data_acks_sent_total",
        "ACKs sent in answer to data.",
    ),
    g(
        "segments_per_ack",
        "weir_segments_per_ack",
        "In-order data segments per data ACK.",
    ),
    r(
        "acks_by_reason",
        "weir_acks_total",
        "Segments weir sent for TCP, by reason.",
    ),
    r(
        "flushes_by_reason",
        "weir_gro_flushes_total",
        "GRO flushes, by reason.",
    ),
    r(
        "drops_by_reason",
        "weir_drops_total",
        "Frames or segments dropped, by stage and reason.",
    ),
    c(
        "connections_opened",
        "weir_connections_opened_total",
        "Connections established.",
    ),
    c(
        "connections_closed",
        "weir_connections_closed_total",
        "Connections closed in order.",
    ),
    c(
        "connections_reset",
        "weir_connections_reset_total",
        "Connections ended by a RST.",
    ),
    c(
        "connections_refused",
        "weir_connections_refused_total",
        "Connection attempts refused (table full).",
    ),
    g(
        "connections_open",
        "weir_connections_open",
        "Connections open at the snapshot.",
    ),
    c(
        "syn_cookies_sent",
        "weir_syn_cookies_sent_total",
        "SYN-ACKs sent with a SYN cookie.",
    ),
    c(
        "challenge_acks",
        "weir_challenge_acks_total",
        "Challenge ACKs sent (RFC 5961).",
    ),
    c(
        "tcp_bytes_written",
        "weir_tcp_bytes_written_total",
        "Bytes the application queued for sending (send and send_bufs).",
    ),
    c(
        "tcp_bytes_sent",
        "weir_tcp_bytes_sent_total",
        "Payload bytes sent for the first time (retransmissions not counted).",
    ),
    c(
        "tcp_data_segments_sent",
        "weir_tcp_data_segments_sent_total",
        "Data segments sent for the first time (each carries the current ACK).",
    ),
    c(
        "tcp_retransmits",
        "weir_tcp_retransmits_total",
        "Data segments retransmitted.",
    ),
    c(
        "tcp_bytes_retransmitted",
        "weir_tcp_bytes_retransmitted_total",
        "Payload bytes retransmitted.",
    ),
    c(
        "tcp_rto_timeouts",
        "weir_tcp_rto_timeouts_total",
        "Retransmission timer expiries (RFC 6298).",
    ),
    c(
        "tcp_fast_recoveries",
        "weir_tcp_fast_recoveries_total",
        "Fast recoveries entered (duplicate ACKs, SACK or RACK).",
    ),
    c(
        "tcp_tlp_probes",
        "weir_tcp_tlp_probes_total",
        "Tail loss probes sent (RFC 8985).",
    ),
    c(
        "tcp_tlp_skipped",
        "weir_tcp_tlp_skipped_total",
        "Probe timeouts that sent no probe (RFC 8985 section 7.3).",
    ),
    c(
        "tcp_tlp_loss_repaired",
        "weir_tcp_tlp_loss_repaired_total",
        "Tail loss probes whose ACK showed they repaired a loss.",
    ),
    c(
        "tcp_rack_reorder_timeouts",
        "weir_tcp_rack_reorder_timeouts_total",
        "RACK reordering timer expiries (RFC 8985 section 6.3).",
    ),
    c(
        "tcp_window_probes",
        "weir_tcp_window_probes_total",
        "Zero-window (persist) probes sent.",
    ),
    c(
        "tcp_sack_blocks_refused",
        "weir_tcp_sack_blocks_refused_total",
        "SACK blocks ignored as invalid (RFC 2018 section 8).",
    ),
    c(
        "tcp_reneging",
        "weir_tcp_reneging_total",
        "ACKs that stopped at data the peer had SACKed (possible reneging).",
    ),
    c(
        "tcp_send_alloc_failures",
        "weir_tcp_send_alloc_failures_total",
        "Writes the buffer pool cut short.",
    ),
    c(
        "tcp_send_budget_limited",
        "weir_tcp_send_budget_limited_total",
        "Writes the core's send budget (snd_core_slices) cut short.",
    ),
    c(
        "tcp_active_opens",
        "weir_tcp_active_opens_total",
        "Active opens started (connect).",
    ),
    c(
        "tcp_active_open_failures",
        "weir_tcp_active_open_failures_total",
        "Active opens that failed (refused, or SYN retries spent).",
    ),
    c(
        "acks_piggybacked",
        "weir_acks_piggybacked_total",
        "ACKs owed that a data segment carried instead of a frame of their own.",
    ),
    c(
        "acks_useless",
        "weir_acks_useless_total",
        "Pure ACKs that a data segment of the same connection followed within one delayed-ACK time.",
    ),
    c("arp_replies", "weir_arp_replies_total", "ARP replies sent."),
    c(
        "icmp_echo_replies",
        "weir_icmp_echo_replies_total",
        "ICMP and ICMPv6 echo replies sent.",
    ),
    c(
        "nd_adverts",
        "weir_nd_adverts_total",
        "IPv6 neighbor advertisements sent.",
    ),
    c(
        "tx_packets",
        "weir_tx_packets_total",
        "Frames handed to the port for transmission.",
    ),
    c(
        "tx_dropped",
        "weir_tx_dropped_total",
        "Frames the port refused (TX queue full) with the transmit backlog full, freed.",
    ),
    c(
        "loop_iterations",
        "weir_loop_iterations_total",
        "Poll-loop iterations.",
    ),
    c(
        "loop_busy_iterations",
        "weir_loop_busy_iterations_total",
        "Poll-loop iterations that received or sent anything.",
    ),
    g(
        "loop_busy_fraction",
        "weir_loop_busy_fraction",
        "Busy iterations per iteration.",
    ),
    g(
        "busy_cycles_per_segment",
        "weir_busy_cycles_per_segment",
        "TSC cycles of busy iterations per GRO input segment.",
    ),
    g(
        "ooo_bytes_held",
        "weir_ooo_bytes_held",
        "Out-of-order bytes held at the snapshot.",
    ),
    MetricDef {
        json: "impairment",
        name: "weir_impairment_frames_total",
        kind: Kind::Counter,
        help: "Frames through --impair, by outcome (offered, delivered, dropped, reordered, duplicated, corrupted, overflow).",
        label: Some("outcome"),
    },
    c(
        "pcap_written",
        "weir_pcap_written_total",
        "Frames written to the --pcap file.",
    ),
    c(
        "pcap_dropped",
        "weir_pcap_dropped_total",
        "Frames left out of the --pcap capture (queue full, pool empty, file full).",
    ),
];

/// JSON keys that have no metric of their own: `drops_total` is the sum of
/// `weir_drops_total`, and `mbufs_in_use` is written by [`render`] itself (one pool shared
/// by the cores, so the total is not a sum).
const SKIPPED: &[&str] = &["drops_total", "mbufs_in_use"];

/// The latest snapshot of each core, shared by the publisher and the HTTP thread.
#[derive(Debug)]
struct State {
    cores: Vec<Option<Stats>>,
}

/// The metrics endpoint: its state and its thread.
#[derive(Debug)]
pub struct Metrics {
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

/// Static facts shown as `weir_info`.
#[derive(Clone, Debug)]
pub struct Info {
    /// weir's version.
    pub version: String,
    /// DPDK's version string.
    pub dpdk: String,
}

impl Metrics {
    /// Listens on `addr` and answers requests from a new thread, for `cores` cores.
    pub fn start(
        addr: SocketAddr,
        cores: usize,
        info: Info,
        capture: Option<CaptureObserver>,
    ) -> Result<Metrics> {
        let listener = TcpListener::bind(addr)
            .with_context(|| format!("--metrics {addr}: cannot listen there"))?;
        let addr = listener.local_addr().unwrap_or(addr);
        listener
            .set_nonblocking(true)
            .context("--metrics: setting the listener non-blocking")?;
        let state = Arc::new(Mutex::new(State {
            cores: vec![None; cores],
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let state = state.clone();
            let stop = stop.clone();
            let started = Instant::now();
            std::thread::Builder::new()
                .name("weir-metrics".into())
                .spawn(move || serve(&listener, &state, &stop, &info, capture.as_ref(), started))
                .context("starting the metrics thread")?
        };
        Ok(Metrics {
            state,
            stop,
            thread: Some(thread),
            addr,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Records core `core`'s latest snapshot (called by the thread that drains the cores'
    /// queue, never by a core).
    pub fn publish(&self, core: u16, s: &Stats) {
        if let Ok(mut st) = self.state.lock() {
            if let Some(slot) = st.cores.get_mut(usize::from(core)) {
                *slot = Some(s.clone());
            }
        }
    }

    /// Stops answering.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    listener: &TcpListener,
    state: &Mutex<State>,
    stop: &AtomicBool,
    info: &Info,
    capture: Option<&CaptureObserver>,
    started: Instant,
) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, peer)) => {
                if let Err(e) = answer(conn, state, info, capture, started) {
                    tracing::debug!(%peer, "metrics request failed: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                tracing::warn!("metrics: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn answer(
    mut conn: TcpStream,
    state: &Mutex<State>,
    info: &Info,
    capture: Option<&CaptureObserver>,
    started: Instant,
) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16 * 1024 {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&req);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let cores = state.lock().map(|s| s.cores.clone()).unwrap_or_default();
            let text = render(&cores, info, capture, started.elapsed().as_secs_f64());
            ("200 OK", "text/plain; version=0.0.4; charset=utf-8", text)
        }
        ("GET" | "HEAD", "/") => (
            "200 OK",
            "text/plain; charset=utf-8",
            "weir-sink: metrics at /metrics\n".to_owned(),
        ),
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain", "not found\n".to_owned()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "only GET\n".to_owned(),
        ),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if method != "HEAD" {
        out.push_str(&body);
    }
    conn.write_all(out.as_bytes())?;
    conn.flush()
}

/// Escapes a label value (`\`, `"` and newlines, as the text format requires).
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(u8::from(*b).to_string()),
        _ => None,
    }
}

/// The whole exposition: per-core series (`core="N"`) for cores that published at least
/// one snapshot, and the total over them (no `core` label).
pub fn render(
    cores: &[Option<Stats>],
    info: &Info,
    capture: Option<&CaptureObserver>,
    uptime_s: f64,
) -> String {
    let mut total = Stats::default();
    for s in cores.iter().flatten() {
        total.merge(s);
    }
    let mut objs: Vec<(Option<usize>, Value)> = Vec::new();
    for (i, s) in cores.iter().enumerate() {
        if let Some(s) = s {
            objs.push((Some(i), report::stats_json(s)));
        }
    }
    objs.push((None, report::stats_json(&total)));
    if let Some(cap) = capture {
        let per_core = cap.dropped_per_core();
        let t = cap.totals();
        for (core, v) in objs.iter_mut() {
            if let Value::Object(m) = v {
                match core {
                    Some(i) => {
                        m.insert(
                            "pcap_dropped".into(),
                            per_core.get(*i).copied().unwrap_or(0).into(),
                        );
                    }
                    None => {
                        m.insert("pcap_dropped".into(), t.dropped.into());
                        m.insert("pcap_written".into(), t.written.into());
                    }
                }
            }
        }
    }

    let mut out = String::new();
    let _ = writeln!(out, "# HELP weir_info weir-sink's version and DPDK's.");
    let _ = writeln!(out, "# TYPE weir_info gauge");
    let _ = writeln!(
        out,
        "weir_info{{version=\"{}\",dpdk=\"{}\"}} 1",
        label_value(&info.version),
        label_value(&info.dpdk)
    );
    let _ = writeln!(
        out,
        "# HELP weir_uptime_seconds Seconds since the metrics endpoint started."
    );
    let _ = writeln!(out, "# TYPE weir_uptime_seconds gauge");
    let _ = writeln!(out, "weir_uptime_seconds {uptime_s:.3}");
    let _ = writeln!(
        out,
        "# HELP weir_mbufs_in_use Mbufs of the receive pool in use at the snapshot."
    );
    let _ = writeln!(out, "# TYPE weir_mbufs_in_use gauge");
    for (i, s) in cores.iter().enumerate() {
        if let Some(s) = s {
            let _ = writeln!(
                out,
                "weir_mbufs_in_use{{core=\"{i}\"}} {}",
                s.lp.mbufs_in_use
            );
        }
    }
    // The pool is shared by the cores: each core's figure is the pool's; the total is one.
    let pool = cores
        .iter()
        .flatten()
        .map(|s| s.lp.mbufs_in_use)
        .max()
        .unwrap_or(0);
    let _ = writeln!(out, "weir_mbufs_in_use {pool}");

    // Every key of the JSON object, in the table's order, then any the table lacks.
    let keys: Vec<String> = match objs.last() {
        Some((_, Value::Object(m))) => m.keys().cloned().collect(),
        _ => Vec::new(),
    };
    // (json key, metric name, kind, help, label)
    let mut defs: Vec<(String, String, Kind, String, Option<&str>)> = METRICS
        .iter()
        .filter(|d| keys.iter().any(|k| k == d.json))
        .map(|d| {
            (
                d.json.to_owned(),
                d.name.to_owned(),
                d.kind,
                d.help.to_owned(),
                d.label,
            )
        })
        .collect();
    let mut extra: Vec<&String> = keys
        .iter()
        .filter(|k| !METRICS.iter().any(|d| d.json == k.as_str()) && !SKIPPED.contains(&k.as_str()))
        .collect();
    extra.sort();
    for k in extra {
        defs.push((
            k.clone(),
            format!("weir_{k}"),
            Kind::Gauge,
            format!("The JSON stat {k} (see docs/stats.md)."),
            None,
        ));
    }

    for (json, name, kind, help, label) in &defs {
        let mut lines = String::new();
        for (core, v) in &objs {
            let core_label = core.map(|i| format!("core=\"{i}\""));
            let Some(val) = v.get(json) else { continue };
            match (*label, val) {
                (Some(label), Value::Object(m)) => {
                    for (reason, n) in m {
                        let Some(n) = number(n) else { continue };
                        let mut labels = vec![format!("{label}=\"{}\"", label_value(reason))];
                        labels.extend(core_label.clone());
                        let _ = writeln!(lines, "{name}{{{}}} {n}", labels.join(","));
                    }
                }
                (None, v) => {
                    let Some(n) = number(v) else { continue };
                    match &core_label {
                        Some(l) => {
                            let _ = writeln!(lines, "{name}{{{l}}} {n}");
                        }
                        None => {
                            let _ = writeln!(lines, "{name} {n}");
                        }
                    }
                }
                _ => {}
            }
        }
        if lines.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {}", kind.as_str());
        out.push_str(&lines);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> Info {
        Info {
            version: "0.1.0".into(),
            dpdk: "DPDK 22.11".into(),
        }
    }

    #[test]
    fn every_family_once_with_help_and_type() {
        let mut a = Stats::default();
        a.pipeline.rx_packets = 7;
        a.lp.mbufs_in_use = 3;
        let b = a.clone();
        let text = render(&[Some(a), Some(b)], &info(), None, 1.0);
        let mut seen = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap_or("");
                assert!(seen.insert(name.to_owned()), "family {name} twice");
            }
        }
        assert!(text.contains("weir_rx_packets_total{core=\"0\"} 7\n"));
        assert!(text.contains("weir_rx_packets_total{core=\"1\"} 7\n"));
        assert!(text.contains("weir_rx_packets_total 14\n"));
        assert!(text.contains("weir_mbufs_in_use 3\n"));
        assert!(text.contains("weir_acks_total{reason=\"stretch\",core=\"0\"} 0\n"));
        assert!(text.contains("# TYPE weir_gro_flushes_total counter\n"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
