//! `docs/language.md` is the language reference generated from the schema
//! (`dic_compiler::reference`): this test fails when the file is stale. Rerun with
//! `DIC_UPDATE_DOCS=1` to rewrite it, and review the diff.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

#[test]
fn the_language_reference_is_current() {
    let text = dic_compiler::reference::language_reference();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/language.md");
    if std::env::var("DIC_UPDATE_DOCS").is_ok() {
        std::fs::write(path, &text).unwrap();
    }
    let stored = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        stored == text,
        "docs/language.md is stale: rerun with DIC_UPDATE_DOCS=1 and review the diff"
    );
}
