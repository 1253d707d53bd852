//! `dic estimate` on one point: scenario, memory, rules, operating point and advice
//! (goal: well under 1 ms of compute). The stdlib is checked once before timing.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use dic_compiler::analysis::catalog;
use dic_compiler::analysis::estimate::{scenario, EstimateRequest};
use dic_compiler::driver::analyze_and_advise;
use dic_compiler::program::Layout;

fn bench(c: &mut Criterion) {
    let model = catalog::model("llama_3_1_70b").expect("stdlib");
    let req = EstimateRequest {
        gpu: "h100_sxm".into(),
        layout: Layout {
            tp: 4,
            ..Layout::default()
        },
        max_model_len: Some(8192.0),
        isl: Some(2000.0),
        osl: Some(500.0),
        rate: Some(4.0),
        ..EstimateRequest::default()
    };
    let s = scenario("llama_3_1_70b", model.clone(), &req).expect("valid");
    c.bench_function("estimate one point (70B, H100, tp 4, 4 req/s)", |b| {
        b.iter(|| analyze_and_advise(black_box(&s), &[]))
    });
    let moe = catalog::model("deepseek_v3").expect("stdlib");
    let req = EstimateRequest {
        gpu: "h200_sxm".into(),
        layout: Layout {
            tp: 8,
            ep: true,
            ..Layout::default()
        },
        max_model_len: Some(32768.0),
        concurrency: Some(64),
        ..EstimateRequest::default()
    };
    let s = scenario("deepseek_v3", moe, &req).expect("valid");
    c.bench_function(
        "estimate one point (DeepSeek-V3, H200, tp 8 × ep, 64 in flight)",
        |b| b.iter(|| analyze_and_advise(black_box(&s), &[])),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = bench
}
criterion_main!(benches);
