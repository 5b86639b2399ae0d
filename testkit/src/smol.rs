//! smoltcp as weir's peer, in process: an independent TCP (smoltcp 0.12's socket) on one
//! side, one core's weir on the other, Ethernet frames between them through a seeded
//! [`Impairment`] (loss, reordering, duplication) in each direction, on a virtual clock.
//!
//! [`Net`] owns both ends and the link; the test owns both applications and calls the
//! steps of one loop iteration in this order:
//!
//! 1. [`Net::peer_rx`]: the frames due reach smoltcp, which processes them (and may answer);
//! 2. the peer application works on [`Net::sockets`] (reads, writes, closes);
//! 3. [`Net::peer_tx`]: smoltcp sends what it has, into the link towards weir;
//! 4. [`Net::weir_rx`]: the frames due reach weir: `wire::parse` -> `gro::Gro` ->
//!    `Tcp::handle_segment` (ARP and neighbor solicitations answered, as the pipeline does);
//! 5. the weir application: `Tcp::poll_event`, then `recv`/`send`/`send_bufs`/`close`;
//! 6. [`Net::weir_tx`]: `Tcp::handle_timeout`, then `Tcp::poll_tx` into the link;
//! 7. [`Net::advance`]: the clock jumps to the next thing that can happen.
//!
//! On the way it checks what an independent observer on the wire can: every frame weir
//! sends parses from the peer's side (checksums verified), and no data segment of weir's
//! goes past the right edge of the window smoltcp advertised (RFC 9293 §3.8.6: "the
//! sending TCP ... must not send data beyond the window"), counted in
//! [`Net::beyond_window`].
//!
//! The frames carry the addresses of [`crate::frames`]: weir at [`OUR_IP4`]/[`OUR_IP6`],
//! smoltcp at [`PEER_IP4`]/[`PEER_IP6`].
//!
//! smoltcp 0.12 has one known defect these runs meet: in LAST-ACK, an ACK that does not
//! cover its FIN cancels the FIN's retransmission timer, so a FIN lost before such an ACK
//! is never sent again. [`Net::last_ack_stalls`] recognizes it from the wire.
//!
//! Debugging a run: `WEIR_TRACE_PORT=N` prints every TCP frame either side sends on the
//! connection whose smoltcp port is `N`, as it leaves (before the impairment drops,
//! delays or copies it), and [`Net::describe`] gives both ends' state.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;
use std::net::IpAddr;

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium, RxToken, TxToken};
use smoltcp::socket::{tcp, AnySocket};
use smoltcp::time::Instant as SInstant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

use stack::buf::{ChecksumStatus, PacketBuf, RxChecksum};
use stack::driver::Burst;
use stack::gro::{Gro, GroConfig};
use stack::impair::{ImpairConfig, Impairment};
use stack::mem::{VecBuf, VecPool};
use stack::segment::Segment;
use stack::seq::SeqNumber;
use stack::tcp::{Tcp, TcpConfig};
use stack::time::{earliest, Duration, Instant};
use stack::wire::emit::{emit_arp_reply, emit_neighbor_advert};
use stack::wire::{parse, LocalAddrs, Parsed, TcpFlags, TcpMeta};

use crate::frames::{OUR_IP4, OUR_IP6, OUR_MAC, PEER_IP4, PEER_IP6, PEER_MAC};

thread_local! {
    /// The virtual clock in ms, for smoltcp's TSval generator (a plain `fn`, so it cannot
    /// capture the clock; each test thread has its own).
    static CLOCK_MS: Cell<u32> = const { Cell::new(0) };
}

/// smoltcp's timestamp clock: the virtual clock in milliseconds (RFC 7323 §5.4 allows
/// 1 ms to 1 s per tick). Pass it to `tcp::Socket::set_tsval_generator`.
pub fn tsval() -> u32 {
    CLOCK_MS.with(|c| c.get())
}

fn smol_now(t: Instant) -> SInstant {
    SInstant::from_micros((t.as_nanos() / 1000) as i64)
}

/// smoltcp's device: frames in from the link, frames out into a queue [`Net::peer_tx`]
/// empties. 1514-byte frames (MTU 1500). Also the device of `stack/tests/peer_smoltcp.rs`.
#[derive(Default)]
pub struct VDev {
    /// Frames for smoltcp to receive, oldest first.
    pub rx: VecDeque<Vec<u8>>,
    /// Frames smoltcp transmitted, for the caller to take.
    pub tx: Vec<Vec<u8>>,
}

