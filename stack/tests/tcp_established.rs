//! ESTABLISHED: in-order and out-of-order receive, SACK/D-SACK, PAWS, RFC 5961, the window,
//! and the ACK policy (Linux `tcp_input.c`, RFC 5681 §4.2). Each test names what it checks.

use stack::ack::{AckPolicy, AckReason};
use stack::seq::SeqNumber;
use stack::tcp::{DropReason, Event, TcpConfig};
use stack::time::Duration;
use stack::wire::{SackBlock, TcpFlags};
use testkit::tcp::*;

fn established(policy: AckPolicy) -> Fixture {
    let mut h = Fixture::listening(policy);
    h.handshake(SynOpts::all());
    h
}

fn sack_blocks(m: &stack::wire::TcpMeta) -> Vec<(u32, u32)> {
    m.opts.sack[..usize::from(m.opts.sack_count)]
        .iter()
        .map(|b: &SackBlock| (b.left.get(), b.right.get()))
        .collect()
}

/// Linux `__tcp_ack_snd_check` (a) with GRO (linux-receive-path.md §4): one coalesced
/// 45-segment run gets exactly one stretch ACK covering all of it.
#[test]
fn one_stretch_ack_per_45_segment_run_tcp_ack_snd_check() {
    let mut h = established(AckPolicy::linux());
    h.exhaust_quickack();
    let before = h.acks(AckReason::Stretch);
    let total = h.tcp.ack_stats().total();
    h.data(45 * 1448, 1448, false);
    assert_eq!(h.read_all().len(), 45 * 1448);
    let out = h.tx();
    assert_eq!(out.len(), 1, "one ACK for the whole run");
    assert_eq!(out[0].ack, h.snd_nxt);
    assert_eq!(h.acks(AckReason::Stretch), before + 1);
    assert_eq!(h.tcp.ack_stats().total(), total + 1);
    // Nothing further is owed.
    h.advance(Duration::from_millis(500));
    assert!(h.tx().is_empty());
}

/// Linux `tcp_event_data_recv` -> `tcp_incr_quickack(TCP_MAX_QUICKACKS)` on the first data:
/// the first 16 data segments are ACKed at once (quick), the 17th waits for the timer.
#[test]
fn quickack_at_connection_start_tcp_event_data_recv() {
    let mut h = established(AckPolicy::linux());
    for i in 0..16 {
        h.data(1448, 1448, false);
        let out = h.tx();
        assert_eq!(out.len(), 1, "segment {i} ACKed at once");
        assert_eq!(out[0].ack, h.snd_nxt);
        h.now += Duration::from_millis(1);
    }
    assert_eq!(h.acks(AckReason::Quick), 16);
    h.data(1448, 1448, false);
    assert!(h.tx().is_empty(), "quickack credit spent: delayed");
    h.advance(Duration::from_millis(40));
    assert_eq!(h.tx().len(), 1);
    assert_eq!(h.acks(AckReason::DelayedTimer), 1);
}

/// RFC 5681 §4.2 and RFC 2018 §4: out-of-order data gets an immediate duplicate ACK whose
/// first SACK block holds the most recently received segment.
#[test]
fn immediate_dupack_with_sack_on_out_of_order_rfc2018_4() {
    let mut h = established(AckPolicy::linux());
    h.exhaust_quickack();
    let base = h.snd_nxt;
    h.data_at(base + 1448, 1448, 1448);
    let out = h.tx();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].ack, base);
    let b1 = ((base + 1448).get(), (base + 2896).get());
    assert_eq!(sack_blocks(&out[0]), vec![b1]);
    h.data_at(base + 4344, 1448, 1448);
    let out = h.tx();
    assert_eq!(out.len(), 1);
    let b2 = ((base + 4344).get(), (base + 5792).get());
    assert_eq!(
        sack_blocks(&out[0]),
        vec![b2, b1],
        "most recent block first"
    );
    // Extending the older block moves it to the front (RFC 2018 §4).
    h.data_at(base + 2896, 1448, 1448);
    let out = h.tx();
    assert_eq!(
        sack_blocks(&out[0]),
        vec![((base + 1448).get(), (base + 5792).get())],
        "blocks that touch merge"
    );
    assert_eq!(h.acks(AckReason::OutOfOrder), 3);
    assert_eq!(h.tcp.stats().ooo_segments, 3);
}

