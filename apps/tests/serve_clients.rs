//! weir-serve's protocol engines against the real clients (Debian's iperf3 3.12, sockperf
//! 3.7, dbench 4.0's tbench, wrk, curl) over the kernel's TCP: this checks the engines'
//! protocol before weir's TCP carries them.
//!
//! Test traffic goes only to hosts a test creates, with addresses from 198.18.0.0/15
//! (docs/architecture.md, "Running DPDK here"): each test runs itself again inside a
//! network namespace of its own ([`in_netns`]), where [`ADDR`] (198.18.0.1) is on the
//! namespace's loopback and both the engines and the clients use it. That needs root (as
//! the DPDK tests do); without it the test fails and says so.
//!
//! The harness runs one thread per connection over std sockets, the engines' shared state
//! (`App::Server`) behind a lock, and drives each engine as weir's core loop will: feed
//! received bytes to [`App::on_data`] and keep what it does not consume, drain its bounded
//! [`SendBuf`] into the socket, close once [`App::wants_close`]. (A single polling thread
//! was the first shape; on this 2-core machine shared with other work, a spinning poller
//! loses the CPU to the clients and sockperf's latencies went to milliseconds, so the
//! threads block in the kernel instead.)
//!
//! A client that is not installed fails its test with the command to install it; none is
//! skipped. tbench takes no port option: its test listens on 7003, tbench's fixed port.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant as StdInstant};

use apps::serve::echo::Echo;
use apps::serve::http::{self, Http};
use apps::serve::iperf3::{self, Iperf3};
use apps::serve::sockperf::{self, Sockperf};
use apps::serve::tbench::{Tbench, TBENCH_PORT};
use apps::serve::{App, AppError, SendBuf};

/// The address every engine listens on and every client connects to, on the loopback of
/// the test's own network namespace.
const ADDR: &str = "198.18.0.1";

/// Set in the environment of a test run inside its namespace.
const IN_NETNS: &str = "WEIR_SERVE_CLIENTS_NETNS";

/// Runs the test `name` inside a new network namespace with [`ADDR`] on its loopback,
/// and returns `false` once that run has passed (the caller returns); returns `true`
/// when already inside (the caller runs the test). The namespace is deleted after.
fn in_netns(name: &str) -> bool {
    if std::env::var_os(IN_NETNS).is_some() {
        return true;
    }
    let ns = format!("weir-serve-{}-{name}", std::process::id());
    let ip = |args: &[&str]| {
        let st = Command::new("ip")
            .args(args)
            .status()
            .unwrap_or_else(|e| panic!("cannot run ip {args:?} (iproute2, scripts/setup.sh): {e}"));
        assert!(
            st.success(),
            "ip {args:?} failed: these tests need root to make a network namespace"
        );
    };
    ip(&["netns", "add", &ns]);
    ip(&["-n", &ns, "link", "set", "lo", "up"]);
    ip(&["-n", &ns, "addr", "add", &format!("{ADDR}/32"), "dev", "lo"]);
    let exe = std::env::current_exe().expect("the test binary's path");
    let st = Command::new("ip")
        .args(["netns", "exec", &ns])
        .arg(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(IN_NETNS, "1")
        .status();
    ip(&["netns", "del", &ns]);
    let st = st.expect("running the test in its namespace");
    assert!(st.success(), "{name} failed inside its network namespace");
    false
}
use serde_json::Value;
use stack::time::Instant;

/// The engine's send buffer in the harness: what a connection's send buffer would take.
const SEND_BUF: usize = 256 * 1024;
/// How much the harness reads from a socket at once (a receive burst).
const RECV_BUF: usize = 64 * 1024;
/// How long a blocking read or write waits before the loop looks at the engine again
/// (a woken iperf3 control connection, a stop request).
const TICK: Duration = Duration::from_millis(1);
/// How long a closing connection waits for the peer's FIN before it is dropped.
const LINGER: Duration = Duration::from_secs(2);

/// What the server hands back when stopped.
struct Served<S> {
    server: S,
    accepted: usize,
    errors: Vec<String>,
}

/// A server running engine `A` on a listener, one thread per connection, the engines'
/// shared state behind a lock.
struct Running<S> {
    port: u16,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Served<S>>,
}

impl<S> Running<S> {
    fn stop(self) -> Served<S> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("server thread panicked")
    }
}

