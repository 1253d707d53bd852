//! The planner: for `layout = auto` (and to second-guess explicit layouts), search the
//! layouts the hardware allows and pick the cheapest that meets every SLO.
//!
//! Search space: the weight and KV-cache formats the deployment allows × EP (MoE only) ×
//! TP (powers of two dividing the heads) × PP × DP, on the cluster's GPUs. Every candidate
//! goes through [`analyze_quick`] — the same models and rules as an explicit layout. Bounds
//! instead of truncation: a structural or memory failure does not depend on DP, so the DP
//! loop stops there; once a DP count meets the SLOs, more replicas only cost more.
//! Ranking: $/h, then $ per million output tokens, then the escalation order (quantize →
//! TP inside a node → DP replicas → PP across nodes), then fewer GPUs; then, among those
//! within 5% of the cheapest $/h, the first that survives N−1 (a replica down and the
//! fullest node lost, `failure::prefer_surviving`) moves to the front.

use crate::analysis::rules::SloTarget;
use crate::analysis::{analyze_quick, deployable, DeploymentScenario, Scenario};
use crate::diagnostics::Severity;
use crate::program::Layout;
use serde::Serialize;
use std::sync::atomic::{AtomicUsize, Ordering};

mod advice;
mod context;
mod disaggregated;
pub mod failure;
pub mod goodput;
pub mod pool_failure;
mod scaling;
pub mod speculation;
pub mod whatif;
mod wide_ep;
pub use advice::{advise, cheaper_layout, no_layout, working_layout};
pub use context::{search_fitting_context, search_fitting_context_to, thousands, ContextFit};
pub use disaggregated::{
    aggregated_wins, best_aggregated_within, carried, choose_family, disaggregated_family,
    DisaggCandidate,
};
pub use failure::{failure, most_clients, Failure, LoadUnit};
pub use goodput::{Binding, Goodput};
pub use pool_failure::{pool_failure, PoolFailure};

#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    pub layout: Layout,
    pub weights: String,
    pub kv_cache: String,
    pub gpus: u64,
    pub nodes: u64,
    /// $/h of the nodes it occupies (GPU count when the cluster has no price).
    pub cost_per_hour: f64,
    pub priced: bool,
    pub cost_per_million_output: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    pub meets_slo: bool,
    /// Why it was rejected (first error), if it was.
    pub rejected_because: Option<String>,
    #[serde(skip)]
    pub rejected_code: Option<crate::diagnostics::Code>,
    /// Saturated output tokens/s (all replicas).
    pub max_output_tokens_per_s: Option<f64>,
    /// The offered load exceeds what it can serve (open loop).
    #[serde(skip)]
    pub overloaded: bool,
    /// Requests running per replica at the workload's load (fewer than offered when the
    /// KV cache or max_num_seqs caps them).
    #[serde(skip)]
    pub running: Option<f64>,
    /// The checker's W0501 on this layout: a closed loop's clients beyond what a replica
    /// runs at once wait for a slot before their prefill.
    #[serde(skip)]
    pub clients_wait: bool,
    /// How far it is from meeting the deployment's bounds, for "the closest" layout: an
    /// overloaded candidate by the offered rate over what it serves, any other by its worst
    /// bound (predicted ÷ bound, ≥ 1 when missed); `None` without a prediction.
    #[serde(skip)]
    pub shortfall: Option<(bool, f64)>,
    /// Engine options the planner chose for this layout where the deployment left them
    /// to it (`analysis::deepep::wide_ep_engine_options`): DeepEP's low-latency all-to-all
    /// and its token budget for wide EP across the trays of one NVLink domain.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub engine: Option<crate::analysis::deepep::EngineChoice>,
    /// The load it carries within the SLOs (feasible candidates only).
    pub goodput: Option<Goodput>,
    /// With a declared draft: whether the planner keeps it for this layout, and why
    /// (`speculation::weigh`); `None` without one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub speculation: Option<speculation::SpeculationChoice>,
}

