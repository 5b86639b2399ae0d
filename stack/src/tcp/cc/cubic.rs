//! CUBIC (RFC 9438), Linux's default congestion control.
//!
//! Read first: RFC 9438 §4.1-4.8 and §5.8, then Linux's `net/ipv4/tcp_cubic.c`
//! (`bictcp_update`, `cubictcp_recalc_ssthresh`, `cubictcp_cwnd_event`).
//!
//! - Slow start below ssthresh is Reno's, by the counting mode (RFC 9438 §4.10 allows it;
//!   HyStart++ is left out).
//! - In congestion avoidance cwnd follows W_cubic(t) = C*(t-K)^3 + W_max (§4.2, eq. 1),
//!   C = 0.4, with K = cbrt((W_max - cwnd_epoch)/C) (eq. 2): each ACK moves cwnd by
//!   (target - cwnd)/cwnd per segment acked, target = W_cubic(t+RTT) bounded to
//!   [cwnd, 1.5*cwnd] (§4.2), in the concave region below W_max (§4.4) and the convex
//!   region above it (§4.5). RTT is SRTT (§4.1); Linux aims one minimum RTT ahead.
//! - Reno-friendly region (§4.3): W_est starts at cwnd_epoch and grows by
//!   alpha*segments_acked/cwnd, alpha = 3(1-beta)/(1+beta) = 9/17 until W_est reaches
//!   cwnd_prior, then 1; when W_cubic(t) < W_est, cwnd follows W_est (never down: an ACK
//!   does not shrink cwnd).
//! - Multiplicative decrease (§4.6): beta = 0.7, ssthresh = max(cwnd*beta, 2 SMSS), cwnd
//!   = ssthresh. From cwnd, as Linux's `cubictcp_recalc_ssthresh`, not flight_size:
//!   §4.6 allows it for an implementation that keeps cwnd from growing while not
//!   cwnd-limited, which [`super::Growth::NotCwndLimited`] is.
//! - Fast convergence (§4.7): W_max = cwnd*(1+beta)/2 when cwnd is below the previous
//!   W_max (switchable, [`super::CcConfig::fast_convergence`]).
//! - Timeout (§4.8): Reno's loss window with CUBIC's ssthresh; the next congestion
//!   avoidance stage starts with K = 0 and W_max = W_est = cwnd_epoch (Linux resets W_max
//!   in `cubictcp_state` for TCP_CA_Loss to the same effect).
//! - Application-limited time is not CUBIC time (§4.2, §5.8): an ACK that finds the
//!   sender not cwnd-limited moves the epoch forward by the time since the previous ACK,
//!   and so does an idle restart by the idle time (Linux `cubictcp_cwnd_event` on
//!   CA_EVENT_TX_START).
//!
//! Arithmetic is integer, as Linux's fixed point but in bytes and microseconds: times are
//! microseconds, (t-K)^3 is computed in u128 and saturates, K comes from an integer cube
//! root (Newton's method, exact floor), W_est is kept in 1/65536 bytes. The same inputs
//! give the same windows on every machine.

use super::{sat32, AckCounting, AckSample, CcConfig, CcError, CongestionControl, Growth, Window};
use crate::time::{Duration, Instant};

/// C = 0.4 segments/s^3 (RFC 9438 §5.1: "C SHOULD be set to 0.4"), as 2/5.
const C_NUM: u128 = 2;
const C_DEN: u128 = 5;
/// beta_cubic = 0.7 (RFC 9438 §4.6: "SHOULD be set to 0.7"), as 7/10.
const BETA_NUM: u64 = 7;
const BETA_DEN: u64 = 10;
/// alpha_cubic = 3(1-beta)/(1+beta) = 0.9/1.7 = 9/17 (RFC 9438 §4.3).
const ALPHA_NUM: u128 = 9;
const ALPHA_DEN: u128 = 17;
/// (1+beta)/2 = 17/20, fast convergence's W_max factor (RFC 9438 §4.7).
const FC_NUM: u64 = 17;
const FC_DEN: u64 = 20;
/// Microseconds per second, cubed: (t-K)^3 in µs^3 to s^3.
const US3_PER_S3: u128 = 1_000_000_000_000_000_000;
/// W_est's fixed point: 16 fractional bits of a byte.
const EST_SHIFT: u32 = 16;

