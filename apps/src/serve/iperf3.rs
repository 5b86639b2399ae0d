//! The server side of iperf3's TCP test protocol, as iperf 3.12 speaks it: the control
//! connection, the cookie, the JSON exchanges and the data streams.
//!
//! Read first: iperf 3.12 `src/iperf_server_api.c` (`iperf_run_server`, `iperf_accept`,
//! `iperf_handle_message_server`), `src/iperf_api.c` (`get_parameters`, `send_results`,
//! `get_results`, `JSON_read`, `JSON_write`, `iperf_add_stream`), `src/iperf_tcp.c`
//! (`iperf_tcp_accept`) and `src/iperf_client_api.c` (the client's side of each step).
//!
//! A test, as the client drives it:
//! 1. The client opens the control connection and sends a 37-byte cookie (36 characters of
//!    `a-z2-7` and a NUL, `make_cookie`).
//! 2. The server sends the state byte `PARAM_EXCHANGE`; the client sends its parameters as
//!    JSON preceded by a 4-byte big-endian length.
//! 3. The server sends `CREATE_STREAMS`. The client opens `parallel` data connections (twice
//!    as many with `--bidir`: first those it sends on, then those it receives on), each
//!    starting with the same cookie.
//! 4. With every stream accepted, the server sends `TEST_START` then `TEST_RUNNING`. Data
//!    flows: the server counts what it receives, or sends with `-R`, or both with `--bidir`.
//! 5. The client sends `TEST_END`. The server stops, sends `EXCHANGE_RESULTS`, reads the
//!    client's results JSON, sends its own, then `DISPLAY_RESULTS`.
//! 6. The client sends `IPERF_DONE` and closes everything.
//!
//! A session ([`Server`]'s table, keyed by cookie) spans the control connection and its
//! streams. The server assigns stream ids in accept order as `iperf_add_stream` does: 1, then
//! 3, 4, 5, ... (the client numbers its streams the same way, and checks the server's
//! results against them). A connection whose cookie names no session starts a new one if
//! fewer than [`Config::max_sessions`] are running (iperf3 runs one test at a time: the
//! default is 1); otherwise, or when its session takes no more streams, it gets the byte
//! `ACCESS_DENIED` and is closed, as in `iperf_accept` and `iperf_tcp_accept`.
//!
//! Errors the client can be told about go out as `SERVER_ERROR` followed by two 4-byte
//! big-endian numbers, iperf's `i_errno` and `errno`, as `iperf_exchange_parameters` sends
//! them: unreadable parameters (`IERECVPARAMS`), UDP or SCTP (`IEUNIMP`: this server speaks
//! TCP only), too many streams (`IENUMSTREAMS`), an unknown control byte (`IEMESSAGE`),
//! unreadable results (`IERECVRESULTS`). Then the session ends and its connections close.
//!
//! What the server reports (`send_results`): CPU use as the driver sets it
//! ([`Server::set_cpu_util`]; zeros otherwise), `sender_has_retransmits` -1 when the server
//! only received, else 0 (weir has no `TCP_INFO` to read them from), and per stream its id,
//! bytes (received, or sent minus those sent during `--omit`), retransmits -1, jitter,
//! errors and packets 0 (TCP), `start_time` 0 and `end_time` the seconds from the start
//! (after `--omit`) to `TEST_END`. The client's own figures are kept in
//! [`SessionReport`] beside the server's.
//!
//! Bounds: a JSON message in is at most [`Config::max_json`] bytes (held while it arrives);
//! a session's control output is staged in at most `max_json` + 64 bytes; sessions, streams
//! per session (2 × 128, iperf's `MAX_STREAMS` each way), woken tokens and finished reports
//! are all capped. Reverse data is generated as the sink takes it.

use std::collections::VecDeque;

use serde_json::{json, Value};
use stack::time::{Duration, Instant};

use super::{write_fill, App, AppError, ConnOptions, Sink, Staged};

const APP: &str = "iperf3";

/// Length of the cookie every connection starts with (`COOKIE_SIZE` in `iperf.h`).
pub const COOKIE_SIZE: usize = 37;
/// Most streams one direction may have (`MAX_STREAMS` in `iperf.h`).
pub const MAX_STREAMS: u32 = 128;

/// The control connection's state bytes (`iperf_api.h`), as they go on the wire.
pub mod state {
    /// The test starts: streams are all connected.
    pub const TEST_START: u8 = 1;
    /// Data flows.
    pub const TEST_RUNNING: u8 = 2;
    /// The client ends the test.
    pub const TEST_END: u8 = 4;
    /// The server asks for the client's parameters.
    pub const PARAM_EXCHANGE: u8 = 9;
    /// The server asks the client to open its data streams.
    pub const CREATE_STREAMS: u8 = 10;
    /// The server is going away.
    pub const SERVER_TERMINATE: u8 = 11;
    /// The client is going away (interrupted).
    pub const CLIENT_TERMINATE: u8 = 12;
    /// Results are exchanged: the client sends its JSON, then the server.
    pub const EXCHANGE_RESULTS: u8 = 13;
    /// The client may print its results.
    pub const DISPLAY_RESULTS: u8 = 14;
    /// The client is done.
    pub const IPERF_DONE: u8 = 16;
    /// The server is busy (`-1` as a signed char).
    pub const ACCESS_DENIED: u8 = 0xFF;
    /// An error follows as two 4-byte numbers (`-2` as a signed char).
    pub const SERVER_ERROR: u8 = 0xFE;
}

/// iperf's `i_errno` values this server sends (`iperf_api.h`).
mod ierr {
    pub(super) const IENUMSTREAMS: i32 = 6;
    pub(super) const IEUNIMP: i32 = 13;
    pub(super) const IEMESSAGE: i32 = 110;
    pub(super) const IERECVPARAMS: i32 = 114;
    pub(super) const IEPACKAGERESULTS: i32 = 115;
    pub(super) const IERECVRESULTS: i32 = 117;
}

/// The iperf3 server's settings on one core.
#[derive(Debug, Clone)]
pub struct Config {
    /// Tests running at once (iperf3 runs one; more are weir's choice).
    pub max_sessions: usize,
    /// Longest JSON message accepted from a client, and the bound on what is staged.
    pub max_json: usize,
    /// Finished sessions' reports kept for [`Server::take_finished`] (the oldest go first).
    pub max_finished: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_sessions: 1,
            max_json: 64 * 1024,
            max_finished: 16,
        }
    }
}

