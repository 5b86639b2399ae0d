//! Congestion control: how much a sender may have in flight (cwnd), behind a trait, as
//! Linux's `struct tcp_congestion_ops` (`net/ipv4/tcp_cong.c`) puts it behind a table of
//! function pointers.
//!
//! Read first: RFC 5681 §3.1-3.2 (slow start, congestion avoidance, the loss and
//! restart windows) and §4.1 (restarting idle connections), RFC 3465 §2 (Appropriate Byte
//! Counting), RFC 6928 §2 (the initial window), RFC 9438 §4 (CUBIC), then Linux's
//! `tcp_slow_start` and `tcp_cong_avoid_ai` (`net/ipv4/tcp_cong.c`), `tcp_is_cwnd_limited`
//! (`include/net/tcp.h`) and `net/ipv4/tcp_cubic.c`.
//!
//! # What is here
//!
//! - [`CongestionControl`]: the events a sender has (an ACK of new data, a congestion
//!   event, the end of recovery, a retransmission timeout, a restart after idle) and what
//!   it reads back (cwnd and ssthresh in bytes). Implement it for an algorithm of your own.
//! - [`Cc`]: the built-in algorithms behind one enum, so that the connection calls them
//!   with a `match` and no `dyn` on the per-ACK path; built from a [`CcConfig`] by
//!   [`Cc::new`]. [`Reno`] (`reno.rs`, RFC 5681) and [`Cubic`] (`cubic.rs`, RFC 9438).
//! - [`AckCounting`]: what an ACK is worth in slow start and congestion avoidance (per
//!   ACK, ABC with L = 1 or 2, or every byte as Linux) — the variable of field report 000.
//! - [`initial_window`] (RFC 6928), [`restart_window`] (RFC 5681 §4.1),
//!   [`is_cwnd_limited`] (Linux's rule for "did the application use the window").
//!
//! # Units and bounds
//!
//! Windows are bytes (`u32`, as TCP's windows are); SMSS is fixed when the algorithm is
//! built. Every algorithm keeps, whatever events come in:
//!
//! - `SMSS <= cwnd <= max_cwnd`: one SMSS is the loss window after a timeout (RFC 5681
//!   §3.1), and never less; after a congestion event cwnd is at least 2 SMSS (RFC 5681
//!   eq. 4, RFC 9438 §4.6). `max_cwnd` (default 65535 << 14, the largest window a peer
//!   can offer, RFC 7323 §2.3) is at least 2 SMSS, or [`Cc::new`] refuses the
//!   configuration.
//! - ssthresh starts "arbitrarily high" (`u32::MAX`, RFC 5681 §3.1) and is never below
//!   2 SMSS once set.
//! - Arithmetic is integer (u64/u128, saturating), so results are the same on every
//!   machine; no division has a divisor that can be zero.
//!
//! An ACK never shrinks cwnd, and [`CongestionControl::on_ack`] says what it did with the
//! ACK ([`Growth`]), so the caller can count why cwnd did or did not grow.
//!
//! # Wiring
//!
//! How the connection (`tcp/conn/send.rs`, `tcp/input.rs`, `tcp/output.rs`) calls it:
//!
//! - Handshake done, peer MSS known: `Cc::new(&cfg.cc, smss)` (SMSS = the MSS less the
//!   options in use); `cwnd()` is then the initial window.
//! - Before sending: bytes in flight (SND.NXT - SND.UNA less what SACK/RACK mark as
//!   left the network, RFC 6675 `pipe`) may be at most `cwnd()` (and the peer's window).
//! - Before sending new data with nothing in flight: `on_idle_restart(now, last_send,
//!   rto)`, with the time the last data segment left (Linux's `lsndtime`); it resets cwnd
//!   to the restart window when the connection was idle longer than an RTO (RFC 5681
//!   §4.1), and CUBIC takes the idle time out of its clock (RFC 9438 §5.8).
//! - An ACK that advances SND.UNA (`check_ack` in `input.rs`): `on_ack(&AckSample { now,
//!   bytes_acked, srtt, cwnd_limited })`, after the RTT estimator has taken its sample.
//!   `bytes_acked` is SND.UNA's advance (RFC 3465); `cwnd_limited` comes from
//!   [`is_cwnd_limited`] with what the sender tracks when it sends. A duplicate ACK is not
//!   an `on_ack` (or is one with `bytes_acked == 0`, which does nothing).
//! - Loss detected by the third duplicate ACK, SACK (RFC 6675 §5) or RACK (RFC 8985):
//!   `on_congestion_event(now, flight_size)` once, on entering recovery; cwnd and
//!   ssthresh are then the post-recovery values. NewReno's window inflation
//!   (RFC 5681 §3.2 steps 3-4 as RFC 6582 §3.2 uses them: +3 SMSS, then +1 SMSS per
//!   further duplicate ACK) and PRR's sending allowance (RFC 6937) belong to the
//!   recovery code, which decides what may be sent during recovery; cwnd holds the
//!   value recovery ends at, and `on_ack` changes nothing until then.
//! - Recovery ends (the ACK covers the recovery point, RFC 6582 §3.2 step 3, RFC 6675
//!   §5): `on_recovery_exit(now)`.
//! - The retransmission timer fires (RFC 6298 §5.4): `on_rto(now, flight_size)` before
//!   retransmitting; a backed-off timer firing again for the same segment keeps ssthresh.
//!
//! # Left out
//!
//! HyStart / HyStart++ (RFC 9406; RFC 9438 §4.10 allows Reno's slow start), undo after a
//! spurious congestion event (RFC 9438 §4.9, RFC 4015), ECN's reduction (RFC 3168), and
//! changing SMSS after the handshake (PMTU): build a new algorithm for that.

mod cubic;
mod reno;

pub use cubic::Cubic;
pub use reno::Reno;

use core::fmt;
use core::str::FromStr;

use crate::reason::reason_enum;
use crate::time::{Duration, Instant};

/// The largest window a peer can offer: 65535 shifted by the largest window scale, 14
/// (RFC 7323 §2.3). The default [`CcConfig::max_cwnd`]: a larger cwnd could never be used.
pub const MAX_WINDOW: u32 = 65535 << 14;

