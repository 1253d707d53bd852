//! LoRA adapters' GPU memory, as vLLM 0.33 reserves it at start-up (`lora = { … }`).
//!
//! vLLM wraps every linear layer of the model (`lora/utils.py:get_supported_lora_modules`:
//! "all linear layers support LoRA"), plus the embedding and the LM head
//! (`embedding_modules`), and gives each wrapper stacked A and B tensors of `max_loras`
//! slots at `max_lora_rank`, in the model's dtype (`LoRAConfig.lora_dtype = auto`), when
//! the model loads — so they count with the weights. Per GPU, with TP degree `t`
//! (`lora/layers/base_linear.py:create_lora_weights`, not fully sharded):
//!
//! - a column-parallel layer (QKV, gate/up; one slice per packed projection): A =
//!   `slices × L × r × in` (the whole input), B = `L × r × out/t` (its output shard);
//! - a row-parallel layer (o, down): A = `L × r × in/t`, B = `L × r × out` (whole);
//! - the embedding (`vocab_parallel_embedding.py`): `L × r × (vocab + hidden)`; the LM
//!   head (`logits_processor.py`): `L × r × (hidden + vocab)` — only where the model's
//!   class names them in `embedding_modules` (Llama's, Qwen3's; not Mistral's, DeepSeek's,
//!   gpt-oss's, Gemma 4's: [`VLLM_CLASSES`](super::vllm_class::VLLM_CLASSES)).
//!
//! The punica kernels' workspace (`lora/punica_wrapper/punica_base.py`, `punica_gpu.py`):
//! four int64 index tensors and two `LoRAKernelMeta`s of two int32 tensors, each of
//! `max_num_batched_tokens` entries, at load; and during a step the shrink's float32
//! buffer of `slices × tokens × r` (three slices for QKV), which the profiling run sees as
//! activation memory.
//!
//! A MoE layer's experts are wrapped too (`lora/utils.py:get_supported_lora_modules` adds
//! every `MoERunner`; `lora/layers/fused_moe.py:FusedMoEWithLoRA._create_lora_a_weights`
//! and `_create_lora_b_weights`): per layer and local expert, A of w1/w3 `slices × L × r ×
//! hidden`, B of w1/w3 `slices × L × r × width`, A of w2 `L × r × width`, B of w2 `L × r ×
//! hidden`, with `width` the expert's intermediate on the rank (`slices` = 2 for a gated
//! MLP, 1 otherwise). Non-attention mixers (Mamba, linear attention) are not counted.
//!
//! Applying the adapters costs every step time too ([`StageLora::step_work`]). vLLM runs
//! them with the punica kernels (Chen et al., "Punica: Multi-Tenant LoRA Serving",
//! MLSys 2024; `lora/ops/triton_ops/lora_shrink_op.py`, `lora_expand_op.py`, called per
//! wrapped layer by `lora/punica_wrapper/punica_gpu.py:add_lora_linear`): a shrink `x·A`
//! (`tokens × in × r` multiply-adds) and an expand `(x·A)·B` (`tokens × r × out`), over the
//! stacked slots at `max_lora_rank` (a lower-rank adapter is zero-padded), each token
//! gathering its own adapter's rows. A step reads the A and B of every distinct adapter
//! its sequences use, so at decode the cost is memory-bound and grows with the number of
//! distinct adapters in the batch, not with the batch (S-LoRA, Sheng et al., MLSys 2024,
//! §5; Punica §7): at most `min(max_loras, adapters, sequences)`.

use super::vllm_class::vllm_class;
use crate::layers::{Ffn, Mixer};
use crate::program::Model;

/// One adapter configuration as the memory model needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoraSpec {
    pub max_loras: u64,
    pub max_rank: u64,
    /// Adapters loaded at start-up (`--lora-modules`); 0: loaded at run time, up to
    /// `max_loras` in a batch.
    pub adapters: u64,
}

impl LoraSpec {
    /// Distinct adapters a step of `sequences` sequences uses at most: every sequence on
    /// an adapter (requests for the base model use none, so this is the bound), no more
    /// than the slots (`max_loras`) nor the adapters served.
    pub fn distinct_adapters(&self, sequences: f64) -> f64 {
        let served = if self.adapters == 0 {
            self.max_loras
        } else {
            self.adapters.min(self.max_loras)
        };
        (served as f64).min(sequences.max(1.0))
    }
}

