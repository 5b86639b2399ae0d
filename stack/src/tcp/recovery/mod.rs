//! The sender's loss-detection bookkeeping: which segments are outstanding, SACKed, lost
//! or retransmitted, and what to send next. Sequence ranges and per-segment metadata only:
//! the connection keeps the payload bytes.
//!
//! Read first: RFC 9293 §3.10.7.4 (the ACK step), RFC 6675 §2-5 (the SACK scoreboard and
//! loss recovery), RFC 2018 §8 and RFC 2883 §4 (reneging, D-SACK), RFC 8985 §6-7
//! (RACK-TLP), RFC 6582 §3 and RFC 5681 §2-3 (NewReno, duplicate ACKs), then Linux
//! `net/ipv4/tcp_recovery.c` and `tcp_ack` / `tcp_sacktag_write_queue` /
//! `tcp_clean_rtx_queue` in `net/ipv4/tcp_input.c`.
//!
//! # Where things are
//!
//! - `rtx.rs`: [`RtxQueue`], the bounded retransmission queue of [`SentSeg`]s (send,
//!   retransmit, cumulative ACK with partial-ACK splits, refusals).
//! - `scoreboard.rs`: [`Scoreboard`], RFC 6675 over the queue (SACK blocks and their
//!   validation, D-SACK, IsLost, SetPipe, NextSeg, entering and leaving recovery, RTO).
//! - `newreno.rs`: [`NewReno`] for peers without SACK, and [`AckFacts`] (RFC 5681 §2's
//!   duplicate ACK).
//! - `rack.rs`: [`Rack`] (RFC 8985 §6) and [`Tlp`] (§7).
//! - here: [`Recovery`], which runs them in the order of Linux's `tcp_ack` for one
//!   connection, in the mode the handshake chose ([`LossDetection`]).
//!
//! Nothing here allocates after construction (the queue's storage is sized then, and
//! every per-ACK result is a fixed-size value), reads a clock (time comes in as
//! [`Instant`]), or panics on what a peer sends: bad ACKs and SACK blocks are refused with
//! a reason the caller counts. SRTT and min RTT come from the RTT estimator (another
//! module); cwnd arithmetic is the congestion controller's.
//!
//! # Wiring
//!
//! How the connection (`tcp/conn/send.rs`, `tcp/input.rs`, `tcp/output.rs`) calls it:
//!
//! - **Handshake done**: `Recovery::new(capacity, ISS + 1, SMSS, mode)`, `mode` =
//!   [`LossDetection::Rack`] if SACK-permitted was negotiated, else
//!   [`LossDetection::NewReno`]; [`Recovery::on_rtt_sample`] for the SYN's RTT.
//! - **Sending new data** (output): [`Recovery::on_send`] for each segment, FIN included;
//!   `Err(SendRefused::Full)` means stop (queue-limited), as a closed cwnd does. Then arm
//!   the PTO at [`Recovery::pto_deadline`] if it returns one, else the RTO.
//! - **An acceptable ACK** (input, after RFC 5961 §5.2's check): [`Recovery::on_ack`]
//!   with SEG.ACK, the SACK blocks, whether RFC 5681 §2 (b), (c), (e) hold, TSecr as an
//!   `Instant`, SRTT and min RTT. `Err(AckRefused::AboveSndNxt)`: send an ACK and drop
//!   (RFC 9293 §3.10.7.4); count every refusal and every [`SackReport::refused`] entry.
//!   From the [`AckOutcome`]: `acked` feeds the RTT estimator (`rtt_sent`, Karn's
//!   `retransmitted`) and congestion control (bytes; `entered` / `exited` / `tlp ==
//!   LossRepaired` are its loss events); `reorder_timer` is the RACK timer to arm (or
//!   disarm); then send while cwnd allows: [`Recovery::next_seg`], and
//!   [`Recovery::on_retransmit`] for each retransmission (or `on_send` for new data).
//!   An ACK covering everything cancels the RTO; otherwise restart it (RFC 6298 §5.3),
//!   and re-arm the PTO at [`Recovery::pto_deadline`].
//! - **Reordering timer** fires: [`Recovery::on_reorder_timeout`], then send as above.
//! - **PTO** fires: [`Recovery::on_pto`]; send what it says, then
//!   [`Recovery::on_probe_sent`]; re-arm the RTO, not the PTO (RFC 8985 §7.3).
//! - **RTO** fires: [`Recovery::on_rto`] (every segment lost, SACK bits cleared), then
//!   retransmit [`Recovery::next_seg`]'s choices as the window reopens.
//! - **Stats**: every `*Refused` and [`ProbeSkipped`] is a `reason_enum!` with labels, for
//!   counters indexed by `index()`; `reneging` is counted too.

mod newreno;
mod rack;
mod rtx;
mod scoreboard;

pub use newreno::{AckFacts, NewReno, NewRenoEvent};
pub use rack::{
    Probe, ProbeSkipped, Rack, RackLoss, Tlp, TlpAck, MAX_REO_WND_MULT, PTO_WITHOUT_SRTT,
    REO_WND_PERSIST, WC_DEL_ACK_T,
};
pub use rtx::{
    AckRefused, Acked, RtxQueue, RtxRefused, SegState, SendRefused, SentSeg, SplitRefused,
    MAX_OUTSTANDING, MAX_UNIT_BYTES,
};
pub use scoreboard::{
    NextSeg, Phase, SackRefused, SackReport, Scoreboard, ScoreboardAck, DUP_THRESH,
};

use crate::seq::SeqNumber;
use crate::time::{Duration, Instant};
use crate::wire::SackBlock;

