//! The planner never proposes what the checker refuses: every layout `dic plan` chooses or
//! ranks, every layout the advice recommends, written back into the file, checks with no
//! errors; E0701's "add GPUs" figure, applied, meets the SLO. One fixed case (DeepSeek-V3
//! on a GB200 NVL72 rack, where the planner once chose a layout E0801 refuses), one of
//! placement (E0408), and a property test over generated clusters × models × workloads.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::driver::{self, Advice, AnalysisCache, Checked};
use dic_compiler::planner::{search, space_of, Search};
use dic_compiler::source::MemoryWorld;
use proptest::prelude::*;

const PATH: &str = "p.dist";

fn check(src: &str, advice: Advice) -> Checked {
    let world = MemoryWorld::new().with(PATH, src);
    driver::check_text_cached(&world, PATH, src, &mut AnalysisCache::default(), advice)
}

fn errors(c: &Checked) -> Vec<String> {
    c.diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| format!("{}: {}", d.code, d.message))
        .collect()
}

/// The first deployment's search, as `dic plan` runs it.
fn plan(src: &str) -> Search {
    let world = MemoryWorld::new().with(PATH, src);
    let checked = driver::front_end(&world, PATH).unwrap();
    assert!(!checked.has_errors(), "{:?}", errors(&checked));
    let ds = dic_compiler::analysis::scenarios_from_program(&checked.program).remove(0);
    search(&ds.scenario, &ds.slo, &space_of(&ds))
}

/// A source whose model is `model m = {base} {{ {model_fields} }}` and whose deployment
/// says `layout = auto`, with `layout` (and the formats, when they differ from the
/// model's) written in.
fn write_back(src: &str, layout: &str, weights: &str, model_weights: &str, kv: &str) -> String {
    let mut fields = Vec::new();
    if weights != model_weights {
        fields.push(format!("weights = {weights}"));
    }
    if kv != "auto" {
        fields.push(format!("kv_cache = {kv}"));
    }
    src.replace("layout = auto", &format!("layout = {layout}"))
        .replace("{ /*fields*/ }", &format!("{{ {} }}", fields.join(", ")))
}

/// A candidate's layout as a deployment writes it, with the engine options the planner
/// chose for it (DeepEP for wide EP on an NVLink rack).
fn as_written(c: &dic_compiler::planner::Candidate) -> String {
    with_engine(&c.layout.to_string(), c)
}

/// `layout` with the engine options the planner chose for `c`.
fn with_engine(layout: &str, c: &dic_compiler::planner::Candidate) -> String {
    match &c.engine {
        Some(e) => format!("{layout}, engine = vllm {{ {} }}", e.describe()),
        None => layout.to_string(),
    }
}

/// Every layout of a search (the choice, the ranked alternatives, the best split),
/// written back: the checker's errors for each that has any.
fn refused(src: &str, model_weights: &str, s: &Search, advice: Advice) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for c in s.chosen.iter().chain(&s.ranked) {
        let text = write_back(src, &as_written(c), &c.weights, model_weights, &c.kv_cache);
        if !seen.insert(text.clone()) {
            continue;
        }
        let e = errors(&check(&text, advice));
        if !e.is_empty() {
            out.push(format!("`{}` ({}): {e:?}", c.layout, c.weights));
        }
    }
    // The splits that meet every bound, in the formats they were predicted in.
    let formats = s.chosen.as_ref().map_or((model_weights, "auto"), |c| {
        (c.weights.as_str(), c.kv_cache.as_str())
    });
    for c in s.splits.iter().filter(|c| c.meets_slo) {
        let sp = &c.split;
        let layout = format!(
            "{{ prefill = tp {} × dp {}, decode = tp {} × dp {} }}",
            sp.prefill.tp, sp.prefill_replicas, sp.decode.tp, sp.decode_replicas
        );
        let text = write_back(src, &layout, formats.0, model_weights, formats.1);
        let e = errors(&check(&text, advice));
        if !e.is_empty() {
            out.push(format!("split {} ({}): {e:?}", c.name, formats.0));
        }
    }
    out
}

