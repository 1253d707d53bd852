//! The rules of distributed serving, as findings with codes, numbers and help.
//!
//! Structural rules (vLLM's own startup checks and topology rules) run first; the
//! memory rules need the memory model, the performance rules the operating point.
//! Findings carry an [`Anchor`] (which part of the deployment they are about) rather
//! than a span, so `dic estimate` (no file) and `dic check` (spans) share them.

use super::comm::{ep_placement, tp_placement};
use super::memory::{memory, MemoryReport};
use super::perf::{max_throughput, percentile_factor, predict, Prediction, FITTED};
use super::scenario::{Load, Scenario, GIB};
use crate::diagnostics::{Code, Severity};
use crate::program::{Layout, LinkType, SloMetric};
use crate::syntax::ast::Op;
use crate::units::fmt_bytes;
use serde::Serialize;

/// What part of a deployment a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Anchor {
    Layout,
    Model,
    Cluster,
    Engine(&'static str),
    /// The n-th SLO bound.
    Slo(usize),
    Deploy,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub label: String,
    pub help: Option<String>,
    pub anchor: Anchor,
    /// Text that replaces the anchor to apply the advice (an editor's quick fix).
    pub replacement: Option<String>,
}

fn finding(
    code: Code,
    anchor: Anchor,
    message: String,
    label: &str,
    help: Option<String>,
) -> Finding {
    Finding {
        code,
        severity: code.default_severity(),
        message,
        label: label.to_string(),
        help,
        anchor,
        replacement: None,
    }
}

/// An SLO bound to check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SloTarget {
    pub metric: SloMetric,
    pub percentile: String,
    pub op: Op,
    pub value: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SloResult {
    pub target: SloTarget,
    pub predicted: f64,
    pub met: bool,
}

fn valid_tp_sizes(heads: u64, max: u64) -> Vec<u64> {
    (1..=max.max(1))
        .filter(|t| heads.is_multiple_of(*t) && t.is_power_of_two())
        .collect()
}

