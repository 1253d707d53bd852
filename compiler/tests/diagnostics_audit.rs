//! Defects found by auditing the diagnostics against deployments an engineer writes
//! (issue 16), each with the case that showed it.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::diagnostics::Code;
use dic_compiler::driver;
use dic_compiler::source::MemoryWorld;

fn diagnostics(src: &str) -> Vec<(Code, String, Option<String>)> {
    let world = MemoryWorld::new().with("a.dist", src);
    let checked = driver::check_file(&world, "a.dist").unwrap();
    checked
        .diagnostics
        .iter()
        .map(|d| (d.code, d.message.clone(), d.help.clone()))
        .collect()
}

/// One misspelt field is one error (E0302 with its suggestion), not also E0306 for the
/// field it was meant to be.
#[test]
fn a_misspelt_field_is_one_error() {
    let d = diagnostics("workload w { prompt = 1k tokens, ouput = 100 tokens, rate = 1 req/s }\n");
    let codes: Vec<Code> = d.iter().map(|d| d.0).collect();
    assert_eq!(codes, vec![Code::UnknownField], "{d:?}");
    assert!(d[0].2.as_deref().unwrap_or("").contains("`output`"));
    // A field that is simply absent is still missing.
    let d = diagnostics("workload w { prompt = 1k tokens, rate = 1 req/s }\n");
    assert!(d.iter().any(|d| d.0 == Code::MissingField), "{d:?}");
}

/// An unknown unit's help names the units of the dimension, `s` included.
#[test]
fn unit_help_lists_the_units() {
    let d = diagnostics("slo s { ttft <= 5 parsecs }\n");
    let help = d[0].2.clone().unwrap_or_default();
    assert!(help.contains("ms, s, min"), "{help}");
}

/// A deployment whose cluster's node has an unresolved reference is not analysed: the
/// analysis would run on a half-read node (here without its NICs) and quote its numbers.
/// The same file with the reference fixed is analysed.
#[test]
fn no_analysis_on_definitions_that_failed_to_resolve() {
    let src = |link: &str| {
        format!(
            "import std.models.llama_3_1_8b\nimport std.gpus.h100_sxm\nimport std.links.*\n\
node n {{ gpus = 8 × h100_sxm, price = $20/h, nics = 8 × {link} }}\n\
cluster c {{ nodes = 2 × n }}\n\
workload w {{ prompt = 1k tokens, output = 100 tokens, rate = 100 req/s }}\n\
slo s {{ ttft <= 1 ms }}\n\
deploy d {{ model = llama_3_1_8b, cluster = c, workload = w, slo = s, layout = tp 1 }}\n"
        )
    };
    let broken: Vec<Code> = diagnostics(&src("ib_nd")).iter().map(|d| d.0).collect();
    assert!(broken.contains(&Code::UnknownName));
    assert!(!broken.contains(&Code::SloInfeasible), "{broken:?}");
    let fixed: Vec<Code> = diagnostics(&src("ib_ndr")).iter().map(|d| d.0).collect();
    assert!(fixed.contains(&Code::SloInfeasible), "{fixed:?}");
}

/// E0401's help follows the escalation order on the same GPUs instead of always
/// prescribing PP: DP for a model that fits a smaller TP, PP only when none does, and a TP
/// that divides the NVL72 rack when a group straddles two racks.
#[test]
fn e0401_help_follows_the_escalation_order() {
    let help = |model: &str, nodes: &str, layout: &str| {
        let src = format!(
            "import std.nodes.*\nimport std.models.*\ncluster c {{ nodes = {nodes} }}\n\
deploy d {{ model = {model}, cluster = c, layout = {layout}, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
        );
        let d = diagnostics(&src);
        let e = d
            .iter()
            .find(|d| d.0 == Code::TpAcrossNodes)
            .expect("E0401");
        (e.1.clone(), e.2.clone().unwrap_or_default())
    };
    let (_, h) = help("llama_3_1_8b", "2 × dgx_h100", "tp 16");
    assert!(h.contains("`tp 1 × pp 1 × dp 16`"), "{h}");
    let (_, h) = help("llama_3_1_405b", "2 × dgx_h100", "tp 16");
    assert!(h.contains("`tp 8 × pp 2 × dp 1`"), "{h}");
    let (m, h) = help("kimi_k2", "36 × gb200_nvl72_tray", "tp 16 × dp 9 × ep");
    assert!(m.contains("straddles two 72-GPU NVLink domains"), "{m}");
    assert!(h.contains("`tp 8 × pp 1 × dp 18 × ep`"), "{h}");
}

