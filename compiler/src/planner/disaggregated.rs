//! The disaggregated family: every split of the cluster into a prefill pool and a decode
//! pool (TP of each inside a node, up to 8 replicas each), predicted by
//! [`crate::analysis::disagg`], kept when it meets every SLO, ranked like the aggregated
//! family (cost, then the load carried within the SLOs per $: `goodput`). `dic plan` shows it beside the aggregated
//! search; a split is deployed by writing it as the layout (`PoolSplit::as_layout`). W0406
//! says when the aggregated search beats a written split.

use super::goodput::{self, Binding, Goodput};
use super::tp_sizes;
use crate::analysis::deployable;
use crate::analysis::disagg::{predict, PoolSplit};
use crate::analysis::perf::FITTED;
use crate::analysis::rules::{clients_beyond_cap, predicted, SloTarget};
use crate::analysis::rules::{Anchor, Finding};
use crate::analysis::{Analysis, DeploymentScenario, Scenario};
use crate::diagnostics::Code;
use crate::program::Layout;
use serde::Serialize;

/// Most replicas per pool the search tries.
const MAX_POOL_REPLICAS: u64 = 8;

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct DisaggCandidate {
    pub split: PoolSplit,
    pub name: String,
    pub gpus: u64,
    pub nodes: u64,
    /// $/h of the nodes it occupies (GPU count when the cluster has no price).
    pub cost_per_hour: f64,
    pub priced: bool,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: f64,
    pub output_tokens_per_s: f64,
    pub output_tokens_per_s_per_gpu: f64,
    /// Saturated output tokens/s per GPU (the slower pool deciding).
    pub capacity_per_gpu: f64,
    pub transfer_ms: f64,
    pub prefill_utilization: f64,
    pub meets_slo: bool,
    /// In a closed loop, more clients per decode replica than its KV cache and
    /// `max_num_seqs` admit at once: the excess wait for a slot (the decode pool's W0501).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clients_wait: bool,
    /// The load it carries within the SLOs (the best splits that meet them only).
    #[serde(default)]
    pub goodput: Option<Goodput>,
}

/// Most splits whose goodput is computed: those that meet the SLOs at the cheapest
/// split's cost, in order of saturated capacity.
const GOODPUT_RANKED: usize = 64;

