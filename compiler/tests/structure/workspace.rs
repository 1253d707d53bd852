//! The workspace's source files: every package's `src/`, `tests/`, `benches/`,
//! `examples/` and `build.rs`, the packages read from the root manifest.

use std::path::{Path, PathBuf};

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The package folders of the workspace, relative to its root ("" for the root package):
/// the root manifest's `members`, and the root itself.
fn packages(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("the root Cargo.toml lists its members on one line");
    let mut out = vec![String::new()];
    out.extend(line.split('"').skip(1).step_by(2).map(str::to_string));
    out
}

/// Every `.rs` file under `dir`, recursively, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A source file of the workspace.
pub struct SourceFile {
    /// From the workspace root, `/`-separated.
    pub path: String,
    pub text: String,
    /// The package folder ("" for the root package).
    pub package: String,
    /// Part of a crate's module tree (under `src/`), not a test, bench or example.
    pub in_src: bool,
    /// Under a `tests/` folder.
    pub is_test: bool,
}

pub fn workspace_files() -> Vec<SourceFile> {
    let root = workspace_root();
    let mut out = Vec::new();
    for package in packages(&root) {
        let dir = root.join(&package);
        for sub in ["src", "tests", "benches", "examples"] {
            for p in rust_files(&dir.join(sub)) {
                let rel = p
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push(SourceFile {
                    text: std::fs::read_to_string(&p).unwrap(),
                    path: rel,
                    package: package.clone(),
                    in_src: sub == "src",
                    is_test: sub == "tests",
                });
            }
        }
        let build = dir.join("build.rs");
        if build.is_file() {
            out.push(SourceFile {
                text: std::fs::read_to_string(&build).unwrap(),
                path: build
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/"),
                package: package.clone(),
                in_src: false,
                is_test: false,
            });
        }
    }
    out
}
