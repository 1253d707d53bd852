//! Inference routing on Kubernetes (`routing = { gateway = … }`, [`GatewayPlan`]): an
//! InferencePool (`inference.networking.k8s.io/v1`) selecting exactly the pods the
//! deployment's client Service selects, on the port vLLM listens on; llm-d's endpoint
//! picker (EPP) that scores them — its EndpointPickerConfig in a ConfigMap, a Deployment
//! of the upstream image with a ServiceAccount and a read-only Role, and a Service for
//! the Gateway's ext-proc calls and for Prometheus; an HTTPRoute
//! (`gateway.networking.k8s.io/v1`) from the named Gateway to the pool; and, with
//! `monitoring`, a PodMonitor or ServiceMonitor on the picker's metrics.
//!
//! A disaggregated deployment is routed as llm-d routes P/D: the decode pool's folder
//! carries these objects (where dic's own router would be); the pool selects both pools'
//! serving pods (`llm-d.ai/inferenceServing`), which carry their `llm-d.ai/role`; the
//! picker runs a decode and a prefill profile under `disagg-profile-handler`; the decode
//! pods' routing sidecar (`routing_sidecar.rs`) holds the pool's port.
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
/// The label llm-d's role filters read (`pkg/epp/framework/plugins/scheduling/filter/bylabel/roles.go`:
/// `RoleLabel`; values `prefill`, `decode`).
pub(super) const ROLE_LABEL: &str = "llm-d.ai/role";
/// The label llm-d's model-server pods carry and its InferencePools select (llm-d's
/// modelservice chart): here only the pods that serve the API, not LeaderWorkerSet workers.
pub(super) const SERVING_LABEL: &str = "llm-d.ai/inferenceServing";
/// llm-d v0.8.0's P/D plugins (`pkg/epp/framework/plugins/register.go`): the profile
/// handler (`pd-profile-handler` is its deprecated alias), the decider that sends every
/// prompt to a prefill server, the role filters, and the pre-request plugin that names the
/// chosen prefill server in the header the sidecar reads.
const DISAGG_PROFILE_HANDLER: &str = "disagg-profile-handler";
const ALWAYS_DISAGG_DECIDER: &str = "always-disagg-pd-decider";
const PREFILL_FILTER: &str = "prefill-filter";
const DECODE_FILTER: &str = "decode-filter";
const DISAGG_HEADERS_HANDLER: &str = "disagg-headers-handler";
const PICKER: &str = "max-score-picker";

/// Whether this plan's folder carries the routing objects: a disaggregated deployment's
/// decode pool (where dic's router would be), a split deployment's first part (beside its
/// Service), any other deployment.
pub(super) fn carries_routing(d: &DeploymentPlan) -> bool {
    match &d.disaggregated {
        Some(x) => x.role == dic_compiler::ir::Pool::Decode,
        None => d.part_of.as_ref().is_none_or(|p| p.first),
    }
}

/// The pods the InferencePool selects: both pools' serving pods for a disaggregated
/// deployment, else exactly those the client Service selects (a Deployment's pods, a
/// LeaderWorkerSet's leaders, every part's).
pub(super) fn pool_selector(d: &DeploymentPlan, svc: &Service) -> BTreeMap<String, String> {
    match &d.disaggregated {
        Some(x) => BTreeMap::from([
            (PART_OF_LABEL.to_string(), dns_name(&x.deployment)),
            (SERVING_LABEL.to_string(), "true".to_string()),
        ]),
        None => svc
            .spec
            .as_ref()
            .and_then(|s| s.selector.clone())
            .unwrap_or_default(),
    }
}

/// llm-d's labels on a disaggregated pool's pods behind the picker: the role its filters
/// read, and on the pods that serve (`api`) the label the pool selects.
pub(super) fn pd_pod_labels(d: &DeploymentPlan, api: bool) -> Vec<(String, String)> {
    let (Some(x), Some(_)) = (&d.disaggregated, &d.kubernetes.gateway) else {
        return Vec::new();
    };
    let mut labels = vec![(ROLE_LABEL.to_string(), x.role.name().to_string())];
    if api {
        labels.push((SERVING_LABEL.to_string(), "true".to_string()));
    }
    labels
}

