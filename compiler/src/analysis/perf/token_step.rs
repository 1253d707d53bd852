//! A replica's steps over all its stages: the decode "token step" (every running sequence
//! advances one token, a share of prompt chunks beside it, the PP bubble, speculative
//! drafting), one prompt's prefill, and the steps that carry several waiting prompts
//! ([`PromptSteps`]).

use super::step::{stage_step, KernelTimes, StepLoad, StepModel, StepPrefill, StepShape};
use super::{prefix_of, PerfConstants};
use crate::analysis::comm::CommItem;
use serde::Serialize;

/// One decode "token step" of a replica: every running sequence advances by one token.
#[derive(Debug, Clone, Serialize)]
pub struct TokenStep {
    /// Time between two tokens of one sequence (seconds).
    pub tpot: f64,
    pub compute: f64,
    pub memory: f64,
    pub comm: f64,
    pub overhead: f64,
    /// Time the GPU waits on the CPU's launches in the steps that run without CUDA graphs
    /// (those carrying a prompt chunk past the captured sizes or under `FULL_DECODE_ONLY`;
    /// every step where no step has graphs), spread over all steps.
    pub cpu_launches: f64,
    /// Time stages sit idle because fewer micro-batches than stages are in flight.
    pub bubble: f64,
    /// Speculative drafting (0 without it).
    pub draft: f64,
    /// The kernel groups over all stages.
    pub kernels: KernelTimes,
    pub comm_items: Vec<CommItem>,
}

