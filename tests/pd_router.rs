//! dic's P/D router run for real against stand-in vLLM servers (`tests/data/fake_vllm.py`):
//! the front (`vllm/pd_front.py`, the same text as the ConfigMap) alone for the attacks on
//! its own edge (framing, keys, bounds, slow and broken upstreams, the prefill guard), and
//! with `vllm-router` behind it for both legs end to end, the smuggling of
//! `kv_transfer_params`, and a load test of 500 concurrent clients.
//!
//! Needs a Python with aiohttp, and vllm-router for the end-to-end tests: `DIC_ROUTER_VENV`
//! or `target/router-venv` (`python3 -m venv target/router-venv && target/router-venv/bin/pip
//! install vllm-router==0.1.17`), else `python3` and `vllm-router` on PATH. Without them the
//! tests are ignored with that reason (the build script looks in the same places); under
//! `CI=true` nothing is ignored and their absence fails.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failure

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

struct Proc {
    child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Python that runs the front, and vllm-router when it is installed.
struct Tools {
    python: PathBuf,
    vllm_router: Option<PathBuf>,
}

fn has_aiohttp(python: &std::path::Path) -> bool {
    Command::new(python)
        .args(["-c", "import aiohttp"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn absent(what: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what} is absent under CI=true: the router tests cannot run");
    }
    eprintln!("SKIPPED: {what} is absent; see tests/pd_router.rs's header");
}

fn tools() -> Option<Tools> {
    let venvs = std::env::var_os("DIC_ROUTER_VENV")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/router-venv")]);
    for venv in venvs {
        let python = venv.join("bin/python");
        if python.is_file() && has_aiohttp(&python) {
            let router = venv.join("bin/vllm-router");
            return Some(Tools {
                python,
                vllm_router: router.is_file().then_some(router),
            });
        }
    }
    let python = PathBuf::from("python3");
    if has_aiohttp(&python) {
        let on_path = Command::new("vllm-router")
            .arg("--help")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        return Some(Tools {
            python,
            vllm_router: on_path.then(|| PathBuf::from("vllm-router")),
        });
    }
    absent("a Python with aiohttp");
    None
}

/// A stand-in server of `role`, its port, and the reader of the requests it records.
fn fake(role: &str) -> (Proc, u16, BufReader<ChildStdout>) {
    fake_with(role, &[])
}

fn fake_with(role: &str, extra: &[&str]) -> (Proc, u16, BufReader<ChildStdout>) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fake_vllm.py");
    let mut child = Command::new("python3")
        .args([script, role])
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let port = serde_json::from_str::<Value>(&line).unwrap()["port"]
        .as_u64()
        .unwrap() as u16;
    (Proc { child }, port, out)
}

/// A port free on the loopback now (for a server that cannot take port 0).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

const KEY: &str = "k-123";

/// The front: its client port and, with prefill servers, its guard's port.
struct Front {
    proc: Proc,
    port: u16,
    guard: u16,
}

/// The decode pool's plan of the P/D example: the router's flags are built from it.
fn decode_plan() -> dic_compiler::ir::DeploymentPlan {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/pd_70b_h200.dist");
    let checked = dic_compiler::driver::compile_file(&dic::disk::DiskWorld, path).unwrap();
    checked
        .plan
        .deployments
        .into_iter()
        .find(|d| d.name.ends_with("-decode"))
        .unwrap()
}

/// The router's ports for one test: its own free ports on the loopback.
fn ports(router: u16) -> dic_targets::pd_router::RouterPorts {
    dic_targets::pd_router::RouterPorts {
        vllm_router: router.into(),
        guard: free_port().into(),
        metrics: free_port().into(),
    }
}

/// The front with the flags the targets give it (on free ports, the key from the
/// environment, short timeouts), in front of `router`, guarding `prefill`.
fn front(t: &Tools, router: u16, prefill: &[u16], extra: &[&str]) -> Front {
    front_on(t, ports(router), prefill, extra)
}

fn front_on(
    t: &Tools,
    ports: dic_targets::pd_router::RouterPorts,
    prefill: &[u16],
    extra: &[&str],
) -> Front {
    let dir = std::env::temp_dir().join(format!("dic-pd-front-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join(dic_targets::pd_router::FRONT_FILE);
    std::fs::write(&script, dic_targets::pd_router::FRONT).unwrap();
    let urls: Vec<String> = prefill
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();
    let flags = dic_targets::pd_router::front_flags(&decode_plan(), ports, "127.0.0.1", 0, &urls);
    let mut cmd = Command::new(&t.python);
    cmd.arg(&script)
        .args(&flags)
        .args(["--api-key-env", dic_targets::pd_router::API_KEY_ENV])
        .args([
            "--client-timeout",
            "2",
            "--read-timeout",
            "2",
            "--connect-timeout",
            "2",
        ])
        .args(extra)
        .env(dic_targets::pd_router::API_KEY_ENV, KEY)
        .stderr(Stdio::piped());
    let guard = ports.guard as u16;
    let mut child = cmd.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut port = None;
    for _ in 0..2 {
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        if line.contains("listening on") {
            port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok());
            break;
        }
    }
    let port = port.unwrap_or_else(|| panic!("the front did not start"));
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in err.lines() {});
    Front {
        proc: Proc { child },
        port,
        guard,
    }
}

/// vllm-router with the flags the targets give it (P/D mode, its prefill servers behind
/// the front's guard), on the test's ports; returns once it answers /health.
fn vllm_router(
    t: &Tools,
    ports: dic_targets::pd_router::RouterPorts,
    prefill: usize,
    decode: &[u16],
) -> Proc {
    let urls: Vec<String> = decode
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();
    let flags = dic_targets::pd_router::vllm_router_flags(
        &decode_plan(),
        ports,
        prefill,
        &urls,
        "127.0.0.1",
    );
    let mut cmd = Command::new(t.vllm_router.as_ref().unwrap());
    cmd.args(&flags)
        .env(dic_targets::pd_router::ROUTER_KEY_ENV, KEY)
        .stdout(Stdio::null())
        .stderr(if std::env::var_os("DIC_TEST_ROUTER_LOG").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        });
    let port = ports.vllm_router as u16;
    let proc = Proc {
        child: cmd.spawn().unwrap(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = write!(
                s,
                "GET /health HTTP/1.1\r\nHost: r\r\nConnection: close\r\n\r\n"
            );
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            if out.starts_with("HTTP/1.1 200") {
                return proc;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("vllm-router did not become healthy");
}

/// Sends `raw` and reads until the server closes or `wait` passes: what came back, and
/// whether the connection was closed.
fn exchange(port: u16, raw: &[u8], wait: Duration) -> (String, bool) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    // A server may refuse before the whole request is written (and reset the rest).
    let _ = s.write_all(raw);
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    (String::from_utf8_lossy(&out).into_owned(), closed)
}

fn request(path: &str, key: Option<&str>, body: &str) -> Vec<u8> {
    let auth = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    format!(
        "POST {path} HTTP/1.1\r\nHost: router\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The status code and the body (chunks joined) of a whole answer.
fn answer(raw: &str) -> (u16, String) {
    let (head, rest) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = rest;
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap();
            if n == 0 {
                break;
            }
            out.push_str(&tail[..n]);
            rest = &tail[n + 2..];
        }
        out
    } else {
        rest.to_string()
    };
    (status, body)
}

fn recorded(out: &mut BufReader<ChildStdout>) -> Value {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

const PROMPT: &str = r#"{"model":"chat","prompt":"hi","max_tokens":8}"#;

/// Request smuggling and slow clients: every ambiguous framing is refused with a 400 and
/// the connection closed; an early error (no key, an oversize body) closes the connection,
/// so what follows on it is never read as a request; a client that stops sending its
/// headers or body is cut off after the client timeout. None of it reaches the upstream.
#[cfg_attr(
    dic_no_aiohttp,
    ignore = "needs a Python with aiohttp (tests/pd_router.rs's header)"
)]
#[test]
fn the_front_refuses_ambiguous_framing_and_closes_after_early_errors() {
    let Some(t) = tools() else {
        return;
    };
    let (upstream, up_port, mut log) = fake("decode");
    let f = front(&t, up_port, &[], &[]);
    let n = PROMPT.len();
    let auth = format!("Authorization: Bearer {KEY}\r\n");
    let head = |extra: &str| {
        format!("POST /v1/completions HTTP/1.1\r\nHost: r\r\n{auth}{extra}\r\n").into_bytes()
    };
    let framing: Vec<(&str, String)> = vec![
        (
            "duplicate Content-Length",
            format!("Content-Length: {n}\r\nContent-Length: {n}\r\n"),
        ),
        (
            "conflicting Content-Length",
            format!("Content-Length: {n}\r\nContent-Length: 5\r\n"),
        ),
        (
            "non-numeric Content-Length",
            "Content-Length: 4a\r\n".into(),
        ),
        ("signed Content-Length", format!("Content-Length: +{n}\r\n")),
        (
            "Content-Length with chunked",
            "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n".into(),
        ),
        (
            "chunked, identity",
            "Transfer-Encoding: chunked, identity\r\n".into(),
        ),
    ];
    let chunked = format!("{n:x}\r\n{PROMPT}\r\n0\r\n\r\n");
    let mut failures = Vec::new();
    for (name, headers) in &framing {
        let mut raw = head(headers);
        raw.extend_from_slice(if headers.contains("chunked") {
            chunked.as_bytes()
        } else {
            PROMPT.as_bytes()
        });
        let (out, closed) = exchange(f.port, &raw, Duration::from_secs(5));
        if !(out.starts_with("HTTP/1.0 400") || out.starts_with("HTTP/1.1 400")) || !closed {
            failures.push(format!("{name}: {:?} closed={closed}", out.lines().next()));
        }
    }
    // An early error, then a second request in the same packet: one answer, then closed.
    let keep_alive = String::from_utf8(request("/v1/completions", None, PROMPT))
        .unwrap()
        .replace("Connection: close\r\n", "");
    let mut raw = keep_alive.into_bytes();
    raw.extend_from_slice(&request("/v1/completions", Some(KEY), PROMPT));
    let (out, closed) = exchange(f.port, &raw, Duration::from_secs(5));
    if out.matches("HTTP/1.1 ").count() != 1 || !out.starts_with("HTTP/1.1 401") || !closed {
        failures.push(format!("no key + pipelined: {out:?} closed={closed}"));
    }
    // A body over the bound: refused at once from its Content-Length, connection closed.
    let mut raw = head("Content-Length: 104857600\r\n");
    raw.extend_from_slice(PROMPT.as_bytes());
    let start = Instant::now();
    let (out, closed) = exchange(f.port, &raw, Duration::from_secs(5));
    if !out.starts_with("HTTP/1.1 413") || !closed || start.elapsed() > Duration::from_secs(1) {
        failures.push(format!(
            "oversize: {:?} closed={closed}",
            out.lines().next()
        ));
    }
    // A body bigger than its bound in chunks: refused while reading.
    let big = format!("{{\"prompt\":\"{}\"}}", "x".repeat(9 << 20));
    let mut raw = head("Transfer-Encoding: chunked\r\n");
    raw.extend_from_slice(format!("{:x}\r\n{big}\r\n0\r\n\r\n", big.len()).as_bytes());
    let (out, closed) = exchange(f.port, &raw, Duration::from_secs(5));
    // The reset of the unread rest may overtake the 413 on the wire.
    if !(out.is_empty() || out.starts_with("HTTP/1.1 413")) || !closed {
        failures.push(format!(
            "oversize chunked: {:?} closed={closed}",
            out.lines().next()
        ));
    }
    // Half a body, then silence; half the headers, then silence.
    for (name, raw) in [
        ("half a body", {
            let mut r = head("Content-Length: 1000\r\n");
            r.extend_from_slice(PROMPT.as_bytes());
            r
        }),
        (
            "half the headers",
            b"POST /v1/completions HTTP/1.1\r\nHost: r\r\n".to_vec(),
        ),
    ] {
        let start = Instant::now();
        let (_, closed) = exchange(f.port, &raw, Duration::from_secs(6));
        if !closed || start.elapsed() > Duration::from_secs(5) {
            failures.push(format!("{name}: still open after {:?}", start.elapsed()));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // Nothing reached the upstream.
    drop(f);
    drop(upstream);
    let mut rest = String::new();
    log.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "", "a refused request reached the upstream");
}

/// The client's key is checked (from the environment, never the command line), a
/// client's `kv_transfer_params` never passes the front, and only the completion routes
/// and /v1/models are served.
#[cfg_attr(
    dic_no_aiohttp,
    ignore = "needs a Python with aiohttp (tests/pd_router.rs's header)"
)]
#[test]
fn the_front_checks_the_key_and_strips_kv_transfer_params() {
    let Some(t) = tools() else {
        return;
    };
    let (_u, up_port, mut log) = fake("decode");
    let f = front(&t, up_port, &[], &[]);
    let smuggled = r#"{"model":"chat","prompt":"hi","max_tokens":8,"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"attacker.example","remote_port":5600,"remote_engine_id":"x","remote_block_ids":[1]}}"#;
    for key in [None, Some("wrong"), Some("k-1234")] {
        let (out, closed) = exchange(
            f.port,
            &request("/v1/completions", key, smuggled),
            Duration::from_secs(5),
        );
        assert_eq!(answer(&out).0, 401, "{key:?}: {out}");
        assert!(closed);
    }
    let (out, _) = exchange(
        f.port,
        &request("/v1/completions", Some(KEY), smuggled),
        Duration::from_secs(5),
    );
    assert_eq!(
        answer(&out),
        (200, r#"{"choices": [{"text": "whole answer"}]}"#.into())
    );
    let seen = recorded(&mut log);
    assert!(seen["body"].get("kv_transfer_params").is_none(), "{seen}");
    assert_eq!(seen["body"]["max_tokens"], 8);
    let (out, _) = exchange(
        f.port,
        &request("/v1/embeddings", Some(KEY), "{}"),
        Duration::from_secs(5),
    );
    assert!(matches!(answer(&out).0, 404 | 405), "{out}");
    for body in ["[1, 2]", "not json"] {
        let (out, _) = exchange(
            f.port,
            &request("/v1/completions", Some(KEY), body),
            Duration::from_secs(5),
        );
        assert_eq!(answer(&out).0, 400, "{out}");
    }
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", f.proc.child.id())).unwrap_or_default();
    assert!(
        !String::from_utf8_lossy(&cmdline).contains(KEY),
        "the key is on the command line"
    );
}

/// A hung upstream answers 504 within the read timeout; a truncated answer is a 502, or,
/// once a stream has begun, an aborted connection without the final chunk: never a
/// complete 200. An upstream that is not there is a 502.
#[cfg_attr(
    dic_no_aiohttp,
    ignore = "needs a Python with aiohttp (tests/pd_router.rs's header)"
)]
#[test]
fn a_hung_or_truncated_upstream_fails_instead_of_answering_200() {
    let Some(t) = tools() else {
        return;
    };
    let stream = r#"{"model":"chat","prompt":"hi","stream":true}"#;
    for (role, body, want) in [
        ("hang", PROMPT, "504"),
        ("truncated", PROMPT, "502"),
        ("truncated-stream", stream, "aborted"),
    ] {
        let (_u, up_port, _log) = fake(role);
        let f = front(&t, up_port, &[], &[]);
        let start = Instant::now();
        let (out, closed) = exchange(
            f.port,
            &request("/v1/completions", Some(KEY), body),
            Duration::from_secs(8),
        );
        assert!(closed, "{role}: still open");
        assert!(
            start.elapsed() < Duration::from_secs(6),
            "{role}: {:?}",
            start.elapsed()
        );
        if want == "aborted" {
            assert!(out.starts_with("HTTP/1.1 200"), "{role}: {out}");
            assert!(
                !out.ends_with("0\r\n\r\n"),
                "{role}: a complete stream: {out:?}"
            );
        } else {
            assert!(
                out.starts_with(&format!("HTTP/1.1 {want}")),
                "{role}: {out}"
            );
        }
    }
    let f = front(&t, free_port(), &[], &[]);
    let (out, _) = exchange(
        f.port,
        &request("/v1/completions", Some(KEY), PROMPT),
        Duration::from_secs(5),
    );
    assert!(out.starts_with("HTTP/1.1 502"), "{out}");
}

