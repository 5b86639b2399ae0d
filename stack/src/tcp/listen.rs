//! LISTEN and SYN-RECEIVED: the listening ports, the half-open table, SYN cookies, and the
//! step that turns a completed handshake into a connection.
//!
//! Read first: RFC 9293 §3.10.7.1-2 (CLOSED and LISTEN) and §3.10.7.4 for SYN-RECEIVED,
//! RFC 4987 §3.6 and Linux `net/ipv4/syncookies.c` (SYN cookies; the arithmetic is in
//! `cookie.rs`), RFC 6528 (ISNs).
//!
//! [`Tcp::handle_segment`] hands a segment here only when no connection has its flow.
//! [`Tcp::listen_segment`] either answers it (a SYN-ACK, a RST, a drop) or establishes the
//! connection it completes; the segment then goes on to that connection like any other
//! (the handshake's final ACK may carry data).

use arrayvec::ArrayVec;

use super::conn::{Conn, ConnParams};
use super::cookie;
use super::table::{Keyed, Table};
use super::timer::Kind;
use super::{ConnId, DropReason, Event, Tcp, TcpError};
use crate::ack::AckPolicy;
use crate::buf::PacketBuf;
use crate::flow::FlowKey;
use crate::segment::Segment;
use crate::seq::SeqNumber;
use crate::tcp::rtt::RttEstimator;
use crate::time::{Duration, Instant};
use crate::wire::{TcpFlags, Timestamp};

/// The first SYN-ACK retransmission timeout (RFC 6298 §2.1: 1 s), doubled on each retry.
const SYNACK_RTO: Duration = Duration::from_secs(1);
/// Cookie ACKs are accepted for this long after the half-open table last overflowed
/// (Linux `tcp_synq_no_recent_overflow`: 2 minutes).
const COOKIE_WINDOW: Duration = Duration::from_secs(120);

/// A SYN-RECEIVED entry.
#[derive(Clone, Debug)]
pub(super) struct HalfOpen {
    pub(super) flow: FlowKey,
    pub(super) local_mac: [u8; 6],
    pub(super) peer_mac: [u8; 6],
    pub(super) iss: SeqNumber,
    pub(super) irs: SeqNumber,
    peer_mss: u16,
    pub(super) peer_wscale: Option<u8>,
    pub(super) sack: bool,
    pub(super) ts_recent: Option<u32>,
    policy: AckPolicy,
    first_sent: Instant,
    retries: u8,
    deadline: Instant,
}

impl Keyed for HalfOpen {
    fn key(&self) -> &FlowKey {
        &self.flow
    }
}

/// The listening side of one core's TCP.
pub(super) struct Listeners {
    /// Ports listened on, each with the ACK policy its connections get.
    ports: ArrayVec<(u16, AckPolicy), 64>,
    /// SYN-RECEIVED entries.
    half: Table<HalfOpen>,
    /// When the half-open table last overflowed: cookie ACKs are checked only for
    /// [`COOKIE_WINDOW`] after it.
    last_overflow: Option<Instant>,
}

impl Listeners {
    pub(super) fn new(max_half_open: usize) -> Self {
        Listeners {
            ports: ArrayVec::new(),
            half: Table::new(max_half_open),
            last_overflow: None,
        }
    }

    pub(super) fn add(&mut self, port: u16, policy: AckPolicy) -> Result<(), TcpError> {
        if self.ports.iter().any(|(p, _)| *p == port) {
            return Err(TcpError::AlreadyListening);
        }
        self.ports
            .try_push((port, policy))
            .map_err(|_| TcpError::TooManyListeners)
    }

    pub(super) fn half_open_count(&self) -> usize {
        self.half.len()
    }

    /// `flow`'s local port is listened on, or a half-open entry has the 4-tuple: an
    /// active open may not take it.
    pub(super) fn holds(&self, flow: &FlowKey) -> bool {
        self.ports.iter().any(|(p, _)| *p == flow.dport) || self.half.find(flow).is_some()
    }
}

