//! `dic estimate`: one scenario from flags instead of a file — a stdlib (or imported)
//! model on a stdlib GPU — and its report as a table or JSON.
//!
//! Defaults when flags are absent: 8 GPUs per node with the GPU's own scale-up link
//! (PCIe-only cards get PCIe), as many nodes as the layout needs, an InfiniBand NDR rail
//! per GPU between nodes, and vLLM 0.33's engine defaults.

use super::rules::{Anchor, SloTarget};
use super::scenario::*;
use super::{analyze, catalog, Analysis};
use crate::program::{Layout, Model};
use crate::schema::{KV_DTYPES, WEIGHT_DTYPES};
use crate::units::fmt_bytes;
use serde_json::{json, Value};

#[derive(Debug, Clone, Default)]
pub struct EstimateRequest {
    pub gpu: String,
    pub gpus_per_node: Option<u64>,
    pub nodes: Option<u64>,
    pub layout: Layout,
    pub weights: Option<String>,
    pub kv_cache_dtype: Option<String>,
    pub gpu_memory_utilization: Option<f64>,
    pub max_model_len: Option<f64>,
    pub max_num_seqs: Option<u64>,
    pub max_num_batched_tokens: Option<f64>,
    pub isl: Option<f64>,
    pub osl: Option<f64>,
    pub concurrency: Option<u64>,
    pub rate: Option<f64>,
    /// $/h per node, for costs.
    pub price_per_node_hour: Option<f64>,
}

/// Builds the scenario; `Err` is a usage error with a message for the user.
pub fn scenario(
    model_name: &str,
    mut model: Model,
    req: &EstimateRequest,
) -> Result<Scenario, String> {
    let (gpu, scale_up) = catalog::gpu(&req.gpu).ok_or_else(|| {
        format!("unknown GPU `{}`: give a stdlib name (`dic list gpus`) or the name `nvidia-smi` prints", req.gpu)
    })?;
    if let Some(w) = &req.weights {
        if !WEIGHT_DTYPES.contains(&w.as_str()) {
            return Err(format!(
                "unknown weight format `{w}`: use one of {}",
                WEIGHT_DTYPES.join(", ")
            ));
        }
        model.weights = w.clone();
    }
    if let Some(k) = &req.kv_cache_dtype {
        if !KV_DTYPES.contains(&k.as_str()) {
            return Err(format!(
                "unknown KV-cache dtype `{k}`: use one of {}",
                KV_DTYPES.join(", ")
            ));
        }
        model.kv_cache = k.clone();
    }
    // Engine options are checked against the schema's table below, with the same
    // ranges as a .dist file.
    let l = req.layout;
    if l.tp == 0 || l.pp == 0 || l.dp == 0 {
        return Err("--tp, --pp and --dp must be at least 1".into());
    }
    let per_node = req.gpus_per_node.unwrap_or(8).max(1);
    let nodes = req
        .nodes
        .unwrap_or_else(|| l.gpus().div_ceil(per_node))
        .max(1);
    let scale_out = (nodes > 1)
        .then(|| {
            catalog::link("ib_ndr").map(|link| ScaleOut {
                nics: per_node,
                link,
            })
        })
        .flatten();
    let topology = Topology {
        gpus_per_node: per_node,
        nodes,
        scale_up_domain: per_node,
        scale_up,
        scale_out,
        price_per_node_hour: req.price_per_node_hour,
        gpu,
    };
    // Through the schema's engine table: the same options and ranges as a .dist file.
    let options = crate::program::VllmOptions {
        gpu_memory_utilization: req.gpu_memory_utilization,
        max_model_len: req.max_model_len,
        max_num_seqs: req.max_num_seqs,
        max_num_batched_tokens: req.max_num_batched_tokens,
        ..Default::default()
    };
    for (name, value) in [
        ("gpu_memory_utilization", req.gpu_memory_utilization),
        ("max_model_len", req.max_model_len),
        ("max_num_seqs", req.max_num_seqs.map(|v| v as f64)),
        ("max_num_batched_tokens", req.max_num_batched_tokens),
    ] {
        if let Some(v) = value {
            crate::schema::check_engine_number(name, v)?;
        }
    }
    let engine = engine_settings(&model, &topology.gpu, &options);
    let load = match (req.concurrency, req.rate) {
        (Some(_), Some(_)) => return Err("give --concurrency or --rate, not both".into()),
        (Some(c), None) => Load::Concurrency(c.max(1)),
        (None, Some(r)) if r > 0.0 && r.is_finite() => Load::Rate(r),
        (None, Some(r)) => return Err(format!("--rate must be positive, got {r}")),
        (None, None) => Load::Concurrency(1),
    };
    let workload = WorkloadSpec {
        prompt: req.isl.unwrap_or(1024.0),
        output: req.osl.unwrap_or(256.0).max(1.0),
        load,
    };
    Ok(Scenario {
        model_name: model_name.to_string(),
        model,
        topology,
        layout: l,
        engine,
        workload: Some(workload),
    })
}

