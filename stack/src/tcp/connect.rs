//! Active open: [`Tcp::connect`], SYN-SENT, the SYN-RECEIVED of a simultaneous open, SYN
//! retransmission, and ephemeral ports.
//!
//! Read first: RFC 9293 §3.5 (the three-way handshake and simultaneous open), §3.10.1
//! (OPEN), §3.10.7.3 (a segment in SYN-SENT: the ACK, RST and SYN checks in that order),
//! RFC 6298 §2.1 and §5 (the initial RTO and its backoff, which the SYN's timer follows),
//! RFC 6056 §3.3.3 (ephemeral port selection), RFC 7323 §2.2 and §3.2 and RFC 2018 §2
//! (which options the SYN offers and which the SYN-ACK may answer), Linux
//! `tcp_rcv_synsent_state_process`, `tcp_connect`, `__inet_hash_connect`,
//! `tcp_syn_retries`.
//!
//! An active open is a connection in the table from the start, so its [`ConnId`] stays
//! valid through the handshake. Until the peer's SYN arrives it knows neither the peer's
//! sequence numbers nor its options: it holds only what the SYN needs (`ActiveOpen`, the
//! header template, ISS and the RTT estimator). The peer's SYN (with or without an ACK)
//! sets the connection up in full with the options negotiated, exactly as the listener
//! does for a passive open (`Conn::new`, the same `ConnParams`); the SYN's options are
//! written by `ack::template::syn_options`, as the SYN-ACK's are.
//!
//! # Ephemeral ports for a receive queue
//!
//! With several receive queues, the NIC's RSS (the Toeplitz hash of the 4-tuple and the
//! redirection table, [`crate::rss`]) decides which queue, and so which core, the peer's
//! answers reach. A core that opens a connection needs them on its own queue: it owns the
//! connection's state and nothing else would find it. [`ConnectOpts::rx_queue`] asks for
//! that: the RFC 6056 walk over the ephemeral range (below) then skips every port whose
//! reply 4-tuple (the peer's address and port, ours and the candidate) the port's RSS
//! ([`TcpConfig::rss`](super::TcpConfig::rss)) sends to another queue, and takes the
//! first that is left and free. The rule is F-Stack's: its FreeBSD port search
//! (`in_pcb_lport_dest` in `freebsd/netinet/in_pcb.c`) goes on past a free port until
//! `ff_rss_check` (`lib/ff_dpdk_if.c`, the Toeplitz hash in software with the port's key
//! and RETA) says the reply lands on this core's queue. mTCP does the same up front: each
//! core's address pool holds only the ports `GetRSSCPUCore` maps to it (`addr_pool.c`,
//! `rss.c`). Linux has no such rule: `__inet_hash_connect` ignores RSS, and the flow is
//! steered to the socket's CPU afterwards (RFS, aRFS), which a poll-mode stack with one
//! state table per core cannot do. With a round-robin table over `n` queues about one
//! port in `n` qualifies, so the range holds about `range / n` connections per peer and
//! core; each candidate costs 16 XORs (the hash is linear in the port's bits).
//!
//! The stack has no ARP or neighbour discovery for active opens (it answers requests, it
//! does not make them): the caller passes the next hop's MAC address in [`ConnectOpts`]
//! (the peer's, or its router's), as it knows its own.

use core::net::{IpAddr, SocketAddr};

use super::conn::{ActiveOpen, Conn, ConnParams, SndTimer};
use super::output::Sent;
use super::timer::Kind;
use super::{ConnId, DropReason, Event, State, Tcp, TcpError};
use crate::ack::template::{syn_options, TcpFields};
use crate::ack::{AckPolicy, AckReason};
use crate::buf::{BufPool, PacketBuf};
use crate::flow::{FlowKey, NO_VLAN};
use crate::segment::Segment;
use crate::seq::SeqNumber;
use crate::tcp::rtt::RttEstimator;
use crate::time::{Duration, Instant};
use crate::wire::{TcpFlags, Timestamp};

use std::ops::ControlFlow;

