//! DPDK's own GRO library (`rte_gro`), TCP/IPv4 in heavyweight mode: the anchor weir's
//! GRO (`stack::gro`) is benchmarked against, side by side in one process.
//!
//! Read first: `docs/reference/prior-art.md` §1 (DPDK 22.11's `lib/gro`): a context
//! holds a table of `max_flow_num * max_item_per_flow` items (its flow array has as many
//! slots, scanned linearly); [`GroCtx::reassemble`] merges what it can and keeps it;
//! [`GroCtx::timeout_flush`] hands back every item older than a timeout **in TSC cycles**
//! (the header says nanoseconds; `rte_gro.c` subtracts the value from `rte_rdtsc()`).
//! Merged packets come back as mbuf chains (`nb_segs > 1`) with only the IPv4 total
//! length rewritten. Only segments whose flags are exactly ACK, with byte-identical
//! options, merge.
//!
//! `rte_gro` trusts `packet_type` and `l2_len`/`l3_len`/`l4_len` and reads headers at
//! those offsets without checking them against the data; [`GroCtx::reassemble`] therefore
//! passes it only single-segment mbufs whose headers lie inside the data, and hands the
//! rest back unprocessed.

use std::ffi::c_void;
use std::ptr::NonNull;

use arrayvec::ArrayVec;

use crate::error::{Error, Result};
use crate::mbuf::Mbuf;
use crate::Eal;

/// Largest burst [`GroCtx::reassemble`] takes at once (a typical RX burst is 32).
pub const GRO_MAX_BURST: usize = 256;

/// A heavyweight `rte_gro` context for TCP/IPv4 (`rte_gro_ctx_create`), destroyed on
/// drop after freeing whatever it still holds. Not thread-safe (`rte_gro`'s own rule):
/// one per lcore.
#[derive(Debug)]
pub struct GroCtx {
    raw: NonNull<c_void>,
}

// SAFETY: the context is plain memory from rte_zmalloc, used only through &mut self; DPDK
// allows using it from any one thread at a time.
unsafe impl Send for GroCtx {}

const TCP_IPV4: u64 = dpdk_sys::RTE_GRO_TCP_IPV4 as u64;

impl GroCtx {
    /// A context for `max_flows` flows of up to `items_per_flow` held packets each (the
    /// table has `max_flows * items_per_flow` items, at most 1,048,576), allocated on
    /// NUMA socket `socket`.
    pub fn new(_eal: &Eal, max_flows: u16, items_per_flow: u16, socket: u16) -> Result<GroCtx> {
        let param = dpdk_sys::rte_gro_param {
            gro_types: TCP_IPV4,
            max_flow_num: max_flows.max(1),
            max_item_per_flow: items_per_flow.max(1),
            socket_id: socket,
        };
        // SAFETY: `param` is a valid rte_gro_param; the EAL is initialised (`_eal`), so
        // rte_zmalloc_socket works. Returns NULL on failure.
        let raw = unsafe { dpdk_sys::rte_gro_ctx_create(&param) };
        NonNull::new(raw)
            .map(|raw| GroCtx { raw })
            .ok_or_else(|| Error::Create {
                what: "rte_gro context",
                name: format!("{max_flows} flows x {items_per_flow} items"),
                errno: libc::ENOMEM,
                message: "rte_gro_ctx_create returned NULL".into(),
                hint: "not enough EAL memory: fewer flows or items, or a larger -m",
            })
    }

