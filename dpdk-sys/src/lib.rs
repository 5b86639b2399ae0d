//! Raw bindings to DPDK (>= 22.11), generated at build time by bindgen from the headers
//! listed in `src/wrapper.h`, with DPDK's own cflags (`pkg-config --cflags libdpdk`).
//!
//! DPDK's `static inline` functions (`rte_eth_rx_burst`, `rte_pktmbuf_alloc`,
//! `rte_rdtsc`, ...) are reachable under their own names: bindgen's `wrap_static_fns`
//! writes an out-of-line C wrapper for each, which `build.rs` compiles and links.
//!
//! Everything here is `unsafe` and undocumented beyond DPDK's own documentation; use the
//! `dpdk` crate's safe layer instead. `weir_rte_errno()` reads the calling thread's
//! `rte_errno`, which is a thread-local C variable Rust cannot name directly.

#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    missing_docs,
    unreachable_pub,
    improper_ctypes,
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks,
    unsafe_op_in_unsafe_fn,
    rustdoc::all
)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

/// Constants DPDK defines with function-like macros (`RTE_BIT64`), which bindgen skips.
/// `src/shim.c` checks each value against DPDK's headers with `_Static_assert`.
pub mod consts {
    /// `RTE_ETH_RSS_IP`: hash on IPv4/IPv6 addresses (incl. fragments and "other").
    pub const RTE_ETH_RSS_IP: u64 =
        (1 << 2) | (1 << 3) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 13) | (1 << 15);
    /// `RTE_ETH_RSS_TCP`: hash on the TCP 4-tuple (IPv4, IPv6, IPv6 with extensions).
    pub const RTE_ETH_RSS_TCP: u64 = (1 << 4) | (1 << 10) | (1 << 16);
    /// `RTE_ETH_RX_OFFLOAD_IPV4_CKSUM`.
    pub const RTE_ETH_RX_OFFLOAD_IPV4_CKSUM: u64 = 1 << 1;
    /// `RTE_ETH_RX_OFFLOAD_UDP_CKSUM`.
    pub const RTE_ETH_RX_OFFLOAD_UDP_CKSUM: u64 = 1 << 2;
    /// `RTE_ETH_RX_OFFLOAD_TCP_CKSUM`.
    pub const RTE_ETH_RX_OFFLOAD_TCP_CKSUM: u64 = 1 << 3;
    /// `RTE_ETH_RX_OFFLOAD_SCATTER`: frames longer than an mbuf arrive as chains.
    pub const RTE_ETH_RX_OFFLOAD_SCATTER: u64 = 1 << 13;
    /// `RTE_ETH_TX_OFFLOAD_IPV4_CKSUM`.
    pub const RTE_ETH_TX_OFFLOAD_IPV4_CKSUM: u64 = 1 << 1;
    /// `RTE_ETH_TX_OFFLOAD_UDP_CKSUM`.
    pub const RTE_ETH_TX_OFFLOAD_UDP_CKSUM: u64 = 1 << 2;
    /// `RTE_ETH_TX_OFFLOAD_TCP_CKSUM`.
    pub const RTE_ETH_TX_OFFLOAD_TCP_CKSUM: u64 = 1 << 3;
    /// `RTE_ETH_TX_OFFLOAD_MULTI_SEGS`: the device sends frames made of chained mbufs.
    pub const RTE_ETH_TX_OFFLOAD_MULTI_SEGS: u64 = 1 << 15;
}
