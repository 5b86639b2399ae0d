//! One synchronized connection: its state, set up from a completed handshake, and the
//! glue every event ends with (`after_input`: snapshot a decided ACK, queue the
//! connection for `poll_tx`, re-arm its timer).
//!
//! Its state is in three parts: the receive side (`recv.rs`: RFC 9293 §3.3.1's receive
//! sequence variables, the window, TS.Recent, SACK, the queues), the send side
//! (`send.rs`: the send sequence variables, the peer's window, the send queue and the
//! segmentation decision) and the close
//! part ([`Closing`]). What moves them is elsewhere in `tcp/`: `input.rs` (RFC 9293
//! §3.10.7.4), `close.rs` (the closing states) and `output.rs` (the frames).

mod recv;
mod send;

pub(crate) use recv::Recv;
pub(crate) use send::{Hold, Snd, SndTimer};

use std::collections::VecDeque;

use arrayvec::ArrayVec;

use super::ooo::{OooPool, OooQueue};
use super::table::Keyed;
use super::timer::{Kind, Timers};
use super::{ConnId, DropReason, Event, State, TcpStats};
use crate::ack::template::AckTemplate;
use crate::ack::{AckQueue, AckSnapshot, AckState, AckStats};
use crate::buf::{FreeBatch, PacketBuf, PayloadSlice};
use crate::flow::FlowKey;
use crate::seq::SeqNumber;
use crate::spare::Spare;
use crate::tcp::rtt::RttEstimator;
use crate::time::{Duration, Instant};

/// Per-core state a connection touches while it processes input.
pub(crate) struct Ctx<B> {
    pub(crate) ooo: OooPool<B>,
    pub(crate) stats: TcpStats,
    pub(crate) ack_stats: AckStats,
    pub(crate) events: VecDeque<Event>,
    pub(crate) events_cap: usize,
    pub(crate) due: VecDeque<(u32, u32)>,
    pub(crate) timers: Timers,
    pub(crate) challenge_limit: u32,
    pub(crate) challenge_window: Instant,
    pub(crate) challenge_count: u32,
    /// Buffers the application read, freed together when the batch is full and once per
    /// loop iteration (`Tcp::poll_tx`): with many connections each read frees one or two.
    pub(crate) spent: FreeBatch<B>,
    /// Buffers all send queues of the core hold (`TcpConfig::snd_core_slices` bounds it).
    pub(crate) snd_held: usize,
    /// Storage for the receive queues and the ACK queues, lent while a queue holds
    /// something (`stack::spare`).
    pub(crate) rxq_spare: Spare<PayloadSlice<B>>,
    pub(crate) ack_spare: Spare<AckSnapshot>,
}

/// Appends `v` to `q`, first moving an empty queue's start back to the front of its storage
/// (`VecDeque::clear` does; `pop_front` to empty does not). The event and due queues are
/// sized for every connection (four events each), megabytes for a million connections,
/// but hold a few entries at a time: left to itself, their start walks the whole ring,
/// a cold cache line every few entries and a page never touched before every few hundred;
/// restarted whenever they empty, they stay within a few lines.
#[inline(always)]
fn push_from_start<T>(q: &mut VecDeque<T>, v: T) {
    if q.is_empty() {
        q.clear();
    }
    q.push_back(v);
}

impl<B> Ctx<B> {
    /// A connection's send queue went from `before` to `after` buffers.
    pub(crate) fn snd_slices_changed(&mut self, before: usize, after: usize) {
        self.snd_held = (self.snd_held + after).saturating_sub(before);
    }
    pub(crate) fn event(&mut self, e: Event) {
        if self.events.len() >= self.events_cap {
            self.stats.dropped(DropReason::EventQueueFull);
            return;
        }
        push_from_start(&mut self.events, e);
    }
    /// RFC 5961 §7: a per-core limit on challenge ACKs (Linux `tcp_challenge_ack_limit`).
    pub(crate) fn challenge_allowed(&mut self, now: Instant) -> bool {
        if now - self.challenge_window >= Duration::from_secs(1) {
            self.challenge_window = now;
            self.challenge_count = 0;
        }
        if self.challenge_count >= self.challenge_limit {
            return false;
        }
        self.challenge_count += 1;
        true
    }
}

