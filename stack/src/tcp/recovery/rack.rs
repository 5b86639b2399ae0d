//! RACK-TLP (RFC 8985): time-based loss detection, and the tail loss probe.
//!
//! Read first: RFC 8985 §6.1-6.3 (RACK: the most recently delivered segment, the
//! reordering window, detecting losses and the reordering timer), §7 (TLP: when to arm the
//! probe timeout, what to send, what its ACK says), Linux `net/ipv4/tcp_recovery.c`
//! (`tcp_rack_advance`, `tcp_rack_detect_loss`, `tcp_rack_update_reo_wnd`) and
//! `tcp_send_loss_probe` / `tcp_process_tlp_ack` in `tcp_output.c` / `tcp_input.c`.
//!
//! RACK reads the send times the [`RtxQueue`] keeps (`SentSeg::last_tx` is RFC 8985's
//! `Segment.xmit_ts`; a segment lost and not retransmitted is not in flight, which is what
//! the RFC's `INFINITE_TS` marks). SRTT and RACK.min_RTT come in as arguments (the RTT
//! estimator is another module's); so does the ACK's TSecr, converted by the caller to the
//! [`Instant`] its TSval was stamped at.

use super::rtx::{RtxQueue, SentSeg};
use super::scoreboard::DUP_THRESH;
use crate::reason::reason_enum;
use crate::seq::SeqNumber;
use crate::time::{Duration, Instant};
use crate::wire::SackBlock;

/// RFC 8985 §6.2 step 4: the reordering window stays grown for 16 DSACK-free recoveries.
pub const REO_WND_PERSIST: u32 = 16;
/// The largest reordering-window multiplier (Linux caps `reo_wnd_steps` at 0xFF in
/// `tcp_rack_update_reo_wnd`; the window is bounded by SRTT anyway).
pub const MAX_REO_WND_MULT: u32 = 255;
/// RFC 8985 §7.2 TLP.max_ack_delay when the peer's is unknown: the worst-case delayed ACK
/// timer (WCDelAckT), 200 ms.
pub const WC_DEL_ACK_T: Duration = Duration::from_millis(200);
/// RFC 8985 §7.2: the PTO before any RTT sample.
pub const PTO_WITHOUT_SRTT: Duration = Duration::from_secs(1);

/// RFC 8985 §6.2 RACK_sent_after: `(t1, seq1)` was sent after `(t2, seq2)`.
fn sent_after(t1: Instant, seq1: SeqNumber, t2: Instant, seq2: SeqNumber) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

/// What a RACK loss-detection pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RackLoss {
    /// Segments newly marked lost.
    pub lost: u32,
    /// Their sequence space.
    pub lost_bytes: usize,
    /// When the reordering timer must fire: some segment sent before RACK.xmit_ts is not
    /// lost yet but will be then, unless delivered (RFC 8985 §6.2 step 5). `None`: disarm.
    pub timer: Option<Instant>,
}

/// RACK's state (RFC 8985 §6.1).
#[derive(Clone, Debug)]
pub struct Rack {
    xmit_ts: Option<Instant>,
    end_seq: SeqNumber,
    rtt: Duration,
    fack: Option<SeqNumber>,
    reordering_seen: bool,
    reo_wnd_mult: u32,
    reo_wnd_persist: u32,
    dsack_round: Option<SeqNumber>,
    /// The newest send time among this ACK's valid deliveries (step 2's "ascending order
    /// of xmit_ts": the last one processed sets RACK.rtt).
    ack_newest: Option<Instant>,
}

impl Default for Rack {
    fn default() -> Self {
        Self::new()
    }
}

impl Rack {
    /// RACK before any delivery.
    pub fn new() -> Self {
        Rack {
            xmit_ts: None,
            end_seq: SeqNumber(0),
            rtt: Duration::ZERO,
            fack: None,
            reordering_seen: false,
            reo_wnd_mult: 1,
            reo_wnd_persist: REO_WND_PERSIST,
            dsack_round: None,
            ack_newest: None,
        }
    }

