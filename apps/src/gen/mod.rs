//! weir-gen: TCP senders on a DPDK port, on weir's own TCP stack.
//!
//! Read first: RFC 5681 (slow start, congestion avoidance, fast retransmit), RFC 3465
//! (Appropriate Byte Counting), RFC 6298 (the retransmission timer), RFC 7323
//! (timestamps, window scale), RFC 2018 (SACK-permitted).
//!
//! - [`engine::Gen`]: the engine. N flows, each an active open of weir's TCP
//!   (`stack::tcp`) from its own 4-tuple, writing the payload pattern without a copy
//!   (`send_bufs` of read-only windows onto one shared copy of it) and closing with a FIN
//!   after its bytes; the stack does segmentation, congestion control (the chosen ACK
//!   counting), loss recovery and the RTO. Sans-IO and generic over the buffer type, so it
//!   runs against weir's pipeline in memory (the tests, the lab) as on a DPDK port.
//! - [`sender::Sender`]: the frame generator: open loop (`--blast`: the same segments,
//!   no handshake, no ACKs), and the hand-rolled closed-loop sender weir-gen had before
//!   it ran on the stack, kept as the anchor `weir-bench e2e` measures the stack's sender
//!   beside.
//! - [`driver`]: the loops that run either on a DPDK port's queues.
//! - [`cli`]: the `weir-gen` program's options and entry point.
//! - [`payload`]: the bytes every flow sends and their checksums.
//! - [`pool`]: where frames are built; on DPDK a segment's payload is put in place (a
//!   stamped buffer, or chained by reference), so a data segment costs its headers only.
//!
//! Source addresses and ports vary per flow ([`GenConfig::flow_addr`]); each source
//! address has a pipeline of its own in the engine.

pub mod cli;
pub mod driver;
pub mod engine;
pub mod payload;
pub mod pool;
pub mod sender;

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use stack::time::Duration;

pub use engine::Gen;
pub use sender::{GenStats, Sender, ARP_EVERY, ARP_GIVE_UP};

/// How slow start and congestion avoidance count what an ACK acknowledges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckCounting {
    /// +1 MSS per ACK that acknowledges new data in slow start (RFC 5681 §3.1, the
    /// pre-ABC rule): a stretch ACK for 45 segments opens the window by one segment.
    PerAck,
    /// Appropriate Byte Counting (RFC 3465 §2.2) with limit L: +min(bytes acked, L*MSS).
    Abc(u8),
    /// +bytes acked, however many (Linux's `tcp_slow_start` counts every acked segment of
    /// a stretch ACK).
    Bytes,
}

impl AckCounting {
    /// The stack's rule of the same name.
    pub fn to_stack(self) -> stack::tcp::cc::AckCounting {
        match self {
            AckCounting::PerAck => stack::tcp::cc::AckCounting::PerAck,
            AckCounting::Abc(l) => stack::tcp::cc::AckCounting::Abc { l },
            AckCounting::Bytes => stack::tcp::cc::AckCounting::Bytes,
        }
    }
}

impl FromStr for AckCounting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "per-ack" => Ok(AckCounting::PerAck),
            "bytes" => Ok(AckCounting::Bytes),
            _ => match s.strip_prefix("abc:").map(str::parse::<u8>) {
                Some(Ok(l)) if l >= 1 => Ok(AckCounting::Abc(l)),
                _ => Err(format!("{s:?}: expected per-ack, abc:L (L >= 1) or bytes")),
            },
        }
    }
}

impl fmt::Display for AckCounting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AckCounting::PerAck => f.write_str("per-ack"),
            AckCounting::Abc(l) => write!(f, "abc:{l}"),
            AckCounting::Bytes => f.write_str("bytes"),
        }
    }
}

/// How flows share the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interleave {
    /// One segment per flow in turn, as on a busy NIC queue fed by many sockets.
    Segment,
    /// Up to N back-to-back segments per flow in turn, as TSO/GSO senders produce.
    Train(u16),
}

impl Interleave {
    /// Segments a flow sends each time its turn comes.
    pub fn train_len(self) -> u32 {
        match self {
            Interleave::Segment => 1,
            Interleave::Train(n) => u32::from(n.max(1)),
        }
    }
}

impl FromStr for Interleave {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "segment" => Ok(Interleave::Segment),
            _ => match s.strip_prefix("train:").map(str::parse::<u16>) {
                Some(Ok(n)) if n >= 1 => Ok(Interleave::Train(n)),
                _ => Err(format!("{s:?}: expected segment or train:N (N >= 1)")),
            },
        }
    }
}

impl fmt::Display for Interleave {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Interleave::Segment => f.write_str("segment"),
            Interleave::Train(n) => write!(f, "train:{n}"),
        }
    }
}

/// Where PSH goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PshMode {
    /// On the last segment of every write (as Linux's `tcp_push` at the end of
    /// `sendmsg`).
    EveryWrite,
    /// Never.
    Never,
}

