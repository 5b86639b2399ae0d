//! [`AckState`]: the per-connection ACK engine, Linux's `icsk_ack` fields and the rules of
//! `tcp_input.c` that use them (`tcp_event_data_recv`, `tcp_measure_rcv_mss`,
//! `__tcp_ack_snd_check`, `tcp_send_delayed_ack`, `tcp_cleanup_rbuf`,
//! `tcp_delack_timer_handler`), for each [`AckPolicy`] mode.

use super::{AckMode, AckPolicy, AckReason};
use crate::seq::SeqNumber;
use crate::time::{Duration, Instant};

/// `TCP_ATO_MIN` = `TCP_DELACK_MIN` = HZ/25: the shortest delayed-ACK timeout (40 ms).
pub const ATO_MIN: Duration = Duration::from_millis(40);
/// `TCP_DELACK_MAX` = HZ/5: the longest delayed-ACK timeout (200 ms).
pub const DELACK_MAX: Duration = Duration::from_millis(200);
/// `TCP_MAX_QUICKACKS`: quick ACKs granted at connection start and after idle.
pub const MAX_QUICKACKS: u8 = 16;
/// `tcp_comp_sack_nr` default: most ACKs SACK compression may hold back.
pub const COMP_SACK_NR: u8 = 44;
/// `tcp_comp_sack_delay_ns` default: the longest SACK compression delay (1 ms).
pub const COMP_SACK_DELAY: Duration = Duration::from_millis(1);
/// `TCP_FASTRETRANS_THRESH`: duplicate ACKs per `rcv_nxt` sent before compressing.
pub const FASTRETRANS_THRESH: u8 = 3;
/// Linux `TCP_MSS_DEFAULT`.
const MSS_DEFAULT: u32 = 536;
/// Linux `TCP_MIN_MSS`.
const MIN_MSS: u32 = 88;

/// Whether a connection owes an ACK, as timers-as-data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AckDelay {
    /// Nothing owed, or owed without a deadline (scheduled, waiting for more data).
    #[default]
    Idle,
    /// Send when this deadline passes (delayed-ACK or SACK-compression timer).
    Waiting(Instant),
    /// Send now: decided during the current event (segment, timer, application call); the
    /// connection snapshots it into its [`AckQueue`](super::AckQueue) when the event ends.
    Immediate(AckReason),
}

// icsk_ack.pending bits.
const SCHED: u8 = 1;
const TIMER: u8 = 2;
const PUSHED: u8 = 4;
const PUSHED2: u8 = 8;

/// What `__tcp_ack_snd_check` needs to know about the connection.
#[derive(Clone, Copy, Debug)]
pub struct SndCheck {
    /// `rcv_nxt - rcv_wup`: bytes received since the last ACK that carried a window.
    pub unacked_bytes: u32,
    /// `__tcp_select_window() >= rcv_wnd`: an ACK now would not shrink the window.
    pub window_ok: bool,
    /// The out-of-order queue is non-empty.
    pub ofo: bool,
    /// The data that led here went to the out-of-order queue.
    pub data_was_ofo: bool,
    /// SACK was negotiated.
    pub sack: bool,
    /// `rcv_nxt` now.
    pub rcv_nxt: SeqNumber,
}

/// The per-connection ACK engine: Linux's `icsk_ack` fields and the rules that use them.
#[derive(Clone, Debug)]
pub struct AckState {
    policy: AckPolicy,
    pending: u8,
    quick: u8,
    ato: Duration,
    lrcvtime: Instant,
    rcv_mss: u32,
    advmss: u32,
    last_seg_size: u32,
    delack: AckDelay,
    timer_reason: AckReason,
    comp_deadline: Option<Instant>,
    compressed_ack: u8,
    comp_rcv_nxt: SeqNumber,
    dup_ack_counter: u8,
    segs_unacked: u32,
    srtt: Duration,
    rto: Duration,
}

