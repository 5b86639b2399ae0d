//! Reno (RFC 5681 §3.1-3.2), with the ACK counting of RFC 3465.
//!
//! Read first: RFC 5681 §3.1 (slow start, congestion avoidance, eq. 3 and 4), RFC 3465
//! §2.1-2.2, then Linux's `tcp_reno_cong_avoid` and `tcp_reno_ssthresh`
//! (`net/ipv4/tcp_cong.c`).
//!
//! - Slow start below ssthresh, by the counting mode ([`super::AckCounting`]), up to
//!   ssthresh (Linux `tcp_slow_start`).
//! - Congestion avoidance, by the counting mode: `PerAck` adds SMSS*SMSS/cwnd per ACK
//!   (RFC 5681 eq. 3); `Abc` adds one SMSS each time a cwnd of bytes has been acked
//!   (RFC 3465 §2.1), at most one per ACK; `Bytes` does the same but applies every cwnd
//!   a stretch ACK brings at once, as Linux's `tcp_cong_avoid_ai`.
//! - Multiplicative decrease on loss: ssthresh = max(FlightSize/2, 2*SMSS) (RFC 5681
//!   eq. 4), cwnd = ssthresh (RFC 6675 §5 step 4.2; NewReno's inflation is the recovery
//!   code's). Linux halves cwnd rather than FlightSize (`tcp_reno_ssthresh`); with the
//!   cwnd-limited check the two differ only for a sender that did not fill its window.
//! - Timeout: the same ssthresh, cwnd = 1 SMSS (RFC 5681 eq. 4 and the loss window).

use super::{AckSample, CcConfig, CcError, CongestionControl, Growth, Window};
use crate::time::{Duration, Instant};

/// RFC 5681 Reno.
#[derive(Clone, Debug)]
pub struct Reno {
    w: Window,
}

impl Reno {
    /// Reno for a connection whose SMSS is `smss` bytes (`cfg.algorithm` is not read).
    pub fn new(cfg: &CcConfig, smss: u32) -> Result<Reno, CcError> {
        Ok(Reno {
            w: Window::new(cfg, smss)?,
        })
    }

    #[cfg(test)]
    pub(crate) fn window(&self) -> &Window {
        &self.w
    }
}

/// RFC 5681 eq. 4's ssthresh before its 2 SMSS floor: FlightSize / 2.
fn half(flight_size: u32) -> u64 {
    u64::from(flight_size) / 2
}

