//! One point to analyse: a model on a topology with a layout, engine settings and
//! (optionally) a workload — all numbers resolved, no references left.
//!
//! Built from a checked deployment ([`super::from_program`]) or from `dic estimate`'s
//! flags; every analysis function takes a [`Scenario`], so both paths share one model.

use crate::program::{Gpu, Layout, Link, LinkType, Model};

#[derive(Debug, Clone, PartialEq)]
pub struct LinkSpec {
    pub name: String,
    pub link_type: LinkType,
    /// Bytes/s per direction.
    pub bandwidth: f64,
    /// Seconds per message (α).
    pub latency: f64,
}

impl LinkSpec {
    pub fn from_link(name: &str, l: &Link) -> LinkSpec {
        LinkSpec {
            name: name.to_string(),
            link_type: l.link_type,
            bandwidth: l.bandwidth,
            latency: l.latency,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct GpuSpec {
    pub name: String,
    pub memory: f64,
    pub hbm_bandwidth: f64,
    pub bf16: f64,
    pub fp16: f64,
    pub fp8: Option<f64>,
    pub fp4: Option<f64>,
    pub int8: Option<f64>,
    pub architecture: Option<String>,
    /// The host link, used for GPU-to-GPU traffic in nodes without a scale-up link.
    pub pcie: LinkSpec,
    /// vLLM runs on its ROCm platform (`vendor = amd`): its own image, the AMD device
    /// plugin's resource, `platforms/rocm.py`'s rules.
    pub rocm: bool,
}

impl GpuSpec {
    pub fn from_gpu(name: &str, g: &Gpu, pcie: LinkSpec) -> GpuSpec {
        GpuSpec {
            name: name.to_string(),
            memory: g.memory,
            hbm_bandwidth: g.memory_bandwidth,
            bf16: g.bf16,
            fp16: g.fp16,
            fp8: g.fp8,
            fp4: g.fp4,
            int8: g.int8,
            architecture: g.architecture.clone(),
            pcie,
            rocm: g
                .vendor
                .as_deref()
                .is_some_and(|v| v.eq_ignore_ascii_case("amd")),
        }
    }

    /// Tensor throughput for matmuls whose weights are in `weights` precision. FP8
    /// weights run FP8 matmuls where the GPU has them; 4-bit formats run at FP4 rate on
    /// Blackwell and otherwise as weight-only quantization at 16-bit rate.
    pub fn matmul_flops(&self, weights: &str) -> f64 {
        match weights {
            "fp8" | "int8" => self.fp8.or(self.int8).unwrap_or(self.bf16),
            "nvfp4" | "mxfp4" => self.fp4.unwrap_or(self.bf16),
            "fp16" => self.fp16,
            _ => self.bf16,
        }
    }

    /// vLLM treats GPUs with at least 70 GiB (not A100) as large for its batch defaults.
    pub fn is_large_for_vllm(&self) -> bool {
        self.memory >= 70.0 * GIB && self.architecture.as_deref() != Some("ampere")
    }

    /// The CUDA compute capability vLLM compares with a quantization method's minimum
    /// (`VllmConfig._get_quantization_config`), as NVIDIA publishes it per generation
    /// (developer.nvidia.com/cuda-gpus): the generation's lowest part, which decides every
    /// threshold vLLM 0.33 uses (6.0, 7.0, 7.5, 8.0, 8.9, 9.0, 10.0; ampere's 8.6 parts and
    /// B300's 10.3 cross none of them). `None` for AMD and for a GPU without `architecture`.
    pub fn compute_capability(&self) -> Option<f64> {
        compute_capability(self.architecture.as_deref()?)
    }

    /// `m`'s `auto` KV cache as vLLM 0.33 resolves it on this GPU
    /// ([`super::attention_backend::auto_kv_cache`]).
    pub fn resolve_auto_kv_cache(&self, m: &mut Model) {
        super::attention_backend::resolve_auto_kv_cache(m, self.compute_capability(), self.rocm);
    }
}

/// [`GpuSpec::compute_capability`] of a catalog `architecture`.
pub fn compute_capability(architecture: &str) -> Option<f64> {
    Some(match architecture {
        "volta" => 7.0,
        "turing" => 7.5,
        "ampere" => 8.0,
        "ada" => 8.9,
        "hopper" => 9.0,
        "blackwell" => 10.0,
        "blackwell_rtx" => 12.0,
        _ => return None,
    })
}

pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Scale-out network of one node: `nics` ports of `link`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleOut {
    pub nics: u64,
    pub link: LinkSpec,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    pub gpu: GpuSpec,
    pub gpus_per_node: u64,
    pub nodes: u64,
    /// NVLink/NVSwitch/XGMI inside a node (or rack), if any.
    pub scale_up: Option<LinkSpec>,
    /// GPUs that share one scale-up domain (≥ gpus_per_node for rack-scale NVLink).
    pub scale_up_domain: u64,
    pub scale_out: Option<ScaleOut>,
    pub price_per_node_hour: Option<f64>,
    /// Host memory per node (the node's `cpu_memory`); `None` where it is not stated.
    pub cpu_memory: Option<f64>,
}

impl Topology {
    pub fn total_gpus(&self) -> u64 {
        self.gpus_per_node * self.nodes
    }

    /// The fewest nodes that `gpus` GPUs can occupy (whole nodes: a node is rented whole);
    /// a layout may need more ([`Topology::nodes_for_layout`]).
    pub fn nodes_for(&self, gpus: u64) -> u64 {
        gpus.div_ceil(self.gpus_per_node.max(1))
    }

    /// The nodes a layout occupies as dic places it: a replica that fits a node runs
    /// whole on one node (as many per node as fit), a larger one on whole nodes of its
    /// own. `tp 1 × pp 3 × dp 8` on 8-GPU nodes is two replicas per node: 4 nodes.
    pub fn nodes_for_layout(&self, l: &crate::program::Layout) -> u64 {
        let per_node = self.gpus_per_node.max(1);
        let replica = l.replica_gpus().max(1);
        if replica <= per_node {
            l.dp.max(1).div_ceil(per_node / replica)
        } else {
            self.nodes_for(l.gpus())
        }
    }

    /// $/h of the fewest nodes `gpus` GPUs can occupy, when the cluster is priced.
    pub fn price_for(&self, gpus: u64) -> Option<f64> {
        self.price_per_node_hour
            .map(|p| p * self.nodes_for(gpus) as f64)
    }

    /// $/h of the nodes a layout occupies, when the cluster is priced.
    pub fn price_for_layout(&self, l: &crate::program::Layout) -> Option<f64> {
        self.price_per_node_hour
            .map(|p| p * self.nodes_for_layout(l) as f64)
    }
    /// The link between two GPUs of one node.
    pub fn intra_node_link(&self) -> &LinkSpec {
        self.scale_up.as_ref().unwrap_or(&self.gpu.pcie)
    }
    /// Per-GPU share of the node's scale-out bandwidth (bytes/s per direction).
    pub fn scale_out_bandwidth_per_gpu(&self) -> Option<f64> {
        self.scale_out
            .as_ref()
            .map(|s| s.nics as f64 * s.link.bandwidth / self.gpus_per_node.max(1) as f64)
    }
}

/// How much traffic: an arrival rate (open loop) or a fixed concurrency (closed loop).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    Rate(f64),
    Concurrency(u64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkloadSpec {
    pub prompt: f64,
    pub output: f64,
    pub load: Load,
    /// Requests in a finite run (a benchmark of that many requests); `None`: steady state.
    pub requests: Option<f64>,
    /// Prompt tokens per request that vLLM's prefix cache already holds (not prefilled
    /// again); 0 when prefix caching is off.
    pub cached_prompt: f64,
    /// Of those, the leading tokens every request shares (a system prompt, a RAG
    /// template): their KV blocks are held once, not per running request.
    pub shared_prefix: f64,
    /// Prompt tokens the workload says are reusable (`prefix_reuse`, `shared_prefix`),
    /// whether or not the engine caches them.
    pub declared_reuse: f64,
}

impl WorkloadSpec {
    /// A workload without prefix reuse.
    pub fn new(prompt: f64, output: f64, load: Load, requests: Option<f64>) -> WorkloadSpec {
        WorkloadSpec {
            prompt,
            output,
            load,
            requests,
            cached_prompt: 0.0,
            shared_prefix: 0.0,
            declared_reuse: 0.0,
        }
    }

    /// The arrival rate of an open-loop workload (req/s); `None` for a closed loop.
    pub fn rate(&self) -> Option<f64> {
        match self.load {
            Load::Rate(r) => Some(r),
            Load::Concurrency(_) => None,
        }
    }
}

/// Overrides for the memory terms that are estimated rather than exact.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MemoryOverrides {
    pub activation: Option<f64>,
    pub non_torch: Option<f64>,
    pub cuda_graphs: Option<f64>,
}

/// Engine settings with vLLM 0.33's defaults filled in: every option of the schema's
/// engine table ([`crate::schema::VLLM_OPTIONS`]) resolved once, here. The memory model,
/// the performance model and the emitted `vllm serve` flags all read these.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineSettings {
    pub gpu_memory_utilization: f64,
    pub max_model_len: u64,
    pub max_num_seqs: u64,
    pub max_num_batched_tokens: u64,
    pub block_size: u64,
    pub enforce_eager: bool,
    /// Which steps run as CUDA graphs when not eager (vLLM's
    /// `compilation_config.cudagraph_mode`).
    pub cudagraph_mode: CudaGraphMode,
    /// The decode attention runs vLLM's kernels, whose measured rate per byte of an 8-bit
    /// KV cache applies (`perf::FP8_KV_READ_FACTOR`); false only for the TensorRT-LLM
    /// reference rows, whose kernels the tables did not measure (read per byte, as
    /// 16-bit).
    pub vllm_attention: bool,
    pub kv_cache_memory: Option<f64>,
    /// Bytes of weights kept in CPU memory per GPU (0: none).
    pub cpu_offload: f64,
    /// `None`: vLLM's default.
    pub enable_prefix_caching: Option<bool>,
    pub port: u64,
    /// Multi-node launch through Ray instead of vLLM's native `--nnodes`.
    pub ray: bool,
    /// `--all2all-backend` when written (`None`: vLLM's `allgather_reducescatter`).
    pub all2all_backend: Option<String>,
    /// Dual batch overlap (`--enable-dbo`): steps past vLLM's thresholds run as two
    /// micro-batches whose MoE exchange overlaps the other's kernels (`perf::step`).
    pub dbo: bool,
    pub overrides: MemoryOverrides,
    /// Speculative decoding, with the draft model resolved.
    pub speculative: Option<SpecDecode>,
    /// The deployment's own correction factors (`calibration { … }`; 1 where none).
    pub calibration: Calibration,
    /// The batch limits as written and vLLM's defaults for them before the layout is
    /// known (`super::deepep::apply_layout_defaults` settles them for a layout).
    pub batch: BatchLimits,
    /// LoRA slots vLLM reserves (`lora = { … }`); `None`: no LoRA.
    pub lora: Option<super::lora::LoraSpec>,
    /// Bytes of the KV offload buffer per engine, summed over its ranks (`kv_offload =
    /// { size }`; 0: none).
    pub kv_offload: f64,
    /// The offload runs through LMCache (`kv_offload = { backend = lmcache }`), not vLLM's
    /// own connector.
    pub kv_offload_lmcache: bool,
    /// The memory each pod requests and is limited to, where written (`pod = { memory }`);
    /// `None`: dic's own (`ir::pod_memory`).
    pub pod_memory: Option<f64>,
    /// The user's `extra_args`, for vLLM's checks of the options only they reach
    /// (`rules::passthrough`).
    pub extra_args: Vec<String>,
    /// The user's `env` of the vLLM processes, for vLLM's checks of the variables it
    /// reads (`rules::passthrough`, `deployable::pools_cannot_pair`).
    pub env: Vec<(String, String)>,
}

impl EngineSettings {
    /// `PYTORCH_CUDA_ALLOC_CONF` asks for `expandable_segments:True` and nothing moves the
    /// KV cache off that allocator (`--enable-sleep-mode` or `--enable-cumem-allocator`
    /// in `extra_args`): vLLM 0.33 then refuses every KV connector
    /// (`config/vllm.py:VllmConfig._verify_kv_transfer_compat`).
    pub fn expandable_segments_without_cumem(&self) -> bool {
        let expandable = self
            .env
            .iter()
            .any(|(k, v)| k == "PYTORCH_CUDA_ALLOC_CONF" && v.contains("expandable_segments:True"));
        let cumem = self.extra_args.iter().any(|w| {
            w.starts_with("--enable-sleep-mode") || w.starts_with("--enable-cumem-allocator")
        });
        expandable && !cumem
    }
}

/// `max_num_seqs` and `max_num_batched_tokens` as written (`None`: unset) and the
/// defaults vLLM would give them on this GPU without a layout-specific rule
/// (`EngineArgs._set_default_max_num_seqs_and_batched_tokens_args`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BatchLimits {
    pub written_seqs: Option<u64>,
    pub written_tokens: Option<u64>,
    pub default_seqs: u64,
    pub default_tokens: u64,
}

/// vLLM's token budget when DeepEP's low-latency kernels batch the DP ranks' tokens
/// (`SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP`, applied by
/// `EngineArgs._set_default_max_num_seqs_and_batched_tokens_args` when
/// `ParallelConfig.use_batched_dp_moe`: `deepep_low_latency` with EP and DP > 1).
pub const BATCHED_DP_TOKEN_BUDGET: u64 = 256;

impl BatchLimits {
    /// `(max_num_seqs, max_num_batched_tokens)` as vLLM settles them: written values
    /// stand; an unset token budget is [`BATCHED_DP_TOKEN_BUDGET`] under batched DP MoE
    /// and the GPU's default otherwise; an unset `max_num_seqs` is its default, at most
    /// the token budget.
    pub fn settle(&self, batched_dp: bool) -> (u64, u64) {
        let tokens = self.written_tokens.unwrap_or(if batched_dp {
            BATCHED_DP_TOKEN_BUDGET
        } else {
            self.default_tokens
        });
        let seqs = self
            .written_seqs
            .unwrap_or_else(|| self.default_seqs.min(tokens).max(1));
        (seqs, tokens)
    }
}

pub use crate::program::Calibration;

impl EngineSettings {
    /// Whether any step runs as a CUDA graph: not under `--enforce-eager`, not with
    /// `cudagraph_mode = none`.
    pub fn graphs(&self) -> bool {
        !self.enforce_eager && self.cudagraph_mode.captures()
    }

