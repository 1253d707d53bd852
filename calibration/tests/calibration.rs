//! The performance model against public measurements: `calibration/errors.md` is
//! regenerated and must match, the stored constants must be what the fit finds, and the
//! cross-validated errors must stay within stated bounds.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_calibration::fused_moe::{fit_moe_curves, moe_table, parse_moe_table, MeasuredMoe};
use dic_calibration::gemm::{curve, parse_gemm_table, MeasuredGemm, CURVES};
use dic_calibration::kernels::{
    compute_bound_medians, decode_attention_call, decode_attention_calls, fit_gemm_curves,
    fit_link, fit_roofline_exponent, fp8_kv_read_factors, fp8_kv_read_ratios, gemm_table,
    MeasuredTransfer,
};
use dic_calibration::kv_logs::{parse_kv_logs, KvLogRow};
use dic_calibration::silicon::{
    cross_validate, disagg_table, dp_row_ratios, fit_silicon, model_label, parse_disagg,
    parse_silicon, predict_run, resolve_checkpoint, silicon_objective, silicon_table, stats,
    DisaggRow, SiliconRow, SILICON_COLUMNS, START, STORED,
};
use dic_calibration::{error_table, parse_rows, summary, Metric, Row};
use dic_compiler::analysis::activation::{
    activation_peak_with_sampler, SORTING_SAMPLER_FP32_BUFFERS,
};
use dic_compiler::analysis::fused_moe::{curve as moe_curve, CURVES as MOE_CURVES};
use dic_compiler::analysis::gemm::{compute_bound_efficiency, KernelFamily};
use dic_compiler::analysis::memory::memory;
use dic_compiler::analysis::perf::{decode_attention_call_time, fp8_kv_read_factor, FITTED};
use dic_compiler::driver;
use dic_compiler::import_hf;
use dic_compiler::program::Model;
use dic_compiler::source::MemoryWorld;
use std::sync::OnceLock;

/// `../shared` beside the repository, or `None` with a visible message (a user's clone
/// has no `../shared`); under `CI=true` its absence fails the test.
fn shared_dir() -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared");
    if dir.is_dir() {
        Some(dir)
    } else if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "../shared is absent under CI=true: the tests that need its reference data cannot run"
        );
    } else {
        eprintln!("SKIPPED: ../shared is absent; tests that need its reference data did not run");
        None
    }
}

/// A checked file's diagnostics, one per line (code and message), for a failure message.
fn messages(checked: &driver::Checked) -> String {
    checked
        .diagnostics
        .iter()
        .map(|d| format!("{}: {}", d.code.as_str(), d.message))
        .collect::<Vec<_>>()
        .join("\n")
}

fn trtllm_rows() -> Option<Vec<Row>> {
    let shared = shared_dir()?;
    let csv = std::fs::read_to_string(
        shared.join("calibration/trtllm-0.17-throughput-a100-h100-l40s.csv"),
    )
    .expect("csv");
    let (rows, skipped) = parse_rows(&csv);
    assert!(rows.len() >= 300, "{} rows, {skipped} skipped", rows.len());
    Some(rows)
}

/// A checkpoint the stdlib does not define, from its Hugging Face config in
/// ../shared/models/hf (`ORG--NAME_config.json`, and `ORG--NAME_hf_quant_config.json` where
/// the checkpoint has one), imported as `dic import-hf` imports it.
fn hf_config(id: &str) -> Option<Model> {
    let dir = shared_dir()?.join("models/hf");
    import_hf::model_from_flat_configs(id, &|file| std::fs::read_to_string(dir.join(file)).ok())
}

/// The vLLM rows, how many were skipped, and their leave-one-GPU-out and
/// leave-one-model-out errors (computed once: each is one fit per GPU or model).
struct Silicon {
    rows: Vec<SiliconRow>,
    skipped: usize,
    logo: Vec<Option<(f64, f64)>>,
    lomo: Vec<Option<(f64, f64)>>,
    /// The disaggregated rows (compared, never fitted).
    disagg: Vec<DisaggRow>,
}

