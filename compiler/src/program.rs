//! The checked program: every definition typed, with units converted to base units
//! and every value traceable to the span that set it.
//!
//! Produced by [`crate::check`]; read by analysis, the planner and the language
//! server. Quantities are `f64` in base units: bytes, bytes/s, seconds, tokens,
//! tokens/s, requests/s, FLOP/s, dollars, dollars/hour.

use crate::schema::Kind;
use crate::span::{FileId, FileSpan, Span};
use crate::syntax::ast::Op;
use std::collections::BTreeMap;

mod deploy_blocks;
pub use deploy_blocks::{
    Autoscale, Calibration, GatewayRouting, KvOffload, LoraSettings, ModelCache, PodSettings,
};

/// Index of a definition in [`Program::defs`].
pub type DefId = usize;

/// A checked value, in base units.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Number(f64),
    Int(i64),
    Bool(bool),
    Str(String),
    Enum(String),
    Ref(DefId),
    List(Vec<Value>),
    CountOf(u64, DefId),
    Groups(Vec<(u64, DefId)>),
    Layout(LayoutSpec),
    Engine(String, BTreeMap<String, FieldValue>),
    /// A nested block's checked fields.
    Block(BTreeMap<String, FieldValue>),
    Bound(Op, f64),
}

/// A field's value and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldValue {
    pub value: Value,
    /// The span of the value as written.
    pub at: FileSpan,
    /// The span of the whole `key = value` entry.
    pub entry: FileSpan,
    /// The definition whose body set it (the definition itself or a base); `None` for
    /// an option of an engine block, which belongs to no definition.
    pub set_by: Option<DefId>,
}

#[derive(Debug, Clone)]
pub struct Def {
    pub id: DefId,
    pub kind: Kind,
    pub name: String,
    pub file: FileId,
    pub name_span: Span,
    pub span: Span,
    /// The definition this one extends.
    pub base: Option<DefId>,
    /// Merged fields: the base's, overridden by this definition's own.
    pub fields: BTreeMap<String, FieldValue>,
    pub body: Body,
    /// False when an error inside it (or its base) left it incomplete.
    pub complete: bool,
}

impl Def {
    pub fn location(&self) -> FileSpan {
        FileSpan::new(self.file, self.name_span)
    }
}

#[derive(Debug, Clone)]
pub enum Body {
    Gpu(Gpu),
    Link(Link),
    Node(Node),
    Cluster(Cluster),
    Model(Model),
    Workload(Workload),
    Slo(Slo),
    Deploy(Box<Deploy>),
    Network(Network),
}

