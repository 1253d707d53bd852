//! Quantization as a checkpoint describes it: `quantization_config` in config.json or a
//! separate `hf_quant_config.json` (FP8 block and per-tensor, MXFP4, AWQ, GPTQ, ModelOpt
//! FP8/NVFP4/mixed precision, compressed-tensors) → one format per component (weights,
//! attention, experts, dense MLPs), the KV-cache format and the layers it leaves out.
//! An unknown method or algorithm is refused (E0901), never guessed.

use super::config::{in_range, whole_number};
use super::fail;
use crate::diagnostics::Diagnostic;
use crate::program::Model;
use serde_json::{Map, Value};

/// What a checkpoint's quantization config says, per component.
#[derive(Debug, Default)]
pub(super) struct Quant {
    pub weights: Option<String>,
    pub attention: Option<String>,
    pub experts: Option<String>,
    pub mlp: Option<String>,
    pub unquantized_layers: u64,
    pub unquantized_mixer_layers: Vec<u64>,
    pub group: Option<u64>,
    /// Block-FP8's `weight_block_size` (`[block_n, block_k]`); empty: none.
    pub block: Vec<u64>,
    pub kv_cache: Option<&'static str>,
    /// Which file or field said it (`hf_quant_config.json`, `quantization_config`).
    pub source: String,
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

/// Where the quantization description was found, and what the reading needs besides it.
struct QuantSource<'a> {
    /// The description read: hf_quant_config.json's, else config.json's.
    qc: &'a Map<String, Value>,
    /// config.json's `quantization_config`, when it has one.
    in_config: Option<&'a Map<String, Value>>,
    /// config.json's `quant_method` (`""` when absent).
    method: &'a str,
    layers: u64,
    dtype: &'a str,
    source_name: &'a str,
}

impl QuantSource<'_> {
    /// `group_size`: weights per scale, in `quant_group`'s range; GPTQ's -1 (one scale
    /// per output channel) is no group.
    fn group_size(&self) -> Result<Option<u64>, Box<Diagnostic>> {
        let v = self.qc.get("group_size");
        if v.and_then(Value::as_i64) == Some(-1) {
            return Ok(None);
        }
        match whole_number(v, "group_size", self.source_name)? {
            Some(g) => in_range(g, "group_size", "quant_group", self.source_name).map(Some),
            None => Ok(None),
        }
    }

    /// `weight_block_size` (`Fp8Config.from_config`): two positive whole numbers, or none.
    fn weight_block_size(&self) -> Result<Vec<u64>, Box<Diagnostic>> {
        let Some(v) = self.qc.get("weight_block_size").filter(|v| !v.is_null()) else {
            return Ok(Vec::new());
        };
        let sizes: Option<Vec<u64>> = v
            .as_array()
            .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
            .filter(|s| s.len() == 2 && s.iter().all(|n| (1..=1 << 20).contains(n)));
        sizes.ok_or_else(|| {
            fail(
                format!(
                    "`weight_block_size` in `{}` is {v}, not two positive whole numbers",
                    self.source_name
                ),
                "set `weight_block = [block_n, block_k]` by hand",
            )
        })
    }

    /// A format dic cannot map: set by hand.
    fn unsupported(&self, what: String) -> Box<Diagnostic> {
        fail(
            format!("cannot map {what} in `{}`", self.source_name),
            "set `weights` by hand (fp8, int8, int4, awq, gptq, nvfp4, mxfp4), with `attention_weights`/`expert_weights`/`mlp_weights` for mixed precision",
        )
    }
}

