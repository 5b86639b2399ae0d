//! weir's command-line programs, one module per program: [`sink`] (`weir-sink`, the
//! receiver), [`serve`] (`weir-serve`), [`gen`] (`weir-gen`), [`bench`](mod@bench)
//! (`weir-bench`) and [`lab`] (`weir-lab`). The other modules are what they share: the
//! command line and the EAL's ([`eal_args`], [`config`], [`logs`]), capture, metrics and
//! reports, loop timing ([`busy`]) and progress bars; [`net`] is the DPDK set-up of the
//! programs and examples (apps/examples/) built on the stack's API.

pub mod bench;
pub mod busy;
pub mod capture;
pub mod config;
pub mod eal_args;
pub mod gen;
pub mod heap;
pub mod lab;
pub mod logs;
pub mod metrics;
pub mod net;
pub mod progress;
pub mod report;
pub mod serve;
pub mod sink;
