//! Shared by the hardening tests (`malformed_corpus`, `bounds`, `fuzz_regressions`) and by
//! the fuzz targets in `fuzz/`, which include this directory by path: frame builders from
//! the peer's side ([`frames`]) and the invariant-checking fuzz harnesses ([`harness`]).
//! Nothing here needs DPDK.
#![allow(dead_code, unreachable_pub, missing_docs, clippy::unwrap_used)]

pub mod client;
pub mod frames;
pub mod harness;