/// Maps `quantization_config` (in config.json) and/or `hf_quant_config.json`.
pub(super) fn read_quantization(
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
    let src = QuantSource {
        qc,
        in_config,
        method: in_config
            .and_then(|c| c.get("quant_method"))
            .and_then(Value::as_str)
            .unwrap_or(""),
        layers,
        dtype,
        source_name,
    };
    let algo = qc.get("quant_algo").and_then(Value::as_str);
    let producer_modelopt = qc
        .get("producer")
        .or(in_config.and_then(|c| c.get("producer")))
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        == Some("modelopt");
    if modelopt.is_some() || src.method == "modelopt" || (algo.is_some() && producer_modelopt) {
        read_modelopt(&src, algo, &mut q)?;
        return Ok(q);
    }
    read_method(&src, cfg, &mut q)?;
    let exclusions = qc
        .get("ignore")
        .or(qc.get("modules_to_not_convert"))
        .and_then(Value::as_array);
    if let Some(list) = exclusions {
        read_exclusions(list, layers, &mut q, dtype);
    }
    Ok(q)
}

/// A ModelOpt description (`quant_algo`, `kv_cache_quant_algo`, `exclude_modules`).
fn read_modelopt(
    src: &QuantSource,
    algo: Option<&str>,
    q: &mut Quant,
) -> Result<(), Box<Diagnostic>> {
    let qc = src.qc;
    // The format excluded modules keep: the checkpoint's own (FP8 blocks when a
    // mixed-precision ModelOpt checkpoint starts from one), else `dtype`.
    let mut kept = src.dtype;
    match algo {
        Some("FP8") | Some("FP8_PER_CHANNEL_PER_TOKEN") | Some("FP8_PB_WO") => {
            q.weights = Some("fp8".into())
        }
        Some("NVFP4") => q.weights = Some("nvfp4".into()),
        Some("W4A16_AWQ") | Some("W4A8_AWQ") => q.weights = Some("awq".into()),
        Some("MIXED_PRECISION") => kept = mixed_precision(src, q)?,
        Some(other) => return Err(src.unsupported(format!("ModelOpt quant_algo `{other}`"))),
        None => return Err(src.unsupported("a ModelOpt config without quant_algo".into())),
    }
    if q.weights.as_deref() == Some("awq") {
        if let Some(g) = src.group_size()? {
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
                format!(
                    "cannot map kv_cache_quant_algo `{other}` in `{}`",
                    src.source_name
                ),
                "set `kv_cache` by hand",
            ))
        }
    }
    let exclusions = qc
        .get("exclude_modules")
        .or(qc.get("ignore"))
        .or(src.in_config.and_then(|c| c.get("ignore")))
        .and_then(Value::as_array);
    if let Some(list) = exclusions {
        read_exclusions(list, src.layers, q, kept);
    }
    Ok(())
}

/// ModelOpt's `MIXED_PRECISION`: per-layer algorithms. The experts' decide (what ModelOpt
/// quantizes); everything not listed stays in the checkpoint's base format, which it
/// returns.
fn mixed_precision<'a>(src: &QuantSource<'a>, q: &mut Quant) -> Result<&'a str, Box<Diagnostic>> {
    let layers_map = src.qc.get("quantized_layers").and_then(Value::as_object);
    let algos: std::collections::BTreeSet<&str> = layers_map
        .into_iter()
        .flat_map(|m| m.values())
        .filter_map(|v| v.get("quant_algo").and_then(Value::as_str))
        .collect();
    let only_experts = layers_map.is_some_and(|m| m.keys().all(|k| k.contains("experts")));
    let fmt = match algos.iter().next().copied() {
        Some("NVFP4") if algos.len() == 1 => "nvfp4",
        Some("FP8") if algos.len() == 1 => "fp8",
        _ => return Err(src.unsupported(format!("the mixed-precision algorithms {algos:?}"))),
    };
    // What the list leaves out keeps the base checkpoint's format: FP8 blocks
    // when config.json says `quant_method: fp8` (DeepSeek V4), else `dtype`.
    let base = if src.method == "fp8" {
        "fp8"
    } else {
        src.dtype
    };
    if only_experts {
        q.weights = Some(base.into());
        q.experts = Some(fmt.into());
    } else {
        q.weights = Some(fmt.into());
    }
    Ok(base)
}