fn source(cluster: &str, model: &str, workload: &str, slo: Option<&str>) -> String {
    format!(
        "{cluster}\nmodel m = {model} {{ /*fields*/ }}\nworkload w {{ {workload} }}\n{}\
deploy d {{ model = m, cluster = c, workload = w, {}layout = auto }}\n",
        slo.map(|s| format!("slo s {{ {s} }}\n"))
            .unwrap_or_default(),
        if slo.is_some() { "slo = s, " } else { "" }
    )
}

const GB200_RACK: &str =
    "import std.nodes.gb200_nvl72\nimport std.models.deepseek_v3\ncluster c = gb200_nvl72 {}";

/// DeepSeek-V3 on one GB200 NVL72 rack (18 trays of 4): the planner once chose `tp 4 ×
/// pp 9 × dp 2` (a MoE engine's DP ranks spanning trays), which E0801 refuses. Whatever it
/// chooses now, each alternative it ranks, and each layout the advice on those recommends
/// (A0401, A0501, A0701, W0404 quick fixes), written back, checks and compiles.
#[test]
fn deepseek_v3_on_a_gb200_rack_plans_only_what_checks() {
    let workloads = [
        "prompt = 4k tokens, output = 1k tokens, rate = 10 req/s",
        "prompt = 2k tokens, output = 512 tokens, rate = 60 req/s",
        "prompt = 8k tokens, output = 1k tokens, rate = 20 req/s",
    ];
    let mut chose = 0;
    for w in workloads {
        let src = source(GB200_RACK, "deepseek_v3", w, None);
        let s = plan(&src);
        chose += usize::from(s.chosen.is_some());
        let bad = refused(&src, "fp8", &s, Advice::Skip);
        assert!(bad.is_empty(), "{w}: refused when written: {bad:#?}");
        // The advice on each written alternative proposes only layouts that check.
        for c in s.chosen.iter().chain(s.ranked.iter().take(4)) {
            let text = write_back(&src, &as_written(c), &c.weights, "fp8", &c.kv_cache);
            let checked = check(&text, Advice::Planner);
            for fix in checked.diagnostics.iter().flat_map(|d| &d.fixes) {
                if !fix.title.starts_with("use `layout =") {
                    continue;
                }
                let advised = write_back(
                    &src,
                    &with_engine(&fix.replacement, c),
                    &c.weights,
                    "fp8",
                    &c.kv_cache,
                );
                let e = errors(&check(&advised, Advice::Skip));
                assert!(
                    e.is_empty(),
                    "{w}: advice on `{}` recommends `{}`, refused: {e:?}",
                    c.layout,
                    fix.replacement
                );
            }
        }
        // `layout = auto` itself compiles to a launch plan.
        let auto = check(&src, Advice::Planner);
        if s.chosen.is_some() {
            assert!(errors(&auto).is_empty(), "{w}: {:?}", errors(&auto));
            assert_eq!(auto.plan.deployments.len(), 1);
        }
    }
    assert!(chose > 0, "the planner finds a layout for some load");
}

