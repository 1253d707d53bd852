//! Source files and the [`World`] trait through which all input reaches the compiler.
//!
//! The compiler core does no IO. The CLI reads files from disk, the language server
//! overlays open editor buffers, and tests serve in-memory maps — all through
//! [`World`]. The stdlib is embedded in the binary and served by [`crate::stdlib`]
//! under pseudo paths (`std/models.dist`), so diagnostics can point into it.

use crate::span::{FileId, LineIndex};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The largest source file dic checks (bytes): 100× the largest real `.dist` file. The
/// CLI refuses larger files before reading them; text that arrives another way (an
/// editor's buffer) is refused by the resolver with E0107.
pub const MAX_SOURCE_BYTES: usize = 8 << 20;

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    NotFound,
    IsADirectory,
    /// Any other failure, with the operating system's words.
    Other(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::NotFound => write!(f, "no such file"),
            ReadError::IsADirectory => write!(f, "is a directory, not a file"),
            ReadError::Other(m) => write!(f, "{m}"),
        }
    }
}

/// Everything the compiler needs from the outside world.
pub trait World {
    /// The bytes of a user file. `path` is already normalised (relative imports joined
    /// onto the importing file's folder by the compiler).
    fn read(&self, path: &str) -> Result<Vec<u8>, ReadError>;

    /// What makes two paths the same file (the canonical path on a disk, with links
    /// resolved); `None` where paths are identities already (in-memory worlds).
    fn identity(&self, _path: &str) -> Option<String> {
        None
    }
}

/// A world made of an in-memory map: for tests, benchmarks and `dic explain`.
#[derive(Debug, Default, Clone)]
pub struct MemoryWorld {
    pub files: BTreeMap<String, Vec<u8>>,
}

impl MemoryWorld {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn with(self, path: &str, text: &str) -> Self {
        self.with_bytes(path, text.as_bytes())
    }
    pub fn with_bytes(mut self, path: &str, bytes: &[u8]) -> Self {
        self.files.insert(path.to_string(), bytes.to_vec());
        self
    }
}

impl World for MemoryWorld {
    fn read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
        self.files.get(path).cloned().ok_or(ReadError::NotFound)
    }
}

/// One loaded source file.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as shown to users (`examples/prod.dist`, `std/models.dist`).
    pub name: String,
    pub text: Arc<str>,
    pub lines: LineIndex,
    /// True for embedded stdlib files (read-only in editors).
    pub is_stdlib: bool,
}

/// All files loaded during one compilation, addressed by [`FileId`].
#[derive(Debug, Clone, Default)]
pub struct SourceDb {
    files: Vec<SourceFile>,
}

impl SourceDb {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, name: &str, text: Arc<str>, is_stdlib: bool) -> FileId {
        let id = FileId(self.files.len() as u32);
        self.files.push(SourceFile {
            name: name.to_string(),
            lines: LineIndex::new(&text),
            text,
            is_stdlib,
        });
        id
    }

    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    pub fn find(&self, name: &str) -> Option<FileId> {
        self.files
            .iter()
            .position(|f| f.name == name)
            .map(|i| FileId(i as u32))
    }

    pub fn iter(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| (FileId(i as u32), f))
    }
}

/// Joins an import path onto the folder of the importing file, purely lexically
/// (`a/b.dist` + `../c.dist` → `c.dist`). No filesystem access.
pub fn join_relative(importer: &str, target: &str) -> String {
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        let mut p: Vec<&str> = importer.split('/').collect();
        p.pop();
        p
    };
    let absolute = target.starts_with('/') || importer.starts_with('/') && !parts.is_empty();
    for seg in target.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if matches!(parts.last(), Some(&s) if s != ".." && !s.is_empty()) {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::join_relative;

    #[test]
    fn joins_lexically() {
        assert_eq!(
            join_relative("examples/prod.dist", "hw.dist"),
            "examples/hw.dist"
        );
        assert_eq!(
            join_relative("examples/prod.dist", "./hw.dist"),
            "examples/hw.dist"
        );
        assert_eq!(join_relative("examples/prod.dist", "../hw.dist"), "hw.dist");
        assert_eq!(join_relative("prod.dist", "../hw.dist"), "../hw.dist");
        assert_eq!(join_relative("/a/b/prod.dist", "../c.dist"), "/a/c.dist");
        assert_eq!(join_relative("x.dist", "/etc/y.dist"), "/etc/y.dist");
    }
}
