//! weir's safe layer over DPDK.
//!
//! - [`Eal`]: initialised once per process ([`Eal::init`]); proof of initialisation for
//!   everything else; lcores and remote launch.
//! - [`Mempool`] (never freed, `Copy`) and [`Mbuf`] (owned, freed on drop,
//!   `#[repr(transparent)]`), which implement the stack's `BufPool` and `PacketBuf`.
//! - [`Port`]: configure, start, stop, MAC, link, stats; [`PortRxQueue`] /
//!   [`PortTxQueue`] implement the stack's `RxQueue` / `TxQueue`.
//! - [`Clock`]: the TSC as nanosecond [`stack::time::Instant`]s.
//! - [`ring_port_pair`]: two in-memory ports wired back to back ([`ring_port_pair_queues`]:
//!   with several queues).
//! - [`cksum`]: DPDK's software checksum, `rte_raw_cksum`.
//!
//! This and `dpdk-sys` are the only crates of weir with `unsafe` code; every block says
//! why it is sound. A typical start:
//!
//! ```no_run
//! use dpdk::{Eal, Mempool, Port, PortConfig};
//! let eal = Eal::init(["weir", "--no-pci", "--no-huge", "-m", "512", "--vdev=net_ring0"])?;
//! let pool = Mempool::new(&eal, "rx", 8191, 256, dpdk::DEFAULT_DATA_ROOM)?;
//! let mut port = Port::configure(&eal, 0, pool, &PortConfig::default())?;
//! port.start()?;
//! let (rxq, txq) = (port.rx_queue(0)?, port.tx_queue(0)?);
//! # Ok::<(), dpdk::Error>(())
//! ```

pub mod cksum;
mod clock;
mod eal;
mod error;
pub mod gro;
pub mod log;
mod mbuf;
mod mempool;
pub mod pcapng;
mod port;
mod ring;

pub use clock::Clock;
pub use eal::{Eal, Launched};
pub use error::{Error, Result};
pub use mbuf::{Mbuf, PacketType, Segments, SharedData, MAX_SHARED_REFS};
pub use mempool::{InUse, Mempool, PortPool, StashPool, DEFAULT_CACHE, DEFAULT_DATA_ROOM, STASH};
pub use port::{
    frame_len_for_mtu, needs_contiguous_pool, no_rss_outcome, queue_spread_warning, rx_data_room,
    DeviceInfo, Link, Offloads, Port, PortConfig, PortRxQueue, PortStats, PortTxQueue, QueueSpread,
    TxCsumCaps, RSS_HASH_TYPES,
};
pub use ring::{ring_port_pair, ring_port_pair_queues, ring_port_pair_sized, MAX_RING_QUEUES};

/// The raw bindings, for what the safe layer does not cover yet.
pub use dpdk_sys as sys;
