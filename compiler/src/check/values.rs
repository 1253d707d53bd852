//! Evaluating one entry's value against its type: quantities and their units and
//! ranges, whole numbers, strings and their rules, enum words, references (a GPU also by
//! its `nvidia-smi` name), lists, counts (`8 × gpu`) and the engine block.

use super::*;

impl<'s, 'w> Checker<'s, 'w> {
    /// A quantity of `dim` in base units.
    pub(super) fn quantity(
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
            } => self.unitless(file, expr, *value, dim, field),
            ExprKind::Quantity {
                value,
                unit: Some(u),
                ..
            } => {
                let Some(unit) = units::lookup(&u.node) else {
                    self.unknown_unit(file, u, dim, field);
                    return None;
                };
                if unit.dim != dim {
                    self.unit_mismatch(file, u, *value, unit.dim, dim, field, kind);
                    return None;
                }
                if kind == Kind::Gpu && field == "memory" && matches!(u.node.as_str(), "GB" | "TB")
                {
                    self.decimal_gpu_memory(file, u, *value * unit.factor, *value);
                }
                Some(value * unit.factor)
            }
            ExprKind::Money { value, per, .. } => {
                self.money(file, expr, *value, per.as_ref(), dim, field)
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

    /// A number without a unit: a quantity of tokens or a ratio, else E0303 with the
    /// unit to add.
    fn unitless(
        &mut self,
        file: FileId,
        expr: &Expr,
        value: f64,
        dim: Dimension,
        field: &str,
    ) -> Option<f64> {
        if matches!(dim, Dimension::Tokens | Dimension::Ratio) {
            return Some(value);
        }
        let example = dim.units().next().map(|u| u.symbol).unwrap_or("");
        self.push(
            Diagnostic::new(Code::UnitMismatch, format!("`{field}` needs a unit"))
                .primary(file, expr.span, format!("expected {}", dim.describe()))
                .help(format!("add a unit, e.g. `{} {example}`", fmt_num(value)))
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

    /// A unit dic does not know, with the likely one or the field's units.
    fn unknown_unit(&mut self, file: FileId, u: &Spanned<String>, dim: Dimension, field: &str) {
        let mut d = Diagnostic::new(Code::UnknownUnit, format!("unknown unit `{}`", u.node))
            .primary(file, u.span, "not a unit dic knows");
        if let Some(h) = units::suggest_for(&u.node, dim) {
            d = d.help(h);
        } else {
            let units = dim.unit_list();
            d = d.help(if units.is_empty() {
                format!("`{field}` expects {}", dim.describe())
            } else {
                format!("`{field}` expects {}; its units: {units}", dim.describe())
            });
        }
        self.push(d);
    }

    /// A unit of dimension `found` where `dim` was expected (a size written as a
    /// bandwidth, or the reverse, gets the corrected value).
    #[allow(clippy::too_many_arguments)]
    fn unit_mismatch(
        &mut self,
        file: FileId,
        u: &Spanned<String>,
        value: f64,
        found: Dimension,
        dim: Dimension,
        field: &str,
        kind: Kind,
    ) {
        let mut d = Diagnostic::new(
            Code::UnitMismatch,
            format!("`{field}` expects {}, found `{}`", dim.describe(), u.node),
        )
        .primary(
            file,
            u.span,
            format!("`{}` is {}", u.node, found.describe()),
        );
        if dim == Dimension::Bytes && found == Dimension::Bandwidth {
            let mut size = u.node.trim_end_matches("/s").to_string();
            if kind == Kind::Gpu && field == "memory" && !size.contains('i') {
                // GPU memory is binary (see W0301).
                size = size.replace('B', "iB");
            }
            d = d.help(format!(
                "a size has no `/s`: write `{} {size}`",
                fmt_num(value)
            ));
        } else if dim == Dimension::Bandwidth && found == Dimension::Bytes {
            d = d.help(format!(
                "a bandwidth is per second: write `{} {}/s`",
                fmt_num(value),
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
    }

    /// W0301: GPU memory in decimal `GB`/`TB` (`bytes` in base units), which vendors mean
    /// as binary.
    fn decimal_gpu_memory(&mut self, file: FileId, u: &Spanned<String>, bytes: f64, value: f64) {
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
                    fmt_num(value),
                    u.node,
                    bytes / 1073741824.0
                ),
            )
            .help(format!(
                "vendors' \"{} GB\" of HBM means binary gibibytes: write `{} {gib}`",
                fmt_num(value),
                fmt_num(value)
            ))
            .fix(format!("use `{gib}`"), FileSpan::new(file, u.span), gib),
        );
    }

    /// A price (`$12.50/h`) as a quantity of `dim`.
    fn money(
        &mut self,
        file: FileId,
        expr: &Expr,
        value: f64,
        per: Option<&Spanned<String>>,
        dim: Dimension,
        field: &str,
    ) -> Option<f64> {
        match units::money(per.map(|p| p.node.as_str())) {
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
            // `money(None)` is a plain amount: only a time unit can be unknown.
            None => {
                let p = per?;
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

    /// `v` when the field's range holds it, else E0307.
    pub(super) fn in_range(
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
                format!("`{field}` = {} is out of range", written(expr)),
            )
            .primary(file, expr.span, format!("must be {}", range.describe(dim))),
        );
        None
    }

    /// E0312: a string that breaks its field's rule (an option where a value belongs, a
    /// variable name that is no name, a Kubernetes name the API server refuses).
    pub(super) fn invalid_text(
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

    pub(super) fn int(
        &mut self,
        file: FileId,
        expr: &Expr,
        min: i64,
        max: i64,
        field: &str,
    ) -> Option<i64> {
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

    pub(super) fn reference(
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
    pub(super) fn gpu_by_string(
        &mut self,
        m: usize,
        file: FileId,
        expr: &Expr,
        s: &str,
    ) -> Option<DefId> {
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

    pub(super) fn enum_word(
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

    pub(super) fn eval(
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
            Ty::Layout => match &expr.kind {
                ExprKind::Object(_) if field == "layout" => self
                    .block_entries(
                        m,
                        file,
                        expr,
                        ty,
                        crate::schema::POOL_LAYOUT_FIELDS,
                        field,
                        kind,
                    )
                    .and_then(|entries| self.pool_layouts(&entries))
                    .map(Value::Layout),
                _ => self.layout(file, expr).map(Value::Layout),
            },
            Ty::Engine => self.engine(m, file, expr, field),
            Ty::Block(fields) => self
                .block_entries(m, file, expr, ty, fields, field, kind)
                .map(Value::Block),
            Ty::Bound(dim) => self
                .quantity(file, expr, dim, field, kind)
                .and_then(|v| {
                    self.in_range(file, expr, v, dim, crate::schema::default_range(dim), field)
                })
                .map(|v| Value::Bound(Op::Le, v)),
        }
    }

    /// A `{ … }` block's entries checked against `fields`, with an error for each required
    /// field it does not write; `None` after any error.
    #[allow(clippy::too_many_arguments)]
    fn block_entries(
        &mut self,
        m: usize,
        file: FileId,
        expr: &Expr,
        ty: &Ty,
        fields: &'static [crate::schema::Field],
        field: &str,
        kind: Kind,
    ) -> Option<std::collections::BTreeMap<String, FieldValue>> {
        let ExprKind::Object(block) = &expr.kind else {
            self.type_error(file, expr, ty, field);
            return None;
        };
        let entries = self.check_entries(m, file, None, block, fields, kind, field, false);
        // A required field the block does not write at all (one written with a wrong
        // value has its own error already).
        let missing: Vec<&crate::schema::Field> = fields
            .iter()
            .filter(|f| f.required && !block.entries.iter().any(|e| e.key_text() == f.name))
            .collect();
        for f in &missing {
            self.push(
                Diagnostic::new(Code::MissingField, format!("`{field}` has no `{}`", f.name))
                    .primary(file, expr.span, format!("needs `{}`: {}", f.name, f.doc))
                    .help(format!("add `{} = …` ({})", f.name, f.ty.describe())),
            );
        }
        missing.is_empty().then_some(entries)
    }

    /// `layout = { prefill = …, decode = … }`: both pools written out (no `auto`, no
    /// nested pools, no `ep`, `dcp` or `pcp`: dic predicts P/D pools of TP, PP and
    /// replicas).
    fn pool_layouts(
        &mut self,
        entries: &std::collections::BTreeMap<String, FieldValue>,
    ) -> Option<LayoutSpec> {
        let mut ok = true;
        let pool = |this: &mut Self, key: &str| -> Option<Layout> {
            let fv = entries.get(key)?;
            let problem = match &fv.value {
                Value::Layout(LayoutSpec::Explicit(l)) if l.ep || l.dcp > 1 || l.pcp > 1 => Some((
                    "takes `tp`, `pp` and `dp` only",
                    "dic predicts disaggregated pools of tensor and pipeline parallelism and replicas: remove `ep`, `dcp` and `pcp` here (or serve the model aggregated)",
                )),
                Value::Layout(LayoutSpec::Explicit(l)) => return Some(*l),
                Value::Layout(LayoutSpec::Auto) => Some((
                    "is written out, not `auto`",
                    "write the pool's layout, e.g. `tp 4`; `dic plan` lists disaggregated splits that meet the SLOs",
                )),
                _ => Some(("is one layout, not two pools", "write e.g. `tp 4 × dp 2`")),
            };
            if let Some((label, help)) = problem {
                this.push(
                    Diagnostic::new(Code::InvalidLayout, format!("the {key} pool {label}"))
                        .primary(fv.at.file, fv.at.span, "not a pool layout")
                        .help(help),
                );
            }
            None
        };
        let prefill = pool(self, "prefill");
        let decode = pool(self, "decode");
        ok &= prefill.is_some() && decode.is_some();
        let group = |key: &str| match entries.get(key).map(|v| &v.value) {
            Some(Value::Ref(id)) => Some(*id),
            _ => None,
        };
        ok.then(|| {
            LayoutSpec::Disaggregated(crate::program::PoolLayouts {
                prefill: prefill.expect("checked"),
                decode: decode.expect("checked"),
                prefill_group: group("prefill_node_group"),
                decode_group: group("decode_node_group"),
            })
        })
    }

    pub(super) fn count_of(
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

    pub(super) fn engine(
        &mut self,
        m: usize,
        file: FileId,
        expr: &Expr,
        field: &str,
    ) -> Option<Value> {
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
            // An engine block's options belong to no definition (`set_by` None).
            Some(block) => self.check_entries(
                m,
                file,
                None,
                block,
                VLLM_OPTIONS,
                Kind::Deploy,
                "vllm",
                false,
            ),
            None => BTreeMap::new(),
        };
        Some(Value::Engine(name.node.clone(), options))
    }
}
