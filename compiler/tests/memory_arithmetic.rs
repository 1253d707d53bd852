//! The memory model against hand-computed cases. Each expected number is worked out in
//! the comment above it from the model's config.json values.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::catalog;
use dic_compiler::analysis::estimate::{self, EstimateRequest};
use dic_compiler::analysis::memory::{
    kv_bytes_per_token_layer, memory, pp_partition, rank_weights, weight_bytes,
};
use dic_compiler::analysis::scenario::*;
use dic_compiler::program::Layout;

fn scenario(model: &str, gpu: &str, gpus_per_node: u64, layout: Layout) -> Scenario {
    let req = EstimateRequest {
        gpu: gpu.into(),
        gpus_per_node: Some(gpus_per_node),
        nodes: Some(1),
        layout,
        gpu_memory_utilization: Some(0.9),
        max_model_len: Some(8192.0),
        max_num_seqs: Some(256),
        max_num_batched_tokens: Some(8192.0),
        ..EstimateRequest::default()
    };
    let mut s =
        estimate::scenario(model, catalog::model(model).unwrap(), &req).expect("valid request");
    s.workload = None;
    s
}

#[test]
fn llama_3_1_70b_bf16_tp4_kv_bytes_per_token() {
    let m = catalog::model("llama_3_1_70b").unwrap();
    // 8 KV heads / TP 4 = 2 per rank; K and V: 2 × 2 × 128 head_dim × 2 bytes = 1,024 B per layer
    assert_eq!(kv_bytes_per_token_layer(&m, 4), 1024.0);
    // × 80 layers = 81,920 B per token per GPU
    let s = scenario(
        "llama_3_1_70b",
        "h100_sxm",
        8,
        Layout {
            tp: 4,
            ..Layout::default()
        },
    );
    let mem = memory(&s);
    assert_eq!(mem.stages[0].kv_bytes_per_token, 81920.0);
    // TP 16 replicates KV heads (8 < 16): 1 head per rank, not 0.5
    assert_eq!(kv_bytes_per_token_layer(&m, 16), 512.0);
}

#[test]
fn llama_3_1_8b_matches_the_public_vllm_log() {
    // vllm-project/vllm#10517 (reference §4.2): Llama-3.1-8B, RTX 3090, 32 layers × 2 × 8 × 128 × 2 B
    // = 131,072 B (128 KiB) per token; 1,478 blocks × 16 = 23,648 tokens × 128 KiB = 2.887 GiB.
    let m = catalog::model("llama_3_1_8b").unwrap();
    assert_eq!(32.0 * kv_bytes_per_token_layer(&m, 1), 131072.0);
    assert!((1478.0 * 16.0 * 131072.0 / GIB - 2.887).abs() < 0.001);
}

#[test]
fn deepseek_v3_mla_latent_is_not_split_by_tp() {
    let m = catalog::model("deepseek_v3").unwrap();
    // (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 bytes = 1,152 B per token per layer, any TP
    assert_eq!(kv_bytes_per_token_layer(&m, 1), 1152.0);
    assert_eq!(kv_bytes_per_token_layer(&m, 8), 1152.0);
    // FP8 KV: 576 B
    let mut fp8 = m.clone();
    fp8.kv_cache = "fp8".into();
    assert_eq!(kv_bytes_per_token_layer(&fp8, 8), 576.0);
    // the default block size for MLA is 64 (FlashMLA)
    let s = scenario(
        "deepseek_v3",
        "h200_sxm",
        8,
        Layout {
            tp: 8,
            ep: true,
            ..Layout::default()
        },
    );
    assert_eq!(s.engine.block_size, 64);
    // 61 layers × 1,152 B = 70,272 B per token on every GPU
    assert_eq!(memory(&s).stages[0].kv_bytes_per_token, 61.0 * 1152.0);
}

#[test]
fn mixtral_experts_with_and_without_ep() {
    let m = catalog::model("mixtral_8x7b").unwrap();
    let h = 4096.0;
    let expert = 3.0 * h * 14336.0; // one expert: gate, up, down
                                    // EP over tp 2 × dp 2 = 4 ranks: 8 experts / 4 = 2 whole experts per rank per layer
    let ep = rank_weights(
        &m,
        &Layout {
            tp: 2,
            dp: 2,
            ep: true,
            ..Layout::default()
        },
        0..1,
        false,
        false,
    );
    assert_eq!(ep.expert_params, 2.0 * expert);
    // without EP the experts are TP-sharded over tp × dp = 4 ranks: 8/4 experts' worth
    let tp = rank_weights(
        &m,
        &Layout {
            tp: 2,
            dp: 2,
            ..Layout::default()
        },
        0..1,
        false,
        false,
    );
    assert_eq!(tp.expert_params, 8.0 * expert / 4.0);
    // uneven EP: 8 experts over 3 ranks → the first ranks hold ceil(8/3) = 3 (vLLM determine_expert_map)
    let uneven = rank_weights(
        &m,
        &Layout {
            tp: 3,
            ep: true,
            ..Layout::default()
        },
        0..1,
        false,
        false,
    );
    assert_eq!(uneven.expert_params, 3.0 * expert);
}

