//! Structural rules: vLLM's own startup checks (heads and TP, stages and layers, EP on
//! dense models) and the topology's (TP across nodes or over PCIe, GPUs the cluster lacks).

use super::*;
use crate::analysis::scenario::SpecDecode;

/// Fabric rate per GPU (per direction) under which EP all-to-all across nodes dominates a
/// step: one 200 Gb/s port per GPU. DeepSeek's and vLLM's wide-EP deployments run 400G per
/// GPU (InfiniBand or RoCE); AWS p4d's EFA gives 50 Gb/s. [threshold, not fitted]
const SLOW_EP_FABRIC_BYTES_PER_GPU: f64 = 25e9;

/// vLLM's startup checks and the topology rules; no memory model needed. The findings come
/// in the order of the checks below. Without `remedies` (the planner's quick pass, which
/// reads only the verdicts) E0401 gives no help: its remedy searches layouts that fit, a
/// memory model each; the verdicts and messages are the same.
pub fn structural(s: &Scenario, remedies: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    engine_options_the_model_or_workload_cannot_use(s, &mut out);
    formats_against_the_gpu(s, &mut out);
    super::attention::attention_backends(s, &mut out);
    layout_against_the_model(s, &mut out);
    layout_against_the_cluster(s, &mut out);
    super::shape::decode_context_parallel(s, &mut out);
    tp_links(s, remedies, &mut out);
    moe_token_exchange(s, &mut out);
    dual_batch_overlap(s, &mut out);
    lengths_and_batch(s, &mut out);
    super::passthrough::passthrough_options(s, &mut out);
    out
}

/// The engine options the model or the workload cannot use: prefix caching turned off under
/// a workload that reuses prompts, a speculative method or draft the model does not support.
fn engine_options_the_model_or_workload_cannot_use(s: &Scenario, out: &mut Vec<Finding>) {
    if let Some(w) = s.workload.filter(|w| w.declared_reuse > 0.0) {
        if s.engine.enable_prefix_caching == Some(false) {
            out.push(Finding::new(
                Code::PrefixCachingOff,
                Anchor::Engine("enable_prefix_caching"),
                format!(
                    "the workload reuses {:.0} of each request's {:.0} prompt tokens, but prefix caching is off: every prompt is prefilled in full",
                    w.declared_reuse, w.prompt
                ),
                "prefix caching disabled here",
                Some("remove `enable_prefix_caching = false` (vLLM caches prefixes by default), or drop `prefix_reuse`/`shared_prefix` from the workload if the prompts share nothing".into()),
            ));
        }
    }
    if let Some(sp) = &s.engine.speculative {
        out.extend(
            speculation_refusals(s, sp)
                .into_iter()
                .map(|(message, label, help)| {
                    Finding::new(
                        Code::SpecMethodUnavailable,
                        Anchor::Engine("speculative"),
                        message,
                        label,
                        Some(help),
                    )
                }),
        );
    }
}

