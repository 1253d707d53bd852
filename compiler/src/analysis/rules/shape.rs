//! vLLM 0.33's start-up checks of the model's shape against the layout: every dimension a
//! tensor-parallel rank takes an even slice of (query heads, KV heads, the linear-attention
//! and Mamba-2 heads, the MLP and expert widths), decode context parallelism's limits, and
//! pipeline stages on a model class without them. One function per question, so the
//! checker (E0402, E0407, E0411, E0801), the planner's TP and PP sizes and every help that
//! proposes a layout read the same rule (docs/vllm-rules.md rows 1-8, 11, 13-19).

use super::*;
use crate::analysis::vllm_class::vllm_class;
use crate::layers::{Ffn, Mixer};
use crate::program::{Attention, Component, Layout, Model};

/// Why vLLM cannot split model `m` over `tp` tensor-parallel ranks: the code and vLLM's
/// condition, or `None` when every sliced dimension divides.
pub fn tp_refusal(m: &Model, tp: u64) -> Option<(Code, String)> {
    let tp = tp.max(1);
    if tp == 1 {
        return None;
    }
    let heads = |what: String| Some((Code::HeadsNotDivisible, what));
    // `ModelConfig.verify_with_parallel_config`.
    if !m.heads.is_multiple_of(tp) {
        return heads(format!(
            "Total number of attention heads ({}) must be divisible by tensor parallel size ({tp})",
            m.heads
        ));
    }
    let kinds = |pred: fn(Mixer) -> bool| (0..m.layers).any(|l| pred(m.layer(l).mixer));
    // `QKVParallelLinear.__init__`: `divide(tp, kv_heads)` when tp ≥ kv_heads (each KV head
    // replicated on tp / kv_heads ranks), else `divide(kv_heads, tp)`. MLA has one latent.
    if m.attention != Attention::Mla {
        let mut kv = Vec::new();
        if kinds(|x| x == Mixer::Full) {
            kv.push(("KV heads", m.kv_heads));
        }
        if kinds(|x| x == Mixer::Sliding) {
            let sliding = m.detail.sliding_kv_heads;
            kv.push((
                "sliding-window KV heads",
                if sliding > 0 { sliding } else { m.kv_heads },
            ));
        }
        for (what, n) in kv {
            let n = n.max(1);
            let ok = if tp >= n {
                tp.is_multiple_of(n)
            } else {
                n.is_multiple_of(tp)
            };
            if !ok {
                return heads(format!(
                    "tensor parallel size ({tp}) and the model's {n} {what} must divide one another: vLLM splits the KV heads over the TP ranks, or replicates each on tp / {n} of them (QKVParallelLinear)"
                ));
            }
        }
    }
    // `QwenGatedDeltaNetAttention.__init__`: `divide(num_v_heads, tp)`, and each rank
    // reshapes its projections into `num_k_heads // tp` key heads.
    if let Some(la) = m.detail.linear.filter(|_| kinds(|x| x == Mixer::Linear)) {
        for (what, n) in [("key", la.key_heads), ("value", la.value_heads)] {
            if !n.is_multiple_of(tp) {
                return heads(format!(
                    "the linear-attention layers' {n} {what} heads are not divisible by tensor parallel size ({tp}) (Gated DeltaNet splits them over the TP ranks)"
                ));
            }
        }
    }
    // `MambaMixer2.__init__`.
    if let Some(mb) = m.detail.mamba.filter(|_| kinds(|x| x == Mixer::Mamba)) {
        if !mb.heads.is_multiple_of(tp) {
            return heads(format!(
                "Tensor parallel world size must divide num heads: the Mamba-2 layers have {} heads, tp is {tp}",
                mb.heads
            ));
        }
        if !mb.groups.is_multiple_of(tp) && mb.groups != 1 {
            return heads(format!(
                "If tensor parallel world size does not divide num_groups, then num_groups must equal 1: the Mamba-2 layers have {} groups, tp is {tp}",
                mb.groups
            ));
        }
    }
    if let Some(why) = quant_groups_refusal(m, tp).or_else(|| block_fp8_refusal(m, tp)) {
        return Some((Code::WidthNotDivisible, why));
    }
    // `MergedColumnParallelLinear.__init__`: the gate/up outputs of every dense MLP (and
    // of the shared experts, which run as a dense MLP over TP) split evenly.
    let dense = kinds_ffn(m, Ffn::Dense);
    let shared = shared_width(m);
    for (what, width, present) in [
        ("MLP intermediate size", m.intermediate, dense),
        (
            "shared experts' intermediate size",
            shared,
            m.shared_experts > 0,
        ),
    ] {
        if present && width > 0 && !width.is_multiple_of(tp) {
            return Some((
                Code::WidthNotDivisible,
                format!("the {what} ({width}) is not divisible by tensor parallel size ({tp}) (MergedColumnParallelLinear)"),
            ));
        }
    }
    None
}