/// The parameters a client sent (`get_parameters`); the socket options among them are the
/// driver's to apply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params {
    /// Streams per direction (`-P`).
    pub parallel: u32,
    /// The server sends (`-R`).
    pub reverse: bool,
    /// Both send (`--bidir`).
    pub bidir: bool,
    /// Block size (`-l`), bytes.
    pub len: u32,
    /// Seconds left out at the start (`-O`).
    pub omit: u32,
    /// Test length (`-t`), seconds; the client ends the test.
    pub duration: u32,
    /// Bytes to send (`-n`), 0: unlimited.
    pub bytes: u64,
    /// Blocks to send (`-k`), 0: unlimited.
    pub blocks: u64,
    /// Target rate per stream (`-b`), bits per second, 0: unlimited.
    pub rate: u64,
    /// Socket buffer size asked for (`-w`), bytes, 0: default.
    pub window: u32,
    /// MSS asked for (`-M`), 0: default.
    pub mss: u32,
    /// `-N`: no Nagle.
    pub no_delay: bool,
    /// Congestion control asked for (`-C`).
    pub congestion: Option<String>,
    /// The client's version string.
    pub client_version: Option<String>,
}

/// One stream's figures at the end of a test.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamReport {
    /// The stream's id.
    pub id: u32,
    /// Whether the server sent on it.
    pub sender: bool,
    /// Bytes the server counted (reported to the client).
    pub bytes: u64,
    /// Bytes the client reported for the same stream, if it did.
    pub client_bytes: Option<u64>,
}

/// A finished test.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionReport {
    /// The test's cookie.
    pub cookie: String,
    /// The client's parameters (default if it never sent them).
    pub params: Params,
    /// Per stream, in id order.
    pub streams: Vec<StreamReport>,
    /// From the start (after omit) to `TEST_END`, seconds.
    pub seconds: f64,
    /// Whether the client saw it through to `IPERF_DONE`.
    pub completed: bool,
    /// The error that ended it, if one did.
    pub error: Option<AppError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the parameters.
    ParamExchange,
    /// Waiting for the streams.
    CreateStreams,
    /// Data flows.
    Running,
    /// `TEST_END` came; waiting for the client's results.
    ExchangeResults,
    /// Results sent; waiting for `IPERF_DONE`.
    DisplayResults,
    /// Over (done, terminated or failed); the control connection closes.
    Done,
}

#[derive(Debug)]
struct Stream {
    id: u32,
    sender: bool,
    token: u64,
    /// The connection's place in accept order.
    order: u64,
    bytes: u64,
    bytes_omit: u64,
}

#[derive(Debug)]
struct Session {
    gen: u64,
    cookie: [u8; COOKIE_SIZE],
    phase: Phase,
    params: Params,
    control: u64,
    streams: Vec<Stream>,
    to_recv: u32,
    to_send: u32,
    start: Instant,
    omit_done: bool,
    end: Instant,
    sent_total: u64,
    ctrl_out: Staged,
    client_bytes: Vec<(u32, u64)>,
    completed: bool,
    error: Option<AppError>,
}

impl Session {
    /// Leaves omit mode once `omit` seconds have passed (`iperf_reset_stats` at the omit
    /// timer): received counts restart, sent counts remember what to subtract.
    fn tick(&mut self, now: Instant) {
        if self.phase != Phase::Running || self.omit_done || self.params.omit == 0 {
            return;
        }
        if now >= self.start + Duration::from_secs(u64::from(self.params.omit)) {
            for s in &mut self.streams {
                if s.sender {
                    s.bytes_omit = s.bytes;
                } else {
                    s.bytes = 0;
                }
            }
            self.start = now;
            self.omit_done = true;
        }
    }

    /// Bytes the whole test may still send (`-n`, `-k`), `u64::MAX` without a limit.
    fn send_budget(&self) -> u64 {
        let mut cap = u64::MAX;
        if self.params.bytes > 0 {
            cap = cap.min(self.params.bytes);
        }
        if self.params.blocks > 0 {
            cap = cap.min(
                self.params
                    .blocks
                    .saturating_mul(u64::from(self.params.len.max(1))),
            );
        }
        cap.saturating_sub(self.sent_total)
    }

    fn seconds(&self) -> f64 {
        self.end.saturating_since(self.start).as_nanos() as f64 / 1e9
    }

    fn stream_bytes(s: &Stream) -> u64 {
        if s.sender {
            s.bytes - s.bytes_omit
        } else {
            s.bytes
        }
    }

    /// Stages `SERVER_ERROR` with iperf's error number and ends the session.
    fn server_error(&mut self, i_errno: i32, e: AppError) -> AppError {
        let mut m = [0u8; 9];
        m[0] = state::SERVER_ERROR;
        m[1..5].copy_from_slice(&i_errno.to_be_bytes());
        // The control stage holds at least max_json + 64 bytes; after a failed push the
        // client sees the connection close instead, which it reports too.
        let _ = self.ctrl_out.push(&m);
        self.phase = Phase::Done;
        self.error = Some(e.clone());
        e
    }
}

/// The iperf3 server on one core: settings and the running sessions.
#[derive(Debug)]
pub struct Server {
    cfg: Config,
    sessions: Vec<Option<Session>>,
    next_gen: u64,
    /// Connections accepted so far: each one's place in accept order.
    accepted: u64,
    woken: VecDeque<u64>,
    woken_cap: usize,
    finished: VecDeque<SessionReport>,
    cpu_util: [f64; 3],
}

impl Server {
    /// A server with no session running.
    pub fn new(cfg: Config) -> Self {
        let max = cfg.max_sessions.max(1);
        Self {
            sessions: (0..max).map(|_| None).collect(),
            next_gen: 1,
            accepted: 0,
            woken: VecDeque::new(),
            woken_cap: max * (1 + 2 * MAX_STREAMS as usize),
            finished: VecDeque::new(),
            cpu_util: [0.0; 3],
            cfg,
        }
    }

    /// The CPU use (total, user, system, in percent) reported to clients from now on
    /// (`cpu_util_total` etc. in the results).
    pub fn set_cpu_util(&mut self, total: f64, user: f64, system: f64) {
        self.cpu_util = [total, user, system];
    }

    /// Pops the report of a finished test, oldest first.
    pub fn take_finished(&mut self) -> Option<SessionReport> {
        self.finished.pop_front()
    }

    /// Sessions running now.
    pub fn sessions(&self) -> usize {
        self.sessions.iter().flatten().count()
    }

    fn session(&self, slot: usize, gen: u64) -> Option<&Session> {
        self.sessions.get(slot)?.as_ref().filter(|s| s.gen == gen)
    }

    fn session_mut(&mut self, slot: usize, gen: u64) -> Option<&mut Session> {
        self.sessions
            .get_mut(slot)?
            .as_mut()
            .filter(|s| s.gen == gen)
    }

    fn wake(&mut self, token: u64) {
        if self.woken.len() < self.woken_cap && !self.woken.contains(&token) {
            self.woken.push_back(token);
        }
    }