impl CongestionControl for Reno {
    fn name(&self) -> &'static str {
        "reno"
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
        if let Some(g) = self.w.gate(ack) {
            return g;
        }
        if self.w.in_slow_start() {
            let left = self.w.slow_start(ack.bytes_acked);
            if left > 0 {
                self.w.additive_increase(left);
            }
            return Growth::SlowStart;
        }
        self.w.additive_increase(ack.bytes_acked);
        Growth::CongestionAvoidance
    }

    fn on_congestion_event(&mut self, _now: Instant, flight_size: u32) -> bool {
        self.w.reduce(half(flight_size))
    }

    fn on_recovery_exit(&mut self, _now: Instant) -> bool {
        self.w.exit_recovery()
    }

    fn on_rto(&mut self, _now: Instant, flight_size: u32) -> bool {
        self.w.timeout(half(flight_size))
    }

    fn on_idle_restart(&mut self, now: Instant, last_send: Instant, rto: Duration) -> bool {
        self.w.idle_restart(now, last_send, rto)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::super::tests::{ack, cfg, SMSS};
    use super::super::{AckCounting, CcAlgorithm};
    use super::*;

    fn reno(counting: AckCounting) -> Reno {
        Reno::new(&cfg(CcAlgorithm::Reno, counting), SMSS).unwrap()
    }

    /// Reno in congestion avoidance at `segs` segments (after a loss at 2*segs in flight).
    fn in_ca(counting: AckCounting, segs: u32) -> Reno {
        let mut r = reno(counting);
        r.on_congestion_event(Instant::ZERO, 2 * segs * SMSS);
        r.on_recovery_exit(Instant::ZERO);
        assert_eq!(r.cwnd(), segs * SMSS);
        assert!(!r.in_slow_start());
        r
    }

    #[test]
    fn rfc5681_eq4_loss_sets_ssthresh_to_half_the_flight_size_floor_2_smss() {
        let mut r = reno(AckCounting::Bytes);
        // FlightSize, not cwnd: 14600 of cwnd but 30 segments in flight.
        assert!(r.on_congestion_event(Instant::ZERO, 30 * SMSS));
        assert_eq!((r.ssthresh(), r.cwnd()), (15 * SMSS, 15 * SMSS));
        let mut r = reno(AckCounting::Bytes);
        r.on_congestion_event(Instant::ZERO, 3 * SMSS);
        assert_eq!((r.ssthresh(), r.cwnd()), (2 * SMSS, 2 * SMSS));
        let mut r = reno(AckCounting::Bytes);
        r.on_congestion_event(Instant::ZERO, 0);
        assert_eq!((r.ssthresh(), r.cwnd()), (2 * SMSS, 2 * SMSS));
    }

    #[test]
    fn rfc5681_eq3_per_ack_congestion_avoidance_adds_smss_squared_over_cwnd() {
        let mut r = in_ca(AckCounting::PerAck, 10);
        // A stretch ACK counts once.
        assert_eq!(r.on_ack(&ack(1, 4 * SMSS)), Growth::CongestionAvoidance);
        assert_eq!(r.cwnd(), 10 * SMSS + SMSS / 10);
        // About one SMSS per window of ACKs.
        let mut r = in_ca(AckCounting::PerAck, 10);
        for i in 0..10 {
            r.on_ack(&ack(i, SMSS));
        }
        let grown = r.cwnd() - 10 * SMSS;
        assert!((SMSS * 9 / 10..=SMSS).contains(&grown), "{grown}");
    }

    #[test]
    fn rfc5681_eq3_increment_rounds_up_to_one_byte() {
        let c = CcConfig {
            max_cwnd: u32::MAX,
            ..cfg(CcAlgorithm::Reno, AckCounting::PerAck)
        };
        let mut r = Reno::new(&c, 2).unwrap();
        r.on_congestion_event(Instant::ZERO, 2_000_000);
        r.on_recovery_exit(Instant::ZERO);
        let before = r.cwnd();
        r.on_ack(&ack(1, 2));
        assert_eq!(r.cwnd(), before + 1);
    }

    #[test]
    fn rfc3465_2_1_abc_congestion_avoidance_adds_one_smss_per_cwnd_of_bytes_acked() {
        let mut r = in_ca(AckCounting::Abc { l: 2 }, 10);
        // 9 segments acked: nothing yet; the 10th (a cwnd of bytes) adds one SMSS.
        for i in 0..9 {
            r.on_ack(&ack(i, SMSS));
            assert_eq!(r.cwnd(), 10 * SMSS);
        }
        r.on_ack(&ack(9, SMSS));
        assert_eq!(r.cwnd(), 11 * SMSS);
        // At most one SMSS per ACK, even for an ACK of three windows; the rest stays
        // as credit.
        let mut r = in_ca(AckCounting::Abc { l: 2 }, 10);
        r.on_ack(&ack(1, 30 * SMSS));
        assert_eq!(r.cwnd(), 11 * SMSS);
        r.on_ack(&ack(2, 1));
        assert_eq!(r.cwnd(), 12 * SMSS);
    }

    #[test]
    fn linux_tcp_cong_avoid_ai_applies_every_cwnd_of_a_stretch_ack() {
        let mut r = in_ca(AckCounting::Bytes, 10);
        r.on_ack(&ack(1, 30 * SMSS));
        // 30 segments at w = 10: 3 segments at once.
        assert_eq!(r.cwnd(), 13 * SMSS);
    }

    #[test]
    fn linux_tcp_slow_start_stops_at_ssthresh_and_hands_on_the_leftover() {
        // ssthresh 20 SMSS, cwnd 1 SMSS after a timeout; then slow start to ssthresh.
        let mut r = reno(AckCounting::Bytes);
        r.on_rto(Instant::ZERO, 40 * SMSS);
        assert_eq!(r.ssthresh(), 20 * SMSS);
        r.on_ack(&ack(1, 18 * SMSS));
        assert_eq!(r.cwnd(), 19 * SMSS);
        // 21 segments: 1 to reach ssthresh, 20 of congestion avoidance credit at
        // w = 20 segments, one more segment.
        assert_eq!(r.on_ack(&ack(2, 21 * SMSS)), Growth::SlowStart);
        assert_eq!(r.cwnd(), 21 * SMSS);
        // The per-ACK modes stop at ssthresh.
        let mut r = reno(AckCounting::Abc { l: 2 });
        r.on_rto(Instant::ZERO, 4 * SMSS);
        r.on_ack(&ack(1, 4 * SMSS));
        assert_eq!(r.cwnd(), 2 * SMSS);
        assert_eq!(r.on_ack(&ack(2, 4 * SMSS)), Growth::CongestionAvoidance);
    }

    #[test]
    fn rfc5681_3_1_slow_start_roughly_doubles_per_window_with_per_ack_counting() {
        let mut r = reno(AckCounting::PerAck);
        for i in 0..10 {
            r.on_ack(&ack(i, SMSS));
        }
        assert_eq!(r.cwnd(), 20 * SMSS);
    }
}