/// What vLLM 0.33 refuses at start-up in the deployment's `speculative = { … }` (E0315),
/// each as its message, label and help: MTP layers reused unevenly or not served, EAGLE-3
/// on a class without its taps, a draft model the target's TP cannot split or with M-RoPE
/// positions, `mtp` without MTP layers, a draft with another tokenizer.
fn speculation_refusals(s: &Scenario, sp: &SpecDecode) -> Vec<(String, &'static str, String)> {
    let m = &s.model;
    let mut out = Vec::new();
    let mut refuse = |message: String, label: &'static str, help: &str| {
        out.push((message, label, help.to_string()))
    };
    let n_predict = m.detail.mtp_layers;
    if sp.method == "mtp"
        && n_predict > 0
        && sp.tokens > n_predict
        && !sp.tokens.is_multiple_of(n_predict)
    {
        // `SpeculativeConfig.__post_init__`: the MTP modules are reused in turn.
        refuse(
            format!(
                "num_speculative_tokens:{} must be divisible by n_predict={n_predict}: vLLM drafts with the checkpoint's {n_predict} MTP layers in turn",
                sp.tokens
            ),
            "MTP layers reused unevenly",
            &format!("draft at most {n_predict} tokens, or a multiple of {n_predict}"),
        );
    }
    if let Some(why) = (sp.method == "mtp" && n_predict > 0)
        .then(|| crate::analysis::vllm_class::mtp_unserved(m))
        .flatten()
    {
        refuse(
            format!("Unsupported speculative method: 'mtp': the checkpoint has {n_predict} MTP layers, but vLLM 0.33 serves none of this family as a draft: {why}"),
            "MTP layers vLLM does not serve",
            "use `method = eagle3` with a head trained for this model, or `ngram`",
        );
    }
    if let Some(why) = (sp.method == "eagle3")
        .then(|| crate::analysis::vllm_class::eagle3_unserved(m))
        .flatten()
    {
        refuse(
            format!("Model does not support EAGLE3 interface: {why}"),
            "EAGLE-3 on a class without its hidden-state taps",
            "use `method = ngram` or a `draft_model` from the same family",
        );
    }
    if let Some(d) = sp.draft.as_deref().filter(|_| sp.method == "draft_model") {
        // The draft runs at the target's TP (`_verify_and_get_draft_tp`; the draft
        // runner requires it equal), and vLLM checks its heads against it as the
        // target's (`SpeculativeConfig._verify_args`).
        if let Some((_, why)) = super::shape::tp_refusal(d, s.layout.tp) {
            refuse(
                format!(
                    "the draft model runs at the target's tp {}, and vLLM refuses it there: {why}",
                    s.layout.tp
                ),
                "a draft the target's TP cannot split",
                "choose a draft whose heads the target's tp divides, or `method = eagle3`",
            );
        }
        // A draft model takes one new slot per request each step
        // (`needs_extra_input_slots`), and that proposer refuses M-RoPE positions
        // (`v1/spec_decode/llm_base_proposer.py:_raise_if_mrope`).
        if d.detail.mrope {
            refuse(
                format!(
                    "Speculative Decoding with draft models or parallel drafting does not support M-RoPE yet: the draft model{} uses multimodal rotary positions (`mrope`)",
                    d.hf.as_deref().map(|h| format!(" ({h})")).unwrap_or_default()
                ),
                "a draft model with M-RoPE",
                "choose a draft without M-RoPE that shares the target's tokenizer, or `method = mtp` where the target ships MTP layers (Qwen3.5 does)",
            );
        }
    }
    if sp.method == "mtp" && n_predict == 0 {
        refuse(
            "`method = mtp` drafts with the checkpoint's multi-token-prediction layers, and this model declares none (`mtp_layers`)".to_string(),
            "no MTP layers to draft with",
            "use `method = eagle3` with a head trained for this model, or `ngram`; if the checkpoint has MTP layers (`num_nextn_predict_layers` in its config.json), set `mtp_layers` on the model",
        );
    }
    if let Some(d) = sp.draft.as_deref().filter(|d| d.vocab != m.vocab) {
        refuse(
            format!(
                "the draft model's vocabulary ({}) differs from the target's ({}): vLLM needs one tokenizer for both",
                d.vocab, m.vocab
            ),
            "draft with another tokenizer",
            "choose a draft from the target's family (same tokenizer), or `method = eagle3`",
        );
    }
    out
}

/// The lowest compute capability vLLM 0.33 serves a weight format on: each method's
/// `get_min_capability()` as dic launches it — `fp8` (`Fp8Config`, also for
/// `--quantization fp8` on the fly) 7.5, `mxfp4` (`Mxfp4Config`) 8.0, `nvfp4`
/// (`ModelOptNvFp4Config`) 7.5, `awq` (`AWQConfig`) 7.5, `gptq` (`GPTQConfig`) 6.0,
/// `int4`/`int8` (`CompressedTensorsConfig`, `MoeWNA16Config`) 7.0. ModelOpt's FP8 checkpoints
/// ask 8.0; dic cannot tell them from other FP8 ones, so it applies the lower bound.
pub fn min_compute_capability(format: &str) -> Option<f64> {
    Some(match format {
        "fp8" | "nvfp4" | "awq" => 7.5,
        "mxfp4" => 8.0,
        "gptq" => 6.0,
        "int4" | "int8" => 7.0,
        _ => return None,
    })
}

