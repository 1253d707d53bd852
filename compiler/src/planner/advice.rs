//! The planner's advice: comparisons of a deployment with other layouts, each decided by
//! evaluating those layouts through the same models as the search. A0701 (a cheaper layout
//! meets the SLOs), E0701 (no layout does), and for a written layout that works, the
//! escalation order: W0404 (more GPUs make it worse), A0501 (FP8 would fit on half the
//! TP), A0401 (DP replicas would beat the wider TP); W0410 (the SLOs do not survive a
//! replica down or a node lost, `failure`); and W0411 (the declared draft costs goodput,
//! `speculation`).

use super::scaling::more_gpus_worse;
use super::{evaluate, Search};
use crate::analysis::perf::Prediction;
use crate::analysis::rules::{replicas_for_rate, Anchor, Finding};
use crate::analysis::{Analysis, DeploymentScenario, Scenario};
use crate::diagnostics::{Code, Diagnostic, Severity};
use crate::program::{Body, Program};

/// The advice on a written layout that analysed without error: W0404, A0501, A0401,
/// W0410, W0411, in that order. Nothing for a layout that does not fit (its errors say what would).
pub fn advise(s: &Scenario, a: &Analysis) -> Vec<Finding> {
    let Some(p) = &a.prediction else {
        return Vec::new();
    };
    let mut out = Vec::new();
    out.extend(more_gpus_worse(s, p));
    out.extend(quantize_to_fit(s, p));
    out.extend(dp_beats_tp(s, p.max_output_tokens_per_s));
    out.extend(super::failure::capacity_under_failure(s, a));
    out.extend(super::speculation::speculation_costs_goodput(s, a));
    out
}

/// A0501: with FP8 weights (on a GPU with FP8) the model fits with half the TP where it
/// does not in its own format, and the half-TP layout still carries the workload: not
/// overloaded where this one is not, and in a closed loop admitting as many requests (a
/// fit that halves the KV cache is no advice).
fn quantize_to_fit(s: &Scenario, p: &Prediction) -> Option<Finding> {
    let l = s.layout;
    let bf16 = matches!(s.model.weights.as_str(), "bf16" | "fp16" | "fp32");
    if !(bf16 && s.topology.gpu.fp8.is_some() && l.tp > 1 && l.tp.is_multiple_of(2)) {
        return None;
    }
    let half = crate::program::Layout { tp: l.tp / 2, ..l };
    // Half the TP that already works in the current format needs no quantization (A0401
    // and A0701 speak for fewer GPUs then).
    let same = evaluate(s, &[], half, &s.model.weights, &s.model.kv_cache);
    if same.rejected_because.is_none() && same.carries_load_of(s, p) {
        return None;
    }
    let q = evaluate(s, &[], half, "fp8", &s.model.kv_cache);
    if q.rejected_because.is_some() || !q.carries_load_of(s, p) {
        return None;
    }
    Some(Finding::new(
        Code::QuantizeToFit,
        Anchor::Model,
        format!(
            "with FP8 weights the model fits on tp {} ({} GPU{} instead of {})",
            half.tp,
            half.gpus(),
            if half.gpus() == 1 { "" } else { "s" },
            l.gpus()
        ),
        "quantization comes first in the escalation order",
        Some("set `weights = fp8` on the model and halve tp (check quality for your task)".into()),
    ))
}

