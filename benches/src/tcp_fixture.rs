//! A TCP receiver with one established connection, fed coalesced segments built in
//! memory (no DPDK): the fixture shared by the criterion TCP benches
//! (`benches/benches/tcp.rs`) and `weir-bench tcp` (`apps/src/bench_tcp.rs`).

use std::net::Ipv4Addr;

use stack::ack::template::{sack_option, AckTemplate, TcpFields};
use stack::ack::AckPolicy;
use stack::buf::{PacketBuf, PayloadChain, PayloadSlice};
use stack::driver::Burst;
use stack::flow::FlowKey;
use stack::mem::{VecBuf, VecPool};
use stack::segment::Segment;
use stack::seq::SeqNumber;
use stack::tcp::{ConnId, Event, Tcp, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::{SackBlock, TcpFlags, TcpOptions, Timestamp};

/// A receiver with one established connection, fed coalesced segments built in memory.
pub struct Rx {
    /// The receiver.
    pub tcp: Tcp<VecBuf>,
    /// Pool the ACKs are built from.
    pub pool: VecPool,
    /// The virtual clock.
    pub now: Instant,
    flow: FlowKey,
    id: ConnId,
    snd_nxt: SeqNumber,
    our_nxt: SeqNumber,
    tsval: u32,
}

/// Payload bytes per full segment.
pub const MSS: u16 = 1448;

#[allow(clippy::too_many_arguments)]
fn segment(
    flow: FlowKey,
    seq: SeqNumber,
    ack: SeqNumber,
    flags: TcpFlags,
    segs: u16,
    gso: u16,
    opts: TcpOptions,
    now: Instant,
) -> Segment<VecBuf> {
    let mut payload = PayloadChain::new();
    for _ in 0..segs {
        let s = PayloadSlice {
            buf: VecBuf::from_vec(vec![0u8; 66 + usize::from(gso)]),
            off: 66,
            len: gso,
        };
        let _ = payload.push(s);
    }
    Segment {
        flow,
        peer_mac: [2, 0, 0, 0, 0, 2],
        local_mac: [2, 0, 0, 0, 0, 1],
        seq,
        ack,
        flags,
        window: 1024,
        opts,
        ts_last: opts.timestamp,
        segs: segs.max(1),
        gso_size: if segs == 0 { 0 } else { gso },
        first_rx: now,
        payload,
    }
}

impl Rx {
    /// A connection under `policy`, past the handshake and the quickack phase.
    pub fn new(policy: AckPolicy) -> Result<Self, &'static str> {
        let mut tcp = Tcp::new(TcpConfig {
            rcv_buf: 4 << 20,
            max_conns: 16,
            ..TcpConfig::default()
        });
        let _ = tcp.listen(5001, policy);
        let flow = FlowKey::v4(
            Ipv4Addr::new(198, 18, 0, 2),
            40000,
            Ipv4Addr::new(198, 18, 0, 1),
            5001,
        );
        let now = Instant::from_nanos(1_000_000_000);
        let opts = TcpOptions {
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            timestamp: Some(Timestamp { tsval: 1, tsecr: 0 }),
            ..TcpOptions::default()
        };
        let isn = SeqNumber(1_000_000);
        tcp.handle_segment(
            now,
            &mut segment(flow, isn, SeqNumber(0), TcpFlags::SYN, 0, 0, opts, now),
        );
        let mut out = Burst::new();
        let mut pool = VecPool::new(1 << 16, 2048);
        tcp.poll_tx(now, &mut pool, &mut out, false);
        // The SYN-ACK's sequence number (Ethernet 14 + IPv4 20 + 4).
        let iss = out
            .first()
            .and_then(|b| b.data().get(38..42))
            .map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]));
        out.clear();
        let our_nxt = SeqNumber(iss.wrapping_add(1));
        let ts = TcpOptions {
            timestamp: Some(Timestamp { tsval: 2, tsecr: 0 }),
            ..TcpOptions::default()
        };
        let snd_nxt = isn + 1;
        tcp.handle_segment(
            now,
            &mut segment(flow, snd_nxt, our_nxt, TcpFlags::ACK, 0, 0, ts, now),
        );
        let id = tcp
            .events()
            .find_map(|e| match e {
                Event::Opened(id) => Some(id),
                _ => None,
            })
            .ok_or("bench handshake failed")?;
        let mut rx = Rx {
            tcp,
            pool,
            now,
            flow,
            id,
            snd_nxt,
            our_nxt,
            tsval: 3,
        };
        for _ in 0..40 {
            let mut s = rx.next(2);
            rx.tcp.handle_segment(rx.now, &mut s);
            rx.drain();
        }
        Ok(rx)
    }

    /// The next in-order run of `segs` full segments (built, not yet handled).
    pub fn next(&mut self, segs: u16) -> Segment<VecBuf> {
        let opts = TcpOptions {
            timestamp: Some(Timestamp {
                tsval: self.tsval,
                tsecr: 0,
            }),
            ..TcpOptions::default()
        };
        let s = segment(
            self.flow,
            self.snd_nxt,
            self.our_nxt,
            TcpFlags::ACK,
            segs,
            MSS,
            opts,
            self.now,
        );
        self.snd_nxt += usize::from(segs) * usize::from(MSS);
        self.tsval = self.tsval.wrapping_add(1);
        s
    }

    /// The application reads everything, the ACKs due are built and dropped, and the
    /// clock moves 100 µs. Returns the ACKs built.
    pub fn drain(&mut self) -> usize {
        let _ = self
            .tcp
            .recv(self.id, |s| s.iter().map(|x| usize::from(x.len)).sum());
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

/// A template, fields and SACK option bytes for building one ACK.
pub fn ack_parts(sack_blocks: usize) -> (AckTemplate, TcpFields, ([u8; 36], usize)) {
    let flow = FlowKey::v4(
        Ipv4Addr::new(198, 18, 0, 2),
        40000,
        Ipv4Addr::new(198, 18, 0, 1),
        5001,
    );
    let tmpl = AckTemplate::new(&flow, [2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], true, 64);
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
