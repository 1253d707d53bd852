//! Cluster accounting: the GPUs and API ports of every node of a cluster, assigned to the
//! replicas of all the deployments that share it, in program order.
//!
//! A replica that fits a node takes contiguous free GPUs of one node (first fit, nodes in
//! cluster order); a larger one takes whole free nodes of one node group; a wide-EP
//! deployment (vLLM data parallelism) is one unit of whole nodes. A replica never spans
//! node groups — DP replicas may (each group hosts whole replicas). A deployment pinned
//! to a group (`node_group`) is placed only there. Each vLLM server gets the lowest port
//! at or above its deployment's that no other server on the node has. What does not fit
//! is counted, so the checker can say which deployments oversubscribe which group, by how
//! much. Pure arithmetic; the scenarios (one per group a deployment lands on), the driver
//! (E0408) and lowering (GPU ids, nodes and ports in every target) read the same result.

/// One node group of a cluster, as the allocator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupCapacity {
    /// The node definition's name (`dgx_h100`).
    pub node: String,
    pub nodes: u64,
    pub gpus_per_node: u64,
}

/// What one deployment asks of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Demand {
    pub name: String,
    /// GPUs of one replica (tp × pp × pcp), or of the whole deployment when `whole`.
    pub replica_gpus: u64,
    pub replicas: u64,
    /// Launch units an autoscaler may add (`max` − [`Demand::launch_units`]), each of
    /// `replica_gpus`: their room is reserved after the deployment's own, so scaling up
    /// never lands on another deployment's GPUs.
    pub reserved: u64,
    /// All replicas form one unit (wide EP over vLLM data parallelism).
    pub whole: bool,
    /// The group the deployment is pinned to.
    pub group: Option<usize>,
    /// The deployment's API port (its servers take this or the next free one).
    pub port: u64,
}

impl Demand {
    /// The units placed for the deployment itself, each of `replica_gpus`: its replicas,
    /// or one whole unit. An autoscaler scales the same units (Kubernetes replicas).
    pub fn launch_units(&self) -> u64 {
        if self.whole {
            1
        } else {
            self.replicas
        }
    }
}

/// Where one replica (or a whole unit) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub group: usize,
    /// First node, numbered within the group.
    pub node: u64,
    /// First GPU on that node.
    pub first_gpu: u64,
    /// Nodes spanned (1 for a replica that fits a node).
    pub nodes: u64,
    /// The API port of its server.
    pub port: u64,
}

/// One deployment's placement: a slot per replica placed, the room reserved for its
/// autoscaler, and how many of either did not fit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    pub slots: Vec<Slot>,
    pub reserved: Vec<Slot>,
    pub unplaced: u64,
}

impl Placement {
    /// Replicas placed on each group, in group order (empty groups left out).
    pub fn shares(&self) -> Vec<(usize, u64)> {
        let mut out: Vec<(usize, u64)> = Vec::new();
        for s in &self.slots {
            match out.iter_mut().find(|(g, _)| *g == s.group) {
                Some((_, n)) => *n += 1,
                None => out.push((s.group, 1)),
            }
        }
        out.sort_by_key(|&(g, _)| g);
        out
    }
}

/// Places every demand in order; see the module header.
pub fn allocate(groups: &[GroupCapacity], demands: &[Demand]) -> Vec<Placement> {
    // GPUs used on each node (contiguous from GPU 0) and the ports taken, per group.
    let mut used: Vec<Vec<u64>> = groups.iter().map(|g| vec![0; g.nodes as usize]).collect();
    let mut ports: Vec<Vec<Vec<u64>>> = groups
        .iter()
        .map(|g| vec![Vec::new(); g.nodes as usize])
        .collect();
    demands
        .iter()
        .map(|d| {
            let mut p = Placement::default();
            let units = d.launch_units() + d.reserved;
            for unit in 0..units {
                let allowed: Vec<usize> = match d.group {
                    Some(g) if g < groups.len() => vec![g],
                    Some(_) => Vec::new(),
                    None => (0..groups.len()).collect(),
                };
                let slot = allowed
                    .into_iter()
                    .find_map(|g| place(&groups[g], &mut used[g], g, d.replica_gpus.max(1)));
                match slot {
                    Some(mut s) => {
                        let taken = &mut ports[s.group][s.node as usize];
                        let mut port = d.port;
                        while taken.contains(&port) {
                            port += 1;
                        }
                        taken.push(port);
                        s.port = port;
                        if unit < d.launch_units() {
                            p.slots.push(s);
                        } else {
                            p.reserved.push(s);
                        }
                    }
                    None => p.unplaced += 1,
                }
            }
            // A whole unit that does not fit leaves every one of its ranks unplaced.
            if d.whole && p.slots.is_empty() {
                p.unplaced = d.replicas + p.unplaced.saturating_sub(1);
            }
            p
        })
        .collect()
}

