//! An echo server on weir's TCP: every byte a connection receives is written back, on
//! any number of connections at once, until the peer closes (then our FIN follows the
//! last echoed byte). A DPDK port (by default a net_tap vdev, `--no-pci`, as weir-sink's
//! embedded default), one core, the stack's call order written out in `run`.
//!
//! No copy by default: `Tcp::recv_bufs` takes the received buffers out of the receive
//! queue, as many as the send buffer has room for (`Tcp::writable_bytes`), and
//! `Tcp::send_bufs` queues those same buffers to be sent back. Backpressure, never a
//! dropped byte: what the send queue did not take (its slice bound can stop it before
//! its byte room) waits in the connection's `pending` chain (at most one chain, 64
//! buffers) for `Event::Writable`, and the rest stays in the receive queue, whose window
//! then closes on the peer. When the send buffer is full, one buffer is still taken and
//! offered, so that the short write arms `Event::Writable`.
//!
//! With `--copy`, the copying path instead: the bytes are copied out of the receive
//! queue without consuming them, written with `Tcp::send` (into buffers from the pool),
//! and as many as it took are consumed.
//!
//! ```text
//! cargo build --release -p apps --example echo
//! target/release/examples/echo --port 7007 [--copy] [--impair loss=1%,reorder=2%,dup=1%] [--stats-json FILE]
//! ```
//!
//! scripts/e2e/send.sh runs it against the Linux kernel in a network namespace (the
//! README has the commands).

use std::process::ExitCode;
use std::sync::atomic::Ordering;

use anyhow::{anyhow, Result};
use apps::net::{self, Net, NetArgs};
use clap::Parser;
use dpdk::{Mbuf, StashPool};
use serde_json::json;
use stack::buf::PayloadChain;
use stack::driver::Burst;
use stack::pipeline::Pipeline;
use stack::tcp::{ConnId, Event, TcpConfig};
use stack::time::Instant;

/// The echo server's options (after `--` when EAL options are given).
#[derive(Parser, Debug)]
#[command(
    name = "echo",
    about = "Echo server on weir's TCP: every byte received is sent back.",
    after_help = "Usage forms:\n  echo [OPTIONS]                      embedded default: a net_tap vdev 'weirtap0', --no-pci\n  echo [EAL OPTIONS] -- [OPTIONS]     DPDK's usual form"
)]
struct Args {
    #[command(flatten)]
    net: NetArgs,
    /// TCP port to accept connections on.
    #[arg(long, value_name = "N", default_value_t = 7007,
          value_parser = clap::value_parser!(u16).range(1..))]
    port: u16,
    /// Connections at once; more are refused with a RST (default: as many as the pool
    /// holds with every connection's queues full, see `Net::size_tcp`).
    #[arg(long, value_name = "N")]
    max_conns: Option<usize>,
    /// Send buffer per connection in bytes (a small one makes writes wait for
    /// `Event::Writable` often). As the receive buffer by default, so the pool holds as
    /// many connections as it can.
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 10,
          value_parser = clap::value_parser!(u32).range(4096..=1 << 30))]
    snd_buf: u32,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Copy the bytes out of the receive queue and write them with `Tcp::send`, instead
    /// of handing the received buffers back with `Tcp::recv_bufs` and `Tcp::send_bufs`.
    #[arg(long)]
    copy: bool,
}

/// The most copied out of a receive queue per write.
const STAGE: usize = 64 * 1024;

/// What the server keeps per connection.
struct Conn {
    id: ConnId,
    /// The peer sent FIN: close once everything it sent is echoed.
    peer_closed: bool,
    /// `close` was called.
    closing: bool,
    bytes: u64,
    /// Received buffers taken by `recv_bufs` that `send_bufs` did not take yet (the
    /// zero-copy path); dropping them frees them.
    pending: PayloadChain<Mbuf>,
}

/// The application: per-connection state by table slot, one staging buffer (for
/// `--copy`).
struct Echo {
    conns: Vec<Option<Conn>>,
    stage: Vec<u8>,
    /// `--copy`: echo through a copy, not by handing the received buffers back.
    copy: bool,
    opened: u64,
    closed: u64,
    reset: u64,
    echoed: u64,
    /// Times a write took less than it was offered (the send buffer full): the rest
    /// waited in the receive queue for `Event::Writable`.
    blocked: u64,
}

impl Echo {
    fn get(&mut self, id: ConnId) -> Option<&mut Conn> {
        match self.conns.get_mut(id.index() as usize) {
            Some(Some(c)) if c.id == id => Some(c),
            _ => None,
        }
    }

