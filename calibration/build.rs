//! Marks the calibration tests ignored, with their reason, where `../shared` (the
//! reference data beside the repository) is absent, so `cargo test` counts them instead of
//! passing them silently, as the root package's build script does for its tests. Under
//! `CI=true` nothing is ignored: the tests run and fail when the data is missing.

use std::path::Path;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(dic_no_shared)");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo:rerun-if-changed=build.rs");
    // Absolute, so a target folder shared by two checkouts does not reuse the other's answer.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let shared = Path::new(&manifest).join("../../shared");
    println!("cargo:rerun-if-changed={}", shared.display());
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if !ci && !shared.is_dir() {
        println!("cargo:rustc-cfg=dic_no_shared");
        println!("cargo:warning=../shared is absent: the calibration tests are ignored (see `cargo test -- --ignored`)");
    }
}
