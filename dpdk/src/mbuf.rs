//! Owned packet buffers (`rte_mbuf`), freed on drop.
//!
//! An [`Mbuf`] is exactly one pointer (`#[repr(transparent)]` over `NonNull<rte_mbuf>`),
//! so a burst array of `Mbuf`s is passed to `rte_eth_rx_burst` / `rte_eth_tx_burst`
//! as-is. Dropping one calls `rte_pktmbuf_free`, which frees the whole chain.
//!
//! ## TX checksum offload
//! Whether a port offloads checksums is a property of the port, not of the mbuf:
//! [`crate::Port::tx_csum_caps`] says what it enabled, and whoever builds frames for that
//! port is told once (the stack's `tx_csum_offload` switch, weir-gen's configuration).
//! Only a caller that was told so calls [`PacketBuf::request_tx_checksum`], which sets the
//! mbuf's offload flags and header lengths; every other caller computes the checksums in
//! software.

use std::marker::PhantomData;
use std::ptr::NonNull;

use stack::buf::{ChecksumStatus, PacketBuf, PayloadSlice, RxChecksum, TxChecksumOffload};
use stack::wire::checksum;

/// An owned packet buffer; the chain it heads is freed on drop.
#[repr(transparent)]
#[derive(Debug)]
pub struct Mbuf {
    raw: NonNull<dpdk_sys::rte_mbuf>,
}

// SAFETY: an Mbuf owns its rte_mbuf exclusively (no clones are handed out), and freeing it
// on another thread is allowed by DPDK (the mempool is multi-producer safe).
unsafe impl Send for Mbuf {}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: we own the mbuf; rte_pktmbuf_free frees every segment of the chain.
        unsafe { dpdk_sys::rte_pktmbuf_free(self.raw.as_ptr()) }
    }
}

/// What the driver recognised about a received packet (`rte_mbuf::packet_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PacketType(pub u32);

impl PacketType {
    /// The raw `RTE_PTYPE_*` bits (0: the driver does not classify).
    pub fn raw(self) -> u32 {
        self.0
    }
    /// An IPv4 header (with or without options), as `RTE_ETH_IS_IPV4_HDR` tests it.
    pub fn is_ipv4(self) -> bool {
        self.0 & dpdk_sys::RTE_PTYPE_L3_IPV4 != 0
    }
    /// An IPv6 header, as `RTE_ETH_IS_IPV6_HDR` tests it.
    pub fn is_ipv6(self) -> bool {
        self.0 & dpdk_sys::RTE_PTYPE_L3_IPV6 != 0
    }
    /// A TCP segment.
    pub fn is_tcp(self) -> bool {
        self.0 & dpdk_sys::RTE_PTYPE_L4_MASK == dpdk_sys::RTE_PTYPE_L4_TCP
    }
    /// A UDP datagram.
    pub fn is_udp(self) -> bool {
        self.0 & dpdk_sys::RTE_PTYPE_L4_MASK == dpdk_sys::RTE_PTYPE_L4_UDP
    }
}

impl Mbuf {
    /// Takes ownership of a raw mbuf.
    ///
    /// # Safety
    /// `raw` must be a valid mbuf (chain head) that nothing else will use or free.
    pub unsafe fn from_raw(raw: NonNull<dpdk_sys::rte_mbuf>) -> Mbuf {
        Mbuf { raw }
    }

    /// Gives up ownership; the caller must free or transmit the mbuf.
    pub fn into_raw(self) -> NonNull<dpdk_sys::rte_mbuf> {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    /// The raw pointer (ownership stays here).
    pub fn as_ptr(&self) -> *mut dpdk_sys::rte_mbuf {
        self.raw.as_ptr()
    }

    fn m(&self) -> &dpdk_sys::rte_mbuf {
        // SAFETY: we own a valid mbuf; shared access through &self.
        unsafe { self.raw.as_ref() }
    }

    fn m_mut(&mut self) -> &mut dpdk_sys::rte_mbuf {
        // SAFETY: we own a valid mbuf exclusively; &mut self guarantees uniqueness.
        unsafe { self.raw.as_mut() }
    }

    /// Bytes in the first segment.
    pub fn len(&self) -> usize {
        usize::from(self.m().data_len)
    }

    /// `true` when the first segment holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.m().data_len == 0
    }

    /// Bytes in the whole chain.
    pub fn pkt_len(&self) -> usize {
        self.m().pkt_len as usize
    }

    /// Number of segments in the chain.
    pub fn nb_segs(&self) -> u16 {
        self.m().nb_segs
    }

    /// The port it was received on (or stamped with), `None` if unset.
    pub fn port(&self) -> Option<u16> {
        let p = self.m().port;
        (u32::from(p) != dpdk_sys::RTE_MBUF_PORT_INVALID).then_some(p)
    }

    /// Marks the mbuf as bound for (or received on) `port`; see the module documentation.
    pub fn set_port(&mut self, port: u16) {
        self.m_mut().port = port;
    }

    /// The first segment's bytes.
    pub fn data(&self) -> &[u8] {
        let m = self.m();
        // SAFETY: buf_addr + data_off .. + data_len lies inside the mbuf's buffer, which we
        // own and which lives as long as self.
        unsafe {
            std::slice::from_raw_parts(
                m.buf_addr.cast::<u8>().add(usize::from(m.data_off)),
                usize::from(m.data_len),
            )
        }
    }