    fn wake_session(&mut self, slot: usize) {
        let tokens: Vec<u64> = match self.sessions.get(slot).and_then(|s| s.as_ref()) {
            Some(s) => std::iter::once(s.control)
                .chain(s.streams.iter().map(|st| st.token))
                .collect(),
            None => return,
        };
        for t in tokens {
            self.wake(t);
        }
    }

    /// Ends a session for good: its report is kept, its streams are woken to close.
    fn remove(&mut self, slot: usize, gen: u64) {
        if self.session(slot, gen).is_none() {
            return;
        }
        self.wake_session(slot);
        let Some(s) = self.sessions.get_mut(slot).and_then(Option::take) else {
            return;
        };
        let mut report = SessionReport {
            cookie: String::from_utf8_lossy(&s.cookie[..COOKIE_SIZE - 1]).into_owned(),
            streams: s
                .streams
                .iter()
                .map(|st| StreamReport {
                    id: st.id,
                    sender: st.sender,
                    bytes: Session::stream_bytes(st),
                    client_bytes: s
                        .client_bytes
                        .iter()
                        .find(|(id, _)| *id == st.id)
                        .map(|(_, b)| *b),
                })
                .collect(),
            seconds: s.seconds(),
            completed: s.completed,
            error: s.error,
            params: s.params,
        };
        // In stream id order (the order they were accepted), as the client reports them.
        report.streams.sort_by_key(|st| st.id);
        if self.finished.len() >= self.cfg.max_finished.max(1) {
            self.finished.pop_front();
        }
        self.finished.push_back(report);
    }

    /// The server's results JSON (`send_results`).
    fn results(&self, s: &Session) -> Value {
        let only_received = !s.params.reverse && !s.params.bidir;
        let streams: Vec<Value> = s
            .streams
            .iter()
            .map(|st| {
                json!({
                    "id": st.id,
                    "bytes": Session::stream_bytes(st),
                    "retransmits": -1,
                    "jitter": 0.0,
                    "errors": 0,
                    "packets": 0,
                    "start_time": 0.0,
                    "end_time": s.seconds(),
                })
            })
            .collect();
        json!({
            "cpu_util_total": self.cpu_util[0],
            "cpu_util_user": self.cpu_util[1],
            "cpu_util_system": self.cpu_util[2],
            "sender_has_retransmits": if only_received { -1 } else { 0 },
            "streams": streams,
        })
    }
}

impl Default for Server {
    fn default() -> Self {
        Self::new(Config::default())
    }
}

/// How the control connection's input is being read.
#[derive(Debug)]
enum CtrlRx {
    /// A state byte.
    Byte,
    /// The 4-byte length of a JSON message.
    JsonLen { buf: [u8; 4], have: usize },
    /// The JSON message itself.
    JsonBody { buf: Vec<u8>, need: usize },
}

#[derive(Debug)]
enum Role {
    /// Reading the cookie.
    Cookie { buf: [u8; COOKIE_SIZE], have: usize },
    /// The test's control connection.
    Control { slot: usize, gen: u64, rx: CtrlRx },
    /// A data stream of a test.
    Stream { slot: usize, gen: u64, index: usize },
    /// Refused with `ACCESS_DENIED`; closes once that is out.
    Denied { out: Staged },
    /// Done: input is discarded, the connection closes.
    Gone,
}

/// One iperf3 connection: control or data, decided by its cookie.
#[derive(Debug)]
pub struct Iperf3 {
    token: u64,
    /// Its place in accept order (`Server::accepted` when it was accepted).
    order: u64,
    role: Role,
    peer_closed: bool,
    /// The session's socket options for this data stream, until the driver takes them.
    options: Option<ConnOptions>,
}

impl Iperf3 {
    /// Whether this connection turned out to be a test's control connection.
    pub fn is_control(&self) -> bool {
        matches!(self.role, Role::Control { .. })
    }

    /// Whether this connection is a data stream, and whether the server sends on it.
    pub fn stream_sender(&self, server: &Server) -> Option<bool> {
        match self.role {
            Role::Stream { slot, gen, index } => server
                .session(slot, gen)?
                .streams
                .get(index)
                .map(|s| s.sender),
            _ => None,
        }
    }

    /// The cookie is complete: decide what this connection is.
    fn assign(
        &mut self,
        server: &mut Server,
        cookie: [u8; COOKIE_SIZE],
        now: Instant,
    ) -> Result<(), AppError> {
        let valid = cookie[COOKIE_SIZE - 1] == 0
            && cookie[..COOKIE_SIZE - 1]
                .iter()
                .all(|b| b.is_ascii_graphic());
        if !valid {
            self.role = Role::Gone;
            return Err(AppError::Malformed {
                app: APP,
                reason: "cookie is not 36 characters and a NUL".into(),
            });
        }
        let found = server
            .sessions
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.cookie == cookie));
        if let Some(slot) = found {
            let token = self.token;
            let Some(s) = server.sessions[slot].as_mut() else {
                return Ok(());
            };
            let want = (s.to_recv + s.to_send) as usize;
            if s.phase == Phase::CreateStreams && s.streams.len() < want {
                let index = s.streams.len();
                s.streams.push(Stream {
                    id: 0,
                    sender: false,
                    token,
                    order: self.order,
                    bytes: 0,
                    bytes_omit: 0,
                });
                let gen = s.gen;
                // iperf3's server applies -w (SO_SNDBUF and SO_RCVBUF), -M (TCP_MAXSEG) and
                // -N (TCP_NODELAY) to its data sockets (`iperf_tcp_listen`, `iperf_tcp_accept`).
                let p = &s.params;
                let o = ConnOptions {
                    buffer: (p.window > 0).then_some(p.window),
                    mss: (p.mss > 0).then_some(p.mss),
                    no_delay: p.no_delay,
                };
                if s.streams.len() == want {
                    // Ids and roles by accept order, as iperf3's server gives them when it
                    // accepts each stream (`iperf_run_server`, `iperf_add_stream`: ids 1,
                    // then 3, 4, 5, ...; the first `to_recv` accepted are the ones the
                    // server receives on, since the client opens its sending streams
                    // first), whatever order the cookies were read in. No data flows
                    // before TEST_START, sent below.
                    let mut rank: Vec<usize> = (0..want).collect();
                    rank.sort_by_key(|&k| s.streams[k].order);
                    for (r, &k) in rank.iter().enumerate() {
                        let st = &mut s.streams[k];
                        st.id = if r == 0 { 1 } else { r as u32 + 2 };
                        st.sender = r >= s.to_recv as usize;
                    }
                    s.phase = Phase::Running;
                    s.start = now;
                    // Room for these two bytes: the stage holds at most CREATE_STREAMS now.
                    let _ = s.ctrl_out.push(&[state::TEST_START, state::TEST_RUNNING]);
                    server.wake_session(slot);
                }
                self.role = Role::Stream { slot, gen, index };
                self.options = (!o.is_empty()).then_some(o);
                return Ok(());
            }
            return self.deny("the test takes no more streams");
        }
        let Some(slot) = server.sessions.iter().position(Option::is_none) else {
            return self.deny("the server is busy running a test");
        };
        let gen = server.next_gen;
        server.next_gen += 1;
        let mut ctrl_out = Staged::new(server.cfg.max_json + 64);
        let _ = ctrl_out.push(&[state::PARAM_EXCHANGE]);
        server.sessions[slot] = Some(Session {
            gen,
            cookie,
            phase: Phase::ParamExchange,
            params: Params::default(),
            control: self.token,
            streams: Vec::new(),
            to_recv: 0,
            to_send: 0,
            start: now,
            omit_done: false,
            end: now,
            sent_total: 0,
            ctrl_out,
            client_bytes: Vec::new(),
            completed: false,
            error: None,
        });
        self.role = Role::Control {
            slot,
            gen,
            rx: CtrlRx::JsonLen {
                buf: [0; 4],
                have: 0,
            },
        };
        Ok(())
    }

    fn deny(&mut self, why: &str) -> Result<(), AppError> {
        let mut out = Staged::new(1);
        let _ = out.push(&[state::ACCESS_DENIED]);
        self.role = Role::Denied { out };
        Err(AppError::Refused {
            app: APP,
            reason: why.into(),
        })
    }
}

