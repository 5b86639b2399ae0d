//! The sender engine: N emulated TCP senders, sans-IO.
//!
//! Read first: RFC 9293 §3.5 (the handshake), RFC 5681 §3.1-3.2 and §4.1 (slow start,
//! congestion avoidance, fast retransmit, restart after idle), RFC 3465 §2 (byte
//! counting), RFC 6298 §5 (the retransmission timer), RFC 7323 §3-4 (timestamps).
//!
//! Call order per loop iteration, like weir's pipeline: `now = clock`; every received
//! frame to [`Sender::handle_rx`]; [`Sender::handle_timeout`]; [`Sender::poll_tx`] into one
//! transmit batch; transmit it. Nothing allocates after [`Sender::new`]: flows, the ready
//! queue and the control queue are sized for the flow count.
//!
//! Simplifications, stated where they matter: data is never sent beyond the FIN of the
//! application's bytes; loss recovery is one fast retransmit per window (three duplicate
//! ACKs, RFC 5681 §3.2 without NewReno's partial-ACK handling) and go-back-N on the
//! retransmission timer, which is 200 ms (Linux's minimum RTO) doubled per expiry up to
//! 2 s, without an RTT estimator (the ring path's RTT is microseconds); timers are
//! scanned [`TIMER_SCAN`] flows per call, so a timer fires at most `flows / TIMER_SCAN`
//! iterations (of at least 10 µs) late.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use stack::buf::{PacketBuf, RxChecksum, TxChecksumOffload};
use stack::driver::Burst;
use stack::flow::NO_VLAN;
use stack::seq::SeqNumber;
use stack::time::{Duration, Instant};
use stack::wire::ethernet::{self, ethertype};
use stack::wire::fast;
use stack::wire::{
    arp, checksum, emit_arp_reply, ipv4, tcp, ArpRequest, TcpFlags, TcpFrame, TcpOptions, Timestamp,
};

use super::payload::Payload;
use super::pool::SegmentPool;
use super::{AckCounting, GenConfig, PshMode};

/// Most frames one [`Sender::poll_tx`] call builds: DPDK's customary transmit burst, as
/// a NIC paces them onto the wire, not the receiver's larger
/// [`stack::driver::MAX_BURST`] (a generator sending 256 at once would hand the receiver
/// clumps no sender's NIC produces).
pub const TX_BURST: usize = 64;

/// Flows whose timers one [`Sender::handle_timeout`] call checks.
pub const TIMER_SCAN: usize = 256;

/// Least time between two timer scans: an idle loop spins much faster than any timer
/// needs checking (the profile showed the scan at 13% of the generator's cycles).
const SCAN_EVERY: Duration = Duration::from_micros(10);

/// Header bytes of a data segment: the fast-path layout of `stack::wire::fast` (Ethernet
/// 14, IPv4 20, TCP 20 + timestamps 12), which the receiver's fast path parses.
pub const HDR_LEN: usize = fast::HEADER_LEN;
const IP: usize = fast::field::IP;
const TCP: usize = fast::field::TCP;
const TCP_HDR_LEN: usize = fast::TCP_HEADER_LEN_TS;
const TSVAL: usize = fast::field::TS_VAL.start;
const TSECR: usize = fast::field::TS_ECR.start;

/// Linux's minimum RTO (`TCP_RTO_MIN`).
const RTO_MIN: Duration = Duration::from_millis(200);
/// Initial RTO for SYNs (RFC 6298 §2.1).
const RTO_INIT: Duration = Duration::from_secs(1);
/// The bound on the backed-off timer.
const RTO_MAX: Duration = Duration::from_secs(2);
/// SYN retransmissions before a flow gives up.
const SYN_RETRIES: u8 = 5;
/// How long a flow waits for the receiver's FIN after its own was acknowledged.
const CLOSE_WAIT_LIMIT: Duration = Duration::from_secs(5);
/// Window scale the generator advertises (it receives no data; any value works).
const OUR_WSCALE: u8 = 7;
/// Interval between ARP requests while the receiver's MAC is unknown.
pub const ARP_EVERY: Duration = Duration::from_millis(100);
/// How long the generator asks for the receiver's MAC before every flow gives up: about
/// as long as a SYN is retried (1 + 2 + 4 + 8 + 8 + 8 s), so a receiver started a little
/// after the generator still connects. (Linux's `connect()` fails on an unresolved
/// neighbour sooner: 3 probes a second apart, `mcast_solicit` and `retrans_time_ms`.)
pub const ARP_GIVE_UP: Duration = Duration::from_secs(30);

/// ARP requests for the generator's addresses waiting for their reply; more are counted
/// in [`GenStats::arp_replies_dropped`] (the requester asks again).
const ARP_REPLIES_PENDING: usize = 16;

/// Where a flow is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not started (waiting for a handshake slot or for the receiver's MAC).
    Waiting,
    /// SYN sent.
    SynSent,
    /// Sending data (and, at the end, the FIN).
    Established,
    /// Both FINs exchanged and acknowledged.
    Closed,
    /// Reset by the receiver, or gave up.
    Failed,
}

/// One emulated sender. Sequence space is kept as 64-bit stream offsets (byte 0 of the
/// stream is `iss + 1`); the wire's 32-bit numbers are derived with [`SeqNumber`].
struct Flow {
    hdr: [u8; HDR_LEN],
    /// Pseudo-header sum without the length.
    pseudo: u64,
    /// Sums of `hdr`'s IPv4 and TCP headers over the fields every segment keeps (the
    /// lengths, IP ID, checksums, sequence and ACK numbers, flags and timestamp values
    /// taken as zero): a segment's checksums are these plus its own fields, computed
    /// without reading back the header just written ([`fixed_sums`]).
    ip_fixed: u64,
    tcp_fixed: u64,
    iss: SeqNumber,
    /// The receiver's next expected sequence number (its ISS + 1, + 1 after its FIN).
    rcv_nxt: SeqNumber,
    state: State,
    ip_id: u16,
    una: u64,
    nxt: u64,
    /// Highest offset ever sent (retransmissions are segments below it).
    max: u64,
    /// Bytes the application has written so far.
    avail: u64,
    /// Bytes to send before the FIN (`u64::MAX` until the duration ends).
    total: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Bytes acknowledged toward the next congestion-avoidance increase (RFC 3465 §2.1).
    ca_acc: u64,
    snd_wnd: u64,
    wscale: u8,
    mss: u16,
    ts_recent: u32,
    dupacks: u8,
    in_recovery: bool,
    recover: u64,
    retx_one: bool,
    rto: Duration,
    rto_at: Instant,
    syn_tries: u8,
    fin_sent: bool,
    /// The FIN is sent and not yet taken back by a go-back-N.
    fin_out: bool,
    fin_acked: bool,
    peer_fin: bool,
    owe_ack: bool,
    owe_syn: bool,
    in_ready: bool,
    in_ctl: bool,
    burst_next: Instant,
    last_send: Instant,
    /// Start of the current burst's sending (for time to full rate).
    ramp_start: Option<Instant>,
    ramped: bool,
    /// Where the write holding the last segment's start begins, and the multiple of the
    /// payload's period at or below that start ([`floor_to`]'s memory).
    write_base: u64,
    stamp_base: u64,
}

