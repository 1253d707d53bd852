//! Accepting connections so that no one of them can hold up the others: every accepted
//! connection becomes a non-blocking pending handshake with a deadline of its own, and
//! [`Handshakes::poll`] advances all of them at once. Used by rank 0's rendezvous and by
//! every rank's mesh listener.
//!
//! The protocol is the same on both: the accepting side opens with `magic` and a fresh
//! nonce, the connecting side answers with exactly `hello_len` bytes starting with the
//! same `magic`. This module reads those bytes and nothing more (a client that sends a
//! megabyte is read 90 bytes of); the caller verifies the tag. A connection that sends
//! the wrong magic, closes early or is still short of its hello after `wait` is dropped,
//! and the reason is kept, with the peer's address, so a rendezvous that ends without a
//! rank can say what went wrong instead of only "never joined". At most [`MAX_PENDING`]
//! handshakes are in flight: a flood evicts its own oldest connections, and an honest rank,
//! which answers in a round trip, still gets through.

use crate::auth::{nonce, NONCE};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Handshakes in flight at once; beyond it the oldest is dropped for the newest.
pub const MAX_PENDING: usize = 256;
/// Failed handshakes whose causes are kept word for word (the rest are counted).
const KEPT_FAILURES: usize = 4;

/// A connection whose hello has arrived in full (not yet verified).
pub struct Arrived {
    /// Blocking again, with no timeouts set.
    pub stream: TcpStream,
    pub peer: SocketAddr,
    /// The nonce this side opened with: the hello's tag must cover it.
    pub challenge: [u8; NONCE],
    /// Exactly the hello's bytes (magic first).
    pub hello: Vec<u8>,
}

struct Pending {
    stream: TcpStream,
    peer: SocketAddr,
    challenge: [u8; NONCE],
    hello: Vec<u8>,
    opened: Instant,
    deadline: Instant,
}

enum Progress {
    Waiting,
    Done,
    Failed(String),
}

/// Every handshake in flight on one listener, and what became of the failed ones.
pub struct Handshakes {
    listener: TcpListener,
    magic: [u8; 4],
    hello_len: usize,
    wait: Duration,
    pending: VecDeque<Pending>,
    failures: Vec<String>,
    failed: usize,
}

impl Handshakes {
    /// Accept on `listener` (made non-blocking), opening each connection with `magic` and
    /// a nonce and giving it `wait` to send `hello_len` bytes.
    pub fn new(
        listener: TcpListener,
        magic: u32,
        hello_len: usize,
        wait: Duration,
    ) -> Result<Handshakes, String> {
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        Ok(Handshakes {
            listener,
            magic: magic.to_le_bytes(),
            hello_len,
            wait,
            pending: VecDeque::new(),
            failures: Vec::new(),
            failed: 0,
        })
    }

    /// Accept every connection waiting, read what each pending one has sent, and return
    /// the hellos now complete. Never blocks; never fails (a broken connection or a failed
    /// accept is recorded and the listener stays open). `deadline` caps every handshake's
    /// wait, so none outlives the caller's own timeout.
    pub fn poll(&mut self, deadline: Instant) -> Vec<Arrived> {
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => self.open(stream, peer, deadline),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of file descriptors, most likely: make room, try again next poll.
                    if let Some(oldest) = self.pending.pop_front() {
                        self.fail(format!(
                            "dropped the handshake from {} to make room: accepting another connection failed",
                            oldest.peer
                        ));
                    }
                    self.fail(format!("accepting a connection failed: {e}"));
                    break;
                }
            }
        }
        let now = Instant::now();
        let mut arrived = Vec::new();
        let mut still = VecDeque::with_capacity(self.pending.len());
        while let Some(mut p) = self.pending.pop_front() {
            match p.advance(&self.magic, self.hello_len, now) {
                Progress::Waiting => still.push_back(p),
                Progress::Done => {
                    if p.stream.set_nonblocking(false).is_ok() {
                        arrived.push(Arrived {
                            stream: p.stream,
                            peer: p.peer,
                            challenge: p.challenge,
                            hello: p.hello,
                        });
                    }
                }
                Progress::Failed(why) => self.fail(why),
            }
        }
        self.pending = still;
        arrived
    }

    /// True while some handshake is still being read.
    pub fn busy(&self) -> bool {
        !self.pending.is_empty()
    }

    fn open(&mut self, stream: TcpStream, peer: SocketAddr, deadline: Instant) {
        let Ok(challenge) = nonce() else {
            return self.fail(format!("no random source for a nonce for {peer}"));
        };
        let mut opening = self.magic.to_vec();
        opening.extend_from_slice(&challenge);
        // A fresh socket's send buffer takes 20 bytes at once; one that cannot is dropped.
        let sent = stream
            .set_nonblocking(true)
            .and_then(|()| stream.set_nodelay(true))
            .and_then(|()| (&stream).write(&opening));
        if !matches!(sent, Ok(n) if n == opening.len()) {
            return self.fail(format!("could not send the handshake's opening to {peer}"));
        }
        if self.pending.len() >= MAX_PENDING {
            if let Some(oldest) = self.pending.pop_front() {
                self.fail(format!(
                    "dropped the handshake from {}: more than {MAX_PENDING} at once",
                    oldest.peer
                ));
            }
        }
        self.pending.push_back(Pending {
            stream,
            peer,
            challenge,
            hello: Vec::with_capacity(self.hello_len),
            opened: Instant::now(),
            deadline: (Instant::now() + self.wait).min(deadline),
        });
    }

    /// Record that a handshake failed: `what` says why and names the peer's address.
    pub fn fail(&mut self, what: String) {
        self.failed += 1;
        if self.failures.len() < KEPT_FAILURES {
            self.failures.push(what);
        }
    }

    /// "ranks 2, 5 never {did} within N s", with why handshakes failed meanwhile: the
    /// message of a wait that ended without every rank.
    /// Handshakes still in flight count as timed out (the wait is over).
    pub fn missing(&mut self, ranks: &[usize], did: &str, timeout: Duration) -> String {
        self.expire();
        let mut message = format!(
            "rank{} {} never {did} within {} s",
            if ranks.len() > 1 { "s" } else { "" },
            rank_list(ranks),
            timeout.as_secs()
        );
        if let Some(failures) = self.failures() {
            message.push_str(&format!("; meanwhile {failures}"));
        }
        message
    }

    /// End every handshake still in flight, as timed out: the caller stopped waiting, and
    /// a client that connected in its last seconds is as much a cause as an earlier one.
    fn expire(&mut self) {
        let now = Instant::now();
        while let Some(mut p) = self.pending.pop_front() {
            p.deadline = now;
            if let Progress::Failed(why) = p.advance(&self.magic, self.hello_len, now) {
                self.fail(why);
            }
        }
    }

    /// What went wrong with the handshakes that failed, for the message of a rendezvous
    /// that ends without every rank (`None` when none failed).
    pub fn failures(&self) -> Option<String> {
        if self.failed == 0 {
            return None;
        }
        let mut s = format!(
            "{} connection{} failed the handshake: {}",
            self.failed,
            if self.failed == 1 { "" } else { "s" },
            self.failures.join("; ")
        );
        if self.failed > self.failures.len() {
            s.push_str(&format!(
                " (and {} more)",
                self.failed - self.failures.len()
            ));
        }
        Some(s)
    }
}

