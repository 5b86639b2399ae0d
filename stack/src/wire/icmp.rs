//! ICMPv4 echo (RFC 792), ICMPv6 echo (RFC 4443 §4) and neighbor solicitation and
//! advertisement (RFC 4861 §4.3-4.4): enough for a peer to ping weir and to resolve its
//! IPv6 address.
//!
//! The echo layout (type, code, checksum, identifier, sequence, data) is the same in both
//! families, so one view serves both; the checksum differs (ICMPv6 covers a pseudo-header,
//! RFC 4443 §2.3) and is the caller's to supply.

use super::bytes::{get16, get8, get_arr, get_range, put16, put8, put_slice};
use super::{checksum, DropReason};

/// Byte ranges of the ICMP header and the echo / ND fields.
pub mod field {
    use core::ops::Range;
    /// Message type.
    pub const TYPE: usize = 0;
    /// Code.
    pub const CODE: usize = 1;
    /// Checksum.
    pub const CHECKSUM: Range<usize> = 2..4;
    /// Echo identifier.
    pub const ECHO_IDENT: Range<usize> = 4..6;
    /// Echo sequence number.
    pub const ECHO_SEQ: Range<usize> = 6..8;
    /// Echo data.
    pub const ECHO_DATA: usize = 8;
    /// ND flags (NA: R, S, O in the top bits) and reserved bits.
    pub const ND_FLAGS: Range<usize> = 4..8;
    /// ND target address.
    pub const ND_TARGET: Range<usize> = 8..24;
    /// ND options.
    pub const ND_OPTIONS: usize = 24;
}

/// Length of an echo header.
pub const ECHO_HEADER_LEN: usize = 8;
/// Length of an NS/NA message without options.
pub const ND_HEADER_LEN: usize = 24;

/// ICMPv4 echo reply (RFC 792).
pub const V4_ECHO_REPLY: u8 = 0;
/// ICMPv4 echo request (RFC 792).
pub const V4_ECHO_REQUEST: u8 = 8;
/// ICMPv6 echo request (RFC 4443 §4.1).
pub const V6_ECHO_REQUEST: u8 = 128;
/// ICMPv6 echo reply (RFC 4443 §4.2).
pub const V6_ECHO_REPLY: u8 = 129;
/// Neighbor solicitation (RFC 4861 §4.3).
pub const V6_NEIGHBOR_SOLICIT: u8 = 135;
/// Neighbor advertisement (RFC 4861 §4.4).
pub const V6_NEIGHBOR_ADVERT: u8 = 136;

/// ND option: source link-layer address (RFC 4861 §4.6.1).
pub const ND_OPT_SOURCE_LL: u8 = 1;
/// ND option: target link-layer address (RFC 4861 §4.6.1).
pub const ND_OPT_TARGET_LL: u8 = 2;

/// NA flag: the sender is a router (RFC 4861 §4.4).
pub const NA_ROUTER: u32 = 0x8000_0000;
/// NA flag: sent in response to a solicitation.
pub const NA_SOLICITED: u32 = 0x4000_0000;
/// NA flag: override an existing cache entry.
pub const NA_OVERRIDE: u32 = 0x2000_0000;

