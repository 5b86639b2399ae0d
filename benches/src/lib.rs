//! Shared fixtures for weir's criterion benchmarks.
