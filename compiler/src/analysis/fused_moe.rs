//! The fused-MoE kernel as the step model times it: one call per MoE layer on one rank,
//! from a curve fitted per kernel family and weight kind on the fused-MoE latencies
//! measured inside vLLM (../shared/calibration/kernels/<gpu>/moe.csv.gz).
//!
//! A call gathers the rank's share of the token–expert pairs, runs the grouped GEMMs of
//! the local experts the batch touches, and scatters and sums the outputs. Its time is
//! the sum (the kernel does not hide one behind another) of:
//! - a fixed launch cost (routing alignment and sorting, several kernels),
//! - the grouped GEMMs' FLOPs at the format's tensor peak × an efficiency that falls for
//!   narrow experts and small hidden sizes, `compute × I/(I + i½) × H/(H + h½)` with `I`
//!   the rank's expert width and `H` the hidden size (tiles of a narrow GEMM idle),
//! - the touched experts' weights streamed once at a fraction of HBM bandwidth,
//! - the `tokens × top-k × hidden` 16-bit intermediate every pair writes and the sum
//!   reads, whether or not its expert is local (EP masks the pair, the buffers stay).
//!
//! Measured efficiencies are far below the dense GEMMs': Hopper's block-FP8 fused MoE on
//! Qwen3-235B's experts (TP 2) runs at 0.23 of the FP8 peak at 8 192 tokens, where a dense
//! FP8 GEMM of that size reaches 0.49 and the step model's end-to-end efficiency was
//! 0.60 — prompt chunks of MoE models came out 2–3× too fast. GPUs without tables take the
//! nearest family's curve (`KernelFamily::of`) at their datasheet peaks;
//! 4-bit weight-only experts (INT4/AWQ/GPTQ on Marlin) and MXFP4 experts have curves of
//! their own, one per kernel vLLM's oracle runs them on ([`expert_kind`]: gpt-oss's
//! kernels, Marlin, TRT-LLM's MXFP4 × MXFP8): timed by the BF16 curve at their 4-bit
//! bytes, as INT4 experts everywhere and MXFP4 ones on Hopper were before, the kernel
//! tables ran a median 1.28–3.21× (INT4) and 1.34–1.58× (MXFP4, Hopper) slower than
//! predicted, most on B200; and one MXFP4 curve over gpt-oss's kernels and Marlin's
//! stood 13–33% off each (Marlin the slower, gpt-oss's kernels the faster);
//! `dic_calibration::fused_moe` fits the curves and `calibration/errors.md` lists the residuals.

use super::gemm::{kind_of, lookup, KernelFamily, MatmulKind};
use super::scenario::GpuSpec;
use serde::Serialize;

/// A fitted fused-MoE curve (see the module header for the terms).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FusedMoeCurve {
    /// Efficiency of wide experts on a wide model, as a fraction of the tensor peak.
    pub compute: f64,
    /// Expert width (per rank) at which the GEMM efficiency halves.
    pub width_half: f64,
    /// Hidden size at which the GEMM efficiency halves.
    pub hidden_half: f64,
    /// Achieved fraction of HBM bandwidth streaming the touched experts.
    pub memory: f64,
    /// Fixed time per call, seconds.
    pub launch: f64,
    /// The 16-bit per-pair intermediate (`tokens × top-k × hidden × 2` bytes) times this,
    /// at HBM bandwidth.
    pub scatter: f64,
}

