//! weir-sink's application as an engine (`--app sink`): every byte is consumed as soon as
//! it is in order, optionally hashed (SHA-256, `--digest`); nothing is written back; the
//! connection closes when the peer closes (RFC 863's discard, over TCP).
//!
//! With `--write-dir DIR` each connection's bytes also go to a file of its own
//! ([`super::write_dir`]): the engine consumes only what the writer has room for (the rest
//! stays in the receive queue and the window closes), closes its connection only once the
//! writer has closed the file, and asks for a reset when the file could not be written.

use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use stack::flow::FlowKey;
use stack::time::Instant;

use super::write_dir::{self, FileHandle, WriteDir};
use super::{App, AppError, Sink};

/// The sink app's settings.
#[derive(Debug, Default)]
pub struct Config {
    /// Hash each connection's bytes.
    pub digest: bool,
    /// Write each connection's bytes to a file in this directory (`--write-dir`).
    pub write_dir: Option<WriteDir>,
}

/// Where a connection's file is (with `--write-dir`).
#[derive(Debug)]
enum FileSlot {
    /// No `--write-dir`.
    Off,
    /// Not open yet (no slot was free): the name it will have.
    Unopened(String),
    /// Open: bytes go to it.
    Open(FileHandle),
    /// Its last message was sent; the writer closes it.
    Closed(FileHandle),
}

/// One discarding connection.
#[derive(Debug)]
pub struct Discard {
    hasher: Option<Sha256>,
    bytes: u64,
    peer_closed: bool,
    token: u64,
    file: FileSlot,
}

impl Discard {
    /// Bytes consumed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The SHA-256 of the bytes so far, lower-case hex (`None` without `--digest`); the
    /// hash is finished, so call it once, at the end.
    pub fn finish_digest(&mut self) -> Option<String> {
        self.hasher.take().map(|h| crate::sink::hex(&h.finalize()))
    }

    /// Names the connection's file after its flow and start time (the glue calls it right
    /// after `accept`) and opens it.
    pub fn set_flow(&mut self, cfg: &mut Config, flow: Option<&FlowKey>) {
        let FileSlot::Unopened(name) = &mut self.file else {
            return;
        };
        if let Some(f) = flow {
            let ns = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            *name = write_dir::file_name(f, ns);
        }
        self.try_open(cfg);
    }

    /// Whether the connection's file failed: the connection is to be reset.
    pub fn file_failed(&self) -> bool {
        match &self.file {
            FileSlot::Open(h) | FileSlot::Closed(h) => h.failed(),
            _ => false,
        }
    }

    /// With `--write-dir`, as the connection ends (`end` is the glue's `closed`, `reset` or
    /// `open`): the file's last message if it was not sent yet. Returns false when the
    /// connection never got a file.
    pub fn end_file(&mut self, cfg: &mut Config, end: &'static str) -> bool {
        let Some(wd) = cfg.write_dir.as_mut() else {
            return true;
        };
        match std::mem::replace(&mut self.file, FileSlot::Off) {
            FileSlot::Open(h) => {
                wd.close(&h, false, end, self.bytes);
                self.file = FileSlot::Closed(h);
                true
            }
            FileSlot::Unopened(_) => false,
            other => {
                self.file = other;
                true
            }
        }
    }

    fn try_open(&mut self, cfg: &mut Config) -> bool {
        let (Some(wd), FileSlot::Unopened(name)) = (cfg.write_dir.as_mut(), &self.file) else {
            return matches!(self.file, FileSlot::Open(_));
        };
        match wd.open(self.token, name) {
            Some(h) => {
                self.file = FileSlot::Open(h);
                true
            }
            None => false,
        }
    }

    /// After the peer's FIN: the file's last message (opening it first for a connection
    /// that sent nothing). False while no file slot is free.
    fn finish_file(&mut self, cfg: &mut Config) -> bool {
        if !self.try_open(cfg) {
            return !matches!(self.file, FileSlot::Unopened(_));
        }
        if let (Some(wd), FileSlot::Open(h)) = (cfg.write_dir.as_mut(), &self.file) {
            wd.close(h, true, "closed", self.bytes);
            let h = h.clone();
            self.file = FileSlot::Closed(h);
        }
        true
    }
}

