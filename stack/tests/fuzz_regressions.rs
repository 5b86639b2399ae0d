//! Replays the fuzz inputs kept in `fuzz/regressions/<target>/` (inputs that once found a
//! bug) and `fuzz/seeds/<target>/` (the seed corpus) through the same invariant-checking
//! harness the fuzz targets run (`testkit::harness` for `parse` and `pipeline`,
//! `testkit::send_harness` for `send`), plus seeded random sweeps, so a normal `cargo
//! test` covers them without a fuzzer. See `scripts/fuzz.sh`.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use testkit::{harness, send_harness};

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

#[test]
fn send_inputs_replay() {
    let n = replay("send", |d| {
        send_harness::send(d);
    });
    eprintln!("send: {n} inputs");
}

/// Random bytes through the send harness: `n` inputs from `seed`, each 64..4096 bytes.
/// Returns the totals of what they did, so a sweep that stopped exercising the send path
/// (every input rejected early, say) fails instead of passing vacuously.
fn send_sweep(seed: u64, n: usize) -> send_harness::SendSummary {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut tot = send_harness::SendSummary::default();
    for i in 0..n {
        let len = rng.gen_range(64..4096);
        let mut data = vec![0u8; len];
        rng.fill(&mut data[..]);
        let r = std::panic::catch_unwind(|| send_harness::send(&data));
        let s = match r {
            Ok(s) => s,
            Err(e) => {
                let dir = std::env::temp_dir().join("weir-send-sweep");
                std::fs::create_dir_all(&dir).unwrap();
                let f = dir.join(format!("seed{seed:x}-input{i}"));
                std::fs::write(&f, &data).unwrap();
                std::panic::resume_unwind(Box::new(format!(
                    "send harness input {i} of seed {seed:#x} failed (saved to {}): {:?}",
                    f.display(),
                    e.downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| e.downcast_ref::<&str>().copied())
                )));
            }
        };
        tot.conns += s.conns;
        tot.written += s.written;
        tot.delivered += s.delivered;
        tot.data_frames += s.data_frames;
        tot.retransmits += s.retransmits;
        tot.rto_timeouts += s.rto_timeouts;
        tot.window_probes += s.window_probes;
        tot.resets += s.resets;
        tot.peer_resets += s.peer_resets;
        tot.gave_up += s.gave_up;
        tot.completed += s.completed;
        tot.peer_segments += s.peer_segments;
        tot.fast_recoveries += s.fast_recoveries;
        tot.tlp_probes += s.tlp_probes;
        tot.rack_reorder_timeouts += s.rack_reorder_timeouts;
    }
    tot
}

/// Replays one file through the send harness: `WEIR_SEND_INPUT=path cargo test -p stack
/// --test fuzz_regressions send_one -- --nocapture` (prints what the run did).
#[test]
fn send_one() {
    let Ok(p) = std::env::var("WEIR_SEND_INPUT") else {
        return;
    };
    let s = send_harness::send(&std::fs::read(p).unwrap());
    eprintln!("{s:?}");
}

/// A seeded random sweep over the send harness (its fallback when no fuzzer runs).
#[test]
fn send_seeded_random_inputs() {
    let tot = send_sweep(0x7365_6e64, 5000);
    eprintln!("send sweep: {tot:?}");
    assert!(
        tot.written > 0 && tot.data_frames > 0,
        "the sweep sent nothing: {tot:?}"
    );
    assert!(
        tot.peer_segments > 0,
        "the sweep's peers sent nothing: {tot:?}"
    );
    assert!(
        tot.retransmits > 0,
        "the sweep never retransmitted: {tot:?}"
    );
    // The loss-recovery paths are reached: fast recovery, and RACK-TLP's probes (the
    // default for SACK peers; a knob bit picks DupThresh alone instead).
    assert!(
        tot.fast_recoveries > 0 && tot.tlp_probes > 0,
        "the sweep never entered fast recovery or sent a tail loss probe: {tot:?}"
    );
}

/// The long sweep, in release: `cargo test --release -p stack --test fuzz_regressions
/// send_long_sweep -- --ignored --nocapture` (`WEIR_SEND_SWEEP=n` inputs, default 100,000).
#[test]
#[ignore = "long: run by hand in release with --ignored"]
fn send_long_sweep() {
    let n = std::env::var("WEIR_SEND_SWEEP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let seed = std::env::var("WEIR_SEND_SEED")
        .ok()
        .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0x6c6f_6e67);
    let tot = send_sweep(seed, n);
    eprintln!("send long sweep ({n} inputs, seed {seed:#x}): {tot:?}");
}

