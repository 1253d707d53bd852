//! Speculative decoding: the draft's weights and KV layers are in the memory check, TPOT
//! comes from the tokens accepted per step against the verify and drafting cost (a win at
//! small batches, W0405 where it loses), each method needs what it drafts with (E0315).

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::diagnostics::Code;
use dic_compiler::driver;
use dic_compiler::source::MemoryWorld;

fn compile(model: &str, concurrency: u64, speculative: &str) -> driver::Checked {
    let engine = if speculative.is_empty() {
        String::new()
    } else {
        format!(", speculative = {{ {speculative} }}")
    };
    let src = format!(
        "import std.nodes.*\nimport std.models.*\n\
cluster c {{ nodes = 1 × dgx_h200 }}\n\
workload w {{ prompt = 1k tokens, output = 300 tokens, concurrency = {concurrency} }}\n\
deploy d {{ model = {model}, cluster = c, workload = w, layout = tp 8, engine = vllm {{ max_model_len = 8k tokens{engine} }} }}\n"
    );
    let world = MemoryWorld::new().with("p.dist", &src);
    driver::compile_file(&world, "p.dist").unwrap()
}

/// (TPOT s, weights bytes per GPU, KV tokens) of the deployment.
fn figures(c: &driver::Checked) -> (f64, f64, u64) {
    let a = &c.deployments[0].analysis;
    let p = a.prediction.as_ref().unwrap();
    (p.tpot, a.memory.stages[0].weights, a.memory.kv_cache_tokens)
}

const EAGLE: &str = "method = eagle3, source = \"yuhuili/EAGLE3-LLaMA3.1-Instruct-70B\", tokens = 3, acceptance = 70%";

#[test]
fn eagle3_wins_at_small_batches_and_costs_memory() {
    let plain = compile("llama_3_1_70b", 4, "");
    let spec = compile("llama_3_1_70b", 4, EAGLE);
    assert!(!spec.has_errors(), "{:?}", spec.diagnostics);
    let (t0, w0, kv0) = figures(&plain);
    let (t1, w1, kv1) = figures(&spec);
    // 2.53 tokens per step for a verify step that costs little more at 4 sequences.
    assert!(t1 < 0.6 * t0, "TPOT {t1} with EAGLE-3 vs {t0}");
    // One 70B-shaped layer (0.86B), the 3h → h fusion (0.2B) and a 32k-vocabulary head
    // (0.26B): 1.3B parameters in 16 bits, over 8 GPUs.
    let head = w1 - w0;
    assert!(
        (300e6..360e6).contains(&head),
        "{head} bytes of head per GPU"
    );
    // Its KV layer shares the pool: 1 more layer's worth per token over 80.
    let ratio = kv0 as f64 / kv1 as f64;
    assert!((1.005..1.03).contains(&ratio), "KV tokens {kv0} → {kv1}");
    assert!(!spec
        .diagnostics
        .iter()
        .any(|d| d.code == Code::SpeculationSlower));
}

#[test]
fn at_large_batches_low_acceptance_is_w0405() {
    // 1 + 0.1 × 5 = 1.5 tokens per step for a verify step of 6 tokens per sequence.
    let spec = "method = eagle3, source = \"x/y\", tokens = 5, acceptance = 10%";
    let c = compile("llama_3_1_70b", 512, spec);
    let w = c
        .diagnostics
        .iter()
        .find(|d| d.code == Code::SpeculationSlower)
        .unwrap_or_else(|| panic!("{:?}", c.diagnostics));
    assert!(w.message.contains("without it"), "{}", w.message);
    let (t_spec, _, _) = figures(&c);
    let (t_plain, _, _) = figures(&compile("llama_3_1_70b", 512, ""));
    assert!(t_spec > t_plain);
}

#[test]
fn mtp_drafts_with_the_checkpoint_s_own_layers() {
    let plain = compile("deepseek_v3", 8, "");
    let mtp = compile("deepseek_v3", 8, "method = mtp, tokens = 1");
    assert!(!mtp.has_errors(), "{:?}", mtp.diagnostics);
    let (t0, w0, _) = figures(&plain);
    let (t1, w1, _) = figures(&mtp);
    // One more MoE layer of 61 (plus its projection), sharded over the 8 GPUs.
    let layer = (w1 - w0) / w0;
    assert!(
        (0.01..0.03).contains(&layer),
        "MTP adds {layer:.3} of the weights"
    );
    assert!(t1 < t0, "{t1} vs {t0}");
    // A model without MTP layers cannot draft this way.
    let c = compile("llama_3_1_70b", 8, "method = mtp");
    assert!(c
        .diagnostics
        .iter()
        .any(|d| d.code == Code::SpecMethodUnavailable));
}

