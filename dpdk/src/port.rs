//! Ethernet ports and their queues.
//!
//! [`Port::configure`] sets up N RX and TX queues and asks only for offloads the device
//! reports (`rte_eth_dev_info`): RX IPv4/TCP/UDP checksum, TX IPv4/TCP checksum, and RSS
//! on IP addresses and TCP ports when there is more than one RX queue. Each queue has
//! exactly one handle ([`PortRxQueue`], [`PortTxQueue`]), which implements the stack's
//! driver traits and is moved to the lcore that polls it.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use dpdk_sys::consts as c;
use stack::driver::{Burst, RxQueue, TxQueue};

use crate::error::{port_error, Error, Result};
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;
use crate::Eal;

/// TX checksum offloads a port has enabled: a property of the port, read with
/// [`Port::tx_csum_caps`] and handed to whatever builds frames for it (the stack's
/// `PipelineConfig::tx_csum_offload`, weir-gen's sender).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxCsumCaps {
    /// IPv4 header checksum.
    pub ipv4: bool,
    /// TCP checksum.
    pub tcp: bool,
}

impl TxCsumCaps {
    /// What `offloads` enables.
    pub fn from_offloads(offloads: &Offloads) -> TxCsumCaps {
        TxCsumCaps {
            ipv4: offloads.tx_ipv4_cksum(),
            tcp: offloads.tx_tcp_cksum(),
        }
    }

    /// Both the IPv4 header and the TCP checksum: what the stack needs to leave an IPv4
    /// frame's checksums to the NIC.
    pub fn ipv4_tcp(&self) -> bool {
        self.ipv4 && self.tcp
    }
}

/// How to configure a port.
#[derive(Clone, Debug)]
pub struct PortConfig {
    /// RX queues (one per polling lcore).
    pub rx_queues: u16,
    /// TX queues.
    pub tx_queues: u16,
    /// RX descriptors per queue (adjusted to the device's limits).
    pub rx_desc: u16,
    /// TX descriptors per queue (adjusted to the device's limits).
    pub tx_desc: u16,
    /// Receive every frame, whatever its destination MAC.
    pub promiscuous: bool,
    /// Ask for RX/TX checksum offloads when the device has them.
    pub checksum_offload: bool,
    /// Ask for multi-segment transmit (frames of chained mbufs) when the device has it.
    /// Off by default: some PMDs pick a slower transmit path for it.
    pub multi_seg_tx: bool,
    /// The MTU to set (`rxmode.mtu`; `None`: the device's default, 1,500 on most). When
    /// the pool's mbufs cannot hold a frame of this MTU, scattered receive
    /// (`RTE_ETH_RX_OFFLOAD_SCATTER`) is asked for if the device has it, and the port is
    /// refused otherwise ([`rx_data_room`] sizes a pool that needs no scatter).
    pub mtu: Option<u16>,
}

/// The longest frame a port at `mtu` receives: the MTU plus the Ethernet header, one
/// VLAN tag and the CRC (DPDK counts the CRC in its frame sizes, `RTE_ETHER_CRC_LEN`).
pub fn frame_len_for_mtu(mtu: u16) -> usize {
    usize::from(mtu)
        + dpdk_sys::RTE_ETHER_HDR_LEN as usize
        + dpdk_sys::RTE_VLAN_HLEN as usize
        + dpdk_sys::RTE_ETHER_CRC_LEN as usize
}

/// The data room (with the 128-byte headroom, what [`crate::Mempool::new`] takes) of an RX
/// pool for a port at `mtu`: the default when the device scatters frames over several
/// mbufs (or `mtu` fits in one), otherwise room for a whole frame in one mbuf.
pub fn rx_data_room(info: &DeviceInfo, mtu: u16) -> u16 {
    let default = crate::DEFAULT_DATA_ROOM;
    let headroom = dpdk_sys::RTE_PKTMBUF_HEADROOM as usize;
    let frame = frame_len_for_mtu(mtu);
    if frame <= usize::from(default) - headroom
        || info.rx_offload_capa & c::RTE_ETH_RX_OFFLOAD_SCATTER != 0
    {
        return default;
    }
    (frame + headroom).min(usize::from(u16::MAX)) as u16
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            rx_queues: 1,
            tx_queues: 1,
            rx_desc: 1024,
            tx_desc: 1024,
            promiscuous: false,
            checksum_offload: true,
            multi_seg_tx: false,
            mtu: None,
        }
    }
}

/// What a device reports about itself (part of `rte_eth_dev_info`).
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// The PMD, e.g. `"net_ring"`, `"net_tap"`, `"net_ice"`.
    pub driver_name: String,
    /// Largest number of RX queues.
    pub max_rx_queues: u16,
    /// Largest number of TX queues.
    pub max_tx_queues: u16,
    /// `RTE_ETH_RX_OFFLOAD_*` the device supports.
    pub rx_offload_capa: u64,
    /// `RTE_ETH_TX_OFFLOAD_*` the device supports.
    pub tx_offload_capa: u64,
    /// `RTE_ETH_RSS_*` hash types the device supports.
    pub flow_type_rss_offloads: u64,
    /// Smallest MTU the device takes.
    pub min_mtu: u16,
    /// Largest MTU the device takes.
    pub max_mtu: u16,
    /// Longest frame the device says it receives (DPDK checks an MTU against it).
    pub max_rx_pktlen: u32,
}

