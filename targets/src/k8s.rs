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
    pub leader_worker_template: LeaderWorkerTemplate,
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

/// The pods' claim on the ComputeDomain's IMEX channel.
const IMEX_CLAIM: &str = "imex-channel";
/// The node label GPU Feature Discovery sets to a node's NVLink domain (clique).
const CLIQUE_LABEL: &str = "nvidia.com/gpu.clique";
/// The label the LWS controller gives every pod of one group (its value per group).
const LWS_GROUP_KEY: &str = "leaderworkerset.sigs.k8s.io/group-key";
/// LWS's annotation that gives each group a topology domain of its own.
const LWS_EXCLUSIVE_TOPOLOGY: &str = "leaderworkerset.sigs.k8s.io/exclusive-topology";

/// A group that spans nodes inside one NVLink domain (GB200/GB300 NVL72 trays): its
/// traffic crosses trays over multi-node NVLink, which NVIDIA's DRA driver sets up
/// through a ComputeDomain (IMEX channels); without it NCCL falls back to the network.
fn multi_node_nvlink(d: &DeploymentPlan) -> bool {
    d.nodes_per_group > 1 && d.nvlink_domain_gpus > d.gpus_per_node
}

/// The ResourceClaimTemplate the ComputeDomain creates for its channel.
fn compute_domain_channel(d: &DeploymentPlan) -> String {
    channel_of(&dns_name(&d.name))
}

fn channel_of(base: &str) -> String {
    format!("{base}-imex-channel")
}

/// A group that fills its NVLink domain gets the domain to itself (LWS exclusive
/// topology); a smaller one is kept inside one domain by a pod affinity on the clique
/// label, matched per group through the LWS group key (the first pod of a group matches
/// itself).
fn group_fills_domain(d: &DeploymentPlan) -> bool {
    d.nodes_per_group * d.gpus_per_node >= d.nvlink_domain_gpus
}

fn clique_affinity(d: &DeploymentPlan) -> Option<PodAffinity> {
    (multi_node_nvlink(d) && !group_fills_domain(d)).then(|| PodAffinity {
        required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    LWS_NAME_LABEL.to_string(),
                    dns_name(&d.name),
                )])),
                ..Default::default()
            }),
            match_label_keys: Some(vec![LWS_GROUP_KEY.into()]),
            topology_key: CLIQUE_LABEL.into(),
            ..Default::default()
        }]),
        ..Default::default()
    })
}

