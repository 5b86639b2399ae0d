//! The retransmission timer's arithmetic: RTT samples, SRTT and RTTVAR, the RTO and its
//! backoff (RFC 6298), and the windowed minimum RTT.
//!
//! Read first: RFC 6298 §2 (the computation), §3 (Karn's rule) and §5 (the timer and its
//! backoff); RFC 7323 §4.2 (the RTTM rule) and Appendix G; Linux `net/ipv4/tcp_input.c`
//! (`tcp_rtt_estimator`, `tcp_set_rto`, `tcp_ack_update_rtt`, `tcp_rtt_tsopt_us`,
//! `tcp_update_rtt_min`) and `lib/win_minmax.c`.
//!
//! [`RttEstimator`] is one connection's estimator: a small value type (no clock, no
//! allocation, no I/O). Time comes in as [`Instant`] arguments and RTTs as [`Duration`]s;
//! what goes out is the RTO ([`RttEstimator::rto`]), the deadline to arm
//! ([`RttEstimator::deadline`]), SRTT, RTTVAR and the minimum RTT. A sample it refuses
//! comes back as a [`SampleRefused`] reason for the caller to count.
//!
//! # Arithmetic and rounding
//!
//! SRTT and RTTVAR are kept unscaled in nanoseconds (`u64`), the unit of [`Duration`].
//! alpha = 1/8 and beta = 1/4 (RFC 6298 §2.3's SHOULD) are the shifts [`ALPHA_SHIFT`] and
//! [`BETA_SHIFT`], so each update `x <- (1 - g) x + g y` is computed exactly in `u128` as
//! `((2^s - 1) x + y) >> s` and rounded down to the nanosecond; RTTVAR of the first sample
//! is R/2 rounded down. Rounding down loses less than a nanosecond per sample, far below
//! the resolution of any clock weir reads (the TSC, once per loop iteration), so no scaled
//! fixed point in the manner of Linux's `srtt_us << 3` is needed. Sums saturate.
//!
//! # Choices, with their sources
//!
//! - **Bounds.** [`RtoConfig`]: the minimum RTO is 200 ms (Linux `TCP_RTO_MIN`) rather
//!   than RFC 6298 §2.4's 1 s; the maximum 120 s (Linux `TCP_RTO_MAX`; §2.5 allows any
//!   maximum of at least 60 s); the initial RTO 1 s (§2.1, Linux `TCP_TIMEOUT_INIT`). The
//!   minimum clamps the whole RTO, as §2.4 says. Linux differs here: `tcp_rtt_estimator`
//!   floors the variance term at `rto_min`, so its RTO is at least SRTT + 200 ms, where
//!   weir's is at least 200 ms.
//! - **Clock granularity G** ([`RtoConfig::granularity`], default 1 µs): weir's timers
//!   are nanosecond deadlines checked once per loop iteration, which takes microseconds,
//!   so 1 µs is the timer's effective granularity. G only floors the variance term
//!   (§2.2: `RTO = SRTT + max(G, K*RTTVAR)`). The timestamp clock is coarser (1 ms ticks,
//!   [`WEIR_TS_TICK`]); its quantisation is in the samples, not in G.
//! - **Many samples per RTT** (RFC 7323 Appendix G): weir makes Linux's choice, one sample
//!   per ACK that acknowledges new data, each fed to RFC 6298 §2.3 with the plain gains.
//!   Appendix G's scaled gains (alpha / ExpectedSamples) are not applied, and neither is
//!   Linux's per-RTT `mdev_max` that keeps RTTVAR from decaying within a round trip: with
//!   a window of ACKs, SRTT remembers about eight ACKs rather than eight round trips, and
//!   the 200 ms minimum RTO is what keeps that from causing spurious timeouts.
//! - **Karn's rule** (RFC 6298 §3): a sample from a segment's send time is refused if the
//!   ACK covers a retransmitted segment ([`RttEstimator::sample_from_ack`]). With
//!   timestamps, a sample comes from TSecr instead ([`RttEstimator::sample_from_tsecr`]),
//!   which is unambiguous for retransmissions (RFC 6298 §3, RFC 7323 §4), only for an ACK
//!   that advances SND.UNA (RFC 7323 §4.2, the RTTM rule).
//! - **Backoff** (RFC 6298 §5.5): each expiry doubles the RTO up to the maximum; the
//!   backoff is kept until a new valid sample (end of §5; Linux `tcp_ack_update_rtt`:
//!   "only reset backoff on valid RTT measurement"). The retry count is separate, as in
//!   Linux: consecutive expiries, reset whenever SND.UNA advances (Linux `tcp_ack` sets
//!   `icsk_retransmits = 0`), so a connection that makes progress through retransmissions
//!   whose ACKs give no sample is not given up on. Linux's give-up test
//!   (`retransmits_timed_out`) converts `tcp_retries2` = 15 into a time; weir counts.
//! - **Minimum RTT**: a windowed minimum over [`RtoConfig::min_rtt_window`] (default 300 s,
//!   Linux `tcp_min_rtt_wlen`), kept by a three-entry filter ([`WindowedMin`], Kathleen
//!   Nichols' algorithm as in Linux `lib/win_minmax.c`): fixed size, O(1) per sample, and
//!   the minimum it reports is always a sample from the window. It moves only when a
//!   sample arrives, as Linux's `tcp_min_rtt` does. RACK's reordering window is
//!   `min_rtt / 4` (RFC 8985 §6.2).
//!
//! # Wiring
//!
//! For whoever puts this into the connection (`conn/send.rs`, `input.rs`, `output.rs`):
//!
//! - **Set-up.** [`RtoConfig::validate`] once, when [`crate::tcp::Tcp`] is made (a bad
//!   configuration is a set-up error); each connection then gets
//!   [`RttEstimator::new`] with the [`ValidRtoConfig`], which cannot fail.
//! - **Sending** when no retransmission timer runs (RFC 6298 §5.1), the SYN included:
//!   arm it at [`RttEstimator::deadline`]`(now)`. Each segment in the retransmission queue
//!   keeps its send time and a `retransmitted` flag.
//! - **An ACK that advances SND.UNA**: [`RttEstimator::on_snd_una_advanced`] first (it
//!   resets the retry count). Then at most one sample for the ACK, preferring the send
//!   time as Linux's `tcp_ack_update_rtt` does (finer than the 1 ms TSval, and immune to a
//!   peer or middlebox that corrupts TSecr): [`RttEstimator::sample_from_ack`]`(now,
//!   sent_at, retransmitted)` with the send time of the oldest newly acknowledged segment
//!   and `retransmitted` set if any newly acknowledged segment was retransmitted (Linux
//!   `FLAG_RETRANS_DATA_ACKED`). If that is refused and timestamps are on,
//!   [`RttEstimator::sample_from_tsecr`]`(now, ts_now, tsecr, WEIR_TS_TICK, true)` with
//!   `ts_now = Conn::ts_now(now)`. Count each refusal by its [`SampleRefused`] reason.
//!   Then restart the timer at `deadline(now)`, or stop it when nothing is outstanding
//!   (§5.2, §5.3).
//! - **An ACK that does not advance SND.UNA**: no sample from TSecr (pass
//!   `advances_una = false`, or make no call). A send-time sample of a newly SACKed,
//!   never retransmitted segment is valid (Linux `sack_rtt_us`) but optional.
//! - **The timer expires**: [`RttEstimator::on_timeout`]; if
//!   [`RttEstimator::should_give_up`]`(max_retries)` (Linux `tcp_retries2` = 15, as
//!   [`LINUX_TCP_RETRIES2`]), reset the connection and tell the application; otherwise
//!   retransmit the earliest unacknowledged segment (§5.4), mark it retransmitted, and
//!   re-arm at `deadline(now)` (§5.6).
//! - **The handshake completes**: a sample from the SYN or SYN-ACK through
//!   `sample_from_ack(now, sent_at, retransmitted)` (Linux `tcp_synack_rtt_meas`), then
//!   [`RttEstimator::handshake_complete`]`(retransmitted)` (RFC 6298 §5.7).
//! - **Loss recovery and congestion control** read [`RttEstimator::srtt`] (RACK-TLP's PTO
//!   is 2 SRTT, RFC 8985 §7.2), [`RttEstimator::min_rtt`] (RACK's `reo_wnd`) and
//!   [`RttEstimator::rto`].