/// The RSS hash types weir asks for when a port has more than one RX queue: IP addresses
/// and TCP ports, so that both directions' frames of one connection pick one queue.
pub const RSS_HASH_TYPES: u64 = c::RTE_ETH_RSS_IP | c::RTE_ETH_RSS_TCP;

/// How a port's RX queues share the flows, decided from the device's capabilities
/// ([`QueueSpread::decide`]) when the port is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueSpread {
    /// One RX queue: every flow is on it.
    Single,
    /// The device's RSS picks each flow's queue, hashing these `RTE_ETH_RSS_*` types.
    Rss(u64),
    /// More than one RX queue, but the device hashes none of [`RSS_HASH_TYPES`]: the port
    /// is configured without RSS (`RTE_ETH_MQ_RX_NONE`) and the driver alone decides
    /// which queue a frame reaches ([`no_rss_outcome`] says what it does).
    NoRss,
}

impl QueueSpread {
    /// The spread of `rx_queues` queues on a device whose `rte_eth_dev_info` reports
    /// `flow_type_rss_offloads`.
    pub fn decide(rx_queues: u16, flow_type_rss_offloads: u64) -> QueueSpread {
        if rx_queues <= 1 {
            return QueueSpread::Single;
        }
        match RSS_HASH_TYPES & flow_type_rss_offloads {
            0 => QueueSpread::NoRss,
            hf => QueueSpread::Rss(hf),
        }
    }

    /// The `rss_hf` to configure (0: no RSS).
    pub fn rss_hf(self) -> u64 {
        match self {
            QueueSpread::Rss(hf) => hf,
            QueueSpread::Single | QueueSpread::NoRss => 0,
        }
    }
}

/// What the PMD `driver` does with the frames of a port that has several RX queues and
/// no RSS, as DPDK 22.11's drivers are written.
pub fn no_rss_outcome(driver: &str) -> &'static str {
    match driver {
        // drivers/net/af_packet/rte_eth_af_packet.c: one AF_PACKET socket per queue, all
        // in one PACKET_FANOUT group with PACKET_FANOUT_HASH | FLAG_ROLLOVER.
        "net_af_packet" => {
            "the kernel's packet fanout hashes each flow to a queue, and moves frames to \
             another queue whenever one socket's ring is full (PACKET_FANOUT_FLAG_ROLLOVER), \
             so under load a flow's frames can reach a core that does not hold its connection"
        }
        // drivers/net/af_xdp: queue q is bound to the interface's queue start_queue + q.
        "net_af_xdp" => {
            "each queue receives what the kernel driver's own RSS (set with ethtool -X) puts \
             on the interface queue it is bound to"
        }
        // drivers/net/ring, drivers/net/memif: one ring per queue, filled by the peer.
        "net_ring" | "net_memif" => "the peer chooses the queue of every frame it enqueues",
        _ => {
            "a NIC puts every frame on queue 0, so one core receives every flow and the \
             other queues stay idle"
        }
    }
}

/// Whether the PMD `driver` needs its mbuf pool made with [`Mempool::new_contiguous`]:
/// net_af_xdp, whose UMEM in DPDK 22.11 is the pool's first memory chunk taken as
/// `populated_size` objects at one stride (drivers/net/af_xdp/rte_eth_af_xdp.c,
/// `xdp_umem_configure`); an mbuf past that range is refused by the kernel, and a pool
/// made by `rte_pktmbuf_pool_create` has such mbufs.
pub fn needs_contiguous_pool(driver: &str) -> bool {
    driver == "net_af_xdp"
}

/// The warning to show when `port` (driver `driver`) is configured as `spread` with
/// `rx_queues` queues: `None` unless it has several queues and no RSS.
pub fn queue_spread_warning(
    port: u16,
    driver: &str,
    rx_queues: u16,
    spread: QueueSpread,
) -> Option<String> {
    (spread == QueueSpread::NoRss).then(|| {
        format!(
            "port {port} ({driver}) has no RSS on IP addresses and TCP ports, yet {rx_queues} \
             queues were asked for: {}; use one queue on this port, or a port with RSS",
            no_rss_outcome(driver)
        )
    })
}

/// The offloads and RSS hash types a configured port actually uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offloads {
    /// `RTE_ETH_RX_OFFLOAD_*` enabled.
    pub rx: u64,
    /// `RTE_ETH_TX_OFFLOAD_*` enabled.
    pub tx: u64,
    /// `RTE_ETH_RSS_*` hash types enabled (0: no RSS, all traffic on queue 0).
    pub rss_hf: u64,
}