impl App for Discard {
    type Server = Config;

    fn accept(cfg: &mut Config, _now: Instant, token: u64) -> Self {
        let file = match cfg.write_dir {
            // Named for real by `set_flow`; this name only if the flow is unknown.
            Some(_) => FileSlot::Unopened(format!("connection-{token:x}.bin")),
            None => FileSlot::Off,
        };
        Self {
            hasher: cfg.digest.then(Sha256::new),
            bytes: 0,
            peer_closed: false,
            token,
            file,
        }
    }

    fn on_data<S: Sink + ?Sized>(
        &mut self,
        cfg: &mut Config,
        _now: Instant,
        input: &[u8],
        _out: &mut S,
    ) -> Result<usize, AppError> {
        let n = if cfg.write_dir.is_none() {
            input.len()
        } else if self.file_failed() || !self.try_open(cfg) {
            // Failed: the glue resets the connection. No slot: woken when one frees.
            0
        } else {
            match (cfg.write_dir.as_mut(), &self.file) {
                (Some(wd), FileSlot::Open(h)) => wd.write(self.token, h, input),
                _ => 0,
            }
        };
        if let Some(h) = self.hasher.as_mut() {
            h.update(&input[..n]);
        }
        self.bytes += n as u64;
        Ok(n)
    }

    fn poll_output<S: Sink + ?Sized>(
        &mut self,
        cfg: &mut Config,
        _now: Instant,
        _out: &mut S,
    ) -> Result<(), AppError> {
        if self.peer_closed {
            self.finish_file(cfg);
        }
        Ok(())
    }

    fn on_peer_closed(&mut self, cfg: &mut Config, _now: Instant) {
        self.peer_closed = true;
        self.finish_file(cfg);
    }

    fn output_pending(&self, _cfg: &Config) -> bool {
        // A connection that sent nothing and found no file slot still owes its (empty) file.
        self.peer_closed && matches!(self.file, FileSlot::Unopened(_))
    }

    fn wants_close(&self, _cfg: &Config) -> bool {
        self.peer_closed
            && match &self.file {
                FileSlot::Off => true,
                FileSlot::Closed(h) => h.finished() && !h.failed(),
                _ => false,
            }
    }

    fn wants_reset(&self, _cfg: &Config) -> bool {
        self.file_failed()
    }

