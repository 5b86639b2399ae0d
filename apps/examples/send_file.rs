//! A client on weir's TCP: resolves the peer's MAC address (ARP, or neighbour discovery
//! for IPv6), connects to ADDR:PORT, sends a file (or `--mb N` of seeded pseudo-random
//! bytes), shuts down its write side, waits for the peer to close, and exits 0. It prints
//! the SHA-256 of what it sent. A DPDK port (by default a net_tap vdev, `--no-pci`, as weir-sink's embedded
//! default), one core, the stack's call order written out in `run`.
//!
//! Writes follow the send buffer: a write that `Tcp::send` takes only in part waits for
//! `Event::Writable`, which fires when acknowledgments free space.
//!
//! ```text
//! cargo build --release -p apps --example send_file
//! target/release/examples/send_file --connect 198.18.0.2:5001 --mb 200 [--impair ...] [--stats-json FILE]
//! ```
//!
//! scripts/e2e/send.sh runs it against the Linux kernel's socat in a network namespace
//! (the README has the commands).

use std::fs::File;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use anyhow::{anyhow, bail, Context, Result};
use apps::net::{self, Net, NetArgs, Resolver};
use clap::Parser;
use dpdk::{Mbuf, StashPool};
use serde_json::json;
use sha2::{Digest, Sha256};
use stack::driver::Burst;
use stack::impair::Rng;
use stack::pipeline::Pipeline;
use stack::tcp::{ConnId, ConnectOpts, Event, State, TcpConfig};
use stack::time::{Duration, Instant};

/// The client's options (after `--` when EAL options are given).
#[derive(Parser, Debug)]
#[command(
    name = "send_file",
    about = "Connect with weir's TCP and send a file (or seeded bytes); print its SHA-256.",
    after_help = "Usage forms:\n  send_file [OPTIONS]                      embedded default: a net_tap vdev 'weirtap0', --no-pci\n  send_file [EAL OPTIONS] -- [OPTIONS]     DPDK's usual form"
)]
struct Args {
    #[command(flatten)]
    net: NetArgs,
    /// Where to connect: IPv4 (the address is resolved by ARP) or IPv6 (`[ADDR]:PORT`,
    /// resolved by neighbour discovery).
    #[arg(long, value_name = "ADDR:PORT")]
    connect: SocketAddr,
    /// The file to send.
    #[arg(long, value_name = "PATH", conflicts_with = "mb")]
    file: Option<PathBuf>,
    /// Instead of a file: this many MiB of pseudo-random bytes from `--seed`.
    #[arg(long, value_name = "MB", required_unless_present = "file")]
    mb: Option<u64>,
    /// The seed of `--mb`'s bytes.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// The next hop's MAC address (aa:bb:cc:dd:ee:ff): no ARP or neighbour discovery.
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    peer_mac: Option<[u8; 6]>,
    /// Give up when nothing answers ARP (or neighbour discovery) for this many seconds.
    #[arg(long, value_name = "S", default_value_t = 10)]
    arp_timeout: u64,
    /// Give up when the transfer has not ended after this many seconds.
    #[arg(long, value_name = "S", default_value_t = 300)]
    timeout: u64,
}

fn parse_mac(s: &str) -> std::result::Result<[u8; 6], String> {
    let mut m = [0u8; 6];
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!(
            "'{s}': expected six hexadecimal bytes, aa:bb:cc:dd:ee:ff"
        ));
    }
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16)
            .map_err(|_| format!("'{s}': '{p}' is not a hexadecimal byte"))?;
    }
    Ok(m)
}

/// Bytes read or generated at a time.
const CHUNK: usize = 64 * 1024;

/// Where the bytes come from.
enum Source {
    File(File),
    Seeded { rng: Rng, left: u64 },
}

impl Source {
    /// Fills `buf` with the next bytes (empty at the end).
    fn next(&mut self, buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        match self {
            Source::File(f) => {
                buf.resize(CHUNK, 0);
                let n = f.read(buf).context("reading the file")?;
                buf.truncate(n);
            }
            Source::Seeded { rng, left } => {
                let n = (*left).min(CHUNK as u64) as usize;
                while buf.len() < n {
                    buf.extend_from_slice(&rng.next_u64().to_le_bytes());
                }
                buf.truncate(n);
                *left -= n as u64;
            }
        }
        Ok(())
    }
}

/// Where the client is.
enum Phase {
    /// Waiting for the peer's MAC address.
    Resolving(Resolver),
    /// The connection: opening, then sending.
    Open(ConnId),
    /// The connection reached TIME-WAIT (or closed) at this instant: it lingers a moment
    /// to acknowledge a retransmitted FIN, then the program ends.
    Done(Instant),
}