/// The port the pool targets: the P/D pools' shared one (the decode pods' sidecar), else
/// vLLM's.
fn target_port(d: &DeploymentPlan, g: &GatewayPlan) -> u64 {
    g.pd.as_ref().map_or(pod_port(d), |pd| pd.target_port)
}

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
            crate::yaml::to_string(&inference_pool(d, g, &names, pool_selector)),
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
        let deployment = match (&d.disaggregated, &d.part_of) {
            (Some(x), _) => &x.deployment,
            (None, Some(p)) => &p.deployment,
            (None, None) => &d.name,
        };
        let pool = dns_name(deployment);
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
            let mut l = labels(d);
            if d.disaggregated.is_some() {
                // Both pools' objects: named after the deployment, not one pool.
                l.remove(POOL_LABEL);
                l.insert("app.kubernetes.io/name".into(), self.pool.clone());
            }
            l
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
    g: &GatewayPlan,
    names: &Names,
    selector: BTreeMap<String, String>,
) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": format!("{POOL_GROUP}/v1"),
        "kind": "InferencePool",
        "metadata": names.json_meta(d, &names.pool, true),
        "spec": {
            "selector": { "matchLabels": selector },
            "targetPorts": [{ "number": target_port(d, g) }],
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

/// The picker's EndpointPickerConfig (llm-d v0.8.0's schema). Aggregated: one profile
/// that keeps the serving pods (`decode-filter`: every pod without a P/D role label),
/// weighs them by the plan's scorers and takes the best (`max-score-picker`).
/// Disaggregated (`deploy/config/pd-epp-config.yaml`, `docs/disaggregation.md`): a decode
/// and a prefill profile, each filtering its role and weighing by the same scorers;
/// `disagg-profile-handler` runs decode first, then prefill whenever its decider says so.
/// dic has no prompt-length threshold below which a decode server prefills locally: its
/// forecast sends every prompt to the prefill pool, so the decider is llm-d's
/// `always-disagg-pd-decider` (not `prefix-based-pd-decider`, whose `nonCachedTokens`
/// threshold dic would have to invent).
pub(super) fn epp_config(g: &GatewayPlan) -> serde_json::Value {
    let plugin = |t: &str| serde_json::json!({ "type": t });
    let profile = |filter: &str| {
        let mut p = vec![serde_json::json!({ "pluginRef": filter })];
        p.extend(
            g.scorers
                .iter()
                .map(|s| serde_json::json!({ "pluginRef": s.plugin, "weight": s.weight })),
        );
        p.push(serde_json::json!({ "pluginRef": PICKER }));
        p
    };
    let scorers = g.scorers.iter().map(|s| plugin(&s.plugin));
    let (plugins, profiles) = if g.pd.is_some() {
        let mut plugins = vec![
            plugin(DISAGG_HEADERS_HANDLER),
            plugin(PREFILL_FILTER),
            plugin(DECODE_FILTER),
        ];
        plugins.extend(scorers);
        plugins.push(plugin(PICKER));
        plugins.push(plugin(ALWAYS_DISAGG_DECIDER));
        plugins.push(serde_json::json!({
            "type": DISAGG_PROFILE_HANDLER,
            "parameters": {
                "profiles": { "prefill": "prefill", "decode": "decode" },
                "deciders": { "prefill": ALWAYS_DISAGG_DECIDER },
            },
        }));
        let profiles = serde_json::json!([
            { "name": "prefill", "plugins": profile(PREFILL_FILTER) },
            { "name": "decode", "plugins": profile(DECODE_FILTER) },
        ]);
        (plugins, profiles)
    } else {
        let mut plugins = vec![plugin("single-profile-handler"), plugin(DECODE_FILTER)];
        plugins.extend(scorers);
        plugins.push(plugin(PICKER));
        let profiles =
            serde_json::json!([{ "name": "default", "plugins": profile(DECODE_FILTER) }]);
        (plugins, profiles)
    };
    serde_json::json!({
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": profiles,
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
