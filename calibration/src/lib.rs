//! Calibration of dic's performance model on public measurements: its own crate, beside
//! the compiler core and depending on it. The core keeps only what it needs at run time,
//! the fitted constants and kernel-table fits as data (`perf::FITTED`,
//! `perf::FP8_KV_READ_FACTOR`, the curves of `analysis::gemm` and `analysis::fused_moe`,
//! the `comm::LinkFit`s); this crate parses the measurements, fits those constants,
//! cross-validates them, and writes the error table `calibration/errors.md`
//! (`tests/calibration.rs` regenerates it and checks that the stored constants are what
//! the fit finds; `examples/fit.rs` re-runs the fit).
//!
//! Pure: CSV text in, rows, predictions, errors and fitted constants out. [`silicon`]
//! holds vLLM measured end to end, on which `dic_compiler::analysis::perf::FITTED` is
//! fitted and cross-validated. This module
//! reads TensorRT-LLM 0.17's published tables
//! (../shared/calibration/trtllm-0.17-throughput-a100-h100-l40s.csv), a different engine
//! on older GPUs (A100, L40S): dic reports its error there with the vLLM constants, as a
//! reference, and does not fit on it. Every row is mapped to a scenario from its own
//! columns — model, GPU (by its `nvidia-smi` name), TP, precision, lengths, load — with the
//! engine limits TensorRT-LLM's benchmark used; no row is special-cased.

use dic_compiler::analysis::catalog;
use dic_compiler::analysis::memory::memory;
use dic_compiler::analysis::perf::{max_throughput, predict, PerfConstants};
use dic_compiler::analysis::scenario::*;
use dic_compiler::program::Layout;

pub mod fused_moe;
pub mod gemm;
pub mod kernels;
pub mod kv_logs;
pub mod silicon;

/// What a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Offline max throughput, output tokens/s over all GPUs.
    MaxOutputThroughput,
    /// Online serving at a request rate: mean TTFT (s).
    MeanTtft,
    /// Online serving: mean inter-token latency (s).
    MeanItl,
    /// Online serving: output tokens/s.
    OnlineOutputThroughput,
}

#[derive(Debug, Clone)]
pub struct Row {
    pub id: String,
    pub model: String,
    pub gpu: String,
    pub tp: u64,
    pub precision: String,
    pub isl: f64,
    pub osl: f64,
    /// Requests per second; infinite for "send everything at once".
    pub rate: Option<f64>,
    pub num_requests: f64,
    pub metric: Metric,
    /// In base units (tokens/s, seconds).
    pub value: f64,
}

/// Minimal CSV parsing (quoted fields with doubled quotes), enough for this file.
pub(crate) fn split_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => row.push(std::mem::take(&mut field)),
            ('\n', false) => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            ('\r', false) => {}
            (c, _) => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

/// Parses the rows dic can model; returns them and how many were skipped.
pub fn parse_rows(csv: &str) -> (Vec<Row>, usize) {
    let table = split_csv(csv);
    let Some(header) = table.first() else {
        return (Vec::new(), 0);
    };
    let col = |name: &str| header.iter().position(|h| h == name);
    let (
        Some(id),
        Some(model),
        Some(gpu),
        Some(tp),
        Some(prec),
        Some(isl),
        Some(osl),
        Some(rate),
        Some(nreq),
        Some(scenario),
        Some(metric),
        Some(value),
    ) = (
        col("id"),
        col("model"),
        col("gpu"),
        col("tp"),
        col("weight_precision"),
        col("isl"),
        col("osl"),
        col("request_rate"),
        col("num_requests"),
        col("scenario"),
        col("metric"),
        col("value"),
    )
    else {
        return (Vec::new(), table.len().saturating_sub(1));
    };
    let mut out = Vec::new();
    let mut skipped = 0;
    for r in table.iter().skip(1) {
        if r.len() < header.len() {
            skipped += 1;
            continue;
        }
        let num = |i: usize| r[i].trim().parse::<f64>().ok();
        let online = r[scenario].contains("online");
        let m = &r[metric];
        let (metric_kind, scale) = if !online && m.starts_with("output token throughput") {
            (Metric::MaxOutputThroughput, 1.0)
        } else if online && m == "mean TTFT" {
            (Metric::MeanTtft, 1e-3)
        } else if online && m.starts_with("mean ITL") {
            (Metric::MeanItl, 1e-3)
        } else if online && m == "output token throughput" {
            (Metric::OnlineOutputThroughput, 1.0)
        } else {
            skipped += 1;
            continue;
        };
        let (Some(tpv), Some(i), Some(o), Some(v)) = (num(tp), num(isl), num(osl), num(value))
        else {
            skipped += 1;
            continue;
        };
        let rate_v = if online {
            if r[rate].trim() == "inf" {
                Some(f64::INFINITY)
            } else {
                num(rate)
            }
        } else {
            None
        };
        out.push(Row {
            id: r[id].clone(),
            model: r[model].clone(),
            gpu: r[gpu].clone(),
            tp: tpv as u64,
            precision: r[prec].clone(),
            isl: i,
            osl: o,
            rate: rate_v,
            num_requests: num(nreq).unwrap_or(500.0),
            metric: metric_kind,
            value: v * scale,
        });
    }
    (out, skipped)
}

