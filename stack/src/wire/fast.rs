//! The fast-path frame layout, the one place its byte offsets are written: an untagged
//! Ethernet II frame carrying IPv4 without options and TCP whose options are none or
//! exactly NOP NOP TS (RFC 7323 Appendix A), nearly every segment of a bulk transfer:
//!
//! ```text
//!  0..14  Ethernet   dst MAC, src MAC, EtherType 0x0800
//! 14..34  IPv4       version/IHL 0x45, TOS, total length, ID, flags/fragment, TTL,
//!                    protocol 6, checksum, src, dst
//! 34..54  TCP        ports, seq, ack, data offset, flags, window, checksum, urgent
//! 54..66  options    NOP NOP kind 8 length 10, TSval, TSecr
//! ```
//!
//! [`HEADER_LEN`] (66) bytes with timestamps, [`HEADER_LEN_NO_OPTIONS`] (54) without.
//! [`field`] gives each field's bytes in the frame: the protocol modules' own offsets
//! ([`ethernet::field`], [`ipv4::field`], [`tcp::field`]) moved to where each header starts
//! here. [`FastTcpV4::parse`] (the parser's fast path, and GRO's) reads frames in this
//! layout; GRO's same-run template compares and reads them at these offsets; weir-gen
//! writes its data segments in it, and weir-sink's header-reading loop touches its first
//! and last byte.

use core::ops::Range;

use super::ethernet::{self, ethertype};
use super::ipv4::{self, protocol};
use super::parse::LocalAddrs;
use super::tcp;
use super::{NetMeta, TcpFlags, TcpMeta, TcpOptions, Timestamp, MAX_OPTION_BYTES};
use crate::buf::{ChecksumStatus, RxChecksum};
use crate::flow::{FlowKey, FlowWords, NO_VLAN};
use crate::seq::SeqNumber;

/// `r` moved `by` bytes on.
const fn at(by: usize, r: Range<usize>) -> Range<usize> {
    by + r.start..by + r.end
}

/// Byte offsets and ranges of each field in the frame (smoltcp's `mod field` style).
pub mod field {
    use core::ops::Range;

    use super::at;
    use crate::wire::{ethernet, ipv4, tcp};

    /// Destination MAC.
    pub const ETH_DST: Range<usize> = ethernet::field::DST;
    /// Source MAC.
    pub const ETH_SRC: Range<usize> = ethernet::field::SRC;
    /// EtherType (IPv4).
    pub const ETH_TYPE: Range<usize> = ethernet::field::ETHERTYPE;

    /// First byte of the IPv4 header.
    pub const IP: usize = ethernet::HEADER_LEN;
    /// Version and IHL: 0x45 in this layout (no IP options).
    pub const IP_VER_IHL: usize = IP + ipv4::field::VER_IHL;
    /// Type of service.
    pub const IP_TOS: usize = IP + ipv4::field::TOS;
    /// Total length (IPv4 header and payload).
    pub const IP_TOTAL_LEN: Range<usize> = at(IP, ipv4::field::LENGTH);
    /// Identification.
    pub const IP_IDENT: Range<usize> = at(IP, ipv4::field::IDENT);
    /// Flags and fragment offset.
    pub const IP_FLG_OFF: Range<usize> = at(IP, ipv4::field::FLG_OFF);
    /// Time to live.
    pub const IP_TTL: usize = IP + ipv4::field::TTL;
    /// Protocol (TCP).
    pub const IP_PROTO: usize = IP + ipv4::field::PROTOCOL;
    /// Header checksum.
    pub const IP_CHECKSUM: Range<usize> = at(IP, ipv4::field::CHECKSUM);
    /// Source address.
    pub const IP_SRC: Range<usize> = at(IP, ipv4::field::SRC);
    /// Destination address.
    pub const IP_DST: Range<usize> = at(IP, ipv4::field::DST);

