//! `dic import-hf` on every real config in ../shared/models/hf: snapshotted, checks clean,
//! and agrees with the stdlib model of the same checkpoint number for number. The stdlib's
//! stated parameter counts must match the architecture within 3%.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use dic_compiler::architecture;
use dic_compiler::import_hf::{import, names_from_file, quant_config_file_name, ImportRequest};
use dic_compiler::program::{Body, Model};
use dic_compiler::schema::Kind;
use dic_compiler::source::MemoryWorld;

/// The quantization config beside a checkpoint's config: the flattened copies' prefixed
/// name, or a checkpoint folder's own `hf_quant_config.json`.
#[test]
fn the_quant_config_is_named_after_its_config() {
    assert_eq!(
        quant_config_file_name("nvidia--Llama-3.1-70B-Instruct-FP8_config.json"),
        "nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json"
    );
    assert_eq!(
        quant_config_file_name("config.json"),
        "hf_quant_config.json"
    );
}

/// A checkpoint id resolves to its flattened config and, when there is one, its
/// quantization config: NVIDIA's FP8 Llama reads FP8 weights and cache from the latter; an
/// id with no file gives nothing, and only those two names are asked for.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn a_checkpoint_id_reads_its_flattened_config_and_quant_config() {
    let shared = common::required_shared_dir();
    let dir = shared.join("models/hf");
    let asked = std::cell::RefCell::new(Vec::new());
    let read = |file: &str| {
        asked.borrow_mut().push(file.to_string());
        std::fs::read_to_string(dir.join(file)).ok()
    };
    let m = dic_compiler::import_hf::model_from_flat_configs(
        "nvidia/Llama-3.1-70B-Instruct-FP8",
        &read,
    )
    .expect("imports");
    assert_eq!((m.weights.as_str(), m.kv_cache.as_str()), ("fp8", "fp8"));
    assert_eq!(
        *asked.borrow(),
        [
            "nvidia--Llama-3.1-70B-Instruct-FP8_config.json",
            "nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json"
        ]
    );
    assert!(dic_compiler::import_hf::model_from_flat_configs("example/None-1B", &read).is_none());
}

/// config file stem → the stdlib model that describes the same checkpoint.
const STDLIB_OF: &[(&str, &str)] = &[
    ("meta-llama--Meta-Llama-3.1-8B", "llama_3_1_8b"),
    ("meta-llama--Meta-Llama-3.1-70B", "llama_3_1_70b"),
    ("meta-llama--Meta-Llama-3.1-405B", "llama_3_1_405b"),
    ("nvidia--Llama-3.1-70B-Instruct-FP8", "llama_3_1_70b_fp8"),
    (
        "meta-llama--Llama-4-Scout-17B-16E-Instruct",
        "llama_4_scout",
    ),
    ("mistralai--Mixtral-8x7B-v0.1", "mixtral_8x7b"),
    ("mistralai--Mixtral-8x22B-v0.1", "mixtral_8x22b"),
    ("Qwen--Qwen3-0.6B", "qwen3_0_6b"),
    ("Qwen--Qwen3-8B", "qwen3_8b"),
    ("Qwen--Qwen3-32B", "qwen3_32b"),
    ("Qwen--Qwen3-30B-A3B", "qwen3_30b_a3b"),
    ("Qwen--Qwen3-235B-A22B", "qwen3_235b_a22b"),
    ("Qwen--Qwen3-235B-A22B-FP8", "qwen3_235b_a22b_fp8"),
    ("deepseek-ai--DeepSeek-V3", "deepseek_v3"),
    ("moonshotai--Kimi-K2-Instruct", "kimi_k2"),
    ("openai--gpt-oss-20b", "gpt_oss_20b"),
    ("openai--gpt-oss-120b", "gpt_oss_120b"),
    ("Qwen--Qwen3.5-27B", "qwen3_5_27b"),
    ("Qwen--Qwen3.5-35B-A3B", "qwen3_5_35b_a3b"),
    ("Qwen--Qwen3.5-122B-A10B", "qwen3_5_122b_a10b"),
    ("Qwen--Qwen3-VL-32B-Instruct", "qwen3_vl_32b"),
    ("deepseek-ai--DeepSeek-V4-Flash", "deepseek_v4_flash"),
    ("nvidia--DeepSeek-V4-Flash-NVFP4", "deepseek_v4_flash_nvfp4"),
    ("nvidia--DeepSeek-V3.1-NVFP4", "deepseek_v3_1_nvfp4"),
    ("nvidia--Kimi-K2.6-NVFP4", "kimi_k2_6_nvfp4"),
    ("nvidia--GLM-5.1-NVFP4", "glm_5_1_nvfp4"),
    ("MiniMaxAI--MiniMax-M2.7", "minimax_m2_7"),
    ("nvidia--MiniMax-M2.7-NVFP4", "minimax_m2_7_nvfp4"),
    ("XiaomiMiMo--MiMo-V2-Flash", "mimo_v2_flash"),
    ("nvidia--Gemma-4-31B-IT-NVFP4", "gemma_4_31b_nvfp4"),
    (
        "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        "nemotron_3_nano",
    ),
    (
        "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4",
        "nemotron_3_nano_nvfp4",
    ),
];

