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
//!
//! # A minimal loop
//!
//! One [`pipeline::Pipeline`] per core, driven by the caller's loop in this order:
//! `handle_rx_burst` → events → `recv` / `send` / `connect` / `close` → `handle_timeout`
//! → `poll_tx` → one transmit. Here two pipelines talk over in-memory links
//! ([`mem::link`]) on a virtual clock: a client connects to an echo server, sends a
//! greeting and reads it back. On DPDK the links are a port's queues and the clock is the
//! TSC; nothing else changes.
//!
//! ```
//! use std::net::{IpAddr, Ipv4Addr, SocketAddr};
//! use stack::ack::AckPolicy;
//! use stack::driver::{Burst, RxQueue, TxQueue};
//! use stack::mem::{link, MemRx, MemTx, VecBuf, VecPool};
//! use stack::pipeline::{Pipeline, PipelineConfig};
//! use stack::tcp::{ConnectOpts, Event, TcpConfig};
//! use stack::time::{Duration, Instant};
//! use stack::wire::LocalAddrs;
//!
//! let (mac_s, mac_c) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
//! let (ip_s, ip_c) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
//! let config = |mac, ip, listen: Vec<(u16, AckPolicy)>| PipelineConfig {
//!     local: LocalAddrs::new(mac, Some(ip), None),
//!     gro: None,
//!     tcp: TcpConfig::default(),
//!     listen,
//!     tx_csum_offload: false,
//! };
//! let mut server = Pipeline::<VecBuf>::new(config(mac_s, ip_s, vec![(7, AckPolicy::linux())]))?;
//! let mut client = Pipeline::<VecBuf>::new(config(mac_c, ip_c, vec![]))?;
//! let (mut to_server, mut server_rx) = link(1024);
//! let (mut to_client, mut client_rx) = link(1024);
//! let mut pool = VecPool::new(1024, 2048);
//!
//! // One loop iteration of one core: everything in order, then one transmit.
//! fn iterate(
//!     p: &mut Pipeline<VecBuf>,
//!     rx: &mut MemRx,
//!     tx: &mut MemTx,
//!     pool: &mut VecPool,
//!     now: Instant,
//!     app: &mut dyn FnMut(&mut Pipeline<VecBuf>, &mut VecPool, Event),
//! ) {
//!     let mut burst = Burst::new();
//!     rx.rx_burst(&mut burst);
//!     p.handle_rx_burst(now, &mut burst);
//!     while let Some(ev) = p.tcp().poll_event() {
//!         app(p, pool, ev);
//!     }
//!     p.handle_timeout(now);
//!     let mut out = Burst::new();
//!     p.poll_tx(now, pool, &mut out);
//!     tx.tx_burst(&mut out);
//! }
//!
//! let mut now = Instant::ZERO;
//! let remote = SocketAddr::new(IpAddr::V4(ip_s), 7);
//! let conn = client.tcp().connect(now, IpAddr::V4(ip_c), remote, ConnectOpts::new(mac_c, mac_s))?;
//! let mut echoed = Vec::new();
//! for _ in 0..100 {
//!     // The server echoes what it reads (a copy into pool buffers; `send_bufs` hands
//!     // the received buffers back without one).
//!     iterate(&mut server, &mut server_rx, &mut to_client, &mut pool, now, &mut |p, pool, ev| {
//!         if let Event::Readable(id) = ev {
//!             let mut data = Vec::new();
//!             p.tcp().recv(id, |slices| {
//!                 slices.iter().for_each(|s| data.extend_from_slice(s.bytes()));
//!                 data.len()
//!             }).unwrap();
//!             p.tcp().send(now, id, &data, pool).unwrap();
//!         }
//!     });
//!     iterate(&mut client, &mut client_rx, &mut to_server, &mut pool, now, &mut |p, pool, ev| {
//!         match ev {
//!             Event::Opened(id) => {
//!                 p.tcp().send(now, id, b"hello, weir", pool).unwrap();
//!             }
//!             Event::Readable(id) => {
//!                 p.tcp().recv(id, |slices| {
//!                     slices.iter().for_each(|s| echoed.extend_from_slice(s.bytes()));
//!                     slices.iter().map(|s| s.bytes().len()).sum()
//!                 }).unwrap();
//!             }
//!             _ => {}
//!         }
//!     });
//!     now = now + Duration::from_micros(10);
//! }
//! assert_eq!(echoed, b"hello, weir");
//! assert!(client.tcp().info(conn).is_some());
//! # Ok::<(), stack::tcp::TcpError>(())
//! ```
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
pub mod spare;
pub mod stats;
pub mod tcp;
pub mod time;
pub mod wire;