/// vLLM's startup checks and the topology rules; no memory model needed.
pub fn structural(s: &Scenario) -> Vec<Finding> {
    let m = &s.model;
    let l = &s.layout;
    let t = &s.topology;
    let mut out = Vec::new();
    if !m.heads.is_multiple_of(l.tp.max(1)) {
        let valid = valid_tp_sizes(m.heads, l.tp.max(t.gpus_per_node) * 2);
        out.push(finding(
            Code::HeadsNotDivisible,
            Anchor::Layout,
            format!("Total number of attention heads ({}) must be divisible by tensor parallel size ({})", m.heads, l.tp),
            "vLLM refuses this TP size",
            Some(format!("use tp {}", valid.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", tp "))),
        ));
    }
    if l.pp > m.layers {
        out.push(finding(
            Code::TooManyStages,
            Anchor::Layout,
            format!("pp {} exceeds the model's {} layers", l.pp, m.layers),
            "a stage would hold no layer",
            Some(format!("use pp ≤ {}", m.layers)),
        ));
    }
    if l.ep && m.experts == 0 {
        out.push(finding(
            Code::EpOnDense,
            Anchor::Layout,
            "expert parallelism on a dense model: Number of experts in the model must be greater than 0 when expert parallelism is enabled".into(),
            "the model has no experts",
            Some("remove `ep`; use dp replicas for throughput".into()),
        ));
    }
    let total = t.total_gpus();
    if l.gpus() > total {
        out.push(finding(
            Code::NotEnoughGpus,
            Anchor::Layout,
            format!(
                "the layout needs {} GPUs (tp {} × pp {} × dp {}{}), the cluster has {}",
                l.gpus(),
                l.tp,
                l.pp,
                l.dp,
                if l.pcp > 1 {
                    format!(" × pcp {}", l.pcp)
                } else {
                    String::new()
                },
                total
            ),
            "more GPUs than the cluster has",
            Some(format!(
                "add nodes ({} × {} GPUs needed) or shrink dp",
                l.gpus().div_ceil(t.gpus_per_node.max(1)),
                t.gpus_per_node
            )),
        ));
    }
    let per_node = t.gpus_per_node.max(1);
    let replica = l.replica_gpus();
    if replica > per_node && !replica.is_multiple_of(per_node) {
        out.push(finding(
            Code::PartialNode,
            Anchor::Layout,
            format!("each replica's {replica} GPUs (tp × pp) span nodes but are not a whole number of {per_node}-GPU nodes"),
            "vLLM's multi-node launch requires whole nodes per replica",
            Some(format!("make tp × pp a multiple of {per_node}, or at most {per_node}")),
        ));
    } else if l.gpus() > per_node && !l.gpus().is_multiple_of(per_node) {
        out.push(finding(
            Code::PartialNode,
            Anchor::Layout,
            format!(
                "the layout's {} GPUs span nodes but are not a whole number of {}-GPU nodes",
                l.gpus(),
                per_node
            ),
            "vLLM requires (dp × pp × tp) % nnodes == 0",
            Some(format!("use a multiple of {per_node} GPUs")),
        ));
    }
    if l.dcp > 1 {
        if !l.tp.is_multiple_of(l.dcp) {
            out.push(finding(
                Code::InvalidDcp,
                Anchor::Layout,
                format!("tp_size={} must be divisible by dcp_size={}.", l.tp, l.dcp),
                "vLLM's rule",
                Some("choose dcp dividing tp".into()),
            ));
        } else if m.attention != crate::program::Attention::Mla && l.tp <= m.kv_heads {
            out.push(finding(
                Code::InvalidDcp,
                Anchor::Layout,
                format!("Decode context parallelism for GQA/MQA requires --tensor-parallel-size ({}) to be greater than the model's total number of KV heads ({})", l.tp, m.kv_heads),
                "DCP shards KV heads that TP already split",
                Some(format!("use tp > {} or drop dcp", m.kv_heads)),
            ));
        }
    }
    if l.tp > 1 {
        let tp = tp_placement(s);
        if tp.spans_nodes && !tp.within_scale_up_domain {
            let nvlink = t
                .scale_up
                .as_ref()
                .map(|x| format!("{:.0} GB/s {}", x.bandwidth / 1e9, x.name))
                .unwrap_or_else(|| "the node's own link".into());
            out.push(finding(
                Code::TpAcrossNodes,
                Anchor::Layout,
                format!(
                    "tp {} spans {} nodes over {} ({:.1} GB/s per GPU, vs {nvlink} inside a node)",
                    l.tp,
                    l.tp.div_ceil(t.gpus_per_node.max(1)),
                    tp.link_name,
                    tp.bandwidth / 0.8 / 1e9
                ),
                "TP all-reduces twice per layer per token: it belongs inside one NVLink domain",
                Some(format!(
                    "keep tp ≤ {} and cross nodes with pp: `tp {} × pp {}`",
                    t.gpus_per_node,
                    t.gpus_per_node.min(l.tp),
                    (l.tp / t.gpus_per_node.max(1)).max(2) * l.pp
                )),
            ));
        } else if tp.link_type == LinkType::Pcie {
            out.push(finding(
                Code::TpOverPcie,
                Anchor::Layout,
                format!(
                    "tp {} runs over {} ({:.0} GB/s per direction) — no NVLink between these GPUs",
                    l.tp,
                    tp.link_name,
                    tp.bandwidth / 0.8 / 1e9
                ),
                "every layer's all-reduces cross PCIe",
                Some(
                    "prefer fewer GPUs per replica (quantize, or pp over PCIe) and dp replicas"
                        .into(),
                ),
            ));
        }
    }
    if l.ep && m.experts > 0 && l.tp * l.dp > 1 {
        let ep = ep_placement(s);
        if ep.spans_nodes
            && !ep.within_scale_up_domain
            && !matches!(ep.link_type, LinkType::Infiniband)
        {
            out.push(finding(
                Code::EpOverSlowFabric,
                Anchor::Layout,
                format!(
                    "EP all-to-all crosses nodes over {} ({:.1} GB/s per GPU)",
                    ep.link_name,
                    ep.bandwidth / 0.8 / 1e9
                ),
                "every MoE layer dispatches and combines tokens across nodes",
                Some(
                    "keep the EP group inside a node or an NVLink domain, or use an RDMA fabric"
                        .into(),
                ),
            ));
        }
    }
    if s.engine.max_model_len as f64 > m.max_context && m.max_context > 0.0 {
        out.push(finding(
            Code::ModelLenTooLong,
            Anchor::Engine("max_model_len"),
            format!(
                "User-specified max_model_len ({}) is greater than the derived max_model_len (max_position_embeddings={})",
                s.engine.max_model_len, m.max_context as u64
            ),
            "vLLM refuses to start",
            Some(format!("use max_model_len ≤ {}", m.max_context as u64)),
        ));
    }
    if s.engine.max_num_batched_tokens < s.engine.max_num_seqs {
        out.push(finding(
            Code::BatchBelowSeqs,
            Anchor::Engine("max_num_batched_tokens"),
            format!(
                "max_num_batched_tokens ({}) must be greater than or equal to max_num_seqs ({})",
                s.engine.max_num_batched_tokens, s.engine.max_num_seqs
            ),
            "vLLM's scheduler check",
            Some(format!(
                "raise max_num_batched_tokens to {} or lower max_num_seqs",
                s.engine.max_num_seqs
            )),
        ));
    }
    out
}

