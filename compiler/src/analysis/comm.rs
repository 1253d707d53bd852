//! Communication: where each parallel group sits on the topology, and what its
//! collectives cost (α-β model, ../shared/reference/comm-and-hardware.md §2).
//!
//! Ranks are laid out DP × PP × PCP × TP with TP fastest (vLLM's order), one rank per
//! GPU, GPUs numbered node by node: [`rank_placements`] is that placement, computed here
//! once for the report, the NCCL plan and the launch scripts. A group's link is the
//! slowest one it crosses: the scale-up link (NVLink/NVSwitch) inside a node or a
//! rack-scale NVLink domain, PCIe inside a node without one, the scale-out fabric across
//! nodes. vLLM's TP all-reduces are timed as vLLM runs them ([`vllm_all_reduce_time`]):
//! its custom kernel for small messages, the NVSwitch's own reduction for large ones on
//! 4 or more GPUs ([`nvls_all_reduce`]), a ring otherwise.

use super::gemm::KernelFamily;
use super::scenario::{LinkSpec, Scenario};
use crate::program::{Layout, LinkType};
use serde::Serialize;

/// Achievable fraction of a link's nominal bandwidth for large collectives. Sources:
/// nvbandwidth on 8×H200 measured 396/450 GB/s NVLink (88%) and 55/63 GB/s PCIe 5
/// (88%); NCCL's own topology constants give 370.8/450 (82%) for H100 NVLink
/// (reference §2.3, §3). 0.8 is the rounded lower end.
pub const LINK_EFFICIENCY: f64 = 0.8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    SendRecv,
    Broadcast,
}

impl Collective {
    pub const ALL: [Collective; 6] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllToAll,
        Collective::SendRecv,
        Collective::Broadcast,
    ];

    /// The name in `nccl/plan.toml` (the runtime parses it back with [`Collective::parse`]).
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::AllToAll => "all_to_all",
            Collective::SendRecv => "send_recv",
            Collective::Broadcast => "broadcast",
        }
    }

    pub fn parse(name: &str) -> Option<Collective> {
        Collective::ALL.into_iter().find(|c| c.name() == name)
    }

    /// α terms of the bandwidth-optimal algorithm on `p` ranks (ring steps for AllReduce,
    /// AllGather and ReduceScatter, pairwise rounds for All-to-All, one message for
    /// Send/Recv, a binomial tree for Broadcast): `t = steps·α + factor·S/B`.
    pub fn latency_steps(self, p: u64) -> f64 {
        let pf = p.max(1) as f64;
        match self {
            Collective::AllReduce => 2.0 * (pf - 1.0),
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => pf - 1.0,
            Collective::SendRecv => 1.0,
            Collective::Broadcast => pf.log2().ceil().max(1.0),
        }
    }

    /// The factor on `S/B` in the same model (S as the plan's `bytes`, nccl-tests' S).
    pub fn bandwidth_factor(self, p: u64) -> f64 {
        let pf = p.max(1) as f64;
        match self {
            Collective::AllReduce => 2.0 * (pf - 1.0) / pf,
            Collective::AllGather | Collective::ReduceScatter => (pf - 1.0) / pf,
            // pairwise exchange: (p−1)α + S·β (reference §2.2)
            Collective::AllToAll | Collective::SendRecv | Collective::Broadcast => 1.0,
        }
    }

    /// nccl-tests' bus-bandwidth factor (busbw = algbw × factor, reference §2.1). Equal to
    /// [`Collective::bandwidth_factor`] except for All-to-All, where nccl-tests uses (p−1)/p.
    pub fn busbw_factor(self, p: u64) -> f64 {
        let pf = p.max(1) as f64;
        match self {
            Collective::AllToAll => (pf - 1.0) / pf,
            c => c.bandwidth_factor(p),
        }
    }

    /// `steps·α + factor·S/B` on a link with latency `alpha` (s) and bandwidth `b` (B/s).
    pub fn alpha_beta(self, bytes: f64, p: u64, alpha: f64, b: f64) -> f64 {
        self.latency_steps(p) * alpha + self.bandwidth_factor(p) * bytes / b
    }
}

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
            let (node, local) = super::comm::node_of(s, r);
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

