//! A deployment's settings blocks as the checker reads them (`pod`, `model_cache`,
//! `routing`, `lora`, `kv_offload`, `autoscale`, `calibration`): plain typed values, with
//! dic's defaults left to the stages that apply them. Part of [`super`], the checked
//! program.

/// A deployment's `pod = { … }` settings (absent fields: dic's rules).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PodSettings {
    pub cpu: Option<u64>,
    pub memory: Option<f64>,
    /// (key, value) pairs, in source order.
    pub node_selector: Vec<(String, String)>,
    /// `key[=value][:Effect]` as written.
    pub tolerations: Vec<String>,
    pub runtime_class: Option<String>,
    pub service_account: Option<String>,
    pub image_pull_secrets: Vec<String>,
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
    pub priority_class: Option<String>,
}

/// Where the pods keep the checkpoint.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelCache {
    /// An emptyDir on the node's disk; `size` overrides dic's (checkpoint + 10%).
    EmptyDir { size: Option<f64> },
    /// A PersistentVolumeClaim; with `size` dic creates it and a download Job.
    Pvc {
        claim: String,
        size: Option<f64>,
        storage_class: Option<String>,
    },
    /// A folder staged on every node.
    HostPath(String),
}

/// A deployment's `routing = { … }`: a Gateway API inference pool in front of its pods.
/// Weights left unset are `None` (lowering fills dic's defaults, which depend on the
/// workload).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GatewayRouting {
    pub gateway: String,
    pub gateway_namespace: Option<String>,
    pub queue_weight: Option<u64>,
    pub kv_weight: Option<u64>,
    pub prefix_weight: Option<u64>,
    pub epp_image: Option<String>,
}

/// A deployment's `lora = { … }`: adapters served beside the base model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoraSettings {
    /// (name, path) pairs for `--lora-modules`, in source order.
    pub adapters: Vec<(String, String)>,
    pub max_loras: u64,
    pub max_rank: u64,
    /// `None`: vLLM's default, `max_loras`.
    pub max_cpu_loras: Option<u64>,
}

/// A deployment's `kv_offload = { … }`: KV blocks kept in CPU memory.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KvOffload {
    /// Bytes per engine, summed over its TP ranks.
    pub size: f64,
    /// `native` or `lmcache`.
    pub backend: String,
}

/// A deployment's `autoscale = { … }`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Autoscale {
    pub min: u64,
    pub max: u64,
    pub waiting: u64,
    pub keda: bool,
    pub prometheus: Option<String>,
}

/// Correction factors fitted on a deployment's own engines (`dic observe --calibrate`):
/// the model's decode step and prompt prefill are multiplied by them. 1 where unset.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Calibration {
    pub step_time: f64,
    pub prefill_time: f64,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration {
            step_time: 1.0,
            prefill_time: 1.0,
        }
    }
}