/// E0601's help is one consistent story across the deployment's bounds: when one bound
/// fails even at one request, no other bound's help proposes more replicas; nothing
/// proposes what the layout already does (FP8, the widest TP of the node); and a failing
/// written layout gets the layout the planner found to work (A0701).
#[test]
fn e0601_help_is_consistent_and_actionable() {
    let src = |rate: &str, tpot: &str| {
        format!(
            "import std.nodes.dgx_h100\nimport std.models.*\n\
cluster c {{ nodes = 2 × dgx_h100 }}\n\
workload w {{ prompt = 2k tokens, output = 500 tokens, rate = {rate} }}\n\
slo s {{ ttft.p95 <= 2 s, tpot.p95 <= {tpot} }}\n\
model l8 = llama_3_1_70b {{ weights = fp8 }}\n\
deploy d {{ model = l8, cluster = c, workload = w, slo = s, layout = tp 8, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
        )
    };
    // TPOT 8 ms cannot be met at one request by tp 8 FP8 on H100.
    let d = diagnostics(&src("30 req/s", "8 ms"));
    let helps: Vec<String> = d
        .iter()
        .filter(|d| d.0 == Code::SloInfeasible)
        .map(|d| d.2.clone().unwrap_or_default())
        .collect();
    assert_eq!(helps.len(), 2, "{d:?}");
    for h in &helps {
        assert!(!h.contains("dp "), "{h}");
        assert!(!h.contains("FP8") && !h.contains("tp 16"), "{h}");
    }
    // TPOT 40 ms holds at light load: the help gives the load every bound holds at and
    // the replicas (and GPUs) for the offered rate, against the cluster's 16; the planner's
    // working layout comes with it.
    let d = diagnostics(&src("60 req/s", "40 ms"));
    let help = d
        .iter()
        .find(|d| d.0 == Code::SloInfeasible)
        .and_then(|d| d.2.clone())
        .unwrap_or_default();
    assert!(help.contains("every latency bound holds up to"), "{help}");
    assert!(
        help.contains("the cluster has 16") || help.contains("nodes)"),
        "{help}"
    );
}

/// A scale-up domain smaller than the node (H100 NVL: NVLink-bridged pairs) is honoured:
/// tp 4 crosses PCIe between the pairs (W0401, modelled at PCIe speed), tp 2 stays on its
/// bridge.
#[test]
fn nvlink_islands_inside_a_node() {
    let codes = |layout: &str| -> Vec<Code> {
        let src = format!(
            "import std.gpus.*\nimport std.links.*\nimport std.models.llama_3_1_8b\n\
node nvl {{ gpus = 8 × h100_nvl, scale_up = nvlink_bridge_h100, scale_up_domain = 2 }}\n\
cluster c {{ nodes = 1 × nvl }}\n\
deploy d {{ model = llama_3_1_8b, cluster = c, layout = {layout}, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
        );
        diagnostics(&src).iter().map(|d| d.0).collect()
    };
    assert!(codes("tp 4 × dp 2").contains(&Code::TpOverPcie));
    assert!(!codes("tp 2 × dp 4").contains(&Code::TpOverPcie));
}

