//! One core's TCP counters, and why segments were dropped.

use crate::reason::reason_enum;

reason_enum! {
    /// Why a segment (or part of it) was dropped.
    pub enum DropReason {
        /// PAWS: TSval older than TS.Recent (RFC 7323 §5.3).
        Paws = "paws",
        /// Sequence number not acceptable (RFC 9293 §3.10.7.4).
        OutOfWindow = "out_of_window",
        /// Payload beyond the right window edge (trimmed).
        BeyondWindow = "beyond_window",
        /// RST outside the window (RFC 5961 §3.2).
        RstOutOfWindow = "rst_out_of_window",
        /// RST inside the window but not at RCV.NXT: answered with a challenge ACK instead of
        /// a reset (RFC 5961 §3.2).
        RstInWindow = "rst_in_window",
        /// SYN on a synchronized connection (RFC 5961 §4.2).
        SynInWindow = "syn_in_window",
        /// ACK number outside SND.UNA - MAX.SND.WND ..= SND.NXT (RFC 5961 §5.2).
        BadAck = "bad_ack",
        /// No ACK flag (RFC 9293 §3.10.7.4).
        NoAck = "no_ack",
        /// A challenge ACK was due but the per-core limit was reached.
        ChallengeRateLimited = "challenge_rate_limited",
        /// The connection's out-of-order byte limit.
        OooConnLimit = "ooo_conn_limit",
        /// The core's out-of-order byte or slice limit.
        OooCoreLimit = "ooo_core_limit",
        /// The receive queue had no slot for (part of) an in-order segment: the window
        /// offered no more than the slots take, so only buffers that could not be
        /// coalesced get here (docs/decisions/receive-room.md).
        RxQueueFull = "rx_queue_full",
        /// Data after the peer's FIN.
        DataAfterFin = "data_after_fin",
        /// Data after the application closed (answered with RST).
        DataAfterClose = "data_after_close",
        /// No connection and no listener (answered with RST, RFC 9293 §3.10.7.1).
        NoListener = "no_listener",
        /// The connection table was full (answered with RST).
        ConnTableFull = "conn_table_full",
        /// The handshake's ACK did not acknowledge our SYN (answered with RST).
        BadHandshakeAck = "bad_handshake_ack",
        /// An ACK to a listener with no valid SYN cookie (answered with RST).
        BadCookie = "bad_cookie",
        /// A segment to a listener that is neither SYN nor ACK.
        ListenerDrop = "listener_drop",
        /// A stateless frame did not fit in the control queue.
        CtlQueueFull = "ctl_queue_full",
        /// The application did not drain events fast enough.
        EventQueueFull = "event_queue_full",
        /// Our FIN was never acknowledged.
        FinRetriesExhausted = "fin_retries_exhausted",
        /// SYN-ACK retransmissions exhausted; the half-open entry was dropped.
        SynAckRetriesExhausted = "synack_retries_exhausted",
        /// A segment in SYN-SENT with neither SYN nor RST, or a RST without an acceptable
        /// ACK (RFC 9293 §3.10.7.3).
        SynSentDrop = "syn_sent_drop",
        /// SYN retransmissions exhausted; the active open failed.
        SynRetriesExhausted = "syn_retries_exhausted",
        /// Retransmission timeouts exhausted (`TcpConfig::max_retries`); the connection
        /// was reset.
        RetriesExhausted = "retries_exhausted",
        /// The peer's window stayed zero through `TcpConfig::max_retries` persist probes;
        /// the connection was reset.
        PersistTimeout = "persist_timeout",
    }
}

