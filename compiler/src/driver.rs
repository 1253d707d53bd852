//! The entry points that the CLI, the language server, the benchmarks and the tests
//! share, and the one place that knows the order of the stages:
//!
//! front end (parse → resolve → check) → scenarios → analysis (pure, per deployment) →
//! planner (one search per deployment: the chosen layout of `layout = auto`, A0701, E0701,
//! the report's alternatives) → lowering (decided plans only, never searching) → targets.
//!
//! Each deployment's analysis and search are cached ([`AnalysisCache`]) across checks of
//! the same document, so the language server recomputes only what an edit changed, and
//! handed forward to diagnostics, lowering, the report and hovers.

use crate::analysis::rules::SloTarget;
use crate::analysis::{self, Analysis, DeploymentScenario, Scenario};
use crate::diagnostics::{self, Diagnostic, Severity};
use crate::front::{self, FrontEnd};
use crate::planner::{self, Search};
use crate::program::Program;
use crate::resolve::Session;
use crate::source::{ReadError, SourceDb, World};
use std::sync::Arc;

/// The result of checking one root file.
pub struct Checked {
    pub db: SourceDb,
    pub program: Program,
    /// Sorted by file and position.
    pub diagnostics: Vec<Diagnostic>,
    /// The front end's share of `diagnostics` (parse, resolve, check), kept so the
    /// analysis can be redone without the front end ([`reanalyze`]).
    pub front_diagnostics: Vec<Diagnostic>,
    /// Every deployment with a decided layout (written, or chosen by the planner), in
    /// program order, with its analysis and search (empty from [`front_end`] and
    /// [`check_stdlib`]).
    pub deployments: Vec<Decided>,
    /// The decided deployments lowered: what to run (`dic compile`'s launch files)…
    pub plan: crate::ir::LaunchPlan,
    /// …and what dic predicts for each (the report, with the planner's data when it ran;
    /// editors show it on hover).
    pub forecast: crate::ir::Forecast,
    /// The root file's syntax tree (recovered, so partial for broken input); empty from
    /// [`check_stdlib`].
    pub root_ast: std::sync::Arc<crate::syntax::ast::SourceAst>,
}

/// One deployment as the driver decided it.
#[derive(Debug, Clone)]
pub struct Decided {
    /// The scenario, with the planner's layout and formats for `layout = auto`.
    pub scenario: DeploymentScenario,
    pub analysis: Analysis,
    /// The deployment's one search (absent when the planner did not run, or the
    /// analysis found errors).
    pub search: Option<Arc<Search>>,
    /// Where the cluster's accounting put its replicas (one slot each, in replica order).
    pub slots: Vec<analysis::allocation::Slot>,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    fn from_front(f: FrontEnd) -> Checked {
        Checked {
            db: f.db,
            program: f.program,
            front_diagnostics: f.diagnostics.clone(),
            diagnostics: f.diagnostics,
            deployments: Vec::new(),
            plan: Default::default(),
            forecast: Default::default(),
            root_ast: f.root_ast,
        }
    }
}

/// Checks the file at `path` as read through `world`. A root file that cannot be read
/// at all is an `Err` (a usage error for the CLI), not a diagnostic.
pub fn check_file(world: &dyn World, path: &str) -> Result<Checked, ReadError> {
    let mut s = Session::new(world);
    s.load_root(path)?;
    Ok(finish(s))
}

/// The front end only — parse, resolve, check — without the analysis of deployments
/// (what the front-end benchmark measures).
pub fn front_end(world: &dyn World, path: &str) -> Result<Checked, ReadError> {
    let mut s = Session::new(world);
    s.load_root(path)?;
    Ok(Checked::from_front(front::check_session(s)))
}

/// Checks `text` as if it were the file at `path` (imports still go through `world`).
pub fn check_text(world: &dyn World, path: &str, text: &str) -> Checked {
    let mut s = Session::new(world);
    s.load_root_text(path, text);
    finish(s)
}

