//! Analysis: memory, communication and performance of a deployment, and the rules of
//! distributed serving.
//!
//! Input: a [`Scenario`] (built from a checked deployment by [`scenarios_from_program`],
//! or from `dic estimate`'s flags) and its SLO targets. Output: an [`Analysis`] — the
//! memory breakdown, the predicted operating point, SLO results and [`rules::Finding`]s.
//! Pure functions of their input, about one layout: whatever compares layouts (the
//! search, the advice to change one) is the planner's, which evaluates every candidate
//! through [`analyze_quick`].
//!
//! What the driver calls: [`scenarios_from_program`] (the program's deployments as
//! scenarios, [`bridge`]), [`analyze`] or [`analyze_pool`] for each, [`split_into_pools`]
//! for the planner's split, [`place_deployments`] (the cluster's accounting of every
//! decided layout, [`cluster`]), [`diagnostics_for`] (findings at the deployment's spans)
//! and [`forecast::figures`] (what the forecast reports).

pub mod activation;
pub mod allocation;
pub mod attention_backend;
pub mod bridge;
pub mod catalog;
pub mod cluster;
pub mod comm;
pub mod deepep;
pub mod deployable;
pub mod disagg;
pub mod estimate;
mod findings;
pub mod forecast;
pub mod fused_moe;
pub mod gemm;
pub mod kv_offload;
pub mod kv_pool;
pub mod lora;
pub mod lora_rules;
pub mod memory;
pub mod node_groups;
pub mod perf;
pub mod rules;
pub mod scenario;
pub mod speculative;
pub mod vllm_class;
pub mod weights;

use crate::diagnostics::{Code, Severity};
use crate::program::Pool;
pub use bridge::{
    diagnostics_for, scenarios_from_program, split_into_pools, DeploymentScenario, PoolPart, Share,
};
pub use cluster::{place_deployments, Placements};
pub use deployable::pools_cannot_pair;
pub use findings::slo_break_concurrency;
use findings::{speculation_loss, transfer_dominates};
use memory::MemoryReport;
use perf::{Prediction, FITTED};
use rules::{Finding, SloResult, SloTarget};
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
    let mut findings = deployable::deployability_findings(s, &mem, detailed);
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
    let mut findings = rules::structural(&one, true);
    let mem = memory::memory(&one);
    findings.extend(rules::memory_rules(&one, &mem, true));
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
