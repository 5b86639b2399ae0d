//! The bytes every flow sends, and their checksum without reading them per segment.
//!
//! Byte `i` of every flow's stream is [`pattern_byte`]`(i)`, a function of the stream
//! offset with period [`PERIOD`] (a prime, so the pattern never lines up with segment
//! or write sizes and a misplaced segment changes the receiver's digest). The throughput
//! benchmark uses a period equal to the MSS instead ([`Payload::with_period`]): then every
//! segment that starts at a multiple of the MSS carries the same bytes, which a stamped
//! pool ([`super::pool`]) holds already, so the generator writes headers only. The cost:
//! whole segments swapped in order no longer change the digest (TCP's sequence accounting
//! still sees them). A segment's
//! payload is a slice of one precomputed buffer ([`Payload::bytes`]), and its one's
//! complement sum comes from a prefix-sum table in O(1) ([`Payload::sum`]), so building a
//! segment is a copy plus a few additions (RFC 1071 §2: sums are associative, and a sum
//! over bytes starting at an odd offset is the byte-swapped sum).

use sha2::{Digest, Sha256};
use stack::wire::checksum;

/// The pattern's period in bytes (prime).
pub const PERIOD: usize = 4099;

/// Longest payload one segment may carry (a 9000-byte jumbo frame's MSS fits).
pub const MAX_PAYLOAD: usize = 9216;

/// Largest pattern period [`Payload::with_period`] accepts.
pub const MAX_PERIOD: usize = 65_536;

/// How long the pattern is laid out at least: as long as one mbuf's 16-bit buffer holds
/// with its headroom (65,280 + 128 bytes). A write buffer that refers to the pattern can
/// then cover up to [`slice_room`] bytes of stream (44 segments of 1,448 bytes at a
/// period of 1,448), so a 64 KiB write takes two references instead of eight: each
/// reference costs an mbuf, an attach with its atomic count, a detach and a send-buffer
/// slice.
pub const LAYOUT_MIN: usize = 65_280;

/// The length of the laid-out pattern of period `period` (clamped as
/// [`Payload::with_period`] clamps it): one period plus [`MAX_PAYLOAD`] (and two) bytes,
/// so that any segment is one contiguous slice, and at least [`LAYOUT_MIN`].
pub fn layout_len(period: usize) -> usize {
    let period = period.clamp(1, MAX_PERIOD);
    (period + MAX_PAYLOAD + 2).max(LAYOUT_MIN)
}

/// The most stream bytes one slice of the laid-out pattern of period `period` covers from
/// any place in the period ([`Payload::bytes_from`], [`Payload::sum_from`]): at least
/// [`MAX_PAYLOAD`].
pub fn slice_room(period: usize) -> usize {
    layout_len(period) - period.clamp(1, MAX_PERIOD) - 2
}

/// Byte `off` of every flow's stream.
#[inline]
pub fn pattern_byte(off: u64) -> u8 {
    pattern_byte_in(off, PERIOD)
}

/// Byte `off` of every flow's stream when the pattern repeats every `period` bytes.
#[inline]
pub fn pattern_byte_in(off: u64, period: usize) -> u8 {
    let i = (off % period.max(1) as u64) as u32;
    (i.wrapping_mul(2_654_435_761) >> 13) as u8 ^ (i as u8)
}

/// SHA-256 of the first `len` bytes of the stream (what the receiver's `--digest` of a
/// complete flow must print).
pub fn stream_digest(len: u64) -> [u8; 32] {
    stream_digest_in(len, PERIOD)
}

/// [`stream_digest`] for a pattern of period `period`.
pub fn stream_digest_in(len: u64, period: usize) -> [u8; 32] {
    let period = period.max(1);
    let mut h = Sha256::new();
    let buf: Vec<u8> = (0..period as u64)
        .map(|i| pattern_byte_in(i, period))
        .collect();
    let mut left = len;
    while left > 0 {
        let n = left.min(period as u64) as usize;
        h.update(&buf[..n]);
        left -= n as u64;
    }
    h.finalize().into()
}

/// The pattern laid out once ([`layout_len`] bytes: any segment, and any write buffer of
/// up to [`slice_room`] bytes, is one contiguous slice) with prefix sums of its 16-bit
/// words.
pub struct Payload {
    period: usize,
    /// `ceil(2^64 / period)`, for [`Payload::place`]'s remainder without a division
    /// (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019).
    period_m: u64,
    buf: Vec<u8>,
    /// `pre[k]`: sum of the big-endian words at byte offsets `0, 2, .., 2k - 2`.
    pre: Vec<u32>,
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Payload")
            .field("period", &self.period)
            .field("len", &self.buf.len())
            .finish()
    }
}