    /// The first segment's bytes, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let m = self.m_mut();
        if m.ol_flags & dpdk_sys::RTE_MBUF_F_INDIRECT != 0 {
            // An indirect mbuf's bytes belong to the mbuf it is attached to, which others
            // read ([`SharedData::reference`]): they are never writable through it.
            return &mut [];
        }
        // SAFETY: as in `data`, and &mut self makes the access exclusive (no clones exist;
        // a direct mbuf's data is its own).
        unsafe {
            std::slice::from_raw_parts_mut(
                m.buf_addr.cast::<u8>().add(usize::from(m.data_off)),
                usize::from(m.data_len),
            )
        }
    }

    /// Extends the data by `len` bytes at the end of the last segment and returns them
    /// (contents unspecified), or `None` when there is no room.
    pub fn append(&mut self, len: u16) -> Option<&mut [u8]> {
        // SAFETY: we own the mbuf; rte_pktmbuf_append returns NULL or a pointer to `len`
        // writable bytes inside the last segment.
        unsafe {
            let p = dpdk_sys::rte_pktmbuf_append(self.raw.as_ptr(), len);
            if p.is_null() {
                return None;
            }
            Some(std::slice::from_raw_parts_mut(
                p.cast::<u8>(),
                usize::from(len),
            ))
        }
    }

    /// Prefetches the first two cache lines of the data (a frame's Ethernet, IP and TCP
    /// headers), to be read or written soon. Reads the mbuf's header for the address.
    #[inline(always)]
    pub fn prefetch_data(&self) {
        prefetch_two_lines(self.data().as_ptr());
    }

    /// Sets the data of a freshly allocated (reset, empty, one-segment) mbuf to its first
    /// `len` bytes, what `rte_pktmbuf_append` does for it; `false` (nothing changed) when
    /// the mbuf is not empty or `len` exceeds its tailroom.
    pub(crate) fn set_fresh_len(&mut self, len: u16) -> bool {
        let m = self.m_mut();
        let room = m.buf_len.saturating_sub(m.data_off);
        if m.data_len != 0 || m.pkt_len != 0 || !m.next.is_null() || len > room {
            return false;
        }
        m.data_len = len;
        m.pkt_len = u32::from(len);
        true
    }

    /// Appends `bytes` (see [`Mbuf::append`]); `false` when they do not fit.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) -> bool {
        let Ok(len) = u16::try_from(bytes.len()) else {
            return false;
        };
        match self.append(len) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }

    /// Removes `len` bytes from the front of the first segment (`rte_pktmbuf_adj`);
    /// `false` if it holds fewer.
    pub fn adj(&mut self, len: u16) -> bool {
        // SAFETY: we own the mbuf; rte_pktmbuf_adj checks the length.
        !unsafe { dpdk_sys::rte_pktmbuf_adj(self.raw.as_ptr(), len) }.is_null()
    }

    /// Removes `len` bytes from the end of the last segment (`rte_pktmbuf_trim`);
    /// `false` if it holds fewer.
    pub fn trim(&mut self, len: u16) -> bool {
        // SAFETY: we own the mbuf; rte_pktmbuf_trim checks the length.
        unsafe { dpdk_sys::rte_pktmbuf_trim(self.raw.as_ptr(), len) == 0 }
    }

    /// Detaches every segment after the first into an mbuf of its own, handed to `out` in
    /// order; this mbuf keeps its first segment (`nb_segs` 1, `pkt_len` its `data_len`).
    /// Returns `false`, changing nothing, when a segment is shared (`refcnt` above 1).
    pub fn unchain(&mut self, out: &mut dyn FnMut(Mbuf)) -> bool {
        let head = self.raw.as_ptr();
        let mut p = head;
        while !p.is_null() {
            // SAFETY: `p` is a segment of the chain we own; an atomic read of its refcnt.
            if unsafe { dpdk_sys::rte_mbuf_refcnt_read(p) } != 1 {
                return false;
            }
            // SAFETY: as above; `next` is NULL or the chain's next segment.
            p = unsafe { (*p).next };
        }
        // SAFETY: we own the whole chain exclusively (every refcnt is 1). Each segment is
        // unlinked before it is handed out, so every mbuf handed out (and this one) heads a
        // one-segment chain that nothing else points to, and each is freed exactly once.
        unsafe {
            let mut next = (*head).next;
            (*head).next = std::ptr::null_mut();
            (*head).nb_segs = 1;
            (*head).pkt_len = u32::from((*head).data_len);
            while let Some(seg) = NonNull::new(next) {
                let m = &mut *seg.as_ptr();
                next = m.next;
                m.next = std::ptr::null_mut();
                m.nb_segs = 1;
                m.pkt_len = u32::from(m.data_len);
                out(Mbuf::from_raw(seg));
            }
        }
        true
    }

    /// The segments of the chain, in order, as byte slices.
    pub fn segments(&self) -> Segments<'_> {
        Segments {
            next: self.raw.as_ptr(),
            _owner: PhantomData,
        }
    }

    /// Copies the whole chain's bytes into a `Vec` (tests and diagnostics).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.pkt_len());
        for s in self.segments() {
            v.extend_from_slice(s);
        }
        v
    }

    /// The raw offload flags (`RTE_MBUF_F_*`).
    pub fn ol_flags(&self) -> u64 {
        self.m().ol_flags
    }

    /// The RSS hash the NIC computed, if any.
    pub fn rss_hash(&self) -> Option<u32> {
        let m = self.m();
        if m.ol_flags & u64::from(dpdk_sys::RTE_MBUF_F_RX_RSS_HASH) == 0 {
            return None;
        }
        // SAFETY: with RTE_MBUF_F_RX_RSS_HASH set, the hash union holds the RSS hash.
        Some(unsafe { m.__bindgen_anon_2.hash.rss })
    }

    /// The packet type the driver recognised.
    pub fn packet_type(&self) -> PacketType {
        // SAFETY: packet_type is a plain u32 view of a union of integers: always valid.
        PacketType(unsafe { self.m().__bindgen_anon_1.packet_type })
    }

    /// Sets the packet type, as a driver that classifies packets does on receive. DPDK's
    /// `rte_gro` dispatches on it (`IS_IPV4_TCP_PKT`).
    pub fn set_packet_type(&mut self, t: PacketType) {
        self.m_mut().__bindgen_anon_1.packet_type = t.0;
    }

    /// Sets the header lengths (`l2_len`, `l3_len`, `l4_len` of `tx_offload`). TX
    /// offloads read them, and so does DPDK's `rte_gro`, which finds headers by them
    /// instead of parsing (its programmer's guide asks the application to fill them in).
    pub fn set_header_lens(&mut self, l2: u8, l3: u16, l4: u8) {
        let m = self.m_mut();
        // SAFETY: tx_offload's bit-field view is plain integers; writing it is always valid.
        let tx = unsafe { &mut m.__bindgen_anon_3.__bindgen_anon_1 };
        tx.set_l2_len(u64::from(l2));
        tx.set_l3_len(u64::from(l3));
        tx.set_l4_len(u64::from(l4));
    }

    /// The header lengths set by [`Mbuf::set_header_lens`] (or a driver): `(l2, l3, l4)`.
    pub fn header_lens(&self) -> (u8, u16, u8) {
        // SAFETY: tx_offload's bit-field view is plain integers; reading it is always valid.
        let tx = unsafe { &self.m().__bindgen_anon_3.__bindgen_anon_1 };
        (tx.l2_len() as u8, tx.l3_len() as u16, tx.l4_len() as u8)
    }

    /// Records RX checksum verdicts in the offload flags, as a NIC with RX checksum
    /// offload does ([`Mbuf::rx_checksum`] reads them back; `Unknown` clears them).
    pub fn set_rx_checksum(&mut self, c: RxChecksum) {
        let bits = |s: ChecksumStatus, good: u32, bad: u32| match s {
            ChecksumStatus::Good => u64::from(good),
            ChecksumStatus::Bad => u64::from(bad),
            ChecksumStatus::Unknown => 0,
        };
        let mask = u64::from(
            dpdk_sys::RTE_MBUF_F_RX_IP_CKSUM_MASK | dpdk_sys::RTE_MBUF_F_RX_L4_CKSUM_MASK,
        );
        let m = self.m_mut();
        m.ol_flags = (m.ol_flags & !mask)
            | bits(
                c.ip,
                dpdk_sys::RTE_MBUF_F_RX_IP_CKSUM_GOOD,
                dpdk_sys::RTE_MBUF_F_RX_IP_CKSUM_BAD,
            )
            | bits(
                c.l4,
                dpdk_sys::RTE_MBUF_F_RX_L4_CKSUM_GOOD,
                dpdk_sys::RTE_MBUF_F_RX_L4_CKSUM_BAD,
            );
    }

    /// The NIC's RX checksum verdicts. DPDK's "NONE" status (checksum field not filled
    /// in but the data verified, e.g. virtio/tap carrying a local sender's
    /// CHECKSUM_PARTIAL packet) counts as good.
    #[inline]
    pub fn rx_checksum(&self) -> RxChecksum {
        rx_checksum_of(self.m().ol_flags)
    }

    /// Makes the offload flags what a NIC's receive path leaves in a fresh mbuf: only the
    /// RX checksum verdicts `c`. Everything else is cleared, TX requests included, so a
    /// sender's flags cannot reach the receiver. For a sender that stands in for the wire
    /// and a NIC with RX checksum offload (weir-gen on a ring port pair, whose frames are
    /// correct by construction): the receiver then trusts the verdict as it would a NIC's.
    pub fn set_received(&mut self, c: RxChecksum) {
        self.m_mut().ol_flags = 0;
        self.set_rx_checksum(c);
    }

    /// Does to a frame what a NIC with TX checksum offload does before it leaves, in
    /// software: fills in the IPv4 header checksum (`RTE_MBUF_F_TX_IP_CKSUM`) and the TCP
    /// checksum (`RTE_MBUF_F_TX_TCP_CKSUM`; the field holds the pseudo-header sum, DPDK's
    /// convention), at the header lengths given with the request, and clears the
    /// requests. For the far end of a ring port that models TX offload
    /// ([`crate::Port::model_tx_checksum_offload`]). Returns `false` (nothing changed)
    /// when no TCP checksum was requested or the lengths do not fit the frame.
    pub fn complete_tx_checksums(&mut self) -> bool {
        let f = self.ol_flags();
        if f & dpdk_sys::RTE_MBUF_F_TX_L4_MASK != dpdk_sys::RTE_MBUF_F_TX_TCP_CKSUM {
            return false;
        }
        let (l2, l3, _) = self.header_lens();
        let (l2, t) = (usize::from(l2), usize::from(l2) + usize::from(l3));
        let d = self.data_mut();
        if d.len() < t + 20 {
            return false;
        }
        if f & dpdk_sys::RTE_MBUF_F_TX_IP_CKSUM != 0 {
            d[l2 + 10..l2 + 12].fill(0);
            let c = checksum::checksum(&d[l2..t]);
            d[l2 + 10..l2 + 12].copy_from_slice(&c.to_be_bytes());
        }
        let c = !checksum::fold(checksum::add(0, &d[t..]));
        d[t + 16..t + 18].copy_from_slice(&c.to_be_bytes());
        self.m_mut().ol_flags &= !(dpdk_sys::RTE_MBUF_F_TX_L4_MASK
            | dpdk_sys::RTE_MBUF_F_TX_IP_CKSUM
            | dpdk_sys::RTE_MBUF_F_TX_IPV4
            | dpdk_sys::RTE_MBUF_F_TX_IPV6);
        true
    }

    /// Frees every mbuf in `bufs` with one `rte_pktmbuf_free_bulk` (which returns them to
    /// their pools in runs, not one `rte_mempool_put` each) and leaves `bufs` empty.
    pub fn free_burst<const N: usize>(bufs: &mut arrayvec::ArrayVec<Mbuf, N>) {
        let n = bufs.len();
        if n == 0 {
            return;
        }
        // SAFETY: Mbuf is repr(transparent) over a non-null mbuf pointer, so the first n
        // elements are n owned mbuf pointers; set_len(0) first, so the ArrayVec no longer
        // owns what DPDK frees (nothing is freed twice).
        unsafe {
            bufs.set_len(0);
            dpdk_sys::rte_pktmbuf_free_bulk(
                bufs.as_mut_ptr().cast::<*mut dpdk_sys::rte_mbuf>(),
                n as std::os::raw::c_uint,
            );
        }
    }

    /// Forgets the NIC's RX checksum verdicts (both become "unknown", so the stack
    /// verifies in software) — what a frame changed after reception needs, e.g. one the
    /// impairment stage corrupted.
    pub fn clear_rx_checksum(&mut self) {
        let mask = u64::from(dpdk_sys::RTE_MBUF_F_RX_IP_CKSUM_MASK)
            | u64::from(dpdk_sys::RTE_MBUF_F_RX_L4_CKSUM_MASK);
        self.m_mut().ol_flags &= !mask;
    }

    /// Sets the TX checksum offload flags and header lengths unconditionally (the caller
    /// knows the port supports them). Prefer [`PacketBuf::request_tx_checksum`].
    pub fn set_tx_checksum(&mut self, req: TxChecksumOffload) {
        let m = self.m_mut();
        let mut flags = dpdk_sys::RTE_MBUF_F_TX_TCP_CKSUM;
        if req.ipv4 {
            flags |= dpdk_sys::RTE_MBUF_F_TX_IPV4 | dpdk_sys::RTE_MBUF_F_TX_IP_CKSUM;
        } else {
            flags |= dpdk_sys::RTE_MBUF_F_TX_IPV6;
        }
        m.ol_flags |= flags;
        // SAFETY: tx_offload's bit-field view is plain integers; writing it is always valid.
        let tx = unsafe { &mut m.__bindgen_anon_3.__bindgen_anon_1 };
        tx.set_l2_len(u64::from(req.l2_len));
        tx.set_l3_len(u64::from(req.l3_len));
    }
}

