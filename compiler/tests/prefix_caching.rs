//! Prefix caching in the workload: `prefix_reuse` cuts the prefill work (TTFT) but not
//! what each running request holds; `shared_prefix` is also held once, so more requests
//! fit; the planner sees both; the launch turns prefix caching on; and a workload that
//! reuses prefixes on an engine with prefix caching off is W0503.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::diagnostics::Code;
use dic_compiler::driver;
use dic_compiler::source::MemoryWorld;

fn source(reuse: &str, layout: &str, engine: &str) -> String {
    format!(
        "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\n\
cluster one {{ nodes = 1 × dgx_h100, price = $24/h }}\n\
workload w {{ prompt = 16k tokens, output = 200 tokens, rate = 2 req/s{reuse} }}\n\
slo s {{ ttft.p95 <= 1200 ms, tpot.p95 <= 50 ms }}\n\
deploy d {{ model = llama_3_1_70b, cluster = one, workload = w, slo = s, layout = {layout}, engine = vllm {{ max_model_len = 20k tokens{engine} }} }}\n"
    )
}

fn compile(src: &str) -> driver::Checked {
    let world = MemoryWorld::new().with("p.dist", src);
    driver::compile_file(&world, "p.dist").unwrap()
}

/// (TTFT s, running cap) of the written layout at half a request per second.
fn predicted(src: &str) -> (f64, f64) {
    let c = compile(&src.replace("rate = 2 req/s", "rate = 0.5 req/s"));
    let p = c.deployments[0].analysis.prediction.clone().unwrap();
    (p.ttft, p.running_cap)
}

#[test]
fn reuse_cuts_prefill_and_a_shared_prefix_is_held_once() {
    let (none_ttft, none_cap) = predicted(&source("", "tp 4", ""));
    assert!(none_ttft.is_finite());
    let (reuse_ttft, reuse_cap) = predicted(&source(", prefix_reuse = 75%", "tp 4", ""));
    let (shared_ttft, shared_cap) = predicted(&source(", shared_prefix = 12k tokens", "tp 4", ""));
    // A quarter of the prompt is prefilled: TTFT falls by well over half (the fixed
    // per-request latency remains).
    assert!(reuse_ttft < 0.5 * none_ttft, "{reuse_ttft} vs {none_ttft}");
    // Reused prefixes of other conversations are not shared while running: same cap.
    assert!(
        (reuse_cap - none_cap).abs() < 1e-9,
        "{reuse_cap} vs {none_cap}"
    );
    // The same tokens as one shared prefix: the same prefill saving, and each request
    // holds only its own 4k + 200 tokens.
    assert!((shared_ttft - reuse_ttft).abs() / reuse_ttft < 0.05);
    assert!(
        shared_cap > 3.0 * none_cap,
        "cap {shared_cap} with a shared prefix vs {none_cap}"
    );
}

#[test]
fn the_planner_sees_the_saving_and_the_launch_turns_caching_on() {
    // Without reuse no layout of this node meets a 1.2 s TTFT on 16k-token prompts.
    let none = compile(&source("", "auto", ""));
    assert!(none.diagnostics.iter().any(|d| d.code == Code::NoLayout));
    let reuse = compile(&source(", prefix_reuse = 80%", "auto", ""));
    assert!(!reuse.has_errors(), "{:?}", reuse.diagnostics);
    let d = &reuse.plan.deployments[0];
    assert_eq!(d.engine.enable_prefix_caching, Some(true));
    // The schema's engine table turns this into `--enable-prefix-caching`.
    assert_eq!(
        d.engine
            .flag_value(dic_compiler::schema::EngineOption::EnablePrefixCaching),
        Some(dic_compiler::ir::FlagValue::Switch(true))
    );
    // No reuse, no flag: vLLM's default stands.
    let plain = compile(&source("", "tp 8", ""));
    let engine = &plain.deployments[0].scenario.scenario.engine;
    assert_eq!(engine.enable_prefix_caching, None);
}

#[test]
fn reuse_with_prefix_caching_off_is_w0503_and_predicts_no_saving() {
    let off = source(
        ", prefix_reuse = 75%",
        "tp 8",
        ", enable_prefix_caching = false",
    );
    let c = compile(&off);
    assert!(c
        .diagnostics
        .iter()
        .any(|d| d.code == Code::PrefixCachingOff));
    let (off_ttft, _) = predicted(&off);
    let (none_ttft, _) = predicted(&source("", "tp 8", ""));
    assert!(none_ttft.is_finite());
    assert!(
        (off_ttft - none_ttft).abs() < 1e-9,
        "{off_ttft} vs {none_ttft}"
    );
}

/// A 12k-token prompt of which the prefix cache holds 95% is charged for its 5% fresh
/// tokens: by hand, the front end is the fixed request latency plus the latency per
/// prompt token on the fresh tokens alone (0.05 × 12 000 = 600 tokens × 15.1 µs = 9.1
/// ms, not 181 ms on the whole prompt), and its prefill is that of the fresh tokens
/// attending to the cached ones. TTFT is then a small fraction of the uncached prompt's
/// and its prompt-dependent parts are the fresh tokens'.
#[test]
fn a_mostly_cached_prompts_ttft_is_its_fresh_tokens() {
    use dic_compiler::analysis::perf::FITTED;
    let src = |reuse: &str| {
        format!(
            "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\n\
cluster one {{ nodes = 1 × dgx_h100 }}\n\
workload w {{ prompt = 12k tokens, output = 200 tokens, concurrency = 1{reuse} }}\n\
deploy d {{ model = llama_3_1_70b, cluster = one, workload = w, layout = tp 4, engine = vllm {{ max_model_len = 16k tokens }} }}\n"
        )
    };
    let cached = compile(&src(", prefix_reuse = 95%"));
    let whole = compile(&src(""));
    let d = &cached.deployments[0];
    let w = d.scenario.scenario.workload.unwrap();
    assert_eq!(w.prompt, 12000.0);
    let fresh = w.prompt - w.cached_prompt;
    assert!((fresh - 600.0).abs() < 1e-6, "{fresh} fresh tokens");
    let p = d.analysis.prediction.clone().unwrap();
    let q = whole.deployments[0].analysis.prediction.clone().unwrap();
    let front = FITTED.request_latency + FITTED.prompt_token_latency * 600.0;
    assert!(
        (p.ttft_parts.front_end - front).abs() < 1e-12,
        "front end {} vs {front} by hand",
        p.ttft_parts.front_end
    );
    // The whole prompt's front end and prefill are ~20× the fresh tokens'.
    assert!(p.ttft_parts.prefill < 0.1 * q.ttft_parts.prefill, "{p:?}");
    assert!(
        p.ttft < 0.15 * q.ttft,
        "TTFT {} vs {} uncached",
        p.ttft,
        q.ttft
    );
    // What the fresh tokens cost (front end per token, prefill) outweighs what the
    // cached 95% still does (the step they wait on, the fixed latency aside).
    let fresh_parts = FITTED.prompt_token_latency * 600.0 + p.ttft_parts.prefill;
    assert!(fresh_parts > p.ttft_parts.step_wait, "{p:?}");
}