    /// The largest CUDA-graph capture size written in `extra_args`
    /// (`--max-cudagraph-capture-size`, or the compilation config's
    /// `max_cudagraph_capture_size` by its dotted names), as written: vLLM refuses one
    /// below 1 where graphs are captured (`rules::passthrough`); `None`: vLLM's default.
    pub fn written_capture_limit(&self) -> Option<i64> {
        [
            "--max-cudagraph-capture-size",
            "--compilation-config.max_cudagraph_capture_size",
            "-cc.max_cudagraph_capture_size",
        ]
        .iter()
        .find_map(|name| option_value(&self.extra_args, name))
        .and_then(|v| v.trim().parse::<i64>().ok())
    }

    /// [`EngineSettings::written_capture_limit`] where vLLM can take it (at least 1).
    fn capture_limit(&self) -> Option<u64> {
        self.written_capture_limit()
            .and_then(|l| u64::try_from(l).ok())
            .filter(|l| *l >= 1)
    }

    /// The number of CUDA-graph sizes vLLM captures on a GPU of `architecture`
    /// ([`cuda_graph_captures`], with the limit `extra_args` writes).
    pub fn cuda_graph_captures(&self, architecture: Option<&str>) -> u64 {
        cuda_graph_captures(
            self.max_num_seqs,
            self.max_num_batched_tokens,
            architecture,
            self.capture_limit(),
        )
    }

