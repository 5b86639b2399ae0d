//! The last run [`super::Gro::handle_frame`] merged into, remembered as its frame header so
//! that the run's next frame is recognised by a masked compare of eight header words:
//! no parse, no flow hash, no table lookup, no signature to build and compare.
//!
//! Sound because every byte the parser's fast path ([`FastTcpV4::parse`]) and the merge
//! signature read is compared, except the fields that change from segment to segment
//! within a run (IPv4 ID and checksum, sequence number, TCP checksum, TSval and TSecr),
//! and those are checked against the run by `can_merge`, the same check the general path
//! makes (with the signature difference known to be zero). A frame
//! that differs anywhere else (another flow, other flags, another length, a different
//! option layout) goes the ordinary way, which decides and counts as before. The header
//! bytes equal to those of a frame that passed every check pass the same checks;
//! `stack/tests/gro_fast_path.rs` compares whole outputs against the parsed path. Why a
//! template, and what it saved: `docs/decisions/gro-same-run.md`.
//!
//! The template names a table slot; [`super::Gro`] clears that whenever the slot's run is
//! flushed (every way a run leaves the table goes through `flush_slot`), so it never
//! refers to a run that is no longer held or to a later run in the same slot. The header
//! words stay: the flow's next frame (with `flush_ns = 0`, the first of the next burst,
//! after the burst's end flushed the run) is handled from them as the general path
//! handles its parse, since the template also keeps what the general path computes from
//! those bytes (the flow's words and hash, the header signature). Why:
//! `docs/decisions/gro-window-zero.md`.

use core::net::Ipv4Addr;

use core::ops::Range;

use crate::buf::{ChecksumStatus, RxChecksum};
use crate::flow::FlowWords;
use crate::wire::fast::{field, HEADER_LEN, HEADER_LEN_NO_OPTIONS};
use crate::wire::{FastTcpV4, LocalAddrs, TcpFlags, Timestamp};

use super::table::NIL;
use super::{Arrival, HeaderSig};

/// Header bytes compared: Ethernet (14) + IPv4 without options (20) + TCP up to the TSval
/// (24 of NOP NOP TS's 32), rounded up to whole words (8, 64 bytes).
const WORDS: usize = field::TS_VAL.start.div_ceil(8);

/// Bytes that change within a run: IPv4 ID and checksum, TCP sequence number and
/// checksum; checked separately or not at all (the NIC verified both checksums, which is
/// checked per frame from its flags).
const VARYING: [Range<usize>; 4] = [
    field::IP_IDENT,
    field::IP_CHECKSUM,
    field::TCP_SEQ,
    field::TCP_CHECKSUM,
];

/// Header words of the last run merged into, and what the run's next frame must repeat.
#[derive(Clone, Copy, Debug)]
pub(super) struct RunTemplate {
    /// The run's table slot, or [`NIL`]: no run (the template's run was flushed, or there
    /// never was a template: then nothing matches it).
    pub(super) slot: u32,
    /// The template frame's first `8 * WORDS` (64) bytes as little-endian words, masked.
    words: [u64; WORDS],
    /// Which bits of `words` a frame of the run must repeat.
    mask: [u64; WORDS],
    /// Frame bytes needed: the IPv4 header's offset + its total length.
    frame_len: usize,
    /// TCP header length 32 (NOP NOP TS): TSval and TSecr at [`field::TS_VAL`] and
    /// [`field::TS_ECR`].
    has_ts: bool,
    /// The addresses the template frame was accepted for.
    local_mac: [u8; 6],
    local_v4: Option<Ipv4Addr>,
    /// Of the template frame (identical in every frame matching it).
    pub(super) payload_off: u16,
    pub(super) payload_len: u16,
    pub(super) flags: TcpFlags,
    pub(super) df: bool,
    /// The general path's flow words, flow hash and header signature of the template
    /// frame (identical for every frame matching it).
    pub(super) flow: FlowWords,
    pub(super) hash: u32,
    pub(super) sig: HeaderSig,
}

/// The per-frame fields of a frame matching a template.
pub(super) struct SameRun {
    pub(super) seq: u32,
    pub(super) ip_id: u16,
    pub(super) ts: Option<Timestamp>,
}

#[inline(always)]
fn words_of(h: &[u8; 8 * WORDS]) -> [u64; WORDS] {
    let mut w = [0u64; WORDS];
    for (i, c) in h.chunks_exact(8).enumerate() {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        w[i] = u64::from_le_bytes(a);
    }
    w
}

