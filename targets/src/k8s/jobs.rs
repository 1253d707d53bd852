//! The Jobs a deployment may need before its serving objects: the checkpoint's download
//! into a model-cache claim, and the fabric preflight that replays the NCCL plan with
//! `dic run` on the deployment's nodes.

use super::*;

/// `model_cache = { pvc, size }`: the claim (ReadWriteMany, so every node of every group
/// mounts it and the download Job writes it) and a Job that downloads the checkpoint into
/// it with the image's own `huggingface_hub`, in `k8s/model-cache/` with its own
/// kustomization: apply it and wait for the Job before the serving objects.
pub(super) fn model_download(
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
                    enable_service_links: NO_SERVICE_LINKS,
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

/// Mount point of the plan in the preflight pods.
const PLAN_DIR: &str = "/etc/dic";

/// The optional fabric preflight: the deployment's NCCL plan in a ConfigMap, a headless
/// Service for the pods' DNS names, and an Indexed Job with one pod per node of the
/// deployment (same GPUs, affinity, tolerations, RDMA resources and NCCL environment as
/// the vLLM pods) running `dic run --node $JOB_COMPLETION_INDEX`; pod 0 serves the
/// rendezvous. Apply it and wait for it to complete before the deployment.
pub(super) fn preflight(
    d: &DeploymentPlan,
    cmd: &NodeCommand,
    image: &str,
) -> Result<Vec<(String, String)>, String> {
    use k8s_openapi::api::batch::v1::{Job, JobSpec};
    use k8s_openapi::api::core::v1::ConfigMap;
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
    let svc = preflight_service(d, &name, &selector);
    let nodes = d.nodes.max(1);
    let (template, extra) = preflight_pod(d, cmd, image, &name, &selector)?;
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

/// The headless Service that gives the preflight pods their DNS names (pod 0's serves
/// the rendezvous), ready before they are.
fn preflight_service(
    d: &DeploymentPlan,
    name: &str,
    selector: &BTreeMap<String, String>,
) -> Service {
    Service {
        metadata: meta(d, name.to_string()),
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
    }
}

/// The preflight Job's pod: the vLLM pod's GPUs, affinity, tolerations and NCCL
/// environment, one NVLink domain by its own labels, the plan mounted, and the container
/// running `dic run --node`; with the objects it needs of its own (an IMEX domain's
/// ComputeDomain on multi-node NVLink).
fn preflight_pod(
    d: &DeploymentPlan,
    cmd: &NodeCommand,
    image: &str,
    name: &str,
    selector: &BTreeMap<String, String>,
) -> Result<(PodTemplateSpec, Vec<(String, String)>), String> {
    use k8s_openapi::api::core::v1::ConfigMapVolumeSource;
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
    spec.subdomain = Some(name.to_string());
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: "plan".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: name.to_string(),
            ..Default::default()
        }),
        ..Default::default()
    });
    let c = spec.containers.first_mut().ok_or("pod without container")?;
    preflight_container(c, d, image, name, gpus);
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
            resource_claim_template_name: Some(channel_of(name)),
            ..Default::default()
        }]);
        extra.push((
            "k8s/preflight/computedomain.yaml".to_string(),
            crate::yaml::to_string(&compute_domain(d, name)),
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
    Ok((template, extra))
}

/// The preflight container: `dic run --node $JOB_COMPLETION_INDEX` with the NCCL backend,
/// the rendezvous at pod 0, the job's secret, and the pod's GPUs.
fn preflight_container(
    c: &mut k8s_openapi::api::core::v1::Container,
    d: &DeploymentPlan,
    image: &str,
    name: &str,
    gpus: u64,
) {
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
    env.push(secret_env(dic_runtime_secret_env(), name, "secret", false));
    c.resources = Some(pod_resources(d, gpus, false));
}