/// The current congestion avoidance stage (RFC 9438 §4.1's t_epoch and what starts with it).
#[derive(Clone, Debug)]
struct Epoch {
    /// t_epoch, moved forward over application-limited time.
    start: Instant,
    /// K in microseconds.
    k_us: u64,
    /// W_est in bytes << EST_SHIFT.
    w_est: u128,
    /// Increments owed to cwnd, as a numerator over cwnd: sum of (target - cwnd) *
    /// bytes credited.
    acc: u128,
}

/// RFC 9438 CUBIC.
#[derive(Clone, Debug)]
pub struct Cubic {
    w: Window,
    fast_convergence: bool,
    /// W_max in bytes; 0 when unknown (before the first congestion event, after a
    /// timeout): the next stage then takes cwnd_epoch (§4.8, §4.10).
    w_max: u64,
    /// cwnd_prior in bytes: cwnd when ssthresh was last set (§4.1).
    cwnd_prior: u64,
    epoch: Option<Epoch>,
    /// The previous ACK of new data, for taking application-limited time out of t.
    last_ack: Option<Instant>,
}

impl Cubic {
    /// CUBIC for a connection whose SMSS is `smss` bytes (`cfg.algorithm` is not read).
    pub fn new(cfg: &CcConfig, smss: u32) -> Result<Cubic, CcError> {
        Ok(Cubic {
            w: Window::new(cfg, smss)?,
            fast_convergence: cfg.fast_convergence,
            w_max: 0,
            cwnd_prior: 0,
            epoch: None,
            last_ack: None,
        })
    }

    /// W_max in bytes (0 before the first congestion event and after a timeout, until
    /// the next congestion avoidance stage starts).
    pub fn w_max(&self) -> u32 {
        sat32(self.w_max)
    }
    /// cwnd_prior in bytes: cwnd when ssthresh was last set (0 before that).
    pub fn cwnd_prior(&self) -> u32 {
        sat32(self.cwnd_prior)
    }
    /// K of the current congestion avoidance stage; `None` outside one.
    pub fn k(&self) -> Option<Duration> {
        self.epoch.as_ref().map(|e| Duration::from_micros(e.k_us))
    }
    /// W_est in bytes, in a congestion avoidance stage.
    pub fn w_est(&self) -> Option<u32> {
        self.epoch
            .as_ref()
            .map(|e| sat32(u64::try_from(e.w_est >> EST_SHIFT).unwrap_or(u64::MAX)))
    }
    /// t_epoch, with application-limited time taken out; `None` outside a stage.
    pub fn epoch_start(&self) -> Option<Instant> {
        self.epoch.as_ref().map(|e| e.start)
    }

    /// Starts a congestion avoidance stage at `now` with cwnd_epoch = cwnd (§4.2).
    fn start_epoch(&mut self, now: Instant) -> Epoch {
        let cwnd = u64::from(self.w.cwnd);
        let k_us = if self.w_max <= cwnd {
            // Nothing to climb back to: K = 0 and W_max = cwnd_epoch (§4.8 after a
            // timeout, §4.10 without a W_max; Linux `bictcp_update` likewise).
            self.w_max = cwnd;
            0
        } else {
            k_us(self.w_max - cwnd, self.w.smss)
        };
        Epoch {
            start: now,
            k_us,
            // §4.3: "W_est is set equal to cwnd_epoch at the start of the congestion
            // avoidance stage".
            w_est: u128::from(cwnd) << EST_SHIFT,
            acc: 0,
        }
    }