/// What the generator did, in total.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GenStats {
    /// Data segments sent (retransmissions included).
    pub segments: u64,
    /// Payload bytes sent (retransmissions included).
    pub bytes: u64,
    /// Data segments that were retransmissions.
    pub retransmits: u64,
    /// Payload bytes that were retransmissions.
    pub retransmit_bytes: u64,
    /// Control segments sent (SYNs, pure ACKs, FINs).
    pub ctl_segments: u64,
    /// ACKs received for established flows.
    pub acks: u64,
    /// ACKs that acknowledged new data.
    pub acks_new_data: u64,
    /// Duplicate ACKs (RFC 5681 §2 definition).
    pub dupacks: u64,
    /// Fast retransmits (three duplicate ACKs).
    pub fast_retransmits: u64,
    /// Retransmission timer expiries with data or FIN outstanding.
    pub rtos: u64,
    /// SYN retransmissions.
    pub syn_retransmits: u64,
    /// Handshakes completed.
    pub established: u64,
    /// Flows closed cleanly (both FINs acknowledged).
    pub closed: u64,
    /// Flows reset by the receiver.
    pub resets: u64,
    /// Flows that gave up (SYN retries, waiting for the receiver's FIN, or the receiver's
    /// address never resolved).
    pub timeouts: u64,
    /// 1 when the receiver's MAC was never learned: no ARP reply within [`ARP_GIVE_UP`], or
    /// none before the duration ended. Every flow not finished then counts in `timeouts`.
    pub unresolved: u64,
    /// Flows never started because the duration ended first.
    pub not_started: u64,
    /// Frames received that belong to no flow (or are not TCP/ARP).
    pub rx_ignored: u64,
    /// TCP frames dropped for a wrong IPv4 or TCP checksum (the NIC's verdict, or
    /// verified in software when the NIC gave none).
    pub rx_bad_checksum: u64,
    /// RSTs not acted on (RFC 5961 §3.2, RFC 9293 §3.10.7.3): not at exactly the next
    /// expected sequence number, or in SYN-SENT not acknowledging the SYN. One inside the
    /// window is answered with a challenge ACK.
    pub resets_ignored: u64,
    /// ARP replies sent: the receiver asked for one of the flows' source addresses (a
    /// kernel confirms the address of a peer it sends to every few seconds).
    pub arp_replies: u64,
    /// ARP requests for the flows' addresses not answered: more than 16 waited at once,
    /// or no buffer was free.
    pub arp_replies_dropped: u64,
    /// Segments not built because the buffer pool was empty.
    pub alloc_failures: u64,
    /// Data segments built in a stamped buffer: headers written, payload already there
    /// (see [`super::pool`]).
    pub stamped: u64,
    /// Data segments whose payload went by reference: a header buffer with a slice of
    /// the shared pattern chained behind (see [`super::pool`]).
    pub shared: u64,
    /// Buffers the send buffers took, whole or in part: a write is one buffer per
    /// [`super::engine::slice_span`] of the stream it covers, and what a send buffer
    /// refused of it comes again as a buffer of its own. A data segment's payload can go by
    /// reference only from within one buffer, so at most one segment per buffer boundary
    /// (and per retransmission) is copied for spanning two.
    pub write_pieces: u64,
    /// Of the copied payloads, those copied because no payload reference was free
    /// ([`super::pool::GenPool::refs_exhausted`]).
    pub refs_exhausted: u64,
    /// Writes that found the payload source empty (no write buffer free: every copy of
    /// the pattern at its reference limit, or the references' pool empty); the flow
    /// writes again on a later iteration.
    pub source_empty: u64,
    /// Bursts (or whole transfers) that reached full rate: the window stopped being the
    /// limit (not cwnd-limited, or at `--max-cwnd`, or at the receiver's window).
    pub ramps: u64,
    /// Sum of the times from a burst's first segment to full rate, in nanoseconds.
    pub ramp_ns_sum: u64,
    /// Longest such time, in nanoseconds.
    pub ramp_ns_max: u64,
}

/// A summary of the flows' congestion windows, in segments.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CwndSummary {
    /// Smallest.
    pub min: u64,
    /// Median.
    pub median: u64,
    /// Largest.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

impl CwndSummary {
    /// The summary of `v` (sorted in place; all zero when empty).
    pub fn of(v: &mut [u64]) -> CwndSummary {
        if v.is_empty() {
            return CwndSummary::default();
        }
        v.sort_unstable();
        CwndSummary {
            min: v[0],
            median: v[v.len() / 2],
            max: v[v.len() - 1],
            mean: v.iter().map(|&c| c as f64).sum::<f64>() / v.len() as f64,
        }
    }
}

/// What one received frame says, after the checks the generator needs.
struct RxSeg {
    dst_ip: Ipv4Addr,
    repr: tcp::Repr,
    payload_len: usize,
}

/// N emulated TCP senders. See the module documentation for the call order.
pub struct Sender {
    cfg: GenConfig,
    flows: Vec<Flow>,
    payload: Payload,
    ready: VecDeque<u32>,
    ctl: VecDeque<u32>,
    waiting: VecDeque<u32>,
    half_open: u32,
    finished: u32,
    timer_cursor: usize,
    next_scan: Instant,
    dst_mac: Option<[u8; 6]>,
    arp_next: Instant,
    /// ARP requests for the flows' addresses, answered at the next `poll_tx`.
    /// At most [`ARP_REPLIES_PENDING`].
    arp_pending: Vec<ArpRequest>,
    started: Option<Instant>,
    stop_at: Option<Instant>,
    stopping: bool,
    /// [`GenConfig::open_first`] and flows still to open: no data segments yet.
    holding: bool,
    first_data: Option<Instant>,
    last_data: Option<Instant>,
    stats: GenStats,
    /// The pool's stamp last seen (address, length) and how much of it matches the
    /// payload at offset 0 (0: build every segment by copying).
    stamp_seen: (usize, usize),
    stamp_len: usize,
}

/// The timestamp clock: 1 ms ticks, as Linux's `tcp_time_stamp` (TCP_TS_HZ = 1000).
#[inline]
fn ts_now(now: Instant) -> u32 {
    (now.as_nanos() / 1_000_000) as u32
}

