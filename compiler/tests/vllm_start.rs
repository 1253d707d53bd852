//! Deployments vLLM 0.33 refuses while `vllm serve` starts are refused by `dic check` (or
//! emitted in the form vLLM accepts): the rows of docs/vllm-rules.md that dic catches,
//! each tried on a deployment written in `.dist`.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::diagnostics::Code;
use dic_compiler::driver::{self, Checked};
use dic_compiler::source::MemoryWorld;

fn compile(src: &str) -> Checked {
    let head = "import std.nodes.dgx_h100\nimport std.models.llama_3_1_8b\n\
                cluster one { nodes = 1 × dgx_h100 }\n";
    let world = MemoryWorld::new().with("c.dist", &format!("{head}{src}"));
    driver::compile_file(&world, "c.dist").unwrap()
}

/// Rows 38 and 39: vLLM spells the 16-bit cache dtypes `bfloat16` and `float16`
/// (`CacheConfig._validate_cache_dtype` refuses `bf16`), and refuses one that differs
/// from the model's dtype (`VllmConfig._reject_mismatched_float_kv_cache`).
#[test]
fn a_16_bit_kv_cache_is_spelled_as_vllm_reads_it_and_must_be_the_models_dtype() {
    let same = compile(
        "model m = llama_3_1_8b { kv_cache = bf16 }\n\
         deploy d { model = m, cluster = one, layout = tp 1 }\n",
    );
    assert!(!same.has_errors(), "{:?}", same.diagnostics);
    assert_eq!(
        same.plan.deployments[0].model.kv_cache_dtype.as_deref(),
        Some("bfloat16")
    );
    let other = compile(
        "model m = llama_3_1_8b { kv_cache = fp16 }\n\
         deploy d { model = m, cluster = one, layout = tp 1 }\n",
    );
    let e = other
        .diagnostics
        .iter()
        .find(|d| d.code == Code::UnsupportedLaunch)
        .unwrap_or_else(|| panic!("{:?}", other.diagnostics));
    assert!(
        e.message.contains("fp16 KV cache on a bf16 model"),
        "{}",
        e.message
    );
    assert!(other.plan.deployments.is_empty());
}

fn codes(c: &Checked) -> Vec<Code> {
    c.diagnostics.iter().map(|d| d.code).collect()
}

/// The first diagnostic of `code`, or a failure listing the codes there are.
fn first(c: &Checked, code: Code) -> &dic_compiler::diagnostics::Diagnostic {
    c.diagnostics
        .iter()
        .find(|d| d.code == code)
        .unwrap_or_else(|| panic!("no {code}: {:?}", codes(c)))
}

/// Row 2: TP and the KV heads must divide one another (`QKVParallelLinear`): Qwen3.5-27B
/// (24 query heads, 4 KV heads) at `tp 6` checked clean, and A0401 proposed `tp 3`.
#[test]
fn tp_must_divide_the_kv_heads_or_replicate_them_evenly() {
    let head = "import std.models.qwen3_5_27b\ncluster six { nodes = 1 × dgx_h100 }\n";
    let six = compile(&format!(
        "{head}deploy d {{ model = qwen3_5_27b, cluster = six, layout = tp 6 }}\n"
    ));
    let e = first(&six, Code::HeadsNotDivisible);
    assert!(e.message.contains("4 KV heads"), "{}", e.message);
    assert!(!codes(&six).contains(&Code::DpBeatsTp));
    let four = compile(&format!(
        "{head}deploy d {{ model = qwen3_5_27b, cluster = six, layout = tp 4 }}\n"
    ));
    assert!(!four.has_errors(), "{:?}", codes(&four));
}

/// Row 16: DCP is capped at tp / kv_heads (Llama 3.1 8B: 8 KV heads, `tp 16` allows dcp 2).
#[test]
fn dcp_is_capped_at_tp_over_the_kv_heads() {
    let two = "cluster two { nodes = 2 × dgx_h100 }\n";
    let c = compile(&format!(
        "{two}deploy d {{ model = llama_3_1_8b, cluster = two, layout = tp 16 × dcp 4 }}\n"
    ));
    let e = first(&c, Code::InvalidDcp);
    assert!(
        e.message.contains("maximum supported value (2)"),
        "{}",
        e.message
    );
}