    /// RACK.xmit_ts: the send time of the most recently sent segment delivered.
    pub fn xmit_ts(&self) -> Option<Instant> {
        self.xmit_ts
    }
    /// RACK.end_seq: that segment's end.
    pub fn end_seq(&self) -> Option<SeqNumber> {
        self.xmit_ts.map(|_| self.end_seq)
    }
    /// RACK.rtt: the RTT measured from it.
    pub fn rtt(&self) -> Duration {
        self.rtt
    }
    /// RACK.fack: the highest sequence number delivered.
    pub fn fack(&self) -> Option<SeqNumber> {
        self.fack
    }
    /// RACK.reordering_seen.
    pub fn reordering_seen(&self) -> bool {
        self.reordering_seen
    }
    /// RACK.reo_wnd_mult.
    pub fn reo_wnd_mult(&self) -> u32 {
        self.reo_wnd_mult
    }
    /// RACK.reo_wnd_persist.
    pub fn reo_wnd_persist(&self) -> u32 {
        self.reo_wnd_persist
    }

    /// RFC 8985 §6.2 steps 2 and 3 for one newly delivered segment (cumulatively or
    /// selectively acknowledged), called in ascending sequence order (the queue and the
    /// scoreboard deliver in that order). `tsecr`: when the TSval the ACK echoes was
    /// stamped; `min_rtt`: RACK.min_RTT (zero if none yet).
    pub fn on_delivered(
        &mut self,
        s: &SentSeg,
        now: Instant,
        tsecr: Option<Instant>,
        min_rtt: Duration,
    ) {
        let xmit = s.last_tx();
        let rtt = now - xmit;
        // Step 2: a retransmitted segment's sample is ambiguous if the ACK echoes a
        // timestamp older than the retransmission, or came back faster than min_RTT.
        let valid = !s.ever_retransmitted() || (tsecr.is_none_or(|t| t >= xmit) && rtt >= min_rtt);
        if valid {
            if self.ack_newest.is_none_or(|t| xmit >= t) {
                self.ack_newest = Some(xmit);
                self.rtt = rtt;
            }
            let newer = match self.xmit_ts {
                None => true,
                Some(t) => sent_after(xmit, s.end(), t, self.end_seq),
            };
            if newer {
                self.xmit_ts = Some(xmit);
                self.end_seq = s.end();
            }
        }
        // Step 3: delivered below the highest delivered, and never retransmitted:
        // reordering.
        match self.fack {
            Some(f) if s.end() <= f => {
                if s.end() < f && !s.ever_retransmitted() {
                    self.reordering_seen = true;
                }
            }
            _ => self.fack = Some(s.end()),
        }
    }

    /// RFC 8985 §6.2 step 4, once per ACK after its deliveries: the DSACK round ends when
    /// SND.UNA passes it; a DSACK in a new round grows the window multiplier (and resets
    /// the persistence), otherwise leaving recovery counts down the persistence and resets
    /// the multiplier after [`REO_WND_PERSIST`] recoveries.
    pub fn update_reo_wnd(
        &mut self,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
        dsack: bool,
        exiting_recovery: bool,
    ) {
        self.ack_newest = None;
        if self.dsack_round.is_some_and(|r| snd_una >= r) {
            self.dsack_round = None;
        }
        if self.dsack_round.is_none() && dsack {
            self.dsack_round = Some(snd_nxt);
            self.reo_wnd_mult = (self.reo_wnd_mult + 1).min(MAX_REO_WND_MULT);
            self.reo_wnd_persist = REO_WND_PERSIST;
        } else if exiting_recovery {
            self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
            if self.reo_wnd_persist == 0 {
                self.reo_wnd_mult = 1;
            }
        }
    }

