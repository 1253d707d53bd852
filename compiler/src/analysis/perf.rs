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
//! end's latency (a fixed part per request and a part per prompt token, on the CPU) and half
//! a step (a request arrives mid-step). A MoE model's DP
//! ranks step in lockstep (`StepModel::lockstep`): a step waits for the slowest rank's
//! prompt chunk, and every rank's experts see all ranks' tokens. The constants are
//! fitted on vLLM measured end to end (`dic_calibration::silicon`), never per row.

use super::comm::{step_comm, uses_deepep, CommContext, CommItem, StageBlocks};
use super::fused_moe::{moe_time, MoeCall};
use super::gemm::{compute_factor, roofline, KernelFamily};
use super::kv_pool::{CacheSpec, SpecCache};
use super::memory::{expert_width_on_rank, max_cuda_graph_size, pp_partition, MemoryReport};
use super::scenario::{CudaGraphMode, Load, Scenario};
use super::speculative::{draft_shape, DraftShape, DRAFT_PASS_OVERHEAD_SHARE};
use super::weights::rank_weights;
use crate::program::{Attention, Component, Mixer};
use serde::Serialize;

/// Efficiency constants of the roofline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerfConstants {
    /// Achieved fraction of HBM bandwidth in memory-bound steps.
    pub memory_efficiency: f64,
    /// Achieved fraction of dense tensor-core throughput in compute-bound steps.
    pub compute_efficiency: f64,
    /// Fixed time per step (scheduling, kernel launches), seconds. Not CPU time that
    /// vLLM's async scheduling hides behind the GPU: InferenceX's recipes set
    /// `--async-scheduling` (vLLM 0.33's default) and AIConfigurator's vLLM 0.12 rows run
    /// without it, yet one overhead fits both; charged as `max(GPU work, overhead)` where a
    /// recipe schedules asynchronously, TPOT median |error| rose from 5.6% to 16.1%. Nor
    /// do those rows show the step async scheduling adds before a new prompt's first
    /// chunk (its scheduler is one step ahead; vllm#19970 reports TTFT slightly up):
    /// charged, TTFT went from 11.3 / 15.1 / 15.2% to 12.6 / 16.4 / 18.5% fitted / leaving
    /// one GPU / one model out.
    pub step_overhead: f64,
    /// A MoE layer's work around its fused-MoE kernel — the router, top-k, sorting and
    /// aligning the token–expert pairs, quantizing the activations, un-permuting and
    /// weighting the outputs — as a multiple of the kernel's own time: that work scales
    /// with the same pairs and the same rank's shard the kernel does, and the kernel
    /// curve (`fused_moe`) is fitted on the kernel alone. (A fixed time per MoE layer
    /// instead, 143 µs, charged TP 4 and TP 2 × DP 2 the same: leaving one model out,
    /// Qwen3-235B's TTFT error was 28.8% against 15.4% with the multiple, TPOT 7.2% against
    /// 7.0%.)
    pub moe_layer_factor: f64,
    /// Time per sequence per layer in a step, seconds: the per-sequence work of every
    /// layer's kernels (the decode attention's block-table walk and split-KV reduction,
    /// per-sequence metadata and launches), with sampling and scheduling folded in. Per
    /// layer, not per step: fitted per step, the 70B-class rows set it and a 32-layer 8B
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
    /// hidden state). Every GPU's rows identify it: without
    /// B200's, the fit puts it at 10 µs. With it, TTFT median |error| fell from 12.2 / 18.5 /
    /// 16.7% to 11.3 / 16.3 / 14.5% fitted / leaving one GPU out / leaving one model out
    /// (TPOT 5.8 / 7.2 / 7.6% → 5.7 / 7.5 / 7.4%), the fixed request latency from 30.8 to
    /// 18.3 ms, and TensorRT-LLM's unfitted online TTFT from 124% to 95%.
    pub prompt_token_latency: f64,
    /// The CPU's time per layer to run a step without CUDA graphs, seconds. A step of
    /// more tokens than vLLM's largest captured batch (`memory::max_cuda_graph_size`: 512
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
/// efficiencies; `moe_layer_factor` scales it to the whole MoE layer (router, top-k,
/// sorting, quantization, un-permute).
///
/// Refitted as it stands when the training split grew to 729 rows (MiniMax-M2.5 FP8 and
/// NVFP4, TP/EP/DP-attention, vLLM 0.15–0.19, beside Qwen3-235B on 0.12): objective
/// 0.2446 with the constants fitted on the 390-row split (0.832, 0.575, 4.46 ms, 0.453,
/// 0.557 µs, 15.1 ms, 20 µs, 0.489 ms) against 0.2095 refitted. With a second MoE family
/// and later releases the MoE layer factor falls from 0.453 to 0.008: the multiple that
/// Qwen3-235B on 0.12 alone had identified is not an MoE effect (issue 37's diagnosis,
/// item 2). The per-constant notes above describe the 390-row fit; the model's structure
/// (a version-aware step overhead, the DP-rank mapping of the new rows, the unfitted
/// INT4/MXFP4 kernels) is issue 37's work, and `calibration/errors.md` shows where each
/// family stands.
pub const FITTED: PerfConstants = PerfConstants {
    memory_efficiency: 0.763,
    compute_efficiency: 0.538,
    step_overhead: 0.004,
    moe_layer_factor: 0.0084,
    sequence_layer_overhead: 0.273e-6,
    request_latency: 0.0209,
    prompt_token_latency: 11.6e-6,
    eager_layer_time: 0.608e-3,
};