/// NCCL's base latency per collective call (LL protocol, `baseLatencies` in
/// NVIDIA/nccl src/graph/tuning.cc, reference §2.3); the per-hop α comes from the link.
pub const NCCL_BASE_LATENCY: f64 = 6.6e-6;
/// NVLS (NVLink SHARP) fixed latency: NCCL's NVLS Simple hwLatency, 25 µs (reference §2.3).
pub const NVLS_LATENCY: f64 = 25e-6;

/// α-β time of one collective over `p` ranks. `bytes` is the per-rank buffer (AllReduce),
/// the total gathered/scattered array (AllGather, ReduceScatter), the bytes one rank
/// sends to all others (AllToAll) or the message (SendRecv). AllReduce takes the fastest
/// of the algorithms NCCL would consider on that link: ring, tree, and NVLS on NVSwitch.
pub fn collective_time(kind: Collective, bytes: f64, p: u64, link: &Placement) -> f64 {
    if p <= 1 || bytes <= 0.0 {
        return 0.0;
    }
    let pf = p as f64;
    let a = link.latency;
    let b = link.bandwidth.max(1.0);
    NCCL_BASE_LATENCY
        + match kind {
            Collective::AllReduce => {
                // ring: 2(p−1)α + 2(p−1)/p · S/B (reference §2.2)
                let ring = kind.alpha_beta(bytes, p, a, b);
                // double binary tree: 2·log2(p)·α + 2·S/B (NCCL tree algBw = busBw / 2)
                let tree = 2.0 * pf.log2().ceil() * a + 2.0 * bytes / b;
                // NVLS: each rank sends S into the switch once and receives the reduction once
                let nvls = if link.link_type == LinkType::Nvswitch && p > 2 {
                    NVLS_LATENCY + bytes / b
                } else {
                    f64::INFINITY
                };
                ring.min(tree).min(nvls)
            }
            // ring AllGather/ReduceScatter, pairwise All-to-All, Send/Recv, binomial Broadcast
            _ => kind.alpha_beta(bytes, p, a, b),
        }
}

/// vLLM's custom all-reduce (`custom_all_reduce.py`): one-shot and two-shot kernels over
/// NVLink peer memory, used instead of NCCL for 2, 4, 6 or 8 GPUs of one fully
/// NVLink-connected node and messages up to 8 MiB. Its fixed latency, per architecture, is
/// the median of the kernel tables' CUDA-graph runs at ≤ 8 KiB
/// (../shared/calibration/kernels/*/allreduce.csv.gz: H100 and H200 for Hopper, B200 for
/// Blackwell); other architectures take Hopper's. `calibration/tests/calibration.rs`
/// re-derives them and bounds the residual.
pub const CUSTOM_ALL_REDUCE_LATENCY_HOPPER: f64 = 4.569e-6;
pub const CUSTOM_ALL_REDUCE_LATENCY_BLACKWELL: f64 = 7.034e-6;
pub const CUSTOM_ALL_REDUCE_MAX_BYTES: f64 = 8.0 * 1024.0 * 1024.0;

/// The custom all-reduce's fixed latency on a GPU architecture.
pub fn custom_all_reduce_latency(architecture: Option<&str>) -> f64 {
    match KernelFamily::of(architecture) {
        KernelFamily::Blackwell => CUSTOM_ALL_REDUCE_LATENCY_BLACKWELL,
        KernelFamily::Hopper => CUSTOM_ALL_REDUCE_LATENCY_HOPPER,
    }
}

/// A transfer measured inside one NVLink node: a fixed latency, then the bytes on the
/// wire at a share of the placement's bandwidth (the link's × [`LINK_EFFICIENCY`]). Its
/// two constants are fitted on the kernel tables (`dic_calibration::kernels`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkFit {
    pub latency: f64,
    pub efficiency: f64,
}

