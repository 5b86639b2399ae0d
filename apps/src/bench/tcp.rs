//! `weir-bench tcp [--json]`: the TCP receive and send paths on the in-memory buffers,
//! timed with `std::time::Instant` (the criterion benches in `benches/benches/tcp.rs`
//! measure the receive side's two things).
//!
//! The receive side:
//! - `tcp_receive_run45` / `tcp_receive_run1`: in-order receive plus the ACK decision
//!   (`Tcp::handle_segment`) per wire segment, for bursts of 45 full segments arriving as
//!   one coalesced run (GRO on) or as 45 runs of one (GRO off), under the `linux` policy;
//!   with the ACKs those decisions produced per wire segment (`segments_per_ack`).
//! - `tcp_ack_build_no_sack` / `tcp_ack_build_sack3`: one ACK built from the flow's
//!   template (`AckTemplate::build`: copy, patch, checksums in software) into a buffer.
//!
//! The send side, on [`Fixture::sender`](testkit::tcp::Fixture::sender) (a connection
//! whose peer window and cwnd never limit it; the peer's ACKs are built outside the
//! timed part and carry timestamps echoing the sender's):
//!
//! - `tcp_send_segment`: ns per data segment in `Tcp::poll_tx` (free the buffers the last
//!   ACK released, cut the segment, build its frame from the template with the ACK it
//!   carries, copy the payload in (`VecBuf` chains nothing), checksums in software, arm
//!   the timers). Each round queues [`SEND_ROUND`] segments with `send` (untimed: the
//!   application's copy), times the one `poll_tx` that sends them all, and acknowledges
//!   them with one ACK (untimed).
//! - `tcp_ack_rx_cumulative`: ns per ACK in `Tcp::handle_segment` on the sender, each ACK
//!   acknowledging two more segments of a flight of [`SEND_ROUND`] (RTT sample, cwnd
//!   growth, freeing the acknowledged buffers into the batch the next `poll_tx` frees).
//! - `tcp_ack_rx_sack1` .. `tcp_ack_rx_sack3`: ns per ACK carrying 1, 2 or 3 SACK blocks:
//!   a flight of [`SACK_ROUND`] segments with 1, 2 or 3 one-segment holes; the segment
//!   after each hole arrives first (untimed), then every timed ACK reports two more
//!   segments and carries one block per hole (RFC 2018 §4's order: the block just grown
//!   first), as the scoreboard and RACK see them while the holes stay open (the sender
//!   enters recovery on the way). Each round is a fresh connection, so recovery in one
//!   round does not shrink the next one's cwnd.
//!
//! Each send-side row also prints its ns over the receive side's ns per segment of the
//! same run (`vs_receive_run45`, `vs_receive_run1`): what one sent segment or one
//! processed ACK costs in received segments.
//!
//! Each measurement runs many iterations, is repeated 5 times, and the median is printed.

use anyhow::{anyhow, ensure};
use stack::ack::AckPolicy;
use stack::buf::PacketBuf;
use stack::driver::Burst;
use stack::mem::{VecBuf, VecPool};
use stack::segment::Segment;
use stack::seq::SeqNumber;
use stack::time::Duration;
use stack::wire::SackBlock;
use std::hint::black_box;
use std::time::Instant as StdInstant;
use testkit::tcp::{ack_parts, Fixture as Rx, Fixture as Tx, MSS, PEER_PORT};

/// Wire segments per burst: one 64 KiB run of 1448-byte segments.
const BURST: u16 = 45;
/// Repetitions of each measurement; the median is reported.
const REPEATS: usize = 5;
/// Data segments per round of `tcp_send_segment` and `tcp_ack_rx_cumulative`: what one
/// `poll_tx` sends, a quarter of a 256-frame burst.
pub const SEND_ROUND: usize = 64;
/// Data segments in flight per round of the SACK rows: room for three holes 16 segments
/// apart.
pub const SACK_ROUND: usize = 48;
/// The peer's RTT on the virtual clock (between a round's data and its ACKs).
const SEND_RTT: Duration = Duration::from_micros(50);

/// One repetition of a send-side measurement: its ns per segment or per ACK.
type Measure = fn() -> anyhow::Result<f64>;

