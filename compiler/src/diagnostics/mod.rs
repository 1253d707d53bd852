//! Diagnostics as data.
//!
//! Every problem dic reports is a [`Diagnostic`]: a stable [`Code`], a severity, a
//! lower-case message naming the thing, labels (spans, possibly in other files such as
//! the stdlib), one actionable help line and optional machine-applicable fixes.
//! Renderers live at the edges: miette in the CLI, JSON for tools, LSP diagnostics in
//! the language server. Each code has an explain page (`dic explain CODE`) whose
//! example is tested to produce that code.

mod codes;

pub use codes::Code;

use crate::span::{FileId, FileSpan, Span};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    /// Advice: a better option exists, nothing is wrong.
    Advice,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Advice => "advice",
        }
    }
}

/// A span with a short note saying what is there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Label {
    pub span: FileSpan,
    pub message: String,
    /// The primary label is the one the diagnostic is "at".
    pub primary: bool,
}

/// A machine-applicable edit: replace `span` with `replacement` (for editor code actions).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fix {
    pub title: String,
    pub span: FileSpan,
    pub replacement: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub labels: Vec<Label>,
    pub help: Option<String>,
    pub notes: Vec<String>,
    pub fixes: Vec<Fix>,
}

impl Diagnostic {
    /// A diagnostic with the code's default severity.
    pub fn new(code: Code, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            severity: code.default_severity(),
            message: message.into(),
            labels: Vec::new(),
            help: None,
            notes: Vec::new(),
            fixes: Vec::new(),
        }
    }

    pub fn primary(mut self, file: FileId, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span: FileSpan::new(file, span),
            message: message.into(),
            primary: true,
        });
        self
    }

    pub fn secondary(mut self, at: FileSpan, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span: at,
            message: message.into(),
            primary: false,
        });
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    pub fn fix(
        mut self,
        title: impl Into<String>,
        at: FileSpan,
        replacement: impl Into<String>,
    ) -> Self {
        self.fixes.push(Fix {
            title: title.into(),
            span: at,
            replacement: replacement.into(),
        });
        self
    }

    pub fn with_severity(mut self, severity: Severity) -> Self {
        self.severity = severity;
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The primary location, if any.
    pub fn location(&self) -> Option<FileSpan> {
        self.labels
            .iter()
            .find(|l| l.primary)
            .or(self.labels.first())
            .map(|l| l.span)
    }
}

/// Sorts diagnostics into a stable order: by file, position, then code.
pub fn sort(diags: &mut [Diagnostic]) {
    diags.sort_by(|a, b| {
        let ka = a.location().map(|l| (l.file, l.span.start, l.span.end));
        let kb = b.location().map(|l| (l.file, l.span.start, l.span.end));
        ka.cmp(&kb)
            .then(a.code.as_str().cmp(b.code.as_str()))
            .then(a.message.cmp(&b.message))
    });
}

/// The most diagnostics one check reports: past it, a file is broken beyond what a list
/// of errors helps with, and each one costs output (and an editor's memory).
pub const MAX_DIAGNOSTICS: usize = 10_000;

/// Keeps the first [`MAX_DIAGNOSTICS`] (after [`sort`]); the last one kept says how many
/// more there were.
pub fn cap(diags: &mut Vec<Diagnostic>) {
    if diags.len() <= MAX_DIAGNOSTICS {
        return;
    }
    let more = diags.len() - MAX_DIAGNOSTICS;
    diags.truncate(MAX_DIAGNOSTICS);
    if let Some(last) = diags.last_mut() {
        last.notes.push(format!(
            "{more} more diagnostics were not reported: dic stops at {MAX_DIAGNOSTICS}; fix these first"
        ));
    }
}

/// "did you mean" — the closest candidate by edit distance, if close enough.
pub fn did_you_mean<'a>(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let wanted_l = wanted.to_ascii_lowercase();
    let limit = (wanted.chars().count() / 3).max(1) + 1;
    candidates
        .into_iter()
        .map(|c| (edit_distance(&wanted_l, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)))
        .map(|(_, c)| c)
}

/// Levenshtein distance over chars, with adjacent transpositions counted as one edit.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len() > 64 || b.len() > 64 {
        return usize::MAX / 2;
    }
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(
            did_you_mean("h2000", ["h200_sxm", "h200", "h100"]),
            Some("h200")
        );
        assert_eq!(did_you_mean("modle", ["model", "slo"]), Some("model"));
        assert_eq!(did_you_mean("zzz", ["model", "slo"]), None);
        assert_eq!(edit_distance("GIB", "gib"), 3);
    }
}
