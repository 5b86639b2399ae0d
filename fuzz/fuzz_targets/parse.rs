//! One received frame through `wire::parse`: never panics, and a result never points
//! outside the frame (the checks live in `testkit::harness::parse_one`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| testkit::harness::parse_one(data));
