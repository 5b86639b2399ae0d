//! A TSC clock giving the stack's nanosecond [`Instant`]s.
//!
//! The pipeline reads it once per loop iteration. Conversion is a 64x64->128-bit multiply
//! and a shift (no division), with the factor computed once from `rte_get_tsc_hz`.

use stack::time::{Duration, Instant};

use crate::Eal;

/// Fixed-point fraction bits of the conversion factors.
const SHIFT: u32 = 32;

/// A TSC-based clock; `Instant::ZERO` is when it was created. `Copy`, usable on any lcore
/// (the TSC is invariant and synchronised across cores on every CPU DPDK supports).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    hz: u64,
    origin: u64,
    ns_per_cycle: u128,  // ns per cycle << SHIFT
    cycles_per_ns: u128, // cycles per ns << SHIFT
}

impl Clock {
    /// A clock starting now. Needs the EAL, which measures the TSC frequency.
    pub fn new(_eal: &Eal) -> Clock {
        // SAFETY: the EAL is initialised, so the TSC frequency is known.
        let hz = unsafe { dpdk_sys::rte_get_tsc_hz() }.max(1);
        Clock {
            hz,
            origin: Self::cycles(),
            ns_per_cycle: (1_000_000_000u128 << SHIFT) / u128::from(hz),
            cycles_per_ns: (u128::from(hz) << SHIFT) / 1_000_000_000,
        }
    }

    /// The raw TSC (`rte_rdtsc`). On x86-64 the instruction is inlined: DPDK's
    /// `rte_rdtsc` is a static inline function, reachable from Rust only through a
    /// generated wrapper whose call showed up at 5% of `weir-bench gro`'s profile.
    #[inline(always)]
    pub fn cycles() -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: RDTSC has no preconditions and exists on every x86-64 CPU (it is
            // what rte_rdtsc executes there).
            unsafe { core::arch::x86_64::_rdtsc() }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // SAFETY: reads the time-stamp counter; no preconditions.
            unsafe { dpdk_sys::rte_rdtsc() }
        }
    }

    /// TSC ticks per second.
    pub fn hz(&self) -> u64 {
        self.hz
    }

    /// Nanoseconds since the clock was created.
    #[inline]
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.cycles_to_ns(Self::cycles().wrapping_sub(self.origin)))
    }

    /// The instant a raw TSC value corresponds to (values before the origin give ZERO).
    pub fn instant_at(&self, tsc: u64) -> Instant {
        Instant::from_nanos(self.cycles_to_ns(tsc.saturating_sub(self.origin)))
    }

    /// Converts TSC cycles to nanoseconds.
    #[inline]
    pub fn cycles_to_ns(&self, cycles: u64) -> u64 {
        u64::try_from((u128::from(cycles) * self.ns_per_cycle) >> SHIFT).unwrap_or(u64::MAX)
    }

    /// Converts nanoseconds to TSC cycles.
    #[inline]
    pub fn ns_to_cycles(&self, ns: u64) -> u64 {
        u64::try_from((u128::from(ns) * self.cycles_per_ns) >> SHIFT).unwrap_or(u64::MAX)
    }

    /// Converts a duration to TSC cycles.
    pub fn duration_to_cycles(&self, d: Duration) -> u64 {
        self.ns_to_cycles(d.as_nanos())
    }
}