fn silicon() -> Option<&'static Silicon> {
    static S: OnceLock<Option<Silicon>> = OnceLock::new();
    S.get_or_init(|| {
        let shared = shared_dir()?;
        let csv =
            std::fs::read_to_string(shared.join("calibration/vllm-silicon/vllm-silicon-train.csv"))
                .expect("csv");
        let (rows, skipped) = parse_silicon(&csv, &hf_config);
        let disagg = parse_disagg(&csv, &hf_config);
        assert!(rows.len() >= 350, "{} rows, {skipped} skipped", rows.len());
        assert!(
            disagg.len() >= 3,
            "the training split's 3 disaggregated rows"
        );
        let fit = |train: &[SiliconRow]| fit_silicon(train, START);
        let logo = cross_validate(&rows, |r| r.gpu.clone(), |t| fit(t));
        let lomo = cross_validate(&rows, |r| model_label(r).to_string(), |t| fit(t));
        Some(Silicon {
            rows,
            skipped,
            logo,
            lomo,
            disagg,
        })
    })
    .as_ref()
}

/// Each KV-log row's deployment checked as a `.dist` file: (row, predicted KV tokens).
fn kv_predictions() -> Option<(Vec<(KvLogRow, f64)>, usize)> {
    let shared = shared_dir()?;
    let csv = std::fs::read_to_string(shared.join("calibration/vllm-kv-logs.csv")).expect("csv");
    let (rows, skipped) = parse_kv_logs(&csv);
    assert!(rows.len() >= 12, "{} rows, {skipped} skipped", rows.len());
    let out = rows
        .into_iter()
        .map(|r| {
            let world = MemoryWorld::new().with("kv.dist", &r.deployment());
            let checked = driver::check_file(&world, "kv.dist").unwrap();
            let d = checked
                .deployments
                .first()
                .unwrap_or_else(|| panic!("{}: {}", r.id, messages(&checked)));
            // A row logged with a sampler that sorted the vocabulary is predicted with that
            // sampler's buffers; the rest of the peak is 0.33's, derived.
            let kv = if r.sorting_sampler {
                let mut s = d.scenario.scenario.clone();
                let peak = activation_peak_with_sampler(&s, true, SORTING_SAMPLER_FP32_BUFFERS);
                s.engine.overrides.activation = Some(peak.total());
                memory(&s).kv_cache_tokens as f64
            } else {
                d.analysis.memory.kv_cache_tokens as f64
            };
            (r, kv)
        })
        .collect();
    Some((out, skipped))
}

/// The KV-capacity section of errors.md: every row, then median |error| and bias for all
/// rows and for the recent ones (vLLM V1's accounting), and the largest over-prediction of
/// a fully specified recent row (the unsafe direction).
fn kv_table(rows: &[(KvLogRow, f64)], skipped: usize) -> String {
    let mut t = String::from(
        "## KV-cache capacity against vLLM's own start-up logs (vllm-kv-logs.csv)\n\n\
Predicted `kv_cache_tokens` (memory model, nothing fitted on these rows) against the tokens vLLM \
logged. The activation peak is derived from vLLM 0.33's profile run (`analysis::activation`); every \
row here was logged before vLLM's sort-free top-k/top-p samplers (February 2026), so its sampler \
pass is predicted with the sorting sampler's buffers \
(`activation::SORTING_SAMPLER_FP32_BUFFERS`).\n\
Recent = logged in 2025 or later (vLLM V1); older versions profiled memory differently.\n\
`gmu` 0.9* = not stated in the row (vLLM's default assumed).\n\n\
| row | model | GPU | TP | gmu | recent | full | logged | predicted | error |\n\
|---|---|---|---:|---:|---|---|---:|---:|---:|\n",
    );
    let err = |(r, p): &(KvLogRow, f64)| p / r.kv_tokens - 1.0;
    for x in rows {
        let (r, p) = x;
        let model: String = r.model.chars().take(40).collect();
        t.push_str(&format!(
            "| {} | {} | {} | {} | {}{} | {} | {} | {:.0} | {:.0} | {:+.1}% |\n",
            r.id,
            model.replace('|', "/"),
            r.gpu,
            r.tp,
            r.gmu,
            if r.gmu_stated { "" } else { "*" },
            if r.recent { "yes" } else { "no" },
            if r.full { "yes" } else { "no" },
            r.kv_tokens,
            p,
            100.0 * err(x)
        ));
    }
    let summary = |name: &str, pick: &dyn Fn(&KvLogRow) -> bool| {
        let e: Vec<f64> = rows.iter().filter(|(r, _)| pick(r)).map(err).collect();
        if e.is_empty() {
            return String::new();
        }
        let mut abs: Vec<f64> = e.iter().map(|x| x.abs()).collect();
        abs.sort_by(|a, b| a.total_cmp(b));
        let mut signed = e.clone();
        signed.sort_by(|a, b| a.total_cmp(b));
        let median = |v: &[f64]| {
            let n = v.len();
            if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            }
        };
        format!(
            "| {name} | {} | {:.1}% | {:+.1}% | {:+.1}% |\n",
            e.len(),
            100.0 * median(&abs),
            100.0 * median(&signed),
            100.0 * signed.last().copied().unwrap_or(0.0)
        )
    };
    t.push_str(&format!(
        "\n{skipped} rows skipped (model or GPU not stated or not mapped, TP not stated).\n\n\
| rows | n | median \\|error\\| | median signed | largest over-prediction |\n|---|---:|---:|---:|---:|\n"
    ));
    t.push_str(&summary("all mapped", &|_| true));
    t.push_str(&summary("recent", &|r| r.recent));
    t.push_str(&summary("recent, fully specified", &|r| r.recent && r.full));
    t.push_str(&summary("older (vLLM ≤ 0.5, V0)", &|r| !r.recent));
    t
}

