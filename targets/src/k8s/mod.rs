//! The Kubernetes target: typed objects (k8s-openapi for built-in kinds, small serde
//! structs for LeaderWorkerSet `leaderworkerset.x-k8s.io/v1`, JSON for kinds without
//! Rust types: ComputeDomain, KEDA, Prometheus Operator), serialized as YAML.
//!
//! Single-node pods → Deployment (replicas = DP replicas, or 1 for single-node wide EP);
//! pods spanning nodes → LeaderWorkerSet (size = nodes per group, replicas = groups,
//! RecreateGroupOnPodRestart, LeaderCreated). A client Service (`<name>-leader` for an
//! LWS, which owns the headless Service under its own name; one Service over every node
//! group's part of a split deployment), a PodDisruptionBudget only when there are two or
//! more groups to protect, and `kustomization.yaml` per folder. Pods get GPUs
//! (requests = limits), CPU and memory by `ir::pod_cpu`/`ir::pod_memory` (or the user's
//! `pod` block: scheduling, identity, labels), a Memory-backed /dev/shm, the model cache
//! (an emptyDir sized for the checkpoint with its ephemeral storage, a read-only claim
//! with an optional download Job, or a host folder), Secrets by reference (never
//! inlined), node affinity on the GPU product label (none without one, W0801), the GPU
//! toleration, the network profile's RDMA resource, capabilities and annotations only on
//! groups that span nodes, an IMEX channel and one NVLink clique for groups spanning
//! trays (ComputeDomain), probes on vLLM's /health on the API pod only with a startup
//! window sized from the model's load time, optional autoscaling and scraping. Commands
//! come from the vLLM target, so scripts and manifests start the same processes.

use crate::shell::{line, Arg};
use crate::vllm::{commands, pod_port, NodeCommand, NodeRank, HEAD_ADDR};
use dic_compiler::ir::ModelCache;
use dic_compiler::ir::{DeploymentPlan, LaunchMode};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, HostPathVolumeSource, LocalObjectReference, NodeAffinity, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, PersistentVolumeClaimVolumeSource, PodAffinity,
    PodAffinityTerm, PodResourceClaim, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SeccompProfile, SecretKeySelector, SecurityContext, Service, ServicePort,
    ServiceSpec, Toleration, Volume, VolumeMount,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use std::collections::BTreeMap;

mod gateway;
mod jobs;
mod nvlink;
mod pod;
mod routing_sidecar;
use jobs::{model_download, preflight};
use nvlink::*;
use pod::pod;
mod router;
mod scaling;
use scaling::{autoscaler, monitor};

/// LeaderWorkerSet, only the fields dic emits (schema: ../shared/k8s/crds).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSet {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: LeaderWorkerSetSpec,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSetSpec {
    /// Absent under autoscaling: the autoscaler owns the count, and a re-apply must not
    /// reset it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    pub startup_policy: String,
    /// Present where N−1 sized the rollout (`ir::Disruption`); absent, LWS's defaults are
    /// dic's (one group down, no surge; the LWS CRD's `rolloutStrategy`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout_strategy: Option<LwsRolloutStrategy>,
    pub leader_worker_template: LeaderWorkerTemplate,
}