/// Linux `tcp_data_queue`: when the out-of-order queue drains, `ICSK_ACK_NOW` (RFC 5681 §4.2:
/// ACK a segment that fills a gap at once).
#[test]
fn immediate_ack_on_gap_fill_rfc5681_4_2() {
    let mut h = established(AckPolicy::linux());
    h.exhaust_quickack();
    let base = h.snd_nxt;
    h.data_at(base + 1448, 2896, 1448);
    let _ = h.tx();
    h.data(1448, 1448, false);
    h.snd_nxt = base + 4344;
    let out = h.tx();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].ack, base + 4344);
    assert_eq!(out[0].opts.sack_count, 0, "nothing left to SACK");
    assert_eq!(h.acks(AckReason::GapFill), 1);
    let got = h.read_all();
    assert_eq!(got.len(), 4344);
    for (i, b) in got.iter().enumerate() {
        assert_eq!(*b, pattern(base + i));
    }
}

/// Linux `tcp_send_delayed_ack`: a lone sub-MSS segment (application not reading) waits for
/// the delayed-ACK timer, at least `TCP_DELACK_MIN` = 40 ms.
#[test]
fn delayed_ack_for_lone_sub_mss_segment_tcp_send_delayed_ack() {
    let mut h = established(AckPolicy::linux());
    h.exhaust_quickack();
    h.now += Duration::from_millis(50);
    let t0 = h.now;
    h.data(500, 500, false);
    assert!(h.tx().is_empty());
    let deadline = h.tcp.poll_timeout().expect("timer armed");
    assert!(
        deadline - t0 >= Duration::from_millis(40),
        "{:?}",
        deadline - t0
    );
    h.advance(Duration::from_millis(39));
    assert!(h.tx().is_empty());
    h.advance(deadline - h.now);
    let out = h.tx();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].ack, h.snd_nxt);
    assert!(h.acks(AckReason::DelayedTimer) >= 1);
}

fn psh_mss(on: bool) -> (usize, u64, u64) {
    let mut h = established(AckPolicy::linux().with_quickack_psh_mss(on));
    h.exhaust_quickack();
    let psh_before = h.acks(AckReason::Psh);
    let timer_before = h.acks(AckReason::DelayedTimer);
    h.data(1448, 1448, true);
    assert!(
        h.tx().is_empty(),
        "exactly 1 MSS: not > rcv_mss, no immediate ACK"
    );
    h.read_all();
    let n = h.tx().len();
    h.advance(Duration::from_millis(200));
    let _ = h.tx();
    (
        n,
        h.acks(AckReason::Psh) - psh_before,
        h.acks(AckReason::DelayedTimer) - timer_before,
    )
}

/// Linux 4720852ed9af (`tcp_measure_rcv_mss`): an exactly-1-MSS segment with PSH sets
/// `ICSK_ACK_PUSHED`, so `tcp_cleanup_rbuf` ACKs when the application reads it. With the
/// switch off the ACK waits for the delayed-ACK timer (seed 002's regression).
#[test]
fn quickack_psh_mss_on_and_off_4720852ed9af() {
    assert_eq!(psh_mss(true), (1, 1, 0));
    assert_eq!(psh_mss(false), (0, 0, 1));
}

/// Linux `tcp_cleanup_rbuf`: after the application consumes, an ACK is sent when the window
/// at least doubles; RFC 9293 §3.8.6.2.2: the right edge never moves left.
#[test]
fn window_update_after_consumption_doubles_window_tcp_cleanup_rbuf() {
    let mut h = established(AckPolicy::linux());
    h.exhaust_quickack();
    let mut right = 0u64;
    let check_edge = |acks: &[stack::wire::TcpMeta], right: &mut u64| {
        for a in acks {
            let r = u64::from(a.ack.get()) + (u64::from(a.window) << 3);
            assert!(r >= *right, "right edge moved left");
            *right = r;
        }
    };
    // Fill 200 KiB of the 256 KiB buffer without reading.
    for _ in 0..5 {
        h.data(40 * 1024, 1024, false);
        let a = h.tx();
        check_edge(&a, &mut right);
        h.advance(Duration::from_millis(50));
        let a = h.tx();
        check_edge(&a, &mut right);
    }
    let info = h.tcp.info(h.id()).expect("info");
    assert!(info.window <= 60 * 1024, "window shrank to {}", info.window);
    let wu = h.acks(AckReason::WindowUpdate);
    h.read_all();
    let a = h.tx();
    assert_eq!(a.len(), 1);
    assert_eq!(h.acks(AckReason::WindowUpdate), wu + 1);
    assert_eq!(u32::from(a[0].window) << 3, 256 * 1024);
    check_edge(&a, &mut right);
}

