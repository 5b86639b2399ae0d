//! One received frame through `wire::parse`: never panics, and a result never points
//! outside the frame (the checks live in `stack/tests/support/harness.rs`).
#![no_main]

#[allow(dead_code)]
#[path = "../../stack/tests/support/mod.rs"]
mod support;

libfuzzer_sys::fuzz_target!(|data: &[u8]| support::harness::parse_one(data));
