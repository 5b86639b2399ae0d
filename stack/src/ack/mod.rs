//! The ACK policy: when a received segment is acknowledged, and how ACKs are built.
//!
//! Read first: RFC 5681 §4.2 (ACK generation), RFC 9293 §3.8.6.3, and Linux
//! `net/ipv4/tcp_input.c`: `tcp_event_data_recv`, `tcp_measure_rcv_mss`,
//! `__tcp_ack_snd_check`, `tcp_send_delayed_ack`, `tcp_delack_timer_handler`,
//! `tcp_cleanup_rbuf` (see `shared/reference/linux-receive-path.md` §3-4).
//!
//! [`AckState`] is the per-connection half of Linux's `icsk_ack` plus the SACK-compression
//! fields of `tcp_sock`; the connection calls it at the same points `tcp_input.c` does and
//! it answers with an [`AckDelay`]: nothing due, a deadline, or "send now" with an
//! [`AckReason`]. [`template`] builds the frames.
//!
//! One decision per coalesced segment: GRO's descriptor reaches [`AckState::snd_check`] once,
//! exactly as a GRO packet reaches `__tcp_ack_snd_check` once in Linux, so a 45-segment run
//! gets one stretch ACK under [`AckPolicy::linux`].
//!
//! Every decision to ACK now yields its own ACK frame, as in Linux where `tcp_send_ack`
//! runs inside the decision: the connection snapshots the ACK number, window, TSecr and
//! SACK blocks at that moment into its [`AckQueue`] and behaves as if the ACK had left
//! (`rcv_wup = rcv_nxt`, `tcp_event_ack_sent`); `poll_tx` builds the queued snapshots in
//! order. So with GRO off a burst of 45 in-order segments gets one ACK per two segments,
//! as Linux without GRO would send, and the cost of not coalescing shows in the counts.
//!
//! Differences from Linux, on purpose:
//! - weir only receives, so it never enters pingpong (interactive) mode: there is no reply
//!   data within `ato` to trigger `inet_csk_inc_pingpong_cnt`.
//! - The SACK-compression delay is `min(1 ms, 5% of the handshake RTT)`; Linux uses the
//!   smoothed RTT, which a pure receiver has no samples for after the handshake.
//! - The frames of one loop iteration wait in a bounded per-connection [`AckQueue`]; when it
//!   overflows, the oldest decision is merged into the next one (a cumulative stretch ACK)
//!   and counted in [`AckStats::merged`], never queued without bound.
//! - Within one segment (or one timer or application event) the decisions collapse into one
//!   ACK, as in Linux, where `ICSK_ACK_NOW`, quickack and `__tcp_ack_snd_check` lead to
//!   a single `tcp_send_ack`; the first reason recorded is the one counted.

pub mod template;

use core::fmt;
use core::str::FromStr;

use std::collections::VecDeque;

use crate::reason::reason_enum;
use crate::seq::SeqNumber;
use crate::time::{Duration, Instant};
use crate::wire::{SackBlock, MAX_SACK_BLOCKS};

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
/// RFC 5681 §4.2: "an ACK MUST be generated within 500 ms of the arrival of the first
/// unacknowledged packet".
pub const RFC5681_MAX_DELAY: Duration = Duration::from_millis(500);
/// Linux `TCP_MSS_DEFAULT`.
const MSS_DEFAULT: u32 = 536;
/// Linux `TCP_MIN_MSS`.
const MIN_MSS: u32 = 88;

/// When to acknowledge: a named preset plus the `quickack_psh_mss` switch. One value per
/// listener; every connection it accepts copies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckPolicy {
    /// The rule.
    pub mode: AckMode,
    /// Linux commit 4720852ed9af: an exactly-1-MSS segment with PSH sets `ICSK_ACK_PUSHED`,
    /// so the ACK goes out as soon as the application consumes it. Only used by
    /// [`AckMode::Linux`].
    pub quickack_psh_mss: bool,
}