impl AckState {
    /// A fresh engine. `advmss` is the MSS we advertised minus the option bytes every
    /// segment carries; `init_rcv_mss` comes from `tcp_initialize_rcv_mss`; `srtt` is the
    /// handshake RTT (zero if unknown).
    pub fn new(policy: AckPolicy, advmss: u32, init_rcv_mss: u32, srtt: Duration) -> Self {
        // RFC 6298 §2.2 with rttvar = srtt/2: rto = 3*srtt, floored at Linux's 200 ms
        // TCP_RTO_MIN and 1 s (TCP_TIMEOUT_INIT) when unknown.
        let rto = if srtt == Duration::ZERO {
            Duration::from_secs(1)
        } else {
            Duration::from_nanos(srtt.as_nanos().saturating_mul(3))
                .max(Duration::from_millis(200))
                .min(Duration::from_secs(120))
        };
        AckState {
            policy,
            pending: 0,
            quick: 0,
            ato: Duration::ZERO,
            lrcvtime: Instant::ZERO,
            rcv_mss: init_rcv_mss.max(MIN_MSS),
            advmss: advmss.max(MIN_MSS),
            last_seg_size: 0,
            delack: AckDelay::Idle,
            timer_reason: AckReason::DelayedTimer,
            comp_deadline: None,
            compressed_ack: 0,
            comp_rcv_nxt: SeqNumber(0),
            dup_ack_counter: 0,
            segs_unacked: 0,
            srtt,
            rto,
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> AckPolicy {
        self.policy
    }
    /// The receiver's MSS estimate (`icsk_ack.rcv_mss`).
    pub fn rcv_mss(&self) -> u32 {
        self.rcv_mss
    }
    /// Quick ACKs left (`icsk_ack.quick`).
    pub fn quick(&self) -> u8 {
        self.quick
    }
    /// The delayed-ACK timeout estimate (`icsk_ack.ato`).
    pub fn ato(&self) -> Duration {
        self.ato
    }
    /// One delayed-ACK time under this policy: how long an owed ACK may wait for a data
    /// segment to carry it. Linux's current `ato`; `every:N`'s longest delay; `delay:NS`'s
    /// delay.
    pub fn delack_time(&self) -> Duration {
        match self.policy.mode {
            AckMode::Linux => self.ato,
            AckMode::EveryN { max_delay, .. } => max_delay,
            AckMode::Delay(d) => d,
        }
    }
    /// The current ACK state.
    pub fn delay(&self) -> AckDelay {
        self.delack
    }
    /// `inet_csk_ack_scheduled`: an ACK is owed.
    pub fn scheduled(&self) -> bool {
        self.pending & SCHED != 0 || matches!(self.delack, AckDelay::Immediate(_))
    }
    /// The reason of an ACK due now, if any.
    pub fn due(&self) -> Option<AckReason> {
        match self.delack {
            AckDelay::Immediate(r) => Some(r),
            _ => None,
        }
    }
    /// The earliest deadline (delayed ACK or SACK compression).
    pub fn deadline(&self) -> Option<Instant> {
        let d = match self.delack {
            AckDelay::Waiting(t) => Some(t),
            _ => None,
        };
        crate::time::earliest(d, self.comp_deadline)
    }

    /// `inet_csk_schedule_ack`.
    pub fn schedule(&mut self) {
        self.pending |= SCHED;
    }

    /// Send an ACK now (`ICSK_ACK_NOW` and the like): the connection snapshots it when the
    /// current event ends. Decisions within one event give one ACK; the first reason
    /// recorded is the one counted.
    pub fn ack_now(&mut self, r: AckReason) {
        self.pending |= SCHED;
        if !matches!(self.delack, AckDelay::Immediate(_)) {
            self.delack = AckDelay::Immediate(r);
        }
    }

    /// `tcp_incr_quickack`: `quick = max(quick, min(rcv_wnd / (2*rcv_mss) or 2, max))`.
    pub fn incr_quickack(&mut self, rcv_wnd: u32, max: u8) {
        let mut q = rcv_wnd / (2 * self.rcv_mss.max(1));
        if q == 0 {
            q = 2;
        }
        let q = q.min(u32::from(max)) as u8;
        if q > self.quick {
            self.quick = q;
        }
    }

    /// `tcp_enter_quickack_mode`: more quick ACKs and `ato = ATO_MIN` (old or duplicate
    /// data, data outside the window).
    pub fn enter_quickack_mode(&mut self, rcv_wnd: u32) {
        self.incr_quickack(rcv_wnd, MAX_QUICKACKS);
        self.ato = ATO_MIN;
    }

    /// `__tcp_select_window` zeroes `quick` when free space falls below half the buffer.
    pub fn clear_quick(&mut self) {
        self.quick = 0;
    }

    /// `tcp_event_data_recv` for in-order data: schedule an ACK, measure rcv_mss
    /// (`tcp_measure_rcv_mss`, with the run's `gso_size`, not its total length) and update
    /// the `ato` estimator. `segs` counts wire segments for `every:N`.
    #[allow(clippy::too_many_arguments)]
    pub fn on_data(
        &mut self,
        now: Instant,
        len: u32,
        gso_size: u32,
        segs: u16,
        psh: bool,
        remnant: bool,
        rcv_wnd: u32,
    ) {
        self.schedule();
        self.segs_unacked = self.segs_unacked.saturating_add(u32::from(segs.max(1)));
        self.measure_rcv_mss(if segs > 1 { gso_size } else { len }, psh, remnant);
        if self.ato == Duration::ZERO {
            // The first data packet: initialise the delayed-ACK engine.
            self.incr_quickack(rcv_wnd, MAX_QUICKACKS);
            self.ato = ATO_MIN;
        } else {
            let m = now - self.lrcvtime;
            let half_min = Duration::from_nanos(ATO_MIN.as_nanos() / 2);
            if m <= half_min {
                self.ato = Duration::from_nanos(self.ato.as_nanos() / 2) + half_min;
            } else if m < self.ato {
                self.ato = (Duration::from_nanos(self.ato.as_nanos() / 2) + m).min(self.rto);
            } else if m > self.rto {
                // Idle longer than an RTO: the sender restarts from slow start.
                self.incr_quickack(rcv_wnd, MAX_QUICKACKS);
            }
        }
        self.lrcvtime = now;
    }

    /// `tcp_measure_rcv_mss`. `len` is the per-segment length (`gso_size ?: skb->len`).
    fn measure_rcv_mss(&mut self, len: u32, psh: bool, remnant: bool) {
        let lss = self.last_seg_size;
        self.last_seg_size = 0;
        if len >= self.rcv_mss {
            if len != self.rcv_mss {
                self.rcv_mss = len.min(self.advmss);
            }
            // 4720852ed9af: a segment of exactly 1 MSS with PSH is likely the end of a
            // write; ACK as soon as the application reads it.
            if psh && self.policy.quickack_psh_mss {
                self.pending |= PUSHED;
            }
        } else {
            // Linux compares header-inclusive lengths with 536+20 / 88+20 and subtracts
            // the connection's header length again; weir has only the payload length,
            // which gives the same answer for headers of the usual size.
            if len >= MSS_DEFAULT || (len >= MIN_MSS && !remnant) {
                self.last_seg_size = len;
                if len == lss {
                    self.rcv_mss = len;
                    return;
                }
            }
            if self.pending & PUSHED != 0 {
                self.pending |= PUSHED2;
            }
            self.pending |= PUSHED;
        }
    }

    /// `__tcp_ack_snd_check` (or the `every:N` / `delay:NS` rule): decide, once per
    /// coalesced segment, whether the ACK goes out now, waits for a timer, or is compressed.
    pub fn snd_check(&mut self, now: Instant, c: SndCheck) {
        if self.pending & SCHED == 0 && !matches!(self.delack, AckDelay::Immediate(_)) {
            return;
        }
        if matches!(self.delack, AckDelay::Immediate(_)) {
            return;
        }
        match self.policy.mode {
            AckMode::Linux => self.snd_check_linux(now, c),
            AckMode::EveryN { n, max_delay } => {
                if c.data_was_ofo || c.ofo {
                    self.ack_now(AckReason::OutOfOrder);
                } else if self.segs_unacked >= u32::from(n) {
                    self.ack_now(AckReason::Stretch);
                } else {
                    self.arm_timer(now + max_delay);
                }
            }
            AckMode::Delay(d) => {
                if c.data_was_ofo || c.ofo {
                    self.ack_now(AckReason::OutOfOrder);
                } else {
                    self.arm_timer(now + d);
                }
            }
        }
    }

    fn arm_timer(&mut self, at: Instant) {
        // An earlier deadline is never pushed back.
        if let AckDelay::Waiting(t) = self.delack {
            if t <= at {
                return;
            }
        }
        self.pending |= TIMER;
        self.timer_reason = AckReason::DelayedTimer;
        self.delack = AckDelay::Waiting(at);
    }

    fn snd_check_linux(&mut self, now: Instant, c: SndCheck) {
        // (a) more than one full frame since the last window update, and the window would
        // not shrink; (b) quickack mode.
        if c.unacked_bytes > self.rcv_mss && c.window_ok {
            let r = if c.data_was_ofo {
                AckReason::OutOfOrder
            } else {
                AckReason::Stretch
            };
            self.ack_now(r);
            return;
        }
        if self.quick > 0 {
            let r = if c.data_was_ofo {
                AckReason::OutOfOrder
            } else {
                AckReason::Quick
            };
            self.ack_now(r);
            return;
        }
        if !c.ofo {
            self.send_delayed_ack(now);
            return;
        }
        // SACK compression.
        if !c.sack || self.compressed_ack >= COMP_SACK_NR {
            self.ack_now(AckReason::OutOfOrder);
            return;
        }
        if self.comp_rcv_nxt != c.rcv_nxt {
            self.comp_rcv_nxt = c.rcv_nxt;
            self.dup_ack_counter = 0;
        }
        if self.dup_ack_counter < FASTRETRANS_THRESH {
            self.dup_ack_counter += 1;
            self.ack_now(AckReason::OutOfOrder);
            return;
        }
        self.compressed_ack += 1;
        if self.comp_deadline.is_none() {
            // min(tcp_comp_sack_delay_ns, 5% of RTT): RTT from the handshake.
            let five_pct = Duration::from_nanos(self.srtt.as_nanos() / 20);
            let d = if self.srtt == Duration::ZERO {
                COMP_SACK_DELAY
            } else {
                five_pct.min(COMP_SACK_DELAY)
            };
            self.comp_deadline = Some(now + d);
        }
    }

    /// `tcp_send_delayed_ack`.
    fn send_delayed_ack(&mut self, now: Instant) {
        let mut ato = self.ato.max(ATO_MIN);
        if ato > ATO_MIN {
            let mut max_ato = Duration::from_millis(500);
            if self.pending & PUSHED != 0 {
                max_ato = DELACK_MAX;
            }
            if self.srtt > Duration::ZERO {
                let rtt = self.srtt.max(ATO_MIN);
                if rtt < max_ato {
                    max_ato = rtt;
                }
            }
            ato = ato.min(max_ato);
        }
        ato = ato.min(DELACK_MAX);
        let mut timeout = now + ato;
        if let AckDelay::Waiting(t) = self.delack {
            if self.pending & TIMER != 0 {
                // The armed timer fires within ato/4: send now instead.
                if t <= now + Duration::from_nanos(ato.as_nanos() / 4) {
                    self.ack_now(AckReason::DelayedTimer);
                    return;
                }
                if t < timeout {
                    timeout = t;
                }
            }
        }
        self.pending |= SCHED | TIMER;
        self.timer_reason = AckReason::DelayedTimer;
        self.delack = AckDelay::Waiting(timeout);
    }

    /// `tcp_cleanup_rbuf` after the application consumed `copied` bytes. `drained`: no
    /// unread and no out-of-order bytes remain (`sk_rmem_alloc == 0`). `window_doubled`:
    /// `2*rcv_window_now <= window_clamp` and the new window is at least twice the
    /// current one. `peer_closed`: `RCV_SHUTDOWN`.
    pub fn cleanup_rbuf(
        &mut self,
        copied: u32,
        unacked_bytes: u32,
        drained: bool,
        window_doubled: bool,
        peer_closed: bool,
    ) {
        if matches!(self.delack, AckDelay::Immediate(_)) {
            return;
        }
        if self.scheduled() && matches!(self.policy.mode, AckMode::Linux) {
            if unacked_bytes > self.rcv_mss {
                self.ack_now(AckReason::Stretch);
                return;
            }
            if copied > 0 && self.pending & (PUSHED | PUSHED2) != 0 && drained {
                self.ack_now(AckReason::Psh);
                return;
            }
        }
        if copied > 0 && !peer_closed && window_doubled {
            self.ack_now(AckReason::WindowUpdate);
        }
    }

    /// `tcp_delack_timer_handler` and the SACK-compression hrtimer: fire what is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(t) = self.comp_deadline {
            if t <= now {
                self.comp_deadline = None;
                if self.compressed_ack > 0 {
                    self.ack_now(AckReason::OutOfOrder);
                }
            }
        }
        if let AckDelay::Waiting(t) = self.delack {
            if t <= now {
                self.pending &= !TIMER;
                self.delack = AckDelay::Idle;
                if self.pending & SCHED != 0 {
                    if matches!(self.policy.mode, AckMode::Linux) {
                        // Delayed ACK missed: inflate ATO (not in pingpong mode).
                        self.ato = Duration::from_nanos(self.ato.as_nanos().saturating_mul(2))
                            .min(self.rto);
                    }
                    self.ack_now(self.timer_reason);
                }
            }
        }
    }

    /// `tcp_event_ack_sent`: an ACK carrying the current `rcv_nxt` and window went out.
    pub fn on_ack_sent(&mut self) {
        // 059217c18be6: one quick ACK is used up only by an ACK that acknowledges new data.
        if self.quick > 0 && self.scheduled() {
            self.quick -= 1;
            if self.quick == 0 {
                self.ato = ATO_MIN;
            }
        }
        self.pending = 0;
        self.delack = AckDelay::Idle;
        self.compressed_ack = 0;
        self.comp_deadline = None;
        self.segs_unacked = 0;
    }
}
