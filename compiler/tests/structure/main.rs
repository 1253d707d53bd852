//! The workspace's shape, read from its source text: (a) no import cycle among modules,
//! (b) no source file over `MAX_FILE_LINES` lines, (c) no function over
//! `MAX_FUNCTION_LINES` lines outside tests, (d) the targets import nothing of the
//! compiler core but its IR, (e) a test that needs `../shared` is marked so a clone
//! without it counts the test ignored. `tests/layers.rs` orders the core's top-level modules; this
//! test covers every crate of the workspace and every level of its module trees.
//!
//! Each rule has an allow-list of the violations known when it was written, each with its
//! size then. A listed item may shrink but not grow, an unlisted violation fails, and a
//! listed item that no longer violates fails too (remove it from the list): the lists only
//! shrink.
//!
//! The scan is textual: comments and the insides of string and character literals are
//! blanked first, then braces are counted. `#[cfg(test)]` and `#[test]` items are skipped
//! for (a), (c) and (d); tests/ folders count only for (b).

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod lexer;
mod modules;
mod workspace;

use lexer::{functions, lex};
use modules::{cycles, sibling_edges, used_paths};
use std::collections::{BTreeMap, BTreeSet};
use workspace::workspace_files;

/// (b): a file a reader can hold.
const MAX_FILE_LINES: usize = 900;
/// (c): a function a reader can hold.
const MAX_FUNCTION_LINES: usize = 150;

/// (b) Files over the limit when this test was written: (path from the workspace root,
/// lines then).
const LONG_FILES: &[(&str, usize)] = &[
    // issue 35 item 4: each to be split into modules a reader can hold
];

/// (c) Functions over the limit when this test was written: (file, function name, lines
/// then, from `fn` to its closing brace).
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[
    // issue 35 item 4 named pod (split in issue 38: k8s/pod.rs); the
    // others were found by this test
];

/// (a) Import cycles when this test was written: the sibling modules of each cycle, as
/// `package::path::to::module`, sorted. (The one it was written with, analysis's
/// memory → speculative → memory and memory ↔ kv_pool, went with `analysis::weights`.)
const CYCLES: &[&[&str]] = &[
    // None since runtime::cpu ↔ runtime::handshake went (the rank-list helper moved into
    // handshake, its one user); kept so that an exception has to be written here.
];

/// (d) The modules of `dic_compiler` that the targets may use: the IR is their whole input.
const TARGETS_MAY_USE: &[&str] = &["ir"];

/// (d) Other core modules a target used when this test was written: (file, module). None
/// since the IR split (issue 35 item 1); kept so that an exception has to be written here.
const TARGET_IMPORTS: &[(&str, &str)] = &[];

// ---------------------------------------------------------------------------------------
// The rules against their allow-lists

/// Compares what was found with an allow-list: a new violation, one that grew, or a listed
/// one that is gone is a problem.
fn against_list<K: Ord + std::fmt::Debug + Clone>(
    rule: &str,
    found: &BTreeMap<K, usize>,
    listed: &BTreeMap<K, usize>,
    problems: &mut Vec<String>,
) {
    for (key, &size) in found {
        match listed.get(key) {
            None => problems.push(format!("{rule}: {key:?} ({size}) is new")),
            Some(&then) if size > then => {
                problems.push(format!("{rule}: {key:?} grew from {then} to {size}"))
            }
            Some(_) => {}
        }
    }
    for (key, then) in listed {
        if !found.contains_key(key) {
            problems.push(format!(
                "{rule}: {key:?} (was {then}) is fixed: remove it from the list in compiler/tests/structure/main.rs"
            ));
        }
    }
}

