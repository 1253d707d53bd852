//! The server: its state (open documents, the latest check of each, which documents wait
//! for diagnostics), the dispatch of every request and notification, and the stdio loop
//! with debouncing. [`Server`] is transport-free, so tests and the benchmark drive it with
//! the same messages the editor sends.

use crate::convert::{Protocol, ReadOnlyDocs, EXPLAIN_SCHEME, STDLIB_SCHEME};
use crate::documents::{Documents, OverlayWorld};
use crate::features::{actions, completion, diagnostics, hover, navigation};
use crate::snapshot::Snapshot;
use dic_compiler::driver::{Advice, AnalysisCache};
use dic_compiler::source::{MemoryWorld, World};
use dic_compiler::span::{ColumnEncoding, Span};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types as lsp;
use lsp_types::notification::Notification as _;
use lsp_types::request::Request as _;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// How long the document must stay unchanged before it is checked.
pub const DEBOUNCE: Duration = Duration::from_millis(75);

/// `dic/virtualDocument`: the text of a `dic-stdlib:` or `dic-explain:` document (the
/// VS Code extension serves them read-only through a content provider).
pub const VIRTUAL_DOCUMENT: &str = "dic/virtualDocument";

/// Negotiate the position encoding: UTF-8 when the client offers it, else UTF-16 (the
/// protocol's default).
pub fn negotiate(params: &lsp::InitializeParams) -> Protocol {
    let offered = params
        .capabilities
        .general
        .as_ref()
        .and_then(|g| g.position_encodings.as_ref());
    match offered {
        Some(list) if list.contains(&lsp::PositionEncodingKind::UTF8) => {
            Protocol::new(ColumnEncoding::Utf8)
        }
        _ => Protocol::new(ColumnEncoding::Utf16),
    }
}

/// Whether the client serves `dic-stdlib:` and `dic-explain:` documents itself (the VS
/// Code extension says so with `initializationOptions: { "readOnlyDocuments": "virtual" }`);
/// every other client gets them as files ([`crate::docs_folder`]).
pub fn wants_virtual_documents(params: &lsp::InitializeParams) -> bool {
    params
        .initialization_options
        .as_ref()
        .and_then(|o| o.get("readOnlyDocuments"))
        .and_then(Value::as_str)
        == Some("virtual")
}

pub fn capabilities(proto: Protocol) -> lsp::ServerCapabilities {
    lsp::ServerCapabilities {
        position_encoding: Some(if proto.columns == ColumnEncoding::Utf8 {
            lsp::PositionEncodingKind::UTF8
        } else {
            lsp::PositionEncodingKind::UTF16
        }),
        text_document_sync: Some(lsp::TextDocumentSyncCapability::Kind(
            lsp::TextDocumentSyncKind::FULL,
        )),
        hover_provider: Some(lsp::HoverProviderCapability::Simple(true)),
        definition_provider: Some(lsp::OneOf::Left(true)),
        references_provider: Some(lsp::OneOf::Left(true)),
        document_symbol_provider: Some(lsp::OneOf::Left(true)),
        completion_provider: Some(lsp::CompletionOptions {
            trigger_characters: Some(vec![".".into(), " ".into(), "=".into()]),
            ..Default::default()
        }),
        document_formatting_provider: Some(lsp::OneOf::Left(true)),
        code_action_provider: Some(lsp::CodeActionProviderCapability::Simple(true)),
        ..Default::default()
    }
}

/// Diagnostics computed for one version of one document, not yet published.
pub struct Pending {
    pub path: String,
    pub version: i32,
    pub diagnostics: Vec<lsp::Diagnostic>,
}

pub struct Server {
    pub proto: Protocol,
    /// Where files that are not open come from (the CLI's disk world).
    files: Box<dyn World>,
    docs: Documents,
    snapshots: HashMap<String, Snapshot>,
    /// Per document: analyses of its deployments, reused while they do not change.
    caches: HashMap<String, AnalysisCache>,
    /// Documents to check and publish (without the planner's advice, which is fast).
    dirty: BTreeSet<String>,
    /// Documents published without the planner's advice, to re-check with it when idle.
    advice_pending: BTreeSet<String>,
    /// Set after `shutdown`: every later request is an error, as the protocol says.
    shutting_down: bool,
    /// When the last edit (didChange) arrived: checks wait until the debounce has passed
    /// since then, so a burst of keystrokes is checked once. A didOpen is no keystroke:
    /// its first diagnostics and the planner's pass after them go out without waiting.
    last_edit: Option<Instant>,
}

