//! The server side of sockperf's message protocol over TCP, as sockperf 3.7 speaks it
//! (`ping-pong --tcp`, `under-load --tcp`, `throughput --tcp`).
//!
//! Read first: sockperf 3.7 `src/message.h` (the header) and `src/server.h`
//! (`Server::server_receive_then_send`, what the server answers).
//!
//! Every message starts with a 14-byte header, all fields big-endian (`hton` in
//! `MsgHeader`), packed:
//!
//! | bytes | field                                                        |
//! |-------|--------------------------------------------------------------|
//! | 0..8  | sequence number                                              |
//! | 8..10 | flags: `1` client, `2` pong request, `4` warm-up message     |
//! | 10..14| length of the whole message, header included                 |
//!
//! The rest of the message is payload. Over TCP messages are a byte stream: one may arrive
//! in pieces, several in one read. The server, per complete message:
//! - ignores it if the client flag is clear (a server's own reply looped back);
//! - ignores warm-up messages;
//! - answers one with the pong-request flag by sending the same message back (same sequence
//!   number, length and payload) with the client flag cleared. In ping-pong every message
//!   asks for a reply; in under-load one in `--reply-every`; in throughput none.
//!
//! A length beyond the maximum message size (65,507, sockperf's `MAX_PAYLOAD_SIZE`, unless
//! the server was started with a larger `-m`) makes sockperf close the connection; so does
//! this engine, and for a length below the header's own 14 bytes, which sockperf does not
//! check. Replies are streamed: the header is staged (14 bytes), then payload bytes pass from
//! input to sink as the sink takes them, so nothing larger than a header is buffered.

use stack::time::Instant;

use super::{App, AppError, Sink, Staged};

const APP: &str = "sockperf";

/// The header's length on the wire (`MsgHeader::EFFECTIVE_SIZE`).
pub const HEADER_LEN: usize = 14;
/// Flag bit: sent by a client.
pub const FLAG_CLIENT: u16 = 1;
/// Flag bit: the sender wants this message back.
pub const FLAG_PONG_REQUEST: u16 = 2;
/// Flag bit: a warm-up message, never answered.
pub const FLAG_WARMUP: u16 = 4;
/// sockperf 3.7's default largest message (`MAX_PAYLOAD_SIZE` in `defs.cpp`).
pub const DEFAULT_MAX_MESSAGE: u32 = 65_507;

/// A message header, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The sender's sequence number.
    pub seq: u64,
    /// `FLAG_*` bits.
    pub flags: u16,
    /// The whole message's length, header included.
    pub len: u32,
}

impl Header {
    /// Decodes the 14 header bytes.
    pub fn parse(b: &[u8; HEADER_LEN]) -> Self {
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&b[0..8]);
        Self {
            seq: u64::from_be_bytes(seq),
            flags: u16::from_be_bytes([b[8], b[9]]),
            len: u32::from_be_bytes([b[10], b[11], b[12], b[13]]),
        }
    }

    /// Encodes the header.
    pub fn emit(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&self.seq.to_be_bytes());
        b[8..10].copy_from_slice(&self.flags.to_be_bytes());
        b[10..14].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    /// Whether the server answers this message (client flag, pong request, not warm-up).
    pub fn wants_reply(&self) -> bool {
        self.flags & FLAG_CLIENT != 0
            && self.flags & FLAG_PONG_REQUEST != 0
            && self.flags & FLAG_WARMUP == 0
    }
}

/// The sockperf server's settings on one core.
#[derive(Debug, Clone)]
pub struct Config {
    /// Largest message accepted (sockperf server's `-m`); longer ones close the connection.
    pub max_message: u32,
    /// sockperf's `--dont-reply`: count messages, answer none.
    pub dont_reply: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_message: DEFAULT_MAX_MESSAGE,
            dont_reply: false,
        }
    }
}

/// Counters of one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Complete messages received, of every kind.
    pub messages: u64,
    /// Messages answered.
    pub replies: u64,
    /// Warm-up messages (never answered).
    pub warmups: u64,
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// Collecting the header: `have` of 14 bytes in `hdr`.
    Header { have: usize },
    /// Passing the payload: `left` bytes to go, echoed to the sink when `reply`.
    Payload { left: u32, reply: bool },
    /// Gave up: discard everything.
    Failed,
}

/// One sockperf connection.
#[derive(Debug)]
pub struct Sockperf {
    hdr: [u8; HEADER_LEN],
    state: State,
    staged: Staged,
    peer_closed: bool,
    counts: Counts,
}

