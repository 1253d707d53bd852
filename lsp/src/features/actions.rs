//! Code actions — the compiler's machine-applicable fixes ("did you mean", the missing
//! stdlib import, the planner's cheaper layout) and, on `layout = auto`, pinning the layout
//! the planner chose — and whole-document formatting with `dic fmt`.

use crate::convert::Protocol;
use crate::features::diagnostics::{convert, primary};
use crate::snapshot::Snapshot;
use dic_compiler::program::{Body, LayoutSpec};
use dic_compiler::span::Span;
use lsp_types as lsp;
use std::collections::HashMap;

fn overlaps(a: Span, b: Span) -> bool {
    a.start <= b.end && b.start <= a.end
}

pub fn code_actions(
    snap: &Snapshot,
    range: Span,
    proto: Protocol,
) -> Vec<lsp::CodeActionOrCommand> {
    let db = &snap.checked.db;
    let mut out = Vec::new();
    for d in &snap.checked.diagnostics {
        let Some(main) = primary(d) else { continue };
        if main.span.file != snap.root || !overlaps(main.span.span, range) {
            continue;
        }
        for fix in &d.fixes {
            let file = db.get(fix.span.file);
            let edit = lsp::TextEdit {
                range: proto.range(&file.lines, &file.text, fix.span.span),
                new_text: fix.replacement.clone(),
            };
            out.push(lsp::CodeActionOrCommand::CodeAction(lsp::CodeAction {
                title: fix.title.clone(),
                kind: Some(lsp::CodeActionKind::QUICKFIX),
                diagnostics: convert(snap, d, proto).map(|x| vec![x]),
                edit: Some(lsp::WorkspaceEdit {
                    changes: Some(HashMap::from([(
                        proto.path_to_uri(&file.name, file.is_stdlib),
                        vec![edit],
                    )])),
                    ..Default::default()
                }),
                is_preferred: Some(d.fixes.len() == 1),
                ..Default::default()
            }));
        }
    }
    // `layout = auto`: write down what the planner chose.
    let p = snap.program();
    for def in p.user_defs.iter().filter_map(|id| p.def(*id)) {
        let Body::Deploy(dep) = &def.body else {
            continue;
        };
        if !matches!(dep.layout, LayoutSpec::Auto)
            || dep.layout_at.file != snap.root
            || !overlaps(dep.layout_at.span, range)
        {
            continue;
        }
        let Some(chosen) = snap
            .checked
            .plan
            .deployments
            .iter()
            .find(|x| x.name == def.name)
        else {
            continue;
        };
        let file = db.get(snap.root);
        let layout = chosen.layout.to_string();
        out.push(lsp::CodeActionOrCommand::CodeAction(lsp::CodeAction {
            title: format!(
                "pin the planner's layout: `layout = {layout}` ({} weights)",
                chosen.model.weights
            ),
            kind: Some(lsp::CodeActionKind::REFACTOR_REWRITE),
            edit: Some(lsp::WorkspaceEdit {
                changes: Some(HashMap::from([(
                    proto.path_to_uri(&file.name, false),
                    vec![lsp::TextEdit {
                        range: proto.range(&file.lines, &file.text, dep.layout_at.span),
                        new_text: layout,
                    }],
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }));
    }
    out
}

/// The whole document formatted by `dic fmt`; nothing for a document with syntax errors
/// (as the CLI, the formatter never rewrites a broken file).
pub fn format(
    text: &str,
    lines: &dic_compiler::span::LineIndex,
    proto: Protocol,
) -> Option<Vec<lsp::TextEdit>> {
    let (ast, diags) = dic_compiler::syntax::parser::parse(text, dic_compiler::span::FileId(0));
    if !diags.is_empty() {
        return None;
    }
    let formatted = dic_compiler::syntax::fmt::format(text, &ast);
    if formatted == text {
        return Some(Vec::new());
    }
    Some(vec![lsp::TextEdit {
        range: proto.range(lines, text, Span::new(0, text.len())),
        new_text: formatted,
    }])
}