/// As [`check_text`], reusing the analyses of unchanged deployments from `cache`, and
/// with the planner's advice only when `advice` asks for it (the language server
/// publishes without it first, then with it).
pub fn check_text_cached(
    world: &dyn World,
    path: &str,
    text: &str,
    cache: &mut AnalysisCache,
    advice: Advice,
) -> Checked {
    let mut s = Session::new(world);
    s.load_root_text(path, text);
    finish_with(s, cache, advice)
}

fn finish(s: Session<'_>) -> Checked {
    finish_with(s, &mut AnalysisCache::default(), Advice::Planner)
}

/// As [`check_file`], with every deployment searched for its report: what `dic compile`
/// renders from `Checked::plan`.
pub fn compile_file(world: &dyn World, path: &str) -> Result<Checked, ReadError> {
    let mut s = Session::new(world);
    s.load_root(path)?;
    Ok(finish_with(
        s,
        &mut AnalysisCache::default(),
        Advice::Report,
    ))
}

fn finish_with(s: Session<'_>, cache: &mut AnalysisCache, advice: Advice) -> Checked {
    let mut checked = Checked::from_front(front::check_session(s));
    reanalyze(&mut checked, cache, advice);
    checked
}

/// How much the planner runs; every deployment is searched at most once either way.
/// `Skip` is the language server's fast first pass, without any search (auto layouts stay
/// undecided until the second pass). `Planner` searches what the diagnostics need: every
/// `layout = auto` (its choice, E0701) and every written layout with SLOs (A0701).
/// `Report` also searches the written layouts without SLOs, whose report lists the
/// alternatives: what `dic compile` needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    Skip,
    Planner,
    Report,
}

/// Analyses and searches kept between checks of the same document (the language server
/// re-checks on every edit): a deployment whose scenario, SLOs and search space are
/// unchanged is neither analysed nor searched again. Keyed by their full debug text, so
/// any change to a number is a new key; entries not used by the latest check are dropped.
#[derive(Debug, Default)]
pub struct AnalysisCache {
    entries: std::collections::HashMap<String, CachedDeployment>,
}

#[derive(Debug, Default)]
struct CachedDeployment {
    /// The written layout's analysis (explicit layouts only).
    analysis: Option<Analysis>,
    search: Option<Arc<Search>>,
    /// For `layout = auto`: the planner's choice (one layout, or the two pools of a
    /// disaggregated split) and its analysis, once searched.
    chosen: Option<Vec<(DeploymentScenario, Analysis)>>,
}

