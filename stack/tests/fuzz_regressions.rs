//! Replays the fuzz inputs kept in `fuzz/regressions/<target>/` (inputs that once found a
//! bug) and `fuzz/seeds/<target>/` (the seed corpus) through the same invariant-checking
//! harness the fuzz targets run (`support::harness`), plus a seeded random sweep, so a
//! normal `cargo test` covers them without a fuzzer. See `scripts/fuzz.sh`.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use support::harness;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// Every file under `fuzz/{regressions,seeds}/<target>/`.
fn inputs(target: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for kind in ["regressions", "seeds"] {
        let d = fuzz_dir().join(kind).join(target);
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_file()
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let files = inputs(target);
    for p in &files {
        let data = std::fs::read(p).unwrap();
        let r = std::panic::catch_unwind(|| run(&data));
        assert!(r.is_ok(), "fuzz input {} fails", p.display());
    }
    files.len()
}

#[test]
fn parse_inputs_replay() {
    let n = replay("parse", harness::parse_one);
    eprintln!("parse: {n} inputs");
}

#[test]
fn pipeline_inputs_replay() {
    let n = replay("pipeline", |d| {
        harness::pipeline(d);
    });
    eprintln!("pipeline: {n} inputs");
}

/// A seeded random sweep over both harnesses (the fuzzers' fallback when no fuzzer runs).
#[test]
fn seeded_random_inputs() {
    let mut rng = SmallRng::seed_from_u64(0x7765_6972_6675_7a7a);
    for i in 0..300 {
        let len = rng.gen_range(0..4096);
        let mut data = vec![0u8; len];
        rng.fill(&mut data[..]);
        harness::parse_one(&data);
        // Alternate chaos and honest inputs (the enum tag is chosen by the first bytes).
        if let Some(b) = data.first_mut() {
            *b = (i % 2) as u8;
        }
        harness::pipeline(&data);
    }
}

/// Corpus report: `WEIR_FUZZ_REPORT=dir cargo test --test fuzz_regressions report -- --nocapture`.
#[test]
fn report() {
    let Ok(dir) = std::env::var("WEIR_FUZZ_REPORT") else {
        return;
    };
    let mut tot = [0u64; 6];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let s = harness::pipeline(&std::fs::read(e.path()).unwrap());
        tot[0] += 1;
        tot[1] += u64::from(s.honest);
        tot[2] += u64::from(s.conns_opened > 0);
        tot[3] += u64::from(s.bytes_in_order > 0);
        tot[4] += u64::from(s.ooo_segments > 0);
        tot[5] += s.frames;
    }
    eprintln!(
        "inputs {} honest {} with-conn {} with-data {} with-ooo {} frames {}",
        tot[0], tot[1], tot[2], tot[3], tot[4], tot[5]
    );
}
