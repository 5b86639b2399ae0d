//! The application's side of a [`Pipeline`] in tests: what a receiving program does
//! after each loop turn (take the events, read every connection that has bytes).

use stack::buf::PacketBuf;
use stack::pipeline::Pipeline;
use stack::tcp::Event;

/// Takes the pending events and, for each `Event::Readable`, reads all the connection's
/// in-order bytes with [`Tcp::recv`](stack::tcp::Tcp::recv), appending them to `got`
/// (which is how the tests compare what arrived with what was sent). Other events are
/// dropped. Returns the bytes consumed; a failed `recv` (an unknown connection right
/// after its own `Readable`) fails the test.
pub fn read_readable<B: PacketBuf>(p: &mut Pipeline<B>, got: &mut Vec<u8>) -> usize {
    let ids: Vec<_> = p.tcp().events().collect();
    let mut read = 0;
    for e in ids {
        if let Event::Readable(id) = e {
            read += p
                .tcp()
                .recv(id, |s| {
                    for x in s {
                        got.extend_from_slice(x.bytes());
                    }
                    s.iter().map(|x| x.len as usize).sum()
                })
                .expect("recv on a connection that was just readable");
        }
    }
    read
}
