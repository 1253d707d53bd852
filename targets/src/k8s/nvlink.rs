//! Multi-node NVLink (GB200/GB300 NVL72 trays): the ComputeDomain whose IMEX channel the
//! pods claim, and how a group is kept inside one NVLink domain (LWS exclusive topology,
//! or a pod affinity on the clique label).

use super::*;

/// The pods' claim on the ComputeDomain's IMEX channel.
pub(super) const IMEX_CLAIM: &str = "imex-channel";
/// The node label GPU Feature Discovery sets to a node's NVLink domain (clique).
pub(super) const CLIQUE_LABEL: &str = "nvidia.com/gpu.clique";
/// The label the LWS controller gives every pod of one group (its value per group).
pub(super) const LWS_GROUP_KEY: &str = "leaderworkerset.sigs.k8s.io/group-key";
/// LWS's annotation that gives each group a topology domain of its own.
pub(super) const LWS_EXCLUSIVE_TOPOLOGY: &str = "leaderworkerset.sigs.k8s.io/exclusive-topology";

/// A group that spans nodes inside one NVLink domain (GB200/GB300 NVL72 trays): its
/// traffic crosses trays over multi-node NVLink, which NVIDIA's DRA driver sets up
/// through a ComputeDomain (IMEX channels); without it NCCL falls back to the network.
pub(super) fn multi_node_nvlink(d: &DeploymentPlan) -> bool {
    d.nodes_per_group > 1 && d.nvlink_domain_gpus > d.gpus_per_node
}

/// The ResourceClaimTemplate the ComputeDomain creates for its channel.
pub(super) fn compute_domain_channel(d: &DeploymentPlan) -> String {
    channel_of(&dns_name(&d.name))
}

pub(super) fn channel_of(base: &str) -> String {
    format!("{base}-imex-channel")
}

/// A group that fills its NVLink domain gets the domain to itself (LWS exclusive
/// topology); a smaller one is kept inside one domain by a pod affinity on the clique
/// label, matched per group through the LWS group key (the first pod of a group matches
/// itself).
pub(super) fn group_fills_domain(d: &DeploymentPlan) -> bool {
    d.nodes_per_group * d.gpus_per_node >= d.nvlink_domain_gpus
}

pub(super) fn clique_affinity(d: &DeploymentPlan) -> Option<PodAffinity> {
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
pub(super) fn compute_domain(d: &DeploymentPlan, base: &str) -> serde_json::Value {
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