/// Everything a [`Sender`] needs.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// Number of flows (1..=65,536).
    pub flows: u32,
    /// The generator's MAC (source of every frame).
    pub src_mac: [u8; 6],
    /// The receiver's MAC; `None`: resolve it with ARP first.
    pub dst_mac: Option<[u8; 6]>,
    /// First source address; flows beyond the port range use the next addresses.
    pub src_ip: Ipv4Addr,
    /// The receiver's address.
    pub dst_ip: Ipv4Addr,
    /// First source port; flow `i` uses `src_port + i % ports_per_ip`.
    pub src_port: u16,
    /// Source ports per source address.
    pub ports_per_ip: u16,
    /// The receiver's port.
    pub dst_port: u16,
    /// Payload bytes of a full segment (the sender's MSS with timestamps; Linux: 1448 on
    /// a 1500-byte MTU). The SYN advertises this plus 12.
    pub mss: u16,
    /// Bytes per application write: segments never span two writes.
    pub write_size: u32,
    /// Where PSH goes.
    pub psh: PshMode,
    /// Bytes each flow sends before its FIN (`None`: until [`GenConfig::duration`]).
    pub bytes_per_flow: Option<u64>,
    /// How long to send data (then FIN); `None`: until `bytes_per_flow` are sent.
    pub duration: Option<Duration>,
    /// Bursts: each flow writes this many bytes, waits until they are acknowledged, then
    /// [`GenConfig::gap`], and writes again.
    pub burst_bytes: Option<u64>,
    /// The idle time between bursts.
    pub gap: Duration,
    /// The ACK-counting rule.
    pub ack_counting: AckCounting,
    /// How flows share the wire.
    pub interleave: Interleave,
    /// Initial (and restart, RFC 5681 §4.1) congestion window in segments.
    pub init_cwnd: u32,
    /// Largest congestion window in segments (Linux `snd_cwnd_clamp`).
    pub max_cwnd: u32,
    /// Open loop: no handshake, no ACKs, no window; the same segments at full speed
    /// (to measure a receiver that answers nothing).
    pub blast: bool,
    /// Let the NIC compute checksums (only when the port offers it).
    pub tx_csum_offload: bool,
    /// Handshakes in progress at once; further flows wait their turn.
    pub max_half_open: u32,
    /// Seed for initial sequence numbers.
    pub seed: u64,
    /// IPv6 instead: the first source address and the receiver's (flows beyond the
    /// port range use the next source addresses, as for IPv4). `None`: IPv4, from
    /// [`GenConfig::src_ip`] to [`GenConfig::dst_ip`]. The frame generator (`--blast`)
    /// is IPv4 only.
    pub v6: Option<(std::net::Ipv6Addr, std::net::Ipv6Addr)>,
    /// The congestion control of the stack's connections (Reno by default: the ACK
    /// counting rules act on its slow start and congestion avoidance as RFC 5681 and
    /// RFC 3465 state them; CUBIC is Linux's default).
    pub cc: stack::tcp::cc::CcAlgorithm,
    /// Period of the payload pattern in bytes ([`payload::PERIOD`], a prime, by default:
    /// the receiver's digest then checks order; the MSS for a stamped pool, see
    /// [`pool`]).
    pub pattern_period: u32,
    /// Open every flow before any writes: established flows wait until no flow is left
    /// to open (or in its handshake), and [`GenConfig::duration`] counts from then. The
    /// data phase then has every flow at once, however long the handshakes take (65,536
    /// of them, at [`GenConfig::max_half_open`] at a time, take longer than a short
    /// run). Off by default: each flow writes as soon as it is established. The frame
    /// generator ([`Sender`]) holds its data segments the same way (not with `blast`).
    pub open_first: bool,
    /// Each connection's send buffer in bytes (at least one MSS); `None`:
    /// [`engine::snd_buf_per_flow`] (64 KiB to 1 MiB). What a flow has written is sent
    /// before its FIN, so at tens of thousands of flows a smaller buffer keeps the close
    /// short.
    pub snd_buf: Option<u32>,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            flows: 1,
            src_mac: [0x02, 0, 0, 0, 0, 2],
            dst_mac: None,
            src_ip: Ipv4Addr::new(198, 18, 0, 2),
            dst_ip: Ipv4Addr::new(198, 18, 0, 1),
            src_port: 1024,
            ports_per_ip: 64_000,
            dst_port: 5001,
            mss: 1448,
            write_size: 65_536,
            psh: PshMode::EveryWrite,
            bytes_per_flow: None,
            duration: Some(Duration::from_secs(10)),
            burst_bytes: None,
            gap: Duration::from_millis(20),
            ack_counting: AckCounting::Bytes,
            interleave: Interleave::Segment,
            init_cwnd: 10,
            max_cwnd: 1 << 20,
            blast: false,
            tx_csum_offload: false,
            max_half_open: 1024,
            seed: 0x5eed,
            cc: stack::tcp::cc::CcAlgorithm::Reno,
            v6: None,
            pattern_period: payload::PERIOD as u32,
            open_first: false,
            snd_buf: None,
        }
    }
}

