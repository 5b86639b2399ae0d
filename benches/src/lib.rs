//! Shared fixtures for weir's criterion benchmarks.

pub mod tcp_fixture;
