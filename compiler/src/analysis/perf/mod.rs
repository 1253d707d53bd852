//! Performance: step times from a roofline, and from them TTFT, TPOT, throughput and the
//! operating point under a workload.
//!
//! One forward step of one PP stage processing `tokens` tokens runs three kernel groups
//! one after another: the dense GEMMs and LM head (streaming the dense weights, at the
//! weights' format's rate) and attention (streaming the KV cache, at the 16-bit rate;
//! an 8-bit cache read at its kernels' measured rate per byte, `FP8_KV_READ_FACTOR`),
//! each at its own roofline of `flops / (peak × compute_eff)` and `bytes / (HBM ×
//! memory_eff)` — for the GEMMs the p-norm the kernel tables fit (`gemm::roofline`,
//! p = 2: measured GEMMs near the ridge run slower than either ceiling; with it, TPOT
//! fell from 7.0 / 9.7 / 9.6% to 5.7 / 7.8 / 8.2% fitted / leaving one GPU out /
//! leaving one model out, TTFT 14.2 / 18.8 / 20.4% → 14.2 / 19.0 / 20.0%; TensorRT-LLM's
//! unfitted offline throughput 16.7% → 15.1%), for attention the slower of the two (a
//! p-norm there gained nothing) — and the routed experts as vLLM's fused-MoE kernel, one
//! call per MoE layer timed by the curve fitted on its measured latencies (`fused_moe`: Hopper's
//! block-FP8 fused MoE reaches a quarter of the FP8 peak on a prompt chunk, far below the
//! dense GEMMs); then communication (TP all-reduces as vLLM runs them,
//! `comm::vllm_all_reduce_time`, both regimes fitted on the kernel tables, large messages
//! on an NVSwitch reduced in the switch, `comm::nvls_all_reduce`) and a fixed
//! overhead. A step vLLM runs without CUDA graphs (more tokens than its largest captured
//! batch: a prompt chunk; any step with a prompt chunk under `FULL_DECODE_ONLY`
//! (`scenario::CudaGraphMode`); every step under `--enforce-eager` or `cudagraph_mode =
//! none`) lasts at least the CPU's time to launch it, `eager_layer_time` per layer; the
//! token step charges that to the
//! share of its steps that carry a prompt chunk. The dense rates are taken at the share
//! of the datasheet peak the GPU's kernel family reaches in the kernel tables relative
//! to Hopper's, on which the efficiency is mostly fitted (`gemm::compute_factor`: B200
//! 0.87). (One `max` over the whole step, as before, let a memory-bound attention hide
//! compute-bound GEMMs:
//! cross-validated TPOT error fell from 10.8% to 8.9% leaving one GPU out and from 15.5%
//! to 13.4% leaving one model out with the op-level sum.) A decode token traverses every
//! stage (TPOT = Σ stages); a replica with PP keeps `pp` micro-batches in flight, so
//! fewer running requests than stages leave a bubble.
//!
//! Prefill is chunked (vLLM's chunked prefill, `max_num_batched_tokens` per step) and
//! shares steps with decodes. The operating point under an arrival rate solves Little's
//! law, `running = rate × (TTFT + output × TPOT)`, by fixed-point iteration; queueing
//! before prefill uses an M/D/1 wait ([`open_loop_prefill`]). In a closed loop the
//! prompts of the clients in flight queue for the prefill budget as a machine-repairman
//! network ([`closed_loop_prefill`], mean value analysis with a deterministic service).
//! In both, prompts that wait together share a step, as many as the budget beside the
//! running decodes holds, and with it the step's fixed part ([`PromptSteps`]); requests
//! past the running cap (KV blocks, `max_num_seqs`) wait for a slot, and a finite
//! benchmark run's first wave arrives at once, passes the front end one request at a time
//! and queues its prefills ([`front_paced_burst`]). TTFT adds the front
//! end's latency (a fixed part per request and a part per prompt token the prefix cache
//! does not hold) and half
//! a step (a request arrives mid-step). A MoE model's DP
//! ranks step in lockstep (`StepModel::lockstep`): a step waits for the slowest rank's
//! prompt chunk, and every rank's experts see all ranks' tokens. The constants are
//! fitted on vLLM measured end to end (`dic_calibration::silicon`), never per row.
//!
//! Here: the constants, TTFT's parts and the operating point ([`predict`]). One stage's
//! step is in `step` ([`StepModel`]), a replica's token step, prefill and steps of several
//! prompts in `token_step`, the queueing for the prefill budget in `prefill_queue`; their
//! items are re-exported here, so `perf::…` names them all.

mod prefill_queue;
mod steady_batch;
mod step;
mod token_step;

use prefill_queue::burst_prefill;
pub use prefill_queue::{
    closed_loop_prefill, front_paced_burst, open_loop_prefill, OpenLoopPrefill,
};
use steady_batch::{steady_batch, OpenLoop};
pub use step::{
    decode_attention_call_time, fp8_kv_read_factor, hidden_state_scale, KernelTimes, StepCost,
    StepModel, StepPrefill, DBO_DECODE_TOKENS, DECODE_ATTENTION_CALL, FP8_KV_READ_FACTOR,
    SEQUENCE_COST_BANDWIDTH, SEQUENCE_COST_HIDDEN,
};
pub use token_step::{PromptSteps, TokenStep};

