//! How weir's figures reach a person: the live line printed once a second, the totals on
//! exit, and the JSON object written with `--stats-json`.

use serde_json::{json, Map, Value};
use stack::stats::Stats;

/// One connection's digest, recorded when it closes (`--digest`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestRecord {
    /// The flow as `src:port -> dst:port`.
    pub flow: String,
    /// weir's port of the connection.
    pub local_port: u16,
    /// Bytes received in order.
    pub bytes: u64,
    /// SHA-256 of those bytes, lower-case hex.
    pub sha256: String,
    /// How it ended: `closed` or `reset` (or `open` when weir stopped first).
    pub end: &'static str,
    /// The receive queue (and so the core) that served it, where the program records it
    /// (weir-sink does).
    pub queue: Option<u16>,
}

/// Rates between two snapshots `dt` seconds apart, as one terminal line.
pub fn live_line(elapsed_s: f64, prev: &Stats, cur: &Stats, dt: f64) -> String {
    let dt = if dt > 0.0 { dt } else { 1.0 };
    let bytes = cur
        .tcp
        .bytes_in_order
        .saturating_sub(prev.tcp.bytes_in_order);
    let segs = cur.gro.segments_in.saturating_sub(prev.gro.segments_in);
    let units = cur.gro.units_out.saturating_sub(prev.gro.units_out);
    let data_segs = cur
        .tcp
        .segments_in_order
        .saturating_sub(prev.tcp.segments_in_order);
    let acks = cur.ack.data_acks().saturating_sub(prev.ack.data_acks());
    let drops = cur.total_drops().saturating_sub(prev.total_drops());
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    format!(
        "{:>6.1}s  {:>7.3} Gbit/s  {:>9.0} seg/s  {:>5.1} seg/unit  {:>8.0} ACK/s  {:>5.1} seg/ACK  drops {:<6} conns {}",
        elapsed_s,
        bytes as f64 * 8.0 / dt / 1e9,
        segs as f64 / dt,
        ratio(segs, units),
        acks as f64 / dt,
        ratio(data_segs, acks),
        drops,
        cur.conns_open,
    )
}

fn named<I, K>(it: I) -> Value
where
    I: Iterator<Item = (K, u64)>,
    K: Into<String>,
{
    let mut m = Map::new();
    for (k, v) in it {
        m.insert(k.into(), json!(v));
    }
    Value::Object(m)
}

