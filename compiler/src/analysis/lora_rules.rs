//! vLLM 0.33's start-up refusals of LoRA that depend on the model (E0317): a model class
//! that does not implement `SupportsLoRA` (`config/lora.py:LoRAConfig.
//! verify_with_model_config`, and again `v1/worker/lora_model_runner_mixin.py:
//! load_lora_model`), a vocabulary past what the LM head's LoRA wrapper accepts, and a MoE
//! model's experts under expert parallelism with another all-to-all than vLLM's default or
//! sequence-parallel (`lora/layers/fused_moe.py:FusedMoEWithLoRA._ep_check`); beside
//! speculative decoding, a token budget below every sequence's verified tokens (E0504). The
//! classes are `vllm_class::VLLM_CLASSES`. (The checks on the `lora` block alone are
//! `check::lora`'s.)

use super::rules::{Anchor, Finding};
use super::vllm_class::vllm_class;
use super::Scenario;
use crate::diagnostics::Code;

/// The largest vocabulary vLLM 0.33 serves LoRA on when it wraps the LM head
/// (`lora/layers/logits_processor.py:LogitsProcessorWithLoRA.create_lora_weights`:
/// "When using LoRA, vocab size must be <= 258048").
pub const LORA_MAX_VOCAB: u64 = 258_048;

/// E0317 for a deployment with `lora` whose model vLLM 0.33 refuses to serve adapters on.
pub fn lora_findings(s: &Scenario) -> Vec<Finding> {
    let m = &s.model;
    if s.engine.lora.is_none() {
        return Vec::new();
    }
    let class = vllm_class(m);
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
    let wraps_lm_head = class.is_none_or(|c| c.wraps_embeddings);
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
    if let Some(f) = speculation_budget_refusal(s) {
        return vec![f];
    }
    expert_parallel_refusal(s)
        .map(|(message, help)| {
            vec![Finding::new(
                Code::LoraUnsupported,
                Anchor::Field("lora"),
                message,
                "LoRA on experts split this way",
                Some(help),
            )]
        })
        .unwrap_or_default()
}

/// LoRA with speculative decoding needs a token budget for every sequence's verified
/// tokens: `EngineArgs.create_engine_config` (engine/arg_utils.py) raises "Consider
/// increasing max_num_batched_tokens or decreasing num_speculative_tokens" where
/// `max_num_batched_tokens < max_num_seqs × (num_speculative_tokens + 1)`.
fn speculation_budget_refusal(s: &Scenario) -> Option<Finding> {
    let k = s.engine.speculative.as_ref()?.tokens;
    let (seqs, budget) = (s.engine.max_num_seqs, s.engine.max_num_batched_tokens);
    let needed = seqs * (k + 1);
    (budget < needed).then(|| {
        Finding::new(
            Code::BatchBelowSeqs,
            Anchor::Field("lora"),
            format!(
                "with LoRA and {k} speculative tokens vLLM needs max_num_batched_tokens ≥ max_num_seqs × {} = {needed}, and has {budget}: \"Consider increasing max_num_batched_tokens or decreasing num_speculative_tokens\" (engine/arg_utils.py:EngineArgs.create_engine_config)",
                k + 1
            ),
            "LoRA beside speculation without the token budget",
            Some(format!(
                "set `max_num_batched_tokens = {needed}` or `max_num_seqs = {}`, or draft fewer tokens",
                budget / (k + 1)
            )),
        )
    })
}

/// LoRA on a MoE model's experts under expert parallelism: `FusedMoEWithLoRA._ep_check`
/// (lora/layers/fused_moe.py) asserts the all-to-all backend is vLLM's default
/// `allgather_reducescatter` and that the MoE layer is not sequence-parallel (`ep` with
/// both tp and dp above 1, `ParallelConfig.use_sequence_parallel_moe`, which the MoE
/// families' classes pass to their layers).
fn expert_parallel_refusal(s: &Scenario) -> Option<(String, String)> {
    let l = &s.layout;
    let (tp, dp) = (l.tp.max(1), l.dp.max(1));
    if !s.model.is_moe() || !l.ep || tp * dp == 1 {
        return None;
    }
    if let Some(b) = s
        .engine
        .all2all_backend
        .as_deref()
        .filter(|b| *b != "allgather_reducescatter")
    {
        return Some((
            format!("Fused MoE LoRA with EP currently only supports all2all_backend='allgather_reducescatter', got '{b}' (lora/layers/fused_moe.py:FusedMoEWithLoRA._ep_check)"),
            "leave `all2all_backend` unset with `lora`, or remove `lora`".into(),
        ));
    }
    (tp > 1 && dp > 1).then(|| {
        (
            format!("LoRA on experts that are sequence-parallel: with `ep`, tp {tp} and dp {dp} vLLM runs the MoE layers sequence-parallel, and FusedMoEWithLoRA asserts they are not (lora/layers/fused_moe.py:FusedMoEWithLoRA._ep_check)"),
            format!("with `lora` and `ep`, use tp 1 × dp {} or tp {} × dp 1", tp * dp, tp * dp),
        )
    })
}
