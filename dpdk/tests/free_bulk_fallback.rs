//! `PacketBuf::free_bulk` for `Mbuf` puts plain mbufs (direct, one segment, `refcnt` 1)
//! back into their pool itself and hands everything else to `rte_pktmbuf_free_bulk`. A
//! batch longer than either of its arrays (64), pools changing within runs of plain
//! mbufs, and every kind of mbuf that must not be put back as it is (an indirect clone,
//! a shared mbuf, one with an external buffer, a chain): each is released exactly as
//! DPDK releases it (a reference dropped, a clone detached, the external buffer's free
//! callback run once), nothing still referenced goes back, and every pool ends full of
//! mbufs in the free state (`refcnt` 1, one segment, no `next`).

mod common;

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use dpdk::{Eal, Mbuf, Mempool};
use stack::buf::PacketBuf;

const MBUFS: u32 = 512;

/// Times the external buffers' free callback ran.
static EXT_FREED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn ext_free(_addr: *mut c_void, _opaque: *mut c_void) {
    EXT_FREED.fetch_add(1, Ordering::Relaxed);
}

/// Takes every mbuf out of `pool` as it lies there (no reset) and checks each is in a
/// pool's free state and none is there twice, then puts them back.
fn check_all_free_and_sane(pool: &Mempool, name: &str) {
    assert_eq!(pool.in_use(), 0, "{name}: every mbuf back");
    let mut raw = vec![std::ptr::null_mut::<c_void>(); MBUFS as usize];
    // SAFETY: the pool is valid and `raw` has room for MBUFS pointers; the call fills all
    // of them or none.
    let rc = unsafe { dpdk_sys::rte_mempool_get_bulk(pool.as_ptr(), raw.as_mut_ptr(), MBUFS) };
    assert_eq!(rc, 0, "{name}: all {MBUFS} mbufs are in the pool");
    for (i, p) in raw.iter().enumerate() {
        // SAFETY: a free mbuf of this pool, just taken out of it; only read.
        let (refcnt, nb_segs, next, flags) = unsafe {
            let r = &*p.cast::<dpdk_sys::rte_mbuf>();
            (r.refcnt, r.nb_segs, r.next, r.ol_flags)
        };
        assert_eq!(refcnt, 1, "{name}, mbuf {i}: refcnt");
        assert_eq!(nb_segs, 1, "{name}, mbuf {i}: nb_segs");
        assert!(next.is_null(), "{name}, mbuf {i}: next");
        let foreign = dpdk_sys::RTE_MBUF_F_INDIRECT | dpdk_sys::RTE_MBUF_F_EXTERNAL;
        assert_eq!(flags & foreign, 0, "{name}, mbuf {i}: detached");
    }
    let distinct: std::collections::HashSet<usize> = raw.iter().map(|p| *p as usize).collect();
    assert_eq!(distinct.len(), MBUFS as usize, "{name}: none twice");
    // SAFETY: the same MBUFS objects, unchanged, go back to the pool they came from.
    unsafe { dpdk_sys::rte_mempool_put_bulk(pool.as_ptr(), raw.as_ptr(), MBUFS) };
    assert_eq!(pool.in_use(), 0);
}

/// A second owner of `m`'s buffer: its reference count raised by one.
fn share(m: &Mbuf) -> Mbuf {
    // SAFETY: `m` is valid; the extra reference is owned by the returned Mbuf, which
    // frees it (drops the count) when it goes.
    unsafe {
        dpdk_sys::rte_mbuf_refcnt_update(m.as_ptr(), 1);
        Mbuf::from_raw(NonNull::new(m.as_ptr()).expect("non-null"))
    }
}

/// An indirect mbuf of `pool` attached to `orig`'s data (one more reference to `orig`).
fn clone_of(orig: &Mbuf, pool: &Mempool) -> Mbuf {
    // SAFETY: `orig` is valid; the clone is a new mbuf that we own.
    let c = unsafe { dpdk_sys::rte_pktmbuf_clone(orig.as_ptr(), pool.as_ptr()) };
    // SAFETY: a fresh clone, exclusively ours.
    unsafe { Mbuf::from_raw(NonNull::new(c).expect("clone")) }
}