/// A LeaderWorkerSet's rolling update: `type: RollingUpdate` (the only one LWS has) and
/// its groups down and surged at once.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LwsRolloutStrategy {
    #[serde(rename = "type")]
    pub type_: String,
    pub rolling_update_configuration: LwsRollingUpdate,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LwsRollingUpdate {
    pub max_unavailable: i32,
    pub max_surge: i32,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerTemplate {
    pub size: i32,
    pub restart_policy: String,
    pub leader_template: PodTemplateSpec,
    pub worker_template: PodTemplateSpec,
}

const LWS_NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";

/// No `<SERVICE>_PORT` variables: a Service `vllm` injects `VLLM_PORT=tcp://…`, which vLLM
/// refuses at start-up (`envs.py:get_vllm_port`; docs/vllm-rules.md row 75).
const NO_SERVICE_LINKS: Option<bool> = Some(false);

/// On the host network, pods still resolve cluster names.
fn host_network_dns(d: &DeploymentPlan) -> Option<String> {
    d.network
        .host_network
        .then(|| "ClusterFirstWithHostNet".to_string())
}

/// A pod's own interface outside the host network (the CNI convention).
const POD_INTERFACE: &str = "eth0";

/// The deployment's Kubernetes name (the compiler's rule; the checker made it unique).
pub fn dns_name(s: &str) -> String {
    dic_compiler::ir::kubernetes_name(s)
}

fn labels(d: &DeploymentPlan) -> BTreeMap<String, String> {
    let mut l = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), dns_name(&d.name)),
        (
            "app.kubernetes.io/managed-by".to_string(),
            "dic".to_string(),
        ),
    ]);
    if let Some(part) = &d.part_of {
        l.insert(PART_OF_LABEL.into(), dns_name(&part.deployment));
    }
    if let Some(x) = &d.disaggregated {
        l.insert(PART_OF_LABEL.into(), dns_name(&x.deployment));
        l.insert(POOL_LABEL.into(), x.role.name().into());
    }
    l
}

/// The label a disaggregated deployment's pods carry: `prefill` or `decode`.
const POOL_LABEL: &str = "dic.dev/pool";

/// The pods' traffic crosses nodes over the fabric: a group spanning nodes (NCCL), or a
/// disaggregated pool whose KV transfer leaves the node (NIXL over RDMA). Only these get
/// the network profile's RDMA devices, capabilities and annotations.
fn uses_fabric(d: &DeploymentPlan) -> bool {
    d.nodes_per_group > 1 || d.disaggregated.as_ref().is_some_and(|x| x.crosses_nodes)
}

/// The label every node group's part of one deployment carries: its Service selects it.
const PART_OF_LABEL: &str = "app.kubernetes.io/part-of";

fn quantity(v: impl ToString) -> Quantity {
    Quantity(v.to_string())
}

fn gib(bytes: u64) -> Quantity {
    Quantity(format!("{}Gi", bytes.div_ceil(1 << 30)))
}

fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        ..Default::default()
    }
}

