//! RFC 6675's scoreboard over the retransmission queue: SACK blocks applied to the queue's
//! segments, IsLost, SetPipe, NextSeg, and the loss-recovery phase.
//!
//! Read first: RFC 6675 §2 (definitions, the SACK duplicate ACK), §4 (Update, IsLost,
//! SetPipe, NextSeg), §5 and §5.1 (entering and leaving recovery, the RTO); RFC 2018 §8
//! (reneging: SACKed data is kept until cumulatively acknowledged, and the SACK bits are
//! cleared after an RTO); RFC 2883 §4 (telling a D-SACK block); Linux
//! `tcp_sacktag_write_queue`, `tcp_is_sackblock_valid`, `tcp_check_dsack` and
//! `tcp_check_sack_reneging` in `net/ipv4/tcp_input.c`.
//!
//! The scoreboard holds no copy of the segments: the SACKED, LOST and RETRANSMITTED bits
//! live in the [`RtxQueue`]'s [`SentSeg`]s, and every function here takes the queue. A
//! SACK edge inside a segment splits it (Linux `tcp_fragment` from `tcp_match_skb_to_sack`)
//! when the queue has a free slot; when it has none, the partly covered segment stays
//! un-SACKed, which only makes the sender more conservative.
//!
//! RFC 6675 names octets; this scoreboard works on segments. Where the RFC returns "one
//! segment of up to SMSS octets starting with S", [`NextSeg`] returns the queue segment
//! starting at S: the caller splits it at `S + SMSS` first ([`RtxQueue::split`]) if it is
//! longer (a TSO-sized send).

use arrayvec::ArrayVec;

use super::rtx::{AckRefused, Acked, RtxQueue, RtxRefused, SentSeg, MAX_OUTSTANDING};
use crate::reason::reason_enum;
use crate::seq::SeqNumber;
use crate::time::Instant;
use crate::wire::{SackBlock, MAX_SACK_BLOCKS};

/// RFC 6675 §2 DupThresh (and RFC 5681 §3.2's three duplicate ACKs).
pub const DUP_THRESH: usize = 3;

/// Where loss recovery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Phase {
    /// No recovery.
    #[default]
    Open,
    /// Fast recovery (RFC 6675 §5, RFC 6582 §3.2), until a cumulative ACK covers the
    /// recovery point.
    Fast,
    /// After an RTO (RFC 6675 §5.1, RFC 6582 §3.2 step 4): no new fast recovery until a
    /// cumulative ACK covers the recovery point.
    Rto,
}

reason_enum! {
    /// Why a SACK block was ignored (the caller counts it, as for every hostile input).
    pub enum SackRefused {
        /// Left edge not before the right edge: empty or reversed (RFC 2018 §3; Linux
        /// `tcp_is_sackblock_valid` calls the interpretation ambiguous).
        Reversed = "sack_reversed",
        /// Reaches beyond SND.NXT: data never sent (RFC 2018 §8, Linux
        /// `tcp_is_sackblock_valid`).
        BeyondSndNxt = "sack_beyond_snd_nxt",
        /// Starts at or below SND.UNA and is no D-SACK: the receiver has the octet at
        /// SND.UNA, so it should have acknowledged it cumulatively.
        BelowSndUna = "sack_below_snd_una",
        /// A D-SACK block (RFC 2883 §4) that straddles SND.UNA, reaches beyond SND.NXT, or
        /// lies more than the largest window below SND.UNA.
        DsackInvalid = "dsack_invalid",
    }
}

/// What the SACK blocks of one ACK did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SackReport {
    /// Sequence space newly SACKed.
    pub newly_sacked_bytes: usize,
    /// Segments newly SACKed (after splits).
    pub newly_sacked_segs: u32,
    /// The first block was a valid D-SACK (RFC 2883 §4): it reports data received twice
    /// and is not applied to the scoreboard.
    pub dsack: Option<SackBlock>,
    /// Each block ignored, with why (at most [`MAX_SACK_BLOCKS`]; blocks past that many
    /// are not looked at).
    pub refused: ArrayVec<(SackBlock, SackRefused), MAX_SACK_BLOCKS>,
    /// Segments a block only partly covered that stayed un-SACKed for lack of a free
    /// slot to split them.
    pub unsplit: u8,
    /// The newest send time among the newly SACKed segments never retransmitted: an RTT
    /// sample (Linux `tcp_sacktag_one`'s `first_sackt` / `last_sackt`).
    pub rtt_sent: Option<Instant>,
}

/// One ACK as the scoreboard saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScoreboardAck {
    /// What the cumulative ACK acknowledged.
    pub acked: Acked,
    /// What the SACK blocks did.
    pub sack: SackReport,
    /// A duplicate ACK per RFC 6675 §2: SEG.ACK = HighACK with new SACK information.
    pub duplicate: bool,
    /// The ACK stops at a segment the peer had SACKed: the receiver may have reneged
    /// (RFC 2018 §8; Linux `tcp_check_sack_reneging`). Nothing is discarded; counted.
    pub reneging: bool,
    /// Recovery ended with this ACK: it covers the recovery point (RFC 6675 §5 (A)).
    pub exited: Option<Phase>,
}

