//! The scalar architecture a config gives: sizes, heads, head size, experts and their
//! FFN sizes, MLA ranks, the sliding window, the dtype, and the multimodal encoder's
//! parameters. Each is read from the field a model family uses for it, and the name of
//! that field is kept for the output's comments.

use super::config::{whole_number, Config};
use super::{fail, MAX_CONFIG_INT};
use crate::diagnostics::Diagnostic;
use crate::program::{Attention, Model};
use crate::schema::{self, Kind};
use serde_json::Value;

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
    pub intermediate: u64,
    pub moe_intermediate: u64,
    /// The field `intermediate` came from.
    pub inter_src: &'static str,
    pub experts_per_token: u64,
    /// The fields `experts_per_token` and `moe_intermediate` came from.
    pub experts_per_token_src: &'static str,
    pub moe_intermediate_src: &'static str,
    pub shared_size: Option<u64>,
    pub shared_experts: u64,
    /// Where `shared_experts` came from, when the config has no count of its own.
    pub shared_src: Option<&'static str>,
    pub moe_layer_step: u64,
    pub dense_layers: u64,
}

/// Reads the scalar dimensions, refusing a config without the numbers dic needs or with
/// numbers no model has (each count in its `.dist` field's range, and consistent: KV
/// heads dividing the heads, top-k within the experts, dense layers within the layers).
pub(super) fn read(c: &Config) -> Result<Dims, Box<Diagnostic>> {
    let layers = c.need("num_hidden_layers", "layers")?;
    let hidden = c.need("hidden_size", "hidden")?;
    let heads = c.need("num_attention_heads", "heads")?;
    let vocab = c.need("vocab_size", "vocab")?;
    let max_context = c.need("max_position_embeddings", "max_context")?;
    let global_kv = c.count("num_global_key_value_heads", "kv_heads")?;
    let global_dim = c.count("global_head_dim", "head_dim")?;
    let nas_kv = c.nas.as_deref().map(|b| super::nas::kv_heads(b, heads));
    let plain_kv = match c.count("num_key_value_heads", "kv_heads")? {
        Some(kv) => kv,
        None => nas_kv.unwrap_or(heads),
    };
    let kv_heads = global_kv.unwrap_or(plain_kv);
    let plain_dim = match c.count("head_dim", "head_dim")? {
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
    let ffn = read_ffn(c, layers)?;
    let kv_lora_rank = c
        .count_or_none("kv_lora_rank", "kv_lora_rank")?
        .unwrap_or(0);
    let attention = if kv_lora_rank > 0 {
        Attention::Mla
    } else if kv_heads == heads {
        Attention::Mha
    } else {
        Attention::Gqa
    };
    for (k, kv) in [
        ("num_key_value_heads", Some(plain_kv)),
        ("num_global_key_value_heads", global_kv),
    ] {
        let Some(kv) = kv else { continue };
        if kv > heads || !heads.is_multiple_of(kv) {
            return Err(fail(
                format!(
                    "cannot map `{}`: `{k}` = {kv} does not divide num_attention_heads = {heads}",
                    c.source_name
                ),
                "each KV head serves a whole number of query heads: check the config",
            ));
        }
    }
    let window = match c.count_or_none("sliding_window", "sliding_window")? {
        Some(w) => Some(w),
        None => c.count_or_none("sliding_window_size", "sliding_window")?,
    };
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

/// Keys a family's MoE config names its top-k under: Gemma 4's is `top_k_experts`
/// (vLLM 0.33 `models/gemma4.py:Gemma4DecoderLayer.__init__`, `config.top_k_experts`).
const TOP_K_KEYS: [&str; 2] = ["num_experts_per_tok", "top_k_experts"];
/// Keys of the routed experts' intermediate size: Gemma 4's is `expert_intermediate_size`
/// (the same function reads `moe_intermediate_size`, then `expert_intermediate_size`).
const MOE_INTERMEDIATE_KEYS: [&str; 2] = ["moe_intermediate_size", "expert_intermediate_size"];

/// The MLP and expert sizes: experts under `num_local_experts`, `num_experts` or
/// `n_routed_experts`; Llama 4's dense MLPs under `intermediate_size_mlp`; a MoE model
/// without dense layers has only `moe_intermediate_size`. Gemma 4's MoE keeps its dense
/// MLP (`intermediate_size`) in every layer beside the routed experts (`gemma4.py`:
/// `Gemma4DecoderLayer.forward` adds the MLP's and the experts' outputs): an always-on
/// shared expert of that size.
fn read_ffn(c: &Config, layers: u64) -> Result<FfnDims, Box<Diagnostic>> {
    let (experts, experts_src) = c
        .first_count(
            &["num_local_experts", "num_experts", "n_routed_experts"],
            "experts",
        )?
        .unwrap_or((0, ""));
    let is_llama4 = c.arch.starts_with("Llama4");
    let is_gemma4_moe = c.arch.starts_with("Gemma4") && experts > 0;
    let nas_intermediate = c.nas.as_deref().and_then(super::nas::max_intermediate);
    let need_intermediate = || match nas_intermediate {
        // A NAS model's MLPs differ per layer: the model's `intermediate` is the largest.
        Some(n) => Ok(n),
        None => c.need("intermediate_size", "intermediate"),
    };
    let mut moe_intermediate_src = "moe_intermediate_size";
    let (intermediate, moe_intermediate, inter_src) = if is_llama4 {
        moe_intermediate_src = "intermediate_size";
        (
            c.count("intermediate_size_mlp", "intermediate")?
                .unwrap_or(need_intermediate()?),
            c.need("intermediate_size", "moe_intermediate")?,
            "intermediate_size_mlp",
        )
    } else if experts > 0 {
        let moe = match c.first_count(&MOE_INTERMEDIATE_KEYS, "moe_intermediate")? {
            Some((m, k)) => {
                moe_intermediate_src = k;
                m
            }
            None => {
                moe_intermediate_src = "intermediate_size";
                c.need("intermediate_size", "moe_intermediate")?
            }
        };
        match c.count("intermediate_size", "intermediate")? {
            Some(i) => (i, moe, "intermediate_size"),
            None => (moe, moe, "moe_intermediate_size (no dense layers)"),
        }
    } else if nas_intermediate.is_some() {
        (need_intermediate()?, 0, "block_configs: the largest FFN")
    } else {
        (need_intermediate()?, 0, "intermediate_size")
    };
    let (experts_per_token, experts_per_token_src) = if experts > 0 {
        c.first_count(&TOP_K_KEYS, "experts_per_token")?
            .ok_or_else(|| {
                fail(
                    format!(
                        "cannot map `{}`: it has {experts} experts (`{experts_src}`) but no integer `num_experts_per_tok` or `top_k_experts`",
                        c.source_name
                    ),
                    "dic needs how many experts each token is routed to",
                )
            })?
    } else {
        (0, "num_experts_per_tok")
    };
    if experts_per_token > experts {
        return Err(fail(
            format!(
                "cannot map `{}`: `{experts_per_token_src}` = {experts_per_token} is more than the {experts} experts (`{experts_src}`)",
                c.source_name
            ),
            "each token is routed to at most every expert: check the config",
        ));
    }
    let shared_size = match c.count_or_none(
        "shared_expert_intermediate_size",
        "shared_expert_intermediate",
    )? {
        Some(s) => Some(s),
        None if is_gemma4_moe => Some(intermediate),
        None => c.count_or_none(
            "moe_shared_expert_intermediate_size",
            "shared_expert_intermediate",
        )?,
    };
    let shared_src = if is_llama4 && experts > 0 {
        Some("Llama 4's shared expert")
    } else if is_gemma4_moe {
        Some("Gemma 4's MLP beside the experts, intermediate_size")
    } else {
        None
    };
    let shared_experts = if (is_llama4 && experts > 0) || is_gemma4_moe {
        1
    } else {
        c.count("n_shared_experts", "shared_experts")?.unwrap_or(
            if shared_size.is_some() && experts > 0 {
                1
            } else {
                0
            },
        )
    };
    let moe_layer_step = match c.count("interleave_moe_layer_step", "moe_layer_step")? {
        Some(n) => n,
        None => c
            .count("decoder_sparse_step", "moe_layer_step")?
            .unwrap_or(1),
    };
    let dense_layers = c
        .count("first_k_dense_replace", "dense_layers")?
        .unwrap_or(0);
    if dense_layers > layers {
        return Err(fail(
            format!(
                "cannot map `{}`: `first_k_dense_replace` = {dense_layers} is more than the {layers} layers",
                c.source_name
            ),
            "it counts the leading dense layers: check the config",
        ));
    }
    Ok(FfnDims {
        experts,
        experts_src,
        intermediate,
        moe_intermediate,
        inter_src,
        experts_per_token,
        experts_per_token_src,
        moe_intermediate_src,
        shared_size,
        shared_experts,
        shared_src,
        moe_layer_step,
        dense_layers,
    })
}

/// The model the scalar fields describe (every layer its default kind), the base the
/// per-layer kinds, mixer dimensions and formats are set on. MLA needs its rotary,
/// non-rotary and value head sizes.
pub(super) fn base_model(c: &Config, d: &Dims) -> Result<Model, Box<Diagnostic>> {
    let f = &d.ffn;
    let mla_dim = |k: &str| {
        if d.attention == Attention::Mla {
            c.need(k, k).map(Some)
        } else {
            c.count_or_none(k, k)
        }
    };
    Ok(Model {
        hf: None,
        // The class config.json names; one that is no class name is left out (it cannot
        // name a vLLM class, and the text must not carry it).
        architecture: (c.arch != "unknown" && crate::text_rules::class_name(&c.arch).is_ok())
            .then(|| c.arch.clone()),
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
        q_lora_rank: c.count_or_none("q_lora_rank", "q_lora_rank")?.unwrap_or(0),
        qk_rope_head_dim: mla_dim("qk_rope_head_dim")?.unwrap_or(0),
        qk_nope_head_dim: mla_dim("qk_nope_head_dim")?.unwrap_or(0),
        v_head_dim: mla_dim("v_head_dim")?.unwrap_or(0),
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
    })
}

/// Parameters of a vision/audio encoder config: a ViT's blocks (attention 4h², MLP
/// 2·h·intermediate) and the projector into the language model's width. [estimate: patch
/// embeddings and norms are left out] Its counts are whole numbers no larger than the
/// widest model field, and the estimate lies in `encoder_parameters`' range.
pub(super) fn encoder_parameters(c: &Config, text_hidden: u64) -> Result<f64, Box<Diagnostic>> {
    let mut total = 0.0;
    for key in ["vision_config", "audio_config"] {
        let Some(v) = c.top.get(key).and_then(Value::as_object) else {
            continue;
        };
        // The first of `keys` the encoder gives, bounded like every other config count,
        // and in f64 from here on.
        let u = |keys: &[&str]| -> Result<Option<f64>, Box<Diagnostic>> {
            for k in keys {
                let name = format!("{key}.{k}");
                match whole_number(v.get(*k), &name, c.source_name)? {
                    Some(n) if n > MAX_CONFIG_INT => {
                        return Err(fail(
                            format!(
                                "cannot map `{}`: `{name}` = {n} is beyond any model dic describes",
                                c.source_name
                            ),
                            "check the config: sizes of real models are far smaller",
                        ))
                    }
                    Some(n) => return Ok(Some(n as f64)),
                    None => {}
                }
            }
            Ok(None)
        };
        let (Some(depth), Some(h)) = (
            u(&["depth", "num_hidden_layers", "vt_num_hidden_layers"])?,
            u(&["hidden_size", "vt_hidden_size", "embed_dim"])?,
        ) else {
            continue;
        };
        let inter = u(&["intermediate_size", "vt_intermediate_size"])?.unwrap_or(4.0 * h);
        let merge = u(&["spatial_merge_size"])?.unwrap_or(1.0).powi(2);
        let out = u(&["out_hidden_size", "text_hidden_size"])?.unwrap_or(text_hidden as f64);
        total +=
            depth * (4.0 * h * h + 2.0 * h * inter) + (h * merge) * (h * merge) + h * merge * out;
    }
    check_estimate(
        "encoder_parameters",
        total,
        "vision_config / audio_config",
        c,
    )?;
    Ok(total)
}

/// A computed count (`parameters`, `encoder_parameters`) in its `.dist` field's range.
pub(super) fn check_estimate(
    field: &str,
    value: f64,
    from: &str,
    c: &Config,
) -> Result<(), Box<Diagnostic>> {
    let Some(spec) = Kind::Model.schema().field(field) else {
        return Ok(());
    };
    schema::check_number(spec, value).map_err(|why| {
        fail(
            format!("cannot map `{}`: {from} give {why}", c.source_name),
            "check the config: sizes of real models are far smaller",
        )
    })
}
