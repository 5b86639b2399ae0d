//! The TCP fixture: a [`Tcp`] listening on [`PORT`] and the one peer at
//! [`PEER_IP4`]:40000, which builds [`Segment`]s directly (as GRO would hand them over)
//! and reads what `poll_tx` emits with `wire::parse` from its own side (so checksums are
//! verified too). No DPDK: the buffers are `stack::mem`'s.
//!
//! Two ways in, on the same set-up:
//! - the TCP state tests (`stack/tests/tcp_*.rs`) start from a listener
//!   ([`Fixture::listening`], [`Fixture::with_cfg`]), drive the handshake themselves
//!   ([`Fixture::handshake`]) and script every segment ([`Fixture::seg`], [`Fixture::data`],
//!   [`Fixture::tx`]);
//! - the TCP benchmarks (`benches/benches/tcp.rs` and `weir-bench tcp`) take
//!   [`Fixture::new`]: one connection past the handshake and the quickack phase, fed
//!   full-sized runs by [`Fixture::next`] and emptied by [`Fixture::drain`]; for the send
//!   side, [`Fixture::sender`]: a connection whose peer window and cwnd never limit it,
//!   with [`Fixture::sent`], [`Fixture::ack_seg`] and [`Fixture::reopen`] to play the
//!   peer; and [`ack_parts`] for timing ACK building alone.

