//! Replaying a plan's schedule on one rank: build the rank's communicators, run each
//! line of its stage's decode-step and prefill-chunk schedule (`calls` calls of one
//! collective, back to back after one untimed warm-up call, as nccl-tests times iterations), check
//! the first call's result bit for bit, and time the rest. Also the calibration sweep.
//!
//! Generic over the backend; the control traffic (gathering results at rank 0) goes over
//! the CPU mesh, which both backends have.

use crate::comm::{
    buffer_sizes, data_input, reduce_expected, reduce_input, CommError, CommResult, Communicator,
};
use crate::cpu::Mesh;
use crate::plan::{Collective, DType, Group, GroupKind, Phase, Plan, Step};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// Builds a backend's communicator for one group of the plan.
pub trait Backend {
    type Comm: Communicator;
    fn communicator(&mut self, group: &Group) -> CommResult<Self::Comm>;
}

#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    /// Message sizes are the plan's × this (1.0 = real sizes).
    pub scale: f64,
    /// Times each schedule is replayed (decode and prefill).
    pub iterations: usize,
    /// Calls per line are capped at this (0 = as the plan says); every call still counts
    /// toward the measured mean.
    pub max_calls: u64,
}

/// One line's measurement on one rank.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LineMeasurement {
    pub phase: String,
    pub stage: u64,
    pub line: usize,
    pub group: String,
    pub group_size: usize,
    pub collective: String,
    pub bytes_plan: u64,
    pub bytes_run: u64,
    pub calls: u64,
    pub predicted_us: f64,
    /// dic's prediction of one call at the size it ran (`bytes_run`), on the planned
    /// fabric: what `measured_us` compares with.
    #[serde(default)]
    pub predicted_run_us: Option<f64>,
    /// Mean time of one call on this rank, microseconds.
    pub measured_us: f64,
    pub verified: bool,
}

/// A calibration point: one size on one link class.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CalibrationPoint {
    pub link: String,
    pub group: String,
    pub group_size: usize,
    pub collective: String,
    pub bytes: u64,
    pub measured_us: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RankReport {
    pub rank: usize,
    pub lines: Vec<LineMeasurement>,
    pub calibration: Vec<CalibrationPoint>,
}

/// The lines `rank` runs, in order, for one phase: the PP receive from the previous stage
/// (if any), the stage's collectives, then its PP send. Each item: (stage, line index, step).
pub fn lines_of(plan: &Plan, rank: usize, phase: Phase) -> Vec<(u64, usize, &Step)> {
    let stage = plan.ranks[rank].pp_stage;
    let sched = plan.schedule(phase);
    let mut out = Vec::new();
    if plan.pp_prev(rank).is_some() {
        if let Some(prev) = sched.stages.iter().find(|s| s.stage + 1 == stage) {
            for (i, st) in prev.steps.iter().enumerate() {
                if st.group == GroupKind::Pp {
                    out.push((prev.stage, i, st));
                }
            }
        }
    }
    if let Some(me) = sched.stages.iter().find(|s| s.stage == stage) {
        for (i, st) in me.steps.iter().enumerate() {
            if st.group != GroupKind::Pp || plan.pp_next(rank).is_some() {
                out.push((me.stage, i, st));
            }
        }
    }
    out
}

/// Total lines a rank will run (for progress).
pub fn total_lines(plan: &Plan, rank: usize, opts: &ReplayOptions) -> usize {
    opts.iterations
        * (lines_of(plan, rank, Phase::Decode).len() + lines_of(plan, rank, Phase::Prefill).len())
}

/// The most memory `rank`'s replay and calibration hold at once, in bytes: four times
/// the send and receive buffers of its largest call (the buffers themselves, the
/// verification's expected and received copies, and the frames queued to its peers).
pub fn peak_buffer_bytes(plan: &Plan, rank: usize, opts: &ReplayOptions, calibrate: &[u64]) -> u64 {
    let buffers = |collective: Collective, bytes: u64, size: usize, dtype: DType| -> u64 {
        let (send, recv) = buffer_sizes(collective, bytes, size, dtype);
        (send as u64).saturating_add(recv as u64).saturating_mul(4)
    };
    let mut peak = 0;
    for phase in [Phase::Decode, Phase::Prefill] {
        for (_, _, step) in lines_of(plan, rank, phase) {
            let size = if step.group == GroupKind::Pp {
                2
            } else {
                plan.group_of(rank, step.group)
                    .map_or(1, |g| g.members.len())
            };
            let bytes = scaled(step.bytes, opts.scale);
            peak = peak.max(buffers(step.collective, bytes, size, step.dtype));
        }
    }
    for g in calibration_groups(plan) {
        if g.members.contains(&rank) {
            for &bytes in calibrate {
                let c = calibration_collective(g.kind);
                peak = peak.max(buffers(c, bytes, g.members.len(), DType::Bf16));
            }
        }
    }
    peak
}