/// What an ACK of new data is worth to slow start and congestion avoidance (RFC 3465).
///
/// Parsed from `per-ack`, `abc:1`, `abc:2` and `bytes` (weir-gen's `--ack-counting`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AckCounting {
    /// The pre-ABC rule (RFC 2581 §3.1): slow start adds 1 SMSS per ACK, whatever it
    /// covers; congestion avoidance adds SMSS*SMSS/cwnd per ACK (RFC 5681 eq. 3). A
    /// stretch ACK for 45 segments opens the window as much as an ACK for one.
    PerAck,
    /// Appropriate Byte Counting (RFC 3465): slow start adds min(bytes acked, L*SMSS)
    /// per ACK (§2.2), congestion avoidance adds 1 SMSS each time the bytes acked reach
    /// cwnd (§2.1). `l` is 1 or 2 (§2.3: L MUST NOT exceed 2 SMSS); other values are
    /// taken as the nearer of the two. After a retransmission timeout L is 1 (§2.3).
    Abc {
        /// The limit L, in segments.
        l: u8,
    },
    /// Every byte acknowledged counts, however many an ACK covers, as Linux does today:
    /// `tcp_slow_start(tp, acked)` adds every segment acked up to ssthresh, with no L
    /// cap, and hands the rest to `tcp_cong_avoid_ai`, which adds one segment per cwnd
    /// of segments acked, several at once for a large stretch ACK (`net/ipv4/tcp_cong.c`).
    Bytes,
}

impl AckCounting {
    /// ABC's limit L in bytes for this ACK: `None` when there is no L.
    fn abc_limit(self, smss: u32, after_rto: bool) -> Option<u64> {
        match self {
            AckCounting::Abc { l } => {
                let l = if after_rto { 1 } else { l.clamp(1, 2) };
                Some(u64::from(l) * u64::from(smss))
            }
            _ => None,
        }
    }
}

impl Default for AckCounting {
    /// Linux's rule, [`AckCounting::Bytes`].
    fn default() -> Self {
        AckCounting::Bytes
    }
}

impl FromStr for AckCounting {
    type Err = ParseCcError;
    fn from_str(s: &str) -> Result<Self, ParseCcError> {
        match s {
            "per-ack" => Ok(AckCounting::PerAck),
            "abc:1" => Ok(AckCounting::Abc { l: 1 }),
            "abc:2" => Ok(AckCounting::Abc { l: 2 }),
            "bytes" => Ok(AckCounting::Bytes),
            _ => Err(ParseCcError {
                input: s.to_owned(),
                expected: "per-ack, abc:1, abc:2 or bytes (RFC 3465 §2.3: L is at most 2)",
            }),
        }
    }
}

impl fmt::Display for AckCounting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AckCounting::PerAck => f.write_str("per-ack"),
            AckCounting::Abc { l } => write!(f, "abc:{}", (*l).clamp(1, 2)),
            AckCounting::Bytes => f.write_str("bytes"),
        }
    }
}

/// A built-in algorithm, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CcAlgorithm {
    /// [`Reno`]: RFC 5681.
    Reno,
    /// [`Cubic`]: RFC 9438, Linux's default.
    #[default]
    Cubic,
}

impl CcAlgorithm {
    /// The name Linux gives it (`net.ipv4.tcp_congestion_control`).
    pub const fn name(self) -> &'static str {
        match self {
            CcAlgorithm::Reno => "reno",
            CcAlgorithm::Cubic => "cubic",
        }
    }
}

impl FromStr for CcAlgorithm {
    type Err = ParseCcError;
    fn from_str(s: &str) -> Result<Self, ParseCcError> {
        match s {
            "reno" => Ok(CcAlgorithm::Reno),
            "cubic" => Ok(CcAlgorithm::Cubic),
            _ => Err(ParseCcError {
                input: s.to_owned(),
                expected: "reno or cubic",
            }),
        }
    }
}

impl fmt::Display for CcAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A string that names no [`AckCounting`] or [`CcAlgorithm`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseCcError {
    input: String,
    expected: &'static str,
}

impl fmt::Display for ParseCcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: expected {}", self.input, self.expected)
    }
}

impl std::error::Error for ParseCcError {}

/// How a connection's congestion control is built (one per stack, in the TCP config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcConfig {
    /// Which algorithm.
    pub algorithm: CcAlgorithm,
    /// What an ACK is worth.
    pub counting: AckCounting,
    /// The largest cwnd, in bytes; at least 2 SMSS. Default [`MAX_WINDOW`].
    pub max_cwnd: u32,
    /// The initial window in segments; `None`: RFC 6928's [`initial_window`]. Linux
    /// uses 10 segments whatever the MSS (`TCP_INIT_CWND`, or the route's `initcwnd`).
    pub initial_segments: Option<u32>,
    /// CUBIC's fast convergence (RFC 9438 §4.7: SHOULD be on, SHOULD be off for a flow
    /// that is alone on its path). Default on, as Linux's `fast_convergence` parameter.
    pub fast_convergence: bool,
}

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig {
            algorithm: CcAlgorithm::default(),
            counting: AckCounting::default(),
            max_cwnd: MAX_WINDOW,
            initial_segments: None,
            fast_convergence: true,
        }
    }
}

/// Why [`Cc::new`] (or [`Reno::new`], [`Cubic::new`]) refused a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcError {
    /// SMSS is zero: no window can be counted in segments of it.
    ZeroSmss,
    /// `max_cwnd` is below 2 SMSS, the least cwnd after a congestion event (RFC 5681
    /// eq. 4): the two bounds cannot both hold.
    MaxBelowTwoSegments,
    /// `initial_segments` is `Some(0)`: a sender that may send nothing never starts.
    ZeroInitialWindow,
}

impl fmt::Display for CcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CcError::ZeroSmss => "SMSS is 0: pass the MSS negotiated in the handshake",
            CcError::MaxBelowTwoSegments => {
                "max_cwnd is below 2 SMSS (RFC 5681 eq. 4): raise max_cwnd"
            }
            CcError::ZeroInitialWindow => {
                "initial_segments is 0: use None for RFC 6928's window, or at least 1"
            }
        })
    }
}

