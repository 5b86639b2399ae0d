//! Header templates for the segments weir sends (ACK, SYN-ACK, FIN, RST).
//!
//! A connection prepares its [`AckTemplate`] once at setup: Ethernet (with an 802.1Q tag
//! when the flow has one), IPv4 or IPv6, and the TCP header with the NOP,NOP,Timestamps
//! prefix when timestamps were negotiated (RFC 7323 Appendix A layout). Building an ACK
//! copies the template and patches sequence, acknowledgment, flags, window, TSval/TSecr,
//! appends the SACK option (RFC 2018 §3: up to 3 blocks with timestamps, 4 without),
//! and fills lengths and checksums: in software, or the pseudo-header sum plus a TX
//! checksum offload request (DPDK's convention) when the caller asks and the buffer agrees.

use crate::buf::{BufPool, PacketBuf, Prefilled, TxChecksumOffload};
use crate::flow::{FlowKey, NO_VLAN};
use crate::seq::SeqNumber;
use crate::wire::checksum;
use crate::wire::fast::NOP_NOP_TS;
use crate::wire::{SackBlock, TcpFlags, Timestamp};

/// Longest header a template holds: Ethernet + 802.1Q (18), IPv6 (40), TCP with 40 option
/// bytes (60).
pub const MAX_HEADER: usize = 18 + 40 + 60;

/// A prebuilt reply header for one flow.
#[derive(Clone, Debug)]
pub struct AckTemplate {
    hdr: [u8; MAX_HEADER],
    l2_len: u8,
    l3_len: u8,
    /// Template length: up to the end of the fixed TCP header plus the timestamp option.
    len: u8,
    ts: bool,
    v6: bool,
    /// Unfolded pseudo-header sum without the TCP length.
    pseudo: u64,
    /// Sums of the template's IPv4 header and TCP header bytes as they stand (lengths,
    /// sequence numbers, flags, window, timestamps and checksums zero): a frame built from
    /// it adds only the fields it patched (RFC 1071 §2, RFC 1624's incremental update).
    ip_fixed: u64,
    tcp_fixed: u64,
}

/// The per-segment fields patched into a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpFields {
    /// Sequence number.
    pub seq: SeqNumber,
    /// Acknowledgment number.
    pub ack: SeqNumber,
    /// Flags.
    pub flags: TcpFlags,
    /// The window field (already scaled down).
    pub window: u16,
    /// TSval and TSecr, written when the template has timestamps.
    pub ts: Timestamp,
}

