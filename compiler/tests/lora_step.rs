//! LoRA's cost per step by hand (`analysis::lora::StageLora`, applied in
//! `perf::step`): vLLM 0.33's punica kernels shrink (`tokens × in × r`) and expand
//! (`tokens × r × out`) on every adapted layer and read the slots of the distinct
//! adapters a step uses; and the experts' slots of a MoE model
//! (`lora/layers/fused_moe.py:FusedMoEWithLoRA`) in the memory check.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::catalog;
use dic_compiler::analysis::estimate::{self, EstimateRequest};
use dic_compiler::analysis::lora::{adapter_bytes, punica_index_bytes, LoraSpec};
use dic_compiler::analysis::memory::memory;
use dic_compiler::analysis::perf::{StepModel, FITTED};
use dic_compiler::analysis::Scenario;

/// `model` on one H100 SXM of a DGX, with an 8,192-token budget and no workload.
fn on_h100(model: &str, lora: Option<LoraSpec>) -> Scenario {
    let req = EstimateRequest {
        gpu: "h100_sxm".into(),
        gpus_per_node: Some(8),
        nodes: Some(1),
        max_num_batched_tokens: Some(8192.0),
        ..EstimateRequest::default()
    };
    let m = catalog::model(model).unwrap();
    let mut s = estimate::scenario(model, m, &req).unwrap();
    s.workload = None;
    s.engine.lora = lora;
    s
}

fn llama_8b_on_h100(lora: Option<LoraSpec>) -> Scenario {
    on_h100("llama_3_1_8b", lora)
}

fn four_adapters(rank: u64) -> Option<LoraSpec> {
    Some(LoraSpec {
        max_loras: 4,
        max_rank: rank,
        adapters: 4,
    })
}

/// H100 SXM at dic's fitted efficiencies: 989 TFLOPS × 0.550 and 3.35 TB/s × 0.832.
const FLOPS_PER_S: f64 = 989e12 * 0.550;
const BYTES_PER_S: f64 = 3.35e12 * 0.832;

/// The kernels' time from their FLOPs and bytes (`gemm::roofline`, exponent 2).
fn roofline(flops: f64, bytes: f64) -> f64 {
    ((flops / FLOPS_PER_S).powi(2) + (bytes / BYTES_PER_S).powi(2)).sqrt()
}

/// Llama 3.1 8B at TP 1: per unit of rank, a layer's adapted linear layers hold 81,920
/// elements of A and B (QKV 18,432, o 8,192, gate/up 36,864, down 18,432), 32 layers
/// 2,621,440; the LM head's 4,096 + 128,256 = 132,352; 2,753,792 in all.
///
/// A decode step of `b` sequences: FLOPs 2 × r × b × 2,753,792; bytes min(4, b) distinct
/// adapters × r × 2,753,792 × 2 (bf16).
/// - b = 1, r = 16: 88.1 MB → 31.62 µs (compute 0.16 µs); r = 64: 126.5 µs.
/// - b = 64, r = 16: 4 adapters, 352.5 MB → 126.5 µs, 5.64 GFLOP → 10.4 µs: 126.9 µs;
///   r = 64: 507.6 µs.
#[test]
fn llama_3_1_8b_decode_step_grows_with_rank_and_distinct_adapters() {
    let elements = 2_753_792.0;
    let added = |rank: u64, running: f64| {
        let tpot = |s: &Scenario| {
            StepModel::new(s)
                .token_step(running, 1024.0, 0.0, 0.0, &FITTED)
                .tpot
        };
        tpot(&llama_8b_on_h100(four_adapters(rank))) - tpot(&llama_8b_on_h100(None))
    };
    let hand = |rank: u64, b: f64| {
        let r = rank as f64;
        roofline(2.0 * r * b * elements, b.min(4.0) * r * elements * 2.0)
    };
    for (rank, b, micros) in [
        (16, 1.0, 31.62),
        (64, 1.0, 126.47),
        (16, 64.0, 126.89),
        (64, 64.0, 507.56),
    ] {
        let got = added(rank, b);
        assert!(
            (got / hand(rank, b) - 1.0).abs() < 1e-9,
            "rank {rank}, batch {b}: {got} s against {} s",
            hand(rank, b)
        );
        assert!(
            (got * 1e6 / micros - 1.0).abs() < 1e-3,
            "rank {rank}, batch {b}: {} µs",
            got * 1e6
        );
    }
}

/// Two adapters served under four slots: a batch mixes at most the two (S-LoRA's
/// distinct adapters), so batch 64 reads half the slots of four adapters.
#[test]
fn a_batch_reads_no_more_adapters_than_are_served() {
    let two = LoraSpec {
        max_loras: 4,
        max_rank: 16,
        adapters: 2,
    };
    assert_eq!(two.distinct_adapters(64.0), 2.0);
    assert_eq!(two.distinct_adapters(1.0), 1.0);
    let loaded_later = LoraSpec { adapters: 0, ..two };
    assert_eq!(loaded_later.distinct_adapters(64.0), 4.0);
}