/// Every split that fits, best first: those meeting the SLOs by cost then saturated
/// tokens/s per GPU, then the rest by tokens/s per GPU.
pub fn disaggregated_family(base: &Scenario, slo: &[SloTarget]) -> Vec<DisaggCandidate> {
    let t = &base.topology;
    let Some(w) = base.workload else {
        return Vec::new();
    };
    // Formats vLLM cannot load make no split (E0801 when written).
    if deployable::load_quantization(base).is_err() || deployable::kv_cache_dtype(base).is_err() {
        return Vec::new();
    }
    // One engine per replica, TP only (no PP, DP or EP inside a pool): an engine that
    // a written pool would refuse (structure, memory, launch) makes no split.
    let engine = |tp: u64| Layout {
        tp,
        ..Layout::default()
    };
    let tps: Vec<u64> = tp_sizes(base)
        .into_iter()
        .filter(|tp| *tp <= t.gpus_per_node.max(1))
        .filter(|tp| {
            let mut one = base.clone();
            one.layout = engine(*tp);
            deployable::deployable(&one).is_ok()
        })
        .collect();
    let mut out = Vec::new();
    for &tp_p in &tps {
        for &tp_d in &tps {
            // What a written split gets as E0410 (a hybrid model's heterogeneous TP)
            // makes no candidate.
            let with = |tp: u64| {
                let mut one = base.clone();
                one.layout = engine(tp);
                one
            };
            if crate::analysis::pools_cannot_pair(&with(tp_p), &with(tp_d)).is_some() {
                continue;
            }
            for x in 1..=MAX_POOL_REPLICAS {
                for y in 1..=MAX_POOL_REPLICAS {
                    let split = PoolSplit {
                        prefill: engine(tp_p),
                        prefill_replicas: x,
                        decode: engine(tp_d),
                        decode_replicas: y,
                    };
                    // Both pools launched and placed as a written split is (E0801,
                    // E0408).
                    let pool = |l: Layout, replicas: u64| Layout { dp: replicas, ..l };
                    if split.gpus() > t.total_gpus()
                        || !deployable::pair_launchable_and_placeable(
                            base,
                            pool(split.prefill, x),
                            pool(split.decode, y),
                        )
                    {
                        continue;
                    }
                    let Some(d) = predict(base, &split, &FITTED) else {
                        continue;
                    };
                    let p = &d.prediction;
                    let meets = !p.overloaded
                        && slo.iter().all(|b| {
                            let v = predicted(p, b, w.output);
                            match b.op {
                                crate::syntax::ast::Op::Le | crate::syntax::ast::Op::Lt => {
                                    v <= b.value
                                }
                                _ => v >= b.value,
                            }
                        });
                    let clients_wait = clients_beyond_cap(w.load, y, p.running_cap).is_some();
                    let nodes = t.nodes_for(split.gpus());
                    let (cost_per_hour, priced) = match t.price_per_node_hour {
                        Some(price) => (price * nodes as f64, true),
                        None => (split.gpus() as f64, false),
                    };
                    out.push(DisaggCandidate {
                        name: split.to_string(),
                        split,
                        gpus: split.gpus(),
                        nodes,
                        cost_per_hour,
                        priced,
                        ttft_ms: Some(p.ttft * 1e3).filter(|v| v.is_finite()),
                        tpot_ms: p.tpot * 1e3,
                        output_tokens_per_s: p.output_tokens_per_s,
                        output_tokens_per_s_per_gpu: p.output_tokens_per_s_per_gpu,
                        capacity_per_gpu: p.max_output_tokens_per_s / split.gpus().max(1) as f64,
                        transfer_ms: d.transfer * 1e3,
                        prefill_utilization: d.prefill_utilization,
                        meets_slo: meets,
                        clients_wait,
                        goodput: None,
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| {
        b.serves(slo)
            .cmp(&a.serves(slo))
            .then(if a.serves(slo) {
                a.cost_per_hour.total_cmp(&b.cost_per_hour)
            } else {
                std::cmp::Ordering::Equal
            })
            .then(b.capacity_per_gpu.total_cmp(&a.capacity_per_gpu))
            .then(a.gpus.cmp(&b.gpus))
    });
    // The cheapest splits that meet the SLOs, re-ranked by the load they carry within
    // them per GPU at equal cost: saturated capacity is information only.
    let cheapest = out.first().map_or(0.0, |c| c.cost_per_hour);
    let head = out
        .iter()
        .take(GOODPUT_RANKED)
        .take_while(|c| c.serves(slo) && c.cost_per_hour <= cheapest + 1e-9)
        .count();
    for c in &mut out[..head] {
        c.goodput = goodput::split(base, &c.split, slo, c.cost_per_hour, c.priced);
    }
    out[..head].sort_by(|a, b| {
        a.cost_per_hour
            .total_cmp(&b.cost_per_hour)
            .then(per_gpu(b.goodput.as_ref()).total_cmp(&per_gpu(a.goodput.as_ref())))
            .then(a.gpus.cmp(&b.gpus))
    });
    out
}

impl DisaggCandidate {
    /// Whether it serves the deployment as declared, as an aggregated candidate does
    /// (`Candidate::serves`): its bounds met and, where no bound limits TTFT, every client
    /// admitted at once.
    pub fn serves(&self, slo: &[SloTarget]) -> bool {
        super::serves(self.meets_slo, self.clients_wait, slo)
    }
}

/// Requests per second within the SLOs per GPU, the families' measure (among layouts of
/// no higher cost, so money is held equal); 0 without a goodput.
fn per_gpu(g: Option<&Goodput>) -> f64 {
    g.map_or(0.0, |g| g.requests_per_s_per_gpu)
}

/// What one goodput says: `6.0 req/s (1,536 output tok/s, 0.60 req/s per GPU) within
/// the SLOs, stopped by the TPOT bound (tpot.p99 ≤ 20 ms)`.
pub fn carried(g: Option<&Goodput>) -> String {
    let Some(g) = g else {
        return "no load within the SLOs".into();
    };
    let bound = if g.bound.is_empty() {
        String::new()
    } else {
        format!(" ({})", g.bound)
    };
    format!(
        "{:.2} req/s ({:.0} output tok/s, {:.2} req/s per GPU) within the SLOs, stopped by {}{bound}",
        g.requests_per_s,
        g.output_tokens_per_s,
        g.requests_per_s_per_gpu,
        g.binding.words()
    )
}

/// Why the split carries more: what stops the aggregated layout, against what stops the
/// split (the binding constraint DistServe and Splitwise name: TTFT, TPOT, or prefills
/// interfering with decodes in one engine).
fn why_split(agg: Option<&Goodput>, split: Option<&Goodput>) -> String {
    match (agg.map(|g| g.binding), split.map(|g| g.binding)) {
        (Some(Binding::Interference), _) => {
            "long prefills interfere with decodes in one engine; the split's decode pool runs decode-only steps".into()
        }
        (Some(a), Some(b)) if a != b => format!(
            "the aggregated layout is stopped by {}, the split only by {}",
            a.words(),
            b.words()
        ),
        (Some(a), _) => format!("both are stopped by {}; the split's pools are sized to it", a.words()),
        _ => "no aggregated layout of no higher cost carries load within the SLOs".into(),
    }
}

/// W0406, on a disaggregated deployment's decode pool: the aggregated search over the same
/// cluster found a layout that meets every SLO for less than both pools cost, or one that
/// meets bounds this split misses, or, at no higher cost, carries more load within the
/// SLOs per GPU (by 5% or more). Says which and by how much, with the
/// layout as the quick fix.
pub fn aggregated_wins(
    ds: &DeploymentScenario,
    a: &Analysis,
    search: &super::Search,
) -> Option<Finding> {
    let part = ds.pool.as_ref()?;
    if part.pool != crate::program::Pool::Decode {
        return None;
    }
    let p = a.prediction.as_ref()?;
    let (ps, dsc) = part.pools(&ds.scenario);
    let (gpus, _, price) = crate::analysis::disagg::pair_cost(ps, dsc, part.same_group);
    let s = &ds.scenario;
    let mut best = search
        .ranked
        .iter()
        .find(|c| c.weights == s.model.weights && c.kv_cache == s.model.kv_cache)?;
    let pair_cost = price.unwrap_or(gpus as f64);
    let meets = !p.overloaded && a.slo.iter().all(|r| r.met);
    let money = |v: f64| {
        if best.priced && price.is_some() {
            format!("${v:.2}/h")
        } else {
            format!("{v:.0} GPUs")
        }
    };
    let why = if best.cost_per_hour < pair_cost - 1e-9 {
        format!(
            "`{}` meets every SLO on {} GPU{} for {} where the two pools take {} GPUs for {} ({:.0}% less)",
            best.layout,
            best.gpus,
            if best.gpus == 1 { "" } else { "s" },
            money(best.cost_per_hour),
            gpus,
            money(pair_cost),
            (1.0 - best.cost_per_hour / pair_cost) * 100.0
        )
    } else if !meets && !ds.slo.is_empty() {
        format!(
            "`{}` meets every SLO, which this split does not, for {}",
            best.layout,
            money(best.cost_per_hour)
        )
    } else {
        let pair = goodput::written_pair(
            ps,
            dsc,
            part.same_group,
            &ds.slo,
            pair_cost,
            price.is_some(),
        );
        let (rival, theirs) = best_aggregated_within(&search.ranked, pair_cost)
            .filter(|(_, g)| *g > per_gpu(pair.as_ref()) * FAMILY_MARGIN)?;
        best = rival;
        let ours = per_gpu(pair.as_ref());
        format!(
            "`{}` carries {:.3} req/s per GPU within the SLOs against {:.3} req/s per GPU for this split ({}) at no higher cost: it carries {}; the split carries {}",
            rival.layout,
            theirs,
            ours,
            if ours > 0.0 {
                format!("{:.0}% more", (theirs / ours - 1.0) * 100.0)
            } else {
                "the split carries none".into()
            },
            carried(rival.goodput.as_ref()),
            carried(pair.as_ref())
        )
    };
    Some(Finding {
        replacement: Some(best.layout.to_string()),
        ..Finding::new(
            Code::AggregatedWins,
            Anchor::Layout,
            format!("aggregated serving wins here: {why}"),
            "disaggregation does not pay for this workload",
            Some(format!(
                "use `layout = {}`; splitting prefill from decode pays when prompts are long against the output and TTFT and TPOT bounds pull apart (`dic plan` compares both families)",
                best.layout
            )),
        )
    })
}

/// How much more load within the SLOs per GPU one family must carry at no higher cost to win over the other (W0406 and `choose_family` alike): 5%, which
/// covers what a split adds that dic does not model (the router hop, a second set of
/// engines to run).
pub const FAMILY_MARGIN: f64 = 1.05;

/// The aggregated layout that meets every SLO for at most `cost` $/h (GPUs when unpriced)
/// and carries the most load within the SLOs per GPU: the aggregated
/// side of every comparison with a split, with that figure.
pub fn best_aggregated_within(
    ranked: &[super::Candidate],
    cost: f64,
) -> Option<(&super::Candidate, f64)> {
    ranked
        .iter()
        .filter(|c| c.cost_per_hour <= cost + 1e-9)
        .map(|c| (c, per_gpu(c.goodput.as_ref())))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// Why no two pools of `base` can pair whatever their TPs, where no split was found
/// (`analysis::pools_cannot_pair` on the deployment with itself).
pub fn unpairable(base: &Scenario, splits: &[DisaggCandidate]) -> Option<String> {
    splits
        .is_empty()
        .then(|| crate::analysis::pools_cannot_pair(base, base))
        .flatten()
        .map(|f| f.message)
}

/// Which family a search deploys (`ranked`: the aggregated layouts meeting every SLO,
/// best first; `split`: the best split): the split wins when it meets every SLO and is
/// cheaper than any aggregated layout, or meets them where none does, or carries 5% or
/// more load within the SLOs per GPU than the best aggregated layout
/// of no higher cost (the margin covers what a split adds that dic does not model: the
/// router hop, a second set of engines to run). Returns (split wins, why in words: both
/// goodputs, the margin, and the binding constraint). `unpairable`: why no two pools of
/// this deployment can pair whatever their TPs (`analysis::pools_cannot_pair` on the
/// deployment with itself: `kv_offload`'s connector, the allocator), said in place of the
/// SLOs when no split was found.
pub fn choose_family(
    ranked: &[super::Candidate],
    split: Option<&DisaggCandidate>,
    slo: &[SloTarget],
    unpairable: Option<&str>,
) -> (bool, Option<String>) {
    let waiting = split.is_some_and(|s| s.meets_slo && !s.serves(slo));
    let split = split.filter(|s| s.serves(slo));
    let money = |priced: bool, v: f64| {
        if priced {
            format!("${v:.2}/h")
        } else {
            format!("{v:.0} GPUs")
        }
    };
    let (a, s) = match (ranked.first(), split) {
        (None, None) => return (false, None),
        (Some(a), None) => {
            return (
                false,
                Some(if let Some(why) = unpairable {
                    format!(
                        "aggregated `{}`: no disaggregated split can run: {why}",
                        a.layout
                    )
                } else if waiting {
                    format!(
                        "aggregated `{}`: the best disaggregated split's decode pool admits fewer clients at once than the workload declares (its W0501), and no bound limits how long they wait",
                        a.layout
                    )
                } else {
                    format!(
                        "aggregated `{}`: no disaggregated split meets every SLO",
                        a.layout
                    )
                }),
            )
        }
        (None, Some(s)) => {
            return (
                true,
                Some(format!(
                    "disaggregated {}: no aggregated layout meets every SLO; the split carries {}",
                    s.name,
                    carried(s.goodput.as_ref())
                )),
            )
        }
        (Some(a), Some(s)) => (a, s),
    };
    let cheaper = s.cost_per_hour < a.cost_per_hour - 1e-9;
    let rival = best_aggregated_within(ranked, s.cost_per_hour);
    let ours = per_gpu(s.goodput.as_ref());
    let more = rival.is_none_or(|(_, theirs)| ours >= theirs * FAMILY_MARGIN);
    let (b, theirs) = rival.unwrap_or((a, 0.0));
    let margin = if theirs > 0.0 {
        format!("{:+.0}%", (ours / theirs - 1.0) * 100.0)
    } else {
        "—".into()
    };
    let split_words = format!(
        "disaggregated {} ({}) carries {}",
        s.name,
        money(s.priced, s.cost_per_hour),
        carried(s.goodput.as_ref())
    );
    let agg_words = format!(
        "aggregated `{}` ({}) carries {}",
        b.layout,
        money(b.priced, b.cost_per_hour),
        carried(b.goodput.as_ref())
    );
    if cheaper {
        (
            true,
            Some(format!(
                "disaggregated {}: it meets every SLO for {} where the cheapest aggregated layout `{}` costs {}; {split_words}; {agg_words}",
                s.name,
                money(s.priced, s.cost_per_hour),
                a.layout,
                money(a.priced, a.cost_per_hour)
            )),
        )
    } else if more {
        (
            true,
            Some(format!(
                "disaggregated {}: {margin} load within the SLOs per GPU over the best aggregated layout of no higher cost, because {}; {split_words}; {agg_words}",
                s.name,
                why_split(b.goodput.as_ref(), s.goodput.as_ref())
            )),
        )
    } else {
        (
            false,
            Some(format!(
                "aggregated `{}` ({}): the best split is not cheaper and carries {margin} load within the SLOs per GPU against `{}` (a split needs +5%); {split_words}; {agg_words}",
                a.layout,
                money(a.priced, a.cost_per_hour),
                b.layout
            )),
        )
    }
}
