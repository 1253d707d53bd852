//! The NCCL backend (cargo feature `nccl`), on cudarc 0.19 with dynamic loading, so it
//! builds without CUDA and finds libcuda and libnccl when it runs.
//!
//! - Before the first CUDA or NCCL call, both libraries are probed
//!   (`is_culib_present`); a missing one is a clear error, not cudarc's panic.
//! - One communicator per group, with its own unique id: rank 0 creates every group's id
//!   and ships them through the rendezvous blob (128 bytes per group, plan order).
//! - One thread per communicator: cudarc's `Comm` is not `Send`, so the thread creates it
//!   and owns it with its stream and device buffers; the [`NcclComm`] handle sends it
//!   commands and waits for each reply within the plan's timeout, so a hung peer becomes
//!   an error naming the group and the collective instead of a hang.
//! - All-to-All is a grouped send/recv to every peer (cudarc's safe API has no AlltoAll).
//! - Buffers are untyped device bytes; reductions view them as the plan's dtype.

use crate::comm::{CommError, CommResult, Communicator};
use crate::options::RankOptions;
use crate::plan::{DType, Group, Plan};
use crate::replay::{self, Backend, CalibrationPoint, LineMeasurement};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use cudarc::nccl::{Comm, Id, ReduceOp};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

const ID_BYTES: usize = 128;

/// Probe libcuda and libnccl without letting cudarc panic.
pub fn probe() -> CommResult<()> {
    // SAFETY: the probes only try to open the libraries by cudarc's candidate names.
    let cuda = unsafe { cudarc::driver::sys::is_culib_present() };
    if !cuda {
        return Err(CommError::new(
            "the NCCL backend needs the CUDA driver (libcuda.so), which is not on the loader path",
        ));
    }
    // SAFETY: as above.
    let nccl = unsafe { cudarc::nccl::sys::is_culib_present() };
    if !nccl {
        return Err(CommError::new(
            "the NCCL backend needs libnccl.so on the loader path (cudarc does not look for libnccl.so.2: add a libnccl.so symlink, or install libnccl-dev)",
        ));
    }
    Ok(())
}

fn nccl_err(what: &str, e: cudarc::nccl::result::NcclError) -> CommError {
    CommError::new(format!("{what}: NCCL error {:?}", e.0))
}

fn cuda_err(what: &str, e: cudarc::driver::DriverError) -> CommError {
    CommError::new(format!("{what}: CUDA error {e:?}"))
}

/// Groups that get an NCCL communicator, in plan order (the blob's order).
fn comm_groups(plan: &Plan) -> impl Iterator<Item = &Group> {
    plan.groups.iter().filter(|g| g.kind.has_traffic())
}

/// Rank 0: one fresh unique id per group.
pub fn unique_ids(plan: &Plan) -> CommResult<Vec<u8>> {
    probe()?;
    let mut blob = Vec::new();
    for g in comm_groups(plan) {
        let id = guarded(|| {
            Id::new().map_err(|e| nccl_err(&format!("ncclGetUniqueId for {}", g.name), e))
        })?;
        blob.extend(id.internal().iter().map(|&c| c as u8));
    }
    Ok(blob)
}

/// Run `f`, turning a panic inside cudarc into an error.
fn guarded<T>(f: impl FnOnce() -> CommResult<T>) -> CommResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic in cudarc".into());
        Err(CommError::new(msg))
    })
}

/// A device buffer, by handle: the bytes live on the communicator's thread.
#[derive(Debug, Clone, Copy)]
pub struct DeviceBuffer {
    id: usize,
    dtype: DType,
    bytes: usize,
}

enum Command {
    Alloc(usize),
    Upload(usize, Vec<u8>),
    Download(usize),
    AllReduce(usize, DType),
    AllGather(usize, usize),
    ReduceScatter(usize, usize, DType),
    AllToAll(usize, usize, usize),
    Send(usize, usize),
    Recv(usize, usize),
    Broadcast(usize, usize),
    Synchronize,
}

