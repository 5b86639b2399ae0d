//! A `net_tap` vdev inside a network namespace: a UDP datagram that the Linux kernel in the
//! namespace sends arrives through `rx_burst` with the expected bytes.
//!
//! The test thread `unshare(CLONE_NEWNET)`s before EAL initialisation, so the tap
//! interface, every `ip` command (children of this thread) and the UDP socket live in a
//! fresh namespace that the kernel removes when this process exits, whether the test
//! passes, fails or crashes. Addresses are 198.18.0.0/24 (RFC 2544 benchmarking space)
//! and exist only inside that namespace. Needs root and /dev/net/tun; without them the
//! test fails and says so.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use dpdk::{Eal, Mbuf, Mempool, Port, PortConfig};
use stack::driver::{Burst, RxQueue};

const IFACE: &str = "dtap0";
const KERNEL_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const UDP_PORT: u16 = 9999;

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running `ip {}`: {e} (install iproute2)", args.join(" ")));
    assert!(
        out.status.success(),
        "`ip {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The UDP payload in `frame` if it is IPv4/UDP from KERNEL_IP to PORT_IP:UDP_PORT.
fn udp_payload<'a>(frame: &'a [u8], mac: &[u8; 6]) -> Option<&'a [u8]> {
    if frame.len() < 14 + 20 + 8 || &frame[0..6] != mac || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[14..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if ip[0] >> 4 != 4 || ip[9] != 17 || ip[12..16] != KERNEL_IP.octets() {
        return None;
    }
    if ip[16..20] != PORT_IP.octets() || total > ip.len() {
        return None;
    }
    let udp = &ip[ihl..total];
    if u16::from_be_bytes([udp[2], udp[3]]) != UDP_PORT {
        return None;
    }
    let ulen = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    udp.get(8..ulen)
}

#[test]
fn kernel_udp_datagram_arrives_through_net_tap() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test needs root (it creates a network namespace and a tap interface): run \
         scripts/test.sh as root"
    );
    assert!(
        std::path::Path::new("/dev/net/tun").exists(),
        "/dev/net/tun is missing: load the tun module (`modprobe tun`) or give the container \
         the device (--device /dev/net/tun)"
    );
    // SAFETY: unshare only changes this thread's network namespace; no memory effects.
    let ret = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(
        ret,
        0,
        "unshare(CLONE_NEWNET) failed: {} (needs CAP_SYS_ADMIN)",
        std::io::Error::last_os_error()
    );
    ip(&["link", "set", "lo", "up"]);

    let vdev = format!("--vdev=net_tap0,iface={IFACE}");
    let eal = Eal::init(common::eal_args("tap", &["-l", "0", &vdev])).expect("EAL");
    let port_id = eal.port_by_name("net_tap0").expect("net_tap0 probed");
    let info = Port::info(&eal, port_id).expect("info");
    assert_eq!(info.driver_name, "net_tap");
    let pool = Mempool::new(&eal, "tap_test", 4095, 64, dpdk::DEFAULT_DATA_ROOM).expect("pool");
    let cfg = PortConfig {
        promiscuous: true,
        ..PortConfig::default()
    };
    let mut port = Port::configure(&eal, port_id, pool, &cfg).expect("configure");
    port.start().expect("start");
    let mac = port.mac().expect("mac");
    let mac_s = mac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    println!(
        "net_tap0: port {port_id}, MAC {mac_s}, offloads {:?}",
        port.offloads()
    );

    // The PMD keeps a full ring of RX mbufs and replaces each one it hands out.
    let baseline = pool.in_use();
    ip(&["link", "set", IFACE, "up"]);
    ip(&["addr", "add", &format!("{KERNEL_IP}/24"), "dev", IFACE]);
    ip(&[
        "neigh",
        "replace",
        &PORT_IP.to_string(),
        "lladdr",
        &mac_s,
        "dev",
        IFACE,
        "nud",
        "permanent",
    ]);

    let sock = UdpSocket::bind(SocketAddrV4::new(KERNEL_IP, 0)).expect("bind 198.18.0.2");
    let payload: Vec<u8> = (0..200u32).map(|i| (i * 31 + 7) as u8).collect();
    let mut rx = port.rx_queue(0).expect("rxq");
    let mut burst: Burst<Mbuf> = Burst::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut next_send = Instant::now();
    let mut others = 0usize;
    loop {
        let now = Instant::now();
        if now >= deadline {
            eprintln!(
                "port stats: {:?}, pool in use {}",
                port.stats(),
                pool.in_use()
            );
            for args in [&["-s", "link"][..], &["addr"], &["neigh"], &["route"]] {
                let out = Command::new("ip").args(args).output().expect("ip");
                eprintln!(
                    "ip {}:\n{}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stdout)
                );
            }
        }
        assert!(
            now < deadline,
            "no UDP datagram arrived through net_tap in 10 s ({others} other frames seen)"
        );
        if now >= next_send {
            sock.send_to(&payload, SocketAddrV4::new(PORT_IP, UDP_PORT))
                .expect("send_to 198.18.0.1");
            next_send = now + Duration::from_millis(500);
        }
        rx.rx_burst(&mut burst);
        let mut got = false;
        for m in burst.drain(..) {
            match udp_payload(m.data(), &mac) {
                Some(p) => {
                    assert_eq!(p, &payload[..], "datagram bytes differ");
                    got = true;
                }
                None => others += 1,
            }
        }
        if got {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(burst);
    drop(rx);
    port.stop().expect("stop");
    assert_eq!(pool.in_use(), baseline, "mbufs leaked");
}
