//! The read-only documents as files, for editors other than VS Code: every stdlib module
//! and every explain page, written once per dic build into a cache folder
//! (`$XDG_CACHE_HOME/dic/docs-<version>-<digest>/`: `std/…`, `explain/CODE.md`), so that
//! go-to-definition into the stdlib and the diagnostics' code links open as plain files
//! in any editor. The folder is named by the digest of what it holds, written beside it
//! and renamed into place (two servers starting at once both succeed), and its files are
//! read-only.

use sha2::{Digest, Sha256};
use std::io;
use std::path::{Path, PathBuf};

/// Marks a folder written in full.
const COMPLETE: &str = ".complete";

/// Every read-only document by its path in the folder.
pub fn contents() -> Vec<(String, &'static str)> {
    let stdlib = dic_compiler::stdlib::MODULES
        .iter()
        .map(|m| (m.path.to_string(), m.text));
    let explain = dic_compiler::diagnostics::Code::ALL
        .iter()
        .map(|c| (format!("explain/{}.md", c.as_str()), c.explanation()));
    stdlib.chain(explain).collect()
}

/// The folder for this build under the user's cache (see [`cache_base`]), written if it
/// is not there yet.
pub fn ensure() -> io::Result<PathBuf> {
    ensure_in(&cache_base())
}

/// `$XDG_CACHE_HOME/dic`, else `$HOME/.cache/dic`, else `dic` in the temporary folder.
pub fn cache_base() -> PathBuf {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(x) = var("XDG_CACHE_HOME") {
        return PathBuf::from(x).join("dic");
    }
    if let Some(h) = var("HOME") {
        return PathBuf::from(h).join(".cache").join("dic");
    }
    std::env::temp_dir().join("dic")
}

/// The folder for this build under `base`, written if it is not there yet.
pub fn ensure_in(base: &Path) -> io::Result<PathBuf> {
    let files = contents();
    let mut h = Sha256::new();
    for (path, text) in &files {
        h.update(path.as_bytes());
        h.update([0]);
        h.update(text.as_bytes());
        h.update([0]);
    }
    let digest: String = h.finalize()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let dir = base.join(format!("docs-{}-{digest}", env!("CARGO_PKG_VERSION")));
    if dir.join(COMPLETE).is_file() {
        return Ok(dir);
    }
    std::fs::create_dir_all(base)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let staging = base.join(format!(".docs-{}-{nanos}", std::process::id()));
    let written = write_all(&staging, &files).and_then(|()| {
        match std::fs::rename(&staging, &dir) {
            Ok(()) => Ok(()),
            // Another server put a complete copy there first.
            Err(_) if dir.join(COMPLETE).is_file() => Ok(()),
            Err(e) => Err(e),
        }
    });
    if staging.exists() {
        let _ = remove_staging(&staging);
    }
    written.map(|()| dir)
}

fn write_all(staging: &Path, files: &[(String, &str)]) -> io::Result<()> {
    for (path, text) in files {
        let to = staging.join(path);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&to, text)?;
        let mut perms = std::fs::metadata(&to)?.permissions();
        perms.set_readonly(true);
        std::fs::set_permissions(&to, perms)?;
    }
    std::fs::write(staging.join(COMPLETE), "")
}

/// Removes a staging folder left by a failed or lost rename (its files are read-only,
/// which some systems refuse to delete).
fn remove_staging(staging: &Path) -> io::Result<()> {
    for entry in walk(staging)? {
        if let Ok(meta) = std::fs::metadata(&entry) {
            let mut perms = meta.permissions();
            #[allow(clippy::permissions_set_readonly_false)] // only to delete our own file
            perms.set_readonly(false);
            let _ = std::fs::set_permissions(&entry, perms);
        }
    }
    std::fs::remove_dir_all(staging)
}

fn walk(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            out.extend(walk(&p)?);
        } else {
            out.push(p);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_holds_every_document_read_only_and_is_written_once() {
        let base = std::env::temp_dir().join(format!("dic-docs-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = ensure_in(&base).unwrap();
        for (path, text) in contents() {
            let f = dir.join(&path);
            assert_eq!(std::fs::read_to_string(&f).unwrap(), text, "{path}");
            assert!(
                std::fs::metadata(&f).unwrap().permissions().readonly(),
                "{path}"
            );
        }
        assert!(dir.join("std/models.dist").is_file());
        assert!(dir.join("explain/E0201.md").is_file());
        // A second server finds it complete and writes nothing.
        assert_eq!(ensure_in(&base).unwrap(), dir);
        let entries: Vec<_> = std::fs::read_dir(&base).unwrap().flatten().collect();
        assert_eq!(entries.len(), 1, "no staging folder left behind");
        let _ = remove_staging(&base);
    }
}
