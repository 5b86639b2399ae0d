//! Bounds-checked big-endian field access shared by the wire views.
//!
//! Every read returns zero and every write does nothing when the range is out of bounds,
//! so no accessor can panic on any input. The views check lengths in `new_checked`, after
//! which the compiler sees the ranges are in bounds and drops the checks.

/// The byte at `at`, or 0.
#[inline(always)]
pub(crate) fn get8(b: &[u8], at: usize) -> u8 {
    b.get(at).copied().unwrap_or(0)
}

/// The big-endian `u16` at `at`, or 0.
#[inline(always)]
pub(crate) fn get16(b: &[u8], at: usize) -> u16 {
    match b.get(at..at + 2) {
        Some(&[x, y]) => u16::from_be_bytes([x, y]),
        _ => 0,
    }
}

/// The big-endian `u32` at `at`, or 0.
#[inline(always)]
pub(crate) fn get32(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(&[w, x, y, z]) => u32::from_be_bytes([w, x, y, z]),
        _ => 0,
    }
}

/// `N` bytes at `at`, or zeros.
#[inline(always)]
pub(crate) fn get_arr<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    b.get(at..at + N)
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .unwrap_or([0; N])
}

/// The bytes in `at..end`, clamped to the buffer (empty when out of bounds).
#[inline(always)]
pub(crate) fn get_range(b: &[u8], at: usize, end: usize) -> &[u8] {
    b.get(at..end).unwrap_or(&[])
}

/// The bytes in `at..end`, writable, clamped to the buffer (empty when out of bounds).
#[inline(always)]
pub(crate) fn get_range_mut(b: &mut [u8], at: usize, end: usize) -> &mut [u8] {
    b.get_mut(at..end).unwrap_or(&mut [])
}

/// Writes a byte at `at` if it is in bounds.
#[inline(always)]
pub(crate) fn put8(b: &mut [u8], at: usize, v: u8) {
    if let Some(x) = b.get_mut(at) {
        *x = v;
    }
}

/// Writes a big-endian `u16` at `at` if it is in bounds.
#[inline(always)]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    put_slice(b, at, &v.to_be_bytes());
}

/// Writes a big-endian `u32` at `at` if it is in bounds.
#[inline(always)]
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    put_slice(b, at, &v.to_be_bytes());
}

/// Copies `v` to `at` if it fits.
#[inline(always)]
pub(crate) fn put_slice(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(s) = b.get_mut(at..at + v.len()) {
        s.copy_from_slice(v);
    }
}