impl PacketBuf for Mbuf {
    fn data(&self) -> &[u8] {
        Mbuf::data(self)
    }
    /// Frees a batch without a call per mbuf ([`free_raw_bulk`]).
    #[inline]
    fn free_bulk(bufs: impl Iterator<Item = Self>) {
        // SAFETY: `into_raw` hands over each chain the Mbuf owned: nothing else frees it,
        // and nothing uses it afterwards.
        unsafe { free_raw_bulk(bufs.map(|m| m.into_raw().as_ptr())) };
    }
    /// [`free_raw_bulk`] reading the array in place. GRO and TCP free what they gather
    /// this way. Out of line, taking the array by reference: passed an iterator over it
    /// instead, the function read back whole the iterator its caller had just built on
    /// the stack, a store forwarding stall that took a quarter of the free's samples
    /// (`perf record`, `weir-bench gro`, `train`).
    #[inline(never)]
    fn free_batch<const N: usize>(bufs: &mut arrayvec::ArrayVec<Self, N>) {
        let n = bufs.len();
        let first = bufs.as_ptr().cast::<*mut dpdk_sys::rte_mbuf>();
        // SAFETY: Mbuf is repr(transparent) over a non-null mbuf pointer, so the first n
        // elements are n owned mbuf pointers, each read once; set_len(0) first, so the
        // ArrayVec no longer owns what is freed (nothing is freed twice).
        unsafe {
            bufs.set_len(0);
            free_raw_bulk((0..n).map(|i| *first.add(i)));
        }
    }
    /// [`PacketBuf::free_batch`] for the buffers of payload slices (a unit GRO frees at
    /// once).
    #[inline(never)]
    fn free_slices<const N: usize>(slices: &mut arrayvec::ArrayVec<PayloadSlice<Self>, N>) {
        let n = slices.len();
        let first = slices.as_ptr();
        // SAFETY: the first n elements are initialised slices, each owning its mbuf; each
        // buffer's pointer is read once, and set_len(0) first, so the ArrayVec no longer
        // owns what is freed (nothing is freed twice; offsets and lengths need no drop).
        unsafe {
            slices.set_len(0);
            free_raw_bulk((0..n).map(|i| (*first.add(i)).buf.as_ptr()));
        }
    }
    /// The `rte_mbuf`'s first cache line (data address, lengths, flags).
    #[inline(always)]
    fn prefetch_descriptor(&self) {
        prefetch_addr(self.as_ptr().cast_const().cast());
    }
    #[inline(always)]
    fn prefetch_data(&self) {
        Mbuf::prefetch_data(self);
    }
    /// Both lines of the `rte_mbuf`: the free reads `refcnt` and `pool` in the first
    /// and `next` in the second.
    #[inline(always)]
    fn prefetch_for_free(&self) {
        prefetch_two_lines(self.as_ptr().cast_const().cast());
    }
    #[inline(always)]
    fn prefetch_line(p: *const u8) {
        prefetch_addr(p);
    }
    fn data_mut(&mut self) -> &mut [u8] {
        Mbuf::data_mut(self)
    }
    fn rx_checksum(&self) -> RxChecksum {
        Mbuf::rx_checksum(self)
    }
    fn is_contiguous(&self) -> bool {
        self.m().nb_segs == 1
    }
    /// The first segment's room after its data, when the bytes are this mbuf's alone: a
    /// direct mbuf (not attached to another's data or to an external buffer) of one
    /// segment that nothing else references (`refcnt` 1: an indirect mbuf attached to it
    /// would have raised it). Otherwise 0.
    fn tailroom(&self) -> usize {
        let m = self.m();
        let foreign = dpdk_sys::RTE_MBUF_F_INDIRECT | dpdk_sys::RTE_MBUF_F_EXTERNAL;
        if m.ol_flags & foreign != 0 || m.nb_segs != 1 || !m.next.is_null() {
            return 0;
        }
        // SAFETY: the mbuf is valid while self lives; an atomic read.
        if unsafe { dpdk_sys::rte_mbuf_refcnt_read(self.raw.as_ptr()) } != 1 {
            return 0;
        }
        usize::from(m.buf_len)
            .saturating_sub(usize::from(m.data_off))
            .saturating_sub(usize::from(m.data_len))
    }
    fn append(&mut self, bytes: &[u8]) -> bool {
        bytes.len() <= PacketBuf::tailroom(self) && self.extend_from_slice(bytes)
    }
    /// `rte_pktmbuf_trim` of a one-segment mbuf (a frame's Ethernet padding, a reply
    /// built in a buffer sized for the worst case).
    fn truncate(&mut self, len: usize) -> bool {
        let m = self.m();
        let have = usize::from(m.data_len);
        if m.nb_segs != 1 || len > have {
            return false;
        }
        len == have || self.trim((have - len) as u16)
    }
    fn frame_len(&self) -> usize {
        self.pkt_len()
    }
    fn segment_count(&self) -> usize {
        usize::from(self.m().nb_segs)
    }
    /// Unlinks each segment into an mbuf of its own (`next` cleared, `nb_segs` 1,
    /// `pkt_len` its `data_len`): every segment of a received chain is a mempool element
    /// of its own, so each can be freed alone. Refused (`false`) when any segment is
    /// shared (`refcnt` above 1: another holder sees the chain).
    fn unchain(&mut self, out: &mut dyn FnMut(Self)) -> bool {
        Mbuf::unchain(self, out)
    }
    /// Always `true`: an mbuf carries the request to any port; the caller decided from the
    /// port's [`crate::Port::tx_csum_caps`] that the port completes it.
    fn request_tx_checksum(&mut self, req: TxChecksumOffload) -> bool {
        self.set_tx_checksum(req);
        true
    }
}

