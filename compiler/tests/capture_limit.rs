//! A CUDA-graph capture limit written in `extra_args` (`--max-cudagraph-capture-size`)
//! sets which steps run as graphs, as vLLM's `VllmConfig._set_cudagraph_sizes` takes it:
//! the written limit replaces the default `min(2 × max_num_seqs, 1024 on B200)`, within
//! the token budget. A prompt step past the default runs without graphs and waits on the
//! CPU's launches; within a written 2048 it does not, so TTFT falls; the graphs' memory
//! grows with the sizes captured.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::driver;
use dic_compiler::source::MemoryWorld;

fn compile(engine: &str) -> driver::Checked {
    let src = format!(
        "import std.nodes.dgx_b200\nimport std.models.llama_3_1_8b\n\
cluster one {{ nodes = 1 × dgx_b200, price = $40/h }}\n\
workload w {{ prompt = 1500 tokens, output = 200 tokens, concurrency = 4 }}\n\
deploy d {{ model = llama_3_1_8b, cluster = one, workload = w, layout = tp 8, \
engine = vllm {{ max_model_len = 4k tokens, max_num_seqs = 256, max_num_batched_tokens = 4096{engine} }} }}\n"
    );
    let world = MemoryWorld::new().with("p.dist", &src);
    driver::compile_file(&world, "p.dist").unwrap()
}

#[test]
fn a_written_capture_limit_puts_prompt_steps_in_graphs() {
    let default = compile("");
    let written = compile(", extra_args = [\"--max-cudagraph-capture-size\", \"2048\"]");
    let (d, w) = (&default.deployments[0], &written.deployments[0]);
    let (pd, pw) = (
        d.analysis.prediction.clone().unwrap(),
        w.analysis.prediction.clone().unwrap(),
    );
    // By default a 1500-token prompt step is past B200's 512 (2 × 256 sequences) and
    // runs eagerly: 32 layers of CPU launches are its floor. Written 2048, it is a graph.
    assert_eq!(
        d.scenario
            .scenario
            .engine
            .max_cuda_graph_size(Some("blackwell")),
        512
    );
    assert_eq!(
        w.scenario
            .scenario
            .engine
            .max_cuda_graph_size(Some("blackwell")),
        2048
    );
    assert!(pd.step.cpu_launches > 0.0, "{:?}", pd.step.cpu_launches);
    assert_eq!(pw.step.cpu_launches, 0.0);
    assert!(pw.ttft < pd.ttft, "{} vs {}", pw.ttft, pd.ttft);
    // More captured sizes, more graph memory, less KV cache.
    let (gd, gw) = (
        d.analysis.memory.tightest().cuda_graphs,
        w.analysis.memory.tightest().cuda_graphs,
    );
    assert!(gw > gd, "{gw} vs {gd}");
}

/// A written limit below 1 trips vLLM's assertion in `_set_cudagraph_sizes` ("Maximum
/// cudagraph size should be greater than or equal to 1 when using cuda graph."): E0314 at
/// `extra_args` (vLLM's words in the message), 0 and a negative number alike; under
/// `enforce_eager` no graph is captured and the limit is never read.
#[test]
fn a_capture_limit_below_one_is_refused_where_graphs_are_captured() {
    use dic_compiler::diagnostics::Code;
    for limit in ["0", "-3"] {
        let c = compile(&format!(
            ", extra_args = [\"--max-cudagraph-capture-size\", \"{limit}\"]"
        ));
        let e = c
            .diagnostics
            .iter()
            .find(|d| d.code == Code::InvalidExtraArg)
            .unwrap_or_else(|| panic!("{limit}: {:?}", c.diagnostics));
        assert!(
            e.message
                .contains("Maximum cudagraph size should be greater than or equal to 1"),
            "{}",
            e.message
        );
    }
    let eager =
        compile(", enforce_eager = true, extra_args = [\"--max-cudagraph-capture-size\", \"0\"]");
    assert!(
        !eager
            .diagnostics
            .iter()
            .any(|d| d.code == Code::InvalidExtraArg),
        "{:?}",
        eager.diagnostics
    );
}
