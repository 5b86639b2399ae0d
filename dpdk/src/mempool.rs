//! Packet-buffer pools (`rte_pktmbuf_pool_create`).
//!
//! A [`Mempool`] is never freed: like most DPDK applications, weir creates its pools at
//! start-up and keeps them until the process exits. That is what makes [`Mbuf`] safe to
//! hold anywhere: no mbuf can outlive its pool. The handle is `Copy`.

use std::ffi::CString;
use std::ptr::NonNull;

use stack::buf::BufPool;

use crate::error::{rte_errno, strerror, Error, Result};
use crate::mbuf::Mbuf;
use crate::Eal;

/// Default data room per mbuf: 2048 bytes of frame after `RTE_PKTMBUF_HEADROOM` (128).
pub const DEFAULT_DATA_ROOM: u16 = dpdk_sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16;

/// Default per-lcore cache (DPDK's examples use 250; 256 fits a power-of-two pool).
pub const DEFAULT_CACHE: u32 = 256;

/// A pool of packet buffers (a pktmbuf mempool). Thread-safe; lives until process exit.
#[derive(Clone, Copy, Debug)]
pub struct Mempool {
    raw: NonNull<dpdk_sys::rte_mempool>,
}

// SAFETY: rte_mempool operations are multi-producer/multi-consumer safe (ring-based ops),
// and the pool is never freed, so the pointer may be shared and sent between threads.
unsafe impl Send for Mempool {}
// SAFETY: as above; every method takes &self and relies on DPDK's internal synchronisation.
unsafe impl Sync for Mempool {}

impl Mempool {
    /// Creates a pool of `count` mbufs with `data_room` bytes each (including the 128-byte
    /// headroom; [`DEFAULT_DATA_ROOM`] holds a 1518-byte frame with room to spare) and a
    /// per-lcore cache of `cache` mbufs. `count` is best a power of two minus one.
    pub fn new(_eal: &Eal, name: &str, count: u32, cache: u32, data_room: u16) -> Result<Mempool> {
        let cname = CString::new(name).map_err(|_| Error::NulInArgument(name.to_owned()))?;
        // rte_mempool's cache may not exceed RTE_MEMPOOL_CACHE_MAX_SIZE (512) nor count/1.5.
        let cache = cache.min(512).min(count / 3 * 2);
        // SAFETY: cname is a valid C string; the EAL is initialised (`_eal`).
        let raw = unsafe {
            dpdk_sys::rte_pktmbuf_pool_create(
                cname.as_ptr(),
                count,
                cache,
                0,
                data_room,
                dpdk_sys::SOCKET_ID_ANY,
            )
        };
        match NonNull::new(raw) {
            Some(raw) => Ok(Mempool { raw }),
            None => {
                let errno = rte_errno();
                Err(Error::Create {
                    what: "mempool",
                    name: name.to_owned(),
                    errno,
                    message: strerror(errno),
                    hint: match errno {
                        libc::EEXIST => "a mempool with this name exists: pick another name",
                        libc::ENOMEM => {
                            "not enough memory: fewer mbufs, a larger -m, or \
                             scripts/setup-hugepages.sh"
                        }
                        _ => "check count, cache and data room sizes",
                    },
                })
            }
        }
    }