/// One core's TCP counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Payload bytes that reached `rcv_nxt` (in order, including drained out-of-order).
    pub bytes_in_order: u64,
    /// Wire segments received in order (counting inside coalesced runs).
    pub segments_in_order: u64,
    /// Wire segments queued out of order.
    pub ooo_segments: u64,
    /// Bytes queued out of order.
    pub ooo_bytes: u64,
    /// Wire segments that carried only data already received.
    pub duplicate_segments: u64,
    /// Bytes already received (partial or whole duplicates).
    pub duplicate_bytes: u64,
    /// Connections established.
    pub conns_opened: u64,
    /// Connections closed cleanly.
    pub conns_closed: u64,
    /// Connections reset (either direction).
    pub conns_reset: u64,
    /// Valid RSTs received.
    pub resets_received: u64,
    /// RSTs sent for segments with no connection or listener, or refused.
    pub resets_sent: u64,
    /// Connection attempts refused (no listener, table full, bad ACK to a listener).
    pub conns_refused: u64,
    /// Challenge ACKs scheduled (RFC 5961).
    pub challenge_acks: u64,
    /// SYN-ACKs sent with a SYN cookie.
    pub syn_cookies_sent: u64,
    /// Connections established from a valid SYN cookie.
    pub syn_cookies_accepted: u64,
    /// SYNs answered (half-open entries created or cookies sent).
    pub syns_received: u64,
    /// Data segments sent (each carries the current ACK; not counted in `AckStats`).
    pub data_segments_sent: u64,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Bytes the application wrote into send buffers (`send` and `send_bufs`).
    pub bytes_written: u64,
    /// `send` found the buffer pool empty before it had copied what fitted.
    pub send_alloc_failures: u64,
    /// Writes (`send`, `send_bufs`) the core's send budget (`TcpConfig::snd_core_slices`)
    /// cut short while the connection's own queue had room.
    pub send_budget_limited: u64,
    /// Active opens started (`connect`).
    pub active_opens: u64,
    /// Active opens that failed (refused, or SYN retries spent).
    pub active_open_failures: u64,
    /// Data segments retransmitted.
    pub retransmits: u64,
    /// Payload bytes retransmitted.
    pub bytes_retransmitted: u64,
    /// Retransmission timer expiries (RFC 6298 §5.4).
    pub rto_timeouts: u64,
    /// Fast recoveries entered (three duplicate ACKs or SACK, RFC 5681 §3.2, RFC 6675 §5).
    pub fast_recoveries: u64,
    /// SACK blocks ignored: reversed, beyond SND.NXT, below SND.UNA, a bad D-SACK (RFC
    /// 2018 §8; `recovery::SackRefused` says which).
    pub sack_blocks_refused: u64,
    /// ACKs that stopped at data the peer had SACKed: possible reneging (RFC 2018 §8).
    pub reneging: u64,
    /// Zero-window probes sent (RFC 9293 §3.8.6.1).
    pub window_probes: u64,
    /// Tail loss probes sent (RFC 8985 §7.3), new data or a retransmission (then also
    /// counted in `retransmits`).
    pub tlp_probes: u64,
    /// Probe timeouts that sent no probe (RFC 8985 §7.3: one still unacknowledged, no RTT
    /// sample since the last, nothing to send, the tail SACKed).
    pub tlp_skipped: u64,
    /// Probes whose ACK showed they repaired a loss (RFC 8985 §7.4.2), a congestion
    /// event.
    pub tlp_loss_repaired: u64,
    /// RACK reordering timer expiries (RFC 8985 §6.3).
    pub rack_reorder_timeouts: u64,
    /// Segments whose acknowledgment number was accepted (RFC 9293 §3.10.7.4 fifth).
    pub acks_received: u64,
    /// Of those, the ones that acknowledged new data (moved SND.UNA).
    pub acks_new_data: u64,
    /// Duplicate acknowledgments (RFC 5681 §2: data outstanding, no data, no SYN or
    /// FIN, the same acknowledgment number and window).
    pub dupacks_received: u64,
    /// SYN retransmissions of active opens (RFC 6298 §5, RFC 9293 §3.8.1).
    pub syn_retransmits: u64,
    drops: [u64; DropReason::COUNT],
}

impl TcpStats {
    /// Count one drop.
    pub fn dropped(&mut self, r: DropReason) {
        if let Some(c) = self.drops.get_mut(r as usize) {
            *c += 1;
        }
    }
    /// Drops for `r`.
    pub fn drops(&self, r: DropReason) -> u64 {
        self.drops.get(r as usize).copied().unwrap_or(0)
    }
    /// `(name, count)` for every drop reason.
    pub fn drops_iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DropReason::ALL.iter().map(|r| (r.name(), self.drops(*r)))
    }
    /// Adds `o`'s counts (totals over cores).
    pub fn merge(&mut self, o: &TcpStats) {
        self.bytes_in_order += o.bytes_in_order;
        self.segments_in_order += o.segments_in_order;
        self.ooo_segments += o.ooo_segments;
        self.ooo_bytes += o.ooo_bytes;
        self.duplicate_segments += o.duplicate_segments;
        self.duplicate_bytes += o.duplicate_bytes;
        self.conns_opened += o.conns_opened;
        self.conns_closed += o.conns_closed;
        self.conns_reset += o.conns_reset;
        self.resets_received += o.resets_received;
        self.resets_sent += o.resets_sent;
        self.conns_refused += o.conns_refused;
        self.challenge_acks += o.challenge_acks;
        self.syn_cookies_sent += o.syn_cookies_sent;
        self.syn_cookies_accepted += o.syn_cookies_accepted;
        self.syns_received += o.syns_received;
        self.data_segments_sent += o.data_segments_sent;
        self.bytes_sent += o.bytes_sent;
        self.bytes_written += o.bytes_written;
        self.send_alloc_failures += o.send_alloc_failures;
        self.send_budget_limited += o.send_budget_limited;
        self.active_opens += o.active_opens;
        self.active_open_failures += o.active_open_failures;
        self.retransmits += o.retransmits;
        self.bytes_retransmitted += o.bytes_retransmitted;
        self.rto_timeouts += o.rto_timeouts;
        self.fast_recoveries += o.fast_recoveries;
        self.sack_blocks_refused += o.sack_blocks_refused;
        self.reneging += o.reneging;
        self.window_probes += o.window_probes;
        self.tlp_probes += o.tlp_probes;
        self.tlp_skipped += o.tlp_skipped;
        self.tlp_loss_repaired += o.tlp_loss_repaired;
        self.rack_reorder_timeouts += o.rack_reorder_timeouts;
        self.acks_received += o.acks_received;
        self.acks_new_data += o.acks_new_data;
        self.dupacks_received += o.dupacks_received;
        self.syn_retransmits += o.syn_retransmits;
        for (a, b) in self.drops.iter_mut().zip(o.drops.iter()) {
            *a += *b;
        }
    }
}
