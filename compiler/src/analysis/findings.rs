//! Findings the analysis adds once it has a whole prediction: W0405 (speculation that
//! makes TPOT worse), W0407 (a disaggregated pair whose KV transfer costs more than the
//! prefill), and the concurrency at which a latency SLO breaks. The entry points in
//! [`super`] call them; E0410 (a pair vLLM cannot transfer between) is a deployability
//! rule, `super::deployable::pools_cannot_pair`, which the planner applies too.

use super::disagg;
use super::memory::{self, MemoryReport};
use super::perf::{self, Prediction, FITTED};
use super::rules::{self, Anchor, Finding, SloTarget};
use super::{Load, PoolPart, Scenario, WorkloadSpec};
use crate::diagnostics::Code;
use crate::program::SloMetric;

/// W0407: moving a prompt's KV cache from the prefill pool to the decode pool takes
/// longer than computing it, so the fabric the placement crosses, not the GPUs, sets the
/// TTFT the split gains.
pub(super) fn transfer_dominates(
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
pub(super) fn speculation_loss(s: &Scenario, p: &Prediction) -> Option<Finding> {
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
