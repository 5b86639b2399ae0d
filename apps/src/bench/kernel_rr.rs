//! `weir-bench kernel-rr`: the kernel's request/response on plain sockets, the anchor beside
//! `weir-bench rr` (scripts/lab/compare-kernel-rr.sh runs the two in alternating rounds).
//!
//! Both sides are one thread on epoll (level-triggered) with non-blocking sockets and
//! `TCP_NODELAY` on, as netperf's TCP_RR and sockperf set it, so a request leaves in one
//! segment as soon as it is written.
//!
//! - `serve`: an echo server when request and response have one size (every byte read is
//!   written back, so `nc` works against it), else a fixed-size answerer: per `request`
//!   bytes read it writes `response` bytes. Each connection's output is bounded; while it
//!   is full the server stops reading, so a client that never reads costs at most that.
//! - `client`: `conns` connections, each keeping `burst` transactions in flight (netperf
//!   TCP_RR's burst). Every response byte is checked ([`rr_bytes`](super::rr_bytes)), each
//!   transaction's latency goes into a [`Latency`] histogram, and the row is the RR-JSON
//!   row `weir-bench rr` prints, with `"stack":"kernel"` and the client's CPU per
//!   transaction (getrusage, user + system).
//!
//! The transaction bytes: byte `i` of transaction `k` on connection `c` is
//! `(7c + 13k + i) mod 251`, the request and the response alike, so byte `i` of a response
//! is the request's first byte plus `i` (mod 251). The answerer needs no connection number:
//! it continues the pattern from each request's first byte.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

use super::latency::Latency;
use super::rr_bytes::{fill, matches};

/// The two halves of the kernel's request/response benchmark.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// An echo server (request == response size) or a fixed-size answerer on plain sockets.
    Serve(ServeArgs),
    /// The RR client: connections with transactions in flight, every response checked.
    Client(ClientArgs),
}

/// `weir-bench kernel-rr serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The address and port to listen on, e.g. 198.18.24.2:7000.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Bytes per request (the answerer counts requests by this).
    #[arg(long, default_value_t = 64)]
    pub request: usize,
    /// Bytes per response. Equal to --request: an echo server.
    #[arg(long, default_value_t = 64)]
    pub response: usize,
    /// Stop after this many seconds (default: serve until killed; SIGINT or SIGTERM print
    /// a summary and exit).
    #[arg(long)]
    pub seconds: Option<f64>,
}

/// `weir-bench kernel-rr client`.
#[derive(Args, Debug)]
pub struct ClientArgs {
    /// The server's address and port.
    #[arg(long)]
    pub connect: SocketAddr,
    /// Client connections.
    #[arg(long, default_value_t = 1)]
    pub conns: usize,
    /// Transactions in flight per connection (netperf TCP_RR's burst).
    #[arg(long, default_value_t = 1)]
    pub burst: usize,
    /// Bytes per request.
    #[arg(long, default_value_t = 64)]
    pub request: usize,
    /// Bytes per response.
    #[arg(long, default_value_t = 64)]
    pub response: usize,
    /// Seconds of the measured phase.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Seconds of traffic before the measured phase (which also waits for every
    /// connection's first burst to be answered).
    #[arg(long, default_value_t = 0.5)]
    pub warmup: f64,
    /// Print the RR-JSON row on stdout (the human line then goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// Runs `weir-bench kernel-rr`.
pub fn run(cmd: Command) -> Result<()> {
    match cmd {
        Command::Serve(a) => serve(&a),
        Command::Client(a) => client(&a),
    }
}

/// Largest request or response accepted: far above any shape the lab runs, small enough
/// that a typo cannot ask for gigabytes.
const MAX_MESSAGE: usize = 1 << 20;
/// Connections and bursts accepted by the client (the issue's shapes: up to 4,096
/// connections, bursts up to 256).
const MAX_CONNS: usize = 16_384;
const MAX_BURST: usize = 4_096;
/// Connections the server holds at once; beyond, a new connection is accepted and closed.
const SERVE_MAX_CONNS: usize = 65_536;
/// An echo connection's output buffer: while it is full the server does not read.
const ECHO_BUF: usize = 16 * 1024;
/// Answers an answerer connection owes at most before it stops reading.
const MAX_PENDING: usize = 4_096;
/// The read and write scratch buffer (one per process).
const SCRATCH: usize = 64 * 1024;
/// Nothing answered for this long while transactions are in flight fails the run.
const STALL: Duration = Duration::from_secs(5);
/// The longest the client waits, after the deadline, for what is still in flight.
const DRAIN: Duration = Duration::from_secs(5);
/// The epoll token of the listening socket.
const LISTENER: u64 = u64::MAX;

fn check_sizes(request: usize, response: usize) -> Result<()> {
    for (name, v) in [("--request", request), ("--response", response)] {
        if v == 0 || v > MAX_MESSAGE {
            bail!("{name} {v}: must be 1 to {MAX_MESSAGE} bytes");
        }
    }
    Ok(())
}

// ---- epoll and getrusage: the only system calls std does not wrap ----

/// An epoll instance (level-triggered), closed on drop.
struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    fn new() -> Result<Epoll> {
        // SAFETY: epoll_create1 takes no pointers; a negative return is an error.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("epoll_create1");
        }
        // SAFETY: `fd` is a descriptor just created and owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call (the kernel
        // copies it); a bad `fd` is reported as an error, not undefined behaviour.
        let r = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    fn delete(&self, fd: RawFd) {
        // A descriptor about to be closed leaves the set anyway: an error changes nothing.
        let _ = self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0);
    }

    /// Waits up to `timeout` (rounded up to a millisecond) and returns the ready events.
    fn wait<'e>(
        &self,
        events: &'e mut [libc::epoll_event],
        timeout: Duration,
    ) -> Result<&'e [libc::epoll_event]> {
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
        let len = events.len().min(i32::MAX as usize) as libc::c_int;
        // SAFETY: `events` is writable for `len` entries; the kernel writes at most that.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), len, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                return Ok(&events[..0]);
            }
            return Err(e).context("epoll_wait");
        }
        Ok(&events[..n as usize])
    }
}

