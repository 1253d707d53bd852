//! E0803: the deployments no attention backend of vLLM 0.33 serves on their GPU, so the
//! engine stops at start-up: a block size the model's backends reject, sparse MLA below
//! Hopper, DeepSeek V4 with a 16-bit cache where FlashMLA needs FP8, an FP8 cache below
//! SM89 where only Triton serves the model. What each kind of attention takes is
//! `analysis::attention_backend`'s.

use super::*;
use crate::analysis::attention_backend::{default_block_size, AttentionKind};

/// E0803 as a finding: at most one, the first refusal.
pub(super) fn attention_backends(s: &Scenario, out: &mut Vec<Finding>) {
    if let Some(r) = refusal(s) {
        out.push(Finding::new(
            Code::NoAttentionBackend,
            r.option.map_or(Anchor::Model, Anchor::Engine),
            r.message,
            "vLLM stops at start-up",
            Some(r.help),
        ));
    }
}

/// A deployment no attention backend of vLLM 0.33 serves: what vLLM says, and why.
#[derive(Debug, Clone, PartialEq)]
struct BackendRefusal {
    pub message: String,
    pub help: String,
    /// The engine option at fault (`block_size`), or `None` for the model on this GPU.
    pub option: Option<&'static str>,
}

fn is_fp8(kv_cache: &str) -> bool {
    kv_cache.starts_with("fp8")
}

/// Why no attention backend of vLLM 0.33 can serve the scenario on its GPU, or `None`
/// (also where the GPU's compute capability is unknown, and on ROCm).
fn refusal(s: &Scenario) -> Option<BackendRefusal> {
    let m = &s.model;
    let gpu = &s.topology.gpu;
    if gpu.rocm {
        return None;
    }
    let kind = AttentionKind::of(m);
    let cc = gpu.compute_capability()?;
    let major = cc.floor();
    // A block size every backend the model needs takes. Hybrid models' sizes are
    // realigned by vLLM itself (`_align_hybrid_block_size`, which may override the user's).
    let block = s.engine.block_size;
    let has_state = m.has_recurrent_layers();
    let multiple = kind.block_multiple();
    if !has_state && !block.is_multiple_of(multiple) {
        let which = match kind {
            AttentionKind::Compressed => "DeepSeek V4's sparse attention and its indexer take 256 only (DeepseekV4SparseMLABackend, DeepseekV4IndexerBackend)",
            AttentionKind::SparseMla => "the sparse-attention indexer takes 64 (DeepseekV32IndexerBackend) and the sparse MLA backends multiples of 64",
            _ => "every attention backend takes multiples of 16 (TRITON_ATTN and TRITON_MLA: MultipleOf(16))",
        };
        return Some(BackendRefusal {
            message: format!(
                "No common block size for {block}: {which}, so vLLM stops at start-up (v1/worker/utils.py:select_common_block_size)"
            ),
            help: format!(
                "write `block_size = {}` or leave it unset (dic then writes {})",
                next_multiple(block, multiple),
                default_block_size(m)
            ),
            option: Some("block_size"),
        });
    }
    if kind == AttentionKind::SparseMla && major < 9.0 {
        return Some(BackendRefusal {
            message: format!(
                "No valid attention backend found for {} (compute capability {cc:.1}): this model's sparse attention (MLA with the indexer) runs only on FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE and FLASHINFER_MLA_SPARSE (compute capability 9.0, 10.x or 12.x), so vLLM stops at start-up (platforms/cuda.py:CudaPlatform.get_attn_backend_cls)",
                gpu.name
            ),
            help: "serve it on Hopper or Blackwell GPUs".into(),
            option: None,
        });
    }
    // DeepSeek V4's layers pick their attention themselves, not through the generic
    // selector: FlashMLA's sparse kernels on 9.x and 10.x, FlashInfer's SM120 kernel on
    // 12.x; elsewhere the kernels are not built, and the FP8 output projection runs on
    // DeepGEMM (SM90+).
    if kind == AttentionKind::Compressed && ![9.0, 10.0, 12.0].contains(&major) {
        return Some(BackendRefusal {
            message: format!(
                "DeepSeek V4's attention has no kernel on {} (compute capability {cc:.1}): vLLM runs it only as FlashMLA's sparse backend on 9.x and 10.x (DeepseekV4SparseMLABackend.supports_compute_capability; v1/attention/ops/flashmla.py: \"FlashMLA Sparse is only supported on Hopper and Blackwell DC devices\") or FlashInfer's SM120 kernel on 12.x (models/deepseek_v4/nvidia/model.py:_select_dsv4_attn_cls), with its FP8 output projection on DeepGEMM (SM90+), so the engine fails in start-up's profiling run",
                gpu.name
            ),
            help: "serve it on Hopper or Blackwell GPUs".into(),
            option: None,
        });
    }
    if kind == AttentionKind::Compressed
        && (major == 9.0 || major == 10.0)
        && m.kv_cache != "auto"
        && !is_fp8(&m.kv_cache)
    {
        return Some(BackendRefusal {
            message: format!(
                "DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {}: on compute capability {cc:.1} DeepSeek V4 attends through FlashMLA, whose cache is FP8 (models/deepseek_v4/attention.py:_resolve_dsv4_kv_cache_dtype)",
                m.kv_cache
            ),
            help: "write `kv_cache = fp8` or leave it `auto` (vLLM then takes FP8)".into(),
            option: None,
        });
    }
    // Below SM89 vLLM's Triton backends refuse an FP8 cache, and these models have no
    // other backend there: MLA (TRITON_MLA is the only MLA backend below Hopper), Gemma
    // 4's mixed head sizes (TRITON_ATTN forced without FA4,
    // `model_executor/models/config.py:Gemma4Config`), gpt-oss's attention sinks
    // (FlashAttention 2 has none, FlashInfer's need SM90+).
    if is_fp8(&m.kv_cache) && cc < 8.9 {
        let class = crate::analysis::vllm_class::vllm_class(m).map(|c| c.class);
        let triton_only = match kind {
            AttentionKind::Mla => Some("TRITON_MLA, the only MLA backend below Hopper"),
            AttentionKind::Standard => match class {
                Some("Gemma4ForConditionalGeneration") => Some(
                    "TRITON_ATTN, which vLLM forces for Gemma 4's mixed head sizes without FlashAttention 4",
                ),
                Some("GptOssForCausalLM") => {
                    Some("TRITON_ATTN, the only backend with attention sinks below Hopper")
                }
                _ => None,
            },
            _ => None,
        };
        if let Some(backend) = triton_only {
            return Some(BackendRefusal {
                message: format!(
                    "FP8 KV cache is not supported by the Triton attention backend on {} (compute capability {cc:.1}); native FP8 (fp8e4nv) requires SM89+: this model attends through {backend}",
                    gpu.name
                ),
                help: "write `kv_cache = auto` (the model's 16-bit dtype), or serve it on Ada, Hopper or Blackwell GPUs".into(),
                option: None,
            });
        }
    }
    None
}

fn next_multiple(n: u64, of: u64) -> u64 {
    n.div_ceil(of).max(1) * of
}
