//! Echo (RFC 862 over TCP): every byte read is written back, in order.
//!
//! The engine holds nothing: it consumes exactly what the sink takes, so the bytes it cannot
//! answer yet stay in the receive queue (the window closes) until the send buffer drains.
//! It closes once the peer has closed and everything has been written back.

use stack::time::Instant;

use super::{App, AppError, Sink};

/// One echo connection.
#[derive(Debug, Default)]
pub struct Echo {
    peer_closed: bool,
    echoed: u64,
}

impl Echo {
    /// Bytes written back so far.
    pub fn echoed(&self) -> u64 {
        self.echoed
    }
}

impl App for Echo {
    type Server = ();

    fn accept(_server: &mut (), _now: Instant, _token: u64) -> Self {
        Self::default()
    }

    fn on_data<S: Sink + ?Sized>(
        &mut self,
        _server: &mut (),
        _now: Instant,
        input: &[u8],
        out: &mut S,
    ) -> Result<usize, AppError> {
        let n = out.write(input);
        self.echoed += n as u64;
        Ok(n)
    }

    fn poll_output<S: Sink + ?Sized>(
        &mut self,
        _server: &mut (),
        _now: Instant,
        _out: &mut S,
    ) -> Result<(), AppError> {
        Ok(())
    }

    fn on_peer_closed(&mut self, _server: &mut (), _now: Instant) {
        self.peer_closed = true;
    }

    fn output_pending(&self, _server: &()) -> bool {
        false
    }

    fn wants_close(&self, _server: &()) -> bool {
        self.peer_closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::testing::{bytewise, check_every_split, drive, Full};

    #[test]
    fn echoes_every_split() {
        let input: Vec<u8> = (0..=255u8).cycle().take(600).collect();
        check_every_split::<Echo>(|| (), &input, &input);
    }

    #[test]
    fn echoes_byte_by_byte_through_a_one_byte_sink() {
        let input = b"hello, weir";
        let run = bytewise::<Echo>(&mut (), input, 1);
        assert_eq!(run.out, input);
    }

    #[test]
    fn consumes_nothing_when_the_sink_is_full() {
        let mut e = Echo::accept(&mut (), Instant::ZERO, 0);
        assert_eq!(e.on_data(&mut (), Instant::ZERO, b"abc", &mut Full), Ok(0));
        assert!(!e.wants_close(&()));
    }

    #[test]
    fn closes_after_the_peer() {
        let run = drive::<Echo>(&mut (), &[b"x"], 16, true);
        assert!(run.wants_close);
        assert_eq!(run.out, b"x");
    }
}
