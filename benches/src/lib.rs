//! Shared fixtures for weir's criterion benchmarks.

pub mod gro_fixture;
pub mod tcp_fixture;