impl Offloads {
    /// RX IPv4 header checksum verification.
    pub fn rx_ipv4_cksum(&self) -> bool {
        self.rx & c::RTE_ETH_RX_OFFLOAD_IPV4_CKSUM != 0
    }
    /// RX TCP checksum verification.
    pub fn rx_tcp_cksum(&self) -> bool {
        self.rx & c::RTE_ETH_RX_OFFLOAD_TCP_CKSUM != 0
    }
    /// TX IPv4 header checksum.
    pub fn tx_ipv4_cksum(&self) -> bool {
        self.tx & c::RTE_ETH_TX_OFFLOAD_IPV4_CKSUM != 0
    }
    /// TX TCP checksum.
    pub fn tx_tcp_cksum(&self) -> bool {
        self.tx & c::RTE_ETH_TX_OFFLOAD_TCP_CKSUM != 0
    }
    /// Scattered receive: a frame longer than an mbuf arrives as a chain.
    pub fn rx_scatter(&self) -> bool {
        self.rx & c::RTE_ETH_RX_OFFLOAD_SCATTER != 0
    }
    /// TX of frames made of chained mbufs.
    pub fn tx_multi_segs(&self) -> bool {
        self.tx & c::RTE_ETH_TX_OFFLOAD_MULTI_SEGS != 0
    }
}

/// Link state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// The link is up.
    pub up: bool,
    /// Speed in Mbit/s (0 when unknown).
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
}

/// Basic port counters (`rte_eth_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets received.
    pub ipackets: u64,
    /// Packets sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Packets the NIC dropped because the RX queues were full.
    pub imissed: u64,
    /// Erroneous received packets.
    pub ierrors: u64,
    /// Failed transmissions.
    pub oerrors: u64,
    /// RX mbuf allocation failures.
    pub rx_nombuf: u64,
}

/// State shared by a port and its queue handles; the last one dropped stops the port.
#[derive(Debug)]
struct Shared {
    id: u16,
    started: AtomicBool,
    rx_taken: Mutex<Vec<bool>>,
    tx_taken: Mutex<Vec<bool>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.started.swap(false, Ordering::AcqRel) {
            // SAFETY: valid port; neither the Port nor any queue handle exists any more,
            // so nothing polls it.
            unsafe { dpdk_sys::rte_eth_dev_stop(self.id) };
        }
    }
}

/// A configured Ethernet port. The port stops when the `Port` and all its queue handles
/// are dropped (it stays configured; ports are never closed).
#[derive(Debug)]
pub struct Port {
    shared: Arc<Shared>,
    cfg: PortConfig,
    offloads: Offloads,
    tx_csum: TxCsumCaps,
    driver_name: String,
    spread: QueueSpread,
    /// The MTU asked for when the device could not be set to it but receives such frames
    /// anyway (see [`Port::mtu_warning`]).
    mtu_unset: Option<u16>,
}

/// The PMD's name from a raw `rte_eth_dev_info`.
fn driver_name(raw: &dpdk_sys::rte_eth_dev_info) -> String {
    if raw.driver_name.is_null() {
        String::new()
    } else {
        // SAFETY: driver_name points to the PMD's static NUL-terminated name.
        unsafe { std::ffi::CStr::from_ptr(raw.driver_name) }
            .to_string_lossy()
            .into_owned()
    }
}

/// Fails with [`Error::NoSuchPort`] unless `port` exists.
fn check_port(eal: &Eal, port: u16) -> Result<()> {
    // SAFETY: accepts any id.
    if unsafe { dpdk_sys::rte_eth_dev_is_valid_port(port) } == 1 {
        Ok(())
    } else {
        Err(Error::NoSuchPort {
            port,
            available: eal.port_count(),
        })
    }
}

impl Port {
    /// What device `port` reports; [`Error::NoSuchPort`] if it does not exist.
    pub fn info(eal: &Eal, port: u16) -> Result<DeviceInfo> {
        let raw = raw_info(eal, port)?;
        Ok(DeviceInfo {
            driver_name: driver_name(&raw),
            max_rx_queues: raw.max_rx_queues,
            max_tx_queues: raw.max_tx_queues,
            rx_offload_capa: raw.rx_offload_capa,
            tx_offload_capa: raw.tx_offload_capa,
            flow_type_rss_offloads: raw.flow_type_rss_offloads,
            min_mtu: raw.min_mtu,
            max_mtu: raw.max_mtu,
            max_rx_pktlen: raw.max_rx_pktlen,
        })
    }