    /// First byte of the TCP header.
    pub const TCP: usize = IP + ipv4::HEADER_LEN;
    /// Source port.
    pub const TCP_SRC_PORT: Range<usize> = at(TCP, tcp::field::SRC_PORT);
    /// Destination port.
    pub const TCP_DST_PORT: Range<usize> = at(TCP, tcp::field::DST_PORT);
    /// Sequence number.
    pub const TCP_SEQ: Range<usize> = at(TCP, tcp::field::SEQ);
    /// Acknowledgment number.
    pub const TCP_ACK: Range<usize> = at(TCP, tcp::field::ACK);
    /// Data offset (high 4 bits): 5 or 8 words in this layout.
    pub const TCP_DATA_OFF: usize = TCP + tcp::field::DATA_OFF;
    /// Control bits.
    pub const TCP_FLAGS: usize = TCP + tcp::field::FLAGS;
    /// Window.
    pub const TCP_WINDOW: Range<usize> = at(TCP, tcp::field::WINDOW);
    /// Checksum.
    pub const TCP_CHECKSUM: Range<usize> = at(TCP, tcp::field::CHECKSUM);
    /// Urgent pointer.
    pub const TCP_URGENT: Range<usize> = at(TCP, tcp::field::URGENT);

    /// First option byte: the end of the header when there are no options.
    pub const TCP_OPTIONS: usize = TCP + tcp::field::OPTIONS;
    /// NOP, NOP, timestamp kind, length 10 ([`super::NOP_NOP_TS`]).
    pub const TS_PREFIX: Range<usize> = TCP_OPTIONS..TCP_OPTIONS + 4;
    /// TSval.
    pub const TS_VAL: Range<usize> = TS_PREFIX.end..TS_PREFIX.end + 4;
    /// TSecr.
    pub const TS_ECR: Range<usize> = TS_VAL.end..TS_VAL.end + 4;
}

/// The [`FlowKey::hash32`] of the TCP segment in `frame`, for a frame in this module's
/// layout (IPv4 without options, untagged), read from its addresses and ports alone:
/// `None` for any other frame. Nothing else is checked (a frame that fails the parse later
/// only wasted the hint): the pipeline uses it to fetch the segment's connection a frame or
/// two before the segment reaches TCP.
#[inline(always)]
pub fn flow_hash_hint(frame: &[u8]) -> Option<u32> {
    let h = frame.first_chunk::<{ field::TCP_DST_PORT.end }>()?;
    let le32 = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let be16 = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
    if be16(field::ETH_TYPE.start) != ethertype::IPV4
        || h[field::IP_VER_IHL] != 0x45
        || h[field::IP_PROTO] != protocol::TCP
    {
        return None;
    }
    Some(
        FlowWords::v4(
            le32(field::IP_SRC.start),
            be16(field::TCP_SRC_PORT.start),
            le32(field::IP_DST.start),
            be16(field::TCP_DST_PORT.start),
        )
        .hash32(),
    )
}

/// Header bytes of a frame with timestamps (14 + 20 + 32): where its payload starts.
pub const HEADER_LEN: usize = field::TS_ECR.end;
/// Header bytes of a frame without TCP options (14 + 20 + 20).
pub const HEADER_LEN_NO_OPTIONS: usize = field::TCP_OPTIONS;
/// TCP header length with NOP NOP TS (data offset 8).
pub const TCP_HEADER_LEN_TS: usize = HEADER_LEN - field::TCP;
/// The option bytes before TSval (RFC 7323 Appendix A): NOP, NOP, kind 8, length 10.
pub const NOP_NOP_TS: [u8; 4] = [tcp::kind::NOP, tcp::kind::NOP, tcp::kind::TIMESTAMP, 10];

/// `r` (a range in the frame past [`field::TCP_OPTIONS`]) as a range of the TCP option
/// bytes ([`TcpMeta::raw_opts`]).
const fn in_options(r: Range<usize>) -> Range<usize> {
    r.start - field::TCP_OPTIONS..r.end - field::TCP_OPTIONS
}

const _: () = assert!(HEADER_LEN == 66 && HEADER_LEN_NO_OPTIONS == 54);
const _: () = assert!(TCP_HEADER_LEN_TS == 32);