impl PerfConstants {
    /// A request's latency before its first token outside the GPU steps, for a prompt
    /// of `prompt` tokens (cached or not: the whole prompt is tokenised).
    pub fn front_end_latency(&self, prompt: f64) -> f64 {
        self.request_latency + self.prompt_token_latency * prompt.max(0.0)
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

/// Costs of one step on one stage.
#[derive(Debug, Clone, Serialize)]
pub struct StepCost {
    pub compute: f64,
    pub memory: f64,
    pub comm: f64,
    pub overhead: f64,
    /// Time the GPU waits on the CPU's launches in a step run without CUDA graphs
    /// (`PerfConstants::eager_layer_time`): 0 where the GPU work is longer.
    pub cpu_launches: f64,
    pub total: f64,
    /// The kernel groups (dense GEMMs and attention at their rooflines, the experts on the
    /// fused-MoE curve; they add up with `comm` and
    /// `overhead` to `total`).
    pub kernels: KernelTimes,
    pub comm_items: Vec<CommItem>,
}

impl StepCost {
    /// The step's kernels and communication: its time without the fixed overhead and
    /// the wait on the CPU's launches.
    pub fn gpu_work(&self) -> f64 {
        self.total - self.overhead - self.cpu_launches
    }
}

/// Seconds of each kernel group in a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct KernelTimes {
    /// Dense GEMMs (attention projections, dense MLPs, shared experts) and the LM head.
    pub dense_gemms: f64,
    /// Routed experts.
    pub experts: f64,
    /// Attention over the KV cache (and recurrent state updates).
    pub attention: f64,
}

impl KernelTimes {
    fn add(&mut self, o: &KernelTimes) {
        self.dense_gemms += o.dense_gemms;
        self.experts += o.experts;
        self.attention += o.attention;
    }