fn no_events(n: usize) -> Vec<libc::epoll_event> {
    vec![libc::epoll_event { events: 0, u64: 0 }; n]
}

/// CPU time (user + system) this process has used, in ns.
fn cpu_ns() -> u64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is writable and rusage-sized; getrusage(RUSAGE_SELF) only fills it.
    let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    if r != 0 {
        return 0;
    }
    // SAFETY: zeroed is a valid rusage (plain integers), and getrusage filled it.
    let ru = unsafe { ru.assume_init() };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

/// Raises this process's open-file limit to its hard limit (the soft one is often 1,024,
/// below the connection counts the benchmark runs); returns the limit now in force.
fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a writable rlimit; getrlimit only fills it.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    if lim.rlim_cur < lim.rlim_max {
        let want = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `want` is a valid rlimit read by the call; raising the soft limit up to
        // the hard one needs no privilege, and a refusal leaves the old limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
            return want.rlim_cur;
        }
    }
    lim.rlim_cur
}

// ---- the server ----

/// The fixed-size answerer's state on one connection: per `request` bytes read, the
/// `response` bytes of that transaction, continued from the request's first byte.
#[derive(Debug)]
struct Answerer {
    request: usize,
    response: usize,
    /// Bytes of the current request read so far.
    req_off: usize,
    /// The first byte of the current request.
    first: u8,
    /// The first bytes of the requests read in full and not yet answered in full.
    pending: VecDeque<u8>,
    /// Bytes of the head of `pending`'s response written so far.
    resp_off: usize,
}

impl Answerer {
    fn new(request: usize, response: usize) -> Answerer {
        Answerer {
            request,
            response,
            req_off: 0,
            first: 0,
            pending: VecDeque::new(),
            resp_off: 0,
        }
    }

    /// Bytes that may be read now without owing more than [`MAX_PENDING`] answers.
    fn room(&self) -> usize {
        (MAX_PENDING - self.pending.len()).saturating_mul(self.request) - self.req_off
    }

    /// Counts the requests in `data` (at most [`Answerer::room`] bytes).
    fn consume(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.req_off == 0 {
                self.first = data[0];
            }
            let take = data.len().min(self.request - self.req_off);
            self.req_off += take;
            data = &data[take..];
            if self.req_off == self.request {
                self.pending.push_back(self.first);
                self.req_off = 0;
            }
        }
    }

    /// Writes the next bytes owed into `out`; returns how many.
    fn produce(&self, out: &mut [u8]) -> usize {
        let mut n = 0;
        let mut off = self.resp_off;
        for &first in &self.pending {
            if n == out.len() {
                break;
            }
            let take = (out.len() - n).min(self.response - off);
            // Byte i of the response is the request's first byte plus i (mod 251): the
            // pattern of transaction 0 on connection 0 from offset `first + i`.
            fill(0, 0, usize::from(first) + off, &mut out[n..n + take]);
            n += take;
            off = 0;
        }
        n
    }

    /// Records that `n` bytes of [`Answerer::produce`]'s output were written.
    fn produced(&mut self, mut n: usize) {
        while n > 0 {
            let take = n.min(self.response - self.resp_off);
            self.resp_off += take;
            n -= take;
            if self.resp_off == self.response {
                self.pending.pop_front();
                self.resp_off = 0;
            }
        }
    }

    fn owes(&self) -> bool {
        !self.pending.is_empty()
    }
}