/// The RX checksum verdicts offload flags `f` carry ([`Mbuf::rx_checksum`]). Each
/// status is two bits, "good" and "bad", both set for "NONE" (counted as good), so
/// "good" is its bit alone: a caller that wants both checksums good (the fast parser, the
/// GRO template) is left with one test of two bits, not a decode of each status.
#[inline(always)]
fn rx_checksum_of(f: u64) -> RxChecksum {
    let status = |good: u32, bad: u32| {
        if f & u64::from(good) != 0 {
            ChecksumStatus::Good // GOOD, or NONE (GOOD | BAD)
        } else if f & u64::from(bad) != 0 {
            ChecksumStatus::Bad
        } else {
            ChecksumStatus::Unknown
        }
    };
    RxChecksum {
        ip: status(
            dpdk_sys::RTE_MBUF_F_RX_IP_CKSUM_GOOD,
            dpdk_sys::RTE_MBUF_F_RX_IP_CKSUM_BAD,
        ),
        l4: status(
            dpdk_sys::RTE_MBUF_F_RX_L4_CKSUM_GOOD,
            dpdk_sys::RTE_MBUF_F_RX_L4_CKSUM_BAD,
        ),
    }
}

const _: () = assert!(
    dpdk_sys::RTE_MBUF_F_RX_IP_CKSUM_NONE
        == dpdk_sys::RTE_MBUF_F_RX_IP_CKSUM_GOOD | dpdk_sys::RTE_MBUF_F_RX_IP_CKSUM_BAD
        && dpdk_sys::RTE_MBUF_F_RX_IP_CKSUM_MASK == dpdk_sys::RTE_MBUF_F_RX_IP_CKSUM_NONE
        && dpdk_sys::RTE_MBUF_F_RX_L4_CKSUM_NONE
            == dpdk_sys::RTE_MBUF_F_RX_L4_CKSUM_GOOD | dpdk_sys::RTE_MBUF_F_RX_L4_CKSUM_BAD
        && dpdk_sys::RTE_MBUF_F_RX_L4_CKSUM_MASK == dpdk_sys::RTE_MBUF_F_RX_L4_CKSUM_NONE
);

