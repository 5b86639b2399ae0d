//! `weir-gen`: the program. `weir-gen [EAL options] -- [options]`.

use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use dpdk::{Clock, Eal, Mbuf, Mempool, Port, PortConfig};
use serde_json::json;
use stack::time::Duration;

use super::driver::{self, GenIo, GenReport, RunOpts};
use super::pool::GenPool;
use super::sender::{CwndSummary, GenStats};
use super::{AckCounting, Gen, GenConfig, Interleave, PshMode, Sender};
use crate::eal_args;

/// weir-gen's own options (after `--` when EAL options are given).
#[derive(Parser, Debug, Clone)]
#[command(
    name = "weir-gen",
    version,
    about = "Emulated TCP senders on a DPDK port: handshake, slow start and congestion avoidance with a chosen ACK-counting rule, FIN.",
    after_help = "Usage forms:\n  weir-gen [OPTIONS]                      embedded default: a net_tap vdev 'weirgen0', --no-pci\n  weir-gen [EAL OPTIONS] -- [OPTIONS]     DPDK's usual form, e.g. weir-gen -l 2 -a 0000:3b:00.1 -- --dst-ip 10.0.0.1 --flows 64\n\nweir-bench e2e runs weir-gen against weir-sink in one process over a ring pair."
)]
pub struct GenArgs {
    /// Number of flows (1..=65536).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub flows: u32,
    /// The receiver's address, IPv4 or IPv6 (the flows' family).
    #[arg(long, value_name = "ADDR", default_value = "198.18.0.1")]
    pub dst_ip: IpAddr,
    /// The first source address (flows beyond --ports-per-ip use the next ones).
    #[arg(
        long,
        value_name = "ADDR",
        help = "The first source address (flows beyond --ports-per-ip use the next ones) [default: 198.18.0.2, or 2001:2::2 for an IPv6 --dst-ip]"
    )]
    pub src_ip: Option<IpAddr>,
    /// The first source port.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub src_port: u16,
    /// Source ports per source address.
    #[arg(long, value_name = "N", default_value_t = 64_000,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub ports_per_ip: u16,
    /// The receiver's TCP port.
    #[arg(long, value_name = "N", default_value_t = 5001)]
    pub dst_port: u16,
    /// The receiver's MAC (aa:bb:cc:dd:ee:ff); default: resolve it with ARP, asking every
    /// 100 ms. With no reply within 30 s (or before --duration ends) every flow fails and
    /// weir-gen exits 1, naming the address.
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    pub dst_mac: Option<[u8; 6]>,
    /// Payload bytes of a full segment (1448 = a 1500-byte MTU with timestamps).
    #[arg(long, default_value_t = 1448)]
    pub mss: u16,
    /// Bytes per application write; segments never span two writes.
    #[arg(long, value_name = "BYTES", default_value_t = 65_536,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub write_size: u32,
    /// PSH on the last segment of every write, or never.
    #[arg(long, value_enum, default_value_t = PshMode::EveryWrite)]
    pub psh: PshMode,
    /// Bytes each flow sends, then FIN (default: send for --duration).
    #[arg(long, value_name = "BYTES")]
    pub bytes_per_flow: Option<u64>,
    /// Seconds of data (then FIN); default 10 unless --bytes-per-flow is given.
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Bursts: each flow writes this many bytes, waits for their ACK and --gap-ms.
    #[arg(long, value_name = "BYTES")]
    pub burst_bytes: Option<u64>,
    /// Idle milliseconds between bursts.
    #[arg(long, value_name = "MS", default_value_t = 20)]
    pub gap_ms: u64,
    /// Slow-start ACK counting: per-ack, abc:L (RFC 3465) or bytes (Linux).
    #[arg(long, value_name = "RULE", default_value = "bytes", value_parser = parse_counting)]
    pub ack_counting: AckCounting,
    /// How flows share the wire: segment (round-robin) or train:N (TSO-like trains).
    #[arg(long, value_name = "MODE", default_value = "segment", value_parser = parse_interleave)]
    pub interleave: Interleave,
    /// Initial congestion window in segments (Linux: 10).
    #[arg(long, value_name = "SEGS", default_value_t = 10)]
    pub init_cwnd: u32,
    /// Largest congestion window in segments (e.g. 45 for a 64 KiB window-limited sender).
    #[arg(long, value_name = "SEGS", default_value_t = 1 << 20)]
    pub max_cwnd: u32,
    /// Handshakes in progress at once.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_half_open: u32,
    /// Open loop: no handshake, ignore ACKs and windows, send at full speed.
    #[arg(long)]
    pub blast: bool,
    /// DPDK port id (default: the first probed port).
    #[arg(long, value_name = "ID")]
    pub eth_port: Option<u16>,
    /// Mbufs in the transmit pool.
    #[arg(long, value_name = "N", default_value_t = 32_767)]
    pub mbufs: u32,
    /// Copy each segment's payload into its frame instead of chaining a slice of one
    /// shared copy behind the headers by reference (the default when the port can send
    /// chained mbufs).
    #[arg(long)]
    pub copy_payload: bool,
    /// Write the totals as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No progress lines.
    #[arg(long)]
    pub quiet: bool,
    /// Name of the tap interface the embedded default creates (ignored with EAL options).
    #[arg(long, value_name = "NAME", default_value = "weirgen0")]
    pub tap_iface: String,
    /// Read options from a TOML file (keys are the long options, e.g. `flows = 64`);
    /// options on the command line override it (see apps/src/config.rs).
    #[arg(long = "config", value_name = "FILE")]
    pub config_file: Option<std::path::PathBuf>,
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let mut mac = [0u8; 6];
    if parts.len() != 6 {
        return Err(format!("{s:?}: expected six hex bytes separated by ':'"));
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(|_| format!("{s:?}: bad hex byte {p:?}"))?;
    }
    Ok(mac)
}

