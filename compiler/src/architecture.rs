//! Architecture arithmetic: parameter counts per component of a model, layer by layer.
//!
//! One source for every count: `dic import-hf` (to state a parameter count), the stdlib
//! tests (to cross-check the model cards' totals) and the memory model (which shards the
//! same components over TP, DP and EP ranks). Norms and biases are left out: they are
//! under 0.1% of any catalog model.

use crate::layers::{Ffn, Mixer};
use crate::program::{Attention, Model};

#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct Parameters {
    pub embedding: f64,
    /// 0 when tied to the embedding.
    pub lm_head: f64,
    /// Attention projections and recurrent mixers of all layers.
    pub mixers: f64,
    /// Dense MLPs and shared experts of all layers.
    pub mlps: f64,
    /// Routed experts of all layers.
    pub experts: f64,
    /// Vision/audio encoders.
    pub encoder: f64,
    pub total: f64,
    /// Parameters touched per token (top-k experts only).
    pub active: f64,
}

/// True when layer `l` (0-based) has a MoE block.
pub fn is_moe_layer(m: &Model, l: u64) -> bool {
    m.layer(l).ffn == Ffn::Moe
}

/// The parts of one layer's mixer on one rank of a TP group of `tp`: `sharded` is already
/// divided by TP; `replicated` is held whole by every rank (MLA's down-projections, KV
/// heads when TP exceeds them, the sparse-attention indexer). `tp = 1` gives the layer.
#[derive(Debug, Clone, Copy, Default)]
pub struct MixerParams {
    pub sharded: f64,
    pub replicated: f64,
}

impl MixerParams {
    pub fn on_rank(self) -> f64 {
        self.sharded + self.replicated
    }
}

/// GQA/MHA projections with `kv_heads` of `head_dim` (values `v_dim`) on one rank.
fn gqa(m: &Model, kv_heads: u64, head_dim: u64, tp: u64) -> MixerParams {
    let h = m.hidden as f64;
    let tp_f = tp.max(1) as f64;
    let v_dim = if m.attention != Attention::Mla && m.v_head_dim > 0 {
        m.v_head_dim
    } else {
        head_dim
    } as f64;
    let q = h * (m.heads * head_dim) as f64;
    let o = m.heads as f64 * v_dim * h;
    // KV heads are split over TP, or replicated once TP exceeds them.
    let kv_per_rank = (kv_heads / tp.max(1)).max(1) as f64;
    let kv = h * (head_dim as f64 + v_dim) * kv_per_rank;
    MixerParams {
        sharded: (q + o) / tp_f + kv,
        replicated: 0.0,
    }
}

/// The sparse-attention indexer (DeepSeek V3.2 / GLM-5 DSA): replicated on every rank.
fn indexer(m: &Model) -> f64 {
    let d = &m.detail;
    if d.indexer_head_dim == 0 {
        return 0.0;
    }
    let h = m.hidden as f64;
    let q_in = if m.q_lora_rank > 0 {
        m.q_lora_rank
    } else {
        m.hidden
    } as f64;
    let idx = d.indexer_head_dim as f64;
    q_in * d.indexer_heads as f64 * idx + h * idx + h * d.indexer_heads as f64
}

