//! weir-bench: weir's benchmark reports. See `weir-bench --help`.

use clap::{Parser, Subcommand};

/// Counts each thread's heap, for `weir-bench conns`'s memory per connection.
#[global_allocator]
static HEAP: apps::heap::Counting = apps::heap::Counting;

#[derive(Parser)]
#[command(
    name = "weir-bench",
    version,
    about = "weir's benchmarks, each side by side with its anchor"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// weir-gen -> ring pair -> weir-sink in one process on two lcores: drop, drop+headers,
    /// stack, stack --no-gro and stack with software checksums side by side at 1, 64,
    /// 4,096 and 65,536 flows; then the checks (flow-count scaling, GRO on against off).
    E2e {
        /// One JSON object per row (and one per check).
        #[arg(long)]
        json: bool,
        /// Seconds of data per case.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Rounds (medians are reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Flow counts (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [1u32, 64, 4096, 65536])]
        flows: Vec<u32>,
        /// Size the receiver's connection table (max_conns) for at least this many
        /// connections, whatever the row's flow count (0: as weir-sink sizes it), e.g.
        /// 1000000 to measure a table sized for a million connections at 64 flows (GRO's
        /// table keeps its runs: it holds one flush window's, not one per connection).
        #[arg(long, default_value_t = 0)]
        tables: u32,
        /// Do not model the NIC's RX checksum offload: the receiver verifies every IPv4
        /// and TCP checksum in software in every mode.
        #[arg(long)]
        sw_checksum: bool,
        /// Run only these modes (comma-separated: drop, headers, stack, no-gro, sw-csum), e.g.
        /// under `perf record`.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// How the generator's flows share the ring: `segment` (one segment per flow in
        /// turn, as on a busy NIC queue) or `train:N` (N segments per flow, as TSO senders
        /// emit them).
        #[arg(long, default_value = "segment")]
        interleave: apps::gen::Interleave,
        /// The receiver's GRO flush window in ns (weir-sink's default unless given): how
        /// long a held run waits for its flow's next segment. With many flows interleaved
        /// per segment, a window shorter than the flow's inter-arrival time holds runs of
        /// one.
        #[arg(long, default_value_t = apps::bench::e2e::FLUSH_NS)]
        gro_flush_ns: u64,
        /// The receiver's GRO hold while its queue is backlogged (a burst comes back
        /// full), in ns: weir-sink's --gro-busy-hold-ns (Linux's one jiffy is 1000000).
        /// 0 (weir-sink's default) is off.
        #[arg(long, default_value_t = 0)]
        gro_busy_hold_ns: u64,
        /// Put DPDK's memory (the three mbuf pools) on 2 MiB hugepages, as DPDK is
        /// deployed, instead of --no-huge's 4 KiB pages. Reserve them first with
        /// scripts/setup-hugepages.sh (the default 1,024 MB is plenty).
        #[arg(long)]
        hugepages: bool,
    },
    /// weir's GRO beside DPDK's rte_gro on the same bursts of mbufs: ns per segment and
    /// segments per unit at 1 to 65,536 flows and three flush windows.
    Gro {
        /// One JSON object per (implementation, row).
        #[arg(long)]
        json: bool,
        /// Arrival patterns to run (comma-separated: rr, train).
        #[arg(long, value_delimiter = ',', default_values_t = [String::from("rr"), String::from("train")])]
        pattern: Vec<String>,
        /// Flow counts (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [1u32, 16, 256, 4096, 65_536])]
        flows: Vec<u32>,
        /// Flush windows in ns (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [0u64, 2_000, 100_000])]
        flush_ns: Vec<u64>,
        /// Timed chunks per implementation and row, the two interleaved (the median is
        /// reported).
        #[arg(long, default_value_t = apps::bench::gro::REPEATS)]
        runs: usize,
        /// Run only this implementation (weir or rte_gro), e.g. under `perf record`.
        #[arg(long)]
        only: Option<String>,
        /// Put DPDK's memory (the mbufs, rte_gro's tables) on 2 MiB hugepages, as DPDK is
        /// deployed, instead of --no-huge's 4 KiB pages. Reserve them first:
        /// scripts/setup-hugepages.sh (the default 1,024 MB is plenty).
        #[arg(long)]
        hugepages: bool,
    },
    /// weir's Internet checksum beside DPDK's rte_raw_cksum (as dpdk-sys wraps it, and
    /// compiled at -O3) on the same buffers: 1,448- and 8,948-byte payloads, in cache and
    /// out of cache.
    Csum {
        /// One JSON object per row.
        #[arg(long)]
        json: bool,
        /// Timed chunks of 8 MiB per implementation and row (the median is reported).
        #[arg(long, default_value_t = 25)]
        runs: usize,
        /// The out-of-cache buffer set in MiB: make it larger than the last-level cache.
        #[arg(long, default_value_t = 64)]
        set_mib: usize,
        /// Payload lengths in bytes (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [1448usize, 8948])]
        lens: Vec<usize>,
    },
    /// TCP receive + ACK decision per wire segment, and ACK building; the send side: ns per
    /// data segment sent and per ACK the sender processes (with and without SACK blocks),
    /// each over the receive ns per segment; all on in-memory buffers.
    Tcp {
        /// One JSON object per row.
        #[arg(long)]
        json: bool,
    },
    /// ns per segment of each receive-path stage (parse, GRO, TCP, ACK build, transmit)
    /// and of the timer checks, on the same in-memory input, to find the stage a regression
    /// is in (field report 003). With several flow counts (`--flows 64,4096 --train 1`),
    /// also each stage's cost over the first count's: where the extra cycles of more flows
    /// go.
    Stages {
        /// Connections in the input, one measurement each (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [apps::bench::stages::FLOWS])]
        flows: Vec<usize>,
        /// Segments one flow sends in a row (1: flows interleaved one segment at a time).
        #[arg(long, default_value_t = apps::bench::stages::TRAIN)]
        train: usize,
        /// One JSON object per stage (and flow count).
        #[arg(long)]
        json: bool,
    },
    /// ns per 64-byte request/response transaction of each stage of the answering side
    /// (parse, GRO, TCP receive, application, TCP send, frame build, timers), in memory on
    /// the same traffic, to place a transaction workload's regression by stage (field
    /// report 003). Every answer is counted.
    RrStages {
        /// Connections, each with one transaction in flight (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [1usize, 64])]
        conns: Vec<usize>,
        /// One JSON object per row.
        #[arg(long)]
        json: bool,
    },
    /// Request/response transactions (netperf TCP_RR's shape) between a weir client on
    /// one lcore and weir-serve's echo engine on the other, over a ring pair: transactions/s,
    /// latency percentiles, cycles per transaction on each side, segments and ACKs per
    /// transaction. Every answer is checked byte for byte.
    Rr(RrArgs),
    /// Many established connections on one core (up to a million): a weir client opens
    /// them to a weir receiver over the ring pair and sends each a small message in turn;
    /// handshakes per second, the receiver's heap per connection, its cycles per segment,
    /// and every connection's bytes checked.
    Conns {
        /// Connection counts, one row each (comma-separated; the first is the anchor of
        /// the cycles-per-segment ratio).
        #[arg(long, value_delimiter = ',', default_values_t = [64u32, 1_000_000])]
        conns: Vec<u32>,
        /// Size the tables for at least this many connections (0: each row's count).
        #[arg(long, default_value_t = 0)]
        tables: u32,
        /// Listening ports on the receiver (each takes up to 64,512 connections).
        #[arg(long, default_value_t = 20)]
        ports: u16,
        /// Seconds of the data phase.
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
        /// Messages per second, all connections together.
        #[arg(long, default_value_t = 100_000)]
        rate: u64,
        /// Bytes per message.
        #[arg(long, default_value_t = 64)]
        message: u32,
        /// One JSON object per row.
        #[arg(long)]
        json: bool,
        /// DPDK's memory on 2 MiB hugepages (reserve them first: scripts/setup-hugepages.sh).
        #[arg(long)]
        hugepages: bool,
    },
    /// Kernel TCP over net_tap into weir-sink, beside a bare receive-and-free loop.
    Tap {
        /// One JSON object per row.
        #[arg(long)]
        json: bool,
        /// Seconds of traffic per case.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Rounds (medians are reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// The kernel's request/response on plain sockets (one thread, epoll, TCP_NODELAY): an
    /// echo server and an RR client printing the RR-JSON row, the anchor beside `rr`.
    KernelRr {
        #[command(subcommand)]
        cmd: apps::bench::kernel_rr::Command,
    },
}

