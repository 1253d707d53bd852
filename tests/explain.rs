//! Every explain page, one test each (datatest-stable): its example produces its code,
//! and the rendered diagnostics are snapshotted (so every code is rendered in a test).
//! That every code has a page, and codes parse back, is `compiler/src/diagnostics`'s own
//! unit test.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use dic_compiler::diagnostics::Code;
use dic_compiler::import_hf::{import, ImportRequest};
use dic_compiler::observe;
use dic_compiler::source::MemoryWorld;
use std::path::Path;

/// The first fenced code block: (language, body).
fn example(page: &str) -> Option<(String, String)> {
    let start = page.find("```")?;
    let rest = &page[start + 3..];
    let nl = rest.find('\n')?;
    let lang = rest[..nl].trim().to_string();
    let body = &rest[nl + 1..];
    let end = body.find("```")?;
    Some((lang, body[..end].to_string()))
}

/// One explain page (`compiler/explain/CODE.md`): it belongs to a code, starts with the
/// code's title, and its example produces the code (rendered and snapshotted).
fn explain_page(path: &Path) -> datatest_stable::Result<()> {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let code = Code::parse(stem).ok_or_else(|| format!("{}: no code `{stem}`", path.display()))?;
    let page = code.explanation();
    assert!(
        page.starts_with(&format!("# {}: {}", code.as_str(), code.title())),
        "{code}: page must start with `# {code}: {}`",
        code.title()
    );
    let (lang, body) = example(page).unwrap_or_else(|| panic!("{code}: page has no example"));
    match lang.as_str() {
        "dist" => {
            let bytes: Vec<u8> = body
                .replace("<0xFF>", "\u{1}")
                .bytes()
                .map(|b| if b == 1 { 0xFF } else { b })
                .collect();
            let world = MemoryWorld::new().with_bytes("example.dist", &bytes);
            let checked =
                dic_compiler::driver::check_file(&world, "example.dist").expect("in memory");
            let codes: Vec<Code> = checked.diagnostics.iter().map(|d| d.code).collect();
            assert!(codes.contains(&code), "{code}: example produced {codes:?}");
            insta::assert_snapshot!(code.as_str(), common::rendered_for_snapshot(&checked));
        }
        "json" => {
            let req = ImportRequest {
                config: &body,
                quant_config: None,
                name: "m",
                repo: None,
                source_name: "config.json",
            };
            let err = import(&req).expect_err("the example must be refused");
            assert_eq!(err.code, code);
            insta::assert_snapshot!(
                code.as_str(),
                format!(
                    "{}: {}\nhelp: {}",
                    err.code,
                    err.message,
                    err.help.clone().unwrap_or_default()
                )
            );
        }
        // A case no example fits in a page (a 9 MiB file): the page names the test
        // that produces the code, and that test must exist.
        "text" => {
            let (file, test) = body
                .split("tested by ")
                .nth(1)
                .and_then(|t| t.split_once(':'))
                .unwrap_or_else(|| panic!("{code}: a text example names `tested by FILE: TEST`"));
            let test = test.trim().trim_end_matches(')').trim();
            let source = std::fs::read_to_string(file.trim())
                .unwrap_or_else(|e| panic!("{code}: {file}: {e}"));
            assert!(
                source.contains(&format!("fn {test}()")) && source.contains(code.as_str()),
                "{code}: {file} has no test `{test}` that checks {code}"
            );
        }
        // `dic observe` pages: the `.dist` file, `----`, and one engine's metrics over a
        // 300 s window; the comparison (and the calibration fit) must produce the code.
        "observe" => {
            let (dist, metrics) = body.split_once("----\n").unwrap_or_else(|| {
                panic!("{code}: an observe example is a .dist, `----`, then metrics")
            });
            let world = MemoryWorld::new().with("example.dist", dist);
            let checked =
                dic_compiler::driver::compile_file(&world, "example.dist").expect("in memory");
            assert!(!checked.has_errors(), "{code}: {:?}", checked.diagnostics);
            let d = &checked.deployments[0];
            let samples = observe::exposition::parse(metrics).unwrap();
            let obs = observe::Observation {
                window: observe::Snapshot::from_samples(&samples, Some(&d.scenario.name), "m.prom"),
                seconds: Some(300.0),
                source: "m.prom".into(),
            };
            let mut diags = observe::observe(&checked, d, &obs).unwrap().diagnostics;
            if let Err(observe::calibrate::CalibrateError::OutOfRange(which, v)) =
                observe::calibrate::calibrate(d, &obs)
            {
                diags.push(observe::calibrate::out_of_range(
                    &checked.program,
                    &d.scenario,
                    which,
                    v,
                ));
            }
            let codes: Vec<Code> = diags.iter().map(|d| d.code).collect();
            assert!(codes.contains(&code), "{code}: example produced {codes:?}");
            insta::assert_snapshot!(
                code.as_str(),
                common::redact_forecast_figures(&dic::render::human(
                    &checked.db,
                    &diags,
                    false,
                    100
                ))
            );
        }
        other => panic!("{code}: unknown example language `{other}`"),
    }
    Ok(())
}

datatest_stable::harness! {
    { test = explain_page, root = "compiler/explain", pattern = r"^.*\.md$" },
}