    /// Like [`Mempool::new`], but every mbuf lies at one stride from the start of one
    /// virtually contiguous chunk: mbuf `i` starts at `chunk + i x object size`, and the
    /// chunk ends at `chunk + populated x object size`. DPDK 22.11's net_af_xdp needs
    /// this: it registers as its UMEM exactly that range (`xdp_umem_configure`:
    /// `get_base_addr` of the first chunk, `populated_size * frame_size`), and the
    /// kernel refuses an address past its end (`xp_check_unaligned`: a fill descriptor
    /// is dropped and its buffer never comes back; a transmit descriptor is counted in
    /// `tx_invalid_descs` and never completed). [`Mempool::new`]'s layout keeps each
    /// object within one page (`rte_mempool_op_populate_helper`'s `check_obj_bounds`,
    /// for IOVA-contiguous objects), which leaves a gap at every page's end: one 2,368-byte
    /// mbuf per 4 KiB page without hugepages, so two in five mbufs lay past the UMEM
    /// (DPDK 24.07 reads the real range, `rte_mempool_get_mem_range`). Here the pool is
    /// created with `RTE_MEMPOOL_F_NO_IOVA_CONTIG` (objects may cross pages: only for a
    /// device that never DMAs, as AF_XDP in copy mode or through the kernel does not),
    /// and the layout is checked. Fails if the memory came in several chunks.
    pub fn new_contiguous(
        _eal: &Eal,
        name: &str,
        count: u32,
        cache: u32,
        data_room: u16,
    ) -> Result<Mempool> {
        let cname = CString::new(name).map_err(|_| Error::NulInArgument(name.to_owned()))?;
        let cache = cache.min(512).min(count / 3 * 2);
        let fail = |errno: i32, hint: &'static str| Error::Create {
            what: "mempool",
            name: name.to_owned(),
            errno,
            message: strerror(errno),
            hint,
        };
        let elt_size = std::mem::size_of::<dpdk_sys::rte_mbuf>() as u32 + u32::from(data_room);
        // The steps of rte_pktmbuf_pool_create_by_ops (lib/mbuf/rte_mbuf.c), with a flag
        // it does not take.
        // SAFETY: cname is a valid C string; the EAL is initialised (`_eal`).
        let raw = unsafe {
            dpdk_sys::rte_mempool_create_empty(
                cname.as_ptr(),
                count,
                elt_size,
                cache,
                std::mem::size_of::<dpdk_sys::rte_pktmbuf_pool_private>() as u32,
                dpdk_sys::SOCKET_ID_ANY,
                dpdk_sys::RTE_MEMPOOL_F_NO_IOVA_CONTIG,
            )
        };
        let Some(raw) = NonNull::new(raw) else {
            return Err(fail(rte_errno(), "check count, cache and data room sizes"));
        };
        let mp = raw.as_ptr();
        let mut private = dpdk_sys::rte_pktmbuf_pool_private {
            mbuf_data_room_size: data_room,
            mbuf_priv_size: 0,
            flags: 0,
        };
        // SAFETY: mp is the empty pool just created and known to no one else; the ops
        // name is DPDK's static string; `private` outlives the init call, which copies it.
        let ret = unsafe {
            let ret = dpdk_sys::rte_mempool_set_ops_byname(
                mp,
                dpdk_sys::rte_mbuf_best_mempool_ops(),
                std::ptr::null_mut(),
            );
            if ret == 0 {
                dpdk_sys::rte_pktmbuf_pool_init(mp, &mut private as *mut _ as *mut _);
                let n = dpdk_sys::rte_mempool_populate_default(mp);
                if n < 0 {
                    n
                } else {
                    dpdk_sys::rte_mempool_obj_iter(
                        mp,
                        Some(dpdk_sys::rte_pktmbuf_init),
                        std::ptr::null_mut(),
                    );
                    0
                }
            } else {
                ret
            }
        };
        let pool = Mempool { raw };
        if ret < 0 {
            // SAFETY: no mbuf of the pool was handed out.
            unsafe { dpdk_sys::rte_mempool_free(mp) };
            return Err(fail(
                -ret,
                "not enough memory: fewer mbufs, a larger -m, or scripts/setup-hugepages.sh",
            ));
        }
        if !pool.one_stride() {
            // SAFETY: as above.
            unsafe { dpdk_sys::rte_mempool_free(mp) };
            return Err(fail(
                libc::ENOMEM,
                "the pool's memory came in several pieces: a larger -m (or hugepages) \
                 leaves room for one",
            ));
        }
        Ok(pool)
    }

    /// Every object lies within one chunk at one stride from its start (the layout
    /// [`Mempool::new_contiguous`] promises).
    fn one_stride(&self) -> bool {
        // SAFETY: the pool is valid and populated; nothing else uses it yet (called at
        // creation), and the callback only reads object addresses.
        unsafe {
            let mp = &*self.raw.as_ptr();
            let first = mp.mem_list.stqh_first;
            if mp.nb_mem_chunks != 1 || first.is_null() {
                return false;
            }
            let mut job = Stride {
                start: (*first).addr as usize,
                size: (mp.header_size + mp.elt_size + mp.trailer_size) as usize,
                header: mp.header_size as usize,
                end: (*first).addr as usize
                    + mp.populated_size as usize
                        * (mp.header_size + mp.elt_size + mp.trailer_size) as usize,
                bad: 0,
            };
            dpdk_sys::rte_mempool_obj_iter(
                self.raw.as_ptr(),
                Some(check_stride),
                (&mut job as *mut Stride).cast(),
            );
            job.bad == 0
        }
    }

    /// Splits the mbufs still allocated from the pool ([`Mempool::in_use`]) into those
    /// never filled since they were allocated ([`InUse::untouched`]: the state
    /// `rte_pktmbuf_alloc` leaves, no length, no port) and the others ([`InUse::used`]).
    /// After a port is closed, an untouched mbuf is one its driver posted to a receive
    /// ring and never handed back: net_af_xdp's close in DPDK 22.11 deletes the socket
    /// and its UMEM without freeing the mbufs of its fill ring (`eth_dev_close`). Every
    /// received frame and every frame weir built has a length, so a used mbuf is one
    /// the program still holds. The lcores' caches are flushed first and the free mbufs
    /// taken out and put back, so the pool's own count is unchanged.
    ///
    /// # Safety
    ///
    /// Nothing else may use the pool during the call: every lcore that allocates from it
    /// has stopped and every port that holds its mbufs is closed.
    pub unsafe fn split_in_use(&self) -> InUse {
        let mp = self.raw.as_ptr();
        // SAFETY: the caller guarantees exclusive use of the pool (no lcore is running,
        // so its cache may be flushed from here); the free objects taken out are put back
        // before returning; the callback only reads the mbufs that are not free, which
        // nobody else touches any more.
        unsafe {
            for lcore in 0..dpdk_sys::RTE_MAX_LCORE {
                let cache = dpdk_sys::rte_mempool_default_cache(mp, lcore);
                if !cache.is_null() {
                    dpdk_sys::rte_mempool_cache_flush(cache, mp);
                }
            }
            let mut free: Vec<*mut std::ffi::c_void> = Vec::with_capacity(self.available());
            loop {
                let mut obj = std::ptr::null_mut();
                if dpdk_sys::rte_mempool_get(mp, &mut obj) != 0 {
                    break;
                }
                free.push(obj);
            }
            free.sort_unstable();
            let mut job = Split {
                free: &free,
                split: InUse::default(),
            };
            dpdk_sys::rte_mempool_obj_iter(
                mp,
                Some(split_one),
                (&mut job as *mut Split<'_>).cast(),
            );
            let split = job.split;
            if !free.is_empty() {
                dpdk_sys::rte_mempool_put_bulk(mp, free.as_ptr(), free.len() as u32);
            }
            split
        }
    }

    /// Like [`Mempool::new`], then writes `stamp` into every mbuf at `at` bytes past the
    /// headroom, i.e. at `data()[at..]` of a freshly allocated mbuf (`rte_pktmbuf_reset`
    /// puts `data_off` at `RTE_PKTMBUF_HEADROOM`). DPDK never writes into the data room
    /// itself, so every mbuf allocated later still holds the stamp until its owner writes
    /// over it: a sender whose frames share one payload writes only their headers.
    /// weir-gen's ring benchmark builds its data segments this way (`apps::gen::pool`).
    pub fn new_stamped(
        eal: &Eal,
        name: &str,
        count: u32,
        cache: u32,
        data_room: u16,
        at: usize,
        stamp: &[u8],
    ) -> Result<Mempool> {
        let pool = Mempool::new(eal, name, count, cache, data_room)?;
        if at + stamp.len() > pool.data_room() {
            return Err(Error::Create {
                what: "mempool",
                name: name.to_owned(),
                errno: libc::EINVAL,
                message: strerror(libc::EINVAL),
                hint: "the stamp does not fit after the headroom: a larger data room or a \
                       shorter stamp",
            });
        }
        let mut job = Stamp {
            off: dpdk_sys::RTE_PKTMBUF_HEADROOM as usize + at,
            bytes: stamp,
        };
        // SAFETY: the pool was created just above and has not been handed out, so no mbuf
        // is in use and no other thread knows the pool: the callback's writes are
        // exclusive. `job` outlives the call, which runs the callback synchronously.
        unsafe {
            dpdk_sys::rte_mempool_obj_iter(
                pool.raw.as_ptr(),
                Some(stamp_one),
                (&mut job as *mut Stamp<'_>).cast(),
            );
        }
        Ok(pool)
    }

    /// The raw pool pointer, for calls the safe layer does not cover.
    pub fn as_ptr(&self) -> *mut dpdk_sys::rte_mempool {
        self.raw.as_ptr()
    }

    /// Mbufs currently allocated (`rte_mempool_in_use_count`). Mbufs sitting in per-lcore
    /// caches count as free. O(number of lcores).
    pub fn in_use(&self) -> usize {
        // SAFETY: the pool is valid for the life of the process.
        unsafe { dpdk_sys::rte_mempool_in_use_count(self.raw.as_ptr()) as usize }
    }

    /// Mbufs available (`rte_mempool_avail_count`).
    pub fn available(&self) -> usize {
        // SAFETY: the pool is valid for the life of the process.
        unsafe { dpdk_sys::rte_mempool_avail_count(self.raw.as_ptr()) as usize }
    }

    /// Bytes each mbuf can hold after the headroom.
    pub fn data_room(&self) -> usize {
        // SAFETY: the pool is valid for the life of the process.
        let room = unsafe { dpdk_sys::rte_pktmbuf_data_room_size(self.raw.as_ptr()) };
        usize::from(room).saturating_sub(dpdk_sys::RTE_PKTMBUF_HEADROOM as usize)
    }

    /// Bytes from an mbuf of this pool to its data after a reset: the descriptor, the
    /// private area (where `rte_pktmbuf_init` puts `buf_addr`) and the headroom
    /// (`rte_pktmbuf_reset`'s `data_off`, at most the buffer's length).
    fn data_at(&self) -> usize {
        // SAFETY: the pool is valid for the life of the process; both read its private
        // area, which rte_pktmbuf_pool_create filled.
        let (room, private) = unsafe {
            (
                dpdk_sys::rte_pktmbuf_data_room_size(self.raw.as_ptr()),
                dpdk_sys::rte_pktmbuf_priv_size(self.raw.as_ptr()),
            )
        };
        let headroom = (dpdk_sys::RTE_PKTMBUF_HEADROOM as u16).min(room);
        std::mem::size_of::<dpdk_sys::rte_mbuf>() + usize::from(private) + usize::from(headroom)
    }

    /// An empty mbuf (`data()` is empty), or `None` when the pool is exhausted.
    pub fn alloc_empty(&self) -> Option<Mbuf> {
        // SAFETY: the pool is valid; rte_pktmbuf_alloc returns an owned, reset mbuf or NULL.
        let m = unsafe { dpdk_sys::rte_pktmbuf_alloc(self.raw.as_ptr()) };
        // SAFETY: a non-NULL mbuf from the pool is exclusively ours.
        NonNull::new(m).map(|m| unsafe { Mbuf::from_raw(m) })
    }

    /// An mbuf whose data is exactly `len` bytes (contents unspecified), or `None` when the
    /// pool is exhausted or `len` exceeds [`Mempool::data_room`].
    pub fn alloc_len(&self, len: usize) -> Option<Mbuf> {
        let len16 = u16::try_from(len).ok()?;
        let mut m = self.alloc_empty()?;
        // In Rust, not through `rte_pktmbuf_append`: one FFI call less per frame built.
        m.set_fresh_len(len16).then_some(m)
    }

    /// Allocates `n` mbufs at once (`rte_pktmbuf_alloc_bulk`: all or none) and appends
    /// them to `out`; returns `false` when the pool has fewer than `n` free.
    pub fn alloc_bulk<const N: usize>(
        &self,
        out: &mut arrayvec::ArrayVec<Mbuf, N>,
        n: usize,
    ) -> bool {
        let n = n.min(out.remaining_capacity());
        let len = out.len();
        // SAFETY: Mbuf is repr(transparent) over NonNull<rte_mbuf>, i.e. one pointer, so
        // the spare capacity holds n pointer slots; DPDK writes all n or none.
        let ret = unsafe {
            let spare = out.as_mut_ptr().add(len).cast::<*mut dpdk_sys::rte_mbuf>();
            dpdk_sys::rte_pktmbuf_alloc_bulk(self.raw.as_ptr(), spare, n as u32)
        };
        if ret != 0 {
            return false;
        }
        // SAFETY: the n slots after len now hold valid, owned, non-NULL mbufs.
        unsafe { out.set_len(len + n) };
        true
    }

    /// A [`BufPool`] that stamps `port` into every mbuf it hands out (the mbuf's `port`
    /// field names the port a transmitted frame is bound for).
    pub fn for_port(self, port: u16) -> PortPool {
        PortPool { pool: self, port }
    }
}

/// The mbufs still allocated from a pool, split by [`Mempool::split_in_use`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InUse {
    /// Allocated and never filled: posted to a driver's receive ring and not handed back.
    pub untouched: usize,
    /// Holding a frame (received, or built to be sent): held by the program.
    pub used: usize,
}

