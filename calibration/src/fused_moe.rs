//! The fused-MoE kernel tables measured inside vLLM (../shared/calibration/kernels/<gpu>/
//! moe.csv.gz): parsing, the fit of `analysis::fused_moe`'s curves per kernel family and
//! weight kind, and their residuals per GPU for `calibration/errors.md`.
//!
//! Each table times vLLM 0.24's fused-MoE backends by shape (tokens, hidden, expert
//! width, top-k, experts, MoE TP and EP), weight format (BF16, block FP8, NVFP4, the
//! weight-only `int4_wo`, and MXFP4: `w4a16_mxfp4` on gpt-oss's kernels and on Marlin, and
//! `w4a8_mxfp4_mxfp8`, each backend a kind of its own, [`table_kind`]) and routing
//! (balanced or power-law skewed). The
//! fit keeps the power-law routing of exponent 1.01 (real routers are skewed; balanced
//! routing runs 5–15% faster) and, per shape, the fastest backend of the format — what a
//! deployment that lets vLLM pick its backend runs — except ModelOpt's per-tensor FP8
//! FlashInfer-CUTLASS path, 3–6× slower than block FP8 on the same shapes and not what
//! dic's FP8 checkpoints load as.
//!
//! The curves are fitted with each table row routed as the table routed it
//! ([`table_routing`]: AIConfigurator's power-law generator, whose timed rank carries the
//! busiest EP group's pairs and touches fewer experts than independent picks: 65 of 128 at
//! 16 tokens × top 8 where independent picks touch 82), and the step model runs them on
//! serving's routing (`MoeCall::touched`, pairs balanced over the ranks). Fitted on
//! independent picks instead, the curves had stood in for the generator's routing: median
//! residual 9.9–13.7% per GPU for BF16 and FP8 against 7.0–9.7% now (p90 31–46% → 22–43%),
//! and small decode calls on B200 1.2–1.4× slow. (On the 390-row split, whose one MoE
//! family ran vLLM 0.12, this reading made MoE prompt chunks faster than 0.12 ran them and
//! was not landed; with MiniMax-M2.5 on 0.16–0.19 beside it, leaving one model out, it is
//! part of the change that took TPOT from 22.1% to 10.4% — `perf::FITTED` gives the
//! figures.)

use crate::silicon::stats;
use dic_compiler::analysis::fused_moe::{
    expert_kind, routed_call_parts, FusedMoeCurve, MoeCall, CURVES,
};
use dic_compiler::analysis::gemm::{KernelFamily, MatmulKind};
use dic_compiler::analysis::scenario::GpuSpec;
use dic_compiler::analysis::weights::weight_bytes;
use std::collections::BTreeMap;

/// One measured call: the kind it ran as, its shape, the GPU's peak for the kind and its
/// HBM bandwidth, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredMoe {
    pub kind: MatmulKind,
    pub call: MoeCall,
    pub peak: f64,
    pub bandwidth: f64,
    pub seconds: f64,
    /// The timed rank's token–expert pairs and the experts they touch under the table's
    /// own routing ([`table_routing`]).
    pub pairs: f64,
    pub touched: f64,
}

impl MeasuredMoe {
    /// The call's time by `curve`, routed as the table routed it.
    pub fn predicted(&self, curve: &FusedMoeCurve) -> f64 {
        routed_call_parts(
            curve,
            &self.call,
            self.pairs,
            self.touched,
            self.peak,
            self.bandwidth,
        )
        .total()
    }
}

/// Draws of the tables' routing averaged in [`table_routing`].
const ROUTING_DRAWS: u64 = 64;