impl Candidate {
    /// Whether this candidate carries the load the deployment `s` carries at its
    /// prediction `p`: not overloaded where that one is not and, in a closed loop,
    /// admitting as many requests (a layout that admits fewer is faster per token for
    /// serving fewer). Advice compares like with like only.
    pub(crate) fn carries_load_of(
        &self,
        s: &Scenario,
        p: &crate::analysis::perf::Prediction,
    ) -> bool {
        let closed_loop = s
            .workload
            .is_some_and(|w| matches!(w.load, crate::analysis::Load::Concurrency(_)));
        (!self.overloaded || p.overloaded)
            && (!closed_loop || self.running.is_some_and(|r| r >= p.running * 0.99))
    }

    /// The escalation order as a sort key: quantized first, then TP, DP, PP; without
    /// EP before with it when nothing else differs.
    fn escalation(&self) -> (u64, u64, u64, u8, bool) {
        (
            self.layout.pp,
            self.layout.dp,
            self.layout.tp,
            u8::from(matches!(self.weights.as_str(), "bf16" | "fp16" | "fp32")),
            self.layout.ep,
        )
    }

    pub fn describe(&self) -> String {
        let mut s = format!("{}", self.layout);
        if self.weights != "bf16" {
            s.push_str(&format!(", weights {}", self.weights));
        }
        if self.kv_cache != "auto" {
            s.push_str(&format!(", KV {}", self.kv_cache));
        }
        if let Some(e) = &self.engine {
            s.push_str(&format!(", {}", e.describe()));
        }
        if self.speculation_off() {
            s.push_str(", speculation off");
        }
        s
    }
}

