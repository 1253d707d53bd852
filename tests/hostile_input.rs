//! Hostile input to the CLI: every case ends with a diagnostic and an exit code, in
//! bounded time and output, never a panic, a hang or unbounded memory.
//! - files that are not files (`/dev/zero`, a FIFO, `/dev/stdin`), huge files, links to `.`
//!   that multiply imports;
//! - a diagnostic past column 65,535 (miette panicked formatting it), thousands of
//!   diagnostics on one long line (rendering was quadratic);
//! - absurd numbers, each refused with E0307 rather than emitted as a flag;
//! - every string field given the payloads of a shell, argv and YAML injection, and the
//!   generated node scripts run with one: it arrives as one literal argument.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use common::dic;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs `dic args…` with a deadline; panics if it does not end in time. Output is read
/// while it runs (a full pipe would block the child).
fn dic_within(args: &[&str], limit: Duration) -> std::process::Output {
    let child = Command::new(env!("CARGO_BIN_EXE_dic"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("dic {args:?} did not end within {limit:?}");
        }
    }
}

fn no_panic(o: &std::process::Output) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(o.status.code().is_some(), "killed by a signal: {err}");
}

#[cfg(unix)]
#[test]
fn inputs_that_are_not_files_are_refused_at_once() {
    let dir = common::fresh_dir("special");
    let fifo = dir.join("fifo.dist");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let importer = dir.join("imports.dist");
    std::fs::write(
        &importer,
        format!(
            "import \"/dev/zero\"\nimport \"/dev/urandom\"\nimport \"/dev/stdin\"\nimport \"{}\"\n",
            fifo.display()
        ),
    )
    .unwrap();
    for args in [
        vec!["check", "/dev/zero"],
        vec!["check", "/dev/stdin"],
        vec!["check", fifo.to_str().unwrap()],
        vec!["import-hf", "/dev/urandom"],
        vec!["estimate", "--model", "/dev/zero"],
        vec!["fmt", "/dev/zero"],
        vec!["run", "/dev/zero", "--local"],
    ] {
        let o = dic_within(&args, Duration::from_secs(10));
        no_panic(&o);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
    }
    let o = dic_within(
        &["check", importer.to_str().unwrap()],
        Duration::from_secs(10),
    );
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("not a regular file").count(), 4, "{err}");
}

#[test]
fn huge_files_are_refused_by_size() {
    let dir = common::fresh_dir("huge");
    let big = dir.join("big.dist");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(64 << 20).unwrap(); // sparse: costs no disk
    let o = dic_within(&["check", big.to_str().unwrap()], Duration::from_secs(10));
    no_panic(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("at most 8 MiB"));
}

#[cfg(unix)]
#[test]
fn links_to_the_same_folder_do_not_multiply_imports() {
    let dir = common::fresh_dir("links");
    std::os::unix::fs::symlink(".", dir.join("a")).unwrap();
    std::os::unix::fs::symlink(".", dir.join("b")).unwrap();
    // x imports itself through both links: lexically 2^N paths, one file in truth
    std::fs::write(
        dir.join("x.dist"),
        "import \"a/x.dist\"\nimport \"b/x.dist\"\nworkload w { prompt = 1k tokens, output = 1k tokens, rate = 1 req/s }\n",
    )
    .unwrap();
    let o = dic_within(
        &["check", dir.join("x.dist").to_str().unwrap()],
        Duration::from_secs(10),
    );
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("E0204"));
}

