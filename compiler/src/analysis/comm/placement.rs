//! Where each parallel group sits: ranks laid out DP × PP × PCP × TP with TP fastest,
//! one rank per GPU, GPUs numbered node by node ([`rank_placements`]); the groups of each
//! kind; and the slowest link a kind of group crosses ([`Placement`]).

use super::{uses_deepep, LINK_EFFICIENCY};
use crate::analysis::scenario::{LinkSpec, Scenario};
use crate::program::{Layout, LinkType};
use serde::Serialize;

/// Where a group of ranks sits and which link bounds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placement {
    pub size: u64,
    /// Some group of this kind has members on different nodes.
    pub spans_nodes: bool,
    /// Every group stays inside one scale-up (NVLink) domain.
    pub within_scale_up_domain: bool,
    /// Shared by every step's collectives on it (cloned per step, so not a `String`).
    pub link_name: std::sync::Arc<str>,
    pub link_type: LinkType,
    /// Effective bytes/s per rank per direction.
    pub bandwidth: f64,
    pub latency: f64,
}

impl Placement {
    /// Every group talks over NVLink inside one node: where vLLM's custom all-reduce runs
    /// and where the kernel tables' NVLink measurements were taken (their fits are not
    /// stretched to racks such as NVL72, whose trays are separate nodes).
    pub fn within_one_nvlink_node(&self) -> bool {
        matches!(self.link_type, LinkType::Nvlink | LinkType::Nvswitch) && !self.spans_nodes
    }
}

/// Where one kind of group sits and the slowest link any of them crosses. `spans` gives
/// each group of `size` ranks as its lowest and highest rank: node and scale-up domain
/// only grow with the rank ([`node_of`]), so a group stays on one node (domain) exactly
/// when its two ends do — O(1) per group, whatever its size.
pub fn place(s: &Scenario, size: u64, spans: impl Iterator<Item = (u64, u64)>) -> Placement {
    let t = &s.topology;
    let per_node = t.gpus_per_node.max(1);
    let node_of = |r: u64| node_of(s, r).0;
    // Scale-up domains are whole nodes (an NVL72 rack is 18 trays of 4), or parts of one
    // (H100 NVL: NVLink-bridged pairs, PCIe between the pairs).
    let sub_node = t.scale_up_domain.max(1) < per_node;
    let nodes_per_domain = (t.scale_up_domain / per_node).max(1);
    let domain_of = |r: u64| {
        if sub_node {
            let (node, local) = self::node_of(s, r);
            node * per_node.div_ceil(t.scale_up_domain.max(1)) + local / t.scale_up_domain.max(1)
        } else {
            node_of(r) / nodes_per_domain
        }
    };
    let (mut spans_nodes, mut all_in_domain) = (false, true);
    for (lo, hi) in spans {
        spans_nodes |= node_of(lo) != node_of(hi);
        all_in_domain &= domain_of(lo) == domain_of(hi);
    }
    let in_domain = t.scale_up.is_some() && all_in_domain;
    let (link, bw): (LinkSpec, f64) = if !spans_nodes && sub_node && !in_domain {
        // Inside a node but across its NVLink islands: the host's PCIe.
        let l = t.gpu.pcie.clone();
        let bw = l.bandwidth;
        (l, bw)
    } else if !spans_nodes {
        let l = t.intra_node_link().clone();
        let bw = l.bandwidth;
        (l, bw)
    } else if in_domain {
        let l = t
            .scale_up
            .clone()
            .expect("in_domain implies a scale-up link");
        let bw = l.bandwidth;
        (l, bw)
    } else {
        match &t.scale_out {
            Some(so) => {
                let bw = t.scale_out_bandwidth_per_gpu().unwrap_or(so.link.bandwidth);
                (so.link.clone(), bw)
            }
            None => {
                // No NICs described: assume a 25 Gb/s Ethernet port per node.
                let l = LinkSpec {
                    name: "ethernet (undeclared)".into(),
                    link_type: LinkType::Ethernet,
                    bandwidth: 25e9 / 8.0,
                    latency: 4e-6,
                };
                let bw = l.bandwidth / t.gpus_per_node.max(1) as f64;
                (l, bw)
            }
        }
    };
    Placement {
        size,
        spans_nodes,
        within_scale_up_domain: in_domain || !spans_nodes && !sub_node && t.scale_up.is_some(),
        link_name: link.name.as_str().into(),
        link_type: link.link_type,
        bandwidth: bw * LINK_EFFICIENCY,
        latency: link.latency,
    }
}

