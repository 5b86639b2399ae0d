//! Sending data on an established connection: the send buffer, segmentation (MSS, PSH,
//! Nagle, cork, SWS avoidance), the peer's window, piggybacked ACKs, FIN after the queued
//! data and `Event::Writable` (RFC 9293 §3.7.4, §3.8.6.2.1, §3.10.7.4; Linux
//! `tcp_write_xmit`, `tcp_event_ack_sent`). Each test names what it checks.

use stack::ack::{AckPolicy, AckReason};
use stack::buf::{BufPool, PayloadChain, PayloadSlice};
use stack::mem::VecBuf;
use stack::seq::SeqNumber;
use stack::tcp::{ConnId, DropReason, Event, State, TcpConfig, TcpError};
use stack::time::Duration;
use stack::wire::TcpFlags;
use testkit::tcp::*;

/// The byte at offset `i` of what the application writes.
fn byte(i: usize) -> u8 {
    (i % 253) as u8
}

fn bytes(from: usize, n: usize) -> Vec<u8> {
    (from..from + n).map(byte).collect()
}

fn established(o: SynOpts) -> (Fixture, ConnId) {
    established_cfg(cfg(), o)
}

fn established_cfg(c: TcpConfig, o: SynOpts) -> (Fixture, ConnId) {
    let mut h = Fixture::with_cfg(c, AckPolicy::linux());
    h.window = 60_000;
    h.handshake(o);
    let id = h.id();
    (h, id)
}

/// SynOpts::all without window scaling, so the peer's window field is in bytes.
fn unscaled() -> SynOpts {
    SynOpts {
        wscale: None,
        ..SynOpts::all()
    }
}

fn send(h: &mut Fixture, id: ConnId, data: &[u8]) -> usize {
    h.tcp.send(h.now, id, data, &mut h.pool).expect("send")
}

/// RFC 9293 §3.3.1 / §3.10.7.4: data leaves in sequence order from ISS + 1, each
/// segment carrying the current ACK number; ACKs free the send buffer, byte for byte.
#[test]
fn data_sent_in_order_and_acked_rfc9293_3_10_7_4() {
    let (mut h, id) = established(SynOpts::all());
    let data = bytes(0, 20_000);
    assert_eq!(send(&mut h, id, &data), 20_000);
    let mut got = Vec::new();
    let start = h.our_nxt;
    let out = h.tx_payload();
    // RFC 6928: the initial window is 10 segments.
    assert_eq!(out.len(), 10);
    for (i, (m, p)) in out.iter().enumerate() {
        assert_eq!(m.seq, start + i * 1448);
        assert_eq!(m.ack, h.snd_nxt, "every data segment acknowledges");
        assert!(m.flags.contains(TcpFlags::ACK));
        got.extend_from_slice(p);
    }
    let acked = start + got.len();
    h.ack_to(acked);
    let info = h.tcp.info(id).expect("conn");
    assert_eq!(info.snd_una, acked);
    assert_eq!(info.snd_queued, 20_000 - 14_480);
    let out = h.tx_payload();
    for (m, p) in &out {
        assert_eq!(m.seq, start + got.len());
        got.extend_from_slice(p);
    }
    assert_eq!(got, data, "every byte, in order");
    h.ack_to(start + 20_000);
    assert!(h.tx().is_empty(), "nothing more: no ACK of an ACK");
    let info = h.tcp.info(id).expect("conn");
    assert_eq!((info.snd_queued, info.snd_unsent), (0, 0));
    assert_eq!(h.tcp.stats().bytes_sent, 20_000);
    assert_eq!(h.tcp.stats().data_segments_sent, 14);
    // The copies' buffers went back to the pool (freed at the next poll_tx).
    let _ = h.tx();
    assert_eq!(h.pool.in_use(), 0);
}

