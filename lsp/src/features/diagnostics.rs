//! Compiler diagnostics → LSP diagnostics for the document: code, severity, message with
//! help and notes, a `codeDescription` link to the explain page, the primary label as the
//! range, and every other label (in this file, another file or the stdlib) as related
//! information.

use crate::convert::Protocol;
use crate::snapshot::Snapshot;
use dic_compiler::diagnostics::{Diagnostic, Severity};
use lsp_types as lsp;

pub fn severity(s: Severity) -> lsp::DiagnosticSeverity {
    match s {
        Severity::Error => lsp::DiagnosticSeverity::ERROR,
        Severity::Warning => lsp::DiagnosticSeverity::WARNING,
        Severity::Advice => lsp::DiagnosticSeverity::INFORMATION,
    }
}

/// The diagnostics whose primary label lies in the document (others belong to the files
/// they point at, which report them when open).
pub fn for_document(snap: &Snapshot, proto: Protocol) -> Vec<lsp::Diagnostic> {
    snap.checked
        .diagnostics
        .iter()
        .filter_map(|d| convert(snap, d, proto))
        .collect()
}

pub fn primary(d: &Diagnostic) -> Option<&dic_compiler::diagnostics::Label> {
    d.labels.iter().find(|l| l.primary).or(d.labels.first())
}

pub fn convert(snap: &Snapshot, d: &Diagnostic, proto: Protocol) -> Option<lsp::Diagnostic> {
    let db = &snap.checked.db;
    let main = primary(d);
    let in_doc = match main {
        Some(l) => l.span.file == snap.root,
        // a diagnostic without a place (rare) belongs to the document checked
        None => true,
    };
    if !in_doc {
        return None;
    }
    let root = db.get(snap.root);
    let range = match main {
        Some(l) => proto.range(&root.lines, &root.text, l.span.span),
        None => lsp::Range::default(),
    };
    let mut message = d.message.clone();
    if let Some(l) = main.filter(|l| !l.message.is_empty()) {
        message.push_str(&format!("\n{}", l.message));
    }
    if let Some(h) = &d.help {
        message.push_str(&format!("\nhelp: {h}"));
    }
    for n in &d.notes {
        message.push_str(&format!("\nnote: {n}"));
    }
    let related: Vec<lsp::DiagnosticRelatedInformation> = d
        .labels
        .iter()
        .filter(|l| Some(*l) != main)
        .map(|l| lsp::DiagnosticRelatedInformation {
            location: proto.location(db, l.span.file, l.span.span),
            message: if l.message.is_empty() {
                "here".into()
            } else {
                l.message.clone()
            },
        })
        .collect();
    let code = d.code.as_str();
    Some(lsp::Diagnostic {
        range,
        severity: Some(severity(d.severity)),
        code: Some(lsp::NumberOrString::String(code.to_string())),
        code_description: proto
            .explain_uri(code)
            .map(|href| lsp::CodeDescription { href }),
        source: Some("dic".into()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        tags: None,
        data: None,
    })
}
