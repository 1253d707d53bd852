//! The `engine = vllm { … }` block's options: one row each, in the order their flags are
//! emitted, with their types, what they put on vLLM's command line and their docs; and
//! the values two of them take.

use super::*;

/// The values of `engine = vllm { all2all_backend = … }`: vLLM 0.33's
/// `--all2all-backend` choices dic models.
pub const ALL2ALL_BACKENDS: &[&str] = &[
    "allgather_reducescatter",
    "deepep_high_throughput",
    "deepep_low_latency",
];

/// The values of `engine = vllm { cudagraph_mode = … }`: vLLM 0.33's
/// `compilation_config.cudagraph_mode` values dic models. (`FULL`, which captures steps
/// with a prompt chunk as full graphs only where the attention backend can, is not one.)
pub const CUDAGRAPH_MODES: &[&str] = &[
    "full_and_piecewise",
    "full_decode_only",
    "piecewise",
    "none",
];

/// Options of the `vllm { … }` engine block, in the order their flags are emitted.
pub static VLLM_OPTIONS: &[Field] = &[
    engine!(
        Port,
        "port",
        Ty::Int { min: 1, max: 65535 },
        VllmFlag::Value("--port"),
        concat!("API server port (default ", vllm_default!(port), ")")
    ),
    engine!(
        GpuMemoryUtilization,
        "gpu_memory_utilization",
        Ty::Quantity(D::Ratio, Range::above_zero(1.0)),
        VllmFlag::Value("--gpu-memory-utilization"),
        concat!(
            "fraction of device memory vLLM may use (vLLM 0.33's default ",
            vllm_default!(gpu_memory_utilization),
            ")"
        )
    ),
    engine!(
        MaxModelLen,
        "max_model_len",
        Ty::Quantity(D::Tokens, Range::above_zero(2147483648.0).whole()),
        VllmFlag::Value("--max-model-len"),
        "longest request (prompt + output); default the model's max_context"
    ),
    engine!(
        MaxNumSeqs,
        "max_num_seqs",
        Ty::Int {
            min: 1,
            max: 1 << 24
        },
        VllmFlag::Value("--max-num-seqs"),
        concat!(
            "most requests in one batch, per DP rank (default ",
            vllm_default!(max_num_seqs_large_gpu),
            " on large GPUs, else ",
            vllm_default!(max_num_seqs),
            ")"
        )
    ),
    engine!(
        MaxNumBatchedTokens,
        "max_num_batched_tokens",
        Ty::Quantity(D::Tokens, Range::above_zero(2147483648.0).whole()),
        VllmFlag::Value("--max-num-batched-tokens"),
        concat!(
            "token budget per step (default ",
            vllm_default!(max_num_batched_tokens_160gib),
            ", ",
            vllm_default!(max_num_batched_tokens_large_gpu),
            " or ",
            vllm_default!(max_num_batched_tokens),
            " by GPU memory)"
        )
    ),
    engine!(
        BlockSize,
        "block_size",
        Ty::Int {
            min: 1,
            max: 1 << 16
        },
        VllmFlag::Value("--block-size"),
        concat!(
            "tokens per KV block (default ",
            vllm_default!(block_size),
            "; ",
            vllm_default!(mla_block_size),
            " for MLA models)"
        )
    ),
    engine!(
        EnforceEager,
        "enforce_eager",
        Ty::Bool,
        VllmFlag::Switch {
            on: "--enforce-eager",
            off: None
        },
        "no CUDA graphs: frees their memory for the KV cache, but every step then waits on the CPU's launches (dic charges its fitted time per layer, as for prompt chunks)"
    ),
    engine!(
        CudagraphMode,
        "cudagraph_mode",
        Ty::Enum(CUDAGRAPH_MODES),
        VllmFlag::WhenSet("--compilation-config.cudagraph_mode"),
        "which steps run as CUDA graphs: `full_and_piecewise` (vLLM 0.33's default: decode steps as full graphs, steps with a prompt chunk piecewise up to the largest captured size), `full_decode_only` (steps with a prompt chunk run without graphs, at the pace of the CPU's launches; InferenceX's B200 recipes), `piecewise`, or `none` (no graphs, compiled kernels: every step waits on the CPU's launches, no graph memory; also what `enforce_eager = true` means, whatever this says); emitted as one key of `--compilation-config`, so `extra_args` may set its other keys as `--compilation-config.KEY=VALUE`"
    ),
    engine!(
        KvCacheMemory,
        "kv_cache_memory",
        q(D::Bytes),
        VllmFlag::WhenSet("--kv-cache-memory-bytes"),
        "fixed KV-cache size per GPU (skips utilization-based sizing)"
    ),
    engine!(
        EnablePrefixCaching,
        "enable_prefix_caching",
        Ty::Bool,
        VllmFlag::Switch {
            on: "--enable-prefix-caching",
            off: Some("--disable-prefix-caching")
        },
        "prefix caching (vLLM's default when unset)"
    ),
    engine!(
        Speculative,
        "speculative",
        Ty::Block(SPECULATIVE_FIELDS),
        VllmFlag::Flags(&["--spec-method", "--spec-model", "--spec-tokens"]),
        "speculative decoding: `{ method = eagle3, source = \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", tokens = 3, acceptance = 70% }`; the draft's weights and KV cache are in the memory check, TPOT comes from the tokens accepted per step and the verify and draft cost"
    ),
    engine!(
        CpuOffload,
        "cpu_offload",
        q(D::Bytes),
        VllmFlag::WhenSet("--cpu-offload-gb"),
        "weights kept in CPU memory per GPU (emitted in GiB)"
    ),
    engine!(
        All2allBackend,
        "all2all_backend",
        Ty::Enum(ALL2ALL_BACKENDS),
        VllmFlag::WhenSet("--all2all-backend"),
        "how a MoE layer's tokens move between DP ranks (with dp > 1): `allgather_reducescatter` (vLLM 0.33's default: every rank gathers all DP ranks' tokens and reduce-scatters the outputs back) or DeepEP's all-to-all, `deepep_high_throughput` or `deepep_low_latency` (with `ep`; each token goes only to the ranks of its experts; needs an image with DeepEP's kernels)"
    ),
    engine!(
        Dbo,
        "dbo",
        Ty::Bool,
        VllmFlag::Switch {
            on: "--enable-dbo",
            off: None
        },
        "dual batch overlap (vLLM's `--enable-dbo`): a step of at least 32 decode tokens per rank (512 with a prompt chunk) runs as two micro-batches, one's MoE all-to-all under the other's kernels, with 20 SMs kept for the communication; needs DeepEP (`all2all_backend = deepep_low_latency` or `deepep_high_throughput`) or vLLM refuses to start (E0413)"
    ),
    engine!(
        Launcher,
        "launcher",
        Ty::Enum(&["native", "ray"]),
        VllmFlag::DicOnly(
            "chooses vLLM's native `--nnodes` launch or Ray (`--distributed-executor-backend ray`)"
        ),
        "multi-node launch: vLLM's native `--nnodes` (default) or Ray"
    ),
    engine!(
        ExtraArgs,
        "extra_args",
        Ty::List(&Ty::Str(TextRule::Free)),
        VllmFlag::Passthrough,
        "more `vllm serve` options, one word per item, e.g. [\"--trust-remote-code\", \"--reasoning-parser\", \"deepseek_r1\"]: checked against vLLM 0.33's own options; options dic sets (layout, engine fields, launch) are refused with the field that sets them; a CUDA-graph capture limit written here (`--max-cudagraph-capture-size N`) also sets which steps dic times as graphs and their memory"
    ),
    engine!(
        Env,
        "env",
        Ty::List(&Ty::Str(TextRule::EnvAssignment)),
        VllmFlag::Passthrough,
        "environment of the vLLM processes as \"NAME=value\", e.g. [\"VLLM_ATTENTION_BACKEND=FLASHINFER\"]; no credentials (they are referenced from Secrets) and no variable dic sets"
    ),
    engine!(
        ActivationMemory,
        "activation_memory",
        q(D::Bytes),
        VllmFlag::DicOnly("overrides dic's memory estimate"),
        "override dic's estimate of the profile run's peak activations per GPU"
    ),
    engine!(
        NonTorchMemory,
        "non_torch_memory",
        q(D::Bytes),
        VllmFlag::DicOnly("overrides dic's memory estimate"),
        "override dic's estimate of non-torch memory (NCCL, cuBLAS) per GPU"
    ),
    engine!(
        CudaGraphMemory,
        "cuda_graph_memory",
        q(D::Bytes),
        VllmFlag::DicOnly("overrides dic's memory estimate"),
        "override dic's estimate of CUDA-graph memory per GPU"
    ),
];