/// NVIDIA's ComputeDomain (DRA driver for GPUs, `resource.nvidia.com/v1beta1`): the IMEX
/// domain the deployment's pods join through the channel claim; `numNodes` is every node
/// the deployment's pods run on.
fn compute_domain(d: &DeploymentPlan, base: &str) -> serde_json::Value {
    let mut metadata =
        serde_json::json!({ "name": format!("{base}-compute-domain"), "labels": labels(d) });
    if let Some(ns) = &d.kubernetes.namespace {
        metadata["namespace"] = ns.clone().into();
    }
    serde_json::json!({
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": metadata,
        "spec": {
            "numNodes": d.nodes,
            "channel": { "resourceClaimTemplate": { "name": channel_of(base) } },
        },
    })
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

/// The pod template shared by the Deployment and both LWS templates.
fn pod(
    d: &DeploymentPlan,
    cmd: &NodeCommand,
    preamble: &[String],
    api: bool,
    role: Option<&str>,
) -> PodTemplateSpec {
    let mut labels = labels(d);
    if let Some(r) = role {
        labels.insert("role".into(), r.into());
    }
    // The user's labels never replace dic's (the checker refuses their keys).
    for (k, v) in &d.kubernetes.pod.labels {
        labels.entry(k.clone()).or_insert_with(|| v.clone());
    }
    let spans_nodes = d.nodes_per_group > 1;
    let mut env_map = cmd.env.clone();
    env_map.remove("CUDA_VISIBLE_DEVICES");
    // Outside the host network a pod has one interface, `eth0` (the CNI convention); in
    // the host network the profile must name the hosts' (the checker requires it).
    if spans_nodes && !d.network.host_network && d.network.socket_ifname.is_none() {
        for var in ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"] {
            env_map.insert(var.into(), POD_INTERFACE.into());
        }
    }
    let mut env: Vec<EnvVar> = env_map.iter().map(|(k, v)| env_var(k, v)).collect();
    if d.disaggregated.is_some() {
        // NIXL's side channel announces the pod's own address to the other pool.
        env.push(pod_ip_env(crate::vllm::SIDE_CHANNEL_HOST));
    }
    env.push(env_var("HF_HOME", HF_HOME));
    if !matches!(d.kubernetes.model_cache, ModelCache::EmptyDir { .. }) {
        // A staged cache is mounted read-only: resolve from it, never download.
        env.push(env_var("HF_HUB_OFFLINE", "1"));
    }
    env.push(secret_env(
        "HF_TOKEN",
        &d.kubernetes.hf_token_secret,
        "token",
        true,
    ));
    if let Some(secret) = &d.kubernetes.api_key_secret {
        // Not optional: a server meant to check keys must not start without one.
        env.push(secret_env("VLLM_API_KEY", secret, "api-key", false));
    }
    let resources = pod_resources(d, d.gpus_per_pod, true);
    let (cache_volume, cache_read_only) = cache_volume(d);
    let mut resources = resources;
    if multi_node_nvlink(d) {
        resources.claims = Some(vec![k8s_openapi::api::core::v1::ResourceClaim {
            name: IMEX_CLAIM.into(),
            request: None,
        }]);
    }
    let startup_failures = (d.kubernetes.startup_seconds.div_ceil(10)).max(1) as i32;
    let container = Container {
        name: "vllm".into(),
        image: Some(d.kubernetes.image.clone()),
        command: Some(vec![
            "/bin/bash".into(),
            "-c".into(),
            script(preamble, &cmd.argv),
        ]),
        env: Some(env),
        ports: api.then(|| {
            let mut ports = vec![ContainerPort {
                name: Some("http".into()),
                container_port: pod_port(d) as i32,
                ..Default::default()
            }];
            if d.disaggregated.is_some() {
                ports.push(ContainerPort {
                    name: Some("nixl".into()),
                    container_port: dic_compiler::ir::NIXL_SIDE_CHANNEL_PORT as i32,
                    ..Default::default()
                });
            }
            ports
        }),
        resources: Some(resources),
        volume_mounts: Some(vec![
            VolumeMount {
                name: "dshm".into(),
                mount_path: "/dev/shm".into(),
                ..Default::default()
            },
            VolumeMount {
                name: "hf-cache".into(),
                mount_path: HF_HOME.into(),
                read_only: cache_read_only.then_some(true),
                ..Default::default()
            },
        ]),
        startup_probe: api.then(|| health("http", 10, startup_failures)),
        readiness_probe: api.then(|| health("http", 5, 3)),
        liveness_probe: api.then(|| health("http", 10, 3)),
        security_context: Some(engine_security(d)),
        ..Default::default()
    };
    // The profile's annotations attach the RDMA networks: only for traffic across nodes.
    let mut annotations: BTreeMap<String, String> = if uses_fabric(d) {
        d.network.annotations.iter().cloned().collect()
    } else {
        BTreeMap::new()
    };
    annotations.extend(d.kubernetes.pod.annotations.iter().cloned());
    let settings = &d.kubernetes.pod;
    let mut tolerations = vec![Toleration {
        key: Some(d.gpu.resource.clone()),
        operator: Some("Exists".into()),
        effect: Some("NoSchedule".into()),
        ..Default::default()
    }];
    for t in &settings.tolerations {
        // Checked by the compiler (TextRule::Toleration); re-parsed here.
        if let Ok((key, value, effect)) = dic_compiler::ir::toleration(t) {
            let value = value.filter(|v| !v.is_empty());
            tolerations.push(Toleration {
                key: Some(key.to_string()),
                operator: Some(if value.is_some() { "Equal" } else { "Exists" }.into()),
                value: value.map(str::to_string),
                effect: effect.map(str::to_string),
                ..Default::default()
            });
        }
    }
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![container],
            // vLLM, NCCL and `dic run` never call the Kubernetes API.
            automount_service_account_token: Some(false),
            host_network: d.network.host_network.then_some(true),
            dns_policy: d
                .network
                .host_network
                .then(|| "ClusterFirstWithHostNet".to_string()),
            // Only a valid label value can match a node; an invalid one would make the
            // manifest fail validation, so the affinity is left out instead.
            // No product label (W0801): no affinity, rather than one no node satisfies.
            affinity: (!d.gpu.product_labels.is_empty() || clique_affinity(d).is_some()).then(
                || Affinity {
                    pod_affinity: clique_affinity(d),
                    node_affinity: (!d.gpu.product_labels.is_empty()).then(|| NodeAffinity {
                        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                            node_selector_terms: vec![NodeSelectorTerm {
                                match_expressions: Some(vec![NodeSelectorRequirement {
                                    key: "nvidia.com/gpu.product".into(),
                                    operator: "In".into(),
                                    values: Some(d.gpu.product_labels.clone()),
                                }]),
                                ..Default::default()
                            }],
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ),
            tolerations: Some(tolerations),
            resource_claims: multi_node_nvlink(d).then(|| {
                vec![PodResourceClaim {
                    name: IMEX_CLAIM.into(),
                    resource_claim_template_name: Some(compute_domain_channel(d)),
                    ..Default::default()
                }]
            }),
            node_selector: (!settings.node_selector.is_empty())
                .then(|| settings.node_selector.iter().cloned().collect()),
            runtime_class_name: settings.runtime_class.clone(),
            service_account_name: settings.service_account.clone(),
            priority_class_name: settings.priority_class.clone(),
            image_pull_secrets: (!settings.image_pull_secrets.is_empty()).then(|| {
                settings
                    .image_pull_secrets
                    .iter()
                    .map(|n| LocalObjectReference { name: n.clone() })
                    .collect()
            }),
            volumes: Some(vec![
                Volume {
                    name: "dshm".into(),
                    empty_dir: Some(EmptyDirVolumeSource {
                        medium: Some("Memory".into()),
                        size_limit: Some(gib(d.kubernetes.shm_bytes)),
                    }),
                    ..Default::default()
                },
                cache_volume,
            ]),
            ..Default::default()
        }),
    }
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
                        max_surge: Some(IntOrString::Int(0)),
                        max_unavailable: Some(IntOrString::Int(1)),
                    }),
                }),
                template: pod(d, &cmd, &[], true, None),
                ..Default::default()
            }),
            ..Default::default()
        };
        out.insert("k8s/deployment.yaml".to_string(), yaml(&dep)?);
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
                leader_worker_template: LeaderWorkerTemplate {
                    size: d.nodes_per_group as i32,
                    restart_policy: "RecreateGroupOnPodRestart".into(),
                    leader_template: pod(d, &leader_cmd, &leader_pre, true, Some("leader")),
                    worker_template: pod(d, &worker, &worker_pre, false, Some("worker")),
                },
            },
        };
        out.insert("k8s/leaderworkerset.yaml".to_string(), yaml(&lws)?);
    }
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
    let svc = Service {
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
    };
    if d.part_of.as_ref().is_none_or(|p| p.first) {
        out.insert("k8s/service.yaml".to_string(), yaml(&svc)?);
    }
    let pdb_selector = if single_node_pods {
        selector_labels
    } else {
        BTreeMap::from([(LWS_NAME_LABEL.to_string(), name.clone())])
    };
    let pdb = PodDisruptionBudget {
        metadata: meta(d, name.clone()),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(pdb_selector),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
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
    if let Some(x) = d
        .disaggregated
        .as_ref()
        .filter(|x| x.role == dic_compiler::ir::Pool::Decode)
    {
        for (file, text) in router(d, x)? {
            out.insert(file, text);
        }
    }
    kustomizations(d, &mut out);
    Ok(out)
}