/// The prefill guard: a prefill answer with the engine's `kv_transfer_params` passes, one
/// without becomes a 502, errors and the servers' health pass through as they are.
#[cfg_attr(
    dic_no_aiohttp,
    ignore = "needs a Python with aiohttp (tests/pd_router.rs's header)"
)]
#[test]
fn the_prefill_guard_fails_a_prefill_without_kv_transfer_params() {
    let Some(t) = tools() else {
        return;
    };
    let (_good, good, _good_log) = fake("prefill");
    let (_none, none, _none_log) = fake("prefill-none");
    let (_bad, bad, _bad_log) = fake("failing");
    let f = front(&t, free_port(), &[good, none, bad], &[]);
    let post = |i: usize| {
        let (out, _) = exchange(
            f.guard,
            &request(&format!("/prefill/{i}/v1/completions"), Some(KEY), PROMPT),
            Duration::from_secs(5),
        );
        answer(&out)
    };
    let (status, body) = post(0);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("engine-7"), "{body}");
    let (status, body) = post(1);
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("no kv_transfer_params"), "{body}");
    assert_eq!(
        post(2),
        (400, r#"{"error": {"message": "prompt too long"}}"#.into())
    );
    assert_eq!(post(3).0, 404);
    let (out, _) = exchange(
        f.guard,
        b"GET /prefill/0/health HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n",
        Duration::from_secs(5),
    );
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
}