pub fn run(s: &Scenario) -> Analysis {
    analyze(s, &[] as &[SloTarget])
}

/// $/h of the nodes the layout occupies and $ per million output tokens, when priced.
fn cost(s: &Scenario, a: &Analysis) -> (Option<f64>, Option<f64>) {
    let nodes = s.layout.gpus().div_ceil(s.topology.gpus_per_node.max(1));
    let per_hour = s.topology.price_per_node_hour.map(|p| p * nodes as f64);
    let per_million = match (
        per_hour,
        a.prediction.as_ref().map(|p| p.output_tokens_per_s),
    ) {
        (Some(c), Some(t)) if t > 0.0 => Some(c / (t * 3600.0) * 1e6),
        _ => None,
    };
    (per_hour, per_million)
}

/// The JSON object `dic estimate --json` prints (bytes as integers, times in ms).
pub fn to_json(s: &Scenario, a: &Analysis) -> Value {
    let (cost_per_hour, cost_per_million_output_tokens) = cost(s, a);
    let st = a.memory.tightest();
    let p = a.prediction.as_ref();
    let ms = |v: Option<f64>| {
        v.filter(|x| x.is_finite())
            .map(|x| (x * 1e3 * 1000.0).round() / 1000.0)
    };
    json!({
        "model": s.model_name,
        "gpu": s.topology.gpu.name,
        "layout": { "tp": s.layout.tp, "pp": s.layout.pp, "dp": s.layout.dp, "ep": s.layout.ep },
        "gpus": s.layout.gpus(),
        "weights_bytes_per_gpu": st.weights.round() as i64,
        "activation_bytes_per_gpu": st.activations.round() as i64,
        "non_torch_bytes_per_gpu": st.non_torch.round() as i64,
        "cuda_graph_bytes_per_gpu": st.cuda_graphs.round() as i64,
        "kv_cache_bytes_per_gpu": st.kv_cache.round() as i64,
        "kv_cache_tokens": a.memory.kv_cache_tokens,
        "max_concurrency": (a.memory.max_concurrency * 100.0).round() / 100.0,
        "ttft_ms": ms(p.map(|p| p.ttft)),
        "tpot_ms": ms(p.map(|p| p.tpot)),
        "output_tokens_per_s": p.map(|p| p.output_tokens_per_s.round()),
        "output_tokens_per_s_per_gpu": p.map(|p| (p.output_tokens_per_s_per_gpu * 10.0).round() / 10.0),
        "requests_per_s": p.map(|p| (p.requests_per_s * 1000.0).round() / 1000.0),
        "max_output_tokens_per_s": p.map(|p| p.max_output_tokens_per_s.round()),
        "cost_per_hour": cost_per_hour,
        "cost_per_million_output_tokens": cost_per_million_output_tokens,
        "diagnostics": a.findings.iter().map(|f| json!({
            "code": f.code.as_str(),
            "severity": f.severity.as_str(),
            "message": f.message,
            "help": f.help,
            "about": match f.anchor { Anchor::Layout => "layout", Anchor::Model => "model", Anchor::Engine(_) => "engine", _ => "deployment" },
        })).collect::<Vec<_>>(),
    })
}