/// What [`Mempool::split_in_use`] walks with: the free objects (sorted), the counts.
struct Split<'a> {
    free: &'a [*mut std::ffi::c_void],
    split: InUse,
}

/// `rte_mempool_obj_iter` callback: counts one object that is not free.
unsafe extern "C" fn split_one(
    _mp: *mut dpdk_sys::rte_mempool,
    arg: *mut std::ffi::c_void,
    obj: *mut std::ffi::c_void,
    _idx: std::os::raw::c_uint,
) {
    // SAFETY: `arg` is split_in_use's `Split`, alive for the whole iteration; every
    // object of a pktmbuf pool is an initialised rte_mbuf, and split_in_use's caller
    // guarantees no one else uses the pool.
    unsafe {
        let job = &mut *arg.cast::<Split<'_>>();
        if job.free.binary_search(&obj).is_ok() {
            return;
        }
        let m = &*obj.cast::<dpdk_sys::rte_mbuf>();
        let fresh = m.pkt_len == 0
            && m.data_len == 0
            && m.nb_segs == 1
            && m.next.is_null()
            && u32::from(m.port) == dpdk_sys::RTE_MBUF_PORT_INVALID;
        if fresh {
            job.split.untouched += 1;
        } else {
            job.split.used += 1;
        }
    }
}

