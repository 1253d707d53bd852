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
use crate::program::{Pool, Program};
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
    /// The what-if across GPU types ([`WHAT_IF_GPUS`] and the cluster's own), ranked: for
    /// the report, so `dic compile` only (empty otherwise, and for a split's pools and a
    /// node group's part).
    pub whatif: Arc<[planner::whatif::WhatIf]>,
    /// Where the cluster's accounting put its replicas (one slot each, in replica order).
    pub slots: Vec<analysis::allocation::Slot>,
    /// A split's N−1, the pair's (`planner::pool_failure`) on both pools: computed once,
    /// with the decode pool's analysis ([`analyze_written`]), where W0410 reads it, and
    /// lowered into both pools' forecasts. `None` for any other deployment.
    pub pool_failure: Option<Arc<planner::PoolFailure>>,
}

/// A written layout's analysis and, for a split's decode pool, the pair's N−1
/// ([`Decided::pool_failure`]).
#[derive(Debug, Clone)]
pub struct Written {
    pub analysis: Analysis,
    pub pool_failure: Option<Arc<planner::PoolFailure>>,
}

/// The catalog's common datacenter GPU types that the report's "Which GPU" compares the
/// cluster's own with (the stdlib names `dic plan --gpus` takes).
pub const WHAT_IF_GPUS: [&str; 4] = ["h100_sxm", "h200_sxm", "b200", "mi300x"];

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
    written: Option<Written>,
    search: Option<Arc<Search>>,
    /// For `layout = auto`: the planner's choice (one layout, or the two pools of a
    /// disaggregated split) and its analysis, once searched.
    chosen: Option<Vec<(DeploymentScenario, Written)>>,
    /// The what-if across GPU types, once run (`Advice::Report` only).
    whatif: Option<Arc<[planner::whatif::WhatIf]>>,
}

