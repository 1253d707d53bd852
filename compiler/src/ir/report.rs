//! The report's data in the forecast: memory, SLOs, the decode step's kernels and
//! collectives, cost, and the planner's alternatives, rejections, scaling curve, N−1
//! figures and verdict on a speculative draft from the deployment's search, and its
//! what-if across GPU types. Reads the analysis, its figures and the planner's results;
//! computes no prediction.

use super::*;

pub(super) fn report_data(
    ds: &DeploymentScenario,
    a: &Analysis,
    figures: &crate::analysis::forecast::ForecastFigures,
    search: Option<&crate::planner::Search>,
    whatif: &[crate::planner::whatif::WhatIf],
    pools_n1: Option<&crate::planner::PoolFailure>,
) -> ReportData {
    let s = &ds.scenario;
    let l = s.layout;
    let memory = memory_rows(s, a);
    let p = a.prediction.as_ref();
    let slo = slo_rows(a);
    let step = p.map(step_row);
    // A disaggregated pool reports the pair: both pools' nodes and price, the prefill
    // pool's hour charged to prompt tokens and the decode pool's to output tokens.
    let pair = figures.pair.as_ref().map(|x| {
        (
            format!("prefill {} + decode {}", x.prefill_layout, x.decode_layout),
            x.gpus,
            x.nodes,
            x.cost_per_hour,
            x.idle_gpus,
        )
    });
    let nodes = pair
        .as_ref()
        .map_or_else(|| s.topology.nodes_for_layout(&l), |x| x.2);
    let per_hour = match &pair {
        Some(x) => x.3,
        None => s.topology.price_for_layout(&l),
    };
    let (prompt, output) = s
        .workload
        .map(|w| (w.prompt, w.output))
        .unwrap_or((0.0, 0.0));
    let rps = p.map(|p| p.requests_per_s);
    // The hour's cost is split between prompt and output tokens by their share of the
    // GPU's step time (`analysis::forecast`). The two prices sum to the true cost of a
    // request: prompt × input + output × output = per_hour / (3600 × requests/s).
    let input_share = figures.input_share;
    let per_million = |share: f64, tokens_per_s: Option<f64>| match (per_hour, tokens_per_s) {
        (Some(c), Some(t)) if t > 0.0 => Some(c * share / (t * 3600.0) * 1e6),
        _ => None,
    };
    let cost = CostRow {
        per_hour,
        per_million_input_tokens: per_million(input_share, rps.map(|r| r * prompt)),
        per_million_output_tokens: per_million(1.0 - input_share, p.map(|p| p.output_tokens_per_s)),
        per_request: match (per_hour, rps) {
            (Some(c), Some(r)) if r > 0.0 => Some(c / (r * 3600.0)),
            _ => None,
        },
        input_share,
        nodes,
        gpus_used: pair.as_ref().map_or(l.gpus(), |x| x.1),
        gpus_idle: pair.as_ref().map_or_else(
            || nodes * s.topology.gpus_per_node.max(1) - l.gpus(),
            |x| x.4,
        ),
    };
    let no_search;
    let search = match search {
        Some(s) => s,
        None => {
            no_search = crate::planner::Search::empty();
            &no_search
        }
    };
    let mut alternatives: Vec<AlternativeRow> = search
        .ranked
        .iter()
        .take(10)
        .map(|c| AlternativeRow {
            layout: c.describe(),
            gpus: c.gpus,
            cost_per_hour: c.priced.then_some(c.cost_per_hour),
            cost_per_million_output: c.cost_per_million_output,
            ttft_ms: c.ttft_ms,
            tpot_ms: c.tpot_ms,
            output_tokens_per_s: c.output_tokens_per_s,
            chosen: pair.is_none()
                && c.layout == l
                && c.weights == s.model.weights
                && c.kv_cache == s.model.kv_cache,
        })
        .collect();
    if !alternatives.iter().any(|a| a.chosen) {
        alternatives.insert(
            0,
            AlternativeRow {
                layout: pair
                    .as_ref()
                    .map_or_else(|| format!("{l}"), |x| x.0.clone()),
                gpus: pair.as_ref().map_or(l.gpus(), |x| x.1),
                cost_per_hour: per_hour,
                // The whole hour over the output tokens, as the planner's rows are.
                cost_per_million_output: match (&pair, per_hour, p) {
                    (Some(_), Some(c), Some(p)) if p.output_tokens_per_s > 0.0 => {
                        Some(c / (p.output_tokens_per_s * 3600.0) * 1e6)
                    }
                    (Some(_), _, _) => None,
                    _ => cost.per_million_output_tokens,
                },
                ttft_ms: p.map(|p| p.ttft * 1e3).filter(|v| v.is_finite()),
                tpot_ms: p.map(|p| p.tpot * 1e3),
                output_tokens_per_s: p.map(|p| p.output_tokens_per_s),
                chosen: true,
            },
        );
    }
    let findings = finding_rows(a);
    let capacity_under_failure = failure_row(ds, a, search);
    let deployed = pair.as_ref().map_or_else(|| l.to_string(), |x| x.0.clone());
    ReportData {
        headline: headline(&deployed, &s.topology.gpu.name, &slo, &cost, &findings),
        memory,
        kv_cache_tokens: a.memory.kv_cache_tokens,
        max_concurrency: a.memory.max_concurrency,
        prompt_tokens: prompt,
        output_tokens: output,
        requests_per_s: rps,
        slo,
        step,
        cost,
        alternatives,
        rejected: search.rejected.clone(),
        scaling: search.scaling.clone(),
        worse_from_gpus: search.worse_from_gpus,
        planner_evaluated: search.evaluated,
        splits: search.splits.clone(),
        family_choice: family_sentence(ds, search),
        findings,
        gpu_choice: gpu_choice_rows(s, whatif),
        capacity_under_failure,
        pool_capacity_under_failure: pools_n1.map(pool_failure_row),
        speculation: speculation_rows(ds, search),
    }
}

