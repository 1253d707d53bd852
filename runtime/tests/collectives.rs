//! Bit-exact correctness of the CPU backend's collectives: every collective, world sizes
//! 1–8, uneven groups (sizes that do not divide the buffer, members out of order, a group
//! that is a subset of the world), ring and tree AllReduce, three dtypes. Each rank is a
//! thread with its own TCP mesh on loopback (the same code a rank process runs).

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_runtime::comm::{buffer_sizes, CommError, CommResult, Communicator};
use dic_runtime::cpu::{AllReduceAlgorithm, CpuComm, HostBuffer, Mesh};
use dic_runtime::plan::{Collective, DType};
use dic_runtime::replay::verify_call;
use std::net::TcpListener;
use std::rc::Rc;
use std::time::Duration;

/// Run `body` on every member of a group `members` inside a world of `world` ranks.
fn with_group<F>(world: usize, members: Vec<usize>, body: F) -> Vec<CommResult<()>>
where
    F: Fn(&mut CpuComm) -> CommResult<()> + Send + Sync + Copy + 'static,
{
    let listeners: Vec<TcpListener> = (0..world)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let addrs: Vec<_> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    let mut handles = Vec::new();
    for (rank, listener) in listeners.into_iter().enumerate() {
        if !members.contains(&rank) {
            continue;
        }
        let addrs = addrs.clone();
        let members = members.clone();
        handles.push(std::thread::spawn(move || {
            let peers: Vec<usize> = members.iter().copied().filter(|&m| m != rank).collect();
            let key = dic_runtime::auth::JobKey::from_secret("collectives test secret").unwrap();
            let mesh = Mesh::connect(
                rank,
                &addrs,
                listener,
                &peers,
                7,
                &key,
                Duration::from_secs(10),
            )?;
            let mut comm = CpuComm::new(Rc::new(mesh), "test", members)?;
            body(&mut comm)
        }));
    }
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn check(
    world: usize,
    members: Vec<usize>,
    collective: Collective,
    dtype: DType,
    bytes: u64,
    algorithm: AllReduceAlgorithm,
) {
    let results = with_group(world, members.clone(), move |comm| {
        comm.algorithm = algorithm;
        let (s, r) = buffer_sizes(collective, bytes, comm.size(), dtype);
        let mut send = comm.alloc(dtype, s)?;
        let mut recv = comm.alloc(dtype, r)?;
        // Twice: buffers reused, as the replay reuses them.
        verify_call(comm, collective, dtype, &mut send, &mut recv)?;
        verify_call(comm, collective, dtype, &mut send, &mut recv)
    });
    for r in results {
        r.unwrap_or_else(|e| {
            panic!("{collective:?} {dtype:?} {bytes} B on {members:?} ({algorithm:?}): {e}")
        });
    }
}

const ALL: [Collective; 5] = [
    Collective::AllReduce,
    Collective::AllGather,
    Collective::ReduceScatter,
    Collective::AllToAll,
    Collective::Broadcast,
];

#[test]
fn every_collective_is_exact_on_world_sizes_1_to_8() {
    for p in 1..=8 {
        for c in ALL {
            for bytes in [2, 26, 3_000, 70_000] {
                check(
                    p,
                    (0..p).collect(),
                    c,
                    DType::Bf16,
                    bytes,
                    AllReduceAlgorithm::Auto,
                );
            }
        }
    }
}

#[test]
fn ring_and_tree_allreduce_agree_with_the_exact_sum() {
    for p in [2, 3, 5, 6, 8] {
        for alg in [AllReduceAlgorithm::Ring, AllReduceAlgorithm::Tree] {
            for dtype in [DType::Bf16, DType::F32, DType::I32, DType::F16] {
                // 13 and 1,001 elements: chunks of unequal size, fewer elements than ranks.
                for elements in [1u64, 13, 1_001] {
                    check(
                        p,
                        (0..p).collect(),
                        Collective::AllReduce,
                        dtype,
                        elements * dtype.size() as u64,
                        alg,
                    );
                }
            }
        }
    }
}

#[test]
fn uneven_groups_inside_a_larger_world() {
    // Members out of order and not contiguous, in a world of 8.
    for members in [vec![5, 1, 6], vec![7, 0, 3, 4, 2], vec![6, 2]] {
        for c in ALL {
            check(
                8,
                members.clone(),
                c,
                DType::Bf16,
                1_234,
                AllReduceAlgorithm::Auto,
            );
        }
    }
}

#[test]
fn send_and_recv_deliver_in_order() {
    let results = with_group(2, vec![0, 1], |comm| {
        let mut buf = comm.alloc(DType::I32, 40)?;
        for round in 0..50u8 {
            if comm.rank() == 0 {
                comm.upload(&mut buf, &[round; 40])?;
                comm.send(&buf, 1)?;
            } else {
                comm.recv(&mut buf, 0)?;
                if comm.download(&buf)? != vec![round; 40] {
                    return Err(CommError::new(format!("round {round} out of order")));
                }
            }
        }
        comm.barrier()
    });
    for r in results {
        r.unwrap();
    }
}

/// A communicator whose AllReduce adds the input in once more than it should: the check
/// must catch it, or the tests above prove nothing.
struct Broken(CpuComm);

impl Communicator for Broken {
    type Buffer = HostBuffer;
    fn rank(&self) -> usize {
        self.0.rank()
    }
    fn size(&self) -> usize {
        self.0.size()
    }
    fn name(&self) -> &str {
        self.0.name()
    }
    fn alloc(&mut self, d: DType, b: usize) -> CommResult<HostBuffer> {
        self.0.alloc(d, b)
    }
    fn upload(&mut self, b: &mut HostBuffer, h: &[u8]) -> CommResult<()> {
        self.0.upload(b, h)
    }
    fn download(&mut self, b: &HostBuffer) -> CommResult<Vec<u8>> {
        self.0.download(b)
    }
    fn all_reduce(&mut self, b: &mut HostBuffer) -> CommResult<()> {
        let input = b.data.clone();
        self.0.all_reduce(b)?;
        if self.0.rank() == 0 {
            dic_runtime::comm::add_into(b.dtype, &mut b.data[..2], &input[..2])?;
        }
        Ok(())
    }
    fn all_gather(&mut self, s: &HostBuffer, r: &mut HostBuffer) -> CommResult<()> {
        self.0.all_gather(s, r)
    }
    fn reduce_scatter(&mut self, s: &HostBuffer, r: &mut HostBuffer) -> CommResult<()> {
        self.0.reduce_scatter(s, r)
    }
    fn all_to_all(&mut self, s: &HostBuffer, r: &mut HostBuffer) -> CommResult<()> {
        self.0.all_to_all(s, r)
    }
    fn send(&mut self, b: &HostBuffer, p: usize) -> CommResult<()> {
        self.0.send(b, p)
    }
    fn recv(&mut self, b: &mut HostBuffer, p: usize) -> CommResult<()> {
        self.0.recv(b, p)
    }
    fn broadcast(&mut self, b: &mut HostBuffer, r: usize) -> CommResult<()> {
        self.0.broadcast(b, r)
    }
    fn barrier(&mut self) -> CommResult<()> {
        self.0.barrier()
    }
    fn synchronize(&mut self) -> CommResult<()> {
        Ok(())
    }
    fn set_context(&mut self, c: &str) {
        self.0.set_context(c)
    }
}

#[test]
fn the_exactness_check_catches_a_wrong_reduction() {
    let results = with_group(3, vec![0, 1, 2], |comm| {
        let mut b = Broken(CpuComm::new(
            comm.mesh(),
            "broken",
            comm.members().to_vec(),
        )?);
        let (s, r) = buffer_sizes(Collective::AllReduce, 64, 3, DType::Bf16);
        let mut send = b.alloc(DType::Bf16, s)?;
        let mut recv = b.alloc(DType::Bf16, r)?;
        verify_call(
            &mut b,
            Collective::AllReduce,
            DType::Bf16,
            &mut send,
            &mut recv,
        )
    });
    let failed_on_rank0 = results[0].as_ref().unwrap_err();
    assert!(
        failed_on_rank0.message.contains("wrong result"),
        "{failed_on_rank0}"
    );
    assert!(results[1].is_ok() && results[2].is_ok());
}
