//! `dic lsp` driven over stdio by scripted sessions (initialize, didOpen, didChange,
//! hover, definition, references, completion, symbols, formatting, code actions,
//! shutdown), the responses snapshotted with insta. Absolute paths become `$ROOT`.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: i64,
    /// Notifications received while waiting for responses.
    notifications: Vec<Value>,
    root: String,
}

impl Client {
    /// A client like the VS Code extension: it serves the read-only documents itself.
    fn start(utf8: bool) -> Client {
        Client::start_as(utf8, json!({"readOnlyDocuments": "virtual"}), None)
    }

    /// A client with these initialization options, the server's cache under `cache`
    /// (`XDG_CACHE_HOME`) when given.
    fn start_as(utf8: bool, options: Value, cache: Option<&std::path::Path>) -> Client {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dic"));
        if let Some(dir) = cache {
            cmd.env("XDG_CACHE_HOME", dir);
        }
        let mut child = cmd
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let root = std::env::current_dir()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let mut c = Client {
            child,
            stdin,
            stdout,
            next_id: 1,
            notifications: Vec::new(),
            root,
        };
        let encodings = if utf8 {
            json!(["utf-8", "utf-16"])
        } else {
            json!(["utf-16"])
        };
        let init = c.request(
            "initialize",
            json!({"processId": null, "rootUri": null, "capabilities": {"general": {"positionEncodings": encodings}}, "initializationOptions": options}),
        );
        assert_eq!(
            init["result"]["capabilities"]["positionEncoding"],
            if utf8 { "utf-8" } else { "utf-16" }
        );
        c.notify("initialized", json!({}));
        c
    }

    fn send(&mut self, v: Value) {
        let body = v.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn read(&mut self) -> Value {
        self.try_read().expect("server closed stdout")
    }

    /// The next message, or None when the server closed its stdout.
    fn try_read(&mut self) -> Option<Value> {
        let mut len = 0;
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).unwrap() == 0 {
                return None;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("Content-Length: ") {
                len = v.parse().unwrap();
            }
        }
        let mut buf = vec![0; len];
        self.stdout.read_exact(&mut buf).unwrap();
        Some(serde_json::from_slice(&buf).unwrap())
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let m = self.read();
            if m.get("id") == Some(&json!(id)) {
                return m;
            }
            self.notifications.push(m);
        }
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Wait for the diagnostics of `uri` at `version`: the server publishes twice, first
    /// without the planner's advice (fast), then with it; the first must be a subset.
    fn diagnostics(&mut self, uri: &str, version: i64) -> Value {
        let mut got = Vec::new();
        while got.len() < 2 {
            if let Some(i) = self.notifications.iter().position(|n| {
                n["method"] == "textDocument/publishDiagnostics"
                    && n["params"]["uri"] == uri
                    && n["params"]["version"] == version
            }) {
                got.push(self.notifications.remove(i)["params"]["diagnostics"].clone());
                continue;
            }
            let m = self.read();
            self.notifications.push(m);
        }
        let (fast, full) = (got[0].as_array().unwrap(), got[1].as_array().unwrap());
        for d in fast {
            assert!(
                full.contains(d),
                "{d} missing from the complete diagnostics"
            );
        }
        got[1].clone()
    }

    fn uri(&self, rel: &str) -> String {
        format!("file://{}/{rel}", self.root)
    }

    fn open(&mut self, rel: &str, text: &str) -> String {
        let uri = self.uri(rel);
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "dist", "version": 1, "text": text}}),
        );
        uri
    }

    fn at(&mut self, method: &str, uri: &str, pos: (u32, u32), extra: Value) -> Value {
        let mut params =
            json!({"textDocument": {"uri": uri}, "position": {"line": pos.0, "character": pos.1}});
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        self.request(method, params)["result"].clone()
    }

    fn shutdown(mut self) {
        let r = self.request("shutdown", Value::Null);
        assert_eq!(r["result"], Value::Null);
        self.notify("exit", Value::Null);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }

    /// `$ROOT` for the working directory, so snapshots do not depend on the checkout.
    fn scrub(&self, v: &Value) -> Value {
        serde_json::from_str(&v.to_string().replace(&self.root, "$ROOT")).unwrap()
    }
}

