//! TCP headers (RFC 9293 §3.1) and options: MSS (RFC 9293 §3.7.1), window scale and
//! timestamps (RFC 7323 §2-3), SACK-permitted and SACK (RFC 2018 §2-3).
//!
//! Option parsing follows RFC 9293 §3.1 ("Options"): EOL ends the list, NOP is one byte,
//! every other option carries a length that covers kind and length bytes; options weir
//! does not know are skipped by that length. A length of 0 or 1, or one that runs past the
//! header, makes the whole segment malformed (Linux's `tcp_parse_options` stops parsing;
//! weir drops and counts, so the peer's error is visible).

use super::bytes::{get16, get32, get8, get_range, get_range_mut, put16, put32, put8};
use super::checksum;
use super::{
    DropReason, SackBlock, TcpFlags, TcpOptions, Timestamp, MAX_OPTION_BYTES, MAX_SACK_BLOCKS,
};
use crate::seq::SeqNumber;

/// Byte ranges of the TCP header (RFC 9293 §3.1).
pub mod field {
    use core::ops::Range;
    /// Source port.
    pub const SRC_PORT: Range<usize> = 0..2;
    /// Destination port.
    pub const DST_PORT: Range<usize> = 2..4;
    /// Sequence number.
    pub const SEQ: Range<usize> = 4..8;
    /// Acknowledgment number.
    pub const ACK: Range<usize> = 8..12;
    /// Data offset (high 4 bits, in 32-bit words).
    pub const DATA_OFF: usize = 12;
    /// Control bits (CWR..FIN).
    pub const FLAGS: usize = 13;
    /// Window.
    pub const WINDOW: Range<usize> = 14..16;
    /// Checksum.
    pub const CHECKSUM: Range<usize> = 16..18;
    /// Urgent pointer.
    pub const URGENT: Range<usize> = 18..20;
    /// First option byte.
    pub const OPTIONS: usize = 20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;

/// Option kinds (IANA "TCP Option Kind Numbers").
pub mod kind {
    /// End of option list.
    pub const EOL: u8 = 0;
    /// No-operation.
    pub const NOP: u8 = 1;
    /// Maximum segment size (RFC 9293 §3.7.1).
    pub const MSS: u8 = 2;
    /// Window scale (RFC 7323 §2).
    pub const WSCALE: u8 = 3;
    /// SACK permitted (RFC 2018 §2).
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK (RFC 2018 §3).
    pub const SACK: u8 = 5;
    /// Timestamps (RFC 7323 §3).
    pub const TIMESTAMP: u8 = 8;
}

/// Largest window scale shift (RFC 7323 §2.3).
pub const MAX_WSCALE: u8 = 14;

/// A read/write view of a TCP segment (header, options and payload; the buffer must end
/// where the IP payload ends).
///
/// After [`Packet::new_checked`] succeeds no accessor panics and `20 <= header_len() <=
/// buffer length` holds; the unchecked view's accessors return zeros or empty slices for
/// out-of-range fields instead of panicking.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    /// Wraps `buffer` after checking that the header and its options fit (RFC 9293 §3.1:
    /// data offset at least 5 words).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, DropReason> {
        let len = buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(DropReason::TruncatedTcp);
        }
        let p = Packet { buffer };
        let hl = p.header_len();
        if hl < HEADER_LEN {
            return Err(DropReason::TcpDataOffsetTooSmall);
        }
        if hl > len {
            return Err(DropReason::TcpDataOffsetPastPacket);
        }
        Ok(p)
    }
    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        get16(self.buffer.as_ref(), field::SRC_PORT.start)
    }
    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        get16(self.buffer.as_ref(), field::DST_PORT.start)
    }
    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> SeqNumber {
        SeqNumber(get32(self.buffer.as_ref(), field::SEQ.start))
    }
    /// Acknowledgment number.
    #[inline]
    pub fn ack_number(&self) -> SeqNumber {
        SeqNumber(get32(self.buffer.as_ref(), field::ACK.start))
    }
    /// Header length in bytes (data offset × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(get8(self.buffer.as_ref(), field::DATA_OFF) >> 4) * 4
    }
    /// The control bits.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(get8(self.buffer.as_ref(), field::FLAGS))
    }
    /// The raw window field.
    #[inline]
    pub fn window(&self) -> u16 {
        get16(self.buffer.as_ref(), field::WINDOW.start)
    }
    /// The checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get16(self.buffer.as_ref(), field::CHECKSUM.start)
    }
    /// The urgent pointer.
    #[inline]
    pub fn urgent(&self) -> u16 {
        get16(self.buffer.as_ref(), field::URGENT.start)
    }
    /// The option bytes.
    #[inline]
    pub fn options(&self) -> &[u8] {
        get_range(self.buffer.as_ref(), field::OPTIONS, self.header_len())
    }
    /// The payload.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        get_range(b, self.header_len(), b.len())
    }
    /// `true` if the checksum verifies given the unfolded pseudo-header sum
    /// ([`checksum::pseudo_v4`] / [`checksum::pseudo_v6`] with this segment's length).
    #[inline]
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        checksum::fold(checksum::add(pseudo, self.buffer.as_ref())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::SRC_PORT.start, v);
    }
    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::DST_PORT.start, v);
    }
    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: SeqNumber) {
        put32(self.buffer.as_mut(), field::SEQ.start, v.get());
    }
    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, v: SeqNumber) {
        put32(self.buffer.as_mut(), field::ACK.start, v.get());
    }
    /// Sets the header length in bytes (a multiple of 4, 20..=60).
    pub fn set_header_len(&mut self, len: usize) {
        put8(
            self.buffer.as_mut(),
            field::DATA_OFF,
            ((len / 4) as u8) << 4,
        );
    }
    /// Sets the control bits.
    pub fn set_flags(&mut self, f: TcpFlags) {
        put8(self.buffer.as_mut(), field::FLAGS, f.0);
    }
    /// Sets the window field.
    pub fn set_window(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::WINDOW.start, v);
    }
    /// Sets the checksum field verbatim.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }
    /// Sets the urgent pointer.
    pub fn set_urgent(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::URGENT.start, v);
    }
    /// Computes and stores the checksum over the whole buffer given the unfolded
    /// pseudo-header sum (RFC 9293 §3.1).
    pub fn fill_checksum(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let c = !checksum::fold(checksum::add(pseudo, self.buffer.as_ref()));
        self.set_checksum(c);
    }
    /// The option bytes, writable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        get_range_mut(self.buffer.as_mut(), field::OPTIONS, hl)
    }
}

