//! One forward step of one PP stage: the kernel groups at their rooflines (dense GEMMs
//! and the LM head, the routed experts on the fused-MoE curve, attention over the KV
//! cache), the step's communication and overhead, and the CPU's launches where the step
//! runs without CUDA graphs; [`StepModel`] holds what every step of one scenario shares.

use super::PerfConstants;
use crate::analysis::comm::{
    deepep_dispatch_bytes, step_comm_exchanged, uses_deepep, CommContext, CommItem, GroupKind,
    StageBlocks, ACTIVATION_DTYPE_BYTES,
};
use crate::analysis::fused_moe::{moe_time, MoeCall, MoeTime};
use crate::analysis::gemm::{compute_factor, roofline, KernelFamily};
use crate::analysis::kv_pool::{CacheSpec, SpecCache};
use crate::analysis::lora::{RankExperts, StageLora};
use crate::analysis::memory::{expert_width_on_rank, pp_partition};
use crate::analysis::scenario::{CudaGraphMode, Scenario};
use crate::analysis::speculative::{draft_shape, DraftShape, DRAFT_PASS_OVERHEAD_SHARE};
use crate::analysis::weights::rank_weights;
use crate::program::{Attention, Component, Mixer};
use serde::Serialize;

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
    /// Dense GEMMs (attention projections, dense MLPs, shared experts) and the LM head,
    /// with the LoRA adapters' shrinks and expands where the deployment serves adapters.
    pub dense_gemms: f64,
    /// Routed experts.
    pub experts: f64,
    /// Attention over the KV cache (and recurrent state updates).
    pub attention: f64,
}

impl KernelTimes {
    pub(super) fn add(&mut self, o: &KernelTimes) {
        self.dense_gemms += o.dense_gemms;
        self.experts += o.experts;
        self.attention += o.attention;
    }

    pub(super) fn scale(&mut self, f: f64) {
        self.dense_gemms *= f;
        self.experts *= f;
        self.attention *= f;
    }
}

/// Per-stage static facts used by every step.
#[derive(Debug, Clone)]
pub(super) struct StageFacts {
    pub(super) blocks: StageBlocks,
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
    /// The LoRA adapters' layers on one GPU of the stage; `None` without `lora`.
    lora: Option<StageLora>,
}

/// What every step of one scenario shares: per-stage facts and group placements.
pub struct StepModel<'a> {
    pub(super) s: &'a Scenario,
    pub(super) facts: Vec<StageFacts>,
    pub(super) comm: CommContext,
    /// Query tokens each decoding sequence brings to a step: 1, or 1 + drafted tokens
    /// when the target verifies a speculative draft.
    pub(super) verify: f64,
    /// The speculative draft, with tokens drafted and accepted per step.
    pub(super) draft: Option<(DraftShape, f64, f64)>,
    /// Most tokens a step runs as a CUDA graph (`scenario::max_cuda_graph_size`); `None`
    /// where no step does (`--enforce-eager`, `cudagraph_mode = none`).
    pub(super) graph_max: Option<f64>,
    /// Whether a step that carries a prompt chunk can run as a graph at all (not under
    /// `FULL_DECODE_ONLY`).
    pub(super) mixed_graphs: bool,
    /// The time per byte of the KV cache read relative to a 16-bit one
    /// ([`FP8_KV_READ_FACTOR`] for an 8-bit cache under vLLM's attention, else 1).
    kv_read_factor: f64,
    /// The decode-attention kernel's fixed time per call ([`DECODE_ATTENTION_CALL`]; 0 off
    /// vLLM's attention backends).
    attention_call: f64,
    /// FLOP/s of the layers' GEMMs in their weights' format and of bf16 (attention, and the
    /// LM head FP8/FP4 checkpoints leave unquantized), each at the share of the datasheet
    /// peak the GPU's kernel family reaches relative to the fitted (mostly Hopper)
    /// efficiency (`gemm::compute_factor`).
    matmul_rates: (f64, f64),
}