impl std::error::Error for CcError {}

/// RFC 6928 §2's initial window in bytes: min(10*MSS, max(2*MSS, 14600)). 5360 for MSS
/// 536, 14600 for 1460, 17920 for 8960 (Linux would use 10 segments, 89600).
pub const fn initial_window(mss: u32) -> u32 {
    let ten = (mss as u64) * 10;
    let two = (mss as u64) * 2;
    let floor = if two > 14600 { two } else { 14600 };
    let iw = if ten < floor { ten } else { floor };
    if iw > u32::MAX as u64 {
        u32::MAX
    } else {
        iw as u32
    }
}

/// RFC 5681 §4.1's restart window: RW = min(IW, cwnd), what cwnd is reduced to before
/// sending after an idle period longer than the RTO.
///
/// Linux (`tcp_cwnd_restart`, `net/ipv4/tcp_output.c`, called through
/// `tcp_slow_start_after_idle_check` while `net.ipv4.tcp_slow_start_after_idle` is on)
/// follows RFC 2861 instead: it halves cwnd once per RTO of idle time, down to no less
/// than RW, and raises ssthresh to at least 3/4 cwnd (`tcp_current_ssthresh`). RFC 7661
/// (new-CWV) would keep cwnd for a non-validated period instead. weir does RFC 5681's
/// rule: [`CongestionControl::on_idle_restart`].
pub const fn restart_window(iw: u32, cwnd: u32) -> u32 {
    if iw < cwnd {
        iw
    } else {
        cwnd
    }
}

/// Whether the sender was limited by cwnd, as Linux's `tcp_is_cwnd_limited`
/// (`include/net/tcp.h`) decides it: `was_limited` is the sender's own record that,
/// during the window this ACK belongs to, it had data it could not send for cwnd
/// (Linux's `is_cwnd_limited`, kept by `tcp_cwnd_validate`); in slow start the window may
/// also grow while cwnd is below twice the most that was in flight in that window
/// (`max_flight`, Linux's `max_packets_out`), so that slow start can double the flight
/// an application-limited sender really used.
pub const fn is_cwnd_limited(cwnd: u32, ssthresh: u32, max_flight: u32, was_limited: bool) -> bool {
    if was_limited {
        return true;
    }
    cwnd < ssthresh && (cwnd as u64) < 2 * (max_flight as u64)
}

/// One ACK of new data, as the congestion controller sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckSample {
    /// When it arrived.
    pub now: Instant,
    /// Bytes it newly acknowledged (SND.UNA's advance; RFC 3465's "bytes acked").
    /// More than an SMSS is a stretch ACK. 0 (a duplicate ACK) does nothing.
    pub bytes_acked: u32,
    /// The smoothed RTT (RFC 6298 SRTT), zero before the first sample. CUBIC aims one
    /// RTT ahead (RFC 9438 §4.2); Reno ignores it.
    pub srtt: Duration,
    /// Whether cwnd limited the sender ([`is_cwnd_limited`]). No growth without it.
    pub cwnd_limited: bool,
}

reason_enum! {
    /// What [`CongestionControl::on_ack`] did with an ACK: the region it grew in, or why
    /// it did not grow.
    pub enum Growth {
        /// Slow start (cwnd < ssthresh, RFC 5681 §3.1).
        SlowStart = "slow_start",
        /// Reno's congestion avoidance (RFC 5681 §3.1, RFC 3465 §2.1).
        CongestionAvoidance = "congestion_avoidance",
        /// CUBIC's Reno-friendly region: cwnd follows W_est (RFC 9438 §4.3).
        RenoFriendly = "reno_friendly",
        /// CUBIC's concave region, cwnd below W_max (RFC 9438 §4.4).
        Concave = "concave",
        /// CUBIC's convex region, cwnd at or above W_max (RFC 9438 §4.5).
        Convex = "convex",
        /// Not cwnd-limited: the application did not use the window, so it does not
        /// grow (Linux's `tcp_is_cwnd_limited`, RFC 9438 §5.8).
        NotCwndLimited = "not_cwnd_limited",
        /// In loss recovery: cwnd stays at the reduced value until recovery ends.
        InRecovery = "in_recovery",
        /// cwnd is at `max_cwnd`.
        AtMax = "at_max",
        /// The ACK acknowledged nothing new.
        NothingAcked = "nothing_acked",
    }
}

/// A congestion control algorithm: the events of a sender, as Linux's
/// `tcp_congestion_ops` (`cong_avoid`, `ssthresh`, `set_state`, `cwnd_event`).
///
/// Every method takes any input without panicking, and keeps `SMSS <= cwnd <= max`.
pub trait CongestionControl {
    /// The algorithm's name, as Linux names it (`reno`, `cubic`).
    fn name(&self) -> &'static str;
    /// The congestion window, in bytes.
    fn cwnd(&self) -> u32;
    /// The slow start threshold, in bytes.
    fn ssthresh(&self) -> u32;
    /// Whether the algorithm is between a congestion event and the end of its recovery.
    fn in_recovery(&self) -> bool;
    /// Whether the next ACK is counted by slow start (cwnd < ssthresh, RFC 5681 §3.1).
    fn in_slow_start(&self) -> bool {
        self.cwnd() < self.ssthresh()
    }
    /// An ACK of new data: grows cwnd by slow start or congestion avoidance, and says how.
    fn on_ack(&mut self, ack: &AckSample) -> Growth;
    /// Loss detected by duplicate ACKs, SACK or RACK, on entering recovery: sets ssthresh
    /// and cwnd (RFC 5681 §3.2, RFC 6675 §5, RFC 9438 §4.6). `flight_size` is the data
    /// outstanding (RFC 5681 FlightSize). Returns `false`, and changes nothing, when
    /// already in recovery: one reduction per loss event (RFC 6582 §3.2 step 1).
    fn on_congestion_event(&mut self, now: Instant, flight_size: u32) -> bool;
    /// Recovery ended (the recovery point is acknowledged): cwnd = ssthresh, the
    /// window deflated (RFC 6582 §3.2 step 3, Linux `tcp_end_cwnd_reduction`). Returns
    /// `false` when not in recovery.
    fn on_recovery_exit(&mut self, now: Instant) -> bool;
    /// The retransmission timer fired (RFC 5681 §3.1): ssthresh from `flight_size`, cwnd
    /// = 1 SMSS (the loss window). Returns `false` when the timer fired again with no
    /// new data acknowledged since the last timeout: cwnd is the loss window again but
    /// ssthresh is kept ("has not yet been resent by way of the retransmission timer").
    fn on_rto(&mut self, now: Instant, flight_size: u32) -> bool;
    /// About to send new data with nothing in flight; `last_send` is when data last left.
    /// When the connection was idle longer than `rto`, cwnd becomes the restart window
    /// (RFC 5681 §4.1, [`restart_window`]) and `true` is returned.
    fn on_idle_restart(&mut self, now: Instant, last_send: Instant, rto: Duration) -> bool;
}