impl StepModel<'_> {
    /// Prompt tokens in a steady-state step whose DP ranks each carry `per_rank` on
    /// average. A MoE model's DP ranks are one vLLM engine and run in lockstep (every MoE
    /// layer gathers all ranks' tokens, an idle rank runs a dummy batch), so a step lasts as long
    /// as its slowest rank's: it carries a prompt chunk whenever any of the DP ranks has
    /// one. A rank has a chunk (the fresh prompt, at most the token budget) in a fraction
    /// `q` of its steps, so the slowest rank has one in `1 − (1 − q)^dp` of them. Dense
    /// models' DP replicas are independent engines: their average is their own.
    pub fn lockstep(&self, per_rank: f64) -> StepPrefill {
        let s = self.s;
        let dp = s.layout.dp.max(1) as f64;
        let group = per_rank * dp;
        if !s.model.is_moe() || dp <= 1.0 || per_rank <= 0.0 {
            return StepPrefill {
                rank: per_rank,
                group,
                exchanged: group,
            };
        }
        let chunk = self.chunk(per_rank);
        let q = (per_rank / chunk).min(1.0);
        let rank = chunk * (1.0 - (1.0 - q).powf(dp));
        StepPrefill {
            rank,
            group,
            exchanged: self.exchanged(rank, group, chunk),
        }
    }

    /// Prompt tokens the MoE all-gather moves over the DP group in steps whose slowest rank
    /// carries `rank` and all ranks `group`, a carrying step holding a `chunk`: `rank` × DP
    /// where such steps run as CUDA graphs (vLLM pads every rank to the largest), `group`
    /// where they run eager (each rank sends what it holds). See [`StepPrefill`].
    fn exchanged(&self, rank: f64, group: f64, chunk: f64) -> f64 {
        let dp = self.s.layout.dp.max(1) as f64;
        let padded = self.mixed_graphs && self.graph_max.is_some_and(|max| chunk <= max);
        if padded {
            rank * dp
        } else {
            group
        }
    }

    /// The prompt chunk a step carries when it carries one, with `per_rank` prompt tokens
    /// per step on average: the fresh prompt, at most the token budget.
    pub(super) fn chunk(&self, per_rank: f64) -> f64 {
        let s = self.s;
        let prompt = s.workload.map_or(1024.0, |w| {
            let (cached, _) = prefix_of(s, w.prompt);
            w.prompt - cached
        });
        prompt
            .min(s.engine.max_num_batched_tokens as f64)
            .max(per_rank)
            .max(1.0)
    }

    /// A replica with `running` sequences at mean context `ctx`, carrying
    /// `prefill_per_step` prompt tokens per token step.
    pub fn token_step(
        &self,
        running: f64,
        ctx: f64,
        prefill_per_step: f64,
        prefill_ctx: f64,
        c: &PerfConstants,
    ) -> TokenStep {
        let s = self.s;
        let pp = s.layout.pp.max(1) as f64;
        // Micro-batches: pp of running/pp each, or one per sequence when fewer than pp.
        let micro = (running / pp).max(running.min(1.0)).max(1e-9);
        let in_flight = running.min(pp).max(1.0);
        let facts = &self.facts;
        let mut out = TokenStep {
            tpot: 0.0,
            compute: 0.0,
            memory: 0.0,
            comm: 0.0,
            overhead: 0.0,
            cpu_launches: 0.0,
            bubble: 0.0,
            draft: 0.0,
            kernels: KernelTimes::default(),
            comm_items: Vec::new(),
        };
        let mut slowest: f64 = 0.0;
        let step_prefill = self.lockstep(prefill_per_step / pp);
        // The steps that carry a prompt chunk (a share `q` of them) run without CUDA
        // graphs: they take the CPU's launch time where that is longer than their GPU work.
        let chunk = self.chunk(step_prefill.rank);
        let chunk_share = if step_prefill.rank > 0.0 && self.graph_max.is_some() {
            (step_prefill.rank / chunk).min(1.0)
        } else {
            0.0
        };
        for f in facts {
            let load = StepLoad {
                decode: micro,
                ctx,
                prefill: step_prefill,
                prefill_ctx,
                shape: StepShape::Mean,
            };
            let mut st = stage_step(self, f, load, c);
            // A chunk step does all the mean step's GPU work and more: where that alone
            // outlasts the CPU's launches, so does the chunk step.
            let floor = c.eager_layer_time * f.blocks.layers as f64;
            if chunk_share > 0.0 && st.gpu_work() < floor {
                let group = step_prefill.group.max(chunk);
                let with_chunk = StepPrefill {
                    rank: chunk,
                    group,
                    exchanged: self.exchanged(chunk, group, chunk),
                };
                let whole = StepLoad {
                    prefill: with_chunk,
                    shape: StepShape::Whole,
                    ..load
                };
                let whole = stage_step(self, f, whole, c);
                st.cpu_launches += chunk_share * whole.cpu_launches;
                st.total += chunk_share * whole.cpu_launches;
            }
            out.tpot += st.total;
            out.compute += st.compute;
            out.memory += st.memory;
            out.comm += st.comm;
            out.overhead += st.overhead;
            out.cpu_launches += st.cpu_launches;
            out.kernels.add(&st.kernels);
            slowest = slowest.max(st.total);
            for item in st.comm_items {
                match out
                    .comm_items
                    .iter_mut()
                    .find(|x| x.group == item.group && x.collective == item.collective)
                {
                    Some(x) => {
                        x.count += item.count;
                        x.time += item.time;
                        x.nccl_time += item.nccl_time;
                    }
                    None => out.comm_items.push(item),
                }
            }
        }
        // Stages wait for the slowest one, and with fewer micro-batches than stages the
        // pipeline idles: a token still takes pp slots of the slowest stage.
        let pipeline = pp * slowest;
        if pipeline > out.tpot {
            out.bubble = pipeline - out.tpot;
            out.tpot = pipeline;
        }
        // With fewer micro-batches than stages, stages idle for the missing ones.
        out.bubble += (pp - in_flight) / pp * out.tpot;
        // Speculative decoding: the step also drafts, and every sequence advances by the
        // tokens accepted on average; everything is per output token.
        if let Some((_, _, accepted)) = &self.draft {
            out.draft = self.draft_time(running, ctx, c);
            out.tpot += out.draft;
            out.scale(1.0 / accepted.max(1.0));
        }
        // The deployment's own factor, fitted on its engines (`dic observe --calibrate`).
        let calibration = s.engine.calibration.step_time;
        if calibration != 1.0 {
            out.scale(calibration);
        }
        out
    }
}

