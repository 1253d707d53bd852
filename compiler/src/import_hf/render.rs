//! The `.dist` text of an imported model: a header naming the config, then one
//! `key = value // source` line per field, each saying which config field it came from.

use super::config::Config;
use super::dims::Dims;
use super::layers::LayerKinds;
use super::quantization::Quant;
use super::{comment_text, ImportRequest};
use crate::architecture;
use crate::program::{Attention, Model};
use crate::schema::{Kind, Ty};
use crate::syntax::fmt::quote;

/// Everything the text is written from.
pub(super) struct Imported<'a> {
    pub req: &'a ImportRequest<'a>,
    pub config: &'a Config<'a>,
    pub dims: &'a Dims,
    pub kinds: &'a LayerKinds,
    pub quant: &'a Quant,
    /// The multi-token-prediction layer count and the field that gave it.
    pub mtp: Option<(u64, &'static str)>,
    /// The config field that declares M-RoPE, when one does.
    pub mrope: Option<String>,
    pub model: &'a Model,
}

/// One `key = value // where it came from` line of the output.
struct Line {
    key: &'static str,
    value: String,
    source: String,
}

fn line(key: &'static str, value: impl ToString, source: impl Into<String>) -> Line {
    Line {
        key,
        value: value.to_string(),
        source: source.into(),
    }
}

/// The definition's text.
pub(super) fn text(x: &Imported) -> String {
    let mut out: Vec<Line> = Vec::new();
    shape_lines(x, &mut out);
    attention_lines(x, &mut out);
    moe_lines(x, &mut out);
    pattern_lines(x, &mut out);
    mixer_lines(x, &mut out);
    precision_lines(x, &mut out);
    let mut text = format!(
        "// Imported by `dic import-hf` from {}.\n// architecture: {}{}\n",
        comment_text(x.req.source_name),
        comment_text(&x.config.arch),
        if x.config.multimodal {
            " (language model from text_config)"
        } else {
            ""
        }
    );
    text.push_str(&format!("model {} {{\n", x.req.name));
    for l in out {
        text.push_str(&format!("  {} = {}", l.key, l.value));
        if !l.source.is_empty() {
            text.push_str(&format!(" // {}", comment_text(&l.source)));
        }
        text.push('\n');
    }
    text.push_str("}\n");
    text
}

/// Whether the model's `hf` field takes `repo` (its text rule, from the schema).
fn hf_accepts(repo: &str) -> bool {
    match Kind::Model.schema().field("hf").map(|f| f.ty) {
        Some(Ty::Str(rule)) => rule.check(repo).is_ok(),
        _ => false,
    }
}

/// The repository, the parameter count and the sizes every model has.
fn shape_lines(x: &Imported, out: &mut Vec<Line>) {
    let (d, m) = (x.dims, x.model);
    // The repository is guessed from a file name: written only when it is one the
    // `hf` field accepts.
    if let Some(repo) = x.req.repo.filter(|r| hf_accepts(r)) {
        out.push(line("hf", quote(repo), ""));
    }
    if let Some(class) = &m.architecture {
        out.push(line("architecture", quote(class), "architectures[0]"));
    }
    let params = architecture::parameters(m).total;
    // In billions to two places; a model too small for that (a test's) as a plain count.
    let shown = if params >= 5e6 {
        format!("{:.2}B", params / 1e9)
    } else {
        format!("{params:.0}")
    };
    out.push(line("parameters", shown, "computed from the architecture"));
    out.push(line("layers", d.layers, "num_hidden_layers"));
    out.push(line("hidden", d.hidden, "hidden_size"));
    out.push(line("heads", d.heads, "num_attention_heads"));
    out.push(line(
        "kv_heads",
        d.kv_heads,
        if d.global_kv.is_some() {
            "num_global_key_value_heads (full-attention layers)"
        } else if x.config.nas.is_some()
            && x.config
                .get("num_key_value_heads")
                .is_none_or(serde_json::Value::is_null)
        {
            "block_configs: num_attention_heads / attention.n_heads_in_group"
        } else {
            "num_key_value_heads"
        },
    ));
    if d.attention != Attention::Mla {
        // MLA has no per-head KV dimension; its ranks below describe attention.
        out.push(line(
            "head_dim",
            d.head_dim,
            if d.global_dim.is_some() {
                "global_head_dim (full-attention layers)"
            } else if x.config.has("head_dim") {
                "head_dim"
            } else {
                "hidden_size / num_attention_heads"
            },
        ));
        if m.v_head_dim > 0 && m.v_head_dim != d.head_dim {
            out.push(line("v_head_dim", m.v_head_dim, "v_head_dim"));
        }
    }
    out.push(line("intermediate", d.ffn.intermediate, d.ffn.inter_src));
    let per_layer = &m.detail.layer_intermediate;
    if !per_layer.is_empty() {
        let sizes: Vec<String> = per_layer.iter().map(u64::to_string).collect();
        out.push(line(
            "layer_intermediate",
            format!("[{}]", sizes.join(", ")),
            "block_configs: ffn.ffn_mult per layer, 2·ffn_mult·hidden_size/3 up to a multiple of 256 (0: no FFN)",
        ));
    }
    out.push(line("vocab", d.vocab, "vocab_size"));
    out.push(line(
        "max_context",
        format!("{} tokens", d.max_context),
        "max_position_embeddings",
    ));
}

