//! Goodput: the load a layout carries *within the SLOs* — the largest steady arrival rate
//! (an open loop, req/s) at which every latency bound (TTFT, TPOT, ITL, E2E, each at its
//! percentile) still holds and nothing queues without end — and which bound stops it
//! there. This per GPU, among layouts of no higher cost, is the measure the planner
//! compares families by (`choose_family`, W0406) and ranks equal-cost layouts by; saturated throughput (the
//! most a layout serves with every bound ignored) stays as information only. DistServe
//! (OSDI '24) defines goodput the same way: the request rate served within the SLOs.

use crate::analysis::disagg::{predict, predict_written, PoolSplit};
use crate::analysis::memory::memory;
use crate::analysis::perf::{predict as predict_aggregated, Prediction, StepModel, FITTED};
use crate::analysis::rules::{predicted, SloTarget};
use crate::analysis::{Load, Scenario, WorkloadSpec};
use crate::program::SloMetric;
use crate::syntax::ast::Op;
use serde::{Deserialize, Serialize};

/// What stops a layout from carrying more load within the SLOs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Binding {
    /// The TTFT (or E2E, through its TTFT) bound: prompts queue for the prefill.
    Ttft,
    /// The TPOT/ITL (or E2E) bound: the decode batch grows until its step is too slow.
    Tpot,
    /// The TPOT/ITL bound, and only because prompt chunks share the decode steps: the
    /// same batch without them would meet it (long prefills interfering with decodes).
    Interference,
    /// No latency bound: the layout is saturated first (or it has no latency bound).
    Capacity,
}

impl Binding {
    pub fn words(self) -> &'static str {
        match self {
            Binding::Ttft => "the TTFT bound",
            Binding::Tpot => "the TPOT bound",
            Binding::Interference => "long prefills interfering with decodes at the TPOT bound",
            Binding::Capacity => "saturation",
        }
    }
}

/// The load a layout carries within the SLOs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    pub requests_per_s: f64,
    pub output_tokens_per_s: f64,
    pub requests_per_s_per_gpu: f64,
    pub output_tokens_per_s_per_gpu: f64,
    /// Requests per second per $/h (per GPU when the cluster has no price).
    pub requests_per_s_per_cost: f64,
    /// Output tokens per dollar at that rate (`None` unpriced).
    pub output_tokens_per_dollar: Option<f64>,
    pub binding: Binding,
    /// The bound that binds, as written (`tpot.p99 ≤ 20 ms`); empty for saturation.
    pub bound: String,
}

/// A TPOT bound breaks by interference when the decode-only step is at most this share of
/// the step with its prompt chunks (the chunks take a quarter of it or more).
const INTERFERENCE_SHARE: f64 = 0.75;

/// Bisection steps over [0, saturated rate]: 2^-12 of the range, well under the 5% margin.
const STEPS: usize = 12;

/// The latency bounds: the ones goodput holds (a throughput or request-rate bound is what
/// goodput measures, not a constraint on it).
pub(crate) fn latency_bounds(slo: &[SloTarget]) -> Vec<&SloTarget> {
    slo.iter()
        .filter(|t| {
            matches!(
                t.metric,
                SloMetric::Ttft | SloMetric::Tpot | SloMetric::Itl | SloMetric::E2e
            )
        })
        .collect()
}

fn misses(p: &Prediction, t: &SloTarget, output: f64) -> f64 {
    let v = predicted(p, t, output);
    match t.op {
        Op::Le | Op::Lt => v / t.value,
        _ => t.value / v,
    }
}

/// The bound `p` misses most (ratio > 1), `None` when all hold; an overloaded prediction
/// misses by saturation.
fn worst<'a>(
    p: &Prediction,
    bounds: &[&'a SloTarget],
    output: f64,
) -> Option<Option<&'a SloTarget>> {
    if p.overloaded {
        return Some(None);
    }
    bounds
        .iter()
        .map(|t| (*t, misses(p, t, output)))
        .filter(|(_, m)| *m > 1.0 || m.is_nan())
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(t, _)| Some(t))
}

