//! The profile run's activation peak (`activation::activation_peak_terms`) against hand
//! computations from what vLLM 0.33's `gpu_model_runner.profile_run` allocates: a dummy
//! forward pass of `max_num_batched_tokens` tokens (`_dummy_run`, one layer's tensors
//! alive at a time), then on the last stage the sampler over `min(max_num_batched_tokens,
//! max_num_seqs)` requests (`_dummy_sampler_run`: the logits in bf16, their fp32 copy and
//! two more fp32 `[requests × vocab]` buffers of FlashInfer's or the Triton path's
//! top-k/top-p sampling). The phases do not overlap, so the peak is the largest of them,
//! plus the fused-MoE workspace, which vLLM keeps allocated.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::activation::{activation_peak_terms, ActivationPeak};
use dic_compiler::analysis::catalog;
use dic_compiler::analysis::estimate::{self, EstimateRequest};
use dic_compiler::analysis::memory::activation_peak;
use dic_compiler::analysis::scenario::{Scenario, GIB};
use dic_compiler::program::Layout;

fn on_one_gpu(model: &str, gpu: &str, req: EstimateRequest) -> Scenario {
    let req = EstimateRequest {
        gpu: gpu.into(),
        layout: Layout::default(),
        max_model_len: Some(8192.0),
        ..req
    };
    estimate::scenario(model, catalog::model(model).unwrap(), &req).unwrap()
}

/// Llama-3.1-70B in FP8 on one H100 at vLLM's defaults for an 80 GB GPU (a token budget
/// of 8192, 1024 sequences): hidden 8192, intermediate 28,672, 64 query and 8 KV heads of
/// 128, vocabulary 128,256.
/// - attention, at `o_proj`: residual + normed input (2 × 8192), QKV ((64 + 2 × 8) × 128
///   = 10,240), attention output (8192), `o_proj` output (8192) = 43,008 bf16 per token:
///   8192 × 43,008 × 2 = 704,643,072 B;
/// - dense MLP, at `SiluAndMul`: residual + normed input (16,384), gate/up (57,344),
///   activation (28,672) = 102,400 per token: 1,677,721,600 B;
/// - sampler: the forward's output 8192 × 8192 × 2 = 134,217,728 B, the 1024 sampled rows
///   and their random stand-in 2 × 1024 × 8192 × 2 = 33,554,432 B, and 1024 × 128,256 =
///   131,334,144 logits × (2 + 3 × 4) B = 1,838,678,016 B: 2,006,450,176 B.
///
/// The sampler decides: 2,006,450,176 B = 1.87 GiB, where dic said 6.42 GiB (the forward
/// and ten fp32 logit buffers summed: 6,897,532,928 B).
#[test]
fn llama_70b_fp8_on_one_h100_by_hand() {
    let req = EstimateRequest {
        weights: Some("fp8".into()),
        ..EstimateRequest::default()
    };
    let s = on_one_gpu("llama_3_1_70b", "h100", req);
    assert_eq!(
        (s.engine.max_num_batched_tokens, s.engine.max_num_seqs),
        (8192, 1024)
    );
    let terms = activation_peak_terms(&s, true);
    assert_eq!(
        terms,
        ActivationPeak {
            attention: 704_643_072.0,
            dense_mlp: 1_677_721_600.0,
            moe_layer: 0.0,
            moe_workspace: 0.0,
            sampler: 134_217_728.0 + 33_554_432.0 + 1_838_678_016.0,
        }
    );
    assert_eq!(activation_peak(&s, true), 2_006_450_176.0);
    assert!((activation_peak(&s, true) / GIB - 1.869).abs() < 0.001);
    // A stage that is not the last samples nothing: the MLP decides.
    assert_eq!(activation_peak(&s, false), 1_677_721_600.0);
    // At 256 sequences the sampler (0.55 GB) falls below the MLP.
    let mut fewer = s.clone();
    fewer.engine.max_num_seqs = 256;
    assert_eq!(activation_peak(&fewer, true), 1_677_721_600.0);
}

/// Qwen3-30B-A3B (every layer MoE: 128 experts 768 wide, top 8; hidden 2048, 32 query and
/// 4 KV heads of 128, vocabulary 151,936) on one H100 at the defaults (8192 tokens, 1024
/// sequences):
/// - attention: 8192 × (2 × 2048 + (32 + 8) × 128 + 32 × 128 + 2048) × 2 = 251,658,240 B;
/// - MoE layer beside the workspace (no shared experts): residual + normed input,
///   8192 × 4096 × 2 = 67,108,864 B; no dense MLP;
/// - fused-MoE workspace: 8192 tokens × 8 = 65,536 pairs × (max(768, 2048) +
///   max(1536, 2048)) × 2 B = 536,870,912 B, kept through the sampler pass;
/// - sampler: 8192 × 2048 × 2 + 2 × 1024 × 2048 × 2 + 1024 × 151,936 × 14
///   = 33,554,432 + 8,388,608 + 2,178,154,496 = 2,220,097,536 B.
///
/// Peak: 536,870,912 + 2,220,097,536 = 2,756,968,448 B (2.57 GiB; dic said 6.34 GiB).
#[test]
fn qwen3_30b_a3b_on_one_h100_by_hand() {
    let s = on_one_gpu("qwen3_30b_a3b", "h100", EstimateRequest::default());
    assert_eq!(
        (s.engine.max_num_batched_tokens, s.engine.max_num_seqs),
        (8192, 1024)
    );
    assert_eq!(
        activation_peak_terms(&s, true),
        ActivationPeak {
            attention: 251_658_240.0,
            dense_mlp: 0.0,
            moe_layer: 67_108_864.0,
            moe_workspace: 536_870_912.0,
            sampler: 2_220_097_536.0,
        }
    );
    assert_eq!(activation_peak(&s, true), 2_756_968_448.0);
    // On a stage without the sampler the attention decides, beside the workspace.
    assert_eq!(activation_peak(&s, false), 536_870_912.0 + 251_658_240.0);
}

/// Row r46 of `vllm-kv-logs-v1.csv`: a 2026-08 vLLM build serving Qwen3.8-27B (the
/// Qwen3.5-27B architecture: hidden 5120, intermediate 17,408, vocabulary 248,320) with a
/// 2048-token budget and the default sequences — 256 with that budget's defaults — logged
/// a peak of 2.4 GiB that includes its 1.55 GiB CUDA-graph estimate: 0.85 GiB of
/// activations. By hand: the sampler, 2048 × 5120 × 2 + 2 × 256 × 5120 × 2 + 256 ×
/// 248,320 × 14 = 20,971,520 + 5,242,880 + 889,978,880 = 916,193,280 B = 0.853 GiB, above
/// the MLP (2048 × (2 × 5120 + 3 × 17,408) × 2 = 255,852,544 B). Ten fp32 buffers summed
/// with the forward gave 2.6 GiB.
#[test]
fn a_recent_v1_log_measures_the_derived_sampler() {
    let req = EstimateRequest {
        max_num_batched_tokens: Some(2048.0),
        max_num_seqs: Some(256),
        ..EstimateRequest::default()
    };
    let s = on_one_gpu("qwen3_5_27b", "h100", req);
    let terms = activation_peak_terms(&s, true);
    assert_eq!(terms.sampler, 916_193_280.0);
    assert_eq!(terms.dense_mlp, 255_852_544.0);
    let logged = 2.4 - 1.55;
    assert!(
        (activation_peak(&s, true) / GIB - logged).abs() < 0.01,
        "{}",
        activation_peak(&s, true) / GIB
    );
}
