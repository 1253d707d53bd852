//! Communication: where each parallel group sits on the topology, and what its
//! collectives cost (α-β model, ../shared/reference/comm-and-hardware.md §2).
//!
//! Ranks are laid out DP × PP × PCP × TP with TP fastest (vLLM's order), one rank per
//! GPU, GPUs numbered node by node: [`rank_placements`] is that placement, computed here
//! once for the report, the NCCL plan and the launch scripts. A group's link is the
//! slowest one it crosses: the scale-up link (NVLink/NVSwitch) inside a node or a
//! rack-scale NVLink domain, PCIe inside a node without one, the scale-out fabric across
//! nodes. vLLM's TP all-reduces are timed as vLLM runs them ([`vllm_all_reduce_time`]):
//! its custom kernel for small messages, the NVSwitch's own reduction for large ones on
//! 4 or more GPUs ([`nvls_all_reduce`]), a ring otherwise.
//!
//! Here: the vocabulary the IR and the runtime share ([`Collective`], [`DType`],
//! [`GroupKind`]) and what one step moves ([`step_comm`], [`moe_comm`]). The placements
//! are in `placement`, one collective's cost in `collective_time`; both are re-exported
//! here, so `comm::…` names them all.

mod collective_time;
mod placement;

pub use collective_time::{
    all_reduce_wire_bytes, collective_time, custom_all_reduce_latency, deepep_fit,
    nccl_nvlink_all_reduce, nvls_all_reduce, vllm_all_reduce_time, LinkFit,
    CUSTOM_ALL_REDUCE_LATENCY_BLACKWELL, CUSTOM_ALL_REDUCE_LATENCY_HOPPER,
    CUSTOM_ALL_REDUCE_MAX_BYTES, DEEPEP_FITS, NCCL_BASE_LATENCY, NCCL_NVLINK_ALL_REDUCE_BLACKWELL,
    NCCL_NVLINK_ALL_REDUCE_HOPPER, NVLS_LATENCY,
};
pub use placement::{
    dcp_groups, dp_group, ep_groups, ep_placement, node_of, pcp_groups, place, pp_pairs,
    pp_placement, rank_of, rank_placements, stage_gpus, tp_groups, tp_placement, Placement,
    RankPlacement,
};

use super::scenario::Scenario;
use crate::program::LinkType;
use serde::Serialize;

/// Achievable fraction of a link's nominal bandwidth for large collectives. Sources:
/// nvbandwidth on 8×H200 measured 396/450 GB/s NVLink (88%) and 55/63 GB/s PCIe 5
/// (88%); NCCL's own topology constants give 370.8/450 (82%) for H100 NVLink
/// (reference §2.3, §3). 0.8 is the rounded lower end.
pub const LINK_EFFICIENCY: f64 = 0.8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    SendRecv,
    Broadcast,
}

impl Collective {
    pub const ALL: [Collective; 6] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllToAll,
        Collective::SendRecv,
        Collective::Broadcast,
    ];

    /// The name in `nccl/plan.toml` (the runtime parses it back with [`Collective::parse`]).
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::AllToAll => "all_to_all",
            Collective::SendRecv => "send_recv",
            Collective::Broadcast => "broadcast",
        }
    }

    pub fn parse(name: &str) -> Option<Collective> {
        Collective::ALL.into_iter().find(|c| c.name() == name)
    }

    /// α terms of the bandwidth-optimal algorithm on `p` ranks (ring steps for AllReduce,
    /// AllGather and ReduceScatter, pairwise rounds for All-to-All, one message for
    /// Send/Recv, a binomial tree for Broadcast): `t = steps·α + factor·S/B`.
    pub fn latency_steps(self, p: u64) -> f64 {
        let pf = p.max(1) as f64;
        match self {
            Collective::AllReduce => 2.0 * (pf - 1.0),
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => pf - 1.0,
            Collective::SendRecv => 1.0,
            Collective::Broadcast => pf.log2().ceil().max(1.0),
        }
    }

    /// The factor on `S/B` in the same model (S as the plan's `bytes`, nccl-tests' S).
    pub fn bandwidth_factor(self, p: u64) -> f64 {
        let pf = p.max(1) as f64;
        match self {
            Collective::AllReduce => 2.0 * (pf - 1.0) / pf,
            Collective::AllGather | Collective::ReduceScatter => (pf - 1.0) / pf,
            // pairwise exchange: (p−1)α + S·β (reference §2.2)
            Collective::AllToAll | Collective::SendRecv | Collective::Broadcast => 1.0,
        }
    }

    /// nccl-tests' bus-bandwidth factor (busbw = algbw × factor, reference §2.1). Equal to
    /// [`Collective::bandwidth_factor`] except for All-to-All, where nccl-tests uses (p−1)/p.
    pub fn busbw_factor(self, p: u64) -> f64 {
        let pf = p.max(1) as f64;
        match self {
            Collective::AllToAll => (pf - 1.0) / pf,
            c => c.bandwidth_factor(p),
        }
    }

    /// `steps·α + factor·S/B` on a link with latency `alpha` (s) and bandwidth `b` (B/s).
    pub fn alpha_beta(self, bytes: f64, p: u64, alpha: f64, b: f64) -> f64 {
        self.latency_steps(p) * alpha + self.bandwidth_factor(p) * bytes / b
    }
}