/// The GPUs with kernel tables: directory, catalog name, kernel family.
const KERNEL_GPUS: [(&str, &str, &str); 3] = [
    ("h100_sxm", "NVIDIA H100 80GB HBM3", "hopper"),
    ("h200_sxm", "NVIDIA H200", "hopper"),
    ("b200_sxm", "NVIDIA B200", "blackwell"),
];

/// A kernel table's text (../shared/calibration/kernels/<dir>/<op>.csv.gz, decompressed).
fn kernel_text(shared: &std::path::Path, dir: &str, op: &str) -> String {
    use std::io::Read;
    let mut text = String::new();
    let path = shared.join(format!("calibration/kernels/{dir}/{op}.csv.gz"));
    flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("kernel table"))
        .read_to_string(&mut text)
        .expect("gzip");
    text
}

/// A CSV header's column index by name.
fn column_of(header: &str) -> impl Fn(&str) -> usize + '_ {
    move |name| {
        header
            .split(',')
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    }
}

/// One kernel table per GPU measured: its label, kernel family and parsed rows.
type KernelTables<R> = Vec<(&'static str, KernelFamily, Vec<R>)>;

/// The `op` table of every GPU measured, parsed by `parse`; each must hold more than
/// `min_rows` rows (a truncated or unparsed table fails here, not in a fit).
fn kernel_tables<R>(
    op: &str,
    min_rows: usize,
    parse: impl Fn(&str, &dic_compiler::analysis::GpuSpec) -> Vec<R>,
) -> Option<KernelTables<R>> {
    let shared = shared_dir()?;
    let mut out = Vec::new();
    for (dir, gpu, _) in KERNEL_GPUS {
        let text = kernel_text(&shared, dir, op);
        let (spec, _) = dic_compiler::analysis::catalog::gpu(gpu).expect("catalog");
        let rows = parse(&text, &spec);
        assert!(rows.len() > min_rows, "{dir}/{op}: {} rows", rows.len());
        out.push((dir, KernelFamily::of(spec.architecture.as_deref()), rows));
    }
    Some(out)
}

fn gemm_tables() -> Option<&'static KernelTables<MeasuredGemm>> {
    static T: OnceLock<Option<KernelTables<MeasuredGemm>>> = OnceLock::new();
    T.get_or_init(|| kernel_tables("gemm", 50_000, parse_gemm_table))
        .as_ref()
}

fn moe_tables() -> Option<&'static KernelTables<MeasuredMoe>> {
    static T: OnceLock<Option<KernelTables<MeasuredMoe>>> = OnceLock::new();
    T.get_or_init(|| kernel_tables("moe", 10_000, parse_moe_table))
        .as_ref()
}

/// The stored fused-MoE curves are what the fit on the kernel tables finds.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn fused_moe_curves_are_the_fit() {
    let Some(tables) = moe_tables() else { return };
    let fitted = fit_moe_curves(tables);
    assert_eq!(fitted.len(), MOE_CURVES.len(), "{fitted:#?}");
    for (f, k, c) in &fitted {
        assert_eq!(
            *c,
            moe_curve(*f, *k),
            "{f:?} {k:?}: the fit is {c:?}; store it in fused_moe::CURVES (all: {fitted:#?})"
        );
    }
}