/// RFC 9293 §3.7.1 and Linux `tcp_current_mss`: segments are cut at the peer's MSS less
/// the options every data segment carries (12 bytes of timestamps); without an MSS
/// option the peer's MSS is 536 (MUST-15).
#[test]
fn mss_cut_less_options_rfc9293_3_7_1() {
    for (o, mss, hdr) in [
        (SynOpts::all(), 1448, 32),
        (
            SynOpts {
                mss: Some(1000),
                ..SynOpts::all()
            },
            988,
            32,
        ),
        (
            SynOpts {
                ts: false,
                ..SynOpts::all()
            },
            1460,
            20,
        ),
        (SynOpts::none(), 536, 20),
    ] {
        let (mut h, id) = established(o);
        assert_eq!(h.tcp.info(id).expect("conn").snd_mss, mss);
        send(&mut h, id, &bytes(0, 3 * mss as usize));
        let out = h.tx();
        assert_eq!(out.len(), 3, "{o:?}");
        for m in &out {
            assert_eq!(u32::from(m.payload_len), mss, "{o:?}");
            assert_eq!(m.header_len, hdr, "{o:?}");
        }
    }
}

/// RFC 9293 §3.9.1 (PSH) and Linux `tcp_push`: PSH on the last segment of each write only.
#[test]
fn psh_on_last_segment_of_a_write_rfc9293_3_9_1() {
    let (mut h, id) = established(SynOpts::all());
    send(&mut h, id, &bytes(0, 3000));
    let out = h.tx();
    let psh: Vec<bool> = out
        .iter()
        .map(|m| m.flags.contains(TcpFlags::PSH))
        .collect();
    assert_eq!(psh, vec![false, false, true]);
    assert_eq!(out[2].payload_len, 104);
    // Two writes queued together: the segment holding the first write's end carries
    // PSH, and so does the one ending the second.
    h.ack_to(h.our_nxt + 3000);
    send(&mut h, id, &bytes(0, 1000));
    send(&mut h, id, &bytes(0, 1000));
    let out = h.tx();
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|m| m.flags.contains(TcpFlags::PSH)));
}

/// RFC 9293 §3.7.4 / RFC 896 (Linux `tcp_nagle_check`): a small segment waits while an
/// earlier small one is unacknowledged, and leaves with the ACK.
#[test]
fn nagle_holds_small_segment_until_ack_rfc9293_3_7_4() {
    let (mut h, id) = established(SynOpts::all());
    send(&mut h, id, &bytes(0, 100));
    let out = h.tx();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].payload_len, 100);
    send(&mut h, id, &bytes(100, 100));
    send(&mut h, id, &bytes(200, 100));
    assert!(h.tx().is_empty(), "held while the first is unacknowledged");
    assert_eq!(h.tcp.info(id).expect("conn").snd_unsent, 200);
    h.ack_to(h.our_nxt + 100);
    let out = h.tx_payload();
    assert_eq!(out.len(), 1, "the held writes leave as one segment");
    assert_eq!(out[0].1, bytes(100, 200));
}

/// TCP_NODELAY (RFC 9293 §3.7.4: the application may turn Nagle off): small segments
/// leave at once.
#[test]
fn nodelay_sends_small_segments_at_once() {
    let (mut h, id) = established(SynOpts::all());
    h.tcp.set_nodelay(id, true).expect("nodelay");
    for i in 0..3 {
        send(&mut h, id, &bytes(i * 10, 10));
        let out = h.tx();
        assert_eq!(out.len(), 1, "write {i}");
        assert_eq!(out[0].payload_len, 10);
    }
}

/// TCP_CORK: small segments wait until a full one can be cut or the cork comes off.
#[test]
fn cork_holds_until_full_or_uncorked() {
    let (mut h, id) = established(SynOpts::all());
    h.tcp.set_cork(id, true).expect("cork");
    send(&mut h, id, &bytes(0, 500));
    assert!(h.tx().is_empty(), "corked, nothing in flight: still held");
    send(&mut h, id, &bytes(500, 1000));
    let out = h.tx_payload();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1, bytes(0, 1448), "a full segment goes");
    h.tcp.set_cork(id, false).expect("uncork");
    let out = h.tx_payload();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1, bytes(1448, 52));
}