#[test]
fn weights_per_gpu_follow_the_shards() {
    // Llama 3.1 70B BF16 on TP 4, one stage: (70.55B params) × 2 B / 4 ≈ 35.3 GB ≈ 32.85 GiB,
    // the embedding and LM head being vocab-parallel too.
    let s = scenario(
        "llama_3_1_70b",
        "h100_sxm",
        8,
        Layout {
            tp: 4,
            ..Layout::default()
        },
    );
    let w = memory(&s).stages[0].weights / GIB;
    assert!((w - 32.85).abs() < 0.05, "{w}");
    // PP 3 over 80 layers: [27, 27, 26]; the first stage has the embedding, the last the LM head
    assert_eq!(pp_partition(80, 3), vec![27, 27, 26]);
    let s3 = scenario(
        "llama_3_1_70b",
        "h100_sxm",
        8,
        Layout {
            tp: 1,
            pp: 3,
            ..Layout::default()
        },
    );
    let st = memory(&s3).stages;
    assert!(
        st[0].weights > st[2].weights,
        "27 layers + embedding vs 26 layers + LM head"
    );
    // FP8 halves the quantized linear layers but not the embeddings
    // FP8 block scales: one fp32 per 128 × 128 weights.
    assert_eq!(weight_bytes("fp8"), 1.0 + 4.0 / 16384.0);
    // AWQ group 128: an fp16 scale and a packed 4-bit zero per group.
    assert_eq!(weight_bytes("awq"), 0.5 + 2.5 / 128.0);
}

#[test]
fn kv_tokens_are_whole_blocks_and_the_tightest_stage_decides() {
    let s = scenario(
        "llama_3_1_70b",
        "h100_sxm",
        8,
        Layout {
            tp: 4,
            pp: 2,
            ..Layout::default()
        },
    );
    let mem = memory(&s);
    assert_eq!(mem.kv_cache_tokens % mem.block_size, 0);
    let min_blocks = mem.stages.iter().map(|s| s.num_blocks).min().unwrap();
    assert_eq!(mem.kv_cache_tokens, min_blocks * mem.block_size);
    // budget = ceil(total × 0.9)
    assert_eq!(mem.stages[0].budget, (s.topology.gpu.memory * 0.9).ceil());
}

#[test]
fn datasheet_figures_alone_order_unseen_gpus() {
    // GPUs absent from the calibration table are predicted from their stdlib figures:
    // more HBM bandwidth must mean faster decode for the same memory-bound setup.
    use dic_compiler::analysis::perf::{predict, FITTED};
    let tpot = |gpu: &str| {
        let mut s = scenario(
            "llama_3_1_70b",
            gpu,
            8,
            Layout {
                tp: 8,
                ..Layout::default()
            },
        );
        s.workload = Some(WorkloadSpec::new(1000.0, 200.0, Load::Concurrency(8), None));
        let mem = memory(&s);
        predict(&s, &mem, &FITTED).tpot
    };
    let (h100, h200, b200) = (tpot("h100_sxm"), tpot("h200_sxm"), tpot("b200"));
    assert!(h200 < h100 && b200 < h200, "{h100} {h200} {b200}");
}

/// A scenario on one B200 with the KV cache fixed at `blocks` blocks of the model's pool,
/// so the arithmetic below is exact.
fn hybrid_scenario(model: dic_compiler::program::Model, max_model_len: f64) -> Scenario {
    let req = EstimateRequest {
        gpu: "b200".into(),
        gpus_per_node: Some(8),
        nodes: Some(1),
        layout: Layout::default(),
        max_model_len: Some(max_model_len),
        max_num_seqs: Some(256),
        max_num_batched_tokens: Some(8192.0),
        ..EstimateRequest::default()
    };
    let mut s = estimate::scenario("m", model, &req).expect("valid request");
    s.workload = None;
    s
}

fn all_full(mut m: dic_compiler::program::Model) -> dic_compiler::program::Model {
    for k in m.detail.layer_kinds.iter_mut() {
        k.mixer = dic_compiler::program::Mixer::Full;
    }
    m
}

