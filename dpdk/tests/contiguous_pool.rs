//! The pool layout net_af_xdp needs and the exit accounting of mbufs a driver keeps.
//!
//! DPDK 22.11's net_af_xdp registers as its UMEM the pool's first memory chunk taken as
//! `populated_size` objects at one stride (`xdp_umem_configure`). Without hugepages,
//! `rte_pktmbuf_pool_create` keeps each object within one 4 KiB page, so many mbufs lie
//! past that range (the kernel refuses them: AF_XDP's stall). `Mempool::new_contiguous`
//! puts every mbuf inside it. `Mempool::split_in_use` tells mbufs never filled since
//! their allocation (what a driver posted to a receive ring) from mbufs holding a frame,
//! and leaves the pool's counts as they were.

mod common;

use dpdk::{Eal, InUse, Mempool};

const MBUFS: u32 = 4095;
const ROOM: u16 = 2048 + 128;

/// Objects of `pool` that lie outside the range net_af_xdp 22.11 registers: from the
/// first chunk's start, `populated_size` objects of `header + elt + trailer` bytes.
fn past_the_umem(pool: &Mempool) -> usize {
    struct Range {
        start: usize,
        end: usize,
        header: usize,
        size: usize,
        past: usize,
    }
    unsafe extern "C" fn one(
        _mp: *mut dpdk::sys::rte_mempool,
        arg: *mut std::ffi::c_void,
        obj: *mut std::ffi::c_void,
        _i: std::os::raw::c_uint,
    ) {
        // SAFETY: arg is the Range below, alive for the iteration; only addresses are read.
        let r = unsafe { &mut *arg.cast::<Range>() };
        let at = obj as usize - r.header;
        if at < r.start || at + r.size > r.end {
            r.past += 1;
        }
    }
    // SAFETY: the pool is valid and populated, and no other thread uses it.
    unsafe {
        let mp = &*pool.as_ptr();
        let first = mp.mem_list.stqh_first;
        let size = (mp.header_size + mp.elt_size + mp.trailer_size) as usize;
        let start = (*first).addr as usize;
        let mut r = Range {
            start,
            end: start + mp.populated_size as usize * size,
            header: mp.header_size as usize,
            size,
            past: 0,
        };
        dpdk::sys::rte_mempool_obj_iter(pool.as_ptr(), Some(one), (&mut r as *mut Range).cast());
        r.past
    }
}

#[test]
fn contiguous_pool_lies_in_the_umem_and_the_split_counts_what_is_held() {
    let eal = Eal::init(common::eal_args("contig", &["-l", "0"])).expect("EAL");

    // The cause: the default layout leaves mbufs past the UMEM's end.
    let paged = Mempool::new(&eal, "contig_paged", MBUFS, 0, ROOM).expect("pool");
    let past = past_the_umem(&paged);
    println!("default layout: {past} of {MBUFS} mbufs past net_af_xdp's UMEM");
    assert!(
        past > 0,
        "without hugepages each mbuf keeps to one page, so some lie past the range"
    );

    let pool = Mempool::new_contiguous(&eal, "contig", MBUFS, 0, ROOM).expect("pool");
    assert_eq!(past_the_umem(&pool), 0, "every mbuf inside the UMEM");
    assert_eq!(pool.available(), MBUFS as usize);

    // The split: 5 allocated and never filled, 3 holding a frame.
    let untouched: Vec<_> = (0..5).map(|_| pool.alloc_empty().expect("mbuf")).collect();
    let used: Vec<_> = (0..3).map(|_| pool.alloc_len(60).expect("mbuf")).collect();
    // SAFETY: this thread is the pool's only user.
    let split = unsafe { pool.split_in_use() };
    assert_eq!(
        split,
        InUse {
            untouched: 5,
            used: 3
        }
    );
    assert_eq!(pool.in_use(), 8, "the split puts back what it took out");
    drop(untouched);
    drop(used);
    // SAFETY: as above.
    assert_eq!(unsafe { pool.split_in_use() }, InUse::default());
    assert_eq!(pool.available(), MBUFS as usize);
}
