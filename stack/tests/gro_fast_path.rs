//! `Gro::handle_frame` (the header words read straight from the frame) against the path it
//! shortcuts, `parse_into` then `Gro::handle_segment`: on any sequence of real frames the
//! two give the same units, byte for byte and field for field, in the same order, and the
//! same counters. The frames mix the fast layout (IPv4, no options or NOP NOP TS,
//! checksums verified by the NIC) with everything it gives back (IPv6, VLAN tags, SACK or
//! MSS options, software checksums, corrupted checksums, frames not for us), and vary
//! every field the merge rules compare (ACK, window, flags, TTL, TOS-free IP ID, TSval and
//! TSecr up and down, sequence gaps, short segments). `streaks_take_the_same_path_...`
//! sends them in streaks of one flow, so that `handle_frame`'s same-run template (the
//! header of a run's previous frame, compared in words) decides most frames; the two
//! `..._is_not_continued_by_its_template` tests check that a flushed or evicted run is
//! forgotten by its template, and `kept_template_decides_alike_after_its_run_is_flushed`
//! that the header the template keeps starts the flow's next run as the parse would.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use stack::buf::{ChecksumStatus, PacketBuf, RxChecksum};
use stack::gro::{Gro, GroConfig, GroStats};
use stack::mem::VecBuf;
use stack::segment::Segment;
use stack::seq::SeqNumber;
use stack::time::{Duration, Instant};
use stack::wire::{
    parse_into, DropReason, Parsed, SackBlock, TcpFlags, TcpFrame, TcpOptions, Timestamp,
};
use testkit::frames::{local, OUR_IP4, OUR_IP6, OUR_MAC, PEER_MAC};

/// One generated frame: which flow, and what to change from its defaults.
#[derive(Clone, Debug)]
struct Step {
    flow: u8,
    len: u16,
    /// Skip this many bytes of sequence space first (a gap) or go back (a retransmission).
    seq_jump: i8,
    flags: u8,
    ack_bump: bool,
    window_bump: bool,
    ttl_bump: bool,
    ts: u8,
    ip_id_step: u8,
    /// 0: NIC verified; 1: unknown (software check); 2: NIC says bad.
    csum: u8,
    /// 0: plain; 1: VLAN tag; 2: SACK option; 3: no timestamps; 4: not for us.
    shape: u8,
    /// Advance the clock before this frame (ns), and end the burst after it.
    gap_ns: u16,
    end_burst: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        (0u8..6, prop_oneof![Just(1448u16), 1u16..1448, Just(0u16)]),
        prop_oneof![8 => Just(0i8), 1 => 1i8..4, 1 => -4i8..0],
        prop_oneof![
            12 => Just(TcpFlags::ACK.0),
            1 => Just(TcpFlags::ACK.0 | TcpFlags::PSH.0),
            1 => Just(TcpFlags::ACK.0 | TcpFlags::FIN.0),
            1 => Just(TcpFlags::ACK.0 | TcpFlags::CWR.0),
            1 => Just(TcpFlags::ACK.0 | TcpFlags::URG.0),
            1 => Just(TcpFlags::ACK.0 | TcpFlags::ECE.0),
        ],
        (
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.03),
        ),
        prop_oneof![6 => Just(0u8), 1 => 1u8..4],
        prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
        prop_oneof![10 => Just(0u8), 1 => 1u8..3],
        prop_oneof![10 => Just(0u8), 1 => 1u8..5],
        (
            prop_oneof![4 => Just(0u16), 1 => 0u16..3000],
            prop::bool::weighted(0.15),
        ),
    )
        .prop_map(
            |(
                (flow, len),
                seq_jump,
                flags,
                (ack_bump, window_bump, ttl_bump),
                ts,
                ip_id_step,
                csum,
                shape,
                (gap_ns, end_burst),
            )| Step {
                flow,
                len,
                seq_jump,
                flags,
                ack_bump,
                window_bump,
                ttl_bump,
                ts,
                ip_id_step,
                csum,
                shape,
                gap_ns,
                end_burst,
            },
        )
}

/// A flow's sender state.
struct Sender {
    v6: bool,
    seq: u32,
    ack: u32,
    window: u16,
    ttl: u8,
    tsval: u32,
    tsecr: u32,
    ip_id: u16,
}

