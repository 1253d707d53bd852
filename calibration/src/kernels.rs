//! The kernel tables measured inside vLLM (../shared/calibration/kernels): the GEMM
//! curves' fit per kernel family and format, the roofline exponent they share (the step
//! model's too), their residuals per GPU for `calibration/errors.md`, and the fit of
//! NCCL's all-reduce inside one NVLink node and of DeepEP's dispatch and combine
//! (`comm::LinkFit`s the step model uses).

use crate::gemm::{
    curve_objective, fit_curve, fit_curve_with, gemm_time, in_fitted_range, GemmShape, MeasuredGemm,
};
use crate::median;
use dic_compiler::analysis::comm::LinkFit;
use dic_compiler::analysis::gemm::{KernelFamily, MatmulKind};
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

/// A GPU's GEMM table: its label, its kernel family and its rows.
pub type GemmTable<'a> = (&'a str, KernelFamily, Vec<MeasuredGemm>);

/// The fitting rows of each family and kind from the GPUs' tables.
fn rows_by_family(tables: &[GemmTable]) -> BTreeMap<(KernelFamily, MatmulKind), Vec<MeasuredGemm>> {
    let mut by: BTreeMap<(KernelFamily, MatmulKind), Vec<MeasuredGemm>> = BTreeMap::new();
    for (_, family, rows) in tables {
        for kind in [MatmulKind::Bf16, MatmulKind::Fp8, MatmulKind::Fp4] {
            by.entry((*family, kind))
                .or_default()
                .extend(fitting_rows(rows, kind, 8));
        }
    }
    by.retain(|_, rows| !rows.is_empty());
    by
}

/// The fitted curve of each family and kind from the GPUs' tables.
pub fn fit_gemm_curves(
    tables: &[GemmTable],
) -> Vec<(KernelFamily, MatmulKind, crate::gemm::GemmCurve)> {
    rows_by_family(tables)
        .into_iter()
        .map(|((f, k), rows)| (f, k, fit_curve(&rows, k)))
        .collect()
}

/// The roofline exponents `fit_roofline_exponent` chooses among (`f64::INFINITY`: the
/// plain max of compute and memory).
pub const ROOFLINE_EXPONENTS: [f64; 6] = [1.0, 1.5, 2.0, 3.0, 4.0, f64::INFINITY];

/// The roofline exponent (`gemm::ROOFLINE_EXPONENT`) the kernel tables choose: for each
/// candidate, every family's and kind's curve is refitted with it, and the candidate with
/// the least mean |log error| over all their rows wins. Returns it with every
/// candidate's error.
pub fn fit_roofline_exponent(tables: &[GemmTable]) -> (f64, Vec<(f64, f64)>) {
    let by = rows_by_family(tables);
    let rows: usize = by.values().map(Vec::len).sum();
    let scored: Vec<(f64, f64)> = ROOFLINE_EXPONENTS
        .iter()
        .map(|&p| {
            let sum: f64 = by
                .iter()
                .map(|((_, k), rs)| {
                    curve_objective(&fit_curve_with(rs, *k, p), rs, p) * rs.len() as f64
                })
                .sum();
            (p, sum / rows.max(1) as f64)
        })
        .collect();
    let best = scored
        .iter()
        .copied()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(f64::INFINITY, |b| b.0);
    (best, scored)
}

