//! The lab's virtual-clock model: weir-gen's flows on weir's TCP ([`Gen`]) against weir's [`Pipeline`] in
//! memory, joined by a modelled link (a FIFO serialised at a fixed bit rate plus a
//! one-way propagation delay in each direction).
//!
//! Deterministic and free of DPDK: the same configuration gives the same figures on any
//! machine. The receiver is modelled as infinitely fast (it sees every frame at its
//! arrival instant and every GRO deadline at its instant), so what the model measures is
//! the arrival pattern's effect (aggregation, ACK counts, hold latency), not CPU cost.
//! Cycles per segment come from the ring run ([`super::ring`]).

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use anyhow::{anyhow, Result};
use stack::ack::AckPolicy;
use stack::buf::PacketBuf;
use stack::driver::Burst;
use stack::gro::{GroConfig, HoldHistogram};
use stack::mem::{VecBuf, VecPool};
use stack::pipeline::{Pipeline, PipelineConfig};
use stack::stats::Stats;
use stack::tcp::{Event, TcpConfig};
use stack::time::{Duration, Instant};
use stack::wire::LocalAddrs;

use crate::gen::pool::VecSource;
use crate::gen::{Gen, GenConfig, GenStats};

/// The receiver's MAC in the model.
pub const RX_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
/// The receiver's address in the model (198.18.0.0/15).
pub const RX_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The receiver's port.
pub const PORT: u16 = 5001;
/// Bytes a frame occupies on Ethernet beyond its own: preamble + SFD (8), FCS (4) and
/// the inter-frame gap (12), IEEE 802.3.
pub const WIRE_OVERHEAD: u64 = 24;

/// One modelled run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The senders (`dst_mac`, addresses and port are filled in by [`run`]).
    pub gen: GenConfig,
    /// The receiver's ACK policy.
    pub policy: AckPolicy,
    /// GRO (`None`: off).
    pub gro: Option<GroConfig>,
    /// The receive buffer per connection (bytes).
    pub rcv_buf: u32,
    /// Link rate, bits per second, in both directions.
    pub link_bps: u64,
    /// One-way propagation delay.
    pub prop: Duration,
    /// Time before measuring (handshakes and slow start).
    pub warmup: Duration,
    /// Time measured.
    pub measure: Duration,
}

/// What one modelled run measured (over the measurement window unless said otherwise).
#[derive(Clone, Debug, Default)]
pub struct SimResult {
    /// Data segments the receiver got per second.
    pub seg_per_s: f64,
    /// Payload delivered to the application, bit/s.
    pub goodput_bps: f64,
    /// GRO segments per output unit.
    pub seg_per_unit: f64,
    /// ACK frames the receiver sent per second.
    pub acks_per_s: f64,
    /// ACK frames sent in the window.
    pub acks: u64,
    /// Data segments received in the window.
    pub segments: u64,
    /// Payload bytes delivered in the window.
    pub bytes: u64,
    /// ACKs the sender received per MB (10^6 bytes) delivered: its ACK-processing work.
    pub acks_per_mb: f64,
    /// Per-segment GRO hold time, p50 (ns), when recorded.
    pub hold_p50_ns: u64,
    /// Per-segment GRO hold time, p99 (ns).
    pub hold_p99_ns: u64,
    /// Per-segment GRO hold time, mean (ns).
    pub hold_mean_ns: f64,
    /// Mean time for a flow to reach its full window after starting to send (after each
    /// idle restart too), ns; 0 when no flow got there.
    pub ramp_mean_ns: f64,
    /// The sender's counters at the end (whole run).
    pub gen: GenStats,
}

/// Serialisation time of a frame of `len` bytes at `bps`.
pub fn ser_time(len: usize, bps: u64) -> Duration {
    Duration::from_nanos(((len as u64 + WIRE_OVERHEAD) * 8 * 1_000_000_000).div_ceil(bps))
}

