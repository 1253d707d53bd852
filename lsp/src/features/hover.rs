//! Hover: on a name, the definition it denotes — kind, where it is defined, what it
//! extends, and every resolved field with the definition that set it; on a field key, the
//! schema's documentation, the resolved value and the override chain; on a deployment,
//! also the per-GPU memory breakdown and the predicted TTFT, TPOT, throughput and cost.

use crate::convert::Protocol;
use crate::snapshot::Snapshot;
use dic_compiler::ir::{DeploymentForecast, DeploymentPlan};
use dic_compiler::program::{Def, FieldValue, Value};
use dic_compiler::schema::{Kind, VLLM_OPTIONS};
use dic_compiler::source::SourceDb;
use dic_compiler::units::fmt_bytes;
use lsp_types as lsp;
use std::fmt::Write;

pub fn hover(snap: &Snapshot, offset: usize, proto: Protocol) -> Option<lsp::Hover> {
    let root = snap.checked.db.get(snap.root);
    let (markdown, span) = if let Some(o) = snap.occurrence_at(offset) {
        let def = snap.program().def(o.def)?;
        (describe_def(snap, def), o.span)
    } else {
        field_hover(snap, offset)?
    };
    Some(lsp::Hover {
        contents: lsp::HoverContents::Markup(lsp::MarkupContent {
            kind: lsp::MarkupKind::Markdown,
            value: markdown,
        }),
        range: Some(proto.range(&root.lines, &root.text, span)),
    })
}

/// `file:line` of a span, 1-based, for people.
fn place(db: &SourceDb, file: dic_compiler::span::FileId, offset: u32) -> String {
    let f = db.get(file);
    let lc = f.lines.line_col(
        &f.text,
        offset as usize,
        dic_compiler::span::ColumnEncoding::Chars,
    );
    format!("{}:{}", f.name, lc.line + 1)
}

/// The value as written, on one line.
fn written(db: &SourceDb, fv: &FieldValue) -> String {
    let f = db.get(fv.at.file);
    let s = f
        .text
        .get(fv.at.span.start as usize..fv.at.span.end as usize)
        .unwrap_or("");
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > 80 {
        format!("{}…", one.chars().take(79).collect::<String>())
    } else {
        one
    }
}

fn schema_order(kind: Kind, def: &Def) -> Vec<(&String, &FieldValue)> {
    let schema = kind.schema();
    let mut fields: Vec<(&String, &FieldValue)> = def.fields.iter().collect();
    fields.sort_by_key(|(k, _)| {
        schema
            .fields
            .iter()
            .position(|f| f.name == k.as_str())
            .unwrap_or(usize::MAX)
    });
    fields
}

fn describe_def(snap: &Snapshot, def: &Def) -> String {
    let p = snap.program();
    let db = &snap.checked.db;
    let mut out = String::new();
    let _ = write!(out, "```dist\n{} {}", def.kind.keyword(), def.name);
    if let Some(b) = def.base.and_then(|b| p.def(b)) {
        let _ = write!(out, " = {}", b.name);
    }
    let _ = writeln!(out, "\n```");
    let _ = writeln!(out, "{}\n", def.kind.schema().doc);
    let _ = writeln!(
        out,
        "defined in `{}`",
        place(db, def.file, def.name_span.start)
    );
    let mut chain = Vec::new();
    let mut cur = def.base.and_then(|b| p.def(b));
    while let Some(b) = cur {
        chain.push(format!(
            "`{}` ({})",
            b.name,
            place(db, b.file, b.name_span.start)
        ));
        cur = b.base.and_then(|x| p.def(x));
    }
    if !chain.is_empty() {
        let _ = writeln!(out, "\nextends {}", chain.join(" → "));
    }
    if !def.fields.is_empty() {
        let _ = writeln!(out, "\n| field | value | set by |\n|---|---|---|");
        for (k, fv) in schema_order(def.kind, def) {
            let by = if fv.set_by == Some(def.id) {
                "here".to_string()
            } else {
                fv.set_by
                    .and_then(|id| p.def(id))
                    .map(|d| format!("`{}` ({})", d.name, place(db, fv.at.file, fv.at.span.start)))
                    .unwrap_or_default()
            };
            let _ = writeln!(
                out,
                "| `{k}` | `{}` | {by} |",
                written(db, fv).replace('|', "\\|")
            );
        }
    }
    if def.kind == Kind::Deploy {
        if let Some(d) = snap
            .checked
            .plan
            .deployments
            .iter()
            .find(|d| d.name == def.name)
        {
            if let Some(f) = snap.checked.forecast.of(&d.name) {
                out.push_str(&deployment_section(d, f));
            }
        } else if snap.checked.has_errors() {
            out.push_str("\n_no prediction: fix the errors first_\n");
        }
    }
    out
}