/// `every:N` counts wire segments inside coalesced runs (Segment.segs).
#[test]
fn every_n_counts_segments_inside_runs() {
    let mut h = established(AckPolicy::every(4));
    h.data(3 * 1000, 1000, false);
    assert!(h.tx().is_empty(), "3 of 4");
    h.data(1000, 1000, false);
    assert_eq!(h.tx().len(), 1, "4th segment");
    h.data(5 * 1000, 1000, false);
    assert_eq!(h.tx().len(), 1, "a run of 5 counts 5");
    h.data(1000, 1000, false);
    assert!(h.tx().is_empty());
    // RFC 5681 §4.2: within 500 ms.
    h.advance(Duration::from_millis(500));
    assert_eq!(h.tx().len(), 1);
    assert_eq!(h.acks(AckReason::Stretch), 2);
    assert_eq!(h.acks(AckReason::DelayedTimer), 1);
}

/// `rfc5681` = `every:2`; `delay:NS` waits NS and ACKs out-of-order data at once.
#[test]
fn rfc5681_and_delay_presets() {
    let mut h = established("rfc5681".parse().expect("preset"));
    h.data(1000, 1000, false);
    let a = h.tx();
    assert!(a.is_empty(), "{a:?} {:?}", h.tcp.ack_stats());
    h.data(1000, 1000, false);
    assert_eq!(h.tx().len(), 1);

    let mut h = established("delay:2000000".parse().expect("preset"));
    // (Not read: reading would open the window from the SYN-ACK's 64 KiB and send a
    // window update, tcp_cleanup_rbuf.)
    h.data(20 * 1448, 1448, false);
    assert!(h.tx().is_empty());
    h.advance(Duration::from_millis(2));
    assert_eq!(h.tx().len(), 1);
    let nxt = h.snd_nxt;
    h.data_at(nxt + 1000, 1000, 1000);
    assert_eq!(h.tx().len(), 1, "out of order: at once");
}

/// RFC 7323 §5.3 R1 (PAWS): a segment whose TSval is older than TS.Recent is dropped and
/// answered with an ACK; §4.3: TSecr echoes TS.Recent.
#[test]
fn paws_rejects_old_timestamp_rfc7323_5_3() {
    let mut h = established(AckPolicy::linux());
    h.tsval = 9000;
    h.data(1000, 1000, false);
    let a = h.tx();
    assert_eq!(a[0].opts.timestamp.expect("ts").tsecr, 9000);
    h.tsval = 8999;
    let nxt = h.snd_nxt;
    h.data(1000, 1000, false);
    let a = h.tx();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].ack, nxt, "the old segment was not accepted");
    assert_eq!(a[0].opts.timestamp.expect("ts").tsecr, 9000);
    assert_eq!(h.tcp.stats().drops(DropReason::Paws), 1);
    assert_eq!(h.read_all().len(), 1000);
}

/// RFC 7323 §4.3 (3): TS.Recent is taken only from a segment with SEG.SEQ <= Last.ACK.sent,
/// so a segment beyond a delayed ACK does not change the echo.
#[test]
fn ts_recent_only_from_seq_at_last_ack_sent_rfc7323_4_3() {
    let mut h = established(AckPolicy::linux());
    h.exhaust_quickack();
    h.tsval = 10_000;
    h.data(500, 500, false); // delayed: Last.ACK.sent stays before it
    h.tsval = 10_001;
    h.data(500, 500, false); // SEG.SEQ > Last.ACK.sent
    h.advance(Duration::from_millis(200));
    let a = h.tx();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].opts.timestamp.expect("ts").tsecr, 10_000);
}

