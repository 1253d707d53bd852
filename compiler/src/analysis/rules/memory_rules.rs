//! Memory rules: does the deployment fit, and if not, what would.

use super::*;

pub(super) fn breakdown(mem: &MemoryReport) -> String {
    let st = mem.tightest();
    format!(
        "per GPU (stage {}): budget {} = weights {} + activations {} + non-torch {} + CUDA graphs {} + KV cache {}",
        st.stage,
        fmt_bytes(st.budget),
        fmt_bytes(st.weights),
        fmt_bytes(st.activations),
        fmt_bytes(st.non_torch),
        fmt_bytes(st.cuda_graphs),
        fmt_bytes(st.kv_cache)
    )
}

/// Does a variant fit, with one request of max_model_len?
pub(super) fn fits(s: &Scenario) -> bool {
    let m = memory(s);
    m.stages.iter().all(|st| st.kv_cache > 0.0) && m.kv_cache_tokens >= s.engine.max_model_len
}

/// Ways out of a memory error, in the escalation order: quantize, more TP, shorter context.
pub(super) fn what_would_fit(s: &Scenario) -> String {
    let mut ideas = Vec::new();
    if !matches!(
        s.model.weights.as_str(),
        "fp8" | "int8" | "int4" | "awq" | "gptq" | "nvfp4" | "mxfp4"
    ) {
        let mut q = s.clone();
        q.model.weights = "fp8".into();
        q.model.kv_cache = "fp8".into();
        if fits(&q) {
            ideas.push(match prequantized_fp8(&s.model) {
                Some(name) => format!(
                    "the pre-quantized FP8 checkpoint `model = {name}` (vLLM loads it as stored; use an FP8 KV cache)"
                ),
                None => "`weights = fp8, kv_cache = fp8` on the model (vLLM quantizes the 16-bit checkpoint while loading it; a pre-quantized FP8 checkpoint of this model loads faster where one exists)".to_string(),
            });
        }
    }
    let max_tp = s.topology.scale_up_domain.max(s.topology.gpus_per_node);
    let mut tp = s.layout.tp * 2;
    while tp <= max_tp {
        if s.model.heads.is_multiple_of(tp) {
            let mut t = s.clone();
            t.layout.tp = tp;
            if fits(&t) {
                ideas.push(format!("tp {tp}"));
                break;
            }
        }
        tp *= 2;
    }
    let mut len = s.engine.max_model_len / 2;
    while len >= 1024 {
        let mut c = s.clone();
        c.engine.max_model_len = len;
        if fits(&c) {
            ideas.push(format!("max_model_len = {len}"));
            break;
        }
        len /= 2;
    }
    if ideas.is_empty() {
        "more GPUs per replica (pp across nodes), or a smaller model".into()
    } else {
        format!("this would fit: {}", ideas.join("; or "))
    }
}

/// W0502: a weight format this GPU has no tensor-core path for. vLLM still loads it —
/// NVFP4 without Blackwell and FP8 without Ada/Hopper run as weight-only Marlin kernels:
/// the weights stay small in memory, the GEMMs run at the BF16 rate — which is what the
/// performance model charges ([`crate::analysis::scenario::GpuSpec::matmul_flops`]).
fn format_support(s: &Scenario) -> Option<Finding> {
    use crate::program::Component;
    let m = &s.model;
    let gpu = &s.topology.gpu;
    let formats = [Component::Mixer, Component::Experts, Component::Mlp]
        .map(|c| m.format_of(c, None).to_string());
    let missing = formats.iter().find(|f| match f.as_str() {
        "nvfp4" => gpu.fp4.is_none(),
        "fp8" => gpu.fp8.is_none(),
        _ => false,
    })?;
    let native = if missing == "nvfp4" {
        "Blackwell (B200, GB200, B300)"
    } else {
        "Ada, Hopper or Blackwell"
    };
    Some(Finding::new(
        Code::FormatNotNative,
        Anchor::Model,
        format!(
            "{} has no {} tensor cores: vLLM serves {} weights as weight-only (Marlin) kernels, so the GEMMs run at the BF16 rate and only the memory saving remains",
            gpu.name,
            missing.to_uppercase(),
            missing.to_uppercase()
        ),
        "not native on this GPU",
        Some(format!(
            "the prediction charges BF16 compute for these GEMMs; {missing} runs natively on {native}, or serve a BF16/FP8 checkpoint here"
        )),
    ))
}

/// The memory rules' findings. With `remedies`, an error's help also names what would
/// fit (each remedy a memory model of its own: [`what_would_fit`], the DeepEP budget
/// that fits); without, the planner's quick pass, only the memory breakdown — the same
/// verdicts, with their messages.
pub fn memory_rules(s: &Scenario, mem: &MemoryReport, remedies: bool) -> Vec<Finding> {
    let mut out: Vec<Finding> = format_support(s).into_iter().collect();
    let st = mem.tightest();
    let short = st.kv_cache <= 0.0 || mem.kv_cache_tokens < s.engine.max_model_len;
    let help = |s: &Scenario| {
        Some(if remedies {
            format!("{}\n{}", breakdown(mem), what_would_fit(s))
        } else {
            breakdown(mem)
        })
    };
    if let Some(f) = deepep_buffers_rule(s, mem, remedies).filter(|_| short) {
        out.push(f);
    } else if st.kv_cache <= 0.0 {
        out.push(Finding::new(
            Code::DoesNotFit,
            Anchor::Layout,
            format!(
                "{} does not fit: needs {} per GPU before the KV cache, has {} after gpu_memory_utilization = {:.2}",
                s.model_name,
                fmt_bytes(st.weights + st.activations + st.non_torch + st.cuda_graphs),
                fmt_bytes(st.budget),
                s.engine.gpu_memory_utilization
            ),
            "No available memory for the cache blocks",
            help(s),
        ));
    } else if mem.kv_cache_tokens < s.engine.max_model_len {
        let est = mem.kv_cache_tokens;
        out.push(Finding::new(
            Code::RequestDoesNotFit,
            Anchor::Engine("max_model_len"),
            format!(
                "one request of max_model_len ({}) needs {} of KV cache, more than the {} available; the estimated maximum model length is {}",
                s.engine.max_model_len,
                fmt_bytes(mem.bytes_per_max_request),
                fmt_bytes(st.kv_cache),
                est
            ),
            "vLLM refuses to start",
            help(s),
        ));
    } else if let Some(f) = mamba_blocks_below_max_num_seqs(s, mem) {
        out.push(f);
    }
    out
}