impl Sender {
    /// Builds every flow's header template. `cfg` must pass [`GenConfig::validate`].
    pub fn new(cfg: GenConfig) -> Sender {
        let n = cfg.flows as usize;
        let mut flows = Vec::with_capacity(n);
        let mut x = cfg.seed | 1;
        for i in 0..cfg.flows {
            // xorshift: distinct, reproducible initial sequence numbers.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (src_ip, sport) = cfg.flow_addr(i);
            let frame = TcpFrame {
                src_mac: cfg.src_mac,
                dst_mac: cfg.dst_mac.unwrap_or([0xff; 6]),
                src_ip: src_ip.into(),
                dst_ip: cfg.dst_ip.into(),
                sport,
                dport: cfg.dst_port,
                flags: TcpFlags::ACK,
                window: u16::MAX,
                opts: TcpOptions {
                    timestamp: Some(Timestamp::default()),
                    ..TcpOptions::default()
                },
                ..TcpFrame::default()
            };
            let mut hdr = [0u8; HDR_LEN];
            frame.emit(&[], &mut hdr);
            let (ip_fixed, tcp_fixed) = fixed_sums(&hdr);
            flows.push(Flow {
                hdr,
                pseudo: checksum::pseudo_v4(src_ip.octets(), cfg.dst_ip.octets(), 6, 0),
                ip_fixed,
                tcp_fixed,
                iss: SeqNumber(x as u32),
                rcv_nxt: SeqNumber(0),
                state: State::Waiting,
                ip_id: 0,
                una: 0,
                nxt: 0,
                max: 0,
                avail: 0,
                total: cfg.bytes_per_flow.unwrap_or(u64::MAX),
                cwnd: u64::from(cfg.init_cwnd) * u64::from(cfg.mss),
                ssthresh: u64::MAX,
                ca_acc: 0,
                snd_wnd: 0,
                wscale: 0,
                mss: cfg.mss,
                ts_recent: 0,
                dupacks: 0,
                in_recovery: false,
                recover: 0,
                retx_one: false,
                rto: RTO_INIT,
                rto_at: Instant::NEVER,
                syn_tries: 0,
                fin_sent: false,
                fin_out: false,
                fin_acked: false,
                peer_fin: false,
                owe_ack: false,
                owe_syn: false,
                in_ready: false,
                in_ctl: false,
                burst_next: Instant::NEVER,
                last_send: Instant::ZERO,
                ramp_start: None,
                ramped: false,
                write_base: 0,
                stamp_base: 0,
            });
        }
        Sender {
            dst_mac: cfg.dst_mac,
            flows,
            payload: Payload::with_period(cfg.pattern_period as usize),
            ready: VecDeque::with_capacity(n),
            ctl: VecDeque::with_capacity(n),
            waiting: (0..cfg.flows).collect(),
            half_open: 0,
            finished: 0,
            timer_cursor: 0,
            next_scan: Instant::ZERO,
            arp_next: Instant::ZERO,
            arp_pending: Vec::new(),
            started: None,
            stop_at: None,
            stopping: false,
            holding: cfg.open_first && !cfg.blast,
            first_data: None,
            last_data: None,
            stats: GenStats::default(),
            stamp_seen: (0, 0),
            stamp_len: 0,
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &GenConfig {
        &self.cfg
    }

    /// The counters so far.
    pub fn stats(&self) -> &GenStats {
        &self.stats
    }

    /// `true` when every flow has closed, failed or (after the duration) never started,
    /// or, in blast mode, when the duration or byte count is reached.
    pub fn is_done(&self) -> bool {
        self.finished == self.cfg.flows
    }

    /// `true` once the data phase has ended ([`Sender::stop_writing`] or the duration).
    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// Flows closed cleanly so far.
    pub fn flows_closed(&self) -> u64 {
        self.stats.closed
    }

    /// When the first and the last data segment were built (the data phase).
    pub fn data_span(&self) -> Option<(Instant, Instant)> {
        Some((self.first_data?, self.last_data?))
    }

    /// The receiver's MAC, once known.
    pub fn dst_mac(&self) -> Option<[u8; 6]> {
        self.dst_mac
    }

    /// Bytes each flow has had acknowledged (its stream offset of `snd.una`).
    pub fn acked_bytes(&self, flow: u32) -> Option<u64> {
        self.flows.get(flow as usize).map(|f| f.una)
    }

    /// The flows' congestion windows in segments.
    pub fn cwnd_summary(&self) -> CwndSummary {
        let mut v: Vec<u64> = self
            .flows
            .iter()
            .map(|f| f.cwnd.min(u64::MAX / 2) / u64::from(f.mss.max(1)))
            .collect();
        CwndSummary::of(&mut v)
    }

    /// Ends the data phase now (as the duration does): flows finish what is sent, FIN and
    /// close; flows not yet started never start.
    pub fn stop_writing(&mut self, now: Instant) {
        if self.stopping {
            return;
        }
        self.stopping = true;
        if self.dst_mac.is_none() {
            // Nothing was sent: the flows did not run out of time, the receiver never
            // answered.
            self.give_up_unresolved();
            return;
        }
        while let Some(i) = self.waiting.pop_front() {
            self.flows[i as usize].state = State::Closed;
            self.stats.not_started += 1;
            self.finished += 1;
        }
        for i in 0..self.flows.len() {
            let f = &mut self.flows[i];
            match f.state {
                State::Established | State::SynSent => {
                    f.total = f.total.min(f.max);
                    f.avail = f.avail.min(f.total);
                    f.burst_next = Instant::NEVER;
                    if self.cfg.blast {
                        f.state = State::Closed;
                        self.finished += 1;
                    } else {
                        Self::wake(&mut self.ready, f, i as u32);
                    }
                }
                _ => {}
            }
        }
        let _ = now;
    }

    /// The receiver's address never resolved: every flow not finished fails.
    fn give_up_unresolved(&mut self) {
        self.stats.unresolved = 1;
        self.waiting.clear();
        self.ready.clear();
        self.ctl.clear();
        for f in &mut self.flows {
            f.in_ready = false;
            f.in_ctl = false;
            if matches!(
                f.state,
                State::Waiting | State::SynSent | State::Established
            ) {
                f.state = State::Failed;
                f.rto_at = Instant::NEVER;
                self.stats.timeouts += 1;
                self.finished += 1;
            }
        }
        self.half_open = 0;
    }

    fn wake(ready: &mut VecDeque<u32>, f: &mut Flow, i: u32) {
        if !f.in_ready {
            f.in_ready = true;
            ready.push_back(i);
        }
    }

    fn want_ctl(ctl: &mut VecDeque<u32>, f: &mut Flow, i: u32) {
        if !f.in_ctl {
            f.in_ctl = true;
            ctl.push_back(i);
        }
    }

    fn start(&mut self, now: Instant) {
        self.started = Some(now);
        // With `open_first` the duration counts from when every flow is open (`poll_tx`).
        if !self.holding {
            self.stop_at = self.cfg.duration.map(|d| now + d);
        }
        if self.cfg.blast {
            // Open loop: every flow is "established" with unlimited windows.
            // Bursts and gaps need ACKs to pace them: blast mode ignores them.
            for (i, f) in self.flows.iter_mut().enumerate() {
                f.state = State::Established;
                f.cwnd = u64::MAX;
                f.snd_wnd = u64::MAX;
                f.avail = f.total;
                f.rcv_nxt = SeqNumber(1);
                f.in_ready = true;
                self.ready.push_back(i as u32);
            }
            self.waiting.clear();
        }
    }

    /// Moves waiting flows into the handshake, up to the half-open limit.
    fn admit(&mut self, now: Instant) {
        while self.half_open < self.cfg.max_half_open && !self.stopping {
            let Some(i) = self.waiting.pop_front() else {
                break;
            };
            let f = &mut self.flows[i as usize];
            f.state = State::SynSent;
            f.owe_syn = true;
            f.rto = RTO_INIT;
            f.rto_at = now + RTO_INIT;
            self.half_open += 1;
            Self::want_ctl(&mut self.ctl, f, i);
        }
    }

    /// Handles one received frame: the receiver's SYN-ACKs, ACKs, FINs and RSTs, ARP
    /// replies while its MAC is unknown, and ARP requests for the flows' source addresses
    /// (answered at the next [`Sender::poll_tx`]). Anything else is counted and ignored.
    /// `csum` is the NIC's checksum verdict; what it did not check is verified here.
    pub fn handle_rx(&mut self, now: Instant, frame: &[u8], csum: RxChecksum) {
        let et = frame
            .get(ethernet::field::ETHERTYPE)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
        if et == ethertype::ARP {
            self.handle_arp(frame);
            return;
        }
        let seg = match read_tcp(frame, csum) {
            Ok(seg) => seg,
            Err(RxDrop::NotTcp) => {
                self.stats.rx_ignored += 1;
                return;
            }
            Err(RxDrop::BadChecksum) => {
                self.stats.rx_bad_checksum += 1;
                return;
            }
        };
        let r = &seg.repr;
        let Some(i) = self.cfg.flow_index(seg.dst_ip, r.dst_port) else {
            self.stats.rx_ignored += 1;
            return;
        };
        if r.src_port != self.cfg.dst_port || self.cfg.blast {
            self.stats.rx_ignored += 1;
            return;
        }
        let f = &mut self.flows[i as usize];
        if r.flags.contains(TcpFlags::RST) {
            let acceptable = match f.state {
                // RFC 9293 §3.10.7.3: in SYN-SENT, a RST is acceptable if it acknowledges
                // the SYN.
                State::SynSent => r.flags.contains(TcpFlags::ACK) && r.ack == f.iss + 1,
                // RFC 5961 §3.2: only a RST at exactly RCV.NXT resets the connection.
                State::Established => r.seq == f.rcv_nxt,
                _ => return,
            };
            if acceptable {
                if f.state == State::SynSent {
                    self.half_open -= 1;
                }
                f.state = State::Failed;
                f.rto_at = Instant::NEVER;
                self.stats.resets += 1;
                self.finished += 1;
            } else {
                self.stats.resets_ignored += 1;
                // One elsewhere in the window (the unscaled 64 KiB the generator
                // advertises at least) gets a challenge ACK; one outside it, nothing.
                if f.state == State::Established && r.seq - f.rcv_nxt < usize::from(u16::MAX) {
                    f.owe_ack = true;
                    Self::want_ctl(&mut self.ctl, f, i);
                }
            }
            return;
        }
        match f.state {
            State::SynSent => {
                if !r.flags.contains(TcpFlags::SYN | TcpFlags::ACK) || r.ack != f.iss + 1 {
                    self.stats.rx_ignored += 1;
                    return;
                }
                f.rcv_nxt = r.seq + 1;
                // RFC 7323 §2.2: scaling only when both sides sent the option.
                f.wscale = r.opts.wscale.unwrap_or(0);
                if let Some(ts) = r.opts.timestamp {
                    f.ts_recent = ts.tsval;
                }
                let peer_mss = r.opts.mss.unwrap_or(536).saturating_sub(12).max(64);
                f.mss = f.mss.min(peer_mss);
                // RFC 7323 §2.2: the window of a SYN is never scaled.
                f.snd_wnd = u64::from(r.window);
                f.cwnd = u64::from(self.cfg.init_cwnd) * u64::from(f.mss);
                f.state = State::Established;
                f.owe_ack = true;
                f.owe_syn = false;
                f.rto = RTO_MIN;
                f.rto_at = Instant::NEVER;
                f.avail = f.total.min(self.cfg.burst_bytes.unwrap_or(u64::MAX));
                self.half_open -= 1;
                self.stats.established += 1;
                Self::want_ctl(&mut self.ctl, f, i);
                Self::wake(&mut self.ready, f, i);
            }
            State::Established => {
                Self::on_ack(&self.cfg, &mut self.stats, f, &seg, now);
                if f.owe_ack {
                    Self::want_ctl(&mut self.ctl, f, i);
                }
                if f.fin_acked && f.peer_fin {
                    f.state = State::Closed;
                    f.rto_at = Instant::NEVER;
                    self.stats.closed += 1;
                    self.finished += 1;
                } else if f.fin_acked && f.rto_at == Instant::NEVER {
                    f.rto_at = now + CLOSE_WAIT_LIMIT;
                }
                Self::wake(&mut self.ready, f, i);
            }
            State::Closed => {
                // As in TIME-WAIT: a retransmitted FIN is acknowledged again.
                if r.flags.contains(TcpFlags::FIN) {
                    f.owe_ack = true;
                    Self::want_ctl(&mut self.ctl, f, i);
                }
            }
            State::Waiting | State::Failed => self.stats.rx_ignored += 1,
        }
    }

    fn on_ack(cfg: &GenConfig, stats: &mut GenStats, f: &mut Flow, seg: &RxSeg, now: Instant) {
        let r = &seg.repr;
        if !r.flags.contains(TcpFlags::ACK) {
            return;
        }
        stats.acks += 1;
        if let Some(ts) = r.opts.timestamp {
            // RFC 7323 §4.3: remember the latest TSval in sequence (ACK-only segments
            // from an in-order receiver always are).
            if SeqNumber(ts.tsval) >= SeqNumber(f.ts_recent) {
                f.ts_recent = ts.tsval;
            }
        }
        let base = f.iss + 1;
        let una_seq = base + f.una as usize;
        let limit = f.max + u64::from(f.fin_sent);
        let acked = if r.ack > una_seq {
            (r.ack - una_seq) as u64
        } else {
            0
        };
        if acked > limit - f.una {
            // Acknowledges what was never sent: ignore (RFC 9293 §3.10.7.4).
            return;
        }
        let wnd = u64::from(r.window) << f.wscale;
        let flight_before = f.nxt.max(f.una) - f.una;
        if acked > 0 {
            stats.acks_new_data += 1;
            let data_acked = acked.min(f.max - f.una);
            f.una += data_acked;
            if f.fin_sent && acked > data_acked {
                f.fin_acked = true;
            }
            f.nxt = f.nxt.max(f.una);
            f.dupacks = 0;
            if f.in_recovery && f.una >= f.recover {
                f.in_recovery = false;
            }
            if !f.in_recovery {
                Self::grow(cfg, f, data_acked, flight_before, now, stats);
            }
            f.retx_one = false;
            f.rto = RTO_MIN;
            let outstanding = f.una < f.max || (f.fin_out && !f.fin_acked);
            f.rto_at = if outstanding {
                now + f.rto
            } else {
                Instant::NEVER
            };
            if f.una == f.avail && f.avail < f.total && f.una == f.max {
                // The burst is acknowledged: the application writes again after the gap.
                f.burst_next = now + cfg.gap;
                f.ramp_start = None;
            }
        } else if seg.payload_len == 0
            && !r.flags.intersects(TcpFlags::FIN | TcpFlags::SYN)
            && wnd == f.snd_wnd
            && f.una < f.max
            && r.ack == una_seq
        {
            // RFC 5681 §2: a duplicate ACK.
            stats.dupacks += 1;
            f.dupacks = f.dupacks.saturating_add(1);
            if f.dupacks == 3 && !f.in_recovery {
                // RFC 5681 §3.2 steps 2-3 (without the window inflation).
                stats.fast_retransmits += 1;
                let flight = f.max - f.una;
                f.ssthresh = (flight / 2).max(2 * u64::from(f.mss));
                f.cwnd = f.ssthresh;
                f.in_recovery = true;
                f.recover = f.max;
                f.retx_one = true;
            }
        }
        f.snd_wnd = wnd;
        if r.flags.contains(TcpFlags::FIN) && r.seq + seg.payload_len == f.rcv_nxt {
            f.rcv_nxt += 1;
            f.peer_fin = true;
            f.owe_ack = true;
        } else if seg.payload_len > 0 || r.flags.contains(TcpFlags::FIN) {
            // Data (the receiver sends none) or an out-of-order FIN: answer with an ACK.
            f.owe_ack = true;
        }
    }

    /// Slow start or congestion avoidance for `acked` new bytes (RFC 5681 §3.1,
    /// RFC 3465 §2). The window grows only while it limits the sender, as Linux's
    /// `tcp_is_cwnd_limited` has it (at least half of it in flight before this ACK).
    fn grow(
        cfg: &GenConfig,
        f: &mut Flow,
        acked: u64,
        flight_before: u64,
        now: Instant,
        stats: &mut GenStats,
    ) {
        let mss = u64::from(f.mss);
        let max = u64::from(cfg.max_cwnd) * mss;
        let limited = flight_before.saturating_mul(2) >= f.cwnd;
        if limited && f.cwnd < max {
            if f.cwnd < f.ssthresh {
                f.cwnd += match cfg.ack_counting {
                    AckCounting::PerAck => mss,
                    AckCounting::Abc(l) => acked.min(u64::from(l) * mss),
                    AckCounting::Bytes => acked,
                };
            } else {
                match cfg.ack_counting {
                    // RFC 5681 eq. 3: MSS*MSS/cwnd per ACK.
                    AckCounting::PerAck => f.cwnd += (mss * mss / f.cwnd).max(1),
                    // RFC 3465 §2.1: one MSS per cwnd of bytes acknowledged.
                    _ => {
                        f.ca_acc += acked;
                        if f.ca_acc >= f.cwnd {
                            f.ca_acc -= f.cwnd;
                            f.cwnd += mss;
                        }
                    }
                }
            }
            f.cwnd = f.cwnd.min(max);
        }
        let full = !limited || f.cwnd >= max || f.cwnd >= f.snd_wnd;
        if full && !f.ramped {
            if let Some(t0) = f.ramp_start {
                f.ramped = true;
                let ns = now.saturating_since(t0).as_nanos();
                stats.ramps += 1;
                stats.ramp_ns_sum += ns;
                stats.ramp_ns_max = stats.ramp_ns_max.max(ns);
            }
        }
    }

    fn handle_arp(&mut self, frame: &[u8]) {
        let Some(body) = frame.get(ethernet::HEADER_LEN..) else {
            return;
        };
        let Ok(p) = arp::Packet::new_checked(body) else {
            self.stats.rx_ignored += 1;
            return;
        };
        if !p.is_ethernet_ipv4() {
            self.stats.rx_ignored += 1;
            return;
        }
        let from_receiver = p.sender_ip() == self.cfg.dst_ip.octets();
        match p.operation() {
            arp::OP_REPLY if from_receiver => self.learn_dst_mac(p.sender_mac()),
            // As weir-sink's parser (`parse_arp`): no reply to a group sender address.
            arp::OP_REQUEST
                if self.cfg.owns_ip(Ipv4Addr::from(p.target_ip()))
                    && !ethernet::is_group(&p.sender_mac()) =>
            {
                // The receiver's request names its MAC as well (RFC 826 merges it).
                if from_receiver {
                    self.learn_dst_mac(p.sender_mac());
                }
                let req = ArpRequest {
                    src_mac: frame
                        .get(ethernet::field::SRC)
                        .and_then(|b| <[u8; 6]>::try_from(b).ok())
                        .unwrap_or(p.sender_mac()),
                    vlan: NO_VLAN,
                    sender_mac: p.sender_mac(),
                    sender_ip: Ipv4Addr::from(p.sender_ip()),
                    target_ip: Ipv4Addr::from(p.target_ip()),
                };
                if self.arp_pending.len() < ARP_REPLIES_PENDING {
                    self.arp_pending.push(req);
                } else {
                    self.stats.arp_replies_dropped += 1;
                }
            }
            _ => self.stats.rx_ignored += 1,
        }
    }

    /// Takes `mac` as the receiver's, unless one is known already (a configured
    /// `dst_mac` or an earlier reply).
    fn learn_dst_mac(&mut self, mac: [u8; 6]) {
        if self.dst_mac.is_none() {
            self.dst_mac = Some(mac);
            for f in &mut self.flows {
                f.hdr[ethernet::field::DST].copy_from_slice(&mac);
            }
        }
    }

    /// Appends a reply to every pending ARP request to `out`, while it has room.
    fn answer_arp<P: SegmentPool>(&mut self, pool: &mut P, out: &mut Burst<P::Buf>) {
        while !out.is_full() {
            let Some(req) = self.arp_pending.pop() else {
                return;
            };
            let Some(mut b) = pool.alloc(ethernet::MIN_FRAME_LEN) else {
                self.stats.arp_replies_dropped += 1 + self.arp_pending.len() as u64;
                self.arp_pending.clear();
                return;
            };
            if emit_arp_reply(&req, self.cfg.src_mac, b.data_mut()) == 0 {
                self.stats.arp_replies_dropped += 1;
                continue;
            }
            self.stats.arp_replies += 1;
            out.push(b);
        }
    }

    /// Fires what is due: the duration's end, retransmission timers, burst gaps. Checks
    /// at most [`TIMER_SCAN`] flows per call, at most once per 10 µs.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.started.is_none() {
            self.start(now);
        }
        if self.stop_at.is_some_and(|t| now >= t) {
            self.stop_writing(now);
        }
        if self.dst_mac.is_none()
            && self.stats.unresolved == 0
            && self
                .started
                .is_some_and(|t| now.saturating_since(t) >= ARP_GIVE_UP)
        {
            self.give_up_unresolved();
        }
        let n = self.flows.len();
        if self.cfg.blast || now < self.next_scan {
            return;
        }
        self.next_scan = now + SCAN_EVERY;
        for _ in 0..TIMER_SCAN.min(n) {
            let i = self.timer_cursor;
            self.timer_cursor = if i + 1 == n { 0 } else { i + 1 };
            let f = &mut self.flows[i];
            if now >= f.rto_at {
                self.on_rto(now, i);
            }
            let f = &mut self.flows[i];
            if now >= f.burst_next {
                f.burst_next = Instant::NEVER;
                if f.state == State::Established && f.avail < f.total {
                    f.avail = f
                        .avail
                        .saturating_add(self.cfg.burst_bytes.unwrap_or(u64::MAX));
                    f.avail = f.avail.min(f.total);
                    // RFC 5681 §4.1: after an idle period longer than the RTO, restart
                    // from the initial window.
                    if now.saturating_since(f.last_send) > f.rto {
                        f.cwnd = f.cwnd.min(u64::from(self.cfg.init_cwnd) * u64::from(f.mss));
                    }
                    f.ramped = false;
                    Self::wake(&mut self.ready, f, i as u32);
                }
            }
        }
    }