use stack::ack::template::{sack_option, AckTemplate, TcpFields};
use stack::ack::{AckPolicy, AckReason};
use stack::buf::{PacketBuf, PayloadChain, PayloadSlice, RxChecksum};
use stack::driver::Burst;
use stack::flow::FlowKey;
use stack::mem::{VecBuf, VecPool};
use stack::segment::Segment;
use stack::seq::SeqNumber;
use stack::tcp::{ConnId, ConnectOpts, Event, Tcp, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::parse::{parse, LocalAddrs, Parsed};
use stack::wire::{SackBlock, TcpFlags, TcpMeta, TcpOptions, Timestamp};

use std::net::SocketAddr;

pub use crate::frames::{OUR_IP4, OUR_MAC, PEER_IP4, PEER_MAC, PORT};

/// Payload per full segment with timestamps at MTU 1500.
pub const MSS: u16 = 1448;

/// The peer's port.
pub const PEER_PORT: u16 = 40000;

/// Bytes in front of the payload in every segment's buffer (Ethernet, IPv4 and TCP with
/// timestamps), as in a received frame.
const HEADROOM: usize = 66;

/// What the peer offers in its SYN.
#[derive(Clone, Copy, Debug)]
pub struct SynOpts {
    /// The MSS option.
    pub mss: Option<u16>,
    /// The window scale option.
    pub wscale: Option<u8>,
    /// SACK permitted.
    pub sack: bool,
    /// Timestamps.
    pub ts: bool,
}

impl SynOpts {
    /// Everything a Linux SYN offers: MSS 1460, window scale 7, SACK, timestamps.
    pub fn all() -> Self {
        SynOpts {
            mss: Some(1460),
            wscale: Some(7),
            sack: true,
            ts: true,
        }
    }
    /// No options at all.
    pub fn none() -> Self {
        SynOpts {
            mss: None,
            wscale: None,
            sack: false,
            ts: false,
        }
    }
}

/// A receiver and the peer sending to it, on a virtual clock.
pub struct Fixture {
    /// The receiver.
    pub tcp: Tcp<VecBuf>,
    /// The pool `poll_tx` builds frames from.
    pub pool: VecPool,
    /// The virtual clock.
    pub now: Instant,
    /// The peer's flow as weir sees it.
    pub flow: FlowKey,
    /// The peer's next sequence number.
    pub snd_nxt: SeqNumber,
    /// Our ISS + 1 (what the peer acknowledges).
    pub our_nxt: SeqNumber,
    /// Whether the peer's segments carry timestamps (set by the handshake).
    pub ts: bool,
    /// The peer's TS clock.
    pub tsval: u32,
    /// Last TSval weir sent (what the peer echoes).
    pub our_tsval: u32,
    /// The connection, once established.
    pub id: Option<ConnId>,
    /// Whether `poll_tx` may leave checksums to the NIC.
    pub offload: bool,
    /// The window field of the peer's segments (scaled by its window scale, 7 with
    /// [`SynOpts::all`]).
    pub window: u16,
    /// The size each received frame's buffer may grow to (an mbuf's data room), so that
    /// TCP can coalesce small segments into it; 0 (the default): exactly the frame.
    pub rx_room: usize,
}

/// The state tests' configuration: room for 64 connections and 16 half-open ones.
pub fn cfg() -> TcpConfig {
    TcpConfig {
        max_conns: 64,
        max_half_open: 16,
        ..TcpConfig::default()
    }
}

impl Fixture {
    /// A listener under `policy` with [`cfg()`], no connection yet.
    pub fn listening(policy: AckPolicy) -> Self {
        Self::with_cfg(cfg(), policy)
    }

    /// A listener under `cfg` and `policy`, no connection yet, at t = 1 s.
    pub fn with_cfg(cfg: TcpConfig, policy: AckPolicy) -> Self {
        let mut tcp = Tcp::new(cfg);
        tcp.listen(PORT, policy).expect("listen");
        Fixture {
            tcp,
            pool: VecPool::new(4096, 2048),
            now: Instant::from_nanos(1_000_000_000),
            flow: FlowKey::v4(PEER_IP4, PEER_PORT, OUR_IP4, PORT),
            snd_nxt: SeqNumber(1_000_000),
            our_nxt: SeqNumber(0),
            ts: false,
            tsval: 5000,
            our_tsval: 0,
            id: None,
            offload: false,
            window: 1024,
            rx_room: 0,
        }
    }

    /// The benchmarks' receiver: one connection under `policy` (4 MiB receive buffer),
    /// past the handshake (all options offered, RTT unknown) and the quickack phase.
    pub fn new(policy: AckPolicy) -> Result<Self, String> {
        let cfg = TcpConfig {
            rcv_buf: 4 << 20,
            max_conns: 16,
            ..TcpConfig::default()
        };
        let mut f = Self::with_cfg(cfg, policy);
        f.pool = VecPool::new(1 << 16, 2048);
        f.tsval = 1;
        f.try_handshake(SynOpts::all(), Duration::ZERO)?;
        for _ in 0..40 {
            let mut s = f.next(2);
            f.tcp.handle_segment(f.now, &mut s);
            f.drain();
        }
        Ok(f)
    }

    /// The benchmarks' sender: one connection past the handshake (all options offered,
    /// so data segments carry timestamps and the peer permits SACK), a peer window of
    /// 8 MiB (65535 << 7), and an initial cwnd of 4096 segments (6 MiB, above the 1 MiB
    /// send buffer): nothing but the send buffer limits what `poll_tx` sends.
    pub fn sender() -> Result<Self, String> {
        let cfg = TcpConfig {
            max_conns: 16,
            cc: stack::tcp::cc::CcConfig {
                initial_segments: Some(4096),
                ..Default::default()
            },
            ..TcpConfig::default()
        };
        let mut f = Self::with_cfg(cfg, AckPolicy::linux());
        f.pool = VecPool::new(1 << 16, 2048);
        f.window = u16::MAX;
        f.try_handshake(SynOpts::all(), Duration::from_micros(100))?;
        Ok(f)
    }

    /// Aborts the connection (its RST is built and dropped) and opens a new one from peer
    /// port `peer_port` with [`SynOpts::all`]: a fresh cwnd, RTT estimate and scoreboard.
    pub fn reopen(&mut self, peer_port: u16) -> Result<ConnId, String> {
        if let Some(id) = self.id.take() {
            self.tcp
                .abort(id)
                .map_err(|e| format!("abort {id:?}: {e:?}"))?;
            let _ = self.tx();
            let _ = self.tcp.events().count();
        }
        self.flow = FlowKey::v4(PEER_IP4, peer_port, OUR_IP4, PORT);
        self.try_handshake(SynOpts::all(), Duration::from_micros(100))?;
        self.id
            .ok_or_else(|| "no connection after the handshake".to_string())
    }

    /// Takes the frames a timed `poll_tx` built: notes the TSval of the last one (what
    /// the peer echoes next, as [`Fixture::tx`] would) and frees them all. Returns the
    /// number of frames.
    pub fn sent(&mut self, out: Burst<VecBuf>) -> usize {
        let n = out.len();
        if let Some(last) = out.last() {
            let local = LocalAddrs::new(PEER_MAC, Some(PEER_IP4), None);
            if let Parsed::Tcp(m) = parse(last.data(), RxChecksum::default(), &local) {
                if let Some(t) = m.opts.timestamp {
                    self.our_tsval = t.tsval;
                }
            }
        }
        n
    }

    /// A pure ACK from the peer (built, not yet handled) acknowledging up to `ack`, with
    /// the SACK blocks `sack` (at most 4; 3 fit beside timestamps on the wire).
    pub fn ack_seg(&self, ack: SeqNumber, sack: &[SackBlock]) -> Segment<VecBuf> {
        let mut s = self.build(self.snd_nxt, TcpFlags::ACK, 0, 0, false);
        s.ack = ack;
        for (slot, b) in s.opts.sack.iter_mut().zip(sack) {
            *slot = *b;
        }
        s.opts.sack_count = sack.len().min(s.opts.sack.len()) as u8;
        s
    }

    /// Moves the clock by `d` and fires what is due.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.tcp.handle_timeout(self.now);
    }

    /// The connection; panics before the handshake.
    pub fn id(&self) -> ConnId {
        self.id.expect("connection established")
    }

    /// A segment from the peer with `segs` wire segments of `gso` bytes each (the last may be
    /// shorter so the total is `len`), payload bytes counting up from `seq` ([`pattern`]).
    pub fn seg(&self, seq: SeqNumber, flags: TcpFlags, len: u32, gso: u16) -> Segment<VecBuf> {
        self.build(seq, flags, len, gso, true)
    }

    /// As [`Fixture::seg`], with the payload bytes left zero when `pattern` is false
    /// (cheaper to build, for the benchmarks, which never read them).
    fn build(
        &self,
        seq: SeqNumber,
        flags: TcpFlags,
        len: u32,
        gso: u16,
        pattern: bool,
    ) -> Segment<VecBuf> {
        let mut payload = PayloadChain::new();
        let mut off = 0u32;
        let mut segs = 0u16;
        while off < len {
            let l = (len - off).min(u32::from(gso.max(1)));
            let mut frame = vec![0u8; HEADROOM + l as usize];
            if pattern {
                for (i, b) in frame[HEADROOM..].iter_mut().enumerate() {
                    *b = self::pattern(seq + (off as usize + i));
                }
            }
            let s = PayloadSlice {
                buf: VecBuf::from_vec(frame).with_room(self.rx_room),
                off: HEADROOM as u16,
                len: l as u16,
            };
            assert!(payload.push(s).is_ok(), "chain full");
            off += l;
            segs += 1;
        }
        let mut opts = TcpOptions::default();
        if self.ts {
            opts.timestamp = Some(Timestamp {
                tsval: self.tsval,
                tsecr: self.our_tsval,
            });
        }
        Segment {
            flow: self.flow,
            peer_mac: PEER_MAC,
            local_mac: OUR_MAC,
            seq,
            ack: self.our_nxt,
            flags,
            window: self.window,
            opts,
            ts_last: opts.timestamp,
            segs: segs.max(1),
            gso_size: if len == 0 { 0 } else { gso.min(len as u16) },
            first_rx: self.now,
            payload,
        }
    }

    /// Sends in-order data: `len` bytes as one run of `gso`-byte segments.
    pub fn data(&mut self, len: u32, gso: u16, psh: bool) {
        let mut f = TcpFlags::ACK;
        if psh {
            f |= TcpFlags::PSH;
        }
        let mut s = self.seg(self.snd_nxt, f, len, gso);
        self.snd_nxt += len as usize;
        self.tcp.handle_segment(self.now, &mut s);
    }

    /// Sends a segment at an explicit sequence number (does not move `snd_nxt`).
    pub fn data_at(&mut self, seq: SeqNumber, len: u32, gso: u16) {
        let mut s = self.seg(seq, TcpFlags::ACK, len, gso);
        self.tcp.handle_segment(self.now, &mut s);
    }

    /// Hands `s` to the receiver.
    pub fn send(&mut self, mut s: Segment<VecBuf>) {
        self.tcp.handle_segment(self.now, &mut s);
    }

    /// Runs poll_tx and parses every frame as the peer would.
    pub fn tx(&mut self) -> Vec<TcpMeta> {
        self.tx_payload().into_iter().map(|(m, _)| m).collect()
    }

    /// As [`Fixture::tx`], with each frame's TCP payload.
    pub fn tx_payload(&mut self) -> Vec<(TcpMeta, Vec<u8>)> {
        let mut out: Burst<VecBuf> = Burst::new();
        self.tcp
            .poll_tx(self.now, &mut self.pool, &mut out, self.offload);
        let local = LocalAddrs::new(PEER_MAC, Some(PEER_IP4), None);
        let mut v = Vec::new();
        for b in out {
            let bytes = b.into_vec();
            match parse(&bytes, RxChecksum::default(), &local) {
                Parsed::Tcp(m) => {
                    if let Some(t) = m.opts.timestamp {
                        self.our_tsval = t.tsval;
                    }
                    let off = usize::from(m.payload_off);
                    let payload = bytes[off..off + usize::from(m.payload_len)].to_vec();
                    v.push((m, payload))
                }
                other => panic!("weir sent an unparsable frame: {other:?}"),
            }
        }
        v
    }

    /// The peer acknowledges weir's data up to `ack` (a pure ACK at the peer's
    /// `snd_nxt`, window [`Fixture::window`]); later segments acknowledge it too.
    pub fn ack_to(&mut self, ack: SeqNumber) {
        self.our_nxt = ack;
        let s = self.seg(self.snd_nxt, TcpFlags::ACK, 0, 0);
        self.send(s);
    }

    /// An active open from weir to the peer (`Tcp::connect`, an ephemeral port); returns
    /// the connection and weir's SYN. The fixture's flow becomes the connection's, so
    /// [`Fixture::seg`] builds the peer's segments on it.
    pub fn connect(&mut self) -> (ConnId, TcpMeta) {
        let remote = SocketAddr::new(PEER_IP4.into(), PEER_PORT);
        let opts = ConnectOpts::new(OUR_MAC, PEER_MAC);
        let id = self
            .tcp
            .connect(self.now, OUR_IP4.into(), remote, opts)
            .expect("connect");
        self.flow = self.tcp.flow(id).expect("flow");
        self.id = Some(id);
        let out = self.tx();
        let [syn] = out[..] else {
            panic!("one SYN expected, weir sent {out:?}");
        };
        self.our_nxt = syn.seq + 1;
        (id, syn)
    }

    /// The peer's SYN-ACK to weir's SYN, offering `o` (its ISN is the fixture's
    /// `snd_nxt`, which then moves past it).
    pub fn synack(&mut self, o: SynOpts) -> Segment<VecBuf> {
        let mut s = self.syn(o);
        s.flags = TcpFlags::SYN | TcpFlags::ACK;
        s.ack = self.our_nxt;
        if let Some(t) = s.opts.timestamp.as_mut() {
            t.tsecr = self.our_tsval;
        }
        s.ts_last = s.opts.timestamp;
        self.snd_nxt += 1;
        self.ts = o.ts;
        s
    }

    /// An active open completed: weir's SYN, the peer's SYN-ACK offering `o`, weir's ACK.
    /// Returns the SYN and the ACK.
    pub fn active_handshake(&mut self, o: SynOpts) -> (TcpMeta, TcpMeta) {
        let (id, syn) = self.connect();
        self.now += Duration::from_micros(100);
        let sa = self.synack(o);
        self.send(sa);
        assert!(
            self.tcp.events().any(|e| e == Event::Opened(id)),
            "no Opened event after the SYN-ACK"
        );
        let out = self.tx();
        let [ack] = out[..] else {
            panic!("one ACK expected, weir sent {out:?}");
        };
        (syn, ack)
    }

    /// The SYN with `o`.
    pub fn syn(&self, o: SynOpts) -> Segment<VecBuf> {
        let mut s = self.seg(self.snd_nxt, TcpFlags::SYN, 0, 0);
        s.ack = SeqNumber(0);
        s.opts.mss = o.mss;
        s.opts.wscale = o.wscale;
        s.opts.sack_permitted = o.sack;
        s.opts.timestamp = o.ts.then_some(Timestamp {
            tsval: self.tsval,
            tsecr: 0,
        });
        s.ts_last = s.opts.timestamp;
        s
    }

    /// Three-way handshake, the peer's ACK 100 µs after weir's SYN-ACK; returns the
    /// SYN-ACK. Panics if weir does not open the connection as expected.
    pub fn handshake(&mut self, o: SynOpts) -> TcpMeta {
        match self.try_handshake(o, Duration::from_micros(100)) {
            Ok(sa) => sa,
            Err(e) => panic!("{e}"),
        }
    }

    /// The handshake with the peer's ACK `rtt` after the SYN-ACK (zero: weir takes no RTT
    /// sample); an error says which step went wrong.
    fn try_handshake(&mut self, o: SynOpts, rtt: Duration) -> Result<TcpMeta, String> {
        let syn = self.syn(o);
        self.send(syn);
        let out = self.tx();
        let [sa] = out[..] else {
            return Err(format!("one SYN-ACK expected, weir sent {out:?}"));
        };
        if sa.flags != TcpFlags::SYN | TcpFlags::ACK || sa.ack != self.snd_nxt + 1 {
            return Err(format!(
                "a SYN-ACK acknowledging {:?} expected, weir sent {sa:?}",
                self.snd_nxt + 1
            ));
        }
        self.snd_nxt += 1;
        self.our_nxt = sa.seq + 1;
        self.ts = o.ts;
        self.now += rtt;
        let ack = self.seg(self.snd_nxt, TcpFlags::ACK, 0, 0);
        self.send(ack);
        let id = self
            .tcp
            .events()
            .find_map(|e| match e {
                Event::Opened(id) => Some(id),
                _ => None,
            })
            .ok_or("no Opened event after the handshake")?;
        self.id = Some(id);
        let out = self.tx();
        if !out.is_empty() {
            return Err(format!(
                "the handshake ACK needs no answer, weir sent {out:?}"
            ));
        }
        Ok(sa)
    }

    /// Consumes everything readable; returns the bytes.
    pub fn read_all(&mut self) -> Vec<u8> {
        let mut v = Vec::new();
        let id = self.id();
        let _ = self.tcp.recv(id, |sl| {
            for s in sl {
                v.extend_from_slice(s.bytes());
            }
            v.len()
        });
        v
    }

    /// ACKs sent so far for reason `r`.
    pub fn acks(&self, r: AckReason) -> u64 {
        self.tcp.ack_stats().get(r)
    }

    /// Spends the quickack credit of connection start (16 quick ACKs) with full-sized
    /// in-order segments, consuming them, so later tests see the steady state
    /// (rcv_mss = 1448).
    pub fn exhaust_quickack(&mut self) {
        for _ in 0..20 {
            self.data(u32::from(MSS), MSS, false);
            self.read_all();
            let _ = self.tx();
            self.now += Duration::from_millis(1);
        }
        // Let any delayed ACK fire, but stay under the 200 ms RTO: a longer idle re-grants
        // quick ACKs (tcp_event_data_recv).
        self.advance(Duration::from_millis(45));
        let _ = self.tx();
        let info = self.tcp.info(self.id()).expect("info");
        assert_eq!(info.unconsumed, 0);
    }

    /// The next in-order run of `segs` full segments (built, not yet handled; payload
    /// bytes zero); the peer's TS clock ticks once per run.
    pub fn next(&mut self, segs: u16) -> Segment<VecBuf> {
        let len = u32::from(segs) * u32::from(MSS);
        let s = self.build(self.snd_nxt, TcpFlags::ACK, len, MSS, false);
        self.snd_nxt += len as usize;
        self.tsval = self.tsval.wrapping_add(1);
        s
    }

    /// The application reads everything, the ACKs due are built and dropped, and the
    /// clock moves 100 µs. Returns the ACKs built.
    pub fn drain(&mut self) -> usize {
        let id = self.id();
        let _ = self
            .tcp
            .recv(id, |s| s.iter().map(|x| usize::from(x.len)).sum());
        let mut n = 0;
        loop {
            let mut out = Burst::new();
            let k = self.tcp.poll_tx(self.now, &mut self.pool, &mut out, false);
            n += k;
            if k == 0 || !out.is_full() {
                break;
            }
        }
        self.now += Duration::from_micros(100);
        n
    }
}