/// The placements a step's communication uses, computed once per scenario.
#[derive(Debug, Clone)]
pub struct CommContext {
    pub tp: Placement,
    /// The group a MoE layer's tokens move in across DP ranks ([`ep_groups`]), when an
    /// MoE model has DP > 1.
    pub ep: Option<Placement>,
    pub pp: Option<Placement>,
    /// Expected distinct ranks among a token's top-k experts spread evenly over the MoE
    /// group (fixed per scenario, used by every step's all-to-all).
    pub ep_distinct_ranks: f64,
}

impl CommContext {
    pub fn new(s: &Scenario) -> CommContext {
        let l = &s.layout;
        CommContext {
            tp: tp_placement(s),
            // The MoE group couples the DP ranks (vLLM flattens TP × DP for the experts);
            // with one DP rank it is the TP group, whose AllReduce already combines.
            ep: (s.model.experts > 0 && l.dp > 1).then(|| ep_placement(s)),
            pp: if l.pp > 1 { pp_placement(s) } else { None },
            ep_distinct_ranks: {
                let pf = (l.tp.max(1) * l.dp.max(1)) as f64;
                let k = s.model.experts_per_token.max(1) as f64;
                pf * (1.0 - (1.0 - 1.0 / pf).powf(k))
            },
        }
    }
}

/// Activations (and the tensors collectives move) travel in bf16: 2 bytes an element.
pub const ACTIVATION_DTYPE: DType = DType::Bf16;
pub const ACTIVATION_DTYPE_BYTES: f64 = ACTIVATION_DTYPE.size() as f64;

/// Element types a collective moves: the one vocabulary the IR, `nccl/plan.toml` and the
/// runtime share (serialized as `bf16`, `fp32`, …; the runtime also reads the aliases
/// [`DType::parse`] accepts).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
pub enum DType {
    #[serde(rename = "fp32")]
    F32,
    #[serde(rename = "bf16")]
    Bf16,
    #[serde(rename = "fp16")]
    F16,
    #[serde(rename = "fp8")]
    Fp8,
    #[serde(rename = "int32")]
    I32,
}

impl DType {
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s {
            "fp32" | "f32" | "float32" => DType::F32,
            "bf16" | "bfloat16" => DType::Bf16,
            "fp16" | "f16" | "float16" => DType::F16,
            "fp8" | "fp8_e4m3" | "e4m3" => DType::Fp8,
            "int32" | "i32" => DType::I32,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::Bf16 | DType::F16 => 2,
            DType::Fp8 => 1,
        }
    }

    /// The name in `nccl/plan.toml`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "fp32",
            DType::Bf16 => "bf16",
            DType::F16 => "fp16",
            DType::Fp8 => "fp8",
            DType::I32 => "int32",
        }
    }
}

/// The kind of a communicator group: the one vocabulary the analysis, the IR, the nccl
/// target and the runtime share (serialized as `tp`, `pp`, …).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum GroupKind {
    Tp,
    Pp,
    Ep,
    Dcp,
    Pcp,
    Dp,
}

