//! In-memory ports made from `rte_ring`s (`rte_eth_from_rings`, in librte_net_ring).
//!
//! [`ring_port_pair`] builds two ports wired back to back: what one transmits, the other
//! receives, with no kernel and no NIC in between. weir-gen and weir-sink use such a pair
//! to measure throughput in one process. (A `--vdev=net_ring0` port, by contrast, is wired
//! to itself: it receives what it transmits.)

use std::ffi::CString;

use crate::error::{rte_errno, strerror, Error, Result};
use crate::Eal;

fn create_ring(name: &str, size: u32) -> Result<*mut dpdk_sys::rte_ring> {
    let cname = CString::new(name).map_err(|_| Error::NulInArgument(name.to_owned()))?;
    // One TX queue enqueues and one RX queue dequeues: single producer, single consumer.
    let flags = dpdk_sys::RING_F_SP_ENQ | dpdk_sys::RING_F_SC_DEQ;
    // SAFETY: valid C string; the EAL is initialised (callers hold an Eal).
    let r =
        unsafe { dpdk_sys::rte_ring_create(cname.as_ptr(), size, dpdk_sys::SOCKET_ID_ANY, flags) };
    if r.is_null() {
        let errno = rte_errno();
        return Err(Error::Create {
            what: "ring",
            name: name.to_owned(),
            errno,
            message: strerror(errno),
            hint: "ring names must be unique and under 29 bytes, sizes a power of two",
        });
    }
    Ok(r)
}

fn port_from_rings(
    name: &str,
    rx: *mut dpdk_sys::rte_ring,
    tx: *mut dpdk_sys::rte_ring,
) -> Result<u16> {
    let cname = CString::new(name).map_err(|_| Error::NulInArgument(name.to_owned()))?;
    let rxs = [rx];
    let txs = [tx];
    // SAFETY: valid name and one valid ring in each array; the rings live forever (never
    // freed), as the port requires.
    let ret = unsafe {
        dpdk_sys::rte_eth_from_rings(cname.as_ptr(), rxs.as_ptr(), 1, txs.as_ptr(), 1, 0)
    };
    u16::try_from(ret).map_err(|_| {
        let errno = rte_errno();
        Error::Create {
            what: "ring port",
            name: name.to_owned(),
            errno,
            message: strerror(errno),
            hint: "port names must be unique; at most RTE_MAX_ETHPORTS (32) ports",
        }
    })
}

/// Creates two ports connected back to back through two rings of `size` slots (a power
/// of two; usable capacity `size - 1`) and returns their ids `(a, b)`: `a` transmits to
/// `b` and `b` to `a`. `name` (at most 20 bytes) must be unique in the process.
/// Configure and start each with [`crate::Port::configure`] as with any port.
pub fn ring_port_pair(_eal: &Eal, name: &str, size: u32) -> Result<(u16, u16)> {
    let ab = create_ring(&format!("{name}_ab"), size)?;
    let ba = create_ring(&format!("{name}_ba"), size)?;
    let a = port_from_rings(&format!("{name}_a"), ba, ab)?;
    let b = port_from_rings(&format!("{name}_b"), ab, ba)?;
    Ok((a, b))
}