/// (line, UTF-16 column) of the `nth` occurrence of `needle` in `text`, plus `delta` chars.
fn pos(text: &str, needle: &str, nth: usize, delta: usize) -> (u32, u32) {
    let mut from = 0;
    let mut at = 0;
    for _ in 0..=nth {
        at = from
            + text[from..]
                .find(needle)
                .unwrap_or_else(|| panic!("`{needle}` not found"));
        from = at + needle.len();
    }
    let line_start = text[..at].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line = text[..at].matches('\n').count() as u32;
    let prefix: String = text[line_start..at]
        .chars()
        .chain(text[at..].chars().take(delta))
        .collect();
    (line, prefix.encode_utf16().count() as u32)
}

/// The production example's deployment in the layout most people try first
/// (`examples/advice.dist`), so the session sees the planner's advice and its quick fix.
#[test]
fn a_session_on_the_production_example() {
    let text = std::fs::read_to_string("examples/advice.dist").unwrap();
    let mut c = Client::start(false);
    let uri = c.open("examples/advice.dist", &text);
    let mut out = serde_json::Map::new();
    let diags = c.diagnostics(&uri, 1);
    out.insert("diagnostics".into(), diags.clone());
    out.insert(
        "hover model reference".into(),
        c.at(
            "textDocument/hover",
            &uri,
            pos(&text, "model = llama", 0, 9),
            json!({}),
        ),
    );
    out.insert(
        "hover deployment".into(),
        c.at(
            "textDocument/hover",
            &uri,
            pos(&text, "deploy chat", 0, 8),
            json!({}),
        ),
    );
    out.insert(
        "hover field key".into(),
        c.at(
            "textDocument/hover",
            &uri,
            pos(&text, "gpu_memory_utilization", 0, 2),
            json!({}),
        ),
    );
    out.insert(
        "definition of an imported stdlib instance".into(),
        c.at(
            "textDocument/definition",
            &uri,
            pos(&text, "2 × p5_48xlarge", 0, 5),
            json!({}),
        ),
    );
    out.insert(
        "references of llama".into(),
        c.at(
            "textDocument/references",
            &uri,
            pos(&text, "model llama", 0, 7),
            json!({"context": {"includeDeclaration": true}}),
        ),
    );
    out.insert(
        "symbols".into(),
        c.request(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": uri}}),
        )["result"]
            .clone(),
    );
    out.insert(
        "formatting (already formatted)".into(),
        c.request(
            "textDocument/formatting",
            json!({"textDocument": {"uri": uri}, "options": {"tabSize": 2, "insertSpaces": true}}),
        )["result"]
            .clone(),
    );
    // The planner's cheaper layout, as a quick fix on the layout.
    let layout = pos(&text, "tp 8 × pp 1 × dp 2", 0, 0);
    out.insert("code actions on the layout".into(), c.request("textDocument/codeAction", json!({"textDocument": {"uri": uri}, "range": {"start": {"line": layout.0, "character": layout.1}, "end": {"line": layout.0, "character": layout.1}}, "context": {"diagnostics": []}}))["result"].clone());
    let stdlib = c.request(
        "dic/virtualDocument",
        json!({"uri": "dic-stdlib:/std/instances/aws.dist"}),
    )["result"]
        .clone();
    assert!(stdlib.as_str().unwrap().contains("p5_48xlarge"));
    let explain = c.request(
        "dic/virtualDocument",
        json!({"uri": "dic-explain:/A0701.md"}),
    )["result"]
        .clone();
    assert!(explain.as_str().unwrap().contains("A0701"));
    let v = c.scrub(&Value::Object(out));
    c.shutdown();
    // The hover's and the advice's predicted figures are the forecast's (a refit moves
    // them; tests/fixtures/forecast.md checks them).
    let v: Value = serde_json::from_str(&common::redact_forecast_figures(
        &serde_json::to_string(&v).unwrap(),
    ))
    .unwrap();
    insta::assert_json_snapshot!(v);
}