/// The built-in algorithms behind one type: the connection holds a `Cc` and calls it by
/// `match`, with no allocation and no dynamic dispatch.
#[derive(Clone, Debug)]
pub enum Cc {
    /// RFC 5681 Reno.
    Reno(Reno),
    /// RFC 9438 CUBIC.
    Cubic(Cubic),
}

impl Cc {
    /// The algorithm `cfg` names, for a connection whose SMSS is `smss` bytes.
    pub fn new(cfg: &CcConfig, smss: u32) -> Result<Cc, CcError> {
        Ok(match cfg.algorithm {
            CcAlgorithm::Reno => Cc::Reno(Reno::new(cfg, smss)?),
            CcAlgorithm::Cubic => Cc::Cubic(Cubic::new(cfg, smss)?),
        })
    }
}

macro_rules! each {
    ($self:expr, $cc:ident => $e:expr) => {
        match $self {
            Cc::Reno($cc) => $e,
            Cc::Cubic($cc) => $e,
        }
    };
}

impl CongestionControl for Cc {
    fn name(&self) -> &'static str {
        each!(self, c => c.name())
    }
    #[inline]
    fn cwnd(&self) -> u32 {
        each!(self, c => c.cwnd())
    }
    #[inline]
    fn ssthresh(&self) -> u32 {
        each!(self, c => c.ssthresh())
    }
    fn in_recovery(&self) -> bool {
        each!(self, c => c.in_recovery())
    }
    #[inline]
    fn on_ack(&mut self, ack: &AckSample) -> Growth {
        each!(self, c => c.on_ack(ack))
    }
    fn on_congestion_event(&mut self, now: Instant, flight_size: u32) -> bool {
        each!(self, c => c.on_congestion_event(now, flight_size))
    }
    fn on_recovery_exit(&mut self, now: Instant) -> bool {
        each!(self, c => c.on_recovery_exit(now))
    }
    fn on_rto(&mut self, now: Instant, flight_size: u32) -> bool {
        each!(self, c => c.on_rto(now, flight_size))
    }
    fn on_idle_restart(&mut self, now: Instant, last_send: Instant, rto: Duration) -> bool {
        each!(self, c => c.on_idle_restart(now, last_send, rto))
    }
}

/// The state every loss-based algorithm here shares: the windows and their bounds, the
/// counting mode, and the recovery and timeout flags; slow start, Reno's additive
/// increase and the reductions are its methods.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    pub(crate) smss: u32,
    pub(crate) cwnd: u32,
    pub(crate) ssthresh: u32,
    pub(crate) max_cwnd: u32,
    /// The initial window, for the restart window (RFC 5681 §4.1).
    pub(crate) iw: u32,
    pub(crate) counting: AckCounting,
    /// Bytes acked toward the next congestion avoidance increment: RFC 3465 §2.1's
    /// `bytes_acked`, Linux's `snd_cwnd_cnt` (in bytes here).
    pub(crate) ca_bytes: u64,
    pub(crate) in_recovery: bool,
    /// A timeout fired and no new data has been acknowledged since.
    pub(crate) rto_pending: bool,
    /// In the slow start that follows a timeout: ABC's L is 1 SMSS (RFC 3465 §2.3).
    pub(crate) after_rto: bool,
}

impl Window {
    pub(crate) fn new(cfg: &CcConfig, smss: u32) -> Result<Window, CcError> {
        if smss == 0 {
            return Err(CcError::ZeroSmss);
        }
        if u64::from(cfg.max_cwnd) < 2 * u64::from(smss) {
            return Err(CcError::MaxBelowTwoSegments);
        }
        let iw = match cfg.initial_segments {
            Some(0) => return Err(CcError::ZeroInitialWindow),
            Some(n) => sat32(u64::from(n) * u64::from(smss)),
            None => initial_window(smss),
        };
        // An initial window above the bound is the bound (defined, not refused).
        let iw = iw.min(cfg.max_cwnd);
        Ok(Window {
            smss,
            cwnd: iw,
            // RFC 5681 §3.1: "SHOULD be set arbitrarily high"; Linux TCP_INFINITE_SSTHRESH.
            ssthresh: u32::MAX,
            max_cwnd: cfg.max_cwnd,
            iw,
            counting: cfg.counting,
            ca_bytes: 0,
            in_recovery: false,
            rto_pending: false,
            after_rto: false,
        })
    }

    /// The checks before any growth, in order; `None`: the ACK may grow cwnd.
    pub(crate) fn gate(&mut self, ack: &AckSample) -> Option<Growth> {
        if ack.bytes_acked == 0 {
            // RFC 5681 §3.1: cwnd grows on ACKs "that acknowledge new data".
            return Some(Growth::NothingAcked);
        }
        // New data acknowledged: a later timeout is a new one (RFC 5681 §3.1).
        self.rto_pending = false;
        if self.in_recovery {
            return Some(Growth::InRecovery);
        }
        if !ack.cwnd_limited {
            return Some(Growth::NotCwndLimited);
        }
        if self.cwnd >= self.max_cwnd {
            return Some(Growth::AtMax);
        }
        None
    }

