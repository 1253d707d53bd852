//! `dic import-hf`: a Hugging Face `config.json` (and `hf_quant_config.json` when the
//! checkpoint has one) → a `.dist` model definition.
//!
//! Pure: text in, text out. It maps what it understands exactly and refuses the rest
//! with an E0901 diagnostic that names the field — it never guesses. Handled: dense
//! and GQA models, explicit `head_dim`, expert counts under `num_local_experts`,
//! `num_experts` or `n_routed_experts`, MLA ranks, a nested `text_config`
//! (multimodal wrappers, whose encoders add `encoder_parameters`), per-layer kinds
//! (`layer_types`, `full_attention_interval`, `hybrid_override_pattern`,
//! `hybrid_layer_pattern`, `compress_ratios`, `mlp_layer_types`, `moe_layer_freq`,
//! `mlp_only_layers`) written as a `layer_pattern`, and quantization in
//! `quantization_config` or a separate `hf_quant_config.json` (FP8 block and per-tensor,
//! MXFP4, AWQ, GPTQ, ModelOpt FP8/NVFP4/mixed precision, compressed-tensors), with the
//! excluded modules mapped per component. Python's `Infinity`/`NaN` are read. Every
//! line of the output says which config field it came from.

use crate::architecture;
use crate::diagnostics::{Code, Diagnostic};
use crate::layers::{Ffn, Mixer, WrittenLayer};
use crate::program::{Attention, LinearAttention, Mamba2, Model};
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