fn is_virtual(path: &str) -> bool {
    path.starts_with("std/") || path.starts_with(&format!("{EXPLAIN_SCHEME}:"))
}

impl Server {
    /// A server whose documents are only the open ones (tests, benchmarks).
    pub fn new(proto: Protocol) -> Server {
        Server::with_files(proto, Box::new(MemoryWorld::new()))
    }

    /// A server that reads files that are not open through `files`.
    pub fn with_files(proto: Protocol, files: Box<dyn World>) -> Server {
        Server {
            proto,
            files,
            docs: Documents::default(),
            snapshots: HashMap::new(),
            caches: HashMap::new(),
            dirty: BTreeSet::new(),
            advice_pending: BTreeSet::new(),
            shutting_down: false,
            last_edit: None,
        }
    }

    pub fn has_pending(&self) -> bool {
        !self.dirty.is_empty() || !self.advice_pending.is_empty()
    }

    /// How long to wait for more edits before checking: what is left of the debounce
    /// since the last edit (nothing after a didOpen, or once the typing has paused).
    pub fn wait_before_check(&self) -> Duration {
        self.last_edit
            .map(|t| DEBOUNCE.saturating_sub(t.elapsed()))
            .unwrap_or(Duration::ZERO)
    }

    /// The check of the document's current text (reused when up to date), with the
    /// planner's advice (requests want everything; code actions need its fixes).
    fn snapshot(&mut self, path: &str) -> Option<&Snapshot> {
        self.snapshot_with(path, Advice::Planner)
    }

