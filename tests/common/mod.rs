//! Helpers shared by the integration tests.
#![allow(dead_code)]

use dic_compiler::driver::Checked;
use std::path::PathBuf;

/// `../shared` beside the repository, or `None` with a visible message (a user's clone
/// has no `../shared`); under `CI=true` its absence fails the test.
pub fn shared_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if dir.is_dir() {
        Some(dir)
    } else if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "../shared is absent under CI=true: the tests that need its reference data cannot run"
        );
    } else {
        eprintln!("SKIPPED: ../shared is absent; tests that need its reference data did not run");
        None
    }
}

/// `../shared` for a test that cannot run without it. Such a test is marked ignored when
/// `../shared` is absent (build.rs), so `cargo test` lists it as ignored with the reason;
/// run anyway (`-- --ignored`, or under `CI=true`) it fails here, never passes having
/// checked nothing.
pub fn required_shared_dir() -> PathBuf {
    require_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

/// `dir`, or a failed test that says what is missing.
pub fn require_dir(dir: PathBuf) -> PathBuf {
    assert!(
        dir.is_dir(),
        "this test needs ../shared (the reference data beside the repository) and {} is absent: it did not run",
        dir.display()
    );
    dir
}

/// The first command's argv in a `commands.json` a vLLM target writes.
pub fn first_argv(commands_json: &str) -> Vec<String> {
    let cmds: Vec<serde_json::Value> =
        serde_json::from_str(commands_json).expect("commands.json is JSON");
    cmds[0]["argv"]
        .as_array()
        .expect("an argv array")
        .iter()
        .map(|a| a.as_str().expect("argv words are strings").to_string())
        .collect()
}

/// The word after `flag` in `argv`, when `flag` is there.
pub fn value_after(argv: &[String], flag: &str) -> Option<String> {
    argv.iter()
        .position(|a| a == flag)
        .and_then(|i| argv.get(i + 1))
        .cloned()
}

/// Diagnostics as a user sees them in a terminal without colour, 100 columns wide.
pub fn rendered(checked: &Checked) -> String {
    let mut out = dic::render::human(&checked.db, &checked.diagnostics, false, 100);
    out.push_str(&dic::render::summary(&checked.diagnostics));
    out.push('\n');
    out
}

/// `text` with the performance model's figures replaced by `#`: a number directly before a
/// time (`ms`, `s`), a rate (`tokens/s`, `tok/s`, `output tok/s`, `req/s`), a share (`%`),
/// a price (`$…`, `/h`), a batch (`in flight`) or a ratio written against it (`1.4×`) is
/// the forecast's, which a refit moves and `tests/fixtures/forecast.md` checks. The unit
/// may follow on the next line of a wrapped message (past the renderer's `│` gutter).
/// Snapshots of diagnostics keep their words, codes, layouts and spans, so they change when
/// a verdict or a message changes, not when a figure moves within one.
pub fn redact_forecast_figures(text: &str) -> String {
    const UNITS: [&str; 13] = [
        "tokens/s",
        "tok/s",
        "output tok/s",
        "req/s",
        "in flight",
        "ms",
        "s ",
        "s)",
        "s,",
        "s.",
        "s\n",
        "%",
        "/h",
    ];
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let c = b[i];
        let starts_number = c.is_ascii_digit()
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'));
        if starts_number {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b'.' || b[j] == b',') {
                j += 1;
            }
            // a trailing '.' or ',' ends a sentence, not the number
            let mut end = j;
            while end > i && (b[end - 1] == b'.' || b[end - 1] == b',') {
                end -= 1;
            }
            let rest = &text[end..];
            let unit = match rest.strip_prefix(' ') {
                Some(unit) => unit,
                // A message wrapped after the number: its unit opens the next line.
                None if rest.starts_with('\n') => rest.trim_start_matches([' ', '\n', '│']),
                None => rest,
            };
            let priced = i > 0 && b[i - 1] == b'$';
            let ratio = rest.starts_with('×');
            if priced || ratio || UNITS.iter().any(|u| unit.starts_with(u)) {
                out.push('#');
                i = end;
                continue;
            }
            out.push_str(&text[i..end]);
            i = end;
            continue;
        }
        let ch = text[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// [`rendered`] with the forecast's figures redacted ([`redact_forecast_figures`]): what
/// the diagnostics snapshots store.
pub fn rendered_for_snapshot(checked: &Checked) -> String {
    redact_forecast_figures(&rendered(checked))
}

/// Every file under `dir` (an absent folder has none), folders walked recursively.
pub fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Every `.dist` file under `dir`, sorted, as paths relative to the repository root.
pub fn dist_files(dir: &str) -> Vec<String> {
    let mut out: Vec<String> = files_under(std::path::Path::new(dir))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "dist"))
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .collect();
    out.sort();
    out
}

/// A fresh, empty temporary folder for one test (`name` unique within the test binary).
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dic-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    dir
}

/// A snapshot-friendly name for a path: `examples/mistakes/units.dist` → `mistakes__units`.
pub fn snap_name(path: &str) -> String {
    path.trim_start_matches("examples/")
        .trim_end_matches(".dist")
        .replace('/', "__")
}

/// Runs the `dic` binary built for the tests, without colour.
pub fn dic(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dic"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("the dic binary runs")
}

/// `dic compile FILE --out OUT`, which must succeed (its stderr in the failure message).
pub fn compile_ok(file: &str, out: &str) -> std::process::Output {
    let o = dic(&["compile", file, "--out", out]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{file}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `dic ARGS…` with `input` on its standard input.
pub fn dic_with_stdin(args: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dic"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the dic binary runs");
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input)
            .expect("dic reads its standard input");
    }
    child.wait_with_output().expect("dic ends")
}

