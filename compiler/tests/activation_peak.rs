//! The profile run's activation peak (`memory::activation_peak`) against a hand
//! computation from what vLLM 0.33's `gpu_model_runner.profile_run` allocates: a dummy
//! forward pass of `max_num_batched_tokens` tokens (`_dummy_run`, one layer's activations
//! alive at a time), then the sampler over `min(max_num_batched_tokens, max_num_seqs)`
//! requests on the last stage (`_dummy_sampler_run`: fp32 logits over the vocabulary with
//! temperature, top-k and top-p, whose sort, softmax, cumulative sum and scatter keep
//! about ten `[requests × vocab]` fp32 buffers alive — `LOGITS_FP32_COPIES`, which the
//! recent vLLM start-up logs of `vllm-kv-logs.csv` fix within 1%).

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::catalog;
use dic_compiler::analysis::estimate::{self, EstimateRequest};
use dic_compiler::analysis::memory::activation_peak;
use dic_compiler::program::Layout;

/// Llama-3.1-70B in FP8 on one H100 at vLLM's defaults for an 80 GB GPU (a token budget of
/// 8192, 1024 sequences). Forward, per token of the 8192: four hidden-sized bf16
/// activations (residual, normed input, attention and MLP outputs: 4 × 8192) and the fused
/// QKV output ((64 + 2 × 8) × 128 = 10,240), 2 B each: 704,643,072 B; and the MLP's
/// gate/up output (2 × 28,672 bf16): 939,524,096 B. Sampler: 1024 requests × 128,256
/// vocabulary × 4 B × 10 buffers = 5,253,365,760 B. In all 6,897,532,928 B = 6.42 GiB, the
/// figure issue 38 quotes: five sixths of it is the sampler's, sized by max_num_seqs.
#[test]
fn llama_70b_fp8_on_one_h100_by_hand() {
    let req = EstimateRequest {
        gpu: "h100".into(),
        layout: Layout::default(),
        weights: Some("fp8".into()),
        max_model_len: Some(8192.0),
        ..EstimateRequest::default()
    };
    let model = "llama_3_1_70b";
    let s = estimate::scenario(model, catalog::model(model).unwrap(), &req).unwrap();
    assert_eq!(
        (s.engine.max_num_batched_tokens, s.engine.max_num_seqs),
        (8192, 1024)
    );
    let forward = 8192.0 * (4.0 * 8192.0 + 10_240.0) * 2.0 + 8192.0 * 2.0 * 28_672.0 * 2.0;
    let sampler = 1024.0 * 128_256.0 * 4.0 * 10.0;
    assert_eq!(forward + sampler, 6_897_532_928.0);
    assert_eq!(activation_peak(&s, true), forward + sampler);
    // A stage that is not the last samples nothing.
    assert_eq!(activation_peak(&s, false), forward);
    // Lowering max_num_seqs to 256 cuts the sampler's share by four.
    let mut fewer = s.clone();
    fewer.engine.max_num_seqs = 256;
    assert_eq!(activation_peak(&fewer, true), forward + sampler / 4.0);
}