/// `verify_group_size_divides_partition` (`marlin_utils.check_marlin_supports_shape`,
/// `CompressedTensorsWNA16`): a row-parallel layer of a group-quantized checkpoint (AWQ,
/// GPTQ, INT4) holds whole quantization groups on each rank — the attention output
/// projection's `heads × head_dim / tp` inputs and the MLP down projection's
/// `intermediate / tp`. The group is the model's `quant_group`, else 128 (the formats'
/// usual size, as the weights count it).
fn quant_groups_refusal(m: &Model, tp: u64) -> Option<String> {
    let grouped = |c: Component| matches!(m.format_of(c, None), "awq" | "gptq" | "int4");
    let group = if m.detail.quant_group > 0 {
        m.detail.quant_group
    } else {
        128
    };
    let attention = m.attention != Attention::Mla
        && (0..m.layers).any(|l| matches!(m.layer(l).mixer, Mixer::Full | Mixer::Sliding));
    let inputs = [
        (
            "attention output projection",
            m.heads * m.head_dim,
            grouped(Component::Mixer) && attention,
        ),
        (
            "MLP down projection",
            m.intermediate,
            grouped(Component::Mlp) && kinds_ffn(m, Ffn::Dense),
        ),
    ];
    inputs
        .into_iter()
        .filter(|(_, input, present)| *present && group < *input)
        .find(|(_, input, _)| !(input / tp).is_multiple_of(group) || !input.is_multiple_of(tp))
        .map(|(what, input, _)| {
            format!(
                "Weight input_size_per_partition={} of the {what} is not divisible by group_size={group}: tp {tp} splits its {input} inputs into shards that are not a whole number of quantization groups",
                input / tp
            )
        })
}

/// A block-FP8 checkpoint's `[block_n, block_k]` for component `c` (in `layer`), when
/// that component is stored block-FP8 (`weight_block` on a prequantized fp8 checkpoint).
fn fp8_block(m: &Model, c: Component, layer: Option<u64>) -> Option<(u64, u64)> {
    match m.detail.weight_block[..] {
        [n, k] if m.prequantized && m.format_of(c, layer) == "fp8" => Some((n.max(1), k.max(1))),
        _ => None,
    }
}

/// The TP-split linear layers of layer `l` that `validate_fp8_block_shape` checks: what,
/// the full width, and whether the split is the input (row-parallel, `% block_k`) or the
/// single output (column-parallel, `% block_n`). Merged column-parallel layers (QKV,
/// gate/up) are left out: `ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch`
/// skips the check for them when a shard is not whole blocks. The shared experts, whose
/// split depends on `ep`, are [`block_fp8_shared_refusal`]'s.
fn block_checked_linears(m: &Model, l: u64) -> Vec<(&'static str, u64, bool)> {
    let layer = m.layer(l);
    let mut out = Vec::new();
    match layer.mixer {
        Mixer::Full | Mixer::Sliding if m.attention == Attention::Mla => {
            out.push(("attention output projection", m.heads * m.v_head_dim, true));
            let qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
            if m.q_lora_rank > 0 {
                out.push(("MLA query up-projection (q_b_proj)", m.heads * qk, false));
            }
            out.push((
                "MLA key/value up-projection (kv_b_proj)",
                m.heads * (m.qk_nope_head_dim + m.v_head_dim),
                false,
            ));
        }
        Mixer::Full | Mixer::Sliding => {
            // MiMo's values are narrower than its keys (`v_head_dim`).
            let v = if m.v_head_dim > 0 {
                m.v_head_dim
            } else {
                m.head_dim
            };
            out.push(("attention output projection", m.heads * v, true))
        }
        Mixer::Linear => {
            if let Some(la) = m.detail.linear {
                out.push((
                    "linear-attention output projection",
                    la.value_heads * la.value_dim,
                    true,
                ));
            }
        }
        Mixer::Mamba => {
            if let Some(mb) = m.detail.mamba {
                out.push(("Mamba output projection", mb.heads * mb.head_dim, true));
            }
        }
        Mixer::Compressed(_) | Mixer::None => {}
    }
    if layer.ffn == Ffn::Dense {
        out.push(("MLP down projection", m.intermediate_at(l), true));
    }
    out
}

