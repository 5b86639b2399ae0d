//! `--app sink --write-dir DIR`: each connection's bytes go to a file of its own in DIR,
//! written by a thread so that the core never waits for the disk.
//!
//! Read first: [`WriteDir`] (the core's side), then `writer` (the thread's loop); the sink
//! engine that calls them is [`super::discard`].
//!
//! # The path of a byte
//!
//! The sink engine copies what `App::on_data` hands it into chunks of [`CHUNK`] bytes taken
//! from a free list of [`CHUNKS`] chunks (allocated once, at start-up) and pushes each onto
//! the writer's work queue; the writer writes it to the connection's file and puts the
//! chunk back on the free list. Nothing is allocated per packet; per connection, the file's
//! name and its status (an `Arc` of two flags).
//!
//! # Bounds
//!
//! - Bytes between the core and the disk: at most `CHUNKS * CHUNK` (16 MiB). A chunk
//!   carries the bytes of one `App::on_data` call (the glue hands over what arrived since
//!   the last pump, up to 64 KiB), so none is held back waiting to fill; with small reads
//!   fewer bytes are in flight, never more.
//! - Files open at once: at most [`MAX_FILES`] (under the usual 1024 descriptors); a
//!   connection beyond them waits for a slot, its bytes in its receive queue.
//! - The work queue holds `CHUNKS + 2 * MAX_FILES` messages, so a push always fits: every
//!   data message holds a chunk of its own, and each file has one open and one close
//!   message, sent while it holds one of the `MAX_FILES` slots (the writer frees the slot
//!   after the close). A push that does not fit anyway (a bug) waits in the core's own
//!   list, in order, and is retried; it is never dropped.
//! - The writer's wake-ups (a file failed, a file finished): at most two per file, on a
//!   queue of `2 * MAX_FILES + 64`; the core empties it every round, and the writer waits
//!   (naps) for room rather than drop one.
//!
//! # Backpressure: the window closes, no byte is dropped
//!
//! With no free chunk (the writer is behind) or no file slot, the engine consumes fewer
//! bytes than it was offered, maybe none; the glue leaves the rest in the receive queue and
//! the advertised window closes. The engine puts its connection on a waiting list;
//! [`WriteDir::take_woken`] (the engine's `App::take_woken`, which the glue calls after
//! every event and at the end of every round of the core loop) returns it once a chunk (or
//! a slot) is free, and the glue pumps it again. The core polls a queue's length, so no
//! timer and no system call is involved; a connection waits at most one round of the core
//! loop after room appears.
//!
//! # Errors
//!
//! A failed open or write (a full disk's `ENOSPC`, `EIO`, a directory removed under us) is
//! logged by the writer with the file's name and the error's text, once per file (the first
//! [`LOGGED_ERRORS`] files; all are counted), the file is kept as far as it was written and
//! reported incomplete, the rest of its chunks are returned unwritten, and the engine asks
//! the glue to reset the connection (`App::wants_reset`), so the sender sees its transfer
//! fail. Reset rather than stop the run: a failure is often one file's (a removed entry, a
//! quota), and the other connections keep going; on a full disk each connection fails in
//! turn, and each sender is told. Files are not fsynced: a file reported complete was
//! handed whole to the kernel, which a crash of the machine (not of weir-serve) can still
//! lose.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use crossbeam_queue::ArrayQueue;
use serde_json::{json, Value};
use stack::flow::FlowKey;

/// Bytes per chunk: as much as one `App::on_data` call hands over (the glue's stage).
pub const CHUNK: usize = super::glue::STAGE;

/// Chunks in the free list: `CHUNKS * CHUNK` = 16 MiB between the core and the disk, a
/// few hundred milliseconds of a disk's writes at the link rates net_tap reaches.
pub const CHUNKS: usize = 256;

/// Files open at once, below the usual limit of 1024 descriptors with DPDK's own.
pub const MAX_FILES: usize = 512;

/// Files whose error is logged one by one (the rest are counted only).
pub const LOGGED_ERRORS: u64 = 16;

/// Most file records kept for the summary (as many as weir-sink keeps digests).
const MAX_RECORDS: usize = 100_000;

/// How long the writer sleeps when its queue is empty: short against what the free list
/// holds (16 MiB), so a nap never leaves the core without chunks.
const IDLE_NAP: Duration = Duration::from_micros(100);

/// How a file is opened: `create_new` in production (never overwrite), anything in tests
/// (`/dev/full` to fail every write).
pub type Opener = fn(&Path) -> io::Result<File>;

