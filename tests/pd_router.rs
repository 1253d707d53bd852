//! dic's prefill/decode router (`vllm/pd_router.py`, the same text as the ConfigMap) run
//! for real against two stand-in vLLM servers (`tests/data/fake_vllm.py`): the prefill leg
//! carries NIXL's `do_remote_decode` with one token and no streaming, the decode leg the
//! client's own request with the prefill engine's `kv_transfer_params`, both legs the
//! client's key and one request id; streamed answers pass through in order, errors of the
//! prefill leg reach the client. Needs `python3` (standard library only); under `CI=true`
//! its absence fails.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failure

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdout, Command, Stdio};

struct Proc {
    child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python() -> Option<&'static str> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some("python3");
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("python3 is absent under CI=true: the router test cannot run");
    }
    eprintln!("SKIPPED: python3 is absent; dic's P/D router was not exercised");
    None
}

/// A stand-in server of `role`, its port, and the reader of the requests it records.
fn fake(py: &str, role: &str) -> (Proc, u16, BufReader<ChildStdout>) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fake_vllm.py");
    let mut child = Command::new(py)
        .args([script, role])
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

fn router(py: &str, prefill: u16, decode: u16) -> (Proc, u16) {
    let dir = std::env::temp_dir().join(format!("dic-pd-router-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("pd_router.py");
    std::fs::write(&script, dic_targets::vllm::ROUTER).unwrap();
    let mut child = Command::new(py)
        .arg(&script)
        .args(["--host", "127.0.0.1", "--port", "0", "--prefill"])
        .arg(format!("http://127.0.0.1:{prefill}"))
        .arg("--decode")
        .arg(format!("http://127.0.0.1:{decode}"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("router did not start: {line}"));
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in err.lines() {});
    (Proc { child }, port)
}

/// POSTs `body` to the router; the status line and the body (chunks joined).
fn post(port: u16, path: &str, body: &Value) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let text = body.to_string();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: router\r\nAuthorization: Bearer k-123\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, rest) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.lines().next().unwrap().to_string();
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

#[test]
fn the_router_runs_both_legs_as_nixl_expects() {
    let Some(py) = python() else {
        return;
    };
    let (_p, prefill_port, mut prefill_log) = fake(py, "prefill");
    let (_d, decode_port, mut decode_log) = fake(py, "decode");
    let (_r, port) = router(py, prefill_port, decode_port);
    let request = serde_json::json!({
        "model": "chat",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 64,
        "stream": true,
        "stream_options": {"include_usage": true},
        "min_tokens": 4,
    });
    let (status, body) = post(port, "/v1/chat/completions", &request);
    assert!(status.contains(" 200 "), "{status}");
    // The decode engine's events, in order, nothing added.
    assert_eq!(
        body,
        "data: {\"token\": 0}\n\ndata: {\"token\": 1}\n\ndata: {\"token\": 2}\n\ndata: [DONE]\n\n"
    );
    let first = recorded(&mut prefill_log);
    assert_eq!(first["path"], "/v1/chat/completions");
    assert_eq!(first["authorization"], "Bearer k-123");
    let b = &first["body"];
    assert_eq!(b["max_tokens"], 1);
    assert_eq!(b["stream"], false);
    assert_eq!(b["kv_transfer_params"]["do_remote_decode"], true);
    assert_eq!(b["kv_transfer_params"]["do_remote_prefill"], false);
    assert!(b.get("stream_options").is_none() && b.get("min_tokens").is_none());
    assert_eq!(b["messages"], request["messages"]);
    let second = recorded(&mut decode_log);
    assert_eq!(second["authorization"], "Bearer k-123");
    assert_eq!(second["request_id"], first["request_id"]);
    let b = &second["body"];
    assert_eq!(b["max_tokens"], 64);
    assert_eq!(b["stream"], true);
    assert_eq!(b["min_tokens"], 4);
    assert_eq!(b["kv_transfer_params"]["remote_engine_id"], "engine-7");
    assert_eq!(
        b["kv_transfer_params"]["remote_block_ids"],
        serde_json::json!([3, 4, 5])
    );
    assert_eq!(b["kv_transfer_params"]["remote_host"], "10.1.2.3");

    // Without streaming the decode answer comes back whole.
    let (status, body) = post(
        port,
        "/v1/completions",
        &serde_json::json!({"model": "chat", "prompt": "hi", "max_tokens": 8}),
    );
    assert!(status.contains(" 200 "), "{status}");
    assert_eq!(body, "{\"choices\": [{\"text\": \"whole answer\"}]}");
    assert_eq!(recorded(&mut prefill_log)["path"], "/v1/completions");
    assert_eq!(recorded(&mut decode_log)["body"]["max_tokens"], 8);

    // Anything but the two completion routes is refused.
    let (status, _) = post(port, "/v1/embeddings", &serde_json::json!({}));
    assert!(status.contains(" 404 "), "{status}");
}

#[test]
fn a_failing_prefill_reaches_the_client_and_decode_is_not_called() {
    let Some(py) = python() else {
        return;
    };
    let (_p, prefill_port, mut prefill_log) = fake(py, "failing");
    let (decode, decode_port, mut decode_log) = fake(py, "decode");
    let (_r, port) = router(py, prefill_port, decode_port);
    let (status, body) = post(
        port,
        "/v1/completions",
        &serde_json::json!({"model": "chat", "prompt": "x", "max_tokens": 8}),
    );
    assert!(status.contains(" 400 "), "{status}");
    assert!(body.contains("prompt too long"), "{body}");
    assert_eq!(recorded(&mut prefill_log)["role"], "failing");
    // A router pointed at a port nothing listens on answers 502, not a hang.
    let (_r2, port2) = router(py, 1, decode_port);
    let (status, _) = post(
        port2,
        "/v1/completions",
        &serde_json::json!({"model": "chat", "prompt": "x"}),
    );
    assert!(status.contains(" 502 "), "{status}");
    // The decode server never saw a request.
    drop(decode);
    let mut rest = String::new();
    decode_log.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "", "the decode leg ran after a failed prefill");
}