/// Which loss detection a connection runs (chosen at the handshake).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LossDetection {
    /// The peer did not permit SACK: NewReno (RFC 6582) on three duplicate ACKs (RFC 5681
    /// §3.2).
    NewReno,
    /// SACK with RFC 6675's DupThresh rules (IsLost, DupAcks).
    Sack,
    /// SACK with RACK-TLP (RFC 8985) marking losses in place of DupThresh, and tail loss
    /// probes, as Linux does by default (`tcp_recovery` = 1).
    Rack,
}

/// One ACK, as the connection parsed it.
#[derive(Clone, Copy, Debug)]
pub struct AckInput<'a> {
    /// SEG.ACK.
    pub ack: SeqNumber,
    /// The SACK blocks, in the order the option carried them.
    pub sack: &'a [SackBlock],
    /// RFC 5681 §2 (b), (c), (e): no data, SYN and FIN off, the window unchanged (the rest
    /// of the duplicate test is made here).
    pub dup_eligible: bool,
    /// When the TSval the ACK echoes was stamped, if timestamps are on.
    pub tsecr: Option<Instant>,
    /// SRTT, if any sample yet.
    pub srtt: Option<Duration>,
    /// The minimum RTT seen (RACK.min_RTT), zero if none yet.
    pub min_rtt: Duration,
}

/// What one ACK did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AckOutcome {
    /// The cumulative acknowledgment.
    pub acked: Acked,
    /// The SACK blocks (empty with NewReno).
    pub sack: SackReport,
    /// A duplicate ACK (RFC 6675 §2 with SACK, RFC 5681 §2 without).
    pub duplicate: bool,
    /// The ACK stops at a SACKed segment: possible reneging (RFC 2018 §8), counted.
    pub reneging: bool,
    /// Fast recovery started with this ACK: the congestion controller reduces now.
    pub entered: bool,
    /// Recovery ended with this ACK.
    pub exited: Option<Phase>,
    /// The segment to retransmit at once: the first unacknowledged one on entering
    /// recovery (RFC 6675 §5 (4.3), RFC 5681 §3.2) or on a NewReno partial ACK (RFC 6582).
    pub retransmit: Option<SeqNumber>,
    /// NewReno's reading of the ACK ([`NewRenoEvent::None`] with SACK).
    pub newreno: NewRenoEvent,
    /// Segments newly marked lost (IsLost or RACK).
    pub newly_lost: u32,
    /// The RACK reordering timer to arm; `None`: disarm it.
    pub reorder_timer: Option<Instant>,
    /// What the ACK says about an outstanding tail loss probe.
    pub tlp: TlpAck,
}

/// What the reordering timer found (RFC 8985 §6.2 step 5, run again).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReorderTimeout {
    /// What was marked lost, and the next deadline.
    pub loss: RackLoss,
    /// Fast recovery started: the congestion controller reduces now.
    pub entered: bool,
}

/// One connection's loss detection: the queue, and the recovery algorithms of its
/// [`LossDetection`] mode. See the module documentation for how the connection calls it.
#[derive(Clone, Debug)]
pub struct Recovery {
    q: RtxQueue,
    sb: Scoreboard,
    nr: NewReno,
    rack: Rack,
    tlp: Tlp,
    mode: LossDetection,
    reorder_timer: Option<Instant>,
}

impl Recovery {
    /// Loss detection for a connection whose first data sequence number is `start`, with
    /// room for `capacity` outstanding segments (the only allocation) and sender MSS
    /// `smss`.
    pub fn new(capacity: usize, start: SeqNumber, smss: u32, mode: LossDetection) -> Self {
        let mut q = RtxQueue::new(capacity, start);
        q.set_smss(smss);
        Recovery {
            q,
            sb: Scoreboard::new(smss, start),
            nr: NewReno::new(start),
            rack: Rack::new(),
            tlp: Tlp::default(),
            mode,
            reorder_timer: None,
        }
    }

    /// The mode.
    pub fn mode(&self) -> LossDetection {
        self.mode
    }
    /// The retransmission queue.
    pub fn queue(&self) -> &RtxQueue {
        &self.q
    }
    /// The RFC 6675 scoreboard (SACK modes).
    pub fn scoreboard(&self) -> &Scoreboard {
        &self.sb
    }
    /// NewReno's state (NewReno mode).
    pub fn newreno(&self) -> &NewReno {
        &self.nr
    }
    /// RACK's state (RACK mode).
    pub fn rack(&self) -> &Rack {
        &self.rack
    }
    /// TLP's state (RACK mode).
    pub fn tlp(&self) -> &Tlp {
        &self.tlp
    }
    /// Where recovery stands.
    pub fn phase(&self) -> Phase {
        match self.mode {
            LossDetection::NewReno => self.nr.phase(),
            _ => self.sb.phase(),
        }
    }
    /// The pipe (RFC 6675 §4): bytes in flight, for `cwnd - pipe`.
    pub fn pipe(&self) -> usize {
        self.q.in_flight()
    }
    /// The RACK reordering timer's deadline, if armed.
    pub fn reorder_timer(&self) -> Option<Instant> {
        self.reorder_timer
    }

    /// New data sent: see [`RtxQueue::on_send`].
    pub fn on_send(
        &mut self,
        seq: SeqNumber,
        len: u32,
        fin: bool,
        now: Instant,
    ) -> Result<(), SendRefused> {
        self.q.on_send(seq, len, fin, now)
    }

