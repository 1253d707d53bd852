//! The bridge from a checked program to the analysis and back: each deployment's
//! [`Scenario`] (its model, its node group's hardware, engine, workload and SLOs), split
//! by node group or pool as the cluster's accounting ([`super::cluster`]) places it, and
//! the analysis's findings turned back into diagnostics at the deployment's spans.

use super::cluster::{
    account_clusters, demand_of, pinned_group, pool_demand, pool_pin, written_pool_group,
    DecidedPart, Unit,
};
use super::rules::{Anchor, Finding, SloTarget};
use super::{allocation, catalog, deepep, disagg, node_groups, Analysis};
use super::{
    engine_settings, EngineSettings, GpuSpec, LinkSpec, Load, ScaleOut, Scenario, SpecDecode,
    Topology, WorkloadSpec,
};
use crate::diagnostics::{Code, Diagnostic, Severity};
use crate::program::{
    Body, Def, DefId, Deploy, FieldValue, Layout, LayoutSpec, Pool, PoolLayouts, Program,
    SloMetric, Value, Workload,
};
use crate::span::FileSpan;

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

impl DeploymentScenario {
    /// This part as the cluster's accounting reads it, `analysis` being its own.
    pub fn to_place(&self, analysis: &Analysis) -> DecidedPart {
        DecidedPart {
            unit: (self.deploy, self.pool.as_ref().map(|pp| pp.pool)),
            layout: self.scenario.layout,
            group: self.group,
            shared: self.share.is_some(),
            launched: !analysis
                .findings
                .iter()
                .any(|f| f.severity == Severity::Error),
        }
    }
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
    let deploys: Vec<(&Def, &Deploy)> = p
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
                    if matches!(t.metric, SloMetric::Throughput | SloMetric::RequestRate) {
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
    def: &Def,
    d: &Deploy,
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
        deepep::apply_layout_defaults(&mut ds.scenario);
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
    prefill: Layout,
    decode: Layout,
) -> Vec<DeploymentScenario> {
    let pool = |l| {
        let mut x = ds.clone();
        x.scenario.layout = l;
        deepep::apply_layout_defaults(&mut x.scenario);
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

/// The scenario of deployment `def` on node group `group` of its cluster.
fn scenario_on(p: &Program, def: &Def, d: &Deploy, group: usize) -> Option<DeploymentScenario> {
    let (layout, auto_layout) = match d.layout {
        LayoutSpec::Explicit(l) => (l, false),
        LayoutSpec::Auto => (Layout::default(), true),
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
        cpu_memory: node.cpu_memory,
    };
    let mut engine = engine_settings(model, &topology.gpu, &d.engine);
    engine.calibration = d.calibration;
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
    engine.lora = d.lora.as_ref().map(|l| super::lora::LoraSpec {
        max_loras: l.max_loras,
        max_rank: l.max_rank,
        adapters: l.adapters.len() as u64,
    });
    engine.kv_offload = d.kv_offload.as_ref().map_or(0.0, |k| k.size);
    engine.kv_offload_lmcache = d
        .kv_offload
        .as_ref()
        .is_some_and(|k| k.backend == "lmcache");
    engine.pod_memory = d.pod.memory;
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
    let mut ds = DeploymentScenario {
        deploy: def.id,
        name: def.name.clone(),
        scenario: Scenario {
            model_name,
            model: {
                let mut m = model.clone();
                topology.gpu.resolve_auto_kv_cache(&mut m);
                m
            },
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
    };
    deepep::apply_layout_defaults(&mut ds.scenario);
    Some(ds)
}

/// A workload as the models read it: the prompt tokens the prefix cache holds (the larger
/// of `prefix_reuse` × prompt and the shared prefix, at most all but the last token),
/// none when the engine turns prefix caching off. A workload that reuses prefixes turns
/// prefix caching on explicitly when the engine leaves it to vLLM's default, so the flag
/// the launch scripts pass matches what was predicted.
fn workload_spec(w: &Workload, engine: &mut EngineSettings) -> WorkloadSpec {
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
    // On several node groups the cluster-wide reason replaces the structural E0405.
    let across_groups = node_groups::cluster_reason(p, d, ds, findings);
    findings
        .iter()
        .map(|f| match &across_groups {
            Some(g) if f.code == Code::NotEnoughGpus => g,
            _ => f,
        })
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
                Anchor::Field(name) => field_span(&def.fields, name).unwrap_or(at_name),
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
