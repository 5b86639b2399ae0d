//! The ACK policy: when a received segment is acknowledged, and how ACKs are built.
//!
//! Read first: RFC 5681 §4.2 (ACK generation), RFC 9293 §3.8.6.3, and Linux
//! `net/ipv4/tcp_input.c`: `tcp_event_data_recv`, `tcp_measure_rcv_mss`,
//! `__tcp_ack_snd_check`, `tcp_send_delayed_ack`, `tcp_delack_timer_handler`,
//! `tcp_cleanup_rbuf` (see `docs/reference/linux-receive-path.md` §3-4).
//!
//! [`AckState`] is the per-connection half of Linux's `icsk_ack` plus the SACK-compression
//! fields of `tcp_sock`; the connection calls it at the same points `tcp_input.c` does and
//! it answers with an [`AckDelay`]: nothing due, a deadline, or "send now" with an
//! [`AckReason`]. [`template`] builds the frames.
//!
//! One decision per coalesced segment: GRO's descriptor reaches [`AckState::snd_check`] once,
//! exactly as a GRO packet reaches `__tcp_ack_snd_check` once in Linux, so a 45-segment run
//! gets one stretch ACK under [`AckPolicy::linux`].
//!
//! Every decision to ACK now yields its own ACK frame, as in Linux where `tcp_send_ack`
//! runs inside the decision: the connection snapshots the ACK number, window, TSecr and
//! SACK blocks at that moment into its [`AckQueue`] and behaves as if the ACK had left
//! (`rcv_wup = rcv_nxt`, `tcp_event_ack_sent`); `poll_tx` builds the queued snapshots in
//! order. So with GRO off a burst of 45 in-order segments gets one ACK per two segments,
//! as Linux without GRO would send, and the cost of not coalescing shows in the counts.
//!
//! Differences from Linux, on purpose:
//! - weir only receives, so it never enters pingpong (interactive) mode: there is no reply
//!   data within `ato` to trigger `inet_csk_inc_pingpong_cnt`.
//! - The SACK-compression delay is `min(1 ms, 5% of the handshake RTT)`; Linux uses the
//!   smoothed RTT, which a pure receiver has no samples for after the handshake.
//! - The frames of one loop iteration wait in a bounded per-connection [`AckQueue`]; when it
//!   overflows, the oldest decision is merged into the next one (a cumulative stretch ACK)
//!   and counted in [`AckStats::merged`], never queued without bound.
//! - Within one segment (or one timer or application event) the decisions collapse into one
//!   ACK, as in Linux, where `ICSK_ACK_NOW`, quickack and `__tcp_ack_snd_check` lead to
//!   a single `tcp_send_ack`; the first reason recorded is the one counted.
//!
//! Files: `policy.rs` ([`AckPolicy`]: presets and parsing), `engine.rs` ([`AckState`]: the
//! per-connection engine), `queue.rs` ([`AckQueue`]), `stats.rs` ([`AckStats`],
//! [`AckReason`]), [`template`] (frame building).

mod engine;
mod policy;
mod queue;
mod stats;
pub mod template;

pub use engine::{
    AckDelay, AckState, SndCheck, ATO_MIN, COMP_SACK_DELAY, COMP_SACK_NR, DELACK_MAX,
    FASTRETRANS_THRESH, MAX_QUICKACKS,
};
pub use policy::{AckMode, AckPolicy, AckPolicyParseError, RFC5681_MAX_DELAY};
pub use queue::{AckPush, AckQueue, AckSnapshot};
pub use stats::{AckReason, AckStats};