/// A0401: the same GPUs as twice the replicas of half the TP serve over 10% more tokens/s
/// saturated.
fn dp_beats_tp(s: &Scenario, max_output_tokens_per_s: f64) -> Option<Finding> {
    let l = s.layout;
    if !(l.tp > 1 && l.tp.is_multiple_of(2)) {
        return None;
    }
    let wider_dp = crate::program::Layout {
        tp: l.tp / 2,
        dp: l.dp * 2,
        ..l
    };
    let d = evaluate(s, &[], wider_dp, &s.model.weights, &s.model.kv_cache);
    let dt = d
        .max_output_tokens_per_s
        .filter(|_| d.rejected_because.is_none())?;
    if dt <= max_output_tokens_per_s * 1.1 {
        return None;
    }
    Some(Finding::new(
        Code::DpBeatsTp,
        Anchor::Layout,
        format!(
            "`{}` would serve {:.0} tokens/s saturated, {:.0}% more than `{}` ({:.0} tokens/s) on the same GPUs",
            wider_dp,
            dt,
            (dt / max_output_tokens_per_s - 1.0) * 100.0,
            l,
            max_output_tokens_per_s
        ),
        if s.model.is_moe() {
            // A MoE model's DP ranks do exchange tokens every MoE layer.
            "the wider TP's all-reduces cost more than the DP ranks' token exchange"
        } else {
            "DP replicas need no per-token communication"
        },
        Some(format!("use `{wider_dp}` unless TPOT needs the wider TP")),
    ))
}

/// A0701, the planner second-guessing an explicit layout: advice when a cheaper one (by
/// $/h, then GPUs) meets the same SLOs with the same weight and KV formats — the best
/// such candidate of the deployment's one search.
pub fn cheaper_layout(ds: &DeploymentScenario, search: &Search) -> Option<Finding> {
    let s = &ds.scenario;
    // Only a layout that meets the SLOs with the engine as written: one that needs the
    // declared draft dropped would, written back with it, draw W0411 or miss an SLO.
    let best = search.ranked.iter().find(|c| {
        c.weights == s.model.weights && c.kv_cache == s.model.kv_cache && !c.speculation_off()
    })?;
    let current = s
        .topology
        .price_for_layout(&s.layout)
        .unwrap_or(s.layout.gpus() as f64);
    let cheaper = best.cost_per_hour < current - 1e-9
        || (best.cost_per_hour <= current + 1e-9 && best.gpus < s.layout.gpus());
    if !cheaper || best.layout == s.layout {
        return None;
    }
    let money = |v: f64| {
        if best.priced {
            format!(" (${v:.2}/h)")
        } else {
            String::new()
        }
    };
    Some(Finding {
        message: format!(
            "`{}` also meets every SLO on {} GPUs{} instead of {}{}: TTFT {:.0} ms, TPOT {:.1} ms",
            best.layout,
            best.gpus,
            money(best.cost_per_hour),
            s.layout.gpus(),
            money(current),
            best.ttft_ms.unwrap_or(f64::NAN),
            best.tpot_ms.unwrap_or(f64::NAN)
        ),
        ..use_layout(
            best,
            if best.cost_per_hour < current - 1e-9 {
                "the planner found a cheaper layout"
            } else {
                "the planner found a layout on fewer GPUs at the same cost"
            },
        )
    })
}

/// An A0701 that proposes `best`'s layout (message to be set), with its quick fix.
fn use_layout(best: &super::Candidate, label: &str) -> Finding {
    Finding {
        code: Code::CheaperLayout,
        severity: Severity::Advice,
        message: String::new(),
        label: label.into(),
        help: Some(format!(
            "use `layout = {}` (or `layout = auto`); `dic plan` shows the alternatives",
            best.layout
        )),
        replacement: Some(best.layout.to_string()),
        anchor: Anchor::Layout,
    }
}

/// A0701 on a written layout that fails (an SLO, the load, memory): the search's choice,
/// which meets every SLO — the fix `dic plan` knows, said where the error is.
pub fn working_layout(ds: &DeploymentScenario, search: &Search) -> Option<Finding> {
    let best = search.chosen.as_ref()?;
    if best.layout == ds.scenario.layout
        && best.weights == ds.scenario.model.weights
        && best.kv_cache == ds.scenario.model.kv_cache
    {
        return None;
    }
    let price = if best.priced {
        format!(" (${:.2}/h)", best.cost_per_hour)
    } else {
        String::new()
    };
    let mut fix = use_layout(best, "the planner found a layout that works");
    // A layout that works only in other formats: the quick fix sets the layout; the help
    // says what else to set on the model.
    let mut formats = Vec::new();
    if best.weights != ds.scenario.model.weights {
        formats.push(format!("weights = {}", best.weights));
    }
    if best.kv_cache != ds.scenario.model.kv_cache {
        formats.push(format!("kv_cache = {}", best.kv_cache));
    }
    // A layout that works only without the declared draft says so too (the planner's
    // verdict, `speculation::judge`).
    let mut with = Vec::new();
    if !formats.is_empty() {
        with.push(format!("`{}` on the model", formats.join(", ")));
    }
    if best.speculation_off() {
        with.push("no `speculative` in the engine".to_string());
    }
    if !with.is_empty() {
        fix.help = Some(format!(
            "use `layout = {}` with {}; `dic plan` shows the alternatives",
            best.layout,
            with.join(" and ")
        ));
    }
    Some(Finding {
        message: format!(
            "`{}` meets every SLO on {} GPUs{price}: TTFT {:.0} ms, TPOT {:.1} ms",
            best.describe(),
            best.gpus,
            best.ttft_ms.unwrap_or(f64::NAN),
            best.tpot_ms.unwrap_or(f64::NAN)
        ),
        ..fix
    })
}