/// What NextSeg (RFC 6675 §4) says to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextSeg {
    /// Retransmit the queue segment starting at `seq` (`len` is its sequence space),
    /// chosen by `rule` (1: deemed lost; 3: un-SACKed below the highest SACK).
    Retransmit {
        /// Its first sequence number.
        seq: SeqNumber,
        /// Its sequence space.
        len: usize,
        /// The NextSeg rule that chose it: 1 or 3.
        rule: u8,
    },
    /// Rule 2: send one segment of new data from SND.NXT.
    NewData,
}

/// The scoreboard's own state (the per-segment state is in the queue).
#[derive(Clone, Debug)]
pub struct Scoreboard {
    smss: u32,
    phase: Phase,
    recovery_point: SeqNumber,
    high_rxt: SeqNumber,
    high_sacked: Option<SeqNumber>,
    dupacks: u32,
}

impl Scoreboard {
    /// A scoreboard for a connection with sender MSS `smss` (RFC 5681 SMSS), starting at
    /// `start` (the queue's SND.UNA).
    pub fn new(smss: u32, start: SeqNumber) -> Self {
        Scoreboard {
            smss,
            phase: Phase::Open,
            recovery_point: start,
            high_rxt: start,
            high_sacked: None,
            dupacks: 0,
        }
    }

    /// SMSS, used by IsLost's byte rule.
    pub fn smss(&self) -> u32 {
        self.smss
    }
    /// Sets SMSS (after path MTU changes).
    pub fn set_smss(&mut self, smss: u32) {
        self.smss = smss;
    }
    /// The recovery phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }
    /// In fast or RTO recovery.
    pub fn in_recovery(&self) -> bool {
        self.phase != Phase::Open
    }
    /// RecoveryPoint (RFC 6675 §2), as the exclusive SND.NXT recorded at entry: recovery
    /// ends when SND.UNA reaches it. `None` when not in recovery.
    pub fn recovery_point(&self) -> Option<SeqNumber> {
        self.in_recovery().then_some(self.recovery_point)
    }
    /// One past the highest octet retransmitted in this recovery (RFC 6675 HighRxt + 1).
    pub fn high_rxt(&self) -> SeqNumber {
        self.high_rxt
    }
    /// One past the highest octet SACKed and not yet cumulatively acknowledged.
    pub fn high_sacked(&self) -> Option<SeqNumber> {
        self.high_sacked
    }
    /// DupAcks (RFC 6675 §2).
    pub fn dupacks(&self) -> u32 {
        self.dupacks
    }

    /// Processes one ACK (RFC 6675 §5, "Upon the receipt of any ACK"): the cumulative ACK,
    /// then Update() with its SACK blocks, DupAcks, and leaving recovery when the ACK
    /// covers RecoveryPoint. `delivered` is called for each newly delivered segment in
    /// sequence order (for RACK). Loss marking and entering recovery are separate steps
    /// ([`Scoreboard::update_lost`], [`Scoreboard::should_enter_recovery`]).
    pub fn on_ack<F: FnMut(&SentSeg)>(
        &mut self,
        q: &mut RtxQueue,
        ack: SeqNumber,
        blocks: &[SackBlock],
        mut delivered: F,
    ) -> Result<ScoreboardAck, AckRefused> {
        let had_outstanding = q.outstanding() > 0;
        let acked = q.on_cumulative_ack_with(ack, &mut delivered)?;
        if q.sacked_segs() == 0 {
            self.high_sacked = None;
        }
        // Linux tcp_clean_rtx_queue: the ACK stops at a SACKed segment.
        let reneging = q.first().is_some_and(|s| s.sacked());
        let sack = self.apply_sack(q, ack, blocks, &mut delivered);
        // RFC 6675 §2: a duplicate is an ACK at HighACK carrying new SACK information.
        let duplicate = had_outstanding && acked.bytes == 0 && sack.newly_sacked_bytes > 0;
        // RFC 6675 §5: a cumulative ACK resets DupAcks; a duplicate increments it.
        if acked.bytes > 0 {
            self.dupacks = 0;
        }
        if duplicate {
            self.dupacks = self.dupacks.saturating_add(1);
        }
        let mut exited = None;
        // RFC 6675 §5 (A) and §5.1: recovery ends at a cumulative ACK for RecoveryPoint.
        if self.in_recovery() && q.una() >= self.recovery_point {
            exited = Some(self.phase);
            self.phase = Phase::Open;
        }
        Ok(ScoreboardAck {
            acked,
            sack,
            duplicate,
            reneging,
            exited,
        })
    }