/// Iterator over the segments of an mbuf chain ([`Mbuf::segments`]).
#[derive(Debug)]
pub struct Segments<'a> {
    next: *mut dpdk_sys::rte_mbuf,
    _owner: PhantomData<&'a Mbuf>,
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.next.is_null() {
            return None;
        }
        // SAFETY: `next` is a segment of a chain owned by the Mbuf borrowed for 'a.
        unsafe {
            let m = &*self.next;
            self.next = m.next;
            Some(std::slice::from_raw_parts(
                m.buf_addr.cast::<u8>().add(usize::from(m.data_off)),
                usize::from(m.data_len),
            ))
        }
    }
}

/// Frees every mbuf `ms` yields (each the head of its chain, owned: taken out of its
/// [`Mbuf`] with [`Mbuf::into_raw`]), what `rte_pktmbuf_free_bulk` does, with its common
/// case inline.
///
/// A plain mbuf (direct, neither indirect nor with an external buffer; one segment;
/// `refcnt` 1, so nothing else references it) is what `rte_pktmbuf_prefree_seg` leaves
/// as it is: it is already in the state its pool keeps free mbufs in. Such mbufs go back
/// with `rte_mempool_put_bulk`, one call per run of one pool (at most 64), as
/// `rte_pktmbuf_free_bulk` puts them back. Everything else (a chain, a clone, a shared
/// or external-buffer mbuf) is gathered and handed to `rte_pktmbuf_free_bulk` itself.
///
/// Why: `rte_pktmbuf_free_bulk` is out of line in DPDK's library and took 41
/// instructions per one-segment mbuf under callgrind, and the pointers had to be copied
/// into an array for it first (12 more); GRO frees one mbuf per segment.
///
/// # Safety
/// Every pointer is a valid mbuf heading its chain, owned by the caller and not used
/// after the call.
#[inline(always)]
unsafe fn free_raw_bulk(ms: impl Iterator<Item = *mut dpdk_sys::rte_mbuf>) {
    const FOREIGN: u64 = dpdk_sys::RTE_MBUF_F_INDIRECT | dpdk_sys::RTE_MBUF_F_EXTERNAL;
    // Not zeroed arrays: clearing 512 bytes per call cost more than it saved. The counts
    // are plain locals, and the calls out of line taking them by value, so that they stay
    // in registers across the loop.
    let mut plain = [const { std::mem::MaybeUninit::<*mut std::ffi::c_void>::uninit() }; FREE_N];
    let mut n = 0;
    let mut pool: *mut dpdk_sys::rte_mempool = std::ptr::null_mut();
    let mut other = [const { std::mem::MaybeUninit::<*mut dpdk_sys::rte_mbuf>::uninit() }; FREE_N];
    let mut n_other = 0;
    for m in ms {
        // SAFETY: `m` is a valid mbuf the caller hands over (the function's contract); its
        // reference count is read atomically, as `rte_mbuf_refcnt_read` does (another
        // holder may change it), the fields read besides are ours alone.
        let (is_plain, p) = unsafe {
            let r = &*m;
            let refcnt = std::sync::atomic::AtomicU16::from_ptr(&raw mut (*m).refcnt)
                .load(std::sync::atomic::Ordering::Relaxed);
            (
                refcnt == 1 && r.nb_segs == 1 && r.next.is_null() && r.ol_flags & FOREIGN == 0,
                r.pool,
            )
        };
        if !is_plain {
            if n_other == FREE_N {
                // SAFETY: other[..n_other] are owned chain heads, written below.
                unsafe { free_other(other.as_mut_ptr().cast(), n_other) };
                n_other = 0;
            }
            other[n_other].write(m);
            n_other += 1;
            continue;
        }
        if n == FREE_N || (p != pool && n != 0) {
            // SAFETY: plain[..n] are plain mbufs of `pool`, written below.
            unsafe { put_plain(pool, plain.as_ptr().cast(), n) };
            n = 0;
        }
        pool = p;
        plain[n].write(m.cast());
        n += 1;
    }
    if n != 0 {
        // SAFETY: as in the loop.
        unsafe { put_plain(pool, plain.as_ptr().cast(), n) };
    }
    if n_other != 0 {
        // SAFETY: as in the loop.
        unsafe { free_other(other.as_mut_ptr().cast(), n_other) };
    }
}

