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

/// A value of an SLO metric as diagnostics write it (`12.5 ms`, `1.20 s`, `300 tokens/s`).
pub fn fmt_metric(metric: SloMetric, v: f64) -> String {
    match metric {
        SloMetric::Throughput => format!("{v:.0} tokens/s"),
        SloMetric::RequestRate => format!("{v:.2} req/s"),
        _ if !v.is_finite() => "unbounded (overloaded)".into(),
        _ if v >= 1.0 => format!("{v:.2} s"),
        _ => format!("{:.1} ms", v * 1e3),
    }
}

/// SLO checks and the performance rules at the operating point.
/// W0501's rule: the clients per replica of a closed loop when they are more than one
/// replica runs at once (`running_cap`, its KV cache and `max_num_seqs`), so that the
/// excess wait for a slot; `None` when all are admitted, or the load is a rate. For an
/// aggregated layout `replicas` is its DP, for a split's decode pool its replicas.
pub fn clients_beyond_cap(load: Load, replicas: u64, running_cap: f64) -> Option<f64> {
    let Load::Concurrency(n) = load else {
        return None;
    };
    let per_replica = n as f64 / replicas.max(1) as f64;
    (per_replica > running_cap + 0.5).then_some(per_replica)
}

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
                    "{} is {}, {} the bound of {}{}",
                    t.label(),
                    // A queue that never drains has no latency to predict.
                    if v.is_finite() {
                        format!("predicted at {}", fmt_metric(t.metric, v))
                    } else {
                        "unbounded (the load overloads the layout: its queue never drains)".into()
                    },
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
                detailed.then(|| slo_remedy(s, mem, t, slo)),
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
            out.push(Finding::new(
                Code::Overloaded,
                Anchor::Deploy,
                format!(
                    "the workload offers {rate:.2} req/s but `{}` serves at most {max_rps:.2} req/s saturated: the queue grows without bound",
                    s.layout
                ),
                "more load than the layout carries",
                Some(match replicas_for_rate(rate, max_rps, s.layout.dp) {
                    Some(dp) => format!(
                        "dp {dp} of this replica would carry it: {}; or a faster layout (FP8, more TP)",
                        gpus_for_replicas(s, s.layout.replica_gpus(), dp)
                    ),
                    None => "a layout that runs at all under this load".into(),
                }),
            ));
        }
    }
    // A closed loop past the running cap: the excess requests wait for a slot.
    if let Some(WorkloadSpec {
        load,
        prompt,
        output,
        ..
    }) = s.workload
    {
        if let Some(per_replica) = clients_beyond_cap(load, s.layout.dp, p.running_cap) {
            let by_kv = p.running_cap < s.engine.max_num_seqs as f64;
            out.push(Finding::new(
                Code::LoadNotAdmitted,
                Anchor::Deploy,
                format!(
                    "{per_replica:.0} requests in flight per replica, but {} admits {:.0} at a time ({}): {:.0} wait for a slot, and TTFT includes that wait ({})",
                    if by_kv { "the KV cache" } else { "max_num_seqs" },
                    p.running_cap.floor(),
                    if by_kv {
                        // `perf::running_cap`: a running request holds its prompt and half
                        // its output on average.
                        format!("{prompt:.0} + {:.0} tokens each on average", output / 2.0)
                    } else {
                        format!("{prompt:.0} + {output:.0} tokens each")
                    },
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

/// What would meet a missed SLO, consistent across the deployment's bounds: the load at
/// which every latency bound holds (not this one alone), the replicas that carry the
/// offered load and whether the cluster has their GPUs, or — when some bound fails even
/// at one request — what could help on this hardware, leaving out what the layout
/// already does (FP8 weights, the widest TP the domain allows).
pub(super) fn slo_remedy(
    s: &Scenario,
    mem: &MemoryReport,
    t: &SloTarget,
    all: &[SloTarget],
) -> String {
    let output = s.workload.map(|w| w.output).unwrap_or(256.0);
    let gpus_note = |dp: u64| format!(": {}", gpus_for_replicas(s, s.layout.replica_gpus(), dp));
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
                "saturated, this layout serves {}; dp {replicas} would meet it{}",
                fmt_metric(t.metric, max),
                gpus_note(replicas)
            )
        }
        (_, Some(w)) => {
            let latency: Vec<&SloTarget> = all
                .iter()
                .filter(|x| !matches!(x.metric, SloMetric::Throughput | SloMetric::RequestRate))
                .collect();
            let at = |x: f64| {
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
                predict(&v, mem, &FITTED)
            };
            let meets = |p: &Prediction, b: &SloTarget| match b.op {
                Op::Le | Op::Lt => predicted(p, b, output) <= b.value,
                _ => predicted(p, b, output) >= b.value,
            };
            // The bounds that fail even at (almost) no load: no replica count fixes them.
            let light = at(1e-3);
            let hopeless: Vec<String> = latency
                .iter()
                .filter(|b| !meets(&light, b))
                .map(|b| b.label())
                .collect();
            if !hopeless.is_empty() {
                if hopeless.contains(&t.label()) {
                    return format!(
                        "not even one request at a time meets it on this layout ({} at one request): {}",
                        fmt_metric(t.metric, predicted(&light, t, output)),
                        faster_hardware(s)
                    );
                }
                return format!(
                    "on this layout {} fails even at one request, so more replicas would not help: {}",
                    hopeless.join(", "),
                    faster_hardware(s)
                );
            }
            // The load at which every latency bound holds.
            let (mut lo, mut hi) = (1e-3, 1.0);
            for _ in 0..20 {
                let mid = (lo + hi) / 2.0;
                let p = at(mid);
                if latency.iter().all(|b| meets(&p, b)) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            match w.load {
                Load::Rate(r) => {
                    let dp = (s.layout.dp as f64 / lo).ceil() as u64;
                    format!(
                        "every latency bound holds up to {:.2} req/s on this layout; dp {dp} would carry {:.2} req/s{}",
                        r * lo,
                        r,
                        gpus_note(dp)
                    )
                }
                Load::Concurrency(c) => {
                    let holds = ((c as f64) * lo).floor().max(1.0);
                    let dp = (s.layout.dp as f64 * c as f64 / holds).ceil() as u64;
                    format!(
                        "every latency bound holds up to {holds:.0} concurrent requests on this layout; dp {dp} would carry {c}{}",
                        gpus_note(dp)
                    )
                }
            }
        }
        (_, None) => "add a workload to see the load at which it holds".into(),
    }
}

/// What could make one request faster on this hardware, leaving out what the layout
/// already does.
fn faster_hardware(s: &Scenario) -> String {
    let l = &s.layout;
    let t = &s.topology;
    let domain = t.scale_up_domain.max(t.gpus_per_node).max(1);
    let mut ideas = Vec::new();
    let wider = l.tp * 2;
    if wider <= domain && s.model.heads.is_multiple_of(wider) {
        ideas.push(format!("tp {wider} inside the NVLink domain"));
    }
    let sixteen_bit = matches!(s.model.weights.as_str(), "bf16" | "fp16" | "fp32");
    if sixteen_bit && t.gpu.fp8.is_some() {
        ideas.push("FP8 weights".into());
    }
    if l.pp > 1 {
        ideas.push("fewer pipeline stages".into());
    }
    ideas.push("faster GPUs".into());
    if ideas.len() == 1 {
        return format!("only {} can (this layout already uses the widest TP the domain allows and its fastest format)", ideas[0]);
    }
    let last = ideas.pop().unwrap_or_default();
    format!("{} or {last}", ideas.join(", "))
}