use crate::reason::reason_enum;
use crate::time::{Duration, Instant};

/// RFC 6298 §2.2's K: the RTO is SRTT plus K times RTTVAR.
pub const K: u64 = 4;
/// alpha = 1/2^ALPHA_SHIFT = 1/8 (RFC 6298 §2.3), SRTT's gain.
pub const ALPHA_SHIFT: u32 = 3;
/// beta = 1/2^BETA_SHIFT = 1/4 (RFC 6298 §2.3), RTTVAR's gain.
pub const BETA_SHIFT: u32 = 2;
/// The RTO after a handshake whose SYN was retransmitted and gave no sample (RFC 6298
/// §5.7; Linux `TCP_TIMEOUT_FALLBACK`).
pub const FALLBACK_RTO: Duration = Duration::from_secs(3);
/// One tick of weir's TSval clock: `Conn::ts_now` stamps milliseconds (plus a per-flow
/// offset, RFC 7323 §5.4), as Linux's `TCP_TS_HZ` = 1000.
pub const WEIR_TS_TICK: Duration = Duration::from_millis(1);
/// Linux's `tcp_retries2` default: retransmissions of one segment before giving up.
pub const LINUX_TCP_RETRIES2: u32 = 15;

/// The bounds and constants of the retransmission timer. Check with
/// [`RtoConfig::validate`], which an [`RttEstimator`] requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtoConfig {
    /// The least RTO (RFC 6298 §2.4). Default 200 ms, Linux `TCP_RTO_MIN`.
    pub min_rto: Duration,
    /// The greatest RTO, also the cap of the backoff (RFC 6298 §2.5, which asks for at
    /// least 60 s; not enforced, so tests can use less). Default 120 s, Linux
    /// `TCP_RTO_MAX`.
    pub max_rto: Duration,
    /// The RTO before any sample (RFC 6298 §2.1). Default 1 s, Linux `TCP_TIMEOUT_INIT`.
    pub initial_rto: Duration,
    /// The clock granularity G of RFC 6298 §2.2, the floor of the variance term. Default
    /// 1 µs: weir's timers are checked once per loop iteration (see the module docs).
    pub granularity: Duration,
    /// The longest sample taken; a longer one is refused as [`SampleRefused::TooOld`].
    /// Default 240 s, twice the maximum RTO: a segment that is not retransmitted is
    /// acknowledged within one RTO or retransmitted, and a TSecr echoes the latest
    /// transmission the peer accepted, so an older echo is stale or forged.
    pub max_sample: Duration,
    /// The window of the minimum RTT. Default 300 s, Linux `tcp_min_rtt_wlen`.
    pub min_rtt_window: Duration,
}

impl Default for RtoConfig {
    fn default() -> Self {
        RtoConfig {
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(120),
            initial_rto: Duration::from_secs(1),
            granularity: Duration::from_micros(1),
            max_sample: Duration::from_secs(240),
            min_rtt_window: Duration::from_secs(300),
        }
    }
}

/// Why an [`RtoConfig`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtoConfigError {
    /// `min_rto` is zero.
    ZeroMinRto,
    /// `initial_rto` is below `min_rto`.
    InitialBelowMin,
    /// `initial_rto` is above `max_rto`.
    InitialAboveMax,
    /// `granularity` is zero.
    ZeroGranularity,
    /// `max_sample` is zero.
    ZeroMaxSample,
    /// `min_rtt_window` is zero.
    ZeroMinRttWindow,
}