impl GroupKind {
    pub const ALL: [GroupKind; 6] = [
        GroupKind::Tp,
        GroupKind::Pp,
        GroupKind::Ep,
        GroupKind::Dcp,
        GroupKind::Pcp,
        GroupKind::Dp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            GroupKind::Tp => "tp",
            GroupKind::Pp => "pp",
            GroupKind::Ep => "ep",
            GroupKind::Dcp => "dcp",
            GroupKind::Pcp => "pcp",
            GroupKind::Dp => "dp",
        }
    }

    pub fn parse(s: &str) -> Option<GroupKind> {
        GroupKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Whether the schedule runs collectives on groups of this kind (the `dp` group only
    /// lists each replica's first rank; it gets no communicator).
    pub fn has_traffic(self) -> bool {
        self != GroupKind::Dp
    }
}

impl std::fmt::Display for GroupKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One line of a step's communication: a collective on a group, how often, how big.
#[derive(Debug, Clone, Serialize)]
pub struct CommItem {
    pub group: GroupKind,
    pub collective: Collective,
    pub count: u64,
    pub bytes: f64,
    pub ranks: u64,
    pub link: std::sync::Arc<str>,
    /// Seconds for all `count` of them, as vLLM runs them.
    pub time: f64,
    /// Seconds for all of them with NCCL, what `dic run` replays: `time`, except where
    /// vLLM runs its own kernel (the custom all-reduce).
    pub nccl_time: f64,
    /// The α-β figures `nccl_time` came from (effective bytes/s, seconds) and the link's
    /// type, so `dic run` predicts the same call at another size.
    #[serde(skip)]
    pub fabric: LinkFigures,
}

/// A placement's figures for one collective: what [`collective_time`] reads of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkFigures {
    pub link_type: LinkType,
    /// Effective bytes/s per rank per direction.
    pub bandwidth: f64,
    /// Seconds per message (α).
    pub latency: f64,
}

impl LinkFigures {
    /// A placement with these figures, for [`collective_time`].
    pub fn placement(&self, size: u64) -> Placement {
        Placement {
            size,
            spans_nodes: false,
            within_scale_up_domain: true,
            link_name: std::sync::Arc::from(""),
            link_type: self.link_type,
            bandwidth: self.bandwidth,
            latency: self.latency,
        }
    }
}

impl CommItem {
    /// `count` NCCL calls of `collective` on `ranks` ranks placed at `at`.
    fn nccl(
        group: GroupKind,
        collective: Collective,
        count: u64,
        bytes: f64,
        ranks: u64,
        at: &Placement,
    ) -> CommItem {
        let time = count as f64 * collective_time(collective, bytes, ranks, at);
        CommItem {
            group,
            collective,
            count,
            bytes,
            ranks,
            link: at.link_name.clone(),
            time,
            nccl_time: time,
            fabric: LinkFigures {
                link_type: at.link_type,
                bandwidth: at.bandwidth,
                latency: at.latency,
            },
        }
    }
}

/// Whether the MoE layers exchange tokens through DeepEP's all-to-all
/// (`engine = vllm { all2all_backend = deepep_… }` with `ep`) rather than vLLM 0.33's
/// default all-gather and reduce-scatter.
pub fn uses_deepep(s: &Scenario) -> bool {
    s.layout.ep && s.engine.all2all_backend.as_deref().is_some_and(is_deepep)
}

/// Bytes DeepEP's dispatch sends per token: the hidden state in 16 bits, or, where the
/// low-latency kernels dispatch in FP8 (vLLM's `all2all_utils.maybe_make_prepare_finalize`:
/// `use_fp8_dispatch` when the experts are FP8 in DeepEP's 128 × 128 blocks, as the
/// pre-quantized FP8 checkpoints store them), one byte per channel and an fp32 scale per
/// 128 channels.
pub fn deepep_dispatch_bytes(s: &Scenario) -> f64 {
    let m = &s.model;
    let hidden = m.hidden as f64;
    let fp8_experts = m.format_of(crate::program::Component::Experts, None) == "fp8"
        && (m.prequantized || m.dtype == "fp8");
    if s.engine.all2all_backend.as_deref() == Some("deepep_low_latency") && fp8_experts {
        hidden + (m.hidden / 128) as f64 * 4.0
    } else {
        hidden * ACTIVATION_DTYPE_BYTES
    }
}