    /// Congestion avoidance for one ACK crediting `credit` bytes.
    fn avoid(&mut self, now: Instant, srtt: Duration, credit: u32) -> Growth {
        let mut ep = match self.epoch.take() {
            Some(ep) => ep,
            None => self.start_epoch(now),
        };
        let smss = self.w.smss;
        let cwnd = u64::from(self.w.cwnd).max(1);
        // Eq. 4: W_est += alpha * segments_acked / cwnd, in bytes: alpha * credit * SMSS
        // / cwnd. alpha = 1 once W_est has reached cwnd_prior (§4.3).
        let (an, ad) = if (ep.w_est >> EST_SHIFT) >= u128::from(self.cwnd_prior) {
            (1, 1)
        } else {
            (ALPHA_NUM, ALPHA_DEN)
        };
        let inc = (an * u128::from(credit) * u128::from(smss)) << EST_SHIFT;
        ep.w_est = ep
            .w_est
            .saturating_add(inc / (ad * u128::from(cwnd)))
            .min(u128::from(self.w.max_cwnd) << EST_SHIFT);
        let w_est = u64::try_from(ep.w_est >> EST_SHIFT).unwrap_or(u64::MAX);

        let t_us = now.saturating_since(ep.start).as_nanos() / 1000;
        let growth = if w_cubic(t_us, ep.k_us, self.w_max, smss) < w_est {
            // §4.3: the Reno-friendly region, cwnd = W_est.
            self.w.set_cwnd(cwnd.max(w_est));
            ep.acc = 0;
            Growth::RenoFriendly
        } else {
            // §4.2: target = W_cubic(t + RTT) within [cwnd, 1.5 cwnd].
            let ahead = t_us.saturating_add(srtt.as_nanos() / 1000);
            let hi = cwnd.saturating_add(cwnd / 2);
            let target = w_cubic(ahead, ep.k_us, self.w_max, smss).clamp(cwnd, hi);
            // §4.4-4.5: + (target - cwnd)/cwnd per segment acked; in bytes,
            // (target - cwnd) * credit / cwnd, the remainder kept for the next ACK.
            ep.acc = ep
                .acc
                .saturating_add(u128::from(target - cwnd) * u128::from(credit));
            let add = ep.acc / u128::from(cwnd);
            ep.acc -= add * u128::from(cwnd);
            let add = u64::try_from(add).unwrap_or(u64::MAX);
            self.w.set_cwnd(cwnd.saturating_add(add).min(target));
            if cwnd < self.w_max {
                Growth::Concave
            } else {
                Growth::Convex
            }
        };
        self.epoch = Some(ep);
        growth
    }

    /// Moves t_epoch forward by `by`, never past `now` (Linux `cubictcp_cwnd_event`).
    fn shift_epoch(&mut self, now: Instant, by: Duration) {
        if let Some(ep) = self.epoch.as_mut() {
            ep.start = (ep.start + by).min(now);
        }
    }
}

/// K in microseconds for a climb of `delta` bytes back to W_max (eq. 2):
/// cbrt(delta/SMSS / C) seconds = cbrt(delta * C_DEN * 10^18 / (C_NUM * SMSS)) µs.
fn k_us(delta: u64, smss: u32) -> u64 {
    let num = u128::from(delta)
        .saturating_mul(C_DEN)
        .saturating_mul(US3_PER_S3);
    cbrt(num / (C_NUM * u128::from(smss.max(1))))
}

/// W_cubic(t) in bytes (eq. 1) for t and K in microseconds: W_max ± C * SMSS * |t-K|^3,
/// saturating at both ends.
fn w_cubic(t_us: u64, k_us: u64, w_max: u64, smss: u32) -> u64 {
    let d = u128::from(t_us.abs_diff(k_us));
    let cube = d.saturating_mul(d).saturating_mul(d);
    let delta = cube.saturating_mul(C_NUM * u128::from(smss)) / (C_DEN * US3_PER_S3);
    let delta = u64::try_from(delta).unwrap_or(u64::MAX);
    if t_us >= k_us {
        w_max.saturating_add(delta)
    } else {
        w_max.saturating_sub(delta)
    }
}