impl core::fmt::Display for RtoConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            RtoConfigError::ZeroMinRto => "min_rto is zero: set it (Linux uses 200 ms)",
            RtoConfigError::InitialBelowMin => {
                "initial_rto is below min_rto: need min_rto <= initial_rto <= max_rto"
            }
            RtoConfigError::InitialAboveMax => {
                "initial_rto is above max_rto: need min_rto <= initial_rto <= max_rto"
            }
            RtoConfigError::ZeroGranularity => {
                "granularity is zero: set the timer's granularity (default 1 us)"
            }
            RtoConfigError::ZeroMaxSample => {
                "max_sample is zero: every sample would be refused (default 240 s)"
            }
            RtoConfigError::ZeroMinRttWindow => {
                "min_rtt_window is zero: set the window of the minimum RTT (Linux uses 300 s)"
            }
        })
    }
}

impl std::error::Error for RtoConfigError {}

impl RtoConfig {
    /// Checks that every duration is nonzero and `min_rto <= initial_rto <= max_rto`.
    pub fn validate(self) -> Result<ValidRtoConfig, RtoConfigError> {
        let z = Duration::ZERO;
        if self.min_rto == z {
            return Err(RtoConfigError::ZeroMinRto);
        }
        if self.initial_rto < self.min_rto {
            return Err(RtoConfigError::InitialBelowMin);
        }
        if self.initial_rto > self.max_rto {
            return Err(RtoConfigError::InitialAboveMax);
        }
        if self.granularity == z {
            return Err(RtoConfigError::ZeroGranularity);
        }
        if self.max_sample == z {
            return Err(RtoConfigError::ZeroMaxSample);
        }
        if self.min_rtt_window == z {
            return Err(RtoConfigError::ZeroMinRttWindow);
        }
        Ok(ValidRtoConfig(self))
    }
}

/// An [`RtoConfig`] that passed [`RtoConfig::validate`]: what an [`RttEstimator`] is
/// made from, so making one per connection cannot fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidRtoConfig(RtoConfig);

impl ValidRtoConfig {
    /// The configuration.
    pub fn get(&self) -> &RtoConfig {
        &self.0
    }
}

impl Default for ValidRtoConfig {
    /// The default [`RtoConfig`], which is valid (a test checks it).
    fn default() -> Self {
        ValidRtoConfig(RtoConfig::default())
    }
}

reason_enum! {
    /// Why an RTT sample was refused; the caller counts them.
    pub enum SampleRefused {
        /// Karn's rule (RFC 6298 §3): the ACK covers a retransmitted segment, so its send
        /// time is ambiguous.
        Retransmitted = "retransmitted",
        /// The segment's send time is after `now`.
        SentInFuture = "sent_in_future",
        /// The RTTM rule (RFC 7323 §4.2): a TSecr sample only from an ACK that advances
        /// SND.UNA.
        NoNewData = "no_new_data",
        /// TSecr is zero: no echo (Linux `tcp_ack_update_rtt` checks `rcv_tsecr`).
        TsecrZero = "tsecr_zero",
        /// TSecr is after our clock in the 2^31 window (RFC 7323 §5.3's comparison): we
        /// never sent that TSval.
        TsecrInFuture = "tsecr_in_future",
        /// The sample is longer than [`RtoConfig::max_sample`].
        TooOld = "too_old",
    }
}

/// The RTT from a TSecr (RFC 7323 §4): `(now_ts - tsecr)` ticks of `tick` each, `now_ts`
/// being our TSval clock now ([`WEIR_TS_TICK`] for weir's). Refuses a zero TSecr, one
/// after `now_ts` (a difference of 2^31 ticks or more is taken as the future, RFC 7323
/// §5.3), and one older than `max`. A difference of zero ticks counts as one tick, as
/// Linux's `tcp_ack_update_rtt` does: the RTT is under a tick, and rounding up keeps the
/// RTO on the safe side. A zero `tick` is a caller's mistake and gives zero samples.
pub fn ts_rtt(
    now_ts: u32,
    tsecr: u32,
    tick: Duration,
    max: Duration,
) -> Result<Duration, SampleRefused> {
    if tsecr == 0 {
        return Err(SampleRefused::TsecrZero);
    }
    let ticks = now_ts.wrapping_sub(tsecr);
    if ticks >= 1 << 31 {
        return Err(SampleRefused::TsecrInFuture);
    }
    let rtt = Duration::from_nanos(tick.as_nanos().saturating_mul(u64::from(ticks.max(1))));
    if rtt > max {
        return Err(SampleRefused::TooOld);
    }
    Ok(rtt)
}

/// One entry of a [`WindowedMin`]: a value and when it was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    at: Instant,
    v: Duration,
}

/// A windowed minimum of durations in three entries (Kathleen Nichols' algorithm, as in
/// Linux `lib/win_minmax.c`): the best, second-best and third-best minimum, each no
/// larger than every sample seen since its own time. When the best is older than the
/// window the next takes its place; fresh choices are taken from the second quarter and
/// the second half of the window so that a replacement is at hand. Fixed size, O(1) per
/// sample; [`WindowedMin::get`] is always a sample from within the window of the last
/// update, no larger than the latest sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowedMin {
    window: Duration,
    e: Option<[Entry; 3]>,
}

impl WindowedMin {
    /// An empty filter over `window`.
    pub const fn new(window: Duration) -> Self {
        WindowedMin { window, e: None }
    }

    /// The window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The minimum over the window as of the last update; `None` before any sample.
    pub fn get(&self) -> Option<Duration> {
        self.e.map(|e| e[0].v)
    }

    /// Forgets every sample.
    pub fn reset(&mut self) {
        self.e = None;
    }

