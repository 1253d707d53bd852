//! Which of vLLM 0.33's attention backends can serve a model's attention: the kinds of
//! attention that decide it, the KV block sizes their backends take and the block size
//! dic writes when the `.dist` sets none. The deployments for which no backend is left
//! (E0803) are `rules::attention`'s.
//!
//! dic always writes `--block-size` (the memory model sizes the cache in those blocks).
//! vLLM then takes the size as the user's: it skips its own choice
//! (`platforms/interface.py:Platform.update_block_size_for_backend`, phase 1), filters
//! the backends by it (`AttentionBackend.supports_block_size`: a multiple of one of
//! `get_supported_kernel_block_sizes()`) in `platforms/cuda.py:CudaPlatform.get_attn_backend_cls`,
//! and `v1/worker/utils.py:select_common_block_size` raises "No common block size for …"
//! where a backend the model needs rejects it. What each kind of attention takes on CUDA,
//! read in the 0.33.0 wheel:
//!
//! - DeepSeek V4's compressed sparse attention (`Mixer::Compressed` layers):
//!   `models/deepseek_v4/sparse_mla.py:DeepseekV4SparseMLABackend`, its FlashInfer variant
//!   (`nvidia/flashinfer_sparse.py`) and the compressed-4 indexer
//!   (`v1/attention/backends/mla/indexer.py:DeepseekV4IndexerBackend`) take 256 alone;
//! - sparse MLA with the indexer (DeepSeek V3.2, GLM-5): the indexer takes 64
//!   (`DeepseekV32IndexerBackend`), the sparse MLA backends multiples of 64 or 32;
//! - dense MLA and every other attention: Triton's backends take any multiple of 16
//!   (`triton_attn.py`, `mla/triton_mla.py`), and the others fall back to them.
//!
//! ROCm's backends differ and are not modelled here: dic keeps its defaults there and
//! refuses nothing on their account.

use crate::layers::Mixer;
use crate::program::{Attention, Model};

/// The attention kinds that decide which backends vLLM 0.33 can pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionKind {
    /// DeepSeek V4's compressed sparse attention (compressed layers, an indexer).
    Compressed,
    /// MLA with the lightning indexer: DeepSeek V3.2, GLM-5.
    SparseMla,
    /// Dense MLA: DeepSeek V3/R1, Kimi K2.
    Mla,
    /// Multi-head, grouped-query and sliding-window attention.
    Standard,
}

impl AttentionKind {
    pub fn of(m: &Model) -> AttentionKind {
        if (0..m.layers).any(|l| matches!(m.layer(l).mixer, Mixer::Compressed(_))) {
            AttentionKind::Compressed
        } else if m.attention == Attention::Mla && m.detail.indexer_head_dim > 0 {
            AttentionKind::SparseMla
        } else if m.attention == Attention::Mla {
            AttentionKind::Mla
        } else {
            AttentionKind::Standard
        }
    }

    /// The block sizes every backend the kind needs takes on CUDA: the multiples of this.
    pub fn block_multiple(self) -> u64 {
        match self {
            AttentionKind::Compressed => 256,
            AttentionKind::SparseMla => 64,
            AttentionKind::Mla | AttentionKind::Standard => 16,
        }
    }
}

/// The KV cache dtype vLLM 0.33 turns a model's `auto` into on a GPU of compute capability
/// `cc` (CUDA; `rocm` for ROCm), where it is not the model's own 16-bit dtype: DeepSeek V4
/// on Hopper and Blackwell attends through FlashMLA, whose `fp8_ds_mla` layout makes
/// `auto` FP8 (`models/deepseek_v4/attention.py:_resolve_dsv4_kv_cache_dtype`; Blackwell
/// RTX's FlashInfer path keeps 16 bits). `None`: `auto` stays the model's dtype.
pub fn auto_kv_cache(m: &Model, cc: Option<f64>, rocm: bool) -> Option<&'static str> {
    let major = cc?.floor();
    (!rocm && AttentionKind::of(m) == AttentionKind::Compressed && (major == 9.0 || major == 10.0))
        .then_some("fp8")
}

/// `m` with its `auto` KV cache resolved as vLLM 0.33 resolves it on the GPU
/// ([`auto_kv_cache`]), so the memory model sizes the cache vLLM allocates and the launch
/// writes the dtype vLLM would pick.
pub fn resolve_auto_kv_cache(m: &mut Model, cc: Option<f64>, rocm: bool) {
    if m.kv_cache == "auto" {
        if let Some(k) = auto_kv_cache(m, cc, rocm) {
            m.kv_cache = k.into();
        }
    }
}

