//! Memory per GPU, as vLLM 0.33 accounts it (../shared/reference/vllm-0.33.md §4):
//!
//! ```text
//! budget    = ceil(total × gpu_memory_utilization)
//! kv_cache  = budget − weights − activation peak − non-torch − CUDA graphs
//! kv_tokens = min over PP stages of floor(kv_cache / bytes_per_block) × block_size
//! ```
//!
//! Weights are sharded per component the way vLLM's layers shard them ([`super::weights`]):
//! attention and MLPs by TP (KV heads replicated when TP exceeds them; MLA's
//! down-projections replicated), experts over TP×DP (or distributed whole with EP, uneven
//! split allowed), the embedding on the first PP stage and the LM head on the last (both
//! vocab-parallel over TP), layers split over stages as `get_pp_indices` does. The KV bytes are exact;
//! the activation peak is derived tensor by tensor from the profile run
//! ([`super::activation`]); the non-torch and CUDA-graph terms are estimates from named
//! constants (below); all three can be overridden per deployment.

use super::kv_pool::{self, KvPool};
use super::scenario::{Scenario, GIB};
use crate::program::{Mixer, Model};
use serde::Serialize;

/// Estimated memory constants. Sources: vLLM 0.33 profiling
/// (`gpu_worker.determine_available_memory`, reference §4.1) for what is measured;
/// the values are estimates within the ranges the reference gives, overridable with
/// `non_torch_memory` and `cuda_graph_memory` in `vllm { … }`. The activation peak is
/// derived, not estimated ([`super::activation`]; `activation_memory` overrides it).
pub mod constants {
    /// cuBLAS/cuBLASLt workspaces and attention-backend buffers allocated after vLLM's
    /// memory snapshot, one GPU. Reference: "~0.2–1 GiB". [estimate]
    pub const NON_TORCH_SINGLE_GIB: f64 = 0.25;
    /// Extra for NCCL communicators and custom all-reduce buffers when the GPU talks to
    /// others. [estimate]
    pub const NON_TORCH_DISTRIBUTED_EXTRA_GIB: f64 = 0.5;
    /// CUDA-graph memory per captured batch size and per layer on the stage. With
    /// vLLM's 51 default capture sizes an 80-layer stage holds ~0.25 GiB; the reference
    /// says "typically a few hundred MiB–~1–2 GiB". [estimate]
    pub const CUDA_GRAPH_BYTES_PER_CAPTURE_PER_LAYER: f64 = 64.0 * 1024.0;
}

// The element sizes and the weights per rank live below the memory model (the KV pool and
// the speculative draft use them too); their paths here stay.
pub use super::activation::{activation_peak, expert_width_on_rank, fused_moe_workspace};
pub use super::kv_pool::kv_bytes;
pub use super::weights::{rank_weights, weight_bytes, weight_bytes_grouped, RankWeights};

/// The layer counts of each PP stage (vLLM `get_pp_indices`): `L / pp` each, the
/// remainder one each to the stages before the last, from the second-to-last backwards.
pub fn pp_partition(layers: u64, pp: u64) -> Vec<u64> {
    let pp = pp.max(1);
    let mut parts = vec![layers / pp; pp as usize];
    let rem = (layers % pp) as usize;
    for i in 2..rem + 2 {
        let idx = parts.len() - i;
        parts[idx] += 1;
    }
    parts
}

/// KV-cache bytes per token of one full-attention layer on one rank.
pub fn kv_bytes_per_token_layer(m: &Model, tp: u64) -> f64 {
    match kv_pool::cache_spec(m, Mixer::Full, tp) {
        Some(kv_pool::CacheSpec::Full { per_token }) => per_token,
        _ => 0.0,
    }
}

