//! Shared code for weir's command-line programs: `weir-sink` (the receiver), `weir-gen`
//! and `weir-bench`.

pub mod bench;
pub mod busy;
pub mod capture;
pub mod config;
pub mod eal_args;
pub mod gen;
pub mod lab;
pub mod logs;
pub mod metrics;
pub mod progress;
pub mod report;
pub mod sink;
