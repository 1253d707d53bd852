//! `dic compile`, tested by stage:
//! - the pipeline's launch plan for every example equals its frozen fixture
//!   (`tests/fixtures/launch/*.json`, reviewed once; `DIC_UPDATE_FIXTURES=1` rewrites them);
//! - the launch files (vLLM, Kubernetes, NCCL) are snapshotted as rendered from those
//!   fixtures, so a refit of the performance model cannot move them;
//! - the forecast's headline figures sit within a tolerance of one table
//!   (`tests/fixtures/forecast.md`), and the reports rendered from the frozen forecasts
//!   are snapshotted with their numbers as `#` (their words and structure; the numbers
//!   live in the fixtures and the table, so a refit or a refreeze does not rewrite them).
//!
//! And every emitted vLLM flag checked against vLLM 0.33's own option schema; shell
//! injection; determinism; `--check` on a clean and a drifted tree; nothing written on
//! errors.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use common::{checked, dic, examples, generate};

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Set to rewrite the frozen launch plans and the forecast table from the pipeline.
const UPDATE_FIXTURES: &str = "DIC_UPDATE_FIXTURES";

fn updating_fixtures() -> bool {
    std::env::var_os(UPDATE_FIXTURES).is_some_and(|v| v == "1")
}

fn launch_fixture(path: &str) -> std::path::PathBuf {
    Path::new("tests/fixtures/launch").join(format!("{}.json", common::snap_name(path)))
}

/// The frozen launch plan of an example.
fn frozen_launch(path: &str) -> dic_compiler::ir::LaunchPlan {
    let file = launch_fixture(path);
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with {UPDATE_FIXTURES}=1 to write it, then review it)",
            file.display()
        )
    });
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

#[test]
fn every_example_lowers_to_its_frozen_launch_plan() {
    let mut differ = Vec::new();
    for path in examples() {
        let plan = checked(&path).plan;
        let mut json = serde_json::to_string_pretty(&plan).unwrap();
        json.push('\n');
        let file = launch_fixture(&path);
        if updating_fixtures() {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, &json).unwrap();
            continue;
        }
        // The contract reads back as what was written.
        assert_eq!(frozen_launch(&path), plan, "{}: round trip", file.display());
        if std::fs::read_to_string(&file).ok().as_deref() != Some(json.as_str()) {
            differ.push(file.display().to_string());
        }
    }
    assert!(
        differ.is_empty(),
        "the pipeline's launch plan differs from the frozen one in {differ:?}: a change to \
         what runs. Review it with {UPDATE_FIXTURES}=1 and `git diff tests/fixtures`, then the \
         launch snapshots it moves"
    );
}

/// Snapshot name of a generated file; the node scripts between the first and the last
/// differ only in their node index and are covered by commands.json (every node's argv).
fn snapshotted(path: &str, files: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let last_node = files
        .keys()
        .filter(|k| k.contains("/vllm/node-"))
        .filter_map(|k| {
            k.rsplit("node-")
                .next()?
                .trim_end_matches(".sh")
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    files
        .iter()
        .filter(|(file, _)| {
            file.rsplit("/vllm/node-")
                .next()
                .filter(|_| file.contains("/vllm/node-"))
                .and_then(|n| n.trim_end_matches(".sh").parse::<u64>().ok())
                .is_none_or(|n| n == 0 || n == last_node)
        })
        .map(|(file, text)| {
            let name = format!(
                "compile__{}__{}",
                common::snap_name(path),
                file.replace('/', "__")
            );
            (name, text.clone())
        })
        .collect()
}

#[test]
fn every_examples_launch_files_are_snapshotted_from_its_frozen_plan() {
    for path in examples() {
        let files = dic_targets::render_launch(&frozen_launch(&path)).expect("renders");
        assert!(
            files.keys().any(|k| k.ends_with("vllm/commands.json")),
            "{path}"
        );
        assert!(files.keys().any(|k| k.contains("/k8s/")), "{path}");
        assert!(files.keys().all(|k| !k.contains("/report.")), "{path}");
        for (name, text) in snapshotted(&path, &files) {
            insta::assert_snapshot!(name.clone(), common::launch_shape(&name, &text));
        }
    }
}

/// The frozen forecast of an example (`tests/fixtures/forecast/`): the report's input,
/// written once and not by a refit, whose figures the table checks instead.
/// `DIC_FREEZE_FORECAST=1` writes the missing ones and rewrites only those whose shape
/// differs from the live forecast's ([`json_shape`]): a refit that moves figures alone
/// leaves every frozen forecast, and so every report snapshot, as it was.
fn frozen_forecast(path: &str) -> dic_compiler::ir::Forecast {
    let file =
        Path::new("tests/fixtures/forecast").join(format!("{}.json", common::snap_name(path)));
    if std::env::var_os("DIC_FREEZE_FORECAST").is_some_and(|v| v == "1") {
        let live = serde_json::to_value(&checked(path).forecast).unwrap();
        let frozen: Option<serde_json::Value> = std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok());
        if frozen.is_none_or(|f| json_shape(&f) != json_shape(&live)) {
            let mut json = serde_json::to_string_pretty(&live).unwrap();
            json.push('\n');
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, json).unwrap();
        }
    }
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e} (DIC_FREEZE_FORECAST=1 writes it)", file.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: the forecast's shape changed; DIC_FREEZE_FORECAST=1 rewrites it",
            file.display()
        )
    })
}

