//! Logging: `tracing` to stderr, DPDK's own log routed into it.
//!
//! The filter is `--log-level` when given (a level such as `debug`, or any `RUST_LOG`
//! directive list such as `info,dpdk=debug`), else the `RUST_LOG` environment variable,
//! else `info`. DPDK's lines appear with the target `dpdk` and the level DPDK gave them,
//! so `--log-level info,dpdk=warn` quietens DPDK alone.

use anyhow::{anyhow, Result};
use dpdk::log::LogLevel;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::EnvFilter;

/// The filter for `--log-level` (or `RUST_LOG`, or `info`).
pub fn filter(cli: Option<&str>) -> Result<EnvFilter> {
    let spec = match cli {
        Some(s) => s.to_owned(),
        None => std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
    };
    EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .parse(&spec)
        .map_err(|e| anyhow!("--log-level {spec:?}: {e} (give error, warn, info, debug, trace or RUST_LOG directives)"))
}

/// Installs the subscriber and routes DPDK's log into it. Call once, before the EAL starts
/// (to see EAL's own messages). A second call changes nothing.
pub fn init(cli: Option<&str>) -> Result<()> {
    let filter = filter(cli)?;
    let max = filter.max_level_hint().unwrap_or(LevelFilter::TRACE);
    let installed = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(true)
        .try_init()
        .is_ok();
    if !installed {
        return Ok(());
    }
    // DPDK formats nothing it would not show: cap its level at ours.
    dpdk::log::set_global_level(match max {
        LevelFilter::OFF | LevelFilter::ERROR => LogLevel::Error,
        LevelFilter::WARN => LogLevel::Warning,
        LevelFilter::INFO => LogLevel::Info,
        _ => LogLevel::Debug,
    });
    dpdk::log::redirect(|level, line| match level {
        LogLevel::Error => tracing::error!(target: "dpdk", "{line}"),
        LogLevel::Warning => tracing::warn!(target: "dpdk", "{line}"),
        LogLevel::Notice | LogLevel::Info => tracing::info!(target: "dpdk", "{line}"),
        LogLevel::Debug => tracing::debug!(target: "dpdk", "{line}"),
    })
    .map_err(|e| anyhow!("routing DPDK's log: {e}"))
}

/// Makes a closed stdout (`weir-bench gro | head`) end the program quietly, as it ends a
/// C program killed by SIGPIPE, instead of with a panic message. Rust ignores SIGPIPE, so
/// `println!` panics with "failed printing to stdout: Broken pipe"; this hook exits with
/// status 141 (128 + SIGPIPE, what a shell reports for such a program) for that panic
/// alone and leaves every other panic to the default hook.
pub fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.contains("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_directives_parse() {
        assert!(filter(Some("debug")).is_ok());
        assert!(filter(Some("info,dpdk=warn")).is_ok());
        assert!(filter(Some("info,dpdk=notalevel")).is_err());
    }
}
