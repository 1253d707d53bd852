//! Inference routing through the Gateway API Inference Extension, as launched: the
//! decision (`routing = { gateway = … }`) and the endpoint picker's scorer weights, which
//! follow the `.dist` and its workload. The Kubernetes target renders it as an
//! InferencePool over the model-server pods, llm-d's endpoint picker (EPP) and an
//! HTTPRoute from the named Gateway (`targets/src/k8s/gateway.rs`).
//!
//! Plugin names and defaults are llm-d-inference-scheduler v0.8.0's
//! (`deploy/config/epp-precise-prefix-cache-config.yaml`; the scorers are the Gateway API
//! Inference Extension v1.5.0's, which it builds on).

use crate::analysis::Scenario;
use crate::program::GatewayRouting;
use crate::schema::dic_defaults;
use serde::{Deserialize, Serialize};

/// The endpoint picker's scorer of waiting requests (`vllm:num_requests_waiting`).
pub const QUEUE_SCORER: &str = "queue-scorer";
/// Its scorer of KV-cache use (`vllm:kv_cache_usage_perc`): the emptiest cache wins.
pub const KV_CACHE_SCORER: &str = "kv-cache-utilization-scorer";
/// Its approximate prefix-cache scorer: the server that most likely holds the prompt's
/// prefix, from the prompts the picker itself sent there.
pub const PREFIX_CACHE_SCORER: &str = "prefix-cache-scorer";

/// The deployment's pods behind an InferencePool and its endpoint picker.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GatewayPlan {
    /// The Gateway the HTTPRoute attaches to (dic does not create it).
    pub gateway: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway_namespace: Option<String>,
    /// The endpoint picker's image.
    pub epp_image: String,
    /// The scorers the picker loads, with their weights (each above 0), in profile order.
    pub scorers: Vec<ScorerWeight>,
}

/// One scorer of the endpoint picker's profile and its weight.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ScorerWeight {
    pub plugin: String,
    pub weight: u64,
}

/// The launch facts of `routing`: the user's weights, else dic's defaults; the prefix
/// scorer by default only when the workload declares reused prefixes (`prefix_reuse`,
/// `shared_prefix`), where it sends a prompt to the server whose cache holds its prefix.
/// A scorer of weight 0 is left out.
pub(super) fn gateway_plan(routing: &GatewayRouting, s: &Scenario) -> GatewayPlan {
    let declared_reuse = s.workload.is_some_and(|w| w.declared_reuse > 0.0);
    let prefix_default = if declared_reuse {
        dic_defaults::PREFIX_WEIGHT
    } else {
        0
    };
    let scorers = [
        (
            QUEUE_SCORER,
            routing.queue_weight.unwrap_or(dic_defaults::QUEUE_WEIGHT),
        ),
        (
            KV_CACHE_SCORER,
            routing.kv_weight.unwrap_or(dic_defaults::KV_WEIGHT),
        ),
        (
            PREFIX_CACHE_SCORER,
            routing.prefix_weight.unwrap_or(prefix_default),
        ),
    ]
    .into_iter()
    .filter(|(_, w)| *w > 0)
    .map(|(plugin, weight)| ScorerWeight {
        plugin: plugin.to_string(),
        weight,
    })
    .collect();
    GatewayPlan {
        gateway: routing.gateway.clone(),
        gateway_namespace: routing.gateway_namespace.clone(),
        epp_image: routing
            .epp_image
            .clone()
            .unwrap_or_else(|| dic_defaults::EPP_IMAGE.to_string()),
        scorers,
    }
}
