//! The engine block is read once, into the typed `VllmOptions`: every row of the schema's
//! engine table names its `EngineOption`, each option lands in its own field, and vLLM's
//! defaults (written once, in `schema::vllm_defaults`) are what the scenario fills and
//! what the options' documentation says.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::driver;
use dic_compiler::program::{Body, VllmOptions};
use dic_compiler::schema::{
    dic_defaults, engine_option, vllm_defaults, EngineOption, Kind, AUTOSCALE_FIELDS,
    SPECULATIVE_FIELDS, SPEC_METHODS, VLLM_OPTIONS,
};
use dic_compiler::source::MemoryWorld;

/// The position of `o` among the variants: exhaustive, so a new variant fails to build
/// here until it is listed in `EVERY`.
fn position(o: EngineOption) -> usize {
    use EngineOption as E;
    match o {
        E::Port => 0,
        E::GpuMemoryUtilization => 1,
        E::MaxModelLen => 2,
        E::MaxNumSeqs => 3,
        E::MaxNumBatchedTokens => 4,
        E::BlockSize => 5,
        E::EnforceEager => 6,
        E::CudagraphMode => 7,
        E::KvCacheMemory => 8,
        E::EnablePrefixCaching => 9,
        E::Speculative => 10,
        E::CpuOffload => 11,
        E::All2allBackend => 12,
        E::Dbo => 13,
        E::Launcher => 14,
        E::ExtraArgs => 15,
        E::Env => 16,
        E::ActivationMemory => 17,
        E::NonTorchMemory => 18,
        E::CudaGraphMemory => 19,
    }
}

const EVERY: [EngineOption; 20] = {
    use EngineOption as E;
    [
        E::Port,
        E::GpuMemoryUtilization,
        E::MaxModelLen,
        E::MaxNumSeqs,
        E::MaxNumBatchedTokens,
        E::BlockSize,
        E::EnforceEager,
        E::CudagraphMode,
        E::KvCacheMemory,
        E::EnablePrefixCaching,
        E::Speculative,
        E::CpuOffload,
        E::All2allBackend,
        E::Dbo,
        E::Launcher,
        E::ExtraArgs,
        E::Env,
        E::ActivationMemory,
        E::NonTorchMemory,
        E::CudaGraphMemory,
    ]
};

#[test]
fn every_engine_row_names_one_option_and_every_option_has_a_row() {
    for (i, o) in EVERY.iter().enumerate() {
        assert_eq!(position(*o), i, "{o:?} listed out of place");
        let field = o.field().unwrap_or_else(|| panic!("{o:?} has no row"));
        assert_eq!(EngineOption::named(field.name), Some(*o));
        assert_eq!(o.name(), field.name);
    }
    assert_eq!(VLLM_OPTIONS.len(), EVERY.len());
    for row in VLLM_OPTIONS {
        let o = row
            .engine
            .unwrap_or_else(|| panic!("`{}` names no option", row.name));
        assert_eq!(
            o.field().map(|f| f.name),
            Some(row.name),
            "two rows name {o:?}"
        );
    }
    assert_eq!(EngineOption::named("max_num_sequences"), None);
}

/// The deployment's typed engine options, from an engine block with `options`.
fn options(options: &str) -> VllmOptions {
    let src = format!(
        "import std.nodes.*\nimport std.models.*\n\
cluster c {{ nodes = 1 × dgx_h200 }}\n\
workload w {{ prompt = 1k tokens, output = 300 tokens, concurrency = 4 }}\n\
deploy d {{ model = llama_3_1_8b, cluster = c, workload = w, layout = tp 1 × dp 8, engine = vllm {{ {options} }} }}\n"
    );
    let world = MemoryWorld::new().with("p.dist", &src);
    let checked = driver::compile_file(&world, "p.dist").unwrap();
    checked
        .program
        .defs
        .iter()
        .flatten()
        .find_map(|d| match &d.body {
            Body::Deploy(deploy) if d.name == "d" => Some(deploy.engine.clone()),
            _ => None,
        })
        .unwrap()
}

