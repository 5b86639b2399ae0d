//! weir's receive stack, sans-IO.
//!
//! Stages, one module each, in pipeline order: [`wire`] (parse and emit headers), [`gro`]
//! (coalesce each flow's segments under a nanosecond flush timer), [`tcp`] (connections,
//! in-order and out-of-order receive, delivery), [`ack`] (the ACK policy and batched ACK
//! building), [`stats`] (counters by reason), and [`pipeline`], which only wires them
//! together. [`buf`] and [`driver`] are the traits a driver implements (the `dpdk` crate
//! for mbufs and port queues, [`mem`] in memory). The stack never reads a clock: [`time`]
//! values come from the driver.
//!
//! Read first: RFC 9293 (TCP), RFC 5681 §4.2 (ACK generation), RFC 7323 (timestamps,
//! window scale), RFC 2018 (SACK), RFC 5961 (blind attacks), and Linux's
//! `net/ipv4/tcp_offload.c` and `net/ipv4/tcp_input.c` (see `docs/reference/linux-receive-path.md`).
#![forbid(unsafe_code)]

pub mod ack;
pub mod buf;
pub mod driver;
pub mod flow;
pub mod gro;
pub mod impair;
pub mod mem;
pub mod pipeline;
mod reason;
pub mod rss;
pub mod segment;
pub mod seq;
pub mod stats;
pub mod tcp;
pub mod time;
pub mod wire;
