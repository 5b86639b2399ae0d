//! weir-gen -> ring pair with 2 queues -> weir-sink's loop on 2 cores, the generator
//! delivering each frame to the queue the receiver's NIC would pick (the Toeplitz hash
//! with the standard key, a 128-entry round-robin table: `stack::rss`). 64 flows, copied
//! payloads of the prime-period pattern, software checksums at the receiver: each flow
//! is served by exactly one core, the one RSS names; every digest matches; both cores
//! work, their flows within 20% of even (32 each) and as the hash computes them; every
//! mbuf comes back.

mod common;

#[test]
fn sixty_four_flows_over_two_queues_each_on_one_core() {
    common::transfer(common::Case {
        name: "gen-rss",
        stamped: false,
        queues: 2,
        flows: 64,
        bytes: 256 << 10,
    });
}