/// Whether `p` holds every latency bound of `slo` and is not overloaded (what goodput
/// holds at its edge; `failure` checks a closed loop's clients with it).
pub fn within_bounds(p: &Prediction, slo: &[SloTarget], output: f64) -> bool {
    worst(p, &latency_bounds(slo), output).is_none()
}

fn bound_words(t: &SloTarget) -> String {
    // Whole milliseconds as written (`20 ms`), a fraction kept where the bound has one
    // (`7.5 ms`, not a rounded `8 ms` that would misquote it).
    let ms = t.value * 1e3;
    let v = if t.value >= 1.0 {
        format!("{:.2} s", t.value)
    } else if (ms - ms.round()).abs() < 1e-6 {
        format!("{ms:.0} ms")
    } else {
        let text = format!("{ms:.3}");
        format!("{} ms", text.trim_end_matches('0').trim_end_matches('.'))
    };
    let op = match t.op {
        Op::Le => "≤",
        Op::Lt => "<",
        _ => "≥",
    };
    format!("{} {op} {v}", t.label())
}

/// The scenario at a steady open-loop `rate` (req/s), same prompt and output.
pub(crate) fn at_rate(s: &Scenario, rate: f64) -> Scenario {
    let mut v = s.clone();
    if let Some(w) = v.workload {
        v.workload = Some(WorkloadSpec {
            load: Load::Rate(rate.max(1e-9)),
            requests: None,
            ..w
        });
    }
    v
}

/// The largest rate in [0, `saturated`] at which `predict_at` holds every latency bound,
/// and the prediction just past it (what breaks). `None` when even a trickle misses.
fn edge(
    saturated: f64,
    bounds: &[&SloTarget],
    output: f64,
    predict_at: impl Fn(f64) -> Option<Prediction>,
) -> Option<(f64, Option<Prediction>)> {
    let holds = |r: f64| predict_at(r).map(|p| (worst(&p, bounds, output).is_none(), p));
    let trickle = saturated * 1e-3;
    if !holds(trickle)?.0 {
        return None;
    }
    let top = saturated * 0.999;
    match holds(top) {
        Some((true, _)) => return Some((top, None)),
        None => return None,
        _ => {}
    }
    let (mut lo, mut hi) = (trickle, top);
    for _ in 0..STEPS {
        let mid = 0.5 * (lo + hi);
        match holds(mid) {
            Some((true, _)) => lo = mid,
            _ => hi = mid,
        }
    }
    Some((lo, predict_at(hi)))
}

/// Which bound stops the layout (`past`: its prediction just past the edge); `decode_only`
/// gives the TPOT of the same batch without prompt chunks (aggregated layouts), which
/// tells interference from a batch that is simply too large.
fn binding_of(
    past: Option<&Prediction>,
    bounds: &[&SloTarget],
    output: f64,
    decode_only: impl Fn(&Prediction) -> Option<f64>,
) -> (Binding, String) {
    let Some(p) = past else {
        return (Binding::Capacity, String::new());
    };
    match worst(p, bounds, output) {
        Some(Some(t)) => {
            let ttft = matches!(t.metric, SloMetric::Ttft)
                || (matches!(t.metric, SloMetric::E2e)
                    && predicted(p, t, output) < 2.0 * predicted(p, t, 1.0));
            let binding = if ttft {
                Binding::Ttft
            } else {
                // Interference: without its prompt chunks the same batch would meet the
                // bound, and the chunks take at least a quarter of the step.
                let cleared = decode_only(p).is_some_and(|tpot| {
                    let alone = Prediction { tpot, ..p.clone() };
                    misses(&alone, t, output) <= 1.0 && tpot <= INTERFERENCE_SHARE * p.tpot
                });
                if cleared {
                    Binding::Interference
                } else {
                    Binding::Tpot
                }
            };
            (binding, bound_words(t))
        }
        _ => (Binding::Capacity, String::new()),
    }
}

fn goodput(
    rate: f64,
    output: f64,
    gpus: u64,
    cost_per_hour: f64,
    priced: bool,
    (binding, bound): (Binding, String),
) -> Goodput {
    let gpus = gpus.max(1) as f64;
    let tps = rate * output;
    Goodput {
        requests_per_s: rate,
        output_tokens_per_s: tps,
        requests_per_s_per_gpu: rate / gpus,
        output_tokens_per_s_per_gpu: tps / gpus,
        requests_per_s_per_cost: rate / cost_per_hour.max(1e-9),
        output_tokens_per_dollar: priced.then(|| tps * 3600.0 / cost_per_hour.max(1e-9)),
        binding,
        bound,
    }
}