#[test]
fn no_source_file_is_over_the_limit() {
    let found: BTreeMap<String, usize> = workspace_files()
        .into_iter()
        .map(|f| (f.path, f.text.lines().count()))
        .filter(|(_, n)| *n > MAX_FILE_LINES)
        .collect();
    let listed = LONG_FILES
        .iter()
        .map(|(p, n)| (p.to_string(), *n))
        .collect();
    let mut problems = Vec::new();
    against_list(
        &format!("files over {MAX_FILE_LINES} lines"),
        &found,
        &listed,
        &mut problems,
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_function_is_over_the_limit() {
    let mut found: BTreeMap<(String, String), usize> = BTreeMap::new();
    for f in workspace_files().into_iter().filter(|f| !f.is_test) {
        for (name, lines) in functions(&lex(&f.text)) {
            if lines > MAX_FUNCTION_LINES {
                let e = found.entry((f.path.clone(), name)).or_default();
                *e = (*e).max(lines);
            }
        }
    }
    let listed = LONG_FUNCTIONS
        .iter()
        .map(|(p, n, l)| ((p.to_string(), n.to_string()), *l))
        .collect();
    let mut problems = Vec::new();
    against_list(
        &format!("functions over {MAX_FUNCTION_LINES} lines"),
        &found,
        &listed,
        &mut problems,
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_import_cycle() {
    let files = workspace_files();
    let mut found: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    let mut evidence = Vec::new();
    for (parent, edges) in sibling_edges(&files) {
        for cycle in cycles(&edges) {
            let names: Vec<String> = cycle
                .iter()
                .map(|c| format!("{}::{c}", parent.join("::")))
                .collect();
            for ((a, b), why) in &edges {
                if cycle.contains(a) && cycle.contains(b) {
                    evidence.push(format!("  {a} → {b}: {why}"));
                }
            }
            found.insert(names, cycle.len());
        }
    }
    let listed = CYCLES
        .iter()
        .map(|c| (c.iter().map(|s| s.to_string()).collect::<Vec<_>>(), c.len()))
        .collect();
    let mut problems = Vec::new();
    against_list("import cycles", &found, &listed, &mut problems);
    assert!(
        problems.is_empty(),
        "{}\n{}",
        problems.join("\n"),
        evidence.join("\n")
    );
}

#[test]
fn targets_use_only_the_ir() {
    let mut found: BTreeMap<(String, String), usize> = BTreeMap::new();
    for f in workspace_files()
        .into_iter()
        .filter(|f| f.package == "targets" && f.in_src)
    {
        let lexed = lex(&f.text);
        for used in used_paths(&lexed, &BTreeSet::new(), &["dic_compiler"]) {
            if used.segments.first().is_some_and(|s| s == "dic_compiler") {
                let module = used.segments.get(1).cloned().unwrap_or_default();
                if !TARGETS_MAY_USE.contains(&module.as_str()) {
                    *found.entry((f.path.clone(), module)).or_default() += 1;
                }
            }
        }
    }
    // Sizes are counts of uses; only presence matters for the list.
    let found = found.into_keys().map(|k| (k, 1)).collect();
    let listed = TARGET_IMPORTS
        .iter()
        .map(|(p, m)| ((p.to_string(), m.to_string()), 1))
        .collect();
    let mut problems = Vec::new();
    against_list(
        &format!("targets using core modules other than {TARGETS_MAY_USE:?}"),
        &found,
        &listed,
        &mut problems,
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// (e) A test that needs `../shared` says so. In a package whose build script sets
/// `dic_no_shared` when `../shared` is absent, every test calling `required_shared_dir()`
/// (which panics without it) carries `#[cfg_attr(dic_no_shared, ignore = …)]`, so a clone
/// without the data counts it as ignored rather than failed; a package without that
/// build script cannot mark its tests, so none of its tests reads `../shared`. (A fresh
/// clone found one test of each kind: an ignore that had drifted onto the test above it,
/// and `compiler/tests/block_fp8.rs` reading a config from `../shared`.)
#[test]
fn tests_that_need_shared_are_marked() {
    let files = workspace_files();
    let marking: BTreeSet<String> = files
        .iter()
        .filter(|f| f.path.ends_with("build.rs") && f.text.contains("dic_no_shared"))
        .map(|f| f.package.clone())
        .collect();
    let mut problems = Vec::new();
    // (This test's own folder names the patterns it looks for.)
    for f in files
        .iter()
        .filter(|f| f.is_test && !f.path.contains("/tests/structure/"))
    {
        if !marking.contains(&f.package) {
            if f.text.contains("../shared") || f.text.contains("shared_dir(") {
                problems.push(format!(
                    "{}: reads ../shared, but package `{}` cannot mark it ignored",
                    f.path, f.package
                ));
            }
            continue;
        }
        // Each `#[test]` function: its attributes (the lines above it back to the previous
        // item) and its body (to the next `#[test]` or the end).
        let lines: Vec<&str> = f.text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let Some(name) = l
                .trim_start()
                .strip_prefix("fn ")
                .and_then(|r| r.split('(').next())
            else {
                continue;
            };
            let attrs_start = lines[..i]
                .iter()
                .rposition(|a| {
                    let a = a.trim_start();
                    !(a.starts_with("#[")
                        || a.starts_with("///")
                        || a.starts_with(')')
                        || a.starts_with("ignore")
                        || a.starts_with("dic_no_")
                        || a.starts_with("not(")
                        || a.starts_with("all(")
                        || a.starts_with("any("))
                })
                .map_or(0, |p| p + 1);
            let attrs = lines[attrs_start..i].join("\n");
            if !attrs.contains("#[test]") {
                continue;
            }
            let end = lines[i + 1..]
                .iter()
                .position(|b| b.starts_with('}'))
                .map_or(lines.len(), |p| i + 1 + p);
            let body = lines[i..end].join("\n");
            if body.contains("required_shared_dir()") && !attrs.contains("dic_no_shared") {
                problems.push(format!(
                    "{}: test `{name}` needs ../shared but is not marked `cfg_attr(dic_no_shared, ignore = …)`",
                    f.path
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