    /// Configures `port` with `cfg`, taking RX buffers from `pool`. The port is not
    /// started; call [`Port::start`].
    pub fn configure(eal: &Eal, port: u16, pool: Mempool, cfg: &PortConfig) -> Result<Port> {
        let info = raw_info(eal, port)?;
        if cfg.rx_queues == 0
            || cfg.tx_queues == 0
            || cfg.rx_queues > info.max_rx_queues
            || cfg.tx_queues > info.max_tx_queues
        {
            return Err(Error::Port {
                port,
                op: "rte_eth_dev_configure",
                errno: libc::EINVAL,
                message: format!(
                    "asked for {} RX / {} TX queues, the device has 1..={} / 1..={}",
                    cfg.rx_queues, cfg.tx_queues, info.max_rx_queues, info.max_tx_queues
                ),
                hint: "use fewer queues (one per lcore)",
            });
        }

        let mut offloads = Offloads::default();
        if cfg.checksum_offload {
            offloads.rx = (c::RTE_ETH_RX_OFFLOAD_IPV4_CKSUM
                | c::RTE_ETH_RX_OFFLOAD_TCP_CKSUM
                | c::RTE_ETH_RX_OFFLOAD_UDP_CKSUM)
                & info.rx_offload_capa;
            offloads.tx = (c::RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | c::RTE_ETH_TX_OFFLOAD_TCP_CKSUM)
                & info.tx_offload_capa;
        }
        if cfg.multi_seg_tx {
            offloads.tx |= c::RTE_ETH_TX_OFFLOAD_MULTI_SEGS & info.tx_offload_capa;
        }
        let spread = QueueSpread::decide(cfg.rx_queues, info.flow_type_rss_offloads);
        offloads.rss_hf = spread.rss_hf();

        let mut conf = dpdk_sys::rte_eth_conf::default();
        let mut mtu_unset = None;
        if let Some(mtu) = cfg.mtu {
            let plan = mtu_plan(port, &info, mtu, pool.data_room())?;
            offloads.rx |= plan.rx_offloads;
            if plan.set {
                // rte_eth_dev_configure checks it against the device's limits and sets it.
                conf.rxmode.mtu = u32::from(mtu);
            } else {
                mtu_unset = Some(mtu);
            }
        }
        conf.rxmode.offloads = offloads.rx;
        conf.txmode.offloads = offloads.tx;
        if offloads.rss_hf != 0 {
            conf.rxmode.mq_mode = dpdk_sys::RTE_ETH_MQ_RX_RSS;
            conf.rx_adv_conf.rss_conf.rss_key = std::ptr::null_mut(); // the PMD's default key
            conf.rx_adv_conf.rss_conf.rss_hf = offloads.rss_hf;
        }
        // SAFETY: conf is a valid, fully initialised configuration.
        let ret =
            unsafe { dpdk_sys::rte_eth_dev_configure(port, cfg.rx_queues, cfg.tx_queues, &conf) };
        if ret < 0 {
            return Err(port_error(port, "rte_eth_dev_configure", ret));
        }

        let (mut nb_rxd, mut nb_txd) = (cfg.rx_desc, cfg.tx_desc);
        // SAFETY: valid port and out-pointers.
        let ret =
            unsafe { dpdk_sys::rte_eth_dev_adjust_nb_rx_tx_desc(port, &mut nb_rxd, &mut nb_txd) };
        if ret < 0 {
            return Err(port_error(port, "rte_eth_dev_adjust_nb_rx_tx_desc", ret));
        }
        // SAFETY: valid port.
        let socket = unsafe { dpdk_sys::rte_eth_dev_socket_id(port) } as u32; // -1: any

        let mut rxconf = info.default_rxconf;
        rxconf.offloads = offloads.rx;
        for q in 0..cfg.rx_queues {
            // SAFETY: the port is configured; rxconf and the pool are valid.
            let ret = unsafe {
                dpdk_sys::rte_eth_rx_queue_setup(port, q, nb_rxd, socket, &rxconf, pool.as_ptr())
            };
            if ret < 0 {
                return Err(port_error(port, "rte_eth_rx_queue_setup", ret));
            }
        }
        let mut txconf = info.default_txconf;
        txconf.offloads = offloads.tx;
        for q in 0..cfg.tx_queues {
            // SAFETY: the port is configured; txconf is valid.
            let ret = unsafe { dpdk_sys::rte_eth_tx_queue_setup(port, q, nb_txd, socket, &txconf) };
            if ret < 0 {
                return Err(port_error(port, "rte_eth_tx_queue_setup", ret));
            }
        }

        Ok(Port {
            shared: Arc::new(Shared {
                id: port,
                started: AtomicBool::new(false),
                rx_taken: Mutex::new(vec![false; usize::from(cfg.rx_queues)]),
                tx_taken: Mutex::new(vec![false; usize::from(cfg.tx_queues)]),
            }),
            cfg: cfg.clone(),
            tx_csum: TxCsumCaps::from_offloads(&offloads),
            offloads,
            driver_name: driver_name(&info),
            spread,
            mtu_unset,
        })
    }

    /// The port id.
    pub fn id(&self) -> u16 {
        self.shared.id
    }

    /// Declares that the IPv4 and TCP checksums of frames sent on this port are completed
    /// downstream, as a NIC's TX checksum offload would, although the device has no such
    /// offload: [`Port::tx_csum_caps`] then says yes, so the stack leaves the pseudo-header sum
    /// and the offload request in each frame. Only for a port whose peer stands in for
    /// the NIC and completes them ([`crate::Mbuf::complete_tx_checksums`]): weir-gen's
    /// ring benchmark. [`Port::offloads`] still reports what the device does.
    pub fn model_tx_checksum_offload(&mut self) {
        self.tx_csum = TxCsumCaps {
            ipv4: true,
            tcp: true,
        };
    }

    /// The TX checksum offloads frames built for this port may request (what the device
    /// enabled, or everything after [`Port::model_tx_checksum_offload`]).
    pub fn tx_csum_caps(&self) -> TxCsumCaps {
        self.tx_csum
    }