/// A TCP segment in the fast-path layout, which [`parse_into`](super::parse_into) takes its
/// fast path for (see [`FastTcpV4::parse`]), as the header's words: no bigger than a few
/// registers, so a consumer that needs only these (GRO) never writes a [`TcpMeta`] and
/// reads it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastTcpV4 {
    /// Destination MAC then source MAC, as in the frame, little-endian in the low 96 bits
    /// of the two words (bytes 0..8, then 8..12).
    pub macs: [u64; 2],
    /// Source (remote) IPv4 address, in network byte order as a little-endian load gives
    /// it (the four address bytes, first byte lowest).
    pub src: u32,
    /// Destination (weir's) IPv4 address, the same way.
    pub dst: u32,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Raw window field.
    pub window: u16,
    /// TCP header length: 20 (no options) or 32 (NOP NOP TS).
    pub header_len: u8,
    /// The timestamp option, present when `header_len` is 32.
    pub ts: Option<Timestamp>,
    /// TCP payload length.
    pub payload_len: u16,
    /// TTL.
    pub ttl: u8,
    /// TOS.
    pub tos: u8,
    /// Don't-fragment bit.
    pub df: bool,
    /// IPv4 identification.
    pub ip_id: u16,
}

impl FastTcpV4 {
    /// Offset of the TCP payload within the frame.
    #[inline(always)]
    pub fn payload_off(&self) -> u16 {
        // At most 66.
        (field::TCP + usize::from(self.header_len)) as u16
    }

    /// `frame` read at fixed offsets, if it has the fast-path layout (see the module
    /// documentation), is to weir's MAC and IPv4 address, not a fragment, and had both
    /// checksums verified by the NIC; `None` for anything else, which
    /// [`parse_into`](super::parse_into) then checks in wire order. Every check of the full
    /// path that applies to this layout is made here too; each field is read once, at its
    /// fixed offset.
    #[inline(always)]
    pub fn parse(frame: &[u8], csum: RxChecksum, local: &LocalAddrs) -> Option<FastTcpV4> {
        let (Some(ours), ChecksumStatus::Good, ChecksumStatus::Good) =
            (local.ipv4, csum.ip, csum.l4)
        else {
            return None;
        };
        let h = frame.first_chunk::<HEADER_LEN_NO_OPTIONS>()?;
        let be16 = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
        let be32 = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let le32 = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let mac = |i: usize| [h[i], h[i + 1], h[i + 2], h[i + 3], h[i + 4], h[i + 5]];
        let dst_mac: [u8; 6] = mac(field::ETH_DST.start);
        let src_mac: [u8; 6] = mac(field::ETH_SRC.start);
        let total_len = usize::from(be16(field::IP_TOTAL_LEN.start));
        // The addresses written out, not through a closure like the MACs: with one, the
        // source address was loaded as a word and its multicast check took more
        // instructions.
        let (s, d) = (field::IP_SRC.start, field::IP_DST.start);
        let src = [h[s], h[s + 1], h[s + 2], h[s + 3]];
        let flags = TcpFlags(h[field::TCP_FLAGS]);
        let hl = usize::from(h[field::TCP_DATA_OFF] >> 4) * 4;
        let ok = dst_mac == local.mac
            && !ethernet::is_group(&src_mac)
            && be16(field::ETH_TYPE.start) == ethertype::IPV4
            && h[field::IP_VER_IHL] == 0x45 // version 4, IHL 5: no IP options
            && total_len <= frame.len() - field::IP
            && be16(field::IP_FLG_OFF.start) & (ipv4::FLAG_MF | 0x1fff) == 0 // not a fragment
            && h[field::IP_PROTO] == protocol::TCP
            && !ipv4::is_multicast_or_broadcast(src)
            && [h[d], h[d + 1], h[d + 2], h[d + 3]] == ours.octets()
            && hl >= tcp::HEADER_LEN
            && hl + ipv4::HEADER_LEN <= total_len
            && flags.intersects(TcpFlags(0x3f))
            && !(flags.contains(TcpFlags::SYN) && flags.intersects(TcpFlags::FIN | TcpFlags::RST));
        if !ok {
            return None;
        }
        let ts = match hl {
            tcp::HEADER_LEN => None,
            TCP_HEADER_LEN_TS => {
                let o = frame.first_chunk::<HEADER_LEN>()?;
                // NOP NOP TS length 10, compared as one word (byte by byte it compiled to
                // four compares and branches).
                let word = |i: usize| u32::from_be_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
                if word(field::TS_PREFIX.start) != u32::from_be_bytes(NOP_NOP_TS) {
                    return None;
                }
                Some(Timestamp {
                    tsval: word(field::TS_VAL.start),
                    tsecr: word(field::TS_ECR.start),
                })
            }
            _ => return None,
        };
        // The twelve MAC bytes (destination, source) as two words: bytes 0..8, then 8..12.
        let mut lo = [0u8; 8];
        lo.copy_from_slice(&h[field::ETH_DST.start..field::ETH_DST.start + 8]);
        Some(FastTcpV4 {
            macs: [
                u64::from_le_bytes(lo),
                u64::from(le32(field::ETH_DST.start + 8)),
            ],
            src: le32(field::IP_SRC.start),
            dst: le32(field::IP_DST.start),
            sport: be16(field::TCP_SRC_PORT.start),
            dport: be16(field::TCP_DST_PORT.start),
            seq: be32(field::TCP_SEQ.start),
            ack: be32(field::TCP_ACK.start),
            flags,
            window: be16(field::TCP_WINDOW.start),
            header_len: hl as u8,
            ts,
            // Fits in u16: the IP total length less headers.
            payload_len: (total_len - ipv4::HEADER_LEN - hl) as u16,
            ttl: h[field::IP_TTL],
            tos: h[field::IP_TOS],
            df: be16(field::IP_FLG_OFF.start) & ipv4::FLAG_DF != 0,
            ip_id: be16(field::IP_IDENT.start),
        })
    }

