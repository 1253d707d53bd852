//! GEMM kernels as the step model sees them: which kernel a weight format runs on, the
//! kernel families with measured tables, and how much of its datasheet peak each family's
//! compute-bound GEMMs reach.
//!
//! The step model's compute efficiency is fitted end to end on rows that are mostly
//! Hopper's; a GPU of another family reaches a different share of its datasheet peak in
//! compute-bound GEMMs (prompt chunks), measured in the kernel tables
//! (../shared/calibration/kernels/<gpu>/gemm.csv.gz: the median of FLOPs ÷ time ÷ peak
//! over shapes of 2 048–16 384 tokens and at least 2²⁴ weight elements). [`compute_factor`]
//! carries the fitted efficiency to the GPU's family: B200's FP8 GEMMs reach 0.424 of
//! their peak where Hopper's reach 0.490, so a B200 prompt chunk runs at 0.87 × the fitted
//! efficiency. Decode (memory-bound) steps take no such factor: the end-to-end TPOT shows
//! no bias by family. `calibration/tests/calibration.rs` re-derives the medians;
//! architectures without tables (Ampere, Ada, AMD) take Hopper's, Blackwell parts
//! Blackwell's.

use super::scenario::GpuSpec;

/// The kernel a weight format runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MatmulKind {
    /// 16-bit activations × 16-bit weights (also weight-only quantized formats, which
    /// dequantize to 16 bits).
    Bf16,
    /// FP8 (or INT8) weights and activations quantized per token.
    Fp8,
    /// NVFP4/MXFP4 weights and activations (Blackwell).
    Fp4,
    /// 4-bit integer weights (INT4, AWQ, GPTQ) × 16-bit activations, dequantized in the
    /// kernel (Marlin). Only the fused-MoE curves tell it apart (`fused_moe::expert_kind`);
    /// a dense GEMM of these weights is [`MatmulKind::Bf16`].
    Int4W16,
    /// MXFP4 weights × 16-bit activations on the kernels vLLM gives gpt-oss's `mxfp4`
    /// method (OpenAI's Triton kernel on Hopper, FlashInfer's TRT-LLM MXFP4 × BF16 on
    /// Blackwell), likewise only for the fused-MoE curves.
    Mxfp4W16,
    /// MXFP4 weights × 16-bit activations on Marlin: the fused-MoE curve of MXFP4
    /// experts where vLLM's oracle falls through to its weight-only kernels.
    Mxfp4Marlin,
    /// MXFP4 weights × MXFP8 activations (FlashInfer's TRT-LLM kernel, Blackwell): the
    /// fused-MoE curve of DeepSeek V4's MXFP4 experts, at the 8-bit peak.
    Mxfp4W8,
}

/// GPU families with measured kernel tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelFamily {
    Hopper,
    Blackwell,
}

impl KernelFamily {
    /// The family whose curves stand for `architecture` (the nearest with tables).
    pub fn of(architecture: Option<&str>) -> KernelFamily {
        match architecture {
            Some("blackwell" | "blackwell_rtx") => KernelFamily::Blackwell,
            _ => KernelFamily::Hopper,
        }
    }
}

/// The kernel weights in `format` run on, on this GPU, and its dense tensor peak: FP8
/// and INT8 where the GPU has an 8-bit rate, FP4 where it has a 4-bit one, else 16 bits.
pub fn kind_of(gpu: &GpuSpec, format: &str) -> (MatmulKind, f64) {
    match format {
        "fp8" | "int8" => match gpu.fp8.or(gpu.int8) {
            Some(peak) => (MatmulKind::Fp8, peak),
            None => (MatmulKind::Bf16, gpu.bf16),
        },
        "nvfp4" | "mxfp4" => match gpu.fp4 {
            Some(peak) => (MatmulKind::Fp4, peak),
            None => (MatmulKind::Bf16, gpu.bf16),
        },
        "fp16" => (MatmulKind::Bf16, gpu.fp16),
        _ => (MatmulKind::Bf16, gpu.bf16),
    }
}

/// Median achieved share of the datasheet peak of compute-bound GEMMs, per family and
/// kind (the kernel tables; H100 and H200 pooled for Hopper).
pub const COMPUTE_BOUND_EFFICIENCY: [(KernelFamily, MatmulKind, f64); 5] = [
    (KernelFamily::Hopper, MatmulKind::Bf16, 0.791),
    (KernelFamily::Hopper, MatmulKind::Fp8, 0.490),
    (KernelFamily::Blackwell, MatmulKind::Bf16, 0.688),
    (KernelFamily::Blackwell, MatmulKind::Fp8, 0.424),
    (KernelFamily::Blackwell, MatmulKind::Fp4, 0.382),
];

