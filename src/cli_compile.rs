//! `dic compile FILE --out DIR [--check]`.
//!
//! Everything is generated in memory first; nothing is written when the source has
//! errors. Writing is staged: files go to a hidden folder inside DIR, then each
//! deployment's folder is swapped in by rename, so a failure leaves DIR as it was.
//! `--check` writes nothing and exits 1 with a diff when DIR differs from what would be
//! generated (missing, changed or extra files under each deployment's folder).

use dic::disk::DiskWorld;
use dic::exit::{ERRORS, OK, USAGE};
use dic::render;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub fn run(file: &str, out: &str, check: bool, color: bool, width: usize) -> u8 {
    let checked = match dic_compiler::driver::check_file(&DiskWorld, file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot read `{file}`: {e}");
            return USAGE;
        }
    };
    if !checked.diagnostics.is_empty() {
        eprint!(
            "{}",
            render::human(&checked.db, &checked.diagnostics, color, width)
        );
    }
    if checked.has_errors() {
        eprintln!(
            "{file}: {}; nothing written",
            render::summary(&checked.diagnostics)
        );
        return ERRORS;
    }
    // Lower from the analyses `check_file` already made (no second analysis).
    let (plan, _) = dic_compiler::ir::lower_from(
        &checked.program,
        &checked.analyses,
        dic_compiler::ir::Detail::WithReport,
    );
    if plan.deployments.is_empty() {
        eprintln!("{file}: no deployment to compile");
        return ERRORS;
    }
    let files = match dic_targets::render(&plan) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ERRORS;
        }
    };
    let roots: BTreeSet<String> = plan.deployments.iter().map(|d| d.name.clone()).collect();
    if check {
        return drift(Path::new(out), &roots, &files);
    }
    match write(Path::new(out), &roots, &files) {
        Ok(()) => {
            eprintln!(
                "{file}: wrote {} files for {} deployment(s) to {out}",
                files.len(),
                roots.len()
            );
            OK
        }
        Err(e) => {
            eprintln!("error: cannot write to `{out}`: {e}; it was left as it was");
            USAGE
        }
    }
}

fn list_files(dir: &Path, base: &Path, out: &mut BTreeMap<String, Vec<u8>>) -> std::io::Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        if p.is_dir() {
            list_files(&p, base, out)?;
        } else {
            let rel = p
                .strip_prefix(base)
                .unwrap_or(&p)
                .to_string_lossy()
                .replace('\\', "/");
            out.insert(rel, std::fs::read(&p)?);
        }
    }
    Ok(())
}

fn drift(out: &Path, roots: &BTreeSet<String>, files: &BTreeMap<String, String>) -> u8 {
    let mut actual = BTreeMap::new();
    for r in roots {
        if let Err(e) = list_files(&out.join(r), out, &mut actual) {
            eprintln!("error: cannot read `{}`: {e}", out.join(r).display());
            return USAGE;
        }
    }
    let mut drifted = 0;
    for (path, want) in files {
        match actual.get(path) {
            None => {
                println!("missing: {path}");
                drifted += 1;
            }
            Some(have) if have.as_slice() != want.as_bytes() => {
                drifted += 1;
                let have = String::from_utf8_lossy(have);
                let diff = similar::TextDiff::from_lines(have.as_ref(), want.as_str());
                print!(
                    "{}",
                    diff.unified_diff()
                        .context_radius(2)
                        .header(&format!("a/{path}"), &format!("b/{path}"))
                );
            }
            Some(_) => {}
        }
    }
    for path in actual.keys().filter(|p| !files.contains_key(*p)) {
        println!("extra: {path} (dic would not generate it)");
        drifted += 1;
    }
    if drifted > 0 {
        eprintln!(
            "{} file(s) differ from what `dic compile` would generate in {}",
            drifted,
            out.display()
        );
        ERRORS
    } else {
        eprintln!("{} is up to date ({} files)", out.display(), files.len());
        OK
    }
}

fn write(
    out: &Path,
    roots: &BTreeSet<String>,
    files: &BTreeMap<String, String>,
) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let pid = std::process::id();
    let staging = out.join(format!(".dic-staging-{pid}"));
    let result = (|| {
        for (path, text) in files {
            let p = staging.join(path);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&p, text)?;
            #[cfg(unix)]
            if path.ends_with(".sh") {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))?;
            }
        }
        // Swap each deployment's folder in by rename; keep the old one until the new is in place.
        for r in roots {
            let target = out.join(r);
            let old: PathBuf = out.join(format!(".dic-old-{pid}-{r}"));
            if target.exists() {
                std::fs::rename(&target, &old)?;
            }
            if let Err(e) = std::fs::rename(staging.join(r), &target) {
                if old.exists() {
                    let _ = std::fs::rename(&old, &target);
                }
                return Err(e);
            }
            if old.exists() {
                std::fs::remove_dir_all(&old)?;
            }
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&staging);
    result
}
