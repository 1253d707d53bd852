//! The planner through `dic plan`, `layout = auto` in `dic compile`, and the cheaper-layout
//! advice on explicit layouts.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use common::dic;

#[test]
fn plan_ranks_by_cost_and_explains_rejections() {
    let o = dic(&["plan", "examples/prod.dist", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v[0]["search"];
    assert!(s["evaluated"].as_u64().unwrap() > 10);
    assert!(s["pruned"].as_u64().unwrap() > 0, "bounds prune");
    let ranked = s["ranked"].as_array().unwrap();
    let costs: Vec<f64> = ranked
        .iter()
        .map(|c| c["cost_per_hour"].as_f64().unwrap())
        .collect();
    assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{costs:?}");
    assert_eq!(s["chosen"], ranked[0]);
    assert!(ranked.iter().all(|c| c["meets_slo"] == true));
    // TP across the two p5 nodes is rejected for the interconnect, with numbers
    let rejected = s["rejected"].as_array().unwrap();
    assert!(rejected
        .iter()
        .any(|r| r["family"].as_str().unwrap().starts_with("tp 16")
            && r["reason"].as_str().unwrap().contains("spans 2 nodes")));
    assert!(!s["scaling"].as_array().unwrap().is_empty());
    // The disaggregated family beside it: splits within the cluster, those meeting the
    // SLOs first.
    let dis = v[0]["disaggregated"].as_array().unwrap();
    assert!(!dis.is_empty());
    assert!(dis.iter().all(|d| d["gpus"].as_u64().unwrap() <= 16));
    let meets: Vec<bool> = dis.iter().map(|d| d["meets_slo"] == true).collect();
    assert!(meets.windows(2).all(|w| w[0] >= w[1]), "{meets:?}");
    // Every aggregated layout and split that meets the SLOs says the load it carries
    // within them (goodput) and what stops it there.
    assert!(ranked
        .iter()
        .all(|c| c["goodput"]["requests_per_s"].as_f64().unwrap() > 0.0
            && c["goodput"]["binding"].is_string()));
    assert!(dis
        .iter()
        .filter(|d| d["meets_slo"] == true)
        .all(|d| d["goodput"]["requests_per_s"].as_f64().is_some()));
    // N−1: both figures, with one replica's goodput behind them (8 replicas, 4 per node)
    let f = &v[0]["failure"];
    let g = f["per_replica"].as_f64().unwrap();
    assert_eq!(f["replicas"], 8);
    assert!((f["during_rollout"].as_f64().unwrap() - 7.0 * g).abs() < 1e-6);
    assert!((f["after_node_loss"].as_f64().unwrap() - 4.0 * g).abs() < 1e-6);
    // the human table
    let text =
        String::from_utf8(dic(&["plan", "examples/prod.dist", "--top", "3"]).stdout).unwrap();
    assert!(
        text.contains("chosen: ")
            && text.contains("rejected:")
            && text.contains("scaling")
            && text.contains("N−1: ")
            && text.contains("lost"),
        "{text}"
    );
    assert!(
        text.contains("disaggregated prefill/decode")
            && (text.contains("goodput, aggregated") || text.contains("aggregated wins")),
        "{text}"
    );
}

#[test]
fn auto_layout_compiles_to_the_planners_choice() {
    let dir = std::env::temp_dir().join(format!("dic-plan-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    common::compile_ok("examples/auto_layout.dist", dir.to_str().unwrap());
    let plan: serde_json::Value =
        serde_json::from_slice(&dic(&["plan", "examples/auto_layout.dist", "--json"]).stdout)
            .unwrap();
    let tp = plan[0]["search"]["chosen"]["layout"]["tp"]
        .as_u64()
        .unwrap();
    let argv = common::first_argv(
        &std::fs::read_to_string(dir.join("tickets/vllm/commands.json")).unwrap(),
    );
    assert_eq!(
        common::value_after(&argv, "--tensor-parallel-size"),
        Some(tp.to_string())
    );
    if plan[0]["search"]["chosen"]["weights"] == "fp8" {
        assert!(argv.contains(&"--quantization".to_string()));
    }
}

#[test]
fn unsatisfiable_auto_names_the_closest_candidate() {
    let dir = std::env::temp_dir().join(format!("dic-plan-unsat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("u.dist");
    std::fs::write(
        &f,
        "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\ncluster c { nodes = 1 × dgx_h100 }\n\
         workload w { prompt = 1k tokens, output = 100 tokens, rate = 1 req/s }\nslo s { tpot.p95 <= 2 ms }\n\
         deploy d { model = llama_3_1_70b, cluster = c, workload = w, slo = s, layout = auto, engine = vllm { max_model_len = 8k tokens } }\n",
    )
    .unwrap();
    let o = dic(&["check", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("E0701") && err.contains("closest"), "{err}");
    let o = dic(&["plan", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("closest: tp 8"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// The plan says each reason for refusing layouts once, naming the layouts: DeepSeek V4
/// on A100s has no attention kernel (E0803) whatever the layout, one line, not 38.
#[test]
fn a_plan_whose_layouts_all_fail_alike_says_why_once() {
    let dir = std::env::temp_dir().join(format!("dic-plan-v4-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("v4.dist");
    std::fs::write(
        &f,
        "import std.nodes.dgx_a100\nimport std.models.deepseek_v4_flash\ncluster c { nodes = 2 × dgx_a100 }\n\
         workload w { prompt = 2k tokens, output = 500 tokens, rate = 2 req/s }\nslo s { ttft.p95 <= 3 s }\n\
         deploy d { model = deepseek_v4_flash, cluster = c, workload = w, slo = s, layout = auto }\n",
    )
    .unwrap();
    let o = dic(&["plan", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        out.matches("DeepSeek V4's attention has no kernel").count(),
        1,
        "{out}"
    );
    assert!(
        out.contains("tp 1 × pp 1, tp 1 × pp 1 × ep, tp 1 × pp 2 and 35 more layouts: DeepSeek V4"),
        "{out}"
    );
    // Other reasons keep their own lines, with the layouts they refuse.
    assert!(
        out.contains("tp 2 × pp 5, tp 2 × pp 5 × ep: 10 GPUs per replica"),
        "{out}"
    );
}

/// `kv_offload` rules out every P/D split (vLLM's offloading connector replaces NIXL,
/// E0410): the planner's family choice says so, not that no split meets the SLOs.
#[test]
fn with_kv_offload_the_planner_says_why_no_split_can_run() {
    let o = dic(&["plan", "examples/kv_offload.dist", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let why = v[0]["search"]["family_choice"].as_str().unwrap_or_default();
    assert!(
        why.contains("no disaggregated split can run: kv_offload replaces the P/D connector"),
        "{why}"
    );
    assert_eq!(v[0]["search"]["splits"].as_array().map(Vec::len), Some(0));
}

/// An unpriced cluster has no $/h: the JSON plan says `null` where the ranking uses the GPU
/// count, for the aggregated candidates and the splits alike.
#[test]
fn an_unpriced_plan_has_no_cost_per_hour() {
    let o = dic(&["plan", "examples/gb200_tp8.dist", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v[0]["search"];
    let ranked = s["ranked"].as_array().unwrap();
    assert!(!ranked.is_empty());
    for c in ranked
        .iter()
        .chain(v[0]["disaggregated"].as_array().unwrap())
    {
        assert_eq!(c["priced"], false, "{c}");
        assert!(c["cost_per_hour"].is_null(), "{c}");
    }
}

/// `--gpus`: prod.dist (Llama 3.1 70B FP8 on 16 H100s, $55.04/h per node negotiated) on
/// four GPU types, ranked by $/M output tokens; the cluster's price stays with its own GPU,
/// the others take the catalog's list price, marked.
#[test]
fn what_if_ranks_gpu_types_by_cost_per_million_tokens() {
    let o = dic(&[
        "plan",
        "examples/prod.dist",
        "--gpus",
        "h100_sxm,h200_sxm,b200,mi300x",
        "--format",
        "json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v[0]["whatif"].as_array().unwrap();
    let gpus: Vec<&str> = rows.iter().map(|r| r["gpu"].as_str().unwrap()).collect();
    assert_eq!(gpus.len(), 4);
    let mut sorted = gpus.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["b200", "h100_sxm", "h200_sxm", "mi300x"]);
    // Priced rows first, by $/M tokens; MI300X has no list price in the stdlib: last.
    let per_million: Vec<f64> = rows[..3]
        .iter()
        .map(|r| r["cost_per_million_output"].as_f64().unwrap())
        .collect();
    assert!(
        per_million.windows(2).all(|w| w[0] <= w[1]),
        "{per_million:?}"
    );
    assert_eq!(gpus[3], "mi300x");
    assert!(rows[3]["cost_per_million_output"].is_null());
    for r in rows {
        let own = r["gpu"] == "h100_sxm";
        assert_eq!(r["list_price"], !own && r["gpu"] != "mi300x", "{r}");
        if own {
            assert_eq!(r["price_per_node_hour"], 55.04);
        }
        assert_eq!(
            r["nodes"].as_u64().unwrap() * r["gpus_per_node"].as_u64().unwrap(),
            16
        );
        assert_eq!(r["chosen"]["meets_slo"], true, "{r}");
    }
    // The table says the same, marking list prices.
    let o = dic(&[
        "plan",
        "examples/prod.dist",
        "--gpus",
        "h100_sxm,h200_sxm,b200,mi300x",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("(list price, p5e_48xlarge)"), "{text}");
    assert!(
        text.contains("mi300x") && text.contains("no list price"),
        "{text}"
    );
}

#[test]
fn what_if_with_an_unknown_gpu_is_a_usage_error() {
    let o = dic(&["plan", "examples/prod.dist", "--gpus", "h100_sxm,h900"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("`h900`") && err.contains("h200_sxm") && err.contains("mi300x"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

/// A declared draft is weighed on and off: `dic plan` prints the verdict under the
/// chosen layout, and `--json` carries it on each candidate. The `eagle3_8b` example's
/// 7.5 ms TPOT bound is missed without the draft, so it stays on.
#[test]
fn plan_says_whether_the_draft_stays_and_why() {
    let o = dic(&["plan", "examples/eagle3_8b.dist"]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.starts_with("speculation "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.starts_with("speculation on (eagle3 drafting 3 tokens at 70% acceptance)")
            && line.contains("without it the SLOs are missed")
            && line.contains("req/s"),
        "{line}"
    );
    let o = dic(&["plan", "examples/eagle3_8b.dist", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sp = &v[0]["search"]["chosen"]["speculation"];
    assert_eq!(sp["on"], true, "{sp}");
    assert_eq!(sp["method"], "eagle3");
}

/// `dic compile DIST --out DIR` of one deployment `name`: its report files (md, json,
/// html), read back.
fn compiled_report(dist: &str, dir: &std::path::Path, name: &str) -> [String; 3] {
    let out = dir.join("out");
    let o = dic(&["compile", dist, "--out", out.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    ["report.md", "report.json", "report.html"]
        .map(|f| std::fs::read_to_string(out.join(name).join(f)).unwrap())
}

/// The report's "Which GPU" for the what-if unit test's deployment (Llama 3.1 70B FP8 on
/// two unpriced 8×H100 nodes, 20 req/s of 2k → 512 tokens; written as `tp 2 × dp 8`, for
/// `layout = auto` deploys a P/D split there, whose pools the what-if does not plan; the
/// what-if searches every layout either way): each GPU type carries the
/// offered 20 × 512 = 10,240 output tokens/s, so $/M output tokens = $/h ÷ (10,240 ×
/// 3,600 ÷ 1e6) = $/h ÷ 36.864. By hand: b200's one lambda_8x_b200 node at its list price
/// $53.52/h → $1.4518/M; h200_sxm's two p5e_48xlarge nodes at $43.26/h → $86.52/h →
/// $2.3470/M; h100_sxm (this cluster's GPU, unpriced: lambda's list price $31.92/h per
/// node, × 2 = $63.84/h) → $1.7318/M, between them; mi300x has no list price: last, and
/// no bar.
#[test]
fn the_report_ranks_gpu_types_by_hand_computed_cost_per_million_tokens() {
    let dir = common::fresh_dir("report-which-gpu");
    let dist = dir.join("p.dist");
    std::fs::write(
        &dist,
        "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\n\
model m = llama_3_1_70b { weights = fp8, kv_cache = fp8 }\n\
cluster c { nodes = 2 × dgx_h100 }\n\
workload w { prompt = 2k tokens, output = 512 tokens, rate = 20 req/s }\n\
slo s { ttft.p95 <= 800 ms, tpot.p95 <= 40 ms }\n\
deploy d { model = m, cluster = c, workload = w, slo = s, layout = tp 2 × pp 1 × dp 8, engine = vllm { max_model_len = 8k tokens } }\n",
    )
    .unwrap();
    let [md, json, html] = compiled_report(dist.to_str().unwrap(), &dir, "d");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = v["report"]["gpu_choice"].as_array().unwrap();
    let gpus: Vec<&str> = rows.iter().map(|r| r["gpu"].as_str().unwrap()).collect();
    assert_eq!(gpus, ["b200", "h100_sxm", "h200_sxm", "mi300x"]);
    let row = |gpu: &str| rows.iter().find(|r| r["gpu"] == gpu).unwrap();
    for (gpu, per_hour, per_million) in [
        ("b200", 53.52, 1.4518),
        ("h100_sxm", 63.84, 1.7318),
        ("h200_sxm", 86.52, 2.3470),
    ] {
        let r = row(gpu);
        assert!(
            (r["cost_per_hour"].as_f64().unwrap() - per_hour).abs() < 1e-9,
            "{r}"
        );
        let m = r["cost_per_million_output"].as_f64().unwrap();
        assert!((m - per_hour / 36.864).abs() < 1e-3, "{gpu}: {m}");
        assert!((m - per_million).abs() < 1e-3, "{gpu}: {m}");
        assert_eq!(r["list_price"], true, "{r}");
    }
    assert_eq!(row("h100_sxm")["own"], true);
    assert_eq!(row("b200")["gpus_used"], 6);
    assert!(row("mi300x")["cost_per_million_output"].is_null());
    // The table, in that order, list prices marked.
    let table: Vec<&str> = md
        .split("## Which GPU")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| #"))
        .collect();
    assert_eq!(table.len(), 4, "{md}");
    for (line, (gpu, money)) in table.iter().zip([
        ("b200", "| $1.45 |"),
        ("h100_sxm", "| $1.73 |"),
        ("h200_sxm", "| $2.35 |"),
        ("mi300x", "| — |"),
    ]) {
        assert!(line.contains(gpu) && line.contains(money), "{line}");
    }
    assert!(table[0].contains("list price: $53.52/node/h (lambda_8x_b200)"));
    assert!(table[3].contains("no list price"));
    // The chart: one bar per priced GPU type, in rank order, as long as its $/M tokens.
    let svg = html
        .split("<svg class=\"chart\" id=\"gpus\"")
        .nth(1)
        .unwrap()
        .split("</svg>")
        .next()
        .unwrap();
    let bars: Vec<(String, f64)> = svg
        .split("<rect ")
        .skip(1)
        .map(|r| {
            let width = r
                .split("width=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            let title = r
                .split("<title>")
                .nth(1)
                .unwrap()
                .split(':')
                .next()
                .unwrap();
            (title.to_string(), width.parse().unwrap())
        })
        .collect();
    let names: Vec<&str> = bars.iter().map(|b| b.0.as_str()).collect();
    assert_eq!(names, ["b200", "h100_sxm", "h200_sxm"], "{svg}");
    let ratio = bars[2].1 / bars[0].1;
    assert!((ratio - 2.3470 / 1.4518).abs() < 0.02, "{bars:?}");
}

/// N−1 in prod.dist's report: the figures `dic plan` prints (one replica's goodput, a
/// rollout's 7 replicas and a lost node's 4 against the 20 req/s offered), W0410's 12
/// replicas.
#[test]
fn the_reports_n_minus_one_figures_are_dic_plans() {
    let o = dic(&["plan", "examples/prod.dist", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &plan[0]["failure"];
    let dir = common::fresh_dir("report-n-minus-one");
    let [md, json, html] = compiled_report("examples/prod.dist", &dir, "chat");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let r = &v["report"]["capacity_under_failure"];
    for (key, value) in f.as_object().unwrap() {
        assert_eq!(&r[key], value, "{key}");
    }
    assert_eq!(r["replicas_after_rollout"], 7);
    assert_eq!(r["replicas_after_node_loss"], 4);
    // Both break the SLOs at 20 req/s: W0410 fired.
    assert_eq!(r["rollout_holds"], false);
    assert_eq!(r["node_loss_holds"], false);
    assert_eq!(r["warned"], true);
    let needed = f["replicas_needed"].as_u64().unwrap();
    for text in [&md, &html] {
        let section = text.split("Capacity under failure (N−1)").nth(1).unwrap();
        for key in [
            "per_replica",
            "offered",
            "during_rollout",
            "after_node_loss",
        ] {
            let figure = format!("{:.2}", f[key].as_f64().unwrap());
            assert!(section.contains(&figure), "{key} {figure}: {section}");
        }
        assert!(section.contains(&format!("{needed} replicas hold the SLOs through both")));
        assert!(section.contains("W0410"));
    }
}

/// Where nothing bounds TTFT — no SLOs, or only a TPOT bound — the planner must not choose
/// a layout whose clients wait for a slot (the checker's W0501): Llama 3.1 70B on one
/// 8×H100 node, 256 clients of 4k → 1k tokens. The cheapest layout, `tp 2` on 2 GPUs,
/// admits a fraction of them at once (W0501, TTFT in minutes) and meets a 100 ms TPOT
/// bound; so does a 1P + 1D split at tp 2, whose decode pool admits six. The planner
/// chooses an aggregated layout that admits them all, and written back it checks without
/// W0501. With a TTFT bound, the bound decides how long a client may wait.
#[test]
fn where_nothing_bounds_ttft_the_planner_admits_every_client() {
    let dir = common::fresh_dir("plan-no-slo");
    for (case, slo) in [("none", ""), ("tpot", ", slo = s")] {
        let src = "import std.nodes.dgx_h100\nimport std.models.llama_3_1_70b\n\
cluster one { nodes = 1 × dgx_h100 }\n\
workload batch { prompt = 4k tokens, output = 1k tokens, concurrency = 256 }\n\
slo s { tpot.p50 <= 100 ms }\n\
deploy d { model = llama_3_1_70b, cluster = one, workload = batch, layout = LAYOUTSLO, engine = vllm { max_model_len = 8k tokens } }\n";
        let write = |name: &str, layout: &str| {
            let path = dir.join(format!("{case}-{name}"));
            let text = src.replace("LAYOUT", layout).replace("SLO", slo);
            std::fs::write(&path, text).unwrap();
            path.to_str().unwrap().to_string()
        };
        let check = |path: &str| {
            let o = dic(&["check", path]);
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
        };
        let tp2 = check(&write("tp2.dist", "tp 2"));
        assert!(tp2.contains("W0501"), "{case}: {tp2}");
        assert!(
            !tp2.contains("E0601"),
            "{case}: tp 2 meets the TPOT bound: {tp2}"
        );
        let o = dic(&["plan", &write("auto.dist", "auto"), "--json"]);
        assert_eq!(o.status.code(), Some(0), "{case}");
        let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        // Nor a split whose decode pool admits a handful of them (its W0501): 1P + 1D at
        // tp 2 meets the TPOT bound on 4 GPUs, with clients waiting minutes.
        assert_eq!(plan[0]["search"]["split_wins"], false, "{case}");
        let chosen = &plan[0]["search"]["chosen"]["layout"];
        let layout = format!(
            "tp {} × pp {} × dp {}",
            chosen["tp"], chosen["pp"], chosen["dp"]
        );
        assert_ne!(layout, "tp 2 × pp 1 × dp 1", "{case}");
        let written = check(&write("chosen.dist", &layout));
        assert!(!written.contains("W0501"), "{case}, {layout}: {written}");
    }
}

/// eagle3_8b.dist written as `tp 2`: the planner still chooses `tp 1` (more goodput per GPU
/// at one node price), so the report's speculation section has two rows, the written
/// layout's (deployed) and the planner's choice, each the verdict its ranked candidate
/// carries, and the choice's sentence is the line `dic plan` prints.
#[test]
fn the_reports_speculation_shows_the_written_layout_and_the_planners_choice() {
    let dir = common::fresh_dir("report-speculation-two");
    let written = std::fs::read_to_string("examples/eagle3_8b.dist")
        .unwrap()
        .replace("  layout = tp 1\n", "  layout = tp 2\n");
    assert!(written.contains("layout = tp 2"));
    let dist = dir.join("eagle3_tp2.dist");
    std::fs::write(&dist, written).unwrap();
    let dist = dist.to_str().unwrap();
    let o = dic(&["plan", dist, "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let search = &plan[0]["search"];
    let ranked = search["ranked"].as_array().unwrap();
    let at = |tp: u64| {
        ranked
            .iter()
            .find(|c| c["layout"]["tp"] == tp && c["layout"]["pp"] == 1 && c["layout"]["dp"] == 1)
            .unwrap()
    };
    assert_eq!(search["chosen"]["layout"], at(1)["layout"]);
    let text = dic(&["plan", dist]);
    let text = String::from_utf8_lossy(&text.stdout);
    let printed = text
        .lines()
        .find(|l| l.starts_with("speculation "))
        .unwrap_or_else(|| panic!("{text}"));
    let [_, json, _] = compiled_report(dist, &dir, "assistant");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = v["report"]["speculation"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (row, candidate, deployed) in [(&rows[0], at(2), true), (&rows[1], at(1), false)] {
        assert_eq!(row["deployed"], deployed);
        for (key, value) in candidate["speculation"].as_object().unwrap() {
            assert_eq!(&row[key], value, "{key}");
        }
    }
    assert_eq!(rows[0]["layout"], "tp 2 × pp 1 × dp 1");
    assert_eq!(rows[1]["sentence"], printed);
}

/// The report's speculation section for eagle3_8b.dist is `dic plan`'s verdict
/// (`planner::speculation::judge`, carried on the search's candidates): for the written
/// `tp 1`, which the planner also chooses, the ranked candidate's figures (only the draft
/// meets the 7.5 ms TPOT bound, so there is no goodput without it) and the line `dic plan`
/// prints; the goodput, the in-flight counts and both TPOTs as printed.
#[test]
fn the_reports_speculation_verdict_is_dic_plans() {
    let o = dic(&["plan", "examples/eagle3_8b.dist", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let search = &plan[0]["search"];
    let tp1 = search["ranked"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["layout"]["tp"] == 1 && c["layout"]["pp"] == 1 && c["layout"]["dp"] == 1)
        .unwrap();
    let text = dic(&["plan", "examples/eagle3_8b.dist"]);
    let text = String::from_utf8_lossy(&text.stdout);
    let printed = text
        .lines()
        .find(|l| l.starts_with("speculation "))
        .unwrap_or_else(|| panic!("{text}"));
    let dir = common::fresh_dir("report-speculation");
    let [md, json, html] = compiled_report("examples/eagle3_8b.dist", &dir, "assistant");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = v["report"]["speculation"].as_array().unwrap();
    // The planner chooses the written `tp 1` (13.06 req/s on one GPU against `tp 2`'s 25.77
    // on two at the same node price): one row, the deployed layout's, which is `dic plan`'s.
    assert_eq!(search["chosen"]["layout"], tp1["layout"]);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["deployed"], true);
    let verdict = tp1["speculation"].as_object().unwrap();
    for (key, value) in verdict {
        assert_eq!(&rows[0][key], value, "{key}");
    }
    assert_eq!(rows[0]["layout"], "tp 1 × pp 1 × dp 1");
    assert_eq!(rows[0]["sentence"], printed);
    let sp = &tp1["speculation"];
    assert_eq!(sp["on"], true);
    assert_eq!(sp["meets"], serde_json::json!([true, false]));
    assert!(sp["without"].is_null());
    let f = |k: &str| sp[k].as_f64().unwrap();
    for text in [&md, &html] {
        let section = text
            .split("Speculative decoding: on or off")
            .nth(1)
            .unwrap();
        // The HTML escapes `/` (in "req/s").
        let section = section.split("Cost").next().unwrap().replace("&#x2f;", "/");
        for figure in [
            format!(
                "{:.2} req/s",
                sp["with"]["requests_per_s"].as_f64().unwrap()
            ),
            // Requests in flight with and without the draft, in a table row.
            if text == &md {
                format!("| {:.0} | {:.0} |", f("running"), f("running_without"))
            } else {
                format!(
                    "<td>{:.0}</td><td>{:.0}</td>",
                    f("running"),
                    f("running_without")
                )
            },
            format!("{:.1} ms", f("tpot_with_ms")),
            format!("{:.1} ms", f("tpot_without_ms")),
            rows[0]["sentence"].as_str().unwrap().to_string(),
            printed.to_string(),
        ] {
            assert!(section.contains(&figure), "{figure}: {section}");
        }
        assert!(section.contains("this deployment's layout"), "{section}");
    }
}

/// docs/pd-decisions.md's table is `dic plan` on its seven inputs (docs/pd-decisions/
/// w1–w7.dist): each row names the family and layout the planner chooses and that
/// choice's goodput (req/s, two decimals). A refit that moves either fails here, and the
/// table is rewritten with it.
#[test]
fn the_pd_decisions_table_is_dic_plans() {
    let doc = std::fs::read_to_string("docs/pd-decisions.md").unwrap();
    for w in 1..=7 {
        let input = format!("docs/pd-decisions/w{w}.dist");
        let o = dic(&["plan", &input, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{input}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let s = &v[0]["search"];
        let (choice, goodput) = if s["split_wins"] == true {
            let split = &v[0]["disaggregated"][0];
            (
                format!("**P/D** {}", split["name"].as_str().unwrap()),
                split["goodput"]["requests_per_s"].as_f64().unwrap(),
            )
        } else {
            let l = &s["chosen"]["layout"];
            let pp = match l["pp"].as_u64().unwrap() {
                1 => String::new(),
                pp => format!(" × pp {pp}"),
            };
            (
                format!("aggregated `tp {}{pp} × dp {}`", l["tp"], l["dp"]),
                s["chosen"]["goodput"]["requests_per_s"].as_f64().unwrap(),
            )
        };
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| w{w} |")))
            .unwrap_or_else(|| panic!("no row w{w}"));
        let dic_column = row.split(" | ").nth(4).unwrap();
        assert!(
            dic_column.starts_with(&choice),
            "w{w}: dic plan chooses {choice}; the table says {dic_column}"
        );
        let figure = format!("{goodput:.2} req/s");
        assert!(
            dic_column.contains(&figure),
            "w{w}: the choice carries {figure}; the table says {dic_column}"
        );
    }
}

/// Where `layout = auto` deploys a split (docs/pd-decisions/w4.dist: +28% goodput per
/// GPU), `dic plan` names the split as its choice and prints the pools' N−1 — the figures
/// `dic compile` lowers into both pools' forecasts — not the aggregated layout's.
#[test]
fn plan_names_the_split_auto_deploys_and_its_n_minus_one() {
    let input = "docs/pd-decisions/w4.dist";
    let o = dic(&["plan", input, "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v[0]["search"]["split_wins"], true,
        "w4 is the split-winning input"
    );
    let name = v[0]["disaggregated"][0]["name"].as_str().unwrap();
    assert!(
        v[0]["failure"].is_null(),
        "the aggregated layout's N−1 is not the deployment's"
    );
    let planned: dic_compiler::planner::PoolFailure =
        serde_json::from_value(v[0]["pool_failure"].clone()).unwrap();
    let checked = dic_compiler::driver::compile_file(&dic::disk::DiskWorld, input).unwrap();
    assert_eq!(checked.forecast.deployments.len(), 2, "both pools deployed");
    for f in &checked.forecast.deployments {
        let n1 = f.report.pool_capacity_under_failure.as_ref().unwrap();
        assert_eq!(n1.figures, planned, "{}", f.name);
    }
    let text = dic(&["plan", input]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!(
            "chosen: disaggregated {name} (`layout = {{ prefill = "
        )),
        "{text}"
    );
    assert!(text.contains("N−1 of the pools: as deployed"), "{text}");
}

/// A deployment with dual batch overlap says so under its decode step in the report: the
/// kernels are both micro-batches', the communication what they do not hide. Without it,
/// no such sentence.
#[test]
fn the_report_says_when_the_step_runs_as_two_micro_batches() {
    let report = |dbo: &str| {
        let src = format!(
            "import std.nodes.dgx_h200\nimport std.models.deepseek_v3\n\
cluster moe {{ nodes = 2 × dgx_h200 }}\n\
workload w {{ prompt = 64 tokens, output = 2k tokens, concurrency = 4096 }}\n\
deploy d {{ model = deepseek_v3, cluster = moe, workload = w, layout = tp 1 × dp 16 × ep, \
engine = vllm {{ all2all_backend = deepep_low_latency, dbo = {dbo} }} }}\n"
        );
        let world = dic_compiler::source::MemoryWorld::new().with("d.dist", &src);
        let checked = dic_compiler::driver::compile_file(&world, "d.dist").unwrap();
        assert!(!checked.has_errors(), "{}", common::rendered(&checked));
        let files = dic_targets::render(&checked.plan, &checked.forecast).unwrap();
        files["d/report.md"].clone()
    };
    assert!(report("true").contains("Dual batch overlap (`--enable-dbo`)"));
    assert!(!report("false").contains("Dual batch overlap"));
}
