//! Analysis: memory, communication and performance of a deployment, and the rules of
//! distributed serving.
//!
//! Input: a [`Scenario`] (built from a checked deployment by [`scenarios_from_program`],
//! or from `dic estimate`'s flags) and its SLO targets. Output: an [`Analysis`] — the
//! memory breakdown, the predicted operating point, SLO results and [`rules::Finding`]s.
//! Pure functions of their input, about one layout: whatever compares layouts (the
//! search, the advice to change one) is the planner's, which evaluates every candidate
//! through [`analyze_quick`].

pub mod allocation;
pub mod catalog;
pub mod comm;
pub mod deployable;
pub mod disagg;
pub mod estimate;
pub mod forecast;
pub mod fused_moe;
pub mod gemm;
pub mod kv_offload;
pub mod kv_pool;
pub mod lora;
pub mod memory;
pub mod perf;
pub mod rules;
pub mod scenario;
pub mod speculative;
pub mod weights;

use crate::diagnostics::{Code, Diagnostic, Severity};
use crate::program::{Body, DefId, FieldValue, LayoutSpec, Pool, PoolLayouts, Program, Value};
use crate::span::FileSpan;
use memory::MemoryReport;
use perf::{Prediction, FITTED};
use rules::{Anchor, Finding, SloResult, SloTarget};
pub use scenario::*;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    pub memory: MemoryReport,
    /// Absent when the deployment does not fit or breaks a structural rule.
    pub prediction: Option<Prediction>,
    pub slo: Vec<SloResult>,
    /// Requests in flight per replica beyond which a latency SLO breaks (closed loop);
    /// `None` without latency bounds or when even one request misses them.
    pub slo_break_concurrency: Option<f64>,
    pub findings: Vec<Finding>,
}

/// Runs every rule and model on one scenario.
pub fn analyze(s: &Scenario, slo: &[SloTarget]) -> Analysis {
    analyze_at(s, slo, true)
}

/// The planner's pass: the same models and rules, without the remedies and the SLO break
/// point (which evaluate further loads themselves).
pub fn analyze_quick(s: &Scenario, slo: &[SloTarget]) -> Analysis {
    analyze_at(s, slo, false)
}

fn analyze_at(s: &Scenario, slo: &[SloTarget], detailed: bool) -> Analysis {
    let mem = memory::memory(s);
    // The one verdict on whether the layout can be deployed (the planner's too).
    let mut findings = deployable::deployability_findings(s, &mem);
    let fits = !findings.iter().any(|f| f.severity == Severity::Error);
    let mut prediction = None;
    let mut slo_results = Vec::new();
    let mut slo_break = None;
    if fits {
        let p = perf::predict(s, &mem, &FITTED);
        let (perf_findings, results) = rules::perf_rules_at(s, &mem, &p, slo, detailed);
        findings.extend(perf_findings);
        if detailed {
            findings.extend(speculation_loss(s, &p));
        }
        if detailed {
            slo_break = slo_break_concurrency(s, &mem, slo, p.running_cap);
        }
        slo_results = results;
        prediction = Some(p);
    }
    Analysis {
        memory: mem,
        prediction,
        slo: slo_results,
        slo_break_concurrency: slo_break,
        findings,
    }
}

/// One pool of a disaggregated deployment: its own structural and memory rules (the
/// prefill pool needs activation room at its batch, the decode pool KV for its requests),
/// the pair's prediction (both pools and the transfer between them, [`disagg`]) and the
/// SLOs on it. The load's findings (SLOs, overload, W0407) are the decode pool's, so each
/// is said once; the prefill pool's analysis carries the same prediction and SLO results.
pub fn analyze_pool(s: &Scenario, part: &PoolPart, slo: &[SloTarget]) -> Analysis {
    // Each replica is an engine of its own (the launch starts them as such): the rules
    // are about one engine; the cluster's accounting places the replicas (E0408).
    let one = disagg::replica(s);
    let mut findings = rules::structural(&one);
    let mem = memory::memory(&one);
    findings.extend(rules::memory_rules(&one, &mem));
    let (ps, ds) = part.pools(s);
    if part.pool == Pool::Decode {
        findings.extend(pools_cannot_pair(ps, ds));
    }
    let fits = !findings.iter().any(|f| f.severity == Severity::Error);
    let pair = fits
        .then(|| disagg::predict_written(ps, ds, part.same_group, &FITTED))
        .flatten();
    let mut slo_results = Vec::new();
    let mut prediction = None;
    if let Some(pair) = pair {
        let p = pair.prediction.clone();
        let one = disagg::replica(ds);
        let (load_findings, results) =
            rules::perf_rules_at(&one, &memory::memory(&one), &p, slo, false);
        if part.pool == Pool::Decode {
            findings.extend(load_findings.into_iter().map(|mut f| {
                if f.help.is_none() && f.code == Code::SloInfeasible {
                    f.help = Some("change either pool's layout or replicas; `dic plan` lists the splits (and the aggregated layouts) that meet every bound".into());
                }
                f
            }));
            findings.extend(transfer_dominates(ps, ds, part, &pair));
        }
        slo_results = results;
        prediction = Some(p);
    }
    Analysis {
        memory: mem,
        prediction,
        slo: slo_results,
        slo_break_concurrency: None,
        findings,
    }
}