/// State shared by the connection threads.
struct Shared<S> {
    server: Mutex<S>,
    errors: Mutex<Vec<String>>,
    origin: StdInstant,
    stop: Arc<AtomicBool>,
}

impl<S> Shared<S> {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.origin.elapsed().as_nanos() as u64)
    }

    fn lock(&self) -> MutexGuard<'_, S> {
        self.server.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn error(&self, e: AppError) {
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(e.to_string());
    }
}

/// Serves `A` on 198.18.0.1:`port` (0: a free port).
fn serve<A: App + Send + 'static>(port: u16, server: A::Server) -> Running<A::Server>
where
    A::Server: Send + 'static,
{
    let listener = TcpListener::bind((ADDR, port))
        .unwrap_or_else(|e| panic!("cannot listen on 198.18.0.1:{port}: {e}"));
    let port = listener.local_addr().expect("local address").port();
    listener
        .set_nonblocking(true)
        .expect("non-blocking listener");
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(Shared {
        server: Mutex::new(server),
        errors: Mutex::new(Vec::new()),
        origin: StdInstant::now(),
        stop: Arc::clone(&stop),
    });
    let handle = std::thread::spawn(move || {
        let mut conns = Vec::new();
        while !shared.stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, _)) => {
                    let token = conns.len() as u64 + 1;
                    // The engine meets its connections in accept order, as on the stack
                    // (iperf3 gives its streams their roles in that order), not in the
                    // order their threads happen to start.
                    let app = A::accept(&mut shared.lock(), shared.now(), token);
                    let sh = Arc::clone(&shared);
                    conns.push(std::thread::spawn(move || {
                        connection::<A>(stream, &sh, app)
                    }));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(TICK),
                Err(e) => panic!("accept: {e}"),
            }
        }
        let accepted = conns.len();
        for c in conns {
            c.join().expect("connection thread panicked");
        }
        let Ok(shared) = Arc::try_unwrap(shared) else {
            panic!("connection threads still hold the server")
        };
        Served {
            server: shared
                .server
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner),
            accepted,
            errors: shared
                .errors
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner),
        }
    });
    Running { port, stop, handle }
}