/// One PP stage's memory on each of its GPUs.
#[derive(Debug, Clone, Serialize)]
pub struct StageMemory {
    pub stage: u64,
    pub layers: u64,
    pub budget: f64,
    pub weights: f64,
    pub activations: f64,
    pub non_torch: f64,
    pub cuda_graphs: f64,
    /// May be negative: the stage does not fit.
    pub kv_cache: f64,
    /// KV bytes per token on this stage's GPUs (the layers whose cache grows with context).
    pub kv_bytes_per_token: f64,
    pub num_blocks: u64,
    /// How the stage's KV cache is laid out (groups, block size, per-request needs).
    #[serde(skip)]
    pub pool: KvPool,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemoryReport {
    pub stages: Vec<StageMemory>,
    pub block_size: u64,
    /// Whole blocks × block size, the tightest stage deciding (per DP engine).
    pub kv_cache_tokens: u64,
    /// Requests of max_model_len the KV cache holds at once (vLLM's "Maximum concurrency").
    pub max_concurrency: f64,
    /// KV bytes one request of max_model_len needs on the tightest stage.
    pub bytes_per_max_request: f64,
}

impl MemoryReport {
    /// The stage with the least KV room (decides capacity).
    pub fn tightest(&self) -> &StageMemory {
        self.stages
            .iter()
            .min_by(|a, b| a.kv_cache.total_cmp(&b.kv_cache))
            .expect("at least one stage")
    }