/// E0802: a weight format whose quantization method needs a newer GPU
/// (`VllmConfig._get_quantization_config`: "The quantization method … is not supported for
/// the current GPU. Minimum capability: …").
fn formats_against_the_gpu(s: &Scenario, out: &mut Vec<Finding>) {
    use crate::program::Component;
    let m = &s.model;
    let gpu = &s.topology.gpu;
    let Some(cc) = gpu.compute_capability() else {
        return;
    };
    let too_new = [Component::Mixer, Component::Experts, Component::Mlp]
        .iter()
        .map(|c| m.format_of(*c, None))
        .filter(|f| *f != m.dtype)
        .find_map(|f| {
            min_compute_capability(f)
                .filter(|min| cc < *min)
                .map(|min| (f, min))
        });
    // `get_supported_act_dtypes()`: MXFP4 (`Mxfp4Config`) runs only with BF16 activations;
    // dic writes no `--dtype`, so vLLM uses the checkpoint's.
    let mxfp4 = [Component::Mixer, Component::Experts, Component::Mlp]
        .iter()
        .any(|c| m.format_of(*c, None) == "mxfp4");
    if too_new.is_none() && mxfp4 && m.dtype != "bf16" {
        out.push(Finding::new(
            Code::FormatNeedsNewerGpu,
            Anchor::Model,
            format!(
                "{} activations are not supported for quantization method mxfp4. Supported dtypes: [bfloat16]",
                m.dtype
            ),
            "vLLM refuses this checkpoint's dtype",
            Some("serve the MXFP4 checkpoint with `dtype = bf16` (its published dtype)".into()),
        ));
    }
    if let Some((format, min)) = too_new {
        out.push(Finding::new(
            Code::FormatNeedsNewerGpu,
            Anchor::Model,
            format!(
                "The quantization method for `{format}` weights is not supported for the current GPU. Minimum capability: {:.0}. Current capability: {:.0} ({}).",
                min * 10.0,
                cc * 10.0,
                gpu.name
            ),
            "vLLM refuses this checkpoint on this GPU",
            Some(format!(
                "serve it on a GPU of compute capability {min:.1} or newer, or serve a checkpoint in another format"
            )),
        ));
    }
}

/// vLLM's startup checks of the layout against the model: every sliced dimension divisible
/// by TP (`shape`), no more stages than layers, EP only with experts and no wider than them.
fn layout_against_the_model(s: &Scenario, out: &mut Vec<Finding>) {
    let m = &s.model;
    let l = &s.layout;
    super::shape::shape_against_the_layout(s, out);
    super::shape::pipeline_parallel(s, out);
    if l.pp > m.layers {
        out.push(Finding::new(
            Code::TooManyStages,
            Anchor::Layout,
            format!("pp {} exceeds the model's {} layers", l.pp, m.layers),
            "a stage would hold no layer",
            Some(format!("use pp ≤ {}", m.layers)),
        ));
    }
    if l.ep && m.experts == 0 {
        out.push(Finding::new(
            Code::EpOnDense,
            Anchor::Layout,
            "expert parallelism on a dense model: Number of experts in the model must be greater than 0 when expert parallelism is enabled".into(),
            "the model has no experts",
            Some("remove `ep`; use dp replicas for throughput".into()),
        ));
    }
    let idle = l.ep_ranks_without_experts(m.experts);
    if idle > 0 {
        let ep_size = l.ep_size();
        out.push(Finding::new(
            Code::EpBeyondExperts,
            Anchor::Layout,
            format!(
                "`ep` spreads {}'s {} routed experts over {ep_size} ranks (tp {} × dp {}): {idle} of them hold no expert and idle in every MoE layer, while each step waits for the ranks that hold one",
                s.model_name, m.experts, l.tp, l.dp
            ),
            "an EP group larger than the model's experts",
            Some(format!(
                "drop `ep` (the experts are then split by tensor slices over all {ep_size} ranks), or keep tp × dp ≤ {}",
                m.experts
            )),
        ));
    }
}

