//! The retransmission queue: every segment sent and not yet cumulatively acknowledged, as
//! sequence ranges and per-segment metadata (the connection keeps the bytes).
//!
//! Read first: RFC 9293 §3.10.7.4 (the ACK step: SND.UNA < SEG.ACK <= SND.NXT removes
//! acknowledged segments; SEG.ACK > SND.NXT is "an ACK of something not yet sent"), RFC 6298
//! §3 (Karn: no RTT sample from a retransmitted segment), Linux `tcp_clean_rtx_queue` and
//! `tcp_tso_acked` in `net/ipv4/tcp_input.c` (partial acknowledgment of a segment).
//!
//! The queue is a fixed-capacity, sequence-ordered list of [`SentSeg`]s that covers
//! `[SND.UNA, SND.NXT)` without a gap: new data is appended at SND.NXT only, a cumulative
//! ACK removes from the front, a split (an ACK or SACK edge inside a segment) keeps the
//! ranges contiguous. It is allocated once, at construction, and never grows: when it is
//! full, [`RtxQueue::on_send`] refuses and the caller stops sending, as it would when
//! cwnd-limited.
//!
//! All arithmetic is on offsets from SND.UNA (`seq - una`, exact in `0..=outstanding`), so
//! it is correct across the 2^32 wrap.

use std::collections::VecDeque;

use crate::reason::reason_enum;
use crate::seq::SeqNumber;
use crate::time::Instant;

/// The most sequence space the queue holds: the largest window RFC 7323 §2.3 allows
/// (2^30). Anything near 2^31 would break the modular order of [`SeqNumber`].
pub const MAX_OUTSTANDING: usize = 1 << 30;

/// A segment's loss-recovery state bits.
///
/// Invariants, kept by every operation of the queue: a SACKed segment is neither lost,
/// retransmitted nor in flight (Linux `tcp_sacktag_one` clears LOST and RETRANS on SACK),
/// and IN_FLIGHT is exactly "not SACKed, and not lost unless retransmitted since" (RFC 6675
/// §4 SetPipe: lost octets leave the pipe, retransmitted octets are in it again).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SegState(u8);

impl SegState {
    /// Reported by the peer in a SACK block (RFC 2018).
    pub const SACKED: SegState = SegState(1);
    /// Deemed lost (RFC 6675 IsLost, RFC 8985 RACK, RFC 6582 partial ACK, or an RTO).
    pub const LOST: SegState = SegState(2);
    /// Retransmitted since it was last deemed lost: that retransmission is in flight
    /// (Linux `TCPCB_SACKED_RETRANS`).
    pub const RETRANSMITTED: SegState = SegState(4);
    /// Counted in the pipe (RFC 6675 §4 SetPipe).
    pub const IN_FLIGHT: SegState = SegState(8);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: SegState) -> bool {
        self.0 & other.0 == other.0
    }
    /// The raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }
    const fn with(self, b: SegState) -> SegState {
        SegState(self.0 | b.0)
    }
    const fn without(self, b: SegState) -> SegState {
        SegState(self.0 & !b.0)
    }
    /// IN_FLIGHT recomputed from the other bits.
    const fn normalized(self) -> SegState {
        let s = self.without(SegState::IN_FLIGHT);
        let flying = !s.contains(SegState::SACKED)
            && (!s.contains(SegState::LOST) || s.contains(SegState::RETRANSMITTED));
        if flying {
            s.with(SegState::IN_FLIGHT)
        } else {
            s
        }
    }
}

impl core::fmt::Debug for SegState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let names = [
            (SegState::SACKED, "S"),
            (SegState::LOST, "L"),
            (SegState::RETRANSMITTED, "R"),
            (SegState::IN_FLIGHT, "F"),
        ];
        f.write_str("[")?;
        for (b, n) in names {
            f.write_str(if self.contains(b) { n } else { "-" })?;
        }
        f.write_str("]")
    }
}

/// One sent segment: its sequence range `[seq, end)` (payload, then the FIN if it carries
/// one), when it was sent, and its loss-recovery state.
///
/// An entry may stand for several wire segments sent together (a send unit, Linux's TSO
/// skb: [`RtxQueue::on_send_unit`]); `segs` is how many (Linux `tcp_skb_pcount`), and
/// the queue's segment counts ([`RtxQueue::sacked_segs`], [`RtxQueue::lost_segs`]) add
/// them up, so RFC 6675's and RFC 8985's segment counts mean wire segments either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentSeg {
    seq: SeqNumber,
    len: u32,
    fin: bool,
    first_tx: Instant,
    last_tx: Instant,
    retransmits: u16,
    segs: u16,
    state: SegState,
}

impl SentSeg {
    /// The first sequence number.
    pub fn seq(&self) -> SeqNumber {
        self.seq
    }
    /// Payload bytes (the FIN not included).
    pub fn len(&self) -> u32 {
        self.len
    }
    /// Whether the segment has no payload (a lone FIN).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Whether the segment carries our FIN (its last sequence number).
    pub fn fin(&self) -> bool {
        self.fin
    }
    /// Wire segments it stands for: 1, or more for a send unit (Linux `tcp_skb_pcount`).
    pub fn pcount(&self) -> u32 {
        u32::from(self.segs)
    }
    /// Sequence space occupied: payload plus one for a FIN.
    pub fn seq_len(&self) -> usize {
        self.len as usize + usize::from(self.fin)
    }
    /// One past the last sequence number (RFC 8985's `Segment.end_seq`).
    pub fn end(&self) -> SeqNumber {
        self.seq + self.seq_len()
    }
    /// When it was first sent.
    pub fn first_tx(&self) -> Instant {
        self.first_tx
    }
    /// When it was last (re)transmitted (RFC 8985's `Segment.xmit_ts`).
    pub fn last_tx(&self) -> Instant {
        self.last_tx
    }
    /// How many times it was retransmitted (saturating).
    pub fn retransmits(&self) -> u16 {
        self.retransmits
    }
    /// Whether it was ever retransmitted (RFC 6298 §3 Karn; RFC 8985
    /// `Segment.retransmitted`).
    pub fn ever_retransmitted(&self) -> bool {
        self.retransmits > 0
    }
    /// The state bits.
    pub fn state(&self) -> SegState {
        self.state
    }
    /// SACKed by the peer.
    pub fn sacked(&self) -> bool {
        self.state.contains(SegState::SACKED)
    }
    /// Deemed lost.
    pub fn lost(&self) -> bool {
        self.state.contains(SegState::LOST)
    }
    /// Retransmitted since last deemed lost.
    pub fn retransmitted(&self) -> bool {
        self.state.contains(SegState::RETRANSMITTED)
    }
    /// Counted in the pipe.
    pub fn in_flight(&self) -> bool {
        self.state.contains(SegState::IN_FLIGHT)
    }
}