/// An editor without the VS Code extension's virtual documents (Neovim, Helix, Emacs …):
/// go-to-definition into the stdlib and the diagnostics' code links are files it can open,
/// written read-only under the user's cache, whose stdlib files the server still treats
/// as the stdlib when opened.
#[test]
fn other_editors_get_the_stdlib_and_explain_pages_as_files() {
    let cache = std::env::temp_dir().join(format!("dic-lsp-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let text = std::fs::read_to_string("examples/advice.dist").unwrap();
    let mut c = Client::start_as(false, Value::Null, Some(&cache));
    let uri = c.open("examples/advice.dist", &text);
    let diags = c.diagnostics(&uri, 1);
    let d = &diags.as_array().unwrap()[0];
    let href = d["codeDescription"]["href"].as_str().unwrap();
    let page = href.strip_prefix("file://").unwrap();
    assert!(page.starts_with(cache.to_str().unwrap()), "{href}");
    let code = d["code"].as_str().unwrap();
    assert!(
        std::fs::read_to_string(page).unwrap().contains(code),
        "{page}"
    );
    // Go to definition of the model's stdlib base.
    let at = pos(&text, "llama_3_1_70b {", 0, 2);
    let def = c.at("textDocument/definition", &uri, at, json!({}));
    let target = def["uri"].as_str().unwrap();
    let file = target.strip_prefix("file://").unwrap();
    assert!(file.ends_with("/std/models.dist"), "{target}");
    let stdlib = std::fs::read_to_string(file).unwrap();
    assert!(stdlib.contains("model llama_3_1_70b"));
    assert!(std::fs::metadata(file).unwrap().permissions().readonly());
    // Opened in the editor, it is the stdlib: no diagnostics of its own, and hover
    // inside it works.
    c.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": target, "languageId": "dist", "version": 1, "text": stdlib}}),
    );
    let hover = c.at(
        "textDocument/hover",
        target,
        pos(&stdlib, "model llama_3_1_70b", 0, 8),
        json!({}),
    );
    assert!(hover.to_string().contains("llama_3_1_70b"), "{hover}");
    let stdlib_published = c.notifications.iter().any(|n| n["params"]["uri"] == target);
    assert!(!stdlib_published, "the stdlib got diagnostics");
    c.shutdown();
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_session_with_edits_and_completion() {
    let mut c = Client::start(true);
    let text = "import std.models.llama_3_1_8b\nimport std.gpus.l4\n\nmodel m = llama_3_1_8b { weights = fp8 }\n";
    let uri = c.open("examples/scratch.dist", text);
    let mut out = serde_json::Map::new();
    out.insert("diagnostics v1".into(), c.diagnostics(&uri, 1));
    // Half-typed: a deploy block with a misspelled model name.
    let v2 = format!("{text}\ndeploy d {{\n  model = mm\n  \n}}\n");
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": v2}]}),
    );
    out.insert("diagnostics v2".into(), c.diagnostics(&uri, 2));
    let fix_at = pos(&v2, "mm", 0, 0);
    out.insert("did-you-mean fix".into(), c.request("textDocument/codeAction", json!({"textDocument": {"uri": uri}, "range": {"start": {"line": fix_at.0, "character": fix_at.1}, "end": {"line": fix_at.0, "character": fix_at.1 + 2}}, "context": {"diagnostics": []}}))["result"].clone());
    let labels = |r: Value| -> Value {
        Value::Array(
            r.as_array()
                .unwrap_or(&Vec::new())
                .iter()
                .map(|i| json!([i["label"], i["detail"]]))
                .collect(),
        )
    };
    let empty_line = pos(&v2, "  \n}", 0, 2);
    out.insert(
        "fields in deploy".into(),
        labels(c.at("textDocument/completion", &uri, empty_line, json!({}))),
    );
    let v3 =
        format!("{text}\ndeploy d {{\n  model = m\n  cluster = \n}}\ncluster c {{ nodes = 1 × \n");
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"text": v3}]}),
    );
    out.insert(
        "after cluster =".into(),
        labels(c.at(
            "textDocument/completion",
            &uri,
            pos(&v3, "cluster = \n", 0, 10),
            json!({}),
        )),
    );
    let node_names = c.at(
        "textDocument/completion",
        &uri,
        pos(&v3, "1 × \n", 0, 4),
        json!({}),
    );
    let p5 = node_names
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["label"] == "p5_48xlarge")
        .cloned();
    out.insert(
        "a node from the stdlib, with its import".into(),
        p5.unwrap_or(Value::Null),
    );
    let v4 = "gpu x {\n  memory = 80 \n}\n";
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 4}, "contentChanges": [{"text": v4}]}),
    );
    out.insert(
        "units after a number".into(),
        labels(c.at(
            "textDocument/completion",
            &uri,
            pos(v4, "80 \n", 0, 3),
            json!({}),
        )),
    );
    out.insert(
        "top level".into(),
        labels(c.at("textDocument/completion", &uri, (3, 0), json!({}))),
    );
    let v = c.scrub(&Value::Object(out));
    c.shutdown();
    insta::assert_json_snapshot!(v);
}