/// The fitted curves (`dic_calibration::fused_moe::fit_curve` on the kernel tables, each
/// call routed as the tables routed it — a power law of exponent 1.01, the busiest EP
/// rank timed, `dic_calibration::fused_moe::table_routing`; the test
/// `fused_moe_curves_are_the_fit` re-runs the fit).
pub const CURVES: [(KernelFamily, MatmulKind, FusedMoeCurve); 12] = [
    (
        KernelFamily::Hopper,
        MatmulKind::Bf16,
        FusedMoeCurve {
            compute: 0.73,
            width_half: 0.979,
            hidden_half: 0.841,
            memory: 0.927,
            launch: 39.6e-6,
            scatter: 6.1,
        },
    ),
    (
        KernelFamily::Hopper,
        MatmulKind::Fp8,
        FusedMoeCurve {
            compute: 0.505,
            width_half: 400.0,
            hidden_half: 1230.0,
            memory: 0.859,
            launch: 29.9e-6,
            scatter: 0.927,
        },
    ),
    (
        KernelFamily::Blackwell,
        MatmulKind::Bf16,
        FusedMoeCurve {
            compute: 0.539,
            width_half: 119.0,
            hidden_half: 0.841,
            memory: 0.917,
            launch: 17.9e-6,
            scatter: 0.869,
        },
    ),
    (
        KernelFamily::Blackwell,
        MatmulKind::Fp8,
        FusedMoeCurve {
            compute: 0.247,
            width_half: 0.841,
            hidden_half: 869.0,
            memory: 0.888,
            launch: 31.9e-6,
            scatter: 5.02,
        },
    ),
    (
        KernelFamily::Blackwell,
        MatmulKind::Fp4,
        FusedMoeCurve {
            compute: 0.522,
            width_half: 742.0,
            hidden_half: 239.0,
            memory: 0.882,
            launch: 21.6e-6,
            scatter: 1.24,
        },
    ),
    (
        KernelFamily::Hopper,
        MatmulKind::Int4W16,
        FusedMoeCurve {
            compute: 0.279,
            width_half: 96.8,
            hidden_half: 29.7,
            memory: 0.726,
            launch: 49.1e-6,
            scatter: 4.86,
        },
    ),
    (
        KernelFamily::Hopper,
        MatmulKind::Mxfp4W16,
        FusedMoeCurve {
            compute: 0.563,
            width_half: 179.0,
            hidden_half: 0.989,
            memory: 0.637,
            launch: 61.0e-6,
            scatter: 0.979,
        },
    ),
    (
        KernelFamily::Blackwell,
        MatmulKind::Int4W16,
        FusedMoeCurve {
            compute: 0.125,
            width_half: 107.0,
            hidden_half: 285.0,
            memory: 0.497,
            launch: 56.6e-6,
            scatter: 6.95,
        },
    ),
    (
        KernelFamily::Blackwell,
        MatmulKind::Mxfp4W16,
        FusedMoeCurve {
            compute: 0.297,
            width_half: 240.0,
            hidden_half: 6.65,
            memory: 0.554,
            launch: 20.2e-6,
            scatter: 5.54,
        },
    ),
    (
        KernelFamily::Hopper,
        MatmulKind::Mxfp4Marlin,
        FusedMoeCurve {
            compute: 0.25,
            width_half: 0.917,
            hidden_half: 75.1,
            memory: 0.644,
            launch: 77.4e-6,
            scatter: 9.21,
        },
    ),
    (
        KernelFamily::Blackwell,
        MatmulKind::Mxfp4Marlin,
        FusedMoeCurve {
            compute: 0.125,
            width_half: 3.22,
            hidden_half: 707.0,
            memory: 0.432,
            launch: 64.4e-6,
            scatter: 20.5,
        },
    ),
    (
        KernelFamily::Blackwell,
        MatmulKind::Mxfp4W8,
        FusedMoeCurve {
            compute: 0.832,
            width_half: 972.0,
            hidden_half: 0.5,
            memory: 0.8,
            launch: 29.9e-6,
            scatter: 1.66,
        },
    ),
];

/// One fused-MoE call on one rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoeCall {
    /// Tokens entering the kernel (every DP rank's, under vLLM's all-gather dispatch).
    pub tokens: f64,
    /// Experts each token picks, and the model's routed experts.
    pub top_k: f64,
    pub experts: f64,
    /// Experts held on this rank (all of them without EP).
    pub local_experts: f64,
    pub hidden: f64,
    /// The rank's share of one expert's intermediate size (all of it with EP).
    pub width: f64,
    /// Weight matrices per expert (3 gated, 2 plain).
    pub matrices: f64,
    /// Weight bytes per parameter (scales included).
    pub bytes_per_param: f64,
}

impl MoeCall {
    /// Token–expert pairs whose expert is on this rank (routing balanced over ranks).
    pub fn local_pairs(&self) -> f64 {
        self.tokens * self.top_k * self.local_experts / self.experts.max(1.0)
    }

    /// Local experts at least one token picks (independent uniform picks).
    pub fn touched(&self) -> f64 {
        let share = (self.top_k / self.experts.max(1.0)).min(1.0);
        self.local_experts * (1.0 - (self.tokens * (-share).ln_1p()).exp())
    }

