//! Analysis: memory, communication and performance of a deployment, and the rules of
//! distributed serving.
//!
//! Input: a [`Scenario`] (built from a checked deployment by [`scenarios_from_program`],
//! or from `dic estimate`'s flags) and its SLO targets. Output: an [`Analysis`] — the
//! memory breakdown, the predicted operating point, SLO results and [`rules::Finding`]s.
//! Pure functions of their input, about one layout: whatever compares layouts (the
//! search, the advice to change one) is the planner's, which evaluates every candidate
//! through [`analyze_quick`].

pub mod calibration;
pub mod catalog;
pub mod comm;
pub mod estimate;
pub mod kv_pool;
pub mod memory;
pub mod perf;
pub mod rules;
pub mod scenario;

use crate::diagnostics::{Diagnostic, Severity};
use crate::program::{Body, DefId, FieldValue, LayoutSpec, Program, Value};
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
    let mut findings = rules::structural(s);
    let mem = memory::memory(s);
    let blocking = findings.iter().any(|f| f.severity == Severity::Error);
    findings.extend(rules::memory_rules(s, &mem));
    let fits = !findings.iter().any(|f| f.severity == Severity::Error);
    let mut prediction = None;
    let mut slo_results = Vec::new();
    let mut slo_break = None;
    if fits && !blocking {
        let p = perf::predict(s, &mem, &FITTED);
        let (perf_findings, results) = rules::perf_rules_at(s, &mem, &p, slo, detailed);
        findings.extend(perf_findings);
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
    let w = s.workload.unwrap_or(WorkloadSpec {
        prompt: 1024.0,
        output: 256.0,
        load: Load::Concurrency(1),
        requests: None,
    });
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
}

fn link_spec(p: &Program, id: DefId) -> Option<LinkSpec> {
    let d = p.def(id)?;
    match &d.body {
        Body::Link(l) => Some(LinkSpec::from_link(&d.name, l)),
        _ => None,
    }
}

/// Builds the scenario of each complete deployment with an explicit layout.
/// (`layout = auto` is the planner's; deployments with errors in what they reference
/// are skipped, their errors already reported.)
pub fn scenarios_from_program(p: &Program) -> Vec<DeploymentScenario> {
    let mut out = Vec::new();
    for def in p.user_defs.iter().filter_map(|id| p.def(*id)) {
        let Body::Deploy(d) = &def.body else { continue };
        if !p.complete_with_references(def.id) {
            continue;
        }
        let (layout, auto_layout) = match d.layout {
            LayoutSpec::Explicit(l) => (l, false),
            LayoutSpec::Auto => (crate::program::Layout::default(), true),
        };
        let (Some(model), Some((cluster, node)), Some(gdef)) = (
            d.model.and_then(|id| p.model(id)),
            p.node_of_cluster(d.cluster),
            p.gpu_def_of_cluster(d.cluster),
        ) else {
            continue;
        };
        let group = &cluster.groups[0];
        let Body::Gpu(g) = &gdef.body else { continue };
        let pcie = g
            .pcie
            .and_then(|id| link_spec(p, id))
            .or_else(|| catalog::link("pcie4"));
        let Some(pcie) = pcie else { continue };
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
            nodes: group.count,
            scale_up,
            scale_up_domain: node.scale_up_domain.max(1),
            scale_out,
            price_per_node_hour: cluster.price.or(node.price),
        };
        let engine = engine_settings(model, &topology.gpu, &d.engine);
        let workload = d
            .workload
            .and_then(|id| p.workload(id))
            .map(|w| WorkloadSpec {
                prompt: w.prompt,
                output: w.output,
                load: match (w.rate, w.concurrency) {
                    (Some(r), _) => Load::Rate(r),
                    (None, Some(c)) => Load::Concurrency(c),
                    (None, None) => Load::Concurrency(1),
                },
                requests: w.requests.map(|n| n as f64),
            });
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
        out.push(DeploymentScenario {
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
        });
    }
    out
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
            let mut diag = Diagnostic::new(f.code, format!("deploy `{}`: {}", ds.name, f.message))
                .with_severity(f.severity)
                .primary(at.file, at.span, f.label.clone());
            if let Some(h) = &f.help {
                diag = diag.help(h.clone());
            }
            if let Some(r) = &f.replacement {
                diag = diag.fix(format!("use `layout = {r}`"), at, r.clone());
            }
            diag
        })
        .collect()
}