/// Mbufs [`free_raw_bulk`] gathers before a call (DPDK's `rte_pktmbuf_free_bulk` gathers
/// as many: `RTE_PKTMBUF_FREE_PENDING_SZ`).
const FREE_N: usize = 64;

/// Puts `n` plain mbufs of `pool` back ([`free_raw_bulk`]).
///
/// # Safety
/// `objs[..n]` are plain mbufs of `pool` (direct, one segment, no next, refcnt 1: the
/// state a pool keeps free mbufs in) handed over by their owner and not used afterwards.
#[inline(never)]
unsafe fn put_plain(
    pool: *mut dpdk_sys::rte_mempool,
    objs: *const *mut std::ffi::c_void,
    n: usize,
) {
    // SAFETY: the function's contract; nothing references the mbufs any more, and each
    // goes back once.
    unsafe { dpdk_sys::rte_mempool_put_bulk(pool, objs, n as u32) };
}

/// Frees what [`free_raw_bulk`] does not put back itself, with `rte_pktmbuf_free_bulk`
/// (chains, references and all). Not marked cold: DPDK's `rte_gro` hands on chains,
/// which `weir-bench gro` frees through here.
///
/// # Safety
/// `ms[..n]` are valid mbuf chain heads handed over by their owner and not used
/// afterwards.
#[inline(never)]
unsafe fn free_other(ms: *mut *mut dpdk_sys::rte_mbuf, n: usize) {
    // SAFETY: the function's contract; each chain is freed once.
    unsafe { dpdk_sys::rte_pktmbuf_free_bulk(ms, n as u32) };
}