/// Router pods of a disaggregated deployment.
const ROUTER_REPLICAS: i32 = 2;

/// The client Service of a plan's pods: the plan's name, or `<name>-leader` for a
/// LeaderWorkerSet (which owns the headless Service under its own name).
fn client_service(name: &str, single_node_pods: bool) -> String {
    if single_node_pods {
        name.to_string()
    } else {
        format!("{name}-leader")
    }
}

/// The router of a disaggregated deployment, in the decode pool's folder
/// ([`crate::pd_router`]): `pd_front.py` in a ConfigMap; a Deployment whose pods install
/// the pinned vllm-router into a volume of their own (an init container on the vLLM
/// image, `pip install --target`: the image does not ship it; an air-gapped cluster needs
/// a mirror or an image that does), then run vllm-router on the pod's loopback and the
/// front on the pod IP, both unprivileged, as nobody, on a read-only root filesystem; and
/// the deployment's client Service, named after the deployment, in front of them. The
/// upstreams are each pool's client Service, which spreads the legs over its servers.
fn router(
    d: &DeploymentPlan,
    x: &dic_compiler::ir::DisaggPlan,
) -> Result<Vec<(String, String)>, String> {
    use crate::pd_router::{
        front_flags, router_packages, vllm_router_flags, API_KEY_ENV, FRONT, FRONT_FILE, PORTS,
        ROUTER_KEY_ENV,
    };
    use k8s_openapi::api::core::v1::{ConfigMap, ConfigMapVolumeSource, TCPSocketAction};
    let base = dns_name(&x.deployment);
    let name = format!("{base}-router");
    let upstream = |plan_name: &str| {
        // Both pools are launched the same way when their groups fit a node; a pool
        // spanning nodes is a LeaderWorkerSet behind `<name>-leader`.
        let pool_single = if plan_name == d.name {
            d.nodes_per_group == 1 || d.launch == LaunchMode::Replicas
        } else {
            !x.peer_spans_nodes
        };
        // Both pools come from one `deploy` and one engine block: one pod port.
        format!(
            "http://{}:{}",
            client_service(&dns_name(plan_name), pool_single),
            pod_port(d)
        )
    };
    let (prefill, decode) = (upstream(&x.peer), upstream(&d.name));
    let labels = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), name.clone()),
        (
            "app.kubernetes.io/managed-by".to_string(),
            "dic".to_string(),
        ),
        (PART_OF_LABEL.to_string(), base.clone()),
    ]);
    let meta_of = |n: &str, extra: &[(&str, &str)]| {
        let mut l = labels.clone();
        for (k, v) in extra {
            l.insert(k.to_string(), v.to_string());
        }
        ObjectMeta {
            name: Some(n.to_string()),
            namespace: d.kubernetes.namespace.clone(),
            labels: Some(l),
            ..Default::default()
        }
    };
    let config = ConfigMap {
        metadata: meta_of(&name, &[]),
        data: Some(BTreeMap::from([(
            FRONT_FILE.to_string(),
            FRONT.to_string(),
        )])),
        ..Default::default()
    };
    // Kubernetes expands `$(POD_IP)` in a command from the container's environment.
    let mut common_env = vec![
        pod_ip_env("POD_IP"),
        env_var("PYTHONPATH", ROUTER_LIB),
        env_var("PYTHONDONTWRITEBYTECODE", "1"),
        env_var("HOME", "/tmp"),
    ];
    let key = |var: &str| {
        d.kubernetes
            .api_key_secret
            .as_ref()
            .map(|s| secret_env(var, s, "api-key", false))
    };
    let mut router_env = common_env.clone();
    router_env.extend(key(ROUTER_KEY_ENV));
    common_env.extend(key(API_KEY_ENV));
    let mounts = |names: &[(&str, &str)]| -> Option<Vec<VolumeMount>> {
        Some(
            names
                .iter()
                .map(|(n, path)| VolumeMount {
                    name: n.to_string(),
                    mount_path: path.to_string(),
                    read_only: (*n != "tmp" && *n != "router-lib").then_some(true),
                    ..Default::default()
                })
                .collect(),
        )
    };
    // Every container of the router's pods: the vLLM image, small requests, no privilege.
    let container = |name: &str,
                     command: Vec<String>,
                     env: Vec<EnvVar>,
                     port: Option<(&str, u64)>,
                     (cpu, memory): (&str, &str),
                     volumes: &[(&str, &str)]| Container {
        name: name.into(),
        image: Some(d.kubernetes.image.clone()),
        command: Some(command),
        env: Some(env),
        ports: port.map(|(n, p)| {
            vec![ContainerPort {
                name: Some(n.into()),
                container_port: p as i32,
                ..Default::default()
            }]
        }),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), quantity(cpu)),
                ("memory".to_string(), quantity(memory)),
            ])),
            limits: Some(BTreeMap::from([("memory".to_string(), quantity(memory))])),
            ..Default::default()
        }),
        volume_mounts: mounts(volumes),
        security_context: Some(unprivileged(true)),
        ..Default::default()
    };
    let writable = [("router-lib", ROUTER_LIB), ("tmp", "/tmp")];
    let mut install_argv: Vec<String> = [
        "python3",
        "-m",
        "pip",
        "install",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--target",
        ROUTER_LIB,
    ]
    .iter()
    .map(|w| w.to_string())
    .collect();
    install_argv.extend(router_packages());
    let install = container(
        "install-vllm-router",
        install_argv,
        vec![env_var("HOME", "/tmp")],
        None,
        ("1", "1Gi"),
        &writable,
    );
    let mut router_argv = vec![
        "python3".to_string(),
        "-m".into(),
        "vllm_router.launch_router".into(),
    ];
    router_argv.extend(vllm_router_flags(d, PORTS, 1, &[decode], "$(POD_IP)"));
    let vllm_router = container(
        "vllm-router",
        router_argv,
        router_env,
        Some(("metrics", PORTS.metrics)),
        ("2", "2Gi"),
        &writable,
    );
    let mut front_argv = vec![
        "python3".to_string(),
        format!("{ROUTER_CONFIG}/{FRONT_FILE}"),
    ];
    front_argv.extend(front_flags(
        d,
        PORTS,
        "$(POD_IP)",
        x.router_port,
        &[prefill],
    ));
    let mut front = container(
        "router",
        front_argv,
        common_env,
        Some(("http", x.router_port)),
        ("1", "1Gi"),
        &[
            ("router", ROUTER_CONFIG),
            ("router-lib", ROUTER_LIB),
            ("tmp", "/tmp"),
        ],
    );
    // Ready once vllm-router is (it waits for a healthy server in each pool); the pools take
    // minutes to load, so liveness only checks that the front answers at all.
    front.readiness_probe = Some(health("http", 5, 3));
    front.liveness_probe = Some(Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("http".into()),
            ..Default::default()
        }),
        period_seconds: Some(10),
        failure_threshold: Some(3),
        ..Default::default()
    });
    let empty = |n: &str, limit: &str| Volume {
        name: n.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(quantity(limit)),
            ..Default::default()
        }),
        ..Default::default()
    };
    let selector = BTreeMap::from([("app.kubernetes.io/name".to_string(), name.clone())]);
    let deployment = Deployment {
        metadata: meta_of(&name, &[]),
        spec: Some(DeploymentSpec {
            // Stateless: two, so a restart or a node drain never cuts the service.
            replicas: Some(ROUTER_REPLICAS),
            selector: LabelSelector {
                match_labels: Some(selector.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    init_containers: Some(vec![install]),
                    containers: vec![front, vllm_router],
                    // The router never calls the Kubernetes API.
                    automount_service_account_token: Some(false),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(NOBODY),
                        run_as_group: Some(NOBODY),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    volumes: Some(vec![
                        Volume {
                            name: "router".into(),
                            config_map: Some(ConfigMapVolumeSource {
                                name: name.clone(),
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                        empty("router-lib", "1Gi"),
                        empty("tmp", "256Mi"),
                    ]),
                    image_pull_secrets: image_pull_secrets(d),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    let service = Service {
        metadata: meta_of(&base, &[(API_LABEL, "true")]),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: x.router_port as i32,
                target_port: Some(IntOrString::String("http".into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let yaml = |v: &dyn erased::Yaml| v.to_yaml();
    Ok(vec![
        ("k8s/router-script.yaml".into(), yaml(&config)?),
        ("k8s/router.yaml".into(), yaml(&deployment)?),
        ("k8s/router-service.yaml".into(), yaml(&service)?),
    ])
}

/// Where the router's pods install vllm-router (an emptyDir, on PYTHONPATH).
const ROUTER_LIB: &str = "/opt/dic-router";
/// Where the router's ConfigMap (`pd_front.py`) is mounted.
const ROUTER_CONFIG: &str = "/etc/dic-router";
/// The unprivileged user the router's pods run as (`nobody`).
const NOBODY: i64 = 65534;

/// A container's security context without privilege: no escalation (setuid binaries gain
/// nothing), every capability dropped, and, with `read_only`, a read-only root filesystem.
fn unprivileged(read_only: bool) -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Default::default()
        }),
        read_only_root_filesystem: read_only.then_some(true),
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

/// The metric vLLM exports for requests waiting in its queue (production-stack's
/// autoscaling signal).
const WAITING_METRIC: &str = "vllm:num_requests_waiting";

/// An autoscaler on vLLM's queue: a HorizontalPodAutoscaler (autoscaling/v2) on the pods'
/// `vllm:num_requests_waiting` (served by a custom-metrics adapter such as
/// prometheus-adapter; for a LeaderWorkerSet the HPA reads the leaders, which the LWS's
/// scale subresource selects), or a KEDA ScaledObject querying Prometheus for the same
/// metric. The unit of scaling is a replica (a whole group).
fn autoscaler(
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
fn monitor(
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

/// The label on the client Service (what a ServiceMonitor selects; the preflight's
/// headless Service does not carry it).
const API_LABEL: &str = "dic.dev/api";

/// `model_cache = { pvc, size }`: the claim (ReadWriteMany, so every node of every group
/// mounts it and the download Job writes it) and a Job that downloads the checkpoint into
/// it with the image's own `huggingface_hub`, in `k8s/model-cache/` with its own
/// kustomization: apply it and wait for the Job before the serving objects.
fn model_download(
    d: &DeploymentPlan,
    claim: &str,
    size: u64,
    storage_class: Option<&str>,
) -> Result<Vec<(String, String)>, String> {
    use k8s_openapi::api::batch::v1::{Job, JobSpec};
    use k8s_openapi::api::core::v1::{
        PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
    };
    let yaml = |v: &dyn erased::Yaml| v.to_yaml();
    let pvc = PersistentVolumeClaim {
        metadata: meta(d, claim.to_string()),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteMany".into()]),
            storage_class_name: storage_class.map(str::to_string),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), gib(size))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut out = vec![(
        "k8s/model-cache/persistentvolumeclaim.yaml".into(),
        yaml(&pvc)?,
    )];
    // A local path is not a repository: there is nothing to download.
    if d.model.source.starts_with('/') || d.model.source.starts_with('.') {
        return Ok(out);
    }
    let name = format!("{}-download", dns_name(&d.name));
    // The repository reaches Python through the environment, never through the code.
    let code = "import os; from huggingface_hub import snapshot_download; snapshot_download(os.environ[\"DIC_MODEL\"])";
    let container = Container {
        name: "download".into(),
        image: Some(d.kubernetes.image.clone()),
        command: Some(vec!["python3".into(), "-c".into(), code.into()]),
        env: Some(vec![
            env_var("DIC_MODEL", &d.model.source),
            env_var("HF_HOME", HF_HOME),
            secret_env("HF_TOKEN", &d.kubernetes.hf_token_secret, "token", true),
        ]),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), quantity(4)),
                ("memory".to_string(), Quantity("8Gi".into())),
            ])),
            limits: Some(BTreeMap::from([(
                "memory".to_string(),
                Quantity("8Gi".into()),
            )])),
            ..Default::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: "hf-cache".into(),
            mount_path: HF_HOME.into(),
            ..Default::default()
        }]),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    };
    let job = Job {
        metadata: meta(d, name),
        spec: Some(JobSpec {
            backoff_limit: Some(3),
            ttl_seconds_after_finished: Some(86_400),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(BTreeMap::from([(
                        "app.kubernetes.io/component".to_string(),
                        "model-download".to_string(),
                    )])),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("OnFailure".into()),
                    containers: vec![container],
                    automount_service_account_token: Some(false),
                    image_pull_secrets: (!d.kubernetes.pod.image_pull_secrets.is_empty()).then(
                        || {
                            d.kubernetes
                                .pod
                                .image_pull_secrets
                                .iter()
                                .map(|n| LocalObjectReference { name: n.clone() })
                                .collect()
                        },
                    ),
                    volumes: Some(vec![Volume {
                        name: "hf-cache".into(),
                        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                            claim_name: claim.to_string(),
                            read_only: None,
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    out.push(("k8s/model-cache/job.yaml".into(), yaml(&job)?));
    Ok(out)
}

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

/// Mount point of the plan in the preflight pods.
const PLAN_DIR: &str = "/etc/dic";

/// The optional fabric preflight: the deployment's NCCL plan in a ConfigMap, a headless
/// Service for the pods' DNS names, and an Indexed Job with one pod per node of the
/// deployment (same GPUs, affinity, tolerations, RDMA resources and NCCL environment as
/// the vLLM pods) running `dic run --node $JOB_COMPLETION_INDEX`; pod 0 serves the
/// rendezvous. Apply it and wait for it to complete before the deployment.
fn preflight(
    d: &DeploymentPlan,
    cmd: &NodeCommand,
    image: &str,
) -> Result<Vec<(String, String)>, String> {
    use k8s_openapi::api::batch::v1::{Job, JobSpec};
    use k8s_openapi::api::core::v1::{ConfigMap, ConfigMapVolumeSource};
    let name = format!("{}-preflight", dns_name(&d.name));
    let yaml = |v: &dyn erased::Yaml| v.to_yaml();
    let plan = crate::nccl::plan_toml(d)?;
    let cm = ConfigMap {
        metadata: meta(d, name.clone()),
        data: Some(BTreeMap::from([("plan.toml".to_string(), plan)])),
        ..Default::default()
    };
    // Its own name label: the deployment's selectors must not match the Job's pods.
    let selector = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), name.clone()),
        (
            "app.kubernetes.io/component".to_string(),
            "preflight".to_string(),
        ),
    ]);
    let svc = Service {
        metadata: meta(d, name.clone()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(selector.clone()),
            ports: Some(vec![ServicePort {
                name: Some("rendezvous".into()),
                port: crate::nccl::RENDEZVOUS_PORT as i32,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            publish_not_ready_addresses: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let nodes = d.nodes.max(1);
    let gpus = d.comm.world_size.min(d.gpus_per_node.max(1));
    let mut template = pod(d, cmd, &[], false, None);
    let labels = template.metadata.get_or_insert_with(Default::default);
    labels
        .labels
        .get_or_insert_with(Default::default)
        .extend(selector.clone());
    let spec = template.spec.as_mut().ok_or("pod template without spec")?;
    spec.restart_policy = Some("Never".into());
    // The Job's pods are not an LWS group: they keep to one NVLink domain by their own
    // labels (the first matches itself), so the preflight tests the fabric vLLM will use.
    if let Some(a) = spec.affinity.as_mut() {
        a.pod_affinity = multi_node_nvlink(d).then(|| PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: Some(selector.clone()),
                    ..Default::default()
                }),
                topology_key: CLIQUE_LABEL.into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
    }
    spec.subdomain = Some(name.clone());
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: "plan".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: name.clone(),
            ..Default::default()
        }),
        ..Default::default()
    });
    let c = spec.containers.first_mut().ok_or("pod without container")?;
    c.name = "preflight".into();
    c.image = Some(image.to_string());
    // The NCCL backend on the deployment's GPUs, and NCCL's own log checked for the
    // fabric the plan assumes: a broken RDMA setup (NCCL falling back to sockets) fails
    // the Job instead of passing over TCP.
    let mut argv = vec![
        Arg::lit("dic"),
        Arg::lit("run"),
        Arg::lit(format!("{PLAN_DIR}/plan.toml")),
        Arg::lit("--node"),
        Arg::env("JOB_COMPLETION_INDEX"),
        Arg::lit("--backend"),
        Arg::lit("nccl"),
    ];
    if let Some(t) = &d.fabric_transport {
        argv.push(Arg::lit("--expect-transport"));
        argv.push(Arg::lit(t));
    }
    // POSIX sh (the dic image needs no bash): exec, so dic gets the signals.
    c.command = Some(vec![
        "/bin/sh".into(),
        "-c".into(),
        format!("exec {}", line(&argv)),
    ]);
    let env = c.env.get_or_insert_with(Vec::new);
    env.retain(|e| e.name != "HF_TOKEN" && e.name != "HF_HOME");
    // Pod 0's stable DNS name: <job>-0.<service> (Indexed Job hostname + subdomain).
    env.push(env_var(HEAD_ADDR, &format!("{name}-0.{name}")));
    // The job's secret authenticates every rank's handshake (docs/runtime.md). It is
    // referenced, never generated into the manifest: create it once per namespace with
    // `kubectl create secret generic <name> --from-literal=secret=$(openssl rand -hex 32)`.
    // Not optional: without it the pods do not start, which is the failure to want.
    env.push(secret_env(dic_runtime_secret_env(), &name, "secret", false));
    c.resources = Some(pod_resources(d, gpus, false));
    // The preflight runs before the serving objects exist: it joins an IMEX domain of its
    // own, in its own folder.
    let mut extra = Vec::new();
    if multi_node_nvlink(d) {
        if let Some(r) = c.resources.as_mut() {
            r.claims = Some(vec![k8s_openapi::api::core::v1::ResourceClaim {
                name: IMEX_CLAIM.into(),
                request: None,
            }]);
        }
        spec.resource_claims = Some(vec![PodResourceClaim {
            name: IMEX_CLAIM.into(),
            resource_claim_template_name: Some(channel_of(&name)),
            ..Default::default()
        }]);
        extra.push((
            "k8s/preflight/computedomain.yaml".to_string(),
            crate::yaml::to_string(&compute_domain(d, &name)),
        ));
    }
    c.ports = Some(vec![ContainerPort {
        name: Some("rendezvous".into()),
        container_port: crate::nccl::RENDEZVOUS_PORT as i32,
        ..Default::default()
    }]);
    c.volume_mounts
        .get_or_insert_with(Vec::new)
        .retain(|m| m.name == "dshm");
    if let Some(v) = c.volume_mounts.as_mut() {
        v.push(VolumeMount {
            name: "plan".into(),
            mount_path: PLAN_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    spec.volumes
        .get_or_insert_with(Vec::new)
        .retain(|v| v.name != "hf-cache");
    let job = Job {
        metadata: meta(d, name.clone()),
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(nodes as i32),
            parallelism: Some(nodes as i32),
            backoff_limit: Some(0),
            // every rank gives up after the plan's timeout; leave room for image pulls
            active_deadline_seconds: Some(1800),
            ttl_seconds_after_finished: Some(86_400),
            template,
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut out = vec![
        ("k8s/preflight/configmap.yaml".into(), yaml(&cm)?),
        ("k8s/preflight/service.yaml".into(), yaml(&svc)?),
        ("k8s/preflight/job.yaml".into(), yaml(&job)?),
    ];
    out.extend(extra);
    Ok(out)
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
