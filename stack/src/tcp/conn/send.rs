//! The send side of a connection: RFC 9293 §3.3.1's send sequence variables, the send
//! window (SND.WND, SND.WL1, SND.WL2), the bounded send queue, and the decision of how
//! much to send now.
//!
//! Read first: RFC 9293 §3.8.6.2.1 (sender SWS avoidance), §3.7.4 and RFC 896 (Nagle),
//! §3.10.7.4 fifth step (the window update), RFC 6928 (the initial window), Linux
//! `tcp_write_xmit`, `tcp_nagle_check`, `tcp_bound_to_half_wnd`, `tcp_current_mss`,
//! `sk_stream_write_space`; then docs/decisions/send-path.md (why the queue holds
//! buffers, not bytes).
//!
//! The queue holds the application's bytes in the buffers they came in
//! ([`PayloadSlice`]s), from SND.UNA to the last byte written; a buffer leaves, into the
//! core's free batch, once SND.UNA passes its last byte. Its bounds are bytes
//! ([`TcpConfig::snd_buf`](crate::tcp::TcpConfig::snd_buf)) and buffers
//! ([`TcpConfig::snd_slices`](crate::tcp::TcpConfig::snd_slices)); its storage is
//! allocated once, on the connection's first write, so a connection that never sends
//! costs nothing here.
//!
//! [`Snd::cut`] decides the next segment: at most the MSS in use, the usable window and
//! what the congestion window leaves; a segment smaller than the MSS waits under Nagle,
//! the cork or SWS avoidance (see [`Hold`]).
//!
//! Loss and congestion are the building blocks' (`stack::tcp::recovery`, `cc`, `rtt`),
//! called here as their "Wiring" sections say: `Conn::sender_ack` from the ACK step,
//! `Conn::xmit_timeout` when the retransmission, RACK reordering or tail loss probe
//! timer fires, `Conn::next_rtx`, `Conn::tlp_segment` and `Conn::data_sent` from
//! `output.rs` when a segment is built. A SACK peer gets RACK-TLP (RFC 8985) or RFC
//! 6675's DupThresh (`TcpConfig::loss_detection`), a peer without SACK NewReno. The
//! persist timer is here (`Conn::persist_timeout`).
//!
//! # One timer, three deadlines for outstanding data
//!
//! Linux runs the RTO, the RACK reordering timer, the tail loss probe and the
//! zero-window probe on one timer armed with one kind at a time (`icsk_pending`:
//! ICSK_TIME_RETRANS, REO_TIMEOUT, LOSS_PROBE, PROBE0); when a reordering or probe
//! timeout has taken it, `tcp_rearm_rto` recomputes the RTO from the oldest segment's
//! send time (`tcp_rto_delta_us`). weir's send timer ([`Snd::timer`] and
//! [`Snd::timer_kind`]) is that one timer, but the three deadlines of outstanding data
//! are kept apart: `Snd::rto_at`, the reordering deadline in `Recovery`, and
//! `Snd::pto_at`. [`Snd::arm_xmit`] arms the timer for the earliest of them after every
//! change, with its kind; the others stay where they were, so none is lost, and a probe
//! or a reordering timeout never moves the RTO (RFC 8985 §7.3: after a probe the RTO is
//! re-armed, and it stays the last resort). The conn's wake-up deadline reads only
//! `Snd::timer`, so the receive path pays nothing for the extra deadlines.

use std::collections::VecDeque;

use std::ops::ControlFlow;

use super::{Conn, Ctx};
use crate::buf::{FreeBatch, PacketBuf, PayloadChain, PayloadSlice};
use crate::segment::Segment;
use crate::seq::SeqNumber;
use crate::tcp::cc::AckSample;
use crate::tcp::cc::{initial_window, Cc, CongestionControl};
use crate::tcp::recovery::Recovery;
use crate::tcp::recovery::{AckInput, NextSeg, Phase, Probe, TlpAck};
use crate::tcp::rtt::RttEstimator;
use crate::tcp::rtt::WEIR_TS_TICK;
use crate::tcp::{DropReason, SackLossDetection};
use crate::time::{Duration, Instant};
use crate::wire::TcpFlags;

/// RFC 1122 §4.2.3.4: the SWS override timeout "should be in the range 0.1 - 1.0
/// seconds"; weir takes 200 ms, Linux's `TCP_RTO_MIN` and the delayed-ACK ceiling, so a
/// held runt never waits longer than a peer's delayed ACK would.
pub(crate) const SWS_OVERRIDE: Duration = Duration::from_millis(200);

/// The earliest a tail loss probe fires after it is armed. Linux `tcp_schedule_loss_probe`
/// adds `TCP_TIMEOUT_MIN` (2 jiffies, 2 ms at HZ = 1000) to 2·SRTT, so that a sub-
/// millisecond SRTT does not probe a flight whose ACKs are still on their way; weir
/// takes it as a floor under RFC 8985 §7.2's PTO.
pub(crate) const TLP_TIMEOUT_MIN: Duration = Duration::from_millis(2);

/// One buffer of the send queue.
pub(crate) struct SndSlice<B> {
    pub(crate) s: PayloadSlice<B>,
    /// The end of the last write whose last byte is in this buffer (the sequence number
    /// just past it): the segment that carries it gets PSH (RFC 9293 §3.9.1, Linux
    /// `tcp_mark_push`).
    push_at: Option<SeqNumber>,
    /// Bytes after the slice that `send` may still copy into: a buffer `send` allocated.
    /// Zero for buffers handed over by `send_bufs` (their other bytes are not ours).
    room: u16,
    /// Where the slice's first byte is in memory (an address, not a pointer: it is only
    /// handed to the pool, `BufPool::alloc_with_payload`, never read through), taken
    /// when the buffer was queued, while its header was in cache: a pool that puts a
    /// segment's payload in place by where it lies then needs no read of a buffer
    /// header that with many flows has long left the cache by the time the segment is
    /// built.
    at: usize,
}

/// The address of `s`'s first byte ([`SndSlice::at`]).
fn address_of<B: PacketBuf>(s: &PayloadSlice<B>) -> usize {
    (s.buf.data().as_ptr() as usize).wrapping_add(usize::from(s.off))
}

/// Why [`Snd::cut`] sends nothing now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Nothing queued beyond SND.NXT.
    Empty,
    /// The peer's window is full (SND.NXT at or beyond SND.UNA + SND.WND; a window the
    /// peer shrank is never sent beyond).
    Window,
    /// The congestion window is full (RFC 5681 §3.1: never more than cwnd in flight).
    Cwnd,
    /// Nagle (RFC 9293 §3.7.4, RFC 896) as Linux `tcp_nagle_check` has it: a small
    /// segment waits while an earlier small segment is unacknowledged.
    Nagle,
    /// Corked: a small segment waits until a full one can go or the cork is removed.
    Cork,
    /// Sender SWS avoidance (RFC 9293 §3.8.6.2.1): a runt the window cuts short waits
    /// for the window to open, or for the override timer.
    Sws,
    /// The retransmission queue has no free slot (`TcpConfig::snd_slices` segments
    /// outstanding): the next ACK frees some.
    Queue,
}