impl AnalysisCache {
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// (Re)does everything after the front end — analysis, planner, lowering — for a checked
/// program's deployments (e.g. with the planner after a first pass without it), and
/// rebuilds `diagnostics` from the front end's and theirs.
pub fn reanalyze(checked: &mut Checked, cache: &mut AnalysisCache, advice: Advice) {
    let p = &checked.program;
    let scenarios: Vec<(String, DeploymentScenario)> = analysis::scenarios_from_program(p)
        .into_iter()
        .map(|ds| {
            let key = format!(
                "{:?}|{:?}|{:?}|{:?}|{}|{:?}",
                ds.scenario,
                ds.slo,
                ds.allowed_weights,
                ds.allowed_kv_cache,
                ds.auto_layout,
                ds.pool
            );
            (key, ds)
        })
        .collect();
    for (key, _) in &scenarios {
        cache.entries.entry(key.clone()).or_default();
    }
    // 1. Analysis of written layouts (what the cache lacks, in parallel).
    let missing: Vec<&(String, DeploymentScenario)> = scenarios
        .iter()
        .filter(|(k, ds)| !ds.auto_layout && cache.entries[k].analysis.is_none())
        .collect();
    let done = parallel_map(&missing, |(_, ds)| analyze_written(ds));
    for ((key, _), a) in missing.iter().copied().zip(done) {
        if let Some(e) = cache.entries.get_mut(key) {
            e.analysis = Some(a);
        }
    }
    // 2. One search per deployment: every auto layout, and every written layout with
    // SLOs (the report's alternatives, A0701: a cheaper layout, or one that works).
    if advice != Advice::Skip {
        let to_search: Vec<&(String, DeploymentScenario)> = scenarios
            .iter()
            .filter(|(k, ds)| {
                let e = &cache.entries[k];
                let wanted = advice == Advice::Report || !ds.slo.is_empty();
                // A disaggregated deployment is compared with the aggregated search once,
                // on its decode pool.
                let wanted = wanted
                    && ds
                        .pool
                        .as_ref()
                        .is_none_or(|pp| pp.pool == crate::program::Pool::Decode);
                // A written layout that fails is searched too: the search knows a layout
                // that works (A0701 says which).
                e.search.is_none() && (ds.auto_layout || (wanted && e.analysis.is_some()))
            })
            .collect();
        let found = parallel_map(&to_search, |(_, ds)| {
            let search = planner::search(&ds.scenario, &ds.slo, &planner::space_of(ds));
            // The planner's choice for an auto layout is analysed in full here too.
            let chosen = ds.auto_layout.then(|| choice_of(ds, &search));
            (Arc::new(search), chosen)
        });
        for ((key, _), (search, chosen)) in to_search.iter().copied().zip(found) {
            if let Some(e) = cache.entries.get_mut(key) {
                e.search = Some(search);
                e.chosen = chosen;
            }
        }
    }
    // 3. Diagnostics and decided deployments, in program order.
    let mut diags = checked.front_diagnostics.clone();
    let mut decided = Vec::new();
    let mut auto_decided = Vec::new();
    // A disaggregated deployment's one search (on its decode pool) is both pools'.
    let pair_search: std::collections::HashMap<crate::program::DefId, Arc<Search>> = scenarios
        .iter()
        .filter(|(_, ds)| {
            ds.pool
                .as_ref()
                .is_some_and(|x| x.pool == crate::program::Pool::Decode)
        })
        .filter_map(|(k, ds)| Some((ds.deploy, cache.entries[k].search.clone()?)))
        .collect();
    for (key, ds) in &scenarios {
        let e = &cache.entries[key];
        if ds.auto_layout {
            match (&e.search, &e.chosen) {
                (Some(search), Some(chosen)) if !chosen.is_empty() => {
                    auto_decided.extend(chosen.iter().map(|(x, a)| Decided {
                        scenario: x.clone(),
                        analysis: a.clone(),
                        search: Some(search.clone()),
                        slots: Vec::new(),
                    }))
                }
                (Some(search), _) => diags.extend(planner::no_layout(p, ds, search)),
                (None, _) => {}
            }
            continue;
        }
        let Some(base) = &e.analysis else { continue };
        let mut a = base.clone();
        let clean = a.findings.iter().all(|f| f.severity != Severity::Error);
        match (&e.search, clean, ds.slo.is_empty()) {
            (Some(search), _, _) if ds.pool.is_some() => {
                a.findings.extend(planner::aggregated_wins(ds, &a, search))
            }
            (Some(search), true, false) => a.findings.extend(planner::cheaper_layout(ds, search)),
            (Some(search), false, false) => a.findings.extend(planner::working_layout(ds, search)),
            _ => {}
        }
        diags.extend(analysis::diagnostics_for(p, ds, &a.findings));
        decided.push(Decided {
            scenario: ds.clone(),
            search: e.search.clone().or_else(|| {
                ds.pool
                    .as_ref()
                    .and_then(|_| pair_search.get(&ds.deploy).cloned())
            }),
            analysis: a,
            slots: Vec::new(),
        });
    }
    // The planner's choices are lowered after the written layouts; their analyses add no
    // diagnostics (the planner chose them for meeting every SLO).
    decided.extend(auto_decided);
    // 4. The cluster's accounting over every decided layout (the planner's included).
    let order = |d: &Decided| p.user_defs.iter().position(|id| *id == d.scenario.deploy);
    decided.sort_by_key(|d| (order(d), d.scenario.group));
    let unplaced = account_clusters(p, &mut decided, &mut diags);
    // 5. Lowering of the decided deployments, with the figures their forecasts need.
    let lowered: Vec<&Decided> = decided
        .iter()
        .filter(|d| !unplaced.contains(&d.scenario.deploy))
        .collect();
    let figures: Vec<analysis::forecast::ForecastFigures> = lowered
        .iter()
        .map(|d| analysis::forecast::figures(&d.scenario, &d.analysis))
        .collect();
    let planned: Vec<crate::ir::Planned<'_>> = lowered
        .iter()
        .zip(&figures)
        .map(|(d, figures)| crate::ir::Planned {
            scenario: &d.scenario,
            analysis: &d.analysis,
            figures,
            search: d.search.as_deref(),
            slots: &d.slots,
        })
        .collect();
    let (mut plan, forecast, lowering_diags) = crate::ir::lower(p, &planned);
    plan.inputs = crate::ir::input_digests(&checked.db);
    diags.extend(lowering_diags);
    diagnostics::sort(&mut diags);
    diags.dedup();
    diagnostics::cap(&mut diags);
    let used: std::collections::HashSet<&String> = scenarios.iter().map(|(k, _)| k).collect();
    cache.entries.retain(|k, _| used.contains(k));
    checked.diagnostics = diags;
    checked.deployments = decided;
    checked.plan = plan;
    checked.forecast = forecast;
}

/// Places every decided deployment of each cluster ([`analysis::account_clusters`],
/// program order), gives each its slots, and reports what does not fit: E0409 for a
/// `node_group` its cluster lacks, E0408 naming the deployments that share the group and
/// the numbers. Returns the deployments left unplaced (not lowered).
fn account_clusters(
    p: &Program,
    decided: &mut [Decided],
    diags: &mut Vec<Diagnostic>,
) -> std::collections::HashSet<crate::program::DefId> {
    use crate::program::Body;
    let deploy_of = |id| match p.def(id).map(|d| (d, &d.body)) {
        Some((def, Body::Deploy(d))) => Some((def, d.as_ref())),
        _ => None,
    };
    // Each deployment (each pool of a disaggregated one) once, its parts' replicas
    // summed; a layout that fails its own checks is not launched and takes no GPUs.
    let unit_of = |d: &Decided| -> analysis::Unit {
        (
            d.scenario.deploy,
            d.scenario.pool.as_ref().map(|pp| pp.pool),
        )
    };
    let mut demands: Vec<(analysis::Unit, analysis::allocation::Demand)> = Vec::new();
    for x in decided.iter().filter(|d| {
        !d.analysis
            .findings
            .iter()
            .any(|f| f.severity == Severity::Error)
    }) {
        let unit = unit_of(x);
        if demands.iter().any(|(seen, _)| *seen == unit) {
            continue;
        }
        let Some((def, d)) = deploy_of(unit.0) else {
            continue;
        };
        let demand = match (&d.layout, unit.1) {
            (crate::program::LayoutSpec::Disaggregated(pl), Some(pool)) => {
                if pl.group(pool).is_some() && analysis::pool_pin(p, d, pl, pool).is_none() {
                    diags.push(node_group_not_in_cluster(p, def, d, pool_pin_field(pool)));
                }
                let group = analysis::written_pool_group(p, d, pl, pool);
                analysis::pool_demand(def, d, pl.layout(pool), pool, group)
            }
            // The planner's split for `layout = auto`: on the deployment's pin, if any.
            (_, Some(pool)) => {
                let group = d
                    .node_group
                    .map(|_| analysis::pinned_group(p, d).unwrap_or(usize::MAX));
                analysis::pool_demand(def, d, x.scenario.scenario.layout, pool, group)
            }
            _ => {
                let mut layout = x.scenario.scenario.layout;
                layout.dp = decided
                    .iter()
                    .filter(|y| unit_of(y) == unit)
                    .map(|y| y.scenario.scenario.layout.dp.max(1))
                    .sum();
                analysis::demand_of(p, def, d, &layout)
            }
        };
        let first_unit = !demands.iter().any(|((id, _), _)| *id == unit.0);
        if first_unit && d.node_group.is_some() && analysis::pinned_group(p, d).is_none() {
            diags.push(node_group_not_in_cluster(p, def, d, "node_group"));
        }
        demands.push((unit, demand));
    }
    let mut unplaced = std::collections::HashSet::new();
    for account in analysis::account_clusters(p, &demands) {
        for (i, (unit, _, placement)) in account.members.iter().enumerate() {
            if placement.unplaced > 0 {
                unplaced.insert(unit.0);
                // A pin to a group the cluster lacks already has its own error.
                if placement.slots.is_empty() && account.members[i].1.group == Some(usize::MAX) {
                    continue;
                }
                if let Some((def, _)) = deploy_of(unit.0) {
                    diags.push(oversubscribed(p, def, &account, i));
                }
                continue;
            }
            for x in decided.iter_mut().filter(|x| unit_of(x) == *unit) {
                x.slots = placement
                    .slots
                    .iter()
                    .filter(|s| x.scenario.share.is_none() || s.group == x.scenario.group)
                    .copied()
                    .collect();
            }
        }
    }
    unplaced
}

/// The field that pins `pool` to a node group.
fn pool_pin_field(pool: crate::program::Pool) -> &'static str {
    match pool {
        crate::program::Pool::Prefill => "prefill_node_group",
        crate::program::Pool::Decode => "decode_node_group",
    }
}

