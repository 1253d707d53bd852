//! Rendering diagnostics at the edge: miette for terminals (colour only on a TTY, fixed
//! width for snapshots), JSON for tools. Labels in other files than the primary one
//! (a "defined here" in the stdlib) become related reports with their own source.

use dic_compiler::diagnostics::{Diagnostic, Severity};
use dic_compiler::source::SourceDb;
use dic_compiler::span::{ColumnEncoding, FileId};
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource};
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
    source: Option<NamedSource<String>>,
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

fn source_of(db: &SourceDb, file: FileId) -> NamedSource<String> {
    let f = db.get(file);
    NamedSource::new(f.name.clone(), f.text.to_string())
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
    Report {
        code: Some(d.code.as_str().to_string()),
        message: d.message.clone(),
        severity: miette_severity(d.severity),
        help,
        labels,
        source: primary_file.map(|f| source_of(db, f)),
        related: others
            .into_iter()
            .map(|(file, labels)| Report {
                code: None,
                message: format!("in {}", db.get(file).name),
                severity: miette::Severity::Advice,
                help: None,
                labels,
                source: Some(source_of(db, file)),
                related: Vec::new(),
            })
            .collect(),
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
    for d in diags {
        let report = to_report(db, d);
        if handler.render_report(&mut out, &report).is_err() {
            out.push_str(&format!("{}: {}\n", d.code, d.message));
        }
        out.push('\n');
    }
    out
}

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
    if let Some(span) = span.filter(|s| s.end <= text.len()) {
        diag = diag.with_label(LabeledSpan::at(span, "here"));
    }
    if let Some(h) = help {
        diag = diag.with_help(h.to_string());
    }
    let report =
        miette::Report::new(diag).with_source_code(NamedSource::new(path, text.to_string()));
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_width(width)
        .with_links(false);
    let mut out = String::new();
    if handler.render_report(&mut out, report.as_ref()).is_err() {
        out = format!("error: {path}: {message}\n");
    }
    out
}
