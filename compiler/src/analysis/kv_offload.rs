//! KV offloading to CPU memory (`kv_offload = { … }`, vLLM 0.33's
//! `--kv-offloading-size`): the prefix-cache capacity it adds and what a hit costs.
//!
//! vLLM's offloading connector copies KV blocks the GPU evicts into a CPU buffer of
//! `kv_offloading_size` GiB per engine, summed over its TP ranks (`config/cache.py`); a
//! later prompt whose prefix is there loads the blocks back instead of prefilling them.
//! Each TP rank moves its own shard over its own PCIe link, so a hit of `n` tokens takes
//! `n × (KV bytes per token per GPU) / (PCIe bandwidth per direction)` on every rank at
//! once. It pays when that is shorter than prefilling the same tokens (long shared
//! prefixes, multi-turn chat), and when the GPU's own cache is too small to keep them.
//!
//! The buffer is host memory: each GPU's worker pins its share, so the pods' memory
//! requests carry it ([`pod_host_memory`]) and the node must hold it (E0508, checked by
//! `deployable::kv_offload_findings` against the node's `cpu_memory` with the same cap
//! the pod requests obey). The TTFT of a hit from this tier is
//! `perf::closed_loop_offload_load`'s.

use super::memory::MemoryReport;
use super::scenario::Scenario;

/// Tokens of KV cache the CPU buffer holds: `size` over the engine's KV bytes per token
/// (every layer on every GPU of the engine).
pub fn offloaded_tokens(size_bytes: f64, engine_kv_bytes_per_token: f64) -> f64 {
    if engine_kv_bytes_per_token <= 0.0 {
        return 0.0;
    }
    (size_bytes / engine_kv_bytes_per_token).floor()
}

/// Seconds to bring `tokens` of a hit back to the GPUs: each rank's shard over its own
/// PCIe link (`gpu_kv_bytes_per_token`: one GPU's share), plus the link's latency.
pub fn hit_transfer_seconds(
    tokens: f64,
    gpu_kv_bytes_per_token: f64,
    pcie_bytes_per_second: f64,
    pcie_latency: f64,
) -> f64 {
    if tokens <= 0.0 {
        return 0.0;
    }
    pcie_latency + tokens * gpu_kv_bytes_per_token / pcie_bytes_per_second
}

/// Whether loading a hit beats prefilling it again: the transfer against the prefill
/// time of the same tokens (`prefill_seconds_per_token` at the engine's prefill rate).
pub fn hit_pays(transfer_seconds: f64, tokens: f64, prefill_seconds_per_token: f64) -> bool {
    transfer_seconds < tokens * prefill_seconds_per_token
}

const GIB: u64 = 1 << 30;

/// `/dev/shm` of a pod of `gpus` GPUs: 1 GiB per GPU, 2 to 32 GiB (NCCL's and the
/// workers' shared-memory rings; reference/kubernetes.md §2.2).
pub fn pod_shm_bytes(gpus: u64) -> u64 {
    (gpus * GIB).clamp(2 * GIB, 32 * GIB)
}

/// Host memory a vLLM pod of `gpus` GPUs needs: 16 GiB for the API server and Python,
/// 8 GiB per GPU worker (CUDA context, pinned staging buffers, loader), the memory-backed
/// `/dev/shm` (its pages count against the pod's memory), and `host_bytes_per_gpu` each
/// GPU keeps in CPU memory (offloaded weights, its share of the KV offload buffer).
/// [rule; reference/kubernetes.md §2.1–2.2]
pub fn pod_host_memory(gpus: u64, shm_bytes: u64, host_bytes_per_gpu: u64) -> u64 {
    16 * GIB + 8 * GIB * gpus + shm_bytes + host_bytes_per_gpu * gpus
}

/// The most a pod of `gpus_per_pod` GPUs may request of a node of `gpus_per_node` GPUs
/// and `node_memory` bytes: 90% of its GPUs' share (the rest for the kubelet, the OS and
/// the other pods' overhead). Engines that share a node each get their GPUs' share, so a
/// node full of such pods asks at most 90% of its memory.
pub fn pod_memory_cap(node_memory: f64, gpus_per_pod: u64, gpus_per_node: u64) -> u64 {
    let share = (node_memory * gpus_per_pod as f64 / gpus_per_node.max(1) as f64) as u64;
    share / 10 * 9
}

/// The host memory a deployment's pods need on a node, against what the node has.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostMemory {
    /// GPUs per pod, and pods of that size a node holds.
    pub gpus_per_pod: u64,
    pub pods_per_node: u64,
    /// One pod's KV offload buffer (its GPUs' shares of the engine's `size`).
    pub buffer_per_pod: u64,
    /// What one pod needs ([`pod_host_memory`]), buffer included.
    pub per_pod: u64,
    /// The most one pod may request ([`pod_memory_cap`]); `None`: the node states no
    /// `cpu_memory`.
    pub cap_per_pod: Option<u64>,
}

impl HostMemory {
    /// Whether the pods fit the node (always, when it states no `cpu_memory`).
    pub fn fits(&self) -> bool {
        self.cap_per_pod.is_none_or(|cap| self.per_pod <= cap)
    }
}

/// Tokens the scenario's offload buffer holds per engine ([`offloaded_tokens`] over the
/// engine's KV bytes per token: every stage's layers on each of its TP ranks); `None`
/// without `kv_offload`.
pub fn buffer_tokens(s: &Scenario, mem: &MemoryReport) -> Option<f64> {
    let per_engine: f64 = mem
        .stages
        .iter()
        .map(|st| st.kv_bytes_per_token)
        .sum::<f64>()
        * s.layout.tp as f64;
    (s.engine.kv_offload > 0.0).then(|| offloaded_tokens(s.engine.kv_offload, per_engine))
}

/// The share of the idle prefixes (`idle_tokens`, cached prompt tokens of requests not
/// running) that live in the offload tier: what exceeds the GPU cache's free room
/// (`gpu_free_tokens`), up to the buffer's capacity (`offload_tokens`). The rest is in the
/// GPU's own prefix cache (a hit with no transfer) or beyond both tiers.
pub fn offloaded_share(idle_tokens: f64, gpu_free_tokens: f64, offload_tokens: f64) -> f64 {
    if idle_tokens <= 0.0 {
        return 0.0;
    }
    let spill = (idle_tokens - gpu_free_tokens.max(0.0)).max(0.0);
    spill.min(offload_tokens.max(0.0)) / idle_tokens
}

/// The host memory of the scenario's pods of `gpus_per_pod` GPUs (the launch shape's)
/// with its KV offload buffer: `None` without `kv_offload`. The buffer is per engine,
/// summed over its TP × PP ranks; each GPU's worker pins its share.
pub fn host_memory(s: &Scenario, gpus_per_pod: u64) -> Option<HostMemory> {
    if s.engine.kv_offload <= 0.0 {
        return None;
    }
    let g = gpus_per_pod.max(1);
    let ranks = (s.layout.tp * s.layout.pp).max(1) as f64;
    let buffer_per_gpu = (s.engine.kv_offload / ranks) as u64;
    let host_per_gpu = s.engine.cpu_offload as u64 + buffer_per_gpu;
    Some(HostMemory {
        gpus_per_pod: g,
        pods_per_node: (s.topology.gpus_per_node / g).max(1),
        buffer_per_pod: buffer_per_gpu * g,
        per_pod: pod_host_memory(g, pod_shm_bytes(g), host_per_gpu),
        cap_per_pod: s
            .topology
            .cpu_memory
            .map(|m| pod_memory_cap(m, g, s.topology.gpus_per_node)),
    })
}
