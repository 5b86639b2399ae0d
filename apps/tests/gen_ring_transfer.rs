//! weir-gen -> ring pair -> weir-sink's loop with copied payloads of the prime-period
//! pattern (the digests check order) and software checksums at the receiver.

mod common;

#[test]
fn four_flows_of_two_megabytes_arrive_in_order_and_close() {
    common::transfer(common::Case {
        name: "gen-test",
        stamped: false,
        queues: 1,
        flows: 4,
        bytes: 2 << 20,
    });
}
