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
    assert_eq!(
        kv_bytes_per_token_layer(&m, 4),
        1024.0
    );
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
        s.workload = Some(WorkloadSpec {
            prompt: 1000.0,
            output: 200.0,
            load: Load::Concurrency(8),
            requests: None,
        });
        let mem = memory(&s);
        predict(&s, &mem, &FITTED).tpot
    };
    let (h100, h200, b200) = (tpot("h100_sxm"), tpot("h200_sxm"), tpot("b200"));
    assert!(h200 < h100 && b200 < h200, "{h100} {h200} {b200}");
}
