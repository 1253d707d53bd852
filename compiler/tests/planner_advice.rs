//! The planner's advice agrees with its own search: "more GPUs make it worse" is one
//! algorithm, so a layout on the scaling curve that the curve marks as slower than the
//! point before it gets W0404 when written with the curve's load.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::diagnostics::Code;
use dic_compiler::driver;
use dic_compiler::source::MemoryWorld;

/// (node, model) pairs whose curves differ: NVSwitch, PCIe, two nodes.
const CASES: &[(&str, &str, &str)] = &[
    ("1 × dgx_h100", "llama_3_1_8b", "tp 1"),
    ("1 × l40s_server_8", "llama_3_1_8b", "tp 1"),
    ("1 × hgx_h100_pcie_8", "llama_3_1_8b", "tp 1"),
    ("2 × dgx_h100", "llama_3_1_70b", "tp 4"),
    ("1 × hgx_h100_pcie_8", "qwen3_30b_a3b", "tp 1"),
    ("1 × l40s_server_8", "qwen3_0_6b", "tp 1"),
    ("4 × l40s_server_4", "qwen3_0_6b", "tp 1"),
    ("4 × dgx_h100", "qwen3_0_6b", "tp 1"),
    ("4 × workstation_2x_rtx_3090", "qwen3_0_6b", "tp 1"),
    ("8 × workstation_rtx_4090", "qwen3_0_6b", "tp 1"),
    ("2 × hgx_h100_pcie_8", "qwen3_0_6b", "tp 1"),
    ("2 × l40s_server_4", "llama_3_1_8b", "tp 1"),
    ("18 × gb200_nvl72_tray", "kimi_k2", "tp 4 × dp 18 × ep"),
];

fn source(nodes: &str, model: &str, layout: &str) -> String {
    format!(
        "import std.nodes.*\nimport std.models.*\n\
cluster c {{ nodes = {nodes} }}\n\
workload w {{ prompt = 1k tokens, output = 256 tokens, concurrency = 8 }}\n\
deploy d {{ model = {model}, cluster = c, workload = w, layout = {layout}, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
    )
}

#[test]
fn a_slower_point_on_the_scaling_curve_is_w0404() {
    let mut slower_points = 0;
    for (nodes, model, first) in CASES {
        let world = MemoryWorld::new().with("p.dist", &source(nodes, model, first));
        let checked = driver::compile_file(&world, "p.dist").unwrap();
        assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
        let search = checked.deployments[0].search.clone().unwrap();
        assert!(search.scaling.len() >= 2, "{nodes} {model}: a curve");
        for pair in search.scaling.windows(2) {
            let (before, point) = (&pair[0], &pair[1]);
            let marked = search.worse_from_gpus == Some(point.gpus);
            let clearly_slower = before.tpot_ms < point.tpot_ms * 0.98;
            let world =
                MemoryWorld::new().with("p.dist", &source(nodes, model, &point.layout.to_string()));
            let checked = driver::check_file(&world, "p.dist").unwrap();
            let w0404 = checked
                .diagnostics
                .iter()
                .find(|d| d.code == Code::MoreGpusWorse);
            if clearly_slower {
                slower_points += 1;
                let d = w0404.unwrap_or_else(|| {
                    panic!(
                        "{nodes} {model}: the curve has `{}` ({:.1} ms) slower than `{}` ({:.1} ms) but no W0404",
                        point.layout, point.tpot_ms, before.layout, before.tpot_ms
                    )
                });
                // it names a layout at least as fast as the curve's smaller point
                assert!(
                    d.message.contains("more GPUs make it worse"),
                    "{}",
                    d.message
                );
            }
            if marked {
                assert!(
                    clearly_slower,
                    "the curve marks only a clearly slower point"
                );
            }
        }
    }
    assert!(slower_points > 0, "no case exercises a slower point");
}

fn codes(nodes: &str, model: &str, layout: &str) -> Vec<Code> {
    let world = MemoryWorld::new().with("a.dist", &source(nodes, model, layout));
    let checked = driver::check_file(&world, "a.dist").unwrap();
    checked.diagnostics.iter().map(|d| d.code).collect()
}

/// A0501 advises FP8 only where the half-TP layout needs it: an 8B model at tp 8 fits at
/// tp 4 in BF16 already (issue: "A0501 advises FP8 to halve TP when BF16 already fits"),
/// while Llama 3.1 70B at tp 2 on H100 needs FP8 to fit on one GPU.
#[test]
fn a0501_only_when_quantization_is_what_makes_it_fit() {
    assert!(!codes("1 × dgx_h100", "llama_3_1_8b", "tp 8").contains(&Code::QuantizeToFit));
    assert!(!codes("1 × dgx_h200", "qwen3_5_35b_a3b", "tp 2 × dp 4").contains(&Code::QuantizeToFit));
    assert!(codes("1 × dgx_h200", "llama_3_1_70b", "tp 2").contains(&Code::QuantizeToFit));
}