fn frames(steps: &[Step]) -> Vec<(VecBuf, u64, bool)> {
    let mut senders: Vec<Sender> = (0..6)
        .map(|i| Sender {
            v6: i == 5,
            seq: 1_000_000 * (i + 1),
            ack: 77,
            window: 512,
            ttl: 64,
            tsval: 100,
            tsecr: 7,
            ip_id: 0,
        })
        .collect();
    let mut out = Vec::new();
    for st in steps {
        let s = &mut senders[usize::from(st.flow)];
        s.seq = s.seq.wrapping_add_signed(i32::from(st.seq_jump) * 1000);
        s.ack = s.ack.wrapping_add(u32::from(st.ack_bump) * 1448);
        s.window ^= u16::from(st.window_bump);
        s.ttl ^= u8::from(st.ttl_bump);
        match st.ts {
            1 => s.tsval = s.tsval.wrapping_add(1),
            2 => s.tsval = s.tsval.wrapping_sub(1),
            3 => s.tsecr = s.tsecr.wrapping_add(1),
            _ => {}
        }
        s.ip_id = s.ip_id.wrapping_add(u16::from(st.ip_id_step));
        let (src_ip, dst_ip): (IpAddr, IpAddr) = if s.v6 {
            (
                Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 2, u16::from(st.flow)).into(),
                OUR_IP6.into(),
            )
        } else {
            let dst = if st.shape == 4 {
                Ipv4Addr::new(198, 18, 0, 9)
            } else {
                OUR_IP4
            };
            (Ipv4Addr::new(198, 19, 0, st.flow + 1).into(), dst.into())
        };
        let mut opts = TcpOptions::default();
        if st.shape != 3 {
            opts.timestamp = Some(Timestamp {
                tsval: s.tsval,
                tsecr: s.tsecr,
            });
        }
        if st.shape == 2 {
            opts.sack[0] = SackBlock {
                left: SeqNumber(5),
                right: SeqNumber(9),
            };
            opts.sack_count = 1;
        }
        let f = TcpFrame {
            src_mac: PEER_MAC,
            dst_mac: OUR_MAC,
            vlan: (st.shape == 1).then_some(7),
            src_ip,
            dst_ip,
            sport: 40_000 + u16::from(st.flow),
            dport: 5201,
            seq: SeqNumber(s.seq),
            ack: SeqNumber(s.ack),
            flags: TcpFlags(st.flags),
            window: s.window,
            opts,
            ttl: s.ttl,
            ip_id: s.ip_id,
        };
        let payload: Vec<u8> = (0..u32::from(st.len))
            .map(|i| (s.seq.wrapping_add(i) % 251) as u8)
            .collect();
        s.seq = s.seq.wrapping_add(u32::from(st.len));
        let status = match st.csum {
            0 => ChecksumStatus::Good,
            1 => ChecksumStatus::Unknown,
            _ => ChecksumStatus::Bad,
        };
        let buf = VecBuf::from_vec(f.to_vec(&payload)).with_rx_checksum(RxChecksum {
            ip: status,
            l4: status,
        });
        out.push((buf, u64::from(st.gap_ns), st.end_burst));
    }
    out
}

/// Everything a unit carries, payload bytes included.
type Unit = (
    String,
    u32,
    u32,
    u8,
    u16,
    String,
    String,
    u16,
    u16,
    u64,
    Vec<u8>,
    [u8; 12],
);

fn unit(s: &mut Segment<VecBuf>) -> Unit {
    let mut bytes = Vec::new();
    for sl in s.payload.slices() {
        bytes.extend_from_slice(sl.bytes());
    }
    let mut macs = [0u8; 12];
    macs[..6].copy_from_slice(&s.peer_mac);
    macs[6..].copy_from_slice(&s.local_mac);
    (
        format!("{:?} {}", s.flow, s.flow.v6),
        s.seq.get(),
        s.ack.get(),
        s.flags.0,
        s.window,
        format!("{:?}", s.opts),
        format!("{:?}", s.ts_last),
        s.segs,
        s.gso_size,
        s.first_rx.as_nanos(),
        bytes,
        macs,
    )
}

