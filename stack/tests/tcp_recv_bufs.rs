//! `Tcp::recv_bufs`: the received buffers given to the application instead of lent, so
//! that an echo server hands them straight to `Tcp::send_bufs`. What it must keep from
//! `Tcp::recv`: the bytes, in order; the window reopening and Linux `tcp_cleanup_rbuf`'s
//! window-update ACK; and bounds (whole slices, at most `max_bytes`, at most the chain's
//! free slots). Each test names what it checks.

use stack::ack::{AckPolicy, AckReason};
use stack::buf::{PayloadChain, MAX_CHAIN};
use stack::mem::VecBuf;
use stack::tcp::{ConnId, TcpError};
use stack::time::Duration;
use stack::wire::TcpMeta;
use testkit::tcp::*;

fn established() -> (Fixture, ConnId) {
    let mut h = Fixture::listening(AckPolicy::linux());
    h.window = 60_000;
    h.handshake(SynOpts::all());
    h.exhaust_quickack();
    let id = h.id();
    (h, id)
}

/// The bytes of `chain`, in order.
fn bytes(chain: &PayloadChain<VecBuf>) -> Vec<u8> {
    chain
        .slices()
        .iter()
        .flat_map(|s| s.bytes().to_vec())
        .collect()
}

/// The peer's stream from `from` for `n` bytes, as `Fixture::seg` fills it.
fn expected(from: stack::seq::SeqNumber, n: usize) -> Vec<u8> {
    (0..n).map(|i| pattern(from + i)).collect()
}

/// The bytes taken are the received bytes, exact and in order, across several calls and
/// across a slice `recv` had consumed part of; the queue is then empty.
#[test]
fn recv_bufs_moves_the_received_bytes_exactly() {
    let (mut h, id) = established();
    let start = h.snd_nxt;
    h.data(10 * 1000, 1000, true);
    // `recv` consumes 300 bytes of the first slice: `recv_bufs` starts after them.
    assert_eq!(h.tcp.recv(id, |_| 300), Ok(300));
    let mut got = Vec::new();
    let mut chain = PayloadChain::new();
    assert_eq!(h.tcp.recv_bufs(id, 3000, &mut chain), Ok(2700));
    assert_eq!(
        chain.slice_count(),
        3,
        "700 + 1000 + 1000: whole slices only"
    );
    got.extend(bytes(&chain));
    let mut rest = PayloadChain::new();
    assert_eq!(h.tcp.recv_bufs(id, usize::MAX, &mut rest), Ok(7000));
    got.extend(bytes(&rest));
    assert_eq!(got, expected(start + 300, 9700));
    assert_eq!(h.tcp.readable_bytes(id), 0);
    let info = h.tcp.info(id).expect("conn");
    assert_eq!(info.unconsumed, 0);
    // Nothing left to give.
    let mut none = PayloadChain::new();
    assert_eq!(h.tcp.recv_bufs(id, usize::MAX, &mut none), Ok(0));
    assert!(none.is_empty());
}

/// The same input consumed by `recv` and taken by `recv_bufs`, in the same steps, gives
/// the same frames: the window reopens the same way and `tcp_cleanup_rbuf`'s
/// window-update ACKs leave (each call is one `tcp_cleanup_rbuf`, as each `recvmsg` is in
/// Linux, so reading in chunks may send more than one).
#[test]
fn recv_bufs_reopens_the_window_as_recv_does_tcp_cleanup_rbuf() {
    let run = |take: bool| -> (Vec<TcpMeta>, u64) {
        let (mut h, id) = established();
        for _ in 0..5 {
            h.data(40 * 1024, 1024, false);
            let _ = h.tx();
            h.advance(Duration::from_millis(50));
            let _ = h.tx();
        }
        let info = h.tcp.info(id).expect("info");
        assert!(info.window <= 60 * 1024, "window shrank to {}", info.window);
        let wu = h.acks(AckReason::WindowUpdate);
        if take {
            let mut n = 0;
            loop {
                let mut chain = PayloadChain::new();
                let k = h.tcp.recv_bufs(id, usize::MAX, &mut chain).expect("conn");
                if k == 0 {
                    break;
                }
                n += k;
            }
            assert_eq!(n, 200 * 1024);
        } else {
            // The same steps: a chain's worth of slices per call.
            let mut n = 0;
            loop {
                let k = h
                    .tcp
                    .recv(id, |sl| {
                        sl.iter().take(MAX_CHAIN).map(|s| usize::from(s.len)).sum()
                    })
                    .expect("conn");
                if k == 0 {
                    break;
                }
                n += k;
            }
            assert_eq!(n, 200 * 1024);
        }
        let out = h.tx();
        (out, h.acks(AckReason::WindowUpdate) - wu)
    };
    let (lent, wu_lent) = run(false);
    let (given, wu_given) = run(true);
    assert!(wu_given >= 1, "a window update");
    assert_eq!(wu_given, wu_lent);
    let last = given.last().expect("an ACK");
    assert!(
        u32::from(last.window) << 3 > 200 * 1024,
        "the window reopened from at most 60 KiB: {last:?}"
    );
    let fields = |v: &[TcpMeta]| -> Vec<(u32, u32, u16)> {
        v.iter()
            .map(|m| (m.seq.get(), m.ack.get(), m.window))
            .collect()
    };
    assert_eq!(fields(&given), fields(&lent));
}

