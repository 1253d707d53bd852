//! Inference routing through a Gateway (`routing = { gateway = … }`), object by object:
//! the HTTPRoute sends the named Gateway's traffic to the InferencePool; the pool selects
//! exactly the deployment's model-server pods (a LeaderWorkerSet's leaders, not its
//! workers, nor the endpoint picker or a Job) on the port vLLM listens on; the endpoint
//! picker's scorer weights follow the `.dist`; a disaggregated deployment routed as llm-d
//! routes P/D (one pool over both pools, role labels, the decode pods' routing sidecar on
//! the pool's port in front of vLLM); autoscalers on the model servers; and the rule on
//! `routing`.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use serde_json::Value;
use std::collections::BTreeMap;

/// The Kubernetes objects `dic compile` writes for a `.dist` text, by kind/name.
fn objects_of(name: &str, text: &str) -> BTreeMap<String, Value> {
    let dir = common::fresh_dir(name);
    let path = dir.join("main.dist");
    std::fs::write(&path, text).unwrap();
    let files = common::generate(path.to_str().unwrap());
    objects(&files)
}

fn objects(files: &BTreeMap<String, String>) -> BTreeMap<String, Value> {
    files
        .iter()
        .filter(|(f, _)| f.contains("/k8s/") && !f.ends_with("kustomization.yaml"))
        .map(|(_, t)| {
            let v: Value = serde_yaml_ng::from_str(t).unwrap();
            (
                format!(
                    "{}/{}",
                    v["kind"].as_str().unwrap(),
                    v["metadata"]["name"].as_str().unwrap()
                ),
                v,
            )
        })
        .collect()
}

/// Every pod template with its pods' labels and its containers' `--port` values: the
/// LeaderWorkerSet controller adds its name label to both of its templates.
fn pod_templates(
    objects: &BTreeMap<String, Value>,
) -> Vec<(String, BTreeMap<String, String>, Value)> {
    let mut out = Vec::new();
    for (id, o) in objects {
        match o["kind"].as_str().unwrap() {
            "Deployment" | "Job" => {
                let t = o["spec"]["template"].clone();
                out.push((id.clone(), labels_of(&t), t));
            }
            "LeaderWorkerSet" => {
                for k in ["leaderTemplate", "workerTemplate"] {
                    let t = o["spec"]["leaderWorkerTemplate"][k].clone();
                    let mut l = labels_of(&t);
                    l.insert(
                        "leaderworkerset.sigs.k8s.io/name".into(),
                        o["metadata"]["name"].as_str().unwrap().into(),
                    );
                    out.push((format!("{id}/{k}"), l, t));
                }
            }
            _ => {}
        }
    }
    out
}

fn selects(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    selector
        .as_object()
        .unwrap()
        .iter()
        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
}

/// The `--port` a container's command starts vLLM on, when it starts vLLM's API server.
fn vllm_port(container: &Value) -> Option<u64> {
    let words: Vec<String> = ["command", "args"]
        .iter()
        .filter_map(|k| container[k].as_array())
        .flatten()
        .filter_map(Value::as_str)
        .flat_map(|s| {
            s.split_whitespace()
                .map(|w| w.trim_matches(['"', '\'']).to_string())
        })
        .collect();
    if !words.iter().any(|w| w == "serve") || words.iter().any(|w| w == "--headless") {
        return None;
    }
    common::value_after(&words, "--port")?.parse().ok()
}

/// The endpoint picker's profile: scorer → weight.
fn scorer_weights(objects: &BTreeMap<String, Value>, epp: &str) -> BTreeMap<String, u64> {
    let config = objects[&format!("ConfigMap/{epp}")]["data"]["epp-config.yaml"]
        .as_str()
        .unwrap();
    let config: Value = serde_yaml_ng::from_str(config).unwrap();
    assert_eq!(config["kind"], "EndpointPickerConfig");
    let loaded: Vec<&str> = config["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    let profiles = config["schedulingProfiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 1);
    let mut weights = BTreeMap::new();
    for p in profiles[0]["plugins"].as_array().unwrap() {
        let plugin = p["pluginRef"].as_str().unwrap();
        assert!(loaded.contains(&plugin), "{plugin} is not loaded");
        if let Some(w) = p["weight"].as_u64() {
            weights.insert(plugin.to_string(), w);
        }
    }
    weights
}

