//! Type and unit checking: raw definitions → the typed [`Program`].
//!
//! Each definition is checked on demand (memoised, so a stdlib definition reached from
//! many places is checked once): its kind is looked up in [`crate::schema`], its base
//! is checked first and its fields inherited, its own entries are typed against the
//! schema (units and dimensions, ranges, enums, references) and override the base's,
//! and the merged fields become a typed [`Body`]. Every value keeps the span that set it.

use crate::diagnostics::{did_you_mean, Code, Diagnostic};
use crate::program::*;
use crate::resolve::{BaseRef, RawDef, Session};
use crate::schema::{Field, Kind, Ty, ENGINES, LAYOUT_FACTORS, PERCENTILES, VLLM_OPTIONS};
use crate::span::{FileId, FileSpan, Span, Spanned};
use crate::syntax::ast::{Block, Entry, Expr, ExprKind, Op};
use crate::text_rules;
use crate::units::{self, Dimension};
use std::collections::BTreeMap;

mod build;
mod deploy;
mod engine;
mod entries;
mod layout;
mod lora;
mod model_rules;
mod reader;
mod routing;
mod values;

#[derive(Clone, Copy, PartialEq)]
enum State {
    Todo,
    InProgress,
    Done,
}

pub struct Checker<'s, 'w> {
    pub s: &'s mut Session<'w>,
    state: Vec<State>,
    pub out: Vec<Option<Def>>,
}

impl<'s, 'w> Checker<'s, 'w> {
    pub fn new(s: &'s mut Session<'w>) -> Self {
        Checker {
            s,
            state: Vec::new(),
            out: Vec::new(),
        }
    }

    fn grow(&mut self) {
        while self.state.len() < self.s.raw.len() {
            self.state.push(State::Todo);
            self.out.push(None);
        }
    }

    /// Checks every definition of every user file; returns the program.
    pub fn check_user_files(mut self) -> Program {
        let mut user_defs = Vec::new();
        let user_modules: Vec<usize> = (0..self.s.modules.len())
            .filter(|m| !self.s.modules[*m].is_stdlib)
            .collect();
        for m in user_modules {
            let ids: Vec<DefId> = {
                let mut v: Vec<DefId> = self.s.modules[m].own.values().copied().collect();
                v.sort_by_key(|id| self.s.raw[*id].span.start);
                v
            };
            for id in ids {
                self.check_def(id);
                user_defs.push(id);
            }
        }
        self.s.unused_imports();
        self.unique_kubernetes_names(&user_defs);
        Program {
            defs: self.out,
            user_defs,
        }
    }

    /// E0208: two deployments whose Kubernetes names (and output folders, on a
    /// case-insensitive disk) would be the same.
    fn unique_kubernetes_names(&mut self, user_defs: &[DefId]) {
        let mut seen: BTreeMap<String, (String, FileSpan)> = BTreeMap::new();
        for id in user_defs {
            let Some(def) = self.out.get(*id).and_then(Option::as_ref) else {
                continue;
            };
            if def.kind != Kind::Deploy {
                continue;
            }
            // A disaggregated deployment also names its pools and its router.
            let disaggregated = matches!(
                &def.body,
                Body::Deploy(d) if matches!(d.layout, LayoutSpec::Disaggregated(_))
            );
            let mut names = vec![def.name.clone()];
            if disaggregated {
                names.extend(["prefill", "decode", "router"].map(|p| format!("{}-{p}", def.name)));
            }
            let at = FileSpan::new(def.file, def.name_span);
            for name in names {
                let k8s = text_rules::kubernetes_name(&name);
                match seen.get(&k8s) {
                    Some((first, first_at)) => {
                        let d = Diagnostic::new(
                            Code::KubernetesNameClash,
                            format!("deployments `{first}` and `{}` are both `{k8s}` in Kubernetes", def.name),
                        )
                        .primary(at.file, at.span, format!("its objects would overwrite those of `{first}`"))
                        .secondary(*first_at, "first here")
                        .help("Kubernetes names are lower case with `-` for `_`, cut at 50 characters (a disaggregated deployment also takes `<name>-prefill`, `-decode` and `-router`): rename one deployment");
                        self.push(d);
                        break;
                    }
                    None => {
                        seen.insert(k8s, (def.name.clone(), at));
                    }
                }
            }
        }
    }