/// Row 6: the experts' width splits over tp × dp without `ep` (`FusedMoEConfig`).
#[test]
fn expert_width_must_split_over_the_moe_tp() {
    let c = compile(
        "import std.models.qwen3_30b_a3b\n\
         model narrow = qwen3_30b_a3b { moe_intermediate = 772 }\n\
         deploy d { model = narrow, cluster = one, layout = tp 2 × dp 4 }\n",
    );
    assert!(
        codes(&c).contains(&Code::WidthNotDivisible),
        "{:?}",
        codes(&c)
    );
    let ep = compile(
        "import std.models.qwen3_30b_a3b\n\
         model narrow = qwen3_30b_a3b { moe_intermediate = 772 }\n\
         deploy d { model = narrow, cluster = one, layout = tp 2 × dp 4 × ep }\n",
    );
    assert!(
        !codes(&ep).contains(&Code::WidthNotDivisible),
        "{:?}",
        codes(&ep)
    );
}

/// Row 44: gpt-oss's MXFP4 experts need compute capability 8.0 (`Mxfp4Config`); a T4 is
/// 7.5, and vLLM refuses to start.
#[test]
fn mxfp4_needs_compute_capability_8() {
    let c = compile(
        "import std.gpus.t4\nimport std.models.gpt_oss_20b\n\
         node t4x4 { gpus = 4 × t4 }\ncluster old { nodes = 1 × t4x4 }\n\
         deploy d { model = gpt_oss_20b, cluster = old, layout = tp 4 }\n",
    );
    let e = first(&c, Code::FormatNeedsNewerGpu);
    assert!(
        e.message.contains("Minimum capability: 80"),
        "{}",
        e.message
    );
    let a100 = compile(
        "import std.nodes.dgx_a100\nimport std.models.gpt_oss_20b\n\
         cluster amp { nodes = 1 × dgx_a100 }\n\
         deploy d { model = gpt_oss_20b, cluster = amp, layout = tp 4 }\n",
    );
    assert!(
        !codes(&a100).contains(&Code::FormatNeedsNewerGpu),
        "{:?}",
        codes(&a100)
    );
}

/// Row 52: with full decode CUDA graphs each decode sequence of a Mamba model needs one
/// cache block (`CompilationConfig.resolve_cudagraph_mode_and_sizes`); piecewise graphs
/// lift the limit.
#[test]
fn max_num_seqs_must_fit_the_mamba_cache_blocks() {
    let deploy = |mode: &str| {
        compile(&format!(
            "import std.nodes.dgx_h200\nimport std.models.nemotron_3_nano\n\
             cluster h200 {{ nodes = 1 × dgx_h200 }}\n\
             deploy d {{ model = nemotron_3_nano, cluster = h200, layout = tp 1, engine = vllm {{ max_model_len = 8k tokens, max_num_seqs = 8192, max_num_batched_tokens = 8192{mode} }} }}\n"
        ))
    };
    let full = deploy("");
    let e = first(&full, Code::SeqsAboveMambaBlocks);
    assert!(
        e.message.contains("max_num_seqs (8192) exceeds"),
        "{}",
        e.message
    );
    let piecewise = deploy(", cudagraph_mode = piecewise");
    assert!(!codes(&piecewise).contains(&Code::SeqsAboveMambaBlocks));
}

