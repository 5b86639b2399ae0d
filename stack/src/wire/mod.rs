//! Wire views: Ethernet, 802.1Q, ARP, IPv4, IPv6, ICMP, TCP — parsing and emitting.
//!
//! One file per protocol, in the style of smoltcp's `wire`: a `mod field` of byte ranges,
//! `Packet<T: AsRef<[u8]>>` with `new_checked`, getters on `AsRef`, setters on `AsMut`.
//! After `new_checked` succeeds no accessor panics.
//!
//! Files: [`ethernet`] (+ one 802.1Q tag), [`arp`], [`ipv4`], [`ipv6`] (bounded
//! extension-header walk), [`tcp`] (header and options), [`icmp`] (echo, neighbor
//! discovery), [`checksum`]; [`parse()`] is the one entry point per received frame
//! ([`Parsed`], [`DropReason`], [`ParseStats`]); [`fast`] owns the fast-path frame layout
//! (untagged IPv4, TCP with no options or NOP NOP TS: 66 header bytes at fixed offsets)
//! and its reader [`FastTcpV4`]; [`emit`] builds frames ([`TcpFrame`] and the ARP/ICMP/ND
//! replies).
//!
//! This file holds the types shared by every stage: the flags, the parsed options and the
//! [`TcpMeta`] that [`parse()`] produces for each received TCP segment. GRO compares
//! `TcpMeta`s, TCP consumes GRO's [`crate::segment::Segment`]s built from them.

pub mod arp;
mod bytes;
pub mod checksum;
pub mod emit;
pub mod ethernet;
pub mod fast;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod parse;
pub mod tcp;

pub use emit::{emit_arp_reply, emit_echo_reply, emit_neighbor_advert, TcpFrame, TxChecksum};
pub use fast::FastTcpV4;
pub use parse::{
    parse, parse_chain_into, parse_into, ArpRequest, DropReason, FrameTail, IcmpEcho, LocalAddrs,
    NeighborSolicit, ParseStats, Parsed,
};

use crate::flow::FlowKey;
use crate::seq::SeqNumber;

/// TCP header flags (the low 8 bits of the flags field).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// FIN: no more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// SYN: synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// RST: reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// PSH: push function.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// ACK: the acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// URG: the urgent pointer is significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECE: ECN echo (RFC 3168).
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// CWR: congestion window reduced (RFC 3168).
    pub const CWR: TcpFlags = TcpFlags(0x80);
    /// No flags.
    pub const NONE: TcpFlags = TcpFlags(0);

    /// `true` if every flag in `f` is set.
    #[inline]
    pub const fn contains(self, f: TcpFlags) -> bool {
        self.0 & f.0 == f.0
    }
    /// `true` if any flag in `f` is set.
    #[inline]
    pub const fn intersects(self, f: TcpFlags) -> bool {
        self.0 & f.0 != 0
    }
}

impl core::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, o: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | o.0)
    }
}

impl core::ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, o: TcpFlags) {
        self.0 |= o.0;
    }
}

impl core::ops::BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, o: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & o.0)
    }
}

impl core::fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        const NAMES: [&str; 8] = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
        let mut first = true;
        for (i, n) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(n)?;
                first = false;
            }
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

/// The TCP timestamps option (RFC 7323 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Timestamp {
    /// TSval: the sender's clock.
    pub tsval: u32,
    /// TSecr: the echoed timestamp.
    pub tsecr: u32,
}

/// A SACK block (RFC 2018 §3): `[left, right)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SackBlock {
    /// First sequence number of the block.
    pub left: SeqNumber,
    /// Sequence number just past the block.
    pub right: SeqNumber,
}

/// Most SACK blocks an option can carry (4 fit in 40 option bytes without timestamps;
/// 3 with timestamps).
pub const MAX_SACK_BLOCKS: usize = 4;

/// The TCP options weir understands, parsed. Unknown options are skipped by length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TcpOptions {
    /// Maximum segment size (RFC 9293 §3.7.1), SYN only.
    pub mss: Option<u16>,
    /// Window scale shift (RFC 7323 §2), SYN only; the parser rejects values above 14.
    pub wscale: Option<u8>,
    /// SACK-permitted (RFC 2018 §2), SYN only.
    pub sack_permitted: bool,
    /// Timestamps (RFC 7323 §3).
    pub timestamp: Option<Timestamp>,
    /// SACK blocks, `sack_count` of them valid.
    pub sack: [SackBlock; MAX_SACK_BLOCKS],
    /// Number of valid entries in `sack`.
    pub sack_count: u8,
}

/// Network-layer fields GRO compares between segments of one run (Linux
/// `inet_gro_flush` / `ipv6_gro_flush`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NetMeta {
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// IPv4 TOS or IPv6 traffic class.
    pub tos: u8,
    /// IPv4 don't-fragment bit (always `true` for IPv6).
    pub df: bool,
    /// IPv4 identification (0 for IPv6).
    pub ip_id: u16,
    /// IPv6 flow label (0 for IPv4).
    pub flow_label: u32,
    /// The IPv4 header carried options (IHL > 5) or the IPv6 header extension headers:
    /// such a segment is delivered but never merged by GRO (Linux `inet_gro_receive`).
    pub ip_options: bool,
}

/// Most TCP option bytes (data offset 15 words).
pub const MAX_OPTION_BYTES: usize = 40;

/// One received TCP segment, parsed and validated (lengths, checksums, options).
/// Everything later stages need, so none of them parses headers again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpMeta {
    /// The flow: `src` is the remote sender, `dst` is weir.
    pub flow: FlowKey,
    /// Source MAC (the peer, or its router) — where replies go.
    pub src_mac: [u8; 6],
    /// Destination MAC as received.
    pub dst_mac: [u8; 6],
    /// Sequence number of the first payload byte (or of the SYN/FIN).
    pub seq: SeqNumber,
    /// Acknowledgment number.
    pub ack: SeqNumber,
    /// Flags.
    pub flags: TcpFlags,
    /// The raw (unscaled) window field.
    pub window: u16,
    /// TCP header length in bytes (20..=60).
    pub header_len: u8,
    /// Parsed options.
    pub opts: TcpOptions,
    /// The raw option bytes, `header_len - 20` of them valid (GRO compares them).
    pub raw_opts: [u8; MAX_OPTION_BYTES],
    /// Offset of the timestamp option's TSval within `raw_opts`, if present (GRO lets
    /// TSval rise inside a run and compares the rest byte for byte).
    pub tsval_at: Option<u8>,
    /// Offset of the TCP payload within the frame.
    pub payload_off: u16,
    /// TCP payload length (trailing Ethernet padding excluded).
    pub payload_len: u16,
    /// Network-layer fields for GRO's per-pair checks.
    pub net: NetMeta,
}

impl TcpMeta {
    /// The option bytes actually present.
    pub fn option_bytes(&self) -> &[u8] {
        let n = usize::from(self.header_len.saturating_sub(20)).min(MAX_OPTION_BYTES);
        &self.raw_opts[..n]
    }
}