/// E0701 for a `layout = auto` deployment whose search found nothing that meets every SLO.
pub fn no_layout(p: &Program, ds: &DeploymentScenario, search: &Search) -> Option<Diagnostic> {
    let def = p.def(ds.deploy)?;
    let Body::Deploy(d) = &def.body else {
        return None;
    };
    let s = &ds.scenario;
    let has_slo = !ds.slo.is_empty();
    let rate = s.workload.and_then(|w| w.rate().map(|r| (r, w.output)));
    let closest = match (&search.closest, rate) {
        // Overloaded: how much it serves, and how many GPUs of it would carry the rate.
        (Some(c), Some((r, output))) if c.overloaded => {
            let served = c.max_output_tokens_per_s.unwrap_or(0.0) / output.max(1.0);
            let carry = match replicas_for_rate(r, served, c.layout.dp)
                .and_then(|dp| replicas_that_meet(ds, c, dp))
            {
                Some((layout, nodes)) => format!(
                    "; {} of its replicas would carry the load: {} GPUs ({nodes} {}){}",
                    layout.dp,
                    layout.gpus(),
                    plural(nodes as usize, "node", "nodes"),
                    if nodes > s.topology.nodes {
                        format!(", the cluster has {}", s.topology.nodes)
                    } else {
                        String::new()
                    }
                ),
                // Its family cannot meet the bounds at any count: the planner's own choice
                // on a cluster large enough for the load (the figure `dic init` reads).
                None => match layout_that_carries(ds, r, served) {
                    Some((other, nodes)) => format!(
                        "; `{}` would carry the load: {} GPUs ({nodes} {}){}",
                        other.describe(),
                        other.gpus,
                        plural(nodes as usize, "node", "nodes"),
                        if nodes > s.topology.nodes {
                            format!(", the cluster has {}", s.topology.nodes)
                        } else {
                            String::new()
                        }
                    ),
                    None => String::new(),
                },
            };
            format!(
                "; the closest, `{}`, serves {served:.2} of the {r:.2} req/s offered{carry}",
                c.describe()
            )
        }
        (Some(c), _) => format!(
            "; the closest, `{}`, misses by: {}",
            c.describe(),
            c.rejected_because
                .as_deref()
                .map(|r| r.split_once(": ").map(|x| x.1).unwrap_or(r))
                .unwrap_or("?")
        ),
        (None, _) => String::new(),
    };
    // The model's whole context is what keeps every layout out: say what a shorter one
    // lets the planner choose, and how to set it.
    let context = search
        .context
        .as_ref()
        .map(|fit| format!("; {}", fit.sentence()))
        .unwrap_or_default();
    let goal = if has_slo {
        "meets every SLO"
    } else {
        "carries the workload"
    };
    Some(
        Diagnostic::new(
            Code::NoLayout,
            format!(
                "deploy `{}`: no layout of the {} {} evaluated {goal}{closest}{context}",
                def.name,
                search.evaluated,
                plural(search.evaluated, "candidate", "candidates")
            ),
        )
        .primary(d.layout_at.file, d.layout_at.span, "here")
        .help(match &search.context {
            Some(fit) if fit.chosen.is_some() => format!(
                "set `{}` in the deployment (the model's full context is what does not fit); `dic plan` lists every family",
                fit.setting()
            ),
            Some(fit) => format!(
                "set `{}` in the deployment so that a layout fits; then {}",
                fit.setting(),
                remedies(ds).join(", ")
            ),
            None => format!(
                "`dic plan` lists every family and why it was rejected; {}",
                remedies(ds).join(", ")
            ),
        }),
    )
}