/// A received frame handed to smoltcp.
pub struct VRx(Vec<u8>);
/// Where smoltcp writes a frame it transmits.
pub struct VTx<'a>(&'a mut Vec<Vec<u8>>);

impl RxToken for VRx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl TxToken for VTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut v = vec![0u8; len];
        let r = f(&mut v);
        self.0.push(v);
        r
    }
}

impl Device for VDev {
    type RxToken<'a> = VRx;
    type TxToken<'a> = VTx<'a>;
    fn receive(&mut self, _t: SInstant) -> Option<(VRx, VTx<'_>)> {
        let f = self.rx.pop_front()?;
        Some((VRx(f), VTx(&mut self.tx)))
    }
    fn transmit(&mut self, _t: SInstant) -> Option<VTx<'_>> {
        Some(VTx(&mut self.tx))
    }
    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ethernet;
        c.max_transmission_unit = 1514;
        c
    }
}

/// How a [`Net`] is built.
#[derive(Clone, Debug)]
pub struct NetConfig {
    /// Seeds both impairment stages and smoltcp's ISNs and ports.
    pub seed: u64,
    /// The impairment, the same in both directions (each with its own random stream).
    pub impair: ImpairConfig,
    /// IPv6 addresses (and neighbor discovery) instead of IPv4 (and ARP).
    pub v6: bool,
    /// weir's TCP. Its `mtu` should leave smoltcp room for its timestamp option: smoltcp
    /// 0.12 sizes a segment as min(peer MSS, MTU - 40 or 60) and then adds its options
    /// (`tcp.rs`, `dispatch`), so against an MSS of MTU - 40 its full segments would not
    /// fit its own 1500-byte link; [`NetConfig::new`] sets 1488.
    pub tcp: TcpConfig,
    /// Buffers weir may hold at once: its frames and `send`'s copies.
    pub tx_bufs: usize,
}

impl NetConfig {
    /// The impairment `impair`, IPv4, weir's defaults but an MTU of 1488 (see
    /// [`NetConfig::tcp`]) and `seed` for its keys.
    pub fn new(seed: u64, impair: ImpairConfig) -> Self {
        NetConfig {
            seed,
            impair,
            v6: false,
            tcp: TcpConfig {
                mtu: 1488,
                seed,
                ..TcpConfig::default()
            },
            tx_bufs: 1 << 16,
        }
    }
}

/// What the window check knows of one connection, from the frames smoltcp sent.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    /// smoltcp's window scale shift (RFC 7323 §2.3: applies to every segment but SYNs).
    shift: u8,
    /// The furthest right edge smoltcp advertised (ACK + scaled window).
    right: Option<SeqNumber>,
}

/// What the wire showed of smoltcp's FIN on one connection, for [`Net::last_ack_stalls`].
#[derive(Clone, Copy, Debug, Default)]
struct PeerFin {
    /// The sequence number of smoltcp's FIN, once it sent one.
    seq: Option<SeqNumber>,
    /// A copy of the FIN reached weir.
    reached_weir: bool,
    /// After the FIN left, an ACK of weir's reached smoltcp that acknowledged everything
    /// before the FIN but not the FIN (SEG.ACK = the FIN's sequence number).
    stale_ack: bool,
    /// Frames smoltcp sent on the connection after that ACK reached it.
    sent_after: u64,
}

