//! "More GPUs make it worse", one algorithm for its two consumers: the fastest single
//! replica on a given number of GPUs ([`fastest_replica`]) draws the report's scaling
//! curve and decides W0404 for a written layout.

use super::{evaluate, tp_sizes, Candidate, ScalingPoint};
use crate::analysis::perf::Prediction;
use crate::analysis::rules::{Anchor, Finding};
use crate::analysis::{Load, Scenario, WorkloadSpec};
use crate::diagnostics::Code;
use crate::program::Layout;

/// A replica is faster when its TPOT is at least 2% lower: closer than that is within
/// the model's resolution, not a reason to change a layout.
fn clearly_faster(tpot_ms: f64, than_ms: f64) -> bool {
    tpot_ms < than_ms * 0.98
}

/// The fastest replica (lowest TPOT, no error, not overloaded) of exactly `gpus` GPUs
/// per replica, over the TP × PP splits with TP in `tps` and PP ≤ `max_pp`, at the
/// scenario's own load, DP, formats and expert parallelism (EP needs 1 < TP × DP ≤ the
/// experts).
pub(super) fn fastest_replica(
    base: &Scenario,
    gpus: u64,
    tps: &[u64],
    max_pp: u64,
) -> Option<Candidate> {
    let mut best: Option<Candidate> = None;
    for &tp in tps.iter().filter(|t| gpus.is_multiple_of(**t)) {
        let pp = gpus / tp;
        if pp > base.model.layers
            || pp > max_pp
            || crate::analysis::rules::pp_refusal(&base.model, pp).is_some()
        {
            continue;
        }
        let mut layout = Layout {
            tp,
            pp,
            ..base.layout
        };
        // EP needs more than one rank, and at most one rank per expert (W0409).
        layout.ep = base.layout.ep
            && layout.ep_size() > 1
            && layout.ep_ranks_without_experts(base.model.experts) == 0;
        let c = evaluate(base, &[], layout, &base.model.weights, &base.model.kv_cache);
        let Some(tpot) = c
            .tpot_ms
            .filter(|_| c.rejected_because.is_none() && !c.overloaded)
        else {
            continue;
        };
        if best
            .as_ref()
            .is_none_or(|b| tpot < b.tpot_ms.unwrap_or(f64::MAX))
        {
            best = Some(c);
        }
    }
    best
}

/// Best single replica for each power-of-two GPU count at 8 requests in flight (a fixed,
/// moderate load so that the points compare), with its saturated throughput per GPU, in
/// the deployment's own formats (`formats`: weights and KV cache, the planner's choice
/// when it chose them); the first count whose replica is clearly slower than the previous
/// one marks "more GPUs make it worse".
pub(super) fn scaling_curve(
    base: &Scenario,
    formats: (&str, &str),
    tps: &[u64],
) -> (Vec<ScalingPoint>, Option<u64>) {
    let total = base.topology.total_gpus().max(1);
    let mut base = base.clone();
    base.workload = base.workload.map(|w| WorkloadSpec {
        load: Load::Concurrency(8),
        ..w
    });
    base.model.weights = formats.0.to_string();
    base.model.kv_cache = formats.1.to_string();
    base.layout = Layout {
        ep: base.model.is_moe(),
        ..Layout::default()
    };
    let mut points: Vec<ScalingPoint> = Vec::new();
    let mut g = 1;
    while g <= total {
        if let Some(c) = fastest_replica(&base, g, tps, 8) {
            points.push(ScalingPoint {
                gpus: g,
                layout: c.layout,
                weights: c.weights.clone(),
                kv_cache: c.kv_cache.clone(),
                output_tokens_per_s_per_gpu: c.max_output_tokens_per_s.unwrap_or(0.0) / g as f64,
                tpot_ms: c.tpot_ms.unwrap_or(0.0),
                cost_per_million_output: c.cost_per_million_output,
            });
        }
        g *= 2;
    }
    let worse = points
        .windows(2)
        .find(|w| clearly_faster(w[0].tpot_ms, w[1].tpot_ms))
        .map(|w| w[1].gpus);
    (points, worse)
}

/// W0404 for a written layout: the fastest replica on fewer GPUs (half as many, or one
/// pipeline stage fewer; any TP × PP split of them the search would consider), at the
/// deployment's own load and DP, when it is clearly faster per token and carries the same
/// load ([`Candidate::carries_load_of`]). On the scaling curve's own layouts and load this
/// is the curve's verdict: a point clearly slower than the one before it is a written
/// layout that gets W0404.
pub(super) fn more_gpus_worse(s: &Scenario, p: &Prediction) -> Option<Finding> {
    let l = s.layout;
    let tpot_ms = p.tpot * 1e3;
    let replica = l.tp * l.pp;
    if replica <= 1 || p.overloaded {
        return None;
    }
    let tps = tp_sizes(s);
    let mut fewer: Vec<u64> = Vec::new();
    if replica.is_multiple_of(2) {
        fewer.push(replica / 2);
    }
    if l.pp > 1 {
        fewer.push(l.tp * (l.pp - 1));
    }
    let best = fewer
        .into_iter()
        .filter_map(|g| fastest_replica(s, g, &tps, l.pp.max(8)))
        .filter(|c| c.tpot_ms.is_some_and(|t| clearly_faster(t, tpot_ms)))
        .filter(|c| c.carries_load_of(s, p))
        .min_by(|a, b| {
            a.tpot_ms
                .unwrap_or(f64::MAX)
                .total_cmp(&b.tpot_ms.unwrap_or(f64::MAX))
        })?;
    let c = best.layout;
    Some(Finding::new(
        Code::MoreGpusWorse,
        Anchor::Layout,
        format!(
            "more GPUs make it worse: `{}` ({} GPUs) predicts TPOT {:.1} ms, `{}` ({} GPUs) {:.1} ms",
            c,
            c.gpus(),
            best.tpot_ms.unwrap_or(f64::NAN),
            l,
            l.gpus(),
            tpot_ms
        ),
        "the extra GPUs add communication faster than they remove work",
        Some(format!("use `{c}` and spend the freed GPUs on dp replicas")),
    ))
}
