//! The Environment Abstraction Layer: initialised once per process.
//!
//! `rte_eal_init` may run only once per process (a second call fails with `EALREADY`,
//! eal.c), and `cargo test` runs tests as threads of one process. [`Eal::init`] therefore
//! keeps a process-wide record of the arguments that succeeded:
//!
//! - the first successful call initialises DPDK and returns an [`Eal`] handle;
//! - a later call with the **same** arguments returns the same handle (so tests in one
//!   binary can each call `Eal::init` with a shared argument list);
//! - a later call with **different** arguments returns [`Error::AlreadyInitialized`],
//!   because DPDK cannot honour them;
//! - a failed call leaves nothing behind; DPDK itself decides whether a retry is possible
//!   (it is after a bad option; after most other failures it answers `EALREADY`).
//!
//! The EAL is never cleaned up: mempools, ports and mbufs may live until the process exits.

use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use crate::error::{rte_errno, strerror, Error, Result};

/// Proof that the EAL is initialised; needed to create mempools, ports and clocks.
///
/// Cheap to copy; every copy refers to the one process-wide EAL.
#[derive(Clone, Copy, Debug)]
pub struct Eal {
    _private: (),
}

/// The arguments of the successful initialisation, if any.
static STATE: Mutex<Option<Vec<String>>> = Mutex::new(None);

impl Eal {
    /// Initialises the EAL from `args` (the first is the program name, as in `argv[0]`),
    /// or returns the existing handle if an earlier call with identical arguments
    /// succeeded. See the module documentation for the rules.
    ///
    /// Tests and CI should always pass `--no-pci` (never probe the machine's NIC),
    /// `--no-huge` and a unique `--file-prefix`.
    pub fn init<I, S>(args: I) -> Result<Eal>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let args: Vec<String> = args.into_iter().map(|s| s.as_ref().to_owned()).collect();
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = state.as_ref() {
            if *existing == args {
                return Ok(Eal { _private: () });
            }
            return Err(Error::AlreadyInitialized {
                existing: existing.clone(),
                requested: args,
            });
        }

        let c_args = args
            .iter()
            .map(|a| CString::new(a.as_str()).map_err(|_| Error::NulInArgument(a.clone())))
            .collect::<Result<Vec<CString>>>()?;
        // rte_eal_init may permute argv (getopt) and keeps pointers into it (e.g. the
        // program name for logs), so argv and the strings are leaked for the process's life.
        let c_args: &'static [CString] = Vec::leak(c_args);
        let argv: &'static mut [*mut c_char] = Vec::leak(
            c_args
                .iter()
                .map(|c| c.as_ptr().cast_mut())
                .chain(std::iter::once(std::ptr::null_mut()))
                .collect(),
        );
        let argc = c_int::try_from(c_args.len()).unwrap_or(c_int::MAX);
        // SAFETY: argv holds argc valid NUL-terminated strings followed by NULL, all of
        // which live forever; the mutex serialises calls from Rust.
        let ret = unsafe { dpdk_sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        if ret < 0 {
            let errno = rte_errno();
            return Err(Error::EalInit {
                errno,
                message: strerror(errno),
                hint: init_hint(errno, &args),
            });
        }
        *state = Some(args);
        Ok(Eal { _private: () })
    }

    /// The handle, if the EAL was initialised by [`Eal::init`] in this process.
    pub fn get() -> Option<Eal> {
        let state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        state.as_ref().map(|_| Eal { _private: () })
    }

    /// The arguments the EAL was initialised with.
    pub fn args(&self) -> Vec<String> {
        let state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        state.clone().unwrap_or_default()
    }

    /// DPDK's version string, e.g. `"DPDK 22.11.11"`.
    pub fn version() -> String {
        // SAFETY: rte_version returns a pointer to a static NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(dpdk_sys::rte_version()) }
            .to_string_lossy()
            .into_owned()
    }

    /// Ids of the Ethernet ports EAL probed (vdevs and bound NICs), in order.
    pub fn ports(&self) -> Vec<u16> {
        (0..dpdk_sys::RTE_MAX_ETHPORTS as u16)
            // SAFETY: rte_eth_dev_is_valid_port accepts any id and only reads.
            .filter(|&p| unsafe { dpdk_sys::rte_eth_dev_is_valid_port(p) } == 1)
            .collect()
    }

    /// Number of usable ports (`rte_eth_dev_count_avail`).
    pub fn port_count(&self) -> u16 {
        // SAFETY: no preconditions once EAL is up.
        unsafe { dpdk_sys::rte_eth_dev_count_avail() }
    }

    /// The id of the port named `name` (e.g. `"net_ring0"` or a PCI address).
    pub fn port_by_name(&self, name: &str) -> Option<u16> {
        let c = CString::new(name).ok()?;
        let mut id = 0u16;
        // SAFETY: c is a valid C string and id a valid out-pointer.
        let ret = unsafe { dpdk_sys::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut id) };
        (ret == 0).then_some(id)
    }

    /// The lcore the calling thread runs on (`None` on a non-EAL thread).
    pub fn current_lcore(&self) -> Option<u32> {
        // SAFETY: reads a thread-local; no preconditions.
        let id = unsafe { dpdk_sys::rte_lcore_id() };
        (id != dpdk_sys::LCORE_ID_ANY).then_some(id)
    }

    /// The worker lcores (every enabled lcore except the main one).
    pub fn worker_lcores(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i: c_uint = u32::MAX; // -1: start from the beginning
        loop {
            // SAFETY: rte_get_next_lcore accepts any index; skip_main = 1, wrap = 0.
            i = unsafe { dpdk_sys::rte_get_next_lcore(i, 1, 0) };
            if i >= dpdk_sys::RTE_MAX_LCORE {
                return out;
            }
            out.push(i);
        }
    }

    /// Runs `f` on worker lcore `lcore` (which must be idle) and returns a handle to
    /// wait for its result. A panic in `f` is caught and reported by [`Launched::join`].
    pub fn remote_launch<F>(&self, lcore: u32, f: F) -> Result<Launched>
    where
        F: FnOnce() -> i32 + Send + 'static,
    {
        if !self.worker_lcores().contains(&lcore) {
            return Err(Error::Launch {
                lcore,
                reason: "not an enabled worker lcore".to_owned(),
            });
        }
        let boxed: Box<Box<dyn FnOnce() -> i32 + Send>> = Box::new(Box::new(f));
        let arg = Box::into_raw(boxed).cast::<c_void>();
        // SAFETY: trampoline takes back ownership of arg exactly once, on the worker.
        let ret = unsafe { dpdk_sys::rte_eal_remote_launch(Some(trampoline), arg, lcore) };
        if ret != 0 {
            // SAFETY: the launch failed, so the worker never saw arg: reclaim it here.
            drop(unsafe { Box::from_raw(arg.cast::<Box<dyn FnOnce() -> i32 + Send>>()) });
            return Err(Error::Launch {
                lcore,
                reason: format!("the lcore is busy ({})", strerror(ret.saturating_abs())),
            });
        }
        Ok(Launched { lcore })
    }
}