/// RFC 5961 §3.2: a RST in the window but not at RCV.NXT gets a challenge ACK; an exact
/// one resets the connection.
#[test]
fn challenge_ack_for_inexact_rst_rfc5961_3_2() {
    let mut h = established(AckPolicy::linux());
    h.data(1000, 1000, false);
    let _ = h.tx();
    let s = h.seg(h.snd_nxt + 100, TcpFlags::RST, 0, 0);
    h.send(s);
    let a = h.tx();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].flags, TcpFlags::ACK);
    assert_eq!(a[0].ack, h.snd_nxt);
    assert_eq!(h.acks(AckReason::Challenge), 1);
    assert!(h.tcp.info(h.id()).is_some(), "still connected");
    // Out of window: silently dropped.
    let s = h.seg(h.snd_nxt + 10_000_000, TcpFlags::RST, 0, 0);
    h.send(s);
    assert!(h.tx().is_empty());
    // Exact: reset.
    let s = h.seg(h.snd_nxt, TcpFlags::RST, 0, 0);
    h.send(s);
    assert!(h.tx().is_empty());
    assert!(h.tcp.info(h.id()).is_none());
    let id = h.id();
    assert!(h.tcp.events().any(|e| e == Event::Reset(id)));
    assert_eq!(h.tcp.stats().conns_reset, 1);
}

/// RFC 5961 §4.2: a SYN on a synchronized connection gets a challenge ACK.
#[test]
fn challenge_ack_for_in_window_syn_rfc5961_4_2() {
    let mut h = established(AckPolicy::linux());
    let s = h.seg(h.snd_nxt + 10, TcpFlags::SYN, 0, 0);
    h.send(s);
    let a = h.tx();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].ack, h.snd_nxt);
    assert_eq!(h.acks(AckReason::Challenge), 1);
    assert!(h.tcp.info(h.id()).is_some());
}

/// RFC 5961 §5.2: an ACK for data never sent gets a challenge ACK and is dropped; §7: the
/// per-core limit on challenge ACKs.
#[test]
fn challenge_ack_for_bad_ack_and_rate_limit_rfc5961_5_2_and_7() {
    let mut cfg = cfg();
    cfg.challenge_ack_limit = 2;
    let mut h = Fixture::with_cfg(cfg, AckPolicy::linux());
    h.handshake(SynOpts::all());
    h.our_nxt += 1000;
    for _ in 0..3 {
        let s = h.seg(h.snd_nxt, TcpFlags::ACK, 100, 100);
        h.send(s);
        let _ = h.tx();
    }
    assert_eq!(h.acks(AckReason::Challenge), 2);
    assert_eq!(h.tcp.stats().drops(DropReason::ChallengeRateLimited), 1);
    assert_eq!(h.tcp.stats().drops(DropReason::BadAck), 3);
    assert_eq!(h.tcp.readable_bytes(h.id()), 0);
}

/// RFC 2883 §4.1.1: a duplicate segment is reported with a D-SACK block first; Linux
/// `tcp_send_dupack` enters quickack mode.
#[test]
fn dsack_for_duplicate_rfc2883_4_1_1() {
    let mut h = established(AckPolicy::linux());
    h.exhaust_quickack();
    let base = h.snd_nxt;
    h.data(2000, 1000, false);
    h.read_all();
    let _ = h.tx();
    h.data_at(base, 1000, 1000);
    let a = h.tx();
    assert_eq!(a.len(), 1);
    assert_eq!(sack_blocks(&a[0]), vec![(base.get(), (base + 1000).get())]);
    assert_eq!(h.acks(AckReason::Duplicate), 1);
    assert_eq!(h.tcp.stats().duplicate_segments, 1);
    // Out-of-order duplicate: D-SACK first, then the SACK block.
    h.data_at(h.snd_nxt + 1000, 1000, 1000);
    let _ = h.tx();
    h.data_at(h.snd_nxt + 1000, 1000, 1000);
    let a = h.tx();
    let b = ((h.snd_nxt + 1000).get(), (h.snd_nxt + 2000).get());
    assert_eq!(sack_blocks(&a[0]), vec![b, b]);
}