/// A JSON value's shape: its keys, array lengths and kinds of value, every number, string
/// and boolean replaced by one of its kind.
fn json_shape(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Number(_) => Value::from(0),
        Value::String(_) => Value::from(""),
        Value::Bool(_) => Value::from(false),
        Value::Null => Value::Null,
        Value::Array(items) => Value::Array(items.iter().map(json_shape).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), json_shape(v)))
                .collect(),
        ),
    }
}

#[test]
fn a_refit_that_moves_figures_only_keeps_the_frozen_forecast() {
    let frozen: serde_json::Value =
        serde_json::json!({"tpot": 0.02, "choice": "tp 4", "pools": [1.0, null]});
    let refit = serde_json::json!({"tpot": 0.03, "choice": "tp 2", "pools": [2.0, null]});
    assert_eq!(json_shape(&frozen), json_shape(&refit));
    for changed in [
        serde_json::json!({"tpot": 0.02, "choice": "tp 4", "pools": [1.0, 3.0]}),
        serde_json::json!({"tpot": 0.02, "choice": "tp 4", "pools": [1.0]}),
        serde_json::json!({"tpot": 0.02, "choice": "tp 4", "pools": [1.0, null], "dbo": true}),
    ] {
        assert_ne!(json_shape(&frozen), json_shape(&changed), "{changed}");
    }
}

/// The reports, rendered from the frozen launch plan and the frozen forecast: a refit
/// moves `tests/fixtures/forecast.md`, not these (the renderer is what they test).
#[test]
fn every_examples_report_is_snapshotted_from_its_frozen_forecast() {
    for path in examples() {
        let files =
            dic_targets::render(&frozen_launch(&path), &frozen_forecast(&path)).expect("renders");
        let reports: BTreeMap<String, String> = files
            .into_iter()
            .filter(|(k, _)| k.contains("/report."))
            .collect();
        assert!(!reports.is_empty(), "{path}");
        for (name, text) in snapshotted(&path, &reports) {
            insta::assert_snapshot!(name.clone(), common::report_shape(&name, &text));
        }
    }
}

/// The forecast table's tolerance: a figure that moved less than this (relative) keeps
/// its row; a refit that moves more rewrites the table ([`UPDATE_FIXTURES`]), to be
/// reviewed as one table instead of inside every rendered report.
const FORECAST_TOLERANCE: f64 = 0.01;

const FORECAST_TABLE: &str = "tests/fixtures/forecast.md";

const FORECAST_COLUMNS: [&str; 8] = [
    "TTFT ms",
    "TPOT ms",
    "output tok/s",
    "KV tokens",
    "weights GiB/GPU",
    "$/h",
    "$/M output",
    "SLOs met",
];

