//! Rows 20, 21 and 32 of docs/vllm-rules.md: options dic does not write but `extra_args`
//! passes to `vllm serve`, checked against the layout as vLLM 0.33 checks them at
//! start-up — expert-parallel load balancing (E0412) and chunked prefill turned off (E0510).

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failure

use dic_compiler::diagnostics::{Code, Diagnostic};
use dic_compiler::driver::{self, Checked};
use dic_compiler::source::MemoryWorld;

fn check(src: &str) -> Checked {
    let world = MemoryWorld::new().with("c.dist", src);
    driver::compile_file(&world, "c.dist").unwrap()
}

/// Qwen3-30B-A3B (128 experts) on one DGX H100.
fn compile(layout: &str, engine: &str) -> Checked {
    check(&format!(
        "import std.nodes.dgx_h100\nimport std.models.*\n\
         cluster one {{ nodes = 1 × dgx_h100 }}\n\
         deploy d {{ model = qwen3_30b_a3b, cluster = one, layout = {layout}, engine = vllm {{ {engine} }} }}\n"
    ))
}

fn find(c: &Checked, code: Code) -> Option<&Diagnostic> {
    c.diagnostics.iter().find(|d| d.code == code)
}

/// `ParallelConfig._validate_parallel_config`: "enable_expert_parallel must be True to
/// use EPLB." and "EPLB requires tensor, prefill-context, or data parallelism".
#[test]
fn eplb_needs_expert_parallelism_over_more_than_one_rank() {
    let eplb = r#"extra_args = ["--enable-eplb"]"#;
    let no_ep = compile("tp 2 × dp 4", eplb);
    let e = find(&no_ep, Code::EplbRefused).expect("E0412 without ep");
    assert!(
        e.message.contains("enable_expert_parallel must be True"),
        "{}",
        e.message
    );
    let even = compile("tp 2 × dp 4 × ep", eplb);
    assert!(
        find(&even, Code::EplbRefused).is_none(),
        "128 experts over 8 ranks"
    );
    // Redundant experts without EPLB.
    let redundant = compile(
        "tp 2 × dp 4 × ep",
        r#"extra_args = ["--eplb-config.num_redundant_experts=8"]"#,
    );
    let e = find(&redundant, Code::EplbRefused).expect("E0412: redundant without EPLB");
    assert!(e.message.contains("EPLB is not enabled"), "{}", e.message);
}