/// RFC 9293 §3.8.6.2.1: a runt the window cuts short (not a full segment, not all the
/// queued data, under half the largest window) waits; the override timeout releases it
/// when nothing is in flight to bring an ACK.
#[test]
fn sender_sws_avoidance_rfc9293_3_8_6_2_1() {
    let (mut h, id) = established(unscaled());
    h.window = 500;
    h.ack_to(h.our_nxt);
    assert_eq!(h.tcp.info(id).expect("conn").snd_wnd, 500);
    send(&mut h, id, &bytes(0, 3000));
    assert!(h.tx().is_empty(), "500 of 60000: held");
    h.advance(Duration::from_millis(199));
    assert!(h.tx().is_empty());
    h.advance(Duration::from_millis(1));
    let out = h.tx_payload();
    assert_eq!(out.len(), 1, "the override timeout (4)");
    assert_eq!(out[0].1, bytes(0, 500));
    // The window opens to half the largest: (3) lets a runt of that size go.
    h.window = 30_000;
    h.ack_to(h.our_nxt + 500);
    let out = h.tx();
    let lens: Vec<u16> = out.iter().map(|m| m.payload_len).collect();
    assert_eq!(lens, vec![1448, 1052]);
}

/// RFC 9293 §3.8.6.1 / §3.10.7.4: a zero window stops sending (a probe asks for the
/// window); the window update (SND.WL1/SND.WL2 rule) restarts it.
#[test]
fn zero_window_stops_sending_rfc9293_3_8_6_1() {
    let (mut h, id) = established(unscaled());
    h.window = 0;
    h.ack_to(h.our_nxt);
    send(&mut h, id, &bytes(0, 2000));
    assert!(h.tx().is_empty());
    // The persist timer probes it (one RTO, 200 ms), with no data beyond the window.
    h.advance(Duration::from_millis(200));
    let probe = h.tx();
    assert_eq!(probe.len(), 1);
    assert_eq!(probe[0].payload_len, 0);
    assert_eq!(probe[0].seq, SeqNumber(h.our_nxt.get().wrapping_sub(1)));
    h.window = 60_000;
    h.ack_to(h.our_nxt);
    let out = h.tx_payload();
    let got: Vec<u8> = out.iter().flat_map(|(_, p)| p.clone()).collect();
    assert_eq!(got, bytes(0, 2000));
}

/// RFC 9293 §3.8.6.2.1 / §3.10.7.4: a window the peer shrinks (its right edge moves left
/// of SND.NXT) is never sent beyond; a window update from an older segment is ignored
/// (SND.WL1 < SEG.SEQ rule).
#[test]
fn shrunk_window_never_sent_beyond_rfc9293_3_10_7_4() {
    let (mut h, id) = established(unscaled());
    h.tcp.set_nodelay(id, true).expect("nodelay");
    send(&mut h, id, &bytes(0, 30_000));
    let start = h.our_nxt;
    assert_eq!(h.tx().len(), 10);
    // 2 segments acknowledged, the window shrinks to 2000: edge = una + 2000 < SND.NXT.
    h.window = 2000;
    h.ack_to(start + 2896);
    assert!(h.tx().is_empty(), "nothing beyond SND.UNA + SND.WND");
    // The window reopens to 1000 bytes past SND.NXT: a runt under half the largest
    // window, with data in flight to bring ACKs: SWS avoidance holds it.
    let nxt = start + 14_480;
    h.window = (nxt - (start + 2896)) as u16 + 1000;
    h.ack_to(start + 2896);
    assert!(h.tx().is_empty());
    // Two segments past SND.NXT: exactly those go.
    h.window = (nxt - (start + 2896)) as u16 + 2896;
    h.ack_to(start + 2896);
    let out = h.tx();
    assert_eq!(out.len(), 2);
    assert_eq!((out[0].seq, out[1].seq + 1448), (nxt, nxt + 2896));
    // An old segment (lower SEQ) cannot reopen the window.
    let mut old = h.seg(h.snd_nxt, TcpFlags::ACK, 0, 0);
    old.seq = SeqNumber(h.snd_nxt.get().wrapping_sub(1));
    old.window = 60_000;
    h.send(old);
    let out = h.tx();
    assert!(out.iter().all(|m| m.payload_len == 0), "{out:?}");
    assert_eq!(h.tcp.info(id).expect("conn").snd_wnd, 14_480);
}

