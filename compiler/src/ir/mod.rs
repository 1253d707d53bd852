//! The IR: two contracts between the compiler and its targets.
//!
//! - [`LaunchPlan`]: what to run — engines, flags, placement, ranks, environment,
//!   Kubernetes settings, routing. The vLLM, Kubernetes and NCCL targets render this and
//!   nothing else, so a refit of the performance model cannot change a launch script.
//! - [`Forecast`]: what dic predicts — memory per stage, TTFT/TPOT/throughput, costs,
//!   alternatives, scaling ([`forecast`]). The report renders it beside the launch plan.
//!
//! Targets never see the AST, the program or the analysis: they import this module only
//! (`compiler/tests/layers.rs`'s target check). Built by [`lower`] from the checked
//! program, each decided deployment's analysis and the analysis's figures for the
//! forecast; lowering reads numbers, it does no prediction maths. Both contracts are
//! `Serialize + Deserialize` with a stable field order and a format version: the tests
//! freeze one launch plan per example (`tests/fixtures/launch/`) and render the targets'
//! snapshots from it.

use crate::analysis::{Analysis, DeploymentScenario};
use crate::diagnostics::{Code, Diagnostic};
use crate::program::{Body, Program};
use crate::schema::EngineOption;
use serde::{Deserialize, Serialize};

mod comm;
mod forecast;
mod gateway;
mod launch;
mod lora;
mod report;
mod safety;

pub use forecast::*;
pub use gateway::{
    GatewayPlan, PdRouting, RoutingSidecar, ScorerWeight, KV_CACHE_SCORER, PREFIX_CACHE_SCORER,
    QUEUE_SCORER, ROUTING_SIDECAR_IMAGE, SIDECAR_NIXL_CONNECTOR,
};
pub use lora::{kv_offload_words, lora_words, KvOffload, LoraSettings};

/// The types of the analysis and the program that are part of the contract as they are
/// (plain data, serialized the same way in both).
pub use crate::analysis::comm::{Collective, DType, GroupKind};
pub use crate::program::{Autoscale, Layout, LinkType, ModelCache, PodSettings, Pool};
/// The checker's naming rules, which the Kubernetes target applies to the same values:
/// a deployment's object name, a toleration's parts.
pub use crate::text_rules::{kubernetes_name, toleration};

/// Bumped when the launch plan's meaning changes (2: the forecast moved out).
pub const PLAN_FORMAT_VERSION: u32 = 2;
/// vLLM image the targets pin by default (the release dic's flags are checked against).
pub const DEFAULT_IMAGE: &str = crate::schema::dic_defaults::IMAGE;
/// The same release's ROCm image, the default on AMD GPUs.
pub const ROCM_IMAGE: &str = crate::schema::dic_defaults::ROCM_IMAGE;
/// Default API port of `vllm serve`.
pub const DEFAULT_PORT: u64 = crate::schema::vllm_defaults::PORT;
/// Port for vLLM's data-parallel RPC (`--data-parallel-rpc-port`).
pub const DP_RPC_PORT: u64 = 13345;
/// torch.distributed rendezvous port for `--nnodes` launches (vLLM's default).
pub const MASTER_PORT: u64 = 29501;
/// The format of the NCCL runtime's plan file, written by the nccl target and checked by
/// `dic run` (docs/nccl-plan.md).
pub const NCCL_PLAN_FORMAT: &str = "dic-nccl-plan/1";
/// Ray head port.
pub const RAY_PORT: u64 = 6379;

/// What to run: every decided deployment's launch facts, in program order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LaunchPlan {
    pub format_version: u32,
    /// The dic release that compiled it (the package version: a commit would make every
    /// build's outputs differ).
    pub dic_version: String,
    /// The user's source files it was compiled from (not the stdlib, which the version
    /// names), root first.
    pub inputs: Vec<InputDigest>,
    pub deployments: Vec<DeploymentPlan>,
}

/// One source file by its path relative to the root file's folder and the SHA-256 of its
/// bytes (what `sha256sum` prints), so a report names exactly what it was made from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct InputDigest {
    pub path: String,
    pub sha256: String,
}

