//! `dic import-hf`: a Hugging Face `config.json` (and `hf_quant_config.json` when the
//! checkpoint has one) → a `.dist` model definition.
//!
//! Pure: text in, text out. It maps what it understands exactly and refuses the rest
//! with an E0901 diagnostic that names the field — it never guesses. Handled: dense
//! and GQA models, explicit `head_dim`, expert counts under `num_local_experts`,
//! `num_experts` or `n_routed_experts`, MLA ranks, a nested `text_config`
//! (multimodal wrappers), per-layer sliding-window attention (`layer_types`), and
//! quantization in `quantization_config` or in a separate `hf_quant_config.json`.

use crate::architecture;
use crate::diagnostics::{Code, Diagnostic};
use crate::program::{Attention, Model};
use crate::syntax::fmt::quote;
use serde_json::{Map, Value};

/// What the caller knows besides the JSON text.
pub struct ImportRequest<'a> {
    pub config: &'a str,
    pub quant_config: Option<&'a str>,
    /// The definition's name.
    pub name: &'a str,
    /// The Hugging Face repository, if known (e.g. from the file name `ORG--NAME_config.json`).
    pub repo: Option<&'a str>,
    /// Shown in the header comment.
    pub source_name: &'a str,
}

fn fail(message: String, help: &str) -> Box<Diagnostic> {
    Box::new(Diagnostic::new(Code::UnsupportedConfig, message).help(help.to_string()))
}

/// Derives a definition name and repository from a file name like
/// `meta-llama--Meta-Llama-3.1-70B_config.json`.
pub fn names_from_file(file_name: &str) -> (String, Option<String>) {
    let stem = file_name
        .trim_end_matches(".json")
        .trim_end_matches("_config")
        .trim_end_matches("config");
    let stem = stem.trim_end_matches(['_', '-', '.']);
    let (repo, model) = match stem.split_once("--") {
        Some((org, model)) => (Some(format!("{org}/{model}")), model.to_string()),
        None => (None, stem.to_string()),
    };
    let mut name: String = model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    while name.contains("__") {
        name = name.replace("__", "_");
    }
    let mut name = name.trim_matches('_').to_string();
    if name.is_empty() {
        name = "imported_model".into();
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name = format!("m_{name}");
    }
    (name, repo)
}