fn breakdown(mem: &MemoryReport) -> String {
    let st = mem.tightest();
    format!(
        "per GPU (stage {}): budget {} = weights {} + activations {} + non-torch {} + CUDA graphs {} + KV cache {}",
        st.stage,
        fmt_bytes(st.budget),
        fmt_bytes(st.weights),
        fmt_bytes(st.activations),
        fmt_bytes(st.non_torch),
        fmt_bytes(st.cuda_graphs),
        fmt_bytes(st.kv_cache)
    )
}

/// Does a variant fit, with one request of max_model_len?
fn fits(s: &Scenario) -> bool {
    let m = memory(s);
    m.stages.iter().all(|st| st.kv_cache > 0.0) && m.kv_cache_tokens >= s.engine.max_model_len
}

/// Ways out of a memory error, in the escalation order: quantize, more TP, shorter context.
fn what_would_fit(s: &Scenario) -> String {
    let mut ideas = Vec::new();
    if !matches!(
        s.model.weights.as_str(),
        "fp8" | "int8" | "int4" | "awq" | "gptq" | "nvfp4" | "mxfp4"
    ) {
        let mut q = s.clone();
        q.model.weights = "fp8".into();
        q.model.kv_cache = "fp8".into();
        if fits(&q) {
            ideas.push("`weights = fp8, kv_cache = fp8` on the model".to_string());
        }
    }
    let max_tp = s.topology.scale_up_domain.max(s.topology.gpus_per_node);
    let mut tp = s.layout.tp * 2;
    while tp <= max_tp {
        if s.model.heads.is_multiple_of(tp) {
            let mut t = s.clone();
            t.layout.tp = tp;
            if fits(&t) {
                ideas.push(format!("tp {tp}"));
                break;
            }
        }
        tp *= 2;
    }
    let mut len = s.engine.max_model_len / 2;
    while len >= 1024 {
        let mut c = s.clone();
        c.engine.max_model_len = len;
        if fits(&c) {
            ideas.push(format!("max_model_len = {len}"));
            break;
        }
        len /= 2;
    }
    if ideas.is_empty() {
        "more GPUs per replica (pp across nodes), or a smaller model".into()
    } else {
        format!("this would fit: {}", ideas.join("; or "))
    }
}

