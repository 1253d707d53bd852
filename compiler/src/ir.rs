//! The IR: the planned deployment, everything a target needs and nothing more.
//!
//! Targets (vLLM launch scripts, Kubernetes manifests, later the NCCL plan and the
//! report) read only this; they never see the AST or the program. Built by [`lower`]
//! from the checked program and its analysis. Serializable with a stable field order, so
//! the IR itself can be dumped and diffed.

use crate::analysis::{Analysis, DeploymentScenario};
use crate::diagnostics::{Code, Diagnostic};
use crate::program::{Body, Layout, Program};
use serde::Serialize;

/// Bumped when the IR's meaning changes.
pub const PLAN_FORMAT_VERSION: u32 = 1;
/// vLLM image the targets pin by default (the release dic's flags are checked against).
pub const DEFAULT_IMAGE: &str = "vllm/vllm-openai:v0.33.0";
/// Default API port of `vllm serve`.
pub const DEFAULT_PORT: u64 = 8000;
/// Port for vLLM's data-parallel RPC (`--data-parallel-rpc-port`).
pub const DP_RPC_PORT: u64 = 13345;
/// torch.distributed rendezvous port for `--nnodes` launches (vLLM's default).
pub const MASTER_PORT: u64 = 29501;
/// The format of the NCCL runtime's plan file, written by the nccl target and checked by
/// `dic run` (docs/nccl-plan.md).
pub const NCCL_PLAN_FORMAT: &str = "dic-nccl-plan/1";
/// Ray head port.
pub const RAY_PORT: u64 = 6379;

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub format_version: u32,
    pub deployments: Vec<DeploymentPlan>,
}