/// The headline figures of one deployment's forecast, in the table's columns.
fn forecast_row(f: &dic_compiler::ir::DeploymentForecast) -> Vec<Option<f64>> {
    let r = &f.report;
    vec![
        f.predicted.ttft_ms,
        f.predicted.tpot_ms,
        f.predicted.output_tokens_per_s,
        Some(f.predicted.kv_cache_tokens as f64),
        Some(f.predicted.weights_bytes_per_gpu as f64 / (1u64 << 30) as f64),
        r.cost.per_hour,
        r.cost.per_million_output_tokens,
        Some(r.slo.iter().filter(|x| x.met).count() as f64),
    ]
}

fn forecast_cell(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(v) if v == v.trunc() && v.abs() < 1e15 => format!("{v:.0}"),
        Some(v) => format!("{:.5}", v)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string(),
    }
}

fn parse_forecast_cell(s: &str) -> Option<f64> {
    (s != "—").then(|| s.parse().expect("a number or —"))
}

#[test]
fn every_examples_forecast_is_within_the_table() {
    let mut rows = Vec::new();
    for path in examples() {
        let forecast = checked(&path).forecast;
        for d in &forecast.deployments {
            rows.push((common::snap_name(&path), d.name.clone(), forecast_row(d)));
        }
    }
    if updating_fixtures() {
        let mut t = format!(
            "# Predicted figures of every example\n\nWritten by `{UPDATE_FIXTURES}=1 cargo test --test compile`; \
             `tests/compile.rs` checks every figure within {}% of this table. A refit of the \
             performance model rewrites it: review it here, as one table.\n\n| example | deployment | {} |\n|{}\n",
            FORECAST_TOLERANCE * 100.0,
            FORECAST_COLUMNS.join(" | "),
            "---|".repeat(2 + FORECAST_COLUMNS.len())
        );
        for (example, name, row) in &rows {
            let cells: Vec<String> = row.iter().map(|v| forecast_cell(*v)).collect();
            t.push_str(&format!("| {example} | {name} | {} |\n", cells.join(" | ")));
        }
        std::fs::write(FORECAST_TABLE, t).unwrap();
        return;
    }
    let table = std::fs::read_to_string(FORECAST_TABLE).unwrap();
    let stored: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| example"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(
        stored.len(),
        rows.len(),
        "the table lists other deployments than the pipeline lowers: rewrite it with {UPDATE_FIXTURES}=1"
    );
    let mut off = Vec::new();
    for ((example, name, row), cells) in rows.iter().zip(&stored) {
        assert_eq!((example.as_str(), name.as_str()), (cells[0], cells[1]));
        for ((column, now), was) in FORECAST_COLUMNS.iter().zip(row).zip(&cells[2..]) {
            let was = parse_forecast_cell(was);
            let within = match (now, was) {
                (Some(a), Some(b)) => (a - b).abs() <= FORECAST_TOLERANCE * b.abs().max(1e-9),
                (None, None) => true,
                _ => false,
            };
            if !within {
                off.push(format!("{example} {name} {column}: {was:?} -> {now:?}"));
            }
        }
    }
    assert!(
        off.is_empty(),
        "predictions moved beyond {}%:\n{}\nrewrite the table with {UPDATE_FIXTURES}=1 and review it",
        FORECAST_TOLERANCE * 100.0,
        off.join("\n")
    );
}

#[test]
fn compile_is_deterministic() {
    for path in examples() {
        assert_eq!(generate(&path), generate(&path), "{path}");
    }
}

/// vLLM 0.33's option table (../shared/vllm/serve-schema-0.33.0.json).
struct Schema(Vec<serde_json::Value>);

impl Schema {
    fn option(&self, flag: &str) -> Option<&serde_json::Value> {
        self.0.iter().find(|o| {
            o["option_strings"]
                .as_array()
                .is_some_and(|a| a.iter().any(|s| s == flag))
        })
    }