/// The layout against the cluster: enough GPUs, whole nodes per replica or per layout.
fn layout_against_the_cluster(s: &Scenario, out: &mut Vec<Finding>) {
    let l = &s.layout;
    let t = &s.topology;
    let total = t.total_gpus();
    if l.gpus() > total {
        out.push(Finding::new(
            Code::NotEnoughGpus,
            Anchor::Layout,
            format!(
                "the layout needs {} GPUs (tp {} × pp {} × dp {}{}), the cluster has {}",
                l.gpus(),
                l.tp,
                l.pp,
                l.dp,
                if l.pcp > 1 {
                    format!(" × pcp {}", l.pcp)
                } else {
                    String::new()
                },
                total
            ),
            "more GPUs than the cluster has",
            Some(format!(
                "add nodes ({} × {} GPUs needed) or shrink dp",
                l.gpus().div_ceil(t.gpus_per_node.max(1)),
                t.gpus_per_node
            )),
        ));
    }
    let per_node = t.gpus_per_node.max(1);
    let replica = l.replica_gpus();
    if replica > per_node && !replica.is_multiple_of(per_node) {
        out.push(Finding::new(
            Code::PartialNode,
            Anchor::Layout,
            format!("each replica's {replica} GPUs (tp × pp) span nodes but are not a whole number of {per_node}-GPU nodes"),
            "vLLM's multi-node launch requires whole nodes per replica",
            Some(format!("make tp × pp a multiple of {per_node}, or at most {per_node}")),
        ));
    } else if l.gpus() > per_node && !l.gpus().is_multiple_of(per_node) {
        out.push(Finding::new(
            Code::PartialNode,
            Anchor::Layout,
            format!(
                "the layout's {} GPUs span nodes but are not a whole number of {}-GPU nodes",
                l.gpus(),
                per_node
            ),
            "vLLM requires (dp × pp × tp) % nnodes == 0",
            Some(format!("use a multiple of {per_node} GPUs")),
        ));
    }
}

/// The link a TP group's all-reduces cross: across nodes or NVLink domains, or over PCIe.
fn tp_links(s: &Scenario, remedies: bool, out: &mut Vec<Finding>) {
    let l = &s.layout;
    let t = &s.topology;
    if l.tp > 1 {
        let tp = tp_placement(s);
        if tp.spans_nodes && !tp.within_scale_up_domain {
            let nvlink = t
                .scale_up
                .as_ref()
                .map(|x| format!("{:.0} GB/s {}", x.bandwidth / 1e9, x.name))
                .unwrap_or_else(|| "the node's own link".into());
            let domain = t.scale_up_domain.max(t.gpus_per_node).max(1);
            let what = if l.tp > domain {
                format!(
                    "tp {} spans {} nodes",
                    l.tp,
                    l.tp.div_ceil(t.gpus_per_node.max(1))
                )
            } else {
                format!(
                    "a tp {} group straddles two {domain}-GPU NVLink domains (tp does not divide the domain)",
                    l.tp
                )
            };
            out.push(Finding::new(
                Code::TpAcrossNodes,
                Anchor::Layout,
                format!(
                    "{what} over {} ({:.1} GB/s per GPU, vs {nvlink} inside a domain)",
                    tp.link_name,
                    tp.bandwidth / 0.8 / 1e9
                ),
                "TP all-reduces twice per layer per token: it belongs inside one NVLink domain",
                remedies.then(|| tp_inside_the_domain(s, domain)),
            ));
        } else if tp.link_type == LinkType::Pcie {
            out.push(Finding::new(
                Code::TpOverPcie,
                Anchor::Layout,
                format!(
                    "tp {} runs over {} ({:.0} GB/s per direction) — no NVLink between these GPUs",
                    l.tp,
                    tp.link_name,
                    tp.bandwidth / 0.8 / 1e9
                ),
                "every layer's all-reduces cross PCIe",
                Some(
                    "prefer fewer GPUs per replica (quantize, or pp over PCIe) and dp replicas"
                        .into(),
                ),
            ));
        }
    }
}

