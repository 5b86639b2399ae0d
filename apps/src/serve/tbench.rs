//! The server side of tbench's protocol, as dbench 4.0's `tbench_srv` answers the `tbench`
//! client.
//!
//! Read first: dbench's `tbench_srv.c` (`server`) and `sockio.c` (`do_packets`).
//!
//! tbench emulates SMB traffic with request/response pairs of chosen sizes:
//! - a request is a 4-byte big-endian length `n` and `n` bytes; the first 4 of those are the
//!   big-endian length `m` of the response body the client wants (`do_packets` writes
//!   `send_size - 4` and `recv_size - 4`);
//! - `tbench_srv` reads the whole request, then writes a 4-byte big-endian `m` and `m`
//!   bytes taken from its buffer (the request's own bytes, then whatever its buffer held).
//!   The client checks the length and discards the body (`MSG_TRUNC`).
//!
//! This engine answers the same way without buffering the request: it keeps the 8 header
//! bytes, counts the rest of the request away, then writes the 4-byte length, `m` again
//! (as `tbench_srv`'s buffer holds it at that place) and zeros for the rest of the body, all
//! generated as the sink takes it. It reads the next request only once the answer is out.
//!
//! `tbench_srv` keeps requests and responses within its 70,000-byte buffer (`n + 4` must be
//! below it, or it prints "overflow in server!" and exits); this engine applies the same
//! bound to both and closes the connection instead. A request shorter than its own 4-byte
//! response length (n < 4) is malformed: `tbench_srv` would answer with a stale length.
//!
//! The client connects to port 7003 (`TCP_PORT` in `dbench.h`), fixed at build time.

use stack::time::Instant;

use super::{write_fill, App, AppError, Sink, Staged};

const APP: &str = "tbench";

/// The port tbench connects to (`TCP_PORT` in dbench's `dbench.h`).
pub const TBENCH_PORT: u16 = 7003;
/// `tbench_srv`'s buffer size; a request or response must stay below it with its length.
pub const BUF_LEN: u32 = 70_000;

#[derive(Debug, Clone, Copy)]
enum State {
    /// Collecting the request's length and the wanted response length.
    Header { have: usize },
    /// Skipping the rest of the request; then answering `m` bytes.
    Request { left: u32, m: u32 },
    /// Writing the response body: `left` bytes of `m` still owed after the staged prefix.
    Response { left: u32 },
    /// Gave up: discard everything.
    Failed,
}

/// Counters of one tbench connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests answered (the answer fully written).
    pub requests: u64,
    /// Request bytes received, lengths included.
    pub bytes_in: u64,
    /// Response bytes written, lengths included.
    pub bytes_out: u64,
}

/// One tbench connection.
#[derive(Debug)]
pub struct Tbench {
    hdr: [u8; 8],
    state: State,
    staged: Staged,
    peer_closed: bool,
    counts: Counts,
}

impl Tbench {
    /// This connection's counters.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    fn fail(&mut self, e: AppError) -> Result<usize, AppError> {
        self.state = State::Failed;
        Err(e)
    }

    /// Writes what is owed of the current response; true when all of it is out.
    fn push_response<S: Sink + ?Sized>(&mut self, out: &mut S) -> bool {
        let staged_before = self.staged.remaining();
        let staged_done = self.staged.flush(out);
        self.counts.bytes_out += (staged_before - self.staged.remaining()) as u64;
        let mut done = false;
        if staged_done {
            if let State::Response { left } = self.state {
                let w = write_fill(out, u64::from(left)) as u32;
                self.counts.bytes_out += u64::from(w);
                self.state = State::Response { left: left - w };
                if left == w {
                    self.state = State::Header { have: 0 };
                    self.counts.requests += 1;
                    done = true;
                }
            } else {
                done = true;
            }
        }
        done
    }
}

impl App for Tbench {
    type Server = ();