use super::memory::MemoryReport;
use super::scenario::{Load, Scenario};
use serde::Serialize;

/// Efficiency constants of the roofline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerfConstants {
    /// Achieved fraction of HBM bandwidth in memory-bound steps.
    pub memory_efficiency: f64,
    /// Achieved fraction of dense tensor-core throughput in compute-bound steps.
    pub compute_efficiency: f64,
    /// Fixed time per step (scheduling, kernel launches, sampling, input preparation),
    /// seconds. Which release's behaviour: vLLM from 0.14 schedules asynchronously by
    /// default (its release notes: "Async scheduling is now enabled by default"; in 0.33
    /// `VllmConfig.__post_init__`, vllm/config/vllm.py, turns it on unless an option is
    /// incompatible), so the CPU's scheduling of a step overlaps the GPU's previous one;
    /// 0.12 scheduled between steps. The constant is fitted on rows of both: InferenceX's
    /// Llama-3.1-70B (its recipes pass `--async-scheduling`) and MiniMax-M2.5 on 0.16–0.19
    /// asynchronous, AIConfigurator's 0.12 rows (Qwen3-32B, Qwen3-235B-A22B,
    /// Llama-3.1-8B) synchronous, and dic takes it for 0.33's. A synchronous overhead of
    /// its own was fitted and left out (issue 37): on every row it came out at 4.76 ms
    /// against 4.27 ms asynchronous — async scheduling hides at most half a millisecond
    /// of it, so most of the step's fixed time is GPU-side work around the layers
    /// (sampling, the logits, input preparation), not CPU time — and one release (0.12)
    /// alone identifies it: leaving Qwen3-32B out, the other 0.12 families set it at 25 ms
    /// (Qwen3-235B, whose 0.12 experts run slower than the kernel tables, wants more time
    /// per step) and Qwen3-32B's TPOT median |error| went from 5.2% to 104%. (Charged as
    /// `max(GPU work, overhead)` where a recipe schedules asynchronously, TPOT median
    /// |error| had risen from 5.6% to 16.1%; charging the step async scheduling adds
    /// before a new prompt's first chunk, vllm#19970, TTFT from 11.3 / 15.1 / 15.2% to
    /// 12.6 / 16.4 / 18.5% fitted / leaving one GPU / one model out.) What the CUDA-graph
    /// mode changes is the CPU's launches of a step run without graphs (more tokens than
    /// the largest captured batch, a prompt chunk under `FULL_DECODE_ONLY`,
    /// `--enforce-eager`): `eager_layer_time`.
    pub step_overhead: f64,
    /// Time per sequence per layer in a step, seconds, for a model of hidden size 8192 on a
    /// GPU of 3.35 TB/s (an H100 SXM); a step charges it scaled by the model's hidden size
    /// and inversely by the GPU's HBM bandwidth (`step::hidden_state_scale`). It is the
    /// per-sequence work of every layer that the GEMM, attention and fused-MoE terms do not
    /// time: the kernels on each token's hidden state that every TP rank runs whole (norms,
    /// residual adds, rotary embedding, the activations' dynamic quantization, the
    /// all-reduce's epilogue), memory-bound and short, with per-sequence metadata and
    /// sampling folded in. Not the decode attention's own per-sequence cost: the
    /// decode-attention tables put that at 0.02–0.03 µs per sequence (and KV head) per
    /// layer on Hopper and 0.006–0.01 µs on B200 beside an 11 µs (9 µs) call, a tenth of
    /// what the rows want. Scaled so (issue 37), four families on three GPUs identify one
    /// constant: unscaled, the other families set it at 0.63 µs where MiniMax-M2.5's rows
    /// (hidden 3072, mostly B200) alone want 0.18 µs, and MiniMax-M2.5's TPOT left out was
    /// +7.5% biased (12.9% median |error|); scaled, 9.7% (+4.4%), the other families'
    /// left-out TPOT no worse (Llama-3.1-70B 7.1% → 6.5%, Qwen3-32B 5.3% → 3.5%). The forms
    /// compared, leaving one model out (TPOT median |error| overall / MiniMax-M2.5): unscaled
    /// 10.1 / 12.9%; ÷ bandwidth 9.3 / 10.5%; × hidden 8.1 / 10.4% (leaving one GPU out
    /// 10.1%); × hidden ÷ bandwidth 8.2 / 9.7% (8.4%); × hidden ÷ the GPU's BF16 peak 7.8 /
    /// 9.4% (8.1%). Bandwidth and peak differ by under 10% between these GPUs and the rows
    /// cannot tell them apart; bandwidth is taken because the kernels it stands for are
    /// memory-bound. Per layer, not per step: fitted per step, the 70B-class rows set it and a 32-layer 8B
    /// was charged 80 layers' worth (TensorRT-LLM's 8B on H100 at 128/128 tokens came out
    /// at 11.8k tokens/s against 28.8k measured; per layer, 18.0k; the reference table's
    /// median offline-throughput error fell from 20.4% to 15.1% at that change, with the
    /// vLLM fit no worse; `moe_layer_factor` later took it to 17.2%, through its Mixtral
    /// rows).
    pub sequence_layer_overhead: f64,
    /// Fixed latency of every request before its first token, outside the GPU steps:
    /// HTTP, admission, detokenising and streaming the first token. With
    /// `prompt_token_latency` it is also how far apart the requests of a burst that arrive
    /// at once reach the scheduler: the front end is taken to pass them one at a time
    /// (vLLM's API server is one Python process per DP rank, `--api-server-count`
    /// defaulting to the DP size, and tokenises in one thread), so it paces a benchmark's
    /// first wave where the GPU would prefill the wave sooner ([`front_paced_burst`]).
    /// Charged so, the fit's objective fell from 0.1568 to 0.1505
    /// and TTFT median |error| from 11.5 / 15.1 / 15.2% to 9.9 / 14.4 / 13.3% fitted /
    /// leaving one GPU / one model out (TPOT 5.5 / 7.4 / 7.4% → 5.6 / 7.4 / 7.7%), the fixed
    /// latency from 20.4 to 15.1 ms and the one per prompt token from 17.2 to 20.0 µs:
    /// measured TTFT grows with the requests in flight about as much on B200 as on Hopper
    /// at TP 8 (1024-token prompts, 4 → 64 in flight: +119 ms on B200 FP8, +115 and +122
    /// ms on H100 and H200), where a first wave that the GPU alone paced grows half as much
    /// on B200, whose prefill is twice as fast. B200's rows at 64 in flight went from 9 to 15
    /// of 24 within 15%, Qwen3-32B's at 64–128 from 22 to 28 of 36. Only a burst is paced:
    /// the same front end as a single server in steady state (its queue in the closed
    /// loop, by the same mean value analysis as the prefill's) would be 78–92% busy on
    /// Qwen3-32B's 1024 × 128 rows at 64–128 in flight, whose TTFT shows no such wait
    /// (TP 8, 128 in flight: +7% → +20%, 64: +10% → +22%; objective 0.1518), and one that
    /// passed 58 requests/s of 2000-token prompts, as the 8B sweep measures, cannot have
    /// a 55 ms serial part; pacing the burst with half the front end (objective 0.1566),
    /// or with only its fixed part (0.1519) or only its part per token (0.1563), fitted
    /// worse. What serialises a burst and not a steady flow is not identified (connection
    /// setup, the benchmark client's own loop, tokenisation batched under load are
    /// candidates); the rows show its size.
    pub request_latency: f64,
    /// Latency per prompt token before the first token, outside the GPU steps, seconds:
    /// the API server's tokenisation of the prompt text and the engine's work on the
    /// prompt's ids (block hashes for the prefix cache, request setup) on the CPU. It does
    /// not shrink with TP: measured at 4 in flight, Llama-3.1-70B's TTFT on B200 fits
    /// 205 ms + 540 ms / TP for 8192-token prompts (FP8; NVFP4 203 ms + 294 ms / TP),
    /// where dic's TP-independent terms (request latency, all-reduces) came to about 90 ms.
    /// Fitted at 20.0 µs (17.2 µs before a burst was paced by the front end,
    /// `request_latency`; 15.4 µs while Hopper's large all-reduces were charged a ring's
    /// bytes, see `comm::nvls_all_reduce`), within the 10–21 µs per token that Hugging Face
    /// tokenizers are measured at in a serving front end
    /// (tenstorrent/tt-inference-server#2173); it may also hold per-token GPU work dic
    /// does not time (norms and residual adds, which every TP rank runs on the whole
    /// hidden state). Charged on the prompt tokens the engine computes, not on those the
    /// prefix cache holds: vLLM tokenises the whole prompt (the API server does not know
    /// what is cached), but the fitted rate is an order of magnitude above what tokenising
    /// costs (issue 37), so most of it is per-token work on computed tokens (prefill
    /// slower than the step model times it, the engine's input preparation), which a
    /// cached token skips; the rows, none with a prefix cache, cannot split off the
    /// tokeniser's small share, left uncharged on cached tokens. Charged on the whole
    /// prompt, a 95%-cached 12k-token prompt paid 137 ms of front end for 600 new tokens
    /// (test `a_mostly_cached_prompts_ttft_is_its_fresh_tokens`). Every GPU's rows
    /// identify it: without B200's, the fit puts it at 10 µs. With it, TTFT median |error| fell from 12.2 / 18.5 /
    /// 16.7% to 11.3 / 16.3 / 14.5% fitted / leaving one GPU out / leaving one model out
    /// (TPOT 5.8 / 7.2 / 7.6% → 5.7 / 7.5 / 7.4%), the fixed request latency from 30.8 to
    /// 18.3 ms, and TensorRT-LLM's unfitted online TTFT from 124% to 95%.
    pub prompt_token_latency: f64,
    /// The CPU's time per layer to run a step without CUDA graphs, seconds. A step of
    /// more tokens than vLLM's largest captured batch (`scenario::max_cuda_graph_size`: 512
    /// tokens, 1024 on data-centre Blackwell; every prompt chunk of the rows) or any step
    /// without graphs at all (`--enforce-eager`, `cudagraph_mode = none`) launches each
    /// layer's kernels from the CPU as it runs, and the
    /// GPU gets no further ahead than the launches, so the step lasts
    /// `max(GPU work, layers × this)`. Fitted at 0.51–0.57 ms: 41–46 ms for a 70B's 80 layers,
    /// longer than a 1024-token prompt's GPU work at TP 4 and 8, which is why measured
    /// TTFT stops falling with TP there. The 70B's 1024-token rows at TP 4 and 8 went from
    /// 16–31% to 7–26% median |error| (H200 TP 4: 15% → 7%; B200 TP 8: 31% → 24%), and the
    /// fixed request latency, which had stood in for this floor at every TP, from 44.6 to
    /// about 32 ms. TTFT median |error|: 15.8 / 20.5 / 20.4% → 14.2 / 18.8 / 20.4% fitted /
    /// leaving one GPU out / leaving one model out; TPOT 6.9 / 9.7 / 9.3% → 7.0 / 9.7 /
    /// 9.6%; TensorRT-LLM's tables (not fitted): offline throughput 17.2% → 16.7%, online
    /// TTFT 151% → 114%. Per layer rather than per step: a floor per step reached an
    /// objective of 0.1737–0.1758 against 0.1713. The floor is set by B200's rows
    /// (leaving them out, the fit keeps its starting 0.25 ms) and InferenceX's Hopper rows
    /// want none: their 1024-token prompts at TP 8 and 4 in flight measure 70–76 ms,
    /// about dic's front end and GPU work alone. Their recipes schedule asynchronously,
    /// which lets the CPU launch a step while the GPU runs the one before; dropping the
    /// floor for those rows only (B200's `FULL_DECODE_ONLY` steps and AIConfigurator's
    /// synchronous 0.12 rows keep it) gave TTFT 10.5 / 13.0 / 15.5% against 11.3 / 15.1 /
    /// 15.2%. Not landed: vLLM's batch queue holds two batches, so the CPU leads by one
    /// step (8–20 ms of a 41 ms floor), not the whole floor, and leaving one model out got
    /// worse.
    pub eager_layer_time: f64,
}

