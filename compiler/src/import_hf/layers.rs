//! Per-layer kinds: which mixer each layer has (full, sliding, linear, Mamba, DeepSeek
//! V4's compressed attention) and, where the config lists them, which FFN, from whichever
//! per-layer field the config has (`layer_types`, `attn_type_list`,
//! `sliding_window_pattern`, `full_attention_interval`, `hybrid_override_pattern`,
//! `hybrid_layer_pattern`, `compress_ratios`, `mlp_layer_types`, `moe_layer_freq`,
//! `mlp_only_layers`); then the dimensions the mixers in use need.

use super::config::Config;
use super::dims::Dims;
use super::{comment_text, fail};
use crate::diagnostics::Diagnostic;
use crate::layers::{Ffn, Mixer, WrittenLayer};
use crate::program::{LinearAttention, Mamba2, Model};
use serde_json::Value;

/// The per-layer kinds a config gives.
pub(super) struct LayerKinds {
    /// One per layer; `ffn: None` where the model's default FFN rule applies.
    pub written: Vec<WrittenLayer>,
    /// The config fields the kinds came from.
    pub sources: Vec<&'static str>,
    /// The layers are the default (full attention, the default FFN): no `layer_pattern`.
    pub uniform: bool,
}

impl LayerKinds {
    /// Whether some layer has mixer `k`.
    pub fn uses(&self, k: Mixer) -> bool {
        self.written.iter().any(|w| w.mixer == k)
    }

    /// Whether some layer has DeepSeek V4's compressed attention.
    pub fn uses_compressed(&self) -> bool {
        self.written
            .iter()
            .any(|w| matches!(w.mixer, Mixer::Compressed(_)))
    }
}

/// Reads the per-layer kinds and sets them on `m` (the model the scalar fields give):
/// its sliding-layer count and, unless uniform, its layers.
pub(super) fn read(c: &Config, d: &Dims, m: &mut Model) -> Result<LayerKinds, Box<Diagnostic>> {
    let mut written: Vec<WrittenLayer> = (0..d.layers)
        .map(|_| WrittenLayer {
            mixer: Mixer::Full,
            ffn: None,
        })
        .collect();
    let mut sources: Vec<&'static str> = Vec::new();
    if let Some(blocks) = &c.nas {
        // DeciLM: each block's attention and FFN present or no-op (`nas`).
        list_len_ok(c, d.layers, blocks.len(), "block_configs")?;
        for (w, b) in written.iter_mut().zip(blocks) {
            w.mixer = if b.kv_heads.is_some() {
                Mixer::Full
            } else {
                Mixer::None
            };
            w.ffn = Some(if b.intermediate.is_some() {
                Ffn::Dense
            } else {
                Ffn::None
            });
        }
        sources.push("block_configs");
    } else if let Some(src) = read_mixers(c, d, &mut written)? {
        sources.push(src);
    }
    if let Some((ffns, src)) = &read_ffns(c, d)?.filter(|_| c.nas.is_none()) {
        let rule_agrees = ffns
            .iter()
            .enumerate()
            .all(|(l, f)| *f == m.default_ffn(l as u64));
        if !rule_agrees {
            for (l, f) in written.iter_mut().zip(ffns) {
                if l.ffn.is_none() {
                    l.ffn = Some(*f);
                }
            }
            sources.push(src);
        }
    }
    if d.ffn.experts == 0 && written.iter().any(|w| w.ffn == Some(Ffn::Moe)) {
        return Err(no_experts(c, d, &sources.join(", ")));
    }
    let uniform = written
        .iter()
        .enumerate()
        .all(|(l, w)| w.mixer == Mixer::Full && w.ffn.is_none_or(|f| f == m.default_ffn(l as u64)));
    m.sliding_layers = written.iter().filter(|w| w.mixer == Mixer::Sliding).count() as u64;
    if !uniform {
        m.set_layers(&written);
    }
    Ok(LayerKinds {
        written,
        sources,
        uniform,
    })
}

/// A layer list marks MoE layers (`src`) in a model the config gives no experts.
fn no_experts(c: &Config, d: &Dims, src: &str) -> Box<Diagnostic> {
    let experts = match d.ffn.experts_src {
        "" => "it gives no expert count".to_string(),
        k => format!("`{k}` = 0"),
    };
    fail(
        format!(
            "cannot map `{}`: `{src}` marks MoE layers, but {experts}",
            c.source_name
        ),
        "check the config: a MoE model counts its routed experts",
    )
}