fn scaled(bytes: u64, scale: f64) -> u64 {
    ((bytes as f64 * scale).round() as u64).max(1)
}

/// The communicators of `rank`, by group name, created in the plan's group order so that
/// every member creates a shared group at the same point (NCCL's init is collective).
pub fn communicators<B: Backend>(
    backend: &mut B,
    plan: &Plan,
    rank: usize,
) -> CommResult<BTreeMap<String, B::Comm>> {
    let mut out = BTreeMap::new();
    for g in &plan.groups {
        if g.members.contains(&rank) && g.kind.has_traffic() {
            out.insert(g.name.clone(), backend.communicator(g)?);
        }
    }
    Ok(out)
}

/// Run `rank`'s part of the plan. `progress` is called after each line.
pub fn replay<C: Communicator>(
    plan: &Plan,
    rank: usize,
    comms: &mut BTreeMap<String, C>,
    opts: &ReplayOptions,
    aborted: &dyn Fn() -> CommResult<()>,
    progress: &mut dyn FnMut(usize),
) -> CommResult<Vec<LineMeasurement>> {
    let mut results: BTreeMap<(Phase, u64, usize), LineMeasurement> = BTreeMap::new();
    let mut done = 0;
    for iteration in 0..opts.iterations {
        for phase in [Phase::Decode, Phase::Prefill] {
            for (stage, line, step) in lines_of(plan, rank, phase) {
                aborted()?;
                let (group, peer) = if step.group == GroupKind::Pp {
                    if stage == plan.ranks[rank].pp_stage {
                        let g = pp_group(plan, rank, true);
                        (g, Some(1))
                    } else {
                        let g = pp_group(plan, rank, false);
                        (g, Some(0))
                    }
                } else {
                    let g = plan.group_of(rank, step.group).ok_or_else(|| {
                        CommError::new(format!("rank {rank} has no {} group", step.group.name()))
                    })?;
                    (g.name.clone(), None)
                };
                let comm = comms
                    .get_mut(&group)
                    .ok_or_else(|| CommError::new(format!("no communicator for {group}")))?;
                let layer_text = if step.layers[0] == step.layers[1] {
                    format!("layer {}", step.layers[0])
                } else {
                    format!("layers {}–{}", step.layers[0], step.layers[1])
                };
                comm.set_context(&format!("{}, stage {stage}, {layer_text}", phase.name()));
                let bytes = scaled(step.bytes, opts.scale);
                let calls = if opts.max_calls > 0 {
                    step.calls.min(opts.max_calls)
                } else {
                    step.calls
                }
                .max(1);
                let (us, verified) = run_line(comm, step, bytes, calls, peer, iteration == 0)?;
                let key = (phase, stage, line);
                let entry = results.entry(key).or_insert_with(|| LineMeasurement {
                    phase: phase.name().to_string(),
                    stage,
                    line,
                    group: group.clone(),
                    group_size: comm.size(),
                    collective: step.collective.name().to_string(),
                    bytes_plan: step.bytes,
                    bytes_run: bytes,
                    calls: step.calls,
                    predicted_us: step.predicted_us,
                    predicted_run_us: step.predicted_at(bytes, comm.size()),
                    measured_us: 0.0,
                    verified: false,
                });
                entry.measured_us += us / opts.iterations as f64;
                entry.verified |= verified;
                done += 1;
                progress(done);
            }
        }
    }
    Ok(results.into_values().collect())
}

/// The name of the PP pair `rank` sends on (`as_sender`) or receives on.
fn pp_group(plan: &Plan, rank: usize, as_sender: bool) -> String {
    let slot = if as_sender { 0 } else { 1 };
    plan.groups
        .iter()
        .find(|g| g.kind == GroupKind::Pp && g.members[slot] == rank)
        .map(|g| g.name.clone())
        .unwrap_or_default()
}