impl LinkFit {
    pub fn time(&self, wire_bytes: f64, bandwidth: f64) -> f64 {
        self.latency + wire_bytes / (bandwidth.max(1.0) * self.efficiency)
    }
}

/// NCCL's all-reduce inside one NVLink node as vLLM calls it (pynccl, above the custom
/// all-reduce's 8 MiB): `latency + 2(p−1)/p · S / (B · efficiency)`. Fitted per
/// architecture on the kernel tables' messages of 8 MiB to 1 GiB on 2, 4 and 8 GPUs
/// (../shared/calibration/kernels/*/allreduce.csv.gz: H100 and H200 for Hopper, B200 for
/// Blackwell; the calibration crate's tests re-run the fit). The measured bus bandwidth
/// is well below NVLS's ideal (S/B): 0.58 ms for 128 MiB on 8 H100s, 0.44 ms on 8 B200s.
pub const NCCL_NVLINK_ALL_REDUCE_HOPPER: LinkFit = LinkFit {
    latency: 30e-6,
    efficiency: 0.98,
};
pub const NCCL_NVLINK_ALL_REDUCE_BLACKWELL: LinkFit = LinkFit {
    latency: 30e-6,
    efficiency: 0.86,
};

/// The NVLink all-reduce constants of a GPU architecture (Hopper's for those without
/// tables).
pub fn nccl_nvlink_all_reduce(architecture: Option<&str>) -> LinkFit {
    match KernelFamily::of(architecture) {
        KernelFamily::Blackwell => NCCL_NVLINK_ALL_REDUCE_BLACKWELL,
        KernelFamily::Hopper => NCCL_NVLINK_ALL_REDUCE_HOPPER,
    }
}

/// The all-reduce's bytes on the wire per rank: the ring's `2(p−1)/p · S`.
pub fn all_reduce_wire_bytes(bytes: f64, p: u64) -> f64 {
    let pf = p.max(1) as f64;
    2.0 * (pf - 1.0) / pf * bytes
}

/// DeepEP's kernels as vLLM's `deepep_low_latency` and `deepep_high_throughput` backends
/// run them inside one NVLink node: dispatch and combine, each a [`LinkFit`] over the
/// bytes a rank sends (its tokens × the distinct remote ranks of their experts × hidden ×
/// 2 B), fitted per architecture on the kernel tables
/// (../shared/calibration/kernels/*/moe_a2a.csv.gz, EP 8 on one node; median |error|
/// 8–14%). Their fixed costs dominate a decode step's exchange: about 50 µs per
/// low-latency dispatch or combine, 80–260 µs per high-throughput one.
pub const DEEPEP_FITS: [(KernelFamily, &str, [LinkFit; 2]); 4] = [
    (
        KernelFamily::Hopper,
        "deepep_low_latency",
        [
            LinkFit {
                latency: 52e-6,
                efficiency: 0.35,
            },
            LinkFit {
                latency: 48e-6,
                efficiency: 0.44,
            },
        ],
    ),
    (
        KernelFamily::Hopper,
        "deepep_high_throughput",
        [
            LinkFit {
                latency: 244e-6,
                efficiency: 0.67,
            },
            LinkFit {
                latency: 80e-6,
                efficiency: 0.49,
            },
        ],
    ),
    (
        KernelFamily::Blackwell,
        "deepep_low_latency",
        [
            LinkFit {
                latency: 52e-6,
                efficiency: 0.23,
            },
            LinkFit {
                latency: 60e-6,
                efficiency: 0.8,
            },
        ],
    ),
    (
        KernelFamily::Blackwell,
        "deepep_high_throughput",
        [
            LinkFit {
                latency: 262e-6,
                efficiency: 0.25,
            },
            LinkFit {
                latency: 94e-6,
                efficiency: 0.16,
            },
        ],
    ),
];

/// The fitted dispatch and combine of a DeepEP backend on an architecture (Hopper's for
/// architectures without tables); `None` for other backends.
pub fn deepep_fit(architecture: Option<&str>, backend: &str) -> Option<[LinkFit; 2]> {
    let family = KernelFamily::of(architecture);
    DEEPEP_FITS
        .iter()
        .find(|(f, b, _)| *f == family && *b == backend)
        .map(|e| e.2)
}

