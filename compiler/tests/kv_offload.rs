//! KV offloading by hand (`analysis::kv_offload`): the tokens a CPU buffer holds and the
//! PCIe time of a prefix hit, for Llama 3.1 70B (BF16 KV) at TP 4 on H100s.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::catalog;
use dic_compiler::analysis::estimate::{self, EstimateRequest};
use dic_compiler::analysis::kv_offload::{hit_pays, hit_transfer_seconds, offloaded_tokens};
use dic_compiler::analysis::memory::memory;
use dic_compiler::program::Layout;

const GIB: f64 = (1u64 << 30) as f64;

/// Per GPU at TP 4: K and V × 80 layers × 8 KV heads / 4 × 128 × 2 bytes = 81,920 B per
/// token; the engine's four GPUs 327,680. 200 GiB holds 200 × 2^30 / 327,680 = 655,360
/// tokens. An 8,192-token hit moves 8,192 × 81,920 = 671,088,640 B per GPU over PCIe Gen5
/// (63 GB/s per direction, 2.5 µs): 10.652 ms + 2.5 µs = 10.6547 ms.
#[test]
fn llama_3_1_70b_tp4_offloads_655k_tokens_and_a_hit_takes_10_7_ms() {
    let req = EstimateRequest {
        gpu: "h100_sxm".into(),
        gpus_per_node: Some(8),
        nodes: Some(1),
        layout: Layout {
            tp: 4,
            ..Layout::default()
        },
        max_model_len: Some(8192.0),
        ..EstimateRequest::default()
    };
    let m = catalog::model("llama_3_1_70b").unwrap();
    let mut s = estimate::scenario("llama_3_1_70b", m, &req).unwrap();
    s.workload = None;
    let per_gpu = memory(&s).stages[0].kv_bytes_per_token;
    assert_eq!(per_gpu, 81_920.0);
    let tokens = offloaded_tokens(200.0 * GIB, per_gpu * 4.0);
    assert_eq!(tokens, 655_360.0);
    let pcie = &s.topology.gpu.pcie;
    assert_eq!(pcie.bandwidth, 63e9);
    assert!((pcie.latency - 2.5e-6).abs() < 1e-15);
    let t = hit_transfer_seconds(8192.0, per_gpu, pcie.bandwidth, pcie.latency);
    assert!((t - 0.010_654_701).abs() < 1e-9, "{t}");
    // Against a prefill of 10k tokens/s per engine (0.1 ms a token: 819 ms for the hit),
    // loading pays; against 1M tokens/s (8.2 ms) it does not.
    assert!(hit_pays(t, 8192.0, 1e-4));
    assert!(!hit_pays(t, 8192.0, 1e-6));
}