/// The send side of one connection.
///
/// The retransmission queue, RTT estimate and congestion control of the send path join
/// here (step 3 of docs/decisions/send-path.md): their input is the ACK step
/// (`Conn::check_ack` in `tcp/input.rs`), which moves SND.UNA and the window; their output
/// is built by `tcp/output.rs`.
pub(crate) struct Snd<B> {
    /// SND.UNA: the oldest sequence number not acknowledged.
    pub(crate) una: SeqNumber,
    /// SND.NXT: the next sequence number to send.
    pub(crate) nxt: SeqNumber,
    /// SND.WND: the peer's window (scaled), from the segment SND.WL1/WL2 name.
    pub(crate) wnd: u32,
    /// SND.WL1, SND.WL2: the sequence and acknowledgment numbers of the segment the
    /// window was last taken from (RFC 9293 §3.10.7.4).
    pub(crate) wl1: SeqNumber,
    pub(crate) wl2: SeqNumber,
    /// MAX.SND.WND: the largest window the peer has offered (RFC 5961 §5.2).
    pub(crate) max_wnd: u32,
    /// The peer's window scale shift (0 if not negotiated).
    pub(crate) wscale: u8,
    /// Our timestamp clock's per-flow offset (RFC 7323 §5.4).
    pub(crate) ts_offset: u32,
    /// Payload bytes per full segment: the peer's MSS (bounded by ours) less the options
    /// every data segment carries (`tcp_current_mss`).
    pub(crate) mss: u32,
    /// TCP header bytes of a data segment (20, or 32 with timestamps).
    pub(crate) hdr_len: u32,
    /// The congestion window in bytes: RFC 6928's initial window, [`initial_window`], at
    /// first, then the congestion controller's (`cc`) after each of its events.
    pub(crate) cwnd: u32,
    /// The send queue: bytes from `q_seq` to `end`.
    q: VecDeque<SndSlice<B>>,
    /// The sequence number of the queue's first byte.
    q_seq: SeqNumber,
    /// The sequence number after the last byte written (where our FIN goes).
    pub(crate) end: SeqNumber,
    q_bytes: u32,
    /// Bounds: bytes and buffers (`TcpConfig::snd_buf`, `snd_slices`).
    buf: u32,
    max_slices: usize,
    /// Where the last segment's copy ended: `(index in q, sequence number of that
    /// buffer's first byte)`, so the next copy starts there instead of at the front.
    cursor: (usize, SeqNumber),
    /// The end of the last segment sent smaller than the MSS (Linux `snd_sml`, Minshall's
    /// refinement of Nagle).
    sml: SeqNumber,
    /// TCP_NODELAY: no Nagle.
    pub(crate) nodelay: bool,
    /// TCP_CORK: small segments wait.
    pub(crate) cork: bool,
    /// PSH on the segment that carries each write's last byte (`Tcp::set_push`).
    pub(crate) push_writes: bool,
    /// A write found the queue full: `Event::Writable` is owed when space frees.
    pub(crate) writable_armed: bool,
    /// A write found the pool empty (the queue had room) and the connection waits in
    /// `Tcp::starved` for `poll_tx` to find a buffer again.
    pub(crate) pool_starved: bool,
    /// A write found the core's send budget spent (`TcpConfig::snd_core_slices`) and the
    /// connection waits in `Tcp::budget_starved` for the core's send queues to drain.
    pub(crate) budget_starved: bool,
    /// The send side's timer and what it is for, as Linux's one retransmit timer and
    /// `icsk_pending`: the SYN's before the handshake completes; after it the SWS
    /// override or the persist timer while nothing is outstanding, and while data is
    /// outstanding the earliest of `rto_at`, the RACK reordering deadline and `pto_at`
    /// ([`Snd::arm_xmit`]; see the module documentation).
    pub(crate) timer: Option<Instant>,
    pub(crate) timer_kind: SndTimer,
    /// RFC 6298's retransmission timer: runs while data is outstanding.
    pub(crate) rto_at: Option<Instant>,
    /// RFC 8985 §7.2's probe timeout (RACK mode).
    pub(crate) pto_at: Option<Instant>,
    /// The PTO fired and chose this probe; the next `poll_tx` builds it (RFC 8985 §7.3).
    pub(crate) tlp_due: Option<Probe>,
    /// Loss detection for a SACK peer (`TcpConfig::loss_detection`).
    pub(crate) loss_detection: SackLossDetection,
    /// The SWS override timeout fired: the held runt may go.
    pub(crate) override_fired: bool,
    /// The RTT estimate and RTO (RFC 6298): the SYN's and the data's retransmission
    /// timer.
    pub(crate) rtt: RttEstimator,
    /// Loss detection over the segments sent (`stack::tcp::recovery`), allocated when the
    /// first data segment is sent (with room for `max_slices` segments): a connection
    /// that never sends has none, and the connection stays small for the receive path.
    pub(crate) rec: Option<Box<Recovery>>,
    /// Congestion control (`stack::tcp::cc`); `cwnd` follows it after every event.
    pub(crate) cc: Option<Cc>,
    /// A retransmission recovery asked for at once (fast retransmit, RFC 5681 §3.2 step
    /// 4 / RFC 6675 §5 (4.3)): sent even if cwnd would not allow it.
    pub(crate) rtx_now: Option<SeqNumber>,
    /// Since the last ACK: a segment waited for cwnd, and the most that was in flight
    /// (Linux `is_cwnd_limited`, `max_packets_out`; `cc::is_cwnd_limited`).
    pub(crate) cwnd_limited: bool,
    pub(crate) max_flight: u32,
    /// RTO expiries in a row before the connection is reset (`TcpConfig::max_retries`);
    /// also the most zero-window probes in a row while the window stays shut.
    pub(crate) max_retries: u8,
    /// Zero-window probes sent since data last went out, and one is to be built.
    pub(crate) probes: u8,
    pub(crate) probe_due: bool,
}

/// What [`Snd::timer`] is armed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SndTimer {
    /// RFC 9293 §3.8.6.2.1 (4): the SWS override, armed while a runt is held with
    /// nothing in flight (no ACK would release it).
    Override,
    /// RFC 9293 §3.8.1, RFC 6298 §5: our SYN (or, after a simultaneous open, our
    /// SYN-ACK) is retransmitted when it expires.
    Syn,
    /// RFC 6298 §5: the retransmission timer, running while data is outstanding.
    Rto,
    /// RFC 9293 §3.8.6.1: the persist timer, running while the peer's window is zero,
    /// data waits and nothing is in flight (no ACK would bring a window update).
    Persist,
    /// RFC 8985 §6.3: the RACK reordering timer (Linux ICSK_TIME_REO_TIMEOUT), the
    /// earliest of the outstanding data's deadlines.
    Rack,
    /// RFC 8985 §7.2: the tail loss probe timeout (Linux ICSK_TIME_LOSS_PROBE), the
    /// earliest of the outstanding data's deadlines.
    Tlp,
}

impl SndTimer {
    /// One of the outstanding data's timers ([`Snd::arm_xmit`]'s).
    fn is_xmit(self) -> bool {
        matches!(self, SndTimer::Rto | SndTimer::Rack | SndTimer::Tlp)
    }
}