/// An echo connection's output: bytes read and not yet written back.
struct EchoBuf {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl EchoBuf {
    fn new() -> EchoBuf {
        EchoBuf {
            buf: vec![0; ECHO_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    fn room(&self) -> usize {
        self.buf.len() - (self.end - self.start)
    }

    /// The free tail, after moving what is held to the front if that makes room.
    fn free(&mut self) -> &mut [u8] {
        if self.end == self.buf.len() && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    fn wrote(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }
}

enum Mode {
    Echo(EchoBuf),
    Answer(Answerer),
}

struct ServeConn {
    stream: TcpStream,
    mode: Mode,
    /// The peer has closed its half: write what is owed, then close.
    eof: bool,
    /// The epoll events registered.
    interest: u32,
}

#[derive(Default)]
struct ServeTally {
    accepted: u64,
    refused: u64,
    resets: u64,
    bytes_in: u64,
    bytes_out: u64,
}

impl ServeConn {
    fn read_room(&self) -> usize {
        if self.eof {
            return 0;
        }
        match &self.mode {
            Mode::Echo(b) => b.room(),
            Mode::Answer(a) => a.room(),
        }
    }

    fn owes(&self) -> bool {
        match &self.mode {
            Mode::Echo(b) => b.end > b.start,
            Mode::Answer(a) => a.owes(),
        }
    }

    /// Reads and answers what the socket allows; `Ok(false)` when the connection is done.
    fn service(&mut self, scratch: &mut [u8], tally: &mut ServeTally) -> io::Result<bool> {
        if self.read_room() > 0 {
            let r = match &mut self.mode {
                Mode::Echo(b) => {
                    let r = self.stream.read(b.free());
                    if let Ok(n) = r {
                        b.end += n;
                    }
                    r
                }
                Mode::Answer(a) => {
                    let want = a.room().min(scratch.len());
                    let r = self.stream.read(&mut scratch[..want]);
                    if let Ok(n) = r {
                        a.consume(&scratch[..n]);
                    }
                    r
                }
            };
            match r {
                Ok(0) => self.eof = true,
                Ok(n) => tally.bytes_in += n as u64,
                Err(e) if would_block(&e) => {}
                Err(e) => return Err(e),
            }
        }
        while self.owes() {
            let r = match &mut self.mode {
                Mode::Echo(b) => {
                    let r = self.stream.write(&b.buf[b.start..b.end]);
                    if let Ok(n) = r {
                        b.wrote(n);
                    }
                    r
                }
                Mode::Answer(a) => {
                    let n = a.produce(scratch);
                    let r = self.stream.write(&scratch[..n]);
                    if let Ok(w) = r {
                        a.produced(w);
                    }
                    r
                }
            };
            match r {
                Ok(n) => tally.bytes_out += n as u64,
                Err(e) if would_block(&e) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(!self.eof || self.owes())
    }

    /// The events to wait for: input while there is room for it, output while owed.
    fn wanted(&self) -> u32 {
        let mut ev = 0;
        if self.read_room() > 0 {
            ev |= libc::EPOLLIN as u32;
        }
        if self.owes() {
            ev |= libc::EPOLLOUT as u32;
        }
        ev
    }
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
}

fn serve(a: &ServeArgs) -> Result<()> {
    check_sizes(a.request, a.response)?;
    let listener = TcpListener::bind(a.listen).with_context(|| {
        format!(
            "listening on {} (is the address on an interface here?)",
            a.listen
        )
    })?;
    listener.set_nonblocking(true)?;
    raise_fd_limit();
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .context("installing the SIGINT/SIGTERM handler")?;
    }
    let ep = Epoll::new()?;
    ep.add(listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER)
        .context("epoll_ctl(listener)")?;
    let echo = a.request == a.response;
    let deadline = a
        .seconds
        .map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    eprintln!(
        "kernel-rr serve: listening on {} ({})",
        a.listen,
        if echo {
            "echo".to_string()
        } else {
            format!("{} bytes answered per {} bytes read", a.response, a.request)
        }
    );
    let mut conns: Vec<Option<ServeConn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut tally = ServeTally::default();
    let mut scratch = vec![0u8; SCRATCH];
    let mut events = no_events(1024);
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let wait = match deadline {
            Some(d) if now >= d => break,
            Some(d) => (d - now).min(Duration::from_millis(100)),
            None => Duration::from_millis(100),
        };
        for ev in ep.wait(&mut events, wait)? {
            let (token, what) = (ev.u64, ev.events);
            if token == LISTENER {
                accept_all(&listener, &ep, echo, a, &mut conns, &mut free, &mut tally)?;
                continue;
            }
            let i = token as usize;
            let Some(c) = conns.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            let keep = if what & (libc::EPOLLERR as u32) != 0 {
                Err(c
                    .stream
                    .take_error()
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| io::Error::from(ErrorKind::ConnectionReset)))
            } else {
                c.service(&mut scratch, &mut tally)
            };
            match keep {
                Ok(true) => {
                    let want = c.wanted();
                    if want != c.interest {
                        ep.modify(c.stream.as_raw_fd(), want, token)
                            .context("epoll_ctl(connection)")?;
                        c.interest = want;
                    }
                }
                Ok(false) | Err(_) => {
                    if keep.is_err() {
                        tally.resets += 1;
                    }
                    ep.delete(c.stream.as_raw_fd());
                    conns[i] = None;
                    free.push(i);
                }
            }
        }
    }
    eprintln!(
        "kernel-rr serve: {} connections accepted ({} refused over {SERVE_MAX_CONNS}, {} ended by an error), {} bytes read, {} written",
        tally.accepted, tally.refused, tally.resets, tally.bytes_in, tally.bytes_out
    );
    Ok(())
}

fn accept_all(
    listener: &TcpListener,
    ep: &Epoll,
    echo: bool,
    a: &ServeArgs,
    conns: &mut Vec<Option<ServeConn>>,
    free: &mut Vec<usize>,
    tally: &mut ServeTally,
) -> Result<()> {
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if would_block(&e) => return Ok(()),
            // The peer gave up before accept (ECONNABORTED) and the like: not the
            // server's failure.
            Err(e) if e.kind() == ErrorKind::ConnectionAborted => continue,
            Err(e) => return Err(e).context("accept"),
        };
        if conns.len() - free.len() >= SERVE_MAX_CONNS {
            tally.refused += 1;
            continue;
        }
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        let i = free.pop().unwrap_or_else(|| {
            conns.push(None);
            conns.len() - 1
        });
        let interest = libc::EPOLLIN as u32;
        ep.add(stream.as_raw_fd(), interest, i as u64)
            .context("epoll_ctl(accepted connection)")?;
        conns[i] = Some(ServeConn {
            stream,
            mode: if echo {
                Mode::Echo(EchoBuf::new())
            } else {
                Mode::Answer(Answerer::new(a.request, a.response))
            },
            eof: false,
            interest,
        });
        tally.accepted += 1;
    }
}

// ---- the client ----

/// What the responses of a run showed, summed over connections.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    /// Transactions answered in full.
    completed: u64,
    /// Transactions whose response differed from the expected bytes.
    mismatches: u64,
}

/// One client connection's transactions: the requests handed to the socket, the responses
/// read, and the check of every response byte. No I/O: the caller moves the bytes.
#[derive(Debug)]
struct Txns {
    conn: u64,
    burst: u64,
    request: usize,
    response: usize,
    /// The request being written, and its bytes written so far.
    send_k: u64,
    send_off: usize,
    /// The response being read, and its bytes read so far.
    recv_k: u64,
    recv_off: usize,
    /// The response being read has differed from the expected bytes.
    bad: bool,
    /// When each transaction in flight was handed to the socket (ns), by `k % burst`.
    stamps: Vec<u64>,
    /// Response bytes that arrived for no request sent in full.
    extra_bytes: u64,
}

impl Txns {
    fn new(conn: u64, burst: usize, request: usize, response: usize) -> Txns {
        Txns {
            conn,
            burst: burst as u64,
            request,
            response,
            send_k: 0,
            send_off: 0,
            recv_k: 0,
            recv_off: 0,
            bad: false,
            stamps: vec![0; burst],
            extra_bytes: 0,
        }
    }

