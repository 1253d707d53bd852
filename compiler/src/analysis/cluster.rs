//! The cluster's accounting: what each deployment (or pool of a disaggregated one) asks
//! of its cluster, and where [`allocation::allocate`] places it, cluster by cluster in
//! program order. The scenarios read it for the written layouts ([`super::bridge`]); the
//! driver places every decided layout with [`place_deployments`], which also says what
//! does not fit (E0408) or pins a group the cluster lacks (E0409).

use super::allocation;
use crate::diagnostics::{Code, Diagnostic};
use crate::program::{
    Body, Def, DefId, Deploy, Layout, LayoutSpec, Pool, PoolLayouts, Program, Value,
};
use std::collections::HashSet;

/// What the cluster's accounting places: a deployment, or one pool of a disaggregated
/// one.
pub type Unit = (DefId, Option<Pool>);

/// The group a pool is pinned to: its own `…_node_group`, else the deployment's.
pub fn pool_pin(p: &Program, d: &Deploy, pl: &PoolLayouts, pool: Pool) -> Option<usize> {
    match pl.group(pool) {
        Some(node) => p
            .cluster(d.cluster?)?
            .groups
            .iter()
            .position(|g| g.node == node),
        None => pinned_group(p, d),
    }
}

/// What one pool of a disaggregated deployment asks of its cluster: its replicas (`l`'s
/// `dp`), each a server of its own (`<deployment>-prefill`, `<deployment>-decode`),
/// pinned to `group` when set (`usize::MAX`: a pin the cluster lacks, which places
/// nothing).
pub fn pool_demand(
    def: &Def,
    d: &Deploy,
    l: Layout,
    pool: Pool,
    group: Option<usize>,
) -> allocation::Demand {
    allocation::Demand {
        name: format!("{}-{}", def.name, pool.name()),
        replica_gpus: l.replica_gpus(),
        replicas: l.dp.max(1),
        reserved: 0,
        whole: false,
        group,
        port: d.engine.port(),
    }
}

/// The group a written pool is pinned to, as [`pool_demand`] takes it.
pub fn written_pool_group(p: &Program, d: &Deploy, pl: &PoolLayouts, pool: Pool) -> Option<usize> {
    let pinned = pl.group(pool).is_some() || d.node_group.is_some();
    pinned.then(|| pool_pin(p, d, pl, pool).unwrap_or(usize::MAX))
}

/// One cluster's accounting: its node groups, and each deployment (or pool) on it with
/// its demand and placement, in the order given (program order).
#[derive(Debug, Clone)]
pub struct ClusterAccount {
    pub cluster: DefId,
    pub groups: Vec<allocation::GroupCapacity>,
    pub members: Vec<(Unit, allocation::Demand, allocation::Placement)>,
}

/// Places the deployments `members` (by their deployment's id, in program order) cluster
/// by cluster: the one accounting the scenarios (written layouts) and the driver (every
/// decided layout) both read.
pub fn account_clusters(
    p: &Program,
    members: &[(Unit, allocation::Demand)],
) -> Vec<ClusterAccount> {
    let cluster_of = |id: DefId| match p.def(id).map(|d| &d.body) {
        Some(Body::Deploy(d)) => d.cluster,
        _ => None,
    };
    let mut clusters: Vec<DefId> = members
        .iter()
        .filter_map(|((id, _), _)| cluster_of(*id))
        .collect();
    clusters.sort();
    clusters.dedup();
    clusters
        .into_iter()
        .filter_map(|c| {
            let groups = group_capacities(p, c)?;
            let mine: Vec<&(Unit, allocation::Demand)> = members
                .iter()
                .filter(|((id, _), _)| cluster_of(*id) == Some(c))
                .collect();
            let demands: Vec<allocation::Demand> = mine.iter().map(|(_, d)| d.clone()).collect();
            let placements = allocation::allocate(&groups, &demands);
            Some(ClusterAccount {
                cluster: c,
                groups,
                members: mine
                    .into_iter()
                    .zip(placements)
                    .map(|((id, demand), placement)| (*id, demand.clone(), placement))
                    .collect(),
            })
        })
        .collect()
}

/// The node groups of cluster `c`, as the allocator sees them.
pub fn group_capacities(p: &Program, c: DefId) -> Option<Vec<allocation::GroupCapacity>> {
    let cluster = p.cluster(c)?;
    cluster
        .groups
        .iter()
        .map(|g| {
            Some(allocation::GroupCapacity {
                node: p.def(g.node)?.name.clone(),
                nodes: g.count,
                gpus_per_node: p.node(g.node)?.gpu_count,
            })
        })
        .collect()
}

/// The index of the group a deployment pins (`node_group`), when its cluster has it.
pub fn pinned_group(p: &Program, d: &Deploy) -> Option<usize> {
    let node = d.node_group?;
    p.cluster(d.cluster?)?
        .groups
        .iter()
        .position(|g| g.node == node)
}