impl Pending {
    fn advance(&mut self, magic: &[u8; 4], hello_len: usize, now: Instant) -> Progress {
        let mut buf = [0u8; 256];
        while self.hello.len() < hello_len {
            let want = (hello_len - self.hello.len()).min(buf.len());
            match (&self.stream).read(&mut buf[..want]) {
                Ok(0) => {
                    return Progress::Failed(format!(
                        "{} closed the connection after {} of the handshake's {hello_len} bytes",
                        self.peer,
                        self.hello.len()
                    ))
                }
                Ok(n) => {
                    self.hello.extend_from_slice(&buf[..n]);
                    let head = self.hello.len().min(4);
                    if self.hello[..head] != magic[..head] {
                        return Progress::Failed(format!(
                            "{} sent bytes that are not a dic run handshake (another program, or another version of dic)",
                            self.peer
                        ));
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    return Progress::Failed(format!(
                        "the connection from {} failed: {e}",
                        self.peer
                    ))
                }
            }
        }
        if self.hello.len() == hello_len {
            Progress::Done
        } else if now >= self.deadline {
            Progress::Failed(format!(
                "timed out reading the handshake from {} ({} of {hello_len} bytes in {:.1} s)",
                self.peer,
                self.hello.len(),
                now.duration_since(self.opened).as_secs_f64()
            ))
        } else {
            Progress::Waiting
        }
    }
}

/// Ranks as "2, 5", for messages.
fn rank_list(ranks: &[usize]) -> String {
    ranks
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    /// A silent client opened first does not keep a later one's hello waiting; garbage is
    /// dropped at its magic; the silent one times out with its cause kept.
    #[test]
    fn hellos_are_read_side_by_side_and_failures_keep_their_cause() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut hs =
            Handshakes::new(listener, 0x1234_5678, 10, Duration::from_millis(300)).unwrap();
        let far = Instant::now() + Duration::from_secs(10);
        let silent = TcpStream::connect(addr).unwrap();
        let mut garbage = TcpStream::connect(addr).unwrap();
        let mut good = TcpStream::connect(addr).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(hs.poll(far).is_empty());
        let mut opening = [0u8; 4 + NONCE];
        good.read_exact(&mut opening).unwrap();
        assert_eq!(opening[..4], 0x1234_5678u32.to_le_bytes());
        garbage.write_all(&[0xFF; 64]).unwrap();
        let mut hello = 0x1234_5678u32.to_le_bytes().to_vec();
        hello.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9]); // one byte more than asked
        good.write_all(&hello).unwrap();
        let start = Instant::now();
        let arrived = loop {
            let a = hs.poll(far);
            if !a.is_empty() {
                break a;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        assert!(
            start.elapsed() < Duration::from_millis(200),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(arrived.len(), 1);
        assert_eq!(arrived[0].hello, hello[..10]);
        assert_eq!(arrived[0].challenge[..], opening[4..]);
        assert!(hs.busy(), "the silent client is still pending");
        std::thread::sleep(Duration::from_millis(350));
        assert!(hs.poll(far).is_empty());
        assert!(!hs.busy());
        let failures = hs.failures().unwrap();
        assert!(
            failures.starts_with("2 connections failed the handshake"),
            "{failures}"
        );
        assert!(failures.contains("not a dic run handshake"), "{failures}");
        assert!(
            failures.contains("timed out reading the handshake from 127.0.0.1:"),
            "{failures}"
        );
        assert!(failures.contains(" (0 of 10 bytes in 0."), "{failures}");
        drop(silent);
    }
}