/// First fit of `gpus` GPUs in one group: free GPUs on one node, or whole free nodes.
fn place(g: &GroupCapacity, used: &mut [u64], group: usize, gpus: u64) -> Option<Slot> {
    let per_node = g.gpus_per_node.max(1);
    if gpus <= per_node {
        let node = used
            .iter()
            .position(|&u| per_node - u.min(per_node) >= gpus)?;
        let first_gpu = used[node];
        used[node] += gpus;
        return Some(Slot {
            group,
            node: node as u64,
            first_gpu,
            nodes: 1,
            port: 0,
        });
    }
    let k = gpus.div_ceil(per_node) as usize;
    let start =
        (0..used.len().saturating_sub(k - 1)).find(|&n| used[n..n + k].iter().all(|&u| u == 0))?;
    for u in &mut used[start..start + k] {
        *u = per_node;
    }
    Some(Slot {
        group,
        node: start as u64,
        first_gpu: 0,
        nodes: k as u64,
        port: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(node: &str, nodes: u64, gpus: u64) -> GroupCapacity {
        GroupCapacity {
            node: node.into(),
            nodes,
            gpus_per_node: gpus,
        }
    }

    fn demand(name: &str, gpus: u64, replicas: u64) -> Demand {
        Demand {
            name: name.into(),
            replica_gpus: gpus,
            replicas,
            reserved: 0,
            whole: false,
            group: None,
            port: 8000,
        }
    }

    #[test]
    fn two_deployments_share_a_node_on_distinct_gpus_and_ports() {
        let g = [group("dgx_h100", 1, 8)];
        let p = allocate(&g, &[demand("a", 4, 1), demand("b", 4, 1)]);
        assert_eq!(p[0].slots[0].first_gpu, 0);
        assert_eq!(p[1].slots[0].first_gpu, 4);
        assert_eq!(p[0].slots[0].port, 8000);
        assert_eq!(p[1].slots[0].port, 8001);
        assert_eq!(p[1].unplaced, 0);
    }

    #[test]
    fn oversubscription_is_counted() {
        let g = [group("dgx_h100", 1, 8)];
        let p = allocate(&g, &[demand("a", 8, 1), demand("b", 4, 1)]);
        assert_eq!(p[1].unplaced, 1);
        assert!(p[1].slots.is_empty());
    }

    #[test]
    fn replicas_spread_over_groups_but_never_straddle_them() {
        let g = [group("dgx_a100", 1, 8), group("dgx_h100", 1, 8)];
        let p = allocate(&g, &[demand("a", 8, 2)]);
        assert_eq!(p[0].shares(), vec![(0, 1), (1, 1)]);
        // a 16-GPU replica needs two whole nodes of one group: there is none
        let p = allocate(&g, &[demand("big", 16, 1)]);
        assert_eq!(p[0].unplaced, 1);
    }

    #[test]
    fn a_pinned_deployment_stays_in_its_group() {
        let g = [group("dgx_a100", 1, 8), group("dgx_h100", 2, 8)];
        let mut d = demand("a", 8, 3);
        d.group = Some(1);
        let p = allocate(&g, &[d]);
        assert_eq!(p[0].shares(), vec![(1, 2)]);
        assert_eq!(p[0].unplaced, 1);
    }

    #[test]
    fn an_autoscalers_room_is_reserved_after_the_replicas() {
        let g = [group("dgx_h100", 1, 8)];
        let mut a = demand("a", 2, 1);
        a.reserved = 2;
        let p = allocate(&g, &[a, demand("b", 4, 1)]);
        assert_eq!(p[0].slots.len(), 1);
        assert_eq!(p[0].reserved.len(), 2);
        assert_eq!(p[0].shares(), vec![(0, 1)]);
        assert_eq!(p[1].unplaced, 1, "a's reserved GPUs are not b's");
    }

    #[test]
    fn a_whole_units_autoscaler_reserves_whole_copies() {
        let g = [group("dgx_h100", 1, 8)];
        let mut a = demand("a", 4, 4);
        a.whole = true;
        a.reserved = 1;
        let p = allocate(&g, &[a.clone(), demand("b", 4, 1)]);
        assert_eq!(p[0].slots.len(), 1);
        assert_eq!(p[0].reserved.len(), 1);
        assert_eq!(p[0].unplaced, 0);
        assert_eq!(p[1].unplaced, 1, "a's second engine's GPUs are not b's");
        a.reserved = 2;
        let p = allocate(&g, &[a]);
        assert_eq!(p[0].slots.len(), 1, "the engine itself is placed");
        assert_eq!(p[0].unplaced, 1, "one reserved copy does not fit");
    }

    #[test]
    fn multi_node_replicas_take_whole_free_nodes() {
        let g = [group("dgx_h100", 4, 8)];
        let p = allocate(&g, &[demand("small", 4, 1), demand("big", 16, 1)]);
        // node 0 is partly used, so the 2-node replica starts at node 1
        assert_eq!(p[1].slots[0].node, 1);
        assert_eq!(p[1].slots[0].nodes, 2);
    }
}
