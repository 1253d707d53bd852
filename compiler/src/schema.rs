//! The schema of every definition kind: which fields exist, their types, which are
//! required, and one line of documentation each.
//!
//! One declarative table drives the checker (unknown fields, types, units, required
//! fields), `dic explain`, and the language server (completion and hover). Adding a
//! field means adding a row here and reading it in [`crate::check`].

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
    /// A quantity of this dimension. Tokens and ratios also accept a plain number.
    Quantity(Dimension),
    Int {
        min: i64,
        max: i64,
    },
    Bool,
    Str,
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
    /// An SLO bound: `<=`/`>=` and a quantity; the key may carry a percentile
    /// (`ttft.p95`).
    Bound(Dimension),
}

impl Ty {
    pub fn describe(&self) -> String {
        match self {
            Ty::Quantity(d) => d.describe().to_string(),
            Ty::Int { .. } => "a whole number".into(),
            Ty::Bool => "`true` or `false`".into(),
            Ty::Str => "a string".into(),
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
            Ty::Layout => "`auto` or a layout like `tp 8 × pp 2 × dp 2`".into(),
            Ty::Engine => "an engine like `vllm { … }`".into(),
            Ty::Bound(d) => format!("a bound like `<= {}`", d.describe()),
        }
    }
}

#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub ty: Ty,
    pub required: bool,
    pub doc: &'static str,
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
    ($name:literal, $ty:expr, req, $doc:literal) => {
        Field {
            name: $name,
            ty: $ty,
            required: true,
            doc: $doc,
        }
    };
    ($name:literal, $ty:expr, $doc:literal) => {
        Field {
            name: $name,
            ty: $ty,
            required: false,
            doc: $doc,
        }
    };
}

use Dimension as D;