    fn on_rto(&mut self, now: Instant, i: usize) {
        let f = &mut self.flows[i];
        match f.state {
            State::SynSent => {
                f.syn_tries += 1;
                if f.syn_tries > SYN_RETRIES {
                    f.state = State::Failed;
                    f.rto_at = Instant::NEVER;
                    self.half_open -= 1;
                    self.stats.timeouts += 1;
                    self.finished += 1;
                    return;
                }
                self.stats.syn_retransmits += 1;
                f.owe_syn = true;
                // RFC 6298 §5.5: back off; SYNs up to 8 s.
                f.rto = (f.rto + f.rto).min(Duration::from_secs(8));
                f.rto_at = now + f.rto;
                Self::want_ctl(&mut self.ctl, f, i as u32);
            }
            State::Established => {
                if f.fin_acked {
                    // Our FIN is acknowledged but the receiver never sent its own.
                    f.state = State::Failed;
                    f.rto_at = Instant::NEVER;
                    self.stats.timeouts += 1;
                    self.finished += 1;
                    return;
                }
                // RFC 5681 §3.1 eq. 4 and LW = 1 segment; go back N (RFC 6298 §5.4).
                self.stats.rtos += 1;
                let mss = u64::from(f.mss);
                let flight = f.max - f.una;
                f.ssthresh = (flight / 2).max(2 * mss);
                f.cwnd = mss;
                f.ca_acc = 0;
                f.nxt = f.una;
                f.fin_out = false;
                f.retx_one = false;
                f.in_recovery = false;
                f.dupacks = 0;
                f.rto = (f.rto + f.rto).min(RTO_MAX);
                f.rto_at = now + f.rto;
                Self::wake(&mut self.ready, f, i as u32);
            }
            _ => f.rto_at = Instant::NEVER,
        }
    }