fn parse_counting(s: &str) -> Result<AckCounting, String> {
    s.parse()
}

fn parse_interleave(s: &str) -> Result<Interleave, String> {
    s.parse()
}

impl GenArgs {
    /// The sender configuration these options describe (MACs filled in by the caller).
    pub fn config(&self) -> Result<GenConfig> {
        let duration = match (self.duration, self.bytes_per_flow) {
            (Some(d), _) if !(d.is_finite() && d > 0.0) => {
                return Err(anyhow!("--duration {d}: give a positive number of seconds"))
            }
            (Some(d), _) => Some(Duration::from_nanos((d * 1e9) as u64)),
            (None, Some(_)) => None,
            (None, None) => Some(Duration::from_secs(10)),
        };
        let (src_ip, dst_ip, v6) = match (self.dst_ip, self.src_ip) {
            (IpAddr::V4(d), None) => (GenConfig::default().src_ip, d, None),
            (IpAddr::V4(d), Some(IpAddr::V4(s))) => (s, d, None),
            (IpAddr::V6(d), None) => {
                let def = GenConfig::default();
                (
                    def.src_ip,
                    def.dst_ip,
                    Some((Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2), d)),
                )
            }
            (IpAddr::V6(d), Some(IpAddr::V6(s))) => {
                let def = GenConfig::default();
                (def.src_ip, def.dst_ip, Some((s, d)))
            }
            (d, Some(s)) => {
                return Err(anyhow!(
                    "--src-ip {s} and --dst-ip {d} are of different families"
                ))
            }
        };
        let cfg = GenConfig {
            flows: self.flows,
            dst_mac: self.dst_mac,
            src_ip,
            dst_ip,
            v6,
            src_port: self.src_port,
            ports_per_ip: self.ports_per_ip,
            dst_port: self.dst_port,
            mss: self.mss,
            write_size: self.write_size,
            psh: self.psh,
            bytes_per_flow: self.bytes_per_flow,
            duration,
            burst_bytes: self.burst_bytes,
            gap: Duration::from_millis(self.gap_ms),
            ack_counting: self.ack_counting,
            interleave: self.interleave,
            init_cwnd: self.init_cwnd,
            max_cwnd: self.max_cwnd,
            blast: self.blast,
            max_half_open: self.max_half_open.max(1),
            seed: seed(),
            ..GenConfig::default()
        };
        cfg.validate().map_err(|e| anyhow!(e))?;
        Ok(cfg)
    }
}