#[test]
fn a_draft_model_is_checked_and_counted_whole() {
    let c = compile(
        "llama_3_1_70b",
        4,
        "method = draft_model, draft = llama_3_1_8b, tokens = 4, acceptance = 60%",
    );
    assert!(!c.has_errors(), "{:?}", c.diagnostics);
    let (_, w0, _) = figures(&compile("llama_3_1_70b", 4, ""));
    let (_, w1, _) = figures(&c);
    // 8B in BF16 over 8 GPUs: about 2 GB each.
    assert!((1.7e9..2.3e9).contains(&(w1 - w0)), "{}", w1 - w0);
    let plan = &c.plan.deployments[0].engine;
    let sp = plan.speculative.as_ref().unwrap();
    assert_eq!(
        sp.model.as_deref(),
        Some("meta-llama/Llama-3.1-8B-Instruct")
    );
    // Another tokenizer is refused.
    let c = compile(
        "llama_3_1_70b",
        4,
        "method = draft_model, draft = qwen3_0_6b",
    );
    assert!(c
        .diagnostics
        .iter()
        .any(|d| d.code == Code::SpecMethodUnavailable));
}

#[test]
fn each_method_needs_its_own_input() {
    for (spec, says) in [
        ("method = eagle3", "needs the head's checkpoint"),
        ("method = draft_model", "needs the draft model"),
        ("method = ngram, source = \"x/y\"", "takes no `source`"),
    ] {
        let c = compile("llama_3_1_70b", 4, spec);
        assert!(
            c.diagnostics.iter().any(|d| d.message.contains(says)),
            "{spec}: {:?}",
            c.diagnostics
        );
    }
    // n-gram needs nothing on the GPU and still shortens TPOT at small batches.
    let c = compile("llama_3_1_70b", 4, "method = ngram, tokens = 3");
    assert!(!c.has_errors());
    let (t0, w0, _) = figures(&compile("llama_3_1_70b", 4, ""));
    let (t1, w1, _) = figures(&c);
    assert_eq!(w0, w1);
    assert!(t1 < t0);
}

/// The step's breakdown adds up: kernel groups (each at its own roofline), communication,
/// overhead, the CPU's launches, pipeline bubbles and drafting make TPOT, for a dense
/// model, a MoE with EP and a speculative deployment alike (what `dic estimate --json`
/// and the report's step chart show).
#[test]
fn the_step_breakdown_adds_up_to_tpot() {
    for c in [
        compile("llama_3_1_70b", 16, ""),
        compile("llama_3_1_70b", 4, EAGLE),
        compile("qwen3_235b_a22b_fp8", 32, ""),
    ] {
        let p = c.deployments[0].analysis.prediction.clone().unwrap();
        let s = &p.step;
        let k = s.kernels;
        let sum = k.dense_gemms
            + k.experts
            + k.attention
            + s.comm
            + s.overhead
            + s.cpu_launches
            + s.bubble
            + s.draft;
        assert!((sum - s.tpot).abs() <= 1e-9 * s.tpot, "{sum} vs {}", s.tpot);
        assert!(k.dense_gemms > 0.0 && k.attention > 0.0);
    }
}

/// TPOT (s) and the drafting's share of it of Llama 3.1 8B on one H100 serving 256-token
/// prompts and 300-token outputs at `concurrency` in flight, with EAGLE-3 (3 drafted
/// tokens at vLLM's acceptance rate of 70%) or without.
fn eagle3_8b(concurrency: u64, speculative: bool) -> (f64, f64) {
    let engine = if speculative {
        ", speculative = { method = eagle3, source = \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", tokens = 3, acceptance = 70% }"
    } else {
        ""
    };
    let src = format!(
        "import std.nodes.*\nimport std.models.*\n\
cluster c {{ nodes = 1 × dgx_h100 }}\n\
workload w {{ prompt = 256 tokens, output = 300 tokens, concurrency = {concurrency} }}\n\
deploy d {{ model = llama_3_1_8b, cluster = c, workload = w, layout = tp 1, engine = vllm {{ max_model_len = 4k tokens{engine} }} }}\n"
    );
    let world = MemoryWorld::new().with("p.dist", &src);
    let c = driver::compile_file(&world, "p.dist").unwrap();
    let p = c.deployments[0].analysis.prediction.clone().unwrap();
    (p.tpot, p.step.draft)
}

