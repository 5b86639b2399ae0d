//! The configuration of one core's TCP.

use core::ops::RangeInclusive;

use crate::rss::Rss;
use crate::tcp::cc::CcConfig;
use crate::tcp::recovery::LossDetection;
use crate::tcp::rtt::ValidRtoConfig;
use crate::time::Duration;

/// The loss detection a connection runs when the peer permitted SACK (RFC 2018). A peer
/// without SACK always gets NewReno (RFC 6582).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SackLossDetection {
    /// RACK-TLP (RFC 8985): losses marked by time in place of RFC 6675's DupThresh, the
    /// reordering timer, and tail loss probes. Linux's default (`net.ipv4.tcp_recovery`
    /// = 1, which turns DupThresh off once RACK is on).
    #[default]
    Rack,
    /// RFC 6675's scoreboard rules alone (IsLost, DupThresh = 3), no probes: Linux with
    /// `tcp_recovery` = 0.
    Sack,
}

impl SackLossDetection {
    /// The mode `stack::tcp::recovery` runs for a peer that did (`sack`) or did not
    /// permit SACK.
    pub fn mode(self, sack: bool) -> LossDetection {
        match (sack, self) {
            (false, _) => LossDetection::NewReno,
            (true, SackLossDetection::Rack) => LossDetection::Rack,
            (true, SackLossDetection::Sack) => LossDetection::Sack,
        }
    }
}

/// Configuration of one core's TCP.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Most established connections (the connection table's fixed size).
    pub max_conns: usize,
    /// Most half-open (SYN-RECEIVED) entries; beyond it SYN cookies answer (RFC 4987).
    pub max_half_open: usize,
    /// Receive buffer per connection: the window is this minus unconsumed and
    /// out-of-order bytes.
    pub rcv_buf: u32,
    /// Link MTU; the advertised MSS is MTU - 40 (IPv4) or MTU - 60 (IPv6).
    pub mtu: u16,
    /// Out-of-order bytes one connection may hold.
    pub ooo_conn_bytes: u32,
    /// Out-of-order bytes all connections of the core may hold.
    pub ooo_core_bytes: usize,
    /// Out-of-order payload slices (buffers) the core may hold.
    pub ooo_core_slices: usize,
    /// Payload slices one connection's receive queue holds at most. Its storage is lent
    /// by the core while it holds data (`stack::spare`), so an idle connection holds none.
    pub rxq_slices: usize,
    /// The payload bytes each free receive-queue slice is counted as able to take when the
    /// window is offered: the window is at most this times the free slices (less one), as
    /// well as the free bytes of [`TcpConfig::rcv_buf`], so that a peer filling it with
    /// segments of any size is never refused for want of slices. It holds when it is at
    /// most half of what one receive buffer holds after the headers: an in-order segment
    /// shorter than this is copied into the tail of the last slice's buffer when it fits
    /// (Linux `tcp_try_coalesce`), so every slice but the last ends up holding more than
    /// it. 896 suits DPDK's default 2,048-byte data room (2,048 less 134 bytes of the
    /// longest IPv4 and TCP headers, halved, is 957).
    pub rxq_slice_bytes: u32,
    /// ACKs one connection may have decided and not yet sent (storage lent by the core
    /// while the queue holds any, as the receive queue's). Every
    /// decision to ACK now yields its own frame, as in Linux; beyond this many in one loop
    /// iteration the oldest are merged into a stretch ACK and counted in
    /// [`AckStats::merged`](crate::ack::AckStats::merged). 128 holds the
    /// one-ACK-per-two-segments of a full receive burst ([`crate::driver::MAX_BURST`])
    /// from one flow with GRO off; a snapshot takes at most 48 bytes and the queue keeps
    /// one spare slot (a test checks the default stays within 6 KiB per connection).
    pub ack_queue: usize,
    /// Spare queue storage the core keeps, in bytes, for each kind of per-connection
    /// queue that borrows it (receive queues, ACK queues; `stack::spare`). A queue that
    /// empties gives its storage back, kept up to this bound and freed beyond it; a queue
    /// that fills takes a kept one, or allocates when none of its size is left. 4 MiB
    /// holds 512 receive-queue storages of 512 mbuf slices.
    pub queue_spare_bytes: usize,
    /// Seed of the keyed hash behind ISNs and SYN cookies. Use a random value in
    /// production.
    pub seed: u64,
    /// SYN-ACK retransmissions before a half-open entry is dropped (Linux
    /// `tcp_synack_retries` = 5).
    pub synack_retries: u8,
    /// FIN retransmissions before the connection is reset.
    pub fin_retries: u8,
    /// TIME-WAIT duration after an active close (2 MSL; Linux uses 60 s). It also bounds
    /// how long a connection the application closed waits in FIN-WAIT-2 for the peer's
    /// FIN (Linux `tcp_fin_timeout`, also 60 s).
    pub time_wait: Duration,
    /// Challenge ACKs per second per core (RFC 5961 §7; Linux `tcp_challenge_ack_limit`).
    pub challenge_ack_limit: u32,
    /// Stateless frames (RSTs, SYN-ACKs) queued for the next `poll_tx`.
    pub ctl_queue: usize,
    /// TTL / hop limit of the segments weir sends.
    pub ttl: u8,
    /// Send buffer per connection in bytes: what `send` and `send_bufs` may queue,
    /// unacknowledged and unsent together (Linux `sk_sndbuf`). 1 MiB: four times the
    /// default receive buffer, as Linux's `tcp_wmem` maximum is above its `tcp_rmem`
    /// default, so one connection can fill a window of a few hundred KiB while the
    /// application writes ahead.
    pub snd_buf: u32,
    /// Buffers one connection's send queue holds (allocated on its first write). A
    /// write's bytes stay in the buffers they were written in until acknowledged, so
    /// many small zero-copy buffers reach this bound before `snd_buf`; `send`'s copies
    /// fill buffers of one MSS each. 1024 holds `snd_buf` in full-sized segments.
    pub snd_slices: usize,
    /// Buffers all send queues of the core may hold together: Linux's `tcp_mem` idea (a
    /// limit on the memory of every TCP socket, checked as a write charges it,
    /// `__sk_mem_raise_allocated`, and a write over it waits, `sk_stream_wait_memory`),
    /// counted in buffers of the pool. A write takes no new buffer beyond it (`send` and
    /// `send_bufs` take what fits, 0 once it is reached, then `Event::Writable` when the
    /// core's queues have drained below three quarters of it), so many connections
    /// writing at once under loss cannot take every buffer of the pool and leave none to
    /// build frames. Default: no core-wide limit (`usize::MAX`), each queue bounded alone.
    pub snd_core_slices: usize,
    /// SYN retransmissions before an active open fails (Linux `tcp_syn_retries` = 6:
    /// with the 1 s initial RTO doubling, the open is given up after about 127 s).
    pub syn_retries: u8,
    /// The local ports an active open picks from when it names none (Linux's
    /// `ip_local_port_range` default, 32768-60999; RFC 6056 §3.2 would allow
    /// 1024-65535).
    pub ephemeral_ports: RangeInclusive<u16>,
    /// The retransmission timer's bounds (RFC 6298): minimum 200 ms as Linux, initial
    /// 1 s, maximum 120 s. Validated where it is made
    /// ([`RtoConfig::validate`](crate::tcp::rtt::RtoConfig::validate)).
    pub rto: ValidRtoConfig,
    /// Retransmission timeouts in a row (no ACK of new data between them) before the
    /// connection is reset and the application hears `Event::Reset` (Linux
    /// `tcp_retries2` = 15, which Linux turns into about 15 minutes of backoff; weir
    /// counts expiries).
    pub max_retries: u8,
    /// Congestion control for every connection: the algorithm (CUBIC, as Linux, or
    /// Reno), the ACK-counting rule and the initial window (`stack::tcp::cc`).
    pub cc: CcConfig,
    /// Loss detection for peers that permitted SACK: RACK-TLP (the default, as Linux) or
    /// RFC 6675's DupThresh alone. Peers without SACK get NewReno either way.
    pub loss_detection: SackLossDetection,
    /// Most data segments one connection builds before `poll_tx` moves on to the next
    /// connection due (it comes back after them while the burst has room): a round-robin
    /// quantum, as a fair-queueing qdisc gives each flow, so one bulk sender cannot hold
    /// the burst while other connections owe ACKs. 16 segments (23 KiB at MSS 1448) is a
    /// third of a 64 KiB TSO burst; 1 interleaves connections segment by segment, as a
    /// busy NIC queue fed by many sockets without TSO does (weir-gen's `--interleave`).
    pub tx_quota: u32,
    /// The port's receive-side scaling (its Toeplitz key and redirection table), for an
    /// active open that asks for the queue its answers arrive on
    /// ([`ConnectOpts::rx_queue`](super::ConnectOpts::rx_queue)). `None` (the default):
    /// no such request can be met.
    pub rss: Option<Rss>,
}

