//! Rendering diagnostics at the edge: miette for terminals (colour only on a TTY, fixed
//! width for snapshots), JSON for tools. Labels in other files than the primary one
//! (a "defined here" in the stdlib) become related reports with their own source.

use dic_compiler::diagnostics::{Diagnostic, Severity};
use dic_compiler::source::SourceDb;
use dic_compiler::span::{ColumnEncoding, FileId};
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan};
use serde_json::{json, Value};
use std::fmt;

/// One diagnostic (or one of its other-file parts) in miette's shape.
#[derive(Debug)]
struct Report {
    code: Option<String>,
    message: String,
    severity: miette::Severity,
    help: Option<String>,
    labels: Vec<LabeledSpan>,
    source: Option<Excerpt>,
    related: Vec<Report>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Report {}

impl miette::Diagnostic for Report {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.code
            .as_ref()
            .map(|c| Box::new(c) as Box<dyn fmt::Display>)
    }
    fn severity(&self) -> Option<miette::Severity> {
        Some(self.severity)
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            None
        } else {
            Some(Box::new(self.labels.iter().cloned()))
        }
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source.as_ref().map(|s| s as &dyn miette::SourceCode)
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        if self.related.is_empty() {
            None
        } else {
            Some(Box::new(
                self.related.iter().map(|r| r as &dyn miette::Diagnostic),
            ))
        }
    }
}

fn miette_severity(s: Severity) -> miette::Severity {
    match s {
        Severity::Error => miette::Severity::Error,
        Severity::Warning => miette::Severity::Warning,
        Severity::Advice => miette::Severity::Advice,
    }
}

/// The part of a file one report shows: the lines its labels touch plus up to two short
/// lines of context, or, on a long line, a window around the labels. miette reads only
/// this, so rendering N diagnostics costs N small excerpts (not N copies of the file) and
/// no column it formats is wider than the window (miette panics past 65,535).
#[derive(Debug)]
struct Excerpt {
    name: String,
    text: String,
    /// Byte offset of `text` in the file.
    base: usize,
    /// 0-based line and column (chars) of `text`'s first byte in the file.
    line: usize,
    column: usize,
}

/// A line longer than this is shown as a window around the labels.
const LONG_LINE: usize = 240;
/// Bytes shown on each side of the labels on a long line.
const WINDOW: usize = 80;
/// Longest excerpt; a report whose labels span more is shown without source.
const MAX_EXCERPT: usize = 16 * 1024;
/// Labels longer than this are cut (the underline of a 1 MB string helps nobody).
const MAX_LABEL: usize = 160;