    pub(crate) fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Slow start for one ACK of `bytes` (RFC 5681 §3.1, RFC 3465 §2.2), up to ssthresh
    /// as Linux's `tcp_slow_start`. Returns the bytes left for congestion avoidance: with
    /// [`AckCounting::Bytes`] what was acked beyond ssthresh (Linux hands "the leftover
    /// acks" on), otherwise 0 (the per-ACK rules count the ACK once).
    pub(crate) fn slow_start(&mut self, bytes: u32) -> u32 {
        let smss = u64::from(self.smss);
        let inc = match self.counting {
            AckCounting::PerAck => smss,
            AckCounting::Abc { .. } => {
                let l = self
                    .counting
                    .abc_limit(self.smss, self.after_rto)
                    .unwrap_or(smss);
                u64::from(bytes).min(l)
            }
            AckCounting::Bytes => u64::from(bytes),
        };
        let before = u64::from(self.cwnd);
        let after = (before + inc).min(u64::from(self.ssthresh));
        self.set_cwnd(after);
        if !self.in_slow_start() {
            // RFC 3465 §2.3's L = 1 lasts for the slow start after the timeout.
            self.after_rto = false;
        }
        match self.counting {
            AckCounting::Bytes => sat32(u64::from(bytes).saturating_sub(after - before)),
            _ => 0,
        }
    }

    /// Reno's additive increase for one ACK of `bytes` in congestion avoidance, by the
    /// counting mode.
    pub(crate) fn additive_increase(&mut self, bytes: u32) {
        let smss = u64::from(self.smss);
        let cwnd = u64::from(self.cwnd).max(1);
        match self.counting {
            // RFC 5681 eq. 3: cwnd += SMSS*SMSS/cwnd per ACK, and at least 1 byte
            // ("if the above formula yields 0, the result SHOULD be rounded up to 1").
            AckCounting::PerAck => self.set_cwnd(cwnd + (smss * smss / cwnd).max(1)),
            // RFC 3465 §2.1: bytes_acked reaching cwnd is reduced by cwnd and cwnd grows
            // by one SMSS: at most one SMSS per ACK.
            AckCounting::Abc { .. } => {
                self.ca_bytes = self.ca_bytes.saturating_add(u64::from(bytes));
                if self.ca_bytes >= cwnd {
                    self.ca_bytes -= cwnd;
                    self.set_cwnd(cwnd + smss);
                }
            }
            // Linux `tcp_cong_avoid_ai(tp, cwnd, acked)`: one segment per cwnd of
            // credit, several at once when a stretch ACK brings several cwnds.
            AckCounting::Bytes => {
                self.ca_bytes = self.ca_bytes.saturating_add(u64::from(bytes));
                if self.ca_bytes >= cwnd {
                    let n = self.ca_bytes / cwnd;
                    self.ca_bytes -= n * cwnd;
                    self.set_cwnd(cwnd.saturating_add(n.saturating_mul(smss)));
                }
            }
        }
    }

    /// Sets cwnd within `[SMSS, max_cwnd]`.
    pub(crate) fn set_cwnd(&mut self, cwnd: u64) {
        let lo = u64::from(self.smss);
        let hi = u64::from(self.max_cwnd);
        self.cwnd = sat32(cwnd.clamp(lo, hi));
    }

    fn set_ssthresh(&mut self, ssthresh: u64) {
        // RFC 5681 eq. 4, RFC 9438 §4.6: "ssthresh is at least 2 MSS".
        self.ssthresh = sat32(ssthresh.max(2 * u64::from(self.smss)));
    }

    /// Enters recovery with the new ssthresh (before its 2 SMSS floor): cwnd = ssthresh,
    /// at least 2 SMSS (RFC 5681 §3.2 and RFC 6675 §5 step 4.2, RFC 9438 §4.6).
    /// `false` when already in recovery.
    pub(crate) fn reduce(&mut self, ssthresh: u64) -> bool {
        if self.in_recovery {
            return false;
        }
        self.set_ssthresh(ssthresh);
        self.set_cwnd(u64::from(self.ssthresh));
        self.ca_bytes = 0;
        self.in_recovery = true;
        self.after_rto = false;
        true
    }

    pub(crate) fn exit_recovery(&mut self) -> bool {
        if !self.in_recovery {
            return false;
        }
        self.in_recovery = false;
        self.set_cwnd(u64::from(self.ssthresh));
        true
    }

    /// A timeout (RFC 5681 §3.1): `ssthresh` is the new one (before its 2 SMSS floor),
    /// applied when this is the first timeout since new data was last acknowledged and
    /// no recovery is under way (one reduction per loss event; Linux `tcp_enter_loss`
    /// keeps ssthresh while the recovery it interrupts has not finished). cwnd becomes
    /// the loss window, 1 SMSS, in every case. Returns whether ssthresh was set.
    pub(crate) fn timeout(&mut self, ssthresh: u64) -> bool {
        let first = !self.rto_pending && !self.in_recovery;
        if first {
            self.set_ssthresh(ssthresh);
        }
        self.set_cwnd(u64::from(self.smss));
        self.ca_bytes = 0;
        self.in_recovery = false;
        self.rto_pending = true;
        self.after_rto = true;
        first
    }

    /// RFC 5681 §4.1: idle longer than the RTO, cwnd = RW = min(IW, cwnd). ssthresh is
    /// kept. Returns whether cwnd was reset.
    pub(crate) fn idle_restart(&mut self, now: Instant, last_send: Instant, rto: Duration) -> bool {
        if now.saturating_since(last_send) <= rto {
            return false;
        }
        let rw = restart_window(self.iw, self.cwnd);
        self.set_cwnd(u64::from(rw));
        self.ca_bytes = 0;
        true
    }
}

