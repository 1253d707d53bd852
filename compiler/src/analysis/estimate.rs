//! `dic estimate`: one scenario from flags instead of a file — a stdlib (or imported)
//! model on a stdlib GPU — and its report as a table or JSON.
//!
//! Defaults when flags are absent: 8 GPUs per node with the GPU's own scale-up link, or the
//! stdlib's reference node's where it has one of that many (an HGX board's NVSwitch;
//! PCIe-only cards get PCIe), as many nodes as the layout needs, an InfiniBand NDR rail
//! per GPU between nodes, and vLLM 0.33's engine defaults.

use super::scenario::*;
use super::{catalog, Analysis};
use crate::program::{Layout, Model};
use crate::schema::{self, EngineOption, Kind, CUDAGRAPH_MODES, KV_DTYPES, WEIGHT_DTYPES};

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
    /// One of [`crate::schema::CUDAGRAPH_MODES`].
    pub cudagraph_mode: Option<String>,
    pub isl: Option<f64>,
    pub osl: Option<f64>,
    pub concurrency: Option<u64>,
    pub rate: Option<f64>,
    /// Requests in a finite run (`--num-requests`); `None`: steady state.
    pub num_requests: Option<u64>,
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
    if let Some(m) = &req.cudagraph_mode {
        if !CUDAGRAPH_MODES.contains(&m.as_str()) {
            return Err(format!(
                "unknown CUDA-graph mode `{m}`: use one of {}",
                CUDAGRAPH_MODES.join(", ")
            ));
        }
    }
    let l = req.layout;
    if l.tp == 0 || l.pp == 0 || l.dp == 0 {
        return Err("--tp, --pp and --dp must be at least 1".into());
    }
    if req.gpus_per_node == Some(0) || req.nodes == Some(0) {
        return Err("--gpus-per-node and --nodes must be at least 1".into());
    }
    // Every number is checked against the schema's field it stands for — a workload's, a
    // cluster's or the engine's — with the same types and ranges as a `.dist` file, and
    // said as the flag the user typed.
    let field = |kind: Kind, name: &str| kind.schema().field(name);
    let int = |v: Option<u64>| v.map(|v| v as f64);
    for (flag, field, value) in [
        ("--isl", field(Kind::Workload, "prompt"), req.isl),
        ("--osl", field(Kind::Workload, "output"), req.osl),
        ("--rate", field(Kind::Workload, "rate"), req.rate),
        (
            "--concurrency",
            field(Kind::Workload, "concurrency"),
            int(req.concurrency),
        ),
        (
            "--num-requests",
            field(Kind::Workload, "requests"),
            int(req.num_requests),
        ),
        (
            "--price-per-node",
            field(Kind::Cluster, "price"),
            req.price_per_node_hour,
        ),
        (
            "--gpu-memory-utilization",
            EngineOption::GpuMemoryUtilization.field(),
            req.gpu_memory_utilization,
        ),
        (
            "--max-model-len",
            EngineOption::MaxModelLen.field(),
            req.max_model_len,
        ),
        (
            "--max-num-seqs",
            EngineOption::MaxNumSeqs.field(),
            int(req.max_num_seqs),
        ),
        (
            "--max-num-batched-tokens",
            EngineOption::MaxNumBatchedTokens.field(),
            req.max_num_batched_tokens,
        ),
    ] {
        let (Some(field), Some(v)) = (field, value) else {
            continue;
        };
        schema::check_number(field, v)
            .map_err(|why| why.replacen(&format!("`{}`", field.name), flag, 1))?;
    }
    let per_node = req.gpus_per_node.unwrap_or(8);
    let nodes = req.nodes.unwrap_or_else(|| l.gpus().div_ceil(per_node));
    let scale_out = (nodes > 1)
        .then(|| {
            catalog::link("ib_ndr").map(|link| ScaleOut {
                nics: per_node,
                link,
            })
        })
        .flatten();
    // A node of the GPU's reference board (8 SXM GPUs on an HGX NVSwitch) links them
    // through its switch; other counts keep the GPU's own link.
    let scale_up = catalog::node_scale_up(&gpu.name, per_node).or(scale_up);
    let topology = Topology {
        gpus_per_node: per_node,
        nodes,
        scale_up_domain: per_node,
        scale_up,
        scale_out,
        price_per_node_hour: req.price_per_node_hour,
        cpu_memory: None,
        gpu,
    };
    let options = crate::program::VllmOptions {
        gpu_memory_utilization: req.gpu_memory_utilization,
        max_model_len: req.max_model_len,
        max_num_seqs: req.max_num_seqs,
        max_num_batched_tokens: req.max_num_batched_tokens,
        cudagraph_mode: req.cudagraph_mode.clone(),
        ..Default::default()
    };
    topology.gpu.resolve_auto_kv_cache(&mut model);
    let engine = engine_settings(&model, &topology.gpu, &options);
    let load = match (req.concurrency, req.rate) {
        (Some(_), Some(_)) => return Err("give --concurrency or --rate, not both".into()),
        (Some(c), None) => Load::Concurrency(c),
        (None, Some(r)) => Load::Rate(r),
        (None, None) => Load::Concurrency(1),
    };
    let workload = WorkloadSpec::new(
        req.isl.unwrap_or(1024.0),
        req.osl.unwrap_or(256.0),
        load,
        req.num_requests.map(|n| n as f64),
    );
    Ok(Scenario {
        model_name: model_name.to_string(),
        model,
        topology,
        layout: l,
        engine,
        workload: Some(workload),
    })
}

/// $/h of the nodes the layout occupies and $ per million output tokens, when priced.
pub fn cost(s: &Scenario, a: &Analysis) -> (Option<f64>, Option<f64>) {
    let per_hour = s.topology.price_for_layout(&s.layout);
    let per_million = match (
        per_hour,
        a.prediction.as_ref().map(|p| p.output_tokens_per_s),
    ) {
        (Some(c), Some(t)) if t > 0.0 => Some(c / (t * 3600.0) * 1e6),
        _ => None,
    };
    (per_hour, per_million)
}
