//! `dic observe --write`: the measured values put into the `.dist` files.
//!
//! The drift diagnostics ([`super::observe`]) carry fixes: the measured value at the span
//! of the declared one (`prompt`, `output`, `rate`/`concurrency`, `acceptance`,
//! `prefix_reuse`). This applies them to the files that hold those fields (a workload
//! imported from another file is rewritten there; the stdlib is never written), leaves
//! one provenance comment above each definition it changed (replacing the one an earlier
//! run left), and prints the result through `dic fmt`'s formatter, so comments and layout
//! are kept and `dic fmt --check` passes on it.

use crate::analysis::DeploymentScenario;
use crate::diagnostics::{Code, Diagnostic, Fix};
use crate::program::Calibration;
use crate::program::Program;
use crate::source::SourceDb;
use crate::span::{FileId, FileSpan};

/// The start of every provenance comment `--write` leaves.
pub const PROVENANCE: &str = "// dic observe:";

/// One file rewritten.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewritten {
    pub file: FileId,
    pub path: String,
    pub text: String,
    /// The fields changed, as `prompt = 1870 tokens`.
    pub changes: Vec<String>,
}

/// Why a file could not be rewritten.
#[derive(Debug, Clone, PartialEq)]
pub struct RewriteError(pub String);

/// The codes whose fixes `--write` applies: the declared workload and rates.
pub fn writes(code: Code) -> bool {
    matches!(code, Code::WorkloadDrift | Code::DeclaredRateDiffers)
}

/// The fixes `--write` applies: those of the drift diagnostics.
pub fn measured_fixes(diagnostics: &[Diagnostic]) -> Vec<Fix> {
    diagnostics
        .iter()
        .filter(|d| writes(d.code))
        .flat_map(|d| d.fixes.iter().cloned())
        .collect()
}

/// The fix that puts `calibration = { … }` into the deployment: its value replaced where
/// the deployment has one, else a new entry before the deployment's closing brace.
pub fn calibration_fix(
    db: &SourceDb,
    program: &Program,
    ds: &DeploymentScenario,
    c: Calibration,
) -> Result<Fix, RewriteError> {
    let def = program
        .def(ds.deploy)
        .ok_or_else(|| RewriteError(format!("deploy `{}` is not in the file", ds.name)))?;
    let value = super::calibrate::block_value(c);
    if let Some(f) = def.fields.get("calibration") {
        return Ok(Fix {
            title: "calibration fitted on the engines".into(),
            span: f.at,
            replacement: value,
        });
    }
    let text = &db.get(def.file).text;
    let end = def.span.end as usize;
    let close = text[..end]
        .rfind('}')
        .filter(|i| *i >= def.span.start as usize)
        .ok_or_else(|| RewriteError(format!("deploy `{}` has no closing brace", ds.name)))?;
    let at = crate::span::Span {
        start: close as u32,
        end: close as u32,
    };
    Ok(Fix {
        title: "calibration fitted on the engines".into(),
        span: FileSpan::new(def.file, at),
        replacement: format!("\ncalibration = {value}\n"),
    })
}

/// The rewritten files; `provenance` is the comment's text after [`PROVENANCE`] (the
/// source, the window, the date).
pub fn rewrite(
    db: &SourceDb,
    program: &Program,
    fixes: &[Fix],
    provenance: &str,
) -> Result<Vec<Rewritten>, RewriteError> {
    let mut by_file: std::collections::BTreeMap<FileId, Vec<(FileSpan, String, String)>> =
        Default::default();
    for f in fixes {
        let field = db.get(f.span.file).text[f.span.span.start as usize..f.span.span.end as usize]
            .to_string();
        by_file
            .entry(f.span.file)
            .or_default()
            .push((f.span, f.replacement.clone(), field));
    }
    let mut out = Vec::new();
    for (file, mut fixes) in by_file {
        let src = db.get(file);
        if src.is_stdlib {
            return Err(RewriteError(format!(
                "the measured fields are declared in the stdlib (`{}`); write the workload in your own file to record them",
                src.name
            )));
        }
        let text = src.text.to_string();
        fixes.sort_by_key(|(at, _, _)| std::cmp::Reverse(at.span.start));
        fixes.dedup_by_key(|(at, _, _)| at.span.start);
        // The definitions holding a changed field, for the provenance comments.
        let mut defs: Vec<usize> = fixes
            .iter()
            .filter_map(|(at, _, _)| enclosing_def_start(program, *at))
            .collect();
        defs.sort_unstable();
        defs.dedup();
        let mut new = text.clone();
        let mut changes = Vec::new();
        for (at, replacement, _) in &fixes {
            let (s, e) = (at.span.start as usize, at.span.end as usize);
            changes.push(if s == e {
                replacement.trim().to_string()
            } else {
                format!("{} = {replacement}", key_before(&text, s))
            });
            new.replace_range(s..e, replacement);
        }
        changes.reverse();
        // Insert comments from the end so earlier offsets stay valid (every fix is inside
        // a definition, after its start).
        for start in defs.into_iter().rev() {
            let line_start = new[..start].rfind('\n').map(|i| i + 1).unwrap_or(0);
            let comment = format!("{PROVENANCE} {provenance}\n");
            // An earlier run's comment right above is replaced, not stacked.
            let prev_start = new[..line_start.saturating_sub(1)]
                .rfind('\n')
                .map(|i| i + 1)
                .unwrap_or(0);
            if line_start > 0
                && new[prev_start..line_start]
                    .trim_start()
                    .starts_with(PROVENANCE)
            {
                new.replace_range(prev_start..line_start, &comment);
            } else {
                new.insert_str(line_start, &comment);
            }
        }
        let (ast, diags) = crate::syntax::parse(&new, file);
        if !diags.is_empty() {
            return Err(RewriteError(format!(
                "`{}` would not parse after writing the measured values; nothing written",
                src.name
            )));
        }
        out.push(Rewritten {
            file,
            path: src.name.clone(),
            text: crate::syntax::fmt::format(&new, &ast),
            changes,
        });
    }
    Ok(out)
}

/// The byte offset where the innermost user definition holding `at` starts.
fn enclosing_def_start(program: &Program, at: FileSpan) -> Option<usize> {
    program
        .defs
        .iter()
        .flatten()
        .filter(|d| d.file == at.file && d.span.start <= at.span.start && at.span.end <= d.span.end)
        .min_by_key(|d| d.span.end - d.span.start)
        .map(|d| d.span.start as usize)
}

/// The key of the `key = value` whose value starts at `value_start` (for the summary).
fn key_before(text: &str, value_start: usize) -> String {
    let before = &text[..value_start];
    let eq = before.rfind('=').unwrap_or(0);
    before[..eq]
        .trim_end()
        .rsplit(|c: char| c.is_whitespace() || c == '{' || c == ',')
        .next()
        .unwrap_or("")
        .to_string()
}