/// What a deployment with layout `l` asks of its cluster, its autoscaler's `max`
/// included.
pub fn demand_of(p: &Program, def: &Def, d: &Deploy, l: &Layout) -> allocation::Demand {
    let moe = d.model.and_then(|m| p.model(m)).is_some_and(|m| m.is_moe());
    let whole = l.ep && moe && l.dp > 1;
    // An autoscaler scales launch units (`ir::DeploymentPlan::groups`), dense or wide EP.
    let launch_units = if whole { 1 } else { l.dp.max(1) };
    allocation::Demand {
        name: def.name.clone(),
        replica_gpus: if whole { l.gpus() } else { l.replica_gpus() },
        replicas: l.dp.max(1),
        reserved: d
            .autoscale
            .as_ref()
            .map_or(0, |a| a.max.saturating_sub(launch_units)),
        whole,
        // A pin to a node the cluster lacks places nothing (E0409 says why).
        group: d
            .node_group
            .map(|_| pinned_group(p, d).unwrap_or(usize::MAX)),
        port: d.engine.port(),
    }
}

/// Where the accounting put every decided deployment part, as [`place_deployments`]
/// returns it.
#[derive(Debug, Default)]
pub struct Placements {
    /// Each part's slots (one per replica, in replica order), in the order given.
    pub slots: Vec<Vec<allocation::Slot>>,
    /// The deployments left unplaced (not lowered).
    pub unplaced: HashSet<DefId>,
    /// E0408 for what does not fit, E0409 for a `node_group` its cluster lacks.
    pub diagnostics: Vec<Diagnostic>,
}

/// A decided deployment part as the accounting reads it: a deployment, its part on one
/// node group, or one pool ([`super::DeploymentScenario::to_place`] makes one).
#[derive(Debug, Clone, Copy)]
pub struct DecidedPart {
    pub unit: Unit,
    pub layout: Layout,
    /// The node group it runs on, and whether it is its deployment's share of a
    /// placement across groups (it gets only that group's slots).
    pub group: usize,
    pub shared: bool,
    /// Its own checks passed: a layout that fails is not launched and takes no GPUs.
    pub launched: bool,
}

/// Places every decided deployment part of each cluster
/// ([`account_clusters`], in the order given: program order), gives each part its slots,
/// and reports what does not fit: E0409 for a `node_group` its cluster lacks, E0408
/// naming the deployments that share the group and the numbers.
pub fn place_deployments(p: &Program, parts: &[DecidedPart]) -> Placements {
    let mut out = Placements {
        slots: vec![Vec::new(); parts.len()],
        ..Placements::default()
    };
    let demands = decided_demands(p, parts, &mut out.diagnostics);
    for account in account_clusters(p, &demands) {
        for (i, (unit, _, placement)) in account.members.iter().enumerate() {
            if placement.unplaced > 0 {
                out.unplaced.insert(unit.0);
                // A pin to a group the cluster lacks already has its own error.
                if placement.slots.is_empty() && account.members[i].1.group == Some(usize::MAX) {
                    continue;
                }
                if let Some((def, _)) = deploy_of(p, unit.0) {
                    out.diagnostics.push(oversubscribed(p, def, &account, i));
                }
                continue;
            }
            for (k, part) in parts.iter().enumerate() {
                if part.unit != *unit {
                    continue;
                }
                out.slots[k] = placement
                    .slots
                    .iter()
                    .filter(|s| !part.shared || s.group == part.group)
                    .copied()
                    .collect();
            }
        }
    }
    out
}

fn deploy_of(p: &Program, id: DefId) -> Option<(&Def, &Deploy)> {
    match p.def(id).map(|d| (d, &d.body)) {
        Some((def, Body::Deploy(d))) => Some((def, d.as_ref())),
        _ => None,
    }
}

/// What each unit of the decided parts asks of its cluster: each deployment (each pool of
/// a disaggregated one) once, its parts' replicas summed; a layout that fails its own
/// checks is not launched and takes no GPUs. Pushes E0409 for a pin the cluster lacks.
fn decided_demands(
    p: &Program,
    parts: &[DecidedPart],
    diags: &mut Vec<Diagnostic>,
) -> Vec<(Unit, allocation::Demand)> {
    let mut demands: Vec<(Unit, allocation::Demand)> = Vec::new();
    for x in parts.iter().filter(|x| x.launched) {
        let unit = x.unit;
        if demands.iter().any(|(seen, _)| *seen == unit) {
            continue;
        }
        let Some((def, d)) = deploy_of(p, unit.0) else {
            continue;
        };
        let demand = match (&d.layout, unit.1) {
            (LayoutSpec::Disaggregated(pl), Some(pool)) => {
                if pl.group(pool).is_some() && pool_pin(p, d, pl, pool).is_none() {
                    diags.push(node_group_not_in_cluster(p, def, d, pool_pin_field(pool)));
                }
                let group = written_pool_group(p, d, pl, pool);
                pool_demand(def, d, pl.layout(pool), pool, group)
            }
            // The planner's split for `layout = auto`: on the deployment's pin, if any.
            (_, Some(pool)) => {
                let group = d
                    .node_group
                    .map(|_| pinned_group(p, d).unwrap_or(usize::MAX));
                pool_demand(def, d, x.layout, pool, group)
            }
            _ => {
                let mut layout = x.layout;
                layout.dp = parts
                    .iter()
                    .filter(|y| y.unit == unit)
                    .map(|y| y.layout.dp.max(1))
                    .sum();
                demand_of(p, def, d, &layout)
            }
        };
        let first_unit = !demands.iter().any(|((id, _), _)| *id == unit.0);
        if first_unit && d.node_group.is_some() && pinned_group(p, d).is_none() {
            diags.push(node_group_not_in_cluster(p, def, d, "node_group"));
        }
        demands.push((unit, demand));
    }
    demands
}