    /// Takes sample `v` seen at `now` and returns the new minimum. An earlier `now` than
    /// before (a clock that went back) counts as no time passed.
    pub fn update(&mut self, now: Instant, v: Duration) -> Duration {
        let new = Entry { at: now, v };
        let win = self.window;
        let Some(e) = self.e.as_mut() else {
            self.e = Some([new; 3]);
            return v;
        };
        // A new best, or every entry has left the window: start over from this sample.
        if v <= e[0].v || now - e[2].at > win {
            *e = [new; 3];
            return v;
        }
        if v <= e[1].v {
            e[1] = new;
            e[2] = new;
        } else if v <= e[2].v {
            e[2] = new;
        }
        let age = now - e[0].at;
        if age > win {
            // The best has expired: promote the others. If the second has expired too,
            // promote again (the third cannot have: it was checked above).
            e[0] = e[1];
            e[1] = e[2];
            e[2] = new;
            if now - e[0].at > win {
                e[0] = e[1];
                e[1] = e[2];
                e[2] = new;
            }
        } else if e[1].at == e[0].at && age > Duration::from_nanos(win.as_nanos() / 4) {
            // A quarter of the window without a second choice: take one from here.
            e[1] = new;
            e[2] = new;
        } else if e[2].at == e[1].at && age > Duration::from_nanos(win.as_nanos() / 2) {
            // Half the window without a third choice: take one from here.
            e[2] = new;
        }
        e[0].v
    }
}

/// One connection's RTT estimator and retransmission timeout (RFC 6298). See the module
/// documentation for the rules and for which event calls which function.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    cfg: RtoConfig,
    /// SRTT and RTTVAR in nanoseconds, once a sample has been taken.
    smoothed: Option<(u64, u64)>,
    /// The RTO from SRTT and RTTVAR, clamped, before backoff.
    base: Duration,
    /// RTO expiries since the last valid sample: the RTO is `base << backoff`, capped.
    backoff: u32,
    /// RTO expiries since SND.UNA last advanced.
    retries: u32,
    min_rtt: WindowedMin,
}

impl RttEstimator {
    /// An estimator with no sample yet: the RTO is `initial_rto` (RFC 6298 §2.1).
    pub fn new(cfg: ValidRtoConfig) -> Self {
        let cfg = cfg.0;
        RttEstimator {
            smoothed: None,
            base: cfg.initial_rto,
            backoff: 0,
            retries: 0,
            min_rtt: WindowedMin::new(cfg.min_rtt_window),
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RtoConfig {
        &self.cfg
    }

    /// SRTT, once a sample has been taken.
    pub fn srtt(&self) -> Option<Duration> {
        self.smoothed.map(|(s, _)| Duration::from_nanos(s))
    }

    /// RTTVAR, once a sample has been taken.
    pub fn rttvar(&self) -> Option<Duration> {
        self.smoothed.map(|(_, v)| Duration::from_nanos(v))
    }

    /// The RTO to arm now: the base RTO doubled once per expiry since the last valid
    /// sample (RFC 6298 §5.5), at most `max_rto` (§2.5). Always within
    /// `[min_rto, max_rto]`.
    pub fn rto(&self) -> Duration {
        let max = self.cfg.max_rto.as_nanos();
        let ns = if self.backoff >= 64 {
            max
        } else {
            self.base
                .as_nanos()
                .saturating_mul(1 << self.backoff)
                .min(max)
        };
        Duration::from_nanos(ns)
    }

    /// The RTO without backoff: from SRTT and RTTVAR (§2.2, §2.3), or the initial or
    /// fallback RTO before a sample, clamped to `[min_rto, max_rto]` (§2.4, §2.5).
    pub fn base_rto(&self) -> Duration {
        self.base
    }

    /// When a timer armed now expires: `now + rto()`.
    pub fn deadline(&self, now: Instant) -> Instant {
        now + self.rto()
    }

    /// Expiries since the last valid sample (the backoff exponent).
    pub fn backoff(&self) -> u32 {
        self.backoff
    }

    /// Consecutive expiries: since SND.UNA last advanced (or the handshake completed).
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Whether the connection should be given up: the timer has expired more than
    /// `max_retries` times in a row, so `max_retries` retransmissions went unanswered and
    /// the timer of the last one expired too. Linux's default is
    /// [`LINUX_TCP_RETRIES2`].
    pub fn should_give_up(&self, max_retries: u32) -> bool {
        self.retries > max_retries
    }

    /// The minimum RTT over [`RtoConfig::min_rtt_window`] as of the last sample; `None`
    /// before any.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.get()
    }

    /// A sample from the send time of a segment this ACK newly acknowledges: `now -
    /// sent_at`. Karn's rule (RFC 6298 §3): refused if `retransmitted`, i.e. if the ACK
    /// covers any retransmitted segment, whose ACK may be for either transmission. Also
    /// refused if `sent_at` is after `now` or the sample is longer than `max_sample`.
    /// Returns the sample taken.
    pub fn sample_from_ack(
        &mut self,
        now: Instant,
        sent_at: Instant,
        retransmitted: bool,
    ) -> Result<Duration, SampleRefused> {
        if retransmitted {
            return Err(SampleRefused::Retransmitted);
        }
        if sent_at > now {
            return Err(SampleRefused::SentInFuture);
        }
        let rtt = now - sent_at;
        if rtt > self.cfg.max_sample {
            return Err(SampleRefused::TooOld);
        }
        Ok(self.take(now, rtt))
    }

    /// A sample from the TSecr of an ACK (RFC 7323 §4): valid whether or not the segment
    /// was retransmitted, since TSecr says which transmission is acknowledged. Only from
    /// an ACK that advances SND.UNA (`advances_una`, the RTTM rule of RFC 7323 §4.2);
    /// `now_ts` is our TSval clock at `now` and `tick` its period ([`WEIR_TS_TICK`]); the
    /// RTT is [`ts_rtt`] with `max_sample` as its bound. Returns the sample taken.
    pub fn sample_from_tsecr(
        &mut self,
        now: Instant,
        now_ts: u32,
        tsecr: u32,
        tick: Duration,
        advances_una: bool,
    ) -> Result<Duration, SampleRefused> {
        if !advances_una {
            return Err(SampleRefused::NoNewData);
        }
        let rtt = ts_rtt(now_ts, tsecr, tick, self.cfg.max_sample)?;
        Ok(self.take(now, rtt))
    }

    /// The retransmission timer expired: back off (RFC 6298 §5.5, RTO doubles up to
    /// `max_rto`) and count a retry. Returns the new RTO, to re-arm with (§5.6).
    pub fn on_timeout(&mut self) -> Duration {
        self.backoff = self.backoff.saturating_add(1);
        self.retries = self.retries.saturating_add(1);
        self.rto()
    }

    /// SND.UNA advanced: the retries so far were answered, so the count restarts (Linux
    /// `tcp_ack`: `icsk_retransmits = 0`). The backoff stays until a valid sample (RFC
    /// 6298 §5; the ACK of a retransmission gives none without timestamps).
    pub fn on_snd_una_advanced(&mut self) {
        self.retries = 0;
    }

    /// The three-way handshake completed. If our SYN (or SYN-ACK) was retransmitted and
    /// no sample was taken, the RTO becomes 3 s (RFC 6298 §5.7 MUST, Linux
    /// `TCP_TIMEOUT_FALLBACK`), clamped to `[min_rto, max_rto]`. Either way the
    /// handshake's backoff and retries end there: data starts with a fresh RTO.
    pub fn handshake_complete(&mut self, syn_retransmitted: bool) {
        if syn_retransmitted && self.smoothed.is_none() && self.base < FALLBACK_RTO {
            self.base = self.clamp(FALLBACK_RTO.as_nanos());
        }
        self.backoff = 0;
        self.retries = 0;
    }

    fn clamp(&self, ns: u64) -> Duration {
        // §2.4 (round up to the minimum), §2.5 (the maximum); `validate` made min <= max.
        Duration::from_nanos(ns.clamp(self.cfg.min_rto.as_nanos(), self.cfg.max_rto.as_nanos()))
    }

    /// Takes a valid sample `r` (RFC 6298 §2.2 or §2.3), recomputes the RTO and ends the
    /// backoff.
    fn take(&mut self, now: Instant, r: Duration) -> Duration {
        let rn = r.as_nanos();
        let (srtt, rttvar) = match self.smoothed {
            // §2.2: the first sample.
            None => (rn, rn / 2),
            // §2.3: RTTVAR first, from the SRTT before its own update.
            Some((srtt, rttvar)) => (
                ewma(srtt, rn, ALPHA_SHIFT),
                ewma(rttvar, srtt.abs_diff(rn), BETA_SHIFT),
            ),
        };
        self.smoothed = Some((srtt, rttvar));
        // §2.2 / §2.3: RTO = SRTT + max(G, K*RTTVAR).
        let var = rttvar
            .saturating_mul(K)
            .max(self.cfg.granularity.as_nanos());
        self.base = self.clamp(srtt.saturating_add(var));
        // End of §5: a new sample collapses the backed-off RTO (Linux
        // `tcp_ack_update_rtt`: "only reset backoff on valid RTT measurement").
        self.backoff = 0;
        self.min_rtt.update(now, r);
        r
    }
}

/// `(1 - 1/2^s) old + (1/2^s) new`, exact, rounded down to the nanosecond. The result
/// lies between `old` and `new`, so it fits a `u64`.
fn ewma(old: u64, new: u64, s: u32) -> u64 {
    let x = ((u128::from(old) * ((1u128 << s) - 1)) + u128::from(new)) >> s;
    u64::try_from(x).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
    fn at_ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }
    fn est() -> RttEstimator {
        RttEstimator::new(ValidRtoConfig::default())
    }
    fn est_with(f: impl FnOnce(&mut RtoConfig)) -> RttEstimator {
        let mut c = RtoConfig::default();
        f(&mut c);
        RttEstimator::new(c.validate().expect("valid test config"))
    }
    /// A clean sample of `rtt` taken at `now`.
    fn sample(e: &mut RttEstimator, now: Instant, rtt: Duration) {
        let sent = Instant::from_nanos(now.as_nanos() - rtt.as_nanos());
        assert_eq!(e.sample_from_ack(now, sent, false), Ok(rtt));
    }

