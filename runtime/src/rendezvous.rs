//! Rendezvous over TCP: rank 0 serves on the plan's port; every other rank registers its
//! rank, its plan's digest and the port of its own listener, and receives the address of
//! every rank plus an opaque blob from rank 0 (the NCCL unique ids of every group).
//!
//! Every registration is authenticated with the job's key ([`crate::auth`]): rank 0 opens
//! each connection with a fresh nonce, the joining rank answers with a tag over it, and
//! rank 0's reply carries a tag over the joining rank's nonce. A connection that fails
//! (a stranger, a port scanner, a garbled or silent client) is answered "not
//! authenticated" at most and dropped; it never ends the rendezvous, and no read waits
//! longer than [`HELLO_WAIT`] or past the deadline. Rank 0 refuses an authenticated rank
//! outside the world, a rank registered twice and a rank whose plan file differs; after
//! the timeout it tells the ranks that came which ones never joined, so every process
//! exits with the same message instead of waiting forever. A joining rank accepts only a
//! roster of its own plan's world size.

use crate::auth::{nonce, JobKey, NONCE, TAG};
use crate::comm::{CommError, CommResult};
use crate::handshake::{Arrived, Handshakes};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const MAGIC: u32 = 0x3249_4352; // "RCI2": version 2, authenticated
const OK: u8 = 0;
const REFUSED: u8 = 1;
/// Sent, untagged, to a connection whose hello failed authentication.
const NOT_AUTHENTICATED: u8 = 2;
/// The longest rank 0 waits for one connection's hello.
pub const HELLO_WAIT: Duration = Duration::from_secs(2);
/// Bytes of a hello: magic, rank, digest, port, nonce, tag.
const HELLO: usize = 4 + 8 + 8 + 2 + NONCE + TAG;

/// What every rank learns at rendezvous.
#[derive(Debug, Clone, PartialEq)]
pub struct Roster {
    /// Each rank's listener, by world rank.
    pub addresses: Vec<SocketAddr>,
    /// Rank 0's blob (NCCL unique ids; empty on the CPU backend).
    pub blob: Vec<u8>,
}

struct Registration {
    stream: TcpStream,
    rank: usize,
    digest: u64,
    port: u16,
    /// The joining rank's nonce, which rank 0's reply is tagged over.
    nonce: [u8; NONCE],
}

/// A verified hello.
struct Hello {
    rank: u64,
    digest: u64,
    port: u16,
    nonce: [u8; NONCE],
}

