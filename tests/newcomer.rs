//! A newcomer's first hour, scripted: `dic init` from what one knows (a model, the GPUs,
//! a rate) always writes a file; where the hardware can serve it, that file checks and
//! compiles with no hand edits; where it cannot carry the load, the file and `dic init`
//! say exactly what would, and that one change makes it compile. `dic check -`, `dic
//! plan -` and `dic compile -` read the same file from standard input.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failure

mod common;

use common::dic;
use std::path::Path;

fn init(dir: &Path, name: &str, args: &[&str]) -> (String, String, i32) {
    let file = dir.join(name);
    let f = file.to_str().unwrap();
    let mut all = vec!["init", "--out", f];
    all.extend_from_slice(args);
    let o = dic(&all);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|_| panic!("dic init {args:?} wrote nothing:\n{err}"));
    (text, err, o.status.code().unwrap())
}

fn compiles(dir: &Path, name: &str) {
    let f = dir.join(name);
    let o = dic(&["check", f.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = dir.join(format!("{name}.out"));
    let o = dic(&[
        "compile",
        f.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The report's first screen: a title naming the model, the GPUs and the layout, then
    // the verdict in one sentence, then its evidence; warnings only after them.
    let report = std::fs::read_to_string(out.join("chat/report.md")).unwrap();
    let first: Vec<&str> = report.lines().take(3).collect();
    assert!(
        first[0].starts_with("# ") && first[0].contains(" on ") && first[0].contains(" × "),
        "{report}"
    );
    assert!(first[2].starts_with("**Deployable: `"), "{report}");
    assert!(first[2].contains("meets every SLO ("), "{report}");
    let evidence = report.find("## The evidence").unwrap();
    if let Some(warnings) = report.find("## What dic says about it") {
        assert!(warnings > evidence, "{report}");
    }
    if std::env::var_os("DIC_SHOW_REPORTS").is_some() {
        eprintln!(
            "==== {name}\n{}",
            &report[..report.find("## The deployment").unwrap()]
        );
    }
}

/// Llama 3.1 8B on one RTX 4090: the model's 131,072-token context does not fit beside
/// the weights, so `dic init` lowers `max_model_len` (and its own default rate, to what
/// one card serves) and says so; the file checks and compiles as written.
#[test]
fn llama_8b_on_one_4090_checks_and_compiles_as_written() {
    let dir = common::fresh_dir("newcomer-4090");
    let (text, err, code) = init(
        &dir,
        "a.dist",
        &[
            "--gpu",
            "NVIDIA GeForce RTX 4090",
            "--gpus-per-node",
            "1",
            "--model",
            "llama_3_1_8b",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("max_model_len lowered from the model's 131,072"),
        "{err}"
    );
    assert!(text.contains("max_model_len = "), "{text}");
    assert!(
        text.contains("ttft.p95 <=") && text.contains("tpot.p95 <="),
        "the SLO is stated: {text}"
    );
    // It says what it predicts, one line each.
    for line in ["TTFT", "TPOT", "throughput", "memory"] {
        assert!(err.contains(&format!("  {line}")), "{err}");
    }
    compiles(&dir, "a.dist");
}

/// DeepSeek-V3 on one GB200 NVL72 rack (18 trays of 4): checks and compiles as written.
#[test]
fn deepseek_v3_on_one_nvl72_rack_checks_and_compiles_as_written() {
    let dir = common::fresh_dir("newcomer-nvl72");
    let (_, err, code) = init(
        &dir,
        "b.dist",
        &[
            "--gpu",
            "gb200",
            "--nodes",
            "18",
            "--gpus-per-node",
            "4",
            "--model",
            "deepseek_v3",
        ],
    );
    assert_eq!(code, 0, "{err}");
    compiles(&dir, "b.dist");
    // The planner's own choice gets no advice proposing another layout of its space
    // (A0401 once said `tp 4 × dp 2 × ep` would beat the `tp 8 × ep` it had chosen).
    let said = std::fs::read_to_string(dir.join("b.dist.out/chat/report.md")).unwrap();
    assert!(
        !said.contains("A0401") && !said.contains("W0404"),
        "advice against the planner's own choice: {said}"
    );
}

/// Qwen3-32B on 2 × 8 L40S at 20 req/s: more than 16 L40S carry. `dic init` writes the
/// file anyway, with the diagnostics at its top naming the GPUs and nodes that would
/// carry the load; changing the node count to that figure makes it compile.
#[test]
fn qwen3_32b_on_16_l40s_at_20_rps_says_what_carries_it() {
    let dir = common::fresh_dir("newcomer-l40s");
    let (text, err, code) = init(
        &dir,
        "c.dist",
        &[
            "--gpu",
            "l40s",
            "--nodes",
            "2",
            "--model",
            "qwen3_32b",
            "--rate",
            "20",
        ],
    );
    assert_eq!(code, 1, "it does not check as written: {err}");
    assert!(
        text.starts_with("// dic init could not make this file check"),
        "{text}"
    );
    assert!(
        text.contains("rate = 20 req/s"),
        "the user's rate stays: {text}"
    );
    // "… would carry the load: 48 GPUs (6 nodes), the cluster has 2"
    let flat = text.replace("\n// ", " ");
    let nodes: u64 = flat
        .split("would carry the load: ")
        .nth(1)
        .and_then(|s| s.split(" (").nth(1))
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figure for what carries the load:\n{text}"));
    assert!(nodes > 2, "{flat}");
    let fixed = text.replace("nodes = 2 × my_node", &format!("nodes = {nodes} × my_node"));
    assert_ne!(fixed, text);
    std::fs::write(dir.join("c.dist"), fixed).unwrap();
    compiles(&dir, "c.dist");
}

/// Standard input reads as a file named `<stdin>` in `check`, `plan` and `compile` alike,
/// and a file that checks prints its predictions (JSON too).
#[test]
fn stdin_everywhere_and_predictions_on_check() {
    let dir = common::fresh_dir("newcomer-stdin");
    let (text, _, _) = init(
        &dir,
        "s.dist",
        &["--gpu", "h100_sxm", "--model", "llama_3_1_8b"],
    );
    let run = |args: &[&str]| common::dic_with_stdin(args, text.as_bytes());
    let o = run(&["check", "--format", "json", "-"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["file"], "<stdin>");
    let p = &v[0]["predicted"][0];
    for key in [
        "ttft_ms",
        "tpot_ms",
        "output_tokens_per_s",
        "memory_per_gpu_bytes",
    ] {
        assert!(p[key].as_f64().is_some_and(|x| x > 0.0), "{key}: {v}");
    }
    let o = run(&["check", "-"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("<stdin>: 0 errors"), "{err}");
    assert!(
        err.contains("  TPOT ") && err.contains("  memory "),
        "{err}"
    );
    let o = run(&["plan", "-"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("chosen: "));
    let out = dir.join("out");
    let o = run(&["compile", "-", "--out", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("<stdin>: wrote"), "{err}");
}

/// `dic completions bash` completes `dic init --model` with the stdlib models and `dic
/// explain` with the codes.
#[test]
fn completions_list_models_and_codes() {
    let o = dic(&["completions", "bash"]);
    let script = String::from_utf8_lossy(&o.stdout);
    assert!(script.contains("llama_3_1_8b") && script.contains("deepseek_v3"));
    assert!(script.contains("E0701") && script.contains("A0401"));
    assert!(script.contains("rtx_4090"));
}

/// A test that needs ../shared fails, saying so, when run without it (`cargo test --
/// --ignored` on a clone without the reference data): never "passed" having checked
/// nothing.
#[test]
#[should_panic(expected = "needs ../shared")]
fn a_test_needing_absent_reference_data_fails() {
    common::require_dir(std::path::PathBuf::from("/nonexistent/dic/shared"));
}

/// A mistyped unit or field gets the suggestion the field expects: `20 rps` → `req/s`,
/// `1k tokns` → `tokens`, `quantization` → `weights`, `tp2` → `tp 2`.
#[test]
fn suggestions_follow_what_the_field_expects() {
    let dir = common::fresh_dir("newcomer-suggestions");
    let file = dir.join("s.dist");
    std::fs::write(
        &file,
        "import std.models.llama_3_1_8b\nimport std.nodes.dgx_h100\n\
         cluster c { nodes = 1 × dgx_h100 }\n\
         workload w { prompt = 1k tokns, output = 100 tokens, rate = 20 rps }\n\
         model m = llama_3_1_8b { quantization = fp8 }\n\
         deploy d { model = m, cluster = c, workload = w, layout = tp2 }\n",
    )
    .unwrap();
    let o = dic(&["check", "--format", "json", file.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let helps: Vec<String> = v[0]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["help"].as_str().unwrap_or_default().to_string())
        .collect();
    for want in [
        "did you mean `req/s`?",
        "did you mean `tokens`?",
        "did you mean `weights`?",
        "write `tp 2`",
    ] {
        assert!(helps.iter().any(|h| h.contains(want)), "{want}: {helps:?}");
    }
}