/// Creates the file, refusing one that exists.
pub(crate) fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// What the writer says about one file, read by the core.
#[derive(Debug, Default)]
struct Status {
    /// An open or a write failed: the connection is to be reset.
    failed: AtomicBool,
    /// The writer has closed the file (after the connection's close message).
    finished: AtomicBool,
}

/// The core's handle on one connection's file.
#[derive(Debug, Clone)]
pub struct FileHandle {
    id: u64,
    status: Arc<Status>,
}

impl FileHandle {
    /// Whether an open or a write of this file failed.
    pub fn failed(&self) -> bool {
        self.status.failed.load(Ordering::Acquire)
    }

    /// Whether the writer has written every chunk handed to it and closed the file.
    pub fn finished(&self) -> bool {
        self.status.finished.load(Ordering::Acquire)
    }
}

/// A message from the core to the writer.
enum Msg {
    Open {
        id: u64,
        token: u64,
        path: PathBuf,
        status: Arc<Status>,
    },
    Data {
        id: u64,
        chunk: Box<[u8]>,
        len: usize,
    },
    Close {
        id: u64,
        /// The peer's FIN came: every byte of the connection was handed over.
        fin: bool,
        /// How the connection ended (`closed`, `reset`, `open`).
        end: &'static str,
        /// Bytes the core handed over for this file.
        handed: u64,
    },
}

/// One file as the summary and `--stats-json` report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// The file's path.
    pub path: String,
    /// Bytes the connection handed to the writer.
    pub received: u64,
    /// Bytes written to the file: its size.
    pub written: u64,
    /// How the connection ended: `closed` (the peer's FIN came), `reset`, or `open` when
    /// weir stopped first.
    pub end: &'static str,
    /// The first error writing it (the file's name is in `path`), as the OS said it.
    pub error: Option<String>,
    /// Every byte before the peer's FIN is in the file.
    pub complete: bool,
}

impl FileRecord {
    /// The record as JSON (the `files` array of `--stats-json`).
    pub fn json(&self) -> Value {
        json!({
            "path": self.path, "received": self.received, "written": self.written,
            "end": self.end, "error": self.error, "complete": self.complete,
        })
    }
}

/// The writer's totals, read at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteTotals {
    /// Files closed by the writer.
    pub files: u64,
    /// Of those, files not complete (reset, open at the stop, or an error).
    pub incomplete: u64,
    /// Files whose open or write failed.
    pub errors: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Times a connection was refused room (no free chunk) or a file (no slot).
    pub stalls: u64,
}

/// What the core and the writer share.
struct Shared {
    free: ArrayQueue<Box<[u8]>>,
    work: ArrayQueue<Msg>,
    /// Tokens of connections whose file failed or finished.
    done: ArrayQueue<u64>,
    /// Files between their open message and the writer's close.
    open_files: AtomicUsize,
    stop: AtomicBool,
    errors: AtomicU64,
}

/// Why a connection waits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    Chunk,
    Slot,
}

/// The core's side of `--write-dir`: the free list, the queues, the writer thread, and the
/// connections waiting for room.
pub struct WriteDir {
    dir: PathBuf,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<(Vec<FileRecord>, WriteTotals)>>,
    next_id: u64,
    /// Messages that did not fit (never expected, see the module docs), oldest first.
    overflow: VecDeque<Msg>,
    chunk_waiters: VecDeque<u64>,
    slot_waiters: VecDeque<u64>,
    waiting: HashSet<u64>,
    stalls: u64,
    max_files: usize,
}

impl fmt::Debug for WriteDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteDir")
            .field("dir", &self.dir)
            .field("free", &self.shared.free.len())
            .field("work", &self.shared.work.len())
            .field("waiting", &self.waiting.len())
            .finish_non_exhaustive()
    }
}

impl WriteDir {
    /// Checks that `dir` is a writable directory (by creating and removing a probe file)
    /// and starts the writer thread.
    pub fn start(dir: &Path) -> Result<Self> {
        Self::with_opener(dir, create_new, CHUNKS, MAX_FILES)
    }

