//! The engines on weir's TCP: one [`Glue`] per core drives every connection's [`App`] from
//! the stack's events, with the connection's send buffer as the engine's [`Sink`].
//!
//! Read first: the [`App`] call order (serve/mod.rs), then the stack's
//! (stack/src/tcp/mod.rs, "Call order"); docs/decisions/serve-glue.md says why the glue
//! copies and how output maps onto the send buffer.
//!
//! Per connection, [`Glue::pump`] does the engine's steps 2-6 in one go:
//! 1. output owed from before ([`App::poll_output`]) goes first;
//! 2. then the receive queue, in copies of at most [`STAGE`] bytes: the bytes are copied out
//!    without being consumed, offered to [`App::on_data`], and only as many as it consumed
//!    leave the queue (`Tcp::recv` returning that count). What the engine leaves stays in
//!    the queue, so the window closes on a peer whose answers cannot be sent;
//! 3. the peer's FIN reaches the engine once every byte before it was consumed;
//! 4. when the engine wants to close and owes nothing, `Tcp::close` (our FIN after the
//!    queued data).
//!
//! The sink ([`TcpSink`]) is the send buffer itself: `room` is `Tcp::writable_bytes` and
//! `write` is `Tcp::send`. A write the buffer (or the pool) cuts short arms
//! `Event::Writable`, which pumps the connection again; engines always offer their bytes to
//! `write`, never skip it on a zero `room`, so a short write (and so the wake-up) happens
//! whenever output waits.
//!
//! A pump runs on `Readable`, `Writable` and `PeerClosed`, for a connection another one woke
//! ([`App::take_woken`]), and for one whose [`App::next_deadline`] has passed.

use std::collections::BTreeMap;

use serde_json::Value;
use stack::buf::{BufPool, PacketBuf};
use stack::flow::FlowKey;
use stack::tcp::{ConnId, Event, State, Tcp};
use stack::time::Instant;

use super::write_dir::FileRecord;
use super::{App, AppError, ConnOptions, Sink};
use crate::report::DigestRecord;

/// The most bytes copied out of a receive queue per call of [`App::on_data`].
pub const STAGE: usize = 64 * 1024;

/// Most engine errors logged one by one (the rest are counted only).
const LOGGED_ERRORS: u64 = 16;

/// Most per-connection digests kept for the summary (as weir-sink keeps).
const MAX_DIGESTS: usize = 100_000;

/// Most per-session reports kept for the summary (iperf3's tests).
const MAX_REPORTS: usize = 1000;

/// A connection's send buffer as an engine's [`Sink`].
pub struct TcpSink<'a, B: PacketBuf, P: BufPool<Buf = B>> {
    tcp: &'a mut Tcp<B>,
    pool: &'a mut P,
    id: ConnId,
    now: Instant,
    /// Bytes the send buffer took.
    pub taken: u64,
    /// Writes it cut short (the buffer or the pool full: `Event::Writable` follows).
    pub short: u64,
}

impl<'a, B: PacketBuf, P: BufPool<Buf = B>> TcpSink<'a, B, P> {
    /// The sink of connection `id`, writing at `now` into buffers from `pool`.
    pub fn new(tcp: &'a mut Tcp<B>, pool: &'a mut P, id: ConnId, now: Instant) -> Self {
        Self {
            tcp,
            pool,
            id,
            now,
            taken: 0,
            short: 0,
        }
    }
}

impl<B: PacketBuf, P: BufPool<Buf = B>> Sink for TcpSink<'_, B, P> {
    fn room(&self) -> usize {
        self.tcp.writable_bytes(self.id)
    }

    fn write(&mut self, data: &[u8]) -> usize {
        if data.is_empty() {
            return 0;
        }
        // An error means the connection is closing or gone: its event follows, and the
        // engine keeps what it could not write until then.
        let n = self
            .tcp
            .send(self.now, self.id, data, self.pool)
            .unwrap_or(0);
        self.taken += n as u64;
        if n < data.len() {
            self.short += 1;
        }
        n
    }
}

/// How a connection ended, for its engine's counters.
#[derive(Debug, Clone)]
pub struct ConnEnd {
    /// The flow as `src:port -> dst:port` (the peer first).
    pub flow: String,
    /// weir's port.
    pub local_port: u16,
    /// `closed`, `reset`, or `open` when weir stopped first.
    pub end: &'static str,
}

