//! `weir-bench`'s benchmarks, each side by side with its anchor, and what they share.
//!
//! - [`e2e`]: weir-gen -> ring pair -> weir-sink's loop in one process, beside the
//!   receive-and-free loops of [`loops`];
//! - [`gro`]: weir's GRO beside DPDK's `rte_gro` on the same bursts of mbufs (the fixture
//!   is [`gro_fixture`], shared with the criterion benches in `benches/`);
//! - [`csum`]: weir's Internet checksum beside DPDK's `rte_raw_cksum` on the same buffers;
//! - [`tcp`]: TCP receive, ACK building and the send side (segments sent, ACKs processed)
//!   on in-memory buffers;
//! - [`stages`]: ns per segment of each receive-path stage;
//! - [`rr_stages`]: ns per request/response transaction of each stage of the answering side;
//! - [`tap`]: the kernel's TCP over net_tap into weir-sink, beside `weir-sink --drop`;
//! - [`conns`]: many established connections on one core (up to a million): handshakes
//!   per second, heap per connection, cycles per segment, every connection's bytes;
//! - [`rr`]: request/response transactions between two weir stacks over the ring pair;
//! - [`kernel_rr`]: the kernel's request/response on plain sockets (server and client),
//!   the anchor of `weir-bench rr`;
//! - [`latency`] and [`rr_bytes`]: the latency histogram and the transaction bytes of the
//!   request/response benchmarks.

pub mod conns;
pub mod csum;
pub mod e2e;
pub mod gro;
pub mod gro_fixture;
pub mod kernel_rr;
pub mod latency;
pub mod loops;
pub mod rr;
pub mod rr_bytes;
pub mod rr_stages;
pub mod stages;
pub mod tap;
pub mod tcp;