    /// As [`WriteDir::start`], with files opened by `open`, `chunks` chunks in the free
    /// list and at most `max_files` files open (the tests' seams).
    pub fn with_opener(dir: &Path, open: Opener, chunks: usize, max_files: usize) -> Result<Self> {
        let (chunks, max_files) = (chunks.max(1), max_files.max(1));
        let meta = std::fs::metadata(dir)
            .with_context(|| format!("--write-dir {}: cannot use it", dir.display()))?;
        if !meta.is_dir() {
            bail!("--write-dir {}: not a directory", dir.display());
        }
        let probe = dir.join(format!(".weir-serve-probe-{}", std::process::id()));
        File::create(&probe).with_context(|| {
            format!("--write-dir {}: cannot create a file in it", dir.display())
        })?;
        let _ = std::fs::remove_file(&probe);
        let shared = Arc::new(Shared {
            free: ArrayQueue::new(chunks),
            work: ArrayQueue::new(chunks + 2 * max_files),
            done: ArrayQueue::new(2 * max_files + 64),
            open_files: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            errors: AtomicU64::new(0),
        });
        for _ in 0..chunks {
            // The queue has room for exactly this many.
            let _ = shared.free.push(vec![0u8; CHUNK].into_boxed_slice());
        }
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("weir-write-dir".into())
            .spawn(move || writer(&s, open, max_files))
            .context("--write-dir: cannot start the writer thread")?;
        Ok(Self {
            dir: dir.to_path_buf(),
            shared,
            thread: Some(thread),
            next_id: 0,
            overflow: VecDeque::new(),
            chunk_waiters: VecDeque::new(),
            slot_waiters: VecDeque::new(),
            waiting: HashSet::new(),
            stalls: 0,
            max_files,
        })
    }

    /// The directory files go to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Opens a file `name` for the connection `token`, or `None` when [`MAX_FILES`] are
    /// open (the connection is woken when one closes) or the writer has stopped.
    pub fn open(&mut self, token: u64, name: &str) -> Option<FileHandle> {
        if self.thread.is_none() || self.shared.open_files.load(Ordering::Acquire) >= self.max_files
        {
            self.stalls += 1;
            self.wait(token, Wait::Slot);
            return None;
        }
        self.shared.open_files.fetch_add(1, Ordering::AcqRel);
        let id = self.next_id;
        self.next_id += 1;
        let status = Arc::new(Status::default());
        self.send(Msg::Open {
            id,
            token,
            path: self.dir.join(name),
            status: Arc::clone(&status),
        });
        Some(FileHandle { id, status })
    }

    /// Hands as much of `data` to the writer as free chunks hold; returns how many bytes.
    /// When that is not all, the connection `token` is woken once a chunk is free.
    pub fn write(&mut self, token: u64, file: &FileHandle, data: &[u8]) -> usize {
        let mut done = 0;
        while done < data.len() {
            let Some(mut chunk) = self.shared.free.pop() else {
                self.stalls += 1;
                self.wait(token, Wait::Chunk);
                break;
            };
            let n = (data.len() - done).min(chunk.len());
            chunk[..n].copy_from_slice(&data[done..done + n]);
            self.send(Msg::Data {
                id: file.id,
                chunk,
                len: n,
            });
            done += n;
        }
        done
    }

    /// The connection's last message for its file: `fin` when the peer's FIN came (every
    /// byte was handed over), `end` how the connection ended, `handed` its byte count.
    pub fn close(&mut self, file: &FileHandle, fin: bool, end: &'static str, handed: u64) {
        self.send(Msg::Close {
            id: file.id,
            fin,
            end,
            handed,
        });
    }

    /// A connection to pump: one whose file failed or finished, else one waiting for a
    /// chunk (or a file slot) when there is one now.
    pub fn take_woken(&mut self) -> Option<u64> {
        self.flush_overflow();
        if let Some(t) = self.shared.done.pop() {
            return Some(t);
        }
        if !self.shared.free.is_empty() {
            if let Some(t) = self.chunk_waiters.pop_front() {
                self.waiting.remove(&t);
                return Some(t);
            }
        }
        if self.shared.open_files.load(Ordering::Acquire) < self.max_files {
            if let Some(t) = self.slot_waiters.pop_front() {
                self.waiting.remove(&t);
                return Some(t);
            }
        }
        None
    }

    /// Lets the writer finish every message sent, stops it and returns its records and
    /// totals. Call once every connection has closed its file (the glue's stop).
    pub fn stop(&mut self) -> (Vec<FileRecord>, WriteTotals) {
        let Some(thread) = self.thread.take() else {
            return (Vec::new(), WriteTotals::default());
        };
        while !self.overflow.is_empty() {
            // Wake-ups no longer matter, and a writer waiting to push one must not wait
            // for us while we wait for it.
            while self.shared.done.pop().is_some() {}
            self.flush_overflow();
            std::thread::sleep(IDLE_NAP);
        }
        self.shared.stop.store(true, Ordering::Release);
        match thread.join() {
            Ok((records, mut totals)) => {
                totals.stalls = self.stalls;
                (records, totals)
            }
            Err(_) => {
                tracing::error!(
                    "--write-dir {}: the writer thread panicked; no file is known complete",
                    self.dir.display()
                );
                let totals = WriteTotals {
                    errors: self.shared.errors.load(Ordering::Relaxed).max(1),
                    stalls: self.stalls,
                    ..WriteTotals::default()
                };
                (Vec::new(), totals)
            }
        }
    }