/// Fitted on vLLM measured end to end (../shared/calibration/vllm-silicon: H100, H200 and
/// B200; Llama-3.1 8B/70B, Qwen3-32B, Qwen3-235B-A22B; BF16, FP8, NVFP4) by
/// `dic_calibration::silicon::fit_silicon`, from round starting values, minimising the mean
/// |log error| of TTFT and TPOT. The test `calibration_constants_are_the_fit` re-runs the
/// fit; `calibration_table_is_current` regenerates `calibration/errors.md`, with the
/// leave-one-GPU-out and leave-one-model-out errors. The routed experts are timed by the
/// fused-MoE kernel curves (`fused_moe`, fitted on the kernel tables), not by these
/// efficiencies. The tables time vLLM's whole `FusedMoE` layer fed the router's logits
/// (AIConfigurator's vLLM collector, `power_law_logits_v3`): top-k, aligning and sorting
/// the pairs, the grouped GEMMs, un-permuting and weighting are in the measured call, and
/// no fitted multiple is added to it (below).
///
/// Refitted as it stands when the training split grew to 729 rows (MiniMax-M2.5 FP8 and
/// NVFP4, TP/EP/DP-attention, vLLM 0.15–0.19, beside Qwen3-235B on 0.12): objective
/// 0.2446 with the constants fitted on the 390-row split (0.832, 0.575, 4.46 ms, 0.453,
/// 0.557 µs, 15.1 ms, 20 µs, 0.489 ms) against 0.2095 refitted. With a second MoE family
/// and later releases the MoE layer factor falls from 0.453 to 0.008: the multiple that
/// Qwen3-235B on 0.12 alone had identified is not an MoE effect (issue 37's diagnosis,
/// item 2). The per-constant notes above describe the 390-row fit; the model's structure
/// (a version-aware step overhead, the MoE terms per release) is issue 37's work, and
/// `calibration/errors.md` shows where each family stands.
///
/// Refitted when the data-parallel-attention rows' `batch_size` was read per DP rank (the
/// run's concurrency is `batch_size × attention_dp_size`, as the split's README says; the
/// harness had read it as the whole run's): the stored constants' objective fell from
/// 0.2095 to 0.1977 with that reading alone, 0.1973 refitted (memory efficiency 0.763 →
/// 0.731, step overhead 4.00 → 3.75 ms, CPU time per eager layer 608 → 545 µs).
///
/// Refitted when the MoE terms were re-identified (issue 37, item 2), leaving one model
/// family out as the measure. (1) The multiple of the fused-MoE kernel for the layer's
/// routing and sorting (`moe_layer_factor`, 0.00917 × the kernel) is left out: only one
/// family on one release identified it (Qwen3-235B on 0.12 set it at 0.453; with
/// MiniMax-M2.5 it fell to 0.009), the kernel tables already time the routing, and
/// leaving MiniMax-M2.5 out it came back at 0.45 and over-predicted MiniMax's TPOT by +41%
/// (median |error| 40.8% → 19.8% without it). (2) The fused-MoE curves are fitted with the
/// kernel tables' own routing (`dic_calibration::fused_moe::table_routing`), their
/// median residual falling from 9.9–13.7% to 7.0–9.7% per GPU and format. (3) A mean step
/// times its experts as the mean of a decode-only call and a call with a whole prompt
/// chunk (`step::mean_step_experts`), not one call at the mean tokens. Objective 0.1973
/// → 0.1913; fitted TPOT median |error| 10.9% → 8.8%; leaving one model out TTFT
/// 19.5% → 19.6%, TPOT 22.1% → 10.4%.
///
/// Refitted when a sequence's cost per layer was scaled with the model's hidden size and
/// the GPU's bandwidth ([`PerfConstants::sequence_layer_overhead`]; issue 37): objective
/// 0.1926 → 0.1899; memory efficiency 0.763 → 0.832, the cost per sequence per layer
/// 0.261 µs (every model, every GPU) → 0.979 µs at hidden 8192 on 3.35 TB/s, request
/// latency 22.8 → 23.8 ms, per prompt token 11.4 → 11.1 µs, CPU time per eager layer
/// 545 → 479 µs. Leaving one model out, TPOT median |error| 10.1% → 8.2% (MiniMax-M2.5
/// 12.9% → 9.7%, Llama-3.1-70B 7.1% → 6.5%, Qwen3-32B 5.3% → 3.5%), TTFT 20.2% → 18.3%;
/// leaving one GPU out TPOT 10.4% → 8.4%.
///
/// Refitted when a step that decodes paid the decode-attention kernel's fixed time per
/// attention layer from the kernel tables (`step::DECODE_ATTENTION_CALL`: 11.5 / 13.1 µs
/// on Hopper, 9.3 / 9.9 µs on Blackwell, 16-bit / 8-bit cache), which the fixed step
/// overhead had partly stood in for: objective 0.1899 → 0.1885; step overhead 4.27 →
/// 3.59 ms, memory efficiency 0.832 → 0.851, a sequence's cost per layer 0.979 → 0.917
/// µs, CPU time per eager layer 479 → 500 µs. Leaving one model out, TPOT median |error|
/// 8.3% → 7.5% (MiniMax-M2.5 9.7% → 8.9%, bias +4.4% → +1.8%; Llama-3.1-70B 6.5% → 5.4%;
/// Qwen3-32B 3.5% → 3.7%), TTFT 18.3% → 19.1%; leaving one GPU out TPOT 8.4% → 7.9%,
/// TTFT 16.2% → 16.0%.
///
/// Not refitted when the DP rows were read as measured (`dic_calibration::silicon::
/// SiliconRow::concurrency` and `one_engine`: `batch_size` per rank where the ranks are
/// implied too, MiniMax-M2.5's stated DP rows as the one TP engine they ran as): the stored
/// constants' objective fell from 0.1885 to 0.1774, and the refit's 0.1768 (memory
/// efficiency 0.859, step overhead 3.51 ms, request latency 22.8 ms) is within the test's
/// 0.001 of it. Leaving one model out, TTFT 19.1% → 18.6%, TPOT 7.5% → 7.0%; leaving one
/// GPU out 16.0% → 14.9% and 7.9% → 7.0%.
///
/// Refitted when MiniMax-M2.5's rows were predicted with the flags its InferenceX launch
/// scripts passed (`dic_calibration::silicon::ServingFlags`: on B200 with 0.19 CUDA
/// graphs up to 2048 tokens, an FP8 cache, a budget of twice the prompt; EP where a
/// script always passed it; requests 0.9 of the stated lengths), not vLLM's defaults for
/// the release: the stored constants' objective fell from 0.1774 to 0.1619, 0.1586
/// refitted (memory efficiency 0.851 → 0.832, compute 0.538 → 0.550, a sequence's cost
/// per layer 0.917 → 0.897 µs, request latency 23.8 → 17.6 ms, per prompt token 11.1 →
/// 15.1 µs, CPU time per eager layer 500 → 648 µs). Leaving one model out, TTFT 18.6% →
/// 15.8% and TPOT 7.0% → 6.6% (MiniMax-M2.5 26.4% → 18.1%, +22.7% → +4.6%); leaving one
/// GPU out 14.9% → 15.8% and 7.0% → 7.8%.
pub const FITTED: PerfConstants = PerfConstants {
    memory_efficiency: 0.832,
    compute_efficiency: 0.550,
    step_overhead: 0.00359,
    sequence_layer_overhead: 0.897e-6,
    request_latency: 0.0176,
    prompt_token_latency: 15.1e-6,
    eager_layer_time: 0.648e-3,
};

