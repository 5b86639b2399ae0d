//! The window is what the connection can hold, in bytes and in receive-queue slices: a peer
//! that fills every byte it is offered, in segments of any size, is never refused for want
//! of room (`rx_queue_full` stays 0), and every byte reaches the application in order.
//! Small in-order segments are copied into the tail of the last buffer (Linux
//! `tcp_try_coalesce`), and the window counts each free slice as `rxq_slice_bytes`
//! (Linux's `tcp_select_window` offers what its memory accounting can hold).

use stack::ack::AckPolicy;
use stack::seq::SeqNumber;
use stack::tcp::{DropReason, TcpConfig};
use stack::time::Duration;
use testkit::tcp::*;

/// A connection with a 256 KiB buffer but only 64 receive slices, so that slices, not
/// bytes, bound what it can hold; frames arrive in buffers of DPDK's default data room.
fn receiver(room: usize) -> Fixture {
    let cfg = TcpConfig {
        rxq_slices: 64,
        ..cfg()
    };
    let mut h = Fixture::with_cfg(cfg, AckPolicy::linux());
    h.rx_room = room;
    h.handshake(SynOpts::all());
    h
}

/// The peer sends whatever the last ACK offered, in segments whose sizes `size` picks
/// (each handed over alone, or as GRO runs of `run` equal segments), until the window is
/// closed; the application reads nothing. Returns the bytes sent.
fn fill(h: &mut Fixture, mut size: impl FnMut() -> u32, run: u32) -> u64 {
    let id = h.id();
    let mut sent = 0u64;
    for _ in 0..10_000 {
        let _ = h.tx();
        let w = h.tcp.info(id).expect("info").window;
        if w == 0 {
            return sent;
        }
        let mut left = w;
        while left > 0 {
            let l = size().clamp(1, 1448);
            let len = (l * run).min(left);
            h.data(len, l as u16, false);
            left -= len;
            sent += u64::from(len);
        }
        h.now += Duration::from_micros(100);
    }
    panic!("the window never closed ({sent} bytes sent)");
}

/// Every byte arrived, in order, unrefused; the window reopens once the application reads.
fn check(h: &mut Fixture, start: SeqNumber, sent: u64) {
    let id = h.id();
    let stats = h.tcp.stats();
    assert_eq!(
        stats.drops(DropReason::RxQueueFull),
        0,
        "refused for want of slices"
    );
    assert_eq!(
        stats.drops(DropReason::BeyondWindow),
        0,
        "the peer kept to the window"
    );
    let info = h.tcp.info(id).expect("info");
    assert_eq!(u64::from(info.unconsumed), sent);
    let got = h.read_all();
    assert_eq!(got.len() as u64, sent);
    for (i, b) in got.iter().enumerate() {
        assert_eq!(*b, pattern(start + i), "byte {i}");
    }
    let _ = h.tx();
    assert!(
        h.tcp.info(id).expect("info").window > 0,
        "the window reopened"
    );
}

/// 1-byte segments: each copied into the last buffer's tail, so 64 slices hold about 64
/// buffers' worth (far more than 64 bytes), and the window closes before slices run out.
#[test]
fn a_window_filled_with_one_byte_segments_is_never_refused() {
    let mut h = receiver(2048);
    let start = h.snd_nxt;
    let sent = fill(&mut h, || 1, 1);
    assert!(sent > 64 * 896, "coalescing let {sent} bytes in");
    check(&mut h, start, sent);
}

/// 100-byte segments, alone and as GRO runs of 10 (chains of 100-byte slices).
#[test]
fn a_window_filled_with_100_byte_segments_is_never_refused() {
    for run in [1, 10] {
        let mut h = receiver(2048);
        let start = h.snd_nxt;
        let sent = fill(&mut h, || 100, run);
        check(&mut h, start, sent);
    }
}

/// Sizes mixed to defeat coalescing (just over half a buffer, then sizes that do not fit
/// what is left): slices then hold about half a buffer each, which `rxq_slice_bytes`
/// (896) allows for.
#[test]
fn a_window_filled_with_mixed_sizes_is_never_refused() {
    let mut h = receiver(2048);
    let start = h.snd_nxt;
    let mut x = 0x2545_f491u32;
    let sent = fill(
        &mut h,
        || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            [1, 100, 500, 991, 1000, 1448][(x % 6) as usize] + x % 7
        },
        1,
    );
    check(&mut h, start, sent);
}

/// Full-sized segments cannot be coalesced: each takes a slice, and the window offers no
/// more than the slices hold.
#[test]
fn full_sized_segments_take_a_slice_each_within_the_window() {
    let mut h = receiver(2048);
    let start = h.snd_nxt;
    let sent = fill(&mut h, || 1448, 45);
    assert!(sent <= 64 * 1448, "{sent} bytes in 64 slices");
    check(&mut h, start, sent);
}

/// The window never offers more than the free slices take: with buffers that cannot grow
/// (no room after the frame), 1-byte segments each take a slice, and a peer keeping to the
/// window is refused only past what `rxq_slice_bytes` promised; the refusal is counted, the
/// bytes taken are exact, and nothing panics.
#[test]
fn buffers_without_room_are_refused_by_count_not_lost() {
    let mut h = receiver(0);
    let id = h.id();
    let start = h.snd_nxt;
    let _ = h.tx();
    let w = h.tcp.info(id).expect("info").window;
    assert!(w <= 64 * 896, "window {w} within the slices' count");
    for _ in 0..64 {
        h.data(1, 1, false);
    }
    // The 65th byte finds every slice taken, however often it is sent.
    for _ in 0..3 {
        h.data_at(start + 64, 1, 1);
    }
    let stats = h.tcp.stats();
    assert_eq!(stats.drops(DropReason::RxQueueFull), 3);
    let got = h.read_all();
    assert_eq!(got.len(), 64);
    for (i, b) in got.iter().enumerate() {
        assert_eq!(*b, pattern(start + i));
    }
}