    /// The MTU the device is set to (`rte_eth_dev_get_mtu`).
    pub fn mtu(&self) -> Result<u16> {
        let mut mtu = 0u16;
        // SAFETY: a configured port; a valid out-pointer.
        let ret = unsafe { dpdk_sys::rte_eth_dev_get_mtu(self.shared.id, &mut mtu) };
        if ret < 0 {
            return Err(port_error(self.shared.id, "rte_eth_dev_get_mtu", ret));
        }
        Ok(mtu)
    }

    /// The offloads and RSS hash types in use.
    pub fn offloads(&self) -> Offloads {
        self.offloads
    }

    /// The configuration it was set up with.
    pub fn config(&self) -> &PortConfig {
        &self.cfg
    }

    /// The PMD's name, e.g. `"net_tap"`.
    pub fn driver_name(&self) -> &str {
        &self.driver_name
    }

    /// How its RX queues share the flows.
    pub fn queue_spread(&self) -> QueueSpread {
        self.spread
    }

    /// The warning to show at start-up when the MTU asked for could not be set on the
    /// device, which receives such frames anyway (net_tap beyond the 1,522-byte frames
    /// DPDK 22.11 lets it take; see [`PortConfig::mtu`]); `None` otherwise.
    pub fn mtu_warning(&self) -> Option<String> {
        self.mtu_unset.map(|mtu| {
            format!(
                "port {}: {} takes frames of at most 1522 bytes by DPDK's check, so its MTU is left as it is; with scattered receive it still receives MTU {mtu} frames as chains of mbufs (set the kernel end's MTU to {mtu} too)",
                self.id(),
                self.driver_name
            )
        })
    }

    /// The warning to show at start-up when the port has several RX queues and no RSS
    /// ([`queue_spread_warning`]); `None` otherwise.
    pub fn queue_spread_warning(&self) -> Option<String> {
        queue_spread_warning(
            self.id(),
            &self.driver_name,
            self.cfg.rx_queues,
            self.spread,
        )
    }

    /// Starts the port (and enables promiscuous mode if configured).
    pub fn start(&mut self) -> Result<()> {
        let id = self.id();
        // SAFETY: the port is configured with all its queues set up.
        let ret = unsafe { dpdk_sys::rte_eth_dev_start(id) };
        if ret < 0 {
            return Err(port_error(id, "rte_eth_dev_start", ret));
        }
        self.shared.started.store(true, Ordering::Release);
        if self.cfg.promiscuous {
            self.set_promiscuous(true)?;
        }
        Ok(())
    }

    /// Stops the port. Fails with [`Error::QueuesInUse`] while queue handles exist, so
    /// no lcore is polling a stopped queue.
    pub fn stop(&mut self) -> Result<()> {
        if Arc::strong_count(&self.shared) > 1 {
            return Err(Error::QueuesInUse { port: self.id() });
        }
        if !self.shared.started.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        // SAFETY: valid port; no queue handle is alive (checked above).
        let ret = unsafe { dpdk_sys::rte_eth_dev_stop(self.id()) };
        if ret < 0 {
            return Err(port_error(self.id(), "rte_eth_dev_stop", ret));
        }
        Ok(())
    }

    /// Stops and closes the port, releasing everything the driver holds — the mbufs
    /// posted to its RX rings among them, so a mempool's in-use count can return to zero.
    /// Fails with [`Error::QueuesInUse`] while queue handles exist. The port id cannot be
    /// configured again afterwards (a vdev is removed by its close).
    pub fn close(mut self) -> Result<()> {
        self.stop()?;
        let id = self.id();
        // SAFETY: valid port, stopped, and no queue handle exists (checked by stop).
        let ret = unsafe { dpdk_sys::rte_eth_dev_close(id) };
        if ret < 0 {
            return Err(port_error(id, "rte_eth_dev_close", ret));
        }
        Ok(())
    }

    /// Enables or disables promiscuous mode. Devices that cannot (ENOTSUP) are left as
    /// they are; ring ports, for example, receive everything anyway.
    pub fn set_promiscuous(&mut self, on: bool) -> Result<()> {
        let id = self.id();
        // SAFETY: valid port.
        let ret = unsafe {
            if on {
                dpdk_sys::rte_eth_promiscuous_enable(id)
            } else {
                dpdk_sys::rte_eth_promiscuous_disable(id)
            }
        };
        if ret < 0 && ret != -libc::ENOTSUP {
            return Err(port_error(id, "rte_eth_promiscuous_enable/disable", ret));
        }
        Ok(())
    }

    /// The port's MAC address.
    pub fn mac(&self) -> Result<[u8; 6]> {
        let mut addr = dpdk_sys::rte_ether_addr::default();
        // SAFETY: valid port and out-pointer.
        let ret = unsafe { dpdk_sys::rte_eth_macaddr_get(self.id(), &mut addr) };
        if ret < 0 {
            return Err(port_error(self.id(), "rte_eth_macaddr_get", ret));
        }
        Ok(addr.addr_bytes)
    }

    /// The link state, without waiting.
    pub fn link(&self) -> Result<Link> {
        let mut link = dpdk_sys::rte_eth_link::default();
        // SAFETY: valid port and out-pointer.
        let ret = unsafe { dpdk_sys::rte_eth_link_get_nowait(self.id(), &mut link) };
        if ret < 0 {
            return Err(port_error(self.id(), "rte_eth_link_get_nowait", ret));
        }
        Ok(Link {
            up: link.link_status() == 1,
            speed_mbps: link.link_speed,
            full_duplex: link.link_duplex() == 1,
        })
    }