/// Linux `tcp_event_ack_sent`: an ACK owed when data leaves rides on the data segment;
/// no pure ACK follows, and it is counted as piggybacked.
#[test]
fn piggybacked_ack_settles_the_owed_ack_tcp_event_ack_sent() {
    let (mut h, id) = established(SynOpts::all());
    // Quickack at connection start: the peer's request gets an immediate ACK, queued.
    h.data(300, 300, true);
    assert_eq!(h.read_all().len(), 300);
    send(&mut h, id, &bytes(0, 700));
    let out = h.tx();
    assert_eq!(out.len(), 1, "one frame carries both: {out:?}");
    assert_eq!(out[0].payload_len, 700);
    assert_eq!(out[0].ack, h.snd_nxt);
    assert_eq!(h.tcp.ack_stats().piggybacked, 1);
    assert_eq!(h.tcp.ack_stats().get(AckReason::Quick), 0);
    // Past the delayed-ACK ceiling (the data is then retransmitted on its RTO, which is
    // no pure ACK either).
    h.advance(Duration::from_millis(500));
    assert!(
        h.tx().iter().all(|m| m.payload_len > 0),
        "no pure ACK follows"
    );

    // A delayed ACK (quickack spent) is settled too: its timer sends nothing.
    h.ack_to(h.our_nxt + 700);
    h.exhaust_quickack();
    let before = h.tcp.ack_stats().total();
    h.data(300, 300, true);
    assert!(h.tx().is_empty(), "the ACK waits on the delayed-ACK timer");
    h.read_all();
    send(&mut h, id, &bytes(700, 50));
    let out = h.tx();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].payload_len, out[0].ack), (50, h.snd_nxt));
    h.advance(Duration::from_millis(300));
    assert!(
        h.tx().iter().all(|m| m.payload_len > 0),
        "the delayed ACK was carried"
    );
    assert_eq!(h.tcp.ack_stats().total(), before);
    assert_eq!(h.tcp.ack_stats().piggybacked, 2);
}

/// RFC 9293 §3.10.4 (CLOSE, and a half-close by `shutdown`): the FIN follows the queued
/// data, on the last data segment (Linux `tcp_send_fin`), and the connection still
/// receives afterwards.
#[test]
fn fin_after_queued_data_on_shutdown_rfc9293_3_10_4() {
    let (mut h, id) = established(SynOpts::all());
    send(&mut h, id, &bytes(0, 20_000));
    h.tcp.shutdown(h.now, id).expect("shutdown");
    assert_eq!(
        h.tcp.send(h.now, id, b"x", &mut h.pool),
        Err(TcpError::WriteClosed)
    );
    let start = h.our_nxt;
    let out = h.tx();
    assert_eq!(out.len(), 10);
    assert!(out.iter().all(|m| !m.flags.contains(TcpFlags::FIN)));
    assert_eq!(h.tcp.info(id).expect("conn").state, State::FinWait1);
    h.ack_to(start + 14_480);
    let out = h.tx();
    let last = out.last().expect("segments");
    assert!(last.flags.contains(TcpFlags::FIN));
    assert_eq!(last.seq + usize::from(last.payload_len), start + 20_000);
    assert_eq!(
        out.iter()
            .filter(|m| m.flags.contains(TcpFlags::FIN))
            .count(),
        1
    );
    // Half-closed: data from the peer still arrives and is acknowledged.
    h.ack_to(start + 20_001);
    assert_eq!(h.tcp.info(id).expect("conn").state, State::FinWait2);
    h.data(100, 100, false);
    assert_eq!(h.read_all().len(), 100);
    assert_eq!(h.tx().len(), 1);
}

/// `close` with queued data: FIN after it, not RST (nothing unread is lost).
#[test]
fn close_sends_queued_data_then_fin() {
    let (mut h, id) = established(SynOpts::all());
    send(&mut h, id, &bytes(0, 2000));
    h.tcp.close(h.now, id).expect("close");
    let out = h.tx_payload();
    let got: Vec<u8> = out.iter().flat_map(|(_, p)| p.clone()).collect();
    assert_eq!(got, bytes(0, 2000));
    assert!(out.last().expect("seg").0.flags.contains(TcpFlags::FIN));
    assert_eq!(h.acks(AckReason::Fin), 1);
}

