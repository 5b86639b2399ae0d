//! A minimal HTTP/1.1 origin server: `GET /` and `HEAD /` answer a generated body of a
//! configured size; keep-alive and pipelining; heads parsed with `httparse`.
//!
//! Read first: RFC 9112 (HTTP/1.1 message syntax: §2.2 message parsing, §3.2 Host, §6.3
//! message body length, §9.3 persistence, §9.6 tear-down) and RFC 9110 §15 (status codes).
//!
//! Per request, in order (pipelined requests are answered strictly one after another, and
//! the next head is not read until the previous response is in the sink):
//! - `GET /` (any query string): 200 with `Content-Length: body_len` and the body of
//!   [`fill_body`]; `HEAD /`: the same head, no body.
//! - `GET`/`HEAD` of any other path: 404. Any other method: 405 with `Allow: GET, HEAD`.
//! - A head that does not parse, an HTTP/1.1 request without `Host` (RFC 9112 §3.2: MUST
//!   400), a bad or conflicting `Content-Length` (RFC 9112 §6.3): 400, then close.
//! - A head longer than [`Config::max_header`] or with more than [`MAX_HEADERS`] fields: 431
//!   (RFC 6585 §5), then close.
//! - A request with `Transfer-Encoding`: 501, then close. This server reads no request body
//!   but counts away one of `Content-Length` bytes; it does not decode chunked bodies (RFC
//!   9112 §7 asks every recipient to), which no GET or HEAD client sends.
//!
//! Persistence (RFC 9112 §9.3): HTTP/1.1 stays open unless the request says
//! `Connection: close`; HTTP/1.0 closes unless it says `Connection: keep-alive`. A response
//! that closes says `Connection: close`. No `Date` field: the engine has no clock (RFC 9110
//! §6.6.1 allows an origin server without one to omit it).
//!
//! Bounds: the partial head (at most `max_header` bytes) and one staged response head with
//! its short status body ([`STAGE_CAP`]); the 200 body is generated as the sink takes it.

use std::io::Write as _;

use arrayvec::ArrayVec;
use stack::time::Instant;

use super::{App, AppError, Sink, Staged};

const APP: &str = "http";

/// Most header fields one request may carry (beyond: 431).
pub const MAX_HEADERS: usize = 64;
/// Room for one response head and its short status body.
pub const STAGE_CAP: usize = 512;

/// The HTTP server's settings on one core.
#[derive(Debug, Clone)]
pub struct Config {
    /// Length of the body `GET /` answers (weir-serve's `--http-body`).
    pub body_len: u64,
    /// Longest request head accepted, request line and fields included (beyond: 431).
    pub max_header: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            body_len: 1024,
            max_header: 8 * 1024,
        }
    }
}

/// The 200 body's bytes from `offset` on: 16-byte lines, each its own offset in 15
/// lowercase hexadecimal digits and a newline, so any lost, repeated or reordered byte
/// shows. The body is this pattern cut at the configured length.
pub fn fill_body(offset: u64, buf: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in buf.iter_mut().enumerate() {
        let p = offset + i as u64;
        let col = (p & 15) as u32;
        *b = if col == 15 {
            b'\n'
        } else {
            let line = p & !15;
            HEX[((line >> (4 * (14 - col))) & 15) as usize]
        };
    }
}

/// Counters of one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests answered (any status).
    pub requests: u64,
    /// Answered with 200.
    pub ok: u64,
    /// Body bytes generated.
    pub body_bytes: u64,
}

/// What the engine needs from a parsed head, copied out of the input.
#[derive(Debug, Clone, Copy)]
struct Head {
    len: usize,
    head_only: bool,
    status: u16,
    keep_alive: bool,
    http10: bool,
    content_length: u64,
}

/// Why a head cannot be answered normally.
#[derive(Debug)]
enum Bad {
    Malformed(String),
    TooLarge(u64),
    Unsupported,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading and answering requests.
    Open,
    /// The last response said `Connection: close`; close once it is out.
    Closing,
    /// A request was refused (400, 431, 501); close once the refusal is out.
    Failed,
}