    /// New data sent as `n` full segments of a send unit: see
    /// [`RtxQueue::on_send_run`].
    pub fn on_send_run(
        &mut self,
        seq: SeqNumber,
        len: u32,
        n: u32,
        now: Instant,
    ) -> Result<(), SendRefused> {
        self.q.on_send_run(seq, len, n, now)
    }

    /// New data sent as one more segment of a send unit: see
    /// [`RtxQueue::on_send_unit`].
    pub fn on_send_unit(
        &mut self,
        seq: SeqNumber,
        len: u32,
        fin: bool,
        now: Instant,
    ) -> Result<(), SendRefused> {
        self.q.on_send_unit(seq, len, fin, now)
    }

    /// Splits the queue segment holding `at` (to retransmit at most SMSS of it).
    pub fn split(&mut self, at: SeqNumber) -> Result<usize, SplitRefused> {
        self.q.split(at)
    }

    /// The segment starting at `seq` was retransmitted at `now` (HighRxt follows in fast
    /// recovery, RFC 6675 §5 (C.2)).
    pub fn on_retransmit(&mut self, seq: SeqNumber, now: Instant) -> Result<(), RtxRefused> {
        match self.mode {
            LossDetection::NewReno => self.q.on_retransmit(seq, now).map(|_| ()),
            _ => self.sb.on_retransmit(&mut self.q, seq, now).map(|_| ()),
        }
    }

    /// An RTT sample was taken outside [`Recovery::on_ack`] (the handshake's, or one from
    /// timestamps): lets the next tail loss probe go (RFC 8985 §7.3).
    pub fn on_rtt_sample(&mut self) {
        self.tlp.on_rtt_sample();
    }

    /// One acceptable ACK, processed in the order of Linux `tcp_ack`: the cumulative ACK,
    /// the SACK blocks (RFC 6675 Update), DupAcks, leaving recovery, loss marking (RACK or
    /// IsLost), entering recovery, the TLP episode.
    ///
    /// An ACK that only moves SND.UNA forward over segments sent once, with nothing
    /// SACKed, lost, probed or waiting on the reordering timer, takes a short path that
    /// leaves the same state and returns the same outcome ([`Recovery::is_plain_ack`]).
    pub fn on_ack(&mut self, now: Instant, a: &AckInput<'_>) -> Result<AckOutcome, AckRefused> {
        if self.is_plain_ack(a) {
            return self.on_plain_ack(now, a);
        }
        self.on_any_ack(now, a)
    }

    /// The ACK needs none of the SACK, recovery and loss-marking steps: Linux `tcp_ack`'s
    /// fast path (SND.UNA advances and no `FLAG_SLOWPATH` reason holds), on the sender's
    /// state rather than on the header. In SACK or RACK mode, not in recovery; the ACK
    /// carries no SACK blocks and moves SND.UNA; nothing outstanding is SACKed, lost or
    /// was ever retransmitted; no tail loss probe is out and the reordering timer is off.
    ///
    /// Why each step then changes nothing:
    /// - SACK (RFC 6675 Update): no blocks; nothing SACKed, so no reneging, and HighSACKed
    ///   is cleared as the full path clears it.
    /// - DupAcks (RFC 6675 §2): SND.UNA moves, so it is no duplicate and DupAcks resets.
    /// - IsLost (RFC 6675 §4) needs SACKed segments above a hole: there are none.
    /// - RACK_detect_loss (RFC 8985 §6.2 step 5) marks a segment sent before RACK.xmit_ts.
    ///   The segments this ACK delivers were sent once and in sequence order, before every
    ///   segment still outstanding (a unit's pieces share an instant and end lower). A
    ///   RACK.xmit_ts later than an outstanding segment can only come from a retransmission
    ///   or a SACK, whose ACK takes the full path. That path then arms the reordering
    ///   timer or marks the segment lost, and either keeps the next ACKs off this one.
    /// - TLP (RFC 8985 §7.4): no probe is out, so the ACK tells it nothing.
    ///
    /// The property test `prop_plain_acks_take_the_short_path_to_the_same_state` holds the
    /// two paths to the same state and outcome over random and hostile sequences.
    pub fn is_plain_ack(&self, a: &AckInput<'_>) -> bool {
        let q = &self.q;
        self.mode != LossDetection::NewReno
            && a.sack.is_empty()
            && a.ack > q.una()
            && !self.sb.in_recovery()
            && q.sacked_segs() == 0
            && q.lost_segs() == 0
            && q.never_retransmitted_above() <= q.una()
            && self.tlp.end_seq().is_none()
            && self.reorder_timer.is_none()
    }

    /// [`Recovery::on_ack`] for an ACK [`Recovery::is_plain_ack`] admits: the cumulative
    /// ACK with RACK's deliveries, DupAcks reset, RACK's step 4 bookkeeping and an RTT
    /// sample for TLP.
    fn on_plain_ack(&mut self, now: Instant, a: &AckInput<'_>) -> Result<AckOutcome, AckRefused> {
        let use_rack = self.mode == LossDetection::Rack;
        let Recovery { q, sb, rack, .. } = self;
        let acked = q.on_cumulative_ack_with(a.ack, |s| {
            if use_rack {
                rack.on_delivered(s, now, a.tsecr, a.min_rtt);
            }
        })?;
        sb.on_plain_ack();
        if use_rack {
            rack.update_reo_wnd(q.una(), q.nxt(), false, false);
            if acked.rtt_sent.is_some() {
                self.tlp.on_rtt_sample();
            }
        }
        Ok(AckOutcome {
            acked,
            ..AckOutcome::default()
        })
    }