impl AckTemplate {
    /// A template for replies on `flow` (`flow.src` is the peer, `flow.dst` is weir).
    pub fn new(flow: &FlowKey, local_mac: [u8; 6], peer_mac: [u8; 6], ts: bool, ttl: u8) -> Self {
        let mut h = [0u8; MAX_HEADER];
        h[0..6].copy_from_slice(&peer_mac);
        h[6..12].copy_from_slice(&local_mac);
        let mut l2 = 12;
        if flow.vlan != NO_VLAN {
            h[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
            h[14..16].copy_from_slice(&(flow.vlan & 0x0fff).to_be_bytes());
            l2 = 16;
        }
        let ethertype: u16 = if flow.v6 { 0x86dd } else { 0x0800 };
        h[l2..l2 + 2].copy_from_slice(&ethertype.to_be_bytes());
        l2 += 2;
        let (l3, pseudo) = if flow.v6 {
            let ip = &mut h[l2..l2 + 40];
            ip[0] = 0x60;
            ip[6] = 6;
            ip[7] = ttl;
            ip[8..24].copy_from_slice(&flow.dst);
            ip[24..40].copy_from_slice(&flow.src);
            (40, checksum::pseudo_v6(flow.dst, flow.src, 6, 0))
        } else {
            let ip = &mut h[l2..l2 + 20];
            let src = [flow.dst[12], flow.dst[13], flow.dst[14], flow.dst[15]];
            let dst = [flow.src[12], flow.src[13], flow.src[14], flow.src[15]];
            ip[0] = 0x45;
            ip[6] = 0x40; // DF
            ip[8] = ttl;
            ip[9] = 6;
            ip[12..16].copy_from_slice(&src);
            ip[16..20].copy_from_slice(&dst);
            (20, checksum::pseudo_v4(src, dst, 6, 0))
        };
        let t = l2 + l3;
        h[t..t + 2].copy_from_slice(&flow.dport.to_be_bytes());
        h[t + 2..t + 4].copy_from_slice(&flow.sport.to_be_bytes());
        let mut len = t + 20;
        if ts {
            h[len..len + 4].copy_from_slice(&NOP_NOP_TS);
            len += 12;
        }
        let ip_fixed = if flow.v6 {
            0
        } else {
            checksum::add(0, &h[l2..t])
        };
        let tcp_fixed = checksum::add(0, &h[t..len]);
        AckTemplate {
            hdr: h,
            l2_len: l2 as u8,
            l3_len: l3 as u8,
            len: len as u8,
            ts,
            v6: flow.v6,
            pseudo,
            ip_fixed,
            tcp_fixed,
        }
    }

    /// `true` if the template carries the timestamps option.
    pub fn has_timestamps(&self) -> bool {
        self.ts
    }

    /// Most SACK blocks an ACK from this template can carry (RFC 2018 §3).
    pub fn max_sack_blocks(&self) -> usize {
        if self.ts {
            3
        } else {
            4
        }
    }

    /// Builds one segment into a buffer from `pool`: the template, `fields`, and `extra`
    /// option bytes (a multiple of 4, at most `40 - 12` with timestamps). Returns `None`
    /// when the pool is empty (nothing is consumed; the caller retries later).
    #[inline]
    pub fn build<P: BufPool>(
        &self,
        pool: &mut P,
        f: &TcpFields,
        extra: &[u8],
        tx_csum_offload: bool,
    ) -> Option<P::Buf> {
        self.build_with_payload(pool, f, extra, 0, |_| Some(TcpFlags::NONE), tx_csum_offload)
    }

    /// As [`AckTemplate::build`], with `payload_len` bytes of payload after the header,
    /// written by `fill` into the slice it is given. `fill` returns flags to add to
    /// `f.flags` (PSH when the payload ends a write), or `None` if it could not fill it:
    /// the buffer is dropped and `None` returned. The payload is copied into the frame;
    /// a pool that can put it in place itself (stamped, or chained by reference) is used
    /// through [`AckTemplate::build_prefilled`] instead (docs/decisions/send-path.md).
    #[inline]
    pub fn build_with_payload<P: BufPool>(
        &self,
        pool: &mut P,
        f: &TcpFields,
        extra: &[u8],
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Option<TcpFlags>,
        tx_csum_offload: bool,
    ) -> Option<P::Buf> {
        let opt_room = 40 - if self.ts { 12 } else { 0 };
        let extra = &extra[..extra.len().min(opt_room) & !3];
        let hlen = usize::from(self.len);
        let hdrs = hlen + extra.len();
        let total = hdrs + payload_len;
        if total - usize::from(self.l2_len) > usize::from(u16::MAX) {
            return None;
        }
        let mut buf = pool.alloc(total)?;
        {
            let d = buf.data_mut();
            if d.len() < total {
                return None;
            }
            d[..hlen].copy_from_slice(&self.hdr[..hlen]);
            d[hlen..hdrs].copy_from_slice(extra);
            let more = if payload_len > 0 {
                fill(&mut d[hdrs..total])?
            } else {
                TcpFlags::NONE
            };
            self.patch(&mut d[..total], hdrs, total, f, more);
        }
        let l2 = usize::from(self.l2_len);
        let l3 = usize::from(self.l3_len);
        let t = l2 + l3;
        let tcp_len = total - t;
        if !(tx_csum_offload && self.offload_checksums(&mut buf, tcp_len)) {
            let d = buf.data_mut();
            software_checksums(&mut d[..total], l2, l3, self.v6, self.pseudo);
        }
        Some(buf)
    }

    /// As [`AckTemplate::build_with_payload`] for a segment whose `payload_len` payload
    /// bytes the pool puts in place itself ([`BufPool::alloc_with_payload`]: the bytes
    /// `src.data()[off..off + payload_len]`, whose first byte is at address `at`,
    /// stamped or chained by reference): only the headers are written, and the TCP
    /// checksum is the headers' sum plus the pool's sum of the payload. `more` is added
    /// to `f.flags`. `None` when the pool cannot (the caller copies instead) or the
    /// segment would be too long.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn build_prefilled<P: BufPool>(
        &self,
        pool: &mut P,
        f: &TcpFields,
        extra: &[u8],
        src: &P::Buf,
        off: usize,
        at: usize,
        payload_len: usize,
        more: TcpFlags,
        tx_csum_offload: bool,
    ) -> Option<P::Buf> {
        let opt_room = 40 - if self.ts { 12 } else { 0 };
        let extra = &extra[..extra.len().min(opt_room) & !3];
        let hlen = usize::from(self.len);
        let hdrs = hlen + extra.len();
        let total = hdrs + payload_len;
        if total - usize::from(self.l2_len) > usize::from(u16::MAX) {
            return None;
        }
        let Prefilled {
            mut buf,
            payload_sum,
        } = pool.alloc_with_payload(hdrs, src, off, payload_len, at)?;
        {
            let d = buf.data_mut().get_mut(..hdrs)?;
            d[..hlen].copy_from_slice(&self.hdr[..hlen]);
            d[hlen..hdrs].copy_from_slice(extra);
            self.patch(d, hdrs, total, f, more);
        }
        let l2 = usize::from(self.l2_len);
        let l3 = usize::from(self.l3_len);
        let t = l2 + l3;
        let tcp_len = total - t;
        if !(tx_csum_offload && self.offload_checksums(&mut buf, tcp_len)) {
            // From the template's sums and the fields just patched, not by reading back
            // the header (which would wait for its stores): the payload is summed
            // already, so this is all a segment's checksums cost.
            let words = |x: u32| u64::from(x >> 16) + u64::from(x & 0xffff);
            let d = &mut buf.data_mut()[..hdrs];
            if !self.v6 {
                let c = !checksum::fold(self.ip_fixed + (total - l2) as u64);
                d[l2 + 10..l2 + 12].copy_from_slice(&c.to_be_bytes());
            }
            let mut sum = self.pseudo
                + tcp_len as u64
                + self.tcp_fixed
                + words(f.seq.get())
                + words(f.ack.get())
                + u64::from(u16::from_be_bytes([d[t + 12], d[t + 13]]))
                + u64::from(f.window)
                + u64::from(payload_sum);
            if self.ts {
                sum += words(f.ts.tsval) + words(f.ts.tsecr);
            }
            if !extra.is_empty() {
                sum = checksum::add(sum, extra);
            }
            let c = !checksum::fold(sum);
            d[t + 16..t + 18].copy_from_slice(&c.to_be_bytes());
        }
        Some(buf)
    }

