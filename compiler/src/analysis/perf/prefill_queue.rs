//! Queueing for the prefill budget: a burst that arrives at once (paced by the GPU or by
//! the front end), a closed loop's prompts (mean value analysis) and an open loop's
//! (M/D/1 with prompts sharing a step).

use super::step::StepModel;
use super::token_step::PromptSteps;
use super::PerfConstants;

/// Mean time to the first token of `k` prompts of `prompt` new tokens each (after
/// `cached` cached ones) that arrive at once: the scheduler fills each step's token budget
/// with them in order, so the i-th finishes after the steps that carry the first i + 1.
/// Each step is timed as one chunk of its tokens attending to half of them, which counts
/// several short prompts' attention as one long prompt's. Timed per prompt (each over its
/// own prefix, [`StepModel::chunk_step`]), the first wave came out shorter and the refit
/// worse: objective 0.1568 → 0.1579, TTFT 11.5 / 15.1 / 15.2% → 11.8 / 15.3 / 15.0% fitted
/// / leaving one GPU / one model out; the rows want the first wave no shorter than this.
pub(super) fn burst_prefill(
    sm: &StepModel,
    k: f64,
    prompt: f64,
    cached: f64,
    ctx: f64,
    c: &PerfConstants,
) -> f64 {
    let budget = sm.s.engine.max_num_batched_tokens.max(1) as f64;
    let per_step = budget.min(k.max(1.0) * prompt);
    let step = sm.prefill_time(per_step, cached, 0.0, ctx, c);
    let n = k.max(1.0).round() as u64;
    let steps: f64 = (1..=n)
        .map(|i| (i as f64 * prompt / budget).ceil())
        .sum::<f64>()
        / n as f64;
    steps * step
}

/// Mean time from a burst of `k` requests that arrive at once to their prompts' last
/// prefill steps, beyond the first request's front end, where the front end paces the
/// burst: it passes the requests one at a time, `front` seconds apart (the
/// [`PerfConstants::front_end_latency`]), so the i-th (from 0) reaches the scheduler
/// `i × front` after the first, and its prompt is then prefilled alone, in `single`
/// seconds. The burst is a tandem of the front end and the GPU: each request waits for
/// whichever holds it longer, this or the GPU's queue when it is given every prompt at
/// once ([`burst_prefill`]).
pub fn front_paced_burst(k: f64, front: f64, single: f64) -> f64 {
    (k.max(1.0) - 1.0) / 2.0 * front + single
}

/// Mean time from a prompt's arrival at the scheduler to its last prefill chunk, in a
/// closed loop of `clients` requests that each alternate one prefill with `think` seconds
/// elsewhere (decoding its output, the front end's latency, the client). The prompts queue
/// first come first served for the step's token budget, and the prompts waiting when a
/// step is scheduled share it, as many as it holds (`steps`). Mean value analysis of the
/// machine-repairman network (a queue for the prefills, a delay for the rest), with
/// Reiser's residual-service term for a deterministic service (an arrival finds the step
/// in progress half done): an arrival that finds `w` prompts waiting is served with them
/// in `(w + 1) / b` steps of `b = min(w + 1, most)` prompts. With one prompt per step it is
/// the classic single-server form, the closed loop's counterpart of the open loop's M/D/1
/// wait. One client never waits: the result is one prompt's step.
pub fn closed_loop_prefill(clients: f64, steps: &PromptSteps, think: f64) -> f64 {
    let service = steps.time(1.0);
    if service.is_nan() || service <= 0.0 || !clients.is_finite() {
        return service.max(0.0);
    }
    let most = steps.most();
    // Whole clients (at most 4096), then linear between the two nearest (a fractional
    // share of a replica's clients when DP splits them).
    let clients = clients.clamp(1.0, 4096.0);
    let whole = clients.floor();
    let (mut queued, mut busy) = (0.0_f64, 0.0_f64);
    // The response at `whole` clients and at `whole + 1`.
    let mut responses = [service; 2];
    for n in 1..=whole as u64 + 1 {
        let waiting = (queued - busy).max(0.0);
        let batch = (waiting + 1.0).min(most);
        let step = steps.time(batch);
        let response = busy * step / 2.0 + (waiting + 1.0) / batch * step;
        let throughput = n as f64 / (response + think);
        queued = throughput * response;
        busy = (throughput * step / batch).min(1.0);
        responses = [responses[1], response];
    }
    let [at_whole, next] = responses;
    at_whole + (clients - whole) * (next - at_whole)
}

/// A prefill queue under Poisson arrivals ([`open_loop_prefill`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpenLoopPrefill {
    /// Mean time a prompt waits beyond one prompt's step, seconds.
    pub wait: f64,
    /// Share of the time a step with prompts runs (`ρ`, at most 0.99).
    pub busy: f64,
}

/// The prefill queue under Poisson arrivals at `rate` prompts per second: a prompt waits
/// for the step in progress (its residual, `ρ·S / 2`), for the steps of the prompts ahead
/// that its own step cannot take, and for its own step's extra length for the prompts it
/// shares. An arrival that finds `w` prompts waiting is served with them in
/// `(w + 1) / b` steps of `b = min(w + 1, most)` prompts, `S` the step of `b` prompts and
/// `ρ = rate × S / b`; `w` is `rate ×` the wait (Little's law), solved by bisection. With
/// one prompt per step this is the M/D/1 wait `ρ·S / (2(1 − ρ))`.
pub fn open_loop_prefill(rate: f64, steps: &PromptSteps) -> OpenLoopPrefill {
    let single = steps.time(1.0);
    let most = steps.most();
    if most <= 1.0 {
        let rho = (rate * single).min(0.99);
        return OpenLoopPrefill {
            wait: rho * single / (2.0 * (1.0 - rho)),
            busy: rho,
        };
    }
    // The wait before the arrival's own step, that step, and the busy share, with
    // `waiting` prompts ahead.
    let at = |waiting: f64| {
        let batch = (waiting + 1.0).min(most);
        let step = steps.time(batch);
        let rho = (rate * step / batch).min(0.99);
        (
            rho * step / 2.0 + ((waiting + 1.0) / batch - 1.0) * step,
            step,
            rho,
        )
    };
    let excess = |waiting: f64| rate * at(waiting).0 - waiting;
    let (mut low, mut high) = (0.0_f64, 1.0_f64);
    while excess(high) > 0.0 && high < 1e9 {
        high *= 2.0;
    }
    for _ in 0..100 {
        let mid = 0.5 * (low + high);
        if excess(mid) > 0.0 {
            low = mid;
        } else {
            high = mid;
        }
    }
    let (before, step, busy) = at(0.5 * (low + high));
    OpenLoopPrefill {
        wait: before + step - single,
        busy,
    }
}