    /// [`Recovery::on_ack`]'s full path, for any ACK.
    fn on_any_ack(&mut self, now: Instant, a: &AckInput<'_>) -> Result<AckOutcome, AckRefused> {
        let Recovery {
            q,
            sb,
            nr,
            rack,
            tlp,
            mode,
            reorder_timer,
        } = self;
        let prior_una = q.una();
        let had_outstanding = q.outstanding() > 0;
        let mut out = AckOutcome::default();
        if *mode == LossDetection::NewReno {
            let acked = q.on_cumulative_ack(a.ack)?;
            // RFC 5681 §2 (a) and (d); the caller checked (b), (c) and (e).
            let duplicate = a.dup_eligible && had_outstanding && a.ack == prior_una;
            out.newreno = nr.on_ack(q, &acked, duplicate);
            match out.newreno {
                NewRenoEvent::Enter { retransmit } => {
                    out.entered = true;
                    out.retransmit = Some(retransmit);
                }
                NewRenoEvent::Partial { retransmit, .. } => out.retransmit = Some(retransmit),
                NewRenoEvent::Full => out.exited = Some(Phase::Fast),
                NewRenoEvent::RtoDone => out.exited = Some(Phase::Rto),
                _ => {}
            }
            out.acked = acked;
            out.duplicate = duplicate;
            return Ok(out);
        }
        let use_rack = *mode == LossDetection::Rack;
        let r = sb.on_ack(q, a.ack, a.sack, |s| {
            if use_rack {
                rack.on_delivered(s, now, a.tsecr, a.min_rtt);
            }
        })?;
        out.acked = r.acked;
        out.sack = r.sack;
        out.duplicate = r.duplicate;
        out.reneging = r.reneging;
        out.exited = r.exited;
        let enter = if use_rack {
            // RFC 8985 §6.2 steps 4 and 5.
            rack.update_reo_wnd(
                q.una(),
                q.nxt(),
                out.sack.dsack.is_some(),
                r.exited.is_some(),
            );
            let srtt = a.srtt.unwrap_or(Duration::ZERO);
            let reo = rack.reo_wnd(sb.in_recovery(), q.sacked_segs(), a.min_rtt, srtt);
            let loss = rack.detect_loss(q, now, reo);
            *reorder_timer = loss.timer;
            out.reorder_timer = loss.timer;
            out.newly_lost = loss.lost;
            // Linux tcp_time_to_recover with RACK: a loss is proven.
            !sb.in_recovery() && loss.lost > 0
        } else {
            out.newly_lost = sb.update_lost(q);
            sb.should_enter_recovery(q)
        };
        if use_rack {
            // RFC 8985 §7.4, before a new recovery resets the episode (Linux calls
            // tcp_process_tlp_ack before tcp_fastretrans_alert).
            let dup_no_sack =
                a.dup_eligible && had_outstanding && a.ack == prior_una && a.sack.is_empty();
            out.tlp = tlp.on_ack(a.ack, out.sack.dsack, dup_no_sack);
            if out.acked.rtt_sent.is_some() || out.sack.rtt_sent.is_some() {
                tlp.on_rtt_sample();
            }
        }
        if enter {
            out.entered = true;
            // RFC 6675 §5 (4.3) marks HighACK + 1 lost; with RACK, RACK's marks stand.
            out.retransmit = sb.enter_recovery(q, !use_rack);
            // RFC 8985 §7.1: reset TLP on entering fast recovery.
            tlp.reset();
        }
        Ok(out)
    }

    /// The reordering timer fired: RACK_detect_loss again (RFC 8985 §6.2 step 5), and fast
    /// recovery if it found a loss.
    pub fn on_reorder_timeout(
        &mut self,
        now: Instant,
        srtt: Option<Duration>,
        min_rtt: Duration,
    ) -> ReorderTimeout {
        let mut r = ReorderTimeout::default();
        if self.mode != LossDetection::Rack {
            self.reorder_timer = None;
            return r;
        }
        let srtt = srtt.unwrap_or(Duration::ZERO);
        let reo = self
            .rack
            .reo_wnd(self.sb.in_recovery(), self.q.sacked_segs(), min_rtt, srtt);
        r.loss = self.rack.detect_loss(&mut self.q, now, reo);
        self.reorder_timer = r.loss.timer;
        if !self.sb.in_recovery() && r.loss.lost > 0 {
            r.entered = true;
            self.sb.enter_recovery(&mut self.q, false);
            self.tlp.reset();
        }
        r
    }

    /// What to send next while cwnd allows (`new_data_ok`: unsent data the peer's window
    /// takes). In RFC 6675 fast recovery (SACK mode): NextSeg rules 1-3. Otherwise (after
    /// an RTO, with RACK, with NewReno): the first segment lost and not yet retransmitted
    /// ([`NextSeg::Retransmit`] with `rule` 0, Linux `tcp_xmit_retransmit_queue`), else new
    /// data.
    pub fn next_seg(&self, new_data_ok: bool) -> Option<NextSeg> {
        if self.mode == LossDetection::Sack && self.sb.phase() == Phase::Fast {
            return self.sb.next_seg(&self.q, new_data_ok);
        }
        if let Some(s) = self.q.iter().find(|s| !s.sacked() && !s.in_flight()) {
            return Some(NextSeg::Retransmit {
                seq: s.seq(),
                len: s.seq_len(),
                rule: 0,
            });
        }
        new_data_ok.then_some(NextSeg::NewData)
    }

