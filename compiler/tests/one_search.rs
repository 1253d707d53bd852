//! The driver searches each deployment once: `dic check`/`dic compile` run one search per
//! deployment (written layouts for A0701 and the report, `layout = auto` for its choice;
//! `dic compile` adds one per other GPU type for the report's what-if),
//! and a language-server edit re-searches only the deployment it changed. The planner
//! counts its searches process-wide, so this file holds a single test.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::driver::{self, Advice, AnalysisCache};
use dic_compiler::planner;
use dic_compiler::source::MemoryWorld;

const SRC: &str =
    "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\nimport std.models.llama_3_1_70b\n\
cluster c { nodes = 5 × dgx_h100, price = $98/h }\n\
workload w { prompt = 2k tokens, output = 200 tokens, rate = 4 req/s }\n\
slo s { ttft.p95 <= 2 s, tpot.p95 <= 80 ms }\n\
deploy a { model = llama_3_1_8b, cluster = c, workload = w, slo = s, layout = tp 8 }\n\
deploy b { model = llama_3_1_70b, cluster = c, workload = w, slo = s, layout = tp 8 × dp 2 }\n\
deploy d { model = llama_3_1_8b, cluster = c, workload = w, slo = s, layout = auto }\n\
deploy e { model = llama_3_1_8b, cluster = c, workload = w, layout = tp 2 }\n";

#[test]
fn one_search_per_deployment_and_per_edited_deployment() {
    let world = MemoryWorld::new().with("p.dist", SRC);
    // `dic check`: the deployments whose diagnostics need the planner (`e` has no SLO,
    // so no A0701 and no search)
    let before = planner::searches();
    let checked = driver::check_file(&world, "p.dist").unwrap();
    assert!(!checked.has_errors());
    assert_eq!(planner::searches() - before, 3);
    // `dic compile`: every deployment once on its own cluster, for its report too, and
    // once more on each other GPU type of the report's "Which GPU" table (the what-if
    // reuses the deployment's own search for the cluster's GPU, h100_sxm here)
    let before = planner::searches();
    let checked = driver::compile_file(&world, "p.dist").unwrap();
    let other_gpus = driver::WHAT_IF_GPUS.len() - 1;
    assert_eq!(
        planner::searches() - before,
        4 + 4 * other_gpus,
        "one search per deployment, and one per other GPU type"
    );
    // everything downstream reads those searches: the plan has every deployment, and its
    // forecast the report's alternatives
    assert_eq!(checked.plan.deployments.len(), 4);
    assert_eq!(checked.forecast.deployments.len(), 4);
    assert!(checked
        .forecast
        .deployments
        .iter()
        .all(|d| !d.report.alternatives.is_empty()));
    for d in &checked.forecast.deployments {
        assert!(d.report.planner_evaluated > 0, "{}: no search data", d.name);
    }

    // The language server: the fast pass searches nothing, the full pass each deployment
    // once, an unchanged re-check nothing, an edit to one deployment one search.
    let mut cache = AnalysisCache::default();
    let count = |text: &str, cache: &mut AnalysisCache, advice: Advice| {
        let before = planner::searches();
        let c = driver::check_text_cached(&world, "p.dist", text, cache, advice);
        assert!(!c.has_errors());
        planner::searches() - before
    };
    assert_eq!(count(SRC, &mut cache, Advice::Skip), 0);
    assert_eq!(count(SRC, &mut cache, Advice::Planner), 3);
    // The report's pass: only `e` is new to the search; the what-if, which no check
    // pass runs, searches every deployment on each other GPU type once, and never again.
    assert_eq!(
        count(SRC, &mut cache, Advice::Report),
        1 + 4 * other_gpus,
        "only `e` is new"
    );
    assert_eq!(count(SRC, &mut cache, Advice::Report), 0);
    assert_eq!(count(SRC, &mut cache, Advice::Planner), 0);
    let edited = SRC.replace("layout = tp 8 × dp 2", "layout = tp 4 × dp 4");
    assert_eq!(count(&edited, &mut cache, Advice::Skip), 0);
    assert_eq!(count(&edited, &mut cache, Advice::Planner), 1);
}