    fn remove(&mut self, id: ConnId) -> Option<Conn> {
        let slot = self.conns.get_mut(id.index() as usize)?;
        match slot {
            Some(c) if c.id == id => slot.take(),
            _ => None,
        }
    }

    /// Step 2 and 3 of the call order: every event, and the reads and writes it allows.
    fn serve(&mut self, p: &mut Pipeline<Mbuf>, pool: &mut StashPool, now: Instant) {
        while let Some(ev) = p.tcp().poll_event() {
            match ev {
                Event::Opened(id) => {
                    let i = id.index() as usize;
                    if self.conns.len() <= i {
                        self.conns.resize_with(i + 1, || None);
                    }
                    self.conns[i] = Some(Conn {
                        id,
                        peer_closed: false,
                        closing: false,
                        bytes: 0,
                        pending: PayloadChain::new(),
                    });
                    self.opened += 1;
                }
                Event::Readable(id) | Event::Writable(id) => self.pump(p, pool, now, id),
                Event::PeerClosed(id) => {
                    if let Some(c) = self.get(id) {
                        c.peer_closed = true;
                    }
                    self.pump(p, pool, now, id);
                }
                Event::Closed(id) => {
                    if self.remove(id).is_some() {
                        self.closed += 1;
                    }
                }
                Event::Reset(id) => {
                    if self.remove(id).is_some() {
                        self.reset += 1;
                    }
                }
            }
        }
    }

    /// Echoes what `id` has received, as far as its send buffer takes it; closes after
    /// the peer's FIN once nothing is left to echo.
    fn pump(&mut self, p: &mut Pipeline<Mbuf>, pool: &mut StashPool, now: Instant, id: ConnId) {
        let (moved, blocked) = if self.copy {
            self.pump_copy(p, pool, now, id)
        } else {
            self.pump_bufs(p, now, id)
        };
        self.echoed += moved;
        self.blocked += u64::from(blocked);
        let drained = p.tcp().readable_bytes(id) == 0;
        let Some(c) = self.get(id) else { return };
        c.bytes += moved;
        if c.peer_closed && drained && c.pending.is_empty() && !c.closing {
            c.closing = true;
            // FIN after the echoed bytes (CLOSE-WAIT -> LAST-ACK).
            let _ = p.tcp().close(now, id);
        }
    }