    /// RFC 8985 §6.2 step 4 RACK_reo_wnd: zero if no reordering was seen and either the
    /// sender is in recovery or DupThresh segments are SACKed (it then behaves as the
    /// DupThresh rule); else `min(RACK.min_RTT / 4 * RACK.reo_wnd_mult, SRTT)`.
    pub fn reo_wnd(
        &self,
        in_recovery: bool,
        segs_sacked: usize,
        min_rtt: Duration,
        srtt: Duration,
    ) -> Duration {
        if !self.reordering_seen && (in_recovery || segs_sacked >= DUP_THRESH) {
            return Duration::ZERO;
        }
        let w = (min_rtt.as_nanos() / 4).saturating_mul(u64::from(self.reo_wnd_mult));
        Duration::from_nanos(w.min(srtt.as_nanos()))
    }

    /// RFC 8985 §6.2 step 5 RACK_detect_loss: every segment in flight sent before
    /// RACK.xmit_ts (or at the same time, ending lower) is lost once `now >= xmit_ts +
    /// RACK.rtt + reo_wnd`; for the others the reordering timer is set to the latest such
    /// deadline (the RFC's `max(remaining)`). Segments lost and not yet retransmitted are
    /// skipped (the RFC's `INFINITE_TS`), as are SACKed ones.
    pub fn detect_loss(&mut self, q: &mut RtxQueue, now: Instant, reo_wnd: Duration) -> RackLoss {
        let mut r = RackLoss::default();
        let Some(rack_ts) = self.xmit_ts else {
            return r;
        };
        let mut latest: Option<Instant> = None;
        let originals = q.never_retransmitted_above();
        for idx in 0..q.len() {
            let Some(&s) = q.get(idx) else {
                break;
            };
            if !s.in_flight() {
                continue;
            }
            if !sent_after(rack_ts, self.end_seq, s.last_tx(), s.end()) {
                // Beyond every retransmission the queue is in send-time order: nothing
                // after this one was sent before RACK.xmit_ts either (Linux
                // `tcp_rack_detect_loss` breaks here on its time-sorted list).
                if s.end() > originals {
                    break;
                }
                continue;
            }
            let deadline = s.last_tx() + self.rtt + reo_wnd;
            if deadline <= now {
                if q.mark_lost(idx) {
                    r.lost += 1;
                    r.lost_bytes += s.seq_len();
                }
            } else {
                latest = Some(latest.map_or(deadline, |l| l.max(deadline)));
            }
        }
        r.timer = latest;
        r
    }
}

reason_enum! {
    /// Why no loss probe is sent when the PTO fires (RFC 8985 §7.3); the caller re-arms
    /// the RTO instead.
    pub enum ProbeSkipped {
        /// A previous probe is still unacknowledged (TLP.end_seq is set).
        ProbeInFlight = "probe_in_flight",
        /// No RTT sample since the last probe (or since the connection started).
        NoRttSample = "no_rtt_sample",
        /// Nothing outstanding to retransmit and no new data to send.
        NothingToSend = "nothing_to_send",
        /// The highest segment is SACKed: RACK already has the feedback a probe would get.
        TailSacked = "tail_sacked",
    }
}

/// What to send when the PTO fires (RFC 8985 §7.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// One new segment of up to SMSS from SND.NXT; then [`Tlp::on_probe_sent`] with
    /// `retransmission = false`.
    NewData,
    /// Retransmit the highest-sequence segment sent, the queue segment starting at `seq`
    /// (its last SMSS, split first, if it is longer); then [`Tlp::on_probe_sent`] with
    /// `retransmission = true`.
    Retransmit {
        /// The start of the queue's last segment.
        seq: SeqNumber,
    },
    /// No probe (re-arm the RTO).
    Skip(ProbeSkipped),
}

/// What the ACK of a probe says (RFC 8985 §7.4.2 TLP_process_ack).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TlpAck {
    /// No probe outstanding.
    #[default]
    Idle,
    /// The probe is not acknowledged yet, or the ACK does not tell.
    Pending,
    /// The probe carried new data and it was delivered.
    NewDataDelivered,
    /// A D-SACK for the probe: the original arrived too, so nothing was lost (case 1).
    DsackNoLoss,
    /// A duplicate ACK without SACK at the probe's end: the original had arrived (case 2).
    DupAckNoLoss,
    /// The ACK goes beyond the probe: the probe repaired a single loss, and the congestion
    /// controller must react to it as to a loss (Linux `tcp_process_tlp_ack` enters CWR).
    LossRepaired,
}

