//! NewReno loss recovery for peers without SACK (RFC 6582), and RFC 5681's duplicate ACK.
//!
//! Read first: RFC 5681 §2 (the definition of a duplicate ACK) and §3.2 (fast retransmit
//! after three), RFC 6582 §3.2 (the NewReno modification: `recover`, partial and full
//! acknowledgments, the retransmit timeout), Linux `tcp_newreno_mark_lost` in
//! `net/ipv4/tcp_recovery.c`.
//!
//! Without SACK the sender learns of one loss per round trip: each partial ACK (one that
//! advances SND.UNA but not past `recover`) says the segment at the new SND.UNA is lost
//! too, and it is retransmitted at once. Congestion-window arithmetic (deflation, the
//! artificial inflation per duplicate ACK) is the congestion controller's; this module
//! says which event happened and which segment to retransmit.

use super::rtx::{Acked, RtxQueue};
use super::scoreboard::{Phase, DUP_THRESH};
use crate::seq::SeqNumber;

/// What RFC 5681 §2 looks at to call an ACK a duplicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckFacts {
    /// Sequence space outstanding before the ACK (SND.NXT - SND.UNA).
    pub outstanding: usize,
    /// Payload bytes the segment carries.
    pub payload: usize,
    /// SYN or FIN set.
    pub syn_or_fin: bool,
    /// SEG.ACK.
    pub ack: SeqNumber,
    /// SND.UNA before the ACK.
    pub snd_una: SeqNumber,
    /// The window the segment advertises (scaled).
    pub window: u32,
    /// The window the previous ACK advertised (scaled).
    pub last_window: u32,
}

impl AckFacts {
    /// RFC 5681 §2 DUPLICATE ACKNOWLEDGMENT: (a) outstanding data, (b) no data, (c) SYN
    /// and FIN off, (d) SEG.ACK = SND.UNA, (e) the advertised window unchanged.
    pub fn is_duplicate(&self) -> bool {
        self.outstanding > 0
            && self.payload == 0
            && !self.syn_or_fin
            && self.ack == self.snd_una
            && self.window == self.last_window
    }
}

/// What one ACK meant to NewReno.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NewRenoEvent {
    /// Nothing for loss recovery.
    #[default]
    None,
    /// A duplicate ACK, the n-th in a row, not (or not yet) starting fast retransmit. In
    /// fast recovery the congestion controller inflates cwnd by SMSS (RFC 5681 §3.2 step
    /// 4).
    DupAck(u32),
    /// The third duplicate ACK, but SEG.ACK does not cover more than `recover`: no fast
    /// retransmit (RFC 6582 §3.2 step 2, the "careful" variant after an RTO or a previous
    /// recovery).
    NoEntry,
    /// Fast retransmit: retransmit the segment at `retransmit` (SND.UNA) and enter fast
    /// recovery (RFC 5681 §3.2 steps 2-3; RFC 6582 §3.2 step 2 records `recover`).
    Enter {
        /// The first unacknowledged segment's sequence number.
        retransmit: SeqNumber,
    },
    /// A partial ACK in fast recovery (RFC 6582 §3.2 step 3): retransmit the first
    /// unacknowledged segment; `reset_rto` on the first partial ACK of the recovery only
    /// (the "Impatient" variant of RFC 6582 §4).
    Partial {
        /// The first unacknowledged segment's sequence number.
        retransmit: SeqNumber,
        /// Restart the retransmission timer.
        reset_rto: bool,
    },
    /// A full ACK: it covers `recover`, fast recovery ends (RFC 6582 §3.2 step 3).
    Full,
    /// The ACK covers the data outstanding at the last RTO: RTO recovery ends.
    RtoDone,
}

/// NewReno's state.
#[derive(Clone, Debug)]
pub struct NewReno {
    phase: Phase,
    /// One past the highest sequence number sent when recovery began (RFC 6582's
    /// `recover` is that number's predecessor, so "SEG.ACK covers recover" is
    /// `SEG.ACK >= self.recover`).
    recover: SeqNumber,
    dupacks: u32,
    partial_seen: bool,
}

