//! Inference routing on Kubernetes (`routing = { gateway = … }`, [`GatewayPlan`]): an
//! InferencePool (`inference.networking.k8s.io/v1`) selecting exactly the pods the
//! deployment's client Service selects, on the port vLLM listens on; llm-d's endpoint
//! picker (EPP) that scores them — its EndpointPickerConfig in a ConfigMap, a Deployment
//! of the upstream image with a ServiceAccount and a read-only Role, and a Service for
//! the Gateway's ext-proc calls and for Prometheus; an HTTPRoute
//! (`gateway.networking.k8s.io/v1`) from the named Gateway to the pool; and, with
//! `monitoring`, a PodMonitor or ServiceMonitor on the picker's metrics.
//!
//! The shapes follow llm-d-inference-scheduler v0.8.0's manifests
//! (`deploy/components/inference-gateway/{deployments,services,rbac,inference-pools,httproutes}.yaml`)
//! and its Helm chart (`config/charts/epplib/templates/_deployment.yaml`).

use super::*;
use dic_compiler::ir::GatewayPlan;
use k8s_openapi::api::core::v1::{ConfigMap, ConfigMapVolumeSource, GRPCAction, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};

/// The picker's gRPC ext-proc port (the Gateway calls it), its health port and its
/// Prometheus port (the upstream image's `EXPOSE`s and flags).
const EPP_GRPC_PORT: i32 = 9002;
const EPP_HEALTH_PORT: i32 = 9003;
const EPP_METRICS_PORT: i32 = 9090;
/// Where the picker's configuration is mounted, and its file name.
const EPP_CONFIG_DIR: &str = "/etc/epp";
const EPP_CONFIG_FILE: &str = "epp-config.yaml";
/// The user the upstream image runs as (`Dockerfile.epp`: `USER 65532:65532`).
const EPP_USER: i64 = 65532;
/// The picker's health service name in v0.8.0's manifests.
const EPP_HEALTH_SERVICE: &str = "envoy.service.ext_proc.v3.ExternalProcessor";
/// The API group of InferencePool (the pool's own and the route's backendRef).
const POOL_GROUP: &str = "inference.networking.k8s.io";

/// The objects of a deployment routed through a Gateway, as (file, YAML). Only the first
/// part of a deployment spread over node groups carries them (as it carries the Service).
pub(super) fn gateway_objects(
    d: &DeploymentPlan,
    g: &GatewayPlan,
    pool_selector: BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, String> {
    let names = Names::new(d);
    let yaml = |v: &dyn erased::Yaml| v.to_yaml();
    let mut out = vec![
        (
            "k8s/inferencepool.yaml".to_string(),
            crate::yaml::to_string(&inference_pool(d, &names, pool_selector)),
        ),
        (
            "k8s/httproute.yaml".to_string(),
            crate::yaml::to_string(&http_route(d, g, &names)),
        ),
        (
            "k8s/epp-config.yaml".to_string(),
            yaml(&epp_config_map(d, g, &names))?,
        ),
        (
            "k8s/epp.yaml".to_string(),
            yaml(&epp_deployment(d, g, &names))?,
        ),
        (
            "k8s/epp-service.yaml".to_string(),
            yaml(&epp_service(d, &names))?,
        ),
        (
            "k8s/epp-serviceaccount.yaml".to_string(),
            yaml(&ServiceAccount {
                metadata: names.meta(d, &names.epp),
                // The picker watches pods and its pool through the API: it needs its token.
                automount_service_account_token: Some(true),
                ..Default::default()
            })?,
        ),
        ("k8s/epp-role.yaml".to_string(), yaml(&epp_role(d, &names))?),
        (
            "k8s/epp-rolebinding.yaml".to_string(),
            yaml(&epp_role_binding(d, &names))?,
        ),
    ];
    if let Some(which) = &d.kubernetes.monitoring {
        out.push(epp_monitor(d, which, &names));
    }
    Ok(out)
}

/// The names every object of the routing shares.
struct Names {
    /// The InferencePool's: the deployment's Kubernetes name.
    pool: String,
    /// The endpoint picker's (Deployment, Service, ConfigMap, ServiceAccount, Role).
    epp: String,
    labels: BTreeMap<String, String>,
}

impl Names {
    fn new(d: &DeploymentPlan) -> Names {
        let pool = dns_name(d.part_of.as_ref().map_or(&d.name, |p| &p.deployment));
        let epp = format!("{pool}-epp");
        // Not the part-of label: a split deployment's Service selects its pods by it.
        let labels = BTreeMap::from([
            ("app.kubernetes.io/name".to_string(), epp.clone()),
            (
                "app.kubernetes.io/managed-by".to_string(),
                "dic".to_string(),
            ),
            (
                "app.kubernetes.io/component".to_string(),
                "endpoint-picker".to_string(),
            ),
        ]);
        Names { pool, epp, labels }
    }

    fn meta(&self, d: &DeploymentPlan, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_string()),
            namespace: d.kubernetes.namespace.clone(),
            labels: Some(self.labels.clone()),
            ..Default::default()
        }
    }

    /// The metadata of an object of kind without Rust types: the picker's labels, or
    /// with `deployment_labels` the serving objects' (the pool and the route).
    fn json_meta(
        &self,
        d: &DeploymentPlan,
        name: &str,
        deployment_labels: bool,
    ) -> serde_json::Value {
        let labels = if deployment_labels {
            labels(d)
        } else {
            self.labels.clone()
        };
        let mut m = serde_json::json!({ "name": name, "labels": labels });
        if let Some(ns) = &d.kubernetes.namespace {
            m["namespace"] = ns.clone().into();
        }
        m
    }

    fn selector(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("app.kubernetes.io/name".to_string(), self.epp.clone())])
    }
}

