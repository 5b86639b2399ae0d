//! The sender's loss-detection bookkeeping: which segments are outstanding, SACKed, lost
//! or retransmitted. Sequence ranges and per-segment metadata only: the connection keeps
//! the payload bytes.
//!
//! Read first: RFC 9293 §3.10.7.4 (the ACK step), RFC 6675 §2-5 (the SACK scoreboard and
//! loss recovery), RFC 2018 §8 and RFC 2883 §4 (reneging, D-SACK), RFC 8985 §6-7
//! (RACK-TLP), RFC 6582 §3 and RFC 5681 §2-3 (NewReno, duplicate ACKs).

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
    MAX_OUTSTANDING,
};
pub use scoreboard::{
    NextSeg, Phase, SackRefused, SackReport, Scoreboard, ScoreboardAck, DUP_THRESH,
};
