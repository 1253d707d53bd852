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
    /// Rank 0 serves the rendezvous on this port.
    Listening {
        port: u16,
    },
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

type Events = mpsc::Sender<(usize, Option<ChildEvent>)>;

/// How long, after one rank failed, the launcher waits for the others to report and exit
/// before it kills them (at most the plan's timeout).
pub const REPORT_GRACE: Duration = Duration::from_secs(2);
/// How long a blamed rank that is still running gets to speak for itself once every
/// other rank has finished (a stopped or hung one never will).
const SETTLE: Duration = Duration::from_millis(250);

/// Start one rank: its stdout's events go to `tx` under `slot`; its stderr is collected.
fn spawn_rank(
    exe: &Path,
    args: Vec<String>,
    env: &[(&str, &str)],
    slot: usize,
    tx: &Events,
) -> std::io::Result<(Child, std::thread::JoinHandle<String>)> {
    let mut child = Command::new(exe)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(std::io::Error::other("the child's output was not piped"));
    };
    let tx = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Ok(ev) = serde_json::from_str::<ChildEvent>(&line) {
                let _ = tx.send((slot, Some(ev)));
            }
        }
        let _ = tx.send((slot, None));
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = BufReader::new(err).take(1 << 20).read_to_string(&mut s);
        s
    });
    Ok((child, stderr))
}

/// How to start one rank's process: `exe <args(rank, rendezvous)>` with `env` added.
pub struct RankCommand<'a> {
    pub exe: &'a Path,
    pub args: &'a dyn Fn(usize, &str) -> Vec<String>,
    /// Added to the children's environment (the job's secret).
    pub env: &'a [(&'a str, &'a str)],
}

/// Start one child per rank in `ranks` with `command`, and wait for
/// them. Without a `rendezvous` address (`--local`), rank 0 starts first on port 0 and
/// says which port it got, so no free-port race with the other ranks' listeners.
/// `progress(done, total)` is called as ranks report; after a rank failed, the launcher
/// kills the rest after [`REPORT_GRACE`] (capped by `timeout`), or as soon as only the
/// ranks the failures blame are left. Returns rank 0's summary when rank 0 is among
/// `ranks`.
pub fn run_ranks(
    command: &RankCommand<'_>,
    ranks: &[usize],
    rendezvous: Option<String>,
    timeout: Duration,
    progress: &mut dyn FnMut(usize, usize),
    listening: &mut dyn FnMut(u16),
) -> Result<Option<RunSummary>, LocalError> {
    let world = ranks.len();
    let (tx, rx) = mpsc::channel::<(usize, Option<ChildEvent>)>();
    let mut children: Vec<Child> = Vec::with_capacity(world);
    let mut stderr_readers = Vec::new();
    let mut early: Vec<(usize, Option<ChildEvent>)> = Vec::new();
    let first_is_zero = ranks.first() == Some(&0);
    let mut rendezvous = rendezvous;
    let kill_all = |children: &mut Vec<Child>| {
        for c in children.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    };
    for (slot, &rank) in ranks.iter().enumerate() {
        let addr = rendezvous
            .clone()
            .unwrap_or_else(|| "127.0.0.1:0".to_string());
        let exe = command.exe;
        match spawn_rank(exe, (command.args)(rank, &addr), command.env, slot, &tx) {
            Ok((child, stderr)) => {
                children.push(child);
                stderr_readers.push(stderr);
            }
            Err(e) => {
                kill_all(&mut children);
                return Err(LocalError::Spawn(format!(
                    "cannot start rank {rank} ({}): {e}",
                    exe.display()
                )));
            }
        }
        if rendezvous.is_none() && slot == 0 && first_is_zero {
            // Wait for rank 0's port; keep whatever else it says for the main loop.
            let deadline = Instant::now() + timeout;
            loop {
                match rx.recv_timeout(Duration::from_millis(100)) {
                    Ok((0, Some(ChildEvent::Listening { port }))) => {
                        listening(port);
                        rendezvous = Some(format!("127.0.0.1:{port}"));
                        break;
                    }
                    Ok(ev) => {
                        let ended = ev.1.is_none();
                        early.push(ev);
                        if ended {
                            break; // rank 0 ended before listening: its error is in `early`
                        }
                    }
                    Err(_) if Instant::now() < deadline => {}
                    Err(_) => {
                        let _ = children[0].kill();
                        early.push((
                            0,
                            Some(ChildEvent::Error {
                                message: format!(
                                    "rank 0 did not open its rendezvous port within {} s",
                                    timeout.as_secs()
                                ),
                                culprit: Some(0),
                            }),
                        ));
                        break;
                    }
                }
            }
            if rendezvous.is_none() {
                break;
            }
        }
    }
    drop(tx);
    let mut totals = vec![0usize; world];
    let mut dones = vec![0usize; world];
    let mut finished = vec![false; world];
    let mut summary = None;
    let mut failures: Vec<RankFailure> = Vec::new();
    let mut failed_at: Option<Instant> = None;
    let mut early = early.into_iter();
    // Ranks never started (rank 0 failed first) count as finished.
    for f in finished.iter_mut().skip(children.len()) {
        *f = true;
    }
    // After the first failure the others have REPORT_GRACE to say their part (an abort
    // reaches every rank in milliseconds); a rank that every report blames and that has
    // not exited (stopped, hung) is not waited for at all.
    let grace = REPORT_GRACE.min(timeout);
    while finished.iter().any(|f| !f) {
        if let Some(t) = failed_at {
            let blamed: Vec<usize> = failures.iter().filter_map(|f| f.culprit).collect();
            let only_blamed_left = finished
                .iter()
                .zip(ranks)
                .all(|(done, rank)| *done || blamed.contains(rank));
            if (only_blamed_left && t.elapsed() > SETTLE) || t.elapsed() > grace {
                break;
            }
        }
        let next = match early.next() {
            Some(ev) => Ok(ev),
            None => rx.recv_timeout(Duration::from_millis(100)),
        };
        match next {
            Ok((_, Some(ChildEvent::Listening { .. }))) => {}
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
    let mut killed = vec![false; world];
    for (slot, c) in children.iter_mut().enumerate() {
        if failed_at.is_some() {
            if let Ok(None) = c.try_wait() {
                killed[slot] = c.kill().is_ok();
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
                    _ if killed[slot] => {
                        "had not exited when the job failed (stopped or hung?): dic run killed it"
                            .to_string()
                    }
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