/// The timed rank's token–expert pairs and touched experts under the kernel tables' power-law
/// routing of exponent 1.01, averaged over [`ROUTING_DRAWS`] seeded draws. AIConfigurator's
/// `_generate_power_law_distribution` (collector/helper.py, aiconfigurator 0.12): each
/// expert's load is drawn from a power law on [1, 0.8 × tokens] (on [0.01, 2] when
/// tokens × top-k ≤ experts), scaled to tokens × top-k pairs and rounded, capped at one pair
/// per token, the rounding's remainder added one pair at a time to each EP rank's least
/// loaded expert (or taken from its most loaded), and the EP rank with the most pairs is
/// the one timed. Skewed so, 16 tokens × top 8 touch 57 of 128 experts where independent
/// picks touch 82.
pub fn table_routing(tokens: f64, experts: f64, top_k: f64, ep: f64) -> (f64, f64) {
    let (n, e) = (tokens.max(1.0) as i64, experts.max(1.0) as usize);
    let ep = (ep.max(1.0) as usize).clamp(1, e);
    let per_rank = e / ep;
    let target = n * top_k.max(1.0) as i64;
    let alpha: f64 = 1.01;
    let (lo, hi): (f64, f64) = if target as usize > e {
        (1.0, 0.8 * n as f64)
    } else {
        (0.01, 2.0)
    };
    let (a, b) = (lo.powf(1.0 - alpha), hi.max(lo).powf(1.0 - alpha));
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut uniform = || {
        // xorshift64*: deterministic, enough for an average over draws.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    };
    let (mut pairs, mut touched) = (0.0, 0.0);
    for _ in 0..ROUTING_DRAWS {
        let loads: Vec<f64> = (0..e)
            .map(|_| ((b - a) * uniform() + a).powf(1.0 / (1.0 - alpha)))
            .collect();
        let total: f64 = loads.iter().sum();
        let mut counts: Vec<i64> = loads
            .iter()
            .map(|l| ((l / total * target as f64).round() as i64).min(n))
            .collect();
        let mut delta = target - counts.iter().sum::<i64>();
        while delta != 0 {
            let before = delta;
            for rank in counts.chunks_mut(per_rank.max(1)) {
                if delta == 0 {
                    break;
                }
                let pick = if delta > 0 {
                    rank.iter_mut().filter(|c| **c < n).min_by_key(|c| **c)
                } else {
                    rank.iter_mut().filter(|c| **c > 0).max_by_key(|c| **c)
                };
                if let Some(c) = pick {
                    *c += delta.signum();
                    delta -= delta.signum();
                }
            }
            if delta == before {
                break;
            }
        }
        let busiest = counts
            .chunks(per_rank.max(1))
            .max_by_key(|rank| rank.iter().sum::<i64>())
            .unwrap_or(&[]);
        pairs += busiest.iter().sum::<i64>() as f64;
        touched += busiest.iter().filter(|c| **c > 0).count() as f64;
    }
    (pairs / ROUTING_DRAWS as f64, touched / ROUTING_DRAWS as f64)
}

/// The kind a table row's backend times, the tensor peak its GEMMs run at and its weight
/// bytes per parameter, from the row's `moe_dtype` and `kernel_source`; `None` for a
/// format the step model does not run. The MXFP4 rows are told apart by backend, as vLLM's
/// oracle runs them (`analysis::fused_moe::expert_kind`): gpt-oss's kernels (OpenAI's
/// Triton, FlashInfer's TRT-LLM MXFP4 × BF16), Marlin (the compressed-tensors W4A4 MXFP4
/// rows, weight-only) and TRT-LLM's MXFP4 × MXFP8 kernel at the 8-bit peak.
fn table_kind(gpu: &GpuSpec, dtype: Option<&str>, source: &str) -> Option<(MatmulKind, f64, f64)> {
    let mxfp4 = weight_bytes("mxfp4");
    Some(match dtype? {
        "bfloat16" => (expert_kind(gpu, "bf16", "bf16").0, gpu.bf16, 2.0),
        "fp8_block" | "fp8" => {
            let (kind, peak) = expert_kind(gpu, "fp8", "fp8");
            (kind, peak, 1.0)
        }
        // 4-bit values with one FP8 scale per 16.
        "nvfp4" => {
            let (kind, peak) = expert_kind(gpu, "nvfp4", "nvfp4");
            (kind, peak, 0.5 + 1.0 / 16.0)
        }
        // Weight-only 4-bit experts × 16-bit activations: symmetric INT4 (Marlin, one
        // 16-bit scale per 128) and MXFP4 (one 8-bit scale per 32).
        "int4_wo" => (MatmulKind::Int4W16, gpu.bf16, weight_bytes("int4")),
        "w4a16_mxfp4" if source.contains("gptoss") => (MatmulKind::Mxfp4W16, gpu.bf16, mxfp4),
        "w4a16_mxfp4" => (MatmulKind::Mxfp4Marlin, gpu.bf16, mxfp4),
        "w4a8_mxfp4_mxfp8" => (MatmulKind::Mxfp4W8, gpu.fp8?, mxfp4),
        _ => return None,
    })
}

/// Parses a `moe.csv.gz` table (decompressed) into the fastest measured call per shape
/// on `gpu` (see the module header for what is kept).
pub fn parse_moe_table(csv: &str, gpu: &GpuSpec) -> Vec<MeasuredMoe> {
    let mut lines = csv.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let header: Vec<&str> = header.split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n);
    let cols = [
        "kernel_source",
        "moe_dtype",
        "num_tokens",
        "hidden_size",
        "inter_size",
        "topk",
        "num_experts",
        "moe_tp_size",
        "moe_ep_size",
        "distribution",
        "latency",
    ]
    .map(col);
    let Some([src, dt, tok, hid, inter, topk, experts, mtp, mep, dist, lat]) = cols
        .iter()
        .copied()
        .collect::<Option<Vec<usize>>>()
        .and_then(|v| <[usize; 11]>::try_from(v).ok())
    else {
        return Vec::new();
    };
    // Shape (as integers) → fastest seconds and the measured call.
    let mut best: BTreeMap<(u8, [u64; 7]), MeasuredMoe> = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f.get(dist) != Some(&"power_law_1.01")
            || f.get(src)
                .is_some_and(|s| s.starts_with("vllm_modeloptfp8"))
        {
            continue;
        }
        let Some((kind, peak, bytes_per_param)) =
            table_kind(gpu, f.get(dt).copied(), f.get(src).copied().unwrap_or(""))
        else {
            continue;
        };
        let int = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        let (Some(t), Some(h), Some(w), Some(k), Some(e), Some(tp), Some(ep)) = (
            int(tok),
            int(hid),
            int(inter),
            int(topk),
            int(experts),
            int(mtp),
            int(mep),
        ) else {
            continue;
        };
        let Some(ms) = f.get(lat).and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        let (tp, ep) = (tp.max(1), ep.max(1));
        let measured = MeasuredMoe {
            kind,
            call: MoeCall {
                tokens: t as f64,
                top_k: k as f64,
                experts: e as f64,
                local_experts: e as f64 / ep as f64,
                hidden: h as f64,
                width: w as f64 / tp as f64,
                matrices: 3.0,
                bytes_per_param,
            },
            peak,
            bandwidth: gpu.hbm_bandwidth,
            seconds: ms * 1e-3,
            pairs: 0.0,
            touched: 0.0,
        };
        let key = (kind as u8, [t, h, w, k, e, tp, ep]);
        match best.get(&key) {
            Some(b) if b.seconds <= measured.seconds => {}
            _ => {
                best.insert(key, measured);
            }
        }
    }
    let mut routing: BTreeMap<[u64; 4], (f64, f64)> = BTreeMap::new();
    best.into_values()
        .map(|mut m| {
            let c = &m.call;
            let key = [c.tokens, c.experts, c.top_k, c.experts / c.local_experts].map(|x| x as u64);
            let (pairs, touched) = *routing.entry(key).or_insert_with(|| {
                table_routing(c.tokens, c.experts, c.top_k, c.experts / c.local_experts)
            });
            m.pairs = pairs;
            m.touched = touched;
            m
        })
        .collect()
}

