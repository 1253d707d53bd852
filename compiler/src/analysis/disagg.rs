//! Disaggregated prefill/decode serving (vLLM's P/D with a KV connector such as NIXL):
//! `x` prefill replicas of one layout compute prompts and hand their KV cache over the
//! fabric to `y` decode replicas of another, which only decode. Predicted with the same
//! step model as an aggregated deployment:
//!
//! - the prefill pool's replicas each queue their prompts (an M/D/1 wait, prompts that
//!   wait together sharing a step of `max_num_batched_tokens`, nothing else in it:
//!   `perf::open_loop_prefill`);
//! - the KV transfer moves the prompt's whole KV cache (every layer, bytes per token ×
//!   prompt) from the prefill replica's GPUs to the decode replica's, over NVLink when
//!   both pools fit one node, else over the nodes' NICs (one per GPU of the narrower TP
//!   group), after the prefill (vLLM's NIXL connector pulls it when the decode side
//!   admits the request);
//! - the decode pool runs decode-only steps at the batch Little's law gives it;
//! - TTFT = front-end latency (`PerfConstants::front_end_latency`) + prefill wait + prefill
//!   + transfer + one decode step.
//!
//! A deployment declares a pair with `layout = { prefill = …, decode = … }`; each pool is
//! then analysed for its own memory and structure (`analyze_pool`) and predicted here as
//! a pair ([`predict_pools`]). `dic plan` reports the family beside the aggregated one.

use super::memory::memory;
use super::memory::MemoryReport;
use super::perf::{
    open_loop_prefill, prefix_of, running_cap, PerfConstants, Prediction, StepModel, Throughput,
    TtftParts,
};
use super::scenario::{Load, Scenario};
use crate::program::Layout;
use serde::Serialize;

/// The two pools: `prefill_replicas` engines of layout `prefill` (its `dp` are
/// attention-DP ranks, each serving its own requests) and `decode_replicas` of `decode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
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