/// The two ends and the link. See the module documentation for the loop.
pub struct Net {
    /// The virtual clock.
    pub now: Instant,
    /// weir.
    pub tcp: Tcp<VecBuf>,
    /// weir's transmit buffers (frames and `send`'s copies).
    pub pool: VecPool,
    /// weir's receive buffers (the NIC's mempool).
    pub rx_pool: VecPool,
    gro: Gro<VecBuf>,
    local: LocalAddrs,
    peer_local: LocalAddrs,
    segs: Vec<Segment<VecBuf>>,
    /// smoltcp's interface.
    pub iface: Interface,
    dev: VDev,
    /// smoltcp's sockets.
    pub sockets: SocketSet<'static>,
    /// The link towards weir.
    pub to_weir: Impairment<Vec<u8>>,
    /// The link towards smoltcp.
    pub to_peer: Impairment<Vec<u8>>,
    v6: bool,
    windows: HashMap<(u16, u16), Window>,
    /// smoltcp's FIN on each connection, keyed (weir's port, smoltcp's port).
    fins: HashMap<(u16, u16), PeerFin>,
    /// TCP frames smoltcp sent that the caller of [`Net::peer_tx_with`] withheld from the
    /// link.
    pub withheld: u64,
    /// weir data segments that went past smoltcp's advertised window (must stay 0).
    pub beyond_window: u64,
    /// Frames weir sent that the peer's side could not parse (must stay 0).
    pub bad_frames: u64,
    /// Frames smoltcp sent that weir's parser dropped, by reason (IPv6 multicast
    /// listener reports and the like are expected here).
    pub parse_drops: BTreeMap<&'static str, u64>,
    /// The first few problems seen, for the failure message.
    pub problems: Vec<String>,
    /// Segments that reached a weir connection with an ACK below its SND.UNA: reordered
    /// or duplicated ACKs. RFC 5961 §5.2 drops those more than MAX.SND.WND old
    /// (`DropReason::BadAck`), so that count can be at most this one.
    pub old_acks: u64,
    /// Segments that reached a weir connection with an ACK beyond its SND.NXT (must stay
    /// 0: an honest peer acknowledges only what was sent).
    pub acks_beyond_nxt: u64,
    /// ARP requests and neighbor solicitations answered.
    pub resolutions: u64,
    /// Frames weir's receive pool had no buffer for (must stay 0: a leak).
    pub rx_pool_exhausted: u64,
    /// `WEIR_TRACE_PORT`: the smoltcp port whose frames are printed.
    trace_port: Option<u16>,
}