/// Counters the engines add as their connections end: named totals, and the sink app's
/// digests.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Named totals, by name (the JSON's `app` object).
    pub counters: BTreeMap<&'static str, u64>,
    /// Per-connection digests (`--app sink --digest`), at most [`MAX_DIGESTS`].
    pub digests: Vec<DigestRecord>,
    /// Per-session reports (iperf3's tests), at most [`MAX_REPORTS`].
    pub reports: Vec<Value>,
    /// Per-connection files (`--app sink --write-dir`), known once the writer has stopped.
    pub files: Vec<FileRecord>,
}

impl Tally {
    /// Adds `n` to the counter `name`.
    pub fn add(&mut self, name: &'static str, n: u64) {
        *self.counters.entry(name).or_default() += n;
    }

    /// Keeps a digest (the oldest ones when there are too many).
    pub fn digest(&mut self, d: DigestRecord) {
        if self.digests.len() < MAX_DIGESTS {
            self.digests.push(d);
        }
    }

    /// Keeps a session's report (the oldest ones when there are too many).
    pub fn report(&mut self, r: Value) {
        if self.reports.len() < MAX_REPORTS {
            self.reports.push(r);
        }
    }

    /// Adds another core's counters, digests, reports and files (within the same bounds).
    pub fn merge(&mut self, o: Tally) {
        for (k, v) in o.counters {
            self.add(k, v);
        }
        self.files.extend(o.files);
        for d in o.digests {
            self.digest(d);
        }
        for r in o.reports {
            self.report(r);
        }
    }
}

/// An engine weir-serve runs: an [`App`] with a name and counters.
pub trait ServeApp: App {
    /// Adds this connection's counters to `t` as it ends.
    fn tally(&mut self, server: &mut Self::Server, t: &mut Tally, end: &ConnEnd);

    /// Adds what the server side finished since the last call (iperf3's sessions).
    fn tally_server(_server: &mut Self::Server, _t: &mut Tally) {}

    /// The connection's flow, right after [`App::accept`] (the sink names its file after it).
    fn opened(&mut self, _server: &mut Self::Server, _flow: Option<&FlowKey>) {}

    /// Weir is stopping and every connection has ended: the server finishes what it runs
    /// beside the core (the sink's file writer) and adds its totals.
    fn stop_server(_server: &mut Self::Server, _t: &mut Tally) {}
}

/// The glue's own counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GlueCounts {
    /// Connections opened (`Event::Opened`).
    pub opened: u64,
    /// Connections that closed cleanly.
    pub closed: u64,
    /// Connections reset (by the peer, or by weir after a failure).
    pub reset: u64,
    /// Connections still open when weir stopped (reset then).
    pub open_at_stop: u64,
    /// Bytes the engines consumed from receive queues.
    pub bytes_in: u64,
    /// Bytes the engines wrote into send buffers.
    pub bytes_out: u64,
    /// Errors the engines returned (each closes its connection).
    pub app_errors: u64,
    /// Writes the send buffer (or the pool) cut short, each followed by `Event::Writable`.
    pub short_writes: u64,
    /// Times an engine woke another connection.
    pub wakes: u64,
    /// Connections whose engine asked for socket options (`App::take_options`), applied.
    pub options_applied: u64,
}

impl GlueCounts {
    /// Adds another core's counts.
    pub fn merge(&mut self, o: &GlueCounts) {
        self.opened += o.opened;
        self.closed += o.closed;
        self.reset += o.reset;
        self.open_at_stop += o.open_at_stop;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.app_errors += o.app_errors;
        self.short_writes += o.short_writes;
        self.wakes += o.wakes;
        self.options_applied += o.options_applied;
    }
}

/// Applies what a client asked of its connection. The stack bounds each value (one MSS of
/// send buffer at least, the window scale's reach, 88 bytes of MSS) and logs what it set.
fn apply_options<B: PacketBuf>(tcp: &mut Tcp<B>, id: ConnId, o: ConnOptions) {
    let flow = tcp.flow(id).map(|f| format!("{f:?}")).unwrap_or_default();
    if let Some(b) = o.buffer {
        let snd = tcp.set_snd_buf(id, b);
        let rcv = tcp.set_rcv_buf(id, b);
        tracing::debug!("{flow}: buffers asked {b}: send {snd:?}, receive {rcv:?}");
    }
    if let Some(m) = o.mss {
        let got = tcp.set_mss(id, m);
        tracing::debug!("{flow}: MSS asked {m}: {got:?} payload bytes per segment");
    }
    if o.no_delay {
        let _ = tcp.set_nodelay(id, true);
    }
}

