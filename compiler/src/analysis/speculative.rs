//! Speculative decoding's draft: what it adds to every GPU (weights and KV-cache layers,
//! for the memory check) and what one drafting pass costs (for the step model), per
//! method as vLLM 0.33 runs it with the target's TP:
//!
//! - `eagle3` / `eagle`: one decoder layer of the target's shape in the model's dtype, a
//!   fusion projection (3h → h for EAGLE-3, 2h → h for EAGLE) and, for EAGLE-3, its own
//!   LM head over a 32k draft vocabulary; one KV layer of the target's kind.
//! - `mtp`: the checkpoint's `mtp_layers`, each one more layer of the target's last kind
//!   (a MoE layer on DeepSeek) plus its 2h → h projection; one KV layer each.
//! - `draft_model`: the draft model whole, with its own KV layers.
//! - `ngram`: nothing on the GPU (prompt lookup on the CPU).

use super::kv_pool::{CacheSpec, SpecCache};
use super::scenario::Scenario;
use super::weights::{rank_weights, weight_bytes};
use crate::architecture;
use crate::program::{Layout, Mixer, Model};

/// EAGLE-3 heads predict over a reduced draft vocabulary of this size (the released
/// EAGLE-3 checkpoints' `draft_vocab_size`).
pub const EAGLE3_DRAFT_VOCAB: f64 = 32000.0;

/// Share of the target step's fixed overhead (launches, scheduling) one drafting pass
/// costs. [heuristic: a drafting pass is one or a few layers replayed from a CUDA graph;
/// not fitted, the measured rows have no speculative decoding.]
pub const DRAFT_PASS_OVERHEAD_SHARE: f64 = 0.1;

/// The draft on one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct DraftShape {
    /// Weight bytes on each GPU.
    pub weight_bytes: f64,
    /// Parameters multiplied per drafted token on each GPU.
    pub active_params: f64,
    /// The KV-cache layers it adds to the pool.
    pub kv_specs: Vec<CacheSpec>,
    /// KV bytes read per token of context in one drafting pass, on each GPU.
    pub kv_per_token: f64,
    /// Attention work per token of context: Σ local heads × head size.
    pub attention_per_token: f64,
}

/// One decoder layer of `m`'s dense shape: its full-attention mixer and a dense MLP (an
/// MLP as wide as the experts a token uses when the model has no dense one), in
/// parameters.
fn dense_layer_params(m: &Model) -> f64 {
    let mlp = if m.intermediate > 0 {
        architecture::dense_params(m)
    } else {
        architecture::expert_params(m) * m.experts_per_token.max(1) as f64
    };
    architecture::mixer_params(m, Mixer::Full, 1).on_rank() + mlp
}

/// The draft of `s`'s speculative decoding on each GPU, `None` without one.
pub fn draft_shape(s: &Scenario) -> Option<DraftShape> {
    let spec = s.engine.speculative.as_ref()?;
    let m = &s.model;
    let tp = s.layout.tp.max(1);
    let tpf = tp as f64;
    let h = m.hidden as f64;
    let mut cache = SpecCache::new(m, tp);
    let full = cache.get(Mixer::Full);
    let per_token = |c: &Option<CacheSpec>| match c {
        Some(CacheSpec::Full { per_token }) => *per_token,
        _ => 0.0,
    };
    let local_attention = m.heads as f64 / tpf * m.head_dim as f64;
    let shape = match spec.method.as_str() {
        "eagle3" | "eagle" => {
            let (fusion, head) = if spec.method == "eagle3" {
                (3.0 * h * h, EAGLE3_DRAFT_VOCAB * h)
            } else {
                (2.0 * h * h, 0.0)
            };
            let params = dense_layer_params(m) + fusion + head;
            DraftShape {
                weight_bytes: params * weight_bytes(&m.dtype) / tpf,
                active_params: params / tpf,
                kv_specs: full.iter().copied().collect(),
                kv_per_token: per_token(&full),
                attention_per_token: local_attention,
            }
        }
        "mtp" => {
            let n = m.detail.mtp_layers.max(1) as f64;
            let last = m.layers.saturating_sub(1);
            let layer = rank_weights(m, &s.layout, last..last + 1, false, false);
            let share = if m.experts > 0 {
                m.experts_per_token as f64 / m.experts as f64
            } else {
                0.0
            };
            let projection = 2.0 * h * h / tpf;
            let active = layer.params - layer.expert_params * (1.0 - share);
            DraftShape {
                weight_bytes: n * (layer.bytes + projection * weight_bytes(&m.dtype)),
                active_params: n * (active + projection),
                kv_specs: std::iter::repeat_n(full, n as usize).flatten().collect(),
                kv_per_token: n * per_token(&full),
                attention_per_token: n * local_attention,
            }
        }
        "draft_model" => {
            let d = spec.draft.as_deref()?;
            let l = Layout {
                tp,
                pp: 1,
                ..Layout::default()
            };
            let w = rank_weights(d, &l, 0..d.layers, true, true);
            let mut dcache = SpecCache::new(d, tp);
            let specs: Vec<CacheSpec> = (0..d.layers)
                .filter_map(|i| dcache.get(d.layer(i).mixer))
                .collect();
            let kv: f64 = specs.iter().map(|c| per_token(&Some(*c))).sum();
            DraftShape {
                weight_bytes: w.bytes,
                active_params: w.params - w.embedding_params,
                kv_specs: specs,
                kv_per_token: kv,
                attention_per_token: d.layers as f64 * d.heads as f64 / tpf * d.head_dim as f64,
            }
        }
        _ => DraftShape {
            weight_bytes: 0.0,
            active_params: 0.0,
            kv_specs: Vec::new(),
            kv_per_token: 0.0,
            attention_per_token: 0.0,
        },
    };
    Some(shape)
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_per_step_follows_the_acceptance() {
        let spec = |a: f64, k: u64| super::super::scenario::SpecDecode {
            method: "eagle3".into(),
            tokens: k,
            acceptance: a,
            source: None,
            draft: None,
        };
        // Nothing accepted: one token per step, as without speculation.
        assert!((spec(0.0, 3).tokens_per_step() - 1.0).abs() < 1e-12);
        // vLLM's accepted ÷ drafted ratio: a = 0.7, k = 3 accepts 2.1 drafts per step,
        // 3.1 tokens with the verify pass's own (not 2.53, 1 + 0.7 + 0.49 + 0.343, as a
        // per-position chance would have it).
        assert!((spec(0.7, 3).tokens_per_step() - 3.1).abs() < 1e-12);
        assert!((spec(0.5, 4).tokens_per_step() - 3.0).abs() < 1e-12);
        // Every draft accepted: k + 1.
        assert!((spec(1.0, 3).tokens_per_step() - 4.0).abs() < 1e-12);
    }
}