    fn accept(_server: &mut (), _now: Instant, _token: u64) -> Self {
        Self {
            hdr: [0; 8],
            state: State::Header { have: 0 },
            staged: Staged::new(8),
            peer_closed: false,
            counts: Counts::default(),
        }
    }

    fn on_data<S: Sink + ?Sized>(
        &mut self,
        _server: &mut (),
        _now: Instant,
        input: &[u8],
        out: &mut S,
    ) -> Result<usize, AppError> {
        let mut used = 0;
        while used < input.len() {
            match self.state {
                State::Failed => return Ok(input.len()),
                State::Response { .. } => {
                    if !self.push_response(out) {
                        break;
                    }
                }
                State::Header { have } => {
                    let n = (8 - have).min(input.len() - used);
                    self.hdr[have..have + n].copy_from_slice(&input[used..used + n]);
                    used += n;
                    self.counts.bytes_in += n as u64;
                    let have = have + n;
                    self.state = State::Header { have };
                    if have >= 4 {
                        let len = u32::from_be_bytes([
                            self.hdr[0],
                            self.hdr[1],
                            self.hdr[2],
                            self.hdr[3],
                        ]);
                        if u64::from(len) + 4 >= u64::from(BUF_LEN) {
                            return self.fail(AppError::TooLarge {
                                app: APP,
                                what: "request",
                                len: u64::from(len),
                                max: u64::from(BUF_LEN - 5),
                            });
                        }
                        if len < 4 {
                            return self.fail(AppError::Malformed {
                                app: APP,
                                reason: format!("request of {len} bytes holds no response length"),
                            });
                        }
                    }
                    if have == 8 {
                        let len = u32::from_be_bytes([
                            self.hdr[0],
                            self.hdr[1],
                            self.hdr[2],
                            self.hdr[3],
                        ]);
                        let m = u32::from_be_bytes([
                            self.hdr[4],
                            self.hdr[5],
                            self.hdr[6],
                            self.hdr[7],
                        ]);
                        if u64::from(m) + 4 >= u64::from(BUF_LEN) {
                            return self.fail(AppError::TooLarge {
                                app: APP,
                                what: "response",
                                len: u64::from(m),
                                max: u64::from(BUF_LEN - 5),
                            });
                        }
                        self.state = State::Request { left: len - 4, m };
                        self.start_response_if_read();
                    }
                }
                State::Request { left, m } => {
                    let n = (input.len() - used).min(left as usize);
                    used += n;
                    self.counts.bytes_in += n as u64;
                    self.state = State::Request {
                        left: left - n as u32,
                        m,
                    };
                    self.start_response_if_read();
                }
            }
        }
        // An answer completed by the last bytes goes out now, not on the next read.
        if matches!(self.state, State::Response { .. }) {
            self.push_response(out);
        }
        Ok(used)
    }

    fn poll_output<S: Sink + ?Sized>(
        &mut self,
        _server: &mut (),
        _now: Instant,
        out: &mut S,
    ) -> Result<(), AppError> {
        if matches!(self.state, State::Response { .. }) {
            self.push_response(out);
        }
        Ok(())
    }

    fn on_peer_closed(&mut self, _server: &mut (), _now: Instant) {
        self.peer_closed = true;
    }

    fn output_pending(&self, _server: &()) -> bool {
        matches!(self.state, State::Response { .. })
    }

    fn wants_close(&self, _server: &()) -> bool {
        self.peer_closed || matches!(self.state, State::Failed)
    }
}

