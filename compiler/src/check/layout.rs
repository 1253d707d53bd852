//! The `layout` field: `auto`, or factors like `tp 8 × pp 2 × dp 2 (× ep)`.

use super::*;

impl<'s, 'w> Checker<'s, 'w> {
    pub(super) fn layout(&mut self, file: FileId, expr: &Expr) -> Option<LayoutSpec> {
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
                // `tp2`: a factor and its size without the space between them.
                let glued = LAYOUT_FACTORS.iter().find_map(|(k, _)| {
                    let size = key.strip_prefix(k)?;
                    (!size.is_empty() && size.bytes().all(|b| b.is_ascii_digit()))
                        .then(|| format!("{k} {size}"))
                });
                if key == "auto" {
                    d = d.help("`auto` stands alone: `layout = auto`");
                } else if let Some(spaced) = glued {
                    d = d
                        .help(format!("write `{spaced}`: a factor, a space, its size"))
                        .fix(
                            "add the space",
                            crate::span::FileSpan::new(file, name.span),
                            spaced,
                        );
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
}
