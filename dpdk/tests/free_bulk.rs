//! `Mbuf`'s bulk frees (`PacketBuf::free_bulk`, `Mbuf::free_burst`): whatever the mix of
//! plain mbufs, chains, clones and shared mbufs, and across pools, every mbuf goes back
//! exactly once and comes out of its pool again as a pool keeps them: `refcnt` 1, one
//! segment, no `next`.

mod common;

use std::ptr::NonNull;

use dpdk::{Eal, Mbuf, Mempool};
use stack::buf::PacketBuf;

const MBUFS: u32 = 64;

/// Takes every mbuf out of `pool` as it lies there (`rte_mempool_get_bulk`: no reset, as
/// `rte_pktmbuf_alloc` would do) and checks each is in the state a free mbuf must be in.
fn check_all_free_and_sane(pool: &Mempool, name: &str) {
    assert_eq!(pool.in_use(), 0, "{name}: every mbuf back");
    let mut raw = [std::ptr::null_mut::<std::ffi::c_void>(); MBUFS as usize];
    // SAFETY: the pool is valid and `raw` has room for MBUFS pointers; the call fills all
    // of them or none.
    let rc = unsafe { dpdk_sys::rte_mempool_get_bulk(pool.as_ptr(), raw.as_mut_ptr(), MBUFS) };
    assert_eq!(rc, 0, "{name}: all {MBUFS} mbufs are in the pool");
    for (i, p) in raw.iter().enumerate() {
        // SAFETY: a free mbuf of this pool, just taken out of it; only read.
        let (refcnt, nb_segs, next) = unsafe {
            let r = &*p.cast::<dpdk_sys::rte_mbuf>();
            (r.refcnt, r.nb_segs, r.next)
        };
        assert_eq!(refcnt, 1, "{name}, mbuf {i}: refcnt");
        assert_eq!(nb_segs, 1, "{name}, mbuf {i}: nb_segs");
        assert!(next.is_null(), "{name}, mbuf {i}: next");
    }
    let distinct: std::collections::HashSet<usize> = raw.iter().map(|p| *p as usize).collect();
    assert_eq!(distinct.len(), MBUFS as usize, "{name}: none twice");
    // SAFETY: the same MBUFS objects, unchanged, go back to the pool they came from.
    unsafe { dpdk_sys::rte_mempool_put_bulk(pool.as_ptr(), raw.as_ptr(), MBUFS) };
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn bulk_frees_return_plain_chained_and_shared_mbufs_exactly_once() {
    let eal = Eal::init(common::eal_args("freebulk", &["-l", "0"])).expect("EAL");
    // No per-lcore caches: in_use counts exactly what is out of each pool.
    let a = Mempool::new(&eal, "free_a", MBUFS, 0, dpdk::DEFAULT_DATA_ROOM).expect("pool a");
    let b = Mempool::new(&eal, "free_b", MBUFS, 0, dpdk::DEFAULT_DATA_ROOM).expect("pool b");
    let len = |p: &Mempool| p.alloc_len(100).expect("an mbuf");

    // Plain mbufs, the pool changing twice within the batch.
    let mut batch: Vec<Mbuf> = vec![len(&a), len(&a), len(&b), len(&a)];

    // A two-segment chain (head from a, tail from b): nb_segs 2.
    let head = len(&a);
    let tail = len(&b);
    // SAFETY: both are valid one-segment mbufs we own; rte_pktmbuf_chain links `tail`
    // after `head` (the chain then owns it), so `tail` is forgotten, not freed.
    let rc = unsafe { dpdk_sys::rte_pktmbuf_chain(head.as_ptr(), tail.into_raw().as_ptr()) };
    assert_eq!(rc, 0, "chained");
    assert_eq!(head.nb_segs(), 2);
    batch.push(head);

    // An indirect clone (from b) of a plain mbuf of a: freeing the clone detaches it and
    // drops the original's reference; the original is in the batch too.
    let orig = len(&a);
    // SAFETY: `orig` is valid; the clone is a new mbuf of pool b that we own.
    let clone = unsafe { dpdk_sys::rte_pktmbuf_clone(orig.as_ptr(), b.as_ptr()) };
    let clone = NonNull::new(clone).expect("clone");
    // SAFETY: a fresh clone, exclusively ours.
    batch.push(unsafe { Mbuf::from_raw(clone) });
    batch.push(orig);

    // A shared mbuf (refcnt 2): the first free only drops a reference.
    let shared = len(&b);
    // SAFETY: `shared` is valid; a second reference is taken, owned by `again` below.
    let again = unsafe {
        dpdk_sys::rte_mbuf_refcnt_update(shared.as_ptr(), 1);
        Mbuf::from_raw(NonNull::new(shared.as_ptr()).expect("non-null"))
    };
    batch.push(shared);
    batch.push(len(&b));

    let out_a = a.in_use();
    let out_b = b.in_use();
    assert_eq!(
        (out_a, out_b),
        (5, 5),
        "what the batch holds (the chain's tail and the clone in b)"
    );
    Mbuf::free_bulk(batch.into_iter());
    assert_eq!(a.in_use(), 0, "pool a: everything back");
    assert_eq!(
        b.in_use(),
        1,
        "pool b: only the shared mbuf, still referenced"
    );
    // SAFETY: `again` holds the last reference.
    assert_eq!(unsafe { dpdk_sys::rte_mbuf_refcnt_read(again.as_ptr()) }, 1);

    // The burst form, with the last reference of the shared mbuf and plain ones.
    let mut burst = arrayvec::ArrayVec::<Mbuf, 8>::new();
    burst.push(len(&b));
    burst.push(again);
    burst.push(len(&a));
    Mbuf::free_burst(&mut burst);
    assert!(burst.is_empty());

    check_all_free_and_sane(&a, "pool a");
    check_all_free_and_sane(&b, "pool b");
}
