//! `StashPool` hands out every mbuf of its pool exactly once (a batch ahead while the pool
//! has a batch to spare, one at a time after that), each reset, sized and stamped with the
//! port, and gives back what it holds when dropped: the pool's in-use count returns to 0.

mod common;

use std::collections::HashSet;

use dpdk::{Eal, Mbuf, Mempool, StashPool, STASH};
use stack::buf::{BufPool, PacketBuf};

const MBUFS: u32 = 100;

#[test]
fn stash_pool_hands_out_each_mbuf_once_and_returns_what_it_holds() {
    let eal = Eal::init(common::eal_args("stash", &["-l", "0"])).expect("EAL");
    // No per-lcore cache, so in_use counts exactly what is out of the pool.
    let pool = Mempool::new(&eal, "stash_test", MBUFS, 0, dpdk::DEFAULT_DATA_ROOM).expect("pool");
    assert_eq!(pool.in_use(), 0);

    // 1. Drain the pool through the stash.
    let mut stash = StashPool::new(pool.for_port(7));
    let mut out: Vec<Mbuf> = Vec::new();
    while let Some(mut m) = stash.alloc(60) {
        assert_eq!(m.data().len(), 60, "sized");
        assert_eq!(m.port(), Some(7), "stamped with the port");
        assert!(m.is_contiguous());
        m.data_mut().fill(0xab);
        out.push(m);
        assert!(
            out.len() <= MBUFS as usize,
            "more mbufs than the pool holds"
        );
    }
    assert_eq!(out.len(), MBUFS as usize, "every mbuf handed out");
    let distinct: HashSet<usize> = out.iter().map(|m| m.as_ptr() as usize).collect();
    assert_eq!(distinct.len(), out.len(), "each once");
    assert_eq!(stash.stashed(), 0);
    assert_eq!(pool.in_use(), MBUFS as usize);

    // 2. Freed mbufs come back through the stash, reset (empty before sizing).
    out.truncate(10);
    assert_eq!(pool.in_use(), 10);
    let m = stash.alloc(1500).expect("a freed mbuf");
    assert_eq!(m.data().len(), 1500);
    drop(m);
    // Too long for the data room: nothing handed out, nothing lost.
    assert!(stash
        .alloc(usize::from(dpdk::DEFAULT_DATA_ROOM) + 1)
        .is_none());
    assert_eq!(pool.in_use(), 10 + stash.stashed());
    assert!(stash.stashed() <= 2 * STASH);

    // 3. Dropping the stash returns what it holds, reset or only staged.
    drop(stash);
    drop(out);
    assert_eq!(pool.in_use(), 0, "nothing leaked");
    let mut stash = StashPool::new(pool.for_port(7));
    let m = stash.alloc(60).expect("one");
    assert_eq!(pool.in_use(), 1 + stash.stashed());
    assert!(stash.stashed() >= STASH - 1, "a batch taken ahead");
    drop(m);
    drop(stash);
    assert_eq!(pool.in_use(), 0, "staged mbufs went back");
}
