//! Completion from the text before the cursor (robust to half-typed input) and the schema:
//! definition keywords at the top level, stdlib modules and items after `import`, the
//! fields valid in the enclosing block (a definition, an inline override, `vllm { … }`)
//! that are not set yet, and after `key =` the values that field takes — names of
//! definitions of the right kind (stdlib ones with their import added), enum words, and
//! units of the right dimension after a number.

use crate::snapshot::Snapshot;
use dic_compiler::schema::{Field, Kind, Ty, VLLM_OPTIONS};
use dic_compiler::stdlib;
use lsp_types as lsp;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Block {
    Def(Kind),
    Engine,
}

/// Positions of the unclosed `{` before `offset`, skipping strings and comments.
fn open_braces(text: &str) -> Vec<usize> {
    let b = text.as_bytes();
    let mut stack = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'{' => stack.push(i),
            b'}' => {
                stack.pop();
            }
            _ => {}
        }
        i += 1;
    }
    stack
}

fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map(|i| i + 1).unwrap_or(0)
}

fn words(s: &str) -> Vec<&str> {
    s.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// What the block opened at `braces[k]` is.
fn block_at(text: &str, braces: &[usize], k: usize) -> Option<Block> {
    let at = braces[k];
    let head = &text[line_start(text, at)..at];
    let head = head.rsplit([',', ';']).next().unwrap_or(head);
    // `kind name {` or `kind name = base {`: a keyword and a name before any `=`
    // (`model = llama {` is a field's inline override, handled below).
    let named = words(head.split('=').next().unwrap_or(head));
    if let (Some(kind), true) = (
        named.first().and_then(|f| Kind::from_keyword(f)),
        named.len() >= 2,
    ) {
        return Some(Block::Def(kind));
    }
    // `key = name {`: an engine, or an inline override of the key's kind.
    if let Some((key, value)) = head.rsplit_once('=') {
        let key = words(key).last().copied().unwrap_or("");
        let value = words(value).last().copied().unwrap_or("");
        if key == "engine" || value == "vllm" {
            return Some(Block::Engine);
        }
        if k > 0 {
            if let Some(Block::Def(parent)) = block_at(text, braces, k - 1) {
                if let Some(f) = parent.schema().field(key) {
                    if let Ty::Ref(kind) | Ty::CountOf(kind) | Ty::Groups(kind) = f.ty {
                        return Some(Block::Def(kind));
                    }
                }
            }
        }
    }
    None
}

fn fields_of(block: Block) -> &'static [Field] {
    match block {
        Block::Def(k) => k.schema().fields,
        Block::Engine => VLLM_OPTIONS,
    }
}

fn item(label: &str, kind: lsp::CompletionItemKind, detail: &str) -> lsp::CompletionItem {
    lsp::CompletionItem {
        label: label.to_string(),
        kind: Some(kind),
        detail: (!detail.is_empty()).then(|| detail.to_string()),
        ..Default::default()
    }
}

pub fn complete(snap: &Snapshot, offset: usize) -> Vec<lsp::CompletionItem> {
    let text = snap.text();
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = &before[line_start(before, offset)..];
    let braces = open_braces(before);
    if braces.is_empty() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("import") {
            return imports(rest.trim_start());
        }
        return top_level();
    }
    let Some(block) = block_at(before, &braces, braces.len() - 1) else {
        return Vec::new();
    };
    // The current entry starts after the last `{`, `,` or line start.
    let entry_start = [line_start(before, offset), braces[braces.len() - 1] + 1]
        .into_iter()
        .chain(before.rfind(',').map(|i| i + 1))
        .max()
        .unwrap_or(0);
    let entry = &before[entry_start.min(offset)..];
    let ops = ["<=", ">=", "==", "=", "<", ">"];
    match ops
        .iter()
        .filter_map(|op| entry.find(op).map(|i| (i, *op)))
        .min()
    {
        None => {
            let set: Vec<String> = set_keys(before, braces[braces.len() - 1]);
            fields_of(block)
                .iter()
                .filter(|f| !set.iter().any(|s| s == f.name))
                .map(|f| {
                    let mut it = item(f.name, lsp::CompletionItemKind::FIELD, &f.ty.describe());
                    it.documentation = Some(lsp::Documentation::String(f.doc.to_string()));
                    it
                })
                .collect()
        }
        Some((i, op)) => {
            let key = entry[..i].trim();
            let key = key.split('.').next().unwrap_or(key);
            let Some(field) = fields_of(block).iter().find(|f| f.name == key) else {
                return Vec::new();
            };
            values(snap, field, entry[i + op.len()..].trim_start())
        }
    }
}

/// Keys already written directly in the block opened at `open`.
fn set_keys(before: &str, open: usize) -> Vec<String> {
    let mut depth = 0;
    let mut out = Vec::new();
    for l in before[open + 1..].split(['\n', ',']) {
        if depth == 0 {
            if let Some((k, _)) = l.split_once(['=', '<', '>']) {
                let k = k.trim();
                if !k.is_empty() {
                    out.push(k.split('.').next().unwrap_or(k).to_string());
                }
            }
        }
        depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
    }
    out
}