/// A `deepep_*` value of `all2all_backend`.
pub fn is_deepep(backend: &str) -> bool {
    backend.starts_with("deepep")
}

/// The expert layers' traffic across DP ranks, as vLLM 0.33's `--all2all-backend` moves
/// it. With one DP rank there is none: the MoE group is the TP group, and the layer's TP
/// AllReduce combines the experts' outputs. With DP > 1, vLLM's default
/// (`allgather_reducescatter`, `AgRsAll2AllManager`) gathers every DP rank's tokens — the
/// hidden states with their top-k ids (int32) and weights (fp32) — to every rank of the
/// DP group and reduce-scatters the expert outputs back, with or without EP. DeepEP (a
/// `deepep_*` backend with EP) instead sends each rank's share of the replica's tokens
/// (`tokens / tp`) only to the distinct ranks that hold their top-k experts and back
/// (dispatch and combine, All-to-All).
pub fn moe_comm(s: &Scenario, cx: &CommContext, tokens: f64, moe_layers: u64) -> Vec<CommItem> {
    moe_comm_exchanged(
        s,
        cx,
        tokens,
        tokens * s.layout.dp.max(1) as f64,
        moe_layers,
    )
}

/// [`moe_comm`] where the ranks do not all hold `tokens`: the slowest rank holds `tokens`
/// (DeepEP's dispatch waits on its sends) and the all-gather moves `exchanged` tokens over
/// the DP group (vLLM's `all_gatherv` of the ranks' sizes, padded to the largest only in
/// steps that run as CUDA graphs: `perf::StepPrefill`).
pub fn moe_comm_exchanged(
    s: &Scenario,
    cx: &CommContext,
    tokens: f64,
    exchanged: f64,
    moe_layers: u64,
) -> Vec<CommItem> {
    let (m, l) = (&s.model, &s.layout);
    let Some(group) = cx.ep.as_ref().filter(|_| moe_layers > 0 && l.dp > 1) else {
        return Vec::new();
    };
    let act = ACTIVATION_DTYPE_BYTES;
    let hidden = m.hidden as f64;
    if uses_deepep(s) {
        let p = l.tp.max(1) * l.dp;
        let pf = p as f64;
        let local = tokens / l.tp.max(1) as f64;
        // Expected distinct ranks among a token's k experts, spread evenly over p ranks.
        let distinct = cx.ep_distinct_ranks;
        // Per call, dispatch and combine averaged: the combine returns bf16 outputs; the
        // dispatch sends bf16 too, or FP8 with DeepEP's per-128 fp32 scales ([`deepep_dispatch_bytes`]).
        let per_token = (deepep_dispatch_bytes(s) + hidden * act) / 2.0;
        let bytes = local * distinct * per_token * (pf - 1.0) / pf;
        // dispatch and combine
        let mut item = CommItem::nccl(
            GroupKind::Ep,
            Collective::AllToAll,
            2 * moe_layers,
            bytes,
            p,
            group,
        );
        let backend = s.engine.all2all_backend.as_deref().unwrap_or_default();
        if let Some([dispatch, combine]) =
            deepep_fit(s.topology.gpu.architecture.as_deref(), backend)
                .filter(|_| group.within_one_nvlink_node())
        {
            item.time = moe_layers as f64
                * (dispatch.time(bytes, group.bandwidth) + combine.time(bytes, group.bandwidth));
        }
        vec![item]
    } else {
        let gathered_tokens = exchanged;
        let routing = m.experts_per_token.max(1) as f64 * (4.0 + 4.0);
        vec![
            CommItem::nccl(
                GroupKind::Ep,
                Collective::AllGather,
                moe_layers,
                gathered_tokens * (hidden * act + routing),
                l.dp,
                group,
            ),
            CommItem::nccl(
                GroupKind::Ep,
                Collective::ReduceScatter,
                moe_layers,
                gathered_tokens * hidden * act,
                l.dp,
                group,
            ),
        ]
    }
}