/// A seed from the OS's randomness, for initial sequence numbers.
fn seed() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    u64::from_le_bytes(b) ^ u64::from(std::process::id())
}

/// A pool whose data segments carry the payload pattern by reference (see
/// [`super::pool`]): one read-only copy of the pattern, and `mbufs` data-less mbufs to
/// point into it. `None` when the pattern is too long for one mbuf (periods above about
/// 56,000 bytes): the payload is then copied.
fn shared_pool(
    eal: &Eal,
    plain: dpdk::PortPool,
    mbufs: u32,
    cfg: &GenConfig,
) -> Result<Option<GenPool>> {
    let payload = super::payload::Payload::with_period(cfg.pattern_period as usize);
    let bytes = payload.as_bytes();
    let Some(room) = u16::try_from(bytes.len() + 128).ok() else {
        return Ok(None);
    };
    let copies = super::pool::pattern_copies(u64::from(mbufs));
    let big = Mempool::new(eal, "weir_gen_pattern", copies as u32, 0, room)
        .context("creating the pool for the shared payload (or pass --copy-payload)")?;
    let refs = Mempool::new(eal, "weir_gen_refs", mbufs, 256, 0)
        .context("creating the pool of payload references (or pass --copy-payload)")?;
    let data = super::pool::share_copies(&big, bytes, copies).map_err(|e| anyhow!(e))?;
    Ok(Some(GenPool::with_shared(plain, refs, data)))
}

/// The pools of weir-gen on the stack: `plain` for every frame, the payload pattern in one
/// shared mbuf that the flows' write buffers refer to (an mbuf each from a pool sized for
/// every flow's send buffer, [`super::engine::slices_needed`], plus one per chained
/// segment in flight), chained into data segments by reference when `chain`.
pub fn pattern_pool(
    eal: &Eal,
    plain: GenPool,
    mbufs: u32,
    cfg: &GenConfig,
    chain: bool,
) -> Result<GenPool> {
    let period = cfg.pattern_period as usize;
    let payload = super::payload::Payload::with_period(period);
    let bytes = payload.as_bytes();
    let room = u16::try_from(bytes.len() + 128).map_err(|_| {
        anyhow!(
            "the payload pattern ({} bytes) does not fit an mbuf",
            bytes.len()
        )
    })?;
    let refs_n =
        (super::engine::slices_needed(cfg) + u64::from(mbufs)).min(u64::from(u32::MAX / 2));
    let copies = super::pool::pattern_copies(refs_n);
    let big = Mempool::new(eal, "weir_gen_pattern", copies as u32, 0, room)
        .context("creating the pool for the payload pattern")?;
    let refs = Mempool::new(eal, "weir_gen_refs", refs_n as u32, 256, 0)
        .with_context(|| format!("creating the pool of {refs_n} payload references (fewer --flows, or more memory with -m)"))?;
    let data = super::pool::share_copies(&big, bytes, copies).map_err(|e| anyhow!(e))?;
    Ok(plain.with_pattern(data, refs, period, chain))
}

fn cc_name(c: stack::tcp::cc::CcAlgorithm) -> &'static str {
    match c {
        stack::tcp::cc::CcAlgorithm::Reno => "reno",
        stack::tcp::cc::CcAlgorithm::Cubic => "cubic",
    }
}