    fn snapshot_with(&mut self, path: &str, advice: Advice) -> Option<&Snapshot> {
        let doc = self.docs.get(path)?.clone();
        let fresh = self.snapshots.get(path).is_some_and(|s| {
            s.version == doc.version
                && s.text() == &*doc.text
                && (s.advice == Advice::Planner || advice == Advice::Skip)
        });
        // The same text checked without the advice: only the analysis is redone.
        let upgrade = !fresh
            && self
                .snapshots
                .get(path)
                .is_some_and(|s| s.version == doc.version && s.text() == &*doc.text);
        if upgrade {
            let cache = self.caches.entry(path.to_string()).or_default();
            if let Some(snap) = self.snapshots.get_mut(path) {
                let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    dic_compiler::driver::reanalyze(&mut snap.checked, cache, advice)
                }));
                if done.is_err() {
                    self.caches.remove(path);
                    self.snapshots.remove(path);
                    eprintln!("dic lsp: internal error while analysing {path}");
                    return None;
                }
                snap.advice = advice;
            }
        } else if !fresh {
            let cache = self.caches.entry(path.to_string()).or_default();
            let world = OverlayWorld {
                documents: &self.docs,
                files: &*self.files,
            };
            let snap = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Snapshot::new(&world, path, doc.version, &doc.text, cache, advice)
            }));
            match snap {
                Ok(s) => {
                    self.snapshots.insert(path.to_string(), s);
                }
                Err(_) => {
                    // A compiler bug must not take the editor's server down; the cache
                    // may be half-updated, so start it afresh.
                    self.caches.remove(path);
                    eprintln!("dic lsp: internal error while checking {path}");
                    return None;
                }
            }
        }
        self.snapshots.get(path)
    }

    /// Check the next document waiting for diagnostics: first every changed document
    /// without the planner's advice, then (when nothing else waits) with it.
    pub fn diagnose_one(&mut self) -> Option<Pending> {
        let proto = self.proto;
        let (path, advice) = match self.dirty.iter().next() {
            Some(p) => (p.clone(), Advice::Skip),
            None => (self.advice_pending.iter().next()?.clone(), Advice::Planner),
        };
        self.dirty.remove(&path);
        self.advice_pending.remove(&path);
        if advice == Advice::Skip {
            self.advice_pending.insert(path.clone());
        }
        let snap = self.snapshot_with(&path, advice)?;
        Some(Pending {
            path,
            version: snap.version,
            diagnostics: diagnostics::for_document(snap, proto),
        })
    }

    /// Publish, unless the document changed (or closed) since: a stale result is dropped
    /// and the document stays queued.
    pub fn publish(&mut self, p: Pending) -> Option<Message> {
        let doc = self.docs.get(&p.path)?;
        if doc.version != p.version {
            self.advice_pending.remove(&p.path);
            self.dirty.insert(p.path);
            return None;
        }
        Some(notification::<lsp::notification::PublishDiagnostics>(
            lsp::PublishDiagnosticsParams {
                uri: self.proto.path_to_uri(&p.path, false),
                diagnostics: p.diagnostics,
                version: Some(p.version),
            },
        ))
    }

    /// Check and publish everything waiting (tests, and the loop when idle).
    pub fn flush(&mut self) -> Vec<Message> {
        let mut out = Vec::new();
        while let Some(p) = self.diagnose_one() {
            out.extend(self.publish(p));
        }
        out
    }

    /// Handle one message from the client; returns what to send back.
    pub fn handle(&mut self, msg: Message) -> Vec<Message> {
        match msg {
            Message::Request(req) => vec![Message::Response(self.request(req))],
            Message::Notification(n) => self.notify(n),
            Message::Response(_) => Vec::new(),
        }
    }

    fn notify(&mut self, n: Notification) -> Vec<Message> {
        use lsp::notification as N;
        match n.method.as_str() {
            N::DidOpenTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<lsp::DidOpenTextDocumentParams>(n.params) {
                    let path = self.proto.uri_to_path(&p.text_document.uri);
                    self.docs
                        .open(path.clone(), p.text_document.version, p.text_document.text);
                    self.mark_dirty(&path);
                }
                Vec::new()
            }
            N::DidChangeTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<lsp::DidChangeTextDocumentParams>(n.params)
                {
                    let path = self.proto.uri_to_path(&p.text_document.uri);
                    // full sync: the last change holds the whole text
                    if let Some(c) = p.content_changes.into_iter().last() {
                        if self.docs.change(&path, p.text_document.version, c.text) {
                            self.mark_dirty(&path);
                            self.last_edit = Some(Instant::now());
                        }
                    }
                }
                Vec::new()
            }
            N::DidCloseTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<lsp::DidCloseTextDocumentParams>(n.params) {
                    let path = self.proto.uri_to_path(&p.text_document.uri);
                    self.docs.close(&path);
                    self.snapshots.remove(&path);
                    self.caches.remove(&path);
                    self.dirty.remove(&path);
                    self.advice_pending.remove(&path);
                    self.mark_dirty(&path);
                    return vec![notification::<N::PublishDiagnostics>(
                        lsp::PublishDiagnosticsParams {
                            uri: p.text_document.uri,
                            diagnostics: Vec::new(),
                            version: None,
                        },
                    )];
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// Any change can change what another open document imports: re-check them all
    /// (the stdlib's virtual documents never change), and forget the checks of the
    /// others, whose text is unchanged but whose imports may not be.
    fn mark_dirty(&mut self, changed: &str) {
        let paths: Vec<String> = self
            .docs
            .paths()
            .filter(|p| !is_virtual(p))
            .cloned()
            .collect();
        self.dirty.extend(paths);
        self.snapshots.retain(|p, _| p == changed);
    }

    fn request(&mut self, req: Request) -> Response {
        if self.shutting_down && req.method != lsp::request::Shutdown::METHOD {
            return Response::new_err(
                req.id,
                ErrorCode::InvalidRequest as i32,
                "the server is shutting down".into(),
            );
        }
        let id = req.id.clone();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.dispatch(req)));
        match outcome {
            Ok(Ok(value)) => Response::new_ok(id, value),
            Ok(Err((code, message))) => Response::new_err(id, code as i32, message),
            Err(_) => Response::new_err(
                id,
                ErrorCode::InternalError as i32,
                "internal error in dic's language server".into(),
            ),
        }
    }

    fn dispatch(&mut self, req: Request) -> Result<Value, (ErrorCode, String)> {
        use lsp::request as R;
        let proto = self.proto;
        let bad = |e: serde_json::Error| (ErrorCode::InvalidParams, e.to_string());
        match req.method.as_str() {
            R::Shutdown::METHOD => {
                self.shutting_down = true;
                Ok(Value::Null)
            }
            R::HoverRequest::METHOD => {
                let p: lsp::HoverParams = serde_json::from_value(req.params).map_err(bad)?;
                let (snap, offset) = self.at(&p.text_document_position_params)?;
                Ok(json(hover::hover(snap, offset, proto)))
            }
            R::GotoDefinition::METHOD => {
                let p: lsp::GotoDefinitionParams =
                    serde_json::from_value(req.params).map_err(bad)?;
                let (snap, offset) = self.at(&p.text_document_position_params)?;
                Ok(json(
                    navigation::definition(snap, offset, proto)
                        .map(lsp::GotoDefinitionResponse::Scalar),
                ))
            }
            R::References::METHOD => {
                let p: lsp::ReferenceParams = serde_json::from_value(req.params).map_err(bad)?;
                let include = p.context.include_declaration;
                let (snap, offset) = self.at(&p.text_document_position)?;
                Ok(json(navigation::references(snap, offset, include, proto)))
            }
            R::DocumentSymbolRequest::METHOD => {
                let p: lsp::DocumentSymbolParams =
                    serde_json::from_value(req.params).map_err(bad)?;
                let path = self.proto.uri_to_path(&p.text_document.uri);
                let snap = self.snapshot(&path).ok_or_else(not_open)?;
                Ok(json(lsp::DocumentSymbolResponse::Nested(
                    navigation::symbols(snap, proto),
                )))
            }
            R::Completion::METHOD => {
                let p: lsp::CompletionParams = serde_json::from_value(req.params).map_err(bad)?;
                let (snap, offset) = self.at(&p.text_document_position)?;
                Ok(json(lsp::CompletionResponse::Array(completion::complete(
                    snap, offset,
                ))))
            }
            R::Formatting::METHOD => {
                let p: lsp::DocumentFormattingParams =
                    serde_json::from_value(req.params).map_err(bad)?;
                let path = self.proto.uri_to_path(&p.text_document.uri);
                let doc = self.docs.get(&path).ok_or_else(not_open)?;
                let lines = dic_compiler::span::LineIndex::new(&doc.text);
                Ok(json(actions::format(&doc.text, &lines, proto)))
            }
            R::CodeActionRequest::METHOD => {
                let p: lsp::CodeActionParams = serde_json::from_value(req.params).map_err(bad)?;
                let path = self.proto.uri_to_path(&p.text_document.uri);
                let snap = self.snapshot(&path).ok_or_else(not_open)?;
                let f = snap.checked.db.get(snap.root);
                let span = Span::new(
                    proto.offset(&f.lines, &f.text, p.range.start),
                    proto.offset(&f.lines, &f.text, p.range.end),
                );
                Ok(json(actions::code_actions(snap, span, proto)))
            }
            VIRTUAL_DOCUMENT => {
                let uri = req.params.get("uri").and_then(Value::as_str).unwrap_or("");
                Ok(json(virtual_document(uri)))
            }
            other => Err((
                ErrorCode::MethodNotFound,
                format!("dic lsp does not handle `{other}`"),
            )),
        }
    }

    /// The snapshot of a request's document and the byte offset of its position.
    fn at(
        &mut self,
        p: &lsp::TextDocumentPositionParams,
    ) -> Result<(&Snapshot, usize), (ErrorCode, String)> {
        let proto = self.proto;
        let path = self.proto.uri_to_path(&p.text_document.uri);
        let snap = self.snapshot(&path).ok_or_else(not_open)?;
        let f = snap.checked.db.get(snap.root);
        let offset = proto.offset(&f.lines, &f.text, p.position);
        Ok((snap, offset))
    }
}