/// A read/write view of an ICMP or ICMPv6 message (echo and ND fields).
///
/// [`Packet::new_checked`] guarantees the 8-byte echo header; [`Packet::new_checked_nd`]
/// the 24-byte NS/NA body. After either succeeds no accessor panics; fields past the
/// buffer read as zeros.
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
    /// Wraps `buffer` if it holds at least the 8-byte echo header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, DropReason> {
        if buffer.as_ref().len() < ECHO_HEADER_LEN {
            return Err(DropReason::TruncatedIcmp);
        }
        Ok(Packet { buffer })
    }
    /// Wraps `buffer` if it holds a whole NS/NA body (RFC 4861 §7.1.1: 24 or more octets).
    #[inline]
    pub fn new_checked_nd(buffer: T) -> Result<Self, DropReason> {
        if buffer.as_ref().len() < ND_HEADER_LEN {
            return Err(DropReason::TruncatedIcmp);
        }
        Ok(Packet { buffer })
    }
    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> u8 {
        get8(self.buffer.as_ref(), field::TYPE)
    }
    /// Code.
    #[inline]
    pub fn code(&self) -> u8 {
        get8(self.buffer.as_ref(), field::CODE)
    }
    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get16(self.buffer.as_ref(), field::CHECKSUM.start)
    }
    /// Echo identifier.
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        get16(self.buffer.as_ref(), field::ECHO_IDENT.start)
    }
    /// Echo sequence number.
    #[inline]
    pub fn echo_seq(&self) -> u16 {
        get16(self.buffer.as_ref(), field::ECHO_SEQ.start)
    }
    /// Echo data.
    #[inline]
    pub fn echo_data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        get_range(b, field::ECHO_DATA, b.len())
    }
    /// ND target address.
    #[inline]
    pub fn nd_target(&self) -> [u8; 16] {
        get_arr(self.buffer.as_ref(), field::ND_TARGET.start)
    }
    /// ND flags word (R, S, O bits for an NA).
    #[inline]
    pub fn nd_flags(&self) -> u32 {
        super::bytes::get32(self.buffer.as_ref(), field::ND_FLAGS.start)
    }
    /// ND options.
    #[inline]
    pub fn nd_options(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        get_range(b, field::ND_OPTIONS, b.len())
    }
    /// `true` if the checksum verifies given the unfolded pseudo-header sum (0 for
    /// ICMPv4, RFC 792; the IPv6 pseudo-header for ICMPv6, RFC 4443 §2.3).
    #[inline]
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        checksum::fold(checksum::add(pseudo, self.buffer.as_ref())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets type and code.
    pub fn set_type_code(&mut self, t: u8, code: u8) {
        put8(self.buffer.as_mut(), field::TYPE, t);
        put8(self.buffer.as_mut(), field::CODE, code);
    }
    /// Sets the echo identifier and sequence number.
    pub fn set_echo(&mut self, ident: u16, seq: u16) {
        put16(self.buffer.as_mut(), field::ECHO_IDENT.start, ident);
        put16(self.buffer.as_mut(), field::ECHO_SEQ.start, seq);
    }
    /// Sets the ND flags word and target address.
    pub fn set_nd(&mut self, flags: u32, target: [u8; 16]) {
        super::bytes::put32(self.buffer.as_mut(), field::ND_FLAGS.start, flags);
        put_slice(self.buffer.as_mut(), field::ND_TARGET.start, &target);
    }
    /// Computes and stores the checksum over the whole buffer given the unfolded
    /// pseudo-header sum (0 for ICMPv4).
    pub fn fill_checksum(&mut self, pseudo: u64) {
        put16(self.buffer.as_mut(), field::CHECKSUM.start, 0);
        let c = !checksum::fold(checksum::add(pseudo, self.buffer.as_ref()));
        put16(self.buffer.as_mut(), field::CHECKSUM.start, c);
    }
}

/// Finds the link-layer address option of `kind` in ND option bytes (RFC 4861 §4.6).
/// Returns `Ok(None)` when absent; an option of length 0 makes the packet invalid
/// (RFC 4861 §4.6: "Nodes MUST silently discard an ND packet that contains an option with
/// length zero"), as does one that runs past the message.
#[inline]
pub fn nd_lladdr_option(opts: &[u8], kind: u8) -> Result<Option<[u8; 6]>, DropReason> {
    let mut i = 0usize;
    let mut found = None;
    while i < opts.len() {
        let len = usize::from(get8(opts, i + 1)) * 8;
        if len == 0 || i + len > opts.len() {
            return Err(DropReason::NdInvalid);
        }
        if get8(opts, i) == kind && len == 8 && found.is_none() {
            found = Some(get_arr(opts, i + 2));
        }
        i += len;
    }
    Ok(found)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn echo_roundtrip_v4_rfc792() {
        let mut b = [0u8; 12];
        b[8..].copy_from_slice(b"ping");
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_type_code(V4_ECHO_REQUEST, 0);
        p.set_echo(0x1234, 7);
        p.fill_checksum(0);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum(0));
        assert_eq!((p.msg_type(), p.echo_ident(), p.echo_seq()), (8, 0x1234, 7));
        assert_eq!(p.echo_data(), b"ping");
        assert_eq!(
            Packet::new_checked(&b[..7]).err(),
            Some(DropReason::TruncatedIcmp)
        );
    }

    #[test]
    fn nd_options_rfc4861_s4_6() {
        let opts = [1, 1, 2, 0, 0, 0, 0, 9];
        assert_eq!(
            nd_lladdr_option(&opts, ND_OPT_SOURCE_LL),
            Ok(Some([2, 0, 0, 0, 0, 9]))
        );
        assert_eq!(nd_lladdr_option(&opts, ND_OPT_TARGET_LL), Ok(None));
        assert_eq!(
            nd_lladdr_option(&[1, 0, 0, 0, 0, 0, 0, 0], 1),
            Err(DropReason::NdInvalid)
        );
        assert_eq!(
            nd_lladdr_option(&[1, 2, 0, 0], 1),
            Err(DropReason::NdInvalid)
        );
        assert_eq!(nd_lladdr_option(&[], 1), Ok(None));
    }
}
