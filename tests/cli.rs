//! The command-line contract: exit codes, output streams, and never a panic.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use common::dic;

use std::process::{Command, Output};

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally, not by a signal")
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dic-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn check_exit_codes() {
    assert_eq!(code(&dic(&["check", "examples/prod.dist"])), 0);
    assert_eq!(code(&dic(&["check", "examples/mistakes/units.dist"])), 1);
    assert_eq!(code(&dic(&["check", "examples/does-not-exist.dist"])), 2);
    assert_eq!(
        code(&dic(&["check", "examples"])),
        2,
        "a directory is a usage error"
    );
    assert_eq!(code(&dic(&["check"])), 2, "no file is a usage error");
    assert_eq!(code(&dic(&["frobnicate"])), 2);
    let bad = tmp("bad.dist");
    std::fs::write(&bad, b"gpu g { names = [\"\xff\xfe\"] }").unwrap();
    let o = dic(&["check", bad.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    assert!(String::from_utf8_lossy(&o.stderr).contains("E0105"));
}

#[test]
fn check_json_is_machine_readable() {
    let o = dic(&["check", "--format", "json", "examples/mistakes/names.dist"]);
    assert_eq!(code(&o), 1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json on stdout");
    let diags = v[0]["diagnostics"].as_array().unwrap();
    assert!(diags.iter().any(|d| d["code"] == "E0301"));
    let first = &diags[0];
    assert!(first["labels"][0]["start"]["line"].as_u64().unwrap() >= 1);
}

#[test]
fn explain_prints_pages_and_rejects_unknown_codes() {
    let o = dic(&["explain", "E0304"]);
    assert_eq!(code(&o), 0);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("# E0304"));
    assert_eq!(code(&dic(&["explain", "E9999"])), 2);
    let all = dic(&["explain"]);
    assert!(String::from_utf8_lossy(&all.stdout).lines().count() >= 27);
}

#[test]
fn fmt_check_and_write() {
    let f = tmp("messy.dist");
    std::fs::write(
        &f,
        "workload w{prompt=1k tokens,output=10 tokens, rate = 1 req/s}  // keep\n",
    )
    .unwrap();
    let p = f.to_str().unwrap();
    assert_eq!(code(&dic(&["fmt", "--check", p])), 1);
    assert_eq!(code(&dic(&["fmt", p])), 0);
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "workload w { prompt = 1k tokens, output = 10 tokens, rate = 1 req/s } // keep\n"
    );
    assert_eq!(code(&dic(&["fmt", "--check", p])), 0);
    let broken = tmp("broken.dist");
    std::fs::write(&broken, "gpu g { memory = }\n").unwrap();
    assert_eq!(code(&dic(&["fmt", broken.to_str().unwrap()])), 1);
    assert_eq!(
        std::fs::read_to_string(&broken).unwrap(),
        "gpu g { memory = }\n",
        "never rewrite a broken file"
    );
}

#[test]
fn list_catalogs() {
    for what in ["gpus", "models", "links", "instances"] {
        let o = dic(&["list", what, "--json"]);
        assert_eq!(code(&o), 0, "{what}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(v.as_array().unwrap().len() >= 5, "{what}");
    }
    let gpus = String::from_utf8(dic(&["list", "gpus"]).stdout).unwrap();
    for needle in ["h100_sxm", "mi325x", "t4", "NVIDIA H100 80GB HBM3"] {
        assert!(gpus.contains(needle), "{needle}");
    }
}

#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn import_hf_command() {
    let shared = common::required_shared_dir();
    let cfg = shared.join("models/hf/nvidia--Llama-3.1-70B-Instruct-FP8_config.json");
    let o = dic(&["import-hf", cfg.to_str().unwrap(), "--name", "l70"]);
    assert_eq!(code(&o), 0);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("model l70 {"));
    assert!(
        text.contains("kv_cache = fp8"),
        "hf_quant_config.json beside it is read:\n{text}"
    );
    let bad = tmp("x_config.json");
    std::fs::write(&bad, "{}").unwrap();
    assert_eq!(code(&dic(&["import-hf", bad.to_str().unwrap()])), 1);
    assert_eq!(code(&dic(&["import-hf", "nope.json"])), 2);
}