impl PerfConstants {
    /// A request's latency before its first token outside the GPU steps, for a prompt
    /// of `prompt` tokens of which the prefix cache holds `cached`: the fixed part, and
    /// the part per prompt token on the tokens the engine computes alone
    /// ([`PerfConstants::prompt_token_latency`] says why).
    pub fn front_end_latency(&self, prompt: f64, cached: f64) -> f64 {
        self.request_latency + self.prompt_token_latency * (prompt - cached.max(0.0)).max(0.0)
    }
}

/// Percentile ÷ mean factors for latencies. [heuristic, not fitted: the public
/// measurements report means only.] TTFT's tail is queueing; TPOT's is prefill
/// interference.
pub fn percentile_factor(metric_is_ttft: bool, percentile: &str) -> f64 {
    match (metric_is_ttft, percentile) {
        (_, "mean") | (_, "p50") => 1.0,
        (true, "p90") => 1.3,
        (true, "p95") => 1.5,
        (true, "p99") => 2.0,
        (false, "p90") => 1.05,
        (false, "p95") => 1.1,
        (false, "p99") => 1.2,
        _ => 1.0,
    }
}

/// TTFT by cause, seconds; the parts add up to [`Prediction::ttft`] (infinite
/// `admission` when an open loop is overloaded without a finite run to bound its backlog).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TtftParts {
    /// The front end: the fixed request latency and the latency per prompt token
    /// ([`PerfConstants::front_end_latency`]).
    pub front_end: f64,
    /// A step the request waits on outside its prefill: half the step in flight when it
    /// arrives (aggregated serving), the decode step that emits its first token
    /// (disaggregated).
    pub step_wait: f64,
    /// The prompt's own prefill steps.
    pub prefill: f64,
    /// Queueing behind other prompts for the prefill budget (M/D/1 in an open loop, mean
    /// value analysis in a closed one, the prefill pool's queue when disaggregated).
    pub prefill_queue: f64,
    /// Waiting for a slot past the running cap (KV blocks, `max_num_seqs`), or an
    /// overloaded run's backlog.
    pub admission: f64,
    /// A finite run's first wave, which arrives at once and passes the front end one
    /// request at a time: its share of the mean TTFT beyond the steady state (negative
    /// where the first wave is faster).
    pub first_wave: f64,
    /// Moving the prompt's KV cache from the prefill pool to the decode pool
    /// (disaggregated serving).
    pub kv_transfer: f64,
    /// Loading cached prefixes back from the CPU offload tier over PCIe (`kv_offload`),
    /// averaged over requests ([`closed_loop_offload_load`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub kv_offload_load: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl TtftParts {
    /// The parts' sum: the TTFT they explain.
    pub fn total(&self) -> f64 {
        self.front_end
            + self.step_wait
            + self.prefill
            + self.prefill_queue
            + self.admission
            + self.first_wave
            + self.kv_transfer
            + self.kv_offload_load
    }
}

