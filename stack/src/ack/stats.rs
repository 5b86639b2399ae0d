//! The ACK engine's counters: frames sent by [`AckReason`], and the decisions merged or
//! suppressed in the [`AckQueue`](super::AckQueue).

use crate::reason::reason_enum;

reason_enum! {
    /// Why a segment was sent; ACKs are counted by reason in [`AckStats`]. Names
    /// ([`AckReason::name`]) are used in the stats output.
    pub enum AckReason {
        /// More than one rcv_mss arrived since the last window update
        /// (`__tcp_ack_snd_check` (a)), or `every:N` reached N.
        Stretch = "stretch",
        /// Quickack mode (connection start, after idle, after duplicates).
        Quick = "quick",
        /// Out-of-order data (a duplicate ACK carrying SACK blocks).
        OutOfOrder = "out_of_order",
        /// Old or duplicate data, or a segment outside the window (with D-SACK).
        Duplicate = "duplicate",
        /// The out-of-order queue drained: a gap was filled (RFC 5681 §4.2).
        GapFill = "gap_fill",
        /// The delayed-ACK (or `delay:NS`) timer expired.
        DelayedTimer = "delayed_timer",
        /// The application consumed data and the window at least doubled.
        WindowUpdate = "window_update",
        /// The application consumed pushed data (`ICSK_ACK_PUSHED`/`PUSHED2`).
        Psh = "psh",
        /// SYN-ACK or the ACK of the handshake.
        Handshake = "handshake",
        /// A challenge ACK (RFC 5961).
        Challenge = "challenge",
        /// Our FIN, or the ACK of the peer's FIN.
        Fin = "fin",
        /// A RST.
        Rst = "rst",
    }
}

impl AckReason {
    /// A deliberate duplicate ACK (out-of-order data, old data, a challenge): sent even
    /// when an identical ACK is already queued, because the sender counts them (RFC 5681
    /// §4.2, RFC 5961 §7).
    pub const fn is_dupack(self) -> bool {
        matches!(
            self,
            AckReason::OutOfOrder | AckReason::Duplicate | AckReason::Challenge
        )
    }
}

/// Segments sent by the ACK engine, by reason, plus the segments they acknowledged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AckStats {
    by_reason: [u64; AckReason::COUNT],
    /// Data segments (wire segments, counting inside coalesced runs) received in order.
    pub segments_acked: u64,
    /// ACKs not built because the buffer pool was empty (they stay due).
    pub alloc_failures: u64,
    /// ACKs whose TCP checksum the NIC computed.
    pub tx_csum_offloaded: u64,
    /// ACK decisions merged into a later ACK because the connection's
    /// [`AckQueue`](super::AckQueue) was full (each is one frame fewer than Linux would
    /// have sent).
    pub merged: u64,
    /// ACK decisions not sent because an identical in-order ACK was already queued.
    pub suppressed: u64,
    /// ACKs owed (queued, or waiting on the delayed-ACK timer) that a data segment carried
    /// instead of a frame of their own (Linux `tcp_event_ack_sent`). Not counted by
    /// reason: no ACK frame was sent for them.
    pub piggybacked: u64,
    /// Pure ACKs followed, within one delayed-ACK time
    /// ([`AckState::delack_time`](super::AckState::delack_time)), by a data segment of the
    /// same connection, which carried that acknowledgment too (or a later one): had the ACK waited, it would
    /// have ridden on that segment (the "useless ACKs" of request/response traffic). Each
    /// pure ACK counts at most once.
    pub useless: u64,
}

impl AckStats {
    /// Count one frame sent for `r`.
    pub fn count(&mut self, r: AckReason) {
        self.by_reason[r.index()] += 1;
    }
    /// Frames sent for `r`.
    pub fn get(&self, r: AckReason) -> u64 {
        self.by_reason[r.index()]
    }
    /// Frames sent, all reasons.
    pub fn total(&self) -> u64 {
        self.by_reason.iter().sum()
    }
    /// `(name, count)` for every reason.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        AckReason::ALL.iter().map(|r| (r.name(), self.get(*r)))
    }
    /// Adds `o`'s counts (totals over cores).
    pub fn merge(&mut self, o: &AckStats) {
        for (a, b) in self.by_reason.iter_mut().zip(o.by_reason.iter()) {
            *a += *b;
        }
        self.segments_acked += o.segments_acked;
        self.alloc_failures += o.alloc_failures;
        self.tx_csum_offloaded += o.tx_csum_offloaded;
        self.merged += o.merged;
        self.suppressed += o.suppressed;
        self.piggybacked += o.piggybacked;
        self.useless += o.useless;
    }
    /// Pure data ACKs (excluding handshake, FIN, RST, challenge).
    pub fn data_acks(&self) -> u64 {
        self.total()
            - self.get(AckReason::Handshake)
            - self.get(AckReason::Fin)
            - self.get(AckReason::Rst)
            - self.get(AckReason::Challenge)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_names_are_snake_case() {
        for r in AckReason::ALL {
            assert!(r.name().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        }
        assert_eq!(AckReason::ALL.len(), 12);
    }
}