/// EAGLE-3's TPOT speedup falls with the batch: a verify step scores 1 + 3 tokens per
/// sequence, which costs little while the step reads the weights (1 in flight) and up to
/// four times the GEMM work once it is compute-bound. By hand: each step advances
/// 1 + 0.7 × 3 = 3.1 tokens per sequence, so the speedup is 3.1 × the plain step over
/// the verify step plus the drafting; at 1 in flight the verify step is the plain step
/// (memory-bound: the same weights read once, three more query tokens), so the speedup
/// is 3.1 × T / (T + drafting). (Measured: EAGLE-3 reports ~1.4× at batch 64 against
/// 2–3× at batch 1; with long contexts the KV reads, which the verify step shares among
/// its tokens, keep more of the speedup.)
#[test]
fn eagle3_speedup_falls_with_the_batch() {
    let speedups: Vec<f64> = [1, 16, 64, 256]
        .iter()
        .map(|&n| eagle3_8b(n, false).0 / eagle3_8b(n, true).0)
        .collect();
    for w in speedups.windows(2) {
        assert!(w[1] <= w[0] + 1e-9, "not monotone: {speedups:?}");
    }
    let (plain, _) = eagle3_8b(1, false);
    let (spec, draft) = eagle3_8b(1, true);
    // Per step, the speculative TPOT × 3.1 is the verify step plus the drafting.
    let verify = (spec - draft) * 3.1;
    assert!(
        (verify / plain - 1.0).abs() < 0.05,
        "verify {verify} vs {plain}"
    );
    let by_hand = 3.1 * plain / (plain + draft * 3.1);
    assert!(
        (speedups[0] / by_hand - 1.0).abs() < 0.05,
        "{speedups:?} vs {by_hand}"
    );
    // Compute-bound verify steps at 256 in flight keep under two thirds of it.
    assert!(speedups[3] < 0.7 * speedups[0], "{speedups:?}");
}

/// Llama 3.1 8B on one 8 × H100 node with EAGLE-3 drafting 5 tokens at 20% acceptance on
/// 128-token prompts and outputs, under a loose 60 ms TPOT bound, at `layout`.
fn short_and_loose(layout: &str) -> driver::Checked {
    let src = format!(
        "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
cluster c {{ nodes = 1 × dgx_h100, price = $24/h }}\n\
workload w {{ prompt = 128 tokens, output = 128 tokens, rate = 2 req/s }}\n\
slo s {{ ttft.p95 <= 2 s, tpot.p95 <= 60 ms }}\n\
deploy d {{ model = llama_3_1_8b, cluster = c, workload = w, slo = s, layout = {layout}, engine = vllm {{ max_model_len = 8k tokens, speculative = {{ method = eagle3, source = \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", tokens = 5, acceptance = 20% }} }} }}\n"
    );
    let world = MemoryWorld::new().with("p.dist", &src);
    driver::compile_file(&world, "p.dist").unwrap()
}

/// Where the load within the SLOs puts the batch past the draft's gain, the planner
/// drops it and the launch follows (no `--speculative-config`); the same deployment
/// written by hand is W0411, naming both goodputs. Where the draft is what meets the
/// TPOT bound (the `eagle3_8b` example's workload), `layout = auto` keeps it.
#[test]
fn the_planner_s_speculation_setting_reaches_the_launch() {
    let auto = short_and_loose("auto");
    assert!(!auto.has_errors(), "{:?}", auto.diagnostics);
    let engine = &auto.plan.deployments[0].engine;
    assert!(engine.speculative.is_none(), "{:?}", engine.speculative);
    assert!(!auto
        .diagnostics
        .iter()
        .any(|d| d.code == Code::SpeculationCostsGoodput));
    let written = short_and_loose("tp 1");
    assert!(written.plan.deployments[0].engine.speculative.is_some());
    let w = written
        .diagnostics
        .iter()
        .find(|d| d.code == Code::SpeculationCostsGoodput)
        .unwrap_or_else(|| panic!("{:?}", written.diagnostics));
    assert!(
        w.message.contains("req/s within the SLOs against") && w.message.contains("in flight"),
        "{}",
        w.message
    );

    let src = "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
cluster c { nodes = 1 × dgx_h100, price = $24/h }\n\
workload w { prompt = 2k tokens, output = 400 tokens, concurrency = 4 }\n\
slo s { ttft.p95 <= 300 ms, tpot.p95 <= 7.5 ms }\n\
deploy d { model = llama_3_1_8b, cluster = c, workload = w, slo = s, layout = auto, engine = vllm { max_model_len = 8k tokens, speculative = { method = eagle3, source = \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", tokens = 3, acceptance = 70% } } }\n";
    let world = MemoryWorld::new().with("p.dist", src);
    let kept = driver::compile_file(&world, "p.dist").unwrap();
    assert!(!kept.has_errors(), "{:?}", kept.diagnostics);
    let sp = kept.plan.deployments[0].engine.speculative.as_ref();
    assert_eq!(sp.map(|s| s.method.as_str()), Some("eagle3"));
}

/// A0701 proposes only what the checker accepts: `tp 1` carries this load on one GPU
/// only without the draft (with it, W0411), so a written `tp 2` is not told to use it.
#[test]
fn a_cheaper_layout_is_proposed_only_with_the_engine_as_written() {
    let c = short_and_loose("tp 2");
    assert!(!c.has_errors(), "{:?}", c.diagnostics);
    assert!(
        !c.diagnostics
            .iter()
            .any(|d| d.code == Code::CheaperLayout && d.message.contains("`tp 1 × pp 1 × dp 1`")),
        "{:?}",
        c.diagnostics
    );
}
