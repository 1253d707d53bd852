//! A layout against a cluster of several node groups (node types). An engine — one
//! replica (tp × pp × pcp), or a wide-EP deployment's data-parallel group, which vLLM
//! runs as one engine over all its ranks — runs on the GPUs of one node group: the
//! accounting never straddles groups (`allocation`), and one engine over two GPU types
//! would mix kernels, memory and NCCL transports in one collective. The structural rule
//! sees only the group its scenario runs on; this module says, with the whole cluster in
//! view, why a layout has no room: more GPUs than the cluster, or an engine larger than
//! every group — naming the groups, their GPU types, and layouts that would fit.

use super::rules::{Anchor, Finding};
use crate::diagnostics::Code;
use crate::program::{Body, Deploy, Layout, Program};

/// One node group as the message names it.
struct GroupGpus {
    node: String,
    nodes: u64,
    gpus_per_node: u64,
    gpu: String,
}

impl GroupGpus {
    fn gpus(&self) -> u64 {
        self.nodes * self.gpus_per_node
    }
}

fn groups_of(p: &Program, d: &Deploy) -> Vec<GroupGpus> {
    let Some(cluster) = d.cluster.and_then(|c| p.cluster(c)) else {
        return Vec::new();
    };
    cluster
        .groups
        .iter()
        .filter_map(|g| {
            let node = p.node(g.node)?;
            let gpu = node.gpu.and_then(|id| p.def(id))?;
            Some(GroupGpus {
                node: p.def(g.node)?.name.clone(),
                nodes: g.count,
                gpus_per_node: node.gpu_count,
                gpu: match gpu.body {
                    Body::Gpu(_) => gpu.name.clone(),
                    _ => return None,
                },
            })
        })
        .collect()
}

/// The cluster-wide E0405 that replaces the structural one among `findings` of `ds` on a
/// cluster of several node groups (`None` when there is none to replace).
pub fn cluster_reason(
    p: &Program,
    d: &Deploy,
    ds: &super::DeploymentScenario,
    findings: &[Finding],
) -> Option<Finding> {
    if !findings.iter().any(|f| f.code == Code::NotEnoughGpus) {
        return None;
    }
    layout_across_groups(p, d, &ds.scenario.layout, &ds.group_node)
}

/// E0405 for layout `l` of deployment `d`, analysed on node group `own`, on a cluster of
/// two or more node groups (`None` for one group, where the structural rule's figures are
/// the cluster's).
pub fn layout_across_groups(p: &Program, d: &Deploy, l: &Layout, own: &str) -> Option<Finding> {
    let groups = groups_of(p, d);
    if groups.len() < 2 {
        return None;
    }
    let listed = groups
        .iter()
        .map(|g| {
            format!(
                "`{}` has {} × {} ({} node{})",
                g.node,
                g.gpus(),
                g.gpu,
                g.nodes,
                if g.nodes == 1 { "" } else { "s" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let total: u64 = groups.iter().map(GroupGpus::gpus).sum();
    let largest = groups.iter().max_by_key(|g| g.gpus())?;
    let moe = d.model.and_then(|m| p.model(m)).is_some_and(|m| m.is_moe());
    let whole = l.ep && moe && l.dp > 1;
    let engine = if whole { l.gpus() } else { l.replica_gpus() };
    if l.gpus() > total {
        return Some(Finding::new(
            Code::NotEnoughGpus,
            Anchor::Layout,
            format!(
                "the layout needs {} GPUs (`{l}`), the cluster has {total} over {} node groups: {listed}",
                l.gpus(),
                groups.len()
            ),
            "more GPUs than the cluster has",
            Some("add nodes to a group, or shrink dp".into()),
        ));
    }
    if engine <= largest.gpus() {
        // Each engine fits a group, but not all of them together as placed (other
        // deployments' GPUs, which E0408 names, or whole nodes left part-used).
        return Some(Finding::new(
            Code::NotEnoughGpus,
            Anchor::Layout,
            format!(
                "the layout needs {} GPUs (`{l}`), more than node group `{own}` has; its engines of {engine} GPUs do not all fit the cluster's node groups as placed: {listed}",
                l.gpus()
            ),
            "more GPUs than one node group has",
            Some("an engine runs inside one node group: add nodes to a group, or shrink dp".into()),
        ));
    }
    let mut gpu_types: Vec<&str> = groups.iter().map(|g| g.gpu.as_str()).collect();
    gpu_types.sort_unstable();
    gpu_types.dedup();
    let head = if gpu_types.len() > 1 {
        "one vLLM engine cannot span GPU types"
    } else {
        "one vLLM engine runs inside one node group"
    };
    let what = if whole {
        format!(
            "`{l}` is one engine of {engine} GPUs (its {} data-parallel ranks hold the experts together over `ep`)",
            l.dp
        )
    } else {
        format!("each replica of `{l}` is one engine of {engine} GPUs (tp × pp)")
    };
    let mut ways = Vec::new();
    let rank_gpus = l.replica_gpus().max(1);
    if whole {
        let dp = largest.gpus() / rank_gpus;
        if dp >= 1 {
            let fits = Layout { dp, ..*l };
            ways.push(format!(
                "`{fits}` on one group (`node_group = {}`)",
                largest.node
            ));
        }
        if rank_gpus <= largest.gpus() {
            let replicas = Layout { ep: false, ..*l };
            ways.push(format!(
                "drop `ep`: `{replicas}` runs {} independent replicas, which the groups share",
                l.dp
            ));
        }
    }
    let per_node = largest.gpus_per_node.max(1);
    ways.push(format!(
        "add nodes so that one group has {engine} GPUs ({} × {})",
        engine.div_ceil(per_node),
        largest.node
    ));
    Some(Finding::new(
        Code::NotEnoughGpus,
        Anchor::Layout,
        format!("{head}: {what}, and no node group has that many: {listed}"),
        &if gpu_types.len() > 1 {
            format!("one engine over {}", gpu_types.join(" and "))
        } else {
            "larger than any node group".to_string()
        },
        Some(ways.join("; or ")),
    ))
}
