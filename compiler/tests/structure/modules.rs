//! The module graph: the paths each file uses (`use` trees and paths in code), resolved
//! to the file modules they name, as edges between sibling modules; and its cycles.

use crate::lexer::{lex, Lexed, Token};
use crate::workspace::SourceFile;
use std::collections::{BTreeMap, BTreeSet};

/// A path used in code: its segments and the line it is on.
#[derive(Debug, Clone, PartialEq)]
pub struct UsedPath {
    pub segments: Vec<String>,
    line: usize,
    /// The inline modules (`mod x { … }`) the use sits in, outermost first.
    inline: Vec<String>,
}

/// The paths of a `use` tree starting at `start` (after `use`), groups expanded, and the
/// index after its `;`.
fn use_tree(
    toks: &[Token],
    start: usize,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix;
    let mut j = start;
    while j < toks.len() {
        match toks[j].text.as_str() {
            "::" => j += 1,
            "{" => {
                j += 1;
                loop {
                    j = use_tree(toks, j, path.clone(), out);
                    match toks.get(j).map(|t| t.text.as_str()) {
                        Some(",") => j += 1,
                        _ => break,
                    }
                    if toks.get(j).is_some_and(|t| t.text == "}") {
                        break;
                    }
                }
                // `}` of this group
                return j + 1;
            }
            "as" => {
                out.push(path);
                return j + 2;
            }
            "*" => {
                out.push(path);
                return j + 1;
            }
            "," | "}" | ";" => {
                if !path.is_empty() {
                    out.push(path);
                }
                return j;
            }
            w => {
                path.push(w.to_string());
                j += 1;
            }
        }
    }
    j
}

/// The module paths a file's code names outside test-only items: its `use` trees, and the
/// paths in code that start with `crate`, `self`, `super`, an external crate name from
/// `externs`, or a module `children` declares.
pub fn used_paths(lexed: &Lexed, children: &BTreeSet<String>, externs: &[&str]) -> Vec<UsedPath> {
    let toks = &lexed.toks;
    let mut out = Vec::new();
    // Inline modules open at each brace depth.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        if lexed.test_only[i] {
            i += 1;
            continue;
        }
        let t = toks[i].text.as_str();
        match t {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if toks.get(i + 2).is_some_and(|t| t.text == "{") => {
                inline.push((toks[i + 1].text.clone(), depth));
            }
            "use" => {
                let mut paths = Vec::new();
                let end = use_tree(toks, i + 1, Vec::new(), &mut paths);
                let here: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
                for segments in paths {
                    out.push(UsedPath {
                        segments,
                        line: toks[i].line,
                        inline: here.clone(),
                    });
                }
                i = end;
                continue;
            }
            _ => {}
        }
        let starts_path = (t == "crate"
            || t == "self"
            || t == "super"
            || children.contains(t)
            || externs.contains(&t))
            && toks.get(i + 1).is_some_and(|n| n.text == "::")
            && (i == 0 || toks[i - 1].text != "::");
        if starts_path {
            let mut segments = vec![t.to_string()];
            let mut j = i + 1;
            while toks.get(j).is_some_and(|n| n.text == "::")
                && toks.get(j + 1).is_some_and(|n| {
                    n.text
                        .starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })
            {
                segments.push(toks[j + 1].text.clone());
                j += 2;
            }
            out.push(UsedPath {
                segments,
                line: toks[i].line,
                inline: inline.iter().map(|(n, _)| n.clone()).collect(),
            });
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// The module path of a file under `src/`: `a/b.rs` and `a/b/mod.rs` are `[a, b]`;
/// `lib.rs` and `main.rs` are the crate root.
fn module_path(rel_to_src: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel_to_src.split('/').map(str::to_string).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    let top_root = parts.is_empty() && (stem == "lib" || stem == "main");
    if stem != "mod" && !top_root {
        parts.push(stem.to_string());
    }
    parts
}

/// The modules `mod x;` declares at a file's top level.
pub fn declared_children(lexed: &Lexed) -> BTreeSet<String> {
    let toks = &lexed.toks;
    (0..toks.len().saturating_sub(2))
        .filter(|&i| toks[i].text == "mod" && toks[i + 2].text == ";" && !lexed.test_only[i])
        .map(|i| toks[i + 1].text.clone())
        .collect()
}

/// An edge between two sibling modules: the file and line that makes it, and the path.
type Evidence = String;

/// For every parent module, the edges between its children (each child with everything
/// below it): `parent → (from child, to child) → evidence`. A module's use of its own
/// ancestors or descendants is its use of its own parts, not an edge.
pub fn sibling_edges(
    files: &[SourceFile],
) -> BTreeMap<Vec<String>, BTreeMap<(String, String), Evidence>> {
    let mut graph: BTreeMap<Vec<String>, BTreeMap<(String, String), Evidence>> = BTreeMap::new();
    let mut by_package: BTreeMap<&str, Vec<&SourceFile>> = BTreeMap::new();
    for f in files.iter().filter(|f| f.in_src) {
        by_package.entry(&f.package).or_default().push(f);
    }
    for (package, files) in by_package {
        let crate_name = if package.is_empty() { "dic" } else { package };
        let src = if package.is_empty() {
            "src/".to_string()
        } else {
            format!("{package}/src/")
        };
        let modules: Vec<(Vec<String>, &SourceFile)> = files
            .iter()
            .map(|f| (module_path(f.path.strip_prefix(&src).unwrap()), *f))
            .collect();
        let known: BTreeSet<&Vec<String>> = modules.iter().map(|(m, _)| m).collect();
        for (me, file) in &modules {
            let lexed = lex(&file.text);
            let children = declared_children(&lexed);
            for used in used_paths(&lexed, &children, &[]) {
                let Some(target) = resolve(me, &used, &children) else {
                    continue;
                };
                // The file module holding the named item: the longest known prefix.
                let Some(target) = (0..=target.len())
                    .rev()
                    .map(|n| target[..n].to_vec())
                    .find(|p| known.contains(p))
                else {
                    continue;
                };
                let common = me.iter().zip(&target).take_while(|(a, b)| a == b).count();
                if common == me.len() || common == target.len() {
                    continue; // an ancestor or a descendant
                }
                let parent: Vec<String> = std::iter::once(crate_name.to_string())
                    .chain(me[..common].iter().cloned())
                    .collect();
                graph
                    .entry(parent)
                    .or_default()
                    .entry((me[common].clone(), target[common].clone()))
                    .or_insert_with(|| {
                        format!(
                            "{}:{} uses {}",
                            file.path,
                            used.line,
                            used.segments.join("::")
                        )
                    });
            }
        }
    }
    graph
}

/// The module path a used path names, from the module `me` (a file) it is used in;
/// `None` for an external crate or a local name.
fn resolve(me: &[String], used: &UsedPath, children: &BTreeSet<String>) -> Option<Vec<String>> {
    let mut here: Vec<String> = me.iter().chain(&used.inline).cloned().collect();
    let mut segments = used.segments.iter().peekable();
    match segments.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segments.next();
            here.clear();
        }
        Some("self") => {
            segments.next();
        }
        Some("super") => {
            while segments.peek().is_some_and(|s| *s == "super") {
                segments.next();
                here.pop()?;
            }
        }
        Some(first) if used.inline.is_empty() && children.contains(first) => {}
        _ => return None,
    }
    here.extend(segments.cloned());
    Some(here)
}