/// The ACK rules weir implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckMode {
    /// Linux's `__tcp_ack_snd_check` and delayed-ACK engine.
    Linux,
    /// ACK every `n` segments received (segments inside coalesced runs count one each),
    /// at the latest `max_delay` after the first unacknowledged one.
    EveryN {
        /// Segments per ACK.
        n: u16,
        /// Longest ACK delay.
        max_delay: Duration,
    },
    /// ACK only when the oldest unacknowledged data has waited `delay` (or at once for
    /// out-of-order data, duplicates and gap fills, RFC 5681 §4.2).
    Delay(Duration),
}

impl Default for AckPolicy {
    fn default() -> Self {
        AckPolicy::linux()
    }
}

impl AckPolicy {
    /// Linux's policy (the default), with `quickack_psh_mss` on as in Linux >= 6.7.
    pub const fn linux() -> Self {
        AckPolicy {
            mode: AckMode::Linux,
            quickack_psh_mss: true,
        }
    }
    /// RFC 5681 §4.2: every second segment, at most 500 ms late.
    pub const fn rfc5681() -> Self {
        Self::every(2)
    }
    /// An ACK every `n` segments (at least 1), at most 500 ms late (RFC 5681 §4.2).
    pub const fn every(n: u16) -> Self {
        AckPolicy {
            mode: AckMode::EveryN {
                n: if n == 0 { 1 } else { n },
                max_delay: RFC5681_MAX_DELAY,
            },
            quickack_psh_mss: false,
        }
    }
    /// Acknowledge in-order data only after `delay`.
    pub const fn delay(delay: Duration) -> Self {
        AckPolicy {
            mode: AckMode::Delay(delay),
            quickack_psh_mss: false,
        }
    }
    /// The same policy with the `quickack_psh_mss` switch set.
    pub const fn with_quickack_psh_mss(mut self, on: bool) -> Self {
        self.quickack_psh_mss = on;
        self
    }
}

/// Why an [`AckPolicy`] string did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckPolicyParseError {
    /// Not one of the known presets.
    UnknownPreset(String),
    /// The number after `every:` or `delay:` is missing, not a number, or zero.
    BadNumber(String),
    /// An unknown `,switch=value` suffix.
    UnknownSwitch(String),
}

impl fmt::Display for AckPolicyParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownPreset(s) => write!(
                f,
                "unknown ACK policy {s:?}: use linux, rfc5681, every:N or delay:NS, \
                 optionally followed by ,quickack_psh_mss=on|off"
            ),
            Self::BadNumber(s) => write!(
                f,
                "bad number in ACK policy {s:?}: every:N takes segments (1..=65535), \
                 delay:NS nanoseconds (> 0)"
            ),
            Self::UnknownSwitch(s) => write!(
                f,
                "unknown ACK policy switch {s:?}: the only switch is quickack_psh_mss=on|off"
            ),
        }
    }
}

impl std::error::Error for AckPolicyParseError {}

impl FromStr for AckPolicy {
    type Err = AckPolicyParseError;
    /// Parses `linux`, `rfc5681`, `every:N`, `delay:NS`, each optionally followed by
    /// `,quickack_psh_mss=on` or `,quickack_psh_mss=off`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.trim().split(',');
        let preset = parts.next().unwrap_or("").trim();
        let mut p = match preset {
            "linux" => AckPolicy::linux(),
            "rfc5681" => AckPolicy::rfc5681(),
            _ => {
                if let Some(n) = preset.strip_prefix("every:") {
                    match n.parse::<u16>() {
                        Ok(n) if n > 0 => AckPolicy::every(n),
                        _ => return Err(AckPolicyParseError::BadNumber(s.to_string())),
                    }
                } else if let Some(n) = preset.strip_prefix("delay:") {
                    match n.parse::<u64>() {
                        Ok(n) if n > 0 => AckPolicy::delay(Duration::from_nanos(n)),
                        _ => return Err(AckPolicyParseError::BadNumber(s.to_string())),
                    }
                } else {
                    return Err(AckPolicyParseError::UnknownPreset(s.to_string()));
                }
            }
        };
        for sw in parts {
            match sw.trim() {
                "quickack_psh_mss=on" | "quickack_psh_mss" => p.quickack_psh_mss = true,
                "quickack_psh_mss=off" => p.quickack_psh_mss = false,
                other => return Err(AckPolicyParseError::UnknownSwitch(other.to_string())),
            }
        }
        Ok(p)
    }
}