/// `name` from key `key` of Secret `secret` (referenced, never inlined).
fn secret_env(name: &str, secret: &str, key: &str, optional: bool) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: Some(optional),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `name` set to the pod's own IP (the downward API).
fn pod_ip_env(name: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value_from: Some(EnvVarSource {
            field_ref: Some(k8s_openapi::api::core::v1::ObjectFieldSelector {
                field_path: "status.podIP".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn health(port: &str, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/health".into()),
            port: IntOrString::String(port.into()),
            ..Default::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        ..Default::default()
    }
}

/// The container's shell script: optional preamble, then `exec` of the vLLM command.
fn script(preamble: &[String], argv: &[Arg]) -> String {
    let mut s = String::from("set -euo pipefail\n");
    for p in preamble {
        s.push_str(p);
        s.push('\n');
    }
    s.push_str("exec ");
    s.push_str(&line(argv));
    s
}

/// An engine container's security context: no privilege escalation, and only the
/// capabilities the network profile asks for (the checker admits only the few dic knows
/// a use for, never `ALL` or `SYS_ADMIN`), only on pods whose traffic leaves the node,
/// `IPC_LOCK` only beside the RDMA device whose memory it pins. The vLLM image runs as
/// root and keeps the runtime's default capabilities (reading a model cache owned by
/// another user needs them); an added capability puts the pod below Pod Security
/// "baseline", so its namespace must allow "privileged".
fn engine_security(d: &DeploymentPlan) -> SecurityContext {
    let rdma = uses_fabric(d) && d.network.rdma_resource.is_some();
    let add: Vec<String> = d
        .network
        .capabilities
        .iter()
        .filter(|_| uses_fabric(d))
        .filter(|c| rdma || c.trim_start_matches("CAP_") != "IPC_LOCK")
        .cloned()
        .collect();
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: (!add.is_empty()).then(|| Capabilities {
            add: Some(add),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Where the Hugging Face cache is mounted (HF_HOME).
const HF_HOME: &str = "/root/.cache/huggingface";

/// The model cache's size: the user's, else the checkpoint plus 10% (partial downloads,
/// lock files).
fn cache_bytes(d: &DeploymentPlan) -> u64 {
    match &d.kubernetes.model_cache {
        ModelCache::EmptyDir { size: Some(b) } | ModelCache::Pvc { size: Some(b), .. } => *b as u64,
        _ => d.kubernetes.checkpoint_bytes + d.kubernetes.checkpoint_bytes / 10,
    }
}

/// The `hf-cache` volume and whether the pods mount it read-only: an emptyDir on the
/// node's disk sized for the checkpoint, a claim (read-only: the download Job or the
/// operator fills it), or a folder staged on the node.
fn cache_volume(d: &DeploymentPlan) -> (Volume, bool) {
    let mut v = Volume {
        name: "hf-cache".into(),
        ..Default::default()
    };
    let read_only = match &d.kubernetes.model_cache {
        ModelCache::EmptyDir { .. } => {
            v.empty_dir = Some(EmptyDirVolumeSource {
                size_limit: Some(gib(cache_bytes(d))),
                ..Default::default()
            });
            false
        }
        ModelCache::Pvc { claim, .. } => {
            v.persistent_volume_claim = Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
                read_only: Some(true),
            });
            true
        }
        ModelCache::HostPath(path) => {
            v.host_path = Some(HostPathVolumeSource {
                path: path.clone(),
                type_: Some("Directory".into()),
            });
            true
        }
    };
    (v, read_only)
}

/// A pod's requests and limits: its GPUs (requests = limits, as Kubernetes requires for
/// extended resources), the RDMA devices only when the group spans nodes, CPU
/// ([`dic_compiler::ir::pod_cpu`], no limit), memory (request = limit,
/// [`dic_compiler::ir::pod_memory`]) and, with `cache` (an emptyDir model cache on the
/// node's disk), ephemeral storage for the checkpoint.
fn pod_resources(d: &DeploymentPlan, gpus: u64, cache: bool) -> ResourceRequirements {
    let mut limits = BTreeMap::from([(d.gpu.resource.clone(), quantity(gpus))]);
    if let (true, Some((res, count))) = (uses_fabric(d), &d.network.rdma_resource) {
        limits.insert(res.clone(), quantity(count));
    }
    let memory = gib(d.kubernetes.memory_bytes);
    limits.insert("memory".into(), memory.clone());
    let mut requests = limits.clone();
    requests.insert("cpu".into(), quantity(d.kubernetes.cpu));
    if cache && matches!(d.kubernetes.model_cache, ModelCache::EmptyDir { .. }) {
        let disk = gib(cache_bytes(d));
        requests.insert("ephemeral-storage".into(), disk.clone());
        limits.insert("ephemeral-storage".into(), disk);
    }
    ResourceRequirements {
        limits: Some(limits),
        requests: Some(requests),
        ..Default::default()
    }
}

fn meta(d: &DeploymentPlan, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: d.kubernetes.namespace.clone(),
        labels: Some(labels(d)),
        ..Default::default()
    }
}

/// Every object, as (file name, YAML).
pub fn files(d: &DeploymentPlan) -> Result<BTreeMap<String, String>, String> {
    let name = dns_name(&d.name);
    let cmds = commands(d);
    let mut out = BTreeMap::new();
    let yaml = |v: &dyn erased::Yaml| v.to_yaml();
    let selector_labels = BTreeMap::from([("app.kubernetes.io/name".to_string(), name.clone())]);
    let single_node_pods = d.nodes_per_group == 1 || d.launch == LaunchMode::Replicas;
    let (file, text) = workload(d, &cmds, &name, &selector_labels, single_node_pods)?;
    out.insert(file, text);
    let svc = api_service(d, &name, single_node_pods);
    if d.part_of.as_ref().is_none_or(|p| p.first) {
        out.insert("k8s/service.yaml".to_string(), yaml(&svc)?);
    }
    let pdb = disruption_budget(d, &name, selector_labels, single_node_pods);
    // With one group a PDB protects nothing (allowing one disruption allows them all);
    // with several it keeps all but one serving through node drains.
    if d.groups > 1 {
        out.insert("k8s/poddisruptionbudget.yaml".to_string(), yaml(&pdb)?);
    }
    if let Some(image) = &d.kubernetes.preflight_image {
        let cmd = cmds.first().ok_or("no command")?;
        for (path, text) in preflight(d, cmd, image)? {
            out.insert(path, text);
        }
    }
    if multi_node_nvlink(d) {
        out.insert(
            "k8s/computedomain.yaml".into(),
            crate::yaml::to_string(&compute_domain(d, &name)),
        );
    }
    if let Some(a) = &d.kubernetes.autoscale {
        let kind = if single_node_pods {
            ("apps/v1", "Deployment")
        } else {
            ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
        };
        let (file, text) = autoscaler(d, a, &name, kind);
        out.insert(file, text);
    }
    if let Some(m) = &d.kubernetes.monitoring {
        let (file, text) = monitor(d, m, &name, single_node_pods);
        out.insert(file, text);
    }
    if let (Some(g), true) = (&d.kubernetes.gateway, gateway::carries_routing(d)) {
        let pool_selector = gateway::pool_selector(d, &svc);
        for (file, text) in gateway::gateway_objects(d, g, pool_selector)? {
            out.insert(file, text);
        }
    }
    if let ModelCache::Pvc {
        claim,
        size: Some(size),
        storage_class,
    } = &d.kubernetes.model_cache
    {
        for (file, text) in model_download(d, claim, *size as u64, storage_class.as_deref())? {
            out.insert(file, text);
        }
    }
    // Behind a Gateway the endpoint picker and the decode pods' routing sidecar route P/D
    // (llm-d's way); else dic's router fronts both pools.
    if let Some(x) = d
        .disaggregated
        .as_ref()
        .filter(|x| x.role == dic_compiler::ir::Pool::Decode && d.kubernetes.gateway.is_none())
    {
        for (file, text) in router::router(d, x)? {
            out.insert(file, text);
        }
    }
    kustomizations(d, &mut out);
    Ok(out)
}

/// The serving workload: a Deployment of one replica per pod, or a LeaderWorkerSet of one
/// group of pods per replica (the leader's blocking steps, Ray's, before its `exec`).
fn workload(
    d: &DeploymentPlan,
    cmds: &[NodeCommand],
    name: &str,
    selector_labels: &BTreeMap<String, String>,
    single_node_pods: bool,
) -> Result<(String, String), String> {
    let name = name.to_string();
    let yaml = |v: &dyn erased::Yaml| v.to_yaml();
    if single_node_pods {
        // One replica per pod, in the pod's own network namespace: the pod's port, not the
        // one a launch script's server got on a shared node. (A single-node data-parallel
        // launch already uses it.)
        let cmd = if d.launch == LaunchMode::Replicas {
            crate::vllm::pod_command(d)
        } else {
            cmds.iter()
                .find(|c| !c.blocking)
                .ok_or("no command")?
                .clone()
        };
        let dep = Deployment {
            metadata: meta(d, name.clone()),
            spec: Some(DeploymentSpec {
                replicas: replicas(d),
                selector: LabelSelector {
                    match_labels: Some(selector_labels.clone()),
                    ..Default::default()
                },
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(IntOrString::Int(rollout(d).1)),
                        max_unavailable: Some(IntOrString::Int(rollout(d).0)),
                    }),
                }),
                template: pod(d, &cmd, &[], true, None),
                ..Default::default()
            }),
            ..Default::default()
        };
        Ok(("k8s/deployment.yaml".to_string(), yaml(&dep)?))
    } else {
        let leader_cmd = cmds
            .iter()
            .find(|c| c.node_rank == 0 && !c.blocking)
            .ok_or("no leader command")?
            .clone();
        let worker_cmd = cmds
            .iter()
            .find(|c| c.node_rank == 1)
            .ok_or("no worker command")?
            .clone();
        let head = format!("export {HEAD_ADDR}=\"${{LWS_LEADER_ADDRESS}}\"");
        // The head's blocking steps (Ray: start the head, wait for the group) run before `exec`.
        let mut leader_pre = vec![head.clone()];
        leader_pre.extend(
            cmds.iter()
                .filter(|c| c.node_rank == 0 && c.blocking)
                .map(|c| line(&c.argv)),
        );
        // The worker's node rank is the pod's LWS_WORKER_INDEX: the vLLM target builds the
        // command for it (no rewriting of a script's argv here).
        let (mut worker_pre, worker_argv) =
            crate::vllm::worker_command(d, NodeRank::Env("LWS_WORKER_INDEX"));
        worker_pre.insert(0, head);
        let worker = NodeCommand {
            argv: worker_argv,
            ..worker_cmd
        };
        let mut lws_meta = meta(d, name.clone());
        if multi_node_nvlink(d) && group_fills_domain(d) {
            lws_meta.annotations = Some(BTreeMap::from([(
                LWS_EXCLUSIVE_TOPOLOGY.to_string(),
                CLIQUE_LABEL.to_string(),
            )]));
        }
        let lws = LeaderWorkerSet {
            api_version: "leaderworkerset.x-k8s.io/v1".into(),
            kind: "LeaderWorkerSet".into(),
            metadata: lws_meta,
            spec: LeaderWorkerSetSpec {
                replicas: replicas(d),
                startup_policy: "LeaderCreated".into(),
                rollout_strategy: d.kubernetes.disruption.map(|_| {
                    let (max_unavailable, max_surge) = rollout(d);
                    LwsRolloutStrategy {
                        type_: "RollingUpdate".into(),
                        rolling_update_configuration: LwsRollingUpdate {
                            max_unavailable,
                            max_surge,
                        },
                    }
                }),
                leader_worker_template: LeaderWorkerTemplate {
                    size: d.nodes_per_group as i32,
                    restart_policy: "RecreateGroupOnPodRestart".into(),
                    leader_template: pod(d, &leader_cmd, &leader_pre, true, Some("leader")),
                    worker_template: pod(d, &worker, &worker_pre, false, Some("worker")),
                },
            },
        };
        Ok(("k8s/leaderworkerset.yaml".to_string(), yaml(&lws)?))
    }
}