/// N−1 of a split's pools as the report shows it: the figures `dic plan` prints, with
/// the replicas of each pool each event leaves.
fn pool_failure_row(f: &crate::planner::PoolFailure) -> PoolFailureRow {
    use crate::planner::pool_failure::PoolReplicas;
    let r = f.replicas;
    let left = |prefill: u64, decode: u64| PoolReplicas {
        prefill: r.prefill.saturating_sub(prefill),
        decode: r.decode.saturating_sub(decode),
    };
    PoolFailureRow {
        figures: f.clone(),
        left_prefill_down: left(1, 0),
        left_decode_down: left(0, 1),
        left_after_node_loss: f.node.as_ref().map(|n| left(n.lost.prefill, n.lost.decode)),
        prefill_holds: f.prefill_holds(),
        decode_holds: f.decode_holds(),
        node_loss_holds: f.node_loss_holds(),
        survives: f.survives(),
    }
}

/// The planner's verdict on the declared draft (`planner::speculation::judge`, carried
/// on the search's candidates: the line `dic plan` prints), for the layout deployed when
/// the search ranked it and for the planner's aggregated choice where that is another
/// layout. Read from the candidates, not the deployed scenario: where the planner turned
/// the draft off, the deployed scenario has none.
fn speculation_rows(
    ds: &DeploymentScenario,
    search: &crate::planner::Search,
) -> Vec<SpeculationRow> {
    if ds.pool.is_some() {
        return Vec::new();
    }
    let s = &ds.scenario;
    let is_deployed = |c: &crate::planner::Candidate| {
        c.layout == s.layout && c.weights == s.model.weights && c.kv_cache == s.model.kv_cache
    };
    let row = |c: &crate::planner::Candidate| {
        c.speculation.as_ref().map(|v| SpeculationRow {
            layout: c.describe(),
            deployed: is_deployed(c),
            verdict: v.clone(),
            sentence: v.sentence(),
        })
    };
    let deployed = search.ranked.iter().find(|c| is_deployed(c)).and_then(row);
    let chosen = search
        .chosen
        .as_ref()
        .filter(|c| !is_deployed(c))
        .and_then(row);
    deployed.into_iter().chain(chosen).collect()
}

