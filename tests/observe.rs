//! `dic observe` from the command line: saved exposition files, a stand-in HTTP `/metrics`
//! server scraped twice, `--write` round-tripping through `dic fmt` and `dic check`, and
//! the exit-code contract (1 on errors or, with `--check`, on any drift; 2 on usage).
//! The comparison itself is tested in `compiler/src/observe/tests.rs` and by the explain
//! pages of E1001–E1002 and W1001–W1004.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use common::dic;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Output;

const DIR: &str = "tests/data/observe";

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally")
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn codes(v: &serde_json::Value) -> Vec<String> {
    v["diagnostics"]["diagnostics"]
        .as_array()
        .or(v["diagnostics"].as_array())
        .into_iter()
        .flatten()
        .map(|d| d["code"].as_str().unwrap_or("").to_string())
        .collect()
}

fn observe(metrics: &str, extra: &[&str]) -> Output {
    observe_file(&format!("{DIR}/chat.dist"), metrics, extra)
}

/// `dic observe FILE --metrics DIR/METRICS --window 300s EXTRA…`.
fn observe_file(file: &str, metrics: &str, extra: &[&str]) -> Output {
    let m = format!("{DIR}/{metrics}");
    let mut args = vec!["observe", file, "--metrics", m.as_str(), "--window", "300s"];
    args.extend_from_slice(extra);
    dic(&args)
}

#[test]
fn each_saved_file_gives_its_code_and_the_exit_code_follows_severity() {
    for (file, code_, exit, exit_check) in [
        ("prompt_drift.prom", "W1002", 0, 1),
        ("kv_capacity.prom", "W1001", 0, 1),
        ("prefix_hits.prom", "W1003", 0, 1),
        ("preemptions.prom", "W1004", 0, 1),
        ("ttft_missed.prom", "E1001", 1, 1),
    ] {
        let o = observe(file, &["--format", "json"]);
        assert_eq!(
            code(&o),
            exit,
            "{file}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            codes(&json(&o)).contains(&code_.to_string()),
            "{file}: {:?}",
            codes(&json(&o))
        );
        let o = observe(file, &["--check"]);
        assert_eq!(code(&o), exit_check, "{file} --check");
    }
}