impl<B: PacketBuf> Snd<B> {
    /// The send side with ISS `iss` (data starts at ISS + 1) and SND.UNA = SND.NXT =
    /// `una`, nothing queued, the
    /// window `wnd` taken from a segment at `wl1` (RFC 9293 §3.10.7.3-4: SND.WL1 is the
    /// sequence number of the segment that set the window).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        iss: SeqNumber,
        una: SeqNumber,
        wnd: u32,
        wl1: SeqNumber,
        wscale: u8,
        ts_offset: u32,
        mss: u32,
        hdr_len: u32,
        buf: u32,
        max_slices: usize,
        rtt: RttEstimator,
    ) -> Self {
        let data = iss + 1;
        Snd {
            una,
            nxt: una,
            wnd,
            wl1,
            wl2: una,
            max_wnd: wnd.max(1),
            wscale,
            ts_offset,
            mss,
            hdr_len,
            cwnd: initial_window(mss),
            q: VecDeque::new(),
            q_seq: data,
            end: data,
            q_bytes: 0,
            buf,
            max_slices: max_slices.max(1),
            cursor: (0, data),
            sml: una,
            nodelay: false,
            cork: false,
            push_writes: true,
            writable_armed: false,
            pool_starved: false,
            budget_starved: false,
            timer: None,
            timer_kind: SndTimer::Override,
            rto_at: None,
            pto_at: None,
            tlp_due: None,
            loss_detection: SackLossDetection::default(),
            override_fired: false,
            rtt,
            rec: None,
            cc: None,
            rtx_now: None,
            cwnd_limited: false,
            max_flight: 0,
            max_retries: crate::tcp::rtt::LINUX_TCP_RETRIES2 as u8,
            probes: 0,
            probe_due: false,
        }
    }

    /// Bytes in flight for the congestion window: RFC 6675's pipe (SACKed and lost
    /// segments excluded) once segments are tracked, else SND.NXT - SND.UNA.
    pub(crate) fn pipe(&self) -> u32 {
        match &self.rec {
            Some(r) => u32::try_from(r.pipe()).unwrap_or(u32::MAX),
            None => (self.nxt - self.una) as u32,
        }
    }

    /// `cwnd` from the congestion controller, after one of its events.
    pub(crate) fn sync_cwnd(&mut self) {
        if let Some(cc) = &self.cc {
            self.cwnd = cc.cwnd();
        }
    }

    /// Bytes queued and not yet sent.
    #[inline(always)]
    pub(crate) fn unsent(&self) -> u32 {
        if self.nxt < self.end {
            (self.end - self.nxt) as u32
        } else {
            0
        }
    }

    /// Bytes in the queue (sent and unacknowledged, plus unsent).
    pub(crate) fn queued(&self) -> u32 {
        self.q_bytes
    }

    /// Sets the byte bound of the send buffer (`Tcp::set_snd_buf`).
    pub(crate) fn set_buf(&mut self, bytes: u32) {
        self.buf = bytes;
    }

    /// Bytes `send` could add now: within the byte bound, and what the tail buffer's room
    /// and the free buffer slots hold at [`Snd::write_copy`]'s one MSS per buffer (0 when
    /// either bound is reached).
    pub(crate) fn room(&self) -> u32 {
        self.room_within(usize::MAX)
    }

    /// [`Snd::room`] with at most `new_slices` more buffers (what the core's send budget,
    /// `TcpConfig::snd_core_slices`, has left): the tail buffer's room needs none.
    pub(crate) fn room_within(&self, new_slices: usize) -> u32 {
        let slots = self.max_slices.saturating_sub(self.q.len()).min(new_slices) as u64;
        let by_slots = u64::from(self.tail_room()) + slots * u64::from(self.copy_cap());
        u64::from(self.buf.saturating_sub(self.q_bytes)).min(by_slots) as u32
    }

    /// Whether [`Snd::write_bufs`] would take a buffer of `len` bytes, by the queue's own
    /// bounds alone.
    pub(crate) fn takes_buf(&self, len: u32) -> bool {
        self.q.len() < self.max_slices && self.q_bytes.saturating_add(len) <= self.buf
    }

    /// Buffers in the queue (what the core's send budget counts).
    pub(crate) fn slices(&self) -> usize {
        self.q.len()
    }

    /// The size of the buffers `send` copies into: one MSS.
    fn copy_cap(&self) -> u32 {
        self.mss.clamp(1, u32::from(u16::MAX))
    }

    fn tail_room(&self) -> u32 {
        self.q.back().map_or(0, |t| u32::from(t.room))
    }

    fn reserve(&mut self) {
        if self.q.capacity() == 0 {
            // The connection's first write: its queue, allocated once and never grown.
            self.q.reserve_exact(self.max_slices);
        }
    }

    /// `send`'s copy: `data` into the tail buffer's room, then into buffers from `alloc`
    /// of `mss` bytes each, while the bounds allow. Returns the bytes taken.
    pub(crate) fn write_copy(
        &mut self,
        data: &[u8],
        mut alloc: impl FnMut(usize) -> Option<B>,
    ) -> usize {
        let limit = (self.room() as usize).min(data.len());
        if limit == 0 {
            return 0;
        }
        self.reserve();
        let mut taken = 0;
        if let Some(t) = self.q.back_mut() {
            let n = usize::from(t.room).min(limit);
            if n > 0 {
                let at = usize::from(t.s.off) + usize::from(t.s.len);
                if let Some(dst) = t.s.buf.data_mut().get_mut(at..at + n) {
                    dst.copy_from_slice(&data[..n]);
                    t.s.len += n as u16;
                    t.room -= n as u16;
                    taken = n;
                }
            }
        }
        let cap = self.copy_cap() as usize;
        while taken < limit && self.q.len() < self.max_slices {
            let Some(mut b) = alloc(cap) else {
                break;
            };
            let n = cap.min(limit - taken);
            match b.data_mut().get_mut(..n) {
                Some(dst) => dst.copy_from_slice(&data[taken..taken + n]),
                None => break,
            }
            let room = (b.data().len().min(cap) - n) as u16;
            let s = PayloadSlice {
                buf: b,
                off: 0,
                len: n as u16,
            };
            let at = address_of(&s);
            self.q.push_back(SndSlice {
                s,
                push_at: None,
                room,
                at,
            });
            taken += n;
        }
        self.wrote(taken as u32);
        taken
    }

    /// `send_bufs`: whole buffers from the front of `chain` while the bounds allow (and at
    /// most `new_slices` of them, the core's send budget); the rest stay in `chain`, in
    /// order. Returns the bytes taken.
    pub(crate) fn write_bufs(&mut self, chain: &mut PayloadChain<B>, new_slices: usize) -> usize {
        let mut bytes = 0u32;
        let mut k = 0;
        let free_slots = self.max_slices.saturating_sub(self.q.len()).min(new_slices);
        let room = self.buf.saturating_sub(self.q_bytes);
        for s in chain.slices() {
            if k >= free_slots || bytes + u32::from(s.len) > room {
                break;
            }
            bytes += u32::from(s.len);
            k += 1;
        }
        if k == 0 {
            return 0;
        }
        self.reserve();
        for s in chain.drain_front(k) {
            if s.len > 0 {
                let at = address_of(&s);
                self.q.push_back(SndSlice {
                    s,
                    push_at: None,
                    room: 0,
                    at,
                });
            }
        }
        self.wrote(bytes);
        bytes as usize
    }

    /// A write of `n` bytes ended: the queue grows and its last buffer marks the push.
    fn wrote(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.q_bytes += n;
        self.end += n as usize;
        let end = self.end;
        if !self.push_writes {
            return;
        }
        if let Some(t) = self.q.back_mut() {
            t.push_at = Some(end);
        }
    }

    /// SND.UNA moved to `una`: the buffers wholly below it go to `spent`, the first one
    /// left is trimmed. Returns `true` when the application should hear
    /// `Event::Writable`: a write found the queue full, and now it has space again by
    /// Linux's measure (`sk_stream_write_space`: free space at least half of what is
    /// queued), in bytes and in buffers.
    pub(crate) fn acked(&mut self, una: SeqNumber, spent: &mut FreeBatch<B>) -> bool {
        let upto = una.min(self.end);
        if upto <= self.q_seq {
            return false;
        }
        let mut left = (upto - self.q_seq) as u32;
        self.q_seq = upto;
        self.q_bytes -= left;
        let mut popped = 0;
        while left > 0 {
            let Some(front) = self.q.front_mut() else {
                break;
            };
            let l = u32::from(front.s.len);
            if l <= left {
                left -= l;
                if let Some(sl) = self.q.pop_front() {
                    spent.push(sl.s.buf);
                }
                popped += 1;
            } else {
                // Part of this buffer is still unacknowledged: its first byte, and where
                // that byte lies, move on.
                front.s.off += left as u16;
                front.s.len -= left as u16;
                front.at = front.at.wrapping_add(left as usize);
                left = 0;
            }
        }
        if self.q.is_empty() {
            // Back to the storage's first slots, as the receive queue does.
            self.q.clear();
        }
        self.cursor = match self.cursor.0.checked_sub(popped) {
            Some(0) | None => (0, self.q_seq),
            Some(i) => (i, self.cursor.1),
        };
        if !self.writable_armed {
            return false;
        }
        let free_bytes = self.buf.saturating_sub(self.q_bytes);
        let free_slots = self.max_slices.saturating_sub(self.q.len());
        let ok = free_bytes > 0
            && free_bytes >= self.q_bytes / 2
            && free_slots > 0
            && free_slots >= self.q.len() / 2;
        if ok {
            self.writable_armed = false;
        }
        ok
    }

    /// Linux `tcp_bound_to_half_wnd`: no segment larger than half the largest window the
    /// peer offered (so a "full" segment is at most half its window: RFC 9293
    /// §3.8.6.2.1's Fs = 1/2 case is then a full segment), but not below 68 bytes of IP
    /// datagram payload.
    pub(crate) fn mss_now(&self) -> u32 {
        let cutoff = if self.max_wnd > 536 {
            self.max_wnd / 2
        } else {
            self.max_wnd
        };
        if cutoff > 0 && self.mss > cutoff {
            cutoff.max(68u32.saturating_sub(self.hdr_len))
        } else {
            self.mss
        }
    }

    /// How many bytes to send from SND.NXT now (`tcp_write_xmit`'s tests), or why none.
    /// `fin`: a FIN follows the queued data (it rides the last segment, which Nagle and
    /// the cork never hold: Linux `tcp_nagle_test` sends a FIN segment at once).
    pub(crate) fn cut(&self, fin: bool) -> Result<u32, Hold> {
        let unsent = self.unsent();
        if unsent == 0 {
            return Err(Hold::Empty);
        }
        let mss = self.mss_now();
        // Never beyond SND.UNA + SND.WND (RFC 9293 §3.8.6.2.1 U; a shrunk window leaves
        // no usable space at all).
        let right = self.una + self.wnd as usize;
        let usable = if right > self.nxt {
            (right - self.nxt) as u32
        } else {
            0
        };
        let in_flight = (self.nxt - self.una) as u32;
        let wnd_len = unsent.min(mss).min(usable);
        if wnd_len == 0 {
            return Err(Hold::Window);
        }
        // RFC 5681 §3.1: no more than cwnd in flight (RFC 6675's pipe once segments are
        // tracked); a segment the congestion window would cut short waits for the next
        // ACK rather than go as a runt.
        if self.cwnd.saturating_sub(self.pipe()) < wnd_len {
            return Err(Hold::Cwnd);
        }
        if self.rec.as_ref().is_some_and(|r| r.queue().is_full()) {
            return Err(Hold::Queue);
        }
        let len = wnd_len;
        // RFC 9293 §3.8.6.2.1 (1): a full segment goes.
        if len == mss {
            return Ok(len);
        }
        let last = len == unsent;
        if fin && last {
            return Ok(len);
        }
        // The cork holds a runt, but not past the override timeout while nothing is in
        // flight: no ACK would come to release it (Linux tcp(7): TCP_CORK's 200 ms
        // ceiling; `tcp_write_wakeup` sends what the window takes, cork or not).
        if self.cork && !self.override_fired {
            return Err(Hold::Cork);
        }
        // RFC 9293 §3.7.4 / RFC 896 (the bracketed conditions of §3.8.6.2.1 (2), (3)):
        // with data unacknowledged a small segment waits, unless TCP_NODELAY. As Linux
        // (`tcp_nagle_check` -> `tcp_minshall_check`), "unacknowledged data" is a small
        // segment sent and not yet acknowledged (Minshall's refinement): the tail of a
        // write behind full segments goes at once, so a request/response exchange does
        // not wait a round trip for each reply's last segment, and small segments are
        // still at most one per round trip.
        if in_flight > 0 && !self.nodelay && self.sml > self.una && self.sml <= self.nxt {
            return Err(Hold::Nagle);
        }
        // (2): every write is pushed, and all of the queued data fits: D <= U.
        if last {
            return Ok(len);
        }
        // (3): at least Fs = 1/2 of the largest window can go.
        if u64::from(len) * 2 >= u64::from(self.max_wnd) {
            return Ok(len);
        }
        // (4): the override timeout fired.
        if self.override_fired {
            return Ok(len);
        }
        Err(Hold::Sws)
    }

    /// How many full segments [`Snd::cut`] would let go one after another from SND.NXT
    /// now, each `Ok(mss_now)` (at most `max`): the unsent bytes, the usable window and
    /// what cwnd leaves over the pipe (which grows by each of them), in whole segments,
    /// none while the retransmission queue is full. Nagle, the cork and SWS hold only
    /// segments shorter than the MSS, so they never stop a full one. A send unit builds
    /// these without asking again for each (`Conn::build_unit_rest`).
    pub(crate) fn full_run(&self, max: u32) -> u32 {
        let mss = self.mss_now();
        if mss == 0 || self.rec.as_ref().is_some_and(|r| r.queue().is_full()) {
            return 0;
        }
        let right = self.una + self.wnd as usize;
        let usable = if right > self.nxt {
            (right - self.nxt) as u32
        } else {
            0
        };
        let room = self
            .unsent()
            .min(usable)
            .min(self.cwnd.saturating_sub(self.pipe()));
        (room / mss).min(max)
    }

    /// Whether our FIN, after the last queued byte, is inside the peer's window. It
    /// takes a sequence number (RFC 9293 §3.3.1: SEG.LEN counts it), so it is held like
    /// data (Linux `tcp_snd_wnd_test` compares the segment's `end_seq`, FIN included).
    pub(crate) fn fin_fits(&self) -> bool {
        self.end < self.una + self.wnd as usize
    }

    /// A segment of `len` bytes from SND.NXT was built: SND.NXT moves past it, and a
    /// segment smaller than the MSS is remembered for Nagle (`tcp_minshall_update`).
    pub(crate) fn sent(&mut self, len: u32) {
        let small = len < self.mss_now();
        self.nxt += len as usize;
        if small {
            self.sml = self.nxt;
        }
        if self.timer_kind == SndTimer::Override {
            self.timer = None;
        }
        self.override_fired = false;
    }

    /// Arms the persist timer, if no timer runs or only the SWS override's (RFC 9293
    /// §3.8.6.1; Linux `tcp_check_probe_timer`): one RTO from now, doubled per probe
    /// already sent (`tcp_probe0_when`), at most the RTO's maximum.
    pub(crate) fn arm_persist(&mut self, now: Instant) {
        if self.timer.is_some() && self.timer_kind != SndTimer::Override {
            return;
        }
        let max = self.rtt.config().max_rto.as_nanos();
        let when = self
            .rtt
            .rto()
            .as_nanos()
            .saturating_mul(1 << self.probes.min(32))
            .min(max);
        self.timer = Some(now + Duration::from_nanos(when));
        self.timer_kind = SndTimer::Persist;
    }

    /// Arms the SWS override timer if no timer runs (RFC 1122 §4.2.3.4).
    pub(crate) fn arm_override(&mut self, now: Instant) {
        if self.timer.is_none() {
            self.timer = Some(now + SWS_OVERRIDE);
            self.timer_kind = SndTimer::Override;
        }
    }

    /// Arms [`Snd::timer`] for the earliest of the outstanding data's deadlines, with its
    /// kind: the RTO (`rto_at`), the RACK reordering timer (kept by `rec`) and the PTO
    /// (`pto_at`); each stays where it is, so the one that fires next is always the
    /// earliest and none is lost. At a tie the RTO goes first, as it ends the other two
    /// (RFC 8985 §7.1: RTO recovery resets TLP; `Recovery::on_rto` drops the reordering
    /// timer), then the reordering timer. With none of them the timer stops, unless it
    /// runs for something else (the persist or SWS override timer, the SYN's).
    pub(crate) fn arm_xmit(&mut self) {
        let reo = self.rec.as_ref().and_then(|r| r.reorder_timer());
        let mut next = self.rto_at.map(|t| (t, SndTimer::Rto));
        for (at, kind) in [(reo, SndTimer::Rack), (self.pto_at, SndTimer::Tlp)] {
            if let Some(t) = at {
                if next.is_none_or(|(n, _)| t < n) {
                    next = Some((t, kind));
                }
            }
        }
        match next {
            Some((t, kind)) => {
                self.timer = Some(t);
                self.timer_kind = kind;
            }
            None if self.timer_kind.is_xmit() => self.timer = None,
            None => {}
        }
    }

    /// The PTO to arm at `now` (RFC 8985 §7.2, `Recovery::pto_deadline`: RACK mode,
    /// data in flight, not in recovery; capped by the RTO), at least
    /// [`TLP_TIMEOUT_MIN`] away. `None` while segments are SACKed (§7.2: "unless ...
    /// segments have been SACKed (i.e., RACK.segs_sacked is not zero)": RACK has the
    /// feedback a probe would get; Linux schedules no probe outside the Open and CWR
    /// states, and SACKed segments mean Disorder). `None` as well when it would not come
    /// before the RTO: a probe at the RTO's own deadline, which the probe does not move
    /// (§7.3), would be followed at once by the RTO sending the same bytes again, so the
    /// RTO alone is armed (with the 200 ms minimum RTO, a lone segment's PTO, 2·SRTT +
    /// WCDelAckT, is mostly capped so).
    pub(crate) fn pto_for(&self, now: Instant) -> Option<Instant> {
        let r = self.rec.as_ref()?;
        if r.queue().sacked_segs() > 0 {
            return None;
        }
        let at = r
            .pto_deadline(now, self.rtt.srtt(), self.rto_at)?
            .max(now + TLP_TIMEOUT_MIN);
        match self.rto_at {
            Some(rto) if at >= rto => None,
            _ => Some(at),
        }
    }

    /// The length of the new segment a tail loss probe may send now (RFC 8985 §7.3: "a
    /// previously unsent segment exists and the receive window allows"): up to the MSS
    /// from SND.NXT, all of it inside the peer's window (Linux `tcp_send_loss_probe` ->
    /// `tcp_write_xmit` with `push_one` = 2: neither cwnd nor Nagle hold it, the window
    /// test does); 0 when there is none or the retransmission queue is full.
    pub(crate) fn probe_len(&self) -> u32 {
        let want = self.unsent().min(self.mss_now());
        if want == 0 || self.rec.as_ref().is_some_and(|r| r.queue().is_full()) {
            return 0;
        }
        let right = self.una + self.wnd as usize;
        if right > self.nxt && (right - self.nxt) as u32 >= want {
            want
        } else {
            0
        }
    }

    /// Copies `dst.len()` queued bytes starting at `seq` into `dst`; returns whether a
    /// write ends inside them (the segment gets PSH). `false` and nothing copied when
    /// they are not all queued (cannot happen for a cut from [`Snd::cut`]).
    /// The one queued buffer that holds all of `[seq, seq + len)`, with the offset of
    /// `seq` in its data, whether the segment carries a write's end (PSH) and the address
    /// of `seq`'s byte ([`SndSlice::at`]), for a pool that puts the payload in place
    /// itself (`BufPool::alloc_with_payload`). `None` when the bytes span buffers (they
    /// are copied, [`Snd::copy_out`]) or are not queued.
    pub(crate) fn locate(
        &mut self,
        seq: SeqNumber,
        len: usize,
    ) -> Option<(&B, usize, bool, usize)> {
        let end = seq + len;
        if len == 0 || seq < self.q_seq || end > self.end {
            return None;
        }
        let (mut i, mut start) = if seq >= self.cursor.1 && self.cursor.0 < self.q.len() {
            self.cursor
        } else {
            (0, self.q_seq)
        };
        loop {
            let l = usize::from(self.q.get(i)?.s.len);
            let sl_end = start + l;
            if seq >= sl_end {
                i += 1;
                start = sl_end;
                continue;
            }
            if end > sl_end {
                return None;
            }
            self.cursor = (i, start);
            let sl = self.q.get(i)?;
            let psh = sl.push_at.is_some_and(|p| p > seq && p <= end);
            let from = seq - start;
            return Some((
                &sl.s.buf,
                usize::from(sl.s.off) + from,
                psh,
                sl.at.wrapping_add(from),
            ));
        }
    }

    pub(crate) fn copy_out(&mut self, seq: SeqNumber, dst: &mut [u8]) -> Option<bool> {
        let end = seq + dst.len();
        if seq < self.q_seq || end > self.end {
            return None;
        }
        let (mut i, mut start) = if seq >= self.cursor.1 && self.cursor.0 < self.q.len() {
            self.cursor
        } else {
            (0, self.q_seq)
        };
        let mut psh = false;
        let mut at = seq;
        let mut out = 0usize;
        while out < dst.len() {
            let sl = self.q.get(i)?;
            let l = usize::from(sl.s.len);
            let sl_end = start + l;
            if at >= sl_end {
                i += 1;
                start = sl_end;
                continue;
            }
            let from = at - start;
            let n = (l - from).min(dst.len() - out);
            dst[out..out + n].copy_from_slice(sl.s.bytes().get(from..from + n)?);
            if let Some(p) = sl.push_at {
                if p > at && p <= at + n {
                    psh = true;
                }
            }
            out += n;
            at += n;
            self.cursor = (i, start);
        }
        Some(psh)
    }

    /// Frees every queued buffer (the connection is gone).
    pub(crate) fn clear(&mut self, spent: &mut FreeBatch<B>) {
        for sl in self.q.drain(..) {
            spent.push(sl.s.buf);
        }
        self.q_bytes = 0;
        self.q_seq = self.end;
        self.cursor = (0, self.end);
        self.rto_at = None;
        self.pto_at = None;
        self.tlp_due = None;
    }
}

