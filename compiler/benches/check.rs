//! `dic check` throughput: parse + resolve + check of a generated 5,000-line file (goal:
//! under 20 ms), the same with the analysis of every deployment in it, and the full
//! `dic check` of each example (goal: under 2 ms). Files are read before timing;
//! the measured work is the IO-free core through an in-memory world.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use dic_compiler::source::MemoryWorld;

use dic_compiler::sample::generated;

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
