//! `weir-bench rr-stages [--conns LIST] [--json]`: ns per request/response transaction of
//! each stage of the answering side, measured apart on the same traffic (field report 003:
//! a transaction workload's regression is placed by stage, as the bulk receive path's is by
//! `weir-bench stages`).
//!
//! A client `Pipeline` opens `--conns` connections to a server built from the stack's
//! parts, in memory on a virtual clock, one thread. Each round, the client writes one
//! 64-byte request on every connection (TCP_NODELAY) and sends them in one burst; the
//! server runs its stages on that burst, each timed on its own with `std::time::Instant`
//! (the clock's own cost is measured and subtracted); the answers go back to the client,
//! which reads and counts them. The client's work is not timed. Checksums are computed and
//! verified in software on both sides, as over weir-bench rr's ring pair. The server's
//! stages, in the pipeline's order:
//!
//! - `parse`: `wire::parse_into` of every frame (with the software checksum check);
//! - `gro`: `Gro::handle_segment` of every parsed segment, then `end_of_burst` (each
//!   request carries PSH, so every run ends at once);
//! - `tcp_rx`: `Tcp::handle_segment` of every unit GRO hands on, called by reference from
//!   GRO's callback as in the pipeline, timed inside it and taken out of GRO's time: the
//!   request's data, and the ACK it carries for the previous answer (the send side's ACK
//!   processing);
//! - `app`: the echo application's share: the events drained and each request copied out
//!   with `recv` (which frees its buffer);
//! - `tcp_send`: `Tcp::send` of each answer (copied into a pool buffer of the send queue);
//! - `frame_build`: `Tcp::poll_tx` building the answers (segmentation, the piggybacked
//!   ACK, headers and software checksums);
//! - `timers`: `Tcp::handle_timeout` and `Gro::flush_expired` once per round, and the
//!   deadline query the loop makes (`Tcp::poll_timeout`, `Gro::next_deadline`).
//!
//! `total` adds them. Each connection count runs with GRO on and with GRO off (the `gro`
//! stage then fills one segment per frame for TCP, as the pipeline does without GRO), so
//! GRO's cost on traffic it cannot merge is the difference in that stage. Every measurement is repeated 5 times and the median is reported;
//! every answer must arrive, or the benchmark fails.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant as StdInstant;