    /// Builds what is due into buffers from `pool`, appended to `out`: ARP requests while
    /// the receiver's MAC is unknown, control segments (SYNs, ACKs), then data segments in
    /// the configured interleaving, until [`TX_BURST`] frames were appended or `out` is
    /// full, the pool is empty or no flow may send. Returns the frames appended.
    pub fn poll_tx<P: SegmentPool>(
        &mut self,
        now: Instant,
        pool: &mut P,
        out: &mut Burst<P::Buf>,
    ) -> usize {
        if self.started.is_none() {
            self.start(now);
        }
        self.check_stamp(pool.stamp());
        let start = out.len();
        if !self.arp_pending.is_empty() {
            self.answer_arp(pool, out);
        }
        if self.dst_mac.is_none() {
            if now >= self.arp_next && !out.is_full() {
                self.arp_next = now + ARP_EVERY;
                if let Some(b) = self.build_arp(pool) {
                    out.push(b);
                }
            }
            return out.len() - start;
        }
        if !self.waiting.is_empty() {
            self.admit(now);
        }
        let ts = ts_now(now);
        let end = (start + TX_BURST).min(out.capacity());
        while out.len() < end {
            let Some(&i) = self.ctl.front() else { break };
            let Some(b) = self.build_ctl(i, ts, pool) else {
                self.stats.alloc_failures += 1;
                return out.len() - start;
            };
            self.ctl.pop_front();
            let f = &mut self.flows[i as usize];
            f.in_ctl = false;
            self.stats.ctl_segments += 1;
            out.push(b);
        }
        if self.holding {
            if !self.waiting.is_empty() || self.half_open > 0 {
                return out.len() - start;
            }
            // Every flow is open (or failed): the data phase begins.
            self.holding = false;
            self.stop_at = self.cfg.duration.map(|d| now + d);
        }
        let train = self.cfg.interleave.train_len();
        while out.len() < end {
            let Some(&i) = self.ready.front() else { break };
            let mut sent = 0;
            let mut more = true;
            while sent < train && out.len() < end {
                match self.next_segment(i, now, ts, pool) {
                    Next::Built(b) => {
                        out.push(b);
                        sent += 1;
                    }
                    Next::Blocked => {
                        more = false;
                        break;
                    }
                    Next::NoBuffer => {
                        self.stats.alloc_failures += 1;
                        return out.len() - start;
                    }
                }
            }
            self.ready.pop_front();
            if more {
                self.ready.push_back(i);
            } else {
                self.flows[i as usize].in_ready = false;
            }
        }
        out.len() - start
    }