enum Reply {
    Done,
    Buffer(usize),
    Bytes(Vec<u8>),
}

pub struct NcclComm {
    name: String,
    rank: usize,
    size: usize,
    timeout: Duration,
    context: String,
    tx: mpsc::Sender<(Command, String)>,
    rx: mpsc::Receiver<CommResult<Reply>>,
}

impl NcclComm {
    /// Start the group's thread: pick the GPU, make a stream, join the communicator.
    pub fn start(
        group: &Group,
        rank: usize,
        local_gpu: usize,
        id: [u8; ID_BYTES],
        timeout: Duration,
    ) -> CommResult<NcclComm> {
        let me = group
            .members
            .iter()
            .position(|&m| m == rank)
            .ok_or_else(|| CommError::new(format!("rank {rank} is not in {}", group.name)))?;
        let size = group.members.len();
        let (tx, worker_rx) = mpsc::channel::<(Command, String)>();
        let (worker_tx, rx) = mpsc::channel::<CommResult<Reply>>();
        let name = group.name.clone();
        let thread_name = format!("nccl-{name}");
        std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || worker(name, me, size, local_gpu, id, worker_rx, worker_tx))
            .map_err(|e| CommError::new(format!("thread: {e}")))?;
        let comm = NcclComm {
            name: group.name.clone(),
            rank: me,
            size,
            timeout,
            context: String::new(),
            tx,
            rx,
        };
        // The worker's first reply says whether the communicator came up.
        comm.wait("ncclCommInitRank")?;
        Ok(comm)
    }

    fn wait(&self, op: &str) -> CommResult<Reply> {
        match self.rx.recv_timeout(self.timeout) {
            Ok(r) => r.map_err(|e| CommError::new(format!("{op} on {} ({}): {}", self.name, self.context, e.message))),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(CommError::new(format!(
                "{op} on {} ({}) did not complete within {} s: a member of the group is missing or hung",
                self.name,
                self.context,
                self.timeout.as_secs()
            ))),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(CommError::new(format!(
                "{op} on {}: the communicator's thread ended",
                self.name
            ))),
        }
    }

    fn ask(&mut self, op: &str, cmd: Command) -> CommResult<Reply> {
        self.tx.send((cmd, op.to_string())).map_err(|_| {
            CommError::new(format!(
                "{op} on {}: the communicator's thread ended",
                self.name
            ))
        })?;
        self.wait(op)
    }

    fn done(&mut self, op: &str, cmd: Command) -> CommResult<()> {
        self.ask(op, cmd).map(|_| ())
    }
}

fn worker(
    name: String,
    me: usize,
    size: usize,
    local_gpu: usize,
    id: [u8; ID_BYTES],
    rx: mpsc::Receiver<(Command, String)>,
    tx: mpsc::Sender<CommResult<Reply>>,
) {
    let init = guarded(|| {
        let count = CudaContext::device_count()
            .map_err(|e| cuda_err("cuDeviceGetCount", e))?
            .max(1) as usize;
        let ctx = CudaContext::new(local_gpu % count).map_err(|e| cuda_err("cuCtxCreate", e))?;
        let stream = ctx
            .new_stream()
            .map_err(|e| cuda_err("cuStreamCreate", e))?;
        let mut raw = [0 as std::ffi::c_char; ID_BYTES];
        for (d, s) in raw.iter_mut().zip(id) {
            *d = s as std::ffi::c_char;
        }
        let comm = Comm::from_rank(stream.clone(), me, size, Id::uninit(raw))
            .map_err(|e| nccl_err(&format!("ncclCommInitRank for {name}"), e))?;
        Ok((stream, comm))
    });
    let (stream, comm) = match init {
        Ok(x) => {
            let _ = tx.send(Ok(Reply::Done));
            x
        }
        Err(e) => {
            let _ = tx.send(Err(e));
            return;
        }
    };
    let mut buffers: Vec<CudaSlice<u8>> = Vec::new();
    for (cmd, op) in rx {
        let reply = guarded(|| execute(&comm, &stream, &mut buffers, cmd, &op));
        if tx.send(reply).is_err() {
            break;
        }
    }
}