/// Parses the client's parameters (`get_parameters`); an iperf error number if refused.
fn parse_params(v: &Value) -> Result<Params, (i32, String)> {
    let o = v.as_object().ok_or((
        ierr::IERECVPARAMS,
        "parameters are not a JSON object".to_string(),
    ))?;
    if o.contains_key("udp") || o.contains_key("sctp") {
        return Err((ierr::IEUNIMP, "only TCP tests are served".into()));
    }
    let num = |k: &str| o.get(k).and_then(as_count).unwrap_or(0);
    let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
    let parallel = o.get("parallel").and_then(as_count).unwrap_or(1);
    if parallel == 0 || parallel > u64::from(MAX_STREAMS) {
        return Err((
            ierr::IENUMSTREAMS,
            format!("{parallel} streams (at most {MAX_STREAMS})"),
        ));
    }
    Ok(Params {
        parallel: parallel as u32,
        reverse: o.contains_key("reverse"),
        bidir: o.contains_key("bidirectional"),
        len: u32::try_from(num("len")).unwrap_or(u32::MAX),
        omit: u32::try_from(num("omit")).unwrap_or(u32::MAX),
        duration: u32::try_from(num("time")).unwrap_or(u32::MAX),
        bytes: num("num"),
        blocks: num("blockcount"),
        rate: num("bandwidth"),
        window: u32::try_from(num("window")).unwrap_or(u32::MAX),
        mss: u32::try_from(num("MSS")).unwrap_or(u32::MAX),
        no_delay: o.contains_key("nodelay"),
        congestion: text("congestion"),
        client_version: text("client_version"),
    })
}

/// A count as cJSON prints it: an integer, or `%1.15g` (possibly with an exponent) once it
/// is past `INT_MAX` or not integral.
fn as_count(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.is_finite())
            .map(|f| f as u64)
    })
}

/// The per-stream byte counts in the client's results (`send_results` on the client).
fn parse_client_streams(v: &Value) -> Option<Vec<(u32, u64)>> {
    let streams = v.as_object()?.get("streams")?.as_array()?;
    streams
        .iter()
        .map(|s| {
            let id = u32::try_from(as_count(s.get("id")?)?).ok()?;
            Some((id, as_count(s.get("bytes")?)?))
        })
        .collect()
}

impl Iperf3 {
    /// The control connection's input.
    fn control_data<S: Sink + ?Sized>(
        &mut self,
        server: &mut Server,
        now: Instant,
        input: &[u8],
        out: &mut S,
    ) -> Result<usize, AppError> {
        let Role::Control {
            slot,
            gen,
            ref mut rx,
        } = self.role
        else {
            return Ok(0);
        };
        let max_json = server.cfg.max_json;
        let mut used = 0;
        while used < input.len() {
            let Some(s) = server.session_mut(slot, gen) else {
                return Ok(input.len());
            };
            // Replies go out before more input is read: the client waits for them anyway.
            if !s.ctrl_out.flush(out) {
                break;
            }
            if s.phase == Phase::Done {
                return Ok(input.len());
            }
            match rx {
                CtrlRx::Byte => {
                    let b = input[used];
                    used += 1;
                    match (s.phase, b) {
                        (Phase::CreateStreams | Phase::Running, state::TEST_END) => {
                            s.tick(now);
                            s.end = now;
                            s.phase = Phase::ExchangeResults;
                            let _ = s.ctrl_out.push(&[state::EXCHANGE_RESULTS]);
                            *rx = CtrlRx::JsonLen {
                                buf: [0; 4],
                                have: 0,
                            };
                            server.wake_session(slot);
                        }
                        (Phase::DisplayResults, state::IPERF_DONE) => {
                            s.phase = Phase::Done;
                            s.completed = true;
                        }
                        (_, state::CLIENT_TERMINATE) => {
                            s.end = now;
                            s.phase = Phase::Done;
                            s.error = Some(AppError::Refused {
                                app: APP,
                                reason: "the client terminated".into(),
                            });
                            server.wake_session(slot);
                        }
                        // The server ignores these (`iperf_handle_message_server`).
                        (_, state::TEST_START | state::IPERF_DONE) => {}
                        (_, other) => {
                            let e = AppError::Malformed {
                                app: APP,
                                reason: format!("unexpected control byte {other}"),
                            };
                            let e = s.server_error(ierr::IEMESSAGE, e);
                            server.wake_session(slot);
                            return Err(e);
                        }
                    }
                }
                CtrlRx::JsonLen { buf, have } => {
                    let n = (4 - *have).min(input.len() - used);
                    buf[*have..*have + n].copy_from_slice(&input[used..used + n]);
                    *have += n;
                    used += n;
                    if *have == 4 {
                        let need = u32::from_be_bytes(*buf) as usize;
                        if need > max_json {
                            let code = if s.phase == Phase::ParamExchange {
                                ierr::IERECVPARAMS
                            } else {
                                ierr::IERECVRESULTS
                            };
                            let e = AppError::TooLarge {
                                app: APP,
                                what: "JSON message",
                                len: need as u64,
                                max: max_json as u64,
                            };
                            let e = s.server_error(code, e);
                            server.wake_session(slot);
                            return Err(e);
                        }
                        *rx = CtrlRx::JsonBody {
                            buf: Vec::with_capacity(need),
                            need,
                        };
                    }
                }
                CtrlRx::JsonBody { buf, need } => {
                    let n = (*need - buf.len()).min(input.len() - used);
                    buf.extend_from_slice(&input[used..used + n]);
                    used += n;
                    if buf.len() < *need {
                        continue;
                    }
                    let parsed = serde_json::from_slice::<Value>(buf);
                    *rx = CtrlRx::Byte;
                    if s.phase == Phase::ParamExchange {
                        let params = parsed
                            .map_err(|e| (ierr::IERECVPARAMS, format!("parameters: {e}")))
                            .and_then(|v| parse_params(&v));
                        match params {
                            Ok(p) => {
                                s.to_recv = if p.reverse { 0 } else { p.parallel };
                                s.to_send = if p.reverse || p.bidir { p.parallel } else { 0 };
                                s.params = p;
                                s.phase = Phase::CreateStreams;
                                let _ = s.ctrl_out.push(&[state::CREATE_STREAMS]);
                            }
                            Err((code, reason)) => {
                                let e = if code == ierr::IERECVPARAMS {
                                    AppError::Malformed { app: APP, reason }
                                } else {
                                    AppError::Refused { app: APP, reason }
                                };
                                return Err(s.server_error(code, e));
                            }
                        }
                    } else {
                        // The client's results (`get_results` on the server).
                        let Some(streams) = parsed.ok().as_ref().and_then(parse_client_streams)
                        else {
                            let e = AppError::Malformed {
                                app: APP,
                                reason: "client results".into(),
                            };
                            return Err(s.server_error(ierr::IERECVRESULTS, e));
                        };
                        s.client_bytes = streams;
                        let results = server.results(server.session(slot, gen).ok_or_else(gone)?);
                        let text = serde_json::to_vec(&results).unwrap_or_default();
                        let Some(s) = server.session_mut(slot, gen) else {
                            return Ok(input.len());
                        };
                        let mut msg = Vec::with_capacity(text.len() + 5);
                        msg.extend_from_slice(&(text.len() as u32).to_be_bytes());
                        msg.extend_from_slice(&text);
                        msg.push(state::DISPLAY_RESULTS);
                        if !s.ctrl_out.push(&msg) {
                            let e = AppError::TooLarge {
                                app: APP,
                                what: "results JSON",
                                len: text.len() as u64,
                                max: max_json as u64,
                            };
                            return Err(s.server_error(ierr::IEPACKAGERESULTS, e));
                        }
                        s.phase = Phase::DisplayResults;
                    }
                }
            }
        }
        if let Some(s) = server.session_mut(slot, gen) {
            s.ctrl_out.flush(out);
        }
        Ok(used)
    }
}