/// The report as JSON (for `--json` and `weir-bench`).
pub fn report_json(r: &GenReport) -> serde_json::Value {
    let s = &r.stats;
    let secs = r.data_ns as f64 / 1e9;
    json!({
        "segments": s.segments,
        "bytes": s.bytes,
        "retransmits": s.retransmits,
        "retransmit_bytes": s.retransmit_bytes,
        "ctl_segments": s.ctl_segments,
        "acks": s.acks,
        "acks_new_data": s.acks_new_data,
        "dupacks": s.dupacks,
        "fast_retransmits": s.fast_retransmits,
        "rtos": s.rtos,
        "syn_retransmits": s.syn_retransmits,
        "established": s.established,
        "closed": s.closed,
        "resets": s.resets,
        "timeouts": s.timeouts,
        "not_started": s.not_started,
        "unresolved": s.unresolved,
        "alloc_failures": s.alloc_failures,
        "shared_payload_segments": s.shared,
        "payload_refs_exhausted": s.refs_exhausted,
        "payload_source_empty": s.source_empty,
        "write_pieces": s.write_pieces,
        "rx_ignored": s.rx_ignored,
        "rx_bad_checksum": s.rx_bad_checksum,
        "resets_ignored": s.resets_ignored,
        "arp_replies": s.arp_replies,
        "arp_replies_dropped": s.arp_replies_dropped,
        "data_seconds": secs,
        "segments_per_s": if secs > 0.0 { s.segments as f64 / secs } else { 0.0 },
        "payload_gbit_s": if secs > 0.0 { s.bytes as f64 * 8.0 / secs / 1e9 } else { 0.0 },
        "segments_per_ack": if s.acks > 0 { s.segments as f64 / s.acks as f64 } else { 0.0 },
        "time_to_full_rate_ms": {
            "bursts": s.ramps,
            "mean": if s.ramps > 0 { s.ramp_ns_sum as f64 / s.ramps as f64 / 1e6 } else { 0.0 },
            "max": s.ramp_ns_max as f64 / 1e6,
        },
        "cwnd_segments": {
            "min": r.cwnd.min, "median": r.cwnd.median, "max": r.cwnd.max, "mean": r.cwnd.mean,
        },
        "finished": r.finished,
        "elapsed_seconds": r.elapsed_ns as f64 / 1e9,
    })
}

/// Human-readable totals.
pub fn summary(r: &GenReport) -> String {
    let s = &r.stats;
    let secs = (r.data_ns as f64 / 1e9).max(1e-9);
    let mut dropped = String::new();
    if s.rx_bad_checksum > 0 || s.resets_ignored > 0 {
        dropped = format!(
            "\nreceived and not acted on: {} frames with a wrong checksum, {} RSTs not at the expected sequence number",
            s.rx_bad_checksum, s.resets_ignored
        );
    }
    format!(
        "weir-gen: {} segments ({} retransmitted), {:.3} Gbit/s payload, {:.0} seg/s over {:.2} s; {} ACKs ({:.1} seg/ACK), {} dupacks, {} fast retransmits, {} RTOs\n\
         flows: {} established, {} closed cleanly, {} reset, {} timed out, {} never started; cwnd (segments) min {} median {} max {}; time to full rate mean {:.2} ms, max {:.2} ms over {} bursts{}",
        s.segments,
        s.retransmits,
        s.bytes as f64 * 8.0 / secs / 1e9,
        s.segments as f64 / secs,
        secs,
        s.acks,
        if s.acks > 0 { s.segments as f64 / s.acks as f64 } else { 0.0 },
        s.dupacks,
        s.fast_retransmits,
        s.rtos,
        s.established,
        s.closed,
        s.resets,
        s.timeouts,
        s.not_started,
        r.cwnd.min,
        r.cwnd.median,
        r.cwnd.max,
        if s.ramps > 0 { s.ramp_ns_sum as f64 / s.ramps as f64 / 1e6 } else { 0.0 },
        s.ramp_ns_max as f64 / 1e6,
        s.ramps,
        dropped,
    )
}

