//! The server in process: stale diagnostics are dropped, closing clears diagnostics,
//! imports see unsaved text of other open documents, and — the robustness property — no
//! sequence of edits (half-typed input, random bytes of text, CJK, emoji, CRLF) and no
//! request at any position makes the server panic or answer with an internal error.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::span::ColumnEncoding;
use dic_lsp::convert::Protocol;
use dic_lsp::server::{note, request, Server};
use lsp_server::Message;
use lsp_types as lsp;
use lsp_types::notification::{DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument};
use lsp_types::request as R;
use proptest::prelude::*;
use std::str::FromStr;

fn uri(s: &str) -> lsp::Uri {
    lsp::Uri::from_str(s).unwrap()
}

fn open(server: &mut Server, u: &lsp::Uri, version: i32, text: &str) {
    server.handle(note::<DidOpenTextDocument>(
        lsp::DidOpenTextDocumentParams {
            text_document: lsp::TextDocumentItem::new(
                u.clone(),
                "dist".into(),
                version,
                text.to_string(),
            ),
        },
    ));
}

fn change(server: &mut Server, u: &lsp::Uri, version: i32, text: &str) {
    server.handle(note::<DidChangeTextDocument>(
        lsp::DidChangeTextDocumentParams {
            text_document: lsp::VersionedTextDocumentIdentifier::new(u.clone(), version),
            content_changes: vec![lsp::TextDocumentContentChangeEvent {
                range: None,
                range_length: None,
                text: text.to_string(),
            }],
        },
    ));
}

