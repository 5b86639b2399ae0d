//! weir-lab: the receive-path lab's experiments (see `scripts/lab/` and `docs/lab.md`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// weir's receive-path lab: reruns the field reports (docs/reference/field-reports.md) as
/// experiments and writes CSV, PNG plots and a Markdown fragment per experiment.
#[derive(Parser, Debug)]
#[command(name = "weir-lab")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// GRO flush-timeout sweep (field report 004): 200 flows interleaved per segment.
    FlushSweep {
        /// Output directory.
        #[arg(long, default_value = "docs/lab")]
        out: PathBuf,
        /// Seconds of ring run per window for receiver cycles per segment (0: skip).
        #[arg(long, default_value_t = 1.0)]
        ring_secs: f64,
        /// Ring rounds per window (median reported).
        #[arg(long, default_value_t = 3)]
        ring_rounds: usize,
    },
    /// Quickack on PSH at an MSS boundary (field report 002).
    Psh {
        /// Output directory.
        #[arg(long, default_value = "docs/lab")]
        out: PathBuf,
    },
    /// ACK counting against ACK policies, with and without gaps (field report 000).
    Abc {
        /// Output directory.
        #[arg(long, default_value = "docs/lab")]
        out: PathBuf,
    },
    /// Field reports 000, 003 and 004 as request/response transactions: weir-bench rr's
    /// client and echo server on two lcores over the ring pair (bursts, ACK counting and
    /// policies with and without think times, the GRO flush window, GRO on against off).
    Rr {
        /// Output directory.
        #[arg(long, default_value = "docs/lab")]
        out: PathBuf,
        /// Seconds measured per case.
        #[arg(long, default_value_t = 0.5)]
        seconds: f64,
        /// Rounds per case (medians).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
}

fn main() -> ExitCode {
    apps::logs::quiet_broken_pipe();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::FlushSweep {
            out,
            ring_secs,
            ring_rounds,
        } => apps::lab::flush::run(&apps::lab::flush::Opts {
            out,
            ring_secs,
            ring_rounds,
        }),
        Cmd::Psh { out } => apps::lab::psh::run(&out),
        Cmd::Abc { out } => apps::lab::abc::run(&out),
        Cmd::Rr {
            out,
            seconds,
            rounds,
        } => apps::lab::rr::run(&apps::lab::rr::Opts {
            out,
            seconds,
            rounds,
        }),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir-lab: {e:#}");
            ExitCode::FAILURE
        }
    }
}