    /// Asks `buf` for TX checksum offload (DPDK's convention): the pseudo-header sum, not
    /// complemented, in the TCP checksum field, and the IPv4 header checksum zero; the
    /// NIC finishes both. `false` when the buffer refuses (checksums in software then).
    #[inline]
    fn offload_checksums<B: PacketBuf>(&self, buf: &mut B, tcp_len: usize) -> bool {
        let (l2, t) = (
            usize::from(self.l2_len),
            usize::from(self.l2_len) + usize::from(self.l3_len),
        );
        let ph = checksum::fold(self.pseudo + tcp_len as u64);
        {
            let d = buf.data_mut();
            d[t + 16..t + 18].copy_from_slice(&ph.to_be_bytes());
            if !self.v6 {
                d[l2 + 10] = 0;
                d[l2 + 11] = 0;
            }
        }
        buf.request_tx_checksum(TxChecksumOffload {
            l2_len: self.l2_len,
            l3_len: u16::from(self.l3_len),
            ipv4: !self.v6,
        })
    }

    /// Writes lengths and per-segment fields into a copy of the template; `d` holds at
    /// least the headers, the TCP header ending at `hdrs`, of a frame of `total` bytes.
    fn patch(&self, d: &mut [u8], hdrs: usize, total: usize, f: &TcpFields, more: TcpFlags) {
        let l2 = usize::from(self.l2_len);
        let l3 = usize::from(self.l3_len);
        let t = l2 + l3;
        let tcp_len = total - t;
        if self.v6 {
            d[l2 + 4..l2 + 6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
        } else {
            d[l2 + 2..l2 + 4].copy_from_slice(&((total - l2) as u16).to_be_bytes());
        }
        let tcp = &mut d[t..];
        tcp[4..8].copy_from_slice(&f.seq.get().to_be_bytes());
        tcp[8..12].copy_from_slice(&f.ack.get().to_be_bytes());
        tcp[12] = (((hdrs - t) / 4) as u8) << 4;
        tcp[13] = f.flags.0 | more.0;
        tcp[14..16].copy_from_slice(&f.window.to_be_bytes());
        tcp[16] = 0;
        tcp[17] = 0;
        if self.ts {
            tcp[24..28].copy_from_slice(&f.ts.tsval.to_be_bytes());
            tcp[28..32].copy_from_slice(&f.ts.tsecr.to_be_bytes());
        }
    }
}

fn software_checksums(d: &mut [u8], l2: usize, l3: usize, v6: bool, pseudo: u64) {
    let t = l2 + l3;
    let tcp_len = d.len() - t;
    if !v6 {
        d[l2 + 10] = 0;
        d[l2 + 11] = 0;
        let c = checksum::checksum(&d[l2..t]);
        d[l2 + 10..l2 + 12].copy_from_slice(&c.to_be_bytes());
    }
    d[t + 16] = 0;
    d[t + 17] = 0;
    let sum = checksum::add(pseudo + tcp_len as u64, &d[t..]);
    let c = !checksum::fold(sum);
    d[t + 16..t + 18].copy_from_slice(&c.to_be_bytes());
}

/// Writes a SACK option (NOP, NOP, kind 5, length, blocks; RFC 2018 §3) for `blocks` into
/// `out` and returns its length (0 for no blocks).
pub fn sack_option(blocks: &[SackBlock], out: &mut [u8]) -> usize {
    let n = blocks.len().min(4);
    let len = 4 + 8 * n;
    if n == 0 || out.len() < len {
        return 0;
    }
    out[0] = 1;
    out[1] = 1;
    out[2] = 5;
    out[3] = (2 + 8 * n) as u8;
    for (i, b) in blocks.iter().take(n).enumerate() {
        let o = 4 + 8 * i;
        out[o..o + 4].copy_from_slice(&b.left.get().to_be_bytes());
        out[o + 4..o + 8].copy_from_slice(&b.right.get().to_be_bytes());
    }
    len
}

/// SYN-ACK options after the template's timestamps: MSS, NOP+window scale, NOP+NOP+
/// SACK-permitted, each only if set. Returns the length written (a multiple of 4).
pub fn syn_options(mss: u16, wscale: Option<u8>, sack_ok: bool, out: &mut [u8; 12]) -> usize {
    out[0] = 2;
    out[1] = 4;
    out[2..4].copy_from_slice(&mss.to_be_bytes());
    let mut n = 4;
    if let Some(ws) = wscale {
        out[n..n + 4].copy_from_slice(&[1, 3, 3, ws]);
        n += 4;
    }
    if sack_ok {
        out[n..n + 4].copy_from_slice(&[1, 1, 4, 2]);
        n += 4;
    }
    n
}