/// `rte_pktmbuf_reset` for an mbuf just taken from its pool, writing its second line
/// only where it differs from the reset state.
///
/// A free mbuf's `next` is NULL already (every free path leaves it so), and its
/// `tx_offload` is zero unless its last user asked for an offload. The receiving core
/// read that line when it freed the mbuf; writing the same values again would take the
/// line back from it (an ownership round trip between cores per mbuf), while reading it
/// does not. The first line is written in full, as `rte_pktmbuf_reset` does.
///
/// # Safety
/// `m` is a valid mbuf of a pktmbuf pool, owned by the caller and not yet handed out.
pub(crate) unsafe fn reset_fresh(m: *mut dpdk_sys::rte_mbuf) {
    // SAFETY: the caller owns `m` exclusively (the function's contract); tx_offload's
    // integer view is plain data.
    let r = unsafe { &mut *m };
    if !r.next.is_null() {
        r.next = std::ptr::null_mut();
    }
    // SAFETY: as above.
    if unsafe { r.__bindgen_anon_3.tx_offload } != 0 {
        r.__bindgen_anon_3.tx_offload = 0;
    }
    r.pkt_len = 0;
    r.vlan_tci = 0;
    r.vlan_tci_outer = 0;
    r.nb_segs = 1;
    r.port = dpdk_sys::RTE_MBUF_PORT_INVALID as u16;
    r.ol_flags &= dpdk_sys::RTE_MBUF_F_EXTERNAL;
    r.__bindgen_anon_1.packet_type = 0;
    r.data_off = (dpdk_sys::RTE_PKTMBUF_HEADROOM as u16).min(r.buf_len);
    r.data_len = 0;
}

/// The most references [`Mbuf::chain_shared`] lets a [`SharedData`] have (`refcnt` is 16
/// bits and DPDK does not check it for overflow).
pub const MAX_SHARED_REFS: u16 = u16::MAX - 1;

/// An mbuf whose data nobody writes any more: bytes many frames carry by reference
/// ([`Mbuf::chain_shared`], `rte_pktmbuf_attach`), e.g. a traffic generator's payload.
/// There is no way to get a writable view of it, and the frames referring to it only
/// read it, so sharing it is sound. Dropping it releases this reference; the mbuf goes
/// back to its pool when the last frame referring to it is freed.
#[derive(Debug)]
pub struct SharedData {
    m: Mbuf,
}

impl SharedData {
    /// Freezes `m`. `None` when it cannot be shared this way: it is itself indirect or
    /// external, is already referenced elsewhere, or has more than one segment.
    pub fn new(m: Mbuf) -> Option<SharedData> {
        let r = m.m();
        let plain =
            r.ol_flags & (dpdk_sys::RTE_MBUF_F_INDIRECT | dpdk_sys::RTE_MBUF_F_EXTERNAL) == 0;
        (plain && r.refcnt == 1 && r.nb_segs == 1 && r.next.is_null()).then_some(SharedData { m })
    }

    /// The shared bytes.
    pub fn data(&self) -> &[u8] {
        self.m.data()
    }

    /// How many holders the data has: this one plus every frame segment referring to it.
    pub fn references(&self) -> u16 {
        // SAFETY: the mbuf is valid while self lives; an atomic read.
        unsafe { dpdk_sys::rte_mbuf_refcnt_read(self.m.as_ptr()) }
    }

    /// The raw mbuf (for FFI that only reads it).
    pub fn as_ptr(&self) -> *const dpdk_sys::rte_mbuf {
        self.m.as_ptr().cast_const()
    }

    /// A buffer of its own whose data is `len` shared bytes from `off`, by reference: an
    /// mbuf from `pool` attached to the shared data (`rte_pktmbuf_attach`, one more
    /// reference), read-only ([`Mbuf::data_mut`] of an indirect mbuf is empty, and it has
    /// no tailroom). For handing a generator's payload to TCP's send queue without a copy
    /// (`stack::tcp::Tcp::send_bufs`). `None` when the range is not inside the data,
    /// `pool` is empty or the data has [`MAX_SHARED_REFS`] references.
    pub fn reference(&self, pool: &crate::Mempool, off: u16, len: u16) -> Option<Mbuf> {
        if usize::from(off) + usize::from(len) > self.data().len()
            || self.references() >= MAX_SHARED_REFS
        {
            return None;
        }
        let mi = pool.alloc_empty()?;
        let p = mi.into_raw().as_ptr();
        // SAFETY: `p` is a fresh mbuf of a pktmbuf pool (direct, refcnt 1, one segment),
        // as rte_pktmbuf_attach requires; `self.m` is a valid direct mbuf. After the
        // attach `p` points into its buffer: data_off + off + len stays within the data
        // (checked above), and buf_len is cut to the range's end so nothing can append
        // into the shared bytes (rte_pktmbuf_detach restores it at the free). `p` is then
        // owned by the returned Mbuf.
        unsafe {
            dpdk_sys::rte_pktmbuf_attach(p, self.m.as_ptr());
            let r = &mut *p;
            r.data_off += off;
            r.data_len = len;
            r.pkt_len = u32::from(len);
            r.buf_len = r.data_off + len;
            Some(Mbuf::from_raw(NonNull::new_unchecked(p)))
        }
    }
}

impl Mbuf {
    /// Appends `len` bytes of `src`'s data from `off` on as a new last segment, by
    /// reference: an mbuf from `pool` (any pktmbuf pool; its own data room goes unused) is
    /// attached to `src` (`rte_pktmbuf_attach`, one more reference) and chained
    /// (`rte_pktmbuf_chain`). The new segment has no tailroom, so [`Mbuf::append`] can
    /// never write into the shared bytes. Returns `false`, changing nothing, when the range
    /// is not inside `src`'s data, `pool` is empty, `src` already has
    /// [`MAX_SHARED_REFS`] references, or the chain would exceed DPDK's segment limit.
    pub fn chain_shared(
        &mut self,
        pool: &crate::Mempool,
        src: &SharedData,
        off: u16,
        len: u16,
    ) -> bool {
        if usize::from(off) + usize::from(len) > src.data().len()
            || src.references() >= MAX_SHARED_REFS
        {
            return false;
        }
        let Some(mi) = pool.alloc_empty() else {
            return false;
        };
        let mi = mi.into_raw().as_ptr();
        // SAFETY: `mi` is a fresh mbuf of a pktmbuf pool (direct, refcnt 1, one segment),
        // which is what rte_pktmbuf_attach requires; `src` is a valid direct mbuf. After
        // the attach `mi` points into src's buffer: data_off + off + len stays within its
        // data (checked above), and buf_len is cut to the data's end so nothing can append
        // into the shared bytes (rte_pktmbuf_detach restores it from the pool at the free).
        // rte_pktmbuf_chain takes ownership of `mi` on success; on failure we free it.
        unsafe {
            dpdk_sys::rte_pktmbuf_attach(mi, src.m.as_ptr());
            let r = &mut *mi;
            r.data_off += off;
            r.data_len = len;
            r.pkt_len = u32::from(len);
            r.buf_len = r.data_off + len;
            if dpdk_sys::rte_pktmbuf_chain(self.raw.as_ptr(), mi) != 0 {
                dpdk_sys::rte_pktmbuf_free(mi);
                return false;
            }
        }
        true
    }
}

