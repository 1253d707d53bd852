//! LoRA's GPU memory by hand, two ranks × two models (`analysis::lora`): vLLM 0.33's
//! stacked A/B slots on every linear layer, the embedding and the LM head
//! (`lora/layers/base_linear.py`, `vocab_parallel_embedding.py`, `logits_processor.py`),
//! and what the memory check adds to the weights.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::catalog;
use dic_compiler::analysis::lora::{adapter_bytes, punica_index_bytes, LoraSpec};

const L: u64 = 4;

/// The slots of `L` adapters at rank `r` over a whole model (`layers` on one stage, with
/// the embedding and the LM head) at `tp`.
fn whole_model_slots(m: &dic_compiler::program::Model, tp: u64, layers: u64, r: u64) -> f64 {
    adapter_bytes(
        m,
        tp,
        0..layers,
        true,
        true,
        LoraSpec {
            max_loras: L,
            max_rank: r,
            adapters: 0,
        },
    )
}

/// Llama 3.1 8B at TP 1, 4 slots. Per slot and unit of rank, per layer:
/// QKV A 3 × 4096 + B (4096 + 2 × 1024) = 18,432; o A 4096 + B 4096 = 8,192;
/// gate/up A 2 × 4096 + B 2 × 14,336 = 36,864; down A 14,336 + B 4096 = 18,432;
/// 81,920 × 32 layers = 2,621,440; embedding and LM head 2 × (128,256 + 4096) = 264,704;
/// 2,886,144 elements × 4 slots × rank × 2 bytes (bf16).
#[test]
fn llama_3_1_8b_tp1_at_rank_16_and_64() {
    let m = catalog::model("llama_3_1_8b").unwrap();
    let at = |r| whole_model_slots(&m, 1, 32, r);
    assert_eq!(at(16), 369_426_432.0); // 2,886,144 × 4 × 16 × 2: 352.3 MiB
    assert_eq!(at(64), 1_477_705_728.0); // × 4 × 64 × 2: 1.38 GiB
}

/// Llama 3.1 70B at TP 4, 4 slots. Per slot and unit of rank, per layer on one GPU:
/// QKV A 3 × 8192 + B (8192/4 + 2 × 2 × 128) = 27,136; o A 8192/4 + B 8192 = 10,240;
/// gate/up A 2 × 8192 + B 2 × 28,672/4 = 30,720; down A 28,672/4 + B 8192 = 15,360;
/// 83,456 × 80 layers = 6,676,480; embedding and LM head 2 × (128,256 + 8192) = 272,896;
/// 6,949,376 elements.
#[test]
fn llama_3_1_70b_tp4_at_rank_16_and_64() {
    let m = catalog::model("llama_3_1_70b").unwrap();
    let at = |r| whole_model_slots(&m, 4, 80, r);
    assert_eq!(at(16), 889_520_128.0); // 6,949,376 × 4 × 16 × 2: 848.3 MiB
    assert_eq!(at(64), 3_558_080_512.0); // × 4 × 64 × 2: 3.31 GiB
                                         // Split over two PP stages, the stages' slots add up to the whole.
    let spec = LoraSpec {
        max_loras: L,
        max_rank: 16,
        adapters: 0,
    };
    let split = adapter_bytes(&m, 4, 0..40, true, false, spec)
        + adapter_bytes(&m, 4, 40..80, false, true, spec);
    assert_eq!(split, at(16));
}

/// The punica index tensors: 4 × int64 + 2 × 2 × int32 per batched token.
#[test]
fn punica_index_tensors() {
    assert_eq!(punica_index_bytes(8192), 393_216.0);
}

/// The memory check adds the slots and the punica index to the weights, the shrink
/// buffer (3 × tokens × rank × 4 bytes) to the activation peak, and the KV cache gives
/// up the sum.
#[test]
fn the_memory_check_counts_the_slots_beside_the_weights() {
    use dic_compiler::analysis::estimate::{self, EstimateRequest};
    use dic_compiler::analysis::memory::memory;
    let req = EstimateRequest {
        gpu: "h100_sxm".into(),
        gpus_per_node: Some(8),
        nodes: Some(1),
        max_num_batched_tokens: Some(8192.0),
        ..EstimateRequest::default()
    };
    let m = catalog::model("llama_3_1_8b").unwrap();
    let mut s = estimate::scenario("llama_3_1_8b", m, &req).unwrap();
    s.workload = None;
    let before = memory(&s);
    s.engine.lora = Some(LoraSpec {
        max_loras: L,
        max_rank: 16,
        adapters: 0,
    });
    let after = memory(&s);
    let (b, a) = (&before.stages[0], &after.stages[0]);
    assert_eq!(a.weights - b.weights, 369_426_432.0 + 393_216.0);
    assert_eq!(a.activations - b.activations, 3.0 * 8192.0 * 16.0 * 4.0);
    assert_eq!(
        b.kv_cache - a.kv_cache,
        369_426_432.0 + 393_216.0 + 3.0 * 8192.0 * 16.0 * 4.0
    );
}

/// vLLM 0.33's start-up refusals of a LoRA configuration are diagnostics before anything
/// is emitted: a rank outside `MaxLoRARanks`, a CPU cache smaller than the batch's
/// adapters, an adapter that is not `name=path`.
#[test]
fn vllms_lora_refusals_are_diagnostics() {
    let check = |lora: &str| {
        let src = format!(
            "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
             cluster c {{ nodes = 1 × dgx_h100 }}\n\
             deploy d {{ model = llama_3_1_8b, cluster = c, layout = tp 1, lora = {{ {lora} }} }}\n"
        );
        let world = dic_compiler::source::MemoryWorld::new().with("l.dist", &src);
        let checked = dic_compiler::driver::check_text(&world, "l.dist", &src);
        checked
            .diagnostics
            .iter()
            .map(|d| d.message.clone())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(check("max_rank = 64, max_loras = 2, max_cpu_loras = 2"), "");
    assert!(check("max_rank = 20").contains("`max_rank = 20` is not a rank vLLM serves"));
    assert!(
        check("max_loras = 4, max_cpu_loras = 2").contains("`max_cpu_loras` is below `max_loras`")
    );
    assert!(check("adapters = [\"sql\"]").contains("not `name=path`"));
    assert!(check("adapters = [\"a=x,y\"]").contains("not `name=path`"));
}

/// Mistral 7B's vLLM class (`model_executor/models/mistral.py:MistralForCausalLM`:
/// `embedding_modules = {}`) gives its embedding and LM head no LoRA slots, so only its
/// linear layers count: Llama 3.1 8B's shape, 81,920 × 32 layers = 2,621,440 elements ×
/// 4 slots × 16 × 2 bytes = 335,544,320 B, the same on a first and last stage as on a
/// middle one.
#[test]
fn mistral_7b_gives_its_embedding_and_lm_head_no_slots() {
    let m = catalog::model("mistral_7b").unwrap();
    let spec = LoraSpec {
        max_loras: L,
        max_rank: 16,
        adapters: 0,
    };
    assert_eq!(adapter_bytes(&m, 1, 0..32, true, true, spec), 335_544_320.0);
    assert_eq!(
        adapter_bytes(&m, 1, 0..32, false, false, spec),
        335_544_320.0
    );
}