fn floor_char(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

impl Excerpt {
    /// The excerpt of `text` that shows the byte range `lo..hi`.
    fn around(name: &str, text: &str, lo: usize, hi: usize) -> Option<Excerpt> {
        let lo = floor_char(text, lo);
        let hi = ceil_char(text, hi.max(lo));
        let line_start = |i: usize| text[..i].rfind('\n').map_or(0, |n| n + 1);
        let line_end = |i: usize| text[i..].find('\n').map_or(text.len(), |n| i + n);
        let (mut start, mut end) = (line_start(lo), line_end(hi));
        if !text[start..end].contains('\n') && end - start > LONG_LINE {
            // one long line: a window around the labels, no context lines
            start = floor_char(text, lo.saturating_sub(WINDOW).max(start));
            end = ceil_char(text, (hi + WINDOW).min(end));
        } else {
            for _ in 0..2 {
                if start > 0 {
                    let prev = line_start(start - 1);
                    if start - prev > LONG_LINE {
                        break;
                    }
                    start = prev;
                }
            }
            for _ in 0..2 {
                if end < text.len() {
                    let next = line_end(end + 1);
                    if next - end > LONG_LINE {
                        break;
                    }
                    end = next;
                }
            }
        }
        if end - start > MAX_EXCERPT {
            return None;
        }
        let line = text.as_bytes()[..start]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        let column = text[line_start(start)..start].chars().count();
        Some(Excerpt {
            name: name.to_string(),
            text: text[start..end].to_string(),
            base: start,
            line,
            column,
        })
    }
}

impl miette::SourceCode for Excerpt {
    fn read_span<'a>(
        &'a self,
        span: &miette::SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'a> + 'a>, miette::MietteError> {
        let offset = span
            .offset()
            .checked_sub(self.base)
            .ok_or(miette::MietteError::OutOfBounds)?;
        let local = miette::SourceSpan::new(offset.into(), span.len());
        let c = self.text.as_str().read_span(&local, before, after)?;
        let column = if c.line() == 0 {
            c.column() + self.column
        } else {
            c.column()
        };
        Ok(Box::new(miette::MietteSpanContents::new_named(
            self.name.clone(),
            c.data(),
            miette::SourceSpan::new((c.span().offset() + self.base).into(), c.span().len()),
            c.line() + self.line,
            column,
            c.line_count(),
        )))
    }
}

/// Labels cut to [`MAX_LABEL`] bytes, and the excerpt that shows them (`None`: no source).
fn excerpt_for(name: &str, text: &str, labels: &mut [LabeledSpan]) -> Option<Excerpt> {
    for l in labels.iter_mut() {
        if l.len() > MAX_LABEL {
            let start = floor_char(text, l.offset());
            let end = floor_char(text, start + MAX_LABEL).max(start);
            *l = LabeledSpan::new(l.label().map(String::from), start, end - start);
        }
    }
    let lo = labels.iter().map(|l| l.offset()).min()?;
    let hi = labels.iter().map(|l| l.offset() + l.len()).max()?;
    if hi > text.len() {
        return None;
    }
    Excerpt::around(name, text, lo, hi)
}

fn to_report(db: &SourceDb, d: &Diagnostic) -> Report {
    let primary_file = d.location().map(|l| l.file);
    let mut labels = Vec::new();
    let mut others: Vec<(FileId, Vec<LabeledSpan>)> = Vec::new();
    for l in &d.labels {
        let ls = LabeledSpan::new(
            Some(l.message.clone()),
            l.span.span.start as usize,
            l.span.span.len(),
        );
        if Some(l.span.file) == primary_file {
            labels.push(ls);
        } else {
            match others.iter_mut().find(|(f, _)| *f == l.span.file) {
                Some((_, v)) => v.push(ls),
                None => others.push((l.span.file, vec![ls])),
            }
        }
    }
    let mut help = d.help.clone();
    for n in &d.notes {
        help = Some(match help {
            Some(h) => format!("{h}\nnote: {n}"),
            None => format!("note: {n}"),
        });
    }
    let source_with = |file: FileId, labels: &mut Vec<LabeledSpan>| {
        let f = db.get(file);
        let excerpt = excerpt_for(&f.name, &f.text, labels);
        if excerpt.is_none() {
            labels.clear();
        }
        excerpt
    };
    let source = primary_file.and_then(|f| source_with(f, &mut labels));
    let related = others
        .into_iter()
        .map(|(file, mut labels)| Report {
            code: None,
            message: format!("in {}", db.get(file).name),
            severity: miette::Severity::Advice,
            help: None,
            source: source_with(file, &mut labels),
            labels,
            related: Vec::new(),
        })
        .collect();
    Report {
        code: Some(d.code.as_str().to_string()),
        message: d.message.clone(),
        severity: miette_severity(d.severity),
        help,
        labels,
        source,
        related,
    }
}

/// Renders for a terminal. `color` only when writing to a TTY; `width` fixed in tests.
pub fn human(db: &SourceDb, diags: &[Diagnostic], color: bool, width: usize) -> String {
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(width)
        .with_links(false);
    let mut out = String::new();
    for d in diags.iter().take(MAX_RENDERED) {
        let report = to_report(db, d);
        if handler.render_report(&mut out, &report).is_err() {
            out.push_str(&format!("{}: {}\n", d.code, d.message));
        }
        out.push('\n');
    }
    if diags.len() > MAX_RENDERED {
        out.push_str(&format!(
            "… and {} more diagnostics not shown (`--format json` lists them all)\n\n",
            diags.len() - MAX_RENDERED
        ));
    }
    out
}

/// The most diagnostics a terminal is shown; the summary line still counts all of them.
pub const MAX_RENDERED: usize = 200;

/// One line per diagnostic plus a summary, for `dic check` footers.
pub fn summary(diags: &[Diagnostic]) -> String {
    let errors = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diags
        .iter()
        .filter(|d| d.severity == Severity::Warning)
        .count();
    let advice = diags
        .iter()
        .filter(|d| d.severity == Severity::Advice)
        .count();
    format!(
        "{errors} error{}, {warnings} warning{}, {advice} advice",
        if errors == 1 { "" } else { "s" },
        if warnings == 1 { "" } else { "s" }
    )
}

/// JSON for tools: positions as 1-based line and column (Unicode scalar values).
pub fn json(db: &SourceDb, diags: &[Diagnostic]) -> Value {
    let pos = |file: FileId, offset: u32| {
        let f = db.get(file);
        let lc = f
            .lines
            .line_col(&f.text, offset as usize, ColumnEncoding::Chars);
        json!({"line": lc.line + 1, "column": lc.character + 1, "offset": offset})
    };
    Value::Array(
        diags
            .iter()
            .map(|d| {
                let labels: Vec<Value> = d
                    .labels
                    .iter()
                    .map(|l| {
                        json!({
                            "file": db.get(l.span.file).name,
                            "start": pos(l.span.file, l.span.span.start),
                            "end": pos(l.span.file, l.span.span.end),
                            "message": l.message,
                            "primary": l.primary,
                        })
                    })
                    .collect();
                let fixes: Vec<Value> = d
                    .fixes
                    .iter()
                    .map(|f| {
                        json!({
                            "title": f.title,
                            "file": db.get(f.span.file).name,
                            "start": pos(f.span.file, f.span.span.start),
                            "end": pos(f.span.file, f.span.span.end),
                            "replacement": f.replacement,
                        })
                    })
                    .collect();
                json!({
                    "code": d.code.as_str(),
                    "severity": d.severity.as_str(),
                    "message": d.message,
                    "labels": labels,
                    "help": d.help,
                    "notes": d.notes,
                    "fixes": fixes,
                })
            })
            .collect(),
    )
}

/// Renders one error about a file that is not a .dist source (a plan file, say), pointing
/// at `span` when known.
pub fn plain_error(
    path: &str,
    text: &str,
    message: &str,
    span: Option<std::ops::Range<usize>>,
    help: Option<&str>,
    width: usize,
) -> String {
    let mut diag = miette::MietteDiagnostic::new(message.to_string());
    let mut labels: Vec<LabeledSpan> = span
        .filter(|s| s.end <= text.len() && s.start <= s.end)
        .map(|s| LabeledSpan::at(s, "here"))
        .into_iter()
        .collect();
    let excerpt = excerpt_for(path, text, &mut labels);
    if excerpt.is_some() {
        diag = diag.with_labels(labels);
    }
    if let Some(h) = help {
        diag = diag.with_help(h.to_string());
    }
    let report = match excerpt {
        Some(e) => miette::Report::new(diag).with_source_code(e),
        None => miette::Report::new(diag),
    };
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_width(width)
        .with_links(false);
    let mut out = String::new();
    if handler.render_report(&mut out, report.as_ref()).is_err() {
        out = format!("error: {path}: {message}\n");
    }
    out
}

/// What `dic check` predicts for each deployment of a file that checks without errors:
/// TTFT, TPOT, throughput and memory per GPU, one line each (human), and the same as JSON.
pub fn predictions(checked: &dic_compiler::driver::Checked) -> (String, Value) {
    let mut text = String::new();
    let mut rows = Vec::new();
    let plans = &checked.plan.deployments;
    for f in &checked.forecast.deployments {
        let Some(d) = plans.iter().find(|d| d.name == f.name) else {
            continue;
        };
        let p = &f.predicted;
        // The fullest GPU: the PP stage with the most in use.
        let used = f
            .report
            .memory
            .iter()
            .map(|m| m.total.saturating_sub(m.free))
            .max()
            .unwrap_or(0);
        let weights = f.report.memory.iter().map(|m| m.weights).max().unwrap_or(0);
        let kv = f
            .report
            .memory
            .iter()
            .map(|m| m.kv_cache)
            .min()
            .unwrap_or(0);
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let ms = |v: Option<f64>, digits: usize| {
            v.map(|x| format!("{x:.digits$} ms"))
                .unwrap_or_else(|| "unbounded (the load overloads it)".into())
        };
        text.push_str(&format!(
            "deploy {} (`{}` on {} × {}), predicted:\n  TTFT        {}\n  TPOT        {}\n  throughput  {}\n  memory      {:.1} GiB of {:.1} GiB per GPU (weights {:.1} GiB, KV cache {:.1} GiB)\n",
            f.name,
            d.layout,
            d.layout.gpus(),
            d.gpu.name,
            ms(p.ttft_ms, 0),
            ms(p.tpot_ms, 1),
            p.output_tokens_per_s
                .map(|t| format!("{t:.0} output tokens/s"))
                .unwrap_or_else(|| "—".into()),
            gib(used),
            gib(d.gpu.memory_bytes),
            gib(weights),
            gib(kv),
        ));
        // The CPU tier `kv_offload` adds to the prefix cache.
        if let (Some(tokens), Some(k)) = (p.offloaded_kv_tokens, &d.engine.kv_offload) {
            text.push_str(&format!(
                "  KV offload  {tokens} tokens of prefix cache in {:.0} GiB of CPU memory per engine (beside {} on the GPUs)\n",
                k.size / (1u64 << 30) as f64,
                p.kv_cache_tokens
            ));
        }
        rows.push(serde_json::json!({
            "deployment": f.name,
            "layout": d.layout.to_string(),
            "gpus": d.layout.gpus(),
            "ttft_ms": p.ttft_ms,
            "tpot_ms": p.tpot_ms,
            "output_tokens_per_s": p.output_tokens_per_s,
            "memory_per_gpu_bytes": used,
            "gpu_memory_bytes": d.gpu.memory_bytes,
            "weights_per_gpu_bytes": weights,
            "kv_cache_per_gpu_bytes": kv,
            "offloaded_kv_tokens": p.offloaded_kv_tokens,
        }));
    }
    (text, Value::Array(rows))
}
