//! The send side of a connection: RFC 9293 §3.3.1's send sequence variables.
//!
//! Today weir sends no data: the send side covers the handshake and our FIN (SND.NXT
//! moves past the SYN and the FIN), checks the peer's ACKs against it (RFC 5961 §5.2) and
//! stamps our TSval on every frame.

use crate::seq::SeqNumber;

/// The send side of one connection.
///
/// The send path belongs here: its send buffer, the retransmission queue (with the RTT
/// estimate and RTO of RFC 6298) and congestion control (RFC 5681) are fields of this
/// struct, next to the sequence variables they move. Their input is the ACK step of
/// segment processing (`Conn::check_ack` in `tcp/input.rs`), which already advances
/// SND.UNA; their output is built by `tcp/output.rs` with the frames it builds today.
pub(crate) struct Snd {
    /// ISS: our initial sequence number.
    pub(crate) iss: SeqNumber,
    /// SND.UNA: the oldest sequence number not acknowledged.
    pub(crate) una: SeqNumber,
    /// SND.NXT: the next sequence number to send.
    pub(crate) nxt: SeqNumber,
    /// MAX.SND.WND: the largest window the peer has offered (RFC 5961 §5.2).
    pub(crate) max_wnd: u32,
    /// The peer's window scale shift (0 if not negotiated).
    pub(crate) wscale: u8,
    /// Our timestamp clock's per-flow offset (RFC 7323 §5.4).
    pub(crate) ts_offset: u32,
}
