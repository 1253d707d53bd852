//! DeepEP in vLLM 0.33: the communication buffers each GPU of a wide-EP deployment
//! allocates for DeepEP's all-to-all (counted by the memory model beside the other
//! non-torch memory), and the batch limits vLLM picks when a layout runs DeepEP's
//! low-latency kernels.
//!
//! Sources: `vllm/distributed/device_communicators/all2all.py`
//! (`DeepEPHTAll2AllManager._make_all2all_kwargs`, `DeepEPLLAll2AllManager._make_all2all_kwargs`),
//! `vllm/model_executor/layers/fused_moe/all2all_utils.py` (the low-latency handle is sized
//! for `moe.max_num_tokens` = `max_num_batched_tokens` tokens per DP rank), DeepEP's
//! `csrc/config.hpp` (`LowLatencyLayout`, `get_low_latency_rdma_size_hint`), and
//! `vllm/engine/arg_utils.py:_set_default_max_num_seqs_and_batched_tokens_args` with
//! `SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP`.

use super::comm::uses_deepep;
use super::scenario::{BatchLimits, Scenario};

/// `VLLM_DEEPEP_BUFFER_SIZE_MB`'s default (`vllm/envs.py`): 1024 MiB. Both DeepEP managers
/// allocate this many NVLink (IPC) bytes; the high-throughput one as many RDMA bytes when
/// its EP group spans hosts.
pub const DEEPEP_BUFFER_BYTES: f64 = 1024.0 * 1024.0 * 1024.0;

pub use super::scenario::BATCHED_DP_TOKEN_BUDGET;

/// DeepEP's alignment of the RDMA size hint (`NUM_BUFFER_ALIGNMENT_BYTES`).
const ALIGNMENT: u64 = 128;

/// Bytes of the RDMA buffer DeepEP's low-latency mode registers on each GPU
/// (`Buffer.get_low_latency_rdma_size_hint`, `LowLatencyLayout` in `csrc/config.hpp`):
/// two (odd/even) send buffers, two receive buffers and two signalling buffers, where a
/// dispatch message is a 16-byte header and the token in 16 bits (or in FP8 with one fp32
/// scale per 128 channels, whichever is larger) and a combine message the token in 16
/// bits with a bf16×2 min/max per 128 channels. The receive buffers hold a message from
/// every rank for every expert: `experts × tokens` of them, which makes the buffer about
/// 4 × experts × tokens × 2 × hidden bytes.
pub fn low_latency_rdma_bytes(tokens: u64, hidden: u64, experts: u64) -> u64 {
    let scales = hidden / 128;
    let dispatch_msg = 16 + (hidden * 2).max(hidden + scales * 4);
    let combine_msg = scales * 4 + hidden * 2;
    let send = (tokens * dispatch_msg).max(experts * tokens * combine_msg);
    let recv = (experts * tokens * dispatch_msg).max(experts * tokens * combine_msg);
    let signalling = (experts * 4).div_ceil(ALIGNMENT) * ALIGNMENT;
    let total = 2 * send + 2 * recv + 2 * signalling;
    (total + ALIGNMENT) / ALIGNMENT * ALIGNMENT
}

/// DeepEP's buffers on one GPU, bytes (0 where the layout runs no DeepEP all-to-all: no
/// `deepep_*` backend with EP, one DP rank, or a dense model). Low-latency: the NVLink
/// bytes and the RDMA hint for `max_num_batched_tokens` tokens per rank. High-throughput:
/// the NVLink bytes, and as many RDMA bytes when the EP group spans hosts.
pub fn deepep_buffer_bytes(s: &Scenario) -> f64 {
    let (m, l) = (&s.model, &s.layout);
    if !uses_deepep(s) || l.dp <= 1 || !m.is_moe() {
        return 0.0;
    }
    if s.engine.all2all_backend.as_deref() == Some("deepep_low_latency") {
        DEEPEP_BUFFER_BYTES
            + low_latency_rdma_bytes(s.engine.max_num_batched_tokens, m.hidden, m.experts) as f64
    } else {
        let spans_hosts = l.tp.max(1) * l.dp > s.topology.gpus_per_node;
        DEEPEP_BUFFER_BYTES * if spans_hosts { 2.0 } else { 1.0 }
    }
}