/// What a send-harness run exercised, as bits (for picking seeds).
fn send_features(s: &send_harness::SendSummary) -> u32 {
    [
        s.retransmits > 0,
        s.retransmits > 50,
        s.rto_timeouts > 0,
        s.rto_timeouts > 20,
        s.window_probes > 0,
        s.gave_up > 0,
        s.peer_resets > 0,
        s.conns >= 2,
        s.conns == 3,
        s.written > 16 * 1024,
        s.written > 64 * 1024,
        s.data_frames > 100,
        s.data_frames > 1000,
        s.completed == s.conns,
        s.peer_segments > 1000,
    ]
    .iter()
    .enumerate()
    .map(|(i, b)| u32::from(*b) << i)
    .sum()
}

/// Writes the `send` seed corpus to `fuzz/seeds/send/`: inputs of a seeded sweep, each
/// kept for something the earlier ones did not exercise (retransmissions, RTO expiries,
/// window probes, weir giving up, a peer's RST, several connections, long streams):
/// `cargo test -p stack --test fuzz_regressions write_send_seeds -- --ignored`.
#[test]
#[ignore = "writes the fuzz seed corpus; run by hand with --ignored"]
fn write_send_seeds() {
    let dir = fuzz_dir().join("seeds/send");
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = SmallRng::seed_from_u64(0x7365_6564);
    let mut seen = 0u32;
    let mut kept = 0;
    for _ in 0..20_000 {
        let len = rng.gen_range(256..4096);
        let mut data = vec![0u8; len];
        rng.fill(&mut data[..]);
        let f = send_features(&send_harness::send(&data));
        if f & !seen != 0 {
            seen |= f;
            std::fs::write(dir.join(format!("sweep-{kept:02}")), &data).unwrap();
            kept += 1;
        }
    }
    eprintln!("send seeds: {kept} kept, features {seen:#b}");
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

/// Writes the `parse` seed corpus (valid frames of every kind, each with software and
/// NIC-verified checksum verdicts) to `fuzz/seeds/parse/`:
/// `cargo test -p stack --test fuzz_regressions write_parse_seeds -- --ignored`.
#[test]
#[ignore = "writes the fuzz seed corpus; run by hand with --ignored"]
fn write_parse_seeds() {
    use stack::wire::ipv6::ext;
    use stack::wire::{TcpFlags, TcpOptions, Timestamp};
    use testkit::frames::{self, Peer};

    let dir = fuzz_dir().join("seeds/parse");
    std::fs::create_dir_all(&dir).unwrap();
    let p4 = Peer::v4(1, 40000);
    let p6 = Peer::v6(1, 40000);
    let mut syn = p4.seg(1, 0, TcpFlags::SYN);
    syn.opts = TcpOptions {
        mss: Some(1460),
        wscale: Some(7),
        sack_permitted: true,
        timestamp: Some(Timestamp { tsval: 1, tsecr: 0 }),
        ..TcpOptions::default()
    };
    let mut sack = p4.seg(1, 2, TcpFlags::ACK);
    sack.opts.sack_count = 3;
    let mut ts = p6.seg(1, 2, TcpFlags::ACK | TcpFlags::PSH);
    ts.opts.timestamp = Some(Timestamp { tsval: 5, tsecr: 6 });
    let frames: Vec<(&str, Vec<u8>)> = vec![
        ("syn4", syn.to_vec(b"")),
        ("syn6", TcpFrame6(syn, p6).to_vec()),
        ("data4", p4.seg(1, 2, TcpFlags::ACK).to_vec(b"some payload")),
        ("data6_ts", ts.to_vec(b"v6 payload")),
        (
            "vlan4",
            Peer {
                vlan: Some(3),
                ..p4
            }
            .seg(1, 2, TcpFlags::ACK)
            .to_vec(b"x"),
        ),
        ("sack4", sack.to_vec(b"")),
        (
            "ext6",
            frames::ip6_with_ext(
                &p6.seg(1, 2, TcpFlags::ACK),
                b"xyz",
                &[(ext::HOP_BY_HOP, 0), (ext::DEST_OPTS, 1)],
            ),
        ),
        (
            "arp",
            frames::arp_request(frames::peer_ip4(1), frames::OUR_IP4),
        ),
        ("echo4", frames::echo4(frames::peer_ip4(1), b"ping")),
        ("echo6", frames::echo6(frames::peer_ip6(1), b"ping")),
        (
            "ns",
            frames::neighbor_solicit(frames::peer_ip6(1), frames::OUR_IP6, 255),
        ),
    ];
    for (name, f) in frames {
        for (v, tag) in [(0u8, "sw"), (4u8, "nic")] {
            let mut d = vec![v];
            d.extend_from_slice(&f);
            std::fs::write(dir.join(format!("{name}-{tag}")), d).unwrap();
        }
    }
}

/// `f` re-addressed as IPv6 from `p` (same TCP header and options).
struct TcpFrame6(stack::wire::TcpFrame, testkit::frames::Peer);

impl TcpFrame6 {
    fn to_vec(&self) -> Vec<u8> {
        let mut f = self.0;
        f.src_ip = self.1.ip;
        f.dst_ip = self.1.our_ip();
        f.to_vec(b"")
    }
}