    /// The most tokens a step runs as a CUDA graph on a GPU of `architecture`
    /// ([`max_cuda_graph_size`], with the limit `extra_args` writes).
    pub fn max_cuda_graph_size(&self, architecture: Option<&str>) -> u64 {
        max_cuda_graph_size(
            self.max_num_seqs,
            self.max_num_batched_tokens,
            architecture,
            self.capture_limit(),
        )
    }
}

/// vLLM's `compilation_config.cudagraph_mode`, as far as the models can tell the modes
/// apart: whether any step runs as a CUDA graph, and whether a step that carries a prompt
/// chunk can.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CudaGraphMode {
    /// vLLM's default (`FULL_AND_PIECEWISE`): full graphs for decode-only steps, piecewise
    /// graphs (attention outside) for mixed steps up to the largest captured size.
    #[default]
    FullAndPiecewise,
    /// `FULL_DECODE_ONLY`: graphs for decode-only steps; every step with a prompt chunk
    /// runs without, at the pace of the CPU's launches.
    FullDecodeOnly,
    /// `PIECEWISE`: piecewise graphs for every step up to the largest captured size (to
    /// the step model, as `FullAndPiecewise`).
    Piecewise,
    /// `NONE`: compiled kernels, no graphs: every step waits on the CPU's launches, and no
    /// memory goes to graphs.
    None,
}