/// Run one line: verify one call (when `verify`), then time `calls` calls. For a PP
/// hand-off `peer` is the other group rank; the receiver signals readiness first, so the
/// time is the hand-off, not the wait for the previous stage.
fn run_line<C: Communicator>(
    comm: &mut C,
    step: &Step,
    bytes: u64,
    calls: u64,
    peer: Option<usize>,
    verify: bool,
) -> CommResult<(f64, bool)> {
    let p = comm.size();
    let (send_len, recv_len) = buffer_sizes(step.collective, bytes, p, step.dtype);
    let dtype = step.dtype;
    if let Some(peer) = peer {
        let mut buf = comm.alloc(dtype, send_len)?;
        let mut ready = comm.alloc(DType::I32, 4)?;
        let me = comm.rank();
        if verify && me == 0 {
            let data = data_input(0, send_len);
            comm.upload(&mut buf, &data)?;
        }
        // One untimed hand-off first: it absorbs the wait for the other side to arrive
        // (the previous stage's collectives, or another group's calibration).
        let mut start = Instant::now();
        for call in 0..=calls {
            if call == 1 {
                start = Instant::now();
            }
            if me == 0 {
                comm.recv(&mut ready, peer)?;
                comm.send(&buf, peer)?;
            } else {
                comm.send(&ready, peer)?;
                comm.recv(&mut buf, peer)?;
            }
        }
        comm.synchronize()?;
        let us = start.elapsed().as_secs_f64() * 1e6 / calls as f64;
        if verify && me == 1 && comm.download(&buf)? != data_input(0, send_len) {
            return Err(CommError::new(format!(
                "send_recv on {}: received data differs from what was sent",
                comm.name()
            )));
        }
        return Ok((us, verify));
    }
    let mut send = comm.alloc(dtype, send_len)?;
    let mut recv = comm.alloc(dtype, recv_len)?;
    if verify {
        verify_call(comm, step.collective, dtype, &mut send, &mut recv)?;
    }
    // One untimed call lines the ranks up (as nccl-tests' warm-up iterations do) and,
    // unlike a separate barrier, a failure in it names the line's own collective.
    call(comm, step.collective, &mut send, &mut recv)?;
    comm.synchronize()?;
    let start = Instant::now();
    for _ in 0..calls {
        call(comm, step.collective, &mut send, &mut recv)?;
    }
    comm.synchronize()?;
    Ok((start.elapsed().as_secs_f64() * 1e6 / calls as f64, verify))
}

/// One call of `collective` (AllReduce in place on `send`).
pub fn call<C: Communicator>(
    comm: &mut C,
    collective: Collective,
    send: &mut C::Buffer,
    recv: &mut C::Buffer,
) -> CommResult<()> {
    match collective {
        Collective::AllReduce => comm.all_reduce(send),
        Collective::AllGather => comm.all_gather(send, recv),
        Collective::ReduceScatter => comm.reduce_scatter(send, recv),
        Collective::AllToAll => comm.all_to_all(send, recv),
        Collective::Broadcast => comm.broadcast(send, 0),
        Collective::SendRecv => Err(CommError::new("send_recv runs on a PP pair")),
    }
}

/// Fill the inputs with this rank's known pattern, run one call, and compare the result
/// with what the collective must produce, byte for byte.
pub fn verify_call<C: Communicator>(
    comm: &mut C,
    collective: Collective,
    dtype: DType,
    send: &mut C::Buffer,
    recv: &mut C::Buffer,
) -> CommResult<()> {
    let (p, g) = (comm.size(), comm.rank());
    let send_len = comm.download(send)?.len();
    let recv_len = comm.download(recv)?.len();
    let esize = dtype.size();
    let input = match collective {
        Collective::AllReduce | Collective::ReduceScatter => reduce_input(dtype, g, send_len),
        _ => data_input(g, send_len),
    };
    comm.upload(send, &input)?;
    call(comm, collective, send, recv)?;
    comm.synchronize()?;
    let (got, want) = match collective {
        Collective::AllReduce => (
            comm.download(send)?,
            reduce_expected(dtype, p, 0, send_len / esize),
        ),
        Collective::ReduceScatter => {
            let n = recv_len / esize;
            (comm.download(recv)?, reduce_expected(dtype, p, g * n, n))
        }
        Collective::AllGather => {
            let want: Vec<u8> = (0..p).flat_map(|r| data_input(r, send_len)).collect();
            (comm.download(recv)?, want)
        }
        Collective::AllToAll => {
            let n = send_len / p;
            // Block r of this rank's output is block g of rank r's input.
            let want: Vec<u8> = (0..p)
                .flat_map(|r| data_input(r, send_len)[g * n..(g + 1) * n].to_vec())
                .collect();
            (comm.download(recv)?, want)
        }
        Collective::Broadcast => (comm.download(send)?, data_input(0, send_len)),
        Collective::SendRecv => return Ok(()),
    };
    if got != want {
        let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
        return Err(CommError::new(format!(
            "{} on {} returned a wrong result on group rank {g} (first difference at byte {at} of {})",
            collective.name(),
            comm.name(),
            got.len()
        )));
    }
    Ok(())
}