/// One family of rejected candidates and why (one line).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Rejection {
    pub family: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ScalingPoint {
    pub gpus: u64,
    pub layout: Layout,
    /// The formats it was predicted in: the deployment's own.
    pub weights: String,
    pub kv_cache: String,
    pub output_tokens_per_s_per_gpu: f64,
    pub tpot_ms: f64,
    pub cost_per_million_output: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Search {
    pub chosen: Option<Candidate>,
    /// Candidates that meet every SLO, best first.
    pub ranked: Vec<Candidate>,
    /// The feasible-but-slow and infeasible candidate closest to meeting the SLOs, when
    /// nothing meets them.
    pub closest: Option<Candidate>,
    pub rejected: Vec<Rejection>,
    pub evaluated: usize,
    /// Candidates skipped by bounds (never analysed).
    pub pruned: usize,
    /// Best single replica per GPU count (TP inside nodes first, then PP).
    pub scaling: Vec<ScalingPoint>,
    /// The smallest GPU count past which more GPUs raise TPOT.
    pub worse_from_gpus: Option<u64>,
    /// The deepest pipeline explored: max(8, nodes), so PP can always cross every node;
    /// deeper pipelines only add hand-offs and bubbles.
    pub max_pp: u64,
    /// The disaggregated family in the same formats, best first (at most
    /// [`SPLITS_KEPT`]).
    pub splits: Vec<DisaggCandidate>,
    /// The best split beats the aggregated choice on the same terms (cheaper; or meets
    /// the SLOs where no aggregated layout does; or, at no higher cost, 5% or more output
    /// tokens per GPU at saturation): `layout = auto` deploys it.
    pub split_wins: bool,
    /// Which family the planner chose and why, in words.
    pub family_choice: Option<String>,
    /// When nothing was chosen: a shorter `max_model_len` at which a layout meets every
    /// SLO ([`search_fitting_context`]).
    pub context: Option<ContextFit>,
    /// N−1 for the layout searched from (a written layout), and for the chosen one.
    pub failure: Option<Failure>,
    pub chosen_failure: Option<Failure>,
    /// The cheapest ranked layout that survives N−1 when the chosen one does not and
    /// costs more than [`failure::NEAR_EQUAL_COST`] over it (at near-equal cost the
    /// planner chooses the survivor itself, `failure::prefer_surviving`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub surviving: Option<Candidate>,
}

/// Splits a search keeps (the report's and `dic plan`'s).
pub const SPLITS_KEPT: usize = 5;

impl Search {
    /// No search (for callers that need only diagnostics).
    pub fn empty() -> Search {
        Search {
            chosen: None,
            ranked: Vec::new(),
            closest: None,
            rejected: Vec::new(),
            evaluated: 0,
            pruned: 0,
            scaling: Vec::new(),
            worse_from_gpus: None,
            max_pp: 0,
            splits: Vec::new(),
            split_wins: false,
            family_choice: None,
            context: None,
            failure: None,
            chosen_failure: None,
            surviving: None,
        }
    }
}

/// What the planner may vary.
pub struct SearchSpace {
    pub weights: Vec<String>,
    pub kv_cache: Vec<String>,
}

/// The TP sizes the planner considers: powers of two vLLM can split the model over (the
/// checker's own rule, `rules::valid_tp_sizes`: query and KV heads, linear-attention and
/// Mamba heads, MLP widths), up to twice the scale-up domain (one TP group may not span
/// more) and the cluster's GPUs.
fn tp_sizes(s: &Scenario) -> Vec<u64> {
    let t = &s.topology;
    let tp_max = t
        .total_gpus()
        .max(1)
        .min(t.scale_up_domain.max(t.gpus_per_node) * 2);
    crate::analysis::rules::valid_tp_sizes(&s.model, tp_max)
}

fn evaluate(
    base: &Scenario,
    slo: &[SloTarget],
    layout: Layout,
    weights: &str,
    kv: &str,
) -> Candidate {
    wide_ep::with_engine_options(base, layout, |engine| {
        evaluate_with(base, slo, layout, weights, kv, engine)
    })
}

/// A layout as the search weighs it: [`evaluate`], and with a declared draft the same
/// layout without it, the better kept (`speculation::weigh`). Advice's comparisons
/// (`evaluate` alone) keep the engine as written.
fn evaluate_searched(
    base: &Scenario,
    slo: &[SloTarget],
    layout: Layout,
    weights: &str,
    kv: &str,
) -> Candidate {
    let declared = evaluate(base, slo, layout, weights, kv);
    speculation::weigh(base, slo, declared, |plain| {
        evaluate(plain, slo, layout, weights, kv)
    })
}

/// Whether a layout, aggregated or split, serves the deployment as declared: its bounds
/// met and, where no bound limits TTFT (no SLOs, or only TPOT and throughput), every client
/// admitted at once (`clients_wait` false: no W0501). A TTFT bound decides how long a
/// client may wait for a slot.
fn serves(meets_slo: bool, clients_wait: bool, slo: &[SloTarget]) -> bool {
    let ttft_bounded = slo
        .iter()
        .any(|t| t.metric == crate::program::SloMetric::Ttft);
    meets_slo && (!clients_wait || ttft_bounded)
}

impl Candidate {
    /// Whether it serves the deployment as declared ([`serves`]).
    fn serves(&self, slo: &[SloTarget]) -> bool {
        serves(self.meets_slo, self.clients_wait, slo)
    }

    /// Whether this variant of one layout predicts better than `other`: checks clean
    /// before not, meets its bounds before not, then the smaller shortfall, then TPOT.
    fn ranks_before(&self, other: &Candidate) -> bool {
        let key = |c: &Candidate| {
            (
                c.rejected_code.is_some_and(|code| {
                    !matches!(
                        code,
                        crate::diagnostics::Code::SloInfeasible
                            | crate::diagnostics::Code::Overloaded
                    )
                }),
                !c.meets_slo,
                c.shortfall.map_or(f64::INFINITY, |s| s.1),
                c.tpot_ms.unwrap_or(f64::INFINITY),
            )
        };
        let (a, b) = (key(self), key(other));
        (a.0, a.1)
            .cmp(&(b.0, b.1))
            .then(a.2.total_cmp(&b.2))
            .then(a.3.total_cmp(&b.3))
            .is_lt()
    }
}

fn evaluate_with(
    base: &Scenario,
    slo: &[SloTarget],
    layout: Layout,
    weights: &str,
    kv: &str,
    engine: Option<crate::analysis::deepep::EngineChoice>,
) -> Candidate {
    let mut s = base.clone();
    s.layout = layout;
    if let Some(e) = &engine {
        e.apply(&mut s);
    }
    crate::analysis::deepep::apply_layout_defaults(&mut s);
    s.model.weights = weights.to_string();
    s.model.kv_cache = kv.to_string();
    let a = analyze_quick(&s, slo);
    let gpus = layout.gpus();
    let (cost_per_hour, priced) = match s.topology.price_for_layout(&layout) {
        Some(p) => (p, true),
        None => (gpus as f64, false),
    };
    let error = a.findings.iter().find(|f| f.severity == Severity::Error);
    let p = a.prediction.as_ref();
    let tps = p.map(|p| p.output_tokens_per_s);
    let shortfall = p.map(
        |p| match s.workload.and_then(|w| w.rate().map(|r| (r, w.output))) {
            Some((r, output)) if p.overloaded => {
                let served = p.max_output_tokens_per_s / output.max(1.0);
                (
                    true,
                    if served > 0.0 {
                        r / served
                    } else {
                        f64::INFINITY
                    },
                )
            }
            _ => (
                false,
                a.slo
                    .iter()
                    .map(|r| {
                        let (v, b) = (r.predicted, r.target.value);
                        match r.target.op {
                            crate::syntax::ast::Op::Le | crate::syntax::ast::Op::Lt => v / b,
                            _ => b / v,
                        }
                    })
                    .filter(|x| !x.is_nan())
                    .fold(0.0, f64::max),
            ),
        },
    );
    Candidate {
        layout,
        weights: weights.to_string(),
        kv_cache: kv.to_string(),
        gpus,
        nodes: s.topology.nodes_for_layout(&layout),
        cost_per_hour,
        priced,
        cost_per_million_output: tps
            .filter(|t| *t > 0.0 && priced)
            .map(|t| cost_per_hour / (t * 3600.0) * 1e6),
        ttft_ms: p.map(|p| p.ttft * 1e3).filter(|v| v.is_finite()),
        tpot_ms: p.map(|p| p.tpot * 1e3),
        output_tokens_per_s: tps,
        meets_slo: error.is_none(),
        rejected_because: error.map(|f| f.message.clone()),
        rejected_code: error.map(|f| f.code),
        max_output_tokens_per_s: p.map(|p| p.max_output_tokens_per_s),
        overloaded: p.is_some_and(|p| p.overloaded),
        running: p.map(|p| p.running),
        clients_wait: a
            .findings
            .iter()
            .any(|f| f.code == crate::diagnostics::Code::LoadNotAdmitted),
        shortfall,
        engine,
        goodput: None,
        speculation: None,
    }
}

/// True when a replica of `replica` GPUs times `dp` can launch: a replica inside a node,
/// or whole nodes per replica; the whole layout within a node or whole nodes (vLLM's
/// `(dp × pp × tp) % nnodes == 0`).
fn whole_nodes(replica: u64, dp: u64, per_node: u64) -> bool {
    let gpus = replica * dp;
    if replica > per_node {
        replica.is_multiple_of(per_node)
    } else {
        gpus <= per_node || gpus.is_multiple_of(per_node)
    }
}

/// One family of layouts: weights, KV cache, EP, TP, PP (DP is searched inside it).
#[derive(Clone, Copy)]
struct Family<'a> {
    weights: &'a str,
    kv: &'a str,
    ep: bool,
    tp: u64,
    pp: u64,
}