/// The writer: the source, the chunk being written, the digest of every byte taken.
struct Sender {
    source: Source,
    chunk: Vec<u8>,
    off: usize,
    hasher: Sha256,
    taken: u64,
    /// The source is exhausted and the write side shut down.
    finished: bool,
    /// Writes `Tcp::send` took only in part (then `Event::Writable` resumed them).
    blocked: u64,
    received: u64,
}

impl Sender {
    /// Writes until the send buffer is full (a short write: `Event::Writable` follows)
    /// or the source ends (then the write side is shut down: FIN after the data).
    fn fill(
        &mut self,
        p: &mut Pipeline<Mbuf>,
        pool: &mut StashPool,
        now: Instant,
        id: ConnId,
    ) -> Result<()> {
        while !self.finished {
            if self.off == self.chunk.len() {
                self.source.next(&mut self.chunk)?;
                self.off = 0;
                if self.chunk.is_empty() {
                    p.tcp().shutdown(now, id)?;
                    self.finished = true;
                    break;
                }
                self.hasher.update(&self.chunk);
            }
            let n = p.tcp().send(now, id, &self.chunk[self.off..], pool)?;
            self.off += n;
            self.taken += n as u64;
            if self.off < self.chunk.len() {
                self.blocked += 1;
                break;
            }
        }
        Ok(())
    }

    /// Steps 2 and 3 of the call order for the one connection.
    fn serve(
        &mut self,
        p: &mut Pipeline<Mbuf>,
        pool: &mut StashPool,
        now: Instant,
        id: ConnId,
    ) -> Result<()> {
        while let Some(ev) = p.tcp().poll_event() {
            match ev {
                Event::Opened(c) | Event::Writable(c) if c == id => self.fill(p, pool, now, id)?,
                // The peer sends nothing in this protocol; whatever it does is read and
                // dropped, so its window never closes on it.
                Event::Readable(c) | Event::PeerClosed(c) if c == id => {
                    let n = p.tcp().recv(id, |s| s.iter().map(|s| usize::from(s.len)).sum())?;
                    self.received += n as u64;
                }
                Event::Reset(c) if c == id && self.taken == 0 && p.tcp().stats().conns_opened == 0 => {
                    bail!("the connection was refused (a RST answered the SYN) or no SYN-ACK came")
                }
                Event::Reset(c) if c == id => bail!(
                    "the connection was reset after {} bytes were written (a RST from the peer, or retransmissions spent: see tcp_rto_timeouts in the stats)",
                    self.taken
                ),
                _ => {}
            }
        }
        Ok(())
    }
}

