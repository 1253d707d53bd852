//! The figures a deployment's forecast needs beyond its [`Analysis`]: the share of the
//! GPU's time that prompt tokens take (how the report splits the hour's cost between
//! prompt and output tokens), a disaggregated pair's numbers (both pools, the transfer
//! between them, their costs) and the tokens speculative decoding advances per step.
//!
//! Computed here, with the models that own them, once per decided deployment (the driver
//! calls [`figures`]); the IR's lowering copies them into the forecast and does no
//! prediction maths of its own.

use super::{disagg, perf, Analysis, DeploymentScenario};
use crate::program::Layout;

/// What [`figures`] computes for one decided deployment.
#[derive(Debug, Clone, Default)]
pub struct ForecastFigures {
    /// The share of GPU step time that prompt tokens take: for an aggregated deployment,
    /// one minus the decode step without prompt chunks over the step as served (chunks
    /// ride along); for a disaggregated pool, the prefill pool's share of the pair's cost.
    pub input_share: f64,
    /// A disaggregated pool's pair.
    pub pair: Option<PairFigures>,
    /// Tokens each sequence advances per step with speculative decoding at the assumed
    /// acceptance.
    pub tokens_per_step: Option<f64>,
}

/// Both pools of a disaggregated deployment, the transfer between them and their cost.
#[derive(Debug, Clone)]
pub struct PairFigures {
    pub prefill_layout: Layout,
    pub decode_layout: Layout,
    /// GPUs both pools take and the nodes they occupy.
    pub gpus: u64,
    pub nodes: u64,
    /// GPUs on those nodes that neither pool uses.
    pub idle_gpus: u64,
    /// $/h of both pools, and of each (absent without prices).
    pub cost_per_hour: Option<f64>,
    pub prefill_cost_per_hour: Option<f64>,
    pub decode_cost_per_hour: Option<f64>,
    /// The pair's prediction, when both pools fit ([`disagg::DisaggPrediction`]).
    pub prediction: Option<PairPrediction>,
    /// The link the prompt's KV cache crosses: its name and bandwidth (bytes/s).
    pub transfer_link: String,
    pub transfer_bandwidth: f64,
}

/// The parts of [`disagg::DisaggPrediction`] the forecast shows, in seconds and bytes.
#[derive(Debug, Clone, Copy)]
pub struct PairPrediction {
    pub prefill: f64,
    pub prefill_wait: f64,
    pub prefill_utilization: f64,
    pub transfer_bytes: f64,
    pub transfer: f64,
}

/// The forecast's figures for one decided deployment and its analysis.
pub fn figures(ds: &DeploymentScenario, a: &Analysis) -> ForecastFigures {
    let s = &ds.scenario;
    let pair = ds.pool.as_ref().map(|part| {
        let (ps, dsc) = part.pools(s);
        let (gpus, nodes, cost) = disagg::pair_cost(ps, dsc, part.same_group);
        let (prefill_cost, decode_cost) = disagg::pool_costs(ps, dsc, part.same_group);
        let capacity = if part.same_group {
            nodes * ps.topology.gpus_per_node.max(1)
        } else {
            ps.topology.nodes_for_layout(&ps.layout) * ps.topology.gpus_per_node.max(1)
                + dsc.topology.nodes_for_layout(&dsc.layout) * dsc.topology.gpus_per_node.max(1)
        };
        let (bandwidth, _, link) = disagg::transfer_link(ps, dsc, part.same_group);
        let prediction =
            disagg::predict_written(ps, dsc, part.same_group, &perf::FITTED).map(|x| {
                PairPrediction {
                    prefill: x.prefill,
                    prefill_wait: x.prefill_wait,
                    prefill_utilization: x.prefill_utilization,
                    transfer_bytes: x.transfer_bytes,
                    transfer: x.transfer,
                }
            });
        PairFigures {
            prefill_layout: ps.layout,
            decode_layout: dsc.layout,
            gpus,
            nodes,
            idle_gpus: capacity.saturating_sub(gpus),
            cost_per_hour: cost,
            prefill_cost_per_hour: prefill_cost,
            decode_cost_per_hour: decode_cost,
            prediction,
            transfer_link: link,
            transfer_bandwidth: bandwidth,
        }
    });
    let input_share = match &pair {
        Some(x) => {
            let (cp, cd) = match (x.prefill_cost_per_hour, x.decode_cost_per_hour) {
                (Some(a), Some(b)) => (a, b),
                _ => (
                    x.prefill_layout.gpus() as f64,
                    x.decode_layout.gpus() as f64,
                ),
            };
            cp / (cp + cd).max(1e-9)
        }
        None => a
            .prediction
            .as_ref()
            .map(|p| {
                let (prompt, output) = s
                    .workload
                    .map(|w| (w.prompt, w.output))
                    .unwrap_or((0.0, 0.0));
                let ctx = prompt + output / 2.0;
                let decode_only = perf::StepModel::new(s)
                    .token_step(p.running, ctx, 0.0, 0.0, &perf::FITTED)
                    .tpot;
                if p.tpot > 0.0 {
                    (1.0 - decode_only / p.tpot).clamp(0.0, 1.0)
                } else {
                    0.0
                }
            })
            .unwrap_or(0.0),
    };
    ForecastFigures {
        input_share,
        pair,
        tokens_per_step: s.engine.speculative.as_ref().map(|sp| sp.tokens_per_step()),
    }
}
