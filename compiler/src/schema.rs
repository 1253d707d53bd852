//! The schema of every definition kind: which fields exist, their types, which are
//! required, and one line of documentation each.
//!
//! One declarative table drives the checker (unknown fields, types, units, required
//! fields), `dic explain`, and the language server (completion and hover). Adding a
//! field means adding a row here and reading it in [`crate::check`].

use crate::text_rules::TextRule;
use crate::units::Dimension;

/// The kinds of definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Gpu,
    Link,
    Node,
    Cluster,
    Model,
    Workload,
    Slo,
    Deploy,
    Network,
}

impl Kind {
    pub const ALL: &'static [Kind] = &[
        Kind::Network,
        Kind::Gpu,
        Kind::Link,
        Kind::Node,
        Kind::Cluster,
        Kind::Model,
        Kind::Workload,
        Kind::Slo,
        Kind::Deploy,
    ];

    pub fn keyword(self) -> &'static str {
        match self {
            Kind::Gpu => "gpu",
            Kind::Link => "link",
            Kind::Node => "node",
            Kind::Cluster => "cluster",
            Kind::Model => "model",
            Kind::Workload => "workload",
            Kind::Slo => "slo",
            Kind::Deploy => "deploy",
            Kind::Network => "network",
        }
    }

    pub fn from_keyword(s: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.keyword() == s)
    }

    pub fn schema(self) -> &'static KindSchema {
        all_schemas()
            .find(|s| s.kind == self)
            .expect("every kind has a schema")
    }
}

/// Every kind's schema.
pub fn all_schemas() -> impl Iterator<Item = &'static KindSchema> {
    SCHEMAS.iter().chain(std::iter::once(&NETWORK_SCHEMA))
}