/// E0507: a model with Mamba or linear-attention layers captures full CUDA graphs for
/// decode (vLLM's default mode), each decode sequence needs one Mamba cache block, and the
/// pool has fewer blocks than `max_num_seqs`
/// (`CompilationConfig.resolve_cudagraph_mode_and_sizes`).
fn mamba_blocks_below_max_num_seqs(s: &Scenario, mem: &MemoryReport) -> Option<Finding> {
    use super::super::scenario::CudaGraphMode;
    let m = &s.model;
    let e = &s.engine;
    let full_graphs = e.graphs()
        && matches!(
            e.cudagraph_mode,
            CudaGraphMode::FullAndPiecewise | CudaGraphMode::FullDecodeOnly
        );
    let recurrent = m.has_recurrent_layers();
    let blocks = mem.stages.iter().map(|st| st.num_blocks).min()?;
    if !(full_graphs && recurrent && e.max_num_seqs > blocks) {
        return None;
    }
    Some(Finding::new(
        Code::SeqsAboveMambaBlocks,
        Anchor::Engine("max_num_seqs"),
        format!(
            "max_num_seqs ({}) exceeds available Mamba cache blocks ({blocks}). Each decode sequence requires one Mamba cache block, so CUDA graph capture cannot proceed.",
            e.max_num_seqs
        ),
        "vLLM refuses to start",
        Some(format!(
            "lower max_num_seqs to at most {blocks}, give the KV cache more memory (gpu_memory_utilization, more TP), or write `cudagraph_mode = piecewise`"
        )),
    ))
}

/// E0506: DeepEP's buffers, sized from the token budget, leave no room for the KV cache
/// (`crate::analysis::deepep`). The help names the largest budget that fits, halving
/// down to vLLM's own default for the backend.
fn deepep_buffers_rule(s: &Scenario, mem: &MemoryReport, remedies: bool) -> Option<Finding> {
    use crate::analysis::deepep::{deepep_buffer_bytes, BATCHED_DP_TOKEN_BUDGET};
    let buffers = deepep_buffer_bytes(s);
    if buffers <= 0.0 {
        return None;
    }
    let st = mem.tightest();
    let low_latency = s.engine.all2all_backend.as_deref() == Some("deepep_low_latency");
    let budget = s.engine.max_num_batched_tokens;
    let mut fix = None;
    let mut b = budget / 2;
    while remedies && low_latency && b >= BATCHED_DP_TOKEN_BUDGET.min(budget) && b > 0 {
        let mut t = s.clone();
        t.engine.max_num_batched_tokens = b;
        t.engine.max_num_seqs = t.engine.max_num_seqs.min(b);
        if fits(&t) {
            fix = Some(b);
            break;
        }
        b /= 2;
    }
    let help = match fix {
        _ if !remedies => String::new(),
        Some(b) => format!(
            "lower `max_num_batched_tokens` to {b} (or leave it unset: vLLM's default with `deepep_low_latency` is {BATCHED_DP_TOKEN_BUDGET})"
        ),
        None if low_latency => format!(
            "{}; lowering `max_num_batched_tokens` alone does not make room",
            what_would_fit(s)
        ),
        None => what_would_fit(s),
    };
    Some(Finding::new(
        Code::DeepEpBuffersDoNotFit,
        Anchor::Engine(if low_latency {
            "max_num_batched_tokens"
        } else {
            "all2all_backend"
        }),
        format!(
            "DeepEP's buffers take {} per GPU ({}), leaving {} for the KV cache",
            fmt_bytes(buffers),
            if low_latency {
                format!(
                    "the low-latency RDMA buffer for {budget} tokens per rank × {} experts, plus 1 GiB over NVLink",
                    s.model.experts
                )
            } else {
                "VLLM_DEEPEP_BUFFER_SIZE_MB over NVLink and RDMA".to_string()
            },
            fmt_bytes(st.kv_cache.max(0.0))
        ),
        "CUDA out of memory at start-up",
        Some(if help.is_empty() {
            breakdown(mem)
        } else {
            format!("{}\n{help}", breakdown(mem))
        }),
    ))
}

/// A stdlib checkpoint of the same architecture stored in FP8 (NVIDIA's ModelOpt or the
/// vendor's own), for advice that prefers it to quantizing a BF16 checkpoint online.
fn prequantized_fp8(m: &crate::program::Model) -> Option<String> {
    let same = |o: &crate::program::Model| {
        (
            o.layers,
            o.hidden,
            o.heads,
            o.kv_heads,
            o.vocab,
            o.experts,
            o.intermediate,
        ) == (
            m.layers,
            m.hidden,
            m.heads,
            m.kv_heads,
            m.vocab,
            m.experts,
            m.intermediate,
        )
    };
    crate::analysis::catalog::model_names()
        .into_iter()
        .filter_map(|n| crate::analysis::catalog::model(&n).map(|o| (n, o)))
        .find(|(_, o)| o.prequantized && o.weights == "fp8" && same(o))
        .map(|(n, _)| n)
}
