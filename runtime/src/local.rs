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
    let (tx, rx) = mpsc::channel::<(usize, Option<ChildEvent>)>();
    let started = start_ranks(command, ranks, rendezvous, timeout, &tx, &rx, listening)?;
    drop(tx);
    let Started {
        mut children,
        stderr_readers,
        early,
    } = started;
    let mut heard = listen(ranks, children.len(), early, &rx, timeout, progress);
    let exits = reap(&mut children, stderr_readers, heard.failed_at.is_some());
    heard
        .failures
        .extend(unreported_failures(ranks, &exits, &heard.failures));
    if !heard.failures.is_empty() {
        heard.failures.sort_by_key(|f| f.rank);
        return Err(LocalError::Ranks(heard.failures));
    }
    if ranks.contains(&0) && heard.summary.is_none() {
        return Err(LocalError::Ranks(vec![RankFailure {
            rank: 0,
            message: "rank 0 finished without a summary".into(),
            culprit: Some(0),
        }]));
    }
    Ok(heard.summary)
}

/// The ranks' children as started, with what rank 0 said before the others started.
struct Started {
    children: Vec<Child>,
    stderr_readers: Vec<std::thread::JoinHandle<String>>,
    early: Vec<(usize, Option<ChildEvent>)>,
}

/// Starts one child per rank, in order. Without a `rendezvous` address and with rank 0
/// first, waits for rank 0's port before starting the others (and starts none of them if
/// rank 0 ended or timed out first: its error is in `early`). A rank that cannot be
/// started kills those already running.
fn start_ranks(
    command: &RankCommand<'_>,
    ranks: &[usize],
    mut rendezvous: Option<String>,
    timeout: Duration,
    tx: &Events,
    rx: &mpsc::Receiver<(usize, Option<ChildEvent>)>,
    listening: &mut dyn FnMut(u16),
) -> Result<Started, LocalError> {
    let mut started = Started {
        children: Vec::with_capacity(ranks.len()),
        stderr_readers: Vec::new(),
        early: Vec::new(),
    };
    let first_is_zero = ranks.first() == Some(&0);
    for (slot, &rank) in ranks.iter().enumerate() {
        let addr = rendezvous
            .clone()
            .unwrap_or_else(|| "127.0.0.1:0".to_string());
        let exe = command.exe;
        match spawn_rank(exe, (command.args)(rank, &addr), command.env, slot, tx) {
            Ok((child, stderr)) => {
                started.children.push(child);
                started.stderr_readers.push(stderr);
            }
            Err(e) => {
                for c in started.children.iter_mut() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(LocalError::Spawn(format!(
                    "cannot start rank {rank} ({}): {e}",
                    exe.display()
                )));
            }
        }
        if rendezvous.is_none() && slot == 0 && first_is_zero {
            rendezvous = rank_zero_port(&mut started, rx, timeout, listening);
            if rendezvous.is_none() {
                break;
            }
        }
    }
    Ok(started)
}

/// Waits for rank 0's rendezvous port: its address, or `None` when rank 0 ended before
/// listening or did not listen within `timeout` (then killed). Whatever else rank 0 says
/// meanwhile is kept in `started.early` for the main loop.
fn rank_zero_port(
    started: &mut Started,
    rx: &mpsc::Receiver<(usize, Option<ChildEvent>)>,
    timeout: Duration,
    listening: &mut dyn FnMut(u16),
) -> Option<String> {
    let deadline = Instant::now() + timeout;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok((0, Some(ChildEvent::Listening { port }))) => {
                listening(port);
                return Some(format!("127.0.0.1:{port}"));
            }
            Ok(ev) => {
                let ended = ev.1.is_none();
                started.early.push(ev);
                if ended {
                    return None; // rank 0 ended before listening: its error is in `early`
                }
            }
            Err(_) if Instant::now() < deadline => {}
            Err(_) => {
                if let Some(c) = started.children.first_mut() {
                    let _ = c.kill();
                }
                started.early.push((
                    0,
                    Some(ChildEvent::Error {
                        message: format!(
                            "rank 0 did not open its rendezvous port within {} s",
                            timeout.as_secs()
                        ),
                        culprit: Some(0),
                    }),
                ));
                return None;
            }
        }
    }
}

/// What the ranks reported: rank 0's summary, the failures, and when the first came.
struct Heard {
    summary: Option<RunSummary>,
    failures: Vec<RankFailure>,
    failed_at: Option<Instant>,
}

/// Reads the ranks' events (`early` first) until every started rank has ended, adding up
/// progress. After the first failure the others have [`REPORT_GRACE`] (capped by
/// `timeout`) to say their part (an abort reaches every rank in milliseconds); a rank
/// that every report blames and that has not exited (stopped, hung) is not waited for
/// at all.
fn listen(
    ranks: &[usize],
    started: usize,
    early: Vec<(usize, Option<ChildEvent>)>,
    rx: &mpsc::Receiver<(usize, Option<ChildEvent>)>,
    timeout: Duration,
    progress: &mut dyn FnMut(usize, usize),
) -> Heard {
    let world = ranks.len();
    let mut totals = vec![0usize; world];
    let mut dones = vec![0usize; world];
    // Ranks never started (rank 0 failed first) count as finished.
    let mut finished: Vec<bool> = (0..world).map(|slot| slot >= started).collect();
    let mut heard = Heard {
        summary: None,
        failures: Vec::new(),
        failed_at: None,
    };
    let mut early = early.into_iter();
    let grace = REPORT_GRACE.min(timeout);
    while finished.iter().any(|f| !f) {
        if let Some(t) = heard.failed_at {
            let blamed: Vec<usize> = heard.failures.iter().filter_map(|f| f.culprit).collect();
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
            Ok((_, Some(ChildEvent::Summary(s)))) => heard.summary = Some(*s),
            Ok((slot, Some(ChildEvent::Error { message, culprit }))) => {
                heard.failed_at.get_or_insert_with(Instant::now);
                heard.failures.push(RankFailure {
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
    heard
}

/// How one started rank's process ended: its exit status, whether the launcher killed
/// it, and its stderr.
struct Exit {
    status: std::io::Result<std::process::ExitStatus>,
    killed: bool,
    stderr: String,
}

/// Waits for every child, first killing those still running when the job `failed`.
fn reap(
    children: &mut [Child],
    stderr_readers: Vec<std::thread::JoinHandle<String>>,
    failed: bool,
) -> Vec<Exit> {
    let ended: Vec<_> = children
        .iter_mut()
        .map(|c| {
            let killed = failed && matches!(c.try_wait(), Ok(None)) && c.kill().is_ok();
            (c.wait(), killed)
        })
        .collect();
    ended
        .into_iter()
        .zip(stderr_readers)
        .map(|((status, killed), h)| Exit {
            status,
            killed,
            stderr: h.join().unwrap_or_default(),
        })
        .collect()
}

/// A failure for each rank that did not exit cleanly and reported nothing itself: killed,
/// or its exit status with the last line of its stderr.
fn unreported_failures(
    ranks: &[usize],
    exits: &[Exit],
    reported: &[RankFailure],
) -> Vec<RankFailure> {
    let mut out = Vec::new();
    for (slot, exit) in exits.iter().enumerate() {
        let rank = ranks[slot];
        let ok = matches!(&exit.status, Ok(s) if s.success());
        if ok || reported.iter().any(|f| f.rank == rank) {
            continue;
        }
        let last = exit.stderr.lines().last().unwrap_or("").trim().to_string();
        out.push(RankFailure {
            rank,
            message: match &exit.status {
                _ if exit.killed => {
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
    out
}