    /// Requests whose first byte has been handed to the socket.
    fn started(&self) -> u64 {
        self.send_k + u64::from(self.send_off > 0)
    }

    /// Transactions started and not answered in full.
    fn in_flight(&self) -> u64 {
        self.started().saturating_sub(self.recv_k)
    }

    /// Writes into `out` the request bytes to hand to the socket next: new requests while
    /// `issue` and fewer than `burst` are in flight, else only the rest of one begun.
    fn next_bytes(&self, issue: bool, out: &mut [u8]) -> usize {
        let end = if issue {
            self.recv_k + self.burst
        } else {
            self.started()
        };
        let (mut k, mut off, mut n) = (self.send_k, self.send_off, 0);
        while k < end && n < out.len() {
            let take = (out.len() - n).min(self.request - off);
            fill(self.conn, k, off, &mut out[n..n + take]);
            n += take;
            off += take;
            if off == self.request {
                k += 1;
                off = 0;
            }
        }
        n
    }

    /// Records that `n` bytes of [`Txns::next_bytes`]'s output were written at `now` (ns).
    fn wrote(&mut self, mut n: usize, now: u64) {
        while n > 0 {
            if self.send_off == 0 {
                self.stamps[(self.send_k % self.burst) as usize] = now;
            }
            let take = n.min(self.request - self.send_off);
            self.send_off += take;
            n -= take;
            if self.send_off == self.request {
                self.send_k += 1;
                self.send_off = 0;
            }
        }
    }