const COUNT: Ty = Ty::Int {
    min: 1,
    max: 1 << 40,
};
const COUNT0: Ty = Ty::Int {
    min: 0,
    max: 1 << 40,
};

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
            f!("names", Ty::List(&Ty::Str), "names as `nvidia-smi` prints them, matched case- and separator-insensitively"),
            f!("vendor", Ty::Enum(&["nvidia", "amd"]), "the vendor"),
            f!("architecture", Ty::Enum(&["volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna3"]), "the chip generation"),
            f!("memory", Ty::Quantity(D::Bytes), req, "device memory"),
            f!("memory_bandwidth", Ty::Quantity(D::Bandwidth), req, "device memory bandwidth"),
            f!("bf16", Ty::Quantity(D::FlopRate), req, "dense BF16 tensor throughput"),
            f!("fp16", Ty::Quantity(D::FlopRate), "dense FP16 tensor throughput (defaults to bf16)"),
            f!("fp8", Ty::Quantity(D::FlopRate), "dense FP8 tensor throughput, where supported"),
            f!("fp4", Ty::Quantity(D::FlopRate), "dense FP4 tensor throughput, where supported"),
            f!("int8", Ty::Quantity(D::FlopRate), "dense INT8 tensor throughput"),
            f!("scale_up", Ty::Ref(Kind::Link), "the GPU's own scale-up link (NVLink generation), if any"),
            f!("pcie", Ty::Ref(Kind::Link), "the host link"),
        ],
    },
    KindSchema {
        kind: Kind::Link,
        doc: "An interconnect: per-direction bandwidth and per-message latency (the α and 1/β of the α-β model).",
        fields: &[
            f!("type", Ty::Enum(LINK_TYPES), req, "what kind of link this is"),
            f!("bandwidth", Ty::Quantity(D::Bandwidth), req, "bandwidth per direction (per GPU for scale-up links, per port for NICs)"),
            f!("latency", Ty::Quantity(D::Time), req, "per-message latency α"),
            f!("generation", Ty::Str, "generation or product name"),
        ],
    },
    KindSchema {
        kind: Kind::Node,
        doc: "A machine (or a cloud instance, or a compute tray): its GPUs, how they are connected, its NICs and its price.",
        fields: &[
            f!("gpus", Ty::CountOf(Kind::Gpu), req, "how many GPUs of which kind, e.g. `8 × h100_sxm`"),
            f!("scale_up", Ty::Ref(Kind::Link), "the GPU-to-GPU link inside the node (NVSwitch, NVLink); PCIe when absent"),
            f!("scale_up_domain", COUNT, "GPUs that share one NVLink domain (72 on GB200 NVL72, spanning trays); defaults to the node's GPUs when it has a scale-up link"),
            f!("nics", Ty::CountOf(Kind::Link), "scale-out NICs, e.g. `8 × ib_ndr`"),
            f!("price", Ty::Quantity(D::MoneyRate), "on-demand price of the whole node"),
            f!("provider", Ty::Str, "who sells it (`aws`, `gcp`, `azure`, `nvidia` …)"),
            f!("network", Ty::Ref(Kind::Network), "how pods reach the scale-out fabric (RDMA resource, NCCL env)"),
            f!("cpu_memory", Ty::Quantity(D::Bytes), "host memory"),
        ],
    },
    KindSchema {
        kind: Kind::Cluster,
        doc: "The hardware a deployment may use: node groups, the fabric between nodes, and the price.",
        fields: &[
            f!("nodes", Ty::Groups(Kind::Node), req, "node groups, e.g. `2 × p5_48xlarge`"),
            f!("fabric", Ty::Ref(Kind::Link), "the scale-out link between nodes (defaults to the nodes' NICs)"),
            f!("price", Ty::Quantity(D::MoneyRate), "price per node, overriding the node's catalog price"),
            f!("region", Ty::Str, "where it is"),
            f!("network", Ty::Ref(Kind::Network), "network profile, overriding the nodes'"),
        ],
    },
    KindSchema {
        kind: Kind::Model,
        doc: "A model's architecture: the numbers memory and compute need, checked against its config.json.",
        fields: &[
            f!("hf", Ty::Str, "the Hugging Face repository, e.g. \"meta-llama/Llama-3.1-70B-Instruct\""),
            f!("parameters", Ty::Quantity(D::Ratio), req, "total parameter count, e.g. `70.6B`"),
            f!("layers", COUNT, req, "hidden layers (num_hidden_layers)"),
            f!("hidden", COUNT, req, "hidden size"),
            f!("heads", COUNT, req, "attention heads"),
            f!("kv_heads", COUNT, "key/value heads (GQA); defaults to heads"),
            f!("head_dim", COUNT, "per-head dimension; defaults to hidden / heads"),
            f!("intermediate", COUNT, req, "dense MLP intermediate size"),
            f!("vocab", COUNT, req, "vocabulary size"),
            f!("max_context", Ty::Quantity(D::Tokens), req, "max_position_embeddings"),
            f!("attention", Ty::Enum(&["mha", "gqa", "mla"]), "attention kind; inferred from kv_heads when absent"),
            f!("experts", COUNT0, "routed experts (MoE); 0 or absent for a dense model"),
            f!("experts_per_token", COUNT, "routed experts per token (top-k)"),
            f!("shared_experts", COUNT0, "shared experts per MoE layer"),
            f!("moe_intermediate", COUNT, "intermediate size of one expert"),
            f!("dense_layers", COUNT0, "leading layers with a dense MLP instead of experts"),
            f!("moe_layer_step", COUNT, "every n-th layer is MoE (Llama 4 Maverick: 2)"),
            f!("kv_lora_rank", COUNT, "MLA latent KV rank"),
            f!("q_lora_rank", COUNT, "MLA query rank"),
            f!("qk_rope_head_dim", COUNT, "MLA rotary head dimension"),
            f!("qk_nope_head_dim", COUNT, "MLA non-rotary head dimension"),
            f!("v_head_dim", COUNT, "MLA value head dimension"),
            f!("sliding_window", Ty::Quantity(D::Tokens), "sliding-window size of the windowed layers"),
            f!("sliding_layers", COUNT0, "how many layers use the sliding window"),
            f!("tied_embeddings", Ty::Bool, "LM head shares the embedding matrix"),
            f!("dtype", Ty::Enum(WEIGHT_DTYPES), "checkpoint dtype"),
            f!("weights", Ty::Enum(WEIGHT_DTYPES), "weight precision when served (quantization)"),
            f!("kv_cache", Ty::Enum(KV_DTYPES), "KV-cache dtype when served"),
            f!("prequantized", Ty::Bool, "the checkpoint is already quantized to `weights` (vLLM reads its quantization config)"),
        ],
    },
    KindSchema {
        kind: Kind::Workload,
        doc: "The traffic: request lengths and either an arrival rate or a fixed concurrency.",
        fields: &[
            f!("prompt", Ty::Quantity(D::Tokens), req, "mean input length"),
            f!("output", Ty::Quantity(D::Tokens), req, "mean output length"),
            f!("rate", Ty::Quantity(D::RequestRate), "arrival rate"),
            f!("concurrency", COUNT, "requests in flight (closed loop)"),
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
            f!("layout", Ty::Layout, req, "`auto`, or `tp N × pp N × dp N` with optional `ep`, `dcp N`, `pcp N`"),
            f!("engine", Ty::Engine, "the serving engine and its options, e.g. `vllm { gpu_memory_utilization = 0.90 }`"),
            f!("model_source", Ty::Str, "what `vllm serve` loads: a Hugging Face repository or a path (default: the model's `hf`)"),
            f!("served_model_name", Ty::Str, "the name clients use (default: the deployment's name)"),
            f!("image", Ty::Str, "container image (default vllm/vllm-openai:v0.33.0)"),
            f!("namespace", Ty::Str, "Kubernetes namespace (default `default`)"),
            f!("hf_token_secret", Ty::Str, "Kubernetes Secret holding the Hugging Face token under key `token` (default `hf-token`); referenced, never inlined"),
            f!("preflight_image", Ty::Str, "image with the `dic` binary: adds a preflight Job that runs `dic run` (the NCCL runtime) on the deployment's nodes before vLLM starts"),
            f!("allowed_weights", Ty::List(&Ty::Enum(WEIGHT_DTYPES)), "weight formats the planner may choose (default: the model's own)"),
            f!("allowed_kv_cache", Ty::List(&Ty::Enum(KV_DTYPES)), "KV-cache dtypes the planner may choose (default: the model's own)"),
        ],
    },
];