/// Open `text` in a UTF-8 or UTF-16 session: the E0304 (wrong unit) diagnostic's range
/// and the hover range over the GPU's name `g` on line 1.
fn units_error_and_hover(text: &str, utf8: bool) -> (Value, Value) {
    let mut c = Client::start(utf8);
    let uri = c.open("examples/unicode.dist", text);
    let d = c.diagnostics(&uri, 1);
    let units = d
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["code"] == "E0304")
        .cloned()
        .unwrap();
    let hover = c.at("textDocument/hover", &uri, (1, 4), json!({}));
    c.shutdown();
    (units["range"].clone(), hover["range"].clone())
}

/// The same document in UTF-8 and UTF-16 sessions: CJK and emoji on the line before the
/// error, CRLF line ends. Columns of an ASCII line agree.
#[test]
fn positions_follow_the_negotiated_encoding() {
    let text = "// 日本語のコメント 🚀\r\ngpu g { memory = 80 GB/s } // 🚀 after\r\n";
    let results: Vec<Value> = [true, false]
        .into_iter()
        .map(|utf8| {
            let (range, hover) = units_error_and_hover(text, utf8);
            json!({"utf8": utf8, "range": range, "hover_range": hover})
        })
        .collect();
    assert_eq!(results[0]["range"], results[1]["range"]);
    insta::assert_json_snapshot!(results);
}

