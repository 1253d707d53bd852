//! Names the commit `dic --version` prints, and marks the tests that cannot run on this
//! machine as ignored, with their reason, so
//! `cargo test` counts them in its summary instead of passing them silently: `../shared`
//! (the reference data beside the repository), Chromium (for the report's HTML test), and
//! a Python with aiohttp and vllm-router (for the P/D router's tests, `tests/pd_router.rs`:
//! `DIC_ROUTER_VENV` or `target/router-venv`, else `python3` and `vllm-router` on PATH).
//! Under `CI=true` nothing is ignored: the tests run and fail when what they need is
//! missing.

use std::path::Path;

fn main() {
    commit();
    println!("cargo:rustc-check-cfg=cfg(dic_no_shared)");
    println!("cargo:rustc-check-cfg=cfg(dic_no_chromium)");
    println!("cargo:rustc-check-cfg=cfg(dic_no_aiohttp)");
    println!("cargo:rustc-check-cfg=cfg(dic_no_vllm_router)");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo:rerun-if-env-changed=PATH");
    println!("cargo:rerun-if-env-changed=DIC_ROUTER_VENV");
    // Absolute, so a target folder shared by two checkouts does not reuse the other's answer.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let shared = Path::new(&manifest).join("../shared");
    println!("cargo:rerun-if-changed={}", shared.display());
    println!("cargo:rerun-if-changed=build.rs");
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if ci {
        return;
    }
    if !shared.is_dir() {
        println!("cargo:rustc-cfg=dic_no_shared");
        println!("cargo:warning=../shared is absent: the tests that need its reference data are ignored (see `cargo test -- --ignored`)");
    }
    let on_path = |exe: &str| {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(exe).is_file()))
    };
    if !["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .any(|b| on_path(b))
    {
        println!("cargo:rustc-cfg=dic_no_chromium");
    }
    router_tools(Path::new(&manifest), &on_path);
}

/// Marks the P/D router's tests: `dic_no_aiohttp` without a Python that imports aiohttp,
/// `dic_no_vllm_router` without vllm-router beside it (or on PATH). The same places the
/// tests look, in the same order (`tests/pd_router.rs`'s `tools`).
fn router_tools(manifest: &Path, on_path: &dyn Fn(&str) -> bool) {
    let has_aiohttp = |python: &Path| {
        std::process::Command::new(python)
            .args(["-c", "import aiohttp"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let venv = manifest.join("target/router-venv");
    println!("cargo:rerun-if-changed={}", venv.join("bin").display());
    let venvs = std::env::var_os("DIC_ROUTER_VENV")
        .map(std::path::PathBuf::from)
        .into_iter()
        .chain([venv]);
    let mut found = None;
    for v in venvs {
        let python = v.join("bin/python");
        if python.is_file() && has_aiohttp(&python) {
            found = Some(v.join("bin/vllm-router").is_file());
            break;
        }
    }
    if found.is_none() && has_aiohttp(Path::new("python3")) {
        found = Some(on_path("vllm-router"));
    }
    match found {
        None => {
            println!("cargo:rustc-cfg=dic_no_aiohttp");
            println!("cargo:rustc-cfg=dic_no_vllm_router");
        }
        Some(false) => println!("cargo:rustc-cfg=dic_no_vllm_router"),
        Some(true) => {}
    }
}

/// `dic --version` names the commit it was built from (DIC_COMMIT; `unknown` outside a
/// git checkout).
fn commit() {
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=DIC_COMMIT={commit}");
}