    /// Notes how much of `stamp` (a pool's) is the payload at stream offset 0: segments
    /// starting at a multiple of the pattern's period and no longer than that are built
    /// in stamped buffers. Compared once per stamp, not per call.
    fn check_stamp(&mut self, stamp: &[u8]) {
        let key = (stamp.as_ptr() as usize, stamp.len());
        if key != self.stamp_seen {
            self.stamp_seen = key;
            let ok = !stamp.is_empty() && stamp == self.payload.bytes(0, stamp.len());
            self.stamp_len = if ok { stamp.len() } else { 0 };
        }
    }

    fn build_arp<P: SegmentPool>(&self, pool: &mut P) -> Option<P::Buf> {
        let mut b = pool.alloc(ethernet::MIN_FRAME_LEN)?;
        let d = b.data_mut();
        d.fill(0);
        ethernet::emit_header(d, [0xff; 6], self.cfg.src_mac, None, ethertype::ARP);
        let body = d.get_mut(ethernet::HEADER_LEN..ethernet::HEADER_LEN + arp::PACKET_LEN)?;
        arp::Repr {
            operation: arp::OP_REQUEST,
            sender_mac: self.cfg.src_mac,
            sender_ip: self.cfg.src_ip,
            target_mac: [0; 6],
            target_ip: self.cfg.dst_ip,
        }
        .emit(&mut arp::Packet::new_unchecked(body));
        Some(b)
    }