fn gone() -> AppError {
    AppError::Refused {
        app: APP,
        reason: "session ended".into(),
    }
}

impl App for Iperf3 {
    type Server = Server;

    fn accept(server: &mut Server, _now: Instant, token: u64) -> Self {
        let order = server.accepted;
        server.accepted += 1;
        Self {
            token,
            order,
            role: Role::Cookie {
                buf: [0; COOKIE_SIZE],
                have: 0,
            },
            peer_closed: false,
            options: None,
        }
    }

    fn take_options(&mut self, _server: &mut Server) -> Option<ConnOptions> {
        self.options.take()
    }

    fn on_data<S: Sink + ?Sized>(
        &mut self,
        server: &mut Server,
        now: Instant,
        input: &[u8],
        out: &mut S,
    ) -> Result<usize, AppError> {
        let mut used = 0;
        if let Role::Cookie { buf, have } = &mut self.role {
            let n = (COOKIE_SIZE - *have).min(input.len());
            buf[*have..*have + n].copy_from_slice(&input[..n]);
            *have += n;
            used = n;
            if *have < COOKIE_SIZE {
                return Ok(used);
            }
            let cookie = *buf;
            if let Err(e) = self.assign(server, cookie, now) {
                if let Role::Denied { out: staged } = &mut self.role {
                    staged.flush(out);
                }
                return Err(e);
            }
        }
        let rest = &input[used..];
        match self.role {
            Role::Cookie { .. } => Ok(used),
            Role::Control { .. } => Ok(used + self.control_data(server, now, rest, out)?),
            Role::Stream { slot, gen, index } => {
                if let Some(s) = server.session_mut(slot, gen) {
                    s.tick(now);
                    // Bytes count only while the test runs; before and after they are
                    // read and dropped, as the server's closed or unread sockets would.
                    if s.phase == Phase::Running {
                        if let Some(st) = s.streams.get_mut(index) {
                            if !st.sender {
                                st.bytes += rest.len() as u64;
                            }
                        }
                    }
                }
                Ok(input.len())
            }
            Role::Denied { .. } | Role::Gone => Ok(input.len()),
        }
    }

    fn poll_output<S: Sink + ?Sized>(
        &mut self,
        server: &mut Server,
        now: Instant,
        out: &mut S,
    ) -> Result<(), AppError> {
        match &mut self.role {
            Role::Denied { out: staged } => {
                staged.flush(out);
            }
            Role::Control { slot, gen, .. } => {
                if let Some(s) = server.session_mut(*slot, *gen) {
                    s.ctrl_out.flush(out);
                }
            }
            Role::Stream { slot, gen, index } => {
                let Some(s) = server.session_mut(*slot, *gen) else {
                    return Ok(());
                };
                s.tick(now);
                if s.phase != Phase::Running {
                    return Ok(());
                }
                let budget = s.send_budget();
                let (rate, start) = (s.params.rate, s.start);
                let Some(st) = s.streams.get_mut(*index).filter(|st| st.sender) else {
                    return Ok(());
                };
                let mut n = budget;
                if rate > 0 {
                    // Pacing per stream, as iperf's `-b` is (bits per second).
                    let elapsed = u128::from(now.saturating_since(start).as_nanos());
                    let allowed = (u128::from(rate) * elapsed / 8_000_000_000) as u64;
                    n = n.min(allowed.saturating_sub(st.bytes));
                }
                let w = write_fill(out, n);
                st.bytes += w;
                s.sent_total += w;
            }
            Role::Cookie { .. } | Role::Gone => {}
        }
        Ok(())
    }

    fn on_peer_closed(&mut self, server: &mut Server, now: Instant) {
        self.peer_closed = true;
        if let Role::Control { slot, gen, .. } = self.role {
            if let Some(s) = server.session_mut(slot, gen) {
                if s.phase != Phase::Done {
                    // "the client has unexpectedly closed the connection".
                    if s.phase == Phase::Running {
                        s.end = now;
                    }
                    s.phase = Phase::Done;
                    s.error = Some(AppError::Refused {
                        app: APP,
                        reason: "the client closed the control connection".into(),
                    });
                }
                server.wake_session(slot);
            }
        }
    }

