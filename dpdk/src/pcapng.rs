//! Packet capture to pcapng files with DPDK's `librte_pcapng`.
//!
//! The library splits capture in two, which is what lets a poll-mode core capture without
//! waiting for a disk:
//! - [`copy`] (`rte_pcapng_copy`), on the core that owns the packet: copies the first
//!   `snaplen` bytes into an mbuf from a dedicated capture pool and wraps them in an
//!   Enhanced Packet Block with the port, queue, direction and a TSC timestamp that the
//!   is written in nanoseconds (the file's interfaces say `if_tsresol` = 9);
//! - [`PcapngWriter::write`] (`rte_pcapng_write_packets`), on any thread: appends copies
//!   to the file with one `writev`.
//!
//! A [`PcapngWriter`] records one Interface Description Block per Ethernet port that
//! exists when it is created, so create it after the ports are probed and configured.
//! Only mbufs made by [`copy`] may be written: the library warns that original mbufs
//! produce an invalid file.
//!
//! ## Timestamps
//! DPDK 22.11's `rte_pcapng_copy` converts the TSC with a reference taken in a library
//! constructor, before `rte_eal_init` has measured the TSC frequency, so its timestamps
//! are centuries off. [`copy`] therefore overwrites the block's timestamp (bytes 12..20 of
//! the Enhanced Packet Block, two host-order 32-bit halves) with its own conversion:
//! wall-clock nanoseconds at a reference taken on first use, plus TSC cycles since then
//! scaled by a 32.32 fixed-point factor.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::IntoRawFd;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::mbuf::Mbuf;
use crate::mempool::Mempool;
use crate::Eal;

/// Which way a captured packet went (the EPB flags' direction bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Received from the port.
    In,
    /// Handed to the port for transmission.
    Out,
}

impl Direction {
    fn raw(self) -> dpdk_sys::rte_pcapng_direction {
        match self {
            Direction::In => dpdk_sys::RTE_PCAPNG_DIRECTION_IN,
            Direction::Out => dpdk_sys::RTE_PCAPNG_DIRECTION_OUT,
        }
    }
}

/// Data room (bytes after the headroom) a capture-pool mbuf needs to hold a copy of up
/// to `snaplen` bytes plus the pcapng block header and trailer (`rte_pcapng_mbuf_size`).
pub fn mbuf_size(snaplen: u32) -> u32 {
    // SAFETY: pure arithmetic in the library; no preconditions.
    unsafe { dpdk_sys::rte_pcapng_mbuf_size(snaplen) }
}

/// Copies the first `snaplen` bytes of `m` into an mbuf from `pool`, formatted as a pcapng
/// Enhanced Packet Block for `port`/`queue` with direction `dir` and the TSC timestamp
/// `tsc` (from [`crate::Clock::cycles`]). `None` when `pool` is empty. `m` is unchanged;
/// the copy records `m`'s full length as the original length.
pub fn copy(
    port: u16,
    queue: u16,
    m: &Mbuf,
    pool: &Mempool,
    snaplen: u32,
    tsc: u64,
    dir: Direction,
) -> Option<Mbuf> {
    // SAFETY: m is a valid mbuf we borrow for the call (the library only reads it); the
    // pool is valid for the life of the process; the returned mbuf is new and ours.
    let raw = unsafe {
        dpdk_sys::rte_pcapng_copy(
            port,
            u32::from(queue),
            m.as_ptr(),
            pool.as_ptr(),
            snaplen,
            tsc,
            dir.raw(),
        )
    };
    // SAFETY: a non-NULL result is a fresh mbuf chain that nothing else references.
    let mut c = NonNull::new(raw).map(|r| unsafe { Mbuf::from_raw(r) })?;
    let ns = tsc_to_unix_ns(tsc);
    if let Some(ts) = c.data_mut().get_mut(12..20) {
        ts[..4].copy_from_slice(&((ns >> 32) as u32).to_ne_bytes());
        ts[4..].copy_from_slice(&(ns as u32).to_ne_bytes());
    }
    Some(c)
}

/// TSC-to-wall-clock reference: (TSC, Unix ns, ns per cycle in 32.32 fixed point).
static TIME_REF: OnceLock<(u64, u64, u128)> = OnceLock::new();