/// When our TSval that `tsecr` echoes was stamped (for RACK's test of a retransmission's
/// ACK, RFC 8985 §6.2 step 2), as the last instant of its tick, at most `now`: a
/// transmission in that tick counts as the one echoed, which is Linux's comparison in
/// ticks (`tcp_skb_spurious_retrans`: TSecr before the retransmission's stamp). `None`
/// for an echo from the future.
fn tsecr_instant(now: Instant, ts_now: u32, tsecr: u32) -> Option<Instant> {
    let ago = ts_now.wrapping_sub(tsecr);
    if ago > i32::MAX as u32 {
        return None;
    }
    let tick = WEIR_TS_TICK.as_nanos();
    let at = (now.as_nanos() / tick).checked_sub(u64::from(ago))?;
    Some(Instant::from_nanos((at + 1) * tick - 1).min(now))
}

impl<B: PacketBuf> Conn<B> {
    /// The ACK step's part for the send path (RFC 9293 §3.10.7.4 fifth step, in the order
    /// of Linux `tcp_ack`), for a connection that has sent data: loss detection
    /// (`Recovery::on_ack`: the cumulative ACK, the SACK blocks, duplicate ACKs, entering
    /// and leaving recovery), the RTT sample (the send time of the newest segment newly
    /// acknowledged and never retransmitted, else TSecr: RFC 6298 §3, RFC 7323 §4), then
    /// congestion control (RFC 5681 §3, `cc`; a loss a tail loss probe repaired is a
    /// congestion event, RFC 8985 §7.4.2), the retransmission timer restarted or stopped
    /// (RFC 6298 §5.2-5.3), and with RACK the reordering timer and the PTO (RFC 8985
    /// §6.3, §7.2). `wnd_changed`: the window field differs from the last ACK's (RFC 5681
    /// §2 (e): then it is no duplicate ACK).
    pub(crate) fn sender_ack(
        &mut self,
        now: Instant,
        seg: &Segment<B>,
        wnd_changed: bool,
        ctx: &mut Ctx<B>,
    ) {
        let ts_now = self.ts_now(now);
        let sack_ok = self.rcv.sack_ok;
        let snd = &mut self.snd;
        let flight = snd.pipe();
        let (srtt, min_rtt) = (snd.rtt.srtt(), snd.rtt.min_rtt().unwrap_or(Duration::ZERO));
        let Some(r) = snd.rec.as_mut() else {
            return;
        };
        // Our FIN is not in the queue (its own timer, `close.rs`): the ACK of it counts as
        // the ACK of the data before it.
        let ack = seg.ack.min(r.queue().nxt());
        let blocks = if sack_ok {
            &seg.opts.sack[..usize::from(seg.opts.sack_count).min(seg.opts.sack.len())]
        } else {
            &[]
        };
        let f = seg.flags;
        let ts = seg.opts.timestamp.filter(|_| self.rcv.ts_ok);
        let input = AckInput {
            ack,
            sack: blocks,
            dup_eligible: seg.payload.is_empty()
                && !f.intersects(TcpFlags::SYN | TcpFlags::FIN)
                && !wnd_changed,
            tsecr: ts.and_then(|t| tsecr_instant(now, ts_now, t.tsecr)),
            srtt,
            min_rtt,
        };
        let o = match r.on_ack(now, &input) {
            Ok(o) => o,
            Err(_) => {
                // An ACK below SND.UNA: old, ignored (RFC 9293 §3.10.7.4); the check above
                // RFC 5961 §5.2's range already refused one above SND.NXT.
                return;
            }
        };
        ctx.stats.sack_blocks_refused += o.sack.refused.len() as u64;
        ctx.stats.reneging += u64::from(o.reneging);
        let acked = o.acked.bytes as u32;
        if acked > 0 {
            snd.rtt.on_snd_una_advanced();
            let sample = match o.acked.rtt_sent {
                Some(t) => snd.rtt.sample_from_ack(now, t, o.acked.retransmitted),
                None => Err(crate::tcp::rtt::SampleRefused::Retransmitted),
            };
            if sample.is_err() {
                if let Some(t) = seg.opts.timestamp {
                    let s = snd
                        .rtt
                        .sample_from_tsecr(now, ts_now, t.tsecr, WEIR_TS_TICK, true);
                    if s.is_ok() {
                        // RFC 8985 §7.3 condition 2: an RTT sample since the last probe.
                        r.on_rtt_sample();
                    }
                }
            }
        }
        if o.tlp == TlpAck::LossRepaired {
            ctx.stats.tlp_loss_repaired += 1;
        }
        if let Some(cc) = snd.cc.as_mut() {
            if o.tlp == TlpAck::LossRepaired && cc.on_congestion_event(now, flight) {
                // RFC 8985 §7.4.2: the probe repaired a loss, which congestion control
                // must hear of; Linux `tcp_process_tlp_ack` enters CWR and ends it at
                // once (`tcp_init_cwnd_reduction`, `tcp_end_cwnd_reduction`).
                cc.on_recovery_exit(now);
            }
            if o.entered {
                cc.on_congestion_event(now, flight);
            }
            if o.exited.is_some() {
                cc.on_recovery_exit(now);
            }
            if acked > 0 {
                let limited = crate::tcp::cc::is_cwnd_limited(
                    cc.cwnd(),
                    cc.ssthresh(),
                    snd.max_flight,
                    snd.cwnd_limited,
                );
                cc.on_ack(&AckSample {
                    now,
                    bytes_acked: acked,
                    srtt: snd.rtt.srtt().unwrap_or(Duration::ZERO),
                    cwnd_limited: limited,
                });
                snd.cwnd_limited = false;
                snd.max_flight = snd.pipe();
            }
        }
        snd.sync_cwnd();
        if o.entered {
            ctx.stats.fast_recoveries += 1;
        }
        if let Some(seq) = o.retransmit {
            snd.rtx_now = Some(seq);
        }
        let outstanding = snd.rec.as_ref().map_or(0, |r| r.queue().outstanding());
        if outstanding == 0 {
            // RFC 6298 §5.2: all data acknowledged, the timer stops; so does the PTO
            // (RFC 8985 §7.2: nothing in flight).
            snd.rto_at = None;
            snd.pto_at = None;
            snd.tlp_due = None;
        } else if acked > 0 {
            // §5.3: restart it for the rest.
            snd.rto_at = Some(snd.rtt.deadline(now));
        }
        if o.entered {
            // RFC 8985 §7.1: fast recovery ends the probe episode; a probe not yet
            // built is not sent.
            snd.tlp_due = None;
        }
        if o.reorder_timer.is_some() {
            // The reordering timer waits for a segment RACK will soon call lost: no probe
            // meanwhile (Linux `tcp_rack_mark_lost` arms ICSK_TIME_REO_TIMEOUT in place of
            // the probe and clears FLAG_SET_XMIT_TIMER).
            snd.pto_at = None;
        } else if acked > 0 || o.entered {
            // RFC 8985 §7.2: an ACK of new data restarts the PTO (none in recovery).
            snd.pto_at = snd.pto_for(now);
        }
        snd.arm_xmit();
        let lost = snd.rec.as_ref().is_some_and(|r| r.queue().lost_segs() > 0);
        if lost || snd.rtx_now.is_some() {
            self.mark_due(ctx);
        }
    }