impl Net {
    /// Both ends, at t = 1 s, nothing connected. weir knows its addresses of the family
    /// chosen; smoltcp has its address in a /24 (IPv4) or /64 (IPv6) with weir's in it.
    pub fn new(cfg: &NetConfig) -> Self {
        let now = Instant::from_nanos(1_000_000_000);
        CLOCK_MS.with(|c| c.set(1000));
        let mut dev = VDev {
            rx: VecDeque::new(),
            tx: Vec::new(),
        };
        let mut icfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(PEER_MAC)));
        icfg.random_seed = cfg.seed;
        let mut iface = Interface::new(icfg, &mut dev, smol_now(now));
        let v6 = cfg.v6;
        iface.update_ip_addrs(|a| {
            let cidr = if v6 {
                IpCidr::new(IpAddress::Ipv6(PEER_IP6), 64)
            } else {
                IpCidr::new(IpAddress::Ipv4(PEER_IP4), 24)
            };
            a.push(cidr).expect("one address");
        });
        let (ip4, ip6) = if v6 {
            (None, Some(OUR_IP6))
        } else {
            (Some(OUR_IP4), None)
        };
        Net {
            now,
            tcp: Tcp::new(cfg.tcp.clone()),
            pool: VecPool::new(cfg.tx_bufs, 2048),
            rx_pool: VecPool::new(1 << 20, 2048),
            gro: Gro::new(GroConfig::default()),
            local: LocalAddrs::new(OUR_MAC, ip4, ip6),
            peer_local: LocalAddrs::new(PEER_MAC, Some(PEER_IP4), Some(PEER_IP6)),
            segs: Vec::new(),
            iface,
            dev,
            sockets: SocketSet::new(vec![]),
            to_weir: Impairment::new(cfg.impair, cfg.seed.wrapping_mul(3)),
            to_peer: Impairment::new(cfg.impair, cfg.seed.wrapping_mul(5).wrapping_add(1)),
            v6,
            windows: HashMap::new(),
            fins: HashMap::new(),
            withheld: 0,
            beyond_window: 0,
            bad_frames: 0,
            parse_drops: BTreeMap::new(),
            problems: Vec::new(),
            old_acks: 0,
            acks_beyond_nxt: 0,
            resolutions: 0,
            rx_pool_exhausted: 0,
            trace_port: std::env::var("WEIR_TRACE_PORT")
                .ok()
                .and_then(|v| v.trim().parse().ok()),
        }
    }

    /// weir's address.
    pub fn weir_addr(&self) -> IpAddr {
        if self.v6 {
            OUR_IP6.into()
        } else {
            OUR_IP4.into()
        }
    }

    /// smoltcp's address.
    pub fn peer_addr(&self) -> IpAddr {
        if self.v6 {
            PEER_IP6.into()
        } else {
            PEER_IP4.into()
        }
    }

    /// A smoltcp socket with `rx` and `tx` bytes of buffer (its receive buffer sets its
    /// window and window scale), timestamps on or off, added to [`Net::sockets`].
    pub fn add_socket(&mut self, rx: usize, tx: usize, timestamps: bool) -> SocketHandle {
        let mut s = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; rx]),
            tcp::SocketBuffer::new(vec![0; tx]),
        );
        if timestamps {
            s.set_tsval_generator(Some(tsval));
        }
        self.sockets.add(s)
    }

    /// The smoltcp socket `h`.
    pub fn socket(&mut self, h: SocketHandle) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(h)
    }

    /// Starts an active open from smoltcp's socket `h`, port `local_port`, to weir's
    /// `port`.
    pub fn peer_connect(&mut self, h: SocketHandle, port: u16, local_port: u16) {
        let remote = (IpAddress::from(self.weir_addr()), port);
        let s = self.sockets.get_mut::<tcp::Socket>(h);
        s.connect(self.iface.context(), remote, local_port)
            .expect("smoltcp connect");
    }

    fn sync_clock(&self) {
        CLOCK_MS.with(|c| c.set((self.now.as_nanos() / 1_000_000) as u32));
    }

    /// Step 1: the frames due reach smoltcp and it processes them (its answers wait in
    /// its device for [`Net::peer_tx`]).
    pub fn peer_rx(&mut self) {
        self.sync_clock();
        while let Some(f) = self.to_peer.pop_ready(self.now) {
            self.watch_to_peer(&f);
            self.dev.rx.push_back(f);
        }
        let _ = self
            .iface
            .poll(smol_now(self.now), &mut self.dev, &mut self.sockets);
    }

    /// Step 3: smoltcp sends everything it has into the link towards weir. smoltcp emits
    /// at most one segment per socket per poll, so it is polled until it has nothing more
    /// (or 256 frames, as one TSO/GSO burst of a real sender would be bounded; the rest
    /// follow in the next iteration).
    pub fn peer_tx(&mut self) {
        self.peer_tx_with(|_, _| true);
    }

    /// Step 3 as [`Net::peer_tx`], but each TCP frame smoltcp sends is first shown to
    /// `keep` (the frame, and what weir's parser makes of it): `false` withholds it from
    /// the link, as a loss the test chose, counted in [`Net::withheld`]. Other frames
    /// (ARP, neighbor discovery) always go.
    pub fn peer_tx_with(&mut self, mut keep: impl FnMut(&[u8], &TcpMeta) -> bool) {
        self.sync_clock();
        loop {
            let before = self.dev.tx.len();
            let _ = self
                .iface
                .poll(smol_now(self.now), &mut self.dev, &mut self.sockets);
            if self.dev.tx.len() == before || self.dev.tx.len() >= 256 {
                break;
            }
        }
        let frames = std::mem::take(&mut self.dev.tx);
        for f in frames {
            self.watch_peer(&f);
            if let Parsed::Tcp(m) = parse(&f, RxChecksum::default(), &self.local) {
                if !keep(&f, &m) {
                    self.withheld += 1;
                    continue;
                }
            }
            self.to_weir.push(self.now, f);
        }
    }

    /// Step 4: the frames due reach weir, in bursts of up to 64: parse, GRO (flushed at
    /// the end of each burst), TCP.
    pub fn weir_rx(&mut self) {
        loop {
            let mut n = 0;
            while n < 64 {
                let Some(f) = self.to_weir.pop_ready(self.now) else {
                    break;
                };
                n += 1;
                self.weir_frame(f);
            }
            if n == 0 {
                return;
            }
            let segs = &mut self.segs;
            self.gro
                .end_of_burst(self.now, &mut |s| segs.push(s.take()));
            let mut segs = std::mem::take(&mut self.segs);
            for mut s in segs.drain(..) {
                self.classify_ack(&s);
                self.tcp.handle_segment(self.now, &mut s);
            }
            self.segs = segs;
        }
    }

    /// Counts a segment's ACK against the connection it reaches, as weir stands before
    /// taking it: older than SND.UNA (a reordered or duplicated ACK), or beyond SND.NXT
    /// (an ACK of data weir never sent, which smoltcp must never send).
    fn classify_ack(&mut self, s: &Segment<VecBuf>) {
        if !s.flags.contains(TcpFlags::ACK) || s.flags.contains(TcpFlags::SYN) {
            return;
        }
        let Some(info) = self.tcp.lookup(&s.flow).and_then(|id| self.tcp.info(id)) else {
            return;
        };
        if s.ack < info.snd_una {
            self.old_acks += 1;
        } else if s.ack > info.snd_nxt {
            self.acks_beyond_nxt += 1;
            let p = format!(
                "t={} ns: an ACK of {:?} beyond SND.NXT {:?} on {:?}",
                self.now.as_nanos(),
                s.ack,
                info.snd_nxt,
                info.flow
            );
            self.problem(p);
        }
    }

    fn weir_frame(&mut self, f: Vec<u8>) {
        let Some(buf) = self.rx_pool.adopt(f) else {
            self.rx_pool_exhausted += 1;
            return;
        };
        match parse(buf.data(), buf.rx_checksum(), &self.local) {
            Parsed::Tcp(meta) => {
                if meta.flags.contains(TcpFlags::FIN) {
                    let key = (meta.flow.dport, meta.flow.sport);
                    self.fins.entry(key).or_default().reached_weir = true;
                }
                let segs = &mut self.segs;
                self.gro
                    .handle_segment(self.now, &meta, buf, &mut |s| segs.push(s.take()));
            }
            Parsed::ArpRequest(req) => {
                let mut b = vec![0u8; 64];
                let l = emit_arp_reply(&req, OUR_MAC, &mut b);
                b.truncate(l);
                self.resolutions += 1;
                self.to_peer.push(self.now, b);
            }
            Parsed::NeighborSolicit(ns) => {
                let mut b = vec![0u8; 128];
                let l = emit_neighbor_advert(&ns, OUR_MAC, &mut b);
                b.truncate(l);
                self.resolutions += 1;
                self.to_peer.push(self.now, b);
            }
            Parsed::IcmpEcho(_) => {}
            Parsed::Drop(r) => *self.parse_drops.entry(r.name()).or_default() += 1,
        }
    }

    /// Step 6: weir's timers, then everything `poll_tx` builds, into the link towards
    /// smoltcp.
    pub fn weir_tx(&mut self) {
        self.tcp.handle_timeout(self.now);
        loop {
            let mut out: Burst<VecBuf> = Burst::new();
            let k = self.tcp.poll_tx(self.now, &mut self.pool, &mut out, false);
            for b in out {
                let f = b.into_vec();
                self.watch_weir(&f);
                self.to_peer.push(self.now, f);
            }
            if k < stack::driver::MAX_BURST {
                return;
            }
        }
    }

    /// Step 7: the clock moves to the earliest of: a frame due on the link, weir's next
    /// timer, smoltcp's, and `wake` (the applications' own), and at least 1 ns. Returns
    /// `false`, leaving the clock, when nothing at all is left to happen.
    pub fn advance(&mut self, wake: Option<Instant>) -> bool {
        let mut next = earliest(self.to_weir.next_deadline(), self.to_peer.next_deadline());
        next = earliest(next, self.tcp.poll_timeout());
        next = earliest(next, wake);
        if let Some(d) = self.peer_poll_delay() {
            let at = self.now + Duration::from_micros(d.total_micros());
            next = earliest(next, Some(at));
        }
        if !self.dev.rx.is_empty() {
            next = Some(self.now);
        }
        match next {
            Some(t) => {
                self.now = t.max(self.now + Duration::from_nanos(1));
                true
            }
            None => false,
        }
    }

    /// smoltcp's `Interface::poll_delay` at the virtual clock: how long until one of its
    /// timers fires (zero: it has something to do now); `None`: it waits for a frame.
    pub fn peer_poll_delay(&mut self) -> Option<smoltcp::time::Duration> {
        self.iface.poll_delay(smol_now(self.now), &self.sockets)
    }

    /// Frames in flight on the link, both ways.
    pub fn in_flight(&self) -> usize {
        self.to_weir.len() + self.to_peer.len()
    }

    fn problem(&mut self, p: String) {
        if self.problems.len() < 8 {
            self.problems.push(p);
        }
    }

    /// With `WEIR_TRACE_PORT` set to smoltcp's port of a connection, prints each frame
    /// either side sends on it, as it leaves (before the impairment).
    fn trace(&self, from: &str, smol_port: u16, m: &TcpMeta) {
        if self.trace_port == Some(smol_port) {
            eprintln!(
                "{} ns {from}: seq {:?} ack {:?} win {} {:?} len {} ts {:?} sack {:?}",
                self.now.as_nanos(),
                m.seq,
                m.ack,
                m.window,
                m.flags,
                m.payload_len,
                m.opts.timestamp,
                &m.opts.sack[..usize::from(m.opts.sack_count)]
            );
        }
    }

    /// A frame smoltcp sent: remember the window it advertises, and its FIN.
    fn watch_peer(&mut self, f: &[u8]) {
        let Parsed::Tcp(m) = parse(f, RxChecksum::default(), &self.local) else {
            return;
        };
        // Keyed (weir's port, smoltcp's port).
        let key = (m.flow.dport, m.flow.sport);
        self.trace("smoltcp", key.1, &m);
        if let Some(fin) = self.fins.get_mut(&key) {
            if fin.stale_ack {
                fin.sent_after += 1;
            }
        }
        if m.flags.contains(TcpFlags::FIN) {
            let fin = self.fins.entry(key).or_default();
            fin.seq = Some(m.seq + usize::from(m.payload_len));
        }
        if m.flags.contains(TcpFlags::RST) {
            return;
        }
        if m.flags.contains(TcpFlags::SYN) {
            // RFC 7323 §2.2: the window of a SYN is never scaled; weir always offers
            // window scaling, so smoltcp's option alone decides the shift.
            let mut w = Window {
                shift: m.opts.wscale.unwrap_or(0),
                right: None,
            };
            if m.flags.contains(TcpFlags::ACK) {
                w.right = Some(m.ack + usize::from(m.window));
            }
            self.windows.insert(key, w);
            return;
        }
        if !m.flags.contains(TcpFlags::ACK) {
            return;
        }
        let w = self.windows.entry(key).or_default();
        let right = m.ack + (usize::from(m.window) << w.shift);
        w.right = Some(w.right.map_or(right, |r| r.max(right)));
    }

    /// A frame of weir's reaching smoltcp: an ACK that stops at smoltcp's FIN, sent after
    /// it, is what cancels the FIN's timer in smoltcp 0.12's LAST-ACK. (The frame is
    /// weir's own and was checked when it left: its checksums are not verified again.)
    fn watch_to_peer(&mut self, f: &[u8]) {
        let good = RxChecksum {
            ip: ChecksumStatus::Good,
            l4: ChecksumStatus::Good,
        };
        let Parsed::Tcp(m) = parse(f, good, &self.peer_local) else {
            return;
        };
        if !m.flags.contains(TcpFlags::ACK) {
            return;
        }
        if let Some(fin) = self.fins.get_mut(&(m.flow.sport, m.flow.dport)) {
            if fin.seq == Some(m.ack) {
                fin.stale_ack = true;
            }
        }
    }

    /// smoltcp 0.12's known defect, recognized: the smoltcp sockets stuck in LAST-ACK
    /// for good. smoltcp 0.12 `src/socket/tcp.rs`, `Socket::process`, arm
    /// `(State::LastAck, TcpControl::None)`: an ACK that is not for its FIN calls
    /// `self.timer.set_for_idle(..)`, which replaces the FIN's retransmission timer
    /// (`Timer::Retransmit`) by an idle one (with no keep-alive: no deadline at all, and
    /// `Socket::dispatch` retransmits only on `Timer::should_retransmit`). smoltcp 0.13.0
    /// no longer idles the timer there (its commit b38faa58).
    ///
    /// A socket counts when all of this holds: it is in LAST-ACK with nothing left in its
    /// send buffer; no smoltcp timer is pending (`Interface::poll_delay` is `None`); on
    /// the wire, smoltcp sent a FIN of which no copy reached weir, then an ACK of weir's
    /// acknowledging everything before that FIN reached smoltcp, and smoltcp sent nothing
    /// on the connection after it. Anything else stuck is not this defect.
    pub fn last_ack_stalls(&mut self) -> Vec<SocketHandle> {
        if self.peer_poll_delay().is_some() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (h, sock) in self.sockets.iter() {
            let Some(t) = tcp::Socket::downcast(sock) else {
                continue;
            };
            if t.state() != tcp::State::LastAck || t.send_queue() != 0 {
                continue;
            }
            let (Some(local), Some(remote)) = (t.local_endpoint(), t.remote_endpoint()) else {
                continue;
            };
            let Some(fin) = self.fins.get(&(remote.port, local.port)) else {
                continue;
            };
            if fin.seq.is_some() && !fin.reached_weir && fin.stale_ack && fin.sent_after == 0 {
                out.push(h);
            }
        }
        out
    }

    /// A frame weir sent: it must parse from the peer's side, and its data must lie
    /// within the furthest window smoltcp has advertised on the flow.
    fn watch_weir(&mut self, f: &[u8]) {
        let m: TcpMeta = match parse(f, RxChecksum::default(), &self.peer_local) {
            Parsed::Tcp(m) => m,
            other => {
                self.bad_frames += 1;
                self.problem(format!(
                    "weir sent a frame the peer cannot parse: {other:?}"
                ));
                return;
            }
        };
        let key = (m.flow.sport, m.flow.dport);
        self.trace("weir", key.1, &m);
        if m.payload_len == 0 {
            return;
        }
        let end = m.seq + usize::from(m.payload_len);
        let right = self.windows.get(&key).and_then(|w| w.right);
        if right.is_none_or(|r| end > r) {
            self.beyond_window += 1;
            let p = format!(
                "t={} ns: weir {}->{}: data {:?}..{:?} beyond the window smoltcp advertised (right edge {:?})",
                self.now.as_nanos(),
                key.0,
                key.1,
                m.seq,
                end,
                right
            );
            self.problem(p);
        }
    }

    /// A multi-line account of both ends and the link, for a failure message.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        let st = self.tcp.stats();
        let _ = writeln!(s, "t = {} ns", self.now.as_nanos());
        let _ = writeln!(
            s,
            "weir: {} conns, {} half-open, ooo {} bytes, pool {} in use",
            self.tcp.conn_count(),
            self.tcp.half_open_count(),
            self.tcp.ooo_bytes(),
            self.pool.in_use()
        );
        let _ = writeln!(s, "weir stats: {st:?}");
        let drops: Vec<_> = st.drops_iter().filter(|d| d.1 > 0).collect();
        let _ = writeln!(s, "weir drops: {drops:?}");
        let _ = writeln!(s, "weir acks: {:?}", self.tcp.ack_stats());
        let _ = writeln!(
            s,
            "link: to weir {:?}, to peer {:?}",
            self.to_weir.stats(),
            self.to_peer.stats()
        );
        let _ = writeln!(
            s,
            "parse drops {:?}, beyond window {}, bad frames {}, old ACKs {}, ACKs beyond SND.NXT {}, problems {:?}",
            self.parse_drops,
            self.beyond_window,
            self.bad_frames,
            self.old_acks,
            self.acks_beyond_nxt,
            self.problems
        );
        for (h, sock) in self.sockets.iter() {
            if let Some(t) = tcp::Socket::downcast(sock) {
                let _ = writeln!(
                    s,
                    "smoltcp {h}: {} local {:?} remote {:?} rx {} tx {}",
                    t.state(),
                    t.local_endpoint(),
                    t.remote_endpoint(),
                    t.recv_queue(),
                    t.send_queue()
                );
            }
        }
        s
    }

    /// Ends the run: the final statistics, and the buffers both pools still count while
    /// weir (its tables, GRO) is still alive. With every connection gone, both must be
    /// zero: a send queue, a receive queue or an out-of-order queue that kept a buffer
    /// past its connection shows here.
    pub fn finish(self) -> Finished {
        Finished {
            stats: self.tcp.stats().clone(),
            acks: self.tcp.ack_stats().clone(),
            tx_in_use: self.pool.in_use(),
            rx_in_use: self.rx_pool.in_use(),
            link: (self.to_weir.stats(), self.to_peer.stats()),
        }
    }
}

/// What [`Net::finish`] leaves.
#[derive(Debug)]
pub struct Finished {
    /// weir's counters.
    pub stats: stack::tcp::TcpStats,
    /// weir's ACK counters.
    pub acks: stack::ack::AckStats,
    /// Transmit buffers still in use at the end.
    pub tx_in_use: usize,
    /// Receive buffers still in use at the end.
    pub rx_in_use: usize,
    /// What the link did: towards weir, towards smoltcp.
    pub link: (stack::impair::ImpairStats, stack::impair::ImpairStats),
}