/// `tp 2 × pp 3 × dp 8` on six 8-GPU nodes is one 6-GPU replica per node: eight nodes, so
/// E0408 when written. The planner ranks no such layout.
#[test]
fn ranked_layouts_fit_the_cluster_as_placed() {
    let cluster = "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\ncluster c { nodes = 6 × dgx_h100, price = $20/h }";
    let written = source(
        cluster,
        "llama_3_1_70b",
        "prompt = 2k tokens, output = 256 tokens, rate = 30 req/s",
        None,
    )
    .replace("layout = auto", "layout = tp 2 × pp 3 × dp 8");
    let e = errors(&check(&written, Advice::Skip));
    assert!(e.iter().any(|e| e.starts_with("E0408")), "{e:?}");
    for rate in [5, 30, 80] {
        let src = source(
            cluster,
            "llama_3_1_70b",
            &format!("prompt = 2k tokens, output = 256 tokens, rate = {rate} req/s"),
            Some("tpot.p50 <= 60 ms"),
        );
        let s = plan(&src);
        for c in &s.ranked {
            assert!(
                c.nodes <= 6,
                "`{}` ranked on {} nodes of 6",
                c.layout,
                c.nodes
            );
        }
        let bad = refused(&src, "bf16", &s, Advice::Skip);
        assert!(bad.is_empty(), "rate {rate}: {bad:#?}");
    }
}

/// E0701 on an overloaded cluster says how many GPUs (nodes) of the closest layout would
/// carry the load; a cluster of that many nodes, planned again, meets the SLO. Its help
/// offers FP8 weights only where they are not already allowed.
#[test]
fn e0701s_add_gpus_figure_applied_meets_the_slo() {
    for (allowed, offers_fp8) in [("", true), ("allowed_weights = [bf16, fp8], ", false)] {
        let src = source(
            "import std.nodes.l40s_server_8\nimport std.models.llama_3_1_8b\ncluster c { nodes = 1 × l40s_server_8 }",
            "llama_3_1_8b",
            "prompt = 4k tokens, output = 512 tokens, rate = 60 req/s",
            Some("tpot.p95 <= 60 ms"),
        )
        .replace("layout = auto", &format!("{allowed}layout = auto"));
        let checked = check(&src, Advice::Planner);
        let e0701 = checked
            .diagnostics
            .iter()
            .find(|d| d.code.to_string() == "E0701")
            .unwrap_or_else(|| panic!("{:?}", errors(&checked)));
        let help = e0701.help.clone().unwrap_or_default();
        assert_eq!(help.contains("allow `fp8` weights"), offers_fp8, "{help}");
        // "… would carry the load: 40 GPUs (5 nodes), the cluster has 1"
        let m = &e0701.message;
        let nodes: u64 = m
            .split(" GPUs (")
            .nth(1)
            .and_then(|x| x.split(" node").next())
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("no figure in {m}"));
        let bigger = src.replace("nodes = 1 ×", &format!("nodes = {nodes} ×"));
        let again = check(&bigger, Advice::Planner);
        assert!(
            errors(&again).is_empty(),
            "{m}\napplied ({nodes} nodes): {:?}",
            errors(&again)
        );
    }
}

/// The report's family sentence speaks of the deployed layout: a written layout that is
/// not the planner's choice is named as what runs, the choice as what `layout = auto`
/// would deploy; the planner's own choice is said as the choice.
#[test]
fn the_family_sentence_speaks_of_the_deployed_layout() {
    let family = |src: &str| {
        let world = MemoryWorld::new().with(PATH, src);
        let c = driver::compile_file(&world, PATH).unwrap();
        assert!(errors(&c).is_empty(), "{:?}", errors(&c));
        c.forecast.deployments[0]
            .report
            .family_choice
            .clone()
            .unwrap()
    };
    let src = source(
        "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\ncluster c { nodes = 1 × dgx_h100, price = $30/h }",
        "llama_3_1_8b",
        "prompt = 2k tokens, output = 256 tokens, rate = 2 req/s",
        Some("tpot.p95 <= 60 ms"),
    );
    let auto = family(&src);
    assert!(!auto.contains("written"), "{auto}");
    let written = family(&src.replace("layout = auto", "layout = tp 2 × dp 4"));
    assert!(
        written.starts_with("this deployment runs its written layout `tp 2 × pp 1 × dp 4`; `layout = auto` would deploy "),
        "{written}"
    );
    assert!(written.ends_with(&auto), "{written}\n{auto}");
}