/// An mbuf of `pool` attached to an external buffer carved from `mem` (the buffer's
/// shared info at its end): freeing it runs [`ext_free`] once.
fn external(pool: &Mempool, mem: &mut [u8]) -> Mbuf {
    let m = pool.alloc_empty().expect("an mbuf");
    let mut len = mem.len() as u16;
    // SAFETY: `mem` outlives every mbuf attached to it (the test keeps it until the end);
    // the helper puts the shared info in its last bytes and shortens `len` to the rest;
    // the mbuf is fresh and direct, as attaching requires, and owned by the returned Mbuf.
    unsafe {
        let addr = mem.as_mut_ptr().cast::<c_void>();
        let shinfo = dpdk_sys::rte_pktmbuf_ext_shinfo_init_helper(
            addr,
            &mut len,
            Some(ext_free),
            std::ptr::null_mut(),
        );
        assert!(!shinfo.is_null(), "room for the shared info");
        dpdk_sys::rte_pktmbuf_attach_extbuf(m.as_ptr(), addr, u64::MAX, len, shinfo);
    }
    assert_ne!(m.ol_flags() & dpdk_sys::RTE_MBUF_F_EXTERNAL, 0);
    m
}

#[test]
fn plain_mbufs_go_back_directly_and_the_rest_through_dpdk() {
    let eal = Eal::init(common::eal_args("freefallback", &["-l", "0"])).expect("EAL");
    // No per-lcore caches: in_use counts exactly what is out of each pool.
    let a = Mempool::new(&eal, "fb_a", MBUFS, 0, dpdk::DEFAULT_DATA_ROOM).expect("pool a");
    let b = Mempool::new(&eal, "fb_b", MBUFS, 0, dpdk::DEFAULT_DATA_ROOM).expect("pool b");
    let len = |p: &Mempool| p.alloc_len(100).expect("an mbuf");
    let mut ext_mem = vec![[0u8; 256]; 3];

    let mut batch: Vec<Mbuf> = Vec::new();
    // What the batch's mbufs still share with holders outside it.
    let mut held: Vec<Mbuf> = Vec::new();
    // 70 plain mbufs of a (past the 64 a put holds), then runs of 3 alternating pools.
    batch.extend((0..70).map(|_| len(&a)));
    for i in 0..30 {
        batch.push(len(if i / 3 % 2 == 0 { &a } else { &b }));
    }
    // Amid plain ones: a clone whose original stays held, a shared mbuf (refcnt 2) whose
    // other reference stays held, a mbuf with an external buffer, a two-segment chain.
    let orig = len(&a);
    batch.push(clone_of(&orig, &b));
    held.push(orig);
    batch.push(len(&a));
    let shared = len(&b);
    held.push(share(&shared));
    batch.push(shared);
    batch.push(len(&b));
    for mem in ext_mem.iter_mut() {
        batch.push(external(&a, mem));
    }
    let head = len(&a);
    let tail = len(&b);
    // SAFETY: both are valid one-segment mbufs we own; rte_pktmbuf_chain links `tail`
    // after `head` (the chain then owns it), so `tail` is forgotten, not freed.
    let rc = unsafe { dpdk_sys::rte_pktmbuf_chain(head.as_ptr(), tail.into_raw().as_ptr()) };
    assert_eq!(rc, 0, "chained");
    batch.push(head);
    // 70 shared mbufs in a row (past the 64 the other array holds), their second
    // references held.
    for _ in 0..70 {
        let m = len(&b);
        held.push(share(&m));
        batch.push(m);
    }
    batch.extend((0..5).map(|_| len(&b)));

    let held_a = 1; // the clone's original
    let held_b = 71; // the shared mbufs
    assert_eq!(
        (a.in_use(), b.in_use()),
        (70 + 15 + 1 + 3 + 1 + held_a, 15 + 1 + 1 + 1 + held_b + 5),
        "what the batch and the holders have"
    );
    Mbuf::free_bulk(batch.into_iter());
    assert_eq!(
        a.in_use(),
        held_a,
        "pool a: all back but the clone's original"
    );
    assert_eq!(b.in_use(), held_b, "pool b: all back but the shared mbufs");
    assert_eq!(
        EXT_FREED.load(Ordering::Relaxed),
        3,
        "each external buffer freed once"
    );
    for (i, m) in held.iter().enumerate() {
        // SAFETY: a valid mbuf we hold; an atomic read.
        let refs = unsafe { dpdk_sys::rte_mbuf_refcnt_read(m.as_ptr()) };
        assert_eq!(
            refs, 1,
            "held mbuf {i}: only the holder's reference is left"
        );
        assert_eq!(m.len(), 100, "held mbuf {i}: untouched");
    }

    // The holders' references, the last ones, go the direct way.
    Mbuf::free_bulk(held.into_iter());
    check_all_free_and_sane(&a, "pool a");
    check_all_free_and_sane(&b, "pool b");
    drop(ext_mem);
}