    /// The port's counters.
    pub fn stats(&self) -> Result<PortStats> {
        let mut s = dpdk_sys::rte_eth_stats::default();
        // SAFETY: valid port and out-pointer.
        let ret = unsafe { dpdk_sys::rte_eth_stats_get(self.id(), &mut s) };
        if ret < 0 {
            return Err(port_error(self.id(), "rte_eth_stats_get", ret));
        }
        Ok(PortStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        })
    }

    /// Zeroes the port's counters.
    pub fn reset_stats(&mut self) -> Result<()> {
        // SAFETY: valid port.
        let ret = unsafe { dpdk_sys::rte_eth_stats_reset(self.id()) };
        if ret < 0 {
            return Err(port_error(self.id(), "rte_eth_stats_reset", ret));
        }
        Ok(())
    }

    /// The handle of RX queue `queue`; each queue has one handle at a time.
    pub fn rx_queue(&self, queue: u16) -> Result<PortRxQueue> {
        take(&self.shared, &self.shared.rx_taken, "RX", queue)?;
        Ok(PortRxQueue {
            port: self.id(),
            queue,
            shared: Arc::clone(&self.shared),
            _not_sync: PhantomData,
        })
    }

    /// The handle of TX queue `queue`; each queue has one handle at a time.
    pub fn tx_queue(&self, queue: u16) -> Result<PortTxQueue> {
        take(&self.shared, &self.shared.tx_taken, "TX", queue)?;
        Ok(PortTxQueue {
            port: self.id(),
            queue,
            shared: Arc::clone(&self.shared),
            _not_sync: PhantomData,
        })
    }
}

fn take(shared: &Shared, taken: &Mutex<Vec<bool>>, dir: &'static str, queue: u16) -> Result<()> {
    let mut t = taken.lock().unwrap_or_else(|e| e.into_inner());
    let count = t.len() as u16;
    match t.get_mut(usize::from(queue)) {
        Some(slot) if !*slot => {
            *slot = true;
            Ok(())
        }
        _ => Err(Error::QueueUnavailable {
            port: shared.id,
            dir,
            queue,
            count,
        }),
    }
}

fn release(taken: &Mutex<Vec<bool>>, queue: u16) {
    let mut t = taken.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(slot) = t.get_mut(usize::from(queue)) {
        *slot = false;
    }
}

/// How a port is given an MTU.
struct MtuPlan {
    /// RX offloads it needs (scattered receive when a frame does not fit in an mbuf).
    rx_offloads: u64,
    /// Set the device's MTU (`rxmode.mtu`); `false` for net_tap beyond its frame limit.
    set: bool,
}

/// How port `port` gets `mtu` with mbufs of `room` bytes, or why it cannot.
///
/// DPDK refuses an MTU whose frame (the MTU plus 18 bytes, `eth_dev_validate_mtu`) is
/// longer than the device's `max_rx_pktlen`. DPDK 22.11's net_tap reports 1,522 there
/// (`RTE_ETHER_MAX_VLAN_FRAME_LEN` in `tap_dev_info`), although with scattered receive
/// its `pmd_rx_burst` reads a frame into as many mbufs as it needs (one `readv` over the
/// queue's chain): there the device MTU is left as it is, scatter is asked for, and
/// [`Port::mtu_warning`] says so. The kernel's end of the tap has an MTU of its own,
/// which the kernel side sets.
fn mtu_plan(
    port: u16,
    info: &dpdk_sys::rte_eth_dev_info,
    mtu: u16,
    room: usize,
) -> Result<MtuPlan> {
    let scatter = info.rx_offload_capa & c::RTE_ETH_RX_OFFLOAD_SCATTER != 0;
    let dpdk_frame = usize::from(mtu)
        + dpdk_sys::RTE_ETHER_HDR_LEN as usize
        + dpdk_sys::RTE_ETHER_CRC_LEN as usize;
    if dpdk_frame > info.max_rx_pktlen as usize {
        if driver_name(info) == "net_tap" && scatter {
            return Ok(MtuPlan {
                rx_offloads: c::RTE_ETH_RX_OFFLOAD_SCATTER,
                set: false,
            });
        }
        return Err(Error::Port {
            port,
            op: "rte_eth_dev_configure",
            errno: libc::EINVAL,
            message: format!(
                "MTU {mtu} needs {dpdk_frame}-byte frames; the device ({}) takes at most {} (max_mtu {})",
                driver_name(info),
                info.max_rx_pktlen,
                info.max_mtu
            ),
            hint: "give a smaller --mtu",
        });
    }
    if mtu < info.min_mtu || mtu > info.max_mtu {
        return Err(Error::Port {
            port,
            op: "rte_eth_dev_configure",
            errno: libc::EINVAL,
            message: format!(
                "MTU {mtu} is outside what the device takes: {}..={} (its max_mtu)",
                info.min_mtu, info.max_mtu
            ),
            hint: "give an --mtu within the device's range",
        });
    }
    let frame = frame_len_for_mtu(mtu);
    if frame <= room {
        return Ok(MtuPlan {
            rx_offloads: 0,
            set: true,
        });
    }
    if scatter {
        return Ok(MtuPlan {
            rx_offloads: c::RTE_ETH_RX_OFFLOAD_SCATTER,
            set: true,
        });
    }
    Err(Error::Port {
        port,
        op: "rte_eth_dev_configure",
        errno: libc::EINVAL,
        message: format!(
            "a {frame}-byte frame (MTU {mtu}) does not fit in the pool's {room}-byte mbufs and the device has no scattered receive"
        ),
        hint: "create the RX pool with dpdk::rx_data_room's data room for this MTU",
    })
}

