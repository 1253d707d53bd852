//! The forecast: what dic predicts for each lowered deployment — the headline figures
//! (TTFT, TPOT, throughput, KV capacity), memory per PP stage, the SLO verdicts, the
//! decode step by cause, the cost split, the planner's alternatives, rejections and
//! scaling curve, a disaggregated pair's numbers, the speculative decoding assumed and the
//! planner's verdict on it, the what-if across GPU types and the capacity under failure
//! (N−1).
//!
//! Kept apart from the launch plan ([`super::LaunchPlan`]) so a refit of the performance
//! model moves this and the report rendered from it, never a launch script or a
//! manifest. Every number here was computed by the analysis (`analysis::forecast`
//! gathers the few the report needs beyond [`crate::analysis::Analysis`]); lowering only
//! copies and converts units.

use serde::{Deserialize, Serialize};

/// Bumped when the forecast's meaning changes.
pub const FORECAST_FORMAT_VERSION: u32 = 1;

/// What dic predicts, one entry per deployment of the launch plan (same names, same
/// order).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Forecast {
    pub format_version: u32,
    pub deployments: Vec<DeploymentForecast>,
}

impl Default for Forecast {
    fn default() -> Self {
        Forecast {
            format_version: FORECAST_FORMAT_VERSION,
            deployments: Vec::new(),
        }
    }
}

impl Forecast {
    /// The forecast of the launch plan's deployment `name`.
    pub fn of(&self, name: &str) -> Option<&DeploymentForecast> {
        self.deployments.iter().find(|d| d.name == name)
    }
}

/// One deployment's forecast (a node group's part, or a disaggregated pool, as in the
/// launch plan).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeploymentForecast {
    /// The launch plan's deployment name.
    pub name: String,
    pub predicted: PredictedPlan,
    /// $/h of one node, when the cluster states a price.
    pub price_per_hour: Option<f64>,
    /// Speculative decoding as the prediction assumed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculative: Option<SpeculativeForecast>,
    /// A disaggregated pool's pair (the same on both pools).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair: Option<PairReport>,
    pub report: ReportData,
}

/// The acceptance the prediction assumed and what it makes of a step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpeculativeForecast {
    pub acceptance: f64,
    /// Tokens each sequence advances per step at that acceptance.
    pub tokens_per_step: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PredictedPlan {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    pub kv_cache_tokens: u64,
    pub weights_bytes_per_gpu: u64,
    /// Tokens of KV cache the CPU offload buffer holds per engine (`kv_offload`); absent
    /// without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offloaded_kv_tokens: Option<u64>,
}