/// The all-to-all backends vLLM 0.33 runs dual batch overlap with on CUDA
/// (`VllmConfig.__post_init__`, "Microbatching currently only supports …"): DeepEP's two
/// and NIXL's EP kernels, which dic does not model; ROCm also takes the default
/// `allgather_reducescatter`.
const DBO_BACKENDS_CUDA: [&str; 2] = ["deepep_low_latency", "deepep_high_throughput"];

/// E0413: `dbo = true` where vLLM asserts at start-up that the all-to-all backend is one
/// that runs on the micro-batches' communication stream: on CUDA a DeepEP backend (vLLM's
/// default `allgather_reducescatter` only on ROCm).
fn dual_batch_overlap(s: &Scenario, out: &mut Vec<Finding>) {
    if !s.engine.dbo {
        return;
    }
    let backend = s
        .engine
        .all2all_backend
        .as_deref()
        .unwrap_or("allgather_reducescatter");
    let supported = DBO_BACKENDS_CUDA.contains(&backend)
        || (s.topology.gpu.rocm && backend == "allgather_reducescatter");
    if supported {
        return;
    }
    out.push(Finding::new(
        Code::DboRefused,
        Anchor::Engine("dbo"),
        format!(
            "vLLM refuses to start with `--enable-dbo` and the `{backend}` all-to-all backend: \"Microbatching currently only supports the deepep_low_latency, deepep_high_throughput, nixl_ep all2all backends on this platform\" (VllmConfig.__post_init__)"
        ),
        "vLLM does not start",
        Some(if s.model.is_moe() && s.layout.ep && s.layout.dp > 1 {
            "set `all2all_backend = deepep_low_latency` (decode) or `deepep_high_throughput` (prefill), or remove `dbo`".into()
        } else {
            "remove `dbo`: it overlaps a MoE layer's all-to-all between DP ranks, which this layout does not have (it needs a MoE model with `ep` and dp > 1, and DeepEP)".into()
        }),
    ));
}

/// The MoE layers' token exchange: an all-to-all backend that has no effect on this layout,
/// and EP across nodes over a fabric too slow for it.
fn moe_token_exchange(s: &Scenario, out: &mut Vec<Finding>) {
    let m = &s.model;
    let l = &s.layout;
    if let Some(message) = crate::analysis::deepep::batched_experts_refusal(s) {
        out.push(Finding::new(
            Code::FormatNeedsNewerGpu,
            Anchor::Engine("all2all_backend"),
            message,
            "no NVFP4 expert kernel for this all-to-all on this GPU",
            Some("use `all2all_backend = deepep_high_throughput` or `allgather_reducescatter` here, or serve the NVFP4 experts on B200, GB200 or B300".into()),
        ));
    }
    if let Some(backend) = s.engine.all2all_backend.as_deref() {
        let why = if m.experts == 0 {
            Some(format!("{} has no MoE layers", s.model_name))
        } else if l.dp <= 1 {
            Some("with one DP rank the experts' group is the TP group, whose all-reduce combines them: no tokens move between DP ranks".to_string())
        } else if is_deepep(backend) && !l.ep {
            Some("DeepEP's kernels run only with expert parallelism; without `ep` vLLM gathers and reduce-scatters the tokens".to_string())
        } else {
            None
        };
        if let Some(why) = why {
            out.push(Finding::new(
                Code::All2AllUnused,
                Anchor::Engine("all2all_backend"),
                format!("`all2all_backend = {backend}` has no effect here: {why}"),
                "no effect on this layout",
                Some(if is_deepep(backend) && !l.ep && l.dp > 1 && m.experts > 0 {
                    "add `ep` to the layout (e.g. `tp 2 × dp 4 × ep`) or remove `all2all_backend`".into()
                } else {
                    "remove `all2all_backend`".into()
                }),
            ));
        }
    }
    // With one DP rank the MoE group is the TP group: no tokens move (`comm::moe_comm`);
    // with several, they move with or without EP.
    if m.experts > 0 && l.dp > 1 {
        let ep = ep_placement(s);
        // The fabric's measured rate per GPU decides, not its name: 8 × 400G RoCE is as
        // fast as 8 × 400G InfiniBand.
        let per_gpu = ep.bandwidth / super::super::comm::LINK_EFFICIENCY;
        if ep.spans_nodes && !ep.within_scale_up_domain && per_gpu < SLOW_EP_FABRIC_BYTES_PER_GPU {
            out.push(Finding::new(
                Code::EpOverSlowFabric,
                Anchor::Layout,
                format!(
                    "the MoE layers' token exchange ({}) crosses nodes over {} at {:.1} GB/s per GPU, under the {:.0} GB/s (one 200G port per GPU) wide EP needs",
                    if uses_deepep(s) { "DeepEP all-to-all" } else { "all-gather and reduce-scatter" },
                    ep.link_name,
                    per_gpu / 1e9,
                    SLOW_EP_FABRIC_BYTES_PER_GPU / 1e9
                ),
                "every MoE layer dispatches and combines tokens across nodes",
                Some(
                    "keep the EP group inside a node or an NVLink domain, or give each GPU at least 200 Gb/s of fabric"
                        .into(),
                ),
            ));
        }
    }
}