/// One HTTP connection.
#[derive(Debug)]
pub struct Http {
    acc: Vec<u8>,
    staged: Staged,
    body_off: u64,
    body_end: u64,
    skip: u64,
    phase: Phase,
    peer_closed: bool,
    counts: Counts,
}

impl Http {
    /// This connection's counters.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Writes the staged head and then the body owed; true when nothing is left.
    fn flush<S: Sink + ?Sized>(&mut self, out: &mut S) -> bool {
        if !self.staged.flush(out) {
            return false;
        }
        let mut chunk = [0u8; 4096];
        while self.body_off < self.body_end {
            let n = (self.body_end - self.body_off).min(chunk.len() as u64) as usize;
            fill_body(self.body_off, &mut chunk[..n]);
            let w = out.write(&chunk[..n]);
            self.body_off += w as u64;
            self.counts.body_bytes += w as u64;
            if w < n {
                return false;
            }
        }
        true
    }

    fn pending(&self) -> bool {
        !self.staged.is_empty() || self.body_off < self.body_end
    }

    /// Stages a response head (and a short body unless `head_only`); the 200 body is owed.
    fn respond(
        &mut self,
        cfg: &Config,
        status: u16,
        head_only: bool,
        close: bool,
        http10_keep: bool,
    ) {
        let (reason, short): (&str, &[u8]) = match status {
            200 => ("OK", b""),
            400 => ("Bad Request", b"bad request\n"),
            404 => ("Not Found", b"not found\n"),
            405 => ("Method Not Allowed", b"method not allowed\n"),
            431 => (
                "Request Header Fields Too Large",
                b"request header fields too large\n",
            ),
            _ => ("Not Implemented", b"not implemented\n"),
        };
        let body_len = if status == 200 {
            cfg.body_len
        } else {
            short.len() as u64
        };
        let mut head = ArrayVec::<u8, STAGE_CAP>::new();
        // The head's fixed parts and one u64 are far below STAGE_CAP: writes cannot fail.
        let _ = write!(
            head,
            "HTTP/1.1 {status} {reason}\r\nServer: weir\r\nContent-Length: {body_len}\r\n"
        );
        if status == 200 {
            let _ = write!(head, "Content-Type: text/plain\r\n");
        }
        if status == 405 {
            let _ = write!(head, "Allow: GET, HEAD\r\n");
        }
        if close {
            let _ = write!(head, "Connection: close\r\n");
        } else if http10_keep {
            let _ = write!(head, "Connection: keep-alive\r\n");
        }
        let _ = write!(head, "\r\n");
        if !head_only && status != 200 {
            let _ = head.try_extend_from_slice(short);
        }
        // The stage is empty whenever a new request is parsed.
        let _ = self.staged.push(&head);
        if status == 200 && !head_only {
            self.body_off = 0;
            self.body_end = cfg.body_len;
        }
        self.counts.requests += 1;
        if status == 200 {
            self.counts.ok += 1;
        }
        if close {
            self.phase = if matches!(status, 400 | 431 | 501) {
                Phase::Failed
            } else {
                Phase::Closing
            };
        }
    }

    /// Answers a parsed head; an error when the connection must close after the answer.
    fn answer(&mut self, cfg: &Config, parsed: Result<Head, Bad>) -> Result<(), AppError> {
        match parsed {
            Ok(h) => {
                self.respond(
                    cfg,
                    h.status,
                    h.head_only,
                    !h.keep_alive,
                    h.keep_alive && h.http10,
                );
                self.skip = h.content_length;
                Ok(())
            }
            Err(Bad::Malformed(reason)) => {
                self.respond(cfg, 400, false, true, false);
                Err(AppError::Malformed { app: APP, reason })
            }
            Err(Bad::TooLarge(len)) => {
                self.respond(cfg, 431, false, true, false);
                Err(AppError::TooLarge {
                    app: APP,
                    what: "request head",
                    len,
                    max: cfg.max_header as u64,
                })
            }
            Err(Bad::Unsupported) => {
                self.respond(cfg, 501, false, true, false);
                Err(AppError::Refused {
                    app: APP,
                    reason: "request body with Transfer-Encoding".into(),
                })
            }
        }
    }
}