    /// The retransmission timer expired (RFC 6298 §5.4-5.7, Linux
    /// `tcp_retransmit_timer`): back off; after `TcpConfig::max_retries` expiries in a
    /// row the connection is reset and the application hears `Event::Reset` (`Break`);
    /// otherwise every outstanding segment is deemed lost (RFC 6675 §5.1), congestion
    /// control takes the loss window (RFC 5681 §3.1) and the first is retransmitted at
    /// the next `poll_tx`.
    fn rto_timeout(&mut self, now: Instant, ctx: &mut Ctx<B>) -> ControlFlow<()> {
        self.snd.rto_at = None;
        let outstanding = self.snd.rec.as_ref().map_or(0, |r| r.queue().outstanding());
        if outstanding == 0 {
            self.snd.pto_at = None;
            return ControlFlow::Continue(());
        }
        self.snd.rtt.on_timeout();
        if self.snd.rtt.should_give_up(u32::from(self.snd.max_retries)) {
            ctx.stats.dropped(DropReason::RetriesExhausted);
            self.abort(ctx);
            return ControlFlow::Break(());
        }
        ctx.stats.rto_timeouts += 1;
        let flight = self.snd.pipe();
        if let Some(r) = self.snd.rec.as_mut() {
            r.on_rto();
        }
        if let Some(cc) = self.snd.cc.as_mut() {
            cc.on_rto(now, flight);
        }
        self.snd.sync_cwnd();
        self.snd.rtx_now = None;
        if self.snd.wnd == 0 {
            // The peer shut its window with data outstanding: no retransmission fits
            // (`next_rtx`), so this expiry probes the window (RFC 9293 §3.8.6.1) with the
            // zero-window probe, SEG.SEQ = SND.UNA - 1, which the peer must answer.
            self.snd.probe_due = true;
        }
        // RFC 8985 §7.1: RTO recovery ends the probe episode (`on_rto` reset TLP and the
        // reordering timer); RFC 6298 §5.6: the timer restarts with the backed-off RTO.
        self.snd.pto_at = None;
        self.snd.tlp_due = None;
        self.snd.rto_at = Some(self.snd.rtt.deadline(now));
        self.mark_due(ctx);
        ControlFlow::Continue(())
    }