fn imported_model(text: &str) -> Model {
    let world = MemoryWorld::new().with("imported.dist", text);
    let checked = dic_compiler::driver::check_file(&world, "imported.dist").expect("in memory");
    assert!(
        checked.diagnostics.is_empty(),
        "imported text does not check clean:\n{text}\n{}",
        common::rendered(&checked)
    );
    dic_compiler::import_hf::model_from_text(text).expect("one model")
}

#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn import_hf_maps_every_shared_config_and_agrees_with_the_stdlib() {
    let shared = common::required_shared_dir();
    let dir = shared.join("models/hf");
    let mut configs: Vec<_> = std::fs::read_dir(&dir)
        .expect("models/hf")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.to_string_lossy().ends_with("_config.json")
                && !p.to_string_lossy().ends_with("_hf_quant_config.json")
        })
        .collect();
    configs.sort();
    assert!(configs.len() >= 17);
    let stdlib = dic_compiler::driver::check_stdlib();
    let mut refused = String::new();
    for path in configs {
        let file_name = path.file_name().unwrap().to_string_lossy().to_string();
        let stem = file_name.trim_end_matches("_config.json").to_string();
        let config = std::fs::read_to_string(&path).unwrap();
        let quant = std::fs::read_to_string(dir.join(quant_config_file_name(&file_name))).ok();
        let (name, repo) = names_from_file(&file_name);
        let std_name = STDLIB_OF.iter().find(|(s, _)| *s == stem).map(|(_, n)| *n);
        let text = match import(&ImportRequest {
            config: &config,
            quant_config: quant.as_deref(),
            name: &name,
            repo: repo.as_deref(),
            source_name: &file_name,
        }) {
            Ok(text) => text,
            Err(d) => {
                // A checkpoint the stdlib describes must import; any other may be refused,
                // but only with the importer's code and a message naming what is missing.
                assert!(std_name.is_none(), "{file_name}: {}", d.message);
                assert_eq!(d.code.as_str(), "E0901", "{file_name}: {}", d.message);
                refused.push_str(&format!("{file_name}: {}\n", d.message));
                continue;
            }
        };
        insta::assert_snapshot!(format!("import_hf__{stem}"), text);
        let got = imported_model(&text);
        let Some(std_name) = std_name else {
            continue;
        };
        let def = stdlib
            .program
            .by_name(Kind::Model, std_name)
            .unwrap_or_else(|| panic!("no stdlib model {std_name}"));
        let Body::Model(want) = &def.body else {
            panic!()
        };
        let pairs: &[(&str, u64, u64)] = &[
            ("layers", got.layers, want.layers),
            ("hidden", got.hidden, want.hidden),
            ("heads", got.heads, want.heads),
            ("kv_heads", got.kv_heads, want.kv_heads),
            ("head_dim", got.head_dim, want.head_dim),
            ("intermediate", got.intermediate, want.intermediate),
            ("vocab", got.vocab, want.vocab),
            (
                "max_context",
                got.max_context as u64,
                want.max_context as u64,
            ),
            ("experts", got.experts, want.experts),
            (
                "experts_per_token",
                got.experts_per_token,
                want.experts_per_token,
            ),
            ("shared_experts", got.shared_experts, want.shared_experts),
            (
                "moe_intermediate",
                got.moe_intermediate,
                want.moe_intermediate,
            ),
            ("dense_layers", got.dense_layers, want.dense_layers),
            ("moe_layer_step", got.moe_layer_step, want.moe_layer_step),
            ("kv_lora_rank", got.kv_lora_rank, want.kv_lora_rank),
            ("q_lora_rank", got.q_lora_rank, want.q_lora_rank),
            (
                "qk_rope_head_dim",
                got.qk_rope_head_dim,
                want.qk_rope_head_dim,
            ),
            ("sliding_layers", got.sliding_layers, want.sliding_layers),
        ];
        for (field, g, w) in pairs {
            assert_eq!(
                g, w,
                "{std_name}.{field}: stdlib says {w}, {file_name} says {g}"
            );
        }
        assert_eq!(got.attention, want.attention, "{std_name}.attention");
        assert_eq!(
            got.architecture, want.architecture,
            "{std_name}.architecture"
        );
        // Per-layer kinds, their dimensions and the per-component formats, all at once.
        for l in 0..got.layers {
            assert_eq!(got.layer(l), want.layer(l), "{std_name}: layer {l}");
        }
        let mut got_detail = got.detail.clone();
        let mut want_detail = want.detail.clone();
        // The encoder is an estimate of the importer; the stdlib may state the card's.
        got_detail.encoder_parameters = 0.0;
        want_detail.encoder_parameters = 0.0;
        assert_eq!(
            got_detail, want_detail,
            "{std_name}: hybrid / precision fields"
        );
        assert_eq!(
            got.sliding_window, want.sliding_window,
            "{std_name}.sliding_window"
        );
        assert_eq!(got.v_head_dim, want.v_head_dim, "{std_name}.v_head_dim");
        assert_eq!(
            got.tied_embeddings, want.tied_embeddings,
            "{std_name}.tied_embeddings"
        );
        assert_eq!(got.weights, want.weights, "{std_name}.weights");
        assert_eq!(
            got.prequantized, want.prequantized,
            "{std_name}.prequantized"
        );
        if quant.is_some() {
            assert_eq!(got.kv_cache, want.kv_cache, "{std_name}.kv_cache");
        }
    }
    // Every shared config imports: none is refused.
    assert!(refused.is_empty(), "refused:\n{refused}");
}

