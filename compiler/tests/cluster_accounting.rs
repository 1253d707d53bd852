//! Deployments that share a cluster are accounted together: disjoint GPUs and ports,
//! E0408 when they oversubscribe it (an autoscaler's `max` reserved), E0409 for a pin to a
//! node group the cluster lacks, and a mixed cluster's replicas placed on both node types,
//! each part analysed on its own hardware with its share of the load.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::Load;
use dic_compiler::diagnostics::Code;
use dic_compiler::driver::{self, Checked};
use dic_compiler::source::MemoryWorld;

fn compile(src: &str) -> Checked {
    let head =
        "import std.nodes.dgx_h100\nimport std.nodes.dgx_a100\nimport std.models.llama_3_1_8b\n";
    let world = MemoryWorld::new().with("c.dist", &format!("{head}{src}"));
    driver::compile_file(&world, "c.dist").unwrap()
}

fn codes(c: &Checked) -> Vec<Code> {
    c.diagnostics.iter().map(|d| d.code).collect()
}

#[test]
fn two_deployments_on_one_node_get_disjoint_gpus_and_ports() {
    let c = compile(
        "cluster one { nodes = 1 × dgx_h100 }\n\
         deploy a { model = llama_3_1_8b, cluster = one, layout = tp 4 }\n\
         deploy b { model = llama_3_1_8b, cluster = one, layout = tp 2 × dp 2 }\n",
    );
    assert!(!c.has_errors(), "{:?}", c.diagnostics);
    let a = &c.plan.deployments[0];
    let b = &c.plan.deployments[1];
    let gpus = |d: &dic_compiler::ir::DeploymentPlan| {
        d.comm
            .ranks
            .iter()
            .map(|r| (r.node, r.local_gpu))
            .collect::<Vec<_>>()
    };
    assert_eq!(gpus(a), vec![(0, 0), (0, 1), (0, 2), (0, 3)]);
    assert_eq!(gpus(b), vec![(0, 4), (0, 5), (0, 6), (0, 7)]);
    assert_eq!(a.replica_ports, vec![8000]);
    assert_eq!(b.replica_ports, vec![8001, 8002]);
    assert_eq!(a.cluster_nodes, vec!["dgx_h100-0"]);
}

#[test]
fn oversubscription_names_the_deployments_and_the_numbers() {
    let c = compile(
        "cluster one { nodes = 1 × dgx_h100 }\n\
         deploy a { model = llama_3_1_8b, cluster = one, layout = tp 8 }\n\
         deploy b { model = llama_3_1_8b, cluster = one, layout = tp 4 }\n",
    );
    let d = c
        .diagnostics
        .iter()
        .find(|d| d.code == Code::ClusterOversubscribed)
        .unwrap();
    assert!(
        d.message.contains("deploy `b`") && d.message.contains("`a` takes 8 GPUs"),
        "{}",
        d.message
    );
    // `b` is not lowered: its scripts would reuse `a`'s GPUs
    assert_eq!(c.plan.deployments.len(), 1);
    // an autoscaler's max is reserved
    let c = compile(
        "cluster one { nodes = 1 × dgx_h100 }\n\
         deploy a { model = llama_3_1_8b, cluster = one, layout = tp 2, autoscale = { max = 3 } }\n\
         deploy b { model = llama_3_1_8b, cluster = one, layout = tp 4 }\n",
    );
    assert!(codes(&c).contains(&Code::ClusterOversubscribed));
    let c = compile(
        "cluster one { nodes = 1 × dgx_h100 }\n\
         deploy a { model = llama_3_1_8b, cluster = one, layout = tp 2, autoscale = { max = 2 } }\n\
         deploy b { model = llama_3_1_8b, cluster = one, layout = tp 4 }\n",
    );
    assert!(!c.has_errors(), "{:?}", c.diagnostics);
}

/// An autoscaler's `max` counts launch groups (Kubernetes replicas): a dense replica, or a
/// wide-EP deployment's whole engine. Either way `max` of them must fit the cluster.
#[test]
fn an_autoscalers_max_is_reserved_for_moe_as_for_dense() {
    let moe = |max: u64| {
        let world = MemoryWorld::new().with(
            "c.dist",
            &format!(
                "import std.nodes.dgx_h100\nimport std.models.qwen3_30b_a3b\n\
                 cluster one {{ nodes = 1 × dgx_h100 }}\n\
                 deploy a {{ model = qwen3_30b_a3b, cluster = one, layout = tp 1 × dp 4 × ep, autoscale = {{ max = {max} }} }}\n"
            ),
        );
        driver::compile_file(&world, "c.dist").unwrap()
    };
    // three 4-GPU engines on 8 GPUs
    let c = moe(3);
    let d = c
        .diagnostics
        .iter()
        .find(|d| d.code == Code::ClusterOversubscribed)
        .unwrap_or_else(|| panic!("{:?}", c.diagnostics));
    assert!(d.message.contains("needs 12 GPUs"), "{}", d.message);
    assert!(d.message.contains("autoscaler"), "{}", d.message);
    // two fit
    let c = moe(2);
    assert!(!c.has_errors(), "{:?}", c.diagnostics);
    // the dense rule, unchanged: three 4-GPU replicas on 8 GPUs
    let c = compile(
        "cluster one { nodes = 1 × dgx_h100 }\n\
         deploy a { model = llama_3_1_8b, cluster = one, layout = tp 4, autoscale = { max = 3 } }\n",
    );
    assert!(codes(&c).contains(&Code::ClusterOversubscribed));
}

