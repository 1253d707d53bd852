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
//!   head (`logits_processor.py`): `L × r × (hidden + vocab)`.
//!
//! The punica kernels' workspace (`lora/punica_wrapper/punica_base.py`, `punica_gpu.py`):
//! four int64 index tensors and two `LoRAKernelMeta`s of two int32 tensors, each of
//! `max_num_batched_tokens` entries, at load; and during a step the shrink's float32
//! buffer of `slices × tokens × r` (three slices for QKV), which the profiling run sees as
//! activation memory.
//!
//! A MoE layer's experts (`FusedMoEWithLoRA`) and non-attention mixers (Mamba, linear
//! attention) are not counted: the formula covers attention and dense MLPs.

use crate::layers::{Ffn, Mixer};
use crate::program::Model;

/// One adapter configuration as the memory model needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoraSpec {
    pub max_loras: u64,
    pub max_rank: u64,
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

/// The A/B slot bytes on one GPU of a stage holding `layers` (and the embedding on the
/// first stage, the LM head on the last), for `spec` at TP degree `tp`.
pub fn adapter_bytes(
    m: &Model,
    tp: u64,
    layers: std::ops::Range<u64>,
    first: bool,
    last: bool,
    spec: LoraSpec,
) -> f64 {
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
    let mut per_rank_slot = 0.0;
    for l in layers {
        let layer = m.layer(l);
        if matches!(layer.mixer, Mixer::Full | Mixer::Sliding) {
            per_rank_slot += attention;
        }
        if layer.ffn == Ffn::Dense {
            per_rank_slot += mlp;
        }
    }
    let vocab = m.vocab as f64;
    if first {
        per_rank_slot += vocab + h;
    }
    if last {
        per_rank_slot += h + vocab;
    }
    per_rank_slot * (spec.max_loras * spec.max_rank) as f64 * element_bytes(m)
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
) -> (f64, f64) {
    let Some(spec) = lora else {
        return (0.0, 0.0);
    };
    (
        adapter_bytes(m, tp, layers, first, last, spec)
            + punica_index_bytes(max_num_batched_tokens),
        punica_shrink_bytes(max_num_batched_tokens, spec.max_rank),
    )
}
