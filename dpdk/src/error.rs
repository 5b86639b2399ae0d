//! Set-up errors. Each message says what went wrong, DPDK's own words for it
//! (`rte_strerror`), and what the user can do about it.

use std::ffi::CStr;

/// Errors from setting up DPDK: EAL, mempools, ports, queues, rings, lcores.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `rte_eal_init` failed.
    #[error("EAL initialisation failed: {message} (rte_errno {errno}). {hint}")]
    EalInit {
        /// `rte_errno` after the failure.
        errno: i32,
        /// `rte_strerror(errno)`.
        message: String,
        /// What to try.
        hint: &'static str,
    },
    /// The EAL was already initialised in this process with other arguments.
    #[error(
        "EAL already initialised in this process with different arguments {existing:?} \
         (asked for {requested:?}). rte_eal_init runs once per process: reuse the existing \
         Eal handle (Eal::get) or run in a new process"
    )]
    AlreadyInitialized {
        /// The arguments of the successful initialisation.
        existing: Vec<String>,
        /// The arguments of this call.
        requested: Vec<String>,
    },
    /// An argument could not be passed to C.
    #[error("EAL argument {0:?} contains a NUL byte: remove it")]
    NulInArgument(String),
    /// No such port.
    #[error(
        "port {port} does not exist ({available} ports available). Pass --vdev=net_tap0 \
         (or --vdev=net_ring0), or bind a NIC to vfio-pci with dpdk-devbind.py and pass -a PCI_ADDR"
    )]
    NoSuchPort {
        /// The port id asked for.
        port: u16,
        /// How many ports EAL probed.
        available: u16,
    },
    /// A port operation failed.
    #[error("{op} on port {port} failed: {message} (errno {errno}). {hint}")]
    Port {
        /// The port id.
        port: u16,
        /// The DPDK call that failed.
        op: &'static str,
        /// The (positive) errno.
        errno: i32,
        /// `rte_strerror(errno)`.
        message: String,
        /// What to try.
        hint: &'static str,
    },
    /// A queue handle was asked for twice, or the queue does not exist.
    #[error(
        "{dir} queue {queue} of port {port} is already taken or does not exist (the port has \
         {count}); each queue has exactly one handle: pass it to the lcore that polls it"
    )]
    QueueUnavailable {
        /// The port id.
        port: u16,
        /// "RX" or "TX".
        dir: &'static str,
        /// The queue asked for.
        queue: u16,
        /// Queues configured.
        count: u16,
    },
    /// The port cannot stop while queue handles are alive.
    #[error("port {port} still has queue handles in use: drop them before stopping the port")]
    QueuesInUse {
        /// The port id.
        port: u16,
    },
    /// A mempool or ring could not be created.
    #[error("creating {what} {name:?} failed: {message} (rte_errno {errno}). {hint}")]
    Create {
        /// "mempool" or "ring" or "ring port".
        what: &'static str,
        /// The name asked for.
        name: String,
        /// `rte_errno`.
        errno: i32,
        /// `rte_strerror(errno)`.
        message: String,
        /// What to try.
        hint: &'static str,
    },
    /// Launching a function on a worker lcore failed.
    #[error(
        "cannot launch on lcore {lcore}: {reason}. Give EAL more cores (-l 0-N) and launch \
         only on idle worker lcores (Eal::worker_lcores)"
    )]
    Launch {
        /// The lcore asked for.
        lcore: u32,
        /// Why.
        reason: String,
    },
}

/// A specialised `Result` for DPDK set-up.
pub type Result<T> = std::result::Result<T, Error>;

/// DPDK's message for an errno value (covers both libc errnos and DPDK's own).
pub(crate) fn strerror(errno: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated
    // string that stays valid until the next call on this thread; it is copied at once.
    unsafe {
        let p = dpdk_sys::rte_strerror(errno);
        if p.is_null() {
            return format!("errno {errno}");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// The calling thread's `rte_errno`.
pub(crate) fn rte_errno() -> i32 {
    // SAFETY: reads a thread-local int through a C shim; no preconditions.
    unsafe { dpdk_sys::weir_rte_errno() }
}

/// Builds an [`Error::Port`] from a negative DPDK return value.
pub(crate) fn port_error(port: u16, op: &'static str, ret: i32) -> Error {
    let errno = ret.saturating_abs();
    let hint = match errno {
        libc::ENODEV => "the port does not exist or was closed",
        libc::EINVAL => {
            "a parameter is outside what the device supports (queue count, \
                         descriptor count, offloads): check `Port::info`"
        }
        libc::ENOTSUP => "the device does not support this operation",
        libc::ENOMEM => "out of memory: give EAL more (-m MB) or use a bigger mempool",
        libc::EBUSY => "the port is busy (started?): stop it first",
        libc::EIO => "the device was removed",
        _ => "see the DPDK log above for details",
    };
    Error::Port {
        port,
        op,
        errno,
        message: strerror(errno),
        hint,
    }
}
