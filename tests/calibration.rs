//! The performance model against public measurements: the error table in
//! `calibration/errors.md` is regenerated and must match, the stored constants must be
//! what the fit finds, and the errors must stay within stated bounds.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use dic_compiler::analysis::calibration::{
    error_table, fit, objective, parse_rows, summary, Metric,
};
use dic_compiler::analysis::perf::FITTED;

fn rows() -> Option<Vec<dic_compiler::analysis::calibration::Row>> {
    let shared = common::shared_dir()?;
    let csv = std::fs::read_to_string(
        shared.join("calibration/trtllm-0.17-throughput-a100-h100-l40s.csv"),
    )
    .expect("csv");
    let (rows, skipped) = parse_rows(&csv);
    assert!(rows.len() >= 300, "{} rows, {skipped} skipped", rows.len());
    Some(rows)
}

#[test]
fn calibration_table_is_current() {
    let Some(rows) = rows() else { return };
    let table = error_table(&rows, &FITTED);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/calibration/errors.md");
    if std::env::var("DIC_UPDATE_CALIBRATION").is_ok() {
        std::fs::create_dir_all(concat!(env!("CARGO_MANIFEST_DIR"), "/calibration")).unwrap();
        std::fs::write(path, &table).unwrap();
    }
    let stored = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        stored == table,
        "calibration/errors.md is stale: rerun with DIC_UPDATE_CALIBRATION=1 and review the diff"
    );
}

#[test]
fn calibration_constants_are_the_fit() {
    let Some(rows) = rows() else { return };
    let fitted = fit(&rows);
    let stored = objective(&rows, &FITTED);
    let refit = objective(&rows, &fitted);
    assert!(
        stored <= refit + 1e-3,
        "stored constants {FITTED:?} (objective {stored:.4}) are not the fit {fitted:?} (objective {refit:.4})"
    );
}

#[test]
fn calibration_errors_are_bounded() {
    let Some(rows) = rows() else { return };
    let (median, _, n) = summary(&rows, &FITTED, Metric::MaxOutputThroughput);
    assert!(n >= 200);
    assert!(
        median < 0.35,
        "median APE of offline throughput {:.1}%",
        median * 100.0
    );
}