#[test]
fn diagnostics_far_along_one_line_render_in_bounded_output() {
    let dir = common::fresh_dir("columns");
    // one line of 200 KB: an unknown field past column 65,535, then 3,000 more
    let mut line = format!(
        "workload w {{ prompt = 1k tokens, output = 1k tokens, rate = 1 req/s, note = \"{}\"",
        "x".repeat(70_000)
    );
    for i in 0..3000 {
        line.push_str(&format!(", f{i} = 1"));
    }
    line.push_str(" }\n");
    let file = dir.join("long.dist");
    std::fs::write(&file, &line).unwrap();
    let o = dic_within(&["check", file.to_str().unwrap()], Duration::from_secs(30));
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("E0302"), "{}", &err[..err.len().min(2000)]);
    assert!(err.contains("more diagnostics not shown"));
    // 200 rendered reports of a cropped line each, not 3,000 copies of 200 KB
    assert!(
        o.stderr.len() < 1 << 20,
        "{} bytes of stderr",
        o.stderr.len()
    );
    // the column is still the real one
    assert!(
        err.contains("long.dist:1:700"),
        "{}",
        &err[..err.len().min(1500)]
    );
    // JSON lists every one of them
    let o = dic_within(
        &["check", file.to_str().unwrap(), "--format", "json"],
        Duration::from_secs(30),
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v[0]["diagnostics"].as_array().unwrap().len() > 3000);
}

#[test]
fn absurd_numbers_are_refused_with_a_code() {
    let dir = common::fresh_dir("numbers");
    let cases = [
        (
            "engine = vllm { gpu_memory_utilization = 1000000 }",
            "gpu_memory_utilization",
        ),
        (
            "engine = vllm { gpu_memory_utilization = 1.5 }",
            "gpu_memory_utilization",
        ),
        (
            "engine = vllm { gpu_memory_utilization = 0 }",
            "gpu_memory_utilization",
        ),
        ("engine = vllm { max_model_len = -1 }", "max_model_len"),
        (
            "engine = vllm { kv_cache_memory = 2000000000000 GiB }",
            "kv_cache_memory",
        ),
        ("engine = vllm { cpu_offload = -4 GiB }", "cpu_offload"),
        (
            "engine = vllm { max_num_batched_tokens = 1e300 }",
            "max_num_batched_tokens",
        ),
        ("layout = tp 1 × dp 1000000", "layout"),
    ];
    for (i, (deploy_field, name)) in cases.iter().enumerate() {
        let src = format!(
            "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\ncluster c {{ nodes = 1 × dgx_h100 }}\n\
             deploy d {{ model = llama_3_1_8b, cluster = c, {} {deploy_field} }}\n",
            if deploy_field.starts_with("layout") { "" } else { "layout = tp 1," }
        );
        let f = dir.join(format!("n{i}.dist"));
        std::fs::write(&f, src).unwrap();
        let o = dic_within(&["check", f.to_str().unwrap()], Duration::from_secs(10));
        no_panic(&o);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{deploy_field}: {err}");
        assert!(
            err.contains("E0307") && err.contains(name),
            "{deploy_field}: {err}"
        );
    }
    for (i, (def, name)) in [
        (
            "link l { type = infiniband, bandwidth = -400 Gb/s, latency = 2 us }",
            "bandwidth",
        ),
        (
            "link l { type = infiniband, bandwidth = 400 Gb/s, latency = -2 us }",
            "latency",
        ),
        ("node n { gpus = 8 × h100_sxm, price = $-98/h }", "price"),
        (
            "workload w { prompt = 1k tokens, output = 1k tokens, rate = -3 req/s }",
            "rate",
        ),
        (
            "workload w { prompt = -1k tokens, output = 1k tokens, rate = 3 req/s }",
            "prompt",
        ),
        (
            "model m = llama_3_1_8b { layers = 1099511627776 }",
            "layers",
        ),
        ("node n { gpus = 1000000000 × h100_sxm }", "gpus"),
        ("cluster c { nodes = 100000000 × dgx_h100 }", "nodes"),
        ("slo s { ttft <= -5 ms }", "ttft"),
    ]
    .iter()
    .enumerate()
    {
        let src = format!(
            "import std.nodes.dgx_h100\nimport std.gpus.h100_sxm\nimport std.models.llama_3_1_8b\n{def}\n"
        );
        let f = dir.join(format!("d{i}.dist"));
        std::fs::write(&f, src).unwrap();
        let o = dic_within(&["check", f.to_str().unwrap()], Duration::from_secs(10));
        no_panic(&o);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{def}: {err}");
        assert!(err.contains("E0307") && err.contains(name), "{def}: {err}");
    }
}