/// Checks a complete hello against the challenge rank 0 opened with; on failure, why.
fn verify_hello(arrived: &Arrived, key: &JobKey) -> Result<Hello, String> {
    let b = &arrived.hello;
    let field = |r: std::ops::Range<usize>| b.get(r).ok_or("a short hello");
    let body = field(4..22)?;
    let nonce: [u8; NONCE] = field(22..22 + NONCE)?
        .try_into()
        .map_err(|_| "a short hello")?;
    let tag = field(22 + NONCE..HELLO)?;
    let rank = u64::from_le_bytes(body[0..8].try_into().map_err(|_| "a short hello")?);
    if !key.verify(&[b"hello", &arrived.challenge, body, &nonce], tag) {
        // The rank is the sender's claim, unverified: it helps find a misconfigured rank.
        return Err(format!(
            "the hello from {} says it is rank {rank} but does not verify: wrong job secret (its DIC_JOB_SECRET differs from rank 0's)",
            arrived.peer
        ));
    }
    Ok(Hello {
        rank,
        digest: u64::from_le_bytes(body[8..16].try_into().map_err(|_| "a short hello")?),
        port: u16::from_le_bytes(body[16..18].try_into().map_err(|_| "a short hello")?),
        nonce,
    })
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Rank 0: serve on `server` until all `world` ranks registered (or the timeout), then
/// answer each with the roster. `own_port` is rank 0's mesh listener.
pub fn serve(
    server: TcpListener,
    world: usize,
    digest: u64,
    own_port: u16,
    blob: &[u8],
    key: &JobKey,
    timeout: Duration,
) -> CommResult<Roster> {
    let deadline = Instant::now() + timeout;
    let mut regs: Vec<Option<Registration>> = (0..world).map(|_| None).collect();
    let mut refusal: Option<CommError> = None;
    // Every connection's handshake runs side by side, each bounded by HELLO_WAIT: a
    // silent or hostile client costs the others nothing.
    let mut handshakes = Handshakes::new(server, MAGIC, HELLO, HELLO_WAIT)
        .map_err(|e| CommError::new(format!("rendezvous: {e}")))?;
    let mut joined = 1; // rank 0
                        // After a refusal, keep answering the ranks still to come (with the same refusal) so
                        // every rank reports the real cause, not a rank 0 that went away.
    while joined < world {
        if Instant::now() >= deadline {
            if refusal.is_none() {
                let missing: Vec<usize> = (1..world).filter(|&r| regs[r].is_none()).collect();
                refusal = Some(CommError::blame(
                    missing[0],
                    format!(
                        "rendezvous: {}",
                        handshakes.missing(&missing, "joined", timeout)
                    ),
                ));
            }
            break;
        }
        let arrived = handshakes.poll(deadline);
        if arrived.is_empty() {
            std::thread::sleep(Duration::from_millis(2));
        }
        for a in arrived {
            let hello = match verify_hello(&a, key) {
                Ok(h) => h,
                Err(why) => {
                    let _ = a.stream.set_write_timeout(Some(HELLO_WAIT));
                    let _ = (&a.stream).write_all(&[NOT_AUTHENTICATED]);
                    handshakes.fail(why);
                    continue; // a stranger or a broken client: dropped, the rendezvous goes on
                }
            };
            let mut stream = a.stream;
            let _ = stream.set_write_timeout(Some(HELLO_WAIT));
            let rank = hello.rank as usize;
            let problem = if hello.rank == 0 || hello.rank >= world as u64 {
                Some(format!(
                    "rank {} is outside the world (1..{world} may register)",
                    hello.rank
                ))
            } else if regs[rank].is_some() {
                Some(format!("rank {rank} registered twice"))
            } else if hello.digest != digest {
                Some(format!(
                    "rank {rank} runs a different plan file (plan digest mismatch: {:016x}, rank 0's {digest:016x})",
                    hello.digest
                ))
            } else {
                None
            };
            if let Some(msg) = problem {
                let first = refusal.get_or_insert_with(|| CommError::blame(rank, msg));
                refuse(&mut stream, key, &hello.nonce, first);
                joined += 1;
                continue;
            }
            if let Some(first) = &refusal {
                refuse(&mut stream, key, &hello.nonce, first);
                joined += 1;
                continue;
            }
            regs[rank] = Some(Registration {
                stream,
                rank,
                digest: hello.digest,
                port: hello.port,
                nonce: hello.nonce,
            });
            joined += 1;
        }
    }
    if let Some(err) = refusal {
        for reg in regs.iter_mut().flatten() {
            refuse(&mut reg.stream, key, &reg.nonce, &err);
        }
        return Err(err);
    }
    let mut addresses = Vec::with_capacity(world);
    for (r, reg) in regs.iter().enumerate() {
        addresses.push(match reg {
            None => SocketAddr::new(IpAddr::from([0, 0, 0, 0]), own_port),
            Some(reg) => {
                debug_assert_eq!(reg.rank, r);
                debug_assert_eq!(reg.digest, digest);
                let ip = reg
                    .stream
                    .peer_addr()
                    .map(|a| a.ip())
                    .map_err(|e| CommError::blame(r, format!("rendezvous: {e}")))?;
                SocketAddr::new(ip, reg.port)
            }
        });
    }
    for reg in regs.iter_mut().flatten() {
        // Rank 0's address as this rank reached it.
        let mut own = addresses.clone();
        if let Ok(local) = reg.stream.local_addr() {
            own[0] = SocketAddr::new(local.ip(), own_port);
        }
        let mut reply = vec![OK];
        reply.extend_from_slice(&(world as u32).to_le_bytes());
        for a in &own {
            put_str(&mut reply, &a.to_string());
        }
        reply.extend_from_slice(&(blob.len() as u32).to_le_bytes());
        reply.extend_from_slice(blob);
        let tag = key.tag(&[b"reply", &reg.nonce, &reply]);
        reply.extend_from_slice(&tag);
        reg.stream.write_all(&reply).map_err(|e| {
            CommError::blame(
                reg.rank,
                format!("rendezvous reply to rank {}: {e}", reg.rank),
            )
        })?;
    }
    let mut own = addresses;
    own[0] = SocketAddr::new(IpAddr::from([127, 0, 0, 1]), own_port);
    Ok(Roster {
        addresses: own,
        blob: blob.to_vec(),
    })
}

/// Tell a rank why the job will not start, and whom to blame (`u64::MAX`: nobody), tagged
/// over the rank's nonce.
fn refuse(stream: &mut TcpStream, key: &JobKey, their_nonce: &[u8; NONCE], why: &CommError) {
    let mut reply = vec![REFUSED];
    let culprit = why.culprit.map(|c| c as u64).unwrap_or(u64::MAX);
    reply.extend_from_slice(&culprit.to_le_bytes());
    put_str(&mut reply, &why.message);
    let tag = key.tag(&[b"reply", their_nonce, &reply]);
    reply.extend_from_slice(&tag);
    let _ = stream.write_all(&reply);
}

/// Any rank but 0: register with rank 0 at `server` and wait for the roster of a world
/// of `world` ranks.
pub fn join(
    server: SocketAddr,
    rank: usize,
    world: usize,
    digest: u64,
    own_port: u16,
    key: &JobKey,
    timeout: Duration,
) -> CommResult<Roster> {
    let deadline = Instant::now() + timeout;
    let mut stream = loop {
        match TcpStream::connect_timeout(&server, Duration::from_secs(1)) {
            Ok(s) => break s,
            Err(e) => {
                if Instant::now() >= deadline {
                    return Err(CommError::blame(
                        0,
                        format!(
                            "rendezvous: rank 0 at {server} did not answer within {} s ({e})",
                            timeout.as_secs()
                        ),
                    ));
                }
                std::thread::sleep(Duration::from_millis(25));
            }
        }
    };
    // Rank 0 answers when every rank joined or at its own deadline, which is this rank's
    // give or take the seconds between their starts: allow it ANSWER_GRACE more.
    let answer_by = deadline + ANSWER_GRACE;
    let broken = |e: std::io::Error| waiting_failed(server, timeout, e);
    stream.set_read_timeout(Some(until(answer_by))).ok();
    let mut opening = [0u8; 4 + NONCE];
    stream.read_exact(&mut opening).map_err(broken)?;
    if opening[0..4] != MAGIC.to_le_bytes() {
        return Err(CommError::blame(
            0,
            format!("rendezvous: {server} is not a dic run rendezvous (or another version of dic)"),
        ));
    }
    let challenge = &opening[4..];
    let mine = nonce().map_err(CommError::new)?;
    let mut body = Vec::with_capacity(18);
    body.extend_from_slice(&(rank as u64).to_le_bytes());
    body.extend_from_slice(&digest.to_le_bytes());
    body.extend_from_slice(&own_port.to_le_bytes());
    let mut hello = MAGIC.to_le_bytes().to_vec();
    hello.extend_from_slice(&body);
    hello.extend_from_slice(&mine);
    hello.extend_from_slice(&key.tag(&[b"hello", challenge, &body, &mine]));
    stream
        .write_all(&hello)
        .map_err(|e| CommError::blame(0, format!("rendezvous: rank 0: {e}")))?;
    // Read the whole reply, then believe it only if rank 0's tag over our nonce holds.
    let mut r = ReplyReader {
        stream: &mut stream,
        bytes: Vec::new(),
        server,
        timeout,
        answer_by,
    };
    let too_long =
        |what: &str| CommError::blame(0, format!("rendezvous: rank 0 sent an oversized {what}"));
    let status = r.take(1)?[0];
    match status {
        NOT_AUTHENTICATED => {
            return Err(CommError::new(
                "rendezvous: rank 0 did not accept this rank's credentials: DIC_JOB_SECRET differs from rank 0's",
            ))
        }
        REFUSED => {
            let culprit = r.u64()?;
            let n = r.u32()?;
            if n > 1 << 16 {
                return Err(too_long("refusal"));
            }
            let msg = r.take(n)?;
            r.verify(key, &mine)?;
            return Err(CommError {
                message: crate::plan::printable(&String::from_utf8_lossy(&msg)),
                culprit: (culprit != u64::MAX).then_some(culprit as usize),
            });
        }
        OK => {}
        other => {
            return Err(CommError::blame(
                0,
                format!("rendezvous: rank 0 answered with unknown status {other}"),
            ))
        }
    }
    let announced = r.u32()?;
    if announced != world {
        return Err(CommError::blame(
            0,
            format!(
                "rendezvous: rank 0 announced a world of {announced} ranks; this plan has {world}"
            ),
        ));
    }
    let mut texts = Vec::with_capacity(world);
    for _ in 0..world {
        let n = r.u32()?;
        if n > 64 {
            return Err(too_long("address"));
        }
        texts.push(r.take(n)?);
    }
    let n = r.u32()?;
    if n > 1 << 24 {
        return Err(too_long("blob"));
    }
    let blob = r.take(n)?;
    r.verify(key, &mine)?;
    let addresses = texts
        .iter()
        .map(|t| {
            String::from_utf8_lossy(t)
                .parse()
                .map_err(|_| CommError::blame(0, "rendezvous: rank 0 sent a bad address"))
        })
        .collect::<CommResult<Vec<SocketAddr>>>()?;
    Ok(Roster { addresses, blob })
}

/// How long a joining rank waits for rank 0's answer beyond its own timeout.
const ANSWER_GRACE: Duration = Duration::from_secs(2);

/// The time left until `deadline` (at least a millisecond: a zero timeout means "none").
fn until(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

/// A joining rank's failed wait for rank 0: a timeout (rank 0 hung or stopped) or a
/// closed connection (rank 0 died).
fn waiting_failed(server: SocketAddr, timeout: Duration, e: std::io::Error) -> CommError {
    CommError::blame(
        0,
        if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
            format!(
                "rendezvous: rank 0 at {server} sent no answer within {} s (hung?)",
                timeout.as_secs()
            )
        } else {
            format!("rendezvous: rank 0 went away before answering ({e})")
        },
    )
}

/// Reads rank 0's reply field by field, keeping the bytes for the tag check.
struct ReplyReader<'a> {
    stream: &'a mut TcpStream,
    bytes: Vec<u8>,
    server: SocketAddr,
    timeout: Duration,
    /// Every read ends by then, however rank 0 paces its bytes.
    answer_by: Instant,
}

impl ReplyReader<'_> {
    fn take(&mut self, n: usize) -> CommResult<Vec<u8>> {
        let mut b = vec![0u8; n];
        self.stream
            .set_read_timeout(Some(until(self.answer_by)))
            .ok();
        self.stream
            .read_exact(&mut b)
            .map_err(|e| waiting_failed(self.server, self.timeout, e))?;
        self.bytes.extend_from_slice(&b);
        Ok(b)
    }
    fn u32(&mut self) -> CommResult<usize> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    fn u64(&mut self) -> CommResult<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(&b);
        Ok(u64::from_le_bytes(a))
    }
    /// The tag that ends the reply must be rank 0's over `mine` and every byte read.
    fn verify(&mut self, key: &JobKey, mine: &[u8; NONCE]) -> CommResult<()> {
        let body = std::mem::take(&mut self.bytes);
        let tag = self.take(TAG)?;
        if key.verify(&[b"reply", mine, &body], &tag) {
            Ok(())
        } else {
            Err(CommError::blame(
                0,
                "rendezvous: rank 0's answer failed authentication (is DIC_JOB_SECRET the same on every node?)",
            ))
        }
    }
}