/// Rows 54 and 57: the token budget must exceed the speculative tokens
/// (`VllmConfig._set_max_num_scheduled_tokens`), and MTP drafts a multiple of its layers
/// beyond them (`SpeculativeConfig.__post_init__`).
#[test]
fn speculative_tokens_fit_the_budget_and_the_mtp_layers() {
    let c = compile(
        "import std.models.qwen3_5_27b\n\
         model two = qwen3_5_27b { mtp_layers = 2 }\n\
         deploy d { model = two, cluster = one, layout = tp 4, engine = vllm { max_model_len = 8k tokens, speculative = { method = mtp, tokens = 3 } } }\n",
    );
    let e = first(&c, Code::SpecMethodUnavailable);
    assert!(
        e.message.contains("must be divisible by n_predict=2"),
        "{}",
        e.message
    );
    let budget = compile(
        "import std.models.qwen3_5_27b\n\
         deploy d { model = qwen3_5_27b, cluster = one, layout = tp 4, engine = vllm { max_model_len = 8k tokens, max_num_seqs = 2, max_num_batched_tokens = 2, speculative = { method = mtp, tokens = 2 } } }\n",
    );
    let e = first(&budget, Code::BatchBelowSeqs);
    assert!(e.message.contains("not have enough slots"), "{}", e.message);
}

/// E0401's help proposes a layout on the same GPUs; it keeps `dcp` only where vLLM
/// accepts it (it proposed `tp 1 × dp 16 × dcp 4`, which E0407 refuses).
#[test]
fn the_tp_across_nodes_help_proposes_no_dcp_vllm_refuses() {
    let c = compile(
        "cluster two { nodes = 2 × dgx_h100 }\n\
         deploy d { model = llama_3_1_8b, cluster = two, layout = tp 16 × dcp 4 }\n",
    );
    let e = first(&c, Code::TpAcrossNodes);
    let help = e.help.as_deref().unwrap_or_default();
    assert!(help.contains("dp 16`"), "{help}");
    assert!(!help.contains("dcp"), "{help}");
}

/// Row 19: on ROCm a DeepSeek sparse-attention model (DeepSeek V3.2: MLA with the
/// indexer) has one attention backend, ROCM_AITER_MLA_SPARSE, without DCP; on CUDA its
/// sparse MLA backends support DCP.
#[test]
fn dcp_on_rocm_needs_a_sparse_mla_backend_with_it() {
    let src = |node: &str| {
        format!(
            "import std.nodes.{node}\nimport std.models.deepseek_v3_2\n\
             cluster eight {{ nodes = 1 × {node} }}\n\
             deploy d {{ model = deepseek_v3_2, cluster = eight, layout = tp 8 × dcp 2, engine = vllm {{ max_model_len = 8k tokens }} }}\n"
        )
    };
    let world = MemoryWorld::new().with("c.dist", &src("mi355x_8"));
    let amd = driver::compile_file(&world, "c.dist").unwrap();
    let e = first(&amd, Code::InvalidDcp);
    assert!(e.message.contains("ROCM_AITER_MLA_SPARSE"), "{}", e.message);
    // E0401's help on two AMD nodes (TP across them) keeps no DCP that E0407 refuses.
    let across = src("mi355x_8")
        .replace("nodes = 1 ×", "nodes = 2 ×")
        .replace("tp 8 × dcp 2", "tp 16 × dcp 2");
    let world = MemoryWorld::new().with("c.dist", &across);
    let amd = driver::compile_file(&world, "c.dist").unwrap();
    let e = first(&amd, Code::TpAcrossNodes);
    let help = e.help.clone().unwrap_or_default();
    assert!(!help.contains("dcp 2"), "{help}");
    let world = MemoryWorld::new().with("c.dist", &src("dgx_h200"));
    let nvidia = driver::compile_file(&world, "c.dist").unwrap();
    assert!(
        !codes(&nvidia).contains(&Code::InvalidDcp),
        "{:?}",
        nvidia.diagnostics
    );
}

/// One deployment written in `.dist`: `model` on `nodes` × `node` with `layout`; its
/// fields `overrides` written into a copy of the model (`kv_cache = fp8`), `engine`'s
/// options after `max_model_len = 16k tokens`, and more deployment fields in `extra`.
#[derive(Clone, Copy)]
struct Dist<'a> {
    node: &'a str,
    nodes: u32,
    model: &'a str,
    overrides: &'a str,
    layout: &'a str,
    engine: &'a str,
    extra: &'a str,
}