/// One result row.
struct Row {
    bench: &'static str,
    unit: &'static str,
    ns: f64,
    segments_per_ack: Option<f64>,
    /// Send-side rows: ns over the receive rows' ns per segment (runs of 45, runs of 1).
    vs_receive: Option<(f64, f64)>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// ns per wire segment in `handle_segment`, and wire segments per ACK.
fn receive(run: u16, bursts: usize) -> anyhow::Result<(f64, f64)> {
    let mut rx = Rx::new(AckPolicy::linux()).map_err(anyhow::Error::msg)?;
    let mut ns = 0u128;
    let mut acks = 0usize;
    for _ in 0..bursts {
        let segs: Vec<Segment<VecBuf>> = (0..BURST / run).map(|_| rx.next(run)).collect();
        let now = rx.now;
        let t = StdInstant::now();
        for mut s in segs {
            rx.tcp.handle_segment(now, &mut s);
        }
        ns += t.elapsed().as_nanos();
        acks += rx.drain();
    }
    let wire = (bursts * usize::from(BURST)) as f64;
    Ok((ns as f64 / wire, wire / acks.max(1) as f64))
}

/// Queues `segs` full segments with `send`, sends them with one `poll_tx` and moves the
/// clock one RTT (all untimed); returns the first one's sequence number and the ns
/// `poll_tx` took.
fn send_round(tx: &mut Tx, segs: usize) -> anyhow::Result<(SeqNumber, u128)> {
    let id = tx.id();
    let base = tx
        .tcp
        .info(id)
        .ok_or_else(|| anyhow!("no connection"))?
        .snd_nxt;
    let chunk = vec![0u8; segs * usize::from(MSS)];
    let n = tx
        .tcp
        .send(tx.now, id, &chunk, &mut tx.pool)
        .map_err(|e| anyhow!("send: {e:?}"))?;
    ensure!(n == chunk.len(), "send took {n} of {} bytes", chunk.len());
    let mut out = Burst::new();
    let now = tx.now;
    let t = StdInstant::now();
    let k = tx.tcp.poll_tx(now, &mut tx.pool, &mut out, false);
    let ns = t.elapsed().as_nanos();
    ensure!(
        k == segs,
        "poll_tx sent {k} frames, {segs} data segments expected"
    );
    tx.sent(out);
    tx.now += SEND_RTT;
    Ok((base, ns))
}

/// ns per data segment in `poll_tx` (`tcp_send_segment`).
fn send_segments(rounds: usize) -> anyhow::Result<f64> {
    let mut tx = Tx::sender().map_err(anyhow::Error::msg)?;
    let id = tx.id();
    let mut ns = 0u128;
    for _ in 0..rounds {
        let (base, t) = send_round(&mut tx, SEND_ROUND)?;
        ns += t;
        tx.ack_to(base + SEND_ROUND * usize::from(MSS));
        let _ = tx.tcp.events().count();
    }
    let info = tx.tcp.info(id).ok_or_else(|| anyhow!("no connection"))?;
    ensure!(
        info.snd_una == info.snd_nxt && info.snd_queued == 0,
        "every segment sent was acknowledged: {info:?}"
    );
    let segs = (rounds * SEND_ROUND) as u64;
    let st = tx.tcp.stats();
    ensure!(
        st.data_segments_sent == segs && st.retransmits == 0,
        "{segs} segments, no retransmission: {st:?}"
    );
    Ok(ns as f64 / segs as f64)
}

/// ns per ACK acknowledging two segments (`tcp_ack_rx_cumulative`).
fn ack_cumulative(rounds: usize) -> anyhow::Result<f64> {
    let mut tx = Tx::sender().map_err(anyhow::Error::msg)?;
    let id = tx.id();
    let mss = usize::from(MSS);
    let mut ns = 0u128;
    let mut acks = 0usize;
    for _ in 0..rounds {
        let (base, _) = send_round(&mut tx, SEND_ROUND)?;
        let segs: Vec<Segment<VecBuf>> = (1..=SEND_ROUND / 2)
            .map(|i| tx.ack_seg(base + 2 * i * mss, &[]))
            .collect();
        acks += segs.len();
        let now = tx.now;
        let t = StdInstant::now();
        for mut s in segs {
            tx.tcp.handle_segment(now, &mut s);
        }
        ns += t.elapsed().as_nanos();
        let una = tx
            .tcp
            .info(id)
            .ok_or_else(|| anyhow!("no connection"))?
            .snd_una;
        ensure!(
            una == base + SEND_ROUND * mss,
            "the ACKs moved SND.UNA to {una:?}"
        );
        let _ = tx.tcp.events().count();
    }
    Ok(ns as f64 / acks.max(1) as f64)
}

/// ns per ACK carrying `holes` SACK blocks (`tcp_ack_rx_sack1` .. `sack3`).
fn ack_sack(holes: usize, rounds: usize) -> anyhow::Result<f64> {
    ensure!((1..=3).contains(&holes), "1 to 3 holes");
    let mut tx = Tx::sender().map_err(anyhow::Error::msg)?;
    let mss = usize::from(MSS);
    let mut ns = 0u128;
    let mut acks = 0usize;
    for r in 0..rounds {
        if r > 0 {
            // Two ports in turn: the last round's connection is gone once its RST is out.
            tx.reopen(PEER_PORT + 1 + (r % 2) as u16)
                .map_err(anyhow::Error::msg)?;
        }
        let id = tx.id();
        let (base, _) = send_round(&mut tx, SACK_ROUND)?;
        let at = |i: usize| base + i * mss;
        // Hole j is segment start[j]; block j runs from start[j] + 1 to right[j] (in
        // segments), at most to the next hole.
        let start: Vec<usize> = (0..holes).map(|j| j * SACK_ROUND / holes).collect();
        let end: Vec<usize> = (0..holes)
            .map(|j| start.get(j + 1).copied().unwrap_or(SACK_ROUND))
            .collect();
        let mut right: Vec<usize> = start.iter().map(|h| h + 1).collect();
        // RFC 2018 §4: the block holding the segment just received first, then the
        // others, most recently reported first.
        let blocks = |latest: usize, right: &[usize]| -> Vec<SackBlock> {
            (0..holes)
                .map(|k| (latest + holes - k) % holes)
                .filter(|&k| right[k] > start[k] + 1)
                .map(|k| SackBlock {
                    left: at(start[k] + 1),
                    right: at(right[k]),
                })
                .collect()
        };
        for j in 0..holes {
            right[j] += 1;
            let s = tx.ack_seg(base, &blocks(j, &right));
            tx.send(s);
        }
        let mut segs = Vec::new();
        while right.iter().zip(&end).any(|(r, e)| r < e) {
            for j in 0..holes {
                if right[j] < end[j] {
                    right[j] = (right[j] + 2).min(end[j]);
                    segs.push(tx.ack_seg(base, &blocks(j, &right)));
                }
            }
        }
        ensure!(
            segs.iter().all(|s| usize::from(s.opts.sack_count) == holes),
            "every timed ACK carries {holes} blocks"
        );
        acks += segs.len();
        let now = tx.now;
        let t = StdInstant::now();
        for mut s in segs {
            tx.tcp.handle_segment(now, &mut s);
        }
        ns += t.elapsed().as_nanos();
        // Untimed: the holes' retransmissions go, and the peer acknowledges everything.
        tx.now += SEND_RTT;
        tx.tcp.handle_timeout(tx.now);
        let _ = tx.tx();
        tx.ack_to(at(SACK_ROUND));
        let _ = tx.tx();
        let info = tx.tcp.info(id).ok_or_else(|| anyhow!("no connection"))?;
        ensure!(
            info.snd_una == at(SACK_ROUND),
            "the last ACK moved SND.UNA to {:?}",
            info.snd_una
        );
    }
    let st = tx.tcp.stats();
    let rounds = rounds as u64;
    ensure!(
        st.sack_blocks_refused == 0
            && st.fast_recoveries == rounds
            && st.retransmits == rounds * holes as u64,
        "every SACK block taken, one recovery per round, each hole sent again once: {st:?}"
    );
    Ok(ns as f64 / acks.max(1) as f64)
}

/// ns per ACK built.
fn ack_build(blocks: usize, n: usize) -> f64 {
    let (tmpl, f, (opt, len)) = ack_parts(blocks);
    let mut pool = VecPool::new(1 << 16, 2048);
    let t = StdInstant::now();
    for _ in 0..n {
        let a = tmpl.build(&mut pool, black_box(&f), black_box(&opt[..len]), false);
        black_box(a.map(|x| x.data().len()));
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Runs the TCP benchmarks and prints medians: a table, or one JSON object per row with
/// keys `bench`, `ns_per_segment` or `ns_per_ack`, and `segments_per_ack`; the send-side
/// rows (`side: "send"`) also carry `vs_receive_run45` and `vs_receive_run1`, their ns
/// over the receive rows' ns per segment.
pub fn run(json: bool) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for (bench, run, bursts) in [
        ("tcp_receive_run45", BURST, 20_000),
        ("tcp_receive_run1", 1, 2_000),
    ] {
        let mut ns = Vec::new();
        let mut spa = Vec::new();
        for _ in 0..REPEATS {
            let (a, b) = receive(run, bursts)?;
            ns.push(a);
            spa.push(b);
        }
        rows.push(Row {
            bench,
            unit: "ns_per_segment",
            ns: median(ns),
            segments_per_ack: Some(median(spa)),
            vs_receive: None,
        });
    }
    for (bench, blocks) in [("tcp_ack_build_no_sack", 0), ("tcp_ack_build_sack3", 3)] {
        let ns = (0..REPEATS).map(|_| ack_build(blocks, 200_000)).collect();
        rows.push(Row {
            bench,
            unit: "ns_per_ack",
            ns: median(ns),
            segments_per_ack: None,
            vs_receive: None,
        });
    }
    let recv = (rows[0].ns, rows[1].ns);
    let send: [(&str, &str, Measure); 5] = [
        ("tcp_send_segment", "ns_per_segment", || {
            send_segments(3_000)
        }),
        ("tcp_ack_rx_cumulative", "ns_per_ack", || {
            ack_cumulative(3_000)
        }),
        ("tcp_ack_rx_sack1", "ns_per_ack", || ack_sack(1, 1_000)),
        ("tcp_ack_rx_sack2", "ns_per_ack", || ack_sack(2, 1_000)),
        ("tcp_ack_rx_sack3", "ns_per_ack", || ack_sack(3, 1_000)),
    ];
    for (bench, unit, f) in send {
        let ns = median((0..REPEATS).map(|_| f()).collect::<anyhow::Result<_>>()?);
        rows.push(Row {
            bench,
            unit,
            ns,
            segments_per_ack: None,
            vs_receive: Some((
                ns / recv.0.max(f64::MIN_POSITIVE),
                ns / recv.1.max(f64::MIN_POSITIVE),
            )),
        });
    }
    let r2 = |v: f64| serde_json::json!((v * 100.0).round() / 100.0);
    if json {
        for r in &rows {
            let mut o = serde_json::Map::new();
            o.insert("bench".into(), r.bench.into());
            o.insert(
                r.unit.into(),
                serde_json::json!((r.ns * 10.0).round() / 10.0),
            );
            o.insert(
                "segments_per_ack".into(),
                r.segments_per_ack.map_or(serde_json::Value::Null, r2),
            );
            if let Some((a, b)) = r.vs_receive {
                o.insert("side".into(), "send".into());
                o.insert("vs_receive_run45".into(), r2(a));
                o.insert("vs_receive_run1".into(), r2(b));
            }
            println!("{}", serde_json::Value::Object(o));
        }
    } else {
        println!(
            "{:<24} {:>12} {:>10} {:>14} {:>12} {:>12}",
            "bench", "ns/segment", "ns/ack", "segments/ack", "/ recv run45", "/ recv run1"
        );
        let dash = || "-".to_string();
        for r in &rows {
            let (seg, ack) = if r.unit == "ns_per_segment" {
                (format!("{:.1}", r.ns), dash())
            } else {
                (dash(), format!("{:.1}", r.ns))
            };
            let spa = r.segments_per_ack.map_or_else(dash, |v| format!("{v:.2}"));
            let (a, b) = r.vs_receive.map_or_else(
                || (dash(), dash()),
                |(a, b)| (format!("{a:.2}x"), format!("{b:.2}x")),
            );
            println!(
                "{:<24} {:>12} {:>10} {:>14} {:>12} {:>12}",
                r.bench, seg, ack, spa, a, b
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receive_and_ack_build_measure_something() {
        let (ns, spa) = receive(BURST, 20).expect("run45");
        assert!(ns > 0.0);
        assert!(spa > 40.0, "one ACK per 45-segment run: {spa}");
        let (_, spa1) = receive(1, 20).expect("run1");
        assert!(
            (1.5..3.0).contains(&spa1),
            "about one ACK per 2 segments: {spa1}"
        );
        assert!(ack_build(3, 100) > 0.0);
    }

    /// The send-side rows run their scenario as their docs say (each function checks its
    /// own accounting and fails otherwise): every segment sent once and acknowledged, the
    /// SACK rows' ACKs carrying one block per hole, every block taken.
    #[test]
    fn send_side_rows_run_their_scenario() {
        assert!(send_segments(20).expect("send") > 0.0);
        assert!(ack_cumulative(20).expect("cumulative") > 0.0);
        for holes in 1..=3 {
            assert!(ack_sack(holes, 10).expect("sack") > 0.0, "{holes} holes");
        }
    }
}