/// The `.dist` text of the model, or the reason it cannot be mapped.
pub fn import(req: &ImportRequest<'_>) -> Result<String, Box<Diagnostic>> {
    if !is_identifier(req.name) {
        return Err(fail(
            format!("`{}` cannot name a model", comment_text(req.name)),
            "a name is letters, digits and `_`, starting with a letter or `_` (e.g. `--name my_model`)",
        ));
    }
    let root: Value = serde_json::from_str(req.config).map_err(|e| {
        fail(
            format!("`{}` is not valid JSON: {e}", req.source_name),
            "pass the model's config.json",
        )
    })?;
    let Value::Object(top) = root else {
        return Err(fail(
            format!("`{}` is not a JSON object", req.source_name),
            "pass the model's config.json",
        ));
    };
    // Multimodal wrappers keep the language model under `text_config`.
    let mut cfg: Map<String, Value> = top.clone();
    let multimodal = top.get("text_config").and_then(Value::as_object).cloned();
    if let Some(text) = &multimodal {
        for (k, v) in text {
            cfg.insert(k.clone(), v.clone());
        }
    }
    let arch = top
        .get("architectures")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string();
    // Every count a config gives is bounded before any arithmetic: the schema's widest
    // integer range (a model's sizes), or its token range for the context length.
    if let Some((k, v)) = cfg.iter().find_map(|(k, v)| {
        let n = v.as_u64()?;
        let limit = if k == "max_position_embeddings" {
            1 << 33
        } else {
            MAX_CONFIG_INT
        };
        (n > limit).then_some((k, n))
    }) {
        return Err(fail(
            format!(
                "cannot map `{}`: `{k}` = {v} is beyond any model dic describes",
                req.source_name
            ),
            "check the config: sizes of real models are far smaller",
        ));
    }
    let get_u = |k: &str| cfg.get(k).and_then(Value::as_u64);
    let need = |k: &str| -> Result<u64, Box<Diagnostic>> {
        get_u(k).ok_or_else(|| {
            fail(
                format!("cannot map `{}`: it has no integer `{k}`", req.source_name),
                "dic needs the architecture numbers; is this a decoder-only language model's config.json?",
            )
        })
    };
    let layers = need("num_hidden_layers")?;
    let hidden = need("hidden_size")?;
    let heads = need("num_attention_heads")?;
    let vocab = need("vocab_size")?;
    let max_context = need("max_position_embeddings")?;
    let kv_heads = get_u("num_key_value_heads").unwrap_or(heads);
    let head_dim = match get_u("head_dim") {
        Some(d) => d,
        None if heads > 0 && hidden % heads == 0 => hidden / heads,
        None => {
            return Err(fail(
                format!("cannot map `{}`: no `head_dim` and hidden_size {hidden} is not a multiple of {heads} heads", req.source_name),
                "add `head_dim` by hand from the model's code",
            ))
        }
    };
    let experts = get_u("num_local_experts")
        .or(get_u("num_experts"))
        .or(get_u("n_routed_experts"))
        .unwrap_or(0);
    let is_llama4 = arch.starts_with("Llama4");
    let (intermediate, moe_intermediate) = if is_llama4 {
        (
            get_u("intermediate_size_mlp").unwrap_or(need("intermediate_size")?),
            need("intermediate_size")?,
        )
    } else if experts > 0 {
        let moe = get_u("moe_intermediate_size").unwrap_or(need("intermediate_size")?);
        (get_u("intermediate_size").unwrap_or(moe), moe)
    } else {
        (need("intermediate_size")?, 0)
    };
    if let Some(Value::Array(only)) = cfg.get("mlp_only_layers") {
        if !only.is_empty() {
            return Err(fail(
                format!(
                    "cannot map `{}`: `mlp_only_layers` makes layers {only:?} dense",
                    req.source_name
                ),
                "per-layer MLP overrides are not expressible yet; write the model by hand",
            ));
        }
    }
    let experts_per_token = if experts > 0 {
        need("num_experts_per_tok")?
    } else {
        0
    };
    let shared_experts = if is_llama4 && experts > 0 {
        1
    } else {
        get_u("n_shared_experts").unwrap_or(0)
    };
    if experts > 0 && get_u("shared_expert_intermediate_size").is_some_and(|s| s > 0) {
        return Err(fail(
            format!("cannot map `{}`: its shared expert has its own size (shared_expert_intermediate_size)", req.source_name),
            "write the model by hand",
        ));
    }
    let moe_layer_step = get_u("interleave_moe_layer_step")
        .or(get_u("decoder_sparse_step"))
        .unwrap_or(1)
        .max(1);
    let dense_layers = get_u("first_k_dense_replace").unwrap_or(0);
    let kv_lora_rank = get_u("kv_lora_rank").unwrap_or(0);
    let attention = if kv_lora_rank > 0 {
        Attention::Mla
    } else if kv_heads == heads {
        Attention::Mha
    } else {
        Attention::Gqa
    };
    // Sliding windows: per-layer types, or a window on every layer.
    let window = cfg.get("sliding_window").and_then(Value::as_u64);
    let sliding_layers = match (cfg.get("layer_types").and_then(Value::as_array), window) {
        (Some(types), Some(_)) => types
            .iter()
            .filter(|t| t.as_str() == Some("sliding_attention"))
            .count() as u64,
        (None, Some(_))
            if cfg.get("use_sliding_window").and_then(Value::as_bool) != Some(false) =>
        {
            layers
        }
        _ => 0,
    };
    let dtype = match cfg
        .get("torch_dtype")
        .or(cfg.get("dtype"))
        .and_then(Value::as_str)
    {
        Some("bfloat16") | None => "bf16",
        Some("float16") => "fp16",
        Some("float32") => "fp32",
        Some(other) => {
            return Err(fail(
                format!("cannot map dtype `{other}` of `{}`", req.source_name),
                "dic knows bfloat16, float16 and float32",
            ))
        }
    };
    let mut weights = dtype.to_string();
    let mut kv_cache = None;
    if let Some(q) = cfg.get("quantization_config").and_then(Value::as_object) {
        let method = q.get("quant_method").and_then(Value::as_str).unwrap_or("");
        weights = match method {
            "fp8" => "fp8".into(),
            "mxfp4" => "mxfp4".into(),
            "awq" => "awq".into(),
            "gptq" => "gptq".into(),
            "modelopt_fp4" | "nvfp4" => "nvfp4".into(),
            other => {
                return Err(fail(
                    format!(
                        "cannot map quantization method `{other}` in `{}`",
                        req.source_name
                    ),
                    "set `weights` by hand (fp8, int8, int4, awq, gptq, nvfp4, mxfp4)",
                ))
            }
        };
    }
    if let Some(qtext) = req.quant_config {
        let qv: Value = serde_json::from_str(qtext).map_err(|e| {
            fail(
                format!("hf_quant_config.json is not valid JSON: {e}"),
                "pass the checkpoint's hf_quant_config.json",
            )
        })?;
        let q = qv.get("quantization").unwrap_or(&qv);
        match q.get("quant_algo").and_then(Value::as_str) {
            Some("FP8") => weights = "fp8".into(),
            Some("NVFP4") => weights = "nvfp4".into(),
            Some("W4A16_AWQ") => weights = "awq".into(),
            None => {}
            Some(other) => {
                return Err(fail(
                    format!("cannot map quant_algo `{other}` in hf_quant_config.json"),
                    "set `weights` by hand",
                ))
            }
        }
        match q.get("kv_cache_quant_algo").and_then(Value::as_str) {
            Some("FP8") => kv_cache = Some("fp8"),
            None => {}
            Some(other) => {
                return Err(fail(
                    format!("cannot map kv_cache_quant_algo `{other}` in hf_quant_config.json"),
                    "set `kv_cache` by hand",
                ))
            }
        }
    }
    let tied = cfg
        .get("tie_word_embeddings")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let m = Model {
        hf: req.repo.map(str::to_string),
        parameters: 0.0,
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        intermediate,
        vocab,
        max_context: max_context as f64,
        attention,
        experts,
        experts_per_token,
        shared_experts,
        moe_intermediate,
        dense_layers,
        moe_layer_step,
        kv_lora_rank,
        q_lora_rank: get_u("q_lora_rank").unwrap_or(0),
        qk_rope_head_dim: get_u("qk_rope_head_dim").unwrap_or(0),
        qk_nope_head_dim: get_u("qk_nope_head_dim").unwrap_or(0),
        v_head_dim: get_u("v_head_dim").unwrap_or(0),
        sliding_window: window.map(|w| w as f64),
        sliding_layers,
        tied_embeddings: tied,
        dtype: dtype.into(),
        weights: weights.clone(),
        kv_cache: kv_cache.unwrap_or("auto").into(),
        prequantized: weights != dtype,
    };
    let params = architecture::parameters(&m);

    let mut out = String::new();
    out.push_str(&format!(
        "// Imported by `dic import-hf` from {}.\n",
        comment_text(req.source_name)
    ));
    out.push_str(&format!(
        "// architecture: {}{}\n",
        comment_text(&arch),
        if multimodal.is_some() {
            " (language model from text_config)"
        } else {
            ""
        }
    ));
    out.push_str(&format!("model {} {{\n", req.name));
    let mut line = |k: &str, v: String, comment: Option<String>| {
        out.push_str(&format!("  {k} = {v}"));
        if let Some(c) = comment {
            out.push_str(&format!(" // {c}"));
        }
        out.push('\n');
    };
    if let Some(repo) = req.repo {
        line("hf", quote(repo), None);
    }
    line(
        "parameters",
        format!("{:.2}B", params.total / 1e9),
        Some("computed from the architecture".into()),
    );
    line("layers", layers.to_string(), None);
    line("hidden", hidden.to_string(), None);
    line("heads", heads.to_string(), None);
    line("kv_heads", kv_heads.to_string(), None);
    if attention != Attention::Mla {
        // MLA has no per-head KV dimension; its ranks below describe attention.
        if attention != Attention::Mla {
            // MLA has no per-head KV dimension; its ranks below describe attention.
            line("head_dim", head_dim.to_string(), None);
        }
    }
    line("intermediate", intermediate.to_string(), None);
    line("vocab", vocab.to_string(), None);
    line("max_context", format!("{max_context} tokens"), None);
    if attention == Attention::Mla {
        line("attention", "mla".into(), None);
        line("kv_lora_rank", kv_lora_rank.to_string(), None);
        if m.q_lora_rank > 0 {
            line("q_lora_rank", m.q_lora_rank.to_string(), None);
        }
        line("qk_rope_head_dim", m.qk_rope_head_dim.to_string(), None);
        line("qk_nope_head_dim", m.qk_nope_head_dim.to_string(), None);
        line("v_head_dim", m.v_head_dim.to_string(), None);
    }
    if experts > 0 {
        line("experts", experts.to_string(), None);
        line("experts_per_token", experts_per_token.to_string(), None);
        if shared_experts > 0 {
            line("shared_experts", shared_experts.to_string(), None);
        }
        line("moe_intermediate", moe_intermediate.to_string(), None);
        if dense_layers > 0 {
            line("dense_layers", dense_layers.to_string(), None);
        }
        if moe_layer_step > 1 {
            line("moe_layer_step", moe_layer_step.to_string(), None);
        }
    }
    if let Some(w) = window.filter(|_| sliding_layers > 0) {
        line("sliding_window", format!("{w} tokens"), None);
        line("sliding_layers", sliding_layers.to_string(), None);
    }
    if tied {
        line("tied_embeddings", "true".into(), None);
    }
    line("dtype", dtype.into(), None);
    if weights != dtype {
        line(
            "weights",
            weights,
            Some("from the checkpoint's quantization config".into()),
        );
        line("prequantized", "true".into(), None);
    }
    if let Some(kv) = kv_cache {
        line(
            "kv_cache",
            kv.into(),
            Some("from hf_quant_config.json".into()),
        );
    }
    out.push_str("}\n");
    Ok(out)
}

/// The largest count accepted from a config (the schema's widest model field, `vocab`).
const MAX_CONFIG_INT: u64 = 1 << 26;

/// True for a `.dist` identifier: `[A-Za-z_][A-Za-z0-9_]*`.
fn is_identifier(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Text from a config or a file name made safe for one `//` comment line: control
/// characters (a newline would end the comment and start a line of `.dist`, such as
/// `import "/dev/stdin"`) become spaces, and it is cut at 200 characters.
fn comment_text(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(200)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().count() > 200 {
        out.push('…');
    }
    out
}

/// Checks imported `.dist` text and returns its model (the importer's output always
/// checks clean; `None` would be a bug in the importer).
pub fn model_from_text(text: &str) -> Option<crate::program::Model> {
    let world = crate::source::MemoryWorld::new().with("imported.dist", text);
    let checked = crate::driver::check_file(&world, "imported.dist").ok()?;
    if checked.has_errors() {
        return None;
    }
    let model = checked
        .program
        .user_defs_of(crate::schema::Kind::Model)
        .next()
        .and_then(|d| match &d.body {
            crate::program::Body::Model(m) => Some(m.clone()),
            _ => None,
        });
    model
}