    fn scale(&mut self, f: f64) {
        self.dense_gemms *= f;
        self.experts *= f;
        self.attention *= f;
    }
}

/// Per-stage static facts used by every step.
#[derive(Debug, Clone)]
struct StageFacts {
    blocks: StageBlocks,
    last: bool,
    /// Bytes of non-expert weights on one GPU of the stage.
    dense_bytes: f64,
    /// Parameters multiplied per token (non-expert, excluding the embedding lookup).
    dense_params: f64,
    lm_head_params: f64,
    /// KV bytes per token of context read by a decoding sequence in the layers whose cache
    /// grows (full attention; compressed attention's entries per token).
    growing_kv: f64,
    /// Attention work per token of context in those layers: Σ local heads × head size.
    growing_attn: f64,
    /// Sliding-window layers: the window and, per token inside it, KV bytes and work.
    window: f64,
    window_kv: f64,
    window_attn: f64,
    /// Recurrent layers: state bytes per sequence (read and written every step) and state
    /// elements (updated per token).
    state_bytes: f64,
    state_elements: f64,
    /// KV bytes written per new token.
    kv_write: f64,
    /// One MoE layer's fused-MoE call on a rank, for a batch of one token (the step sets
    /// the tokens); `None` without MoE layers.
    moe_call: Option<MoeCall>,
}

/// What every step of one scenario shares: per-stage facts and group placements.
pub struct StepModel<'a> {
    s: &'a Scenario,
    facts: Vec<StageFacts>,
    comm: CommContext,
    /// Query tokens each decoding sequence brings to a step: 1, or 1 + drafted tokens
    /// when the target verifies a speculative draft.
    verify: f64,
    /// The speculative draft, with tokens drafted and accepted per step.
    draft: Option<(DraftShape, f64, f64)>,
    /// Most tokens a step runs as a CUDA graph (`memory::max_cuda_graph_size`); `None`
    /// where no step does (`--enforce-eager`, `cudagraph_mode = none`).
    graph_max: Option<f64>,
    /// Whether a step that carries a prompt chunk can run as a graph at all (not under
    /// `FULL_DECODE_ONLY`).
    mixed_graphs: bool,
}

/// What a [`stage_step`] call stands for, which decides whether the CPU's launches can
/// set its time (`PerfConstants::eager_layer_time`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StepShape {
    /// One step as it runs: without CUDA graphs when it has more tokens than the largest
    /// captured batch, or carries a prompt chunk under `FULL_DECODE_ONLY`.
    Whole,
    /// The mean of many steps with a fractional share of prompt tokens: without CUDA
    /// graphs only where no step has them (the token step adds the share of steps that
    /// carry a whole prompt chunk).
    Mean,
}

impl<'a> StepModel<'a> {
    pub fn new(s: &'a Scenario) -> Self {
        let spec = s.engine.speculative.as_ref();
        StepModel {
            s,
            facts: stage_facts(s),
            comm: CommContext::new(s),
            verify: 1.0 + spec.map_or(0.0, |sp| sp.tokens as f64),
            draft: spec
                .and_then(|sp| draft_shape(s).map(|d| (d, sp.tokens as f64, sp.tokens_per_step()))),
            graph_max: s.engine.graphs().then(|| {
                max_cuda_graph_size(
                    s.engine.max_num_seqs,
                    s.engine.max_num_batched_tokens,
                    s.topology.gpu.architecture.as_deref(),
                ) as f64
            }),
            mixed_graphs: s.engine.cudagraph_mode != CudaGraphMode::FullDecodeOnly,
        }
    }

    /// Time of the `k` drafting passes of one step for `running` sequences at mean context
    /// `ctx`: each a roofline over the draft's weights and KV (the draft runs in 16 bits),
    /// plus a share of a step's fixed overhead.
    fn draft_time(&self, running: f64, ctx: f64, c: &PerfConstants) -> f64 {
        let Some((d, k, _)) = &self.draft else {
            return 0.0;
        };
        if d.weight_bytes == 0.0 {
            return 0.0; // n-gram lookup runs on the CPU
        }
        let gpu = &self.s.topology.gpu;
        let bytes = d.weight_bytes + running * ctx * d.kv_per_token;
        let flops = 2.0 * d.active_params * running + 4.0 * running * ctx * d.attention_per_token;
        let pass = roofline(
            flops / (gpu.bf16 * compute_factor(gpu, "bf16") * c.compute_efficiency),
            bytes / (gpu.hbm_bandwidth * c.memory_efficiency),
        ) + DRAFT_PASS_OVERHEAD_SHARE * c.step_overhead;
        k * pass
    }
}