/// One direction of the link.
struct Link {
    bps: u64,
    prop: Duration,
    free_at: Instant,
    queue: VecDeque<Vec<u8>>,
    flight: VecDeque<(Instant, Vec<u8>)>,
}

impl Link {
    fn new(bps: u64, prop: Duration) -> Self {
        Link {
            bps,
            prop,
            free_at: Instant::from_nanos(0),
            queue: VecDeque::new(),
            flight: VecDeque::new(),
        }
    }
    /// Starts transmitting what the link is free to send at `now`.
    fn pump(&mut self, now: Instant) {
        while self.free_at <= now {
            let Some(f) = self.queue.pop_front() else {
                break;
            };
            let start = self.free_at.max(now);
            self.free_at = start + ser_time(f.len(), self.bps);
            self.flight.push_back((self.free_at + self.prop, f));
        }
    }
    fn next_event(&self) -> Option<Instant> {
        let a = self.flight.front().map(|(t, _)| *t);
        let b = (!self.queue.is_empty()).then_some(self.free_at);
        stack::time::earliest(a, b)
    }
}

/// Runs one configuration; `tick` is called with the fraction of virtual time done.
pub fn run(cfg: &SimConfig, mut tick: impl FnMut(f64)) -> Result<SimResult> {
    let mut g = cfg.gen.clone();
    g.dst_mac = Some(RX_MAC);
    g.dst_ip = RX_IP;
    g.dst_port = PORT;
    let end_ns = cfg.warmup.as_nanos() + cfg.measure.as_nanos();
    if g.duration.is_none() && g.bytes_per_flow.is_none() {
        g.duration = Some(Duration::from_nanos(end_ns * 2));
    }
    g.validate().map_err(|e| anyhow!(e))?;
    let mut src = VecSource::new(g.pattern_period as usize);
    let mut sender: Gen<VecBuf> = Gen::new(g).map_err(|e| anyhow!(e))?;
    let mut gen_pool = VecPool::new(1 << 20, 2048);
    let mut rx_pool = VecPool::new(1 << 20, 2048);
    let mut p: Pipeline<VecBuf> = Pipeline::new(PipelineConfig {
        local: LocalAddrs::new(RX_MAC, Some(RX_IP), None),
        gro: cfg.gro,
        tcp: TcpConfig {
            max_conns: (cfg.gen.flows as usize * 2).max(1024),
            max_half_open: (cfg.gen.flows as usize * 2).max(256),
            rcv_buf: cfg.rcv_buf,
            ..TcpConfig::default()
        },
        listen: vec![(PORT, cfg.policy)],
        tx_csum_offload: false,
    })
    .map_err(|e| anyhow!("building the pipeline: {e}"))?;
    let mut fwd = Link::new(cfg.link_bps, cfg.prop);
    let mut rev = Link::new(cfg.link_bps, cfg.prop);
    let t0 = Instant::from_nanos(1_000_000);
    let warm_end = t0 + cfg.warmup;
    let end = warm_end + cfg.measure;
    let mut now = t0;
    // Counters at the start of the window.
    let mut base: Option<(Stats, GenStats, u64)> = None;
    let mut acks_sent: u64 = 0;
    let mut delivered: u64 = 0;
    let mut last_tick = t0;
    while now < end {
        if base.is_none() && now >= warm_end {
            base = Some((p.stats(), sender.stats(), acks_sent));
            delivered = 0;
        }
        // The sender: its events, writes and timers, then frames while its NIC ring has
        // room.
        sender.poll(now, &mut src);
        while fwd.queue.len() < 64 {
            let mut out: Burst<VecBuf> = Burst::new();
            if sender.poll_tx(now, &mut gen_pool, &mut out) == 0 {
                break;
            }
            for b in out.drain(..) {
                fwd.queue.push_back(b.data().to_vec());
            }
        }
        fwd.pump(now);
        // The receiver: whatever has arrived, then timers, the application, ACKs.
        let mut rx: Burst<VecBuf> = Burst::new();
        while !rx.is_full() && fwd.flight.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, f)) = fwd.flight.pop_front() {
                if let Some(b) = rx_pool.adopt(f) {
                    rx.push(b);
                }
            }
        }
        if !rx.is_empty() {
            p.handle_rx_burst(now, &mut rx);
        }
        p.handle_timeout(now);
        while let Some(ev) = p.tcp().poll_event() {
            match ev {
                Event::Readable(id) | Event::PeerClosed(id) => {
                    let n = p
                        .tcp()
                        .recv(id, |s| s.iter().map(|x| usize::from(x.len)).sum())
                        .unwrap_or(0);
                    delivered += n as u64;
                    if matches!(ev, Event::PeerClosed(_)) {
                        let _ = p.tcp().close(now, id);
                    }
                }
                Event::Opened(_) | Event::Closed(_) | Event::Reset(_) | Event::Writable(_) => {}
            }
        }
        loop {
            let mut acks: Burst<VecBuf> = Burst::new();
            if p.poll_tx(now, &mut rx_pool, &mut acks) == 0 {
                break;
            }
            for a in acks.drain(..) {
                acks_sent += 1;
                rev.queue.push_back(a.data().to_vec());
            }
        }
        rev.pump(now);
        let mut back: Burst<VecBuf> = Burst::new();
        while !back.is_full() && rev.flight.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, f)) = rev.flight.pop_front() {
                if let Some(b) = gen_pool.adopt(f) {
                    back.push(b);
                }
            }
        }
        sender.handle_rx_burst(now, &mut back);
        // The next instant anything happens; the sender's timers are scanned every 10 µs.
        let mut next = now + Duration::from_micros(10);
        for t in [
            fwd.next_event(),
            rev.next_event(),
            p.poll_timeout(),
            sender.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        {
            next = next.min(t);
        }
        now = next.max(now + Duration::from_nanos(1));
        if now.saturating_since(last_tick) >= Duration::from_millis(5) {
            last_tick = now;
            tick(now.saturating_since(t0).as_nanos() as f64 / (end_ns.max(1)) as f64);
        }
    }
    let (s0, g0, a0) = base.ok_or_else(|| anyhow!("the run ended before its warm-up"))?;
    let s1 = p.stats();
    if std::env::var_os("WEIR_LAB_DEBUG").is_some() {
        let f: Vec<_> = s1.gro.flushes_by_name().collect();
        eprintln!(
            "flushes {f:?} cwnd {:?} gen {:?}",
            sender.cwnd_summary(),
            sender.stats()
        );
    }
    let g1 = sender.stats();
    let secs = cfg.measure.as_nanos() as f64 / 1e9;
    let segments = s1
        .tcp
        .segments_in_order
        .saturating_sub(s0.tcp.segments_in_order);
    let units = s1.gro.units_out.saturating_sub(s0.gro.units_out);
    let gro_segs = s1.gro.segments_out.saturating_sub(s0.gro.segments_out);
    let acks = acks_sent - a0;
    let hold = match (&s1.gro.hold_ns, &s0.gro.hold_ns) {
        (Some(a), Some(b)) => a.since(b),
        _ => HoldHistogram::default(),
    };
    let acks_rx = g1.acks.saturating_sub(g0.acks);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    Ok(SimResult {
        seg_per_s: segments as f64 / secs,
        goodput_bps: delivered as f64 * 8.0 / secs,
        seg_per_unit: if cfg.gro.is_some() {
            ratio(gro_segs as f64, units as f64)
        } else {
            1.0
        },
        acks_per_s: acks as f64 / secs,
        acks,
        segments,
        bytes: delivered,
        acks_per_mb: ratio(acks_rx as f64, delivered as f64 / 1e6),
        hold_p50_ns: hold.quantile(0.5),
        hold_p99_ns: hold.quantile(0.99),
        hold_mean_ns: hold.mean(),
        ramp_mean_ns: ratio(g1.ramp_ns_sum as f64, g1.ramps as f64),
        gen: g1,
    })
}