/// A TP all-reduce as vLLM runs it: its custom all-reduce where that applies (and is
/// faster), NCCL otherwise (inside one NVLink node as measured, [`nccl_nvlink_all_reduce`]).
/// The NCCL plan keeps [`collective_time`]: `dic run` replays with NCCL.
pub fn vllm_all_reduce_time(
    bytes: f64,
    p: u64,
    link: &Placement,
    architecture: Option<&str>,
) -> f64 {
    if p <= 1 || bytes <= 0.0 {
        return 0.0;
    }
    let nccl = if link.within_one_nvlink_node() {
        let wire = if nvls_all_reduce(link, p, bytes, architecture) {
            bytes
        } else {
            all_reduce_wire_bytes(bytes, p)
        };
        nccl_nvlink_all_reduce(architecture).time(wire, link.bandwidth)
    } else {
        collective_time(Collective::AllReduce, bytes, p, link)
    };
    let custom = matches!(p, 2 | 4 | 6 | 8)
        && link.within_one_nvlink_node()
        && bytes <= CUSTOM_ALL_REDUCE_MAX_BYTES;
    if custom {
        let pf = p as f64;
        nccl.min(
            custom_all_reduce_latency(architecture)
                + 2.0 * (pf - 1.0) / pf * bytes / link.bandwidth.max(1.0),
        )
    } else {
        nccl
    }
}

/// Whether an all-reduce past the custom kernel's range runs on the NVSwitch's own
/// reduction (NVLS): each rank sends its `S` bytes into the switch once and receives the
/// sum once, where a ring moves `2(p−1)/p · S`. vLLM's symmetric-memory all-reduce
/// (`VLLM_ALLREDUCE_USE_SYMM_MEM`, on by default) runs `multimem_all_reduce_` for 4, 6
/// and 8 GPUs on Hopper and 6 and 8 on Blackwell, up to 32–128 MiB by GPU count
/// (`all_reduce_utils.SYMM_MEM_ALL_REDUCE_MAX_SIZES`), and NCCL above picks its NVLS
/// algorithm on an NVSwitch of more than two GPUs. The exception is 4 Blackwell GPUs up to
/// 32 MiB, where vLLM's symmetric memory runs its two-shot kernel, a ring's bytes. Both
/// are charged at the bandwidth fitted on the kernel tables' large messages
/// ([`nccl_nvlink_all_reduce`]).
pub fn nvls_all_reduce(link: &Placement, p: u64, bytes: f64, architecture: Option<&str>) -> bool {
    const TWO_SHOT_MAX_BYTES: f64 = 32.0 * 1024.0 * 1024.0;
    let blackwell_two_shot = KernelFamily::of(architecture) == KernelFamily::Blackwell
        && p == 4
        && bytes <= TWO_SHOT_MAX_BYTES;
    link.link_type == LinkType::Nvswitch && !link.spans_nodes && p >= 4 && !blackwell_two_shot
}

/// The placements a step's communication uses, computed once per scenario.
#[derive(Debug, Clone)]
pub struct CommContext {
    pub tp: Placement,
    /// The group a MoE layer's tokens move in across DP ranks ([`ep_groups`]), when an
    /// MoE model has DP > 1.
    pub ep: Option<Placement>,
    pub pp: Option<Placement>,
    /// Expected distinct ranks among a token's top-k experts spread evenly over the MoE
    /// group (fixed per scenario, used by every step's all-to-all).
    pub ep_distinct_ranks: f64,
}

impl CommContext {
    pub fn new(s: &Scenario) -> CommContext {
        let l = &s.layout;
        CommContext {
            tp: tp_placement(s),
            // The MoE group couples the DP ranks (vLLM flattens TP × DP for the experts);
            // with one DP rank it is the TP group, whose AllReduce already combines.
            ep: (s.model.experts > 0 && l.dp > 1).then(|| ep_placement(s)),
            pp: if l.pp > 1 { pp_placement(s) } else { None },
            ep_distinct_ranks: {
                let pf = (l.tp.max(1) * l.dp.max(1)) as f64;
                let k = s.model.experts_per_token.max(1) as f64;
                pf * (1.0 - (1.0 - 1.0 / pf).powf(k))
            },
        }
    }
}