/// The integer cube root, floor(cbrt(x)), by Newton's method from above.
fn cbrt(x: u128) -> u64 {
    if x == 0 {
        return 0;
    }
    let bits = 128 - x.leading_zeros();
    // 2^ceil(bits/3) >= cbrt(x); at most 2^43, so r*r cannot overflow.
    let mut r: u128 = 1 << bits.div_ceil(3);
    loop {
        let y = (2 * r + x / (r * r)) / 3;
        if y >= r {
            return u64::try_from(r).unwrap_or(u64::MAX);
        }
        r = y;
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }
    fn cwnd(&self) -> u32 {
        self.w.cwnd
    }
    fn ssthresh(&self) -> u32 {
        self.w.ssthresh
    }
    fn in_recovery(&self) -> bool {
        self.w.in_recovery
    }

    fn on_ack(&mut self, ack: &AckSample) -> Growth {
        if ack.bytes_acked > 0 {
            let since = self.last_ack.map(|t| ack.now.saturating_since(t));
            self.last_ack = Some(ack.now);
            if let (false, Some(since)) = (ack.cwnd_limited, since) {
                // §4.2: "t MUST NOT include periods during which cwnd has not been
                // updated due to application-limited behavior".
                self.shift_epoch(ack.now, since);
            }
        }
        if let Some(g) = self.w.gate(ack) {
            return g;
        }
        // Eq. 4's segments_acked: the bytes acked, or one segment per ACK when counting
        // per ACK (the pre-ABC rule applied to CUBIC's per-ACK increments).
        let credit = match self.w.counting {
            AckCounting::PerAck => self.w.smss,
            _ => ack.bytes_acked,
        };
        if self.w.in_slow_start() {
            let left = self.w.slow_start(ack.bytes_acked);
            if left > 0 {
                self.avoid(ack.now, ack.srtt, left);
            }
            return Growth::SlowStart;
        }
        self.avoid(ack.now, ack.srtt, credit)
    }

    fn on_congestion_event(&mut self, _now: Instant, _flight_size: u32) -> bool {
        if self.w.in_recovery {
            return false;
        }
        let cwnd = u64::from(self.w.cwnd);
        // §4.7: fast convergence, before the reduction.
        self.w_max = if self.fast_convergence && cwnd < self.w_max {
            cwnd * FC_NUM / FC_DEN
        } else {
            cwnd
        };
        self.cwnd_prior = cwnd;
        self.epoch = None;
        // §4.6: ssthresh = cwnd * beta (floor 2 SMSS), cwnd = ssthresh.
        self.w.reduce(cwnd * BETA_NUM / BETA_DEN)
    }

    fn on_recovery_exit(&mut self, _now: Instant) -> bool {
        self.w.exit_recovery()
    }

    fn on_rto(&mut self, _now: Instant, _flight_size: u32) -> bool {
        let cwnd = u64::from(self.w.cwnd);
        let cut = self.w.timeout(cwnd * BETA_NUM / BETA_DEN);
        if cut {
            self.cwnd_prior = cwnd;
        }
        // §4.8: the next stage has K = 0 and W_max = cwnd_epoch.
        self.w_max = 0;
        self.epoch = None;
        cut
    }

    fn on_idle_restart(&mut self, now: Instant, last_send: Instant, rto: Duration) -> bool {
        // §5.8: idle time is not CUBIC time (Linux CA_EVENT_TX_START).
        self.shift_epoch(now, now.saturating_since(last_send));
        if self.last_ack.is_some() {
            // The idle time is taken out once, not again by the next ACK.
            self.last_ack = Some(now);
        }
        let restarted = self.w.idle_restart(now, last_send, rto);
        if restarted {
            // cwnd fell to the restart window: a new stage starts when slow start ends.
            self.epoch = None;
        }
        restarted
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::super::tests::{cfg, SMSS};
    use super::super::CcAlgorithm;
    use super::*;

    const MS: u64 = 1_000_000;

    fn cubic_at(segs: u32, counting: AckCounting) -> Cubic {
        let c = CcConfig {
            initial_segments: Some(segs),
            ..cfg(CcAlgorithm::Cubic, counting)
        };
        Cubic::new(&c, SMSS).unwrap()
    }

    /// CUBIC just out of recovery from a loss at `segs` segments.
    fn after_loss(segs: u32) -> Cubic {
        let mut c = cubic_at(segs, AckCounting::Bytes);
        assert!(c.on_congestion_event(Instant::ZERO, segs * SMSS));
        assert!(c.on_recovery_exit(Instant::ZERO));
        c
    }

    fn at(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    /// One round trip of `rtt_ns`: one cwnd-limited ACK per segment of cwnd, evenly
    /// spread. Returns each ACK's cwnd before it and its region.
    fn round(c: &mut Cubic, now: &mut u64, rtt_ns: u64) -> Vec<(u32, Growth)> {
        let n = u64::from((c.cwnd() / SMSS).max(1));
        let mut g = Vec::new();
        for _ in 0..n {
            *now += rtt_ns / n;
            let before = c.cwnd();
            g.push((
                before,
                c.on_ack(&AckSample {
                    now: at(*now),
                    bytes_acked: SMSS,
                    srtt: Duration::from_nanos(rtt_ns),
                    cwnd_limited: true,
                }),
            ));
        }
        g
    }

    #[test]
    fn integer_cube_root_is_the_exact_floor() {
        for x in 0u128..5000 {
            let r = u128::from(cbrt(x));
            assert!(r * r * r <= x && (r + 1) * (r + 1) * (r + 1) > x, "{x}");
        }
        for r in [1u128, 2, 1000, 4_217_163, (1 << 42) + 7] {
            assert_eq!(u128::from(cbrt(r * r * r)), r);
            assert_eq!(u128::from(cbrt(r * r * r - 1)), r - 1);
        }
        assert_eq!(cbrt(u128::MAX), 6_981_463_658_331);
    }

    #[test]
    fn rfc9438_4_2_eq2_k_for_a_known_w_max() {
        // W_max = 100 segments, cwnd_epoch = 70: K = cbrt(30 / 0.4) = cbrt(75) s.
        let k = k_us(30 * u64::from(SMSS), SMSS);
        assert_eq!(k, 4_217_163);
        // And through the algorithm: a loss at 100 segments, first ACK after recovery.
        let mut c = after_loss(100);
        assert_eq!((c.w_max(), c.cwnd()), (100 * SMSS, 70 * SMSS));
        c.on_ack(&super::super::tests::ack(1, SMSS));
        assert_eq!(c.k(), Some(Duration::from_micros(4_217_163)));
        // Huge windows saturate instead of overflowing.
        assert!(k_us(u64::MAX, 1) > 0);
    }

    #[test]
    fn rfc9438_4_2_eq1_w_cubic_at_k_equals_w_max() {
        let k = k_us(30 * u64::from(SMSS), SMSS);
        let w_max = 100 * u64::from(SMSS);
        assert_eq!(w_cubic(k, k, w_max, SMSS), w_max);
        // At t = 0 it is cwnd_epoch (to the byte, less the cube root's rounding).
        let w0 = w_cubic(0, k, w_max, SMSS);
        assert!(
            (70 * u64::from(SMSS) - 1..=70 * u64::from(SMSS) + 1).contains(&w0),
            "{w0}"
        );
        // Symmetric around K, C = 0.4: one second past K is W_max + 0.4 segment.
        assert_eq!(w_cubic(k + 1_000_000, k, w_max, SMSS), w_max + 584);
        assert_eq!(w_cubic(k - 1_000_000, k, w_max, SMSS), w_max - 584);
        // Saturation at both ends.
        assert_eq!(w_cubic(0, u64::MAX, w_max, SMSS), 0);
        assert_eq!(w_cubic(u64::MAX, 0, w_max, u32::MAX), u64::MAX);
    }

    #[test]
    fn rfc9438_4_4_4_5_concave_toward_w_max_then_convex_beyond() {
        let mut c = cubic_at(1000, AckCounting::Bytes);
        c.on_congestion_event(Instant::ZERO, 0);
        c.on_recovery_exit(Instant::ZERO);
        let w_max = c.w_max();
        let mut now = 0;
        let mut incs = Vec::new();
        let mut acks = Vec::new();
        let mut first_convex = None;
        for i in 0..140 {
            let before = c.cwnd();
            let g = round(&mut c, &mut now, 100 * MS);
            if first_convex.is_none() && g.iter().any(|&(_, g)| g == Growth::Convex) {
                first_convex = Some(i);
            }
            acks.extend(g);
            incs.push(c.cwnd() - before);
        }
        // Each ACK is concave below W_max and convex at or above it, concave first.
        for &(cwnd, g) in &acks {
            let want = if cwnd < w_max {
                Growth::Concave
            } else {
                Growth::Convex
            };
            assert_eq!(g, want, "{cwnd} {w_max}");
        }
        let split = acks.iter().position(|&(_, g)| g == Growth::Convex).unwrap();
        assert!(acks[split..].iter().all(|&(_, g)| g == Growth::Convex));
        // The plateau is near K = cbrt(300/0.4) = 9.09 s, 91 rounds.
        let first_convex = first_convex.unwrap();
        assert!((85..=95).contains(&first_convex), "{first_convex}");
        // Concave: growing more slowly as cwnd nears W_max; convex: faster and faster.
        assert!(
            incs[2] > incs[40] && incs[40] > incs[first_convex - 5],
            "{incs:?}"
        );
        let (a, b) = (first_convex + 5, first_convex + 25);
        assert!(incs[a] < incs[b] && incs[b] < incs[139], "{incs:?}");
    }

    #[test]
    fn rfc9438_4_2_target_is_at_most_1_5_cwnd() {
        let mut c = after_loss(100);
        let ack = |ms: u64, bytes: u32| AckSample {
            now: at(ms * MS),
            bytes_acked: bytes,
            srtt: Duration::from_millis(100),
            cwnd_limited: true,
        };
        c.on_ack(&ack(1, 1));
        let cwnd = c.cwnd();
        // 1000 s later W_cubic is enormous; an ACK of a whole window (and more) brings
        // cwnd to 1.5 cwnd and no further (still concave: cwnd was below W_max).
        assert_eq!(c.on_ack(&ack(1_000_000, 4 * cwnd)), Growth::Concave);
        assert_eq!(c.cwnd(), cwnd + cwnd / 2);
    }

    #[test]
    fn rfc9438_4_3_reno_friendly_region_at_small_rtt_and_window() {
        // W_max = 10 segments, RTT 1 ms: Reno's +alpha per RTT outruns the cubic curve,
        // which needs K = cbrt(7.5) = 1.96 s to get back to 10 segments.
        let mut c = after_loss(10);
        let mut now = 0;
        for _ in 0..200 {
            for (_, g) in round(&mut c, &mut now, MS) {
                assert_eq!(g, Growth::RenoFriendly);
            }
        }
        // 7 segments + ~alpha for 6 rounds to cwnd_prior, then ~1 per round.
        let segs = c.cwnd() / SMSS;
        assert!((180..=205).contains(&segs), "{segs}");
        assert_eq!(c.w_est().map(|w| w / SMSS), Some(segs));
    }

    #[test]
    fn rfc9438_4_3_alpha_is_9_17_below_cwnd_prior_then_1() {
        let mut c = after_loss(100);
        let mut now = 0;
        let w_est = |c: &Cubic| f64::from(c.w_est().unwrap_or(0)) / f64::from(SMSS);
        round(&mut c, &mut now, MS);
        let a = w_est(&c);
        round(&mut c, &mut now, MS);
        let per_round = w_est(&c) - a;
        assert!((per_round - 9.0 / 17.0).abs() < 0.02, "{per_round}");
        // Past cwnd_prior (100 segments) W_est grows by one segment per round.
        while w_est(&c) < 101.0 {
            round(&mut c, &mut now, MS);
        }
        let a = w_est(&c);
        round(&mut c, &mut now, MS);
        let per_round = w_est(&c) - a;
        assert!((per_round - 1.0).abs() < 0.03, "{per_round}");
    }

    #[test]
    fn rfc9438_4_6_decrease_to_beta_cwnd_floor_2_smss() {
        let mut c = cubic_at(100, AckCounting::Bytes);
        // From cwnd, whatever the flight size (Linux cubictcp_recalc_ssthresh).
        assert!(c.on_congestion_event(Instant::ZERO, 7));
        assert_eq!((c.ssthresh(), c.cwnd()), (70 * SMSS, 70 * SMSS));
        assert_eq!((c.w_max(), c.cwnd_prior()), (100 * SMSS, 100 * SMSS));
        let mut c = cubic_at(2, AckCounting::Bytes);
        c.on_congestion_event(Instant::ZERO, 2 * SMSS);
        assert_eq!((c.ssthresh(), c.cwnd()), (2 * SMSS, 2 * SMSS));
    }

    #[test]
    fn rfc9438_4_7_fast_convergence_lowers_w_max() {
        let mut c = after_loss(100);
        assert_eq!(c.w_max(), 100 * SMSS);
        // A second loss below the previous W_max: W_max = 70 * 0.85 = 59.5 segments.
        assert!(c.on_congestion_event(Instant::ZERO, 0));
        assert_eq!(c.w_max(), 70 * SMSS * 17 / 20);
        assert_eq!(c.cwnd(), 49 * SMSS);
        // Without fast convergence W_max is cwnd.
        let mut c = CcConfig {
            initial_segments: Some(100),
            fast_convergence: false,
            ..cfg(CcAlgorithm::Cubic, AckCounting::Bytes)
        };
        c.initial_segments = Some(100);
        let mut c = Cubic::new(&c, SMSS).unwrap();
        c.on_congestion_event(Instant::ZERO, 0);
        c.on_recovery_exit(Instant::ZERO);
        c.on_congestion_event(Instant::ZERO, 0);
        assert_eq!(c.w_max(), 70 * SMSS);
    }

    #[test]
    fn rfc9438_4_8_after_rto_k_is_0_and_w_max_is_cwnd_epoch() {
        let mut c = cubic_at(100, AckCounting::Bytes);
        assert!(c.on_rto(Instant::ZERO, 100 * SMSS));
        // Reno's loss window, CUBIC's ssthresh.
        assert_eq!((c.cwnd(), c.ssthresh()), (SMSS, 70 * SMSS));
        assert_eq!((c.w_max(), c.cwnd_prior()), (0, 100 * SMSS));
        // Slow start to ssthresh, then the first congestion avoidance ACK.
        let mut ms = 0;
        while c.in_slow_start() {
            ms += 1;
            assert_eq!(
                c.on_ack(&super::super::tests::ack(ms, SMSS)),
                Growth::SlowStart
            );
        }
        let epoch_cwnd = c.cwnd();
        assert_eq!(epoch_cwnd, 70 * SMSS);
        let g = c.on_ack(&super::super::tests::ack(ms + 1, 1));
        assert_ne!(g, Growth::SlowStart);
        assert_eq!(c.k(), Some(Duration::ZERO));
        assert_eq!(c.w_max(), epoch_cwnd);
        assert_eq!(c.w_est(), Some(epoch_cwnd));
    }

    #[test]
    fn rfc9438_5_8_application_limited_time_is_not_counted_in_t() {
        let mut c = after_loss(100);
        let ack = |ms: u64, limited: bool| AckSample {
            now: at(ms * MS),
            bytes_acked: SMSS,
            srtt: Duration::from_millis(10),
            cwnd_limited: limited,
        };
        c.on_ack(&ack(1000, true));
        assert_eq!(c.epoch_start(), Some(at(1000 * MS)));
        let cwnd = c.cwnd();
        // 5 s of ACKs that find the sender application-limited.
        for ms in (1100..=6000).step_by(100) {
            assert_eq!(c.on_ack(&ack(ms, false)), Growth::NotCwndLimited);
        }
        assert_eq!(c.epoch_start(), Some(at(6000 * MS)));
        assert_eq!(c.cwnd(), cwnd);
        // An idle period (Linux CA_EVENT_TX_START), taken out once.
        assert!(!c.on_idle_restart(at(6100 * MS), at(6000 * MS), Duration::from_secs(1)));
        assert_eq!(c.epoch_start(), Some(at(6100 * MS)));
        c.on_ack(&ack(6200, false));
        assert_eq!(c.epoch_start(), Some(at(6200 * MS)));
        // Never past now.
        assert!(!c.on_idle_restart(at(6300 * MS), Instant::ZERO, Duration::from_secs(100)));
        assert_eq!(c.epoch_start(), Some(at(6300 * MS)));
    }

    #[test]
    fn per_ack_counting_credits_one_segment_per_ack_in_congestion_avoidance() {
        let mut a = cubic_at(10, AckCounting::PerAck);
        let mut b = cubic_at(10, AckCounting::Bytes);
        for c in [&mut a, &mut b] {
            c.on_congestion_event(Instant::ZERO, 0);
            c.on_recovery_exit(Instant::ZERO);
            c.on_ack(&super::super::tests::ack(1, 4 * SMSS));
        }
        // The stretch ACK is worth one segment of W_est growth with per-ack counting.
        assert!(a.w_est() < b.w_est(), "{:?} {:?}", a.w_est(), b.w_est());
    }
}