/// The step model's FP8-KV attention read factor per family is the decode-attention
/// tables' median: Hopper's FlashAttention 3 gains little from an 8-bit cache, Blackwell's
/// FlashInfer decode kernel nearly its halved bytes.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn fp8_kv_read_factors_are_the_tables_medians() {
    let Some(tables) = kernel_tables("generation_attention", 1000, |text, _| {
        fp8_kv_read_ratios(text)
    }) else {
        return;
    };
    let by_family: Vec<(KernelFamily, Vec<f64>)> = tables
        .into_iter()
        .map(|(_, family, ratios)| (family, ratios))
        .collect();
    let factors = fp8_kv_read_factors(&by_family);
    assert_eq!(factors.len(), 2, "{factors:?}");
    for (f, m) in factors {
        assert_eq!(
            m,
            fp8_kv_read_factor(f),
            "{f:?}: the tables' median is {m}; store it in perf::FP8_KV_READ_FACTOR"
        );
    }
}

/// The step model's fixed time per decode-attention call, per family and KV format, is the
/// decode-attention tables' (`dic_calibration::kernels::decode_attention_call`, the median
/// of the family's GPUs): about 11 µs a call on Hopper, 9 µs on Blackwell.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn decode_attention_calls_are_the_tables() {
    let Some(shared) = shared_dir() else { return };
    let per_gpu: Vec<(KernelFamily, Option<f64>, Option<f64>)> = KERNEL_GPUS
        .iter()
        .map(|(dir, gpu, _)| {
            let text = kernel_text(&shared, dir, "generation_attention");
            let (spec, _) = dic_compiler::analysis::catalog::gpu(gpu).expect("catalog");
            (
                KernelFamily::of(spec.architecture.as_deref()),
                decode_attention_call(&text, false),
                decode_attention_call(&text, true),
            )
        })
        .collect();
    let calls = decode_attention_calls(&per_gpu);
    assert_eq!(calls.len(), 2, "{calls:?}");
    for (f, sixteen, eight) in calls {
        assert!((5e-6..20e-6).contains(&sixteen) && (5e-6..20e-6).contains(&eight));
        assert_eq!(
            (
                decode_attention_call_time(f, false),
                decode_attention_call_time(f, true)
            ),
            (sixteen, eight),
            "{f:?}: the tables' calls are {sixteen} and {eight} s; store them in \
             perf::DECODE_ATTENTION_CALL"
        );
    }
}

/// The step model's compute-bound GEMM efficiencies per family are the kernel tables'
/// medians.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn compute_bound_efficiencies_are_the_tables_medians() {
    let Some(tables) = gemm_tables() else { return };
    let medians = compute_bound_medians(tables);
    assert_eq!(medians.len(), 5, "{medians:?}");
    for (f, k, m) in medians {
        assert_eq!(
            m,
            compute_bound_efficiency(f, k),
            "{f:?} {k:?}: the tables' median is {m}; store it in gemm::COMPUTE_BOUND_EFFICIENCY"
        );
    }
}

/// The stored roofline exponent is the one the kernel tables choose, and it beats the
/// plain max of compute and memory.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn gemm_roofline_exponent_is_the_fit() {
    let Some(tables) = gemm_tables() else { return };
    let (best, scored) = fit_roofline_exponent(tables);
    assert_eq!(
        best,
        dic_compiler::analysis::gemm::ROOFLINE_EXPONENT,
        "{scored:?}"
    );
    let error_of = |p: f64| scored.iter().find(|s| s.0 == p).map(|s| s.1);
    let (Some(at_best), Some(at_max)) = (error_of(best), error_of(f64::INFINITY)) else {
        panic!("{scored:?}")
    };
    assert!(at_best < at_max - 0.005, "{scored:?}");
}

/// The stored GEMM curves are what the fit on the kernel tables finds.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn gemm_curves_are_the_fit() {
    let Some(tables) = gemm_tables() else { return };
    let fitted = fit_gemm_curves(tables);
    assert_eq!(fitted.len(), CURVES.len(), "{fitted:#?}");
    for (f, k, c) in &fitted {
        assert_eq!(
            *c,
            curve(*f, *k),
            "{f:?} {k:?}: the fit is {c:?}; store it in gemm::CURVES"
        );
    }
}

