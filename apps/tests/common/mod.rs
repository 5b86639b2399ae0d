//! weir-gen (its flows on weir's TCP) against weir-sink's loop over a ring port pair, in one process on two lcores
//! (shared by `gen_ring_transfer.rs` and `gen_ring_stamped.rs`: one EAL per process, so
//! one test per file): 4 flows x 2 MB arrive complete and in order (SHA-256 per
//! connection), every connection closes cleanly on both sides, and the mempools return to
//! their starting in-use counts.

use std::net::Ipv4Addr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use apps::bench::loops::{run_receiver, ReceiverCore, RxWork};
use apps::gen::driver::{GenIo, GenReport};
use apps::gen::payload::{stream_digest_in, Payload, PERIOD};
use apps::gen::pool::GenPool;
use apps::gen::sender::HDR_LEN;
use apps::gen::{GenConfig, Interleave};
use dpdk::{Clock, Eal, Mbuf, Mempool, Port, PortConfig};
use stack::ack::AckPolicy;
use stack::driver::{Burst, RxQueue};
use stack::gro::GroConfig;
use stack::pipeline::PipelineConfig;
use stack::tcp::TcpConfig;
use stack::wire::LocalAddrs;

const FLOWS: u32 = 4;
const BYTES: u64 = 2 << 20;
const MSS: usize = 1448;