/// Predictions at an operating point.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// Running sequences per replica.
    pub running: f64,
    pub ttft: f64,
    /// [`Prediction::ttft`] by cause.
    pub ttft_parts: TtftParts,
    pub tpot: f64,
    pub output_tokens_per_s: f64,
    pub output_tokens_per_s_per_gpu: f64,
    pub requests_per_s: f64,
    /// The offered load exceeds what the deployment can serve.
    pub overloaded: bool,
    pub step: TokenStep,
    /// Most requests one replica can run at once (max_num_seqs and KV capacity at the
    /// workload's mean context).
    pub running_cap: f64,
    /// Throughput with every replica saturated (output tokens/s).
    pub max_output_tokens_per_s: f64,
}

/// A deployment's output throughput at its operating point, as [`Prediction::at`] reads
/// it: tokens/s served and saturated (every replica), over `gpus` GPUs, at `output`
/// tokens per request.
pub(crate) struct Throughput {
    pub served: f64,
    pub saturated: f64,
    pub gpus: f64,
    pub output: f64,
}

impl Prediction {
    /// The prediction at an operating point: `running` requests per replica (of at most
    /// `running_cap`) stepping at `step`, TTFT by its `parts`, and the throughput; the
    /// headline figures are derived here, once, for the aggregated and the disaggregated
    /// models.
    pub(crate) fn at(
        running: f64,
        running_cap: f64,
        parts: TtftParts,
        step: TokenStep,
        overloaded: bool,
        t: Throughput,
    ) -> Prediction {
        Prediction {
            running,
            ttft: parts.total(),
            ttft_parts: parts,
            tpot: step.tpot,
            output_tokens_per_s: t.served,
            output_tokens_per_s_per_gpu: t.served / t.gpus,
            requests_per_s: t.served / t.output,
            overloaded,
            step,
            running_cap,
            max_output_tokens_per_s: t.saturated,
        }
    }
}