impl AnalysisCache {
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A deployment's scenario with its cache key (the full debug text of everything its
/// analysis and search read).
type Keyed = (String, DeploymentScenario);

/// (Re)does everything after the front end — analysis, planner, lowering — for a checked
/// program's deployments (e.g. with the planner after a first pass without it), and
/// rebuilds `diagnostics` from the front end's and theirs.
pub fn reanalyze(checked: &mut Checked, cache: &mut AnalysisCache, advice: Advice) {
    let p = &checked.program;
    let scenarios = keyed_scenarios(p);
    for (key, _) in &scenarios {
        cache.entries.entry(key.clone()).or_default();
    }
    // 1. Analysis of written layouts; 2. one search per deployment (what the cache lacks).
    cache.analyze_written(&scenarios);
    if advice != Advice::Skip {
        cache.search(&scenarios, advice);
    }
    if advice == Advice::Report {
        cache.what_if(&scenarios);
    }
    // 3. Diagnostics and decided deployments, in program order.
    let mut diags = checked.front_diagnostics.clone();
    let mut decided = decide(p, &scenarios, cache, &mut diags);
    // 4. The cluster's accounting over every decided layout (the planner's included).
    let order = |d: &Decided| p.user_defs.iter().position(|id| *id == d.scenario.deploy);
    decided.sort_by_key(|d| (order(d), d.scenario.group));
    let parts: Vec<_> = decided
        .iter()
        .map(|d| d.scenario.to_place(&d.analysis))
        .collect();
    let placed = analysis::place_deployments(p, &parts);
    diags.extend(placed.diagnostics);
    for (d, slots) in decided.iter_mut().zip(placed.slots) {
        d.slots = slots;
    }
    // 5. Lowering of the decided deployments that were placed.
    let lowered: Vec<&Decided> = decided
        .iter()
        .filter(|d| !placed.unplaced.contains(&d.scenario.deploy))
        .collect();
    let (mut plan, forecast, lowering_diags) = lower(p, &lowered);
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

/// The program's deployments as scenarios, each with its cache key.
fn keyed_scenarios(p: &Program) -> Vec<Keyed> {
    analysis::scenarios_from_program(p)
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
        .collect()
}

impl AnalysisCache {
    /// Analyses the written layouts the cache lacks, in parallel.
    fn analyze_written(&mut self, scenarios: &[Keyed]) {
        let missing: Vec<&Keyed> = scenarios
            .iter()
            .filter(|(k, ds)| !ds.auto_layout && self.entries[k].written.is_none())
            .collect();
        let done = parallel_map(&missing, |(_, ds)| analyze_written(ds));
        for ((key, _), a) in missing.iter().copied().zip(done) {
            if let Some(e) = self.entries.get_mut(key) {
                e.written = Some(a);
            }
        }
    }

    /// One search per deployment, of those the cache lacks, in parallel: every auto
    /// layout, and every written layout with SLOs (the report's alternatives, A0701: a
    /// cheaper layout, or one that works), or every written layout for the report.
    fn search(&mut self, scenarios: &[Keyed], advice: Advice) {
        let to_search: Vec<&Keyed> = scenarios
            .iter()
            .filter(|(k, ds)| {
                let e = &self.entries[k];
                let wanted = advice == Advice::Report || !ds.slo.is_empty();
                // A disaggregated deployment is compared with the aggregated search once,
                // on its decode pool.
                let wanted = wanted && ds.pool.as_ref().is_none_or(|pp| pp.pool == Pool::Decode);
                // A written layout that fails is searched too: the search knows a layout
                // that works (A0701 says which).
                e.search.is_none() && (ds.auto_layout || (wanted && e.written.is_some()))
            })
            .collect();
        let found = parallel_map(&to_search, |(_, ds)| {
            let search = search_for(ds);
            // The planner's choice for an auto layout is analysed in full here too.
            let chosen = ds.auto_layout.then(|| choice_of(ds, &search));
            (Arc::new(search), chosen)
        });
        for ((key, _), (search, chosen)) in to_search.iter().copied().zip(found) {
            if let Some(e) = self.entries.get_mut(key) {
                e.search = Some(search);
                e.chosen = chosen;
            }
        }
    }

    /// The what-if across GPU types for the report, of the deployments the cache lacks
    /// it for: those of independent replicas on one cluster (not a split's pools nor a
    /// node group's part), on the cluster's own GPU and [`WHAT_IF_GPUS`]; one search per
    /// deployment and GPU type, in parallel, then ranked per deployment.
    fn what_if(&mut self, scenarios: &[Keyed]) {
        let jobs: Vec<(&Keyed, String)> = scenarios
            .iter()
            .filter(|(k, ds)| {
                self.entries[k].whatif.is_none() && ds.pool.is_none() && ds.share.is_none()
            })
            .flat_map(|keyed| {
                let own = keyed.1.scenario.topology.gpu.name.clone();
                let mut gpus = vec![own];
                for g in WHAT_IF_GPUS {
                    if !gpus.iter().any(|x| x == g) {
                        gpus.push(g.to_string());
                    }
                }
                gpus.into_iter().map(move |g| (keyed, g))
            })
            .collect();
        let rows = parallel_map(&jobs, |((key, ds), gpu)| {
            // On its own priced GPU the what-if's scenario is the deployment's own: the
            // deployment's search answers it when it chose a layout (else the what-if's
            // own search also fits the context, for why nothing meets the SLOs).
            let own = self.entries[key].search.as_ref().filter(|found| {
                found.chosen.is_some()
                    && *gpu == ds.scenario.topology.gpu.name
                    && ds.scenario.topology.price_per_node_hour.is_some()
            });
            match own.zip(planner::whatif::on_gpu(&ds.scenario, gpu)) {
                Some((found, (_, row))) => vec![planner::whatif::answered(row, found)],
                None => planner::whatif::what_if(ds, std::slice::from_ref(gpu)),
            }
        });
        let mut by_key: std::collections::HashMap<&str, Vec<planner::whatif::WhatIf>> =
            Default::default();
        for (((key, _), _), found) in jobs.iter().zip(rows) {
            by_key.entry(key.as_str()).or_default().extend(found);
        }
        for (key, mut rows) in by_key {
            planner::whatif::rank(&mut rows);
            if let Some(e) = self.entries.get_mut(key) {
                e.whatif = Some(rows.into());
            }
        }
    }
}

/// The decided deployments from the cache: each written layout with the planner's advice
/// on it (its findings added to `diags`), then the planner's choices for `layout = auto`
/// (E0701 in `diags` where there is none), which add no diagnostics (the planner chose
/// them for meeting every SLO) and are lowered after the written layouts.
fn decide(
    p: &Program,
    scenarios: &[Keyed],
    cache: &AnalysisCache,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Decided> {
    let mut decided = Vec::new();
    let mut auto_decided = Vec::new();
    // A disaggregated deployment's one search (on its decode pool) is both pools'.
    let pair_search: std::collections::HashMap<crate::program::DefId, Arc<Search>> = scenarios
        .iter()
        .filter(|(_, ds)| ds.pool.as_ref().is_some_and(|x| x.pool == Pool::Decode))
        .filter_map(|(k, ds)| Some((ds.deploy, cache.entries[k].search.clone()?)))
        .collect();
    for (key, ds) in scenarios {
        let e = &cache.entries[key];
        if ds.auto_layout {
            match (&e.search, &e.chosen) {
                (Some(search), Some(chosen)) if !chosen.is_empty() => {
                    // What the chosen layout deploys is checked as if written: its warnings
                    // (W0410's N−1, W0501's waiting clients, …) are the deployment's.
                    for (x, w) in chosen.iter() {
                        diags.extend(analysis::diagnostics_for(p, x, &w.analysis.findings));
                    }
                    auto_decided.extend(chosen.iter().map(|(x, w)| Decided {
                        scenario: x.clone(),
                        analysis: w.analysis.clone(),
                        search: Some(search.clone()),
                        // A split's pools are not what the what-if planned.
                        whatif: whatif_of(e, x),
                        slots: Vec::new(),
                        pool_failure: w.pool_failure.clone(),
                    }))
                }
                (Some(search), _) => diags.extend(planner::no_layout(p, ds, search)),
                (None, _) => {}
            }
            continue;
        }
        let Some(written) = &e.written else { continue };
        let mut a = written.analysis.clone();
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
            whatif: whatif_of(e, ds),
            analysis: a,
            slots: Vec::new(),
            pool_failure: written.pool_failure.clone(),
        });
    }
    decided.extend(auto_decided);
    // The pair's N−1, computed on the decode pool, is the prefill pool's too.
    let pair_failure: std::collections::HashMap<crate::program::DefId, Arc<planner::PoolFailure>> =
        decided
            .iter()
            .filter(|d| {
                d.scenario
                    .pool
                    .as_ref()
                    .is_some_and(|x| x.pool == Pool::Decode)
            })
            .filter_map(|d| Some((d.scenario.deploy, d.pool_failure.clone()?)))
            .collect();
    for d in decided.iter_mut().filter(|d| d.scenario.pool.is_some()) {
        d.pool_failure = pair_failure.get(&d.scenario.deploy).cloned();
    }
    decided
}

/// The cached what-if for the decided `ds`: none for a split's pool.
fn whatif_of(e: &CachedDeployment, ds: &DeploymentScenario) -> Arc<[planner::whatif::WhatIf]> {
    match (&e.whatif, &ds.pool) {
        (Some(rows), None) => rows.clone(),
        _ => Arc::from(Vec::new()),
    }
}

/// Lowers the placed deployments, with the figures their forecasts need.
fn lower(
    p: &Program,
    lowered: &[&Decided],
) -> (crate::ir::LaunchPlan, crate::ir::Forecast, Vec<Diagnostic>) {
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
            whatif: &d.whatif,
            slots: &d.slots,
            pool_failure: d.pool_failure.as_deref(),
        })
        .collect();
    crate::ir::lower(p, &planned)
}