    fn on_closed(&mut self, server: &mut Server, now: Instant) {
        if let Role::Control { slot, gen, .. } = self.role {
            if let Some(s) = server.session_mut(slot, gen) {
                if s.phase != Phase::Done {
                    if s.phase == Phase::Running {
                        s.end = now;
                    }
                    s.phase = Phase::Done;
                    s.error.get_or_insert(AppError::Refused {
                        app: APP,
                        reason: "the control connection closed".into(),
                    });
                }
            }
            server.remove(slot, gen);
        }
        self.role = Role::Gone;
    }

    fn output_pending(&self, server: &Server) -> bool {
        match &self.role {
            Role::Denied { out } => !out.is_empty(),
            Role::Control { slot, gen, .. } => server
                .session(*slot, *gen)
                .is_some_and(|s| !s.ctrl_out.is_empty()),
            Role::Stream { slot, gen, index } => server.session(*slot, *gen).is_some_and(|s| {
                s.phase == Phase::Running
                    && s.streams.get(*index).is_some_and(|st| st.sender)
                    && s.send_budget() > 0
                    && s.params.rate == 0
            }),
            Role::Cookie { .. } | Role::Gone => false,
        }
    }

    fn wants_close(&self, server: &Server) -> bool {
        match &self.role {
            Role::Cookie { .. } => self.peer_closed,
            Role::Denied { .. } | Role::Gone => true,
            Role::Control { slot, gen, .. } => {
                self.peer_closed
                    || server
                        .session(*slot, *gen)
                        .is_none_or(|s| s.phase == Phase::Done)
            }
            // iperf's server closes its stream sockets at TEST_END.
            Role::Stream { slot, gen, .. } => {
                self.peer_closed
                    || server
                        .session(*slot, *gen)
                        .is_none_or(|s| !matches!(s.phase, Phase::CreateStreams | Phase::Running))
            }
        }
    }

