//! The engine options the planner weighs for a wide-EP layout where the deployment left
//! them to it (issue 39): DeepEP's low-latency all-to-all at vLLM's token budget and
//! larger ones (`analysis::deepep::wide_ep_engine_options`), then dual batch overlap on
//! the best of them, each kept only where it predicts better than what it would replace.

use super::Candidate;
use crate::analysis::deepep::{wide_ep_engine_options, EngineChoice};
use crate::analysis::Scenario;
use crate::program::Layout;

/// The best of `layout` as written (`evaluate(None)`) and with the engine options worth
/// trying: across an NVLink domain's trays or an RDMA fabric, DeepEP low-latency with
/// budgets ascending, each tried while the last improved (one extra evaluation per layout
/// where DeepEP does not pay, not three); then, on the DeepEP choice kept, dual batch
/// overlap (vLLM's wide-EP decode recipe: one micro-batch's exchange under the other's
/// kernels), one more evaluation where the decode batch per rank reaches vLLM's
/// micro-batching threshold.
pub(super) fn with_engine_options(
    base: &Scenario,
    layout: Layout,
    evaluate: impl Fn(Option<EngineChoice>) -> Candidate,
) -> Candidate {
    let mut with_layout = base.clone();
    with_layout.layout = layout;
    let mut best = evaluate(None);
    for choice in wide_ep_engine_options(&with_layout) {
        let c = evaluate(Some(choice));
        if !c.ranks_before(&best) {
            break;
        }
        best = c;
    }
    // Only where the decode steps reach vLLM's micro-batching threshold (32 sequences per
    // rank): below it, DBO changes nothing.
    let splits = best
        .running
        .is_some_and(|r| r >= crate::analysis::perf::DBO_DECODE_TOKENS);
    let dbo_choice = best.engine.as_ref().filter(|e| !e.dbo && !base.engine.dbo);
    if let Some(choice) = dbo_choice.filter(|_| splits) {
        let c = evaluate(Some(choice.with_dbo()));
        if c.ranks_before(&best) {
            best = c;
        }
    }
    best
}