impl Tbench {
    /// Once the whole request is read, stages the answer's length and first word.
    fn start_response_if_read(&mut self) {
        if let State::Request { left: 0, m } = self.state {
            let mut prefix = [0u8; 8];
            prefix[..4].copy_from_slice(&m.to_be_bytes());
            prefix[4..].copy_from_slice(&m.to_be_bytes());
            // The body's first bytes are `m` itself, as in tbench_srv's buffer; a body
            // shorter than 4 bytes takes only its part of it.
            let first = m.min(4) as usize;
            // Capacity is 8 and the stage is empty between requests.
            let _ = self.staged.push(&prefix[..4 + first]);
            self.state = State::Response {
                left: m - first as u32,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::testing::{bytewise, check_every_split, drive, Full};

    /// A request as `do_packets(send_size, recv_size)` builds it.
    fn request(send_size: u32, recv_size: u32) -> Vec<u8> {
        let mut r = vec![0xAB; send_size as usize];
        r[..4].copy_from_slice(&(send_size - 4).to_be_bytes());
        r[4..8].copy_from_slice(&(recv_size - 4).to_be_bytes());
        r
    }

    fn response(recv_size: u32) -> Vec<u8> {
        let m = recv_size - 4;
        let mut r = m.to_be_bytes().to_vec();
        r.extend_from_slice(&m.to_be_bytes()[..m.min(4) as usize]);
        r.resize(recv_size as usize, 0);
        r
    }

    #[test]
    fn setup_exchange_at_every_split() {
        // sio_setup's do_packets(child, 8, 8).
        check_every_split::<Tbench>(|| (), &request(8, 8), &response(8));
    }

    #[test]
    fn pipelined_requests_get_answers_in_order() {
        let sizes = [
            (8, 8),
            (39 + 20, 39 + 20 + 4096),
            (39 + 20 + 100, 39 + 16),
            (39 + 2, 39),
        ];
        let mut input = Vec::new();
        let mut expected = Vec::new();
        for (s, r) in sizes {
            input.extend(request(s, r));
            expected.extend(response(r));
        }
        check_every_split::<Tbench>(|| (), &input, &expected);
        assert_eq!(bytewise::<Tbench>(&mut (), &input, 5).out, expected);
    }

    #[test]
    fn short_response_takes_part_of_the_length_word() {
        // recv_size 6: m = 2, the body is the two high bytes of m.
        check_every_split::<Tbench>(|| (), &request(10, 6), &response(6));
    }

    #[test]
    fn largest_exchange_fits_tbench_srv_buffer() {
        let r = request(69_999, 69_999);
        let run = drive::<Tbench>(&mut (), &[&r], 4096, false);
        assert_eq!(run.error, None);
        assert_eq!(run.out.len(), 69_999);
    }

    #[test]
    fn overflowing_lengths_close() {
        let big = (BUF_LEN - 4).to_be_bytes();
        let run = drive::<Tbench>(&mut (), &[&big], 64, false);
        assert!(
            matches!(
                run.error,
                Some(AppError::TooLarge {
                    what: "request",
                    ..
                })
            ),
            "{:?}",
            run.error
        );
        assert!(run.wants_close);
        let mut r = request(8, 8);
        r[4..8].copy_from_slice(&(BUF_LEN - 4).to_be_bytes());
        let run = drive::<Tbench>(&mut (), &[&r], 64, false);
        assert!(
            matches!(
                run.error,
                Some(AppError::TooLarge {
                    what: "response",
                    ..
                })
            ),
            "{:?}",
            run.error
        );
    }

    #[test]
    fn request_without_response_length_is_malformed() {
        let run = drive::<Tbench>(&mut (), &[&[0, 0, 0, 3, 1, 2, 3]], 64, false);
        assert!(
            matches!(run.error, Some(AppError::Malformed { .. })),
            "{:?}",
            run.error
        );
        assert!(run.wants_close);
    }

    #[test]
    fn reads_no_further_request_while_an_answer_is_owed() {
        let mut input = request(8, 1000);
        input.extend(request(8, 8));
        let mut t = Tbench::accept(&mut (), Instant::ZERO, 0);
        assert_eq!(t.on_data(&mut (), Instant::ZERO, &input, &mut Full), Ok(8));
        assert!(t.output_pending(&()));
        assert_eq!(
            t.on_data(&mut (), Instant::ZERO, &input[8..], &mut Full),
            Ok(0)
        );
    }
}
