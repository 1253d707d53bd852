//! vLLM 0.33's start-up checks of options dic does not write but `extra_args` can pass
//! through: expert-parallel load balancing (`--enable-eplb`, `--eplb-config`) against the
//! layout and the experts (E0412), and chunked prefill turned off with a token budget below
//! `max_model_len` (E0510), `--dtype bfloat16` on a GPU without BF16 (E0802), and a CUDA
//! graph capture limit below 1 or below a speculative step's tokens (E0314).
//! docs/vllm-rules.md rows 20, 21, 32, 47, 55 and 111.

use super::*;
use crate::analysis::scenario::option_value;

/// Whether `args` pass option `name`: `--name` alone or `--name=value`.
fn has_flag(args: &[String], name: &str) -> bool {
    args.iter()
        .any(|w| w == name || w.strip_prefix(name).is_some_and(|r| r.starts_with('=')))
}

/// `num_redundant_experts` from `--eplb-config '{…}'` or `--eplb-config.num_redundant_experts N`
/// (0 when unset or unreadable; vLLM's parser reports the unreadable).
fn redundant_experts(args: &[String]) -> u64 {
    if let Some(n) = option_value(args, "--eplb-config.num_redundant_experts") {
        return n.trim().parse().unwrap_or(0);
    }
    option_value(args, "--eplb-config")
        .and_then(|json| serde_json::from_str::<serde_json::Value>(json).ok())
        .and_then(|v| v.get("num_redundant_experts").and_then(|n| n.as_u64()))
        .unwrap_or(0)
}

/// E0412 (`ParallelConfig._validate_parallel_config`, `fused_moe/layer.py:FusedMoEFactory`),
/// E0510 (`SchedulerConfig.verify_max_model_len`).
pub(super) fn passthrough_options(s: &Scenario, out: &mut Vec<Finding>) {
    let args = &s.engine.extra_args;
    let l = &s.layout;
    let m = &s.model;
    let eplb = has_flag(args, "--enable-eplb");
    let redundant = redundant_experts(args);
    let ranks = l.tp.max(1) * l.pcp.max(1) * l.dp.max(1);
    let mut eplb_problem = |message: String, help: String| {
        out.push(Finding::new(
            Code::EplbRefused,
            Anchor::Engine("extra_args"),
            message,
            "vLLM refuses this expert load balancing",
            Some(help),
        ))
    };
    if eplb && !l.ep {
        eplb_problem(
            "enable_expert_parallel must be True to use EPLB: `--enable-eplb` moves experts between expert-parallel ranks, and the layout has no `ep`".into(),
            "add `ep` to the layout, or drop `--enable-eplb`".into(),
        );
    } else if eplb && ranks <= 1 {
        eplb_problem(
            format!("EPLB requires tensor, prefill-context, or data parallelism, but got TP={}, PCP={}, DP={}.", l.tp.max(1), l.pcp.max(1), l.dp.max(1)),
            "spread the experts over more than one rank (tp or dp above 1), or drop `--enable-eplb`".into(),
        );
    } else if eplb && m.experts > 0 && !(m.experts + redundant).is_multiple_of(ranks) {
        // With `ep`, the EP group is every rank of the engine: tp × pcp × dp.
        let total = m.experts + redundant;
        let up = total.div_ceil(ranks) * ranks - m.experts;
        eplb_problem(
            format!("EPLB currently only supports even distribution of experts across ranks. Got {total} experts and {ranks} EP ranks."),
            format!("set `num_redundant_experts` to {up} (`--eplb-config.num_redundant_experts={up}`) so that {} experts split evenly over {ranks} ranks, or choose tp × dp dividing {total}", m.experts + up),
        );
    }
    if !eplb && redundant > 0 {
        eplb_problem(
            format!("num_redundant_experts is set to {redundant} but EPLB is not enabled. Either enable EPLB or unset num_redundant_experts."),
            "add `--enable-eplb` to `extra_args`, or drop `num_redundant_experts`".into(),
        );
    }
    bf16_on_the_gpu(s, out);
    capture_limit_refusals(s, out);
    let e = &s.engine;
    // `MambaModelConfig.verify_and_update_config`: a model with Mamba or linear-attention
    // layers caches prefixes (vLLM's default) only with chunked prefill.
    let recurrent = m.has_recurrent_layers();
    if has_flag(args, "--disable-chunked-prefill")
        && recurrent
        && e.enable_prefix_caching != Some(false)
    {
        out.push(Finding::new(
            Code::InvalidExtraArg,
            Anchor::Engine("extra_args"),
            "Chunked prefill is required for Mamba prefix caching: the model's recurrent (Mamba or linear-attention) layers cache prefixes, as vLLM does by default, only with chunked prefill (model_executor/models/config.py:MambaModelConfig.verify_and_update_config)".into(),
            "chunked prefill turned off for a hybrid model",
            Some("drop `--disable-chunked-prefill`, or set `enable_prefix_caching = false`".into()),
        ));
    }
    if has_flag(args, "--disable-chunked-prefill") && e.max_num_batched_tokens < e.max_model_len {
        out.push(Finding::new(
            Code::BatchBelowModelLen,
            Anchor::Engine("extra_args"),
            format!(
                "max_num_batched_tokens ({}) is smaller than max_model_len ({}): with chunked prefill off, a prompt of max_model_len must fit one step's token budget",
                e.max_num_batched_tokens, e.max_model_len
            ),
            "chunked prefill turned off here",
            Some(format!(
                "set `max_num_batched_tokens = {}` (the max_model_len), lower `max_model_len`, or drop `--disable-chunked-prefill`",
                e.max_model_len
            )),
        ));
    }
}

