//! The send half against a hostile peer: weir sends known streams on one to three
//! connections while every ACK, SACK block, window, timestamp and RST it sees is the
//! input's choice, with the invariants of `testkit::send_harness` checked after every step
//! (nothing beyond the peer's window, nothing that was not written, every byte delivered
//! after an honest phase, memory bounded, every frame parses).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    testkit::send_harness::send(data);
});