#[test]
fn stdlib_parameter_counts_match_the_architecture() {
    let stdlib = dic_compiler::driver::check_stdlib();
    let mut checked = 0;
    for def in stdlib.program.defs.iter().flatten() {
        let Body::Model(m) = &def.body else { continue };
        let computed = architecture::parameters(m).total;
        let err = (computed - m.parameters).abs() / m.parameters;
        assert!(
            err < 0.03,
            "{}: stated {:.2}B, architecture gives {:.2}B ({:.1}% off)",
            def.name,
            m.parameters / 1e9,
            computed / 1e9,
            err * 100.0
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} models");
}

#[test]
fn unmappable_configs_are_refused_with_a_diagnostic() {
    for (config, needle) in [
        ("not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        (r#"{"hidden_size": 4096}"#, "num_hidden_layers"),
        (
            r#"{"num_hidden_layers": 2, "hidden_size": 10, "num_attention_heads": 3, "vocab_size": 5, "max_position_embeddings": 8, "intermediate_size": 4}"#,
            "head_dim",
        ),
        (
            r#"{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 5, "max_position_embeddings": 8, "intermediate_size": 4, "quantization_config": {"quant_method": "bitsandbytes"}}"#,
            "bitsandbytes",
        ),
        (
            r#"{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 5, "max_position_embeddings": 8, "intermediate_size": 4, "num_experts": 4}"#,
            "num_experts_per_tok",
        ),
    ] {
        let err = import(&ImportRequest {
            config,
            quant_config: None,
            name: "m",
            repo: None,
            source_name: "config.json",
        })
        .expect_err(config);
        assert_eq!(err.code, dic_compiler::diagnostics::Code::UnsupportedConfig);
        assert!(err.message.contains(needle), "{config}: {}", err.message);
    }
}

/// A config's strings and the `--name` never become `.dist` text: an architecture with a
/// newline stays inside its comment, and a name that is no identifier is refused.
#[test]
fn config_strings_cannot_inject_dist_text() {
    let config = r#"{"architectures": ["LlamaForCausalLM\nimport \"/dev/stdin\"\nmodel evil {"], "num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 5, "max_position_embeddings": 8, "intermediate_size": 4}"#;
    let req = |name: &'static str, source_name: &'static str| ImportRequest {
        config,
        quant_config: None,
        name,
        repo: Some("org/\"x\"\nimport \"/etc/passwd\""),
        source_name,
    };
    let text = import(&req("m", "a\nimport \"/dev/zero\"\nconfig.json")).unwrap();
    assert!(
        !text.lines().any(|l| l.trim_start().starts_with("import")),
        "{text}"
    );
    let models: Vec<&str> = text.lines().filter(|l| l.starts_with("model ")).collect();
    assert_eq!(models, ["model m {"], "{text}");
    for bad in ["a b", "m { }\nimport \"/dev/stdin\"", "1m", "", "m-1"] {
        let name: &'static str = Box::leak(bad.to_string().into_boxed_str());
        let err = import(&req(name, "config.json")).expect_err(bad);
        assert_eq!(err.code.as_str(), "E0901");
    }
}

/// `dic estimate --model config.json` on every shared config: the imported model runs
/// through memory and performance and returns finite numbers (8 × B200, TP 8, 32k context).
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn every_shared_config_estimates() {
    use dic_compiler::analysis::estimate::{self, EstimateRequest};
    use dic_compiler::program::Layout;
    let shared = common::required_shared_dir();
    let dir = shared.join("models/hf");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("models/hf").flatten() {
        let path = entry.path();
        let file_name = path.file_name().unwrap().to_string_lossy().to_string();
        if !file_name.ends_with("_config.json") || file_name.ends_with("_hf_quant_config.json") {
            continue;
        }
        let config = std::fs::read_to_string(&path).unwrap();
        let quant = std::fs::read_to_string(dir.join(quant_config_file_name(&file_name))).ok();
        let (name, repo) = names_from_file(&file_name);
        let text = import(&ImportRequest {
            config: &config,
            quant_config: quant.as_deref(),
            name: &name,
            repo: repo.as_deref(),
            source_name: &file_name,
        })
        .unwrap_or_else(|d| panic!("{file_name}: {}", d.message));
        let model = imported_model(&text);
        let req = EstimateRequest {
            gpu: "b200".into(),
            gpus_per_node: Some(8),
            nodes: Some(1),
            layout: Layout {
                tp: 8,
                ..Layout::default()
            },
            max_model_len: Some(32768.0),
            isl: Some(2048.0),
            osl: Some(512.0),
            concurrency: Some(32),
            ..EstimateRequest::default()
        };
        let s = estimate::scenario(&name, model, &req).expect("valid request");
        let a = dic_compiler::analysis::analyze(&s, &[]);
        assert!(
            a.memory.kv_cache_tokens > 32768,
            "{file_name}: {} KV tokens",
            a.memory.kv_cache_tokens
        );
        let p = a
            .prediction
            .unwrap_or_else(|| panic!("{file_name}: no prediction: {:?}", a.findings));
        assert!(
            p.tpot.is_finite() && p.tpot > 0.0 && p.ttft.is_finite(),
            "{file_name}"
        );
        assert!(p.output_tokens_per_s > 0.0, "{file_name}");
        checked += 1;
    }
    assert!(checked >= 35, "only {checked} configs");
}

/// Shapes of configs from the same families that ../shared does not hold: each imports and
/// checks clean without changes to dic, with the layer kinds its fields say.
#[test]
fn family_variants_import() {
    let base = r#""num_hidden_layers": 12, "hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 32000, "max_position_embeddings": 32768, "intermediate_size": 4096, "torch_dtype": "bfloat16""#;
    let cases: &[(&str, String, &str)] = &[
        // Gemma 3: sliding_window_pattern instead of layer_types.
        (
            "gemma3",
            format!(r#"{{ {base}, "sliding_window": 1024, "sliding_window_pattern": 6 }}"#),
            "(5 sliding, full) × 2",
        ),
        // Qwen3-Next: full_attention_interval with Gated DeltaNet dimensions.
        (
            "qwen3_next",
            format!(
                r#"{{ {base}, "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4 }}"#
            ),
            "(3 linear, full) × 3",
        ),
        // MiniMax-M1: attn_type_list, lightning attention.
        (
            "minimax_m1",
            format!(r#"{{ {base}, "attn_type_list": [0,0,0,0,0,0,0,1,0,0,0,1] }}"#),
            "7 linear, full, 3 linear, full",
        ),
        // A Nemotron-H with dense MLP blocks and NaN/Infinity in the JSON.
        (
            "nemotron_h",
            format!(
                r#"{{ {base}, "hybrid_override_pattern": "M-M*M-M-M*M-", "mamba_num_heads": 32, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "time_step_limit": [0.0, Infinity], "rescale": NaN }}"#
            ),
            "(mamba+none, dense, mamba+none, full+none, mamba+none, dense) × 2",
        ),
    ];
    for (name, config, pattern) in cases {
        let text = import(&ImportRequest {
            config,
            quant_config: None,
            name,
            repo: None,
            source_name: "config.json",
        })
        .unwrap_or_else(|d| panic!("{name}: {}", d.message));
        assert!(
            text.contains(&format!("layer_pattern = \"{pattern}\"")),
            "{name}:\n{text}"
        );
        imported_model(&text);
    }
    // Quantization formats without a config in ../shared: compressed-tensors W4A16 (int4,
    // group 128), AWQ, GPTQ with its group, DeepSeek V3.2's indexer over MLA.
    let quantized: &[(&str, &str, &[&str])] = &[
        (
            "w4a16",
            r#""quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 128, "strategy": "group", "symmetric": true}, "targets": ["Linear"]}}, "ignore": ["lm_head"]}"#,
            &["weights = int4", "quant_group = 128"],
        ),
        (
            "awq",
            r#""quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true}"#,
            &["weights = awq", "quant_group = 128"],
        ),
        (
            "gptq",
            r#""quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false}"#,
            &["weights = gptq", "quant_group = 32"],
        ),
        (
            "dsa",
            r#""kv_lora_rank": 512, "q_lora_rank": 768, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048"#,
            &[
                "attention = mla",
                "indexer_head_dim = 128",
                "indexer_heads = 64",
            ],
        ),
    ];
    for (name, extra, want) in quantized {
        let config = format!(r#"{{ {base}, {extra} }}"#);
        let text = import(&ImportRequest {
            config: &config,
            quant_config: None,
            name,
            repo: None,
            source_name: "config.json",
        })
        .unwrap_or_else(|d| panic!("{name}: {}", d.message));
        for w in *want {
            assert!(text.contains(w), "{name}: no `{w}` in\n{text}");
        }
        imported_model(&text);
    }
}

/// A small dense config with `extra` merged over it (a JSON object's fields).
fn small_config(extra: &str) -> String {
    let base = r#""architectures": ["LlamaForCausalLM"], "num_hidden_layers": 12, "hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 32000, "max_position_embeddings": 32768, "intermediate_size": 4096"#;
    let mut v: serde_json::Value = serde_json::from_str(&format!("{{ {base} }}")).unwrap();
    let extra: serde_json::Value = serde_json::from_str(&format!("{{ {extra} }}")).unwrap();
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v.to_string()
}

fn import_small(extra: &str) -> Result<String, Box<dic_compiler::diagnostics::Diagnostic>> {
    import(&ImportRequest {
        config: &small_config(extra),
        quant_config: None,
        name: "m",
        repo: None,
        source_name: "config.json",
    })
}

/// The shapes that need each count: a MoE, an MLA, a hybrid with linear attention and
/// Mamba, a windowed model, an encoder and a quantized checkpoint.
const MOE: &str = r#""num_experts": 16, "num_experts_per_tok": 2, "moe_intermediate_size": 512, "n_shared_experts": 1, "shared_expert_intermediate_size": 1024, "first_k_dense_replace": 1, "decoder_sparse_step": 1"#;
const MLA: &str = r#""num_key_value_heads": 8, "kv_lora_rank": 512, "q_lora_rank": 768, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "index_head_dim": 128, "index_n_heads": 64, "num_nextn_predict_layers": 1"#;
const LINEAR: &str = r#""full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4"#;
const MAMBA: &str = r#""hybrid_override_pattern": "M-M*M-M-M*M-", "mamba_num_heads": 32, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4"#;
const SLIDING: &str = r#""sliding_window": 1024, "sliding_window_pattern": 6, "swa_num_key_value_heads": 4, "swa_head_dim": 64"#;
const GEMMA4: &str = r#""layer_types": ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"], "sliding_window": 1024, "num_global_key_value_heads": 1, "global_head_dim": 256"#;
const VISION: &str = r#""vision_config": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "spatial_merge_size": 2, "out_hidden_size": 1024}"#;
const LLAMA4: &str = r#""architectures": ["Llama4ForCausalLM"], "num_local_experts": 16, "num_experts_per_tok": 1, "intermediate_size_mlp": 8192, "interleave_moe_layer_step": 2"#;

/// Every count import-hf reads, in the shape that reads it: negative, fractional,
/// non-numeric and absurdly large values, and zero where zero means nothing, are refused
/// at import with E0901 naming the config field (before, `num_key_value_heads: -8` was
/// read as absent and `kv_heads = 0`, `head_dim = 0` or 2^26 layers were written for
/// `dic check` to refuse). Each shape imports and checks clean as given.
#[test]
fn hostile_counts_are_refused_at_import_naming_the_field() {
    // (shape, key, whether 0 is meaningful there)
    let fields: &[(&str, &str, bool)] = &[
        ("", "num_hidden_layers", false),
        ("", "hidden_size", false),
        ("", "num_attention_heads", false),
        ("", "num_key_value_heads", false),
        ("", "head_dim", false),
        ("", "intermediate_size", false),
        ("", "vocab_size", false),
        ("", "max_position_embeddings", false),
        (MOE, "num_experts", true),
        (MOE, "num_experts_per_tok", false),
        (MOE, "moe_intermediate_size", false),
        (MOE, "n_shared_experts", true),
        (MOE, "shared_expert_intermediate_size", true),
        (MOE, "first_k_dense_replace", true),
        (MOE, "decoder_sparse_step", false),
        (LLAMA4, "num_local_experts", true),
        (LLAMA4, "intermediate_size_mlp", false),
        (LLAMA4, "interleave_moe_layer_step", false),
        (MLA, "kv_lora_rank", true),
        (MLA, "q_lora_rank", true),
        (MLA, "qk_rope_head_dim", false),
        (MLA, "qk_nope_head_dim", false),
        (MLA, "v_head_dim", false),
        (MLA, "index_head_dim", false),
        (MLA, "index_n_heads", false),
        (MLA, "num_nextn_predict_layers", true),
        (LINEAR, "full_attention_interval", true),
        (LINEAR, "linear_num_key_heads", false),
        (LINEAR, "linear_num_value_heads", false),
        (LINEAR, "linear_key_head_dim", false),
        (LINEAR, "linear_value_head_dim", false),
        (LINEAR, "linear_conv_kernel_dim", false),
        (MAMBA, "mamba_num_heads", false),
        (MAMBA, "mamba_head_dim", false),
        (MAMBA, "ssm_state_size", false),
        (MAMBA, "n_groups", false),
        (MAMBA, "conv_kernel", false),
        (SLIDING, "sliding_window_pattern", true),
        (SLIDING, "swa_num_key_value_heads", false),
        (SLIDING, "swa_head_dim", false),
        (GEMMA4, "num_global_key_value_heads", false),
        (GEMMA4, "global_head_dim", false),
    ];
    for (shape, key, zero_ok) in fields {
        let text = import_small(shape).unwrap_or_else(|d| panic!("{key}: {}", d.message));
        imported_model(&text);
        let mut hostile = vec!["-8", "2.5", r#""8""#, "true", "[8]", "1099511627776"];
        if !zero_ok {
            hostile.push("0");
        }
        for value in hostile {
            let extra = if shape.is_empty() {
                format!(r#""{key}": {value}"#)
            } else {
                format!(r#"{shape}, "{key}": {value}"#)
            };
            let err = import_small(&extra).expect_err(&format!("{key} = {value} must be refused"));
            assert_eq!(err.code.as_str(), "E0901", "{key} = {value}");
            assert!(
                err.message.contains(&format!("`{key}`")),
                "{key} = {value}: {}",
                err.message
            );
        }
    }
    // Zero where it means "none" is read as none, and the model checks clean.
    for extra in [
        format!(
            r#"{MOE}, "n_shared_experts": 0, "shared_expert_intermediate_size": 0, "first_k_dense_replace": 0"#
        ),
        r#""kv_lora_rank": 0, "q_lora_rank": 0, "num_nextn_predict_layers": 0, "sliding_window": 0, "num_experts": 0"#.to_string(),
        r#""sliding_window": null, "head_dim": null, "num_key_value_heads": 2.0"#.to_string(),
        r#""quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1}"#
            .to_string(),
    ] {
        let text = import_small(&extra).unwrap_or_else(|d| panic!("{extra}: {}", d.message));
        imported_model(&text);
    }
}

/// Counts that are each in range but contradict one another, or per-layer lists with
/// entries no model has: refused at import with the fields named.
#[test]
fn inconsistent_configs_are_refused_at_import() {
    let vision_huge = VISION.replace("1152", "16777216");
    let cases: Vec<(String, &[&str])> = vec![
        (
            r#""num_experts": 4, "num_experts_per_tok": 8, "moe_intermediate_size": 64"#.into(),
            &["num_experts_per_tok", "4 experts", "num_experts"],
        ),
        (r#""num_key_value_heads": 3"#.into(), &["num_key_value_heads", "3"]),
        (r#""num_key_value_heads": 16"#.into(), &["num_key_value_heads", "16"]),
        (
            format!(r#"{GEMMA4}, "num_global_key_value_heads": 3"#),
            &["num_global_key_value_heads"],
        ),
        (
            format!(r#"{MOE}, "first_k_dense_replace": 13"#),
            &["first_k_dense_replace", "12 layers"],
        ),
        (
            r#""kv_lora_rank": 512, "qk_rope_head_dim": 64, "v_head_dim": 128"#.into(),
            &["qk_nope_head_dim"],
        ),
        (
            r#""attn_type_list": [0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1]"#.into(),
            &["attn_type_list", "2"],
        ),
        (
            r#""hybrid_layer_pattern": [0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, -1], "sliding_window": 128"#
                .into(),
            &["hybrid_layer_pattern", "-1"],
        ),
        (
            format!(r#"{MOE}, "moe_layer_freq": [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0.5]"#),
            &["moe_layer_freq", "0.5"],
        ),
        (
            format!(r#"{MOE}, "mlp_only_layers": [0, 12]"#),
            &["mlp_only_layers", "12"],
        ),
        (
            r#""layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention"]"#.into(),
            &["layer_types", "sliding_window"],
        ),
        (
            VISION.replace("27", "-27"),
            &["vision_config.depth", "negative"],
        ),
        (vision_huge, &["encoder_parameters", "vision_config"]),
        (
            r#""quantization_config": {"quant_method": "awq", "bits": 4.5}"#.into(),
            &["bits", "4.5"],
        ),
        (
            r#""quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 2000000}"#
                .into(),
            &["group_size", "quant_group"],
        ),
        (
            r#""num_hidden_layers": 65536, "hidden_size": 16777216, "num_attention_heads": 16384, "num_key_value_heads": 16384, "head_dim": 1024, "intermediate_size": 16777216"#.into(),
            &["parameters"],
        ),
    ];
    for (extra, needles) in cases {
        let err = import_small(&extra).expect_err(&extra);
        assert_eq!(err.code.as_str(), "E0901", "{extra}");
        for n in needles {
            assert!(
                err.message.contains(n),
                "{extra}: no `{n}` in {}",
                err.message
            );
        }
    }
}

/// Every count in every shared config, replaced by a negative, fractional or zero value:
/// the import either refuses it naming that field (or, for a zero, what the model then
/// lacks), or (a field import-hf does not read, or where 0 means none) writes a
/// definition that checks clean.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn no_count_in_a_shared_config_is_mapped_silently() {
    let shared = common::required_shared_dir();
    let dir = shared.join("models/hf");
    let mut refused = 0;
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let file_name = entry.file_name().to_string_lossy().to_string();
        if !file_name.ends_with("_config.json") || file_name.ends_with("_hf_quant_config.json") {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue; // Python's Infinity/NaN: covered by the snapshot test
        };
        let import_text = |config: &str| {
            import(&ImportRequest {
                config,
                quant_config: None,
                name: "m",
                repo: None,
                source_name: "config.json",
            })
        };
        let original = import_text(&v.to_string()).unwrap();
        let nested = v.get("text_config").is_some();
        let obj = v.get("text_config").unwrap_or(&v).as_object().unwrap();
        for (key, value) in obj {
            if value.as_u64().is_none() {
                continue;
            }
            for hostile in [
                serde_json::json!(-8),
                serde_json::json!(2.5),
                serde_json::json!(0),
            ] {
                let mut changed = v.clone();
                let target = if nested {
                    &mut changed["text_config"]
                } else {
                    &mut changed
                };
                target[key] = hostile.clone();
                let zero = hostile == serde_json::json!(0);
                match import_text(&changed.to_string()) {
                    // A field import-hf does not read changes nothing; one it reads is
                    // never taken as absent when negative or fractional.
                    Ok(text) => {
                        assert!(
                            zero || text == original,
                            "{file_name}: {key} = {hostile} was read as absent:\n{text}"
                        );
                        imported_model(&text);
                    }
                    // A negative or fractional count is refused naming its field; a
                    // zero may instead make the model lack what it then needs (no
                    // experts: no `intermediate_size` for dense layers), but never
                    // reaches the last-resort check of the written definition.
                    Err(d) => {
                        let named = d.message.contains(&format!("`{key}`"));
                        assert!(
                            named || (zero && !d.message.contains("inconsistent")),
                            "{file_name}: {key} = {hostile}: {}",
                            d.message
                        );
                        refused += 1;
                    }
                }
            }
        }
    }
    assert!(refused > 100, "only {refused} refusals");
}

/// Gemma 4's MoE names its counts as vLLM 0.33's `models/gemma4.py` reads them:
/// `num_experts`, `top_k_experts` (not `num_experts_per_tok`) and
/// `expert_intermediate_size`, and keeps its dense MLP beside the experts in every layer
/// (an always-on shared expert of `intermediate_size`). The real Gemma 4 31B config with
/// its MoE keys set (this repository holds no Gemma 4 MoE config; the values are ours).
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn gemma_4_moe_keys_are_read_as_vllm_reads_them() {
    let Some(shared) = common::shared_dir() else {
        return;
    };
    let path = shared.join("models/hf/nvidia--Gemma-4-31B-IT-NVFP4_config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("quantization_config");
    let text = &mut v["text_config"];
    text["enable_moe_block"] = true.into();
    text["num_experts"] = 128.into();
    text["top_k_experts"] = 8.into();
    text["expert_intermediate_size"] = 704.into();
    let config = v.to_string();
    let out = import(&ImportRequest {
        config: &config,
        quant_config: None,
        name: "gemma_4_moe",
        repo: None,
        source_name: "config.json",
    })
    .unwrap_or_else(|d| panic!("{}", d.message));
    for want in [
        "experts = 128",
        "experts_per_token = 8 // top_k_experts",
        "moe_intermediate = 704 // expert_intermediate_size",
        "shared_experts = 1",
        "shared_expert_intermediate = 21504",
    ] {
        assert!(out.contains(want), "no `{want}` in\n{out}");
    }
    let m = imported_model(&out);
    // routed experts: 60 layers × 128 × (gate, up, down) 5376 × 704; the dense MLP beside
    // them in every layer: 60 × 3 × 5376 × 21504
    let p = architecture::parameters(&m);
    let routed = 60.0 * 128.0 * 3.0 * 5376.0 * 704.0;
    let mlp = 60.0 * 3.0 * 5376.0 * 21504.0;
    assert!(
        // (the routers, 60 × 5376 × 128, are the rest)
        (p.experts + p.mlps - routed - mlp).abs() < 0.005 * (routed + mlp),
        "{} in experts, {} in MLPs; want {routed} + {mlp}",
        p.experts,
        p.mlps
    );
}

/// Qwen3-32B-FP8 (intermediate 25,600, 64 heads × 128, 8 KV heads; blocks 128 × 128): the
/// importer reads the block from config.json. At tp 16 the down projection's 25,600 inputs
/// give 1,600 per rank = 12.5 blocks (vLLM: "Weight input_size_per_partition = 1600 is not
/// divisible by weight quantization block_k = 128."); at tp 8, 3,200 = 25 blocks, and the
/// attention output's 8,192 inputs give 1,024 = 8 blocks.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn qwen3_32b_fp8_imports_its_blocks_and_refuses_tp_16() {
    use dic_compiler::analysis::rules::{tp_refusal, valid_tp_sizes};
    use dic_compiler::diagnostics::Code;
    let dir = common::required_shared_dir().join("models/hf");
    let hf_config = |file: &str| std::fs::read_to_string(dir.join(file)).ok();
    let Some(m) =
        dic_compiler::import_hf::model_from_flat_configs("Qwen/Qwen3-32B-FP8", &hf_config)
    else {
        panic!("../shared/models/hf/Qwen--Qwen3-32B-FP8_config.json imports");
    };
    assert_eq!(m.detail.weight_block, vec![128, 128]);
    assert!(tp_refusal(&m, 8).is_none());
    let (code, why) = tp_refusal(&m, 16).unwrap();
    assert_eq!(code, Code::WidthNotDivisible);
    assert!(
        why.contains("input_size_per_partition = 1600") && why.contains("block_k = 128"),
        "{why}"
    );
    // The planner's sizes pass the same rule: tp 16 is not among them.
    assert_eq!(valid_tp_sizes(&m, 16), vec![1, 2, 4, 8]);
    // The same checkpoint without blocks (per-tensor scales) splits over tp 16.
    let mut per_tensor = m.clone();
    per_tensor.detail.weight_block.clear();
    assert!(tp_refusal(&per_tensor, 16).is_none());
}