fn published(msgs: &[Message]) -> Vec<lsp::PublishDiagnosticsParams> {
    msgs.iter()
        .filter_map(|m| match m {
            Message::Notification(n) if n.method == "textDocument/publishDiagnostics" => {
                serde_json::from_value(n.params.clone()).ok()
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_result_for_a_replaced_version_is_dropped() {
    let mut s = Server::new(Protocol::new(ColumnEncoding::Utf16));
    let u = uri("file:///t/a.dist");
    open(&mut s, &u, 1, "gpu g { memory = 80 GB/s }\n");
    let stale = s.diagnose_one().expect("pending");
    assert_eq!(stale.version, 1);
    change(&mut s, &u, 2, "gpu g { memory = 80 GiB }\n");
    assert!(s.publish(stale).is_none(), "version 1 was replaced by 2");
    let out = published(&s.flush());
    assert!(!out.is_empty() && out.iter().all(|p| p.version == Some(2)));
    assert!(!out
        .last()
        .unwrap()
        .diagnostics
        .iter()
        .any(|d| d.code == Some(lsp::NumberOrString::String("E0304".into()))));
}

#[test]
fn closing_a_document_clears_its_diagnostics() {
    let mut s = Server::new(Protocol::new(ColumnEncoding::Utf16));
    let u = uri("file:///t/a.dist");
    open(&mut s, &u, 1, "gpu g { memory = 80 GB/s }\n");
    assert!(!published(&s.flush()).last().unwrap().diagnostics.is_empty());
    let out = s.handle(note::<DidCloseTextDocument>(
        lsp::DidCloseTextDocumentParams {
            text_document: lsp::TextDocumentIdentifier::new(u.clone()),
        },
    ));
    let cleared = published(&out);
    assert_eq!(cleared.len(), 1);
    assert!(cleared[0].diagnostics.is_empty());
    assert!(!s.has_pending());
}

#[test]
fn an_import_sees_the_unsaved_text_of_another_open_document() {
    let mut s = Server::new(Protocol::new(ColumnEncoding::Utf8));
    let a = uri("file:///nowhere/models.dist");
    let b = uri("file:///nowhere/main.dist");
    open(
        &mut s,
        &a,
        1,
        "import std.models.llama_3_1_8b\nmodel mine = llama_3_1_8b { weights = fp8 }\n",
    );
    open(
        &mut s,
        &b,
        1,
        "import \"./models.dist\"\nmodel other = mine { kv_cache = fp8 }\n",
    );
    let out = published(&s.flush());
    let main = out.iter().rev().find(|p| p.uri == b).unwrap();
    assert!(main.diagnostics.is_empty(), "{:?}", main.diagnostics);
    // Renaming the model in the unsaved file breaks the importer.
    change(
        &mut s,
        &a,
        2,
        "import std.models.llama_3_1_8b\nmodel theirs = llama_3_1_8b { weights = fp8 }\n",
    );
    let out = published(&s.flush());
    let main = out.iter().rev().find(|p| p.uri == b).unwrap();
    assert!(
        main.diagnostics.iter().any(|d| d.message.contains("mine")),
        "{:?}",
        main.diagnostics
    );
}

/// Pieces an editor session types: keywords, names, units, operators, half tokens.
const PIECES: &[&str] = &[
    "deploy ",
    "model ",
    "gpu ",
    "cluster ",
    "node ",
    "slo ",
    "workload ",
    "import std.",
    "import \"./x.dist\"\n",
    "{",
    "}",
    "=",
    " = ",
    "<= ",
    "×",
    " × ",
    "tp 8",
    "pp 2",
    "dp 2",
    "ep",
    "auto",
    "80 GiB",
    "3.35 TB/s",
    "GB/s",
    "k tokens",
    "llama_3_1_70b",
    "h100_sxm",
    "p5_48xlarge",
    "vllm { ",
    "max_model_len = ",
    "\n",
    "\r\n",
    "  ",
    "\"",
    "//",
    "日本",
    "🚀",
    "ttft.p95",
    "$55/h",
    ",",
    ".",
    "1e999",
    "-",
    "0",
];

#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, usize),
    Delete(usize, usize),
}

fn apply(text: &str, e: &Edit) -> String {
    let chars: Vec<char> = text.chars().collect();
    match e {
        Edit::Insert(at, piece) => {
            let at = at % (chars.len() + 1);
            let mut s: String = chars[..at].iter().collect();
            s.push_str(PIECES[piece % PIECES.len()]);
            s.extend(&chars[at..]);
            s
        }
        Edit::Delete(at, len) => {
            if chars.is_empty() {
                return String::new();
            }
            let at = at % chars.len();
            let end = (at + len % 12).min(chars.len());
            chars[..at].iter().chain(&chars[end..]).collect()
        }
    }
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<usize>()).prop_map(|(a, p)| Edit::Insert(a, p)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, l)| Edit::Delete(a, l)),
    ]
}