/// The pool: the model-server pods (the client Service's selector: a Deployment's pods,
/// a LeaderWorkerSet's leaders, every part's), vLLM's port, and the picker's Service.
fn inference_pool(
    d: &DeploymentPlan,
    names: &Names,
    selector: BTreeMap<String, String>,
) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": format!("{POOL_GROUP}/v1"),
        "kind": "InferencePool",
        "metadata": names.json_meta(d, &names.pool, true),
        "spec": {
            "selector": { "matchLabels": selector },
            "targetPorts": [{ "number": pod_port(d) }],
            "endpointPickerRef": {
                "kind": "Service",
                "name": names.epp,
                "port": { "number": EPP_GRPC_PORT },
                "failureMode": "FailClose",
            },
        },
    })
}

/// The route from the Gateway to the pool, for every path (the OpenAI API). No request
/// timeout ("0s" disables it, Gateway API's HTTPRouteTimeouts): a generation of
/// thousands of tokens outlasts a proxy's default.
fn http_route(d: &DeploymentPlan, g: &GatewayPlan, names: &Names) -> serde_json::Value {
    let mut parent = serde_json::json!({
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": g.gateway,
    });
    if let Some(ns) = &g.gateway_namespace {
        parent["namespace"] = ns.clone().into();
    }
    serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": names.json_meta(d, &names.pool, true),
        "spec": {
            "parentRefs": [parent],
            "rules": [{
                "matches": [{ "path": { "type": "PathPrefix", "value": "/" } }],
                "backendRefs": [{
                    "group": POOL_GROUP,
                    "kind": "InferencePool",
                    "name": names.pool,
                }],
                "timeouts": { "request": "0s" },
            }],
        },
    })
}

/// The picker's EndpointPickerConfig (llm-d v0.8.0's schema): one profile that keeps the
/// serving pods (`decode-filter`: every pod without a P/D role label), weighs them by the
/// plan's scorers and takes the best (`max-score-picker`).
pub(super) fn epp_config(g: &GatewayPlan) -> serde_json::Value {
    let mut plugins = vec![
        serde_json::json!({ "type": "single-profile-handler" }),
        serde_json::json!({ "type": "decode-filter" }),
    ];
    plugins.extend(
        g.scorers
            .iter()
            .map(|s| serde_json::json!({ "type": s.plugin })),
    );
    plugins.push(serde_json::json!({ "type": "max-score-picker" }));
    let mut profile = vec![serde_json::json!({ "pluginRef": "decode-filter" })];
    profile.extend(
        g.scorers
            .iter()
            .map(|s| serde_json::json!({ "pluginRef": s.plugin, "weight": s.weight })),
    );
    profile.push(serde_json::json!({ "pluginRef": "max-score-picker" }));
    serde_json::json!({
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": [{ "name": "default", "plugins": profile }],
    })
}

fn epp_config_map(d: &DeploymentPlan, g: &GatewayPlan, names: &Names) -> ConfigMap {
    ConfigMap {
        metadata: names.meta(d, &names.epp),
        data: Some(BTreeMap::from([(
            EPP_CONFIG_FILE.to_string(),
            crate::yaml::to_string(&epp_config(g)),
        )])),
        ..Default::default()
    }
}

/// The picker's container arguments: its pool (in its own namespace, `NAMESPACE`), the
/// ports, the configuration file, and metrics readable without a token (Prometheus
/// scrapes it like vLLM's).
fn epp_args(names: &Names) -> Vec<String> {
    [
        "--pool-name",
        &names.pool,
        "--pool-group",
        POOL_GROUP,
        "--grpc-port",
        &EPP_GRPC_PORT.to_string(),
        "--grpc-health-port",
        &EPP_HEALTH_PORT.to_string(),
        "--config-file",
        &format!("{EPP_CONFIG_DIR}/{EPP_CONFIG_FILE}"),
        "--zap-encoder",
        "json",
        "--metrics-endpoint-auth=false",
    ]
    .iter()
    .map(|w| w.to_string())
    .collect()
}