fn weights(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn the_route_sends_the_gateways_traffic_to_a_pool_of_exactly_the_model_servers() {
    let files = common::generate("examples/gateway_routing.dist");
    let objects = objects(&files);
    let route = &objects["HTTPRoute/chat"];
    assert_eq!(
        route["spec"]["parentRefs"],
        serde_json::json!([{
            "group": "gateway.networking.k8s.io", "kind": "Gateway",
            "name": "inference-gateway", "namespace": "gateway-system",
        }])
    );
    let rules = route["spec"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0]["backendRefs"],
        serde_json::json!([{ "group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "chat" }])
    );
    let pool = &objects["InferencePool/chat"];
    assert_eq!(pool["apiVersion"], "inference.networking.k8s.io/v1");
    // The pool's picker is the Service dic emits, on its gRPC port.
    let picker = &pool["spec"]["endpointPickerRef"];
    let service = &objects[&format!("Service/{}", picker["name"].as_str().unwrap())];
    assert!(service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["port"] == picker["port"]["number"] && p["appProtocol"] == "http2"));
    // Exactly the model servers: every template that starts vLLM's server, nothing else.
    let selector = &pool["spec"]["selector"]["matchLabels"];
    let templates = pod_templates(&objects);
    let selected: Vec<&String> = templates
        .iter()
        .filter(|(_, l, _)| selects(selector, l))
        .map(|(id, _, _)| id)
        .collect();
    let servers: Vec<&String> = templates
        .iter()
        .filter(|(_, _, t)| {
            t["spec"]["containers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| vllm_port(c).is_some())
        })
        .map(|(id, _, _)| id)
        .collect();
    assert_eq!(selected, servers);
    assert_eq!(selected, vec!["Deployment/chat"]);
    // On the port vLLM listens on, which the pod declares.
    let target = pool["spec"]["targetPorts"][0]["number"].as_u64().unwrap();
    let (_, _, t) = templates
        .iter()
        .find(|(id, _, _)| id == "Deployment/chat")
        .unwrap();
    let c = &t["spec"]["containers"][0];
    assert_eq!(vllm_port(c), Some(target));
    assert!(c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["containerPort"].as_u64() == Some(target)));
    // The weights the example writes: prefix 3, the others dic's defaults.
    assert_eq!(
        scorer_weights(&objects, "chat-epp"),
        weights(&[
            ("queue-scorer", 1),
            ("kv-cache-utilization-scorer", 1),
            ("prefix-cache-scorer", 3)
        ])
    );
    // The picker is scraped beside vLLM (`monitoring = podmonitor`) on the port it declares.
    let monitor = &objects["PodMonitor/chat-epp"];
    let (_, epp_labels, epp) = templates
        .iter()
        .find(|(id, _, _)| id == "Deployment/chat-epp")
        .unwrap();
    assert!(selects(
        &monitor["spec"]["selector"]["matchLabels"],
        epp_labels
    ));
    assert_eq!(monitor["spec"]["podMetricsEndpoints"][0]["port"], "metrics");
    assert!(epp["spec"]["containers"][0]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "metrics"));
    // It reads the API (its pods and pool) and writes nothing.
    let role = &objects["Role/chat-epp"];
    for rule in role["rules"].as_array().unwrap() {
        for verb in rule["verbs"].as_array().unwrap() {
            assert!(
                ["get", "list", "watch"].contains(&verb.as_str().unwrap()),
                "{rule}"
            );
        }
    }
    assert_eq!(
        objects["RoleBinding/chat-epp"]["subjects"][0]["name"],
        epp["spec"]["serviceAccountName"]
    );
    // The autoscaler still scales the serving Deployment.
    assert_eq!(
        objects["HorizontalPodAutoscaler/chat"]["spec"]["scaleTargetRef"]["name"],
        "chat"
    );
}

/// A deployment on the stdlib's 8B model and one DGX H100 with `routing` and `workload`
/// lines of the test's own.
fn routed(routing: &str, workload_extra: &str, layout: &str) -> String {
    format!(
        "import std.nodes.dgx_h100\nimport std.models.llama_3_1_405b\nimport std.models.llama_3_1_8b\n\
         cluster c {{ nodes = 2 × dgx_h100 }}\n\
         workload w {{ prompt = 2k tokens, output = 200 tokens, rate = 2 req/s {workload_extra} }}\n\
         deploy d {{ model = {model}, cluster = c, workload = w, layout = {layout}, routing = {{ {routing} }} }}\n",
        model = if layout.contains("pp 2") { "llama_3_1_405b" } else { "llama_3_1_8b" },
    )
}

#[test]
fn the_pickers_scorer_weights_follow_the_dist() {
    // No reuse declared, no weights: the load scorers at llm-d's weights, no prefix scorer.
    let o = objects_of(
        "weights-default",
        &routed("gateway = \"gw\"", "", "tp 1 × dp 2"),
    );
    assert_eq!(
        scorer_weights(&o, "d-epp"),
        weights(&[("queue-scorer", 1), ("kv-cache-utilization-scorer", 1)])
    );
    // Reuse declared: the prefix scorer at its default weight.
    let o = objects_of(
        "weights-reuse",
        &routed("gateway = \"gw\"", ", prefix_reuse = 50%", "tp 1 × dp 2"),
    );
    assert_eq!(
        scorer_weights(&o, "d-epp"),
        weights(&[
            ("queue-scorer", 1),
            ("kv-cache-utilization-scorer", 1),
            ("prefix-cache-scorer", 2)
        ])
    );
    // Written weights win; a weight of 0 leaves its scorer out.
    let o = objects_of(
        "weights-written",
        &routed(
            "gateway = \"gw\", queue_weight = 4, kv_weight = 0, prefix_weight = 7",
            "",
            "tp 1 × dp 2",
        ),
    );
    assert_eq!(
        scorer_weights(&o, "d-epp"),
        weights(&[("queue-scorer", 4), ("prefix-cache-scorer", 7)])
    );
    assert_eq!(o["HTTPRoute/d"]["spec"]["parentRefs"][0]["name"], "gw");
    assert!(o["HTTPRoute/d"]["spec"]["parentRefs"][0]
        .get("namespace")
        .is_none());
}

#[test]
fn a_pool_of_multi_node_replicas_selects_their_leaders() {
    let o = objects_of("lws", &routed("gateway = \"gw\"", "", "tp 8 × pp 2"));
    let pool = &o["InferencePool/d"];
    let selector = &pool["spec"]["selector"]["matchLabels"];
    let selected: Vec<String> = pod_templates(&o)
        .into_iter()
        .filter(|(_, l, _)| selects(selector, l))
        .map(|(id, _, _)| id)
        .collect();
    assert_eq!(selected, vec!["LeaderWorkerSet/d/leaderTemplate"]);
    let leader = &o["LeaderWorkerSet/d"]["spec"]["leaderWorkerTemplate"]["leaderTemplate"];
    let port = leader["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(vllm_port);
    assert_eq!(port, pool["spec"]["targetPorts"][0]["number"].as_u64());
}

#[test]
fn weighing_nothing_is_refused() {
    let check = |name: &str, text: &str| {
        let dir = common::fresh_dir(name);
        let path = dir.join("main.dist");
        std::fs::write(&path, text).unwrap();
        let checked =
            dic_compiler::driver::compile_file(&dic::disk::DiskWorld, path.to_str().unwrap())
                .unwrap();
        common::rendered(&checked)
    };
    let none = check(
        "refuse-zero",
        &routed(
            "gateway = \"gw\", queue_weight = 0, kv_weight = 0, prefix_weight = 0",
            "",
            "tp 1",
        ),
    );
    assert!(
        none.contains("every scorer of the endpoint picker weighs 0"),
        "{none}"
    );
    let missing = check(
        "refuse-missing",
        &routed("gateway_namespace = \"x\"", "", "tp 1"),
    );
    assert!(missing.contains("gateway"), "{missing}");
}

/// A pod template's containers and init containers (a native sidecar is an init
/// container with `restartPolicy: Always`).
fn all_containers(t: &Value) -> Vec<Value> {
    ["initContainers", "containers"]
        .iter()
        .filter_map(|k| t["spec"][k].as_array())
        .flatten()
        .cloned()
        .collect()
}

/// A container's `--flag=value` argument.
fn flag<'a>(c: &'a Value, name: &str) -> Option<&'a str> {
    let prefix = format!("{name}=");
    c["args"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .find_map(|a| a.strip_prefix(prefix.as_str()))
}

/// Which pods a filter of llm-d v0.8.0 keeps (`filter/bylabel/roles.go`: the prefill
/// filter needs role `prefill`, the decode filter takes `decode` or no role at all).
fn role_filter_keeps(filter: &str, labels: &BTreeMap<String, String>) -> bool {
    let role = labels.get("llm-d.ai/role").map(String::as_str);
    match filter {
        "prefill-filter" => role == Some("prefill"),
        "decode-filter" => role.is_none() || role == Some("decode"),
        other => panic!("unknown filter {other}"),
    }
}

/// P/D behind a Gateway, as llm-d runs it, read across both pools' objects: the route's
/// backend is one pool over both pools' serving pods; its target port reaches vLLM on a
/// prefill pod (where the sidecar sends prompts) and the routing sidecar on a decode pod,
/// which forwards to the port that pod's vLLM really listens on; the picker's two
/// profiles each keep exactly their pool by the role labels the pods carry; both pools
/// run NIXL; no router of dic's own; monitors cover the picker and both pools.
#[test]
fn a_disaggregated_deployment_is_routed_as_llm_d_routes_p_d() {
    let files = common::generate("examples/gateway_pd.dist");
    let objects = objects(&files);
    assert!(
        !files.keys().any(|f| f.contains("/k8s/router")),
        "dic's router beside the picker"
    );
    let route = &objects["HTTPRoute/chat"];
    assert_eq!(
        route["spec"]["rules"][0]["backendRefs"],
        serde_json::json!([{ "group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "chat" }])
    );
    let pool = &objects["InferencePool/chat"];
    let selector = &pool["spec"]["selector"]["matchLabels"];
    let target = pool["spec"]["targetPorts"][0]["number"].as_u64().unwrap();
    let templates = pod_templates(&objects);
    let selected: Vec<&(String, BTreeMap<String, String>, Value)> = templates
        .iter()
        .filter(|(_, l, _)| selects(selector, l))
        .collect();
    let ids: Vec<&str> = selected.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        vec!["Deployment/chat-decode", "Deployment/chat-prefill"]
    );
    for (id, labels, t) in &selected {
        let containers = all_containers(t);
        let vllm = containers.iter().find(|c| vllm_port(c).is_some()).unwrap();
        let vllm_listens = vllm_port(vllm).unwrap();
        assert!(
            words(vllm).contains(r#"{"kv_connector":"NixlConnector","kv_role":"kv_both"}"#),
            "{id}: NIXL"
        );
        // What listens on the pool's port in this pod.
        let at_target: Vec<&Value> = containers
            .iter()
            .filter(|c| {
                c["ports"].as_array().is_some_and(|ps| {
                    ps.iter()
                        .any(|p| p["containerPort"].as_u64() == Some(target))
                })
            })
            .collect();
        assert_eq!(at_target.len(), 1, "{id}: one container on {target}");
        match labels["llm-d.ai/role"].as_str() {
            "prefill" => {
                assert_eq!(vllm_listens, target, "{id}: the sidecar sends prompts here");
                assert_eq!(at_target[0]["name"], "vllm");
                assert_eq!(containers.len(), 1, "{id}: no sidecar on a prefill pod");
            }
            "decode" => {
                let sidecar = at_target[0];
                assert_eq!(sidecar["name"], "routing-sidecar");
                assert_eq!(sidecar["restartPolicy"], "Always", "a native sidecar");
                assert_eq!(
                    sidecar["image"],
                    "ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0"
                );
                assert_eq!(flag(sidecar, "--port"), Some(target.to_string().as_str()));
                assert_eq!(
                    flag(sidecar, "--vllm-port"),
                    Some(vllm_listens.to_string().as_str()),
                    "{id}: the sidecar forwards to vLLM's --port"
                );
                assert_ne!(vllm_listens, target);
                assert_eq!(flag(sidecar, "--kv-connector"), Some("nixlv2"));
                assert_eq!(flag(sidecar, "--secure-proxy"), Some("false"));
            }
            other => panic!("{id}: role {other}"),
        }
    }
    // The picker: decode first, then prefill for every prompt; each profile's filter keeps
    // exactly its pool's pods.
    let config: Value = serde_yaml_ng::from_str(
        objects["ConfigMap/chat-epp"]["data"]["epp-config.yaml"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let loaded: Vec<&Value> = config["plugins"].as_array().unwrap().iter().collect();
    let is_loaded = |name: &str| loaded.iter().any(|p| p["type"] == name);
    let handler = loaded
        .iter()
        .find(|p| p["type"] == "disagg-profile-handler")
        .unwrap();
    let decider = handler["parameters"]["deciders"]["prefill"]
        .as_str()
        .unwrap();
    assert_eq!(decider, "always-disagg-pd-decider");
    assert!(is_loaded(decider) && is_loaded("disagg-headers-handler"));
    for profile in config["schedulingProfiles"].as_array().unwrap() {
        let name = profile["name"].as_str().unwrap();
        assert_eq!(handler["parameters"]["profiles"][name], name);
        let refs: Vec<&str> = profile["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pluginRef"].as_str().unwrap())
            .collect();
        assert!(refs.iter().all(|r| is_loaded(r)), "{refs:?}");
        let filter = refs[0];
        let kept: Vec<&str> = selected
            .iter()
            .filter(|(_, l, _)| role_filter_keeps(filter, l))
            .map(|(id, _, _)| id.as_str())
            .collect();
        assert_eq!(
            kept,
            vec![format!("Deployment/chat-{name}").as_str()],
            "{name}"
        );
    }
    // Monitoring: the picker's Service, and each pool's Service, whose `http` port leads to
    // vLLM's metrics (not the sidecar's).
    for (monitor, pool_pods) in [
        ("ServiceMonitor/chat-epp", None),
        (
            "ServiceMonitor/chat-prefill",
            Some("Deployment/chat-prefill"),
        ),
        ("ServiceMonitor/chat-decode", Some("Deployment/chat-decode")),
    ] {
        let m = &objects[monitor];
        let port = m["spec"]["endpoints"][0]["port"].as_str().unwrap();
        let service = objects
            .values()
            .find(|o| {
                o["kind"] == "Service"
                    && selects(&m["spec"]["selector"]["matchLabels"], &labels_of(o))
            })
            .unwrap_or_else(|| panic!("{monitor} selects no Service"));
        assert!(service["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == port));
        if let Some(pods) = pool_pods {
            let (_, l, t) = templates.iter().find(|(id, _, _)| id == pods).unwrap();
            assert!(selects(&service["spec"]["selector"], l), "{monitor}");
            let vllm = &t["spec"]["containers"][0];
            let http = vllm["ports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == "http")
                .unwrap();
            assert_eq!(http["containerPort"].as_u64(), vllm_port(vllm), "{monitor}");
        }
    }
}

/// Every word of a container's command and args.
fn words(c: &Value) -> String {
    ["command", "args"]
        .iter()
        .filter_map(|k| c[k].as_array())
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

/// An object's (or a pod template's) own labels.
fn labels_of(o: &Value) -> BTreeMap<String, String> {
    o["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().into()))
                .collect()
        })
        .unwrap_or_default()
}

/// A pool whose decode replicas span nodes (a LeaderWorkerSet): the pool selects the
/// leaders only, which carry the sidecar; the workers serve nothing.
#[test]
fn a_decode_pool_of_multi_node_replicas_puts_the_sidecar_on_its_leaders() {
    let o = objects_of(
        "pd-lws",
        "import std.nodes.dgx_h100\nimport std.models.llama_3_1_405b\n\
         cluster c { nodes = 4 × dgx_h100 }\n\
         workload w { prompt = 2k tokens, output = 200 tokens, rate = 1 req/s }\n\
         deploy d { model = llama_3_1_405b, cluster = c, workload = w, \
         layout = { prefill = tp 8 × pp 2, decode = tp 8 × pp 2 }, routing = { gateway = \"gw\" } }\n",
    );
    let pool = &o["InferencePool/d"];
    let target = pool["spec"]["targetPorts"][0]["number"].as_u64().unwrap();
    let selected: Vec<(String, Value)> = pod_templates(&o)
        .into_iter()
        .filter(|(_, l, _)| selects(&pool["spec"]["selector"]["matchLabels"], l))
        .map(|(id, _, t)| (id, t))
        .collect();
    let ids: Vec<&str> = selected.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        vec![
            "LeaderWorkerSet/d-decode/leaderTemplate",
            "LeaderWorkerSet/d-prefill/leaderTemplate"
        ]
    );
    let (_, decode_leader) = &selected[0];
    let sidecar = &decode_leader["spec"]["initContainers"][0];
    assert_eq!(flag(sidecar, "--port"), Some(target.to_string().as_str()));
    let vllm = decode_leader["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(vllm_port);
    assert_eq!(
        flag(sidecar, "--vllm-port").map(|p| p.parse::<u64>().unwrap()),
        vllm
    );
}

/// The autoscaler, HPA or KEDA, still scales the serving workload when a pool and its
/// picker sit in front of it (not the picker's Deployment).
#[test]
fn autoscaling_targets_the_model_servers_behind_the_pool() {
    for (name, via) in [
        ("scale-hpa", "autoscale = { min = 2, max = 4 }"),
        (
            "scale-keda",
            "autoscale = { min = 0, max = 4, via = keda, prometheus = \"http://prometheus:9090\" }",
        ),
    ] {
        let text = routed("gateway = \"gw\"", "", "tp 1 × dp 2")
            .replace("routing = {", &format!("{via}, routing = {{"));
        let o = objects_of(name, &text);
        let scaler = o
            .values()
            .find(|x| x["kind"] == "HorizontalPodAutoscaler" || x["kind"] == "ScaledObject")
            .unwrap_or_else(|| panic!("{name}: no autoscaler"));
        let target = &scaler["spec"]["scaleTargetRef"];
        assert_eq!(target["kind"], "Deployment", "{name}");
        assert_eq!(target["name"], "d", "{name}");
        let pool = &o["InferencePool/d"];
        let (_, labels, _) = pod_templates(&o)
            .into_iter()
            .find(|(id, _, _)| id == "Deployment/d")
            .unwrap();
        assert!(selects(&pool["spec"]["selector"]["matchLabels"], &labels));
    }
}