pub fn memory_rules(s: &Scenario, mem: &MemoryReport) -> Vec<Finding> {
    let mut out = Vec::new();
    let st = mem.tightest();
    if st.kv_cache <= 0.0 {
        out.push(finding(
            Code::DoesNotFit,
            Anchor::Layout,
            format!(
                "{} does not fit: needs {} per GPU before the KV cache, has {} after gpu_memory_utilization = {:.2}",
                s.model_name,
                fmt_bytes(st.weights + st.activations + st.non_torch + st.cuda_graphs),
                fmt_bytes(st.budget),
                s.engine.gpu_memory_utilization
            ),
            "No available memory for the cache blocks",
            Some(format!("{}\n{}", breakdown(mem), what_would_fit(s))),
        ));
    } else if mem.kv_cache_tokens < s.engine.max_model_len {
        let est = mem.kv_cache_tokens;
        out.push(finding(
            Code::RequestDoesNotFit,
            Anchor::Engine("max_model_len"),
            format!(
                "one request of max_model_len ({}) needs {} of KV cache, more than the {} available; the estimated maximum model length is {}",
                s.engine.max_model_len,
                fmt_bytes(mem.bytes_per_max_request),
                fmt_bytes(st.kv_cache),
                est
            ),
            "vLLM refuses to start",
            Some(format!("{}\n{}", breakdown(mem), what_would_fit(s))),
        ));
    }
    out
}

/// Predicted value of an SLO metric, percentile applied.
pub fn predicted(p: &Prediction, t: &SloTarget, output: f64) -> f64 {
    match t.metric {
        SloMetric::Ttft => p.ttft * percentile_factor(true, &t.percentile),
        SloMetric::Tpot | SloMetric::Itl => p.tpot * percentile_factor(false, &t.percentile),
        SloMetric::E2e => {
            p.ttft * percentile_factor(true, &t.percentile)
                + (output - 1.0).max(0.0) * p.tpot * percentile_factor(false, &t.percentile)
        }
        SloMetric::Throughput => p.output_tokens_per_s,
        SloMetric::RequestRate => p.requests_per_s,
    }
}

fn fmt_metric(metric: SloMetric, v: f64) -> String {
    match metric {
        SloMetric::Throughput => format!("{v:.0} tokens/s"),
        SloMetric::RequestRate => format!("{v:.2} req/s"),
        _ if !v.is_finite() => "unbounded (overloaded)".into(),
        _ if v >= 1.0 => format!("{v:.2} s"),
        _ => format!("{:.1} ms", v * 1e3),
    }
}

fn metric_name(t: &SloTarget) -> String {
    match t.metric {
        SloMetric::Throughput => "throughput".into(),
        SloMetric::RequestRate => "request_rate".into(),
        m => format!("{}.{}", format!("{m:?}").to_lowercase(), t.percentile),
    }
}

/// SLO checks and the performance rules at the operating point.
pub fn perf_rules(
    s: &Scenario,
    mem: &MemoryReport,
    p: &Prediction,
    slo: &[SloTarget],
) -> (Vec<Finding>, Vec<SloResult>) {
    perf_rules_at(s, mem, p, slo, true)
}

