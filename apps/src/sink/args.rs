//! weir-sink's command line: its options (after `--` when EAL options are given), and the
//! checks clap cannot make.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Parser;
use serde_json::json;
use stack::impair::ImpairConfig;

use crate::net::StackArgs;

/// weir-sink's own options (after `--` when EAL options are given).
#[derive(Parser, Debug, Clone)]
#[command(
    name = "weir-sink",
    version,
    about = "Receive TCP with weir: software GRO with a nanosecond flush timer, Linux-grade ACKs, batched per loop.",
    after_help = "Usage forms:\n  weir-sink [OPTIONS]                      embedded default: a net_tap vdev 'weirtap0', --no-pci, hugepages if configured\n  weir-sink [EAL OPTIONS] -- [OPTIONS]     DPDK's usual form, e.g. weir-sink -l 0-1 -a 0000:3b:00.0 -- --ip 10.0.0.1\n\nscripts/run.sh drives it with the kernel's TCP over net_tap."
)]
pub struct SinkArgs {
    /// weir's address on the port (repeat to give one IPv4 and one IPv6 address).
    #[arg(long = "ip", value_name = "ADDR", default_values = ["198.18.0.1", "2001:2::1"])]
    pub ip: Vec<IpAddr>,
    /// TCP port to accept connections on (repeatable).
    #[arg(long = "port", value_name = "N", default_values_t = [5001u16],
          value_parser = clap::value_parser!(u16).range(1..))]
    pub ports: Vec<u16>,
    /// DPDK port id to use (default: the first probed port).
    #[arg(long, value_name = "ID")]
    pub eth_port: Option<u16>,
    /// RX/TX queues, one lcore each (RSS spreads flows when the device has it).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: u16,
    /// GRO and ACK settings.
    #[command(flatten)]
    pub stack: StackArgs,
    /// Connections per core; more are refused with a RST.
    #[arg(long, value_name = "N", default_value_t = 4096,
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub max_conns: u64,
    /// Receive buffer per connection in bytes (the window's upper bound, along with the
    /// receive queue's slices: 512 of 896 bytes each).
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20,
          value_parser = clap::value_parser!(u32).range(16_384..=1_073_741_824))]
    pub rcvbuf: u32,
    /// SHA-256 of each connection's bytes, printed when it closes and kept in the JSON.
    #[arg(long)]
    pub digest: bool,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Write the totals as JSON to FILE on exit.
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,
    /// Mbufs in the receive pool.
    #[arg(long, value_name = "N", default_value_t = 16_383,
          value_parser = clap::value_parser!(u32).range(1024..))]
    pub mbufs: u32,
    /// The port's MTU (68..=9000; default: the device's, 1500 on most), and the MSS TCP
    /// advertises with it. Frames longer than an mbuf arrive as chains when the port has
    /// scattered receive; otherwise the pool's mbufs are made large enough for a frame.
    #[arg(long, value_name = "BYTES",
          value_parser = clap::value_parser!(u16).range(crate::net::MTU_RANGE))]
    pub mtu: Option<u16>,
    /// Put the port in promiscuous mode.
    #[arg(long)]
    pub promiscuous: bool,
    /// No live line (totals and JSON only).
    #[arg(long)]
    pub quiet: bool,
    /// Append the running totals as one JSON line per second to FILE (for benchmarks and
    /// the lab: rates over any window).
    #[arg(long, value_name = "FILE")]
    pub stats_log: Option<PathBuf>,
    /// Impair received frames before the pipeline (this kernel has no netem), e.g.
    /// `loss=1%,reorder=5%,dup=1%,corrupt=0.1%,reorder-delay=200us,seed=7`. Seeded and
    /// reproducible; a corrupted frame keeps its old checksums, so weir must catch it.
    #[arg(long, value_name = "SPEC", value_parser = parse_impair)]
    pub impair: Option<(ImpairConfig, Option<u64>)>,
    /// Baseline mode: receive and free every frame, no stack at all (nothing is answered,
    /// so only traffic that needs no replies flows, e.g. UDP to a static neighbor entry).
    #[arg(long)]
    pub drop: bool,
    /// Name of the tap interface the embedded default creates (ignored with EAL options).
    #[arg(long, value_name = "NAME", default_value = "weirtap0")]
    pub tap_iface: String,
    /// Read options from a TOML file (keys are the long options, e.g. `gro_flush_ns =
    /// 50000`, `port = [5001, 5002]`); options on the command line override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Log filter: a level (error, warn, info, debug, trace) or RUST_LOG directives such
    /// as `info,dpdk=warn` (default: RUST_LOG, else info). DPDK's log is routed in.
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// Capture what weir receives and transmits to FILE (pcapng, nanosecond timestamps,
    /// direction); frames the writer cannot keep up with are left out and counted.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Bytes of each frame kept in the capture.
    #[arg(long, value_name = "BYTES", default_value_t = 65_535,
          value_parser = clap::value_parser!(u32).range(64..=262_144))]
    pub pcap_snaplen: u32,
    /// Largest capture in MiB; later frames are left out and counted (pcap_dropped).
    #[arg(long, value_name = "MB", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub pcap_max_mb: u64,
    /// Serve the stats in the Prometheus text format at http://ADDR:PORT/metrics
    /// (e.g. 127.0.0.1:9108).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
}

fn parse_impair(s: &str) -> std::result::Result<(ImpairConfig, Option<u64>), String> {
    ImpairConfig::parse(s)
}

impl SinkArgs {
    /// Checks what clap cannot: one address per family, a positive finite duration.
    pub fn validate(&self) -> Result<()> {
        let v4 = self.ip.iter().filter(|a| a.is_ipv4()).count();
        let v6 = self.ip.iter().filter(|a| a.is_ipv6()).count();
        if v4 > 1 || v6 > 1 {
            bail!("--ip: give at most one IPv4 and one IPv6 address");
        }
        if let Some(ip) = self
            .ip
            .iter()
            .find(|a| a.is_unspecified() || a.is_multicast())
        {
            bail!("--ip {ip}: weir needs a unicast address");
        }
        if let Some(d) = self.duration {
            if !(d.is_finite() && d > 0.0) {
                bail!("--duration {d}: give a positive number of seconds");
            }
        }
        let mut ports = self.ports.clone();
        ports.sort_unstable();
        ports.dedup();
        if ports.len() != self.ports.len() {
            bail!("--port: a port is given twice");
        }
        Ok(())
    }

    /// The settings the final JSON records (`settings` in `--stats-json`).
    pub(crate) fn settings_json(&self) -> serde_json::Value {
        json!({
            "ip": self.ip.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "ports": self.ports,
            "queues": self.queues,
            "gro": !self.stack.no_gro,
            "gro_flush_ns": self.stack.gro_flush_ns,
            "gro_busy_hold_ns": self.stack.gro_busy_hold_ns,
            "gro_max_bytes": self.stack.gro_max_bytes,
            "mtu": self.mtu,
            "max_flows": self.stack.max_flows,
            "max_conns": self.max_conns,
            "ack_policy": self.stack.policy().to_string(),
            "rcvbuf": self.rcvbuf,
            "digest": self.digest,
            "drop": self.drop,
        })
    }
}
