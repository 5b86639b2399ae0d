//! Heap held per connection, counted by a global allocator that tracks live bytes: an
//! idle established connection holds nothing but its table slot, and the queues' storage
//! is lent while data waits.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

use stack::ack::AckPolicy;
use stack::flow::FlowKey;
use stack::mem::VecPool;
use stack::seq::SeqNumber;
use stack::tcp::{ConnId, TcpConfig};
use testkit::tcp::*;

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Relaxed);
        // SAFETY: `p` came from `alloc` with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// The count is process-wide: the tests take turns.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Live heap bytes now.
fn live() -> isize {
    LIVE.load(Relaxed)
}

/// One connection as the peer sees it: the flow, the handle, the peer's next sequence
/// number and what it acknowledges.
type Peer = (FlowKey, ConnId, SeqNumber, SeqNumber);

/// `n` connections established on a stack sized for them.
fn open(f: &mut Fixture, n: usize) -> Vec<Peer> {
    (0..n)
        .map(|i| {
            f.flow = FlowKey::v4(PEER_IP4, 10_000 + i as u16, OUR_IP4, PORT);
            f.snd_nxt = SeqNumber(1_000_000);
            f.id = None;
            f.handshake(SynOpts::all());
            (f.flow, f.id(), f.snd_nxt, f.our_nxt)
        })
        .collect()
}

/// Each connection in turn receives `segs` segments of 1,000 bytes (too long to be
/// coalesced, so each takes a receive-queue slice) and the application reads them; the
/// ACKs owed are built. Returns the bytes read.
fn round(f: &mut Fixture, conns: &mut [Peer], segs: u32) -> usize {
    let mut read = 0;
    for c in conns.iter_mut() {
        (f.flow, f.id, f.snd_nxt, f.our_nxt) = (c.0, Some(c.1), c.2, c.3);
        for _ in 0..segs {
            f.data(1000, 1000, false);
        }
        read += f.read_all().len();
        let _ = f.tx();
        c.2 = f.snd_nxt;
    }
    let _ = f.tcp.events().count();
    read
}

const N: usize = 2048;

/// A million connections per core need connections that hold nothing while idle: the
/// whole stack, its connection table sized for `N` included, takes at most 4 KiB of heap
/// per established connection, and a handshake allocates nothing in the stack (the receive and ACK
/// queues borrow their storage from the core only while they hold something,
/// `stack::spare`).
#[test]
fn an_idle_established_connection_takes_at_most_4_kib() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let before = live();
    let cfg = TcpConfig {
        max_conns: N,
        max_half_open: 64,
        ..TcpConfig::default()
    };
    let mut f = Fixture::with_cfg(cfg, AckPolicy::linux());
    f.pool = VecPool::new(64, 2048);
    let sized = live();
    let conns = open(&mut f, N);
    let established = live();
    let per_conn = (established - before) / N as isize;
    println!(
        "stack sized for {N} connections: {} B each before any opens, {} B each more once established: {per_conn} B per connection",
        (sized - before) / N as isize,
        (established - sized) / N as isize
    );
    assert_eq!(f.tcp.conn_count(), conns.len());
    // The handshakes' frames come from the fixture's pool, which keeps up to 64 freed
    // buffers of 2 KiB for reuse: that is all the heap they may leave behind.
    assert!(
        established - sized <= 64 * 2048,
        "the handshakes left {} B on the heap",
        established - sized
    );
    assert!(per_conn <= 4096, "{per_conn} B per idle connection");
}

/// Storage taken while data waits is given back once it is read: after every connection
/// received 20 segments and read them, the heap is back to the idle figure plus at most
/// the smallest storage of each queue per connection (the spare store's bound aside),
/// and a second round allocates no queue storage at all (the core lends what the first
/// round gave back).
#[test]
fn queue_storage_is_lent_while_data_waits_and_reused() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let cfg = TcpConfig {
        max_conns: N,
        max_half_open: 64,
        ..TcpConfig::default()
    };
    let spare_bound = 2 * cfg.queue_spare_bytes as isize;
    let mut f = Fixture::with_cfg(cfg, AckPolicy::every(1));
    f.pool = VecPool::new(256, 2048);
    let mut conns = open(&mut f, N);
    let idle = live();
    assert_eq!(round(&mut f, &mut conns, 20), N * 20 * 1000);
    let after_one = live();
    let first = f.tcp.queue_spare();
    assert_eq!(round(&mut f, &mut conns, 20), N * 20 * 1000);
    let second = f.tcp.queue_spare();
    let after_two = live();
    println!(
        "after one round: {} B per connection above idle; storages allocated: receive queues {}, ACK queues {}; the second round allocated {} and {}",
        (after_one - idle) / N as isize,
        first.0.allocs,
        first.1.allocs,
        second.0.allocs - first.0.allocs,
        second.1.allocs - first.1.allocs
    );
    // A storage of the smallest class (4 entries) per queue stays with a connection that
    // used it: 4 slices of 56 bytes and 4 snapshots of at most 48 bytes.
    let kept = (4 * 56 + 4 * 48) * N as isize;
    assert!(
        after_one - idle <= kept + spare_bound,
        "{} B above idle after reading everything",
        after_one - idle
    );
    assert_eq!(
        second.0.allocs, first.0.allocs,
        "receive-queue storage reused"
    );
    assert_eq!(second.1.allocs, first.1.allocs, "ACK-queue storage reused");
    assert_eq!(
        after_two, after_one,
        "the second round left the heap as it found it"
    );
}