impl Default for Payload {
    fn default() -> Self {
        Self::new()
    }
}

impl Payload {
    /// Builds the buffer and the table for [`PERIOD`] (about 40 KB in all).
    pub fn new() -> Payload {
        Self::with_period(PERIOD)
    }

    /// The same for a pattern of period `period` (clamped to 1..=[`MAX_PERIOD`]).
    pub fn with_period(period: usize) -> Payload {
        let period = period.clamp(1, MAX_PERIOD);
        let len = layout_len(period);
        let buf: Vec<u8> = (0..len as u64)
            .map(|i| pattern_byte_in(i, period))
            .collect();
        let mut pre = Vec::with_capacity(len / 2 + 1);
        let mut acc = 0u32;
        pre.push(0);
        for w in buf.chunks_exact(2) {
            // At most ~37,400 words (a period of 65,536 plus MAX_PAYLOAD) of at most
            // 0xffff: below 2^32.
            acc += u32::from(u16::from_be_bytes([w[0], w[1]]));
            pre.push(acc);
        }
        Payload {
            period,
            period_m: (u64::MAX / period as u64).wrapping_add(1),
            buf,
            pre,
        }
    }

    /// `pos % period` for a position in the laid-out pattern (below 2^32), by two
    /// multiplications instead of a division (about 25 cycles, on a frame's path).
    #[inline]
    pub fn place(&self, pos: usize) -> usize {
        if self.period == 1 {
            return 0;
        }
        match u32::try_from(pos) {
            Ok(a) => {
                let low = self.period_m.wrapping_mul(u64::from(a));
                ((u128::from(low) * self.period as u128) >> 64) as usize
            }
            Err(_) => pos % self.period,
        }
    }

    /// The whole laid-out pattern, [`layout_len`] bytes, so the
    /// bytes at stream offset `off` start at `off % period` (what a copy of it shared by
    /// reference must hold, see [`super::pool::GenPool::with_shared`]).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The pattern's period in bytes.
    pub fn period(&self) -> usize {
        self.period
    }

    /// [`slice_room`] of this pattern's period, from the layout's length.
    #[inline]
    fn slice_room(&self) -> usize {
        self.buf.len() - self.period - 2
    }

    /// Where stream offset `off` falls in the period: the `start` that
    /// [`Payload::bytes_from`] and [`Payload::sum_from`] take (one 64-bit division; a
    /// caller stepping through a stream can keep the period's last multiple instead).
    #[inline]
    pub fn start(&self, off: u64) -> usize {
        (off % self.period as u64) as usize
    }

    /// The `len` payload bytes at stream offset `off` (`len` ≤ [`slice_room`]).
    #[inline]
    pub fn bytes(&self, off: u64, len: usize) -> &[u8] {
        self.bytes_from(self.start(off), len)
    }

    /// [`Payload::bytes`] at an offset whose place in the period is `start`
    /// (< [`Payload::period`]; empty otherwise).
    #[inline]
    pub fn bytes_from(&self, start: usize, len: usize) -> &[u8] {
        if start >= self.period {
            return &[];
        }
        self.buf.get(start..start + len).unwrap_or(&[])
    }

    /// The folded one's complement sum of [`Payload::bytes`]`(off, len)`, as if the slice
    /// started at an even offset of the TCP segment (the TCP header is 32 bytes).
    #[inline]
    pub fn sum(&self, off: u64, len: usize) -> u16 {
        self.sum_from(self.start(off), len)
    }

    /// [`Payload::sum`] at an offset whose place in the period is `start`
    /// (< [`Payload::period`]; `len` ≤ [`slice_room`]; 0 outside those).
    #[inline]
    pub fn sum_from(&self, start: usize, len: usize) -> u16 {
        if start >= self.period || len > self.slice_room() {
            return 0;
        }
        if start % 2 == 0 {
            checksum::fold(self.even_sum(start, len))
        } else {
            // Start one byte earlier (even), remove that byte's contribution: what is left
            // is the sum with every byte in the other half of its word, i.e. byte-swapped.
            let e = start - 1;
            let x = self.even_sum(e, len + 1) - (u64::from(self.buf[e]) << 8);
            checksum::fold(x).swap_bytes()
        }
    }