/// `Event::Writable` (Linux `sk_stream_write_space`): once a write found the buffer full,
/// raised once when acknowledgments free half as much as is still queued.
#[test]
fn writable_after_full_sk_stream_write_space() {
    let c = TcpConfig {
        snd_buf: 10_000,
        ..cfg()
    };
    let (mut h, id) = established_cfg(c, SynOpts::all());
    let _ = h.tcp.events().count();
    assert_eq!(send(&mut h, id, &bytes(0, 20_000)), 10_000);
    assert_eq!(send(&mut h, id, &bytes(0, 10)), 0, "full");
    assert_eq!(h.tcp.writable_bytes(id), 0);
    let start = h.our_nxt;
    let _ = h.tx();
    h.ack_to(start + 2896);
    assert!(
        h.tcp.events().all(|e| e != Event::Writable(id)),
        "7104 queued"
    );
    h.ack_to(start + 4344);
    let ev: Vec<Event> = h.tcp.events().collect();
    assert_eq!(ev, vec![Event::Writable(id)]);
    h.ack_to(start + 5792);
    assert_eq!(h.tcp.events().count(), 0, "edge-triggered");
    assert_eq!(h.tcp.writable_bytes(id), 5792);
}

/// `Event::Writable` after a write the pool cut short (Linux `sk_stream_write_space`
/// follows freed memory): the queue had room and nothing was in flight, so no
/// acknowledgment could raise it; `poll_tx` does once the pool has a buffer again, once.
#[test]
fn writable_after_a_write_the_pool_cut_short_sk_stream_write_space() {
    let (mut h, id) = established(SynOpts::all());
    let _ = h.tcp.events().count();
    let mut held = Vec::new();
    while let Some(b) = h.pool.alloc(64) {
        held.push(b);
    }
    assert_eq!(send(&mut h, id, &bytes(0, 5000)), 0, "no buffer");
    assert!(
        h.tcp.writable_bytes(id) > 0,
        "the queue has room: the pool cut it"
    );
    assert_eq!(h.tcp.stats().send_alloc_failures, 1);
    assert!(h.tx().is_empty());
    assert_eq!(h.tcp.events().count(), 0, "the pool is still empty");
    drop(held);
    let _ = h.tx();
    let ev: Vec<Event> = h.tcp.events().collect();
    assert_eq!(ev, vec![Event::Writable(id)]);
    let _ = h.tx();
    assert_eq!(h.tcp.events().count(), 0, "edge-triggered");
    assert_eq!(send(&mut h, id, &bytes(0, 5000)), 5000);
    let got: Vec<u8> = h.tx_payload().into_iter().flat_map(|(_, p)| p).collect();
    assert_eq!(got, bytes(0, 5000));
}

/// Zero-copy `send_bufs`: whole buffers are queued as they are and sent byte-exact; what
/// does not fit stays with the caller, in order.
#[test]
fn send_bufs_takes_whole_buffers_and_leaves_the_rest() {
    let c = TcpConfig {
        snd_slices: 2,
        ..cfg()
    };
    let (mut h, id) = established_cfg(c, SynOpts::all());
    let mut chain = PayloadChain::new();
    for i in 0..3 {
        assert!(chain.push(padded_slice(10, i * 600, 600)).is_ok());
    }
    let n = h.tcp.send_bufs(h.now, id, &mut chain).expect("send_bufs");
    assert_eq!(n, 1200);
    assert_eq!((chain.slice_count(), chain.len()), (1, 600));
    let out = h.tx_payload();
    let got: Vec<u8> = out.iter().flat_map(|(_, p)| p.clone()).collect();
    assert_eq!(got, bytes(0, 1200));
    h.ack_to(h.our_nxt + 1200);
    assert_eq!(h.tcp.send_bufs(h.now, id, &mut chain), Ok(600));
    let out = h.tx_payload();
    assert_eq!(out[0].1, bytes(1200, 600));
}