/// `dic estimate --model llama_3_1_8b --gpu h100_sxm EXTRA…`: the small point the CLI
/// tests vary one flag of.
pub fn estimate_8b_h100(extra: &[&str]) -> std::process::Output {
    let mut args = vec!["estimate", "--model", "llama_3_1_8b", "--gpu", "h100_sxm"];
    args.extend_from_slice(extra);
    dic(&args)
}

/// Runs `../shared/k8s/validate -q -k VERSION [extra] FILES` and asserts that it passes
/// with no errors (and no warnings unless `extra` relaxes the check); returns its report.
pub fn validate_k8s(
    shared: &std::path::Path,
    version: &str,
    extra: Option<&str>,
    files: &[PathBuf],
) -> String {
    let o = std::process::Command::new(shared.join("k8s/validate"))
        .args(["-q", "-k", version])
        .args(extra)
        .args(files)
        .output()
        .expect("the validator runs");
    let report =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "Kubernetes {version}:\n{report}");
    assert!(report.contains(" 0 errors"), "{report}");
    report
}

/// vLLM 0.33's option schema (`../shared/vllm/serve-schema-0.33.0.json`), checked to be
/// the version dic targets; `None` (with the visible message) when `../shared` is absent.
pub fn vllm_serve_schema() -> Option<serde_json::Value> {
    let shared = shared_dir()?;
    let text = std::fs::read_to_string(shared.join("vllm/serve-schema-0.33.0.json"))
        .expect("the schema is readable");
    let json: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
    assert_eq!(json["vllm_version"], dic_compiler::vllm_args::VLLM_VERSION);
    Some(json)
}

/// An example checked and lowered through the whole pipeline, which must have no errors.
pub fn checked(path: &str) -> dic_compiler::driver::Checked {
    let checked =
        dic_compiler::driver::compile_file(&dic::disk::DiskWorld, path).expect("readable");
    assert!(!checked.has_errors(), "{path}:\n{}", rendered(&checked));
    checked
}

/// Every file `dic compile` writes for an example (the driver's launch plan and forecast).
pub fn generate(path: &str) -> std::collections::BTreeMap<String, String> {
    let checked = checked(path);
    // The same entry point as `dic compile`: the driver's launch plan and forecast.
    dic_targets::render(&checked.plan, &checked.forecast).expect("renders")
}

/// The example deployments (not the shared fragments or the mistake files).
pub fn examples() -> Vec<String> {
    dist_files("examples")
        .into_iter()
        .filter(|p| !p.contains("/mistakes/") && !p.contains("/common/"))
        .collect()
}

/// A launch file as its snapshot holds it: the NCCL plan's step figures (`tokens`,
/// `bytes`, `predicted_us` under `[decode_step]` and `[prefill_chunk]`) as `#`. They
/// follow the forecast (the decode batch from the KV capacity), and the frozen launch
/// plan they are rendered from (`tests/fixtures/launch/*.json`) is where they are
/// reviewed; the snapshot keeps the plan's ranks, groups, links and collectives. `name`
/// is the snapshot's (`…__nccl__plan.toml`); other files pass unchanged.
pub fn launch_shape(name: &str, text: &str) -> String {
    if !name.ends_with("nccl__plan.toml") {
        return text.to_string();
    }
    let mut in_step = false;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            in_step = t.starts_with("[decode_step")
                || t.starts_with("[prefill_chunk")
                || t.starts_with("[[decode_step")
                || t.starts_with("[[prefill_chunk");
        }
        let figure = ["tokens = ", "bytes = ", "predicted_us = "]
            .iter()
            .find(|k| t.starts_with(**k));
        match figure {
            Some(k) if in_step => {
                out.push_str(&line[..line.len() - t.len()]);
                out.push_str(k);
                out.push('#');
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// A report as its snapshot holds it: the renderer's words, sections and codes, with every
/// number as `#` (the JSON report's values; the Markdown and HTML reports' figures, counts
/// and the charts' geometry). The numbers are the frozen forecast's own
/// (`tests/fixtures/forecast/`, the renderer's input; the headline ones checked against the
/// pipeline in `tests/fixtures/forecast.md`, the layouts in the launch snapshots): here they
/// would make every refit's refreeze rewrite every report. The charts are checked where
/// they are drawn, in headless Chromium (`tests/report_html.rs`).
pub fn report_shape(name: &str, text: &str) -> String {
    if name.ends_with(".json") {
        fn redact(v: &mut serde_json::Value) {
            match v {
                serde_json::Value::Number(_) => *v = "#".into(),
                serde_json::Value::String(t) => *t = redact_numbers(t),
                serde_json::Value::Array(a) => a.iter_mut().for_each(redact),
                serde_json::Value::Object(o) => o.values_mut().for_each(redact),
                _ => {}
            }
        }
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
        redact(&mut v);
        return serde_json::to_string_pretty(&v).unwrap() + "\n";
    }
    redact_numbers(text)
}

/// `text` with `#` for every number: a digit after a non-word character (`h100_sxm`,
/// `W0410` and `w3.org` stay), running over digits and the `.` or `,` between two of them.
fn redact_numbers(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let after_word = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if !chars[i].is_ascii_digit() || after_word {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        out.push('#');
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || (matches!(chars[i], '.' | ',')
                    && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
        {
            i += 1;
        }
    }
    out
}
