//! The activation peak of vLLM 0.33's profile run on one GPU, term by term, derived from
//! what `gpu_model_runner.profile_run` allocates (`vllm/v1/worker/gpu_model_runner.py`):
//!
//! ```text
//! peak = MoE workspace + max(attention, dense MLP, MoE layer, sampler)
//! ```
//!
//! `gpu_worker.determine_available_memory` charges the KV cache with what stays allocated
//! after the run (weights, the fused-MoE workspace that vLLM's workspace manager keeps)
//! plus the transient peak of *allocated* memory (`mem_utils.memory_profiling`:
//! `torch_peak − torch_allocated`, not reserved memory, so the caching allocator adds
//! nothing). The transient phases do not overlap: `_dummy_run` sends
//! `max_num_batched_tokens` tokens through one layer at a time, frees them, and only its
//! output survives into `_dummy_sampler_run`, so the peak is the largest phase, not a sum.

use super::scenario::Scenario;
use crate::architecture::is_moe_layer;
use crate::program::{Attention, Model};

/// fp32 buffers of `[requests × vocab]` alive at once in `_dummy_sampler_run`, beside the
/// logits in the model's dtype that it holds across both of its sampler calls: the
/// `logits.to(torch.float32)` copy of `Sampler.forward`, then two more. The first call
/// (no generators) takes FlashInfer's `top_k_top_p_sampling_from_logits`, which allocates
/// `top_k_mask_logits`'s masked copy and `torch.softmax`'s probabilities; the second,
/// seeded call (`forward_native`) masks in place with the Triton top-k/top-p kernel
/// (`topk_topp_triton.apply_top_k_top_p_triton`), then `logits.softmax` and
/// `random_sample`'s exponential noise `q`. No penalties, logprobs or min-p run
/// (`no_penalties=True`, `max_num_logprobs=None`, no logits processors). [derived from
/// vLLM 0.33 `v1/sample/sampler.py`, `v1/sample/ops/topk_topp_sampler.py` and FlashInfer
/// 0.7's `sampling.py`; vLLM releases before the sort-free samplers (PR #33538, Feb 2026;
/// FlashInfer's on by default from PR #40376) sorted the vocabulary, which held about ten
/// such buffers: the figure dic fitted on the 2025 logs of `vllm-kv-logs.csv` before]
pub const SAMPLER_FP32_BUFFERS: f64 = 3.0;

/// The same buffers in vLLM releases whose top-k/top-p sorted the vocabulary
/// (`apply_top_k_top_p_pytorch`, the default before the sort-free samplers): the fp32 copy,
/// and during `logits.sort` the sorted fp32 values, the int64 indices, the int64 index
/// sequence ATen sorts them from, and cub's alternate fp32 keys and int64 values of the
/// segmented radix sort — 4 + 4 + 8 + 8 + 4 + 8 = 36 B, nine fp32 buffers' worth. PR #32558
/// measured that path at 1.25 GB for 256 × 131,072 logits (37–40 B each, its fp32 input
/// included). Used only to predict start-up logs of those releases (the calibration).
pub const SORTING_SAMPLER_FP32_BUFFERS: f64 = 9.0;

/// Bytes of an activation element in the model's dtype (bf16/fp16).
const ACT_BYTES: f64 = 2.0;

/// The profile run's activation peak on one GPU of a PP stage, by term (bytes). Each
/// phase counts every tensor alive at its worst moment; the peak is
/// [`ActivationPeak::total`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivationPeak {
    /// Attention at `o_proj` (`LlamaAttention.forward`): the residual and the normed input,
    /// the fused QKV output, the attention output and `o_proj`'s.
    pub attention: f64,
    /// A dense MLP at its activation (`LlamaMLP.forward`): the residual, the normed input,
    /// `gate_up_proj`'s output `[tokens, 2 × intermediate / TP]` and `SiluAndMul`'s
    /// `[tokens, intermediate / TP]` (0 when every layer is MoE).
    pub dense_mlp: f64,
    /// A MoE layer beside its workspace: the residual, the normed input, the shared
    /// experts' gate/up and activation (0 without MoE layers).
    pub moe_layer: f64,
    /// The fused-MoE workspace ([`fused_moe_workspace`]): allocated by vLLM's workspace
    /// manager in the profile run and kept, so it is there in every phase.
    pub moe_workspace: f64,
    /// The sampler pass on the last stage: the dummy forward's output `[tokens × hidden]`,
    /// the sampled rows and their random stand-in (`[requests × hidden]` each), the logits
    /// in the model's dtype and [`SAMPLER_FP32_BUFFERS`] fp32 copies (0 on other stages).
    pub sampler: f64,
}

impl ActivationPeak {
    /// The peak: the workspace, plus the largest transient phase.
    pub fn total(&self) -> f64 {
        self.moe_workspace
            + self
                .attention
                .max(self.dense_mlp)
                .max(self.moe_layer)
                .max(self.sampler)
    }
}

/// The requests `_dummy_run` splits its tokens into, whose last tokens are sampled:
/// `min(max_num_batched_tokens, max_num_seqs)`.
pub fn sampled_requests(s: &Scenario) -> f64 {
    s.engine.max_num_batched_tokens.min(s.engine.max_num_seqs) as f64
}

/// The profile run's peak on one GPU of a stage, by term: `max_num_batched_tokens` tokens
/// through one layer, then on the last stage the sampler over [`sampled_requests`].
pub fn activation_peak_terms(s: &Scenario, is_last: bool) -> ActivationPeak {
    activation_peak_with_sampler(s, is_last, SAMPLER_FP32_BUFFERS)
}