/// Memory of one GPU of a PP stage, in bytes; `free` is what gpu_memory_utilization leaves.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryRow {
    pub stage: u64,
    pub layers: u64,
    pub total: u64,
    pub weights: u64,
    pub activations: u64,
    pub non_torch: u64,
    pub cuda_graphs: u64,
    pub kv_cache: u64,
    pub free: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SloRow {
    /// `ttft.p95`, `throughput`, …
    pub metric: String,
    pub op: String,
    /// In ms for latencies, tokens/s or req/s for rates.
    pub bound: f64,
    pub predicted: Option<f64>,
    pub unit: String,
    pub met: bool,
    /// How far inside the bound, as a percentage of the bound (negative: missed).
    pub headroom_percent: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CollectiveRow {
    pub group: String,
    pub collective: String,
    pub count: u64,
    pub bytes: f64,
    pub ranks: u64,
    pub link: String,
    pub time_ms: f64,
}

/// One decode step (TPOT) split by cause, in ms.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRow {
    pub tpot_ms: f64,
    pub compute_ms: f64,
    pub memory_ms: f64,
    pub communication_ms: f64,
    pub overhead_ms: f64,
    /// The GPU waiting on the CPU's launches in the steps run without CUDA graphs (those
    /// carrying a prompt chunk), spread over all steps.
    pub cpu_launches_ms: f64,
    pub bubble_ms: f64,
    /// Speculative drafting, per output token.
    pub draft_ms: f64,
    /// The kernel groups (dense GEMMs and attention each at its own roofline, the experts
    /// as the fused-MoE kernel's fitted curve); with communication, overhead, the
    /// CPU's launches and drafting they add up to `tpot_ms` (with PP, the bubble is the
    /// idle share of it).
    pub dense_gemms_ms: f64,
    pub experts_ms: f64,
    pub attention_ms: f64,
    pub collectives: Vec<CollectiveRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CostRow {
    pub per_hour: Option<f64>,
    /// Prices per million prompt and output tokens that sum to the true cost of a request
    /// (the hour split by `input_share`).
    pub per_million_input_tokens: Option<f64>,
    pub per_million_output_tokens: Option<f64>,
    /// The hour's cost over the requests it serves.
    pub per_request: Option<f64>,
    /// The share of GPU step time that prompt tokens take (prefill chunks in the steps).
    pub input_share: f64,
    pub nodes: u64,
    pub gpus_used: u64,
    pub gpus_idle: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlternativeRow {
    pub layout: String,
    pub gpus: u64,
    pub cost_per_hour: Option<f64>,
    pub cost_per_million_output: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    pub chosen: bool,
}

/// Everything the cost report shows, computed once here so the report target only renders.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReportData {
    /// The verdict in one sentence: deployable, each SLO met or not with its headroom,
    /// $/h and $ per million output tokens, what dic would change (the first screen).
    #[serde(default)]
    pub headline: String,
    pub memory: Vec<MemoryRow>,
    pub kv_cache_tokens: u64,
    pub max_concurrency: f64,
    pub prompt_tokens: f64,
    pub output_tokens: f64,
    pub requests_per_s: Option<f64>,
    pub slo: Vec<SloRow>,
    pub step: Option<StepRow>,
    pub cost: CostRow,
    pub alternatives: Vec<AlternativeRow>,
    pub rejected: Vec<crate::planner::Rejection>,
    pub scaling: Vec<crate::planner::ScalingPoint>,
    pub worse_from_gpus: Option<u64>,
    pub planner_evaluated: usize,
    /// The disaggregated family's best splits, and which family the planner would deploy
    /// and why.
    pub splits: Vec<crate::planner::DisaggCandidate>,
    pub family_choice: Option<String>,
    /// The warnings and the planner's advice on this deployment, as `dic check` words
    /// them.
    pub findings: Vec<FindingRow>,
    /// Which GPU: the what-if across GPU types (`planner::whatif`), best first; empty
    /// where it did not run (a split's pools, a node group's part, `dic check`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_choice: Vec<GpuChoiceRow>,
    /// N−1: the load carried within the SLOs with replicas down (`planner::failure`);
    /// absent where it is not computed (a split's pools: `pool_capacity_under_failure`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_under_failure: Option<FailureRow>,
    /// N−1 for a split's pools (`planner::pool_failure`): the pair with one replica of
    /// each pool down and with the node lost; absent for an aggregated deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_capacity_under_failure: Option<PoolFailureRow>,
    /// The planner's verdict on the declared speculative draft (`planner::speculation::
    /// judge`, the one `dic plan` prints): for the layout deployed and, where it is
    /// another layout, for the planner's aggregated choice; empty without a draft, on a
    /// split's pools, or where the search ranked neither.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub speculation: Vec<SpeculationRow>,
}

/// N−1 of a split for the report: `planner::PoolFailure` as `dic plan` prints it, with the
/// replicas each event leaves and its verdicts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PoolFailureRow {
    #[serde(flatten)]
    pub figures: crate::planner::PoolFailure,
    /// Replicas of each pool left with one prefill replica down, one decode replica down,
    /// and after the node is lost.
    pub left_prefill_down: crate::planner::pool_failure::PoolReplicas,
    pub left_decode_down: crate::planner::pool_failure::PoolReplicas,
    pub left_after_node_loss: Option<crate::planner::pool_failure::PoolReplicas>,
    pub prefill_holds: bool,
    pub decode_holds: bool,
    /// True when both pools share one node (not checked).
    pub node_loss_holds: bool,
    pub survives: bool,
}

/// The draft weighed on and off on one layout: the planner's verdict, copied.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpeculationRow {
    /// The layout judged, as the planner describes it.
    pub layout: String,
    /// It is the layout deployed (else the planner's aggregated choice).
    pub deployed: bool,
    #[serde(flatten)]
    pub verdict: crate::planner::speculation::SpeculationChoice,
    /// Which setting and why, `dic plan`'s line.
    pub sentence: String,
}

/// One GPU type of the what-if: the deployment's cluster rebuilt on it and the planner's
/// cheapest layout meeting every SLO there (`planner::whatif::WhatIf`, copied).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GpuChoiceRow {
    /// The stdlib GPU name.
    pub gpu: String,
    /// The cluster's own GPU type.
    pub own: bool,
    /// The cluster on this GPU: nodes × GPUs per node.
    pub nodes: u64,
    pub gpus_per_node: u64,
    /// The planner's choice on it (`None`: nothing meets the SLOs, [`Self::why_none`]).
    pub layout: Option<String>,
    pub gpus_used: Option<u64>,
    /// $/h and $ per million output tokens of that layout (the ranking's measure), when
    /// priced.
    pub cost_per_hour: Option<f64>,
    pub cost_per_million_output: Option<f64>,
    /// $/h per node, and whether it is the catalog's list price (of `price_from`) rather
    /// than the cluster's own.
    pub price_per_node_hour: Option<f64>,
    pub list_price: bool,
    pub price_from: Option<String>,
    pub why_none: Option<String>,
}

