//! The Kubernetes objects of every example, read together as an operator's cluster would:
//! both offline validators (Kubernetes 1.33 and 1.37 schemas, the LWS CRD, API-server
//! rules), then the invariants across objects that no schema sees — selectors that match
//! pod labels, no Service under a LeaderWorkerSet's name, Service and probe ports that
//! containers declare, requests on every container, RDMA only on groups that span nodes,
//! autoscalers and monitors that point at objects that exist, IMEX claims backed by a
//! ComputeDomain, kustomizations that list exactly their folder, one namespace.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use dic::disk::DiskWorld;
use serde_json::Value;
use std::collections::BTreeMap;

/// Every example's generated files, by path (`<deployment>/k8s/…`).
fn all_outputs() -> Vec<(String, BTreeMap<String, String>)> {
    common::dist_files("examples")
        .into_iter()
        .filter(|p| !p.contains("/mistakes/") && !p.contains("/common/"))
        .map(|path| {
            let checked = dic_compiler::driver::compile_file(&DiskWorld, &path).unwrap();
            assert!(!checked.has_errors(), "{path}");
            let files = dic_targets::render(&checked.plan, &checked.forecast).unwrap();
            (path, files)
        })
        .collect()
}

fn parse(text: &str) -> Value {
    serde_yaml_ng::from_str(text).unwrap()
}

