//! weir-gen -> ring pair -> weir-sink's loop as `weir-bench e2e` runs it: data segments
//! from a stamped pool (MSS-period pattern; the test's 100,000-byte writes also give
//! segments that start off the period, which are copied from the plain pool), frames
//! marked checksum-good as a NIC with RX offload would. Every byte in order, clean closes,
//! no stamp damaged, every mbuf back.

mod common;

#[test]
fn stamped_segments_arrive_in_order_and_close() {
    common::transfer(common::Case {
        name: "gen-stamped",
        stamped: true,
        queues: 1,
        flows: 4,
        bytes: 2 << 20,
    });
}