/// E0410: what vLLM's NIXL connector cannot transfer between the pools: a model with
/// recurrent (Mamba, linear-attention) layers between engines of different TP (vLLM's
/// compatibility matrix: heterogeneous TP for hybrid SSM models is work in progress).
fn pools_cannot_pair(ps: &Scenario, ds: &Scenario) -> Option<Finding> {
    let m = &ds.model;
    let recurrent = (0..m.layers).any(|l| m.layer(l).mixer.is_recurrent());
    if !recurrent || ps.layout.tp == ds.layout.tp {
        return None;
    }
    Some(Finding::new(
        Code::PoolsCannotPair,
        Anchor::Layout,
        format!(
            "the prefill pool runs tp {} and the decode pool tp {}, and the model keeps recurrent states (Mamba or linear attention): vLLM's NIXL connector does not transfer those between engines of different TP",
            ps.layout.tp, ds.layout.tp
        ),
        "heterogeneous TP for a hybrid model",
        Some(format!(
            "give both pools the same tp (e.g. `tp {}` on each), or serve the model aggregated",
            ps.layout.tp.max(ds.layout.tp)
        )),
    ))
}

/// W0407: moving a prompt's KV cache from the prefill pool to the decode pool takes
/// longer than computing it, so the fabric the placement crosses, not the GPUs, sets the
/// TTFT the split gains.
fn transfer_dominates(
    ps: &Scenario,
    ds: &Scenario,
    part: &PoolPart,
    pair: &disagg::DisaggPrediction,
) -> Option<Finding> {
    if pair.transfer <= pair.prefill || !pair.prediction.ttft.is_finite() {
        return None;
    }
    let (bandwidth, _, link) = disagg::transfer_link(ps, ds, part.same_group);
    Some(Finding::new(
        Code::TransferDominates,
        Anchor::Layout,
        format!(
            "moving a prompt's KV cache to the decode pool ({:.0} MB over `{link}`, {:.0} GB/s) takes {:.1} ms, more than its prefill ({:.1} ms): {:.0}% of the predicted TTFT of {:.0} ms",
            pair.transfer_bytes / 1e6,
            bandwidth / 1e9,
            pair.transfer * 1e3,
            pair.prefill * 1e3,
            pair.transfer / pair.prediction.ttft * 100.0,
            pair.prediction.ttft * 1e3
        ),
        "the KV transfer costs more than the prefill it moves",
        Some("put both pools on one NVLink node or domain (`prefill_node_group`, `decode_node_group`), use a faster fabric, or serve aggregated: `dic plan` compares both".into()),
    ))
}