    /// The zero-copy echo: the received buffers themselves go back out. Returns the bytes
    /// queued for sending and whether a write fell short (then `Event::Writable` follows).
    fn pump_bufs(&mut self, p: &mut Pipeline<Mbuf>, now: Instant, id: ConnId) -> (u64, bool) {
        let tcp = p.tcp();
        let Some(c) = self.get(id) else {
            return (0, false);
        };
        let mut moved = 0u64;
        loop {
            if !c.pending.is_empty() {
                match tcp.send_bufs(now, id, &mut c.pending) {
                    Ok(n) => moved += n as u64,
                    // Reset or closed under us: its events follow.
                    Err(_) => break,
                }
                if !c.pending.is_empty() {
                    return (moved, true);
                }
            }
            if tcp.readable_bytes(id) == 0 {
                break;
            }
            // As much as the send buffer has room for, and at least the first buffer:
            // with the send buffer full, offering it arms `Event::Writable`.
            let mut first = 0;
            let _ = tcp.recv(id, |slices| {
                first = slices.first().map_or(0, |s| usize::from(s.len));
                0
            });
            let max = tcp.writable_bytes(id).max(first);
            match tcp.recv_bufs(id, max, &mut c.pending) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
        (moved, false)
    }

    /// The copying echo (`--copy`): copy out without consuming, `send`, consume what it
    /// took. Returns the bytes written and whether a write fell short.
    fn pump_copy(
        &mut self,
        p: &mut Pipeline<Mbuf>,
        pool: &mut StashPool,
        now: Instant,
        id: ConnId,
    ) -> (u64, bool) {
        let tcp = p.tcp();
        let mut moved = 0u64;
        let mut blocked = false;
        loop {
            let readable = tcp.readable_bytes(id);
            if readable == 0 {
                break;
            }
            // At least one byte even when the buffer is full: the short write arms
            // `Event::Writable`.
            let want = readable.min(STAGE).min(tcp.writable_bytes(id).max(1));
            let stage = &mut self.stage;
            let mut copied = 0;
            // Copy without consuming (return 0): what `send` does not take stays queued.
            let _ = tcp.recv(id, |slices| {
                for s in slices {
                    let b = s.bytes();
                    let n = b.len().min(want - copied);
                    stage[copied..copied + n].copy_from_slice(&b[..n]);
                    copied += n;
                    if copied == want {
                        break;
                    }
                }
                0
            });
            let taken = match tcp.send(now, id, &self.stage[..copied], pool) {
                Ok(n) => n,
                // Reset or closed under us: its events follow.
                Err(_) => break,
            };
            if taken > 0 {
                let _ = tcp.recv(id, |_| taken);
            }
            moved += taken as u64;
            if taken < copied {
                blocked = true;
                break;
            }
        }
        (moved, blocked)
    }
}

fn main() -> ExitCode {
    let (args, eal) = match net::parse_args::<Args>("echo", std::env::args().collect()) {
        Ok(a) => a,
        Err(code) => return code,
    };
    if let Err(e) = apps::logs::init(None) {
        eprintln!("echo: error: {e:#}");
        return ExitCode::from(2);
    }
    match run(args, eal) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(args: Args, eal: Option<Vec<String>>) -> Result<()> {
    let stop = net::stop_on_signal()?;
    let net = Net::open("echo", eal, &args.net)?;
    let mut link = net.link()?;
    let mut tcp = TcpConfig {
        snd_buf: args.snd_buf,
        seed: net::random_seed(),
        ..TcpConfig::default()
    };
    let fit = net.size_tcp(&mut tcp, args.max_conns)?;
    let max_conns = tcp.max_conns;
    let mut p: Pipeline<Mbuf> = Pipeline::new(net.pipeline_config(tcp, &[args.port]))
        .map_err(|e| anyhow!("cannot listen on port {}: {e}", args.port))?;
    let mut app = Echo {
        conns: Vec::new(),
        stage: vec![0; if args.copy { STAGE } else { 0 }],
        copy: args.copy,
        opened: 0,
        closed: 0,
        reset: 0,
        echoed: 0,
        blocked: 0,
    };
    let mac = net.mac.map(|b| format!("{b:02x}")).join(":");
    println!(
        "echo: listening on {}:{} and [{}]:{} (mac {mac}), {max_conns} connections at most ({fit} fit the pool at full queues), {}",
        net.ip,
        args.port,
        net.ip6,
        args.port,
        if args.copy {
            "copying (--copy)"
        } else {
            "handing the received buffers back (no copy)"
        }
    );
    let started = link.now();
    let deadline = args
        .duration
        .map(|s| started + stack::time::Duration::from_nanos((s * 1e9) as u64));
    let (mut rx, mut tx): (Burst<Mbuf>, Burst<Mbuf>) = (Burst::new(), Burst::new());
    let mut iterations = 0u64;
    let mut now;
    loop {
        now = link.now();
        link.rx_burst(now, &mut rx);
        p.handle_rx_burst(now, &mut rx);
        app.serve(&mut p, link.pool(), now);
        p.handle_timeout(now);
        app.serve(&mut p, link.pool(), now);
        p.poll_tx(now, link.pool(), &mut tx);
        link.tx_burst(now, &mut tx);
        iterations += 1;
        if iterations % 4096 == 0 {
            link.note_pool();
        }
        if iterations % 1024 == 0
            && (stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d))
        {
            break;
        }
    }
    // The end: connections still open are reset, what that sends leaves.
    let open: Vec<ConnId> = app.conns.iter().flatten().map(|c| c.id).collect();
    for id in &open {
        let _ = p.tcp().abort(*id);
    }
    app.serve(&mut p, link.pool(), now);
    p.poll_tx(now, link.pool(), &mut tx);
    link.tx_burst(now, &mut tx);
    let stats = p.stats();
    let ls = link.stats();
    drop(p);
    let in_use = net.close(link)?;
    println!(
        "echo: {} connections ({} closed, {} reset, {} open at the stop), {} bytes echoed, {} retransmitted segments, {} mbufs in use at exit",
        app.opened,
        app.closed,
        app.reset,
        open.len(),
        app.echoed,
        stats.tcp.retransmits,
        in_use
    );
    if let Some(path) = &args.net.stats_json {
        let extra = json!({
            "echo_connections": app.opened,
            "echo_closed": app.closed,
            "echo_reset": app.reset,
            "echo_open_at_stop": open.len(),
            "echo_bytes": app.echoed,
            "echo_blocked_writes": app.blocked,
            "echo_zero_copy": !app.copy,
            "duration_s": now.saturating_since(started).as_nanos() as f64 / 1e9,
        });
        net::write_json(path, &net::report_json(&stats, &ls, in_use, extra))?;
    }
    Ok(())
}