    /// The flow key (IPv4-mapped addresses, no VLAN).
    #[inline(always)]
    pub fn flow(&self) -> FlowKey {
        let mapped = |a: u32| {
            let mut b = [0u8; 16];
            b[10] = 0xff;
            b[11] = 0xff;
            b[12..].copy_from_slice(&a.to_le_bytes());
            b
        };
        FlowKey {
            src: mapped(self.src),
            dst: mapped(self.dst),
            sport: self.sport,
            dport: self.dport,
            vlan: NO_VLAN,
            v6: false,
        }
    }

    /// The options as the full parser reports them: the timestamp, nothing else.
    #[inline(always)]
    pub fn opts(&self) -> TcpOptions {
        TcpOptions {
            timestamp: self.ts,
            ..TcpOptions::default()
        }
    }

    /// Offset of TSval within the option bytes, when there are timestamps.
    #[inline(always)]
    pub fn tsval_at(&self) -> Option<u8> {
        self.ts.map(|_| in_options(field::TS_VAL).start as u8)
    }

    /// The [`TcpMeta`] the full parser builds for this frame, written in whole words.
    #[inline(always)]
    pub fn to_meta(&self) -> TcpMeta {
        let mut raw_opts = [0u8; MAX_OPTION_BYTES];
        if let Some(t) = self.ts {
            raw_opts[in_options(field::TS_PREFIX)].copy_from_slice(&NOP_NOP_TS);
            raw_opts[in_options(field::TS_VAL)].copy_from_slice(&t.tsval.to_be_bytes());
            raw_opts[in_options(field::TS_ECR)].copy_from_slice(&t.tsecr.to_be_bytes());
        }
        let m = |w: u64| w.to_le_bytes();
        let (lo, hi) = (m(self.macs[0]), m(self.macs[1]));
        TcpMeta {
            flow: self.flow(),
            src_mac: [lo[6], lo[7], hi[0], hi[1], hi[2], hi[3]],
            dst_mac: [lo[0], lo[1], lo[2], lo[3], lo[4], lo[5]],
            seq: SeqNumber(self.seq),
            ack: SeqNumber(self.ack),
            flags: self.flags,
            window: self.window,
            header_len: self.header_len,
            opts: self.opts(),
            raw_opts,
            tsval_at: self.tsval_at(),
            payload_off: self.payload_off(),
            payload_len: self.payload_len,
            net: NetMeta {
                ttl: self.ttl,
                tos: self.tos,
                df: self.df,
                ip_id: self.ip_id,
                flow_label: 0,
                ip_options: false,
            },
        }
    }
}