/// W0405: speculative decoding that makes TPOT worse at the deployment's own load (the
/// verify step's extra query tokens and the drafting cost more than the accepted tokens
/// save: large batches, where the step is compute-bound, or low acceptance), with the
/// TPOT without it, predicted the same way.
fn speculation_loss(s: &Scenario, p: &Prediction) -> Option<Finding> {
    let sp = s.engine.speculative.as_ref()?;
    let mut plain = s.clone();
    plain.engine.speculative = None;
    let mem = memory::memory(&plain);
    let without = perf::predict(&plain, &mem, &FITTED);
    if p.tpot <= without.tpot * 1.02 {
        return None;
    }
    Some(Finding::new(
        Code::SpeculationSlower,
        Anchor::Engine("speculative"),
        format!(
            "with {} drafting {} tokens at {:.0}% acceptance ({:.2} tokens per step), TPOT is predicted at {:.1} ms against {:.1} ms without it, at {:.0} running requests per replica",
            sp.method,
            sp.tokens,
            sp.acceptance * 100.0,
            sp.tokens_per_step(),
            p.tpot * 1e3,
            without.tpot * 1e3,
            p.running
        ),
        "speculation costs more than it saves here",
        Some(if sp.tokens > 1 {
            format!("draft fewer tokens (`tokens = {}`), or remove `speculative`: at this batch the verify step is compute-bound and the rejected drafts are paid in full", (sp.tokens / 2).max(1))
        } else {
            "remove `speculative`: at this batch the verify step is compute-bound".to_string()
        }),
    ))
}