fn main() -> ExitCode {
    let (args, eal) = match net::parse_args::<Args>("send_file", std::env::args().collect()) {
        Ok(a) => a,
        Err(code) => return code,
    };
    if let Err(e) = apps::logs::init(None) {
        eprintln!("send_file: error: {e:#}");
        return ExitCode::from(2);
    }
    match run(args, eal) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("send_file: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(args: Args, eal: Option<Vec<String>>) -> Result<()> {
    let source = match (&args.file, args.mb) {
        (Some(path), _) => {
            Source::File(File::open(path).with_context(|| format!("opening {}", path.display()))?)
        }
        (None, Some(mb)) => Source::Seeded {
            rng: Rng::new(args.seed),
            left: mb << 20,
        },
        (None, None) => bail!("give --file PATH or --mb N"),
    };
    let stop = net::stop_on_signal()?;
    let net = Net::open("send_file", eal, &args.net)?;
    let mut link = net.link()?;
    let mut tcp = TcpConfig {
        seed: net::random_seed(),
        ..TcpConfig::default()
    };
    net.size_tcp(&mut tcp, Some(1))?;
    let mut p: Pipeline<Mbuf> = Pipeline::new(net.pipeline_config(tcp, &[]))
        .map_err(|e| anyhow!("cannot set up TCP: {e}"))?;
    let peer = args.connect.ip();
    let local = match peer {
        IpAddr::V4(_) => IpAddr::V4(net.ip),
        IpAddr::V6(_) => IpAddr::V6(net.ip6),
    };
    let mut sender = Sender {
        source,
        chunk: Vec::with_capacity(CHUNK),
        off: 0,
        hasher: Sha256::new(),
        taken: 0,
        finished: false,
        blocked: 0,
        received: 0,
    };
    let arp_timeout = Duration::from_secs(args.arp_timeout);
    let connect = |p: &mut Pipeline<Mbuf>, now: Instant, mac: [u8; 6]| {
        p.tcp()
            .connect(now, local, args.connect, ConnectOpts::new(net.mac, mac))
            .map_err(|e| anyhow!("connect to {}: {e}", args.connect))
    };
    let started = link.now();
    let mut phase = match args.peer_mac {
        Some(mac) => Phase::Open(connect(&mut p, started, mac)?),
        None => Phase::Resolving(Resolver::new(net.mac, local, peer, arp_timeout)),
    };
    let give_up = started + Duration::from_secs(args.timeout);
    let linger = Duration::from_millis(500);
    let (mut rx, mut tx): (Burst<Mbuf>, Burst<Mbuf>) = (Burst::new(), Burst::new());
    let mut iterations = 0u64;
    let mut opened_at = None;
    let mut done_at = None;
    let mut arp_requests = 0;
    let outcome = loop {
        let now = link.now();
        link.rx_burst(now, &mut rx);
        if let Phase::Resolving(r) = &mut phase {
            r.handle_rx(&rx);
        }
        p.handle_rx_burst(now, &mut rx);
        let mut r = Ok(());
        if let Phase::Open(id) = phase {
            r = sender.serve(&mut p, link.pool(), now, id);
        }
        p.handle_timeout(now);
        if let (Ok(()), Phase::Open(id)) = (&r, &phase) {
            r = sender.serve(&mut p, link.pool(), now, *id);
        }
        if r.is_err() {
            break r;
        }
        match &mut phase {
            Phase::Resolving(res) => {
                if let Some(mac) = res.mac() {
                    arp_requests = res.requests;
                    let m = mac.map(|b| format!("{b:02x}")).join(":");
                    println!(
                        "send_file: {peer} is at {m}; connecting to {}",
                        args.connect
                    );
                    phase = Phase::Open(connect(&mut p, now, mac)?);
                } else if res.gave_up(now) {
                    break Err(anyhow!(
                        "nothing answered {} for {peer} within {} s ({} requests): is the peer's address on the tap, and the tap up?",
                        if peer.is_ipv4() { "ARP" } else { "neighbour discovery" },
                        args.arp_timeout,
                        res.requests
                    ));
                } else {
                    res.poll_tx(now, link.pool(), &mut tx);
                }
            }
            Phase::Open(id) => {
                let state = p.tcp().info(*id).map(|i| i.state);
                if opened_at.is_none()
                    && !matches!(state, Some(State::SynSent | State::SynReceived))
                {
                    opened_at = Some(now);
                }
                // Our FIN is acknowledged and the peer's received: TIME-WAIT.
                if sender.finished && matches!(state, Some(State::TimeWait | State::Closed) | None)
                {
                    phase = Phase::Done(now);
                    done_at = Some(now);
                }
            }
            Phase::Done(at) => {
                if now.saturating_since(*at) >= linger && link.tx_held() == 0 {
                    break Ok(());
                }
            }
        }
        p.poll_tx(now, link.pool(), &mut tx);
        link.tx_burst(now, &mut tx);
        iterations += 1;
        if iterations % 4096 == 0 {
            link.note_pool();
        }
        if iterations % 1024 == 0 {
            if stop.load(Ordering::Relaxed) {
                break Err(anyhow!(
                    "stopped by a signal after {} bytes were written",
                    sender.taken
                ));
            }
            if now >= give_up {
                break Err(anyhow!(
                    "the transfer did not end within {} s ({} bytes written)",
                    args.timeout,
                    sender.taken
                ));
            }
        }
    };
    let now = link.now();
    if let Phase::Open(id) = phase {
        let _ = p.tcp().abort(id);
        p.poll_tx(now, link.pool(), &mut tx);
        link.tx_burst(now, &mut tx);
    }
    // From the handshake to TIME-WAIT (the linger left out).
    let end = done_at.unwrap_or(now);
    let elapsed = opened_at.map_or(0.0, |t| end.saturating_since(t).as_nanos() as f64 / 1e9);
    let stats = p.stats();
    let ls = link.stats();
    drop(p);
    let in_use = net.close(link)?;
    let sha = hex(&sender.hasher.finalize());
    println!(
        "send_file: {} bytes sent, sha256 {sha}, {} segments, {} retransmitted, {:.0} Mbit/s, {} mbufs in use at exit",
        sender.taken,
        stats.tcp.data_segments_sent,
        stats.tcp.retransmits,
        if elapsed > 0.0 { sender.taken as f64 * 8.0 / elapsed / 1e6 } else { 0.0 },
        in_use
    );
    if let Some(path) = &args.net.stats_json {
        let extra = json!({
            "send_bytes": sender.taken,
            "send_sha256": sha,
            "send_complete": outcome.is_ok(),
            "send_blocked_writes": sender.blocked,
            // ARP requests, or neighbour solicitations for IPv6.
            "arp_requests": arp_requests,
            "peer_resolved": args.peer_mac.is_some() || arp_requests > 0,
            "bytes_received": sender.received,
            "duration_s": elapsed,
        });
        net::write_json(path, &net::report_json(&stats, &ls, in_use, extra))?;
    }
    outcome
}

/// Lower-case hexadecimal, as `sha256sum` prints a digest.
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