/// What [`Mempool::one_stride`] checks each object against.
struct Stride {
    start: usize,
    size: usize,
    header: usize,
    end: usize,
    bad: usize,
}

/// `rte_mempool_obj_iter` callback: counts an object that is off the stride or past the
/// end.
unsafe extern "C" fn check_stride(
    _mp: *mut dpdk_sys::rte_mempool,
    arg: *mut std::ffi::c_void,
    obj: *mut std::ffi::c_void,
    _idx: std::os::raw::c_uint,
) {
    // SAFETY: `arg` is one_stride's `Stride`, alive for the whole iteration; only the
    // object's address is used.
    unsafe {
        let job = &mut *arg.cast::<Stride>();
        let at = (obj as usize).wrapping_sub(job.header);
        let off = at.wrapping_sub(job.start);
        if at < job.start || off % job.size != 0 || at + job.size > job.end {
            job.bad += 1;
        }
    }
}

/// What [`Mempool::new_stamped`] writes, and where (from `buf_addr`).
struct Stamp<'a> {
    off: usize,
    bytes: &'a [u8],
}

/// `rte_mempool_obj_iter` callback: writes the stamp into one pktmbuf.
unsafe extern "C" fn stamp_one(
    _mp: *mut dpdk_sys::rte_mempool,
    arg: *mut std::ffi::c_void,
    obj: *mut std::ffi::c_void,
    _idx: std::os::raw::c_uint,
) {
    // SAFETY: `arg` is the `Stamp` new_stamped passes, alive for the whole iteration;
    // every object of a pktmbuf pool is an initialised rte_mbuf whose buffer holds
    // `buf_len` bytes, and new_stamped checked that headroom + stamp fit in the data room
    // (`buf_len` = headroom + data room); nothing else uses the mbuf during the call.
    unsafe {
        let job = &*arg.cast::<Stamp<'_>>();
        let m = &*obj.cast::<dpdk_sys::rte_mbuf>();
        if job.off + job.bytes.len() <= usize::from(m.buf_len) {
            std::ptr::copy_nonoverlapping(
                job.bytes.as_ptr(),
                m.buf_addr.cast::<u8>().add(job.off),
                job.bytes.len(),
            );
        }
    }
}

