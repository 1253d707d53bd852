//! The scalar architecture a config gives: sizes, heads, head size, experts and their
//! FFN sizes, MLA ranks, the sliding window, the dtype, and the multimodal encoder's
//! parameters. Each is read from the field a model family uses for it, and the name of
//! that field is kept for the output's comments.

use super::config::Config;
use super::{fail, MAX_CONFIG_INT};
use crate::diagnostics::Diagnostic;
use crate::program::{Attention, Model};
use serde_json::{Map, Value};

/// The scalar dimensions of the language model.
pub(super) struct Dims {
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub vocab: u64,
    pub max_context: u64,
    /// Gemma 4: the full-attention layers' own KV heads and head size.
    pub global_kv: Option<u64>,
    pub global_dim: Option<u64>,
    /// `num_key_value_heads` (default: heads) and the head size of the other layers.
    pub plain_kv: u64,
    pub plain_dim: u64,
    /// The full-attention layers' KV heads and head size.
    pub kv_heads: u64,
    pub head_dim: u64,
    pub attention: Attention,
    pub kv_lora_rank: u64,
    pub window: Option<u64>,
    pub dtype: &'static str,
    pub ffn: FfnDims,
}

/// The MLP and expert sizes.
pub(super) struct FfnDims {
    pub experts: u64,
    /// The field that counted the experts (`""` for a dense model).
    pub experts_src: &'static str,
    pub is_llama4: bool,
    pub intermediate: u64,
    pub moe_intermediate: u64,
    /// The field `intermediate` came from.
    pub inter_src: &'static str,
    pub experts_per_token: u64,
    pub shared_size: Option<u64>,
    pub shared_experts: u64,
    pub moe_layer_step: u64,
    pub dense_layers: u64,
}

/// Reads the scalar dimensions, refusing a config without the numbers dic needs.
pub(super) fn read(c: &Config) -> Result<Dims, Box<Diagnostic>> {
    let layers = c.need("num_hidden_layers")?;
    let hidden = c.need("hidden_size")?;
    let heads = c.need("num_attention_heads")?;
    let vocab = c.need("vocab_size")?;
    let max_context = c.need("max_position_embeddings")?;
    if layers == 0 || heads == 0 || hidden == 0 {
        return Err(fail(
            format!("cannot map `{}`: a size is 0", c.source_name),
            "check the config",
        ));
    }
    let global_kv = c.u("num_global_key_value_heads");
    let global_dim = c.u("global_head_dim");
    let plain_kv = c.u("num_key_value_heads").unwrap_or(heads);
    let kv_heads = global_kv.unwrap_or(plain_kv);
    let plain_dim = match c.u("head_dim") {
        Some(d) => d,
        None if hidden % heads == 0 => hidden / heads,
        None => {
            return Err(fail(
                format!("cannot map `{}`: no `head_dim` and hidden_size {hidden} is not a multiple of {heads} heads", c.source_name),
                "add `head_dim` by hand from the model's code",
            ))
        }
    };
    let head_dim = global_dim.unwrap_or(plain_dim);
    let ffn = read_ffn(c)?;
    let kv_lora_rank = c.u("kv_lora_rank").unwrap_or(0);
    let attention = if kv_lora_rank > 0 {
        Attention::Mla
    } else if kv_heads == heads {
        Attention::Mha
    } else {
        Attention::Gqa
    };
    let window = c
        .get("sliding_window")
        .and_then(Value::as_u64)
        .or(c.u("sliding_window_size"));
    Ok(Dims {
        layers,
        hidden,
        heads,
        vocab,
        max_context,
        global_kv,
        global_dim,
        plain_kv,
        plain_dim,
        kv_heads,
        head_dim,
        attention,
        kv_lora_rank,
        window,
        dtype: c.dtype()?,
        ffn,
    })
}