/// `prefetcht0` of the cache line holding `p` on x86_64; nothing elsewhere.
#[inline(always)]
pub(crate) fn prefetch_addr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults, whatever the address (even one
    // past a buffer's end), and writes nothing.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The cache line holding `p` and the next one (an mbuf's descriptor, or the first 128
/// bytes of its data: the headers).
#[inline(always)]
pub(crate) fn prefetch_two_lines(p: *const u8) {
    prefetch_addr(p);
    prefetch_addr(p.wrapping_add(64));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_type_classes() {
        let tcp4 = PacketType(dpdk_sys::RTE_PTYPE_L3_IPV4 | dpdk_sys::RTE_PTYPE_L4_TCP);
        assert!(tcp4.is_ipv4() && tcp4.is_tcp() && !tcp4.is_udp() && !tcp4.is_ipv6());
        let udp6 = PacketType(dpdk_sys::RTE_PTYPE_L3_IPV6_EXT | dpdk_sys::RTE_PTYPE_L4_UDP);
        assert!(udp6.is_ipv6() && udp6.is_udp() && !udp6.is_tcp());
        assert_eq!(PacketType::default().raw(), 0);
    }

    /// `rx_checksum_of` reads each status as DPDK defines it, whatever the other bits: GOOD
    /// and NONE good, BAD bad, UNKNOWN unknown.
    #[test]
    fn rx_checksum_statuses_decode_as_dpdk_defines_them() {
        use dpdk_sys::*;
        let ip = [
            (RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN, ChecksumStatus::Unknown),
            (RTE_MBUF_F_RX_IP_CKSUM_BAD, ChecksumStatus::Bad),
            (RTE_MBUF_F_RX_IP_CKSUM_GOOD, ChecksumStatus::Good),
            (RTE_MBUF_F_RX_IP_CKSUM_NONE, ChecksumStatus::Good),
        ];
        let l4 = [
            (RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN, ChecksumStatus::Unknown),
            (RTE_MBUF_F_RX_L4_CKSUM_BAD, ChecksumStatus::Bad),
            (RTE_MBUF_F_RX_L4_CKSUM_GOOD, ChecksumStatus::Good),
            (RTE_MBUF_F_RX_L4_CKSUM_NONE, ChecksumStatus::Good),
        ];
        let mask = u64::from(RTE_MBUF_F_RX_IP_CKSUM_MASK | RTE_MBUF_F_RX_L4_CKSUM_MASK);
        for other in [0, !mask, 0x5555_5555_5555_5555 & !mask] {
            for (i, want_ip) in ip {
                for (l, want_l4) in l4 {
                    let got = rx_checksum_of(other | u64::from(i) | u64::from(l));
                    assert_eq!((got.ip, got.l4), (want_ip, want_l4), "{i:#x} {l:#x}");
                }
            }
        }
    }

    /// `reset_fresh` leaves every byte of an mbuf as `rte_pktmbuf_reset` does, from any
    /// state: an mbuf in plain memory, filled with a pattern, reset both ways.
    #[test]
    fn reset_fresh_matches_rte_pktmbuf_reset() {
        let size = std::mem::size_of::<dpdk_sys::rte_mbuf>();
        for (seed, ext) in [(0x5au8, false), (0x00, false), (0xa7, true)] {
            // SAFETY: rte_mbuf is plain C data, any bit pattern is a valid value of its
            // integer fields; the pointers are only compared and overwritten, never
            // dereferenced by either reset (neither touches the pool or the buffer). The
            // copy is a bitwise one of that plain data (nothing is owned or dropped).
            let (mut a, mut b) = unsafe {
                let mut m: dpdk_sys::rte_mbuf = std::mem::zeroed();
                let bytes = std::slice::from_raw_parts_mut((&raw mut m).cast::<u8>(), size);
                for (i, x) in bytes.iter_mut().enumerate() {
                    *x = seed.wrapping_mul(i as u8).wrapping_add(i as u8);
                }
                m.buf_len = if seed == 0 { 64 } else { 2176 };
                if ext {
                    m.ol_flags |= dpdk_sys::RTE_MBUF_F_EXTERNAL;
                }
                (std::ptr::read(&raw const m), m)
            };
            // SAFETY: both are exclusively ours, in plain memory.
            unsafe {
                dpdk_sys::rte_pktmbuf_reset(&raw mut a);
                reset_fresh(&raw mut b);
            }
            // SAFETY: reading the bytes of plain C structs.
            let (ab, bb) = unsafe {
                (
                    std::slice::from_raw_parts((&raw const a).cast::<u8>(), size),
                    std::slice::from_raw_parts((&raw const b).cast::<u8>(), size),
                )
            };
            assert_eq!(ab, bb, "seed {seed:#x}");
        }
    }
}