/// N−1 for the report: `planner::Failure` as `dic plan` prints it, with its verdicts and
/// whether W0410 fired.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailureRow {
    #[serde(flatten)]
    pub figures: crate::planner::Failure,
    /// Replicas left during a rolling update, and after the node is lost.
    pub replicas_after_rollout: u64,
    pub replicas_after_node_loss: Option<u64>,
    /// The replicas left during a rolling update carry the offered load within the SLOs.
    pub rollout_holds: bool,
    /// So do those left after the node holding the most replicas is lost (true on one
    /// node, where it is not checked).
    pub node_loss_holds: bool,
    /// W0410 fired on this deployment: `replicas_needed` hold through both.
    pub warned: bool,
}

/// One warning or piece of advice for the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FindingRow {
    pub code: String,
    pub severity: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

/// Both pools, the transfer between them and the cost split, for the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairReport {
    pub prefill_layout: String,
    pub prefill_gpus: u64,
    pub decode_layout: String,
    pub decode_gpus: u64,
    /// $/h of each pool's nodes and of both (absent without prices).
    pub prefill_cost_per_hour: Option<f64>,
    pub decode_cost_per_hour: Option<f64>,
    pub cost_per_hour: Option<f64>,
    /// One prompt's prefill on an idle prefill server, and the wait before it.
    pub prefill_ms: f64,
    pub prefill_wait_ms: Option<f64>,
    pub prefill_utilization: f64,
    /// The prompt's KV cache moved to the decode pool: bytes, time, over which link.
    pub transfer_bytes: f64,
    pub transfer_ms: f64,
    pub transfer_link: String,
    pub transfer_gbps: f64,
}

/// One lowered deployment's forecast: the analysis's numbers and the figures the driver
/// gathered for it, in the report's units (ms, bytes, $/h).
pub(super) fn deployment_forecast(
    name: &str,
    ds: &crate::analysis::DeploymentScenario,
    a: &crate::analysis::Analysis,
    figures: &crate::analysis::forecast::ForecastFigures,
    search: Option<&crate::planner::Search>,
    whatif: &[crate::planner::whatif::WhatIf],
    pools_n1: Option<&crate::planner::PoolFailure>,
) -> DeploymentForecast {
    let s = &ds.scenario;
    let pred = a.prediction.as_ref();
    DeploymentForecast {
        name: name.to_string(),
        predicted: PredictedPlan {
            ttft_ms: pred.map(|p| p.ttft * 1e3).filter(|v| v.is_finite()),
            tpot_ms: pred.map(|p| p.tpot * 1e3),
            output_tokens_per_s: pred.map(|p| p.output_tokens_per_s),
            kv_cache_tokens: a.memory.kv_cache_tokens,
            weights_bytes_per_gpu: a.memory.tightest().weights as u64,
            offloaded_kv_tokens: crate::analysis::kv_offload::buffer_tokens(s, &a.memory)
                .map(|t| t as u64),
        },
        price_per_hour: s.topology.price_per_node_hour,
        speculative: s.engine.speculative.as_ref().map(|sp| SpeculativeForecast {
            acceptance: sp.acceptance,
            tokens_per_step: figures.tokens_per_step.unwrap_or(1.0),
        }),
        pair: figures.pair.as_ref().map(|x| {
            let pp = x.prediction;
            PairReport {
                prefill_layout: x.prefill_layout.to_string(),
                prefill_gpus: x.prefill_layout.gpus(),
                decode_layout: x.decode_layout.to_string(),
                decode_gpus: x.decode_layout.gpus(),
                prefill_cost_per_hour: x.prefill_cost_per_hour,
                decode_cost_per_hour: x.decode_cost_per_hour,
                cost_per_hour: x.cost_per_hour,
                prefill_ms: pp.map(|x| x.prefill * 1e3).unwrap_or(0.0),
                prefill_wait_ms: pp.map(|x| x.prefill_wait * 1e3).filter(|v| v.is_finite()),
                prefill_utilization: pp.map(|x| x.prefill_utilization).unwrap_or(0.0),
                transfer_bytes: pp.map(|x| x.transfer_bytes).unwrap_or(0.0),
                transfer_ms: pp.map(|x| x.transfer * 1e3).unwrap_or(0.0),
                transfer_link: x.transfer_link.clone(),
                transfer_gbps: x.transfer_bandwidth / 1e9,
            }
        }),
        report: super::report::report_data(ds, a, figures, search, whatif, pools_n1),
    }
}