/// The stdlib model a row's `model` column names.
fn stdlib_model(name: &str) -> Option<&'static str> {
    Some(match name {
        "Llama-3.1-8B" => "llama_3_1_8b",
        "Llama-3.1-70B" => "llama_3_1_70b",
        "Llama-3.1-405B" => "llama_3_1_405b",
        "Mistral-7B" => "mistral_7b",
        "Mixtral-8x7B" => "mixtral_8x7b",
        "Mixtral-8x22B" => "mixtral_8x22b",
        _ => return None,
    })
}

/// TensorRT-LLM benchmark limits (trtllm-bench defaults: max batch 2048 sequences,
/// 8192 tokens per step) and its KV fraction of 0.95 of free memory ("in majority of
/// cases", per the table's notes).
const TRTLLM_MAX_BATCH: u64 = 2048;
const TRTLLM_MAX_TOKENS: f64 = 8192.0;
const TRTLLM_MEMORY_FRACTION: f64 = 0.95;

/// The scenario a row describes: its model and GPU from the stdlib, TP = GPUs on one node
/// with the GPU's own scale-up link.
pub fn scenario(row: &Row) -> Option<Scenario> {
    let model_name = stdlib_model(&row.model)?;
    let mut model = catalog::model(model_name)?;
    let (gpu, scale_up) = catalog::gpu(&row.gpu)?;
    if row.precision.eq_ignore_ascii_case("fp8") {
        model.weights = "fp8".into();
        model.kv_cache = "fp8".into();
    } else if row.precision.eq_ignore_ascii_case("fp16") {
        model.weights = "fp16".into();
        model.dtype = "fp16".into();
    }
    let topology = Topology {
        gpus_per_node: row.tp.max(1),
        nodes: 1,
        scale_up_domain: row.tp.max(1),
        scale_up,
        scale_out: None,
        price_per_node_hour: None,
        cpu_memory: None,
        gpu,
    };
    let max_len = (row.isl + row.osl) as u64;
    let engine = EngineSettings {
        gpu_memory_utilization: TRTLLM_MEMORY_FRACTION,
        max_model_len: max_len,
        max_num_seqs: TRTLLM_MAX_BATCH,
        max_num_batched_tokens: TRTLLM_MAX_TOKENS as u64,
        block_size: 32,
        enforce_eager: false,
        cudagraph_mode: dic_compiler::analysis::scenario::CudaGraphMode::default(),
        // TensorRT-LLM's XQA decode kernels, not vLLM's measured ones.
        vllm_attention: false,
        kv_cache_memory: None,
        cpu_offload: 0.0,
        enable_prefix_caching: None,
        port: dic_compiler::analysis::scenario::vllm_defaults::PORT,
        ray: false,
        all2all_backend: None,
        dbo: false,
        overrides: MemoryOverrides::default(),
        speculative: None,
        calibration: Default::default(),
        batch: Default::default(),
        kv_offload: 0.0,
        kv_offload_lmcache: false,
        lora: None,
        pod_memory: None,
        extra_args: Vec::new(),
        env: Vec::new(),
    };
    let workload = row.rate.map(|r| {
        WorkloadSpec::new(
            row.isl,
            row.osl,
            Load::Rate(if r.is_finite() { r } else { 1e6 }),
            Some(row.num_requests),
        )
    });
    Some(Scenario {
        model_name: model_name.to_string(),
        model,
        topology,
        layout: Layout {
            tp: row.tp.max(1),
            ..Layout::default()
        },
        engine,
        workload,
    })
}

/// The model's value for a row, in the row's units; `None` when the row's setup does not
/// fit in memory by dic's model (reported as a miss, not skipped).
pub fn predict_row(row: &Row, c: &PerfConstants) -> Option<f64> {
    let s = scenario(row)?;
    let mem = memory(&s);
    if mem.kv_cache_tokens < s.engine.max_model_len {
        return None;
    }
    match row.metric {
        Metric::MaxOutputThroughput => Some(max_throughput(&s, &mem, row.isl, row.osl, c).0),
        _ => {
            let p = predict(&s, &mem, c);
            Some(match row.metric {
                Metric::MeanTtft => p.ttft,
                Metric::MeanItl => p.tpot,
                _ => p.output_tokens_per_s,
            })
        }
    }
}

