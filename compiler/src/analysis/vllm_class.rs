//! vLLM 0.33's model class for a model, found from the class its config.json names (the
//! model's `architecture`, which `dic import-hf` writes and the stdlib states) or, where a
//! model states none, from its `hf` repository name, and what the class supports where it
//! differs from Llama's:
//! LoRA (`analysis/lora.rs`, `analysis/lora_rules.rs`) and pipeline parallelism
//! (`analysis/rules/shape.rs:pp_refusal`). One table, so every rule reads the same class.

use crate::program::Model;

/// vLLM 0.33's model class for a family, where it differs from Llama's in what dic asks of
/// it: LoRA (`SupportsLoRA`, with `embedding_modules` naming `embed_tokens` and `lm_head`)
/// and pipeline parallelism (`SupportsPP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VllmClass {
    /// A piece of the family's Hugging Face repository names (lower case).
    pub hf: &'static str,
    /// The class config.json's `architectures` names, which a model's `architecture`
    /// matches.
    pub class: &'static str,
    /// file:class of vLLM 0.33 that says so.
    pub source: &'static str,
    pub supports_lora: bool,
    /// Whether a module of the model declares `embedding_modules` (`embed_tokens`,
    /// `lm_head`): then the embedding and the LM head get LoRA slots
    /// (`lora/utils.py:get_supported_lora_modules`), and the LM head's wrapper
    /// (`LogitsProcessorWithLoRA`) its vocabulary limit. A class without them leaves both
    /// as they are (`SupportsLoRA.embedding_modules` is empty).
    pub wraps_embeddings: bool,
    /// Whether the class implements `SupportsPP`
    /// (`model_executor/models/interfaces.py:supports_pp`): without it vLLM refuses
    /// `pipeline_parallel_size > 1` (`config/model.py:ModelConfig.verify_with_parallel_config`).
    pub supports_pp: bool,
}

/// The families that vLLM 0.33 does not serve like Llama, by the architecture their
/// config.json names (../shared/models/hf), first match first. The catalog's others (Llama,
/// Mixtral, Qwen3, Qwen3-MoE, Qwen3.5, Nemotron-H, and Llama 4 and Qwen3-VL
/// through their Llama and Qwen3 language models) implement `SupportsLoRA` with
/// `embedding_modules`, and every catalog class implements `SupportsPP`. The last entries
/// are classes of vLLM 0.33's registry (`model_executor/models/registry.py`) without
/// `SupportsPP`, outside the catalog, known by their `hf` repository.
pub const VLLM_CLASSES: &[VllmClass] = &[
    VllmClass {
        hf: "mimo-v2",
        class: "MiMoV2FlashForCausalLM",
        source: "model_executor/models/mimo_v2.py:MiMoV2FlashForCausalLM",
        supports_lora: false,
        wraps_embeddings: false,
        supports_pp: true,
    },
    VllmClass {
        hf: "kimi-k2.6",
        class: "KimiK25ForConditionalGeneration",
        source: "model_executor/models/kimi_k25.py:KimiK25ForConditionalGeneration",
        supports_lora: false,
        wraps_embeddings: false,
        supports_pp: true,
    },
    VllmClass {
        hf: "kimi-k2.5",
        class: "KimiK25ForConditionalGeneration",
        source: "model_executor/models/kimi_k25.py:KimiK25ForConditionalGeneration",
        supports_lora: false,
        wraps_embeddings: false,
        supports_pp: true,
    },
    VllmClass {
        hf: "gemma-4",
        class: "Gemma4ForConditionalGeneration",
        source: "model_executor/models/gemma4_mm.py:Gemma4ForConditionalGeneration",
        supports_lora: true,
        wraps_embeddings: false,
        supports_pp: true,
    },
    VllmClass {
        hf: "deepseek-v4",
        class: "DeepseekV4ForCausalLM",
        source: "models/deepseek_v4/nvidia/model.py:DeepseekV4ForCausalLM",
        supports_lora: true,
        wraps_embeddings: false,
        supports_pp: true,
    },
    VllmClass {
        hf: "deepseek-v3.2",
        class: "DeepseekV32ForCausalLM",
        source: "models/deepseek_v32/nvidia/model.py:DeepseekV32ForCausalLM",
        supports_lora: true,
        wraps_embeddings: false,
        supports_pp: true,
    },
    VllmClass {
        hf: "deepseek-",
        class: "DeepseekV3ForCausalLM",
        source: "model_executor/models/deepseek_v2.py:DeepseekV2ForCausalLM",
        supports_lora: true,
        wraps_embeddings: false,
        supports_pp: true,
    },
    VllmClass {
        hf: "kimi-k2",
        class: "DeepseekV3ForCausalLM",
        source: "model_executor/models/deepseek_v2.py:DeepseekV2ForCausalLM",
        supports_lora: true,
        wraps_embeddings: false,
        supports_pp: true,
    },
    VllmClass {
        hf: "glm-5",
        class: "GlmMoeDsaForCausalLM",
        source: "models/deepseek_v32/nvidia/model.py:DeepseekV32ForCausalLM",
        supports_lora: true,
        wraps_embeddings: false,
        supports_pp: true,
    },
    VllmClass {
        hf: "mistral-7b",
        class: "MistralForCausalLM",
        source: "model_executor/models/mistral.py:MistralForCausalLM",
        supports_lora: true,
        wraps_embeddings: false,
        supports_pp: true,
    },
    VllmClass {
        hf: "gpt-oss",
        class: "GptOssForCausalLM",
        source: "model_executor/models/gpt_oss.py:GptOssForCausalLM",
        supports_lora: true,
        wraps_embeddings: false,
        supports_pp: true,
    },
    VllmClass {
        hf: "minimax-m2",
        class: "MiniMaxM2ForCausalLM",
        source: "model_executor/models/minimax_m2.py:MiniMaxM2ForCausalLM",
        supports_lora: true,
        wraps_embeddings: false,
        supports_pp: true,
    },
    VllmClass {
        hf: "gemma-3n",
        class: "Gemma3nForConditionalGeneration",
        source: "model_executor/models/gemma3n_mm.py:Gemma3nForConditionalGeneration",
        supports_lora: false,
        wraps_embeddings: false,
        supports_pp: false,
    },
    VllmClass {
        hf: "mamba2",
        class: "Mamba2ForCausalLM",
        source: "model_executor/models/mamba2.py:Mamba2ForCausalLM",
        supports_lora: false,
        wraps_embeddings: false,
        supports_pp: false,
    },
    VllmClass {
        hf: "mamba-codestral",
        class: "Mamba2ForCausalLM",
        source: "model_executor/models/mamba2.py:Mamba2ForCausalLM",
        supports_lora: false,
        wraps_embeddings: false,
        supports_pp: false,
    },
    VllmClass {
        hf: "zamba2",
        class: "Zamba2ForCausalLM",
        source: "model_executor/models/zamba2.py:Zamba2ForCausalLM",
        supports_lora: false,
        wraps_embeddings: false,
        supports_pp: false,
    },
    VllmClass {
        hf: "nemotron-nano-12b-v2-vl",
        class: "NemotronH_Nano_VL_V2",
        source: "model_executor/models/nano_nemotron_vl.py:NemotronH_Nano_VL_V2",
        supports_lora: true,
        wraps_embeddings: true,
        supports_pp: false,
    },
];