/// Two weir TCPs back to back in process: `a` at [`OUR_IP4`] / [`OUR_IP6`] ([`OUR_MAC`]),
/// `b` at [`PEER_IP4`] / [`PEER_IP6`] ([`PEER_MAC`]). Every frame one side's `poll_tx`
/// builds is parsed by `wire::parse` on the other side's addresses (checksums
/// verified) and handed to its `handle_segment` as a run of one, as with GRO off.
pub struct Pair {
    /// The side at our addresses.
    pub a: Tcp<VecBuf>,
    /// The side at the peer's addresses.
    pub b: Tcp<VecBuf>,
    /// `a`'s buffers (its frames and its `send` copies).
    pub pool_a: VecPool,
    /// `b`'s buffers.
    pub pool_b: VecPool,
    /// The virtual clock.
    pub now: Instant,
    /// Frames moved, both ways.
    pub frames: u64,
    /// Drop every n-th frame that carries data, in each direction (a lossy link).
    pub drop_every: Option<u64>,
    /// Data frames seen and dropped, in each direction (`a` to `b`, `b` to `a`).
    pub data_frames: [u64; 2],
    /// Data frames dropped, each direction.
    pub dropped: [u64; 2],
}

impl Pair {
    /// Two TCPs under `a` and `b`, at t = 1 s.
    pub fn new(a: TcpConfig, b: TcpConfig) -> Self {
        Pair {
            a: Tcp::new(a),
            b: Tcp::new(b),
            pool_a: VecPool::new(1 << 14, 2048),
            pool_b: VecPool::new(1 << 14, 2048),
            now: Instant::from_nanos(1_000_000_000),
            frames: 0,
            drop_every: None,
            data_frames: [0; 2],
            dropped: [0; 2],
        }
    }

