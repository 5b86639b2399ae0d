//! Structure-aware sequences of frames, clock steps and application calls through the whole
//! pipeline (parse, GRO, TCP, ACK batch), with the invariants of `testkit::harness` checked
//! after every step.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    testkit::harness::pipeline(data);
});