reason_enum! {
    /// Why [`RtxQueue::on_send`] refused a segment (the caller counts it and stops sending).
    pub enum SendRefused {
        /// New data must start at SND.NXT: the queue is sequence-ordered and gapless.
        NotAtSndNxt = "not_at_snd_nxt",
        /// No payload and no FIN: nothing that occupies sequence space.
        Empty = "empty",
        /// Our FIN was already sent: nothing follows it (RFC 9293 §3.10.4).
        AfterFin = "after_fin",
        /// The queue is at its capacity (the caller is queue-limited).
        Full = "queue_full",
        /// More than [`MAX_OUTSTANDING`] bytes would be outstanding.
        BeyondMaxWindow = "beyond_max_window",
    }
}

reason_enum! {
    /// Why a cumulative ACK was refused.
    pub enum AckRefused {
        /// SEG.ACK > SND.NXT: "an ACK of something not yet sent" (RFC 9293 §3.10.7.4,
        /// RFC 5961 §5.2): the caller sends an ACK and drops the segment.
        AboveSndNxt = "ack_above_snd_nxt",
        /// SEG.ACK < SND.UNA: a duplicate that "can be ignored" (RFC 9293 §3.10.7.4).
        BelowSndUna = "ack_below_snd_una",
    }
}

reason_enum! {
    /// Why a retransmission could not be recorded.
    pub enum RtxRefused {
        /// No segment of the queue starts at that sequence number (or no such index).
        NotASegment = "not_a_segment",
        /// The segment is SACKed: the peer has it (RFC 6675 §4 NextSeg never picks one).
        Sacked = "sacked",
    }
}

reason_enum! {
    /// Why a segment could not be split.
    pub enum SplitRefused {
        /// The split point is not strictly inside an outstanding segment.
        OutOfRange = "out_of_range",
        /// The queue has no free slot for the second half.
        Full = "queue_full",
    }
}

/// What a cumulative ACK acknowledged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Acked {
    /// Segments fully acknowledged and removed.
    pub segs: u32,
    /// Sequence space newly acknowledged (SEG.ACK - SND.UNA before it, a FIN counting
    /// one), a partially acknowledged segment's front included.
    pub bytes: usize,
    /// Of `bytes`, those that had been SACKed already (delivered before this ACK).
    pub sacked_bytes: usize,
    /// The ACK landed inside a segment, whose acknowledged front was cut off (Linux
    /// `tcp_tso_acked`).
    pub partial: bool,
    /// Some newly acknowledged segment had been retransmitted: the ACK is ambiguous
    /// (RFC 6298 §3, Karn), so no RTT sample from it without timestamps.
    pub retransmitted: bool,
    /// The newest send time among the newly acknowledged segments that were never
    /// retransmitted nor SACKed before: the RTT sample is `now - rtt_sent` (RFC 6298 §3).
    pub rtt_sent: Option<Instant>,
    /// Our FIN was acknowledged.
    pub fin: bool,
}

/// The retransmission queue. See the module documentation.
#[derive(Clone, Debug)]
pub struct RtxQueue {
    segs: VecDeque<SentSeg>,
    cap: usize,
    una: SeqNumber,
    nxt: SeqNumber,
    fin_sent: bool,
    sacked_bytes: usize,
    sacked_segs: usize,
    lost_segs: usize,
    in_flight: usize,
    /// Every segment ending above this was never retransmitted: from there on the queue
    /// is in send-time order as well as sequence order (new data leaves in sequence).
    rtx_hi: SeqNumber,
    /// The full segment size, for counting the wire segments of a piece of a send unit
    /// (`u32::MAX` until [`RtxQueue::set_smss`]: every entry is then one segment).
    smss: u32,
    /// `ceil(2^64 / smss)`: [`RtxQueue::pcount_of`] divides by two multiplications
    /// (Lemire, Kaser and Kurz 2019), as every partial ACK of a unit counts its pieces.
    smss_m: u64,
}

/// The most payload one send unit covers ([`RtxQueue::on_send_unit`]): Linux's 64 KiB
/// GSO limit (`GSO_LEGACY_MAX_SIZE`), within `u16` segments at any MSS.
pub const MAX_UNIT_BYTES: u32 = 65_535;

impl RtxQueue {
    /// An empty queue for at most `capacity` segments, with SND.UNA = SND.NXT = `start`
    /// (ISS + 1 once the SYN is acknowledged). The only allocation it makes.
    pub fn new(capacity: usize, start: SeqNumber) -> Self {
        RtxQueue {
            segs: VecDeque::with_capacity(capacity),
            cap: capacity,
            una: start,
            nxt: start,
            fin_sent: false,
            sacked_bytes: 0,
            sacked_segs: 0,
            lost_segs: 0,
            in_flight: 0,
            rtx_hi: start,
            smss: u32::MAX,
            smss_m: (u64::MAX / u64::from(u32::MAX)).wrapping_add(1),
        }
    }

    /// The full segment size (SMSS) for send units: [`RtxQueue::on_send_unit`] grows an
    /// entry by whole segments of it, and a piece of a unit (split off, or left by a
    /// partial ACK) counts `ceil(len / smss)` segments, as Linux `tcp_set_skb_tso_segs`.
    pub fn set_smss(&mut self, smss: u32) {
        self.smss = smss.max(1);
        self.smss_m = (u64::MAX / u64::from(self.smss)).wrapping_add(1);
    }

    /// The wire segments `len` payload bytes of a unit's piece stand for: `ceil(len /
    /// smss)`, at least one.
    fn pcount_of(&self, len: u32) -> u16 {
        // A piece is at most 2^30 bytes (MAX_OUTSTANDING) and the SMSS below 2^31, so
        // the sum fits; with an SMSS of 1 the multiplier wraps to 0 and the quotient is
        // the length itself.
        let a = u64::from(len) + u64::from(self.smss) - 1;
        let q = if self.smss == 1 {
            a
        } else if let Ok(a) = u32::try_from(a) {
            ((u128::from(self.smss_m) * u128::from(a)) >> 64) as u64
        } else {
            a / u64::from(self.smss)
        };
        u16::try_from(q.max(1)).unwrap_or(u16::MAX)
    }