/// The client Service: the deployment's name (or `<name>-leader` for a LeaderWorkerSet,
/// whose own headless Service takes the name), selecting the serving pods (the leaders),
/// or every part's when the deployment spreads over node groups.
fn api_service(d: &DeploymentPlan, name: &str, single_node_pods: bool) -> Service {
    let name = name.to_string();
    let selector_labels = BTreeMap::from([("app.kubernetes.io/name".to_string(), name.clone())]);
    let mut svc_selector = selector_labels.clone();
    if !single_node_pods {
        svc_selector = BTreeMap::from([
            (LWS_NAME_LABEL.to_string(), name.clone()),
            ("role".to_string(), "leader".to_string()),
        ]);
    }
    // A LeaderWorkerSet creates a headless Service under its own name (what
    // LWS_LEADER_ADDRESS resolves through) unless one exists: the client Service must not
    // take that name, or the workers never resolve the leader. Upstream names it
    // `<name>-leader`.
    let mut svc_name = if single_node_pods {
        name.clone()
    } else {
        format!("{name}-leader")
    };
    // A deployment spread over node groups has one Service, carried by its first part
    // and named after the deployment, selecting every part's serving pods.
    if let Some(part) = &d.part_of {
        let base = dns_name(&part.deployment);
        svc_name = if single_node_pods {
            base.clone()
        } else {
            format!("{base}-leader")
        };
        svc_selector = BTreeMap::from([(PART_OF_LABEL.to_string(), base)]);
        if !single_node_pods {
            svc_selector.insert("role".into(), "leader".into());
        }
    }
    let mut svc_meta = meta(d, svc_name);
    svc_meta
        .labels
        .get_or_insert_with(Default::default)
        .insert(API_LABEL.into(), "true".into());
    Service {
        metadata: svc_meta,
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(svc_selector),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: pod_port(d) as i32,
                target_port: Some(IntOrString::String("http".into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The rolling update's (maxUnavailable, maxSurge): as N−1 sized them in the plan
/// (`ir::Disruption`), else one down and no surge.
fn rollout(d: &DeploymentPlan) -> (i32, i32) {
    let int = |v: u64| i32::try_from(v).unwrap_or(i32::MAX);
    d.kubernetes.disruption.map_or((1, 0), |x| {
        (int(x.rollout_max_unavailable), int(x.rollout_max_surge))
    })
}

/// A PodDisruptionBudget over the serving pods (a LeaderWorkerSet's whole groups), as
/// many down at once as N−1 allows with the SLOs held (`ir::Disruption::budget`; 1
/// without the figures).
fn disruption_budget(
    d: &DeploymentPlan,
    name: &str,
    selector_labels: BTreeMap<String, String>,
    single_node_pods: bool,
) -> PodDisruptionBudget {
    let name = name.to_string();
    let pdb_selector = if single_node_pods {
        selector_labels
    } else {
        BTreeMap::from([(LWS_NAME_LABEL.to_string(), name.clone())])
    };
    PodDisruptionBudget {
        metadata: meta(d, name.clone()),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(
                d.kubernetes
                    .disruption
                    .map_or(1, |x| i32::try_from(x.budget).unwrap_or(i32::MAX)),
            )),
            selector: Some(LabelSelector {
                match_labels: Some(pdb_selector),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pod's image pull secrets, when the user names some.
fn image_pull_secrets(d: &DeploymentPlan) -> Option<Vec<LocalObjectReference>> {
    let names = &d.kubernetes.pod.image_pull_secrets;
    (!names.is_empty()).then(|| {
        names
            .iter()
            .map(|n| LocalObjectReference { name: n.clone() })
            .collect()
    })
}

/// The replica count the objects state: none under autoscaling (the autoscaler owns it).
fn replicas(d: &DeploymentPlan) -> Option<i32> {
    d.kubernetes.autoscale.is_none().then_some(d.groups as i32)
}

/// The label on the client Service (what a ServiceMonitor selects; the preflight's
/// headless Service does not carry it).
const API_LABEL: &str = "dic.dev/api";

/// `kustomization.yaml` for the serving objects (`kubectl apply -k k8s -n NAMESPACE`), and
/// one of its own for the preflight, which must complete before the serving objects are
/// applied. Each lists exactly the files beside it, and sets the namespace only when the
/// file does.
fn kustomizations(d: &DeploymentPlan, out: &mut BTreeMap<String, String>) {
    for folder in ["k8s/", "k8s/preflight/", "k8s/model-cache/"] {
        let resources: Vec<serde_json::Value> = out
            .keys()
            .filter_map(|k| k.strip_prefix(folder))
            .filter(|f| !f.contains('/'))
            .map(|f| serde_json::Value::String(f.to_string()))
            .collect();
        if resources.is_empty() {
            continue;
        }
        let mut k = serde_json::json!({
            "apiVersion": KUSTOMIZE_API_VERSION,
            "kind": "Kustomization",
            "resources": resources,
        });
        if let Some(ns) = &d.kubernetes.namespace {
            k["namespace"] = serde_json::Value::String(ns.clone());
        }
        out.insert(
            format!("{folder}{KUSTOMIZATION}"),
            crate::yaml::to_string(&k),
        );
    }
}

/// The file kustomize reads in a folder.
pub const KUSTOMIZATION: &str = "kustomization.yaml";
const KUSTOMIZE_API_VERSION: &str = "kustomize.config.k8s.io/v1beta1";

/// The variable `dic run` reads the job's secret from (dic-runtime's `auth::SECRET_ENV`;
/// the targets do not depend on the runtime, a test checks the two agree).
pub const fn dic_runtime_secret_env() -> &'static str {
    "DIC_JOB_SECRET"
}

/// YAML serialization behind one small trait object, so every kind goes through one path.
mod erased {
    pub trait Yaml {
        fn to_yaml(&self) -> Result<String, String>;
    }
    impl<T: serde::Serialize> Yaml for T {
        fn to_yaml(&self) -> Result<String, String> {
            let value = serde_json::to_value(self).map_err(|e| e.to_string())?;
            Ok(crate::yaml::to_string(&value))
        }
    }
}