/// W0402 reads the fabric's rate per GPU, not its name: 8 × 400G RoCE is as good as
/// 8 × 400G InfiniBand for wide EP, 4 × 100G EFA (p4d) is not.
#[test]
fn w0402_follows_the_fabric_bandwidth() {
    let with = |nics: &str| {
        let src = format!(
            "import std.gpus.*\nimport std.links.*\nimport std.models.mixtral_8x7b\n\
node n {{ gpus = 8 × h100_sxm, scale_up = nvswitch_h100, nics = {nics} }}\n\
cluster c {{ nodes = 2 × n }}\n\
deploy d {{ model = mixtral_8x7b, cluster = c, layout = tp 8 × dp 2 × ep, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
        );
        let world = MemoryWorld::new().with("a.dist", &src);
        let checked = driver::check_file(&world, "a.dist").unwrap();
        assert!(
            !checked.has_errors(),
            "{nics}: {:?}",
            checked
                .diagnostics
                .iter()
                .map(|d| &d.message)
                .collect::<Vec<_>>()
        );
        checked
            .diagnostics
            .iter()
            .any(|d| d.code == Code::EpOverSlowFabric)
    };
    assert!(
        !with("8 × roce_400g"),
        "RoCE is RDMA: 400G per GPU is enough"
    );
    assert!(!with("8 × ib_ndr"));
    assert!(with("4 × roce_100g"), "50 Gb/s per GPU");
    assert!(with("8 × ethernet_25g"));
}

/// The planner tries MoE layouts that fit only with several DP ranks (the experts spread
/// over TP × DP): DeepSeek-V3 at tp 1 × dp 8 on one 8 × H200 node fits, where dp 1 does
/// not (issue: an out-of-memory result at dp 1 was treated as final for the family).
#[test]
fn moe_layouts_that_fit_only_with_dp_are_searched() {
    use dic_compiler::analysis::estimate::{self, EstimateRequest};
    use dic_compiler::analysis::{analyze, catalog};
    use dic_compiler::planner::{search, SearchSpace};
    use dic_compiler::program::Layout;
    let req = |layout: Layout| EstimateRequest {
        gpu: "h200_sxm".into(),
        gpus_per_node: Some(8),
        nodes: Some(1),
        layout,
        max_model_len: Some(8192.0),
        isl: Some(1000.0),
        osl: Some(200.0),
        concurrency: Some(64),
        ..EstimateRequest::default()
    };
    let model = catalog::model("deepseek_v3").unwrap();
    let at = |tp, dp| {
        let s = estimate::scenario(
            "deepseek_v3",
            model.clone(),
            &req(Layout {
                tp,
                dp,
                ..Layout::default()
            }),
        )
        .unwrap();
        analyze(&s, &[]).prediction.is_some()
    };
    assert!(!at(1, 1), "one H200 cannot hold DeepSeek-V3");
    assert!(at(1, 8), "tp 1 × dp 8: the experts spread over 8 GPUs");
    let s = estimate::scenario("deepseek_v3", model.clone(), &req(Layout::default())).unwrap();
    let space = SearchSpace {
        weights: vec!["fp8".into()],
        kv_cache: vec!["auto".into()],
    };
    let r = search(&s, &[], &space);
    assert!(
        r.ranked.iter().any(|c| c.layout.tp == 1 && c.layout.dp > 1),
        "{:?}",
        r.ranked.iter().map(|c| c.describe()).collect::<Vec<_>>()
    );
}

/// A declared rate the layout cannot carry is an error even without an SLO, and
/// `layout = auto` never picks such a layout (issue: tp 1 serving 1 req/s of a declared 2).
#[test]
fn an_overloaded_layout_is_an_error_without_slo() {
    let src = |layout: &str| {
        format!(
            "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\n\
cluster one {{ nodes = 1 × dgx_h100 }}\n\
workload busy {{ prompt = 4k tokens, output = 1k tokens, rate = 20 req/s }}\n\
deploy d {{ model = llama_3_1_70b, cluster = one, workload = busy, layout = {layout}, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
        )
    };
    let world = MemoryWorld::new().with("a.dist", &src("tp 4"));
    let checked = driver::check_file(&world, "a.dist").unwrap();
    let d: Vec<_> = checked
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::Overloaded)
        .collect();
    assert_eq!(
        d.len(),
        1,
        "{:?}",
        checked
            .diagnostics
            .iter()
            .map(|d| &d.message)
            .collect::<Vec<_>>()
    );
    assert!(
        d[0].help.as_deref().unwrap_or("").contains("GPUs"),
        "{:?}",
        d[0].help
    );
    // auto: no layout of one node carries 20 req/s of 4k + 1k on 70B BF16 → E0701, with no
    // mention of SLOs the deployment does not have.
    let world = MemoryWorld::new().with("a.dist", &src("auto"));
    let checked = driver::check_file(&world, "a.dist").unwrap();
    let e: Vec<_> = checked
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::NoLayout)
        .collect();
    assert_eq!(e.len(), 1);
    assert!(!e[0].message.contains("SLO"), "{}", e[0].message);
}