/// What the search has found so far, shared by every family's search.
struct Tally {
    evaluated: usize,
    pruned: usize,
    feasible: Vec<Candidate>,
    rejected: Vec<Rejection>,
    closest: Option<Candidate>,
    /// The cheapest feasible candidate's $/h (GPUs unpriced): the bound that prunes.
    best_cost: f64,
}

impl Tally {
    /// Keep `c` as the closest to meeting the bounds when it is closer than the last.
    fn consider(&mut self, c: &Candidate) {
        let better = match (
            &c.shortfall,
            self.closest.as_ref().and_then(|b| b.shortfall),
        ) {
            (Some(x), Some(y)) => {
                (x.0, x.1, c.gpus) < (y.0, y.1, self.closest.as_ref().map_or(0, |b| b.gpus))
            }
            (Some(_), None) => true,
            _ => false,
        };
        if better {
            self.closest = Some(c.clone());
        }
    }

    /// Keep `c`; the cheapest that serves the deployment bounds the rest of the search.
    fn accept(&mut self, c: Candidate, slo: &[SloTarget]) {
        if c.serves(slo) {
            self.best_cost = self.best_cost.min(c.cost_per_hour);
        }
        self.feasible.push(c);
    }
}

/// Families (format × EP × TP × PP), cheapest first, so that a feasible candidate is
/// found early and bounds the rest; with the count of those over the cluster's GPUs. No
/// pipeline stages for a model whose vLLM class has none (`rules::pp_refusal`, E0801).
fn families<'a>(
    base: &Scenario,
    space: &'a SearchSpace,
    tps: &[u64],
    max_pp: u64,
) -> (Vec<Family<'a>>, usize) {
    let total = base.topology.total_gpus().max(1);
    let eps: &[bool] = if base.model.is_moe() {
        &[false, true]
    } else {
        &[false]
    };
    let mut pruned = 0;
    let mut out = Vec::new();
    for weights in &space.weights {
        for kv in &space.kv_cache {
            for &ep in eps {
                for &tp in tps {
                    for pp in 1..=max_pp {
                        if crate::analysis::rules::pp_refusal(&base.model, pp).is_some() {
                            continue;
                        }
                        if tp * pp > total {
                            pruned += 1;
                            continue;
                        }
                        out.push(Family {
                            weights,
                            kv,
                            ep,
                            tp,
                            pp,
                        });
                    }
                }
            }
        }
    }
    out.sort_by_key(|f| f.tp * f.pp);
    (out, pruned)
}