/// The residual table: per GPU and format, rows in the fitted range, median and p90
/// |error| and the signed bias of the stored curves.
pub fn gemm_table(tables: &[GemmTable]) -> String {
    let mut out = String::from(
        "| GPU | kernel | shapes | median \\|error\\| | p90 \\|error\\| | bias |\n|---|---|---|---|---|---|\n",
    );
    for (gpu, family, rows) in tables {
        for kind in [MatmulKind::Bf16, MatmulKind::Fp8, MatmulKind::Fp4] {
            let c = crate::gemm::curve(*family, kind);
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

/// One measured transfer inside an NVLink domain: bytes on the wire per rank, the
/// placement's bandwidth (the link's × `LINK_EFFICIENCY`), seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredTransfer {
    pub wire_bytes: f64,
    pub bandwidth: f64,
    pub seconds: f64,
}

/// Mean |log(predicted / measured)| of a [`LinkFit`] over rows.
pub fn link_fit_objective(c: &LinkFit, rows: &[MeasuredTransfer]) -> f64 {
    rows.iter()
        .map(|r| (c.time(r.wire_bytes, r.bandwidth) / r.seconds).ln().abs())
        .sum::<f64>()
        / rows.len().max(1) as f64
}

/// Fits a [`LinkFit`] on a grid: latency in steps of 2 µs up to `max_latency_us`,
/// efficiency in hundredths from 0.02 to 1.50; the first best point in that order, so
/// deterministic.
pub fn fit_link(rows: &[MeasuredTransfer], max_latency_us: u32) -> LinkFit {
    let mut best = (
        f64::INFINITY,
        LinkFit {
            latency: 0.0,
            efficiency: 1.0,
        },
    );
    for us in (0..=max_latency_us).step_by(2) {
        for hundredths in 2..=150 {
            let c = LinkFit {
                latency: us as f64 / 1e6,
                efficiency: hundredths as f64 / 100.0,
            };
            let o = link_fit_objective(&c, rows);
            if o < best.0 {
                best = (o, c);
            }
        }
    }
    best.1
}

/// Shapes whose GEMMs are compute-bound: 2 048–16 384 tokens, at least 2²⁴ weight
/// elements.
pub fn is_compute_bound(g: &GemmShape) -> bool {
    (2048.0..=16384.0).contains(&g.m) && g.n * g.k >= (1u64 << 24) as f64
}

/// `analysis::gemm::COMPUTE_BOUND_EFFICIENCY` from the tables: per family and kind, the
/// median of FLOPs ÷ time ÷ peak over compute-bound shapes, to three decimals.
pub fn compute_bound_medians(tables: &[GemmTable]) -> Vec<(KernelFamily, MatmulKind, f64)> {
    let mut by: BTreeMap<(KernelFamily, MatmulKind), Vec<f64>> = BTreeMap::new();
    for (_, family, rows) in tables {
        for r in rows.iter().filter(|r| is_compute_bound(&r.shape)) {
            let g = r.shape;
            by.entry((*family, r.kind))
                .or_default()
                .push(2.0 * g.m * g.n * g.k / r.seconds / r.peak);
        }
    }
    by.into_iter()
        .map(|((f, k), v)| (f, k, (median(v) * 1000.0).round() / 1000.0))
        .collect()
}

/// Decode attention's time per byte of an 8-bit KV cache relative to a 16-bit one, from a
/// `generation_attention.csv.gz` table (decompressed): for every shape (heads, KV heads,
/// head size, batch, context) measured with both caches and memory-bound (the 16-bit call
/// at least 50 µs, where launch costs are under a fifth), 2 × t(fp8) ÷ t(bf16) — 1 would
/// be a kernel that reads FP8 as fast per byte as BF16 (twice as fast per token), 2 one
/// that gains nothing. Full attention only (no window).
pub fn fp8_kv_read_ratios(csv: &str) -> Vec<f64> {
    let mut lines = csv.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let header: Vec<&str> = header.split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n);
    let key_cols = [
        "num_heads",
        "num_key_value_heads",
        "head_dim",
        "batch_size",
        "isl",
        "step",
    ]
    .map(col);
    let (Some(kv), Some(window), Some(latency)) =
        (col("kv_cache_dtype"), col("window_size"), col("latency"))
    else {
        return Vec::new();
    };
    let Some(keys) = key_cols.iter().copied().collect::<Option<Vec<usize>>>() else {
        return Vec::new();
    };
    // Shape → (bf16 ms, fp8 ms).
    let mut by: BTreeMap<Vec<String>, (Option<f64>, Option<f64>)> = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f.get(window).is_none_or(|w| *w != "0") {
            continue;
        }
        let Some(ms) = f.get(latency).and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        let key: Vec<String> = keys
            .iter()
            .map(|&i| f.get(i).unwrap_or(&"").to_string())
            .collect();
        let e = by.entry(key).or_default();
        match f.get(kv) {
            Some(&"bfloat16") => e.0 = Some(ms),
            Some(&"fp8") => e.1 = Some(ms),
            _ => {}
        }
    }
    by.into_values()
        .filter_map(|(b, f)| Some((b?, f?)))
        .filter(|(b, _)| *b >= 0.05)
        .map(|(b, f)| 2.0 * f / b)
        .collect()
}

/// `perf::FP8_KV_READ_FACTOR` from the tables: per family, the median of its GPUs'
/// [`fp8_kv_read_ratios`] pooled, to two decimals.
pub fn fp8_kv_read_factors(tables: &[(KernelFamily, Vec<f64>)]) -> Vec<(KernelFamily, f64)> {
    let mut by: BTreeMap<KernelFamily, Vec<f64>> = BTreeMap::new();
    for (family, ratios) in tables {
        by.entry(*family).or_default().extend(ratios);
    }
    by.into_iter()
        .map(|(f, v)| (f, (median(v) * 100.0).round() / 100.0))
        .collect()
}