/// The what-if's rows as the report shows them, in its rank order.
fn gpu_choice_rows(
    s: &crate::analysis::Scenario,
    whatif: &[crate::planner::whatif::WhatIf],
) -> Vec<GpuChoiceRow> {
    whatif
        .iter()
        .map(|w| GpuChoiceRow {
            gpu: w.gpu.clone(),
            own: w.gpu == s.topology.gpu.name,
            nodes: w.nodes,
            gpus_per_node: w.gpus_per_node,
            layout: w.chosen.as_ref().map(|c| c.describe()),
            gpus_used: w.chosen.as_ref().map(|c| c.gpus),
            cost_per_hour: w.cost_per_hour,
            cost_per_million_output: w.cost_per_million_output,
            price_per_node_hour: w.price_per_node_hour,
            list_price: w.list_price,
            price_from: w.price_from.clone(),
            why_none: w.why_none.clone(),
        })
        .collect()
}

/// N−1 of the layout deployed, the figures `dic plan` prints (`planner::failure::
/// of_deployed`), with W0410's verdict; none for a split's pools.
fn failure_row(
    ds: &DeploymentScenario,
    a: &Analysis,
    search: &crate::planner::Search,
) -> Option<FailureRow> {
    if ds.pool.is_some() {
        return None;
    }
    let f = crate::planner::failure::of_deployed(search, &ds.scenario)?;
    Some(FailureRow {
        figures: f.clone(),
        replicas_after_rollout: f.replicas.saturating_sub(f.rollout_unavailable),
        replicas_after_node_loss: f.node_replicas.map(|n| f.replicas.saturating_sub(n)),
        rollout_holds: f.rollout_holds(),
        node_loss_holds: f.node_loss_holds(),
        warned: a
            .findings
            .iter()
            .any(|x| x.code == crate::diagnostics::Code::CapacityUnderFailure),
    })
}

/// The warnings and advice on the deployment, as `dic check` words them.
fn finding_rows(a: &Analysis) -> Vec<FindingRow> {
    a.findings
        .iter()
        .filter(|f| f.severity != crate::diagnostics::Severity::Error)
        .map(|f| FindingRow {
            code: f.code.to_string(),
            severity: f.severity.as_str().to_string(),
            message: f.message.clone(),
            help: f.help.clone(),
        })
        .collect()
}

/// The report's first sentence, the verdict its first screen gives the evidence for:
/// deployable (a lowered deployment passed every rule `dic check` applies), whether it
/// meets each SLO and by how much, what it costs per hour and per million output tokens,
/// and what dic would change (its advice) or that warnings follow.
pub(super) fn headline(
    deployed: &str,
    gpu: &str,
    slo: &[SloRow],
    cost: &CostRow,
    findings: &[FindingRow],
) -> String {
    let figure = |v: f64, unit: &str| match unit {
        "ms" if v >= 100.0 => format!("{v:.0} ms"),
        "ms" => format!("{v:.1} ms"),
        "req/s" => format!("{v:.2} req/s"),
        _ => format!("{v:.0} {unit}"),
    };
    let row = |r: &SloRow| {
        let predicted = r
            .predicted
            .map_or_else(|| "unbounded".to_string(), |v| figure(v, &r.unit));
        let margin = match r.headroom_percent {
            Some(h) if r.met => format!(", {:.0}% headroom", h.abs()),
            Some(h) => format!(", {:.0}% past the bound", h.abs()),
            None => String::new(),
        };
        format!(
            "{} {predicted} against {} {}{margin}",
            r.metric,
            r.op,
            figure(r.bound, &r.unit),
        )
    };
    let missed: Vec<String> = slo.iter().filter(|r| !r.met).map(row).collect();
    let slos = if slo.is_empty() {
        "carries the workload (no SLO declared)".to_string()
    } else if missed.is_empty() {
        format!(
            "meets every SLO ({})",
            slo.iter().map(row).collect::<Vec<_>>().join("; ")
        )
    } else {
        format!("misses {}", missed.join("; "))
    };
    let money = match (cost.per_hour, cost.per_million_output_tokens) {
        (Some(h), Some(m)) => format!("${h:.2}/h, ${m:.3} per million output tokens"),
        (Some(h), None) => format!("${h:.2}/h"),
        (None, _) => {
            "no price (set `price` on the cluster for $/h and $ per million tokens)".to_string()
        }
    };
    // A cheaper layout (A0701) first: it is what changes the bill.
    let advice = findings
        .iter()
        .filter(|f| f.severity == "advice")
        .min_by_key(|f| f.code != "A0701");
    let warnings = findings.iter().filter(|f| f.severity == "warning").count();
    let next = match (advice, warnings) {
        (Some(f), _) => format!(" dic would change: {} ({}).", f.message, f.code),
        (None, 0) => String::new(),
        (None, 1) => " One warning below.".to_string(),
        (None, n) => format!(" {n} warnings below."),
    };
    format!(
        "Deployable: `{deployed}` on {} × {gpu} {slos}; {money}.{next}",
        cost.gpus_used
    )
}