/// The scaling curve is drawn in the formats the deployment runs: the planner's choice
/// when it may choose (here FP8 over BF16), not the first format it was allowed.
#[test]
fn the_scaling_curve_is_in_the_chosen_formats() {
    let src = "import std.nodes.*\nimport std.models.*\n\
cluster c { nodes = 1 × dgx_h100 }\n\
workload w { prompt = 3k tokens, output = 300 tokens, rate = 3 req/s }\n\
slo s { ttft.p95 <= 1500 ms, tpot.p95 <= 35 ms }\n\
deploy d { model = qwen3_32b, cluster = c, workload = w, slo = s, layout = auto, allowed_weights = [bf16, fp8], engine = vllm { max_model_len = 8k tokens } }\n";
    let world = MemoryWorld::new().with("p.dist", src);
    let checked = driver::compile_file(&world, "p.dist").unwrap();
    assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
    let d = &checked.deployments[0];
    assert_eq!(
        d.scenario.scenario.model.weights, "fp8",
        "the planner picks FP8 here"
    );
    let search = d.search.as_ref().unwrap();
    assert!(!search.scaling.is_empty());
    for p in &search.scaling {
        assert_eq!(p.weights, "fp8", "{} GPUs", p.gpus);
    }
}

/// The planner never proposes an EP group larger than the model's routed experts (W0409):
/// Mixtral's 8 experts on 4 × 8 H100s, where EP families and the scaling curve could
/// otherwise run up to 32 ranks: the ranked candidates, the choice and the curve's
/// replicas with `ep` keep tp × dp ≤ 8. (The search prefers PP for depth here and does not
/// reach such a layout even unguarded; the guards in `search` and `fastest_replica` keep
/// it so for loads that would, and the rule below is what a written layout meets.)
#[test]
fn the_planner_keeps_ep_groups_within_the_experts() {
    use dic_compiler::analysis::estimate::{self, EstimateRequest};
    use dic_compiler::analysis::{analyze, catalog};
    use dic_compiler::planner::{search, SearchSpace};
    let model = catalog::model("mixtral_8x7b").unwrap();
    let req = EstimateRequest {
        gpu: "h100_sxm".into(),
        gpus_per_node: Some(8),
        nodes: Some(4),
        max_model_len: Some(8192.0),
        isl: Some(1000.0),
        osl: Some(200.0),
        rate: Some(30.0),
        ..EstimateRequest::default()
    };
    let s = estimate::scenario("mixtral_8x7b", model, &req).unwrap();
    let space = SearchSpace {
        weights: vec!["bf16".into()],
        kv_cache: vec!["auto".into()],
    };
    // 30 req/s within 20 ms per token: two nodes or more.
    let slo = [dic_compiler::analysis::rules::SloTarget {
        metric: dic_compiler::program::SloMetric::Tpot,
        percentile: "p50".into(),
        op: dic_compiler::syntax::ast::Op::Le,
        value: 0.020,
    }];
    let r = search(&s, &slo, &space);
    let with_ep: Vec<_> = r.ranked.iter().filter(|c| c.layout.ep).collect();
    assert!(!with_ep.is_empty(), "EP families are searched");
    for c in r.ranked.iter().chain(r.chosen.iter()) {
        assert!(
            !c.layout.ep || c.layout.tp * c.layout.dp <= 8,
            "{}",
            c.describe()
        );
    }
    // The scaling curve (W0404's evidence) reaches 16 and 32 GPUs: its replicas there
    // (tp 16 at most) run the experts by tensor slices, not on 16 EP ranks.
    assert!(r.scaling.iter().any(|p| p.gpus >= 16));
    for p in &r.scaling {
        assert!(
            !p.layout.ep || p.layout.tp * p.layout.dp <= 8,
            "{} GPUs: {}",
            p.gpus,
            p.layout
        );
    }
    // The rule itself: tp 8 × dp 2 × ep is flagged.
    let mut wide = s.clone();
    wide.layout = dic_compiler::program::Layout {
        tp: 8,
        dp: 2,
        ep: true,
        ..Default::default()
    };
    let a = analyze(&wide, &[]);
    assert!(a.findings.iter().any(|f| f.code == Code::EpBeyondExperts));
}