/// A TCP header in high-level form (RFC 9293 §3.1): what [`Repr::parse`] reads from a
/// [`Packet`] and [`Repr::emit`] writes into one. The checksum is the caller's (it needs
/// the IP pseudo-header): see [`Packet::fill_checksum`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: SeqNumber,
    /// Acknowledgment number.
    pub ack: SeqNumber,
    /// Control bits.
    pub flags: TcpFlags,
    /// Raw window field.
    pub window: u16,
    /// Options.
    pub opts: TcpOptions,
}

impl Repr {
    /// Reads the header and options of a checked packet (option errors as in
    /// [`parse_options`]). Flag-combination and checksum checks are [`super::parse()`]'s.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr, DropReason> {
        let (opts, _) = parse_options(p.options())?;
        Ok(Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq: p.seq_number(),
            ack: p.ack_number(),
            flags: p.flags(),
            window: p.window(),
            opts,
        })
    }

    /// Header length with options, as [`Repr::emit`] writes it.
    #[inline]
    pub fn header_len(&self) -> usize {
        HEADER_LEN + options_len(&self.opts)
    }

    /// Writes the header and options (options laid out as [`emit_options`] does) into the
    /// start of `p`'s buffer, leaving the checksum 0 and the payload untouched. Returns
    /// the header length, or 0 if the buffer is shorter than [`Repr::header_len`].
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> usize {
        let hl = self.header_len();
        if p.buffer.as_ref().len() < hl {
            return 0;
        }
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq_number(self.seq);
        p.set_ack_number(self.ack);
        p.set_header_len(hl);
        p.set_flags(self.flags);
        p.set_window(self.window);
        p.set_checksum(0);
        p.set_urgent(0);
        emit_options(&self.opts, p.options_mut());
        hl
    }
}

/// Parses TCP option bytes. Returns the options and, if a timestamp option is present,
/// the offset of its TSval within `opts`.
///
/// Drops (RFC 9293 §3.1 option format; RFC 7323, RFC 2018 lengths): a kind with no length
/// byte ([`DropReason::TruncatedTcpOptions`]), length 0 or 1, a length past the header,
/// a known option with the wrong length ([`DropReason::TcpOptionBadLength`]), MSS 0, and
/// window scale above 14. RFC 7323 §2.3 says to use 14 and log a larger shift; weir drops
/// it instead, as only a broken or hostile sender sends one. MSS, window scale and
/// SACK-permitted are parsed on any segment; the TCP engine uses them on SYNs only.
#[inline]
pub fn parse_options(opts: &[u8]) -> Result<(TcpOptions, Option<u8>), DropReason> {
    let mut o = TcpOptions::default();
    let at = parse_options_into(opts, &mut o)?;
    Ok((o, at))
}