/// One connection's engine and where it is in its life.
struct Conn<A> {
    id: ConnId,
    flow: Option<FlowKey>,
    app: A,
    /// `Event::PeerClosed` came: the engine hears of it once the queue is drained.
    fin: bool,
    /// The engine was told of the peer's FIN.
    told_fin: bool,
    /// `Tcp::close` was called.
    closing: bool,
    /// On the list of connections with a deadline.
    timed: bool,
}

/// Every connection of one core, each with its engine `A`.
pub struct Glue<A: ServeApp> {
    server: A::Server,
    conns: Vec<Option<Conn<A>>>,
    stage: Box<[u8]>,
    /// Slots whose engine had a deadline when last pumped.
    timed: Vec<u32>,
    nodelay: bool,
    counts: GlueCounts,
    tally: Tally,
}

/// The token an engine knows a connection by: its generation and slot.
fn token(id: ConnId) -> u64 {
    (u64::from(id.generation()) << 32) | u64::from(id.index())
}

impl<A: ServeApp> Glue<A> {
    /// A core's glue for at most `max_conns` connections (the connection table's size),
    /// with `TCP_NODELAY` set on each connection when `nodelay`.
    pub fn new(server: A::Server, max_conns: usize, nodelay: bool) -> Self {
        Self {
            server,
            conns: (0..max_conns).map(|_| None).collect(),
            stage: vec![0u8; STAGE].into_boxed_slice(),
            timed: Vec::with_capacity(max_conns),
            nodelay,
            counts: GlueCounts::default(),
            tally: Tally::default(),
        }
    }

    /// The glue's counters so far.
    pub fn counts(&self) -> GlueCounts {
        self.counts
    }

    /// The engines' counters so far (connections that ended).
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// The engines' shared state.
    pub fn server(&mut self) -> &mut A::Server {
        &mut self.server
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.conns.iter().flatten().count()
    }

    /// Answers every event TCP has queued, then the connections the engines woke and those
    /// whose deadline passed. Step 2-3 of the stack's call order: call it after
    /// `handle_rx_burst` and again after `handle_timeout`.
    pub fn serve<B: PacketBuf, P: BufPool<Buf = B>>(
        &mut self,
        tcp: &mut Tcp<B>,
        pool: &mut P,
        now: Instant,
    ) {
        while let Some(ev) = tcp.poll_event() {
            match ev {
                Event::Opened(id) => self.opened(tcp, pool, now, id),
                Event::Readable(id) | Event::Writable(id) => self.pump(tcp, pool, now, id),
                Event::PeerClosed(id) => {
                    if let Some(c) = self.get(id) {
                        c.fin = true;
                    }
                    self.pump(tcp, pool, now, id);
                }
                Event::Closed(id) => self.ended(now, id, "closed"),
                Event::Reset(id) => self.ended(now, id, "reset"),
            }
            self.woken(tcp, pool, now);
        }
        self.woken(tcp, pool, now);
        self.deadlines(tcp, pool, now);
    }

    /// Resets every connection still open (weir is stopping); their engines end as `open`.
    /// A connection in TIME-WAIT has closed on both sides (its `Event::Closed` comes only
    /// when 2 MSL have passed): it ends as `closed`, with no RST.
    pub fn stop<B: PacketBuf>(&mut self, tcp: &mut Tcp<B>, now: Instant) {
        let open: Vec<ConnId> = self.conns.iter().flatten().map(|c| c.id).collect();
        for id in open {
            if tcp.info(id).is_some_and(|i| i.state == State::TimeWait) {
                self.ended(now, id, "closed");
                continue;
            }
            let _ = tcp.abort(id);
            self.counts.open_at_stop += 1;
            self.ended(now, id, "open");
        }
        A::stop_server(&mut self.server, &mut self.tally);
    }

    fn get(&mut self, id: ConnId) -> Option<&mut Conn<A>> {
        match self.conns.get_mut(id.index() as usize) {
            Some(Some(c)) if c.id == id => Some(c),
            _ => None,
        }
    }

    fn opened<B: PacketBuf, P: BufPool<Buf = B>>(
        &mut self,
        tcp: &mut Tcp<B>,
        pool: &mut P,
        now: Instant,
        id: ConnId,
    ) {
        let i = id.index() as usize;
        if i >= self.conns.len() {
            // The table is sized from the same number: not expected. Refuse rather than grow.
            let _ = tcp.abort(id);
            return;
        }
        if let Some(old) = self.conns[i].as_ref().map(|c| c.id) {
            // The slot's previous connection ended without its event reaching us.
            self.ended(now, old, "reset");
        }
        if self.nodelay {
            let _ = tcp.set_nodelay(id, true);
        }
        let mut app = A::accept(&mut self.server, now, token(id));
        let flow = tcp.flow(id);
        app.opened(&mut self.server, flow.as_ref());
        self.conns[i] = Some(Conn {
            id,
            flow,
            app,
            fin: false,
            told_fin: false,
            closing: false,
            timed: false,
        });
        self.counts.opened += 1;
        self.pump(tcp, pool, now, id);
    }