    /// The retransmission timer fired (RFC 6298 §5.4-5.6 are the caller's): every segment
    /// is lost and SACK information is dropped (RFC 2018 §8, RFC 6675 §5.1), `recover` /
    /// RecoveryPoint = SND.NXT (RFC 6582 §3.2 step 4), the TLP episode and the reordering
    /// timer end (RFC 8985 §7.1).
    pub fn on_rto(&mut self) {
        match self.mode {
            LossDetection::NewReno => self.nr.on_rto(&mut self.q),
            _ => self.sb.on_rto(&mut self.q),
        }
        self.tlp.reset();
        self.reorder_timer = None;
    }

    /// When to fire the tail loss probe (RFC 8985 §7.2), in RACK mode, after new data was
    /// sent or new data acknowledged; `None`: arm only the RTO.
    pub fn pto_deadline(
        &self,
        now: Instant,
        srtt: Option<Duration>,
        rto_deadline: Option<Instant>,
    ) -> Option<Instant> {
        if self.mode != LossDetection::Rack {
            return None;
        }
        let smss = self.sb.smss();
        self.tlp.arm(
            now,
            self.phase() != Phase::Open,
            srtt,
            self.q.outstanding(),
            smss,
            rto_deadline,
        )
    }

    /// The PTO fired: what to probe with (RFC 8985 §7.3).
    pub fn on_pto(&self, new_data_ok: bool) -> Probe {
        self.tlp.on_pto(&self.q, new_data_ok)
    }