/// RFC 9293 §3.4 / RFC 1982: sequence numbers across the 2^32 wrap, in and out of order.
#[test]
fn sequence_wrap_rfc9293_3_4() {
    let mut h = Fixture::listening(AckPolicy::linux());
    h.snd_nxt = SeqNumber(u32::MAX - 5000);
    h.handshake(SynOpts::all());
    let base = h.snd_nxt;
    // Out of order across the wrap, then the gap.
    h.data_at(base + 4000, 4000, 1000);
    let a = h.tx();
    assert_eq!(
        sack_blocks(&a[0]),
        vec![((base + 4000).get(), (base + 8000).get())]
    );
    assert!((base + 8000).get() < 10_000, "the block wrapped");
    h.data(4000, 1000, false);
    h.snd_nxt = base + 8000;
    let a = h.tx();
    assert_eq!(a[0].ack, base + 8000);
    let got = h.read_all();
    assert_eq!(got.len(), 8000);
    for (i, b) in got.iter().enumerate() {
        assert_eq!(*b, pattern(base + i));
    }
}

/// Out-of-order limits: beyond the connection's byte limit segments are dropped and
/// counted; the sender's retransmission fills in later.
#[test]
fn ooo_limit_drops_and_counts() {
    let cfg = TcpConfig {
        ooo_conn_bytes: 3000,
        ..cfg()
    };
    let mut h = Fixture::with_cfg(cfg, AckPolicy::linux());
    h.handshake(SynOpts::all());
    let base = h.snd_nxt;
    h.data_at(base + 1000, 2000, 1000);
    h.data_at(base + 3000, 2000, 1000);
    assert_eq!(h.tcp.stats().drops(DropReason::OooConnLimit), 1);
    h.data(1000, 1000, false);
    h.data_at(base + 3000, 2000, 1000);
    h.snd_nxt = base + 5000;
    assert_eq!(h.read_all().len(), 5000);
}

/// TX checksum offload requested but refused by the buffer: software checksums (the
/// fixture's parser verifies them).
#[test]
fn tx_offload_falls_back_to_software() {
    let mut h = established(AckPolicy::linux());
    h.offload = true;
    h.data(1000, 1000, false);
    assert_eq!(h.tx().len(), 1);
}

/// `poll_tx` stops when the burst is full and keeps the rest due.
#[test]
fn poll_tx_respects_burst_capacity() {
    let full = stack::driver::MAX_BURST;
    let cfg = TcpConfig {
        max_conns: 2 * full,
        ..cfg()
    };
    let mut h = Fixture::with_cfg(cfg, AckPolicy::linux());
    let mut ids = Vec::new();
    for p in 0..(full + 6) as u16 {
        h.flow.sport = 1000 + p;
        h.snd_nxt = SeqNumber(1000);
        h.handshake(SynOpts::all());
        ids.push(h.our_nxt);
    }
    for (p, our) in ids.iter().enumerate() {
        h.flow.sport = 1000 + p as u16;
        h.our_nxt = *our;
        h.snd_nxt = SeqNumber(1001);
        h.data(100, 100, false);
    }
    let mut out = stack::driver::Burst::new();
    assert_eq!(h.tcp.poll_tx(h.now, &mut h.pool, &mut out, false), full);
    out.clear();
    assert_eq!(h.tcp.poll_tx(h.now, &mut h.pool, &mut out, false), 6);
}

/// Every decision to ACK now yields its own frame (Linux sends from inside
/// `__tcp_ack_snd_check`): `every:1` without GRO, eight segments handled before one
/// `poll_tx`, gives eight ACKs with rising ACK numbers (RFC 5681 §4.2 counted per segment).
#[test]
fn every_1_without_gro_acks_each_segment_rfc5681_4_2() {
    let mut h = established(AckPolicy::every(1));
    let base = h.snd_nxt;
    for _ in 0..8 {
        h.data(1000, 1000, false);
    }
    let out = h.tx();
    let acks: Vec<u32> = out.iter().map(|m| (m.ack - base) as u32).collect();
    assert_eq!(acks, (1..=8).map(|i| i * 1000).collect::<Vec<_>>());
    assert_eq!(h.acks(AckReason::Stretch), 8);
    assert!(h.tx().is_empty(), "nothing else owed");
}