/// The decode-attention kernel's fixed time per call from a `generation_attention.csv.gz`
/// table (decompressed), per KV-cache format (`false`: 16-bit, `true`: 8-bit), seconds: the
/// intercept of `t = a + b × batch × KV heads + c × KV bytes read`, fitted by least squares
/// on the relative error over the table's full-attention decode rows of vLLM's default
/// backend (FlashAttention 3 on Hopper, FlashInfer's TRT-LLM decode kernel on Blackwell) at
/// 16 to 65,536 tokens of context. The slope per byte is the kernel's share of the HBM
/// bandwidth and the one per sequence and KV head its per-sequence work; the step model
/// times those with its own fitted efficiency and `sequence_layer_overhead`, and takes the
/// intercept alone (`perf::step::DECODE_ATTENTION_CALL`).
pub fn decode_attention_call(csv: &str, eight_bit: bool) -> Option<f64> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next()?.split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n);
    let (source, batch, kv_heads, head_dim, kv_dtype, context, window, latency) = (
        col("kernel_source")?,
        col("batch_size")?,
        col("num_key_value_heads")?,
        col("head_dim")?,
        col("kv_cache_dtype")?,
        col("step")?,
        col("window_size")?,
        col("latency")?,
    );
    let want = if eight_bit { "fp8" } else { "bfloat16" };
    let element = if eight_bit { 1.0 } else { 2.0 };
    // Normal equations of the relative error, Σ x xᵀ / t² and Σ x / t.
    let (mut a, mut v) = ([[0.0f64; 3]; 3], [0.0f64; 3]);
    let mut rows = 0usize;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let get = |i: usize| f.get(i).copied().unwrap_or("");
        if get(window) != "0"
            || get(kv_dtype) != want
            || !matches!(
                get(source),
                "vllm_flash_attn_fa3" | "vllm_flashinfer_trtllmdecode"
            )
        {
            continue;
        }
        let num = |i: usize| get(i).parse::<f64>().ok();
        let (Some(b), Some(kv), Some(d), Some(ctx), Some(ms)) = (
            num(batch),
            num(kv_heads),
            num(head_dim),
            num(context),
            num(latency),
        ) else {
            continue;
        };
        if !(16.0..=65_536.0).contains(&ctx) || ms <= 0.0 {
            continue;
        }
        let t = ms * 1e-3;
        let x = [1.0, b * kv, b * ctx * kv * d * 2.0 * element];
        for i in 0..3 {
            v[i] += x[i] / t;
            for j in 0..3 {
                a[i][j] += x[i] * x[j] / (t * t);
            }
        }
        rows += 1;
    }
    if rows < 10 {
        return None;
    }
    solve3(a, v).map(|c| c[0])
}

/// The solution of a 3 × 3 linear system by Gaussian elimination with partial pivoting;
/// `None` when it is singular.
fn solve3(mut a: [[f64; 3]; 3], mut v: [f64; 3]) -> Option<[f64; 3]> {
    for i in 0..3 {
        let p = (i..3).max_by(|&r, &s| a[r][i].abs().total_cmp(&a[s][i].abs()))?;
        a.swap(i, p);
        v.swap(i, p);
        if a[i][i].abs() < 1e-300 {
            return None;
        }
        let (pivot, pivot_v) = (a[i], v[i]);
        for (r, (row, value)) in a.iter_mut().zip(v.iter_mut()).enumerate() {
            if r != i {
                let k = row[i] / pivot[i];
                for (x, p) in row.iter_mut().zip(pivot).skip(i) {
                    *x -= k * p;
                }
                *value -= k * pivot_v;
            }
        }
    }
    Some([v[0] / a[0][0], v[1] / a[1][1], v[2] / a[2][2]])
}

/// [`decode_attention_call`] per kernel family and KV format: the median of the family's
/// GPUs, to a tenth of a microsecond.
pub fn decode_attention_calls(
    tables: &[(KernelFamily, Option<f64>, Option<f64>)],
) -> Vec<(KernelFamily, f64, f64)> {
    let mut by: BTreeMap<KernelFamily, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for (family, sixteen, eight) in tables {
        let e = by.entry(*family).or_default();
        e.0.extend(sixteen);
        e.1.extend(eight);
    }
    let tenth_us = |v: Vec<f64>| (median(v) * 1e7).round() / 1e7;
    by.into_iter()
        .filter(|(_, (s, e))| !s.is_empty() && !e.is_empty())
        .map(|(f, (s, e))| (f, tenth_us(s), tenth_us(e)))
        .collect()
}