fn execute(
    comm: &Comm,
    stream: &Arc<CudaStream>,
    buffers: &mut Vec<CudaSlice<u8>>,
    cmd: Command,
    op: &str,
) -> CommResult<Reply> {
    let n = |e| nccl_err(op, e);
    match cmd {
        Command::Alloc(bytes) => {
            let b = stream
                .alloc_zeros::<u8>(bytes.max(1))
                .map_err(|e| cuda_err(op, e))?;
            buffers.push(b);
            Ok(Reply::Buffer(buffers.len() - 1))
        }
        Command::Upload(id, data) => {
            stream
                .memcpy_htod(&data, &mut buffers[id])
                .map_err(|e| cuda_err(op, e))?;
            Ok(Reply::Done)
        }
        Command::Download(id) => Ok(Reply::Bytes(
            stream
                .clone_dtoh(&buffers[id])
                .map_err(|e| cuda_err(op, e))?,
        )),
        Command::AllReduce(id, dtype) => {
            let b = &mut buffers[id];
            let count = b.len() / dtype.size();
            // SAFETY: the buffer holds `count` whole elements of `dtype`, which has no
            // invalid bit patterns.
            unsafe {
                match dtype {
                    DType::Bf16 => comm
                        .all_reduce_in_place(&mut typed::<half::bf16>(b, count)?, &ReduceOp::Sum),
                    DType::F16 => {
                        comm.all_reduce_in_place(&mut typed::<half::f16>(b, count)?, &ReduceOp::Sum)
                    }
                    DType::F32 => {
                        comm.all_reduce_in_place(&mut typed::<f32>(b, count)?, &ReduceOp::Sum)
                    }
                    DType::I32 => {
                        comm.all_reduce_in_place(&mut typed::<i32>(b, count)?, &ReduceOp::Sum)
                    }
                    DType::Fp8 => return Err(CommError::new("fp8 reductions are not supported")),
                }
            }
            .map_err(n)?;
            Ok(Reply::Done)
        }
        Command::AllGather(s, r) => {
            let (send, recv) = two(buffers, s, r);
            comm.all_gather(send, recv).map_err(n)?;
            Ok(Reply::Done)
        }
        Command::ReduceScatter(s, r, dtype) => {
            let (send, recv) = two(buffers, s, r);
            let (cs, cr) = (send.len() / dtype.size(), recv.len() / dtype.size());
            // SAFETY: as for AllReduce.
            unsafe {
                match dtype {
                    DType::Bf16 => comm.reduce_scatter(
                        &typed_ro::<half::bf16>(send, cs)?,
                        &mut typed::<half::bf16>(recv, cr)?,
                        &ReduceOp::Sum,
                    ),
                    DType::F16 => comm.reduce_scatter(
                        &typed_ro::<half::f16>(send, cs)?,
                        &mut typed::<half::f16>(recv, cr)?,
                        &ReduceOp::Sum,
                    ),
                    DType::F32 => comm.reduce_scatter(
                        &typed_ro::<f32>(send, cs)?,
                        &mut typed::<f32>(recv, cr)?,
                        &ReduceOp::Sum,
                    ),
                    DType::I32 => comm.reduce_scatter(
                        &typed_ro::<i32>(send, cs)?,
                        &mut typed::<i32>(recv, cr)?,
                        &ReduceOp::Sum,
                    ),
                    DType::Fp8 => return Err(CommError::new("fp8 reductions are not supported")),
                }
            }
            .map_err(n)?;
            Ok(Reply::Done)
        }
        Command::AllToAll(s, r, p) => {
            let (send, recv) = two(buffers, s, r);
            let block = send.len() / p.max(1);
            // Grouped point-to-point: every send and receive of the exchange between one
            // ncclGroupStart and ncclGroupEnd (ends the group even when a call fails).
            cudarc::nccl::group_start().map_err(n)?;
            let mut issued = Ok(());
            for peer in 0..p {
                let range = peer * block..(peer + 1) * block;
                issued = comm
                    .send(&send.slice(range.clone()), peer as i32)
                    .and_then(|_| {
                        comm.recv(&mut recv.slice_mut(range), peer as i32)
                            .map(|_| ())
                    });
                if issued.is_err() {
                    break;
                }
            }
            let ended = cudarc::nccl::group_end();
            issued.map_err(n)?;
            ended.map_err(n)?;
            Ok(Reply::Done)
        }
        Command::Send(id, peer) => {
            comm.send(&buffers[id], peer as i32).map_err(n)?;
            Ok(Reply::Done)
        }
        Command::Recv(id, peer) => {
            comm.recv(&mut buffers[id], peer as i32).map_err(n)?;
            Ok(Reply::Done)
        }
        Command::Broadcast(id, root) => {
            comm.broadcast_in_place(&mut buffers[id], root as i32)
                .map_err(n)?;
            Ok(Reply::Done)
        }
        Command::Synchronize => {
            stream.synchronize().map_err(|e| cuda_err(op, e))?;
            Ok(Reply::Done)
        }
    }
}