impl fmt::Display for AckPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mode {
            AckMode::Linux => f.write_str("linux")?,
            AckMode::EveryN { n, .. } => write!(f, "every:{n}")?,
            AckMode::Delay(d) => write!(f, "delay:{}", d.as_nanos())?,
        }
        let default_switch = matches!(self.mode, AckMode::Linux);
        if self.quickack_psh_mss != default_switch {
            let v = if self.quickack_psh_mss { "on" } else { "off" };
            write!(f, ",quickack_psh_mss={v}")?;
        }
        Ok(())
    }
}

reason_enum! {
    /// Why a segment was sent; ACKs are counted by reason in [`AckStats`]. Names
    /// ([`AckReason::name`]) are used in the stats output.
    pub enum AckReason {
        /// More than one rcv_mss arrived since the last window update
        /// (`__tcp_ack_snd_check` (a)), or `every:N` reached N.
        Stretch = "stretch",
        /// Quickack mode (connection start, after idle, after duplicates).
        Quick = "quick",
        /// Out-of-order data (a duplicate ACK carrying SACK blocks).
        OutOfOrder = "out_of_order",
        /// Old or duplicate data, or a segment outside the window (with D-SACK).
        Duplicate = "duplicate",
        /// The out-of-order queue drained: a gap was filled (RFC 5681 §4.2).
        GapFill = "gap_fill",
        /// The delayed-ACK (or `delay:NS`) timer expired.
        DelayedTimer = "delayed_timer",
        /// The application consumed data and the window at least doubled.
        WindowUpdate = "window_update",
        /// The application consumed pushed data (`ICSK_ACK_PUSHED`/`PUSHED2`).
        Psh = "psh",
        /// SYN-ACK or the ACK of the handshake.
        Handshake = "handshake",
        /// A challenge ACK (RFC 5961).
        Challenge = "challenge",
        /// Our FIN, or the ACK of the peer's FIN.
        Fin = "fin",
        /// A RST.
        Rst = "rst",
    }
}

impl AckReason {
    /// A deliberate duplicate ACK (out-of-order data, old data, a challenge): sent even
    /// when an identical ACK is already queued, because the sender counts them (RFC 5681
    /// §4.2, RFC 5961 §7).
    pub const fn is_dupack(self) -> bool {
        matches!(
            self,
            AckReason::OutOfOrder | AckReason::Duplicate | AckReason::Challenge
        )
    }
}

/// One ACK decided but not yet built: the fields as of the decision (Linux would have sent
/// it right then from `__tcp_ack_snd_check` or `tcp_send_dupack`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckSnapshot {
    /// The acknowledgment number (`rcv_nxt` at the decision).
    pub ack: SeqNumber,
    /// The window field (already scaled down), from `tcp_select_window` at the decision.
    pub window: u16,
    /// TSecr: TS.Recent at the decision (RFC 7323 §4.3).
    pub tsecr: u32,
    /// Why it is sent.
    pub reason: AckReason,
    /// SACK blocks, D-SACK first (RFC 2883 §4); `sack_count` are valid.
    pub sack: [SackBlock; MAX_SACK_BLOCKS],
    /// Number of valid entries in `sack`.
    pub sack_count: u8,
}

impl AckSnapshot {
    /// All zero, no SACK blocks: what [`AckQueue::push_with`] hands its `fill`.
    pub const EMPTY: AckSnapshot = AckSnapshot {
        ack: SeqNumber(0),
        window: 0,
        tsecr: 0,
        reason: AckReason::Stretch,
        sack: [SackBlock {
            left: SeqNumber(0),
            right: SeqNumber(0),
        }; MAX_SACK_BLOCKS],
        sack_count: 0,
    };