/// The digest of every user file in `db`, root first (its path relative to the root's
/// folder, so the result does not depend on where dic ran).
pub fn input_digests(db: &crate::source::SourceDb) -> Vec<InputDigest> {
    use sha2::{Digest, Sha256};
    let mut files = db.iter().filter(|(_, f)| !f.is_stdlib).map(|(_, f)| f);
    let Some(root) = files.next() else {
        return Vec::new();
    };
    let dir = root.name.rfind('/').map(|i| &root.name[..=i]).unwrap_or("");
    std::iter::once(root)
        .chain(files)
        .map(|f| InputDigest {
            path: f.name.strip_prefix(dir).unwrap_or(&f.name).to_string(),
            sha256: Sha256::digest(f.text.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        })
        .collect()
}

impl Default for LaunchPlan {
    fn default() -> Self {
        LaunchPlan {
            format_version: PLAN_FORMAT_VERSION,
            dic_version: env!("CARGO_PKG_VERSION").to_string(),
            inputs: Vec::new(),
            deployments: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
    /// `--mamba-ssm-cache-dtype` value when the model keeps its recurrent (Mamba / linear
    /// attention) states in a dtype of its own (the memory model assumes the same).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mamba_ssm_cache_dtype: Option<String>,
    pub is_moe: bool,
    pub parameters: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GpuPlan {
    pub name: String,
    /// Values of the `nvidia.com/gpu.product` node label (GPU Feature Discovery writes
    /// the NVML name with spaces as `-`); empty when the GPU names none, and then the pods
    /// get no node affinity (W0801) rather than one no node satisfies.
    pub product_labels: Vec<String>,
    /// The device plugin's extended resource: `nvidia.com/gpu`, or `amd.com/gpu` (AMD's
    /// device plugin hands each container `/dev/kfd` and the GPUs' `/dev/dri` nodes with
    /// it: ROCm/k8s-device-plugin `Plugin.Allocate`, so pods mount no device themselves).
    pub resource: String,
    pub memory_bytes: u64,
}

/// How the processes of one deployment are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EnginePlan {
    pub gpu_memory_utilization: f64,
    pub max_model_len: u64,
    pub max_num_seqs: u64,
    pub max_num_batched_tokens: u64,
    /// Always emitted: dic's KV arithmetic assumes it (16, or 64 for MLA, by default).
    pub block_size: u64,
    pub enforce_eager: bool,
    /// `compilation_config.cudagraph_mode` in vLLM's spelling (`FULL_DECODE_ONLY`), when
    /// the file sets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cudagraph_mode: Option<String>,
    pub kv_cache_memory_bytes: Option<u64>,
    /// `--cpu-offload-gb`, when weights are offloaded.
    pub cpu_offload_gib: Option<f64>,
    pub enable_prefix_caching: Option<bool>,
    pub port: u64,
    /// `--all2all-backend`, when written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all2all_backend: Option<String>,
    /// `--enable-dbo` (dual batch overlap), when on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dbo: bool,
    /// Speculative decoding (`--spec-method`, `--spec-model`, `--spec-tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculative: Option<SpeculativePlan>,
    /// LoRA adapters (`lora = { … }`): `--enable-lora` and its flags, after the table's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<LoraSettings>,
    /// KV offloading to CPU memory (`kv_offload = { … }`), after LoRA's flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_offload: Option<KvOffload>,
    /// The user's own `vllm serve` words, appended after dic's (checked by `vllm_args`).
    pub extra_args: Vec<String>,
    /// The user's environment for the vLLM processes.
    pub env: Vec<(String, String)>,
}

/// Speculative decoding as launched (the acceptance the prediction assumed is in the
/// forecast).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SpeculativePlan {
    pub method: String,
    /// `--spec-model`: the EAGLE head or the draft model (none for mtp and ngram).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub tokens: u64,
}

/// An engine option's value on vLLM's command line.
#[derive(Debug, Clone, PartialEq)]
pub enum FlagValue {
    /// `--flag VALUE`
    Text(String),
    /// Several `--flag VALUE` pairs, in order.
    Flags(Vec<(&'static str, String)>),
    /// a switch: its `on` flag when true, its `off` flag when false
    Switch(bool),
}

impl EnginePlan {
    /// What engine option `option` (a row of the schema's engine table) puts on vLLM's
    /// command line; `None` when nothing (unset, or the option is dic's own). Exhaustive:
    /// an option added to the table is given its flag here or the build fails.
    pub fn flag_value(&self, option: EngineOption) -> Option<FlagValue> {
        let text = |v: String| Some(FlagValue::Text(v));
        match option {
            EngineOption::Port => text(self.port.to_string()),
            EngineOption::GpuMemoryUtilization => text(format!("{}", self.gpu_memory_utilization)),
            EngineOption::MaxModelLen => text(self.max_model_len.to_string()),
            EngineOption::MaxNumSeqs => text(self.max_num_seqs.to_string()),
            EngineOption::MaxNumBatchedTokens => text(self.max_num_batched_tokens.to_string()),
            EngineOption::BlockSize => text(self.block_size.to_string()),
            EngineOption::EnforceEager => self.enforce_eager.then_some(FlagValue::Switch(true)),
            EngineOption::CudagraphMode => self.cudagraph_mode.clone().and_then(text),
            EngineOption::KvCacheMemory => {
                self.kv_cache_memory_bytes.and_then(|b| text(b.to_string()))
            }
            EngineOption::EnablePrefixCaching => self.enable_prefix_caching.map(FlagValue::Switch),
            EngineOption::CpuOffload => self.cpu_offload_gib.and_then(|g| text(format!("{g}"))),
            EngineOption::All2allBackend => self.all2all_backend.clone().and_then(text),
            EngineOption::Dbo => self.dbo.then_some(FlagValue::Switch(true)),
            EngineOption::Speculative => self.speculative.as_ref().map(|sp| {
                let mut flags = vec![("--spec-method", sp.method.clone())];
                if let Some(m) = &sp.model {
                    flags.push(("--spec-model", m.clone()));
                }
                flags.push(("--spec-tokens", sp.tokens.to_string()));
                FlagValue::Flags(flags)
            }),
            // dic's own: how it launches, what it passes through, what it estimates.
            EngineOption::Launcher
            | EngineOption::ExtraArgs
            | EngineOption::Env
            | EngineOption::ActivationMemory
            | EngineOption::NonTorchMemory
            | EngineOption::CudaGraphMemory => None,
        }
    }

    /// The engine options' words on vLLM's command line, in the order of the schema's
    /// table ([`crate::schema::VLLM_OPTIONS`]): every option dic resolved, so vLLM and
    /// dic's memory model agree. The user's `extra_args` are not among them.
    pub fn option_words(&self) -> Vec<String> {
        use crate::schema::{VllmFlag, VLLM_OPTIONS};
        let mut words: Vec<String> = Vec::new();
        let flag = |words: &mut Vec<String>, f: &str, v: String| {
            words.push(f.to_string());
            words.push(v);
        };
        for option in VLLM_OPTIONS {
            match (option.vllm, option.engine.and_then(|e| self.flag_value(e))) {
                (Some(VllmFlag::Value(f) | VllmFlag::WhenSet(f)), Some(FlagValue::Text(v))) => {
                    flag(&mut words, f, v)
                }
                (Some(VllmFlag::Flags(_)), Some(FlagValue::Flags(pairs))) => {
                    for (f, v) in pairs {
                        flag(&mut words, f, v);
                    }
                }
                (Some(VllmFlag::Switch { on, .. }), Some(FlagValue::Switch(true))) => {
                    words.push(on.to_string())
                }
                (Some(VllmFlag::Switch { off: Some(off), .. }), Some(FlagValue::Switch(false))) => {
                    words.push(off.to_string())
                }
                _ => {}
            }
        }
        words.extend(self.lora.as_ref().map(lora_words).unwrap_or_default());
        words.extend(
            self.kv_offload
                .as_ref()
                .map(kv_offload_words)
                .unwrap_or_default(),
        );
        words
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NetworkPlan {
    /// RDMA device resource and count per pod.
    pub rdma_resource: Option<(String, u64)>,
    pub capabilities: Vec<String>,
    pub annotations: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
    /// The interface for NCCL/Gloo bootstrap traffic when the profile names one; when it
    /// does not, launch scripts leave the choice to NCCL and Gloo (and say so), and pods
    /// outside the host network use `eth0`, the pod's interface.
    pub socket_ifname: Option<String>,
    pub host_network: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KubernetesPlan {
    /// Written into the objects only when the file sets one (so `kubectl apply -n` works).
    pub namespace: Option<String>,
    /// The user's image, else vLLM's own for the GPU's platform ([`DEFAULT_IMAGE`], or
    /// [`ROCM_IMAGE`] on AMD GPUs).
    pub image: String,
    /// Secret holding the Hugging Face token under key `token` (referenced, optional).
    pub hf_token_secret: String,
    /// Secret holding the API key under `api-key`, exposed as VLLM_API_KEY (required).
    pub api_key_secret: Option<String>,
    /// Image with `dic` for the preflight Job; no Job when absent.
    pub preflight_image: Option<String>,
    pub shm_bytes: u64,
    /// Seconds the startup probe allows for download, load, compile and graph capture.
    pub startup_seconds: u64,
    /// CPU cores each vLLM pod requests ([`pod_cpu`]); no CPU limit.
    pub cpu: u64,
    /// Memory each vLLM pod requests and is limited to ([`pod_memory`]), in bytes.
    pub memory_bytes: u64,
    /// Bytes of the checkpoint a pod downloads (the whole model, every shard).
    pub checkpoint_bytes: u64,
    /// The user's pod settings (`pod = { … }`); CPU and memory above are already theirs
    /// when they set them.
    pub pod: crate::program::PodSettings,
    pub model_cache: crate::program::ModelCache,
    pub autoscale: Option<crate::program::Autoscale>,
    /// `podmonitor` or `servicemonitor`.
    pub monitoring: Option<String>,
    /// An InferencePool and endpoint picker in front of the pods (`routing`); absent: a
    /// plain Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewayPlan>,
    /// The disruption budget and rollout sized from N−1 (`planner::failure`); `None`:
    /// dic's defaults (one replica down, no surge).
    #[serde(default)]
    pub disruption: Option<Disruption>,
}

/// How many replicas may be down at once with the SLOs held, and how a rollout replaces
/// them (`planner::Failure`): the PodDisruptionBudget's `maxUnavailable`, and the rolling
/// update's `maxUnavailable` / `maxSurge`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disruption {
    /// Most replicas voluntarily evicted at once (0: a drain waits rather than break the
    /// SLOs).
    pub budget: u64,
    pub rollout_max_unavailable: u64,
    /// 1 only where the cluster has a replica's GPUs spare.
    pub rollout_max_surge: u64,
}

impl Disruption {
    /// From N−1's figures: the budget as computed; the rollout takes that many down, or,
    /// when none may go, surges one where the GPUs are spare, else takes one down anyway
    /// (Kubernetes refuses both at 0; W0410 said the SLOs break then).
    pub fn from_failure(f: &crate::planner::Failure) -> Disruption {
        Disruption::sized(f.disruption_budget, f.surge)
    }

    /// From a budget (replicas that may be down with the SLOs held) and whether the GPUs
    /// of one replica more are spare (`surge` ≥ 1), as [`Disruption::from_failure`] says.
    pub fn sized(budget: u64, surge: u64) -> Disruption {
        let surge = surge.min(1);
        Disruption {
            budget,
            rollout_max_unavailable: if budget > 0 || surge == 0 {
                budget.max(1)
            } else {
                0
            },
            rollout_max_surge: if budget == 0 { surge } else { 0 },
        }
    }
}

/// CPU cores a vLLM pod requests: 4 for the API server, tokenizer and scheduler plus 4 per
/// GPU (a worker process per GPU, its loader threads and NCCL's proxy thread). Public
/// manifests ask 2–10 for one GPU (vLLM docs) and 32–125 for eight (llm-d, LWS example);
/// this rule gives 8 and 36. No limit: a CPU limit throttles the tokenizer and CUDA-graph
/// capture under load. [rule; reference/kubernetes.md §2.1]
pub fn pod_cpu(gpus: u64) -> u64 {
    4 + 4 * gpus
}

/// Memory a vLLM pod requests and is limited to
/// ([`crate::analysis::kv_offload::pod_host_memory`]: the API server, the GPU workers,
/// `/dev/shm` and what each GPU keeps in CPU memory). Capped at `cap` (90% of the pod's
/// share of the node's `cpu_memory`, [`crate::analysis::kv_offload::pod_memory_cap`]) when
/// the node states it, so the rule never asks more than the node has; with `kv_offload`
/// the checker refuses a buffer that would be cut by the cap (E0508), so the request
/// always holds it. [rule; reference/kubernetes.md §2.1–2.2]
pub fn pod_memory(gpus: u64, shm_bytes: u64, host_bytes_per_gpu: u64, cap: Option<u64>) -> u64 {
    let want = crate::analysis::kv_offload::pod_host_memory(gpus, shm_bytes, host_bytes_per_gpu);
    match cap {
        Some(cap) if cap > 0 => want.min(cap),
        _ => want,
    }
}

pub use crate::analysis::comm::RankPlacement;

/// A communicator the runtime builds: its kind, index and member ranks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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

/// One collective that the layers in `layers` run `per_layer` times each, `calls` in all.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CollectiveStep {
    pub group_kind: crate::analysis::comm::GroupKind,
    pub collective: crate::analysis::comm::Collective,
    /// Inclusive layer range (for the stage hand-off: the stage's last layer).
    pub layers: [u64; 2],
    pub per_layer: u64,
    /// Calls per step on the stage: `layers × per_layer` for a uniform model, fewer when
    /// some layers lack the block (a hybrid model's attention-only or FFN-only layers).
    pub calls: u64,
    /// Bytes per call, per rank (AllReduce buffer, All-to-All send total, message size).
    pub bytes: u64,
    pub dtype: crate::analysis::comm::DType,
    /// dic's predicted time of one call, microseconds.
    pub predicted_us: f64,
    /// The α-β figures that prediction used: the link's type, its effective bandwidth
    /// per rank and direction (GB/s) and latency (µs), so `dic run` predicts the same
    /// call at the size it runs (`--scale`).
    pub link_type: crate::program::LinkType,
    pub link_bandwidth_gbps: f64,
    pub link_latency_us: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageSchedule {
    pub stage: u64,
    pub layers: [u64; 2],
    pub collectives: Vec<CollectiveStep>,
}

/// The communication of one forward pass: `tokens` tokens per micro-batch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepSchedule {
    pub tokens: u64,
    pub stages: Vec<StageSchedule>,
    /// Sum over stages of every call's predicted time, microseconds.
    pub predicted_us: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CommPlan {
    pub world_size: u64,
    /// Every rank's node, GPU and position: the report, the NCCL plan and the launch
    /// scripts read this one placement.
    pub ranks: Vec<RankPlacement>,
    pub groups: Vec<GroupPlan>,
    pub decode_step: StepSchedule,
    pub prefill_chunk: StepSchedule,
}

/// A deployment whose replicas span node groups is lowered once per group: this part.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartOf {
    /// The deployment's own name (its Service and labels).
    pub deployment: String,
    pub replicas: u64,
    pub of: u64,
    /// The first part carries the deployment's Service, selecting every part's pods.
    pub first: bool,
}

/// The KV connector both pools of a disaggregated deployment run: vLLM's NIXL connector,
/// each engine both sending and receiving (vLLM's documented P/D setup).
pub const KV_TRANSFER_CONFIG: &str = r#"{"kv_connector":"NixlConnector","kv_role":"kv_both"}"#;
/// First port of NIXL's handshake side channel (`VLLM_NIXL_SIDE_CHANNEL_PORT`, vLLM's
/// default); each worker of an engine listens on it plus its rank.
pub const NIXL_SIDE_CHANNEL_PORT: u64 = 5600;

/// One pool of a disaggregated deployment as launched: its role, the connector, and what
/// the router in front of both pools needs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DisaggPlan {
    /// The deployment's own name: the router and the client Service carry it.
    pub deployment: String,
    pub role: crate::program::Pool,
    /// The other pool's plan name (`<deployment>-prefill`, `<deployment>-decode`).
    pub peer: String,
    /// `--kv-transfer-config` ([`KV_TRANSFER_CONFIG`]).
    pub kv_transfer_config: String,
    /// The transfer crosses nodes: the pods get the network profile's RDMA devices.
    pub crosses_nodes: bool,
    /// Port the router listens on (the deployment's port).
    pub router_port: u64,
    /// Each pool's servers as scripts reach them: (cluster node, API port), in replica
    /// order (filled once both pools are lowered).
    pub prefill_servers: Vec<(String, u64)>,
    pub decode_servers: Vec<(String, u64)>,
    /// The other pool's groups span nodes (a LeaderWorkerSet on Kubernetes).
    pub peer_spans_nodes: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeploymentPlan {
    /// The deployment's name, `<deployment>-<node>` for one node group's part, or
    /// `<deployment>-prefill` / `-decode` for a disaggregated deployment's pool.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part_of: Option<PartOf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disaggregated: Option<DisaggPlan>,
    /// The cluster node each of the deployment's nodes is (`dgx_h100-3`: the node group's
    /// node and its index in the group), from the cluster's accounting.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cluster_nodes: Vec<String>,
    /// The API port of each replica's server (scripts; several may share a node).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replica_ports: Vec<u64>,
    pub model: ModelPlan,
    pub gpu: GpuPlan,
    pub layout: Layout,
    pub gpus_per_node: u64,
    /// GPUs of one NVLink domain (72 on GB200 NVL72, the node's GPUs on an HGX board, 1
    /// without a scale-up link): a group that spans nodes inside one domain talks over
    /// multi-node NVLink, which needs an IMEX channel (a ComputeDomain on Kubernetes).
    pub nvlink_domain_gpus: u64,
    /// The transport NCCL must use between the nodes of a group, as `dic run
    /// --expect-transport` spells it (`net-ib`, `net-ofi`, `net-socket`, `nvlink`); absent
    /// when no group spans nodes or the fabric has no NCCL transport dic knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fabric_transport: Option<String>,
    /// Nodes the deployment occupies, as the rank placement uses them
    /// (`Topology::nodes_for_layout`).
    pub nodes: u64,
    pub launch: LaunchMode,
    /// Independent launch groups (Kubernetes replicas): DP replicas, or 1 for wide EP.
    pub groups: u64,
    pub nodes_per_group: u64,
    /// GPUs each pod (or each process group on a node) uses.
    pub gpus_per_pod: u64,
    /// Data-parallel ranks per node (DataParallel mode).
    pub dp_local: u64,
    /// Nodes each data-parallel rank spans (DataParallel mode; vLLM's `nnodes_within_dp`):
    /// 1 unless a MoE engine's rank is wider than a node.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub nodes_per_dp_rank: u64,
    pub engine: EnginePlan,
    pub network: NetworkPlan,
    pub kubernetes: KubernetesPlan,
    pub comm: CommPlan,
}

/// Load-time model for the startup probe: a fixed part for engine start, torch.compile
/// and CUDA-graph capture, plus weight download/load at a conservative rate. [estimate]
pub const STARTUP_FIXED_SECONDS: f64 = 600.0;
pub const STARTUP_LOAD_BYTES_PER_SECOND: f64 = 250e6;

const GIB: u64 = 1 << 30;

/// A deployment whose layout is decided (written, or chosen by the planner), with its
/// analysis, the figures its forecast needs beyond the analysis, and, when the planner
/// ran, its one search (the report's alternatives, rejections and scaling curve come from
/// it). Lowering never searches and never predicts.
#[derive(Debug, Clone, Copy)]
pub struct Planned<'a> {
    pub scenario: &'a DeploymentScenario,
    pub analysis: &'a Analysis,
    pub figures: &'a crate::analysis::forecast::ForecastFigures,
    pub search: Option<&'a crate::planner::Search>,
    /// The what-if across GPU types, ranked (empty where it did not run): the report's
    /// "Which GPU".
    pub whatif: &'a [crate::planner::whatif::WhatIf],
    /// Where the cluster's accounting put its replicas (empty: packed from node 0, as
    /// the analysis placed them).
    pub slots: &'a [crate::analysis::allocation::Slot],
    /// A split's N−1, the pair's (`planner::pool_failure`), for both pools' disruption
    /// budgets and the report; `None` for any other deployment, or without a figure.
    pub pool_failure: Option<&'a crate::planner::PoolFailure>,
}

/// Lowers decided deployments into the launch plan and the forecast (one entry each, in
/// the same order). A deployment whose analysis found errors is left out; the returned
/// diagnostics say why a deployment cannot be lowered at all.
pub fn lower(p: &Program, planned: &[Planned<'_>]) -> (LaunchPlan, Forecast, Vec<Diagnostic>) {
    let mut deployments = Vec::new();
    let mut forecasts = Vec::new();
    let mut diags = Vec::new();
    for d in planned {
        if d.analysis
            .findings
            .iter()
            .any(|f| f.severity == crate::diagnostics::Severity::Error)
        {
            continue;
        }
        match launch::lower_one(d, p) {
            Ok((d, f, warnings)) => {
                deployments.push(d);
                forecasts.push(f);
                diags.extend(warnings);
            }
            Err(d) => diags.push(*d),
        }
    }
    connect_pools(&mut deployments);
    forecasts.retain(|f| deployments.iter().any(|d| d.name == f.name));
    (
        LaunchPlan {
            deployments,
            ..LaunchPlan::default()
        },
        Forecast {
            deployments: forecasts,
            ..Forecast::default()
        },
        diags,
    )
}

/// Gives each pool of a disaggregated deployment the servers of both pools (the router
/// reaches each by its cluster node and port). A pool whose peer was not lowered (its
/// own errors) is dropped: half a P/D pair serves nothing.
fn connect_pools(deployments: &mut Vec<DeploymentPlan>) {
    let servers = |d: &DeploymentPlan| -> Vec<(String, u64)> {
        let per = d.layout.replica_gpus().max(1) as usize;
        d.comm
            .ranks
            .chunks(per)
            .enumerate()
            .map(|(i, r)| {
                let node = r.first().map(|x| x.node).unwrap_or(0);
                let name = d
                    .cluster_nodes
                    .get(node as usize)
                    .cloned()
                    .unwrap_or_else(|| format!("node-{node}"));
                let port = d.replica_ports.get(i).copied().unwrap_or(d.engine.port);
                (name, port)
            })
            .collect()
    };
    let spans = |d: &DeploymentPlan| d.nodes_per_group > 1 && d.launch != LaunchMode::Replicas;
    // Each pool's name, its servers (cluster node, port), and whether its groups span nodes.
    type Pool = (String, Vec<(String, u64)>, bool);
    let found: Vec<Pool> = deployments
        .iter()
        .filter(|d| d.disaggregated.is_some())
        .map(|d| (d.name.clone(), servers(d), spans(d)))
        .collect();
    deployments.retain(|d| {
        d.disaggregated
            .as_ref()
            .is_none_or(|x| found.iter().any(|(n, _, _)| *n == x.peer))
    });
    for d in deployments.iter_mut() {
        let name = d.name.clone();
        let Some(x) = d.disaggregated.as_mut() else {
            continue;
        };
        let of = |n: &str| {
            found
                .iter()
                .find(|(m, _, _)| m == n)
                .map(|(_, s, _)| s.clone())
                .unwrap_or_default()
        };
        x.peer_spans_nodes = found.iter().any(|(m, _, sp)| *m == x.peer && *sp);
        let (prefill, decode) = match x.role {
            crate::program::Pool::Prefill => (of(&name), of(&x.peer)),
            crate::program::Pool::Decode => (of(&x.peer), of(&name)),
        };
        x.prefill_servers = prefill;
        x.decode_servers = decode;
    }
}

/// Serde's default for counts that are 1 unless said otherwise.
fn one() -> u64 {
    1
}

/// Whether a count is 1 (left out of the plan's JSON).
fn is_one(n: &u64) -> bool {
    *n == 1
}