/// [`activation_peak_terms`] with a sampler that holds `fp32_buffers` `[requests × vocab]`
/// fp32 buffers beside the logits ([`SAMPLER_FP32_BUFFERS`] in 0.33).
pub fn activation_peak_with_sampler(
    s: &Scenario,
    is_last: bool,
    fp32_buffers: f64,
) -> ActivationPeak {
    let m = &s.model;
    let tp = s.layout.tp.max(1) as f64;
    let t = s.engine.max_num_batched_tokens as f64;
    let h = m.hidden as f64;
    // The residual and the normed input live through a layer's mixer and its MLP.
    let hidden_pair = 2.0 * h;
    let (qkv, attn_out) = attention_widths(m);
    let attention = t * (hidden_pair + (qkv + attn_out) / tp + h) * ACT_BYTES;
    let dense_width = (0..m.layers)
        .filter(|&l| !is_moe_layer(m, l))
        .map(|l| m.intermediate_at(l))
        .max()
        .unwrap_or(0) as f64;
    let dense_mlp = if dense_width > 0.0 {
        t * (hidden_pair + mlp_elements(m, dense_width) / tp) * ACT_BYTES
    } else {
        0.0
    };
    let moe_layer = if m.is_moe() {
        let shared = m.shared_experts as f64 * shared_expert_width(m);
        t * (hidden_pair + mlp_elements(m, shared) / tp) * ACT_BYTES
    } else {
        0.0
    };
    let sampler = if is_last {
        let reqs = sampled_requests(s);
        t * h * ACT_BYTES
            + 2.0 * reqs * h * ACT_BYTES
            + reqs * m.vocab as f64 * (ACT_BYTES + fp32_buffers * 4.0)
    } else {
        0.0
    };
    ActivationPeak {
        attention,
        dense_mlp,
        moe_layer,
        moe_workspace: fused_moe_workspace(s),
        sampler,
    }
}

/// Peak activations of vLLM's profile run on one GPU of a stage ([`activation_peak_terms`]).
pub fn activation_peak(s: &Scenario, is_last: bool) -> f64 {
    activation_peak_terms(s, is_last).total()
}

/// The fused-MoE call's workspace in the profile run, bytes (0 without MoE layers), as
/// `FusedMoEKernel._allocate_buffers` takes it from the workspace manager for
/// `TritonExperts.workspace_shapes` (`fused_moe/experts/triton_moe.py`): per token–expert
/// pair, `workspace13` of max(I, H) elements (the activation's output
/// `intermediate_cache2`, shared with the layer's output) and `workspace2` of max(2·I, H)
/// (`intermediate_cache1`, the gate/up output, then `intermediate_cache3`, the down
/// output), 16-bit; an ungated (ReLU²) expert's gate/up output is I wide. M is the rank's
/// token budget times the DP ranks (the default backend all-gathers every rank's tokens,
/// and DeepEP may deliver as many), all at once: 0.33 no longer chunks the call
/// (`VLLM_FUSED_MOE_CHUNK_SIZE` is gone). I is [`expert_width_on_rank`].
pub fn fused_moe_workspace(s: &Scenario) -> f64 {
    let m = &s.model;
    if !m.is_moe() {
        return 0.0;
    }
    let width = expert_width_on_rank(s);
    let tokens = s.engine.max_num_batched_tokens as f64 * s.layout.dp.max(1) as f64;
    let pairs = tokens * m.experts_per_token as f64;
    let h = m.hidden as f64;
    let gate_up = if m.detail.ungated_mlp {
        width
    } else {
        2.0 * width
    };
    pairs * (width.max(h) + gate_up.max(h)) * ACT_BYTES
}

/// Elements per token of an MLP of `width` at its activation: gate/up output (2 × width;
/// width without a gate) and the activation's output (width).
fn mlp_elements(m: &Model, width: f64) -> f64 {
    if m.detail.ungated_mlp {
        2.0 * width
    } else {
        3.0 * width
    }
}

/// The intermediate width of one shared expert.
fn shared_expert_width(m: &Model) -> f64 {
    if m.detail.shared_expert_intermediate > 0 {
        m.detail.shared_expert_intermediate as f64
    } else {
        m.moe_intermediate as f64
    }
}

/// Elements per token, before TP, of the attention's projected inputs and of its output:
/// GQA/MHA's fused QKV `(heads + 2 × kv_heads) × head_dim` and `heads × head_dim`; MLA's
/// prefill (`MLACommonImpl._forward_prefill`) expands the latent to per-head keys and
/// values, `heads × (2 × (nope + rope) + v)`, and returns `heads × v`.
fn attention_widths(m: &Model) -> (f64, f64) {
    let heads = m.heads as f64;
    match m.attention {
        Attention::Mla => {
            let qk = (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64;
            let v = m.v_head_dim as f64;
            (heads * (2.0 * qk + v), heads * v)
        }
        _ => {
            let d = m.head_dim as f64;
            ((heads + 2.0 * m.kv_heads as f64) * d, heads * d)
        }
    }
}

/// The intermediate width of each expert on one rank, as [`super::weights::rank_weights`] shards the
/// experts: whole with EP (whole experts over the TP × DP ranks), split over TP × DP
/// without it.
pub fn expert_width_on_rank(s: &Scenario) -> f64 {
    let (m, l) = (&s.model, &s.layout);
    if l.ep {
        m.moe_intermediate as f64
    } else {
        m.moe_intermediate as f64 / l.ep_size() as f64
    }
}