    fn take_woken(cfg: &mut Config) -> Option<u64> {
        cfg.write_dir.as_mut()?.take_woken()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use std::net::Ipv4Addr;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::serve::glue::{ConnEnd, ServeApp, Tally, STAGE};
    use crate::serve::testing::drive;
    use crate::serve::write_dir::testing::TempDir;
    use crate::serve::write_dir::{Opener, CHUNK, CHUNKS, MAX_FILES};
    use crate::serve::SendBuf;

    #[test]
    fn consumes_everything_writes_nothing_and_digests_it() {
        let mut cfg = Config {
            digest: true,
            write_dir: None,
        };
        let run = drive::<Discard>(&mut cfg, &[b"abc", b"def"], 1, true);
        assert!(run.out.is_empty());
        assert!(run.wants_close);
        let mut d = Discard::accept(&mut cfg, Instant::ZERO, 0);
        let mut sink = crate::serve::SendBuf::new(0);
        assert_eq!(
            d.on_data(&mut cfg, Instant::ZERO, b"abcdef", &mut sink),
            Ok(6)
        );
        // sha256("abcdef"), as `printf abcdef | sha256sum` prints it.
        assert_eq!(
            d.finish_digest().as_deref(),
            Some("bef57ec7f53a6d40beb640a780a639c83bc29ac8a9816f1fc6c5c6dcd93c4721")
        );
        assert_eq!(d.bytes(), 6);
    }

    const TOKEN: u64 = 7;

    fn flow() -> FlowKey {
        FlowKey::v4(
            Ipv4Addr::new(198, 18, 0, 2),
            40000,
            Ipv4Addr::new(198, 18, 0, 1),
            5001,
        )
    }

    /// A sink with `--digest --write-dir` into `dir`, files opened by `open`, and one
    /// connection on it.
    fn sink(dir: &Path, open: Opener) -> (Config, Discard) {
        let mut cfg = Config {
            digest: true,
            write_dir: Some(WriteDir::with_opener(dir, open, CHUNKS, MAX_FILES).unwrap()),
        };
        let mut d = Discard::accept(&mut cfg, Instant::ZERO, TOKEN);
        d.set_flow(&mut cfg, Some(&flow()));
        (cfg, d)
    }

    /// Waits (as the core loop would, round after round) until `take_woken` names the
    /// connection; panics after about 10 s.
    fn wait_woken(cfg: &mut Config) {
        for _ in 0..100_000 {
            while let Some(t) = Discard::take_woken(cfg) {
                if t == TOKEN {
                    return;
                }
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        panic!("the connection was never woken");
    }

    /// Offers `input` in the glue's stage-sized pieces, as often as the engine takes
    /// them; waits to be woken whenever it takes less than offered. Returns how many
    /// times it took less.
    fn feed(cfg: &mut Config, d: &mut Discard, input: &[u8]) -> u64 {
        let mut sink = SendBuf::new(0);
        let (mut off, mut short) = (0, 0);
        while off < input.len() {
            let piece = &input[off..(off + STAGE).min(input.len())];
            let n = d.on_data(cfg, Instant::ZERO, piece, &mut sink).unwrap();
            assert!(n <= piece.len());
            off += n;
            if n < piece.len() {
                short += 1;
                wait_woken(cfg);
            }
        }
        short
    }

    /// The peer's FIN, then the glue's wait for the writer to close the file.
    fn finish(cfg: &mut Config, d: &mut Discard) {
        d.on_peer_closed(cfg, Instant::ZERO);
        while !d.wants_close(cfg) {
            assert!(!d.wants_reset(cfg), "the file failed");
            wait_woken(cfg);
        }
    }

    /// The connection's end and the stop, as the glue runs them; the tally.
    fn end(cfg: &mut Config, d: &mut Discard, how: &'static str) -> Tally {
        let mut t = Tally::default();
        let info = ConnEnd {
            flow: format!("{:?}", flow()),
            local_port: 5001,
            end: how,
        };
        d.tally(cfg, &mut t, &info);
        Discard::stop_server(cfg, &mut t);
        t
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect()
    }

    fn sha256_hex(b: &[u8]) -> String {
        crate::sink::hex(&Sha256::digest(b))
    }

    #[test]
    fn write_dir_file_holds_every_byte_consumed_and_the_digest_still_works() {
        let dir = TempDir::new("whole");
        let (mut cfg, mut d) = sink(&dir.0, write_dir::create_new);
        // More than the free list holds (16 MiB), so the writer's pace decides whether
        // the engine waits; either way every byte must arrive.
        let data = pattern(3 * CHUNKS * CHUNK / 2 + 12_345);
        feed(&mut cfg, &mut d, &data);
        finish(&mut cfg, &mut d);
        assert_eq!(d.bytes(), data.len() as u64);
        let t = end(&mut cfg, &mut d, "closed");
        assert_eq!(t.digests.len(), 1);
        assert_eq!(t.digests[0].sha256, sha256_hex(&data));
        assert_eq!(t.files.len(), 1);
        let f = &t.files[0];
        assert!(f.complete && f.error.is_none(), "{f:?}");
        assert_eq!(
            (f.received, f.written),
            (data.len() as u64, data.len() as u64)
        );
        assert!(
            f.path.ends_with(".bin") && f.path.contains("/198.18.0.2_40000-198.18.0.1_5001-"),
            "{}",
            f.path
        );
        assert!(std::fs::read(&f.path).unwrap() == data, "the file differs");
        let c = &t.counters;
        assert_eq!(
            (c["files"], c["files_incomplete"], c["write_errors"]),
            (1, 0, 0)
        );
        assert_eq!(c["written_bytes"], data.len() as u64);
    }

    #[test]
    fn an_empty_connection_gets_an_empty_complete_file() {
        let dir = TempDir::new("empty");
        let (mut cfg, mut d) = sink(&dir.0, write_dir::create_new);
        finish(&mut cfg, &mut d);
        let t = end(&mut cfg, &mut d, "closed");
        assert!(t.files[0].complete);
        assert_eq!(std::fs::metadata(&t.files[0].path).unwrap().len(), 0);
    }

    /// Holds the writer in its first open until the test lets it go.
    static GATE: AtomicBool = AtomicBool::new(false);

    fn gated_open(p: &Path) -> std::io::Result<std::fs::File> {
        // A test that fails before it opens the gate must not hang here.
        for _ in 0..20_000 {
            if GATE.load(Ordering::Acquire) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        write_dir::create_new(p)
    }

    #[test]
    fn a_writer_behind_means_fewer_bytes_consumed_and_none_lost() {
        let dir = TempDir::new("gate");
        let (mut cfg, mut d) = sink(&dir.0, gated_open);
        let data = pattern(2 * CHUNKS * CHUNK);
        let mut sink = SendBuf::new(0);
        // The writer is stuck opening the file: the engine takes exactly what the free
        // list holds, then nothing, and nothing wakes it.
        let mut taken = 0;
        for piece in data.chunks(STAGE) {
            taken += d
                .on_data(&mut cfg, Instant::ZERO, piece, &mut sink)
                .unwrap();
        }
        assert_eq!(taken, CHUNKS * CHUNK, "consumed while the writer is stuck");
        assert!(taken < data.len());
        assert_eq!(d.bytes(), taken as u64);
        assert_eq!(Discard::take_woken(&mut cfg), None, "woken with no room");
        GATE.store(true, Ordering::Release);
        wait_woken(&mut cfg);
        feed(&mut cfg, &mut d, &data[taken..]);
        finish(&mut cfg, &mut d);
        let t = end(&mut cfg, &mut d, "closed");
        let f = &t.files[0];
        assert!(f.complete, "{f:?}");
        assert!(std::fs::read(&f.path).unwrap() == data, "the file differs");
        assert!(t.counters["write_stalls"] >= 1);
        assert_eq!(t.digests[0].sha256, sha256_hex(&data));
    }

    fn dev_full(_: &Path) -> std::io::Result<std::fs::File> {
        std::fs::OpenOptions::new().write(true).open("/dev/full")
    }

    /// Waits until the engine asks for a reset.
    fn wait_reset(cfg: &mut Config, d: &Discard) {
        while !d.wants_reset(cfg) {
            wait_woken(cfg);
        }
    }

    #[test]
    fn a_full_disk_resets_the_connection_and_reports_the_file_incomplete() {
        let dir = TempDir::new("full");
        let (mut cfg, mut d) = sink(&dir.0, dev_full);
        let data = pattern(1 << 20);
        let mut sink = SendBuf::new(0);
        let n = d
            .on_data(&mut cfg, Instant::ZERO, &data, &mut sink)
            .unwrap();
        assert!(n > 0);
        wait_reset(&mut cfg, &d);
        assert!(!d.wants_close(&cfg), "a failed file never closes cleanly");
        // From now on nothing is consumed: the glue resets the connection.
        assert_eq!(
            d.on_data(&mut cfg, Instant::ZERO, &data[n..], &mut sink),
            Ok(0)
        );
        let t = end(&mut cfg, &mut d, "reset");
        let f = &t.files[0];
        assert!(!f.complete);
        assert_eq!(f.end, "reset");
        assert_eq!(f.written, 0);
        assert_eq!(f.received, n as u64);
        let e = f.error.as_deref().unwrap();
        assert!(
            e.starts_with("cannot write ") && e.contains("No space left on device"),
            "{e}"
        );
        assert!(e.contains("198.18.0.2_40000-198.18.0.1_5001-"), "{e}");
        let c = &t.counters;
        assert_eq!(
            (c["files"], c["files_incomplete"], c["write_errors"]),
            (1, 1, 1)
        );
        // The digest of what was consumed, reported as a reset connection's.
        assert_eq!(t.digests[0].end, "reset");
    }

    #[test]
    fn a_directory_removed_under_the_sink_is_an_error_not_a_loss() {
        let dir = TempDir::new("gone");
        let sub = dir.0.join("sub");
        std::fs::create_dir(&sub).unwrap();
        let mut cfg = Config {
            digest: false,
            write_dir: Some(WriteDir::start(&sub).unwrap()),
        };
        std::fs::remove_dir(&sub).unwrap();
        let mut d = Discard::accept(&mut cfg, Instant::ZERO, TOKEN);
        d.set_flow(&mut cfg, Some(&flow()));
        wait_reset(&mut cfg, &d);
        let mut sink = SendBuf::new(0);
        assert_eq!(
            d.on_data(&mut cfg, Instant::ZERO, b"abc", &mut sink),
            Ok(0),
            "nothing consumed for a file that cannot exist"
        );
        let t = end(&mut cfg, &mut d, "reset");
        let e = t.files[0].error.as_deref().unwrap();
        assert!(
            e.starts_with("cannot create ") && e.contains("No such file or directory"),
            "{e}"
        );
        assert_eq!(t.counters["write_errors"], 1);
    }

    /// Three connections on one writer with 2 chunks and 1 file slot between them.
    #[test]
    fn connections_share_the_chunks_and_wait_their_turn_for_a_file() {
        let dir = TempDir::new("share");
        let mut cfg = Config {
            digest: false,
            write_dir: Some(WriteDir::with_opener(&dir.0, write_dir::create_new, 2, 1).unwrap()),
        };
        let flow_of = |i: u16| {
            FlowKey::v4(
                Ipv4Addr::new(198, 18, 0, 2),
                40000 + i,
                Ipv4Addr::new(198, 18, 0, 1),
                5001,
            )
        };
        let mut conns: Vec<Discard> = (0..3u16)
            .map(|i| {
                let mut d = Discard::accept(&mut cfg, Instant::ZERO, u64::from(i));
                d.set_flow(&mut cfg, Some(&flow_of(i)));
                d
            })
            .collect();
        let mut sink = SendBuf::new(0);
        // The first has the only slot: the second consumes nothing until it is free.
        assert_eq!(
            conns[1].on_data(&mut cfg, Instant::ZERO, b"x", &mut sink),
            Ok(0)
        );
        // The third ends (reset) while waiting: no file, counted.
        let mut t = Tally::default();
        let info = |end| ConnEnd {
            flow: String::new(),
            local_port: 5001,
            end,
        };
        conns[2].tally(&mut cfg, &mut t, &info("reset"));
        assert_eq!(t.counters["files_never_opened"], 1);
        // The other two in turns, 10 kB offered at a time, to their FIN.
        let data = [
            pattern(300_000),
            pattern(200_000)
                .iter()
                .map(|b| b ^ 0x5a)
                .collect::<Vec<u8>>(),
        ];
        let (mut off, mut fin) = ([0usize; 2], [false; 2]);
        for _ in 0..200_000 {
            if fin == [true; 2] && conns[0].wants_close(&cfg) && conns[1].wants_close(&cfg) {
                break;
            }
            for i in 0..2 {
                if off[i] < data[i].len() {
                    let piece = &data[i][off[i]..(off[i] + 10_000).min(data[i].len())];
                    off[i] += conns[i]
                        .on_data(&mut cfg, Instant::ZERO, piece, &mut sink)
                        .unwrap();
                } else if !fin[i] {
                    conns[i].on_peer_closed(&mut cfg, Instant::ZERO);
                    fin[i] = true;
                }
            }
            while Discard::take_woken(&mut cfg).is_some() {}
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        for c in &mut conns[..2] {
            assert!(c.wants_close(&cfg), "a connection never finished");
            c.tally(&mut cfg, &mut t, &info("closed"));
        }
        Discard::stop_server(&mut cfg, &mut t);
        assert_eq!(t.files.len(), 2);
        for (i, d) in data.iter().enumerate() {
            let f = t
                .files
                .iter()
                .find(|f| f.path.contains(&format!("_{}-", 40000 + i)))
                .unwrap();
            assert!(f.complete, "{f:?}");
            assert!(std::fs::read(&f.path).unwrap() == *d, "file {i} differs");
        }
        assert_eq!(
            (t.counters["files"], t.counters["files_incomplete"]),
            (2, 0)
        );
        assert!(
            t.counters["write_stalls"] > 0,
            "the second never waited for the slot"
        );
    }
}
