//! NAS checkpoints (DeciLM / Llama-3.3-Nemotron-Super, `block_configs`) import layer by
//! layer as vLLM 0.33's `models/nemotron_nas.py` builds them, and their parameters and
//! KV bytes per token come out as a hand computation says.
//!
//! ../shared/models/hf holds no NAS config. The config below has the keys and values of
//! the public `nvidia/Llama-3_3-Nemotron-Super-49B-v1` config.json (`architectures`,
//! `hidden_size` 8192, `num_attention_heads` 64, `vocab_size` 128256, `intermediate_size`
//! and `num_key_value_heads` null, each block's `attention.{n_heads_in_group, no_op,
//! replace_with_linear}` and `ffn.{ffn_mult, no_op, replace_with_linear}`), with nine of
//! its blocks' kinds (ffn_mult 2.625, 5.25, 1.3125, 3.28125, 1.0, 0.5, no-op attention)
//! rather than its 80, so that the arithmetic below can be checked by hand.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::import_hf::{import, ImportRequest};
use dic_compiler::source::MemoryWorld;

/// (n_heads_in_group or no-op attention, ffn_mult or no-op FFN) per layer.
const BLOCKS: [(Option<u64>, Option<f64>); 9] = [
    (Some(8), Some(2.625)),
    (Some(8), Some(5.25)),
    (None, Some(2.625)),
    (None, Some(1.3125)),
    (Some(8), Some(3.28125)),
    (None, Some(1.0)),
    (None, Some(0.5)),
    (Some(8), Some(5.25)),
    (Some(8), None),
];

fn config() -> String {
    let blocks: Vec<serde_json::Value> = BLOCKS
        .iter()
        .map(|(group, mult)| {
            serde_json::json!({
                "attention": { "n_heads_in_group": group, "no_op": group.is_none(), "replace_with_linear": false },
                "ffn": { "ffn_mult": mult, "no_op": mult.is_none(), "replace_with_linear": false },
            })
        })
        .collect();
    serde_json::json!({
        "architectures": ["DeciLMForCausalLM"],
        "model_type": "nemotron-nas",
        "block_configs": blocks,
        "hidden_act": "silu",
        "hidden_size": 8192,
        "intermediate_size": null,
        "max_position_embeddings": 131072,
        "num_attention_heads": 64,
        "num_hidden_layers": BLOCKS.len(),
        "num_key_value_heads": null,
        "tie_word_embeddings": false,
        "torch_dtype": "bfloat16",
        "vocab_size": 128256,
    })
    .to_string()
}

#[test]
fn a_nas_checkpoint_imports_layer_by_layer() {
    let config = config();
    let text = import(&ImportRequest {
        config: &config,
        quant_config: None,
        name: "nemotron_super_nas",
        repo: None,
        source_name: "config.json",
    })
    .unwrap_or_else(|d| panic!("{}", d.message));
    // ffn_mult → int(2 · mult · 8192 / 3) up to a multiple of 256 (nemotron_nas.py):
    // 2.625 → 14336, 5.25 → 28672, 1.3125 → 7168, 3.28125 → 17920, 1.0 → 5461 → 5632,
    // 0.5 → 2730 → 2816
    for want in [
        "kv_heads = 8",
        "intermediate = 28672",
        "layer_intermediate = [14336, 28672, 14336, 7168, 17920, 5632, 2816, 28672, 0]",
        "layer_pattern = \"2 full+dense, (2 dense, full+dense) × 2, full+none\"",
    ] {
        assert!(text.contains(want), "no `{want}` in\n{text}");
    }
    // A deployment of it, analysed: parameters and KV bytes per token by hand.
    let src = format!(
        "{text}\nimport std.nodes.dgx_h100\ncluster one {{ nodes = 1 × dgx_h100 }}\n\
         deploy d {{ model = nemotron_super_nas, cluster = one, layout = tp 1, model_source = \"nvidia/Llama-3_3-Nemotron-Super-49B-v1\" }}\n"
    );
    let world = MemoryWorld::new().with("nas.dist", &src);
    let checked = dic_compiler::driver::compile_file(&world, "nas.dist").unwrap();
    assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
    let m = &checked.deployments[0].scenario.scenario.model;
    let p = dic_compiler::architecture::parameters(m);
    // embedding and the untied LM head: 2 × 128256 × 8192
    let embeddings = 2.0 * 128256.0 * 8192.0;
    // five attention layers: q and o 8192 × 8192 each, k and v 8192 × (8 × 128) each
    let attention = 5.0 * (2.0 * 8192.0 * 8192.0 + 2.0 * 8192.0 * 1024.0);
    // eight gated MLPs: 3 × 8192 × their sizes (119552 in all)
    let mlps = 3.0 * 8192.0 * 119_552.0;
    assert_eq!(embeddings + attention + mlps, 5_794_430_976.0);
    assert_eq!(p.total, 5_794_430_976.0, "{p:?}");
    // KV: only the five attention layers, 2 (K, V) × 8 heads × 128 × 2 bytes each
    let kv = checked.deployments[0].analysis.memory.stages[0].kv_bytes_per_token;
    assert_eq!(kv, 5.0 * 2.0 * 8.0 * 128.0 * 2.0, "{kv}");
}

#[test]
fn nas_blocks_vllm_cannot_build_are_refused() {
    for (edit, why) in [
        (r#""replace_with_linear": true"#, "replace_with_linear"),
        (r#""n_heads_in_group": 16"#, "different KV head counts"),
    ] {
        let config = config().replacen(
            if why == "replace_with_linear" {
                r#""replace_with_linear":false"#
            } else {
                r#""n_heads_in_group":8"#
            },
            &edit.replace(' ', ""),
            1,
        );
        let err = import(&ImportRequest {
            config: &config,
            quant_config: None,
            name: "m",
            repo: None,
            source_name: "config.json",
        })
        .unwrap_err();
        assert!(err.message.contains(why), "{}", err.message);
    }
}