    /// Checks a `vllm serve MODEL …` argv; returns the problems.
    fn check(&self, argv: &[String]) -> Vec<String> {
        let mut problems = Vec::new();
        assert_eq!(&argv[..2], ["vllm", "serve"]);
        let mut i = 3; // vllm serve MODEL
        while i < argv.len() {
            // `--compilation-config.KEY VALUE` sets one key of a JSON option
            let (flag, _) = dic_compiler::vllm_args::split_json_key(&argv[i]);
            let Some(opt) = self.option(flag) else {
                problems.push(format!("unknown flag {flag}"));
                i += 1;
                continue;
            };
            if opt["nargs"] == serde_json::json!(0) {
                i += 1;
                continue;
            }
            if opt["nargs"] == "+" {
                // One value or more, up to the next flag (`--lora-modules a=x b=y`).
                let values = argv[i + 1..]
                    .iter()
                    .take_while(|w| !w.starts_with("--"))
                    .count();
                if values == 0 {
                    problems.push(format!("{flag} needs a value"));
                }
                i += 1 + values;
                continue;
            }
            let Some(value) = argv.get(i + 1) else {
                problems.push(format!("{flag} needs a value"));
                break;
            };
            if value.starts_with("${") {
                i += 2; // filled in by the environment at launch
                continue;
            }
            let ok = match opt["type"].as_str() {
                Some("int") => value.parse::<i64>().is_ok(),
                Some("float") => value.parse::<f64>().is_ok(),
                Some("human_readable_int") | Some("human_readable_int_or_auto") => {
                    value.parse::<u64>().is_ok()
                }
                _ => true,
            };
            if !ok {
                problems.push(format!("{flag} {value}: not a {}", opt["type"]));
            }
            if let Some(choices) = opt["choices"].as_array() {
                if !choices.iter().any(|c| {
                    c.as_str() == Some(value.as_str())
                        || serde_json::from_str::<serde_json::Value>(value).is_ok_and(|v| &v == c)
                }) {
                    problems.push(format!("{flag} {value}: not one of {choices:?}"));
                }
            }
            i += 2;
        }
        problems
    }
}