/// TLP's state (RFC 8985 §7.1).
#[derive(Clone, Debug)]
pub struct Tlp {
    end_seq: Option<SeqNumber>,
    is_retrans: bool,
    rtt_since_probe: bool,
    max_ack_delay: Duration,
}

impl Default for Tlp {
    fn default() -> Self {
        Self::new(WC_DEL_ACK_T)
    }
}

impl Tlp {
    /// TLP with the peer's maximum ACK delay (RFC 8985 §7.2 TLP.max_ack_delay;
    /// [`WC_DEL_ACK_T`] when unknown).
    pub fn new(max_ack_delay: Duration) -> Self {
        Tlp {
            end_seq: None,
            is_retrans: false,
            rtt_since_probe: false,
            max_ack_delay,
        }
    }
    /// TLP.end_seq: SND.NXT when the outstanding probe was sent.
    pub fn end_seq(&self) -> Option<SeqNumber> {
        self.end_seq
    }
    /// TLP.is_retrans: the outstanding probe was a retransmission.
    pub fn is_retrans(&self) -> bool {
        self.is_retrans
    }

    /// RFC 8985 §7.1: reset when the connection starts and on entering fast or RTO
    /// recovery.
    pub fn reset(&mut self) {
        self.end_seq = None;
        self.is_retrans = false;
    }

    /// An RTT sample was taken (§7.3 condition 2). Includes the handshake's.
    pub fn on_rtt_sample(&mut self) {
        self.rtt_since_probe = true;
    }

    /// RFC 8985 §7.2 TLP_calc_PTO: 2·SRTT, plus TLP.max_ack_delay when FlightSize is one
    /// segment (`flight <= smss`: its ACK may be delayed), 1 s without SRTT; never later
    /// than the RTO would fire.
    pub fn pto(
        &self,
        now: Instant,
        srtt: Option<Duration>,
        flight: usize,
        smss: u32,
        rto_deadline: Option<Instant>,
    ) -> Duration {
        let mut pto = match srtt {
            Some(s) => {
                let two = Duration::from_nanos(s.as_nanos().saturating_mul(2));
                if flight <= smss as usize {
                    two + self.max_ack_delay
                } else {
                    two
                }
            }
            None => PTO_WITHOUT_SRTT,
        };
        if let Some(rto) = rto_deadline {
            if now + pto > rto {
                pto = rto - now;
            }
        }
        pto
    }

    /// RFC 8985 §7.2: the PTO deadline to arm after sending new data (not a probe) or on
    /// an ACK of new data, unless in fast or RTO recovery or nothing is in flight.
    pub fn arm(
        &self,
        now: Instant,
        in_recovery: bool,
        srtt: Option<Duration>,
        flight: usize,
        smss: u32,
        rto_deadline: Option<Instant>,
    ) -> Option<Instant> {
        if in_recovery || flight == 0 {
            return None;
        }
        Some(now + self.pto(now, srtt, flight, smss, rto_deadline))
    }

    /// RFC 8985 §7.3, the PTO fired: at most one probe in flight, and only after an RTT
    /// sample since the last; then new data if there is some and the peer's window allows
    /// it (`new_data_ok`), else the highest-sequence segment sent.
    pub fn on_pto(&self, q: &RtxQueue, new_data_ok: bool) -> Probe {
        if self.end_seq.is_some() {
            return Probe::Skip(ProbeSkipped::ProbeInFlight);
        }
        if !self.rtt_since_probe {
            return Probe::Skip(ProbeSkipped::NoRttSample);
        }
        if new_data_ok {
            return Probe::NewData;
        }
        match q.last() {
            None => Probe::Skip(ProbeSkipped::NothingToSend),
            Some(s) if s.sacked() => Probe::Skip(ProbeSkipped::TailSacked),
            Some(s) => Probe::Retransmit { seq: s.seq() },
        }
    }

