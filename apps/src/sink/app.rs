//! The application side of weir-sink on one core: it accepts every connection, consumes
//! every byte as soon as it is in order (optionally hashing it), and closes when the peer
//! closes.

use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use dpdk::Mbuf;
use sha2::{Digest, Sha256};
use stack::pipeline::Pipeline;
use stack::tcp::{ConnId, Event};
use stack::time::Instant;

use crate::report::DigestRecord;

/// Longest list of per-connection digests a core keeps (bounded like everything else).
const MAX_DIGESTS: usize = 100_000;

/// One connection's name, byte count and running digest.
pub(crate) struct ConnDigest {
    flow: String,
    local_port: u16,
    hasher: Option<Sha256>,
    bytes: u64,
}

/// The sink's per-connection state, indexed by the connection's table slot: a lookup per
/// event is an index and a generation check, not a hash (SipHash showed in the profile).
#[derive(Default)]
pub(crate) struct ConnMap {
    slots: Vec<Option<(ConnId, ConnDigest)>>,
}

impl ConnMap {
    fn insert(&mut self, id: ConnId, c: ConnDigest) {
        let i = id.index() as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some((id, c));
    }

    fn get_mut(&mut self, id: ConnId) -> Option<&mut ConnDigest> {
        match self.slots.get_mut(id.index() as usize) {
            Some(Some((k, c))) if *k == id => Some(c),
            _ => None,
        }
    }

    fn remove(&mut self, id: ConnId) -> Option<ConnDigest> {
        let slot = self.slots.get_mut(id.index() as usize)?;
        match slot {
            Some((k, _)) if *k == id => slot.take().map(|(_, c)| c),
            _ => None,
        }
    }

    /// The connections held.
    pub(crate) fn ids(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.slots.iter().flatten().map(|(k, _)| *k)
    }

    /// Every connection's state, the map consumed.
    pub(crate) fn into_values(self) -> impl Iterator<Item = ConnDigest> {
        self.slots.into_iter().flatten().map(|(_, c)| c)
    }
}

/// The sink application on one core: consume everything, hash it, close when the peer does.
pub(crate) struct SinkApp {
    pub(crate) digest: bool,
    pub(crate) conns: ConnMap,
    pub(crate) done: Vec<DigestRecord>,
    pub(crate) closed: Arc<ArrayQueue<DigestRecord>>,
}

impl SinkApp {
    /// Answers every event the pipeline's TCP has queued: opens, reads, closes.
    pub(crate) fn serve(&mut self, p: &mut Pipeline<Mbuf>, now: Instant) {
        while let Some(ev) = p.tcp().poll_event() {
            match ev {
                Event::Opened(id) => {
                    let flow = p.tcp().flow(id);
                    let (name, port) = flow
                        .map(|f| (format!("{f:?}"), f.dport))
                        .unwrap_or_default();
                    self.conns.insert(
                        id,
                        ConnDigest {
                            flow: name,
                            local_port: port,
                            hasher: self.digest.then(Sha256::new),
                            bytes: 0,
                        },
                    );
                }
                Event::Readable(id) => self.consume(p, id),
                Event::PeerClosed(id) => {
                    self.consume(p, id);
                    let _ = p.tcp().close(now, id);
                }
                Event::Closed(id) => self.finish(id, "closed"),
                Event::Reset(id) => self.finish(id, "reset"),
                // weir-sink never writes.
                Event::Writable(_) => {}
            }
        }
    }

    fn consume(&mut self, p: &mut Pipeline<Mbuf>, id: ConnId) {
        let c = self.conns.get_mut(id);
        let _ = p.tcp().recv(id, |slices| {
            let mut n = 0usize;
            for s in slices {
                n += usize::from(s.len);
            }
            if let Some(c) = c {
                if let Some(h) = c.hasher.as_mut() {
                    for s in slices {
                        h.update(s.bytes());
                    }
                }
                c.bytes += n as u64;
            }
            n
        });
    }

    fn finish(&mut self, id: ConnId, end: &'static str) {
        let Some(c) = self.conns.remove(id) else {
            return;
        };
        self.record(c, end);
    }

    /// Keeps `c`'s digest (when hashing), ended as `end`, and hands it to the printer.
    pub(crate) fn record(&mut self, c: ConnDigest, end: &'static str) {
        let Some(h) = c.hasher else { return };
        let rec = DigestRecord {
            flow: c.flow,
            local_port: c.local_port,
            bytes: c.bytes,
            sha256: hex(&h.finalize()),
            end,
            // The core's queue is added when the cores' results are merged.
            queue: None,
        };
        let _ = self.closed.push(rec.clone());
        if self.done.len() < MAX_DIGESTS {
            self.done.push(rec);
        }
    }
}

/// Lower-case hexadecimal of `b` (digests as `sha256sum` prints them).
pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