pub fn search(base: &Scenario, slo: &[SloTarget], space: &SearchSpace) -> Search {
    search_with(base, slo, space, Extent::Whole)
}

/// How much of a search to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extent {
    /// Everything the report, the advice and `dic plan` read: the aggregated ranking,
    /// the scaling curve and the disaggregated family.
    Whole,
    /// The aggregated ranking alone (its choice, its N−1): what the what-if across GPU
    /// types reads of each GPU's search, without the scaling curve and the P/D family.
    Aggregated,
}

/// [`search`], to the given extent.
pub fn search_with(
    base: &Scenario,
    slo: &[SloTarget],
    space: &SearchSpace,
    extent: Extent,
) -> Search {
    SEARCHES.fetch_add(1, Ordering::Relaxed);
    let tps = tp_sizes(base);
    let max_pp = base.model.layers.min(8u64.max(base.topology.nodes));
    let (families, pruned) = families(base, space, &tps, max_pp);
    let mut tally = Tally {
        evaluated: 0,
        pruned,
        feasible: Vec::new(),
        rejected: Vec::new(),
        closest: None,
        best_cost: f64::INFINITY,
    };
    for family in families {
        search_family(base, slo, space, family, &mut tally);
    }
    let Tally {
        evaluated,
        pruned,
        mut feasible,
        rejected,
        closest,
        ..
    } = tally;
    // The load each carries within the SLOs, which ranks layouts of equal cost (at the
    // declared load they serve the same tokens, so $/M tokens cannot tell them apart).
    for c in &mut feasible {
        if c.goodput.is_none() {
            c.goodput = goodput_of(base, slo, c);
        }
    }
    let per_gpu = |c: &Candidate| c.goodput.as_ref().map_or(0.0, |g| g.requests_per_s_per_gpu);
    // Where nothing bounds TTFT, a layout whose clients wait for a slot (the checker's
    // W0501) ranks after every one that admits them all (`Candidate::serves`).
    feasible.sort_by(|a, b| {
        b.serves(slo)
            .cmp(&a.serves(slo))
            .then(a.cost_per_hour.total_cmp(&b.cost_per_hour))
            .then(per_gpu(b).total_cmp(&per_gpu(a)))
            .then(a.escalation().cmp(&b.escalation()))
            .then(a.gpus.cmp(&b.gpus))
    });
    // At near-equal cost, a layout that survives a replica down and a lost node first.
    let surviving = failure::prefer_surviving(&mut feasible, slo, |c| deployed_scenario(base, c));
    let formats = formats_of(feasible.first(), base, space);
    let ((scaling, worse_from_gpus), mut splits) = match extent {
        Extent::Whole => {
            let mut in_formats = base.clone();
            in_formats.model.weights = formats.0.to_string();
            in_formats.model.kv_cache = formats.1.to_string();
            (
                scaling::scaling_curve(base, formats, &tps),
                disaggregated_family(&in_formats, slo),
            )
        }
        Extent::Aggregated => ((Vec::new(), None), Vec::new()),
    };
    splits.truncate(SPLITS_KEPT);
    let unpairable = disaggregated::unpairable(base, &splits);
    let (split_wins, family_choice) =
        disaggregated::choose_family(&feasible, splits.first(), slo, unpairable.as_deref());
    let chosen_failure = feasible
        .first()
        .and_then(|c| failure(&deployed_scenario(base, c), slo));
    Search {
        failure: failure(base, slo),
        chosen_failure,
        surviving,
        splits,
        split_wins,
        family_choice,
        chosen: feasible.first().cloned(),
        closest: if feasible.is_empty() { closest } else { None },
        ranked: feasible,
        rejected,
        evaluated,
        pruned,
        scaling,
        worse_from_gpus,
        max_pp,
        context: None,
    }
}