/// MLA's ranks, DeepSeek V4's query rank, and a sparse-attention indexer.
fn attention_lines(x: &Imported, out: &mut Vec<Line>) {
    let m = x.model;
    if x.dims.attention == Attention::Mla {
        out.push(line("attention", "mla", "kv_lora_rank is set"));
        out.push(line("kv_lora_rank", x.dims.kv_lora_rank, "kv_lora_rank"));
        if m.q_lora_rank > 0 {
            out.push(line("q_lora_rank", m.q_lora_rank, "q_lora_rank"));
        }
        out.push(line(
            "qk_rope_head_dim",
            m.qk_rope_head_dim,
            "qk_rope_head_dim",
        ));
        out.push(line(
            "qk_nope_head_dim",
            m.qk_nope_head_dim,
            "qk_nope_head_dim",
        ));
        out.push(line("v_head_dim", m.v_head_dim, "v_head_dim"));
    } else if x.kinds.uses_compressed() && m.q_lora_rank > 0 {
        out.push(line("q_lora_rank", m.q_lora_rank, "q_lora_rank"));
        out.push(line(
            "qk_rope_head_dim",
            m.qk_rope_head_dim,
            "qk_rope_head_dim",
        ));
    }
    let d = &m.detail;
    if d.indexer_head_dim > 0 {
        out.push(line(
            "indexer_head_dim",
            d.indexer_head_dim,
            "index_head_dim",
        ));
        out.push(line("indexer_heads", d.indexer_heads, "index_n_heads"));
    }
}

/// The experts, their sizes and which layers have them.
fn moe_lines(x: &Imported, out: &mut Vec<Line>) {
    let f = &x.dims.ffn;
    if f.experts == 0 {
        return;
    }
    out.push(line("experts", f.experts, f.experts_src));
    out.push(line(
        "experts_per_token",
        f.experts_per_token,
        f.experts_per_token_src,
    ));
    if f.shared_experts > 0 {
        out.push(line(
            "shared_experts",
            f.shared_experts,
            f.shared_src.unwrap_or("n_shared_experts"),
        ));
    }
    out.push(line(
        "moe_intermediate",
        f.moe_intermediate,
        f.moe_intermediate_src,
    ));
    if x.model.detail.shared_expert_intermediate > 0 {
        out.push(line(
            "shared_expert_intermediate",
            x.model.detail.shared_expert_intermediate,
            "shared_expert_intermediate_size",
        ));
    }
    if f.dense_layers > 0 && x.kinds.uniform {
        out.push(line(
            "dense_layers",
            f.dense_layers,
            "first_k_dense_replace",
        ));
    }
    if f.moe_layer_step > 1 && x.kinds.uniform {
        out.push(line(
            "moe_layer_step",
            f.moe_layer_step,
            "interleave_moe_layer_step / decoder_sparse_step",
        ));
    }
}

/// Ungated MLPs, the layer pattern (with the FFN rule its unwritten FFNs follow) and the
/// sliding window.
fn pattern_lines(x: &Imported, out: &mut Vec<Line>) {
    let (f, kinds) = (&x.dims.ffn, x.kinds);
    if x.model.detail.ungated_mlp {
        out.push(line(
            "ungated_mlp",
            "true",
            "ReLU² MLPs (mlp_hidden_act relu2): up and down projections only",
        ));
    }
    if !kinds.uniform {
        let pattern_text = crate::layers::format(&kinds.written);
        // Layers without a written FFN follow dense_layers / moe_layer_step.
        let unwritten_ffn = kinds.written.iter().any(|w| w.ffn.is_none());
        if f.dense_layers > 0 && unwritten_ffn {
            out.push(line(
                "dense_layers",
                f.dense_layers,
                "first_k_dense_replace",
            ));
        }
        if f.moe_layer_step > 1 && unwritten_ffn {
            out.push(line(
                "moe_layer_step",
                f.moe_layer_step,
                "interleave_moe_layer_step / decoder_sparse_step",
            ));
        }
        out.push(line(
            "layer_pattern",
            quote(&pattern_text),
            kinds.sources.join(", "),
        ));
    }
    let windowed = x.model.sliding_layers > 0 || kinds.uses_compressed();
    if let Some(w) = x.dims.window.filter(|_| windowed) {
        out.push(line(
            "sliding_window",
            format!("{w} tokens"),
            "sliding_window",
        ));
    }
}