#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn every_emitted_flag_is_in_vllms_own_option_schema() {
    let Some(json) = common::vllm_serve_schema() else {
        return;
    };
    let schema = Schema(json["options"].as_array().unwrap().clone());
    // the checker itself must reject what vLLM rejects
    let bad = |v: &[&str]| schema.check(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert!(!bad(&["vllm", "serve", "m", "--swap-space", "4"]).is_empty());
    assert!(!bad(&["vllm", "serve", "m", "--tensor-parallel-size", "four"]).is_empty());
    assert!(!bad(&["vllm", "serve", "m", "--dtype", "bf16"]).is_empty());
    let mut checked = 0;
    for path in examples() {
        let files = generate(&path);
        for (file, text) in files.iter().filter(|(f, _)| f.ends_with("commands.json")) {
            let cmds: Vec<serde_json::Value> = serde_json::from_str(text).unwrap();
            for c in cmds {
                let argv: Vec<String> = c["argv"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_string())
                    .collect();
                if argv[0] != "vllm" {
                    continue;
                }
                let problems = schema.check(&argv);
                assert!(problems.is_empty(), "{path} {file}: {problems:?}\n{argv:?}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 7, "{checked}");
}

/// Several replicas on one node: the script starts them with their own GPUs and ports,
/// and when one exits it stops the others and exits with that status (a supervisor sees
/// the failure), promptly.
#[cfg(unix)]
#[test]
fn a_node_script_of_several_replicas_stops_them_together() {
    let dir = common::fresh_dir("replicas");
    let out = dir.join("out");
    common::compile_ok("examples/shared_cluster.dist", out.to_str().unwrap());
    let script = std::fs::read_to_string(out.join("assistant/vllm/node-0.sh")).unwrap();
    // the accounting put `assistant` after `chat`'s two GPUs, on ports past chat's
    for (gpu, port) in [(2, 8001), (3, 8002), (4, 8003), (5, 8004)] {
        assert!(
            script.contains(&format!("CUDA_VISIBLE_DEVICES={gpu} "))
                && script.contains(&format!("--port {port} ")),
            "{script}"
        );
    }
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("log");
    // a fake `vllm`: the server on port 8002 fails after a moment, the others serve until
    // they are stopped (and note it)
    std::fs::write(
        bin.join("vllm"),
        format!(
            "#!/usr/bin/env bash
port=$(printf '%s\n' \"$@\" | grep -A1 -x -- --port | tail -1)
             trap 'echo stopped $port >> {log}; kill $child; exit 0' TERM
             if [ \"$port\" = 8002 ]; then sleep 0.3; exit 3; fi
             sleep 30 & child=$!; wait
",
            log = log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("vllm"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let started = std::time::Instant::now();
    let run = Command::new("bash")
        .arg(out.join("assistant/vllm/node-0.sh"))
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let stopped = std::fs::read_to_string(&log).unwrap();
    for port in [8001, 8003, 8004] {
        assert!(stopped.contains(&format!("stopped {port}")), "{stopped}");
    }
}

/// The option table dic embeds (compiler/data) is vLLM 0.33's own: the shared schema's
/// options, projected to what `vllm_args` reads. Fails when either drifts.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn the_embedded_vllm_option_table_is_vllms_own() {
    let Some(json) = common::vllm_serve_schema() else {
        return;
    };
    let want: Vec<serde_json::Value> = json["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| !o["option_strings"].as_array().unwrap().is_empty())
        .map(|o| {
            serde_json::json!({
                "flags": o["option_strings"], "dest": o["dest"], "nargs": o["nargs"],
                "type": o["type"], "choices": o["choices"],
            })
        })
        .collect();
    let got: serde_json::Value =
        serde_json::from_str(dic_compiler::vllm_args::OPTIONS_JSON).unwrap();
    assert_eq!(got["options"].as_array().unwrap(), &want);
    assert_eq!(dic_compiler::vllm_args::options().len(), want.len());
}

fn copy(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        let t = to.join(e.file_name());
        if p.is_dir() {
            std::fs::create_dir_all(&t).unwrap();
            copy(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

#[test]
fn check_detects_drift_and_writing_is_atomic() {
    let dir = common::fresh_dir("check");
    let out = dir.join("out");
    let check_exit = || {
        dic(&[
            "compile",
            "examples/prod.dist",
            "--out",
            out.to_str().unwrap(),
            "--check",
        ])
        .status
        .code()
    };
    let o = dic(&[
        "compile",
        "examples/prod.dist",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(check_exit(), Some(0));
    // drift: an edited flag, a removed file, an extra file
    let cmds = out.join("chat/vllm/commands.json");
    let text = std::fs::read_to_string(&cmds)
        .unwrap()
        .replace("\"0.9\"", "\"0.95\"");
    std::fs::write(&cmds, text).unwrap();
    std::fs::remove_file(out.join("chat/k8s/service.yaml")).unwrap();
    std::fs::write(out.join("chat/k8s/extra.yaml"), "x").unwrap();
    let o = dic(&[
        "compile",
        "examples/prod.dist",
        "--out",
        out.to_str().unwrap(),
        "--check",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let report = String::from_utf8_lossy(&o.stdout);
    let removed = report
        .lines()
        .any(|l| l.starts_with('-') && l.contains("\"0.95\""));
    let added = report
        .lines()
        .any(|l| l.starts_with('+') && l.contains("\"0.9\""));
    assert!(removed && added, "{report}");
    assert!(
        report.contains("missing: chat/k8s/service.yaml"),
        "{report}"
    );
    assert!(report.contains("extra: chat/k8s/extra.yaml"), "{report}");
    // --check wrote nothing
    assert!(!out.join("chat/k8s/service.yaml").exists());
    // a failed compile leaves OUT as it was
    let before = dir.join("before");
    std::fs::create_dir_all(&before).unwrap();
    copy(&out, &before);
    assert_eq!(
        dic(&[
            "compile",
            "examples/mistakes/layout.dist",
            "--out",
            out.to_str().unwrap()
        ])
        .status
        .code(),
        Some(1)
    );
    let listing = |p: &Path| {
        let mut v: Vec<_> = common::files_under(p)
            .into_iter()
            .map(|f| {
                (
                    f.strip_prefix(p).unwrap().to_path_buf(),
                    std::fs::read(&f).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(listing(&out), listing(&before));
    // the extra file is not dic's: compiling refuses to replace its folder, writes nothing
    let o = dic(&[
        "compile",
        "examples/prod.dist",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("k8s/extra.yaml") && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(listing(&out), listing(&before));
    std::fs::remove_file(out.join("chat/k8s/extra.yaml")).unwrap();
    // recompiling repairs the drift
    assert_eq!(
        dic(&[
            "compile",
            "examples/prod.dist",
            "--out",
            out.to_str().unwrap()
        ])
        .status
        .code(),
        Some(0)
    );
    assert_eq!(check_exit(), Some(0));
    assert!(
        std::fs::read_dir(&out).unwrap().flatten().all(|e| !e
            .file_name()
            .to_string_lossy()
            .starts_with(".dic-")
            || e.file_name() == ".dic-lock"),
        "no staging left behind"
    );
}

#[test]
fn nccl_plans_are_consistent() {
    for path in examples() {
        let files = generate(&path);
        for (file, text) in files.iter().filter(|(f, _)| f.ends_with("nccl/plan.toml")) {
            let plan: toml::Value = toml::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(plan["format"].as_str(), Some("dic-nccl-plan/1"));
            let world = plan["world_size"].as_integer().unwrap();
            let ranks = plan["ranks"].as_array().unwrap();
            assert_eq!(ranks.len() as i64, world, "{file}");
            let mut in_tp = vec![0; world as usize];
            for g in plan["groups"].as_array().unwrap() {
                let members = g["members"].as_array().unwrap();
                assert!(!members.is_empty(), "{file}");
                for m in members {
                    let r = m.as_integer().unwrap();
                    assert!(
                        (0..world).contains(&r),
                        "{file}: rank {r} outside the world"
                    );
                    if g["kind"].as_str() == Some("tp") {
                        in_tp[r as usize] += 1;
                    }
                }
            }
            assert!(
                in_tp.iter().all(|n| *n == 1),
                "{file}: every rank is in exactly one TP group"
            );
            for step in ["decode_step", "prefill_chunk"] {
                let s = &plan[step];
                let mut sum = 0.0;
                for stage in s["stages"].as_array().unwrap() {
                    for c in stage
                        .get("collectives")
                        .and_then(|c| c.as_array())
                        .into_iter()
                        .flatten()
                    {
                        assert!(c["bytes"].as_integer().unwrap() > 0, "{file}");
                        let [a, b] = [
                            c["layers"][0].as_integer().unwrap(),
                            c["layers"][1].as_integer().unwrap(),
                        ];
                        let calls = c["calls"].as_integer().unwrap();
                        // At most once per layer of the range times per_layer; exactly that
                        // for a uniform model.
                        assert!(
                            calls <= (b - a + 1) * c["per_layer"].as_integer().unwrap(),
                            "{file}"
                        );
                        sum += calls as f64 * c["predicted_us"].as_float().unwrap();
                    }
                }
                let total = s["predicted_us"].as_float().unwrap();
                assert!(
                    (sum - total).abs() <= 1e-6 * total.max(1.0) + 1e-6,
                    "{file} {step}: {sum} vs {total}"
                );
            }
        }
    }
}

/// The schema's engine table is the one list of engine options: every option is either
/// emitted (with its own flag, checked against vLLM's option schema) or marked dic's own,
/// and a deployment that sets every option gets every flag — `--cpu-offload-gb` and
/// `--block-size` included.
#[test]
fn every_engine_option_is_emitted_or_dic_only() {
    use dic_compiler::schema::{VllmFlag, VLLM_OPTIONS};
    let src = "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
        cluster c { nodes = 1 × dgx_h100 }\n\
        deploy d { model = llama_3_1_8b, cluster = c, layout = tp 2, engine = vllm { \
        gpu_memory_utilization = 0.85, max_model_len = 4k tokens, max_num_seqs = 64, \
        max_num_batched_tokens = 4k tokens, block_size = 32, enforce_eager = true, \
        cudagraph_mode = full_decode_only, \
        kv_cache_memory = 20 GiB, enable_prefix_caching = false, cpu_offload = 2 GiB, \
        launcher = native, port = 9000, all2all_backend = deepep_low_latency, dbo = true, \
        activation_memory = 2 GiB, non_torch_memory = 1 GiB, \
        cuda_graph_memory = 0 GiB, speculative = { method = eagle3, source = \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", tokens = 2 }, extra_args = [\"--trust-remote-code\", \"--reasoning-parser\", \"deepseek_r1\"], \
        env = [\"VLLM_ATTENTION_BACKEND=FLASHINFER\"] } }\n";
    let world = dic_compiler::source::MemoryWorld::new().with("e.dist", src);
    let checked = dic_compiler::driver::compile_file(&world, "e.dist").unwrap();
    assert!(!checked.has_errors(), "{}", common::rendered(&checked));
    let files = dic_targets::render(&checked.plan, &checked.forecast).unwrap();
    let cmds: Vec<serde_json::Value> =
        serde_json::from_str(&files["d/vllm/commands.json"]).unwrap();
    let argv = common::first_argv(&files["d/vllm/commands.json"]);
    let value_after = |flag: &str| common::value_after(&argv, flag);
    for option in VLLM_OPTIONS {
        match option.vllm {
            None => panic!("engine option `{}` says nothing about vLLM", option.name),
            Some(VllmFlag::DicOnly(why)) => assert!(!why.is_empty()),
            Some(VllmFlag::Passthrough) => match option.name {
                "extra_args" => assert!(
                    argv.ends_with(&[
                        "--trust-remote-code".to_string(),
                        "--reasoning-parser".to_string(),
                        "deepseek_r1".to_string()
                    ]),
                    "{argv:?}"
                ),
                "env" => assert_eq!(
                    cmds[0]["env"]["VLLM_ATTENTION_BACKEND"], "FLASHINFER",
                    "{}",
                    cmds[0]
                ),
                other => panic!("pass-through option `{other}` is not tested"),
            },
            Some(VllmFlag::Value(flag) | VllmFlag::WhenSet(flag)) => {
                assert!(
                    value_after(flag).is_some(),
                    "`{}`: no {flag} in {argv:?}",
                    option.name
                )
            }
            Some(VllmFlag::Switch { on, off }) => assert!(
                argv.iter().any(|a| a == on || Some(a.as_str()) == off),
                "`{}`: neither {on} nor {off:?} in {argv:?}",
                option.name
            ),
            Some(VllmFlag::Flags(flags)) => {
                for flag in flags {
                    assert!(
                        value_after(flag).is_some(),
                        "`{}`: no {flag} in {argv:?}",
                        option.name
                    )
                }
            }
        }
    }
    assert_eq!(value_after("--spec-method").as_deref(), Some("eagle3"));
    assert_eq!(value_after("--spec-tokens").as_deref(), Some("2"));
    assert_eq!(value_after("--cpu-offload-gb").as_deref(), Some("2"));
    assert_eq!(value_after("--block-size").as_deref(), Some("32"));
    assert_eq!(
        value_after("--kv-cache-memory-bytes").as_deref(),
        Some("21474836480")
    );
    assert_eq!(value_after("--port").as_deref(), Some("9000"));
    assert_eq!(
        value_after("--compilation-config.cudagraph_mode").as_deref(),
        Some("FULL_DECODE_ONLY")
    );
    assert!(argv.contains(&"--disable-prefix-caching".to_string()));
    // and every flag the table names exists in vLLM 0.33's own option schema
    if let Some(shared) = common::shared_dir() {
        let schema = std::fs::read_to_string(shared.join("vllm/serve-schema-0.33.0.json")).unwrap();
        for option in VLLM_OPTIONS {
            for flag in option.vllm.map(|v| v.flags()).unwrap_or_default() {
                // `--compilation-config.cudagraph_mode`: one key of a JSON option
                let (flag, _) = dic_compiler::vllm_args::split_json_key(flag);
                assert!(
                    schema.contains(&format!("\"{flag}\"")),
                    "{flag} is not a vLLM 0.33 flag"
                );
            }
        }
    }
}