#[test]
fn gpt_oss_sliding_layers_hold_their_window() {
    // gpt-oss-120b, TP 1, bf16 KV: 8 KV heads × (64 + 64) × 2 B = 2,048 B per token per layer.
    // 18 full + 18 sliding (window 128) → two groups of 18 layers; page = 16 × 2,048 =
    // 32,768 B; one block = 18 × 32,768 = 589,824 B. With 10,000 blocks of cache and
    // max_model_len 131,072 (max_num_batched_tokens 8,192): full needs 131,072 / 16 = 8,192
    // blocks, a window min(127 + 8,192, 131,072) → ceil(8,319 / 16) + 1 = 521 → 8,713 per
    // request: 10,000 / 8,713 = 1.1477 requests, 150,432 tokens.
    let m = catalog::model("gpt_oss_120b").unwrap();
    let mut s = hybrid_scenario(m.clone(), 131_072.0);
    s.engine.kv_cache_memory = Some(589_824.0 * 10_000.0);
    let mem = memory(&s);
    assert_eq!(mem.stages[0].num_blocks, 10_000);
    assert!((mem.max_concurrency - 10_000.0 / 8_713.0).abs() < 1e-9);
    assert_eq!(mem.kv_cache_tokens, 150_432);
    // All 36 layers as full attention: a block is 36 × 32,768 B → 5,000 blocks, 80,000
    // tokens, 0.61 requests. The windows nearly double the capacity (36 / 18 = 2, less
    // the window and the chunk it holds).
    let mut f = hybrid_scenario(all_full(m), 131_072.0);
    f.engine.kv_cache_memory = s.engine.kv_cache_memory;
    let full = memory(&f);
    assert_eq!(full.kv_cache_tokens, 80_000);
    let ratio = mem.max_concurrency / full.max_concurrency;
    assert!(
        (ratio - (10_000.0 / 8_713.0) / (5_000.0 / 8_192.0)).abs() < 1e-9,
        "{ratio}"
    );
}

#[test]
fn qwen3_5_linear_layers_hold_one_state_per_request() {
    // Qwen3.5-27B, TP 1, bf16: full attention 4 KV heads × (256 + 256) × 2 B = 4,096 B per
    // token per layer. A Gated DeltaNet state: conv (4 − 1) × (2·16·128 + 48·128 = 10,240)
    // = 30,720 elements × 2 B + recurrent 48 × 128 × 128 = 786,432 elements × 4 B (the
    // config's mamba_ssm_dtype float32) = 3,207,168 B. vLLM raises the attention block to
    // 16 × ceil(3,207,168 / (16 × 4,096)) = 784 tokens: page 3,211,264 B, the state padded to
    // it. 48 linear / 16 full → group size 16, groups 3 linear + 1 full; one block = 16 ×
    // 3,211,264 = 51,380,224 B. At max_model_len 32,768 a request needs ceil(32,768 / 784) =
    // 42 full blocks + 3 state blocks = 45 with prefix caching off (one block per state
    // group): with 1,000 blocks, 22.22 requests, 728,177 tokens.
    let m = catalog::model("qwen3_5_27b").unwrap();
    let mut s = hybrid_scenario(m.clone(), 32_768.0);
    s.engine.kv_cache_memory = Some(51_380_224.0 * 1_000.0);
    s.engine.enable_prefix_caching = Some(false);
    let mem = memory(&s);
    assert_eq!(mem.block_size, 784);
    assert_eq!(mem.stages[0].num_blocks, 1_000);
    assert!((mem.max_concurrency - 1_000.0 / 45.0).abs() < 1e-9);
    assert_eq!(mem.kv_cache_tokens, 728_177);
    // All 64 layers full: a 16-token block is 64 × 4,096 × 16 = 4,194,304 B → 12,250 blocks,
    // 196,000 tokens, 5.98 requests. The 1:3 hybrid holds 3.7× as many (the layer ratio,
    // 64 / 16 = 4, less the states).
    let mut f = hybrid_scenario(all_full(m), 32_768.0);
    f.engine.kv_cache_memory = s.engine.kv_cache_memory;
    let full = memory(&f);
    assert_eq!(full.kv_cache_tokens, 196_000);
    let ratio = mem.max_concurrency / full.max_concurrency;
    assert!(
        (ratio - (1_000.0 / 45.0) / (12_250.0 / 2_048.0)).abs() < 1e-9,
        "{ratio}"
    );
    assert!(ratio > 3.6 && ratio < 4.0);
    // Prefix caching on (vLLM 0.33's default, "align" mode) on a B200 with 128-wide keys
    // (FlashInfer's GDN prefill exports a checkpoint): 2 + 1 blocks per state group,
    // 42 + 3 × 3 = 51 blocks, 19.61 requests, ⌊32,768,000 / 51⌋ = 642,509 tokens.
    s.engine.enable_prefix_caching = None;
    let on = memory(&s);
    assert!((on.max_concurrency - 1_000.0 / 51.0).abs() < 1e-9);
    assert_eq!(on.kv_cache_tokens, 642_509);
}