    /// The probe left: TLP.end_seq = SND.NXT (after it), TLP.is_retrans as given.
    pub fn on_probe_sent(&mut self, snd_nxt: SeqNumber, retransmission: bool) {
        self.end_seq = Some(snd_nxt);
        self.is_retrans = retransmission;
        self.rtt_since_probe = false;
    }

    /// RFC 8985 §7.4.2 TLP_process_ack for one ACK: `dsack` is its D-SACK block, if any;
    /// `dupack_without_sack`: SEG.ACK did not advance, and it carried no SACK blocks.
    pub fn on_ack(
        &mut self,
        ack: SeqNumber,
        dsack: Option<SackBlock>,
        dupack_without_sack: bool,
    ) -> TlpAck {
        let Some(end) = self.end_seq else {
            return TlpAck::Idle;
        };
        if ack < end {
            return TlpAck::Pending;
        }
        let outcome = if !self.is_retrans {
            TlpAck::NewDataDelivered
        } else if dsack.is_some_and(|b| b.right == end) {
            TlpAck::DsackNoLoss
        } else if ack > end {
            TlpAck::LossRepaired
        } else if dupack_without_sack {
            TlpAck::DupAckNoLoss
        } else {
            return TlpAck::Pending;
        };
        self.reset();
        outcome
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }
    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
    /// `n` segments of 1000 bytes, the i-th sent at `10 * i` ms.
    fn setup(n: u32) -> RtxQueue {
        let mut q = RtxQueue::new(32, SeqNumber(0));
        for i in 0..n {
            q.on_send(q.nxt(), 1000, false, t(10 * u64::from(i)))
                .unwrap();
        }
        q
    }
    fn deliver(rack: &mut Rack, q: &RtxQueue, idx: usize, now: Instant) {
        let s = *q.get(idx).unwrap();
        rack.on_delivered(&s, now, None, ms(10));
    }

    #[test]
    fn rfc8985_6_2_step2_rack_tracks_most_recently_sent_delivered() {
        let q = setup(3);
        let mut rack = Rack::new();
        deliver(&mut rack, &q, 2, t(70));
        deliver(&mut rack, &q, 1, t(70));
        assert_eq!(rack.xmit_ts(), Some(t(20)));
        assert_eq!(rack.end_seq(), Some(SeqNumber(3000)));
        rack.update_reo_wnd(q.una(), q.nxt(), false, false);
        assert_eq!(rack.rtt(), ms(50), "from the newest delivered");
        assert!(
            rack.reordering_seen(),
            "step 3: 1 delivered below fack 3000"
        );
    }

    #[test]
    fn rfc8985_6_2_step2_spurious_retransmission_sample_ignored() {
        let mut q = setup(2);
        q.on_retransmit(SeqNumber(1000), t(100)).unwrap();
        let s = *q.get(1).unwrap();
        let mut rack = Rack::new();
        // The ACK echoes a TSval from before the retransmission: the original arrived.
        rack.on_delivered(&s, t(120), Some(t(10)), ms(5));
        assert_eq!(rack.xmit_ts(), None);
        // Faster than min_RTT after the retransmission: ambiguous too.
        rack.on_delivered(&s, t(102), None, ms(5));
        assert_eq!(rack.xmit_ts(), None);
        // Echoing the retransmission's TSval, a plausible RTT: taken.
        rack.on_delivered(&s, t(120), Some(t(100)), ms(5));
        assert_eq!((rack.xmit_ts(), rack.rtt()), (Some(t(100)), ms(20)));
    }