/// A per-layer list must cover every layer.
fn list_len_ok(c: &Config, layers: u64, n: usize, key: &str) -> Result<(), Box<Diagnostic>> {
    if (n as u64) < layers {
        Err(fail(
            format!(
                "cannot map `{}`: `{key}` lists {n} layers, the model has {layers}",
                c.source_name
            ),
            "check the config",
        ))
    } else {
        Ok(())
    }
}

/// Sets each layer's mixer from the config's per-layer field; returns that field's name
/// (`None`: every layer full attention).
fn read_mixers(
    c: &Config,
    d: &Dims,
    written: &mut [WrittenLayer],
) -> Result<Option<&'static str>, Box<Diagnostic>> {
    let layers = d.layers;
    if let Some(types) = c.get("layer_types").and_then(Value::as_array) {
        list_len_ok(c, layers, types.len(), "layer_types")?;
        layer_types(c, types, written)?;
        return Ok(Some("layer_types"));
    }
    if let Some(types) = c.get("attn_type_list").and_then(Value::as_array) {
        // MiniMax-01/M1: 0 = lightning (linear) attention, 1 = softmax attention.
        list_len_ok(c, layers, types.len(), "attn_type_list")?;
        set_by_flag(
            c,
            "attn_type_list",
            written,
            types,
            0,
            [Mixer::Linear, Mixer::Full],
        )?;
        return Ok(Some("attn_type_list"));
    }
    if let Some(every) = c
        .layer_count("sliding_window_pattern")?
        .filter(|n| *n > 1 && d.window.is_some())
    {
        // Gemma 2/3: every n-th layer global, the others windowed.
        every_nth_full(written, every, Mixer::Sliding);
        return Ok(Some("sliding_window_pattern"));
    }
    if let Some(every) = c.layer_count("full_attention_interval")?.filter(|n| *n > 0) {
        // Qwen3-Next / Qwen3.5: every n-th layer full, the others Gated DeltaNet.
        every_nth_full(written, every, Mixer::Linear);
        return Ok(Some("full_attention_interval"));
    }
    if let Some(p) = c.get("hybrid_override_pattern").and_then(Value::as_str) {
        list_len_ok(c, layers, p.chars().count(), "hybrid_override_pattern")?;
        hybrid_override_pattern(c, p, written)?;
        return Ok(Some("hybrid_override_pattern"));
    }
    if let Some(p) = c.get("hybrid_layer_pattern").and_then(Value::as_array) {
        // MiMo: 1 = sliding-window layer, 0 = global.
        list_len_ok(c, layers, p.len(), "hybrid_layer_pattern")?;
        set_by_flag(
            c,
            "hybrid_layer_pattern",
            written,
            p,
            1,
            [Mixer::Sliding, Mixer::Full],
        )?;
        return Ok(Some("hybrid_layer_pattern"));
    }
    if let Some(ratios) = c.get("compress_ratios").and_then(Value::as_array) {
        list_len_ok(c, layers, ratios.len(), "compress_ratios")?;
        compress_ratios(c, ratios, written)?;
        return Ok(Some("compress_ratios"));
    }
    let windowed_everywhere = c.get("use_sliding_window").and_then(Value::as_bool) != Some(false)
        && c.get("sliding_window").is_some_and(|w| !w.is_null());
    if d.window.is_some() && windowed_everywhere {
        for l in written.iter_mut() {
            l.mixer = Mixer::Sliding;
        }
        return Ok(Some("sliding_window on every layer"));
    }
    Ok(None)
}

/// `layer_types`: one attention kind per layer, by name.
fn layer_types(
    c: &Config,
    types: &[Value],
    written: &mut [WrittenLayer],
) -> Result<(), Box<Diagnostic>> {
    for (l, t) in written.iter_mut().zip(types) {
        l.mixer = match t.as_str() {
            Some("full_attention") | Some("attention") => Mixer::Full,
            Some("sliding_attention") | Some("chunked_attention") => Mixer::Sliding,
            Some("linear_attention") => Mixer::Linear,
            Some("mamba") => Mixer::Mamba,
            other => return Err(fail(
                format!(
                    "cannot map layer type {} in `{}`",
                    other.map(comment_text).unwrap_or_else(|| t.to_string()),
                    c.source_name
                ),
                "dic knows full_attention, sliding_attention, linear_attention and mamba layers",
            )),
        };
    }
    Ok(())
}