/// Runs `frames` through a GRO stage, with or without `handle_frame`; returns the units,
/// the counters and the parser's drops.
fn run(
    frames: &[(VecBuf, u64, bool)],
    fast: bool,
    flush_ns: u64,
) -> (Vec<Unit>, GroStats, Vec<DropReason>, usize) {
    let mut gro: Gro<VecBuf> = Gro::new(GroConfig {
        flush_ns: Duration::from_nanos(flush_ns),
        max_flows: 4,
        max_segs: 8,
        ..GroConfig::default()
    });
    let mut units = Vec::new();
    let mut drops = Vec::new();
    let mut parsed = Parsed::Drop(DropReason::TruncatedEthernet);
    let mut now = 1_000u64;
    let mut taken = 0;
    let local = local();
    for (buf, gap, end) in frames {
        now += gap;
        let t = Instant::from_nanos(now);
        let mut out = |s: &mut Segment<VecBuf>| units.push(unit(s));
        gro.flush_expired(t, &mut out);
        let buf = VecBuf::from_vec(buf.data().to_vec()).with_rx_checksum(buf.rx_checksum());
        let buf = if fast {
            match gro.handle_frame(t, buf, &local, &mut out) {
                Ok(()) => {
                    taken += 1;
                    None
                }
                Err(b) => Some(b),
            }
        } else {
            Some(buf)
        };
        if let Some(buf) = buf {
            parse_into(buf.data(), buf.rx_checksum(), &local, &mut parsed);
            match &parsed {
                Parsed::Tcp(m) => gro.handle_segment(t, m, buf, &mut out),
                Parsed::Drop(r) => drops.push(*r),
                _ => {}
            }
        }
        if *end {
            gro.end_of_burst(t, &mut out);
        }
    }
    gro.flush_all(&mut |s| units.push(unit(s)));
    (units, gro.stats().clone(), drops, taken)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn frames_take_the_same_path_as_parsed_segments(
        steps in prop::collection::vec(step(), 1..120),
        flush_ns in prop_oneof![Just(0u64), Just(2_000u64), Just(100_000u64)],
    ) {
        let f = frames(&steps);
        let (ua, sa, da, taken) = run(&f, true, flush_ns);
        let (ub, sb, db, _) = run(&f, false, flush_ns);
        // The common layout took the fast path.
        let common = steps
            .iter()
            .filter(|s| s.flow < 5 && s.csum == 0 && (s.shape == 0 || s.shape == 3))
            .count();
        prop_assert_eq!(taken, common);
        prop_assert_eq!(&ua, &ub);
        prop_assert_eq!(format!("{sa:?}"), format!("{sb:?}"));
        prop_assert_eq!(da, db);
    }
}