#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn calibration_table_is_current() {
    let (Some(s), Some(trt), Some((kv, kv_skipped)), Some(gemm), Some(moe)) = (
        silicon(),
        trtllm_rows(),
        kv_predictions(),
        gemm_tables(),
        moe_tables(),
    ) else {
        return;
    };
    let table = format!(
        "# Calibration error table\n\nGenerated by `cargo test --workspace` (test `calibration_table_is_current` in\n\
`calibration/tests/calibration.rs`); rerun with DIC_UPDATE_CALIBRATION=1 to rewrite it.\n\n{}\n{}\n{}",
        silicon_table(&s.rows, s.skipped, &STORED, &s.logo, &s.lomo),
        error_table(&trt, &FITTED),
        kv_table(&kv, kv_skipped)
    );
    let table = format!(
        "{table}\n{}\n## GEMM kernels measured inside vLLM (kernels/<gpu>/gemm.csv.gz)\n\n\
The curves of `dic_calibration::gemm` (fitted per kernel family on shapes with at least \
2²¹ weight elements and at most 16 384 tokens; compute and memory combined as a p-norm whose \
exponent, {}, is fitted here with them), against every such shape of each GPU's table. \
Error = predicted / measured − 1. The step model takes only that exponent (`gemm::roofline`): \
the curves themselves, put in its place, raised the cross-validated end-to-end error above \
(the module's header gives the figures).\n\n{}",
        disagg_table(&s.disagg),
        dic_compiler::analysis::gemm::ROOFLINE_EXPONENT,
        gemm_table(gemm)
    );
    let table = format!(
        "{table}\n## Fused-MoE kernels measured inside vLLM (kernels/<gpu>/moe.csv.gz)\n\n\
The curves of `analysis::fused_moe` (fitted per kernel family and weight kind by \
`dic_calibration::fused_moe::fit_curve`; power-law routing, the fastest backend per shape), \
against every such shape of each GPU's table. The step model times the routed experts with \
them. Error = predicted / measured − 1.\n\n{}",
        moe_table(moe)
    );
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/errors.md");
    if std::env::var("DIC_UPDATE_CALIBRATION").is_ok() {
        std::fs::write(path, &table).unwrap();
    }
    let stored = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        stored == table,
        "calibration/errors.md is stale: rerun with DIC_UPDATE_CALIBRATION=1 and review the diff"
    );
}

/// The KV-capacity goals: median |error| ≤ 5% over every mapped log, the fully specified
/// recent logs (vLLM V1's accounting) within 2% and the others within 4% (their
/// `gpu_memory_utilization` is not stated: 0.01 of it on an H100 is 0.79 GiB, 2.2% of
/// K029's cache), and no fully specified recent log over-predicted by more than 10% (dic
/// would promise concurrency vLLM does not give).
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn kv_capacity_meets_the_goals() {
    let Some((rows, _)) = kv_predictions() else {
        return;
    };
    let err = |(r, p): &(KvLogRow, f64)| p / r.kv_tokens - 1.0;
    let abs: Vec<f64> = rows.iter().map(|x| err(x).abs()).collect();
    assert!(abs.len() >= 10, "{} rows", abs.len());
    let median = dic_calibration::median(abs);
    assert!(median <= 0.05, "median |error| {median}");
    for x in rows.iter().filter(|(r, _)| r.recent) {
        let bound = if x.0.full { 0.02 } else { 0.04 };
        assert!(err(x).abs() < bound, "{}: {:+.3}", x.0.id, err(x));
        if x.0.full {
            assert!(err(x) <= 0.10, "{} over-predicted", x.0.id);
        }
    }
}

#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn calibration_constants_are_the_fit() {
    let Some(s) = silicon() else { return };
    let refit = fit_silicon(&s.rows, START);
    let stored = silicon_objective(&s.rows, &STORED);
    let found = silicon_objective(&s.rows, &refit);
    assert!(
        stored <= found + 1e-3,
        "stored {STORED:?} (objective {stored:.4}) is not the fit {refit:?} (objective {found:.4})"
    );
}

