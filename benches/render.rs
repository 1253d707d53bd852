//! `dic check`'s two renderers on a 50,000-line file with about 3,000 diagnostics (two
//! misspelt fields per block of definitions, each with its own excerpt): the terminal's (miette, bounded
//! excerpts) against JSON. Goal: human within 1.3× of JSON, both linear in the file.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use criterion::{criterion_group, criterion_main, Criterion};
use dic_compiler::source::MemoryWorld;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("dic check rendering");
    g.sample_size(10);
    for lines in [25_000, 50_000] {
        let text = dic_compiler::sample::generated(lines)
            .replace("price = $70/h", "prise = $70/h")
            .replace("  memory_bandwidth =", "  memory_bandwith =");
        let world = MemoryWorld::new().with("big.dist", &text);
        let checked = dic_compiler::driver::check_file(&world, "big.dist").unwrap();
        let n = checked.diagnostics.len();
        assert!(n > lines / 20, "{n} diagnostics");
        g.bench_function(format!("human, {lines} lines, {n} diagnostics"), |b| {
            b.iter(|| dic::render::human(&checked.db, &checked.diagnostics, false, 100).len())
        });
        g.bench_function(format!("json, {lines} lines, {n} diagnostics"), |b| {
            b.iter(|| {
                serde_json::to_string(&dic::render::json(&checked.db, &checked.diagnostics))
                    .unwrap()
                    .len()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