impl<B: PacketBuf> Tcp<B> {
    /// A segment for no connection: LISTEN and SYN-RECEIVED (RFC 9293 §3.10.7.1-3).
    /// Returns the slot of the connection the segment completed, which it goes on to;
    /// `None` when it was answered or dropped here.
    pub(super) fn listen_segment(&mut self, now: Instant, seg: &Segment<B>) -> Option<u32> {
        let port = seg.flow.dport;
        let Some(&(_, policy)) = self.listeners.ports.iter().find(|(p, _)| *p == port) else {
            self.ctx.stats.dropped(DropReason::NoListener);
            if !seg.flags.contains(TcpFlags::RST) {
                self.ctx.stats.conns_refused += 1;
            }
            self.send_rst_for(seg);
            return None;
        };
        let f = seg.flags;
        if let Some(slot) = self.listeners.half.find(&seg.flow) {
            return self.half_open_segment(now, slot, seg);
        }
        if f.contains(TcpFlags::RST) {
            self.ctx.stats.dropped(DropReason::ListenerDrop);
            return None;
        }
        if f.contains(TcpFlags::ACK) {
            if !f.contains(TcpFlags::SYN) {
                if let Some(slot) = self.try_cookie(now, seg, policy) {
                    return Some(slot);
                }
            }
            self.ctx.stats.dropped(DropReason::BadCookie);
            self.ctx.stats.conns_refused += 1;
            self.send_rst_for(seg);
            return None;
        }
        if !f.contains(TcpFlags::SYN) {
            self.ctx.stats.dropped(DropReason::ListenerDrop);
            return None;
        }
        self.ctx.stats.syns_received += 1;
        let o = seg.opts;
        // RFC 9293 §3.7.1 (MUST-15): without the option, 536 for IPv4, 1220 for IPv6.
        let peer_mss = o.mss.unwrap_or(if seg.flow.v6 { 1220 } else { 536 });
        let ts_recent = o.timestamp.map(|t| t.tsval);
        if self.listeners.half.is_full() {
            self.syn_cookie(now, seg);
            return None;
        }
        let iss = cookie::isn(&self.key, &seg.flow, now.as_nanos());
        let h = HalfOpen {
            flow: seg.flow,
            local_mac: seg.local_mac,
            peer_mac: seg.peer_mac,
            iss,
            irs: seg.seq,
            peer_mss,
            peer_wscale: o.wscale,
            sack: o.sack_permitted,
            ts_recent,
            policy,
            first_sent: now,
            retries: 0,
            deadline: now + SYNACK_RTO,
        };
        self.queue_synack(now, &h);
        let d = h.deadline;
        if let Ok((slot, gen)) = self.listeners.half.insert(h) {
            self.ctx.timers.arm(Kind::Half, slot, gen, Some(d));
        }
        None
    }

    /// RFC 4987 §3.6: answer with a SYN cookie instead of keeping state (Linux
    /// `cookie_v4_init_sequence`, `cookie_init_timestamp`).
    fn syn_cookie(&mut self, now: Instant, seg: &Segment<B>) {
        self.listeners.last_overflow = Some(now);
        let o = seg.opts;
        let (idx, mss) = cookie::mss_index(o.mss.unwrap_or(536), seg.flow.v6);
        let count = minutes(now);
        let iss = SeqNumber(cookie::make_cookie(
            &self.key, &seg.flow, seg.seq, count, idx,
        ));
        // Without timestamps the peer's window scale and SACK-permitted cannot be
        // remembered, so neither is offered (as Linux does).
        let ts = o.timestamp.map(|t| Timestamp {
            tsval: cookie::cookie_tsval(self.ts_clock(&seg.flow, now), o.wscale, o.sack_permitted),
            tsecr: t.tsval,
        });
        let (ws, sack) = if ts.is_some() {
            (o.wscale.map(|_| self.rcv_wscale), o.sack_permitted)
        } else {
            (None, false)
        };
        let _ = mss;
        self.ctx.stats.syn_cookies_sent += 1;
        self.queue_cookie_synack(seg, iss, ts, ws, sack);
    }