/// The counters of one core (or the total) as a JSON object.
pub fn stats_json(s: &Stats) -> Value {
    let busy_fraction = if s.lp.iterations == 0 {
        0.0
    } else {
        s.lp.busy_iterations as f64 / s.lp.iterations as f64
    };
    let i = &s.impair;
    let impairment = json!({
        "offered": i.offered, "dropped": i.dropped, "duplicated": i.duplicated,
        "reordered": i.reordered, "corrupted": i.corrupted, "overflow": i.overflow,
        "delivered": i.delivered,
    });
    let cycles_per_segment = if s.gro.segments_in == 0 {
        0.0
    } else {
        s.lp.busy_cycles as f64 / s.gro.segments_in as f64
    };
    // The send side's counters (one object of its own: json! has a recursion limit).
    let t = &s.tcp;
    let send = json!({
        "tcp_bytes_written": t.bytes_written,
        "tcp_bytes_sent": t.bytes_sent,
        "tcp_data_segments_sent": t.data_segments_sent,
        "tcp_retransmits": t.retransmits,
        "tcp_bytes_retransmitted": t.bytes_retransmitted,
        "tcp_rto_timeouts": t.rto_timeouts,
        "tcp_fast_recoveries": t.fast_recoveries,
        "tcp_tlp_probes": t.tlp_probes,
        "tcp_tlp_skipped": t.tlp_skipped,
        "tcp_tlp_loss_repaired": t.tlp_loss_repaired,
        "tcp_rack_reorder_timeouts": t.rack_reorder_timeouts,
        "tcp_window_probes": t.window_probes,
        "tcp_sack_blocks_refused": t.sack_blocks_refused,
        "tcp_reneging": t.reneging,
        "tcp_send_alloc_failures": t.send_alloc_failures,
        "tcp_send_budget_limited": t.send_budget_limited,
        "tcp_active_opens": t.active_opens,
        "tcp_active_open_failures": t.active_open_failures,
        "acks_piggybacked": s.ack.piggybacked,
        "acks_useless": s.ack.useless,
    });
    let mut v = json!({
        "rx_packets": s.pipeline.rx_packets,
        "rx_bytes": s.pipeline.rx_bytes,
        "gro_segments_in": s.gro.segments_in,
        "gro_units_out": s.gro.units_out,
        "gro_segments_per_unit": s.segments_per_unit(),
        "gro_held_runs": s.gro_held_runs,
        "tcp_bytes_in_order": s.tcp.bytes_in_order,
        "tcp_segments_in_order": s.tcp.segments_in_order,
        "tcp_ooo_segments": s.tcp.ooo_segments,
        "tcp_duplicate_segments": s.tcp.duplicate_segments,
        "acks_sent": s.ack.total(),
        "data_acks_sent": s.ack.data_acks(),
        "segments_per_ack": s.segments_per_ack(),
        "acks_by_reason": named(s.ack.iter()),
        "flushes_by_reason": named(s.gro.flushes_by_name()),
        "drops_by_reason": named(s.drops_by_reason()),
        "drops_total": s.total_drops(),
        "connections_opened": s.tcp.conns_opened,
        "connections_closed": s.tcp.conns_closed,
        "connections_reset": s.tcp.conns_reset,
        "connections_refused": s.tcp.conns_refused,
        "connections_open": s.conns_open,
        "syn_cookies_sent": s.tcp.syn_cookies_sent,
        "challenge_acks": s.tcp.challenge_acks,
        "arp_replies": s.pipeline.arp_replies,
        "icmp_echo_replies": s.pipeline.icmp_echo_replies,
        "nd_adverts": s.pipeline.nd_adverts,
        "tx_packets": s.lp.tx_packets,
        "tx_dropped": s.lp.tx_dropped,
        "tx_backlog_peak": s.lp.tx_backlog_peak,
        "loop_iterations": s.lp.iterations,
        "loop_busy_iterations": s.lp.busy_iterations,
        "loop_busy_fraction": busy_fraction,
        "loop_busy_ns": s.lp.busy_ns,
        "loop_stack_ns": s.lp.stack_ns,
        "busy_cycles_per_segment": cycles_per_segment,
        "ooo_bytes_held": s.ooo_bytes_held,
        "mbufs_in_use": s.lp.mbufs_in_use,
        "impairment": impairment,
    });
    if let (Value::Object(m), Value::Object(send)) = (&mut v, send) {
        m.extend(send);
    }
    v
}

/// The whole `--stats-json` object: totals at the top level, per-core objects under
/// `per_core`, digests under `digests`, plus `mbufs_in_use_at_exit` and the settings.
pub fn final_json(
    total: &Stats,
    per_core: &[Stats],
    digests: &[DigestRecord],
    mbufs_in_use_at_exit: u64,
    duration_s: f64,
    settings: Value,
) -> Value {
    let mut v = stats_json(total);
    if let Value::Object(m) = &mut v {
        m.insert("mbufs_in_use_at_exit".into(), json!(mbufs_in_use_at_exit));
        m.insert("duration_s".into(), json!(duration_s));
        m.insert(
            "per_core".into(),
            Value::Array(per_core.iter().map(stats_json).collect()),
        );
        m.insert(
            "digests".into(),
            Value::Array(
                digests
                    .iter()
                    .map(|d| {
                        json!({"flow": d.flow, "local_port": d.local_port, "bytes": d.bytes,
                               "sha256": d.sha256, "end": d.end, "queue": d.queue})
                    })
                    .collect(),
            ),
        );
        m.insert("settings".into(), settings);
    }
    v
}

