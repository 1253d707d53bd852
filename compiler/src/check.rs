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
            let k8s = text_rules::kubernetes_name(&def.name);
            let at = FileSpan::new(def.file, def.name_span);
            match seen.get(&k8s) {
                Some((first, first_at)) => {
                    let d = Diagnostic::new(
                        Code::KubernetesNameClash,
                        format!("deployments `{first}` and `{}` are both `{k8s}` in Kubernetes", def.name),
                    )
                    .primary(at.file, at.span, format!("its objects would overwrite those of `{first}`"))
                    .secondary(*first_at, "first here")
                    .help("Kubernetes names are lower case with `-` for `_`, cut at 50 characters: rename one deployment");
                    self.push(d);
                }
                None => {
                    seen.insert(k8s, (def.name.clone(), at));
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
            let kws: Vec<&str> = Kind::ALL.iter().map(|k| k.keyword()).collect();
            let mut d = Diagnostic::new(
                Code::UnknownKind,
                format!("unknown definition kind `{}`", raw.kind.node),
            )
            .primary(file, raw.kind.span, "not a kind of definition");
            d = match did_you_mean(&raw.kind.node, kws.iter().copied()) {
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
            self.state[id] = State::Done;
            return false;
        };
        let mut complete = true;
        let mut fields: BTreeMap<String, FieldValue> = BTreeMap::new();
        let mut base_id = None;
        if let Some(base) = &raw.base {
            let (bid, bspan) = match base {
                BaseRef::Named(name) => match self.s.lookup(m, kind.keyword(), &name.node) {
                    Some(b) => (Some(b), name.span),
                    None => {
                        let others = self.s.lookup_any(m, &name.node);
                        let d = match others.first() {
                            Some(&other) => {
                                let other_kind = self.s.raw[other].kind.node.clone();
                                let loc = FileSpan::new(
                                    self.s.raw[other].file,
                                    self.s.raw[other].name.span,
                                );
                                Diagnostic::new(
                                    Code::BaseKindMismatch,
                                    format!(
                                        "{} `{}` cannot extend {other_kind} `{}`",
                                        kind.keyword(),
                                        raw.name.node,
                                        name.node
                                    ),
                                )
                                .primary(file, name.span, format!("this is a {other_kind}"))
                                .secondary(loc, "defined here")
                                .help(format!("extend a {} instead", kind.keyword()))
                            }
                            None => self.s.unknown_name(m, name, kind.keyword()),
                        };
                        self.push(d);
                        (None, name.span)
                    }
                },
                BaseRef::Resolved(b, span) => (Some(*b), *span),
            };
            match bid {
                None => complete = false,
                Some(b) => {
                    self.grow();
                    if self.state[b] == State::InProgress {
                        self.push(
                            Diagnostic::new(
                                Code::ExtensionCycle,
                                format!("`{}` extends itself", raw.name.node),
                            )
                            .primary(file, bspan, "this base leads back to the definition")
                            .help("a definition may extend another, never itself through a chain"),
                        );
                        complete = false;
                    } else {
                        complete &= self.check_def(b);
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
                                .primary(file, bspan, format!("this is a {}", bdef.kind.keyword()))
                                .secondary(bdef.location(), "defined here")
                                .help(format!("extend a {} instead", kind.keyword()));
                                self.push(d);
                                complete = false;
                            }
                            Some(bdef) => {
                                fields = bdef.fields.clone();
                                base_id = Some(b);
                            }
                            None => complete = false,
                        }
                    }
                }
            }
        }
        // Fields written in this body, valid or not: a field written with a wrong value
        // already has its diagnostic and is not also "missing".
        let written: Vec<String> = raw
            .body
            .iter()
            .flat_map(|b| b.entries.iter().map(|e| e.key[0].node.clone()))
            .collect();
        if let Some(body) = &raw.body {
            let schema = kind.schema();
            let own =
                self.check_entries(m, file, id, body, schema.fields, kind, &raw.name.node, true);
            for (k, v) in own {
                // An override of a bound replaces every percentile of that metric? No: keys
                // are per percentile, so `ttft.p95` overrides only `ttft.p95`.
                fields.insert(k, v);
            }
        }
        // Without its base a definition's missing fields are a consequence, not news.
        let base_failed = raw.base.is_some() && base_id.is_none();
        for f in kind
            .schema()
            .fields
            .iter()
            .filter(|f| f.required && !base_failed)
        {
            if !fields.contains_key(f.name) {
                complete = false;
                if written.iter().any(|w| w == f.name) {
                    continue;
                }
                self.push(
                    Diagnostic::new(
                        Code::MissingField,
                        format!("{} `{}` has no `{}`", kind.keyword(), raw.name.node, f.name),
                    )
                    .primary(
                        file,
                        raw.name.span,
                        format!("needs `{}`: {}", f.name, f.doc),
                    )
                    .help(format!(
                        "add `{} = …` ({})",
                        f.name,
                        f.ty.describe()
                    )),
                );
            }
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

    /// Types the entries of a block against a field table.
    #[allow(clippy::too_many_arguments)]
    fn check_entries(
        &mut self,
        m: usize,
        file: FileId,
        id: DefId,
        block: &Block,
        table: &'static [Field],
        kind: Kind,
        def_name: &str,
        top: bool,
    ) -> BTreeMap<String, FieldValue> {
        let mut out: BTreeMap<String, FieldValue> = BTreeMap::new();
        let mut seen: BTreeMap<String, Span> = BTreeMap::new();
        for entry in &block.entries {
            let key = entry.key_text();
            if let Some(prev) = seen.get(&key) {
                let prev = *prev;
                self.push(
                    Diagnostic::new(
                        Code::DuplicateField,
                        format!("`{key}` is set twice in `{def_name}`"),
                    )
                    .primary(file, entry.key_span, "set again here")
                    .secondary(FileSpan::new(file, prev), "first set here")
                    .help("remove one of them"),
                );
                continue;
            }
            seen.insert(key.clone(), entry.key_span);
            let head = &entry.key[0];
            let Some(field) = table.iter().find(|f| f.name == head.node) else {
                let names: Vec<&str> = table.iter().map(|f| f.name).collect();
                let what = if top {
                    format!("{} `{def_name}`", kind.keyword())
                } else {
                    "this block".to_string()
                };
                let mut d = Diagnostic::new(
                    Code::UnknownField,
                    format!("{what} has no field `{}`", head.node),
                )
                .primary(file, head.span, "unknown field");
                d = match did_you_mean(&head.node, names.iter().copied()) {
                    Some(s) => d.help(format!("did you mean `{s}`?")).fix(
                        format!("use `{s}`"),
                        FileSpan::new(file, head.span),
                        s,
                    ),
                    None => d.help(format!(
                        "the fields are {}",
                        names
                            .iter()
                            .map(|n| format!("`{n}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                };
                self.push(d);
                continue;
            };
            // Sub-keys only for bounds (`ttft.p95`).
            let stored_key = match field.ty {
                Ty::Bound(_) => {
                    if entry.key.len() > 2 {
                        self.push(
                            Diagnostic::new(
                                Code::UnknownField,
                                format!("`{key}` has too many parts"),
                            )
                            .primary(
                                file,
                                entry.key_span,
                                "expected `metric` or `metric.percentile`",
                            )
                            .help(format!("write e.g. `{}.p95`", field.name)),
                        );
                        continue;
                    }
                    let pct = entry.key.get(1).map(|p| p.node.as_str()).unwrap_or("p50");
                    if !PERCENTILES.contains(&pct) {
                        let p = &entry.key[1];
                        let mut d = Diagnostic::new(
                            Code::UnknownOption,
                            format!("unknown percentile `{}`", p.node),
                        )
                        .primary(
                            file,
                            p.span,
                            "not a percentile dic predicts",
                        );
                        d = match did_you_mean(&p.node, PERCENTILES.iter().copied()) {
                            Some(s) => d.help(format!("did you mean `{s}`?")),
                            None => d.help(format!("use one of {}", PERCENTILES.join(", "))),
                        };
                        self.push(d);
                        continue;
                    }
                    format!("{}.{pct}", field.name)
                }
                _ => {
                    if entry.key.len() > 1 {
                        let extra = &entry.key[1];
                        self.push(
                            Diagnostic::new(
                                Code::UnknownField,
                                format!("`{}` has no part `{}`", field.name, extra.node),
                            )
                            .primary(file, extra.span, "unexpected")
                            .help(format!("write `{} = …`", field.name)),
                        );
                        continue;
                    }
                    field.name.to_string()
                }
            };
            if !self.check_op(file, entry, field) {
                continue;
            }
            let value = match field.ty {
                Ty::Bound(dim) => self
                    .quantity(file, &entry.value, dim, field.name, kind)
                    .and_then(|v| {
                        let range = crate::schema::default_range(dim);
                        self.in_range(file, &entry.value, v, dim, range, field.name)
                    })
                    .map(|v| Value::Bound(entry.op.node, v)),
                ty => self.eval(m, file, &entry.value, &ty, field.name, kind),
            };
            if let Some(value) = value {
                out.insert(
                    stored_key,
                    FieldValue {
                        value,
                        at: FileSpan::new(file, entry.value.span),
                        entry: FileSpan::new(file, entry.span),
                        set_by: id,
                    },
                );
            }
        }
        out
    }

    fn check_op(&mut self, file: FileId, entry: &Entry, field: &Field) -> bool {
        let op = entry.op.node;
        let ok = match field.ty {
            Ty::Bound(Dimension::Time) => matches!(op, Op::Le | Op::Lt),
            Ty::Bound(_) => matches!(op, Op::Ge | Op::Gt),
            _ => op == Op::Assign,
        };
        if !ok {
            let want = match field.ty {
                Ty::Bound(Dimension::Time) => "`<=`: a latency is an upper bound",
                Ty::Bound(_) => "`>=`: a throughput is a lower bound",
                _ => "`=`",
            };
            self.push(
                Diagnostic::new(
                    Code::WrongOperator,
                    format!("`{}` cannot be used with `{}`", op.as_str(), field.name),
                )
                .primary(file, entry.op.span, "wrong operator")
                .help(format!("use {want}")),
            );
        }
        ok
    }

    /// A name not found as the kind wanted: either it names another kind, or nothing.
    fn not_found(
        &mut self,
        m: usize,
        file: FileId,
        name: &Spanned<String>,
        want: Kind,
        field: &str,
    ) -> Diagnostic {
        let others = self.s.lookup_any(m, &name.node);
        if let Some(&other) = others.first() {
            let other_kind = self.s.raw[other].kind.node.clone();
            let loc = FileSpan::new(self.s.raw[other].file, self.s.raw[other].name.span);
            return Diagnostic::new(
                Code::TypeMismatch,
                format!(
                    "`{field}` expects a {}, but `{}` is a {other_kind}",
                    want.keyword(),
                    name.node
                ),
            )
            .primary(file, name.span, format!("a {other_kind}"))
            .secondary(loc, "defined here");
        }
        self.s.unknown_name(m, name, want.keyword())
    }

    fn type_error(&mut self, file: FileId, expr: &Expr, ty: &Ty, field: &str) {
        let found = describe_expr(expr);
        self.push(
            Diagnostic::new(
                Code::TypeMismatch,
                format!("`{field}` expects {}, found {found}", ty.describe()),
            )
            .primary(file, expr.span, format!("this is {found}")),
        );
    }

    /// A quantity of `dim` in base units.
    fn quantity(
        &mut self,
        file: FileId,
        expr: &Expr,
        dim: Dimension,
        field: &str,
        kind: Kind,
    ) -> Option<f64> {
        match &expr.kind {
            ExprKind::Quantity {
                value, unit: None, ..
            } => {
                if matches!(dim, Dimension::Tokens | Dimension::Ratio) {
                    return Some(*value);
                }
                let example = dim.units().next().map(|u| u.symbol).unwrap_or("");
                self.push(
                    Diagnostic::new(Code::UnitMismatch, format!("`{field}` needs a unit"))
                        .primary(file, expr.span, format!("expected {}", dim.describe()))
                        .help(format!("add a unit, e.g. `{} {example}`", fmt_num(*value)))
                        .fix(
                            "add the unit",
                            FileSpan::new(
                                file,
                                Span::new(expr.span.end as usize, expr.span.end as usize),
                            ),
                            format!(" {example}"),
                        ),
                );
                None
            }
            ExprKind::Quantity {
                value,
                unit: Some(u),
                ..
            } => {
                let Some(unit) = units::lookup(&u.node) else {
                    let mut d =
                        Diagnostic::new(Code::UnknownUnit, format!("unknown unit `{}`", u.node))
                            .primary(file, u.span, "not a unit dic knows");
                    if let Some(h) = units::suggest(&u.node) {
                        d = d.help(h);
                    } else {
                        d = d.help(format!("`{field}` expects {}", dim.describe()));
                    }
                    self.push(d);
                    return None;
                };
                if unit.dim != dim {
                    let mut d = Diagnostic::new(
                        Code::UnitMismatch,
                        format!("`{field}` expects {}, found `{}`", dim.describe(), u.node),
                    )
                    .primary(
                        file,
                        u.span,
                        format!("`{}` is {}", u.node, unit.dim.describe()),
                    );
                    if dim == Dimension::Bytes && unit.dim == Dimension::Bandwidth {
                        let mut size = u.node.trim_end_matches("/s").to_string();
                        if kind == Kind::Gpu && field == "memory" && !size.contains('i') {
                            // GPU memory is binary (see W0301).
                            size = size.replace('B', "iB");
                        }
                        d = d.help(format!(
                            "a size has no `/s`: write `{} {size}`",
                            fmt_num(*value)
                        ));
                    } else if dim == Dimension::Bandwidth && unit.dim == Dimension::Bytes {
                        d = d.help(format!(
                            "a bandwidth is per second: write `{} {}/s`",
                            fmt_num(*value),
                            u.node
                        ));
                    } else {
                        let examples: Vec<&str> = dim.units().take(4).map(|u| u.symbol).collect();
                        d = d.help(format!(
                            "use one of {}",
                            examples
                                .iter()
                                .map(|e| format!("`{e}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    }
                    self.push(d);
                    return None;
                }
                if kind == Kind::Gpu && field == "memory" && matches!(u.node.as_str(), "GB" | "TB")
                {
                    let gib = u.node.replace('B', "iB");
                    self.push(
                        Diagnostic::new(
                            Code::DecimalBinaryMemory,
                            format!("GPU memory given in decimal `{}`", u.node),
                        )
                        .primary(
                            file,
                            u.span,
                            format!(
                                "{} {} is {:.1} GiB",
                                fmt_num(*value),
                                u.node,
                                value * unit.factor / 1073741824.0
                            ),
                        )
                        .help(format!(
                            "vendors' \"{} GB\" of HBM means binary gibibytes: write `{} {gib}`",
                            fmt_num(*value),
                            fmt_num(*value)
                        ))
                        .fix(
                            format!("use `{gib}`"),
                            FileSpan::new(file, u.span),
                            gib,
                        ),
                    );
                }
                Some(value * unit.factor)
            }
            ExprKind::Money { value, per, .. } => {
                match units::money(per.as_ref().map(|p| p.node.as_str())) {
                    Some((d, f)) if d == dim => Some(value * f),
                    Some((d, _)) => {
                        self.push(
                            Diagnostic::new(
                                Code::UnitMismatch,
                                format!(
                                    "`{field}` expects {}, found {}",
                                    dim.describe(),
                                    d.describe()
                                ),
                            )
                            .primary(file, expr.span, "a price")
                            .help(if dim == Dimension::MoneyRate {
                                "add a time: `$12.50/h`"
                            } else {
                                "use a plain amount"
                            }),
                        );
                        None
                    }
                    None => {
                        let p = per.as_ref().expect("money(None) is always Some");
                        self.push(
                            Diagnostic::new(
                                Code::UnknownUnit,
                                format!("unknown time unit `{}` in a price", p.node),
                            )
                            .primary(file, p.span, "not a time unit")
                            .help("use `/h`, `/min`, `/s`, `/day` or `/month`"),
                        );
                        None
                    }
                }
            }
            _ => {
                self.type_error(
                    file,
                    expr,
                    &Ty::Quantity(dim, crate::schema::default_range(dim)),
                    field,
                );
                None
            }
        }
    }

    /// `v` when the field's range holds it, else E0307.
    fn in_range(
        &mut self,
        file: FileId,
        expr: &Expr,
        v: f64,
        dim: Dimension,
        range: crate::schema::Range,
        field: &str,
    ) -> Option<f64> {
        if range.contains(v) {
            return Some(v);
        }
        self.push(
            Diagnostic::new(
                Code::OutOfRange,
                format!("`{field}` = {} is out of range", describe_expr(expr)),
            )
            .primary(file, expr.span, format!("must be {}", range.describe(dim))),
        );
        None
    }

    /// E0312: a string that breaks its field's rule (an option where a value belongs, a
    /// variable name that is no name, a Kubernetes name the API server refuses).
    fn invalid_text(
        &mut self,
        file: FileId,
        expr: &Expr,
        s: &str,
        rule: crate::text_rules::TextRule,
        field: &str,
        why: &str,
    ) {
        let shown: String = s.chars().take(60).collect();
        let shown = if shown.len() < s.len() {
            format!("{shown}…")
        } else {
            shown
        };
        self.push(
            Diagnostic::new(
                Code::InvalidText,
                format!("`{field}` value {shown:?} is not allowed"),
            )
            .primary(file, expr.span, why.to_string())
            .help(format!("`{field}` takes {}", rule.describe())),
        );
    }

    fn int(&mut self, file: FileId, expr: &Expr, min: i64, max: i64, field: &str) -> Option<i64> {
        match &expr.kind {
            ExprKind::Quantity { value, unit, .. } => {
                if let Some(u) = unit {
                    self.push(
                        Diagnostic::new(
                            Code::UnitMismatch,
                            format!("`{field}` is a plain count, found `{}`", u.node),
                        )
                        .primary(file, u.span, "a count has no unit")
                        .help(format!("write `{field} = {}`", fmt_num(*value))),
                    );
                    return None;
                }
                if value.fract() != 0.0 {
                    self.push(
                        Diagnostic::new(
                            Code::TypeMismatch,
                            format!("`{field}` must be a whole number"),
                        )
                        .primary(file, expr.span, "has a fraction")
                        .help(format!("use `{}`", value.round())),
                    );
                    return None;
                }
                if *value < min as f64 || *value > max as f64 {
                    self.push(
                        Diagnostic::new(
                            Code::OutOfRange,
                            format!("`{field}` = {} is out of range", fmt_num(*value)),
                        )
                        .primary(
                            file,
                            expr.span,
                            format!("must be between {min} and {max}"),
                        ),
                    );
                    return None;
                }
                Some(*value as i64)
            }
            _ => {
                self.type_error(file, expr, &Ty::Int { min, max }, field);
                None
            }
        }
    }

    fn reference(
        &mut self,
        m: usize,
        file: FileId,
        expr: &Expr,
        want: Kind,
        field: &str,
    ) -> Option<DefId> {
        match &expr.kind {
            ExprKind::Reference {
                name,
                count: None,
                overrides,
            } => {
                let id = match self.s.lookup(m, want.keyword(), &name.node) {
                    Some(id) => id,
                    None => {
                        let d = self.not_found(m, file, name, want, field);
                        self.push(d);
                        return None;
                    }
                };
                self.check_def(id);
                let actual = self.out[id].as_ref().map(|d| d.kind);
                if let Some(actual) = actual {
                    if actual != want {
                        let loc = self.out[id].as_ref().map(|d| d.location());
                        let mut d = Diagnostic::new(
                            Code::TypeMismatch,
                            format!(
                                "`{field}` expects a {}, but `{}` is a {}",
                                want.keyword(),
                                name.node,
                                actual.keyword()
                            ),
                        )
                        .primary(
                            file,
                            name.span,
                            format!("a {}", actual.keyword()),
                        );
                        if let Some(loc) = loc {
                            d = d.secondary(loc, "defined here");
                        }
                        self.push(d);
                        return None;
                    }
                }
                match overrides {
                    None => Some(id),
                    Some(block) => {
                        let new = self.s.raw.len();
                        self.s.raw.push(RawDef {
                            file,
                            kind: Spanned::new(want.keyword().to_string(), name.span),
                            name: Spanned::new(format!("{}{{…}}", name.node), name.span),
                            base: Some(BaseRef::Resolved(id, name.span)),
                            body: Some(std::sync::Arc::new(block.clone())),
                            span: expr.span,
                        });
                        self.check_def(new);
                        Some(new)
                    }
                }
            }
            ExprKind::Str(s) if want == Kind::Gpu => self.gpu_by_string(m, file, expr, s),
            _ => {
                self.type_error(file, expr, &Ty::Ref(want), field);
                None
            }
        }
    }

    /// A GPU named as `nvidia-smi` prints it: looked up in scope first, then in the stdlib.
    fn gpu_by_string(&mut self, m: usize, file: FileId, expr: &Expr, s: &str) -> Option<DefId> {
        let wanted = crate::stdlib::normalize_gpu_name(s);
        let in_scope: Vec<DefId> = self.s.modules[m]
            .own
            .values()
            .chain(self.s.modules[m].imports.values().map(|b| &b.def))
            .copied()
            .collect();
        for id in in_scope {
            if self.s.raw[id].kind.node != "gpu" {
                continue;
            }
            self.check_def(id);
            if let Some(Def {
                body: Body::Gpu(g),
                name,
                ..
            }) = &self.out[id]
            {
                let hit = std::iter::once(name.as_str())
                    .chain(g.names.iter().map(String::as_str))
                    .any(|n| crate::stdlib::normalize_gpu_name(n) == wanted);
                if hit {
                    return Some(id);
                }
            }
        }
        match crate::stdlib::find_gpu(s) {
            Some((module, name)) => {
                let sm = crate::stdlib::MODULES[module].path;
                let mi = match self.s.db.find(sm) {
                    Some(f) => self.s.module_of_file[&f],
                    None => self.s.load_stdlib(module),
                };
                let id = self.s.modules[mi]
                    .own
                    .get(&("gpu".to_string(), name))
                    .copied()?;
                self.check_def(id);
                Some(id)
            }
            None => {
                self.push(
                    Diagnostic::new(Code::UnknownName, format!("unknown GPU \"{s}\""))
                        .primary(file, expr.span, "no GPU in scope or in the stdlib has this name")
                        .help("`dic list gpus` shows the catalog; names match as `nvidia-smi` prints them"),
                );
                None
            }
        }
    }

    fn enum_word(
        &mut self,
        file: FileId,
        expr: &Expr,
        opts: &'static [&'static str],
        field: &str,
    ) -> Option<String> {
        match &expr.kind {
            ExprKind::Reference {
                name,
                count: None,
                overrides: None,
            } => {
                if opts.contains(&name.node.as_str()) {
                    return Some(name.node.clone());
                }
                let mut d = Diagnostic::new(
                    Code::UnknownOption,
                    format!("`{}` is not a valid `{field}`", name.node),
                )
                .primary(file, name.span, "unknown option");
                d = match did_you_mean(&name.node, opts.iter().copied()) {
                    Some(s) => d.help(format!("did you mean `{s}`?")).fix(
                        format!("use `{s}`"),
                        FileSpan::new(file, name.span),
                        s,
                    ),
                    None => d.help(format!(
                        "use one of {}",
                        opts.iter()
                            .map(|o| format!("`{o}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                };
                self.push(d);
                None
            }
            _ => {
                self.type_error(file, expr, &Ty::Enum(opts), field);
                None
            }
        }
    }

    fn eval(
        &mut self,
        m: usize,
        file: FileId,
        expr: &Expr,
        ty: &Ty,
        field: &str,
        kind: Kind,
    ) -> Option<Value> {
        match *ty {
            Ty::Quantity(dim, range) => self
                .quantity(file, expr, dim, field, kind)
                .and_then(|v| self.in_range(file, expr, v, dim, range, field))
                .map(Value::Number),
            Ty::Int { min, max } => self.int(file, expr, min, max, field).map(Value::Int),
            Ty::Bool => match &expr.kind {
                ExprKind::Reference {
                    name,
                    count: None,
                    overrides: None,
                } if name.node == "true" || name.node == "false" => {
                    Some(Value::Bool(name.node == "true"))
                }
                _ => {
                    self.type_error(file, expr, ty, field);
                    None
                }
            },
            Ty::Str(rule) => match &expr.kind {
                ExprKind::Str(s) => match rule.check(s) {
                    Ok(()) => Some(Value::Str(s.clone())),
                    Err(why) => {
                        self.invalid_text(file, expr, s, rule, field, &why);
                        None
                    }
                },
                _ => {
                    self.type_error(file, expr, ty, field);
                    None
                }
            },
            Ty::Enum(opts) => self.enum_word(file, expr, opts, field).map(Value::Enum),
            Ty::Ref(k) => self.reference(m, file, expr, k, field).map(Value::Ref),
            Ty::List(inner) => match &expr.kind {
                ExprKind::List(items) => {
                    let vals: Vec<Value> = items
                        .iter()
                        .filter_map(|i| self.eval(m, file, i, inner, field, kind))
                        .collect();
                    (vals.len() == items.len()).then_some(Value::List(vals))
                }
                _ => {
                    self.type_error(file, expr, ty, field);
                    None
                }
            },
            Ty::CountOf(k) => self
                .count_of(m, file, expr, k, field)
                .map(|(n, id)| Value::CountOf(n, id)),
            Ty::Groups(k) => {
                let items: Vec<&Expr> = match &expr.kind {
                    ExprKind::List(items) if !items.is_empty() => items.iter().collect(),
                    _ => vec![expr],
                };
                let groups: Vec<(u64, DefId)> = items
                    .iter()
                    .filter_map(|e| self.count_of(m, file, e, k, field))
                    .collect();
                (groups.len() == items.len()).then_some(Value::Groups(groups))
            }
            Ty::Layout => self.layout(file, expr).map(Value::Layout),
            Ty::Engine => self.engine(m, file, expr, field),
            Ty::Bound(dim) => self
                .quantity(file, expr, dim, field, kind)
                .and_then(|v| {
                    self.in_range(file, expr, v, dim, crate::schema::default_range(dim), field)
                })
                .map(|v| Value::Bound(Op::Le, v)),
        }
    }

    fn count_of(
        &mut self,
        m: usize,
        file: FileId,
        expr: &Expr,
        k: Kind,
        field: &str,
    ) -> Option<(u64, DefId)> {
        match &expr.kind {
            ExprKind::Product(factors) if factors.len() == 2 => {
                // GPUs in a node, or nodes in a cluster: bounded so per-rank work stays finite.
                let max = if k == Kind::Node {
                    crate::schema::MAX_NODES
                } else {
                    crate::schema::MAX_GPUS
                };
                let n = self.int(file, &factors[0], 1, max, field)?;
                let id = self.reference(m, file, &factors[1], k, field)?;
                Some((n as u64, id))
            }
            ExprKind::Reference { .. } | ExprKind::Str(_) => {
                Some((1, self.reference(m, file, expr, k, field)?))
            }
            _ => {
                self.type_error(file, expr, &Ty::CountOf(k), field);
                None
            }
        }
    }

    fn layout(&mut self, file: FileId, expr: &Expr) -> Option<LayoutSpec> {
        let factors: Vec<&Expr> = match &expr.kind {
            ExprKind::Reference {
                name,
                count: None,
                overrides: None,
            } if name.node == "auto" => return Some(LayoutSpec::Auto),
            ExprKind::Product(f) => f.iter().collect(),
            ExprKind::Reference { .. } => vec![expr],
            _ => {
                self.type_error(file, expr, &Ty::Layout, "layout");
                return None;
            }
        };
        let mut layout = Layout::default();
        let mut seen: Vec<&str> = Vec::new();
        let mut ok = true;
        for f in factors {
            let ExprKind::Reference {
                name,
                count,
                overrides: None,
            } = &f.kind
            else {
                self.push(
                    Diagnostic::new(
                        Code::InvalidLayout,
                        "a layout is made of factors like `tp 8`",
                    )
                    .primary(file, f.span, "not a layout factor")
                    .help("write e.g. `layout = tp 8 × pp 2 × dp 2` or `layout = auto`"),
                );
                ok = false;
                continue;
            };
            let key = name.node.as_str();
            let Some((canon, _)) = LAYOUT_FACTORS.iter().find(|(k, _)| *k == key) else {
                let mut d = Diagnostic::new(
                    Code::InvalidLayout,
                    format!("unknown layout factor `{key}`"),
                )
                .primary(file, name.span, "not tp, pp, dp, ep, dcp or pcp");
                if key == "auto" {
                    d = d.help("`auto` stands alone: `layout = auto`");
                } else if let Some(s) = did_you_mean(key, LAYOUT_FACTORS.iter().map(|(k, _)| *k)) {
                    d = d.help(format!("did you mean `{s}`?"));
                }
                self.push(d);
                ok = false;
                continue;
            };
            if seen.contains(canon) {
                self.push(
                    Diagnostic::new(
                        Code::InvalidLayout,
                        format!("`{key}` appears twice in the layout"),
                    )
                    .primary(file, f.span, "repeated")
                    .help("give each factor once"),
                );
                ok = false;
                continue;
            }
            seen.push(canon);
            let n = count.as_ref().map(|c| c.node);
            if *canon == "ep" {
                if let Some(c) = count {
                    self.push(
                        Diagnostic::new(Code::InvalidLayout, "`ep` takes no size")
                            .primary(file, c.span, "remove this")
                            .help("the EP size is tp × dp, as in vLLM's --enable-expert-parallel"),
                    );
                    ok = false;
                }
                layout.ep = true;
                continue;
            }
            let Some(n) = n else {
                self.push(
                    Diagnostic::new(Code::InvalidLayout, format!("`{key}` needs a size"))
                        .primary(file, f.span, "missing size")
                        .help(format!("write e.g. `{key} 2`")),
                );
                ok = false;
                continue;
            };
            if n == 0 || n > 1 << 20 {
                self.push(
                    Diagnostic::new(Code::OutOfRange, format!("`{key} {n}` is out of range"))
                        .primary(file, f.span, "sizes go from 1 to 1048576"),
                );
                ok = false;
                continue;
            }
            match *canon {
                "tp" => layout.tp = n,
                "pp" => layout.pp = n,
                "dp" => layout.dp = n,
                "dcp" => layout.dcp = n,
                _ => layout.pcp = n,
            }
        }
        let gpus = layout
            .tp
            .saturating_mul(layout.pp)
            .saturating_mul(layout.dp)
            .saturating_mul(layout.pcp);
        if ok && gpus > crate::schema::MAX_GPUS as u64 {
            self.push(
                Diagnostic::new(Code::OutOfRange, format!("the layout needs {gpus} GPUs"))
                    .primary(file, expr.span, format!("tp × pp × dp × pcp is {gpus}"))
                    .help(format!(
                        "dic plans deployments of up to {} GPUs",
                        crate::schema::MAX_GPUS
                    )),
            );
            ok = false;
        }
        ok.then_some(LayoutSpec::Explicit(layout))
    }

    fn engine(&mut self, m: usize, file: FileId, expr: &Expr, field: &str) -> Option<Value> {
        let ExprKind::Reference {
            name,
            count: None,
            overrides,
        } = &expr.kind
        else {
            self.type_error(file, expr, &Ty::Engine, field);
            return None;
        };
        if !ENGINES.contains(&name.node.as_str()) {
            let mut d = Diagnostic::new(
                Code::UnknownOption,
                format!("unknown engine `{}`", name.node),
            )
            .primary(file, name.span, "dic targets vLLM");
            if let Some(s) = did_you_mean(&name.node, ENGINES.iter().copied()) {
                d = d.help(format!("did you mean `{s}`?"));
            } else {
                d = d.help("use `vllm { … }`");
            }
            self.push(d);
            return None;
        }
        let options = match overrides {
            Some(block) => {
                let id = usize::MAX;
                let mut opts = self.check_entries(
                    m,
                    file,
                    id,
                    block,
                    VLLM_OPTIONS,
                    Kind::Deploy,
                    "vllm",
                    false,
                );
                for v in opts.values_mut() {
                    v.set_by = usize::MAX;
                }
                opts
            }
            None => BTreeMap::new(),
        };
        Some(Value::Engine(name.node.clone(), options))
    }

    /// Builds the typed body from merged fields; false when a semantic rule failed.
    fn build(
        &mut self,
        kind: Kind,
        _id: DefId,
        raw: &RawDef,
        f: &BTreeMap<String, FieldValue>,
    ) -> (Body, bool) {
        let r = Reader(f);
        let file = raw.file;
        let mut ok = true;
        let body = match kind {
            Kind::Gpu => {
                let bf16 = r.num("bf16").unwrap_or(0.0);
                Body::Gpu(Gpu {
                    names: r.strings("names"),
                    vendor: r.word("vendor"),
                    architecture: r.word("architecture"),
                    memory: r.num("memory").unwrap_or(0.0),
                    memory_bandwidth: r.num("memory_bandwidth").unwrap_or(0.0),
                    bf16,
                    fp16: r.num("fp16").unwrap_or(bf16),
                    fp8: r.num("fp8"),
                    fp4: r.num("fp4"),
                    int8: r.num("int8"),
                    scale_up: r.reference("scale_up"),
                    pcie: r.reference("pcie"),
                })
            }
            Kind::Link => Body::Link(Link {
                link_type: r
                    .word("type")
                    .and_then(|w| LinkType::parse(&w))
                    .unwrap_or(LinkType::Ethernet),
                bandwidth: r.num("bandwidth").unwrap_or(0.0),
                latency: r.num("latency").unwrap_or(0.0),
                generation: r.string("generation"),
            }),
            Kind::Node => {
                let (gpu_count, gpu) = r.count_of("gpus").unwrap_or((0, usize::MAX));
                let scale_up = r.reference("scale_up");
                let default_domain = if scale_up.is_some() { gpu_count } else { 1 };
                Body::Node(Node {
                    gpu,
                    gpu_count,
                    scale_up,
                    scale_up_domain: r
                        .int("scale_up_domain")
                        .map(|v| v as u64)
                        .unwrap_or(default_domain),
                    nics: r.count_of("nics"),
                    price: r.num("price"),
                    provider: r.string("provider"),
                    cpu_memory: r.num("cpu_memory"),
                    network: r.reference("network"),
                })
            }
            Kind::Cluster => Body::Cluster(Cluster {
                groups: match f.get("nodes").map(|v| &v.value) {
                    Some(Value::Groups(g)) => g
                        .iter()
                        .map(|(count, node)| NodeGroup {
                            count: *count,
                            node: *node,
                        })
                        .collect(),
                    _ => Vec::new(),
                },
                fabric: r.reference("fabric"),
                price: r.num("price"),
                region: r.string("region"),
                network: r.reference("network"),
            }),
            Kind::Model => {
                let heads = r.uint("heads").unwrap_or(1).max(1);
                let hidden = r.uint("hidden").unwrap_or(0);
                let kv_heads = r.uint("kv_heads").unwrap_or(heads);
                let experts = r.uint("experts").unwrap_or(0);
                let attention = match r.word("attention").as_deref() {
                    Some("mla") => Attention::Mla,
                    Some("mha") => Attention::Mha,
                    Some(_) => Attention::Gqa,
                    None if r.uint("kv_lora_rank").is_some() => Attention::Mla,
                    None if kv_heads == heads => Attention::Mha,
                    None => Attention::Gqa,
                };
                let dtype = r.word("dtype").unwrap_or_else(|| "bf16".into());
                let model = Model {
                    hf: r.string("hf"),
                    parameters: r.num("parameters").unwrap_or(0.0),
                    layers: r.uint("layers").unwrap_or(0),
                    hidden,
                    heads,
                    kv_heads,
                    head_dim: r.uint("head_dim").unwrap_or(hidden / heads),
                    intermediate: r.uint("intermediate").unwrap_or(0),
                    vocab: r.uint("vocab").unwrap_or(0),
                    max_context: r.num("max_context").unwrap_or(0.0),
                    attention,
                    experts,
                    experts_per_token: r.uint("experts_per_token").unwrap_or(0),
                    shared_experts: r.uint("shared_experts").unwrap_or(0),
                    moe_intermediate: r.uint("moe_intermediate").unwrap_or(0),
                    dense_layers: r.uint("dense_layers").unwrap_or(0),
                    moe_layer_step: r.uint("moe_layer_step").unwrap_or(1),
                    kv_lora_rank: r.uint("kv_lora_rank").unwrap_or(0),
                    q_lora_rank: r.uint("q_lora_rank").unwrap_or(0),
                    qk_rope_head_dim: r.uint("qk_rope_head_dim").unwrap_or(0),
                    qk_nope_head_dim: r.uint("qk_nope_head_dim").unwrap_or(0),
                    v_head_dim: r.uint("v_head_dim").unwrap_or(0),
                    sliding_window: r.num("sliding_window"),
                    sliding_layers: r.uint("sliding_layers").unwrap_or(0),
                    tied_embeddings: r.boolean("tied_embeddings").unwrap_or(false),
                    weights: r.word("weights").unwrap_or_else(|| dtype.clone()),
                    dtype,
                    kv_cache: r.word("kv_cache").unwrap_or_else(|| "auto".into()),
                    prequantized: r.boolean("prequantized").unwrap_or(false),
                };
                ok &= self.model_rules(file, raw, f, &model);
                Body::Model(model)
            }
            Kind::Workload => {
                let w = Workload {
                    prompt: r.num("prompt").unwrap_or(0.0),
                    output: r.num("output").unwrap_or(0.0),
                    rate: r.num("rate"),
                    concurrency: r.uint("concurrency"),
                };
                let written = raw
                    .body
                    .iter()
                    .flat_map(|b| b.entries.iter())
                    .any(|e| e.key[0].node == "rate" || e.key[0].node == "concurrency");
                if w.rate.is_none() && w.concurrency.is_none() && !written {
                    self.push(
                        Diagnostic::new(
                            Code::MissingField,
                            format!(
                                "workload `{}` has neither `rate` nor `concurrency`",
                                raw.name.node
                            ),
                        )
                        .primary(file, raw.name.span, "how much traffic?")
                        .help(
                            "add `rate = 10 req/s` (open loop) or `concurrency = 64` (closed loop)",
                        ),
                    );
                    ok = false;
                }
                if w.rate.is_some() && w.concurrency.is_some() {
                    let at = f.get("concurrency").map(|v| v.entry).expect("present");
                    self.push(
                        Diagnostic::new(Code::TypeMismatch, format!("workload `{}` has both `rate` and `concurrency`", raw.name.node))
                            .primary(at.file, at.span, "one or the other")
                            .help("keep `rate` for an open-loop arrival rate or `concurrency` for a closed loop"),
                    );
                    ok = false;
                }
                Body::Workload(w)
            }
            Kind::Slo => {
                let mut bounds = Vec::new();
                for (key, fv) in f {
                    let (metric, pct) = key.split_once('.').unwrap_or((key.as_str(), "p50"));
                    let metric = match metric {
                        "ttft" => SloMetric::Ttft,
                        "tpot" => SloMetric::Tpot,
                        "itl" => SloMetric::Itl,
                        "e2e" => SloMetric::E2e,
                        "throughput" => SloMetric::Throughput,
                        _ => SloMetric::RequestRate,
                    };
                    if let Value::Bound(op, value) = fv.value {
                        bounds.push(SloBound {
                            metric,
                            percentile: pct.to_string(),
                            op,
                            value,
                            at: fv.entry,
                        });
                    }
                }
                Body::Slo(Slo { bounds })
            }
            Kind::Deploy => {
                let (layout, layout_at) = match f.get("layout") {
                    Some(FieldValue {
                        value: Value::Layout(l),
                        at,
                        ..
                    }) => (l.clone(), *at),
                    _ => (LayoutSpec::Auto, FileSpan::new(file, raw.name.span)),
                };
                let engine = match f.get("engine").map(|v| &v.value) {
                    Some(Value::Engine(_, opts)) => vllm_options(opts),
                    _ => VllmOptions::default(),
                };
                Body::Deploy(Box::new(Deploy {
                    model: r.reference("model").unwrap_or(usize::MAX),
                    cluster: r.reference("cluster").unwrap_or(usize::MAX),
                    workload: r.reference("workload"),
                    slo: r.reference("slo"),
                    layout,
                    layout_at,
                    engine,
                    model_source: r.string("model_source"),
                    served_model_name: r.string("served_model_name"),
                    image: r.string("image"),
                    namespace: r.string("namespace"),
                    hf_token_secret: r.string("hf_token_secret"),
                    preflight_image: r.string("preflight_image"),
                    allowed_weights: r.words("allowed_weights"),
                    allowed_kv_cache: r.words("allowed_kv_cache"),
                }))
            }
            Kind::Network => {
                let mut pairs = |key: &str| -> Vec<(String, String)> {
                    let mut out = Vec::new();
                    for item in r.strings(key) {
                        match item.split_once('=') {
                            Some((k, v)) if !k.trim().is_empty() => {
                                out.push((k.trim().to_string(), v.to_string()))
                            }
                            _ => {
                                let at = f.get(key).map(|v| v.at).expect("present");
                                self.push(
                                    Diagnostic::new(
                                        Code::TypeMismatch,
                                        format!("`{key}` entry \"{item}\" is not `NAME=value`"),
                                    )
                                    .primary(at.file, at.span, "missing `=`")
                                    .help(format!(
                                        "write e.g. \"{}\"",
                                        if key == "env" {
                                            "NCCL_IB_HCA=mlx5"
                                        } else {
                                            "example.com/key=value"
                                        }
                                    )),
                                );
                                ok = false;
                            }
                        }
                    }
                    out
                };
                let env = pairs("env");
                let annotations = pairs("annotations");
                // Secrets are referenced, never inlined: a credential written here would be
                // copied in plain text into every script, commands.json and manifest.
                for (name, _) in env.iter().filter(|(n, _)| text_rules::names_a_secret(n)) {
                    let at = f.get("env").map(|v| v.at).expect("present");
                    self.push(
                        Diagnostic::new(
                            Code::InvalidText,
                            format!("`env` would inline the credential `{name}`"),
                        )
                        .primary(at.file, at.span, "written into scripts and manifests in plain text")
                        .help("keep credentials out of .dist files: the Hugging Face token comes from the Secret named by `hf_token_secret` (Kubernetes) or HF_TOKEN in the node's environment (scripts)"),
                    );
                    ok = false;
                }
                Body::Network(Network {
                    resource: r.string("resource"),
                    resource_count: r.uint("resource_count").unwrap_or(1),
                    capabilities: r.strings("capabilities"),
                    annotations,
                    env,
                    socket_ifname: r.string("socket_ifname").unwrap_or_else(|| "eth0".into()),
                    host_network: r.boolean("host_network").unwrap_or(false),
                })
            }
        };
        (body, ok)
    }

    /// Consistency rules inside one model definition.
    fn model_rules(
        &mut self,
        file: FileId,
        raw: &RawDef,
        f: &BTreeMap<String, FieldValue>,
        m: &Model,
    ) -> bool {
        let mut ok = true;
        let at = |name: &str| {
            f.get(name)
                .map(|v| v.at)
                .unwrap_or(FileSpan::new(file, raw.name.span))
        };
        let mut fail = |this: &mut Self, at: FileSpan, msg: String, label: &str, help: String| {
            this.push(
                Diagnostic::new(Code::OutOfRange, msg)
                    .primary(at.file, at.span, label)
                    .help(help),
            );
            ok = false;
        };
        if m.kv_heads > m.heads {
            fail(
                self,
                at("kv_heads"),
                format!("`kv_heads` ({}) exceeds `heads` ({})", m.kv_heads, m.heads),
                "too many KV heads",
                "GQA shares each KV head among several query heads: kv_heads ≤ heads".into(),
            );
        } else if !m.heads.is_multiple_of(m.kv_heads.max(1)) {
            fail(
                self,
                at("kv_heads"),
                format!(
                    "`heads` ({}) is not a multiple of `kv_heads` ({})",
                    m.heads, m.kv_heads
                ),
                "does not divide heads",
                "check the model's config.json".into(),
            );
        }
        if m.experts > 0 && (m.experts_per_token == 0 || m.experts_per_token > m.experts) {
            fail(
                self,
                at("experts_per_token"),
                format!(
                    "a MoE model needs 1 ≤ `experts_per_token` ≤ `experts` ({})",
                    m.experts
                ),
                "top-k missing or too large",
                "set `experts_per_token` (num_experts_per_tok in config.json)".into(),
            );
        }
        if m.experts > 0 && m.moe_intermediate == 0 {
            fail(
                self,
                at("experts"),
                "a MoE model needs `moe_intermediate`".into(),
                "expert size missing",
                "set `moe_intermediate` (moe_intermediate_size in config.json)".into(),
            );
        }
        if m.attention == Attention::Mla && (m.kv_lora_rank == 0 || m.qk_rope_head_dim == 0) {
            fail(
                self,
                at("attention"),
                "MLA attention needs `kv_lora_rank` and `qk_rope_head_dim`".into(),
                "latent ranks missing",
                "copy them from config.json".into(),
            );
        }
        if m.dense_layers > m.layers {
            fail(
                self,
                at("dense_layers"),
                format!(
                    "`dense_layers` ({}) exceeds `layers` ({})",
                    m.dense_layers, m.layers
                ),
                "more than all layers",
                "dense_layers counts leading dense layers".into(),
            );
        }
        if m.sliding_layers > m.layers {
            fail(
                self,
                at("sliding_layers"),
                format!(
                    "`sliding_layers` ({}) exceeds `layers` ({})",
                    m.sliding_layers, m.layers
                ),
                "more than all layers",
                "count only the windowed layers".into(),
            );
        }
        ok
    }
}

/// Typed access to merged fields (already checked, so absent means "not set").
struct Reader<'a>(&'a BTreeMap<String, FieldValue>);

impl Reader<'_> {
    fn get(&self, k: &str) -> Option<&Value> {
        self.0.get(k).map(|v| &v.value)
    }
    fn num(&self, k: &str) -> Option<f64> {
        match self.get(k)? {
            Value::Number(n) => Some(*n),
            Value::Int(i) => Some(*i as f64),
            _ => None,
        }
    }
    fn int(&self, k: &str) -> Option<i64> {
        match self.get(k)? {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
    fn uint(&self, k: &str) -> Option<u64> {
        self.int(k).map(|v| v.max(0) as u64)
    }
    fn boolean(&self, k: &str) -> Option<bool> {
        match self.get(k)? {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    fn word(&self, k: &str) -> Option<String> {
        match self.get(k)? {
            Value::Enum(s) => Some(s.clone()),
            _ => None,
        }
    }
    fn string(&self, k: &str) -> Option<String> {
        match self.get(k)? {
            Value::Str(s) => Some(s.clone()),
            _ => None,
        }
    }
    fn strings(&self, k: &str) -> Vec<String> {
        match self.get(k) {
            Some(Value::List(items)) => items
                .iter()
                .filter_map(|v| match v {
                    Value::Str(s) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
    fn words(&self, k: &str) -> Vec<String> {
        match self.get(k) {
            Some(Value::List(items)) => items
                .iter()
                .filter_map(|v| match v {
                    Value::Enum(s) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
    fn reference(&self, k: &str) -> Option<DefId> {
        match self.get(k)? {
            Value::Ref(id) => Some(*id),
            _ => None,
        }
    }
    fn count_of(&self, k: &str) -> Option<(u64, DefId)> {
        match self.get(k)? {
            Value::CountOf(n, id) => Some((*n, *id)),
            _ => None,
        }
    }
}

fn vllm_options(opts: &BTreeMap<String, FieldValue>) -> VllmOptions {
    let r = Reader(opts);
    VllmOptions {
        gpu_memory_utilization: r.num("gpu_memory_utilization"),
        max_model_len: r.num("max_model_len"),
        max_num_seqs: r.uint("max_num_seqs"),
        max_num_batched_tokens: r.num("max_num_batched_tokens"),
        block_size: r.uint("block_size"),
        enforce_eager: r.boolean("enforce_eager").unwrap_or(false),
        kv_cache_memory: r.num("kv_cache_memory"),
        enable_prefix_caching: r.boolean("enable_prefix_caching"),
        cpu_offload: r.num("cpu_offload"),
        launcher: r.word("launcher"),
        port: r.uint("port"),
        activation_memory: r.num("activation_memory"),
        non_torch_memory: r.num("non_torch_memory"),
        cuda_graph_memory: r.num("cuda_graph_memory"),
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