    /// `cookie_v4_check`: an ACK to a listener may complete a cookie handshake. Returns the
    /// slot of the connection it established.
    fn try_cookie(&mut self, now: Instant, seg: &Segment<B>, policy: AckPolicy) -> Option<u32> {
        match self.listeners.last_overflow {
            Some(t) if now - t <= COOKIE_WINDOW => {}
            _ => return None,
        }
        let iss = SeqNumber(seg.ack.get().wrapping_sub(1));
        let irs = SeqNumber(seg.seq.get().wrapping_sub(1));
        let idx = cookie::check_cookie(&self.key, &seg.flow, iss.get(), irs, minutes(now))?;
        let table = if seg.flow.v6 {
            &cookie::MSS_TABLE_V6
        } else {
            &cookie::MSS_TABLE
        };
        let peer_mss = table.get(idx as usize).copied().unwrap_or(536);
        let (ts_recent, wscale, sack) = match seg.opts.timestamp {
            Some(t) => {
                let (ws, sack) = cookie::cookie_decode_ts(t.tsecr);
                (Some(t.tsval), ws, sack)
            }
            None => (None, None, false),
        };
        let h = HalfOpen {
            flow: seg.flow,
            local_mac: seg.local_mac,
            peer_mac: seg.peer_mac,
            iss,
            irs,
            peer_mss,
            peer_wscale: wscale,
            sack,
            ts_recent,
            policy,
            first_sent: now,
            retries: 1,
            deadline: now,
        };
        let slot = self.establish(now, &h, seg.window)?;
        self.ctx.stats.syn_cookies_accepted += 1;
        Some(slot)
    }

    /// SYN-RECEIVED (RFC 9293 §3.10.7.4 for that state). Returns the slot of the
    /// connection the handshake's ACK established.
    fn half_open_segment(&mut self, now: Instant, slot: u32, seg: &Segment<B>) -> Option<u32> {
        let h = self.listeners.half.get(slot).cloned()?;
        let f = seg.flags;
        if f.contains(TcpFlags::RST) {
            // RFC 5961 §3.2 applies here too: only an exact RST counts.
            if seg.seq == h.irs + 1 {
                self.listeners.half.remove(slot);
                self.ctx.stats.resets_received += 1;
            } else {
                self.ctx.stats.dropped(DropReason::RstOutOfWindow);
            }
            return None;
        }
        if f.contains(TcpFlags::SYN) {
            if seg.seq == h.irs && !f.contains(TcpFlags::ACK) {
                // A retransmitted SYN: our SYN-ACK was lost.
                self.queue_synack(now, &h);
            } else {
                self.ctx.stats.dropped(DropReason::SynInWindow);
            }
            return None;
        }
        if !f.contains(TcpFlags::ACK) {
            self.ctx.stats.dropped(DropReason::NoAck);
            return None;
        }
        if seg.ack != h.iss + 1 {
            self.ctx.stats.dropped(DropReason::BadHandshakeAck);
            self.send_rst_for(seg);
            return None;
        }
        self.listeners.half.remove(slot);
        let established = self.establish(now, &h, seg.window);
        if established.is_none() {
            self.send_rst_for(seg);
        }
        established
    }

    /// SYN-ACK retransmission with exponential backoff (RFC 6298 §5.5, Linux
    /// `tcp_synack_retries`), or the entry is dropped.
    pub(super) fn half_open_timeout(&mut self, now: Instant, slot: u32, gen: u32) {
        if self.listeners.half.gen(slot) != gen {
            return;
        }
        let Some(h) = self.listeners.half.get_mut(slot) else {
            return;
        };
        if h.deadline > now {
            let d = h.deadline;
            self.ctx.timers.arm(Kind::Half, slot, gen, Some(d));
            return;
        }
        if h.retries >= self.cfg.synack_retries {
            self.ctx.stats.dropped(DropReason::SynAckRetriesExhausted);
            self.listeners.half.remove(slot);
            return;
        }
        h.retries += 1;
        h.deadline = now + Duration::from_nanos(SYNACK_RTO.as_nanos() << h.retries);
        let h = h.clone();
        self.ctx.timers.arm(Kind::Half, slot, gen, Some(h.deadline));
        self.queue_synack(now, &h);
    }