    /// Checks the response bytes in `data`, read at `now` (ns); each transaction answered
    /// in full is counted in `tally` and its latency recorded in `hist` if given.
    fn read(&mut self, mut data: &[u8], now: u64, tally: &mut Tally, hist: Option<&mut Latency>) {
        let mut hist = hist;
        while !data.is_empty() {
            if self.recv_k >= self.send_k {
                // No request is complete that this could answer: the server sent more
                // than was asked.
                self.extra_bytes += data.len() as u64;
                return;
            }
            let take = data.len().min(self.response - self.recv_off);
            if !self.bad && !matches(self.conn, self.recv_k, self.recv_off, &data[..take]) {
                self.bad = true;
            }
            self.recv_off += take;
            data = &data[take..];
            if self.recv_off == self.response {
                let sent = self.stamps[(self.recv_k % self.burst) as usize];
                if let Some(h) = hist.as_deref_mut() {
                    h.record(now.saturating_sub(sent));
                }
                tally.completed += 1;
                if self.bad {
                    tally.mismatches += 1;
                }
                self.bad = false;
                self.recv_k += 1;
                self.recv_off = 0;
            }
        }
    }
}

struct ClientConn {
    stream: Option<TcpStream>,
    txns: Txns,
    /// EPOLLOUT is registered (a write found the socket full).
    want_out: bool,
}

#[derive(PartialEq, Eq, Clone, Copy, Debug)]
enum Phase {
    Warmup,
    Measure,
    Drain,
}

/// The row of one client run.
#[derive(Debug)]
struct Row {
    transactions: u64,
    seconds: f64,
    lost: u64,
    duplicates: u64,
    mismatches: u64,
    resets: u64,
    cpu_ns: u64,
    hist: Latency,
}

fn client(a: &ClientArgs) -> Result<()> {
    check_sizes(a.request, a.response)?;
    if a.conns == 0 || a.conns > MAX_CONNS {
        bail!("--conns {}: must be 1 to {MAX_CONNS}", a.conns);
    }
    if a.burst == 0 || a.burst > MAX_BURST {
        bail!("--burst {}: must be 1 to {MAX_BURST}", a.burst);
    }
    let finite_at_least = |v: f64, min: f64| v.is_finite() && v >= min;
    if !finite_at_least(a.seconds, f64::MIN_POSITIVE) || !finite_at_least(a.warmup, 0.0) {
        bail!("--seconds must be above 0 and --warmup at least 0");
    }
    let row = run_client(a)?;
    let tps = row.transactions as f64 / row.seconds;
    let per_txn = |ns: u64| {
        if row.transactions == 0 {
            0.0
        } else {
            ns as f64 / row.transactions as f64
        }
    };
    let (p50, p99, p999) = (
        row.hist.quantile(0.5),
        row.hist.quantile(0.99),
        row.hist.quantile(0.999),
    );
    let human = format!(
        "kernel rr: {} conn(s) x burst {}, {}/{} bytes: {} transactions in {:.3} s = {:.0} tps; latency p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us; client CPU {:.0} ns/transaction; lost {}, duplicates {}, mismatches {}, resets {}",
        a.conns, a.burst, a.request, a.response, row.transactions, row.seconds, tps,
        p50 as f64 / 1e3, p99 as f64 / 1e3, p999 as f64 / 1e3, row.hist.max() as f64 / 1e3,
        per_txn(row.cpu_ns), row.lost, row.duplicates, row.mismatches, row.resets
    );
    if a.json {
        eprintln!("{human}");
        println!(
            "{}",
            serde_json::json!({
                "bench": "rr", "stack": "kernel", "conns": a.conns, "burst": a.burst,
                "request": a.request, "response": a.response,
                "transactions": row.transactions, "seconds": row.seconds, "tps": tps,
                "p50_ns": p50, "p99_ns": p99, "p999_ns": p999, "max_ns": row.hist.max(),
                "lost": row.lost, "duplicates": row.duplicates, "mismatches": row.mismatches,
                "resets": row.resets, "client_cpu_ns_per_txn": per_txn(row.cpu_ns),
            })
        );
    } else {
        println!("{human}");
    }
    let mut wrong = Vec::new();
    for (n, what) in [
        (
            row.resets,
            "connection(s) reset or closed by the server mid-run",
        ),
        (
            row.lost,
            "transaction(s) lost (sent, never answered after the drain)",
        ),
        (row.duplicates, "duplicate response(s)"),
        (row.mismatches, "mismatched response(s)"),
    ] {
        if n > 0 {
            wrong.push(format!("{n} {what}"));
        }
    }
    if row.transactions == 0 {
        wrong.push("no transaction completed in the measured phase".into());
    }
    if !wrong.is_empty() {
        bail!("the run is not clean: {}", wrong.join("; "));
    }
    Ok(())
}

fn connect(addr: SocketAddr, c: usize) -> Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, STALL).map_err(|e| {
        let hint = match e.kind() {
            ErrorKind::ConnectionRefused => {
                format!(": refused; is `weir-bench kernel-rr serve --listen {addr}` running?")
            }
            ErrorKind::TimedOut | ErrorKind::WouldBlock => format!(": no answer in {STALL:?}"),
            _ => String::new(),
        };
        anyhow::Error::new(e).context(format!("connection {c} to {addr}{hint}"))
    })?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// The client's I/O: the epoll set, the clock transactions are stamped by, the scratch
