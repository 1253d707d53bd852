//! SLO rules: the predicted metric at the SLO's percentile against its bound, and the
//! remedy in the escalation order when it misses.

use super::*;
use crate::analysis::scenario::WorkloadSpec;

/// Predicted value of an SLO metric, percentile applied.
pub fn predicted(p: &Prediction, t: &SloTarget, output: f64) -> f64 {
    match t.metric {
        SloMetric::Ttft => p.ttft * percentile_factor(true, &t.percentile),
        SloMetric::Tpot | SloMetric::Itl => p.tpot * percentile_factor(false, &t.percentile),
        SloMetric::E2e => {
            p.ttft * percentile_factor(true, &t.percentile)
                + (output - 1.0).max(0.0) * p.tpot * percentile_factor(false, &t.percentile)
        }
        SloMetric::Throughput => p.output_tokens_per_s,
        SloMetric::RequestRate => p.requests_per_s,
    }
}

pub(super) fn fmt_metric(metric: SloMetric, v: f64) -> String {
    match metric {
        SloMetric::Throughput => format!("{v:.0} tokens/s"),
        SloMetric::RequestRate => format!("{v:.2} req/s"),
        _ if !v.is_finite() => "unbounded (overloaded)".into(),
        _ if v >= 1.0 => format!("{v:.2} s"),
        _ => format!("{:.1} ms", v * 1e3),
    }
}

/// SLO checks and the performance rules at the operating point.
pub fn perf_rules(
    s: &Scenario,
    mem: &MemoryReport,
    p: &Prediction,
    slo: &[SloTarget],
) -> (Vec<Finding>, Vec<SloResult>) {
    perf_rules_at(s, mem, p, slo, true)
}

/// As [`perf_rules`]; `detailed = false` skips the remedies (the planner evaluates many
/// candidates and explains only the ones it shows).
pub fn perf_rules_at(
    s: &Scenario,
    mem: &MemoryReport,
    p: &Prediction,
    slo: &[SloTarget],
    detailed: bool,
) -> (Vec<Finding>, Vec<SloResult>) {
    let mut out = Vec::new();
    let mut results = Vec::new();
    let output = s.workload.map(|w| w.output).unwrap_or(256.0);
    for (i, t) in slo.iter().enumerate() {
        let v = predicted(p, t, output);
        let met = match t.op {
            Op::Le | Op::Lt => v <= t.value,
            _ => v >= t.value,
        };
        results.push(SloResult {
            target: t.clone(),
            predicted: v,
            met,
        });
        if !met {
            let by = if matches!(t.op, Op::Le | Op::Lt) {
                v - t.value
            } else {
                t.value - v
            };
            let pct = if t.value > 0.0 {
                by / t.value * 100.0
            } else {
                0.0
            };
            out.push(Finding::new(
                Code::SloInfeasible,
                Anchor::Slo(i),
                format!(
                    "{} is predicted at {}, {} the bound of {}{}",
                    t.label(),
                    fmt_metric(t.metric, v),
                    if matches!(t.op, Op::Le | Op::Lt) {
                        "over"
                    } else {
                        "under"
                    },
                    fmt_metric(t.metric, t.value),
                    if by.is_finite() {
                        format!(" (by {}, {pct:.0}%)", fmt_metric(t.metric, by))
                    } else {
                        String::new()
                    }
                ),
                "not met",
                detailed.then(|| slo_remedy(s, mem, t)),
            ));
        }
    }
    // An arrival rate past what the layout serves saturated: the queue grows without bound.
    // With a TTFT bound that is E0601 already; without one it must not pass silently.
    if let Some(WorkloadSpec {
        load: Load::Rate(rate),
        output,
        ..
    }) = s.workload
    {
        let reported = out.iter().any(|f| f.code == Code::SloInfeasible);
        if p.overloaded && !reported {
            let max_rps = p.max_output_tokens_per_s / output.max(1.0);
            let per_replica = max_rps / s.layout.dp.max(1) as f64;
            let replicas = if per_replica > 0.0 {
                (rate / per_replica).ceil().max(1.0) as u64
            } else {
                0
            };
            out.push(Finding::new(
                Code::Overloaded,
                Anchor::Deploy,
                format!(
                    "the workload offers {rate:.2} req/s but `{}` serves at most {max_rps:.2} req/s saturated: the queue grows without bound",
                    s.layout
                ),
                "more load than the layout carries",
                Some(if replicas > 0 {
                    let gpus = replicas * s.layout.replica_gpus();
                    let per_node = s.topology.gpus_per_node.max(1);
                    let have = s.topology.total_gpus();
                    format!(
                        "dp {replicas} of this replica would carry it: {gpus} GPUs ({} nodes){}; or a faster layout (FP8, more TP)",
                        gpus.div_ceil(per_node),
                        if gpus > have {
                            format!(", the cluster has {have}")
                        } else {
                            String::new()
                        }
                    )
                } else {
                    "a layout that runs at all under this load".into()
                }),
            ));
        }
    }
    // A closed loop past the running cap: the excess requests wait for a slot.
    if let Some(WorkloadSpec {
        load: Load::Concurrency(n),
        prompt,
        output,
        ..
    }) = s.workload
    {
        let per_replica = n as f64 / s.layout.dp.max(1) as f64;
        if per_replica > p.running_cap + 0.5 {
            let by_kv = p.running_cap < s.engine.max_num_seqs as f64;
            out.push(Finding::new(
                Code::LoadNotAdmitted,
                Anchor::Deploy,
                format!(
                    "{per_replica:.0} requests in flight per replica, but {} admits {:.0} at a time ({:.0} + {:.0} tokens each): {:.0} wait for a slot, and TTFT includes that wait ({})",
                    if by_kv { "the KV cache" } else { "max_num_seqs" },
                    p.running_cap.floor(),
                    prompt,
                    output,
                    per_replica - p.running_cap.floor(),
                    fmt_metric(SloMetric::Ttft, p.ttft)
                ),
                "requests beyond the running cap queue before their prefill",
                Some(if by_kv {
                    "more KV cache per replica (FP8 KV cache, more TP, or more memory) or more dp replicas".into()
                } else {
                    "raise max_num_seqs, or add dp replicas".into()
                }),
            ));
        }
    }
    // PP bubble at the workload's concurrency.
    if s.layout.pp > 1 && p.step.bubble > 0.3 * p.step.tpot {
        out.push(Finding::new(
            Code::PipelineBubble,
            Anchor::Layout,
            format!(
                "pipeline bubble: {:.0}% of each decode step is idle with {:.1} requests running per replica and pp {}",
                p.step.bubble / p.step.tpot * 100.0,
                p.running,
                s.layout.pp
            ),
            "too few requests in flight to fill the stages",
            Some("fewer stages (quantize, or more TP inside a node), or more concurrency per replica".into()),
        ));
    }
    (out, results)
}