/// Nemotron-H's `hybrid_override_pattern`: one block per character, each a mixer or an
/// FFN alone.
fn hybrid_override_pattern(
    c: &Config,
    p: &str,
    written: &mut [WrittenLayer],
) -> Result<(), Box<Diagnostic>> {
    for (l, ch) in written.iter_mut().zip(p.chars()) {
        *l = match ch {
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
                        c.source_name,
                        comment_text(&other.to_string())
                    ),
                    "dic knows M (Mamba), * (attention), E (MoE) and - (MLP) blocks",
                ))
            }
        };
    }
    Ok(())
}

/// DeepSeek V4's `compress_ratios`: 0 = sliding window only, N = N:1 compressed attention
/// (plus window).
fn compress_ratios(
    c: &Config,
    ratios: &[Value],
    written: &mut [WrittenLayer],
) -> Result<(), Box<Diagnostic>> {
    for (l, r) in written.iter_mut().zip(ratios) {
        l.mixer = match r.as_u64() {
            Some(0) => Mixer::Sliding,
            Some(n) if (2..=4096).contains(&n) => Mixer::Compressed(n as u32),
            _ => {
                return Err(fail(
                    format!("cannot map `{}`: compress_ratios has {r}", c.source_name),
                    "ratios are 0 or 2 to 4096",
                ))
            }
        };
    }
    Ok(())
}

/// The FFN of each layer where the config lists them, with the field's name.
fn read_ffns(c: &Config, d: &Dims) -> Result<Option<(Vec<Ffn>, &'static str)>, Box<Diagnostic>> {
    let moe_if = |moe: bool| if moe { Ffn::Moe } else { Ffn::Dense };
    if let Some(types) = c.get("mlp_layer_types").and_then(Value::as_array) {
        list_len_ok(c, d.layers, types.len(), "mlp_layer_types")?;
        let ffns = types.iter().map(|t| moe_if(t.as_str() == Some("sparse")));
        return Ok(Some((ffns.collect(), "mlp_layer_types")));
    }
    if let Some(freq) = c.get("moe_layer_freq").and_then(Value::as_array) {
        list_len_ok(c, d.layers, freq.len(), "moe_layer_freq")?;
        let flags = flags(c, "moe_layer_freq", freq)?;
        let ffns = flags.into_iter().map(|moe| moe_if(moe == 1));
        return Ok(Some((ffns.collect(), "moe_layer_freq")));
    }
    if let Some(only) = c
        .get("mlp_only_layers")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    {
        let dense = layer_indices(c, d.layers, only)?;
        let ffns = (0..d.layers).map(|l| moe_if(!(dense.contains(&l) || d.ffn.experts == 0)));
        return Ok(Some((ffns.collect(), "mlp_only_layers")));
    }
    Ok(None)
}