/// Activations (and the tensors collectives move) travel in bf16: 2 bytes an element.
pub const ACTIVATION_DTYPE: DType = DType::Bf16;
pub const ACTIVATION_DTYPE_BYTES: f64 = ACTIVATION_DTYPE.size() as f64;

/// Element types a collective moves: the one vocabulary the IR, `nccl/plan.toml` and the
/// runtime share (serialized as `bf16`, `fp32`, …; the runtime also reads the aliases
/// [`DType::parse`] accepts).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
pub enum DType {
    #[serde(rename = "fp32")]
    F32,
    #[serde(rename = "bf16")]
    Bf16,
    #[serde(rename = "fp16")]
    F16,
    #[serde(rename = "fp8")]
    Fp8,
    #[serde(rename = "int32")]
    I32,
}

impl DType {
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s {
            "fp32" | "f32" | "float32" => DType::F32,
            "bf16" | "bfloat16" => DType::Bf16,
            "fp16" | "f16" | "float16" => DType::F16,
            "fp8" | "fp8_e4m3" | "e4m3" => DType::Fp8,
            "int32" | "i32" => DType::I32,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::Bf16 | DType::F16 => 2,
            DType::Fp8 => 1,
        }
    }

    /// The name in `nccl/plan.toml`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "fp32",
            DType::Bf16 => "bf16",
            DType::F16 => "fp16",
            DType::Fp8 => "fp8",
            DType::I32 => "int32",
        }
    }
}

/// The kind of a communicator group: the one vocabulary the analysis, the IR, the nccl
/// target and the runtime share (serialized as `tp`, `pp`, …).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum GroupKind {
    Tp,
    Pp,
    Ep,
    Dcp,
    Pcp,
    Dp,
}

impl GroupKind {
    pub const ALL: [GroupKind; 6] = [
        GroupKind::Tp,
        GroupKind::Pp,
        GroupKind::Ep,
        GroupKind::Dcp,
        GroupKind::Pcp,
        GroupKind::Dp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            GroupKind::Tp => "tp",
            GroupKind::Pp => "pp",
            GroupKind::Ep => "ep",
            GroupKind::Dcp => "dcp",
            GroupKind::Pcp => "pcp",
            GroupKind::Dp => "dp",
        }
    }

    pub fn parse(s: &str) -> Option<GroupKind> {
        GroupKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Whether the schedule runs collectives on groups of this kind (the `dp` group only
    /// lists each replica's first rank; it gets no communicator).
    pub fn has_traffic(self) -> bool {
        self != GroupKind::Dp
    }
}

impl std::fmt::Display for GroupKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One line of a step's communication: a collective on a group, how often, how big.
#[derive(Debug, Clone, Serialize)]
pub struct CommItem {
    pub group: GroupKind,
    pub collective: Collective,
    pub count: u64,
    pub bytes: f64,
    pub ranks: u64,
    pub link: std::sync::Arc<str>,
    /// Seconds for all `count` of them, as vLLM runs them.
    pub time: f64,
    /// Seconds for all of them with NCCL, what `dic run` replays: `time`, except where
    /// vLLM runs its own kernel (the custom all-reduce).
    pub nccl_time: f64,
    /// The α-β figures `nccl_time` came from (effective bytes/s, seconds) and the link's
    /// type, so `dic run` predicts the same call at another size.
    #[serde(skip)]
    pub fabric: LinkFigures,
}

/// A placement's figures for one collective: what [`collective_time`] reads of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkFigures {
    pub link_type: LinkType,
    /// Effective bytes/s per rank per direction.
    pub bandwidth: f64,
    /// Seconds per message (α).
    pub latency: f64,
}

