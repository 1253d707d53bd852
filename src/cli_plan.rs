//! `dic plan FILE [--json] [--top N]`: the layout search for every deployment — the
//! chosen layout, the ranked alternatives, why each rejected family was rejected, and the
//! scaling curve with the point where more GPUs make it worse.

use dic::disk::InputWorld;
use dic::exit::{ERRORS, OK, USAGE};
use dic::render;
use dic_compiler::planner::{
    best_aggregated_within, search_fitting_context, space_of, Candidate, DisaggCandidate,
};

fn ms(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "—".into())
}

/// The layout column's width: the longest layout shown (`tp 8 × pp 1 × dp 1 × ep, weights
/// fp8` is 37 characters), at least 34, so every row's figures line up.
fn layout_width<'a>(shown: impl Iterator<Item = &'a Candidate>) -> usize {
    shown
        .map(|c| c.describe().chars().count())
        .max()
        .unwrap_or(0)
        .max(34)
}

/// `1 node`, `2 nodes`.
fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

fn row(i: usize, c: &Candidate, width: usize) -> String {
    format!(
        "{:>3}  {:<width$} {:>5} {:>10} {:>9} {:>9} {:>8} {:>9}",
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

/// The disaggregated family beside the aggregated one: its best splits, and which family
/// serves more output tokens per GPU within the SLOs at no higher cost, by how much (the
/// planner's own comparison), then the planner's choice.
fn print_disaggregated(
    result: &dic_compiler::planner::Search,
    disagg: &[DisaggCandidate],
    top: usize,
) {
    if disagg.is_empty() || top == 0 {
        return;
    }
    println!("disaggregated prefill/decode (predicted; deploy one with the `layout` shown under the table):");
    println!(
        "{:>3}  {:<34} {:>5} {:>10} {:>9} {:>8} {:>11} {:>9}",
        "#", "pools", "GPUs", "$/h", "TTFT ms", "TPOT ms", "max/GPU", "KV ms"
    );
    for (i, d) in disagg.iter().take(top.min(5)).enumerate() {
        println!(
            "{:>3}  {:<34} {:>5} {:>10} {:>9} {:>8.1} {:>11.0} {:>9.2}{}",
            i + 1,
            d.name,
            d.gpus,
            if d.priced {
                format!("${:.2}", d.cost_per_hour)
            } else {
                "—".into()
            },
            ms(d.ttft_ms),
            d.tpot_ms,
            d.capacity_per_gpu,
            d.transfer_ms,
            if d.meets_slo { "" } else { "  (misses an SLO)" }
        );
    }
    if let Some(first) = disagg.first() {
        println!("  #1 as a layout: `layout = {}`", first.split.as_layout());
    }
    // The comparison the planner's choice makes: the best split against the aggregated
    // layout serving the most per GPU at no higher cost (`planner::choose_family`).
    let best_dis = disagg.first().filter(|d| d.meets_slo);
    let best_agg = match best_dis {
        Some(d) => best_aggregated_within(&result.ranked, d.cost_per_hour),
        None => best_aggregated_within(&result.ranked, f64::INFINITY),
    };
    match (best_agg, best_dis) {
        (Some((a, at)), Some(d)) => {
            let (winner, by) = if d.capacity_per_gpu > at {
                ("disaggregated", d.capacity_per_gpu / at - 1.0)
            } else {
                ("aggregated", at / d.capacity_per_gpu.max(1e-9) - 1.0)
            };
            println!(
                "  saturated output per GPU at no higher cost, layouts that meet the SLOs: aggregated {} {at:.0} tok/s/GPU, disaggregated {} {:.0} tok/s/GPU: {winner} by {:.0}%",
                a.describe(),
                d.name,
                d.capacity_per_gpu,
                by * 100.0
            );
        }
        (Some(_), None) => {
            println!("  no disaggregated split meets every SLO: aggregated wins")
        }
        (None, Some(d)) => println!(
            "  no aggregated layout meets every SLO at no higher cost than {}",
            d.name
        ),
        (None, None) => {}
    }
    if let Some(why) = &result.family_choice {
        println!("  `layout = auto` deploys {why}");
    }
    println!();
}

pub fn run(file: &str, json: bool, top: usize, color: bool, width: usize) -> u8 {
    // `-` is standard input, named `<stdin>` as in `dic check -`.
    let read = InputWorld::for_path(file).and_then(|(world, path)| {
        dic_compiler::driver::front_end(&world, &path).map_err(|e| e.to_string())
    });
    let checked = match read {
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
        // A disaggregated deployment is planned once, from its decode pool, with the
        // written split's own prediction beside the two families.
        if ds
            .pool
            .as_ref()
            .is_some_and(|x| x.pool == dic_compiler::program::Pool::Prefill)
        {
            continue;
        }
        let written_split = ds.pool.as_ref().map(|part| {
            let a = dic_compiler::analysis::analyze_pool(&ds.scenario, part, &ds.slo);
            let (ps, dsc) = part.pools(&ds.scenario);
            let gpus = ps.layout.gpus() + dsc.layout.gpus();
            serde_json::json!({
                "prefill": ps.layout.to_string(),
                "decode": dsc.layout.to_string(),
                "gpus": gpus,
                "ttft_ms": a.prediction.as_ref().map(|p| p.ttft * 1e3).filter(|v| v.is_finite()),
                "tpot_ms": a.prediction.as_ref().map(|p| p.tpot * 1e3),
                "capacity_per_gpu": a.prediction.as_ref().map(|p| p.max_output_tokens_per_s / gpus.max(1) as f64),
                "meets_slo": a.prediction.as_ref().is_some_and(|p| !p.overloaded) && a.slo.iter().all(|r| r.met),
            })
        });
        let space = space_of(&ds);
        let started = std::time::Instant::now();
        let result = search_fitting_context(&ds.scenario, &ds.slo, &space);
        let elapsed = started.elapsed();
        if result.chosen.is_none() {
            code = ERRORS;
        }
        if json {
            // The disaggregated family (in the chosen formats) comes with the search.
            let shown: Vec<&DisaggCandidate> = result.splits.iter().take(top.max(1)).collect();
            all.push(serde_json::json!({ "deployment": ds.name, "search": result, "disaggregated": shown, "written_split": written_split }));
            continue;
        }
        print_search(&ds, &result, elapsed, written_split.as_ref(), top);
    }
    if json {
        let mut all = serde_json::Value::Array(all);
        unpriced_costs_absent(&mut all);
        println!("{}", serde_json::to_string_pretty(&all).unwrap_or_default());
    }
    code
}

/// One deployment's search for a terminal: the chosen layout (or the closest, and a
/// shorter context that would fit), the ranked alternatives, the rejected families (both
/// at most `top`), the disaggregated family and the scaling curve.
fn print_search(
    ds: &dic_compiler::analysis::DeploymentScenario,
    result: &dic_compiler::planner::Search,
    elapsed: std::time::Duration,
    written_split: Option<&serde_json::Value>,
    top: usize,
) {
    let t = &ds.scenario.topology;
    println!(
        "deploy {}: {} on {} × {} GPUs ({} {} × {}), {} {} evaluated{}, {} pruned by bounds, {:.1} ms",
        ds.name,
        ds.scenario.model_name,
        t.total_gpus(),
        t.gpu.name,
        t.nodes,
        plural(t.nodes as usize, "node", "nodes"),
        t.gpus_per_node,
        result.evaluated,
        plural(result.evaluated, "candidate", "candidates"),
        // Pipelines no deeper than the cluster has GPUs: none at all on one GPU.
        match result.max_pp.min(t.total_gpus()) {
            0 | 1 => String::new(),
            pp => format!(" (pp ≤ {pp})"),
        },
        result.pruned,
        elapsed.as_secs_f64() * 1e3
    );
    if let Some(w) = &written_split {
        let num = |k: &str, digits: usize| {
            w[k].as_f64()
                .map(|v| format!("{v:.digits$}"))
                .unwrap_or_else(|| "—".into())
        };
        println!(
            "written: prefill {} + decode {} (disaggregated, {} GPUs): TTFT {} ms, TPOT {} ms, {} tok/s/GPU saturated{}",
            w["prefill"].as_str().unwrap_or_default(),
            w["decode"].as_str().unwrap_or_default(),
            w["gpus"],
            num("ttft_ms", 1),
            num("tpot_ms", 1),
            num("capacity_per_gpu", 0),
            if w["meets_slo"].as_bool() == Some(true) { "" } else { " (misses an SLO)" }
        );
    }
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
            if let Some(fit) = &result.context {
                println!("context: {}; set `{}`", fit.sentence(), fit.setting());
            }
            println!();
        }
    }
    if !result.ranked.is_empty() && top > 0 {
        let width = layout_width(result.ranked.iter().take(top));
        println!(
            "{:>3}  {:<width$} {:>5} {:>10} {:>9} {:>9} {:>8} {:>9}",
            "#", "layout", "GPUs", "$/h", "$/Mtok", "TTFT ms", "TPOT ms", "tok/s"
        );
        for (i, c) in result.ranked.iter().take(top).enumerate() {
            println!("{}", row(i + 1, c, width));
        }
        if result.ranked.len() > top {
            println!("     … {} more", result.ranked.len() - top);
        }
        println!();
    }
    if !result.rejected.is_empty() {
        // `--top N` shortens this list as it does the ranked one.
        println!("rejected:");
        for r in result.rejected.iter().take(top) {
            println!("  {}: {}", r.family, r.reason);
        }
        if result.rejected.len() > top {
            println!(
                "  … {} more (`--top {}` or `--json` shows them)",
                result.rejected.len() - top,
                result.rejected.len()
            );
        }
        println!();
    }
    print_disaggregated(result, &result.splits, top);
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

/// An unpriced cluster has no $/h: the candidates rank by GPU count internally, but the
/// JSON says `"cost_per_hour": null` (as the report shows none), never the GPU count as
/// if it were dollars.
fn unpriced_costs_absent(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(o) => {
            if o.get("priced") == Some(&serde_json::Value::Bool(false)) {
                if let Some(c) = o.get_mut("cost_per_hour") {
                    *c = serde_json::Value::Null;
                }
            }
            o.values_mut().for_each(unpriced_costs_absent);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(unpriced_costs_absent),
        _ => {}
    }
}