/// `weir-bench rr`'s options.
#[derive(clap::Args)]
struct RrArgs {
    /// One JSON object per row.
    #[arg(long)]
    json: bool,
    /// Client connection counts (comma-separated, 1 to 4,096).
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 64])]
    conns: Vec<u32>,
    /// Transactions in flight per connection (comma-separated, 1 to 256): netperf
    /// TCP_RR's burst.
    #[arg(long, value_delimiter = ',', default_values_t = [1u32])]
    burst: Vec<u32>,
    /// Request bytes.
    #[arg(long, default_value_t = 64)]
    request: u32,
    /// Response bytes (an echo when equal to --request, else a fixed-size answerer).
    #[arg(long, default_value_t = 64)]
    response: u32,
    /// Seconds of the measured phase per case.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Seconds of warm-up after the handshakes, before the measured phase.
    #[arg(long, default_value_t = 0.2)]
    warmup: f64,
    /// Rounds per case (medians are reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Think time in ns between an answer and the request it lets start, per connection
    /// (0: none; field report 000 used 20 ms gaps between requests).
    #[arg(long, default_value_t = 0)]
    gap_ns: u64,
    /// No GRO on either stack.
    #[arg(long)]
    no_gro: bool,
    /// The GRO flush window in ns (weir-sink's default).
    #[arg(long, default_value_t = apps::bench::e2e::FLUSH_NS)]
    gro_flush_ns: u64,
    /// Both stacks' ACK policy: linux, rfc5681, every:N, delay:NS.
    #[arg(long, default_value = "linux")]
    ack_policy: stack::ack::AckPolicy,
    /// Both stacks' sender ACK counting: per-ack, abc:L (RFC 3465) or bytes (Linux).
    #[arg(long, default_value = "bytes")]
    ack_counting: apps::gen::AckCounting,
    /// DPDK's memory on 2 MiB hugepages (reserve them first: scripts/setup-hugepages.sh).
    #[arg(long)]
    hugepages: bool,
    /// Impair what both stacks receive, e.g. loss=1%,reorder=2%,dup=1%,corrupt=0.1%,seed=7
    /// (weir-sink's --impair syntax): every transaction must still be answered exactly
    /// once, byte for byte.
    #[arg(long, value_parser = parse_impair)]
    impair: Option<(stack::impair::ImpairConfig, Option<u64>)>,
    /// The most frames each side takes per receive call (1 to 256; weir-sink's loop
    /// takes 256).
    #[arg(long, default_value_t = stack::driver::MAX_BURST)]
    rx_burst: usize,
}