fn top_level() -> Vec<lsp::CompletionItem> {
    let mut out: Vec<lsp::CompletionItem> = Kind::ALL
        .iter()
        .map(|k| {
            let kw = k.keyword();
            lsp::CompletionItem {
                label: kw.to_string(),
                kind: Some(lsp::CompletionItemKind::KEYWORD),
                detail: Some(k.schema().doc.to_string()),
                insert_text: Some(format!("{kw} ${{1:name}} {{\n  $0\n}}")),
                insert_text_format: Some(lsp::InsertTextFormat::SNIPPET),
                ..Default::default()
            }
        })
        .collect();
    out.push(item(
        "import",
        lsp::CompletionItemKind::KEYWORD,
        "import std.module.name, std.module.*, or \"./file.dist\"",
    ));
    out
}

fn imports(partial: &str) -> Vec<lsp::CompletionItem> {
    let mut out = Vec::new();
    for (i, m) in stdlib::MODULES.iter().enumerate() {
        if !m.module.starts_with(partial) && !partial.starts_with(m.module) {
            continue;
        }
        out.push(item(
            &format!("{}.*", m.module),
            lsp::CompletionItemKind::MODULE,
            m.path,
        ));
        for (kind, name) in stdlib::items(i) {
            out.push(item(
                &format!("{}.{name}", m.module),
                lsp::CompletionItemKind::REFERENCE,
                &kind,
            ));
        }
    }
    out
}

fn values(snap: &Snapshot, field: &Field, partial: &str) -> Vec<lsp::CompletionItem> {
    let ty = match field.ty {
        Ty::List(t) => *t,
        t => t,
    };
    match ty {
        Ty::Quantity(d, _) | Ty::Bound(d) => {
            // after a number (`80 `), or while typing its unit (`80 G`, `80G`): units
            let numeric = |w: &str| w.chars().next().is_some_and(|c| c.is_ascii_digit());
            let words: Vec<&str> = partial.split_whitespace().collect();
            let ends_with_number = if partial.ends_with(char::is_whitespace) {
                words.last().is_some_and(|w| numeric(w))
            } else {
                words.len() >= 2 && numeric(words[words.len() - 2])
                    || words
                        .last()
                        .is_some_and(|w| numeric(w) && w.ends_with(char::is_alphabetic))
            };
            if ends_with_number {
                d.units()
                    .map(|u| item(u.symbol, lsp::CompletionItemKind::UNIT, d.describe()))
                    .collect()
            } else {
                Vec::new()
            }
        }
        Ty::Enum(opts) => opts
            .iter()
            .map(|o| item(o, lsp::CompletionItemKind::ENUM_MEMBER, ""))
            .collect(),
        Ty::Bool => ["true", "false"]
            .iter()
            .map(|o| item(o, lsp::CompletionItemKind::KEYWORD, ""))
            .collect(),
        Ty::Layout => ["auto", "tp 8 × pp 1 × dp 1", "tp 8 × pp 1 × dp 1 × ep"]
            .iter()
            .map(|o| item(o, lsp::CompletionItemKind::VALUE, "layout"))
            .collect(),
        Ty::Engine => vec![item("vllm", lsp::CompletionItemKind::VALUE, "vLLM 0.33")],
        Ty::Ref(kind) | Ty::CountOf(kind) | Ty::Groups(kind) => names(snap, kind),
        _ => Vec::new(),
    }
}

/// Definitions of `kind`: the user's, then the stdlib's (with the import they need).
fn names(snap: &Snapshot, kind: Kind) -> Vec<lsp::CompletionItem> {
    let p = snap.program();
    let text = snap.text();
    let mut out: Vec<lsp::CompletionItem> = p
        .user_defs_of(kind)
        .filter(|d| !d.name.contains('.') && !d.name.is_empty())
        .map(|d| item(&d.name, lsp::CompletionItemKind::REFERENCE, kind.keyword()))
        .collect();
    // Where a new import goes: after the last import line, or at the top.
    let import_at = text
        .match_indices("import ")
        .filter(|(i, _)| *i == 0 || text.as_bytes()[i - 1] == b'\n')
        .last()
        .map(|(i, _)| {
            text[i..]
                .find('\n')
                .map(|n| i + n + 1)
                .unwrap_or(text.len())
        })
        .unwrap_or(0);
    let lines = &snap.checked.db.get(snap.root).lines;
    let pos = lines.line_col(text, import_at, dic_compiler::span::ColumnEncoding::Utf16);
    let at = lsp::Position::new(pos.line, 0);
    for (m, k, name) in stdlib::all_items() {
        if k != kind.keyword() || out.iter().any(|i| i.label == name) {
            continue;
        }
        let module = stdlib::MODULES[m].module;
        let imported = text.contains(&format!("import {module}.{name}"))
            || text.contains(&format!("import {module}.*"));
        let mut it = item(
            &name,
            lsp::CompletionItemKind::REFERENCE,
            &format!("{module}.{name}"),
        );
        if !imported {
            it.additional_text_edits = Some(vec![lsp::TextEdit {
                range: lsp::Range::new(at, at),
                new_text: format!("import {module}.{name}\n"),
            }]);
        }
        out.push(it);
    }
    out
}