/// Lengths and the step's budget: max_model_len within the model's context, the workload's
/// requests within max_model_len, the token budget at least max_num_seqs.
fn lengths_and_batch(s: &Scenario, out: &mut Vec<Finding>) {
    let m = &s.model;
    if s.engine.max_model_len as f64 > m.max_context && m.max_context > 0.0 {
        out.push(Finding::new(
            Code::ModelLenTooLong,
            Anchor::Engine("max_model_len"),
            format!(
                "User-specified max_model_len ({}) is greater than the derived max_model_len (max_position_embeddings={})",
                s.engine.max_model_len, m.max_context as u64
            ),
            "vLLM refuses to start",
            Some(format!("use max_model_len ≤ {}", m.max_context as u64)),
        ));
    }
    if let Some(w) = s.workload {
        let need = (w.prompt + w.output).ceil();
        if need > s.engine.max_model_len as f64 {
            out.push(Finding::new(
                Code::RequestTooLong,
                Anchor::Engine("max_model_len"),
                format!(
                    "the workload's requests need {need:.0} tokens (prompt {:.0} + output {:.0}), over max_model_len ({}): vLLM rejects every one",
                    w.prompt, w.output, s.engine.max_model_len
                ),
                "requests longer than the context",
                Some(format!(
                    "raise max_model_len to at least {need:.0} (within the model's {}), or shorten the requests",
                    m.max_context as u64
                )),
            ));
        }
    }
    let lookahead = s.engine.speculative.as_ref().map_or(0, |sp| sp.tokens);
    if lookahead > 0 && s.engine.max_num_batched_tokens <= lookahead {
        // `VllmConfig._set_max_num_scheduled_tokens`.
        out.push(Finding::new(
            Code::BatchBelowSeqs,
            Anchor::Engine("max_num_batched_tokens"),
            format!(
                "VllmConfig does not have enough slots to schedule a token and support the speculative decoding settings: max_num_batched_tokens ({}) must exceed the {lookahead} speculative tokens",
                s.engine.max_num_batched_tokens
            ),
            "vLLM's scheduler check",
            Some(format!("raise max_num_batched_tokens above {lookahead}")),
        ));
    }
    if s.engine.max_num_batched_tokens < s.engine.max_num_seqs {
        out.push(Finding::new(
            Code::BatchBelowSeqs,
            Anchor::Engine("max_num_batched_tokens"),
            format!(
                "max_num_batched_tokens ({}) must be greater than or equal to max_num_seqs ({})",
                s.engine.max_num_batched_tokens, s.engine.max_num_seqs
            ),
            "vLLM's scheduler check",
            Some(format!(
                "raise max_num_batched_tokens to {} or lower max_num_seqs",
                s.engine.max_num_seqs
            )),
        ));
    }
}