/// [`parse_options`] writing into `o`, which must be `TcpOptions::default()` on entry
/// (parse builds the result in place to avoid copying it).
#[inline]
pub(crate) fn parse_options_into(
    opts: &[u8],
    o: &mut TcpOptions,
) -> Result<Option<u8>, DropReason> {
    // Fast path for the layout of nearly every segment of a bulk transfer from Linux,
    // BSD or Windows: NOP NOP TS (RFC 7323 Appendix A), or no options at all.
    if let &[kind::NOP, kind::NOP, kind::TIMESTAMP, 10, a, b, c, d, e, f, g, h] = opts {
        o.timestamp = Some(Timestamp {
            tsval: u32::from_be_bytes([a, b, c, d]),
            tsecr: u32::from_be_bytes([e, f, g, h]),
        });
        return Ok(Some(4));
    }
    let mut tsval_at = None;
    let mut i = 0usize;
    while let Some(&k) = opts.get(i) {
        match k {
            kind::EOL => break,
            kind::NOP => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let len = usize::from(*opts.get(i + 1).ok_or(DropReason::TruncatedTcpOptions)?);
        match len {
            0 => return Err(DropReason::TcpOptionLenZero),
            1 => return Err(DropReason::TcpOptionLenOne),
            _ => {}
        }
        let body = opts
            .get(i + 2..i + len)
            .ok_or(DropReason::TcpOptionPastHeader)?;
        match k {
            kind::MSS => {
                if len != 4 {
                    return Err(DropReason::TcpOptionBadLength);
                }
                let mss = get16(body, 0);
                // RFC 9293 §3.7.1: MSS is the largest segment the peer can take; 0 is
                // meaningless (Linux clamps it, weir drops).
                if mss == 0 {
                    return Err(DropReason::TcpMssZero);
                }
                o.mss = Some(mss);
            }
            kind::WSCALE => {
                if len != 3 {
                    return Err(DropReason::TcpOptionBadLength);
                }
                let ws = get8(body, 0);
                if ws > MAX_WSCALE {
                    return Err(DropReason::TcpWindowScaleTooLarge);
                }
                o.wscale = Some(ws);
            }
            kind::SACK_PERMITTED => {
                if len != 2 {
                    return Err(DropReason::TcpOptionBadLength);
                }
                o.sack_permitted = true;
            }
            kind::TIMESTAMP => {
                if len != 10 {
                    return Err(DropReason::TcpOptionBadLength);
                }
                o.timestamp = Some(Timestamp {
                    tsval: get32(body, 0),
                    tsecr: get32(body, 4),
                });
                tsval_at = u8::try_from(i + 2).ok();
            }
            kind::SACK => {
                // RFC 2018 §3: 2 + 8n bytes, n >= 1.
                if len < 10 || (len - 2) % 8 != 0 {
                    return Err(DropReason::TcpOptionBadLength);
                }
                let n = ((len - 2) / 8).min(MAX_SACK_BLOCKS);
                for (j, slot) in o.sack.iter_mut().enumerate().take(n) {
                    *slot = SackBlock {
                        left: SeqNumber(get32(body, j * 8)),
                        right: SeqNumber(get32(body, j * 8 + 4)),
                    };
                }
                o.sack_count = n as u8;
            }
            _ => {} // unknown: skipped by length (RFC 9293 §3.1)
        }
        i += len;
    }
    Ok(tsval_at)
}

/// Number of option bytes [`emit_options`] writes for `o` (a multiple of 4, at most 40).
#[inline]
pub fn options_len(o: &TcpOptions) -> usize {
    let mut n = 0;
    if o.mss.is_some() {
        n += 4;
    }
    if o.timestamp.is_some() {
        n += 12;
    } else if o.sack_permitted {
        n += 4;
    }
    if o.wscale.is_some() {
        n += 4;
    }
    n + 8 * sack_blocks_fitting(o, n) + if sack_blocks_fitting(o, n) > 0 { 4 } else { 0 }
}

/// How many of `o`'s SACK blocks fit after `used` option bytes.
#[inline]
fn sack_blocks_fitting(o: &TcpOptions, used: usize) -> usize {
    let room = MAX_OPTION_BYTES.saturating_sub(used + 4) / 8;
    usize::from(o.sack_count).min(MAX_SACK_BLOCKS).min(room)
}

/// Writes `o` into `out` laid out as Linux's `tcp_options_write` does, and returns the
/// number of bytes written (a multiple of 4), or 0 if `out` is shorter than
/// [`options_len`]:
///
/// - MSS: `02 04 mss`;
/// - timestamps, with SACK-permitted packed in front of them when both are present:
///   `04 02 08 0a TSval TSecr`, else `01 01 08 0a TSval TSecr`;
/// - SACK-permitted without timestamps: `01 01 04 02`;
/// - window scale: `01 03 03 ws`;
/// - SACK blocks: `01 01 05 len blocks…` (as many as fit in 40 bytes).
#[inline]
pub fn emit_options(o: &TcpOptions, out: &mut [u8]) -> usize {
    let total = options_len(o);
    if out.len() < total {
        return 0;
    }
    let mut i = 0;
    if let Some(mss) = o.mss {
        put_bytes(out, &mut i, &[kind::MSS, 4]);
        put16(out, i, mss);
        i += 2;
    }
    if let Some(ts) = o.timestamp {
        if o.sack_permitted {
            put_bytes(out, &mut i, &[kind::SACK_PERMITTED, 2, kind::TIMESTAMP, 10]);
        } else {
            put_bytes(out, &mut i, &[kind::NOP, kind::NOP, kind::TIMESTAMP, 10]);
        }
        put32(out, i, ts.tsval);
        put32(out, i + 4, ts.tsecr);
        i += 8;
    } else if o.sack_permitted {
        put_bytes(
            out,
            &mut i,
            &[kind::NOP, kind::NOP, kind::SACK_PERMITTED, 2],
        );
    }
    if let Some(ws) = o.wscale {
        put_bytes(out, &mut i, &[kind::NOP, kind::WSCALE, 3, ws]);
    }
    let n = sack_blocks_fitting(o, i);
    if n > 0 {
        put_bytes(
            out,
            &mut i,
            &[kind::NOP, kind::NOP, kind::SACK, (2 + 8 * n) as u8],
        );
        for b in o.sack.iter().take(n) {
            put32(out, i, b.left.get());
            put32(out, i + 4, b.right.get());
            i += 8;
        }
    }
    debug_assert_eq!(i, total);
    i
}

#[inline(always)]
fn put_bytes(out: &mut [u8], i: &mut usize, v: &[u8]) {
    super::bytes::put_slice(out, *i, v);
    *i += v.len();
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    /// Option bytes of a real Linux 6.x SYN: MSS 1460, SACK-perm, TS, NOP, WS 7.
    const LINUX_SYN_OPTS: [u8; 20] = [
        0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x9a, 0x2b, 0x3c, 0x4d, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    #[test]
    fn parses_linux_syn_options() {
        let (o, at) = parse_options(&LINUX_SYN_OPTS).unwrap();
        assert_eq!(o.mss, Some(1460));
        assert!(o.sack_permitted);
        assert_eq!(o.wscale, Some(7));
        assert_eq!(
            o.timestamp,
            Some(Timestamp {
                tsval: 0x9a2b_3c4d,
                tsecr: 0
            })
        );
        assert_eq!(at, Some(8));
    }

    #[test]
    fn emits_linux_layout() {
        let (o, _) = parse_options(&LINUX_SYN_OPTS).unwrap();
        let mut b = [0u8; 40];
        let n = emit_options(&o, &mut b);
        assert_eq!(&b[..n], &LINUX_SYN_OPTS[..]);
        assert_eq!(options_len(&o), 20);
    }

    #[test]
    fn emits_sack_with_timestamps_rfc2018() {
        let mut o = TcpOptions {
            timestamp: Some(Timestamp { tsval: 1, tsecr: 2 }),
            sack_count: 4,
            ..Default::default()
        };
        for (i, s) in o.sack.iter_mut().enumerate() {
            s.left = SeqNumber(100 * i as u32);
            s.right = SeqNumber(100 * i as u32 + 50);
        }
        let mut b = [0u8; 40];
        let n = emit_options(&o, &mut b);
        // NOP NOP TS + NOP NOP SACK with 3 blocks (4 do not fit beside timestamps).
        assert_eq!(n, 40);
        assert_eq!(&b[..4], &[1, 1, 8, 10]);
        assert_eq!(&b[12..16], &[1, 1, 5, 26]);
        let (p, at) = parse_options(&b[..n]).unwrap();
        assert_eq!(p.sack_count, 3);
        assert_eq!(p.sack[..3], o.sack[..3]);
        assert_eq!(p.timestamp, o.timestamp);
        assert_eq!(at, Some(4));
        // Without timestamps all 4 fit.
        o.timestamp = None;
        let n = emit_options(&o, &mut b);
        assert_eq!(n, 36);
        assert_eq!(parse_options(&b[..n]).unwrap().0.sack_count, 4);
    }

    #[test]
    fn fast_path_agrees_with_general_parser_rfc7323() {
        let fast = [1, 1, 8, 10, 0, 0, 1, 0, 0, 0, 2, 0];
        // The same option, not in fast-path position: TS first, then NOP NOP.
        let slow = [8, 10, 0, 0, 1, 0, 0, 0, 2, 0, 1, 1];
        let (a, at_a) = parse_options(&fast).unwrap();
        let (b, at_b) = parse_options(&slow).unwrap();
        assert_eq!(a, b);
        assert_eq!((at_a, at_b), (Some(4), Some(2)));
        assert_eq!(
            a.timestamp,
            Some(Timestamp {
                tsval: 256,
                tsecr: 512
            })
        );
        assert_eq!(parse_options(&[]).unwrap(), (TcpOptions::default(), None));
    }

    #[test]
    fn repr_roundtrip_rfc9293_s3_1() {
        let r = Repr {
            src_port: 5001,
            dst_port: 40000,
            seq: SeqNumber(u32::MAX),
            ack: SeqNumber(1),
            flags: TcpFlags::SYN | TcpFlags::ACK,
            window: 65535,
            opts: parse_options(&LINUX_SYN_OPTS).unwrap().0,
        };
        let mut b = [0xeeu8; 44];
        assert_eq!(r.emit(&mut Packet::new_unchecked(&mut b[..])), 40);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p), Ok(r));
        assert_eq!(p.payload(), &[0xee; 4]);
        assert_eq!(r.emit(&mut Packet::new_unchecked(&mut b[..39])), 0);
    }

    #[test]
    fn unknown_options_skipped_eol_stops() {
        // Unknown kind 30 (MPTCP) of length 4, then MSS, then EOL and garbage.
        let b = [30, 4, 0xde, 0xad, 2, 4, 0x05, 0xb4, 0, 0xff, 0xff, 0xff];
        let (o, at) = parse_options(&b).unwrap();
        assert_eq!((o.mss, at), (Some(1460), None));
    }

    #[test]
    fn option_errors() {
        let cases: &[(&[u8], DropReason)] = &[
            (&[30], DropReason::TruncatedTcpOptions),
            (&[30, 0, 1, 1], DropReason::TcpOptionLenZero),
            (&[30, 1, 1, 1], DropReason::TcpOptionLenOne),
            (&[30, 8, 1, 1], DropReason::TcpOptionPastHeader),
            (&[2, 3, 1, 1], DropReason::TcpOptionBadLength),
            (&[2, 4, 0, 0], DropReason::TcpMssZero),
            (&[1, 3, 3, 15], DropReason::TcpWindowScaleTooLarge),
            (&[1, 1, 5, 6, 0, 0, 0, 0], DropReason::TcpOptionBadLength),
        ];
        for (b, want) in cases {
            assert_eq!(parse_options(b).err(), Some(*want), "{b:?}");
        }
        assert_eq!(parse_options(&[1, 3, 3, 14]).unwrap().0.wscale, Some(14));
    }

    #[test]
    fn header_accessors_and_errors_rfc9293_s3_1() {
        let mut b = [0u8; 24];
        {
            let mut p = Packet::new_unchecked(&mut b[..]);
            p.set_src_port(1234);
            p.set_dst_port(80);
            p.set_seq_number(SeqNumber(7));
            p.set_ack_number(SeqNumber(9));
            p.set_header_len(24);
            p.set_flags(TcpFlags::SYN);
            p.set_window(1000);
            p.options_mut().copy_from_slice(&[2, 4, 5, 0xb4]);
        }
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.window()), (1234, 80, 1000));
        assert_eq!(
            (p.seq_number(), p.ack_number()),
            (SeqNumber(7), SeqNumber(9))
        );
        assert_eq!(p.options(), &[2, 4, 5, 0xb4]);
        assert!(p.payload().is_empty());
        assert_eq!(
            Packet::new_checked(&b[..19]).err(),
            Some(DropReason::TruncatedTcp)
        );
        assert_eq!(
            Packet::new_checked(&b[..22]).err(),
            Some(DropReason::TcpDataOffsetPastPacket)
        );
        b[12] = 0x40;
        assert_eq!(
            Packet::new_checked(&b[..]).err(),
            Some(DropReason::TcpDataOffsetTooSmall)
        );
    }
}