    /// The valid SACK blocks.
    pub fn sack_blocks(&self) -> &[SackBlock] {
        &self.sack[..usize::from(self.sack_count).min(MAX_SACK_BLOCKS)]
    }
    /// Same acknowledgment number, window and SACK blocks: the peer could not tell the two
    /// frames apart.
    fn same_content(&self, o: &AckSnapshot) -> bool {
        self.ack == o.ack && self.window == o.window && self.sack_blocks() == o.sack_blocks()
    }
}

/// What [`AckQueue::push`] did with a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckPush {
    /// Queued as its own frame.
    Queued,
    /// Not queued: an identical in-order ACK is already queued (no spurious dupack).
    Suppressed,
    /// Queued, but the queue was full: its oldest entry was merged into the next one.
    Merged,
}

/// A connection's ACKs decided and not yet built, oldest first. Bounded: its capacity is
/// fixed when the connection is set up and it never grows (no allocation per packet).
#[derive(Clone, Debug)]
pub struct AckQueue {
    q: VecDeque<AckSnapshot>,
    cap: usize,
}

impl AckQueue {
    /// An empty queue of at most `cap` (at least 1) snapshots, allocated now.
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        AckQueue {
            // One more than the bound: `push_with` writes the new snapshot in place before
            // it drops the oldest, and a push never reallocates.
            q: VecDeque::with_capacity(cap + 1),
            cap,
        }
    }

    /// Queues the snapshot `fill` writes, in its place in the queue (given
    /// [`AckSnapshot::EMPTY`]). A non-dupack ACK identical to the newest queued one is
    /// suppressed (the queued frame already says it; sending it twice would be a spurious
    /// duplicate ACK that the sender counts toward fast retransmit, RFC 5681 §4.2). When
    /// the queue is full the oldest entry is dropped and the next one, which acknowledges
    /// everything it did (ACKs are cumulative), becomes a stretch ACK if it acknowledges
    /// more.
    ///
    /// Written in place because a snapshot built field by field elsewhere and then moved
    /// in is read back with wide loads over the narrow stores that just wrote it: the load
    /// cannot take its bytes from the store buffer and waits for every older store to
    /// reach the cache (2.8% of a 64-flow e2e profile, most of the old by-value push).
    /// Here nothing reads it back but the same fields at their own width.
    #[inline]
    pub fn push_with(&mut self, fill: impl FnOnce(&mut AckSnapshot)) -> AckPush {
        // The spare slot (see `new`) takes it before the queue's bound is applied.
        self.q.push_back(AckSnapshot::EMPTY);
        let n = self.q.len();
        let mut dupack = false;
        if let Some(s) = self.q.back_mut() {
            fill(s);
            // Read field by field, never as a whole (see above).
            dupack = s.reason.is_dupack();
        }
        if !dupack && n >= 2 && self.q[n - 2].same_content(&self.q[n - 1]) {
            self.q.pop_back();
            return AckPush::Suppressed;
        }
        if n <= self.cap {
            return AckPush::Queued;
        }
        if let Some(old) = self.q.pop_front() {
            if let Some(next) = self.q.front_mut() {
                if next.ack > old.ack {
                    next.reason = AckReason::Stretch;
                }
            }
        }
        AckPush::Merged
    }

    /// The oldest snapshot.
    pub fn front(&self) -> Option<&AckSnapshot> {
        self.q.front()
    }
    /// Removes the oldest snapshot without reading it (after it was built from
    /// [`AckQueue::front`]).
    pub fn pop_front(&mut self) {
        self.q.pop_front();
        if self.q.is_empty() {
            // Back to the buffer's first slot: a queue that rarely holds more than one
            // ACK then reuses one cache line instead of walking its whole buffer (with
            // many connections those lines leave the cache between two ACKs, and the
            // push that writes one waited for it: 2.6% of the receiver at 64 flows).
            self.q.clear();
        }
    }
    /// Snapshots queued.
    pub fn len(&self) -> usize {
        self.q.len()
    }
    /// `true` when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
    /// The most snapshots it holds.
    pub fn capacity(&self) -> usize {
        self.cap
    }
    /// Drops everything (the connection was reset).
    pub fn clear(&mut self) {
        self.q.clear();
    }
}

