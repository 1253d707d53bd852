//! Every example's report.html loads in headless Chromium without console errors, its
//! script runs, and its four charts are in the DOM. Skips with a message when Chromium is
//! absent (a user's machine); CI installs it (.ci/run).

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use std::process::Command;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

#[cfg_attr(
    dic_no_chromium,
    ignore = "needs Chromium on PATH (Debian package `chromium`)"
)]
#[test]
fn report_html_loads_in_headless_chromium_with_its_charts() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "no Chromium on PATH under CI=true: install the Debian package `chromium`"
        );
        eprintln!(
            "SKIPPED: no Chromium on PATH; install the Debian package `chromium` to run this test"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("dic-report-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut pages = 0;
    for path in common::dist_files("examples")
        .into_iter()
        .filter(|p| !p.contains("/mistakes/") && !p.contains("/common/"))
    {
        let out = dir.join("out");
        let o = Command::new(env!("CARGO_BIN_EXE_dic"))
            .args(["compile", &path, "--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        for entry in std::fs::read_dir(&out).unwrap().flatten() {
            let html = entry.path().join("report.html");
            if !html.exists() {
                continue;
            }
            let profile = dir.join(format!("profile-{pages}"));
            let run = Command::new(browser)
                .args([
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                    "--enable-logging=stderr",
                    "--v=0",
                    &format!("--user-data-dir={}", profile.display()),
                    "--dump-dom",
                ])
                .arg(format!("file://{}", html.display()))
                .output()
                .unwrap();
            let dom = String::from_utf8_lossy(&run.stdout);
            let log = String::from_utf8_lossy(&run.stderr);
            assert!(
                run.status.success(),
                "{}: chromium failed: {log}",
                html.display()
            );
            assert!(
                dom.contains("data-charts=\"4\""),
                "{}: the page's script did not count 4 charts",
                html.display()
            );
            for id in ["memory", "step", "alternatives", "scaling"] {
                assert!(
                    dom.contains(&format!("id=\"{id}\"")),
                    "{}: chart {id} missing",
                    html.display()
                );
            }
            let console: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
                .collect();
            assert!(
                console.is_empty(),
                "{}: console messages {console:?}",
                html.display()
            );
            pages += 1;
        }
    }
    assert!(pages >= 8, "{pages} pages checked");
}
