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
    /// The front end's share of `diagnostics` (parse, resolve, check), kept so the
    /// analysis can be redone without the front end ([`reanalyze`]).
    pub front_diagnostics: Vec<Diagnostic>,
    /// The analysis of every deployment with an explicit layout (empty from
    /// [`front_end`] and [`check_stdlib`]); `dic compile` lowers from these.
    pub analyses: Vec<(
        crate::analysis::DeploymentScenario,
        crate::analysis::Analysis,
    )>,
    /// The deployments lowered for diagnostics (`Detail::DiagnosticsOnly`: no report
    /// search), `layout = auto` ones with the planner's choice: what editors show on hover.
    pub plan: crate::ir::Plan,
    /// The root file's syntax tree (recovered, so partial for broken input); empty from
    /// [`check_stdlib`].
    pub root_ast: std::sync::Arc<crate::syntax::ast::SourceAst>,
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
    diagnostics::cap(&mut diags);
    Ok(Checked {
        db: s.db,
        program,
        front_diagnostics: diags.clone(),
        diagnostics: diags,
        analyses: Vec::new(),
        plan: Default::default(),
        root_ast: s.modules.first().map(|m| m.ast.clone()).unwrap_or_default(),
    })
}

/// Checks `text` as if it were the file at `path` (imports still go through `world`).
pub fn check_text(world: &dyn World, path: &str, text: &str) -> Checked {
    let mut s = Session::new(world);
    s.load_root_text(path, text);
    finish(s)
}

/// As [`check_text`], reusing the analyses of unchanged deployments from `cache`, and
/// with the planner's advice only when `advice` asks for it (the language server
/// publishes without it first, then with it).
pub fn check_text_cached(
    world: &dyn World,
    path: &str,
    text: &str,
    cache: &mut crate::analysis::AnalysisCache,
    advice: crate::analysis::Advice,
) -> Checked {
    let mut s = Session::new(world);
    s.load_root_text(path, text);
    finish_with(s, cache, advice)
}

fn finish(s: Session<'_>) -> Checked {
    finish_with(
        s,
        &mut crate::analysis::AnalysisCache::default(),
        crate::analysis::Advice::Planner,
    )
}

fn finish_with(
    mut s: Session<'_>,
    cache: &mut crate::analysis::AnalysisCache,
    advice: crate::analysis::Advice,
) -> Checked {
    let program = Checker::new(&mut s).check_user_files();
    let mut front = std::mem::take(&mut s.diags);
    diagnostics::sort(&mut front);
    diagnostics::cap(&mut front);
    let root_ast = s.modules.first().map(|m| m.ast.clone()).unwrap_or_default();
    let mut checked = Checked {
        db: s.db,
        program,
        diagnostics: Vec::new(),
        front_diagnostics: front,
        analyses: Vec::new(),
        plan: Default::default(),
        root_ast,
    };
    reanalyze(&mut checked, cache, advice);
    checked
}

/// (Re)does the analysis of a checked program's deployments — e.g. with the planner's
/// advice after a first pass without it — and rebuilds `diagnostics` from the front end's
/// and the analysis'.
pub fn reanalyze(
    checked: &mut Checked,
    cache: &mut crate::analysis::AnalysisCache,
    advice: crate::analysis::Advice,
) {
    let (analyses, analysis_diags) =
        crate::analysis::analyze_program_cached(&checked.program, cache, advice);
    let (plan, lowering_diags) = crate::ir::lower_from(
        &checked.program,
        &analyses,
        crate::ir::Detail::DiagnosticsOnly,
    );
    let mut diags = checked.front_diagnostics.clone();
    diags.extend(analysis_diags);
    diags.extend(lowering_diags);
    diagnostics::sort(&mut diags);
    diags.dedup();
    diagnostics::cap(&mut diags);
    checked.diagnostics = diags;
    checked.analyses = analyses;
    checked.plan = plan;
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
    diagnostics::cap(&mut diags);
    Checked {
        db: s.db,
        program,
        front_diagnostics: diags.clone(),
        diagnostics: diags,
        analyses: Vec::new(),
        plan: Default::default(),
        root_ast: Default::default(),
    }
}