    /// What [`Scoreboard::on_ack`] does for an ACK that moved SND.UNA with no SACK blocks
    /// and nothing SACKed, outside recovery (the caller made the cumulative ACK): no
    /// HighSACKed, and DupAcks back to 0 (RFC 6675 §5).
    pub fn on_plain_ack(&mut self) {
        self.high_sacked = None;
        self.dupacks = 0;
    }

    /// Update() for the SACK blocks of an ACK whose cumulative ACK (`ack`) the queue has
    /// already processed: validates each block, tells a D-SACK, and marks the segments a
    /// valid block covers as SACKed, in sequence order. At most [`MAX_SACK_BLOCKS`] blocks
    /// are looked at.
    pub fn apply_sack<F: FnMut(&SentSeg)>(
        &mut self,
        q: &mut RtxQueue,
        ack: SeqNumber,
        blocks: &[SackBlock],
        mut delivered: F,
    ) -> SackReport {
        let mut r = SackReport::default();
        let blocks = &blocks[..blocks.len().min(MAX_SACK_BLOCKS)];
        let Some(first) = blocks.first() else {
            return r;
        };
        // RFC 2883 §4 (Linux tcp_check_dsack): a D-SACK is the first block, below the
        // cumulative ACK or inside the second block.
        let is_dsack = first.left < ack
            || blocks
                .get(1)
                .is_some_and(|b| first.left >= b.left && first.right <= b.right);
        let mut valid: ArrayVec<(usize, usize), MAX_SACK_BLOCKS> = ArrayVec::new();
        for (i, b) in blocks.iter().enumerate() {
            let verdict = if i == 0 && is_dsack {
                check_dsack(q, b).map(|()| None)
            } else {
                check_sack(q, b).map(Some)
            };
            match verdict {
                Ok(Some(range)) => valid.push(range),
                Ok(None) => r.dsack = Some(*b),
                Err(why) => r.refused.push((*b, why)),
            }
        }
        // In sequence order, so `delivered` sees segments by ascending end (RFC 8985
        // §6.2 step 3 needs that order).
        valid.sort_unstable_by_key(|&(lo, _)| lo);
        for (lo, hi) in valid {
            self.sack_range(q, lo, hi, &mut delivered, &mut r);
        }
        r
    }

    /// Marks `[SND.UNA + lo, SND.UNA + hi)` SACKed, splitting at its edges.
    fn sack_range<F: FnMut(&SentSeg)>(
        &mut self,
        q: &mut RtxQueue,
        lo: usize,
        hi: usize,
        delivered: &mut F,
        r: &mut SackReport,
    ) {
        let una = q.una();
        let (left, right) = (una + lo, una + hi);
        let Some(mut idx) = q.find(left) else {
            return;
        };
        if q.get(idx).is_some_and(|s| s.seq() != left) {
            match q.split(left) {
                Ok(i) => idx = i,
                Err(_) => {
                    r.unsplit = r.unsplit.saturating_add(1);
                    idx += 1;
                }
            }
        }
        while let Some(&s) = q.get(idx) {
            if s.seq() - una >= hi {
                break;
            }
            let mut s = s;
            if s.end() - una > hi {
                if q.split(right).is_err() {
                    r.unsplit = r.unsplit.saturating_add(1);
                    break;
                }
                match q.get(idx) {
                    Some(&head) => s = head,
                    None => break,
                }
            }
            if q.mark_sacked(idx) {
                r.newly_sacked_bytes += s.seq_len();
                r.newly_sacked_segs += s.pcount();
                if !s.ever_retransmitted() {
                    r.rtt_sent = Some(r.rtt_sent.map_or(s.last_tx(), |t| t.max(s.last_tx())));
                }
                let end = s.end();
                self.high_sacked = Some(self.high_sacked.map_or(end, |h| h.max(end)));
                delivered(&s);
            }
            idx += 1;
        }
    }

    /// IsLost(seq) (RFC 6675 §4): DupThresh SACKed segments above `seq`, or more than
    /// (DupThresh - 1) * SMSS bytes SACKed above it. O(segments above `seq`).
    pub fn is_lost(&self, q: &RtxQueue, seq: SeqNumber) -> bool {
        let una = q.una();
        let off = seq - una;
        if off >= q.outstanding() {
            return false;
        }
        let thresh = (DUP_THRESH - 1) * self.smss as usize;
        let (mut segs, mut bytes) = (0, 0);
        for s in q.iter().rev() {
            let (start, end) = (s.seq() - una, s.end() - una);
            if end <= off + 1 {
                break;
            }
            if s.sacked() {
                if start > off {
                    segs += s.pcount() as usize;
                }
                bytes += end - start.max(off + 1);
                if segs >= DUP_THRESH || bytes > thresh {
                    return true;
                }
            }
        }
        false
    }