/// Set-up parameters for a new connection.
pub(crate) struct ConnParams {
    pub(crate) flow: FlowKey,
    pub(crate) local_mac: [u8; 6],
    pub(crate) peer_mac: [u8; 6],
    pub(crate) iss: SeqNumber,
    pub(crate) irs: SeqNumber,
    pub(crate) rcv_buf: u32,
    pub(crate) rcv_wscale: Option<u8>,
    pub(crate) snd_wscale: Option<u8>,
    pub(crate) sack: bool,
    pub(crate) ts_recent: Option<u32>,
    pub(crate) ts_offset: u32,
    pub(crate) advmss: u16,
    pub(crate) peer_mss: u16,
    /// The peer's window in bytes, already scaled (a SYN-ACK's is never scaled, RFC 7323
    /// §2.2; the handshake's final ACK's is).
    pub(crate) peer_window: u32,
    pub(crate) ack: crate::ack::AckPolicy,
    pub(crate) srtt: Duration,
    pub(crate) ttl: u8,
    pub(crate) ooo_limit: u32,
    pub(crate) rxq_slices: usize,
    pub(crate) rxq_slice_bytes: u32,
    /// The window our SYN or SYN-ACK advertised (`TcpConfig::syn_window`).
    pub(crate) syn_window: u32,
    pub(crate) ack_queue: usize,
    pub(crate) fin_retries: u8,
    pub(crate) time_wait: Duration,
    pub(crate) snd_buf: u32,
    pub(crate) snd_slices: usize,
    pub(crate) rtt: RttEstimator,
    pub(crate) cc: crate::tcp::cc::CcConfig,
    pub(crate) max_retries: u8,
    pub(crate) loss_detection: crate::tcp::SackLossDetection,
}

/// One synchronized connection. Its state is grouped by job: the receive side
/// ([`Recv`]: sequence space, window, timestamps, SACK, the queues), the send side
/// ([`Snd`]: the send sequence variables, the window, the send queue), and
/// the close part ([`Closing`]: FIN, RST and TIME-WAIT, driven by `tcp/close.rs`).
pub(crate) struct Conn<B> {
    pub(crate) id: ConnId,
    pub(crate) flow: FlowKey,
    pub(crate) state: State,
    /// Headers of every frame this connection sends, built once at set-up.
    pub(crate) tmpl: AckTemplate,
    pub(crate) rcv: Recv<B>,
    pub(crate) snd: Snd<B>,
    pub(crate) closing: Closing,
    /// The ACK policy's per-connection state (delayed ACK, quick ACKs, SACK compression).
    pub(crate) ack: AckState,
    /// ACKs decided and not yet built, each with the fields of its decision.
    pub(crate) acks: AckQueue,
    /// In `Ctx::due`: `poll_tx` will build what this connection owes.
    pub(crate) queued: bool,
    /// When the last pure data ACK left and the delayed-ACK time then: a data segment
    /// before that deadline makes it a useless ACK (`AckStats::useless`).
    pub(crate) pure_ack_until: Option<Instant>,
    /// An active open in SYN-SENT or SYN-RECEIVED (`tcp/connect.rs`); `None` once
    /// established, and for passive opens.
    pub(crate) open: Option<ActiveOpen>,
}

/// What an active open keeps until the handshake completes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ActiveOpen {
    pub(crate) local_mac: [u8; 6],
    pub(crate) peer_mac: [u8; 6],
    /// When the first SYN was sent (for the handshake's RTT sample).
    pub(crate) first_sent: Instant,
    /// The SYN was retransmitted (Karn's rule, RFC 6298 §3 and §5.7).
    pub(crate) retransmitted: bool,
    /// Our SYN (SYN-SENT) or SYN-ACK (SYN-RECEIVED) is to be built.
    pub(crate) syn_due: bool,
    /// SYN retransmissions allowed before the open fails (`TcpConfig::syn_retries`).
    pub(crate) retries: u8,
    /// The window scale our SYN offers, and whether the peer's SYN offered one (in a
    /// simultaneous open our SYN-ACK may carry ours only then, RFC 7323 §2.2).
    pub(crate) wscale: u8,
    pub(crate) peer_wscale: bool,
}

/// The close part of a connection: what our FIN and RST owe, the timers of the closing
/// states, and who has closed (RFC 9293 §3.6, §3.10.4).
pub(crate) struct Closing {
    /// Our FIN is to be built (first time or retransmission).
    pub(crate) fin_due: bool,
    /// Our FIN has been built once (SND.NXT moved past it).
    pub(crate) fin_sent: bool,
    /// A RST is to be built.
    pub(crate) rst_due: bool,
    /// FIN retransmissions so far, and the most allowed before the connection is reset.
    pub(crate) fin_tries: u8,
    pub(crate) fin_retries: u8,
    /// When our FIN is retransmitted.
    pub(crate) fin_deadline: Option<Instant>,
    /// When TIME-WAIT ends, and how long it lasts (2 MSL).
    pub(crate) tw_deadline: Option<Instant>,
    pub(crate) time_wait: Duration,
    /// The application closed (or aborted) the connection.
    pub(crate) app_closed: bool,
    /// The application will write no more (`shutdown` or `close`): our FIN follows the
    /// queued data.
    pub(crate) write_closed: bool,
    /// The peer's FIN arrived in order.
    pub(crate) peer_closed: bool,
}

