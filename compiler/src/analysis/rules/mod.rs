//! The rules of distributed serving, as findings with codes, numbers and help.
//!
//! Structural rules (vLLM's own startup checks and topology rules) run first; the
//! memory rules need the memory model, the performance rules the operating point.
//! Findings carry an [`Anchor`] (which part of the deployment they are about) rather
//! than a span, so `dic estimate` (no file) and `dic check` (spans) share them.

use super::comm::{ep_placement, is_deepep, tp_placement, uses_deepep};
use super::memory::{memory, MemoryReport};
use super::perf::{max_throughput, percentile_factor, predict, Prediction, FITTED};
use super::scenario::{Load, Scenario};
use crate::diagnostics::{Code, Severity};
use crate::program::{LinkType, SloMetric};
use crate::syntax::ast::Op;
use crate::units::fmt_bytes;
use serde::Serialize;

mod attention;
mod memory_rules;
mod passthrough;
mod shape;
mod slo;
mod structural;
pub use memory_rules::memory_rules;
pub use shape::{dcp_refusal, moe_refusal, pp_refusal, tp_refusal, valid_tp_sizes};
pub use slo::{clients_beyond_cap, fmt_metric, perf_rules, perf_rules_at, predicted};
pub use structural::structural;

/// What part of a deployment a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Anchor {
    Layout,
    Model,
    Cluster,
    Engine(&'static str),
    /// The n-th SLO bound.
    Slo(usize),
    Deploy,
    /// A field of the deployment (`kv_offload`), or its name where the field is absent.
    Field(&'static str),
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub label: String,
    pub help: Option<String>,
    pub anchor: Anchor,
    /// Text that replaces the anchor to apply the advice (an editor's quick fix).
    pub replacement: Option<String>,
}

impl Finding {
    /// A finding at its code's default severity, with no quick fix.
    pub fn new(
        code: Code,
        anchor: Anchor,
        message: String,
        label: &str,
        help: Option<String>,
    ) -> Finding {
        Finding {
            code,
            severity: code.default_severity(),
            message,
            label: label.to_string(),
            help,
            anchor,
            replacement: None,
        }
    }
}

/// An SLO bound to check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SloTarget {
    pub metric: SloMetric,
    pub percentile: String,
    pub op: Op,
    pub value: f64,
}

impl SloTarget {
    /// The bound's name as written: `ttft.p95`, or `throughput` (rates have no percentile).
    pub fn label(&self) -> String {
        match self.metric {
            SloMetric::Throughput | SloMetric::RequestRate => self.metric.name().to_string(),
            m => format!("{}.{}", m.name(), self.percentile),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SloResult {
    pub target: SloTarget,
    pub predicted: f64,
    pub met: bool,
}

/// Replicas that carry `rate` req/s when `replicas` of them serve `served` req/s
/// saturated; `None` when they serve nothing.
pub fn replicas_for_rate(rate: f64, served: f64, replicas: u64) -> Option<u64> {
    let per_replica = served / replicas.max(1) as f64;
    (per_replica > 0.0).then(|| (rate / per_replica).ceil().max(1.0) as u64)
}

/// `dp` replicas of the scenario's replica size, said one way by every help that proposes
/// more of them: `40 GPUs (5 nodes)`, and `, the cluster has 8` when it lacks them.
pub fn gpus_for_replicas(s: &Scenario, replica_gpus: u64, dp: u64) -> String {
    let gpus = dp * replica_gpus;
    let have = s.topology.total_gpus();
    format!(
        "{gpus} GPUs ({} nodes){}",
        gpus.div_ceil(s.topology.gpus_per_node.max(1)),
        if gpus > have {
            format!(", the cluster has {have}")
        } else {
            String::new()
        }
    )
}