/// As [`perf_rules`]; `detailed = false` skips the remedies and the "more GPUs" search
/// (the planner evaluates many candidates and explains only the ones it shows).
pub fn perf_rules_at(
    s: &Scenario,
    mem: &MemoryReport,
    p: &Prediction,
    slo: &[SloTarget],
    detailed: bool,
) -> (Vec<Finding>, Vec<SloResult>) {
    let mut out = Vec::new();
    let mut results = Vec::new();
    let output = s.workload.map(|w| w.output).unwrap_or(256.0);
    for (i, t) in slo.iter().enumerate() {
        let v = predicted(p, t, output);
        let met = match t.op {
            Op::Le | Op::Lt => v <= t.value,
            _ => v >= t.value,
        };
        results.push(SloResult {
            target: t.clone(),
            predicted: v,
            met,
        });
        if !met {
            let by = if matches!(t.op, Op::Le | Op::Lt) {
                v - t.value
            } else {
                t.value - v
            };
            let pct = if t.value > 0.0 {
                by / t.value * 100.0
            } else {
                0.0
            };
            out.push(finding(
                Code::SloInfeasible,
                Anchor::Slo(i),
                format!(
                    "{} is predicted at {}, {} the bound of {}{}",
                    metric_name(t),
                    fmt_metric(t.metric, v),
                    if matches!(t.op, Op::Le | Op::Lt) {
                        "over"
                    } else {
                        "under"
                    },
                    fmt_metric(t.metric, t.value),
                    if by.is_finite() {
                        format!(" (by {}, {pct:.0}%)", fmt_metric(t.metric, by))
                    } else {
                        String::new()
                    }
                ),
                "not met",
                detailed.then(|| slo_remedy(s, mem, t)),
            ));
        }
    }
    // PP bubble at the workload's concurrency.
    if s.layout.pp > 1 && p.step.bubble > 0.3 * p.step.tpot {
        out.push(finding(
            Code::PipelineBubble,
            Anchor::Layout,
            format!(
                "pipeline bubble: {:.0}% of each decode step is idle with {:.1} requests running per replica and pp {}",
                p.step.bubble / p.step.tpot * 100.0,
                p.running,
                s.layout.pp
            ),
            "too few requests in flight to fill the stages",
            Some("fewer stages (quantize, or more TP inside a node), or more concurrency per replica".into()),
        ));
    }
    if detailed {
        out.extend(more_gpus_worse(s, p));
    }
    (out, results)
}

