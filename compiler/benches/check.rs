//! `dic check` throughput: parse + resolve + check of a generated 5,000-line file (goal:
//! under 20 ms), the same with the analysis of every deployment in it, and the full
//! `dic check` of each example (goal: under 2 ms). Files are read before timing;
//! the measured work is the IO-free core through an in-memory world.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use dic_compiler::source::MemoryWorld;

/// About 5,000 lines: imports, then blocks of GPUs, models, workloads, SLOs, clusters and
/// deployments that reference each other and the stdlib.
pub fn generated(lines: usize) -> String {
    let mut s = String::from("import std.gpus.*\nimport std.nodes.*\nimport std.models.*\n\n");
    let mut i = 0;
    while s.lines().count() < lines {
        s.push_str(&format!(
            "gpu g{i} = h100_sxm {{\n  memory = 80 GiB\n  memory_bandwidth = 3.35 TB/s\n  bf16 = 989 TFLOPS\n}}\n\n\
             model m{i} = llama_3_1_70b {{ weights = fp8, kv_cache = fp8 }}\n\n\
             workload w{i} {{\n  prompt = {p} tokens\n  output = 512 tokens\n  rate = 4 req/s\n}}\n\n\
             slo s{i} {{\n  ttft.p95 <= 800 ms\n  tpot.p95 <= 40 ms\n}}\n\n\
             cluster c{i} {{\n  nodes = 2 × dgx_h100\n  price = $70/h\n}}\n\n\
             deploy d{i} {{\n  model = m{i}\n  cluster = c{i}\n  workload = w{i}\n  slo = s{i}\n  layout = tp 8 × dp 2\n  engine = vllm {{ gpu_memory_utilization = 0.9, max_model_len = 8k tokens }}\n}}\n\n",
            p = 1000 + i
        ));
        i += 1;
    }
    s
}

fn bench(c: &mut Criterion) {
    let big = generated(5000);
    let world = MemoryWorld::new().with("big.dist", &big);
    let front = dic_compiler::driver::front_end(&world, "big.dist").expect("in memory");
    let first = front.diagnostics.first().map(|d| d.message.clone());
    assert!(
        first.is_none(),
        "generated file must check clean: {first:?}"
    );
    let checked = dic_compiler::driver::check_file(&world, "big.dist").expect("in memory");
    assert!(!checked.has_errors(), "generated deployments must be valid");
    let deploys = big.matches("\ndeploy ").count();
    eprintln!(
        "generated file: {} lines, {} bytes, {deploys} deployments",
        big.lines().count(),
        big.len()
    );
    c.bench_function("parse + resolve + check, 5000-line file", |b| {
        b.iter(|| dic_compiler::driver::front_end(black_box(&world), "big.dist"))
    });
    c.bench_function(
        "dic check incl. analysis of every deployment, 5000-line file",
        |b| b.iter(|| dic_compiler::driver::check_file(black_box(&world), "big.dist")),
    );

    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let mut examples: Vec<String> = std::fs::read_dir(root)
        .expect("examples/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".dist"))
        .collect();
    examples.sort();
    let common =
        std::fs::read_to_string(format!("{root}/common/chat.dist")).expect("common/chat.dist");
    for name in examples {
        let text = std::fs::read_to_string(format!("{root}/{name}")).expect("example");
        let world = MemoryWorld::new()
            .with(&name, &text)
            .with("common/chat.dist", &common);
        c.bench_function(&format!("check examples/{name}"), |b| {
            b.iter(|| dic_compiler::driver::check_file(black_box(&world), &name))
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = bench
}
criterion_main!(benches);