/// `FusedMoEFactory`: with EPLB, experts (+ redundant) split evenly over tp × dp EP ranks.
/// Qwen3-30B-A3B's 128 experts over dp 6: 128 = 21 × 6 + 2, so vLLM raises "EPLB currently
/// only supports even distribution of experts across ranks. Got 128 experts and 6 EP
/// ranks."; 4 redundant experts make 132 = 22 × 6, which vLLM accepts.
#[test]
fn eplb_needs_experts_divisible_by_the_ep_ranks() {
    let c = compile("tp 1 × dp 6 × ep", r#"extra_args = ["--enable-eplb"]"#);
    let e = find(&c, Code::EplbRefused).expect("E0412: 128 experts over 6 ranks");
    assert!(
        e.message.contains("Got 128 experts and 6 EP ranks"),
        "{}",
        e.message
    );
    let help = e.help.clone().unwrap_or_default();
    assert!(help.contains("num_redundant_experts=4"), "{help}");
    let fixed = compile(
        "tp 1 × dp 6 × ep",
        r#"extra_args = ["--enable-eplb", "--eplb-config.num_redundant_experts=4"]"#,
    );
    assert!(find(&fixed, Code::EplbRefused).is_none());
}

/// `SchedulerConfig.verify_max_model_len`: chunked prefill off needs a token budget of at
/// least max_model_len; dic always writes `--max-num-batched-tokens`.
#[test]
fn chunked_prefill_off_needs_the_budget_to_hold_a_whole_prompt() {
    let off = r#"extra_args = ["--disable-chunked-prefill"]"#;
    let c = compile(
        "tp 1",
        &format!("max_model_len = 32768 tokens, max_num_batched_tokens = 8192, {off}"),
    );
    let e = find(&c, Code::BatchBelowModelLen).expect("E0510");
    assert!(
        e.message
            .contains("(8192) is smaller than max_model_len (32768)"),
        "{}",
        e.message
    );
    assert!(e
        .help
        .clone()
        .unwrap_or_default()
        .contains("max_num_batched_tokens = 32768"));
    let fits = compile(
        "tp 1",
        &format!("max_model_len = 8192 tokens, max_num_batched_tokens = 8192, {off}"),
    );
    assert!(find(&fits, Code::BatchBelowModelLen).is_none());
    let chunked = compile(
        "tp 1",
        "max_model_len = 32768 tokens, max_num_batched_tokens = 8192",
    );
    assert!(find(&chunked, Code::BatchBelowModelLen).is_none());
}

/// Row 74, `envs.py:env_with_choices`: `enable_envs_cache` reads every variable with a
/// fixed list of values as the engine starts, and refuses a value outside it.
#[test]
fn env_values_outside_their_choices_are_refused() {
    use dic_compiler::vllm_args::check_env;
    let env = |items: &[&str]| check_env(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let bad = env(&["VLLM_DEEP_GEMM_WARMUP=fast"]);
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].code, Code::InvalidExtraArg);
    assert!(
        bad[0]
            .message
            .contains("Invalid value 'fast' for VLLM_DEEP_GEMM_WARMUP"),
        "{}",
        bad[0].message
    );
    assert!(bad[0].help.contains("skip, full, relax"), "{}", bad[0].help);
    assert!(env(&["VLLM_DEEP_GEMM_WARMUP=skip"]).is_empty());
    // Case-insensitive choices take any case; case-sensitive ones do not.
    assert!(env(&["VLLM_FLOAT32_MATMUL_PRECISION=HIGH"]).is_empty());
    assert_eq!(env(&["VLLM_KV_CACHE_LAYOUT=nhd"]).len(), 1);
}

