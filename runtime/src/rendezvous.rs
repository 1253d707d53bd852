//! Rendezvous over TCP: rank 0 serves on the plan's port; every other rank registers its
//! rank, its plan's digest and the port of its own listener, and receives the address of
//! every rank plus an opaque blob from rank 0 (the NCCL unique ids of every group).
//!
//! Rank 0 refuses a rank outside the world, a rank registered twice and a rank whose plan
//! file differs; after the timeout it tells the ranks that came which ones never joined,
//! so every process exits with the same message instead of waiting forever.

use crate::comm::{CommError, CommResult};
use crate::cpu::list;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const MAGIC: u32 = 0x4449_4352; // "DICR"
const OK: u8 = 0;
const REFUSED: u8 = 1;

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
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn read_u32(s: &mut impl Read) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(s: &mut impl Read) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    s.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn read_bytes(s: &mut impl Read, max: usize) -> std::io::Result<Vec<u8>> {
    let n = read_u32(s)? as usize;
    if n > max {
        return Err(std::io::Error::new(
            ErrorKind::InvalidData,
            "oversized field",
        ));
    }
    let mut v = vec![0u8; n];
    s.read_exact(&mut v)?;
    Ok(v)
}

/// Rank 0: serve on `server` until all `world` ranks registered (or the timeout), then
/// answer each with the roster. `own_port` is rank 0's mesh listener.
pub fn serve(
    server: TcpListener,
    world: usize,
    digest: u64,
    own_port: u16,
    blob: &[u8],
    timeout: Duration,
) -> CommResult<Roster> {
    let deadline = Instant::now() + timeout;
    let mut regs: Vec<Option<Registration>> = (0..world).map(|_| None).collect();
    let mut refusal: Option<CommError> = None;
    server
        .set_nonblocking(true)
        .map_err(|e| CommError::new(format!("rendezvous: {e}")))?;
    let mut joined = 1; // rank 0
                        // After a refusal, keep answering the ranks still to come (with the same refusal) so
                        // every rank reports the real cause, not a rank 0 that went away.
    while joined < world {
        match server.accept() {
            Ok((mut stream, _)) => {
                stream.set_nonblocking(false).ok();
                stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
                let hello = (|| -> std::io::Result<(u32, u64, u64, u16)> {
                    let magic = read_u32(&mut stream)?;
                    let rank = read_u64(&mut stream)?;
                    let digest = read_u64(&mut stream)?;
                    let mut p = [0u8; 2];
                    stream.read_exact(&mut p)?;
                    Ok((magic, rank, digest, u16::from_le_bytes(p)))
                })();
                let Ok((magic, rank, their, port)) = hello else {
                    continue;
                };
                if magic != MAGIC {
                    continue;
                }
                let rank = rank as usize;
                let problem = if rank == 0 || rank >= world {
                    Some(format!(
                        "rank {rank} is outside the world (1..{world} may register)"
                    ))
                } else if regs[rank].is_some() {
                    Some(format!("rank {rank} registered twice"))
                } else if their != digest {
                    Some(format!(
                        "rank {rank} runs a different plan file (digest {their:016x}, rank 0's {digest:016x})"
                    ))
                } else {
                    None
                };
                if let Some(msg) = problem {
                    let first = refusal.get_or_insert_with(|| CommError::blame(rank, msg));
                    refuse(&mut stream, first);
                    joined += 1;
                    continue;
                }
                if let Some(first) = &refusal {
                    refuse(&mut stream, first);
                    joined += 1;
                    continue;
                }
                regs[rank] = Some(Registration {
                    stream,
                    rank,
                    digest: their,
                    port,
                });
                joined += 1;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() >= deadline && refusal.is_some() {
                    break;
                }
                if Instant::now() >= deadline {
                    let missing: Vec<usize> = (1..world).filter(|&r| regs[r].is_none()).collect();
                    refusal = Some(CommError::blame(
                        missing[0],
                        format!(
                            "rendezvous: rank{} {} never joined within {} s",
                            if missing.len() > 1 { "s" } else { "" },
                            list(&missing),
                            timeout.as_secs()
                        ),
                    ));
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(CommError::new(format!("rendezvous: {e}"))),
        }
    }
    if let Some(err) = refusal {
        for reg in regs.iter_mut().flatten() {
            refuse(&mut reg.stream, &err);
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

/// Tell a rank why the job will not start, and whom to blame (`u64::MAX`: nobody).
fn refuse(stream: &mut TcpStream, why: &CommError) {
    let mut reply = vec![REFUSED];
    let culprit = why.culprit.map(|c| c as u64).unwrap_or(u64::MAX);
    reply.extend_from_slice(&culprit.to_le_bytes());
    put_str(&mut reply, &why.message);
    let _ = stream.write_all(&reply);
}

/// Any rank but 0: register with rank 0 at `server` and wait for the roster.
pub fn join(
    server: SocketAddr,
    rank: usize,
    digest: u64,
    own_port: u16,
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
    let mut hello = Vec::new();
    hello.extend_from_slice(&MAGIC.to_le_bytes());
    hello.extend_from_slice(&(rank as u64).to_le_bytes());
    hello.extend_from_slice(&digest.to_le_bytes());
    hello.extend_from_slice(&own_port.to_le_bytes());
    stream
        .write_all(&hello)
        .map_err(|e| CommError::blame(0, format!("rendezvous: rank 0: {e}")))?;
    // Rank 0 answers when everyone joined or at its timeout; allow it a little longer.
    stream
        .set_read_timeout(Some(timeout + Duration::from_secs(5)))
        .ok();
    let broken = |e: std::io::Error| {
        CommError::blame(
            0,
            format!("rendezvous: rank 0 went away before answering ({e})"),
        )
    };
    let mut status = [0u8; 1];
    stream.read_exact(&mut status).map_err(broken)?;
    if status[0] == REFUSED {
        let culprit = read_u64(&mut stream).map_err(broken)?;
        let msg = read_bytes(&mut stream, 1 << 16).map_err(broken)?;
        return Err(CommError {
            message: String::from_utf8_lossy(&msg).into_owned(),
            culprit: (culprit != u64::MAX).then_some(culprit as usize),
        });
    }
    let world = read_u32(&mut stream).map_err(broken)? as usize;
    let mut addresses = Vec::with_capacity(world);
    for _ in 0..world {
        let s = read_bytes(&mut stream, 256).map_err(broken)?;
        let a: SocketAddr = String::from_utf8_lossy(&s)
            .parse()
            .map_err(|_| CommError::blame(0, "rendezvous: rank 0 sent a bad address"))?;
        addresses.push(a);
    }
    let blob = read_bytes(&mut stream, 1 << 24).map_err(broken)?;
    Ok(Roster { addresses, blob })
}