/// What a [`stage_step`] call stands for, which decides whether the CPU's launches can
/// set its time (`PerfConstants::eager_layer_time`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StepShape {
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
        let family = KernelFamily::of(s.topology.gpu.architecture.as_deref());
        let eight_bit = crate::analysis::kv_pool::kv_element_bytes(&s.model) < 2.0;
        let vllm_8bit = s.engine.vllm_attention && eight_bit;
        let gpu = &s.topology.gpu;
        let rate = |format: &str| gpu.matmul_flops(format) * compute_factor(gpu, format);
        StepModel {
            s,
            facts: stage_facts(s),
            comm: CommContext::new(s),
            verify: 1.0 + spec.map_or(0.0, |sp| sp.tokens as f64),
            draft: spec
                .and_then(|sp| draft_shape(s).map(|d| (d, sp.tokens as f64, sp.tokens_per_step()))),
            graph_max: s.engine.graphs().then(|| {
                s.engine
                    .max_cuda_graph_size(s.topology.gpu.architecture.as_deref())
                    as f64
            }),
            mixed_graphs: s.engine.cudagraph_mode != CudaGraphMode::FullDecodeOnly,
            kv_read_factor: if vllm_8bit {
                fp8_kv_read_factor(family)
            } else {
                1.0
            },
            matmul_rates: (
                rate(s.model.format_of(Component::Mixer, None)),
                rate("bf16"),
            ),
            attention_call: if s.engine.vllm_attention {
                decode_attention_call_time(family, eight_bit)
            } else {
                0.0
            },
        }
    }

    /// Time of the `k` drafting passes of one step for `running` sequences at mean context
    /// `ctx`: each a roofline over the draft's weights and KV (the draft runs in 16 bits),
    /// plus a share of a step's fixed overhead.
    pub(super) fn draft_time(&self, running: f64, ctx: f64, c: &PerfConstants) -> f64 {
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

pub(super) fn stage_facts(s: &Scenario) -> Vec<StageFacts> {
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
            lora: None,
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
        f.lora = s.engine.lora.map(|spec| {
            let width = expert_width_on_rank(s);
            let experts = RankExperts::on_rank(m, moe_layers, w.expert_params, width);
            StageLora::new(m, tp, first..first + count, last, experts, spec)
        });
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
/// all DP ranks' together, which every rank's experts see (`group`; `rank` × DP when
/// every rank carries the same), and those the MoE layers' all-gather moves over the DP
/// group (`exchanged`): vLLM pads every rank to the largest rank's tokens only in a step
/// that runs as a CUDA graph (`dp_utils._synchronize_dp_ranks`: `should_dp_pad` when the
/// ranks' synced cudagraph mode is not NONE), so a prompt chunk past the captured sizes
/// moves only the tokens the ranks hold (`all_gatherv` of their own sizes), and one that
/// fits moves `rank` × DP.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepPrefill {
    pub rank: f64,
    pub group: f64,
    pub exchanged: f64,
}

/// What one step of one stage carries: `decode` sequences at mean context `ctx` on every
/// DP rank, plus `prefill` new prompt tokens attending to `prefill_ctx` tokens on average,
/// as one step or the mean of many (`shape`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct StepLoad {
    pub decode: f64,
    pub ctx: f64,
    pub prefill: StepPrefill,
    pub prefill_ctx: f64,
    pub shape: StepShape,
}

/// A step's kernels and collectives, before its fixed overhead and the CPU's launches:
/// what [`stage_step`] times, and, under dual batch overlap, each of its two micro-batches.
struct StepWork {
    compute: f64,
    memory: f64,
    kernels: KernelTimes,
    comm_items: Vec<CommItem>,
    tokens: f64,
    sequences: f64,
}

/// The work of one step of one stage (see [`stage_step`]).
fn step_work(sm: &StepModel, f: &StageFacts, load: StepLoad, c: &PerfConstants) -> StepWork {
    let StepLoad {
        decode,
        ctx,
        prefill,
        prefill_ctx,
        shape,
    } = load;
    let StepPrefill {
        rank: prefill,
        group: group_prefill,
        exchanged: exchanged_prefill,
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
    let read_factor = sm.kv_read_factor;
    let kv_bytes = ((decode * ctx + prefill_prefix) * f.growing_kv
        + (decode * in_window(ctx) + in_window(prefill_prefix)) * f.window_kv)
        * read_factor
        + tokens * f.kv_write
        + 2.0 * sequences * f.state_bytes;
    let attention_flops = 4.0
        * ((queries * ctx + prefill * prefill_ctx) * f.growing_attn
            + (queries * in_window(ctx) + prefill * in_window(prefill_ctx)) * f.window_attn)
        + 4.0 * tokens * f.state_elements;
    let (dense_rate, bf16_rate) = sm.matmul_rates;
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
            let call_at = |routed_tokens: f64| {
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
                moe_time(
                    gpu,
                    m.format_of(Component::Mixer, None),
                    m.format_of(Component::Experts, None),
                    &call,
                )
            };
            // The measured call is vLLM's whole `FusedMoE` layer on the router's logits: top-k,
            // aligning and sorting the pairs, the grouped GEMMs, un-permuting and weighting.
            let t = mean_step_experts(sm, shape, prefill, routed_tokens, group_prefill, call_at);
            let layers = f.blocks.moe as f64;
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
        lora_times(f, tokens, sequences, bf16_rate * ce, me),
    ];
    let compute: f64 = ops.iter().map(|o| o.0).sum();
    let memory: f64 = ops.iter().map(|o| o.1).sum();
    let kernels = KernelTimes {
        dense_gemms: roofline(ops[0].0, ops[0].1) + roofline(ops[3].0, ops[3].1),
        experts: experts_compute + experts_memory + experts_launch,
        attention: ops[2].0.max(ops[2].1) + decode_attention_calls(sm, f, decode),
    };
    // The MoE exchange carries every rank's decodes (padded to the largest rank's, the
    // ranks' batches balanced) and the prompt tokens it moves (`StepPrefill::exchanged`).
    let exchanged = queries * l.dp.max(1) as f64 + exchanged_prefill;
    let comm_items = step_comm_exchanged(s, &sm.comm, tokens, exchanged, &f.blocks, f.last);
    StepWork {
        compute,
        memory,
        kernels,
        comm_items,
        tokens,
        sequences,
    }
}

