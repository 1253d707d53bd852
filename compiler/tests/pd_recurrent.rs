//! Row 65 of docs/vllm-rules.md: vLLM 0.33's NIXL connector transfers the recurrent
//! states of Mamba-1, Mamba-2 and Gated DeltaNet layers only
//! (`ssm_conv_transfer_utils.derive_mamba_conv_split`); a linear-attention model without
//! a causal conv (MiniMax's lightning attention, as `dic import-hf` writes it:
//! `linear_conv_kernel = 1`) cannot be split into prefill and decode pools (E0410).

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failure

use dic_compiler::diagnostics::Code;
use dic_compiler::driver;
use dic_compiler::source::MemoryWorld;

fn pools(model: &str) -> driver::Checked {
    let src = format!(
        "import std.nodes.dgx_h200\nimport std.models.qwen3_5_27b\n{model}\n\
         cluster hopper {{ nodes = 1 × dgx_h200 }}\n\
         workload w {{ prompt = 4k tokens, output = 500 tokens, rate = 1 req/s }}\n\
         deploy pd {{ model = m, cluster = hopper, workload = w, layout = {{ prefill = tp 4, decode = tp 4 }}, engine = vllm {{ max_model_len = 16k tokens }} }}\n"
    );
    let world = MemoryWorld::new().with("p.dist", &src);
    driver::compile_file(&world, "p.dist").unwrap()
}

#[test]
fn pd_pools_refuse_linear_attention_without_a_conv() {
    let lightning = pools("model m = qwen3_5_27b { linear_conv_kernel = 1 }");
    let e = lightning
        .diagnostics
        .iter()
        .find(|d| d.code == Code::PoolsCannotPair)
        .unwrap_or_else(|| panic!("E0410 expected: {:?}", lightning.diagnostics));
    assert!(e.message.contains("mamba_type=linear"), "{}", e.message);
    // Gated DeltaNet (a 4-wide conv) pairs.
    let gdn = pools("model m = qwen3_5_27b { linear_conv_kernel = 4 }");
    assert!(!gdn.has_errors(), "{:?}", gdn.diagnostics);
}