    fn next_deadline(&self, server: &Server) -> Option<Instant> {
        let Role::Stream { slot, gen, index } = self.role else {
            return None;
        };
        let s = server.session(slot, gen)?;
        let st = s.streams.get(index)?;
        if s.phase != Phase::Running || !st.sender || s.params.rate == 0 || s.send_budget() == 0 {
            return None;
        }
        // When the stream may send its next block.
        let next = u128::from(st.bytes + u64::from(s.params.len.clamp(1, 128 * 1024)));
        let ns = next * 8_000_000_000 / u128::from(s.params.rate);
        Some(s.start + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)))
    }

    fn take_woken(server: &mut Server) -> Option<u64> {
        server.woken.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::SendBuf;

    const COOKIE: &[u8; COOKIE_SIZE] = b"abcdefghijklmnopqrstuvwxyz234567abcd\0";
    const OTHER: &[u8; COOKIE_SIZE] = b"zzzzefghijklmnopqrstuvwxyz234567abcd\0";

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    /// One connection and everything it wrote.
    struct Conn {
        c: Iperf3,
        sink: SendBuf,
        wrote: Vec<u8>,
        error: Option<AppError>,
    }

    impl Conn {
        fn open(server: &mut Server, token: u64) -> Self {
            Self {
                c: Iperf3::accept(server, at(0), token),
                sink: SendBuf::new(1 << 20),
                wrote: Vec::new(),
                error: None,
            }
        }

        /// Feeds `bytes` in pieces of `piece`, draining output as a socket would.
        fn feed(&mut self, server: &mut Server, now: Instant, bytes: &[u8], piece: usize) {
            for chunk in bytes.chunks(piece.max(1)) {
                let mut rest = chunk;
                let mut rounds = 0;
                while !rest.is_empty() {
                    match self.c.on_data(server, now, rest, &mut self.sink) {
                        Ok(n) => rest = &rest[n..],
                        Err(e) => {
                            self.error.get_or_insert(e);
                            rest = &[];
                        }
                    }
                    self.drain(server, now);
                    rounds += 1;
                    assert!(rounds < 1000, "no progress");
                }
            }
            self.drain(server, now);
        }

        fn drain(&mut self, server: &mut Server, now: Instant) {
            if self.c.output_pending(server) && !self.c.is_sender_stream(server) {
                self.c
                    .poll_output(server, now, &mut self.sink)
                    .expect("poll_output");
            }
            self.wrote.extend(self.sink.take());
        }

        fn take(&mut self) -> Vec<u8> {
            std::mem::take(&mut self.wrote)
        }
    }

    impl Iperf3 {
        fn is_sender_stream(&self, server: &Server) -> bool {
            self.stream_sender(server) == Some(true)
        }
    }

    fn json_msg(v: &Value) -> Vec<u8> {
        let text = serde_json::to_vec(v).expect("json");
        let mut m = (text.len() as u32).to_be_bytes().to_vec();
        m.extend(text);
        m
    }

    fn params(extra: Value) -> Vec<u8> {
        let mut v = json!({"tcp": true, "omit": 0, "time": 2, "num": 0, "blockcount": 0,
            "parallel": 1, "len": 131072, "pacing_timer": 1000, "client_version": "3.12"});
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            for (k, x) in e {
                o.insert(k.clone(), x.clone());
            }
        }
        json_msg(&v)
    }

    /// Splits a results message the server sent: its JSON and the byte after it.
    fn split_results(b: &[u8]) -> (Value, &[u8]) {
        let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
        (
            serde_json::from_slice(&b[4..4 + len]).expect("server results"),
            &b[4 + len..],
        )
    }

    /// A test up to TEST_RUNNING: the control connection and `n` streams.
    fn start(server: &mut Server, extra: Value, n: usize, piece: usize) -> (Conn, Vec<Conn>) {
        let mut ctrl = Conn::open(server, 100);
        ctrl.feed(server, at(0), COOKIE, piece);
        assert_eq!(ctrl.take(), [state::PARAM_EXCHANGE]);
        ctrl.feed(server, at(1), &params(extra), piece);
        assert_eq!(ctrl.take(), [state::CREATE_STREAMS]);
        let mut streams = Vec::new();
        for i in 0..n {
            let mut s = Conn::open(server, 200 + i as u64);
            s.feed(server, at(2), COOKIE, piece);
            assert!(s.take().is_empty());
            assert_eq!(s.error, None);
            streams.push(s);
        }
        // The last stream woke the control connection.
        let mut woken = Vec::new();
        while let Some(t) = Iperf3::take_woken(server) {
            woken.push(t);
        }
        assert!(woken.contains(&100), "{woken:?}");
        ctrl.drain(server, at(2));
        assert_eq!(ctrl.take(), [state::TEST_START, state::TEST_RUNNING]);
        (ctrl, streams)
    }

    /// TEST_END, the results exchange and IPERF_DONE; returns the server's results.
    fn finish(server: &mut Server, ctrl: &mut Conn, client: Value, piece: usize) -> Value {
        ctrl.feed(server, at(2000), &[state::TEST_END], piece);
        assert_eq!(ctrl.take(), [state::EXCHANGE_RESULTS]);
        ctrl.feed(server, at(2001), &json_msg(&client), piece);
        let out = ctrl.take();
        let (results, tail) = split_results(&out);
        assert_eq!(tail, [state::DISPLAY_RESULTS]);
        ctrl.feed(server, at(2002), &[state::IPERF_DONE], piece);
        assert!(ctrl.c.wants_close(server));
        ctrl.c.on_closed(server, at(2003));
        results
    }

    fn client_results(ids_bytes: &[(u32, u64)]) -> Value {
        let streams: Vec<Value> = ids_bytes
            .iter()
            .map(|(id, b)| {
                json!({"id": id, "bytes": b, "retransmits": 0, "jitter": 0, "errors": 0,
                "packets": 0, "start_time": 0, "end_time": 2.0})
            })
            .collect();
        json!({"cpu_util_total": 1.0, "cpu_util_user": 0.5, "cpu_util_system": 0.5,
            "sender_has_retransmits": 1, "congestion_used": "cubic", "streams": streams})
    }

    #[test]
    fn forward_test_counts_received_bytes_at_any_piece_size() {
        for piece in [1, 2, 3, 5, 36, 37, 38, 1000] {
            let mut server = Server::default();
            let (mut ctrl, mut streams) = start(&mut server, json!({"parallel": 2}), 2, piece);
            assert!(!ctrl.c.wants_close(&server));
            streams[0].feed(&mut server, at(100), &[7; 5000], piece.max(100));
            streams[1].feed(&mut server, at(100), &[7; 3000], piece.max(100));
            for s in &streams {
                assert!(!s.c.output_pending(&server));
                assert!(!s.c.wants_close(&server));
            }
            let results = finish(
                &mut server,
                &mut ctrl,
                client_results(&[(1, 5000), (3, 3000)]),
                piece,
            );
            assert_eq!(results["sender_has_retransmits"], -1);
            assert_eq!(results["streams"][0]["id"], 1);
            assert_eq!(results["streams"][0]["bytes"], 5000);
            assert_eq!(results["streams"][1]["id"], 3);
            assert_eq!(results["streams"][1]["bytes"], 3000);
            assert_eq!(results["streams"][1]["retransmits"], -1);
            assert!(
                (results["streams"][0]["end_time"]
                    .as_f64()
                    .expect("end_time")
                    - 1.998)
                    .abs()
                    < 1e-9
            );
            for key in ["cpu_util_total", "cpu_util_user", "cpu_util_system"] {
                assert!(results[key].is_number(), "{key}");
            }
            for s in &streams {
                assert!(s.c.wants_close(&server), "streams close at the end");
            }
            let report = server.take_finished().expect("report");
            assert!(report.completed);
            assert_eq!(report.streams[0].client_bytes, Some(5000));
            assert_eq!(report.params.parallel, 2);
            assert_eq!(server.sessions(), 0);
        }
    }

    #[test]
    fn reverse_test_sends_until_test_end() {
        let mut server = Server::default();
        let (mut ctrl, mut streams) = start(
            &mut server,
            json!({"reverse": true, "window": 65536}),
            1,
            1000,
        );
        let s = &mut streams[0];
        assert_eq!(s.c.stream_sender(&server), Some(true));
        assert!(s.c.output_pending(&server));
        let mut sink = SendBuf::new(100_000);
        s.c.poll_output(&mut server, at(500), &mut sink)
            .expect("send");
        assert_eq!(sink.as_slice().len(), 100_000);
        sink.consume(40_000);
        s.c.poll_output(&mut server, at(600), &mut sink)
            .expect("send");
        assert_eq!(sink.as_slice().len(), 100_000);
        ctrl.feed(&mut server, at(2000), &[state::TEST_END], 10);
        assert!(s.c.wants_close(&server));
        assert!(!s.c.output_pending(&server));
        sink.consume(100_000);
        s.c.poll_output(&mut server, at(2001), &mut sink)
            .expect("after the end");
        assert!(sink.is_empty(), "nothing is sent after TEST_END");
        ctrl.take();
        ctrl.feed(
            &mut server,
            at(2001),
            &json_msg(&client_results(&[(1, 140_000)])),
            10,
        );
        let (results, _) = split_results(&ctrl.take());
        assert_eq!(results["streams"][0]["bytes"], 140_000);
        assert_eq!(results["sender_has_retransmits"], 0);
        assert_eq!(server.session(0, 1).map(|s| s.params.window), Some(65536));
    }

    /// `-w`, `-M` and `-N` reach each data stream as socket options for the driver, once;
    /// the control connection and a test without them ask for nothing.
    #[test]
    fn stream_socket_options_follow_the_parameters() {
        let mut server = Server::default();
        let (mut ctrl, mut streams) = start(
            &mut server,
            json!({"window": 65536, "MSS": 1000, "nodelay": true, "parallel": 2}),
            2,
            1000,
        );
        assert_eq!(ctrl.c.take_options(&mut server), None);
        for s in &mut streams {
            let o = s.c.take_options(&mut server);
            assert_eq!(
                o,
                Some(ConnOptions {
                    buffer: Some(65536),
                    mss: Some(1000),
                    no_delay: true
                })
            );
            assert_eq!(s.c.take_options(&mut server), None, "taken once");
        }
        let mut plain = Server::default();
        let (_c, mut streams) = start(&mut plain, json!({}), 1, 1000);
        assert_eq!(streams[0].c.take_options(&mut plain), None);
    }

    #[test]
    fn bidir_streams_receive_first_then_send_with_iperf_ids() {
        let mut server = Server::default();
        let (_ctrl, streams) = start(
            &mut server,
            json!({"bidirectional": true, "parallel": 2}),
            4,
            1000,
        );
        let roles: Vec<Option<bool>> = streams.iter().map(|s| s.c.stream_sender(&server)).collect();
        assert_eq!(roles, [Some(false), Some(false), Some(true), Some(true)]);
        let ids: Vec<u32> = server
            .session(0, 1)
            .expect("session")
            .streams
            .iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(ids, [1, 3, 4, 5]);
    }

    #[test]
    fn busy_server_and_surplus_streams_get_access_denied() {
        let mut server = Server::default();
        let (_ctrl, _streams) = start(&mut server, json!({}), 1, 1000);
        let mut other = Conn::open(&mut server, 300);
        other.feed(&mut server, at(3), OTHER, 100);
        assert_eq!(other.take(), [state::ACCESS_DENIED]);
        assert!(matches!(other.error, Some(AppError::Refused { .. })));
        assert!(other.c.wants_close(&server));
        let mut extra = Conn::open(&mut server, 301);
        extra.feed(&mut server, at(3), COOKIE, 100);
        assert_eq!(extra.take(), [state::ACCESS_DENIED]);
        // Two sessions when configured for two.
        let mut server = Server::new(Config {
            max_sessions: 2,
            ..Config::default()
        });
        let (_c, _s) = start(&mut server, json!({}), 1, 1000);
        let mut second = Conn::open(&mut server, 400);
        second.feed(&mut server, at(3), OTHER, 100);
        assert_eq!(second.take(), [state::PARAM_EXCHANGE]);
    }

    fn server_error_code(out: &[u8]) -> i32 {
        assert_eq!(out.len(), 9, "{out:?}");
        assert_eq!(out[0], state::SERVER_ERROR);
        i32::from_be_bytes([out[1], out[2], out[3], out[4]])
    }

    fn control_error(first: &[u8]) -> (i32, Conn, Server) {
        let mut server = Server::default();
        let mut ctrl = Conn::open(&mut server, 1);
        ctrl.feed(&mut server, at(0), COOKIE, 100);
        assert_eq!(ctrl.take(), [state::PARAM_EXCHANGE]);
        ctrl.feed(&mut server, at(0), first, 100);
        let code = server_error_code(&ctrl.take());
        assert!(ctrl.c.wants_close(&server));
        assert!(ctrl.error.is_some());
        (code, ctrl, server)
    }

    #[test]
    fn refused_parameters_get_server_error() {
        assert_eq!(
            control_error(&params(json!({"udp": true}))).0,
            ierr::IEUNIMP
        );
        assert_eq!(
            control_error(&params(json!({"parallel": 129}))).0,
            ierr::IENUMSTREAMS
        );
        assert_eq!(
            control_error(&params(json!({"parallel": 0}))).0,
            ierr::IENUMSTREAMS
        );
        let mut garbage = 5u32.to_be_bytes().to_vec();
        garbage.extend(b"{nope");
        assert_eq!(control_error(&garbage).0, ierr::IERECVPARAMS);
        assert_eq!(
            control_error(&json_msg(&json!([1, 2]))).0,
            ierr::IERECVPARAMS
        );
        let (code, mut ctrl, mut server) = control_error(&(1u32 << 30).to_be_bytes());
        assert_eq!(code, ierr::IERECVPARAMS);
        assert!(matches!(ctrl.error, Some(AppError::TooLarge { .. })));
        ctrl.c.on_closed(&mut server, at(1));
        assert!(server.take_finished().expect("report").error.is_some());
        assert_eq!(server.sessions(), 0);
    }

    #[test]
    fn unknown_control_byte_gets_server_error_and_ends_the_streams() {
        let mut server = Server::default();
        let (mut ctrl, streams) = start(&mut server, json!({}), 1, 1000);
        ctrl.feed(&mut server, at(5), &[42], 1);
        assert_eq!(server_error_code(&ctrl.take()), ierr::IEMESSAGE);
        assert!(streams[0].c.wants_close(&server));
    }

    #[test]
    fn bad_results_get_server_error() {
        let mut server = Server::default();
        let (mut ctrl, _streams) = start(&mut server, json!({}), 1, 1000);
        ctrl.feed(&mut server, at(5), &[state::TEST_END], 1);
        assert_eq!(ctrl.take(), [state::EXCHANGE_RESULTS]);
        ctrl.feed(&mut server, at(5), &json_msg(&json!({"streams": "no"})), 1);
        assert_eq!(server_error_code(&ctrl.take()), ierr::IERECVRESULTS);
    }

    #[test]
    fn malformed_cookie_closes() {
        let mut server = Server::default();
        let mut c = Conn::open(&mut server, 1);
        c.feed(&mut server, at(0), &[b'a'; COOKIE_SIZE], 10);
        assert!(matches!(c.error, Some(AppError::Malformed { .. })));
        assert!(c.c.wants_close(&server));
        assert_eq!(server.sessions(), 0);
    }

    #[test]
    fn client_terminate_and_lost_control_end_the_session() {
        let mut server = Server::default();
        let (mut ctrl, streams) = start(&mut server, json!({}), 1, 1000);
        ctrl.feed(&mut server, at(5), &[state::CLIENT_TERMINATE], 1);
        assert!(ctrl.c.wants_close(&server));
        assert!(streams[0].c.wants_close(&server));
        let mut server = Server::default();
        let (mut ctrl, streams) = start(&mut server, json!({}), 1, 1000);
        ctrl.c.on_peer_closed(&mut server, at(5));
        assert!(streams[0].c.wants_close(&server));
        ctrl.c.on_closed(&mut server, at(6));
        let r = server.take_finished().expect("report");
        assert!(!r.completed);
        assert!(r.error.is_some());
        // A new test may start now.
        let (_c, _s) = start(&mut server, json!({}), 1, 1000);
    }

    #[test]
    fn omitted_seconds_are_left_out() {
        let mut server = Server::default();
        let (mut ctrl, mut streams) = start(&mut server, json!({"omit": 1}), 1, 1000);
        streams[0].feed(&mut server, at(500), &[0; 1000], 1000);
        streams[0].feed(&mut server, at(1500), &[0; 700], 1000);
        ctrl.feed(&mut server, at(2500), &[state::TEST_END], 1);
        ctrl.take();
        ctrl.feed(
            &mut server,
            at(2501),
            &json_msg(&client_results(&[(1, 1700)])),
            1,
        );
        let (results, _) = split_results(&ctrl.take());
        assert_eq!(results["streams"][0]["bytes"], 700);
        assert!((results["streams"][0]["end_time"].as_f64().expect("end") - 1.0).abs() < 1e-9);
    }

    #[test]
    fn paced_reverse_stream_keeps_its_rate_and_says_when_to_resume() {
        let mut server = Server::default();
        // 8 Mbit/s = 1,000 bytes per ms; blocks of 1,000 bytes.
        let (_ctrl, mut streams) = start(
            &mut server,
            json!({"reverse": true, "bandwidth": 8_000_000, "len": 1000}),
            1,
            1000,
        );
        let s = &mut streams[0];
        assert!(
            !s.c.output_pending(&server),
            "paced streams run on their deadline"
        );
        let mut sink = SendBuf::new(1 << 20);
        // The test started at 2 ms: by 12 ms, 10 ms of rate.
        s.c.poll_output(&mut server, at(12), &mut sink)
            .expect("send");
        assert_eq!(sink.as_slice().len(), 10_000);
        assert_eq!(s.c.next_deadline(&server), Some(at(13)));
    }

    #[test]
    fn byte_limit_caps_reverse_data() {
        let mut server = Server::default();
        let (_ctrl, mut streams) =
            start(&mut server, json!({"reverse": true, "num": 5000}), 1, 1000);
        let mut sink = SendBuf::new(1 << 20);
        streams[0]
            .c
            .poll_output(&mut server, at(10), &mut sink)
            .expect("send");
        assert_eq!(sink.as_slice().len(), 5000);
        assert!(!streams[0].c.output_pending(&server));
    }
}
