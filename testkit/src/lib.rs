//! Test support for weir, with no DPDK: everything runs on `stack`'s in-memory buffers
//! (`stack::mem`) and a virtual clock, so it builds and runs on any machine.
//!
//! - [`app`]: the application's side of a pipeline in tests (read what became readable);
//! - [`frames`]: frames as a peer sends them (addresses, TCP segments, ARP/ICMP/ND
//!   requests, byte edits with checksum repair) and the peer's view of what weir sends;
//! - [`corpus`]: the malformed-frame corpus, one frame at least per parse drop reason;
//! - [`client`]: a scripted TCP client against a [`harness::Sim`];
//! - [`harness`]: the fuzz harnesses with their invariants (`fuzz/` runs them under
//!   libFuzzer, `stack/tests/fuzz_regressions.rs` replays their kept inputs);
//! - [`send_harness`]: the send-half fuzz harness (a hostile peer decides every ACK,
//!   SACK block and window weir sees while it sends known streams);
//! - [`tcp`]: the TCP fixture of the state tests and the TCP benchmarks;
//! - [`smol`]: smoltcp as the peer, in process, through the impairment stage.
//!
//! Used by stack's integration tests (a dev-dependency: stack's own unit tests cannot use
//! it, since that would be a second copy of stack's types), `benches`, `weir-bench tcp`
//! and `fuzz/`.
//!
//! The address rule of the project (docs/architecture.md, "Running DPDK here"): test
//! traffic uses only 198.18.0.0/15, the range RFC 2544 sets aside for benchmarking, and
//! 2001:db8::/32, the IPv6 documentation prefix (RFC 3849), so no test frame can name a
//! real host. Every address here is inside them.
#![allow(clippy::unwrap_used)] // a failed unwrap in a test helper is a failed test

pub mod app;
pub mod client;
pub mod corpus;
pub mod frames;
pub mod harness;
pub mod send_harness;
pub mod smol;
pub mod tcp;