impl LinkFigures {
    /// A placement with these figures, for [`collective_time`].
    pub fn placement(&self, size: u64) -> Placement {
        Placement {
            size,
            spans_nodes: false,
            within_scale_up_domain: true,
            link_name: std::sync::Arc::from(""),
            link_type: self.link_type,
            bandwidth: self.bandwidth,
            latency: self.latency,
        }
    }
}

impl CommItem {
    /// `count` NCCL calls of `collective` on `ranks` ranks placed at `at`.
    fn nccl(
        group: GroupKind,
        collective: Collective,
        count: u64,
        bytes: f64,
        ranks: u64,
        at: &Placement,
    ) -> CommItem {
        let time = count as f64 * collective_time(collective, bytes, ranks, at);
        CommItem {
            group,
            collective,
            count,
            bytes,
            ranks,
            link: at.link_name.clone(),
            time,
            nccl_time: time,
            fabric: LinkFigures {
                link_type: at.link_type,
                bandwidth: at.bandwidth,
                latency: at.latency,
            },
        }
    }
}

/// Whether the MoE layers exchange tokens through DeepEP's all-to-all
/// (`engine = vllm { all2all_backend = deepep_… }` with `ep`) rather than vLLM 0.33's
/// default all-gather and reduce-scatter.
pub fn uses_deepep(s: &Scenario) -> bool {
    s.layout.ep && s.engine.all2all_backend.as_deref().is_some_and(is_deepep)
}

/// A `deepep_*` value of `all2all_backend`.
pub fn is_deepep(backend: &str) -> bool {
    backend.starts_with("deepep")
}

/// The expert layers' traffic across DP ranks, as vLLM 0.33's `--all2all-backend` moves
/// it. With one DP rank there is none: the MoE group is the TP group, and the layer's TP
/// AllReduce combines the experts' outputs. With DP > 1, vLLM's default
/// (`allgather_reducescatter`, `AgRsAll2AllManager`) gathers every DP rank's tokens — the
/// hidden states with their top-k ids (int32) and weights (fp32) — to every rank of the
/// DP group and reduce-scatters the expert outputs back, with or without EP. DeepEP (a
/// `deepep_*` backend with EP) instead sends each rank's share of the replica's tokens
/// (`tokens / tp`) only to the distinct ranks that hold their top-k experts and back
/// (dispatch and combine, All-to-All).
pub fn moe_comm(s: &Scenario, cx: &CommContext, tokens: f64, moe_layers: u64) -> Vec<CommItem> {
    let (m, l) = (&s.model, &s.layout);
    let Some(group) = cx.ep.as_ref().filter(|_| moe_layers > 0 && l.dp > 1) else {
        return Vec::new();
    };
    let act = ACTIVATION_DTYPE_BYTES;
    let hidden = m.hidden as f64;
    if uses_deepep(s) {
        let p = l.tp.max(1) * l.dp;
        let pf = p as f64;
        let local = tokens / l.tp.max(1) as f64;
        // Expected distinct ranks among a token's k experts, spread evenly over p ranks.
        let distinct = cx.ep_distinct_ranks;
        let bytes = local * distinct * hidden * act * (pf - 1.0) / pf;
        // dispatch and combine
        let mut item = CommItem::nccl(
            GroupKind::Ep,
            Collective::AllToAll,
            2 * moe_layers,
            bytes,
            p,
            group,
        );
        let backend = s.engine.all2all_backend.as_deref().unwrap_or_default();
        if let Some([dispatch, combine]) =
            deepep_fit(s.topology.gpu.architecture.as_deref(), backend)
                .filter(|_| group.within_one_nvlink_node())
        {
            item.time = moe_layers as f64
                * (dispatch.time(bytes, group.bandwidth) + combine.time(bytes, group.bandwidth));
        }
        vec![item]
    } else {
        let gathered_tokens = tokens * l.dp as f64;
        let routing = m.experts_per_token.max(1) as f64 * (4.0 + 4.0);
        vec![
            CommItem::nccl(
                GroupKind::Ep,
                Collective::AllGather,
                moe_layers,
                gathered_tokens * (hidden * act + routing),
                l.dp,
                group,
            ),
            CommItem::nccl(
                GroupKind::Ep,
                Collective::ReduceScatter,
                moe_layers,
                gathered_tokens * hidden * act,
                l.dp,
                group,
            ),
        ]
    }
}