    /// The probe was sent (after [`Recovery::on_send`] or [`Recovery::on_retransmit`]).
    pub fn on_probe_sent(&mut self, retransmission: bool) {
        self.tlp.on_probe_sent(self.q.nxt(), retransmission);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MSS: u32 = 1000;

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }
    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
    fn blk(l: u32, r: u32) -> SackBlock {
        SackBlock {
            left: SeqNumber(l),
            right: SeqNumber(r),
        }
    }
    fn input(ack: u32, sack: &[SackBlock]) -> AckInput<'_> {
        AckInput {
            ack: SeqNumber(ack),
            sack,
            dup_eligible: true,
            tsecr: None,
            srtt: Some(ms(50)),
            min_rtt: ms(40),
        }
    }
    fn sent(mode: LossDetection, n: u32) -> Recovery {
        let mut r = Recovery::new(64, SeqNumber(0), MSS, mode);
        for i in 0..n {
            r.on_send(r.queue().nxt(), MSS, false, t(u64::from(i)))
                .unwrap();
        }
        r
    }

    #[test]
    fn rfc6675_5_sack_mode_enters_on_three_sacked_and_retransmits_head() {
        let mut r = sent(LossDetection::Sack, 6);
        let o = r.on_ack(t(60), &input(0, &[blk(1000, 2000)])).unwrap();
        assert!(o.duplicate && !o.entered);
        r.on_ack(t(61), &input(0, &[blk(1000, 3000)])).unwrap();
        let o = r.on_ack(t(62), &input(0, &[blk(1000, 4000)])).unwrap();
        assert!(o.entered);
        assert_eq!(o.retransmit, Some(SeqNumber(0)));
        assert_eq!(r.phase(), Phase::Fast);
        assert_eq!(
            r.next_seg(false),
            Some(NextSeg::Retransmit {
                seq: SeqNumber(0),
                len: 1000,
                rule: 1
            })
        );
        r.on_retransmit(SeqNumber(0), t(63)).unwrap();
        let o = r.on_ack(t(100), &input(6000, &[])).unwrap();
        assert_eq!(o.exited, Some(Phase::Fast));
    }

    #[test]
    fn rfc8985_rack_mode_marks_loss_by_time_and_enters_recovery() {
        // Sent at 0..5 ms; at 60 ms segment 3 (sent at 3) is SACKed: RACK.rtt = 57 ms,
        // reo_wnd = 10 ms (min_RTT 40 / 4). Segment i < 3's deadline is i + 57 + 10 ms.
        let mut r = sent(LossDetection::Rack, 6);
        let o = r.on_ack(t(60), &input(0, &[blk(3000, 4000)])).unwrap();
        assert_eq!(o.newly_lost, 0);
        assert_eq!(
            o.reorder_timer,
            Some(t(2 + 57 + 10)),
            "the latest of segments 0-2"
        );
        assert!(!o.entered);
        let to = r.on_reorder_timeout(t(69), Some(ms(50)), ms(40));
        assert_eq!((to.loss.lost, to.entered), (3, true));
        assert_eq!(r.phase(), Phase::Fast);
        assert_eq!(
            r.next_seg(false),
            Some(NextSeg::Retransmit {
                seq: SeqNumber(0),
                len: 1000,
                rule: 0
            })
        );
        assert_eq!(r.pipe(), 2000, "segments 4 and 5");
    }

    #[test]
    fn rfc6582_newreno_mode_partial_and_full_ack() {
        let mut r = sent(LossDetection::NewReno, 4);
        for _ in 0..2 {
            r.on_ack(t(50), &input(0, &[])).unwrap();
        }
        let o = r.on_ack(t(51), &input(0, &[])).unwrap();
        assert!(o.entered);
        assert_eq!(o.retransmit, Some(SeqNumber(0)));
        r.on_retransmit(SeqNumber(0), t(52)).unwrap();
        let o = r.on_ack(t(90), &input(2000, &[])).unwrap();
        assert_eq!(o.retransmit, Some(SeqNumber(2000)));
        let o = r.on_ack(t(130), &input(4000, &[])).unwrap();
        assert_eq!(o.exited, Some(Phase::Fast));
        // SACK blocks from a peer that did not negotiate SACK are not looked at.
        assert_eq!(o.sack, SackReport::default());
    }

    #[test]
    fn rfc8985_7_tlp_probe_and_repaired_loss() {
        let mut r = sent(LossDetection::Rack, 2);
        r.on_rtt_sample();
        let pto = r.pto_deadline(t(1), Some(ms(30)), Some(t(500)));
        assert_eq!(pto, Some(t(61)));
        assert_eq!(
            r.on_pto(false),
            Probe::Retransmit {
                seq: SeqNumber(1000)
            }
        );
        r.on_retransmit(SeqNumber(1000), t(61)).unwrap();
        r.on_probe_sent(true);
        assert_eq!(r.tlp().end_seq(), Some(SeqNumber(2000)));
        // An ACK exactly at TLP.end_seq for a retransmitted probe tells nothing yet.
        let o = r.on_ack(t(90), &input(2000, &[])).unwrap();
        assert_eq!(o.tlp, TlpAck::Pending);
        // New data, then an ACK beyond TLP.end_seq.
        r.on_send(r.queue().nxt(), MSS, false, t(91)).unwrap();
        let o = r.on_ack(t(130), &input(3000, &[])).unwrap();
        assert_eq!(o.tlp, TlpAck::LossRepaired);
    }

    #[test]
    fn rfc2018_8_rto_clears_sack_and_keeps_data() {
        let mut r = sent(LossDetection::Rack, 4);
        r.on_ack(t(60), &input(0, &[blk(1000, 3000)])).unwrap();
        r.on_rto();
        assert_eq!(r.phase(), Phase::Rto);
        assert_eq!(r.queue().sacked_segs(), 0);
        assert_eq!(r.queue().len(), 4);
        assert_eq!(r.pipe(), 0);
        let mut resent = Vec::new();
        while let Some(NextSeg::Retransmit { seq, .. }) = r.next_seg(false) {
            r.on_retransmit(seq, t(300)).unwrap();
            resent.push(seq.get());
        }
        assert_eq!(resent, [0, 1000, 2000, 3000], "SACKed data is sent again");
        assert_eq!(r.pipe(), 4000);
    }

    #[test]
    fn rfc5961_5_2_ack_above_snd_nxt_refused_in_every_mode() {
        for mode in [
            LossDetection::NewReno,
            LossDetection::Sack,
            LossDetection::Rack,
        ] {
            let mut r = sent(mode, 2);
            assert_eq!(
                r.on_ack(t(9), &input(2001, &[])),
                Err(AckRefused::AboveSndNxt)
            );
            assert_eq!(r.queue().una(), SeqNumber(0));
        }
    }

    /// One step of a random connection.
    #[derive(Clone, Debug)]
    enum Op {
        Send {
            len: u32,
            fin: bool,
        },
        Ack {
            ack: Edge,
            blocks: Vec<(Edge, Edge)>,
            raw: Option<(u32, u32)>,
            dup: bool,
        },
        NextSeg {
            new_data: bool,
        },
        Retransmit {
            pick: usize,
        },
        Rto,
        Reorder,
        Pto {
            new_data: bool,
        },
        Wait {
            ms: u64,
        },
    }

    /// A sequence number relative to SND.UNA: a fraction (per mille) of what is
    /// outstanding (plausible), or any offset (hostile: below SND.UNA, beyond SND.NXT).
    #[derive(Clone, Copy, Debug)]
    enum Edge {
        Frac(u16),
        Off(i64),
    }

    impl Edge {
        fn at(self, r: &Recovery) -> SeqNumber {
            let q = r.queue();
            match self {
                Edge::Frac(f) => q.una() + q.outstanding() * usize::from(f) / 1000,
                Edge::Off(o) => SeqNumber(q.una().get().wrapping_add(o as u32)),
            }
        }
    }

    fn op() -> impl Strategy<Value = Op> {
        let off = || -3000i64..12_000;
        let ack = prop_oneof![
            2 => Just(Edge::Frac(0)),
            2 => (0u16..=1000).prop_map(Edge::Frac),
            1 => off().prop_map(Edge::Off),
        ];
        let block = prop_oneof![
            3 => (1u16..1000, 1u16..300)
                .prop_map(|(a, l)| (Edge::Frac(a), Edge::Frac((a + l).min(1000)))),
            1 => (off(), off()).prop_map(|(l, h)| (Edge::Off(l), Edge::Off(h))),
        ];
        prop_oneof![
            3 => (1u32..2500, prop::bool::weighted(0.02)).prop_map(|(len, fin)| Op::Send { len, fin }),
            4 => (
                ack,
                prop::collection::vec(block, 0..5),
                prop::option::weighted(0.1, (any::<u32>(), any::<u32>())),
                any::<bool>()
            )
                .prop_map(|(ack, blocks, raw, dup)| Op::Ack { ack, blocks, raw, dup }),
            2 => any::<bool>().prop_map(|new_data| Op::NextSeg { new_data }),
            1 => any::<usize>().prop_map(|pick| Op::Retransmit { pick }),
            1 => Just(Op::Rto),
            1 => Just(Op::Reorder),
            1 => any::<bool>().prop_map(|new_data| Op::Pto { new_data }),
            2 => (0u64..80).prop_map(|ms| Op::Wait { ms }),
        ]
    }

    /// `a` lies in `[lo, hi]` in sequence order.
    fn within(a: SeqNumber, lo: SeqNumber, hi: SeqNumber) -> bool {
        a - lo <= hi - lo
    }

    fn check(r: &Recovery, model_nxt: SeqNumber) -> Result<(), TestCaseError> {
        let q = r.queue();
        let (una, nxt) = (q.una(), q.nxt());
        prop_assert_eq!(nxt, model_nxt, "SND.NXT is what was sent");
        prop_assert!(q.len() <= q.capacity());
        // Gapless, sent, inside [SND.UNA, SND.NXT).
        let mut at = una;
        let (mut sacked, mut sacked_segs, mut lost, mut flight) = (0, 0, 0, 0);
        for s in q.iter() {
            prop_assert_eq!(s.seq(), at);
            prop_assert!(s.seq_len() > 0);
            at = s.end();
            prop_assert!(within(at, una, nxt));
            if s.sacked() {
                prop_assert!(!s.lost() && !s.retransmitted() && !s.in_flight());
                sacked += s.seq_len();
                sacked_segs += s.pcount() as usize;
            }
            if s.lost() {
                lost += s.pcount() as usize;
            }
            if s.in_flight() {
                flight += s.seq_len();
            }
            prop_assert!(s.first_tx() <= s.last_tx());
        }
        prop_assert_eq!(at, nxt);
        prop_assert!(within(q.never_retransmitted_above(), una, nxt));
        prop_assert_eq!(q.sacked_bytes(), sacked);
        prop_assert_eq!(q.sacked_segs(), sacked_segs);
        prop_assert_eq!(q.lost_segs(), lost);
        prop_assert_eq!(q.in_flight(), flight);
        prop_assert_eq!(r.scoreboard().set_pipe(q), flight);
        prop_assert!(r.pipe() <= q.outstanding(), "pipe <= outstanding");
        // Nothing beyond SND.NXT is referenced.
        if let Some(h) = r.scoreboard().high_sacked() {
            prop_assert!(within(h, una, nxt) && h != una);
        }
        prop_assert!(r.scoreboard().high_rxt() <= nxt);
        if let Some(p) = r.scoreboard().recovery_point() {
            prop_assert!(p <= nxt);
        }
        prop_assert!(r.newreno().recover() <= nxt);
        if let Some(e) = r.rack().end_seq() {
            prop_assert!(e <= nxt);
        }
        if let Some(f) = r.rack().fack() {
            prop_assert!(f <= nxt);
        }
        if let Some(e) = r.tlp().end_seq() {
            prop_assert!(e <= nxt);
        }
        for new_data in [false, true] {
            if let Some(NextSeg::Retransmit { seq, len, .. }) = r.next_seg(new_data) {
                prop_assert!(within(seq, una, nxt) && seq != nxt);
                prop_assert!(within(seq + len, una, nxt));
                prop_assert!(q.position(seq).is_some(), "a sent segment");
            }
        }
        Ok(())
    }

    /// Applies one step to `r` (and to the model's SND.NXT) and checks the invariants. Every
    /// ACK also goes through the full path on a copy of `r`: both must leave the same state
    /// and return the same outcome (`plain` counts the ACKs the short path took).
    fn apply(
        r: &mut Recovery,
        op: Op,
        now: &mut Instant,
        model_nxt: &mut SeqNumber,
        plain: &mut u32,
    ) -> Result<(), TestCaseError> {
        let srtt = Some(ms(20));
        *now += Duration::from_micros(100);
        let now_v = *now;
        match op {
            Op::Send { len, fin } => {
                if r.on_send(*model_nxt, len, fin, now_v).is_ok() {
                    *model_nxt += len as usize + usize::from(fin);
                }
            }
            Op::Ack {
                ack,
                blocks,
                raw,
                dup,
            } => {
                let mut b: Vec<SackBlock> = blocks
                    .iter()
                    .map(|&(l, h)| SackBlock {
                        left: l.at(r),
                        right: h.at(r),
                    })
                    .collect();
                if let Some((l, h)) = raw {
                    b.insert(
                        0,
                        SackBlock {
                            left: SeqNumber(l),
                            right: SeqNumber(h),
                        },
                    );
                }
                let a = AckInput {
                    ack: ack.at(r),
                    sack: &b,
                    dup_eligible: dup,
                    tsecr: Some(Instant::from_nanos(
                        now_v.as_nanos().saturating_sub(5_000_000),
                    ))
                    .filter(|_| dup),
                    srtt,
                    min_rtt: ms(1),
                };
                let before = r.queue().una();
                *plain += u32::from(r.is_plain_ack(&a));
                let mut full = r.clone();
                let full_out = full.on_any_ack(now_v, &a);
                let out = r.on_ack(now_v, &a);
                prop_assert_eq!(
                    &out,
                    &full_out,
                    "the short path's outcome is the full path's"
                );
                prop_assert_eq!(
                    format!("{r:?}"),
                    format!("{full:?}"),
                    "the short path leaves the full path's state"
                );
                match out {
                    Ok(o) => {
                        prop_assert_eq!(o.acked.bytes, r.queue().una() - before);
                        prop_assert!(o.sack.refused.len() <= 4);
                    }
                    Err(_) => prop_assert_eq!(r.queue().una(), before),
                }
            }
            Op::NextSeg { new_data } => {
                if let Some(NextSeg::Retransmit { seq, .. }) = r.next_seg(new_data) {
                    prop_assert!(r.on_retransmit(seq, now_v).is_ok());
                }
            }
            Op::Retransmit { pick } => {
                let q = r.queue();
                if !q.is_empty() {
                    let s = *q.get(pick % q.len()).unwrap();
                    let res = r.on_retransmit(s.seq(), now_v);
                    prop_assert_eq!(res.is_err(), s.sacked());
                }
            }
            Op::Rto => r.on_rto(),
            Op::Reorder => {
                let _ = r.on_reorder_timeout(now_v, srtt, ms(1));
            }
            Op::Pto { new_data } => match r.on_pto(new_data) {
                Probe::NewData => {
                    if r.on_send(*model_nxt, MSS, false, now_v).is_ok() {
                        *model_nxt += MSS as usize;
                        r.on_probe_sent(false);
                    }
                }
                Probe::Retransmit { seq } => {
                    prop_assert!(r.on_retransmit(seq, now_v).is_ok());
                    r.on_probe_sent(true);
                }
                Probe::Skip(_) => r.on_rtt_sample(),
            },
            Op::Wait { ms: d } => *now += ms(d),
        }
        check(r, *model_nxt)
    }

    /// Mostly what a healthy connection sees (sends, ACKs that move SND.UNA, some of them
    /// several segments at once, time passing), with every kind of trouble now and then.
    fn mostly_plain_op() -> impl Strategy<Value = Op> {
        let plain_ack = (1u16..=1000).prop_map(|f| Op::Ack {
            ack: Edge::Frac(f),
            blocks: Vec::new(),
            raw: None,
            dup: false,
        });
        prop_oneof![
            6 => (1u32..2500).prop_map(|len| Op::Send { len, fin: false }),
            8 => plain_ack,
            3 => (0u64..30).prop_map(|ms| Op::Wait { ms }),
            2 => op(),
        ]
    }

    proptest! {
        #[test]
        fn prop_hostile_acks_and_sacks_keep_the_invariants(
            mode in prop_oneof![
                Just(LossDetection::NewReno),
                Just(LossDetection::Sack),
                Just(LossDetection::Rack)
            ],
            start in prop_oneof![any::<u32>(), (0u32..20_000).prop_map(|d| u32::MAX - d)],
            cap in 1usize..24,
            ops in prop::collection::vec(op(), 1..80),
        ) {
            let start = SeqNumber(start);
            let mut r = Recovery::new(cap, start, MSS, mode);
            let (mut model_nxt, mut now, mut plain) = (start, t(1), 0);
            for op in ops {
                apply(&mut r, op, &mut now, &mut model_nxt, &mut plain)?;
            }
        }

    }

    /// The two paths agree over runs that are mostly plain ACKs, and the short path is
    /// really taken: across the runs, by at least a quarter of the ACKs (each run's own
    /// share depends on the trouble drawn for it).
    #[test]
    fn prop_plain_acks_take_the_short_path_to_the_same_state() {
        use proptest::test_runner::TestRunner;
        use std::cell::Cell;
        let (acks, plain) = (Cell::new(0u64), Cell::new(0u64));
        let case = (
            prop_oneof![Just(LossDetection::Sack), Just(LossDetection::Rack)],
            prop_oneof![any::<u32>(), (0u32..20_000).prop_map(|d| u32::MAX - d)],
            4usize..48,
            prop::collection::vec(mostly_plain_op(), 20..200),
        );
        TestRunner::default()
            .run(&case, |(mode, start, cap, ops)| {
                let start = SeqNumber(start);
                let mut r = Recovery::new(cap, start, MSS, mode);
                let (mut model_nxt, mut now, mut n) = (start, t(1), 0);
                for op in ops {
                    acks.set(acks.get() + u64::from(matches!(op, Op::Ack { .. })));
                    apply(&mut r, op, &mut now, &mut model_nxt, &mut n)?;
                }
                plain.set(plain.get() + u64::from(n));
                Ok(())
            })
            .unwrap();
        assert!(
            plain.get() * 4 >= acks.get(),
            "{} of {} ACKs took the short path",
            plain.get(),
            acks.get()
        );
    }

    /// The short path is taken where it should be, and left where it must not be.
    #[test]
    fn plain_ack_is_the_in_order_ack_outside_recovery() {
        let mut r = sent(LossDetection::Rack, 4);
        assert!(r.is_plain_ack(&input(1000, &[])));
        assert!(!r.is_plain_ack(&input(0, &[])), "SND.UNA does not move");
        assert!(
            !r.is_plain_ack(&input(1000, &[blk(2000, 3000)])),
            "SACK blocks"
        );
        let o = r.on_ack(t(50), &input(1000, &[])).unwrap();
        assert_eq!((o.acked.bytes, o.acked.rtt_sent), (1000, Some(t(0))));
        // A SACK leaves a hole: the next ACKs take the full path while anything is SACKed.
        r.on_ack(t(51), &input(1000, &[blk(2000, 3000)])).unwrap();
        assert!(!r.is_plain_ack(&input(2000, &[])));
        r.on_ack(t(52), &input(4000, &[])).unwrap();
        // A retransmission outstanding keeps the full path until it is acknowledged. Then
        // RACK finds the segments sent before the retransmission late, and its reordering
        // timer keeps the full path until they are acknowledged too.
        let mut r = sent(LossDetection::Rack, 3);
        r.on_retransmit(SeqNumber(0), t(10)).unwrap();
        assert!(!r.is_plain_ack(&input(1000, &[])));
        let o = r.on_ack(t(60), &input(1000, &[])).unwrap();
        assert!(o.reorder_timer.is_some());
        assert!(!r.is_plain_ack(&input(2000, &[])));
        r.on_ack(t(61), &input(3000, &[])).unwrap();
        r.on_send(r.queue().nxt(), MSS, false, t(62)).unwrap();
        assert!(
            r.is_plain_ack(&input(4000, &[])),
            "everything since was sent once"
        );
        assert!(!sent(LossDetection::NewReno, 2).is_plain_ack(&input(1000, &[])));
    }
}