/// `fp8_utils.validate_fp8_block_shape` (called from `Fp8LinearMethod.create_weights`):
/// on a block-FP8 checkpoint every TP shard of a linear layer holds whole scale blocks —
/// a row-parallel layer's `input / tp` a multiple of `block_k`, a column-parallel layer's
/// `output / tp` a multiple of `block_n`. Qwen3-32B-FP8 at tp 16: the down projection's
/// 25,600 inputs give 1,600 per rank, 12.5 blocks of 128.
fn block_fp8_refusal(m: &Model, tp: u64) -> Option<String> {
    for l in 0..m.layers {
        for (what, width, input) in block_checked_linears(m, l) {
            let component = if what == "MLP down projection" {
                Component::Mlp
            } else {
                Component::Mixer
            };
            let Some((block_n, block_k)) = fp8_block(m, component, Some(l)) else {
                continue;
            };
            // A width tp does not divide is another rule's refusal.
            if width == 0 || !width.is_multiple_of(tp) {
                continue;
            }
            let shard = width / tp;
            let (block, name, side) = if input {
                (block_k, "block_k", "input_size_per_partition")
            } else {
                (block_n, "block_n", "output_partition_size")
            };
            if !shard.is_multiple_of(block) {
                return Some(format!(
                    "Weight {side} = {shard} is not divisible by weight quantization {name} = {block}: tp {tp} splits the {what}'s {width} {} into shards that are not whole FP8 scale blocks (layer {l}; validate_fp8_block_shape)",
                    if input { "inputs" } else { "outputs" }
                ));
            }
        }
    }
    None
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `Fp8MoEMethod.create_weights` on a block-FP8 checkpoint: each rank's share of an
/// expert's intermediate width must hold whole blocks (`validate_fp8_block_shape_moe`),
/// unless `refine_fp8_moe_block_shape` can refine the scales to a finer block:
/// `gcd(block_n, block_k, shard, hidden) ≥ 32` (vLLM's default `auto` MoE backend).
/// `moe_tp` is the ranks each expert is split over, `tp` the attention's TP.
fn block_fp8_moe_refusal(m: &Model, moe_tp: u64, tp: u64) -> Option<String> {
    let (block_n, block_k) = fp8_block(m, Component::Experts, None)?;
    if m.moe_intermediate == 0 || !m.moe_intermediate.is_multiple_of(moe_tp) {
        return None;
    }
    let shard = m.moe_intermediate / moe_tp;
    let whole = shard.is_multiple_of(block_n) && (moe_tp == 1 || shard.is_multiple_of(block_k));
    if !whole && gcd(gcd(block_n, block_k), gcd(shard, m.hidden)) >= 32 {
        return None; // refined to a finer block at load time
    }
    if !shard.is_multiple_of(block_n) {
        return Some(format!(
            "The output_size of gate's and up's weight = {shard} is not divisible by weight quantization block_n = {block_n}: the experts' {} intermediate width split over {moe_tp} ranks leaves shards that are not whole FP8 scale blocks, nor a block of 32 or more vLLM could refine them to (validate_fp8_block_shape_moe)",
            m.moe_intermediate
        ));
    }
    (tp > 1 && !shard.is_multiple_of(block_k)).then(|| {
        format!(
            "The input_size of down's weight = {shard} is not divisible by weight quantization block_k = {block_k}: the experts' {} intermediate width split over {moe_tp} ranks (validate_fp8_block_shape_moe)",
            m.moe_intermediate
        )
    })
}

fn kinds_ffn(m: &Model, ffn: Ffn) -> bool {
    (0..m.layers).any(|l| m.layer(l).ffn == ffn)
}

/// The ranks each expert's width is split over (`FusedMoEParallelConfig.make`): with
/// expert parallelism whole experts (1), else the TP group flattened across DP and PCP.
pub fn moe_tp(l: &Layout) -> u64 {
    if l.ep && l.tp.max(1) * l.dp.max(1) * l.pcp.max(1) > 1 {
        1
    } else {
        l.tp.max(1) * l.dp.max(1) * l.pcp.max(1)
    }
}

/// `FusedMoEConfig.__post_init__`: `assert intermediate_size % moe_tp == 0`, and on a
/// block-FP8 checkpoint each rank's share whole scale blocks ([`block_fp8_moe_refusal`]).
/// A dense model's DP replicas are separate engines, so only a MoE model's DP counts.
pub fn moe_refusal(m: &Model, l: &Layout) -> Option<String> {
    if !m.is_moe() {
        return None;
    }
    let tp = moe_tp(l);
    if m.moe_intermediate > 0 && !m.moe_intermediate.is_multiple_of(tp) {
        return Some(format!(
            "the experts' intermediate size ({}) is not divisible by the {tp} ranks that split each expert (tp × dp{} without `ep`; FusedMoEConfig asserts it)",
            m.moe_intermediate,
            if l.pcp > 1 { " × pcp" } else { "" }
        ));
    }
    gpt_oss_world_refusal(m, l)
        .or_else(|| block_fp8_moe_refusal(m, tp, l.tp.max(1)))
        .or_else(|| block_fp8_shared_refusal(m, l))
}

/// gpt-oss's MoE block asserts that its experts' intermediate size divides the whole
/// world size, `ep` or not (`model_executor/models/gpt_oss.py:MLPBlock.__init__`:
/// `config.intermediate_size % self.world_size == 0`, the world `tp × pp × pcp × dp` of
/// `ParallelConfig.world_size_across_dp` once DP ranks join one process group).
fn gpt_oss_world_refusal(m: &Model, l: &Layout) -> Option<String> {
    let gpt_oss =
        crate::analysis::vllm_class::vllm_class(m).is_some_and(|c| c.class == "GptOssForCausalLM");
    let world = l.tp.max(1) * l.pp.max(1) * l.pcp.max(1) * l.dp.max(1);
    (gpt_oss && m.moe_intermediate > 0 && !m.moe_intermediate.is_multiple_of(world)).then(|| {
        format!(
            "the experts' intermediate size ({}) is not divisible by the world size {world} (tp × pp × dp): gpt-oss's MoE block asserts `config.intermediate_size % world_size == 0`, with `ep` too",
            m.moe_intermediate
        )
    })
}

/// `validate_fp8_block_shape` on the shared experts' down projection (a row-parallel
/// layer over the attention's TP), except with `ep` and tp > 1, where vLLM runs the
/// shared experts unsplit on each rank (`ParallelConfig.use_sequence_parallel_moe`; every
/// `all2all_backend` dic writes is one of its backends).
fn block_fp8_shared_refusal(m: &Model, l: &Layout) -> Option<String> {
    let tp = l.tp.max(1);
    let width = shared_width(m);
    let (_, block_k) = fp8_block(m, Component::Mlp, None)?;
    if (l.ep && tp > 1) || width == 0 || !width.is_multiple_of(tp) {
        return None;
    }
    let shard = width / tp;
    (!shard.is_multiple_of(block_k)).then(|| {
        format!(
            "Weight input_size_per_partition = {shard} is not divisible by weight quantization block_k = {block_k}: tp {tp} splits the shared experts' {width}-wide down projection into shards that are not whole FP8 scale blocks (validate_fp8_block_shape)"
        )
    })
}

/// The shared experts' summed intermediate width (0: none).
fn shared_width(m: &Model) -> u64 {
    let one = if m.detail.shared_expert_intermediate > 0 {
        m.detail.shared_expert_intermediate
    } else {
        m.moe_intermediate
    };
    one * m.shared_experts
}

/// The help for a [`moe_refusal`]: `ep`, or the widest split of each expert (powers of
/// two, as the planner's sizes) that vLLM accepts.
fn moe_help(m: &Model, l: &Layout) -> String {
    if gpt_oss_world_refusal(m, l).is_some() {
        return format!(
            "use a world size (tp × pp × dp) that divides {}: powers of two up to 64, or with factors 3 and 5 (dp 6, dp 12 …)",
            m.moe_intermediate
        );
    }
    let widest = (0..=16)
        .map(|k| 1u64 << k)
        .take_while(|t| *t <= moe_tp(l))
        .filter(|t| {
            m.moe_intermediate.is_multiple_of(*t)
                && block_fp8_moe_refusal(m, *t, (*t).min(l.tp.max(1))).is_none()
        })
        .last()
        .unwrap_or(1);
    format!("add `ep` (whole experts per rank), or split each expert over at most {widest} ranks (tp × dp without `ep`)")
}

/// The TP sizes to propose: powers of two up to `max` that vLLM can split the model over.
pub fn valid_tp_sizes(m: &Model, max: u64) -> Vec<u64> {
    (0..=16)
        .map(|k| 1u64 << k)
        .take_while(|t| *t <= max.max(1))
        .filter(|t| tp_refusal(m, *t).is_none())
        .collect()
}

/// Why vLLM cannot run model `m` in `pp` pipeline stages: its class does not implement
/// `SupportsPP` (`config/model.py:ModelConfig.verify_with_parallel_config`, the class from
/// [`vllm_class`]); `None` for one stage or a class that does.
pub fn pp_refusal(m: &Model, pp: u64) -> Option<String> {
    let class = vllm_class(m).filter(|c| pp > 1 && !c.supports_pp)?;
    Some(format!(
        "pp {pp}: vLLM 0.33 cannot split this model into pipeline stages: its class {} ({}) does not implement SupportsPP, and the engine stops at start-up with \"Pipeline parallelism is not supported for this model. Supported models implement the `SupportsPP` interface.\" (config/model.py:ModelConfig.verify_with_parallel_config)",
        class.class, class.source
    ))
}

/// E0801: pipeline stages on a model whose vLLM class has none ([`pp_refusal`]); the help
/// is the TP-only layout on the same GPUs, its TP the widest vLLM can split the model over
/// (the other GPUs as DP replicas).
pub(super) fn pipeline_parallel(s: &Scenario, out: &mut Vec<Finding>) {
    let l = s.layout;
    let Some(message) = pp_refusal(&s.model, l.pp) else {
        return;
    };
    let stage_gpus = l.tp.max(1) * l.pp;
    let tp = valid_tp_sizes(&s.model, stage_gpus)
        .into_iter()
        .filter(|t| stage_gpus.is_multiple_of(*t))
        .max()
        .unwrap_or(1);
    let tp_only = Layout {
        tp,
        pp: 1,
        dp: l.dp.max(1) * (stage_gpus / tp),
        ..l
    };
    out.push(Finding::new(
        Code::UnsupportedLaunch,
        Anchor::Layout,
        message,
        "vLLM has no pipeline parallelism for this model",
        Some(format!(
            "use tensor parallelism only: `{tp_only}` on the same GPUs"
        )),
    ));
}

/// E0402/E0411: the layout's TP (and the experts' TP) against the model's dimensions.
pub(super) fn shape_against_the_layout(s: &Scenario, out: &mut Vec<Finding>) {
    let m = &s.model;
    let l = &s.layout;
    if let Some((code, message)) = tp_refusal(m, l.tp) {
        let max = l.tp.max(s.topology.gpus_per_node) * 2;
        let valid = valid_tp_sizes(m, max);
        out.push(Finding::new(
            code,
            Anchor::Layout,
            message,
            "vLLM refuses this TP size",
            Some(if valid.is_empty() {
                format!("no TP size up to {max} splits this model; use tp 1")
            } else {
                format!(
                    "use tp {}",
                    valid
                        .iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(", tp ")
                )
            }),
        ));
    }
    if let Some(message) = moe_refusal(m, l) {
        out.push(Finding::new(
            Code::WidthNotDivisible,
            Anchor::Layout,
            message,
            "vLLM refuses this split of the experts",
            Some(moe_help(m, l)),
        ));
    } else if let Some((message, help)) = refined_fp8_moe_refusal(s) {
        out.push(Finding::new(
            Code::FormatNeedsNewerGpu,
            Anchor::Layout,
            message,
            "no FP8 MoE kernel for this split on this GPU",
            Some(help),
        ));
    }
}

/// Block-FP8 experts whose shards are not whole scale blocks run only where vLLM can
/// refine the blocks (`oracle/fp8.py:refine_fp8_moe_block_shape`) and a kernel takes the
/// finer ones: Triton's FP8 path needs compute capability 8.9 (`TritonExperts`:
/// `current_platform.supports_fp8()`), DeepGEMM and FlashInfer 9.0, and below them Marlin
/// takes the checkpoint's 128 × 128 blocks alone, so `select_fp8_moe_backend` raises "No
/// FP8 MoE backend supports the deployment configuration." (an A100 at MoE TP 8 on
/// Qwen3-235B-A22B-FP8: 1,536 / 8 = 192, refined to 64).
fn refined_fp8_moe_refusal(s: &Scenario) -> Option<(String, String)> {
    let (m, l) = (&s.model, &s.layout);
    let cc = s.topology.gpu.compute_capability()?;
    let (block_n, block_k) = fp8_block(m, Component::Experts, None)?;
    let moe_tp = moe_tp(l);
    if s.topology.gpu.rocm || cc >= 8.9 || !m.is_moe() || m.moe_intermediate == 0 {
        return None;
    }
    let shard = m.moe_intermediate / moe_tp;
    let whole = |shard: u64| shard.is_multiple_of(block_n) && shard.is_multiple_of(block_k);
    if moe_tp == 1 || whole(shard) {
        return None;
    }
    let widest = (0..=16)
        .map(|k| 1u64 << k)
        .take_while(|t| *t < moe_tp)
        .filter(|t| m.moe_intermediate.is_multiple_of(*t) && whole(m.moe_intermediate / t))
        .last()
        .unwrap_or(1);
    Some((
        format!(
            "No FP8 MoE backend supports the deployment configuration: on {} (compute capability {cc:.1}) only Marlin runs block-FP8 experts, with the checkpoint's {block_n} × {block_k} blocks, and the experts' {} intermediate width over {moe_tp} ranks leaves shards of {shard} that vLLM would refine to finer blocks, which only Triton (compute capability 8.9), DeepGEMM and FlashInfer (9.0) take (oracle/fp8.py:select_fp8_moe_backend)",
            s.topology.gpu.name, m.moe_intermediate
        ),
        format!("add `ep` (whole experts per rank), or split each expert over at most {widest} ranks (tp × dp without `ep`) on this GPU"),
    ))
}

/// Why vLLM refuses decode context parallelism `dcp` on this layout, or `None`
/// (`ParallelConfig._validate_parallel_config`, `ModelConfig.verify_with_parallel_config`,
/// `SlidingWindowSpec.max_memory_usage_bytes`).
pub fn dcp_refusal(m: &Model, l: &Layout) -> Option<(String, String)> {
    let (tp, dcp, pcp) = (l.tp.max(1), l.dcp.max(1), l.pcp.max(1));
    if dcp == 1 {
        return None;
    }
    if pcp > 1 {
        if dcp != pcp && dcp != tp * pcp {
            return Some((
                format!("When PCP is enabled, DCP must be disabled, span the PCP axis, or span the full TP x PCP axis: dcp {dcp} with tp {tp} × pcp {pcp}"),
                format!("use dcp {pcp} or dcp {}, or drop dcp", tp * pcp),
            ));
        }
    } else if !tp.is_multiple_of(dcp) {
        return Some((
            format!("tp_size={tp} must be divisible by dcp_size={dcp}."),
            "choose dcp dividing tp".into(),
        ));
    }
    if m.attention != Attention::Mla {
        let kv = m.kv_heads.max(1);
        if tp <= kv {
            return Some((
                format!("Decode context parallelism for GQA/MQA requires --tensor-parallel-size ({tp}) to be greater than the model's total number of KV heads ({kv})"),
                format!("use tp > {kv} or drop dcp"),
            ));
        }
        let max = tp / kv;
        if dcp > max {
            return Some((
                format!("`--decode-context-parallel-size` ({dcp}) exceeds the maximum supported value ({max}) for `--tensor-parallel-size` ({tp}) and {kv} model KV heads."),
                format!("use dcp ≤ tp / kv_heads = {max}, or raise tp"),
            ));
        }
        let q_per_kv = m.heads / kv;
        if !q_per_kv.is_multiple_of(dcp) {
            return Some((
                format!("The model's number of query heads per KV head ({q_per_kv}) must be divisible by `--decode-context-parallel-size` ({dcp}) for GQA/MQA."),
                "choose a dcp dividing the query heads per KV head".into(),
            ));
        }
    }
    if (0..m.layers).any(|x| m.layer(x).mixer == Mixer::Sliding) {
        return Some((
            "DCP not support sliding window: the model's sliding-window layers cannot shard their KV cache over DCP ranks".into(),
            "drop dcp for this model".into(),
        ));
    }
    None
}

/// Why no attention backend serves decode context parallelism for this model on this
/// platform, or `None`: on ROCm, a DeepSeek sparse-attention model (MLA with the lightning
/// indexer: DeepSeek V3.2, GLM-5) gets only `ROCM_AITER_MLA_SPARSE`
/// (`platforms/rocm.py:_get_backend_priorities`), whose impl has `supports_dcp = False`
/// (`v1/attention/backends/mla/rocm_aiter_mla_sparse.py:ROCMAiterMLASparseImpl`), so
/// `AttentionBackend.validate_configuration` leaves none. CUDA's sparse MLA backends
/// (FlashMLA sparse, FlashInfer MLA sparse) support DCP.
pub(super) fn dcp_backend_refusal(s: &Scenario) -> Option<(String, String)> {
    let m = &s.model;
    let sparse_mla = m.attention == Attention::Mla && m.detail.indexer_head_dim > 0;
    if !(s.topology.gpu.rocm && sparse_mla && s.layout.dcp > 1) {
        return None;
    }
    Some((
        format!(
            "dcp {}: no attention backend on ROCm serves this sparse-attention (MLA with indexer) model with decode context parallelism: vLLM 0.33's only choice, ROCM_AITER_MLA_SPARSE, does not support DCP, and the engine stops at start-up with \"No valid attention backend found … Reasons: {{ROCM_AITER_MLA_SPARSE: [DCP not supported]}}\" (v1/attention/backend.py:AttentionBackend.validate_configuration)",
            s.layout.dcp
        ),
        "drop dcp on AMD GPUs for this model".into(),
    ))
}

/// E0407: decode context parallelism vLLM refuses.
pub(super) fn decode_context_parallel(s: &Scenario, out: &mut Vec<Finding>) {
    if let Some((message, help)) =
        dcp_refusal(&s.model, &s.layout).or_else(|| dcp_backend_refusal(s))
    {
        out.push(Finding::new(
            Code::InvalidDcp,
            Anchor::Layout,
            message,
            "vLLM refuses this decode context parallelism",
            Some(help),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::catalog;

    fn model(name: &str) -> Model {
        catalog::model(name).unwrap_or_else(|| panic!("{name} in the stdlib"))
    }

    #[test]
    fn pipeline_stages_need_a_class_with_supports_pp() {
        // every catalog model's class implements SupportsPP
        for name in catalog::model_names() {
            assert_eq!(pp_refusal(&model(&name), 4), None, "{name}");
        }
        let mut zamba = model("llama_3_1_8b");
        zamba.architecture = Some("Zamba2ForCausalLM".into());
        assert_eq!(pp_refusal(&zamba, 1), None);
        let refused = pp_refusal(&zamba, 2).unwrap_or_default();
        assert!(refused.contains("Zamba2ForCausalLM"), "{refused}");
        // The architecture decides over the repository name; naming none, the name does.
        zamba.hf = Some("Zyphra/Zamba2-7B-instruct".into());
        zamba.architecture = Some("LlamaForCausalLM".into());
        assert_eq!(pp_refusal(&zamba, 2), None);
        zamba.architecture = None;
        assert!(pp_refusal(&zamba, 2).is_some());
    }

    #[test]
    fn tp_must_divide_the_kv_heads_or_be_a_multiple_of_them() {
        // Qwen3.5-27B: 24 query heads, 4 KV heads, 16/48 linear key/value heads.
        let q = model("qwen3_5_27b");
        assert!(tp_refusal(&q, 2).is_none());
        assert!(tp_refusal(&q, 4).is_none());
        assert!(tp_refusal(&q, 8).is_none());
        // tp 6 ≥ 4 KV heads but 6 % 4 ≠ 0; tp 3 < 4 and 4 % 3 ≠ 0.
        let (code, why) = tp_refusal(&q, 6).unwrap();
        assert_eq!(code, Code::HeadsNotDivisible);
        assert!(why.contains("4 KV heads"), "{why}");
        assert!(tp_refusal(&q, 3).unwrap().1.contains("KV heads"));
        assert_eq!(valid_tp_sizes(&q, 16), vec![1, 2, 4, 8]);
    }

    #[test]
    fn linear_and_mamba_heads_split_over_tp() {
        // Query and KV heads that split over tp 16, 16 linear key heads that do, 40 value
        // heads that do not.
        let mut q = model("qwen3_5_27b");
        q.heads = 32;
        q.kv_heads = 16;
        q.detail.linear.as_mut().unwrap().value_heads = 40;
        let why = tp_refusal(&q, 16).unwrap().1;
        assert!(why.contains("40 value heads"), "{why}");
        // Nemotron 3 Nano: 64 Mamba heads, 8 groups, 2 KV heads.
        let n = model("nemotron_3_nano");
        assert!(tp_refusal(&n, 8).is_none());
        let mut n16 = n.clone();
        n16.heads = 64;
        let why = tp_refusal(&n16, 16).unwrap().1;
        assert!(why.contains("num_groups"), "{why}");
    }

    #[test]
    fn group_quantized_shards_hold_whole_groups() {
        // Llama 3.1 8B as AWQ (group 128): intermediate 14,336 = 112 × 128. tp 4 gives
        // 3,584 = 28 groups; tp 8 1,792 = 14 groups. A group of 1,024: tp 8's 1,792 inputs
        // are not whole groups, tp 2's 7,168 are (and the 4,096-wide attention output's 2,048).
        let mut m = model("llama_3_1_8b");
        m.weights = "awq".into();
        m.prequantized = true;
        assert!(tp_refusal(&m, 8).is_none());
        m.detail.quant_group = 1024;
        let (code, why) = tp_refusal(&m, 8).unwrap();
        assert_eq!(code, Code::WidthNotDivisible);
        assert!(why.contains("group_size=1024"), "{why}");
        assert!(tp_refusal(&m, 2).is_none());
    }

    #[test]
    fn expert_width_splits_over_tp_times_dp_without_ep() {
        let mut m = model("qwen3_30b_a3b");
        m.moe_intermediate = 768 + 4; // 772 = 4 × 193
        let l = Layout {
            tp: 2,
            dp: 4,
            ..Layout::default()
        };
        assert!(moe_refusal(&m, &l).unwrap().contains("772"));
        assert!(moe_refusal(&m, &Layout { ep: true, ..l }).is_none());
        assert!(moe_refusal(&m, &Layout { dp: 2, ..l }).is_none());
    }

    #[test]
    fn dcp_is_capped_at_tp_over_kv_heads() {
        // Llama 3.1 70B: 64 heads, 8 KV heads. tp 16 allows dcp ≤ 2.
        let m = model("llama_3_1_70b");
        let l = |tp, dcp| Layout {
            tp,
            dcp,
            ..Layout::default()
        };
        assert!(dcp_refusal(&m, &l(16, 2)).is_none());
        let why = dcp_refusal(&m, &l(16, 4)).unwrap().0;
        assert!(why.contains("maximum supported value (2)"), "{why}");
        assert!(dcp_refusal(&m, &l(8, 2))
            .unwrap()
            .0
            .contains("greater than"));
        // 8 query heads per KV head: dcp 16 at tp 128 passes the cap (16) but 8 % 16 ≠ 0.
        assert!(dcp_refusal(&m, &l(128, 16))
            .unwrap()
            .0
            .contains("query heads per KV head"));
        // With PCP, dcp must be 1, pcp or tp × pcp.
        let p = Layout {
            tp: 16,
            pcp: 2,
            dcp: 4,
            ..Layout::default()
        };
        assert!(dcp_refusal(&m, &p).unwrap().0.contains("PCP"));
        // Sliding-window layers refuse DCP.
        let mut g = model("gpt_oss_120b");
        g.kv_heads = 1;
        g.heads = 64;
        assert!(dcp_refusal(&g, &l(8, 2))
            .unwrap()
            .0
            .contains("sliding window"));
    }

    /// gpt-oss asserts its experts' width (2,880) divides the world size, `ep` or not: dp
    /// 7 is refused with `ep`, dp 6 (2,880 / 6 = 480) and tp 8 are not.
    #[test]
    fn gpt_oss_width_divides_the_world_size() {
        let m = model("gpt_oss_120b");
        let l = |tp, dp| Layout {
            tp,
            dp,
            ep: true,
            ..Layout::default()
        };
        let why = moe_refusal(&m, &l(1, 7)).expect("dp 7 is refused");
        assert!(why.contains("world size 7"), "{why}");
        assert!(moe_help(&m, &l(1, 7)).contains("divides 2880"));
        assert!(moe_refusal(&m, &l(1, 6)).is_none());
        assert!(moe_refusal(&m, &l(8, 1)).is_none());
        assert!(
            moe_refusal(&m, &l(8, 16)).is_some(),
            "128 does not divide 2,880"
        );
    }

    #[test]
    fn block_fp8_shared_experts_split_over_tp_unless_ep() {
        // DeepSeek-V3 (blocks 128 × 128) with a 1,536-wide shared expert: tp 8 gives 192
        // inputs per rank, 1.5 blocks; with `ep` and tp > 1 vLLM runs it unsplit.
        let mut m = model("deepseek_v3");
        m.detail.shared_expert_intermediate = 1536;
        let l = Layout {
            tp: 8,
            ..Layout::default()
        };
        let why = moe_refusal(&m, &l).unwrap();
        assert!(
            why.contains("= 192") && why.contains("shared experts"),
            "{why}"
        );
        assert!(moe_refusal(&m, &Layout { ep: true, ..l }).is_none());
        // Without blocks (per-tensor FP8) nothing is refused.
        m.detail.weight_block.clear();
        assert!(moe_refusal(&m, &l).is_none());
    }
}
