//! Scaling and monitoring objects of a deployment: an autoscaler on vLLM's queue (an HPA
//! on a custom metric, or a KEDA ScaledObject on Prometheus) and a Prometheus Operator
//! PodMonitor or ServiceMonitor on vLLM's `/metrics`.

use super::*;

/// The metric vLLM exports for requests waiting in its queue (production-stack's
/// autoscaling signal).
const WAITING_METRIC: &str = "vllm:num_requests_waiting";

/// An autoscaler on vLLM's queue: a HorizontalPodAutoscaler (autoscaling/v2) on the pods'
/// `vllm:num_requests_waiting` (served by a custom-metrics adapter such as
/// prometheus-adapter; for a LeaderWorkerSet the HPA reads the leaders, which the LWS's
/// scale subresource selects), or a KEDA ScaledObject querying Prometheus for the same
/// metric. The unit of scaling is a replica (a whole group).
pub(super) fn autoscaler(
    d: &DeploymentPlan,
    a: &dic_compiler::ir::Autoscale,
    name: &str,
    (api_version, kind): (&str, &str),
) -> (String, String) {
    let mut metadata = serde_json::json!({ "name": name, "labels": labels(d) });
    if let Some(ns) = &d.kubernetes.namespace {
        metadata["namespace"] = ns.clone().into();
    }
    let target = serde_json::json!({ "apiVersion": api_version, "kind": kind, "name": name });
    if a.keda {
        // PromQL string literal: backslashes and quotes escaped.
        let served = d
            .model
            .served_name
            .replace('\\', "\\\\")
            .replace('"', "\\\"");
        let v = serde_json::json!({
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": metadata,
            "spec": {
                "scaleTargetRef": target,
                "minReplicaCount": a.min,
                "maxReplicaCount": a.max,
                "cooldownPeriod": 300,
                "triggers": [{
                    "type": "prometheus",
                    "metadata": {
                        "serverAddress": a.prometheus.clone().unwrap_or_default(),
                        "query": format!("sum({WAITING_METRIC}{{model_name=\"{served}\"}})"),
                        "threshold": a.waiting.to_string(),
                    },
                }],
            },
        });
        ("k8s/scaledobject.yaml".into(), crate::yaml::to_string(&v))
    } else {
        let v = serde_json::json!({
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": metadata,
            "spec": {
                "scaleTargetRef": target,
                "minReplicas": a.min.max(1),
                "maxReplicas": a.max,
                "metrics": [{
                    "type": "Pods",
                    "pods": {
                        "metric": { "name": WAITING_METRIC },
                        "target": { "type": "AverageValue", "averageValue": a.waiting.to_string() },
                    },
                }],
                // A replica takes minutes to load: scale down only after 5 quiet minutes.
                "behavior": { "scaleDown": { "stabilizationWindowSeconds": 300 } },
            },
        });
        (
            "k8s/horizontalpodautoscaler.yaml".into(),
            crate::yaml::to_string(&v),
        )
    }
}

/// A Prometheus Operator PodMonitor (or ServiceMonitor) scraping vLLM's `/metrics` on the
/// API port of the pods that serve it (a LeaderWorkerSet's leaders).
pub(super) fn monitor(
    d: &DeploymentPlan,
    which: &str,
    name: &str,
    single_node_pods: bool,
) -> (String, String) {
    let mut metadata = serde_json::json!({ "name": name, "labels": labels(d) });
    if let Some(ns) = &d.kubernetes.namespace {
        metadata["namespace"] = ns.clone().into();
    }
    let endpoint = serde_json::json!({ "port": "http", "path": "/metrics", "interval": "15s" });
    let (kind, spec) = if which == "servicemonitor" {
        (
            "ServiceMonitor",
            serde_json::json!({
                "selector": { "matchLabels": { "app.kubernetes.io/name": name, API_LABEL: "true" } },
                "endpoints": [endpoint],
            }),
        )
    } else {
        let selector = if single_node_pods {
            serde_json::json!({ "app.kubernetes.io/name": name })
        } else {
            serde_json::json!({ LWS_NAME_LABEL: name, "role": "leader" })
        };
        (
            "PodMonitor",
            serde_json::json!({
                "selector": { "matchLabels": selector },
                "podMetricsEndpoints": [endpoint],
            }),
        )
    };
    let v = serde_json::json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": kind,
        "metadata": metadata,
        "spec": spec,
    });
    (
        format!("k8s/{}.yaml", kind.to_lowercase()),
        crate::yaml::to_string(&v),
    )
}