    /// The send timer fired for outstanding data (kind [`SndTimer::Rto`], `Rack` or
    /// `Tlp`): whichever of the three deadlines is due is handled, the RTO before the
    /// others (it supersedes them), and the timer is armed for what remains
    /// ([`Snd::arm_xmit`]). `Break`: retries exhausted, the connection was reset.
    pub(crate) fn xmit_timeout(&mut self, now: Instant, ctx: &mut Ctx<B>) -> ControlFlow<()> {
        let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
        let reo = self.snd.rec.as_ref().and_then(|r| r.reorder_timer());
        if due(self.snd.rto_at) {
            self.rto_timeout(now, ctx)?;
        } else if due(reo) {
            self.reorder_timeout(now, ctx);
        } else if due(self.snd.pto_at) {
            self.tlp_timeout(ctx);
        }
        self.snd.arm_xmit();
        ControlFlow::Continue(())
    }

    /// The RACK reordering timer fired (RFC 8985 §6.3, Linux `tcp_rack_reo_timeout`):
    /// RACK marks lost what has now waited out the reordering window, fast recovery
    /// starts if it was not running (congestion control reduces, and the first lost
    /// segment goes at once, as RFC 6675 §5 (4.3) does on entering), and the lost
    /// segments are retransmitted as cwnd allows at the next `poll_tx`.
    fn reorder_timeout(&mut self, now: Instant, ctx: &mut Ctx<B>) {
        let flight = self.snd.pipe();
        let snd = &mut self.snd;
        let (srtt, min_rtt) = (snd.rtt.srtt(), snd.rtt.min_rtt().unwrap_or(Duration::ZERO));
        let Some(r) = snd.rec.as_mut() else {
            return;
        };
        let t = r.on_reorder_timeout(now, srtt, min_rtt);
        ctx.stats.rack_reorder_timeouts += 1;
        if t.entered {
            ctx.stats.fast_recoveries += 1;
            snd.tlp_due = None;
            if let Some(NextSeg::Retransmit { seq, .. }) = r.next_seg(false) {
                snd.rtx_now = Some(seq);
            }
            if let Some(cc) = snd.cc.as_mut() {
                cc.on_congestion_event(now, flight);
            }
            snd.sync_cwnd();
        }
        if t.loss.lost > 0 {
            self.mark_due(ctx);
        }
    }

    /// The probe timeout fired (RFC 8985 §7.3, Linux `tcp_send_loss_probe`): TLP picks
    /// the probe (one new segment if the send queue and the peer's window allow, else
    /// the last segment sent; none while a probe is unacknowledged or before an RTT
    /// sample since the last), which the next `poll_tx` builds
    /// ([`Conn::tlp_segment`]). The PTO is not re-armed: the RTO is the last resort, at
    /// the deadline it had.
    fn tlp_timeout(&mut self, ctx: &mut Ctx<B>) {
        self.snd.pto_at = None;
        let new_data = self.snd.probe_len() > 0;
        let Some(r) = self.snd.rec.as_ref() else {
            return;
        };
        if r.queue().outstanding() == 0 {
            return;
        }
        match r.on_pto(new_data) {
            Probe::Skip(_) => ctx.stats.tlp_skipped += 1,
            p => {
                self.snd.tlp_due = Some(p);
                self.mark_due(ctx);
            }
        }
    }