/// Memory of one GPU per PP stage, in bytes.
fn memory_rows(s: &crate::analysis::Scenario, a: &Analysis) -> Vec<MemoryRow> {
    let total = s.topology.gpu.memory as u64;
    a.memory
        .stages
        .iter()
        .map(|st| MemoryRow {
            stage: st.stage,
            layers: st.layers,
            total,
            weights: st.weights as u64,
            activations: st.activations as u64,
            non_torch: st.non_torch as u64,
            cuda_graphs: st.cuda_graphs as u64,
            kv_cache: st.kv_cache.max(0.0) as u64,
            free: (s.topology.gpu.memory - st.budget).max(0.0) as u64,
        })
        .collect()
}

/// Each SLO bound against its prediction, in the report's units, with the headroom.
fn slo_rows(a: &Analysis) -> Vec<SloRow> {
    use crate::program::SloMetric;
    a.slo
        .iter()
        .map(|r| {
            let t = &r.target;
            let (metric, scale, unit) = match t.metric {
                SloMetric::Throughput => (t.label(), 1.0, "tokens/s"),
                SloMetric::RequestRate => (t.label(), 1.0, "req/s"),
                _ => (t.label(), 1e3, "ms"),
            };
            let upper = matches!(
                t.op,
                crate::syntax::ast::Op::Le | crate::syntax::ast::Op::Lt
            );
            let predicted = Some(r.predicted * scale).filter(|v| v.is_finite());
            let headroom = predicted.map(|v| {
                if upper {
                    (t.value * scale - v) / (t.value * scale) * 100.0
                } else {
                    (v - t.value) / t.value * 100.0
                }
            });
            SloRow {
                metric,
                op: t.op.as_str().to_string(),
                bound: t.value * scale,
                predicted,
                unit: unit.to_string(),
                met: r.met,
                headroom_percent: headroom,
            }
        })
        .collect()
}

/// The decode step by cause, in ms.
fn step_row(p: &crate::analysis::perf::Prediction) -> StepRow {
    StepRow {
        tpot_ms: p.step.tpot * 1e3,
        compute_ms: p.step.compute * 1e3,
        memory_ms: p.step.memory * 1e3,
        communication_ms: p.step.comm * 1e3,
        overhead_ms: p.step.overhead * 1e3,
        cpu_launches_ms: p.step.cpu_launches * 1e3,
        bubble_ms: p.step.bubble * 1e3,
        draft_ms: p.step.draft * 1e3,
        dense_gemms_ms: p.step.kernels.dense_gemms * 1e3,
        experts_ms: p.step.kernels.experts * 1e3,
        attention_ms: p.step.kernels.attention * 1e3,
        collectives: p
            .step
            .comm_items
            .iter()
            .map(|c| CollectiveRow {
                group: c.group.to_string(),
                collective: c.collective.name().to_string(),
                count: c.count,
                bytes: c.bytes,
                ranks: c.ranks,
                link: c.link.to_string(),
                time_ms: c.time * 1e3,
            })
            .collect(),
    }
}