/// The planner's choice for `layout = auto`, analysed in full: the chosen layout, or the
/// two pools of the split when the disaggregated family wins; empty when nothing meets
/// the SLOs.
/// A deployment's one search: an auto layout that nothing fits is searched at shorter
/// contexts too (E0701 says which); a written one is compared at its own.
fn search_for(ds: &DeploymentScenario) -> Search {
    let space = planner::space_of(ds);
    if ds.auto_layout {
        planner::search_fitting_context(&ds.scenario, &ds.slo, &space)
    } else {
        planner::search(&ds.scenario, &ds.slo, &space)
    }
}

/// What `layout = auto` deploys for `ds` after `search`: the chosen layout (in its formats,
/// engine options and speculation verdict) with its analysis and advice, or, where the
/// disaggregated family wins (`Search::split_wins`), the best split's two pools (prefill
/// first) with theirs and, on the decode pool, the pair's N−1. `dic compile` lowers these;
/// `dic plan` names them and prints their N−1.
pub fn choice_of(ds: &DeploymentScenario, search: &Search) -> Vec<(DeploymentScenario, Written)> {
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
            // The planner weighed the declared draft on this layout (`planner::speculation`):
            // off, the launch has no `--speculative-config`.
            if c.speculation_off() {
                chosen.scenario.engine.speculative = None;
            }
            crate::analysis::deepep::apply_layout_defaults(&mut chosen.scenario);
            let mut a = analyze_and_advise(&chosen.scenario, &chosen.slo);
            // The planner chose this layout over every other in its space: advice that
            // proposes another layout of that space (A0401's wider DP, W0404's fewer
            // GPUs) would contradict its own choice. Advice beyond the space stays
            // (A0501's formats the file does not allow, W0410's N−1).
            a.findings.retain(|f| {
                !matches!(
                    f.code,
                    diagnostics::Code::DpBeatsTp | diagnostics::Code::MoreGpusWorse
                )
            });
            let written = Written {
                analysis: a,
                pool_failure: None,
            };
            (chosen, written)
        })
        .collect()
}