/// The goodput of an aggregated layout (`s`: its scenario, layout and formats set),
/// costing `cost_per_hour` (GPUs when unpriced). `None` without a workload, or when a
/// trickle of requests already misses a bound.
pub fn aggregated(
    s: &Scenario,
    slo: &[SloTarget],
    cost_per_hour: f64,
    priced: bool,
) -> Option<Goodput> {
    let w = s.workload?;
    let output = w.output.max(1.0);
    let bounds = latency_bounds(slo);
    let mem = memory(s);
    let saturated = predict_aggregated(s, &mem, &FITTED).max_output_tokens_per_s / output;
    let predict_at = |r: f64| Some(predict_aggregated(&at_rate(s, r), &mem, &FITTED));
    let (rate, past) = edge(saturated, &bounds, output, predict_at)?;
    let ctx = w.prompt + output / 2.0;
    let decode_only = |p: &Prediction| {
        let v = at_rate(s, rate);
        Some(
            StepModel::new(&v)
                .token_step(p.running, ctx, 0.0, 0.0, &FITTED)
                .tpot,
        )
    };
    let binding = binding_of(past.as_ref(), &bounds, output, decode_only);
    Some(goodput(
        rate,
        output,
        s.layout.gpus(),
        cost_per_hour,
        priced,
        binding,
    ))
}

/// The goodput of two pools costing `cost_per_hour` on `gpus` GPUs: `predict_at(None)`
/// predicts them at the declared load, `predict_at(Some(r))` at `r` req/s.
fn of_pools(
    output: f64,
    slo: &[SloTarget],
    (gpus, cost_per_hour, priced): (u64, f64, bool),
    predict_at: impl Fn(Option<f64>) -> Option<Prediction>,
) -> Option<Goodput> {
    let bounds = latency_bounds(slo);
    let saturated = predict_at(None)?.max_output_tokens_per_s / output;
    let (rate, past) = edge(saturated, &bounds, output, |r| predict_at(Some(r)))?;
    // A decode pool runs decode-only steps: no prompt chunk interferes.
    let binding = binding_of(past.as_ref(), &bounds, output, |_| None);
    Some(goodput(rate, output, gpus, cost_per_hour, priced, binding))
}

/// `s` at `rate` req/s, or as declared.
fn loaded(s: &Scenario, rate: Option<f64>) -> Scenario {
    rate.map_or_else(|| s.clone(), |r| at_rate(s, r))
}

/// The goodput of a split of `base`'s cluster (`base`: the scenario whose model, formats
/// and workload both pools share).
pub fn split(
    base: &Scenario,
    split: &PoolSplit,
    slo: &[SloTarget],
    cost_per_hour: f64,
    priced: bool,
) -> Option<Goodput> {
    let output = base.workload?.output.max(1.0);
    of_pools(output, slo, (split.gpus(), cost_per_hour, priced), |r| {
        predict(&loaded(base, r), split, &FITTED).map(|d| d.prediction)
    })
}