/// Return value the trampoline uses for a panicking closure.
const PANICKED: i32 = i32::MIN;

unsafe extern "C" fn trampoline(arg: *mut c_void) -> c_int {
    // SAFETY: arg came from Box::into_raw in remote_launch and is consumed only here.
    let f = unsafe { Box::from_raw(arg.cast::<Box<dyn FnOnce() -> i32 + Send>>()) };
    // Unwinding across the C frame is undefined: catch it and report through the value.
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(PANICKED)
}

/// A closure running on a worker lcore; [`Launched::join`] waits for it.
#[derive(Debug)]
#[must_use = "join the lcore to learn its result"]
pub struct Launched {
    lcore: u32,
}

impl Launched {
    /// The lcore it runs on.
    pub fn lcore(&self) -> u32 {
        self.lcore
    }
    /// Waits for the closure to return; `Err` if it panicked.
    pub fn join(self) -> std::result::Result<i32, Error> {
        // SAFETY: waits for a lcore this handle launched; valid from the main lcore.
        let ret = unsafe { dpdk_sys::rte_eal_wait_lcore(self.lcore) };
        if ret == PANICKED {
            return Err(Error::Launch {
                lcore: self.lcore,
                reason: "the launched closure panicked".to_owned(),
            });
        }
        Ok(ret)
    }
}

fn has_arg(args: &[String], prefix: &str) -> bool {
    args.iter().any(|a| a.starts_with(prefix))
}

/// A hint for an `rte_eal_init` failure: what to do next.
fn init_hint(errno: i32, args: &[String]) -> &'static str {
    match errno {
        libc::EINVAL => {
            "invalid EAL arguments: check the options printed above (e.g. -l, -m, --vdev, \
             --file-prefix); weir passes everything before `--` to DPDK"
        }
        libc::EACCES if !has_arg(args, "--no-huge") => {
            "cannot use hugepages: pass --no-huge or run scripts/setup-hugepages.sh (and run \
             as root)"
        }
        libc::EACCES => "permission denied: run as root (or with CAP_SYS_ADMIN, CAP_NET_ADMIN)",
        libc::EALREADY => {
            "EAL was already initialised (or a failed attempt cannot be retried) in this \
             process: run in a new process"
        }
        libc::ENOMEM if !has_arg(args, "--no-huge") => {
            "not enough memory: run scripts/setup-hugepages.sh, or pass --no-huge -m 512"
        }
        libc::ENOMEM => "not enough memory: lower -m or free memory",
        libc::ENOTSUP | libc::ENODEV if has_arg(args, "--vdev=net_tap") => {
            "probing a net_tap vdev failed: it needs root (CAP_NET_ADMIN) and /dev/net/tun \
             (modprobe tun)"
        }
        libc::ENOTSUP | libc::ENODEV => {
            "probing devices failed: check --vdev arguments, and bind NICs to vfio-pci \
             (dpdk-devbind.py) before passing -a PCI_ADDR"
        }
        libc::EFAULT | libc::EPROTO => "DPDK internal failure: see the DPDK log above",
        _ => "see the DPDK log above for details",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn hints_point_at_the_fix() {
        let huge = args(&["weir", "--no-pci"]);
        let nohuge = args(&["weir", "--no-pci", "--no-huge"]);
        assert!(init_hint(libc::EACCES, &huge).contains("--no-huge"));
        assert!(init_hint(libc::EACCES, &huge).contains("scripts/setup-hugepages.sh"));
        assert!(init_hint(libc::EACCES, &nohuge).contains("root"));
        assert!(init_hint(libc::EINVAL, &nohuge).contains("invalid EAL arguments"));
        let tap = args(&["weir", "--vdev=net_tap0"]);
        assert!(init_hint(libc::ENOTSUP, &tap).contains("/dev/net/tun"));
        assert!(init_hint(libc::EALREADY, &tap).contains("new process"));
    }
}