/// How [`Tcp::connect`] opens a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectOpts {
    /// Our MAC address (the port's).
    pub local_mac: [u8; 6],
    /// The next hop's MAC address: the peer's on the same link, else its router's. weir
    /// resolves no addresses for active opens, so the caller supplies it (from its ARP
    /// or neighbour table, or its configuration).
    pub peer_mac: [u8; 6],
    /// 802.1Q VLAN id to send on, if tagged.
    pub vlan: Option<u16>,
    /// The local port; `None` picks an ephemeral one from
    /// [`TcpConfig::ephemeral_ports`](super::TcpConfig::ephemeral_ports).
    pub local_port: Option<u16>,
    /// The ACK policy of the connection (as a listener gives its connections).
    pub ack: AckPolicy,
    /// The receive queue the peer's answers must arrive on (RSS), usually the opening
    /// core's own: the ephemeral port is chosen among those whose reply 4-tuple
    /// [`TcpConfig::rss`](super::TcpConfig::rss) maps to this queue (see the module
    /// documentation). With [`ConnectOpts::local_port`] set, that port must map to it.
    /// `None` (the default): any queue.
    pub rx_queue: Option<u16>,
}

impl ConnectOpts {
    /// Untagged, an ephemeral port, Linux's ACK policy.
    pub fn new(local_mac: [u8; 6], peer_mac: [u8; 6]) -> Self {
        ConnectOpts {
            local_mac,
            peer_mac,
            vlan: None,
            local_port: None,
            ack: AckPolicy::linux(),
            rx_queue: None,
        }
    }
}

impl<B: PacketBuf> Tcp<B> {
    /// Opens a connection from `local` (one of our addresses) to `remote` (RFC 9293
    /// §3.10.1, active OPEN): a SYN offering our MSS, window scale, SACK-permitted and
    /// timestamps leaves at the next [`Tcp::poll_tx`], and is retransmitted after 1 s,
    /// 2 s, 4 s, ... (RFC 6298 §2.1 and §5.5, through the connection's RTT estimator)
    /// up to [`TcpConfig::syn_retries`](super::TcpConfig::syn_retries) times. Then:
    ///
    /// - [`Event::Opened`] when the handshake completes, with the options the peer's
    ///   SYN-ACK agreed to (RFC 7323 §2.2, §3.2; RFC 2018 §2); data may then be sent;
    /// - [`Event::Reset`] when the open fails: the peer refused it (a RST acknowledging
    ///   our SYN) or every SYN went unanswered. The handle is then invalid.
    ///
    /// The local port is `opts.local_port`, or an ephemeral one (RFC 6056 §3.3.3) that no
    /// connection in the table uses with this peer, TIME-WAIT included, and that no
    /// listener or half-open entry holds; with `opts.rx_queue`, one whose answers the
    /// port's RSS sends to that queue ([`TcpError::RxQueue`] if that cannot be asked). IPv4 or IPv6: `local` and `remote` must be the
    /// same family. A SYN-SENT connection can be closed (it is forgotten) but not written
    /// to ([`TcpError::NotEstablished`]).
    pub fn connect(
        &mut self,
        now: Instant,
        local: IpAddr,
        remote: SocketAddr,
        opts: ConnectOpts,
    ) -> Result<ConnId, TcpError> {
        let mut flow = match (local, remote.ip()) {
            (IpAddr::V4(l), IpAddr::V4(r)) => FlowKey::v4(r, remote.port(), l, 0),
            (IpAddr::V6(l), IpAddr::V6(r)) => FlowKey::v6(r, remote.port(), l, 0),
            _ => return Err(TcpError::InvalidAddress),
        };
        if remote.port() == 0 || opts.local_port == Some(0) {
            return Err(TcpError::InvalidAddress);
        }
        flow.vlan = opts.vlan.map_or(NO_VLAN, |v| v & 0x0fff);
        if let Some(q) = opts.rx_queue {
            let known = self
                .cfg
                .rss
                .as_ref()
                .is_some_and(|r| r.reta().entries().contains(&q));
            if !known {
                return Err(TcpError::RxQueue);
            }
        }
        if self.conns.is_full() {
            return Err(TcpError::TooManyConnections);
        }
        flow.dport = match opts.local_port {
            Some(p) => {
                if !self.lands(&flow, opts.rx_queue)(p) {
                    return Err(TcpError::RxQueue);
                }
                flow.dport = p;
                if !self.tuple_free(&flow) {
                    return Err(TcpError::PortInUse);
                }
                p
            }
            None => self.ephemeral_port(&flow, opts.rx_queue)?,
        };
        let iss = super::cookie::isn(&self.key, &flow, now.as_nanos());
        let p = self.params(
            &flow,
            (opts.local_mac, opts.peer_mac),
            iss,
            SeqNumber(0),
            opts.ack,
            None,
            RttEstimator::new(self.cfg.rto),
        );
        let Ok((slot, gen)) = self.conns.insert(Conn::new(p)) else {
            return Err(TcpError::TooManyConnections);
        };
        let id = ConnId { slot, gen };
        let retries = self.cfg.syn_retries;
        let Some(c) = self.conns.get_mut(slot) else {
            return Err(TcpError::TooManyConnections);
        };
        c.id = id;
        c.state = State::SynSent;
        c.snd.una = iss;
        c.snd.nxt = iss + 1;
        c.open = Some(ActiveOpen {
            local_mac: opts.local_mac,
            peer_mac: opts.peer_mac,
            first_sent: now,
            retransmitted: false,
            syn_due: true,
            retries,
            wscale: self.rcv_wscale,
            peer_wscale: false,
        });
        c.snd.timer = Some(c.snd.rtt.deadline(now));
        c.snd.timer_kind = SndTimer::Syn;
        c.mark_due(&mut self.ctx);
        self.ctx.timers.arm(Kind::Conn, slot, gen, c.deadline());
        self.ctx.stats.active_opens += 1;
        Ok(id)
    }