    pub fn flops(&self) -> f64 {
        2.0 * self.local_pairs() * self.matrices * self.hidden * self.width
    }

    pub fn weight_bytes(&self) -> f64 {
        self.touched() * self.matrices * self.hidden * self.width * self.bytes_per_param
    }

    /// The per-pair 16-bit intermediate.
    pub fn scatter_bytes(&self) -> f64 {
        self.tokens * self.top_k * self.hidden * 2.0
    }
}

/// The curve of `family` for `kind` (a kind without a table takes the family's FP8).
pub fn curve(family: KernelFamily, kind: MatmulKind) -> FusedMoeCurve {
    lookup(&CURVES, family, kind).unwrap_or(CURVES[1].2)
}

/// The fused-MoE kernel experts stored in `format` run on, on this GPU, and the tensor
/// peak its GEMMs run at. `dense` is the format of the model's other GEMMs (its attention),
/// which tells the checkpoint's quantization method and so vLLM's backend oracle apart:
/// 4-bit weight-only experts (INT4, AWQ, GPTQ: the tables' `int4_wo`, Marlin) multiply
/// 16-bit activations at the 16-bit peak; MXFP4 experts run where vLLM 0.33's MXFP4
/// oracle (`fused_moe/oracle/mxfp4.py`) puts them:
/// - under 16-bit dense layers, vLLM's `mxfp4` method (gpt-oss, which quantizes only its
///   experts; `_get_priority_backends_for_gpt_oss`): FlashInfer's TRT-LLM MXFP4 × BF16
///   kernel on data-centre Blackwell, OpenAI's Triton kernel on Hopper
///   ([`MatmulKind::Mxfp4W16`]), Marlin on consumer Blackwell, where the oracle ranks
///   Triton after it;
/// - under FP8 dense layers, the FP8 method's MXFP4 experts (DeepSeek V4's,
///   `select_deepseek_v4_mxfp4_moe_backend`): TRT-LLM MXFP4 × MXFP8 on data-centre
///   Blackwell ([`MatmulKind::Mxfp4W8`], at the 8-bit peak); elsewhere the weight-only
///   kernels, Humming on Hopper (which the tables do not time; Marlin, the kernel it
///   outranks, stands for it) and Marlin on consumer Blackwell
///   ([`MatmulKind::Mxfp4Marlin`]).
///
/// Every other format runs as its dense GEMMs do (`gemm::kind_of`).
pub fn expert_kind(gpu: &GpuSpec, dense: &str, format: &str) -> (MatmulKind, f64) {
    let arch = gpu.architecture.as_deref();
    let sixteen_bit_dense = matches!(dense, "bf16" | "fp16" | "fp32");
    match format {
        "int4" | "awq" | "gptq" => (MatmulKind::Int4W16, gpu.bf16),
        "mxfp4" if sixteen_bit_dense && arch != Some("blackwell_rtx") => {
            (MatmulKind::Mxfp4W16, gpu.bf16)
        }
        "mxfp4" => match gpu.fp8 {
            Some(peak) if arch == Some("blackwell") && !sixteen_bit_dense => {
                (MatmulKind::Mxfp4W8, peak)
            }
            _ => (MatmulKind::Mxfp4Marlin, gpu.bf16),
        },
        _ => kind_of(gpu, format),
    }
}

/// One call's time in its parts (seconds); they add up.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MoeTime {
    pub launch: f64,
    /// The grouped GEMMs' FLOPs.
    pub compute: f64,
    /// The touched experts' weights and the per-pair intermediate.
    pub memory: f64,
}

impl MoeTime {
    pub fn total(&self) -> f64 {
        self.launch + self.compute + self.memory
    }
}

/// One call at `peak` FLOP/s and `hbm` bytes/s, in its parts, routed as serving routes
/// it: pairs balanced over the ranks, experts picked independently (`MoeCall::touched`).
pub fn call_parts(cv: &FusedMoeCurve, call: &MoeCall, peak: f64, hbm: f64) -> MoeTime {
    routed_call_parts(cv, call, call.local_pairs(), call.touched(), peak, hbm)
}

