//! Every example's report.html loads in headless Chromium without console errors, its
//! script runs, and its four charts (five with "Which GPU") are in the DOM with their
//! axes, values and labels as text; a script injected into a copy of the page measures every label as Chromium lays
//! it out and the test fails when one leaves its chart or overlaps another. The README's
//! example is also screenshotted and printed to PDF (kept under target/ for a look).
//! Ignored with the reason when Chromium is absent (a user's machine); CI installs it
//! (.ci/run).

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use std::process::Command;

/// Measures every `<text>` of every chart in Chromium's layout: the ones outside their
/// chart's viewBox and the pairs whose boxes overlap (by more than 1.5 px each way, the
/// slack between stacked lines of 11 px text), written to `data-layout` as JSON.
const LAYOUT_PROBE: &str = r#"<script>
(() => {
  const out = { texts: 0, clipped: [], overlaps: [] };
  for (const svg of document.querySelectorAll("svg.chart")) {
    const vb = svg.viewBox.baseVal;
    const boxes = [...svg.querySelectorAll("text")].map(t => [t.textContent, t.getBBox()]);
    out.texts += boxes.length;
    for (const [s, b] of boxes) {
      if (b.x < vb.x - 0.5 || b.y < vb.y - 0.5 || b.x + b.width > vb.x + vb.width + 0.5
          || b.y + b.height > vb.y + vb.height + 0.5) out.clipped.push(svg.id + ": " + s);
    }
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const [s, a] = boxes[i], [t, b] = boxes[j];
      const dx = Math.min(a.x + a.width, b.x + b.width) - Math.max(a.x, b.x);
      const dy = Math.min(a.y + a.height, b.y + b.height) - Math.max(a.y, b.y);
      if (dx > 1.5 && dy > 1.5) out.overlaps.push(svg.id + ": " + s + " / " + t);
    }
  }
  document.body.setAttribute("data-layout", JSON.stringify(out));
})();
</script>
</body>"#;

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
            let page = std::fs::read_to_string(&html).unwrap();
            let name = format!("{}", entry.path().file_name().unwrap().to_string_lossy());
            let probed = dir.join(format!("{name}-{pages}.html"));
            std::fs::write(&probed, page.replace("</body>", LAYOUT_PROBE)).unwrap();
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
                .arg(format!("file://{}", probed.display()))
                .output()
                .unwrap();
            let dom = String::from_utf8_lossy(&run.stdout);
            let log = String::from_utf8_lossy(&run.stderr);
            assert!(
                run.status.success(),
                "{}: chromium failed: {log}",
                html.display()
            );
            // "Which GPU" draws a fifth where the what-if priced a GPU type.
            let charts = if page.contains("id=\"gpus\"") { 5 } else { 4 };
            assert!(
                dom.contains(&format!("data-charts=\"{charts}\"")),
                "{}: the page's script did not count {charts} charts",
                html.display()
            );
            for id in ["memory", "step", "alternatives", "scaling"] {
                assert!(
                    dom.contains(&format!("id=\"{id}\"")),
                    "{}: chart {id} missing",
                    html.display()
                );
            }
            let layout = dom
                .split("data-layout=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .map(|j| j.replace("&quot;", "\"").replace("&amp;", "&"))
                .unwrap_or_else(|| panic!("{}: the layout probe did not run", html.display()));
            let layout: serde_json::Value = serde_json::from_str(&layout).unwrap();
            assert!(
                layout["texts"].as_u64().unwrap() > 20,
                "{}: charts without labels: {layout}",
                html.display()
            );
            for key in ["clipped", "overlaps"] {
                assert!(
                    layout[key].as_array().unwrap().is_empty(),
                    "{}: chart labels {key}: {}",
                    html.display(),
                    layout[key]
                );
            }
            assert_texts(&html.display().to_string(), &dom, &page);
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
    screenshot_and_pdf(browser, &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a reader sees without hovering: each chart's axis titles and tick values, the
/// scaling curve's formats, the planner's advice, and where the report came from.
fn assert_texts(page: &str, dom: &str, html: &str) {
    for text in [
        "GiB per GPU (",
        "milliseconds per decode step",
        "TPOT (ms)",
        "output tokens/s per GPU (saturated)",
        "GPUs per replica (log₂ scale)",
        "Generated by dic ",
        "(sha256 <code title=\"",
    ] {
        assert!(dom.contains(text), "{page}: no `{text}`");
    }
    // The memory axis has ticks, and the scaling curve says which formats it is in.
    assert!(
        dom.contains(">20</text>") || dom.contains(">2</text>"),
        "{page}: no memory ticks"
    );
    assert!(
        html.contains("<h2>Scaling (one replica, weights "),
        "{page}: the scaling curve does not name its formats"
    );
}

/// The README's example as a reader would receive it: a screenshot and a PDF print, both
/// non-trivial, kept in target/report-screenshot/ (CI's artefacts; a person reviews them).
fn screenshot_and_pdf(browser: &str, dir: &std::path::Path) {
    let out = dir.join("prod");
    let o = Command::new(env!("CARGO_BIN_EXE_dic"))
        .args([
            "compile",
            "examples/prod.dist",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    let html = out.join("chat/report.html");
    let keep = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshot");
    std::fs::create_dir_all(&keep).unwrap();
    let png = keep.join("prod-chat.png");
    let pdf = keep.join("prod-chat.pdf");
    for (flag, file) in [("--screenshot", &png), ("--print-to-pdf", &pdf)] {
        let _ = std::fs::remove_file(file);
        let run = Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--window-size=1000,2600",
                &format!("--user-data-dir={}", dir.join("profile-shot").display()),
                &format!("{flag}={}", file.display()),
            ])
            .arg(format!("file://{}", html.display()))
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{flag}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let png = std::fs::read(&png).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    assert_eq!(width, 1000, "screenshot width");
    // A blank page compresses to a few kB; the charts, tables and text take far more.
    assert!(
        png.len() > 60_000,
        "screenshot of {} bytes: blank?",
        png.len()
    );
    let pdf = std::fs::read(&pdf).unwrap();
    assert!(
        pdf.starts_with(b"%PDF-") && pdf.len() > 20_000,
        "PDF of {} bytes",
        pdf.len()
    );
}