/// The workload's prompt tokens held by the prefix cache, and the part every request
/// shares (both 0 without a workload or without prefix reuse), at most `prompt` − 1.
pub(crate) fn prefix_of(s: &Scenario, prompt: f64) -> (f64, f64) {
    let most = (prompt - 1.0).max(0.0);
    s.workload
        .map(|w| (w.cached_prompt.min(most), w.shared_prefix.min(most)))
        .unwrap_or((0.0, 0.0))
}

/// Most running sequences per replica: max_num_seqs, and the KV cache at a running
/// request's mean context (a prefix every request shares is held once). vLLM V1's
/// scheduler admits a request while the blocks it needs now are free, not those of its
/// whole output: running requests hold the prompt and half the output on average, and
/// the overshoot is preempted and recomputed. (Counting the whole output, the cap was a
/// third lower on long outputs, and rows of vllm-silicon at the cap were predicted to
/// queue for tens of seconds where vLLM served them in under 0.5 s: with the mean
/// context, the end-to-end objective fell from 0.328 to 0.295.)
pub fn running_cap(s: &Scenario, mem: &MemoryReport, prompt: f64, output: f64) -> f64 {
    let (_, shared) = prefix_of(s, prompt);
    let per_request = prompt + output / 2.0 - shared;
    // A hybrid model's windows and states do not grow with the context: count requests
    // by the pool's groups.
    let by_kv = if mem.stages.iter().any(|st| st.pool.hybrid) {
        mem.requests_at(per_request)
    } else {
        (mem.kv_cache_tokens as f64 - shared).max(0.0) / per_request.max(1.0)
    };
    (s.engine.max_num_seqs as f64).min(by_kv).max(0.0)
}