#[test]
fn the_human_table_shows_declared_predicted_and_measured() {
    let o = observe("prompt_drift.prom", &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("deploy `chat`: 1 engine observed, 600 requests in the window"),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("prompt")
            && l.contains("1000")
            && l.contains("3000")),
        "{out}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("W1002") && err.contains("chat.dist:6:26"),
        "{err}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let file = format!("{DIR}/chat.dist");
    for args in [
        vec!["observe", file.as_str()],
        vec![
            "observe",
            file.as_str(),
            "--metrics",
            "https://example.invalid/metrics",
        ],
        vec![
            "observe",
            file.as_str(),
            "--metrics",
            "tests/data/observe/none.prom",
        ],
        vec![
            "observe",
            file.as_str(),
            "--metrics",
            "tests/data/observe/prompt_drift.prom",
            "--deployment",
            "nope",
        ],
        vec![
            "observe",
            file.as_str(),
            "--metrics",
            "tests/data/observe/prompt_drift.prom",
            "--window",
            "-3s",
        ],
    ] {
        let o = dic(&args);
        assert_eq!(
            code(&o),
            2,
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            String::from_utf8_lossy(&o.stderr).starts_with("error: "),
            "{args:?}"
        );
    }
    // A missing file is named.
    let o = dic(&[
        "observe",
        file.as_str(),
        "--metrics",
        "tests/data/observe/none.prom",
    ]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("`tests/data/observe/none.prom`"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A file that is not an exposition: the line is named.
    let bad = std::env::temp_dir().join(format!("dic-observe-bad-{}.prom", std::process::id()));
    std::fs::write(&bad, "vllm:num_requests_running{engine=\"0\" 3\n").unwrap();
    let o = dic(&["observe", file.as_str(), "--metrics", bad.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("line 1"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The request line of the HTTP request on `s` (read to the end of its headers).
fn request_line(s: &mut std::net::TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// Serves `bodies` in turn, one per connection, as a vLLM engine's `/metrics`.
fn stand_in_server(bodies: Vec<String>) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut requests = Vec::new();
        for body in bodies {
            let (mut s, _) = listener.accept().unwrap();
            requests.push(request_line(&mut s));
            write!(
                s,
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
        requests
    });
    (url, handle)
}

#[test]
fn a_live_engine_is_scraped_twice_and_the_window_is_the_difference() {
    // 10 requests finished before the window, 13 after it began and 1 s later: 3 req/s
    // over the window, where the declared rate is 2 (W1002 at the rate's span).
    let scrape = |n: u32| {
        format!(
            "# TYPE vllm:request_success_total counter\n\
             vllm:request_success_total{{engine=\"0\",finished_reason=\"stop\",model_name=\"chat\"}} {n}\n\
             vllm:num_requests_running{{engine=\"0\",model_name=\"chat\"}} 2\n"
        )
    };
    let (url, server) = stand_in_server(vec![scrape(10), scrape(13)]);
    let file = format!("{DIR}/chat.dist");
    let o = dic(&[
        "observe",
        &file,
        "--metrics",
        &url,
        "--window",
        "1s",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    assert_eq!(v["workload"]["rate"], 3.0);
    assert!(codes(&v).contains(&"W1002".to_string()), "{v}");
    let requests = server.join().unwrap();
    assert_eq!(requests, vec!["GET /metrics HTTP/1.0"; 2]);
}

#[test]
fn write_round_trips_through_fmt_and_check() {
    let dir = std::env::temp_dir().join(format!("dic-observe-write-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("chat.dist");
    let before = std::fs::read_to_string(format!("{DIR}/chat.dist")).unwrap();
    std::fs::write(&file, &before).unwrap();
    let f = file.to_str().unwrap();
    let o = observe_file(f, "prompt_drift.prom", &["--write"]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let after = std::fs::read_to_string(&file).unwrap();
    // Only the measured field and the provenance comment differ.
    let changed: Vec<(&str, &str)> = before
        .lines()
        .zip(after.lines().filter(|l| !l.starts_with("// dic observe:")))
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(
        changed,
        vec![(
            "workload chat { prompt = 1k tokens, output = 200 tokens, rate = 2 req/s }",
            "workload chat { prompt = 3000 tokens, output = 200 tokens, rate = 2 req/s }"
        )]
    );
    assert_eq!(after.lines().count(), before.lines().count() + 1);
    let provenance = after
        .lines()
        .find(|l| l.starts_with("// dic observe:"))
        .unwrap();
    assert!(
        provenance.contains("prompt_drift.prom") && provenance.contains("5 min"),
        "{provenance}"
    );
    assert_eq!(code(&dic(&["fmt", "--check", f])), 0);
    assert_eq!(code(&dic(&["check", f])), 0);
    // Observed again, nothing drifts and nothing is written.
    let o = observe_file(f, "prompt_drift.prom", &["--write", "--check"]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), after);
}

#[test]
fn calibrate_refuses_a_factor_out_of_range_and_writes_nothing() {
    let dir = std::env::temp_dir().join(format!("dic-observe-cal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("chat.dist");
    let before = std::fs::read_to_string(format!("{DIR}/chat.dist")).unwrap();
    std::fs::write(&file, &before).unwrap();
    let o = dic(&[
        "observe",
        file.to_str().unwrap(),
        "--metrics",
        "tests/data/observe/tpot_far.prom",
        "--window",
        "300s",
        "--calibrate",
    ]);
    assert_eq!(code(&o), 1);
    assert!(String::from_utf8_lossy(&o.stderr).contains("E1002"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
}

/// The query a Prometheus request asks (`/api/v1/query?query=…`), percent-decoded.
fn promql(request_line: &str) -> String {
    let q = request_line
        .split("query=")
        .nth(1)
        .unwrap_or("")
        .split(' ')
        .next()
        .unwrap_or("");
    let mut out = Vec::new();
    let b = q.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            out.push(u8::from_str_radix(&q[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn prometheus_is_asked_for_the_window_and_read_as_one() {
    // A stand-in Prometheus: 900 requests finished in the last 300 s (3 req/s against
    // the declared 2), nothing else.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let mut queries = Vec::new();
        listener.set_nonblocking(false).unwrap();
        while let Ok((mut s, _)) = listener.accept() {
            let line = request_line(&mut s);
            if line.contains("/stop") {
                break;
            }
            let q = promql(&line);
            let result = if q.starts_with("sum by (engine) (increase(vllm:request_success_total") {
                r#"[{"metric":{"engine":"0"},"value":[1.7e9,"900"]}]"#
            } else {
                "[]"
            };
            let body = format!(
                r#"{{"status":"success","data":{{"resultType":"vector","result":{result}}}}}"#
            );
            write!(
                s,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            queries.push(q);
        }
        queries
    });
    let file = format!("{DIR}/chat.dist");
    let o = dic(&[
        "observe",
        &file,
        "--prometheus",
        &base,
        "--window",
        "5m",
        "--format",
        "json",
    ]);
    let _ = std::net::TcpStream::connect(base.trim_start_matches("http://"))
        .and_then(|mut s| s.write_all(b"GET /stop HTTP/1.0\r\n\r\n"));
    let queries = server.join().unwrap();
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    assert_eq!(v["workload"]["rate"], 3.0);
    assert!(codes(&v).contains(&"W1002".to_string()), "{v}");
    // Every query selects the deployment's served model and the window.
    assert!(
        queries.contains(
            &"sum by (engine) (increase(vllm:request_success_total{model_name=\"chat\"}[300s]))"
                .to_string()
        ),
        "{queries:#?}"
    );
    assert!(queries
        .iter()
        .any(|q| q
            .starts_with("sum by (engine, le) (increase(vllm:time_to_first_token_seconds_bucket")));
}