/// Segments sent by the ACK engine, by reason, plus the segments they acknowledged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AckStats {
    by_reason: [u64; AckReason::COUNT],
    /// Data segments (wire segments, counting inside coalesced runs) received in order.
    pub segments_acked: u64,
    /// ACKs not built because the buffer pool was empty (they stay due).
    pub alloc_failures: u64,
    /// ACKs whose TCP checksum the NIC computed.
    pub tx_csum_offloaded: u64,
    /// ACK decisions merged into a later ACK because the connection's [`AckQueue`] was
    /// full (each is one frame fewer than Linux would have sent).
    pub merged: u64,
    /// ACK decisions not sent because an identical in-order ACK was already queued.
    pub suppressed: u64,
}

impl AckStats {
    /// Count one frame sent for `r`.
    pub fn count(&mut self, r: AckReason) {
        self.by_reason[r.index()] += 1;
    }
    /// Frames sent for `r`.
    pub fn get(&self, r: AckReason) -> u64 {
        self.by_reason[r.index()]
    }
    /// Frames sent, all reasons.
    pub fn total(&self) -> u64 {
        self.by_reason.iter().sum()
    }
    /// `(name, count)` for every reason.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        AckReason::ALL.iter().map(|r| (r.name(), self.get(*r)))
    }
    /// Adds `o`'s counts (totals over cores).
    pub fn merge(&mut self, o: &AckStats) {
        for (a, b) in self.by_reason.iter_mut().zip(o.by_reason.iter()) {
            *a += *b;
        }
        self.segments_acked += o.segments_acked;
        self.alloc_failures += o.alloc_failures;
        self.tx_csum_offloaded += o.tx_csum_offloaded;
        self.merged += o.merged;
        self.suppressed += o.suppressed;
    }
    /// Pure data ACKs (excluding handshake, FIN, RST, challenge).
    pub fn data_acks(&self) -> u64 {
        self.total()
            - self.get(AckReason::Handshake)
            - self.get(AckReason::Fin)
            - self.get(AckReason::Rst)
            - self.get(AckReason::Challenge)
    }
}