/// The sliding layers' own sizes, linear attention, Mamba-2, the recurrent state's dtype,
/// tied embeddings and the encoder.
fn mixer_lines(x: &Imported, out: &mut Vec<Line>) {
    let d = &x.model.detail;
    if d.sliding_kv_heads > 0 {
        out.push(line(
            "sliding_kv_heads",
            d.sliding_kv_heads,
            "num_key_value_heads / swa_num_key_value_heads (sliding layers)",
        ));
    }
    if d.sliding_head_dim > 0 {
        out.push(line(
            "sliding_head_dim",
            d.sliding_head_dim,
            "head_dim / swa_head_dim (sliding layers)",
        ));
    }
    if let Some(la) = d.linear {
        out.push(line(
            "linear_key_heads",
            la.key_heads,
            "linear_num_key_heads",
        ));
        out.push(line(
            "linear_value_heads",
            la.value_heads,
            "linear_num_value_heads",
        ));
        out.push(line("linear_key_dim", la.key_dim, "linear_key_head_dim"));
        out.push(line(
            "linear_value_dim",
            la.value_dim,
            "linear_value_head_dim",
        ));
        out.push(line(
            "linear_conv_kernel",
            la.conv_kernel,
            "linear_conv_kernel_dim",
        ));
    }
    if let Some(mb) = d.mamba {
        out.push(line("mamba_heads", mb.heads, "mamba_num_heads"));
        out.push(line("mamba_head_dim", mb.head_dim, "mamba_head_dim"));
        out.push(line("mamba_state", mb.state, "ssm_state_size"));
        out.push(line("mamba_groups", mb.groups, "n_groups"));
        out.push(line("mamba_conv_kernel", mb.conv_kernel, "conv_kernel"));
    }
    if let Some(sd) = &d.state_dtype {
        out.push(line(
            "state_dtype",
            sd,
            "mamba_ssm_cache_dtype / mamba_ssm_dtype",
        ));
    }
    if x.model.tied_embeddings {
        out.push(line("tied_embeddings", "true", "tie_word_embeddings"));
    }
    if d.encoder_parameters > 0.0 {
        out.push(line(
            "encoder_parameters",
            format!("{:.2}B", d.encoder_parameters / 1e9),
            "estimated from vision_config / audio_config",
        ));
    }
}

/// The dtype, the stored formats per component, the layers left unquantized, the MTP
/// layers and the KV cache.
fn precision_lines(x: &Imported, out: &mut Vec<Line>) {
    let (m, q, dtype) = (x.model, x.quant, x.dims.dtype);
    let d = &m.detail;
    out.push(line("dtype", dtype, "torch_dtype"));
    if m.weights != dtype {
        out.push(line("weights", &m.weights, q.source.clone()));
        out.push(line(
            "prequantized",
            "true",
            "the checkpoint is stored quantized",
        ));
    }
    let qsrc = |what: &str| format!("{} ({what})", q.source);
    if let Some(w) = &d.attention_weights {
        out.push(line(
            "attention_weights",
            w,
            qsrc("attention excluded from quantization"),
        ));
    }
    if let Some(w) = &d.expert_weights {
        out.push(line("expert_weights", w, qsrc("the experts' own format")));
    }
    if let Some(w) = &d.mlp_weights {
        out.push(line(
            "mlp_weights",
            w,
            qsrc("dense MLPs / shared experts excluded"),
        ));
    }
    if d.unquantized_layers > 0 {
        out.push(line(
            "unquantized_layers",
            d.unquantized_layers,
            qsrc("leading layers excluded"),
        ));
    }
    if !d.unquantized_mixer_layers.is_empty() {
        let list: Vec<String> = d
            .unquantized_mixer_layers
            .iter()
            .map(u64::to_string)
            .collect();
        out.push(line(
            "unquantized_mixer_layers",
            format!("[{}]", list.join(", ")),
            qsrc("mixers excluded in these layers"),
        ));
    }
    if d.quant_group > 0 {
        out.push(line("quant_group", d.quant_group, qsrc("group_size")));
    }
    if let [n, k] = d.weight_block[..] {
        out.push(line(
            "weight_block",
            format!("[{n}, {k}]"),
            qsrc("weight_block_size"),
        ));
    }
    if let Some((n, key)) = x.mtp.filter(|m| m.0 > 0) {
        out.push(line("mtp_layers", n, key));
    }
    if let Some(key) = &x.mrope {
        out.push(line("mrope", "true", key.as_str()));
    }
    if let Some(kv) = q.kv_cache {
        out.push(line("kv_cache", kv, qsrc("KV-cache quantization")));
    }
}