fn stage_facts(s: &Scenario) -> Vec<StageFacts> {
    let m = &s.model;
    let l = &s.layout;
    let tp = l.tp.max(1);
    let dcp = l.dcp.max(1) as f64;
    let heads_local = m.heads as f64 / tp as f64;
    let parts = pp_partition(m.layers, l.pp);
    let mut specs = SpecCache::new(m, tp);
    let mut first = 0;
    let mut out = Vec::new();
    for (i, &count) in parts.iter().enumerate() {
        let is_first = i == 0;
        let last = i + 1 == parts.len();
        let w = rank_weights(m, l, first..first + count, is_first, last);
        let mut f = StageFacts {
            blocks: StageBlocks::of(m, first..first + count),
            last,
            // The embedding is a lookup and the encoders run only on media: neither is
            // streamed by a text step.
            dense_bytes: w.bytes - w.expert_bytes - w.embedding_bytes - w.encoder_bytes,
            dense_params: w.params
                - w.expert_params
                - w.embedding_params
                - w.encoder_params
                - w.lm_head_params,
            lm_head_params: w.lm_head_params,
            growing_kv: 0.0,
            growing_attn: 0.0,
            window: 0.0,
            window_kv: 0.0,
            window_attn: 0.0,
            state_bytes: 0.0,
            state_elements: 0.0,
            kv_write: 0.0,
            moe_call: None,
        };
        // The experts' sharding is memory's (`rank_weights`): whole experts over the TP ×
        // DP ranks with EP (the rank with the most of them), each expert's width split
        // over them without; the rank's expert parameters per layer give the count.
        let moe_layers = StageBlocks::of(m, first..first + count).moe;
        if moe_layers > 0 && w.expert_params > 0.0 {
            let width = expert_width_on_rank(s);
            let local_experts =
                w.expert_params / moe_layers as f64 / (m.mlp_matrices() * m.hidden as f64 * width);
            f.moe_call = Some(MoeCall {
                tokens: 1.0,
                top_k: m.experts_per_token as f64,
                experts: m.experts as f64,
                local_experts,
                hidden: m.hidden as f64,
                width,
                matrices: m.mlp_matrices(),
                bytes_per_param: w.expert_bytes / w.expert_params,
            });
        }
        for layer in first..first + count {
            let mixer = m.layer(layer).mixer;
            let attn_dim = match (mixer, m.attention) {
                (Mixer::Full, Attention::Mla) => (m.kv_lora_rank + m.qk_rope_head_dim) as f64,
                (Mixer::Sliding, _) if m.detail.sliding_head_dim > 0 => {
                    m.detail.sliding_head_dim as f64
                }
                _ => m.head_dim as f64,
            };
            match specs.get(mixer) {
                Some(CacheSpec::Full { per_token }) => {
                    f.growing_kv += per_token / dcp;
                    f.growing_attn += heads_local * attn_dim;
                    f.kv_write += per_token / dcp;
                }
                Some(CacheSpec::Compressed {
                    per_token,
                    window_per_token,
                    window,
                }) => {
                    let ratio = match mixer {
                        Mixer::Compressed(r) => r as f64,
                        _ => 1.0,
                    };
                    f.growing_kv += per_token / dcp;
                    f.growing_attn += heads_local * attn_dim / ratio;
                    f.window = f.window.max(window);
                    f.window_kv += window_per_token;
                    f.window_attn += heads_local * attn_dim;
                    f.kv_write += per_token + window_per_token;
                }
                Some(CacheSpec::Sliding { per_token, window }) => {
                    f.window = f.window.max(window);
                    f.window_kv += per_token;
                    f.window_attn += heads_local * attn_dim;
                    f.kv_write += per_token;
                }
                Some(CacheSpec::State { bytes }) => {
                    f.state_bytes += bytes;
                    f.state_elements += match mixer {
                        Mixer::Linear => {
                            let la = m.detail.linear.unwrap_or_default();
                            (la.value_heads / tp) as f64 * la.key_dim as f64 * la.value_dim as f64
                        }
                        _ => {
                            let mb = m.detail.mamba.unwrap_or_default();
                            (mb.heads / tp) as f64 * mb.head_dim as f64 * mb.state as f64
                        }
                    };
                }
                None => {}
            }
        }
        out.push(f);
        first += count;
    }
    out
}