impl BufPool for Mempool {
    type Buf = Mbuf;
    /// Mbufs from here carry no port ([`Mempool::for_port`] stamps one).
    fn alloc(&mut self, len: usize) -> Option<Mbuf> {
        self.alloc_len(len)
    }
}

/// A [`Mempool`] that marks the buffers it hands out as bound for one port
/// (see [`Mempool::for_port`]).
#[derive(Clone, Copy, Debug)]
pub struct PortPool {
    pool: Mempool,
    port: u16,
}

impl PortPool {
    /// The underlying pool.
    pub fn mempool(&self) -> Mempool {
        self.pool
    }
    /// The port stamped into each mbuf.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl BufPool for PortPool {
    type Buf = Mbuf;
    fn alloc(&mut self, len: usize) -> Option<Mbuf> {
        let mut m = self.pool.alloc_len(len)?;
        m.set_port(self.port);
        Some(m)
    }
}

/// Mbufs a [`StashPool`] takes from its pool at a time.
pub const STASH: usize = 32;

/// How many allocations ahead a [`StashPool`] prefetches an mbuf's descriptor (both lines:
/// the reset reads `next` and `tx_offload` in the second). At 100-200 cycles per frame
/// built that is 0.4-0.8 µs at 2 GHz, longer than a line takes to come from another core.
const DESC_AHEAD: usize = 8;

