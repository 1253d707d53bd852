//! Typing a block's entries against a field table: unknown fields (with did-you-mean),
//! duplicates, operators, and the error shapes shared by every value.

use super::*;

impl<'s, 'w> Checker<'s, 'w> {
    /// Types the entries of a block against a field table.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_entries(
        &mut self,
        m: usize,
        file: FileId,
        id: Option<DefId>,
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
                let meant = FIELD_ALIASES
                    .iter()
                    .find(|(alias, field)| *alias == head.node && names.contains(field))
                    .map(|(_, field)| *field)
                    .or_else(|| did_you_mean(&head.node, names.iter().copied()));
                d = match meant {
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

    pub(super) fn check_op(&mut self, file: FileId, entry: &Entry, field: &Field) -> bool {
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
    pub(super) fn not_found(
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

    pub(super) fn type_error(&mut self, file: FileId, expr: &Expr, ty: &Ty, field: &str) {
        let found = describe_expr(expr);
        self.push(
            Diagnostic::new(
                Code::TypeMismatch,
                format!("`{field}` expects {}, found {found}", ty.describe()),
            )
            .primary(file, expr.span, format!("this is {found}")),
        );
    }
}

/// Names people give a field dic names otherwise (vLLM's and Hugging Face's words), and
/// dic's field: the suggestion when the field is unknown, where the kind has that field.
const FIELD_ALIASES: &[(&str, &str)] = &[
    ("quantization", "weights"),
    ("quant", "weights"),
    ("dtype", "weights"),
    ("kv_cache_dtype", "kv_cache"),
    ("tensor_parallel_size", "layout"),
];
