//! The kernel tables measured inside vLLM (../shared/calibration/kernels): the GEMM
//! curves' fit per kernel family and format, and their residuals per GPU for
//! `calibration/errors.md`.

use super::gemm::{fit_curve, gemm_time, in_fitted_range, KernelFamily, MatmulKind, MeasuredGemm};
use super::median;
use std::collections::BTreeMap;

/// Every `stride`-th row in the fitted range (the tables hold ~36 000 shapes per format;
/// a regular subsample keeps the fit fast and deterministic).
pub fn fitting_rows(rows: &[MeasuredGemm], kind: MatmulKind, stride: usize) -> Vec<MeasuredGemm> {
    rows.iter()
        .filter(|r| r.kind == kind && in_fitted_range(&r.shape))
        .step_by(stride.max(1))
        .copied()
        .collect()
}

/// The fitted curve of each family and kind from the GPUs' tables (`(family, rows)` per
/// GPU).
pub fn fit_gemm_curves(
    tables: &[(KernelFamily, Vec<MeasuredGemm>)],
) -> Vec<(KernelFamily, MatmulKind, super::gemm::GemmCurve)> {
    let mut by: BTreeMap<(KernelFamily, MatmulKind), Vec<MeasuredGemm>> = BTreeMap::new();
    for (family, rows) in tables {
        for kind in [MatmulKind::Bf16, MatmulKind::Fp8, MatmulKind::Fp4] {
            by.entry((*family, kind))
                .or_default()
                .extend(fitting_rows(rows, kind, 8));
        }
    }
    by.into_iter()
        .filter(|(_, rows)| !rows.is_empty())
        .map(|((f, k), rows)| (f, k, fit_curve(&rows, k)))
        .collect()
}

/// The residual table: per GPU and format, rows in the fitted range, median and p90
/// |error| and the signed bias of the stored curves.
pub fn gemm_table(tables: &[(&str, KernelFamily, Vec<MeasuredGemm>)]) -> String {
    let mut out = String::from(
        "| GPU | kernel | shapes | median \\|error\\| | p90 \\|error\\| | bias |\n|---|---|---|---|---|---|\n",
    );
    for (gpu, family, rows) in tables {
        for kind in [MatmulKind::Bf16, MatmulKind::Fp8, MatmulKind::Fp4] {
            let c = super::gemm::curve(*family, kind);
            let errors: Vec<f64> = rows
                .iter()
                .filter(|r| r.kind == kind && in_fitted_range(&r.shape))
                .map(|r| {
                    gemm_time(&c, kind, r.peak, r.bandwidth, r.shape).total() / r.seconds - 1.0
                })
                .collect();
            if errors.is_empty() {
                continue;
            }
            let mut abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
            abs.sort_by(f64::total_cmp);
            let p90 = abs[(abs.len() * 9 / 10).min(abs.len() - 1)];
            out.push_str(&format!(
                "| {gpu} | {kind:?} | {} | {:.1}% | {:.1}% | {:+.1}% |\n",
                errors.len(),
                median(abs) * 100.0,
                p90 * 100.0,
                median(errors.clone()) * 100.0
            ));
        }
    }
    out
}