/// Linux `__tcp_ack_snd_check` (a) without GRO, out of quickack mode: every second full
/// segment makes `rcv_nxt - rcv_wup > rcv_mss`, so a burst of 16 full segments handled
/// before one `poll_tx` gets 8 stretch ACKs, each acknowledging two more segments, and
/// each carrying the window of its decision (the right edge never moves left).
#[test]
fn linux_without_gro_acks_every_second_full_segment_tcp_ack_snd_check() {
    let mut h = established(AckPolicy::linux());
    h.exhaust_quickack();
    let base = h.snd_nxt;
    let stretch = h.acks(AckReason::Stretch);
    for _ in 0..16 {
        h.data(u32::from(MSS), MSS, false);
    }
    let out = h.tx();
    let acks: Vec<u32> = out.iter().map(|m| (m.ack - base) as u32).collect();
    let want: Vec<u32> = (1..=8).map(|i| i * 2 * u32::from(MSS)).collect();
    assert_eq!(acks, want);
    assert_eq!(h.acks(AckReason::Stretch), stretch + 8);
    let mut right = 0u64;
    for m in &out {
        let r = u64::from(m.ack.get()) + (u64::from(m.window) << 3);
        assert!(r >= right, "right edge moved left");
        right = r;
    }
    // The same 16 segments as one coalesced run: one ACK (GRO on).
    let mut g = established(AckPolicy::linux());
    g.exhaust_quickack();
    g.data(16 * u32::from(MSS), MSS, false);
    assert_eq!(g.tx().len(), 1);
}

/// Out-of-order segments in one burst each get their own duplicate ACK (RFC 5681 §4.2:
/// "an immediate duplicate ACK SHOULD be sent when an out-of-order segment arrives"),
/// each with the SACK blocks of its moment (RFC 2018 §4).
#[test]
fn each_out_of_order_segment_gets_its_own_dupack_rfc5681_4_2() {
    let mut h = established(AckPolicy::linux());
    h.exhaust_quickack();
    let base = h.snd_nxt;
    h.data_at(base + 1000, 1000, 1000);
    h.data_at(base + 3000, 1000, 1000);
    h.data_at(base + 5000, 1000, 1000);
    let out = h.tx();
    assert_eq!(out.len(), 3, "three dupacks");
    assert!(out.iter().all(|m| m.ack == base));
    let firsts: Vec<u32> = out
        .iter()
        .map(|m| (sack_blocks(m)[0].0).wrapping_sub(base.get()))
        .collect();
    assert_eq!(firsts, vec![1000, 3000, 5000]);
    assert_eq!(
        out.iter().map(|m| m.opts.sack_count).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(h.acks(AckReason::OutOfOrder), 3);
}

/// The per-connection ACK queue is bounded: beyond `ack_queue` decisions in one loop
/// iteration the oldest are merged into a cumulative (stretch) ACK and counted.
#[test]
fn ack_queue_overflow_merges_oldest_and_counts() {
    let cfg = TcpConfig {
        ack_queue: 4,
        ..cfg()
    };
    let mut h = Fixture::with_cfg(cfg, AckPolicy::every(1));
    h.handshake(SynOpts::all());
    let base = h.snd_nxt;
    for _ in 0..10 {
        h.data(1000, 1000, false);
    }
    let out = h.tx();
    let acks: Vec<u32> = out.iter().map(|m| (m.ack - base) as u32).collect();
    assert_eq!(acks, vec![7000, 8000, 9000, 10_000], "the newest four");
    assert_eq!(h.tcp.ack_stats().merged, 6);
    assert_eq!(h.acks(AckReason::Stretch), 4);
}

/// RFC 7323 §5.3 R1 and §4.3 with a coalesced run whose TSvals rise (GRO lets TSval rise
/// within a run, never fall): PAWS is checked against the run's first TSval, TS.Recent
/// takes the first TSval, and the ACK echoes it (the earliest unacknowledged segment's,
/// §4.3 (2)); the next run, whose first TSval is newer than the previous run's first but
/// older than its last, is still accepted.
#[test]
fn paws_and_ts_recent_use_first_tsval_of_coalesced_run_rfc7323_4_3_and_5_3() {
    use stack::wire::Timestamp;
    let mut h = established(AckPolicy::linux());
    h.exhaust_quickack();
    let tsecr = h.our_tsval;
    let ts = |v: u32| Some(Timestamp { tsval: v, tsecr });
    // 10 segments, TSvals 20_000 ..= 20_009.
    let mut s = h.seg(h.snd_nxt, TcpFlags::ACK, 10 * 1448, 1448);
    s.opts.timestamp = ts(20_000);
    s.ts_last = ts(20_009);
    h.snd_nxt += 10 * 1448;
    h.send(s);
    let a = h.tx();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].ack, h.snd_nxt);
    assert_eq!(
        a[0].opts.timestamp.expect("ts").tsecr,
        20_000,
        "echo the first"
    );
    // Next run: first TSval 20_005 (< the previous run's last, 20_009; a sender would
    // not do this, but it shows which TSval PAWS and TS.Recent use).
    let mut s = h.seg(h.snd_nxt, TcpFlags::ACK, 4 * 1448, 1448);
    s.opts.timestamp = ts(20_005);
    s.ts_last = ts(20_012);
    h.snd_nxt += 4 * 1448;
    h.send(s);
    let a = h.tx();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].ack, h.snd_nxt, "accepted: first TSval passes PAWS");
    assert_eq!(a[0].opts.timestamp.expect("ts").tsecr, 20_005);
    assert_eq!(h.tcp.stats().drops(DropReason::Paws), 0);
    // A run whose first TSval is older than TS.Recent fails PAWS as a whole, even though
    // its last TSval is newer.
    let nxt = h.snd_nxt;
    let mut s = h.seg(h.snd_nxt, TcpFlags::ACK, 2 * 1448, 1448);
    s.opts.timestamp = ts(20_004);
    s.ts_last = ts(20_020);
    h.send(s);
    let a = h.tx();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].ack, nxt, "dropped: duplicate ACK");
    assert_eq!(a[0].opts.timestamp.expect("ts").tsecr, 20_005);
    assert_eq!(h.tcp.stats().drops(DropReason::Paws), 1);
    assert_eq!(h.read_all().len(), 14 * 1448);
}