    /// The marking half of Update(): every un-SACKed segment for which IsLost holds (of its
    /// first octet) is marked lost, in one pass from the top. Returns how many were newly
    /// marked. A retransmission in flight stays in flight (RFC 6675 §4 SetPipe (b)).
    pub fn update_lost(&mut self, q: &mut RtxQueue) -> u32 {
        if q.sacked_segs() == 0 {
            return 0;
        }
        let thresh = (DUP_THRESH - 1) * self.smss as usize;
        let (mut segs, mut bytes, mut newly) = (0, 0, 0);
        for idx in (0..q.len()).rev() {
            let Some(&s) = q.get(idx) else {
                break;
            };
            if s.sacked() {
                segs += s.pcount() as usize;
                bytes += s.seq_len();
            } else if (segs >= DUP_THRESH || bytes > thresh) && !s.lost() {
                newly += u32::from(q.mark_original_lost(idx));
            }
        }
        newly
    }

    /// SetPipe() (RFC 6675 §4), computed as the RFC writes it: for each un-SACKed segment,
    /// its bytes count if it is not lost, or if it was retransmitted since. Each byte
    /// counts once (the RFC's rules (a) and (b) would count a rule 3 retransmission twice),
    /// so pipe never exceeds SND.NXT - SND.UNA. Equals [`RtxQueue::in_flight`], which the
    /// queue keeps in O(1).
    pub fn set_pipe(&self, q: &RtxQueue) -> usize {
        q.iter()
            .filter(|s| !s.sacked() && (!s.lost() || s.retransmitted()))
            .map(SentSeg::seq_len)
            .sum()
    }

    /// NextSeg() (RFC 6675 §4), rules 1 to 3; rule 4 (the rescue retransmission) is the
    /// caller's. `new_data_ok`: there is unsent data and the peer's window allows it
    /// (rule 2). HighRxt is tracked by [`Scoreboard::on_retransmit`]; a segment whose
    /// retransmission is already in flight (a TLP probe sent before recovery) is not chosen
    /// again.
    pub fn next_seg(&self, q: &RtxQueue, new_data_ok: bool) -> Option<NextSeg> {
        let una = q.una();
        let out = q.outstanding();
        let rxt = (self.high_rxt - una).min(out);
        let rxt = if self.high_rxt < una { 0 } else { rxt };
        let high_sacked = self.high_sacked.map_or(0, |h| (h - una).min(out));
        let mut rule3 = None;
        for s in q.iter() {
            let start = s.seq() - una;
            // (1.b) S2 is below the highest octet covered by a SACK.
            if start >= high_sacked {
                break;
            }
            // (1.a) S2 is above HighRxt.
            if s.sacked() || s.retransmitted() || start < rxt {
                continue;
            }
            let pick = NextSeg::Retransmit {
                seq: s.seq(),
                len: s.seq_len(),
                rule: 1,
            };
            // (1.c) IsLost(S2) (its LOST bit, set by update_lost or RACK).
            if s.lost() {
                return Some(pick);
            }
            if rule3.is_none() {
                rule3 = Some(NextSeg::Retransmit {
                    seq: s.seq(),
                    len: s.seq_len(),
                    rule: 3,
                });
            }
        }
        if new_data_ok {
            return Some(NextSeg::NewData);
        }
        rule3
    }

    /// RFC 6675 §5 steps (1) and (2): not in recovery, and DupAcks >= DupThresh or
    /// IsLost(HighACK + 1) (the octet at SND.UNA).
    pub fn should_enter_recovery(&self, q: &RtxQueue) -> bool {
        self.phase == Phase::Open
            && q.outstanding() > 0
            && (self.dupacks as usize >= DUP_THRESH || self.is_lost(q, q.una()))
    }

    /// Enters fast recovery (RFC 6675 §5 step (4)): RecoveryPoint = HighData, HighRxt =
    /// HighACK. With `mark_head`, the segment at SND.UNA is marked lost so that NextSeg
    /// rule 1 retransmits it first (step (4.3); Linux `tcp_mark_head_lost`). Returns its
    /// sequence number.
    pub fn enter_recovery(&mut self, q: &mut RtxQueue, mark_head: bool) -> Option<SeqNumber> {
        self.phase = Phase::Fast;
        self.recovery_point = q.nxt();
        self.high_rxt = q.una();
        if mark_head {
            q.mark_original_lost(0);
        }
        q.first().map(SentSeg::seq)
    }

    /// Records a retransmission of the segment starting at `seq` (the queue's
    /// [`RtxQueue::on_retransmit`]); during fast recovery HighRxt moves to its end (RFC
    /// 6675 §5 (C.2)). Returns its index.
    pub fn on_retransmit(
        &mut self,
        q: &mut RtxQueue,
        seq: SeqNumber,
        now: Instant,
    ) -> Result<usize, RtxRefused> {
        let idx = q.on_retransmit(seq, now)?;
        if self.phase == Phase::Fast {
            if let Some(s) = q.get(idx) {
                if s.end() > self.high_rxt || self.high_rxt < q.una() {
                    self.high_rxt = s.end();
                }
            }
        }
        Ok(idx)
    }