/// What would meet a missed SLO: the load at which it holds, or more replicas.
pub(super) fn slo_remedy(s: &Scenario, mem: &MemoryReport, t: &SloTarget) -> String {
    let output = s.workload.map(|w| w.output).unwrap_or(256.0);
    match (t.metric, s.workload) {
        (SloMetric::Throughput | SloMetric::RequestRate, _) => {
            let (max_tps, _) = max_throughput(
                s,
                mem,
                s.workload.map(|w| w.prompt).unwrap_or(1024.0),
                output,
                &FITTED,
            );
            let max = if t.metric == SloMetric::Throughput {
                max_tps
            } else {
                max_tps / output
            };
            let replicas = (t.value / (max / s.layout.dp.max(1) as f64))
                .ceil()
                .max(1.0) as u64;
            format!(
                "saturated, this layout serves {}; dp {replicas} would meet it",
                fmt_metric(t.metric, max)
            )
        }
        (_, Some(w)) => {
            // Bisect the load at which the bound holds.
            let (mut lo, mut hi) = (0.0, 1.0);
            let holds = |x: f64| {
                let mut v = s.clone();
                v.workload = Some(match w.load {
                    Load::Rate(r) => crate::analysis::scenario::WorkloadSpec {
                        load: Load::Rate(r * x),
                        ..w
                    },
                    Load::Concurrency(c) => crate::analysis::scenario::WorkloadSpec {
                        load: Load::Concurrency(((c as f64 * x).floor() as u64).max(1)),
                        ..w
                    },
                });
                let p = predict(&v, mem, &FITTED);
                predicted(&p, t, output) <= t.value
            };
            if !holds(1e-3) {
                return "not even one request at a time meets it on this layout: more TP inside a node, faster GPUs, or FP8".into();
            }
            for _ in 0..20 {
                let mid = (lo + hi) / 2.0;
                if holds(mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            match w.load {
                Load::Rate(r) => format!(
                    "it holds up to {:.2} req/s on this layout; dp {} would carry {:.2} req/s",
                    r * lo,
                    (s.layout.dp as f64 / lo.max(1e-3)).ceil() as u64,
                    r
                ),
                Load::Concurrency(c) => format!(
                    "it holds up to {} concurrent requests on this layout",
                    ((c as f64) * lo).floor().max(1.0)
                ),
            }
        }
        (_, None) => "add a workload to see the load at which it holds".into(),
    }
}
