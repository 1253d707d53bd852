//! Weights on one GPU: bytes per parameter of each weight format (scales included), and
//! the weights one rank of one PP stage holds, sharded the way vLLM's layers shard them.
//! The memory model charges them per stage; the speculative draft's shape reuses them for
//! its own layers and whole draft models.

use crate::architecture;
use crate::program::{Component, Ffn, Model};
use serde::Serialize;

/// Bytes per parameter of a weight format, including quantization scales, with the
/// format's default group size.
pub fn weight_bytes(dtype: &str) -> f64 {
    weight_bytes_grouped(dtype, 0)
}

/// Bytes per parameter of a weight format with `group` weights per scale (0: the
/// format's default): AWQ/GPTQ keep an fp16 scale and a packed 4-bit zero per group of
/// 128; symmetric INT4 (compressed-tensors W4A16) only the scale; NVFP4 one FP8 scale
/// per 16; MXFP4 one 8-bit scale per 32; block FP8 one fp32 scale per 128 × 128.
pub fn weight_bytes_grouped(dtype: &str, group: u64) -> f64 {
    let g = |default: u64| if group > 0 { group } else { default } as f64;
    match dtype {
        "fp32" => 4.0,
        "fp8" => 1.0 + 4.0 / (128.0 * 128.0),
        "int8" => 1.0,
        "awq" | "gptq" => 0.5 + 2.5 / g(128),
        "int4" => 0.5 + 2.0 / g(128),
        "nvfp4" => 0.5 + 1.0 / g(16),
        "mxfp4" => 0.5 + 1.0 / g(32),
        _ => 2.0,
    }
}

/// The weights one rank of one stage holds, in bytes and parameters.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RankWeights {
    pub bytes: f64,
    pub params: f64,
    /// Routed experts (included in the above).
    pub expert_bytes: f64,
    pub expert_params: f64,
    /// The embedding (first stage) and LM head (last stage), included above.
    pub embedding_bytes: f64,
    pub embedding_params: f64,
    pub lm_head_params: f64,
    /// Vision/audio encoders (first stage), included above; they run only on media.
    pub encoder_bytes: f64,
    pub encoder_params: f64,
}

/// Weights of one rank of the stage holding `layers`, sharded the way vLLM's layers
/// shard them, each component in its own format ([`Model::format_of`]).
pub fn rank_weights(
    m: &Model,
    l: &crate::program::Layout,
    layers: std::ops::Range<u64>,
    is_first: bool,
    is_last: bool,
) -> RankWeights {
    let (tp, dp, ep) = (l.tp.max(1), l.dp.max(1), l.ep);
    let tp_f = tp as f64;
    let h = m.hidden as f64;
    let group = m.detail.quant_group;
    let bytes_of =
        |c: Component, layer: Option<u64>| weight_bytes_grouped(m.format_of(c, layer), group);
    // Bytes per parameter of each component in an ordinary layer, and in a layer the
    // checkpoint keeps in `dtype`: computed once, not per layer.
    let per = [
        Component::Mixer,
        Component::Experts,
        Component::Mlp,
        Component::Unquantized,
    ]
    .map(|c| bytes_of(c, None));
    let kept = weight_bytes_grouped(&m.dtype, group);
    let per_unq = per[Component::Unquantized as usize];
    let d = &m.detail;
    let layer_bytes = |c: Component, layer: u64| {
        if layer < d.unquantized_layers
            || (c == Component::Mixer && d.unquantized_mixer_layers.contains(&layer))
        {
            kept
        } else {
            per[c as usize]
        }
    };
    // The mixer's parameters per kind (a model has at most a few kinds).
    let mut mixer_cache: Vec<(crate::program::Mixer, f64)> = Vec::new();
    let mut w = RankWeights::default();
    let add = |w: &mut RankWeights, params: f64, per: f64| {
        w.params += params;
        w.bytes += params * per;
    };
    let expert = architecture::expert_params(m);
    let (shared, router) = architecture::shared_params(m);

    for layer in layers {
        let k = m.layer(layer);
        let mixer = match mixer_cache.iter().find(|(x, _)| *x == k.mixer) {
            Some((_, p)) => *p,
            None => {
                let p = architecture::mixer_params(m, k.mixer, tp).on_rank();
                mixer_cache.push((k.mixer, p));
                p
            }
        };
        add(&mut w, mixer, layer_bytes(Component::Mixer, layer));
        match k.ffn {
            Ffn::Moe => {
                let routed = if ep {
                    m.experts.div_ceil(tp * dp) as f64 * expert
                } else {
                    m.experts as f64 * expert / (tp * dp) as f64
                };
                let per = layer_bytes(Component::Experts, layer);
                add(&mut w, routed, per);
                w.expert_params += routed;
                w.expert_bytes += routed * per;
                add(&mut w, shared / tp_f, layer_bytes(Component::Mlp, layer));
                add(&mut w, router, per_unq);
            }
            Ffn::Dense => add(
                &mut w,
                architecture::dense_params_at(m, layer) / tp_f,
                layer_bytes(Component::Mlp, layer),
            ),
            Ffn::None => {}
        }
    }
    let unq = per_unq;
    let vocab_shard = m.vocab as f64 * h / tp_f;
    if is_first {
        add(&mut w, vocab_shard, unq);
        w.embedding_params += vocab_shard;
        w.embedding_bytes += vocab_shard * unq;
        let encoder = m.detail.encoder_parameters / tp_f;
        add(&mut w, encoder, unq);
        w.encoder_params += encoder;
        w.encoder_bytes += encoder * unq;
    }
    if is_last && !(m.tied_embeddings && is_first) {
        add(&mut w, vocab_shard, unq);
    }
    if is_last {
        w.lm_head_params = vocab_shard;
    }
    w
}