/// One call in its parts where the rank's token–expert pairs (`pairs`) and the experts
/// they touch (`touched`) are given: the kernel tables' own routing, whose synthetic
/// power law loads the timed rank most and touches fewer experts than independent picks
/// (`dic_calibration::fused_moe` fits the curves with it).
pub fn routed_call_parts(
    cv: &FusedMoeCurve,
    call: &MoeCall,
    pairs: f64,
    touched: f64,
    peak: f64,
    hbm: f64,
) -> MoeTime {
    let efficiency = cv.compute * call.width / (call.width + cv.width_half) * call.hidden
        / (call.hidden + cv.hidden_half);
    let per_expert = call.matrices * call.hidden * call.width;
    MoeTime {
        launch: cv.launch,
        compute: 2.0 * pairs * per_expert / (peak * efficiency.max(1e-6)),
        memory: touched * per_expert * call.bytes_per_param / (hbm * cv.memory)
            + cv.scatter * call.scatter_bytes() / hbm,
    }
}

/// Time of one call at `peak` FLOP/s and `hbm` bytes/s.
pub fn call_time(cv: &FusedMoeCurve, call: &MoeCall, peak: f64, hbm: f64) -> f64 {
    call_parts(cv, call, peak, hbm).total()
}

/// One call on `gpu` for experts stored in `format` of a model whose other GEMMs are in
/// `dense` ([`expert_kind`]), in its parts.
pub fn moe_time(gpu: &GpuSpec, dense: &str, format: &str, call: &MoeCall) -> MoeTime {
    let (kind, peak) = expert_kind(gpu, dense, format);
    let family = KernelFamily::of(gpu.architecture.as_deref());
    call_parts(&curve(family, kind), call, peak, gpu.hbm_bandwidth)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call through Qwen3-235B-A22B's experts at TP 2 (hidden 4 096, 128 experts of
    /// width 1 536 split in two, top 8) of `tokens`, weights of `bytes_per_param`.
    fn qwen3_moe_at_tp2(tokens: f64, bytes_per_param: f64) -> MoeCall {
        MoeCall {
            tokens,
            top_k: 8.0,
            experts: 128.0,
            local_experts: 128.0,
            hidden: 4096.0,
            width: 768.0,
            matrices: 3.0,
            bytes_per_param,
        }
    }

    /// Qwen3-235B-A22B's experts at TP 2, block FP8, 8 192 tokens on an H200, by hand from
    /// Hopper's FP8 curve.
    #[test]
    fn a_prompt_chunk_through_qwen3_moe_by_hand() {
        let (h200, _) = crate::analysis::catalog::gpu("NVIDIA H200").expect("catalog");
        let call = qwen3_moe_at_tp2(8192.0, 1.0);
        let flops = 2.0 * 8192.0 * 8.0 * 3.0 * 4096.0 * 768.0;
        assert!((call.flops() - flops).abs() < 1.0);
        // Every expert is touched by 8 192 tokens.
        assert!((call.touched() - 128.0).abs() < 1e-9);
        let eff = 0.505 * 768.0 / (768.0 + 400.0) * 4096.0 / (4096.0 + 1230.0);
        let weights = 128.0 * 3.0 * 4096.0 * 768.0;
        let scatter = 8192.0 * 8.0 * 4096.0 * 2.0;
        let want = 29.9e-6
            + flops / (1979e12 * eff)
            + weights / (4.8e12 * 0.859)
            + 0.927 * scatter / 4.8e12;
        let got = moe_time(&h200, "fp8", "fp8", &call).total();
        assert!((got - want).abs() < 1e-9 * want, "{got} vs {want}");
        // The measured kernel took 2.75 ms; the curve is within its residual.
        assert!((got / 2.75e-3 - 1.0).abs() < 0.15, "{got}");
    }

    /// 4-bit weight-only experts are timed by their own curves: an AWQ MoE call on an
    /// H200 by Hopper's INT4 × 16-bit (Marlin) curve; gpt-oss's MXFP4 experts (16-bit
    /// dense layers, the `mxfp4` method) by its kernels' MXFP4 × 16-bit curve on Hopper
    /// and Blackwell; DeepSeek V4's (MXFP4 experts under FP8 dense layers) by Marlin's on
    /// Hopper and by TRT-LLM's MXFP4 × MXFP8 kernel at the 8-bit peak on a B200; never by
    /// the BF16 or FP4 curves.
    #[test]
    fn weight_only_4_bit_experts_run_on_their_own_curves() {
        let (h200, _) = crate::analysis::catalog::gpu("NVIDIA H200").expect("catalog");
        let (b200, _) = crate::analysis::catalog::gpu("NVIDIA B200").expect("catalog");
        let call = qwen3_moe_at_tp2(256.0, 0.5 + 2.5 / 128.0);
        let b200_fp8 = b200.fp8.expect("B200 has an FP8 rate");
        for (gpu, dense, format, family, kind, peak) in [
            (
                &h200,
                "fp16",
                "awq",
                KernelFamily::Hopper,
                MatmulKind::Int4W16,
                h200.bf16,
            ),
            (
                &h200,
                "bf16",
                "int4",
                KernelFamily::Hopper,
                MatmulKind::Int4W16,
                h200.bf16,
            ),
            (
                &h200,
                "bf16",
                "mxfp4",
                KernelFamily::Hopper,
                MatmulKind::Mxfp4W16,
                h200.bf16,
            ),
            (
                &b200,
                "bf16",
                "mxfp4",
                KernelFamily::Blackwell,
                MatmulKind::Mxfp4W16,
                b200.bf16,
            ),
            (
                &h200,
                "fp8",
                "mxfp4",
                KernelFamily::Hopper,
                MatmulKind::Mxfp4Marlin,
                h200.bf16,
            ),
            (
                &b200,
                "fp8",
                "mxfp4",
                KernelFamily::Blackwell,
                MatmulKind::Mxfp4W8,
                b200_fp8,
            ),
        ] {
            assert_eq!(
                expert_kind(gpu, dense, format),
                (kind, peak),
                "{dense} {format}"
            );
            let own = call_parts(&curve(family, kind), &call, peak, gpu.hbm_bandwidth);
            assert_eq!(moe_time(gpu, dense, format, &call), own, "{dense} {format}");
            assert_ne!(curve(family, kind), curve(family, MatmulKind::Bf16));
            assert_ne!(curve(family, kind), curve(family, MatmulKind::Fp8));
        }
        // FP8 and NVFP4 experts keep their GEMMs' kinds.
        assert_eq!(expert_kind(&b200, "nvfp4", "nvfp4").0, MatmulKind::Fp4);
        assert_eq!(expert_kind(&h200, "fp8", "fp8").0, MatmulKind::Fp8);
    }

    /// The stdlib's MXFP4 models reach their own kernels through their dense layers'
    /// format: gpt-oss (the `mxfp4` method, 16-bit attention) runs TRT-LLM's MXFP4 × BF16
    /// on a B200, DeepSeek V4 Flash (FP8 attention, MXFP4 experts) its MXFP4 × MXFP8.
    #[test]
    fn stdlib_mxfp4_models_take_their_methods_kernels() {
        use crate::program::Component;
        let (b200, _) = crate::analysis::catalog::gpu("NVIDIA B200").expect("catalog");
        for (name, kind) in [
            ("gpt_oss_120b", MatmulKind::Mxfp4W16),
            ("deepseek_v4_flash", MatmulKind::Mxfp4W8),
        ] {
            let m = crate::analysis::catalog::model(name).expect("stdlib");
            let experts = m.format_of(Component::Experts, None);
            assert_eq!(experts, "mxfp4", "{name}");
            let dense = m.format_of(Component::Mixer, None);
            assert_eq!(expert_kind(&b200, dense, experts).0, kind, "{name}");
        }
    }

    /// With EP the pairs of other ranks' experts cost no GEMM or weights, but their
    /// intermediate rows stay.
    #[test]
    fn ep_masks_remote_pairs_but_keeps_their_buffers() {
        let base = MoeCall {
            tokens: 64.0,
            top_k: 8.0,
            experts: 128.0,
            local_experts: 128.0,
            hidden: 4096.0,
            width: 1536.0,
            matrices: 3.0,
            bytes_per_param: 1.0,
        };
        let ep = MoeCall {
            local_experts: 32.0,
            ..base
        };
        assert!((ep.local_pairs() - base.local_pairs() / 4.0).abs() < 1e-9);
        assert!((ep.flops() - base.flops() / 4.0).abs() < 1e-3);
        assert!((ep.weight_bytes() - base.weight_bytes() / 4.0).abs() < 1e-3);
        assert_eq!(ep.scatter_bytes(), base.scatter_bytes());
    }
}