/// The harness reads rows of models and GPUs beyond the training split's, as the held-out
/// rows of the same collection have: every checkpoint in ../shared/models/hf resolves (the
/// stdlib's, or its own config imported), and a row of each of several of them on each
/// GPU the dataset's systems name is modelled — none is lost to a name dic cannot read.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn rows_of_other_models_and_gpus_are_modelled() {
    let Some(shared) = shared_dir() else {
        return;
    };
    let mut ids: Vec<String> = std::fs::read_dir(shared.join("models/hf"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.ends_with("_config.json") && !f.ends_with("_hf_quant_config.json"))
        .filter_map(|f| import_hf::names_from_file(&f).1)
        .collect();
    ids.sort();
    assert!(ids.len() >= 30, "{ids:?}");
    let unresolved: Vec<&String> = ids
        .iter()
        .filter(|id| resolve_checkpoint(id, &hf_config).is_none())
        .collect();
    assert!(unresolved.is_empty(), "{unresolved:?}");
    // A dense model, a MoE model, an MXFP4 MoE and a checkpoint only its config describes,
    // 1024 × 128 at 8 in flight over 8 GPUs of each system.
    let mut csv = SILICON_COLUMNS.join(",");
    let models = [
        "Qwen/Qwen3-8B",
        "Qwen/Qwen3-30B-A3B",
        "openai/gpt-oss-20b",
        "Qwen/Qwen3-32B-FP8",
    ];
    let systems = [
        "h100_sxm",
        "h200_sxm",
        "b200_sxm",
        "gb200_sxm",
        "b300_sxm",
        "a100_sxm",
        "l40s",
        "h20_sxm",
        "rtx_pro_6000_server",
    ];
    for m in models {
        for sys in systems {
            csv.push_str(&format!(
                "\n{m}@{sys},{m},{sys},agg,,,1024,128,8,8,1,,8,1,100,10"
            ));
        }
    }
    let (rows, skipped) = parse_silicon(&csv, &hf_config);
    assert_eq!((rows.len(), skipped), (models.len() * systems.len(), 0));
    let missed: Vec<&str> = rows
        .iter()
        .filter(|r| {
            !predict_run(r, &STORED)
                .is_some_and(|(t, p)| t.is_finite() && p.is_finite() && t > 0.0 && p > 0.0)
        })
        .map(|r| r.id.as_str())
        .collect();
    assert!(missed.is_empty(), "not modelled: {missed:?}");
}

/// Regression bounds on the cross-validated errors, where they stand on the 729-row split
/// (MiniMax-M2.5 joined Qwen3-235B as a second MoE family, on vLLM 0.15–0.19): leaving one
/// GPU out TTFT 16.4% and TPOT 11.2%, leaving one model out 19.6% and 10.4% (issue 37 asks
/// ≤ 20% and ≤ 12% per family; errors.md's per-family table shows which meet it). They
/// keep the model from slipping while its DP-attention terms are rebuilt. Leaving one
/// model out's TPOT bound went from 23% to 11.5% when the MoE terms were re-identified
/// (the fused-MoE curves fitted on the tables' own routing, a mean step's experts as
/// the mean of its decode and chunk calls, no fitted multiple of the kernel: 22.1% →
/// 10.4%); leaving one GPU out's TPOT from 12.5% to 12%. When a sequence's cost per layer
/// was scaled by hidden size ÷ bandwidth (8.4% and 8.3% TPOT, 18.3% TTFT leaving one model
/// out), TPOT's bounds went to 9.5% and leaving one model out's TTFT to 19.5%; with the
/// decode-attention kernel's fixed time per call (7.9% and 7.5% TPOT), to 8.5%. With the
/// DP rows read as measured (`batch_size` per rank where the ranks are implied too, the
/// stated ones as the one engine they ran as: 14.9% and 7.0% leaving one GPU out, 18.6%
/// and 7.0% leaving one model out), to 16% / 7.5% and 19% / 7.5%. With MiniMax-M2.5's
/// rows read with their scripts' flags (15.8% and 7.8% leaving one GPU out, 15.8% and 6.6%
/// leaving one model out), leaving one GPU out's TPOT bound went to 8.5% (it lost 0.8
/// point: with H100 left out, the other GPUs' constants over-predict its TPOT) and
/// leaving one model out's bounds to 17% / 7%.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn cross_validated_errors_are_bounded() {
    let Some(s) = silicon() else { return };
    for (name, e, ttft_bound, tpot_bound) in [
        ("leave one GPU out", &s.logo, 0.16, 0.085),
        ("leave one model out", &s.lomo, 0.17, 0.07),
    ] {
        let ttft = stats(&e.iter().map(|x| x.map(|x| x.0)).collect::<Vec<_>>());
        let tpot = stats(&e.iter().map(|x| x.map(|x| x.1)).collect::<Vec<_>>());
        assert!(ttft.modelled * 100 >= ttft.rows * 95, "{name}: {ttft:?}");
        assert!(ttft.median_abs < ttft_bound, "{name}: TTFT {ttft:?}");
        assert!(tpot.median_abs < tpot_bound, "{name}: TPOT {tpot:?}");
    }
}