/// The compact human table.
pub fn to_table(s: &Scenario, a: &Analysis) -> String {
    let mut out = String::new();
    let w = s.workload.expect("estimate always has a workload");
    out.push_str(&format!(
        "{} on {} × {}, {}\n",
        s.model_name,
        s.layout.gpus(),
        s.topology.gpu.name,
        s.layout
    ));
    out.push_str(&format!(
        "weights {}, KV cache {}, gpu_memory_utilization {:.2}, max_model_len {}, max_num_seqs {}, max_num_batched_tokens {}\n\n",
        s.model.weights, s.model.kv_cache, s.engine.gpu_memory_utilization, s.engine.max_model_len, s.engine.max_num_seqs, s.engine.max_num_batched_tokens
    ));
    out.push_str("memory per GPU       ");
    for st in &a.memory.stages {
        out.push_str(&format!("{:>14}", format!("stage {}", st.stage)));
    }
    out.push('\n');
    type Term = fn(&super::memory::StageMemory) -> f64;
    let rows: [(&str, Term); 6] = [
        ("  budget", |x| x.budget),
        ("  weights", |x| x.weights),
        ("  activations", |x| x.activations),
        ("  non-torch", |x| x.non_torch),
        ("  CUDA graphs", |x| x.cuda_graphs),
        ("  KV cache", |x| x.kv_cache),
    ];
    for (name, f) in rows {
        out.push_str(&format!("{name:<21}"));
        for st in &a.memory.stages {
            out.push_str(&format!("{:>14}", fmt_bytes(f(st))));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "KV cache tokens      {} (max concurrency {:.2} at {} tokens)\n\n",
        a.memory.kv_cache_tokens, a.memory.max_concurrency, s.engine.max_model_len
    ));
    match &a.prediction {
        Some(p) => {
            let load = match w.load {
                Load::Rate(r) => format!("{r} req/s"),
                Load::Concurrency(c) => format!("concurrency {c}"),
            };
            out.push_str(&format!(
                "workload             {:.0} in / {:.0} out tokens, {load}\n",
                w.prompt, w.output
            ));
            out.push_str(&format!(
                "TTFT                 {}\n",
                if p.ttft.is_finite() {
                    format!("{:.1} ms", p.ttft * 1e3)
                } else {
                    "unbounded (overloaded)".into()
                }
            ));
            out.push_str(&format!("TPOT                 {:.2} ms\n", p.tpot * 1e3));
            out.push_str(&format!(
                "output throughput    {:.0} tokens/s ({:.1} per GPU), {:.3} req/s\n",
                p.output_tokens_per_s, p.output_tokens_per_s_per_gpu, p.requests_per_s
            ));
            out.push_str(&format!(
                "saturated            {:.0} tokens/s\n",
                p.max_output_tokens_per_s
            ));
            if let (Some(h), m) = cost(s, a) {
                out.push_str(&format!(
                    "cost                 ${h:.2}/h{}\n",
                    m.map(|m| format!(", ${m:.3} per million output tokens"))
                        .unwrap_or_default()
                ));
            }
            out.push_str(&format!(
                "decode step          compute {:.2} ms, memory {:.2} ms, communication {:.2} ms, overhead {:.2} ms, bubble {:.2} ms\n",
                p.step.compute * 1e3,
                p.step.memory * 1e3,
                p.step.comm * 1e3,
                p.step.overhead * 1e3,
                p.step.bubble * 1e3
            ));
            for c in &p.step.comm_items {
                out.push_str(&format!(
                    "  {} {} × {} of {} over {} ranks ({}): {:.3} ms\n",
                    c.group,
                    c.count,
                    c.collective.name(),
                    fmt_bytes(c.bytes),
                    c.ranks,
                    c.link,
                    c.time * 1e3
                ));
            }
        }
        None => {
            out.push_str("no prediction: the deployment does not start (see the diagnostics)\n")
        }
    }
    for f in &a.findings {
        out.push_str(&format!(
            "\n{}[{}]: {}",
            f.severity.as_str(),
            f.code.as_str(),
            f.message
        ));
        if let Some(h) = &f.help {
            out.push_str(&format!("\n  help: {}", h.replace('\n', "\n        ")));
        }
        out.push('\n');
    }
    out
}