/// weir-gen -> ring pair -> weir-sink's loop: FLOWS x BYTES in order, clean closes, pools
/// back to where they started. `stamped`: data segments from a stamped pool (pattern
/// period = MSS), frames marked checksum-good as by a NIC (the `weir-bench e2e` set-up);
/// otherwise copied payloads with the prime pattern and software checksums.
pub(crate) fn transfer(name: &str, stamped: bool) {
    let eal = Eal::init([
        "gen-test".to_string(),
        "--no-pci".into(),
        "--no-huge".into(),
        "-m".into(),
        "1024".into(),
        format!("--file-prefix=weir-{name}-{}", std::process::id()),
        "-l".into(),
        "0-1".into(),
        "--log-level=*:warning".into(),
    ])
    .expect("EAL");
    let worker = eal.worker_lcores()[0];
    let (a, b) = dpdk::ring_port_pair(&eal, "gt", 1024).expect("ring pair");
    let gen_pool = Mempool::new(&eal, "gt_gen", 8191, 256, dpdk::DEFAULT_DATA_ROOM).expect("pool");
    let stamp = Payload::with_period(MSS).bytes(0, MSS).to_vec();
    let data_pool = Mempool::new_stamped(
        &eal,
        "gt_data",
        8191,
        256,
        dpdk::DEFAULT_DATA_ROOM,
        HDR_LEN,
        &stamp,
    )
    .expect("pool");
    let period = if stamped { MSS } else { PERIOD };
    let pattern = Payload::with_period(period);
    let pattern_pool = Mempool::new(
        &eal,
        "gt_pattern",
        1,
        0,
        (pattern.as_bytes().len() + 128) as u16,
    )
    .expect("pool");
    let refs = Mempool::new(&eal, "gt_refs", 4095, 0, 0).expect("pool");
    let rx_pool = Mempool::new(&eal, "gt_rx", 8191, 256, dpdk::DEFAULT_DATA_ROOM).expect("pool");
    let mut gen_port = Port::configure(&eal, a, gen_pool, &PortConfig::default()).expect("port a");
    let mut rx_port = Port::configure(&eal, b, rx_pool, &PortConfig::default()).expect("port b");
    if stamped {
        // ACKs leave with TX checksum offload requested; the generator completes them.
        rx_port.model_tx_checksum_offload();
    }
    gen_port.start().expect("start a");
    rx_port.start().expect("start b");
    let (gen_mac, rx_mac) = (gen_port.mac().expect("mac"), rx_port.mac().expect("mac"));
    let gen_in_use = gen_pool.in_use();
    let data_in_use = data_pool.in_use();
    let rx_in_use = rx_pool.in_use();
    let clock = Clock::new(&eal);
    let rx_ip = Ipv4Addr::new(198, 18, 0, 1);

    let cfg = GenConfig {
        flows: FLOWS,
        src_mac: gen_mac,
        dst_mac: Some(rx_mac),
        dst_ip: rx_ip,
        bytes_per_flow: Some(BYTES),
        duration: None,
        write_size: 100_000, // not a multiple of the MSS: short segments with PSH
        interleave: Interleave::Train(4),
        mss: MSS as u16,
        pattern_period: if stamped { MSS as u32 } else { PERIOD as u32 },
        ..GenConfig::default()
    };
    cfg.validate().expect("config");
    let stop = Arc::new(AtomicBool::new(false));
    let report: Arc<Mutex<Option<GenReport>>> = Arc::new(Mutex::new(None));
    let io = GenIo {
        rx: gen_port.rx_queue(0).expect("rxq"),
        tx: gen_port.tx_queue(0).expect("txq"),
        pool: {
            let mut m = pattern_pool.alloc_empty().expect("pattern mbuf");
            assert!(m.extend_from_slice(pattern.as_bytes()));
            let data = dpdk::SharedData::new(m).expect("shareable");
            if stamped {
                GenPool::with_stamped(gen_pool.for_port(a), data_pool.for_port(a), stamp.clone())
            } else {
                GenPool::plain(gen_pool.for_port(a))
            }
            .with_pattern(data, refs, period, false)
        },
        clock,
        // Copied: the receiver verifies every checksum in software.
        nic_rx_checksum: stamped,
    };
    // `secs` 30: the run ends when every flow has closed, within 30 + 30 s at most.
    let launched = apps::bench::e2e::launch_generator(
        &eal,
        worker,
        apps::bench::e2e::SenderKind::Stack,
        io,
        cfg,
        30.0,
        &stop,
        &report,
    )
    .expect("launch");
    let rx = run_receiver(ReceiverCore {
        rx: rx_port.rx_queue(0).expect("rxq"),
        tx: rx_port.tx_queue(0).expect("txq"),
        pool: rx_pool.for_port(b),
        clock,
        cfg: PipelineConfig {
            local: LocalAddrs::new(rx_mac, Some(rx_ip), None),
            gro: Some(GroConfig::default()),
            tcp: TcpConfig::default(),
            listen: vec![(5001, AckPolicy::default())],
            tx_csum_offload: stamped,
        },
        digest: true,
        work: RxWork::Stack,
        stop: stop.clone(),
    })
    .expect("receiver");
    assert_eq!(launched.join().expect("join"), 0);
    let g = report.lock().expect("lock").take().expect("report");
    if stamped {
        // Every stamped buffer, back in its pool, still carries its payload.
        let pool =
            GenPool::with_stamped(gen_pool.for_port(a), data_pool.for_port(a), stamp.clone());
        let (_, damaged) = pool.verify_stamps();
        assert_eq!(g.stamps_damaged + damaged, 0, "stamps damaged");
    }

    // The generator: every flow closed cleanly, nothing lost on the ring.
    assert!(g.finished, "{g:?}");
    assert_eq!(g.stats.closed, u64::from(FLOWS), "{g:?}");
    assert_eq!(g.stats.resets + g.stats.timeouts, 0, "{g:?}");
    assert_eq!(g.stats.retransmits, 0, "{g:?}");
    assert_eq!(g.stats.bytes, u64::from(FLOWS) * BYTES);
    if stamped {
        // Full segments start at multiples of the period; one spanning two writes (one
        // per write at most) is copied.
        let writes = u64::from(FLOWS) * BYTES.div_ceil(100_000);
        assert!(g.stats.stamped > 0, "{g:?}");
        assert!(
            g.stats.segments - g.stats.stamped <= writes + u64::from(FLOWS),
            "{g:?}"
        );
    } else {
        assert_eq!(g.stats.stamped, 0);
    }

    // The receiver: each connection's bytes, in order, and a clean close.
    let want: String = stream_digest_in(BYTES, if stamped { MSS } else { PERIOD })
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(rx.digests.len(), FLOWS as usize, "{:?}", rx.digests);
    for d in &rx.digests {
        assert_eq!(d.end, "closed", "{d:?}");
        assert_eq!(d.bytes, BYTES, "{d:?}");
        assert_eq!(d.sha256, want, "{d:?}");
    }
    assert_eq!(rx.open_at_stop, 0);
    // Stamped: the ACKs' checksums were left to the (modelled) NIC, and the generator,
    // which completed them, read every one (the transfer could not close otherwise).
    assert_eq!(rx.stats.ack.tx_csum_offloaded > 0, stamped);
    assert_eq!(rx.stats.tcp.bytes_in_order, u64::from(FLOWS) * BYTES);

    // Nothing left anywhere: the rings are empty and every mbuf is back.
    let mut burst: Burst<Mbuf> = Burst::new();
    for port in [&gen_port, &rx_port] {
        let mut q = port.rx_queue(0).expect("rxq");
        assert_eq!(q.rx_burst(&mut burst), 0, "frames left in a ring");
    }
    assert_eq!(gen_pool.in_use(), gen_in_use, "generator pool");
    assert_eq!(data_pool.in_use(), data_in_use, "generator's stamped pool");
    assert_eq!(rx_pool.in_use(), rx_in_use, "receiver pool");
    assert_eq!(refs.in_use(), 0, "every write buffer was freed");
    assert_eq!(
        pattern_pool.in_use(),
        0,
        "the pattern went back with its last reference"
    );
}
