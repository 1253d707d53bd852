//! Inference routing through a Gateway (`routing = { gateway = … }`), object by object:
//! the HTTPRoute sends the named Gateway's traffic to the InferencePool; the pool selects
//! exactly the deployment's model-server pods (a LeaderWorkerSet's leaders, not its
//! workers, nor the endpoint picker or a Job) on the port vLLM listens on; the endpoint
//! picker's scorer weights follow the `.dist`; and the rules on `routing`.

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
    let labels_of = |t: &Value| -> BTreeMap<String, String> {
        t["metadata"]["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().into()))
                    .collect()
            })
            .unwrap_or_default()
    };
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
fn routing_a_disaggregated_layout_or_weighing_nothing_is_refused() {
    let check = |name: &str, text: &str| {
        let dir = common::fresh_dir(name);
        let path = dir.join("main.dist");
        std::fs::write(&path, text).unwrap();
        let checked =
            dic_compiler::driver::compile_file(&dic::disk::DiskWorld, path.to_str().unwrap())
                .unwrap();
        common::rendered(&checked)
    };
    let pd = check(
        "refuse-pd",
        &routed("gateway = \"gw\"", "", "{ prefill = tp 1, decode = tp 1 }"),
    );
    assert!(pd.contains("`routing` with a disaggregated layout"), "{pd}");
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