/// What would meet a missed SLO: the load at which it holds, or more replicas.
fn slo_remedy(s: &Scenario, mem: &MemoryReport, t: &SloTarget) -> String {
    let output = s.workload.map(|w| w.output).unwrap_or(256.0);
    match (t.metric, s.workload) {
        (SloMetric::Throughput | SloMetric::RequestRate, _) => {
            let (max_tps, _) = max_throughput(
                s,
                mem,
                s.workload.map(|w| w.prompt).unwrap_or(1024.0),
                output,
                &FITTED,
            );
            let max = if t.metric == SloMetric::Throughput {
                max_tps
            } else {
                max_tps / output
            };
            let replicas = (t.value / (max / s.layout.dp.max(1) as f64))
                .ceil()
                .max(1.0) as u64;
            format!(
                "saturated, this layout serves {}; dp {replicas} would meet it",
                fmt_metric(t.metric, max)
            )
        }
        (_, Some(w)) => {
            // Bisect the load at which the bound holds.
            let (mut lo, mut hi) = (0.0, 1.0);
            let holds = |x: f64| {
                let mut v = s.clone();
                v.workload = Some(match w.load {
                    Load::Rate(r) => super::scenario::WorkloadSpec {
                        load: Load::Rate(r * x),
                        ..w
                    },
                    Load::Concurrency(c) => super::scenario::WorkloadSpec {
                        load: Load::Concurrency(((c as f64 * x).floor() as u64).max(1)),
                        ..w
                    },
                });
                let p = predict(&v, mem, &FITTED);
                predicted(&p, t, output) <= t.value
            };
            if !holds(1e-3) {
                return "not even one request at a time meets it on this layout: more TP inside a node, faster GPUs, or FP8".into();
            }
            for _ in 0..20 {
                let mid = (lo + hi) / 2.0;
                if holds(mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            match w.load {
                Load::Rate(r) => format!(
                    "it holds up to {:.2} req/s on this layout; dp {} would carry {:.2} req/s",
                    r * lo,
                    (s.layout.dp as f64 / lo.max(1e-3)).ceil() as u64,
                    r
                ),
                Load::Concurrency(c) => format!(
                    "it holds up to {} concurrent requests on this layout",
                    ((c as f64) * lo).floor().max(1.0)
                ),
            }
        }
        (_, None) => "add a workload to see the load at which it holds".into(),
    }
}

/// "More GPUs make it worse": a smaller layout that is faster per token or serves more
/// per GPU, named with its numbers.
fn more_gpus_worse(s: &Scenario, p: &Prediction) -> Vec<Finding> {
    let l = s.layout;
    let mut candidates: Vec<Layout> = Vec::new();
    if l.tp > 1 && l.tp.is_multiple_of(2) {
        candidates.push(Layout { tp: l.tp / 2, ..l });
    }
    if l.pp > 1 {
        candidates.push(Layout { pp: l.pp - 1, ..l });
    }
    for c in candidates {
        let mut v = s.clone();
        v.layout = c;
        if !structural(&v).iter().all(|f| f.severity != Severity::Error) {
            continue;
        }
        let mem = memory(&v);
        if !(mem.stages.iter().all(|st| st.kv_cache > 0.0)
            && mem.kv_cache_tokens >= v.engine.max_model_len)
        {
            continue;
        }
        let q = predict(&v, &mem, &FITTED);
        // Compare like with like: both must carry the offered load.
        if q.overloaded || p.overloaded {
            continue;
        }
        if q.tpot < p.tpot * 0.98 {
            return vec![finding(
                Code::MoreGpusWorse,
                Anchor::Layout,
                format!(
                    "more GPUs make it worse: `{}` ({} GPUs) predicts TPOT {:.1} ms, `{}` ({} GPUs) {:.1} ms",
                    c,
                    c.gpus(),
                    q.tpot * 1e3,
                    l,
                    l.gpus(),
                    p.tpot * 1e3
                ),
                "the extra GPUs add communication faster than they remove work",
                Some(format!("use `{c}` and spend the freed GPUs on dp replicas")),
            )];
        }
    }
    Vec::new()
}

/// Advice in the escalation order: quantization would fit on fewer GPUs; DP replicas
/// would beat a wider TP for throughput.
pub fn advice(s: &Scenario, p: &Prediction) -> Vec<Finding> {
    let mut out = Vec::new();
    let l = s.layout;
    let bf16 = matches!(s.model.weights.as_str(), "bf16" | "fp16" | "fp32");
    let has_fp8 = s.topology.gpu.fp8.is_some();
    if bf16 && has_fp8 && l.tp > 1 && l.tp.is_multiple_of(2) {
        let mut q = s.clone();
        q.model.weights = "fp8".into();
        q.layout.tp = l.tp / 2;
        if structural(&q).iter().all(|f| f.severity != Severity::Error) && fits(&q) {
            out.push(finding(
                Code::QuantizeToFit,
                Anchor::Model,
                format!(
                    "with FP8 weights the model fits on tp {} ({} GPUs instead of {})",
                    l.tp / 2,
                    q.layout.gpus(),
                    l.gpus()
                ),
                "quantization comes first in the escalation order",
                Some(
                    "set `weights = fp8` on the model and halve tp (check quality for your task)"
                        .into(),
                ),
            ));
        }
    }
    if l.tp > 1 && l.tp.is_multiple_of(2) && s.model.heads.is_multiple_of(l.tp / 2) {
        let mut d = s.clone();
        d.layout.tp = l.tp / 2;
        d.layout.dp = l.dp * 2;
        if structural(&d).iter().all(|f| f.severity != Severity::Error) && fits(&d) {
            let dm = memory(&d);
            let (prompt, output) = s
                .workload
                .map(|w| (w.prompt, w.output))
                .unwrap_or((1024.0, 256.0));
            let (dt, _) = max_throughput(&d, &dm, prompt, output, &FITTED);
            if dt > p.max_output_tokens_per_s * 1.1 {
                out.push(finding(
                    Code::DpBeatsTp,
                    Anchor::Layout,
                    format!(
                        "`{}` would serve {:.0} tokens/s saturated, {:.0}% more than `{}` ({:.0} tokens/s) on the same GPUs",
                        d.layout,
                        dt,
                        (dt / p.max_output_tokens_per_s - 1.0) * 100.0,
                        l,
                        p.max_output_tokens_per_s
                    ),
                    "DP replicas need no per-token communication",
                    Some(format!("use `{}` unless TPOT needs the wider TP", d.layout)),
                ));
            }
        }
    }
    let _ = GIB;
    out
}