impl TcpConfig {
    /// The window of our SYN or SYN-ACK, never scaled (RFC 7323 §2.2): the receive buffer
    /// up to 65,535, and no more than a connection's receive slices take
    /// ([`TcpConfig::rxq_slice_bytes`] each).
    pub fn syn_window(&self) -> u32 {
        let slots = u32::try_from(self.rxq_slices).unwrap_or(u32::MAX);
        self.rcv_buf
            .min(65535)
            .min(slots.saturating_mul(self.rxq_slice_bytes))
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            max_conns: 1024,
            max_half_open: 256,
            rcv_buf: 256 * 1024,
            mtu: 1500,
            ooo_conn_bytes: 256 * 1024,
            ooo_core_bytes: 16 << 20,
            ooo_core_slices: 16 * 1024,
            rxq_slices: 512,
            rxq_slice_bytes: 896,
            ack_queue: 128,
            queue_spare_bytes: 4 << 20,
            seed: 0x7765_6972,
            synack_retries: 5,
            fin_retries: 6,
            time_wait: Duration::from_secs(60),
            challenge_ack_limit: 1000,
            ctl_queue: 256,
            ttl: 64,
            snd_buf: 1 << 20,
            snd_slices: 1024,
            snd_core_slices: usize::MAX,
            syn_retries: 6,
            ephemeral_ports: 32768..=60999,
            rto: ValidRtoConfig::default(),
            max_retries: 15,
            cc: CcConfig::default(),
            loss_detection: SackLossDetection::Rack,
            tx_quota: 16,
            rss: None,
        }
    }
}