/// |prediction − measurement| / measurement, per row (`None`: the row could not be modelled).
pub fn errors(rows: &[Row], c: &PerfConstants) -> Vec<(usize, Option<f64>, Option<f64>)> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let p = predict_row(r, c);
            (i, p, p.map(|p| (p - r.value).abs() / r.value))
        })
        .collect()
}

/// Multiplicative coordinate descent, deterministic from `start`: each round tries every
/// parameter `i` (read by `get`, written clamped by `set`) multiplied and divided by
/// `factor`, keeps a change that lowers `objective` by more than `tolerance`, and when a
/// round changes nothing shrinks the factor (its square root) from 2 until it is at most
/// `stop`. A parameter at 0 moves from its `floors[i]`. The fits of the end-to-end
/// constants and of the kernel curves share it.
pub fn coordinate_descent<T: Copy>(
    start: T,
    floors: &[f64],
    get: impl Fn(&T, usize) -> f64,
    set: impl Fn(&mut T, usize, f64),
    objective: impl Fn(&T) -> f64,
    stop: f64,
    tolerance: f64,
) -> T {
    let mut best = start;
    let mut best_o = objective(&best);
    let mut factor: f64 = 2.0;
    while factor > stop {
        let mut improved = false;
        for (i, lowest) in floors.iter().enumerate() {
            for up in [true, false] {
                let mut x = best;
                let v = get(&x, i).max(*lowest);
                set(&mut x, i, if up { v * factor } else { v / factor });
                let o = objective(&x);
                if o < best_o - tolerance {
                    best = x;
                    best_o = o;
                    improved = true;
                }
            }
        }
        if !improved {
            factor = factor.sqrt();
        }
    }
    best
}

/// The median (NaN for no values).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The error table (Markdown): a summary per metric, then every row.
pub fn error_table(rows: &[Row], c: &PerfConstants) -> String {
    let errs = errors(rows, c);
    let mut out = String::new();
    out.push_str("## Reference: TensorRT-LLM 0.17's published tables\n\n");
    out.push_str("../shared/calibration/trtllm-0.17-throughput-a100-h100-l40s.csv, predicted with the vLLM\nconstants above (not fitted here: a different, usually faster engine, on A100, H100 and L40S).\n\n");
    out.push_str("Absolute percentage error |predicted − measured| / measured. A row dic's memory model says\ncannot run counts as a miss.\n\n");
    out.push_str("| metric | rows | modelled | median APE | worst APE |\n|---|---|---|---|---|\n");
    for (metric, name) in [
        (Metric::MaxOutputThroughput, "offline max output throughput"),
        (Metric::OnlineOutputThroughput, "online output throughput"),
        (Metric::MeanTtft, "online mean TTFT"),
        (Metric::MeanItl, "online mean ITL (TPOT)"),
    ] {
        let total = rows.iter().filter(|r| r.metric == metric).count();
        let (med, worst, modelled) = summary(rows, c, metric);
        out.push_str(&format!(
            "| {name} | {total} | {modelled} | {:.1}% | {:.1}% |\n",
            med * 100.0,
            worst * 100.0
        ));
    }
    out.push_str("\n| id | model | GPU | TP | precision | ISL/OSL | rate | metric | measured | predicted | APE |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (i, p, e) in &errs {
        let r = &rows[*i];
        let (unit, scale) = match r.metric {
            Metric::MeanTtft | Metric::MeanItl => ("ms", 1e3),
            _ => ("tok/s", 1.0),
        };
        let metric = match r.metric {
            Metric::MaxOutputThroughput => "max throughput",
            Metric::OnlineOutputThroughput => "throughput",
            Metric::MeanTtft => "mean TTFT",
            Metric::MeanItl => "mean ITL",
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.0}/{:.0} | {} | {metric} | {:.1} {unit} | {} | {} |\n",
            r.id,
            r.model,
            r.gpu,
            r.tp,
            r.precision,
            r.isl,
            r.osl,
            r.rate
                .map(|x| if x.is_finite() {
                    format!("{x}")
                } else {
                    "inf".into()
                })
                .unwrap_or_else(|| "offline".into()),
            r.value * scale,
            p.map(|p| format!("{:.1} {unit}", p * scale))
                .unwrap_or_else(|| "does not fit".into()),
            e.map(|e| format!("{:.1}%", e * 100.0))
                .unwrap_or_else(|| "—".into()),
        ));
    }
    out
}

/// Median and worst APE of one metric.
pub fn summary(rows: &[Row], c: &PerfConstants, metric: Metric) -> (f64, f64, usize) {
    let errs: Vec<f64> = errors(rows, c)
        .into_iter()
        .filter(|(i, _, _)| rows[*i].metric == metric)
        .filter_map(|(_, _, e)| e)
        .collect();
    let worst = errs.iter().cloned().fold(0.0, f64::max);
    (median(errs.clone()), worst, errs.len())
}