impl CudaGraphMode {
    /// The mode `cudagraph_mode = …` names ([`crate::schema::CUDAGRAPH_MODES`]); vLLM's
    /// default when unset.
    pub fn from_option(value: Option<&str>) -> CudaGraphMode {
        match value {
            Some("full_decode_only") => CudaGraphMode::FullDecodeOnly,
            Some("piecewise") => CudaGraphMode::Piecewise,
            Some("none") => CudaGraphMode::None,
            _ => CudaGraphMode::FullAndPiecewise,
        }
    }

    /// The mode as vLLM spells it (`FULL_DECODE_ONLY`).
    pub fn vllm_name(self) -> &'static str {
        match self {
            CudaGraphMode::FullAndPiecewise => "FULL_AND_PIECEWISE",
            CudaGraphMode::FullDecodeOnly => "FULL_DECODE_ONLY",
            CudaGraphMode::Piecewise => "PIECEWISE",
            CudaGraphMode::None => "NONE",
        }
    }

    /// Whether the mode captures any step as a CUDA graph (all but `NONE`; with
    /// `--enforce-eager`, none does: [`EngineSettings::graphs`]).
    pub fn captures(self) -> bool {
        self != CudaGraphMode::None
    }
}

/// Speculative decoding as the models read it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecDecode {
    /// One of [`crate::schema::SPEC_METHODS`].
    pub method: String,
    /// Tokens drafted per step.
    pub tokens: u64,
    /// vLLM's acceptance rate: accepted ÷ drafted tokens
    /// (`vllm:spec_decode_num_accepted_tokens` ÷ `…_num_draft_tokens`).
    pub acceptance: f64,
    /// What `--spec-model` names: the EAGLE head's checkpoint or the draft model's `hf`.
    pub source: Option<String>,
    /// The draft model of `method = draft_model`.
    pub draft: Option<Box<Model>>,
}

