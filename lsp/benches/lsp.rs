//! The language server's latency on a 2,000-line document (61 deployments): open and the
//! first diagnostics (goal: under 20 ms), open and the complete diagnostics (with the
//! planner's advice, a layout search per deployment), and both again after a
//! one-character edit. Drives [`Server`] with the messages an editor sends; no transport.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use criterion::{criterion_group, criterion_main, Criterion};
use dic_compiler::span::ColumnEncoding;
use dic_lsp::convert::Protocol;
use dic_lsp::server::{note, Server};
use lsp_types as lsp;
use lsp_types::notification::{DidChangeTextDocument, DidOpenTextDocument};
use std::str::FromStr;

fn open(server: &mut Server, uri: &lsp::Uri, text: &str) {
    server.handle(note::<DidOpenTextDocument>(
        lsp::DidOpenTextDocumentParams {
            text_document: lsp::TextDocumentItem::new(
                uri.clone(),
                "dist".into(),
                1,
                text.to_string(),
            ),
        },
    ));
}

fn change(server: &mut Server, uri: &lsp::Uri, version: i32, text: &str) {
    server.handle(note::<DidChangeTextDocument>(
        lsp::DidChangeTextDocumentParams {
            text_document: lsp::VersionedTextDocumentIdentifier::new(uri.clone(), version),
            content_changes: vec![lsp::TextDocumentContentChangeEvent {
                range: None,
                range_length: None,
                text: text.to_string(),
            }],
        },
    ));
}

/// Check and publish once (the first, fast diagnostics).
fn first(server: &mut Server) {
    let p = server.diagnose_one().expect("pending");
    assert!(server.publish(p).is_some());
}

fn bench(c: &mut Criterion) {
    let text = dic_compiler::sample::generated(2000);
    let uri = lsp::Uri::from_str("file:///bench/big.dist").unwrap();
    let proto = Protocol::new(ColumnEncoding::Utf16);
    let mut g = c.benchmark_group("lsp");
    g.sample_size(20);
    g.bench_function("open + first diagnostics, 2000 lines", |b| {
        b.iter(|| {
            let mut server = Server::new(proto);
            open(&mut server, &uri, &text);
            first(&mut server);
        })
    });
    g.bench_function(
        "open + complete diagnostics (planner advice), 2000 lines",
        |b| {
            b.iter(|| {
                let mut server = Server::new(proto);
                open(&mut server, &uri, &text);
                assert_eq!(server.flush().len(), 2);
            })
        },
    );
    // One character typed in the middle of the file (a digit of a prompt length), and back.
    let at = text.find("prompt = 1030").unwrap() + "prompt = 10".len();
    let edited = [format!("{}7{}", &text[..at], &text[at + 1..]), text.clone()];
    let mut server = Server::new(proto);
    open(&mut server, &uri, &text);
    server.flush();
    let mut version = 1;
    g.bench_function("one-character edit + first diagnostics, 2000 lines", |b| {
        b.iter(|| {
            version += 1;
            change(&mut server, &uri, version, &edited[version as usize % 2]);
            first(&mut server);
        })
    });
    server.flush();
    g.bench_function(
        "one-character edit + complete diagnostics, 2000 lines",
        |b| {
            b.iter(|| {
                version += 1;
                change(&mut server, &uri, version, &edited[version as usize % 2]);
                assert_eq!(server.flush().len(), 2);
            })
        },
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
