//! weir-bench: weir's benchmark reports. See `weir-bench --help`.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "weir-bench", version, about = "weir's benchmarks, each side by side with its anchor")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// weir's GRO beside DPDK's rte_gro on the same bursts of mbufs (issue 3's benchmark).
    Gro {
        /// One JSON object per (implementation, row).
        #[arg(long)]
        json: bool,
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
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Gro { json } => apps::bench_gro::run(json),
        Cmd::Tap { json, seconds, runs } => apps::bench_tap::run(json, seconds, runs),
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir-bench: error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