/// Row 47, `CudaPlatform.check_if_supports_dtype`: `--dtype bfloat16` forced on a T4
/// (compute capability 7.5); without it vLLM's `auto` runs FP16 there.
#[test]
fn bf16_forced_on_a_gpu_below_8_0_is_refused() {
    let src = |engine: &str| {
        format!(
            "import std.gpus.t4\nimport std.models.llama_3_1_8b\n\
             node t4x4 {{ gpus = 4 × t4 }}\ncluster old {{ nodes = 1 × t4x4 }}\n\
             deploy d {{ model = llama_3_1_8b, cluster = old, layout = tp 4, engine = vllm {{ max_model_len = 4096 tokens{engine} }} }}\n"
        )
    };
    let run = |engine: &str| check(&src(engine));
    let forced = run(r#", extra_args = ["--dtype", "bfloat16"]"#);
    let e = find(&forced, Code::FormatNeedsNewerGpu).expect("E0802 for bf16 on a T4");
    assert!(
        e.message.contains("compute capability of at least 8.0"),
        "{}",
        e.message
    );
    let auto = run("");
    assert!(find(&auto, Code::FormatNeedsNewerGpu).is_none());
}

/// Row 55, `CompilationConfig.adjust_cudagraph_sizes_for_spec_decode`: with 3 drafted
/// tokens a decode step is 4 tokens; a capture limit of 2 leaves no size that is a
/// multiple of 4, and vLLM raises "No valid cudagraph sizes after rounding to multiple of 4".
#[test]
fn a_capture_limit_below_a_speculative_step_is_refused() {
    let run = |limit: &str| {
        check(&format!(
            "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
             cluster one {{ nodes = 1 × dgx_h100 }}\n\
             deploy d {{ model = llama_3_1_8b, cluster = one, layout = tp 1, engine = vllm {{ max_model_len = 8192 tokens, speculative = {{ method = ngram, tokens = 3 }}, extra_args = [\"--max-cudagraph-capture-size\", \"{limit}\"] }} }}\n"
        ))
    };
    let low = run("2");
    let e = low
        .diagnostics
        .iter()
        .find(|d| d.code == Code::InvalidExtraArg && d.message.contains("No valid cudagraph sizes"))
        .unwrap_or_else(|| {
            panic!(
                "E0314 expected: {:?}",
                low.diagnostics
                    .iter()
                    .map(|d| &d.message)
                    .collect::<Vec<_>>()
            )
        });
    assert!(e.message.contains("multiple of 4"), "{}", e.message);
    let enough = run("8");
    assert!(!enough
        .diagnostics
        .iter()
        .any(|d| d.message.contains("No valid cudagraph sizes")));
}

/// Row 53 of docs/vllm-rules.md: vLLM 0.33 refuses full CUDA graphs for mixed steps
/// (`cudagraph_mode = FULL`) on an attention backend without graph support (`NEVER`:
/// Llama 4's chunked local attention), and downgrades every other mode itself. dic writes
/// no such mode: `cudagraph_mode` takes vLLM's four other modes only, and `extra_args`
/// cannot set the key beside it, one key or the whole JSON.
#[test]
fn full_cuda_graphs_for_mixed_steps_cannot_be_written() {
    let llama4 = |engine: &str| {
        check(&format!(
            "import std.nodes.dgx_h100\nimport std.models.*\n\
             cluster one {{ nodes = 1 × dgx_h100 }}\n\
             deploy d {{ model = llama_4_scout, cluster = one, layout = tp 8, engine = vllm {{ max_model_len = 32k tokens, {engine} }} }}\n"
        ))
    };
    let errors = |c: &Checked| {
        c.diagnostics
            .iter()
            .filter(|d| d.severity == dic_compiler::diagnostics::Severity::Error)
            .map(|d| d.code)
            .collect::<Vec<_>>()
    };
    let field = llama4("cudagraph_mode = full");
    assert!(
        !errors(&field).is_empty(),
        "`full` is not a mode dic writes"
    );
    for extra in [
        r#"extra_args = ["--compilation-config.cudagraph_mode=FULL"]"#,
        r#"extra_args = ["-cc", "{\"cudagraph_mode\": \"FULL\"}"]"#,
    ] {
        let c = llama4(extra);
        assert!(
            find(&c, Code::InvalidExtraArg).is_some(),
            "{extra}: {:?}",
            errors(&c)
        );
    }
    for mode in [
        "full_and_piecewise",
        "full_decode_only",
        "piecewise",
        "none",
    ] {
        let c = llama4(&format!("cudagraph_mode = {mode}"));
        assert!(errors(&c).is_empty(), "{mode}: {:?}", errors(&c));
    }
}

/// The message of the first diagnostic of `code`, if any.
fn message(c: Checked, code: Code) -> Option<String> {
    find(&c, code).map(|d| d.message.clone())
}

/// The KV connector rules only `env`, `extra_args` and `kv_offload` reach (rows 106–109):
/// `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` under any KV connector (P/D's NIXL,
/// `kv_offload`'s) unless the cumem allocator is on (`VllmConfig._verify_kv_transfer_compat`);
/// `kv_offload` on P/D pools, whose connector it silently replaces
/// (`_post_init_kv_transfer_config`); and a hybrid model's prefix caching without chunked
/// prefill (`MambaModelConfig.verify_and_update_config`) or KV offload without prefix
/// caching (`build_offloading_config`).
#[test]
fn kv_connectors_and_hybrid_prefix_caching_as_vllm_checks_them() {
    let llama = |layout: &str, engine: &str, extra: &str| {
        check(&format!(
            "import std.nodes.dgx_h200\nimport std.models.llama_3_1_70b\n\
             cluster c {{ nodes = 2 × dgx_h200 }}\n\
             model m = llama_3_1_70b {{ weights = fp8, kv_cache = fp8 }}\n\
             workload w {{ prompt = 8k tokens, output = 256 tokens, rate = 2 req/s, prefix_reuse = 50% }}\n\
             deploy d {{ model = m, cluster = c, workload = w, layout = {layout}, \
             engine = vllm {{ max_model_len = 16k tokens{engine} }}{extra} }}\n"
        ))
    };
    let expandable = r#", env = ["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]"#;
    let pd = "{ prefill = tp 4 × dp 2, decode = tp 2 × dp 2 }";
    let offload = ", kv_offload = { size = 100 GiB }";
    let e = message(llama(pd, expandable, ""), Code::PoolsCannotPair).expect("E0410");
    assert!(e.contains("expandable_segments:True"), "{e}");
    let e = message(llama(pd, "", offload), Code::PoolsCannotPair).expect("E0410");
    assert!(e.contains("replaces the P/D connector"), "{e}");
    let e = message(
        llama("tp 4 × dp 4", expandable, offload),
        Code::InvalidExtraArg,
    )
    .expect("E0314 with kv_offload");
    assert!(e.contains("OffloadingConnector"), "{e}");
    // The cumem allocator keeps the KV cache off the expandable pool; without a
    // connector the variable is vLLM's business alone.
    let cumem = format!(r#"{expandable}, extra_args = ["--enable-cumem-allocator"]"#);
    assert_eq!(message(llama(pd, &cumem, ""), Code::PoolsCannotPair), None);
    assert_eq!(
        message(llama("tp 4 × dp 4", expandable, ""), Code::InvalidExtraArg),
        None
    );
    assert_eq!(message(llama(pd, "", ""), Code::PoolsCannotPair), None);

    let qwen35 = |engine: &str| {
        check(&format!(
            "import std.nodes.dgx_h200\nimport std.models.qwen3_5_27b\n\
             cluster c {{ nodes = 1 × dgx_h200 }}\n\
             deploy d {{ model = qwen3_5_27b, cluster = c, layout = tp 2, engine = vllm {{ \
             max_model_len = 8k tokens, max_num_batched_tokens = 8192, {engine} }} }}\n"
        ))
    };
    let off = r#"extra_args = ["--disable-chunked-prefill"]"#;
    let e = message(qwen35(off), Code::InvalidExtraArg).expect("E0314 for the hybrid model");
    assert!(
        e.contains("Chunked prefill is required for Mamba prefix caching"),
        "{e}"
    );
    let no_cache = format!("{off}, enable_prefix_caching = false");
    assert_eq!(message(qwen35(&no_cache), Code::InvalidExtraArg), None);
    // KV offload on the hybrid model: only with prefix caching (E0511 without).
    let offload = |engine: &str| {
        check(&format!(
            "import std.nodes.dgx_h200\nimport std.models.qwen3_5_27b\n\
             cluster c {{ nodes = 1 × dgx_h200 }}\n\
             deploy d {{ model = qwen3_5_27b, cluster = c, layout = tp 2, \
             engine = vllm {{ max_model_len = 32k tokens{engine} }}, kv_offload = {{ size = 100 GiB }} }}\n"
        ))
    };
    let e = message(
        offload(", enable_prefix_caching = false"),
        Code::OffloadWithoutPrefixCaching,
    )
    .expect("E0511");
    assert!(e.contains("need --enable-prefix-caching"), "{e}");
    assert_eq!(
        message(offload(""), Code::OffloadWithoutPrefixCaching),
        None
    );
    // A model without recurrent layers caches prefixes without chunked prefill.
    let dense = compile(
        "tp 2",
        r#"max_model_len = 8k tokens, max_num_batched_tokens = 8192, extra_args = ["--disable-chunked-prefill"]"#,
    );
    assert_eq!(message(dense, Code::InvalidExtraArg), None);
}