/// The reading `silicon::SiliconRow::one_engine` rests on, held on the data: in every
/// group of stated DP rows (GPU, weights, layout), the measured TPOT is 0.8–1.15 of the
/// same model's TP rows of that TP at the whole concurrency (median over the pairs;
/// B200's NVFP4 groups are the lowest, 0.85 and 0.91) and at least 1.2 of them at the
/// concurrency per rank, which ranks sharing the load would each carry. A split whose DP rows did share their load fails it, and the
/// reading must go.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn stated_dp_rows_measure_as_one_engine_of_their_tp() {
    let Some(s) = silicon() else { return };
    let groups = dp_row_ratios(&s.rows);
    assert!(groups.len() >= 4, "{groups:?}");
    let median_tpot = |pairs: &[(f64, f64)]| {
        let mut v: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for g in &groups {
        assert!(!g.whole.is_empty() && !g.per_rank.is_empty(), "{g:?}");
        let (whole, per_rank) = (median_tpot(&g.whole), median_tpot(&g.per_rank));
        assert!(
            (0.8..=1.15).contains(&whole),
            "{} {} {}: {whole}",
            g.gpu,
            g.weights,
            g.layout
        );
        assert!(
            per_rank >= 1.2,
            "{} {} {}: {per_rank}",
            g.gpu,
            g.weights,
            g.layout
        );
    }
}

#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn trtllm_reference_errors_are_bounded() {
    let Some(rows) = trtllm_rows() else { return };
    let (median, _, n) = summary(&rows, &FITTED, Metric::MaxOutputThroughput);
    assert!(n >= 200);
    assert!(
        median < 0.40,
        "median APE of offline throughput {:.1}%",
        median * 100.0
    );
}

/// vLLM's custom all-reduce against its kernel tables: each architecture's stored fixed
/// latency is the median of its GPUs' CUDA-graph runs at ≤ 8 KiB, and the model (that
/// latency plus the ring's bytes over the GPU's NVLink) stays within a median 35% of every
/// measured size it is used for (≤ 8 MiB), per GPU; above 8 MiB (NCCL) the stored
/// `LinkFit` constants are the fit on the tables and stay within a median 15%.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn custom_all_reduce_matches_its_kernel_tables() {
    use dic_compiler::analysis::comm::{
        all_reduce_wire_bytes, custom_all_reduce_latency, nccl_nvlink_all_reduce,
        vllm_all_reduce_time, Placement, CUSTOM_ALL_REDUCE_MAX_BYTES, LINK_EFFICIENCY,
    };
    let Some(shared) = shared_dir() else {
        return;
    };
    use dic_calibration::median;
    let mut small: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut large: std::collections::BTreeMap<&str, Vec<MeasuredTransfer>> = Default::default();
    for (dir, gpu, arch) in KERNEL_GPUS {
        let text = kernel_text(&shared, dir, "allreduce");
        let mut lines = text.lines();
        let col = column_of(lines.next().unwrap());
        let (src, gpus, size, lat) = (
            col("kernel_source"),
            col("num_gpus"),
            col("message_size"),
            col("latency"),
        );
        let (spec, scale_up) = dic_compiler::analysis::catalog::gpu(gpu).unwrap();
        let link = scale_up.unwrap();
        let mut errors = Vec::new();
        let mut large_errors = Vec::new();
        for l in lines {
            let f: Vec<&str> = l.split(',').collect();
            if f[src] != "vLLM_custom_graph" {
                continue;
            }
            let p: u64 = f[gpus].parse().unwrap();
            // message_size counts bf16 elements
            let bytes = f[size].parse::<f64>().unwrap() * 2.0;
            let measured = f[lat].parse::<f64>().unwrap() * 1e-3;
            if bytes <= 8192.0 {
                small.entry(arch).or_default().push(measured);
            }
            let placement = Placement {
                size: p,
                spans_nodes: false,
                within_scale_up_domain: true,
                link_name: link.name.as_str().into(),
                link_type: link.link_type,
                bandwidth: link.bandwidth * LINK_EFFICIENCY,
                latency: link.latency,
            };
            let predicted =
                vllm_all_reduce_time(bytes, p, &placement, spec.architecture.as_deref());
            if bytes > CUSTOM_ALL_REDUCE_MAX_BYTES {
                large.entry(arch).or_default().push(MeasuredTransfer {
                    wire_bytes: all_reduce_wire_bytes(bytes, p),
                    bandwidth: placement.bandwidth,
                    seconds: measured,
                });
                large_errors.push((predicted / measured - 1.0).abs());
            } else {
                errors.push((predicted / measured - 1.0).abs());
            }
        }
        let m = median(errors);
        eprintln!("{dir}: custom all-reduce median |error| {:.1}%", m * 100.0);
        assert!(m < 0.35, "{dir}: median |error| {:.1}%", m * 100.0);
        let m = median(large_errors);
        eprintln!(
            "{dir}: NCCL all-reduce > 8 MiB median |error| {:.1}%",
            m * 100.0
        );
        assert!(m < 0.15, "{dir}: NCCL median |error| {:.1}%", m * 100.0);
    }
    for (arch, rows) in &large {
        let fit = fit_link(rows, 60);
        assert_eq!(
            fit,
            nccl_nvlink_all_reduce(Some(arch)),
            "{arch}: the fit on the tables is {fit:?}"
        );
    }
    for (arch, latencies) in small {
        let m = median(latencies);
        let stored = custom_all_reduce_latency(Some(arch));
        assert!(
            (m - stored).abs() < 1e-9,
            "{arch}: stored {stored:e} s, the tables' median {m:e} s"
        );
    }
}

