//! NAS checkpoints (DeciLM / Nemotron Super and Ultra, `DeciLMForCausalLM`): a
//! `block_configs` entry per layer, read as vLLM 0.33's `models/nemotron_nas.py`
//! (`DeciLMDecoderLayer.__init__`) builds the layer. An attention block is absent when
//! `attention.no_op` (no KV cache), else full attention with
//! `num_attention_heads // attention.n_heads_in_group` KV heads; an FFN is absent when
//! `ffn.no_op`, else a gated MLP of `ffn.intermediate_size` or, from `ffn.ffn_mult`,
//! `_ffn_mult_to_intermediate_size`: `int(2 · ffn_mult · hidden_size / 3)` rounded up
//! to a multiple of 256. vLLM builds no linear replacement (`replace_with_linear`), so
//! such a block is refused; so are attention blocks of different KV head counts, which
//! a model's one `kv_heads` cannot say yet.

use super::fail;
use crate::diagnostics::Diagnostic;
use serde_json::Value;

/// One layer of a NAS model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NasBlock {
    /// KV heads of its attention; `None` for a no-op attention block.
    pub kv_heads: Option<u64>,
    /// Its MLP's intermediate size; `None` for a no-op FFN.
    pub intermediate: Option<u64>,
}

/// `_ffn_mult_to_intermediate_size` (with `_find_multiple(n, 256)`).
fn ffn_mult_to_intermediate(ffn_mult: f64, hidden: u64) -> u64 {
    let n = (2.0 * ffn_mult * hidden as f64 / 3.0) as u64;
    n.div_ceil(256) * 256
}

/// The config's `block_configs`, one per layer; `None` when it has none.
pub(super) fn blocks(
    cfg: &serde_json::Map<String, Value>,
    source_name: &str,
) -> Result<Option<Vec<NasBlock>>, Box<Diagnostic>> {
    let Some(list) = cfg.get("block_configs") else {
        return Ok(None);
    };
    let refuse = |what: String| {
        fail(
            format!("cannot map `{source_name}`: {what}"),
            "check the config against vLLM's models/nemotron_nas.py",
        )
    };
    let list = list
        .as_array()
        .ok_or_else(|| refuse("`block_configs` is not a list".into()))?;
    let count = |v: Option<&Value>| v.and_then(Value::as_u64);
    let heads = count(cfg.get("num_attention_heads"))
        .ok_or_else(|| refuse("no integer `num_attention_heads`".into()))?;
    let hidden =
        count(cfg.get("hidden_size")).ok_or_else(|| refuse("no integer `hidden_size`".into()))?;
    let mut out = Vec::with_capacity(list.len());
    for (l, b) in list.iter().enumerate() {
        let (attn, ffn) = (&b["attention"], &b["ffn"]);
        for (part, what) in [(attn, "attention"), (ffn, "ffn")] {
            if part["replace_with_linear"].as_bool() == Some(true) {
                return Err(refuse(format!(
                    "layer {l}'s {what} is `replace_with_linear`, which vLLM's DeciLM does not build"
                )));
            }
        }
        let kv_heads = if attn["no_op"].as_bool() == Some(true) {
            None
        } else {
            let group = count(attn.get("n_heads_in_group"))
                .filter(|g| *g > 0 && heads.is_multiple_of(*g))
                .ok_or_else(|| {
                    refuse(format!(
                        "layer {l}'s `attention.n_heads_in_group` does not divide the {heads} heads"
                    ))
                })?;
            Some(heads / group)
        };
        let intermediate = if ffn["no_op"].as_bool() == Some(true) {
            None
        } else if let Some(mult) = ffn["ffn_mult"].as_f64() {
            if !(mult > 0.0 && mult <= 64.0) {
                return Err(refuse(format!("layer {l}'s `ffn.ffn_mult` = {mult}")));
            }
            Some(ffn_mult_to_intermediate(mult, hidden))
        } else {
            Some(
                count(ffn.get("intermediate_size"))
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        refuse(format!(
                            "layer {l}'s FFN has neither `ffn_mult` nor `intermediate_size`"
                        ))
                    })?,
            )
        };
        out.push(NasBlock {
            kv_heads,
            intermediate,
        });
    }
    let mut kv: Vec<u64> = out.iter().filter_map(|b| b.kv_heads).collect();
    kv.sort_unstable();
    kv.dedup();
    if kv.len() > 1 {
        return Err(refuse(format!(
            "its attention layers have different KV head counts ({kv:?}); dic's model has one `kv_heads`"
        )));
    }
    Ok(Some(out))
}

/// The KV heads of every attention layer (its heads when no layer has attention).
pub(super) fn kv_heads(blocks: &[NasBlock], heads: u64) -> u64 {
    blocks.iter().find_map(|b| b.kv_heads).unwrap_or(heads)
}

/// The largest MLP (the model's `intermediate`; each layer's own in `layer_intermediate`).
pub(super) fn max_intermediate(blocks: &[NasBlock]) -> Option<u64> {
    blocks.iter().filter_map(|b| b.intermediate).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ffn_mult_rounds_up_to_a_multiple_of_256_as_decilm_does() {
        // hidden 8192: 2 · 5.25 · 8192 / 3 = 28672; 2 · 1.0 · 8192 / 3 = 5461.3 → 5632
        assert_eq!(ffn_mult_to_intermediate(5.25, 8192), 28672);
        assert_eq!(ffn_mult_to_intermediate(2.625, 8192), 14336);
        assert_eq!(ffn_mult_to_intermediate(1.0, 8192), 5632);
        assert_eq!(ffn_mult_to_intermediate(0.5, 8192), 2816);
    }
}
