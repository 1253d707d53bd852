//! `dic run --local` (every rank of the plan) and `dic run --node N` (the ranks the plan
//! puts on node N, as the Kubernetes preflight Job runs it): ranks as child processes of
//! this machine. Children speak one JSON object per line on stdout (progress, rank 0's
//! summary, or an error); the launcher adds up progress, collects the summary and, if a
//! rank fails, makes sure every child is gone within the plan's timeout.

use crate::summary::RunSummary;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What a child prints, one per line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildEvent {
    Progress {
        done: usize,
        total: usize,
    },
    Summary(Box<RunSummary>),
    Error {
        message: String,
        culprit: Option<usize>,
    },
}

/// A rank's failure as the launcher saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct RankFailure {
    pub rank: usize,
    pub message: String,
    pub culprit: Option<usize>,
}

#[derive(Debug)]
pub enum LocalError {
    Spawn(String),
    Ranks(Vec<RankFailure>),
}

/// A free port on loopback for rank 0's rendezvous.
pub fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(l.local_addr()?.port())
}

/// Start one child per rank in `ranks`: `exe <args(rank)>`, and wait for them.
/// `progress(done, total)` is called as ranks report; `timeout` bounds how long the
/// launcher waits after a rank failed before it kills the rest. Returns rank 0's summary
/// when rank 0 is among `ranks`.
pub fn run_ranks(
    exe: &Path,
    ranks: &[usize],
    args: &dyn Fn(usize) -> Vec<String>,
    timeout: Duration,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Option<RunSummary>, LocalError> {
    let world = ranks.len();
    let (tx, rx) = mpsc::channel::<(usize, Option<ChildEvent>)>();
    let mut children: Vec<Child> = Vec::with_capacity(world);
    let mut stderr_readers = Vec::new();
    for (slot, &rank) in ranks.iter().enumerate() {
        let spawned = Command::new(exe)
            .args(args(rank))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                for c in &mut children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(LocalError::Spawn(format!(
                    "cannot start rank {rank} ({}): {e}",
                    exe.display()
                )));
            }
        };
        let out = child.stdout.take().expect("piped");
        let err = child.stderr.take().expect("piped");
        let tx2 = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(ev) = serde_json::from_str::<ChildEvent>(&line) {
                    let _ = tx2.send((slot, Some(ev)));
                }
            }
            let _ = tx2.send((slot, None));
        });
        stderr_readers.push(std::thread::spawn(move || {
            let mut s = String::new();
            let _ = BufReader::new(err).take(1 << 20).read_to_string(&mut s);
            s
        }));
        children.push(child);
    }
    drop(tx);
    let mut totals = vec![0usize; world];
    let mut dones = vec![0usize; world];
    let mut finished = vec![false; world];
    let mut summary = None;
    let mut failures: Vec<RankFailure> = Vec::new();
    let mut failed_at: Option<Instant> = None;
    while finished.iter().any(|f| !f) {
        if let Some(t) = failed_at {
            if t.elapsed() > timeout + Duration::from_secs(5) {
                break;
            }
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok((slot, Some(ChildEvent::Progress { done, total }))) => {
                dones[slot] = done;
                totals[slot] = total;
                progress(dones.iter().sum(), totals.iter().sum());
            }
            Ok((_, Some(ChildEvent::Summary(s)))) => summary = Some(*s),
            Ok((slot, Some(ChildEvent::Error { message, culprit }))) => {
                failed_at.get_or_insert_with(Instant::now);
                failures.push(RankFailure {
                    rank: ranks[slot],
                    message,
                    culprit,
                });
            }
            Ok((slot, None)) => finished[slot] = true,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let mut statuses = Vec::with_capacity(world);
    for c in &mut children {
        if failed_at.is_some() {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
        }
        statuses.push(c.wait());
    }
    let stderrs: Vec<String> = stderr_readers
        .into_iter()
        .map(|h| h.join().unwrap_or_default())
        .collect();
    for (slot, st) in statuses.iter().enumerate() {
        let rank = ranks[slot];
        let ok = matches!(st, Ok(s) if s.success());
        if !ok && !failures.iter().any(|f| f.rank == rank) {
            let last = stderrs[slot]
                .lines()
                .last()
                .unwrap_or("")
                .trim()
                .to_string();
            failures.push(RankFailure {
                rank,
                message: match st {
                    Ok(s) => format!(
                        "exited with {s}{}",
                        if last.is_empty() {
                            String::new()
                        } else {
                            format!(": {last}")
                        }
                    ),
                    Err(e) => e.to_string(),
                },
                culprit: None,
            });
        }
    }
    if !failures.is_empty() {
        failures.sort_by_key(|f| f.rank);
        return Err(LocalError::Ranks(failures));
    }
    if ranks.contains(&0) && summary.is_none() {
        return Err(LocalError::Ranks(vec![RankFailure {
            rank: 0,
            message: "rank 0 finished without a summary".into(),
            culprit: Some(0),
        }]));
    }
    Ok(summary)
}