/// Python's `json` writes `Infinity`, `-Infinity` and `NaN`, which strict JSON refuses.
/// Outside strings they become `null` (dic reads none of the fields that carry them, such
/// as Mamba's `time_step_limit`).
fn lenient_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else {
            let token = ["-Infinity", "Infinity", "NaN"]
                .into_iter()
                .find(|t| rest.starts_with(t));
            if let Some(t) = token {
                out.push_str("null");
                rest = &rest[t.len()..];
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
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

/// What a checkpoint's quantization config says, per component.
#[derive(Debug, Default)]
struct Quant {
    weights: Option<String>,
    attention: Option<String>,
    experts: Option<String>,
    mlp: Option<String>,
    unquantized_layers: u64,
    unquantized_mixer_layers: Vec<u64>,
    group: Option<u64>,
    kv_cache: Option<&'static str>,
    source: String,
}

/// The format of a compressed-tensors / ModelOpt `config_groups` weight scheme.
fn scheme_format(w: &Value) -> Option<(String, Option<u64>)> {
    let bits = w.get("num_bits").and_then(Value::as_u64)?;
    let kind = w.get("type").and_then(Value::as_str).unwrap_or("int");
    let group = w.get("group_size").and_then(Value::as_u64);
    let f = match (kind, bits) {
        ("float", 4) if group == Some(32) => "mxfp4",
        ("float", 4) => "nvfp4",
        ("float", 8) => "fp8",
        ("int", 8) => "int8",
        ("int", 4) => "int4",
        _ => return None,
    };
    Some((f.to_string(), if f == "int4" { group } else { None }))
}

/// The layer a module path names (`model.layers.12.self_attn*` → 12).
fn module_layer(pattern: &str) -> Option<u64> {
    let at = pattern.find("layers.")? + "layers.".len();
    let digits: String = pattern[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Reads an exclusion list (`ignore`, `exclude_modules`, `modules_to_not_convert`) into
/// per-component exclusions: whole leading layers, attention everywhere or in some
/// layers, shared experts / dense MLPs, routed experts.
fn read_exclusions(list: &[Value], layers: u64, q: &mut Quant, dtype: &str) {
    let mut whole: std::collections::BTreeSet<u64> = Default::default();
    let mut mixer: std::collections::BTreeSet<u64> = Default::default();
    let (mut mixer_all, mut mlp_all, mut experts_all) = (false, false, false);
    let mut mlp_layers: std::collections::BTreeSet<u64> = Default::default();
    for p in list.iter().filter_map(Value::as_str) {
        let p = p.trim_start_matches("re:");
        let layer = module_layer(p);
        let after = match layer {
            Some(l) => {
                let tag = format!("layers.{l}");
                p.split_once(&tag).map(|(_, r)| r).unwrap_or("")
            }
            None => p,
        };
        let is_mixer = [
            "self_attn",
            ".attn",
            "linear_attn",
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "kv_a_proj",
            "kv_b_proj",
            "q_a_proj",
            "q_b_proj",
            "mixer.in_proj",
            "mixer.out_proj",
        ]
        .iter()
        .any(|k| after.contains(k));
        let is_shared = after.contains("shared_expert");
        let is_experts = !is_shared && after.contains("experts");
        let is_dense_mlp = !is_shared
            && !is_experts
            && (after.contains(".mlp") || after.contains(".ffn"))
            && !after.contains("gate");
        match layer {
            // `layers.3*` / `layers.3.*` / `layers.3`: the whole layer.
            Some(l) if matches!(after, "" | "*" | ".*") => {
                whole.insert(l);
            }
            Some(l) if is_mixer => {
                mixer.insert(l);
            }
            Some(l) if is_shared || is_dense_mlp => {
                mlp_layers.insert(l);
            }
            None if is_mixer => mixer_all = true,
            None if is_shared || is_dense_mlp => mlp_all = true,
            None if is_experts => experts_all = true,
            _ => {}
        }
    }
    // Leading whole layers; whole layers further in count for their mixer.
    let mut lead = 0;
    while whole.contains(&lead) {
        lead += 1;
    }
    q.unquantized_layers = lead;
    for l in whole.iter().filter(|l| **l >= lead) {
        mixer.insert(*l);
        mlp_layers.insert(*l);
    }
    let quantized_span = layers.saturating_sub(lead);
    let mixer_rest = mixer.iter().filter(|l| **l >= lead).count() as u64;
    if mixer_all || (quantized_span > 0 && mixer_rest >= quantized_span) {
        q.attention = Some(dtype.to_string());
    } else {
        q.unquantized_mixer_layers = mixer.into_iter().filter(|l| *l >= lead).collect();
    }
    let mlp_rest = mlp_layers.iter().filter(|l| **l >= lead).count() as u64;
    if mlp_all || (quantized_span > 0 && mlp_rest >= quantized_span) {
        q.mlp = Some(dtype.to_string());
    }
    if experts_all {
        q.experts = Some(dtype.to_string());
    }
}

/// Maps `quantization_config` (in config.json) and/or `hf_quant_config.json`.
fn read_quantization(
    cfg: &Map<String, Value>,
    quant_config: Option<&Value>,
    layers: u64,
    dtype: &str,
    source_name: &str,
) -> Result<Quant, Box<Diagnostic>> {
    let mut q = Quant::default();
    let in_config = cfg.get("quantization_config").and_then(Value::as_object);
    // hf_quant_config.json (ModelOpt) is the more specific description when present.
    let modelopt = quant_config.map(|v| v.get("quantization").unwrap_or(v));
    let qc: Option<&Map<String, Value>> = match (modelopt.and_then(Value::as_object), in_config) {
        (Some(m), _) => Some(m),
        (None, Some(c)) => Some(c),
        (None, None) => None,
    };
    let Some(qc) = qc else {
        return Ok(q);
    };
    q.source = if modelopt.is_some() {
        "hf_quant_config.json".into()
    } else {
        "quantization_config".into()
    };
    let method = in_config
        .and_then(|c| c.get("quant_method"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let algo = qc.get("quant_algo").and_then(Value::as_str);
    let producer_modelopt = qc
        .get("producer")
        .or(in_config.and_then(|c| c.get("producer")))
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        == Some("modelopt");
    let unsupported = |what: String| {
        fail(
            format!("cannot map {what} in `{source_name}`"),
            "set `weights` by hand (fp8, int8, int4, awq, gptq, nvfp4, mxfp4), with `attention_weights`/`expert_weights`/`mlp_weights` for mixed precision",
        )
    };
    if modelopt.is_some() || method == "modelopt" || (algo.is_some() && producer_modelopt) {
        // The format excluded modules keep: the checkpoint's own (FP8 blocks when a
        // mixed-precision ModelOpt checkpoint starts from one), else `dtype`.
        let mut kept = dtype;
        match algo {
            Some("FP8") | Some("FP8_PER_CHANNEL_PER_TOKEN") | Some("FP8_PB_WO") => {
                q.weights = Some("fp8".into())
            }
            Some("NVFP4") => q.weights = Some("nvfp4".into()),
            Some("W4A16_AWQ") | Some("W4A8_AWQ") => q.weights = Some("awq".into()),
            Some("MIXED_PRECISION") => {
                // Per-layer algorithms: the experts' decide (what ModelOpt quantizes);
                // everything not listed stays in the checkpoint dtype.
                let layers_map = qc.get("quantized_layers").and_then(Value::as_object);
                let algos: std::collections::BTreeSet<&str> = layers_map
                    .into_iter()
                    .flat_map(|m| m.values())
                    .filter_map(|v| v.get("quant_algo").and_then(Value::as_str))
                    .collect();
                let only_experts =
                    layers_map.is_some_and(|m| m.keys().all(|k| k.contains("experts")));
                let fmt = match algos.iter().next().copied() {
                    Some("NVFP4") if algos.len() == 1 => "nvfp4",
                    Some("FP8") if algos.len() == 1 => "fp8",
                    _ => {
                        return Err(unsupported(format!(
                            "the mixed-precision algorithms {algos:?}"
                        )))
                    }
                };
                // What the list leaves out keeps the base checkpoint's format: FP8 blocks
                // when config.json says `quant_method: fp8` (DeepSeek V4), else `dtype`.
                let base = if method == "fp8" { "fp8" } else { dtype };
                kept = base;
                if only_experts {
                    q.weights = Some(base.into());
                    q.experts = Some(fmt.into());
                } else {
                    q.weights = Some(fmt.into());
                }
            }
            Some(other) => return Err(unsupported(format!("ModelOpt quant_algo `{other}`"))),
            None => return Err(unsupported("a ModelOpt config without quant_algo".into())),
        }
        if let Some(g) = qc.get("group_size").and_then(Value::as_u64) {
            if q.weights.as_deref() == Some("awq") {
                q.group = Some(g);
            }
        }
        let kv = qc
            .get("kv_cache_quant_algo")
            .and_then(Value::as_str)
            .or_else(|| qc.get("kv_cache_scheme").and_then(Value::as_str))
            .or_else(|| {
                qc.get("kv_cache_scheme")
                    .and_then(|k| k.get("num_bits"))
                    .and_then(Value::as_u64)
                    .filter(|b| *b == 8)
                    .map(|_| "FP8")
            });
        match kv {
            Some("FP8") => q.kv_cache = Some("fp8"),
            None => {}
            Some(other) => {
                return Err(fail(
                    format!("cannot map kv_cache_quant_algo `{other}` in `{source_name}`"),
                    "set `kv_cache` by hand",
                ))
            }
        }
        let exclusions = qc
            .get("exclude_modules")
            .or(qc.get("ignore"))
            .or(in_config.and_then(|c| c.get("ignore")))
            .and_then(Value::as_array);
        if let Some(list) = exclusions {
            read_exclusions(list, layers, &mut q, kept);
        }
        return Ok(q);
    }
    match method {
        "fp8" => {
            q.weights = Some("fp8".into());
            // DeepSeek V4 ships its experts in FP4 with power-of-two (ue8m0) scales.
            if cfg.get("expert_dtype").and_then(Value::as_str) == Some("fp4") {
                q.experts = Some("mxfp4".into());
            }
        }
        "mxfp4" => q.weights = Some("mxfp4".into()),
        "modelopt_fp4" | "nvfp4" => q.weights = Some("nvfp4".into()),
        "awq" | "gptq" | "awq_marlin" | "gptq_marlin" => {
            let bits = qc.get("bits").and_then(Value::as_u64).unwrap_or(4);
            if bits != 4 {
                return Err(unsupported(format!("{bits}-bit {method}")));
            }
            q.weights = Some(method.trim_end_matches("_marlin").into());
            q.group = qc
                .get("group_size")
                .and_then(Value::as_i64)
                .and_then(|g| u64::try_from(g).ok());
        }
        "compressed-tensors" => {
            let groups = qc.get("config_groups").and_then(Value::as_object);
            let formats: Vec<(String, Option<u64>)> = groups
                .into_iter()
                .flat_map(|g| g.values())
                .filter_map(|g| g.get("weights"))
                .map(|w| {
                    scheme_format(w).ok_or_else(|| {
                        unsupported(format!("the compressed-tensors weight scheme {w}"))
                    })
                })
                .collect::<Result<_, _>>()?;
            let Some((fmt, group)) = formats.first().cloned() else {
                return Err(unsupported(
                    "compressed-tensors without config_groups".into(),
                ));
            };
            if formats.iter().any(|f| f.0 != fmt) {
                return Err(unsupported(format!(
                    "compressed-tensors groups in several formats ({formats:?})"
                )));
            }
            q.weights = Some(fmt);
            q.group = group;
            if qc
                .get("kv_cache_scheme")
                .and_then(|k| k.get("num_bits"))
                .and_then(Value::as_u64)
                == Some(8)
            {
                q.kv_cache = Some("fp8");
            }
        }
        other => {
            return Err(unsupported(format!("quantization method `{other}`")));
        }
    }
    let exclusions = qc
        .get("ignore")
        .or(qc.get("modules_to_not_convert"))
        .and_then(Value::as_array);
    if let Some(list) = exclusions {
        read_exclusions(list, layers, &mut q, dtype);
    }
    Ok(q)
}

/// Parameters of a vision/audio encoder config: a ViT's blocks (attention 4h², MLP
/// 2·h·intermediate) and the projector into the language model's width. [estimate: patch
/// embeddings and norms are left out]
fn encoder_parameters(top: &Map<String, Value>, text_hidden: u64) -> f64 {
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

/// Every `every`-th layer full attention, the others `other` (an interval in the config).
fn every_nth_full(layers: &mut [WrittenLayer], every: u64, other: Mixer) {
    for (i, l) in layers.iter_mut().enumerate() {
        l.mixer = if (i as u64 + 1).is_multiple_of(every) {
            Mixer::Full
        } else {
            other
        };
    }
}

/// Layers from a per-layer list of integers: `flag` marks `marked`, anything else `other`.
fn set_by_flag(
    layers: &mut [WrittenLayer],
    list: &[Value],
    flag: u64,
    marked: Mixer,
    other: Mixer,
) {
    for (l, v) in layers.iter_mut().zip(list) {
        l.mixer = if v.as_u64() == Some(flag) {
            marked
        } else {
            other
        };
    }
}

/// The `.dist` text of the model, or the reason it cannot be mapped.
/// Config keys that count a checkpoint's multi-token-prediction layers (DeepSeek, GLM and
/// MiMo; Qwen3.5/Qwen3-Next; MiniMax).
const MTP_KEYS: [&str; 3] = [
    "num_nextn_predict_layers",
    "mtp_num_hidden_layers",
    "num_mtp_modules",
];

pub fn import(req: &ImportRequest<'_>) -> Result<String, Box<Diagnostic>> {
    if !is_identifier(req.name) {
        return Err(fail(
            format!("`{}` cannot name a model", comment_text(req.name)),
            "a name is letters, digits and `_`, starting with a letter or `_` (e.g. `--name my_model`)",
        ));
    }
    let root: Value = serde_json::from_str(&lenient_json(req.config)).map_err(|e| {
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
    let quant_value: Option<Value> = match req.quant_config {
        Some(text) => Some(serde_json::from_str(&lenient_json(text)).map_err(|e| {
            fail(
                format!("hf_quant_config.json is not valid JSON: {e}"),
                "pass the checkpoint's hf_quant_config.json",
            )
        })?),
        None => None,
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
    if cfg.contains_key("block_configs") {
        return Err(fail(
            format!(
                "cannot map `{}`: it is a NAS model with per-layer `block_configs` (DeciLM / Nemotron Super)",
                req.source_name
            ),
            "per-layer FFN sizes are not expressible yet; write the model by hand with the layers' average FFN size",
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
    if layers == 0 || heads == 0 || hidden == 0 {
        return Err(fail(
            format!("cannot map `{}`: a size is 0", req.source_name),
            "check the config",
        ));
    }
    let mut out: Vec<Line> = Vec::new();
    // Gemma 4: the full-attention layers have their own KV heads and head size.
    let global_kv = get_u("num_global_key_value_heads");
    let global_dim = get_u("global_head_dim");
    let plain_kv = get_u("num_key_value_heads").unwrap_or(heads);
    let kv_heads = global_kv.unwrap_or(plain_kv);
    let plain_dim = match get_u("head_dim") {
        Some(d) => d,
        None if hidden % heads == 0 => hidden / heads,
        None => {
            return Err(fail(
                format!("cannot map `{}`: no `head_dim` and hidden_size {hidden} is not a multiple of {heads} heads", req.source_name),
                "add `head_dim` by hand from the model's code",
            ))
        }
    };
    let head_dim = global_dim.unwrap_or(plain_dim);
    let (experts, experts_src) = ["num_local_experts", "num_experts", "n_routed_experts"]
        .into_iter()
        .find_map(|k| get_u(k).map(|n| (n, k)))
        .unwrap_or((0, ""));
    let is_llama4 = arch.starts_with("Llama4");
    let (intermediate, moe_intermediate, inter_src) = if is_llama4 {
        (
            get_u("intermediate_size_mlp").unwrap_or(need("intermediate_size")?),
            need("intermediate_size")?,
            "intermediate_size_mlp",
        )
    } else if experts > 0 {
        let moe = match get_u("moe_intermediate_size") {
            Some(m) => m,
            None => need("intermediate_size")?,
        };
        match get_u("intermediate_size") {
            Some(i) => (i, moe, "intermediate_size"),
            None => (moe, moe, "moe_intermediate_size (no dense layers)"),
        }
    } else {
        (need("intermediate_size")?, 0, "intermediate_size")
    };
    let experts_per_token = if experts > 0 {
        need("num_experts_per_tok")?
    } else {
        0
    };
    let shared_size = get_u("shared_expert_intermediate_size")
        .or(get_u("moe_shared_expert_intermediate_size"))
        .filter(|s| *s > 0);
    let shared_experts = if is_llama4 && experts > 0 {
        1
    } else {
        get_u("n_shared_experts").unwrap_or(if shared_size.is_some() && experts > 0 {
            1
        } else {
            0
        })
    };
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
    let window = cfg
        .get("sliding_window")
        .and_then(Value::as_u64)
        .or(get_u("sliding_window_size"));
    let dtype = match cfg
        .get("torch_dtype")
        .or(cfg.get("dtype"))
        .or(top.get("torch_dtype"))
        .or(top.get("dtype"))
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

    // Per-layer mixers and FFNs, from whichever per-layer list the config has.
    let mut written: Vec<WrittenLayer> = (0..layers)
        .map(|_| WrittenLayer {
            mixer: Mixer::Full,
            ffn: None,
        })
        .collect();
    let mut pattern_src: Vec<&str> = Vec::new();
    let list_len_ok = |n: usize, key: &str| -> Result<(), Box<Diagnostic>> {
        if (n as u64) < layers {
            Err(fail(
                format!(
                    "cannot map `{}`: `{key}` lists {n} layers, the model has {layers}",
                    req.source_name
                ),
                "check the config",
            ))
        } else {
            Ok(())
        }
    };
    if let Some(types) = cfg.get("layer_types").and_then(Value::as_array) {
        list_len_ok(types.len(), "layer_types")?;
        for (l, t) in written.iter_mut().zip(types) {
            l.mixer = match t.as_str() {
                Some("full_attention") | Some("attention") => Mixer::Full,
                Some("sliding_attention") | Some("chunked_attention") => Mixer::Sliding,
                Some("linear_attention") => Mixer::Linear,
                Some("mamba") => Mixer::Mamba,
                other => {
                    return Err(fail(
                        format!(
                            "cannot map layer type {} in `{}`",
                            other.map(comment_text).unwrap_or_else(|| t.to_string()),
                            req.source_name
                        ),
                        "dic knows full_attention, sliding_attention, linear_attention and mamba layers",
                    ))
                }
            };
        }
        pattern_src.push("layer_types");
    } else if let Some(types) = cfg.get("attn_type_list").and_then(Value::as_array) {
        // MiniMax-01/M1: 0 = lightning (linear) attention, 1 = softmax attention.
        list_len_ok(types.len(), "attn_type_list")?;
        set_by_flag(&mut written, types, 0, Mixer::Linear, Mixer::Full);
        pattern_src.push("attn_type_list");
    } else if let Some(every) =
        get_u("sliding_window_pattern").filter(|n| *n > 1 && window.is_some())
    {
        // Gemma 2/3: every n-th layer global, the others windowed.
        every_nth_full(&mut written, every, Mixer::Sliding);
        pattern_src.push("sliding_window_pattern");
    } else if let Some(every) = get_u("full_attention_interval").filter(|n| *n > 0) {
        // Qwen3-Next / Qwen3.5: every n-th layer full, the others Gated DeltaNet.
        every_nth_full(&mut written, every, Mixer::Linear);
        pattern_src.push("full_attention_interval");
    } else if let Some(p) = cfg.get("hybrid_override_pattern").and_then(Value::as_str) {
        list_len_ok(p.chars().count(), "hybrid_override_pattern")?;
        for (l, c) in written.iter_mut().zip(p.chars()) {
            *l = match c {
                'M' => WrittenLayer {
                    mixer: Mixer::Mamba,
                    ffn: Some(Ffn::None),
                },
                '*' => WrittenLayer {
                    mixer: Mixer::Full,
                    ffn: Some(Ffn::None),
                },
                'E' => WrittenLayer {
                    mixer: Mixer::None,
                    ffn: Some(Ffn::Moe),
                },
                '-' => WrittenLayer {
                    mixer: Mixer::None,
                    ffn: Some(Ffn::Dense),
                },
                other => {
                    return Err(fail(
                        format!(
                            "cannot map `{}`: hybrid_override_pattern has `{}`",
                            req.source_name,
                            comment_text(&other.to_string())
                        ),
                        "dic knows M (Mamba), * (attention), E (MoE) and - (MLP) blocks",
                    ))
                }
            };
        }
        pattern_src.push("hybrid_override_pattern");
    } else if let Some(p) = cfg.get("hybrid_layer_pattern").and_then(Value::as_array) {
        // MiMo: 1 = sliding-window layer, 0 = global.
        list_len_ok(p.len(), "hybrid_layer_pattern")?;
        set_by_flag(&mut written, p, 1, Mixer::Sliding, Mixer::Full);
        pattern_src.push("hybrid_layer_pattern");
    } else if let Some(ratios) = cfg.get("compress_ratios").and_then(Value::as_array) {
        // DeepSeek V4: 0 = sliding window only, N = N:1 compressed attention (plus window).
        list_len_ok(ratios.len(), "compress_ratios")?;
        for (l, r) in written.iter_mut().zip(ratios) {
            l.mixer = match r.as_u64() {
                Some(0) => Mixer::Sliding,
                Some(n) if (2..=4096).contains(&n) => Mixer::Compressed(n as u32),
                _ => {
                    return Err(fail(
                        format!("cannot map `{}`: compress_ratios has {r}", req.source_name),
                        "ratios are 0 or 2 to 4096",
                    ))
                }
            };
        }
        pattern_src.push("compress_ratios");
    } else if let (Some(_), true) = (
        window,
        cfg.get("use_sliding_window").and_then(Value::as_bool) != Some(false)
            && cfg.get("sliding_window").is_some_and(|w| !w.is_null()),
    ) {
        for l in written.iter_mut() {
            l.mixer = Mixer::Sliding;
        }
        pattern_src.push("sliding_window on every layer");
    }
    // Per-layer FFN lists.
    let ffn_list: Option<(Vec<Ffn>, &str)> =
        if let Some(types) = cfg.get("mlp_layer_types").and_then(Value::as_array) {
            list_len_ok(types.len(), "mlp_layer_types")?;
            Some((
                types
                    .iter()
                    .map(|t| {
                        if t.as_str() == Some("sparse") {
                            Ffn::Moe
                        } else {
                            Ffn::Dense
                        }
                    })
                    .collect(),
                "mlp_layer_types",
            ))
        } else if let Some(freq) = cfg.get("moe_layer_freq").and_then(Value::as_array) {
            list_len_ok(freq.len(), "moe_layer_freq")?;
            Some((
                freq.iter()
                    .map(|v| {
                        if v.as_u64() == Some(1) {
                            Ffn::Moe
                        } else {
                            Ffn::Dense
                        }
                    })
                    .collect(),
                "moe_layer_freq",
            ))
        } else if let Some(only) = cfg
            .get("mlp_only_layers")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
        {
            let dense: Vec<u64> = only.iter().filter_map(Value::as_u64).collect();
            Some((
                (0..layers)
                    .map(|l| {
                        if dense.contains(&l) || experts == 0 {
                            Ffn::Dense
                        } else {
                            Ffn::Moe
                        }
                    })
                    .collect(),
                "mlp_only_layers",
            ))
        } else {
            None
        };
    // A base model for the FFN rule the scalar fields give.
    let mut probe = Model {
        hf: None,
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
        sliding_layers: 0,
        tied_embeddings: cfg
            .get("tie_word_embeddings")
            .or(top.get("tie_word_embeddings"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        dtype: dtype.into(),
        weights: dtype.into(),
        kv_cache: "auto".into(),
        prequantized: false,
        detail: Box::default(),
    };
    if let Some((ffns, src)) = &ffn_list {
        let rule_agrees = ffns
            .iter()
            .enumerate()
            .all(|(l, f)| *f == probe.default_ffn(l as u64));
        if !rule_agrees {
            for (l, f) in written.iter_mut().zip(ffns) {
                if l.ffn.is_none() {
                    l.ffn = Some(*f);
                }
            }
            pattern_src.push(src);
        }
    }
    let uniform = written.iter().enumerate().all(|(l, w)| {
        w.mixer == Mixer::Full && w.ffn.is_none_or(|f| f == probe.default_ffn(l as u64))
    });
    let sliding_layers = written.iter().filter(|w| w.mixer == Mixer::Sliding).count() as u64;
    probe.sliding_layers = sliding_layers;
    if !uniform {
        probe.set_layers(&written);
    }
    let uses = |k: Mixer| written.iter().any(|w| w.mixer == k);
    let uses_compressed = written
        .iter()
        .any(|w| matches!(w.mixer, Mixer::Compressed(_)));

    // Mixer dimensions.
    let d = &mut probe.detail;
    if uses(Mixer::Sliding) {
        if global_kv.is_some() && plain_kv != kv_heads {
            d.sliding_kv_heads = plain_kv;
        }
        if let Some(s) = get_u("swa_num_key_value_heads").filter(|s| *s != kv_heads) {
            d.sliding_kv_heads = s;
        }
        if global_dim.is_some() && plain_dim != head_dim {
            d.sliding_head_dim = plain_dim;
        }
        if let Some(s) = get_u("swa_head_dim").filter(|s| *s != head_dim) {
            d.sliding_head_dim = s;
        }
    }
    if uses(Mixer::Linear) && !cfg.contains_key("linear_num_value_heads") {
        // Lightning attention (MiniMax): one heads × head_dim × head_dim state, no conv
        // (`linear_attention_state_shape`).
        d.linear = Some(LinearAttention {
            key_heads: heads,
            value_heads: heads,
            key_dim: plain_dim,
            value_dim: plain_dim,
            conv_kernel: 1,
        });
    } else if uses(Mixer::Linear) {
        d.linear = Some(LinearAttention {
            key_heads: need("linear_num_key_heads")?,
            value_heads: need("linear_num_value_heads")?,
            key_dim: need("linear_key_head_dim")?,
            value_dim: need("linear_value_head_dim")?,
            conv_kernel: get_u("linear_conv_kernel_dim").unwrap_or(4),
        });
    }
    if uses(Mixer::Mamba) {
        d.mamba = Some(Mamba2 {
            heads: need("mamba_num_heads")?,
            head_dim: need("mamba_head_dim")?,
            state: need("ssm_state_size")?,
            groups: get_u("n_groups").unwrap_or(1),
            conv_kernel: get_u("conv_kernel").unwrap_or(4),
        });
    }
    // Recurrent states kept in fp32 by the model's own config (Nemotron-H
    // `mamba_ssm_cache_dtype`, Qwen3.5 `mamba_ssm_dtype`); the launch pins the same with
    // `--mamba-ssm-cache-dtype float32`.
    if (uses(Mixer::Mamba) || uses(Mixer::Linear))
        && ["mamba_ssm_cache_dtype", "mamba_ssm_dtype"]
            .iter()
            .any(|k| cfg.get(*k).and_then(Value::as_str) == Some("float32"))
    {
        d.state_dtype = Some("fp32".into());
    }
    if (kv_lora_rank > 0 || uses_compressed) && cfg.contains_key("index_head_dim") {
        d.indexer_head_dim = need("index_head_dim")?;
        d.indexer_heads = need("index_n_heads")?;
    }
    if experts > 0 {
        if let Some(s) = shared_size.filter(|s| *s != moe_intermediate) {
            d.shared_expert_intermediate = s;
        }
    }
    let act = cfg
        .get("mlp_hidden_act")
        .or(cfg.get("hidden_act"))
        .and_then(Value::as_str);
    d.ungated_mlp = act == Some("relu2");
    d.encoder_parameters = encoder_parameters(&top, hidden);

    // Quantization.
    let q = read_quantization(&cfg, quant_value.as_ref(), layers, dtype, req.source_name)?;
    if let Some(w) = &q.weights {
        probe.weights = w.clone();
        probe.prequantized = w != dtype;
    }
    let d = &mut probe.detail;
    let differs = |f: &Option<String>, base: &str| f.clone().filter(|f| f != base);
    d.attention_weights = differs(&q.attention, &probe.weights);
    // MXFP4 checkpoints leave attention unquantized by default (`Model::format_of`).
    if probe.weights == "mxfp4" && d.attention_weights.as_deref() == Some(dtype) {
        d.attention_weights = None;
    }
    d.expert_weights = differs(&q.experts, &probe.weights);
    d.mlp_weights = differs(&q.mlp, &probe.weights);
    if probe.weights == "mxfp4" && d.mlp_weights.as_deref() == Some(dtype) {
        d.mlp_weights = None;
    }
    d.unquantized_layers = q.unquantized_layers;
    d.unquantized_mixer_layers = q.unquantized_mixer_layers.clone();
    d.quant_group = q.group.unwrap_or(0);
    let mtp = MTP_KEYS.into_iter().find_map(|k| get_u(k).map(|n| (n, k)));
    d.mtp_layers = mtp.map(|m| m.0).unwrap_or(0);
    if let Some(kv) = q.kv_cache {
        probe.kv_cache = kv.into();
    }
    let m = probe;
    let params = architecture::parameters(&m);

    // The text, each number with where it came from.
    let mut header = format!(
        "// Imported by `dic import-hf` from {}.\n// architecture: {}{}\n",
        comment_text(req.source_name),
        comment_text(&arch),
        if multimodal.is_some() {
            " (language model from text_config)"
        } else {
            ""
        }
    );
    if let Some(repo) = req.repo {
        out.push(line("hf", quote(repo), ""));
    }
    out.push(line(
        "parameters",
        format!("{:.2}B", params.total / 1e9),
        "computed from the architecture",
    ));
    out.push(line("layers", layers, "num_hidden_layers"));
    out.push(line("hidden", hidden, "hidden_size"));
    out.push(line("heads", heads, "num_attention_heads"));
    out.push(line(
        "kv_heads",
        kv_heads,
        if global_kv.is_some() {
            "num_global_key_value_heads (full-attention layers)"
        } else {
            "num_key_value_heads"
        },
    ));
    if attention != Attention::Mla {
        // MLA has no per-head KV dimension; its ranks below describe attention.
        out.push(line(
            "head_dim",
            head_dim,
            if global_dim.is_some() {
                "global_head_dim (full-attention layers)"
            } else if cfg.contains_key("head_dim") {
                "head_dim"
            } else {
                "hidden_size / num_attention_heads"
            },
        ));
        if m.v_head_dim > 0 && m.v_head_dim != head_dim {
            out.push(line("v_head_dim", m.v_head_dim, "v_head_dim"));
        }
    }
    out.push(line("intermediate", intermediate, inter_src));
    out.push(line("vocab", vocab, "vocab_size"));
    out.push(line(
        "max_context",
        format!("{max_context} tokens"),
        "max_position_embeddings",
    ));
    if attention == Attention::Mla {
        out.push(line("attention", "mla", "kv_lora_rank is set"));
        out.push(line("kv_lora_rank", kv_lora_rank, "kv_lora_rank"));
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
    } else if uses_compressed && m.q_lora_rank > 0 {
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
    if experts > 0 {
        out.push(line("experts", experts, experts_src));
        out.push(line(
            "experts_per_token",
            experts_per_token,
            "num_experts_per_tok",
        ));
        if shared_experts > 0 {
            out.push(line(
                "shared_experts",
                shared_experts,
                if is_llama4 {
                    "Llama 4's shared expert"
                } else {
                    "n_shared_experts"
                },
            ));
        }
        out.push(line(
            "moe_intermediate",
            moe_intermediate,
            if is_llama4 {
                "intermediate_size"
            } else {
                "moe_intermediate_size"
            },
        ));
        if d.shared_expert_intermediate > 0 {
            out.push(line(
                "shared_expert_intermediate",
                d.shared_expert_intermediate,
                "shared_expert_intermediate_size",
            ));
        }
        if dense_layers > 0 && uniform {
            out.push(line("dense_layers", dense_layers, "first_k_dense_replace"));
        }
        if moe_layer_step > 1 && uniform {
            out.push(line(
                "moe_layer_step",
                moe_layer_step,
                "interleave_moe_layer_step / decoder_sparse_step",
            ));
        }
    }
    if d.ungated_mlp {
        out.push(line(
            "ungated_mlp",
            "true",
            "ReLU² MLPs (mlp_hidden_act relu2): up and down projections only",
        ));
    }
    if !uniform {
        let pattern_text = crate::layers::format(&written);
        // Layers without a written FFN follow dense_layers / moe_layer_step.
        if dense_layers > 0 && written.iter().any(|w| w.ffn.is_none()) {
            out.push(line("dense_layers", dense_layers, "first_k_dense_replace"));
        }
        if moe_layer_step > 1 && written.iter().any(|w| w.ffn.is_none()) {
            out.push(line(
                "moe_layer_step",
                moe_layer_step,
                "interleave_moe_layer_step / decoder_sparse_step",
            ));
        }
        out.push(line(
            "layer_pattern",
            quote(&pattern_text),
            pattern_src.join(", "),
        ));
    }
    if let Some(w) = window.filter(|_| sliding_layers > 0 || uses_compressed) {
        out.push(line(
            "sliding_window",
            format!("{w} tokens"),
            "sliding_window",
        ));
    }
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
    if m.tied_embeddings {
        out.push(line("tied_embeddings", "true", "tie_word_embeddings"));
    }
    if d.encoder_parameters > 0.0 {
        out.push(line(
            "encoder_parameters",
            format!("{:.2}B", d.encoder_parameters / 1e9),
            "estimated from vision_config / audio_config",
        ));
    }
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
    if let Some((n, key)) = mtp.filter(|m| m.0 > 0) {
        out.push(line("mtp_layers", n, key));
    }
    if let Some(kv) = q.kv_cache {
        out.push(line("kv_cache", kv, qsrc("KV-cache quantization")));
    }
    header.push_str(&format!("model {} {{\n", req.name));
    for l in out {
        header.push_str(&format!("  {} = {}", l.key, l.value));
        if !l.source.is_empty() {
            header.push_str(&format!(" // {}", comment_text(&l.source)));
        }
        header.push('\n');
    }
    header.push_str("}\n");
    Ok(header)
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

/// The `hf_quant_config.json` that goes with a checkpoint's config file named
/// `file_name`: `X_hf_quant_config.json` beside `X_config.json` (the flattened copies in
/// ../shared/models/hf), else `hf_quant_config.json` in the same folder (a checkpoint's
/// own layout).
pub fn quant_config_file_name(file_name: &str) -> String {
    match file_name.strip_suffix("_config.json") {
        Some(stem) => format!("{stem}_hf_quant_config.json"),
        None => "hf_quant_config.json".into(),
    }
}

/// The definition name and model of a checkpoint's `config.json` named `file_name`
/// (`ORG--NAME_config.json`) with its `hf_quant_config.json` when it has one, as
/// `dic import-hf` imports it; the importer's diagnostic when it refuses the config.
pub fn model_from_config(
    file_name: &str,
    config: &str,
    quant_config: Option<&str>,
) -> Result<(String, crate::program::Model), Box<Diagnostic>> {
    let (name, repo) = names_from_file(file_name);
    let text = import(&ImportRequest {
        config,
        quant_config,
        name: &name,
        repo: repo.as_deref(),
        source_name: file_name,
    })?;
    // The importer's output always checks clean; failing here is a bug in it.
    let model = model_from_text(&text).ok_or_else(|| {
        fail(
            format!("the definition imported from `{file_name}` does not check"),
            "a bug in dic's importer: `dic import-hf` on the same file shows its output",
        )
    })?;
    Ok((name, model))
}

/// The checkpoint `hf_id` from a folder of flattened configs (`ORG--NAME_config.json` and,
/// where the checkpoint has one, `ORG--NAME_hf_quant_config.json`, as ../shared/models/hf
/// holds them), imported as `dic import-hf` imports it. `read` returns a file's text by
/// name (the caller does the IO); `None` when the config is absent or the importer refuses
/// it.
pub fn model_from_flat_configs(
    hf_id: &str,
    read: &dyn Fn(&str) -> Option<String>,
) -> Option<crate::program::Model> {
    let file = format!("{}_config.json", hf_id.replace('/', "--"));
    let config = read(&file)?;
    let quant = read(&quant_config_file_name(&file));
    model_from_config(&file, &config, quant.as_deref())
        .ok()
        .map(|(_, model)| model)
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