#[test]
fn estimate_json_has_the_contract_fields() {
    let o = dic(&[
        "estimate",
        "--model",
        "llama_3_1_70b",
        "--gpu",
        "NVIDIA H100 80GB HBM3",
        "--tp",
        "4",
        "--max-model-len",
        "8192",
        "--isl",
        "2000",
        "--osl",
        "500",
        "--rate",
        "2",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for field in [
        "weights_bytes_per_gpu",
        "activation_bytes_per_gpu",
        "non_torch_bytes_per_gpu",
        "cuda_graph_bytes_per_gpu",
        "kv_cache_bytes_per_gpu",
        "kv_cache_tokens",
        "max_concurrency",
        "ttft_ms",
        "tpot_ms",
        "output_tokens_per_s",
        "output_tokens_per_s_per_gpu",
        "requests_per_s",
        "diagnostics",
    ] {
        assert!(v.get(field).is_some(), "missing {field}");
    }
    assert!(v["weights_bytes_per_gpu"].is_i64());
    // 70.55B params × 2 B / 4 GPUs ≈ 35.3 GB
    let w = v["weights_bytes_per_gpu"].as_f64().unwrap();
    assert!((w / 1e9 - 35.3).abs() < 0.3, "{w}");
    assert!(v["tpot_ms"].as_f64().unwrap() > 5.0);
    // TTFT by cause: the parts add up to it (each rounded to a microsecond)
    let parts = v["ttft_ms_parts"].as_object().unwrap();
    let sum: f64 = parts.values().map(|x| x.as_f64().unwrap()).sum();
    let ttft = v["ttft_ms"].as_f64().unwrap();
    assert!(
        (sum - ttft).abs() < 0.01,
        "{parts:?} sum to {sum}, TTFT {ttft}"
    );
    assert!(parts["front_end"].as_f64().unwrap() > 0.0 && parts["prefill"].as_f64().unwrap() > 0.0);
    assert_eq!(parts["kv_transfer"], 0.0, "aggregated serving moves no KV");
    assert!(v["cost_per_hour"].is_null(), "no price given");
    let priced = common::estimate_8b_h100(&[
        "--max-model-len",
        "8192",
        "--price-per-node",
        "98.32",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&priced.stdout).unwrap();
    assert_eq!(
        v["cost_per_hour"], 98.32,
        "one node of 8 at the given price"
    );
    assert!(v["cost_per_million_output_tokens"].as_f64().unwrap() > 0.0);
}

#[test]
fn estimate_errors_and_usage() {
    // does not fit: exit 1 with E0501 in the diagnostics
    let o = dic(&[
        "estimate",
        "--model",
        "llama_3_1_405b",
        "--gpu",
        "h100_sxm",
        "--json",
    ]);
    assert_eq!(code(&o), 1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["diagnostics"][0]["code"], "E0501");
    assert!(v["tpot_ms"].is_null());
    assert_eq!(
        code(&dic(&[
            "estimate",
            "--model",
            "llama_3_1_70c",
            "--gpu",
            "h100_sxm"
        ])),
        2
    );
    assert_eq!(
        code(&dic(&[
            "estimate",
            "--model",
            "llama_3_1_8b",
            "--gpu",
            "NVIDIA Z1"
        ])),
        2
    );
    assert_eq!(code(&common::estimate_8b_h100(&["--weights", "fp9"])), 2);
    assert_eq!(
        code(&common::estimate_8b_h100(&[
            "--rate",
            "1",
            "--concurrency",
            "2"
        ])),
        2
    );
    let o = dic(&[
        "estimate",
        "--model",
        "llama_3_1_8b",
        "--gpu",
        "l4",
        "--max-model-len",
        "8192",
    ]);
    assert_eq!(code(&o), 0);
    assert!(String::from_utf8_lossy(&o.stdout).contains("KV cache tokens"));
}

/// `--num-requests`: a benchmark run of N requests, whose closed loop starts with a wave
/// of `--concurrency` requests at once (a longer mean TTFT than steady state); the JSON
/// says N and breaks the decode step down by cause with its collectives; N = 0 is a usage
/// error naming the range.
#[test]
fn estimate_predicts_a_finite_run() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "estimate",
            "--model",
            "llama_3_1_70b",
            "--gpu",
            "h100_sxm",
            "--tp",
            "4",
            "--max-model-len",
            "8192",
            "--isl",
            "4000",
            "--osl",
            "200",
            "--concurrency",
            "16",
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = dic(&args);
        assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let steady = run(&[]);
    let finite = run(&["--num-requests", "64"]);
    assert!(steady["num_requests"].is_null());
    assert_eq!(finite["num_requests"], 64.0);
    let ttft = |v: &serde_json::Value| v["ttft_ms"].as_f64().unwrap();
    assert!(
        ttft(&finite) > ttft(&steady),
        "{} vs {}",
        ttft(&finite),
        ttft(&steady)
    );
    let step = &finite["decode_step_ms"];
    for cause in [
        "compute",
        "memory",
        "communication",
        "overhead",
        "cpu_launches",
        "bubble",
    ] {
        assert!(step[cause].is_f64(), "missing {cause}");
    }
    // The kernels in sequence, communication, overhead, the CPU's launches and drafting
    // add up to TPOT (one stage: no bubble) — here, and on eight B200s, whose short prompt
    // chunks wait on the CPU's launches.
    let adds_up = |v: &serde_json::Value| {
        let ms = |v: &serde_json::Value| v.as_f64().unwrap();
        let step = &v["decode_step_ms"];
        let kernels = &step["kernels"];
        let sum = ms(&kernels["dense_gemms"])
            + ms(&kernels["experts"])
            + ms(&kernels["attention"])
            + ms(&step["communication"])
            + ms(&step["overhead"])
            + ms(&step["cpu_launches"])
            + ms(&step["draft"]);
        let tpot = ms(&v["tpot_ms"]);
        assert!((sum - tpot).abs() < 0.02, "{sum} vs {tpot}");
        ms(&step["cpu_launches"])
    };
    adds_up(&finite);
    let o = dic(&[
        "estimate",
        "--model",
        "llama_3_1_70b",
        "--gpu",
        "NVIDIA B200",
        "--tp",
        "8",
        "--isl",
        "1024",
        "--osl",
        "1024",
        "--concurrency",
        "64",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let b200 = serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap();
    assert!(adds_up(&b200) > 0.0, "{b200}");
    let collectives = step["collectives"].as_array().unwrap();
    assert_eq!(collectives[0]["group"], "tp");
    assert_eq!(collectives[0]["collective"], "all_reduce");
    let o = common::estimate_8b_h100(&["--num-requests", "0"]);
    assert_eq!(code(&o), 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--num-requests"));
}

#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn estimate_takes_a_hugging_face_config() {
    let shared = common::required_shared_dir();
    let cfg = shared.join("models/hf/Qwen--Qwen3-8B_config.json");
    let o = dic(&[
        "estimate",
        "--model",
        cfg.to_str().unwrap(),
        "--gpu",
        "NVIDIA L40S",
        "--max-model-len",
        "8192",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["model"], "qwen3_8b");
}

#[test]
fn a_closed_pipe_ends_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_dic"))
        .args(["list", "models"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away, like `| head -0`
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let _ = child.wait().unwrap();
    assert!(!err.contains("panicked"), "{err}");
}

/// `dic check -` reads standard input, `--json` is `--format json`, `--version` names the
/// commit, `dic completions` prints a script, `dic compile` says what it wrote and where
/// the report is.
#[test]
fn small_cli_conveniences() {
    let o = common::dic_with_stdin(&["check", "--json", "-"], b"gpu g { memory = 80 GX }\n");
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["file"], "<stdin>");
    let codes: Vec<&str> = v[0]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"E0305"), "{v}");
    assert_eq!(v[0]["diagnostics"][0]["labels"][0]["file"], "<stdin>");
    let o = dic(&["--version"]);
    let version = String::from_utf8_lossy(&o.stdout);
    assert!(
        version.starts_with("dic ") && version.contains('('),
        "{version}"
    );
    let o = dic(&["completions", "bash"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("_dic()"));
    let dir = common::fresh_dir("cli-compile");
    let out = dir.join("out");
    let o = dic(&[
        "compile",
        "examples/single_gpu_8b.dist",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("report.html") && err.contains("kubectl apply -k"),
        "{err}"
    );
    // --format json on compile: what it writes, per deployment
    let o = dic(&[
        "compile",
        "examples/single_gpu_8b.dist",
        "--out",
        out.to_str().unwrap(),
        "--check",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["deployments"][0]["deployment"], "assistant");
    assert!(v["deployments"][0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f == "k8s/deployment.yaml"));
    // and the same flag on plan and estimate
    for args in [
        vec!["plan", "examples/single_gpu_8b.dist", "--format", "json"],
        vec![
            "estimate",
            "--model",
            "llama_3_1_8b",
            "--gpu",
            "h100_sxm",
            "--format",
            "json",
        ],
    ] {
        let o = dic(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap();
    }
}

/// `dic init` writes a starter that checks clean from a GPU as nvidia-smi names it, never
/// overwrites a file, and refuses a GPU or model it does not know.
#[test]
fn init_writes_a_starter_that_checks() {
    let dir = common::fresh_dir("init");
    let file = dir.join("start.dist");
    let f = file.to_str().unwrap();
    let args = [
        "init",
        "--gpu",
        "NVIDIA H100 80GB HBM3",
        "--nodes",
        "2",
        "--model",
        "llama_3_1_70b",
        "--out",
        f,
    ];
    let o = dic(&args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("gpus = 8 × h100_sxm") && text.contains("layout = auto"),
        "{text}"
    );
    let o = dic(&["check", f]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // never overwrites
    let o = dic(&args);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    let o = dic(&[
        "init",
        "--gpu",
        "NVIDIA H1000",
        "--model",
        "llama_3_1_70b",
        "--out",
        "x.dist",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("dic list gpus"));
}

/// The diagnostics snapshots redact the forecast's figures and nothing else: times, rates,
/// shares and prices go; line numbers, sizes, layouts and codes stay.
#[test]
fn snapshots_redact_forecast_figures_only() {
    assert_eq!(
        common::redact_forecast_figures(
            "A0401 `tp 4 × pp 1 × dp 4` would serve 13,337 tokens/s, 20% more; TTFT 199.5 ms, \
             2 s. $55.04/h on 8 GPUs, 80 GiB, at example.dist:12:3, 64.2 req/s, qwen3_32b."
        ),
        "A0401 `tp 4 × pp 1 × dp 4` would serve # tokens/s, #% more; TTFT # ms, \
         # s. $#/h on 8 GPUs, 80 GiB, at example.dist:12:3, # req/s, qwen3_32b."
    );
}

/// `dic check` names the prefix-cache capacity `kv_offload` adds: 200 GiB over the engine's
/// 4 × 40,960 B of FP8 KV per token (Llama 3.1 70B at TP 4) = 1,310,720 tokens.
#[test]
fn check_predictions_name_the_offloaded_kv_capacity() {
    let o = dic(&["check", "examples/kv_offload.dist"]);
    assert_eq!(code(&o), 0);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.contains(
            "KV offload  1310720 tokens of prefix cache in 200 GiB of CPU memory per engine"
        ),
        "{text}"
    );
    let o = dic(&["check", "--format", "json", "examples/kv_offload.dist"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json on stdout");
    let s = v.to_string();
    assert!(s.contains("\"offloaded_kv_tokens\":1310720"), "{s}");
}

/// The snapshots' redaction takes every figure a refit moves and keeps the rest: a figure
/// whose unit a wrapped message puts on the next line, an output rate, a batch in flight, a
/// ratio; not a layout's sizes, a range's bounds or a line number.
#[test]
fn snapshot_redaction_takes_the_forecasts_figures_only() {
    let text =
        "it carries 7.67\n  │ req/s (1964 output tok/s) at 481 in flight, a factor of 10.01×, \
outside 0.5–2; `tp 2 × pp 1 × dp 3` on 6 GPUs, line 30";
    assert_eq!(
        common::redact_forecast_figures(text),
        "it carries #\n  │ req/s (# output tok/s) at # in flight, a factor of #×, \
outside 0.5–2; `tp 2 × pp 1 × dp 3` on 6 GPUs, line 30"
    );
}