    /// The retransmission timer expired (RFC 6675 §5.1): fast recovery ends, RecoveryPoint
    /// = HighData and no new recovery starts until it is cumulatively acknowledged; every
    /// SACK bit is cleared and every segment marked lost (RFC 2018 §8: the receiver may
    /// have reneged, so SACKed data is sent again rather than trusted).
    pub fn on_rto(&mut self, q: &mut RtxQueue) {
        q.clear_sacks_all_lost();
        self.high_sacked = None;
        self.dupacks = 0;
        self.high_rxt = q.una();
        if q.outstanding() > 0 {
            self.phase = Phase::Rto;
            self.recovery_point = q.nxt();
        }
    }
}

/// RFC 2018 §8 and Linux `tcp_is_sackblock_valid`: a SACK block must lie in
/// `(SND.UNA, SND.NXT]`. Returns its offsets from SND.UNA.
fn check_sack(q: &RtxQueue, b: &SackBlock) -> Result<(usize, usize), SackRefused> {
    if b.left >= b.right {
        return Err(SackRefused::Reversed);
    }
    let una = q.una();
    let (lo, hi) = (b.left - una, b.right - una);
    if lo > 0 && lo < hi && hi <= q.outstanding() {
        return Ok((lo, hi));
    }
    if b.left <= una {
        Err(SackRefused::BelowSndUna)
    } else {
        Err(SackRefused::BeyondSndNxt)
    }
}