/// Mean |log(predicted / measured)| of a curve over rows.
pub fn curve_objective(c: &FusedMoeCurve, rows: &[MeasuredMoe]) -> f64 {
    let sum: f64 = rows
        .iter()
        .map(|r| (r.predicted(c) / r.seconds).ln().abs())
        .sum();
    sum / rows.len().max(1) as f64
}

/// `x` to three significant digits (the stored curves' precision).
fn three_digits(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(2 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// Fits a curve to rows of one family and kind: coordinate descent multiplying one
/// constant at a time by a factor that shrinks from 2 to 1.01 (values at 0 move from a
/// floor), from round starting values; deterministic. Rounded to three digits.
pub fn fit_curve(rows: &[MeasuredMoe]) -> FusedMoeCurve {
    let get = |c: &FusedMoeCurve, i: usize| match i {
        0 => c.compute,
        1 => c.memory,
        2 => c.launch,
        3 => c.width_half,
        4 => c.scatter,
        _ => c.hidden_half,
    };
    let set = |c: &mut FusedMoeCurve, i: usize, v: f64| match i {
        0 => c.compute = v.clamp(0.02, 1.0),
        1 => c.memory = v.clamp(0.05, 1.0),
        2 => c.launch = v.clamp(0.0, 1e-3),
        3 => c.width_half = v.clamp(0.0, 1e5),
        4 => c.scatter = v.clamp(0.0, 100.0),
        _ => c.hidden_half = v.clamp(0.0, 1e5),
    };
    let floor = [0.02, 0.05, 1e-6, 1.0, 0.01, 1.0];
    let start = FusedMoeCurve {
        compute: 0.5,
        width_half: 100.0,
        hidden_half: 1000.0,
        memory: 0.8,
        launch: 20e-6,
        scatter: 1.0,
    };
    let best = crate::coordinate_descent(
        start,
        &floor,
        get,
        set,
        |c| curve_objective(c, rows),
        1.01,
        1e-9,
    );
    FusedMoeCurve {
        compute: three_digits(best.compute),
        width_half: three_digits(best.width_half),
        hidden_half: three_digits(best.hidden_half),
        memory: three_digits(best.memory),
        launch: three_digits(best.launch),
        scatter: three_digits(best.scatter),
    }
}

/// A GPU's fused-MoE table: its label, its kernel family and its rows.
pub type MoeTable<'a> = (&'a str, KernelFamily, Vec<MeasuredMoe>);

/// The fitted curve of each family and kind from the GPUs' tables.
pub fn fit_moe_curves(tables: &[MoeTable]) -> Vec<(KernelFamily, MatmulKind, FusedMoeCurve)> {
    let mut by: BTreeMap<(KernelFamily, MatmulKind), Vec<MeasuredMoe>> = BTreeMap::new();
    for (_, family, rows) in tables {
        for r in rows {
            by.entry((*family, r.kind)).or_default().push(*r);
        }
    }
    by.into_iter()
        .map(|((f, k), rows)| (f, k, fit_curve(&rows)))
        .collect()
}

/// The residual table: per GPU and kind, median and p90 |error| and the signed bias of
/// the stored curves, over all calls and over prompt-sized calls (≥ 32 tokens per expert).
pub fn moe_table(tables: &[MoeTable]) -> String {
    let mut out = String::from(
        "| GPU | kernel | shapes | median \\|error\\| | p90 \\|error\\| | bias | ≥ 32 tokens per expert: median \\|error\\| | bias |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (gpu, family, rows) in tables {
        for kind in [
            MatmulKind::Bf16,
            MatmulKind::Fp8,
            MatmulKind::Fp4,
            MatmulKind::Int4W16,
            MatmulKind::Mxfp4W16,
            MatmulKind::Mxfp4Marlin,
            MatmulKind::Mxfp4W8,
        ] {
            let Some((_, _, c)) = CURVES.iter().find(|(f, k, _)| f == family && *k == kind) else {
                continue;
            };
            let errors: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.kind == kind)
                .map(|r| {
                    let per_expert = r.call.tokens * r.call.top_k / r.call.experts;
                    (r.predicted(c) / r.seconds - 1.0, per_expert)
                })
                .collect();
            if errors.is_empty() {
                continue;
            }
            let all: Vec<Option<f64>> = errors.iter().map(|e| Some(e.0)).collect();
            let big: Vec<Option<f64>> = errors
                .iter()
                .filter(|e| e.1 >= 32.0)
                .map(|e| Some(e.0))
                .collect();
            let (a, b) = (stats(&all), stats(&big));
            out.push_str(&format!(
                "| {gpu} | {kind:?} | {} | {:.1}% | {:.1}% | {:+.1}% | {:.1}% | {:+.1}% |\n",
                a.rows,
                a.median_abs * 100.0,
                a.p90_abs * 100.0,
                a.bias * 100.0,
                b.median_abs * 100.0,
                b.bias * 100.0,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dic_compiler::analysis::fused_moe::call_time;

    fn gpu() -> GpuSpec {
        dic_compiler::analysis::catalog::gpu("NVIDIA H200")
            .expect("catalog")
            .0
    }

    /// The one parsed row of `kind`.
    fn of_kind(rows: &[MeasuredMoe], kind: MatmulKind) -> &MeasuredMoe {
        rows.iter()
            .find(|r| r.kind == kind)
            .unwrap_or_else(|| panic!("no {kind:?} row in {rows:?}"))
    }

    #[test]
    fn the_fastest_backend_of_each_shape_is_kept_and_per_tensor_fp8_is_not() {
        let csv = "version,op_name,kernel_source,moe_dtype,num_tokens,hidden_size,inter_size,topk,num_experts,moe_tp_size,moe_ep_size,distribution,latency\n\
0.24.0,moe,vllm_fp8moe_triton_tritonexperts,fp8_block,64,4096,1536,8,128,2,1,power_law_1.01,0.40\n\
0.24.0,moe,vllm_fp8moe_flashinfer_cutlass_flashinferexperts,fp8_block,64,4096,1536,8,128,2,1,power_law_1.01,0.30\n\
0.24.0,moe,vllm_modeloptfp8moe_flashinfer_cutlass_flashinferexperts,fp8,64,4096,1536,8,128,2,1,power_law_1.01,0.10\n\
0.24.0,moe,vllm_fp8moe_triton_tritonexperts,fp8_block,64,4096,1536,8,128,2,1,balanced,0.20\n\
0.24.0,moe,vllm_unquantizedfusedmoe_triton_tritonexperts,bfloat16,64,4096,1536,8,128,1,4,power_law_1.01,0.50\n";
        let rows = parse_moe_table(csv, &gpu());
        assert_eq!(rows.len(), 2, "{rows:?}");
        let bf16 = of_kind(&rows, MatmulKind::Bf16);
        assert_eq!(bf16.call.local_experts, 32.0);
        assert_eq!(bf16.call.width, 1536.0);
        assert_eq!(bf16.call.bytes_per_param, 2.0);
        let fp8 = of_kind(&rows, MatmulKind::Fp8);
        assert!((fp8.seconds - 0.30e-3).abs() < 1e-15);
        assert_eq!(fp8.call.width, 768.0);
        assert_eq!(fp8.call.local_experts, 128.0);
    }

    /// The 4-bit rows are kept, each backend under its own kind with its own bytes per
    /// weight: Marlin's INT4 and MXFP4 at the 16-bit peak, gpt-oss's MXFP4 kernel at the
    /// 16-bit peak, and TRT-LLM's MXFP4 × MXFP8 at the 8-bit one.
    #[test]
    fn weight_only_4_bit_rows_are_fitted_under_their_own_kinds() {
        let csv = "version,op_name,kernel_source,moe_dtype,num_tokens,hidden_size,inter_size,topk,num_experts,moe_tp_size,moe_ep_size,distribution,latency\n\
0.24.0,moe,vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts,int4_wo,64,4096,1536,8,128,1,1,power_law_1.01,0.40\n\
0.24.0,moe,vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts,w4a16_mxfp4,64,4096,1536,8,128,1,1,power_law_1.01,0.35\n\
0.24.0,moe,vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic,w4a16_mxfp4,64,4096,1536,8,128,1,1,power_law_1.01,0.30\n\
0.24.0,moe,vllm_mxfp4moe_flashinfer_trtllm_mxfp4_mxfp8_trtllmmxfp4expertsmodular,w4a8_mxfp4_mxfp8,64,4096,1536,8,128,1,1,power_law_1.01,0.10\n";
        let g = gpu();
        let rows = parse_moe_table(csv, &g);
        assert_eq!(rows.len(), 4, "{rows:?}");
        let int4 = of_kind(&rows, MatmulKind::Int4W16);
        assert_eq!(int4.call.bytes_per_param, 0.5 + 2.0 / 128.0);
        assert_eq!(int4.peak, g.bf16);
        let mxfp4_bytes = 0.5 + 1.0 / 32.0;
        for (kind, seconds, peak) in [
            (MatmulKind::Mxfp4Marlin, 0.35e-3, g.bf16),
            (MatmulKind::Mxfp4W16, 0.30e-3, g.bf16),
            (
                MatmulKind::Mxfp4W8,
                0.10e-3,
                g.fp8.expect("H200 has an FP8 rate"),
            ),
        ] {
            let row = of_kind(&rows, kind);
            assert_eq!(row.call.bytes_per_param, mxfp4_bytes, "{kind:?}");
            assert!((row.seconds - seconds).abs() < 1e-15, "{kind:?}");
            assert_eq!(row.peak, peak, "{kind:?}");
        }
    }

    /// The tables' power-law routing: every pair placed, fewer experts touched than
    /// independent picks touch (16 tokens × top 8 of 128: about 65 against 82), and under
    /// EP the timed rank the busiest, above its even share of the pairs.
    #[test]
    fn the_tables_routing_touches_fewer_experts_and_times_the_busiest_rank() {
        let (pairs, touched) = table_routing(16.0, 128.0, 8.0, 1.0);
        assert_eq!(pairs, 128.0);
        // Independent picks: each expert missed by all 16 tokens with (1 − 8/128)^16.
        let independent = 128.0 * (1.0 - (1.0 - 8.0 / 128.0_f64).powi(16));
        assert!((81.0..83.0).contains(&independent), "{independent}");
        assert!((55.0..75.0).contains(&touched), "{touched}");
        let (pairs, touched) = table_routing(64.0, 128.0, 8.0, 4.0);
        assert!(pairs > 64.0 * 8.0 / 4.0, "{pairs}");
        assert!(touched <= 32.0, "{touched}");
    }

    #[test]
    fn the_fit_recovers_a_curve_that_generated_the_rows() {
        let truth = FusedMoeCurve {
            compute: 0.4,
            width_half: 200.0,
            hidden_half: 1000.0,
            memory: 0.9,
            launch: 30e-6,
            scatter: 2.0,
        };
        let mut rows = Vec::new();
        for tokens in [1.0, 16.0, 256.0, 4096.0, 16384.0] {
            for (hidden, width) in [(2048.0, 256.0), (4096.0, 768.0), (7168.0, 2048.0)] {
                for local_experts in [128.0, 16.0] {
                    let call = MoeCall {
                        tokens,
                        top_k: 8.0,
                        experts: 128.0,
                        local_experts,
                        hidden,
                        width,
                        matrices: 3.0,
                        bytes_per_param: 1.0,
                    };
                    rows.push(MeasuredMoe {
                        kind: MatmulKind::Fp8,
                        call,
                        peak: 2e15,
                        bandwidth: 5e12,
                        seconds: call_time(&truth, &call, 2e15, 5e12),
                        pairs: call.local_pairs(),
                        touched: call.touched(),
                    });
                }
            }
        }
        let fit = fit_curve(&rows);
        assert!(curve_objective(&fit, &rows) < 0.02, "{fit:?}");
    }
}