/// The compared bits for a frame whose header (and compared part) ends at byte `end`:
/// everything before it less [`VARYING`].
const fn mask_to(end: usize) -> [u64; WORDS] {
    let mut m = [0u64; WORDS];
    let mut b = 0;
    while b < end {
        let mut varying = false;
        let mut v = 0;
        while v < VARYING.len() {
            varying |= b >= VARYING[v].start && b < VARYING[v].end;
            v += 1;
        }
        if !varying {
            m[b / 8] |= 0xff << (8 * (b % 8));
        }
        b += 1;
    }
    m
}

/// The mask for a TCP header without options (ends at 54).
const MASK_PLAIN: [u64; WORDS] = mask_to(HEADER_LEN_NO_OPTIONS);
/// The mask for NOP NOP TS: up to the TSval (58), which may rise within a run.
const MASK_TS: [u64; WORDS] = mask_to(field::TS_VAL.start);

impl RunTemplate {
    /// No template.
    pub(super) const NONE: RunTemplate = RunTemplate {
        slot: NIL,
        words: [0; WORDS],
        mask: [0; WORDS],
        frame_len: usize::MAX,
        has_ts: false,
        local_mac: [0; 6],
        local_v4: None,
        payload_off: 0,
        payload_len: 0,
        flags: TcpFlags(0),
        df: false,
        flow: FlowWords([0; 5]),
        hash: 0,
        sig: HeaderSig::NONE,
    };

    /// A template for the run in `slot`, from `frame`, which [`FastTcpV4::parse`] accepted
    /// for `local` as `f` and which merged into that run. `None` when the frame is shorter
    /// than the compared words.
    pub(super) fn new(slot: u32, frame: &[u8], f: &FastTcpV4, local: &LocalAddrs) -> Option<Self> {
        let h = frame.first_chunk::<{ 8 * WORDS }>()?;
        // Compared: everything up to the end of the TCP header (the fixed header, or NOP
        // NOP TS kind and length), less the varying fields.
        let mask = if f.ts.is_some() { MASK_TS } else { MASK_PLAIN };
        let mut words = words_of(h);
        for (w, k) in words.iter_mut().zip(mask) {
            *w &= k;
        }
        let a = Arrival::of_fast(f);
        Some(RunTemplate {
            slot,
            words,
            mask,
            frame_len: f.payload_off() as usize + usize::from(f.payload_len),
            has_ts: f.ts.is_some(),
            local_mac: local.mac,
            local_v4: local.ipv4,
            payload_off: f.payload_off(),
            payload_len: f.payload_len,
            flags: f.flags,
            df: f.df,
            flow: a.flow,
            hash: a.hash,
            sig: a.sig,
        })
    }

    /// The varying fields of `frame` if it repeats the template frame everywhere else and
    /// its checksums were verified by the NIC, so that [`FastTcpV4::parse`] would accept it
    /// with every other field equal to the template's.
    #[inline(always)]
    pub(super) fn matches(
        &self,
        frame: &[u8],
        csum: RxChecksum,
        local: &LocalAddrs,
    ) -> Option<SameRun> {
        let h = frame.first_chunk::<{ 8 * WORDS }>()?;
        let w = words_of(h);
        let mut d = 0;
        for ((a, b), m) in w.iter().zip(&self.words).zip(&self.mask) {
            d |= (a ^ b) & m;
        }
        let ok = d == 0
            && frame.len() >= self.frame_len
            && csum.ip == ChecksumStatus::Good
            && csum.l4 == ChecksumStatus::Good
            && local.mac == self.local_mac
            && local.ipv4 == self.local_v4;
        if !ok {
            return None;
        }
        let be32 = |b: &[u8], i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let ts = if self.has_ts {
            // In bounds: the frame holds the whole TCP header (`frame_len` >= 66).
            let o = frame.first_chunk::<HEADER_LEN>()?;
            Some(Timestamp {
                tsval: be32(o, field::TS_VAL.start),
                tsecr: be32(o, field::TS_ECR.start),
            })
        } else {
            None
        };
        let id = field::IP_IDENT.start;
        Some(SameRun {
            seq: be32(h, field::TCP_SEQ.start),
            ip_id: u16::from_be_bytes([h[id], h[id + 1]]),
            ts,
        })
    }
}