impl<'a> Dist<'a> {
    fn on(node: &'a str, model: &'a str, layout: &'a str) -> Self {
        Dist {
            node,
            nodes: 1,
            model,
            overrides: "",
            layout,
            engine: "",
            extra: "",
        }
    }

    fn world(&self) -> MemoryWorld {
        let Dist {
            node,
            nodes,
            model,
            overrides,
            layout,
            engine,
            extra,
        } = *self;
        MemoryWorld::new().with(
            "c.dist",
            &format!(
                "import std.nodes.{node}\nimport std.models.{model}\n\
                 cluster c {{ nodes = {nodes} × {node} }}\n\
                 model m = {model} {{ {overrides} }}\n\
                 deploy d {{ model = m, cluster = c, layout = {layout}, \
                 engine = vllm {{ max_model_len = 16k tokens{engine} }}{extra} }}\n"
            ),
        )
    }

    fn compile(&self) -> Checked {
        driver::compile_file(&self.world(), "c.dist").unwrap()
    }

    fn scenario(&self) -> dic_compiler::analysis::Scenario {
        let checked = driver::check_file(&self.world(), "c.dist").unwrap();
        checked.deployments[0].scenario.scenario.clone()
    }
}

/// A deployment of `model` on one `node` with `layout` and engine options `engine`.
fn deploy_on(node: &str, model: &str, layout: &str, engine: &str) -> Checked {
    Dist {
        engine,
        ..Dist::on(node, model, layout)
    }
    .compile()
}

/// Row 50: dic writes `--block-size`, which vLLM takes as the user's and filters its
/// attention backends by. DeepSeek V4's sparse attention and indexer take 256 alone
/// (`DeepseekV4SparseMLABackend`, `DeepseekV4IndexerBackend`): dic writes 256 where the
/// `.dist` sets none (it had written 16, and every V4 deployment stopped at start-up),
/// and refuses a written size they do not take.
#[test]
fn the_block_size_dic_writes_is_one_the_attention_backends_take() {
    let v4 = deploy_on("dgx_h200", "deepseek_v4_flash", "tp 8 × ep", "");
    assert!(!v4.has_errors(), "{:?}", codes(&v4));
    assert_eq!(v4.plan.deployments[0].engine.block_size, 256);
    let written = deploy_on(
        "dgx_h200",
        "deepseek_v4_flash",
        "tp 8 × ep",
        ", block_size = 16",
    );
    let e = first(&written, Code::NoAttentionBackend);
    assert!(
        e.message.contains("No common block size for 16"),
        "{}",
        e.message
    );
    assert!(written.plan.deployments.is_empty());
    // Sparse MLA's indexer takes 64: 32 is refused, 128 is not.
    let v32 = |engine| deploy_on("dgx_h200", "deepseek_v3_2", "tp 8", engine);
    assert!(codes(&v32(", block_size = 32")).contains(&Code::NoAttentionBackend));
    assert!(!codes(&v32(", block_size = 128")).contains(&Code::NoAttentionBackend));
    // Every backend takes multiples of 16; 8 is refused on any model.
    let llama = |engine| deploy_on("dgx_h100", "llama_3_1_8b", "tp 1", engine);
    assert!(codes(&llama(", block_size = 8")).contains(&Code::NoAttentionBackend));
    assert!(!codes(&llama(", block_size = 32")).contains(&Code::NoAttentionBackend));
}

/// Sparse MLA with the indexer (DeepSeek V3.2, GLM-5) has no backend below compute
/// capability 9.0 (`FLASH_ATTN_MLA_SPARSE` and `FLASHINFER_MLA_SPARSE_SM90` take 9.x,
/// `FLASHMLA_SPARSE` 9.x and 10.x, `FLASHINFER_MLA_SPARSE` 10.x): "No valid attention
/// backend found" on an A100.
#[test]
fn sparse_mla_needs_hopper_or_blackwell() {
    let a100 = deploy_on("dgx_a100", "deepseek_v3_2", "tp 8 × pp 2", "");
    let e = first(&a100, Code::NoAttentionBackend);
    assert!(
        e.message.contains("No valid attention backend"),
        "{}",
        e.message
    );
    let h200 = deploy_on("dgx_h200", "deepseek_v3_2", "tp 8", "");
    assert!(!codes(&h200).contains(&Code::NoAttentionBackend));
}

