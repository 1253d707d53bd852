//! CPU-backend AllReduce bus bandwidth on loopback: 1 MiB, 16 MiB and 256 MiB of bf16 at
//! 2, 4 and 8 ranks. Each rank is a thread with its own TCP mesh (the code a rank process
//! runs); criterion's throughput is set to nccl-tests' bus bytes, S × 2(p−1)/p, so the
//! reported rate is busbw. A baseline for the runtime, not a race.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dic_runtime::comm::Communicator;
use dic_runtime::cpu::{CpuComm, Mesh};
use dic_runtime::plan::DType;
use std::net::TcpListener;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `p` rank threads, each running `n` AllReduces of `bytes` when told, reporting the time.
struct Ranks {
    go: Vec<mpsc::Sender<u64>>,
    done: mpsc::Receiver<Duration>,
}

fn start(p: usize, bytes: usize) -> Ranks {
    let listeners: Vec<TcpListener> = (0..p)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let addrs: Vec<_> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    let (done_tx, done) = mpsc::channel();
    let mut go = Vec::new();
    for (rank, listener) in listeners.into_iter().enumerate() {
        let (tx, rx) = mpsc::channel::<u64>();
        go.push(tx);
        let addrs = addrs.clone();
        let done_tx = done_tx.clone();
        std::thread::spawn(move || {
            let peers: Vec<usize> = (0..p).filter(|&r| r != rank).collect();
            let key = dic_runtime::auth::JobKey::from_secret("allreduce bench secret").unwrap();
            let mesh = Mesh::connect(
                rank,
                &addrs,
                listener,
                &peers,
                0,
                &key,
                Duration::from_secs(60),
            )
            .unwrap();
            let mut comm = CpuComm::new(Rc::new(mesh), "bench", (0..p).collect()).unwrap();
            let mut buf = comm.alloc(DType::Bf16, bytes).unwrap();
            comm.upload(
                &mut buf,
                &dic_runtime::comm::reduce_input(DType::Bf16, rank, bytes),
            )
            .unwrap();
            for n in rx {
                comm.barrier().unwrap();
                let t = Instant::now();
                for _ in 0..n {
                    comm.all_reduce(&mut buf).unwrap();
                }
                comm.barrier().unwrap();
                done_tx.send(t.elapsed()).unwrap();
            }
        });
    }
    Ranks { go, done }
}

fn allreduce_busbw(c: &mut Criterion) {
    let mut group = c.benchmark_group("cpu_allreduce_busbw");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    for p in [2usize, 4, 8] {
        for mib in [1usize, 16, 256] {
            let bytes = mib << 20;
            let bus = (bytes as f64 * 2.0 * (p - 1) as f64 / p as f64) as u64;
            group.throughput(Throughput::Bytes(bus));
            let ranks = start(p, bytes);
            group.bench_with_input(
                BenchmarkId::new(format!("{p}_ranks"), format!("{mib}MiB")),
                &bytes,
                |b, _| {
                    b.iter_custom(|iters| {
                        for g in &ranks.go {
                            g.send(iters).unwrap();
                        }
                        (0..p).map(|_| ranks.done.recv().unwrap()).max().unwrap()
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, allreduce_busbw);
criterion_main!(benches);
