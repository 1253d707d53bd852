//! The engine's pod template, shared by the Deployment and both LeaderWorkerSet
//! templates: its labels, the vLLM container (environment, ports, resources, mounts,
//! probes), and the pod's scheduling — node affinity on the GPU product of the
//! deployment's own node group, tolerations, the IMEX claim, volumes. Everything
//! vendor-specific (the GPU resource, its product labels, the image) comes from the
//! launch plan.

use super::*;

/// The pod template of a deployment's engine process `cmd` (its blocking steps in
/// `preamble`); `api` for the pod serving the API (ports and probes), `role` for a
/// LeaderWorkerSet's leader or worker.
pub(super) fn pod(
    d: &DeploymentPlan,
    cmd: &NodeCommand,
    preamble: &[String],
    api: bool,
    role: Option<&str>,
) -> PodTemplateSpec {
    let settings = &d.kubernetes.pod;
    let (cache_volume, cache_read_only) = cache_volume(d);
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(pod_labels(d, role, api)),
            annotations: pod_annotations(d),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![engine_container(d, cmd, preamble, api, cache_read_only)],
            // llm-d's routing sidecar in front of a decode pool's vLLM (a native sidecar:
            // started before vLLM, stopped after it).
            init_containers: api
                .then(|| super::routing_sidecar::routing_sidecar(d))
                .flatten()
                .map(|c| vec![c]),
            // vLLM, NCCL and `dic run` never call the Kubernetes API.
            automount_service_account_token: Some(false),
            enable_service_links: NO_SERVICE_LINKS,
            host_network: d.network.host_network.then_some(true),
            dns_policy: host_network_dns(d),
            affinity: gpu_affinity(d),
            tolerations: Some(tolerations(d)),
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
            image_pull_secrets: image_pull_secrets(d),
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

/// The pods' labels: dic's (name, part, pool), the LeaderWorkerSet role, llm-d's on the
/// pods of a disaggregated pool behind the endpoint picker (`api`: those that serve),
/// then the user's, which never replace dic's (the checker refuses their keys).
fn pod_labels(d: &DeploymentPlan, role: Option<&str>, api: bool) -> BTreeMap<String, String> {
    let mut labels = labels(d);
    if let Some(r) = role {
        labels.insert("role".into(), r.into());
    }
    labels.extend(super::gateway::pd_pod_labels(d, api));
    for (k, v) in &d.kubernetes.pod.labels {
        labels.entry(k.clone()).or_insert_with(|| v.clone());
    }
    labels
}

/// The profile's annotations attach the RDMA networks: only for traffic across nodes;
/// the user's are added to them.
fn pod_annotations(d: &DeploymentPlan) -> Option<BTreeMap<String, String>> {
    let mut annotations: BTreeMap<String, String> = if uses_fabric(d) {
        d.network.annotations.iter().cloned().collect()
    } else {
        BTreeMap::new()
    };
    annotations.extend(d.kubernetes.pod.annotations.iter().cloned());
    (!annotations.is_empty()).then_some(annotations)
}

/// The vLLM process's environment: the command's (less the device list, which the device
/// plugin sets), the socket interface a pod outside the host network has, NIXL's side
/// channel address, the model cache and the secrets by reference.
fn engine_env(d: &DeploymentPlan, cmd: &NodeCommand) -> Vec<EnvVar> {
    let mut env_map = cmd.env.clone();
    env_map.remove("CUDA_VISIBLE_DEVICES");
    // Outside the host network a pod has one interface, `eth0` (the CNI convention); in
    // the host network the profile must name the hosts' (the checker requires it).
    if d.nodes_per_group > 1 && !d.network.host_network && d.network.socket_ifname.is_none() {
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
    env
}

/// The vLLM container: the launch plan's image, the command under `bash -c`, its
/// environment, the API (and NIXL) ports and probes on the API pod, GPUs and the IMEX
/// claim, `/dev/shm` and the model cache.
fn engine_container(
    d: &DeploymentPlan,
    cmd: &NodeCommand,
    preamble: &[String],
    api: bool,
    cache_read_only: bool,
) -> Container {
    let mut resources = pod_resources(d, d.gpus_per_pod, true);
    if multi_node_nvlink(d) {
        resources.claims = Some(vec![k8s_openapi::api::core::v1::ResourceClaim {
            name: IMEX_CLAIM.into(),
            request: None,
        }]);
    }
    let startup_failures = (d.kubernetes.startup_seconds.div_ceil(10)).max(1) as i32;
    Container {
        name: "vllm".into(),
        image: Some(d.kubernetes.image.clone()),
        command: Some(vec![
            "/bin/bash".into(),
            "-c".into(),
            script(preamble, &cmd.argv),
        ]),
        env: Some(engine_env(d, cmd)),
        ports: api.then(|| api_ports(d)),
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
    }
}

/// The API pod's ports: vLLM's `http`, and NIXL's side channel in a disaggregated pool.
fn api_ports(d: &DeploymentPlan) -> Vec<ContainerPort> {
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
}

/// The GPU's taint (keyed by its device plugin's resource), then the user's tolerations.
fn tolerations(d: &DeploymentPlan) -> Vec<Toleration> {
    let mut tolerations = vec![Toleration {
        key: Some(d.gpu.resource.clone()),
        operator: Some("Exists".into()),
        effect: Some("NoSchedule".into()),
        ..Default::default()
    }];
    for t in &d.kubernetes.pod.tolerations {
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
    tolerations
}

/// Node affinity on the product labels of the deployment's own GPU (each node group's
/// part of a deployment has its own), and the NVLink clique's pod affinity. No product
/// label (W0801): no node affinity, rather than one no node satisfies.
fn gpu_affinity(d: &DeploymentPlan) -> Option<Affinity> {
    let clique = clique_affinity(d);
    if d.gpu.product_labels.is_empty() && clique.is_none() {
        return None;
    }
    Some(Affinity {
        pod_affinity: clique,
        node_affinity: (!d.gpu.product_labels.is_empty()).then(|| NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: GPU_PRODUCT_LABEL.into(),
                        operator: "In".into(),
                        values: Some(d.gpu.product_labels.clone()),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The node label GPU Feature Discovery writes the NVML product name under (the launch
/// plan's `product_labels` are its values; AMD GPUs have none).
const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