#[test]
fn nemotron_mamba_layers_hold_one_fp32_state_per_request() {
    // Nemotron 3 Nano, TP 1: 6 attention layers, 2 KV heads × (128 + 128) × 2 B = 1,024 B per
    // token; 23 Mamba-2 layers: conv (4 − 1) × (64·64 + 2·8·128 = 6,144) × 2 B = 36,864 B +
    // SSM 64 × 64 × 128 × 4 B (fp32) = 2,097,152 B → 2,134,016 B. Block raised to
    // 16 × ceil(2,134,016 / 16,384) = 2,096 tokens, page 2,146,304 B. 23 Mamba / 6 attention
    // → group size 6: 1 attention group + 4 Mamba groups (one padding layer); one block =
    // 6 × 2,146,304 = 12,877,824 B. With prefix caching off each Mamba group holds one block
    // per request: at 32,768 tokens a request needs ceil(32,768 / 2,096) = 16 + 4 = 20
    // blocks, so 1,000 blocks hold 50 requests, 1,638,400 tokens.
    let m = catalog::model("nemotron_3_nano").unwrap();
    let mut s = hybrid_scenario(m, 32_768.0);
    s.engine.kv_cache_memory = Some(12_877_824.0 * 1_000.0);
    s.engine.enable_prefix_caching = Some(false);
    let mem = memory(&s);
    assert_eq!(mem.block_size, 2_096);
    assert_eq!(mem.stages[0].num_blocks, 1_000);
    assert!((mem.max_concurrency - 50.0).abs() < 1e-9);
    assert_eq!(mem.kv_cache_tokens, 1_638_400);
}

#[test]
fn nemotron_mamba_groups_hold_three_blocks_with_prefix_caching() {
    // As above, with prefix caching on (vLLM 0.33's default): `mamba_cache_mode = "align"`,
    // and `MambaSpec.max_memory_usage_bytes` is 2 + 0 speculative + 1 prefill-checkpoint
    // block (`MambaMixer2.get_kv_cache_spec`) per Mamba group: 16 + 4 × 3 = 28 blocks per
    // request, 1,000 / 28 = 35.71 requests, ⌊35.71 × 32,768⌋ = 1,170,285 tokens.
    // At 16,384 tokens: 8 + 12 = 20 blocks instead of 8 + 4 = 12, so a pool that held 446
    // requests holds 446 × 12 / 20 ≈ 268 (issue 38).
    let m = catalog::model("nemotron_3_nano").unwrap();
    let mut s = hybrid_scenario(m.clone(), 32_768.0);
    s.engine.kv_cache_memory = Some(12_877_824.0 * 1_000.0);
    let mem = memory(&s);
    assert!((mem.max_concurrency - 1_000.0 / 28.0).abs() < 1e-9);
    assert_eq!(mem.kv_cache_tokens, 1_170_285);
    let mut short = hybrid_scenario(m, 16_384.0);
    short.engine.kv_cache_memory = Some(12_877_824.0 * 446.0 * 12.0);
    let on = memory(&short).max_concurrency;
    short.engine.enable_prefix_caching = Some(false);
    let off = memory(&short).max_concurrency;
    assert!((off - 446.0).abs() < 1e-9, "{off}");
    assert!((on - 446.0 * 12.0 / 20.0).abs() < 1e-9, "{on}");
}

#[test]
fn dcp_grows_the_kv_tokens_linearly_not_squared() {
    // Llama 3.1 8B on tp 8 × dcp 2 (8 KV heads: one per rank): 32 layers × 1 × (128 + 128)
    // × 2 B = 16,384 B per token per rank, block 16 → 262,144 B a block. 1,000 blocks hold
    // 16,000 token slots on each rank, and DCP spreads each request over 2 ranks: 32,000
    // tokens (it said 64,000: the page was halved as well).
    let m = catalog::model("llama_3_1_8b").unwrap();
    let mut s = hybrid_scenario(m, 8_192.0);
    s.layout = Layout {
        tp: 8,
        dcp: 2,
        ..Layout::default()
    };
    s.engine.kv_cache_memory = Some(262_144.0 * 1_000.0);
    let mem = memory(&s);
    assert_eq!(mem.stages[0].num_blocks, 1_000);
    assert_eq!(mem.kv_cache_tokens, 32_000);
    // A request of 8,192 tokens keeps 4,096 per rank: 256 blocks, 1,000 / 256 requests.
    assert!((mem.max_concurrency - 1_000.0 / 256.0).abs() < 1e-9);
}