/// Prompt tokens in one step: the slowest DP rank's, which the step waits for (`rank`),
/// and all DP ranks' together, which every rank's experts see (`group`; `rank` × DP
/// when every rank carries the same).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepPrefill {
    pub rank: f64,
    pub group: f64,
}

/// One step of one stage: `decode` sequences at mean context `ctx` on every DP rank, plus
/// `prefill` new prompt tokens attending to `prefill_ctx` tokens on average.
#[allow(clippy::too_many_arguments)]
fn stage_step(
    sm: &StepModel,
    f: &StageFacts,
    decode: f64,
    ctx: f64,
    prefill: StepPrefill,
    prefill_ctx: f64,
    c: &PerfConstants,
    shape: StepShape,
) -> StepCost {
    let StepPrefill {
        rank: prefill,
        group: group_prefill,
    } = prefill;
    let s = sm.s;
    let m = &s.model;
    let l = &s.layout;
    let gpu = &s.topology.gpu;
    // A verifying step scores every drafted token of every sequence: more query tokens
    // through the GEMMs and attention, the same context read once per sequence.
    let queries = decode * sm.verify;
    let tokens = (queries + prefill).max(1e-9);
    // Every rank of the MoE group (TP × DP) runs its experts on all DP ranks' tokens.
    let routed_tokens = (queries * l.dp.max(1) as f64 + group_prefill).max(1e-9);
    // KV traffic: each decoding sequence reads its whole context; a prefill chunk reads its
    // prefix once (flash attention keeps the chunk's queries on chip) and every new token
    // writes its entry.
    let prefill_prefix = if prefill > 0.0 { prefill_ctx } else { 0.0 };
    let prefilling = if prefill > 0.0 { 1.0 } else { 0.0 };
    let sequences = decode + prefilling;
    // Windowed layers see at most their window; recurrent layers read and write one state
    // per sequence.
    let in_window = |c: f64| c.min(f.window);
    // An 8-bit cache is read at its kernel family's measured rate per byte, not at the
    // 16-bit one's (`FP8_KV_READ_FACTOR`).
    let read_factor = if s.engine.vllm_attention && super::kv_pool::kv_element_bytes(m) < 2.0 {
        fp8_kv_read_factor(KernelFamily::of(gpu.architecture.as_deref()))
    } else {
        1.0
    };
    let kv_bytes = ((decode * ctx + prefill_prefix) * f.growing_kv
        + (decode * in_window(ctx) + in_window(prefill_prefix)) * f.window_kv)
        * read_factor
        + tokens * f.kv_write
        + 2.0 * sequences * f.state_bytes;
    let attention_flops = 4.0
        * ((queries * ctx + prefill * prefill_ctx) * f.growing_attn
            + (queries * in_window(ctx) + prefill * in_window(prefill_ctx)) * f.window_attn)
        + 4.0 * tokens * f.state_elements;
    // The layers' GEMMs run in their weights' formats; attention (QK and PV over the
    // cache) and the LM head (left unquantized by FP8/FP4 checkpoints) in bf16.
    // Each rate at the share of the datasheet peak the GPU's kernel family reaches
    // relative to the fitted (mostly Hopper) efficiency (`gemm::compute_factor`).
    let rate = |format: &str| gpu.matmul_flops(format) * compute_factor(gpu, format);
    let dense_rate = rate(m.format_of(Component::Mixer, None));
    let bf16_rate = rate("bf16");
    // Three kernel groups run one after another: the dense GEMMs and LM head (streaming
    // the dense weights) and attention (streaming the KV cache), each at its own
    // roofline, and the experts.
    let (ce, me) = (
        c.compute_efficiency,
        gpu.hbm_bandwidth * c.memory_efficiency,
    );
    // The routed experts run as vLLM's fused-MoE kernel, one call per MoE layer, timed by
    // the curve fitted on its measured latencies (`fused_moe`), which does not hide its
    // weight streaming behind its GEMMs: the parts add up.
    let (experts_compute, experts_memory, experts_launch) = match &f.moe_call {
        Some(call) => {
            let call = if l.dp > 1 && uses_deepep(s) {
                // DeepEP dispatches to each rank only the token–expert pairs of its own
                // experts: the kernel sees those rows alone, each for one local expert.
                let pairs = routed_tokens * call.top_k * call.local_experts / call.experts;
                MoeCall {
                    tokens: pairs,
                    top_k: 1.0,
                    experts: call.local_experts,
                    ..*call
                }
            } else {
                // vLLM's default all-gathers every DP rank's tokens to every rank, whose
                // kernel masks the pairs of other ranks' experts.
                MoeCall {
                    tokens: routed_tokens,
                    ..*call
                }
            };
            let t = moe_time(gpu, m.format_of(Component::Experts, None), &call);
            // The layer's routing, sorting and quantization around the kernel.
            let layers = f.blocks.moe as f64 * (1.0 + c.moe_layer_factor);
            (t.compute * layers, t.memory * layers, t.launch * layers)
        }
        None => (0.0, 0.0, 0.0),
    };
    let ops = [
        (
            (2.0 * tokens * f.dense_params / dense_rate
                + 2.0 * sequences * f.lm_head_params / bf16_rate)
                / ce,
            f.dense_bytes / me,
        ),
        (experts_compute, experts_memory),
        (attention_flops / bf16_rate / ce, kv_bytes / me),
    ];
    let compute: f64 = ops.iter().map(|o| o.0).sum();
    let memory: f64 = ops.iter().map(|o| o.1).sum();
    let kernels = KernelTimes {
        dense_gemms: roofline(ops[0].0, ops[0].1),
        experts: experts_compute + experts_memory + experts_launch,
        attention: ops[2].0.max(ops[2].1),
    };
    let comm_items = step_comm(s, &sm.comm, tokens, &f.blocks, f.last);
    let comm: f64 = comm_items.iter().map(|i| i.time).sum();
    // Per sequence, not per token, in each of the stage's layers: a prompt chunk's tokens
    // cost GEMM time, above.
    let overhead = c.step_overhead / l.pp.max(1) as f64
        + c.sequence_layer_overhead * sequences * f.blocks.layers as f64;
    // Without CUDA graphs the GPU runs no further ahead than the CPU's launches.
    let gpu_work = kernels.dense_gemms + kernels.experts + kernels.attention + comm;
    let eager = match sm.graph_max {
        None => true,
        Some(max) => {
            shape == StepShape::Whole && (tokens > max || (prefill > 0.0 && !sm.mixed_graphs))
        }
    };
    let cpu_launches = if eager {
        (c.eager_layer_time * f.blocks.layers as f64 - gpu_work).max(0.0)
    } else {
        0.0
    };
    StepCost {
        compute,
        memory,
        comm,
        overhead,
        cpu_launches,
        total: gpu_work + cpu_launches + overhead,
        kernels,
        comm_items,
    }
}

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
            };
        }
        let chunk = self.chunk(per_rank);
        let q = (per_rank / chunk).min(1.0);
        StepPrefill {
            rank: chunk * (1.0 - (1.0 - q).powf(dp)),
            group,
        }
    }

    /// The prompt chunk a step carries when it carries one, with `per_rank` prompt tokens
    /// per step on average: the fresh prompt, at most the token budget.
    fn chunk(&self, per_rank: f64) -> f64 {
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
            let mut st = stage_step(
                self,
                f,
                micro,
                ctx,
                step_prefill,
                prefill_ctx,
                c,
                StepShape::Mean,
            );
            // A chunk step does all the mean step's GPU work and more: where that alone
            // outlasts the CPU's launches, so does the chunk step.
            let floor = c.eager_layer_time * f.blocks.layers as f64;
            if chunk_share > 0.0 && st.gpu_work() < floor {
                let with_chunk = StepPrefill {
                    rank: chunk,
                    group: step_prefill.group.max(chunk),
                };
                let whole = stage_step(
                    self,
                    f,
                    micro,
                    ctx,
                    with_chunk,
                    prefill_ctx,
                    c,
                    StepShape::Whole,
                );
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
            let per = 1.0 / accepted.max(1.0);
            out.tpot *= per;
            out.compute *= per;
            out.memory *= per;
            out.comm *= per;
            out.overhead *= per;
            out.cpu_launches *= per;
            out.bubble *= per;
            out.draft *= per;
            out.kernels.scale(per);
            for item in &mut out.comm_items {
                item.time *= per;
                item.nccl_time *= per;
            }
        }
        out
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
        total
    }

    /// One whole step (every stage) that carries `tokens` prompt tokens attending to
    /// `prefix` tokens on average beside `running` decodes. The other DP ranks' experts
    /// are taken as busy with as many (a loaded engine; idle ranks would send fewer).
    fn chunk_step(
        &self,
        tokens: f64,
        prefix: f64,
        running: f64,
        ctx: f64,
        c: &PerfConstants,
    ) -> f64 {
        let s = self.s;
        self.facts
            .iter()
            .map(|f| {
                stage_step(
                    self,
                    f,
                    running / s.layout.pp.max(1) as f64,
                    ctx,
                    StepPrefill {
                        rank: tokens,
                        group: tokens * s.layout.dp.max(1) as f64,
                    },
                    prefix,
                    c,
                    StepShape::Whole,
                )
                .total
            })
            .sum()
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

/// Mean time to the first token of `k` prompts of `prompt` new tokens each (after
/// `cached` cached ones) that arrive at once: the scheduler fills each step's token budget
/// with them in order, so the i-th finishes after the steps that carry the first i + 1.
/// Each step is timed as one chunk of its tokens attending to half of them, which counts
/// several short prompts' attention as one long prompt's. Timed per prompt (each over its
/// own prefix, [`StepModel::chunk_step`]), the first wave came out shorter and the refit
/// worse: objective 0.1568 → 0.1579, TTFT 11.5 / 15.1 / 15.2% → 11.8 / 15.3 / 15.0% fitted
/// / leaving one GPU / one model out; the rows want the first wave no shorter than this.
fn burst_prefill(
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

/// Decode attention's time per byte of an 8-bit KV cache relative to a 16-bit one, per
/// kernel family: the median over the decode-attention tables' memory-bound shapes
/// (`dic_calibration::kernels::fp8_kv_read_factors`; `calibration/tests/calibration.rs`
/// re-derives it).
/// Hopper's FlashAttention 3 dequantizes as it reads and keeps little of the halved bytes
/// (an FP8 cache reads 1.84× as long per byte: 0.92 × BF16's time per token); Blackwell's
/// FlashInfer decode kernel keeps most (1.26×).
pub const FP8_KV_READ_FACTOR: [(KernelFamily, f64); 2] = [
    (KernelFamily::Hopper, 1.84),
    (KernelFamily::Blackwell, 1.26),
];

/// [`FP8_KV_READ_FACTOR`] of `family`.
pub fn fp8_kv_read_factor(family: KernelFamily) -> f64 {
    FP8_KV_READ_FACTOR
        .iter()
        .find(|(f, _)| *f == family)
        .map_or(1.0, |(_, x)| *x)
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
            // The decode batch in steady state (Little's law), damped fixed point; the
            // prompt's own prefill is timed once, at the batch it converged to.
            let mut at = running;
            for _ in 0..60 {
                at = running;
                let prefill_per_step = r * fresh * step.tpot;
                step = sm.token_step(running, ctx, prefill_per_step, fresh_ctx, c);
                let next = (r * (output * step.tpot)).max(r * step.tpot).min(cap);
                if (next - running).abs() < 1e-3 {
                    running = next;
                    break;
                }
                running = 0.5 * running + 0.5 * next;
            }
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
            parts.front_end = c.front_end_latency(prompt);
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
            let front = c.front_end_latency(prompt);
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
    Prediction {
        running,
        ttft: parts.total(),
        ttft_parts: parts,
        tpot: step.tpot,
        output_tokens_per_s: out_tps,
        output_tokens_per_s_per_gpu: out_tps / gpus,
        requests_per_s: out_tps / output,
        overloaded,
        step,
        running_cap: cap,
        max_output_tokens_per_s: max_tps,
    }
}
