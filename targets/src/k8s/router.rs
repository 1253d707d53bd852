//! The router of a disaggregated deployment on Kubernetes, in the decode pool's folder
//! ([`crate::pd_router`]): `pd_front.py` in a ConfigMap; a Deployment whose pods install
//! the pinned vllm-router into a volume of their own (an init container on the vLLM
//! image, `pip install --target`: the image does not ship it; an air-gapped cluster needs
//! a mirror or an image that does), then run vllm-router on the pod's loopback and the
//! front on the pod IP, both unprivileged, as nobody, on a read-only root filesystem; and
//! the deployment's client Service, named after the deployment, in front of them. The
//! upstreams are each pool's client Service, which spreads the legs over its servers.

use super::*;
use crate::pd_router::{
    front_flags, router_packages, vllm_router_flags, API_KEY_ENV, FRONT, FRONT_FILE, PORTS,
    ROUTER_KEY_ENV,
};
use dic_compiler::ir::DisaggPlan;
use k8s_openapi::api::core::v1::{ConfigMap, ConfigMapVolumeSource, TCPSocketAction};

/// Router pods of a disaggregated deployment.
const ROUTER_REPLICAS: i32 = 2;
/// Where the router's pods install vllm-router (an emptyDir, on PYTHONPATH).
const ROUTER_LIB: &str = "/opt/dic-router";
/// Where the router's ConfigMap (`pd_front.py`) is mounted.
const ROUTER_CONFIG: &str = "/etc/dic-router";
/// The unprivileged user the router's pods run as (`nobody`).
const NOBODY: i64 = 65534;

/// The client Service of a plan's pods: the plan's name, or `<name>-leader` for a
/// LeaderWorkerSet (which owns the headless Service under its own name).
fn client_service(name: &str, single_node_pods: bool) -> String {
    if single_node_pods {
        name.to_string()
    } else {
        format!("{name}-leader")
    }
}

/// A container's security context without privilege: no escalation (setuid binaries gain
/// nothing), every capability dropped, and, with `read_only`, a read-only root filesystem.
pub(super) fn unprivileged(read_only: bool) -> SecurityContext {
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

/// The router's objects: its script's ConfigMap, its Deployment and the client Service.
pub(super) fn router(d: &DeploymentPlan, x: &DisaggPlan) -> Result<Vec<(String, String)>, String> {
    let r = Router::new(d, x);
    let config = ConfigMap {
        metadata: r.meta(&r.name, &[]),
        data: Some(BTreeMap::from([(
            FRONT_FILE.to_string(),
            FRONT.to_string(),
        )])),
        ..Default::default()
    };
    let deployment = r.deployment();
    let service = r.service();
    let yaml = |v: &dyn erased::Yaml| v.to_yaml();
    Ok(vec![
        ("k8s/router-script.yaml".into(), yaml(&config)?),
        ("k8s/router.yaml".into(), yaml(&deployment)?),
        ("k8s/router-service.yaml".into(), yaml(&service)?),
    ])
}

/// What every object of the router shares: the deployment, its names and labels.
struct Router<'a> {
    d: &'a DeploymentPlan,
    x: &'a DisaggPlan,
    /// The deployment's Kubernetes name (the client Service's) and the router's.
    base: String,
    name: String,
    labels: BTreeMap<String, String>,
}

/// One container of the router's pods.
struct ContainerSpec<'a> {
    name: &'a str,
    command: Vec<String>,
    env: Vec<EnvVar>,
    port: Option<(&'a str, u64)>,
    cpu: &'a str,
    memory: &'a str,
    volumes: &'a [(&'a str, &'a str)],
}

impl<'a> Router<'a> {
    fn new(d: &'a DeploymentPlan, x: &'a DisaggPlan) -> Self {
        let base = dns_name(&x.deployment);
        let name = format!("{base}-router");
        let labels = BTreeMap::from([
            ("app.kubernetes.io/name".to_string(), name.clone()),
            (
                "app.kubernetes.io/managed-by".to_string(),
                "dic".to_string(),
            ),
            (PART_OF_LABEL.to_string(), base.clone()),
        ]);
        Router {
            d,
            x,
            base,
            name,
            labels,
        }
    }

    fn meta(&self, n: &str, extra: &[(&str, &str)]) -> ObjectMeta {
        let mut l = self.labels.clone();
        for (k, v) in extra {
            l.insert(k.to_string(), v.to_string());
        }
        ObjectMeta {
            name: Some(n.to_string()),
            namespace: self.d.kubernetes.namespace.clone(),
            labels: Some(l),
            ..Default::default()
        }
    }

