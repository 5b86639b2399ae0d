//! Error paths give the documented error, not a panic or an abort:
//! an unknown EAL option, a port id that does not exist, and a second EAL initialisation.
//!
//! `rte_eal_init` runs once per process, so each scenario runs in a child process: the
//! test re-executes this test binary with `--exact <scenario>` and `WEIR_ERROR_CHILD` set,
//! and the child performs the scenario and its assertions.

mod common;

use std::process::Command;

use dpdk::{Eal, Error, Mempool, Port, PortConfig};

const CHILD_ENV: &str = "WEIR_ERROR_CHILD";

/// In the parent: runs `name` in a child process and asserts it passed. In the child:
/// returns `true` so the caller runs the scenario.
fn in_child(name: &str) -> bool {
    if std::env::var(CHILD_ENV).as_deref() == Ok(name) {
        return true;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, name)
        .output()
        .expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "scenario {name} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    false
}

#[test]
fn unknown_eal_option() {
    if !in_child("unknown_eal_option") {
        return;
    }
    let args = common::eal_args("err-opt", &["--definitely-not-an-eal-option"]);
    match Eal::init(&args) {
        Err(e @ Error::EalInit { errno, .. }) => {
            assert_eq!(errno, libc::EINVAL);
            let msg = e.to_string();
            println!("documented error: {msg}");
            assert!(msg.contains("invalid EAL arguments"), "{msg}");
        }
        other => panic!("expected Error::EalInit(EINVAL), got {other:?}"),
    }
    assert!(Eal::get().is_none(), "a failed init leaves no handle");
}

#[test]
fn port_that_does_not_exist() {
    if !in_child("port_that_does_not_exist") {
        return;
    }
    let eal = Eal::init(common::eal_args("err-port", &["-l", "0"])).expect("EAL");
    assert_eq!(eal.port_count(), 0);
    let pool = Mempool::new(&eal, "err_port", 511, 32, dpdk::DEFAULT_DATA_ROOM).expect("pool");
    match Port::configure(&eal, 7, pool, &PortConfig::default()) {
        Err(
            e @ Error::NoSuchPort {
                port: 7,
                available: 0,
            },
        ) => {
            let msg = e.to_string();
            println!("documented error: {msg}");
            assert!(msg.contains("--vdev=net_tap0"), "{msg}");
        }
        other => panic!("expected Error::NoSuchPort, got {other:?}"),
    }
    assert!(matches!(
        Port::info(&eal, 31),
        Err(Error::NoSuchPort { port: 31, .. })
    ));
    // Out of DPDK's range altogether.
    assert!(matches!(
        Port::info(&eal, u16::MAX),
        Err(Error::NoSuchPort { .. })
    ));
}

#[test]
fn second_eal_init() {
    if !in_child("second_eal_init") {
        return;
    }
    let args = common::eal_args("err-twice", &["-l", "0"]);
    Eal::init(&args).expect("first init");
    // The same arguments: the existing handle.
    Eal::init(&args).expect("same arguments give the existing handle");
    // Different arguments: the documented error.
    let mut other = args.clone();
    other.push("--vdev=net_ring0".into());
    match Eal::init(&other) {
        Err(e @ Error::AlreadyInitialized { .. }) => {
            let msg = e.to_string();
            println!("documented error: {msg}");
            assert!(msg.contains("once per process"), "{msg}");
        }
        other => panic!("expected Error::AlreadyInitialized, got {other:?}"),
    }
    assert!(Eal::get().is_some());
}