    #[test]
    fn rfc6298_2_1_initial_rto_is_one_second_before_any_sample() {
        let e = est();
        assert_eq!((e.rto(), e.srtt(), e.rttvar()), (ms(1000), None, None));
        assert_eq!(e.min_rtt(), None);
        assert_eq!(e.deadline(at_ms(5)), at_ms(1005));
    }

    #[test]
    fn rfc6298_2_2_first_sample_sets_srtt_and_rttvar() {
        let mut e = est();
        sample(&mut e, at_ms(1000), ms(100));
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), Some(ms(50)));
        // RTO = SRTT + max(G, K*RTTVAR) = 100 + 200 ms.
        assert_eq!(e.rto(), ms(300));
        // R/2 rounds down to the nanosecond.
        let mut e = est();
        sample(&mut e, at_ms(1000), Duration::from_nanos(300_000_001));
        assert_eq!(e.rttvar(), Some(Duration::from_nanos(150_000_000)));
        assert_eq!(e.rto(), Duration::from_nanos(900_000_001));
    }

    /// A worked example: samples of 100, 120 and 80 ms.
    #[test]
    fn rfc6298_2_3_subsequent_samples_follow_the_worked_example() {
        let mut e = est();
        sample(&mut e, at_ms(1000), ms(100));
        // RTTVAR = 3/4 * 50 + 1/4 * |100 - 120| = 42.5; SRTT = 7/8 * 100 + 1/8 * 120 = 102.5;
        // RTO = 102.5 + 4 * 42.5 = 272.5 ms.
        sample(&mut e, at_ms(2000), ms(120));
        assert_eq!(e.rttvar(), Some(Duration::from_micros(42_500)));
        assert_eq!(e.srtt(), Some(Duration::from_micros(102_500)));
        assert_eq!(e.rto(), Duration::from_micros(272_500));
        // RTTVAR uses the SRTT before its update: 3/4 * 42.5 + 1/4 * |102.5 - 80| = 37.5;
        // SRTT = 7/8 * 102.5 + 1/8 * 80 = 99.6875; RTO = 99.6875 + 150 = 249.6875 ms.
        sample(&mut e, at_ms(3000), ms(80));
        assert_eq!(e.rttvar(), Some(Duration::from_micros(37_500)));
        assert_eq!(e.srtt(), Some(Duration::from_nanos(99_687_500)));
        assert_eq!(e.rto(), Duration::from_nanos(249_687_500));
        // Rounding is down: 7/8 * 1 ns + 1/8 * 0 = 0.875 ns becomes 0.
        assert_eq!(ewma(1, 0, ALPHA_SHIFT), 0);
        assert_eq!(ewma(u64::MAX, u64::MAX, ALPHA_SHIFT), u64::MAX);
    }

    #[test]
    fn rfc6298_2_2_granularity_floors_the_variance_term() {
        let mut e = est_with(|c| {
            c.min_rto = Duration::from_nanos(1);
            c.granularity = ms(1);
        });
        // Identical samples decay RTTVAR to zero; then RTO = SRTT + G.
        for i in 1..200 {
            sample(&mut e, at_ms(i * 100), ms(10));
        }
        assert_eq!(e.rttvar(), Some(Duration::ZERO));
        assert_eq!(e.rto(), ms(11));
    }

    #[test]
    fn rfc6298_2_4_rto_below_min_is_rounded_up() {
        let mut e = est();
        // 1 ms + 4 * 0.5 ms = 3 ms, below 200 ms.
        sample(&mut e, at_ms(1000), ms(1));
        assert_eq!((e.rto(), e.base_rto()), (ms(200), ms(200)));
        assert_eq!(e.srtt(), Some(ms(1)));
        // A zero sample (sent and acknowledged in one loop iteration) is valid: RTO = G,
        // rounded up.
        let mut e = est();
        sample(&mut e, at_ms(1000), Duration::ZERO);
        assert_eq!(e.rto(), ms(200));
    }

    #[test]
    fn rfc6298_2_5_rto_above_max_is_capped() {
        let mut e = est();
        // 100 s + 4 * 50 s = 300 s, above 120 s.
        sample(&mut e, at_ms(1_000_000), Duration::from_secs(100));
        assert_eq!(e.rto(), Duration::from_secs(120));
    }

    #[test]
    fn rfc6298_5_5_backoff_doubles_up_to_max() {
        let mut e = est();
        let mut expect = 1;
        for n in 1..=10 {
            expect = (expect * 2).min(120);
            assert_eq!(e.on_timeout(), Duration::from_secs(expect));
            assert_eq!((e.backoff(), e.retries()), (n, n));
        }
        // Capped at 120 s from the 7th expiry (1 s << 7 = 128 s), and stays there however
        // far the count goes.
        assert_eq!(e.rto(), Duration::from_secs(120));
        for _ in 0..100 {
            e.on_timeout();
        }
        assert_eq!(e.rto(), Duration::from_secs(120));
        assert_eq!(e.base_rto(), ms(1000));
    }

    #[test]
    fn rfc6298_5_backoff_kept_until_a_new_sample() {
        let mut e = est();
        sample(&mut e, at_ms(1000), ms(100));
        e.on_timeout();
        e.on_timeout();
        assert_eq!(e.rto(), ms(1200));
        // SND.UNA advances through the retransmission: the retry count restarts, the
        // backoff stays (no sample).
        e.on_snd_una_advanced();
        assert_eq!((e.retries(), e.backoff(), e.rto()), (0, 2, ms(1200)));
        // A new valid sample collapses it.
        sample(&mut e, at_ms(5000), ms(100));
        assert_eq!((e.backoff(), e.rto()), (0, e.base_rto()));
        assert!(e.rto() < ms(1200));
    }

    #[test]
    fn rfc6298_3_karn_retransmitted_segment_gives_no_sample() {
        let mut e = est();
        sample(&mut e, at_ms(1000), ms(100));
        let before = (e.srtt(), e.rttvar(), e.base_rto(), e.min_rtt());
        e.on_timeout();
        // The ACK of the retransmission: no sample, nothing moves, the backoff stays.
        assert_eq!(
            e.sample_from_ack(at_ms(2000), at_ms(1500), true),
            Err(SampleRefused::Retransmitted)
        );
        assert_eq!((e.srtt(), e.rttvar(), e.base_rto(), e.min_rtt()), before);
        assert_eq!(e.backoff(), 1);
        // Without a sample yet, the initial RTO stays too.
        let mut e = est();
        assert_eq!(
            e.sample_from_ack(at_ms(2000), at_ms(1990), true),
            Err(SampleRefused::Retransmitted)
        );
        assert_eq!((e.srtt(), e.rto()), (None, ms(1000)));
    }

    #[test]
    fn linux_tcp_retries2_gives_up_after_the_retries() {
        let mut e = est();
        for _ in 0..LINUX_TCP_RETRIES2 {
            e.on_timeout();
            assert!(!e.should_give_up(LINUX_TCP_RETRIES2));
        }
        // The timer of the 15th retransmission expires: give up.
        e.on_timeout();
        assert!(e.should_give_up(LINUX_TCP_RETRIES2));
        // Progress restarts the count (Linux `tcp_ack`).
        e.on_snd_una_advanced();
        assert!(!e.should_give_up(LINUX_TCP_RETRIES2));
        assert_eq!(e.retries(), 0);
    }

    #[test]
    fn rfc6298_5_7_retransmitted_syn_sets_rto_to_three_seconds() {
        let mut e = est();
        e.on_timeout(); // the SYN was retransmitted
        assert!(e.sample_from_ack(at_ms(3000), at_ms(1000), true).is_err());
        e.handshake_complete(true);
        assert_eq!((e.rto(), e.backoff(), e.retries()), (ms(3000), 0, 0));
        // With a sample (timestamps on), the estimate stands.
        let mut e = est();
        e.on_timeout();
        assert_eq!(
            e.sample_from_tsecr(at_ms(3000), 500, 450, WEIR_TS_TICK, true),
            Ok(ms(50))
        );
        e.handshake_complete(true);
        assert_eq!(e.rto(), ms(200));
        // No retransmission: no change.
        let mut e = est();
        e.handshake_complete(false);
        assert_eq!(e.rto(), ms(1000));
        // The 3 s is clamped to the configured maximum.
        let mut e = est_with(|c| c.max_rto = ms(2000));
        e.handshake_complete(true);
        assert_eq!(e.rto(), ms(2000));
    }

    #[test]
    fn rfc7323_4_timestamp_sample_from_tsecr() {
        let mut e = est();
        // TSval 1000 echoed at 1040: 40 ticks of 1 ms.
        assert_eq!(
            e.sample_from_tsecr(at_ms(5000), 1040, 1000, WEIR_TS_TICK, true),
            Ok(ms(40))
        );
        assert_eq!(
            (e.srtt(), e.rttvar(), e.rto()),
            (Some(ms(40)), Some(ms(20)), ms(200))
        );
        // Valid for a retransmitted segment: TSecr names the transmission; it ends the
        // backoff as any valid sample does.
        e.on_timeout();
        assert!(e
            .sample_from_tsecr(at_ms(6000), 2030, 2000, WEIR_TS_TICK, true)
            .is_ok());
        assert_eq!(e.backoff(), 0);
        // Under a tick counts as one tick (Linux `tcp_ack_update_rtt`).
        assert_eq!(ts_rtt(7, 7, WEIR_TS_TICK, ms(1000)), Ok(ms(1)));
        // Across the 2^32 wrap of the TSval clock.
        assert_eq!(ts_rtt(5, u32::MAX - 4, WEIR_TS_TICK, ms(1000)), Ok(ms(10)));
        // Microsecond ticks.
        let us = Duration::from_micros(1);
        assert_eq!(
            ts_rtt(1250, 1000, us, ms(1000)),
            Ok(Duration::from_micros(250))
        );
    }

    #[test]
    fn rfc7323_4_2_rttm_rule_no_sample_unless_snd_una_advances() {
        let mut e = est();
        assert_eq!(
            e.sample_from_tsecr(at_ms(5000), 1040, 1000, WEIR_TS_TICK, false),
            Err(SampleRefused::NoNewData)
        );
        assert_eq!(e.srtt(), None);
    }

    #[test]
    fn bogus_samples_are_refused() {
        let mut e = est();
        let max = e.config().max_sample;
        let t = WEIR_TS_TICK;
        // A zero TSecr is no echo (Linux `tcp_ack_update_rtt`).
        assert_eq!(
            e.sample_from_tsecr(at_ms(5000), 1040, 0, t, true),
            Err(SampleRefused::TsecrZero)
        );
        // A TSecr after our clock: we never sent it (RFC 7323 §5.3's 2^31 window).
        assert_eq!(
            ts_rtt(1000, 1001, t, max),
            Err(SampleRefused::TsecrInFuture)
        );
        assert_eq!(
            ts_rtt(1000, 1000 + (1 << 31), t, max),
            Err(SampleRefused::TsecrInFuture)
        );
        // Older than `max_sample` (240 s = 240 000 ticks).
        assert_eq!(ts_rtt(240_001, 1, t, max), Ok(max));
        assert_eq!(ts_rtt(240_002, 1, t, max), Err(SampleRefused::TooOld));
        assert_eq!(ts_rtt(u32::MAX >> 1, 1, t, max), Err(SampleRefused::TooOld));
        // A send time after now, and one too long ago.
        assert_eq!(
            e.sample_from_ack(at_ms(1000), at_ms(1001), false),
            Err(SampleRefused::SentInFuture)
        );
        assert_eq!(
            e.sample_from_ack(at_ms(240_002), at_ms(1), false),
            Err(SampleRefused::TooOld)
        );
        // None of them moved anything.
        assert_eq!((e.srtt(), e.rto(), e.min_rtt()), (None, ms(1000), None));
    }

    #[test]
    fn rto_config_validation_refuses_zeros_and_bad_order() {
        assert_eq!(
            RtoConfig::default().validate(),
            Ok(ValidRtoConfig::default())
        );
        let bad = |f: fn(&mut RtoConfig)| {
            let mut c = RtoConfig::default();
            f(&mut c);
            c.validate().err()
        };
        use RtoConfigError as E;
        assert_eq!(bad(|c| c.min_rto = Duration::ZERO), Some(E::ZeroMinRto));
        assert_eq!(bad(|c| c.initial_rto = ms(100)), Some(E::InitialBelowMin));
        assert_eq!(bad(|c| c.max_rto = ms(500)), Some(E::InitialAboveMax));
        assert_eq!(
            bad(|c| c.granularity = Duration::ZERO),
            Some(E::ZeroGranularity)
        );
        assert_eq!(
            bad(|c| c.max_sample = Duration::ZERO),
            Some(E::ZeroMaxSample)
        );
        assert_eq!(
            bad(|c| c.min_rtt_window = Duration::ZERO),
            Some(E::ZeroMinRttWindow)
        );
        // min = initial = max is allowed: a fixed RTO.
        let fixed = bad(|c| {
            c.min_rto = ms(300);
            c.initial_rto = ms(300);
            c.max_rto = ms(300);
        });
        assert_eq!(fixed, None);
        assert!(!E::ZeroMinRto.to_string().is_empty());
    }

    #[test]
    fn sample_refused_labels_are_pinned() {
        let names: Vec<_> = SampleRefused::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(
            names,
            [
                "retransmitted",
                "sent_in_future",
                "no_new_data",
                "tsecr_zero",
                "tsecr_in_future",
                "too_old"
            ]
        );
    }

    #[test]
    fn linux_win_minmax_min_rtt_tracks_the_window_minimum() {
        let mut e = est_with(|c| c.min_rtt_window = Duration::from_secs(10));
        sample(&mut e, at_ms(1_000), ms(50));
        sample(&mut e, at_ms(2_000), ms(30));
        sample(&mut e, at_ms(3_000), ms(40));
        assert_eq!(e.min_rtt(), Some(ms(30)));
        // A higher sample inside the window leaves the minimum.
        sample(&mut e, at_ms(9_000), ms(60));
        assert_eq!(e.min_rtt(), Some(ms(30)));
    }

    #[test]
    fn linux_win_minmax_min_rtt_window_expiry() {
        let mut f = WindowedMin::new(Duration::from_secs(10));
        assert_eq!(f.get(), None);
        f.update(at_ms(0), ms(10));
        // Later, higher samples: the second quarter and the second half of the window
        // give the second and third choices.
        f.update(at_ms(3_000), ms(20));
        f.update(at_ms(6_000), ms(30));
        assert_eq!(f.get(), Some(ms(10)));
        // 10 ms has left the window: the second choice (20 ms, from 3 s) takes over.
        assert_eq!(f.update(at_ms(10_001), ms(40)), ms(20));
        // Then 20 ms expires too, and 30 ms (from 6 s) is the minimum.
        assert_eq!(f.update(at_ms(13_001), ms(45)), ms(30));
        // After a whole window without samples, the next sample starts over.
        assert_eq!(f.update(at_ms(60_000), ms(90)), ms(90));
        f.reset();
        assert_eq!(f.get(), None);
        // A clock that goes back is no time passed, not a panic.
        f.update(at_ms(100), ms(5));
        assert_eq!(f.update(at_ms(50), ms(7)), ms(5));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Ack {
            rtt_ns: u64,
            retransmitted: bool,
        },
        Ts {
            ticks: u32,
            tsecr: u32,
            advances: bool,
        },
        Timeout,
        Advanced,
        Handshake(bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..=400_000_000_000, any::<bool>()).prop_map(|(rtt_ns, retransmitted)| Op::Ack {
                rtt_ns,
                retransmitted
            }),
            // Mostly plausible echoes (up to 300 s old), some from anywhere.
            (any::<u32>(), 0u32..300_000, any::<bool>()).prop_map(|(ticks, age, advances)| {
                Op::Ts {
                    ticks,
                    tsecr: ticks.wrapping_sub(age),
                    advances,
                }
            }),
            (any::<u32>(), any::<u32>(), any::<bool>()).prop_map(|(ticks, tsecr, advances)| {
                Op::Ts {
                    ticks,
                    tsecr,
                    advances,
                }
            }),
            Just(Op::Timeout),
            Just(Op::Advanced),
            any::<bool>().prop_map(Op::Handshake),
        ]
    }

    fn config() -> impl Strategy<Value = RtoConfig> {
        (
            1u64..=10_000_000_000,
            0u64..=10_000_000_000,
            0u64..=200_000_000_000,
            1u64..=100_000_000,
            1u64..=u64::MAX,
        )
            .prop_map(|(min, up, top, g, max_sample)| RtoConfig {
                min_rto: Duration::from_nanos(min),
                initial_rto: Duration::from_nanos(min + up),
                max_rto: Duration::from_nanos(min + up + top),
                granularity: Duration::from_nanos(g),
                max_sample: Duration::from_nanos(max_sample),
                min_rtt_window: Duration::from_secs(300),
            })
    }

    proptest! {
        /// RFC 6298 §2.4 and §2.5: whatever the samples, expiries and handshakes, the RTO
        /// stays within [min_rto, max_rto].
        #[test]
        fn rfc6298_rto_stays_within_min_and_max(
            cfg in config(),
            ops in proptest::collection::vec(op(), 0..200),
        ) {
            let mut e = RttEstimator::new(cfg.validate().expect("generated valid"));
            let mut now = 0u64;
            for o in ops {
                now += 1_000_000;
                let t = Instant::from_nanos(now);
                match o {
                    Op::Ack { rtt_ns, retransmitted } => {
                        let sent = Instant::from_nanos(now.saturating_sub(rtt_ns));
                        let _ = e.sample_from_ack(t, sent, retransmitted);
                    }
                    Op::Ts { ticks, tsecr, advances } => {
                        let _ = e.sample_from_tsecr(t, ticks, tsecr, WEIR_TS_TICK, advances);
                    }
                    Op::Timeout => {
                        let r = e.on_timeout();
                        prop_assert_eq!(r, e.rto());
                    }
                    Op::Advanced => e.on_snd_una_advanced(),
                    Op::Handshake(r) => e.handshake_complete(r),
                }
                prop_assert!(e.rto() >= cfg.min_rto && e.rto() <= cfg.max_rto);
                prop_assert!(e.base_rto() >= cfg.min_rto && e.base_rto() <= cfg.max_rto);
                prop_assert!(e.rto() >= e.base_rto());
                if let Some(s) = e.srtt() {
                    prop_assert!(s <= cfg.max_sample);
                }
            }
        }

        /// The windowed minimum is a sample from within the window, and no larger than
        /// the latest sample.
        #[test]
        fn win_minmax_reports_a_sample_from_the_window(
            samples in proptest::collection::vec((0u64..5_000, 1u64..1_000), 1..300),
        ) {
            let win = 10_000u64;
            let mut f = WindowedMin::new(Duration::from_nanos(win));
            let mut seen: Vec<(u64, u64)> = Vec::new();
            let mut now = 0u64;
            for (dt, v) in samples {
                now += dt;
                let got = f.update(Instant::from_nanos(now), Duration::from_nanos(v));
                seen.push((now, v));
                prop_assert_eq!(Some(got), f.get());
                let got = got.as_nanos();
                prop_assert!(got <= v);
                prop_assert!(seen.iter().any(|&(t, s)| s == got && now - t <= win));
            }
        }
    }
}