/// `l` (`s`'s layout with another TP or PP, its `dcp` unchanged), without its decode
/// context parallelism when vLLM would refuse it at `l`'s TP (`shape::dcp_refusal`) or
/// on `s`'s GPU (`shape::dcp_backend_refusal`: no ROCm backend for it), so a help never
/// proposes a layout E0407 refuses.
fn keep_dcp_if_valid(s: &Scenario, l: crate::program::Layout) -> crate::program::Layout {
    if super::shape::dcp_refusal(&s.model, &l).is_some()
        || super::shape::dcp_backend_refusal(s).is_some()
    {
        crate::program::Layout { dcp: 1, ..l }
    } else {
        l
    }
}

/// E0401's remedy in the escalation order, on the same GPUs: the smallest TP that divides
/// the NVLink domain and the heads and fits in memory, the rest as DP replicas; or, when
/// no such TP fits, the largest such TP with pipeline stages across the domains.
fn tp_inside_the_domain(s: &Scenario, domain: u64) -> String {
    let l = s.layout;
    let m = &s.model;
    let gpus = l.gpus();
    let valid: Vec<u64> = (0..=16)
        .map(|k| 1u64 << k)
        .filter(|t| {
            *t <= l.tp
                && *t <= domain
                && domain.is_multiple_of(*t)
                && super::shape::tp_refusal(m, *t).is_none()
        })
        .collect();
    // A group that only straddles a domain boundary (tp ≤ domain): the nearest TP that
    // divides the domain keeps the written intent (`tp 8 × dp 18` on NVL72 racks for tp 16).
    // A TP wider than the domain: the escalation order, the smallest TP that fits.
    let order: Vec<u64> = if l.tp <= domain {
        valid.iter().rev().copied().collect()
    } else {
        valid.clone()
    };
    for &t in &order {
        let dp = gpus / (t * l.pp.max(1));
        if dp == 0 {
            continue;
        }
        let mut q = s.clone();
        q.layout = keep_dcp_if_valid(s, crate::program::Layout { tp: t, dp, ..l });
        // The experts split over tp × dp without `ep`: a split vLLM refuses is no remedy.
        if super::memory_rules::fits(&q) && super::shape::moe_refusal(m, &q.layout).is_none() {
            return if l.tp <= domain {
                format!(
                    "`{}` keeps every TP group inside one {domain}-GPU domain on the same {gpus} GPUs",
                    q.layout
                )
            } else {
                format!(
                    "`{}` fits on the same {gpus} GPUs: DP replicas need no per-token communication (the escalation order: DP before PP)",
                    q.layout
                )
            };
        }
    }
    let stages = |t: u64| (l.tp * l.pp.max(1)).div_ceil(t);
    match valid.last() {
        Some(&t) if super::shape::pp_refusal(m, stages(t)).is_none() => {
            let pp = stages(t);
            format!(
                "keep TP inside the domain and cross domains with pipeline stages: `{}`",
                keep_dcp_if_valid(s, crate::program::Layout { tp: t, pp, ..l })
            )
        }
        _ => "keep each TP group inside one node".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::keep_dcp_if_valid;
    use crate::program::Layout;

    /// A help's layout keeps `dcp` only where E0407 would pass it: DeepSeek V3.2 (MLA with
    /// the indexer) at `tp 8 × dcp 2` keeps it on H200 and drops it on MI355X, whose only
    /// sparse-MLA backend has no DCP.
    #[test]
    fn a_help_drops_the_dcp_no_rocm_backend_serves() {
        use crate::analysis::catalog;
        use crate::analysis::estimate::{scenario, EstimateRequest};
        let at = |gpu: &str| {
            let req = EstimateRequest {
                gpu: gpu.into(),
                layout: Layout {
                    tp: 16,
                    dcp: 2,
                    ..Layout::default()
                },
                max_model_len: Some(8192.0),
                ..EstimateRequest::default()
            };
            let model = "deepseek_v3_2";
            let s = scenario(model, catalog::model(model).expect("in the catalog"), &req)
                .expect("a valid request");
            let l = Layout {
                tp: 8,
                dp: 2,
                ..s.layout
            };
            keep_dcp_if_valid(&s, l).dcp
        };
        assert_eq!(at("h200"), 2);
        assert_eq!(at("mi355x"), 1);
    }
}
