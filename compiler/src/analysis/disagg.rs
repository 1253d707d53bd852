//! Disaggregated prefill/decode serving (vLLM's P/D with a KV connector such as NIXL):
//! `x` prefill replicas of one layout compute prompts and hand their KV cache over the
//! fabric to `y` decode replicas of another, which only decode. Predicted with the same
//! step model as an aggregated deployment:
//!
//! - the prefill pool serves prompts one after another per replica (chunks of
//!   `max_num_batched_tokens`, nothing else in the step), an M/D/1 queue per replica;
//! - the KV transfer moves the prompt's whole KV cache (every layer, bytes per token ×
//!   prompt) from the prefill replica's GPUs to the decode replica's, over NVLink when
//!   both pools fit one node, else over the nodes' NICs (one per GPU of the narrower TP
//!   group), after the prefill (vLLM's NIXL connector pulls it when the decode side
//!   admits the request);
//! - the decode pool runs decode-only steps at the batch Little's law gives it;
//! - TTFT = fixed request latency + prefill wait + prefill + transfer + one decode step.
//!
//! The launch configuration for such a pair is not emitted yet: `dic plan` reports this
//! family beside the aggregated one so the two can be compared.

use super::memory::memory;
use super::memory::MemoryReport;
use super::perf::{prefix_of, running_cap, PerfConstants, Prediction, StepModel};
use super::scenario::{Load, Scenario};
use crate::program::Layout;
use serde::Serialize;

/// The two pools: `prefill_replicas` engines of layout `prefill` (its `dp` are
/// attention-DP ranks, each serving its own requests) and `decode_replicas` of `decode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PoolSplit {
    pub prefill: Layout,
    pub prefill_replicas: u64,
    pub decode: Layout,
    pub decode_replicas: u64,
}

impl PoolSplit {
    pub fn gpus(&self) -> u64 {
        self.prefill.gpus() * self.prefill_replicas + self.decode.gpus() * self.decode_replicas
    }
}

impl std::fmt::Display for PoolSplit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}P (tp {}) + {}D (tp {})",
            self.prefill_replicas, self.prefill.tp, self.decode_replicas, self.decode.tp
        )
    }
}

/// What the disaggregated pair adds to a prediction.
#[derive(Debug, Clone, Serialize)]
pub struct DisaggPrediction {
    /// TTFT, TPOT and throughput as for any deployment (`running`: per decode replica).
    #[serde(skip)]
    pub prediction: Prediction,
    /// One prompt's prefill on an idle prefill replica (seconds).
    pub prefill: f64,
    /// Queueing before the prefill (seconds).
    pub prefill_wait: f64,
    /// Moving one prompt's KV cache to the decode pool (seconds).
    pub transfer: f64,
    /// KV bytes moved per request.
    pub transfer_bytes: f64,
    /// Busy share of the prefill pool.
    pub prefill_utilization: f64,
}

/// KV bytes one token occupies across the whole model (every layer, every KV head), from
/// a pool's memory report (`tp`: the pool's TP, over which the per-GPU figure is split).
fn kv_bytes_per_token(mem: &MemoryReport, tp: u64) -> f64 {
    mem.stages
        .iter()
        .map(|st| st.kv_bytes_per_token * tp.max(1) as f64)
        .sum()
}