/// A `quant_method` description (fp8, mxfp4, nvfp4, AWQ/GPTQ, compressed-tensors).
fn read_method(
    src: &QuantSource,
    cfg: &Map<String, Value>,
    q: &mut Quant,
) -> Result<(), Box<Diagnostic>> {
    let (qc, method) = (src.qc, src.method);
    match method {
        "fp8" => {
            q.weights = Some("fp8".into());
            q.block = src.weight_block_size()?;
            // DeepSeek V4 ships its experts in FP4 with power-of-two (ue8m0) scales.
            if cfg.get("expert_dtype").and_then(Value::as_str) == Some("fp4") {
                q.experts = Some("mxfp4".into());
            }
        }
        "mxfp4" => q.weights = Some("mxfp4".into()),
        "modelopt_fp4" | "nvfp4" => q.weights = Some("nvfp4".into()),
        "awq" | "gptq" | "awq_marlin" | "gptq_marlin" => {
            let bits = whole_number(qc.get("bits"), "bits", src.source_name)?.unwrap_or(4);
            if bits != 4 {
                return Err(src.unsupported(format!("{bits}-bit {method}")));
            }
            q.weights = Some(method.trim_end_matches("_marlin").into());
            q.group = src.group_size()?;
        }
        "compressed-tensors" => compressed_tensors(src, q)?,
        other => {
            return Err(src.unsupported(format!("quantization method `{other}`")));
        }
    }
    Ok(())
}

/// compressed-tensors: one weight format across its `config_groups`, and an 8-bit
/// `kv_cache_scheme` as an FP8 cache.
fn compressed_tensors(src: &QuantSource, q: &mut Quant) -> Result<(), Box<Diagnostic>> {
    let qc = src.qc;
    let groups = qc.get("config_groups").and_then(Value::as_object);
    let formats: Vec<(String, Option<u64>)> = groups
        .into_iter()
        .flat_map(|g| g.values())
        .filter_map(|g| g.get("weights"))
        .map(|w| {
            scheme_format(w)
                .ok_or_else(|| src.unsupported(format!("the compressed-tensors weight scheme {w}")))
        })
        .collect::<Result<_, _>>()?;
    let Some((fmt, group)) = formats.first().cloned() else {
        return Err(src.unsupported("compressed-tensors without config_groups".into()));
    };
    if formats.iter().any(|f| f.0 != fmt) {
        return Err(src.unsupported(format!(
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
    Ok(())
}

/// Sets the model's formats from what the checkpoint says: the weights (a stored format
/// other than `dtype` makes it prequantized), each component's format where it differs,
/// the layers left out, the group size and the KV cache.
pub(super) fn apply(m: &mut Model, q: &Quant, dtype: &str) {
    if let Some(w) = &q.weights {
        m.weights = w.clone();
        m.prequantized = w != dtype;
    }
    let d = &mut m.detail;
    let differs = |f: &Option<String>, base: &str| f.clone().filter(|f| f != base);
    d.attention_weights = differs(&q.attention, &m.weights);
    // MXFP4 checkpoints leave attention unquantized by default (`Model::format_of`).
    if m.weights == "mxfp4" && d.attention_weights.as_deref() == Some(dtype) {
        d.attention_weights = None;
    }
    d.expert_weights = differs(&q.experts, &m.weights);
    d.mlp_weights = differs(&q.mlp, &m.weights);
    if m.weights == "mxfp4" && d.mlp_weights.as_deref() == Some(dtype) {
        d.mlp_weights = None;
    }
    d.unquantized_layers = q.unquantized_layers;
    d.unquantized_mixer_layers = q.unquantized_mixer_layers.clone();
    d.quant_group = q.group.unwrap_or(0);
    d.weight_block = q.block.clone();
    if let Some(kv) = q.kv_cache {
        m.kv_cache = kv.into();
    }
}