/// Every pod template of an object, with the labels its pods carry (the LWS controller
/// adds its name label to both templates).
fn pod_templates(obj: &Value) -> Vec<(Value, BTreeMap<String, String>)> {
    let labels_of = |t: &Value| -> BTreeMap<String, String> {
        t["metadata"]["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    match obj["kind"].as_str().unwrap() {
        "Deployment" | "Job" => {
            let t = obj["spec"]["template"].clone();
            let l = labels_of(&t);
            vec![(t, l)]
        }
        "LeaderWorkerSet" => {
            let name = obj["metadata"]["name"].as_str().unwrap().to_string();
            ["leaderTemplate", "workerTemplate"]
                .iter()
                .map(|k| {
                    let t = obj["spec"]["leaderWorkerTemplate"][k].clone();
                    let mut l = labels_of(&t);
                    l.insert("leaderworkerset.sigs.k8s.io/name".into(), name.clone());
                    (t, l)
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Every pod template of `objects`, with the file it is in and its pods' labels.
fn templates_by_file(
    objects: &[(String, Value)],
) -> Vec<(String, Value, BTreeMap<String, String>)> {
    objects
        .iter()
        .flat_map(|(f, o)| {
            pod_templates(o)
                .into_iter()
                .map(move |(t, l)| (f.clone(), t, l))
        })
        .collect()
}

fn matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    selector
        .as_object()
        .unwrap()
        .iter()
        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
}

fn container_ports(template: &Value) -> Vec<String> {
    template["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["ports"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect()
}

const RDMA_RESOURCES: &[&str] = &["rdma/", "vpc.amazonaws.com/efa", "nvidia.com/hostdev"];

#[test]
fn every_example_forms_a_working_set_of_objects() {
    let outputs = all_outputs();
    let mut objects_per_example: Vec<String> = Vec::new();
    for (path, files) in &outputs {
        // Objects by deployment folder; kustomizations checked against their folders.
        let mut objects: Vec<(String, Value)> = Vec::new();
        for (file, text) in files.iter().filter(|(f, _)| f.contains("/k8s/")) {
            let v = parse(text);
            if file.ends_with("kustomization.yaml") {
                let folder = &file[..file.len() - "kustomization.yaml".len()];
                let mut listed: Vec<String> = v["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| format!("{folder}{}", r.as_str().unwrap()))
                    .collect();
                listed.sort();
                let mut beside: Vec<String> = files
                    .keys()
                    .filter(|k| {
                        k.starts_with(folder)
                            && !k[folder.len()..].contains('/')
                            && !k.ends_with("kustomization.yaml")
                    })
                    .cloned()
                    .collect();
                beside.sort();
                assert_eq!(listed, beside, "{path} {file}");
                continue;
            }
            objects.push((file.clone(), v));
        }
        let namespaces: std::collections::BTreeSet<Option<String>> = objects
            .iter()
            .map(|(_, o)| o["metadata"]["namespace"].as_str().map(str::to_string))
            .collect();
        assert!(namespaces.len() <= 1, "{path}: namespaces {namespaces:?}");
        let lws_names: Vec<&str> = objects
            .iter()
            .filter(|(_, o)| o["kind"] == "LeaderWorkerSet")
            .map(|(_, o)| o["metadata"]["name"].as_str().unwrap())
            .collect();
        let templates = templates_by_file(&objects);
        let mut kinds = Vec::new();
        for (file, o) in &objects {
            let kind = o["kind"].as_str().unwrap();
            let name = o["metadata"]["name"].as_str().unwrap();
            kinds.push(format!("{kind}/{name}"));
            match kind {
                "Deployment" => {
                    let sel = &o["spec"]["selector"]["matchLabels"];
                    let (_, l) = &pod_templates(o)[0];
                    assert!(matches(sel, l), "{path} {file}: selector vs labels");
                }
                "Service" => {
                    assert!(
                        !lws_names.contains(&name),
                        "{path} {file}: a Service named like its LeaderWorkerSet"
                    );
                    let Some(sel) = o["spec"]["selector"].as_object() else {
                        continue;
                    };
                    let sel = Value::Object(sel.clone());
                    let selected: Vec<&(String, Value, BTreeMap<String, String>)> = templates
                        .iter()
                        .filter(|(_, _, l)| matches(&sel, l))
                        .collect();
                    // A split deployment's Service selects pods of every part's folder.
                    let part_of = sel.get("app.kubernetes.io/part-of").is_some();
                    assert!(
                        !selected.is_empty() || part_of,
                        "{path} {file}: Service selects no pod"
                    );
                    for port in o["spec"]["ports"].as_array().unwrap() {
                        if let Some(target) = port["targetPort"].as_str() {
                            for (f, t, _) in &selected {
                                assert!(
                                    container_ports(t).iter().any(|p| p == target),
                                    "{path} {file}: port {target} not declared by {f}"
                                );
                            }
                        }
                    }
                }
                "HorizontalPodAutoscaler" | "ScaledObject" => {
                    let target = &o["spec"]["scaleTargetRef"];
                    let t = objects.iter().find(|(_, x)| {
                        x["kind"] == target["kind"] && x["metadata"]["name"] == target["name"]
                    });
                    let (_, t) = t.unwrap_or_else(|| panic!("{path} {file}: no scale target"));
                    assert!(
                        t["spec"].get("replicas").is_none(),
                        "{path} {file}: the autoscaled object still sets replicas"
                    );
                }
                "PodMonitor" => {
                    let sel = &o["spec"]["selector"]["matchLabels"];
                    let endpoint = o["spec"]["podMetricsEndpoints"][0]["port"]
                        .as_str()
                        .unwrap();
                    let selected: Vec<_> = templates
                        .iter()
                        .filter(|(_, _, l)| matches(sel, l))
                        .collect();
                    assert!(!selected.is_empty(), "{path} {file}: monitors no pod");
                    for (f, t, _) in selected {
                        assert!(
                            container_ports(t).iter().any(|p| p == endpoint),
                            "{path} {file}: {f} has no port {endpoint}"
                        );
                    }
                }
                _ => {}
            }
        }
        // Every pod template: requests on every container, probe ports declared, RDMA
        // and IPC_LOCK only where a group spans nodes, IMEX claims backed by a domain.
        for (file, t, labels) in &templates {
            // A disaggregated pool's KV transfer crosses nodes over NIXL when its pair
            // does: the example's pools then span both nodes.
            let pool_crosses = labels.contains_key("dic.dev/pool")
                && objects
                    .iter()
                    .filter(|(_, o)| o["kind"] == "Deployment")
                    .filter_map(|(_, o)| {
                        o["spec"]["template"]["metadata"]["labels"]["dic.dev/pool"].as_str()
                    })
                    .count()
                    == 2;
            let spans_nodes = file.ends_with("leaderworkerset.yaml")
                || pool_crosses
                || file.contains("/preflight/")
                    && objects.iter().any(|(_, o)| o["kind"] == "LeaderWorkerSet");
            let ports = container_ports(t);
            for c in t["spec"]["containers"].as_array().unwrap() {
                let req = &c["resources"]["requests"];
                assert!(
                    req.get("cpu").is_some() && req.get("memory").is_some(),
                    "{path} {file}: container {} has no cpu/memory requests",
                    c["name"]
                );
                for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
                    if let Some(port) = c[probe]["httpGet"]["port"].as_str() {
                        assert!(ports.iter().any(|p| p == port), "{path} {file}: {probe}");
                    }
                }
                let limits = c["resources"]["limits"].as_object().unwrap();
                let rdma = limits
                    .keys()
                    .any(|k| RDMA_RESOURCES.iter().any(|r| k.starts_with(r)));
                let ipc_lock = c["securityContext"]["capabilities"]["add"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x == "IPC_LOCK"));
                if !spans_nodes {
                    assert!(
                        !rdma && !ipc_lock,
                        "{path} {file}: RDMA on a single-node pod"
                    );
                }
                if c["resources"]["claims"].is_array() {
                    let claim = t["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]
                        .as_str()
                        .unwrap();
                    let folder = &file[..file.rfind('/').unwrap() + 1];
                    assert!(
                        objects.iter().any(|(f, o)| {
                            f.starts_with(folder)
                                && !f[folder.len()..].contains('/')
                                && o["kind"] == "ComputeDomain"
                                && o["spec"]["channel"]["resourceClaimTemplate"]["name"] == claim
                        }),
                        "{path} {file}: claim {claim} has no ComputeDomain beside it"
                    );
                }
            }
        }
        objects_per_example.push(format!("{path}: {}", kinds.join(", ")));
    }
    eprintln!("{}", objects_per_example.join("\n"));
}

/// A disaggregated deployment forms one working service: the client Service named after the
/// deployment selects the router's pods; the router sends prompts to a Service that selects
/// the prefill pool's serving pods and generation to one selecting the decode pool's, on
/// ports those pods declare; both pools run the same model under the same served name with
/// the NIXL connector, announce their pod IP on NIXL's side channel and declare its port.
#[test]
fn a_disaggregated_deployment_routes_to_both_pools() {
    let mut seen = 0;
    for (path, files) in all_outputs() {
        let objects: Vec<Value> = files
            .iter()
            .filter(|(f, _)| f.contains("/k8s/") && !f.ends_with("kustomization.yaml"))
            .map(|(_, t)| parse(t))
            .collect();
        let Some(router) = objects.iter().find(|o| {
            o["kind"] == "Deployment"
                && o["spec"]["template"]["spec"]["containers"][0]["name"] == "router"
        }) else {
            continue;
        };
        seen += 1;
        let deployment = router["metadata"]["labels"]["app.kubernetes.io/part-of"]
            .as_str()
            .unwrap();
        let (_, router_labels) = &pod_templates(router)[0];
        let client = objects
            .iter()
            .find(|o| o["kind"] == "Service" && o["metadata"]["name"] == deployment)
            .unwrap_or_else(|| panic!("{path}: no client Service `{deployment}`"));
        assert!(
            matches(&client["spec"]["selector"], router_labels),
            "{path}: client Service misses the router"
        );
        let argv: Vec<String> = router["spec"]["template"]["spec"]["containers"][0]["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        let script = argv[1].rsplit('/').next().unwrap();
        let config = objects
            .iter()
            .find(|o| o["kind"] == "ConfigMap" && o["data"].get(script).is_some())
            .unwrap_or_else(|| panic!("{path}: no ConfigMap holds {script}"));
        let volume = &router["spec"]["template"]["spec"]["volumes"][0];
        assert_eq!(
            volume["configMap"]["name"], config["metadata"]["name"],
            "{path}"
        );
        // Every container's words: the front names the prefill pool, vllm-router the
        // decode pool (its prefill servers are the front's loopback guard).
        let words: Vec<String> = router["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(container_words)
            .collect();
        let mut served = Vec::new();
        for (flag, pool) in [("--prefill", "prefill"), ("--decode", "decode")] {
            let url = words
                .windows(2)
                .find(|w| w[0] == flag && !w[1].starts_with("http://127.0.0.1"))
                .map(|w| w[1].clone())
                .unwrap_or_else(|| panic!("{path}: the router names no {pool} Service"));
            let rest = url.strip_prefix("http://").unwrap();
            let (host, port) = rest.split_once(':').unwrap();
            let svc = objects
                .iter()
                .find(|o| o["kind"] == "Service" && o["metadata"]["name"] == host)
                .unwrap_or_else(|| {
                    panic!("{path}: the router names Service `{host}`, which is not emitted")
                });
            let svc_port = &svc["spec"]["ports"][0];
            assert_eq!(
                svc_port["port"].as_u64().unwrap().to_string(),
                port,
                "{path}: {host}"
            );
            let selected: Vec<_> = objects
                .iter()
                .flat_map(pod_templates)
                .filter(|(_, l)| matches(&svc["spec"]["selector"], l))
                .collect();
            assert!(!selected.is_empty(), "{path}: `{host}` selects no pod");
            for (t, l) in selected {
                assert_eq!(
                    l.get("dic.dev/pool").map(String::as_str),
                    Some(pool),
                    "{path}: `{host}` selects another pool's pods"
                );
                let ports = container_ports(&t);
                assert!(
                    ports.iter().any(|p| p == "http") && ports.iter().any(|p| p == "nixl"),
                    "{path}: {pool} ports {ports:?}"
                );
                let c = &t["spec"]["containers"][0];
                let cmd = c["command"][2].as_str().unwrap();
                assert!(cmd.contains(r#"--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'"#), "{path}: {pool} without the NIXL connector");
                let name = cmd
                    .split("--served-model-name ")
                    .nth(1)
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap();
                served.push(name.to_string());
                let env = c["env"].as_array().unwrap();
                assert!(
                    env.iter()
                        .any(|e| e["name"] == "VLLM_NIXL_SIDE_CHANNEL_HOST"
                            && e["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"),
                    "{path}: {pool} does not announce its pod IP"
                );
                assert!(
                    env.iter()
                        .any(|e| e["name"] == "VLLM_NIXL_SIDE_CHANNEL_PORT"),
                    "{path}: {pool}"
                );
            }
        }
        served.dedup();
        assert_eq!(
            served.len(),
            1,
            "{path}: pools serve different names {served:?}"
        );
    }
    assert!(seen > 0, "no example is disaggregated");
}

/// Kinds the validator has no schema or CRD for offline (checked above by the invariants,
/// and by the validator with `--allow-unknown` for everything it can still see).
const NO_OFFLINE_SCHEMA: &[&str] = &[
    "PodMonitor",
    "ServiceMonitor",
    "ScaledObject",
    "ComputeDomain",
];

/// pd_70b_h200.dist at 6 req/s: one prefill replica down leaves the pair 4.48 req/s, one
/// decode replica down 4.39 (`planner::pool_failure`), so each pool's
/// PodDisruptionBudget allows none down; the 16 GPUs are all taken (12 prefill + 4
/// decode), so no surge: each pool's rollout takes one down (Kubernetes refuses 0 and 0).
#[test]
fn a_splits_pools_are_budgeted_from_the_pair() {
    let path = "examples/pd_70b_h200.dist";
    let checked = dic_compiler::driver::compile_file(&DiskWorld, path).unwrap();
    // The pair's N−1 is computed once (with the decode pool's analysis) and is both pools'.
    let failures: Vec<_> = checked
        .deployments
        .iter()
        .map(|d| d.pool_failure.clone().expect("a split's N−1"))
        .collect();
    assert_eq!(failures.len(), 2);
    assert!(std::sync::Arc::ptr_eq(&failures[0], &failures[1]));
    for f in &checked.forecast.deployments {
        let n1 = f
            .report
            .pool_capacity_under_failure
            .as_ref()
            .expect("the pair's N−1");
        assert_eq!(n1.figures, *failures[0], "{}", f.name);
    }
    let files = dic_targets::render(&checked.plan, &checked.forecast).unwrap();
    for pool in ["chat-prefill", "chat-decode"] {
        let pdb = parse(&files[&format!("{pool}/k8s/poddisruptionbudget.yaml")]);
        assert_eq!(pdb["spec"]["maxUnavailable"], 0, "{pool}");
        let workload = parse(&files[&format!("{pool}/k8s/deployment.yaml")]);
        let update = &workload["spec"]["strategy"]["rollingUpdate"];
        assert_eq!(
            (&update["maxUnavailable"], &update["maxSurge"]),
            (&Value::from(1), &Value::from(0)),
            "{pool}"
        );
    }
}

/// gb200_nvl72.dist: Kimi K2 as one vLLM engine whose DP ranks span nodes
/// (`planner::failure`, `one_engine`): no engine may go with the load carried (a budget of
/// 0), and the cluster has an engine's GPUs spare, so its LeaderWorkerSet surges one group
/// rather than take the one down.
#[test]
fn a_moe_engine_over_nodes_surges_rather_than_stops() {
    let path = "examples/gb200_nvl72.dist";
    let checked = dic_compiler::driver::compile_file(&DiskWorld, path).unwrap();
    let files = dic_targets::render(&checked.plan, &checked.forecast).unwrap();
    let lws = parse(&files["kimi/k8s/leaderworkerset.yaml"]);
    let strategy = &lws["spec"]["rolloutStrategy"];
    assert_eq!(strategy["type"], "RollingUpdate");
    let update = &strategy["rollingUpdateConfiguration"];
    assert_eq!(
        (&update["maxUnavailable"], &update["maxSurge"]),
        (&Value::from(0), &Value::from(1))
    );
}

#[cfg_attr(
    dic_no_shared,
    ignore = "needs ../shared, the reference data beside the repository"
)]
#[test]
fn every_example_manifest_passes_both_validators() {
    let shared = common::required_shared_dir();
    let dir = common::fresh_dir("k8s-validate");
    let (mut known, mut unknown) = (Vec::new(), Vec::new());
    for (i, (_, files)) in all_outputs().into_iter().enumerate() {
        for (file, text) in files
            .iter()
            .filter(|(f, _)| f.contains("/k8s/") && !f.ends_with("kustomization.yaml"))
        {
            let path = dir.join(format!("{i}-{}", file.replace('/', "__")));
            std::fs::write(&path, text).unwrap();
            if NO_OFFLINE_SCHEMA.contains(&parse(text)["kind"].as_str().unwrap()) {
                unknown.push(path);
            } else {
                known.push(path);
            }
        }
    }
    assert!(known.len() > 40, "{}", known.len());
    for version in ["1.33", "1.37"] {
        for (files, extra) in [(&known, None), (&unknown, Some("--allow-unknown"))] {
            let report = common::validate_k8s(&shared, version, extra, files);
            if extra.is_none() {
                assert!(report.contains(" 0 warnings"), "{report}");
            }
            eprintln!(
                "Kubernetes {version}{}: {}",
                extra.map(|e| format!(" {e}")).unwrap_or_default(),
                report.trim()
            );
        }
    }
}

/// The words of a container's command and args (a `bash -c` script split at spaces: the
/// port flags dic writes are plain words).
fn container_words(c: &Value) -> Vec<String> {
    ["command", "args"]
        .iter()
        .filter_map(|k| c[k].as_array())
        .flatten()
        .filter_map(Value::as_str)
        .flat_map(|s| {
            s.split_whitespace()
                .map(|w| w.trim_matches(['"', '\'']).to_string())
        })
        .collect()
}

/// The port a container's server listens on, and whether only on the pod's loopback
/// (`--host 127.0.0.1`); None for a container that serves nothing (a headless worker).
fn server_port(c: &Value) -> Option<(u64, bool)> {
    let words = container_words(c);
    if words.iter().any(|w| w == "--headless") {
        return None;
    }
    let port = common::value_after(&words, "--port")?.parse().unwrap();
    let loopback = common::value_after(&words, "--host").as_deref() == Some("127.0.0.1");
    Some((port, loopback))
}

/// The number a probe's or Service's port means in a pod: a number, or the name of one
/// of its containers' ports.
fn resolve_port(port: &Value, template: &Value) -> Option<u64> {
    if let Some(n) = port.as_u64() {
        return Some(n);
    }
    let name = port.as_str()?;
    template["spec"]["containers"]
        .as_array()?
        .iter()
        .flat_map(|c| c["ports"].as_array().cloned().unwrap_or_default())
        .find(|p| p["name"] == name)
        .and_then(|p| p["containerPort"].as_u64())
}

/// `http://host:port` → (host, port).
fn host_port(url: &str) -> Option<(String, u64)> {
    let rest = url.strip_prefix("http://")?;
    let rest = rest.split('/').next()?;
    let (host, port) = rest.rsplit_once(':')?;
    Some((host.to_string(), port.parse().ok()?))
}

/// One place decides every port of a pod: for every pod of every example, the `--port` a
/// server is started with is its containerPort `http`, where its probes look and where
/// the Services that select it send traffic; a server bound to the pod's loopback is what
/// a container beside it points at; every upstream URL of a router names a Service whose
/// port leads to pods listening there. (P/D decode pods and `shared_cluster`'s second
/// deployment once listened on the scripts' port 8001 behind probes on 8000.)
#[test]
fn every_port_of_a_pod_agrees_with_its_probes_services_and_router() {
    let mut checked = 0;
    for (path, files) in all_outputs() {
        let objects: Vec<(String, Value)> = files
            .iter()
            .filter(|(f, _)| f.contains("/k8s/") && !f.ends_with("kustomization.yaml"))
            .map(|(f, t)| (f.clone(), parse(t)))
            .collect();
        let templates = templates_by_file(&objects);
        // The port each pod template's servers listen on for clients (None: it serves none).
        let listening = |t: &Value| -> Option<u64> {
            let public: Vec<u64> = t["spec"]["containers"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(server_port)
                .filter(|(_, loopback)| !loopback)
                .map(|(port, _)| port)
                .collect();
            assert!(public.len() <= 1, "{path}: two servers in one pod");
            public.first().copied()
        };
        for (file, t, _) in &templates {
            let containers = t["spec"]["containers"].as_array().unwrap();
            for c in containers {
                let Some((port, loopback)) = server_port(c) else {
                    continue;
                };
                checked += 1;
                if loopback {
                    // Loopback: a container beside it is its only client.
                    let url = format!("http://127.0.0.1:{port}");
                    assert!(
                        containers
                            .iter()
                            .any(|o| container_words(o).iter().any(|w| w.starts_with(&url))),
                        "{path} {file}: nothing in the pod reaches {url}"
                    );
                    continue;
                }
                let http = c["ports"]
                    .as_array()
                    .and_then(|ps| ps.iter().find(|p| p["name"] == "http"))
                    .and_then(|p| p["containerPort"].as_u64());
                assert_eq!(
                    http,
                    Some(port),
                    "{path} {file}: container {} listens on {port}, declares http {http:?}",
                    c["name"]
                );
                // NIXL's side channel listens where the pod declares it.
                let nixl = c["ports"]
                    .as_array()
                    .and_then(|ps| ps.iter().find(|p| p["name"] == "nixl"))
                    .and_then(|p| p["containerPort"].as_u64());
                let side_channel = c["env"].as_array().and_then(|es| {
                    es.iter()
                        .find(|e| e["name"] == "VLLM_NIXL_SIDE_CHANNEL_PORT")
                        .and_then(|e| e["value"].as_str()?.parse::<u64>().ok())
                });
                assert_eq!(nixl, side_channel, "{path} {file}: NIXL side channel");
                for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
                    let p = &c[probe];
                    for action in ["httpGet", "tcpSocket"] {
                        if p[action].is_object() {
                            assert_eq!(
                                resolve_port(&p[action]["port"], t),
                                Some(port),
                                "{path} {file}: {probe} of {}",
                                c["name"]
                            );
                        }
                    }
                }
            }
        }
        // Services: the target port of every pod they select is where it listens.
        let services: Vec<&Value> = objects
            .iter()
            .map(|(_, o)| o)
            .filter(|o| o["kind"] == "Service")
            .collect();
        for svc in &services {
            let Some(sel) = svc["spec"]["selector"].as_object() else {
                continue;
            };
            let sel = Value::Object(sel.clone());
            for port in svc["spec"]["ports"].as_array().unwrap() {
                let target = if port["targetPort"].is_null() {
                    &port["port"]
                } else {
                    &port["targetPort"]
                };
                for (f, t, _) in templates.iter().filter(|(_, _, l)| matches(&sel, l)) {
                    let Some(listen) = listening(t) else {
                        continue;
                    };
                    assert_eq!(
                        resolve_port(target, t),
                        Some(listen),
                        "{path}: Service {} sends to {target} of {f}, which listens on {listen}",
                        svc["metadata"]["name"]
                    );
                }
            }
        }
        // Routers: every upstream URL leads, through its Service, to pods listening there.
        for (f, t, _) in &templates {
            for c in t["spec"]["containers"].as_array().unwrap() {
                for url in container_words(c)
                    .iter()
                    .filter(|w| w.starts_with("http://"))
                {
                    let (host, port) = host_port(url).unwrap();
                    if host == "127.0.0.1" {
                        continue;
                    }
                    let svc = services
                        .iter()
                        .find(|s| s["metadata"]["name"] == host.as_str())
                        .unwrap_or_else(|| panic!("{path} {f}: no Service `{host}`"));
                    let sp = svc["spec"]["ports"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|p| p["port"].as_u64() == Some(port))
                        .unwrap_or_else(|| panic!("{path} {f}: `{host}` has no port {port}"));
                    let target = if sp["targetPort"].is_null() {
                        &sp["port"]
                    } else {
                        &sp["targetPort"]
                    };
                    let sel = Value::Object(svc["spec"]["selector"].as_object().unwrap().clone());
                    let selected: Vec<_> = templates
                        .iter()
                        .filter(|(_, _, l)| matches(&sel, l))
                        .collect();
                    assert!(!selected.is_empty(), "{path} {f}: `{host}` selects no pod");
                    for (g, u, _) in selected {
                        assert_eq!(
                            resolve_port(target, u),
                            listening(u),
                            "{path} {f}: {url} reaches {g} on another port"
                        );
                    }
                }
            }
        }
    }
    assert!(checked > 20, "{checked} servers checked");
}

/// No pod of any example holds a privilege it does not need: no service-account token (no
/// pod calls the Kubernetes API), no privileged container, host PID or IPC namespace; every
/// container and init container refuses privilege escalation; added capabilities are known
/// ones, never `ALL` or `SYS_ADMIN`, and `IPC_LOCK` only beside an RDMA device; the router's
/// pods (whose image needs no root) run as a non-root user with every capability dropped
/// and a read-only root filesystem.
#[test]
fn every_pod_runs_without_privilege_it_does_not_need() {
    let mut pods = 0;
    for (path, files) in all_outputs() {
        for (file, text) in files
            .iter()
            .filter(|(f, _)| f.contains("/k8s/") && !f.ends_with("kustomization.yaml"))
        {
            for (t, labels) in pod_templates(&parse(text)) {
                pods += 1;
                let spec = &t["spec"];
                let at = format!("{path} {file}");
                // Only the endpoint picker calls the API (a read-only Role: tests/gateway_routing.rs).
                let picker = labels
                    .get("app.kubernetes.io/component")
                    .map(String::as_str)
                    == Some("endpoint-picker");
                assert_eq!(spec["automountServiceAccountToken"], picker, "{at}");
                // A Service named `vllm` injects VLLM_PORT=tcp://… into pods with service
                // links, which vLLM 0.33 refuses (docs/vllm-rules.md row 75).
                assert_eq!(spec["enableServiceLinks"], false, "{at}");
                assert!(spec["hostPID"] != true && spec["hostIPC"] != true, "{at}");
                let router = labels
                    .get("app.kubernetes.io/name")
                    .is_some_and(|n| n.ends_with("-router"));
                if router {
                    let pod = &spec["securityContext"];
                    assert_eq!(pod["runAsNonRoot"], true, "{at}");
                    assert!(pod["runAsUser"].as_u64().is_some_and(|u| u > 0), "{at}");
                }
                let containers = ["containers", "initContainers"]
                    .iter()
                    .filter_map(|k| spec[k].as_array())
                    .flatten();
                for c in containers {
                    let sc = &c["securityContext"];
                    let at = format!("{at} container {}", c["name"]);
                    assert_eq!(sc["allowPrivilegeEscalation"], false, "{at}");
                    assert!(sc["privileged"] != true, "{at}");
                    let added: Vec<&str> = sc["capabilities"]["add"]
                        .as_array()
                        .map(|a| a.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    for cap in &added {
                        assert!(
                            dic_compiler::text_rules::GRANTABLE_CAPABILITIES.contains(cap),
                            "{at}: adds {cap}"
                        );
                    }
                    let rdma = c["resources"]["limits"].as_object().is_some_and(|l| {
                        l.keys()
                            .any(|k| RDMA_RESOURCES.iter().any(|r| k.starts_with(r)))
                    });
                    assert!(
                        !added.contains(&"IPC_LOCK") || rdma,
                        "{at}: IPC_LOCK without RDMA"
                    );
                    if router {
                        assert!(added.is_empty(), "{at}");
                        assert_eq!(
                            sc["capabilities"]["drop"],
                            serde_json::json!(["ALL"]),
                            "{at}"
                        );
                        assert_eq!(sc["readOnlyRootFilesystem"], true, "{at}");
                    }
                }
            }
        }
    }
    assert!(pods > 20, "{pods} pod templates");
}

/// A network profile that asks for `ALL` or `SYS_ADMIN` (or a capability dic knows no use
/// for) is refused with a diagnostic naming it; nothing is emitted.
#[test]
fn a_network_profile_cannot_grant_all_or_sys_admin() {
    let dir = common::fresh_dir("capabilities");
    for (cap, why) in [
        ("ALL", "root on the node"),
        ("SYS_ADMIN", "root on the node"),
        ("NET_ADMIN", "not a capability dic grants"),
    ] {
        let file = dir.join(format!("{cap}.dist"));
        std::fs::write(
            &file,
            format!(
                "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
                 cluster c {{ nodes = 2 × dgx_h100 }}\n\
                 network net {{ resource = \"rdma/ib\", capabilities = [\"{cap}\"] }}\n\
                 cluster c2 = c {{ network = net }}\n\
                 deploy d {{ model = llama_3_1_8b, cluster = c2, layout = tp 8 × pp 2 }}\n"
            ),
        )
        .unwrap();
        let checked =
            dic_compiler::driver::compile_file(&DiskWorld, file.to_str().unwrap()).unwrap();
        assert!(checked.has_errors(), "{cap} was accepted");
        let text = common::rendered(&checked);
        assert!(text.contains(cap) && text.contains(why), "{cap}: {text}");
    }
}
