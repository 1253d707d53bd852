//! `dic observe`: reads a running deployment's vLLM metrics (engines' `/metrics`, a
//! Prometheus query endpoint, or saved exposition files), compares them with the `.dist`
//! and dic's prediction ([`dic_compiler::observe`]), prints the comparison and its
//! diagnostics, and with `--write` / `--calibrate` records what it measured in the file.

use dic::exit::{ERRORS as EXIT_ERRORS, OK as EXIT_OK, USAGE as EXIT_USAGE};
use dic::metrics_source::{read_prometheus, read_source};
use dic::render;
use dic_compiler::diagnostics::{Diagnostic, Severity};
use dic_compiler::driver::{self, Checked};
use dic_compiler::observe::{self, calibrate, rewrite, Observation, Observed, Snapshot};
use dic_compiler::source::SourceDb;
use std::time::Duration;

#[derive(clap::Args)]
pub struct ObserveArgs {
    /// The .dist file the deployment was compiled from.
    file: String,
    /// Which deployment (needed when the file has several).
    #[arg(long)]
    deployment: Option<String>,
    /// An engine's /metrics URL (http://…) or a saved exposition file; one per engine or
    /// pod, repeated. URLs are scraped twice, `--window` apart.
    #[arg(long = "metrics", value_name = "SOURCE")]
    metrics: Vec<String>,
    /// Saved exposition files scraped `--window` before the `--metrics` files: the
    /// counters and histograms are then what happened in between.
    #[arg(long, value_name = "FILE")]
    baseline: Vec<String>,
    /// A Prometheus server (http://…:9090): the deployment's series over `--window`.
    #[arg(long, value_name = "URL")]
    prometheus: Option<String>,
    /// The window: between the two scrapes of a URL, between `--baseline` and `--metrics`
    /// files, or Prometheus' range (e.g. `300s`, `5m`). For one file without a baseline,
    /// how long its counters ran (omit it and no rate is read).
    #[arg(long, value_name = "DURATION")]
    window: Option<String>,
    /// The `model_name` label vLLM gives the series (default: the deployment's served
    /// model name).
    #[arg(long)]
    model_name: Option<String>,
    /// `human` or `json`.
    #[arg(long, value_enum)]
    format: Option<dic::Format>,
    /// Exit 1 on any drift (warnings too), for a CI or cron gate.
    #[arg(long)]
    check: bool,
    /// Write the measured workload (prompt, output, rate or concurrency, acceptance,
    /// prefix reuse) into the file(s) that declare it, with a provenance comment.
    #[arg(long)]
    write: bool,
    /// Fit the deployment's `calibration { step_time, prefill_time }` from the window and
    /// write it into the deployment.
    #[arg(long)]
    calibrate: bool,
}

/// Parses `300`, `300s`, `5m`, `1h`.
fn seconds(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (300s, 5m, 1h)"))?;
    let f = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("`{s}`: the unit must be s, m or h")),
    };
    if !(n.is_finite() && n > 0.0 && n * f <= 30.0 * 86400.0) {
        return Err(format!("`{s}` must be more than 0 and at most 30 days"));
    }
    Ok(n * f)
}

fn snapshot(sources: &[String], model: &str) -> Result<Snapshot, String> {
    let mut all = Snapshot::default();
    for src in sources {
        let samples = read_source(src)?;
        all.merge(Snapshot::from_samples(&samples, Some(model), src));
    }
    Ok(all)
}

/// The window the arguments describe.
fn observation(a: &ObserveArgs, model: &str) -> Result<Observation, String> {
    let window = a.window.as_deref().map(seconds).transpose()?;
    if let Some(prom) = &a.prometheus {
        if !a.metrics.is_empty() || !a.baseline.is_empty() {
            return Err("use either --prometheus or --metrics, not both".into());
        }
        let w = window.unwrap_or(300.0);
        let samples = read_prometheus(prom, model, w.round() as u64)?;
        return Ok(Observation {
            window: Snapshot::from_samples(&samples, Some(model), prom),
            seconds: Some(w),
            source: format!("Prometheus {prom}, last {}", describe(w)),
        });
    }
    if a.metrics.is_empty() {
        return Err(
            "say where the metrics are: --metrics URL|FILE (repeatable) or --prometheus URL".into(),
        );
    }
    let live = a.metrics.iter().any(|m| m.contains("://"));
    if live {
        if !a.baseline.is_empty() {
            return Err(
                "--baseline goes with saved files; URLs are scraped twice, --window apart".into(),
            );
        }
        let w = window.unwrap_or(60.0);
        let start = snapshot(&a.metrics, model)?;
        std::thread::sleep(Duration::from_secs_f64(w));
        let end = snapshot(&a.metrics, model)?;
        return Ok(Observation {
            window: end.since(&start),
            seconds: Some(w),
            source: format!("{} over {}", a.metrics.join(", "), describe(w)),
        });
    }
    let end = snapshot(&a.metrics, model)?;
    if a.baseline.is_empty() {
        return Ok(Observation {
            window: end,
            seconds: window,
            source: match window {
                Some(w) => format!("{} (counters over {})", a.metrics.join(", "), describe(w)),
                None => a.metrics.join(", "),
            },
        });
    }
    let start = snapshot(&a.baseline, model)?;
    Ok(Observation {
        window: end.since(&start),
        seconds: window,
        source: format!("{} since {}", a.metrics.join(", "), a.baseline.join(", "))
            + &window
                .map(|w| format!(", {}", describe(w)))
                .unwrap_or_default(),
    })
}

fn describe(s: f64) -> String {
    if s >= 60.0 && (s / 60.0).fract() == 0.0 {
        format!("{} min", s / 60.0)
    } else {
        format!("{s} s")
    }
}