/// Whether vLLM gives `m`'s embedding and LM head LoRA slots
/// ([`VllmClass::wraps_embeddings`](super::vllm_class::VllmClass::wraps_embeddings)).
fn wraps_embeddings(m: &Model) -> bool {
    vllm_class(m).is_none_or(|c| c.wraps_embeddings)
}

/// Bytes of one LoRA element: the model's dtype (vLLM's `lora_dtype = auto`).
fn element_bytes(m: &Model) -> f64 {
    if m.dtype == "fp32" {
        4.0
    } else {
        2.0
    }
}

/// Elements of A and B of one linear layer per slot and unit of rank, on one GPU:
/// column-parallel (`slices` packed projections of `outputs` in all) or row-parallel.
fn column(slices: f64, input: f64, outputs: f64, tp: f64) -> f64 {
    slices * input + outputs / tp
}

fn row(input: f64, output: f64, tp: f64) -> f64 {
    input / tp + output
}

/// Elements of A and B per slot and unit of rank of the linear layers of `layers` on one
/// GPU at TP degree `tp` (attention projections and dense MLPs; experts apart).
fn layer_elements(m: &Model, tp: u64, layers: std::ops::Range<u64>) -> f64 {
    let t = tp.max(1) as f64;
    let h = m.hidden as f64;
    let q = (m.heads * m.head_dim) as f64;
    // QKVParallelLinear keeps at least one KV head per rank (replicated below TP).
    let kv_per_rank = (m.kv_heads as f64 / t).max(1.0) * m.head_dim as f64;
    // QKV (column, three slices): A 3 × h, B its output shard; o (row): A q/t, B h.
    let attention = 3.0 * h + q / t + 2.0 * kv_per_rank + row(q, h, t);
    // gate/up (column, two slices): A 2 × h, B 2i/t; down (row): A i/t, B h.
    let i = m.intermediate as f64;
    let mlp = column(2.0, h, 2.0 * i, t) + row(i, h, t);
    let mut elements = 0.0;
    for l in layers {
        let layer = m.layer(l);
        if matches!(layer.mixer, Mixer::Full | Mixer::Sliding) {
            elements += attention;
        }
        if layer.ffn == Ffn::Dense {
            elements += mlp;
        }
    }
    elements
}

/// Elements of A and B per slot and unit of rank of one MoE layer's experts on one rank
/// (`FusedMoEWithLoRA`): `local_experts` experts of intermediate `width` on the rank.
pub fn expert_elements(m: &Model, local_experts: f64, width: f64) -> f64 {
    let slices = if m.mlp_matrices() >= 3.0 { 2.0 } else { 1.0 };
    let h = m.hidden as f64;
    local_experts * (slices * h + slices * width + width + h)
}

/// The embedding's or the LM head's elements per slot and unit of rank.
fn head_elements(m: &Model) -> f64 {
    (m.vocab + m.hidden) as f64
}

/// The A/B slot bytes on one GPU of a stage holding `layers` (and the embedding on the
/// first stage, the LM head on the last), for `spec` at TP degree `tp`; experts apart
/// ([`expert_elements`]).
pub fn adapter_bytes(
    m: &Model,
    tp: u64,
    layers: std::ops::Range<u64>,
    first: bool,
    last: bool,
    spec: LoraSpec,
) -> f64 {
    let heads = if wraps_embeddings(m) {
        (first as u8 + last as u8) as f64
    } else {
        0.0
    };
    let per_rank_slot = layer_elements(m, tp, layers) + heads * head_elements(m);
    per_rank_slot * (spec.max_loras * spec.max_rank) as f64 * element_bytes(m)
}

/// One MoE layer's experts on one rank, as the LoRA step cost needs them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RankExperts {
    /// MoE layers of the stage.
    pub layers: f64,
    /// Experts each layer holds on the rank, and each one's intermediate width there.
    pub local: f64,
    pub width: f64,
    /// Of all experts, the share a token is routed to (`top_k / experts`).
    pub routed_share: f64,
}

