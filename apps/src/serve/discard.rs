//! weir-sink's application as an engine (`--app sink`): every byte is consumed as soon as
//! it is in order, optionally hashed (SHA-256, `--digest`); nothing is written back; the
//! connection closes when the peer closes (RFC 863's discard, over TCP).

use sha2::{Digest, Sha256};
use stack::time::Instant;

use super::{App, AppError, Sink};

/// The sink app's settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct Config {
    /// Hash each connection's bytes.
    pub digest: bool,
}

/// One discarding connection.
#[derive(Debug)]
pub struct Discard {
    hasher: Option<Sha256>,
    bytes: u64,
    peer_closed: bool,
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
}

impl App for Discard {
    type Server = Config;

    fn accept(cfg: &mut Config, _now: Instant, _token: u64) -> Self {
        Self {
            hasher: cfg.digest.then(Sha256::new),
            bytes: 0,
            peer_closed: false,
        }
    }

    fn on_data<S: Sink + ?Sized>(
        &mut self,
        _cfg: &mut Config,
        _now: Instant,
        input: &[u8],
        _out: &mut S,
    ) -> Result<usize, AppError> {
        if let Some(h) = self.hasher.as_mut() {
            h.update(input);
        }
        self.bytes += input.len() as u64;
        Ok(input.len())
    }

    fn poll_output<S: Sink + ?Sized>(
        &mut self,
        _cfg: &mut Config,
        _now: Instant,
        _out: &mut S,
    ) -> Result<(), AppError> {
        Ok(())
    }

    fn on_peer_closed(&mut self, _cfg: &mut Config, _now: Instant) {
        self.peer_closed = true;
    }

    fn output_pending(&self, _cfg: &Config) -> bool {
        false
    }

    fn wants_close(&self, _cfg: &Config) -> bool {
        self.peer_closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::testing::drive;

    #[test]
    fn consumes_everything_writes_nothing_and_digests_it() {
        let mut cfg = Config { digest: true };
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
}