/// Two distinct buffers, the first shared and the second mutable.
fn two(buffers: &mut [CudaSlice<u8>], s: usize, r: usize) -> (&CudaSlice<u8>, &mut CudaSlice<u8>) {
    assert_ne!(s, r, "send and receive buffers must differ");
    if s < r {
        let (a, b) = buffers.split_at_mut(r);
        (&a[s], &mut b[0])
    } else {
        let (a, b) = buffers.split_at_mut(s);
        (&b[0], &mut a[r])
    }
}

/// # Safety
/// `b` must hold at least `count` elements of `T`, and every bit pattern must be a valid `T`.
unsafe fn typed<T>(
    b: &mut CudaSlice<u8>,
    count: usize,
) -> CommResult<cudarc::driver::CudaViewMut<'_, T>> {
    b.transmute_mut::<T>(count)
        .ok_or_else(|| CommError::new("buffer is too small for its dtype"))
}

/// # Safety
/// As for [`typed`].
unsafe fn typed_ro<T>(
    b: &CudaSlice<u8>,
    count: usize,
) -> CommResult<cudarc::driver::CudaView<'_, T>> {
    b.transmute::<T>(count)
        .ok_or_else(|| CommError::new("buffer is too small for its dtype"))
}

impl Communicator for NcclComm {
    type Buffer = DeviceBuffer;

    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn set_context(&mut self, context: &str) {
        self.context = context.to_string();
    }
    fn alloc(&mut self, dtype: DType, bytes: usize) -> CommResult<DeviceBuffer> {
        match self.ask("cuMemAlloc", Command::Alloc(bytes))? {
            Reply::Buffer(id) => Ok(DeviceBuffer { id, dtype, bytes }),
            _ => Err(CommError::new("alloc: unexpected reply")),
        }
    }
    fn upload(&mut self, buf: &mut DeviceBuffer, host: &[u8]) -> CommResult<()> {
        if host.len() != buf.bytes {
            return Err(CommError::new("upload: size mismatch"));
        }
        self.done("cuMemcpyHtoD", Command::Upload(buf.id, host.to_vec()))
    }
    fn download(&mut self, buf: &DeviceBuffer) -> CommResult<Vec<u8>> {
        match self.ask("cuMemcpyDtoH", Command::Download(buf.id))? {
            Reply::Bytes(mut v) => {
                v.truncate(buf.bytes);
                Ok(v)
            }
            _ => Err(CommError::new("download: unexpected reply")),
        }
    }
    fn all_reduce(&mut self, buf: &mut DeviceBuffer) -> CommResult<()> {
        self.done("ncclAllReduce", Command::AllReduce(buf.id, buf.dtype))
    }
    fn all_gather(&mut self, send: &DeviceBuffer, recv: &mut DeviceBuffer) -> CommResult<()> {
        self.done("ncclAllGather", Command::AllGather(send.id, recv.id))
    }
    fn reduce_scatter(&mut self, send: &DeviceBuffer, recv: &mut DeviceBuffer) -> CommResult<()> {
        self.done(
            "ncclReduceScatter",
            Command::ReduceScatter(send.id, recv.id, send.dtype),
        )
    }
    fn all_to_all(&mut self, send: &DeviceBuffer, recv: &mut DeviceBuffer) -> CommResult<()> {
        let p = self.size;
        self.done(
            "all_to_all (grouped ncclSend/ncclRecv)",
            Command::AllToAll(send.id, recv.id, p),
        )
    }
    fn send(&mut self, buf: &DeviceBuffer, peer: usize) -> CommResult<()> {
        self.done("ncclSend", Command::Send(buf.id, peer))
    }
    fn recv(&mut self, buf: &mut DeviceBuffer, peer: usize) -> CommResult<()> {
        self.done("ncclRecv", Command::Recv(buf.id, peer))
    }
    fn broadcast(&mut self, buf: &mut DeviceBuffer, root: usize) -> CommResult<()> {
        self.done("ncclBroadcast", Command::Broadcast(buf.id, root))
    }
    fn barrier(&mut self) -> CommResult<()> {
        let mut one = self.alloc(DType::I32, 4)?;
        self.all_reduce(&mut one)?;
        self.synchronize()
    }
    fn synchronize(&mut self) -> CommResult<()> {
        self.done("cuStreamSynchronize", Command::Synchronize)
    }
}