    /// A SYN or a pure ACK (with FIN when it is due and nothing else is) for flow `i`.
    fn build_ctl<P: SegmentPool>(&mut self, i: u32, ts: u32, pool: &mut P) -> Option<P::Buf> {
        let f = &mut self.flows[i as usize];
        let (src_ip, sport) = self.cfg.flow_addr(i);
        let mut frame = TcpFrame {
            src_mac: self.cfg.src_mac,
            dst_mac: self.dst_mac.unwrap_or([0xff; 6]),
            src_ip: src_ip.into(),
            dst_ip: self.cfg.dst_ip.into(),
            sport,
            dport: self.cfg.dst_port,
            ip_id: f.ip_id,
            ..TcpFrame::default()
        };
        if f.owe_syn {
            frame.seq = f.iss;
            frame.flags = TcpFlags::SYN;
            frame.window = u16::MAX;
            frame.opts = TcpOptions {
                mss: Some(self.cfg.mss.saturating_add(12)),
                wscale: Some(OUR_WSCALE),
                sack_permitted: true,
                timestamp: Some(Timestamp {
                    tsval: ts,
                    tsecr: 0,
                }),
                ..TcpOptions::default()
            };
        } else {
            frame.seq = f.iss + 1 + f.nxt as usize + usize::from(f.fin_out);
            frame.ack = f.rcv_nxt;
            frame.flags = TcpFlags::ACK;
            frame.window = u16::MAX;
            frame.opts = TcpOptions {
                timestamp: Some(Timestamp {
                    tsval: ts,
                    tsecr: f.ts_recent,
                }),
                ..TcpOptions::default()
            };
        }
        let len = frame.frame_len(0);
        let mut b = pool.alloc(len)?;
        let n = frame.emit(&[], b.data_mut());
        if n != len {
            return None;
        }
        f.ip_id = f.ip_id.wrapping_add(1);
        if f.owe_syn {
            f.owe_syn = false;
        } else {
            f.owe_ack = false;
        }
        Some(b)
    }

    /// The next data segment (or FIN) of flow `i`, if its windows allow one.
    fn next_segment<P: SegmentPool>(
        &mut self,
        i: u32,
        now: Instant,
        ts: u32,
        pool: &mut P,
    ) -> Next<P::Buf> {
        let cfg = &self.cfg;
        let f = &mut self.flows[i as usize];
        if f.state != State::Established {
            return Next::Blocked;
        }
        let (off, (end, write_end), retx_one) = if f.retx_one {
            // Fast retransmit: the first unacknowledged segment, regardless of cwnd.
            (f.una, seg_end(cfg, f, f.una, f.max), true)
        } else if f.nxt < f.avail {
            let (end, write_end) = seg_end(cfg, f, f.nxt, f.avail);
            let len = end - f.nxt;
            if end > f.una.saturating_add(f.snd_wnd) {
                return Next::Blocked;
            }
            if (f.nxt - f.una) + len > f.cwnd {
                return Next::Blocked;
            }
            (f.nxt, (end, write_end), false)
        } else if f.nxt == f.total && !f.fin_out && !cfg.blast {
            // Everything is sent: the FIN (RFC 9293 §3.10.4), at the end of the data.
            let total = f.total;
            return match self.build_segment(i, total, 0, true, ts, pool) {
                Some(b) => {
                    let f = &mut self.flows[i as usize];
                    f.fin_sent = true;
                    f.fin_out = true;
                    if f.rto_at == Instant::NEVER {
                        f.rto_at = now + f.rto;
                    }
                    Next::Built(b)
                }
                None => Next::NoBuffer,
            };
        } else {
            if cfg.blast && f.nxt >= f.total && f.state == State::Established {
                f.state = State::Closed;
                self.finished += 1;
            }
            return Next::Blocked;
        };
        let len = (end - off) as usize;
        // The segment ends its write exactly when it reaches the write's end.
        let psh = cfg.psh == PshMode::EveryWrite && (end == write_end || end == f.avail);
        let Some(b) = self.build_segment(i, off, len, psh, ts, pool) else {
            return Next::NoBuffer;
        };
        let blast = self.cfg.blast;
        let f = &mut self.flows[i as usize];
        let retx = off < f.max;
        if retx_one {
            f.retx_one = false;
        } else {
            f.nxt = end;
        }
        if blast {
            f.una = f.nxt;
        }
        f.max = f.max.max(end);
        f.last_send = now;
        if f.ramp_start.is_none() {
            f.ramp_start = Some(now);
        }
        if f.rto_at == Instant::NEVER && !blast {
            f.rto_at = now + f.rto;
        }
        self.stats.segments += 1;
        self.stats.bytes += len as u64;
        if retx {
            self.stats.retransmits += 1;
            self.stats.retransmit_bytes += len as u64;
        }
        if self.first_data.is_none() {
            self.first_data = Some(now);
        }
        self.last_data = Some(now);
        Next::Built(b)
    }

    /// Builds a data segment (or the FIN when `len` is 0 and `fin_or_psh` is set) from
    /// the flow's template: copy the header, patch it, checksum (the payload's sum comes
    /// from [`Payload::sum`]). The payload is copied too, unless the pool has a stamped
    /// buffer that holds it already or carries it by reference (see [`super::pool`]).
    fn build_segment<P: SegmentPool>(
        &mut self,
        i: u32,
        off: u64,
        len: usize,
        fin_or_psh: bool,
        ts: u32,
        pool: &mut P,
    ) -> Option<P::Buf> {
        let f = &mut self.flows[i as usize];
        // Where the payload starts in the pattern's period, without dividing per segment.
        let start = if len > 0 {
            (off - floor_to(&mut f.stamp_base, off, self.payload.period() as u64)) as usize
        } else {
            0
        };
        let stamped = len > 0 && len <= self.stamp_len && start == 0;
        let shared = if stamped || len == 0 {
            None
        } else {
            pool.alloc_shared(start, len)
        };
        let mut b = if stamped {
            let b = pool.alloc_stamped(len)?;
            self.stats.stamped += 1;
            b
        } else if let Some(b) = shared {
            self.stats.shared += 1;
            b
        } else {
            let mut b = pool.alloc(HDR_LEN + len)?;
            b.data_mut()[HDR_LEN..HDR_LEN + len]
                .copy_from_slice(self.payload.bytes_from(start, len));
            b
        };
        let d = b.data_mut();
        d[..HDR_LEN].copy_from_slice(&f.hdr);
        let tcp_len = (TCP_HDR_LEN + len) as u16;
        d[IP + 2..IP + 4].copy_from_slice(&(20 + tcp_len).to_be_bytes());
        let ip_id = f.ip_id;
        d[IP + 4..IP + 6].copy_from_slice(&ip_id.to_be_bytes());
        f.ip_id = f.ip_id.wrapping_add(1);
        let seq = f.iss + 1 + off as usize;
        d[TCP + 4..TCP + 8].copy_from_slice(&seq.get().to_be_bytes());
        d[TCP + 8..TCP + 12].copy_from_slice(&f.rcv_nxt.get().to_be_bytes());
        let mut flags = TcpFlags::ACK;
        if fin_or_psh {
            flags |= if len == 0 {
                TcpFlags::FIN
            } else {
                TcpFlags::PSH
            };
        }
        d[TCP + 13] = flags.0;
        d[TSVAL..TSVAL + 4].copy_from_slice(&ts.to_be_bytes());
        d[TSECR..TSECR + 4].copy_from_slice(&f.ts_recent.to_be_bytes());
        let offload = self.cfg.tx_csum_offload
            && b.request_tx_checksum(TxChecksumOffload {
                l2_len: ethernet::HEADER_LEN as u8,
                l3_len: 20,
                ipv4: true,
            });
        let d = b.data_mut();
        d[IP + 10..IP + 12].fill(0);
        d[TCP + 16..TCP + 18].fill(0);
        let pseudo = f.pseudo + u64::from(tcp_len);
        if offload {
            d[TCP + 16..TCP + 18].copy_from_slice(&checksum::fold(pseudo).to_be_bytes());
        } else {
            // From the flow's fixed sums and this segment's fields: reading back the
            // header just written would wait for its stores (and for the line, when
            // another core freed the mbuf).
            let words = |x: u32| u64::from(x >> 16) + u64::from(x & 0xffff);
            let ip = f.ip_fixed + u64::from(20 + tcp_len) + u64::from(ip_id);
            d[IP + 10..IP + 12].copy_from_slice(&(!checksum::fold(ip)).to_be_bytes());
            let hdr = pseudo
                + f.tcp_fixed
                + words(seq.get())
                + words(f.rcv_nxt.get())
                + u64::from(flags.0)
                + words(ts)
                + words(f.ts_recent);
            let sum = hdr + u64::from(self.payload.sum_from(start, len));
            d[TCP + 16..TCP + 18].copy_from_slice(&(!checksum::fold(sum)).to_be_bytes());
        }
        Some(b)
    }
}