/// The strongly connected components of more than one node (Tarjan's algorithm).
pub fn cycles(edges: &BTreeMap<(String, String), Evidence>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
    let nodes: Vec<&String> = nodes.into_iter().collect();
    let index_of = |n: &String| nodes.iter().position(|m| *m == n).unwrap();
    let adjacency: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            edges
                .keys()
                .filter(|(a, _)| a == *n)
                .map(|(_, b)| index_of(b))
                .collect()
        })
        .collect();
    struct Tarjan<'a> {
        adjacency: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for &w in &self.adjacency[v] {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        adjacency: &adjacency,
        index: vec![None; nodes.len()],
        low: vec![0; nodes.len()],
        on_stack: vec![false; nodes.len()],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in 0..nodes.len() {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    t.found
        .into_iter()
        .map(|c| {
            let mut names: Vec<String> = c.into_iter().map(|i| nodes[i].clone()).collect();
            names.sort();
            names
        })
        .collect()
}

#[test]
fn use_trees_and_paths_are_found() {
    let src = "use crate::{a, b::{c, d as e}, f::*};\nuse super::g;\nfn x() { crate::h::i(); child::j(); other::k(); }\nmod child;\n#[cfg(test)]\nmod tests { use crate::z; }";
    let lexed = lex(src);
    let children = declared_children(&lexed);
    let paths: Vec<String> = used_paths(&lexed, &children, &[])
        .into_iter()
        .map(|p| p.segments.join("::"))
        .collect();
    assert_eq!(
        paths,
        [
            "crate::a",
            "crate::b::c",
            "crate::b::d",
            "crate::f",
            "super::g",
            "crate::h::i",
            "child::j"
        ]
    );
}

#[test]
fn a_cycle_is_found_and_a_chain_is_not() {
    let edge = |a: &str, b: &str| ((a.to_string(), b.to_string()), String::new());
    let cyclic: BTreeMap<_, _> = [
        edge("a", "b"),
        edge("b", "c"),
        edge("c", "a"),
        edge("c", "d"),
    ]
    .into();
    assert_eq!(cycles(&cyclic), vec![vec!["a", "b", "c"]]);
    let chain: BTreeMap<_, _> = [edge("a", "b"), edge("b", "c"), edge("a", "c")].into();
    assert!(cycles(&chain).is_empty());
}
