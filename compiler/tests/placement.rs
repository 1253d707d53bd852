//! Group placement computed from each group's two ends and one period of replicas
//! (`comm::tp_placement`, `ep_placement`, `pp_placement`) agrees with walking every rank
//! of every group, on layouts whose replicas straddle nodes and NVL72 racks differently.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::comm::{self, ep_groups, node_of, pp_pairs, tp_groups};
use dic_compiler::analysis::estimate::{self, EstimateRequest};
use dic_compiler::analysis::{catalog, Scenario};
use dic_compiler::program::Layout;

fn scenario(gpu: &str, per_node: u64, nodes: u64, layout: Layout) -> Scenario {
    let req = EstimateRequest {
        gpu: gpu.into(),
        gpus_per_node: Some(per_node),
        nodes: Some(nodes),
        layout,
        max_model_len: Some(4096.0),
        ..EstimateRequest::default()
    };
    estimate::scenario("kimi_k2", catalog::model("kimi_k2").unwrap(), &req).unwrap()
}

/// (spans nodes, every group inside one scale-up domain) by walking every member.
fn walk(s: &Scenario, groups: &[Vec<u64>]) -> (bool, bool) {
    let (per_node, domain) = (s.topology.gpus_per_node, s.topology.scale_up_domain);
    let domain_of = |r: u64| {
        let (node, local) = node_of(s, r);
        if domain < per_node {
            node * per_node.div_ceil(domain) + local / domain
        } else {
            node / (domain / per_node).max(1)
        }
    };
    let spans = groups
        .iter()
        .any(|g| g.iter().any(|r| node_of(s, *r).0 != node_of(s, g[0]).0));
    let in_domain = s.topology.scale_up.is_some()
        && groups
            .iter()
            .all(|g| g.iter().all(|r| domain_of(*r) == domain_of(g[0])));
    (
        spans,
        in_domain || !spans && domain >= per_node && s.topology.scale_up.is_some(),
    )
}

#[test]
fn placement_from_group_ends_matches_every_rank() {
    let mut cases = 0;
    for (gpu, per_node, nodes, domain) in [
        ("gb200", 4, 36, None),
        ("h100_sxm", 8, 12, None),
        ("h100_nvl", 8, 2, Some(2)),
    ] {
        for tp in [1, 2, 4, 8, 16, 32] {
            for pp in [1, 2, 3] {
                for ep in [false, true] {
                    let replica = tp * pp;
                    let dp = (per_node * nodes / replica).max(1);
                    if replica * dp > per_node * nodes {
                        continue;
                    }
                    let mut s = scenario(
                        gpu,
                        per_node,
                        nodes,
                        Layout {
                            tp,
                            pp,
                            dp,
                            ep,
                            ..Layout::default()
                        },
                    );
                    if let Some(d) = domain {
                        s.topology.scale_up_domain = d;
                    }
                    let fast = comm::tp_placement(&s);
                    assert_eq!(
                        (fast.spans_nodes, fast.within_scale_up_domain),
                        walk(&s, &tp_groups(&s)),
                        "tp {gpu} tp {tp} pp {pp} dp {dp}"
                    );
                    if ep {
                        let fast = comm::ep_placement(&s);
                        assert_eq!(
                            (fast.spans_nodes, fast.within_scale_up_domain),
                            walk(&s, &ep_groups(&s)),
                            "ep {gpu} tp {tp} pp {pp} dp {dp}"
                        );
                    }
                    if pp > 1 {
                        let fast = comm::pp_placement(&s).unwrap();
                        assert_eq!(
                            (fast.spans_nodes, fast.within_scale_up_domain),
                            walk(&s, &pp_pairs(&s)),
                            "pp {gpu} tp {tp} pp {pp} dp {dp}"
                        );
                    }
                    cases += 1;
                }
            }
        }
    }
    assert!(cases > 40, "{cases}");
}
