//! One rank's run, start to finish: rendezvous (rank 0 serves), the TCP mesh to every rank
//! it shares a group with, the backend's communicators, the replay (and calibration), and
//! the gather of every rank's measurements at rank 0, which returns the summary.
//!
//! Any failure is sent to every connected rank as an abort naming the rank at fault, so
//! the whole job ends within the plan's timeout with the same story on every rank.

use crate::comm::{CommError, CommResult};
use crate::cpu::{CpuComm, Mesh};
use crate::plan::{Group, Plan};
use crate::rendezvous;
use crate::replay::{self, Backend, RankReport};
use crate::summary::{summarize, RunSummary};
use std::collections::BTreeSet;
use std::net::TcpListener;
use std::rc::Rc;

pub use crate::options::{BackendKind, RankOptions};

/// The ranks `rank` exchanges messages with: every member of its groups, and rank 0
/// (which gathers results) — all ranks for rank 0.
pub fn peers_of(plan: &Plan, rank: usize) -> Vec<usize> {
    let mut set = BTreeSet::new();
    if rank == 0 {
        set.extend(1..plan.world_size);
    } else {
        set.insert(0);
    }
    for g in &plan.groups {
        if g.kind.has_traffic() && g.members.contains(&rank) {
            set.extend(g.members.iter().copied());
        }
    }
    set.remove(&rank);
    set.into_iter().collect()
}

struct CpuBackend {
    mesh: Rc<Mesh>,
}

impl Backend for CpuBackend {
    type Comm = CpuComm;
    fn communicator(&mut self, group: &Group) -> CommResult<CpuComm> {
        CpuComm::new(self.mesh.clone(), &group.name, group.members.clone())
    }
}

/// What a rank reports while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankEvent {
    /// Rank 0 serves the rendezvous on this port (the one asked for, or the one the
    /// system chose for port 0 — how `--local` avoids racing for a free port).
    Listening(u16),
    /// Schedule lines done of the total.
    Progress(usize, usize),
}

/// Run one rank. Rank 0 returns the summary of the whole run; the others `None`.
pub fn run_rank(
    plan: &Plan,
    opts: &RankOptions,
    events: &mut dyn FnMut(RankEvent),
) -> CommResult<Option<RunSummary>> {
    let rank = opts.rank;
    if rank >= plan.world_size {
        return Err(CommError::new(format!(
            "rank {rank} is outside the plan's world (world_size = {})",
            plan.world_size
        )));
    }
    // Rank 0 takes its rendezvous port before anything else takes ports.
    let server = if rank == 0 {
        let server = TcpListener::bind((opts.bind, opts.rendezvous.port())).map_err(|e| {
            CommError::new(format!(
                "rank 0 cannot serve the rendezvous on port {}: {e}",
                opts.rendezvous.port()
            ))
        })?;
        let port = server
            .local_addr()
            .map_err(|e| CommError::new(e.to_string()))?
            .port();
        events(RankEvent::Listening(port));
        Some(server)
    } else {
        None
    };
    let listener = TcpListener::bind((opts.bind, 0))
        .map_err(|e| CommError::new(format!("cannot listen for peers: {e}")))?;
    let own_port = listener
        .local_addr()
        .map_err(|e| CommError::new(e.to_string()))?
        .port();
    let blob = if rank == 0 {
        backend_blob(plan, opts.backend)?
    } else {
        Vec::new()
    };
    let roster = if let Some(server) = server {
        rendezvous::serve(
            server,
            plan.world_size,
            plan.digest,
            own_port,
            &blob,
            &opts.key,
            opts.timeout,
        )?
    } else {
        rendezvous::join(
            opts.rendezvous,
            rank,
            plan.world_size,
            plan.digest,
            own_port,
            &opts.key,
            opts.timeout,
        )?
    };
    let mesh = Rc::new(Mesh::connect(
        rank,
        &roster.addresses,
        listener,
        &peers_of(plan, rank),
        plan.digest,
        &opts.key,
        opts.timeout,
    )?);
    let mut progress = |done: usize, total: usize| events(RankEvent::Progress(done, total));
    let outcome = run_connected(plan, opts, &mesh, &roster.blob, &mut progress);
    if let Err(e) = &outcome {
        mesh.abort(e);
    }
    drop(mesh);
    outcome
}

fn run_connected(
    plan: &Plan,
    opts: &RankOptions,
    mesh: &Rc<Mesh>,
    blob: &[u8],
    progress: &mut dyn FnMut(usize, usize),
) -> CommResult<Option<RunSummary>> {
    let rank = opts.rank;
    let total = replay::total_lines(plan, rank, &opts.replay);
    let mut tick = |done: usize| progress(done, total);
    let (lines, calibration) = match opts.backend {
        BackendKind::Cpu => {
            let mut backend = CpuBackend { mesh: mesh.clone() };
            let mut comms = replay::communicators(&mut backend, plan, rank)?;
            let lines = replay::replay(
                plan,
                rank,
                &mut comms,
                &opts.replay,
                &|| mesh.poll_aborts(),
                &mut tick,
            )?;
            let cal = replay::calibrate(plan, &mut comms, &opts.calibrate, opts.calibration_calls)?;
            (lines, cal)
        }
        BackendKind::Nccl => nccl_replay(plan, opts, mesh, blob, &mut tick)?,
    };
    let report = RankReport {
        rank,
        lines,
        calibration,
    };
    let all = replay::gather(mesh, &report)?;
    Ok(all.map(|reports| summarize(plan, opts.replay.scale, &reports)))
}

#[cfg(feature = "nccl")]
fn backend_blob(plan: &Plan, kind: BackendKind) -> CommResult<Vec<u8>> {
    match kind {
        BackendKind::Cpu => Ok(Vec::new()),
        BackendKind::Nccl => crate::nccl::unique_ids(plan),
    }
}

#[cfg(not(feature = "nccl"))]
fn backend_blob(_plan: &Plan, kind: BackendKind) -> CommResult<Vec<u8>> {
    match kind {
        BackendKind::Cpu => Ok(Vec::new()),
        BackendKind::Nccl => Err(nccl_missing()),
    }
}

#[cfg(feature = "nccl")]
fn nccl_replay(
    plan: &Plan,
    opts: &RankOptions,
    mesh: &Mesh,
    blob: &[u8],
    progress: &mut dyn FnMut(usize),
) -> CommResult<(Vec<replay::LineMeasurement>, Vec<replay::CalibrationPoint>)> {
    crate::nccl::replay_rank(plan, opts, mesh, blob, progress)
}

#[cfg(not(feature = "nccl"))]
fn nccl_replay(
    _plan: &Plan,
    _opts: &RankOptions,
    _mesh: &Mesh,
    _blob: &[u8],
    _progress: &mut dyn FnMut(usize),
) -> CommResult<(Vec<replay::LineMeasurement>, Vec<replay::CalibrationPoint>)> {
    Err(nccl_missing())
}

#[cfg(not(feature = "nccl"))]
fn nccl_missing() -> CommError {
    CommError::new(
        "this dic was built without the NCCL backend; rebuild with `cargo build --release --features nccl`",
    )
}