impl PoolSplit {
    /// The split as a `.dist` layout: `{ prefill = tp 2 × dp 7, decode = tp 2 }`.
    pub fn as_layout(&self) -> String {
        let pool = |l: &Layout, replicas: u64| {
            let dp = l.dp.max(1) * replicas;
            let mut s = format!("tp {}", l.tp);
            if l.pp > 1 {
                s.push_str(&format!(" × pp {}", l.pp));
            }
            if dp > 1 {
                s.push_str(&format!(" × dp {dp}"));
            }
            s
        };
        format!(
            "{{ prefill = {}, decode = {} }}",
            pool(&self.prefill, self.prefill_replicas),
            pool(&self.decode, self.decode_replicas)
        )
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
    let pool = |l: Layout| {
        let mut x = s.clone();
        x.layout = l;
        x
    };
    predict_pools(
        (&pool(split.prefill), split.prefill_replicas),
        (&pool(split.decode), split.decode_replicas),
        true,
        c,
    )
}

/// The link a prompt's KV cache crosses from the prefill pool to the decode pool:
/// NVLink when both pools share one node of one group, else the nodes' scale-out fabric
/// (the slower of the two groups'), one stream per GPU of the narrower TP group up to the
/// NICs a node has. Returns (bandwidth in bytes/s, latency in s, what it is).
/// `ps` and `ds` are the pools as written (`dp`: replicas).
pub fn transfer_link(ps: &Scenario, ds: &Scenario, same_group: bool) -> (f64, f64, String) {
    engine_link(ps, ds, ps.layout.gpus() + ds.layout.gpus(), same_group)
}

/// [`transfer_link`] between engines `ps` and `ds` of pools that take `gpus` together.
fn engine_link(ps: &Scenario, ds: &Scenario, gpus: u64, same_group: bool) -> (f64, f64, String) {
    let (pt, dt) = (&ps.topology, &ds.topology);
    let streams = ps.layout.tp.min(ds.layout.tp).max(1) as f64;
    let one_node = same_group && gpus <= pt.gpus_per_node;
    if let (true, Some(up)) = (one_node, &pt.scale_up) {
        return (up.bandwidth * streams, up.latency, up.name.clone());
    }
    let out = |t: &super::scenario::Topology| {
        t.scale_out.as_ref().map(|o| {
            (
                o.link.bandwidth * streams.min(o.nics.max(1) as f64),
                o.link.latency,
                o.link.name.clone(),
            )
        })
    };
    match (out(pt), out(dt)) {
        (Some(a), Some(b)) => {
            if a.0 <= b.0 {
                (a.0, a.1.max(b.1), a.2)
            } else {
                (b.0, a.1.max(b.1), b.2)
            }
        }
        (Some(a), None) | (None, Some(a)) => a,
        // No fabric between nodes: the pools can only meet inside a node.
        (None, None) => match &pt.scale_up {
            Some(up) => (up.bandwidth * streams, up.latency, up.name.clone()),
            None => (
                pt.gpu.pcie.bandwidth * streams,
                pt.gpu.pcie.latency,
                pt.gpu.pcie.name.clone(),
            ),
        },
    }
}

/// GPUs, nodes and $/h of the two pools together: on one node group they pack onto the
/// same nodes; on two, each pays for its own. The price is `None` when a group has none.
pub fn pair_cost(ps: &Scenario, ds: &Scenario, same_group: bool) -> (u64, u64, Option<f64>) {
    let gpus = ps.layout.gpus() + ds.layout.gpus();
    if same_group {
        let t = &ps.topology;
        let nodes = t.nodes_for(gpus);
        return (gpus, nodes, t.price_per_node_hour.map(|p| p * nodes as f64));
    }
    let (np, nd) = (
        ps.topology.nodes_for_layout(&ps.layout),
        ds.topology.nodes_for_layout(&ds.layout),
    );
    let price = match (
        ps.topology.price_per_node_hour,
        ds.topology.price_per_node_hour,
    ) {
        (Some(a), Some(b)) => Some(a * np as f64 + b * nd as f64),
        _ => None,
    };
    (gpus, np + nd, price)
}

/// One replica of a pool (its engine alone).
pub fn replica(s: &Scenario) -> Scenario {
    let mut one = s.clone();
    one.layout.dp = 1;
    one
}

/// Each pool's share of [`pair_cost`]'s $/h (`None` without a price): on one node group
/// the pools share nodes, so the hour is split by GPUs; on two, each pays its own nodes.
pub fn pool_costs(ps: &Scenario, ds: &Scenario, same_group: bool) -> (Option<f64>, Option<f64>) {
    let (gpus, _, price) = pair_cost(ps, ds, same_group);
    if same_group {
        let share = |x: &Scenario| price.map(|p| p * x.layout.gpus() as f64 / gpus.max(1) as f64);
        return (share(ps), share(ds));
    }
    let own = |x: &Scenario| x.topology.price_for_layout(&x.layout);
    (own(ps), own(ds))
}

/// The prediction of two pools written in a deployment (each scenario's layout its
/// pool's, `dp` its replicas, each replica an engine of its own; each pool on its own
/// hardware), `same_group` when both run on one node group. `None` when a pool has no KV
/// room.
pub fn predict_written(
    ps: &Scenario,
    ds: &Scenario,
    same_group: bool,
    c: &PerfConstants,
) -> Option<DisaggPrediction> {
    predict_pools(
        (&replica(ps), ps.layout.dp.max(1)),
        (&replica(ds), ds.layout.dp.max(1)),
        same_group,
        c,
    )
}

/// The prediction of `x` prefill engines `ps` and `y` decode engines `ds` (each
/// scenario's layout one engine's: its `dp` are attention-DP ranks, each serving its own
/// requests). `None` when an engine has no KV room.
pub fn predict_pools(
    (ps, x_engines): (&Scenario, u64),
    (ds, y_engines): (&Scenario, u64),
    same_group: bool,
    c: &PerfConstants,
) -> Option<DisaggPrediction> {
    let w = ds.workload?;
    let gpus = ps.layout.gpus() * x_engines + ds.layout.gpus() * y_engines;
    let (bandwidth, latency, _) = engine_link(ps, ds, gpus, same_group);
    let (pm, dm) = (memory(ps), memory(ds));
    if pm.stages.iter().any(|st| st.kv_cache <= 0.0)
        || dm.stages.iter().any(|st| st.kv_cache <= 0.0)
    {
        return None;
    }
    let s = ds;
    let (prompt, output) = (w.prompt, w.output.max(1.0));
    let (cached, _) = prefix_of(s, prompt);
    let fresh = prompt - cached;
    let ctx = prompt + output / 2.0;
    let psm = StepModel::new(ps);
    let dsm = StepModel::new(ds);
    // A prefill replica's steps, one or more waiting prompts each (one prompt's is its
    // prefill), and the most prompts per second one replica serves (in its fullest steps).
    let steps = psm.prompt_steps(fresh, cached, 0.0, ctx, c);
    let prefill = steps.time(1.0);
    let per_server = steps.most() / steps.time(steps.most());
    // The transfer: the fresh tokens' KV (cached blocks are already on the decode side
    // only if it cached them itself; counted in full, the conservative side).
    let bytes = kv_bytes_per_token(&pm, ps.layout.tp) * prompt;
    let transfer = latency + bytes / bandwidth.max(1.0);
    let cap = running_cap(ds, &dm, prompt, output).max(1.0);
    // Servers: every DP rank of every engine takes its own requests.
    let y = (y_engines * ds.layout.dp.max(1)) as f64;
    let x = (x_engines * ps.layout.dp.max(1)) as f64;
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
            // that cycle gives (per prefill server, `open_loop_prefill`), or, when
            // the prefill pool is the bottleneck, from Little's law at its capacity.
            let n = n as f64;
            let running = (n / y).clamp(1.0, cap);
            let step = decode_at(running);
            let base =
                c.front_end_latency(prompt, cached) + prefill + transfer + output * step.tpot;
            let mut wait = 0.0;
            let mut rate = n / base;
            for _ in 0..60 {
                rate = n / (base + wait);
                if rate / x >= 0.99 * per_server {
                    rate = 0.99 * x * per_server;
                    wait = (n / rate - base).max(0.0);
                    break;
                }
                let next = open_loop_prefill(rate / x, &steps).wait;
                if (next - wait).abs() < 1e-6 {
                    break;
                }
                wait = 0.5 * wait + 0.5 * next;
            }
            (rate, running, step, Some(wait))
        }
    };
    let decode_capacity = y * cap / decode_at(cap).tpot / output;
    let overloaded = closed_wait.is_none()
        && (rate / x >= 0.999 * per_server || rate >= decode_capacity * 0.999);
    // One prefill replica's queue at the rate the load gives it (its busy share capped
    // at 0.99; a saturated pool counts as fully busy).
    let queue = open_loop_prefill(rate / x, &steps);
    let saturated = rate / x >= 0.99 * per_server;
    let wait = match closed_wait {
        Some(w) => w,
        None if overloaded => f64::INFINITY,
        None => queue.wait,
    };
    let parts = TtftParts {
        front_end: c.front_end_latency(prompt, cached),
        step_wait: step.tpot,
        prefill,
        prefill_queue: wait,
        kv_transfer: transfer,
        ..TtftParts::default()
    };
    let max_rps = (x * per_server).min(decode_capacity);
    let out_tps = if overloaded {
        max_rps * output
    } else {
        rate * output
    };
    let throughput = Throughput {
        served: out_tps,
        saturated: max_rps * output,
        gpus: gpus.max(1) as f64,
        output,
    };
    Some(DisaggPrediction {
        prediction: Prediction::at(running, cap, parts, step, overloaded, throughput),
        prefill,
        prefill_wait: wait,
        transfer,
        transfer_bytes: bytes,
        prefill_utilization: if saturated { 1.0 } else { queue.busy },
    })
}
