//! The front end in one call: parse → resolve → check, for a root file's session or for
//! the whole stdlib. What comes after it (analysis, planner, lowering) is the driver's
//! business; the stdlib catalog the analysis reads is built here, from the front end
//! alone, so the analysis never reaches back into the driver.

use crate::check::Checker;
use crate::diagnostics::{self, Diagnostic};
use crate::program::Program;
use crate::resolve::Session;
use crate::source::SourceDb;
use crate::syntax::ast::SourceAst;
use std::sync::{Arc, OnceLock};

/// What the front end makes of a session: sources, the typed program, its diagnostics
/// (sorted, capped) and the root file's syntax tree.
pub struct FrontEnd {
    pub db: SourceDb,
    pub program: Program,
    pub diagnostics: Vec<Diagnostic>,
    pub root_ast: Arc<SourceAst>,
}

/// Checks the user files a session loaded.
pub fn check_session(mut s: Session<'_>) -> FrontEnd {
    let program = Checker::new(&mut s).check_user_files();
    finish(s, program)
}

fn finish(mut s: Session<'_>, program: Program) -> FrontEnd {
    let mut diags = std::mem::take(&mut s.diags);
    diagnostics::sort(&mut diags);
    diagnostics::cap(&mut diags);
    FrontEnd {
        root_ast: s.modules.first().map(|m| m.ast.clone()).unwrap_or_default(),
        db: s.db,
        program,
        diagnostics: diags,
    }
}

/// Every stdlib module checked in full (the stdlib must check clean).
pub fn check_stdlib() -> FrontEnd {
    let world = crate::source::MemoryWorld::new();
    let mut s = Session::new(&world);
    for i in 0..crate::stdlib::MODULES.len() {
        s.load_stdlib(i);
    }
    let program = Checker::new(&mut s).check_everything();
    let mut front = finish(s, program);
    front.root_ast = Default::default();
    front
}

/// The checked stdlib, once per process.
pub fn stdlib() -> &'static FrontEnd {
    static STD: OnceLock<FrontEnd> = OnceLock::new();
    STD.get_or_init(check_stdlib)
}
