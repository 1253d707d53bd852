//! One check of one open document — the same `driver::check_text` the CLI runs, through
//! the overlay world — plus what navigation needs: every occurrence of every definition's
//! name (definitions, bases, references in field values, import paths), by file and span.

use dic_compiler::driver::{self, Checked};
use dic_compiler::driver::{Advice, AnalysisCache};
use dic_compiler::program::{DefId, Program, Value};
use dic_compiler::source::{SourceDb, World};
use dic_compiler::span::{FileId, Span};
use dic_compiler::syntax::ast::{ImportTarget, Item, SourceAst};

/// A name in the text that denotes a definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occurrence {
    pub file: FileId,
    pub span: Span,
    pub def: DefId,
    /// The definition's own name (not a use of it).
    pub is_definition: bool,
}

pub struct Snapshot {
    pub path: String,
    pub version: i32,
    /// Whether the planner's advice (A0701) was computed.
    pub advice: Advice,
    pub checked: Checked,
    /// The document's file in `checked.db`.
    pub root: FileId,
    /// The document's syntax tree (recovered, so partial for broken input).
    pub ast: std::sync::Arc<SourceAst>,
    pub occurrences: Vec<Occurrence>,
}

impl Snapshot {
    pub fn new(
        world: &dyn World,
        path: &str,
        version: i32,
        text: &str,
        cache: &mut AnalysisCache,
        advice: Advice,
    ) -> Snapshot {
        let checked = driver::check_text_cached(world, path, text, cache, advice);
        let root = checked.db.find(path).unwrap_or(FileId(0));
        let ast = checked.root_ast.clone();
        let mut occurrences = index(&checked.db, &checked.program);
        occurrences.extend(import_occurrences(
            &checked.db,
            &checked.program,
            root,
            &ast,
        ));
        Snapshot {
            path: path.to_string(),
            version,
            advice,
            checked,
            root,
            ast,
            occurrences,
        }
    }

    pub fn text(&self) -> &str {
        &self.checked.db.get(self.root).text
    }

    /// The occurrence under `offset` in the document.
    pub fn occurrence_at(&self, offset: usize) -> Option<Occurrence> {
        self.occurrences
            .iter()
            .filter(|o| {
                o.file == self.root
                    && o.span.start as usize <= offset
                    && offset <= o.span.end as usize
            })
            .min_by_key(|o| o.span.len())
            .copied()
    }

    pub fn program(&self) -> &Program {
        &self.checked.program
    }
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whole-word occurrences of `word` in `text[range]`, as spans of the file.
fn find_word(text: &str, within: Span, word: &str) -> Vec<Span> {
    let (start, end) = (within.start as usize, (within.end as usize).min(text.len()));
    if word.is_empty()
        || start >= end
        || !text.is_char_boundary(start)
        || !text.is_char_boundary(end)
    {
        return Vec::new();
    }
    let hay = &text[start..end];
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = hay[from..].find(word) {
        let s = start + from + i;
        let e = s + word.len();
        let before_ok = s == 0 || !is_ident(bytes[s - 1]);
        let after_ok = e >= bytes.len() || !is_ident(bytes[e]);
        if before_ok && after_ok {
            out.push(Span::new(s, e));
        }
        from += i + word.len();
    }
    out
}

fn referenced(v: &Value, out: &mut Vec<DefId>) {
    match v {
        Value::Ref(id) | Value::CountOf(_, id) => out.push(*id),
        Value::Groups(g) => out.extend(g.iter().map(|(_, id)| *id)),
        Value::List(items) => items.iter().for_each(|i| referenced(i, out)),
        Value::Engine(_, opts) => opts.values().for_each(|f| referenced(&f.value, out)),
        _ => {}
    }
}

/// Every definition's name, base and the references written in its own body.
fn index(db: &SourceDb, p: &Program) -> Vec<Occurrence> {
    let mut out = Vec::new();
    for def in p.defs.iter().flatten() {
        let text = &db.get(def.file).text;
        out.push(Occurrence {
            file: def.file,
            span: def.name_span,
            def: def.id,
            is_definition: true,
        });
        if let Some(base) = def.base.and_then(|b| p.def(b)) {
            // `kind name = base {`: the base's name after the definition's name.
            let head_end = text[def.name_span.end as usize..def.span.end as usize]
                .find('{')
                .map(|i| def.name_span.end as usize + i)
                .unwrap_or(def.span.end as usize);
            let head = Span::new(def.name_span.end as usize, head_end);
            if let Some(s) = find_word(text, head, &base.name).first() {
                out.push(Occurrence {
                    file: def.file,
                    span: *s,
                    def: base.id,
                    is_definition: false,
                });
            }
        }
        for fv in def.fields.values().filter(|f| f.set_by == Some(def.id)) {
            let mut ids = Vec::new();
            referenced(&fv.value, &mut ids);
            let ftext = &db.get(fv.at.file).text;
            for id in ids {
                // An inline override (`model = m { … }`) is an anonymous definition
                // extending `m`: the name written is its base's.
                let mut cur = p.def(id);
                while let Some(d) = cur {
                    let spans = find_word(ftext, fv.at.span, &d.name);
                    if !spans.is_empty() {
                        out.extend(spans.into_iter().map(|span| Occurrence {
                            file: fv.at.file,
                            span,
                            def: d.id,
                            is_definition: false,
                        }));
                        break;
                    }
                    cur = d.base.and_then(|b| p.def(b));
                }
            }
        }
    }
    out
}

/// `import std.links.ib_ndr`: the last segment names a stdlib definition.
fn import_occurrences(
    db: &SourceDb,
    p: &Program,
    root: FileId,
    ast: &SourceAst,
) -> Vec<Occurrence> {
    let mut out = Vec::new();
    for item in &ast.items {
        let Item::Import(imp) = item else { continue };
        let ImportTarget::Module(segments) = &imp.target else {
            continue;
        };
        let Some(last) = segments.last() else {
            continue;
        };
        let module: Vec<&str> = segments[..segments.len() - 1]
            .iter()
            .map(|s| s.node.as_str())
            .collect();
        let Some((_, m)) = dic_compiler::stdlib::module(&module.join(".")) else {
            continue;
        };
        let Some(file) = db.find(m.path) else {
            continue;
        };
        if let Some(d) = p
            .defs
            .iter()
            .flatten()
            .find(|d| d.file == file && d.name == last.node)
        {
            out.push(Occurrence {
                file: root,
                span: last.span,
                def: d.id,
                is_definition: false,
            });
        }
    }
    out
}