/// The planner's choice between the families, said of the deployed layout: as the search
/// says it when the deployment is that choice (`layout = auto`, or a written layout equal
/// to it), else what `layout = auto` would deploy instead of the written layout.
fn family_sentence(ds: &DeploymentScenario, search: &crate::planner::Search) -> Option<String> {
    let why = search.family_choice.as_ref()?;
    let s = &ds.scenario;
    let in_formats = |weights: &str, kv: &str| weights == s.model.weights && kv == s.model.kv_cache;
    let (deployed, is_choice) = match &ds.pool {
        Some(part) => {
            let (ps, dsc) = part.pools(s);
            let is_split = |c: &crate::planner::DisaggCandidate| {
                let engine = |l: crate::program::Layout, replicas: u64| crate::program::Layout {
                    dp: l.dp.max(1) * replicas,
                    ..l
                };
                engine(c.split.prefill, c.split.prefill_replicas) == ps.layout
                    && engine(c.split.decode, c.split.decode_replicas) == dsc.layout
            };
            (
                format!("split `prefill {} + decode {}`", ps.layout, dsc.layout),
                search.split_wins && search.splits.first().is_some_and(is_split),
            )
        }
        None => (
            format!("layout `{}`", s.layout),
            !search.split_wins
                && search
                    .chosen
                    .as_ref()
                    .is_some_and(|c| c.layout == s.layout && in_formats(&c.weights, &c.kv_cache)),
        ),
    };
    Some(if is_choice {
        why.clone()
    } else {
        format!("this deployment runs its written {deployed}; `layout = auto` would deploy {why}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slo(metric: &str, bound: f64, predicted: f64, met: bool) -> SloRow {
        SloRow {
            metric: metric.into(),
            op: "<=".into(),
            bound,
            predicted: Some(predicted),
            unit: "ms".into(),
            met,
            headroom_percent: Some((bound - predicted) / bound * 100.0),
        }
    }

    fn cost(per_hour: Option<f64>, per_million: Option<f64>) -> CostRow {
        CostRow {
            per_hour,
            per_million_input_tokens: None,
            per_million_output_tokens: per_million,
            per_request: None,
            input_share: 0.3,
            nodes: 1,
            gpus_used: 8,
            gpus_idle: 0,
        }
    }

    /// The first sentence answers: deployable, each SLO with its headroom, $/h and $ per
    /// million output tokens, and what dic would change.
    #[test]
    fn the_headline_gives_the_verdict_the_slos_the_cost_and_the_change() {
        let slos = [
            slo("ttft.p95", 1000.0, 445.0, true),
            slo("tpot.p95", 50.0, 30.7, true),
        ];
        let advice = FindingRow {
            code: "A0701".into(),
            severity: "advice".into(),
            message: "`tp 4` also meets every SLO on 4 GPUs".into(),
            help: None,
        };
        let h = headline(
            "tp 8 × pp 1 × dp 1",
            "h100_sxm",
            &slos,
            &cost(Some(98.0), Some(1.234)),
            &[advice],
        );
        assert_eq!(
            h,
            "Deployable: `tp 8 × pp 1 × dp 1` on 8 × h100_sxm meets every SLO (ttft.p95 445 ms \
             against <= 1000 ms, 56% headroom; tpot.p95 30.7 ms against <= 50.0 ms, 39% \
             headroom); $98.00/h, $1.234 per million output tokens. dic would change: `tp 4` \
             also meets every SLO on 4 GPUs (A0701)."
        );
        let missed = [slo("tpot.p95", 50.0, 60.0, false)];
        let h = headline("tp 1", "l40s", &missed, &cost(None, None), &[]);
        assert!(
            h.contains("misses tpot.p95 60.0 ms against <= 50.0 ms, 20% past the bound"),
            "{h}"
        );
        assert!(h.contains("no price (set `price`"), "{h}");
    }
}