    fn wait(&mut self, token: u64, why: Wait) {
        if self.waiting.insert(token) {
            match why {
                Wait::Chunk => self.chunk_waiters.push_back(token),
                Wait::Slot => self.slot_waiters.push_back(token),
            }
        }
    }

    fn send(&mut self, m: Msg) {
        self.flush_overflow();
        if !self.overflow.is_empty() {
            self.overflow.push_back(m);
        } else if let Err(m) = self.shared.work.push(m) {
            self.overflow.push_back(m);
        }
    }

    fn flush_overflow(&mut self) {
        while let Some(m) = self.overflow.pop_front() {
            if let Err(m) = self.shared.work.push(m) {
                self.overflow.push_front(m);
                break;
            }
        }
    }
}

impl Drop for WriteDir {
    /// Without [`WriteDir::stop`] (an error path): the writer is told to stop once its
    /// queue is empty, and not waited for.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
    }
}

/// A connection's file name: its 4-tuple, the peer first, and its start time,
/// `198.18.0.2_40000-198.18.0.1_5001-<unix ns>.bin`. An IPv6 address has its `:` as `.`
/// (`2001.db8..2_40000-...`), which file systems and shells take as is.
pub fn file_name(flow: &FlowKey, start_unix_ns: u128) -> String {
    fn addr(a: IpAddr) -> String {
        match a {
            IpAddr::V4(a) => a.to_string(),
            IpAddr::V6(a) => a.to_string().replace(':', "."),
        }
    }
    format!(
        "{}_{}-{}_{}-{start_unix_ns}.bin",
        addr(flow.src_ip()),
        flow.sport,
        addr(flow.dst_ip()),
        flow.dport
    )
}

/// Most incomplete files the summary names one by one.
const LISTED_INCOMPLETE: usize = 20;

/// The summary's lines about the files: how many, and each incomplete one (the first
/// [`LISTED_INCOMPLETE`]) with its end and error.
pub fn print_files(files: &[FileRecord]) {
    if files.is_empty() {
        return;
    }
    let bad: Vec<&FileRecord> = files.iter().filter(|f| !f.complete).collect();
    println!(
        "  files: {} written, {} complete, {} incomplete",
        files.len(),
        files.len() - bad.len(),
        bad.len()
    );
    for f in bad.iter().take(LISTED_INCOMPLETE) {
        println!(
            "  incomplete file {}: {} of {} bytes written, connection {}{}",
            f.path,
            f.written,
            f.received,
            f.end,
            f.error
                .as_deref()
                .map(|e| format!(", error: {e}"))
                .unwrap_or_default()
        );
    }
    if bad.len() > LISTED_INCOMPLETE {
        println!(
            "  ... and {} more incomplete files (--stats-json lists them)",
            bad.len() - LISTED_INCOMPLETE
        );
    }
}

/// One file as the writer holds it.
struct Open {
    path: PathBuf,
    token: u64,
    status: Arc<Status>,
    file: Option<File>,
    written: u64,
    error: Option<String>,
}