/// DeepEP's dispatch and combine against their kernel tables: the stored `LinkFit`s are
/// the fit on each architecture's EP-8 rows and stay within a median 20%.
#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn deepep_kernels_match_their_tables() {
    use dic_compiler::analysis::comm::{deepep_fit, LINK_EFFICIENCY};
    let Some(shared) = shared_dir() else {
        return;
    };
    type Key = (&'static str, &'static str, usize);
    let mut rows: std::collections::BTreeMap<Key, Vec<MeasuredTransfer>> = Default::default();
    for (dir, gpu, arch) in KERNEL_GPUS {
        let text = kernel_text(&shared, dir, "moe_a2a");
        let mut lines = text.lines();
        let col = column_of(lines.next().unwrap());
        let (backend, phase, ep, hidden, topk, tokens, lat) = (
            col("comm_backend"),
            col("phase"),
            col("ep_size"),
            col("hidden_size"),
            col("topk"),
            col("num_tokens"),
            col("latency"),
        );
        let (_, scale_up) = dic_compiler::analysis::catalog::gpu(gpu).unwrap();
        let bandwidth = scale_up.unwrap().bandwidth * LINK_EFFICIENCY;
        for l in lines {
            let f: Vec<&str> = l.split(',').collect();
            let name = match f[backend] {
                "deepep_ll" => "deepep_low_latency",
                "deepep_ht" => "deepep_high_throughput",
                _ => continue,
            };
            let num = |i: usize| f[i].parse::<f64>().unwrap();
            let p = num(ep);
            let distinct = p * (1.0 - (1.0 - 1.0 / p).powf(num(topk)));
            rows.entry((arch, name, usize::from(f[phase] == "combine")))
                .or_default()
                .push(MeasuredTransfer {
                    wire_bytes: num(tokens) * distinct * num(hidden) * 2.0 * (p - 1.0) / p,
                    bandwidth,
                    // microseconds
                    seconds: num(lat) * 1e-6,
                });
        }
    }
    assert_eq!(rows.len(), 8, "{:?}", rows.keys().collect::<Vec<_>>());
    for ((arch, backend, phase), rows) in &rows {
        let fit = fit_link(rows, 400);
        let stored = deepep_fit(Some(arch), backend).unwrap()[*phase];
        assert_eq!(
            fit, stored,
            "{arch} {backend} phase {phase}: the fit is {fit:?}"
        );
        let errors: Vec<f64> = rows
            .iter()
            .map(|r| (stored.time(r.wire_bytes, r.bandwidth) / r.seconds - 1.0).abs())
            .collect();
        let m = dic_calibration::median(errors);
        eprintln!(
            "{arch} {backend} phase {phase}: median |error| {:.1}%",
            m * 100.0
        );
        assert!(m < 0.20, "{arch} {backend} {phase}: {:.1}%", m * 100.0);
    }
}
