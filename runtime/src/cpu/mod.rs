//! The CPU backend: ranks are OS processes joined by TCP (loopback under `--local`), one
//! connection per pair of ranks that share a group. Sends never block the caller (a
//! writer thread per connection drains a queue), so ring steps cannot deadlock on full
//! socket buffers; receives block with the plan's timeout, and a closed connection, a
//! timeout or an abort frame becomes a [`CommError`] naming the rank to blame. A heartbeat
//! thread keeps every connection warm, so the timeout fires only on a rank that stopped
//! entirely, not on one that waits for someone else.
//!
//! This module is the transport (the authenticated mesh, frames, heartbeats, aborts);
//! [`collectives`] holds the algorithms on top of it.

use crate::auth::{JobKey, NONCE, TAG};
use crate::comm::{add_into, CommError, CommResult, Communicator};
use crate::handshake::Handshakes;
use std::cell::{Cell, RefCell};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod collectives;
pub use collectives::{AllReduceAlgorithm, CpuComm, HostBuffer};

const FRAME_MAGIC: u32 = 0x4449_4346; // "DICF"
const HANDSHAKE_MAGIC: u32 = 0x3248_4349; // "ICH2": version 2, authenticated
/// The longest a listener waits for one connection's handshake.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(2);
const KIND_DATA: u8 = 0;
const KIND_ABORT: u8 = 1;
/// Sent by every live rank to every peer while connected, so a rank waiting on a peer
/// that is itself waiting does not time out: only the neighbours of a rank that is truly
/// dead or hung (no heartbeats) blame it.
const KIND_HEARTBEAT: u8 = 2;
/// An abort frame that blames nobody in particular.
const NO_CULPRIT: u64 = u64::MAX;
const HEADER: usize = 4 + 1 + 8 + 8;
/// Bytes of a mesh hello: magic, rank, digest, tag.
const MESH_HELLO: usize = 4 + 8 + 8 + TAG;
/// Below this many bytes AllReduce takes the tree (fewer steps); above, the ring.
pub const TREE_THRESHOLD: usize = 64 * 1024;

struct Peer {
    reader: TcpStream,
    queue: Option<mpsc::Sender<Vec<u8>>>,
    writer: Option<JoinHandle<()>>,
    sent: Cell<u64>,
    received: Cell<u64>,
}

