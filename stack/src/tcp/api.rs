//! What the application sees of TCP: connection handles, events, states, snapshots and
//! the errors of the control-plane calls.

use crate::flow::FlowKey;
use crate::seq::SeqNumber;

/// A connection handle: a table slot and a generation, so a stale handle never reaches a
/// newer connection in the same slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId {
    pub(super) slot: u32,
    pub(super) gen: u32,
}

impl ConnId {
    /// The table slot (stable for the connection's life, reused afterwards).
    pub fn index(self) -> u32 {
        self.slot
    }
    /// The slot's generation.
    pub fn generation(self) -> u32 {
        self.gen
    }
}

/// Connection states (RFC 9293 §3.3.2) that a [`ConnId`] can be in; LISTEN and a passive
/// open's SYN-RECEIVED live in the listener and the half-open table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// An active open: our SYN is sent, the peer's awaited.
    SynSent,
    /// An active open met the peer's SYN without an ACK (a simultaneous open): our
    /// SYN-ACK is sent, its ACK awaited.
    SynReceived,
    /// Data flows.
    Established,
    /// The peer sent FIN; the application has not closed.
    CloseWait,
    /// Both closed; our FIN awaits its ACK.
    LastAck,
    /// The application closed first; our FIN awaits its ACK.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's.
    FinWait2,
    /// Both FINs crossed.
    Closing,
    /// Waiting 2 MSL after an active close.
    TimeWait,
    /// Gone.
    Closed,
}

/// What happened to a connection, for the application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A connection completed the handshake (passive, or an active open's).
    Opened(ConnId),
    /// New in-order data is ready for [`Tcp::recv`](super::Tcp::recv).
    Readable(ConnId),
    /// The peer closed its side (FIN); read what is left, then
    /// [`Tcp::close`](super::Tcp::close).
    PeerClosed(ConnId),
    /// The connection closed cleanly; the handle is now invalid.
    Closed(ConnId),
    /// The connection was reset (RST received or sent), or an active open failed (the
    /// peer refused it with a RST, or every SYN went unanswered); the handle is now
    /// invalid.
    Reset(ConnId),
    /// The send buffer has room again after a write found it full
    /// ([`Tcp::send`](super::Tcp::send) took less than it was given). Edge-triggered:
    /// raised once per time the buffer filled, when acknowledged data frees at least half
    /// as much as is still queued (Linux `sk_stream_write_space`); a connection whose
    /// writes always fit never sees it.
    Writable(ConnId),
}

/// A snapshot of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnInfo {
    /// The handle.
    pub id: ConnId,
    /// The flow (`src` is the peer).
    pub flow: FlowKey,
    /// The state.
    pub state: State,
    /// Next sequence number expected.
    pub rcv_nxt: SeqNumber,
    /// Bytes received in order and not yet consumed.
    pub unconsumed: u32,
    /// Bytes held out of order.
    pub ooo_bytes: u32,
    /// The window offered now (right edge minus rcv_nxt).
    pub window: u32,
    /// The receiver's MSS estimate.
    pub rcv_mss: u32,
    /// SACK negotiated.
    pub sack: bool,
    /// Timestamps negotiated.
    pub timestamps: bool,
    /// Our window scale shift (0 if not negotiated).
    pub rcv_wscale: u8,
    /// The peer's window scale shift (0 if not negotiated).
    pub snd_wscale: u8,
    /// SND.UNA: the oldest byte not acknowledged.
    pub snd_una: SeqNumber,
    /// SND.NXT: the next byte to send.
    pub snd_nxt: SeqNumber,
    /// SND.WND: the peer's window, scaled.
    pub snd_wnd: u32,
    /// Payload bytes per full segment sent (the peer's MSS less our options).
    pub snd_mss: u32,
    /// Bytes in the send buffer (unacknowledged plus unsent).
    pub snd_queued: u32,
    /// Bytes in the send buffer not yet sent.
    pub snd_unsent: u32,
    /// Entries in the retransmission queue: one per segment sent, or per send unit of
    /// segments sent together (at most `TcpConfig::snd_slices`).
    pub rtx_entries: usize,
    /// The congestion window, bytes.
    pub cwnd: u32,
    /// The smoothed RTT (RFC 6298), once a sample was taken.
    pub srtt: Option<crate::time::Duration>,
    /// The retransmission timeout in force (backoff included).
    pub rto: crate::time::Duration,
}

/// Errors of the control-plane calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpError {
    /// The handle names no live connection (closed, reset or never valid).
    UnknownConnection,
    /// Already listening on this port.
    AlreadyListening,
    /// No room for another listener (64 per core).
    TooManyListeners,
    /// The connection's sending side is closed (`shutdown`, `close`, or the peer reset
    /// it): nothing more may be written.
    WriteClosed,
    /// The connection has not completed its handshake: wait for [`Event::Opened`].
    NotEstablished,
    /// `connect`: the addresses are of different families, or a port is 0.
    InvalidAddress,
    /// `connect`: the connection table is full.
    TooManyConnections,
    /// `connect`: the local port asked for is listened on, or its 4-tuple is in use.
    PortInUse,
    /// `connect`: every ephemeral port is in use with this peer (TIME-WAIT included), or,
    /// with [`ConnectOpts::rx_queue`](super::ConnectOpts::rx_queue), every one whose
    /// answers land on that queue.
    NoEphemeralPort,
    /// `connect`: [`ConnectOpts::rx_queue`](super::ConnectOpts::rx_queue) was asked for
    /// with no [`TcpConfig::rss`](super::TcpConfig::rss), names a queue the redirection
    /// table does not have, or the local port given sends the answers to another queue.
    RxQueue,
}

impl core::fmt::Display for TcpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            TcpError::UnknownConnection => "no such connection (closed or reset)",
            TcpError::AlreadyListening => "already listening on this port",
            TcpError::TooManyListeners => "too many listeners (at most 64 per core)",
            TcpError::WriteClosed => "the connection's sending side is closed (shutdown or close)",
            TcpError::NotEstablished => {
                "the connection is still opening: wait for Event::Opened before writing"
            }
            TcpError::InvalidAddress => {
                "local and remote addresses must be the same family, and ports nonzero"
            }
            TcpError::TooManyConnections => {
                "the connection table is full: raise TcpConfig::max_conns"
            }
            TcpError::PortInUse => "the local port is listened on or its 4-tuple is in use",
            TcpError::NoEphemeralPort => {
                "no ephemeral port is free for this peer: widen TcpConfig::ephemeral_ports"
            }
            TcpError::RxQueue => {
                "ConnectOpts::rx_queue needs TcpConfig::rss, a queue its table has, and no \
                 local port that sends the answers elsewhere"
            }
        })
    }
}

impl std::error::Error for TcpError {}
