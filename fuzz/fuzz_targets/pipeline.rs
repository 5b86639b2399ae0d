//! Structure-aware sequences of frames, clock steps and application calls through the whole
//! pipeline (parse, GRO, TCP, ACK batch), with the invariants of
//! `stack/tests/support/harness.rs` checked after every step.
#![no_main]

#[allow(dead_code)]
#[path = "../../stack/tests/support/mod.rs"]
mod support;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    support::harness::pipeline(data);
});