/// Steps in streaks of one flow (a TSO train), so that runs of three or more segments of
/// one flow take `handle_frame`'s same-run template, with any of the perturbations of
/// [`step`] repeated within a streak.
fn streaky() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec((step(), 1usize..12), 1..24).prop_map(|v| {
        v.into_iter()
            .flat_map(|(s, n)| {
                (0..n).map(move |i| Step {
                    end_burst: s.end_burst && i + 1 == n,
                    gap_ns: if i == 0 { s.gap_ns } else { 0 },
                    ..s.clone()
                })
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn streaks_take_the_same_path_as_parsed_segments(
        steps in streaky(),
        flush_ns in prop_oneof![Just(0u64), Just(2_000u64), Just(100_000u64)],
    ) {
        let f = frames(&steps);
        let (ua, sa, da, _) = run(&f, true, flush_ns);
        let (ub, sb, db, _) = run(&f, false, flush_ns);
        prop_assert_eq!(&ua, &ub);
        prop_assert_eq!(format!("{sa:?}"), format!("{sb:?}"));
        prop_assert_eq!(da, db);
    }
}

/// A full-sized, NIC-verified ACK of `flow`, contiguous with its last.
fn plain(flow: u8, end_burst: bool) -> Step {
    Step {
        flow,
        len: 1448,
        seq_jump: 0,
        flags: TcpFlags::ACK.0,
        ack_bump: false,
        window_bump: false,
        ttl_bump: false,
        ts: 0,
        ip_id_step: 1,
        csum: 0,
        shape: 0,
        gap_ns: 0,
        end_burst,
    }
}

/// Segments per unit, in output order.
fn segs_of(units: &[Unit]) -> Vec<u16> {
    units.iter().map(|u| u.7).collect()
}

#[test]
fn flushed_run_is_not_continued_by_its_template() {
    // Flow 0's run of three takes the template from its second segment; its time is up
    // (flush_ns 2,000) before the flow's next, contiguous segment, which must start a new
    // run, not join the flushed run through the template.
    let mut later = plain(0, false);
    later.gap_ns = 3_000;
    let steps = [
        plain(0, false),
        plain(0, false),
        plain(0, false),
        later,
        plain(0, true),
    ];
    let f = frames(&steps);
    let (ua, sa, _, taken) = run(&f, true, 2_000);
    let (ub, sb, _, _) = run(&f, false, 2_000);
    assert_eq!(taken, 5);
    assert_eq!(segs_of(&ua), vec![3, 2]);
    assert_eq!(ua, ub);
    assert_eq!(format!("{sa:?}"), format!("{sb:?}"));
}

#[test]
fn evicted_run_is_not_continued_by_its_template() {
    // Four runs fill the table (max_flows 4); flow 0's, the oldest, holds the template and
    // is evicted for flow 4's, which takes its slot. Flow 0's next segment must start a
    // new run (evicting flow 1's), not join flow 4's run or the evicted one. (Flow 4's
    // header differs from the template's, so this checks the outcome; the flush test
    // above is the one that fails if a flush does not forget the template.)
    let steps = [
        plain(0, false),
        plain(0, false),
        plain(1, false),
        plain(2, false),
        plain(3, false),
        plain(4, false),
        plain(0, false),
        plain(0, true),
    ];
    let f = frames(&steps);
    let (ua, sa, _, _) = run(&f, true, 100_000);
    let (ub, sb, _, _) = run(&f, false, 100_000);
    assert_eq!(ua, ub);
    assert_eq!(format!("{sa:?}"), format!("{sb:?}"));
    // Flow 0's evicted run of two, flow 1's evicted run of one, then the rest at the end.
    assert_eq!(segs_of(&ua)[..2], [2, 1]);
    let flow0: Vec<u16> = ua.iter().filter(|u| u.0 == ua[0].0).map(|u| u.7).collect();
    assert_eq!(flow0, vec![2, 2]);
}

#[test]
fn kept_template_decides_alike_after_its_run_is_flushed() {
    // Each run of flow 0 is flushed (its time is up: flush_ns 2,000) before the flow's
    // next frame, which `handle_frame` then takes from the run's kept template: alone,
    // after a sequence jump, with another flow's frame between, and a short frame (which
    // does not match it). The same units and counters as the parsed path.
    let later = |flow: u8| {
        let mut s = plain(flow, false);
        s.gap_ns = 3_000;
        s
    };
    let mut jump = later(0);
    jump.seq_jump = 2;
    let mut short = later(0);
    short.len = 100;
    let steps = [
        plain(0, false),
        plain(0, false),
        plain(0, false),
        later(0),
        plain(0, false),
        later(0),
        jump,
        plain(0, false),
        later(0),
        plain(1, false),
        plain(0, false),
        plain(0, true),
        short,
    ];
    let f = frames(&steps);
    let (ua, sa, _, taken) = run(&f, true, 2_000);
    let (ub, sb, _, _) = run(&f, false, 2_000);
    assert_eq!(taken, steps.len());
    assert_eq!(ua, ub);
    assert_eq!(format!("{sa:?}"), format!("{sb:?}"));
    assert_eq!(segs_of(&ua), vec![3, 2, 1, 2, 3, 1, 1]);
}

/// A frame of the fast layout (IPv4, NOP NOP TS, checksums verified by the NIC) from flow
/// `flow` at sequence offset `off`, `len` bytes, with `flags`.
fn fast_frame(flow: u16, off: u32, len: u16, flags: TcpFlags) -> VecBuf {
    let seq = 1_000_000u32.wrapping_add(off);
    let f = TcpFrame {
        src_mac: PEER_MAC,
        dst_mac: OUR_MAC,
        vlan: None,
        src_ip: Ipv4Addr::new(198, 19, (flow >> 8) as u8, flow as u8).into(),
        dst_ip: OUR_IP4.into(),
        sport: 40_000 + flow,
        dport: 5201,
        seq: SeqNumber(seq),
        ack: SeqNumber(77),
        flags,
        window: 512,
        opts: TcpOptions {
            timestamp: Some(Timestamp {
                tsval: 100,
                tsecr: 7,
            }),
            ..TcpOptions::default()
        },
        ttl: 64,
        ip_id: 0,
    };
    let payload: Vec<u8> = (0..u32::from(len))
        .map(|i| (seq.wrapping_add(i) % 251) as u8)
        .collect();
    VecBuf::from_vec(f.to_vec(&payload)).with_rx_checksum(RxChecksum {
        ip: ChecksumStatus::Good,
        l4: ChecksumStatus::Good,
    })
}

/// The frame path's form of the PSH bypass (`Gro::handle`, before the flow hash and
/// signature): a PSH frame taken by `handle_frame` while nothing is held leaves exactly as
/// it does through the table while another flow's run is held, and as the parsed path
/// emits it: the same unit, fields, payload and counters.
#[test]
fn psh_frame_with_nothing_held_leaves_as_through_the_table() {
    let psh = || fast_frame(1, 0, 64, TcpFlags::ACK | TcpFlags::PSH);
    let local = local();
    let now = Instant::from_nanos(5_000);
    let cfg = GroConfig {
        flush_ns: Duration::from_nanos(20_000),
        ..GroConfig::default()
    };
    let mut empty: Gro<VecBuf> = Gro::new(cfg);
    let mut busy: Gro<VecBuf> = Gro::new(cfg);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    assert!(empty
        .handle_frame(now, psh(), &local, &mut |s| a.push(unit(s)))
        .is_ok());
    let other = fast_frame(9, 0, 1448, TcpFlags::ACK);
    assert!(busy
        .handle_frame(now, other, &local, &mut |s| b.push(unit(s)))
        .is_ok());
    assert!(busy
        .handle_frame(now, psh(), &local, &mut |s| b.push(unit(s)))
        .is_ok());
    assert_eq!(busy.held_runs(), 1, "the other flow's run stays held");
    assert_eq!(a.len(), 1);
    assert_eq!(a, b);
    // The parsed path gives the same unit.
    let mut parsed_gro: Gro<VecBuf> = Gro::new(cfg);
    let mut c = Vec::new();
    let buf = psh();
    let mut parsed = Parsed::Drop(DropReason::TruncatedEthernet);
    parse_into(buf.data(), buf.rx_checksum(), &local, &mut parsed);
    let Parsed::Tcp(m) = &parsed else {
        panic!("the PSH frame does not parse: {parsed:?}");
    };
    parsed_gro.handle_segment(now, m, buf, &mut |s| c.push(unit(s)));
    assert_eq!(a, c);
    let (s, t) = (empty.stats(), busy.stats());
    assert_eq!(s.flushed(stack::gro::FlushReason::Flags), 1);
    assert_eq!(t.flushed(stack::gro::FlushReason::Flags), 1);
    assert_eq!((s.segments_in, s.segments_out, s.units_out), (1, 1, 1));
    assert_eq!((t.segments_in - 1, t.segments_out, t.units_out), (1, 1, 1));
    assert_eq!(format!("{s:?}"), format!("{:?}", parsed_gro.stats()));
}

/// The bypass of the table (many flows, every run one segment long) decides alike on
/// frames and on parsed segments: 100 flows in turn, bursts of 32, `flush_ns = 0`, then
/// one flow back to back; the same units and counters, a bypass begun and ended.
#[test]
fn bypass_decides_alike_on_frames_and_parsed_segments() {
    let mut frames = Vec::new();
    let mut k = 0u32;
    for round in 0..40u32 {
        for f in 0..100u16 {
            k += 1;
            frames.push((
                fast_frame(f, round * 1448, 1448, TcpFlags::ACK),
                10,
                k % 32 == 0,
            ));
        }
    }
    for i in 0..8u32 {
        frames.push((
            fast_frame(3, (40 + i) * 1448, 1448, TcpFlags::ACK),
            10,
            i == 7,
        ));
    }
    let run_with = |fast: bool| {
        let mut gro: Gro<VecBuf> = Gro::new(GroConfig::default());
        let mut units = Vec::new();
        let mut parsed = Parsed::Drop(DropReason::TruncatedEthernet);
        let local = local();
        let mut now = 1_000u64;
        for (buf, gap, end) in &frames {
            now += gap;
            let t = Instant::from_nanos(now);
            let mut out = |s: &mut Segment<VecBuf>| units.push(unit(s));
            let buf = VecBuf::from_vec(buf.data().to_vec()).with_rx_checksum(buf.rx_checksum());
            let buf = if fast {
                gro.handle_frame(t, buf, &local, &mut out).err()
            } else {
                Some(buf)
            };
            if let Some(buf) = buf {
                parse_into(buf.data(), buf.rx_checksum(), &local, &mut parsed);
                let Parsed::Tcp(m) = &parsed else {
                    panic!("a generated frame does not parse: {parsed:?}");
                };
                gro.handle_segment(t, m, buf, &mut out);
            }
            if *end {
                gro.end_of_burst(t, &mut out);
            }
        }
        gro.flush_all(&mut |s| units.push(unit(s)));
        (units, gro.stats().clone())
    };
    let (ua, sa) = run_with(true);
    let (ub, sb) = run_with(false);
    assert!(sa.bypasses >= 1, "{sa:?}");
    assert!(sa.flushed(stack::gro::FlushReason::Bypass) > 1000, "{sa:?}");
    assert_eq!(ua, ub);
    assert_eq!(format!("{sa:?}"), format!("{sb:?}"));
    // The train at the end merged: the bypass ended on its second segment.
    assert_eq!(ua.last().map(|u| u.7), Some(7));
    assert_eq!(sa.segments_in, sa.segments_out);
}