/// How many allocations ahead a [`StashPool`] prefetches the first two lines of an mbuf's
/// data (where the headers are written), from where a reset puts them ([`Mempool::data_at`]).
const DATA_AHEAD: usize = 4;

// A refill (when DESC_AHEAD or fewer are staged) always has room for a whole batch.
const _: () = assert!(DATA_AHEAD <= DESC_AHEAD && DESC_AHEAD < STASH);

/// A [`PortPool`] for a core's transmit buffers (ACKs, a generator's segments) that takes
/// mbufs from its pool [`STASH`] at a time and prefetches what each allocation will touch
/// a few allocations ahead: the descriptor [`DESC_AHEAD`] and the first data lines
/// [`DATA_AHEAD`] allocations before the mbuf is reset and handed out. Mbufs freed on
/// another core (the peer that read the last ACKs, or a NIC's TX completion) are a cache
/// miss per line otherwise, waited for one after another by `rte_pktmbuf_alloc` (and by
/// the reset loop of `rte_pktmbuf_alloc_bulk`). One prefetch distance per allocation
/// spreads the misses out: a batch's worth issued at once fills the core's line-fill
/// buffers, and the prefetches themselves wait. Holds at most 2 x [`STASH`] mbufs out of
/// the pool; dropping it returns them. When the pool runs short it allocates one at a time.
#[derive(Debug)]
pub struct StashPool {
    pool: PortPool,
    /// Taken from the pool, not reset yet; handed out in the order taken.
    staged: Staged,
    /// [`Mempool::data_at`] of the pool: where each mbuf's header lines are.
    data_at: usize,
}

/// Free mbufs taken out of a pool with `rte_mempool_get_bulk` and not reset yet: those in
/// `q[head..tail]`.
#[derive(Debug)]
struct Staged {
    q: [NonNull<dpdk_sys::rte_mbuf>; 2 * STASH],
    head: usize,
    tail: usize,
}

// SAFETY: the mbufs are owned exclusively by the StashPool holding them (taken out of the
// pool, not shared), like an Mbuf, which is Send.
unsafe impl Send for Staged {}

impl Staged {
    fn len(&self) -> usize {
        self.tail - self.head
    }
    /// The staged mbuf `ahead` places after the next one handed out, if there is one.
    fn ahead(&self, ahead: usize) -> Option<*const u8> {
        let i = self.head + ahead;
        (i < self.tail).then(|| self.q[i].as_ptr().cast_const().cast::<u8>())
    }
}

impl StashPool {
    /// An empty stash over `pool`.
    pub fn new(pool: PortPool) -> StashPool {
        StashPool {
            data_at: pool.pool.data_at(),
            pool,
            staged: Staged {
                q: [NonNull::dangling(); 2 * STASH],
                head: 0,
                tail: 0,
            },
        }
    }

    /// The underlying pool.
    pub fn mempool(&self) -> Mempool {
        self.pool.pool
    }

