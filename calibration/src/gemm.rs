//! GEMM kernels measured inside vLLM: a curve per kernel family and format, fitted on
//! ../shared/calibration/kernels/<gpu>/gemm.csv.gz, and its residuals.
//!
//! One call multiplies `m` tokens by an `n × k` weight: a fixed launch cost, then its
//! FLOPs at a fraction of the format's tensor peak and its bytes (weights, 16-bit
//! activations in and out) at a fraction of HBM bandwidth combined on the roofline
//! (`gemm::roofline`, whose exponent `kernels::fit_roofline_exponent` fits here too),
//! then, for kernels that quantize their activations on the fly (FP8, FP4), a term in
//! the `m × k` input. The four constants are fitted per kernel family (Hopper: H100 and
//! H200; Blackwell: B200) and format (vLLM 0.24's torch BF16 linear, CUTLASS FP8
//! scaled-mm, FlashInfer NVFP4) by [`fit_curve`]; the test `gemm_curves_are_the_fit`
//! re-runs it and `calibration/errors.md` lists the residuals per GPU.
//!
//! The step model (`perf`) does not use these curves (it takes only the compute-bound
//! efficiencies of `analysis::gemm` and the roofline's exponent). Substituting them for
//! its dense GEMMs (each layer's GEMMs as calls with launch and quantization costs, the
//! rest of the end-to-end fit unchanged) made the cross-validated end-to-end error worse: TPOT
//! leaving one GPU out 8.9% → 20.0%, leaving one model out 13.4% → 25.7%, TTFT 26.4% →
//! 37.0% and 26.8% → 41.4%; using only their format ratios (FP8 and FP4 kernels reach a
//! smaller share of their peak than BF16) gave 8.9% → 10.5% and 13.4% → 13.8% on TPOT,
//! 26.4% → 30.6% on TTFT. Isolated kernels run faster and with a different format
//! ordering than the same layers in a served step (fused norms and activations,
//! CUDA graphs, other shapes), so the step model keeps end-to-end efficiencies and these
//! curves stay the measured reference for per-operation work.

use dic_compiler::analysis::gemm::{
    kind_of, lookup, roofline_with, KernelFamily, MatmulKind, ROOFLINE_EXPONENT,
};
use dic_compiler::analysis::scenario::GpuSpec;

/// A fitted GEMM curve.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct GemmCurve {
    /// Achieved fraction of the format's dense tensor peak when compute-bound.
    pub compute: f64,
    /// Achieved fraction of HBM bandwidth when memory-bound.
    pub memory: f64,
    /// Fixed time per call, seconds.
    pub launch: f64,
    /// Activation quantization: the `m × k` input's bytes (read in 16 bits, written in 8)
    /// times this, at HBM bandwidth; 0 for 16-bit kernels.
    pub quant: f64,
}

/// The fitted curves (`fit_curve` on the kernel tables; `calibration/errors.md` gives
/// their residuals per GPU).
pub const CURVES: [(KernelFamily, MatmulKind, GemmCurve); 5] = [
    (
        KernelFamily::Hopper,
        MatmulKind::Bf16,
        GemmCurve {
            compute: 0.8,
            memory: 0.85,
            launch: 3.0e-6,
            quant: 0.0,
        },
    ),
    (
        KernelFamily::Hopper,
        MatmulKind::Fp8,
        GemmCurve {
            compute: 0.6,
            memory: 0.8,
            launch: 7.0e-6,
            quant: 3.5,
        },
    ),
    (
        KernelFamily::Blackwell,
        MatmulKind::Bf16,
        GemmCurve {
            compute: 0.75,
            memory: 0.8,
            launch: 4.0e-6,
            quant: 0.0,
        },
    ),
    (
        KernelFamily::Blackwell,
        MatmulKind::Fp8,
        GemmCurve {
            compute: 0.7,
            memory: 0.7,
            launch: 7.0e-6,
            quant: 6.5,
        },
    ),
    (
        KernelFamily::Blackwell,
        MatmulKind::Fp4,
        GemmCurve {
            compute: 0.5,
            memory: 0.6,
            launch: 7.0e-6,
            quant: 0.5,
        },
    ),
];

/// The curve of a family and kind (`gemm::lookup`: FP4 on Hopper takes Hopper's FP8).
pub fn curve(family: KernelFamily, kind: MatmulKind) -> GemmCurve {
    lookup(&CURVES, family, kind).unwrap_or(CURVES[0].2)
}

/// Time of one GEMM call, split into its parts (seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GemmTime {
    pub compute: f64,
    pub memory: f64,
    /// Launch and activation quantization.
    pub fixed: f64,
}

impl GemmTime {
    /// The call's time: the fixed part, then compute and memory on the roofline
    /// (`gemm::roofline`).
    pub fn total(&self) -> f64 {
        self.total_with(ROOFLINE_EXPONENT)
    }

    /// [`GemmTime::total`] with roofline exponent `p`.
    pub fn total_with(&self, p: f64) -> f64 {
        self.fixed + roofline_with(self.compute, self.memory, p)
    }
}

