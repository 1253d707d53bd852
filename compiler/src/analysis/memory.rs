//! Memory per GPU, as vLLM 0.33 accounts it (../shared/reference/vllm-0.33.md §4):
//!
//! ```text
//! budget    = ceil(total × gpu_memory_utilization)
//! kv_cache  = budget − weights − activation peak − non-torch − CUDA graphs
//! kv_tokens = min over PP stages of floor(kv_cache / bytes_per_block) × block_size
//! ```
//!
//! Weights are sharded per component the way vLLM's layers shard them: attention and
//! MLPs by TP (KV heads replicated when TP exceeds them; MLA's down-projections
//! replicated), experts over TP×DP (or distributed whole with EP, uneven split allowed),
//! the embedding on the first PP stage and the LM head on the last (both vocab-parallel
//! over TP), layers split over stages as `get_pp_indices` does. The KV bytes are exact;
//! the activation, non-torch and CUDA-graph terms are estimates from named constants
//! (below) and can be overridden per deployment.

use super::scenario::{Scenario, GIB};
use crate::architecture::is_moe_layer;
use crate::program::{Attention, Model};
use serde::Serialize;

/// Estimated memory constants. Sources: vLLM 0.33 profiling
/// (`gpu_worker.determine_available_memory`, reference §4.1) for what is measured;
/// the values are estimates within the ranges the reference gives, overridable with
/// `activation_memory`, `non_torch_memory` and `cuda_graph_memory` in `vllm { … }`.
pub mod constants {
    /// Hidden-sized activations alive at once in the profile run's peak (residual,
    /// normed input, attention output, MLP output). [estimate]
    pub const ACTIVATION_HIDDEN_COPIES: f64 = 4.0;
    /// The sampler's fp32 logits and its fp32 warm-up pass on the last stage. [estimate]
    pub const LOGITS_FP32_COPIES: f64 = 2.0;
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

/// Bytes per parameter of a weight format, including quantization scales.
pub fn weight_bytes(dtype: &str) -> f64 {
    match dtype {
        "fp32" => 4.0,
        "fp8" | "int8" => 1.0,
        // 4-bit with one fp16 scale and zero per 128 weights (AWQ/GPTQ group 128)
        "int4" | "awq" | "gptq" => 0.5 + 4.0 / 128.0,
        // NVFP4: one fp8 scale per 16 weights
        "nvfp4" => 0.5 + 1.0 / 16.0,
        // MXFP4: one 8-bit scale per 32 weights
        "mxfp4" => 0.5 + 1.0 / 32.0,
        _ => 2.0,
    }
}

/// Bytes per KV element: `auto` follows the model's dtype; FP8 variants are one byte.
pub fn kv_bytes(kv_cache: &str, dtype: &str) -> f64 {
    match kv_cache {
        "fp8" | "fp8_e4m3" | "fp8_e5m2" => 1.0,
        "fp16" | "bf16" => 2.0,
        _ => {
            if dtype == "fp32" {
                4.0
            } else {
                2.0
            }
        }
    }
}

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

/// True when layer `l` uses a sliding window (windowed layers spread evenly, which is
/// exact for gpt-oss's alternation).
pub fn is_sliding_layer(m: &Model, l: u64) -> bool {
    if m.sliding_layers == 0 || m.layers == 0 {
        return false;
    }
    ((l + 1) * m.sliding_layers) / m.layers > (l * m.sliding_layers) / m.layers
}

/// KV-cache bytes per token for one attention layer on one rank.
pub fn kv_bytes_per_token_layer(m: &Model, tp: u64, kv_elem: f64) -> f64 {
    match m.attention {
        // MLA stores the latent (kv_lora_rank + rope dims) once per token, unsplit by TP.
        Attention::Mla => (m.kv_lora_rank + m.qk_rope_head_dim) as f64 * kv_elem,
        _ => {
            let kv_per_rank = (m.kv_heads / tp.max(1)).max(1);
            2.0 * kv_per_rank as f64 * m.head_dim as f64 * kv_elem
        }
    }
}

/// Parameters (by precision class) held by one rank of one stage.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RankParams {
    /// Linear layers in the serving precision.
    pub quantized: f64,
    /// Embeddings, LM head, routers, and layers a format leaves unquantized.
    pub unquantized: f64,
    /// Routed-expert parameters on this rank (included in the above).
    pub experts: f64,
}