/// The E0405 of `layout` for DeepSeek-V3 on one H200 node and one B200 node.
fn h200_and_b200_e0405(layout: &str) -> dic_compiler::diagnostics::Diagnostic {
    let world = MemoryWorld::new().with(
        "c.dist",
        &format!(
            "import std.nodes.dgx_h200\nimport std.nodes.dgx_b200\nimport std.models.deepseek_v3\n\
             cluster lab {{ nodes = [1 × dgx_h200, 1 × dgx_b200] }}\n\
             deploy r1 {{ model = deepseek_v3, cluster = lab, layout = {layout} }}\n"
        ),
    );
    let c = driver::compile_file(&world, "c.dist").unwrap();
    c.diagnostics
        .into_iter()
        .find(|d| d.code == Code::NotEnoughGpus)
        .unwrap_or_else(|| panic!("no E0405 for {layout}"))
}

/// One engine over an H200 node and a B200 node: the diagnostic says an engine cannot
/// span GPU types, names both groups and what would fit — not "the cluster has 8".
#[test]
fn one_engine_over_two_gpu_types_says_so() {
    let d = h200_and_b200_e0405("tp 8 × dp 2 × ep");
    assert!(!d.message.contains("the cluster has 8"), "{}", d.message);
    assert!(d.message.contains("cannot span GPU types"), "{}", d.message);
    for group in ["`dgx_h200` has 8 × h200_sxm", "`dgx_b200` has 8 × b200"] {
        assert!(d.message.contains(group), "{}", d.message);
    }
    let help = d.help.as_deref().unwrap_or_default();
    assert!(
        help.contains("`tp 8 × pp 1 × dp 1 × ep` on one group"),
        "{help}"
    );
    assert!(help.contains("drop `ep`: `tp 8 × pp 1 × dp 2`"), "{help}");
    // more GPUs than the whole cluster: the cluster's total, over its groups
    let d = h200_and_b200_e0405("tp 8 × dp 4 × ep");
    assert!(
        d.message.contains("the cluster has 16 over 2 node groups"),
        "{}",
        d.message
    );
}

#[test]
fn a_list_of_node_groups_is_the_whole_cluster() {
    // 16 GPUs over two node types: `tp 8 × dp 2` places one replica on each
    let c = compile(
        "cluster lab { nodes = [1 × dgx_a100, 1 × dgx_h100] }\n\
         workload w { prompt = 1k tokens, output = 128 tokens, rate = 4 req/s }\n\
         deploy d { model = llama_3_1_8b, cluster = lab, workload = w, layout = tp 8 × dp 2 }\n",
    );
    assert!(!c.has_errors(), "{:?}", c.diagnostics);
    let names: Vec<&str> = c.plan.deployments.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["d-dgx_a100", "d-dgx_h100"]);
    let gpus: Vec<&str> = c
        .plan
        .deployments
        .iter()
        .map(|d| d.gpu.name.as_str())
        .collect();
    assert_eq!(gpus, ["a100_sxm_80gb", "h100_sxm"]);
    // each part serves half the load on its own hardware
    for d in &c.deployments {
        assert_eq!(d.scenario.scenario.layout.dp, 1);
        let w = d.scenario.scenario.workload.unwrap();
        assert!(
            matches!(w.load, Load::Rate(r) if (r - 2.0).abs() < 1e-9),
            "{:?}",
            w.load
        );
    }
    let first = c.plan.deployments[0].part_of.as_ref().unwrap();
    assert!(first.first && first.deployment == "d" && first.of == 2);
}

#[test]
fn a_pinned_deployment_uses_its_group_or_says_the_cluster_lacks_it() {
    let c = compile(
        "cluster lab { nodes = [1 × dgx_a100, 1 × dgx_h100] }\n\
         deploy d { model = llama_3_1_8b, cluster = lab, layout = tp 1, node_group = dgx_h100 }\n",
    );
    assert!(!c.has_errors(), "{:?}", c.diagnostics);
    assert_eq!(c.plan.deployments[0].gpu.name, "h100_sxm");
    assert_eq!(c.plan.deployments[0].cluster_nodes, vec!["dgx_h100-0"]);
    let c = compile(
        "cluster lab { nodes = [1 × dgx_a100] }\n\
         deploy d { model = llama_3_1_8b, cluster = lab, layout = tp 1, node_group = dgx_h100 }\n",
    );
    assert!(
        codes(&c).contains(&Code::NodeGroupNotInCluster),
        "{:?}",
        codes(&c)
    );
    assert!(c.plan.deployments.is_empty());
}