/// Today as YYYY-MM-DD (UTC), for the provenance comment.
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    // Howard Hinnant's days-to-civil.
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

pub fn run(a: &ObserveArgs, color: bool, width: usize) -> u8 {
    let checked = match driver::compile_file(&dic::disk::DiskWorld, &a.file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", a.file);
            return EXIT_USAGE;
        }
    };
    if checked.has_errors() {
        eprint!(
            "{}",
            render::human(&checked.db, &checked.diagnostics, color, width)
        );
        eprintln!(
            "{}: has errors; `dic observe` compares a deployment that checks",
            a.file
        );
        return EXIT_ERRORS;
    }
    let d = match observe::decided(&checked, a.deployment.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    let model = a
        .model_name
        .clone()
        .or_else(|| observe::served_model_name(&checked, &d.scenario.name))
        .unwrap_or_else(|| d.scenario.name.clone());
    let obs = match observation(a, &model) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    let mut observed = match observe::observe(&checked, d, &obs) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    let provenance = format!(
        "{} from {} on {}",
        if a.write { "measured" } else { "calibrated" },
        obs.source,
        today()
    );
    let mut written = Vec::new();
    let mut fitted = None;
    if a.calibrate {
        match calibrate::calibrate(d, &obs) {
            Ok(f) => fitted = Some(f),
            Err(calibrate::CalibrateError::NoEvidence(m)) => {
                eprintln!("error: --calibrate: {m}");
                return EXIT_USAGE;
            }
            Err(calibrate::CalibrateError::OutOfRange(which, v)) => {
                observed.diagnostics.push(calibrate::out_of_range(
                    &checked.program,
                    &d.scenario,
                    which,
                    v,
                ));
            }
        }
    }
    if a.write || fitted.is_some() {
        match write_files(
            &checked,
            &observed,
            fitted.map(|f| f.calibration),
            d,
            &provenance,
            a.write,
        ) {
            Ok(w) => written = w,
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_ERRORS;
            }
        }
    }
    print(
        a,
        &checked.db,
        &observed,
        fitted.as_ref(),
        &written,
        color,
        width,
    );
    let errors = observed.diagnostics.iter().any(Diagnostic::is_error);
    let drift = observed
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Warning);
    if errors || (a.check && drift) {
        EXIT_ERRORS
    } else {
        EXIT_OK
    }
}

/// Applies `--write`'s fixes and `--calibrate`'s block, writing each file atomically.
fn write_files(
    checked: &Checked,
    observed: &Observed,
    calibration: Option<dic_compiler::program::Calibration>,
    d: &driver::Decided,
    provenance: &str,
    write: bool,
) -> Result<Vec<rewrite::Rewritten>, String> {
    let mut fixes = if write {
        rewrite::measured_fixes(&observed.diagnostics)
    } else {
        Vec::new()
    };
    if let Some(c) = calibration {
        fixes.push(
            rewrite::calibration_fix(&checked.db, &checked.program, &d.scenario, c)
                .map_err(|e| e.0)?,
        );
    }
    let files =
        rewrite::rewrite(&checked.db, &checked.program, &fixes, provenance).map_err(|e| e.0)?;
    for f in &files {
        dic::disk::write_atomic(std::path::Path::new(&f.path), &f.text)
            .map_err(|e| format!("cannot write `{}`: {e}", f.path))?;
    }
    Ok(files)
}

fn fmt_value(v: Option<f64>, unit: &str) -> String {
    match v {
        None => "—".into(),
        Some(x) if x.is_nan() => "—".into(),
        Some(x) => match unit {
            "s" if x < 1.0 => format!("{:.1} ms", x * 1e3),
            "s" => format!("{x:.2} s"),
            "ratio" => format!("{:.0}%", x * 100.0),
            "tokens" | "requests" => format!("{x:.0}"),
            _ => format!("{x:.2} {unit}"),
        },
    }
}

fn print(
    a: &ObserveArgs,
    db: &SourceDb,
    o: &Observed,
    fitted: Option<&calibrate::Fitted>,
    written: &[rewrite::Rewritten],
    color: bool,
    width: usize,
) {
    if a.format == Some(dic::Format::Json) {
        let doc = serde_json::json!({
            "deployment": o.deployment,
            "engines": o.engines,
            "workload": o.workload,
            "rows": o.rows,
            "calibration": fitted,
            "written": written.iter().map(|w| serde_json::json!({"path": w.path, "changes": w.changes})).collect::<Vec<_>>(),
            "diagnostics": render::json(db, &o.diagnostics),
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return;
    }
    println!(
        "deploy `{}`: {} engine{} observed, {:.0} requests in the window",
        o.deployment,
        o.engines,
        if o.engines == 1 { "" } else { "s" },
        o.workload.requests
    );
    println!(
        "  {:<26} {:>14} {:>14} {:>14}",
        "", "declared", "predicted", "measured"
    );
    for r in &o.rows {
        println!(
            "  {:<26} {:>14} {:>14} {:>14}",
            r.what,
            fmt_value(r.declared, &r.unit),
            fmt_value(r.predicted, &r.unit),
            fmt_value(r.measured, &r.unit)
        );
    }
    if let Some(f) = fitted {
        println!(
            "calibration: step_time {:.3}, prefill_time {:.3} (TPOT {} measured, {} predicted with it)",
            f.calibration.step_time,
            f.calibration.prefill_time,
            fmt_value(f.tpot_measured, "s"),
            fmt_value(f.tpot_predicted, "s")
        );
    }
    for w in written {
        println!("{}: wrote {}", w.path, w.changes.join(", "));
    }
    if !o.diagnostics.is_empty() {
        eprint!("{}", render::human(db, &o.diagnostics, color, width));
    }
}