/// Parses one request head from the start of `buf`: `Ok(None)` while it is incomplete.
fn parse_head(buf: &[u8], max_header: usize) -> Result<Option<Head>, Bad> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() >= max_header {
                Err(Bad::TooLarge(buf.len() as u64))
            } else {
                Ok(None)
            };
        }
        Err(httparse::Error::TooManyHeaders) => return Err(Bad::TooLarge(buf.len() as u64)),
        Err(e) => return Err(Bad::Malformed(format!("request head: {e}"))),
    };
    if len > max_header {
        return Err(Bad::TooLarge(len as u64));
    }
    let version = req.version.unwrap_or(1);
    let (mut close, mut keep, mut host, mut te) = (false, false, false, false);
    let mut content_length: Option<u64> = None;
    for f in req.headers.iter() {
        if f.name.eq_ignore_ascii_case("connection") {
            for token in f.value.split(|&b| b == b',') {
                let t = token.trim_ascii();
                close |= t.eq_ignore_ascii_case(b"close");
                keep |= t.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if f.name.eq_ignore_ascii_case("host") {
            host = true;
        } else if f.name.eq_ignore_ascii_case("transfer-encoding") {
            te = true;
        } else if f.name.eq_ignore_ascii_case("content-length") {
            // RFC 9112 §6.3 item 5: an invalid value, or differing values, are unrecoverable.
            let v = std::str::from_utf8(f.value.trim_ascii())
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| Bad::Malformed("invalid Content-Length".into()))?;
            if content_length.is_some_and(|c| c != v) {
                return Err(Bad::Malformed("conflicting Content-Length fields".into()));
            }
            content_length = Some(v);
        }
    }
    if te {
        return Err(Bad::Unsupported);
    }
    if version == 1 && !host {
        return Err(Bad::Malformed("HTTP/1.1 request without Host".into()));
    }
    let method = req.method.unwrap_or("");
    let path = req.path.unwrap_or("");
    let root = path.split('?').next() == Some("/");
    let head_only = method == "HEAD";
    let status = match method {
        "GET" | "HEAD" if root => 200,
        "GET" | "HEAD" => 404,
        _ => 405,
    };
    let keep_alive = if version == 1 { !close } else { keep && !close };
    Ok(Some(Head {
        len,
        head_only,
        status,
        keep_alive,
        http10: version == 0,
        content_length: content_length.unwrap_or(0),
    }))
}

impl App for Http {
    type Server = Config;

    fn accept(_cfg: &mut Config, _now: Instant, _token: u64) -> Self {
        Self {
            // Grows with a partial head only, up to `max_header`.
            acc: Vec::new(),
            staged: Staged::new(STAGE_CAP),
            body_off: 0,
            body_end: 0,
            skip: 0,
            phase: Phase::Open,
            peer_closed: false,
            counts: Counts::default(),
        }
    }

    fn on_data<S: Sink + ?Sized>(
        &mut self,
        cfg: &mut Config,
        _now: Instant,
        input: &[u8],
        out: &mut S,
    ) -> Result<usize, AppError> {
        let mut used = 0;
        loop {
            if !self.flush(out) {
                return Ok(used);
            }
            if self.phase != Phase::Open {
                // Nothing after a closing response is read (RFC 9112 §9.6).
                return Ok(input.len());
            }
            if self.skip > 0 {
                let n = self.skip.min((input.len() - used) as u64);
                self.skip -= n;
                used += n as usize;
                if self.skip > 0 {
                    return Ok(used);
                }
            }
            if used == input.len() {
                return Ok(used);
            }
            let rest = &input[used..];
            if self.acc.is_empty() {
                // Fast path: the head is read in place.
                match parse_head(rest, cfg.max_header) {
                    Ok(Some(h)) => {
                        used += h.len;
                        self.answer(cfg, Ok(h))?;
                    }
                    Ok(None) => {
                        self.acc.extend_from_slice(rest);
                        return Ok(input.len());
                    }
                    Err(bad) => {
                        self.answer(cfg, Err(bad))?;
                    }
                }
            } else {
                let take = rest
                    .len()
                    .min(cfg.max_header - self.acc.len().min(cfg.max_header));
                let before = self.acc.len();
                self.acc.extend_from_slice(&rest[..take]);
                let parsed = parse_head(&self.acc, cfg.max_header);
                match parsed {
                    Ok(Some(h)) => {
                        if h.len >= before {
                            // Bytes past the head came from `rest`: leave them unconsumed.
                            used += h.len - before;
                            self.acc.clear();
                        } else {
                            // Not expected (the shorter head was incomplete before), but
                            // the bytes past the head are the next request's: keep them.
                            used += take;
                            self.acc.drain(..h.len);
                        }
                        self.answer(cfg, Ok(h))?;
                    }
                    Ok(None) => {
                        used += take;
                    }
                    Err(bad) => {
                        self.acc.clear();
                        self.answer(cfg, Err(bad))?;
                    }
                }
            }
        }
    }

