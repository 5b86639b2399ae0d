//! What a user sees: every stage's counters in one snapshot.
//!
//! Each stage owns its counters ([`ParseStats`], [`GroStats`], [`TcpStats`], [`AckStats`]);
//! the pipeline adds its own ([`PipelineStats`]) and the driver its loop and transmit
//! figures ([`LoopStats`]). A [`Stats`] is plain data (no heap), so a core can copy one out
//! once a second and send it to the main thread without allocating on the data path.

use crate::ack::AckStats;
use crate::gro::GroStats;
use crate::impair::ImpairStats;
use crate::tcp::TcpStats;
use crate::wire::ParseStats;

/// The pipeline's own counters (receive totals and the control-plane replies).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineStats {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received (whole frames).
    pub rx_bytes: u64,
    /// Frames of chained buffers (multi-segment mbufs) dropped because they cannot be
    /// carried: more than `MAX_FRAME_SEGS` segments, a segment shared with another holder,
    /// or headers not all in the first segment.
    pub nonlinear_drops: u64,
    /// ARP replies sent.
    pub arp_replies: u64,
    /// ICMP and ICMPv6 echo replies sent.
    pub icmp_echo_replies: u64,
    /// Neighbor advertisements sent.
    pub nd_adverts: u64,
    /// ARP/ICMP/ND requests dropped because the reply queue was full.
    pub ctl_queue_full: u64,
    /// Replies not built because the buffer pool was empty (they stay queued).
    pub ctl_alloc_failures: u64,
}

/// The driver's loop and transmit figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoopStats {
    /// Loop iterations.
    pub iterations: u64,
    /// Iterations that received or sent anything.
    pub busy_iterations: u64,
    /// Time spent in busy iterations, in nanoseconds (from the TSC).
    pub busy_ns: u64,
    /// TSC cycles spent in busy iterations (each from its start to the next one's).
    pub busy_cycles: u64,
    /// TSC cycles of busy iterations spent in the stack (after the driver's receive,
    /// before its transmit): weir's own processing, without the PMD's work (on net_tap the
    /// kernel's read()/write() of every frame).
    pub stack_cycles: u64,
    /// `stack_cycles` in nanoseconds.
    pub stack_ns: u64,
    /// Frames handed to the NIC.
    pub tx_packets: u64,
    /// Frames the NIC refused (queue full) with the transmit backlog full too
    /// (`driver::TxBacklog`), freed and counted here.
    pub tx_dropped: u64,
    /// Gauge: the most frames the transmit backlog held at once (refused by the NIC,
    /// sent at a later iteration).
    pub tx_backlog_peak: u64,
    /// Gauge: buffers of this core's pool in use.
    pub mbufs_in_use: u64,
}

/// One core's counters (or, after [`Stats::merge`], the total over cores).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Receive totals and control-plane replies.
    pub pipeline: PipelineStats,
    /// Parse results and drops by reason.
    pub parse: ParseStats,
    /// GRO input, output and flushes by reason.
    pub gro: GroStats,
    /// TCP receive counters and drops by reason.
    pub tcp: TcpStats,
    /// Segments sent by reason.
    pub ack: AckStats,
    /// The driver's loop and transmit figures.
    pub lp: LoopStats,
    /// Gauge: open connections.
    pub conns_open: u64,
    /// Gauge: GRO runs held.
    pub gro_held_runs: u64,
    /// Gauge: out-of-order bytes held.
    pub ooo_bytes_held: u64,
    /// What the receive-side impairment stage did (zero when it is off).
    pub impair: ImpairStats,
}

impl Stats {
    /// Adds another core's counters and gauges to these (the total over cores).
    pub fn merge(&mut self, o: &Stats) {
        let p = &mut self.pipeline;
        p.rx_packets += o.pipeline.rx_packets;
        p.rx_bytes += o.pipeline.rx_bytes;
        p.nonlinear_drops += o.pipeline.nonlinear_drops;
        p.arp_replies += o.pipeline.arp_replies;
        p.icmp_echo_replies += o.pipeline.icmp_echo_replies;
        p.nd_adverts += o.pipeline.nd_adverts;
        p.ctl_queue_full += o.pipeline.ctl_queue_full;
        p.ctl_alloc_failures += o.pipeline.ctl_alloc_failures;
        self.parse.merge(&o.parse);
        let g = &mut self.gro;
        g.segments_in += o.gro.segments_in;
        g.segments_out += o.gro.segments_out;
        g.units_out += o.gro.units_out;
        g.held_segments += o.gro.held_segments;
        for (a, b) in g.flushes.iter_mut().zip(o.gro.flushes.iter()) {
            *a += *b;
        }
        self.tcp.merge(&o.tcp);
        self.ack.merge(&o.ack);
        let l = &mut self.lp;
        l.iterations += o.lp.iterations;
        l.busy_iterations += o.lp.busy_iterations;
        l.busy_ns += o.lp.busy_ns;
        l.busy_cycles += o.lp.busy_cycles;
        l.stack_cycles += o.lp.stack_cycles;
        l.stack_ns += o.lp.stack_ns;
        l.tx_packets += o.lp.tx_packets;
        l.tx_dropped += o.lp.tx_dropped;
        l.tx_backlog_peak = l.tx_backlog_peak.max(o.lp.tx_backlog_peak);
        l.mbufs_in_use += o.lp.mbufs_in_use;
        self.conns_open += o.conns_open;
        self.gro_held_runs += o.gro_held_runs;
        self.ooo_bytes_held += o.ooo_bytes_held;
        let i = &mut self.impair;
        i.offered += o.impair.offered;
        i.dropped += o.impair.dropped;
        i.duplicated += o.impair.duplicated;
        i.reordered += o.impair.reordered;
        i.delivered += o.impair.delivered;
        i.corrupted += o.impair.corrupted;
        i.overflow += o.impair.overflow;
    }
    /// GRO segments per output unit (0 before any output).
    pub fn segments_per_unit(&self) -> f64 {
        self.gro.aggregation_ratio()
    }
    /// In-order data segments per data ACK (0 before any ACK).
    pub fn segments_per_ack(&self) -> f64 {
        let acks = self.ack.data_acks();
        if acks == 0 {
            0.0
        } else {
            self.tcp.segments_in_order as f64 / acks as f64
        }
    }
    /// Every drop on the receive path: parse, TCP, nonlinear frames and refused TX.
    pub fn total_drops(&self) -> u64 {
        self.parse.total_drops()
            + self.tcp.drops_iter().map(|(_, n)| n).sum::<u64>()
            + self.pipeline.nonlinear_drops
            + self.pipeline.ctl_queue_full
            + self.lp.tx_dropped
    }
    /// `(name, count)` of every drop reason over all stages, zeros included. Parse reasons
    /// are prefixed `parse.`, TCP reasons `tcp.`.
    pub fn drops_by_reason(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        let parse = self
            .parse
            .drops_by_reason()
            .map(|(r, n)| (format!("parse.{}", r.name()), n));
        let tcp = self.tcp.drops_iter().map(|(r, n)| (format!("tcp.{r}"), n));
        let rest = [
            (
                "pipeline.nonlinear".to_string(),
                self.pipeline.nonlinear_drops,
            ),
            (
                "pipeline.ctl_queue_full".to_string(),
                self.pipeline.ctl_queue_full,
            ),
            ("tx.queue_full".to_string(), self.lp.tx_dropped),
        ];
        parse.chain(tcp).chain(rest)
    }
}
