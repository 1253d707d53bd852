//! `dic plan FILE [--json] [--top N]`: the layout search for every deployment — the
//! chosen layout, the ranked alternatives, why each rejected family was rejected, and the
//! scaling curve with the point where more GPUs make it worse. With `--gpus A,B,…`, the
//! what-if instead (`planner::whatif`): per GPU type, the cheapest layout meeting the SLOs
//! and its $/h and $/M tokens, ranked.

use dic::disk::InputWorld;
use dic::exit::{ERRORS, OK, USAGE};
use dic::render;
use dic_compiler::planner::{
    best_aggregated_within, carried, search_fitting_context, space_of, whatif, Candidate,
    DisaggCandidate,
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

/// Requests per second carried within the SLOs (`planner::Goodput`), or `—`.
fn in_slo(g: Option<&dic_compiler::planner::Goodput>) -> String {
    g.map(|g| format!("{:.2}", g.requests_per_s))
        .unwrap_or_else(|| "—".into())
}

/// A candidate's $/h, $/M output tokens, TTFT, TPOT and output tok/s as printed (`—`
/// where unknown or unpriced).
fn figures(c: &Candidate) -> [String; 5] {
    [
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
    ]
}

fn row(i: usize, c: &Candidate, width: usize) -> String {
    let [per_hour, per_million, ttft, tpot, tokens] = figures(c);
    format!(
        "{:>3}  {:<width$} {:>5} {:>10} {:>9} {:>9} {:>8} {:>9} {:>9}",
        i,
        c.describe(),
        c.gpus,
        per_hour,
        per_million,
        ttft,
        tpot,
        tokens,
        in_slo(c.goodput.as_ref()),
    )
}

/// The disaggregated family beside the aggregated one: its best splits, and which family
/// carries more load within the SLOs per GPU at no higher cost (the
/// planner's own comparison), then the planner's choice.
fn print_disaggregated(
    result: &dic_compiler::planner::Search,
    disagg: &[DisaggCandidate],
    slo: &[dic_compiler::analysis::rules::SloTarget],
    top: usize,
) {
    if disagg.is_empty() || top == 0 {
        return;
    }
    println!("disaggregated prefill/decode (predicted; deploy one with the `layout` shown under the table):");
    println!(
        "{:>3}  {:<34} {:>5} {:>10} {:>9} {:>8} {:>11} {:>9} {:>9}",
        "#", "pools", "GPUs", "$/h", "TTFT ms", "TPOT ms", "max/GPU", "KV ms", "SLO r/s"
    );
    for (i, d) in disagg.iter().take(top.min(5)).enumerate() {
        println!(
            "{:>3}  {:<34} {:>5} {:>10} {:>9} {:>8.1} {:>11.0} {:>9.2} {:>9}{}",
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
            in_slo(d.goodput.as_ref()),
            match (d.meets_slo, d.serves(slo)) {
                (false, _) => "  (misses an SLO)",
                (true, false) => "  (clients wait for a slot)",
                (true, true) => "",
            }
        );
    }
    if let Some(first) = disagg.first() {
        println!("  #1 as a layout: `layout = {}`", first.split.as_layout());
    }
    // The comparison the planner's choice makes: the best split against the aggregated
    // layout carrying the most load within the SLOs per GPU at no
    // higher cost (`planner::choose_family`); saturated capacity is shown, not compared.
    let best_dis = disagg.first().filter(|d| d.serves(slo));
    let best_agg = match best_dis {
        Some(d) => best_aggregated_within(&result.ranked, d.cost_per_hour),
        None => best_aggregated_within(&result.ranked, f64::INFINITY),
    };
    if let Some((a, _)) = best_agg {
        println!(
            "  goodput, aggregated {}: {}",
            a.describe(),
            carried(a.goodput.as_ref())
        );
    }
    if let Some(d) = best_dis {
        println!(
            "  goodput, disaggregated {}: {}",
            d.name,
            carried(d.goodput.as_ref())
        );
    }
    match (best_agg, best_dis) {
        (Some(_), None) => {
            println!("  no disaggregated split meets every SLO with every client admitted: aggregated wins")
        }
        (None, Some(d)) => println!(
            "  no aggregated layout meets every SLO at no higher cost than {}",
            d.name
        ),
        _ => {}
    }
    if let Some(why) = &result.family_choice {
        println!("  `layout = auto` deploys {why}");
    }
    println!();
}

/// N−1 for the deployment as it runs: its written layout, or the planner's aggregated
/// choice for `layout = auto` (a split's pools, written or chosen: `planner::pool_failure`,
/// from `driver::analyze_written`).
/// The search's figures, read as the report and the disruption budget read them.
fn failure_of(
    ds: &dic_compiler::analysis::DeploymentScenario,
    result: &dic_compiler::planner::Search,
) -> Option<dic_compiler::planner::Failure> {
    if ds.pool.is_some() {
        return None;
    }
    let mut s = ds.scenario.clone();
    if ds.auto_layout {
        let c = result.chosen.as_ref()?;
        s.layout = c.layout;
        s.model.weights = c.weights.clone();
        s.model.kv_cache = c.kv_cache.clone();
        if c.speculation_off() {
            s.engine.speculative = None;
        }
    }
    dic_compiler::planner::failure::of_deployed(result, &s).cloned()
}

/// One line per event: what the replicas left carry within the SLOs (W0410's figures),
/// in the load's own unit (req/s, or a closed loop's clients).
fn print_failure(f: &dic_compiler::planner::Failure) {
    let verdict = |holds: bool| if holds { "holds" } else { "breaks the SLOs" };
    let u = f.unit;
    let (one, replicas) = if f.one_engine {
        ("one engine (its DP ranks, stopped whole)", "engines")
    } else {
        ("one replica", "replicas")
    };
    println!(
        "N−1: {one} carries {} within the SLOs, {} offered; {} down for a rollout: {} ({}){}; {} {replicas} hold through both, a disruption budget of {} down keeps the SLOs, surge {}",
        u.show(f.per_replica),
        u.show(f.offered),
        f.rollout_unavailable,
        u.show(f.during_rollout),
        verdict(f.rollout_holds()),
        match (f.node_replicas, f.after_node_loss) {
            (Some(n), Some(left)) => format!(
                "; the node with {n} {} lost: {} ({})",
                if f.one_engine { "engine" } else { "replica(s)" },
                u.show(left),
                verdict(f.node_loss_holds())
            ),
            _ => "; one node: a lost node is not checked".into(),
        },
        f.replicas_needed,
        f.disruption_budget,
        f.surge
    );
}

/// N−1 for a split's pools, written or the one `layout = auto` deploys (W0410's figures):
/// one replica of each pool down, and the node whose loss leaves the least.
fn print_pool_failure(f: &dic_compiler::planner::PoolFailure) {
    let verdict = |holds: bool| if holds { "holds" } else { "breaks the SLOs" };
    let u = f.unit;
    println!(
        "N−1 of the pools: as deployed {} within the SLOs, {} offered; 1 of {} prefill down: {} ({}); 1 of {} decode down: {} ({}){}{}",
        u.show(f.carried),
        u.show(f.offered),
        f.replicas.prefill,
        u.show(f.prefill_down),
        verdict(f.prefill_holds()),
        f.replicas.decode,
        u.show(f.decode_down),
        verdict(f.decode_holds()),
        match &f.node {
            Some(n) => format!(
                "; the node with {} prefill and {} decode lost: {} ({})",
                n.lost.prefill,
                n.lost.decode,
                u.show(n.carried),
                verdict(f.node_loss_holds())
            ),
            None => "; one node: a lost node is not checked".into(),
        },
        match f.needed {
            Some(n) => format!("; {} prefill and {} decode replicas hold through each", n.prefill, n.decode),
            None => String::new(),
        }
    );
    println!();
}

/// The planner's N−1 verdict on its own choice (one answer with W0410): when the chosen
/// layout does not survive, the chosen layout with the replicas that would (its GPUs and
/// $/h), and the cheapest ranked layout that survives.
fn print_survival(
    result: &dic_compiler::planner::Search,
    topology: &dic_compiler::analysis::Topology,
) {
    let (Some(c), Some(f)) = (&result.chosen, &result.chosen_failure) else {
        return;
    };
    if f.survives() {
        return;
    }
    let cost = |gpus: u64, per_hour: Option<f64>| match per_hour.filter(|_| c.priced) {
        Some(p) => format!(
            "{gpus} GPUs, ${p:.2}/h, +{:.0}%",
            (p / c.cost_per_hour - 1.0) * 100.0
        ),
        None => format!("{gpus} GPUs"),
    };
    let more = if f.one_engine {
        format!(
            "{} engines of {} (a deployment each)",
            f.replicas_needed, c.layout
        )
    } else {
        let l = dic_compiler::program::Layout {
            dp: f.replicas_needed,
            ..c.layout
        };
        format!(
            "`dp {}` ({}{})",
            f.replicas_needed,
            cost(l.gpus(), topology.price_for_layout(&l)),
            if l.gpus() > topology.total_gpus() {
                format!(", more than the cluster's {}", topology.total_gpus())
            } else {
                String::new()
            }
        )
    };
    println!(
        "     the chosen layout does not survive N−1{}; {more} would",
        if f.replicas >= 2 { " (W0410)" } else { "" }
    );
    if let Some(s) = &result.surviving {
        println!(
            "     the cheapest ranked layout that survives: {} ({})",
            s.describe(),
            cost(s.gpus, s.priced.then_some(s.cost_per_hour))
        );
    }
}

pub fn run(
    file: &str,
    json: bool,
    top: usize,
    gpus: Option<&str>,
    color: bool,
    width: usize,
) -> u8 {
    let gpus = match gpus.map(whatif::resolve_gpus).transpose() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
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
        if let Some(gpus) = &gpus {
            let rows = (ds.pool.is_none()).then(|| whatif::what_if(&ds, gpus));
            if rows
                .as_ref()
                .is_some_and(|r| r.iter().all(|w| w.chosen.is_none()))
            {
                code = ERRORS;
            }
            if json {
                all.push(serde_json::json!({ "deployment": ds.name, "whatif": rows }));
            } else {
                print_what_if(&ds, rows.as_deref());
            }
            continue;
        }
        // A written split's pools as `dic check` analyses them (the pair's N−1 with them).
        let written = ds
            .pool
            .as_ref()
            .map(|_| dic_compiler::driver::analyze_written(&ds));
        let written_split = ds.pool.as_ref().zip(written.as_ref()).map(|(part, w)| {
            let a = &w.analysis;
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
        // Where `layout = auto` deploys a split, its pools as `dic compile` builds them:
        // their N−1 is the deployment's, not the aggregated choice's.
        let deployed_split = (ds.auto_layout && result.split_wins)
            .then(|| dic_compiler::driver::choice_of(&ds, &result))
            .filter(|pools| pools.len() == 2);
        let failure = match deployed_split {
            Some(_) => None,
            None => failure_of(&ds, &result),
        };
        let pool_failure = deployed_split
            .as_ref()
            .and_then(|pools| pools[1].1.pool_failure.clone())
            .or_else(|| written.and_then(|w| w.pool_failure))
            .map(|f| (*f).clone());
        if json {
            // The disaggregated family (in the chosen formats) comes with the search.
            let shown: Vec<&DisaggCandidate> = result.splits.iter().take(top.max(1)).collect();
            all.push(serde_json::json!({ "deployment": ds.name, "search": result, "disaggregated": shown, "written_split": written_split, "failure": failure, "pool_failure": pool_failure }));
            continue;
        }
        print_search(
            &ds,
            &result,
            elapsed,
            written_split.as_ref(),
            top,
            failure.as_ref(),
        );
        if let Some(f) = &pool_failure {
            print_pool_failure(f);
        }
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
    failure: Option<&dic_compiler::planner::Failure>,
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
    // `layout = auto` deploys the split where the disaggregated family wins.
    let split = result
        .splits
        .first()
        .filter(|_| ds.auto_layout && result.split_wins);
    match &result.chosen {
        Some(c) if split.is_some() => {
            let d = split.expect("checked");
            println!(
                "chosen: disaggregated {} (`layout = {}`), over the best aggregated layout, {} (the family verdict below)",
                d.name,
                d.split.as_layout(),
                c.describe()
            );
            println!();
        }
        Some(c) => {
            println!("chosen: {}", c.describe());
            if let Some(sp) = &c.speculation {
                println!("{}", sp.sentence());
            }
            println!();
        }
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
    if let Some(f) = failure {
        print_failure(f);
        // `layout = auto` deploys the choice: say when it does not survive N−1.
        if ds.auto_layout {
            print_survival(result, &ds.scenario.topology);
        }
        println!();
    }
    if !result.ranked.is_empty() && top > 0 {
        let width = layout_width(result.ranked.iter().take(top));
        println!(
            "{:>3}  {:<width$} {:>5} {:>10} {:>9} {:>9} {:>8} {:>9} {:>9}",
            "#", "layout", "GPUs", "$/h", "$/Mtok", "TTFT ms", "TPOT ms", "tok/s", "SLO r/s"
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
        // One line a reason, naming the layouts it refuses (a model no layout of this GPU
        // serves is refused once, not once a layout); `--top N` shortens this list as it
        // does the ranked one.
        let groups = rejected_by_reason(&result.rejected);
        println!("rejected:");
        for (families, reason) in groups.iter().take(top) {
            println!("  {}: {reason}", families_text(families));
        }
        if groups.len() > top {
            println!(
                "  … {} more reasons (`--top {}` or `--json` shows them)",
                groups.len() - top,
                groups.len()
            );
        }
        println!();
    }
    print_disaggregated(result, &result.splits, &ds.slo, top);
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

/// The what-if for one deployment: per GPU type, best first, the planner's choice with its
/// $/h and $/M output tokens, list prices marked; `None`: a disaggregated deployment, which
/// the what-if does not plan.
fn print_what_if(ds: &dic_compiler::analysis::DeploymentScenario, rows: Option<&[whatif::WhatIf]>) {
    let t = &ds.scenario.topology;
    println!(
        "deploy {}: {} on {} GPUs ({} × {} {}), what-if by GPU type (the planner's choice on each, cheapest $/M output tokens first)",
        ds.name,
        ds.scenario.model_name,
        t.total_gpus(),
        t.nodes,
        t.gpus_per_node,
        t.gpu.name
    );
    let Some(rows) = rows else {
        println!("  disaggregated as written: the what-if plans aggregated deployments only\n");
        return;
    };
    let chosen = rows.iter().filter_map(|r| r.chosen.as_ref());
    let width = layout_width(chosen);
    println!(
        "{:>3}  {:<9} {:>7} {:<width$} {:>10} {:>8} {:>8} {:>8} {:>8}  price",
        "#", "GPU", "nodes", "layout", "$/h", "$/Mtok", "TTFT ms", "TPOT ms", "tok/s"
    );
    for (i, r) in rows.iter().enumerate() {
        let shape = format!("{} × {}", r.nodes, r.gpus_per_node);
        let price = match (&r.price_from, r.price_per_node_hour) {
            (Some(from), Some(p)) => format!("${p:.2}/node/h (list price, {from})"),
            (None, Some(p)) => format!("${p:.2}/node/h (the cluster's)"),
            _ => "no list price: set the cluster's `price`".into(),
        };
        let Some(c) = &r.chosen else {
            println!(
                "{:>3}  {:<9} {:>7} nothing meets the SLOs: {}",
                "—",
                r.gpu,
                shape,
                r.why_none.as_deref().unwrap_or("")
            );
            continue;
        };
        let [per_hour, per_million, ttft, tpot, tokens] = figures(c);
        println!(
            "{:>3}  {:<9} {:>7} {:<width$} {:>10} {:>8} {:>8} {:>8} {:>8}  {price}",
            i + 1,
            r.gpu,
            shape,
            c.describe(),
            per_hour,
            per_million,
            ttft,
            tpot,
            tokens,
        );
    }
    println!();
}

/// The rejected layouts grouped by their reason, in the order the reasons first appear.
fn rejected_by_reason(rejected: &[dic_compiler::planner::Rejection]) -> Vec<(Vec<&str>, &str)> {
    let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
    for r in rejected {
        match groups.iter_mut().find(|(_, reason)| *reason == r.reason) {
            Some((families, _)) => families.push(&r.family),
            None => groups.push((vec![&r.family], &r.reason)),
        }
    }
    groups
}

/// Layouts as one line: all of up to three, else the first three and how many more.
fn families_text(families: &[&str]) -> String {
    if families.len() <= 3 {
        return families.join(", ");
    }
    let more = families.len() - 3;
    let s = if more == 1 { "" } else { "s" };
    format!("{} and {more} more layout{s}", families[..3].join(", "))
}