/// A GEMM's shape: `m` tokens through an `n × k` weight of `weight_bytes` per element.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GemmShape {
    pub m: f64,
    pub n: f64,
    pub k: f64,
    pub weight_bytes: f64,
}

/// One call's time on a GPU with `peak` FLOP/s for `kind` and `bandwidth` bytes/s of HBM.
pub fn gemm_time(
    c: &GemmCurve,
    kind: MatmulKind,
    peak: f64,
    bandwidth: f64,
    g: GemmShape,
) -> GemmTime {
    let flops = 2.0 * g.m * g.n * g.k;
    let bytes = g.n * g.k * g.weight_bytes + 2.0 * g.m * (g.k + g.n);
    let quant = match kind {
        MatmulKind::Bf16 => 0.0,
        _ => c.quant * 3.0 * g.m * g.k / bandwidth,
    };
    GemmTime {
        compute: flops / (peak * c.compute),
        memory: bytes / (bandwidth * c.memory),
        fixed: c.launch + quant,
    }
}

/// One measured GEMM: shape, the GPU's peak for its kind and bandwidth, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredGemm {
    pub kind: MatmulKind,
    pub shape: GemmShape,
    pub peak: f64,
    pub bandwidth: f64,
    pub seconds: f64,
}

/// Which tables' rows a curve is fitted on: the shapes of LLM layers (weights of at least
/// 2²¹ elements, at most 16 384 tokens); tiny weights are launch-bound everywhere.
pub fn in_fitted_range(g: &GemmShape) -> bool {
    g.n * g.k >= (1u64 << 21) as f64 && g.m <= 16384.0
}

/// Mean |log(predicted / measured)| of a curve over rows, with roofline exponent `p`.
pub fn curve_objective(c: &GemmCurve, rows: &[MeasuredGemm], p: f64) -> f64 {
    let sum: f64 = rows
        .iter()
        .map(|r| {
            (gemm_time(c, r.kind, r.peak, r.bandwidth, r.shape).total_with(p) / r.seconds)
                .ln()
                .abs()
        })
        .sum();
    sum / rows.len().max(1) as f64
}

/// Fits a curve to rows of one family and kind with the stored roofline exponent.
pub fn fit_curve(rows: &[MeasuredGemm], kind: MatmulKind) -> GemmCurve {
    fit_curve_with(rows, kind, ROOFLINE_EXPONENT)
}

/// Fits a curve to rows of one family and kind with roofline exponent `p`: coordinate
/// descent on a grid (compute and memory fractions in steps of 0.05, launch in µs,
/// quant in halves), deterministic.
pub fn fit_curve_with(rows: &[MeasuredGemm], kind: MatmulKind, p: f64) -> GemmCurve {
    let mut best = GemmCurve {
        compute: 0.5,
        memory: 0.7,
        launch: 5.0e-6,
        quant: if kind == MatmulKind::Bf16 { 0.0 } else { 1.0 },
    };
    let mut best_o = curve_objective(&best, rows, p);
    let params = if kind == MatmulKind::Bf16 { 3 } else { 4 };
    loop {
        let mut improved = false;
        for i in 0..params {
            for dir in [1.0, -1.0] {
                let mut c = best;
                match i {
                    0 => c.compute = (c.compute + dir * 0.05).clamp(0.05, 1.0),
                    1 => c.memory = (c.memory + dir * 0.05).clamp(0.05, 1.0),
                    2 => c.launch = (c.launch + dir * 1.0e-6).clamp(0.0, 50.0e-6),
                    _ => c.quant = (c.quant + dir * 0.5).clamp(0.0, 16.0),
                }
                let o = curve_objective(&c, rows, p);
                if o < best_o - 1e-9 {
                    best = c;
                    best_o = o;
                    improved = true;
                }
            }
        }
        if !improved {
            break;
        }
    }
    // Round away the grid's floating-point steps.
    GemmCurve {
        compute: (best.compute * 20.0).round() / 20.0,
        memory: (best.memory * 20.0).round() / 20.0,
        launch: (best.launch * 1e6).round() / 1e6,
        quant: (best.quant * 2.0).round() / 2.0,
    }
}