/// How pods reach the scale-out fabric.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Network {
    pub resource: Option<String>,
    pub resource_count: u64,
    pub capabilities: Vec<String>,
    /// (key, value), in source order.
    pub annotations: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
    /// The hosts' (or pods') interface for NCCL/Gloo bootstrap traffic; `None`: unknown.
    pub socket_ifname: Option<String>,
    pub host_network: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Gpu {
    pub names: Vec<String>,
    pub vendor: Option<String>,
    pub architecture: Option<String>,
    pub memory: f64,
    pub memory_bandwidth: f64,
    pub bf16: f64,
    pub fp16: f64,
    pub fp8: Option<f64>,
    pub fp4: Option<f64>,
    pub int8: Option<f64>,
    pub scale_up: Option<DefId>,
    pub pcie: Option<DefId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkType {
    Nvlink,
    Nvswitch,
    Pcie,
    Infiniband,
    Roce,
    Ethernet,
    Efa,
    Xgmi,
    Tcpx,
}

impl LinkType {
    pub fn parse(s: &str) -> Option<LinkType> {
        Some(match s {
            "nvlink" => LinkType::Nvlink,
            "nvswitch" => LinkType::Nvswitch,
            "pcie" => LinkType::Pcie,
            "infiniband" => LinkType::Infiniband,
            "roce" => LinkType::Roce,
            "ethernet" => LinkType::Ethernet,
            "efa" => LinkType::Efa,
            "xgmi" => LinkType::Xgmi,
            "tcpx" => LinkType::Tcpx,
            _ => return None,
        })
    }
    /// Links over which tensor parallelism is at home (GPU-to-GPU memory-semantic links).
    pub fn is_scale_up(self) -> bool {
        matches!(self, LinkType::Nvlink | LinkType::Nvswitch | LinkType::Xgmi)
    }
}

#[derive(Debug, Clone)]
pub struct Link {
    pub link_type: LinkType,
    pub bandwidth: f64,
    pub latency: f64,
    pub generation: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Node {
    /// `None` when the `gpus` field failed to check (the node is incomplete).
    pub gpu: Option<DefId>,
    pub gpu_count: u64,
    pub scale_up: Option<DefId>,
    pub scale_up_domain: u64,
    pub nics: Option<(u64, DefId)>,
    pub price: Option<f64>,
    pub provider: Option<String>,
    pub cpu_memory: Option<f64>,
    pub network: Option<DefId>,
}

#[derive(Debug, Clone)]
pub struct NodeGroup {
    pub count: u64,
    pub node: DefId,
}

#[derive(Debug, Clone)]
pub struct Cluster {
    pub groups: Vec<NodeGroup>,
    pub fabric: Option<DefId>,
    pub price: Option<f64>,
    pub region: Option<String>,
    pub network: Option<DefId>,
}

pub use crate::layers::{Ffn, LayerKind, Mixer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Attention {
    Mha,
    Gqa,
    Mla,
}

impl Attention {
    /// The schema's word for it (`attention = mla`).
    pub fn parse(s: &str) -> Option<Attention> {
        Some(match s {
            "mha" => Attention::Mha,
            "gqa" => Attention::Gqa,
            "mla" => Attention::Mla,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Model {
    pub hf: Option<String>,
    /// The class config.json's `architectures` names (`Qwen3MoeForCausalLM`), which
    /// `analysis::vllm_class` reads before `hf`.
    pub architecture: Option<String>,
    pub parameters: f64,
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub intermediate: u64,
    pub vocab: u64,
    pub max_context: f64,
    pub attention: Attention,
    pub experts: u64,
    pub experts_per_token: u64,
    pub shared_experts: u64,
    pub moe_intermediate: u64,
    pub dense_layers: u64,
    pub moe_layer_step: u64,
    pub kv_lora_rank: u64,
    pub q_lora_rank: u64,
    pub qk_rope_head_dim: u64,
    pub qk_nope_head_dim: u64,
    pub v_head_dim: u64,
    pub sliding_window: Option<f64>,
    pub sliding_layers: u64,
    pub tied_embeddings: bool,
    pub dtype: String,
    pub weights: String,
    pub kv_cache: String,
    pub prequantized: bool,
    /// Everything hybrid, multimodal and mixed-precision models add; the default for a
    /// uniform full-attention model written with the fields above.
    #[serde(flatten)]
    pub detail: Box<ModelDetail>,
}

/// Per-layer kinds and their dimensions, encoders, and per-component weight formats.
/// Every field's default is "absent": a model without them is a uniform transformer.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct ModelDetail {
    /// One entry per layer (`layers` long) when the model has a `layer_pattern`; empty
    /// means every layer is derived from `sliding_layers`, `dense_layers` and
    /// `moe_layer_step` ([`Model::layer`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub layer_kinds: Vec<LayerKind>,
    /// KV heads and head size of the sliding-window layers (0: as the full layers).
    #[serde(skip_serializing_if = "is_zero")]
    pub sliding_kv_heads: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub sliding_head_dim: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub linear: Option<LinearAttention>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mamba: Option<Mamba2>,
    /// Dtype of recurrent (SSM / linear-attention) states; `auto` = the model's dtype.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_dtype: Option<String>,
    /// DeepSeek sparse attention's lightning indexer: its key size (0: none) and heads.
    #[serde(skip_serializing_if = "is_zero")]
    pub indexer_head_dim: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub indexer_heads: u64,
    /// Intermediate size of a shared expert when it differs from a routed one (0: same).
    #[serde(skip_serializing_if = "is_zero")]
    pub shared_expert_intermediate: u64,
    /// MLPs and experts without a gate (ReLU²: up and down only) instead of SwiGLU's three
    /// matrices.
    #[serde(skip_serializing_if = "is_false")]
    pub ungated_mlp: bool,
    /// Parameters of vision/audio encoders and projectors (served beside the LM).
    #[serde(skip_serializing_if = "is_zero_f")]
    pub encoder_parameters: f64,
    /// Per-component weight formats of a mixed-precision checkpoint (`None`: `weights`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention_weights: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expert_weights: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mlp_weights: Option<String>,
    /// Leading layers the checkpoint keeps wholly in `dtype`.
    #[serde(skip_serializing_if = "is_zero")]
    pub unquantized_layers: u64,
    /// Layers whose attention or mixer the checkpoint keeps in `dtype`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unquantized_mixer_layers: Vec<u64>,
    /// Weights per quantization scale group (AWQ/GPTQ/INT4; 0: the format's default).
    #[serde(skip_serializing_if = "is_zero")]
    pub quant_group: u64,
    /// Block-FP8 checkpoints: the `[block_n, block_k]` output × input tile one scale covers
    /// (`quantization_config.weight_block_size`, e.g. `[128, 128]`); empty: per-tensor or
    /// per-channel scales. vLLM needs every TP shard to hold whole blocks
    /// (`fp8_utils.validate_fp8_block_shape`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub weight_block: Vec<u64>,
    /// Multi-token-prediction layers the checkpoint ships beyond `layers` (loaded only as
    /// a speculative draft, `method = mtp`).
    #[serde(skip_serializing_if = "is_zero")]
    pub mtp_layers: u64,
    /// Positions are multimodal rotary embeddings (M-RoPE: `mrope_section` in the
    /// config's rope parameters; Qwen3-VL, Qwen3.5). vLLM 0.33 drafts with no such model
    /// (`LLMBaseProposer._raise_if_mrope`).
    #[serde(skip_serializing_if = "is_false")]
    pub mrope: bool,
    /// Each layer's dense MLP intermediate size when they differ (NAS models, DeciLM's
    /// `block_configs`); empty: every dense layer has `intermediate`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub layer_intermediate: Vec<u64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}
fn is_zero_f(v: &f64) -> bool {
    *v == 0.0
}
fn is_false(v: &bool) -> bool {
    !*v
}

/// Gated DeltaNet (linear attention) dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct LinearAttention {
    pub key_heads: u64,
    pub value_heads: u64,
    pub key_dim: u64,
    pub value_dim: u64,
    pub conv_kernel: u64,
}

/// Mamba-2 mixer dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct Mamba2 {
    pub heads: u64,
    pub head_dim: u64,
    pub state: u64,
    pub groups: u64,
    pub conv_kernel: u64,
}

/// The components a checkpoint may store in different formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Component {
    /// Attention projections and recurrent mixers.
    Mixer,
    /// Routed experts.
    Experts,
    /// Dense MLPs and shared experts.
    Mlp,
    /// Embedding, LM head, routers, norms, encoders.
    Unquantized,
}

impl Model {
    pub fn is_moe(&self) -> bool {
        self.experts > 0
    }

    /// The dense MLP intermediate size of layer `l` (0-based): its own in a NAS model's
    /// `layer_intermediate`, else `intermediate`.
    pub fn intermediate_at(&self, l: u64) -> u64 {
        match self.detail.layer_intermediate.get(l as usize) {
            Some(&n) if n > 0 => n,
            _ => self.intermediate,
        }
    }

    /// Layer `l` (0-based): from the pattern when the model has one, else the uniform
    /// rules (windowed layers spread evenly, which is exact for gpt-oss's alternation;
    /// MoE from `dense_layers` on, every `moe_layer_step`-th layer).
    pub fn layer(&self, l: u64) -> LayerKind {
        if let Some(k) = self.detail.layer_kinds.get(l as usize) {
            return *k;
        }
        let sliding = self.sliding_layers > 0
            && self.layers > 0
            && ((l + 1) * self.sliding_layers) / self.layers
                > (l * self.sliding_layers) / self.layers;
        LayerKind {
            mixer: if sliding { Mixer::Sliding } else { Mixer::Full },
            ffn: self.default_ffn(l),
        }
    }

    /// Sets the per-layer kinds from a written pattern: each layer's FFN as written, or
    /// the model's rule ([`Model::default_ffn`]) where the pattern leaves it.
    pub fn set_layers(&mut self, written: &[crate::layers::WrittenLayer]) {
        let kinds = written
            .iter()
            .enumerate()
            .map(|(l, w)| LayerKind {
                mixer: w.mixer,
                ffn: w.ffn.unwrap_or_else(|| self.default_ffn(l as u64)),
            })
            .collect();
        self.detail.layer_kinds = kinds;
    }

    /// The FFN of layer `l` when the pattern does not say.
    pub fn default_ffn(&self, l: u64) -> Ffn {
        if self.experts > 0
            && l >= self.dense_layers
            && (l + 1).is_multiple_of(self.moe_layer_step.max(1))
        {
            Ffn::Moe
        } else {
            Ffn::Dense
        }
    }

    /// True when some layer keeps a fixed-size recurrent state per request (Mamba, linear
    /// attention): vLLM's `IsHybrid` models, whose cache rules differ (prefix caching,
    /// block alignment, NIXL's state transfer).
    pub fn has_recurrent_layers(&self) -> bool {
        (0..self.layers).any(|l| self.layer(l).mixer.is_recurrent())
    }

    /// True when some layer is not plain full attention (the hybrid KV-cache manager's case).
    pub fn is_hybrid(&self) -> bool {
        (0..self.layers).any(|l| self.layer(l).mixer != Mixer::Full)
    }

    /// The format a component's weights are served in.
    pub fn format_of(&self, c: Component, layer: Option<u64>) -> &str {
        if layer.is_some_and(|l| l < self.detail.unquantized_layers) {
            return &self.dtype;
        }
        if c == Component::Mixer
            && layer.is_some_and(|l| self.detail.unquantized_mixer_layers.contains(&l))
        {
            return &self.dtype;
        }
        // MXFP4 checkpoints (gpt-oss) quantize only the experts.
        let experts_only = self.weights == "mxfp4";
        let d = &self.detail;
        match c {
            Component::Unquantized => &self.dtype,
            Component::Experts => d.expert_weights.as_deref().unwrap_or(&self.weights),
            Component::Mixer => d.attention_weights.as_deref().unwrap_or(if experts_only {
                &self.dtype
            } else {
                &self.weights
            }),
            Component::Mlp => d.mlp_weights.as_deref().unwrap_or(if experts_only {
                &self.dtype
            } else {
                &self.weights
            }),
        }
    }

    /// Matrices per MLP or expert: 3 when gated (SwiGLU), 2 otherwise.
    pub fn mlp_matrices(&self) -> f64 {
        if self.detail.ungated_mlp {
            2.0
        } else {
            3.0
        }
    }
}

#[derive(Debug, Clone)]
pub struct Workload {
    pub prompt: f64,
    pub output: f64,
    pub rate: Option<f64>,
    pub concurrency: Option<u64>,
    /// Requests in a finite run; `None` for steady state.
    pub requests: Option<u64>,
    /// Share of each prompt found in the prefix cache (0–1).
    pub prefix_reuse: f64,
    /// Leading prompt tokens every request shares.
    pub shared_prefix: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SloMetric {
    Ttft,
    Tpot,
    Itl,
    E2e,
    Throughput,
    RequestRate,
}

impl SloMetric {
    /// The metric as written in a `.dist` file (`ttft`, `request_rate`).
    pub fn name(self) -> &'static str {
        match self {
            SloMetric::Ttft => "ttft",
            SloMetric::Tpot => "tpot",
            SloMetric::Itl => "itl",
            SloMetric::E2e => "e2e",
            SloMetric::Throughput => "throughput",
            SloMetric::RequestRate => "request_rate",
        }
    }
}

#[derive(Debug, Clone)]
pub struct SloBound {
    pub metric: SloMetric,
    /// `mean`, `p50`, … (`p50` when the key names none).
    pub percentile: String,
    pub op: Op,
    pub value: f64,
    pub at: FileSpan,
}

#[derive(Debug, Clone, Default)]
pub struct Slo {
    pub bounds: Vec<SloBound>,
}

/// An explicit parallel layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Layout {
    pub tp: u64,
    pub pp: u64,
    pub dp: u64,
    /// Expert parallelism enabled (its size is tp × dp, as in vLLM).
    pub ep: bool,
    pub dcp: u64,
    pub pcp: u64,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            tp: 1,
            pp: 1,
            dp: 1,
            ep: false,
            dcp: 1,
            pcp: 1,
        }
    }
}

impl Layout {
    /// GPUs one replica needs.
    pub fn replica_gpus(&self) -> u64 {
        self.tp * self.pp * self.pcp
    }
    /// GPUs in total.
    pub fn gpus(&self) -> u64 {
        self.replica_gpus() * self.dp
    }
    /// The expert-parallel group's size: TP × DP (the ranks vLLM spreads a MoE layer's
    /// experts over with `ep`).
    pub fn ep_size(&self) -> u64 {
        self.tp.max(1) * self.dp.max(1)
    }
    /// EP ranks that hold no routed expert: vLLM gives each rank `experts / ep_size` and the
    /// first `experts % ep_size` ranks one more (`determine_expert_map`), so past one rank
    /// per expert the rest hold none (W0409). 0 without `ep` or without experts.
    pub fn ep_ranks_without_experts(&self, experts: u64) -> u64 {
        if self.ep && experts > 0 {
            self.ep_size().saturating_sub(experts)
        } else {
            0
        }
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tp {} × pp {} × dp {}", self.tp, self.pp, self.dp)?;
        if self.ep {
            write!(f, " × ep")?;
        }
        if self.dcp > 1 {
            write!(f, " × dcp {}", self.dcp)?;
        }
        if self.pcp > 1 {
            write!(f, " × pcp {}", self.pcp)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum LayoutSpec {
    Auto,
    Explicit(Layout),
    /// `{ prefill = tp 4, decode = tp 2 × dp 2 }`: disaggregated prefill/decode serving
    /// (vLLM's P/D with the NIXL connector), each pool its own layout and, optionally, its
    /// own node group.
    Disaggregated(PoolLayouts),
}

/// The two pools of a disaggregated deployment. A pool's `dp` is its replicas (each an
/// engine of its own), as in an aggregated layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLayouts {
    pub prefill: Layout,
    pub decode: Layout,
    /// The node groups the pools are pinned to (`prefill_node_group`,
    /// `decode_node_group`); unset, the deployment's `node_group` or the accounting.
    pub prefill_group: Option<DefId>,
    pub decode_group: Option<DefId>,
}

/// Which pool of a disaggregated deployment.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Pool {
    Prefill,
    Decode,
}

impl Pool {
    pub fn name(self) -> &'static str {
        match self {
            Pool::Prefill => "prefill",
            Pool::Decode => "decode",
        }
    }
}

impl PoolLayouts {
    pub fn layout(&self, pool: Pool) -> Layout {
        match pool {
            Pool::Prefill => self.prefill,
            Pool::Decode => self.decode,
        }
    }
    pub fn group(&self, pool: Pool) -> Option<DefId> {
        match pool {
            Pool::Prefill => self.prefill_group,
            Pool::Decode => self.decode_group,
        }
    }
}

/// A deployment's `engine = vllm { … }` options as written (`None`: unset), read once by
/// the checker (`check/engine.rs`, one field per [`crate::schema::EngineOption`]); the
/// scenario fills vLLM's defaults (`analysis::scenario::engine_settings`).
#[derive(Debug, Clone, Default)]
pub struct VllmOptions {
    pub gpu_memory_utilization: Option<f64>,
    pub max_model_len: Option<f64>,
    pub max_num_seqs: Option<u64>,
    pub max_num_batched_tokens: Option<f64>,
    pub block_size: Option<u64>,
    pub enforce_eager: bool,
    /// `cudagraph_mode`: one of [`crate::schema::CUDAGRAPH_MODES`] (`None`: vLLM's default).
    pub cudagraph_mode: Option<String>,
    pub kv_cache_memory: Option<f64>,
    pub enable_prefix_caching: Option<bool>,
    pub cpu_offload: Option<f64>,
    pub launcher: Option<String>,
    pub all2all_backend: Option<String>,
    /// `dbo`: vLLM's dual batch overlap (`--enable-dbo`).
    pub dbo: bool,
    pub port: Option<u64>,
    pub activation_memory: Option<f64>,
    pub non_torch_memory: Option<f64>,
    pub cuda_graph_memory: Option<f64>,
    /// `speculative = { … }`: speculative decoding.
    pub speculative: Option<SpeculativeOptions>,
    /// `vllm serve` words appended after dic's flags (checked by `vllm_args`).
    pub extra_args: Vec<String>,
    /// Environment of the vLLM processes, in source order.
    pub env: Vec<(String, String)>,
}

impl VllmOptions {
    /// The API server's port: as written, else vLLM's default.
    pub fn port(&self) -> u64 {
        self.port.unwrap_or(crate::schema::vllm_defaults::PORT)
    }
}

/// The engine's `speculative = { … }` block, checked (the method's source or draft is
/// there), defaults filled.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeculativeOptions {
    /// One of [`crate::schema::SPEC_METHODS`].
    pub method: String,
    /// The EAGLE head's checkpoint.
    pub source: Option<String>,
    /// The draft model of `method = draft_model`.
    pub draft: Option<DefId>,
    pub tokens: u64,
    /// vLLM's acceptance rate: accepted ÷ drafted tokens.
    pub acceptance: f64,
}