impl<B> Keyed for Conn<B> {
    fn key(&self) -> &FlowKey {
        &self.flow
    }
}

impl<B: PacketBuf> Conn<B> {
    pub(crate) fn new(p: ConnParams) -> Self {
        let ts_ok = p.ts_recent.is_some();
        let tmpl = AckTemplate::new(&p.flow, p.local_mac, p.peer_mac, ts_ok, p.ttl);
        let rcv_wscale = p.rcv_wscale.filter(|_| p.snd_wscale.is_some()).unwrap_or(0);
        let snd_wscale = p.snd_wscale.filter(|_| p.rcv_wscale.is_some()).unwrap_or(0);
        let rcv_nxt = p.irs + 1;
        // The SYN-ACK advertised `syn_window` unscaled (RFC 7323 §2.2).
        let syn_wnd = p.syn_window;
        let opt_len = if ts_ok { 12 } else { 0 };
        let mss_cache = u32::from(p.peer_mss).saturating_sub(opt_len).max(88);
        // tcp_initialize_rcv_mss: min(advmss, mss_cache, rcv_wnd/2, TCP_MSS_DEFAULT) >= 88.
        let init_rcv_mss = u32::from(p.advmss)
            .min(mss_cache)
            .min(syn_wnd / 2)
            .clamp(88, 536);
        // Linux `tcp_mtu_to_mss` and `tcp_current_mss`: the smaller of our MTU's MSS and
        // the peer's, at least `tcp_min_snd_mss` (48), less the options every data
        // segment carries.
        let snd_mss = u32::from(p.peer_mss.min(p.advmss))
            .max(48)
            .saturating_sub(opt_len);
        let mut snd = Snd::new(
            p.iss,
            p.iss + 1,
            p.peer_window,
            p.irs,
            snd_wscale,
            p.ts_offset,
            snd_mss,
            20 + opt_len,
            p.snd_buf,
            p.snd_slices,
            p.rtt,
        );
        // RFC 5681 / RFC 9438 behind `cc`; a configuration it refuses (a `max_cwnd`
        // below 2 SMSS, a zero initial window) leaves the fixed initial window.
        snd.cc = crate::tcp::cc::Cc::new(&p.cc, snd_mss).ok();
        snd.sync_cwnd();
        snd.max_retries = p.max_retries;
        snd.loss_detection = p.loss_detection;
        Conn {
            id: ConnId { slot: 0, gen: 0 },
            flow: p.flow,
            state: State::Established,
            tmpl,
            rcv: Recv {
                nxt: rcv_nxt,
                wup: rcv_nxt,
                last_ack_sent: rcv_nxt,
                free_edge: rcv_nxt + syn_wnd as usize,
                right: rcv_nxt + syn_wnd as usize,
                buf: p.rcv_buf,
                wscale: rcv_wscale,
                advmss: u32::from(p.advmss),
                ts_ok,
                ts_recent: p.ts_recent.unwrap_or(0),
                ts_recent_stamp: Instant::ZERO,
                sack_ok: p.sack,
                sack: ArrayVec::new(),
                dsack: None,
                ooo: OooQueue::default(),
                ooo_limit: p.ooo_limit,
                ooo_fin: None,
                rxq: VecDeque::new(),
                rxq_hint: 0,
                rxq_cap: u32::try_from(p.rxq_slices).unwrap_or(u32::MAX),
                rxq_slice_bytes: p.rxq_slice_bytes.max(1),
                syn_wnd,
                rxq_bytes: 0,
                readable_signalled: false,
            },
            snd,
            closing: Closing {
                fin_due: false,
                fin_sent: false,
                rst_due: false,
                fin_tries: 0,
                fin_retries: p.fin_retries,
                fin_deadline: None,
                tw_deadline: None,
                time_wait: p.time_wait,
                app_closed: false,
                write_closed: false,
                peer_closed: false,
            },
            ack: AckState::new(p.ack, u32::from(p.advmss), init_rcv_mss, p.srtt),
            acks: AckQueue::new(p.ack_queue),
            queued: false,
            pure_ack_until: None,
            open: None,
        }
    }

    /// Our timestamp clock: milliseconds plus a per-flow offset (RFC 7323 §5.4).
    pub(crate) fn ts_now(&self, now: Instant) -> u32 {
        ((now.as_nanos() / 1_000_000) as u32).wrapping_add(self.snd.ts_offset)
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        // Pairwise, not through an iterator chain over the three: this runs after every
        // input, and the chain compiled to a loop that perf put at a third of
        // `after_input` at 64 flows.
        use crate::time::earliest;
        earliest(
            earliest(self.ack.deadline(), self.closing.fin_deadline),
            earliest(self.closing.tw_deadline, self.snd.timer),
        )
    }