/// The MLP and expert sizes: experts under `num_local_experts`, `num_experts` or
/// `n_routed_experts`; Llama 4's dense MLPs under `intermediate_size_mlp`; a MoE model
/// without dense layers has only `moe_intermediate_size`.
fn read_ffn(c: &Config) -> Result<FfnDims, Box<Diagnostic>> {
    let (experts, experts_src) = ["num_local_experts", "num_experts", "n_routed_experts"]
        .into_iter()
        .find_map(|k| c.u(k).map(|n| (n, k)))
        .unwrap_or((0, ""));
    let is_llama4 = c.arch.starts_with("Llama4");
    let (intermediate, moe_intermediate, inter_src) = if is_llama4 {
        (
            c.u("intermediate_size_mlp")
                .unwrap_or(c.need("intermediate_size")?),
            c.need("intermediate_size")?,
            "intermediate_size_mlp",
        )
    } else if experts > 0 {
        let moe = match c.u("moe_intermediate_size") {
            Some(m) => m,
            None => c.need("intermediate_size")?,
        };
        match c.u("intermediate_size") {
            Some(i) => (i, moe, "intermediate_size"),
            None => (moe, moe, "moe_intermediate_size (no dense layers)"),
        }
    } else {
        (c.need("intermediate_size")?, 0, "intermediate_size")
    };
    let experts_per_token = if experts > 0 {
        c.need("num_experts_per_tok")?
    } else {
        0
    };
    let shared_size = c
        .u("shared_expert_intermediate_size")
        .or(c.u("moe_shared_expert_intermediate_size"))
        .filter(|s| *s > 0);
    let shared_experts = if is_llama4 && experts > 0 {
        1
    } else {
        c.u("n_shared_experts")
            .unwrap_or(if shared_size.is_some() && experts > 0 {
                1
            } else {
                0
            })
    };
    Ok(FfnDims {
        experts,
        experts_src,
        is_llama4,
        intermediate,
        moe_intermediate,
        inter_src,
        experts_per_token,
        shared_size,
        shared_experts,
        moe_layer_step: c
            .u("interleave_moe_layer_step")
            .or(c.u("decoder_sparse_step"))
            .unwrap_or(1)
            .max(1),
        dense_layers: c.u("first_k_dense_replace").unwrap_or(0),
    })
}

/// The model the scalar fields describe (every layer its default kind), the base the
/// per-layer kinds, mixer dimensions and formats are set on.
pub(super) fn base_model(c: &Config, d: &Dims) -> Model {
    let f = &d.ffn;
    Model {
        hf: None,
        parameters: 0.0,
        layers: d.layers,
        hidden: d.hidden,
        heads: d.heads,
        kv_heads: d.kv_heads,
        head_dim: d.head_dim,
        intermediate: f.intermediate,
        vocab: d.vocab,
        max_context: d.max_context as f64,
        attention: d.attention,
        experts: f.experts,
        experts_per_token: f.experts_per_token,
        shared_experts: f.shared_experts,
        moe_intermediate: f.moe_intermediate,
        dense_layers: f.dense_layers,
        moe_layer_step: f.moe_layer_step,
        kv_lora_rank: d.kv_lora_rank,
        q_lora_rank: c.u("q_lora_rank").unwrap_or(0),
        qk_rope_head_dim: c.u("qk_rope_head_dim").unwrap_or(0),
        qk_nope_head_dim: c.u("qk_nope_head_dim").unwrap_or(0),
        v_head_dim: c.u("v_head_dim").unwrap_or(0),
        sliding_window: d.window.map(|w| w as f64),
        sliding_layers: 0,
        tied_embeddings: c
            .get("tie_word_embeddings")
            .or(c.top.get("tie_word_embeddings"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        dtype: d.dtype.into(),
        weights: d.dtype.into(),
        kv_cache: "auto".into(),
        prequantized: false,
        detail: Box::default(),
    }
}

/// Parameters of a vision/audio encoder config: a ViT's blocks (attention 4h², MLP
/// 2·h·intermediate) and the projector into the language model's width. [estimate: patch
/// embeddings and norms are left out]
pub(super) fn encoder_parameters(top: &Map<String, Value>, text_hidden: u64) -> f64 {
    let mut total = 0.0;
    for key in ["vision_config", "audio_config"] {
        let Some(v) = top.get(key).and_then(Value::as_object) else {
            continue;
        };
        // Bounded like every other config count, and in f64 from here on.
        let u = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| v.get(*k).and_then(Value::as_u64))
                .filter(|n| *n <= MAX_CONFIG_INT)
        };
        let (Some(depth), Some(h)) = (
            u(&["depth", "num_hidden_layers", "vt_num_hidden_layers"]),
            u(&["hidden_size", "vt_hidden_size", "embed_dim"]),
        ) else {
            continue;
        };
        let inter = u(&["intermediate_size", "vt_intermediate_size"]).unwrap_or(4 * h) as f64;
        let h = h as f64;
        let merge = (u(&["spatial_merge_size"]).unwrap_or(1) as f64).powi(2);
        let out = u(&["out_hidden_size", "text_hidden_size"]).unwrap_or(text_hidden) as f64;
        total += depth as f64 * (4.0 * h * h + 2.0 * h * inter)
            + (h * merge) * (h * merge)
            + h * merge * out;
    }
    total
}
