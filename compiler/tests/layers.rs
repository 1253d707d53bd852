//! The core's stages import in one direction. Each top-level module of `compiler/src` has
//! a layer; a module may use only modules of lower layers (or its own), so there is no
//! import cycle, and the analysis cannot reach the planner, the IR or the driver. The
//! order here is the one ARCHITECTURE.md draws; a new module must be given a layer.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Layers, lowest first: what each module is for.
const LAYERS: &[&[&str]] = &[
    // foundations: positions, numbers, names, diagnostics as data
    &["span", "text_rules", "secrets", "sample", "layers"],
    &["diagnostics"],
    &["units", "syntax"],
    &["stdlib", "source", "schema"],
    &["program", "vllm_args", "reference"],
    // the front end
    &["resolve"],
    &["check"],
    &["front", "architecture"],
    // per-deployment analysis (pure), then the search that compares layouts
    &["analysis"],
    &["planner"],
    // lowering of decided deployments, then the driver that orders everything
    &["ir"],
    &["driver"],
    // reads a checked program and its decided deployments (`dic observe`)
    &["observe"],
    // tools at the edge
    &["import_hf"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The top-level modules a module's source refers to (`crate::x`, or `super::x` in a
/// top-level file), comments ignored.
fn references(text: &str, top_level_file: bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        let prefixes: &[&str] = if top_level_file {
            &["crate::", "super::"]
        } else {
            &["crate::"]
        };
        while let Some((i, p)) = prefixes
            .iter()
            .filter_map(|p| rest.find(p).map(|i| (i, *p)))
            .min()
        {
            let after = &rest[i + p.len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            } else if let Some(group) = after.strip_prefix('{') {
                // `use crate::{a, b::c}`
                let inside = group.split('}').next().unwrap_or("");
                for part in inside.split(',') {
                    let n: String = part
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !n.is_empty() {
                        out.insert(n);
                    }
                }
            }
            rest = &rest[i + p.len()..];
        }
    }
    out
}

fn module_sources(src: &Path) -> BTreeMap<String, Vec<(String, bool)>> {
    let mut modules: BTreeMap<String, Vec<(String, bool)>> = BTreeMap::new();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let p = e.path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            let mut stack = vec![p.clone()];
            while let Some(d) = stack.pop() {
                for f in std::fs::read_dir(&d).unwrap().flatten() {
                    let q = f.path();
                    if q.is_dir() {
                        stack.push(q);
                    } else if q.extension().is_some_and(|x| x == "rs") {
                        let top = q.file_stem().is_some_and(|s| s == "mod") && d == p;
                        let text = std::fs::read_to_string(&q).unwrap();
                        modules.entry(name.clone()).or_default().push((text, top));
                    }
                }
            }
        } else if p.extension().is_some_and(|x| x == "rs") && name != "lib" {
            let text = std::fs::read_to_string(&p).unwrap();
            modules.entry(name).or_default().push((text, true));
        }
    }
    modules
}

#[test]
fn stages_import_downward_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = module_sources(&src);
    let mut problems = Vec::new();
    for (module, files) in &modules {
        let Some(mine) = layer_of(module) else {
            problems.push(format!("`{module}` has no layer in tests/layers.rs"));
            continue;
        };
        let used: BTreeSet<String> = files
            .iter()
            .flat_map(|(text, top)| references(text, *top))
            .filter(|u| modules.contains_key(u) && u != module)
            .collect();
        for u in used {
            let theirs = layer_of(&u).unwrap_or(usize::MAX);
            if theirs >= mine {
                problems.push(format!(
                    "`{module}` (layer {mine}) uses `{u}` (layer {theirs}): stages import downward only"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_reference_finder_sees_every_form() {
    let refs = references(
        "use crate::{a, b::c};\nuse crate::d::E;\nlet x = crate::f::g();\n// crate::h\nuse super::i;",
        true,
    );
    let want: BTreeSet<String> = ["a", "b", "d", "f", "i"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(refs, want);
}