/// Bounded: only whole slices, never more than `max_bytes` (a front slice longer than it
/// stays, and nothing changes), never more than the chain's free slots.
#[test]
fn recv_bufs_takes_whole_slices_within_its_bounds() {
    let (mut h, id) = established();
    let start = h.snd_nxt;
    let segs = MAX_CHAIN + 8;
    for _ in 0..segs {
        h.data(100, 100, false);
    }
    let queued = h.tcp.readable_bytes(id);
    assert_eq!(queued, segs * 100);
    let mut chain = PayloadChain::new();
    assert_eq!(h.tcp.recv_bufs(id, 99, &mut chain), Ok(0));
    assert!(chain.is_empty());
    assert_eq!(h.tcp.readable_bytes(id), queued, "nothing taken");
    assert_eq!(h.tcp.recv_bufs(id, 250, &mut chain), Ok(200));
    assert_eq!(chain.slice_count(), 2);
    // The chain has MAX_CHAIN - 2 slots left: that many slices, however many bytes allowed.
    assert_eq!(
        h.tcp.recv_bufs(id, usize::MAX, &mut chain),
        Ok((MAX_CHAIN - 2) * 100)
    );
    assert!(chain.is_full());
    assert_eq!(h.tcp.recv_bufs(id, usize::MAX, &mut chain), Ok(0));
    assert_eq!(bytes(&chain), expected(start, MAX_CHAIN * 100));
    assert_eq!(h.tcp.readable_bytes(id), 8 * 100);
    // Dropping the chain frees the buffers; the rest is still readable.
    drop(chain);
    let mut rest = PayloadChain::new();
    assert_eq!(h.tcp.recv_bufs(id, usize::MAX, &mut rest), Ok(800));
    assert_eq!(bytes(&rest), expected(start + MAX_CHAIN * 100, 800));
    // A connection that is gone has nothing to give.
    h.tcp.abort(id).expect("abort");
    let _ = h.tx();
    assert_eq!(
        h.tcp.recv_bufs(id, 1, &mut rest),
        Err(TcpError::UnknownConnection)
    );
}

/// The echo the API is for: the received buffers go straight back out with `send_bufs`,
/// and the peer gets its own bytes, exact and in order.
#[test]
fn recv_bufs_then_send_bufs_echoes_without_a_copy() {
    let (mut h, id) = established();
    let start = h.snd_nxt;
    h.data(20 * 1448, 1448, true);
    let mut chain = PayloadChain::new();
    let room = h.tcp.writable_bytes(id);
    assert_eq!(h.tcp.recv_bufs(id, room, &mut chain), Ok(20 * 1448));
    assert_eq!(h.tcp.send_bufs(h.now, id, &mut chain), Ok(20 * 1448));
    assert!(chain.is_empty(), "the send queue took every buffer");
    let mut echoed = Vec::new();
    let first = h.our_nxt;
    for _ in 0..4 {
        for (m, p) in h.tx_payload() {
            if !p.is_empty() {
                assert_eq!(m.seq, first + echoed.len());
                echoed.extend(p);
            }
        }
        h.ack_to(first + echoed.len());
        h.now += Duration::from_millis(1);
    }
    assert_eq!(echoed, expected(start, 20 * 1448));
    let info = h.tcp.info(id).expect("conn");
    assert_eq!((info.snd_queued, info.unconsumed), (0, 0));
}