/// RFC 9293 §3.8.6.1 (Linux `tcp_probe_timer`): while the window stays zero the persist
/// timer probes with backoff (an ACK just left of the window, never data beyond it);
/// after `max_retries` probes the connection is reset.
#[test]
fn persist_probes_back_off_then_give_up_rfc9293_3_8_6_1() {
    let c = TcpConfig {
        max_retries: 3,
        ..cfg()
    };
    let (mut h, id) = established_cfg(c, unscaled());
    h.window = 0;
    h.ack_to(h.our_nxt);
    send(&mut h, id, &bytes(0, 100));
    assert!(h.tx().is_empty());
    let mut at = Vec::new();
    let t0 = h.now;
    for _ in 0..40 {
        h.advance(Duration::from_millis(100));
        for m in h.tx() {
            if m.flags.contains(TcpFlags::RST) {
                at.push(None);
            } else {
                assert_eq!(m.payload_len, 0, "never data beyond a zero window");
                at.push(Some((h.now - t0).as_millis()));
                // The peer answers every probe with its window, still zero.
                h.ack_to(h.our_nxt);
            }
        }
    }
    assert_eq!(
        at,
        vec![Some(200), Some(600), Some(1400), None],
        "200 ms, then doubling; reset after 3 probes"
    );
    assert!(h.tcp.info(id).is_none());
    assert_eq!(h.tcp.stats().window_probes, 3);
    assert_eq!(h.tcp.stats().drops(DropReason::PersistTimeout), 1);
}

/// A pool that puts each segment's payload in place itself (as weir-gen's stamped pool
/// and mbuf chains by reference do), modelled on a `VecPool`: it copies the bytes into
/// the frame where a stamped buffer would already hold them, and sums them once.
struct Prefilling {
    inner: stack::mem::VecPool,
    prefilled: usize,
}

impl Prefilling {
    fn new() -> Self {
        Prefilling {
            inner: stack::mem::VecPool::new(64, 2048),
            prefilled: 0,
        }
    }
}

/// `n` bytes of the `bytes` pattern from `from`, in a buffer whose data starts with
/// `pad` bytes of something else (the slice's offset), as a buffer handed to `send_bufs`.
fn padded_slice(pad: usize, from: usize, n: usize) -> PayloadSlice<VecBuf> {
    let mut frame = vec![0xee; pad];
    frame.extend_from_slice(&bytes(from, n));
    PayloadSlice {
        buf: VecBuf::from_vec(frame),
        off: pad as u16,
        len: n as u16,
    }
}

impl BufPool for Prefilling {
    type Buf = VecBuf;
    fn alloc(&mut self, len: usize) -> Option<VecBuf> {
        self.inner.alloc(len)
    }
    fn prefills(&self) -> bool {
        true
    }
    fn alloc_with_payload(
        &mut self,
        hdr_len: usize,
        src: &VecBuf,
        off: usize,
        len: usize,
        at: usize,
    ) -> Option<stack::buf::Prefilled<VecBuf>> {
        use stack::buf::PacketBuf;
        let payload = src.data().get(off..off + len)?;
        // The address TCP took when it queued the buffer is where the bytes are.
        assert_eq!(at, payload.as_ptr() as usize, "the payload's address");
        let mut b = self.inner.alloc(hdr_len + len)?;
        b.data_mut()[hdr_len..].copy_from_slice(payload);
        self.prefilled += 1;
        let payload_sum = stack::wire::checksum::fold(stack::wire::checksum::add(0, payload));
        Some(stack::buf::Prefilled {
            buf: b,
            payload_sum,
        })
    }
}

/// Frames whose payload the pool put in place (`BufPool::alloc_with_payload`) are the
/// frames a copy builds, byte for byte (checksums, PSH and all); a segment whose bytes
/// span two queued buffers is copied.
#[test]
fn prefilled_payload_frames_equal_copied_ones() {
    let run = |prefill: bool| {
        let (mut h, id) = established(SynOpts::all());
        let mut chain = PayloadChain::new();
        // Two writes, the first 100 bytes short of 3 segments: the third segment
        // straddles the two buffers.
        let first = 3 * 1448 - 100;
        for (i, (from, n)) in [(0usize, first), (first, 3620)].into_iter().enumerate() {
            assert!(chain.push(padded_slice(7 + i, from, n)).is_ok());
            assert_eq!(h.tcp.send_bufs(h.now, id, &mut chain), Ok(n));
        }
        let mut pool = Prefilling::new();
        let mut out: stack::driver::Burst<VecBuf> = stack::driver::Burst::new();
        if prefill {
            h.tcp.poll_tx(h.now, &mut pool, &mut out, false);
        } else {
            h.tcp.poll_tx(h.now, &mut pool.inner, &mut out, false);
        }
        let frames: Vec<Vec<u8>> = out.into_iter().map(VecBuf::into_vec).collect();
        (frames, pool.prefilled)
    };
    let (copied, none) = run(false);
    let (prefilled, n) = run(true);
    assert_eq!(none, 0);
    assert_eq!(copied.len(), 6, "7864 bytes in segments of 1448");
    assert_eq!(prefilled, copied, "the same frames, byte for byte");
    // Segments 0 and 1 lie in the first buffer, 3-5 in the second; segment 2 spans both.
    assert_eq!(n, 5);
    let local = stack::wire::LocalAddrs::new(PEER_MAC, Some(PEER_IP4), None);
    for f in &prefilled {
        let stack::wire::parse::Parsed::Tcp(_) =
            stack::wire::parse::parse(f, stack::buf::RxChecksum::default(), &local)
        else {
            panic!("a frame with bad checksums");
        };
    }
}