    fn poll_output<S: Sink + ?Sized>(
        &mut self,
        _cfg: &mut Config,
        _now: Instant,
        out: &mut S,
    ) -> Result<(), AppError> {
        self.flush(out);
        Ok(())
    }

    fn on_peer_closed(&mut self, _cfg: &mut Config, _now: Instant) {
        self.peer_closed = true;
    }

    fn output_pending(&self, _cfg: &Config) -> bool {
        self.pending()
    }

    fn wants_close(&self, _cfg: &Config) -> bool {
        self.peer_closed || self.phase != Phase::Open
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::testing::{bytewise, check_every_split, drive, Full};

    fn cfg(body: u64) -> Config {
        Config {
            body_len: body,
            ..Config::default()
        }
    }

    fn ok(body: u64) -> Vec<u8> {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nServer: weir\r\nContent-Length: {body}\r\nContent-Type: text/plain\r\n\r\n"
        )
        .into_bytes();
        let mut b = vec![0; body as usize];
        fill_body(0, &mut b);
        r.extend(b);
        r
    }

    const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

    #[test]
    fn body_pattern_names_each_line_by_its_offset() {
        let mut b = [0u8; 40];
        fill_body(0, &mut b);
        assert_eq!(&b, b"000000000000000\n000000000000010\n00000000");
        let mut c = [0u8; 5];
        fill_body(0x1234_5670 + 13, &mut c);
        assert_eq!(&c, b"70\n00");
    }

    #[test]
    fn get_root_at_every_split() {
        check_every_split::<Http>(|| cfg(100), GET, &ok(100));
    }

    #[test]
    fn pipelined_requests_are_answered_in_order() {
        let input = [
            GET,
            b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
            GET,
        ]
        .concat();
        let mut expected = ok(40);
        let head_only = ok(0);
        expected.extend(
            String::from_utf8_lossy(&head_only)
                .replace("Length: 0", "Length: 40")
                .bytes(),
        );
        expected.extend(
            b"HTTP/1.1 404 Not Found\r\nServer: weir\r\nContent-Length: 10\r\n\r\nnot found\n",
        );
        expected.extend(ok(40));
        check_every_split::<Http>(|| cfg(40), &input, &expected);
        assert_eq!(bytewise::<Http>(&mut cfg(40), &input, 3).out, expected);
    }

    #[test]
    fn connection_close_is_honoured_and_later_requests_ignored() {
        let input = [
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" as &[u8],
            GET,
        ]
        .concat();
        let run = drive::<Http>(&mut cfg(3), &[&input], 1 << 16, false);
        let text = String::from_utf8_lossy(&run.out).into_owned();
        assert!(text.contains("Connection: close\r\n"), "{text}");
        assert_eq!(text.matches("HTTP/1.1 200").count(), 1);
        assert!(run.wants_close);
        assert_eq!(run.error, None);
    }

