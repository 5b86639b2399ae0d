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
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir-lab: {e:#}");
            ExitCode::FAILURE
        }
    }
}