/// A buffer the peer has acknowledged in part still hands the pool the address of the
/// byte a segment starts at (`BufPool::alloc_with_payload`'s `at`): the retransmission
/// of a segment behind the acknowledged part carries the right bytes. (An address that
/// stayed at the buffer's old first byte sent other bytes of a shared pattern.)
#[test]
fn prefilled_payload_after_a_partial_ack_comes_from_where_the_segment_starts() {
    let (mut h, id) = established(SynOpts::all());
    let start = h.our_nxt;
    let mut chain = PayloadChain::new();
    let n = 5 * 1448;
    assert!(chain.push(padded_slice(7, 0, n)).is_ok());
    assert_eq!(h.tcp.send_bufs(h.now, id, &mut chain), Ok(n));
    let mut pool = Prefilling::new();
    let mut out: stack::driver::Burst<VecBuf> = stack::driver::Burst::new();
    assert_eq!(h.tcp.poll_tx(h.now, &mut pool, &mut out, false), 5);
    out.clear();
    // The first two segments arrive; the rest is lost. The buffer is cut at its front.
    h.advance(Duration::from_millis(1));
    h.ack_to(start + 2 * 1448);
    let _ = h.tx();
    // The retransmission timer sends the third segment again, from the cut buffer.
    let rto = h.tcp.info(id).expect("conn").rto;
    h.now += rto;
    h.tcp.handle_timeout(h.now);
    h.tcp.poll_tx(h.now, &mut pool, &mut out, false);
    let local = stack::wire::LocalAddrs::new(PEER_MAC, Some(PEER_IP4), None);
    let frames: Vec<Vec<u8>> = out.into_iter().map(VecBuf::into_vec).collect();
    let rtx = frames
        .iter()
        .find_map(|f| {
            match stack::wire::parse::parse(f, stack::buf::RxChecksum::default(), &local) {
                stack::wire::parse::Parsed::Tcp(m) if m.seq == start + 2 * 1448 => {
                    let off = usize::from(m.payload_off);
                    Some(f[off..off + usize::from(m.payload_len)].to_vec())
                }
                _ => None,
            }
        })
        .expect("the third segment is sent again, checksums right");
    assert_eq!(rtx, bytes(2 * 1448, 1448));
    assert_eq!(
        pool.prefilled, 6,
        "every segment, the retransmission too, put in place"
    );
}

/// `set_push(false)`: no segment carries PSH, where by default the last segment of each
/// write does (RFC 9293 §3.9.1).
#[test]
fn set_push_off_sends_no_psh() {
    for on in [true, false] {
        let (mut h, id) = established(SynOpts::all());
        h.tcp.set_push(id, on).expect("known connection");
        assert_eq!(send(&mut h, id, &bytes(0, 3000)), 3000);
        let out = h.tx();
        assert_eq!(out.len(), 3);
        let pushed = out
            .iter()
            .filter(|m| m.flags.contains(TcpFlags::PSH))
            .count();
        assert_eq!(pushed, usize::from(on));
    }
}