/// Why vLLM 0.33 has no kernel for the scenario's experts in the batched activation
/// format that DeepEP low-latency (and NIXL EP) hand the experts with EP and DP > 1
/// (`FusedMoEConfig.use_batched_activation_format`), or `None`: NVFP4 experts run batched
/// only on FlashInfer's CuTe DSL kernel, data-centre Blackwell alone
/// (`FlashInferCuteDSLBatchedExperts`: the SM100 family); Marlin's NVFP4 kernel is not
/// batched and Humming's batched one is not picked with EP, so elsewhere
/// `oracle/nvfp4.py:select_nvfp4_moe_backend` raises "No NvFp4 MoE backend supports the
/// deployment configuration."
pub fn batched_experts_refusal(s: &Scenario) -> Option<String> {
    batched_experts_refusal_with(s, s.engine.all2all_backend.as_deref())
}

/// [`batched_experts_refusal`] with the all-to-all backend `backend`.
fn batched_experts_refusal_with(s: &Scenario, backend: Option<&str>) -> Option<String> {
    let batched =
        matches!(backend, Some("deepep_low_latency" | "nixl_ep")) && s.layout.ep && s.layout.dp > 1;
    let gpu = &s.topology.gpu;
    let sm100 = !gpu.rocm
        && gpu
            .compute_capability()
            .is_some_and(|cc| cc.floor() == 10.0);
    let nvfp4 = s.model.format_of(crate::program::Component::Experts, None) == "nvfp4";
    (batched && nvfp4 && !sm100).then(|| {
        format!(
            "No NvFp4 MoE backend supports the deployment configuration: {} hands the experts their tokens batched per expert, and the only NVFP4 kernel for that format (FlashInfer's CuTe DSL, FlashInferCuteDSLBatchedExperts) runs on data-centre Blackwell (SM100) alone, not on {} (oracle/nvfp4.py:select_nvfp4_moe_backend)",
            backend.unwrap_or_default(),
            gpu.name
        )
    })
}

/// Whether vLLM batches the DP ranks' MoE tokens (`ParallelConfig.use_batched_dp_moe`):
/// DeepEP low-latency with EP and DP > 1.
pub fn batched_dp_moe(s: &Scenario) -> bool {
    s.engine.all2all_backend.as_deref() == Some("deepep_low_latency")
        && s.layout.ep
        && s.layout.dp > 1
}

/// Settles the batch limits for the scenario's layout and backend (after either changes).
pub fn apply_layout_defaults(s: &mut Scenario) {
    if s.engine.batch == BatchLimits::default() {
        return; // limits given whole (calibration rows), nothing to settle
    }
    let (seqs, tokens) = s.engine.batch.settle(batched_dp_moe(s));
    s.engine.max_num_seqs = seqs;
    s.engine.max_num_batched_tokens = tokens;
}

/// Engine options the planner chooses for a layout (issue 39): DeepEP's low-latency
/// all-to-all, where the deployment left it unset a token budget, and dual batch overlap.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EngineChoice {
    pub all2all_backend: String,
    /// `None`: vLLM's default for the backend ([`BATCHED_DP_TOKEN_BUDGET`]).
    pub max_num_batched_tokens: Option<u64>,
    /// Dual batch overlap (`dbo = true`, `--enable-dbo`): one micro-batch's DeepEP
    /// exchange under the other's kernels (`perf::step`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dbo: bool,
}

impl EngineChoice {
    /// Writes the choice into a scenario's engine, as if the deployment had set it.
    pub fn apply(&self, s: &mut Scenario) {
        s.engine.all2all_backend = Some(self.all2all_backend.clone());
        if let Some(t) = self.max_num_batched_tokens {
            s.engine.batch.written_tokens = Some(t);
        }
        s.engine.dbo |= self.dbo;
    }

    /// The options as `engine = vllm { … }` writes them.
    pub fn describe(&self) -> String {
        let mut words = format!("all2all_backend = {}", self.all2all_backend);
        if let Some(t) = self.max_num_batched_tokens {
            words.push_str(&format!(", max_num_batched_tokens = {t}"));
        }
        if self.dbo {
            words.push_str(", dbo = true");
        }
        words
    }