/// A D-SACK block (RFC 2883 §4): wholly below SND.UNA (data already acknowledged, no
/// older than the largest window), or inside the window (a duplicate of SACKed data).
fn check_dsack(q: &RtxQueue, b: &SackBlock) -> Result<(), SackRefused> {
    if b.left >= b.right {
        return Err(SackRefused::Reversed);
    }
    let una = q.una();
    let below = b.right <= una && una - b.left <= MAX_OUTSTANDING;
    let inside = b.left >= una && b.right - una <= q.outstanding();
    if below || inside {
        Ok(())
    } else {
        Err(SackRefused::DsackInvalid)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }
    fn blk(l: u32, r: u32) -> SackBlock {
        SackBlock {
            left: SeqNumber(l),
            right: SeqNumber(r),
        }
    }
    /// `n` segments of MSS bytes from `start`, the i-th sent at i ms.
    fn setup(n: u32, start: u32) -> (RtxQueue, Scoreboard) {
        let mut q = RtxQueue::new(64, SeqNumber(start));
        for i in 0..n {
            q.on_send(q.nxt(), MSS, false, t(u64::from(i))).unwrap();
        }
        (q, Scoreboard::new(MSS, SeqNumber(start)))
    }
    fn ack(sb: &mut Scoreboard, q: &mut RtxQueue, a: u32, b: &[SackBlock]) -> ScoreboardAck {
        sb.on_ack(q, SeqNumber(a), b, |_| {}).unwrap()
    }
    fn states(q: &RtxQueue) -> String {
        q.iter().map(|s| format!("{:?}", s.state())).collect()
    }

    #[test]
    fn rfc2018_sack_blocks_mark_segments_sacked() {
        let (mut q, mut sb) = setup(6, 0);
        let r = ack(&mut sb, &mut q, 0, &[blk(2000, 4000), blk(5000, 6000)]);
        assert_eq!(
            (r.sack.newly_sacked_bytes, r.sack.newly_sacked_segs),
            (3000, 3)
        );
        assert!(
            r.duplicate,
            "RFC 6675 §2: at HighACK with new SACK information"
        );
        assert_eq!(sb.dupacks(), 1);
        assert_eq!(sb.high_sacked(), Some(SeqNumber(6000)));
        assert_eq!(q.sacked_bytes(), 3000);
        assert_eq!(q.in_flight(), 3000);
        // The same blocks again: nothing new, so no duplicate.
        let r = ack(&mut sb, &mut q, 0, &[blk(2000, 4000)]);
        assert!(!r.duplicate && r.sack.newly_sacked_bytes == 0);
        // A block edge inside a segment splits it.
        let r = ack(&mut sb, &mut q, 0, &[blk(500, 1500)]);
        assert_eq!(r.sack.newly_sacked_bytes, 1000);
        let v: Vec<_> = q.iter().map(|s| (s.seq().get(), s.sacked())).collect();
        assert_eq!(
            &v[..4],
            &[(0, false), (500, true), (1000, true), (1500, false)]
        );
    }

    #[test]
    fn rfc2018_8_invalid_sack_blocks_ignored_and_reported() {
        let (mut q, mut sb) = setup(4, 1000);
        let blocks = [
            blk(3000, 3000), // empty
            blk(4000, 5001), // beyond SND.NXT
            blk(1000, 2000), // starts at SND.UNA (and is no D-SACK: not first)
            blk(2000, 1500), // reversed
        ];
        let r = ack(&mut sb, &mut q, 1000, &blocks);
        let why: Vec<_> = r.sack.refused.iter().map(|&(_, w)| w).collect();
        assert_eq!(
            why,
            [
                SackRefused::Reversed,
                SackRefused::BeyondSndNxt,
                SackRefused::BelowSndUna,
                SackRefused::Reversed
            ]
        );
        assert_eq!(q.sacked_segs(), 0);
        assert_eq!(sb.high_sacked(), None);
        // Far outside, either way around the sequence space.
        let r = ack(
            &mut sb,
            &mut q,
            1000,
            &[blk(3000, 4000), blk(2_000_000_000, 2_000_001_000)],
        );
        assert_eq!(r.sack.refused[0].1, SackRefused::BeyondSndNxt);
        assert_eq!(r.sack.newly_sacked_segs, 1);
        // More than four blocks: the rest are not looked at.
        let many = [blk(2000, 2100); 6];
        let r = ack(&mut sb, &mut q, 1000, &many);
        assert!(r.sack.refused.len() <= MAX_SACK_BLOCKS);
    }

    #[test]
    fn rfc2883_4_dsack_below_ack_reported_not_refused() {
        let (mut q, mut sb) = setup(4, 1000);
        ack(&mut sb, &mut q, 3000, &[]);
        // Below the cumulative ACK: a D-SACK.
        let r = ack(&mut sb, &mut q, 3000, &[blk(1000, 2000), blk(4000, 5000)]);
        assert_eq!(r.sack.dsack, Some(blk(1000, 2000)));
        assert!(r.sack.refused.is_empty());
        assert_eq!(r.sack.newly_sacked_segs, 1);
        // Inside the second block: a D-SACK of SACKed data, not applied again.
        let r = ack(&mut sb, &mut q, 3000, &[blk(4200, 4400), blk(4000, 5000)]);
        assert_eq!(r.sack.dsack, Some(blk(4200, 4400)));
        assert_eq!(q.len(), 2, "a D-SACK does not split");
        // Straddling SND.UNA: invalid.
        let r = ack(&mut sb, &mut q, 3000, &[blk(2500, 3500)]);
        assert_eq!(r.sack.refused[0].1, SackRefused::DsackInvalid);
        assert_eq!(r.sack.dsack, None);
    }

    #[test]
    fn rfc6675_4_islost_by_dupthresh_segments() {
        let (mut q, mut sb) = setup(5, 0);
        ack(&mut sb, &mut q, 0, &[blk(1000, 2000), blk(3000, 4000)]);
        assert!(!sb.is_lost(&q, SeqNumber(0)), "two SACKed segments above");
        ack(&mut sb, &mut q, 0, &[blk(4000, 5000)]);
        assert!(sb.is_lost(&q, SeqNumber(0)), "three SACKed segments above");
        assert!(sb.is_lost(&q, SeqNumber(999)));
        assert!(
            !sb.is_lost(&q, SeqNumber(2000)),
            "two above the second hole"
        );
        assert!(!sb.is_lost(&q, SeqNumber(5000)), "not outstanding");
        assert_eq!(sb.update_lost(&mut q), 1);
        assert_eq!(states(&q), "[-L--][S---][---F][S---][S---]");
    }

    #[test]
    fn rfc6675_4_islost_by_bytes_above() {
        // Small SACKed pieces: fewer than DupThresh segments, but more than
        // (DupThresh - 1) * SMSS bytes.
        let mut q = RtxQueue::new(16, SeqNumber(0));
        q.on_send(SeqNumber(0), 100, false, t(0)).unwrap();
        q.on_send(SeqNumber(100), 1200, false, t(1)).unwrap();
        q.on_send(SeqNumber(1300), 100, false, t(2)).unwrap();
        q.on_send(SeqNumber(1400), 1000, false, t(3)).unwrap();
        let mut sb = Scoreboard::new(MSS, SeqNumber(0));
        ack(&mut sb, &mut q, 0, &[blk(100, 1300)]);
        assert!(!sb.is_lost(&q, SeqNumber(0)), "1200 bytes, one segment");
        ack(&mut sb, &mut q, 0, &[blk(1400, 2400)]);
        assert!(sb.is_lost(&q, SeqNumber(0)), "2200 > 2 * SMSS bytes above");
        assert!(!sb.is_lost(&q, SeqNumber(1300)), "1000 bytes above");
        assert!(sb.should_enter_recovery(&q), "§5 (2): IsLost(HighACK + 1)");
    }

    #[test]
    fn rfc6675_4_setpipe_worked_example() {
        // Ten segments of SMSS; the receiver has 3-4 and 8-9.
        let (mut q, mut sb) = setup(10, 0);
        assert_eq!(sb.set_pipe(&q), 10_000, "nothing SACKed or lost");
        ack(&mut sb, &mut q, 0, &[blk(3000, 5000), blk(8000, 10_000)]);
        assert_eq!(sb.set_pipe(&q), 6000, "SACKed octets are not in the pipe");
        // 0-2 have four SACKed segments above; 5-7 have two (2 * SMSS bytes, not more).
        assert_eq!(sb.update_lost(&mut q), 3);
        assert_eq!(sb.set_pipe(&q), 3000, "(a): lost octets left the pipe");
        sb.enter_recovery(&mut q, true);
        assert_eq!(
            sb.next_seg(&q, false),
            Some(NextSeg::Retransmit {
                seq: SeqNumber(0),
                len: 1000,
                rule: 1
            })
        );
        sb.on_retransmit(&mut q, SeqNumber(0), t(20)).unwrap();
        assert_eq!(
            sb.next_seg(&q, false),
            Some(NextSeg::Retransmit {
                seq: SeqNumber(1000),
                len: 1000,
                rule: 1
            })
        );
        sb.on_retransmit(&mut q, SeqNumber(1000), t(20)).unwrap();
        assert_eq!(
            sb.set_pipe(&q),
            5000,
            "(b): retransmitted octets are in it again"
        );
        assert_eq!(sb.set_pipe(&q), q.in_flight());
        // The retransmissions arrive: a partial ACK.
        ack(&mut sb, &mut q, 2000, &[]);
        assert_eq!(sb.set_pipe(&q), 3000);
        assert_eq!(
            sb.next_seg(&q, false),
            Some(NextSeg::Retransmit {
                seq: SeqNumber(2000),
                len: 1000,
                rule: 1
            })
        );
        assert!(sb.set_pipe(&q) <= q.outstanding());
    }

    #[test]
    fn rfc6675_4_setpipe_values() {
        // Five segments: 0 lost (by IsLost), 1 SACKed, 2 in flight, 3 and 4 SACKed.
        let (mut q, mut sb) = setup(5, 0);
        ack(&mut sb, &mut q, 0, &[blk(1000, 2000), blk(3000, 5000)]);
        assert_eq!(sb.set_pipe(&q), 2000, "0 and 2: not SACKed, not yet lost");
        sb.update_lost(&mut q);
        assert!(q.get(0).unwrap().lost() && !q.get(2).unwrap().lost());
        assert_eq!(
            sb.set_pipe(&q),
            1000,
            "(a): lost 0 left the pipe; 2 is in it"
        );
        sb.enter_recovery(&mut q, true);
        sb.on_retransmit(&mut q, SeqNumber(0), t(9)).unwrap();
        assert_eq!(
            sb.set_pipe(&q),
            2000,
            "(b): retransmitted 0 is in the pipe again"
        );
        assert_eq!(q.in_flight(), 2000);
    }

    #[test]
    fn rfc6675_4_nextseg_rule1_lost_below_highest_sack() {
        let (mut q, mut sb) = setup(6, 0);
        ack(&mut sb, &mut q, 0, &[blk(1000, 2000), blk(3000, 5000)]);
        sb.update_lost(&mut q);
        sb.enter_recovery(&mut q, true);
        let n = sb.next_seg(&q, true).unwrap();
        assert_eq!(
            n,
            NextSeg::Retransmit {
                seq: SeqNumber(0),
                len: 1000,
                rule: 1
            }
        );
        sb.on_retransmit(&mut q, SeqNumber(0), t(9)).unwrap();
        assert_eq!(sb.high_rxt(), SeqNumber(1000));
        // Segment 2 is not lost (two SACKed above): rule 2 (new data) comes first.
        assert_eq!(sb.next_seg(&q, true), Some(NextSeg::NewData));
    }

    #[test]
    fn rfc6675_4_nextseg_rule2_new_data_when_nothing_lost() {
        let (mut q, mut sb) = setup(3, 0);
        assert_eq!(sb.next_seg(&q, true), Some(NextSeg::NewData));
        assert_eq!(
            sb.next_seg(&q, false),
            None,
            "no SACK: rule 3 has nothing below"
        );
        ack(&mut sb, &mut q, 0, &[blk(2000, 3000)]);
        assert_eq!(sb.next_seg(&q, true), Some(NextSeg::NewData));
    }

    #[test]
    fn rfc6675_4_nextseg_rule3_unsacked_when_no_new_data() {
        let (mut q, mut sb) = setup(4, 0);
        ack(&mut sb, &mut q, 0, &[blk(2000, 3000)]);
        sb.enter_recovery(&mut q, false);
        assert_eq!(
            sb.next_seg(&q, false),
            Some(NextSeg::Retransmit {
                seq: SeqNumber(0),
                len: 1000,
                rule: 3
            })
        );
        sb.on_retransmit(&mut q, SeqNumber(0), t(9)).unwrap();
        assert_eq!(
            sb.next_seg(&q, false),
            Some(NextSeg::Retransmit {
                seq: SeqNumber(1000),
                len: 1000,
                rule: 3
            })
        );
        sb.on_retransmit(&mut q, SeqNumber(1000), t(9)).unwrap();
        assert_eq!(
            sb.next_seg(&q, false),
            None,
            "(1.b): 3 is above the highest SACK"
        );
    }

    #[test]
    fn rfc6675_5_enter_recovery_at_dupthresh_and_exit_at_recovery_point() {
        let (mut q, mut sb) = setup(8, 0);
        for b in [blk(1000, 2000), blk(2000, 3000), blk(3000, 4000)] {
            assert!(!sb.should_enter_recovery(&q));
            ack(&mut sb, &mut q, 0, &[b]);
        }
        assert_eq!(sb.dupacks(), 3);
        assert!(sb.should_enter_recovery(&q));
        assert_eq!(sb.enter_recovery(&mut q, true), Some(SeqNumber(0)));
        assert_eq!(sb.recovery_point(), Some(SeqNumber(8000)));
        assert!(
            q.get(0).unwrap().lost(),
            "(4.3): HighACK + 1 presumed dropped"
        );
        assert!(!sb.should_enter_recovery(&q), "already in recovery");
        q.on_send(q.nxt(), MSS, false, t(20)).unwrap();
        // A partial ACK keeps recovery; one covering RecoveryPoint ends it.
        let r = ack(&mut sb, &mut q, 4000, &[]);
        assert_eq!((r.exited, sb.dupacks()), (None, 0));
        let r = ack(&mut sb, &mut q, 7999, &[]);
        assert_eq!(r.exited, None);
        let r = ack(&mut sb, &mut q, 8000, &[]);
        assert_eq!(r.exited, Some(Phase::Fast));
        assert_eq!(sb.phase(), Phase::Open);
    }

    #[test]
    fn rfc6675_5_1_rto_clears_sack_and_blocks_new_recovery() {
        let (mut q, mut sb) = setup(6, 0);
        ack(&mut sb, &mut q, 0, &[blk(1000, 4000)]);
        assert_eq!(q.sacked_segs(), 3);
        sb.on_rto(&mut q);
        assert_eq!(sb.phase(), Phase::Rto);
        assert_eq!(sb.recovery_point(), Some(SeqNumber(6000)));
        assert_eq!((q.sacked_segs(), q.lost_segs(), q.in_flight()), (0, 6, 0));
        assert_eq!(
            q.len(),
            6,
            "RFC 2018 §8: SACKed data kept until cumulatively acked"
        );
        assert!(q.iter().all(|s| s.lost() && !s.sacked()));
        // Three new duplicate ACKs do not start fast recovery before RecoveryPoint.
        for b in [blk(1000, 2000), blk(2000, 3000), blk(3000, 4000)] {
            ack(&mut sb, &mut q, 0, &[b]);
        }
        assert!(!sb.should_enter_recovery(&q));
        let r = ack(&mut sb, &mut q, 6000, &[]);
        assert_eq!(r.exited, Some(Phase::Rto));
    }

    #[test]
    fn rfc2018_8_reneging_reported_and_data_kept() {
        let (mut q, mut sb) = setup(4, 0);
        ack(&mut sb, &mut q, 0, &[blk(1000, 3000)]);
        // The peer acknowledges up to a segment it had SACKed: it may have dropped it.
        let r = ack(&mut sb, &mut q, 1000, &[]);
        assert!(r.reneging);
        assert_eq!(q.first().unwrap().seq(), SeqNumber(1000));
        assert!(q.first().unwrap().sacked(), "SACK bits kept until an RTO");
        sb.on_rto(&mut q);
        assert!(!q.first().unwrap().sacked() && q.first().unwrap().lost());
        assert_eq!(q.on_retransmit(SeqNumber(1000), t(30)), Ok(0));
    }

    #[test]
    fn sack_split_bound_full_queue_leaves_partial_unsacked() {
        let mut q = RtxQueue::new(2, SeqNumber(0));
        q.on_send(SeqNumber(0), 1000, false, t(0)).unwrap();
        q.on_send(SeqNumber(1000), 1000, false, t(1)).unwrap();
        let mut sb = Scoreboard::new(MSS, SeqNumber(0));
        let r = ack(&mut sb, &mut q, 0, &[blk(500, 2000)]);
        assert_eq!(r.sack.unsplit, 1);
        assert_eq!(r.sack.newly_sacked_bytes, 1000, "only the whole segment");
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn sequence_wrap_sack_across_2_pow_32() {
        let start = u32::MAX - 2499;
        let (mut q, mut sb) = setup(5, start);
        let b = blk(start.wrapping_add(1000), start.wrapping_add(4000));
        let r = ack(&mut sb, &mut q, start, &[b]);
        assert_eq!(r.sack.newly_sacked_segs, 3);
        assert!(sb.is_lost(&q, SeqNumber(start)));
        assert_eq!(sb.high_sacked(), Some(SeqNumber(start.wrapping_add(4000))));
        let r = ack(&mut sb, &mut q, start, &[blk(2500, 3000)]);
        assert_eq!(r.sack.refused[0].1, SackRefused::BeyondSndNxt);
        let r = ack(&mut sb, &mut q, start.wrapping_add(5000), &[]);
        assert_eq!((r.acked.segs, r.acked.sacked_bytes), (5, 3000));
        assert_eq!(sb.high_sacked(), None);
    }
}