/// Families whose checkpoints carry multi-token-prediction layers that vLLM 0.33 does not
/// serve as an MTP draft, by a piece of their `hf` repository name, with why:
/// `SpeculativeConfig.__post_init__` (config/speculative.py) takes `method = mtp` only for
/// the model types of `MTPModelTypes`, after `hf_config_override` maps a target's type to
/// its MTP draft's, and raises "Unsupported speculative method: 'mtp'" otherwise.
pub const MTP_UNSERVED: &[FamilyReason] = &[(
    "MiniMaxM2ForCausalLM",
    "minimax-m2",
    "MiniMaxM2ForCausalLM drops the checkpoint's `num_mtp_modules` layers at load (model_executor/models/minimax_m2.py) and `hf_config_override` maps no `minimax_m2` type to an MTP draft (only `minimax_m3`)",
)];

/// Why vLLM 0.33 serves no MTP draft for `m` though its checkpoint has MTP layers
/// ([`MTP_UNSERVED`]), or `None`.
pub fn mtp_unserved(m: &Model) -> Option<&'static str> {
    family_reason(MTP_UNSERVED, m)
}

/// A family table's entry: the class config.json names, a piece of the family's `hf`
/// repository names (lower case), and why.
pub type FamilyReason = (&'static str, &'static str, &'static str);

/// The reason `table` gives for `m`'s family: by its `architecture` where it states one,
/// else by a piece of its `hf` repository name.
fn family_reason(table: &[FamilyReason], m: &Model) -> Option<&'static str> {
    table
        .iter()
        .find(|(class, piece, _)| is_class(m, class, piece))
        .map(|(_, _, why)| *why)
}

/// Whether `m` is of `class`: its `architecture` names it, or, stating none, its `hf`
/// repository name holds `piece`.
fn is_class(m: &Model, class: &str, piece: &str) -> bool {
    match (&m.architecture, &m.hf) {
        (Some(a), _) => a == class,
        (None, Some(hf)) => hf.to_ascii_lowercase().contains(piece),
        (None, None) => false,
    }
}

/// Families whose vLLM 0.33 class does not implement `SupportsEagle3`, by a piece of their
/// `hf` repository name, with why: an EAGLE-3 head needs the target's auxiliary hidden
/// states, and `set_eagle3_aux_hidden_state_layers`
/// (v1/worker/gpu/spec_decode/eagle/eagle3_utils.py) raises "Model does not support EAGLE3
/// interface" at load otherwise.
pub const EAGLE3_UNSERVED: &[FamilyReason] = &[(
    "MixtralForCausalLM",
    "mixtral",
    "MixtralForCausalLM implements SupportsLoRA, SupportsPP and MixtureOfExperts, not SupportsEagle3 (model_executor/models/mixtral.py)",
)];

/// Why vLLM 0.33 cannot run an EAGLE-3 head on `m` ([`EAGLE3_UNSERVED`]), or `None`.
pub fn eagle3_unserved(m: &Model) -> Option<&'static str> {
    family_reason(EAGLE3_UNSERVED, m)
}

/// `m`'s entry in [`VLLM_CLASSES`], by its `architecture`, else its `hf` repository;
/// `None`: a class that serves it like Llama's (or, naming neither, taken as one).
pub fn vllm_class(m: &Model) -> Option<&'static VllmClass> {
    VLLM_CLASSES.iter().find(|c| is_class(m, c.class, c.hf))
}