#[derive(Debug, Clone)]
pub struct Deploy {
    /// `None` when the field failed to check (the deployment is incomplete).
    pub model: Option<DefId>,
    pub cluster: Option<DefId>,
    pub workload: Option<DefId>,
    pub slo: Option<DefId>,
    pub layout: LayoutSpec,
    pub layout_at: FileSpan,
    pub engine: VllmOptions,
    pub model_source: Option<String>,
    pub served_model_name: Option<String>,
    pub image: Option<String>,
    pub namespace: Option<String>,
    pub hf_token_secret: Option<String>,
    /// Secret with the API key (`api-key`), exposed to vLLM as VLLM_API_KEY.
    pub api_key_secret: Option<String>,
    /// Image with the `dic` binary for the fabric preflight Job (none without it).
    pub preflight_image: Option<String>,
    pub allowed_weights: Vec<String>,
    pub allowed_kv_cache: Vec<String>,
    pub pod: PodSettings,
    pub model_cache: ModelCache,
    pub autoscale: Option<Autoscale>,
    /// `podmonitor` or `servicemonitor`; `None` for none.
    pub monitoring: Option<String>,
    /// The node the deployment is pinned to (one of its cluster's groups).
    pub node_group: Option<DefId>,
    /// `routing = { gateway = … }`; `None`: a plain Service.
    pub routing: Option<GatewayRouting>,
    /// `lora = { … }`; `None`: no adapters.
    pub lora: Option<LoraSettings>,
    /// `kv_offload = { … }`; `None`: the KV cache stays on the GPUs.
    pub kv_offload: Option<KvOffload>,
    /// Factors fitted on the deployment's own engines (`calibration { … }`).
    pub calibration: Calibration,
}