    /// No connection or half-open entry has this 4-tuple (TIME-WAIT included), and no
    /// listener has its local port.
    fn tuple_free(&self, flow: &FlowKey) -> bool {
        self.conns.find(flow).is_none() && !self.listeners.holds(flow)
    }

    /// Whether a local port sends the answers on `flow` to `queue` (always, for `None`),
    /// by [`TcpConfig::rss`](super::TcpConfig::rss); `connect` has checked that a queue
    /// asked for has one.
    fn lands<'a>(&'a self, flow: &FlowKey, queue: Option<u16>) -> impl Fn(u16) -> bool + 'a {
        let rss = queue.and_then(|q| Some(self.cfg.rss.as_ref()?.local_port_lands(flow, q)));
        move |p| rss.as_ref().is_none_or(|lands| lands(p))
    }

    /// RFC 6056 §3.3.3 (Algorithm 3, "Simple Hash-Based Port Selection", as Linux's
    /// `__inet_hash_connect` does it): the search starts at a keyed hash of the local and
    /// remote addresses and the remote port plus a counter that advances with each port
    /// handed out, and walks the range once, skipping the ports whose answers would land
    /// on another queue than `queue` (F-Stack's rule, see the module documentation).
    /// `Err` when every port of the range is taken for this peer (or sends elsewhere).
    fn ephemeral_port(&mut self, flow: &FlowKey, queue: Option<u16>) -> Result<u16, TcpError> {
        let (lo, hi) = (
            *self.cfg.ephemeral_ports.start(),
            *self.cfg.ephemeral_ports.end(),
        );
        if lo == 0 || lo > hi {
            return Err(TcpError::NoEphemeralPort);
        }
        let n = u32::from(hi - lo) + 1;
        let offset = self.key.flow_hash(flow, 0x6570_6865, 0);
        let base = offset.wrapping_add(self.next_ephemeral);
        let found = {
            let lands = self.lands(flow, queue);
            let mut f = *flow;
            (0..n).find_map(|i| {
                f.dport = lo + (base.wrapping_add(i) % n) as u16;
                (lands(f.dport) && self.tuple_free(&f)).then_some((i, f.dport))
            })
        };
        let (i, port) = found.ok_or(TcpError::NoEphemeralPort)?;
        self.next_ephemeral = self.next_ephemeral.wrapping_add(i + 1);
        Ok(port)
    }

    /// The set-up parameters of a connection on `flow`: the configuration's, and the
    /// peer's options from its SYN (`None` for the placeholder of SYN-SENT).
    #[allow(clippy::too_many_arguments)]
    fn params(
        &self,
        flow: &FlowKey,
        (local_mac, peer_mac): ([u8; 6], [u8; 6]),
        iss: SeqNumber,
        irs: SeqNumber,
        ack: AckPolicy,
        peer: Option<(&Segment<B>, Duration)>,
        rtt: RttEstimator,
    ) -> ConnParams {
        let advmss = self.advmss(flow.v6);
        let mut p = ConnParams {
            flow: *flow,
            local_mac,
            peer_mac,
            iss,
            irs,
            rcv_buf: self.cfg.rcv_buf,
            rcv_wscale: Some(self.rcv_wscale),
            snd_wscale: None,
            sack: false,
            // Before the peer's SYN: a template with timestamps, which the SYN offers.
            ts_recent: Some(0),
            ts_offset: self.ts_offset(flow),
            advmss,
            peer_mss: advmss,
            peer_window: 0,
            ack,
            srtt: Duration::ZERO,
            ttl: self.cfg.ttl,
            ooo_limit: self.cfg.ooo_conn_bytes,
            // SYN-SENT allocates no queues: the peer's SYN sets the connection up again.
            rxq_slices: 0,
            rxq_slice_bytes: self.cfg.rxq_slice_bytes,
            syn_window: self.cfg.syn_window(),
            ack_queue: 1,
            fin_retries: self.cfg.fin_retries,
            time_wait: self.cfg.time_wait,
            snd_buf: self.cfg.snd_buf,
            snd_slices: self.cfg.snd_slices.max(1),
            cc: self.cfg.cc,
            max_retries: self.cfg.max_retries,
            loss_detection: self.cfg.loss_detection,
            rtt,
        };
        if let Some((seg, srtt)) = peer {
            let o = &seg.opts;
            p.snd_wscale = o.wscale;
            p.sack = o.sack_permitted;
            p.ts_recent = o.timestamp.map(|t| t.tsval);
            // RFC 9293 §3.7.1 (MUST-15): without the option, 536 for IPv4, 1220 for IPv6.
            p.peer_mss = o.mss.unwrap_or(if flow.v6 { 1220 } else { 536 });
            // RFC 7323 §2.2: the window of a SYN is never scaled.
            p.peer_window = u32::from(seg.window);
            p.srtt = srtt;
            p.rxq_slices = self.cfg.rxq_slices;
            p.ack_queue = self.cfg.ack_queue.clamp(1, 1024);
        }
        p
    }

    /// A segment for a connection in SYN-SENT or (after a simultaneous open)
    /// SYN-RECEIVED.
    pub(super) fn opening_segment(&mut self, now: Instant, slot: u32, seg: &mut Segment<B>) {
        let Some(c) = self.conns.get(slot) else {
            return;
        };
        match c.state {
            State::SynSent => self.syn_sent_segment(now, slot, seg),
            State::SynReceived => self.syn_received_segment(now, slot, seg),
            _ => {}
        }
    }

    /// RFC 9293 §3.10.7.3, SYN-SENT: first the ACK (it must acknowledge our SYN, else a
    /// RST answers it), then the RST (it refuses the open only with an acceptable ACK),
    /// then the SYN (with an ACK: ESTABLISHED; without: a simultaneous open, SYN-RECEIVED);
    /// anything else is dropped.
    fn syn_sent_segment(&mut self, now: Instant, slot: u32, seg: &mut Segment<B>) {
        let Some(c) = self.conns.get(slot) else {
            return;
        };
        let Some(open) = c.open else {
            return;
        };
        let (iss, nxt, id, flow, policy) = (c.snd.una, c.snd.nxt, c.id, c.flow, c.ack.policy());
        let f = seg.flags;
        let has_ack = f.contains(TcpFlags::ACK);
        // First, the ACK bit: SEG.ACK =< ISS or SEG.ACK > SND.NXT is unacceptable.
        if has_ack && (seg.ack <= iss || seg.ack > nxt) {
            if f.contains(TcpFlags::RST) {
                self.ctx.stats.dropped(DropReason::SynSentDrop);
            } else {
                // <SEQ=SEG.ACK><CTL=RST>
                self.ctx.stats.dropped(DropReason::BadHandshakeAck);
                self.send_rst_for(seg);
            }
            return;
        }
        // Second, the RST bit: with an acceptable ACK the peer refused the open (RFC
        // 5961 §3.2 needs no more in SYN-SENT: the ACK must acknowledge our SYN).
        if f.contains(TcpFlags::RST) {
            if has_ack {
                self.refused(slot);
            } else {
                self.ctx.stats.dropped(DropReason::SynSentDrop);
            }
            return;
        }
        // Fourth, the SYN bit (weir keeps no security compartment: the third step has
        // nothing to compare). Fifth: neither SYN nor RST, drop.
        if !f.contains(TcpFlags::SYN) {
            self.ctx.stats.dropped(DropReason::SynSentDrop);
            return;
        }
        // The handshake's RTT sample: the SYN's send time, unless it was retransmitted
        // (Karn's rule, RFC 6298 §3); RFC 6298 §5.7 for the RTO after the handshake.
        let mut rtt = c.snd.rtt.clone();
        let srtt = if has_ack {
            let s = rtt
                .sample_from_ack(now, open.first_sent, open.retransmitted)
                .unwrap_or(Duration::ZERO);
            rtt.handshake_complete(open.retransmitted);
            s
        } else {
            Duration::ZERO
        };
        let p = self.params(
            &flow,
            (open.local_mac, open.peer_mac),
            iss,
            seg.seq,
            policy,
            Some((seg, srtt)),
            rtt,
        );
        let Some(c) = self.conns.get_mut(slot) else {
            return;
        };
        *c = Conn::new(p);
        c.id = id;
        if !has_ack {
            // A simultaneous open (RFC 9293 §3.5, Figure 8): SYN-RECEIVED, our SYN-ACK
            // <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK> answers, on the SYN's timer.
            c.state = State::SynReceived;
            c.snd.una = iss;
            c.snd.nxt = iss + 1;
            c.open = Some(ActiveOpen {
                syn_due: true,
                peer_wscale: seg.opts.wscale.is_some(),
                ..open
            });
            c.snd.timer = Some(c.snd.rtt.deadline(now));
            c.snd.timer_kind = SndTimer::Syn;
            c.mark_due(&mut self.ctx);
            let d = c.deadline();
            self.ctx.timers.arm(Kind::Conn, id.slot, id.gen, d);
            return;
        }
        // ESTABLISHED: <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>.
        c.ack.ack_now(AckReason::Handshake);
        self.ctx.stats.conns_opened += 1;
        self.ctx.event(Event::Opened(id));
        self.rest_of_segment(now, slot, seg);
    }

    /// The peer refused our open with a RST: the application hears `Event::Reset`.
    fn refused(&mut self, slot: u32) {
        self.ctx.stats.resets_received += 1;
        self.ctx.stats.active_open_failures += 1;
        if let Some(c) = self.conns.get_mut(slot) {
            c.reset(&mut self.ctx, true);
        }
        self.free_conn(slot);
    }

    /// RFC 9293 §3.10.7.4 for SYN-RECEIVED reached from SYN-SENT: an exact RST refuses
    /// the open (RFC 5961 §3.2); the peer's SYN again gets our SYN-ACK again; an ACK of
    /// our SYN (SND.UNA < SEG.ACK =< SND.NXT, in a SYN-ACK or a plain ACK) completes it,
    /// any other ACK gets a RST <SEQ=SEG.ACK>.
    fn syn_received_segment(&mut self, now: Instant, slot: u32, seg: &mut Segment<B>) {
        let Some(c) = self.conns.get_mut(slot) else {
            return;
        };
        let f = seg.flags;
        let irs = SeqNumber(c.rcv.nxt.get().wrapping_sub(1));
        if f.contains(TcpFlags::RST) {
            if seg.seq == c.rcv.nxt || seg.seq == irs {
                self.refused(slot);
            } else {
                self.ctx.stats.dropped(DropReason::RstOutOfWindow);
            }
            return;
        }
        if !f.contains(TcpFlags::ACK) {
            if f.contains(TcpFlags::SYN) && seg.seq == irs {
                // Its SYN again: our SYN-ACK was lost.
                if let Some(o) = c.open.as_mut() {
                    o.syn_due = true;
                }
                c.mark_due(&mut self.ctx);
            } else {
                self.ctx.stats.dropped(DropReason::NoAck);
            }
            return;
        }
        if !(seg.ack > c.snd.una && seg.ack <= c.snd.nxt) {
            self.ctx.stats.dropped(DropReason::BadHandshakeAck);
            self.send_rst_for(seg);
            return;
        }
        let Some(open) = c.open.take() else {
            return;
        };
        c.state = State::Established;
        c.snd.una = seg.ack;
        c.snd.wnd = u32::from(seg.window) << c.snd.wscale;
        c.snd.wl1 = seg.seq;
        c.snd.wl2 = seg.ack;
        if c.snd.timer_kind == SndTimer::Syn {
            c.snd.timer = None;
        }
        // The handshake's RTT sample, under Karn's rule (RFC 6298 §3); a refused one
        // leaves the initial RTO, which is all the handshake needs.
        let _ = c
            .snd
            .rtt
            .sample_from_ack(now, open.first_sent, open.retransmitted);
        c.snd.rtt.handshake_complete(open.retransmitted);
        if f.contains(TcpFlags::SYN) {
            // The peer's SYN-ACK: acknowledge it.
            c.ack.ack_now(AckReason::Handshake);
        }
        let id = c.id;
        self.ctx.stats.conns_opened += 1;
        self.ctx.event(Event::Opened(id));
        self.rest_of_segment(now, slot, seg);
    }

    /// After the handshake step: a segment's text and FIN go on to ESTABLISHED's steps
    /// (RFC 9293 §3.10.7.3: "continue processing at the sixth step"), its SYN stripped;
    /// a bare SYN-ACK ends here with the ACK it is owed.
    fn rest_of_segment(&mut self, now: Instant, slot: u32, seg: &mut Segment<B>) {
        let Some(c) = self.conns.get_mut(slot) else {
            return;
        };
        if seg.flags.contains(TcpFlags::SYN) {
            seg.flags = TcpFlags(seg.flags.0 & !TcpFlags::SYN.0);
            seg.seq += 1;
        }
        if seg.payload.is_empty() && !seg.flags.contains(TcpFlags::FIN) {
            c.after_input(&mut self.ctx);
            return;
        }
        c.on_segment(now, seg, &mut self.ctx);
        if c.reapable() {
            self.free_conn(slot);
        }
    }
}