/// `v` as a u32, saturating.
pub(crate) fn sat32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) const SMSS: u32 = 1460;

    pub(crate) fn cfg(algorithm: CcAlgorithm, counting: AckCounting) -> CcConfig {
        CcConfig {
            algorithm,
            counting,
            ..CcConfig::default()
        }
    }

    pub(crate) fn ack(now_ms: u64, bytes: u32) -> AckSample {
        AckSample {
            now: Instant::from_nanos(now_ms * 1_000_000),
            bytes_acked: bytes,
            srtt: Duration::from_millis(10),
            cwnd_limited: true,
        }
    }

    #[test]
    fn rfc6928_2_initial_window_for_mss_536_1460_8960() {
        assert_eq!(initial_window(536), 5360);
        assert_eq!(initial_window(1460), 14600);
        assert_eq!(initial_window(8960), 17920);
        // The 2*MSS floor over 14600 bytes, and saturation, for absurd MSS values.
        assert_eq!(initial_window(10_000), 20_000);
        assert_eq!(initial_window(u32::MAX), u32::MAX);
        assert_eq!(initial_window(0), 0);
        let c = Cc::new(&CcConfig::default(), 1460).unwrap();
        assert_eq!((c.cwnd(), c.ssthresh()), (14600, u32::MAX));
    }

    #[test]
    fn rfc5681_3_1_initial_ssthresh_is_arbitrarily_high() {
        for a in [CcAlgorithm::Reno, CcAlgorithm::Cubic] {
            let c = Cc::new(&cfg(a, AckCounting::Bytes), SMSS).unwrap();
            assert_eq!(c.ssthresh(), u32::MAX);
            assert!(c.in_slow_start());
        }
    }

    #[test]
    fn initial_segments_overrides_rfc6928_and_is_bounded() {
        let mut c = CcConfig {
            initial_segments: Some(4),
            ..CcConfig::default()
        };
        assert_eq!(Cc::new(&c, 1000).unwrap().cwnd(), 4000);
        c.initial_segments = Some(u32::MAX);
        c.max_cwnd = 100_000;
        assert_eq!(Cc::new(&c, 1000).unwrap().cwnd(), 100_000);
    }

    #[test]
    fn bad_configurations_are_refused() {
        let c = CcConfig::default();
        assert_eq!(Cc::new(&c, 0).unwrap_err(), CcError::ZeroSmss);
        let small = CcConfig {
            max_cwnd: 2919,
            ..c
        };
        assert_eq!(
            Cc::new(&small, 1460).unwrap_err(),
            CcError::MaxBelowTwoSegments
        );
        let zero = CcConfig {
            initial_segments: Some(0),
            ..c
        };
        assert_eq!(
            Cc::new(&zero, 1460).unwrap_err(),
            CcError::ZeroInitialWindow
        );
        assert!(CcError::ZeroSmss.to_string().contains("MSS"));
    }

    #[test]
    fn ack_counting_parses_the_cli_strings() {
        assert_eq!("per-ack".parse(), Ok(AckCounting::PerAck));
        assert_eq!("abc:1".parse(), Ok(AckCounting::Abc { l: 1 }));
        assert_eq!("abc:2".parse(), Ok(AckCounting::Abc { l: 2 }));
        assert_eq!("bytes".parse(), Ok(AckCounting::Bytes));
        for s in ["per-ack", "abc:1", "abc:2", "bytes"] {
            assert_eq!(s.parse::<AckCounting>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn rfc3465_2_3_abc_limit_above_2_is_refused() {
        for s in ["abc:3", "abc:0", "abc:", "abc", "ABC:2", "", "bytes "] {
            let e = s.parse::<AckCounting>().unwrap_err();
            assert!(e.to_string().contains("abc:2"), "{e}");
        }
        assert_eq!("cubic".parse(), Ok(CcAlgorithm::Cubic));
        assert_eq!("reno".parse(), Ok(CcAlgorithm::Reno));
        assert!("bbr".parse::<CcAlgorithm>().is_err());
        assert_eq!(CcAlgorithm::Cubic.to_string(), "cubic");
    }

    #[test]
    fn rfc3465_2_2_stretch_ack_of_4_segments_in_slow_start_by_counting_mode() {
        for a in [CcAlgorithm::Reno, CcAlgorithm::Cubic] {
            for (counting, segs) in [
                (AckCounting::PerAck, 1),
                (AckCounting::Abc { l: 1 }, 1),
                (AckCounting::Abc { l: 2 }, 2),
                (AckCounting::Bytes, 4),
            ] {
                let mut c = Cc::new(&cfg(a, counting), SMSS).unwrap();
                let g = c.on_ack(&ack(1, 4 * SMSS));
                assert_eq!(g, Growth::SlowStart);
                assert_eq!(c.cwnd(), 14600 + segs * SMSS, "{a} {counting}");
            }
        }
    }

    #[test]
    fn rfc3465_2_2_abc_credits_no_more_than_the_bytes_acked() {
        let mut c = Cc::new(&cfg(CcAlgorithm::Reno, AckCounting::Abc { l: 2 }), SMSS).unwrap();
        c.on_ack(&ack(1, 100));
        assert_eq!(c.cwnd(), 14600 + 100);
    }

    #[test]
    fn linux_tcp_is_cwnd_limited() {
        assert!(is_cwnd_limited(10, 100, 0, true));
        // Slow start: below twice the largest flight of the window.
        assert!(is_cwnd_limited(10, 100, 6, false));
        assert!(!is_cwnd_limited(12, 100, 6, false));
        // Congestion avoidance: only the sender's own record counts.
        assert!(!is_cwnd_limited(100, 50, 99, false));
        assert!(!is_cwnd_limited(u32::MAX, u32::MAX, u32::MAX, false));
    }

    #[test]
    fn linux_tcp_is_cwnd_limited_no_growth_when_application_limited() {
        for a in [CcAlgorithm::Reno, CcAlgorithm::Cubic] {
            for counting in [
                AckCounting::PerAck,
                AckCounting::Abc { l: 2 },
                AckCounting::Bytes,
            ] {
                let mut c = Cc::new(&cfg(a, counting), SMSS).unwrap();
                let mut k = ack(1, 2 * SMSS);
                k.cwnd_limited = false;
                assert_eq!(c.on_ack(&k), Growth::NotCwndLimited);
                assert_eq!(c.cwnd(), 14600);
                // And in congestion avoidance.
                c.on_congestion_event(Instant::ZERO, 20 * SMSS);
                c.on_recovery_exit(Instant::ZERO);
                let before = c.cwnd();
                for i in 0..1000 {
                    k.now = Instant::from_nanos(i * 1_000_000);
                    assert_eq!(c.on_ack(&k), Growth::NotCwndLimited);
                }
                assert_eq!(c.cwnd(), before, "{a} {counting}");
            }
        }
    }

    #[test]
    fn rfc5681_3_1_duplicate_ack_grows_nothing() {
        let mut c = Cc::new(&CcConfig::default(), SMSS).unwrap();
        assert_eq!(c.on_ack(&ack(1, 0)), Growth::NothingAcked);
        assert_eq!(c.cwnd(), 14600);
    }

    #[test]
    fn max_cwnd_bounds_growth() {
        for a in [CcAlgorithm::Reno, CcAlgorithm::Cubic] {
            let c = CcConfig {
                max_cwnd: 20_000,
                ..cfg(a, AckCounting::Bytes)
            };
            let mut c = Cc::new(&c, SMSS).unwrap();
            assert_eq!(c.on_ack(&ack(1, 60_000)), Growth::SlowStart);
            assert_eq!(c.cwnd(), 20_000);
            assert_eq!(c.on_ack(&ack(2, 60_000)), Growth::AtMax);
        }
    }

    #[test]
    fn rfc5681_4_1_idle_longer_than_rto_restarts_at_min_of_iw_and_cwnd() {
        for a in [CcAlgorithm::Reno, CcAlgorithm::Cubic] {
            let mut c = Cc::new(&cfg(a, AckCounting::Bytes), SMSS).unwrap();
            c.on_ack(&ack(1, 50 * SMSS));
            let big = c.cwnd();
            assert!(big > 14600);
            let rto = Duration::from_millis(200);
            let t = |ms: u64| Instant::from_nanos(ms * 1_000_000);
            // Idle no longer than the RTO: unchanged.
            assert!(!c.on_idle_restart(t(1200), t(1000), rto));
            assert_eq!(c.cwnd(), big);
            // Longer: RW = min(IW, cwnd); ssthresh kept.
            let ss = c.ssthresh();
            assert!(c.on_idle_restart(t(1201), t(1000), rto));
            assert_eq!((c.cwnd(), c.ssthresh()), (14600, ss));
            // A cwnd already below IW stays (RW = cwnd).
            c.on_rto(t(1300), 10 * SMSS);
            assert!(c.on_idle_restart(t(5000), t(1300), rto));
            assert_eq!(c.cwnd(), SMSS);
            // A clock that runs backwards is no idle time.
            assert!(!c.on_idle_restart(t(0), t(5000), rto));
        }
    }

    #[test]
    fn rfc5681_3_1_rto_sets_the_loss_window_and_halves_flight_size() {
        let mut c = Cc::new(&cfg(CcAlgorithm::Reno, AckCounting::Bytes), SMSS).unwrap();
        assert!(c.on_rto(Instant::ZERO, 30 * SMSS));
        assert_eq!((c.cwnd(), c.ssthresh()), (SMSS, 15 * SMSS));
        // Floor of 2 SMSS.
        let mut c = Cc::new(&cfg(CcAlgorithm::Reno, AckCounting::Bytes), SMSS).unwrap();
        c.on_rto(Instant::ZERO, SMSS);
        assert_eq!((c.cwnd(), c.ssthresh()), (SMSS, 2 * SMSS));
    }

    #[test]
    fn rfc5681_3_1_backed_off_rto_keeps_ssthresh() {
        for a in [CcAlgorithm::Reno, CcAlgorithm::Cubic] {
            let mut c = Cc::new(&cfg(a, AckCounting::Bytes), SMSS).unwrap();
            assert!(c.on_rto(Instant::ZERO, 40 * SMSS));
            let ss = c.ssthresh();
            // The same segment times out again: ssthresh stays, cwnd stays 1 SMSS.
            assert!(!c.on_rto(Instant::ZERO, 40 * SMSS));
            assert_eq!((c.cwnd(), c.ssthresh()), (SMSS, ss));
            // New data acknowledged, then a new timeout: a new reduction.
            c.on_ack(&ack(1, SMSS));
            assert!(c.on_rto(Instant::ZERO, 4 * SMSS));
            assert!(c.ssthresh() < ss);
        }
    }

    #[test]
    fn rfc3465_2_3_abc_limit_is_one_smss_in_slow_start_after_rto() {
        let mut c = Cc::new(&cfg(CcAlgorithm::Reno, AckCounting::Abc { l: 2 }), SMSS).unwrap();
        c.on_rto(Instant::ZERO, 40 * SMSS);
        c.on_ack(&ack(1, 4 * SMSS));
        assert_eq!(c.cwnd(), 2 * SMSS);
        // Once slow start ends, a later loss's slow start has L = 2 again.
        for i in 0..40 {
            c.on_ack(&ack(2 + i, 4 * SMSS));
        }
        assert!(!c.in_slow_start());
        c.on_congestion_event(Instant::ZERO, 10 * SMSS);
        c.on_recovery_exit(Instant::ZERO);
        let Cc::Reno(r) = &c else { unreachable!() };
        assert!(!r.window().after_rto);
    }

    #[test]
    fn rfc6582_3_2_one_reduction_per_recovery() {
        for a in [CcAlgorithm::Reno, CcAlgorithm::Cubic] {
            let mut c = Cc::new(&cfg(a, AckCounting::Bytes), SMSS).unwrap();
            assert!(c.on_congestion_event(Instant::ZERO, 20 * SMSS));
            let (cw, ss) = (c.cwnd(), c.ssthresh());
            assert!(c.in_recovery());
            assert!(!c.on_congestion_event(Instant::ZERO, 20 * SMSS));
            assert_eq!((c.cwnd(), c.ssthresh()), (cw, ss));
            // ACKs in recovery do not grow cwnd.
            assert_eq!(c.on_ack(&ack(1, SMSS)), Growth::InRecovery);
            assert_eq!(c.cwnd(), cw);
            assert!(c.on_recovery_exit(Instant::ZERO));
            assert!(!c.on_recovery_exit(Instant::ZERO));
            assert_eq!(c.cwnd(), c.ssthresh());
            assert!(!c.in_recovery());
        }
    }

    #[test]
    fn rto_during_recovery_keeps_ssthresh_and_ends_recovery() {
        // Linux tcp_enter_loss: the loss event already set ssthresh.
        for a in [CcAlgorithm::Reno, CcAlgorithm::Cubic] {
            let mut c = Cc::new(&cfg(a, AckCounting::Bytes), SMSS).unwrap();
            c.on_congestion_event(Instant::ZERO, 20 * SMSS);
            let ss = c.ssthresh();
            assert!(!c.on_rto(Instant::ZERO, 20 * SMSS));
            assert_eq!((c.cwnd(), c.ssthresh()), (SMSS, ss));
            assert!(!c.in_recovery());
        }
    }

    #[test]
    fn names_are_linux_names() {
        let r = Cc::new(&cfg(CcAlgorithm::Reno, AckCounting::Bytes), SMSS).unwrap();
        let c = Cc::new(&cfg(CcAlgorithm::Cubic, AckCounting::Bytes), SMSS).unwrap();
        assert_eq!((r.name(), c.name()), ("reno", "cubic"));
        assert_eq!(Growth::ALL.len(), Growth::COUNT);
        assert_eq!(Growth::RenoFriendly.name(), "reno_friendly");
    }

    /// One event for the property tests.
    #[derive(Clone, Debug)]
    enum Ev {
        Ack {
            dt_us: u32,
            bytes: u32,
            srtt_us: u32,
            limited: bool,
        },
        Congestion(u32),
        Exit,
        Rto(u32),
        Idle {
            idle_us: u64,
            rto_us: u32,
        },
    }

    fn ev() -> impl Strategy<Value = Ev> {
        prop_oneof![
            8 => (any::<u32>(), prop_oneof![Just(0u32), 1u32..100_000, any::<u32>()],
                  any::<u32>(), any::<bool>())
                .prop_map(|(dt_us, bytes, srtt_us, limited)| Ev::Ack { dt_us, bytes, srtt_us, limited }),
            1 => any::<u32>().prop_map(Ev::Congestion),
            1 => Just(Ev::Exit),
            1 => any::<u32>().prop_map(Ev::Rto),
            1 => (any::<u64>(), any::<u32>()).prop_map(|(idle_us, rto_us)| Ev::Idle { idle_us, rto_us }),
        ]
    }

    fn counting() -> impl Strategy<Value = AckCounting> {
        prop_oneof![
            Just(AckCounting::PerAck),
            any::<u8>().prop_map(|l| AckCounting::Abc { l }),
            Just(AckCounting::Bytes),
        ]
    }

    fn run(c: &mut Cc, evs: &[Ev], smss: u32, max: u32, start_ns: u64) {
        let mut now = Instant::from_nanos(start_ns);
        for e in evs {
            match *e {
                Ev::Ack {
                    dt_us,
                    bytes,
                    srtt_us,
                    limited,
                } => {
                    now += Duration::from_micros(u64::from(dt_us));
                    let before = c.cwnd();
                    c.on_ack(&AckSample {
                        now,
                        bytes_acked: bytes,
                        srtt: Duration::from_micros(u64::from(srtt_us)),
                        cwnd_limited: limited,
                    });
                    assert!(c.cwnd() >= before, "an ACK shrank cwnd");
                }
                Ev::Congestion(f) => {
                    if c.on_congestion_event(now, f) {
                        assert!(c.cwnd() >= 2 * smss && c.ssthresh() >= 2 * smss);
                    }
                }
                Ev::Exit => {
                    c.on_recovery_exit(now);
                }
                Ev::Rto(f) => {
                    c.on_rto(now, f);
                    assert_eq!(c.cwnd(), smss);
                    assert!(c.ssthresh() >= 2 * smss);
                }
                Ev::Idle { idle_us, rto_us } => {
                    let last = now;
                    now += Duration::from_micros(idle_us);
                    c.on_idle_restart(now, last, Duration::from_micros(u64::from(rto_us)));
                }
            }
            assert!(
                c.cwnd() >= smss && c.cwnd() <= max,
                "cwnd {} out of [{smss}, {max}]",
                c.cwnd()
            );
        }
    }

    proptest! {
        #[test]
        fn cwnd_stays_within_one_smss_and_max_for_any_events(
            cubic in any::<bool>(),
            counting in counting(),
            smss in prop_oneof![Just(536u32), Just(1460), Just(8960), 1u32..70_000],
            max_segs in 2u32..100_000,
            fast_convergence in any::<bool>(),
            evs in prop::collection::vec(ev(), 0..200),
        ) {
            let max = smss.saturating_mul(max_segs);
            let cfg = CcConfig {
                algorithm: if cubic { CcAlgorithm::Cubic } else { CcAlgorithm::Reno },
                counting,
                max_cwnd: max,
                initial_segments: None,
                fast_convergence,
            };
            let mut c = Cc::new(&cfg, smss).unwrap();
            run(&mut c, &evs, smss, max, 0);
        }

        #[test]
        fn no_panic_on_any_input(
            cubic in any::<bool>(),
            counting in counting(),
            smss in any::<u32>(),
            max in any::<u32>(),
            init in any::<Option<u32>>(),
            start_ns in any::<u64>(),
            evs in prop::collection::vec(ev(), 0..100),
        ) {
            let cfg = CcConfig {
                algorithm: if cubic { CcAlgorithm::Cubic } else { CcAlgorithm::Reno },
                counting,
                max_cwnd: max,
                initial_segments: init,
                fast_convergence: true,
            };
            match Cc::new(&cfg, smss) {
                Ok(mut c) => run(&mut c, &evs, smss, max, start_ns),
                Err(e) => prop_assert!(smss == 0 || u64::from(max) < 2 * u64::from(smss)
                    || init == Some(0), "{e}"),
            }
        }
    }
}