    /// Feeds a burst (`rte_gro_reassemble`). The context takes every packet it merges or
    /// holds; `pkts` is left with the packets it did not process (not TCP/IPv4, flags
    /// other than ACK alone, no payload, table full, or headers the mbuf does not
    /// hold), which the caller passes on as they are.
    pub fn reassemble<const N: usize>(&mut self, pkts: &mut ArrayVec<Mbuf, N>) {
        let len = pkts.len();
        let base = pkts.as_mut_ptr().cast::<*mut dpdk_sys::rte_mbuf>();
        // The pointers stay in `pkts`' storage; from here on they are handled raw, and
        // the ones still ours are counted back in at the end.
        // SAFETY: shrinking the length only (no element is dropped or read twice).
        unsafe { pkts.set_len(0) };
        let mut ok = [std::ptr::null_mut(); GRO_MAX_BURST];
        let mut n_ok = 0usize;
        let mut kept = 0usize;
        for i in 0..len {
            // SAFETY: i < len: slot i holds an owned, valid mbuf, read once.
            let p = unsafe { *base.add(i) };
            // SAFETY: p is a valid mbuf we own.
            if headers_inside(unsafe { &*p }) {
                ok[n_ok] = p;
                n_ok += 1;
            } else {
                // SAFETY: kept <= i: that slot was already read.
                unsafe { *base.add(kept) = p };
                kept += 1;
            }
            if n_ok == GRO_MAX_BURST || (i + 1 == len && n_ok > 0) {
                // SAFETY: ok[..n_ok] are valid, owned, single-segment mbufs whose l2/l3/l4
                // lengths lie within their data, which is all rte_gro reads. It takes the
                // ones it merges or stores and writes the unprocessed ones to ok[..ret].
                let ret = unsafe {
                    dpdk_sys::rte_gro_reassemble(ok.as_mut_ptr(), n_ok as u16, self.raw.as_ptr())
                };
                for &q in &ok[..usize::from(ret)] {
                    // SAFETY: kept + ret <= i + 1: these slots were already read.
                    unsafe { *base.add(kept) = q };
                    kept += 1;
                }
                n_ok = 0;
            }
        }
        // SAFETY: slots ..kept hold the owned, valid mbufs handed back, each once.
        unsafe { pkts.set_len(kept) };
    }

    /// Hands back, into the free room of `out`, the held packets that arrived at least
    /// `timeout_cycles` TSC cycles ago (0: everything), merged ones as mbuf chains
    /// (`rte_gro_timeout_flush`). Returns how many; when that fills `out`, more may be due.
    pub fn timeout_flush<const N: usize>(
        &mut self,
        timeout_cycles: u64,
        out: &mut ArrayVec<Mbuf, N>,
    ) -> usize {
        let len = out.len();
        let room = out.remaining_capacity().min(usize::from(u16::MAX)) as u16;
        // SAFETY: Mbuf is repr(transparent) over NonNull<rte_mbuf>, so the spare capacity
        // holds `room` pointer slots; rte_gro writes at most `room` owned, valid mbufs.
        let n = unsafe {
            let spare = out.as_mut_ptr().add(len).cast::<*mut dpdk_sys::rte_mbuf>();
            dpdk_sys::rte_gro_timeout_flush(
                self.raw.as_ptr(),
                timeout_cycles,
                TCP_IPV4,
                spare,
                room,
            )
        };
        // SAFETY: the n slots after len now hold valid, owned, non-NULL mbufs.
        unsafe { out.set_len(len + usize::from(n)) };
        usize::from(n)
    }

    /// Packets held (`rte_gro_get_pkt_count`).
    pub fn held(&self) -> usize {
        // SAFETY: the context is valid; the call only reads it.
        unsafe { dpdk_sys::rte_gro_get_pkt_count(self.raw.as_ptr()) as usize }
    }
}

/// Whether `rte_gro` may read this packet's headers: one segment, and the `l2_len`,
/// `l3_len` and `l4_len` it trusts lie within the data (IPv4 and TCP at least 20 bytes).
#[inline]
fn headers_inside(m: &dpdk_sys::rte_mbuf) -> bool {
    // SAFETY: tx_offload's bit-field view is plain integers; reading it is always valid.
    let tx = unsafe { &m.__bindgen_anon_3.__bindgen_anon_1 };
    let (l3, l4) = (tx.l3_len(), tx.l4_len());
    m.nb_segs == 1 && l3 >= 20 && l4 >= 20 && tx.l2_len() + l3 + l4 <= u64::from(m.data_len)
}

impl Drop for GroCtx {
    fn drop(&mut self) {
        // rte_gro_ctx_destroy frees the tables, not the packets they hold.
        let mut out: ArrayVec<Mbuf, 64> = ArrayVec::new();
        while self.timeout_flush(0, &mut out) > 0 {
            out.clear();
        }
        // SAFETY: the context is valid and empty; nothing uses it after this.
        unsafe { dpdk_sys::rte_gro_ctx_destroy(self.raw.as_ptr()) }
    }
}