/// DeepSeek V4 picks its attention itself: FlashMLA's sparse kernels on compute
/// capability 9.x and 10.x, FlashInfer's SM120 kernel on 12.x, none elsewhere (row 105).
#[test]
fn deepseek_v4_needs_hopper_or_blackwell() {
    for node in ["dgx_a100", "l40s_server_8"] {
        let c = deploy_on(node, "deepseek_v4_flash", "tp 8 × pp 2", "");
        let e = first(&c, Code::NoAttentionBackend);
        assert!(
            e.message.contains("DeepSeek V4's attention has no kernel"),
            "{node}: {}",
            e.message
        );
    }
    let h200 = deploy_on("dgx_h200", "deepseek_v4_flash", "tp 8", "");
    assert!(
        !codes(&h200).contains(&Code::NoAttentionBackend),
        "{:?}",
        codes(&h200)
    );
}

/// Below SM89 vLLM's Triton backends refuse an FP8 cache (`TritonAttentionImpl`,
/// `TritonMLAImpl`), and MLA models (TRITON_MLA is the only MLA backend there) and gpt-oss
/// (attention sinks) have no other backend; a Llama's FP8 cache runs on FlashInfer.
#[test]
fn an_fp8_cache_below_sm89_needs_a_backend_other_than_triton() {
    let mla = deploy_on("dgx_a100", "deepseek_v3", "tp 8 × pp 2", "");
    assert!(!codes(&mla).contains(&Code::NoAttentionBackend));
    let fp8 = |model, layout| {
        Dist {
            nodes: 2,
            overrides: "kv_cache = fp8",
            ..Dist::on("dgx_a100", model, layout)
        }
        .compile()
    };
    let e = first(&fp8("deepseek_v3", "tp 8 × pp 2"), Code::NoAttentionBackend).clone();
    assert!(e.message.contains("TRITON_MLA"), "{}", e.message);
    assert!(codes(&fp8("gpt_oss_120b", "tp 2")).contains(&Code::NoAttentionBackend));
    assert!(!codes(&fp8("llama_3_1_8b", "tp 1")).contains(&Code::NoAttentionBackend));
}

/// DeepSeek V4 on Hopper and Blackwell attends through FlashMLA, whose cache is FP8
/// (`_resolve_dsv4_kv_cache_dtype`): a 16-bit cache is refused, `auto` and `fp8` are not.
#[test]
fn deepseek_v4_on_hopper_needs_an_fp8_cache() {
    let c = Dist {
        overrides: "kv_cache = bf16",
        ..Dist::on("dgx_h200", "deepseek_v4_flash", "tp 8 × ep")
    }
    .compile();
    let e = first(&c, Code::NoAttentionBackend);
    assert!(
        e.message.contains("only supports fp8 kv-cache"),
        "{}",
        e.message
    );
}

/// DeepSeek V4's `auto` cache is FP8 where FlashMLA serves it (vLLM 0.33 makes it so):
/// dic sizes that cache and writes the dtype, so `auto` and a written `fp8` are one
/// deployment, holding 1.7× the tokens of a 16-bit cache (584 B per compressed entry, not
/// 1,024).
#[test]
fn deepseek_v4s_auto_cache_is_the_fp8_one_vllm_allocates() {
    use dic_compiler::analysis::memory::memory;
    let with = |kv: &str| {
        Dist {
            overrides: &format!("kv_cache = {kv}"),
            ..Dist::on("dgx_h200", "deepseek_v4_flash", "tp 8 × ep")
        }
        .scenario()
    };
    let (auto, fp8, bf16) = (with("auto"), with("fp8"), with("bf16"));
    assert_eq!(auto.model.kv_cache, "fp8");
    let tokens = |s| memory(s).kv_cache_tokens as f64;
    assert_eq!(tokens(&auto), tokens(&fp8));
    let ratio = tokens(&auto) / tokens(&bf16);
    assert!((1.5..1.9).contains(&ratio), "{ratio}");
    let plan = deploy_on("dgx_h200", "deepseek_v4_flash", "tp 8 × ep", "");
    assert_eq!(
        plan.plan.deployments[0].model.kv_cache_dtype.as_deref(),
        Some("fp8")
    );
}