/// The totals printed on exit, a few lines a person can read.
pub fn summary(total: &Stats, mbufs_in_use_at_exit: u64, duration_s: f64) -> String {
    let gbps = if duration_s > 0.0 {
        total.tcp.bytes_in_order as f64 * 8.0 / duration_s / 1e9
    } else {
        0.0
    };
    let mut s = format!(
        "weir-sink totals over {duration_s:.1}s: {} bytes in order ({gbps:.3} Gbit/s), {} frames received\n",
        total.tcp.bytes_in_order, total.pipeline.rx_packets
    );
    s += &format!(
        "  GRO: {} segments in, {} units out ({:.2} seg/unit)\n",
        total.gro.segments_in,
        total.gro.units_out,
        total.segments_per_unit()
    );
    s += &format!(
        "  ACKs: {} sent ({} for data, {:.2} seg/ACK)\n",
        total.ack.total(),
        total.ack.data_acks(),
        total.segments_per_ack()
    );
    let t = &total.tcp;
    s += &format!(
        "  sent: {} data segments ({} bytes of {} written), {} ACKs piggybacked on them, {} pure ACKs data followed within a delayed-ACK time\n",
        t.data_segments_sent, t.bytes_sent, t.bytes_written, total.ack.piggybacked, total.ack.useless
    );
    s += &format!(
        "  loss: {} retransmits ({} bytes), {} fast recoveries, {} RTOs, {} tail loss probes, {} zero-window probes\n",
        t.retransmits, t.bytes_retransmitted, t.fast_recoveries, t.rto_timeouts, t.tlp_probes, t.window_probes
    );
    s += &format!(
        "  connections: {} opened, {} closed, {} reset, {} still open\n",
        total.tcp.conns_opened, total.tcp.conns_closed, total.tcp.conns_reset, total.conns_open
    );
    s += &format!(
        "  drops: {}; mbufs in use at exit: {mbufs_in_use_at_exit}",
        total.total_drops()
    );
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    /// Every send-side counter of `TcpStats` and `AckStats::piggybacked` is in the JSON
    /// under its own key, beside the receive side's keys (which keep their names).
    #[test]
    fn stats_json_carries_the_send_counters() {
        let mut s = Stats::default();
        let t = &mut s.tcp;
        t.bytes_written = 1;
        t.bytes_sent = 2;
        t.data_segments_sent = 3;
        t.retransmits = 4;
        t.bytes_retransmitted = 5;
        t.rto_timeouts = 6;
        t.fast_recoveries = 7;
        t.tlp_probes = 8;
        t.tlp_skipped = 9;
        t.tlp_loss_repaired = 10;
        t.rack_reorder_timeouts = 11;
        t.window_probes = 12;
        t.sack_blocks_refused = 13;
        t.reneging = 14;
        t.send_alloc_failures = 15;
        t.active_opens = 16;
        t.active_open_failures = 17;
        t.send_budget_limited = 19;
        t.bytes_in_order = 99;
        s.ack.piggybacked = 18;
        let v = stats_json(&s);
        let keys = [
            "tcp_bytes_written",
            "tcp_bytes_sent",
            "tcp_data_segments_sent",
            "tcp_retransmits",
            "tcp_bytes_retransmitted",
            "tcp_rto_timeouts",
            "tcp_fast_recoveries",
            "tcp_tlp_probes",
            "tcp_tlp_skipped",
            "tcp_tlp_loss_repaired",
            "tcp_rack_reorder_timeouts",
            "tcp_window_probes",
            "tcp_sack_blocks_refused",
            "tcp_reneging",
            "tcp_send_alloc_failures",
            "tcp_active_opens",
            "tcp_active_open_failures",
            "acks_piggybacked",
            "tcp_send_budget_limited",
        ];
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(v[k], json!(i + 1), "{k}");
        }
        assert_eq!(v["tcp_bytes_in_order"], json!(99));
        let text = summary(&s, 0, 1.0);
        assert!(
            text.contains("3 data segments (2 bytes of 1 written), 18 ACKs piggybacked"),
            "{text}"
        );
        assert!(
            text.contains("4 retransmits (5 bytes), 7 fast recoveries, 6 RTOs, 8 tail loss probes, 12 zero-window probes"),
            "{text}"
        );
    }
}