    pub(crate) fn mark_due(&mut self, ctx: &mut Ctx<B>) {
        if !self.queued {
            self.queued = true;
            push_from_start(&mut ctx.due, (self.id.slot, self.id.gen));
        }
    }

    /// The end of an event (a segment, a timer, an application call): an ACK decided
    /// during it is snapshotted now, then the connection is queued for `poll_tx` if it owes
    /// anything (an ACK, a FIN, a RST, or queued data, which `poll_tx` sends as far as the
    /// windows, Nagle and the cork allow).
    pub(crate) fn after_input(&mut self, ctx: &mut Ctx<B>) {
        self.commit_ack(ctx);
        if !self.acks.is_empty()
            || self.closing.fin_due
            || self.closing.rst_due
            || self.snd.unsent() > 0
        {
            self.mark_due(ctx);
        }
        ctx.timers
            .arm(Kind::Conn, self.id.slot, self.id.gen, self.deadline());
    }

    /// Fires what is due at `now`: the ACK timers (delayed ACK, SACK compression), then
    /// the closing states' (FIN retransmission, TIME-WAIT), and re-arms the rest.
    pub(crate) fn handle_timeout(&mut self, now: Instant, ctx: &mut Ctx<B>) {
        self.ack.handle_timeout(now);
        if let Some(t) = self.snd.timer {
            if t <= now {
                self.snd.timer = None;
                match self.snd.timer_kind {
                    // RFC 9293 §3.8.6.2.1 (4): the held runt may go.
                    SndTimer::Override => self.snd.override_fired = true,
                    SndTimer::Syn => {
                        if self.syn_timeout(now, ctx).is_break() {
                            return;
                        }
                    }
                    // The outstanding data's: RTO, RACK reordering, tail loss probe.
                    SndTimer::Rto | SndTimer::Rack | SndTimer::Tlp => {
                        if self.xmit_timeout(now, ctx).is_break() {
                            return;
                        }
                    }
                    SndTimer::Persist => {
                        if self.persist_timeout(now, ctx).is_break() {
                            return;
                        }
                    }
                }
            }
        }
        if self.closing_timeout(now, ctx).is_break() {
            return;
        }
        self.after_input(ctx);
    }

    /// Everything the public `ConnInfo` shows.
    pub(crate) fn info(&self) -> super::ConnInfo {
        super::ConnInfo {
            id: self.id,
            flow: self.flow,
            state: self.state,
            rcv_nxt: self.rcv.nxt,
            unconsumed: self.rcv.rxq_bytes,
            ooo_bytes: self.rcv.ooo.bytes,
            window: self.rcv.window(),
            rcv_mss: self.ack.rcv_mss(),
            sack: self.rcv.sack_ok,
            timestamps: self.rcv.ts_ok,
            rcv_wscale: self.rcv.wscale,
            snd_wscale: self.snd.wscale,
            snd_una: self.snd.una,
            snd_nxt: self.snd.nxt,
            snd_wnd: self.snd.wnd,
            snd_mss: self.snd.mss,
            snd_queued: self.snd.queued(),
            snd_unsent: self.snd.unsent(),
            rtx_entries: self.snd.rec.as_ref().map_or(0, |r| r.queue().len()),
            cwnd: self.snd.cwnd,
            srtt: self.snd.rtt.srtt(),
            rto: self.snd.rtt.rto(),
        }
    }

    pub(crate) fn release(&mut self, ctx: &mut Ctx<B>) {
        ctx.ooo.clear(&mut self.rcv.ooo);
        self.rcv.rxq.clear();
        ctx.rxq_spare.give_back(&mut self.rcv.rxq);
        self.acks.clear(&mut ctx.ack_spare);
        ctx.snd_slices_changed(self.snd.slices(), 0);
        self.snd.clear(&mut ctx.spent);
    }
}

#[cfg(test)]
mod queue_start_tests {
    use super::*;

    /// A queue that empties starts again at the front of its storage, so one sized for a
    /// million connections but holding a few entries stays within a few cache lines.
    #[test]
    fn an_emptied_queue_restarts_at_the_front_of_its_storage() {
        let mut q: VecDeque<(u32, u32)> = VecDeque::with_capacity(1 << 16);
        push_from_start(&mut q, (0, 0));
        let front = q.as_slices().0.as_ptr();
        for i in 0..10_000u32 {
            push_from_start(&mut q, (i, i));
            q.pop_front();
        }
        assert_eq!(q.len(), 1);
        q.pop_front();
        push_from_start(&mut q, (1, 1));
        assert_eq!(q.as_slices().0.as_ptr(), front, "restarted at the front");
        assert_eq!(q.capacity(), 1 << 16, "no storage given up or taken");
    }
}
