//! `SharedData` and `Mbuf::chain_shared`: frames that carry a slice of one read-only
//! mbuf by reference read back exactly the header plus that slice, hold one reference each
//! while they live, give it back when freed (the shared mbuf returns to its pool with the
//! last one), refuse ranges outside the data and references past the 16-bit count, and
//! cannot be appended into the shared bytes; `SharedData::reference` gives a read-only
//! buffer of its own over a slice.

mod common;

use dpdk::{Eal, Mbuf, Mempool, SharedData, MAX_SHARED_REFS};

#[test]
fn frames_carry_slices_of_shared_data_by_reference() {
    let eal = Eal::init(common::eal_args("shared", &["-l", "0"])).expect("EAL");
    // No per-lcore caches: in_use counts exactly what is out of each pool.
    let big = Mempool::new(&eal, "sh_big", 3, 0, 128 + 8192).expect("pool");
    let heads = Mempool::new(&eal, "sh_heads", 63, 0, dpdk::DEFAULT_DATA_ROOM).expect("pool");
    let refs = Mempool::new(&eal, "sh_refs", 63, 0, 0).expect("pool of data-less mbufs");

    let pattern: Vec<u8> = (0..6000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut m = big.alloc_empty().expect("an mbuf");
    assert!(m.extend_from_slice(&pattern));
    let shared = SharedData::new(m).expect("a plain mbuf can be shared");
    assert_eq!(shared.data(), &pattern[..]);
    assert_eq!(shared.references(), 1);

    let frame = |off: u16, len: u16| {
        let mut h = heads.alloc_empty().expect("a head");
        assert!(h.extend_from_slice(b"header-66"));
        assert!(h.chain_shared(&refs, &shared, off, len), "{off}+{len}");
        h
    };
    let cases = [
        (0u16, 1448u16),
        (1, 1448),
        (4099, 1448),
        (6000 - 9, 9),
        (17, 0),
    ];
    let frames: Vec<Mbuf> = cases.iter().map(|&(o, l)| frame(o, l)).collect();
    for (f, &(o, l)) in frames.iter().zip(&cases) {
        let mut want = b"header-66".to_vec();
        want.extend_from_slice(&pattern[usize::from(o)..usize::from(o + l)]);
        assert_eq!(f.to_vec(), want, "off {o} len {l}");
        assert_eq!(f.nb_segs(), 2);
        assert_eq!(f.pkt_len(), 9 + usize::from(l));
        assert_eq!(
            f.data(),
            b"header-66",
            "the head's own data is the first segment"
        );
    }
    assert_eq!(shared.references(), 1 + cases.len() as u16);
    assert_eq!(refs.in_use(), cases.len());

    // Ranges outside the data change nothing.
    let mut h = heads.alloc_empty().expect("a head");
    assert!(!h.chain_shared(&refs, &shared, 6000, 1));
    assert!(!h.chain_shared(&refs, &shared, 5000, 1001));
    assert_eq!(h.nb_segs(), 1);
    assert_eq!(shared.references(), 1 + cases.len() as u16);

    // The referring segment has no tailroom: appending cannot write into the shared bytes.
    let mut f = frame(100, 100);
    assert!(f.append(1).is_none());
    assert!(f.trim(10), "trimming only shortens the view");
    assert_eq!(f.pkt_len(), 9 + 90);
    drop(f);
    assert_eq!(
        shared.data(),
        &pattern[..],
        "the shared bytes are unchanged"
    );

    // At the reference limit chaining is refused, not wrapped around.
    let before = shared.references();
    // SAFETY: raising and restoring the count of a valid mbuf; no reference is created
    // or dropped in between.
    unsafe { dpdk::sys::rte_mbuf_refcnt_set(shared.as_ptr().cast_mut(), MAX_SHARED_REFS) };
    assert!(!h.chain_shared(&refs, &shared, 0, 10));
    // SAFETY: as above.
    unsafe { dpdk::sys::rte_mbuf_refcnt_set(shared.as_ptr().cast_mut(), before) };
    assert!(h.chain_shared(&refs, &shared, 0, 10));
    drop(h);

    // A reference of its own: the bytes read back, it holds one reference, and nothing
    // can write through it.
    let before = shared.references();
    let mut r = shared.reference(&refs, 100, 50).expect("a reference");
    assert_eq!(r.data(), &pattern[100..150]);
    assert_eq!(shared.references(), before + 1);
    assert!(
        r.data_mut().is_empty(),
        "an indirect mbuf is never writable"
    );
    assert!(r.append(1).is_none());
    assert!(
        shared.reference(&refs, 5990, 11).is_none(),
        "outside the data"
    );
    drop(r);
    assert_eq!(shared.references(), before);

    // Freeing the frames gives every reference back; the shared mbuf returns to its pool
    // with the last holder, whichever it is.
    drop(frames);
    assert_eq!(shared.references(), 1);
    assert_eq!(refs.in_use(), 0);
    let last = frame(0, 10);
    assert_eq!(big.in_use(), 1);
    drop(shared);
    assert_eq!(big.in_use(), 1, "still held by the frame");
    assert_eq!(last.to_vec()[9..], pattern[..10]);
    drop(last);
    assert_eq!(big.in_use(), 0);
    assert_eq!(heads.in_use(), 0);
    assert_eq!(refs.in_use(), 0);

    // Only plain, unshared, one-segment mbufs can be frozen.
    let two = heads.alloc_empty().expect("an mbuf");
    let mut chained = heads.alloc_empty().expect("an mbuf");
    let tail = SharedData::new(big.alloc_empty().expect("an mbuf")).expect("plain");
    assert!(chained.chain_shared(&refs, &tail, 0, 0));
    assert!(SharedData::new(chained).is_none());
    drop(two);
}