/// One layer's mixer on one rank of a TP group of `tp`.
pub fn mixer_params(m: &Model, mixer: Mixer, tp: u64) -> MixerParams {
    let h = m.hidden as f64;
    let tp_f = tp.max(1) as f64;
    let d = &m.detail;
    match mixer {
        Mixer::None => MixerParams::default(),
        Mixer::Full if m.attention == Attention::Mla => {
            let heads = m.heads as f64;
            let qk = (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64;
            let (q_down, q_up) = if m.q_lora_rank > 0 {
                (h * m.q_lora_rank as f64, m.q_lora_rank as f64 * heads * qk)
            } else {
                (0.0, h * heads * qk)
            };
            let kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim) as f64;
            let kv_b = m.kv_lora_rank as f64 * heads * (m.qk_nope_head_dim + m.v_head_dim) as f64;
            let o = heads * m.v_head_dim as f64 * h;
            MixerParams {
                sharded: (q_up + kv_b + o) / tp_f,
                replicated: q_down + kv_a + indexer(m),
            }
        }
        Mixer::Full => {
            let mut p = gqa(m, m.kv_heads, m.head_dim, tp);
            p.replicated += indexer(m);
            p
        }
        Mixer::Sliding => {
            let kv = if d.sliding_kv_heads > 0 {
                d.sliding_kv_heads
            } else {
                m.kv_heads
            };
            let hd = if d.sliding_head_dim > 0 {
                d.sliding_head_dim
            } else {
                m.head_dim
            };
            gqa(m, kv, hd, tp)
        }
        Mixer::Linear => {
            let la = d.linear.unwrap_or_default();
            let (kh, vh, kd, vd) = (
                la.key_heads as f64,
                la.value_heads as f64,
                la.key_dim as f64,
                la.value_dim as f64,
            );
            let conv_dim = 2.0 * kh * kd + vh * vd;
            // in_proj_qkvz, in_proj_ba, the causal conv, out_proj.
            let total = h * (conv_dim + vh * vd)
                + h * 2.0 * vh
                + conv_dim * la.conv_kernel as f64
                + vh * vd * h;
            MixerParams {
                sharded: total / tp_f,
                replicated: 0.0,
            }
        }
        Mixer::Mamba => {
            let mb = d.mamba.unwrap_or_default();
            let inner = (mb.heads * mb.head_dim) as f64;
            let bc = 2.0 * (mb.groups * mb.state) as f64;
            // in_proj (z, x, B, C, dt), the conv over x/B/C, out_proj.
            let total = h * (2.0 * inner + bc + mb.heads as f64)
                + (inner + bc) * mb.conv_kernel as f64
                + inner * h;
            MixerParams {
                sharded: total / tp_f,
                replicated: 0.0,
            }
        }
        Mixer::Compressed(ratio) => {
            // DeepSeek V4: low-rank queries, one shared KV head of head_dim, output
            // projection; the indexer only on the 4:1 (sparse) layers. [approximation:
            // the compressor's and grouped output's small matrices are folded in here]
            let heads = m.heads as f64;
            let hd = m.head_dim as f64;
            let q_rank = m.q_lora_rank.max(1) as f64;
            let sparse_indexer = if ratio <= 4 { indexer(m) } else { 0.0 };
            MixerParams {
                sharded: (q_rank * heads * hd + heads * hd * h) / tp_f,
                replicated: h * q_rank + h * hd + sparse_indexer,
            }
        }
    }
}

/// One routed expert.
pub fn expert_params(m: &Model) -> f64 {
    m.mlp_matrices() * m.hidden as f64 * m.moe_intermediate as f64
}

/// Shared experts and the router of one MoE layer (the router is replicated).
pub fn shared_params(m: &Model) -> (f64, f64) {
    let inter = if m.detail.shared_expert_intermediate > 0 {
        m.detail.shared_expert_intermediate
    } else {
        m.moe_intermediate
    };
    let shared = m.shared_experts as f64 * m.mlp_matrices() * m.hidden as f64 * inter as f64;
    (shared, m.hidden as f64 * m.experts as f64)
}

/// A dense MLP of `intermediate`.
pub fn dense_params(m: &Model) -> f64 {
    m.mlp_matrices() * m.hidden as f64 * m.intermediate as f64
}

/// Layer `l`'s dense MLP (a NAS model's own size per layer).
pub fn dense_params_at(m: &Model, l: u64) -> f64 {
    m.mlp_matrices() * m.hidden as f64 * m.intermediate_at(l) as f64
}

pub fn parameters(m: &Model) -> Parameters {
    let mut p = Parameters {
        embedding: m.vocab as f64 * m.hidden as f64,
        encoder: m.detail.encoder_parameters,
        ..Parameters::default()
    };
    p.lm_head = if m.tied_embeddings { 0.0 } else { p.embedding };
    let per_expert = expert_params(m);
    let (shared, router) = shared_params(m);
    let mut experts_active = 0.0;
    for l in 0..m.layers {
        let k = m.layer(l);
        p.mixers += mixer_params(m, k.mixer, 1).on_rank();
        match k.ffn {
            Ffn::Dense => p.mlps += dense_params_at(m, l),
            Ffn::Moe => {
                p.mlps += shared + router;
                p.experts += m.experts as f64 * per_expert;
                experts_active += m.experts_per_token as f64 * per_expert;
            }
            Ffn::None => {}
        }
    }
    let common = p.embedding + p.lm_head + p.mixers + p.mlps + p.encoder;
    p.total = common + p.experts;
    p.active = common + experts_active;
    p
}