/// The collective that characterises a group kind's traffic in calibration.
pub fn calibration_collective(kind: GroupKind) -> Collective {
    match kind {
        GroupKind::Ep => Collective::AllToAll,
        GroupKind::Pp => Collective::SendRecv,
        GroupKind::Dcp | GroupKind::Pcp => Collective::AllGather,
        GroupKind::Tp | GroupKind::Dp => Collective::AllReduce,
    }
}

/// One group per link class: the first group of at least two ranks that crosses it.
pub fn calibration_groups(plan: &Plan) -> Vec<&Group> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for g in &plan.groups {
        if let Some(link) = &g.link {
            if g.members.len() >= 2 && !seen.contains(link) {
                seen.push(link.clone());
                out.push(g);
            }
        }
    }
    out
}

/// Sweep `sizes` on this rank's calibration groups.
pub fn calibrate<C: Communicator>(
    plan: &Plan,
    comms: &mut BTreeMap<String, C>,
    sizes: &[u64],
    calls: u64,
) -> CommResult<Vec<CalibrationPoint>> {
    let mut out = Vec::new();
    for g in calibration_groups(plan) {
        let Some(comm) = comms.get_mut(&g.name) else {
            continue;
        };
        let collective = calibration_collective(g.kind);
        comm.set_context("calibration");
        for &bytes in sizes {
            let step = Step {
                group: g.kind,
                collective,
                layers: [0, 0],
                calls,
                bytes,
                dtype: DType::Bf16,
                predicted_us: 0.0,
                fabric: None,
            };
            let peer = (g.kind == GroupKind::Pp).then(|| 1 - comm.rank());
            let (us, _) = run_line(comm, &step, bytes, calls, peer, false)?;
            out.push(CalibrationPoint {
                link: g.link.clone().unwrap_or_default(),
                group: g.name.clone(),
                group_size: g.members.len(),
                collective: collective.name().to_string(),
                bytes,
                measured_us: us,
            });
        }
    }
    Ok(out)
}

/// Every rank sends its report to rank 0 over the mesh; rank 0 returns all of them.
pub fn gather(mesh: &Mesh, report: &RankReport) -> CommResult<Option<Vec<RankReport>>> {
    mesh.set_context("gathering results at rank 0");
    let bytes = serde_json::to_vec(report).map_err(|e| CommError::new(e.to_string()))?;
    if mesh.rank != 0 {
        mesh.send(0, &(bytes.len() as u64).to_le_bytes())?;
        mesh.send(0, &bytes)?;
        // Wait for rank 0's release so no rank closes its sockets early.
        mesh.recv(0, 0)?;
        return Ok(None);
    }
    let mut all = vec![report.clone()];
    for r in 1..mesh.world {
        let len_bytes: [u8; 8] = mesh
            .recv(r, 8)?
            .try_into()
            .map_err(|_| CommError::blame(r, format!("rank {r} sent a malformed report length")))?;
        let len = u64::from_le_bytes(len_bytes) as usize;
        if len > 1 << 30 {
            return Err(CommError::blame(
                r,
                format!("rank {r} sent an oversized report"),
            ));
        }
        let body = mesh.recv(r, len)?;
        let rep: RankReport = serde_json::from_slice(&body)
            .map_err(|e| CommError::blame(r, format!("rank {r} sent a bad report: {e}")))?;
        all.push(rep);
    }
    for r in 1..mesh.world {
        mesh.send(r, &[])?;
    }
    Ok(Some(all))
}