    /// Empties the queue and starts again at `start`, keeping its storage.
    pub fn reset(&mut self, start: SeqNumber) {
        self.segs.clear();
        self.una = start;
        self.nxt = start;
        self.fin_sent = false;
        self.sacked_bytes = 0;
        self.sacked_segs = 0;
        self.lost_segs = 0;
        self.in_flight = 0;
        self.rtx_hi = start;
    }

    /// Every segment that ends above this was never retransmitted (it lies in [SND.UNA,
    /// SND.NXT]; SND.UNA when nothing outstanding was), so from there on the
    /// queue is in send-time order (what lets RACK stop early, as Linux's walk of its
    /// time-sorted `tsorted_sent_queue` does).
    pub fn never_retransmitted_above(&self) -> SeqNumber {
        self.rtx_hi
    }

    /// The most segments it holds.
    pub fn capacity(&self) -> usize {
        self.cap
    }
    /// Segments held.
    pub fn len(&self) -> usize {
        self.segs.len()
    }
    /// Nothing outstanding.
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }
    /// No free slot: [`RtxQueue::on_send`] and splits are refused.
    pub fn is_full(&self) -> bool {
        self.segs.len() >= self.cap
    }
    /// SND.UNA: the oldest unacknowledged sequence number (RFC 6675's HighACK).
    pub fn una(&self) -> SeqNumber {
        self.una
    }
    /// SND.NXT: one past the highest sequence number sent (RFC 6675's HighData + 1).
    pub fn nxt(&self) -> SeqNumber {
        self.nxt
    }
    /// Sequence space outstanding, SND.NXT - SND.UNA (RFC 5681's FlightSize).
    pub fn outstanding(&self) -> usize {
        self.nxt - self.una
    }
    /// Bytes SACKed and not yet cumulatively acknowledged.
    pub fn sacked_bytes(&self) -> usize {
        self.sacked_bytes
    }
    /// Segments SACKed and not yet cumulatively acknowledged (RFC 8985's
    /// `RACK.segs_sacked`).
    pub fn sacked_segs(&self) -> usize {
        self.sacked_segs
    }
    /// Segments deemed lost (retransmitted or not).
    pub fn lost_segs(&self) -> usize {
        self.lost_segs
    }
    /// Bytes in flight: RFC 6675's pipe, kept up to date by every state change (see
    /// [`super::Scoreboard::set_pipe`] for the computation as the RFC writes it).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
    /// Whether our FIN was queued (nothing may follow it).
    pub fn fin_sent(&self) -> bool {
        self.fin_sent
    }

    /// The segment at `idx` (0 is the oldest).
    pub fn get(&self, idx: usize) -> Option<&SentSeg> {
        self.segs.get(idx)
    }
    /// The oldest segment (starting at SND.UNA).
    pub fn first(&self) -> Option<&SentSeg> {
        self.segs.front()
    }
    /// The newest segment (ending at SND.NXT).
    pub fn last(&self) -> Option<&SentSeg> {
        self.segs.back()
    }
    /// The segments in sequence order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &SentSeg> + ExactSizeIterator + '_ {
        self.segs.iter()
    }

    /// Offset of `seq` from SND.UNA if it lies in `[SND.UNA, SND.NXT]`.
    fn offset(&self, seq: SeqNumber) -> Option<usize> {
        let off = seq - self.una;
        (off <= self.outstanding()).then_some(off)
    }

    /// The index of the segment holding sequence number `seq`, if outstanding. O(log n).
    pub fn find(&self, seq: SeqNumber) -> Option<usize> {
        let off = self.offset(seq)?;
        if off == self.outstanding() {
            return None;
        }
        // The first segment that ends after `seq` holds it (the queue is gapless).
        let una = self.una;
        Some(self.segs.partition_point(|s| s.end() - una <= off))
    }

    /// The index of the segment starting exactly at `seq`.
    pub fn position(&self, seq: SeqNumber) -> Option<usize> {
        self.find(seq).filter(|&i| self.segs[i].seq == seq)
    }

    fn account_add(&mut self, s: &SentSeg) {
        let n = s.seq_len();
        let k = usize::from(s.segs);
        if s.sacked() {
            self.sacked_bytes += n;
            self.sacked_segs += k;
        }
        if s.lost() {
            self.lost_segs += k;
        }
        if s.in_flight() {
            self.in_flight += n;
        }
    }

    fn account_sub(&mut self, s: &SentSeg) {
        let n = s.seq_len();
        let k = usize::from(s.segs);
        if s.sacked() {
            self.sacked_bytes -= n;
            self.sacked_segs -= k;
        }
        if s.lost() {
            self.lost_segs -= k;
        }
        if s.in_flight() {
            self.in_flight -= n;
        }
    }

    /// Replaces the segment at `idx` keeping the counters right. Returns whether its state
    /// changed.
    fn set_state(&mut self, idx: usize, state: SegState) -> bool {
        let Some(old) = self.segs.get(idx).copied() else {
            return false;
        };
        let state = state.normalized();
        if old.state == state {
            return false;
        }
        self.account_sub(&old);
        let new = SentSeg { state, ..old };
        self.account_add(&new);
        self.segs[idx] = new;
        true
    }

    /// Records a new segment `[seq, seq + len (+1 for a FIN))` sent at `now`. It must start
    /// at SND.NXT; SND.NXT moves past it.
    pub fn on_send(
        &mut self,
        seq: SeqNumber,
        len: u32,
        fin: bool,
        now: Instant,
    ) -> Result<(), SendRefused> {
        if seq != self.nxt {
            return Err(SendRefused::NotAtSndNxt);
        }
        if self.fin_sent {
            return Err(SendRefused::AfterFin);
        }
        if len == 0 && !fin {
            return Err(SendRefused::Empty);
        }
        if self.is_full() {
            return Err(SendRefused::Full);
        }
        let n = len as usize + usize::from(fin);
        if self.outstanding() + n > MAX_OUTSTANDING {
            return Err(SendRefused::BeyondMaxWindow);
        }
        let s = SentSeg {
            seq,
            len,
            fin,
            first_tx: now,
            last_tx: now,
            retransmits: 0,
            segs: 1,
            state: SegState::default().normalized(),
        };
        self.account_add(&s);
        self.segs.push_back(s);
        self.nxt = seq + n;
        self.fin_sent = fin;
        Ok(())
    }

    /// [`RtxQueue::on_send`] for a segment that may join the newest entry as one more
    /// segment of a send unit (Linux's TSO skb, which `tcp_write_xmit` sends whole and
    /// `tcp_fragment` splits only where an ACK, a SACK block or a retransmission needs
    /// it): when that entry was sent at the same `now`, was never retransmitted, is only
    /// in flight (not SACKed or lost), carries no FIN, holds whole segments of the SMSS
    /// ([`RtxQueue::set_smss`]), and the unit stays within [`MAX_UNIT_BYTES`]. Otherwise
    /// a new entry, as `on_send`. A unit's segments share everything loss detection reads
    /// of an entry (send time, retransmission count, state), so one entry per unit
    /// decides as one per segment would; what differs is the work per ACK, which is per
    /// entry.
    pub fn on_send_unit(
        &mut self,
        seq: SeqNumber,
        len: u32,
        fin: bool,
        now: Instant,
    ) -> Result<(), SendRefused> {
        let smss = self.smss;
        let n = len as usize + usize::from(fin);
        let joins = seq == self.nxt
            && len > 0
            && len <= smss
            && self.outstanding() + n <= MAX_OUTSTANDING
            && self
                .segs
                .back()
                .is_some_and(|l| self.joins(l, smss, now) && l.len + len <= MAX_UNIT_BYTES);
        if !joins {
            return self.on_send(seq, len, fin, now);
        }
        if let Some(l) = self.segs.back_mut() {
            // Only in flight: the one counter it is in grows.
            l.len += len;
            l.fin = fin;
            l.segs = l.segs.saturating_add(1);
        }
        self.in_flight += n;
        self.nxt = seq + n;
        self.fin_sent = fin;
        Ok(())
    }

    /// The most segments of `len` bytes [`RtxQueue::on_send_run`] takes at `now`: what
    /// the newest entry and the free slots hold.
    pub fn run_room(&self, len: u32, now: Instant) -> u32 {
        let free = self.cap.saturating_sub(self.segs.len());
        if len != self.smss || len == 0 {
            return u32::try_from(free).unwrap_or(u32::MAX);
        }
        let per_unit = (MAX_UNIT_BYTES / len).max(1);
        let take = self.newest_takes(len, now);
        u32::try_from(free)
            .unwrap_or(u32::MAX)
            .saturating_mul(per_unit)
            .saturating_add(take)
    }

    /// How many more segments of `len` bytes (the SMSS, not 0) sent at `now` the newest
    /// entry takes before it is a full unit: none when they may not join it.
    fn newest_takes(&self, len: u32, now: Instant) -> u32 {
        match self.segs.back() {
            Some(l) if self.joins(l, len, now) => {
                (MAX_UNIT_BYTES - l.len.min(MAX_UNIT_BYTES)) / len
            }
            _ => 0,
        }
    }

    /// Whether segments of `len` bytes sent at `now` may join the entry `l` (the newest).
    fn joins(&self, l: &SentSeg, len: u32, now: Instant) -> bool {
        !self.fin_sent
            && l.first_tx == now
            && l.last_tx == now
            && l.retransmits == 0
            && l.state == SegState::IN_FLIGHT
            && l.len == u32::from(l.segs).saturating_mul(len)
    }

    /// `n` full segments of `len` bytes each, from `seq`, sent together at `now`: as `n`
    /// calls of [`RtxQueue::on_send_unit`] would record them (they join the newest entry
    /// while it can take them, then go in new entries of at most [`MAX_UNIT_BYTES`]), in
    /// one pass. `len` must be the SMSS for them to join; any other size records one
    /// entry per segment, as `on_send` does. Refused, and nothing recorded, when they do
    /// not fit ([`SendRefused::Full`] when the queue has too few free slots).
    pub fn on_send_run(
        &mut self,
        seq: SeqNumber,
        len: u32,
        n: u32,
        now: Instant,
    ) -> Result<(), SendRefused> {
        if n == 0 {
            return Ok(());
        }
        if len != self.smss || len == 0 {
            // No units of this size: one entry per segment, each checked as it goes in
            // (the first refusal stops before anything is recorded only for the first).
            if self.cap - self.segs.len() < n as usize {
                return Err(SendRefused::Full);
            }
            for i in 0..n {
                self.on_send(seq + (i * len) as usize, len, false, now)?;
            }
            return Ok(());
        }
        if seq != self.nxt {
            return Err(SendRefused::NotAtSndNxt);
        }
        if self.fin_sent {
            return Err(SendRefused::AfterFin);
        }
        let total = len as usize * n as usize;
        if self.outstanding() + total > MAX_OUTSTANDING {
            return Err(SendRefused::BeyondMaxWindow);
        }
        let per_unit = (MAX_UNIT_BYTES / len).max(1);
        // How many the newest entry takes, and how many new entries the rest needs.
        let take = self.newest_takes(len, now).min(n);
        let entries = (n - take).div_ceil(per_unit) as usize;
        if self.cap - self.segs.len() < entries {
            return Err(SendRefused::Full);
        }
        if take > 0 {
            if let Some(l) = self.segs.back_mut() {
                l.len += take * len;
                // `take` is at most MAX_UNIT_BYTES / len segments.
                l.segs = l.segs.saturating_add(take as u16);
            }
        }
        let mut at = seq + (take * len) as usize;
        let mut left = n - take;
        while left > 0 {
            let k = left.min(per_unit);
            self.segs.push_back(SentSeg {
                seq: at,
                len: k * len,
                fin: false,
                first_tx: now,
                last_tx: now,
                retransmits: 0,
                segs: k as u16,
                state: SegState::IN_FLIGHT,
            });
            at += (k * len) as usize;
            left -= k;
        }
        // Only in flight: the one counter new data is in grows.
        self.in_flight += total;
        self.nxt = seq + total;
        Ok(())
    }

    /// Records the retransmission at `now` of the segment starting at `seq` (split first
    /// with [`RtxQueue::split`] to retransmit part of it). Returns its index.
    pub fn on_retransmit(&mut self, seq: SeqNumber, now: Instant) -> Result<usize, RtxRefused> {
        let idx = self.position(seq).ok_or(RtxRefused::NotASegment)?;
        self.on_retransmit_at(idx, now)?;
        Ok(idx)
    }

    /// Records the retransmission at `now` of the segment at `idx`: its send time, its
    /// count, and the RETRANSMITTED bit, which puts a lost segment back in flight.
    pub fn on_retransmit_at(&mut self, idx: usize, now: Instant) -> Result<(), RtxRefused> {
        let s = self.segs.get(idx).copied().ok_or(RtxRefused::NotASegment)?;
        if s.sacked() {
            return Err(RtxRefused::Sacked);
        }
        let seg = &mut self.segs[idx];
        seg.last_tx = now;
        seg.retransmits = seg.retransmits.saturating_add(1);
        if seg.end() > self.rtx_hi {
            self.rtx_hi = seg.end();
        }
        self.set_state(idx, s.state.with(SegState::RETRANSMITTED));
        Ok(())
    }

    /// Processes a cumulative ACK (RFC 9293 §3.10.7.4): removes what it fully acknowledges
    /// and cuts off the acknowledged front of a segment it lands inside.
    pub fn on_cumulative_ack(&mut self, ack: SeqNumber) -> Result<Acked, AckRefused> {
        self.on_cumulative_ack_with(ack, |_| {})
    }

    /// [`RtxQueue::on_cumulative_ack`], calling `delivered` for each newly delivered
    /// segment (not SACKed before; for a partial ACK, its acknowledged front) in sequence
    /// order, which is what RACK (RFC 8985 §6.2) needs.
    pub fn on_cumulative_ack_with<F: FnMut(&SentSeg)>(
        &mut self,
        ack: SeqNumber,
        mut delivered: F,
    ) -> Result<Acked, AckRefused> {
        let Some(upto) = self.offset(ack) else {
            return Err(if ack < self.una {
                AckRefused::BelowSndUna
            } else {
                AckRefused::AboveSndNxt
            });
        };
        let mut acked = Acked {
            bytes: upto,
            ..Acked::default()
        };
        let una = self.una;
        let mut record = |s: &SentSeg, acked: &mut Acked| {
            acked.retransmitted |= s.ever_retransmitted();
            if s.sacked() {
                acked.sacked_bytes += s.seq_len();
                return;
            }
            if !s.ever_retransmitted() {
                acked.rtt_sent = Some(acked.rtt_sent.map_or(s.last_tx, |t| t.max(s.last_tx)));
            }
            delivered(s);
        };
        while let Some(front) = self.segs.front().copied() {
            let end = front.end() - una;
            if end <= upto {
                self.segs.pop_front();
                self.account_sub(&front);
                acked.segs += 1;
                acked.fin |= front.fin;
                record(&front, &mut acked);
                continue;
            }
            let start = front.seq - una;
            if start < upto {
                // Linux tcp_tso_acked: the acknowledged front goes, the rest stays with
                // its send times, count and state.
                let cut = upto - start;
                let head = SentSeg {
                    len: cut as u32,
                    fin: false,
                    segs: self.pcount_of(cut as u32),
                    ..front
                };
                let rest_len = front.len - cut as u32;
                let rest = SentSeg {
                    seq: ack,
                    len: rest_len,
                    segs: self.pcount_of(rest_len),
                    ..front
                };
                self.account_sub(&front);
                self.account_add(&rest);
                self.segs[0] = rest;
                acked.partial = true;
                record(&head, &mut acked);
            }
            break;
        }
        self.una = ack;
        // Kept within [SND.UNA, SND.NXT], so that comparing it with a sequence number
        // stays meaningful however far the stream has run since the last retransmission
        // (sequence comparison wraps at 2^31).
        if self.rtx_hi < ack {
            self.rtx_hi = ack;
        }
        Ok(acked)
    }

    /// Splits the segment holding `at` so that a segment starts at `at` (a SACK edge, or
    /// the part of a segment to retransmit). Both halves keep the send times, count and
    /// state. Returns the index of the segment that starts at `at`; a no-op if one already
    /// does.
    pub fn split(&mut self, at: SeqNumber) -> Result<usize, SplitRefused> {
        let idx = self.find(at).ok_or(SplitRefused::OutOfRange)?;
        let s = self.segs[idx];
        if s.seq == at {
            return Ok(idx);
        }
        if self.is_full() {
            return Err(SplitRefused::Full);
        }
        // `at` is inside the segment: 0 < off < seq_len, so off <= len.
        let off = at - s.seq;
        let head = SentSeg {
            len: off as u32,
            fin: false,
            segs: self.pcount_of(off as u32),
            ..s
        };
        let tail_len = s.len - off as u32;
        let tail = SentSeg {
            seq: at,
            len: tail_len,
            segs: self.pcount_of(tail_len),
            ..s
        };
        self.account_sub(&s);
        self.account_add(&head);
        self.account_add(&tail);
        self.segs[idx] = head;
        self.segs.insert(idx + 1, tail);
        Ok(idx + 1)
    }

    /// Declares the latest transmission of the segment at `idx` lost (RFC 8985 §6.2, an
    /// RTO): LOST set, RETRANSMITTED cleared, so it leaves the pipe until retransmitted.
    /// Returns whether anything changed; a SACKed segment is left alone.
    pub fn mark_lost(&mut self, idx: usize) -> bool {
        match self.segs.get(idx) {
            Some(s) if !s.sacked() => {
                let st = s
                    .state
                    .with(SegState::LOST)
                    .without(SegState::RETRANSMITTED);
                self.set_state(idx, st)
            }
            _ => false,
        }
    }

    /// Declares the original transmission of the segment at `idx` lost (RFC 6675 IsLost,
    /// RFC 6582): LOST set, a retransmission in flight stays in flight (RFC 6675 §4
    /// SetPipe (b)). Returns whether anything changed.
    pub(super) fn mark_original_lost(&mut self, idx: usize) -> bool {
        match self.segs.get(idx) {
            Some(s) if !s.sacked() => self.set_state(idx, s.state.with(SegState::LOST)),
            _ => false,
        }
    }

    /// Marks the segment at `idx` SACKed (clearing LOST and RETRANSMITTED). Returns whether
    /// it was newly SACKed.
    pub(super) fn mark_sacked(&mut self, idx: usize) -> bool {
        match self.segs.get(idx) {
            Some(s) if !s.sacked() => {
                let st = SegState::SACKED;
                self.set_state(idx, st)
            }
            _ => false,
        }
    }

    /// After an RTO: every segment un-SACKed and lost, nothing in flight (RFC 2018 §8: the
    /// SACKed bits are turned off since the receiver may have reneged).
    pub(super) fn clear_sacks_all_lost(&mut self) {
        for idx in 0..self.segs.len() {
            self.set_state(idx, SegState::LOST);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    /// A queue of `n` segments of 1000 bytes from `start`, the i-th sent at i ms.
    fn filled(n: u32, start: u32) -> RtxQueue {
        let mut q = RtxQueue::new(64, SeqNumber(start));
        for i in 0..n {
            q.on_send(q.nxt(), 1000, false, t(u64::from(i))).unwrap();
        }
        q
    }

    #[test]
    fn rfc9293_3_10_7_4_send_appends_at_snd_nxt() {
        let mut q = filled(3, 1000);
        assert_eq!(q.len(), 3);
        assert_eq!(q.nxt(), SeqNumber(4000));
        assert_eq!(q.outstanding(), 3000);
        assert_eq!(q.in_flight(), 3000);
        let s = q.get(1).unwrap();
        assert_eq!(
            (s.seq(), s.end(), s.first_tx()),
            (SeqNumber(2000), SeqNumber(3000), t(1))
        );
        assert!(s.in_flight() && !s.lost() && !s.sacked());
        // A FIN takes one sequence number and ends the stream.
        q.on_send(q.nxt(), 10, true, t(5)).unwrap();
        assert_eq!(q.nxt(), SeqNumber(4011));
        assert_eq!(
            q.on_send(q.nxt(), 1, false, t(6)),
            Err(SendRefused::AfterFin)
        );
    }

    #[test]
    fn send_refuses_anything_but_new_data_at_snd_nxt() {
        let mut q = filled(2, 1000);
        assert_eq!(
            q.on_send(SeqNumber(1000), 1000, false, t(9)),
            Err(SendRefused::NotAtSndNxt)
        );
        assert_eq!(
            q.on_send(SeqNumber(3500), 1000, false, t(9)),
            Err(SendRefused::NotAtSndNxt)
        );
        assert_eq!(q.on_send(q.nxt(), 0, false, t(9)), Err(SendRefused::Empty));
        assert_eq!(
            q.on_send(q.nxt(), u32::MAX, false, t(9)),
            Err(SendRefused::BeyondMaxWindow)
        );
        assert_eq!(q.len(), 2);
        assert_eq!(q.nxt(), SeqNumber(3000));
    }

    #[test]
    fn bound_full_queue_refuses_send_and_never_grows() {
        let mut q = RtxQueue::new(4, SeqNumber(0));
        for i in 0..4 {
            q.on_send(q.nxt(), 100, false, t(i)).unwrap();
        }
        assert!(q.is_full());
        assert_eq!(q.on_send(q.nxt(), 100, false, t(9)), Err(SendRefused::Full));
        assert_eq!(q.split(SeqNumber(50)), Err(SplitRefused::Full));
        assert_eq!(q.len(), 4);
        // An ACK frees slots again.
        q.on_cumulative_ack(SeqNumber(100)).unwrap();
        q.on_send(q.nxt(), 100, false, t(9)).unwrap();
        let mut z = RtxQueue::new(0, SeqNumber(0));
        assert_eq!(
            z.on_send(SeqNumber(0), 1, false, t(0)),
            Err(SendRefused::Full)
        );
    }

    #[test]
    fn bound_storage_allocated_once() {
        let mut q = RtxQueue::new(8, SeqNumber(0));
        let cap = q.segs.capacity();
        for round in 0..50u64 {
            while q.on_send(q.nxt(), 300, false, t(round)).is_ok() {}
            let mid = q.una() + 100;
            let _ = q.split(mid);
            let _ = q.on_cumulative_ack(q.una() + 450);
        }
        assert_eq!(q.segs.capacity(), cap, "no allocation after construction");
        assert!(q.len() <= q.capacity());
    }

    #[test]
    fn rfc9293_3_10_7_4_cumulative_ack_removes_acknowledged() {
        let mut q = filled(4, 1000);
        let a = q.on_cumulative_ack(SeqNumber(3000)).unwrap();
        assert_eq!(
            (a.segs, a.bytes, a.partial, a.retransmitted),
            (2, 2000, false, false)
        );
        assert_eq!(
            a.rtt_sent,
            Some(t(1)),
            "the newest never-retransmitted send time"
        );
        assert_eq!(q.una(), SeqNumber(3000));
        assert_eq!(q.len(), 2);
        assert_eq!(q.in_flight(), 2000);
        // SEG.ACK = SND.UNA: nothing acknowledged.
        assert_eq!(
            q.on_cumulative_ack(SeqNumber(3000)).unwrap(),
            Acked::default()
        );
    }

    #[test]
    fn rfc6298_3_karn_retransmitted_segment_gives_no_rtt_sample() {
        let mut q = filled(2, 1000);
        q.on_retransmit(SeqNumber(1000), t(50)).unwrap();
        let a = q.on_cumulative_ack(SeqNumber(2000)).unwrap();
        assert!(a.retransmitted);
        assert_eq!(a.rtt_sent, None);
        let a = q.on_cumulative_ack(SeqNumber(3000)).unwrap();
        assert!(!a.retransmitted);
        assert_eq!(a.rtt_sent, Some(t(1)));
    }

    #[test]
    fn partial_ack_splits_segment_at_the_ack() {
        let mut q = filled(2, 1000);
        q.on_retransmit(SeqNumber(1000), t(7)).unwrap();
        let a = q.on_cumulative_ack(SeqNumber(1400)).unwrap();
        assert_eq!(
            (a.segs, a.bytes, a.partial, a.retransmitted),
            (0, 400, true, true)
        );
        let s = *q.first().unwrap();
        assert_eq!(
            (s.seq(), s.len(), s.end()),
            (SeqNumber(1400), 600, SeqNumber(2000))
        );
        assert_eq!((s.last_tx(), s.retransmits()), (t(7), 1), "metadata kept");
        assert_eq!(q.in_flight(), 1600);
        // Between the data and the FIN: the FIN stays, alone.
        let mut q = RtxQueue::new(4, SeqNumber(0));
        q.on_send(SeqNumber(0), 10, true, t(0)).unwrap();
        let a = q.on_cumulative_ack(SeqNumber(10)).unwrap();
        assert!(a.partial && !a.fin);
        assert_eq!(
            (q.first().unwrap().len(), q.first().unwrap().fin()),
            (0, true)
        );
        assert!(q.on_cumulative_ack(SeqNumber(11)).unwrap().fin);
        assert!(q.is_empty());
    }

    #[test]
    fn rfc5961_5_2_ack_above_snd_nxt_refused() {
        let mut q = filled(2, 1000);
        assert_eq!(
            q.on_cumulative_ack(SeqNumber(3001)),
            Err(AckRefused::AboveSndNxt)
        );
        assert_eq!(
            q.on_cumulative_ack(SeqNumber(999)),
            Err(AckRefused::BelowSndUna)
        );
        // Far away in either direction, the queue is untouched.
        assert!(q.on_cumulative_ack(SeqNumber(1000 + (1 << 31))).is_err());
        assert_eq!((q.una(), q.len()), (SeqNumber(1000), 2));
        // An empty queue acknowledges nothing but SND.UNA.
        let mut e = RtxQueue::new(4, SeqNumber(5));
        assert_eq!(
            e.on_cumulative_ack(SeqNumber(6)),
            Err(AckRefused::AboveSndNxt)
        );
        assert!(e.on_cumulative_ack(SeqNumber(5)).is_ok());
    }

    #[test]
    fn retransmit_refuses_unknown_or_sacked_segments() {
        let mut q = filled(3, 1000);
        assert_eq!(
            q.on_retransmit(SeqNumber(1500), t(9)),
            Err(RtxRefused::NotASegment)
        );
        assert_eq!(
            q.on_retransmit(SeqNumber(4000), t(9)),
            Err(RtxRefused::NotASegment)
        );
        assert!(q.mark_sacked(1));
        assert_eq!(
            q.on_retransmit(SeqNumber(2000), t(9)),
            Err(RtxRefused::Sacked)
        );
        assert_eq!(q.on_retransmit_at(7, t(9)), Err(RtxRefused::NotASegment));
        // Lost, then retransmitted: back in flight.
        assert!(q.mark_lost(0));
        assert_eq!(q.in_flight(), 1000);
        q.on_retransmit(SeqNumber(1000), t(9)).unwrap();
        assert!(q.get(0).unwrap().in_flight());
        assert_eq!(q.in_flight(), 2000);
    }

    #[test]
    fn split_keeps_ranges_contiguous_and_counters_right() {
        let mut q = filled(2, 1000);
        assert_eq!(q.split(SeqNumber(1000)), Ok(0), "already a segment start");
        assert_eq!(q.split(SeqNumber(1300)), Ok(1));
        assert_eq!(q.split(SeqNumber(3000)), Err(SplitRefused::OutOfRange));
        assert_eq!(q.split(SeqNumber(999)), Err(SplitRefused::OutOfRange));
        let v: Vec<_> = q.iter().map(|s| (s.seq().get(), s.len())).collect();
        assert_eq!(v, [(1000, 300), (1300, 700), (2000, 1000)]);
        assert_eq!(q.in_flight(), 2000);
        assert_eq!(q.find(SeqNumber(1299)), Some(0));
        assert_eq!(q.find(SeqNumber(1300)), Some(1));
        assert_eq!(q.position(SeqNumber(1301)), None);
    }

    #[test]
    fn sequence_wrap_queue_straddling_2_pow_32() {
        let start = u32::MAX - 1500;
        let mut q = filled(4, start);
        assert_eq!(q.nxt(), SeqNumber(start.wrapping_add(4000)));
        assert_eq!(q.outstanding(), 4000);
        assert_eq!(
            q.find(SeqNumber(100)),
            Some(1),
            "byte 100 lies in the second segment"
        );
        assert_eq!(q.split(SeqNumber(0)), Ok(2));
        let a = q.on_cumulative_ack(SeqNumber(200)).unwrap();
        assert_eq!((a.segs, a.bytes, a.partial), (2, 1701, true));
        assert_eq!(q.una(), SeqNumber(200));
        assert_eq!(q.first().unwrap().seq(), SeqNumber(200));
        assert_eq!(
            q.on_cumulative_ack(SeqNumber(start)),
            Err(AckRefused::BelowSndUna)
        );
        assert_eq!(
            q.on_cumulative_ack(SeqNumber(start.wrapping_add(4001))),
            Err(AckRefused::AboveSndNxt)
        );
        q.on_cumulative_ack(q.nxt()).unwrap();
        assert!(q.is_empty());
        assert_eq!(q.in_flight(), 0);
    }

    /// Linux `tcp_write_xmit` with TSO: segments sent together are one entry, counted as
    /// their segments (`tcp_skb_pcount`); a later send, a short segment, a FIN or the 64
    /// KiB bound starts a new one.
    #[test]
    fn send_unit_joins_full_segments_sent_at_the_same_time() {
        let mut q = RtxQueue::new(8, SeqNumber(0));
        q.set_smss(1000);
        for _ in 0..3 {
            q.on_send_unit(q.nxt(), 1000, false, t(1)).unwrap();
        }
        assert_eq!(q.len(), 1);
        let u = *q.first().unwrap();
        assert_eq!((u.len(), u.pcount(), u.end()), (3000, 3, SeqNumber(3000)));
        assert_eq!(q.in_flight(), 3000);
        // A short segment ends the unit: it joins, the next does not.
        q.on_send_unit(q.nxt(), 400, false, t(1)).unwrap();
        q.on_send_unit(q.nxt(), 1000, false, t(1)).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(
            (q.get(0).unwrap().len(), q.get(0).unwrap().pcount()),
            (3400, 4)
        );
        // Another time is another entry.
        q.on_send_unit(q.nxt(), 1000, false, t(2)).unwrap();
        assert_eq!(q.len(), 3);
        // A FIN joins as the unit's end, and nothing follows it.
        q.on_send_unit(q.nxt(), 1000, true, t(2)).unwrap();
        assert_eq!(q.len(), 3);
        assert!(q.last().unwrap().fin() && q.fin_sent());
        assert_eq!(
            q.on_send_unit(q.nxt(), 10, false, t(2)),
            Err(SendRefused::AfterFin)
        );
        assert_eq!(q.in_flight(), 6401);
        // At most MAX_UNIT_BYTES per unit.
        let mut q = RtxQueue::new(8, SeqNumber(0));
        q.set_smss(1000);
        for _ in 0..70 {
            q.on_send_unit(q.nxt(), 1000, false, t(1)).unwrap();
        }
        assert_eq!(q.len(), 2);
        assert!(q.iter().all(|s| s.len() <= MAX_UNIT_BYTES));
        assert_eq!(q.outstanding(), 70_000);
        // Without an SMSS every entry is one segment, as `on_send` makes it.
        let mut q = RtxQueue::new(8, SeqNumber(0));
        q.on_send_unit(q.nxt(), 1000, false, t(1)).unwrap();
        q.on_send_unit(q.nxt(), 1000, false, t(1)).unwrap();
        assert_eq!(q.len(), 2);
    }

    /// An entry that was retransmitted, SACKed or lost never grows: a unit is only new
    /// data in flight, all of it sharing one send time and state.
    #[test]
    fn send_unit_never_joins_an_entry_with_a_recovery_state() {
        let mut q = RtxQueue::new(8, SeqNumber(0));
        q.set_smss(1000);
        q.on_send_unit(q.nxt(), 1000, false, t(1)).unwrap();
        q.mark_lost(0);
        q.on_send_unit(q.nxt(), 1000, false, t(1)).unwrap();
        assert_eq!(q.len(), 2);
        q.on_retransmit(SeqNumber(1000), t(1)).unwrap();
        q.on_send_unit(q.nxt(), 1000, false, t(1)).unwrap();
        assert_eq!(q.len(), 3);
        q.mark_sacked(2);
        q.on_send_unit(q.nxt(), 1000, false, t(1)).unwrap();
        assert_eq!(q.len(), 4);
    }

    /// A run of segments is recorded as the same calls of `on_send_unit` one at a time
    /// would record it, entries, counts and all.
    #[test]
    fn send_run_records_what_single_unit_sends_do() {
        for (first, n) in [
            (0u32, 1u32),
            (0, 3),
            (0, 40),
            (0, 200),
            (1, 5),
            (2, 70),
            (3, 1),
        ] {
            let mut a = RtxQueue::new(64, SeqNumber(7));
            let mut b = RtxQueue::new(64, SeqNumber(7));
            for q in [&mut a, &mut b] {
                q.set_smss(1448);
                // What came before in the same instant: full segments, a short one, or a
                // segment of an earlier instant.
                match first {
                    1 => q.on_send_unit(q.nxt(), 1448, false, t(1)).unwrap(),
                    2 => q.on_send_unit(q.nxt(), 1448, false, t(0)).unwrap(),
                    3 => q.on_send_unit(q.nxt(), 100, false, t(1)).unwrap(),
                    _ => {}
                }
            }
            for _ in 0..n {
                a.on_send_unit(a.nxt(), 1448, false, t(1)).unwrap();
            }
            b.on_send_run(b.nxt(), 1448, n, t(1)).unwrap();
            assert_eq!(
                a.iter().copied().collect::<Vec<_>>(),
                b.iter().copied().collect::<Vec<_>>(),
                "{first} {n}"
            );
            assert_eq!((a.nxt(), a.in_flight()), (b.nxt(), b.in_flight()));
        }
        // Too few free slots: refused, nothing recorded.
        let mut q = RtxQueue::new(2, SeqNumber(0));
        q.set_smss(1000);
        q.on_send_unit(q.nxt(), 500, false, t(1)).unwrap();
        assert_eq!(
            q.on_send_run(q.nxt(), 1000, 200, t(1)),
            Err(SendRefused::Full)
        );
        assert_eq!((q.len(), q.nxt()), (1, SeqNumber(500)));
    }

    /// The piece count without a division equals the division's for every length and
    /// segment size it is used with.
    #[test]
    fn pcount_of_is_ceil_len_over_smss() {
        for smss in [1u32, 2, 3, 536, 1000, 1448, 1460, 8948, 65_535, u32::MAX] {
            let mut q = RtxQueue::new(1, SeqNumber(0));
            if smss != u32::MAX {
                q.set_smss(smss);
            }
            for len in (0..200_000u32).step_by(13).chain([
                smss.saturating_sub(1),
                smss,
                smss.saturating_add(1),
                1 << 30,
            ]) {
                let want = u64::from(len).div_ceil(u64::from(smss)).max(1);
                let want = u16::try_from(want).unwrap_or(u16::MAX);
                assert_eq!(q.pcount_of(len), want, "{len} / {smss}");
            }
        }
    }

    /// A unit's pieces count their segments: a split (a SACK edge, a retransmission) and
    /// a partial ACK leave `ceil(len / smss)` segments each (Linux
    /// `tcp_set_skb_tso_segs`), so the SACKed and lost counts stay in segments.
    #[test]
    fn send_unit_pieces_count_their_segments_tcp_skb_pcount() {
        let mut q = RtxQueue::new(8, SeqNumber(0));
        q.set_smss(1000);
        for _ in 0..6 {
            q.on_send_unit(q.nxt(), 1000, false, t(1)).unwrap();
        }
        let i = q.split(SeqNumber(2000)).unwrap();
        q.split(SeqNumber(4500)).unwrap();
        assert_eq!(
            q.iter().map(SentSeg::pcount).collect::<Vec<_>>(),
            vec![2, 3, 2]
        );
        q.mark_sacked(i);
        assert_eq!((q.sacked_segs(), q.sacked_bytes()), (3, 2500));
        q.mark_lost(0);
        assert_eq!(q.lost_segs(), 2);
        // A partial ACK inside the first piece leaves one segment of it.
        let a = q.on_cumulative_ack(SeqNumber(1500)).unwrap();
        assert!(a.partial);
        assert_eq!(
            (q.first().unwrap().len(), q.first().unwrap().pcount()),
            (500, 1)
        );
        assert_eq!(q.lost_segs(), 1);
        q.on_cumulative_ack(q.nxt()).unwrap();
        assert_eq!((q.sacked_segs(), q.lost_segs(), q.in_flight()), (0, 0, 0));
    }
}