/// Nanoseconds since the Unix epoch at TSC `tsc`.
fn tsc_to_unix_ns(tsc: u64) -> u64 {
    let &(ref_tsc, ref_ns, mult) = TIME_REF.get_or_init(|| {
        // SAFETY: reads the TSC and EAL's measured frequency; no preconditions.
        let (t0, hz) = unsafe { (dpdk_sys::rte_get_tsc_cycles(), dpdk_sys::rte_get_tsc_hz()) };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mult = (1_000_000_000u128 << 32) / u128::from(hz.max(1));
        (t0, now, mult)
    });
    let scaled = |d: u64| ((u128::from(d) * mult) >> 32) as u64;
    if tsc >= ref_tsc {
        ref_ns.wrapping_add(scaled(tsc - ref_tsc))
    } else {
        ref_ns.wrapping_sub(scaled(ref_tsc - tsc))
    }
}

/// An open pcapng capture file (`rte_pcapng_t`); closed on drop.
///
/// One thread writes at a time (`&mut self`); the handle may move between threads.
#[derive(Debug)]
pub struct PcapngWriter {
    raw: NonNull<dpdk_sys::rte_pcapng_t>,
    bytes: u64,
}

// SAFETY: the handle holds a file descriptor and a small table; nothing in it is tied to
// the creating thread, and &mut self serialises its use.
unsafe impl Send for PcapngWriter {}

impl PcapngWriter {
    /// Creates (truncates) `path` and writes the section header (with `appname` and an
    /// optional comment) and one interface block per Ethernet port that exists now.
    pub fn create(
        _eal: &Eal,
        path: &Path,
        appname: &str,
        comment: Option<&str>,
    ) -> io::Result<PcapngWriter> {
        let file = File::create(path)?;
        let cstr = |s: &str| {
            CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in text"))
        };
        let app = cstr(appname)?;
        let comment = comment.map(cstr).transpose()?;
        let os = cstr(&format!(
            "{} {}",
            std::env::consts::OS,
            std::env::consts::ARCH
        ))?;
        let fd = file.into_raw_fd();
        // SAFETY: fd is an open file descriptor whose ownership passes to the library
        // (rte_pcapng_close closes it); the strings are valid for the call (the library
        // copies them into the section header it writes at once).
        let raw = unsafe {
            dpdk_sys::rte_pcapng_fdopen(
                fd,
                os.as_ptr(),
                std::ptr::null(),
                app.as_ptr(),
                comment.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            )
        };
        match NonNull::new(raw) {
            Some(raw) => Ok(PcapngWriter { raw, bytes: 0 }),
            None => {
                let errno = crate::error::rte_errno();
                // SAFETY: the library failed and did not take the descriptor; we close it.
                unsafe { libc::close(fd) };
                Err(io::Error::other(format!(
                    "rte_pcapng_fdopen failed: {} (rte_errno {errno})",
                    crate::error::strerror(errno)
                )))
            }
        }
    }

    /// Appends `pkts` (copies made by [`copy`]) to the file; returns the bytes written.
    /// The mbufs stay the caller's (drop them afterwards).
    pub fn write(&mut self, pkts: &mut [Mbuf]) -> io::Result<u64> {
        let mut total = 0u64;
        for chunk in pkts.chunks_mut(usize::from(u16::MAX)) {
            let n = chunk.len() as u16;
            // SAFETY: Mbuf is repr(transparent) over NonNull<rte_mbuf>, so the chunk is an
            // array of n valid mbuf pointers; the library reads them and frees none.
            let ret = unsafe {
                dpdk_sys::rte_pcapng_write_packets(
                    self.raw.as_ptr(),
                    chunk.as_mut_ptr().cast::<*mut dpdk_sys::rte_mbuf>(),
                    n,
                )
            };
            if ret < 0 {
                return Err(io::Error::last_os_error());
            }
            total += ret as u64;
        }
        self.bytes += total;
        Ok(total)
    }

    /// Bytes of packet blocks written so far (the headers not included).
    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }
}

impl Drop for PcapngWriter {
    fn drop(&mut self) {
        // SAFETY: we own the handle; rte_pcapng_close closes the descriptor and frees it.
        unsafe { dpdk_sys::rte_pcapng_close(self.raw.as_ptr()) }
    }
}
