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
//! requests carry it ([`pod_host_memory`]) and the node must hold it (E0508, checked
//! against the node's `cpu_memory` with the same cap the pod requests obey).

use super::memory::MemoryReport;
use super::perf::prefix_of;
use super::rules::{Anchor, Finding};
use super::scenario::Scenario;
use crate::diagnostics::Code;
use crate::units::fmt_bytes;

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

/// The host memory of the scenario's pods with its KV offload buffer: `None` without
/// `kv_offload` or where vLLM cannot launch the layout (E0801 says why). The buffer is
/// per engine, summed over its TP × PP ranks; each GPU's worker pins its share.
pub fn host_memory(s: &Scenario) -> Option<HostMemory> {
    if s.engine.kv_offload <= 0.0 {
        return None;
    }
    let shape = super::deployable::launch_shape(s, s.layout).ok()?;
    let g = shape.gpus_per_pod.max(1);
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

/// The findings on `kv_offload`: E0508 when the buffer and vLLM's own host memory do not
/// fit the node's `cpu_memory`, W0505 when the node states none; W0504 when the workload declares no prefix reuse, so no
/// later prompt can hit what the buffer keeps.
pub fn kv_offload_findings(s: &Scenario) -> Vec<Finding> {
    let mut out = Vec::new();
    if s.engine.kv_offload <= 0.0 {
        return out;
    }
    if let Some(h) = host_memory(s).filter(|h| !h.fits()) {
        let cap = h.cap_per_pod.unwrap_or(0);
        out.push(Finding::new(
            Code::HostMemoryShort,
            Anchor::Field("kv_offload"),
            format!(
                "the KV offload buffer does not fit the node's CPU memory: each {}-GPU pod needs {} ({} of offloaded KV + {} for vLLM, its workers and /dev/shm), {} such pods on a node need {}, but 90% of the node's cpu_memory is {} ({} a pod)",
                h.gpus_per_pod,
                fmt_bytes(h.per_pod as f64),
                fmt_bytes(h.buffer_per_pod as f64),
                fmt_bytes((h.per_pod - h.buffer_per_pod) as f64),
                h.pods_per_node,
                fmt_bytes((h.per_pod * h.pods_per_node) as f64),
                fmt_bytes(s.topology.cpu_memory.unwrap_or(0.0) * 0.9),
                fmt_bytes(cap as f64),
            ),
            "host memory short",
            Some(format!(
                "lower `kv_offload.size` to at most {} per engine, or use nodes with more CPU memory",
                fmt_bytes(largest_buffer(s, &h) as f64)
            )),
        ));
    }
    if s.topology.cpu_memory.is_none() {
        out.push(Finding::new(
            Code::HostMemoryUnchecked,
            Anchor::Field("kv_offload"),
            format!(
                "the node states no cpu_memory: dic cannot check that {} of KV offload buffer per engine fits beside vLLM's own host memory",
                fmt_bytes(s.engine.kv_offload)
            ),
            "host memory not checked",
            Some("state the node's host memory (`cpu_memory = 2 TiB` on the node) so dic checks the buffer and caps the pods' memory requests by it".into()),
        ));
    }
    if s.workload.is_some_and(|w| w.declared_reuse <= 0.0) {
        out.push(Finding::new(
            Code::OffloadWithoutReuse,
            Anchor::Field("kv_offload"),
            format!(
                "kv_offload keeps {} of evicted KV blocks in CPU memory per engine, but the workload declares no prefix reuse: no later prompt loads them back",
                fmt_bytes(s.engine.kv_offload)
            ),
            "offload buffer no prompt hits",
            Some("remove `kv_offload`, or state the reuse on the workload (`prefix_reuse`, `shared_prefix`) if prompts share prefixes (multi-turn chat, repeated documents)".into()),
        ));
    }
    out
}

/// The largest buffer per engine that fits the pod's cap: the cap less what the pod
/// needs without a buffer, over the pod's GPUs, times the engine's ranks.
fn largest_buffer(s: &Scenario, h: &HostMemory) -> u64 {
    let cap = h.cap_per_pod.unwrap_or(0);
    let without = h.per_pod - h.buffer_per_pod;
    let per_gpu = cap.saturating_sub(without) / h.gpus_per_pod.max(1);
    per_gpu * (s.layout.tp * s.layout.pp).max(1)
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

/// TTFT a closed loop's requests spend, on average, loading their cached prefix from the
/// CPU tier. Assumption (stated, not measured): each of the `in_flight` clients per replica
/// is one conversation whose private cached prefix (the cached prompt less the prefix
/// every request shares) is its reused working set; the `running` requests hold theirs in
/// their own blocks, and the waiting clients' prefixes must survive in the GPU cache's
/// free room (the KV cache less the shared prefix and the running requests' mean
/// context, as [`super::perf::running_cap`] counts them). What does not fit spills to the
/// CPU buffer ([`offloaded_tokens`]); that share of requests pays
/// [`hit_transfer_seconds`] for its private prefix instead of a GPU hit. The declared
/// reuse stays a hit either way (the perf model already prefills only the fresh
/// tokens); an open loop names no conversations, so it charges nothing here.
pub fn closed_loop_offload_load(
    s: &Scenario,
    mem: &MemoryReport,
    in_flight: f64,
    running: f64,
    prompt: f64,
    output: f64,
) -> f64 {
    if s.engine.kv_offload <= 0.0 {
        return 0.0;
    }
    let (cached, shared) = prefix_of(s, prompt);
    let private = cached - shared;
    let idle = (in_flight - running).max(0.0) * private;
    let held = shared + running * (prompt + output / 2.0 - shared);
    let free = mem.kv_cache_tokens as f64 - held;
    // Each stage's GPUs load their own layers' shard at once: the widest shard sets the time.
    let per_gpu = mem
        .stages
        .iter()
        .map(|st| st.kv_bytes_per_token)
        .fold(0.0, f64::max);
    let per_engine: f64 = mem
        .stages
        .iter()
        .map(|st| st.kv_bytes_per_token)
        .sum::<f64>()
        * s.layout.tp as f64;
    let share = offloaded_share(
        idle,
        free,
        offloaded_tokens(s.engine.kv_offload, per_engine),
    );
    let pcie = &s.topology.gpu.pcie;
    share * hit_transfer_seconds(private, per_gpu, pcie.bandwidth, pcie.latency)
}
