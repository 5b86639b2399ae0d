//! weir-gen's write buffers refer to the payload pattern by reference count, which is 16
//! bits in an mbuf: one copy of the pattern carries at most `dpdk::MAX_SHARED_REFS`
//! references. With the copies [`pattern_copies`] asks for, a generator holds every buffer
//! its flows' send buffers need at once (65,536 flows hold more than one copy allows);
//! with one copy the source runs dry at the limit, and gives buffers again once
//! references are dropped.

use apps::gen::engine::PayloadSource;
use apps::gen::payload::Payload;
use apps::gen::pool::{pattern_copies, share_copies, GenPool};
use dpdk::{Eal, Mempool, MAX_SHARED_REFS};

const MSS: usize = 1448;

#[test]
fn pattern_copies_hold_more_references_than_one_mbuf_counts() {
    let args = vec![
        "gen-pattern-copies".to_string(),
        "--no-pci".into(),
        "--no-huge".into(),
        "-m".into(),
        "512".into(),
        format!("--file-prefix=weir-gen-copies-{}", std::process::id()),
        "--log-level=*:warning".into(),
        "-l".into(),
        "0".into(),
    ];
    let eal = Eal::init(args).expect("EAL");
    let limit = usize::from(MAX_SHARED_REFS - 1);
    let want = 2 * limit + 10;
    let pattern = Payload::with_period(MSS);
    let bytes = pattern.as_bytes();
    let copies = pattern_copies(want as u64);
    assert_eq!(copies, 3);
    let plain = Mempool::new(&eal, "pc_plain", 63, 0, dpdk::DEFAULT_DATA_ROOM).expect("pool");
    let room = (bytes.len() + 128) as u16;
    let pats = Mempool::new(&eal, "pc_pattern", 4, 0, room).expect("pool");
    let refs = Mempool::new(&eal, "pc_refs", want as u32 + 64, 0, 0).expect("pool");

    // One copy: the source gives exactly the copy's limit, then none.
    let one = share_copies(&pats, bytes, 1).expect("one copy");
    let mut pool = GenPool::plain(plain.for_port(0)).with_pattern(one, refs, MSS, false);
    let mut held = Vec::with_capacity(want);
    while let Some(s) = pool.slice(0, MSS as u16) {
        held.push(s);
        assert!(held.len() <= limit, "past one copy's limit");
    }
    assert_eq!(held.len(), limit, "one copy carries {limit} references");
    // Dropping references makes room again.
    held.truncate(limit - 5);
    for _ in 0..5 {
        held.push(pool.slice(0, MSS as u16).expect("room after a drop"));
    }
    assert!(pool.slice(0, MSS as u16).is_none());
    drop(held);
    drop(pool);

    // The copies asked for: every reference wanted, each buffer the pattern's bytes.
    let many = share_copies(&pats, bytes, copies).expect("copies");
    let mut pool = GenPool::plain(plain.for_port(0)).with_pattern(many, refs, MSS, false);
    let mut held = Vec::with_capacity(want);
    for k in 0..want {
        let start = k % MSS;
        let len = (MSS - start).min(100) as u16;
        let s = pool
            .slice(start, len)
            .unwrap_or_else(|| panic!("reference {k} of {want}"));
        assert_eq!(
            s.bytes(),
            pattern.bytes_from(start, usize::from(len)),
            "reference {k}"
        );
        held.push(s);
    }
    drop(held);
    drop(pool);
    assert_eq!(refs.in_use(), 0, "every reference went back");
    assert_eq!(
        pats.in_use(),
        0,
        "every copy went back with its last reference"
    );
}