fn raw_info(eal: &Eal, port: u16) -> Result<dpdk_sys::rte_eth_dev_info> {
    check_port(eal, port)?;
    let mut info = dpdk_sys::rte_eth_dev_info::default();
    // SAFETY: the port exists; info is a valid out-pointer.
    let ret = unsafe { dpdk_sys::rte_eth_dev_info_get(port, &mut info) };
    if ret < 0 {
        return Err(port_error(port, "rte_eth_dev_info_get", ret));
    }
    Ok(info)
}

/// The one handle of a port's RX queue. `Send` (move it to its lcore), not `Sync`.
#[derive(Debug)]
pub struct PortRxQueue {
    port: u16,
    queue: u16,
    shared: Arc<Shared>,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

/// The one handle of a port's TX queue. `Send` (move it to its lcore), not `Sync`.
#[derive(Debug)]
pub struct PortTxQueue {
    port: u16,
    queue: u16,
    shared: Arc<Shared>,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

impl Drop for PortRxQueue {
    fn drop(&mut self) {
        release(&self.shared.rx_taken, self.queue);
    }
}

impl Drop for PortTxQueue {
    fn drop(&mut self) {
        release(&self.shared.tx_taken, self.queue);
    }
}

impl PortRxQueue {
    /// The port id.
    pub fn port(&self) -> u16 {
        self.port
    }
    /// The queue id.
    pub fn queue(&self) -> u16 {
        self.queue
    }
}

impl PortTxQueue {
    /// The port id.
    pub fn port(&self) -> u16 {
        self.port
    }
    /// The queue id.
    pub fn queue(&self) -> u16 {
        self.queue
    }
}

impl PortRxQueue {
    /// [`RxQueue::rx_burst`] taking at most `max` frames: a smaller receive batch, so that
    /// one iteration's answers leave sooner (request/response traffic), at the cost of
    /// more iterations per frame.
    pub fn rx_burst_max(&mut self, out: &mut Burst<Mbuf>, max: usize) -> usize {
        self.receive(out, max)
    }