/// `base` in a candidate's layout and formats.
fn candidate_scenario(base: &Scenario, c: &Candidate) -> Scenario {
    let mut s = base.clone();
    s.layout = c.layout;
    s.model.weights = c.weights.clone();
    s.model.kv_cache = c.kv_cache.clone();
    if c.speculation_off() {
        s.engine.speculative = None;
    }
    s
}

/// A candidate as `layout = auto` deploys it: its layout, formats and the engine options
/// the planner chose for it (as `evaluate_with` predicted it and the driver analyses it).
fn deployed_scenario(base: &Scenario, c: &Candidate) -> Scenario {
    let mut s = candidate_scenario(base, c);
    if let Some(e) = &c.engine {
        e.apply(&mut s);
    }
    crate::analysis::deepep::apply_layout_defaults(&mut s);
    s
}

/// A candidate's goodput, in its own layout and formats.
fn goodput_of(base: &Scenario, slo: &[SloTarget], c: &Candidate) -> Option<Goodput> {
    goodput::aggregated(&candidate_scenario(base, c), slo, c.cost_per_hour, c.priced)
}

/// Search one family: the cheapest replica count that meets the bounds joins the
/// feasible, or the family is rejected with why.
fn search_family(
    base: &Scenario,
    slo: &[SloTarget],
    space: &SearchSpace,
    f: Family,
    tally: &mut Tally,
) {
    let t = &base.topology;
    let m = &base.model;
    let Family {
        weights: w,
        kv,
        ep,
        tp,
        pp,
    } = f;
    let max_dp = t.total_gpus().max(1) / (tp * pp);
    // A lower bound: a layout of `gpus` GPUs occupies at least this many nodes.
    let family_cost = |gpus: u64| t.price_for(gpus).unwrap_or(gpus as f64);
    let best_cost = tally.best_cost;
    let layout_at = |dp: u64| Layout {
        tp,
        pp,
        dp,
        ep,
        ..Layout::default()
    };
    // A family whose single replica already costs more than twice the best feasible
    // candidate cannot be cheaper, nor a close alternative.
    if family_cost(tp * pp) > 2.0 * best_cost {
        tally.pruned += max_dp as usize;
        tally.rejected.push(Rejection {
            family: family_name(layout_at(1), w, kv, &m.weights, space.weights.len()),
            reason: if t.price_per_node_hour.is_some() {
                format!("costs at least ${:.2}/h, over twice the cheapest layout that meets the SLOs (${best_cost:.2}/h)", family_cost(tp * pp))
            } else {
                format!("needs {} GPUs, over twice the fewest that meet the SLOs ({best_cost:.0})", tp * pp)
            },
        });
        return;
    }
    let per_node = t.gpus_per_node.max(1);
    // Replica counts that can launch, ascending: only those vLLM can launch and the
    // cluster can place (the checker's own rules, E0801 and E0408) — meeting the bounds
    // is monotone in DP, launching is not (a MoE engine's DP must fill whole nodes). An
    // EP group past one rank per expert leaves ranks without experts (W0409).
    let shaped: Vec<u64> = (1..=max_dp)
        .filter(|dp| whole_nodes(tp * pp, *dp, per_node))
        .filter(|dp| layout_at(*dp).ep_ranks_without_experts(m.experts) == 0)
        .collect();
    let dps: Vec<u64> = shaped
        .iter()
        .copied()
        .filter(|dp| deployable::launchable_and_placeable(base, layout_at(*dp)))
        .take_while(|dp| family_cost(tp * pp * dp) <= 2.0 * best_cost)
        .collect();
    tally.pruned += (max_dp as usize).saturating_sub(dps.len());
    let family = family_name(layout_at(1), w, kv, &m.weights, space.weights.len());
    let Some(&first_dp) = dps.first() else {
        tally.rejected.push(Rejection {
            family,
            reason: match shaped.first() {
                Some(&dp) => unlaunchable_reason(base, layout_at(dp)),
                None => format!(
                    "{} GPUs per replica are neither inside one {per_node}-GPU node nor whole nodes",
                    tp * pp
                ),
            },
        });
        return;
    };
    // The largest affordable replica count first: if it misses, no smaller one meets
    // (meeting the bounds is taken as monotone in DP: more replicas carry more load,
    // a MoE model's experts spread thinner; its DP-coupled expert traffic could in
    // principle make the largest DP slower again — the examples choose as a scan of
    // every DP does). Then the smallest, then bisection between them: at most
    // 2 + log2(N) evaluations per family, one for a family that cannot work.
    let top_idx = dps.len() - 1;
    let top = evaluate_searched(base, slo, layout_at(dps[top_idx]), w, kv);
    tally.evaluated += 1;
    if !top.meets_slo {
        tally.consider(&top);
        tally.rejected.push(Rejection {
            family,
            reason: rejection_reason(&top),
        });
        return;
    }
    if top_idx == 0 {
        tally.accept(top, slo);
        return;
    }
    let first = evaluate_searched(base, slo, layout_at(first_dp), w, kv);
    tally.evaluated += 1;
    if first.serves(slo) {
        tally.accept(first, slo);
        return;
    }
    tally.consider(&first);
    let (mut lo, mut hi) = (0, top_idx);
    let mut best = top;
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        let c = evaluate_searched(base, slo, layout_at(dps[mid]), w, kv);
        tally.evaluated += 1;
        if c.serves(slo) {
            hi = mid;
            best = c;
        } else {
            tally.consider(&c);
            lo = mid;
        }
    }
    tally.accept(best, slo);
}