/// Every connection of this process, by world rank.
pub struct Mesh {
    pub rank: usize,
    pub world: usize,
    peers: Vec<Option<Peer>>,
    timeout: Duration,
    context: RefCell<String>,
    heartbeat: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

fn frame(kind: u8, seq: u64, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(HEADER + body.len());
    f.extend_from_slice(&FRAME_MAGIC.to_le_bytes());
    f.push(kind);
    f.extend_from_slice(&seq.to_le_bytes());
    f.extend_from_slice(&(body.len() as u64).to_le_bytes());
    f.extend_from_slice(body);
    f
}

impl Mesh {
    /// Connect to every rank in `peers` (world ranks): this rank dials the lower ranks'
    /// listeners in `addresses` and accepts the higher ones on `listener`. The listener
    /// opens with a nonce and the dialer answers with its rank, its plan digest and a tag
    /// under the job's key ([`crate::auth`]); a connection without a valid tag is
    /// dropped and the wait goes on. Each side checks the other's plan digest.
    pub fn connect(
        rank: usize,
        addresses: &[SocketAddr],
        listener: TcpListener,
        peers: &[usize],
        digest: u64,
        key: &JobKey,
        timeout: Duration,
    ) -> CommResult<Mesh> {
        let world = addresses.len();
        let deadline = Instant::now() + timeout;
        let mut slots: Vec<Option<TcpStream>> = (0..world).map(|_| None).collect();
        for &p in peers.iter().filter(|&&p| p < rank) {
            let stream = dial(addresses[p], deadline).map_err(|e| {
                CommError::blame(
                    p,
                    format!("rank {p} at {} is not reachable: {e}", addresses[p]),
                )
            })?;
            stream.set_nodelay(true).ok();
            let failed =
                |e: std::io::Error| CommError::blame(p, format!("handshake with rank {p}: {e}"));
            // The peer opens with its challenge; answer with rank, digest and a tag over it.
            stream.set_read_timeout(Some(remaining(deadline))).ok();
            let mut opening = [0u8; 4 + NONCE];
            (&stream).read_exact(&mut opening).map_err(failed)?;
            if opening[0..4] != HANDSHAKE_MAGIC.to_le_bytes() {
                return Err(CommError::blame(
                    p,
                    format!("{} is not rank {p} of a dic run", addresses[p]),
                ));
            }
            let mut body = Vec::with_capacity(16);
            body.extend_from_slice(&(rank as u64).to_le_bytes());
            body.extend_from_slice(&digest.to_le_bytes());
            let mut hello = HANDSHAKE_MAGIC.to_le_bytes().to_vec();
            hello.extend_from_slice(&body);
            hello.extend_from_slice(&key.tag(&[b"mesh", &opening[4..], &body]));
            (&stream).write_all(&hello).map_err(failed)?;
            slots[p] = Some(stream);
        }
        let mut waiting: Vec<usize> = peers.iter().copied().filter(|&p| p > rank).collect();
        // Every connection's handshake runs side by side, each bounded by HANDSHAKE_WAIT:
        // a silent or slow stranger costs the ranks nothing.
        let mut handshakes = Handshakes::new(listener, HANDSHAKE_MAGIC, MESH_HELLO, HANDSHAKE_WAIT)
            .map_err(|e| CommError::new(format!("listener: {e}")))?;
        while !waiting.is_empty() {
            if Instant::now() >= deadline {
                return Err(CommError::blame(
                    waiting[0],
                    handshakes.missing(&waiting, "connected", timeout),
                ));
            }
            let arrived = handshakes.poll(deadline);
            if arrived.is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
            for a in arrived {
                let body = &a.hello[4..20];
                if !key.verify(&[b"mesh", &a.challenge, body], &a.hello[20..]) {
                    handshakes.fail(format!(
                        "the hello from {} does not verify: wrong job secret (not a rank of this job)",
                        a.peer
                    ));
                    continue;
                }
                let (who, their) = match (body[0..8].try_into(), body[8..16].try_into()) {
                    (Ok(w), Ok(t)) => (u64::from_le_bytes(w) as usize, u64::from_le_bytes(t)),
                    _ => continue,
                };
                if !waiting.contains(&who) {
                    handshakes.fail(format!(
                        "the hello from {} says it is rank {who}, not a rank this one waits for",
                        a.peer
                    ));
                    continue;
                }
                if their != digest {
                    return Err(CommError::blame(
                        who,
                        format!("rank {who} runs a different plan file (plan digest mismatch: {their:016x}, this rank's {digest:016x})"),
                    ));
                }
                a.stream.set_nodelay(true).ok();
                waiting.retain(|&w| w != who);
                slots[who] = Some(a.stream);
            }
        }
        let peers = slots
            .into_iter()
            .map(|s| s.map(|stream| Peer::start(stream, timeout)).transpose())
            .collect::<CommResult<Vec<_>>>()?;
        let queues: Vec<mpsc::Sender<Vec<u8>>> = peers
            .iter()
            .flatten()
            .filter_map(|p| p.queue.clone())
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let every = (timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let beat = std::thread::Builder::new()
            .name("dic-heartbeat".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let mut slept = Duration::ZERO;
                while !stop2.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10));
                    slept += Duration::from_millis(10);
                    if slept >= every {
                        slept = Duration::ZERO;
                        for q in &queues {
                            let _ = q.send(frame(KIND_HEARTBEAT, 0, &[]));
                        }
                    }
                }
            })
            .map_err(|e| CommError::new(format!("thread: {e}")))?;
        Ok(Mesh {
            rank,
            world,
            peers,
            timeout,
            context: RefCell::new(String::new()),
            heartbeat: Some((stop, beat)),
        })
    }

    fn peer(&self, p: usize) -> CommResult<&Peer> {
        self.peers.get(p).and_then(|x| x.as_ref()).ok_or_else(|| {
            CommError::new(format!("no connection to rank {p} (not in a shared group)"))
        })
    }

    pub fn set_context(&self, context: &str) {
        let mut c = self.context.borrow_mut();
        c.clear();
        c.push_str(context);
    }

    fn context(&self) -> String {
        self.context.borrow().clone()
    }

    /// Queue `data` for world rank `p`; returns at once.
    pub fn send(&self, p: usize, data: &[u8]) -> CommResult<()> {
        let peer = self.peer(p)?;
        let seq = peer.sent.get();
        peer.sent.set(seq + 1);
        peer.queue
            .as_ref()
            .and_then(|q| q.send(frame(KIND_DATA, seq, data)).ok())
            .ok_or_else(|| {
                CommError::blame(
                    p,
                    format!("rank {p} closed the connection during {}", self.context()),
                )
            })
    }

    /// Receive the next message from world rank `p` into `out` (its exact length).
    pub fn recv_into(&self, p: usize, out: &mut [u8]) -> CommResult<()> {
        let peer = self.peer(p)?;
        let what = || self.context();
        let mut header = [0u8; HEADER];
        loop {
            read_full(&peer.reader, &mut header, p, self.timeout, &what)?;
            if header[4] != KIND_HEARTBEAT {
                break;
            }
        }
        let magic = u32::from_le_bytes(header[0..4].try_into().expect("fixed-size slice"));
        let kind = header[4];
        let seq = u64::from_le_bytes(header[5..13].try_into().expect("fixed-size slice"));
        let len = u64::from_le_bytes(header[13..21].try_into().expect("fixed-size slice")) as usize;
        if magic != FRAME_MAGIC {
            return Err(CommError::blame(
                p,
                format!("rank {p} sent a corrupt frame during {}", what()),
            ));
        }
        if kind == KIND_ABORT {
            let mut msg = vec![0u8; len.min(1 << 16)];
            read_full(&peer.reader, &mut msg, p, self.timeout, &what)?;
            // A peer's words reach this rank's terminal: no control characters.
            let text = crate::plan::printable(&String::from_utf8_lossy(&msg));
            // An abort frame's sequence field carries the rank it blames.
            return Err(CommError {
                message: format!("rank {p} aborted: {text}"),
                culprit: Some(if seq == NO_CULPRIT { p } else { seq as usize }),
            });
        }
        let expected = peer.received.get();
        peer.received.set(expected + 1);
        if seq != expected || len != out.len() {
            return Err(CommError::blame(
                p,
                format!(
                    "rank {p} is out of step during {}: message {seq} of {len} bytes, expected message {expected} of {} bytes (do both ranks run the same plan?)",
                    what(),
                    out.len()
                ),
            ));
        }
        read_full(&peer.reader, out, p, self.timeout, &what)
    }

    pub fn recv(&self, p: usize, len: usize) -> CommResult<Vec<u8>> {
        let mut v = vec![0u8; len];
        self.recv_into(p, &mut v)?;
        Ok(v)
    }

    /// Between collectives: has a peer aborted or gone away? Peeks each connection without
    /// blocking (a data frame is left for its collective), so a rank that shares no group
    /// with the failed one still stops promptly.
    pub fn poll_aborts(&self) -> CommResult<()> {
        for (p, peer) in self.peers.iter().enumerate() {
            let Some(peer) = peer else { continue };
            loop {
                let (n, header) = peek_header(peer);
                if n == 0 {
                    return Err(CommError::blame(
                        p,
                        format!(
                            "rank {p} closed the connection (died?) during {}",
                            self.context()
                        ),
                    ));
                }
                if n != HEADER as isize {
                    break;
                }
                match header[4] {
                    KIND_HEARTBEAT => {
                        // a whole frame: consume it and look again
                        let mut skip = [0u8; HEADER];
                        let _ = (&peer.reader).read_exact(&mut skip);
                    }
                    KIND_ABORT => {
                        // The normal path turns the abort frame into the error.
                        return self.recv_into(p, &mut []);
                    }
                    _ => break,
                }
            }
        }
        Ok(())
    }

    /// Tell every connected rank why this one is giving up, so their errors name the
    /// rank at fault rather than this one.
    pub fn abort(&self, why: &CommError) {
        let culprit = why.culprit.map(|c| c as u64).unwrap_or(NO_CULPRIT);
        for peer in self.peers.iter().flatten() {
            if let Some(q) = &peer.queue {
                let _ = q.send(frame(KIND_ABORT, culprit, why.message.as_bytes()));
            }
        }
    }

    /// Flush every queued send and close the connections.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some((stop, beat)) = self.heartbeat.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = beat.join();
        }
        for peer in self.peers.iter_mut().flatten() {
            peer.queue.take();
        }
        for peer in self.peers.iter_mut().flatten() {
            if let Some(w) = peer.writer.take() {
                let _ = w.join();
            }
            let _ = peer.reader.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Mesh {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Peer {
    fn start(stream: TcpStream, timeout: Duration) -> CommResult<Peer> {
        stream
            .set_read_timeout(Some(timeout.min(Duration::from_millis(250))))
            .map_err(|e| CommError::new(format!("socket: {e}")))?;
        stream.set_write_timeout(Some(timeout)).ok();
        let mut write_half = stream
            .try_clone()
            .map_err(|e| CommError::new(format!("socket: {e}")))?;
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let writer = std::thread::Builder::new()
            .name("dic-send".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                for frame in rx {
                    if write_half.write_all(&frame).is_err() {
                        break;
                    }
                }
                let _ = write_half.flush();
            })
            .map_err(|e| CommError::new(format!("thread: {e}")))?;
        Ok(Peer {
            reader: stream,
            queue: Some(tx),
            writer: Some(writer),
            sent: Cell::new(0),
            received: Cell::new(0),
        })
    }
}

/// The next frame header on `peer`'s connection, without consuming it or blocking: the
/// byte count `recv` returned (0: closed, < 0: nothing yet) and the bytes.
#[allow(unsafe_code)] // FFI: recv(2) with MSG_PEEK, which std's TcpStream::peek cannot do without blocking
fn peek_header(peer: &Peer) -> (isize, [u8; HEADER]) {
    use std::os::fd::AsRawFd;
    let mut header = [0u8; HEADER];
    // SAFETY: recv into a local buffer of HEADER bytes on a socket this process owns;
    // MSG_PEEK | MSG_DONTWAIT neither consumes data nor blocks.
    let n = unsafe {
        libc::recv(
            peer.reader.as_raw_fd(),
            header.as_mut_ptr().cast(),
            HEADER,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    (n, header)
}

fn remaining(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

fn dial(addr: SocketAddr, deadline: Instant) -> std::io::Result<TcpStream> {
    loop {
        match TcpStream::connect_timeout(&addr, remaining(deadline).min(Duration::from_secs(2))) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Read exactly `buf.len()` bytes from rank `p`, giving up after `timeout` without
/// progress. The socket's own timeout is short so a dead peer is noticed quickly.
fn read_full(
    stream: &TcpStream,
    buf: &mut [u8],
    p: usize,
    timeout: Duration,
    what: &dyn Fn() -> String,
) -> CommResult<()> {
    let mut done = 0;
    let mut last = Instant::now();
    let mut s = stream;
    while done < buf.len() {
        match s.read(&mut buf[done..]) {
            Ok(0) => {
                return Err(CommError::blame(
                    p,
                    format!("rank {p} closed the connection (died?) during {}", what()),
                ))
            }
            Ok(n) => {
                done += n;
                last = Instant::now();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if last.elapsed() >= timeout {
                    return Err(CommError::blame(
                        p,
                        format!(
                            "rank {p} sent nothing for {} s during {} (hung?)",
                            timeout.as_secs_f64(),
                            what()
                        ),
                    ));
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(CommError::blame(
                    p,
                    format!("rank {p}'s connection failed during {}: {e}", what()),
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_listeners() -> (TcpListener, TcpListener, Vec<SocketAddr>) {
        let l0 = TcpListener::bind("127.0.0.1:0").unwrap();
        let l1 = TcpListener::bind("127.0.0.1:0").unwrap();
        let addrs = vec![l0.local_addr().unwrap(), l1.local_addr().unwrap()];
        (l0, l1, addrs)
    }

    /// Ten silent connections at rank 0's mesh listener, opened before rank 1 dials: one
    /// at a time they held rank 0 for 2 s each; side by side they cost nothing.
    #[test]
    fn silent_strangers_at_a_mesh_listener_delay_no_one() {
        let key = JobKey::from_secret("mesh test secret 0123").unwrap();
        let (l0, l1, addrs) = two_listeners();
        let silent: Vec<TcpStream> = (0..10)
            .map(|_| TcpStream::connect(addrs[0]).unwrap())
            .collect();
        let start = Instant::now();
        let (k, a) = (key.clone(), addrs.clone());
        let one = std::thread::spawn(move || {
            Mesh::connect(1, &a, l1, &[0], 7, &k, Duration::from_secs(10)).map(|_| ())
        });
        let zero = Mesh::connect(0, &addrs, l0, &[1], 7, &key, Duration::from_secs(10));
        assert!(zero.is_ok(), "{:?}", zero.err());
        one.join().unwrap().unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
        drop(silent);
    }

    /// A peer that never connects is named with what the strangers at the listener did,
    /// even one that connected in the wait's last moment.
    #[test]
    fn a_missing_peer_is_named_with_the_failed_handshakes() {
        let key = JobKey::from_secret("mesh test secret 0123").unwrap();
        let (l0, _l1, addrs) = two_listeners();
        let mut garbage = TcpStream::connect(addrs[0]).unwrap();
        garbage.write_all(&[0u8; 52]).unwrap();
        let at = addrs[0];
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(700));
            TcpStream::connect(at).unwrap()
        });
        let err = match Mesh::connect(
            0,
            &[addrs[0], addrs[1]],
            l0,
            &[1],
            7,
            &key,
            Duration::from_secs(1),
        ) {
            Ok(_) => panic!("rank 1 never came"),
            Err(e) => e,
        };
        let msg = err.message;
        assert_eq!(err.culprit, Some(1));
        assert!(
            msg.starts_with("rank 1 never connected within 1 s; meanwhile 2 connections failed"),
            "{msg}"
        );
        assert!(
            msg.contains("sent bytes that are not a dic run handshake"),
            "{msg}"
        );
        assert!(
            msg.contains("timed out reading the handshake from 127.0.0.1:"),
            "{msg}"
        );
        drop(late.join());
    }
}