/// Where one rank runs and what it is in each parallel dimension: the one placement the
/// groups below, the report, the NCCL plan and the launch scripts all read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RankPlacement {
    pub rank: u64,
    pub node: u64,
    pub local_gpu: u64,
    pub dp_replica: u64,
    pub pp_stage: u64,
    pub tp_rank: u64,
    /// Position in the PCP group, when prefill context parallelism is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcp_rank: Option<u64>,
    /// EP group (one per PP stage) when expert parallelism is on.
    #[serde(default)]
    pub ep_group: Option<u64>,
}

/// The rank of a replica's stage, PCP and TP position. Ranks are laid out
/// DP × PP × PCP × TP, TP fastest, as vLLM's `initialize_model_parallel` does.
pub fn rank_of(l: &Layout, replica: u64, stage: u64, pcp: u64, tp: u64) -> u64 {
    replica * l.replica_gpus() + stage * stage_gpus(l) + pcp * l.tp.max(1) + tp
}

/// The node a rank runs on and its GPU there. A replica that fits a node runs whole on
/// one node, as many replicas per node as fit (GPUs left over stay idle); a larger one
/// fills whole nodes, GPUs numbered node by node. [`Topology::nodes_for_layout`] counts
/// the same nodes.
///
/// [`Topology::nodes_for_layout`]: super::scenario::Topology::nodes_for_layout
pub fn node_of(s: &Scenario, rank: u64) -> (u64, u64) {
    let per_node = s.topology.gpus_per_node.max(1);
    let replica = s.layout.replica_gpus().max(1);
    if replica <= per_node {
        let per_node_replicas = per_node / replica;
        let (r, within) = (rank / replica, rank % replica);
        (
            r / per_node_replicas,
            (r % per_node_replicas) * replica + within,
        )
    } else {
        (rank / per_node, rank % per_node)
    }
}

/// Every rank of the deployment, in rank order ([`rank_of`] inverted).
pub fn rank_placements(s: &Scenario) -> Vec<RankPlacement> {
    let l = s.layout;
    let per_replica = l.replica_gpus().max(1);
    let per_stage = stage_gpus(&l);
    (0..l.gpus())
        .map(|rank| {
            let within = rank % per_replica;
            let (node, local_gpu) = node_of(s, rank);
            RankPlacement {
                rank,
                node,
                local_gpu,
                dp_replica: rank / per_replica,
                pp_stage: within / per_stage,
                tp_rank: within % l.tp.max(1),
                pcp_rank: (l.pcp > 1).then_some(within % per_stage / l.tp.max(1)),
                ep_group: l.ep.then_some(within / per_stage),
            }
        })
        .collect()
}

/// Every (replica, stage, PCP position) of the deployment, in rank order.
fn stage_slices(l: &Layout) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
    (0..l.dp.max(1)).flat_map(move |d| {
        (0..l.pp.max(1)).flat_map(move |st| (0..l.pcp.max(1)).map(move |c| (d, st, c)))
    })
}

/// The TP groups of the whole deployment.
pub fn tp_groups(s: &Scenario) -> Vec<Vec<u64>> {
    let l = &s.layout;
    stage_slices(l)
        .map(|(d, st, c)| (0..l.tp.max(1)).map(|t| rank_of(l, d, st, c, t)).collect())
        .collect()
}

/// The groups a MoE layer's tokens move in across DP ranks ([`moe_comm`]): with DeepEP,
/// the TP × DP ranks of each PP stage; with vLLM's default all-gather/reduce-scatter,
/// the DP group of each TP rank and stage (the same TP rank of every replica).
pub fn ep_groups(s: &Scenario) -> Vec<Vec<u64>> {
    let l = &s.layout;
    if uses_deepep(s) {
        (0..l.pp.max(1))
            .map(|stage| {
                (0..l.dp.max(1))
                    .flat_map(|d| (0..l.tp.max(1)).map(move |t| rank_of(l, d, stage, 0, t)))
                    .collect()
            })
            .collect()
    } else {
        (0..l.pp.max(1))
            .flat_map(|stage| {
                (0..l.tp.max(1)).map(move |t| {
                    (0..l.dp.max(1))
                        .map(|d| rank_of(l, d, stage, 0, t))
                        .collect()
                })
            })
            .collect()
    }
}

