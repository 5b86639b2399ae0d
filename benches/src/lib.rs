//! Shared fixtures for weir's criterion benchmarks.

pub mod gro_fixture;