    /// Requests with `len` tokens of context each that fit at once while decoding (the
    /// tightest stage deciding): a sliding window holds its window, a recurrent layer one
    /// state, full attention every token.
    pub fn requests_at(&self, len: f64) -> f64 {
        self.stages
            .iter()
            .map(|st| st.pool.requests(len.max(1.0), false))
            .fold(f64::INFINITY, f64::min)
            .max(0.0)
    }
}

/// Blocks each recurrent group holds per request on this scenario
/// ([`kv_pool::state_blocks_per_request`]). Prefix caching is on unless turned off (vLLM
/// 0.33's default), which puts a hybrid model's states in "align" mode. Mamba-2 layers
/// always export a prefill checkpoint (`MambaMixer2.get_kv_cache_spec`); Gated DeltaNet
/// layers only under FlashInfer's GDN prefill (`_resolve_gdn_prefill_backend`: Hopper, or
/// Blackwell with 128-wide keys; [assumed: the CUDA 13 image 0.33 ships]).
pub fn state_blocks(s: &Scenario) -> f64 {
    let m = &s.model;
    let align = s.engine.enable_prefix_caching != Some(false);
    let k = s.engine.speculative.as_ref().map_or(0, |sp| sp.tokens);
    let mamba = (0..m.layers).any(|x| m.layer(x).mixer == Mixer::Mamba);
    let gdn_checkpoint = match s.topology.gpu.compute_capability() {
        Some(cc) if (9.0..10.0).contains(&cc) => true,
        Some(cc) if cc >= 10.0 => m.detail.linear.is_some_and(|la| la.key_dim == 128),
        _ => false,
    };
    kv_pool::state_blocks_per_request(align, k, mamba || gdn_checkpoint)
}

pub fn memory(s: &Scenario) -> MemoryReport {
    let m = &s.model;
    let e = &s.engine;
    let l = &s.layout;
    let gpu = &s.topology.gpu;
    let budget = (gpu.memory * e.gpu_memory_utilization).ceil();
    let parts = pp_partition(m.layers, l.pp);
    let distributed = l.tp * l.pp * l.pcp > 1 || (l.ep && l.dp > 1) || (m.is_moe() && l.dp > 1);
    let len = e.max_model_len as f64;
    let mut spec_cache = kv_pool::SpecCache::new(m, l.tp);
    // A speculative draft lives with the last stage: its weights, and its KV layers in
    // the same pool (vLLM allocates them with the target's).
    let draft = super::speculative::draft_shape(s);
    let mut stages = Vec::new();
    let mut first = 0;
    for (i, &count) in parts.iter().enumerate() {
        let is_first = i == 0;
        let is_last = i + 1 == parts.len();
        let w = rank_weights(m, l, first..first + count, is_first, is_last);
        let draft_bytes = draft
            .as_ref()
            .filter(|_| is_last)
            .map_or(0.0, |d| d.weight_bytes);
        let (lora_weights, lora_activations) = super::lora::stage_bytes(
            m,
            l.tp,
            e.lora,
            e.max_num_batched_tokens,
            first..first + count,
            (is_first, is_last),
            super::lora::RankExperts::on_rank(
                m,
                (first..first + count)
                    .filter(|&l| crate::architecture::is_moe_layer(m, l))
                    .count() as u64,
                w.expert_params,
                expert_width_on_rank(s),
            ),
        );
        let weights = (w.bytes + draft_bytes + lora_weights - e.cpu_offload).max(0.0);
        let activations = e
            .overrides
            .activation
            .unwrap_or_else(|| activation_peak(s, is_last) + lora_activations);
        // DeepEP's buffers are allocated outside PyTorch's pool, as non-torch memory; they
        // are exact, so an override of the estimated part leaves them counted.
        let non_torch = e.overrides.non_torch.unwrap_or(
            (constants::NON_TORCH_SINGLE_GIB
                + if distributed {
                    constants::NON_TORCH_DISTRIBUTED_EXTRA_GIB
                } else {
                    0.0
                })
                * GIB,
        ) + super::deepep::deepep_buffer_bytes(s);
        let cuda_graphs = if !e.graphs() {
            0.0
        } else {
            e.overrides.cuda_graphs.unwrap_or(
                e.cuda_graph_captures(gpu.architecture.as_deref()) as f64
                    * count as f64
                    * constants::CUDA_GRAPH_BYTES_PER_CAPTURE_PER_LAYER,
            )
        };
        let kv_cache = match e.kv_cache_memory {
            Some(fixed) => fixed,
            None => budget - weights - activations - non_torch - cuda_graphs,
        };
        let mut specs: Vec<kv_pool::CacheSpec> = (first..first + count)
            .filter_map(|x| spec_cache.get(m.layer(x).mixer))
            .collect();
        if let Some(d) = draft.as_ref().filter(|_| is_last) {
            specs.extend(d.kv_specs.iter().cloned());
        }
        let pool = KvPool::new(
            &specs,
            kv_cache,
            e.block_size,
            e.max_num_batched_tokens,
            l.dcp,
            state_blocks(s),
        );
        stages.push(StageMemory {
            stage: i as u64,
            layers: count,
            budget,
            weights,
            activations,
            non_torch,
            cuda_graphs,
            kv_cache,
            kv_bytes_per_token: pool.growing_bytes_per_token,
            num_blocks: pool.num_blocks,
            pool,
        });
        first += count;
    }
    // Requests of max_model_len the tightest stage holds (vLLM's "Maximum concurrency").
    let (tightest, max_concurrency) = stages
        .iter()
        .map(|st| (st, st.pool.requests(len, true)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(st, c)| (st.stage as usize, c.max(0.0)))
        .unwrap_or((0, 0.0));
    let pool = &stages[tightest].pool;
    let kv_cache_tokens = if pool.hybrid {
        // vLLM logs `max_concurrency × max_model_len` for a hybrid model.
        if max_concurrency.is_finite() {
            (max_concurrency * len).floor() as u64
        } else {
            u64::MAX
        }
    } else {
        let blocks = stages.iter().map(|st| st.num_blocks).min().unwrap_or(0);
        blocks * pool.block_size * l.dcp.max(1)
    };
    MemoryReport {
        block_size: pool.block_size,
        bytes_per_max_request: pool.bytes_per_request(len),
        stages,
        kv_cache_tokens,
        max_concurrency: if max_concurrency.is_finite() {
            max_concurrency
        } else {
            f64::MAX
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pp_partition_matches_vllm() {
        assert_eq!(pp_partition(80, 3), vec![27, 27, 26]);
        assert_eq!(pp_partition(61, 4), vec![15, 15, 16, 15]);
        assert_eq!(pp_partition(126, 2), vec![63, 63]);
        assert_eq!(pp_partition(32, 1), vec![32]);
        assert_eq!(pp_partition(10, 4), vec![2, 3, 3, 2]);
    }
}