/// Whole-checkpoint bytes on one GPU (TP 1, one stage).
fn checkpoint_bytes(m: &dic_compiler::program::Model) -> f64 {
    rank_weights(m, &Layout::default(), 0..m.layers, true, true).bytes
}

#[test]
fn weight_bytes_per_format_follow_the_components() {
    use dic_compiler::architecture::parameters;
    // gpt-oss-120b: MXFP4 experts (4 bits + one 8-bit scale per 32 = 0.53125 B), the rest
    // (attention, router, embeddings) bf16. OpenAI's model card lists a 60.8 GiB checkpoint.
    let oss = catalog::model("gpt_oss_120b").unwrap();
    let p = parameters(&oss);
    let expect = p.experts * 0.53125 + (p.total - p.experts) * 2.0;
    assert!((checkpoint_bytes(&oss) - expect).abs() / expect < 1e-9);
    let gib = checkpoint_bytes(&oss) / GIB;
    assert!(
        (gib - 60.8).abs() / 60.8 < 0.01,
        "{gib:.2} GiB vs 60.8 GiB published"
    );

    // NVFP4 with BF16 attention (nvidia/DeepSeek-V3.1-NVFP4's exclude_modules): experts,
    // shared experts and dense MLPs at 4 bits + one FP8 scale per 16 (0.5625 B); attention,
    // routers and embeddings at 2 B.
    let ds = catalog::model("deepseek_v3_1_nvfp4").unwrap();
    let p = parameters(&ds);
    let routers = 58.0 * 7168.0 * 256.0; // 58 MoE layers, one router each (bf16)
    let expect = (p.experts + p.mlps - routers) * 0.5625
        + (p.mixers + routers + p.embedding + p.lm_head) * 2.0;
    assert!((checkpoint_bytes(&ds) - expect).abs() / expect < 1e-9);

    // ModelOpt MIXED_PRECISION (nvidia/DeepSeek-V4-Flash-NVFP4): NVFP4 experts, block-FP8
    // everything else that is quantized (1 B + one fp32 scale per 128 × 128).
    let v4 = catalog::model("deepseek_v4_flash_nvfp4").unwrap();
    let p = parameters(&v4);
    let routers = 43.0 * 4096.0 * 256.0;
    let fp8 = 1.0 + 4.0 / 16384.0;
    let expect = p.experts * 0.5625
        + (p.mixers + p.mlps - routers) * fp8
        + (routers + p.embedding + p.lm_head) * 2.0;
    assert!((checkpoint_bytes(&v4) - expect).abs() / expect < 1e-9);

    // Leading layers kept in BF16 (GLM-5.1-NVFP4: layers 0-2 wholly excluded) cost 2 B for
    // every parameter of those layers.
    // (Its shared experts are BF16 too; quantize them here so only the leading layers differ.)
    let mut glm = catalog::model("glm_5_1_nvfp4").unwrap();
    glm.detail.mlp_weights = None;
    let mut all_quant = glm.clone();
    all_quant.detail.unquantized_layers = 0;
    let dense_layer_mlp = 3.0 * 6144.0 * 12288.0; // layers 0-2 are dense (first_k_dense_replace 3)
    let extra = 3.0 * dense_layer_mlp * (2.0 - 0.5625);
    assert!((checkpoint_bytes(&glm) - checkpoint_bytes(&all_quant) - extra).abs() < 1.0);

    // Group-quantized INT4: compressed-tensors W4A16 (symmetric: a bf16 scale per group) and
    // AWQ (a scale and a packed 4-bit zero per group), groups of 128 unless said.
    let mut int4 = catalog::model("llama_3_1_8b").unwrap();
    let p = parameters(&int4);
    let linear = p.mixers + p.mlps;
    for (format, group, per) in [
        ("int4", 0, 0.5 + 2.0 / 128.0),
        ("int4", 32, 0.5 + 2.0 / 32.0),
        ("awq", 0, 0.5 + 2.5 / 128.0),
        ("gptq", 64, 0.5 + 2.5 / 64.0),
        ("fp8", 0, fp8),
    ] {
        int4.weights = format.into();
        int4.detail.quant_group = group;
        let expect = linear * per + (p.embedding + p.lm_head) * 2.0;
        assert!(
            (checkpoint_bytes(&int4) - expect).abs() / expect < 1e-9,
            "{format} group {group}"
        );
    }
}