    /// The segment of the probe [`Conn::tlp_timeout`] chose, as `(seq, len, rtx)`: new
    /// data ([`Snd::probe_len`] from SND.NXT), or, when that cannot go (the window or
    /// the queue changed since), the last segment sent, at most its last MSS (split off
    /// first: RFC 8985 §7.3, Linux `tcp_send_loss_probe`, which also falls back to the
    /// last segment when new data cannot be sent). `None`: nothing to probe with (the
    /// last segment is SACKed, or cannot be split).
    pub(crate) fn tlp_segment(&mut self, p: Probe) -> Option<(SeqNumber, u32, bool)> {
        let snd = &mut self.snd;
        if p == Probe::NewData {
            let n = snd.probe_len();
            if n > 0 {
                return Some((snd.nxt, n, false));
            }
        }
        let mss = snd.mss_now();
        let right = snd.una + snd.wnd as usize;
        let r = snd.rec.as_mut()?;
        let last = *r.queue().last()?;
        if last.sacked() {
            return None;
        }
        let (mut seq, mut len) = (last.seq(), u32::try_from(last.seq_len()).ok()?);
        if len > mss {
            let at = last.seq() + (len - mss) as usize;
            r.split(at).ok()?;
            (seq, len) = (at, mss);
        }
        if len == 0 || seq + len as usize > snd.end {
            return None;
        }
        // Never beyond the peer's window, which may have shrunk since the segment first
        // went (RFC 9293 §3.8.6.2.1; Linux's `__tcp_retransmit_skb` refuses a segment that
        // starts at or beyond `tcp_wnd_end` and trims one that crosses it): the probe is cut
        // to the window, or none is sent and the RTO stays armed.
        if seq >= right {
            return None;
        }
        let fit = len.min((right - seq) as u32);
        if fit < len {
            r.split(seq + fit as usize).ok()?;
            len = fit;
        }
        Some((seq, len, true))
    }

    /// The retransmission to build now, if any: the one fast retransmit asked for at once,
    /// else what `Recovery::next_seg` picks (lost and not yet retransmitted, or RFC 6675
    /// NextSeg in fast recovery) while the congestion window has room for it, and only
    /// the part of it inside the peer's window (split off in the queue).
    pub(crate) fn next_rtx(&mut self) -> Option<(SeqNumber, u32)> {
        let right = self.snd.una + self.snd.wnd as usize;
        let mss = self.snd.mss_now();
        let r = self.snd.rec.as_mut()?;
        // NextSeg walks the queue: only when something is lost, a fast retransmit is
        // owed, or fast recovery runs (RFC 6675 NextSeg rule 3), not per segment of a
        // loss-free transfer.
        if r.queue().lost_segs() == 0 && self.snd.rtx_now.is_none() && r.phase() != Phase::Fast {
            return None;
        }
        let (seq, len) = match r.next_seg(false)? {
            NextSeg::Retransmit { seq, len, .. } => (seq, len),
            NextSeg::NewData => return None,
        };
        let len = u32::try_from(len).ok()?;
        if len == 0 || seq + len as usize > self.snd.end {
            return None;
        }

        // RFC 9293 §3.8.6.2.1: nothing beyond SND.UNA + SND.WND, retransmissions included
        // (a window the peer shrank, or shut, after the segment first went). As Linux
        // `__tcp_retransmit_skb`, a segment is cut to the window and one that starts
        // beyond it waits; on a zero window the RTO sends a window probe instead
        // (`rto_timeout`).
        if seq >= right {
            return None;
        }
        // One segment at a time, also of a send unit (Linux `tcp_retransmit_skb`
        // fragments an skb longer than the current MSS), and only what the window takes.
        let fit = len.min(mss).min((right - seq) as u32);
        let forced = self.snd.rtx_now == Some(seq);
        let pipe = u32::try_from(r.pipe()).unwrap_or(u32::MAX);
        if !forced && self.snd.cwnd.saturating_sub(pipe) < fit {
            return None;
        }
        if fit < len {
            // The queue segment is split so the part sent is a segment of its own (its
            // retransmission recorded, the rest still lost); when the queue is full the
            // retransmission waits for an ACK to free a slot.
            r.split(seq + fit as usize).ok()?;
        }
        Some((seq, fit))
    }

    /// A data segment `[seq, seq + len)` was built at `now`: new data goes into loss
    /// detection (made now on the first one, in the mode the handshake and
    /// `TcpConfig::loss_detection` chose) and starts the retransmission timer if it is
    /// not running (RFC 6298 §5.1); a retransmission is recorded as one. New data that is
    /// not a probe (re)starts the PTO (RFC 8985 §7.2); a probe (`probe`) is recorded as
    /// TLP's (§7.3) and leaves the RTO where it was.
    pub(crate) fn data_sent(
        &mut self,
        now: Instant,
        seq: SeqNumber,
        len: u32,
        rtx: bool,
        probe: bool,
    ) {
        let snd = &mut self.snd;
        if rtx {
            if let Some(r) = snd.rec.as_mut() {
                let _ = r.on_retransmit(seq, now);
            }
            if snd.rtx_now == Some(seq) {
                snd.rtx_now = None;
            }
        } else {
            let mode = snd.loss_detection.mode(self.rcv.sack_ok);
            let sampled = snd.rtt.srtt().is_some();
            let r = snd.rec.get_or_insert_with(|| {
                let mut r = Box::new(Recovery::new(snd.max_slices, seq, snd.mss, mode));
                if sampled {
                    // The handshake's RTT sample counts for RFC 8985 §7.3 condition 2.
                    r.on_rtt_sample();
                }
                r
            });
            let _ = r.on_send_unit(seq, len, false, now);
            snd.sent(len);
        }
        if snd.rto_at.is_none() {
            snd.rto_at = Some(snd.rtt.deadline(now));
        }
        if probe {
            if let Some(r) = snd.rec.as_mut() {
                r.on_probe_sent(rtx);
            }
            snd.pto_at = None;
        } else if !rtx {
            snd.pto_at = snd.pto_for(now);
        }
        snd.arm_xmit();
        snd.max_flight = snd.max_flight.max(snd.pipe());
        snd.probes = 0;
    }