pub fn rank_params(
    m: &Model,
    l: &crate::program::Layout,
    layers: std::ops::Range<u64>,
    is_first: bool,
    is_last: bool,
) -> RankParams {
    let (tp, dp, ep) = (l.tp, l.dp, l.ep);
    let tp_f = tp.max(1) as f64;
    let h = m.hidden as f64;
    let mut p = RankParams::default();
    // mxfp4 checkpoints (gpt-oss) quantize only the experts.
    let experts_only = m.weights == "mxfp4";
    let attention = match m.attention {
        Attention::Mla => {
            let heads = m.heads as f64;
            let qk = (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64;
            let replicated = if m.q_lora_rank > 0 {
                h * m.q_lora_rank as f64
            } else {
                0.0
            } + h * (m.kv_lora_rank + m.qk_rope_head_dim) as f64;
            let q = if m.q_lora_rank > 0 {
                m.q_lora_rank as f64 * heads * qk
            } else {
                h * heads * qk
            };
            let kv_b = m.kv_lora_rank as f64 * heads * (m.qk_nope_head_dim + m.v_head_dim) as f64;
            let o = heads * m.v_head_dim as f64 * h;
            replicated + (q + kv_b + o) / tp_f
        }
        _ => {
            let q_o = 2.0 * h * (m.heads * m.head_dim) as f64 / tp_f;
            let kv = 2.0 * h * m.head_dim as f64 * (m.kv_heads / tp.max(1)).max(1) as f64;
            q_o + kv
        }
    };
    let expert = 3.0 * h * m.moe_intermediate as f64;
    for layer in layers {
        if experts_only {
            p.unquantized += attention;
        } else {
            p.quantized += attention;
        }
        if is_moe_layer(m, layer) {
            let routed = if ep {
                let ep_size = (tp * dp).max(1);
                m.experts.div_ceil(ep_size) as f64 * expert
            } else {
                m.experts as f64 * expert / (tp * dp).max(1) as f64
            };
            p.quantized += routed + m.shared_experts as f64 * expert / tp_f;
            p.experts += routed;
            p.unquantized += h * m.experts as f64; // router, replicated
        } else {
            let dense = 3.0 * h * m.intermediate as f64 / tp_f;
            if experts_only {
                p.unquantized += dense;
            } else {
                p.quantized += dense;
            }
        }
    }
    let vocab_shard = m.vocab as f64 * h / tp_f;
    if is_first {
        p.unquantized += vocab_shard;
    }
    if is_last && !(m.tied_embeddings && is_first) {
        p.unquantized += vocab_shard;
    }
    p
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
    /// KV bytes per token on this stage's GPUs (full-attention layers).
    pub kv_bytes_per_token: f64,
    pub num_blocks: u64,
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
}

/// Number of CUDA-graph capture sizes vLLM uses by default (`VllmConfig._set_cudagraph_sizes`):
/// `[1, 2, 4] + 8..=248 step 8 + 256..=max step 16`, `max = min(2 × max_num_seqs, 512, mnbt)`.
pub fn cuda_graph_captures(max_num_seqs: u64, mnbt: u64) -> u64 {
    let max = (2 * max_num_seqs).min(512).min(mnbt);
    let small = [1u64, 2, 4].iter().filter(|s| **s <= max).count() as u64;
    let mid = (8..=248).step_by(8).filter(|s| *s <= max).count() as u64;
    let big = (256..=max.max(256))
        .step_by(16)
        .filter(|s| *s <= max)
        .count() as u64;
    small + mid + big
}

pub fn memory(s: &Scenario) -> MemoryReport {
    let m = &s.model;
    let e = &s.engine;
    let l = &s.layout;
    let gpu = &s.topology.gpu;
    let budget = (gpu.memory * e.gpu_memory_utilization).ceil();
    let parts = pp_partition(m.layers, l.pp);
    let kv_elem = kv_bytes(&m.kv_cache, &m.dtype);
    let per_layer = kv_bytes_per_token_layer(m, l.tp, kv_elem);
    let distributed = l.tp * l.pp * l.pcp > 1 || (l.ep && l.dp > 1) || (m.is_moe() && l.dp > 1);
    let bs = e.block_size.max(1);
    let mut stages = Vec::new();
    let mut first = 0;
    let mut per_request_max: f64 = 0.0;
    let mut blocks_min = u64::MAX;
    let mut concurrency_min = f64::INFINITY;
    for (i, &count) in parts.iter().enumerate() {
        let is_first = i == 0;
        let is_last = i + 1 == parts.len();
        let p = rank_params(m, l, first..first + count, is_first, is_last);
        let weights = (p.quantized * weight_bytes(&m.weights)
            + p.unquantized * weight_bytes(&m.dtype)
            - e.cpu_offload)
            .max(0.0);
        let activations = e
            .overrides
            .activation
            .unwrap_or_else(|| activation_peak(s, is_last));
        let non_torch = e.overrides.non_torch.unwrap_or(
            (constants::NON_TORCH_SINGLE_GIB
                + if distributed {
                    constants::NON_TORCH_DISTRIBUTED_EXTRA_GIB
                } else {
                    0.0
                })
                * GIB,
        );
        let cuda_graphs = if e.enforce_eager {
            0.0
        } else {
            e.overrides.cuda_graphs.unwrap_or(
                cuda_graph_captures(e.max_num_seqs, e.max_num_batched_tokens) as f64
                    * count as f64
                    * constants::CUDA_GRAPH_BYTES_PER_CAPTURE_PER_LAYER,
            )
        };
        let kv_cache = match e.kv_cache_memory {
            Some(fixed) => fixed,
            None => budget - weights - activations - non_torch - cuda_graphs,
        };
        let sliding = (first..first + count)
            .filter(|x| is_sliding_layer(m, *x))
            .count() as u64;
        let full = count - sliding;
        // DCP shards each request's KV over dcp ranks: a rank holds 1/dcp of the tokens.
        let dcp = l.dcp.max(1) as f64;
        let full_bpt = full as f64 * per_layer / dcp;
        let sliding_bpt = sliding as f64 * per_layer / dcp;
        let block_bytes = if full_bpt > 0.0 {
            full_bpt
        } else {
            sliding_bpt
        } * bs as f64;
        let num_blocks = if kv_cache > 0.0 && block_bytes > 0.0 {
            (kv_cache / block_bytes).floor() as u64
        } else {
            0
        };
        let len = e.max_model_len as f64;
        let rounded = (len / bs as f64).ceil() * bs as f64;
        let window = m.sliding_window.unwrap_or(0.0);
        let sliding_len = ((len.min(window + bs as f64)) / bs as f64).ceil() * bs as f64;
        let per_request = full_bpt * rounded + sliding_bpt * sliding_len;
        per_request_max = per_request_max.max(per_request);
        blocks_min = blocks_min.min(num_blocks);
        let conc = if per_request > 0.0 {
            kv_cache.max(0.0) / per_request
        } else {
            f64::INFINITY
        };
        concurrency_min = concurrency_min.min(conc);
        stages.push(StageMemory {
            stage: i as u64,
            layers: count,
            budget,
            weights,
            activations,
            non_torch,
            cuda_graphs,
            kv_cache,
            kv_bytes_per_token: full_bpt + sliding_bpt,
            num_blocks,
        });
        first += count;
    }
    let blocks = if blocks_min == u64::MAX {
        0
    } else {
        blocks_min
    };
    // Whole requests' worth of blocks, as vLLM reports them.
    let max_concurrency = if concurrency_min.is_finite() {
        let per_req_blocks = (e.max_model_len as f64 / bs as f64).ceil();
        let by_blocks = blocks as f64 / per_req_blocks.max(1.0);
        by_blocks.min(concurrency_min.max(0.0)).max(0.0)
    } else {
        0.0
    };
    MemoryReport {
        stages,
        block_size: bs,
        kv_cache_tokens: blocks * bs * l.dcp.max(1),
        max_concurrency,
        bytes_per_max_request: per_request_max,
    }
}

/// Peak activations of vLLM's profile run: `max_num_batched_tokens` tokens through one
/// layer at a time, plus the sampler's logits on the last stage.
pub fn activation_peak(s: &Scenario, is_last: bool) -> f64 {
    let m = &s.model;
    let l = &s.layout;
    let e = &s.engine;
    let tp = l.tp.max(1) as f64;
    let t = e.max_num_batched_tokens as f64;
    let act_bytes = 2.0;
    let qkv_local = ((m.heads + 2 * m.kv_heads) * m.head_dim) as f64 / tp;
    let dense_local = 2.0 * m.intermediate as f64 / tp;
    let moe_local = if m.is_moe() {
        let inter = if l.ep {
            m.moe_intermediate as f64
        } else {
            m.moe_intermediate as f64 / tp
        };
        m.experts_per_token as f64 * 2.0 * inter
    } else {
        0.0
    };
    let per_token = constants::ACTIVATION_HIDDEN_COPIES * m.hidden as f64
        + qkv_local
        + dense_local.max(moe_local);
    let mut bytes = t * per_token * act_bytes;
    if is_last {
        let reqs = (e.max_num_batched_tokens.min(e.max_num_seqs)) as f64;
        bytes += reqs * m.vocab as f64 * 4.0 * constants::LOGITS_FP32_COPIES;
    }
    bytes
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

    #[test]
    fn capture_sizes() {
        // max_num_seqs 256 → max 512: 3 + 31 + 17
        assert_eq!(cuda_graph_captures(256, 8192), 51);
        assert_eq!(cuda_graph_captures(8, 8192), 3 + 2);
    }
}
