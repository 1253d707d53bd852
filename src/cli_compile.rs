//! `dic compile FILE --out DIR [--check]`.
//!
//! Everything is generated in memory first; nothing is written when the source has
//! errors. Writing goes through [`dic::out_dir`]: locked, staged, swapped in by rename,
//! and only over folders dic wrote itself (their `.dic-generated` list).
//! `--check` writes nothing and exits 1 with a diff when DIR differs from what would be
//! generated (missing, changed or extra files under each deployment's folder, leftovers
//! of a killed compile).

use dic::disk::InputWorld;
use dic::exit::{ERRORS, OK, USAGE};
use dic::out_dir;
use dic::render;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub fn run(file: &str, out: &str, check: bool, json: bool, color: bool, width: usize) -> u8 {
    // `-` is standard input, named `<stdin>` here as in its diagnostics.
    let read = InputWorld::for_path(file).and_then(|(world, path)| {
        dic_compiler::driver::compile_file(&world, &path)
            .map(|c| (c, path))
            .map_err(|e| e.to_string())
    });
    let (checked, file) = match read {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot read `{file}`: {e}");
            return USAGE;
        }
    };
    let file = file.as_str();
    if !checked.diagnostics.is_empty() {
        eprint!(
            "{}",
            render::human(&checked.db, &checked.diagnostics, color, width)
        );
    }
    if checked.has_errors() {
        if json {
            println!(
                "{}",
                written_json(&checked, out, &BTreeSet::new(), &BTreeMap::new(), true)
            );
        }
        eprintln!(
            "{file}: {}; nothing written",
            render::summary(&checked.diagnostics)
        );
        return ERRORS;
    }
    // The driver already analysed, searched and lowered every deployment once.
    let plan = &checked.plan;
    if plan.deployments.is_empty() {
        eprintln!("{file}: no deployment to compile");
        return ERRORS;
    }
    let files = match dic_targets::render(plan, &checked.forecast) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ERRORS;
        }
    };
    let roots: BTreeSet<String> = plan.deployments.iter().map(|d| d.name.clone()).collect();
    let files = out_dir::with_manifests(&roots, &files);
    if json {
        println!("{}", written_json(&checked, out, &roots, &files, check));
    }
    if check {
        return drift(Path::new(out), &roots, &files);
    }
    match out_dir::write(Path::new(out), &roots, &files) {
        Ok(()) => {
            eprintln!(
                "{file}: wrote {} files for {} deployment(s) to {out}",
                files.len(),
                roots.len()
            );
            eprint!("{}", written_summary(out, &roots, &files));
            OK
        }
        Err(e) => {
            eprintln!("error: cannot write to `{out}`: {e}");
            USAGE
        }
    }
}

/// The files of deployment `root`, relative to its folder (dic's own manifest left out).
fn files_of<'a>(files: &'a BTreeMap<String, String>, root: &str) -> Vec<&'a str> {
    let prefix = format!("{root}/");
    files
        .keys()
        .filter_map(|k| k.strip_prefix(&prefix))
        .filter(|k| !k.starts_with('.'))
        .collect()
}

/// `--format json`: per deployment its folder, files and report, and the diagnostics.
fn written_json(
    checked: &dic_compiler::driver::Checked,
    out: &str,
    roots: &BTreeSet<String>,
    files: &BTreeMap<String, String>,
    check: bool,
) -> String {
    let deployments: Vec<serde_json::Value> = roots
        .iter()
        .map(|r| {
            let mine = files_of(files, r);
            let dir = Path::new(out).join(r);
            serde_json::json!({
                "deployment": r,
                "folder": dir.display().to_string(),
                "files": mine,
                "report": dir.join("report.html").display().to_string(),
            })
        })
        .collect();
    let v = serde_json::json!({
        "written": !check,
        "deployments": deployments,
        "diagnostics": render::json(&checked.db, &checked.diagnostics),
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// What was written, per deployment: its folders with their file counts, how to apply
/// the manifests, and the report to open.
fn written_summary(
    out: &str,
    roots: &BTreeSet<String>,
    files: &BTreeMap<String, String>,
) -> String {
    let mut s = String::new();
    for r in roots {
        let mine = files_of(files, r);
        let count = |folder: &str| mine.iter().filter(|k| k.starts_with(folder)).count();
        let dir = Path::new(out).join(r);
        s.push_str(&format!(
            "  {r}: vllm/ ({} launch files), k8s/ ({} manifests; kubectl apply -k {}), nccl/plan.toml, report.html ({})\n",
            count("vllm/"),
            count("k8s/"),
            dir.join("k8s").display(),
            dir.join("report.html").display(),
        ));
    }
    s
}

/// Every file under `dir` by its path relative to `base`; a link or a device is never
/// what dic wrote, so it is reported as such and never read through.
fn list_files(dir: &Path, base: &Path, out: &mut BTreeMap<String, Vec<u8>>) -> std::io::Result<()> {
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    let mut found = Vec::new();
    out_dir::walk(dir, base, &mut found)?;
    for (rel, ty) in found {
        let bytes = if ty.is_file() {
            std::fs::read(base.join(&rel))?
        } else {
            b"(not a plain file)".to_vec()
        };
        out.insert(rel, bytes);
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
    for stale in out_dir::leftovers(out) {
        println!(
            "stale: {stale} (left by a dic compile that was killed; the next compile recovers it)"
        );
        drifted += 1;
    }
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