    /// The persist timer expired (RFC 9293 §3.8.6.1, Linux `tcp_probe_timer`): while the
    /// window is still zero, data (or our FIN) waits and nothing is in flight, a probe is sent and the
    /// timer re-armed with backoff; after `TcpConfig::max_retries` probes with the window
    /// shut the connection is reset (`Break`; a window that never opens does not hold the
    /// connection for ever). Otherwise the timer just ends: data goes as the window
    /// allows.
    pub(crate) fn persist_timeout(&mut self, now: Instant, ctx: &mut Ctx<B>) -> ControlFlow<()> {
        let shut = self.snd.una + self.snd.wnd as usize <= self.snd.nxt;
        // What waits: unsent data, or our FIN (held while the window has no room for it).
        let waiting = self.snd.unsent() > 0 || (self.closing.fin_due && !self.closing.fin_sent);
        if !shut || !waiting || self.snd.nxt != self.snd.una {
            return ControlFlow::Continue(());
        }
        if self.snd.probes >= self.snd.max_retries {
            ctx.stats.dropped(DropReason::PersistTimeout);
            self.abort(ctx);
            return ControlFlow::Break(());
        }
        self.snd.probes += 1;
        self.snd.probe_due = true;
        self.snd.arm_persist(now);
        self.mark_due(ctx);
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::VecBuf;

    const MSS: u32 = 1000;

    fn snd(wnd: u32) -> Snd<VecBuf> {
        Snd::new(
            SeqNumber(99),
            SeqNumber(100),
            wnd,
            SeqNumber(0),
            0,
            0,
            MSS,
            32,
            64_000,
            64,
            est(),
        )
    }

    /// MSS 100, no options, a window of 1 MiB, the bounds given.
    fn small(buf: u32, slices: usize) -> Snd<VecBuf> {
        Snd::new(
            SeqNumber(0),
            SeqNumber(1),
            1 << 20,
            SeqNumber(0),
            0,
            0,
            100,
            20,
            buf,
            slices,
            est(),
        )
    }

    fn est() -> RttEstimator {
        RttEstimator::new(Default::default())
    }

    fn alloc(n: usize) -> Option<VecBuf> {
        Some(VecBuf::from_vec(vec![0; n]))
    }

    fn write(s: &mut Snd<VecBuf>, n: usize) -> usize {
        let data: Vec<u8> = (0..n).map(|i| i as u8).collect();
        s.write_copy(&data, alloc)
    }

    /// Sends what `cut` allows, as `poll_tx` would, until it holds.
    fn send_all(s: &mut Snd<VecBuf>) -> (Vec<u32>, Hold) {
        let mut v = Vec::new();
        loop {
            match s.cut(false) {
                Ok(n) => {
                    let mut b = vec![0; n as usize];
                    assert!(s.copy_out(s.nxt, &mut b).is_some());
                    s.sent(n);
                    v.push(n);
                }
                Err(h) => return (v, h),
            }
        }
    }

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn arm_xmit_takes_the_earliest_deadline_and_keeps_the_others() {
        let mut s = snd(64_000);
        s.rto_at = Some(t(200));
        s.pto_at = Some(t(40));
        s.arm_xmit();
        assert_eq!((s.timer, s.timer_kind), (Some(t(40)), SndTimer::Tlp));
        // The PTO fired: the RTO is armed where it was, not later (RFC 8985 §7.3).
        s.pto_at = None;
        s.arm_xmit();
        assert_eq!((s.timer, s.timer_kind), (Some(t(200)), SndTimer::Rto));
        // A tie goes to the RTO.
        s.pto_at = Some(t(200));
        s.arm_xmit();
        assert_eq!(s.timer_kind, SndTimer::Rto);
        // Nothing outstanding: the timer stops; a persist timer is left alone.
        s.rto_at = None;
        s.pto_at = None;
        s.arm_xmit();
        assert_eq!(s.timer, None);
        s.arm_persist(t(1));
        s.arm_xmit();
        assert_eq!(s.timer_kind, SndTimer::Persist);
        assert!(s.timer.is_some());
    }

    #[test]
    fn rfc8985_6_2_tsecr_is_the_end_of_its_tick() {
        let now = Instant::from_nanos(10_500_000);
        // Our clock reads 10 (ms, offset 0); an echo of 7 was stamped in [7 ms, 8 ms).
        assert_eq!(
            tsecr_instant(now, 10, 7),
            Some(Instant::from_nanos(7_999_999))
        );
        assert_eq!(tsecr_instant(now, 10, 10), Some(now), "at most now");
        assert_eq!(tsecr_instant(now, 10, 11), None, "from the future");
        assert_eq!(tsecr_instant(now, 10, 11 + u32::MAX / 2), None);
    }

    #[test]
    fn rfc6928_2_cwnd_starts_at_the_initial_window() {
        assert_eq!(snd(64_000).cwnd, initial_window(MSS));
        assert_eq!(initial_window(1448), 14_480);
    }

    #[test]
    fn rfc9293_3_8_6_2_1_full_segments_then_runt_when_all_data_fits() {
        let mut s = snd(64_000);
        assert_eq!(write(&mut s, 2500), 2500);
        // The whole write goes, the runt last (D <= U): only full segments are in
        // flight, so Nagle (with Minshall's refinement) does not hold it.
        assert_eq!(send_all(&mut s), (vec![1000, 1000, 500], Hold::Empty));
    }

    #[test]
    fn rfc9293_3_7_4_nagle_holds_small_segment_while_unacked() {
        let mut s = snd(64_000);
        write(&mut s, 100);
        assert_eq!(send_all(&mut s), (vec![100], Hold::Empty));
        write(&mut s, 100);
        assert_eq!(s.cut(false), Err(Hold::Nagle));
        s.nodelay = true;
        assert_eq!(s.cut(false), Ok(100), "TCP_NODELAY");
        s.nodelay = false;
        s.una = s.nxt;
        assert_eq!(s.cut(false), Ok(100), "released by the ACK");
        // Full segments behind the held runt go: Nagle holds only small ones.
        write(&mut s, 2000);
        s.sent(100);
        assert_eq!(s.cut(false), Ok(1000));
    }

    #[test]
    fn cork_holds_small_segments_until_full_or_uncorked() {
        let mut s = snd(64_000);
        s.cork = true;
        write(&mut s, 600);
        assert_eq!(s.cut(false), Err(Hold::Cork));
        write(&mut s, 600);
        assert_eq!(send_all(&mut s), (vec![1000], Hold::Cork));
        s.una = s.nxt;
        s.cork = false;
        assert_eq!(s.cut(false), Ok(200));
        // A FIN after the data is never held.
        s.cork = true;
        assert_eq!(s.cut(true), Ok(200));
    }

    #[test]
    fn rfc9293_3_8_6_2_1_sws_runt_waits_for_window_or_half_max_window() {
        let mut s = snd(4000);
        write(&mut s, 3000);
        s.wnd = 300;
        s.nodelay = true;
        // 300 < MSS, not all the data, under half of the 4000 max window: held.
        assert_eq!(s.cut(false), Err(Hold::Sws));
        s.wnd = 2000;
        assert_eq!(s.cut(false), Ok(1000));
        s.wnd = 2500;
        s.sent(1000);
        s.sent(1000);
        // 500 usable: under half the max window, not all of the 1000 queued.
        assert_eq!(s.cut(false), Err(Hold::Sws));
        s.override_fired = true;
        assert_eq!(s.cut(false), Ok(500), "the override timeout (4)");
    }

    #[test]
    fn sws_fs_half_of_max_window_goes() {
        let mut s = snd(1600);
        write(&mut s, 3000);
        // mss_now is bounded to half the max window: 800 is a full segment.
        assert_eq!(s.mss_now(), 800);
        assert_eq!(s.cut(false), Ok(800));
    }

    #[test]
    fn rfc9293_3_8_6_2_1_never_beyond_the_window_even_when_shrunk() {
        let mut s = snd(2000);
        write(&mut s, 5000);
        assert_eq!(send_all(&mut s).0, vec![1000, 1000]);
        assert_eq!(s.cut(false), Err(Hold::Window));
        // The peer shrinks its window: SND.UNA + SND.WND is now left of SND.NXT.
        s.wnd = 500;
        assert_eq!(s.cut(false), Err(Hold::Window));
        s.wnd = 0;
        assert_eq!(s.cut(false), Err(Hold::Window));
    }

    #[test]
    fn rfc5681_3_1_never_beyond_cwnd() {
        let mut s = snd(1 << 20);
        write(&mut s, 50_000);
        s.nodelay = true;
        let (v, h) = send_all(&mut s);
        assert_eq!(v.iter().sum::<u32>(), s.cwnd);
        assert_eq!(h, Hold::Cwnd);
    }

    #[test]
    fn queue_bounded_by_bytes_and_buffers() {
        let mut s = small(1000, 4);
        assert_eq!(s.room(), 400, "room counts the buffers too");
        assert_eq!(write(&mut s, 5000), 400, "four buffers of one MSS");
        assert_eq!(s.room(), 0);
        let mut s = small(250, 64);
        assert_eq!(write(&mut s, 5000), 250, "the byte bound");
        assert_eq!(write(&mut s, 1), 0);
    }

    #[test]
    fn small_writes_share_a_buffer_and_mark_push_at_each_end() {
        let mut s = snd(64_000);
        write(&mut s, 10);
        write(&mut s, 10);
        assert_eq!(
            s.q.len(),
            1,
            "the second write filled the first buffer's room"
        );
        let mut b = [0u8; 20];
        assert_eq!(s.copy_out(SeqNumber(100), &mut b), Some(true));
        assert_eq!(&b[..12], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
        let mut b = [0u8; 5];
        assert_eq!(s.copy_out(SeqNumber(100), &mut b), Some(false));
    }

    #[test]
    fn acked_frees_whole_buffers_and_writable_after_full() {
        let mut s = small(1000, 64);
        assert_eq!(write(&mut s, 2000), 1000);
        s.writable_armed = true;
        s.nxt = s.end;
        let mut spent = FreeBatch::new();
        assert!(
            !s.acked(SeqNumber(1 + 150), &mut spent),
            "850 queued, 150 free"
        );
        assert_eq!(s.queued(), 850);
        assert!(
            s.acked(SeqNumber(1 + 400), &mut spent),
            "600 queued, 400 free"
        );
        assert!(!s.writable_armed, "edge-triggered: once");
        let mut b = [0u8; 10];
        assert_eq!(s.copy_out(SeqNumber(401), &mut b), Some(false));
        assert_eq!(b[0], 400u32 as u8);
        // An ACK beyond the data (our FIN) frees everything and no more.
        assert!(!s.acked(SeqNumber(1 + 1001), &mut spent));
        assert_eq!(s.queued(), 0);
    }
}