    #[inline]
    fn even_sum(&self, s: usize, len: usize) -> u64 {
        let w0 = s / 2;
        let w1 = w0 + len / 2;
        let mut sum = u64::from(self.pre[w1] - self.pre[w0]);
        if len % 2 == 1 {
            sum += u64::from(self.buf[s + len - 1]) << 8;
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_sums_match_rfc1071_sums() {
        let p = Payload::new();
        for off in [0u64, 1, 2, 3, 4097, 4098, 4099, 12_345, 1 << 40] {
            for len in [0usize, 1, 2, 3, 100, 1447, 1448, 1460, 9000] {
                // 0x0000 and 0xffff are the same one's complement number.
                let want = checksum::fold(checksum::add(0, p.bytes(off, len))) % 0xffff;
                assert_eq!(p.sum(off, len) % 0xffff, want, "off {off} len {len}");
                assert_eq!(p.bytes(off, len).len(), len);
            }
        }
    }

    #[test]
    fn other_periods_sum_and_digest_alike() {
        for period in [1usize, 1448, 9000, MAX_PERIOD] {
            let p = Payload::with_period(period);
            let mut h = Sha256::new();
            let mut off = 0u64;
            for len in [1448usize, 1448, 7, 9216, 3] {
                let want = checksum::fold(checksum::add(0, p.bytes(off, len))) % 0xffff;
                assert_eq!(p.sum(off, len) % 0xffff, want, "period {period} off {off}");
                assert_eq!(p.bytes(off, len)[0], pattern_byte_in(off, period));
                h.update(p.bytes(off, len));
                off += len as u64;
            }
            let want: [u8; 32] = h.finalize().into();
            assert_eq!(stream_digest_in(off, period), want, "period {period}");
        }
        // With the MSS as period, every segment at a multiple of the MSS is the same.
        let p = Payload::with_period(1448);
        assert_eq!(p.bytes(0, 1448), p.bytes(1448 * 77, 1448));
    }

    /// The `_from` forms take the place in the period that `start` gives, and refuse
    /// one outside it rather than read past the pattern.
    #[test]
    fn from_forms_agree_and_refuse_out_of_range() {
        let p = Payload::with_period(1448);
        for off in [0u64, 1, 1447, 1448, 1449, 1448 * 1000 + 3, 1 << 40] {
            let s = p.start(off);
            assert!(s < 1448);
            assert_eq!(p.bytes_from(s, 1448), p.bytes(off, 1448));
            assert_eq!(p.sum_from(s, 1448), p.sum(off, 1448));
        }
        assert!(p.bytes_from(1448, 1).is_empty());
        assert_eq!(p.sum_from(1448, 1), 0);
        let room = slice_room(1448);
        assert_eq!(p.sum_from(0, room + 1), 0);
        assert!(p.bytes_from(1447, layout_len(1448) - 1446).is_empty());
    }

    /// A write buffer's slice may be as long as the room the layout leaves past any place
    /// in the period, and its bytes and sum are the stream's there.
    #[test]
    fn write_buffers_up_to_the_slice_room_are_one_slice() {
        for period in [1usize, 1448, PERIOD, 60_000, MAX_PERIOD] {
            let p = Payload::with_period(period);
            let room = slice_room(period);
            assert!(room >= MAX_PAYLOAD, "period {period}: room {room}");
            assert_eq!(p.as_bytes().len(), layout_len(period));
            assert_eq!(p.slice_room(), room, "period {period}");
            let last = period - 1;
            for (start, len) in [(0, room), (last, room), (last, 1), (period / 2, room - 1)] {
                let b = p.bytes_from(start, len);
                assert_eq!(b.len(), len, "period {period} start {start} len {len}");
                let want = checksum::fold(checksum::add(0, b)) % 0xffff;
                assert_eq!(p.sum_from(start, len) % 0xffff, want, "period {period}");
                assert_eq!(
                    b[len - 1],
                    pattern_byte_in((start + len - 1) as u64, period)
                );
            }
        }
        // At the MSS as period, a buffer holds 44 whole segments of 1,448 bytes.
        assert_eq!(slice_room(1448) / 1448, 44);
        assert!(
            layout_len(1448) + 128 <= usize::from(u16::MAX),
            "one mbuf holds it"
        );
    }

    #[test]
    fn place_is_the_remainder_by_the_period() {
        for period in [1usize, 2, 3, 1448, 1460, 8191, PERIOD, MAX_PERIOD] {
            let p = Payload::with_period(period);
            for pos in (0..200_000usize)
                .step_by(7)
                .chain([u32::MAX as usize, 1 << 33])
            {
                assert_eq!(p.place(pos), pos % period, "{pos} % {period}");
            }
        }
    }

    #[test]
    fn digest_matches_bytes() {
        let p = Payload::new();
        let mut h = Sha256::new();
        let mut off = 0u64;
        for len in [1448usize, 7, 1448, 4099, 3] {
            h.update(p.bytes(off, len));
            off += len as u64;
        }
        let want: [u8; 32] = h.finalize().into();
        assert_eq!(stream_digest(off), want);
    }
}