impl<B: PacketBuf> Conn<B> {
    /// Our SYN (SYN-SENT) or SYN-ACK (SYN-RECEIVED): ISS, a window of
    /// `TcpConfig::syn_window` never scaled (RFC 7323 §2.2), and the options: MSS, window scale, SACK-permitted
    /// and timestamps in a SYN (all offered: RFC 7323 §2.2, §3.2; RFC 2018 §2); in a
    /// SYN-ACK only those the peer's SYN offered.
    pub(crate) fn build_syn<P: BufPool<Buf = B>>(
        &mut self,
        now: Instant,
        pool: &mut P,
        offload: bool,
    ) -> Result<Option<(B, Sent)>, ()> {
        let Some(open) = self.open else {
            return Ok(None);
        };
        let synack = self.state == State::SynReceived;
        let (flags, ack, ws, sack) = if synack {
            let ws = open.peer_wscale.then_some(open.wscale);
            (
                TcpFlags::SYN | TcpFlags::ACK,
                self.rcv.nxt,
                ws,
                self.rcv.sack_ok,
            )
        } else {
            (TcpFlags::SYN, SeqNumber(0), Some(open.wscale), true)
        };
        let mut opt = [0u8; 12];
        let n = syn_options(self.rcv.advmss.min(65535) as u16, ws, sack, &mut opt);
        let f = TcpFields {
            seq: self.snd.una,
            ack,
            flags,
            window: self.rcv.syn_wnd.min(65535) as u16,
            ts: Timestamp {
                tsval: self.ts_now(now),
                tsecr: if synack { self.rcv.ts_recent } else { 0 },
            },
        };
        let b = self.tmpl.build(pool, &f, &opt[..n], offload).ok_or(())?;
        if let Some(o) = self.open.as_mut() {
            o.syn_due = false;
        }
        Ok(Some((b, Sent::Ack(AckReason::Handshake))))
    }

    /// The SYN's retransmission timer expired (RFC 6298 §5.5-5.6 as Linux
    /// `tcp_retransmit_timer` in SYN-SENT): back off and send it again, or after
    /// `TcpConfig::syn_retries` retransmissions give the open up (`Break`: the
    /// connection is closed and the application hears `Event::Reset`).
    pub(crate) fn syn_timeout(
        &mut self,
        now: Instant,
        ctx: &mut super::conn::Ctx<B>,
    ) -> ControlFlow<()> {
        let Some(o) = self.open.as_mut() else {
            return ControlFlow::Continue(());
        };
        self.snd.rtt.on_timeout();
        if self.snd.rtt.should_give_up(u32::from(o.retries)) {
            ctx.stats.dropped(DropReason::SynRetriesExhausted);
            ctx.stats.active_open_failures += 1;
            self.reset(ctx, false);
            return ControlFlow::Break(());
        }
        o.retransmitted = true;
        o.syn_due = true;
        ctx.stats.syn_retransmits += 1;
        self.snd.timer = Some(self.snd.rtt.deadline(now));
        self.snd.timer_kind = SndTimer::Syn;
        self.mark_due(ctx);
        ControlFlow::Continue(())
    }
}