/// Entry point: parses the command line, runs, and maps errors to one line and an exit
/// code (2 for usage errors, 1 for run-time errors).
pub fn main(argv: Vec<String>) -> ExitCode {
    let (args, split) = match eal_args::parse_program::<GenArgs>("weir-gen", argv) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    let cfg = match args.config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("weir-gen: error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args, cfg, split.eal) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("weir-gen: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Sets up DPDK and the port, runs the generator on the main lcore and reports. Returns
/// whether every started flow closed cleanly.
pub fn run(args: &GenArgs, mut cfg: GenConfig, eal: Option<Vec<String>>) -> Result<bool> {
    let eal_argv = eal.unwrap_or_else(|| eal_args::default_eal("weir-gen", &args.tap_iface, 1));
    let eal = Eal::init(&eal_argv).context("starting DPDK (EAL)")?;
    let port_id = match args.eth_port {
        Some(p) => p,
        None => *eal.ports().first().ok_or_else(|| {
            anyhow!("no Ethernet port was probed: pass a device in the EAL options (--vdev=net_tap0 for a tap, or -a PCI_ADDRESS for a NIC bound to vfio-pci)")
        })?,
    };
    let pool = Mempool::new(&eal, "weir_gen", args.mbufs, 256, dpdk::DEFAULT_DATA_ROOM)
        .context("creating the mbuf pool (try fewer --mbufs, or more memory with -m)")?;
    let port_cfg = PortConfig {
        multi_seg_tx: !args.copy_payload,
        ..PortConfig::default()
    };
    let mut port = Port::configure(&eal, port_id, pool, &port_cfg)
        .with_context(|| format!("configuring port {port_id}"))?;
    port.start()
        .with_context(|| format!("starting port {port_id}"))?;
    cfg.src_mac = port.mac()?;
    let off = port.offloads();
    cfg.tx_csum_offload = port.tx_csum_caps().ipv4_tcp();
    let chain = off.tx_multi_segs() && !args.copy_payload;
    let gen_pool = if cfg.blast {
        // The frame generator: its own payload sharing.
        match chain {
            true => shared_pool(&eal, pool.for_port(port_id), args.mbufs, &cfg)?,
            false => None,
        }
        .unwrap_or_else(|| GenPool::plain(pool.for_port(port_id)))
    } else {
        pattern_pool(
            &eal,
            GenPool::plain(pool.for_port(port_id)),
            args.mbufs,
            &cfg,
            chain,
        )?
    };
    let payload_mode = if chain {
        "shared by reference"
    } else {
        "copied"
    };
    eprintln!(
        "weir-gen {} on DPDK {}: port {port_id}, {} flows -> {}:{}, mss {}, {}, ack counting {}, interleave {}, tx csum offload {}, payload {payload_mode}",
        env!("CARGO_PKG_VERSION"),
        Eal::version(),
        cfg.flows,
        cfg.dst(),
        cfg.dst_port,
        cfg.mss,
        if cfg.blast { "open loop (no TCP)".to_string() } else { format!("weir TCP, {}", cc_name(cfg.cc)) },
        cfg.ack_counting,
        cfg.interleave,
        if cfg.tx_csum_offload { "on" } else { "off" },
    );
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .context("installing the SIGINT/SIGTERM handler")?;
    }
    // A real port: the receiving NIC gives its own checksum verdicts.
    let mut io = GenIo::new(
        port.rx_queue(0)?,
        port.tx_queue(0)?,
        gen_pool,
        Clock::new(&eal),
        false,
    );
    let duration = cfg.duration;
    // Every flow sends the same pattern from its first byte: with a byte count, the
    // receiver's SHA-256 of each connection must be this.
    let stream_sha256 = cfg.bytes_per_flow.map(|n| {
        crate::sink::hex(&super::payload::stream_digest_in(
            n,
            cfg.pattern_period as usize,
        ))
    });
    if let Some(d) = &stream_sha256 {
        eprintln!(
            "each flow's {} bytes have SHA-256 {d}",
            cfg.bytes_per_flow.unwrap_or(0)
        );
    }
    let dst_ip = cfg.dst();
    let quiet = args.quiet;
    // A bar over the sending time when it is known (hidden when stderr is not a
    // terminal; the per-second lines then go to stdout as before).
    let pb = duration
        .filter(|_| !quiet)
        .map(|d| crate::progress::timed(d.as_nanos() as f64 / 1e9, "weir-gen sending"));
    let mut last = (0u64, 0u64);
    let mut line = |st: &GenStats, c: CwndSummary, t: Duration| {
        if quiet {
            return;
        }
        if let Some(pb) = &pb {
            pb.set_position(t.as_nanos() / 1_000_000);
        }
        let (segs, bytes) = (st.segments - last.0, st.bytes - last.1);
        last = (st.segments, st.bytes);
        let line = format!(
            "{:>6.1}s  {:>7.3} Gbit/s  {:>9} seg/s  {} ACKs  {} retx  established {} closed {}  cwnd median {}",
            t.as_nanos() as f64 / 1e9,
            bytes as f64 * 8.0 / 1e9,
            segs,
            st.acks,
            st.retransmits,
            st.established,
            st.closed,
            c.median
        );
        match &pb {
            Some(pb) if !pb.is_hidden() => pb.println(line),
            _ => println!("{line}"),
        }
    };
    let grace = Duration::from_secs(10);
    let day = Duration::from_secs(24 * 3600);
    let report = if cfg.blast {
        let mut sender = Sender::new(cfg);
        let mut tick = |s: &mut Sender, t: Duration| line(s.stats(), s.cwnd_summary(), t);
        driver::run(
            &mut sender,
            &mut io,
            RunOpts {
                stop: &stop,
                close_grace: grace,
                max_runtime: day,
                tick: Some(&mut tick),
                linger: Duration::from_millis(200),
                phase: None,
            },
        )
    } else {
        let mut gen: Gen<Mbuf> = Gen::new(cfg).map_err(|e| anyhow!(e))?;
        let mut tick = |g: &mut Gen<Mbuf>, t: Duration| {
            let st = g.stats();
            let c = g.cwnd_summary();
            line(&st, c, t)
        };
        driver::run(
            &mut gen,
            &mut io,
            RunOpts {
                stop: &stop,
                close_grace: grace,
                max_runtime: day,
                tick: Some(&mut tick),
                linger: Duration::from_millis(200),
                phase: None,
            },
        )
    };
    drop(io);
    if let Some(pb) = &pb {
        pb.finish_and_clear();
    }
    println!("{}", summary(&report));
    if report.stats.unresolved > 0 {
        eprintln!(
            "weir-gen: error: nothing answered {} for {dst_ip} on port {port_id} ({:.1} s of \
             requests, one every {} ms): is the receiver running there, and is --dst-ip its \
             address?",
            if dst_ip.is_ipv4() {
                "ARP"
            } else {
                "neighbour discovery"
            },
            report.elapsed_ns as f64 / 1e9,
            super::ARP_EVERY.as_nanos() / 1_000_000
        );
    }
    if let Some(path) = &args.json {
        let mut j = report_json(&report);
        if let (Some(d), Some(o)) = (&stream_sha256, j.as_object_mut()) {
            o.insert("stream_sha256".into(), d.clone().into());
        }
        let text = serde_json::to_string_pretty(&j)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    let s = &report.stats;
    Ok(report.finished && s.resets == 0 && s.timeouts == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `--dst-mac`'s help states how long the ARP resolution lasts: the sender's limit.
    #[test]
    fn dst_mac_help_states_the_arp_limit() {
        let cmd = GenArgs::command();
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id() == "dst_mac")
            .expect("--dst-mac");
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        let secs = crate::gen::ARP_GIVE_UP.as_nanos() / 1_000_000_000;
        assert!(help.contains(&format!("within {secs} s")), "{help}");
    }
}