/// What one PP stage's layers hold, for counting collectives: each mixer and each FFN
/// ends in a TP AllReduce (a Nemotron-H block has one of the two, a transformer layer
/// both), each attention layer gathers over DCP/PCP, each MoE layer exchanges tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageBlocks {
    pub layers: u64,
    /// Layers with a mixer (attention, linear attention, Mamba).
    pub mixers: u64,
    /// Layers with an FFN (dense or MoE).
    pub ffns: u64,
    /// Layers with attention over a KV cache (full, sliding, compressed).
    pub attention: u64,
    pub moe: u64,
}

impl StageBlocks {
    pub fn of(m: &crate::program::Model, layers: std::ops::Range<u64>) -> StageBlocks {
        use crate::program::{Ffn, Mixer};
        let mut b = StageBlocks::default();
        for l in layers {
            let k = m.layer(l);
            b.layers += 1;
            b.mixers += u64::from(k.mixer != Mixer::None);
            b.ffns += u64::from(k.ffn != Ffn::None);
            b.attention += u64::from(!matches!(
                k.mixer,
                Mixer::None | Mixer::Linear | Mixer::Mamba
            ));
            b.moe += u64::from(k.ffn == Ffn::Moe);
        }
        b
    }
}

/// Communication of one forward pass of `tokens` tokens through one PP stage holding
/// `blocks`, plus the hand-off to the next stage.
pub fn step_comm(
    s: &Scenario,
    cx: &CommContext,
    tokens: f64,
    blocks: &StageBlocks,
    last_stage: bool,
) -> Vec<CommItem> {
    let layers = blocks.attention;
    let m = &s.model;
    let l = &s.layout;
    let act = ACTIVATION_DTYPE_BYTES;
    let mut items = Vec::new();
    if l.tp > 1 {
        let tp = &cx.tp;
        let bytes = tokens * m.hidden as f64 * act;
        // Megatron TP: attention out-projection and MLP down-projection end in an AllReduce.
        let count = blocks.mixers + blocks.ffns;
        let mut item = CommItem::nccl(GroupKind::Tp, Collective::AllReduce, count, bytes, l.tp, tp);
        item.time = count as f64
            * vllm_all_reduce_time(bytes, l.tp, tp, s.topology.gpu.architecture.as_deref());
        items.push(item);
    }
    items.extend(moe_comm(s, cx, tokens, blocks.moe));
    if l.dcp > 1 {
        // Decode context parallelism: each rank attends over its shard of the KV cache;
        // partial outputs and log-sum-exps are gathered over the DCP group every layer.
        let tp = &cx.tp;
        let bytes = tokens * m.hidden as f64 * act / l.tp.max(1) as f64 * l.dcp as f64;
        items.push(CommItem::nccl(
            GroupKind::Dcp,
            Collective::AllGather,
            layers,
            bytes,
            l.dcp,
            tp,
        ));
    }
    if l.pcp > 1 {
        // Prefill context parallelism: keys and values of the step's tokens circulate
        // around the PCP ranks every layer (ring attention).
        let tp = &cx.tp;
        let kv = (m.kv_heads / l.tp.max(1)).max(1) as f64 * m.head_dim as f64;
        let bytes = tokens * 2.0 * kv * act;
        items.push(CommItem::nccl(
            GroupKind::Pcp,
            Collective::AllGather,
            layers,
            bytes,
            l.pcp,
            tp,
        ));
    }
    if l.pp > 1 && !last_stage {
        if let Some(pp) = &cx.pp {
            // hidden_states + residual (vLLM IntermediateTensors)
            let bytes = 2.0 * tokens * m.hidden as f64 * act / l.tp.max(1) as f64;
            items.push(CommItem::nccl(
                GroupKind::Pp,
                Collective::SendRecv,
                1,
                bytes,
                2,
                pp,
            ));
        }
    }
    items
}