/// The whole router as the targets run it, vllm-router 0.1.17 behind the front: both legs
/// as NIXL expects (one token and `do_remote_decode` for prefill; the client's request
/// with the prefill engine's `kv_transfer_params` for decode; the engines' key on both),
/// streamed answers in order; a client's own `kv_transfer_params` never reach decode,
/// whether or not prefill returns its own; a prefill without them fails the request.
#[cfg_attr(
    dic_no_vllm_router,
    ignore = "needs vllm-router and a Python with aiohttp (tests/pd_router.rs's header)"
)]
#[test]
fn vllm_router_behind_the_front_runs_both_legs_and_refuses_smuggling() {
    let Some(t) = tools() else {
        return;
    };
    if t.vllm_router.is_none() {
        absent("vllm-router");
        return;
    }
    let (_p, prefill_port, mut prefill_log) = fake("prefill");
    let (_n, none_port, mut none_log) = fake("prefill-none");
    let (decode, decode_port, mut decode_log) = fake("decode");
    let p = ports(free_port());
    let f = front_on(&t, p, &[prefill_port], &[]);
    let _r = vllm_router(&t, p, 1, &[decode_port]);
    let request_body = serde_json::json!({
        "model": "chat",
        "prompt": "hello",
        "max_tokens": 64,
        "stream": true,
        "kv_transfer_params": {"do_remote_prefill": true, "remote_host": "attacker.example",
            "remote_port": 5600, "remote_engine_id": "evil", "remote_block_ids": [1]},
    });
    let (out, _) = exchange(
        f.port,
        &request("/v1/completions", Some(KEY), &request_body.to_string()),
        Duration::from_secs(10),
    );
    let (status, body) = answer(&out);
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        body,
        "data: {\"token\": 0}\n\ndata: {\"token\": 1}\n\ndata: {\"token\": 2}\n\ndata: [DONE]\n\n"
    );
    let first = recorded(&mut prefill_log);
    assert_eq!(first["authorization"], format!("Bearer {KEY}"));
    let b = &first["body"];
    assert_eq!(b["max_tokens"], 1);
    assert_eq!(b["stream"], false);
    assert_eq!(b["kv_transfer_params"]["do_remote_decode"], true);
    assert!(b["kv_transfer_params"]["remote_host"].is_null(), "{b}");
    let second = recorded(&mut decode_log);
    assert_eq!(second["authorization"], format!("Bearer {KEY}"));
    let b = &second["body"];
    assert_eq!(b["max_tokens"], 64);
    assert_eq!(b["kv_transfer_params"]["remote_engine_id"], "engine-7");
    assert_eq!(b["kv_transfer_params"]["remote_host"], "10.1.2.3");

    // A prefill that returns no kv_transfer_params: vllm-router alone would pass the
    // client's copy to decode; behind the front the request fails and decode sees nothing.
    let p2 = ports(free_port());
    let f2 = front_on(&t, p2, &[none_port], &[]);
    let _r2 = vllm_router(&t, p2, 1, &[decode_port]);
    let (out, _) = exchange(
        f2.port,
        &request("/v1/completions", Some(KEY), &request_body.to_string()),
        Duration::from_secs(10),
    );
    let (status, _) = answer(&out);
    assert!(status >= 500, "{out}");
    assert!(recorded(&mut none_log)["body"]["kv_transfer_params"]["remote_host"].is_null());
    drop(decode);
    let mut rest = String::new();
    decode_log.read_to_string(&mut rest).unwrap();
    assert_eq!(
        rest, "",
        "decode ran after a prefill without kv_transfer_params"
    );
}

