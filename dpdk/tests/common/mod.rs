//! Shared helpers for the DPDK integration tests (each test file is its own process).

#![allow(dead_code)]

/// EAL arguments every test uses: never probe PCI devices, no hugepages, a file prefix
/// unique to this process (so parallel test binaries never share DPDK runtime files).
pub(crate) fn eal_args(tag: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![
        format!("weir-test-{tag}"),
        "--no-pci".into(),
        "--no-huge".into(),
        "-m".into(),
        "512".into(),
        format!("--file-prefix=weir-{tag}-{}", std::process::id()),
        "--log-level=lib.eal:warning".into(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}