fn no_internal_error(msgs: &[Message]) -> Result<(), TestCaseError> {
    for m in msgs {
        if let Message::Response(r) = m {
            if let Some(e) = &r.error {
                prop_assert!(
                    e.code != lsp_server::ErrorCode::InternalError as i32,
                    "{}",
                    e.message
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn random_edit_sessions_never_crash(
        start in 0usize..3,
        edits in prop::collection::vec(edit(), 1..12),
        probes in prop::collection::vec((0u32..60, 0u32..90), 4),
        utf8 in any::<bool>(),
    ) {
        let starts = [
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/prod.dist")).unwrap(),
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/deepseek_ep.dist")).unwrap(),
            "// 日本語 🚀\r\ngpu g = h100_sxm { memory = 80 GiB }\r\n".to_string(),
        ];
        let proto = Protocol::new(if utf8 { ColumnEncoding::Utf8 } else { ColumnEncoding::Utf16 });
        let mut s = Server::new(proto);
        let u = uri("file:///fuzz/doc.dist");
        let mut text = starts[start].clone();
        open(&mut s, &u, 1, &text);
        let mut id = 0;
        for (v, e) in edits.iter().enumerate() {
            text = apply(&text, e);
            change(&mut s, &u, v as i32 + 2, &text);
            // sometimes publish, sometimes keep typing (stale results)
            if v % 3 == 0 {
                s.flush();
            }
            for &(line, character) in &probes {
                let pos = lsp::TextDocumentPositionParams::new(
                    lsp::TextDocumentIdentifier::new(u.clone()),
                    lsp::Position::new(line, character),
                );
                id += 1;
                no_internal_error(&s.handle(request::<R::HoverRequest>(id, lsp::HoverParams {
                    text_document_position_params: pos.clone(),
                    work_done_progress_params: Default::default(),
                })))?;
                id += 1;
                no_internal_error(&s.handle(request::<R::GotoDefinition>(id, lsp::GotoDefinitionParams {
                    text_document_position_params: pos.clone(),
                    work_done_progress_params: Default::default(),
                    partial_result_params: Default::default(),
                })))?;
                id += 1;
                no_internal_error(&s.handle(request::<R::Completion>(id, lsp::CompletionParams {
                    text_document_position: pos.clone(),
                    work_done_progress_params: Default::default(),
                    partial_result_params: Default::default(),
                    context: None,
                })))?;
                id += 1;
                no_internal_error(&s.handle(request::<R::References>(id, lsp::ReferenceParams {
                    text_document_position: pos.clone(),
                    work_done_progress_params: Default::default(),
                    partial_result_params: Default::default(),
                    context: lsp::ReferenceContext { include_declaration: true },
                })))?;
                id += 1;
                let range = lsp::Range::new(pos.position, lsp::Position::new(line + 1, 0));
                no_internal_error(&s.handle(request::<R::CodeActionRequest>(id, lsp::CodeActionParams {
                    text_document: lsp::TextDocumentIdentifier::new(u.clone()),
                    range,
                    context: Default::default(),
                    work_done_progress_params: Default::default(),
                    partial_result_params: Default::default(),
                })))?;
            }
            id += 1;
            no_internal_error(&s.handle(request::<R::DocumentSymbolRequest>(id, lsp::DocumentSymbolParams {
                text_document: lsp::TextDocumentIdentifier::new(u.clone()),
                work_done_progress_params: Default::default(),
                partial_result_params: Default::default(),
            })))?;
            id += 1;
            no_internal_error(&s.handle(request::<R::Formatting>(id, lsp::DocumentFormattingParams {
                text_document: lsp::TextDocumentIdentifier::new(u.clone()),
                options: Default::default(),
                work_done_progress_params: Default::default(),
            })))?;
        }
        let out = published(&s.flush());
        prop_assert!(out.iter().all(|p| p.version == Some(edits.len() as i32 + 1)));
    }
}

/// The first diagnostics of an opened document, and the planner's pass after them, go out
/// without the typing debounce (issue: 75 of the 122 ms to first diagnostics were the
/// debounce on didOpen, and 75 of the 117 ms to complete ones); edits wait it out, counted
/// from the last keystroke.
#[test]
fn did_open_is_not_debounced_but_edits_are() {
    let mut s = Server::new(Protocol::new(ColumnEncoding::Utf16));
    let u = uri("file:///w/a.dist");
    open(&mut s, &u, 1, "gpu g { memory = 80 GB }\n");
    assert_eq!(s.wait_before_check(), std::time::Duration::ZERO);
    let pending = s.diagnose_one().expect("the opened document");
    assert!(s.publish(pending).is_some());
    // the planner's pass follows at once
    assert!(s.has_pending());
    assert_eq!(s.wait_before_check(), std::time::Duration::ZERO);
    change(&mut s, &u, 2, "gpu g { memory = 81 GB }\n");
    let wait = s.wait_before_check();
    assert!(
        wait > dic_lsp::server::DEBOUNCE / 2 && wait <= dic_lsp::server::DEBOUNCE,
        "{wait:?}"
    );
    std::thread::sleep(dic_lsp::server::DEBOUNCE);
    assert_eq!(s.wait_before_check(), std::time::Duration::ZERO);
}