/// What one PP stage's layers hold, for counting collectives: each mixer and each FFN
/// ends in a TP AllReduce (a Nemotron-H block has one of the two, a transformer layer
/// both), each attention layer gathers over DCP/PCP, each MoE layer exchanges tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageBlocks {
    pub layers: u64,
    /// Layers with a mixer (attention, linear attention, Mamba).
    pub mixers: u64,
    /// Layers with an FFN (dense or MoE).
    pub ffns: u64,
    /// Layers with attention over a KV cache (full, sliding, compressed).
    pub attention: u64,
    pub moe: u64,
}

impl StageBlocks {
    pub fn of(m: &crate::program::Model, layers: std::ops::Range<u64>) -> StageBlocks {
        use crate::program::{Ffn, Mixer};
        let mut b = StageBlocks::default();
        for l in layers {
            let k = m.layer(l);
            b.layers += 1;
            b.mixers += u64::from(k.mixer != Mixer::None);
            b.ffns += u64::from(k.ffn != Ffn::None);
            b.attention += u64::from(!matches!(
                k.mixer,
                Mixer::None | Mixer::Linear | Mixer::Mamba
            ));
            b.moe += u64::from(k.ffn == Ffn::Moe);
        }
        b
    }
}

/// Communication of one forward pass of `tokens` tokens through one PP stage holding
/// `blocks`, plus the hand-off to the next stage.
pub fn step_comm(
    s: &Scenario,
    cx: &CommContext,
    tokens: f64,
    blocks: &StageBlocks,
    last_stage: bool,
) -> Vec<CommItem> {
    let exchanged = tokens * s.layout.dp.max(1) as f64;
    step_comm_exchanged(s, cx, tokens, exchanged, blocks, last_stage)
}

/// [`step_comm`] with the MoE exchange moving `exchanged` tokens over the DP group
/// ([`moe_comm_exchanged`]).
pub fn step_comm_exchanged(
    s: &Scenario,
    cx: &CommContext,
    tokens: f64,
    exchanged: f64,
    blocks: &StageBlocks,
    last_stage: bool,
) -> Vec<CommItem> {
    let layers = blocks.attention;
    let m = &s.model;
    let l = &s.layout;
    let act = ACTIVATION_DTYPE_BYTES;
    let mut items = Vec::new();
    if l.tp > 1 {
        let tp = &cx.tp;
        let bytes = tokens * m.hidden as f64 * act;
        // Megatron TP: attention out-projection and MLP down-projection end in an AllReduce.
        let count = blocks.mixers + blocks.ffns;
        let mut item = CommItem::nccl(GroupKind::Tp, Collective::AllReduce, count, bytes, l.tp, tp);
        item.time = count as f64
            * vllm_all_reduce_time(bytes, l.tp, tp, s.topology.gpu.architecture.as_deref());
        items.push(item);
    }
    items.extend(moe_comm_exchanged(s, cx, tokens, exchanged, blocks.moe));
    if l.dcp > 1 {
        // Decode context parallelism: each rank attends over its shard of the KV cache;
        // partial outputs and log-sum-exps are gathered over the DCP group every layer.
        let tp = &cx.tp;
        let bytes = tokens * m.hidden as f64 * act / l.tp.max(1) as f64 * l.dcp as f64;
        items.push(CommItem::nccl(
            GroupKind::Dcp,
            Collective::AllGather,
            layers,
            bytes,
            l.dcp,
            tp,
        ));
    }
    if l.pcp > 1 {
        // Prefill context parallelism: keys and values of the step's tokens circulate
        // around the PCP ranks every layer (ring attention).
        let tp = &cx.tp;
        let kv = (m.kv_heads / l.tp.max(1)).max(1) as f64 * m.head_dim as f64;
        let bytes = tokens * 2.0 * kv * act;
        items.push(CommItem::nccl(
            GroupKind::Pcp,
            Collective::AllGather,
            layers,
            bytes,
            l.pcp,
            tp,
        ));
    }
    if l.pp > 1 && !last_stage {
        if let Some(pp) = &cx.pp {
            // hidden_states + residual (vLLM IntermediateTensors)
            let bytes = 2.0 * tokens * m.hidden as f64 * act / l.tp.max(1) as f64;
            items.push(CommItem::nccl(
                GroupKind::Pp,
                Collective::SendRecv,
                1,
                bytes,
                2,
                pp,
            ));
        }
    }
    items
}