/// A process's peak resident memory (VmHWM), in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kib| kib / 1024.0)
        .unwrap_or(f64::NAN)
}

/// A process's CPU time so far (user + system), in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// One client: `n` requests on one kept-alive connection; each request's latency, or why
/// it failed.
fn client(port: u16, n: usize, start: &std::sync::Barrier) -> Vec<Result<Duration, String>> {
    let body = PROMPT;
    let req = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    start.wait();
    let mut out = Vec::new();
    let Ok(s) = TcpStream::connect(("127.0.0.1", port)) else {
        return vec![Err("connect".into()); n];
    };
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut writer = s;
    for _ in 0..n {
        let t0 = Instant::now();
        let one = (|| -> Result<(), String> {
            writer
                .write_all(req.as_bytes())
                .map_err(|e| e.to_string())?;
            let mut status = String::new();
            reader.read_line(&mut status).map_err(|e| e.to_string())?;
            let mut length = 0usize;
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).map_err(|e| e.to_string())?;
                if h == "\r\n" || h.is_empty() {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().map_err(|_| "bad length".to_string())?;
                }
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).map_err(|e| e.to_string())?;
            if !status.contains(" 200 ") || !body.starts_with(b"{\"choices\"") {
                return Err(status.trim().to_string());
            }
            Ok(())
        })();
        out.push(one.map(|()| t0.elapsed()));
        if out.last().is_some_and(Result::is_err) {
            // The connection is in an unknown state: count the rest as failed.
            out.extend((out.len()..n).map(|_| Err("after a failure".to_string())));
            break;
        }
    }
    out
}