impl Sockperf {
    /// This connection's counters.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    fn fail(&mut self, e: AppError) -> Result<usize, AppError> {
        self.state = State::Failed;
        Err(e)
    }
}

impl App for Sockperf {
    type Server = Config;

    fn accept(_server: &mut Config, _now: Instant, _token: u64) -> Self {
        Self {
            hdr: [0; HEADER_LEN],
            state: State::Header { have: 0 },
            staged: Staged::new(HEADER_LEN),
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
        while used < input.len() {
            if !self.staged.flush(out) {
                break;
            }
            match self.state {
                State::Failed => return Ok(input.len()),
                State::Header { have } => {
                    let n = (HEADER_LEN - have).min(input.len() - used);
                    self.hdr[have..have + n].copy_from_slice(&input[used..used + n]);
                    used += n;
                    if have + n < HEADER_LEN {
                        self.state = State::Header { have: have + n };
                        continue;
                    }
                    let h = Header::parse(&self.hdr);
                    if (h.len as usize) < HEADER_LEN {
                        return self.fail(AppError::Malformed {
                            app: APP,
                            reason: format!(
                                "message length {} is below the header's 14 bytes",
                                h.len
                            ),
                        });
                    }
                    if h.len > cfg.max_message {
                        return self.fail(AppError::TooLarge {
                            app: APP,
                            what: "message",
                            len: u64::from(h.len),
                            max: u64::from(cfg.max_message),
                        });
                    }
                    let reply = h.wants_reply() && !cfg.dont_reply;
                    if reply {
                        // The reply is the message itself, marked as the server's
                        // (`setServer` in server.h).
                        let r = Header {
                            flags: h.flags & !FLAG_CLIENT,
                            ..h
                        };
                        // Capacity is exactly one header and the stage was just emptied.
                        let _ = self.staged.push(&r.emit());
                    }
                    self.state = State::Payload {
                        left: h.len - HEADER_LEN as u32,
                        reply,
                    };
                    self.finish_if_done(h);
                }
                State::Payload { left, reply } => {
                    let avail = (input.len() - used).min(left as usize);
                    let n = if reply {
                        out.write(&input[used..used + avail])
                    } else {
                        avail
                    };
                    used += n;
                    self.state = State::Payload {
                        left: left - n as u32,
                        reply,
                    };
                    if n < avail {
                        break;
                    }
                    let h = Header::parse(&self.hdr);
                    self.finish_if_done(h);
                }
            }
        }
        Ok(used)
    }

    fn poll_output<S: Sink + ?Sized>(
        &mut self,
        _cfg: &mut Config,
        _now: Instant,
        out: &mut S,
    ) -> Result<(), AppError> {
        self.staged.flush(out);
        Ok(())
    }

    fn on_peer_closed(&mut self, _cfg: &mut Config, _now: Instant) {
        self.peer_closed = true;
    }

    fn output_pending(&self, _cfg: &Config) -> bool {
        !self.staged.is_empty()
    }

    fn wants_close(&self, _cfg: &Config) -> bool {
        self.peer_closed || matches!(self.state, State::Failed)
    }
}

impl Sockperf {
    /// Ends the message once its payload is through: counts it, expects the next header.
    fn finish_if_done(&mut self, h: Header) {
        if let State::Payload { left: 0, reply } = self.state {
            self.counts.messages += 1;
            if h.flags & FLAG_WARMUP != 0 && h.flags & FLAG_CLIENT != 0 {
                self.counts.warmups += 1;
            }
            if reply {
                self.counts.replies += 1;
            }
            self.state = State::Header { have: 0 };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::testing::{bytewise, check_every_split, drive, Full};

    fn msg(seq: u64, flags: u16, payload: &[u8]) -> Vec<u8> {
        let h = Header {
            seq,
            flags,
            len: (HEADER_LEN + payload.len()) as u32,
        };
        let mut m = h.emit().to_vec();
        m.extend_from_slice(payload);
        m
    }

    #[test]
    fn header_layout_is_big_endian_and_packed() {
        let h = Header {
            seq: 0x0102_0304_0506_0708,
            flags: 0x0003,
            len: 0x0000_0040,
        };
        assert_eq!(h.emit(), [1, 2, 3, 4, 5, 6, 7, 8, 0, 3, 0, 0, 0, 0x40]);
        assert_eq!(Header::parse(&h.emit()), h);
    }

    #[test]
    fn ping_pong_reply_clears_the_client_bit_at_every_split() {
        let m = msg(7, FLAG_CLIENT | FLAG_PONG_REQUEST, b"payload!");
        let r = msg(7, FLAG_PONG_REQUEST, b"payload!");
        check_every_split::<Sockperf>(Config::default, &m, &r);
    }

    #[test]
    fn under_load_answers_only_pong_requests() {
        // Several messages in one read, as under-load sends them: seq 0 asks, 1-3 do not.
        let mut input = Vec::new();
        let mut expected = Vec::new();
        for seq in 0..8u64 {
            let flags = if seq % 4 == 0 {
                FLAG_CLIENT | FLAG_PONG_REQUEST
            } else {
                FLAG_CLIENT
            };
            input.extend(msg(seq, flags, &[seq as u8; 50]));
            if seq % 4 == 0 {
                expected.extend(msg(seq, FLAG_PONG_REQUEST, &[seq as u8; 50]));
            }
        }
        check_every_split::<Sockperf>(Config::default, &input, &expected);
        let run = bytewise::<Sockperf>(&mut Config::default(), &input, 3);
        assert_eq!(run.out, expected);
    }

    #[test]
    fn throughput_warmup_and_server_messages_get_no_reply() {
        let mut input = msg(1, FLAG_CLIENT, b"tp");
        input.extend(msg(
            2,
            FLAG_CLIENT | FLAG_PONG_REQUEST | FLAG_WARMUP,
            b"warm",
        ));
        input.extend(msg(3, FLAG_PONG_REQUEST, b"not from a client"));
        let mut cfg = Config::default();
        let mut c = Sockperf::accept(&mut cfg, Instant::ZERO, 0);
        let mut sink = crate::serve::SendBuf::new(1024);
        assert_eq!(
            c.on_data(&mut cfg, Instant::ZERO, &input, &mut sink),
            Ok(input.len())
        );
        assert!(sink.is_empty());
        assert_eq!(
            c.counts(),
            Counts {
                messages: 3,
                replies: 0,
                warmups: 1
            }
        );
    }

    #[test]
    fn dont_reply_counts_without_answering() {
        let m = msg(1, FLAG_CLIENT | FLAG_PONG_REQUEST, b"x");
        let run = drive::<Sockperf>(
            &mut Config {
                dont_reply: true,
                ..Config::default()
            },
            &[&m],
            64,
            false,
        );
        assert!(run.out.is_empty());
    }

    #[test]
    fn header_only_message_is_answered() {
        let m = msg(9, FLAG_CLIENT | FLAG_PONG_REQUEST, b"");
        check_every_split::<Sockperf>(Config::default, &m, &msg(9, FLAG_PONG_REQUEST, b""));
    }

    #[test]
    fn oversized_and_undersized_lengths_close() {
        let mut big = Header {
            seq: 1,
            flags: FLAG_CLIENT,
            len: DEFAULT_MAX_MESSAGE + 1,
        }
        .emit()
        .to_vec();
        big.extend_from_slice(b"more bytes that are discarded");
        let run = drive::<Sockperf>(&mut Config::default(), &[&big], 64, false);
        assert!(
            matches!(run.error, Some(AppError::TooLarge { .. })),
            "{:?}",
            run.error
        );
        assert!(run.wants_close);
        let small = Header {
            seq: 1,
            flags: FLAG_CLIENT,
            len: 13,
        }
        .emit();
        let run = drive::<Sockperf>(&mut Config::default(), &[&small], 64, false);
        assert!(
            matches!(run.error, Some(AppError::Malformed { .. })),
            "{:?}",
            run.error
        );
        assert!(run.wants_close);
    }

    #[test]
    fn stops_consuming_while_the_reply_cannot_be_written() {
        let m = msg(1, FLAG_CLIENT | FLAG_PONG_REQUEST, b"abc");
        let mut cfg = Config::default();
        let mut c = Sockperf::accept(&mut cfg, Instant::ZERO, 0);
        // The header is read and its reply staged; the payload waits for room.
        assert_eq!(
            c.on_data(&mut cfg, Instant::ZERO, &m, &mut Full),
            Ok(HEADER_LEN)
        );
        assert!(c.output_pending(&cfg));
        assert_eq!(
            c.on_data(&mut cfg, Instant::ZERO, &m[HEADER_LEN..], &mut Full),
            Ok(0)
        );
    }
}
