//! Finds DPDK with pkg-config, generates bindings with bindgen (using exactly DPDK's own
//! cflags), and compiles the wrappers bindgen writes for DPDK's `static inline` functions.
//!
//! Linking is dynamic: `pkg-config --libs libdpdk` names the core `librte_*` libraries; the
//! poll-mode drivers (net_ring, net_tap, mempool_ring, ...) are plugins that EAL loads from
//! its plugin directory (`RTE_EAL_PMD_PATH`) during `rte_eal_init`. The one PMD symbol
//! weir calls directly, `rte_eth_from_rings`, lives in `librte_net_ring.so`, so that
//! library is linked explicitly.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const MIN_VERSION: &str = "22.11";

const INSTALL_HINT: &str = "DPDK development files (libdpdk >= 22.11) were not found. \
     Run `scripts/setup.sh` as root, or install them yourself: \
     `apt-get install libdpdk-dev pkg-config clang libclang-dev`.";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/wrapper.h");
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-changed=src/cksum_o3.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let lib = match pkg_config::Config::new()
        .atleast_version(MIN_VERSION)
        .probe("libdpdk")
    {
        Ok(lib) => lib,
        Err(e) => panic!("\n\n{INSTALL_HINT}\n\npkg-config said: {e}\n\n"),
    };

    // The exact cflags DPDK was built for (`-include rte_config.h -march=corei7 -I...`):
    // the pkg-config crate keeps only include paths and defines, so ask the tool itself.
    let cflags = pkg_config_cflags();

    // rte_eth_from_rings is not an inline function and not in the core libraries.
    println!("cargo:rustc-link-lib=dylib=rte_net_ring");
    for dir in &lib.link_paths {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }

    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let header = manifest.join("src/wrapper.h");
    let wrap_path = out.join("static_fns");

    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_args(&cflags)
        .allowlist_function("rte_.*")
        .allowlist_function("weir_.*")
        .allowlist_type("rte_.*")
        .allowlist_var("RTE_.*")
        .allowlist_var("RING_F_.*")
        .allowlist_var("SOCKET_ID_ANY")
        .allowlist_var("LCORE_ID_ANY")
        // Packed structs with bit-fields that bindgen cannot lay out (issue rust-bindgen#2179):
        // weir never looks inside them.
        .opaque_type("rte_l2tpv2_.*")
        .opaque_type("rte_gtp_.*")
        .wrap_static_fns(true)
        .wrap_static_fns_path(&wrap_path)
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(false)
        .generate_comments(false)
        .prepend_enum_name(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .unwrap_or_else(|e| {
            panic!("bindgen failed on DPDK's headers: {e}\n(is libclang-dev installed? {INSTALL_HINT})")
        });
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("writing bindings.rs to OUT_DIR");

    // The generated wrappers (`<name>__extern`) and weir's shim, compiled with DPDK's flags.
    let mut build = cc::Build::new();
    build
        .file(wrap_path.with_extension("c"))
        .file(manifest.join("src/shim.c"))
        .include(manifest.join("src"))
        .include(&manifest)
        .warnings(false)
        .opt_level(2);
    for f in &cflags {
        build.flag(f);
    }
    build.compile("weir_dpdk_static_fns");

    // rte_raw_cksum once more at -O3, the level DPDK's own build uses, for weir-bench csum
    // (src/cksum_o3.c says why).
    let mut o3 = cc::Build::new();
    o3.file(manifest.join("src/cksum_o3.c"))
        .warnings(false)
        .opt_level(3);
    for f in &cflags {
        o3.flag(f);
    }
    o3.compile("weir_dpdk_cksum_o3");
}

fn pkg_config_cflags() -> Vec<String> {
    let pc = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_owned());
    let output = Command::new(&pc)
        .args(["--cflags", "libdpdk"])
        .output()
        .unwrap_or_else(|e| panic!("\n\nrunning `{pc} --cflags libdpdk`: {e}\n{INSTALL_HINT}\n"));
    if !output.status.success() {
        panic!(
            "\n\n`{pc} --cflags libdpdk` failed: {}\n{INSTALL_HINT}\n",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}