/// The type a field's value must have.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ty {
    /// A quantity of this dimension within a range (base units). Tokens and ratios also
    /// accept a plain number.
    Quantity(Dimension, Range),
    Int {
        min: i64,
        max: i64,
    },
    Bool,
    /// A string, and what it may contain.
    Str(TextRule),
    /// One of these bare words.
    Enum(&'static [&'static str]),
    /// A reference to a definition of this kind (a GPU may also be named by a string,
    /// as `nvidia-smi` prints it).
    Ref(Kind),
    List(&'static Ty),
    /// `8 × h100_sxm`, or a plain reference meaning one.
    CountOf(Kind),
    /// One or a list of `N × node`.
    Groups(Kind),
    /// `auto` or `tp 8 × pp 2 × dp 2 (× ep)`.
    Layout,
    /// `vllm { … }`: an engine name and its options.
    Engine,
    /// `{ … }`: a nested block with its own fields.
    Block(&'static [Field]),
    /// An SLO bound: `<=`/`>=` and a quantity; the key may carry a percentile
    /// (`ttft.p95`).
    Bound(Dimension),
}

impl Ty {
    pub fn describe(&self) -> String {
        match self {
            Ty::Quantity(d, _) => d.describe().to_string(),
            Ty::Int { .. } => "a whole number".into(),
            Ty::Bool => "`true` or `false`".into(),
            Ty::Str(_) => "a string".into(),
            Ty::Enum(opts) => format!(
                "one of {}",
                opts.iter()
                    .map(|o| format!("`{o}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Ty::Ref(k) => format!("the name of a `{}`", k.keyword()),
            Ty::List(t) => format!("a list of {}", t.describe()),
            Ty::CountOf(k) => format!("a count and a `{}`, like `8 × name`", k.keyword()),
            Ty::Groups(k) => format!("`N × {}` or a list of them", k.keyword()),
            Ty::Layout => {
                "`auto`, a layout like `tp 8 × pp 2 × dp 2`, or `{ prefill = …, decode = … }`"
                    .into()
            }
            Ty::Engine => "an engine like `vllm { … }`".into(),
            Ty::Block(fields) => format!(
                "a block `{{ … }}` with {}",
                fields
                    .iter()
                    .map(|f| format!("`{}`", f.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Ty::Bound(d) => format!("a bound like `<= {}`", d.describe()),
        }
    }
}

#[derive(Debug, PartialEq)]
pub struct Field {
    pub name: &'static str,
    pub ty: Ty,
    pub required: bool,
    pub doc: &'static str,
    /// For an engine option: what it becomes on vLLM's command line.
    pub vllm: Option<VllmFlag>,
    /// For an engine option: which one, as the checker fills
    /// [`crate::program::VllmOptions`] from it.
    pub engine: Option<EngineOption>,
}

/// What an engine option becomes on `vllm serve`'s command line. Every option of
/// [`VLLM_OPTIONS`] says: a test fails for one that is neither emitted nor dic's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VllmFlag {
    /// `--flag VALUE`, always emitted with the value dic resolved (written or vLLM 0.33's
    /// default), so vLLM and dic's memory model agree.
    Value(&'static str),
    /// `--flag VALUE`, emitted only when the option is set (vLLM's default otherwise).
    WhenSet(&'static str),
    /// `--on` when true, `--off` when false (nothing when unset and `off` is `None`).
    Switch {
        on: &'static str,
        off: Option<&'static str>,
    },
    /// Several `--flag VALUE` pairs from one block option, in this order (each emitted
    /// when the block sets it).
    Flags(&'static [&'static str]),
    /// Read by dic only (why).
    DicOnly(&'static str),
    /// Passed through as written after dic's own flags or environment, checked against
    /// vLLM's own option table (`vllm_args`).
    Passthrough,
}

impl VllmFlag {
    /// The flags this option can put on a command line.
    pub fn flags(self) -> Vec<&'static str> {
        match self {
            VllmFlag::Value(f) | VllmFlag::WhenSet(f) => vec![f],
            VllmFlag::Flags(fs) => fs.to_vec(),
            VllmFlag::Switch { on, off } => std::iter::once(on).chain(off).collect(),
            VllmFlag::DicOnly(_) | VllmFlag::Passthrough => Vec::new(),
        }
    }
}

#[macro_use]
mod defaults;
mod engine_option;
pub use defaults::{dic_defaults, vllm_defaults};
pub use engine_option::EngineOption;

/// The engine option called `name`.
pub fn engine_option(name: &str) -> Option<&'static Field> {
    VLLM_OPTIONS.iter().find(|f| f.name == name)
}

/// Checks a number given from outside a `.dist` file (`dic estimate`'s flags) against
/// field `field`'s type: a quantity's range (in base units) or an integer's bounds, the
/// same checks a `.dist` file gets; other types take no number.
pub fn check_number(field: &Field, value: f64) -> Result<(), String> {
    let name = field.name;
    match field.ty {
        Ty::Quantity(dim, range) if !range.contains(value) => Err(format!(
            "`{name}` = {} is out of range: must be {}",
            crate::units::fmt_num(value),
            range.describe(dim)
        )),
        Ty::Int { min, max }
            if value.fract() != 0.0 || value < min as f64 || value > max as f64 =>
        {
            Err(format!(
                "`{name}` = {} is out of range: must be a whole number between {min} and {max}",
                crate::units::fmt_num(value)
            ))
        }
        _ => Ok(()),
    }
}

#[derive(Debug)]
pub struct KindSchema {
    pub kind: Kind,
    pub doc: &'static str,
    pub fields: &'static [Field],
}

impl KindSchema {
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

macro_rules! f {
    ($name:literal, $ty:expr, req, $doc:expr) => {
        Field {
            name: $name,
            ty: $ty,
            required: true,
            doc: $doc,
            vllm: None,
            engine: None,
        }
    };
    ($name:literal, $ty:expr, $doc:expr) => {
        Field {
            name: $name,
            ty: $ty,
            required: false,
            doc: $doc,
            vllm: None,
            engine: None,
        }
    };
}

/// An engine option: which one, its field, what it becomes for vLLM, and its doc (a
/// literal, or a `concat!` of literals and `vllm_default!`s).
macro_rules! engine {
    ($option:ident, $name:literal, $ty:expr, $vllm:expr, $doc:expr) => {
        Field {
            name: $name,
            ty: $ty,
            required: false,
            doc: $doc,
            vllm: Some($vllm),
            engine: Some(EngineOption::$option),
        }
    };
}

use Dimension as D;

/// The most GPUs one cluster, node or layout may have: far past any machine built, small
/// enough that per-rank work stays bounded (a rank list, a placement).
pub const MAX_GPUS: i64 = 1 << 17;
/// The most nodes a cluster may have.
pub const MAX_NODES: i64 = 1 << 16;
/// Layers (the analysis walks them).
const LAYERS: Ty = Ty::Int {
    min: 1,
    max: 1 << 16,
};
const LAYERS0: Ty = Ty::Int {
    min: 0,
    max: 1 << 16,
};
/// Hidden, head and intermediate sizes.
const WIDTH: Ty = Ty::Int {
    min: 1,
    max: 1 << 24,
};
const HEADS: Ty = Ty::Int {
    min: 1,
    max: 1 << 16,
};
const VOCAB: Ty = Ty::Int {
    min: 1,
    max: 1 << 26,
};
const EXPERTS: Ty = Ty::Int {
    min: 0,
    max: 1 << 16,
};
const FREE_TEXT: Ty = Ty::Str(TextRule::Free);
const CONV_KERNEL: Ty = Ty::Int { min: 1, max: 64 };

/// Where a quantity's value (in base units) may lie. Beyond the physical meaning
/// (no negative bandwidth), the upper ends keep arithmetic finite and refuse typos that
/// would otherwise become flags (`2T GiB`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
    /// When true `min` itself is excluded (`> 0`).
    pub min_exclusive: bool,
    /// When true only whole numbers (of the base unit) are in range: a count vLLM takes
    /// as an integer (`--max-model-len 4096`), where a fraction is a typo, not a value.
    pub whole: bool,
}

impl Range {
    pub const fn closed(min: f64, max: f64) -> Range {
        Range {
            min,
            max,
            min_exclusive: false,
            whole: false,
        }
    }
    pub const fn above_zero(max: f64) -> Range {
        Range {
            min: 0.0,
            max,
            min_exclusive: true,
            whole: false,
        }
    }
    /// The same range, holding whole numbers only.
    pub const fn whole(self) -> Range {
        Range {
            whole: true,
            ..self
        }
    }
    pub fn contains(&self, v: f64) -> bool {
        v.is_finite()
            && (!self.whole || v.fract() == 0.0)
            && v <= self.max
            && if self.min_exclusive {
                v > self.min
            } else {
                v >= self.min
            }
    }
    /// `more than 0 and at most 1`, in the dimension's base unit.
    pub fn describe(&self, dim: Dimension) -> String {
        // A share (at most 1) reads as the percentage it is usually written as.
        if dim == Dimension::Ratio && self.max <= 1.0 {
            let low = if self.min_exclusive {
                "more than"
            } else {
                "at least"
            };
            return format!(
                "{low} {}% and at most {}%",
                crate::units::fmt_num(self.min * 100.0),
                crate::units::fmt_num(self.max * 100.0)
            );
        }
        let unit = dim.base_symbol();
        let sp = if unit.is_empty() { "" } else { " " };
        let low = if self.min_exclusive {
            "more than"
        } else {
            "at least"
        };
        let whole = if self.whole { "a whole number, " } else { "" };
        format!(
            "{whole}{low} {}{sp}{unit} and at most {}{sp}{unit}",
            crate::units::fmt_num(self.min),
            crate::units::fmt_num(self.max)
        )
    }
}

/// The default range of a dimension: positive (prices and overrides may be zero) and far
/// above anything real.
pub const fn default_range(d: Dimension) -> Range {
    match d {
        Dimension::Bytes => Range::closed(0.0, 1125899906842624.0), // 1 PiB
        Dimension::Bandwidth => Range::above_zero(1e16),
        Dimension::Time => Range::closed(0.0, 1e7),
        Dimension::Tokens => Range::above_zero(1e8), // 100M tokens: 10× the longest context
        Dimension::TokenRate => Range::above_zero(1e12),
        Dimension::RequestRate => Range::above_zero(1e9),
        Dimension::FlopRate => Range::above_zero(1e20),
        Dimension::Money => Range::closed(0.0, 1e12),
        Dimension::MoneyRate => Range::closed(0.0, 1e9),
        Dimension::Ratio => Range::closed(0.0, 1e15),
    }
}

/// A quantity with its dimension's default range.
const fn q(d: Dimension) -> Ty {
    Ty::Quantity(d, default_range(d))
}

pub const WEIGHT_DTYPES: &[&str] = &[
    "bf16", "fp16", "fp32", "fp8", "int8", "int4", "awq", "gptq", "nvfp4", "mxfp4",
];
pub const KV_DTYPES: &[&str] = &["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"];
pub const LINK_TYPES: &[&str] = &[
    "nvlink",
    "nvswitch",
    "pcie",
    "infiniband",
    "roce",
    "ethernet",
    "efa",
    "xgmi",
    "tcpx",
];
pub const PERCENTILES: &[&str] = &["mean", "p50", "p90", "p95", "p99"];
pub const ENGINES: &[&str] = &["vllm"];

pub static SCHEMAS: &[KindSchema] = &[
    KindSchema {
        kind: Kind::Gpu,
        doc: "An accelerator: memory, bandwidth and tensor-core throughput (dense, no sparsity).",
        fields: &[
            f!("names", Ty::List(&FREE_TEXT), "names as `nvidia-smi` prints them, matched case- and separator-insensitively"),
            f!("vendor", Ty::Enum(&["nvidia", "amd"]), "the vendor"),
            f!("architecture", Ty::Enum(&["volta", "turing", "ampere", "ada", "hopper", "blackwell", "blackwell_rtx", "cdna3", "cdna4"]), "the chip generation (`blackwell`: the data-centre parts, SM100/SM103; `blackwell_rtx`: the RTX and RTX PRO parts, SM120)"),
            f!("memory", q(D::Bytes), req, "device memory"),
            f!("memory_bandwidth", q(D::Bandwidth), req, "device memory bandwidth"),
            f!("bf16", q(D::FlopRate), req, "dense BF16 tensor throughput"),
            f!("fp16", q(D::FlopRate), "dense FP16 tensor throughput (defaults to bf16)"),
            f!("fp8", q(D::FlopRate), "dense FP8 tensor throughput, where supported"),
            f!("fp4", q(D::FlopRate), "dense FP4 tensor throughput, where supported"),
            f!("int8", q(D::FlopRate), "dense INT8 tensor throughput"),
            f!("scale_up", Ty::Ref(Kind::Link), "the GPU's own scale-up link (NVLink generation), if any"),
            f!("pcie", Ty::Ref(Kind::Link), "the host link"),
        ],
    },
    KindSchema {
        kind: Kind::Link,
        doc: "An interconnect: per-direction bandwidth and per-message latency (the α and 1/β of the α-β model).",
        fields: &[
            f!("type", Ty::Enum(LINK_TYPES), req, "what kind of link this is"),
            f!("bandwidth", q(D::Bandwidth), req, "bandwidth per direction (per GPU for scale-up links, per port for NICs)"),
            f!("latency", q(D::Time), req, "per-message latency α"),
            f!("generation", FREE_TEXT, "generation or product name"),
        ],
    },
    KindSchema {
        kind: Kind::Node,
        doc: "A machine (or a cloud instance, or a compute tray): its GPUs, how they are connected, its NICs and its price.",
        fields: &[
            f!("gpus", Ty::CountOf(Kind::Gpu), req, "how many GPUs of which kind, e.g. `8 × h100_sxm`"),
            f!("scale_up", Ty::Ref(Kind::Link), "the GPU-to-GPU link inside the node (NVSwitch, NVLink); PCIe when absent"),
            f!("scale_up_domain", Ty::Int { min: 1, max: MAX_GPUS }, "GPUs that share one NVLink domain (72 on GB200 NVL72, spanning trays); defaults to the node's GPUs when it has a scale-up link"),
            f!("nics", Ty::CountOf(Kind::Link), "scale-out NICs, e.g. `8 × ib_ndr`"),
            f!("price", q(D::MoneyRate), "on-demand price of the whole node"),
            f!("provider", FREE_TEXT, "who sells it (`aws`, `gcp`, `azure`, `nvidia` …)"),
            f!("network", Ty::Ref(Kind::Network), "how pods reach the scale-out fabric (RDMA resource, NCCL env)"),
            f!("cpu_memory", q(D::Bytes), "host memory"),
        ],
    },
    KindSchema {
        kind: Kind::Cluster,
        doc: "The hardware a deployment may use: node groups, the fabric between nodes, and the price.",
        fields: &[
            f!("nodes", Ty::Groups(Kind::Node), req, "node groups, e.g. `2 × p5_48xlarge`"),
            f!("fabric", Ty::Ref(Kind::Link), "the scale-out link between nodes (defaults to the nodes' NICs)"),
            f!("price", q(D::MoneyRate), "price per node, overriding the node's catalog price"),
            f!("region", FREE_TEXT, "where it is"),
            f!("network", Ty::Ref(Kind::Network), "network profile, overriding the nodes'"),
        ],
    },
    KindSchema {
        kind: Kind::Model,
        doc: "A model's architecture: the numbers memory and compute need, checked against its config.json.",
        fields: &[
            f!("hf", Ty::Str(TextRule::Argument), "the Hugging Face repository, e.g. \"meta-llama/Llama-3.1-70B-Instruct\""),
            f!("architecture", Ty::Str(TextRule::ClassName), "the model class its config.json names (`architectures[0]`, e.g. \"Qwen3MoeForCausalLM\"; `dic import-hf` writes it): the vLLM class that serves it, and so what it supports (LoRA, pipeline stages, EAGLE-3, an MTP draft). Unset: found from `hf`, else taken as Llama's"),
            f!("parameters", Ty::Quantity(D::Ratio, Range::closed(1.0, 1e15)), req, "total parameter count, e.g. `70.6B`"),
            f!("layers", LAYERS, req, "hidden layers (num_hidden_layers)"),
            f!("hidden", WIDTH, req, "hidden size"),
            f!("heads", HEADS, req, "attention heads"),
            f!("kv_heads", HEADS, "key/value heads (GQA); defaults to heads"),
            f!("head_dim", WIDTH, "per-head dimension; defaults to hidden / heads"),
            f!("intermediate", WIDTH, req, "dense MLP intermediate size"),
            f!("vocab", VOCAB, req, "vocabulary size"),
            f!("max_context", Ty::Quantity(D::Tokens, default_range(D::Tokens).whole()), req, "max_position_embeddings"),
            f!("attention", Ty::Enum(&["mha", "gqa", "mla"]), "attention kind; inferred from kv_heads when absent"),
            f!("experts", EXPERTS, "routed experts (MoE); 0 or absent for a dense model"),
            f!("experts_per_token", HEADS, "routed experts per token (top-k)"),
            f!("shared_experts", EXPERTS, "shared experts per MoE layer"),
            f!("moe_intermediate", WIDTH, "intermediate size of one expert"),
            f!("dense_layers", LAYERS0, "leading layers with a dense MLP instead of experts"),
            f!("moe_layer_step", LAYERS, "every n-th layer is MoE (Llama 4 Maverick: 2)"),
            f!("kv_lora_rank", WIDTH, "MLA latent KV rank"),
            f!("q_lora_rank", WIDTH, "MLA query rank"),
            f!("qk_rope_head_dim", WIDTH, "MLA rotary head dimension"),
            f!("qk_nope_head_dim", WIDTH, "MLA non-rotary head dimension"),
            f!("v_head_dim", WIDTH, "MLA value head dimension"),
            f!("sliding_window", Ty::Quantity(D::Tokens, default_range(D::Tokens).whole()), "sliding-window size of the windowed layers"),
            f!("sliding_layers", LAYERS0, "how many layers use the sliding window"),
            f!("tied_embeddings", Ty::Bool, "LM head shares the embedding matrix"),
            f!("dtype", Ty::Enum(WEIGHT_DTYPES), "checkpoint dtype"),
            f!("weights", Ty::Enum(WEIGHT_DTYPES), "weight precision when served (quantization)"),
            f!("kv_cache", Ty::Enum(KV_DTYPES), "KV-cache dtype when served"),
            f!("prequantized", Ty::Bool, "the checkpoint is already quantized to `weights` (vLLM reads its quantization config)"),
            f!("layer_pattern", FREE_TEXT, "per-layer kinds, e.g. \"(3 linear, full) × 16\": full, sliding, linear, mamba, none or compressedN, each optionally `+dense`/`+moe`/`+none`; an FFN alone (`dense`, `moe`) is a block without attention"),
            f!("sliding_kv_heads", HEADS, "KV heads of the sliding-window layers when they differ from the full layers'"),
            f!("sliding_head_dim", WIDTH, "head size of the sliding-window layers when it differs"),
            f!("linear_key_heads", HEADS, "linear-attention (Gated DeltaNet) key heads (linear_num_key_heads)"),
            f!("linear_value_heads", HEADS, "linear-attention value heads (linear_num_value_heads)"),
            f!("linear_key_dim", WIDTH, "linear-attention key head size (linear_key_head_dim)"),
            f!("linear_value_dim", WIDTH, "linear-attention value head size (linear_value_head_dim)"),
            f!("linear_conv_kernel", CONV_KERNEL, "linear-attention causal-conv width (linear_conv_kernel_dim)"),
            f!("mamba_heads", HEADS, "Mamba-2 heads (mamba_num_heads)"),
            f!("mamba_head_dim", WIDTH, "Mamba-2 head size (mamba_head_dim)"),
            f!("mamba_state", WIDTH, "Mamba-2 SSM state size (ssm_state_size)"),
            f!("mamba_groups", HEADS, "Mamba-2 B/C groups (n_groups)"),
            f!("mamba_conv_kernel", CONV_KERNEL, "Mamba-2 causal-conv width (conv_kernel)"),
            f!("state_dtype", Ty::Enum(&["auto", "bf16", "fp16", "fp32"]), "dtype of the recurrent (SSM) state; `auto` = the model's dtype"),
            f!("indexer_head_dim", WIDTH, "sparse-attention indexer key size (index_head_dim; DeepSeek V3.2, GLM-5)"),
            f!("indexer_heads", HEADS, "sparse-attention indexer heads (index_n_heads)"),
            f!("shared_expert_intermediate", WIDTH, "intermediate size of a shared expert when it differs from moe_intermediate"),
            f!("ungated_mlp", Ty::Bool, "MLPs and experts have no gate (ReLU²: up and down only)"),
            f!("encoder_parameters", Ty::Quantity(D::Ratio, Range::closed(0.0, 1e15)), "parameters of vision/audio encoders and projectors, e.g. `0.4B`"),
            f!("attention_weights", Ty::Enum(WEIGHT_DTYPES), "format of the attention and mixer weights when it differs from `weights` (mixed precision)"),
            f!("expert_weights", Ty::Enum(WEIGHT_DTYPES), "format of the routed experts when it differs from `weights`"),
            f!("mlp_weights", Ty::Enum(WEIGHT_DTYPES), "format of dense MLPs and shared experts when it differs from `weights`"),
            f!("unquantized_layers", LAYERS0, "leading layers the checkpoint keeps wholly in `dtype`"),
            f!("unquantized_mixer_layers", Ty::List(&LAYERS0), "layers (0-based) whose attention or mixer the checkpoint keeps in `dtype`"),
            f!("quant_group", Ty::Int { min: 1, max: 1 << 20 }, "weights per quantization scale (AWQ/GPTQ/INT4 group size)"),
            f!("weight_block", Ty::List(&WIDTH), "block-FP8 checkpoints: `[block_n, block_k]`, the output × input tile each weight scale covers (`weight_block_size` in `quantization_config`, e.g. `[128, 128]`); vLLM needs each TP shard of a weight to hold whole blocks (E0411)"),
            f!("layer_intermediate", Ty::List(&LAYERS0), "each layer's dense MLP intermediate size, in order, when they differ (NAS models: DeciLM / Nemotron Super and Ultra `block_configs`; 0 for a layer without an MLP); `intermediate` is then the largest"),
            f!("mtp_layers", Ty::Int { min: 0, max: 16 }, "multi-token-prediction layers the checkpoint ships beyond `layers` (num_nextn_predict_layers, mtp_num_hidden_layers); vLLM loads them only as the draft of `speculative = { method = mtp }`"),
            f!("mrope", Ty::Bool, "positions are multimodal rotary embeddings (M-RoPE: `mrope_section` in the config's rope parameters; Qwen3-VL, Qwen3.5); vLLM 0.33 serves no such model as a `draft_model`"),
        ],
    },
    KindSchema {
        kind: Kind::Workload,
        doc: "The traffic: request lengths and either an arrival rate or a fixed concurrency.",
        fields: &[
            f!("prompt", q(D::Tokens), req, "mean input length"),
            f!("output", q(D::Tokens), req, "mean output length"),
            f!("rate", q(D::RequestRate), "arrival rate"),
            f!("concurrency", Ty::Int { min: 1, max: 1 << 24 }, "requests in flight (closed loop)"),
            f!("requests", Ty::Int { min: 1, max: 1 << 30 }, "requests in a finite run (a benchmark): a closed loop's first wave arrives at once and passes the front end one request at a time, an overloaded open loop's backlog is bounded; unset: steady state"),
            f!("prefix_reuse", Ty::Quantity(D::Ratio, Range::closed(0.0, 1.0)), "share of each prompt vLLM's prefix cache already holds (multi-turn chat, repeated documents): those tokens are not prefilled again, which cuts TTFT and prefill work; each running request still holds its whole context in the KV cache. Needs prefix caching (vLLM's default; dic emits `--enable-prefix-caching`)"),
            f!("shared_prefix", Ty::Quantity(D::Tokens, default_range(D::Tokens).whole()), "leading prompt tokens every request shares (a system prompt, a RAG template): prefilled once, and their KV blocks held once for all running requests, so more requests fit"),
        ],
    },
    KindSchema {
        kind: Kind::Slo,
        doc: "Service levels owed: latency bounds with percentiles, and throughput floors.",
        fields: &[
            f!("ttft", Ty::Bound(D::Time), "time to first token, e.g. `ttft.p95 <= 800 ms`"),
            f!("tpot", Ty::Bound(D::Time), "time per output token after the first"),
            f!("itl", Ty::Bound(D::Time), "inter-token latency"),
            f!("e2e", Ty::Bound(D::Time), "end-to-end request latency"),
            f!("throughput", Ty::Bound(D::TokenRate), "output tokens per second, e.g. `throughput >= 5000 tokens/s`"),
            f!("request_rate", Ty::Bound(D::RequestRate), "completed requests per second"),
        ],
    },
    KindSchema {
        kind: Kind::Deploy,
        doc: "A deployment: which model on which cluster for which workload and SLO, with which layout and engine.",
        fields: &[
            f!("model", Ty::Ref(Kind::Model), req, "the model served"),
            f!("cluster", Ty::Ref(Kind::Cluster), req, "the hardware"),
            f!("workload", Ty::Ref(Kind::Workload), "the traffic"),
            f!("slo", Ty::Ref(Kind::Slo), "the service levels"),
            f!("layout", Ty::Layout, req, "`auto`, or `tp N × pp N × dp N` with optional `ep`, `dcp N`, `pcp N`; or disaggregated prefill/decode, `{ prefill = tp 4, decode = tp 2 × dp 2 }` (each pool's `dp` its replicas)"),
            f!("engine", Ty::Engine, "the serving engine and its options, e.g. `vllm { gpu_memory_utilization = 0.90 }`"),
            f!("model_source", Ty::Str(TextRule::Argument), "what `vllm serve` loads: a Hugging Face repository or a path (default: the model's `hf`)"),
            f!("served_model_name", Ty::Str(TextRule::Argument), "the name clients use (default: the deployment's name)"),
            f!("image", Ty::Str(TextRule::Image), concat!("container image (default ", dic_default!(image), "; on AMD GPUs ", dic_default!(rocm_image), ")")),
            f!("namespace", Ty::Str(TextRule::DnsLabel), "Kubernetes namespace written into the objects and the kustomization (default: none, so `kubectl apply -n` chooses)"),
            f!("hf_token_secret", Ty::Str(TextRule::DnsLabel), "Kubernetes Secret holding the Hugging Face token under key `token` (default `hf-token`); referenced, never inlined"),
            f!("api_key_secret", Ty::Str(TextRule::DnsLabel), "Kubernetes Secret holding the API key clients must send, under key `api-key` (vLLM reads it as VLLM_API_KEY); referenced, never inlined. Scripts take VLLM_API_KEY from the node's environment"),
            f!("preflight_image", Ty::Str(TextRule::Image), "image with a `dic` built with `--features nccl`: adds a preflight Job (k8s/preflight) that runs `dic run --backend nccl` on the deployment's nodes and fails unless NCCL used the fabric the plan assumes; apply it and wait for it before the serving objects"),
            f!("pod", Ty::Block(POD_FIELDS), "Kubernetes pod settings: `cpu`, `memory`, `node_selector`, `tolerations`, `runtime_class`, `service_account`, `image_pull_secrets`, `labels`, `annotations`, `priority_class`"),
            f!("model_cache", Ty::Block(MODEL_CACHE_FIELDS), "where pods keep the checkpoint: `{ pvc = \"models\" }` (a PersistentVolumeClaim, mounted read-only; with `size` dic creates it and a download Job), `{ host_path = \"/mnt/models\" }`, or the default, an emptyDir on the node's disk sized for the checkpoint"),
            f!("autoscale", Ty::Block(AUTOSCALE_FIELDS), "scale replicas on vLLM's queue (`vllm:num_requests_waiting`): `{ min = 1, max = 4, waiting = 5, via = hpa }` (HorizontalPodAutoscaler through a custom-metrics adapter) or `via = keda` with `prometheus = \"http://…\"`"),
            f!("monitoring", Ty::Enum(&["none", "podmonitor", "servicemonitor"]), "a Prometheus Operator object that scrapes vLLM's /metrics (default none)"),
            f!("node_group", Ty::Ref(Kind::Node), "the cluster's node group the deployment runs on (by its node); default: the first group with room"),
            f!("allowed_weights", Ty::List(&Ty::Enum(WEIGHT_DTYPES)), "weight formats the planner may choose (default: the model's own)"),
            f!("allowed_kv_cache", Ty::List(&Ty::Enum(KV_DTYPES)), "KV-cache dtypes the planner may choose (default: the model's own)"),
            f!("calibration", Ty::Block(CALIBRATION_FIELDS), "correction factors fitted on this deployment's own engines by `dic observe --calibrate`: `{ step_time = 1.12, prefill_time = 0.95 }` multiply dic's predicted decode step and prompt prefill (each 0.5 to 2; see docs/observe.md)"),
            f!("lora", Ty::Block(LORA_FIELDS), "serve LoRA adapters beside the base model (`--enable-lora`): `{ adapters = [\"sql=org/sql-lora\"], max_loras = 4, max_rank = 16 }`; vLLM reserves room for `max_loras` adapters of `max_rank` on every linear layer (experts included) at start-up, which the memory check counts, and every step runs the punica kernels' shrink and expand on each adapted layer, reading the slots of the distinct adapters in the batch: the step time counts them (Punica, S-LoRA: the cost grows with the adapters a batch mixes)"),
            f!("kv_offload", Ty::Block(KV_OFFLOAD_FIELDS), "offload KV blocks the GPU evicts to CPU memory, where a later prompt with the same prefix finds them (`--kv-offloading-size`): `{ size = 200 GiB, backend = native }`; more prefix-cache room for long shared prefixes and multi-turn chat, at a PCIe transfer per hit"),
            f!("routing", Ty::Block(ROUTING_FIELDS), "on Kubernetes, route through a Gateway API inference pool: `{ gateway = \"inference-gateway\" }` emits an InferencePool over the model-server pods, llm-d's endpoint picker scoring them (queue, KV-cache use, prefix-cache hits) and an HTTPRoute from the Gateway; with a disaggregated layout, llm-d's P/D routing: one pool over both pools' pods, the picker's prefill and decode profiles and its routing sidecar on the decode pods (in place of dic's router); default: a plain Service"),
        ],
    },
];

/// The fields of a deployment's `pod = { … }` block.
pub static POD_FIELDS: &[Field] = &[
    f!("cpu", Ty::Int { min: 1, max: 4096 }, "CPU cores each vLLM pod requests (default 4 + 4 per GPU; no limit)"),
    f!("memory", q(D::Bytes), "memory each vLLM pod requests and is limited to (default 16 GiB + 8 GiB per GPU + /dev/shm + CPU offload)"),
    f!("node_selector", Ty::List(&Ty::Str(TextRule::Label)), "node labels the pods require, as \"key=value\""),
    f!("tolerations", Ty::List(&Ty::Str(TextRule::Toleration)), "taints the pods tolerate, as `kubectl taint` writes them: \"key=value:NoSchedule\", \"key:NoExecute\", \"key\""),
    f!("runtime_class", Ty::Str(TextRule::DnsLabel), "RuntimeClass, e.g. \"nvidia\" on GPU Operator setups that need it"),
    f!("service_account", Ty::Str(TextRule::DnsLabel), "ServiceAccount the pods run as"),
    f!("image_pull_secrets", Ty::List(&Ty::Str(TextRule::DnsLabel)), "Secrets for pulling a private image"),
    f!("labels", Ty::List(&Ty::Str(TextRule::Label)), "extra pod labels, as \"key=value\""),
    f!("annotations", Ty::List(&Ty::Str(TextRule::Annotation)), "extra pod annotations, as \"key=value\""),
    f!("priority_class", Ty::Str(TextRule::DnsLabel), "PriorityClass of the pods"),
];

/// The fields of a disaggregated layout, `layout = { prefill = …, decode = … }`.
pub static POOL_LAYOUT_FIELDS: &[Field] = &[
    f!("prefill", Ty::Layout, req, "the prefill pool's layout: `tp N × pp N × dp N` (`dp`: its replicas); its engines compute prompts and hand their KV cache to the decode pool over NIXL"),
    f!("decode", Ty::Layout, req, "the decode pool's layout: `tp N × pp N × dp N` (`dp`: its replicas); its engines receive the prompts' KV cache and generate"),
    f!("prefill_node_group", Ty::Ref(Kind::Node), "the cluster's node group the prefill pool runs on (default: the deployment's `node_group`, else the first with room)"),
    f!("decode_node_group", Ty::Ref(Kind::Node), "the cluster's node group the decode pool runs on (default: the deployment's `node_group`, else the first with room)"),
];

/// The fields of the engine's `speculative = { … }` block (vLLM's `SpeculativeConfig`).
pub static SPECULATIVE_FIELDS: &[Field] = &[
    f!("method", Ty::Enum(SPEC_METHODS), req, "how drafts are made: `eagle3` or `eagle` (a small head trained on the target, from `source`), `mtp` (the checkpoint's own multi-token-prediction layers, `mtp_layers`), `ngram` (prompt lookup, no weights) or `draft_model` (a smaller model of the same tokenizer, `draft`)"),
    f!("source", Ty::Str(TextRule::Argument), "the EAGLE head's checkpoint (a Hugging Face repository or a path); `--spec-model`"),
    f!("draft", Ty::Ref(Kind::Model), "with `method = draft_model`: the draft model (its weights and KV cache share the GPUs; its `hf` is `--spec-model`)"),
    f!("tokens", Ty::Int { min: 1, max: 16 }, concat!("tokens drafted per step (`--spec-tokens`, default ", vllm_default!(spec_tokens), ")")),
    f!("acceptance", Ty::Quantity(D::Ratio, Range::closed(0.0, 0.99)), concat!("vLLM's acceptance rate on your traffic: accepted ÷ drafted tokens (`vllm:spec_decode_num_accepted_tokens` ÷ `vllm:spec_decode_num_draft_tokens`), so a step advances 1 + acceptance × tokens (default: eagle3 ", dic_default!(acceptance_eagle3), "%, eagle ", dic_default!(acceptance_eagle), "%, mtp ", dic_default!(acceptance_mtp), "%, draft_model ", dic_default!(acceptance_draft_model), "%, ngram ", dic_default!(acceptance_ngram), "%; they vary with the task: measure)")),
];

/// vLLM 0.33's speculative methods that dic models (`--spec-method` choices).
pub const SPEC_METHODS: &[&str] = &["eagle3", "eagle", "mtp", "ngram", "draft_model"];

/// The fields of a deployment's `model_cache = { … }` block.
pub static MODEL_CACHE_FIELDS: &[Field] = &[
    f!("pvc", Ty::Str(TextRule::DnsLabel), "a PersistentVolumeClaim holding the Hugging Face cache, mounted read-only (ReadOnlyMany or ReadWriteMany for multi-node groups)"),
    f!("size", q(D::Bytes), "with `pvc`: dic creates the claim (ReadWriteMany) of this size and a Job that downloads the checkpoint into it; alone: the emptyDir's size"),
    f!("storage_class", Ty::Str(TextRule::DnsLabel), "StorageClass of the claim dic creates"),
    f!("host_path", Ty::Str(TextRule::AbsolutePath), "a folder on every node holding the Hugging Face cache (pre-staged, mounted read-only)"),
];

/// The fields of a deployment's `calibration { … }` block (`dic observe --calibrate`).
pub static CALIBRATION_FIELDS: &[Field] = &[
    f!(
        "step_time",
        Ty::Quantity(D::Ratio, Range::closed(0.5, 2.0)),
        "measured decode step ÷ dic's prediction at the same load (default 1)"
    ),
    f!(
        "prefill_time",
        Ty::Quantity(D::Ratio, Range::closed(0.5, 2.0)),
        "measured prompt prefill ÷ dic's prediction at the same load (default 1)"
    ),
];

/// The fields of a deployment's `autoscale = { … }` block.
pub static AUTOSCALE_FIELDS: &[Field] = &[
    f!("min", Ty::Int { min: 0, max: 1 << 20 }, "fewest replicas (groups); 0 only with KEDA (scale to zero)"),
    f!("max", Ty::Int { min: 1, max: 1 << 20 }, req, "most replicas (groups); the cluster must hold them"),
    f!("waiting", Ty::Int { min: 1, max: 1 << 20 }, concat!("requests waiting per replica (vllm:num_requests_waiting) that add a replica (default ", dic_default!(autoscale_waiting), ", production-stack's)")),
    f!("via", Ty::Enum(&["hpa", "keda"]), "HorizontalPodAutoscaler on a custom pod metric (needs a metrics adapter such as prometheus-adapter) or a KEDA ScaledObject querying Prometheus (default hpa)"),
    f!("prometheus", Ty::Str(TextRule::Url), "Prometheus server KEDA queries, e.g. \"http://prometheus.monitoring:9090\""),
];

/// The network profile kind (kept after the main table for readability).
pub static NETWORK_SCHEMA: KindSchema = KindSchema {
    kind: Kind::Network,
    doc: "How pods reach the scale-out fabric: the RDMA device resource, capabilities, annotations and NCCL environment.",
    fields: &[
        f!("resource", Ty::Str(TextRule::ResourceName), "extended resource for the RDMA device, e.g. \"rdma/ib\" or \"vpc.amazonaws.com/efa\""),
        f!("resource_count", Ty::Int { min: 0, max: 1 << 20 }, "how many of that resource each pod requests (default 1)"),
        f!("capabilities", Ty::List(&Ty::Str(TextRule::Capability)), "Linux capabilities to add, e.g. [\"IPC_LOCK\"]"),
        f!("annotations", Ty::List(&Ty::Str(TextRule::Annotation)), "pod annotations as \"key=value\""),
        f!("env", Ty::List(&Ty::Str(TextRule::EnvAssignment)), "environment as \"NAME=value\", e.g. \"NCCL_IB_HCA=mlx5\""),
        f!("socket_ifname", Ty::Str(TextRule::Interface), "interface for NCCL/Gloo bootstrap traffic, as the hosts name it (`ip -br link`: `enp…`, `bond0`); unset, NCCL and Gloo choose (pods outside the host network use `eth0`, the pod's interface); required with `host_network`"),
        f!("host_network", Ty::Bool, "run pods in the host's network namespace"),
    ],
};

mod engine_table;
pub use engine_table::{ALL2ALL_BACKENDS, CUDAGRAPH_MODES, VLLM_OPTIONS};

/// Layout factors and what they mean.
pub static LAYOUT_FACTORS: &[(&str, &str)] = &[
    (
        "tp",
        "tensor parallel size: shards every layer; belongs inside one NVLink domain",
    ),
    ("pp", "pipeline stages: splits the layers; may cross nodes"),
    ("dp", "data-parallel replicas (a MoE model's are the ranks of one vLLM engine: they share the experts and step together)"),
    (
        "ep",
        "expert parallelism for MoE layers (EP size = tp × dp)",
    ),
    (
        "dcp",
        "decode context parallel size: shards the KV cache across TP ranks",
    ),
    ("pcp", "prefill context parallel size: adds ranks"),
];

mod deploy_blocks;
pub use deploy_blocks::{KV_OFFLOAD_FIELDS, LORA_FIELDS, ROUTING_FIELDS};