    fn ended(&mut self, now: Instant, id: ConnId, end: &'static str) {
        let i = id.index() as usize;
        let Some(slot) = self.conns.get_mut(i) else {
            return;
        };
        if slot.as_ref().is_none_or(|c| c.id != id) {
            return;
        }
        let Some(mut c) = slot.take() else { return };
        match end {
            "closed" => self.counts.closed += 1,
            "reset" => self.counts.reset += 1,
            _ => {}
        }
        c.app.on_closed(&mut self.server, now);
        let info = ConnEnd {
            flow: c.flow.map(|f| format!("{f:?}")).unwrap_or_default(),
            local_port: c.flow.map_or(0, |f| f.dport),
            end,
        };
        c.app.tally(&mut self.server, &mut self.tally, &info);
        A::tally_server(&mut self.server, &mut self.tally);
    }

    /// Pumps the connections the engines woke.
    fn woken<B: PacketBuf, P: BufPool<Buf = B>>(
        &mut self,
        tcp: &mut Tcp<B>,
        pool: &mut P,
        now: Instant,
    ) {
        // Each pump may wake more; the engines' queue of woken tokens is bounded, and
        // this bound keeps one call finite even if an engine kept waking.
        let mut budget = 4 * self.conns.len() + 16;
        while budget > 0 {
            budget -= 1;
            let Some(t) = A::take_woken(&mut self.server) else {
                break;
            };
            self.counts.wakes += 1;
            let slot = (t & 0xffff_ffff) as usize;
            let Some(Some(c)) = self.conns.get(slot) else {
                continue;
            };
            if token(c.id) == t {
                let id = c.id;
                self.pump(tcp, pool, now, id);
            }
        }
    }

    /// Pumps the connections whose engine's deadline has passed.
    fn deadlines<B: PacketBuf, P: BufPool<Buf = B>>(
        &mut self,
        tcp: &mut Tcp<B>,
        pool: &mut P,
        now: Instant,
    ) {
        let mut k = 0;
        while k < self.timed.len() {
            let slot = self.timed[k] as usize;
            let due = match self.conns.get(slot) {
                Some(Some(c)) => c
                    .app
                    .next_deadline(&self.server)
                    .map(|d| (d <= now).then_some(c.id)),
                _ => None,
            };
            match due {
                // Still waiting.
                Some(None) => k += 1,
                Some(Some(id)) => {
                    self.pump(tcp, pool, now, id);
                    k += 1;
                }
                // No deadline any more (or the connection is gone): off the list.
                None => {
                    if let Some(Some(c)) = self.conns.get_mut(slot) {
                        c.timed = false;
                    }
                    self.timed.swap_remove(k);
                }
            }
        }
    }