/// A 2,048-token prompt alone in a step (rank 16): the shrinks and expands of 2,048
/// tokens, 2 × 16 × (2,048 × 2,621,440 + 132,352) = 171.8 GFLOP → 315.8 µs, beside one
/// adapter's slots (31.6 µs): 317.4 µs more prefill, compute-bound.
#[test]
fn a_prompt_chunk_pays_the_adapters_compute() {
    let prefill = |s: &Scenario| StepModel::new(s).prefill_time(2048.0, 0.0, 0.0, 0.0, &FITTED);
    let got = prefill(&llama_8b_on_h100(four_adapters(16))) - prefill(&llama_8b_on_h100(None));
    let hand = roofline(
        2.0 * 16.0 * (2048.0 * 2_621_440.0 + 132_352.0),
        16.0 * 2_753_792.0 * 2.0,
    );
    assert!((got / hand - 1.0).abs() < 1e-9, "{got} against {hand}");
    assert!((got * 1e6 / 317.42 - 1.0).abs() < 1e-3, "{} µs", got * 1e6);
}

/// Qwen3-30B-A3B at TP 1 (48 MoE layers of 128 experts, hidden 2,048, expert width 768):
/// per unit of rank, an expert's w1/w3 A 2 × 2,048 and B 2 × 768, w2 A 768 and B 2,048,
/// 8,448 elements; × 128 experts × 48 layers = 51,904,512; × 4 slots × 16 × 2 bytes =
/// 6,643,777,536 B (6.19 GiB) beside the attention projections' and heads' slots.
#[test]
fn qwen3_30b_a3b_counts_its_experts_lora_slots() {
    let spec = LoraSpec {
        max_loras: 4,
        max_rank: 16,
        adapters: 0,
    };
    let before = memory(&on_h100("qwen3_30b_a3b", None));
    let after = memory(&on_h100("qwen3_30b_a3b", Some(spec)));
    let m = catalog::model("qwen3_30b_a3b").unwrap();
    let added = after.stages[0].weights - before.stages[0].weights;
    let rest = adapter_bytes(&m, 1, 0..48, true, true, spec) + punica_index_bytes(8192);
    assert_eq!(added - rest, 6_643_777_536.0);
}

/// E0317: vLLM 0.33 refuses LoRA on MiMo-V2-Flash and Kimi K2.6 (`MiMoV2FlashForCausalLM`,
/// `KimiK25ForConditionalGeneration` implement no `SupportsLoRA`) and on a vocabulary over 258,048 where the class wraps its LM head
/// (Llama's); Gemma 4's class wraps none, so its 262,144 tokens pass.
#[test]
fn vllms_model_level_lora_refusals_are_e0317() {
    use dic_compiler::diagnostics::Code;
    let check = |imports: &str, model: &str, node: &str, layout: &str| {
        let src = format!(
            "import std.nodes.{node}\n{imports}\n\
             cluster c {{ nodes = 1 × {node} }}\n\
             deploy d {{ model = {model}, cluster = c, layout = {layout}, lora = {{ max_rank = 16 }} }}\n"
        );
        let world = dic_compiler::source::MemoryWorld::new().with("l.dist", &src);
        let checked = dic_compiler::driver::check_text(&world, "l.dist", &src);
        checked
            .diagnostics
            .iter()
            .filter(|d| d.code == Code::LoraUnsupported)
            .map(|d| d.message.clone())
            .collect::<Vec<_>>()
    };
    let cases = [
        // (imports, model, node, layout, what the refusal says; "" where none)
        (
            "import std.models.mimo_v2_flash",
            "mimo_v2_flash",
            "dgx_h200",
            "tp 8",
            "LoRA is not supported for MiMoV2FlashForCausalLM",
        ),
        (
            "import std.models.kimi_k2_6_nvfp4",
            "kimi_k2_6_nvfp4",
            "dgx_b200",
            "tp 8",
            "LoRA is not supported for KimiK25ForConditionalGeneration",
        ),
        (
            "import std.models.llama_3_1_8b\nmodel wide = llama_3_1_8b { vocab = 262144 }",
            "wide",
            "dgx_h100",
            "tp 1",
            "vocab size must be <= 258048",
        ),
        (
            "import std.models.llama_3_1_8b\nmodel wide = llama_3_1_8b { vocab = 258048 }",
            "wide",
            "dgx_h100",
            "tp 1",
            "",
        ),
        (
            "import std.models.gemma_4_31b_nvfp4",
            "gemma_4_31b_nvfp4",
            "dgx_b200",
            "tp 2",
            "",
        ),
    ];
    for (imports, model, node, layout, refusal) in cases {
        let got = check(imports, model, node, layout);
        if refusal.is_empty() {
            assert!(got.is_empty(), "{model}: {got:?}");
        } else {
            assert_eq!(got.len(), 1, "{model}: {got:?}");
            assert!(got[0].contains(refusal), "{model}: {got:?}");
        }
    }
}