/// Each hostile payload in each string field: the file is refused (E0312/E0208) or it
/// compiles to scripts that, run with a fake `vllm`, execute nothing but `vllm` and
/// receive every value as one literal argument, and to manifests whose strings stay
/// strings.
#[test]
fn injection_payloads_execute_nothing() {
    let dir = common::fresh_dir("inject");
    let marker = dir.join("pwned");
    let m = marker.display().to_string();
    let payloads = [
        format!("$(touch {m})"),
        format!("`touch {m}`"),
        format!("x; touch {m}"),
        format!("x\ntouch {m}"),
        format!("a'b\"c$(touch {m})"),
        format!("${{IFS}}touch${{IFS}}{m}"),
        "--trust-remote-code".to_string(),
        "-h".to_string(),
        "on".to_string(),
        "12:30".to_string(),
        "2024-01-01".to_string(),
        "1_000".to_string(),
        "=".to_string(),
        "<<".to_string(),
        "{a}".to_string(),
        "x: y".to_string(),
        "#x".to_string(),
        "Prod".to_string(),
        "a_b".to_string(),
    ];
    let fields = [
        "model_source",
        "served_model_name",
        "image",
        "namespace",
        "hf_token_secret",
        "preflight_image",
    ];
    let net_fields = [
        "env_name",
        "env_value",
        "annotation_key",
        "annotation_value",
        "resource",
        "capability",
        "socket_ifname",
    ];
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["vllm", "ray", "python3"] {
        let fake = bin.join(tool);
        std::fs::write(&fake, "#!/usr/bin/env bash\nprintf '%s\\n' \"$@\"\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    let escape = |s: &str| {
        s.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    let (mut compiled, mut refused) = (0, 0);
    let mut case = 0;
    for p in &payloads {
        let mut sources = Vec::new();
        for f in fields {
            sources.push((f.to_string(), format!("deploy d {{ model = llama_3_1_8b, cluster = c, layout = tp 8 × pp 2, {f} = \"{}\" }}\n", escape(p))));
        }
        for f in net_fields {
            let entry = match f {
                "env_name" => format!("env = [\"{}=1\"]", escape(p)),
                "env_value" => format!("env = [\"NCCL_X={}\"]", escape(p)),
                "annotation_key" => format!("annotations = [\"{}=1\"]", escape(p)),
                "annotation_value" => format!("annotations = [\"example.com/k={}\"]", escape(p)),
                "resource" => format!("resource = \"{}\"", escape(p)),
                "capability" => format!("capabilities = [\"{}\"]", escape(p)),
                _ => format!("socket_ifname = \"{}\"", escape(p)),
            };
            sources.push((f.to_string(), format!("network net {{ {entry} }}\ncluster c2 = c {{ network = net }}\ndeploy d {{ model = llama_3_1_8b, cluster = c2, layout = tp 8 × pp 2 }}\n")));
        }
        sources.push(("gpu_names".to_string(), format!("gpu g = h100_sxm {{ names = [\"{}\"] }}\nnode n = dgx_h100 {{ gpus = 8 × g }}\ncluster c3 {{ nodes = 2 × n }}\ndeploy d {{ model = llama_3_1_8b, cluster = c3, layout = tp 8 × pp 2 }}\n", escape(p))));
        for (field, deploy) in sources {
            case += 1;
            let src = format!("import std.nodes.dgx_h100\nimport std.gpus.h100_sxm\nimport std.models.llama_3_1_8b\ncluster c {{ nodes = 2 × dgx_h100 }}\n{deploy}");
            let file = dir.join(format!("case{case}.dist"));
            std::fs::write(&file, &src).unwrap();
            let out = dir.join(format!("out{case}"));
            let o = dic(&[
                "compile",
                file.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ]);
            no_panic(&o);
            if o.status.code() == Some(1) {
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(
                    err.contains("E0312") || err.contains("E0106"),
                    "{field} = {p:?}: {err}"
                );
                assert!(!out.join("d").exists(), "nothing written on errors");
                refused += 1;
                continue;
            }
            assert_eq!(
                o.status.code(),
                Some(0),
                "{field} = {p:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            compiled += 1;
            // run every script with fake tools; nothing but them may run
            for node in 0..2 {
                let script = out.join(format!("d/vllm/node-{node}.sh"));
                let run = Command::new("bash")
                    .arg(&script)
                    .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
                    .env("DIC_HEAD_ADDR", "10.0.0.1")
                    .output()
                    .unwrap();
                assert!(
                    run.status.success(),
                    "{field} = {p:?}: {}",
                    String::from_utf8_lossy(&run.stderr)
                );
                let args: Vec<String> = String::from_utf8_lossy(&run.stdout)
                    .lines()
                    .map(String::from)
                    .collect();
                // no argument of vllm's is the payload reading as an option
                assert!(
                    !args.iter().any(|a| a == "--trust-remote-code" || a == "-h"),
                    "{field} = {p:?}: {args:?}"
                );
            }
            // every manifest parses, and a value the user wrote comes back as that string
            let mut strings = Vec::new();
            for e in common::files_under(&out.join("d/k8s")) {
                let text = std::fs::read_to_string(&e).unwrap();
                let v: serde_json::Value = serde_yaml_ng::from_str(&text)
                    .unwrap_or_else(|err| panic!("{}: {err}\n{text}", e.display()));
                assert!(v.is_object());
                collect_strings(&v, &mut strings);
            }
            if field == "env_value" || field == "annotation_value" {
                assert!(
                    strings.iter().any(|s| s == p),
                    "{field} = {p:?} is not a string in the manifests"
                );
            }
        }
    }
    assert!(!marker.exists(), "a payload executed");
    assert!(
        compiled > 20 && refused > 50,
        "compiled {compiled}, refused {refused}"
    );
    eprintln!("injection: {case} cases, {compiled} compiled and ran, {refused} refused");
    // what compiled also passes the Kubernetes schemas and API-server rules
    if let Some(shared) = common::shared_dir() {
        let manifests: Vec<PathBuf> = (1..=case)
            .flat_map(|n| common::files_under(&dir.join(format!("out{n}/d/k8s"))))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            // kustomize's own file is not a Kubernetes object
            .filter(|p| !p.ends_with("kustomization.yaml"))
            .collect();
        for version in ["1.33", "1.37"] {
            let report = common::validate_k8s(&shared, version, None, &manifests);
            eprintln!("injection: Kubernetes {version}: {}", report.trim());
        }
    }
}

/// Every string (keys included) in a parsed document.
fn collect_strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                out.push(k.clone());
                collect_strings(x, out);
            }
        }
        _ => {}
    }
}

