//! Cycles of a one-segment request/response transaction without DPDK or a second core:
//! a client `Pipeline` and weir-serve's echo engine (`Glue<Echo>`) on a server
//! `Pipeline`, joined in memory, stepped on a virtual clock in one thread. Each round
//! sends one 64-byte request on each of `--conns` connections, moves the requests to the
//! server in one burst, runs the server (receive, echo, transmit), moves the answers back
//! in one burst and has the client read them: `weir-bench rr --burst 1`'s batch, both
//! sides' work back to back. Checksums are computed and verified in software on both
//! sides, as in `weir-bench rr`.
//!
//! Prints the best wall time per transaction over the rounds (noise from other work on
//! the machine only adds time), and is deterministic, so its instruction count under
//! `valgrind --tool=callgrind` compares two builds exactly:
//!   cargo build --release -p benches --example rr_loop
//!   target/release/examples/rr_loop [conns] [rounds]
#![allow(missing_docs, clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant as StdInstant;

use apps::serve::echo::Echo;
use apps::serve::glue::Glue;
use stack::ack::AckPolicy;
use stack::driver::Burst;
use stack::gro::GroConfig;
use stack::mem::{VecBuf, VecPool};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::tcp::{ConnId, ConnectOpts, Event, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::LocalAddrs;

const CLI_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const SRV_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const CLI_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SRV_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 5001;
const REQ: usize = 64;

fn config(mac: [u8; 6], ip: Ipv4Addr, conns: usize, listen: bool) -> PipelineConfig {
    PipelineConfig {
        local: LocalAddrs::new(mac, Some(ip), None),
        gro: Some(GroConfig {
            flush_ns: Duration::from_nanos(20_000),
            max_flows: 4096,
            ..GroConfig::default()
        }),
        tcp: TcpConfig {
            max_conns: conns.max(64) + 64,
            seed: 0x7272_0000 ^ conns as u64 ^ u64::from(listen),
            ..TcpConfig::default()
        },
        listen: if listen {
            vec![(PORT, AckPolicy::default())]
        } else {
            Vec::new()
        },
        tx_csum_offload: false,
    }
}

struct Rig {
    cli: Pipeline<VecBuf>,
    srv: Pipeline<VecBuf>,
    glue: Glue<Echo>,
    cpool: VecPool,
    spool: VecPool,
    burst: Burst<VecBuf>,
    now: Instant,
    ids: Vec<ConnId>,
    answered: u64,
}

impl Rig {
    /// One loop iteration of each side, the client's frames handed to the server and the
    /// server's back.
    fn step(&mut self) {
        self.now += Duration::from_nanos(1_000);
        let now = self.now;
        let b = &mut self.burst;
        self.cli.poll_tx(now, &mut self.cpool, b);
        self.srv.handle_rx_burst(now, b);
        self.glue.serve(self.srv.tcp(), &mut self.spool, now);
        self.srv.handle_timeout(now);
        self.glue.serve(self.srv.tcp(), &mut self.spool, now);
        self.srv.poll_tx(now, &mut self.spool, b);
        self.cli.handle_rx_burst(now, b);
        self.cli.handle_timeout(now);
    }

    /// Reads every answer the client has, checking its length.
    fn client_reads(&mut self) {
        while let Some(ev) = self.cli.tcp().poll_event() {
            if let Event::Readable(id) = ev {
                let n = self
                    .cli
                    .tcp()
                    .recv(id, |s| s.iter().map(|s| s.bytes().len()).sum());
                self.answered += n.unwrap() as u64;
            }
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let conns: usize = args.next().map_or(64, |a| a.parse().unwrap());
    let rounds: usize = args.next().map_or(20_000, |a| a.parse().unwrap());
    let mut r = Rig {
        cli: Pipeline::new(config(CLI_MAC, CLI_IP, conns, false)).unwrap(),
        srv: Pipeline::new(config(SRV_MAC, SRV_IP, conns, true)).unwrap(),
        glue: Glue::new((), conns + 128, true),
        cpool: VecPool::new(1 << 16, 2048),
        spool: VecPool::new(1 << 16, 2048),
        burst: Burst::new(),
        now: Instant::from_nanos(1_000_000),
        ids: Vec::new(),
        answered: 0,
    };
    for _ in 0..conns {
        let opts = ConnectOpts::new(CLI_MAC, SRV_MAC);
        let remote = SocketAddr::new(IpAddr::V4(SRV_IP), PORT);
        let id = r.cli.tcp().connect(r.now, IpAddr::V4(CLI_IP), remote, opts);
        r.ids.push(id.unwrap());
    }
    let mut opened = 0;
    for _ in 0..100 {
        r.step();
        while let Some(ev) = r.cli.tcp().poll_event() {
            if let Event::Opened(id) = ev {
                r.cli.tcp().set_nodelay(id, true).unwrap();
                opened += 1;
            }
        }
        if opened == conns {
            break;
        }
    }
    assert_eq!(opened, conns, "every connection opens");
    let req = [0x5au8; REQ];
    let mut best = f64::MAX;
    let start = StdInstant::now();
    for round in 0..rounds {
        let t = StdInstant::now();
        for k in 0..conns {
            let id = r.ids[k];
            let n = r.cli.tcp().send(r.now, id, &req, &mut r.cpool).unwrap();
            assert_eq!(n, REQ);
        }
        // Requests to the server and answers back; a second step carries nothing
        // unless an ACK is owed (the idle iteration of each side).
        r.step();
        r.client_reads();
        let ns = t.elapsed().as_nanos() as f64 / conns as f64;
        if round >= rounds / 10 {
            best = best.min(ns);
        }
    }
    let total = start.elapsed().as_secs_f64();
    r.step();
    r.client_reads();
    assert_eq!(
        r.answered,
        (rounds * conns * REQ) as u64,
        "every answer arrived"
    );
    let buf_in_use = r.cpool.in_use() + r.spool.in_use();
    println!(
        "rr_loop: {conns} conns, {rounds} rounds: best {best:.0} ns/txn (both sides), \
         mean {:.0} ns/txn; buffers in use at the end {buf_in_use}",
        total * 1e9 / (rounds * conns) as f64
    );
}
