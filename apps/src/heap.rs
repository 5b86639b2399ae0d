//! Heap bytes held per thread: a global allocator that forwards to the system's and counts
//! live bytes on the thread that allocates (and the thread that frees), so a benchmark
//! with two lcores in one process can say what one of them holds.
//!
//! A binary opts in with `#[global_allocator] static A: apps::heap::Counting =
//! apps::heap::Counting;`; without it [`thread_live`] says `None`. A block freed on
//! another thread than the one that allocated it moves bytes between the two counts; the
//! benchmarks that read them keep each stack's memory on its own lcore.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

static INSTALLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn add(n: isize) {
    // `try_with`: nothing to count once the thread's storage is gone (it has no
    // destructor, so this is only a guard).
    let _ = LIVE.try_with(|c| c.set(c.get() + n));
}

/// The counting allocator. See the module documentation.
#[derive(Debug)]
pub struct Counting;

// SAFETY: every call is forwarded unchanged to the system allocator; only the byte count
// of the calling thread changes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        INSTALLED.store(true, Ordering::Relaxed);
        add(l.size() as isize);
        // SAFETY: the caller keeps `GlobalAlloc::alloc`'s contract, which is the system's.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        INSTALLED.store(true, Ordering::Relaxed);
        add(l.size() as isize);
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        add(-(l.size() as isize));
        // SAFETY: `p` was allocated by this allocator (hence the system's) with `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        add(new as isize - l.size() as isize);
        // SAFETY: `p` was allocated by the system allocator with `l`; the caller keeps
        // `realloc`'s contract for `new`.
        unsafe { System.realloc(p, l, new) }
    }
}

/// Heap bytes the calling thread allocated and has not freed (less what it freed of
/// other threads' blocks), or `None` if the binary does not use [`Counting`].
pub fn thread_live() -> Option<isize> {
    INSTALLED
        .load(Ordering::Relaxed)
        .then(|| LIVE.try_with(Cell::get).unwrap_or(0))
}

/// The process's resident memory in bytes (`/proc/self/statm`), if it can be read.
pub fn resident_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