/// A 7 MB string literal used to cost 600 MB (a parser token per character) and 150,000
/// diagnostics 16 s of column arithmetic; now memory stays small and diagnostics stop at
/// 10,000 with a note saying how many more there were.
#[cfg(unix)]
#[test]
fn big_strings_and_floods_of_diagnostics_stay_bounded() {
    let dir = common::fresh_dir("flood");
    let big = dir.join("bigstr.dist");
    std::fs::write(
        &big,
        format!(
            "workload w {{ prompt = 1k tokens, output = 1k tokens, rate = 1 req/s }}\nnetwork n {{ env = [\"A={}\"] }}\n",
            "x".repeat(7 << 20)
        ),
    )
    .unwrap();
    let o = dic_within(&["check", big.to_str().unwrap()], Duration::from_secs(30));
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("E0312"));
    // SAFETY: getrusage fills a struct we own. FFI: std has no getrusage.
    #[allow(unsafe_code)]
    let peak_kib = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u.ru_maxrss
    };
    assert!(
        peak_kib < 300 * 1024,
        "a child of this test peaked at {peak_kib} KiB"
    );

    let flood = dir.join("flood.dist");
    let fields: Vec<String> = (0..20_000).map(|i| format!("f{i} = 1")).collect();
    std::fs::write(
        &flood,
        format!(
            "workload w {{ prompt = 1k tokens, output = 1k tokens, rate = 1 req/s, {} }}\n",
            fields.join(", ")
        ),
    )
    .unwrap();
    let o = dic_within(
        &["check", flood.to_str().unwrap(), "--format", "json"],
        Duration::from_secs(30),
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let diags = v[0]["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 10_000);
    let note = diags.last().unwrap()["notes"][0].as_str().unwrap();
    assert!(
        note.starts_with("10000 more diagnostics were not reported"),
        "{note}"
    );
}

/// A credential pasted into `extra_args`, into `env` under an innocuous name, or into a
/// network profile's `env` would be written in plain text into scripts, manifests and
/// report.json: each token shape is refused with E0316 in all three places, and neither
/// the terminal nor the JSON output repeats the token. Ordinary values check clean.
#[test]
fn token_shaped_values_are_refused_and_never_echoed() {
    let dir = common::fresh_dir("secrets");
    let tokens = [
        "hf_Xk3v9QmZr7TbLw2NcYp5HsDfJg8AeUo1Ri",
        "sk-proj-4fQz9XvLm2Rt7YbNw3Kc8HsPj5Dg1AeU",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFU",
        "AKIAIOSFODNN7EXAMPLE",
        "ASIAY34FZKBOKMUTVV7A",
        "ghp_R7mX2kQ9vLw4Tb8Nc3Yp6HsDj1Fg5AeUo0Zi",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "-----BEGIN PRIVATE KEY----- MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
    ];
    let file = |name: &str, value: &str| {
        let f = dir.join(format!("{name}.dist"));
        std::fs::write(
            &f,
            format!(
                "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
                 network n {{ env = [\"NCCL_DEBUG_FILE={value}\"] }}\n\
                 cluster c {{ nodes = 1 × dgx_h100, network = n }}\n\
                 deploy d {{ model = llama_3_1_8b, cluster = c, layout = tp 1, engine = vllm {{\n\
                   extra_args = [\"--lora-modules\", \"adapter={value}\"],\n\
                   env = [\"DOWNLOAD_AUTH={value}\"] }} }}\n"
            ),
        )
        .unwrap();
        f
    };
    for (i, token) in tokens.iter().enumerate() {
        let f = file(&format!("t{i}"), token);
        let tail = &token[token.len() - 10..];
        let human = dic_within(&["check", f.to_str().unwrap()], Duration::from_secs(10));
        no_panic(&human);
        let err = String::from_utf8_lossy(&human.stderr);
        assert_eq!(human.status.code(), Some(1), "{token}: {err}");
        let o = dic_within(
            &["check", f.to_str().unwrap(), "--format", "json"],
            Duration::from_secs(10),
        );
        let out = String::from_utf8_lossy(&o.stdout);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let codes: Vec<&str> = v[0]["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|d| d["code"].as_str())
            .collect();
        assert_eq!(codes, ["E0316"; 3], "{token}: {err}");
        // The source line is quoted in the terminal's snippet; the messages never are.
        let messages: Vec<&str> = v[0]["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|d| d["message"].as_str())
            .collect();
        assert!(
            messages.iter().all(|m| !m.contains(tail)),
            "{token}: {messages:?}"
        );
        assert!(err.contains("hf_token_secret"), "{token}: {err}");
    }
    let ordinary = file("ordinary", "/mnt/models/hf_cache/meta-llama--Llama-3.1-8B");
    let o = dic_within(
        &["check", ordinary.to_str().unwrap()],
        Duration::from_secs(10),
    );
    no_panic(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `dic import-hf` on configs with hostile counts exits 1 with E0901 naming the field,
/// and writes no definition (before, `num_key_value_heads: -8` became `kv_heads = 64`
/// and `head_dim: 0` a definition `dic check` refused).
#[test]
fn import_hf_refuses_hostile_counts_with_the_field_named() {
    let dir = common::fresh_dir("import_hostile");
    let base = r#""num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "vocab_size": 1000, "max_position_embeddings": 4096, "intermediate_size": 1024"#;
    for (i, (extra, field)) in [
        (r#""num_key_value_heads": -8"#, "num_key_value_heads"),
        (r#""num_key_value_heads": 0"#, "num_key_value_heads"),
        (r#""head_dim": 0"#, "head_dim"),
        (r#""num_key_value_heads": 2.5"#, "num_key_value_heads"),
        (
            r#""num_experts": 4, "num_experts_per_tok": 8, "moe_intermediate_size": 64"#,
            "num_experts_per_tok",
        ),
    ]
    .iter()
    .enumerate()
    {
        let f = dir.join(format!("c{i}_config.json"));
        std::fs::write(&f, format!("{{ {base}, {extra} }}")).unwrap();
        let o = dic_within(&["import-hf", f.to_str().unwrap()], Duration::from_secs(10));
        no_panic(&o);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{extra}: {err}");
        assert!(
            err.contains("E0901") && err.contains(&format!("`{field}`")),
            "{extra}: {err}"
        );
        assert!(o.stdout.is_empty(), "{extra}: wrote a definition");
    }
}

#[test]
fn scripts_pass_hostile_values_through_literally() {
    let dir = common::fresh_dir("script_argv");
    let marker = dir.join("pwned");
    let hostile = format!(
        "org/it's \"$(touch {m})\" `touch {m}` ; touch {m}",
        m = marker.display()
    );
    let src = format!(
        "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
         cluster c {{ nodes = 2 × dgx_h100 }}\n\
         deploy d {{ model = llama_3_1_8b, cluster = c, layout = tp 8 × pp 2, model_source = \"{}\", engine = vllm {{ max_model_len = 8k tokens }} }}\n",
        hostile.replace('\\', "\\\\").replace('"', "\\\"")
    );
    let file = dir.join("hostile.dist");
    std::fs::write(&file, src).unwrap();
    let out = dir.join("out");
    common::compile_ok(file.to_str().unwrap(), out.to_str().unwrap());
    // a fake `vllm` that prints its arguments, one per line
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("vllm");
    std::fs::write(&fake, "#!/usr/bin/env bash\nprintf '%s\\n' \"$@\"\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for node in 0..2 {
        let script = out.join(format!("d/vllm/node-{node}.sh"));
        let run = Command::new("bash")
            .arg(&script)
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            )
            .env("DIC_HEAD_ADDR", "10.0.0.1")
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let args: Vec<String> = String::from_utf8(run.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(
            args[1], hostile,
            "the model source arrives as one literal argument"
        );
        // the script's argv equals commands.json's, with the head address filled in
        let cmds: Vec<serde_json::Value> = serde_json::from_str(
            &std::fs::read_to_string(out.join("d/vllm/commands.json")).unwrap(),
        )
        .unwrap();
        let want: Vec<String> = cmds[node]["argv"].as_array().unwrap()[1..]
            .iter()
            .map(|a| a.as_str().unwrap().replace("${DIC_HEAD_ADDR}", "10.0.0.1"))
            .collect();
        assert_eq!(args, want);
    }
    assert!(!marker.exists(), "a value was executed by the shell");
    // without the head address the script refuses to start
    let run = Command::new("bash")
        .arg(out.join("d/vllm/node-1.sh"))
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env_remove("DIC_HEAD_ADDR")
        .output()
        .unwrap();
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("DIC_HEAD_ADDR"));
}
