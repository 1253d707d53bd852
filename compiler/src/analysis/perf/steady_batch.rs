//! The decode batch an open loop settles at: the fixed point of Little's law,
//! `running = rate × output × TPOT(running)`, where each step also carries the prompt
//! tokens that arrive while it runs (`rate × prompt × TPOT`, which at the fixed point is
//! `prompt × running / output`). `perf::predict` once solved it by a damped iteration
//! that fed each step the previous step's prompt tokens; near saturation, where TPOT
//! grows almost as fast as the batch, it crawled, and a quarter of the planner's
//! predictions stopped at its 60-round limit short of the fixed point. Written in the
//! batch alone (the prompt tokens as the fixed point has them), the equation is one
//! increasing function crossing the diagonal once, solved here by regula falsi with the
//! Illinois step inside a bracket that always holds the root.

use super::step::StepModel;
use super::token_step::TokenStep;
use super::PerfConstants;

/// The open loop's settled decode batch and its step.
pub(super) struct SteadyBatch {
    pub running: f64,
    pub step: TokenStep,
}

/// What one replica's open loop looks like: requests per second, tokens each.
pub(super) struct OpenLoop {
    pub rate: f64,
    /// Output tokens per request, at least 1.
    pub output: f64,
    pub fresh_prompt: f64,
    pub ctx: f64,
    pub fresh_ctx: f64,
    /// The most sequences the replica runs at once (KV blocks, `max_num_seqs`).
    pub cap: f64,
}

/// Evaluations at most (it needs about ten).
const ROUNDS: usize = 60;
/// Sequences: the fixed point is found when the batch is this close to it.
const TOLERANCE: f64 = 1e-3;

/// Solves `running = min(cap, rate × output × TPOT(running))`.
pub(super) fn steady_batch(sm: &StepModel, lp: &OpenLoop, c: &PerfConstants) -> SteadyBatch {
    // The step at batch x and the batch it sustains: Little's law at that step's time.
    let at = |x: f64| {
        let prefill_per_step = lp.fresh_prompt * x / lp.output;
        let step = sm.token_step(x, lp.ctx, prefill_per_step, lp.fresh_ctx, c);
        let sustained = lp.rate * lp.output * step.tpot;
        (sustained - x, step)
    };
    // At the cap: where even a full batch is not enough, the batch is the cap.
    let (g_hi, step_hi) = at(lp.cap);
    if g_hi >= -TOLERANCE {
        return SteadyBatch {
            running: lp.cap,
            step: step_hi,
        };
    }
    // Below: an empty batch still sustains the time of its step, so g(0) > 0; the first
    // try is one sequence.
    let (mut lo, mut g_lo) = (0.0, f64::INFINITY);
    let (mut hi, mut g_hi) = (lp.cap, g_hi);
    let mut best = (lp.cap, g_hi.abs(), step_hi);
    let mut x = 1.0_f64.min(lp.cap);
    // Which end moved last, for the Illinois halving of the stale end's value.
    let mut side = 0_i8;
    for _ in 0..ROUNDS {
        let (g, step) = at(x);
        if g.abs() < best.1 {
            best = (x, g.abs(), step.clone());
        }
        if g.abs() < TOLERANCE || hi - lo < TOLERANCE {
            break;
        }
        if g > 0.0 {
            lo = x;
            g_lo = g;
            if side == 1 {
                g_hi *= 0.5;
            }
            side = 1;
        } else {
            hi = x;
            g_hi = g;
            if side == -1 && g_lo.is_finite() {
                g_lo *= 0.5;
            }
            side = -1;
        }
        x = if g_lo.is_finite() {
            (lo * g_hi - hi * g_lo) / (g_hi - g_lo)
        } else {
            // Only the upper end is known (the batch shrinks even at one sequence): the
            // batch that step sustains, which lies between 0 and it.
            x + g
        };
        if !(x > lo && x < hi) {
            x = 0.5 * (lo + hi);
        }
    }
    SteadyBatch {
        running: best.0,
        step: best.2,
    }
}