/// Block-FP8 experts split into shards vLLM must refine to finer blocks have no kernel
/// below compute capability 8.9 (`select_fp8_moe_backend`: Marlin takes 128 × 128 alone):
/// Qwen3-235B-A22B-FP8 at MoE TP 8 (192 wide, refined to 64) is refused on an A100 and
/// starts on an H100; with `ep` (whole experts) it starts on the A100 too.
#[test]
fn refined_fp8_expert_blocks_need_sm89() {
    let a100 = deploy_on("dgx_a100", "qwen3_235b_a22b_fp8", "tp 8", "");
    let e = first(&a100, Code::FormatNeedsNewerGpu);
    assert!(e.message.contains("No FP8 MoE backend"), "{}", e.message);
    let help = e.help.as_deref().unwrap_or("");
    assert!(help.contains("at most 4 ranks"), "{help}");
    let ep = deploy_on("dgx_a100", "qwen3_235b_a22b_fp8", "tp 8 × ep", "");
    assert!(
        !codes(&ep).contains(&Code::FormatNeedsNewerGpu),
        "{:?}",
        codes(&ep)
    );
    let h100 = deploy_on("dgx_h100", "qwen3_235b_a22b_fp8", "tp 8", "");
    assert!(
        !codes(&h100).contains(&Code::FormatNeedsNewerGpu),
        "{:?}",
        codes(&h100)
    );
}

/// NVFP4 experts in DeepEP low-latency's batched format have a kernel on data-centre
/// Blackwell alone (`FlashInferCuteDSLBatchedExperts`): Kimi K2.6 NVFP4 at `tp 1 × dp 8 ×
/// ep` with `deepep_low_latency` is refused on H200, starts with `deepep_high_throughput`
/// there, and with low latency on B200.
#[test]
fn nvfp4_experts_batched_by_deepep_low_latency_need_blackwell() {
    let on = |node: &str, backend: &str| {
        deploy_on(
            node,
            "kimi_k2_6_nvfp4",
            "tp 1 × dp 8 × ep",
            &format!(", all2all_backend = {backend}"),
        )
    };
    let e = first(
        &on("dgx_h200", "deepep_low_latency"),
        Code::FormatNeedsNewerGpu,
    )
    .clone();
    assert!(e.message.contains("No NvFp4 MoE backend"), "{}", e.message);
    for ok in [
        on("dgx_h200", "deepep_high_throughput"),
        on("dgx_b200", "deepep_low_latency"),
    ] {
        assert!(
            !codes(&ok).contains(&Code::FormatNeedsNewerGpu),
            "{:?}",
            codes(&ok)
        );
    }
}

/// LoRA on a MoE model's experts under `ep` (`FusedMoEWithLoRA._ep_check`): only vLLM's
/// default all-to-all, and not sequence-parallel (tp > 1 and dp > 1 with `ep`).
#[test]
fn lora_on_expert_parallel_experts_takes_the_default_exchange_and_no_sequence_parallelism() {
    let lora = |layout, engine| {
        Dist {
            engine,
            extra: ", lora = { adapters = [\"sql=org/qwen3-30b-sql-lora\"], max_loras = 2, max_rank = 16 }",
            ..Dist::on("dgx_h100", "qwen3_30b_a3b", layout)
        }
        .compile()
    };
    let sp = lora("tp 2 × dp 4 × ep", "");
    assert!(first(&sp, Code::LoraUnsupported)
        .message
        .contains("sequence-parallel"));
    let deepep = lora(
        "tp 1 × dp 8 × ep",
        ", all2all_backend = deepep_high_throughput",
    );
    assert!(first(&deepep, Code::LoraUnsupported)
        .message
        .contains("allgather_reducescatter"));
    let plain = lora("tp 1 × dp 8 × ep", "");
    assert!(
        !codes(&plain).contains(&Code::LoraUnsupported),
        "{:?}",
        codes(&plain)
    );
}