#[test]
fn each_written_option_lands_in_its_own_field() {
    let o = options(
        "port = 9000, gpu_memory_utilization = 0.85, max_model_len = 4k tokens, \
         max_num_seqs = 48, max_num_batched_tokens = 3k tokens, block_size = 32, \
         enforce_eager = true, cudagraph_mode = piecewise, kv_cache_memory = 20 GiB, \
         enable_prefix_caching = false, speculative = { method = ngram, tokens = 5 }, \
         cpu_offload = 2 GiB, all2all_backend = deepep_low_latency, dbo = true, launcher = ray, \
         extra_args = [\"--trust-remote-code\"], env = [\"VLLM_ATTENTION_BACKEND=FLASHINFER\"], \
         activation_memory = 1 GiB, non_torch_memory = 2 GiB, cuda_graph_memory = 3 GiB",
    );
    let gib = 1024.0 * 1024.0 * 1024.0;
    assert_eq!(o.port, Some(9000));
    assert_eq!(o.gpu_memory_utilization, Some(0.85));
    assert_eq!(o.max_model_len, Some(4000.0));
    assert_eq!(o.max_num_seqs, Some(48));
    assert_eq!(o.max_num_batched_tokens, Some(3000.0));
    assert_eq!(o.block_size, Some(32));
    assert!(o.enforce_eager);
    assert_eq!(o.cudagraph_mode.as_deref(), Some("piecewise"));
    assert_eq!(o.kv_cache_memory, Some(20.0 * gib));
    assert_eq!(o.enable_prefix_caching, Some(false));
    let spec = o.speculative.unwrap();
    assert_eq!((spec.method.as_str(), spec.tokens), ("ngram", 5));
    assert_eq!(o.cpu_offload, Some(2.0 * gib));
    assert_eq!(o.all2all_backend.as_deref(), Some("deepep_low_latency"));
    assert!(o.dbo);
    assert_eq!(o.launcher.as_deref(), Some("ray"));
    assert_eq!(o.extra_args, vec!["--trust-remote-code".to_string()]);
    assert_eq!(
        o.env,
        vec![(
            "VLLM_ATTENTION_BACKEND".to_string(),
            "FLASHINFER".to_string()
        )]
    );
    assert_eq!(o.activation_memory, Some(gib));
    assert_eq!(o.non_torch_memory, Some(2.0 * gib));
    assert_eq!(o.cuda_graph_memory, Some(3.0 * gib));
}

#[test]
fn unset_options_stay_unset_and_the_speculative_tokens_default_is_vllms() {
    let o = options("speculative = { method = ngram }");
    assert_eq!(o.port, None);
    assert_eq!(o.gpu_memory_utilization, None);
    assert_eq!(o.max_num_seqs, None);
    assert!(!o.enforce_eager);
    assert!(o.extra_args.is_empty() && o.env.is_empty());
    let spec = o.speculative.unwrap();
    assert_eq!(spec.tokens, vllm_defaults::SPEC_TOKENS);
    // The acceptance a method gets when unset, as it was before it moved to the schema.
    assert_eq!(spec.acceptance, 0.30);
    for (method, was) in [
        ("eagle3", 0.70),
        ("eagle", 0.60),
        ("mtp", 0.80),
        ("draft_model", 0.60),
    ] {
        assert_eq!(dic_defaults::spec_acceptance(method), was, "{method}");
    }
}

#[test]
fn the_options_documentation_states_the_defaults_the_models_fill() {
    let doc = |name: &str| engine_option(name).unwrap().doc;
    let n = |v: f64| dic_compiler::units::fmt_num(v);
    assert!(doc("port").contains(&format!("default {}", vllm_defaults::PORT)));
    assert!(doc("gpu_memory_utilization").contains(&format!(
        "default {}",
        n(vllm_defaults::GPU_MEMORY_UTILIZATION)
    )));
    assert!(doc("max_num_seqs").contains(&format!(
        "default {} on large GPUs, else {}",
        vllm_defaults::MAX_NUM_SEQS_LARGE_GPU,
        vllm_defaults::MAX_NUM_SEQS
    )));
    assert!(doc("max_num_batched_tokens").contains(&format!(
        "default {}, {} or {}",
        vllm_defaults::MAX_NUM_BATCHED_TOKENS_160GIB,
        vllm_defaults::MAX_NUM_BATCHED_TOKENS_LARGE_GPU,
        vllm_defaults::MAX_NUM_BATCHED_TOKENS
    )));
    assert!(doc("block_size").contains(&format!(
        "default {}; {} for MLA",
        vllm_defaults::BLOCK_SIZE,
        vllm_defaults::MLA_BLOCK_SIZE
    )));
}

#[test]
fn dics_own_defaults_are_what_their_fields_say() {
    let deploy = Kind::Deploy.schema();
    let image = deploy.field("image").unwrap().doc;
    assert!(image.contains(&format!(
        "(default {}; on AMD GPUs {})",
        dic_defaults::IMAGE,
        dic_defaults::ROCM_IMAGE
    )));
    let waiting = AUTOSCALE_FIELDS
        .iter()
        .find(|f| f.name == "waiting")
        .unwrap();
    assert!(waiting
        .doc
        .contains(&format!("default {},", dic_defaults::AUTOSCALE_WAITING)));
    let acceptance = SPECULATIVE_FIELDS
        .iter()
        .find(|f| f.name == "acceptance")
        .unwrap();
    for method in SPEC_METHODS {
        let percent = dic_defaults::spec_acceptance(method) * 100.0;
        let said = format!("{method} {}%", dic_compiler::units::fmt_num(percent));
        assert!(
            acceptance.doc.contains(&said),
            "{said} in {}",
            acceptance.doc
        );
    }
}