/// Whether a connection owes an ACK, as timers-as-data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AckDelay {
    /// Nothing owed, or owed without a deadline (scheduled, waiting for more data).
    #[default]
    Idle,
    /// Send when this deadline passes (delayed-ACK or SACK-compression timer).
    Waiting(Instant),
    /// Send now: decided during the current event (segment, timer, application call); the
    /// connection snapshots it into its [`AckQueue`] when the event ends.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `TcpConfig::ack_queue`'s memory bound: the default queue, with its spare slot,
    /// fits in 6 KiB.
    #[test]
    fn a_snapshot_takes_at_most_48_bytes() {
        let size = std::mem::size_of::<AckSnapshot>();
        assert!(size <= 48);
        assert!((crate::tcp::TcpConfig::default().ack_queue + 1) * size <= 6 * 1024);
    }

    #[test]
    fn parse_presets() {
        assert_eq!("linux".parse::<AckPolicy>(), Ok(AckPolicy::linux()));
        assert_eq!("rfc5681".parse::<AckPolicy>(), Ok(AckPolicy::every(2)));
        assert_eq!("every:3".parse::<AckPolicy>(), Ok(AckPolicy::every(3)));
        assert_eq!(
            "delay:500000".parse::<AckPolicy>(),
            Ok(AckPolicy::delay(Duration::from_micros(500)))
        );
        assert_eq!(
            "linux,quickack_psh_mss=off".parse::<AckPolicy>(),
            Ok(AckPolicy::linux().with_quickack_psh_mss(false))
        );
        assert!(matches!(
            "every:0".parse::<AckPolicy>(),
            Err(AckPolicyParseError::BadNumber(_))
        ));
        assert!(matches!(
            "bsd".parse::<AckPolicy>(),
            Err(AckPolicyParseError::UnknownPreset(_))
        ));
        assert!(matches!(
            "linux,foo".parse::<AckPolicy>(),
            Err(AckPolicyParseError::UnknownSwitch(_))
        ));
        for s in ["linux", "every:2", "delay:7", "linux,quickack_psh_mss=off"] {
            let p: AckPolicy = s.parse().expect("parses");
            assert_eq!(p.to_string(), s);
        }
    }

    fn snap(ack: u32, window: u16, reason: AckReason) -> AckSnapshot {
        AckSnapshot {
            ack: SeqNumber(ack),
            window,
            tsecr: 0,
            reason,
            sack: [SackBlock::default(); MAX_SACK_BLOCKS],
            sack_count: 0,
        }
    }

    /// Queues a whole snapshot, as the tests build them.
    fn push(q: &mut AckQueue, s: AckSnapshot) -> AckPush {
        q.push_with(|slot| *slot = s)
    }

    /// No spurious duplicate ACK (RFC 5681 §4.2: the sender counts duplicates): an in-order
    /// ACK identical to the newest queued one is suppressed; deliberate dupacks are not.
    #[test]
    fn queue_suppresses_identical_in_order_ack_but_keeps_dupacks() {
        let mut q = AckQueue::new(8);
        assert_eq!(
            push(&mut q, snap(100, 10, AckReason::Stretch)),
            AckPush::Queued
        );
        assert_eq!(
            push(&mut q, snap(100, 10, AckReason::Quick)),
            AckPush::Suppressed
        );
        assert_eq!(
            push(&mut q, snap(100, 10, AckReason::DelayedTimer)),
            AckPush::Suppressed
        );
        assert_eq!(
            push(&mut q, snap(100, 11, AckReason::WindowUpdate)),
            AckPush::Queued
        );
        assert_eq!(
            push(&mut q, snap(100, 11, AckReason::OutOfOrder)),
            AckPush::Queued
        );
        assert_eq!(
            push(&mut q, snap(100, 11, AckReason::Duplicate)),
            AckPush::Queued
        );
        assert_eq!(q.len(), 4);
    }

    /// Bounded: the oldest entry is merged into the next, which becomes a stretch ACK when
    /// it acknowledges more (ACKs are cumulative).
    #[test]
    fn queue_overflow_merges_oldest_into_stretch() {
        let mut q = AckQueue::new(2);
        push(&mut q, snap(100, 10, AckReason::Quick));
        push(&mut q, snap(200, 10, AckReason::GapFill));
        assert_eq!(
            push(&mut q, snap(300, 10, AckReason::Quick)),
            AckPush::Merged
        );
        assert_eq!(q.len(), 2);
        // As `Conn::build` sends them: read the front, then remove it.
        let pop = |q: &mut AckQueue| {
            let s = q.front().copied();
            q.pop_front();
            s
        };
        let a = pop(&mut q).expect("front");
        assert_eq!((a.ack, a.reason), (SeqNumber(200), AckReason::Stretch));
        assert_eq!(pop(&mut q).map(|s| s.ack), Some(SeqNumber(300)));
        assert!(q.is_empty());
        let mut one = AckQueue::new(0);
        assert_eq!(one.capacity(), 1);
        push(&mut one, snap(1, 1, AckReason::Quick));
        assert_eq!(
            push(&mut one, snap(2, 1, AckReason::Quick)),
            AckPush::Merged
        );
        assert_eq!(one.front().map(|s| s.reason), Some(AckReason::Stretch));
    }

    #[test]
    fn reason_names_are_snake_case() {
        for r in AckReason::ALL {
            assert!(r.name().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        }
        assert_eq!(AckReason::ALL.len(), 12);
    }
}