    /// Creates the connection for a completed handshake; returns its slot, or `None` when
    /// the connection table is full.
    fn establish(&mut self, now: Instant, h: &HalfOpen, peer_window: u16) -> Option<u32> {
        let srtt = if h.retries == 0 {
            now - h.first_sent
        } else {
            Duration::ZERO
        };
        let p = ConnParams {
            flow: h.flow,
            local_mac: h.local_mac,
            peer_mac: h.peer_mac,
            iss: h.iss,
            irs: h.irs,
            rcv_buf: self.cfg.rcv_buf,
            rcv_wscale: Some(self.rcv_wscale),
            snd_wscale: h.peer_wscale,
            sack: h.sack,
            ts_recent: h.ts_recent,
            ts_offset: self.ts_offset(&h.flow),
            advmss: self.advmss(h.flow.v6),
            peer_mss: h.peer_mss,
            peer_window: u32::from(peer_window) << h.peer_wscale.unwrap_or(0).min(14),
            ack: h.policy,
            srtt,
            ttl: self.cfg.ttl,
            ooo_limit: self.cfg.ooo_conn_bytes,
            rxq_slices: self.cfg.rxq_slices,
            rxq_slice_bytes: self.cfg.rxq_slice_bytes,
            syn_window: self.cfg.syn_window(),
            ack_queue: self.cfg.ack_queue.clamp(1, 1024),
            fin_retries: self.cfg.fin_retries,
            time_wait: self.cfg.time_wait,
            snd_buf: self.cfg.snd_buf,
            snd_slices: self.cfg.snd_slices.max(1),
            cc: self.cfg.cc,
            max_retries: self.cfg.max_retries,
            loss_detection: self.cfg.loss_detection,
            rtt: self.handshake_rtt(now, h.first_sent, h.retries > 0),
        };
        match self.conns.insert(Conn::new(p)) {
            Ok((slot, gen)) => {
                let id = ConnId { slot, gen };
                if let Some(c) = self.conns.get_mut(slot) {
                    c.id = id;
                }
                self.ctx.stats.conns_opened += 1;
                self.ctx.event(Event::Opened(id));
                Some(slot)
            }
            Err(_) => {
                self.ctx.stats.dropped(DropReason::ConnTableFull);
                self.ctx.stats.conns_refused += 1;
                None
            }
        }
    }

    /// The MSS we advertise: the MTU less the IPv4 or IPv6 and TCP headers.
    pub(super) fn advmss(&self, v6: bool) -> u16 {
        self.cfg.mtu.saturating_sub(if v6 { 60 } else { 40 })
    }

    /// The RTT estimator of a connection whose handshake went out at `first_sent` and
    /// completed at `now`: one sample unless the SYN-ACK was retransmitted (Karn's rule,
    /// RFC 6298 §3), then the handshake's end (§5.7).
    pub(super) fn handshake_rtt(
        &self,
        now: Instant,
        first_sent: Instant,
        retransmitted: bool,
    ) -> RttEstimator {
        let mut r = RttEstimator::new(self.cfg.rto);
        let _ = r.sample_from_ack(now, first_sent, retransmitted);
        r.handshake_complete(retransmitted);
        r
    }

    /// The flow's offset on our timestamp clock (RFC 7323 §5.4).
    pub(super) fn ts_offset(&self, flow: &FlowKey) -> u32 {
        self.key.flow_hash(flow, 0x7473, 0)
    }

    /// Our timestamp clock for `flow` before it has a connection (which keeps its own).
    pub(super) fn ts_clock(&self, flow: &FlowKey, now: Instant) -> u32 {
        ((now.as_nanos() / 1_000_000) as u32).wrapping_add(self.ts_offset(flow))
    }
}

/// The SYN cookie clock: minutes since the driver's clock origin.
fn minutes(now: Instant) -> u32 {
    (now.as_nanos() / 60_000_000_000) as u32
}