/// The sums of `hdr`'s IPv4 header and TCP header (with options) over the fields that
/// are the same in every segment of the flow: the total length, IP ID, both checksums,
/// the sequence and ACK numbers, the flags byte, TSval and TSecr are taken as zero.
fn fixed_sums(hdr: &[u8; HDR_LEN]) -> (u64, u64) {
    let mut h = *hdr;
    for r in [
        IP + 2..IP + 6,     // total length, ID
        IP + 10..IP + 12,   // header checksum
        TCP + 4..TCP + 12,  // sequence and ACK numbers
        TCP + 13..TCP + 14, // flags
        TCP + 16..TCP + 18, // checksum
        TSVAL..TSECR + 4,
    ] {
        h[r].fill(0);
    }
    (
        checksum::add(0, &h[IP..TCP]),
        checksum::add(0, &h[TCP..HDR_LEN]),
    )
}

/// What [`Sender::next_segment`] produced.
enum Next<B> {
    Built(B),
    Blocked,
    NoBuffer,
}

/// End offset of the segment starting at `off`: one MSS, not past `limit`, and with
/// `--psh every-write` not past the end of the write it belongs to (the pushed write ends
/// its segment). Without PSH a bulk sender's writes pack into full-sized segments across
/// write boundaries, as Linux's `tcp_sendmsg` appends to the unsent tail skb: a 64 KiB
/// write is not 45 segments and a 376-byte one (which would also end every GRO run at
/// the write boundary, `len < gso_size`).
///
/// Returned with the end of the write the segment belongs to (`u64::MAX` without
/// `--psh every-write`).
#[inline]
fn seg_end(cfg: &GenConfig, f: &mut Flow, off: u64, limit: u64) -> (u64, u64) {
    let end = (off + u64::from(f.mss)).min(limit);
    if cfg.psh == PshMode::EveryWrite {
        let ws = u64::from(cfg.write_size);
        let write_end = floor_to(&mut f.write_base, off, ws).saturating_add(ws);
        (end.min(write_end), write_end)
    } else {
        (end, u64::MAX)
    }
}

/// The multiple of `step` (> 0) at or below `x`, found from `base`, the one found last
/// time, which it updates: a flow's offsets mostly rise by less than `step` from one call
/// to the next, so this is a compare or two instead of a 64-bit division (`perf` put one
/// such division at 5% of the generator's samples).
#[inline]
fn floor_to(base: &mut u64, x: u64, step: u64) -> u64 {
    // x below base wraps to a huge distance: it takes the division too.
    let d = x.wrapping_sub(*base);
    if d >= step {
        *base = if d / 2 < step {
            *base + step
        } else {
            x / step * step
        };
    }
    *base
}

/// Why [`read_tcp`] gave no segment.
enum RxDrop {
    /// Not a well-formed IPv4 TCP frame.
    NotTcp,
    /// The IPv4 header or TCP checksum is wrong.
    BadChecksum,
}

/// The TCP segment in an Ethernet/IPv4 frame, with the destination address (the flow's
/// source), its checksums checked: taken from the NIC's verdict `csum` where it has one,
/// verified in software where not.
fn read_tcp(frame: &[u8], csum: RxChecksum) -> Result<RxSeg, RxDrop> {
    use RxDrop::NotTcp;
    let et = frame.get(ethernet::field::ETHERTYPE).ok_or(NotTcp)?;
    if u16::from_be_bytes([et[0], et[1]]) != ethertype::IPV4 {
        return Err(NotTcp);
    }
    let l3 = frame.get(ethernet::HEADER_LEN..).ok_or(NotTcp)?;
    let ip = ipv4::Packet::new_checked(l3).map_err(|_| NotTcp)?;
    if ip.protocol() != 6 {
        return Err(NotTcp);
    }
    let seg = ip.payload();
    let p = tcp::Packet::new_checked(seg).map_err(|_| NotTcp)?;
    let repr = tcp::Repr::parse(&p).map_err(|_| NotTcp)?;
    let sums_ok = csum.ip.holds(|| ip.verify_checksum())
        && csum.l4.holds(|| {
            let len = u16::try_from(seg.len()).unwrap_or(u16::MAX);
            p.verify_checksum(checksum::pseudo_v4(ip.src_addr(), ip.dst_addr(), 6, len))
        });
    if !sums_ok {
        return Err(RxDrop::BadChecksum);
    }
    Ok(RxSeg {
        dst_ip: Ipv4Addr::from(ip.dst_addr()),
        repr,
        payload_len: p.payload().len(),
    })
}

#[cfg(test)]
mod tests {
    use super::floor_to;

    /// `floor_to` agrees with the division it replaces, whatever the order of the offsets:
    /// rising by less than a step, by one or several steps, falling (retransmissions),
    /// landing on multiples.
    #[test]
    fn floor_to_matches_division() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in [1u64, 3, 1448, 65_160, 1 << 20] {
            let mut base = 0;
            let mut off = 0u64;
            for _ in 0..20_000 {
                // xorshift: moves of 0..3 steps forward, now and then a jump back.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                off = match x % 16 {
                    0 => off / 2,
                    1 => off + 3 * step,
                    2 => (off / step + 1) * step,
                    _ => off + x % (step + 1),
                };
                assert_eq!(
                    floor_to(&mut base, off, step),
                    off / step * step,
                    "step {step} off {off}"
                );
            }
        }
    }
}