/// Saturated throughput of the deployment (output tokens/s) for requests of
/// `prompt` + `output` tokens: the offline max-throughput scenario.
pub fn max_throughput(
    s: &Scenario,
    mem: &MemoryReport,
    prompt: f64,
    output: f64,
    c: &PerfConstants,
) -> (f64, TokenStep) {
    let (running, step) = saturated(&StepModel::new(s), mem, prompt, output, c);
    let per_replica = running / step.tpot;
    (per_replica * s.layout.dp.max(1) as f64, step)
}

/// A saturated replica: as many running sequences as the KV cache, max_num_seqs and the
/// step's token budget allow, each finished request replaced by a new prompt
/// (prompt/output prefill tokens per decode token).
pub fn saturated(
    sm: &StepModel,
    mem: &MemoryReport,
    prompt: f64,
    output: f64,
    c: &PerfConstants,
) -> (f64, TokenStep) {
    let s = sm.s;
    let cap = running_cap(s, mem, prompt, output).max(1.0);
    let (cached, _) = prefix_of(s, prompt);
    let fresh = prompt - cached;
    let ratio = fresh / output.max(1.0);
    let mnbt = s.engine.max_num_batched_tokens as f64;
    let running = cap.min(mnbt / (1.0 + ratio)).max(1.0);
    let ctx = prompt + output / 2.0;
    let step = sm.token_step(running, ctx, running * ratio, cached + fresh / 2.0, c);
    (running, step)
}