/// The attention backend vLLM 0.33 picks for `m`'s attention with no `--attention-backend`,
/// on CUDA compute capability `cc` at TP `tp` (the first valid one of
/// `platforms/cuda.py:_get_backend_priorities`), where dic can name it; `None` where it
/// cannot say (ROCm, an unknown GPU, Blackwell RTX's standard attention, Gemma 4's mixed
/// head sizes, a GPU with no backend for the model). Two engines that pick different ones
/// cannot hand each other KV blocks: NIXL hashes the name into its handshake.
pub fn default_backend(m: &Model, cc: Option<f64>, rocm: bool, tp: u64) -> Option<&'static str> {
    if rocm {
        return None;
    }
    let major = cc?.floor();
    let fp8 = m.kv_cache.starts_with("fp8");
    let class = super::vllm_class::vllm_class(m).map(|c| c.class);
    Some(match (AttentionKind::of(m), major as u32) {
        (AttentionKind::Compressed, 9 | 10) => "FLASHMLA_SPARSE (DeepSeek V4)",
        (AttentionKind::Compressed, 12) => "FLASHINFER_MLA_SPARSE_DSV4",
        (AttentionKind::SparseMla, 9) => "FLASH_ATTN_MLA_SPARSE",
        // Blackwell: FlashInfer's sparse MLA for an FP8 cache; for a 16-bit one FA4's
        // at 16 heads per rank or fewer, else FlashMLA's.
        (AttentionKind::SparseMla, 10) if fp8 => "FLASHINFER_MLA_SPARSE",
        (AttentionKind::SparseMla, 10) if m.heads / tp.max(1) <= 16 => "FLASH_ATTN_MLA_SPARSE_FA4",
        (AttentionKind::SparseMla, 10) => "FLASHMLA_SPARSE",
        (AttentionKind::SparseMla, 12) => "FLASHINFER_MLA_SPARSE_SM120",
        (AttentionKind::Mla, 10) => "FLASHINFER_MLA",
        (AttentionKind::Mla, 9) => "FLASH_ATTN_MLA",
        (AttentionKind::Mla, 8 | 12) => "TRITON_MLA",
        (AttentionKind::Standard, _) if class == Some("Gemma4ForConditionalGeneration") => {
            return None
        }
        (AttentionKind::Standard, 10) => "FLASHINFER",
        (AttentionKind::Standard, 9) => "FLASH_ATTN",
        // Ampere and Ada: FlashAttention 2, which has neither attention sinks (gpt-oss
        // takes Triton) nor an FP8 cache (FlashInfer then).
        (AttentionKind::Standard, 8) if class == Some("GptOssForCausalLM") => "TRITON_ATTN",
        (AttentionKind::Standard, 8) if fp8 => "FLASHINFER",
        (AttentionKind::Standard, 8) => "FLASH_ATTN",
        _ => return None,
    })
}

/// The block size dic writes when the `.dist` sets none: vLLM's default (16,
/// `CacheConfig.DEFAULT_BLOCK_SIZE`), 64 for MLA (FlashMLA's and the indexer's size), 256
/// for DeepSeek V4's compressed attention (the only size its backends take).
pub fn default_block_size(m: &Model) -> u64 {
    use crate::schema::vllm_defaults::{BLOCK_SIZE, MLA_BLOCK_SIZE};
    match AttentionKind::of(m) {
        AttentionKind::Compressed => AttentionKind::Compressed.block_multiple(),
        AttentionKind::SparseMla | AttentionKind::Mla => MLA_BLOCK_SIZE,
        AttentionKind::Standard => BLOCK_SIZE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str) -> Model {
        crate::analysis::catalog::model(name).expect("stdlib model")
    }

    /// The kinds as the stdlib's models have them, and the sizes dic writes for them.
    #[test]
    fn kinds_and_default_block_sizes() {
        let cases = [
            ("deepseek_v4_flash", AttentionKind::Compressed, 256),
            ("deepseek_v3_2", AttentionKind::SparseMla, 64),
            ("deepseek_v3", AttentionKind::Mla, 64),
            ("llama_3_1_8b", AttentionKind::Standard, 16),
        ];
        for (name, kind, block) in cases {
            let m = model(name);
            assert_eq!(AttentionKind::of(&m), kind, "{name}");
            assert_eq!(default_block_size(&m), block, "{name}");
            assert!(block.is_multiple_of(kind.block_multiple()));
        }
    }

    /// The backends a P/D split compares: Blackwell's FlashInfer against Hopper's
    /// FlashAttention; Ampere and Hopper both FlashAttention for a 16-bit cache.
    #[test]
    fn default_backends_by_generation() {
        let llama = model("llama_3_1_70b");
        let on = |m: &Model, cc| default_backend(m, Some(cc), false, 8);
        assert_eq!(on(&llama, 10.0), Some("FLASHINFER"));
        assert_eq!(on(&llama, 9.0), Some("FLASH_ATTN"));
        assert_eq!(on(&llama, 8.0), on(&llama, 9.0));
        let v3 = model("deepseek_v3");
        assert_eq!(on(&v3, 8.0), Some("TRITON_MLA"));
        assert_ne!(on(&v3, 9.0), on(&v3, 10.0));
        assert_eq!(default_backend(&llama, Some(9.0), true, 8), None);
    }

    /// DeepSeek V4's `auto` cache is FP8 on Hopper and Blackwell, 16-bit on Blackwell RTX
    /// and ROCm; other models keep `auto`.
    #[test]
    fn deepseek_v4s_auto_cache_is_fp8_where_flashmla_serves_it() {
        let v4 = model("deepseek_v4_flash");
        assert_eq!(auto_kv_cache(&v4, Some(9.0), false), Some("fp8"));
        assert_eq!(auto_kv_cache(&v4, Some(10.0), false), Some("fp8"));
        assert_eq!(auto_kv_cache(&v4, Some(12.0), false), None);
        assert_eq!(auto_kv_cache(&v4, Some(9.0), true), None);
        assert_eq!(auto_kv_cache(&model("deepseek_v3"), Some(9.0), false), None);
        let mut written = v4.clone();
        written.kv_cache = "bf16".into();
        resolve_auto_kv_cache(&mut written, Some(9.0), false);
        assert_eq!(written.kv_cache, "bf16", "a written dtype stands");
    }
}