    /// One loop iteration on each side (timers, then `poll_tx`, every frame delivered to
    /// the other side at once), then the clock moves `dt`. Returns the frames moved.
    pub fn step(&mut self, dt: Duration) -> usize {
        let mut n = 0;
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        let to_b = LocalAddrs::new(PEER_MAC, Some(PEER_IP4), Some(crate::frames::PEER_IP6));
        let to_a = LocalAddrs::new(OUR_MAC, Some(OUR_IP4), Some(crate::frames::OUR_IP6));
        let lossy = (self.drop_every, &mut self.data_frames, &mut self.dropped);
        let (every, seen, dropped) = lossy;
        n += Self::deliver(
            &mut self.a,
            &mut self.pool_a,
            &mut self.b,
            &to_b,
            self.now,
            (every, &mut seen[0], &mut dropped[0]),
        );
        n += Self::deliver(
            &mut self.b,
            &mut self.pool_b,
            &mut self.a,
            &to_a,
            self.now,
            (every, &mut seen[1], &mut dropped[1]),
        );
        self.frames += n as u64;
        self.now += dt;
        n
    }

    /// The earlier of the two sides' next timer deadlines.
    pub fn next_timeout(&self) -> Option<Instant> {
        stack::time::earliest(self.a.poll_timeout(), self.b.poll_timeout())
    }

