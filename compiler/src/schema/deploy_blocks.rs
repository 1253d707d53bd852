//! The fields of the deployment blocks that route, adapt and offload: `routing = { … }`
//! (a Gateway API inference pool), `lora = { … }` (LoRA adapters) and `kv_offload = { … }`
//! (KV blocks in CPU memory).

use super::{q, Field, Ty, D};
use crate::text_rules::TextRule;

/// The fields of a deployment's `routing = { … }` block (the Gateway API Inference
/// Extension's InferencePool and llm-d's endpoint picker; `ir::gateway`).
pub static ROUTING_FIELDS: &[Field] = &[
    f!("gateway", Ty::Str(TextRule::DnsLabel), req, "the Gateway (gateway.networking.k8s.io) whose HTTPRoute sends traffic to the deployment's InferencePool; dic does not create it"),
    f!("gateway_namespace", Ty::Str(TextRule::DnsLabel), "the Gateway's namespace, when not the deployment's (it must allow routes from the deployment's namespace)"),
    f!("queue_weight", Ty::Int { min: 0, max: 100 }, concat!("weight of the endpoint picker's `queue-scorer` (fewest waiting requests; default ", dic_default!(queue_weight), ")")),
    f!("kv_weight", Ty::Int { min: 0, max: 100 }, concat!("weight of its `kv-cache-utilization-scorer` (most free KV cache; default ", dic_default!(kv_weight), ")")),
    f!("prefix_weight", Ty::Int { min: 0, max: 100 }, concat!("weight of its `prefix-cache-scorer` (the server likeliest to hold the prompt's prefix; default ", dic_default!(prefix_weight), " when the workload sets `prefix_reuse` or `shared_prefix`, else 0: not loaded)")),
    f!("epp_image", Ty::Str(TextRule::Image), concat!("the endpoint picker's image (default ", dic_default!(epp_image), ", llm-d's)")),
];

/// The fields of a deployment's `lora = { … }` block (vLLM 0.33's `LoRAConfig`,
/// `vllm/config/lora.py`).
pub static LORA_FIELDS: &[Field] = &[
    f!("adapters", Ty::List(&Ty::Str(TextRule::Argument)), "adapters loaded at start-up, as \"name=path\" (a Hugging Face repository or a folder): `--lora-modules`; clients ask for one by its name as the model"),
    f!("max_loras", Ty::Int { min: 1, max: 256 }, "adapters one batch may mix (`--max-loras`, vLLM's default 1): each takes a slot of GPU memory on every linear layer, and a decode step reads the slots of each distinct adapter it mixes"),
    f!("max_rank", Ty::Int { min: 1, max: 512 }, "the largest adapter rank served (`--max-lora-rank`, vLLM's default 16): one of 1, 8, 16, 32, 64, 128, 256, 320, 512; the slots are sized for it"),
    f!("max_cpu_loras", Ty::Int { min: 1, max: 4096 }, "adapters kept in CPU memory, at least `max_loras` (`--max-cpu-loras`, default `max_loras`)"),
];

/// The fields of a deployment's `kv_offload = { … }` block (vLLM 0.33's
/// `CacheConfig.kv_offloading_size` / `kv_offloading_backend`, `vllm/config/cache.py`).
pub static KV_OFFLOAD_FIELDS: &[Field] = &[
    f!("size", q(D::Bytes), req, "CPU memory for offloaded KV blocks per engine, summed over its TP ranks (`--kv-offloading-size`, in GiB on vLLM's command line)"),
    f!("backend", Ty::Enum(&["native", "lmcache"]), "vLLM's own CPU offloading (`native`, the default) or LMCache's connector (`--kv-offloading-backend`; vLLM 0.33 connects it to an LMCache server, which dic does not deploy: W0506)"),
];