/// The goodput of a written pair (`ps`, `ds`: the pools as written, `dp` their replicas).
pub fn written_pair(
    ps: &Scenario,
    ds: &Scenario,
    same_group: bool,
    slo: &[SloTarget],
    cost_per_hour: f64,
    priced: bool,
) -> Option<Goodput> {
    let output = ds.workload?.output.max(1.0);
    let gpus = ps.layout.gpus() + ds.layout.gpus();
    of_pools(output, slo, (gpus, cost_per_hour, priced), |r| {
        predict_written(&loaded(ps, r), &loaded(ds, r), same_group, &FITTED).map(|d| d.prediction)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::rules::predicted;
    use crate::planner::{choose_family, Candidate, DisaggCandidate};
    use crate::program::Layout;

    /// Llama 3.1 70B FP8 on 2 × 8 H200 at `$60/h` per node, 8k prompts, 256 outputs.
    fn scenario(prompt: &str, output: &str, slo: &str) -> (Scenario, Vec<SloTarget>) {
        let src = format!(
            "import std.nodes.dgx_h200\nimport std.models.llama_3_1_70b\n\
model m = llama_3_1_70b {{ weights = fp8, kv_cache = fp8 }}\n\
cluster c {{ nodes = 2 × dgx_h200, price = $60/h }}\n\
workload w {{ prompt = {prompt}, output = {output}, rate = 4 req/s }}\n\
slo s {{ {slo} }}\n\
deploy d {{ model = m, cluster = c, workload = w, slo = s, layout = tp 4 × dp 4, engine = vllm {{ max_model_len = 16k tokens }} }}\n"
        );
        crate::planner::scenario_of_text(&src)
    }

    /// A bound is quoted as written: 7.5 ms stays 7.5 ms (it once read "8 ms").
    #[test]
    fn bounds_are_quoted_as_written() {
        let (_, slo) = scenario(
            "8k tokens",
            "256 tokens",
            "ttft.p95 <= 2 s, tpot.p95 <= 7.5 ms",
        );
        let words: Vec<String> = slo.iter().map(bound_words).collect();
        assert!(
            words.contains(&"tpot.p95 ≤ 7.5 ms".to_string()),
            "{words:?}"
        );
        assert!(
            words.contains(&"ttft.p95 ≤ 2.00 s".to_string()),
            "{words:?}"
        );
        let (_, slo) = scenario("8k tokens", "256 tokens", "tpot.p99 <= 20 ms");
        assert_eq!(bound_words(&slo[0]), "tpot.p99 ≤ 20 ms");
    }

    fn holds(s: &Scenario, slo: &[SloTarget], rate: f64) -> bool {
        let v = at_rate(s, rate);
        let p = predict_aggregated(&v, &memory(&v), &FITTED);
        !p.overloaded && slo.iter().all(|t| predicted(&p, t, 256.0) <= t.value)
    }

    #[test]
    fn goodput_is_the_highest_rate_within_the_bounds() {
        let (s, slo) = scenario(
            "8k tokens",
            "256 tokens",
            "ttft.p95 <= 2 s, tpot.p50 <= 25 ms",
        );
        let g = aggregated(&s, &slo, 120.0, true).expect("carries load");
        assert!(holds(&s, &slo, g.requests_per_s * 0.97), "{g:?}");
        assert!(!holds(&s, &slo, g.requests_per_s * 1.03), "{g:?}");
        // Not the saturated rate: a bound breaks first.
        let sat = predict_aggregated(&s, &memory(&s), &FITTED).max_output_tokens_per_s / 256.0;
        assert!(
            g.requests_per_s < 0.95 * sat,
            "{} vs {sat}",
            g.requests_per_s
        );
        assert!((g.requests_per_s_per_gpu - g.requests_per_s / 16.0).abs() < 1e-9);
        assert!((g.requests_per_s_per_cost - g.requests_per_s / 120.0).abs() < 1e-9);
        assert_eq!(
            g.output_tokens_per_dollar,
            Some(g.requests_per_s * 256.0 * 3600.0 / 120.0)
        );
    }

    /// 8k prompts against a 25 ms TPOT: the aggregated engine's TPOT breaks because prompt
    /// chunks share its steps; 256-token prompts with 1k outputs and a tight TPOT break it
    /// by the batch alone.
    #[test]
    fn the_binding_constraint_tells_interference_from_a_large_batch() {
        let (s, slo) = scenario(
            "8k tokens",
            "256 tokens",
            "ttft.p95 <= 2 s, tpot.p50 <= 25 ms",
        );
        let g = aggregated(&s, &slo, 120.0, true).expect("carries load");
        assert_eq!(g.binding, Binding::Interference, "{g:?}");
        assert!(g.bound.starts_with("tpot.p50"), "{}", g.bound);
        let (s, slo) = scenario(
            "256 tokens",
            "1k tokens",
            "ttft.p95 <= 2 s, tpot.p50 <= 15 ms",
        );
        let g = aggregated(&s, &slo, 120.0, true).expect("carries load");
        assert_eq!(g.binding, Binding::Tpot, "{g:?}");
        let (s, slo) = scenario(
            "8k tokens",
            "256 tokens",
            "ttft.p95 <= 1 s, tpot.p50 <= 100 ms",
        );
        let g = aggregated(&s, &slo, 120.0, true).expect("carries load");
        assert_eq!(g.binding, Binding::Ttft, "{g:?}");
    }

    fn good(rps: f64, gpus: f64, cost: f64, binding: Binding, bound: &str) -> Goodput {
        Goodput {
            requests_per_s: rps,
            output_tokens_per_s: rps * 256.0,
            requests_per_s_per_gpu: rps / gpus,
            output_tokens_per_s_per_gpu: rps * 256.0 / gpus,
            requests_per_s_per_cost: rps / cost,
            output_tokens_per_dollar: Some(rps * 256.0 * 3600.0 / cost),
            binding,
            bound: bound.into(),
        }
    }

    fn aggregated_candidate(tp: u64, dp: u64, saturated: f64, g: Goodput) -> Candidate {
        Candidate {
            layout: Layout {
                tp,
                dp,
                ..Layout::default()
            },
            weights: "fp8".into(),
            kv_cache: "fp8".into(),
            gpus: tp * dp,
            nodes: 2,
            cost_per_hour: 120.0,
            priced: true,
            cost_per_million_output: None,
            ttft_ms: Some(500.0),
            tpot_ms: Some(19.0),
            output_tokens_per_s: Some(1024.0),
            meets_slo: true,
            rejected_because: None,
            rejected_code: None,
            max_output_tokens_per_s: Some(saturated),
            overloaded: false,
            running: None,
            clients_wait: false,
            shortfall: None,
            engine: None,
            goodput: Some(g),
            speculation: None,
        }
    }

    /// The case: aggregated `tp 2 × dp 8` serves 192 tok/s per GPU saturated, the
    /// split less, but within the bounds the split carries 7 req/s against 6. Compared
    /// saturated (the old measure) the aggregated layout won; by goodput the split wins,
    /// and the reason names what stops the aggregated layout and the margin.
    #[test]
    fn the_families_are_compared_by_load_within_the_slos() {
        let agg = aggregated_candidate(
            2,
            8,
            192.0 * 16.0,
            good(6.0, 16.0, 120.0, Binding::Interference, "tpot.p50 ≤ 20 ms"),
        );
        let split = PoolSplit {
            prefill: Layout {
                tp: 4,
                ..Layout::default()
            },
            prefill_replicas: 3,
            decode: Layout {
                tp: 2,
                ..Layout::default()
            },
            decode_replicas: 2,
        };
        let dis = DisaggCandidate {
            split,
            name: split.to_string(),
            gpus: 16,
            nodes: 2,
            cost_per_hour: 120.0,
            priced: true,
            ttft_ms: Some(900.0),
            tpot_ms: 15.0,
            output_tokens_per_s: 1024.0,
            output_tokens_per_s_per_gpu: 64.0,
            capacity_per_gpu: 130.0,
            transfer_ms: 10.0,
            prefill_utilization: 0.6,
            meets_slo: true,
            clients_wait: false,
            goodput: Some(good(7.0, 16.0, 120.0, Binding::Ttft, "ttft.p95 ≤ 2.00 s")),
        };
        let (wins, why) = choose_family(std::slice::from_ref(&agg), Some(&dis), &[], None);
        let why = why.expect("a reason");
        assert!(wins, "{why}");
        assert!(why.contains("+17%"), "{why}");
        assert!(
            why.contains("long prefills interfere with decodes"),
            "{why}"
        );
        assert!(
            why.contains("7.00 req/s") && why.contains("6.00 req/s"),
            "{why}"
        );
        // Within the 5% margin the aggregated layout stays, and says by how much.
        let close = DisaggCandidate {
            goodput: Some(good(6.2, 16.0, 120.0, Binding::Ttft, "ttft.p95 ≤ 2.00 s")),
            ..dis
        };
        let (wins, why) = choose_family(std::slice::from_ref(&agg), Some(&close), &[], None);
        assert!(!wins, "{why:?}");
        assert!(why.is_some_and(|w| w.contains("+3%")));
    }
}