/// The network profile kind (kept after the main table for readability).
pub static NETWORK_SCHEMA: KindSchema = KindSchema {
    kind: Kind::Network,
    doc: "How pods reach the scale-out fabric: the RDMA device resource, capabilities, annotations and NCCL environment.",
    fields: &[
        f!("resource", Ty::Str, "extended resource for the RDMA device, e.g. \"rdma/ib\" or \"vpc.amazonaws.com/efa\""),
        f!("resource_count", Ty::Int { min: 0, max: 1 << 20 }, "how many of that resource each pod requests (default 1)"),
        f!("capabilities", Ty::List(&Ty::Str), "Linux capabilities to add, e.g. [\"IPC_LOCK\"]"),
        f!("annotations", Ty::List(&Ty::Str), "pod annotations as \"key=value\""),
        f!("env", Ty::List(&Ty::Str), "environment as \"NAME=value\", e.g. \"NCCL_IB_HCA=mlx5\""),
        f!("socket_ifname", Ty::Str, "interface for NCCL/Gloo bootstrap traffic (default eth0)"),
        f!("host_network", Ty::Bool, "run pods in the host's network namespace"),
    ],
};

/// Options of the `vllm { … }` engine block.
pub static VLLM_OPTIONS: &[Field] = &[
    f!(
        "gpu_memory_utilization",
        Ty::Quantity(D::Ratio),
        "fraction of device memory vLLM may use (default 0.92)"
    ),
    f!(
        "max_model_len",
        Ty::Quantity(D::Tokens),
        "longest request (prompt + output)"
    ),
    f!(
        "max_num_seqs",
        COUNT,
        "most requests in one batch, per DP rank"
    ),
    f!(
        "max_num_batched_tokens",
        Ty::Quantity(D::Tokens),
        "token budget per step"
    ),
    f!("block_size", COUNT, "tokens per KV block (default 16)"),
    f!("enforce_eager", Ty::Bool, "no CUDA graphs"),
    f!(
        "kv_cache_memory",
        Ty::Quantity(D::Bytes),
        "fixed KV-cache size per GPU (skips utilization-based sizing)"
    ),
    f!("enable_prefix_caching", Ty::Bool, "prefix caching"),
    f!(
        "cpu_offload",
        Ty::Quantity(D::Bytes),
        "weights kept in CPU memory per GPU"
    ),
    f!(
        "launcher",
        Ty::Enum(&["native", "ray"]),
        "multi-node launch: vLLM's native `--nnodes` (default) or Ray"
    ),
    f!(
        "port",
        Ty::Int { min: 1, max: 65535 },
        "API server port (default 8000)"
    ),
    f!(
        "activation_memory",
        Ty::Quantity(D::Bytes),
        "override dic's estimate of the profile run's peak activations per GPU"
    ),
    f!(
        "non_torch_memory",
        Ty::Quantity(D::Bytes),
        "override dic's estimate of non-torch memory (NCCL, cuBLAS) per GPU"
    ),
    f!(
        "cuda_graph_memory",
        Ty::Quantity(D::Bytes),
        "override dic's estimate of CUDA-graph memory per GPU"
    ),
];

/// Layout factors and what they mean.
pub static LAYOUT_FACTORS: &[(&str, &str)] = &[
    (
        "tp",
        "tensor parallel size: shards every layer; belongs inside one NVLink domain",
    ),
    ("pp", "pipeline stages: splits the layers; may cross nodes"),
    ("dp", "data-parallel replicas"),
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
