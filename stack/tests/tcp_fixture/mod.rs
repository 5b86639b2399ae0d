//! Shared fixture for the TCP state tests: builds `Segment`s directly (as GRO would hand
//! them over) and parses what `poll_tx` emits back with `wire::parse`, from the peer's
//! point of view (so checksums are verified too).
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::net::Ipv4Addr;

use stack::ack::{AckPolicy, AckReason};
use stack::buf::{PayloadChain, PayloadSlice, RxChecksum};
use stack::driver::Burst;
use stack::flow::FlowKey;
use stack::mem::{VecBuf, VecPool};
use stack::segment::Segment;
use stack::seq::SeqNumber;
use stack::tcp::{ConnId, Event, Tcp, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::parse::{parse, LocalAddrs, Parsed};
use stack::wire::{TcpFlags, TcpMeta, TcpOptions, Timestamp};

pub const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
pub const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub const PEER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
pub const OUR_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const PORT: u16 = 5001;
/// Payload per full segment with timestamps at MTU 1500.
pub const MSS: u16 = 1448;

/// What the peer offers in its SYN.
#[derive(Clone, Copy, Debug)]
pub struct SynOpts {
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack: bool,
    pub ts: bool,
}

impl SynOpts {
    pub fn all() -> Self {
        SynOpts {
            mss: Some(1460),
            wscale: Some(7),
            sack: true,
            ts: true,
        }
    }
    pub fn none() -> Self {
        SynOpts {
            mss: None,
            wscale: None,
            sack: false,
            ts: false,
        }
    }
}

pub struct H {
    pub tcp: Tcp<VecBuf>,
    pub pool: VecPool,
    pub now: Instant,
    pub flow: FlowKey,
    /// The peer's next sequence number.
    pub snd_nxt: SeqNumber,
    /// Our ISS + 1 (what the peer acknowledges).
    pub our_nxt: SeqNumber,
    pub ts: bool,
    /// The peer's TS clock.
    pub tsval: u32,
    /// Last TSval weir sent (what the peer echoes).
    pub our_tsval: u32,
    pub id: Option<ConnId>,
    pub offload: bool,
}

pub fn cfg() -> TcpConfig {
    TcpConfig {
        max_conns: 64,
        max_half_open: 16,
        ..TcpConfig::default()
    }
}

impl H {
    pub fn new(policy: AckPolicy) -> Self {
        Self::with_cfg(cfg(), policy)
    }

    pub fn with_cfg(cfg: TcpConfig, policy: AckPolicy) -> Self {
        let mut tcp = Tcp::new(cfg);
        tcp.listen(PORT, policy).expect("listen");
        H {
            tcp,
            pool: VecPool::new(4096, 2048),
            now: Instant::from_nanos(1_000_000_000),
            flow: FlowKey::v4(PEER_IP, 40000, OUR_IP, PORT),
            snd_nxt: SeqNumber(1_000_000),
            our_nxt: SeqNumber(0),
            ts: false,
            tsval: 5000,
            our_tsval: 0,
            id: None,
            offload: false,
        }
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.tcp.handle_timeout(self.now);
    }

    pub fn id(&self) -> ConnId {
        self.id.expect("connection established")
    }

    /// A segment from the peer with `segs` wire segments of `gso` bytes each (the last may be
    /// shorter so the total is `len`), payload bytes counting up from `seq`.
    pub fn seg(&self, seq: SeqNumber, flags: TcpFlags, len: u32, gso: u16) -> Segment<VecBuf> {
        let mut payload = PayloadChain::new();
        let mut off = 0u32;
        let mut segs = 0u16;
        while off < len {
            let l = (len - off).min(u32::from(gso.max(1)));
            let bytes: Vec<u8> = (0..l).map(|i| pattern(seq + (off + i) as usize)).collect();
            let mut frame = vec![0u8; 66];
            frame.extend_from_slice(&bytes);
            let s = PayloadSlice {
                buf: VecBuf::from_vec(frame),
                off: 66,
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
            window: 1024,
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

    pub fn send(&mut self, mut s: Segment<VecBuf>) {
        self.tcp.handle_segment(self.now, &mut s);
    }

    /// Runs poll_tx and parses every frame as the peer would.
    pub fn tx(&mut self) -> Vec<TcpMeta> {
        let mut out: Burst<VecBuf> = Burst::new();
        self.tcp
            .poll_tx(self.now, &mut self.pool, &mut out, self.offload);
        let local = LocalAddrs::new(PEER_MAC, Some(PEER_IP), None);
        let mut v = Vec::new();
        for b in out {
            let bytes = b.into_vec();
            match parse(&bytes, RxChecksum::default(), &local) {
                Parsed::Tcp(m) => {
                    if let Some(t) = m.opts.timestamp {
                        self.our_tsval = t.tsval;
                    }
                    v.push(m)
                }
                other => panic!("weir sent an unparsable frame: {other:?}"),
            }
        }
        v
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

    /// Three-way handshake; returns the SYN-ACK weir sent.
    pub fn handshake(&mut self, o: SynOpts) -> TcpMeta {
        let syn = self.syn(o);
        self.send(syn);
        let out = self.tx();
        assert_eq!(out.len(), 1, "one SYN-ACK");
        let sa = out[0];
        assert_eq!(sa.flags, TcpFlags::SYN | TcpFlags::ACK);
        assert_eq!(sa.ack, self.snd_nxt + 1);
        self.snd_nxt += 1;
        self.our_nxt = sa.seq + 1;
        self.ts = o.ts;
        self.now += Duration::from_micros(100);
        let ack = self.seg(self.snd_nxt, TcpFlags::ACK, 0, 0);
        self.send(ack);
        let id = self
            .tcp
            .events()
            .find_map(|e| match e {
                Event::Opened(id) => Some(id),
                _ => None,
            })
            .expect("Opened event");
        self.id = Some(id);
        assert!(self.tx().is_empty(), "the handshake ACK needs no answer");
        sa
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
}

/// The byte at sequence number `s` in every test stream.
pub fn pattern(s: SeqNumber) -> u8 {
    (s.get() % 251) as u8
}