impl RankExperts {
    /// A stage's `moe_layers` holding `expert_params` on the rank (`rank_weights`), each
    /// expert `width` wide there (`memory::expert_width_on_rank`).
    pub fn on_rank(m: &Model, moe_layers: u64, expert_params: f64, width: f64) -> RankExperts {
        if moe_layers == 0 || expert_params <= 0.0 || width <= 0.0 {
            return RankExperts::default();
        }
        RankExperts {
            layers: moe_layers as f64,
            local: expert_params / moe_layers as f64 / (m.mlp_matrices() * m.hidden as f64 * width),
            width,
            routed_share: m.experts_per_token as f64 / m.experts.max(1) as f64,
        }
    }
}

/// A stage's adapted layers as a step applies them on one GPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageLora {
    pub spec: LoraSpec,
    /// A and B elements per slot and unit of rank of the linear layers every token runs
    /// through (attention projections, dense MLPs).
    pub token_elements: f64,
    /// Those of the LM head (last stage), run on each sequence's sampled token alone.
    pub sequence_elements: f64,
    /// Those of one local expert of one MoE layer, and the stage's experts.
    pub expert_elements: f64,
    pub experts: RankExperts,
    pub element_bytes: f64,
}

impl StageLora {
    /// The stage holding `layers` (the LM head when `last`), with `experts` on the rank.
    pub fn new(
        m: &Model,
        tp: u64,
        layers: std::ops::Range<u64>,
        last: bool,
        experts: RankExperts,
        spec: LoraSpec,
    ) -> StageLora {
        StageLora {
            spec,
            token_elements: layer_elements(m, tp, layers),
            sequence_elements: if last && wraps_embeddings(m) {
                head_elements(m)
            } else {
                0.0
            },
            expert_elements: expert_elements(m, 1.0, experts.width),
            experts,
            element_bytes: element_bytes(m),
        }
    }

    /// FLOPs and bytes read of the shrinks and expands of a step carrying `tokens` tokens
    /// of `sequences` sequences, at `max_lora_rank` (2 FLOPs per multiply-add): every token
    /// through the linear layers and its routed experts' adapters
    /// (`lora/ops/triton_ops/fused_moe_lora_op.py`), each sequence's sampled token through
    /// the LM head's; and the slots of the step's distinct adapters
    /// ([`LoraSpec::distinct_adapters`]) read once, of the experts those the step's tokens
    /// touch (`local × (1 − (1 − top_k/experts)^tokens)` on average). The embedding's
    /// adapter is a row gather per token, left out.
    pub fn step_work(&self, tokens: f64, sequences: f64) -> (f64, f64) {
        let r = self.spec.max_rank as f64;
        let e = &self.experts;
        let routed_pairs = tokens * e.routed_share * e.local;
        let touched = e.local * (1.0 - (1.0 - e.routed_share).powf(tokens));
        let flops = 2.0
            * r
            * (tokens * self.token_elements
                + e.layers * routed_pairs * self.expert_elements
                + sequences * self.sequence_elements);
        let slot = self.token_elements
            + self.sequence_elements
            + e.layers * touched * self.expert_elements;
        let bytes = self.spec.distinct_adapters(sequences) * r * slot * self.element_bytes;
        (flops, bytes)
    }
}

/// The punica index tensors allocated at load: 4 × int64 + 2 × 2 × int32 per batched
/// token.
pub fn punica_index_bytes(max_num_batched_tokens: u64) -> f64 {
    (4 * 8 + 2 * 2 * 4) as f64 * max_num_batched_tokens as f64
}

/// The shrink's float32 buffer at its largest (QKV's three slices over a full step).
pub fn punica_shrink_bytes(max_num_batched_tokens: u64, max_rank: u64) -> f64 {
    3.0 * max_num_batched_tokens as f64 * max_rank as f64 * 4.0
}

/// What LoRA adds to a stage's weights and to its activation peak, on one GPU (nothing
/// without `lora`).
pub fn stage_bytes(
    m: &Model,
    tp: u64,
    lora: Option<LoraSpec>,
    max_num_batched_tokens: u64,
    layers: std::ops::Range<u64>,
    (first, last): (bool, bool),
    experts: RankExperts,
) -> (f64, f64) {
    let Some(spec) = lora else {
        return (0.0, 0.0);
    };
    let experts = experts.layers
        * expert_elements(m, experts.local, experts.width)
        * (spec.max_loras * spec.max_rank) as f64
        * element_bytes(m);
    (
        adapter_bytes(m, tp, layers, first, last, spec)
            + experts
            + punica_index_bytes(max_num_batched_tokens),
        punica_shrink_bytes(max_num_batched_tokens, spec.max_rank),
    )
}