    /// Mbufs taken from the pool and not handed out yet.
    pub fn stashed(&self) -> usize {
        self.staged.len()
    }

    /// An empty mbuf: the next staged one, reset; one by one from the pool when it has
    /// fewer than [`STASH`] free.
    fn take(&mut self) -> Option<Mbuf> {
        if self.staged.len() <= DESC_AHEAD {
            self.refill();
        }
        if self.staged.len() == 0 {
            return self.pool.pool.alloc_empty();
        }
        // Each staged mbuf passes both distances once: its lines are prefetched then.
        if let Some(p) = self.staged.ahead(DESC_AHEAD) {
            prefetch_descriptor(p);
        }
        if let Some(p) = self.staged.ahead(DATA_AHEAD) {
            prefetch_data_at(p, self.data_at);
        }
        let raw = self.staged.q[self.staged.head];
        self.staged.head += 1;
        // SAFETY: a free mbuf of this pktmbuf pool, taken with rte_mempool_get_bulk and
        // owned by nobody else: resetting it is what rte_pktmbuf_alloc does after its get,
        // and then it is ours to wrap.
        let m = unsafe {
            crate::mbuf::reset_fresh(raw.as_ptr());
            Mbuf::from_raw(raw)
        };
        debug_assert_eq!(
            (m.data().as_ptr() as usize).wrapping_sub(raw.as_ptr() as usize),
            self.data_at,
            "the data lines prefetched are the ones written"
        );
        Some(m)
    }

    /// Takes the next [`STASH`] mbufs out of the pool behind those still staged (none
    /// when the pool has fewer free), and prefetches the lines of any that are already
    /// within the prefetch distances (only when the stash ran dry: at the start, or after
    /// the pool ran short).
    fn refill(&mut self) {
        let s = &mut self.staged;
        s.q.copy_within(s.head..s.tail, 0);
        s.tail -= s.head;
        s.head = 0;
        let old = s.tail;
        // SAFETY: the pool is valid; q[tail..] has room for STASH pointers (tail <=
        // DESC_AHEAD < STASH here), NonNull is one pointer, and rte_mempool_get_bulk
        // fills all STASH of them or none.
        let got = unsafe {
            dpdk_sys::rte_mempool_get_bulk(
                self.pool.pool.raw.as_ptr(),
                s.q[old..].as_mut_ptr().cast(),
                STASH as u32,
            )
        } == 0;
        if !got {
            return;
        }
        s.tail = old + STASH;
        for i in old..s.tail.min(DESC_AHEAD) {
            prefetch_descriptor(s.q[i].as_ptr().cast_const().cast());
        }
        for i in old..s.tail.min(DATA_AHEAD) {
            prefetch_data_at(s.q[i].as_ptr().cast_const().cast(), self.data_at);
        }
    }
}

/// Both lines of the `rte_mbuf` at `p`.
#[inline(always)]
fn prefetch_descriptor(p: *const u8) {
    crate::mbuf::prefetch_two_lines(p);
}

/// The first two lines of the data of the mbuf at `p`, `data_at` bytes on.
#[inline(always)]
fn prefetch_data_at(p: *const u8, data_at: usize) {
    crate::mbuf::prefetch_two_lines(p.wrapping_add(data_at));
}

impl Drop for StashPool {
    fn drop(&mut self) {
        let s = &mut self.staged;
        if s.len() == 0 {
            return;
        }
        // SAFETY: the staged mbufs were taken from this pool with rte_mempool_get_bulk
        // and never used (not reset, not handed out): they go back as they came. NonNull
        // is one pointer, so the slice is an array of object pointers.
        unsafe {
            dpdk_sys::rte_mempool_put_bulk(
                self.pool.pool.raw.as_ptr(),
                s.q[s.head..s.tail].as_ptr().cast(),
                s.len() as u32,
            );
        }
        s.head = s.tail;
    }
}

impl BufPool for StashPool {
    type Buf = Mbuf;
    fn alloc(&mut self, len: usize) -> Option<Mbuf> {
        let len16 = u16::try_from(len).ok()?;
        let mut m = self.take()?;
        if !m.set_fresh_len(len16) {
            // Too long for the data room: the mbuf goes back to the pool (dropped).
            return None;
        }
        m.set_port(self.pool.port);
        Some(m)
    }
}