/// buffer and the connections lost mid-run.
struct Driver {
    ep: Epoll,
    base: Instant,
    scratch: Vec<u8>,
    resets: u64,
    lost_on_reset: u64,
    /// Connections not closed.
    open: usize,
}

impl Driver {
    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// Closes a connection that failed mid-run: its transactions in flight are lost.
    fn drop_conn(&mut self, conn: &mut ClientConn, c: usize, why: &str) {
        if let Some(s) = conn.stream.take() {
            self.ep.delete(s.as_raw_fd());
            let lost = conn.txns.in_flight();
            self.resets += 1;
            self.lost_on_reset += lost;
            self.open -= 1;
            eprintln!("kernel rr: connection {c}: {why} ({lost} transaction(s) in flight lost)");
            // Counted once: what it had in flight is in `lost_on_reset` now.
            conn.txns.recv_k = conn.txns.started();
        }
    }

    /// One read of what the socket holds, checked and counted.
    fn read_once(
        &mut self,
        conn: &mut ClientConn,
        c: usize,
        tally: &mut Tally,
        hist: Option<&mut Latency>,
    ) {
        let Some(s) = conn.stream.as_mut() else {
            return;
        };
        match s.read(&mut self.scratch) {
            Ok(0) => self.drop_conn(conn, c, "closed by the server"),
            Ok(n) => {
                let now = self.now_ns();
                conn.txns.read(&self.scratch[..n], now, tally, hist);
            }
            Err(e) if would_block(&e) => {}
            Err(e) => self.drop_conn(conn, c, &format!("reset ({e})")),
        }
    }

    /// Hands the socket what it takes of the requests due (see [`Txns::next_bytes`]) and
    /// waits for EPOLLOUT while the socket is full.
    fn pump(&mut self, conn: &mut ClientConn, c: usize, issue: bool) -> Result<()> {
        let mut full = false;
        while let Some(s) = conn.stream.as_mut() {
            let n = conn.txns.next_bytes(issue, &mut self.scratch);
            if n == 0 {
                break;
            }
            // The latency runs from the moment a request is handed to the socket.
            let now = self.now_ns();
            match s.write(&self.scratch[..n]) {
                Ok(w) => {
                    conn.txns.wrote(w, now);
                    if w < n {
                        full = true;
                        break;
                    }
                }
                Err(e) if would_block(&e) => {
                    full = true;
                    break;
                }
                Err(e) => {
                    self.drop_conn(conn, c, &format!("write failed ({e})"));
                    return Ok(());
                }
            }
        }
        let Some(s) = conn.stream.as_ref() else {
            return Ok(());
        };
        if full != conn.want_out {
            let ev = libc::EPOLLIN as u32 | if full { libc::EPOLLOUT as u32 } else { 0 };
            self.ep
                .modify(s.as_raw_fd(), ev, c as u64)
                .context("epoll_ctl(connection)")?;
            conn.want_out = full;
        }
        Ok(())
    }
}