    /// Checks every definition of every loaded module (used by the stdlib tests).
    pub fn check_everything(mut self) -> Program {
        let n = self.s.raw.len();
        for id in 0..n {
            self.check_def(id);
        }
        Program {
            defs: self.out,
            user_defs: (0..n).collect(),
        }
    }

    fn module_of(&self, file: FileId) -> usize {
        self.s.module_of_file[&file]
    }

    /// Reports that `raw`'s kind is none of the kinds.
    fn unknown_kind(&mut self, raw: &RawDef) {
        let file = raw.file;
        let kws: Vec<&str> = Kind::ALL.iter().map(|k| k.keyword()).collect();
        let d = Diagnostic::new(
            Code::UnknownKind,
            format!("unknown definition kind `{}`", raw.kind.node),
        )
        .primary(file, raw.kind.span, "not a kind of definition");
        let d = match did_you_mean(&raw.kind.node, kws.iter().copied()) {
            Some(s) => d.help(format!("did you mean `{s}`?")).fix(
                format!("use `{s}`"),
                FileSpan::new(file, raw.kind.span),
                s,
            ),
            None => d.help(format!(
                "the kinds are {}",
                kws.iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        };
        self.push(d);
    }

    /// The fields `raw` inherits from `base` (checked first), the base's id when it is
    /// one of the same kind, and whether the base is complete.
    fn inherit(
        &mut self,
        m: usize,
        kind: Kind,
        raw: &RawDef,
        base: &BaseRef,
    ) -> (BTreeMap<String, FieldValue>, Option<DefId>, bool) {
        let failed = (BTreeMap::new(), None, false);
        let (b, bspan) = match base {
            BaseRef::Named(name) => match self.s.lookup(m, kind.keyword(), &name.node) {
                Some(b) => (b, name.span),
                None => {
                    self.unknown_base(m, kind, raw, name);
                    return failed;
                }
            },
            BaseRef::Resolved(b, span) => (*b, *span),
        };
        self.grow();
        if self.state[b] == State::InProgress {
            self.push(
                Diagnostic::new(
                    Code::ExtensionCycle,
                    format!("`{}` extends itself", raw.name.node),
                )
                .primary(raw.file, bspan, "this base leads back to the definition")
                .help("a definition may extend another, never itself through a chain"),
            );
            return failed;
        }
        let complete = self.check_def(b);
        match &self.out[b] {
            Some(bdef) if bdef.kind != kind => {
                let d = Diagnostic::new(
                    Code::BaseKindMismatch,
                    format!(
                        "{} `{}` cannot extend {} `{}`",
                        kind.keyword(),
                        raw.name.node,
                        bdef.kind.keyword(),
                        bdef.name
                    ),
                )
                .primary(
                    raw.file,
                    bspan,
                    format!("this is a {}", bdef.kind.keyword()),
                )
                .secondary(bdef.location(), "defined here")
                .help(format!("extend a {} instead", kind.keyword()));
                self.push(d);
                failed
            }
            Some(bdef) => (bdef.fields.clone(), Some(b), complete),
            None => failed,
        }
    }

    /// A base named `name` that is no `kind` in scope: another kind's definition of that
    /// name, or an unknown name.
    fn unknown_base(&mut self, m: usize, kind: Kind, raw: &RawDef, name: &Spanned<String>) {
        let others = self.s.lookup_any(m, &name.node);
        let d = match others.first() {
            Some(&other) => {
                let other_kind = self.s.raw[other].kind.node.clone();
                let loc = FileSpan::new(self.s.raw[other].file, self.s.raw[other].name.span);
                Diagnostic::new(
                    Code::BaseKindMismatch,
                    format!(
                        "{} `{}` cannot extend {other_kind} `{}`",
                        kind.keyword(),
                        raw.name.node,
                        name.node
                    ),
                )
                .primary(raw.file, name.span, format!("this is a {other_kind}"))
                .secondary(loc, "defined here")
                .help(format!("extend a {} instead", kind.keyword()))
            }
            None => self.s.unknown_name(m, name, kind.keyword()),
        };
        self.push(d);
    }

    /// Every required field of `kind` is among `fields`; each missing one gets its
    /// diagnostic unless `written` already explains it (a wrong value, a misspelling).
    fn required_fields(
        &mut self,
        kind: Kind,
        raw: &RawDef,
        fields: &BTreeMap<String, FieldValue>,
        written: &[String],
    ) -> bool {
        let mut complete = true;
        for f in kind.schema().fields.iter().filter(|f| f.required) {
            if fields.contains_key(f.name) {
                continue;
            }
            complete = false;
            if written.iter().any(|w| w == f.name) {
                continue;
            }
            // A misspelt field (`hiden`) already has its E0302 with `did you mean
            // hidden?`: one mistake, one error.
            let misspelt = written.iter().any(|w| {
                !kind.schema().fields.iter().any(|g| g.name == w.as_str())
                    && did_you_mean(w, kind.schema().fields.iter().map(|g| g.name)) == Some(f.name)
            });
            if misspelt {
                continue;
            }
            self.push(
                Diagnostic::new(
                    Code::MissingField,
                    format!("{} `{}` has no `{}`", kind.keyword(), raw.name.node, f.name),
                )
                .primary(
                    raw.file,
                    raw.name.span,
                    format!("needs `{}`: {}", f.name, f.doc),
                )
                .help(format!("add `{} = …` ({})", f.name, f.ty.describe())),
            );
        }
        complete
    }

    fn push(&mut self, d: Diagnostic) {
        self.s.diags.push(d);
    }

    /// Checks one definition; true when it came out complete.
    pub fn check_def(&mut self, id: DefId) -> bool {
        self.grow();
        match self.state[id] {
            State::Done => return self.out[id].as_ref().is_some_and(|d| d.complete),
            State::InProgress => return false,
            State::Todo => {}
        }
        self.state[id] = State::InProgress;
        let raw: RawDef = self.s.raw[id].clone();
        let m = self.module_of(raw.file);
        let file = raw.file;
        let Some(kind) = Kind::from_keyword(&raw.kind.node) else {
            self.unknown_kind(&raw);
            self.state[id] = State::Done;
            return false;
        };
        let (mut fields, base_id, mut complete) = match &raw.base {
            Some(base) => self.inherit(m, kind, &raw, base),
            None => (BTreeMap::new(), None, true),
        };
        // Fields written in this body, valid or not: a field written with a wrong value
        // already has its diagnostic and is not also "missing".
        let written: Vec<String> = raw
            .body
            .iter()
            .flat_map(|b| b.entries.iter().map(|e| e.key[0].node.clone()))
            .collect();
        if let Some(body) = &raw.body {
            let own = self.check_entries(
                m,
                file,
                Some(id),
                body,
                kind.schema().fields,
                kind,
                &raw.name.node,
                true,
            );
            // A field written but not taken (an unknown name, a wrong value, a reference
            // that does not resolve) has its diagnostic; the definition is incomplete, so
            // nothing analyses it with that field silently missing.
            let taken = |w: &str| {
                own.keys()
                    .any(|k| k == w || k.strip_prefix(w).is_some_and(|r| r.starts_with('.')))
            };
            if written.iter().any(|w| !taken(w)) {
                complete = false;
            }
            // Keys are per percentile, so `ttft.p95` overrides only the base's `ttft.p95`.
            fields.extend(own);
        }
        // Without its base a definition's missing fields are a consequence, not news.
        let base_failed = raw.base.is_some() && base_id.is_none();
        if !base_failed {
            complete &= self.required_fields(kind, &raw, &fields, &written);
        }
        let (body, ok) = self.build(kind, id, &raw, &fields);
        complete &= ok;
        self.out[id] = Some(Def {
            id,
            kind,
            name: raw.name.node.clone(),
            file,
            name_span: raw.name.span,
            span: raw.span,
            base: base_id,
            fields,
            body,
            complete,
        });
        self.state[id] = State::Done;
        complete
    }
}

/// A number as the user wrote it (`150%`, `2k tokens`), else what kind of value it is.
fn written(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Quantity {
            text,
            unit: Some(u),
            ..
        } if u.node == "%" => format!("{text}%"),
        ExprKind::Quantity {
            text,
            unit: Some(u),
            ..
        } => format!("{text} {}", u.node),
        ExprKind::Quantity { text, .. } => text.clone(),
        _ => describe_expr(e),
    }
}

fn describe_expr(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Quantity { unit: Some(u), .. } => format!("a quantity in `{}`", u.node),
        ExprKind::Quantity { .. } => "a number".into(),
        ExprKind::Money { .. } => "a price".into(),
        ExprKind::Str(_) => "a string".into(),
        ExprKind::Reference { name, .. } => format!("the name `{}`", name.node),
        ExprKind::List(_) => "a list".into(),
        ExprKind::Object(_) => "a block".into(),
        ExprKind::Product(_) => "a product".into(),
    }
}

/// Prints a number without a trailing `.0`.
pub use crate::units::fmt_num;