    /// Runs connection `id`'s engine as far as it goes now (see the module docs).
    pub fn pump<B: PacketBuf, P: BufPool<Buf = B>>(
        &mut self,
        tcp: &mut Tcp<B>,
        pool: &mut P,
        now: Instant,
        id: ConnId,
    ) {
        let Self {
            server,
            conns,
            stage,
            timed,
            counts,
            ..
        } = self;
        let Some(Some(c)) = conns.get_mut(id.index() as usize) else {
            return;
        };
        if c.id != id {
            return;
        }
        let mut sink = TcpSink::new(tcp, pool, id, now);
        let mut error: Option<AppError> = None;
        loop {
            let due = c.app.next_deadline(server).is_some_and(|d| d <= now);
            if c.app.output_pending(server) || due {
                if let Err(e) = c.app.poll_output(server, now, &mut sink) {
                    error.get_or_insert(e);
                }
            }
            let readable = sink.tcp.readable_bytes(id);
            if readable == 0 {
                break;
            }
            // Copy without consuming (the closure returns 0): what the engine leaves stays
            // queued.
            let want = readable.min(STAGE);
            let mut copied = 0;
            let _ = sink.tcp.recv(id, |slices| {
                for s in slices {
                    let b = s.bytes();
                    let n = b.len().min(want - copied);
                    stage[copied..copied + n].copy_from_slice(&b[..n]);
                    copied += n;
                    if copied == want {
                        break;
                    }
                }
                0
            });
            if copied == 0 {
                break;
            }
            let used = match c.app.on_data(server, now, &stage[..copied], &mut sink) {
                Ok(n) => n.min(copied),
                Err(e) => {
                    // The engine discards from now on; these bytes are gone with it.
                    error.get_or_insert(e);
                    copied
                }
            };
            if used > 0 {
                let _ = sink.tcp.recv(id, |_| used);
            }
            if let Some(o) = c.app.take_options(server) {
                apply_options(sink.tcp, id, o);
                counts.options_applied += 1;
            }
            counts.bytes_in += used as u64;
            if used < copied {
                break;
            }
        }
        let drained = sink.tcp.readable_bytes(id) == 0;
        if c.fin && drained && !c.told_fin {
            c.told_fin = true;
            c.app.on_peer_closed(server, now);
            if c.app.output_pending(server) {
                if let Err(e) = c.app.poll_output(server, now, &mut sink) {
                    error.get_or_insert(e);
                }
            }
        }
        counts.bytes_out += sink.taken;
        counts.short_writes += sink.short;
        let tcp = sink.tcp;
        if let Some(e) = error {
            counts.app_errors += 1;
            if counts.app_errors <= LOGGED_ERRORS {
                let flow = c.flow.map(|f| format!("{f:?}")).unwrap_or_default();
                tracing::warn!("{flow}: {e}; closing the connection");
            }
        }
        if !c.closing && c.app.wants_reset(server) {
            c.closing = true;
            // Its `Event::Reset` ends the engine.
            let _ = tcp.abort(id);
        } else if !c.closing && c.app.wants_close(server) && !c.app.output_pending(server) {
            c.closing = true;
            // Our FIN after the queued bytes (or a RST if the peer's bytes came after
            // the engine stopped reading: nothing is left unread here).
            let _ = tcp.close(now, id);
        }
        if !c.timed && c.app.next_deadline(server).is_some() {
            c.timed = true;
            timed.push(id.index());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    //! The glue between two in-memory pipelines on a virtual clock: a client pipeline
    //! driven by hand, the server's engines by [`Glue`]. Each test checks what reaches the
    //! client byte for byte and the glue's accounting.

    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    use stack::ack::AckPolicy;
    use stack::driver::{Burst, RxQueue, TxQueue};
    use stack::mem::{link, MemRx, MemTx, VecBuf, VecPool};
    use stack::pipeline::{Pipeline, PipelineConfig};
    use stack::tcp::{ConnectOpts, TcpConfig};
    use stack::time::Duration;
    use stack::wire::LocalAddrs;

    use super::*;
    use crate::serve::echo::Echo;
    use crate::serve::http::{self, Http};

    const MAC_S: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const MAC_C: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const IP_S: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const IP_C: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
    const PORT: u16 = 7007;

    /// The client's side of one connection: what it still has to send, what came back.
    #[derive(Default)]
    struct Client {
        to_send: Vec<u8>,
        sent: usize,
        shutdown_after: bool,
        got: Vec<u8>,
        opened: bool,
        peer_closed: bool,
        ended: Option<&'static str>,
    }

    /// Two pipelines and their links; the server's engines are `A`.
    struct Pair<A: ServeApp> {
        server: Pipeline<VecBuf>,
        client: Pipeline<VecBuf>,
        to_server: MemTx,
        server_rx: MemRx,
        to_client: MemTx,
        client_rx: MemRx,
        pool: VecPool,
        glue: Glue<A>,
        now: Instant,
        conn: ConnId,
        c: Client,
    }

    fn config(
        mac: [u8; 6],
        ip: Ipv4Addr,
        listen: Vec<(u16, AckPolicy)>,
        snd_buf: u32,
    ) -> PipelineConfig {
        PipelineConfig {
            local: LocalAddrs::new(mac, Some(ip), None),
            gro: None,
            tcp: TcpConfig {
                max_conns: 8,
                snd_buf,
                ..TcpConfig::default()
            },
            listen,
            tx_csum_offload: false,
        }
    }

    impl<A: ServeApp> Pair<A> {
        fn new(server: A::Server, snd_buf: u32, c: Client) -> Self {
            let server_p = Pipeline::new(config(
                MAC_S,
                IP_S,
                vec![(PORT, AckPolicy::linux())],
                snd_buf,
            ))
            .unwrap();
            let mut client = Pipeline::new(config(MAC_C, IP_C, vec![], 1 << 20)).unwrap();
            let (to_server, server_rx) = link(4096);
            let (to_client, client_rx) = link(4096);
            let now = Instant::from_nanos(1_000_000);
            let conn = client
                .tcp()
                .connect(
                    now,
                    IpAddr::V4(IP_C),
                    SocketAddr::new(IpAddr::V4(IP_S), PORT),
                    ConnectOpts::new(MAC_C, MAC_S),
                )
                .unwrap();
            Pair {
                server: server_p,
                client,
                to_server,
                server_rx,
                to_client,
                client_rx,
                pool: VecPool::new(8192, 2048),
                glue: Glue::new(server, 8, true),
                now,
                conn,
                c,
            }
        }

        /// One iteration of each side.
        fn step(&mut self) {
            let now = self.now;
            let mut burst = Burst::new();
            self.server_rx.rx_burst(&mut burst);
            self.server.handle_rx_burst(now, &mut burst);
            self.glue.serve(self.server.tcp(), &mut self.pool, now);
            self.server.handle_timeout(now);
            self.glue.serve(self.server.tcp(), &mut self.pool, now);
            let mut out = Burst::new();
            self.server.poll_tx(now, &mut self.pool, &mut out);
            self.to_client.tx_burst(&mut out);

            let mut burst = Burst::new();
            self.client_rx.rx_burst(&mut burst);
            self.client.handle_rx_burst(now, &mut burst);
            self.client_events();
            self.client.handle_timeout(now);
            self.client_events();
            let mut out = Burst::new();
            self.client.poll_tx(now, &mut self.pool, &mut out);
            self.to_server.tx_burst(&mut out);
            self.now = now + Duration::from_micros(20);
        }

        fn client_events(&mut self) {
            let now = self.now;
            let id = self.conn;
            while let Some(ev) = self.client.tcp().poll_event() {
                match ev {
                    Event::Opened(_) => self.c.opened = true,
                    Event::Readable(_) => {
                        let got = &mut self.c.got;
                        self.client
                            .tcp()
                            .recv(id, |slices| {
                                let mut n = 0;
                                for s in slices {
                                    got.extend_from_slice(s.bytes());
                                    n += s.bytes().len();
                                }
                                n
                            })
                            .unwrap();
                    }
                    Event::PeerClosed(_) => {
                        self.c.peer_closed = true;
                        let _ = self.client.tcp().close(now, id);
                    }
                    Event::Closed(_) => self.c.ended = Some("closed"),
                    Event::Reset(_) => self.c.ended = Some("reset"),
                    Event::Writable(_) => {}
                }
            }
            if self.c.opened && self.c.ended.is_none() {
                while self.c.sent < self.c.to_send.len() {
                    let end = (self.c.sent + 16 * 1024).min(self.c.to_send.len());
                    let n = self
                        .client
                        .tcp()
                        .send(now, id, &self.c.to_send[self.c.sent..end], &mut self.pool)
                        .unwrap_or(0);
                    self.c.sent += n;
                    if n == 0 {
                        break;
                    }
                }
                if self.c.shutdown_after && self.c.sent == self.c.to_send.len() {
                    self.c.shutdown_after = false;
                    let _ = self.client.tcp().shutdown(now, id);
                }
            }
        }

        fn run_until(&mut self, mut done: impl FnMut(&Self) -> bool) {
            for _ in 0..200_000 {
                if done(self) {
                    return;
                }
                self.step();
            }
            panic!("did not finish: client got {} bytes", self.c.got.len());
        }
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect()
    }

    #[test]
    fn echo_through_a_small_send_buffer_returns_every_byte_in_order() {
        let data = pattern(1 << 20);
        let client = Client {
            to_send: data.clone(),
            shutdown_after: true,
            ..Client::default()
        };
        // 8 KiB of send buffer against 1 MiB: the echo's writes are cut short again and
        // again, and what it cannot write stays in the receive queue until Writable.
        let mut p = Pair::<Echo>::new((), 8192, client);
        // The client closed first (it ends in TIME-WAIT); the server's close completes.
        p.run_until(|p| p.c.peer_closed && p.glue.open() == 0);
        assert!(
            p.c.got == data,
            "{} of {} bytes back",
            p.c.got.len(),
            data.len()
        );
        let c = p.glue.counts();
        assert_eq!((c.bytes_in, c.bytes_out), (1 << 20, 1 << 20));
        assert!(c.short_writes > 0, "the send buffer never filled: {c:?}");
        assert_eq!((c.opened, c.closed, c.reset, c.app_errors), (1, 1, 0, 0));
        assert_eq!(p.glue.tally().counters["echoed_bytes"], 1 << 20);
    }

    #[test]
    fn http_answers_pipelined_requests_in_order_then_refuses_a_bad_one_and_closes() {
        let mut reqs = Vec::new();
        for path in ["/", "/missing", "/"] {
            reqs.extend_from_slice(format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes());
        }
        reqs.extend_from_slice(b"NOT HTTP\r\n\r\n");
        let client = Client {
            to_send: reqs,
            ..Client::default()
        };
        let cfg = http::Config {
            body_len: 100_000,
            ..http::Config::default()
        };
        let mut p = Pair::<Http>::new(cfg, 16_384, client);
        // The server closes first (it ends in TIME-WAIT); the client's close completes.
        p.run_until(|p| p.c.ended.is_some());
        let text = String::from_utf8_lossy(&p.c.got).into_owned();
        let statuses: Vec<&str> = text
            .match_indices("HTTP/1.1 ")
            .map(|(i, _)| &text[i + 9..i + 12])
            .collect();
        assert_eq!(
            statuses,
            ["200", "404", "200", "400"],
            "{}",
            &text[..200.min(text.len())]
        );
        // Both 200 bodies whole, byte for byte.
        let mut body = vec![0u8; 100_000];
        http::fill_body(0, &mut body);
        let first = p.c.got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert!(p.c.got[first..first + body.len()] == body[..]);
        assert!(p.c.peer_closed, "the server closed after the 400");
        let c = p.glue.counts();
        assert_eq!(c.app_errors, 1);
        assert_eq!(c.bytes_out as usize, p.c.got.len());
        // The server's side is in TIME-WAIT: at the stop it ends as closed, no RST, and
        // its engine's counters join the tally.
        let now = p.now;
        p.glue.stop(p.server.tcp(), now);
        let c = p.glue.counts();
        assert_eq!((c.closed, c.open_at_stop, c.reset), (1, 0, 0));
        let t = &p.glue.tally().counters;
        assert_eq!((t["requests"], t["responses_200"]), (4, 2));
    }

    /// Random bytes, then the client's FIN, to a fresh server of `A`: nothing panics and the
    /// connection ends (the server's FIN after the peer's, or its close after an engine
    /// error, with a RST if the client's bytes still arrive), else `run_until` fails.
    fn random_input_then_fin<A: ServeApp>(server: A::Server, seed: u64) -> GlueCounts {
        let mut x = seed;
        let data: Vec<u8> = (0..64 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let client = Client {
            to_send: data,
            shutdown_after: true,
            ..Client::default()
        };
        let mut p = Pair::<A>::new(server, 16_384, client);
        p.run_until(|p| p.c.peer_closed || p.c.ended.is_some());
        p.run_until(|p| p.glue.open() == 0 || p.c.ended.is_some());
        let now = p.now;
        p.glue.stop(p.server.tcp(), now);
        p.glue.counts()
    }

    #[test]
    fn random_input_never_panics_and_every_engine_closes() {
        use crate::serve::{discard, iperf3, sockperf, tbench};
        for seed in [1u64, 0x9E37_79B9_7F4A_7C15, 42] {
            let c = random_input_then_fin::<Echo>((), seed);
            assert_eq!((c.bytes_in, c.bytes_out), (65536, 65536));
            random_input_then_fin::<Http>(http::Config::default(), seed);
            random_input_then_fin::<sockperf::Sockperf>(sockperf::Config::default(), seed);
            random_input_then_fin::<tbench::Tbench>((), seed);
            random_input_then_fin::<iperf3::Iperf3>(iperf3::Server::default(), seed);
            let c = random_input_then_fin::<discard::Discard>(discard::Config::default(), seed);
            assert_eq!((c.bytes_in, c.bytes_out), (65536, 0));
        }
    }

    #[test]
    fn stop_resets_an_open_connection_and_ends_its_engine() {
        let client = Client {
            to_send: b"hello".to_vec(),
            ..Client::default()
        };
        let mut p = Pair::<Echo>::new((), 1 << 20, client);
        p.run_until(|p| p.c.got.len() == 5);
        assert_eq!(p.glue.open(), 1);
        let now = p.now;
        p.glue.stop(p.server.tcp(), now);
        assert_eq!(p.glue.open(), 0);
        let c = p.glue.counts();
        assert_eq!((c.open_at_stop, c.closed, c.reset), (1, 0, 0));
        // The RST reaches the client.
        p.run_until(|p| p.c.ended.is_some());
        assert_eq!(p.c.ended, Some("reset"));
        // The Reset event of the abort is not counted twice.
        assert_eq!(p.glue.counts().reset, 0);
    }

    /// Holds the sink's writer in its open until the test lets it go.
    static WRITE_GATE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    fn gated_open(p: &std::path::Path) -> std::io::Result<std::fs::File> {
        // A test that fails before it opens the gate must not hang here.
        for _ in 0..20_000 {
            if WRITE_GATE.load(std::sync::atomic::Ordering::Acquire) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        crate::serve::write_dir::create_new(p)
    }

    fn dev_full(_: &std::path::Path) -> std::io::Result<std::fs::File> {
        std::fs::OpenOptions::new().write(true).open("/dev/full")
    }

    /// As `run_until`, letting the sink's writer thread run between steps.
    fn run_with_writer<A: ServeApp>(p: &mut Pair<A>, mut done: impl FnMut(&Pair<A>) -> bool) {
        for _ in 0..2_000_000 {
            if done(p) {
                return;
            }
            p.step();
            std::thread::yield_now();
        }
        panic!(
            "did not finish: the server consumed {} bytes",
            p.glue.counts().bytes_in
        );
    }

    #[test]
    fn sink_write_dir_closes_the_window_while_the_writer_is_behind_and_loses_nothing() {
        use crate::serve::discard::{self, Discard};
        use crate::serve::write_dir::{testing::TempDir, WriteDir, CHUNK, MAX_FILES};
        let dir = TempDir::new("glue-gate");
        let data = pattern(3 << 20);
        let cfg = discard::Config {
            digest: true,
            write_dir: Some(WriteDir::with_opener(&dir.0, gated_open, 4, MAX_FILES).unwrap()),
        };
        let client = Client {
            to_send: data.clone(),
            shutdown_after: true,
            ..Client::default()
        };
        let mut p = Pair::<Discard>::new(cfg, 16_384, client);
        // The writer is stuck: the engine takes what 4 chunks hold (a chunk carries one
        // `on_data`'s bytes, at most CHUNK) and no more; the rest waits in the receive
        // queue (the window closes) and in the client's send buffer.
        p.run_until(|p| p.glue.counts().bytes_in > 0);
        for _ in 0..2000 {
            p.step();
        }
        let held = p.glue.counts().bytes_in;
        assert!(held <= 4 * CHUNK as u64, "{held} bytes in 4 chunks");
        for _ in 0..2000 {
            p.step();
        }
        assert_eq!(
            p.glue.counts().bytes_in,
            held,
            "consumed with no free chunk"
        );
        assert!(p.c.sent < data.len(), "the client could send everything");
        assert_eq!(p.c.ended, None);
        // Let it go: the engine is woken through take_woken and every byte arrives.
        WRITE_GATE.store(true, std::sync::atomic::Ordering::Release);
        run_with_writer(&mut p, |p| p.c.peer_closed && p.glue.open() == 0);
        let now = p.now;
        p.glue.stop(p.server.tcp(), now);
        let c = p.glue.counts();
        assert_eq!((c.bytes_in, c.closed, c.reset), (data.len() as u64, 1, 0));
        let t = p.glue.tally();
        let f = &t.files[0];
        assert!(f.complete, "{f:?}");
        assert!(std::fs::read(&f.path).unwrap() == data, "the file differs");
        assert_eq!(t.digests[0].end, "closed");
        assert_eq!(t.counters["files_incomplete"], 0);
        assert!(t.counters["write_stalls"] > 0);
        assert!(c.wakes > 0, "never woken by the writer's room");
    }

    #[test]
    fn sink_write_dir_resets_the_connection_when_the_disk_is_full() {
        use crate::serve::discard::{self, Discard};
        use crate::serve::write_dir::{testing::TempDir, WriteDir, CHUNKS, MAX_FILES};
        let dir = TempDir::new("glue-full");
        let cfg = discard::Config {
            digest: false,
            write_dir: Some(WriteDir::with_opener(&dir.0, dev_full, CHUNKS, MAX_FILES).unwrap()),
        };
        let client = Client {
            to_send: pattern(1 << 20),
            ..Client::default()
        };
        let mut p = Pair::<Discard>::new(cfg, 16_384, client);
        run_with_writer(&mut p, |p| p.c.ended.is_some());
        assert_eq!(
            p.c.ended,
            Some("reset"),
            "the sender must see its transfer fail"
        );
        let now = p.now;
        p.glue.stop(p.server.tcp(), now);
        assert_eq!(p.glue.counts().reset, 1);
        let t = p.glue.tally();
        let f = &t.files[0];
        assert!(!f.complete && f.end == "reset", "{f:?}");
        assert!(
            f.error
                .as_deref()
                .unwrap()
                .contains("No space left on device"),
            "{f:?}"
        );
        assert_eq!(t.counters["write_errors"], 1);
    }
}