/// A pure ACK that a data segment follows within one delayed-ACK time is counted as
/// useless (it would have ridden on that segment); one followed by data only after the
/// delayed-ACK time is not, and neither is an ACK that the data carried itself.
#[test]
fn pure_ack_followed_by_data_within_the_delack_time_is_useless() {
    let (mut h, id) = established(SynOpts::all());
    // Quickack: the request is acknowledged at once, before the application answers.
    h.data(300, 300, true);
    let out = h.tx();
    assert_eq!(
        (out.len(), out[0].payload_len),
        (1, 0),
        "a pure ACK: {out:?}"
    );
    h.read_all();
    h.advance(Duration::from_millis(1));
    send(&mut h, id, &bytes(0, 100));
    assert_eq!(h.tx().len(), 1);
    assert_eq!(h.tcp.ack_stats().useless, 1);
    h.ack_to(h.our_nxt + 100);

    // The next request's pure ACK, then the answer only after the delayed-ACK time.
    h.data(300, 300, true);
    assert_eq!(h.tx().len(), 1);
    h.read_all();
    h.advance(Duration::from_millis(500));
    let _ = h.tx();
    send(&mut h, id, &bytes(100, 100));
    assert!(!h.tx().is_empty());
    assert_eq!(
        h.tcp.ack_stats().useless,
        1,
        "the answer came too late to carry it"
    );
}

/// `SO_SNDBUF` per connection (`Tcp::set_snd_buf`): `send` takes no more than the new
/// bound, and more once ACKs drain the queue below it.
#[test]
fn set_snd_buf_bounds_what_send_takes_so_sndbuf() {
    let (mut h, id) = established(SynOpts::all());
    assert_eq!(h.tcp.set_snd_buf(id, 64 << 10), Ok(64 << 10));
    assert_eq!(send(&mut h, id, &bytes(0, 200_000)), 64 << 10);
    assert_eq!(h.tcp.writable_bytes(id), 0);
    let out = h.tx_payload();
    let acked: usize = out.iter().map(|(_, p)| p.len()).sum();
    h.ack_to(h.our_nxt + acked);
    assert_eq!(h.tcp.writable_bytes(id), acked);
    // Below one MSS is raised to one MSS.
    let mss = h.tcp.info(id).expect("info").snd_mss;
    assert_eq!(h.tcp.set_snd_buf(id, 1), Ok(mss));
    // A connection that is gone is named as such.
    h.tcp.abort(id).expect("abort");
    let _ = h.tx();
    assert_eq!(h.tcp.set_snd_buf(id, 1), Err(TcpError::UnknownConnection));
}

/// `SO_RCVBUF` per connection (`Tcp::set_rcv_buf`): the window offered is the new buffer
/// less what is held, clamped to what the window scale can advertise.
#[test]
fn set_rcv_buf_bounds_the_window_offered_so_rcvbuf() {
    let (mut h, id) = established(SynOpts::all());
    assert_eq!(h.tcp.set_rcv_buf(id, 64 << 10), Ok(64 << 10));
    h.data(10 * 1448, 1448, true);
    let _ = h.tx();
    let w = h.tcp.info(id).expect("info").window;
    assert!(
        w <= (64 << 10) - 10 * 1448 + 127,
        "window {w} within 64 KiB less 10 segments"
    );
    let ws = h.tcp.info(id).expect("info").rcv_wscale;
    assert_eq!(h.tcp.set_rcv_buf(id, u32::MAX), Ok(65535 << ws));
}

/// `TCP_MAXSEG` on an established connection (`Tcp::set_mss`): later segments carry at
/// most the MSS given less the timestamps option, never more than before.
#[test]
fn set_mss_cuts_later_segments_tcp_maxseg() {
    let (mut h, id) = established(SynOpts::all());
    assert_eq!(h.tcp.set_mss(id, 1000), Ok(1000 - 12));
    send(&mut h, id, &bytes(0, 5000));
    let out = h.tx_payload();
    assert!(!out.is_empty());
    assert!(
        out.iter().all(|(_, p)| p.len() <= 988),
        "segments of at most 988 bytes"
    );
    assert_eq!(out[0].1.len(), 988);
    // Never raised above the peer's MSS, and at least 88 less the options.
    assert_eq!(h.tcp.set_mss(id, 9000), Ok(988));
    assert_eq!(h.tcp.set_mss(id, 10), Ok(88 - 12));
}
