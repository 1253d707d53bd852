//! The entry points that the CLI, the language server, the benchmarks and the tests
//! share: load → parse → resolve → check, returning sources, program and diagnostics.

use crate::check::Checker;
use crate::diagnostics::{self, Diagnostic};
use crate::program::Program;
use crate::resolve::Session;
use crate::source::{ReadError, SourceDb, World};

/// The result of checking one root file.
pub struct Checked {
    pub db: SourceDb,
    pub program: Program,
    /// Sorted by file and position.
    pub diagnostics: Vec<Diagnostic>,
    /// The analysis of every deployment with an explicit layout (empty from
    /// [`front_end`] and [`check_stdlib`]); `dic compile` lowers from these.
    pub analyses: Vec<(
        crate::analysis::DeploymentScenario,
        crate::analysis::Analysis,
    )>,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Checks the file at `path` as read through `world`. A root file that cannot be read
/// at all is an `Err` (a usage error for the CLI), not a diagnostic.
pub fn check_file(world: &dyn World, path: &str) -> Result<Checked, ReadError> {
    let mut s = Session::new(world);
    s.load_root(path)?;
    Ok(finish(s))
}

/// The front end only — parse, resolve, check — without the analysis of deployments
/// (what the front-end benchmark measures).
pub fn front_end(world: &dyn World, path: &str) -> Result<Checked, ReadError> {
    let mut s = Session::new(world);
    s.load_root(path)?;
    let program = Checker::new(&mut s).check_user_files();
    let mut diags = std::mem::take(&mut s.diags);
    diagnostics::sort(&mut diags);
    Ok(Checked {
        db: s.db,
        program,
        diagnostics: diags,
        analyses: Vec::new(),
    })
}

/// Checks `text` as if it were the file at `path` (imports still go through `world`).
pub fn check_text(world: &dyn World, path: &str, text: &str) -> Checked {
    let mut s = Session::new(world);
    s.load_root_text(path, text);
    finish(s)
}

fn finish(mut s: Session<'_>) -> Checked {
    let program = Checker::new(&mut s).check_user_files();
    let mut diags = std::mem::take(&mut s.diags);
    let (analyses, analysis_diags) = crate::analysis::analyze_program(&program);
    diags.extend(analysis_diags);
    let (_, lowering_diags) =
        crate::ir::lower_from(&program, &analyses, crate::ir::Detail::DiagnosticsOnly);
    diags.extend(lowering_diags);
    diagnostics::sort(&mut diags);
    diags.dedup();
    Checked {
        db: s.db,
        program,
        diagnostics: diags,
        analyses,
    }
}

/// Checks every stdlib module in full (the stdlib must check clean).
pub fn check_stdlib() -> Checked {
    let world = crate::source::MemoryWorld::new();
    let mut s = Session::new(&world);
    for i in 0..crate::stdlib::MODULES.len() {
        s.load_stdlib(i);
    }
    let program = Checker::new(&mut s).check_everything();
    let mut diags = std::mem::take(&mut s.diags);
    diagnostics::sort(&mut diags);
    Checked {
        db: s.db,
        program,
        diagnostics: diags,
        analyses: Vec::new(),
    }
}