    #[test]
    fn http10_closes_unless_keep_alive() {
        let run = drive::<Http>(&mut cfg(3), &[b"GET / HTTP/1.0\r\n\r\n"], 1 << 16, false);
        assert!(run.wants_close);
        assert!(String::from_utf8_lossy(&run.out).contains("Connection: close"));
        let run = drive::<Http>(
            &mut cfg(3),
            &[b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"],
            1 << 16,
            false,
        );
        assert!(!run.wants_close);
        assert!(String::from_utf8_lossy(&run.out).contains("Connection: keep-alive"));
    }

    #[test]
    fn malformed_head_gets_400_and_closes() {
        for bad in [
            &b"GET / HTTP/1.1\r\nHost x\r\n\r\n"[..],
            b"\x00\x01garbage\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\n",
        ] {
            let run = drive::<Http>(&mut cfg(3), &[bad, GET], 1 << 16, false);
            let text = String::from_utf8_lossy(&run.out).into_owned();
            assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
            assert!(text.contains("Connection: close"));
            assert!(!text.contains("200 OK"), "nothing after the 400: {text}");
            assert!(
                matches!(run.error, Some(AppError::Malformed { .. })),
                "{:?}",
                run.error
            );
            assert!(run.wants_close);
        }
    }

    #[test]
    fn bad_content_length_gets_400() {
        for cl in ["x", "-1", "1, 2", ""] {
            let req = format!("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: {cl}\r\n\r\n");
            let run = drive::<Http>(&mut cfg(3), &[req.as_bytes()], 1 << 16, false);
            assert!(
                String::from_utf8_lossy(&run.out).starts_with("HTTP/1.1 400"),
                "{cl}"
            );
        }
    }

    #[test]
    fn request_body_is_skipped() {
        let input = [
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" as &[u8],
            GET,
        ]
        .concat();
        let mut expected =
            b"HTTP/1.1 405 Method Not Allowed\r\nServer: weir\r\nContent-Length: 19\r\nAllow: GET, HEAD\r\n\r\nmethod not allowed\n"
                .to_vec();
        expected.extend(ok(2));
        check_every_split::<Http>(|| cfg(2), &input, &expected);
    }

    #[test]
    fn transfer_encoding_gets_501() {
        let req = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        let run = drive::<Http>(&mut cfg(2), &[req], 1 << 16, false);
        assert!(String::from_utf8_lossy(&run.out).starts_with("HTTP/1.1 501"));
        assert!(run.wants_close);
    }

    #[test]
    fn oversized_head_gets_431_in_one_read_or_many() {
        let mut big = b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ".to_vec();
        big.resize(9000, b'a');
        for chunks in [vec![&big[..]], big.chunks(100).collect::<Vec<_>>()] {
            let run = drive::<Http>(&mut cfg(2), &chunks, 1 << 16, false);
            let text = String::from_utf8_lossy(&run.out).into_owned();
            assert!(text.starts_with("HTTP/1.1 431"), "{text}");
            assert!(matches!(run.error, Some(AppError::TooLarge { .. })));
        }
        let many: String = (0..70).map(|i| format!("X-{i}: v\r\n")).collect();
        let req = format!("GET / HTTP/1.1\r\nHost: x\r\n{many}\r\n");
        let run = drive::<Http>(&mut cfg(2), &[req.as_bytes()], 1 << 16, false);
        assert!(String::from_utf8_lossy(&run.out).starts_with("HTTP/1.1 431"));
    }

    #[test]
    fn large_body_streams_through_a_small_sink() {
        let run = drive::<Http>(&mut cfg(100_000), &[GET], 1000, false);
        assert_eq!(run.out, ok(100_000));
    }

    #[test]
    fn reads_no_next_request_while_a_body_is_owed() {
        let mut c = cfg(10_000);
        let mut h = Http::accept(&mut c, Instant::ZERO, 0);
        let input = [GET, GET].concat();
        assert_eq!(
            h.on_data(&mut c, Instant::ZERO, &input, &mut Full),
            Ok(GET.len())
        );
        assert!(h.output_pending(&c));
        assert_eq!(h.on_data(&mut c, Instant::ZERO, GET, &mut Full), Ok(0));
    }

    #[test]
    fn peer_close_closes_after_the_answers() {
        let run = drive::<Http>(&mut cfg(5), &[GET], 1 << 16, true);
        assert_eq!(run.out, ok(5));
        assert!(run.wants_close);
    }
}