/// Writes what the sink holds, waiting at most about one tick: `None` on a broken socket,
/// else whether anything went out.
fn flush_sink(stream: &mut TcpStream, sink: &mut SendBuf) -> Option<bool> {
    let mut wrote = false;
    while !sink.is_empty() {
        match stream.write(sink.as_slice()) {
            Ok(0) => return None,
            Ok(n) => {
                sink.consume(n);
                wrote = true;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(_) => return None,
        }
    }
    Some(wrote)
}

/// One connection, driven as the stack would drive it: received bytes go to the engine and
/// stay queued until it consumes them; its output goes out as the socket takes it.
fn connection<A: App>(mut stream: TcpStream, sh: &Shared<A::Server>, mut app: A) {
    stream.set_nodelay(true).expect("TCP_NODELAY");
    stream.set_read_timeout(Some(TICK)).expect("read timeout");
    stream.set_write_timeout(Some(TICK)).expect("write timeout");
    let mut sink = SendBuf::new(SEND_BUF);
    let mut inbuf = vec![0u8; RECV_BUF];
    let (mut lo, mut hi) = (0usize, 0usize);
    let (mut eof, mut told_peer_closed) = (false, false);
    let mut nonblocking = false;
    while !sh.stop.load(Ordering::Relaxed) {
        let pending = {
            let mut server = sh.lock();
            let now = sh.now();
            let due = app.next_deadline(&server).is_some_and(|d| d <= now);
            if app.output_pending(&server) || due {
                if let Err(e) = app.poll_output(&mut server, now, &mut sink) {
                    sh.error(e);
                }
            }
            app.output_pending(&server) || app.next_deadline(&server).is_some()
        };
        let Some(mut progress) = flush_sink(&mut stream, &mut sink) else {
            break;
        };
        // Reads block (up to a tick) only while the engine has nothing to send.
        let want_nonblocking = pending || !sink.is_empty();
        if want_nonblocking != nonblocking {
            stream
                .set_nonblocking(want_nonblocking)
                .expect("socket mode");
            nonblocking = want_nonblocking;
        }
        if lo == hi && !eof {
            lo = 0;
            hi = 0;
            match stream.read(&mut inbuf) {
                Ok(0) => eof = true,
                Ok(n) => {
                    hi = n;
                    progress = true;
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
        while lo < hi {
            let consumed = {
                let mut server = sh.lock();
                let now = sh.now();
                let r = app.on_data(&mut server, now, &inbuf[lo..hi], &mut sink);
                if app.output_pending(&server) {
                    if let Err(e) = app.poll_output(&mut server, now, &mut sink) {
                        sh.error(e);
                    }
                }
                match r {
                    Ok(n) => n,
                    Err(e) => {
                        sh.error(e);
                        hi - lo
                    }
                }
            };
            lo += consumed;
            match flush_sink(&mut stream, &mut sink) {
                Some(w) => progress |= w || consumed > 0,
                None => {
                    lo = hi;
                    eof = true;
                    break;
                }
            }
            if consumed == 0 {
                break;
            }
        }
        // A non-blocking round that moved nothing (the peer is not reading): wait a little
        // rather than spin; blocking rounds already waited in read.
        if nonblocking && !progress {
            std::thread::sleep(Duration::from_micros(50));
        }
        if eof && lo == hi && !told_peer_closed {
            told_peer_closed = true;
            app.on_peer_closed(&mut sh.lock(), sh.now());
        }
        let close = {
            let server = sh.lock();
            app.wants_close(&server) && !app.output_pending(&server)
        };
        if close && sink.is_empty() {
            let _ = stream.shutdown(Shutdown::Write);
            // Read and drop until the peer's FIN, so no RST cuts what was sent.
            let _ = stream.set_nonblocking(false);
            let since = StdInstant::now();
            let mut scratch = [0u8; 4096];
            while !eof && since.elapsed() < LINGER && !sh.stop.load(Ordering::Relaxed) {
                match stream.read(&mut scratch) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(_) => break,
                }
            }
            break;
        }
    }
    app.on_closed(&mut sh.lock(), sh.now());
}

/// A finished client run.
struct ClientRun {
    stdout: String,
    stderr: String,
}

/// Runs a client to its end within `limit`; fails the test if it is missing, times out or
/// exits non-zero.
fn run_client(bin: &str, package: &str, args: &[&str], limit: Duration) -> ClientRun {
    let dir = scratch_dir(bin);
    let out_path = dir.join("stdout");
    let err_path = dir.join("stderr");
    let out = std::fs::File::create(&out_path).expect("stdout file");
    let err = std::fs::File::create(&err_path).expect("stderr file");
    let mut child = match Command::new(bin)
        .args(args)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            panic!("{bin} is not installed; this test needs it: apt-get install -y {package}")
        }
        Err(e) => panic!("cannot start {bin}: {e}"),
    };
    let started = StdInstant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for the client") {
            break st;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let so = std::fs::read_to_string(&out_path).unwrap_or_default();
            let se = std::fs::read_to_string(&err_path).unwrap_or_default();
            panic!("{bin} {args:?} did not finish within {limit:?}\nstdout:\n{so}\nstderr:\n{se}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        status.success(),
        "{bin} {args:?} failed ({status})\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    ClientRun { stdout, stderr }
}

fn scratch_dir(tag: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("weir-serve-{tag}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// The first number after `key` in `text`.
fn number_after(text: &str, key: &str) -> Option<f64> {
    let rest = &text[text.find(key)? + key.len()..];
    let start = rest.find(|c: char| c.is_ascii_digit())?;
    let rest = &rest[start..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

#[test]
fn echo_client_gets_every_byte_back() {
    if !in_netns("echo_client_gets_every_byte_back") {
        return;
    }
    let srv = serve::<Echo>(0, ());
    let data: Vec<u8> = (0..4 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let mut conn = TcpStream::connect((ADDR, srv.port)).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut writer = conn.try_clone().expect("clone");
    let sent = data.clone();
    let w = std::thread::spawn(move || {
        writer.write_all(&sent).expect("write");
        writer.shutdown(Shutdown::Write).expect("shutdown");
    });
    let mut back = Vec::new();
    conn.read_to_end(&mut back).expect("read back");
    w.join().expect("writer");
    let served = srv.stop();
    assert_eq!(back.len(), data.len());
    assert!(back == data, "echoed bytes differ");
    assert!(served.errors.is_empty(), "{:?}", served.errors);
}

fn sockperf_run(mode: &str, extra: &[&str]) -> ClientRun {
    let srv = serve::<Sockperf>(0, sockperf::Config::default());
    let port = srv.port.to_string();
    let mut args = vec![mode, "--tcp", "-i", ADDR, "-p", &port, "-t", "2"];
    args.extend_from_slice(extra);
    let run = run_client("sockperf", "sockperf", &args, Duration::from_secs(15));
    let served = srv.stop();
    assert!(served.errors.is_empty(), "{:?}", served.errors);
    run
}

#[test]
fn sockperf_ping_pong() {
    if !in_netns("sockperf_ping_pong") {
        return;
    }
    let run = sockperf_run("ping-pong", &[]);
    let latency = number_after(&run.stdout, "Summary: Latency is").unwrap_or_else(|| {
        panic!(
            "no latency in sockperf's output:\n{}{}",
            run.stdout, run.stderr
        )
    });
    assert!(latency > 0.0);
    assert!(!run.stdout.contains("ERROR"), "{}", run.stdout);
    println!("sockperf ping-pong: latency {latency} usec");
}

#[test]
fn sockperf_under_load() {
    if !in_netns("sockperf_under_load") {
        return;
    }
    let run = sockperf_run("under-load", &["--mps", "10000"]);
    let latency = number_after(&run.stdout, "Summary: Latency is").unwrap_or_else(|| {
        panic!(
            "no latency in sockperf's output:\n{}{}",
            run.stdout, run.stderr
        )
    });
    println!("sockperf under-load: latency {latency} usec");
}

#[test]
fn sockperf_throughput() {
    if !in_netns("sockperf_throughput") {
        return;
    }
    let run = sockperf_run("throughput", &["-m", "1472"]);
    let rate = number_after(&run.stdout, "Summary: Message Rate is").unwrap_or_else(|| {
        panic!(
            "no message rate in sockperf's output:\n{}{}",
            run.stdout, run.stderr
        )
    });
    assert!(rate > 0.0);
    println!("sockperf throughput: {rate} msg/s");
}

/// Runs `iperf3 -c` with `args` and `-J` against the engine; checks both sides' counts.
fn iperf3_run(args: &[&str]) -> (Value, iperf3::SessionReport) {
    let srv = serve::<Iperf3>(0, iperf3::Server::default());
    let port = srv.port.to_string();
    let mut all = vec!["-c", ADDR, "-p", &port, "-t", "2", "-J"];
    all.extend_from_slice(args);
    let run = run_client("iperf3", "iperf3", &all, Duration::from_secs(15));
    let mut served = srv.stop();
    let json: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("iperf3 -J output is not JSON ({e}):\n{}", run.stdout));
    assert!(
        json.get("error").is_none(),
        "iperf3 reports an error: {}",
        json["error"]
    );
    let report = served
        .server
        .take_finished()
        .expect("the server finished a session");
    assert!(report.completed, "{report:?}");
    assert_eq!(report.error, None);
    assert!(served.errors.is_empty(), "{:?}", served.errors);
    // Every stream the client reported is one the server counted, and the client's
    // "received" figures for the server's receiving streams are the server's own.
    let streams = json["end"]["streams"].as_array().expect("end.streams");
    assert_eq!(streams.len(), report.streams.len(), "one entry per stream");
    for s in &report.streams {
        assert!(
            s.client_bytes.is_some_and(|b| b > 0),
            "client reported stream {}: {s:?}",
            s.id
        );
        assert!(s.bytes > 0, "server counted nothing on stream {}", s.id);
    }
    println!(
        "iperf3 {args:?}: sent {} B, received {} B, server counted {:?}",
        json["end"]["sum_sent"]["bytes"],
        json["end"]["sum_received"]["bytes"],
        report
            .streams
            .iter()
            .map(|s| (s.id, s.sender, s.bytes))
            .collect::<Vec<_>>()
    );
    (json, report)
}

fn sum_bytes(json: &Value, key: &str) -> u64 {
    json["end"][key]["bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("end.{key}.bytes in {}", json["end"]))
}

#[test]
fn iperf3_forward() {
    if !in_netns("iperf3_forward") {
        return;
    }
    let (json, report) = iperf3_run(&[]);
    let received = sum_bytes(&json, "sum_received");
    let ours: u64 = report.streams.iter().map(|s| s.bytes).sum();
    assert_eq!(
        received, ours,
        "the client shows the server's count as received"
    );
    assert!(received as f64 >= 0.9 * sum_bytes(&json, "sum_sent") as f64);
    assert!(json["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .is_some_and(|b| b > 0.0));
}

#[test]
fn iperf3_reverse() {
    if !in_netns("iperf3_reverse") {
        return;
    }
    let (json, report) = iperf3_run(&["-R"]);
    let sent: u64 = report.streams.iter().map(|s| s.bytes).sum();
    assert!(report.streams.iter().all(|s| s.sender));
    assert_eq!(
        sum_bytes(&json, "sum_sent"),
        sent,
        "the client shows the server's count as sent"
    );
    assert!(sum_bytes(&json, "sum_received") > 0);
}

#[test]
fn iperf3_reverse_with_64k_window() {
    if !in_netns("iperf3_reverse_with_64k_window") {
        return;
    }
    // Field report 002's command.
    let (json, report) = iperf3_run(&["-R", "-w", "64K"]);
    assert_eq!(report.params.window, 64 * 1024);
    assert!(sum_bytes(&json, "sum_received") > 0);
}

#[test]
fn iperf3_bidir() {
    if !in_netns("iperf3_bidir") {
        return;
    }
    let (json, report) = iperf3_run(&["--bidir"]);
    assert_eq!(report.streams.len(), 2);
    assert!(!report.streams[0].sender && report.streams[1].sender);
    assert!(sum_bytes(&json, "sum_received") > 0);
    assert!(sum_bytes(&json, "sum_received_bidir_reverse") > 0);
}

#[test]
fn iperf3_four_streams() {
    if !in_netns("iperf3_four_streams") {
        return;
    }
    let (json, report) = iperf3_run(&["-P", "4"]);
    let ids: Vec<u32> = report.streams.iter().map(|s| s.id).collect();
    assert_eq!(ids, [1, 3, 4, 5]);
    assert_eq!(
        sum_bytes(&json, "sum_received"),
        report.streams.iter().map(|s| s.bytes).sum::<u64>()
    );
}

#[test]
fn tbench_two_clients() {
    if !in_netns("tbench_two_clients") {
        return;
    }
    // tbench connects to port 7003 only (TCP_PORT in dbench.h).
    let srv = serve::<Tbench>(TBENCH_PORT, ());
    let run = run_client(
        "tbench",
        "dbench",
        &["-t", "3", "2", ADDR],
        Duration::from_secs(20),
    );
    let served = srv.stop();
    let mbs = number_after(&run.stdout, "Throughput").unwrap_or_else(|| {
        panic!(
            "no throughput in tbench's output:\n{}{}",
            run.stdout, run.stderr
        )
    });
    assert!(mbs > 0.0);
    println!("tbench 2: {mbs} MB/s");
    assert!(!run.stdout.contains("lost sync"), "{}", run.stdout);
    assert!(served.accepted >= 2);
    assert!(served.errors.is_empty(), "{:?}", served.errors);
}

#[test]
fn wrk_keep_alive_load() {
    if !in_netns("wrk_keep_alive_load") {
        return;
    }
    let srv = serve::<Http>(
        0,
        http::Config {
            body_len: 1024,
            ..http::Config::default()
        },
    );
    let url = format!("http://198.18.0.1:{}/", srv.port);
    let run = run_client(
        "wrk",
        "wrk",
        &["-t", "2", "-c", "8", "-d", "2", &url],
        Duration::from_secs(15),
    );
    let served = srv.stop();
    let rps = number_after(&run.stdout, "Requests/sec:").unwrap_or_else(|| {
        panic!(
            "no Requests/sec in wrk's output:\n{}{}",
            run.stdout, run.stderr
        )
    });
    assert!(rps > 0.0);
    assert!(!run.stdout.contains("Non-2xx"), "{}", run.stdout);
    assert!(!run.stdout.contains("Socket errors"), "{}", run.stdout);
    // wrk opens one connection more than -c before the load (its address check); with
    // keep-alive each of them carries many requests.
    let requests = run
        .stdout
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| number_after(l, ""))
        .unwrap_or_else(|| panic!("no request count in wrk's output:\n{}", run.stdout));
    println!(
        "wrk: {rps} requests/s, {requests} requests on {} connections",
        served.accepted
    );
    assert!(
        served.accepted <= 9,
        "keep-alive: {} connections for 8",
        served.accepted
    );
    assert!(requests > 100.0 * served.accepted as f64, "{}", run.stdout);
    assert!(served.errors.is_empty(), "{:?}", served.errors);
}

/// The 200 body as the engine documents it, generated independently.
fn expected_body(len: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(len + 16);
    let mut off = 0usize;
    while b.len() < len {
        b.extend(format!("{off:015x}\n").bytes());
        off += 16;
    }
    b.truncate(len);
    b
}

#[test]
fn curl_fetches_ten_megabytes_byte_exact() {
    if !in_netns("curl_fetches_ten_megabytes_byte_exact") {
        return;
    }
    const LEN: usize = 10 * 1024 * 1024;
    let srv = serve::<Http>(
        0,
        http::Config {
            body_len: LEN as u64,
            ..http::Config::default()
        },
    );
    let url = format!("http://198.18.0.1:{}/", srv.port);
    let dir = scratch_dir("curl-body");
    let file = dir.join("body");
    let file_arg = file.to_str().expect("utf-8 path");
    run_client(
        "curl",
        "curl",
        &["-sS", "--fail", "-o", file_arg, &url],
        Duration::from_secs(15),
    );
    let got = std::fs::read(&file).expect("curl's file");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(got.len(), LEN);
    assert!(
        got == expected_body(LEN),
        "the body differs from the pattern"
    );
    // HEAD: the same length, no body.
    let head = run_client(
        "curl",
        "curl",
        &["-sS", "-I", &url],
        Duration::from_secs(10),
    );
    assert!(
        head.stdout.starts_with("HTTP/1.1 200 OK"),
        "{}",
        head.stdout
    );
    assert!(
        head.stdout.contains(&format!("Content-Length: {LEN}")),
        "{}",
        head.stdout
    );
    served_clean(srv);
}

#[test]
fn curl_keep_alive_404_and_close() {
    if !in_netns("curl_keep_alive_404_and_close") {
        return;
    }
    let srv = serve::<Http>(
        0,
        http::Config {
            body_len: 100,
            ..http::Config::default()
        },
    );
    let root = format!("http://198.18.0.1:{}/", srv.port);
    let missing = format!("http://198.18.0.1:{}/missing", srv.port);
    // Two requests on one connection, the second a 404.
    let run = run_client(
        "curl",
        "curl",
        &[
            "-sS",
            "-v",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}\n",
            &root,
            &missing,
        ],
        Duration::from_secs(10),
    );
    assert_eq!(
        run.stdout.lines().collect::<Vec<_>>(),
        ["200", "404"],
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("Re-using existing connection"),
        "keep-alive:\n{}",
        run.stderr
    );
    // HTTP/1.0 without keep-alive, and Connection: close: the server closes.
    for args in [
        &["-sS", "-v", "--http1.0", "-o", "/dev/null"][..],
        &["-sS", "-v", "-H", "Connection: close", "-o", "/dev/null"],
    ] {
        let mut all = args.to_vec();
        all.push(&root);
        let run = run_client("curl", "curl", &all, Duration::from_secs(10));
        assert!(run.stderr.contains("Connection: close"), "{}", run.stderr);
    }
    let served = srv.stop();
    assert_eq!(served.accepted, 3);
    assert!(served.errors.is_empty(), "{:?}", served.errors);
}

fn served_clean<S>(srv: Running<S>) {
    let served = srv.stop();
    assert!(served.errors.is_empty(), "{:?}", served.errors);
}
