//! A scripted TCP client for the hardening tests: handshake, in-order data and arbitrary
//! segments on its flow, against a [`Sim`].

use stack::buf::RxChecksum;
use stack::flow::FlowKey;
use stack::seq::SeqNumber;
use stack::tcp::ConnId;
use stack::wire::{TcpFlags, TcpFrame, TcpOptions, Timestamp};

use crate::frames::{self, Peer};
use crate::harness::Sim;

/// One client connection as the peer sees it.
#[derive(Clone, Debug)]
pub struct Client {
    /// Who it is.
    pub peer: Peer,
    /// Its flow as weir sees it.
    pub flow: FlowKey,
    /// The sequence number of stream byte 0 (ISN + 1).
    pub base: SeqNumber,
    /// weir's ISS + 1.
    pub our_nxt: SeqNumber,
    /// Stream bytes sent so far.
    pub sent: u64,
    /// Whether it sends timestamps.
    pub ts: bool,
    /// The connection weir opened for it.
    pub id: ConnId,
    /// Its stream's seed ([`frames::stream_byte`]).
    pub seed: u8,
}

impl Client {
    /// Completes a handshake from `peer` (SYN with MSS 1460, window scale 7, SACK and,
    /// when `ts`, timestamps); panics if weir does not open the connection.
    pub fn connect(sim: &mut Sim, peer: Peer, isn: u32, ts: bool) -> Client {
        Self::try_connect(sim, peer, isn, ts).expect("connection opened")
    }

    /// As [`Client::connect`], `None` when weir did not open the connection.
    pub fn try_connect(sim: &mut Sim, peer: Peer, isn: u32, ts: bool) -> Option<Client> {
        let flow = peer.flow();
        let mut syn = peer.seg(isn, 0, TcpFlags::SYN);
        syn.opts = TcpOptions {
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            timestamp: ts.then_some(Timestamp {
                tsval: tsval(sim),
                tsecr: 0,
            }),
            ..TcpOptions::default()
        };
        sim.rx(syn.to_vec(b""), RxChecksum::default());
        sim.run_burst();
        let our_nxt = sim.track.get(&flow)?.our_nxt?;
        let base = SeqNumber(isn) + 1;
        let ack = seg(sim, &peer, our_nxt, ts, base, TcpFlags::ACK);
        sim.rx(ack.to_vec(b""), RxChecksum::default());
        sim.run_burst();
        let id = sim.p.tcp().lookup(&flow)?;
        Some(Client {
            peer,
            flow,
            base,
            our_nxt,
            sent: 0,
            ts,
            id,
            seed: (isn % 251) as u8,
        })
    }

    /// A segment on this flow at `seq` with `flags`, acknowledging weir's SYN, with a
    /// fresh timestamp when timestamps are on.
    pub fn frame(&self, sim: &Sim, seq: SeqNumber, flags: TcpFlags) -> TcpFrame {
        seg(sim, &self.peer, self.our_nxt, self.ts, seq, flags)
    }

    /// The next `len` stream bytes as one frame (not yet sent).
    pub fn next_data(&mut self, sim: &Sim, len: usize) -> Vec<u8> {
        let payload = self.bytes(self.sent, len);
        let f = self.frame(sim, self.base + self.sent as usize, TcpFlags::ACK);
        self.sent += len as u64;
        f.to_vec(&payload)
    }

    /// Stream bytes `[off, off + len)`.
    pub fn bytes(&self, off: u64, len: usize) -> Vec<u8> {
        (0..len as u64)
            .map(|i| frames::stream_byte(self.seed, off + i))
            .collect()
    }

    /// Sends the next `len` bytes in one frame and runs the burst.
    pub fn send(&mut self, sim: &mut Sim, len: usize) {
        let f = self.next_data(sim, len);
        sim.rx(f, RxChecksum::default());
        sim.run_burst();
    }
}

/// The clients' timestamp clock (1 ms ticks).
pub fn tsval(sim: &Sim) -> u32 {
    (sim.now.as_nanos() / 1_000_000) as u32 + 7_000
}

/// A segment from `peer` at `seq` acknowledging `our_nxt`, with a fresh timestamp (echoing
/// weir's last) when `ts`.
fn seg(
    sim: &Sim,
    peer: &Peer,
    our_nxt: SeqNumber,
    ts: bool,
    seq: SeqNumber,
    flags: TcpFlags,
) -> TcpFrame {
    let mut f = peer.seg(seq.get(), our_nxt.get(), flags);
    if ts {
        let echo = sim
            .track
            .get(&peer.flow())
            .and_then(|t| t.tsval)
            .unwrap_or(0);
        f.opts.timestamp = Some(Timestamp {
            tsval: tsval(sim),
            tsecr: echo,
        });
    }
    f
}
