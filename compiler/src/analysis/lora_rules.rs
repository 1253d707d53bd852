//! vLLM 0.33's start-up refusals of LoRA that depend on the model (E0317): a model class
//! that does not implement `SupportsLoRA` (`config/lora.py:LoRAConfig.verify_with_model_config`,
//! and again `v1/worker/lora_model_runner_mixin.py:load_lora_model`), and a vocabulary past what the LM head's LoRA
//! wrapper accepts. (The checks on the `lora` block alone are `check::lora`'s.)

use super::rules::{Anchor, Finding};
use super::Scenario;
use crate::diagnostics::Code;
use crate::program::Model;

/// The largest vocabulary vLLM 0.33 serves LoRA on when it wraps the LM head
/// (`lora/layers/logits_processor.py:LogitsProcessorWithLoRA.create_lora_weights`:
/// "When using LoRA, vocab size must be <= 258048").
pub const LORA_MAX_VOCAB: u64 = 258_048;

/// How vLLM 0.33's model class for a family takes LoRA, where it differs from Llama's
/// (`SupportsLoRA`, with `embedding_modules` naming `lm_head`, so the LM head is wrapped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoraClass {
    /// A piece of the family's Hugging Face repository names (lower case).
    pub hf: &'static str,
    pub class: &'static str,
    /// file:class of vLLM 0.33 that says so.
    pub source: &'static str,
    pub supports_lora: bool,
    /// Whether `embedding_modules` names `lm_head` (the LM head gets
    /// `LogitsProcessorWithLoRA`, and its vocabulary limit).
    pub wraps_lm_head: bool,
}

/// The catalog's families that vLLM 0.33 does not serve like Llama, by the architecture
/// their config.json names (../shared/models/hf). The others (Llama, Mistral, Mixtral,
/// Qwen3, Qwen3-MoE, Qwen3.5, DeepSeek V2/V3/V3.2/V4 on NVIDIA, Kimi K2 (DeepSeek V3's
/// class), GLM-MoE-DSA, gpt-oss, MiniMax-M2, Nemotron-H, Llama 4, Qwen3-VL) implement
/// `SupportsLoRA`.
pub const LORA_CLASSES: &[LoraClass] = &[
    LoraClass {
        hf: "mimo-v2",
        class: "MiMoV2FlashForCausalLM",
        source: "model_executor/models/mimo_v2.py:MiMoV2FlashForCausalLM",
        supports_lora: false,
        wraps_lm_head: false,
    },
    LoraClass {
        hf: "kimi-k2.6",
        class: "KimiK25ForConditionalGeneration",
        source: "model_executor/models/kimi_k25.py:KimiK25ForConditionalGeneration",
        supports_lora: false,
        wraps_lm_head: false,
    },
    LoraClass {
        hf: "kimi-k2.5",
        class: "KimiK25ForConditionalGeneration",
        source: "model_executor/models/kimi_k25.py:KimiK25ForConditionalGeneration",
        supports_lora: false,
        wraps_lm_head: false,
    },
    LoraClass {
        hf: "gemma-4",
        class: "Gemma4ForConditionalGeneration",
        source: "model_executor/models/gemma4_mm.py:Gemma4ForConditionalGeneration",
        supports_lora: true,
        wraps_lm_head: false,
    },
];

/// `m`'s entry in [`LORA_CLASSES`], by its `hf` repository; `None`: taken as Llama's.
pub fn lora_class(m: &Model) -> Option<&'static LoraClass> {
    let hf = m.hf.as_deref()?.to_ascii_lowercase();
    LORA_CLASSES.iter().find(|c| hf.contains(c.hf))
}

/// E0317 for a deployment with `lora` whose model vLLM 0.33 refuses to serve adapters on.
pub fn lora_findings(s: &Scenario) -> Vec<Finding> {
    let m = &s.model;
    if s.engine.lora.is_none() {
        return Vec::new();
    }
    let class = lora_class(m);
    if let Some(c) = class.filter(|c| !c.supports_lora) {
        return vec![Finding::new(
            Code::LoraUnsupported,
            Anchor::Field("lora"),
            format!(
                "vLLM 0.33 cannot serve LoRA adapters on this model: its class {} does not implement SupportsLoRA ({}), and the engine stops at start-up with \"LoRA is not supported for {} (…). Supported models implement the `SupportsLoRA` interface.\" (config/lora.py:LoRAConfig.verify_with_model_config)",
                c.class, c.source, c.class
            ),
            "LoRA on a model without LoRA support",
            Some("remove `lora`, or serve the adapters on a model whose vLLM class supports LoRA (merge an adapter into the weights to serve it alone)".into()),
        )];
    }
    let wraps_lm_head = class.is_none_or(|c| c.wraps_lm_head);
    if wraps_lm_head && m.vocab > LORA_MAX_VOCAB {
        return vec![Finding::new(
            Code::LoraUnsupported,
            Anchor::Field("lora"),
            format!(
                "vLLM 0.33 cannot serve LoRA adapters on a vocabulary of {} tokens: the LM head's LoRA wrapper takes at most {LORA_MAX_VOCAB} and the engine stops at start-up with \"When using LoRA, vocab size must be <= 258048\" (lora/layers/logits_processor.py:LogitsProcessorWithLoRA.create_lora_weights)",
                m.vocab
            ),
            "vocabulary past LoRA's limit",
            Some(format!("remove `lora`, or use a model of at most {LORA_MAX_VOCAB} tokens of vocabulary")),
        )];
    }
    Vec::new()
}
