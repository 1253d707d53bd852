//! Every example is checked and formatted; diagnostics and `dic fmt` output are snapshotted.
//! Examples outside `examples/mistakes/` must have no errors; the mistakes must fail.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use dic::disk::DiskWorld;

#[test]
fn examples_check_as_expected() {
    let files = common::dist_files("examples");
    assert!(files.len() >= 10, "{files:?}");
    for path in files {
        let checked = dic_compiler::driver::check_file(&DiskWorld, &path).expect("readable");
        let is_mistake = path.contains("/mistakes/");
        if is_mistake {
            assert!(checked.has_errors(), "{path} should have errors");
        } else {
            // Warnings and advice are part of what an example shows; errors are not.
            assert!(
                !checked.has_errors(),
                "{path}:\n{}",
                common::rendered(&checked)
            );
        }
        insta::assert_snapshot!(
            format!("check__{}", common::snap_name(&path)),
            common::rendered(&checked)
        );
    }
}

#[test]
fn fmt_is_canonical_idempotent_and_keeps_comments() {
    let mut files = common::dist_files("examples");
    files.extend(common::dist_files("stdlib"));
    for path in files {
        let text = std::fs::read_to_string(&path).expect("utf-8");
        let (ast, diags) = dic_compiler::syntax::parse(&text, dic_compiler::span::FileId(0));
        assert!(diags.is_empty(), "{path}: {diags:?}");
        let once = dic_compiler::syntax::fmt::format(&text, &ast);
        let (ast2, diags2) = dic_compiler::syntax::parse(&once, dic_compiler::span::FileId(0));
        assert!(
            diags2.is_empty(),
            "{path}: formatted text does not parse: {diags2:?}"
        );
        let twice = dic_compiler::syntax::fmt::format(&once, &ast2);
        assert_eq!(once, twice, "{path}: fmt is not idempotent");
        let comments = |a: &dic_compiler::syntax::ast::SourceAst| {
            a.comments
                .iter()
                .map(|c| c.text.trim_end().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            comments(&ast),
            comments(&ast2),
            "{path}: fmt lost or reordered comments"
        );
        assert_eq!(once, text, "{path} is not formatted: run `dic fmt {path}`");
        if path.starts_with("examples/") {
            insta::assert_snapshot!(format!("fmt__{}", common::snap_name(&path)), once);
        }
    }
}
