//! Deployments vLLM 0.33 refuses while `vllm serve` starts are refused by `dic check` (or
//! emitted in the form vLLM accepts): the rows of docs/vllm-rules.md that dic catches,
//! each tried on a deployment written in `.dist`.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::diagnostics::Code;
use dic_compiler::driver::{self, Checked};
use dic_compiler::source::MemoryWorld;

fn compile(src: &str) -> Checked {
    let head = "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
                cluster one { nodes = 1 × dgx_h100 }\n";
    let world = MemoryWorld::new().with("c.dist", &format!("{head}{src}"));
    driver::compile_file(&world, "c.dist").unwrap()
}

/// Rows 38 and 39: vLLM spells the 16-bit cache dtypes `bfloat16` and `float16`
/// (`CacheConfig._validate_cache_dtype` refuses `bf16`), and refuses one that differs
/// from the model's dtype (`VllmConfig._reject_mismatched_float_kv_cache`).
#[test]
fn a_16_bit_kv_cache_is_spelled_as_vllm_reads_it_and_must_be_the_models_dtype() {
    let same = compile(
        "model m = llama_3_1_8b { kv_cache = bf16 }\n\
         deploy d { model = m, cluster = one, layout = tp 1 }\n",
    );
    assert!(!same.has_errors(), "{:?}", same.diagnostics);
    assert_eq!(
        same.plan.deployments[0].model.kv_cache_dtype.as_deref(),
        Some("bfloat16")
    );
    let other = compile(
        "model m = llama_3_1_8b { kv_cache = fp16 }\n\
         deploy d { model = m, cluster = one, layout = tp 1 }\n",
    );
    let e = other
        .diagnostics
        .iter()
        .find(|d| d.code == Code::UnsupportedLaunch)
        .unwrap_or_else(|| panic!("{:?}", other.diagnostics));
    assert!(
        e.message.contains("fp16 KV cache on a bf16 model"),
        "{}",
        e.message
    );
    assert!(other.plan.deployments.is_empty());
}