impl NewReno {
    /// NewReno for a connection whose first data byte is `start` (RFC 6582 §3.2 step 1:
    /// `recover` starts at the ISS, so the first ACK covers it).
    pub fn new(start: SeqNumber) -> Self {
        NewReno {
            phase: Phase::Open,
            recover: start,
            dupacks: 0,
            partial_seen: false,
        }
    }
    /// The recovery phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }
    /// `recover` + 1: where recovery ends.
    pub fn recover(&self) -> SeqNumber {
        self.recover
    }
    /// Duplicate ACKs in a row.
    pub fn dupacks(&self) -> u32 {
        self.dupacks
    }

    /// One ACK, after the queue processed its cumulative acknowledgment (`acked`);
    /// `duplicate` is [`AckFacts::is_duplicate`]. The head segment to retransmit is
    /// marked lost in `q`.
    pub fn on_ack(&mut self, q: &mut RtxQueue, acked: &Acked, duplicate: bool) -> NewRenoEvent {
        if acked.bytes > 0 {
            self.dupacks = 0;
            // Covering `recover` ends either recovery. (`recover` is at most SND.NXT.)
            let covered = q.una() >= self.recover;
            return match self.phase {
                Phase::Fast if covered => {
                    self.phase = Phase::Open;
                    NewRenoEvent::Full
                }
                Phase::Fast => match q.first().map(|s| s.seq()) {
                    Some(retransmit) => {
                        q.mark_original_lost(0);
                        let reset_rto = !self.partial_seen;
                        self.partial_seen = true;
                        NewRenoEvent::Partial {
                            retransmit,
                            reset_rto,
                        }
                    }
                    None => NewRenoEvent::None,
                },
                Phase::Rto if covered => {
                    self.phase = Phase::Open;
                    NewRenoEvent::RtoDone
                }
                _ => NewRenoEvent::None,
            };
        }
        if !duplicate {
            return NewRenoEvent::None;
        }
        self.dupacks = self.dupacks.saturating_add(1);
        if self.phase == Phase::Fast || self.dupacks as usize != DUP_THRESH {
            return NewRenoEvent::DupAck(self.dupacks);
        }
        // RFC 6582 §3.2 step 2: only if the ACK covers more than `recover` (after an RTO
        // it does not until the RTO recovery ends).
        if q.una() < self.recover {
            return NewRenoEvent::NoEntry;
        }
        let Some(retransmit) = q.first().map(|s| s.seq()) else {
            return NewRenoEvent::DupAck(self.dupacks);
        };
        self.recover = q.nxt();
        self.phase = Phase::Fast;
        self.partial_seen = false;
        q.mark_original_lost(0);
        NewRenoEvent::Enter { retransmit }
    }

    /// The retransmission timer expired (RFC 6582 §3.2 step 4): `recover` = the highest
    /// sequence number sent, fast recovery ends. Every segment is marked lost, to be sent
    /// again from SND.UNA (RFC 5681 §3.1 after a timeout; Linux `tcp_timeout_mark_lost`).
    pub fn on_rto(&mut self, q: &mut RtxQueue) {
        self.recover = q.nxt();
        self.dupacks = 0;
        for idx in 0..q.len() {
            q.mark_lost(idx);
        }
        self.phase = if q.outstanding() > 0 {
            Phase::Rto
        } else {
            Phase::Open
        };
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::time::Instant;

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }
    fn setup(n: u32) -> (RtxQueue, NewReno) {
        let mut q = RtxQueue::new(32, SeqNumber(0));
        for i in 0..n {
            q.on_send(q.nxt(), 1000, false, t(u64::from(i))).unwrap();
        }
        (q, NewReno::new(SeqNumber(0)))
    }
    fn on(nr: &mut NewReno, q: &mut RtxQueue, ack: u32, dup: bool) -> NewRenoEvent {
        let a = q.on_cumulative_ack(SeqNumber(ack)).unwrap();
        nr.on_ack(q, &a, dup)
    }