/// Why no replica count of a family can be launched or placed, from the first that
/// has the right shape: the launch rule's words (E0801), else the cluster's nodes.
fn unlaunchable_reason(base: &Scenario, layout: Layout) -> String {
    match deployable::launch_shape(base, layout) {
        Err(refusal) => refusal.message,
        Ok(_) => format!(
            "{} replica(s) of {} GPUs need {} nodes as placed, the cluster has {}",
            layout.dp,
            layout.replica_gpus(),
            base.topology.nodes_for_layout(&layout),
            base.topology.nodes
        ),
    }
}

/// The formats the scaling curve and the disaggregated family are predicted in, and a
/// winning split deploys in: the planner's choice's, or the first allowed (the model's
/// own when the space is not widened).
pub fn formats_of<'a>(
    chosen: Option<&'a Candidate>,
    base: &'a Scenario,
    space: &'a SearchSpace,
) -> (&'a str, &'a str) {
    match chosen {
        Some(c) => (c.weights.as_str(), c.kv_cache.as_str()),
        None => (
            space
                .weights
                .first()
                .unwrap_or(&base.model.weights)
                .as_str(),
            space
                .kv_cache
                .first()
                .unwrap_or(&base.model.kv_cache)
                .as_str(),
        ),
    }
}

/// `tp 4 × pp 2 (× ep)`, with the formats when they vary.
fn family_name(layout: Layout, w: &str, kv: &str, model_weights: &str, n_formats: usize) -> String {
    format!(
        "{}{}{}",
        Layout { dp: 1, ..layout }
            .to_string()
            .replace(" × dp 1", ""),
        if w != model_weights || n_formats > 1 {
            format!(", weights {w}")
        } else {
            String::new()
        },
        if kv != "auto" {
            format!(", KV {kv}")
        } else {
            String::new()
        }
    )
}