fn not_open() -> (ErrorCode, String) {
    (ErrorCode::InvalidParams, "the document is not open".into())
}

fn json<T: serde::Serialize>(v: T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn notification<N: lsp::notification::Notification>(params: N::Params) -> Message {
    Message::Notification(Notification::new(N::METHOD.to_string(), params))
}

/// The text behind a `dic-stdlib:` or `dic-explain:` URI.
pub fn virtual_document(uri: &str) -> Option<String> {
    if let Some(rest) = uri.strip_prefix(&format!("{STDLIB_SCHEME}:")) {
        let path = rest.trim_start_matches('/');
        return dic_compiler::stdlib::by_path(path).map(|(_, m)| m.text.to_string());
    }
    if let Some(rest) = uri.strip_prefix(&format!("{EXPLAIN_SCHEME}:")) {
        let code = rest.trim_start_matches('/').trim_end_matches(".md");
        return dic_compiler::diagnostics::Code::parse(code).map(|c| c.explanation().to_string());
    }
    None
}

/// Run the server over stdin/stdout until the client says `exit`; files that are not
/// open are read through `files`.
pub fn run_stdio(files: Box<dyn World>) -> Result<(), String> {
    let (connection, io_threads) =
        crate::transport::spawn(std::io::BufReader::new(std::io::stdin()), std::io::stdout());
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let (id, params) = connection.initialize_start().map_err(|e| err(&e))?;
    let params: lsp::InitializeParams = serde_json::from_value(params).map_err(|e| err(&e))?;
    let mut proto = negotiate(&params);
    if !wants_virtual_documents(&params) {
        // Any other editor: stdlib and explain pages as files it can open.
        match crate::docs_folder::ensure() {
            Ok(dir) => {
                let dir = dir.to_string_lossy().into_owned();
                // One string for the server's life, shared by every Copy of `Protocol`.
                proto.docs = ReadOnlyDocs::Folder(Box::leak(dir.into_boxed_str()));
            }
            Err(e) => eprintln!(
                "dic lsp: cannot write the stdlib and explain pages to {} ({e}); links into them use the dic-stdlib: and dic-explain: schemes",
                crate::docs_folder::cache_base().display()
            ),
        }
    }
    let result = lsp::InitializeResult {
        capabilities: capabilities(proto),
        server_info: Some(lsp::ServerInfo {
            name: "dic".into(),
            version: Some(env!("CARGO_PKG_VERSION").into()),
        }),
    };
    connection
        .initialize_finish(id, json(result))
        .map_err(|e| err(&e))?;
    let mut server = Server::with_files(proto, files);
    main_loop(&connection, &mut server).map_err(|e| err(&e))?;
    drop(connection);
    io_threads.join();
    Ok(())
}

fn main_loop(
    connection: &Connection,
    server: &mut Server,
) -> Result<(), Box<dyn std::error::Error + Sync + Send>> {
    loop {
        let msg = if server.has_pending() {
            match connection.receiver.recv_timeout(server.wait_before_check()) {
                Ok(m) => Some(m),
                Err(crossbeam_timeout) if crossbeam_timeout.is_timeout() => None,
                Err(_) => return Ok(()),
            }
        } else {
            match connection.receiver.recv() {
                Ok(m) => Some(m),
                Err(_) => return Ok(()),
            }
        };
        match msg {
            Some(m) => {
                if handle_one(connection, server, m)? {
                    return Ok(());
                }
            }
            None => {
                let Some(pending) = server.diagnose_one() else {
                    continue;
                };
                // Whatever arrived while checking is handled first; a change to the
                // document makes this result stale and `publish` drops it.
                while let Ok(m) = connection.receiver.try_recv() {
                    if handle_one(connection, server, m)? {
                        return Ok(());
                    }
                }
                if let Some(out) = server.publish(pending) {
                    connection.sender.send(out)?;
                }
            }
        }
    }
}

/// Handle one message; true when the client asked to exit.
fn handle_one(
    connection: &Connection,
    server: &mut Server,
    m: Message,
) -> Result<bool, Box<dyn std::error::Error + Sync + Send>> {
    if let Message::Notification(n) = &m {
        if n.method == lsp::notification::Exit::METHOD {
            return Ok(true);
        }
    }
    for out in server.handle(m) {
        connection.sender.send(out)?;
    }
    Ok(false)
}

/// For tests: a request message.
pub fn request<R: lsp::request::Request>(id: i32, params: R::Params) -> Message {
    Message::Request(Request::new(
        RequestId::from(id),
        R::METHOD.to_string(),
        params,
    ))
}

/// For tests: a notification message.
pub fn note<N: lsp::notification::Notification>(params: N::Params) -> Message {
    notification::<N>(params)
}