    #[test]
    fn rfc5681_2_duplicate_ack_conditions() {
        let dup = AckFacts {
            outstanding: 1000,
            payload: 0,
            syn_or_fin: false,
            ack: SeqNumber(5),
            snd_una: SeqNumber(5),
            window: 65535,
            last_window: 65535,
        };
        assert!(dup.is_duplicate());
        assert!(
            !AckFacts {
                outstanding: 0,
                ..dup
            }
            .is_duplicate(),
            "(a)"
        );
        assert!(!AckFacts { payload: 1, ..dup }.is_duplicate(), "(b)");
        assert!(
            !AckFacts {
                syn_or_fin: true,
                ..dup
            }
            .is_duplicate(),
            "(c)"
        );
        assert!(
            !AckFacts {
                ack: SeqNumber(6),
                ..dup
            }
            .is_duplicate(),
            "(d)"
        );
        assert!(!AckFacts { window: 1, ..dup }.is_duplicate(), "(e)");
    }

    #[test]
    fn rfc5681_3_2_third_duplicate_ack_fast_retransmit() {
        let (mut q, mut nr) = setup(6);
        assert_eq!(on(&mut nr, &mut q, 0, true), NewRenoEvent::DupAck(1));
        assert_eq!(on(&mut nr, &mut q, 0, true), NewRenoEvent::DupAck(2));
        assert_eq!(
            on(&mut nr, &mut q, 0, true),
            NewRenoEvent::Enter {
                retransmit: SeqNumber(0)
            }
        );
        assert_eq!(nr.phase(), Phase::Fast);
        assert_eq!(nr.recover(), SeqNumber(6000));
        assert!(q.first().unwrap().lost());
        assert_eq!(on(&mut nr, &mut q, 0, true), NewRenoEvent::DupAck(4));
        // A window update (not a duplicate) does not count.
        assert_eq!(on(&mut nr, &mut q, 0, false), NewRenoEvent::None);
        assert_eq!(nr.dupacks(), 4);
    }

    #[test]
    fn rfc6582_3_2_partial_ack_retransmits_first_unacked() {
        let (mut q, mut nr) = setup(6);
        for _ in 0..3 {
            let _ = on(&mut nr, &mut q, 0, true);
        }
        q.on_retransmit(SeqNumber(0), t(10)).unwrap();
        q.on_send(q.nxt(), 1000, false, t(11)).unwrap();
        assert_eq!(
            on(&mut nr, &mut q, 2000, false),
            NewRenoEvent::Partial {
                retransmit: SeqNumber(2000),
                reset_rto: true
            }
        );
        assert!(q.first().unwrap().lost());
        q.on_retransmit(SeqNumber(2000), t(12)).unwrap();
        assert_eq!(
            on(&mut nr, &mut q, 4000, false),
            NewRenoEvent::Partial {
                retransmit: SeqNumber(4000),
                reset_rto: false
            }
        );
        // recover was SND.NXT at entry (6000), not the later 7000.
        assert_eq!(on(&mut nr, &mut q, 6000, false), NewRenoEvent::Full);
        assert_eq!(nr.phase(), Phase::Open);
    }

    #[test]
    fn rfc6582_3_2_no_fast_retransmit_until_ack_covers_recover() {
        let (mut q, mut nr) = setup(4);
        nr.on_rto(&mut q);
        assert_eq!(nr.phase(), Phase::Rto);
        assert_eq!(q.in_flight(), 0);
        assert_eq!(q.lost_segs(), 4);
        for _ in 0..2 {
            let _ = on(&mut nr, &mut q, 0, true);
        }
        assert_eq!(on(&mut nr, &mut q, 0, true), NewRenoEvent::NoEntry);
        assert_eq!(on(&mut nr, &mut q, 2000, false), NewRenoEvent::None);
        assert_eq!(on(&mut nr, &mut q, 4000, false), NewRenoEvent::RtoDone);
        assert_eq!(nr.phase(), Phase::Open);
    }
}