/// A written deployment's analysis: a pool of a disaggregated one as such (its own checks,
/// the pair's prediction; the aggregated advice does not apply), any other with the
/// planner's advice. On a split's decode pool, also the pair's N−1 (once for both pools),
/// and W0410 from it with the pair's other findings.
pub fn analyze_written(ds: &DeploymentScenario) -> Written {
    match &ds.pool {
        Some(part) => {
            let mut a = analysis::analyze_pool(&ds.scenario, part, &ds.slo);
            let pool_failure = (part.pool == Pool::Decode)
                .then(|| {
                    let (ps, dsc) = part.pools(&ds.scenario);
                    planner::pool_failure(ps, dsc, part.same_group, &ds.slo)
                })
                .flatten();
            if let Some(f) = &pool_failure {
                let w0410 = planner::pool_failure::pools_under_failure(f, &ds.scenario, part, &a);
                a.findings.extend(w0410);
            }
            Written {
                analysis: a,
                pool_failure: pool_failure.map(Arc::new),
            }
        }
        None => Written {
            analysis: analyze_and_advise(&ds.scenario, &ds.slo),
            pool_failure: None,
        },
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
        let got = two[1].1.analysis.prediction.as_ref().expect("predicted");
        assert!((got.tpot * 1e3 / best.tpot_ms - 1.0).abs() < 1e-9);
        // The pair's N−1 is computed once, with the decode pool's analysis.
        assert!(two[0].1.pool_failure.is_none());
        let part = d.pool.as_ref().expect("a pool");
        let (ps, dsc) = part.pools(&d.scenario);
        assert_eq!(
            two[1].1.pool_failure.as_deref(),
            planner::pool_failure(ps, dsc, part.same_group, &d.slo).as_ref()
        );
    }
}