impl SpecDecode {
    /// Tokens each sequence advances per step on average: the drafts accepted plus the
    /// token the target's verify pass always yields, `1 + a × k` for vLLM's acceptance
    /// rate `a` (accepted ÷ drafted, so `a × k` drafts are accepted per step) and `k`
    /// drafted tokens. (Read as each position's chance of acceptance, the field gave
    /// `(1 − aᵏ⁺¹)/(1 − a)`: 2.53 tokens at a = 0.7, k = 3, where vLLM's ratio means 3.1.)
    pub fn tokens_per_step(&self) -> f64 {
        1.0 + self.acceptance.clamp(0.0, 1.0) * self.tokens as f64
    }
}

/// vLLM 0.33's defaults, defined beside the engine options they fill.
pub use crate::schema::vllm_defaults;

#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub model_name: String,
    pub model: Model,
    pub topology: Topology,
    pub layout: Layout,
    pub engine: EngineSettings,
    pub workload: Option<WorkloadSpec>,
}

/// Fills vLLM's defaults for what the user left unset.
pub fn engine_settings(
    model: &Model,
    gpu: &GpuSpec,
    o: &crate::program::VllmOptions,
) -> EngineSettings {
    let large = gpu.is_large_for_vllm();
    let batch = BatchLimits {
        written_seqs: o.max_num_seqs,
        written_tokens: o.max_num_batched_tokens.map(|t| t as u64),
        default_seqs: if large {
            vllm_defaults::MAX_NUM_SEQS_LARGE_GPU
        } else {
            vllm_defaults::MAX_NUM_SEQS
        },
        default_tokens: if gpu.memory >= 160.0 * GIB {
            vllm_defaults::MAX_NUM_BATCHED_TOKENS_160GIB
        } else if large {
            vllm_defaults::MAX_NUM_BATCHED_TOKENS_LARGE_GPU
        } else {
            vllm_defaults::MAX_NUM_BATCHED_TOKENS
        },
    };
    let (seqs, mnbt) = batch.settle(false);
    let default_block = super::attention_backend::default_block_size(model);
    EngineSettings {
        gpu_memory_utilization: o
            .gpu_memory_utilization
            .unwrap_or(vllm_defaults::GPU_MEMORY_UTILIZATION),
        max_model_len: o
            .max_model_len
            .map(|l| l as u64)
            .unwrap_or(model.max_context as u64),
        max_num_seqs: seqs,
        max_num_batched_tokens: mnbt,
        block_size: o.block_size.unwrap_or(default_block),
        enforce_eager: o.enforce_eager,
        cudagraph_mode: CudaGraphMode::from_option(o.cudagraph_mode.as_deref()),
        vllm_attention: true,
        kv_cache_memory: o.kv_cache_memory,
        cpu_offload: o.cpu_offload.unwrap_or(0.0),
        enable_prefix_caching: o.enable_prefix_caching,
        port: o.port(),
        ray: o.launcher.as_deref() == Some("ray"),
        all2all_backend: o.all2all_backend.clone(),
        dbo: o.dbo,
        overrides: MemoryOverrides {
            activation: o.activation_memory,
            non_torch: o.non_torch_memory,
            cuda_graphs: o.cuda_graph_memory,
        },
        speculative: None,
        calibration: Calibration::default(),
        batch,
        lora: None,
        kv_offload: 0.0,
        kv_offload_lmcache: false,
        pod_memory: None,
        extra_args: o.extra_args.clone(),
        env: o.env.clone(),
    }
}