fn deployment_section(d: &DeploymentPlan, f: &DeploymentForecast) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n**{}** on {} × {} ({} nodes)\n",
        d.layout,
        d.layout.gpus(),
        d.gpu.name,
        d.nodes
    );
    let _ = writeln!(
        out,
        "| per GPU | {} |\n|---|---|",
        f.report
            .memory
            .iter()
            .map(|m| format!("stage {}", m.stage))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let row = |label: &str, field: &dyn Fn(&dic_compiler::ir::MemoryRow) -> u64| {
        format!(
            "| {label} | {} |\n",
            f.report
                .memory
                .iter()
                .map(|m| fmt_bytes(field(m) as f64))
                .collect::<Vec<_>>()
                .join(" | ")
        )
    };
    out.push_str(&row("weights", &|m| m.weights));
    out.push_str(&row("activations", &|m| m.activations));
    out.push_str(&row("non-torch", &|m| m.non_torch));
    out.push_str(&row("CUDA graphs", &|m| m.cuda_graphs));
    out.push_str(&row("KV cache", &|m| m.kv_cache));
    out.push_str(&row("free", &|m| m.free));
    out.push_str(&row("total", &|m| m.total));
    let ms = |v: Option<f64>| {
        v.map(|v| format!("{v:.1} ms"))
            .unwrap_or_else(|| "—".into())
    };
    let _ = writeln!(
        out,
        "\npredicted: TTFT {}, TPOT {}, {} output tokens/s; KV cache {} tokens",
        ms(f.predicted.ttft_ms),
        ms(f.predicted.tpot_ms),
        f.predicted
            .output_tokens_per_s
            .map(|v| format!("{v:.0}"))
            .unwrap_or_else(|| "—".into()),
        f.predicted.kv_cache_tokens
    );
    if let Some(h) = f.report.cost.per_hour {
        let _ = write!(out, "\ncost: ${h:.2}/h");
        if let Some(m) = f.report.cost.per_million_output_tokens {
            let _ = write!(out, ", ${m:.2} per million output tokens");
        }
        out.push('\n');
    }
    out
}

/// Hover over a field key (or a value that is not a name) in one of the document's
/// definitions.
fn field_hover(snap: &Snapshot, offset: usize) -> Option<(String, dic_compiler::span::Span)> {
    let p = snap.program();
    let db = &snap.checked.db;
    let def = p
        .user_defs
        .iter()
        .filter_map(|id| p.def(*id))
        .filter(|d| d.file == snap.root && d.span.contains(offset))
        .min_by_key(|d| d.span.len())?;
    let mut found: Option<(
        String,
        &FieldValue,
        Option<&'static dic_compiler::schema::Field>,
    )> = None;
    for (k, fv) in &def.fields {
        if fv.entry.file == snap.root && fv.entry.span.contains(offset) {
            found = Some((k.clone(), fv, def.kind.schema().field(k)));
            if let Value::Engine(_, opts) = &fv.value {
                for (ok, ov) in opts {
                    if ov.entry.file == snap.root && ov.entry.span.contains(offset) {
                        found = Some((
                            format!("{k}.{ok}"),
                            ov,
                            VLLM_OPTIONS.iter().find(|f| f.name == ok),
                        ));
                    }
                }
            }
        }
    }
    let (key, fv, field) = found?;
    let mut out = String::new();
    let _ = writeln!(out, "```dist\n{key} = {}\n```", written(db, fv));
    if let Some(f) = field {
        // The language reference's own words (docs/language.md).
        out.push_str(&dic_compiler::reference::field_text(f));
    }
    // The override chain: every definition up the bases that sets this key.
    let top = key.split('.').next().unwrap_or(&key).to_string();
    let mut chain = Vec::new();
    let mut cur = Some(def);
    while let Some(d) = cur {
        if let Some(v) = d.fields.get(&top).filter(|v| v.set_by == Some(d.id)) {
            chain.push(format!(
                "`{}` sets `{}` ({})",
                d.name,
                written(db, v),
                place(db, v.at.file, v.at.span.start)
            ));
        }
        cur = d.base.and_then(|b| p.def(b));
    }
    if chain.len() > 1 {
        let _ = writeln!(out, "\noverrides:\n");
        for c in &chain {
            let _ = writeln!(out, "- {c}");
        }
    }
    Some((out, fv.entry.span))
}