    /// The same options with dual batch overlap on.
    pub fn with_dbo(&self) -> EngineChoice {
        EngineChoice {
            dbo: true,
            ..self.clone()
        }
    }
}

/// Token budgets the planner tries with DeepEP low-latency beside vLLM's default (256):
/// larger budgets carry prompts in fewer steps at the cost of larger buffers (E0506).
const PLANNED_TOKEN_BUDGETS: [u64; 2] = [1024, 2048];

/// The engine options worth trying for `s`'s layout when the deployment left the
/// all-to-all backend unset: wide EP (`ep`, DP > 1, a MoE model) whose EP group spans
/// hosts, inside one multi-node NVLink domain (a GB200 NVL72 rack's trays) or over an
/// RDMA fabric (InfiniBand, RoCE: NVSHMEM's transport between nodes), runs DeepEP
/// low-latency, the backend vLLM's expert-parallel guide gives multi-node decode
/// (`docs/serving/expert_parallel_deployment.md`, "Backend Selection Guide"), at vLLM's
/// default budget and, where the budget is unset, at larger ones.
pub fn wide_ep_engine_options(s: &Scenario) -> Vec<EngineChoice> {
    use crate::program::LinkType;
    let (m, l, t) = (&s.model, &s.layout, &s.topology);
    let ep_ranks = l.tp.max(1) * l.dp;
    let nvlink_domain = t.scale_up_domain > t.gpus_per_node && l.gpus() <= t.scale_up_domain;
    let rdma = t
        .scale_out
        .as_ref()
        .is_some_and(|o| matches!(o.link.link_type, LinkType::Infiniband | LinkType::Roce));
    let nvidia = matches!(
        s.topology.gpu.architecture.as_deref(),
        Some("hopper" | "blackwell")
    );
    // LoRA's experts take vLLM's default all-to-all alone (`lora_rules`).
    let eligible = s.engine.all2all_backend.is_none()
        && s.engine.lora.is_none()
        && batched_experts_refusal_with(s, Some("deepep_low_latency")).is_none()
        && m.is_moe()
        && l.ep
        && l.dp > 1
        && ep_ranks > t.gpus_per_node
        && nvidia
        && (nvlink_domain || rdma);
    if !eligible {
        return Vec::new();
    }
    let backend = "deepep_low_latency".to_string();
    let mut out = vec![EngineChoice {
        all2all_backend: backend.clone(),
        max_num_batched_tokens: None,
        dbo: false,
    }];
    if s.engine.batch.written_tokens.is_none() {
        out.extend(PLANNED_TOKEN_BUDGETS.iter().map(|&b| EngineChoice {
            all2all_backend: backend.clone(),
            max_num_batched_tokens: Some(b),
            dbo: false,
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kimi K2 (hidden 7168, 384 experts): a dispatch message is 16 + 14,336 = 14,352 B,
    /// a combine message 56 × 4 + 14,336 = 14,560 B; send and receive buffers each
    /// 384 × T × 14,560 B, twice each; signalling 2 × 1,536 B.
    #[test]
    fn low_latency_buffer_by_hand() {
        let by_hand = |t: u64| {
            let total = 4 * 384 * t * 14_560 + 2 * 1_536;
            (total + 128) / 128 * 128
        };
        assert_eq!(low_latency_rdma_bytes(8192, 7168, 384), by_hand(8192));
        // 183.2 GB at 8192 tokens, 5.73 GB at vLLM's 256.
        assert_eq!(by_hand(8192), 183_207_201_920);
        assert_eq!(low_latency_rdma_bytes(256, 7168, 384), 5_725_228_160);
    }

    #[test]
    fn batch_limits_follow_vllm() {
        let b = BatchLimits {
            written_seqs: None,
            written_tokens: None,
            default_seqs: 1024,
            default_tokens: 8192,
        };
        assert_eq!(b.settle(false), (1024, 8192));
        assert_eq!(b.settle(true), (256, 256));
        let written = BatchLimits {
            written_tokens: Some(1024),
            ..b
        };
        assert_eq!(written.settle(true), (1024, 1024));
        let small = BatchLimits {
            written_tokens: Some(512),
            ..b
        };
        assert_eq!(small.settle(false), (512, 512));
    }
}