use anyhow::bail;
use serde_json::json;
use stack::ack::AckPolicy;
use stack::buf::PacketBuf;
use stack::driver::Burst;
use stack::gro::{Gro, GroConfig};
use stack::mem::{VecBuf, VecPool};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::segment::Segment;
use stack::tcp::{ConnId, ConnectOpts, Event, Tcp, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::{parse_into, DropReason, LocalAddrs, Parsed};

const CLI_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const SRV_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const CLI_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SRV_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 5001;
/// Request and answer size, as weir-bench rr's default.
const MSG: usize = 64;
/// Repetitions; the median is reported.
const REPEATS: usize = 5;
/// Transactions per repetition (rounds of one request per connection).
const TRANSACTIONS: usize = 200_000;
/// Virtual time between rounds.
const ROUND_GAP: Duration = Duration::from_micros(5);

/// One row: a connection count's ns per transaction by stage.
#[derive(Debug, Clone, Copy, Default)]
struct Row {
    conns: usize,
    gro_on: bool,
    parse: f64,
    gro: f64,
    tcp_rx: f64,
    app: f64,
    tcp_send: f64,
    frame_build: f64,
    timers: f64,
}

impl Row {
    fn total(&self) -> f64 {
        self.parse
            + self.gro
            + self.tcp_rx
            + self.app
            + self.tcp_send
            + self.frame_build
            + self.timers
    }
}

fn tcp_config(conns: usize, seed: u64) -> TcpConfig {
    TcpConfig {
        max_conns: conns + 64,
        seed,
        ..TcpConfig::default()
    }
}

/// The server, from the stack's parts so each stage can be timed alone.
struct Server {
    local: LocalAddrs,
    /// `None`: GRO off, each segment filled for TCP in `one` as the pipeline does then.
    gro: Option<Gro<VecBuf>>,
    one: Segment<VecBuf>,
    tcp: Tcp<VecBuf>,
    pool: VecPool,
}

/// Both sides and the virtual clock.
struct Rig {
    cli: Pipeline<VecBuf>,
    cpool: VecPool,
    srv: Server,
    ids: Vec<ConnId>,
    /// Connections the client saw open.
    opened: usize,
    now: Instant,
}

fn clock_overhead_ns() -> f64 {
    let n = 200_000;
    let t = StdInstant::now();
    let mut acc = 0u128;
    for _ in 0..n {
        let t0 = StdInstant::now();
        acc += t0.elapsed().as_nanos();
    }
    std::hint::black_box(acc);
    t.elapsed().as_nanos() as f64 / f64::from(n)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

impl Rig {
    fn new(conns: usize, gro_on: bool) -> anyhow::Result<Self> {
        let cli = Pipeline::new(PipelineConfig {
            local: LocalAddrs::new(CLI_MAC, Some(CLI_IP), None),
            gro: Some(GroConfig::default()),
            tcp: tcp_config(conns, 0x7273_0001),
            listen: Vec::new(),
            tx_csum_offload: false,
        })
        .map_err(|e| anyhow::anyhow!("client pipeline: {e:?}"))?;
        let mut tcp = Tcp::new(tcp_config(conns, 0x7273_0002));
        tcp.listen(PORT, AckPolicy::linux())
            .map_err(|e| anyhow::anyhow!("listen: {e:?}"))?;
        let mut r = Rig {
            cli,
            cpool: VecPool::new(1 << 16, 2048),
            srv: Server {
                local: LocalAddrs::new(SRV_MAC, Some(SRV_IP), None),
                gro: gro_on.then(|| Gro::new(GroConfig::default())),
                one: Segment::empty(),
                tcp,
                pool: VecPool::new(1 << 16, 2048),
            },
            ids: Vec::with_capacity(conns),
            opened: 0,
            now: Instant::from_nanos(1_000_000_000),
        };
        let remote = SocketAddr::new(IpAddr::V4(SRV_IP), PORT);
        for _ in 0..conns {
            let id = r
                .cli
                .tcp()
                .connect(
                    r.now,
                    IpAddr::V4(CLI_IP),
                    remote,
                    ConnectOpts::new(CLI_MAC, SRV_MAC),
                )
                .map_err(|e| anyhow::anyhow!("connect: {e:?}"))?;
            r.ids.push(id);
        }
        let mut stage = [0u8; MSG];
        for _ in 0..100 {
            r.round(0.0, &mut Row::default(), &mut stage)?;
            if r.opened == conns {
                return Ok(r);
            }
        }
        bail!("{} of {conns} connections opened", r.opened)
    }

    /// The client's frames through the server's stages (timed into `row`) and the
    /// answers back to the client. Returns the answer bytes the client read.
    fn round(
        &mut self,
        overhead: f64,
        row: &mut Row,
        stage: &mut [u8; MSG],
    ) -> anyhow::Result<usize> {
        let now = self.now;
        let mut burst: Burst<VecBuf> = Burst::new();
        self.cli.poll_tx(now, &mut self.cpool, &mut burst);
        let s = &mut self.srv;

        let frames: Vec<VecBuf> = burst.drain(..).collect();
        let mut parsed: Vec<Parsed> = Vec::with_capacity(frames.len());
        let t0 = StdInstant::now();
        for b in &frames {
            let mut p = Parsed::Drop(DropReason::TruncatedEthernet);
            parse_into(b.data(), b.rx_checksum(), &s.local, &mut p);
            parsed.push(p);
        }
        row.parse += (t0.elapsed().as_nanos() as f64 - overhead).max(0.0);

        // GRO hands each unit to TCP by reference, as the pipeline does (moving units out
        // to time TCP apart would add a copy GRO never makes): TCP's time is measured
        // inside GRO's callback and taken out of GRO's.
        let tcp = &mut s.tcp;
        let mut inner = 0.0f64;
        let mut deliver = |x: &mut Segment<VecBuf>| {
            let t1 = StdInstant::now();
            tcp.handle_segment(now, x);
            inner += t1.elapsed().as_nanos() as f64;
        };
        let t0 = StdInstant::now();
        for (b, p) in frames.into_iter().zip(parsed.iter()) {
            if let Parsed::Tcp(m) = p {
                match &mut s.gro {
                    Some(g) => g.handle_segment(now, m, b, &mut deliver),
                    None => {
                        s.one.fill_from_meta(m, b, now);
                        deliver(&mut s.one);
                        s.one.payload.clear();
                    }
                }
            }
        }
        if let Some(g) = &mut s.gro {
            g.end_of_burst(now, &mut deliver);
        }
        let outer = t0.elapsed().as_nanos() as f64;
        let units = parsed.len() as f64;
        row.tcp_rx += (inner - units * overhead).max(0.0);
        row.gro += (outer - inner - overhead).max(0.0);

        // The echo application: read each request, then answer it.
        let mut readable: Vec<ConnId> = Vec::with_capacity(self.ids.len());
        let mut reqs: Vec<(ConnId, usize)> = Vec::with_capacity(self.ids.len());
        let t0 = StdInstant::now();
        readable.extend(s.tcp.events().filter_map(|e| match e {
            Event::Readable(id) => Some(id),
            _ => None,
        }));
        for &id in &readable {
            let n = s
                .tcp
                .recv(id, |sl| {
                    let mut n = 0;
                    for x in sl {
                        let b = x.bytes();
                        let k = b.len().min(MSG - n);
                        stage[n..n + k].copy_from_slice(&b[..k]);
                        n += k;
                    }
                    n
                })
                .unwrap_or(0);
            reqs.push((id, n));
        }
        row.app += (t0.elapsed().as_nanos() as f64 - overhead).max(0.0);

        let t0 = StdInstant::now();
        for &(id, n) in &reqs {
            let _ = s.tcp.send(now, id, &stage[..n], &mut s.pool);
        }
        row.tcp_send += (t0.elapsed().as_nanos() as f64 - overhead).max(0.0);

        let mut out: Burst<VecBuf> = Burst::new();
        let mut answers: Vec<VecBuf> = Vec::with_capacity(self.ids.len() + 8);
        loop {
            let t0 = StdInstant::now();
            let n = s.tcp.poll_tx(now, &mut s.pool, &mut out, false);
            row.frame_build += (t0.elapsed().as_nanos() as f64 - overhead).max(0.0);
            answers.extend(out.drain(..));
            if n == 0 {
                break;
            }
        }

        let t0 = StdInstant::now();
        s.tcp.handle_timeout(now);
        if let Some(g) = &mut s.gro {
            g.flush_expired(now, &mut |x: &mut Segment<VecBuf>| {
                s.tcp.handle_segment(now, x)
            });
        }
        let gro_deadline = s.gro.as_ref().and_then(Gro::next_deadline);
        std::hint::black_box((s.tcp.poll_timeout(), gro_deadline));
        row.timers += (t0.elapsed().as_nanos() as f64 - overhead).max(0.0);

        let mut back: Burst<VecBuf> = answers.into_iter().collect();
        self.cli.handle_rx_burst(now, &mut back);
        self.cli.handle_timeout(now);
        let mut got = 0;
        while let Some(ev) = self.cli.tcp().poll_event() {
            match ev {
                Event::Readable(id) => {
                    got += self
                        .cli
                        .tcp()
                        .recv(id, |sl| sl.iter().map(|x| x.bytes().len()).sum())
                        .map_err(|e| anyhow::anyhow!("client recv: {e:?}"))?;
                }
                Event::Opened(id) => {
                    self.cli
                        .tcp()
                        .set_nodelay(id, true)
                        .map_err(|e| anyhow::anyhow!("nodelay: {e:?}"))?;
                    self.opened += 1;
                }
                _ => {}
            }
        }
        self.now += ROUND_GAP;
        Ok(got)
    }

    /// `rounds` rounds of one request per connection; the stages' ns per transaction.
    fn measure(&mut self, rounds: usize, overhead: f64) -> anyhow::Result<Row> {
        let conns = self.ids.len();
        let mut row = Row {
            conns,
            gro_on: self.srv.gro.is_some(),
            ..Row::default()
        };
        let req = [0x5au8; MSG];
        let mut stage = [0u8; MSG];
        let mut answered = 0usize;
        for _ in 0..rounds {
            for k in 0..conns {
                let id = self.ids[k];
                let n = self
                    .cli
                    .tcp()
                    .send(self.now, id, &req, &mut self.cpool)
                    .map_err(|e| anyhow::anyhow!("client send: {e:?}"))?;
                if n != MSG {
                    bail!("the client's send buffer took {n} of {MSG} bytes");
                }
            }
            answered += self.round(overhead, &mut row, &mut stage)?;
        }
        let want = rounds * conns * MSG;
        if answered != want {
            bail!("{answered} answer bytes of {want} arrived");
        }
        let per = (rounds * conns) as f64;
        for v in [
            &mut row.parse,
            &mut row.gro,
            &mut row.tcp_rx,
            &mut row.app,
            &mut row.tcp_send,
            &mut row.frame_build,
            &mut row.timers,
        ] {
            *v /= per;
        }
        Ok(row)
    }
}

fn measure(conns: usize, gro_on: bool, overhead: f64) -> anyhow::Result<Row> {
    let mut rig = Rig::new(conns, gro_on)?;
    let rounds = (TRANSACTIONS / conns).max(1);
    // Warm the pools, tables and caches.
    rig.measure(rounds / 10 + 1, overhead)?;
    let mut reps = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        reps.push(rig.measure(rounds, overhead)?);
    }
    let m = |f: fn(&Row) -> f64| median(reps.iter().map(f).collect());
    Ok(Row {
        conns,
        gro_on,
        parse: m(|r| r.parse),
        gro: m(|r| r.gro),
        tcp_rx: m(|r| r.tcp_rx),
        app: m(|r| r.app),
        tcp_send: m(|r| r.tcp_send),
        frame_build: m(|r| r.frame_build),
        timers: m(|r| r.timers),
    })
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Runs the benchmark for each connection count and prints one table (or one JSON object
/// per row: `conns`, `parse_ns`, `gro_ns`, `tcp_rx_ns`, `app_ns`, `tcp_send_ns`,
/// `frame_build_ns`, `timers_ns`, `total_ns`, each per transaction).
pub fn run(conns: &[usize], json: bool) -> anyhow::Result<()> {
    // Each connection count with GRO on, then off: GRO's cost for traffic it cannot merge
    // is the `gro` stage's difference.
    if conns.iter().any(|&c| c == 0 || c > 4096) {
        bail!("--conns takes 1 to 4096 connections");
    }
    let overhead = clock_overhead_ns();
    let mut rows = Vec::new();
    for &c in conns {
        rows.push(measure(c, true, overhead)?);
        rows.push(measure(c, false, overhead)?);
    }
    if json {
        for r in &rows {
            println!(
                "{}",
                json!({
                    "conns": r.conns,
                    "gro_on": r.gro_on,
                    "message_bytes": MSG,
                    "parse_ns": r1(r.parse),
                    "gro_ns": r1(r.gro),
                    "tcp_rx_ns": r1(r.tcp_rx),
                    "app_ns": r1(r.app),
                    "tcp_send_ns": r1(r.tcp_send),
                    "frame_build_ns": r1(r.frame_build),
                    "timers_ns": r1(r.timers),
                    "total_ns": r1(r.total()),
                })
            );
        }
        return Ok(());
    }
    println!(
        "ns per {MSG}-byte transaction on the answering side, by stage (median of {REPEATS}; clock cost {overhead:.0} ns subtracted per region)"
    );
    println!(
        "{:>6} {:>4} {:>7} {:>7} {:>7} {:>7} {:>9} {:>11} {:>7} {:>7}",
        "conns",
        "gro",
        "parse",
        "gro",
        "tcp_rx",
        "app",
        "tcp_send",
        "frame_build",
        "timers",
        "total"
    );
    for r in &rows {
        println!(
            "{:>6} {:>4} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>9.1} {:>11.1} {:>7.1} {:>7.1}",
            r.conns,
            if r.gro_on { "on" } else { "off" },
            r.parse,
            r.gro,
            r.tcp_rx,
            r.app,
            r.tcp_send,
            r.frame_build,
            r.timers,
            r.total()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every answer arrives through the split server, and every stage did some work.
    #[test]
    fn every_answer_arrives_and_every_stage_is_timed() {
        let mut rig = Rig::new(4, true).expect("rig");
        let row = rig.measure(50, 0.0).expect("measure");
        assert_eq!(row.conns, 4);
        for (name, v) in [
            ("parse", row.parse),
            ("gro", row.gro),
            ("tcp_rx", row.tcp_rx),
            ("app", row.app),
            ("tcp_send", row.tcp_send),
            ("frame_build", row.frame_build),
        ] {
            assert!(v > 0.0, "{name} measured nothing");
        }
        assert!(
            rig.srv.pool.in_use() < 64,
            "the server's buffers are returned"
        );
    }
}
