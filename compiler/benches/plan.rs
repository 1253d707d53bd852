//! The planner: Llama-3.1-70B over 64 H100s (8 nodes) with 4 weight formats, and
//! DeepSeek-V3 (MoE, EP) over 128 H200s (16 nodes). Goal: under 50 ms per search.
//! At scale, with the load growing with the cluster (2.5 req/s per node): 70B over 512
//! and 4,096 GPUs, DeepSeek-V3 over 4,096. Goal: 4,096 GPUs under 100 ms, cost linear or
//! better in GPUs. Prints the number of candidates evaluated and pruned once before timing.
//! The what-if (`dic plan --gpus`): 70B on 16 H100s replanned on H100, H200, B200 and
//! MI300X. Goal: under 200 ms for the four.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use dic_compiler::analysis::estimate::{self, EstimateRequest};
use dic_compiler::analysis::rules::SloTarget;
use dic_compiler::analysis::{catalog, Scenario};
use dic_compiler::planner::{search, SearchSpace};
use dic_compiler::program::SloMetric;
use dic_compiler::syntax::ast::Op;

fn scenario(model: &str, gpu: &str, nodes: u64, rate: f64) -> Scenario {
    let req = EstimateRequest {
        gpu: gpu.into(),
        gpus_per_node: Some(8),
        nodes: Some(nodes),
        max_model_len: Some(8192.0),
        isl: Some(2000.0),
        osl: Some(500.0),
        rate: Some(rate),
        price_per_node_hour: Some(98.32),
        ..EstimateRequest::default()
    };
    estimate::scenario(model, catalog::model(model).unwrap(), &req).expect("valid request")
}

fn slo() -> Vec<SloTarget> {
    vec![
        SloTarget {
            metric: SloMetric::Ttft,
            percentile: "p95".into(),
            op: Op::Le,
            value: 1.0,
        },
        SloTarget {
            metric: SloMetric::Tpot,
            percentile: "p95".into(),
            op: Op::Le,
            value: 0.05,
        },
    ]
}

/// Llama 3.1 70B FP8 on two DGX H100 nodes at 20 req/s, as a deployment (`layout = auto`).
fn deployment_70b() -> dic_compiler::analysis::DeploymentScenario {
    let src = "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\n\
model m = llama_3_1_70b { weights = fp8, kv_cache = fp8 }\n\
cluster c { nodes = 2 × dgx_h100, price = $55.04/h }\n\
workload w { prompt = 2k tokens, output = 512 tokens, rate = 20 req/s }\n\
slo s { ttft.p95 <= 800 ms, tpot.p95 <= 40 ms }\n\
deploy d { model = m, cluster = c, workload = w, slo = s, layout = auto, engine = vllm { max_model_len = 8k tokens } }\n";
    let world = dic_compiler::source::MemoryWorld::new().with("p.dist", src);
    let front = dic_compiler::driver::front_end(&world, "p.dist").unwrap();
    dic_compiler::analysis::scenarios_from_program(&front.program).remove(0)
}

fn bench_what_if(c: &mut Criterion) {
    let ds = deployment_70b();
    let gpus =
        dic_compiler::planner::whatif::resolve_gpus("h100_sxm,h200_sxm,b200,mi300x").unwrap();
    let rows = dic_compiler::planner::whatif::what_if(&ds, &gpus);
    eprintln!(
        "what-if 70B / 16 GPUs: {:?}",
        rows.iter()
            .map(|r| (r.gpu.as_str(), r.cost_per_million_output))
            .collect::<Vec<_>>()
    );
    c.bench_function("whatif Llama-3.1-70B over 16 GPUs on 4 GPU types", |b| {
        b.iter(|| dic_compiler::planner::whatif::what_if(black_box(&ds), &gpus))
    });
}

fn bench(c: &mut Criterion) {
    let llama = scenario("llama_3_1_70b", "h100_sxm", 8, 20.0);
    let four = SearchSpace {
        weights: vec!["bf16".into(), "fp8".into(), "int4".into(), "awq".into()],
        kv_cache: vec!["auto".into()],
    };
    let r = search(&llama, &slo(), &four);
    eprintln!(
        "70B / 64 H100 / 4 formats: {} evaluated, {} pruned, chosen {:?}",
        r.evaluated,
        r.pruned,
        r.chosen.as_ref().map(|c| c.describe())
    );
    c.bench_function("plan Llama-3.1-70B over 64 H100 (4 weight formats)", |b| {
        b.iter(|| search(black_box(&llama), &slo(), &four))
    });

    // The disaggregated family beside it (every xPyD split of TP engines, up to 8 + 8).
    let fam = dic_compiler::planner::disaggregated_family(&llama, &slo());
    eprintln!(
        "70B / 64 H100 disaggregated: {} splits, best {:?}",
        fam.len(),
        fam.first().map(|c| c.name.clone())
    );
    c.bench_function("disaggregated family Llama-3.1-70B over 64 H100", |b| {
        b.iter(|| dic_compiler::planner::disaggregated_family(black_box(&llama), &slo()))
    });

    let ds = scenario("deepseek_v3", "h200_sxm", 16, 10.0);
    let fp8 = SearchSpace {
        weights: vec!["fp8".into()],
        kv_cache: vec!["auto".into(), "fp8".into()],
    };
    let r = search(&ds, &slo(), &fp8);
    eprintln!(
        "DeepSeek-V3 / 128 H200: {} evaluated, {} pruned, chosen {:?}",
        r.evaluated,
        r.pruned,
        r.chosen.as_ref().map(|c| c.describe())
    );
    c.bench_function("plan DeepSeek-V3 over 128 H200 (EP)", |b| {
        b.iter(|| search(black_box(&ds), &slo(), &fp8))
    });

    let bf16 = SearchSpace {
        weights: vec!["bf16".into()],
        kv_cache: vec!["auto".into()],
    };
    for (model, gpu, nodes, space) in [
        ("llama_3_1_70b", "h100_sxm", 64, &bf16),
        ("llama_3_1_70b", "h100_sxm", 512, &bf16),
        ("deepseek_v3", "h200_sxm", 512, &fp8),
    ] {
        let s = scenario(model, gpu, nodes, 2.5 * nodes as f64);
        let r = search(&s, &slo(), space);
        eprintln!(
            "{model} / {} GPUs: {} evaluated, {} pruned, chosen {:?}",
            nodes * 8,
            r.evaluated,
            r.pruned,
            r.chosen.as_ref().map(|c| c.describe())
        );
        c.bench_function(
            &format!(
                "plan {model} over {} GPUs (load grows with the cluster)",
                nodes * 8
            ),
            |b| b.iter(|| search(black_box(&s), &slo(), space)),
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(std::time::Duration::from_secs(3)).warm_up_time(std::time::Duration::from_millis(500));
    targets = bench_what_if, bench
}
criterion_main!(benches);