/// The error after an emoji on its line: UTF-8 counts its 4 bytes, UTF-16 its 2 units.
#[test]
fn unicode_columns_differ_between_encodings() {
    let text = "// 🚀\r\ngpu g { name = \"🚀\", memory = 80 GB/s }\r\n";
    let line = text.split("\r\n").nth(1).unwrap();
    let prefix = &line[..line.find("GB/s").unwrap()];
    let start = |utf8| {
        units_error_and_hover(text, utf8).0["start"]["character"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(start(true) as usize, prefix.len());
    assert_eq!(start(false) as usize, prefix.encode_utf16().count());
    assert_eq!(prefix.len() - prefix.encode_utf16().count(), 2);
}

/// Malformed frames from a client — not JSON, not UTF-8, nested 10,000 deep, a JSON value
/// that is no message, an object id, a bad Content-Length, a 40 MB frame — each get a
/// JSON-RPC error reply and the server keeps serving; an import of `/dev/stdin` (its own
/// protocol stream) is refused, not read.
#[test]
fn malformed_messages_get_errors_and_the_server_keeps_serving() {
    let mut c = Client::start(true);
    let raw = |c: &mut Client, bytes: &[u8]| {
        c.stdin.write_all(bytes).unwrap();
        c.stdin.flush().unwrap();
    };
    let frame = |body: &[u8]| {
        let mut f = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        f.extend_from_slice(body);
        f
    };
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let cases: Vec<(Vec<u8>, i64, Value)> = vec![
        (frame(b"{not json"), -32700, Value::Null),
        (frame(b"\xff\xfe{}"), -32700, Value::Null),
        (frame(deep.as_bytes()), -32700, Value::Null),
        (frame(b"[1, 2]"), -32600, Value::Null),
        (
            frame(br#"{"jsonrpc":"2.0","id":{"a":1},"method":"textDocument/hover"}"#),
            -32600,
            Value::Null,
        ),
        (
            frame(br#"{"jsonrpc":"2.0","id":"x","method":5}"#),
            -32600,
            json!("x"),
        ),
        (
            b"Content-Length: lots\r\n\r\n".to_vec(),
            -32700,
            Value::Null,
        ),
        (
            {
                let mut f = b"Content-Length: 40000000\r\n\r\n".to_vec();
                f.extend(std::iter::repeat_n(b' ', 40_000_000));
                f
            },
            -32600,
            Value::Null,
        ),
    ];
    for (bytes, code, id) in cases {
        raw(&mut c, &bytes);
        let reply = c.read();
        assert_eq!(reply["error"]["code"], json!(code), "{reply}");
        assert_eq!(reply["id"], id, "{reply}");
    }
    // still serving: a document that imports the server's own stdin
    let uri = c.open("stdin.dist", "import \"/dev/stdin\"\n");
    let diags = c.diagnostics(&uri, 1);
    assert!(diags.to_string().contains("not a regular file"), "{diags}");
    let hover = c.at("textDocument/hover", &uri, (0, 2), json!({}));
    assert!(hover.is_null() || hover.is_object());
    c.shutdown();
}

/// An editor buffer over the 8 MiB source limit is not analysed: one E0107.
#[test]
fn a_document_over_the_size_limit_is_refused() {
    let mut c = Client::start(true);
    let text = format!("// {}\n", "x".repeat(9 << 20));
    let uri = c.open("huge.dist", &text);
    let diags = c.diagnostics(&uri, 1);
    let codes: Vec<&Value> = diags
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["code"])
        .collect();
    assert_eq!(codes, [&json!("E0107")], "{diags}");
    c.shutdown();
}

/// A header block that makes no sense must not leave the server out of step: each bad
/// frame (no Content-Length, a NUL, a length longer or shorter than the body, a length
/// that is no number, two lengths, no blank line, bytes before the header, a huge length
/// over a short body) is followed by ten good hover requests, and all ten are answered.
#[test]
fn after_a_bad_frame_the_server_resynchronises_on_the_next_content_length() {
    let uri = format!(
        "file://{}/resync.dist",
        std::env::current_dir().unwrap().display()
    );
    let hover = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/hover", "params": {
            "textDocument": {"uri": uri},
            "position": {"line": 0, "character": 20}}})
        .to_string()
    };
    let body = hover(1000);
    let n = body.len();
    let bad_frames: Vec<(&str, String)> = vec![
        (
            "no Content-Length",
            format!("Content-Type: application/vscode-jsonrpc\r\n\r\n{body}"),
        ),
        (
            "a NUL in the length",
            format!("Content-Length: {n}\0\r\n\r\n{body}"),
        ),
        (
            "a NUL header line",
            format!("Content-Length: {n}\r\n\0\r\n\r\n{body}"),
        ),
        (
            "a length longer than the body",
            format!("Content-Length: {}\r\n\r\n{body}", n + 40),
        ),
        (
            "a length shorter than the body",
            format!("Content-Length: {}\r\n\r\n{body}", n - 5),
        ),
        (
            "a length that is no number",
            format!("Content-Length: 12abc\r\n\r\n{body}"),
        ),
        (
            "two lengths",
            format!(
                "Content-Length: {n}\r\nContent-Length: {}\r\n\r\n{body}",
                n + 3
            ),
        ),
        ("no blank line", format!("Content-Length: {n}\r\n{body}")),
        ("bytes before the header", format!("hello{body}")),
        (
            "a huge length over a short body",
            format!("Content-Length: 999999999\r\n\r\n{body}"),
        ),
    ];
    let mut out_of_step = Vec::new();
    for (what, bad) in bad_frames {
        let mut c = Client::start(true);
        c.open("resync.dist", "import std.models.llama_3_1_70b\n");
        // A server that stays out of step never answers: end it after 5 s so the case
        // counts as failed instead of hanging.
        let pid = c.child.id();
        let (done, watchdog) = std::sync::mpsc::channel::<()>();
        let guard = std::thread::spawn(move || {
            let timeout = std::time::Duration::from_secs(5);
            if watchdog.recv_timeout(timeout).is_err() {
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
        });
        c.stdin.write_all(bad.as_bytes()).unwrap();
        for id in 101..=110 {
            c.stdin.write_all(frame(&hover(id)).as_bytes()).unwrap();
        }
        c.stdin.flush().unwrap();
        let mut answered = std::collections::BTreeSet::new();
        while answered.len() < 10 {
            let Some(m) = c.try_read() else { break };
            match m["id"].as_i64() {
                Some(id @ 101..=110) => {
                    assert!(m.get("result").is_some(), "{what}: {m}");
                    answered.insert(id);
                }
                // the bad frame's own error reply (its id, or null), or a notification
                _ => assert!(
                    m.get("error").is_some() || m.get("method").is_some(),
                    "{what}: {m}"
                ),
            }
        }
        let _ = done.send(());
        guard.join().unwrap();
        if answered.len() == 10 {
            c.shutdown();
        } else {
            out_of_step.push(format!("{what}: {} of 10 answered", answered.len()));
            let _ = c.child.kill();
            let _ = c.child.wait();
        }
    }
    assert!(out_of_step.is_empty(), "{out_of_step:#?}");
}

fn frame(body: &str) -> String {
    format!("Content-Length: {}\r\n\r\n{body}", body.len())
}