/// The pairs of ranks at each PP stage boundary (stage s's rank i sends to stage s+1's rank i).
pub fn pp_pairs(s: &Scenario) -> Vec<Vec<u64>> {
    let l = &s.layout;
    stage_slices(l)
        .filter(|(_, st, _)| st + 1 < l.pp.max(1))
        .flat_map(|(d, st, c)| {
            (0..l.tp.max(1))
                .map(move |t| vec![rank_of(l, d, st, c, t), rank_of(l, d, st + 1, c, t)])
        })
        .collect()
}

/// Ranks of one PP stage of one replica: TP × PCP.
pub fn stage_gpus(l: &Layout) -> u64 {
    l.tp.max(1) * l.pcp.max(1)
}

/// The DCP groups: `dcp` consecutive ranks of each TP group (vLLM splits the TP group).
pub fn dcp_groups(s: &Scenario) -> Vec<Vec<u64>> {
    let d = s.layout.dcp.max(1);
    tp_groups(s)
        .into_iter()
        .flat_map(|g| {
            g.chunks(d as usize)
                .map(<[u64]>::to_vec)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The PCP groups: the ranks with the same replica, stage and TP rank.
pub fn pcp_groups(s: &Scenario) -> Vec<Vec<u64>> {
    let l = &s.layout;
    (0..l.dp.max(1))
        .flat_map(|d| (0..l.pp.max(1)).map(move |st| (d, st)))
        .flat_map(|(d, st)| {
            (0..l.tp.max(1))
                .map(move |t| (0..l.pcp.max(1)).map(|c| rank_of(l, d, st, c, t)).collect())
        })
        .collect()
}

/// The DP "group": rank 0 of every replica, for start-up and weight checks.
pub fn dp_group(s: &Scenario) -> Vec<u64> {
    let l = &s.layout;
    (0..l.dp.max(1)).map(|d| rank_of(l, d, 0, 0, 0)).collect()
}

/// Replicas whose placement differs: the rest repeat them. A replica inside a node is
/// like any other; a larger one starts on node `r × nodes_per_replica`, and its position
/// in the scale-up domain repeats every `domain / gcd(domain, nodes_per_replica)` replicas.
fn distinct_replicas(s: &Scenario) -> u64 {
    let t = &s.topology;
    let l = &s.layout;
    let per_node = t.gpus_per_node.max(1);
    let replica = l.replica_gpus().max(1);
    if replica <= per_node {
        // Every replica of a node, when the node holds several NVLink islands (their
        // offsets differ); otherwise any replica stands for all.
        return if t.scale_up_domain.max(1) < per_node {
            (per_node / replica).clamp(1, l.dp.max(1))
        } else {
            1
        };
    }
    let nodes_per_domain = (t.scale_up_domain / per_node).max(1);
    let nodes_per_replica = replica.div_ceil(per_node);
    let mut a = nodes_per_domain;
    let mut b = nodes_per_replica;
    while b != 0 {
        (a, b) = (b, a % b);
    }
    (nodes_per_domain / a).clamp(1, l.dp.max(1))
}

pub fn tp_placement(s: &Scenario) -> Placement {
    let l = &s.layout;
    let tp = l.tp.max(1);
    let spans = (0..distinct_replicas(s)).flat_map(move |d| {
        (0..l.pp.max(1)).flat_map(move |st| {
            (0..l.pcp.max(1)).map(move |c| (rank_of(l, d, st, c, 0), rank_of(l, d, st, c, tp - 1)))
        })
    });
    place(s, tp, spans)
}

pub fn ep_placement(s: &Scenario) -> Placement {
    let l = &s.layout;
    let (tp, dp) = (l.tp.max(1), l.dp.max(1));
    if uses_deepep(s) {
        let spans = (0..l.pp.max(1))
            .map(move |st| (rank_of(l, 0, st, 0, 0), rank_of(l, dp - 1, st, 0, tp - 1)));
        place(s, tp * dp, spans)
    } else {
        let spans = (0..l.pp.max(1)).flat_map(move |st| {
            (0..tp).map(move |t| (rank_of(l, 0, st, 0, t), rank_of(l, dp - 1, st, 0, t)))
        });
        place(s, dp, spans)
    }
}

pub fn pp_placement(s: &Scenario) -> Option<Placement> {
    let l = &s.layout;
    if l.pp <= 1 {
        return None;
    }
    let spans = (0..distinct_replicas(s)).flat_map(move |d| {
        (0..l.pp - 1).flat_map(move |st| {
            (0..l.pcp.max(1)).flat_map(move |c| {
                (0..l.tp.max(1))
                    .map(move |t| (rank_of(l, d, st, c, t), rank_of(l, d, st + 1, c, t)))
            })
        })
    });
    Some(place(s, 2, spans))
}