    fn deliver(
        from: &mut Tcp<VecBuf>,
        pool: &mut VecPool,
        to: &mut Tcp<VecBuf>,
        local: &LocalAddrs,
        now: Instant,
        (every, seen, dropped): (Option<u64>, &mut u64, &mut u64),
    ) -> usize {
        let mut n = 0;
        loop {
            let mut out: Burst<VecBuf> = Burst::new();
            let k = from.poll_tx(now, pool, &mut out, false);
            for b in out {
                let bytes = b.into_vec();
                match parse(&bytes, RxChecksum::default(), local) {
                    Parsed::Tcp(m) => {
                        if m.payload_len > 0 {
                            *seen += 1;
                            if every.is_some_and(|e| e > 0 && *seen % e == 0) {
                                *dropped += 1;
                                continue;
                            }
                        }
                        let mut seg = Segment::from_meta(&m, VecBuf::from_vec(bytes), now);
                        to.handle_segment(now, &mut seg);
                    }
                    other => panic!("an unparsable frame: {other:?}"),
                }
            }
            n += k;
            if k < stack::driver::MAX_BURST {
                return n;
            }
        }
    }
}

/// The byte at sequence number `s` in every test stream.
pub fn pattern(s: SeqNumber) -> u8 {
    (s.get() % 251) as u8
}