/// A format vLLM cannot produce while loading (`awq` from a bf16 checkpoint) is E0801
/// when written; allowed to the planner, it is never chosen nor ranked.
#[test]
fn formats_vllm_cannot_load_are_not_planned() {
    let src = source(
        "import std.nodes.l40s_server_8\nimport std.models.llama_3_1_70b\ncluster c { nodes = 1 × l40s_server_8 }",
        "llama_3_1_70b",
        "prompt = 1k tokens, output = 256 tokens, rate = 1 req/s",
        None,
    )
    .replace("layout = auto", "allowed_weights = [awq], layout = auto");
    let s = plan(&src);
    assert!(
        s.ranked.iter().all(|c| c.weights != "awq"),
        "{:?}",
        s.ranked.iter().map(|c| c.describe()).collect::<Vec<_>>()
    );
    let checked = check(&src, Advice::Planner);
    assert!(
        checked
            .diagnostics
            .iter()
            .any(|d| d.code.to_string() == "E0701"),
        "{:?}",
        errors(&checked)
    );
    let bad = refused(&src, "bf16", &s, Advice::Skip);
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Nodes the property test draws from: a stdlib node (its GPU, links and NICs) and the
/// GPU it holds, re-sized per case.
const NODES: &[(&str, &str)] = &[
    ("dgx_a100", "a100_sxm_80gb"),
    ("dgx_h100", "h100_sxm"),
    ("dgx_h200", "h200_sxm"),
    ("dgx_b200", "b200"),
    ("gb200_nvl72_tray", "gb200"),
    ("l40s_server_8", "l40s"),
    ("hgx_h100_pcie_8", "h100_pcie"),
    ("mi300x_8", "mi300x"),
    ("workstation_rtx_4090", "rtx_4090"),
];

/// Models, dense and MoE, with their own weight format.
const MODELS: &[(&str, &str)] = &[
    ("llama_3_1_8b", "bf16"),
    ("qwen3_8b", "bf16"),
    ("llama_3_1_70b", "bf16"),
    ("qwen3_30b_a3b", "bf16"),
    ("mixtral_8x7b", "bf16"),
    ("gpt_oss_20b", "mxfp4"),
    ("deepseek_v3", "fp8"),
];

/// A cluster of `nodes` stdlib nodes `NODES[node]` re-sized to `per_node` GPUs, with the
/// imports `model` needs.
fn generated_cluster(node: usize, per_node: u64, nodes: u64, priced: bool, model: &str) -> String {
    let (node, gpu) = NODES[node];
    format!(
        "import std.gpus.*\nimport std.nodes.*\nimport std.models.{model}\nnode n = {node} {{ gpus = {per_node} × {gpu} }}\ncluster c {{ nodes = {nodes} × n{} }}",
        if priced { ", price = $10/h" } else { "" }
    )
}

/// E0701's "N GPUs (M nodes)" figure for the closest layout's replicas, if it gives one.
fn nodes_figure(checked: &Checked) -> Option<u64> {
    let d = checked
        .diagnostics
        .iter()
        .find(|d| d.code.to_string() == "E0701")?;
    d.message
        .split("would carry the load: ")
        .nth(1)?
        .split(" GPUs (")
        .nth(1)?
        .split(" node")
        .next()?
        .parse()
        .ok()
}

/// Cases the add-GPUs property runs (each checks twice, with the planner; about a quarter
/// are overloaded with a figure to apply).
const ADD_GPUS_CASES: u32 = 96;

/// Cases the property test runs: each plans once and checks every layout it chose or
/// ranked (512 take about 12 s of wall time in the dev profile, whose compiler crate is built at
/// opt-level 2, on a shared 2-core machine).
const CASES: u32 = 512;

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    /// For generated clusters × models × workloads, every layout the planner chooses or
    /// ranks, written back into the file, checks with no errors.
    #[test]
    fn every_planned_layout_checks(
        node in 0..NODES.len(),
        per_node in prop::sample::select(vec![1u64, 2, 4, 8]),
        nodes in 1u64..=16,
        priced in any::<bool>(),
        model in 0..MODELS.len(),
        prompt in prop::sample::select(vec![256u64, 1024, 4096]),
        output in prop::sample::select(vec![64u64, 256, 1024]),
        rate in prop::sample::select(vec![0.5f64, 2.0, 8.0, 30.0]),
        slo in any::<bool>(),
        fp8 in any::<bool>(),
    ) {
        let (model, weights) = MODELS[model];
        let cluster = generated_cluster(node, per_node, nodes, priced, model);
        let src = source(
            &cluster,
            model,
            &format!("prompt = {prompt} tokens, output = {output} tokens, rate = {rate} req/s"),
            slo.then_some("tpot.p95 <= 80 ms"),
        );
        let src = if fp8 && weights == "bf16" {
            src.replace("layout = auto", "allowed_weights = [bf16, fp8], layout = auto")
        } else {
            src
        };
        let s = plan(&src);
        let bad = refused(&src, weights, &s, Advice::Skip);
        prop_assert!(bad.is_empty(), "{src}\nrefused when written: {bad:#?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: ADD_GPUS_CASES, failure_persistence: None, ..ProptestConfig::default() })]

    /// For generated overloaded deployments, E0701's "add GPUs" figure, applied as the
    /// cluster's node count, gives a cluster on which the planner meets the load and
    /// every bound (no E0701).
    #[test]
    fn every_add_gpus_figure_applied_meets_the_slo(
        node in 0..NODES.len(),
        per_node in prop::sample::select(vec![1u64, 2, 4, 8]),
        nodes in 1u64..=4,
        model in 0..MODELS.len(),
        rate in prop::sample::select(vec![20.0f64, 60.0, 200.0]),
        slo in any::<bool>(),
    ) {
        let (model, _) = MODELS[model];
        let cluster = generated_cluster(node, per_node, nodes, false, model);
        let src = source(
            &cluster,
            model,
            &format!("prompt = 1024 tokens, output = 256 tokens, rate = {rate} req/s"),
            slo.then_some("tpot.p95 <= 80 ms"),
        );
        let Some(figure) = nodes_figure(&check(&src, Advice::Planner)) else {
            return Ok(());
        };
        let bigger = src.replace(&format!("nodes = {nodes} ×"), &format!("nodes = {figure} ×"));
        let again = check(&bigger, Advice::Planner);
        prop_assert!(errors(&again).is_empty(), "{src}\napplied ({figure} nodes): {:?}", errors(&again));
    }
}

/// A case the property test found: Mixtral on one 4-GPU B200 node at 200 req/s. The
/// closest layout, `tp 1 × dp 4 × ep`, meets the load at 12 replicas with DeepEP across
/// 3 nodes, but the search on 3 nodes does not reach 12 replicas and finds nothing; the
/// figure must be what planning again on the applied cluster finds (here the search's own
/// choice on a larger cluster, 4 nodes).
#[test]
fn e0701s_figure_is_what_the_search_finds_on_the_applied_cluster() {
    let src = format!(
        "{}\nmodel m = mixtral_8x7b {{ }}\n\
workload w {{ prompt = 1024 tokens, output = 256 tokens, rate = 200 req/s }}\n\
deploy d {{ model = m, cluster = c, workload = w, layout = auto }}\n",
        generated_cluster(3, 4, 1, false, "mixtral_8x7b")
    );
    let figure = nodes_figure(&check(&src, Advice::Planner)).expect("an E0701 figure");
    let bigger = src.replace("nodes = 1 ×", &format!("nodes = {figure} ×"));
    let again = check(&bigger, Advice::Planner);
    assert!(
        errors(&again).is_empty(),
        "applied ({figure} nodes): {:?}",
        errors(&again)
    );
}
