//! In-memory ports made from `rte_ring`s (`rte_eth_from_rings`, in librte_net_ring).
//!
//! [`ring_port_pair`] builds two ports wired back to back: what one transmits, the other
//! receives, with no kernel and no NIC in between. weir-gen and weir-sink use such a pair
//! to measure throughput in one process. (A `--vdev=net_ring0` port, by contrast, is wired
//! to itself: it receives what it transmits.) [`ring_port_pair_queues`] gives each port
//! several queues, queue `q` of one wired to queue `q` of the other: the transmitter then
//! chooses the receive queue of every frame, as a NIC's RSS would (weir-gen does,
//! `apps/src/gen/driver.rs`).

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
    rxs: &[*mut dpdk_sys::rte_ring],
    txs: &[*mut dpdk_sys::rte_ring],
) -> Result<u16> {
    let cname = CString::new(name).map_err(|_| Error::NulInArgument(name.to_owned()))?;
    // At most MAX_RING_QUEUES (checked by the caller): the counts fit.
    let (nrx, ntx) = (rxs.len() as u32, txs.len() as u32);
    // SAFETY: valid name; `nrx` and `ntx` valid rings in the arrays, which the call only
    // reads; the rings live forever (never freed), as the port requires.
    let ret = unsafe {
        dpdk_sys::rte_eth_from_rings(cname.as_ptr(), rxs.as_ptr(), nrx, txs.as_ptr(), ntx, 0)
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
pub fn ring_port_pair(eal: &Eal, name: &str, size: u32) -> Result<(u16, u16)> {
    ring_port_pair_queues(eal, name, size, 1)
}

/// [`ring_port_pair`] with a ring of its own size each way: `a_to_b` slots carry what `a`
/// transmits, `b_to_a` what `b` does. A ring drains only as fast as its reader polls, so a
/// side whose transmissions stand for a NIC's (which drains at line rate, whatever the
/// peer host does) can be given a deeper ring than the one its peer feeds it through.
pub fn ring_port_pair_sized(
    _eal: &Eal,
    name: &str,
    a_to_b: u32,
    b_to_a: u32,
) -> Result<(u16, u16)> {
    pair_of_rings(name, 1, a_to_b, b_to_a)
}

/// The most queues [`ring_port_pair_queues`] gives a port (the ring PMD's own limit,
/// `RTE_PMD_RING_MAX_RX_RINGS` and `RTE_PMD_RING_MAX_TX_RINGS` in DPDK's `rte_config.h`).
pub const MAX_RING_QUEUES: u16 = 16;

/// [`ring_port_pair`] with `queues` RX and TX queues on each port: what `a` transmits on
/// its queue `q` arrives on `b`'s queue `q`, and the other way round (2 x `queues` rings of
/// `size` slots). Configure each port with that many queues. `name` (at most 18 bytes)
/// must be unique in the process.
pub fn ring_port_pair_queues(_eal: &Eal, name: &str, size: u32, queues: u16) -> Result<(u16, u16)> {
    if queues == 0 || queues > MAX_RING_QUEUES {
        return Err(Error::Create {
            what: "ring port pair",
            name: name.to_owned(),
            errno: libc::EINVAL,
            message: format!("{queues} queues"),
            hint: "give 1 to 16 queues (the ring PMD's limit)",
        });
    }
    pair_of_rings(name, queues, size, size)
}

/// Two ports wired back to back through `queues` rings each way, `a_to_b` slots each
/// from `a` to `b` and `b_to_a` back ([`ring_port_pair_queues`], [`ring_port_pair_sized`]).
fn pair_of_rings(name: &str, queues: u16, a_to_b: u32, b_to_a: u32) -> Result<(u16, u16)> {
    let mut ab = Vec::new();
    let mut ba = Vec::new();
    for q in 0..queues {
        // Queue 0 keeps the single-queue pair's ring names.
        let sfx = if q == 0 { String::new() } else { q.to_string() };
        ab.push(create_ring(&format!("{name}_ab{sfx}"), a_to_b)?);
        ba.push(create_ring(&format!("{name}_ba{sfx}"), b_to_a)?);
    }
    let a = port_from_rings(&format!("{name}_a"), &ba, &ab)?;
    let b = port_from_rings(&format!("{name}_b"), &ab, &ba)?;
    Ok((a, b))
}