/// The pair's prediction under the scenario's workload; `None` when a pool does not fit
/// its GPUs (no KV room) or the split needs more GPUs than the cluster has.
pub fn predict(s: &Scenario, split: &PoolSplit, c: &PerfConstants) -> Option<DisaggPrediction> {
    let t = &s.topology;
    if split.gpus() > t.total_gpus() || split.prefill_replicas == 0 || split.decode_replicas == 0 {
        return None;
    }
    let w = s.workload?;
    let mut ps = s.clone();
    ps.layout = split.prefill;
    let mut ds = s.clone();
    ds.layout = split.decode;
    let (pm, dm) = (memory(&ps), memory(&ds));
    if pm.stages.iter().any(|st| st.kv_cache <= 0.0)
        || dm.stages.iter().any(|st| st.kv_cache <= 0.0)
    {
        return None;
    }
    let (prompt, output) = (w.prompt, w.output.max(1.0));
    let (cached, _) = prefix_of(s, prompt);
    let fresh = prompt - cached;
    let ctx = prompt + output / 2.0;
    let psm = StepModel::new(&ps);
    let dsm = StepModel::new(&ds);
    let prefill = psm.prefill_time(fresh, cached, 0.0, ctx, c);
    // The transfer: the fresh tokens' KV (cached blocks are already on the decode side
    // only if it cached them itself; counted in full, the conservative side).
    let bytes = kv_bytes_per_token(&pm, split.prefill.tp) * prompt;
    let streams = split.prefill.tp.min(split.decode.tp).max(1) as f64;
    let same_node = split.gpus() <= t.gpus_per_node;
    let (bandwidth, latency) = match (&t.scale_up, &t.scale_out) {
        (Some(up), _) if same_node => (up.bandwidth * streams, up.latency),
        (_, Some(out)) => (
            out.link.bandwidth * streams.min(out.nics.max(1) as f64),
            out.link.latency,
        ),
        (Some(up), None) => (up.bandwidth * streams, up.latency),
        (None, None) => (t.gpu.pcie.bandwidth * streams, t.gpu.pcie.latency),
    };
    let transfer = latency + bytes / bandwidth.max(1.0);
    let cap = running_cap(&ds, &dm, prompt, output).max(1.0);
    // Servers: every DP rank of every engine takes its own requests.
    let y = (split.decode_replicas * split.decode.dp.max(1)) as f64;
    let x = (split.prefill_replicas * split.prefill.dp.max(1)) as f64;
    // Decode-only steps at the batch the load gives each decode replica.
    let decode_at = |running: f64| dsm.token_step(running.max(1.0), ctx, 0.0, 0.0, c);
    let (rate, running, step, closed_wait) = match w.load {
        Load::Rate(r) => {
            let mut running = 1.0;
            let mut step = decode_at(running);
            for _ in 0..40 {
                let next = (r / y * output * step.tpot).clamp(1.0, cap);
                if (next - running).abs() < 1e-3 {
                    break;
                }
                running = 0.5 * running + 0.5 * next;
                step = decode_at(running);
            }
            (r, running, step, None)
        }
        Load::Concurrency(n) => {
            // A closed loop: `n` requests cycle through the prefill queue, the prefill,
            // the transfer and their decode; the prefill pool's wait follows from the rate
            // that cycle gives (M/D/1 per prefill server), or, when the prefill pool is
            // the bottleneck, from Little's law at its capacity.
            let n = n as f64;
            let running = (n / y).clamp(1.0, cap);
            let step = decode_at(running);
            let base = c.request_latency + prefill + transfer + output * step.tpot;
            let mut wait = 0.0;
            let mut rate = n / base;
            for _ in 0..60 {
                rate = n / (base + wait);
                let rho = rate * prefill / x;
                if rho >= 0.99 {
                    rate = 0.99 * x / prefill;
                    wait = (n / rate - base).max(0.0);
                    break;
                }
                let next = rho * prefill / (2.0 * (1.0 - rho));
                if (next - wait).abs() < 1e-6 {
                    break;
                }
                wait = 0.5 * wait + 0.5 * next;
            }
            (rate, running, step, Some(wait))
        }
    };
    let rho = rate * prefill / x;
    let decode_capacity = y * cap / decode_at(cap).tpot / output;
    let overloaded = closed_wait.is_none() && (rho >= 0.999 || rate >= decode_capacity * 0.999);
    let wait = match closed_wait {
        Some(w) => w,
        None if overloaded => f64::INFINITY,
        None => rho * prefill / (2.0 * (1.0 - rho)),
    };
    let ttft = c.request_latency + wait + prefill + transfer + step.tpot;
    let max_rps = (x / prefill).min(decode_capacity);
    let out_tps = if overloaded {
        max_rps * output
    } else {
        rate * output
    };
    let gpus = split.gpus().max(1) as f64;
    Some(DisaggPrediction {
        prediction: Prediction {
            running,
            ttft,
            tpot: step.tpot,
            output_tokens_per_s: out_tps,
            output_tokens_per_s_per_gpu: out_tps / gpus,
            requests_per_s: out_tps / output,
            overloaded,
            step,
            running_cap: cap,
            max_output_tokens_per_s: max_rps * output,
        },
        prefill,
        prefill_wait: wait,
        transfer,
        transfer_bytes: bytes,
        prefill_utilization: rho.min(1.0),
    })
}