    fn receive(&mut self, out: &mut Burst<Mbuf>, max: usize) -> usize {
        let len = out.len();
        let room = out.remaining_capacity().min(max) as u16;
        if room == 0 {
            return 0;
        }
        // SAFETY: Mbuf is repr(transparent) over a non-null mbuf pointer, so the spare
        // capacity is `room` pointer slots; this handle is the queue's only user.
        let n = unsafe {
            let spare = out.as_mut_ptr().add(len).cast::<*mut dpdk_sys::rte_mbuf>();
            dpdk_sys::rte_eth_rx_burst(self.port, self.queue, spare, room)
        };
        // SAFETY: the PMD wrote n owned, non-null mbuf pointers after `len`.
        unsafe { out.set_len(len + usize::from(n)) };
        usize::from(n)
    }
}

impl PortTxQueue {
    /// Asks the PMD to take back the mbufs of frames it has finished sending
    /// (`rte_eth_tx_done_cleanup`; for a PMD without it, a transmit of no frames, which
    /// is where net_af_xdp reads its completion ring: `kick_tx`). A PMD frees an mbuf it
    /// was given only when the frame has left, so before a pool is checked at exit the
    /// last ACKs must be taken back this way.
    pub fn reclaim(&mut self) {
        // SAFETY: this handle is the queue's only user.
        let ret = unsafe { dpdk_sys::rte_eth_tx_done_cleanup(self.port, self.queue, 0) };
        if ret == -libc::ENOTSUP {
            let mut none: [*mut dpdk_sys::rte_mbuf; 1] = [std::ptr::null_mut()];
            // SAFETY: a burst of 0 frames: the PMD reads no pointer.
            unsafe { dpdk_sys::rte_eth_tx_burst(self.port, self.queue, none.as_mut_ptr(), 0) };
        }
    }
}

impl RxQueue for PortRxQueue {
    type Buf = Mbuf;
    fn rx_burst(&mut self, out: &mut Burst<Mbuf>) -> usize {
        self.receive(out, usize::MAX)
    }
}

impl TxQueue for PortTxQueue {
    type Buf = Mbuf;
    fn tx_burst(&mut self, pkts: &mut Burst<Mbuf>) -> usize {
        let len = pkts.len();
        if len == 0 {
            return 0;
        }
        let base = pkts.as_mut_ptr();
        // SAFETY: the first `len` elements are owned mbufs laid out as pointers; this
        // handle is the queue's only user. The PMD takes ownership of the first n.
        let n = usize::from(unsafe {
            dpdk_sys::rte_eth_tx_burst(
                self.port,
                self.queue,
                base.cast::<*mut dpdk_sys::rte_mbuf>(),
                len as u16,
            )
        });
        // SAFETY: the first n now belong to the PMD: forget them (set_len(0) first so a
        // panic cannot double-free), then move the unsent n..len to the front.
        unsafe {
            pkts.set_len(0);
            std::ptr::copy(base.add(n), base, len - n);
            pkts.set_len(len - n);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(rx_offload_capa: u64) -> DeviceInfo {
        DeviceInfo {
            driver_name: "net_test".into(),
            max_rx_queues: 1,
            max_tx_queues: 1,
            rx_offload_capa,
            tx_offload_capa: 0,
            flow_type_rss_offloads: 0,
            min_mtu: 68,
            max_mtu: 9600,
            max_rx_pktlen: 9618,
        }
    }

    /// The default data room when frames fit or the device scatters them; room for a
    /// whole frame (MTU + Ethernet header + VLAN tag + CRC, after the headroom) otherwise.
    #[test]
    fn rx_data_room_fits_a_frame_unless_the_device_scatters() {
        let plain = device(0);
        let scatter = device(c::RTE_ETH_RX_OFFLOAD_SCATTER);
        assert_eq!(rx_data_room(&plain, 1500), crate::DEFAULT_DATA_ROOM);
        assert_eq!(rx_data_room(&scatter, 9000), crate::DEFAULT_DATA_ROOM);
        assert_eq!(frame_len_for_mtu(9000), 9022);
        assert_eq!(rx_data_room(&plain, 9000), 9022 + 128);
    }

    #[test]
    fn tx_csum_caps_follow_the_enabled_offloads() {
        assert_eq!(
            TxCsumCaps::from_offloads(&Offloads::default()),
            TxCsumCaps::default()
        );
        let tcp_only = Offloads {
            tx: c::RTE_ETH_TX_OFFLOAD_TCP_CKSUM,
            ..Offloads::default()
        };
        let caps = TxCsumCaps::from_offloads(&tcp_only);
        assert!(caps.tcp && !caps.ipv4 && !caps.ipv4_tcp());
        let both = Offloads {
            tx: c::RTE_ETH_TX_OFFLOAD_TCP_CKSUM | c::RTE_ETH_TX_OFFLOAD_IPV4_CKSUM,
            ..Offloads::default()
        };
        assert!(TxCsumCaps::from_offloads(&both).ipv4_tcp());
    }

    #[test]
    fn queue_spread_follows_the_rss_capabilities() {
        // One queue: no RSS asked for, whatever the device has.
        assert_eq!(QueueSpread::decide(1, u64::MAX), QueueSpread::Single);
        assert_eq!(QueueSpread::decide(1, 0), QueueSpread::Single);
        // Several queues: weir's hash types that the device has, and no more.
        assert_eq!(
            QueueSpread::decide(4, u64::MAX),
            QueueSpread::Rss(RSS_HASH_TYPES)
        );
        // (1 << 5: RTE_ETH_RSS_NONFRAG_IPV4_UDP, which weir does not ask for.)
        assert_eq!(
            QueueSpread::decide(2, c::RTE_ETH_RSS_TCP | 1 << 5),
            QueueSpread::Rss(c::RTE_ETH_RSS_TCP)
        );
        assert_eq!(QueueSpread::decide(2, 1 << 5), QueueSpread::NoRss);
        // A device reporting none of them (af_packet: 0) gets no RSS.
        assert_eq!(QueueSpread::decide(2, 0), QueueSpread::NoRss);
        assert_eq!(QueueSpread::decide(2, 0).rss_hf(), 0);
        assert_eq!(QueueSpread::decide(1, u64::MAX).rss_hf(), 0);
    }

    #[test]
    fn the_warning_names_the_port_and_what_its_driver_does() {
        assert_eq!(
            queue_spread_warning(0, "net_tap", 1, QueueSpread::Single),
            None
        );
        assert_eq!(
            queue_spread_warning(0, "net_ixgbe", 2, QueueSpread::Rss(RSS_HASH_TYPES)),
            None
        );
        let w = queue_spread_warning(3, "net_af_packet", 2, QueueSpread::NoRss)
            .expect("several queues without RSS warn");
        assert!(w.starts_with("port 3 (net_af_packet) has no RSS"), "{w}");
        assert!(w.contains("2 queues") && w.contains("fanout"), "{w}");
        let w = queue_spread_warning(0, "net_e1000_igb", 4, QueueSpread::NoRss)
            .expect("several queues without RSS warn");
        assert!(w.contains("every frame on queue 0"), "{w}");
    }

    #[test]
    fn offload_helpers_read_the_dpdk_bits() {
        let o = Offloads {
            rx: c::RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | c::RTE_ETH_RX_OFFLOAD_TCP_CKSUM,
            tx: c::RTE_ETH_TX_OFFLOAD_TCP_CKSUM,
            rss_hf: 0,
        };
        assert!(o.rx_ipv4_cksum() && o.rx_tcp_cksum());
        assert!(o.tx_tcp_cksum() && !o.tx_ipv4_cksum());
    }
}