fn run_client(a: &ClientArgs) -> Result<Row> {
    // Each connection is a descriptor, and a few more are open (epoll, stdio).
    let files = raise_fd_limit();
    if files < a.conns as u64 + 16 {
        bail!(
            "--conns {} needs {} open files, the limit here is {files}: raise `ulimit -n`",
            a.conns,
            a.conns + 16
        );
    }
    let ep = Epoll::new()?;
    let mut conns = Vec::with_capacity(a.conns);
    for c in 0..a.conns {
        let stream = connect(a.connect, c)?;
        ep.add(stream.as_raw_fd(), libc::EPOLLIN as u32, c as u64)
            .context("epoll_ctl(connection)")?;
        conns.push(ClientConn {
            stream: Some(stream),
            txns: Txns::new(c as u64, a.burst, a.request, a.response),
            want_out: false,
        });
    }
    let base = Instant::now();
    let mut d = Driver {
        ep,
        base,
        scratch: vec![0u8; SCRATCH],
        resets: 0,
        lost_on_reset: 0,
        open: conns.len(),
    };
    let mut events = no_events(1024);
    let mut tally = Tally::default();
    let mut hist = Latency::new();
    let warm_until = base + Duration::from_secs_f64(a.warmup);
    let measure_for = Duration::from_secs_f64(a.seconds);
    let mut phase = Phase::Warmup;
    // The measured phase: its start and end, the CPU used and transactions done by then.
    let (mut t0, mut t1) = (base, base);
    let (mut cpu0, mut cpu1, mut done0, mut done1) = (0, 0, 0, 0);
    let (mut last_answer, mut last_done) = (base, 0u64);
    for (c, conn) in conns.iter_mut().enumerate() {
        d.pump(conn, c, true)?;
    }
    loop {
        let now = Instant::now();
        if tally.completed != last_done {
            (last_answer, last_done) = (now, tally.completed);
        }
        // Sums over every connection only when a decision needs them: per wake-up they
        // would cost O(conns) per transaction at 4,096 connections.
        let in_flight =
            |conns: &[ClientConn]| -> u64 { conns.iter().map(|c| c.txns.in_flight()).sum() };
        match phase {
            Phase::Warmup => {
                if now >= warm_until
                    && conns
                        .iter()
                        .all(|c| c.stream.is_none() || c.txns.recv_k >= c.txns.burst)
                {
                    phase = Phase::Measure;
                    hist = Latency::new();
                    (t0, cpu0, done0) = (now, cpu_ns(), tally.completed);
                }
            }
            Phase::Measure => {
                if now >= t0 + measure_for {
                    phase = Phase::Drain;
                    (t1, cpu1, done1) = (now, cpu_ns(), tally.completed);
                }
            }
            Phase::Drain => {
                if now >= t1 + DRAIN || in_flight(&conns) == 0 {
                    break;
                }
            }
        }
        if d.open == 0 {
            // Every connection failed: the measured phase ends here (it is empty if it
            // had not begun).
            if phase != Phase::Drain {
                (t1, cpu1, done1) = (now, cpu_ns(), tally.completed);
                if phase == Phase::Warmup {
                    (t0, cpu0, done0) = (t1, cpu1, done1);
                }
            }
            break;
        }
        if phase != Phase::Drain && now.duration_since(last_answer) >= STALL {
            let n = in_flight(&conns);
            if n > 0 {
                bail!(
                    "no transaction answered for {STALL:?} by {} ({n} in flight on {} connection(s))",
                    a.connect,
                    d.open
                );
            }
        }
        let next = match phase {
            Phase::Warmup => warm_until.max(now + Duration::from_millis(1)),
            Phase::Measure => t0 + measure_for,
            Phase::Drain => t1 + DRAIN,
        };
        let wait = next
            .saturating_duration_since(now)
            .min(Duration::from_millis(100));
        let issue = phase != Phase::Drain;
        let n = d.ep.wait(&mut events, wait)?.len();
        for ev in &events[..n] {
            let (token, what) = (ev.u64, ev.events);
            let c = token as usize;
            let Some(conn) = conns.get_mut(c) else {
                continue;
            };
            if what & (libc::EPOLLIN | libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                let hist = (phase == Phase::Measure).then_some(&mut hist);
                d.read_once(conn, c, &mut tally, hist);
            }
            d.pump(conn, c, issue)?;
        }
    }
    let lost = d.lost_on_reset + conns.iter().map(|c| c.txns.in_flight()).sum::<u64>();
    let duplicates: u64 = conns
        .iter()
        .map(|c| c.txns.extra_bytes.div_ceil(a.response as u64))
        .sum();
    Ok(Row {
        transactions: done1 - done0,
        seconds: t1.duration_since(t0).as_secs_f64().max(1e-9),
        lost,
        duplicates,
        mismatches: tally.mismatches,
        resets: d.resets,
        cpu_ns: cpu1.saturating_sub(cpu0),
        hist,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The response bytes RR-JSON asks for: transaction `k` of connection `c`.
    fn expected(c: u64, k: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        fill(c, k, 0, &mut v);
        v
    }

    /// Moves every byte the answerer owes, `chunk` bytes per write.
    fn drain(a: &mut Answerer, chunk: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = vec![0; chunk];
        while a.owes() {
            let n = a.produce(&mut buf);
            assert!(n > 0);
            out.extend_from_slice(&buf[..n]);
            a.produced(n);
        }
        out
    }

    #[test]
    fn the_answerer_writes_each_transactions_response_whatever_the_connection() {
        // Requests of 64 bytes answered by 300: conn 37 (7 * 37 > 251) and a transaction
        // number past the period, read in chunks that split requests.
        for (c, first_k) in [(0u64, 0u64), (37, 0), (4095, 250)] {
            let mut a = Answerer::new(64, 300);
            let mut input = Vec::new();
            for k in first_k..first_k + 5 {
                input.extend(expected(c, k, 64));
            }
            for part in input.chunks(23) {
                assert!(part.len() <= a.room());
                a.consume(part);
            }
            let want: Vec<u8> = (first_k..first_k + 5)
                .flat_map(|k| expected(c, k, 300))
                .collect();
            assert_eq!(drain(&mut a, 97), want, "conn {c}");
        }
    }

    #[test]
    fn the_answerer_owes_no_answer_for_a_partial_request() {
        let mut a = Answerer::new(64, 8);
        a.consume(&expected(1, 2, 63));
        assert!(!a.owes());
        a.consume(&expected(1, 2, 64)[63..]);
        assert_eq!(drain(&mut a, 1000), expected(1, 2, 8));
    }

    #[test]
    fn the_answerer_stops_reading_when_it_owes_its_bound() {
        let mut a = Answerer::new(2, 1);
        assert_eq!(a.room(), MAX_PENDING * 2);
        a.consume(&vec![0; MAX_PENDING * 2 - 1]);
        assert_eq!(a.room(), 1);
        a.consume(&[0]);
        assert_eq!(a.room(), 0);
        a.produced(1);
        assert_eq!(a.room(), 2);
    }

    #[test]
    fn echo_buffer_is_bounded_and_compacts() {
        let mut b = EchoBuf::new();
        let n = b.free().len();
        assert_eq!(n, ECHO_BUF);
        b.end += n;
        assert_eq!(b.room(), 0);
        assert!(b.free().is_empty());
        b.wrote(100);
        assert_eq!(b.room(), 100);
        assert_eq!(b.free().len(), 100);
        b.wrote(ECHO_BUF - 100);
        assert_eq!((b.start, b.end), (0, 0));
    }

    #[test]
    fn the_client_keeps_burst_requests_in_flight() {
        let mut t = Txns::new(3, 4, 10, 6);
        let mut buf = [0u8; 1000];
        let n = t.next_bytes(true, &mut buf);
        assert_eq!(n, 40);
        let want: Vec<u8> = (0..4).flat_map(|k| expected(3, k, 10)).collect();
        assert_eq!(&buf[..n], &want[..]);
        // A partial write: two requests and a half, stamped at 100.
        t.wrote(25, 100);
        assert_eq!((t.started(), t.in_flight()), (3, 3));
        // Draining: only the rest of the begun request.
        assert_eq!(t.next_bytes(false, &mut buf), 5);
        assert_eq!(&buf[..5], &expected(3, 2, 10)[5..]);
        t.wrote(5, 200);
        assert_eq!(t.next_bytes(false, &mut buf), 0);
        // Issuing again: the fourth request only, still at most 4 in flight.
        assert_eq!(t.next_bytes(true, &mut buf), 10);
        t.wrote(10, 300);
        assert_eq!(t.next_bytes(true, &mut buf), 0);
        // Answers: each response completes one transaction with its latency.
        let mut tally = Tally::default();
        let mut hist = Latency::new();
        t.read(&expected(3, 0, 6)[..4], 1_000, &mut tally, Some(&mut hist));
        assert_eq!(tally.completed, 0);
        let rest: Vec<u8> = expected(3, 0, 6)[4..]
            .iter()
            .copied()
            .chain(expected(3, 1, 6))
            .collect();
        t.read(&rest, 1_100, &mut tally, Some(&mut hist));
        assert_eq!(
            tally,
            Tally {
                completed: 2,
                mismatches: 0
            }
        );
        assert_eq!(hist.count(), 2);
        assert_eq!(hist.max(), 1_000);
        assert_eq!(t.in_flight(), 2);
        assert_eq!(t.next_bytes(true, &mut buf), 20);
    }

    #[test]
    fn a_wrong_byte_is_one_mismatch_and_an_unasked_response_is_extra() {
        let mut t = Txns::new(0, 2, 4, 4);
        let mut buf = [0u8; 8];
        let n = t.next_bytes(true, &mut buf);
        t.wrote(n, 0);
        let mut tally = Tally::default();
        let mut r0 = expected(0, 0, 4);
        r0[1] ^= 1;
        r0[2] ^= 1;
        t.read(&r0, 10, &mut tally, None);
        t.read(&expected(0, 1, 4), 10, &mut tally, None);
        assert_eq!(
            tally,
            Tally {
                completed: 2,
                mismatches: 1
            }
        );
        assert_eq!(t.extra_bytes, 0);
        // Nothing asked: an answer now is more than was asked for.
        t.read(&expected(0, 2, 4), 10, &mut tally, None);
        assert_eq!(t.extra_bytes, 4);
        assert_eq!(tally.completed, 2);
    }

    #[test]
    fn client_and_answerer_agree_in_memory_through_any_chunking() {
        // Connection 300 with 16 in flight, 64-byte requests answered by 64 (the echo's
        // shape) and by 1000 bytes, the bytes moved in uneven pieces both ways.
        for (q, r) in [(64usize, 64usize), (64, 1000), (1000, 7)] {
            let mut t = Txns::new(300, 16, q, r);
            let mut a = Answerer::new(q, r);
            let mut tally = Tally::default();
            let mut buf = vec![0u8; 333];
            let mut out = vec![0u8; 211];
            for step in 0..2000u64 {
                let n = t.next_bytes(step < 1500, &mut buf[..(step as usize % 333) + 1]);
                t.wrote(n, step);
                let take = n.min(a.room());
                assert_eq!(take, n, "the answerer's bound is far above 16 requests");
                a.consume(&buf[..n]);
                let m = a.produce(&mut out[..(step as usize * 7 % 211) + 1]);
                a.produced(m);
                t.read(&out[..m], step, &mut tally, None);
            }
            assert_eq!(tally.mismatches, 0, "{q}/{r}");
            assert_eq!(t.extra_bytes, 0);
            assert_eq!(t.in_flight(), 0, "{q}/{r}: everything sent is answered");
            assert!(tally.completed > 16, "{q}/{r}: {}", tally.completed);
        }
    }
}