impl TokenStep {
    /// Every part of the step times `f` (per output token, or a calibration factor).
    fn scale(&mut self, f: f64) {
        self.tpot *= f;
        self.compute *= f;
        self.memory *= f;
        self.comm *= f;
        self.overhead *= f;
        self.cpu_launches *= f;
        self.bubble *= f;
        self.draft *= f;
        self.kernels.scale(f);
        for item in &mut self.comm_items {
            item.time *= f;
            item.nccl_time *= f;
        }
    }
}

impl StepModel<'_> {
    /// Time to prefill `prompt` new tokens of one request, after `cached` tokens its
    /// prefix cache already holds, while `running` sequences decode.
    pub fn prefill_time(
        &self,
        prompt: f64,
        cached: f64,
        running: f64,
        ctx: f64,
        c: &PerfConstants,
    ) -> f64 {
        let room = self.prompt_room(running);
        let chunks = (prompt / room).ceil().max(1.0);
        let chunk = prompt / chunks;
        let mut total = 0.0;
        // Every chunk up to 16; past that, 16 strata each stood for by its middle chunk
        // (the step time is smooth in the prefix), so a long prompt costs no more to
        // predict than a short one.
        let samples = chunks.min(16.0);
        let weight = chunks / samples;
        for j in 0..samples as u64 {
            let k = ((j as f64 + 0.5) * weight - 0.5).floor().max(0.0);
            let prefix = cached + k * chunk + chunk / 2.0;
            total += self.chunk_step(chunk, prefix, running, ctx, c) * weight;
        }
        total * self.s.engine.calibration.prefill_time
    }

    /// One whole step (every stage) that carries `tokens` prompt tokens attending to
    /// `prefix` tokens on average beside `running` decodes on every DP rank. The other DP
    /// ranks' experts see their own prompt tokens beside these
    /// ([`Self::others_prompt_tokens`]).
    fn chunk_step(
        &self,
        tokens: f64,
        prefix: f64,
        running: f64,
        ctx: f64,
        c: &PerfConstants,
    ) -> f64 {
        let s = self.s;
        let group = self.others_prompt_tokens(tokens, running) + tokens;
        self.facts
            .iter()
            .map(|f| {
                let load = StepLoad {
                    decode: running / s.layout.pp.max(1) as f64,
                    ctx,
                    prefill: StepPrefill {
                        rank: tokens,
                        group,
                        exchanged: group,
                    },
                    prefill_ctx: prefix,
                    shape: StepShape::Whole,
                };
                stage_step(self, f, load, c).total
            })
            .sum()
    }

    /// Prompt tokens the other DP ranks of a MoE engine bring to a step in which one
    /// rank prefills `tokens`: each carries its steady share, the fresh prompt of each of
    /// its `running` requests once over the request's output, at most as many as this
    /// rank's chunk; 0 without DP. A step with a prompt chunk past the captured CUDA-graph
    /// sizes runs eager and `all_gatherv` moves only what the ranks hold
    /// ([`StepPrefill`]), so a lightly loaded engine's prefill routes little beside the
    /// prompt. (Taken as a whole chunk on every rank, a loaded engine's, MiniMax-M2.5's
    /// TP 4 × DP 4 rows at one request per rank were charged 4 prompts through the experts
    /// and, across two boards, over InfiniBand: TTFT +28% to +185% at 1–2 per rank.)
    fn others_prompt_tokens(&self, tokens: f64, running: f64) -> f64 {
        let s = self.s;
        let dp = s.layout.dp.max(1) as f64;
        if dp <= 1.0 {
            return 0.0;
        }
        let per_rank = s.workload.map_or(tokens, |w| {
            let (cached, _) = prefix_of(s, w.prompt);
            running / s.layout.pp.max(1) as f64 * (w.prompt - cached).max(0.0) / w.output.max(1.0)
        });
        (dp - 1.0) * per_rank.min(tokens)
    }

    /// Prompt tokens a step has room for beside `running` decodes: the token budget
    /// (`max_num_batched_tokens`) less one token per decode, at least 256 (or the budget).
    fn prompt_room(&self, running: f64) -> f64 {
        let mnbt = self.s.engine.max_num_batched_tokens as f64;
        (mnbt - running.min(mnbt - 1.0)).max(256.0_f64.min(mnbt))
    }

    /// The times of steps that carry 1, 2, … of the waiting prompts of `prompt` new tokens
    /// (after `cached`) beside `running` decodes, as many as [`Self::prompt_room`] holds;
    /// one prompt's is its whole prefill ([`Self::prefill_time`], every chunk), which the
    /// callers read back as `time(1.0)`. A prompt longer than half the room gets a step of
    /// its own: [`PromptSteps::single`].
    pub fn prompt_steps(
        &self,
        prompt: f64,
        cached: f64,
        running: f64,
        ctx: f64,
        c: &PerfConstants,
    ) -> PromptSteps {
        let one = self.prefill_time(prompt, cached, running, ctx, c);
        let most = if prompt > 0.0 {
            (self.prompt_room(running) / prompt)
                .floor()
                .min(PromptSteps::MOST)
        } else {
            1.0
        };
        if most < 2.0 {
            return PromptSteps::single(one);
        }
        // 1, 2, 3, 5, 8, … prompts and the most: the time is close to linear in the
        // count, so a few samples and straight lines between them stand for all.
        let mut counts = vec![1.0];
        let mut count = 2.0_f64;
        while count < most {
            counts.push(count);
            count = (count * 1.5).ceil();
        }
        counts.push(most);
        PromptSteps {
            points: counts
                .into_iter()
                .map(|k| {
                    // `k` whole prompts in one chunk, each attending to its own prefix.
                    let time = if k == 1.0 {
                        one
                    } else {
                        self.chunk_step(k * prompt, cached + prompt / 2.0, running, ctx, c)
                    };
                    (k, time)
                })
                .collect(),
        }
    }
}

