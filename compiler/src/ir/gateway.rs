//! Inference routing through the Gateway API Inference Extension, as launched: the
//! decision (`routing = { gateway = … }`) and the endpoint picker's scorer weights, which
//! follow the `.dist` and its workload. The Kubernetes target renders it as an
//! InferencePool over the model-server pods, llm-d's endpoint picker (EPP) and an
//! HTTPRoute from the named Gateway (`targets/src/k8s/gateway.rs`).
//!
//! A disaggregated deployment is routed as llm-d routes P/D (llm-d-inference-scheduler
//! v0.8.0, `docs/disaggregation.md`): one pool over both pools' model servers, told apart
//! by the `llm-d.ai/role` label; the picker chooses a decode server first, then a prefill
//! server, and names the latter in a header; llm-d's routing sidecar on the decode pods,
//! listening on the pool's port, has the prefill server compute the prompt and hands the
//! request on to its own vLLM, which reads the KV cache over NIXL ([`PdRouting`]).
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
    /// A disaggregated deployment's pool: its role in llm-d's P/D routing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pd: Option<PdRouting>,
}

/// One pool of a disaggregated deployment behind the endpoint picker.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PdRouting {
    /// The port the InferencePool targets on both pools' pods (the deployment's port):
    /// vLLM's on a prefill pod, the routing sidecar's on a decode pod.
    pub target_port: u64,
    /// On the decode pool: llm-d's routing sidecar, in front of vLLM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidecar: Option<RoutingSidecar>,
}

/// llm-d's routing sidecar (`pd-sidecar`) of a decode pod: it listens on the pool's
/// target port, sends the prompt to the prefill server the picker chose
/// (`x-prefiller-host-port`), then the request to vLLM on the pod's loopback.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RoutingSidecar {
    pub image: String,
    /// `--kv-connector`: how it hands vLLM the prefill's KV-transfer parameters.
    pub connector: String,
    /// `--vllm-port`: where the pod's vLLM listens (its `--port`).
    pub vllm_port: u64,
}

/// The routing sidecar's image: llm-d-inference-scheduler v0.8.0 builds it beside the
/// picker (`Makefile`: `SIDECAR_IMAGE_NAME ?= llm-d-routing-sidecar`, registry
/// `ghcr.io/llm-d`, tagged by release).
pub const ROUTING_SIDECAR_IMAGE: &str = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0";
/// The sidecar's protocol for vLLM's NixlConnector (`pkg/sidecar/proxy/connector_nixlv2.go`:
/// `KVConnectorNIXLV2`), the connector both pools run ([`super::KV_TRANSFER_CONFIG`]).
pub const SIDECAR_NIXL_CONNECTOR: &str = "nixlv2";
/// How far vLLM moves from the pool's port on a decode pod: llm-d's manifests run the
/// sidecar on 8000 and vLLM on 8200 (`deploy/components/vllm-sim-pd/deployments.yaml`).
const SIDECAR_VLLM_OFFSET: u64 = 200;

/// The P/D routing of a disaggregated deployment's pool `role`, whose vLLM listens on
/// `port` (the deployment's, which becomes the pool's target port); on the decode pool the
/// sidecar takes that port and vLLM moves [`SIDECAR_VLLM_OFFSET`] up (down when that
/// would leave the port range), clear of NIXL's side channel (`side_channel`: its first
/// port and how many the pod's workers take).
pub(super) fn pd_routing(
    role: crate::program::Pool,
    port: u64,
    side_channel: (u64, u64),
) -> PdRouting {
    let sidecar = (role == crate::program::Pool::Decode).then(|| {
        let (first, count) = side_channel;
        let clear = |p: u64| p <= 65535 && !(first..first + count.max(1)).contains(&p);
        let vllm_port = [
            port + SIDECAR_VLLM_OFFSET,
            port + 2 * SIDECAR_VLLM_OFFSET,
            port.saturating_sub(SIDECAR_VLLM_OFFSET),
        ]
        .into_iter()
        .find(|p| *p > 0 && clear(*p))
        .unwrap_or(port + 1);
        RoutingSidecar {
            image: ROUTING_SIDECAR_IMAGE.to_string(),
            connector: SIDECAR_NIXL_CONNECTOR.to_string(),
            vllm_port,
        }
    });
    PdRouting {
        target_port: port,
        sidecar,
    }
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
        pd: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Pool;

    #[test]
    fn the_decode_pools_vllm_moves_off_the_pools_port_and_clear_of_nixl() {
        // llm-d's wiring: the sidecar on 8000, vLLM on 8200; the prefill pool keeps its port.
        let decode = pd_routing(Pool::Decode, 8000, (5600, 8));
        assert_eq!(decode.target_port, 8000);
        assert_eq!(decode.sidecar.as_ref().map(|s| s.vllm_port), Some(8200));
        assert_eq!(pd_routing(Pool::Prefill, 8000, (5600, 8)).sidecar, None);
        // 5400 + 200 is NIXL's side channel (5600–5607 on an 8-GPU node): one step further.
        let near_nixl = pd_routing(Pool::Decode, 5400, (5600, 8));
        assert_eq!(near_nixl.sidecar.map(|s| s.vllm_port), Some(5800));
        // Past the port range: below the pool's port instead.
        let top = pd_routing(Pool::Decode, 65500, (5600, 8));
        assert_eq!(top.sidecar.map(|s| s.vllm_port), Some(65300));
    }
}