/// The operating point for the scenario's workload (or one request at a time without one).
/// A workload with a finite number of `requests` is a benchmark run: an overloaded open
/// loop reports the mean queueing delay of its backlog instead of an unbounded one, and a
/// closed loop's first wave arrives at once ([`front_paced_burst`]).
pub fn predict(s: &Scenario, mem: &MemoryReport, c: &PerfConstants) -> Prediction {
    let dp = s.layout.dp.max(1) as f64;
    let gpus = s.layout.gpus().max(1) as f64;
    let (prompt, output, load, finite_requests) = match s.workload {
        Some(w) => (w.prompt, w.output.max(1.0), w.load, w.requests),
        None => (1024.0, 256.0, Load::Concurrency(1), None),
    };
    let sm = StepModel::new(s);
    let cap = running_cap(s, mem, prompt, output).max(1.0);
    let ctx = prompt + output / 2.0;
    // Prompt tokens the prefix cache holds are not prefilled; the new ones attend to them.
    let (cached, _) = prefix_of(s, prompt);
    let fresh = prompt - cached;
    let fresh_ctx = cached + fresh / 2.0;
    let (max_tps, _) = max_throughput(s, mem, prompt, output, c);
    let max_rps = max_tps / output;
    let mut running: f64 = 1.0;
    let mut step = sm.token_step(running, ctx, 0.0, fresh_ctx, c);
    let mut parts = TtftParts::default();
    let mut overloaded = false;
    let rate_per_replica;
    match load {
        Load::Rate(rate) => {
            let r = rate / dp;
            rate_per_replica = r;
            // The decode batch in steady state (Little's law, `steady_batch`); the
            // prompt's own prefill is timed once, at the batch it converged to.
            let open_loop = OpenLoop {
                rate: r,
                output,
                fresh_prompt: fresh,
                ctx,
                fresh_ctx,
                cap,
            };
            let settled = steady_batch(&sm, &open_loop, c);
            running = settled.running;
            step = settled.step;
            let at = running;
            parts.prefill = sm.prefill_time(fresh, cached, at, ctx, c);
            let capacity_rps = max_rps / dp;
            if r >= capacity_rps * 0.999 {
                overloaded = true;
                let (sat_running, sat_step) = saturated(&sm, mem, prompt, output, c);
                running = sat_running;
                step = sat_step;
                parts.admission = match finite_requests {
                    Some(n) => (n / dp / 2.0) * (1.0 / capacity_rps - 1.0 / r.max(1e-9)).max(0.0),
                    None => f64::INFINITY,
                };
                parts.prefill = sm.prefill_time(fresh, cached, running, ctx, c);
            } else {
                // The prefill "server": an M/D/1 wait, prompts that wait together
                // sharing a step.
                let steps = sm.prompt_steps(fresh, cached, 0.0, ctx, c);
                parts.prefill_queue = open_loop_prefill(r, &steps).wait;
            }
            parts.front_end = c.front_end_latency(prompt, cached);
            parts.step_wait = step.tpot / 2.0;
        }
        Load::Concurrency(n) => {
            let in_flight = (n as f64 / dp).max(1.0);
            running = in_flight.min(cap).max(1.0);
            rate_per_replica = 0.0;
            // `running` is fixed here: only the prefill share of each step moves, and it
            // settles within a few rounds (stop once the step no longer changes).
            let steps = sm.prompt_steps(fresh, cached, running, ctx, c);
            let pf = steps.time(1.0);
            for _ in 0..30 {
                let rate = running / (pf + output * step.tpot);
                let next = sm.token_step(running, ctx, rate * fresh * step.tpot, fresh_ctx, c);
                let settled = (next.tpot - step.tpot).abs() <= 1e-12 * step.tpot.max(1e-12);
                step = next;
                if settled {
                    break;
                }
            }
            // A request arrives while a step runs and waits for it to end (half a step on
            // average) before its first chunk is scheduled; then its prompt queues behind
            // the other clients' prompts for the prefill budget.
            let front = c.front_end_latency(prompt, cached);
            let think = front + step.tpot / 2.0 + output * step.tpot;
            parts.front_end = front;
            parts.step_wait = step.tpot / 2.0;
            parts.prefill = pf;
            parts.prefill_queue = (closed_loop_prefill(running, &steps, think) - pf).max(0.0);
            // Admission: past the running cap (KV blocks, max_num_seqs) a request waits
            // for a slot; in the closed loop (Little's law) that is the excess requests'
            // share of a request's time in service.
            if in_flight > running {
                parts.admission = (in_flight - running) / running * (pf + output * step.tpot);
            }
            parts.kv_offload_load =
                closed_loop_offload_load(s, mem, in_flight, running, prompt, output);
            // A benchmark run of `requests` starts with one request per slot at once:
            // that first wave passes the front end one request at a time and queues its
            // prefills behind each other.
            if let Some(total) = finite_requests {
                let total = (total / dp).max(in_flight);
                let steady = parts.total();
                let gpu = burst_prefill(&sm, running, fresh, cached, ctx, c);
                let burst = front + gpu.max(front_paced_burst(running, front, pf));
                parts.first_wave = (running * burst + (total - running) * steady) / total - steady;
            }
        }
    }
    let out_tps = if overloaded {
        max_tps
    } else {
        running / step.tpot * dp
    };
    let out_tps = match load {
        Load::Rate(_) if !overloaded => {
            (rate_per_replica * output * dp).min(out_tps.max(rate_per_replica * output * dp))
        }
        _ => out_tps,
    };
    let throughput = Throughput {
        served: out_tps,
        saturated: max_tps,
        gpus,
        output,
    };
    Prediction::at(running, cap, parts, step, overloaded, throughput)
}

/// TTFT a closed loop's requests spend, on average, loading their cached prefix from the
/// CPU tier. Assumption (stated, not measured): each of the `in_flight` clients per replica
/// is one conversation whose private cached prefix (the cached prompt less the prefix
/// every request shares) is its reused working set; the `running` requests hold theirs in
/// their own blocks, and the waiting clients' prefixes must survive in the GPU cache's
/// free room (the KV cache less the shared prefix and the running requests' mean
/// context, as [`running_cap`] counts them). What does not fit spills to the
/// CPU buffer ([`super::kv_offload::offloaded_tokens`]); that share of requests pays
/// [`super::kv_offload::hit_transfer_seconds`] for its private prefix instead of a GPU hit. The declared
/// reuse stays a hit either way (the perf model already prefills only the fresh
/// tokens); an open loop names no conversations, so it charges nothing here.
pub fn closed_loop_offload_load(
    s: &Scenario,
    mem: &MemoryReport,
    in_flight: f64,
    running: f64,
    prompt: f64,
    output: f64,
) -> f64 {
    if s.engine.kv_offload <= 0.0 {
        return 0.0;
    }
    let (cached, shared) = prefix_of(s, prompt);
    let private = cached - shared;
    let idle = (in_flight - running).max(0.0) * private;
    let held = shared + running * (prompt + output / 2.0 - shared);
    let free = mem.kv_cache_tokens as f64 - held;
    // Each stage's GPUs load their own layers' shard at once: the widest shard sets the time.
    let per_gpu = mem
        .stages
        .iter()
        .map(|st| st.kv_bytes_per_token)
        .fold(0.0, f64::max);
    let share = super::kv_offload::offloaded_share(
        idle,
        free,
        super::kv_offload::buffer_tokens(s, mem).unwrap_or(0.0),
    );
    let pcie = &s.topology.gpu.pcie;
    share * super::kv_offload::hit_transfer_seconds(private, per_gpu, pcie.bandwidth, pcie.latency)
}
