//! `dic lsp` as an editor sees it: a real server process over stdio, a 2,000-line
//! document (61 deployments) opened under a new name each time, and the time from
//! sending didOpen to receiving its first publishDiagnostics (goal: under 40 ms) and its
//! complete one with the planner's advice (goal: under 100 ms). Framing, JSON and the
//! pipes are all in the measurement.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Client {
    fn start() -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dic"))
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dic lsp starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut c = Client {
            child,
            stdin,
            stdout,
        };
        c.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}));
        while c.recv().get("id") != Some(&json!(1)) {}
        c.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
        c
    }

    fn send(&mut self, v: Value) {
        let body = v.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn recv(&mut self) -> Value {
        let mut len = 0;
        loop {
            let mut line = String::new();
            self.stdout.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(n) = line.strip_prefix("Content-Length: ") {
                len = n.parse().unwrap();
            }
        }
        let mut body = vec![0; len];
        self.stdout.read_exact(&mut body).unwrap();
        serde_json::from_slice(&body).unwrap()
    }

    /// Opens `text` as `uri`; the times to its first and its last (second) publish.
    fn open(&mut self, uri: &str, text: &str) -> (Duration, Duration) {
        let start = Instant::now();
        self.send(
            json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
            "textDocument": {"uri": uri, "languageId": "dist", "version": 1, "text": text}}}),
        );
        let mut first = None;
        loop {
            let m = self.recv();
            if m.get("method") == Some(&json!("textDocument/publishDiagnostics"))
                && m["params"]["uri"] == json!(uri)
            {
                match first {
                    None => first = Some(start.elapsed()),
                    Some(f) => {
                        let last = start.elapsed();
                        // Closed again, so one document is open at a time (the server
                        // re-checks every open document that could import the changed one).
                        self.send(json!({"jsonrpc": "2.0", "method": "textDocument/didClose",
                            "params": {"textDocument": {"uri": uri}}}));
                        return (f, last);
                    }
                }
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bench(c: &mut Criterion) {
    let text = dic_compiler::sample::generated(2000);
    let mut client = Client::start();
    let mut n = 0;
    let (f, l) = client.open("file:///bench/warmup.dist", &text);
    eprintln!("first open: first diagnostics {f:?}, complete {l:?}");
    let mut g = c.benchmark_group("dic lsp over stdio");
    g.sample_size(20);
    g.bench_function("didOpen -> first diagnostics, 2000 lines", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                total += client.open(&format!("file:///bench/a{n}.dist"), &text).0;
            }
            total
        })
    });
    g.bench_function("didOpen -> complete diagnostics, 2000 lines", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                total += client.open(&format!("file:///bench/b{n}.dist"), &text).1;
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