/// The largest number of requests in flight per replica at which every latency bound
/// still holds (closed loop at the workload's lengths), by doubling then bisection.
pub fn slo_break_concurrency(
    s: &Scenario,
    mem: &MemoryReport,
    slo: &[SloTarget],
    cap: f64,
) -> Option<f64> {
    use crate::program::SloMetric;
    let latency: Vec<&SloTarget> = slo
        .iter()
        .filter(|t| {
            matches!(
                t.metric,
                SloMetric::Ttft | SloMetric::Tpot | SloMetric::Itl | SloMetric::E2e
            )
        })
        .collect();
    if latency.is_empty() {
        return None;
    }
    let w = s
        .workload
        .unwrap_or(WorkloadSpec::new(1024.0, 256.0, Load::Concurrency(1), None));
    let holds = |n: f64| {
        let mut v = s.clone();
        v.layout.dp = 1;
        v.workload = Some(WorkloadSpec {
            load: Load::Concurrency(n.max(1.0) as u64),
            ..w
        });
        let p = perf::predict(&v, mem, &FITTED);
        latency
            .iter()
            .all(|t| rules::predicted(&p, t, w.output) <= t.value)
    };
    if !holds(1.0) {
        return None;
    }
    let cap = cap.max(1.0);
    let mut lo = 1.0;
    let mut hi = 2.0;
    while hi <= cap && holds(hi) {
        lo = hi;
        hi *= 2.0;
    }
    if hi > cap {
        return Some(if holds(cap) { cap } else { lo }.floor());
    }
    while hi - lo > 1.0 {
        let mid = ((lo + hi) / 2.0).floor();
        if holds(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

/// A deployment of the program, ready to analyse.
#[derive(Debug, Clone)]
pub struct DeploymentScenario {
    pub deploy: DefId,
    pub name: String,
    pub scenario: Scenario,
    pub slo: Vec<SloTarget>,
    /// Where each SLO bound was written, in `slo` order.
    pub slo_spans: Vec<FileSpan>,
    /// `layout = auto`: the scenario's layout is a placeholder for the planner to replace.
    pub auto_layout: bool,
    /// Weight and KV formats the planner may choose.
    pub allowed_weights: Vec<String>,
    pub allowed_kv_cache: Vec<String>,
    /// The node group of its cluster it runs on (index, and the node's name).
    pub group: usize,
    pub group_node: String,
    /// When the deployment's replicas span node groups: this scenario's part.
    pub share: Option<Share>,
    /// When the deployment is disaggregated: which pool this scenario is, and the other.
    pub pool: Option<PoolPart>,
}

/// One pool of a disaggregated deployment: which, and the other pool's scenario (the
/// prediction needs both).
#[derive(Debug, Clone)]
pub struct PoolPart {
    pub pool: Pool,
    pub peer: Scenario,
    /// Both pools run on one node group (a transfer may stay inside a node).
    pub same_group: bool,
}

impl PoolPart {
    /// (prefill, decode) scenarios, `own` being this part's.
    pub fn pools<'a>(&'a self, own: &'a Scenario) -> (&'a Scenario, &'a Scenario) {
        match self.pool {
            Pool::Prefill => (own, &self.peer),
            Pool::Decode => (&self.peer, own),
        }
    }

    /// The two pools occupy more than one node (the KV transfer crosses the fabric),
    /// `own` being this part's scenario.
    pub fn crosses_nodes(&self, own: &Scenario) -> bool {
        let (ps, ds) = self.pools(own);
        disagg::pair_cost(ps, ds, self.same_group).1 > 1
    }
}

/// What the cluster's accounting places: a deployment, or one pool of a disaggregated
/// one.
pub type Unit = (DefId, Option<Pool>);

/// The part of a deployment that runs on one node group when its replicas span several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    /// The group's node (`dgx_a100`).
    pub node: String,
    /// Replicas on this group, of the deployment's total.
    pub replicas: u64,
    pub of: u64,
}

fn link_spec(p: &Program, id: DefId) -> Option<LinkSpec> {
    let d = p.def(id)?;
    match &d.body {
        Body::Link(l) => Some(LinkSpec::from_link(&d.name, l)),
        _ => None,
    }
}

/// Builds the scenario of each complete deployment (`layout = auto` gets a placeholder
/// layout for the planner; deployments with errors in what they reference are skipped,
/// their errors already reported). A deployment runs on one node group of its cluster —
/// the one it pins (`node_group`), else where the cluster's accounting
/// ([`allocation::allocate`], all deployments of the cluster in program order) puts its
/// replicas. When its replicas land on several groups, it gets one scenario per group
/// (its `share`), each with that group's hardware, its replicas and its part of the load.
pub fn scenarios_from_program(p: &Program) -> Vec<DeploymentScenario> {
    let deploys: Vec<(&crate::program::Def, &crate::program::Deploy)> = p
        .user_defs
        .iter()
        .filter_map(|id| p.def(*id))
        .filter(|def| p.complete_with_references(def.id))
        .filter_map(|def| match &def.body {
            Body::Deploy(d) => Some((def, d.as_ref())),
            _ => None,
        })
        .collect();
    // The written layouts of each cluster, placed together.
    let written: Vec<(Unit, allocation::Demand)> = deploys
        .iter()
        .flat_map(|(def, d)| match &d.layout {
            LayoutSpec::Explicit(l) => vec![((def.id, None), demand_of(p, def, d, l))],
            LayoutSpec::Disaggregated(pl) => [Pool::Prefill, Pool::Decode]
                .into_iter()
                .map(|pool| {
                    let group = written_pool_group(p, d, pl, pool);
                    (
                        (def.id, Some(pool)),
                        pool_demand(def, d, pl.layout(pool), pool, group),
                    )
                })
                .collect(),
            LayoutSpec::Auto => Vec::new(),
        })
        .collect();
    let placements: std::collections::HashMap<Unit, allocation::Placement> =
        account_clusters(p, &written)
            .into_iter()
            .flat_map(|a| a.members)
            .map(|(id, _, placement)| (id, placement))
            .collect();
    let mut out = Vec::new();
    for (def, d) in deploys {
        if let LayoutSpec::Disaggregated(pl) = &d.layout {
            out.extend(pool_scenarios(p, def, d, pl, &placements));
            continue;
        }
        let pinned = pinned_group(p, d);
        let shares = match (&d.layout, placements.get(&(def.id, None))) {
            (LayoutSpec::Explicit(_), Some(pl)) if pl.unplaced == 0 && pl.shares().len() > 1 => {
                pl.shares()
            }
            (_, Some(pl)) if pl.unplaced == 0 && !pl.slots.is_empty() => {
                vec![(pl.slots[0].group, 0)]
            }
            _ => vec![(pinned.unwrap_or(0), 0)],
        };
        let total: u64 = shares.iter().map(|&(_, n)| n).sum();
        for &(group, replicas) in &shares {
            let Some(mut ds) = scenario_on(p, def, d, group) else {
                continue;
            };
            if shares.len() > 1 {
                let fraction = replicas as f64 / total.max(1) as f64;
                ds.scenario.layout.dp = replicas;
                ds.share = Some(Share {
                    node: ds.group_node.clone(),
                    replicas,
                    of: total,
                });
                if let Some(w) = ds.scenario.workload.as_mut() {
                    w.load = match w.load {
                        Load::Rate(r) => Load::Rate(r * fraction),
                        Load::Concurrency(c) => {
                            Load::Concurrency(((c as f64 * fraction).round() as u64).max(1))
                        }
                    };
                    w.requests = w.requests.map(|n| (n * fraction).ceil());
                }
                for t in &mut ds.slo {
                    if matches!(
                        t.metric,
                        crate::program::SloMetric::Throughput
                            | crate::program::SloMetric::RequestRate
                    ) {
                        t.value *= fraction;
                    }
                }
            }
            out.push(ds);
        }
    }
    out
}

/// The two pools of a disaggregated deployment, each on the group the accounting put it
/// (or its pin), its layout the pool's; each knows the other.
fn pool_scenarios(
    p: &Program,
    def: &crate::program::Def,
    d: &crate::program::Deploy,
    pl: &PoolLayouts,
    placements: &std::collections::HashMap<Unit, allocation::Placement>,
) -> Vec<DeploymentScenario> {
    let part = |pool: Pool| {
        let group = match placements.get(&(def.id, Some(pool))) {
            Some(placed) if placed.unplaced == 0 && !placed.slots.is_empty() => {
                placed.slots[0].group
            }
            _ => pool_pin(p, d, pl, pool).unwrap_or(0),
        };
        let mut ds = scenario_on(p, def, d, group)?;
        ds.scenario.layout = pl.layout(pool);
        ds.auto_layout = false;
        Some(ds)
    };
    let (Some(prefill), Some(decode)) = (part(Pool::Prefill), part(Pool::Decode)) else {
        return Vec::new();
    };
    pair_up(prefill, decode)
}

/// A deployment's scenario split into the two pools the planner chose (`prefill` and
/// `decode` with `dp` their replicas), both on the deployment's node group.
pub fn split_into_pools(
    ds: &DeploymentScenario,
    prefill: crate::program::Layout,
    decode: crate::program::Layout,
) -> Vec<DeploymentScenario> {
    let pool = |l| {
        let mut x = ds.clone();
        x.scenario.layout = l;
        x.auto_layout = false;
        x.share = None;
        x
    };
    pair_up(pool(prefill), pool(decode))
}

/// The two pools, each told which it is and given the other's scenario.
fn pair_up(
    mut prefill: DeploymentScenario,
    mut decode: DeploymentScenario,
) -> Vec<DeploymentScenario> {
    let same_group = prefill.group == decode.group;
    prefill.pool = Some(PoolPart {
        pool: Pool::Prefill,
        peer: decode.scenario.clone(),
        same_group,
    });
    decode.pool = Some(PoolPart {
        pool: Pool::Decode,
        peer: prefill.scenario.clone(),
        same_group,
    });
    vec![prefill, decode]
}

/// The group a pool is pinned to: its own `…_node_group`, else the deployment's.
pub fn pool_pin(
    p: &Program,
    d: &crate::program::Deploy,
    pl: &PoolLayouts,
    pool: Pool,
) -> Option<usize> {
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
    def: &crate::program::Def,
    d: &crate::program::Deploy,
    l: crate::program::Layout,
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
pub fn written_pool_group(
    p: &Program,
    d: &crate::program::Deploy,
    pl: &PoolLayouts,
    pool: Pool,
) -> Option<usize> {
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
pub fn pinned_group(p: &Program, d: &crate::program::Deploy) -> Option<usize> {
    let node = d.node_group?;
    p.cluster(d.cluster?)?
        .groups
        .iter()
        .position(|g| g.node == node)
}

/// What a deployment with layout `l` asks of its cluster, its autoscaler's `max`
/// included.
pub fn demand_of(
    p: &Program,
    def: &crate::program::Def,
    d: &crate::program::Deploy,
    l: &crate::program::Layout,
) -> allocation::Demand {
    let moe = d.model.and_then(|m| p.model(m)).is_some_and(|m| m.is_moe());
    let whole = l.ep && moe && l.dp > 1;
    allocation::Demand {
        name: def.name.clone(),
        replica_gpus: if whole { l.gpus() } else { l.replica_gpus() },
        replicas: l.dp.max(1),
        reserved: match &d.autoscale {
            Some(a) if !whole => a.max.saturating_sub(l.dp.max(1)),
            _ => 0,
        },
        whole,
        // A pin to a node the cluster lacks places nothing (E0409 says why).
        group: d
            .node_group
            .map(|_| pinned_group(p, d).unwrap_or(usize::MAX)),
        port: d.engine.port(),
    }
}

/// The scenario of deployment `def` on node group `group` of its cluster.
fn scenario_on(
    p: &Program,
    def: &crate::program::Def,
    d: &crate::program::Deploy,
    group: usize,
) -> Option<DeploymentScenario> {
    let (layout, auto_layout) = match d.layout {
        LayoutSpec::Explicit(l) => (l, false),
        LayoutSpec::Auto => (crate::program::Layout::default(), true),
        // Each pool's layout is set by `pool_scenarios`.
        LayoutSpec::Disaggregated(pl) => (pl.decode, false),
    };
    let model = d.model.and_then(|id| p.model(id))?;
    let cluster = d.cluster.and_then(|id| p.cluster(id))?;
    let group_def = cluster.groups.get(group)?;
    let node = p.node(group_def.node)?;
    let gdef = node.gpu.and_then(|id| p.def(id))?;
    let Body::Gpu(g) = &gdef.body else {
        return None;
    };
    let pcie = g
        .pcie
        .and_then(|id| link_spec(p, id))
        .or_else(|| catalog::link("pcie4"))?;
    let gpu = GpuSpec::from_gpu(&gdef.name, g, pcie);
    let scale_up = node.scale_up.and_then(|id| link_spec(p, id));
    let scale_out = match (cluster.fabric.and_then(|id| link_spec(p, id)), node.nics) {
        (Some(f), Some((n, _))) => Some(ScaleOut { nics: n, link: f }),
        (Some(f), None) => Some(ScaleOut {
            nics: node.gpu_count,
            link: f,
        }),
        (None, Some((n, id))) => link_spec(p, id).map(|l| ScaleOut { nics: n, link: l }),
        (None, None) => None,
    };
    let topology = Topology {
        gpu,
        gpus_per_node: node.gpu_count,
        nodes: group_def.count,
        scale_up,
        scale_up_domain: node.scale_up_domain.max(1),
        scale_out,
        price_per_node_hour: cluster.price.or(node.price),
    };
    let mut engine = engine_settings(model, &topology.gpu, &d.engine);
    engine.speculative = d.engine.speculative.as_ref().map(|sp| {
        let draft = sp.draft.and_then(|id| p.model(id));
        SpecDecode {
            method: sp.method.clone(),
            tokens: sp.tokens,
            acceptance: sp.acceptance,
            source: sp
                .source
                .clone()
                .or_else(|| draft.and_then(|m| m.hf.clone())),
            draft: draft.map(|m| Box::new(m.clone())),
        }
    });
    engine.lora = d.lora.as_ref().map(|l| lora::LoraSpec {
        max_loras: l.max_loras,
        max_rank: l.max_rank,
    });
    let workload = d
        .workload
        .and_then(|id| p.workload(id))
        .map(|w| workload_spec(w, &mut engine));
    let mut slo = Vec::new();
    let mut slo_spans = Vec::new();
    if let Some(sl) = d.slo.and_then(|id| p.slo(id)) {
        for b in &sl.bounds {
            slo.push(SloTarget {
                metric: b.metric,
                percentile: b.percentile.clone(),
                op: b.op,
                value: b.value,
            });
            slo_spans.push(b.at);
        }
    }
    let model_name = d
        .model
        .and_then(|id| p.def(id))
        .map(|m| m.name.clone())
        .unwrap_or_default();
    Some(DeploymentScenario {
        deploy: def.id,
        name: def.name.clone(),
        scenario: Scenario {
            model_name,
            model: model.clone(),
            topology,
            layout,
            engine,
            workload,
        },
        slo,
        slo_spans,
        auto_layout,
        allowed_weights: if d.allowed_weights.is_empty() {
            vec![model.weights.clone()]
        } else {
            d.allowed_weights.clone()
        },
        allowed_kv_cache: if d.allowed_kv_cache.is_empty() {
            vec![model.kv_cache.clone()]
        } else {
            d.allowed_kv_cache.clone()
        },
        group,
        group_node: p
            .def(group_def.node)
            .map(|n| n.name.clone())
            .unwrap_or_default(),
        share: None,
        pool: None,
    })
}

/// A workload as the models read it: the prompt tokens the prefix cache holds (the larger
/// of `prefix_reuse` × prompt and the shared prefix, at most all but the last token),
/// none when the engine turns prefix caching off. A workload that reuses prefixes turns
/// prefix caching on explicitly when the engine leaves it to vLLM's default, so the flag
/// the launch scripts pass matches what was predicted.
fn workload_spec(w: &crate::program::Workload, engine: &mut EngineSettings) -> WorkloadSpec {
    let load = match (w.rate, w.concurrency) {
        (Some(r), _) => Load::Rate(r),
        (None, Some(c)) => Load::Concurrency(c),
        (None, None) => Load::Concurrency(1),
    };
    let mut spec = WorkloadSpec::new(w.prompt, w.output, load, w.requests.map(|n| n as f64));
    let reuses = w.prefix_reuse > 0.0 || w.shared_prefix > 0.0;
    spec.declared_reuse = (w.prefix_reuse * w.prompt)
        .max(w.shared_prefix)
        .min(w.prompt);
    if reuses && engine.enable_prefix_caching.is_none() {
        engine.enable_prefix_caching = Some(true);
    }
    if reuses && engine.enable_prefix_caching == Some(true) {
        let most = (w.prompt - 1.0).max(0.0);
        spec.shared_prefix = w.shared_prefix.min(most);
        spec.cached_prompt = (w.prefix_reuse * w.prompt)
            .max(spec.shared_prefix)
            .min(most);
    }
    spec
}

fn field_span(
    fields: &std::collections::BTreeMap<String, FieldValue>,
    key: &str,
) -> Option<FileSpan> {
    fields.get(key).map(|f| f.at)
}

/// Turns findings into diagnostics at the spans of the deployment they are about.
pub fn diagnostics_for(
    p: &Program,
    ds: &DeploymentScenario,
    findings: &[Finding],
) -> Vec<Diagnostic> {
    let Some(def) = p.def(ds.deploy) else {
        return Vec::new();
    };
    let Body::Deploy(d) = &def.body else {
        return Vec::new();
    };
    let at_name = def.location();
    findings
        .iter()
        .map(|f| {
            let at = match f.anchor {
                Anchor::Layout => d.layout_at,
                Anchor::Model => field_span(&def.fields, "model").unwrap_or(at_name),
                Anchor::Cluster => field_span(&def.fields, "cluster").unwrap_or(at_name),
                Anchor::Engine(opt) => match def.fields.get("engine").map(|v| &v.value) {
                    Some(Value::Engine(_, opts)) => opts
                        .get(opt)
                        .map(|v| v.at)
                        .or(field_span(&def.fields, "engine"))
                        .unwrap_or(at_name),
                    _ => at_name,
                },
                Anchor::Slo(i) => ds.slo_spans.get(i).copied().unwrap_or(at_name),
                Anchor::Deploy => at_name,
            };
            // A node group's part of a deployment: say which part, and offer no rewrite
            // of the layout (the part's layout is not the one written).
            let who = match (&ds.share, &ds.pool) {
                (Some(sh), _) => format!(
                    "deploy `{}` (its {} of {} replicas on `{}`)",
                    ds.name, sh.replicas, sh.of, sh.node
                ),
                // The pair's findings (SLOs, load, transfer) are the deployment's; a pool's
                // own (memory, structure) name the pool.
                (None, Some(part))
                    if !matches!(f.anchor, Anchor::Slo(_) | Anchor::Deploy)
                        && !matches!(
                            f.code,
                            Code::AggregatedWins | Code::TransferDominates | Code::PoolsCannotPair
                        ) =>
                {
                    format!(
                        "deploy `{}` ({} pool, `{}`)",
                        ds.name,
                        part.pool.name(),
                        ds.scenario.layout
                    )
                }
                _ => format!("deploy `{}`", ds.name),
            };
            let mut diag = Diagnostic::new(f.code, format!("{who}: {}", f.message))
                .with_severity(f.severity)
                .primary(at.file, at.span, f.label.clone());
            if let Some(h) = &f.help {
                diag = diag.help(h.clone());
            }
            // A pool's own finding offers no rewrite of the layout (the written one holds
            // both pools); W0406's aggregated layout replaces both.
            let rewrites = ds.pool.is_none() || f.code == Code::AggregatedWins;
            if let (Some(r), None, true) = (&f.replacement, &ds.share, rewrites) {
                diag = diag.fix(format!("use `layout = {r}`"), at, r.clone());
            }
            diag
        })
        .collect()
}