/// The value of a `vllm serve` option in `extra_args`, written `--name value` or
/// `--name=value`.
pub(crate) fn option_value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().enumerate().find_map(|(i, w)| {
        if w == name {
            args.get(i + 1).map(String::as_str)
        } else {
            w.strip_prefix(name).and_then(|rest| rest.strip_prefix('='))
        }
    })
}

/// The largest batch (tokens of one step) vLLM captures in a CUDA graph
/// (`VllmConfig._set_cudagraph_sizes`): the `max_cudagraph_capture_size` written
/// (`written`), else `min(2 × max_num_seqs, 512)`, 1024 in place of 512 on the data-centre
/// Blackwell parts (SM100/SM103: `blackwell`, not the RTX parts' `blackwell_rtx`); either
/// at most `max_num_batched_tokens`. A step with more tokens runs without CUDA
/// graphs, its kernels launched from the CPU as it goes (the step model's
/// `eager_layer_time`). (vLLM also multiplies max_num_seqs by a speculative step's query
/// length; dic does not.)
pub fn max_cuda_graph_size(
    max_num_seqs: u64,
    mnbt: u64,
    architecture: Option<&str>,
    written: Option<u64>,
) -> u64 {
    let cap = if architecture == Some("blackwell") {
        1024
    } else {
        512
    };
    written.unwrap_or((2 * max_num_seqs).min(cap)).min(mnbt)
}

/// Number of CUDA-graph capture sizes vLLM uses (`VllmConfig._set_cudagraph_sizes`):
/// `[1, 2, 4] + 8..=248 step 8 + 256..=max step 16`, `max` = [`max_cuda_graph_size`].
pub fn cuda_graph_captures(
    max_num_seqs: u64,
    mnbt: u64,
    architecture: Option<&str>,
    written: Option<u64>,
) -> u64 {
    let max = max_cuda_graph_size(max_num_seqs, mnbt, architecture, written);
    let small = [1u64, 2, 4].iter().filter(|s| **s <= max).count() as u64;
    let mid = (8..=248).step_by(8).filter(|s| *s <= max).count() as u64;
    let big = (256..=max.max(256))
        .step_by(16)
        .filter(|s| *s <= max)
        .count() as u64;
    small + mid + big
}

#[cfg(test)]
mod capture_tests {
    use super::*;

    #[test]
    fn capture_sizes() {
        // max_num_seqs 256 → max 512: 3 + 31 + 17
        assert_eq!(cuda_graph_captures(256, 8192, Some("hopper"), None), 51);
        assert_eq!(cuda_graph_captures(8, 8192, Some("hopper"), None), 3 + 2);
        // Blackwell captures up to 1024: 32 more sizes of 16.
        assert_eq!(
            max_cuda_graph_size(1024, 8192, Some("blackwell"), None),
            1024
        );
        assert_eq!(
            cuda_graph_captures(1024, 8192, Some("blackwell"), None),
            51 + 32
        );
        assert_eq!(max_cuda_graph_size(1024, 8192, None, None), 512);
        assert_eq!(
            max_cuda_graph_size(1024, 8192, Some("blackwell_rtx"), None),
            512
        );
        // Never above the step's token budget.
        assert_eq!(max_cuda_graph_size(1024, 256, Some("blackwell"), None), 256);
        // A written limit replaces the default, within the token budget.
        assert_eq!(
            max_cuda_graph_size(512, 2048, Some("blackwell"), Some(2048)),
            2048
        );
        assert_eq!(
            max_cuda_graph_size(512, 1024, Some("hopper"), Some(2048)),
            1024
        );
        assert_eq!(
            cuda_graph_captures(512, 8192, Some("hopper"), Some(256)),
            3 + 31 + 1
        );
    }
}