/// The dimensions of the mixers in use: the sliding layers' own KV heads and head size,
/// linear attention (Gated DeltaNet or MiniMax's lightning attention), Mamba-2, a
/// recurrent state kept in fp32, and a sparse-attention indexer.
pub(super) fn read_mixer_dims(
    c: &Config,
    d: &Dims,
    kinds: &LayerKinds,
    m: &mut Model,
) -> Result<(), Box<Diagnostic>> {
    if kinds.uses(Mixer::Sliding) && d.window.is_none() {
        return Err(fail(
            format!(
                "cannot map `{}`: `{}` makes some layers sliding-window, but it has no `sliding_window`",
                c.source_name,
                kinds.sources.first().copied().unwrap_or("the layer list")
            ),
            "add `sliding_window` (the window in tokens) from the model's card",
        ));
    }
    let det = &mut m.detail;
    if kinds.uses(Mixer::Sliding) {
        if d.global_kv.is_some() && d.plain_kv != d.kv_heads {
            det.sliding_kv_heads = d.plain_kv;
        }
        if let Some(s) = c
            .count("swa_num_key_value_heads", "sliding_kv_heads")?
            .filter(|s| *s != d.kv_heads)
        {
            det.sliding_kv_heads = s;
        }
        if d.global_dim.is_some() && d.plain_dim != d.head_dim {
            det.sliding_head_dim = d.plain_dim;
        }
        if let Some(s) = c
            .count("swa_head_dim", "sliding_head_dim")?
            .filter(|s| *s != d.head_dim)
        {
            det.sliding_head_dim = s;
        }
    }
    if kinds.uses(Mixer::Linear) && !c.has("linear_num_value_heads") {
        // Lightning attention (MiniMax): one heads × head_dim × head_dim state, no conv
        // (`linear_attention_state_shape`).
        det.linear = Some(LinearAttention {
            key_heads: d.heads,
            value_heads: d.heads,
            key_dim: d.plain_dim,
            value_dim: d.plain_dim,
            conv_kernel: 1,
        });
    } else if kinds.uses(Mixer::Linear) {
        det.linear = Some(LinearAttention {
            key_heads: c.need("linear_num_key_heads", "linear_key_heads")?,
            value_heads: c.need("linear_num_value_heads", "linear_value_heads")?,
            key_dim: c.need("linear_key_head_dim", "linear_key_dim")?,
            value_dim: c.need("linear_value_head_dim", "linear_value_dim")?,
            conv_kernel: c
                .count("linear_conv_kernel_dim", "linear_conv_kernel")?
                .unwrap_or(4),
        });
    }
    if kinds.uses(Mixer::Mamba) {
        det.mamba = Some(Mamba2 {
            heads: c.need("mamba_num_heads", "mamba_heads")?,
            head_dim: c.need("mamba_head_dim", "mamba_head_dim")?,
            state: c.need("ssm_state_size", "mamba_state")?,
            groups: c.count("n_groups", "mamba_groups")?.unwrap_or(1),
            conv_kernel: c.count("conv_kernel", "mamba_conv_kernel")?.unwrap_or(4),
        });
    }
    // Recurrent states kept in fp32 by the model's own config (Nemotron-H
    // `mamba_ssm_cache_dtype`, Qwen3.5 `mamba_ssm_dtype`); the launch pins the same with
    // `--mamba-ssm-cache-dtype float32`.
    if (kinds.uses(Mixer::Mamba) || kinds.uses(Mixer::Linear))
        && ["mamba_ssm_cache_dtype", "mamba_ssm_dtype"]
            .iter()
            .any(|k| c.get(k).and_then(Value::as_str) == Some("float32"))
    {
        det.state_dtype = Some("fp32".into());
    }
    if (d.kv_lora_rank > 0 || kinds.uses_compressed()) && c.has("index_head_dim") {
        det.indexer_head_dim = c.need("index_head_dim", "indexer_head_dim")?;
        det.indexer_heads = c.need("index_n_heads", "indexer_heads")?;
    }
    Ok(())
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

/// Layers from a per-layer list of 0/1 flags (config field `key`): `flag` marks
/// `kinds[0]`, the other value `kinds[1]`.
fn set_by_flag(
    c: &Config,
    key: &str,
    written: &mut [WrittenLayer],
    list: &[Value],
    flag: u64,
    kinds: [Mixer; 2],
) -> Result<(), Box<Diagnostic>> {
    for (l, v) in written.iter_mut().zip(flags(c, key, list)?) {
        l.mixer = if v == flag { kinds[0] } else { kinds[1] };
    }
    Ok(())
}

/// A per-layer list of 0/1 flags; any other entry is refused.
fn flags(c: &Config, key: &str, list: &[Value]) -> Result<Vec<u64>, Box<Diagnostic>> {
    list.iter()
        .map(|v| match v.as_u64() {
            Some(b @ (0 | 1)) => Ok(b),
            _ => Err(fail(
                format!(
                    "cannot map `{}`: `{key}` has {}, not 0 or 1",
                    c.source_name,
                    comment_text(&v.to_string())
                ),
                "check the config: the list has one 0 or 1 per layer",
            )),
        })
        .collect()
}

/// A list of layer numbers (`mlp_only_layers`): whole numbers below the layer count.
fn layer_indices(c: &Config, layers: u64, list: &[Value]) -> Result<Vec<u64>, Box<Diagnostic>> {
    list.iter()
        .map(|v| match v.as_u64() {
            Some(l) if l < layers => Ok(l),
            _ => Err(fail(
                format!(
                    "cannot map `{}`: `mlp_only_layers` has {}, not a layer of the {layers}",
                    c.source_name,
                    comment_text(&v.to_string())
                ),
                "check the config: layers are numbered from 0",
            )),
        })
        .collect()
}