/// Every definition that was checked: the user's files and the stdlib definitions
/// they reached. Indexed by [`DefId`]; `None` for definitions that could not be checked
/// (unknown kind, extension cycle).
#[derive(Debug, Clone, Default)]
pub struct Program {
    pub defs: Vec<Option<Def>>,
    /// Definitions written in user files, in source order.
    pub user_defs: Vec<DefId>,
}

macro_rules! getter {
    ($fn:ident, $variant:ident, $ty:ty) => {
        pub fn $fn(&self, id: DefId) -> Option<&$ty> {
            match self.def(id).map(|d| &d.body) {
                Some(Body::$variant(x)) => Some(x),
                _ => None,
            }
        }
    };
}

impl Program {
    /// True when the definition and everything it references, transitively (a
    /// deployment's cluster, its nodes, their GPUs and links …), checked complete. An
    /// analysis on anything less would quote numbers from a half-read definition.
    pub fn complete_with_references(&self, id: DefId) -> bool {
        fn refs(v: &Value, out: &mut Vec<DefId>) {
            match v {
                Value::Ref(id) | Value::CountOf(_, id) => out.push(*id),
                Value::Groups(g) => out.extend(g.iter().map(|(_, id)| *id)),
                Value::List(items) => items.iter().for_each(|i| refs(i, out)),
                Value::Engine(_, fields) => fields.values().for_each(|f| refs(&f.value, out)),
                _ => {}
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = vec![id];
        while let Some(id) = todo.pop() {
            if !seen.insert(id) {
                continue;
            }
            let Some(def) = self.def(id) else {
                return false;
            };
            if !def.complete {
                return false;
            }
            let mut next = Vec::new();
            for f in def.fields.values() {
                refs(&f.value, &mut next);
            }
            todo.extend(next);
        }
        true
    }

    pub fn def(&self, id: DefId) -> Option<&Def> {
        self.defs.get(id).and_then(|d| d.as_ref())
    }
    getter!(gpu, Gpu, Gpu);
    getter!(link, Link, Link);
    getter!(node, Node, Node);
    getter!(cluster, Cluster, Cluster);
    getter!(model, Model, Model);
    getter!(workload, Workload, Workload);
    getter!(slo, Slo, Slo);
    getter!(deploy, Deploy, Deploy);
    getter!(network, Network, Network);

    /// A cluster's node type (its first node group's; deployments run on one node type)
    /// and that node's GPU definition: the one cluster → node → GPU lookup.
    pub fn node_of_cluster(&self, cluster: Option<DefId>) -> Option<(&Cluster, &Node)> {
        let c = cluster.and_then(|id| self.cluster(id))?;
        let node = c.groups.first().and_then(|g| self.node(g.node))?;
        Some((c, node))
    }

    /// The GPU definition of a cluster's node type.
    pub fn gpu_def_of_cluster(&self, cluster: Option<DefId>) -> Option<&Def> {
        let (_, node) = self.node_of_cluster(cluster)?;
        node.gpu.and_then(|id| self.def(id))
    }

    /// The user's definitions of one kind, in source order.
    pub fn user_defs_of(&self, kind: Kind) -> impl Iterator<Item = &Def> {
        self.user_defs
            .iter()
            .filter_map(|id| self.def(*id))
            .filter(move |d| d.kind == kind)
    }

    /// Finds a checked definition by name (first match).
    pub fn by_name(&self, kind: Kind, name: &str) -> Option<&Def> {
        self.defs
            .iter()
            .flatten()
            .find(|d| d.kind == kind && d.name == name)
    }
}