    #[test]
    fn rfc8985_6_2_step5_loss_after_reo_wnd_and_reorder_timer_deadline() {
        // Sent at 0, 10, 20, 30 ms; the one sent at 30 is SACKed at 80 ms (RTT 50).
        let mut q = setup(4);
        let mut rack = Rack::new();
        deliver(&mut rack, &q, 3, t(80));
        rack.update_reo_wnd(q.una(), q.nxt(), false, false);
        let reo = rack.reo_wnd(false, 1, ms(40), ms(50));
        assert_eq!(reo, ms(10), "min_RTT / 4");
        // Deadlines xmit_ts + RACK.rtt + reo_wnd: 60, 70, 80 ms for segments 0-2. At 75
        // ms, 0 and 1 are lost and the timer is set for 2.
        let r = rack.detect_loss(&mut q, t(75), reo);
        assert_eq!((r.lost, r.lost_bytes), (2, 2000));
        assert_eq!(r.timer, Some(t(80)), "segment 2: 20 + 50 + 10");
        assert!(q.get(0).unwrap().lost() && q.get(1).unwrap().lost());
        assert!(!q.get(2).unwrap().lost());
        assert!(!q.get(3).unwrap().lost(), "not sent before RACK.xmit_ts");
        // The timer fires.
        let r = rack.detect_loss(&mut q, t(80), reo);
        assert_eq!((r.lost, r.timer), (1, None));
        // Lost and not retransmitted: not looked at again; retransmitted: timed anew.
        q.on_retransmit(SeqNumber(0), t(81)).unwrap();
        let r = rack.detect_loss(&mut q, t(200), reo);
        assert_eq!(r.lost, 0, "sent after RACK.xmit_ts");
    }

    #[test]
    fn rfc8985_6_2_step4_reo_wnd_zero_without_reordering_in_recovery() {
        let rack = Rack::new();
        assert_eq!(rack.reo_wnd(true, 0, ms(40), ms(50)), Duration::ZERO);
        assert_eq!(
            rack.reo_wnd(false, DUP_THRESH, ms(40), ms(50)),
            Duration::ZERO
        );
        assert_eq!(rack.reo_wnd(false, 2, ms(40), ms(50)), ms(10));
        assert_eq!(
            rack.reo_wnd(false, 2, ms(400), ms(50)),
            ms(50),
            "bounded by SRTT"
        );
    }

    #[test]
    fn rfc8985_6_2_step4_reo_wnd_grows_on_dsack_once_per_round() {
        let q = setup(4);
        let mut rack = Rack::new();
        rack.update_reo_wnd(q.una(), q.nxt(), true, false);
        assert_eq!(rack.reo_wnd_mult(), 2);
        assert_eq!(rack.reo_wnd(false, 0, ms(40), ms(500)), ms(20));
        // Another DSACK in the same round (SND.UNA below the round's SND.NXT): no growth.
        rack.update_reo_wnd(SeqNumber(2000), q.nxt(), true, false);
        assert_eq!(rack.reo_wnd_mult(), 2);
        // The round is over: it grows again.
        rack.update_reo_wnd(SeqNumber(4000), SeqNumber(4000), true, false);
        assert_eq!(rack.reo_wnd_mult(), 3);
        assert_eq!(rack.reo_wnd(false, 0, ms(40), ms(500)), ms(30));
    }

    #[test]
    fn rfc8985_6_2_step4_reo_wnd_decays_after_16_recoveries() {
        let mut rack = Rack::new();
        rack.update_reo_wnd(SeqNumber(0), SeqNumber(100), true, false);
        assert_eq!((rack.reo_wnd_mult(), rack.reo_wnd_persist()), (2, 16));
        for i in 1..16 {
            rack.update_reo_wnd(SeqNumber(100), SeqNumber(100), false, true);
            assert_eq!(rack.reo_wnd_mult(), 2, "after {i} recoveries");
        }
        rack.update_reo_wnd(SeqNumber(100), SeqNumber(100), false, true);
        assert_eq!(rack.reo_wnd_mult(), 1);
    }