/// Load test (bounded: 500 clients × 4 requests, loopback only, about 10 s on two busy
/// cores): 500 concurrent clients through the front and vllm-router to two prefill and two
/// decode stand-ins. Every request must succeed; prints requests/s, p50/p99 latency and
/// both router processes' peak RSS (the numbers in the router's docs come from here).
#[cfg_attr(
    dic_no_vllm_router,
    ignore = "needs vllm-router and a Python with aiohttp (tests/pd_router.rs's header)"
)]
#[test]
fn five_hundred_concurrent_clients_through_the_router() {
    let Some(t) = tools() else {
        return;
    };
    if t.vllm_router.is_none() {
        absent("vllm-router");
        return;
    }
    const CLIENTS: usize = 500;
    const EACH: usize = 4;
    let quiet = ["quiet"];
    let (_p1, p1, _l1) = fake_with("prefill", &quiet);
    let (_p2, p2, _l2) = fake_with("prefill", &quiet);
    let (_d1, d1, _l3) = fake_with("decode", &quiet);
    let (_d2, d2, _l4) = fake_with("decode", &quiet);
    let p = ports(free_port());
    // The deployed timeouts (the other tests shorten them to see a hang in seconds).
    let f = front_on(
        &t,
        p,
        &[p1, p2],
        &["--read-timeout", "600", "--client-timeout", "30"],
    );
    let r = vllm_router(&t, p, 2, &[d1, d2]);
    let start = std::sync::Arc::new(std::sync::Barrier::new(CLIENTS + 1));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let start = start.clone();
            let port = f.port;
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || client(port, EACH, &start))
                .unwrap()
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    let results: Vec<Result<Duration, String>> = threads
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let wall = t0.elapsed();
    let mut latencies: Vec<Duration> = results.iter().filter_map(|r| r.clone().ok()).collect();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    latencies.sort();
    let pct = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    eprintln!(
        "router load: {CLIENTS} clients × {EACH}: {} ok, {} failed in {:.2} s = {:.0} req/s; p50 {:.0} ms, p99 {:.0} ms; peak RSS front {:.1} MiB, vllm-router {:.1} MiB; CPU front {:.1} s, vllm-router {:.1} s",
        latencies.len(),
        failures.len(),
        wall.as_secs_f64(),
        latencies.len() as f64 / wall.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        peak_rss_mib(f.proc.child.id()),
        peak_rss_mib(r.child.id()),
        cpu_seconds(f.proc.child.id()),
        cpu_seconds(r.child.id()),
    );
    assert!(
        failures.is_empty(),
        "{} failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}