impl Default for Plan {
    fn default() -> Self {
        Plan {
            format_version: PLAN_FORMAT_VERSION,
            deployments: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelPlan {
    pub name: String,
    /// What `vllm serve` loads.
    pub source: String,
    pub served_name: String,
    pub weights: String,
    /// `--kv-cache-dtype` value, absent for `auto`.
    pub kv_cache_dtype: Option<String>,
    /// `--quantization` value, for on-the-fly quantization of a 16-bit checkpoint.
    pub quantization: Option<String>,
    pub is_moe: bool,
    pub parameters: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct GpuPlan {
    pub name: String,
    /// Value of the `nvidia.com/gpu.product` node label (GPU Feature Discovery).
    pub product_label: String,
    pub memory_bytes: u64,
}

/// How the processes of one deployment are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchMode {
    /// Each replica fits in a node: one `vllm serve` per replica.
    Replicas,
    /// Each replica spans `nodes_per_group` nodes with vLLM's native launcher.
    MultiNode,
    /// As MultiNode, with a Ray cluster per replica.
    MultiNodeRay,
    /// MoE with expert parallelism over vLLM data-parallel ranks (wide EP).
    DataParallel,
}

#[derive(Debug, Clone, Serialize)]
pub struct EnginePlan {
    pub gpu_memory_utilization: f64,
    pub max_model_len: u64,
    pub max_num_seqs: u64,
    pub max_num_batched_tokens: u64,
    /// Always emitted: dic's KV arithmetic assumes it (16, or 64 for MLA, by default).
    pub block_size: u64,
    pub enforce_eager: bool,
    pub kv_cache_memory_bytes: Option<u64>,
    /// `--cpu-offload-gb`, when weights are offloaded.
    pub cpu_offload_gib: Option<f64>,
    pub enable_prefix_caching: Option<bool>,
    pub port: u64,
}

/// An engine option's value on vLLM's command line.
#[derive(Debug, Clone, PartialEq)]
pub enum FlagValue {
    /// `--flag VALUE`
    Text(String),
    /// a switch: its `on` flag when true, its `off` flag when false
    Switch(bool),
}

impl EnginePlan {
    /// What engine option `name` (a row of the schema's engine table) puts on vLLM's
    /// command line; `None` when nothing (unset, or the option is dic's own).
    pub fn flag_value(&self, name: &str) -> Option<FlagValue> {
        let text = |v: String| Some(FlagValue::Text(v));
        match name {
            "port" => text(self.port.to_string()),
            "gpu_memory_utilization" => text(format!("{}", self.gpu_memory_utilization)),
            "max_model_len" => text(self.max_model_len.to_string()),
            "max_num_seqs" => text(self.max_num_seqs.to_string()),
            "max_num_batched_tokens" => text(self.max_num_batched_tokens.to_string()),
            "block_size" => text(self.block_size.to_string()),
            "enforce_eager" => self.enforce_eager.then_some(FlagValue::Switch(true)),
            "kv_cache_memory" => self.kv_cache_memory_bytes.and_then(|b| text(b.to_string())),
            "enable_prefix_caching" => self.enable_prefix_caching.map(FlagValue::Switch),
            "cpu_offload" => self.cpu_offload_gib.and_then(|g| text(format!("{g}"))),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct NetworkPlan {
    /// RDMA device resource and count per pod.
    pub rdma_resource: Option<(String, u64)>,
    pub capabilities: Vec<String>,
    pub annotations: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
    pub socket_ifname: String,
    pub host_network: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct KubernetesPlan {
    pub namespace: String,
    pub image: String,
    /// Secret holding the Hugging Face token under key `token` (referenced, optional).
    pub hf_token_secret: String,
    /// Image with `dic` for the preflight Job; no Job when absent.
    pub preflight_image: Option<String>,
    pub shm_bytes: u64,
    /// Seconds the startup probe allows for download, load, compile and graph capture.
    pub startup_seconds: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PredictedPlan {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    pub kv_cache_tokens: u64,
    pub weights_bytes_per_gpu: u64,
}

/// Where one rank sits and which groups it belongs to.
#[derive(Debug, Clone, Serialize)]
pub struct RankPlacement {
    pub rank: u64,
    pub node: u64,
    pub local_gpu: u64,
    pub dp_replica: u64,
    pub pp_stage: u64,
    pub tp_rank: u64,
    /// Position in the PCP group, when prefill context parallelism is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcp_rank: Option<u64>,
    /// EP group (one per PP stage) when expert parallelism is on.
    pub ep_group: Option<u64>,
}

/// Memory of one GPU of a PP stage, in bytes; `free` is what gpu_memory_utilization leaves.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryRow {
    pub stage: u64,
    pub layers: u64,
    pub total: u64,
    pub weights: u64,
    pub activations: u64,
    pub non_torch: u64,
    pub cuda_graphs: u64,
    pub kv_cache: u64,
    pub free: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SloRow {
    /// `ttft.p95`, `throughput`, …
    pub metric: String,
    pub op: String,
    /// In ms for latencies, tokens/s or req/s for rates.
    pub bound: f64,
    pub predicted: Option<f64>,
    pub unit: String,
    pub met: bool,
    /// How far inside the bound, as a percentage of the bound (negative: missed).
    pub headroom_percent: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CollectiveRow {
    pub group: String,
    pub collective: String,
    pub count: u64,
    pub bytes: f64,
    pub ranks: u64,
    pub link: String,
    pub time_ms: f64,
}

/// One decode step (TPOT) split by cause, in ms.
#[derive(Debug, Clone, Serialize)]
pub struct StepRow {
    pub tpot_ms: f64,
    pub compute_ms: f64,
    pub memory_ms: f64,
    pub communication_ms: f64,
    pub overhead_ms: f64,
    pub bubble_ms: f64,
    pub collectives: Vec<CollectiveRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CostRow {
    pub per_hour: Option<f64>,
    pub per_million_input_tokens: Option<f64>,
    pub per_million_output_tokens: Option<f64>,
    pub nodes: u64,
    pub gpus_used: u64,
    pub gpus_idle: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AlternativeRow {
    pub layout: String,
    pub gpus: u64,
    pub cost_per_hour: Option<f64>,
    pub cost_per_million_output: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    pub chosen: bool,
}

/// Everything the cost report shows, computed once here so the report target only renders.
#[derive(Debug, Clone, Serialize)]
pub struct ReportData {
    pub ranks: Vec<RankPlacement>,
    pub memory: Vec<MemoryRow>,
    pub kv_cache_tokens: u64,
    pub max_concurrency: f64,
    pub prompt_tokens: f64,
    pub output_tokens: f64,
    pub requests_per_s: Option<f64>,
    pub slo: Vec<SloRow>,
    pub step: Option<StepRow>,
    pub cost: CostRow,
    pub alternatives: Vec<AlternativeRow>,
    pub rejected: Vec<crate::planner::Rejection>,
    pub scaling: Vec<crate::planner::ScalingPoint>,
    pub worse_from_gpus: Option<u64>,
    pub planner_evaluated: usize,
}

/// A communicator the runtime builds: its kind, index and member ranks.
#[derive(Debug, Clone, Serialize)]
pub struct GroupPlan {
    /// `tp.0`, `pp.1`, `ep.0`, `dp`.
    pub name: String,
    pub kind: crate::analysis::comm::GroupKind,
    /// The stdlib (or user) link the group's slowest hop crosses; absent for `dp`, which
    /// carries no per-step traffic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    pub members: Vec<u64>,
}

/// One collective that every layer in `layers` runs `per_layer` times.
#[derive(Debug, Clone, Serialize)]
pub struct CollectiveStep {
    pub group_kind: crate::analysis::comm::GroupKind,
    pub collective: String,
    /// Inclusive layer range (for the stage hand-off: the stage's last layer).
    pub layers: [u64; 2],
    pub per_layer: u64,
    /// Bytes per call, per rank (AllReduce buffer, All-to-All send total, message size).
    pub bytes: u64,
    pub dtype: String,
    /// dic's predicted time of one call, microseconds.
    pub predicted_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageSchedule {
    pub stage: u64,
    pub layers: [u64; 2],
    pub collectives: Vec<CollectiveStep>,
}

/// The communication of one forward pass: `tokens` tokens per micro-batch.
#[derive(Debug, Clone, Serialize)]
pub struct StepSchedule {
    pub tokens: u64,
    pub stages: Vec<StageSchedule>,
    /// Sum over stages of every call's predicted time, microseconds.
    pub predicted_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CommPlan {
    pub world_size: u64,
    pub groups: Vec<GroupPlan>,
    pub decode_step: StepSchedule,
    pub prefill_chunk: StepSchedule,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeploymentPlan {
    pub name: String,
    pub model: ModelPlan,
    pub gpu: GpuPlan,
    pub layout: Layout,
    pub gpus_per_node: u64,
    pub launch: LaunchMode,
    /// Independent launch groups (Kubernetes replicas): DP replicas, or 1 for wide EP.
    pub groups: u64,
    pub nodes_per_group: u64,
    /// GPUs each pod (or each process group on a node) uses.
    pub gpus_per_pod: u64,
    /// Data-parallel ranks per node (DataParallel mode).
    pub dp_local: u64,
    pub engine: EnginePlan,
    pub network: NetworkPlan,
    pub kubernetes: KubernetesPlan,
    pub predicted: PredictedPlan,
    pub price_per_hour: Option<f64>,
    pub report: ReportData,
    pub comm: CommPlan,
}

impl DeploymentPlan {
    /// Nodes the deployment occupies.
    pub fn nodes(&self) -> u64 {
        match self.launch {
            LaunchMode::Replicas => {
                (self.groups * self.gpus_per_pod).div_ceil(self.gpus_per_node.max(1))
            }
            _ => self.groups * self.nodes_per_group,
        }
    }
}

/// Load-time model for the startup probe: a fixed part for engine start, torch.compile
/// and CUDA-graph capture, plus weight download/load at a conservative rate. [estimate]
pub const STARTUP_FIXED_SECONDS: f64 = 600.0;
pub const STARTUP_LOAD_BYTES_PER_SECOND: f64 = 250e6;

const GIB: u64 = 1 << 30;

fn err(code: Code, at: crate::span::FileSpan, message: String, help: &str) -> Diagnostic {
    Diagnostic::new(code, message)
        .primary(at.file, at.span, "here")
        .help(help.to_string())
}

/// A deployment whose layout is decided (written, or chosen by the planner), with its
/// analysis and, when the planner ran, its one search (the report's alternatives,
/// rejections and scaling curve come from it). Lowering never searches.
#[derive(Debug, Clone, Copy)]
pub struct Planned<'a> {
    pub scenario: &'a DeploymentScenario,
    pub analysis: &'a Analysis,
    pub search: Option<&'a crate::planner::Search>,
}

/// Lowers decided deployments. A deployment whose analysis found errors is left out; the
/// returned diagnostics say why a deployment cannot be lowered at all.
pub fn lower(p: &Program, planned: &[Planned<'_>]) -> (Plan, Vec<Diagnostic>) {
    let mut deployments = Vec::new();
    let mut diags = Vec::new();
    for d in planned {
        if d.analysis
            .findings
            .iter()
            .any(|f| f.severity == crate::diagnostics::Severity::Error)
        {
            continue;
        }
        match lower_one(p, d.scenario, d.analysis, d.search) {
            Ok(d) => deployments.push(d),
            Err(d) => diags.push(*d),
        }
    }
    (
        Plan {
            format_version: PLAN_FORMAT_VERSION,
            deployments,
        },
        diags,
    )
}

fn lower_one(
    p: &Program,
    ds: &DeploymentScenario,
    a: &Analysis,
    search: Option<&crate::planner::Search>,
) -> Result<DeploymentPlan, Box<Diagnostic>> {
    let def = p.def(ds.deploy).expect("scenario of a definition");
    let Body::Deploy(d) = &def.body else {
        unreachable!("scenarios come from deployments")
    };
    let s = &ds.scenario;
    let m = &s.model;
    let l = s.layout;
    let t = &s.topology;
    let at = d.layout_at;
    let fail = |message: String, help: &str| {
        Box::new(err(
            Code::UnsupportedLaunch,
            at,
            format!("deploy `{}`: {message}", def.name),
            help,
        ))
    };
    let model_def = d.model.and_then(|id| p.def(id));
    let source = d
        .model_source
        .clone()
        .or_else(|| m.hf.clone())
        .ok_or_else(|| {
            fail(
                "the model has no `hf` repository and the deployment no `model_source`".into(),
                "set `model_source = \"org/name\"` or a path",
            )
        })?;
    let quantization = if m.weights != m.dtype && !m.prequantized {
        match m.weights.as_str() {
            "fp8" => Some("fp8".to_string()),
            other => {
                return Err(fail(
                    format!("vLLM cannot quantize a {} checkpoint to `{other}` while loading", m.dtype),
                    "serve a checkpoint already in that format and mark the model `prequantized = true`",
                ))
            }
        }
    } else {
        None
    };
    let rg = l.replica_gpus();
    let per_node = t.gpus_per_node.max(1);
    let engine = &s.engine;
    let (launch, groups, nodes_per_group, gpus_per_pod, dp_local) = if l.ep
        && m.is_moe()
        && l.dp > 1
    {
        if rg > per_node || !per_node.is_multiple_of(rg) {
            return Err(fail(
                format!("with expert parallelism over data-parallel ranks, each rank's tp × pp ({rg} GPUs) must fit a {per_node}-GPU node"),
                "vLLM's data parallelism places whole DP ranks on nodes: use tp ≤ GPUs per node",
            ));
        }
        let dp_local = (per_node / rg).min(l.dp);
        if !l.dp.is_multiple_of(dp_local) {
            return Err(fail(
                format!(
                    "dp {} is not a multiple of the {dp_local} DP ranks per node",
                    l.dp
                ),
                "use a dp that fills whole nodes",
            ));
        }
        (
            LaunchMode::DataParallel,
            1,
            l.dp / dp_local,
            dp_local * rg,
            dp_local,
        )
    } else if rg <= per_node {
        (LaunchMode::Replicas, l.dp, 1, rg, 1)
    } else {
        if !rg.is_multiple_of(per_node) {
            return Err(fail(
                format!("a replica of {rg} GPUs is not a whole number of {per_node}-GPU nodes"),
                "use tp × pp that fills whole nodes",
            ));
        }
        let mode = if s.engine.ray {
            LaunchMode::MultiNodeRay
        } else {
            LaunchMode::MultiNode
        };
        (mode, l.dp, rg / per_node, per_node, 1)
    };
    let net = t_network(p, d.cluster);
    let gpu_def = d
        .cluster
        .and_then(|id| p.cluster(id))
        .and_then(|c| c.groups.first())
        .and_then(|g| p.node(g.node))
        .and_then(|n| n.gpu.and_then(|id| p.def(id)));
    let product = gpu_def
        .and_then(|g| match &g.body {
            Body::Gpu(x) => x.names.first().cloned(),
            _ => None,
        })
        .unwrap_or_else(|| t.gpu.name.clone())
        .replace(' ', "-");
    let weights_total = a.memory.stages.iter().map(|st| st.weights).sum::<f64>() * l.tp as f64;
    let st = a.memory.tightest();
    let pred = a.prediction.as_ref();
    Ok(DeploymentPlan {
        name: def.name.clone(),
        model: ModelPlan {
            name: model_def.map(|d| d.name.clone()).unwrap_or_default(),
            source,
            served_name: d
                .served_model_name
                .clone()
                .unwrap_or_else(|| def.name.clone()),
            weights: m.weights.clone(),
            kv_cache_dtype: (m.kv_cache != "auto").then(|| m.kv_cache.clone()),
            quantization,
            is_moe: m.is_moe(),
            parameters: m.parameters,
        },
        gpu: GpuPlan {
            name: t.gpu.name.clone(),
            product_label: product,
            memory_bytes: t.gpu.memory as u64,
        },
        layout: l,
        gpus_per_node: per_node,
        launch,
        groups,
        nodes_per_group,
        gpus_per_pod,
        dp_local,
        engine: EnginePlan {
            gpu_memory_utilization: engine.gpu_memory_utilization,
            max_model_len: engine.max_model_len,
            max_num_seqs: engine.max_num_seqs,
            max_num_batched_tokens: engine.max_num_batched_tokens,
            block_size: engine.block_size,
            enforce_eager: engine.enforce_eager,
            kv_cache_memory_bytes: engine.kv_cache_memory.map(|b| b as u64),
            cpu_offload_gib: (engine.cpu_offload > 0.0).then(|| engine.cpu_offload / GIB as f64),
            enable_prefix_caching: engine.enable_prefix_caching,
            port: engine.port,
        },
        network: net,
        kubernetes: KubernetesPlan {
            namespace: d.namespace.clone().unwrap_or_else(|| "default".into()),
            image: d.image.clone().unwrap_or_else(|| DEFAULT_IMAGE.into()),
            hf_token_secret: d
                .hf_token_secret
                .clone()
                .unwrap_or_else(|| "hf-token".into()),
            preflight_image: d.preflight_image.clone(),
            shm_bytes: (gpus_per_pod * GIB).clamp(2 * GIB, 32 * GIB),
            startup_seconds: (STARTUP_FIXED_SECONDS + weights_total / STARTUP_LOAD_BYTES_PER_SECOND)
                .ceil() as u64,
        },
        predicted: PredictedPlan {
            ttft_ms: pred.map(|p| p.ttft * 1e3).filter(|v| v.is_finite()),
            tpot_ms: pred.map(|p| p.tpot * 1e3),
            output_tokens_per_s: pred.map(|p| p.output_tokens_per_s),
            kv_cache_tokens: a.memory.kv_cache_tokens,
            weights_bytes_per_gpu: st.weights as u64,
        },
        price_per_hour: s.topology.price_per_node_hour,
        report: report_data(ds, a, search),
        comm: comm_plan(ds, a),
    })
}

/// The communicators and the per-step collective schedule the NCCL runtime replays.
fn comm_plan(ds: &DeploymentScenario, a: &Analysis) -> CommPlan {
    use crate::analysis::comm::{
        dcp_groups, ep_groups, pcp_groups, pp_pairs, step_comm, tp_groups, CommContext,
    };
    let s = &ds.scenario;
    let l = s.layout;
    let cx = CommContext::new(s);
    let mut groups = Vec::new();
    use crate::analysis::comm::GroupKind;
    let mut add = |kind: GroupKind, link: Option<&str>, members: Vec<Vec<u64>>, indexed: bool| {
        for (i, g) in members.into_iter().enumerate() {
            groups.push(GroupPlan {
                name: if indexed {
                    format!("{kind}.{i}")
                } else {
                    kind.to_string()
                },
                kind,
                link: link.map(str::to_string),
                members: g,
            });
        }
    };
    let tp_link = Some(cx.tp.link_name.as_str());
    add(GroupKind::Tp, tp_link, tp_groups(s), true);
    if l.pp > 1 {
        add(
            GroupKind::Pp,
            cx.pp.as_ref().map(|p| p.link_name.as_str()),
            pp_pairs(s),
            true,
        );
    }
    if l.ep && s.model.is_moe() {
        add(
            GroupKind::Ep,
            cx.ep.as_ref().map(|p| p.link_name.as_str()),
            ep_groups(s),
            true,
        );
    }
    if l.dcp > 1 {
        add(GroupKind::Dcp, tp_link, dcp_groups(s), true);
    }
    if l.pcp > 1 {
        add(GroupKind::Pcp, tp_link, pcp_groups(s), true);
    }
    if l.dp > 1 {
        // rank 0 of every replica: the DP "group" used for start-up and weight checks
        add(
            GroupKind::Dp,
            None,
            vec![(0..l.dp).map(|d| d * l.replica_gpus()).collect()],
            false,
        );
    }
    let parts = crate::analysis::memory::pp_partition(s.model.layers, l.pp);
    let schedule = |tokens: f64| {
        let mut stages = Vec::new();
        let mut first = 0;
        let mut total = 0.0;
        for (i, &count) in parts.iter().enumerate() {
            let last_stage = i + 1 == parts.len();
            let moe = (first..first + count)
                .filter(|x| crate::architecture::is_moe_layer(&s.model, *x))
                .count() as u64;
            let moe_first = (first..first + count)
                .find(|x| crate::architecture::is_moe_layer(&s.model, *x))
                .unwrap_or(first);
            let last = first + count.saturating_sub(1);
            let collectives = step_comm(s, &cx, tokens, count, moe, last_stage)
                .into_iter()
                .map(|c| {
                    total += c.time * 1e6;
                    let (layers, per_layer) = match c.group {
                        GroupKind::Pp => ([last, last], 1),
                        GroupKind::Ep => ([moe_first, last], c.count / moe.max(1)),
                        _ => ([first, last], c.count / count.max(1)),
                    };
                    CollectiveStep {
                        group_kind: c.group,
                        collective: c.collective.name().to_string(),
                        layers,
                        per_layer,
                        bytes: c.bytes.round() as u64,
                        dtype: "bf16".into(),
                        predicted_us: c.time * 1e6 / c.count.max(1) as f64,
                    }
                })
                .collect();
            stages.push(StageSchedule {
                stage: i as u64,
                layers: [first, last],
                collectives,
            });
            first += count;
        }
        StepSchedule {
            tokens: tokens.round() as u64,
            stages,
            predicted_us: total,
        }
    };
    let running = a.prediction.as_ref().map(|p| p.running).unwrap_or(1.0);
    let micro = (running / l.pp.max(1) as f64).max(1.0);
    CommPlan {
        world_size: l.gpus(),
        groups,
        decode_step: schedule(micro.ceil()),
        prefill_chunk: schedule(s.engine.max_num_batched_tokens as f64),
    }
}

fn report_data(
    ds: &DeploymentScenario,
    a: &Analysis,
    search: Option<&crate::planner::Search>,
) -> ReportData {
    use crate::analysis::comm::stage_gpus;
    use crate::program::SloMetric;
    let s = &ds.scenario;
    let l = s.layout;
    let per_node = s.topology.gpus_per_node.max(1);
    let per_replica = l.replica_gpus().max(1);
    let ranks = (0..l.gpus())
        .map(|r| {
            let within = r % per_replica;
            RankPlacement {
                rank: r,
                node: r / per_node,
                local_gpu: r % per_node,
                dp_replica: r / per_replica,
                pp_stage: within / stage_gpus(&l),
                tp_rank: within % l.tp.max(1),
                pcp_rank: (l.pcp > 1).then_some(within % stage_gpus(&l) / l.tp.max(1)),
                ep_group: l.ep.then_some(within / stage_gpus(&l)),
            }
        })
        .collect();
    let total = s.topology.gpu.memory as u64;
    let memory = a
        .memory
        .stages
        .iter()
        .map(|st| MemoryRow {
            stage: st.stage,
            layers: st.layers,
            total,
            weights: st.weights as u64,
            activations: st.activations as u64,
            non_torch: st.non_torch as u64,
            cuda_graphs: st.cuda_graphs as u64,
            kv_cache: st.kv_cache.max(0.0) as u64,
            free: (s.topology.gpu.memory - st.budget).max(0.0) as u64,
        })
        .collect();
    let p = a.prediction.as_ref();
    let slo = a
        .slo
        .iter()
        .map(|r| {
            let t = &r.target;
            let (metric, scale, unit) = match t.metric {
                SloMetric::Throughput => ("throughput".to_string(), 1.0, "tokens/s"),
                SloMetric::RequestRate => ("request_rate".to_string(), 1.0, "req/s"),
                m => (
                    format!("{}.{}", format!("{m:?}").to_lowercase(), t.percentile),
                    1e3,
                    "ms",
                ),
            };
            let upper = matches!(
                t.op,
                crate::syntax::ast::Op::Le | crate::syntax::ast::Op::Lt
            );
            let predicted = Some(r.predicted * scale).filter(|v| v.is_finite());
            let headroom = predicted.map(|v| {
                if upper {
                    (t.value * scale - v) / (t.value * scale) * 100.0
                } else {
                    (v - t.value) / t.value * 100.0
                }
            });
            SloRow {
                metric,
                op: t.op.as_str().to_string(),
                bound: t.value * scale,
                predicted,
                unit: unit.to_string(),
                met: r.met,
                headroom_percent: headroom,
            }
        })
        .collect();
    let step = p.map(|p| StepRow {
        tpot_ms: p.step.tpot * 1e3,
        compute_ms: p.step.compute * 1e3,
        memory_ms: p.step.memory * 1e3,
        communication_ms: p.step.comm * 1e3,
        overhead_ms: p.step.overhead * 1e3,
        bubble_ms: p.step.bubble * 1e3,
        collectives: p
            .step
            .comm_items
            .iter()
            .map(|c| CollectiveRow {
                group: c.group.to_string(),
                collective: c.collective.name().to_string(),
                count: c.count,
                bytes: c.bytes,
                ranks: c.ranks,
                link: c.link.clone(),
                time_ms: c.time * 1e3,
            })
            .collect(),
    });
    let nodes = l.gpus().div_ceil(per_node);
    let per_hour = s.topology.price_per_node_hour.map(|v| v * nodes as f64);
    let (prompt, output) = s
        .workload
        .map(|w| (w.prompt, w.output))
        .unwrap_or((0.0, 0.0));
    let rps = p.map(|p| p.requests_per_s);
    let per_million = |tokens_per_s: Option<f64>| match (per_hour, tokens_per_s) {
        (Some(c), Some(t)) if t > 0.0 => Some(c / (t * 3600.0) * 1e6),
        _ => None,
    };
    let cost = CostRow {
        per_hour,
        per_million_input_tokens: per_million(rps.map(|r| r * prompt)),
        per_million_output_tokens: per_million(p.map(|p| p.output_tokens_per_s)),
        nodes,
        gpus_used: l.gpus(),
        gpus_idle: nodes * per_node - l.gpus(),
    };
    let no_search;
    let search = match search {
        Some(s) => s,
        None => {
            no_search = crate::planner::Search::empty();
            &no_search
        }
    };
    let mut alternatives: Vec<AlternativeRow> = search
        .ranked
        .iter()
        .take(10)
        .map(|c| AlternativeRow {
            layout: c.describe(),
            gpus: c.gpus,
            cost_per_hour: c.priced.then_some(c.cost_per_hour),
            cost_per_million_output: c.cost_per_million_output,
            ttft_ms: c.ttft_ms,
            tpot_ms: c.tpot_ms,
            output_tokens_per_s: c.output_tokens_per_s,
            chosen: c.layout == l && c.weights == s.model.weights && c.kv_cache == s.model.kv_cache,
        })
        .collect();
    if !alternatives.iter().any(|a| a.chosen) {
        alternatives.insert(
            0,
            AlternativeRow {
                layout: format!("{l}"),
                gpus: l.gpus(),
                cost_per_hour: per_hour,
                cost_per_million_output: cost.per_million_output_tokens,
                ttft_ms: p.map(|p| p.ttft * 1e3).filter(|v| v.is_finite()),
                tpot_ms: p.map(|p| p.tpot * 1e3),
                output_tokens_per_s: p.map(|p| p.output_tokens_per_s),
                chosen: true,
            },
        );
    }
    ReportData {
        ranks,
        memory,
        kv_cache_tokens: a.memory.kv_cache_tokens,
        max_concurrency: a.memory.max_concurrency,
        prompt_tokens: prompt,
        output_tokens: output,
        requests_per_s: rps,
        slo,
        step,
        cost,
        alternatives,
        rejected: search.rejected.clone(),
        scaling: search.scaling.clone(),
        worse_from_gpus: search.worse_from_gpus,
        planner_evaluated: search.evaluated,
    }
}

/// The network profile of a deployment's cluster (the cluster's, else its nodes').
fn t_network(p: &Program, cluster: Option<crate::program::DefId>) -> NetworkPlan {
    let c = cluster.and_then(|id| p.cluster(id));
    let node_net = c
        .and_then(|c| c.groups.first())
        .and_then(|g| p.node(g.node))
        .and_then(|n| n.network);
    let id = c.and_then(|c| c.network).or(node_net);
    match id.and_then(|id| p.network(id)) {
        Some(n) => NetworkPlan {
            rdma_resource: n
                .resource
                .clone()
                .filter(|_| n.resource_count > 0)
                .map(|r| (r, n.resource_count)),
            capabilities: n.capabilities.clone(),
            annotations: n.annotations.clone(),
            env: n.env.clone(),
            socket_ifname: n.socket_ifname.clone(),
            host_network: n.host_network,
        },
        None => NetworkPlan {
            rdma_resource: None,
            capabilities: Vec::new(),
            annotations: Vec::new(),
            env: Vec::new(),
            socket_ifname: "eth0".into(),
            host_network: false,
        },
    }
}