/// One step of one stage carrying `load`.
pub(super) fn stage_step(
    sm: &StepModel,
    f: &StageFacts,
    load: StepLoad,
    c: &PerfConstants,
) -> StepCost {
    let s = sm.s;
    let StepLoad {
        decode,
        prefill,
        shape,
        ..
    } = load;
    let mut w = step_work(sm, f, load, c);
    // A mean step is mostly decode-only steps: the decode threshold decides.
    let chunk_step = prefill.rank > 0.0 && shape == StepShape::Whole;
    if micro_batched(s, w.tokens, chunk_step) {
        let half = StepLoad {
            decode: decode / 2.0,
            prefill: StepPrefill {
                rank: prefill.rank / 2.0,
                group: prefill.group / 2.0,
                exchanged: prefill.exchanged / 2.0,
            },
            ..load
        };
        let half = step_work(sm, f, half, c);
        w = overlap_micro_batches(s, f, half, w.sequences);
    }
    let StepWork {
        compute,
        memory,
        kernels,
        comm_items,
        tokens,
        sequences,
    } = w;
    let comm: f64 = comm_items.iter().map(|i| i.time).sum();
    let overhead = fixed_costs(sm, f, sequences, c);
    // Without CUDA graphs the GPU runs no further ahead than the CPU's launches.
    let gpu_work = kernels.dense_gemms + kernels.experts + kernels.attention + comm;
    let eager = match sm.graph_max {
        None => true,
        Some(max) => {
            shape == StepShape::Whole && (tokens > max || (prefill.rank > 0.0 && !sm.mixed_graphs))
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

/// Streaming multiprocessors vLLM's dual batch overlap keeps for the communication kernels
/// (`VLLM_DBO_COMM_SMS`, default 20; `ubatch_utils.create_sm_control_context`).
const DBO_COMM_SMS: f64 = 20.0;

/// Streaming multiprocessors (compute units on AMD) of a GPU family: H100/H200 SXM 132,
/// B200/GB200 148, MI300X 304; 132 for a family dic does not know.
fn multiprocessors(gpu: &crate::analysis::scenario::GpuSpec) -> f64 {
    match gpu.architecture.as_deref() {
        Some("blackwell") => 148.0,
        _ if gpu.rocm => 304.0,
        _ => 132.0,
    }
}

/// The fewest tokens per rank of a step that only decodes that vLLM splits into two
/// micro-batches (`ParallelConfig.dbo_decode_token_threshold`, default 32).
pub const DBO_DECODE_TOKENS: f64 = 32.0;
/// The same for a step with a prompt chunk (`dbo_prefill_token_threshold`, default 512).
const DBO_PREFILL_TOKENS: f64 = 512.0;

/// Whether vLLM runs a step of `tokens` tokens per rank as two micro-batches (`dbo =
/// true`, `--enable-dbo`): at least 32 tokens in a step that only decodes, 512 in one with
/// a prompt chunk (`dbo_decode_token_threshold`, `dbo_prefill_token_threshold`;
/// `ubatch_utils.check_ubatch_thresholds`), with DeepEP moving the MoE tokens (without it
/// vLLM refuses `--enable-dbo`, E0413).
fn micro_batched(s: &Scenario, tokens: f64, chunk_step: bool) -> bool {
    let threshold = if chunk_step {
        DBO_PREFILL_TOKENS
    } else {
        DBO_DECODE_TOKENS
    };
    s.engine.dbo && uses_deepep(s) && tokens >= threshold
}

/// A step run as two micro-batches of `half` each (dual batch overlap): both halves' kernels
/// and collectives — each half reads the weights and launches its kernels again — on the
/// SMs vLLM leaves the kernels (`DBO_COMM_SMS` fewer: they take `SMs / (SMs − 20)` as
/// long), in vLLM's overlap schedule (`docs/design/dbo.md`): each MoE layer is four
/// phases, one micro-batch's kernels beside the other's DeepEP dispatch or combine —
/// attention₀ with dispatch₁, experts₁ with dispatch₀, experts₀ with combine₁, attention₁
/// with combine₀ — each as long as the longer of its two. "Attention" is everything but
/// the routed experts (dense GEMMs, shared experts, attention), spread evenly over the MoE
/// layers; a dispatch is the exchange's share of DeepEP's dispatched bytes
/// (`comm::deepep_dispatch_bytes`, FP8 with block-FP8 experts), a combine the rest (16-bit).
/// The exchange shows as what the phases add to the kernels.
fn overlap_micro_batches(s: &Scenario, f: &StageFacts, half: StepWork, sequences: f64) -> StepWork {
    let sms = multiprocessors(&s.topology.gpu);
    let mut kernels = half.kernels;
    kernels.scale(2.0 * sms / (sms - DBO_COMM_SMS));
    let mut comm_items = half.comm_items;
    for i in &mut comm_items {
        i.count *= 2;
        i.time *= 2.0;
        i.nccl_time *= 2.0;
    }
    let busy = kernels.dense_gemms + kernels.experts + kernels.attention;
    let is_ep = |i: &CommItem| i.group == GroupKind::Ep;
    let exchange: f64 = comm_items.iter().filter(|i| is_ep(i)).map(|i| i.time).sum();
    if exchange > 0.0 {
        let layers = f.blocks.moe.max(1) as f64;
        // Per micro-batch and MoE layer.
        let per = |t: f64| t / (2.0 * layers);
        let (attention, experts) = (per(busy - kernels.experts), per(kernels.experts));
        let dispatch_bytes = deepep_dispatch_bytes(s);
        let combine_bytes = s.model.hidden as f64 * ACTIVATION_DTYPE_BYTES;
        let dispatch = per(exchange) * dispatch_bytes / (dispatch_bytes + combine_bytes);
        let combine = per(exchange) - dispatch;
        let phases = attention.max(dispatch)
            + experts.max(dispatch)
            + experts.max(combine)
            + attention.max(combine);
        let shown = (layers * phases - busy).max(0.0) / exchange;
        for i in comm_items.iter_mut().filter(|i| is_ep(i)) {
            i.time *= shown;
        }
    }
    StepWork {
        compute: 2.0 * half.compute,
        memory: 2.0 * half.memory,
        kernels,
        comm_items,
        tokens: 2.0 * half.tokens,
        sequences,
    }
}

/// Compute and memory seconds of the LoRA adapters' shrinks and expands in a step of
/// `tokens` tokens of `sequences` sequences on the stage ([`StageLora::step_work`]): the
/// punica kernels run apart from the base layer's GEMM, in the adapters' 16-bit dtype, at
/// the dense GEMMs' measured shares of peak (`flops_per_second`, `bytes_per_second`). At
/// decode they read the distinct adapters' slots (memory-bound), in a prompt chunk they
/// multiply every token (compute-bound). Nothing without `lora`.
fn lora_times(
    f: &StageFacts,
    tokens: f64,
    sequences: f64,
    flops_per_second: f64,
    bytes_per_second: f64,
) -> (f64, f64) {
    f.lora.map_or((0.0, 0.0), |lora| {
        let (flops, bytes) = lora.step_work(tokens, sequences);
        (flops / flops_per_second, bytes / bytes_per_second)
    })
}

/// One MoE layer's fused-MoE call in a step routing `routed_tokens` (all DP ranks'),
/// `group_prefill` of them prompt tokens. A [`StepShape::Mean`] step stands for decode-only
/// steps and the share of steps that carry a whole prompt chunk; the experts' weights a
/// call streams grow with its tokens far less than in proportion (a few tokens touch a
/// few experts, a chunk touches them all), so the mean step's call is the mean of those
/// two calls, not one call at the mean tokens. (At the mean tokens, MiniMax-M2.5's
/// 8192-token prompts at 4 in flight on B200 streamed 6× the expert weights of a decode
/// step in every step: TPOT +93%.)
fn mean_step_experts(
    sm: &StepModel,
    shape: StepShape,
    prefill: f64,
    routed_tokens: f64,
    group_prefill: f64,
    call_at: impl Fn(f64) -> MoeTime,
) -> MoeTime {
    if shape == StepShape::Whole || prefill <= 0.0 || group_prefill <= 0.0 {
        return call_at(routed_tokens);
    }
    let share = (prefill / sm.chunk(prefill)).clamp(1e-9, 1.0);
    let decode_only = (routed_tokens - group_prefill).max(1e-9);
    let with_chunk = call_at(decode_only + group_prefill / share);
    let without = call_at(decode_only);
    let mix = |a: f64, b: f64| share * a + (1.0 - share) * b;
    MoeTime {
        launch: mix(with_chunk.launch, without.launch),
        compute: mix(with_chunk.compute, without.compute),
        memory: mix(with_chunk.memory, without.memory),
    }
}

/// A step's costs outside its kernels' work: its fixed overhead (a pipeline's stages share
/// it) and one per sequence, not per token, in each of the stage's layers (a prompt
/// chunk's tokens cost GEMM time), scaled to the model and GPU ([`hidden_state_scale`]).
fn fixed_costs(sm: &StepModel, f: &StageFacts, sequences: f64, c: &PerfConstants) -> f64 {
    let s = sm.s;
    c.step_overhead / s.layout.pp.max(1) as f64
        + c.sequence_layer_overhead
            * sequences
            * f.blocks.layers as f64
            * hidden_state_scale(s.model.hidden as f64, s.topology.gpu.hbm_bandwidth)
}

/// The hidden size [`PerfConstants::sequence_layer_overhead`] is stated at.
pub const SEQUENCE_COST_HIDDEN: f64 = 8192.0;
/// The HBM bandwidth it is stated at, bytes/s (the H100 SXM's 3.35 TB/s).
pub const SEQUENCE_COST_BANDWIDTH: f64 = 3.35e12;

/// How a sequence's cost per layer scales from [`SEQUENCE_COST_HIDDEN`] on a GPU of
/// [`SEQUENCE_COST_BANDWIDTH`] to a model of `hidden` on a GPU of `bandwidth` bytes/s: with
/// the hidden size, and inversely with the bandwidth
/// ([`PerfConstants::sequence_layer_overhead`] says why).
pub fn hidden_state_scale(hidden: f64, bandwidth: f64) -> f64 {
    (hidden / SEQUENCE_COST_HIDDEN) * (SEQUENCE_COST_BANDWIDTH / bandwidth.max(1.0))
}

/// The decode-attention kernel's fixed time per call, per kernel family, seconds: with a
/// 16-bit KV cache, then an 8-bit one. The intercept the decode-attention tables give
/// beside their time per byte and per sequence (`dic_calibration::kernels::
/// decode_attention_call`; `calibration/tests/calibration.rs` re-derives it): vLLM's
/// FlashAttention 3 on Hopper and FlashInfer's TRT-LLM decode kernel on Blackwell, one
/// call per attention layer of a step that decodes. A roofline of the cache's bytes alone
/// had no such floor: short contexts and small batches read too little to be timed by
/// their bytes. TensorRT-LLM's XQA kernels are not in the tables and MLA's decode kernels
/// (FlashMLA) are timed as this one, an approximation.
pub const DECODE_ATTENTION_CALL: [(KernelFamily, f64, f64); 2] = [
    (KernelFamily::Hopper, 11.5e-6, 13.1e-6),
    (KernelFamily::Blackwell, 9.3e-6, 9.9e-6),
];

/// [`DECODE_ATTENTION_CALL`] of `family` for a cache of 8-bit (`eight_bit`) or 16-bit
/// entries; 0 for a family the tables do not hold.
pub fn decode_attention_call_time(family: KernelFamily, eight_bit: bool) -> f64 {
    DECODE_ATTENTION_CALL
        .iter()
        .find(|(f, _, _)| *f == family)
        .map_or(
            0.0,
            |(_, sixteen, eight)| if eight_bit { *eight } else { *sixteen },
        )
}

/// The decode-attention calls of a step that decodes `decode` sequences: one per attention
/// layer of the stage, each its fixed time ([`DECODE_ATTENTION_CALL`]), under vLLM's
/// attention backends.
fn decode_attention_calls(sm: &StepModel, f: &StageFacts, decode: f64) -> f64 {
    if decode <= 0.0 {
        return 0.0;
    }
    sm.attention_call * f.blocks.attention as f64
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