/// How long a step lasts that carries 1, 2, … whole prompts: vLLM's scheduler puts the
/// waiting prompts into the next step first come first served, as many as the token
/// budget left beside the running decodes holds, so prompts that queue together share a
/// step and its fixed part (the decodes, the overhead, the CPU's launches).
#[derive(Debug, Clone, PartialEq)]
pub struct PromptSteps {
    /// (prompts in the step, seconds), by count, from one prompt.
    points: Vec<(f64, f64)>,
}

impl PromptSteps {
    /// The most prompts a step is taken to carry (a budget of 8192 tokens holds 64 of 128).
    pub const MOST: f64 = 1024.0;

    /// One prompt per step (a budget that holds no two), each step `service` long.
    pub fn single(service: f64) -> PromptSteps {
        PromptSteps {
            points: vec![(1.0, service)],
        }
    }

    /// Steps of `service` seconds for one prompt and `extra` more for each further prompt,
    /// up to `most` prompts (hand-computed cases).
    pub fn linear(service: f64, extra: f64, most: f64) -> PromptSteps {
        let most = most.max(1.0).floor();
        PromptSteps {
            points: vec![(1.0, service), (most, service + (most - 1.0) * extra)],
        }
    }

    /// The most prompts one step carries.
    pub fn most(&self) -> f64 {
        self.points.last().map_or(1.0, |p| p.0)
    }

    /// The time of a step carrying `count` prompts (1 to [`Self::most`]), straight between
    /// the samples.
    pub fn time(&self, count: f64) -> f64 {
        let count = count.clamp(1.0, self.most());
        let i = self
            .points
            .iter()
            .position(|p| p.0 >= count)
            .unwrap_or(self.points.len() - 1);
        if i == 0 {
            return self.points[0].1;
        }
        let ((k0, t0), (k1, t1)) = (self.points[i - 1], self.points[i]);
        t0 + (count - k0) / (k1 - k0).max(1e-12) * (t1 - t0)
    }
}
