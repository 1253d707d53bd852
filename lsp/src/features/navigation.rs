//! Go to definition, find references (across the document, the files it imports and the
//! stdlib) and the document's outline.

use crate::convert::Protocol;
use crate::snapshot::Snapshot;
use dic_compiler::syntax::ast::{ExprKind, Item};
use lsp_types as lsp;

pub fn definition(snap: &Snapshot, offset: usize, proto: Protocol) -> Option<lsp::Location> {
    let o = snap.occurrence_at(offset)?;
    let def = snap.program().def(o.def)?;
    Some(proto.location(&snap.checked.db, def.file, def.name_span))
}

pub fn references(
    snap: &Snapshot,
    offset: usize,
    include_declaration: bool,
    proto: Protocol,
) -> Vec<lsp::Location> {
    let Some(o) = snap.occurrence_at(offset) else {
        return Vec::new();
    };
    let mut seen = std::collections::BTreeSet::new();
    snap.occurrences
        .iter()
        .filter(|x| x.def == o.def && (include_declaration || !x.is_definition))
        .filter(|x| seen.insert((x.file, x.span.start, x.span.end)))
        .map(|x| proto.location(&snap.checked.db, x.file, x.span))
        .collect()
}

fn symbol_kind(kind: &str) -> lsp::SymbolKind {
    match kind {
        "deploy" => lsp::SymbolKind::CLASS,
        "model" => lsp::SymbolKind::OBJECT,
        "cluster" | "node" => lsp::SymbolKind::MODULE,
        "gpu" | "link" | "network" => lsp::SymbolKind::STRUCT,
        "workload" | "slo" => lsp::SymbolKind::INTERFACE,
        _ => lsp::SymbolKind::VARIABLE,
    }
}

/// The document's definitions, each with its fields as children.
#[allow(deprecated)] // DocumentSymbol::deprecated is a required field of the struct
pub fn symbols(snap: &Snapshot, proto: Protocol) -> Vec<lsp::DocumentSymbol> {
    let f = snap.checked.db.get(snap.root);
    let range = |s: dic_compiler::span::Span| proto.range(&f.lines, &f.text, s);
    snap.ast
        .items
        .iter()
        .filter_map(|item| {
            let Item::Definition(d) = item else {
                return None;
            };
            let children: Vec<lsp::DocumentSymbol> = d
                .body
                .as_ref()
                .map(|b| {
                    b.entries
                        .iter()
                        .map(|e| lsp::DocumentSymbol {
                            name: e.key_text(),
                            detail: Some(value_detail(&e.value.kind)),
                            kind: lsp::SymbolKind::FIELD,
                            tags: None,
                            deprecated: None,
                            range: range(e.span),
                            selection_range: range(e.key_span),
                            children: None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(lsp::DocumentSymbol {
                name: if d.name.node.is_empty() {
                    "?".into()
                } else {
                    d.name.node.clone()
                },
                detail: Some(match &d.base {
                    Some(b) => format!("{} = {}", d.kind.node, b.node),
                    None => d.kind.node.clone(),
                }),
                kind: symbol_kind(&d.kind.node),
                tags: None,
                deprecated: None,
                range: range(d.span),
                selection_range: range(d.name.span),
                children: (!children.is_empty()).then_some(children),
            })
        })
        .collect()
}

fn value_detail(e: &ExprKind) -> String {
    match e {
        ExprKind::Quantity { text, unit, .. } => match unit {
            Some(u) => format!("{text} {}", u.node),
            None => text.clone(),
        },
        ExprKind::Money { text, .. } => text.clone(),
        ExprKind::Str(s) => format!("\"{s}\""),
        ExprKind::Reference { name, count, .. } => match count {
            Some(c) => format!("{} × {}", c.node, name.node),
            None => name.node.clone(),
        },
        ExprKind::List(_) => "[…]".into(),
        ExprKind::Object(_) => "{…}".into(),
        ExprKind::Product(_) => "… × …".into(),
        #[allow(unreachable_patterns)]
        _ => String::new(),
    }
}