/// E0701's remedies, only those not already taken: relax an SLO (when there is one),
/// allow `fp8` weights (when the GPU has FP8 and the deployment does not allow it yet),
/// add GPUs, and without SLOs a lighter load.
fn remedies(ds: &DeploymentScenario) -> Vec<&'static str> {
    let s = &ds.scenario;
    let fp8_open = s.topology.gpu.fp8.is_some()
        && !s.model.prequantized
        && !ds.allowed_weights.iter().any(|w| w == "fp8" || w == "fp4");
    let mut out = Vec::new();
    if !ds.slo.is_empty() {
        out.push("relax an SLO");
    }
    if fp8_open {
        out.push("allow `fp8` weights");
    }
    out.push("add GPUs");
    if ds.slo.is_empty() {
        out.push("declare a lighter load");
    }
    let last = out.len() - 1;
    if last > 0 {
        out[last] = match out[last] {
            "add GPUs" => "or add GPUs",
            _ => "or declare a lighter load",
        };
    }
    out
}

/// The replicas of the closest candidate `c` that carry the deployment's load and meet
/// its bounds, checked rather than extrapolated: from `dp` (the saturated rate's
/// estimate) upward, the first replica count that is deployable on a cluster of enough
/// such nodes and meets every SLO there, with the nodes it occupies. `None` when none
/// within four times the estimate does (the help then gives no figure).
fn replicas_that_meet(
    ds: &DeploymentScenario,
    c: &super::Candidate,
    dp: u64,
) -> Option<(crate::program::Layout, u64)> {
    let s = &ds.scenario;
    let (layout, bigger) = (dp..=dp.saturating_mul(4).max(dp + 8)).find_map(|dp| {
        let layout = crate::program::Layout { dp, ..c.layout };
        let mut bigger = s.clone();
        bigger.topology.nodes = s.topology.nodes.max(s.topology.nodes_for_layout(&layout));
        let x = evaluate(&bigger, &ds.slo, layout, &c.weights, &c.kv_cache);
        (x.meets_slo && !x.overloaded).then_some((layout, bigger))
    })?;
    // The figure is what the user applies: on that many nodes `layout = auto` must find a
    // layout too. Where the search there does not reach this count of replicas (its DP
    // search within the family stops short), the caller falls back to the search's own
    // figure (`layout_that_carries`), so the two never disagree.
    let nodes = bigger.topology.nodes_for_layout(&layout);
    let mut applied = s.clone();
    applied.topology.nodes = s.topology.nodes.max(nodes);
    super::search(&applied, &ds.slo, &super::space_of(ds))
        .chosen
        .map(|_| (layout, nodes))
}

/// The planner's choice for the deployment on a cluster of the same nodes, enough of them
/// to carry `rate` where the closest layout serves `served` (twice the ratio, at most 128
/// times the nodes), with the nodes it takes; `None` when even that meets no SLO.
fn layout_that_carries(
    ds: &DeploymentScenario,
    rate: f64,
    served: f64,
) -> Option<(super::Candidate, u64)> {
    let s = &ds.scenario;
    let factor = (rate / served.max(1e-9)).ceil().clamp(1.0, 64.0) as u64 * 2;
    let mut bigger = s.clone();
    bigger.topology.nodes = s.topology.nodes.saturating_mul(factor);
    let chosen = super::search(&bigger, &ds.slo, &super::space_of(ds)).chosen?;
    let nodes = bigger.topology.nodes_for_layout(&chosen.layout);
    Some((chosen, nodes))
}

/// `1 candidate`, `2 candidates`: the word for a count.
pub(crate) fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}