/// E0409: `node_group` names a node that is not one of the cluster's groups.
fn node_group_not_in_cluster(
    p: &Program,
    def: &crate::program::Def,
    d: &crate::program::Deploy,
    field: &str,
) -> Diagnostic {
    let at = match (field, def.fields.get("layout").map(|f| &f.value)) {
        ("node_group", _) => def.fields.get("node_group").map(|f| f.at),
        (_, Some(crate::program::Value::Layout(_))) => def.fields.get("layout").map(|f| f.at),
        _ => None,
    }
    .unwrap_or(def.location());
    let cluster = d.cluster.and_then(|c| p.def(c));
    let groups = d
        .cluster
        .and_then(|c| analysis::group_capacities(p, c))
        .unwrap_or_default();
    Diagnostic::new(
        crate::diagnostics::Code::NodeGroupNotInCluster,
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
fn oversubscribed(
    p: &Program,
    def: &crate::program::Def,
    account: &analysis::ClusterAccount,
    i: usize,
) -> Diagnostic {
    let cluster_name = p
        .def(account.cluster)
        .map(|x| x.name.clone())
        .unwrap_or_default();
    let groups = &account.groups;
    let (_, d, placement) = &account.members[i];
    let want = if d.whole {
        d.replica_gpus
    } else {
        d.replica_gpus * (d.replicas + d.reserved)
    };
    let before: Vec<String> = account.members[..i]
        .iter()
        .filter(|(_, _, pl)| !pl.slots.is_empty())
        .map(|(_, x, pl)| {
            let gpus = if x.whole {
                x.replica_gpus
            } else {
                x.replica_gpus * (pl.slots.len() + pl.reserved.len()) as u64
            };
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
    let (unit, missing) = if d.whole {
        (
            format!(
                "one data-parallel group of {} GPUs on whole nodes",
                d.replica_gpus
            ),
            "it does not fit".to_string(),
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
    Diagnostic::new(crate::diagnostics::Code::ClusterOversubscribed, message)
        .primary(at.file, at.span, format!("{} in all", capacity.join(" + ")))
        .help("deployments sharing a cluster are placed in file order, each replica on GPUs no other uses (a replica inside one node group): add nodes, shrink a layout, or give a deployment a cluster of its own".to_string())
}

/// The planner's choice for `layout = auto`, analysed in full: the chosen layout, or the
/// two pools of the split when the disaggregated family wins; empty when nothing meets
/// the SLOs.
fn choice_of(ds: &DeploymentScenario, search: &Search) -> Vec<(DeploymentScenario, Analysis)> {
    let in_formats = |weights: &str, kv: &str| {
        let mut x = ds.clone();
        x.scenario.model.weights = weights.to_string();
        x.scenario.model.kv_cache = kv.to_string();
        x.auto_layout = false;
        x
    };
    if let (true, Some(best)) = (search.split_wins, search.splits.first()) {
        // The formats the split was predicted in (those allowed, not the model's own).
        let space = planner::space_of(ds);
        let formats = planner::formats_of(search.chosen.as_ref(), &ds.scenario, &space);
        let base = in_formats(formats.0, formats.1);
        let pool = |l: crate::program::Layout, replicas: u64| crate::program::Layout {
            dp: l.dp.max(1) * replicas,
            ..l
        };
        return analysis::split_into_pools(
            &base,
            pool(best.split.prefill, best.split.prefill_replicas),
            pool(best.split.decode, best.split.decode_replicas),
        )
        .into_iter()
        .map(|x| {
            let a = analyze_written(&x);
            (x, a)
        })
        .collect();
    }
    search
        .chosen
        .iter()
        .map(|c| {
            let mut chosen = in_formats(&c.weights, &c.kv_cache);
            chosen.scenario.layout = c.layout;
            if let Some(e) = &c.engine {
                e.apply(&mut chosen.scenario);
            }
            crate::analysis::deepep::apply_layout_defaults(&mut chosen.scenario);
            let a = analyze_and_advise(&chosen.scenario, &chosen.slo);
            (chosen, a)
        })
        .collect()
}

/// A written deployment's analysis: a pool of a disaggregated one as such (its own checks,
/// the pair's prediction; the aggregated advice does not apply), any other with the
/// planner's advice.
pub fn analyze_written(ds: &DeploymentScenario) -> Analysis {
    match &ds.pool {
        Some(part) => analysis::analyze_pool(&ds.scenario, part, &ds.slo),
        None => analyze_and_advise(&ds.scenario, &ds.slo),
    }
}

/// A written layout's analysis with the planner's advice on it (W0404, A0501, A0401):
/// what `dic check` reports for one deployment and `dic estimate` for one scenario.
pub fn analyze_and_advise(s: &Scenario, slo: &[SloTarget]) -> Analysis {
    let mut a = analysis::analyze(s, slo);
    let advice = planner::advise(s, &a);
    a.findings.extend(advice);
    a
}

/// `f` over `items` on up to `available_parallelism` threads, results in order.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len());
    if threads <= 1 {
        return items.iter().map(&f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|c| s.spawn(|| c.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// Checks every stdlib module in full (the stdlib must check clean).
pub fn check_stdlib() -> Checked {
    Checked::from_front(front::check_stdlib())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// When the split wins, `layout = auto` becomes the split's two pools (each knowing the
    /// other, in the search's formats), analysed like a written split; else the one layout.
    #[test]
    fn an_auto_layout_deploys_the_winning_family() {
        let src = "import std.nodes.dgx_h200\nimport std.models.llama_3_1_70b\n\
model m = llama_3_1_70b { weights = fp8 }\n\
cluster c { nodes = 2 × dgx_h200, price = $60/h }\n\
workload w { prompt = 8k tokens, output = 256 tokens, rate = 4 req/s }\n\
slo s { ttft.p95 <= 2 s, tpot.p50 <= 25 ms }\n\
deploy d { model = m, cluster = c, workload = w, slo = s, layout = auto, engine = vllm { max_model_len = 16k tokens } }\n";
        let world = crate::source::MemoryWorld::new().with("p.dist", src);
        let checked = front_end(&world, "p.dist").expect("readable");
        let ds = analysis::scenarios_from_program(&checked.program).remove(0);
        let mut found = planner::search(&ds.scenario, &ds.slo, &planner::space_of(&ds));
        assert!(!found.split_wins, "{:?}", found.family_choice);
        let one = choice_of(&ds, &found);
        assert_eq!(one.len(), 1);
        assert!(one[0].0.pool.is_none());
        let best = found.splits[0].clone();
        found.split_wins = true;
        let two = choice_of(&ds, &found);
        assert_eq!(two.len(), 2);
        let (p, d) = (&two[0].0, &two[1].0);
        assert_eq!(
            p.pool.as_ref().map(|x| x.pool),
            Some(crate::program::Pool::Prefill)
        );
        assert_eq!(
            d.pool.as_ref().map(|x| x.pool),
            Some(crate::program::Pool::Decode)
        );
        assert_eq!(p.scenario.layout.tp, best.split.prefill.tp);
        assert_eq!(p.scenario.layout.dp, best.split.prefill_replicas);
        assert_eq!(d.scenario.layout.dp, best.split.decode_replicas);
        assert!(!p.auto_layout && !d.auto_layout);
        // The pair's prediction is the family's.
        let got = two[1].1.prediction.as_ref().expect("predicted");
        assert!((got.tpot * 1e3 / best.tpot_ms - 1.0).abs() < 1e-9);
    }
}
