//! The stdlib must check clean: no error or warning in any module, every definition complete.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

#[test]
fn stdlib_checks_clean() {
    let checked = dic_compiler::driver::check_stdlib();
    let rendered: Vec<String> = checked
        .diagnostics
        .iter()
        .map(|d| {
            let at = d
                .location()
                .map(|l| (checked.db.get(l.file).name.clone(), l.span));
            format!(
                "{} {}: {} at {at:?}",
                d.code,
                d.severity.as_str(),
                d.message
            )
        })
        .collect();
    assert!(rendered.is_empty(), "{}", rendered.join("\n"));
    assert!(checked.program.defs.iter().flatten().all(|d| d.complete));
    assert!(checked.program.defs.iter().flatten().count() > 80);
}