impl GenConfig {
    /// Source address and port of flow `i`.
    pub fn flow_addr(&self, i: u32) -> (Ipv4Addr, u16) {
        let per = u32::from(self.ports_per_ip.max(1));
        let ip = u32::from(self.src_ip).wrapping_add(i / per);
        (
            Ipv4Addr::from(ip),
            self.src_port.wrapping_add((i % per) as u16),
        )
    }

    /// Source address (of the flows' family) and port of flow `i`.
    pub fn flow_ip(&self, i: u32) -> (std::net::IpAddr, u16) {
        let (v4, port) = self.flow_addr(i);
        match self.v6 {
            None => (v4.into(), port),
            Some((src, _)) => {
                let k = i / u32::from(self.ports_per_ip.max(1));
                (
                    std::net::Ipv6Addr::from(u128::from(src).wrapping_add(u128::from(k))).into(),
                    port,
                )
            }
        }
    }

    /// The receiver's address, of the flows' family.
    pub fn dst(&self) -> std::net::IpAddr {
        self.v6.map_or(self.dst_ip.into(), |(_, d)| d.into())
    }

    /// `true` when `ip` is one of the flows' source addresses.
    pub fn owns_ip(&self, ip: Ipv4Addr) -> bool {
        let (last, _) = self.flow_addr(self.flows.saturating_sub(1));
        let base = u32::from(self.src_ip);
        u32::from(ip).wrapping_sub(base) <= u32::from(last).wrapping_sub(base)
    }

    /// The flow owning source address `ip` and port `port`, if any.
    pub fn flow_index(&self, ip: Ipv4Addr, port: u16) -> Option<u32> {
        let per = u32::from(self.ports_per_ip.max(1));
        let di = u32::from(ip).wrapping_sub(u32::from(self.src_ip));
        let dp = u32::from(port.wrapping_sub(self.src_port));
        if dp >= per {
            return None;
        }
        let i = di.checked_mul(per)?.checked_add(dp)?;
        (i < self.flows).then_some(i)
    }

    /// Checks what the types cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.flows == 0 || self.flows > 65_536 {
            return Err(format!("--flows {}: give 1..=65536", self.flows));
        }
        if self.mss < 64 || usize::from(self.mss) > payload::MAX_PAYLOAD {
            return Err(format!(
                "--mss {}: give 64..={}",
                self.mss,
                payload::MAX_PAYLOAD
            ));
        }
        if u32::from(self.src_port) + u32::from(self.ports_per_ip.max(1)) > 65_536 {
            return Err("source ports would run past 65535: lower the first port".into());
        }
        if self.write_size == 0 {
            return Err("--write-size must be positive".into());
        }
        if self.bytes_per_flow.is_none() && self.duration.is_none() {
            return Err("give --bytes-per-flow or --duration".into());
        }
        if self.burst_bytes == Some(0) {
            return Err("--burst-bytes must be positive".into());
        }
        if self.pattern_period == 0 || self.pattern_period as usize > payload::MAX_PERIOD {
            return Err(format!(
                "pattern period {}: give 1..={}",
                self.pattern_period,
                payload::MAX_PERIOD
            ));
        }
        if self.blast && self.v6.is_some() {
            return Err("--blast sends IPv4 only".into());
        }
        if self.init_cwnd == 0 || self.max_cwnd < self.init_cwnd {
            return Err("need 1 <= --init-cwnd <= --max-cwnd".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_forms_parse() {
        assert_eq!("abc:2".parse(), Ok(AckCounting::Abc(2)));
        assert_eq!("per-ack".parse(), Ok(AckCounting::PerAck));
        assert!("abc:0".parse::<AckCounting>().is_err());
        assert_eq!("train:16".parse(), Ok(Interleave::Train(16)));
        assert_eq!("segment".parse(), Ok(Interleave::Segment));
        assert!("train".parse::<Interleave>().is_err());
    }

    #[test]
    fn flow_addresses_round_trip() {
        let c = GenConfig {
            flows: 65_536,
            ..GenConfig::default()
        };
        for i in [0u32, 1, 63_999, 64_000, 65_535] {
            let (ip, port) = c.flow_addr(i);
            assert_eq!(c.flow_index(ip, port), Some(i));
        }
        assert_eq!(
            c.flow_index(Ipv4Addr::new(198, 18, 0, 3), 1024 + 1536),
            None
        );
        assert_eq!(c.flow_index(Ipv4Addr::new(198, 18, 0, 2), 80), None);
        // 65,536 flows at 64,000 ports per address: two source addresses.
        assert!(c.owns_ip(c.src_ip));
        assert!(c.owns_ip(Ipv4Addr::new(198, 18, 0, 3)));
        assert!(!c.owns_ip(Ipv4Addr::new(198, 18, 0, 4)));
        assert!(!c.owns_ip(Ipv4Addr::new(198, 18, 0, 1)));
        let one = GenConfig::default();
        assert!(one.owns_ip(one.src_ip));
        assert!(!one.owns_ip(Ipv4Addr::new(198, 18, 0, 3)));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod pipeline_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod engine_tests;