/// Speculative decoding vLLM 0.33 refuses at start-up: `mtp` on MiniMax-M2.7, whose MTP
/// modules vLLM drops and serves no draft for ("Unsupported speculative method: 'mtp'");
/// a `draft_model` whose heads the target's TP does not divide (the draft runs at the
/// target's TP, `SpeculativeConfig._verify_args`); a draft model with M-RoPE positions
/// (`LLMBaseProposer._raise_if_mrope`); EAGLE-3 on a class without `SupportsEagle3`; and
/// beside LoRA, a token budget below
/// `max_num_seqs × (tokens + 1)` (`EngineArgs.create_engine_config`).
#[test]
fn speculation_vllm_refuses_at_start_up() {
    let mtp = Dist {
        engine: ", speculative = { method = mtp, tokens = 3 }",
        ..Dist::on("dgx_h200", "minimax_m2_7", "tp 4")
    }
    .compile();
    let e = first(&mtp, Code::SpecMethodUnavailable);
    assert!(
        e.message.contains("Unsupported speculative method"),
        "{}",
        e.message
    );
    let world = MemoryWorld::new().with(
        "c.dist",
        "import std.nodes.dgx_h100\n\
         model big { hf = \"Qwen/Qwen2.5-72B-Instruct\", parameters = 72.7B, layers = 80, hidden = 8192, heads = 64, kv_heads = 8, intermediate = 29568, vocab = 152064, max_context = 32768 tokens, dtype = bf16 }\n\
         model small { hf = \"Qwen/Qwen2.5-7B-Instruct\", parameters = 7.6B, layers = 28, hidden = 3584, heads = 28, kv_heads = 4, intermediate = 18944, vocab = 152064, max_context = 32768 tokens, dtype = bf16 }\n\
         cluster c { nodes = 1 × dgx_h100 }\n\
         deploy d { model = big, cluster = c, layout = tp 8, engine = vllm { max_model_len = 16k tokens, \
         speculative = { method = draft_model, draft = small, tokens = 4 } } }\n",
    );
    let draft = driver::compile_file(&world, "c.dist").unwrap();
    let e = first(&draft, Code::SpecMethodUnavailable);
    assert!(
        e.message.contains("divisible by tensor parallel size"),
        "{}",
        e.message
    );
    // A draft with M-RoPE positions (Qwen3.5's small models) is refused at start-up
    // (`_raise_if_mrope`); the same draft without them is not.
    let mrope_draft = |mrope: bool| {
        let world = MemoryWorld::new().with(
            "q.dist",
            &format!(
                "import std.nodes.dgx_h200\n\
                 import std.models.qwen3_5_27b\n\
                 model small {{ hf = \"Qwen/Qwen3.5-0.8B\", parameters = 0.8B, layers = 24, hidden = 1024, heads = 8, kv_heads = 2, head_dim = 256, intermediate = 3584, vocab = 248320, max_context = 262144 tokens, dtype = bf16, mrope = {mrope} }}\n\
                 cluster c {{ nodes = 1 × dgx_h200 }}\n\
                 deploy d {{ model = qwen3_5_27b, cluster = c, layout = tp 2, engine = vllm {{ max_model_len = 16k tokens, \
                 speculative = {{ method = draft_model, draft = small, tokens = 4 }} }} }}\n"
            ),
        );
        driver::compile_file(&world, "q.dist").unwrap()
    };
    let with_mrope = mrope_draft(true);
    let e = first(&with_mrope, Code::SpecMethodUnavailable);
    assert!(
        e.message.contains("does not support M-RoPE"),
        "{}",
        e.message
    );
    let without = codes(&mrope_draft(false));
    assert!(
        !without.contains(&Code::SpecMethodUnavailable),
        "{without:?}"
    );
    let lora_spec = |tokens: u32| {
        Dist {
            engine: &format!(
                ", speculative = {{ method = eagle3, source = \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", tokens = {tokens} }}"
            ),
            extra: ", lora = { adapters = [\"sql=org/llama-3.1-8b-sql-lora\"], max_loras = 4, max_rank = 16 }",
            ..Dist::on("dgx_h100", "llama_3_1_8b", "tp 1")
        }
        .compile()
    };
    // EAGLE-3 needs `SupportsEagle3`, which Mixtral's class lacks; Llama's has it.
    let eagle3 = |model| {
        Dist {
            engine: ", speculative = { method = eagle3, source = \"org/eagle3-head\", tokens = 3 }",
            ..Dist::on("dgx_h100", model, "tp 2")
        }
        .compile()
    };
    let e = first(&eagle3("mixtral_8x7b"), Code::SpecMethodUnavailable).clone();
    assert!(
        e.message.contains("does not support EAGLE3"),
        "{}",
        e.message
    );
    assert!(!codes(&eagle3("llama_3_1_8b")).contains(&Code::SpecMethodUnavailable));
    // 1,024 sequences × 9 = 9,216 > 8,192; × 4 = 4,096 fits.
    assert!(first(&lora_spec(8), Code::BatchBelowSeqs)
        .message
        .contains("9216"));
    assert!(!codes(&lora_spec(3)).contains(&Code::BatchBelowSeqs));
}