/// How a GEMM's compute time and memory time combine: `(compute^p + memory^p)^(1/p)`
/// with this `p`. The textbook roofline is `p = ∞` (the slower of the two); measured
/// kernels are slower than that near the ridge, where neither the tensor cores nor HBM
/// run at their own ceiling. Fitted on the kernel tables with the curves
/// (`dic_calibration::kernels::fit_roofline_exponent`: each candidate among 1, 1.5, 2, 3, 4
/// and ∞ refits every family's and kind's curve; mean |log error| over all their rows):
/// 2, at 0.142 against 0.149 for the plain max (1.5: 0.142, 3: 0.143, 1: 0.153).
pub const ROOFLINE_EXPONENT: f64 = 2.0;

/// A GEMM's time from its compute and memory times ([`ROOFLINE_EXPONENT`]).
pub fn roofline(compute: f64, memory: f64) -> f64 {
    roofline_with(compute, memory, ROOFLINE_EXPONENT)
}

/// [`roofline`] with exponent `p` (`f64::INFINITY`: the slower of the two).
pub fn roofline_with(compute: f64, memory: f64, p: f64) -> f64 {
    if p.is_infinite() {
        compute.max(memory)
    } else {
        (compute.powf(p) + memory.powf(p)).powf(1.0 / p)
    }
}

/// The entry of a per-family, per-kind table; a kind the family has no table for (FP4 on
/// Hopper) takes the family's FP8 entry.
pub fn lookup<T: Copy>(
    table: &[(KernelFamily, MatmulKind, T)],
    family: KernelFamily,
    kind: MatmulKind,
) -> Option<T> {
    let find = |k: MatmulKind| {
        table
            .iter()
            .find(|(f, kk, _)| *f == family && *kk == k)
            .map(|e| e.2)
    };
    find(kind).or_else(|| find(MatmulKind::Fp8))
}

/// The measured compute-bound efficiency of a family and kind ([`lookup`]).
pub fn compute_bound_efficiency(family: KernelFamily, kind: MatmulKind) -> f64 {
    lookup(&COMPUTE_BOUND_EFFICIENCY, family, kind).unwrap_or(1.0)
}

/// The factor on the fitted compute efficiency for weights in `format` on `gpu`: its
/// family's measured compute-bound efficiency over Hopper's for the same kind (FP4, which
/// Hopper lacks, against Hopper's FP8: the rate it would run at there). 1 on Hopper and on
/// families without tables. One factor per kind, not per GEMM size: in the tables B200's
/// per-tensor FP8 GEMMs of 2 048–16 384 tokens reach 0.63 of Hopper's share at 2²³ weight
/// elements, 0.85 at 2²⁶ and Hopper's own above 2²⁸, but charging a 70B's per-rank GEMMs
/// that ratio by size moved cross-validated TTFT from 15.1 / 15.2% to 15.9 / 15.0% leaving
/// one GPU / one model out (B200's TP 1 chunks came out faster, and the refit slowed
/// Hopper's). Against Hopper's FP8 for every kind instead (Hopper's BF16 GEMMs at the
/// tables' 0.791 / 0.490 = 1.61 × the FP8 share of peak), the refit made Qwen3-32B's BF16
/// rows 26% fast and TTFT 15.7 / 21.7 / 36.4% fitted / leaving one GPU / one model out:
/// measured end to end (vLLM 0.12), those BF16 prompts run at about the FP8 rows' share of
/// peak, not at the share the BF16 kernel tables measure.
pub fn compute_factor(gpu: &GpuSpec, format: &str) -> f64 {
    let family = KernelFamily::of(gpu.architecture.as_deref());
    let (kind, _) = kind_of(gpu, format);
    compute_bound_efficiency(family, kind) / compute_bound_efficiency(KernelFamily::Hopper, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_without_tables_take_the_nearest_familys_curves() {
        assert_eq!(KernelFamily::of(Some("ampere")), KernelFamily::Hopper);
        assert_eq!(KernelFamily::of(Some("cdna3")), KernelFamily::Hopper);
        assert_eq!(KernelFamily::of(Some("blackwell")), KernelFamily::Blackwell);
        assert_eq!(
            KernelFamily::of(Some("blackwell_rtx")),
            KernelFamily::Blackwell
        );
    }

    #[test]
    fn blackwell_prompt_chunks_run_at_the_measured_share_of_hoppers_efficiency() {
        let (b200, _) = crate::analysis::catalog::gpu("NVIDIA B200").expect("catalog");
        let (h100, _) = crate::analysis::catalog::gpu("NVIDIA H100 80GB HBM3").expect("catalog");
        assert_eq!(compute_factor(&h100, "fp8"), 1.0);
        assert!((compute_factor(&b200, "fp8") - 0.424 / 0.490).abs() < 1e-12);
        assert!((compute_factor(&b200, "nvfp4") - 0.382 / 0.490).abs() < 1e-12);
        assert!((compute_factor(&b200, "bf16") - 0.688 / 0.791).abs() < 1e-12);
    }
}
