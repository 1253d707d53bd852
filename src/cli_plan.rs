//! `dic plan FILE [--json] [--top N]`: the layout search for every deployment — the
//! chosen layout, the ranked alternatives, why each rejected family was rejected, and the
//! scaling curve with the point where more GPUs make it worse.

use dic::disk::DiskWorld;
use dic::exit::{ERRORS, OK, USAGE};
use dic::render;
use dic_compiler::planner::{search, space_of, Candidate};

fn ms(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "—".into())
}

fn row(i: usize, c: &Candidate) -> String {
    format!(
        "{:>3}  {:<34} {:>5} {:>10} {:>9} {:>9} {:>8} {:>9}",
        i,
        c.describe(),
        c.gpus,
        if c.priced {
            format!("${:.2}", c.cost_per_hour)
        } else {
            "—".into()
        },
        c.cost_per_million_output
            .map(|v| format!("${v:.2}"))
            .unwrap_or_else(|| "—".into()),
        ms(c.ttft_ms),
        ms(c.tpot_ms),
        c.output_tokens_per_s
            .map(|v| format!("{v:.0}"))
            .unwrap_or_else(|| "—".into()),
    )
}

pub fn run(file: &str, json: bool, top: usize, color: bool, width: usize) -> u8 {
    let checked = match dic_compiler::driver::front_end(&DiskWorld, file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot read `{file}`: {e}");
            return USAGE;
        }
    };
    if checked.has_errors() {
        eprint!(
            "{}",
            render::human(&checked.db, &checked.diagnostics, color, width)
        );
        return ERRORS;
    }
    let mut all = Vec::new();
    let mut code = OK;
    for ds in dic_compiler::analysis::scenarios_from_program(&checked.program) {
        let space = space_of(&ds);
        let started = std::time::Instant::now();
        let result = search(&ds.scenario, &ds.slo, &space);
        let elapsed = started.elapsed();
        if result.chosen.is_none() {
            code = ERRORS;
        }
        if json {
            all.push(serde_json::json!({ "deployment": ds.name, "search": result }));
            continue;
        }
        let t = &ds.scenario.topology;
        println!(
            "deploy {}: {} on {} × {} GPUs ({} node{} × {}), {} candidates evaluated (pp ≤ {}), {} pruned by bounds, {:.1} ms",
            ds.name,
            ds.scenario.model_name,
            t.total_gpus(),
            t.gpu.name,
            t.nodes,
            if t.nodes == 1 { "" } else { "s" },
            t.gpus_per_node,
            result.evaluated,
            result.max_pp,
            result.pruned,
            elapsed.as_secs_f64() * 1e3
        );
        match &result.chosen {
            Some(c) => println!("chosen: {}\n", c.describe()),
            None => {
                println!("no layout meets every SLO");
                if let Some(c) = &result.closest {
                    println!(
                        "closest: {} — {}",
                        c.describe(),
                        c.rejected_because.as_deref().unwrap_or("")
                    );
                }
                println!();
            }
        }
        if !result.ranked.is_empty() && top > 0 {
            println!(
                "{:>3}  {:<34} {:>5} {:>10} {:>9} {:>9} {:>8} {:>9}",
                "#", "layout", "GPUs", "$/h", "$/Mtok", "TTFT ms", "TPOT ms", "tok/s"
            );
            for (i, c) in result.ranked.iter().take(top).enumerate() {
                println!("{}", row(i + 1, c));
            }
            if result.ranked.len() > top {
                println!("     … {} more", result.ranked.len() - top);
            }
            println!();
        }
        if !result.rejected.is_empty() {
            println!("rejected:");
            for r in &result.rejected {
                println!("  {}: {}", r.family, r.reason);
            }
            println!();
        }
        if !result.scaling.is_empty() {
            println!(
                "scaling, one replica (weights {}, KV cache {}): GPUs → tok/s per GPU, TPOT",
                result.scaling[0].weights, result.scaling[0].kv_cache
            );
            for p in &result.scaling {
                println!(
                    "  {:>4} ({}) → {:>8.1} tok/s/GPU, {:>7.1} ms",
                    p.gpus, p.layout, p.output_tokens_per_s_per_gpu, p.tpot_ms
                );
            }
            if let Some(g) = result.worse_from_gpus {
                println!("  more GPUs make it worse from {g} GPUs on (TPOT rises)");
            }
            println!();
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&all).unwrap_or_default());
    }
    code
}