/// A template, fields and SACK option bytes (`sack_blocks` blocks) for building one ACK
/// on the fixture's flow.
pub fn ack_parts(sack_blocks: usize) -> (AckTemplate, TcpFields, ([u8; 36], usize)) {
    let flow = FlowKey::v4(PEER_IP4, PEER_PORT, OUR_IP4, PORT);
    let tmpl = AckTemplate::new(&flow, OUR_MAC, PEER_MAC, true, 64);
    let f = TcpFields {
        seq: SeqNumber(7),
        ack: SeqNumber(1_000_000),
        flags: TcpFlags::ACK,
        window: 32_000,
        ts: Timestamp {
            tsval: 10,
            tsecr: 20,
        },
    };
    let blocks: Vec<SackBlock> = (0..sack_blocks as u32)
        .map(|i| SackBlock {
            left: SeqNumber(1_010_000 + 10_000 * i),
            right: SeqNumber(1_015_000 + 10_000 * i),
        })
        .collect();
    let mut opt = [0u8; 36];
    let n = sack_option(&blocks, &mut opt);
    (tmpl, f, (opt, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The benchmarks' receiver opens and acknowledges full runs (`cargo test` never runs
    /// the benchmarks themselves).
    #[test]
    fn benchmark_receiver_takes_full_runs() {
        let mut rx = Fixture::new(AckPolicy::linux()).unwrap();
        let mut acks = 0;
        for _ in 0..10 {
            let mut s = rx.next(45);
            rx.tcp.handle_segment(rx.now, &mut s);
            acks += rx.drain();
        }
        assert_eq!(acks, 10, "one stretch ACK per 45-segment run");
        let info = rx.tcp.info(rx.id()).unwrap();
        assert_eq!((info.rcv_nxt, info.unconsumed), (rx.snd_nxt, 0));
    }
}