fn parse_impair(s: &str) -> Result<(stack::impair::ImpairConfig, Option<u64>), String> {
    stack::impair::ImpairConfig::parse(s)
}

fn main() -> std::process::ExitCode {
    apps::logs::quiet_broken_pipe();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::E2e {
            json,
            seconds,
            runs,
            flows,
            sw_checksum,
            only,
            interleave,
            gro_flush_ns,
            gro_busy_hold_ns,
            hugepages,
            tables,
        } => apps::bench::e2e::run(&apps::bench::e2e::Options {
            json,
            seconds,
            runs,
            flows,
            sw_checksum,
            only,
            interleave,
            gro_flush_ns,
            gro_busy_hold_ns,
            memory: apps::eal_args::Memory::from_flag(hugepages),
            tables,
        }),
        Cmd::Gro {
            json,
            pattern,
            flows,
            flush_ns,
            runs,
            only,
            hugepages,
        } => apps::bench::gro::run(&apps::bench::gro::Options {
            json,
            patterns: pattern,
            flows,
            flush_ns,
            runs,
            only,
            memory: apps::eal_args::Memory::from_flag(hugepages),
        }),
        Cmd::Csum {
            json,
            runs,
            set_mib,
            lens,
        } => apps::bench::csum::run(&apps::bench::csum::Options {
            json,
            runs,
            set_mib,
            lens,
        }),
        Cmd::Rr(a) => apps::bench::rr::run(&apps::bench::rr::Options {
            conns: a.conns,
            bursts: a.burst,
            request: a.request,
            response: a.response,
            seconds: a.seconds,
            warmup: a.warmup,
            runs: a.runs,
            gap_ns: a.gap_ns,
            gro: !a.no_gro,
            gro_flush_ns: a.gro_flush_ns,
            ack_policy: a.ack_policy,
            ack_counting: a.ack_counting,
            json: a.json,
            memory: apps::eal_args::Memory::from_flag(a.hugepages),
            impair: a.impair,
            rx_burst: a.rx_burst,
        }),
        Cmd::Conns {
            conns,
            tables,
            ports,
            seconds,
            rate,
            message,
            json,
            hugepages,
        } => apps::bench::conns::run(&apps::bench::conns::Options {
            conns,
            tables,
            ports,
            seconds,
            rate,
            message,
            json,
            memory: apps::eal_args::Memory::from_flag(hugepages),
        }),
        Cmd::Tcp { json } => apps::bench::tcp::run(json),
        Cmd::Stages { flows, train, json } => flows
            .iter()
            .map(|&f| apps::bench::stages::Shape::new(f, train))
            .collect::<anyhow::Result<Vec<_>>>()
            .and_then(|shapes| apps::bench::stages::run(&shapes, json)),
        Cmd::RrStages { conns, json } => apps::bench::rr_stages::run(&conns, json),
        Cmd::Tap {
            json,
            seconds,
            runs,
        } => apps::bench::tap::run(json, seconds, runs),
        Cmd::KernelRr { cmd } => apps::bench::kernel_rr::run(cmd),
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir-bench: error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