/// Why a family's largest affordable candidate was rejected, in one line; an overloaded
/// one says so first (its latencies are those of a queue that never drains), with the
/// replicas and GPUs it had.
fn rejection_reason(top: &Candidate) -> String {
    let reason = short(top.rejected_because.as_deref().unwrap_or(""));
    if top.overloaded {
        format!(
            "the declared load overloads its {} replica(s) on {} GPUs: {reason}",
            top.layout.dp, top.gpus
        )
    } else {
        reason
    }
}

/// One line: the message without the deployment prefix. A message past 300 characters
/// is cut at a word boundary with `…` — never inside a number (a cut figure reads as a
/// different, wrong figure: "maximum model length is 65" for 6512).
fn short(reason: &str) -> String {
    let r = reason
        .split_once(": ")
        .map(|(a, b)| if a.starts_with("deploy") { b } else { reason })
        .unwrap_or(reason);
    const MAX: usize = 300;
    if r.chars().count() <= MAX {
        return r.to_string();
    }
    let head: String = r.chars().take(MAX).collect();
    let cut = head.rfind(' ').unwrap_or(head.len());
    format!("{}…", head[..cut].trim_end_matches([',', ';', ':']))
}

/// Every search run in this process: a test counts them (one per deployment per check).
pub static SEARCHES: AtomicUsize = AtomicUsize::new(0);

/// How many searches this process has run.
pub fn searches() -> usize {
    SEARCHES.load(Ordering::Relaxed)
}

/// The formats the planner may choose for a deployment (`allowed_weights`,
/// `allowed_kv_cache`, defaulting to the model's own).
pub fn space_of(ds: &DeploymentScenario) -> SearchSpace {
    SearchSpace {
        weights: ds.allowed_weights.clone(),
        kv_cache: ds.allowed_kv_cache.clone(),
    }
}

/// The first deployment of `.dist` text as the planner sees it (tests of the planner's
/// modules write their cases as text).
#[cfg(test)]
pub(crate) fn scenario_of_text(src: &str) -> (Scenario, Vec<SloTarget>) {
    let ds = scenarios_of_text(src).remove(0);
    (ds.scenario, ds.slo)
}

/// Every deployment of `.dist` text (a disaggregated one's pools each).
#[cfg(test)]
pub(crate) fn scenarios_of_text(src: &str) -> Vec<DeploymentScenario> {
    let world = crate::source::MemoryWorld::new().with("p.dist", src);
    let mut session = crate::resolve::Session::new(&world);
    session.load_root("p.dist").expect("readable");
    let front = crate::front::check_session(session);
    assert!(front.diagnostics.is_empty(), "{:?}", front.diagnostics);
    crate::analysis::scenarios_from_program(&front.program)
}

#[cfg(test)]
mod reuse_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_reasons_keep_numbers_whole() {
        let long = "one request of max_model_len (8000) needs 1.22 GiB of KV cache, more than the 1018.2 MiB available; the estimated maximum model length is 6512";
        assert_eq!(short(long), long);
        let huge = format!("{} 123456789", "word ".repeat(70));
        let cut = short(&huge);
        assert!(cut.ends_with('…') && !cut.contains("1234"), "{cut}");
    }
}