/// The field that pins `pool` to a node group.
fn pool_pin_field(pool: Pool) -> &'static str {
    match pool {
        Pool::Prefill => "prefill_node_group",
        Pool::Decode => "decode_node_group",
    }
}

/// E0409: `node_group` names a node that is not one of the cluster's groups.
fn node_group_not_in_cluster(p: &Program, def: &Def, d: &Deploy, field: &str) -> Diagnostic {
    let at = match (field, def.fields.get("layout").map(|f| &f.value)) {
        ("node_group", _) => def.fields.get("node_group").map(|f| f.at),
        (_, Some(Value::Layout(_))) => def.fields.get("layout").map(|f| f.at),
        _ => None,
    }
    .unwrap_or(def.location());
    let cluster = d.cluster.and_then(|c| p.def(c));
    let groups = d
        .cluster
        .and_then(|c| group_capacities(p, c))
        .unwrap_or_default();
    Diagnostic::new(
        Code::NodeGroupNotInCluster,
        format!(
            "deploy `{}`: cluster `{}` has no group of this node",
            def.name,
            cluster.map(|c| c.name.as_str()).unwrap_or_default()
        ),
    )
    .primary(
        at.file,
        at.span,
        match field {
            "node_group" => "not one of the cluster's node groups".to_string(),
            _ => format!("`{field}` is not one of the cluster's node groups"),
        },
    )
    .help(format!(
        "the cluster's groups are {}",
        groups
            .iter()
            .map(|g| format!("`{}` ({} × {} GPUs)", g.node, g.nodes, g.gpus_per_node))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// E0408 for the `i`-th deployment of a cluster's account: what it asks (its
/// autoscaler's reserve included), what the deployments placed before it took, and what
/// the cluster has.
fn oversubscribed(p: &Program, def: &Def, account: &ClusterAccount, i: usize) -> Diagnostic {
    let cluster_name = p
        .def(account.cluster)
        .map(|x| x.name.clone())
        .unwrap_or_default();
    let groups = &account.groups;
    let (_, d, placement) = &account.members[i];
    let want = d.replica_gpus * (d.launch_units() + d.reserved);
    let before: Vec<String> = account.members[..i]
        .iter()
        .filter(|(_, _, pl)| !pl.slots.is_empty())
        .map(|(_, x, pl)| {
            let gpus = x.replica_gpus * (pl.slots.len() + pl.reserved.len()) as u64;
            format!("`{}` takes {gpus}", x.name)
        })
        .collect();
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let capacity: Vec<String> = groups
        .iter()
        .map(|g| {
            format!(
                "{} × {} ({} GPUs)",
                g.nodes,
                g.node,
                g.nodes * g.gpus_per_node
            )
        })
        .collect();
    let (unit, missing) = if d.whole && d.reserved == 0 {
        (
            format!(
                "one data-parallel group of {} GPUs on whole nodes",
                d.replica_gpus
            ),
            "it does not fit".to_string(),
        )
    } else if d.whole {
        let n = placement.unplaced.min(d.reserved);
        (
            format!(
                "{} wide-EP engines of {} GPUs",
                1 + d.reserved,
                d.replica_gpus
            ),
            if placement.slots.is_empty() {
                "it does not fit".to_string()
            } else {
                format!("{} not fit", plural(n, "group does", "groups do"))
            },
        )
    } else {
        let n = placement.unplaced;
        (
            format!(
                "{} × {} GPUs",
                plural(d.replicas + d.reserved, "replica", "replicas"),
                d.replica_gpus
            ),
            format!(
                "{} {} not fit",
                plural(n, "replica", "replicas"),
                if n == 1 { "does" } else { "do" }
            ),
        )
    };
    let reserved = if d.reserved > 0 {
        ", its autoscaler's `max`"
    } else {
        ""
    };
    let mut message = format!(
        "deploy `{}`: cluster `{cluster_name}` has no room for it: it needs {want} GPUs ({unit}{reserved}) and {missing}",
        def.name,
    );
    if !before.is_empty() {
        message.push_str(&format!(" ({} GPUs first)", before.join(", ")));
    }
    let at = def
        .fields
        .get("cluster")
        .map(|f| f.at)
        .unwrap_or(def.location());
    Diagnostic::new(Code::ClusterOversubscribed, message)
        .primary(at.file, at.span, format!("{} in all", capacity.join(" + ")))
        .help("deployments sharing a cluster are placed in file order, each replica on GPUs no other uses (a replica inside one node group): add nodes, shrink a layout, or give a deployment a cluster of its own".to_string())
}
