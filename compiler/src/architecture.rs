//! Architecture arithmetic: parameter counts per component of a model.
//!
//! Used by `dic import-hf` (to state a parameter count), by the stdlib tests (to
//! cross-check the model cards' totals) and by the memory model (to shard weights by
//! component: embeddings and LM head, attention, dense MLPs, experts). Norms and biases
//! are left out: they are under 0.1% of any catalog model.

use crate::program::{Attention, Model};

#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct Parameters {
    pub embedding: f64,
    /// 0 when tied to the embedding.
    pub lm_head: f64,
    /// Attention projections of one layer.
    pub attention_per_layer: f64,
    /// A dense (gated) MLP of one layer.
    pub dense_mlp_per_layer: f64,
    /// One routed expert.
    pub per_expert: f64,
    /// Shared experts and router of one MoE layer.
    pub moe_shared_per_layer: f64,
    pub dense_layers: u64,
    pub moe_layers: u64,
    pub total: f64,
    /// Parameters touched per token (top-k experts only).
    pub active: f64,
}

/// True when layer `l` (0-based) has a MoE block.
pub fn is_moe_layer(m: &Model, l: u64) -> bool {
    m.experts > 0 && l >= m.dense_layers && (l + 1).is_multiple_of(m.moe_layer_step.max(1))
}

pub fn parameters(m: &Model) -> Parameters {
    let h = m.hidden as f64;
    let attention_per_layer = match m.attention {
        Attention::Mla => {
            let qk = (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64;
            let heads = m.heads as f64;
            let q = if m.q_lora_rank > 0 {
                h * m.q_lora_rank as f64 + m.q_lora_rank as f64 * heads * qk
            } else {
                h * heads * qk
            };
            let kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim) as f64;
            let kv_b = m.kv_lora_rank as f64 * heads * (m.qk_nope_head_dim + m.v_head_dim) as f64;
            let o = heads * m.v_head_dim as f64 * h;
            q + kv_a + kv_b + o
        }
        _ => {
            // In f64: the factors are checked per field, not their products.
            let q = h * (m.heads as f64 * m.head_dim as f64);
            let kv = 2.0 * h * (m.kv_heads as f64 * m.head_dim as f64);
            let o = (m.heads as f64 * m.head_dim as f64) * h;
            q + kv + o
        }
    };
    let dense_mlp_per_layer = 3.0 * h * m.intermediate as f64;
    let per_expert = 3.0 * h * m.moe_intermediate as f64;
    let moe_shared_per_layer = m.shared_experts as f64 * per_expert + h * m.experts as f64;
    let moe_layers = (0..m.layers).filter(|l| is_moe_layer(m, *l)).count() as u64;
    let dense_layers = m.layers - moe_layers;
    let embedding = (m.vocab as f64) * h;
    let lm_head = if m.tied_embeddings { 0.0 } else { embedding };
    let layers = m.layers as f64;
    let moe_total = moe_layers as f64 * (m.experts as f64 * per_expert + moe_shared_per_layer);
    let moe_active =
        moe_layers as f64 * (m.experts_per_token as f64 * per_expert + moe_shared_per_layer);
    let common = embedding
        + lm_head
        + layers * attention_per_layer
        + dense_layers as f64 * dense_mlp_per_layer;
    Parameters {
        embedding,
        lm_head,
        attention_per_layer,
        dense_mlp_per_layer,
        per_expert,
        moe_shared_per_layer,
        dense_layers,
        moe_layers,
        total: common + moe_total,
        active: common + moe_active,
    }
}