struct NcclBackend<'a> {
    plan: &'a Plan,
    rank: usize,
    ids: Vec<(String, [u8; ID_BYTES])>,
    timeout: Duration,
}

impl Backend for NcclBackend<'_> {
    type Comm = NcclComm;
    fn communicator(&mut self, group: &Group) -> CommResult<NcclComm> {
        let id = self
            .ids
            .iter()
            .find(|(n, _)| *n == group.name)
            .map(|(_, id)| *id)
            .ok_or_else(|| CommError::new(format!("no NCCL id for {}", group.name)))?;
        let gpu = self.plan.ranks[self.rank].local_gpu as usize;
        NcclComm::start(group, self.rank, gpu, id, self.timeout)
    }
}

/// One rank's replay (and calibration) on NCCL; the ids come from rank 0's blob.
pub fn replay_rank(
    plan: &Plan,
    opts: &RankOptions,
    mesh: &crate::cpu::Mesh,
    blob: &[u8],
    progress: &mut dyn FnMut(usize),
) -> CommResult<(Vec<LineMeasurement>, Vec<CalibrationPoint>)> {
    probe()?;
    let groups: Vec<&Group> = comm_groups(plan).collect();
    if blob.len() != groups.len() * ID_BYTES {
        return Err(CommError::blame(
            0,
            format!(
                "rank 0 sent {} bytes of NCCL ids, expected {} for {} groups",
                blob.len(),
                groups.len() * ID_BYTES,
                groups.len()
            ),
        ));
    }
    let ids = groups
        .iter()
        .zip(blob.chunks_exact(ID_BYTES))
        .map(|(g, c)| (g.name.clone(), c.try_into().expect("128-byte chunk")))
        .collect();
    let mut backend = NcclBackend {
        plan,
        rank: opts.rank,
        ids,
        timeout: opts.timeout,
    };
    let mut comms = replay::communicators(&mut backend, plan, opts.rank)?;
    let lines = replay::replay(
        plan,
        opts.rank,
        &mut comms,
        &opts.replay,
        &|| mesh.poll_aborts(),
        progress,
    )?;
    let cal = replay::calibrate(plan, &mut comms, &opts.calibrate, opts.calibration_calls)?;
    Ok((lines, cal))
}