    #[test]
    fn rfc8985_7_2_pto_is_two_srtt() {
        let tlp = Tlp::default();
        assert_eq!(tlp.pto(t(0), Some(ms(30)), 5000, 1000, None), ms(60));
        assert_eq!(
            tlp.pto(t(0), None, 5000, 1000, None),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn rfc8985_7_2_pto_adds_wcdelackt_for_a_single_segment() {
        let tlp = Tlp::default();
        assert_eq!(tlp.pto(t(0), Some(ms(30)), 1000, 1000, None), ms(260));
        assert_eq!(tlp.pto(t(0), Some(ms(30)), 1001, 1000, None), ms(60));
        let tlp = Tlp::new(ms(25));
        assert_eq!(tlp.pto(t(0), Some(ms(30)), 100, 1000, None), ms(85));
    }

    #[test]
    fn rfc8985_7_2_pto_capped_by_rto() {
        let tlp = Tlp::default();
        assert_eq!(
            tlp.pto(t(100), Some(ms(30)), 1000, 1000, Some(t(200))),
            ms(100)
        );
        assert_eq!(
            tlp.pto(t(100), Some(ms(30)), 5000, 1000, Some(t(200))),
            ms(60)
        );
        assert_eq!(
            tlp.arm(t(100), false, Some(ms(30)), 5000, 1000, None),
            Some(t(160))
        );
        assert_eq!(tlp.arm(t(100), true, Some(ms(30)), 5000, 1000, None), None);
        assert_eq!(tlp.arm(t(100), false, Some(ms(30)), 0, 1000, None), None);
    }

    #[test]
    fn rfc8985_7_3_probe_new_data_else_last_segment() {
        let mut q = setup(3);
        let mut tlp = Tlp::default();
        assert_eq!(tlp.on_pto(&q, true), Probe::Skip(ProbeSkipped::NoRttSample));
        tlp.on_rtt_sample();
        assert_eq!(tlp.on_pto(&q, true), Probe::NewData);
        assert_eq!(
            tlp.on_pto(&q, false),
            Probe::Retransmit {
                seq: SeqNumber(2000)
            }
        );
        q.on_retransmit(SeqNumber(2000), t(90)).unwrap();
        tlp.on_probe_sent(q.nxt(), true);
        assert_eq!(
            tlp.on_pto(&q, true),
            Probe::Skip(ProbeSkipped::ProbeInFlight)
        );
        let e = RtxQueue::new(4, SeqNumber(0));
        tlp.reset();
        tlp.on_rtt_sample();
        assert_eq!(
            tlp.on_pto(&e, false),
            Probe::Skip(ProbeSkipped::NothingToSend)
        );
    }

    #[test]
    fn rfc8985_7_4_probe_ack_detects_repaired_single_loss() {
        let mut tlp = Tlp::default();
        tlp.on_probe_sent(SeqNumber(3000), true);
        assert_eq!(tlp.on_ack(SeqNumber(2000), None, false), TlpAck::Pending);
        assert_eq!(tlp.on_ack(SeqNumber(3000), None, false), TlpAck::Pending);
        // Beyond TLP.end_seq: the probe repaired the one loss.
        assert_eq!(
            tlp.on_ack(SeqNumber(3100), None, false),
            TlpAck::LossRepaired
        );
        assert_eq!(tlp.end_seq(), None);
        assert_eq!(tlp.on_ack(SeqNumber(3100), None, false), TlpAck::Idle);
    }

    #[test]
    fn rfc8985_7_4_probe_ack_dsack_or_dupack_means_no_loss() {
        let mut tlp = Tlp::default();
        tlp.on_probe_sent(SeqNumber(3000), true);
        let d = SackBlock {
            left: SeqNumber(2000),
            right: SeqNumber(3000),
        };
        assert_eq!(
            tlp.on_ack(SeqNumber(3000), Some(d), false),
            TlpAck::DsackNoLoss
        );
        tlp.on_probe_sent(SeqNumber(3000), true);
        assert_eq!(
            tlp.on_ack(SeqNumber(3000), None, true),
            TlpAck::DupAckNoLoss
        );
        tlp.on_probe_sent(SeqNumber(4000), false);
        assert_eq!(
            tlp.on_ack(SeqNumber(4000), None, false),
            TlpAck::NewDataDelivered
        );
    }
}