/// Parses a `gemm.csv.gz` table (decompressed) into measured rows on `gpu`, keeping the
/// per-tensor kernels dic models (torch BF16, CUTLASS FP8 scaled-mm, NVFP4) and skipping
/// block-scaled FP8.
pub fn parse_gemm_table(csv: &str, gpu: &GpuSpec) -> Vec<MeasuredGemm> {
    let mut lines = csv.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let header: Vec<&str> = header.split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n);
    let (Some(dt), Some(mc), Some(nc), Some(kc), Some(lat)) = (
        col("gemm_dtype"),
        col("m"),
        col("n"),
        col("k"),
        col("latency"),
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let (format, weight_bytes) = match f.get(dt) {
            Some(&"bfloat16") => ("bf16", 2.0),
            Some(&"fp8") => ("fp8", 1.0),
            // 4-bit values with one FP8 scale per 16.
            Some(&"nvfp4") => ("nvfp4", 0.5 + 1.0 / 16.0),
            _ => continue,
        };
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok());
        let (Some(m), Some(n), Some(k), Some(ms)) = (num(mc), num(nc), num(kc), num(lat)) else {
            continue;
        };
        let (kind, peak) = kind_of(gpu, format);
        out.push(MeasuredGemm {
            kind,
            shape: GemmShape {
                m,
                n,
                k,
                weight_bytes,
            },
            peak,
            bandwidth: gpu.hbm_bandwidth,
            seconds: ms * 1e-3,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two ends of the roofline, and the ridge between them, by hand: one token
    /// streams the weight (its FLOPs add a vanishing square), 8192 tokens are mostly
    /// compute, and where FLOPs and bytes take the same time the call takes √2 × that
    /// (`gemm::ROOFLINE_EXPONENT` 2), not 1 × as the plain max has it.
    #[test]
    fn a_decode_gemm_streams_its_weights_and_a_prefill_gemm_is_compute_bound() {
        let c = GemmCurve {
            compute: 0.8,
            memory: 0.8,
            launch: 4e-6,
            quant: 0.0,
        };
        // 8192 × 8192 bf16 weight (128 MiB) on 1 TB/s, 1000 TFLOP/s.
        let w = GemmShape {
            m: 1.0,
            n: 8192.0,
            k: 8192.0,
            weight_bytes: 2.0,
        };
        let t = gemm_time(&c, MatmulKind::Bf16, 1e15, 1e12, w);
        let bytes = 8192.0 * 8192.0 * 2.0 + 2.0 * (8192.0 + 8192.0);
        let (streamed, flops): (f64, f64) = (bytes / 0.8e12, 2.0 * 8192.0 * 8192.0 / 0.8e15);
        let want = 4e-6 + (streamed * streamed + flops * flops).sqrt();
        assert!((t.total() - want).abs() < 1e-15);
        assert!((t.total() - (4e-6 + streamed)).abs() < 1e-10);
        let p = GemmShape { m: 8192.0, ..w };
        let t = gemm_time(&c, MatmulKind::Bf16, 1e15, 1e12, p);
        let flops: f64 = 2.0 * 8192f64.powi(3) / 0.8e15;
        let bytes: f64 = (8192.0 * 8192.0 * 2.0 + 2.0 * 8192.0 * (8192.0 + 8192.0)) / 0.8e12;
        let want = 4e-6 + (flops * flops + bytes * bytes).sqrt();
        assert!((t.total() - want).abs() < 1e-15);
        // 2.7 × as long in FLOPs as in bytes: 1.065 × its FLOP time.
        assert!(((t.total() - 4e-6) / flops - 1.065).abs() < 1e-3);
        // At the ridge, √2 × either time.
        let ridge = GemmTime {
            compute: 1e-3,
            memory: 1e-3,
            fixed: 0.0,
        };
        assert!((ridge.total() - 2f64.sqrt() * 1e-3).abs() < 1e-15);
        assert_eq!(ridge.total_with(f64::INFINITY), 1e-3);
    }

    #[test]
    fn fp8_kernels_pay_for_quantizing_their_activations() {
        let c = GemmCurve {
            compute: 0.5,
            memory: 0.8,
            launch: 0.0,
            quant: 2.0,
        };
        let g = GemmShape {
            m: 1000.0,
            n: 10.0,
            k: 4096.0,
            weight_bytes: 1.0,
        };
        let t = gemm_time(&c, MatmulKind::Fp8, 1e15, 1e12, g);
        assert!((t.fixed - 2.0 * 3.0 * 1000.0 * 4096.0 / 1e12).abs() < 1e-15);
        let b = gemm_time(&c, MatmulKind::Bf16, 1e15, 1e12, g);
        assert_eq!(b.fixed, 0.0);
    }

    #[test]
    fn a_kind_without_a_table_takes_the_familys_fp8_curve() {
        assert_eq!(
            curve(KernelFamily::Hopper, MatmulKind::Fp4),
            curve(KernelFamily::Hopper, MatmulKind::Fp8)
        );
    }

    #[test]
    fn the_fit_recovers_a_curve_that_generated_the_rows() {
        let truth = GemmCurve {
            compute: 0.65,
            memory: 0.8,
            launch: 6e-6,
            quant: 2.0,
        };
        let mut rows = Vec::new();
        for m in [1.0, 8.0, 64.0, 512.0, 4096.0] {
            for n in [1024.0, 4096.0, 16384.0] {
                let shape = GemmShape {
                    m,
                    n,
                    k: 4096.0,
                    weight_bytes: 1.0,
                };
                let seconds = gemm_time(&truth, MatmulKind::Fp8, 2e15, 3e12, shape).total();
                rows.push(MeasuredGemm {
                    kind: MatmulKind::Fp8,
                    shape,
                    peak: 2e15,
                    bandwidth: 3e12,
                    seconds,
                });
            }
        }
        let fit = fit_curve(&rows, MatmulKind::Fp8);
        assert!(
            curve_objective(&fit, &rows, ROOFLINE_EXPONENT) < 0.01,
            "{fit:?}"
        );
    }
}
