//! Helpers shared by the integration tests.
#![allow(dead_code)]

use dic_compiler::driver::Checked;
use std::path::PathBuf;

/// `../shared` beside the repository, or `None` with a visible message (a user's clone
/// has no `../shared`); under `CI=true` its absence fails the test.
pub fn shared_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if dir.is_dir() {
        Some(dir)
    } else if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "../shared is absent under CI=true: the tests that need its reference data cannot run"
        );
    } else {
        eprintln!("SKIPPED: ../shared is absent; tests that need its reference data did not run");
        None
    }
}

/// Diagnostics as a user sees them in a terminal without colour, 100 columns wide.
pub fn rendered(checked: &Checked) -> String {
    let mut out = dic::render::human(&checked.db, &checked.diagnostics, false, 100);
    out.push_str(&dic::render::summary(&checked.diagnostics));
    out.push('\n');
    out
}

/// Every `.dist` file under `dir`, sorted, as paths relative to the repository root.
pub fn dist_files(dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::from(dir)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("readable directory").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "dist") {
                out.push(p.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

/// A snapshot-friendly name for a path: `examples/mistakes/units.dist` → `mistakes__units`.
pub fn snap_name(path: &str) -> String {
    path.trim_start_matches("examples/")
        .trim_end_matches(".dist")
        .replace('/', "__")
}

/// Runs the `dic` binary built for the tests, without colour.
pub fn dic(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dic"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("the dic binary runs")
}