/// `CudaPlatform.check_if_supports_dtype`: BF16 needs compute capability 8.0. dic writes no
/// `--dtype` (vLLM's `auto` falls back to FP16 below 8.0), so only `extra_args` forces it.
fn bf16_on_the_gpu(s: &Scenario, out: &mut Vec<Finding>) {
    let gpu = &s.topology.gpu;
    let forced = option_value(&s.engine.extra_args, "--dtype")
        .is_some_and(|d| matches!(d, "bfloat16" | "bf16"));
    let Some(cc) = gpu.compute_capability().filter(|cc| forced && *cc < 8.0) else {
        return;
    };
    out.push(Finding::new(
        Code::FormatNeedsNewerGpu,
        Anchor::Engine("extra_args"),
        format!(
            "Bfloat16 is only supported on GPUs with compute capability of at least 8.0: the {} has {cc:.1}",
            gpu.name
        ),
        "`--dtype bfloat16` forced here",
        Some("drop `--dtype` (vLLM then runs FP16 on this GPU), or use `--dtype float16`".into()),
    ));
}

/// A CUDA-graph capture limit written in `extra_args` that vLLM refuses where graphs are
/// captured (`VllmConfig._set_cudagraph_sizes` in vllm/config/vllm.py, 0.33): below 1,
/// its assertion "Maximum cudagraph size should be greater than or equal to 1 when using
/// cuda graph."; and with speculative decoding, below one step's `tokens + 1`
/// (`CompilationConfig.adjust_cudagraph_sizes_for_spec_decode` rounds the sizes up to
/// multiples of it and refuses to start when none is left). vLLM's own limit, `min(2 ×
/// max_num_seqs × (tokens + 1), 512, max_num_batched_tokens)`, always holds one (E0504
/// keeps the budget above the drafted tokens).
fn capture_limit_refusals(s: &Scenario, out: &mut Vec<Finding>) {
    let Some(limit) = s
        .engine
        .written_capture_limit()
        .filter(|_| s.engine.graphs())
    else {
        return;
    };
    let (message, help) = if limit < 1 {
        (
            format!(
                "Maximum cudagraph size should be greater than or equal to 1 when using cuda graph. (max_cudagraph_capture_size is {limit})"
            ),
            "drop the capture limit (vLLM's default), or set it to at least 1; `enforce_eager = true` captures no graphs".to_string(),
        )
    } else {
        let Some(step) = s.engine.speculative.as_ref().map(|sp| sp.tokens + 1) else {
            return;
        };
        if limit as u64 >= step {
            return;
        }
        (
            format!(
                "No valid cudagraph sizes after rounding to multiple of {step} (num_speculative_tokens + 1): max_cudagraph_capture_size ({limit}) is below one speculative decode step"
            ),
            format!(
                "drop the capture limit (vLLM's default covers the speculative steps), or set it to at least {step}"
            ),
        )
    };
    out.push(Finding::new(
        Code::InvalidExtraArg,
        Anchor::Engine("extra_args"),
        message,
        "capture limit set here",
        Some(help),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn redundant_experts_are_read_from_either_spelling() {
        assert_eq!(redundant_experts(&words(&["--enable-eplb"])), 0);
        assert_eq!(
            redundant_experts(&words(&["--eplb-config.num_redundant_experts=32"])),
            32
        );
        assert_eq!(
            redundant_experts(&words(&[
                "--eplb-config",
                r#"{"num_redundant_experts": 16}"#
            ])),
            16
        );
        assert!(has_flag(
            &words(&["--disable-chunked-prefill"]),
            "--disable-chunked-prefill"
        ));
        assert!(!has_flag(&words(&["--enable-eplb-x"]), "--enable-eplb"));
    }
}