/// The writer thread: messages in order, until told to stop with the queue empty.
fn writer(shared: &Shared, open: Opener, max_files: usize) -> (Vec<FileRecord>, WriteTotals) {
    let mut files: HashMap<u64, Open> = HashMap::with_capacity(max_files);
    let mut records = Vec::new();
    let mut totals = WriteTotals::default();
    loop {
        let Some(m) = shared.work.pop() else {
            // The core stores `stop` after its last push: once it is seen, an empty queue
            // stays empty.
            if shared.stop.load(Ordering::Acquire) && shared.work.is_empty() {
                break;
            }
            std::thread::sleep(IDLE_NAP);
            continue;
        };
        match m {
            Msg::Open {
                id,
                token,
                path,
                status,
            } => {
                let mut f = Open {
                    path,
                    token,
                    status,
                    file: None,
                    written: 0,
                    error: None,
                };
                match open(&f.path) {
                    Ok(file) => f.file = Some(file),
                    Err(e) => fail(shared, &mut f, "cannot create", &e),
                }
                files.insert(id, f);
            }
            Msg::Data { id, chunk, len } => {
                if let Some(f) = files.get_mut(&id) {
                    if let Some(file) = f.file.as_mut() {
                        if let Err(e) = write_counted(file, &chunk[..len], &mut f.written) {
                            fail(shared, f, "cannot write", &e);
                        }
                    }
                }
                // Room for every chunk: the free list holds all of them.
                let _ = shared.free.push(chunk);
            }
            Msg::Close {
                id,
                fin,
                end,
                handed,
            } => {
                let Some(mut f) = files.remove(&id) else {
                    continue;
                };
                // Closing a regular file reports nothing that the writes did not (there is
                // no fsync, see the module docs).
                f.file = None;
                let complete = fin && f.error.is_none() && f.written == handed;
                totals.files += 1;
                totals.incomplete += u64::from(!complete);
                totals.bytes += f.written;
                if records.len() < MAX_RECORDS {
                    records.push(FileRecord {
                        path: f.path.display().to_string(),
                        received: handed,
                        written: f.written,
                        end,
                        error: f.error.take(),
                        complete,
                    });
                }
                shared.open_files.fetch_sub(1, Ordering::AcqRel);
                f.status.finished.store(true, Ordering::Release);
                wake(shared, f.token);
            }
        }
    }
    // Every connection closes its file before the stop; one still here was not told.
    for (_, f) in files.drain() {
        totals.files += 1;
        totals.incomplete += 1;
        totals.bytes += f.written;
        if records.len() < MAX_RECORDS {
            records.push(FileRecord {
                path: f.path.display().to_string(),
                received: f.written,
                written: f.written,
                end: "open",
                error: f.error,
                complete: false,
            });
        }
    }
    totals.errors = shared.errors.load(Ordering::Relaxed);
    (records, totals)
}

/// Writes all of `buf` as `write_all` does, counting in `written` every byte the file took
/// (a write cut short by a full disk counts what it wrote), so `written` is the file's size.
fn write_counted(file: &mut File, mut buf: &[u8], written: &mut u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                *written += n as u64;
                buf = &buf[n..];
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The file's first error: logged (the first [`LOGGED_ERRORS`] files), counted, the file
/// closed as far as it was written, and the core told.
fn fail(shared: &Shared, f: &mut Open, what: &str, e: &io::Error) {
    if f.error.is_some() {
        return;
    }
    let text = format!("{what} {}: {e}", f.path.display());
    let n = shared.errors.fetch_add(1, Ordering::Relaxed) + 1;
    if n <= LOGGED_ERRORS {
        tracing::error!("--write-dir: {text}; the file is incomplete, resetting its connection");
    }
    f.error = Some(text);
    f.file = None;
    f.status.failed.store(true, Ordering::Release);
    wake(shared, f.token);
}

/// Tells the core to pump connection `token`; waits for room rather than lose the wake-up,
/// unless the core has stopped listening.
fn wake(shared: &Shared, token: u64) {
    while shared.done.push(token).is_err() {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        std::thread::sleep(IDLE_NAP);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
pub(crate) mod testing {
    //! A temporary directory for the tests of the writer path.

    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A fresh directory under the system's temporary one, removed at the end.
    pub(crate) struct TempDir(pub(crate) PathBuf);

    impl TempDir {
        pub(crate) fn new(tag: &str) -> Self {
            static N: AtomicU64 = AtomicU64::new(0);
            let p = std::env::temp_dir().join(format!(
                "weir-write-dir-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::testing::TempDir;
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn file_names_carry_the_four_tuple_and_are_safe_for_ipv6() {
        let f = FlowKey::v4(
            Ipv4Addr::new(198, 18, 0, 2),
            40000,
            Ipv4Addr::new(198, 18, 0, 1),
            5001,
        );
        assert_eq!(file_name(&f, 17), "198.18.0.2_40000-198.18.0.1_5001-17.bin");
        let a: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let b: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let f = FlowKey::v6(a, 40000, b, 5001);
        let n = file_name(&f, 17);
        assert_eq!(n, "2001.db8..2_40000-2001.db8..1_5001-17.bin");
        assert!(!n.contains([':', '/', '[', ']']));
    }

    #[test]
    fn a_missing_directory_or_a_file_is_refused_at_start() {
        let d = TempDir::new("start");
        let missing = d.0.join("nope");
        let e = WriteDir::start(&missing).unwrap_err();
        assert!(format!("{e:#}").contains("cannot use it"), "{e:#}");
        let file = d.0.join("file");
        std::fs::write(&file, b"x").unwrap();
        let e = WriteDir::start(&file).unwrap_err();
        assert!(format!("{e:#}").contains("not a directory"), "{e:#}");
        // The probe leaves nothing behind.
        let mut w = WriteDir::start(&d.0).unwrap();
        let _ = w.stop();
        assert_eq!(std::fs::read_dir(&d.0).unwrap().count(), 1);
    }
}