/// One picker: it keeps the prefix-cache index in memory, so llm-d runs a single active
/// replica, replaced by `Recreate`.
fn epp_deployment(d: &DeploymentPlan, g: &GatewayPlan, names: &Names) -> Deployment {
    let grpc_probe = |period: i32| Probe {
        grpc: Some(GRPCAction {
            port: EPP_HEALTH_PORT,
            service: Some(EPP_HEALTH_SERVICE.to_string()),
        }),
        initial_delay_seconds: Some(5),
        period_seconds: Some(period),
        ..Default::default()
    };
    let port = |name: &str, number: i32| ContainerPort {
        name: Some(name.to_string()),
        container_port: number,
        protocol: Some("TCP".into()),
        ..Default::default()
    };
    let namespace_env = EnvVar {
        name: "NAMESPACE".into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(k8s_openapi::api::core::v1::ObjectFieldSelector {
                field_path: "metadata.namespace".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    // [estimate] requests of a picker scoring a few dozen servers: the scorers and the
    // prefix index run in one Go process.
    let resources = ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), quantity("2")),
            ("memory".to_string(), quantity("2Gi")),
        ])),
        limits: Some(BTreeMap::from([("memory".to_string(), quantity("2Gi"))])),
        ..Default::default()
    };
    let container = Container {
        name: "epp".into(),
        image: Some(g.epp_image.clone()),
        args: Some(epp_args(names)),
        env: Some(vec![namespace_env]),
        ports: Some(vec![
            port("grpc", EPP_GRPC_PORT),
            port("grpc-health", EPP_HEALTH_PORT),
            port("metrics", EPP_METRICS_PORT),
        ]),
        liveness_probe: Some(grpc_probe(10)),
        readiness_probe: Some(grpc_probe(2)),
        resources: Some(resources),
        volume_mounts: Some(vec![VolumeMount {
            name: "epp-config".into(),
            mount_path: EPP_CONFIG_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        }]),
        security_context: Some(super::router::unprivileged(false)),
        ..Default::default()
    };
    Deployment {
        metadata: names.meta(d, &names.epp),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(names.selector()),
                ..Default::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                ..Default::default()
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(names.labels.clone()),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    service_account_name: Some(names.epp.clone()),
                    automount_service_account_token: Some(true),
                    enable_service_links: NO_SERVICE_LINKS,
                    // As long as the pool's longest grace period (llm-d's chart).
                    termination_grace_period_seconds: Some(130),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(EPP_USER),
                        run_as_group: Some(EPP_USER),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    volumes: Some(vec![Volume {
                        name: "epp-config".into(),
                        config_map: Some(ConfigMapVolumeSource {
                            name: names.epp.clone(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    image_pull_secrets: image_pull_secrets(d),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The picker's Service: gRPC for the Gateway (HTTP/2), metrics for Prometheus.
fn epp_service(d: &DeploymentPlan, names: &Names) -> Service {
    let port = |name: &str, number: i32, app_protocol: Option<&str>| ServicePort {
        name: Some(name.to_string()),
        port: number,
        target_port: Some(IntOrString::String(name.to_string())),
        protocol: Some("TCP".into()),
        app_protocol: app_protocol.map(str::to_string),
        ..Default::default()
    };
    Service {
        metadata: names.meta(d, &names.epp),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(names.selector()),
            ports: Some(vec![
                port("grpc", EPP_GRPC_PORT, Some("http2")),
                port("metrics", EPP_METRICS_PORT, None),
            ]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// What the picker reads through the API: the pods it scores and its InferencePool
/// (read-only; without metrics authentication it reviews no tokens).
fn epp_role(d: &DeploymentPlan, names: &Names) -> Role {
    let read = |group: &str, resource: &str| PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(vec![resource.to_string()]),
        verbs: ["get", "list", "watch"]
            .iter()
            .map(|v| v.to_string())
            .collect(),
        ..Default::default()
    };
    Role {
        metadata: names.meta(d, &names.epp),
        rules: Some(vec![read("", "pods"), read(POOL_GROUP, "inferencepools")]),
    }
}

fn epp_role_binding(d: &DeploymentPlan, names: &Names) -> RoleBinding {
    RoleBinding {
        metadata: names.meta(d, &names.epp),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: names.epp.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: names.epp.clone(),
            namespace: d.kubernetes.namespace.clone(),
            ..Default::default()
        }]),
    }
}

/// The picker's metrics, scraped the way the deployment's `monitoring` scrapes vLLM's.
fn epp_monitor(d: &DeploymentPlan, which: &str, names: &Names) -> (String, String) {
    let endpoint = serde_json::json!({ "port": "metrics", "path": "/metrics", "interval": "15s" });
    let (kind, spec) = if which == "servicemonitor" {
        (
            "ServiceMonitor",
            serde_json::json!({
                "selector": { "matchLabels": names.selector() },
                "endpoints": [endpoint],
            }),
        )
    } else {
        (
            "PodMonitor",
            serde_json::json!({
                "selector": { "matchLabels": names.selector() },
                "podMetricsEndpoints": [endpoint],
            }),
        )
    };
    let v = serde_json::json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": kind,
        "metadata": names.json_meta(d, &names.epp, false),
        "spec": spec,
    });
    (
        format!("k8s/epp-{}.yaml", kind.to_lowercase()),
        crate::yaml::to_string(&v),
    )
}