/// Timers as data without a scan: 60 connections each arm a delayed-ACK timer
/// (`tcp_send_delayed_ack`, 40 ms) at staggered times; each fires at its own deadline, not
/// before, and the timers of the handshakes (SYN-ACK retransmission, cancelled when the
/// connection opened) fire nothing.
#[test]
fn delayed_ack_timers_of_many_connections_fire_at_their_deadlines() {
    let mut h = Fixture::with_cfg(cfg(), AckPolicy::linux());
    let mut peers = Vec::new();
    for p in 0..60u16 {
        h.flow.sport = 2000 + p;
        h.snd_nxt = SeqNumber(1000);
        h.handshake(SynOpts::all());
        // Spend the quickack credit so the next sub-MSS segment is delayed.
        for _ in 0..16 {
            h.data(100, 100, false);
        }
        h.read_all();
        let _ = h.tx();
        peers.push((h.flow, h.our_nxt, h.snd_nxt));
    }
    let t0 = h.now;
    for (i, (flow, our, nxt)) in peers.iter().enumerate() {
        h.flow = *flow;
        h.our_nxt = *our;
        h.snd_nxt = *nxt;
        h.now = t0 + Duration::from_millis(i as u64);
        h.data(100, 100, false);
    }
    assert!(h.tx().is_empty(), "all delayed");
    let before = h.acks(AckReason::DelayedTimer);
    let mut fired = 0;
    for ms in 0..=120u64 {
        h.now = t0 + Duration::from_millis(ms);
        h.tcp.handle_timeout(h.now);
        let n = h.tx().len();
        if ms < 40 {
            assert_eq!(n, 0, "nothing before 40 ms ({ms})");
        }
        fired += n;
    }
    assert_eq!(fired, 60);
    assert_eq!(h.acks(AckReason::DelayedTimer), before + 60);
    // poll_timeout may be early (cancelled SYN-ACK timers are dropped lazily), never late.
    h.now = t0 + Duration::from_secs(10);
    h.tcp.handle_timeout(h.now);
    assert!(h.tx().is_empty());
    assert_eq!(h.tcp.poll_timeout(), None, "nothing left armed");
}
