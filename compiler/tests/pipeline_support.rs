//! Row 11 of docs/vllm-rules.md: vLLM 0.33 refuses `pipeline_parallel_size > 1` for a model
//! class that does not implement `SupportsPP` (`config/model.py:ModelConfig.
//! verify_with_parallel_config`). dic finds the class from the model's `hf` repository
//! (`analysis/vllm_class.rs`): `dic check` refuses such a layout (E0801) and proposes the
//! TP-only one, and the planner never ranks a layout with pipeline stages for it.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failure

use dic_compiler::diagnostics::Code;
use dic_compiler::driver::{self, Checked};
use dic_compiler::source::MemoryWorld;

/// Gemma 3n E4B as dic describes its language model (google/gemma-3n-E4B-it's
/// config.json `text_config`), served by vLLM 0.33's `Gemma3nForConditionalGeneration`,
/// which has no `SupportsPP`; `hf` picks the class.
fn gemma_3n(hf: &str) -> String {
    format!(
        "model gemma_3n {{\n  hf = \"{hf}\"\n  parameters = 7.85B\n  layers = 35\n  hidden = 2048\n  \
         heads = 8\n  kv_heads = 2\n  head_dim = 256\n  intermediate = 16384\n  vocab = 262400\n  \
         max_context = 32768 tokens\n  dtype = bf16\n}}\n"
    )
}

fn check(hf: &str, nodes: u64, deploy: &str) -> Checked {
    let src = format!(
        "import std.nodes.dgx_h100\ncluster c {{ nodes = {nodes} × dgx_h100 }}\n{}{deploy}\n",
        gemma_3n(hf)
    );
    let world = MemoryWorld::new().with("p.dist", &src);
    driver::check_file(&world, "p.dist").unwrap()
}

#[test]
fn pipeline_stages_on_a_class_without_supports_pp_are_refused() {
    let deploy = "deploy d { model = gemma_3n, cluster = c, layout = tp 2 × pp 2, engine = vllm { max_model_len = 8k tokens } }";
    let refused = check("google/gemma-3n-E4B-it", 1, deploy);
    let e = refused
        .diagnostics
        .iter()
        .find(|d| d.code == Code::UnsupportedLaunch)
        .unwrap_or_else(|| panic!("no E0801: {:?}", refused.diagnostics));
    assert!(
        e.message.contains("Gemma3nForConditionalGeneration"),
        "{}",
        e.message
    );
    assert!(e.message.contains("SupportsPP"), "{}", e.message);
    // the TP-only layout on the same 4 GPUs (2 KV heads, each replicated over 2 ranks)
    let help = e.help.as_deref().unwrap_or("");
    assert!(help.contains("`tp 4 × pp 1 × dp 1`"), "{help}");
    // that layout checks clean, and so does the same model under a class with PP
    let tp_only = check(
        "google/gemma-3n-E4B-it",
        1,
        "deploy d { model = gemma_3n, cluster = c, layout = tp 4, engine = vllm { max_model_len = 8k tokens } }",
    );
    assert!(!tp_only.has_errors(), "{:?}", tp_only.diagnostics);
    let with_pp = check("example/llama-shaped", 1, deploy);
    assert!(
        !with_pp
            .diagnostics
            .iter()
            .any(|d| d.code == Code::UnsupportedLaunch),
        "{:?}",
        with_pp.diagnostics
    );
}

#[test]
fn the_planner_ranks_no_pipeline_stages_for_a_class_without_supports_pp() {
    let deploy = "workload w { prompt = 2k tokens, output = 256 tokens, concurrency = 64 }\n\
                  deploy d { model = gemma_3n, cluster = c, workload = w, layout = auto, engine = vllm { max_model_len = 8k tokens } }";
    let stages = |hf: &str| {
        let checked = check(hf, 2, deploy);
        let search = checked.deployments[0].search.clone().unwrap();
        assert!(!search.ranked.is_empty(), "{hf}: nothing ranked");
        search.ranked.iter().filter(|c| c.layout.pp > 1).count()
    };
    // the baseline: under a class with PP the search ranks pipeline layouts on two nodes
    assert!(stages("example/llama-shaped") > 0);
    assert_eq!(stages("google/gemma-3n-E4B-it"), 0);
}
