//! One test per fixture file (datatest-stable, so the first failure does not hide the
//! rest): every example is checked and its diagnostics snapshotted (examples outside
//! `examples/mistakes/` must have no errors; the mistakes must fail), and every example and
//! stdlib file is in canonical `dic fmt` form.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use dic::disk::DiskWorld;
use std::path::Path;

/// One example: checked (mistakes must fail, the rest must have no errors) and its
/// diagnostics snapshotted.
fn check_example(path: &Path) -> datatest_stable::Result<()> {
    let path = path.to_string_lossy().replace('\\', "/");
    {
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
            common::rendered_for_snapshot(&checked)
        );
    }
    Ok(())
}

/// One `.dist` file of the examples or the stdlib: already in `dic fmt`'s canonical form
/// (so no snapshot of it is needed: the file is its own), and formatting is idempotent and
/// keeps every comment.
fn fmt_is_canonical(path: &Path) -> datatest_stable::Result<()> {
    let path = path.to_string_lossy().replace('\\', "/");
    {
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
    }
    Ok(())
}

datatest_stable::harness! {
    { test = check_example, root = "examples", pattern = r"^.*\.dist$" },
    { test = fmt_is_canonical, root = "examples", pattern = r"^.*\.dist$" },
    { test = fmt_is_canonical, root = "stdlib", pattern = r"^.*\.dist$" },
}