/// Memory advice prefers a pre-quantized FP8 checkpoint the stdlib knows (NVIDIA's Llama
/// 3.1 70B FP8) to quantizing the BF16 checkpoint while loading; without one it says
/// what online quantization costs.
#[test]
fn fp8_advice_prefers_a_prequantized_checkpoint() {
    // One H200 holds the 70B model in FP8 (on an H100 the profile run's sampler buffers at
    // 1024 sequences leave too little for the KV cache).
    let src = "import std.nodes.dgx_h100\nimport std.nodes.dgx_h200\nimport std.models.*\n\
cluster c { nodes = 1 × dgx_h100 }\ncluster h { nodes = 1 × dgx_h200 }\n\
deploy d { model = llama_3_1_70b, cluster = h, layout = tp 1, engine = vllm { max_model_len = 8k tokens } }\n\
deploy e { model = llama_3_1_405b, cluster = c, layout = tp 8, engine = vllm { max_model_len = 8k tokens } }\n";
    let d = diagnostics(src);
    let helps: Vec<String> = d
        .iter()
        .filter(|d| d.0 == Code::DoesNotFit)
        .map(|d| d.2.clone().unwrap_or_default())
        .collect();
    assert!(
        helps
            .iter()
            .any(|h| h.contains("`model = llama_3_1_70b_fp8`")),
        "{helps:?}"
    );
    assert!(
        helps
            .iter()
            .any(|h| h.contains("quantizes the 16-bit checkpoint while loading")),
        "{helps:?}"
    );
}

/// A layer pattern with no token-mixing layer is refused (the KV pool would be empty and
/// the capacity unbounded), like a pattern of the wrong length.
#[test]
fn a_layer_pattern_needs_a_mixer() {
    let model = |pattern: &str| {
        format!(
            "model m {{ parameters = 1B, layers = 4, hidden = 512, heads = 8, intermediate = 1024, vocab = 1000, max_context = 4k tokens, layer_pattern = \"{pattern}\" }}\n"
        )
    };
    let d = diagnostics(&model("4 dense"));
    assert!(
        d.iter()
            .any(|d| d.0 == Code::InvalidLayerPattern && d.1.contains("mixes tokens")),
        "{d:?}"
    );
    let d = diagnostics(&model("3 full"));
    assert!(
        d.iter()
            .any(|d| d.0 == Code::InvalidLayerPattern && d.1.contains("lists 3 layers")),
        "{d:?}"
    );
    assert!(diagnostics(&model("(dense, full) × 2")).is_empty());
}

fn deploy_with(workload: &str, engine: &str) -> String {
    format!(
        "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
cluster c {{ nodes = 1 × dgx_h100 }}\n\
workload w {{ prompt = 1k tokens, output = 100 tokens, concurrency = 4{workload} }}\n\
deploy d {{ model = llama_3_1_8b, cluster = c, workload = w, layout = tp 1, engine = vllm {{ max_model_len = 4k tokens{engine} }} }}\n"
    )
}

/// A block's required field is required like a definition's: `speculative` without a
/// `method` (which would have launched EAGLE-3 with no head) and `autoscale` without `max`
/// are one E0306 each, through the same check.
#[test]
fn a_block_without_its_required_field_is_e0306() {
    let d = diagnostics(&deploy_with("", ", speculative = { tokens = 3 }"));
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].0, Code::MissingField);
    assert_eq!(d[0].1, "`speculative` has no `method`");
    let d = diagnostics(
        &deploy_with("", "").replace("layout = tp 1,", "layout = tp 1, autoscale = { min = 1 },"),
    );
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].1, "`autoscale` has no `max`");
}

/// An out-of-range share reads as written and as a percentage: `150%`, not "a quantity in
/// `%`" against "at most 0.99".
#[test]
fn out_of_range_shares_read_as_percentages() {
    let d = diagnostics(&deploy_with(
        "",
        ", speculative = { method = ngram, acceptance = 150% }",
    ));
    assert_eq!(d[0].0, Code::OutOfRange, "{d:?}");
    assert_eq!(d[0].1, "`acceptance` = 150% is out of range");
    let world = MemoryWorld::new().with(
        "a.dist",
        &deploy_with("", ", speculative = { method = ngram, acceptance = 150% }"),
    );
    let checked = driver::check_file(&world, "a.dist").unwrap();
    let label = &checked.diagnostics[0].labels[0].message;
    assert_eq!(label, "must be at least 0% and at most 99%");
}

/// A shared prefix as long as the prompt leaves no request anything of its own.
#[test]
fn a_shared_prefix_longer_than_the_prompt_is_refused() {
    let d = diagnostics(&deploy_with(", shared_prefix = 2k tokens", ""));
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].0, Code::OutOfRange);
    assert!(
        d[0].1
            .contains("`shared_prefix` (2000) is not shorter than the prompt (1000)"),
        "{d:?}"
    );
}