    /// A pool's servers as the router reaches them: its client Service and the pod port.
    fn upstream(&self, plan_name: &str) -> String {
        let d = self.d;
        // Both pools are launched the same way when their groups fit a node; a pool
        // spanning nodes is a LeaderWorkerSet behind `<name>-leader`.
        let pool_single = if plan_name == d.name {
            d.nodes_per_group == 1 || d.launch == LaunchMode::Replicas
        } else {
            !self.x.peer_spans_nodes
        };
        // Both pools come from one `deploy` and one engine block: one pod port.
        format!(
            "http://{}:{}",
            client_service(&dns_name(plan_name), pool_single),
            pod_port(d)
        )
    }

    /// Every container of the router's pods: the vLLM image, small requests, no privilege.
    fn container(&self, c: ContainerSpec<'_>) -> Container {
        Container {
            name: c.name.into(),
            image: Some(self.d.kubernetes.image.clone()),
            command: Some(c.command),
            env: Some(c.env),
            ports: c.port.map(|(n, p)| {
                vec![ContainerPort {
                    name: Some(n.into()),
                    container_port: p as i32,
                    ..Default::default()
                }]
            }),
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".to_string(), quantity(c.cpu)),
                    ("memory".to_string(), quantity(c.memory)),
                ])),
                limits: Some(BTreeMap::from([("memory".to_string(), quantity(c.memory))])),
                ..Default::default()
            }),
            volume_mounts: Some(
                c.volumes
                    .iter()
                    .map(|(n, path)| VolumeMount {
                        name: n.to_string(),
                        mount_path: path.to_string(),
                        read_only: (*n != "tmp" && *n != "router-lib").then_some(true),
                        ..Default::default()
                    })
                    .collect(),
            ),
            security_context: Some(unprivileged(true)),
            ..Default::default()
        }
    }

    /// The init container that installs the pinned vllm-router, then vllm-router and the
    /// front.
    fn containers(&self) -> (Container, Container, Container) {
        let (d, x) = (self.d, self.x);
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
        let install = self.container(ContainerSpec {
            name: "install-vllm-router",
            command: install_argv,
            env: vec![env_var("HOME", "/tmp")],
            port: None,
            cpu: "1",
            memory: "1Gi",
            volumes: &writable,
        });
        let mut router_argv = vec![
            "python3".to_string(),
            "-m".into(),
            "vllm_router.launch_router".into(),
        ];
        let decode = self.upstream(&d.name);
        router_argv.extend(vllm_router_flags(d, PORTS, 1, &[decode], "$(POD_IP)"));
        let vllm_router = self.container(ContainerSpec {
            name: "vllm-router",
            command: router_argv,
            env: router_env,
            port: Some(("metrics", PORTS.metrics)),
            cpu: "2",
            memory: "2Gi",
            volumes: &writable,
        });
        let mut front_argv = vec![
            "python3".to_string(),
            format!("{ROUTER_CONFIG}/{FRONT_FILE}"),
        ];
        let prefill = self.upstream(&x.peer);
        front_argv.extend(front_flags(
            d,
            PORTS,
            "$(POD_IP)",
            x.router_port,
            &[prefill],
        ));
        let mut front = self.container(ContainerSpec {
            name: "router",
            command: front_argv,
            env: common_env,
            port: Some(("http", x.router_port)),
            cpu: "1",
            memory: "1Gi",
            volumes: &[
                ("router", ROUTER_CONFIG),
                ("router-lib", ROUTER_LIB),
                ("tmp", "/tmp"),
            ],
        });
        // Ready once vllm-router is (it waits for a healthy server in each pool); the pools
        // take minutes to load, so liveness only checks that the front answers at all.
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
        (install, front, vllm_router)
    }

    fn selector(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("app.kubernetes.io/name".to_string(), self.name.clone())])
    }

    fn deployment(&self) -> Deployment {
        let (install, front, vllm_router) = self.containers();
        let empty = |n: &str, limit: &str| Volume {
            name: n.into(),
            empty_dir: Some(EmptyDirVolumeSource {
                size_limit: Some(quantity(limit)),
                ..Default::default()
            }),
            ..Default::default()
        };
        Deployment {
            metadata: self.meta(&self.name, &[]),
            spec: Some(DeploymentSpec {
                // Stateless: two, so a restart or a node drain never cuts the service.
                replicas: Some(ROUTER_REPLICAS),
                selector: LabelSelector {
                    match_labels: Some(self.selector()),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(self.labels.clone()),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        init_containers: Some(vec![install]),
                        containers: vec![front, vllm_router],
                        // The router never calls the Kubernetes API.
                        automount_service_account_token: Some(false),
                        enable_service_links: NO_SERVICE_LINKS,
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
                                    name: self.name.clone(),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            },
                            empty("router-lib", "1Gi"),
                            empty("tmp", "256Mi"),
                        ]),
                        image_pull_secrets: image_pull_secrets(self.d),
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn service(&self) -> Service {
        Service {
            metadata: self.meta(&self.base, &[(API_LABEL, "true")]),
            spec: Some(ServiceSpec {
                type_: Some("ClusterIP".into()),
                selector: Some(self.selector()),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port: self.x.router_port as i32,
                    target_port: Some(IntOrString::String("http".into())),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}