/// Rows 11, 56, 85 and 104: the model's class is the one its config.json names
/// (`architecture`), whatever its repository is called. A fine-tune under its own name
/// (`acme/support-bot-v2`) of MiniMax-M2.7 is still MiniMaxM2ForCausalLM, whose MTP layers
/// vLLM does not serve, and of Mixtral still lacks `SupportsEagle3`; a Llama whose
/// repository name says "mixtral" is Llama's class, which has it. Without `architecture`,
/// the `hf` name decides, as before.
#[test]
fn the_class_is_the_architecture_the_config_names_not_the_repository_name() {
    let mtp = |overrides| {
        Dist {
            overrides,
            engine: ", speculative = { method = mtp, tokens = 1 }",
            ..Dist::on("dgx_h200", "minimax_m2_7", "tp 4")
        }
        .compile()
    };
    let fine_tune = mtp(r#"hf = "acme/support-bot-v2""#);
    assert!(
        first(&fine_tune, Code::SpecMethodUnavailable)
            .message
            .contains("Unsupported speculative method"),
        "{:?}",
        codes(&fine_tune)
    );
    let eagle3 = |model, overrides| {
        Dist {
            overrides,
            engine: ", speculative = { method = eagle3, source = \"org/eagle3-head\", tokens = 3 }",
            ..Dist::on("dgx_h100", model, "tp 2")
        }
        .compile()
    };
    let mixtral = eagle3("mixtral_8x7b", r#"hf = "acme/router-v1""#);
    assert!(first(&mixtral, Code::SpecMethodUnavailable)
        .message
        .contains("does not support EAGLE3"));
    let llama = eagle3("llama_3_1_8b", r#"hf = "acme/mixtral-distilled-8b""#);
    assert!(
        !codes(&llama).contains(&Code::SpecMethodUnavailable),
        "{:?}",
        codes(&llama)
    );
    // A hand-written model naming no architecture: its `hf` decides.
    let by_name = Dist {
        overrides: r#"hf = "mistralai/Mixtral-8x7B-Instruct-v0.1""#,
        ..Dist::on("dgx_h100", "llama_3_1_8b", "tp 2")
    };
    let s = by_name.scenario();
    assert_eq!(
        s.model.architecture.as_deref(),
        Some("LlamaForCausalLM"),
        "inherited from the stdlib's Llama"
    );
    assert!(dic_compiler::analysis::vllm_class::eagle3_unserved(&s.model).is_none());
    let mut unnamed = s.model.clone();
    unnamed.architecture = None;
    assert!(dic_compiler::analysis::vllm_class::eagle3_unserved(&unnamed).is_some());
}
